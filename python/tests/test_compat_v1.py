"""Seed 003's TensorFlow 1 script through ``ferroflow.compat.v1``: placeholders, tf.layers,
Adam with a global step, Saver, then restoring from the .meta alone."""
import numpy as np
import pytest

import ferroflow.compat.v1 as tf


class Config:
    num_inputs, num_outputs, num_units, num_layers = 20, 3, 32, 2
    dropout_rate, learning_rate = 0.2, 1e-2


class Model:
    """The article's model class, word for word but for the data."""

    def __init__(self, config):
        self.config = config
        self.x = tf.placeholder(dtype=tf.float32, shape=[None, config.num_inputs], name='inputs')
        self.y = tf.placeholder(dtype=tf.float32, shape=[None, config.num_outputs], name='outputs')
        self.is_training = tf.placeholder(dtype=tf.bool, name='is_training')
        outputs = self.build(self.x)
        self.loss = tf.reduce_mean(-tf.reduce_sum(self.y * tf.log(outputs + 10e-8), 1))
        y_label = tf.argmax(self.y, 1)
        outputs_label = tf.argmax(outputs, 1)
        correct = tf.equal(y_label, outputs_label)
        self.accuracy = tf.reduce_mean(tf.cast(correct, tf.float32), name='accuracy')
        global_step = tf.train.get_or_create_global_step()
        optimizer = tf.train.AdamOptimizer(config.learning_rate)
        self.train_op = optimizer.minimize(self.loss, global_step=global_step)
        self.global_step = global_step

    def build(self, x):
        layer = tf.layers.dropout(x, rate=self.config.dropout_rate, training=self.is_training)
        for l in range(self.config.num_layers):
            layer = tf.layers.dense(layer, self.config.num_units, tf.nn.relu,
                                    kernel_initializer=tf.truncated_normal_initializer(stddev=0.1),
                                    name='layer_{}'.format(l))
            layer = tf.layers.dropout(layer, rate=self.config.dropout_rate, training=self.is_training,
                                      name='layer_dropout_{}'.format(l))
        out = tf.layers.dense(layer, self.config.num_outputs, tf.nn.softmax,
                              kernel_initializer=tf.truncated_normal_initializer(stddev=0.1), name='out_layer')
        return out


def data(n, seed):
    centers = np.random.default_rng(451).standard_normal((3, 20)).astype(np.float32) * 2
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, n)
    x = centers[labels] + rng.standard_normal((n, 20)).astype(np.float32)
    return x, np.eye(3, dtype=np.float32)[labels]


def test_train_save_and_restore_from_the_meta_graph(tmp_path):
    tf.reset_default_graph()
    config = Config()
    x_train, y_train = data(512, 0)
    x_test, y_test = data(256, 1)
    model = Model(config)
    saver = tf.train.Saver()
    ckpt = str(tmp_path / "ckpt" / "model")
    losses = []
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for epoch in range(3):
            for i in range(0, 512, 64):
                _, loss = sess.run([model.train_op, model.loss],
                                   feed_dict={model.x: x_train[i:i + 64], model.y: y_train[i:i + 64],
                                              model.is_training: True})
                losses.append(float(loss))
            saver.save(sess, ckpt, global_step=model.global_step)
        acc = sess.run(model.accuracy, feed_dict={model.x: x_test, model.y: y_test, model.is_training: False})
        step = sess.run(model.global_step)  # a variable, as the article fetches it
        saver.save(sess, str(tmp_path / "class" / "model.ckpt"), step)
    assert step == 24
    assert losses[-1] < losses[0] * 0.5, losses
    assert acc > 0.9, acc
    # Restore into the model class rebuilt (the article's first way).
    tf.reset_default_graph()
    model = Model(config)
    saver = tf.train.Saver()
    with tf.Session() as sess:
        saver.restore(sess, tf.train.latest_checkpoint(str(tmp_path / "class")))
        again = sess.run(model.accuracy, feed_dict={model.x: x_test, model.y: y_test, model.is_training: False})
    assert again == pytest.approx(acc)
    # Restore with only the .meta and the checkpoint, as the article does.
    tf.reset_default_graph()
    with tf.Session() as sess:
        ckpt_path = tf.train.latest_checkpoint(str(tmp_path / "ckpt"))
        assert ckpt_path.endswith("model-24")
        saver = tf.train.import_meta_graph(ckpt_path + '.meta')
        saver.restore(sess, ckpt_path)
        g = tf.get_default_graph()
        restored = sess.run("accuracy:0", feed_dict={
            g.get_tensor_by_name('inputs:0'): x_test, g.get_tensor_by_name('outputs:0'): y_test,
            g.get_tensor_by_name('is_training:0'): False})
    assert restored == pytest.approx(acc)


def test_missing_checkpoint_and_bad_restore_raise(tmp_path):
    tf.reset_default_graph()
    assert tf.train.latest_checkpoint(str(tmp_path)) is None
    v = tf.get_variable("v", [2], initializer=tf.zeros_initializer())
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        with pytest.raises(tf.errors.OpError):
            saver.restore(sess, str(tmp_path / "nothing-here"))
    del v

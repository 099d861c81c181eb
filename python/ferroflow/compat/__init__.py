"""TensorFlow's compatibility modules: ``ferroflow.compat.v1`` is ``tf.compat.v1``."""
from ferroflow.compat import v1  # noqa: F401

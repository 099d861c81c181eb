//! Keras application architectures written as Keras 3 configs, layer for layer as
//! `keras.applications` builds them, so ferroflow can make the `.keras` file of a model that
//! would otherwise take Keras to write (with random weights: nothing is downloaded).
use serde_json::{json, Value};

use crate::functional::{initializer, Functional, Tensor};
use ferroflow_train::efficientnet::{EfficientNetConfig, B0_STAGES, SE_RATIO};

fn conv_init() -> Value {
    initializer(
        "VarianceScaling",
        json!({"scale": 2.0, "mode": "fan_out", "distribution": "truncated_normal", "seed": null}),
    )
}

fn dense_init() -> Value {
    initializer(
        "VarianceScaling",
        json!({"scale": 1.0 / 3.0, "mode": "fan_out", "distribution": "uniform", "seed": null}),
    )
}

/// `imagenet_utils.correct_pad`: the zero padding before a strided `valid` convolution that
/// centres it as `same` would, for a `size × size` input.
fn correct_pad(size: usize, kernel: usize) -> Value {
    let adjust = 1 - size % 2;
    let c = kernel / 2;
    json!([[c - adjust, c], [c - adjust, c]])
}

#[allow(clippy::too_many_arguments)]
fn conv(
    f: &mut Functional,
    x: &Tensor,
    name: &str,
    filters: usize,
    kernel: usize,
    strides: usize,
    padding: &str,
    activation: &str,
    bias: bool,
) -> Tensor {
    f.layer(
        "Conv2D",
        name,
        json!({"filters": filters, "kernel_size": [kernel, kernel], "strides": [strides, strides], "padding": padding,
               "data_format": "channels_last", "dilation_rate": [1, 1], "groups": 1, "activation": activation,
               "use_bias": bias, "kernel_initializer": conv_init(),
               "bias_initializer": initializer("Zeros", json!({}))}),
        &[x],
    )
}

fn bn(f: &mut Functional, x: &Tensor, name: &str) -> Tensor {
    f.layer(
        "BatchNormalization",
        name,
        json!({"axis": -1, "momentum": 0.99, "epsilon": 0.001, "center": true, "scale": true}),
        &[x],
    )
}

fn act(f: &mut Functional, x: &Tensor, name: &str, activation: &str) -> Tensor {
    f.layer("Activation", name, json!({"activation": activation}), &[x])
}

/// `keras.applications.EfficientNetB0(include_top=False, weights=None,
/// input_shape=(size, size, 3))`: the base model's config (a Functional named
/// `efficientnetb0`), with `drop_connect_rate` for the blocks' dropout (Keras's 0.2).
pub fn efficientnet_b0(size: usize, drop_connect_rate: f64) -> Value {
    let cfg = EfficientNetConfig::b0(1);
    let mut f = Functional::new("efficientnetb0");
    let input = f.input("input_layer", &[size, size, 3]);
    let mut x = f.layer("Rescaling", "rescaling", json!({"scale": 1.0 / 255.0, "offset": 0.0}), &[&input]);
    x = f.layer(
        "Normalization",
        "normalization",
        json!({"axis": -1, "mean": null, "variance": null, "invert": false}),
        &[&x],
    );
    x = f.layer(
        "ZeroPadding2D",
        "stem_conv_pad",
        json!({"padding": correct_pad(size, 3), "data_format": "channels_last"}),
        &[&x],
    );
    x = conv(&mut f, &x, "stem_conv", cfg.round_filters(32), 3, 2, "valid", "linear", false);
    let mut hw = size.div_ceil(2);
    x = bn(&mut f, &x, "stem_bn");
    x = act(&mut f, &x, "stem_activation", "swish");
    let blocks: usize = B0_STAGES.iter().map(|s| cfg.round_repeats(s.repeats)).sum();
    let mut b = 0;
    for (i, stage) in B0_STAGES.iter().enumerate() {
        let mut filters_in = cfg.round_filters(stage.filters_in);
        let filters_out = cfg.round_filters(stage.filters_out);
        for j in 0..cfg.round_repeats(stage.repeats) {
            let strides = if j == 0 { stage.strides } else { 1 };
            if j > 0 {
                filters_in = filters_out;
            }
            let name = format!("block{}{}_", i + 1, (b'a' + j as u8) as char);
            let drop = drop_connect_rate * b as f64 / blocks as f64;
            let inputs = x.clone();
            let filters = filters_in * stage.expand_ratio;
            if stage.expand_ratio != 1 {
                x = conv(&mut f, &x, &format!("{name}expand_conv"), filters, 1, 1, "same", "linear", false);
                x = bn(&mut f, &x, &format!("{name}expand_bn"));
                x = act(&mut f, &x, &format!("{name}expand_activation"), "swish");
            }
            let pad = if strides == 2 {
                let p = correct_pad(hw, stage.kernel);
                x = f.layer(
                    "ZeroPadding2D",
                    &format!("{name}dwconv_pad"),
                    json!({"padding": p, "data_format": "channels_last"}),
                    &[&x],
                );
                hw = hw.div_ceil(2);
                "valid"
            } else {
                "same"
            };
            x = f.layer(
                "DepthwiseConv2D",
                &format!("{name}dwconv"),
                json!({"kernel_size": [stage.kernel, stage.kernel], "strides": [strides, strides], "padding": pad,
                       "data_format": "channels_last", "dilation_rate": [1, 1], "depth_multiplier": 1, "activation": "linear",
                       "use_bias": false, "depthwise_initializer": conv_init(),
                       "bias_initializer": initializer("Zeros", json!({}))}),
                &[&x],
            );
            x = bn(&mut f, &x, &format!("{name}bn"));
            x = act(&mut f, &x, &format!("{name}activation"), "swish");
            let filters_se = ((filters_in as f64 * SE_RATIO) as usize).max(1);
            let se = f.layer(
                "GlobalAveragePooling2D",
                &format!("{name}se_squeeze"),
                json!({"data_format": "channels_last", "keepdims": false}),
                &[&x],
            );
            let se = f.layer("Reshape", &format!("{name}se_reshape"), json!({"target_shape": [1, 1, filters]}), &[&se]);
            let se = conv(&mut f, &se, &format!("{name}se_reduce"), filters_se, 1, 1, "same", "swish", true);
            let se = conv(&mut f, &se, &format!("{name}se_expand"), filters, 1, 1, "same", "sigmoid", true);
            x = f.layer("Multiply", &format!("{name}se_excite"), json!({}), &[&x, &se]);
            x = conv(&mut f, &x, &format!("{name}project_conv"), filters_out, 1, 1, "same", "linear", false);
            x = bn(&mut f, &x, &format!("{name}project_bn"));
            if strides == 1 && filters_in == filters_out {
                if drop > 0.0 {
                    x = f.layer(
                        "Dropout",
                        &format!("{name}drop"),
                        json!({"rate": drop, "noise_shape": [null, 1, 1, 1], "seed": null}),
                        &[&x],
                    );
                }
                x = f.layer("Add", &format!("{name}add"), json!({}), &[&x, &inputs]);
            }
            b += 1;
        }
    }
    x = conv(&mut f, &x, "top_conv", cfg.round_filters(1280), 1, 1, "same", "linear", false);
    x = bn(&mut f, &x, "top_bn");
    x = act(&mut f, &x, "top_activation", "swish");
    f.config(&[&x])
}

/// Seed 001's fine-tuning model as the Keras guide writes it: `inputs` (`size × size × 3`
/// pixels 0–255) → `base(inputs, training=False)` → global average pooling → dropout 0.2 →
/// `Dense(classes)` logits; `base` a model config such as [`efficientnet_b0`]'s.
pub fn transfer_model(name: &str, base: Value, size: usize, classes: usize) -> Value {
    let mut f = Functional::new(name);
    let x = f.input("image", &[size, size, 3]);
    let h = f.call(base, &[&x], json!({"training": false}));
    let h = f.layer(
        "GlobalAveragePooling2D",
        "avg_pool",
        json!({"data_format": "channels_last", "keepdims": false}),
        &[&h],
    );
    let h = f.layer("Dropout", "top_dropout", json!({"rate": 0.2, "noise_shape": null, "seed": null}), &[&h]);
    let y = f.layer(
        "Dense",
        "predictions",
        json!({"units": classes, "activation": "linear", "use_bias": true, "kernel_initializer": dense_init(),
               "bias_initializer": initializer("Zeros", json!({}))}),
        &[&h],
    );
    f.config(&[&y])
}

//! An EfficientNet-B0-style classifier with Keras's block structure
//! (`keras.applications.EfficientNetB0`): a stride-2 3×3 stem convolution, seven stages of
//! MBConv blocks (1×1 expansion, depthwise convolution, squeeze-and-excitation, 1×1
//! projection, each convolution followed by batch normalization, swish activations, an
//! identity residual where a block keeps its shape), then a 1×1 head convolution, global
//! average pooling, dropout and a dense layer.
//!
//! [`EfficientNetConfig`] scales it as Keras does — channels by `width_coefficient` (rounded
//! to multiples of 8), block repeats by `depth_coefficient` (rounded up) — and can keep only
//! the first `stages` stages and take a smaller input, so a reduced model trains in minutes
//! on two cores. Names follow Keras (`stem_conv`, `block2a/expand_conv`, `block2a/dwconv`,
//! `block2a/se/reduce`, `top_conv`, `predictions`), with `/` for Keras's `_`.
//!
//! Differences from Keras's model: no built-in rescaling/normalization layers (the input
//! pipeline scales pixels), strided convolutions use `SAME` padding (equal to Keras's explicit
//! `correct_pad` zero padding for even input sizes), and no stochastic depth (Keras's
//! `drop_connect_rate`) inside the blocks.
use ferroflow_graph::Output;

use crate::layers::{self, Activation, Padding};
use crate::{Builder, Distribution, FanMode, Initializer, Result, TrainError};
use ferroflow_ops::RawOps;

/// One stage of MBConv blocks (Keras's `DEFAULT_BLOCKS_ARGS` entry).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StageArgs {
    /// Depthwise kernel size.
    pub kernel: usize,
    /// Blocks in the stage (before depth scaling).
    pub repeats: usize,
    /// Input channels of the stage's first block (before width scaling).
    pub filters_in: usize,
    /// Output channels (before width scaling).
    pub filters_out: usize,
    /// Expansion ratio of the 1×1 expansion convolution (1: none).
    pub expand_ratio: usize,
    /// Stride of the stage's first block.
    pub strides: usize,
}

/// EfficientNet-B0's stages (squeeze-and-excitation ratio 0.25 throughout).
pub const B0_STAGES: [StageArgs; 7] = [
    StageArgs { kernel: 3, repeats: 1, filters_in: 32, filters_out: 16, expand_ratio: 1, strides: 1 },
    StageArgs { kernel: 3, repeats: 2, filters_in: 16, filters_out: 24, expand_ratio: 6, strides: 2 },
    StageArgs { kernel: 5, repeats: 2, filters_in: 24, filters_out: 40, expand_ratio: 6, strides: 2 },
    StageArgs { kernel: 3, repeats: 3, filters_in: 40, filters_out: 80, expand_ratio: 6, strides: 2 },
    StageArgs { kernel: 5, repeats: 3, filters_in: 80, filters_out: 112, expand_ratio: 6, strides: 1 },
    StageArgs { kernel: 5, repeats: 4, filters_in: 112, filters_out: 192, expand_ratio: 6, strides: 2 },
    StageArgs { kernel: 3, repeats: 1, filters_in: 192, filters_out: 320, expand_ratio: 6, strides: 1 },
];

/// The squeeze-and-excitation ratio of every block.
pub const SE_RATIO: f64 = 0.25;

/// How to scale EfficientNet-B0.
///
/// `#[non_exhaustive]`: other crates build one from its constructors ([`EfficientNetConfig::b0`],
/// [`EfficientNetConfig::reduced`]) and its `with_*` setters, so fields can be added without
/// breaking them.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct EfficientNetConfig {
    /// Channel multiplier (B0: 1.0).
    pub width_coefficient: f64,
    /// Block-repeat multiplier (B0: 1.0).
    pub depth_coefficient: f64,
    /// Stages of [`B0_STAGES`] kept, 1 to 7 (B0: 7); the head follows the last kept stage.
    pub stages: usize,
    /// Dropout rate before the classifier (B0: 0.2).
    pub dropout_rate: f64,
    /// Output classes.
    pub classes: usize,
    /// Batch normalization momentum (Keras: 0.99).
    pub bn_momentum: f64,
    /// Batch normalization epsilon (Keras: 1e-3).
    pub bn_epsilon: f64,
    /// Op seed offset of the weight initializers (with the graph seed).
    pub seed: Option<i64>,
}

impl EfficientNetConfig {
    /// Sets [`EfficientNetConfig::width_coefficient`].
    pub fn with_width_coefficient(mut self, width_coefficient: f64) -> Self {
        self.width_coefficient = width_coefficient;
        self
    }

    /// Sets [`EfficientNetConfig::depth_coefficient`].
    pub fn with_depth_coefficient(mut self, depth_coefficient: f64) -> Self {
        self.depth_coefficient = depth_coefficient;
        self
    }

    /// Sets [`EfficientNetConfig::stages`].
    pub fn with_stages(mut self, stages: usize) -> Self {
        self.stages = stages;
        self
    }

    /// Sets [`EfficientNetConfig::dropout_rate`].
    pub fn with_dropout_rate(mut self, dropout_rate: f64) -> Self {
        self.dropout_rate = dropout_rate;
        self
    }

    /// Sets [`EfficientNetConfig::classes`].
    pub fn with_classes(mut self, classes: usize) -> Self {
        self.classes = classes;
        self
    }

    /// Sets [`EfficientNetConfig::bn_momentum`].
    pub fn with_bn_momentum(mut self, bn_momentum: f64) -> Self {
        self.bn_momentum = bn_momentum;
        self
    }

    /// Sets [`EfficientNetConfig::bn_epsilon`].
    pub fn with_bn_epsilon(mut self, bn_epsilon: f64) -> Self {
        self.bn_epsilon = bn_epsilon;
        self
    }

    /// Sets [`EfficientNetConfig::seed`].
    pub fn with_seed(mut self, seed: Option<i64>) -> Self {
        self.seed = seed;
        self
    }
}

impl EfficientNetConfig {
    /// EfficientNet-B0 (input 224×224 in Keras; any even size works).
    pub fn b0(classes: usize) -> EfficientNetConfig {
        EfficientNetConfig {
            width_coefficient: 1.0,
            depth_coefficient: 1.0,
            stages: 7,
            dropout_rate: 0.2,
            classes,
            bn_momentum: 0.99,
            bn_epsilon: 1e-3,
            seed: None,
        }
    }

    /// A reduced model: channels scaled by `width`, repeats by `depth`, the first `stages`
    /// stages.
    pub fn reduced(classes: usize, width: f64, depth: f64, stages: usize) -> EfficientNetConfig {
        EfficientNetConfig { width_coefficient: width, depth_coefficient: depth, stages, ..Self::b0(classes) }
    }

    /// Keras's `round_filters`: `filters · width` to the nearest multiple of 8 (at least 8),
    /// never more than 10% below.
    pub fn round_filters(&self, filters: usize) -> usize {
        let divisor = 8.0f64;
        let f = filters as f64 * self.width_coefficient;
        let mut new = divisor.max(((f + divisor / 2.0) / divisor).floor() * divisor);
        if new < 0.9 * f {
            new += divisor;
        }
        new as usize
    }

    /// Keras's `round_repeats`: `ceil(repeats · depth)`.
    pub fn round_repeats(&self, repeats: usize) -> usize {
        (self.depth_coefficient * repeats as f64).ceil() as usize
    }

    fn conv_init(&self) -> Initializer {
        Initializer::VarianceScaling {
            scale: 2.0,
            mode: FanMode::FanOut,
            distribution: Distribution::Normal,
            seed: self.seed,
        }
    }
}

/// One MBConv block (Keras's `block`) from `filters_in` to `filters_out` channels with the
/// stage's kernel and expansion and the given stride, its layers under `name/`
/// (`expand_conv`, `expand_bn`, `dwconv`, `bn`, `se/reduce`, `se/expand`, `project_conv`,
/// `project_bn`); the identity residual is added when the block keeps its shape.
#[allow(clippy::too_many_arguments)]
pub fn mbconv(
    b: &Builder,
    x: Output,
    training: Output,
    config: &EfficientNetConfig,
    filters_in: usize,
    filters_out: usize,
    stage: &StageArgs,
    strides: usize,
    name: &str,
) -> Result<Output> {
    let b = b.name_scope(name);
    let init = config.conv_init();
    let (momentum, eps) = (config.bn_momentum, config.bn_epsilon);
    let filters = filters_in * stage.expand_ratio;
    let swish = |h: Output, n: &str| Activation::Swish.apply(&b.scope().name_scope(n), h);
    let mut h = x;
    if stage.expand_ratio != 1 {
        h = layers::conv2d_no_bias(&b, h, filters, [1, 1], [1, 1], Padding::Same, &init, "expand_conv")?;
        h = layers::batch_normalization(&b, h, training, momentum, eps, "expand_bn")?;
        h = swish(h, "expand_activation")?;
    }
    let (k, s) = ([stage.kernel; 2], [strides; 2]);
    h = layers::depthwise_conv2d(&b, h, k, s, Padding::Same, 1, &init, "dwconv")?;
    h = layers::batch_normalization(&b, h, training, momentum, eps, "bn")?;
    h = swish(h, "activation")?;
    let filters_se = ((filters_in as f64 * SE_RATIO) as usize).max(1);
    h = layers::squeeze_excitation(&b, h, filters_se, &init, "se")?;
    h = layers::conv2d_no_bias(&b, h, filters_out, [1, 1], [1, 1], Padding::Same, &init, "project_conv")?;
    h = layers::batch_normalization(&b, h, training, momentum, eps, "project_bn")?;
    if strides == 1 && filters_in == filters_out {
        h = b.scope().with_name("add").add_v2(h, x)?;
    }
    Ok(h)
}

/// Builds the model on NHWC float input `x` (height and width even at each stride-2 stage
/// for Keras's padding) under `training` (a bool scalar switching batch normalization and
/// dropout); returns the logits `[batch, classes]` (the softmax is the loss's).
pub fn efficientnet(b: &Builder, x: Output, training: Output, config: &EfficientNetConfig) -> Result<Output> {
    if config.stages == 0 || config.stages > B0_STAGES.len() {
        return Err(TrainError::Invalid(format!("EfficientNet has 1 to 7 stages, got {}", config.stages)));
    }
    if config.classes == 0 {
        return Err(TrainError::Invalid("EfficientNet needs at least one class".into()));
    }
    let init = config.conv_init();
    let (momentum, eps) = (config.bn_momentum, config.bn_epsilon);
    let stem = config.round_filters(32);
    let mut h = layers::conv2d_no_bias(b, x, stem, [3, 3], [2, 2], Padding::Same, &init, "stem_conv")?;
    h = layers::batch_normalization(b, h, training, momentum, eps, "stem_bn")?;
    h = Activation::Swish.apply(&b.scope().name_scope("stem_activation"), h)?;
    for (i, stage) in B0_STAGES[..config.stages].iter().enumerate() {
        let mut filters_in = config.round_filters(stage.filters_in);
        let filters_out = config.round_filters(stage.filters_out);
        for j in 0..config.round_repeats(stage.repeats) {
            let strides = if j == 0 { stage.strides } else { 1 };
            let name = format!("block{}{}", i + 1, (b'a' + (j % 26) as u8) as char);
            h = mbconv(b, h, training, config, filters_in, filters_out, stage, strides, &name)?;
            filters_in = filters_out;
        }
    }
    let top = config.round_filters(1280);
    h = layers::conv2d_no_bias(b, h, top, [1, 1], [1, 1], Padding::Same, &init, "top_conv")?;
    h = layers::batch_normalization(b, h, training, momentum, eps, "top_bn")?;
    h = Activation::Swish.apply(&b.scope().name_scope("top_activation"), h)?;
    h = layers::global_average_pooling2d(b, h, false, "avg_pool")?;
    if config.dropout_rate > 0.0 {
        h = layers::dropout(b, h, config.dropout_rate, training, config.seed, "top_dropout")?;
    }
    let dense_init = Initializer::VarianceScaling {
        scale: 1.0 / 3.0,
        mode: FanMode::FanOut,
        distribution: Distribution::Uniform,
        seed: config.seed,
    };
    layers::dense(b, h, config.classes, Activation::Linear, &dense_init, "predictions")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_and_repeats_round_as_keras() {
        let b0 = EfficientNetConfig::b0(5);
        assert_eq!(
            [32, 16, 24, 40, 80, 112, 192, 320, 1280].map(|f| b0.round_filters(f)),
            [32, 16, 24, 40, 80, 112, 192, 320, 1280]
        );
        // EfficientNet-B2 (width 1.1, depth 1.2) in Keras: stem 32, head 1408; repeats 2, 3, 4, 5.
        let b2 = EfficientNetConfig::reduced(5, 1.1, 1.2, 7);
        assert_eq!((b2.round_filters(32), b2.round_filters(1280), b2.round_filters(112)), (32, 1408, 120));
        assert_eq!([1, 2, 3, 4].map(|r| b2.round_repeats(r)), [2, 3, 4, 5]);
        let small = EfficientNetConfig::reduced(5, 0.25, 0.5, 3);
        assert_eq!([32, 16, 24, 40, 1280].map(|f| small.round_filters(f)), [8, 8, 8, 16, 320]);
    }
}

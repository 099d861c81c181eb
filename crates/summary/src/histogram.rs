//! TensorFlow's histogram summaries (`tf.compat.v1.summary.histogram`, the `HistogramSummary`
//! op): values counted into TensorFlow's default bucket edges — ±1e-12 growing by 10% up to
//! ±1e20, then ±DBL_MAX, and 0 — and encoded as a `HistogramProto` the way TensorFlow does
//! (`Histogram::EncodeToProto` without preserved zero buckets: each run of empty buckets
//! collapses into its last one).
use std::sync::OnceLock;

use ferroflow_proto::HistogramProto;

/// TensorFlow's default bucket upper limits, ascending.
pub fn default_bucket_limits() -> &'static [f64] {
    static LIMITS: OnceLock<Vec<f64>> = OnceLock::new();
    LIMITS.get_or_init(|| {
        let mut pos = Vec::new();
        let mut v = 1.0e-12;
        while v < 1.0e20 {
            pos.push(v);
            v *= 1.1;
        }
        pos.push(f64::MAX);
        let mut out: Vec<f64> = pos.iter().rev().map(|v| -v).collect();
        out.push(0.0);
        out.extend(pos);
        out
    })
}

/// Counts of values in TensorFlow's default buckets, with their min, max, sum and sum of
/// squares.
#[derive(Debug, Clone)]
pub struct Histogram {
    min: f64,
    max: f64,
    num: f64,
    sum: f64,
    sum_squares: f64,
    buckets: Vec<f64>,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram::new()
    }
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Histogram {
        let limits = default_bucket_limits();
        Histogram {
            min: limits[limits.len() - 1],
            max: -f64::MAX,
            num: 0.0,
            sum: 0.0,
            sum_squares: 0.0,
            buckets: vec![0.0; limits.len()],
        }
    }

    /// Counts one value (in the first bucket whose limit is above it, as TensorFlow's
    /// `upper_bound`).
    pub fn add(&mut self, value: f64) {
        let limits = default_bucket_limits();
        let b = limits.partition_point(|&l| l <= value).min(limits.len() - 1);
        self.buckets[b] += 1.0;
        self.min = self.min.min(value);
        self.max = self.max.max(value);
        self.num += 1.0;
        self.sum += value;
        self.sum_squares += value * value;
    }

    /// The histogram as TensorFlow encodes it.
    pub fn to_proto(&self) -> HistogramProto {
        let limits = default_bucket_limits();
        let mut p = HistogramProto {
            min: self.min,
            max: self.max,
            num: self.num,
            sum: self.sum,
            sum_squares: self.sum_squares,
            ..Default::default()
        };
        let mut i = 0;
        while i < self.buckets.len() {
            let (mut end, mut count) = (limits[i], self.buckets[i]);
            i += 1;
            if count <= 0.0 {
                while i < self.buckets.len() && self.buckets[i] <= 0.0 {
                    end = limits[i];
                    count = self.buckets[i];
                    i += 1;
                }
            }
            p.bucket_limit.push(end);
            p.bucket.push(count);
        }
        p
    }
}

/// The histogram of `values` (TensorFlow's `HistogramSummary`, which counts float values as
/// doubles; it rejects NaN and infinities, and so does this).
pub fn histogram(values: impl IntoIterator<Item = f64>) -> Result<HistogramProto, crate::SummaryError> {
    let mut h = Histogram::new();
    for v in values {
        if !v.is_finite() {
            return Err(crate::SummaryError::NotFinite(v));
        }
        h.add(v);
    }
    Ok(h.to_proto())
}

//! Non-max suppression: `NonMaxSuppression` (V1 to V5, soft-NMS in V5) and
//! `CombinedNonMaxSuppression`, selecting exactly the boxes TensorFlow's CPU kernels select,
//! in their order. V1–V5 take candidates from a priority queue ordered by (score, then lower
//! index) — a total order, so any heap gives TensorFlow's sequence. The combined op's queue
//! and final sort compare scores only, so ties fall where libstdc++'s heap and introsort put
//! them; [`StdHeap`] and [`std_sort`] replay those algorithms step for step.
use std::cmp::Ordering;
use std::collections::BinaryHeap;

use ferroflow_tensor::{DType, Tensor};

use crate::stdheap::{make_heap, pop_heap, push_heap_last};
use crate::{check_output, invalid, Inputs, KResult, KernelContext, KernelRegistry, OpKernel, Outputs};

/// TensorFlow's intersection over union of boxes `a` and `b` (`[y1, x1, y2, x2]`, corners in
/// either order), in its order of float operations; 0 when either box is empty.
#[inline]
fn iou(a: &[f32], b: &[f32]) -> f32 {
    // std::min(x, y) is `y < x ? y : x`; std::max(x, y) is `x < y ? y : x`.
    let min = |x: f32, y: f32| if y < x { y } else { x };
    let max = |x: f32, y: f32| if x < y { y } else { x };
    let (ymin_i, xmin_i, ymax_i, xmax_i) = (min(a[0], a[2]), min(a[1], a[3]), max(a[0], a[2]), max(a[1], a[3]));
    let (ymin_j, xmin_j, ymax_j, xmax_j) = (min(b[0], b[2]), min(b[1], b[3]), max(b[0], b[2]), max(b[1], b[3]));
    let area_i = (ymax_i - ymin_i) * (xmax_i - xmin_i);
    let area_j = (ymax_j - ymin_j) * (xmax_j - xmin_j);
    if area_i <= 0.0 || area_j <= 0.0 {
        return 0.0;
    }
    let (iy0, ix0) = (max(ymin_i, ymin_j), max(xmin_i, xmin_j));
    let (iy1, ix1) = (min(ymax_i, ymax_j), min(xmax_i, xmax_j));
    let inter = max(iy1 - iy0, 0.0) * max(ix1 - ix0, 0.0);
    inter / (area_i + area_j - inter)
}

/// A candidate of V1–V5's queue: higher score first, then lower box index.
#[derive(Clone, Copy)]
struct Candidate {
    index: usize,
    score: f32,
    /// The selections already compared against this candidate (soft-NMS re-queues it).
    suppress_begin: usize,
}

impl Ord for Candidate {
    fn cmp(&self, o: &Self) -> Ordering {
        // TensorFlow's `cmp(a, b)` (a below b) is `a.score < b.score || (equal && a.index >
        // b.index)`; scores in the queue are above the threshold, so never NaN.
        self.score.partial_cmp(&o.score).unwrap_or(Ordering::Equal).then_with(|| o.index.cmp(&self.index))
    }
}
impl PartialOrd for Candidate {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl PartialEq for Candidate {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Candidate {}

/// What one NMS run is asked.
struct Nms {
    max_output: usize,
    iou_threshold: f32,
    score_threshold: f32,
    soft_nms_sigma: f32,
}

/// TensorFlow's `DoNonMaxSuppressionOp`: the selected box indices and their (soft-NMS
/// decayed) scores, greedily in order of score. O(n log n) for the queue plus, per
/// candidate popped, one IOU per selection it has not yet been compared with.
fn select(ctx: &KernelContext, boxes: &[f32], scores: &[f32], p: &Nms) -> (Vec<i32>, Vec<f32>) {
    let mut queue: BinaryHeap<Candidate> = scores
        .iter()
        .enumerate()
        .filter(|&(_, &s)| s > p.score_threshold)
        .map(|(index, &score)| Candidate { index, score, suppress_begin: 0 })
        .collect();
    let soft = p.soft_nms_sigma > 0.0;
    let scale = if soft { -0.5 / p.soft_nms_sigma } else { 0.0 };
    let weight = |sim: f32| {
        let w = (scale * sim * sim).exp();
        if soft || sim <= p.iou_threshold {
            w
        } else {
            0.0
        }
    };
    let (mut selected, mut selected_scores) = (Vec::<i32>::new(), Vec::<f32>::new());
    while selected.len() < p.max_output && !ctx.stopped() {
        let Some(mut next) = queue.pop() else { break };
        let original = next.score;
        let mut hard = false;
        let b = &boxes[next.index * 4..next.index * 4 + 4];
        for j in (next.suppress_begin..selected.len()).rev() {
            let s = selected[j] as usize;
            let sim = iou(b, &boxes[s * 4..s * 4 + 4]);
            next.score *= weight(sim);
            if !soft && sim > p.iou_threshold {
                hard = true;
                break;
            }
            if next.score <= p.score_threshold {
                break;
            }
        }
        next.suppress_begin = selected.len();
        if !hard {
            if next.score == original {
                selected.push(next.index as i32);
                selected_scores.push(next.score);
                continue;
            }
            if next.score > p.score_threshold {
                queue.push(next);
            }
        }
    }
    (selected, selected_scores)
}

/// Which NonMaxSuppression version a kernel runs.
#[derive(Clone, Copy, PartialEq, PartialOrd)]
enum Version {
    V1(f32),
    V2,
    V3,
    V4,
    V5,
}

struct NonMaxSuppression {
    version: Version,
    pad: bool,
}

/// A scalar input of the NMS ops as f32 (float inputs; half is not supported).
fn scalar_f32(t: &Tensor, what: &str) -> KResult<f32> {
    if t.rank() != 0 {
        return Err(invalid(format!("{what} must be 0-D, got shape {:?}", t.dims())));
    }
    match t.dtype() {
        DType::Float => Ok(t.as_slice::<f32>()?[0]),
        DType::Double => Ok(t.as_slice::<f64>()?[0] as f32),
        d => Err(invalid(format!("{what} of type {d} is not supported (supported: float)"))),
    }
}

fn scalar_i32(t: &Tensor, what: &str) -> KResult<i32> {
    if t.rank() != 0 {
        return Err(invalid(format!("{what} must be 0-D, got shape {:?}", t.dims())));
    }
    Ok(t.as_slice::<i32>()?[0])
}

impl OpKernel for NonMaxSuppression {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let (boxes, scores) = (&inputs[0], &inputs[1]);
        let max_output = scalar_i32(&inputs[2], "max_output_size")?;
        let iou_threshold = match self.version {
            Version::V1(t) => t,
            _ => scalar_f32(&inputs[3], "iou_threshold")?,
        };
        if !(0.0..=1.0).contains(&iou_threshold) {
            return Err(invalid(format!("iou_threshold must be in [0, 1], got {iou_threshold}")));
        }
        let score_threshold =
            if self.version >= Version::V3 { scalar_f32(&inputs[4], "score_threshold")? } else { f32::MIN };
        let soft_nms_sigma = if self.version == Version::V5 { scalar_f32(&inputs[5], "soft_nms_sigma")? } else { 0.0 };
        if soft_nms_sigma < 0.0 {
            return Err(invalid(format!("soft_nms_sigma must be >= 0, got {soft_nms_sigma}")));
        }
        if boxes.rank() != 2 || boxes.dims()[1] != 4 {
            return Err(invalid(format!("boxes must be [num_boxes, 4], got shape {:?}", boxes.dims())));
        }
        let n = boxes.dims()[0];
        if scores.dims() != [n] {
            return Err(invalid(format!("scores must be [{n}] (one per box), got shape {:?}", scores.dims())));
        }
        if max_output < 0 {
            return Err(invalid(format!("max_output_size must be non-negative, got {max_output}")));
        }
        let max_output = max_output as usize;
        let p = Nms { max_output, iou_threshold, score_threshold, soft_nms_sigma };
        let (mut sel, mut sel_scores) = select(ctx, boxes.as_slice::<f32>()?, scores.as_slice::<f32>()?, &p);
        let valid = sel.len() as i32;
        if self.pad {
            check_output(DType::Int32, &[max_output])?;
            sel.resize(max_output, 0);
            sel_scores.resize(max_output, 0.0);
        }
        let len = sel.len();
        outputs.push(Tensor::from_vec(&[len], sel)?);
        if self.version == Version::V5 {
            outputs.push(Tensor::from_vec(&[len], sel_scores)?);
        }
        if self.version >= Version::V4 {
            outputs.push(Tensor::from_vec(&[], vec![valid])?);
        }
        Ok(())
    }
}

/// A box kept by one class's NMS in `CombinedNonMaxSuppression` (`index` -1: an empty slot).
#[derive(Clone, Copy)]
struct Kept {
    index: i32,
    score: f32,
    class: i32,
    coords: [f32; 4],
}

/// `std::priority_queue` over a `std::vector` as libstdc++ implements it (`push_heap`,
/// `pop_heap`), for a comparison `less(a, b)` ("a has lower priority").
struct StdHeap<T, F> {
    v: Vec<T>,
    less: F,
}

impl<T: Copy, F: Fn(&T, &T) -> bool> StdHeap<T, F> {
    fn push(&mut self, x: T) {
        self.v.push(x);
        push_heap_last(&mut self.v, &self.less);
    }

    fn pop(&mut self) -> Option<T> {
        pop_heap(&mut self.v, &self.less);
        self.v.pop()
    }
}

/// libstdc++'s `std::sort` (introsort: median-of-three quicksort down to 16-element runs, heap
/// sort past 2·log2(n) levels, then insertion sort), so elements equal under `less` end in
/// the order TensorFlow's `std::sort` leaves them.
fn std_sort<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) {
    if v.len() < 2 {
        return;
    }
    let depth = 2 * (usize::BITS - 1 - v.len().leading_zeros()) as usize;
    introsort_loop(v, depth, less);
    if v.len() > 16 {
        insertion_sort(&mut v[..16], less);
        for i in 16..v.len() {
            unguarded_linear_insert(v, i, less);
        }
    } else {
        insertion_sort(v, less);
    }
}

const THRESHOLD: usize = 16;

fn introsort_loop<T: Copy>(mut v: &mut [T], mut depth: usize, less: &impl Fn(&T, &T) -> bool) {
    while v.len() > THRESHOLD {
        if depth == 0 {
            heap_sort(v, less);
            return;
        }
        depth -= 1;
        let cut = partition_pivot(v, less);
        let (lo, hi) = std::mem::take(&mut v).split_at_mut(cut);
        introsort_loop(hi, depth, less);
        v = lo;
    }
}

fn partition_pivot<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) -> usize {
    let (n, mid) = (v.len(), v.len() / 2);
    let (a, b, c) = (1, mid, n - 1);
    let pick = if less(&v[a], &v[b]) {
        if less(&v[b], &v[c]) {
            b
        } else if less(&v[a], &v[c]) {
            c
        } else {
            a
        }
    } else if less(&v[a], &v[c]) {
        a
    } else if less(&v[b], &v[c]) {
        c
    } else {
        b
    };
    v.swap(0, pick);
    // `__unguarded_partition(first + 1, last, first)`.
    let (mut first, mut last) = (1, n);
    loop {
        while less(&v[first], &v[0]) {
            first += 1;
        }
        last -= 1;
        while less(&v[0], &v[last]) {
            last -= 1;
        }
        if first >= last {
            return first;
        }
        v.swap(first, last);
        first += 1;
    }
}

fn heap_sort<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) {
    make_heap(v, less);
    for last in (2..=v.len()).rev() {
        pop_heap(&mut v[..last], less);
    }
}

fn insertion_sort<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) {
    for i in 1..v.len() {
        if less(&v[i], &v[0]) {
            let val = v[i];
            v.copy_within(0..i, 1);
            v[0] = val;
        } else {
            unguarded_linear_insert(v, i, less);
        }
    }
}

fn unguarded_linear_insert<T: Copy>(v: &mut [T], mut last: usize, less: &impl Fn(&T, &T) -> bool) {
    let val = v[last];
    while less(&val, &v[last - 1]) {
        v[last] = v[last - 1];
        last -= 1;
    }
    v[last] = val;
}

/// One class of one image in `CombinedNonMaxSuppression` (TensorFlow's `DoNMSPerClass`):
/// its kept boxes written to `slots`, best first.
#[allow(clippy::too_many_arguments)]
fn nms_per_class(
    class: usize,
    boxes: &[f32],
    scores: &[f32],
    q: usize,
    classes: usize,
    score_threshold: f32,
    iou_threshold: f32,
    slots: &mut [Kept],
) {
    #[derive(Clone, Copy)]
    struct C {
        index: usize,
        score: f32,
    }
    let mut queue = StdHeap { v: Vec::new(), less: |a: &C, b: &C| a.score < b.score };
    let n = scores.len() / classes;
    for index in 0..n {
        let score = scores[index * classes + class];
        if score > score_threshold {
            queue.push(C { index, score });
        }
    }
    let class_box = if q > 1 { class } else { 0 };
    let at = |i: usize| (i * q + class_box) * 4;
    let mut selected: Vec<usize> = Vec::new();
    while selected.len() < slots.len() {
        let Some(next) = queue.pop() else { break };
        let b = &boxes[at(next.index)..at(next.index) + 4];
        if selected.iter().rev().all(|&s| iou(b, &boxes[at(s)..at(s) + 4]) <= iou_threshold) {
            slots[selected.len()] = Kept {
                index: next.index as i32,
                score: next.score,
                class: class as i32,
                coords: [b[0], b[1], b[2], b[3]],
            };
            selected.push(next.index);
        }
    }
}

struct CombinedNonMaxSuppression {
    pad_per_class: bool,
    clip_boxes: bool,
}

impl OpKernel for CombinedNonMaxSuppression {
    fn compute(&self, ctx: &KernelContext, inputs: &mut Inputs, outputs: &mut Outputs) -> KResult<()> {
        let (boxes, scores) = (&inputs[0], &inputs[1]);
        let (&[batch, n, q, four], &[sb, sn, classes]) = (boxes.dims(), scores.dims()) else {
            return Err(invalid(format!(
                "boxes must be 4-D [batch, num_boxes, q, 4] and scores 3-D [batch, num_boxes, num_classes], got \
                 shapes {:?} and {:?}",
                boxes.dims(),
                scores.dims()
            )));
        };
        if q != 1 && q != classes {
            return Err(invalid(format!(
                "third dimension of boxes must be either 1 or num classes ({classes}), got {q}"
            )));
        }
        if four != 4 {
            return Err(invalid(format!("boxes must have 4 columns, got {four}")));
        }
        if sn != n || sb != batch {
            return Err(invalid(format!(
                "scores has incompatible shape {:?} for boxes {:?}",
                scores.dims(),
                boxes.dims()
            )));
        }
        let per_class = scalar_i32(&inputs[2], "max_output_size_per_class")?;
        if per_class <= 0 {
            return Err(invalid(format!("max_output_size_per_class must be positive, got {per_class}")));
        }
        let total = scalar_i32(&inputs[3], "max_total_size")?;
        if total <= 0 {
            return Err(invalid(format!("max_total_size must be > 0, got {total}")));
        }
        let iou_threshold = scalar_f32(&inputs[4], "iou_threshold")?;
        let score_threshold = scalar_f32(&inputs[5], "score_threshold")?;
        if !(0.0..=1.0).contains(&iou_threshold) {
            return Err(invalid(format!("iou_threshold must be in [0, 1], got {iou_threshold}")));
        }
        let size_per_class = (per_class as usize).min(n);
        let slots = size_per_class
            .checked_mul(classes)
            .filter(|&s| s <= i32::MAX as usize)
            .ok_or_else(|| invalid("max_output_size_per_class * num_classes overflows"))?;
        let max_total = (per_class as i64 * classes as i64).min(i32::MAX as i64) as usize;
        let per_batch = if self.pad_per_class { (total as usize).min(max_total) } else { total as usize };
        check_output(DType::Float, &[batch, per_batch, 4])?;
        check_output(DType::Float, &[batch, slots])?;
        let (bd, sd) = (boxes.as_slice::<f32>()?, scores.as_slice::<f32>()?);
        let empty = Kept { index: -1, score: f32::NEG_INFINITY, class: -1, coords: [0.0; 4] };
        let mut kept = vec![empty; batch * slots];
        let (bpb, spb) = (n * q * 4, n * classes);
        if size_per_class > 0 {
            ctx.for_each_chunk_mut(&mut kept, size_per_class, |i, part| {
                let (b, c) = (i / classes, i % classes);
                nms_per_class(
                    c,
                    &bd[b * bpb..(b + 1) * bpb],
                    &sd[b * spb..(b + 1) * spb],
                    q,
                    classes,
                    score_threshold,
                    iou_threshold,
                    part,
                );
            });
        }
        let mut out_boxes = vec![0f32; batch * per_batch * 4];
        let mut out_scores = vec![0f32; batch * per_batch];
        let mut out_classes = vec![0f32; batch * per_batch];
        let mut valid = vec![0i32; batch];
        for b in 0..batch {
            let cands = &mut kept[b * slots..(b + 1) * slots];
            std_sort(cands, &|x: &Kept, y: &Kept| y.score < x.score);
            let count = cands.iter().filter(|c| c.index > -1).count();
            let detections = count.min(per_batch);
            valid[b] = detections as i32;
            for (k, c) in cands[..detections].iter().enumerate() {
                let o = b * per_batch + k;
                for (d, &v) in c.coords.iter().enumerate() {
                    out_boxes[o * 4 + d] = if self.clip_boxes { v.clamp_like_tf() } else { v };
                }
                out_scores[o] = c.score;
                out_classes[o] = c.class as f32;
            }
        }
        outputs.push(Tensor::from_vec(&[batch, per_batch, 4], out_boxes)?);
        outputs.push(Tensor::from_vec(&[batch, per_batch], out_scores)?);
        outputs.push(Tensor::from_vec(&[batch, per_batch], out_classes)?);
        outputs.push(Tensor::from_vec(&[batch], valid)?);
        Ok(())
    }
}

/// `std::max(std::min(v, 1.0f), 0.0f)`, TensorFlow's clip of box coordinates.
trait ClampLikeTf {
    fn clamp_like_tf(self) -> Self;
}
impl ClampLikeTf for f32 {
    #[inline]
    fn clamp_like_tf(self) -> f32 {
        let m = if 1.0 < self { 1.0 } else { self };
        if m < 0.0 {
            0.0
        } else {
            m
        }
    }
}

pub(crate) fn register(r: &mut KernelRegistry) {
    r.register("NonMaxSuppression", "", &[], |d| {
        Ok(Box::new(NonMaxSuppression { version: Version::V1(d.float("iou_threshold")?), pad: false }))
    });
    r.register("NonMaxSuppressionV2", "T", &[DType::Float], |_| {
        Ok(Box::new(NonMaxSuppression { version: Version::V2, pad: false }))
    });
    r.register("NonMaxSuppressionV3", "T", &[DType::Float], |_| {
        Ok(Box::new(NonMaxSuppression { version: Version::V3, pad: false }))
    });
    r.register("NonMaxSuppressionV4", "T", &[DType::Float], |d| {
        Ok(Box::new(NonMaxSuppression { version: Version::V4, pad: d.bool("pad_to_max_output_size")? }))
    });
    r.register("NonMaxSuppressionV5", "T", &[DType::Float], |d| {
        Ok(Box::new(NonMaxSuppression { version: Version::V5, pad: d.bool("pad_to_max_output_size")? }))
    });
    r.register("CombinedNonMaxSuppression", "", &[], |d| {
        Ok(Box::new(CombinedNonMaxSuppression {
            pad_per_class: d.bool("pad_per_class")?,
            clip_boxes: d.bool("clip_boxes")?,
        }))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEYS: [i32; 70] = [
        1, 1, 0, 3, 0, 0, 4, 0, 0, 4, 2, 2, 3, 2, 0, 3, 1, 0, 1, 4, 4, 0, 1, 1, 4, 4, 0, 4, 4, 4, 3, 0, 4, 1, 4, 0, 1,
        1, 1, 4, 2, 1, 3, 0, 0, 0, 3, 2, 1, 1, 2, 3, 0, 2, 0, 3, 3, 3, 0, 3, 4, 2, 3, 2, 0, 0, 1, 4, 2, 3,
    ];

    /// Equal keys come out of libstdc++'s `std::sort` and `std::priority_queue` in an order of
    /// their own; these orders were printed by g++ 12 (`std::sort` with `b.k < a.k`, a
    /// priority queue with `a.k < b.k`, both on `KEYS` tagged with their positions).
    #[test]
    fn sort_and_heap_keep_libstdcxx_tie_order() {
        let sorted = [
            29, 20, 19, 60, 24, 25, 27, 28, 9, 32, 6, 34, 67, 39, 30, 69, 51, 46, 55, 56, 42, 59, 57, 15, 3, 12, 62,
            40, 68, 47, 63, 50, 10, 11, 13, 61, 53, 49, 66, 48, 1, 22, 0, 16, 18, 41, 23, 33, 36, 38, 37, 43, 35, 2, 4,
            5, 65, 64, 7, 8, 14, 26, 17, 58, 44, 21, 45, 54, 31, 52,
        ];
        let popped = [
            6, 24, 27, 29, 60, 28, 25, 9, 19, 20, 39, 32, 34, 67, 30, 62, 59, 56, 57, 55, 3, 51, 12, 46, 42, 69, 15,
            68, 13, 53, 11, 50, 47, 61, 10, 40, 63, 16, 48, 38, 23, 49, 33, 0, 22, 41, 18, 37, 36, 66, 1, 2, 43, 14,
            31, 21, 7, 52, 26, 45, 4, 44, 54, 8, 5, 65, 64, 58, 17, 35,
        ];
        let mut v: Vec<(i32, usize)> = KEYS.iter().enumerate().map(|(i, &k)| (k, i)).collect();
        let mut heap = StdHeap { v: Vec::new(), less: |a: &(i32, usize), b: &(i32, usize)| a.0 < b.0 };
        v.iter().for_each(|&p| heap.push(p));
        let order: Vec<usize> = std::iter::from_fn(|| heap.pop()).map(|p| p.1).collect();
        assert_eq!(order, popped);
        std_sort(&mut v, &|a: &(i32, usize), b: &(i32, usize)| b.0 < a.0);
        assert_eq!(v.iter().map(|p| p.1).collect::<Vec<_>>(), sorted);
    }
}

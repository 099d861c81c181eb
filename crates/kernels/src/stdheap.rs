//! libstdc++'s heap algorithms, step for step, so that what TensorFlow's kernels leave in a
//! heap's order (ties in non-max suppression, `TopKV2` with `sorted=False`) comes out the same.
//! `less(a, b)`: `a` ranks below `b` (the comparison the C++ code passes).

/// libstdc++'s `__push_heap`: `value` moved up from `hole` towards `top`.
pub(crate) fn push_heap<T: Copy>(v: &mut [T], mut hole: usize, top: usize, value: T, less: &impl Fn(&T, &T) -> bool) {
    while hole > top {
        let parent = (hole - 1) / 2;
        if !less(&v[parent], &value) {
            break;
        }
        v[hole] = v[parent];
        hole = parent;
    }
    v[hole] = value;
}

/// libstdc++'s `__adjust_heap` over all of `v`: the hole at `hole` sifted down to a leaf,
/// then `value` pushed up from there.
pub(crate) fn adjust_heap<T: Copy>(v: &mut [T], mut hole: usize, value: T, less: &impl Fn(&T, &T) -> bool) {
    let (len, top) = (v.len(), hole);
    let mut child = hole;
    while child < len.saturating_sub(1) / 2 {
        child = 2 * (child + 1);
        if less(&v[child], &v[child - 1]) {
            child -= 1;
        }
        v[hole] = v[child];
        hole = child;
    }
    if len % 2 == 0 && len >= 2 && child == (len - 2) / 2 {
        child = 2 * (child + 1);
        v[hole] = v[child - 1];
        hole = child - 1;
    }
    push_heap(v, hole, top, value, less);
}

/// `std::make_heap`.
pub(crate) fn make_heap<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) {
    let len = v.len();
    if len < 2 {
        return;
    }
    let mut parent = (len - 2) / 2;
    loop {
        let value = v[parent];
        adjust_heap(v, parent, value, less);
        if parent == 0 {
            return;
        }
        parent -= 1;
    }
}

/// `std::pop_heap`: the top moved to the end, the rest a heap again.
pub(crate) fn pop_heap<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) {
    let len = v.len();
    if len > 1 {
        let value = v[len - 1];
        v[len - 1] = v[0];
        adjust_heap(&mut v[..len - 1], 0, value, less);
    }
}

/// `std::push_heap`: the last element added to the heap before it.
pub(crate) fn push_heap_last<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) {
    if let Some(&value) = v.last() {
        push_heap(v, v.len() - 1, 0, value, less);
    }
}

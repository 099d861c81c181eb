//! The dataset API end to end: order, parallelism, errors, shuffle statistics, caching,
//! budgets, TFRecords and Examples.
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ferroflow_data::example::{example_bytes, parse_example, parse_single_example, FeatureSpec, Parsed};
use ferroflow_data::{Budget, Cardinality, DataError, Dataset, ElementCause, MapOptions, TFRecordWriter, AUTOTUNE};
use ferroflow_tensor::{DType, Tensor};

fn quiet() -> Budget {
    Budget::default().with_log(false)
}

fn ints(ds: &Dataset<Tensor>) -> Vec<i64> {
    ds.iter().unwrap().map(|t| t.unwrap().scalar_value::<i64>().unwrap()).collect()
}

fn range(n: i64) -> Dataset<Tensor> {
    Dataset::range(0, n, 1).unwrap().with_budget(quiet())
}

#[test]
fn slices_map_batch_keep_order_and_types() {
    let x = Tensor::from_vec(&[5, 2], (0..10).map(|v| v as f32).collect()).unwrap();
    let y = Tensor::from_vec(&[5], vec![0i32, 1, 2, 3, 4]).unwrap();
    let ds = Dataset::from_tensor_slices((x, y)).unwrap();
    assert_eq!(ds.cardinality(), Cardinality::Finite(5));
    let ds = ds
        .map(|(x, y): (Tensor, Tensor)| Ok((x, Tensor::scalar(y.scalar_value::<i32>()? * 10))))
        .batch(2, false)
        .unwrap();
    assert_eq!(ds.cardinality(), Cardinality::Finite(3));
    let b: Vec<(Tensor, Tensor)> = ds.iter().unwrap().collect::<Result<_, _>>().unwrap();
    assert_eq!(b.len(), 3);
    assert_eq!(b[0].0.dims(), &[2, 2]);
    assert_eq!(b[1].0.as_slice::<f32>().unwrap(), &[4., 5., 6., 7.]);
    assert_eq!(b[2].1.as_slice::<i32>().unwrap(), &[40]);
    let dropped =
        Dataset::from_tensor_slices(Tensor::from_vec(&[5], vec![1i64; 5]).unwrap()).unwrap().batch(2, true).unwrap();
    assert_eq!(dropped.iter().unwrap().count(), 2);
    assert_eq!(dropped.describe(), "Root::Batch::TensorSlice");
}

#[test]
fn mismatched_slices_and_batches_name_both_shapes() {
    let e = Dataset::from_tensor_slices((
        Tensor::zeros(DType::Float, &[3, 2]).unwrap(),
        Tensor::zeros(DType::Int32, &[4]).unwrap(),
    ))
    .err()
    .unwrap();
    assert!(e.to_string().contains("4 rows") && e.to_string().contains("[3, 2]"), "{e}");
    let ds = range(3)
        .map(|i: Tensor| Ok(Tensor::zeros(DType::Float, &[i.scalar_value::<i64>()? as usize + 1, 3])?))
        .batch(3, false)
        .unwrap();
    let err = ds.iter().unwrap().next().unwrap().unwrap_err().to_string();
    assert!(err.contains("Iterator::Root::Batch"), "{err}");
    assert!(err.contains("[2, 3]") && err.contains("[1, 3]") && err.contains("padded_batch"), "{err}");
}

#[test]
fn parallel_map_keeps_input_order_and_uses_several_threads() {
    let threads = Arc::new(std::sync::Mutex::new(std::collections::HashSet::new()));
    let t2 = threads.clone();
    let ds = range(200).map_parallel(4, move |i: Tensor| {
        t2.lock().unwrap().insert(std::thread::current().id());
        let v = i.scalar_value::<i64>()?;
        // Later elements finish sooner: order must still be kept.
        std::thread::sleep(Duration::from_micros(((200 - v) * 5) as u64));
        Ok(Tensor::scalar(v * 2))
    });
    assert_eq!(ints(&ds), (0..200).map(|v| v * 2).collect::<Vec<_>>());
    assert!(threads.lock().unwrap().len() > 1);
    let sloppy = range(100).map_with(
        &MapOptions::default().with_num_parallel_calls(Some(3)).with_deterministic(false).with_name(None),
        |i: Tensor| Ok(i),
    );
    let mut got = ints(&sloppy);
    got.sort();
    assert_eq!(got, (0..100).collect::<Vec<_>>());
}

/// `(i as float, [i, i+1]) and a string` per element, made slowly in reverse so parallel
/// workers finish out of order.
fn rows(n: i64, parallel: Option<i64>) -> Dataset<(Tensor, Tensor, Tensor)> {
    let f = move |i: Tensor| {
        let v = i.scalar_value::<i64>()?;
        std::thread::sleep(Duration::from_micros(((n - v) * 20) as u64));
        let x = Tensor::from_vec(&[2], vec![v as f32, v as f32 + 1.0])?;
        Ok((x, Tensor::scalar(v as i32), Tensor::from_strings(&[], vec![format!("f{v}").into_bytes()])?))
    };
    match parallel {
        Some(p) => range(n).map_parallel(p, f),
        None => range(n).map(f),
    }
}

#[test]
fn batch_after_a_parallel_map_is_fused_and_equals_the_serial_batches() {
    for (n, size, drop) in [(23, 5, false), (23, 5, true), (20, 5, false), (3, 8, false), (3, 8, true), (40, 1, false)]
    {
        let serial: Vec<_> = rows(n, None).batch(size, drop).unwrap().iter().unwrap().map(|b| b.unwrap()).collect();
        for p in [1, 3, AUTOTUNE] {
            let fused: Vec<_> =
                rows(n, Some(p)).batch(size, drop).unwrap().iter().unwrap().map(|b| b.unwrap()).collect();
            assert_eq!(fused.len(), serial.len(), "n {n} size {size} drop {drop} p {p}");
            for (f, s) in fused.iter().zip(&serial) {
                assert_eq!(f.0.dims(), s.0.dims());
                assert_eq!(f.0.as_slice::<f32>().unwrap(), s.0.as_slice::<f32>().unwrap());
                assert_eq!(f.1.as_slice::<i32>().unwrap(), s.1.as_slice::<i32>().unwrap());
                assert_eq!(f.2.as_strings().unwrap(), s.2.as_strings().unwrap());
            }
        }
    }
    // A bad shape makes its batch an error naming both elements; later batches are intact.
    let ds = range(12)
        .map_parallel(3, |i: Tensor| {
            let v = i.scalar_value::<i64>()?;
            Ok(Tensor::zeros(DType::Float, &[if v == 6 { 3 } else { 2 }])?)
        })
        .batch(4, false)
        .unwrap();
    let got: Vec<_> = ds.iter().unwrap().collect();
    assert_eq!(got.len(), 3);
    let e = got[1].as_ref().unwrap_err().to_string();
    assert!(
        e.contains("Iterator::Root::Batch") && e.contains("element 6") && e.contains("[3]") && e.contains("[2]"),
        "{e}"
    );
    assert!(got[0].is_ok() && got[2].is_ok());
    // An element's error is its batch's error.
    let ds = range(9)
        .map_parallel(2, |i: Tensor| {
            if i.scalar_value::<i64>()? == 4 {
                return Err(DataError::msg("corrupt image /data/4.jpg"));
            }
            Ok(i)
        })
        .batch(3, false)
        .unwrap();
    let got: Vec<_> = ds.iter().unwrap().collect();
    assert!(got[1].as_ref().unwrap_err().to_string().contains("/data/4.jpg"));
    assert_eq!(got[2].as_ref().unwrap().as_slice::<i64>().unwrap(), &[6, 7, 8]);
}

#[test]
fn errors_and_panics_are_element_errors_that_ignore_errors_skips_and_counts() {
    let ds = range(10).map_parallel(2, |i: Tensor| {
        let v = i.scalar_value::<i64>()?;
        if v == 3 {
            return Err(DataError::msg(format!("corrupt image /data/{v}.jpg")));
        }
        if v == 7 {
            panic!("boom at {v}");
        }
        Ok(i)
    });
    let all: Vec<_> = ds.iter().unwrap().collect();
    assert_eq!(all.len(), 10);
    let e3 = all[3].as_ref().unwrap_err();
    assert!(matches!(e3, DataError::Element { cause: ElementCause::Message(_), .. }), "{e3:?}");
    let e3 = e3.to_string();
    assert!(e3.contains("ParallelMap") && e3.contains("/data/3.jpg"), "{e3}");
    assert!(all[7].as_ref().unwrap_err().to_string().contains("panicked: boom at 7"));
    let counter = Arc::new(AtomicU64::new(0));
    let kept = ints(&ds.ignore_errors(counter.clone(), false));
    assert_eq!(kept, vec![0, 1, 2, 4, 5, 6, 8, 9]);
    assert_eq!(counter.load(Ordering::Relaxed), 2);
}

#[test]
fn sequencing_transformations() {
    assert_eq!(ints(&range(10).skip(3).take(4)), vec![3, 4, 5, 6]);
    assert_eq!(ints(&range(10).shard(3, 1).unwrap()), vec![1, 4, 7]);
    assert_eq!(range(10).shard(3, 1).unwrap().cardinality(), Cardinality::Finite(3));
    assert_eq!(ints(&range(3).repeat(Some(2))), vec![0, 1, 2, 0, 1, 2]);
    assert_eq!(range(3).repeat(None).cardinality(), Cardinality::Infinite);
    assert_eq!(ints(&range(3).repeat(None).take(7)), vec![0, 1, 2, 0, 1, 2, 0]);
    assert_eq!(ints(&range(2).concatenate(&range(3))), vec![0, 1, 0, 1, 2]);
    assert_eq!(ints(&range(6).filter(|t: &Tensor| Ok(t.scalar_value::<i64>()? % 2 == 0))), vec![0, 2, 4]);
    let z: Vec<(Tensor, Tensor)> = range(5).zip(&range(3)).iter().unwrap().collect::<Result<_, _>>().unwrap();
    assert_eq!(z.len(), 3);
    let e: Vec<(Tensor, Tensor)> = range(3).enumerate(10).iter().unwrap().collect::<Result<_, _>>().unwrap();
    assert_eq!(e[2].0.scalar_value::<i64>().unwrap(), 12);
    assert_eq!(ints(&range(7).batch(3, false).unwrap().unbatch()), (0..7).collect::<Vec<_>>());
    assert_eq!(ints(&range(3).flat_map(|x: Tensor| Dataset::range(0, x.scalar_value::<i64>()?, 1))), vec![0, 0, 1]);
}

#[test]
fn interleave_order_is_tf_data_s_in_both_modes() {
    // tf.data: range(3).interleave(lambda x: range(10x, 10x + 4), cycle_length=2, block_length=2)
    let expected = vec![0, 1, 10, 11, 2, 3, 12, 13, 20, 21, 22, 23];
    for parallel in [None, Some(2), Some(AUTOTUNE)] {
        let ds = range(3).interleave(2, 2, parallel, |x: Tensor| {
            let x = x.scalar_value::<i64>()?;
            Dataset::range(x * 10, x * 10 + 4, 1)
        });
        assert_eq!(ints(&ds), expected, "num_parallel_calls {parallel:?}");
    }
}

#[test]
fn padded_batch_pads_to_the_longest_or_the_given_shape() {
    let ds = range(3).map(|x: Tensor| {
        let n = x.scalar_value::<i64>()? as usize + 1;
        Ok(Tensor::from_vec(&[n], vec![7i32; n])?)
    });
    let b: Vec<Tensor> = ds
        .padded_batch(3, vec![None], vec![Some(Tensor::scalar(-1i32))], false)
        .unwrap()
        .iter()
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(b[0].dims(), &[3, 3]);
    assert_eq!(b[0].as_slice::<i32>().unwrap(), &[7, -1, -1, 7, 7, -1, 7, 7, 7]);
    let b: Vec<Tensor> = ds
        .padded_batch(2, vec![Some(vec![Some(4)])], vec![], false)
        .unwrap()
        .iter()
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(b[1].dims(), &[1, 4]);
    assert_eq!(b[1].as_slice::<i32>().unwrap(), &[7, 7, 7, 0]);
}

#[test]
fn shuffle_is_reproducible_and_reshuffles_each_iteration() {
    let a = range(50).shuffle(10, Some(7), true).unwrap();
    let first = ints(&a);
    let second = ints(&a);
    let mut sorted = first.clone();
    sorted.sort();
    assert_eq!(sorted, (0..50).collect::<Vec<_>>());
    assert_ne!(first, second, "a new iteration reshuffles");
    assert_eq!(first, ints(&range(50).shuffle(10, Some(7), true).unwrap()), "same seed, same order");
    let fixed = range(50).shuffle(10, Some(7), false).unwrap();
    assert_eq!(ints(&fixed), ints(&fixed));
    // repeat after shuffle: each pass a new order, epochs kept apart.
    let r = ints(&range(10).shuffle(10, Some(3), true).unwrap().repeat(Some(2)));
    let (p1, p2) = r.split_at(10);
    assert_ne!(p1, p2);
    let mut s2 = p2.to_vec();
    s2.sort();
    assert_eq!(s2, (0..10).collect::<Vec<_>>());
}

/// tf.data's buffer semantics: with buffer 3 the first element is uniform over elements 0..3,
/// and the second is element 3 (which refilled the drawn slot) one time in three.
#[test]
fn shuffle_draws_as_tf_data_does() {
    let trials = 6000;
    let mut first = [0u32; 10];
    let mut second_is_3 = 0;
    for seed in 0..trials {
        let v = ints(&range(10).shuffle(3, Some(seed), false).unwrap().take(2));
        first[v[0] as usize] += 1;
        second_is_3 += u32::from(v[1] == 3);
    }
    // Chi-square over the three possible first elements (2 dof; 13.8 is p = 0.001).
    let e = trials as f64 / 3.0;
    let chi: f64 = first[..3].iter().map(|&o| (o as f64 - e).powi(2) / e).sum();
    assert!(chi < 13.8, "first-element counts {first:?}");
    assert!(first[3..].iter().all(|&c| c == 0));
    let p = second_is_3 as f64 / trials as f64;
    assert!((p - 1.0 / 3.0).abs() < 0.03, "P(second = 3) = {p}");
}

#[test]
fn memory_cache_replays_without_running_upstream() {
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let ds = range(5)
        .map(move |x: Tensor| {
            c.fetch_add(1, Ordering::Relaxed);
            Ok(x)
        })
        .cache(None);
    assert_eq!(ints(&ds), vec![0, 1, 2, 3, 4]);
    assert_eq!(ints(&ds), vec![0, 1, 2, 3, 4]);
    assert_eq!(calls.load(Ordering::Relaxed), 5);
    // An incomplete first pass is discarded.
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let ds = range(5)
        .map(move |x: Tensor| {
            c.fetch_add(1, Ordering::Relaxed);
            Ok(x)
        })
        .cache(None);
    assert_eq!(ints(&ds.take(2)), vec![0, 1]);
    assert_eq!(ints(&ds), vec![0, 1, 2, 3, 4]);
    assert_eq!(ints(&ds), vec![0, 1, 2, 3, 4]);
    assert_eq!(calls.load(Ordering::Relaxed), 7);
}

fn counted_pipeline(calls: &Arc<AtomicUsize>, scale: i64, file: &std::path::Path) -> Dataset<(Tensor, Tensor)> {
    let c = calls.clone();
    range(6)
        .map_with(&MapOptions::default().with_name(Some(format!("scale{scale}"))), move |x: Tensor| {
            c.fetch_add(1, Ordering::Relaxed);
            let v = x.scalar_value::<i64>()?;
            Ok((Tensor::scalar(v * scale), Tensor::from_strings(&[], vec![format!("s{v}").into_bytes()])?))
        })
        .cache(Some(file))
}

/// Every `(int64 scalar, string scalar)` element of `ds`.
fn read_pairs(ds: &Dataset<(Tensor, Tensor)>) -> Vec<(i64, Vec<u8>)> {
    ds.iter()
        .unwrap()
        .map(|e| {
            let (a, b) = e.unwrap();
            (a.scalar_value::<i64>().unwrap(), b.as_strings().unwrap()[0].clone())
        })
        .collect()
}

#[test]
fn file_cache_is_reused_by_the_same_pipeline_and_rebuilt_for_another() {
    let dir = std::env::temp_dir().join(format!("ff_cache_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let file = dir.join("cache");
    let calls = Arc::new(AtomicUsize::new(0));
    let read = read_pairs;
    let first = read(&counted_pipeline(&calls, 2, &file));
    assert_eq!(first[5], (10, b"s5".to_vec()));
    assert!(ferroflow_checkpoint::index_path(&file).exists());
    assert_eq!(calls.load(Ordering::Relaxed), 6);
    // A new process's pipeline (a fresh Dataset) replays the file.
    assert_eq!(read(&counted_pipeline(&calls, 2, &file)), first);
    assert_eq!(calls.load(Ordering::Relaxed), 6);
    // Another map function: the cache is rebuilt.
    let third = read(&counted_pipeline(&calls, 3, &file));
    assert_eq!(third[5].0, 15);
    assert_eq!(calls.load(Ordering::Relaxed), 12);
    // An abandoned pass leaves no cache and no temporary files.
    let other = dir.join("partial");
    let ds = counted_pipeline(&calls, 2, &other);
    assert_eq!(ds.take(2).iter().unwrap().count(), 2);
    assert!(!ferroflow_checkpoint::index_path(&other).exists());
    let names: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(names.iter().all(|n| !n.contains("partial")), "{names:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A byte flipped inside a cached element is found (the element's CRC-32C) before the
/// cache is replayed: the pipeline warns, rebuilds the cache from its input and gives the
/// right elements, and the rebuilt cache is replayed again after that.
#[test]
fn a_damaged_file_cache_is_rebuilt() {
    let dir = std::env::temp_dir().join(format!("ff_damaged_cache_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let file = dir.join("cache");
    let calls = Arc::new(AtomicUsize::new(0));
    let read = read_pairs;
    let first = read(&counted_pipeline(&calls, 2, &file));
    assert_eq!(read(&counted_pipeline(&calls, 2, &file)), first);
    assert_eq!(calls.load(Ordering::Relaxed), 6);
    let data = ferroflow_checkpoint::data_path(&file, 0, 1);
    let mut bytes = std::fs::read(&data).unwrap();
    let at = bytes.windows(2).position(|w| w == b"s3").expect("element 3's string is in the data file");
    bytes[at + 1] = b'7';
    std::fs::write(&data, &bytes).unwrap();
    assert_eq!(read(&counted_pipeline(&calls, 2, &file)), first, "rebuilt from the input");
    assert_eq!(calls.load(Ordering::Relaxed), 12);
    assert_eq!(read(&counted_pipeline(&calls, 2, &file)), first, "the rebuilt cache is replayed");
    assert_eq!(calls.load(Ordering::Relaxed), 12);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A process killed while writing a file cache leaves no cache: the next run rebuilds it.
#[test]
fn a_killed_caching_process_leaves_no_cache() {
    if let Ok(file) = std::env::var("FF_CACHE_CHILD") {
        // The child: cache slowly, forever blocked before the end.
        let ds = range(1000)
            .map(|x: Tensor| {
                std::thread::sleep(Duration::from_millis(5));
                Ok(x)
            })
            .cache(Some(std::path::Path::new(&file)));
        for e in ds.iter().unwrap() {
            e.unwrap();
        }
        return;
    }
    let dir = std::env::temp_dir().join(format!("ff_kill_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("cache");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "a_killed_caching_process_leaves_no_cache", "--nocapture"])
        .env("FF_CACHE_CHILD", &file)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until it has started writing the cache (its temporary file exists), then kill it
    // mid-epoch (the whole pass takes 5 s).
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while std::fs::read_dir(&dir).unwrap().next().is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!ferroflow_checkpoint::index_path(&file).exists(), "no index from a killed run");
    assert!(!ferroflow_checkpoint::data_path(&file, 0, 1).exists(), "no data file from a killed run");
    // The next run writes a complete cache and removes the dead process's temporary file.
    let ds = range(20).cache(Some(&file));
    assert_eq!(ints(&ds), (0..20).collect::<Vec<_>>());
    assert!(ferroflow_checkpoint::index_path(&file).exists());
    let names: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(names.iter().all(|n| !n.contains(".tmp")), "stale temporaries left: {names:?}");
    assert_eq!(ints(&range(20).cache(Some(&file))), (0..20).collect::<Vec<_>>());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn autotuned_prefetch_stays_within_the_ram_budget() {
    let produced = Arc::new(AtomicUsize::new(0));
    let p = produced.clone();
    let element = 1 << 16; // 64 KiB of f32s
    let budget = Budget::default().with_cpu(2).with_ram_bytes(3 * element as u64).with_log(false);
    let ds = Dataset::range(0, 200, 1)
        .unwrap()
        .map(move |_x: Tensor| {
            p.fetch_add(1, Ordering::Relaxed);
            Ok(Tensor::zeros(DType::Float, &[element / 4])?)
        })
        .prefetch(AUTOTUNE)
        .with_budget(budget);
    let mut it = ds.iter().unwrap();
    let mut max_ahead = 0;
    for consumed in 1..=200 {
        it.next().unwrap().unwrap();
        // A slow consumer: the producer runs ahead as far as it is allowed.
        std::thread::sleep(Duration::from_micros(300));
        max_ahead = max_ahead.max(produced.load(Ordering::Relaxed).saturating_sub(consumed));
    }
    // The buffer (at most 3 elements) plus the one the producer holds.
    assert!(max_ahead <= 4, "producer ran {max_ahead} elements ahead");
    let report = ds.autotune_report();
    assert_eq!(report.len(), 1);
    assert!(report[0].value <= 3, "{report:?}");
    assert_eq!(report[0].stage, "Iterator::Root::Prefetch");
}

#[test]
fn autotuned_parallel_map_reports_its_choice() {
    let ds = range(96)
        .map_parallel(AUTOTUNE, |x: Tensor| {
            std::thread::sleep(Duration::from_millis(2));
            Ok(x)
        })
        .with_budget(Budget::default().with_cpu(2).with_ram_bytes(1 << 30).with_log(false));
    assert_eq!(ints(&ds), (0..96).collect::<Vec<_>>());
    let r = &ds.autotune_report()[0];
    assert_eq!(r.stage, "Iterator::Root::ParallelMap");
    assert_eq!(r.value, 2, "{r:?}");
    assert!(r.reason.contains("worker"), "{}", r.reason);
}

#[test]
fn tfrecords_round_trip_and_corruption_names_file_and_offset() {
    let dir = std::env::temp_dir().join(format!("ff_tfr_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("a.tfrecord");
    let mut w = TFRecordWriter::create(&path).unwrap();
    for i in 0..4u8 {
        w.write(&vec![i; i as usize * 3]).unwrap();
    }
    w.close().unwrap();
    let ds = Dataset::tfrecord(&[&path]).unwrap();
    let recs: Vec<Vec<u8>> = ds.iter().unwrap().map(|t| t.unwrap().as_strings().unwrap()[0].clone()).collect();
    assert_eq!(recs, (0..4u8).map(|i| vec![i; i as usize * 3]).collect::<Vec<_>>());
    let mut bytes = std::fs::read(&path).unwrap();
    let n = bytes.len();
    bytes[n - 6] ^= 0xff; // inside the last record's data
    std::fs::write(&path, &bytes).unwrap();
    let out: Vec<_> = Dataset::tfrecord(&[&path]).unwrap().iter().unwrap().collect();
    let err = out.last().unwrap().as_ref().unwrap_err();
    assert!(matches!(err, DataError::Element { cause: ElementCause::Other { .. }, .. }), "{err:?}");
    let err = err.to_string();
    assert!(err.contains("a.tfrecord") && err.contains("byte 57"), "{err}");
    let missing = Dataset::tfrecord(&[dir.join("nope.tfrecord")]).unwrap().iter().unwrap().next().unwrap().unwrap_err();
    let DataError::Io { path, source } = &missing else { panic!("expected an I/O error, got {missing:?}") };
    assert_eq!(path, &dir.join("nope.tfrecord"));
    assert_eq!(source.downcast_ref::<std::io::Error>().map(|e| e.kind()), Some(std::io::ErrorKind::NotFound));
    assert!(missing.to_string().contains("nope.tfrecord"), "{missing}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn examples_parse_with_fixed_and_variable_features() {
    let a = example_bytes(&[
        ("x", &Tensor::from_vec(&[2], vec![1f32, 2.]).unwrap()),
        ("tags", &Tensor::from_vec(&[3], vec![5i64, 6, 7]).unwrap()),
        ("name", &Tensor::from_strings(&[1], vec![b"a".to_vec()]).unwrap()),
    ])
    .unwrap();
    let b = example_bytes(&[("x", &Tensor::from_vec(&[2], vec![3f32, 4.]).unwrap())]).unwrap();
    let mut spec = BTreeMap::new();
    spec.insert("x".to_string(), FeatureSpec::Fixed { dtype: DType::Float, shape: vec![2], default: None });
    spec.insert("tags".to_string(), FeatureSpec::Var { dtype: DType::Int64 });
    spec.insert(
        "name".to_string(),
        FeatureSpec::Fixed {
            dtype: DType::String,
            shape: vec![],
            default: Some(Tensor::from_strings(&[], vec![b"?".to_vec()]).unwrap()),
        },
    );
    let batch = Tensor::from_strings(&[2], vec![a.clone(), b]).unwrap();
    let p = parse_example(&batch, &spec).unwrap();
    assert_eq!(p["x"].dense().unwrap().as_slice::<f32>().unwrap(), &[1., 2., 3., 4.]);
    assert_eq!(p["name"].dense().unwrap().as_strings().unwrap(), &[b"a".to_vec(), b"?".to_vec()]);
    let Parsed::Sparse(tags) = &p["tags"] else { panic!("sparse") };
    assert_eq!(tags.indices.as_slice::<i64>().unwrap(), &[0, 0, 0, 1, 0, 2]);
    assert_eq!(tags.dense_shape.as_slice::<i64>().unwrap(), &[2, 3]);
    let one = parse_single_example(&a, &spec).unwrap();
    let Parsed::Sparse(t) = &one["tags"] else { panic!("sparse") };
    assert_eq!(t.indices.dims(), &[3, 1]);
    assert_eq!(t.dense_shape.as_slice::<i64>().unwrap(), &[3]);
    spec.insert("y".to_string(), FeatureSpec::Fixed { dtype: DType::Int64, shape: vec![], default: None });
    let e = parse_single_example(&a, &spec).unwrap_err().to_string();
    assert!(e.contains("feature: y") && e.contains("required"), "{e}");
    spec.remove("y");
    spec.insert("x".to_string(), FeatureSpec::Fixed { dtype: DType::Int64, shape: vec![2], default: None });
    let e = parse_single_example(&a, &spec).unwrap_err().to_string();
    assert!(e.contains("Data types don't match"), "{e}");
}

#[test]
fn list_files_sorts_shuffles_with_a_seed_and_names_a_pattern_without_matches() {
    let dir = std::env::temp_dir().join(format!("ff_glob_{}", std::process::id()));
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    for n in ["b.jpg", "a.jpg", "c.png", "sub/d.jpg"] {
        std::fs::write(dir.join(n), b"x").unwrap();
    }
    let names = |ds: &Dataset<Tensor>| -> Vec<String> {
        ds.iter().unwrap().map(|t| String::from_utf8(t.unwrap().as_strings().unwrap()[0].clone()).unwrap()).collect()
    };
    let pattern = format!("{}/**/*.jpg", dir.display());
    let sorted = names(&Dataset::list_files(&pattern, false, None).unwrap());
    assert_eq!(sorted.len(), 3);
    assert!(sorted[0].ends_with("a.jpg") && sorted[2].ends_with("sub/d.jpg"), "{sorted:?}");
    let s1 = names(&Dataset::list_files(&pattern, true, Some(1)).unwrap());
    assert_eq!(s1, names(&Dataset::list_files(&pattern, true, Some(1)).unwrap()));
    let e = Dataset::list_files(&format!("{}/*.gif", dir.display()), false, None).err().unwrap().to_string();
    assert!(e.contains("no files matched pattern") && e.contains("*.gif"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

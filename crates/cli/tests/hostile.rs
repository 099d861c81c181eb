//! Hostile input through the `ferroflow` binary, as an attacker or a careless user would give
//! it: every case runs under an address-space limit (`ulimit -v`), must exit with status 1
//! (not a panic's 101, not an abort's 134, not the OOM killer), print one line under 300
//! characters naming the file, node or argument, and peak far below the memory the input
//! claims. Also: deadlines (`--timeout-ms`) and Ctrl-C end endless loops, and a long TF1 loop
//! runs in constant memory. The graphs come from TensorFlow (`scripts/make_hostile_fixtures.py`).
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ferroflow::tensor::{npy, Tensor};

/// The address-space limit the cases run under (KiB, as `ulimit -v` takes it).
const ADDRESS_SPACE_KIB: u64 = 1 << 20;

fn hostile() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/hostile")
}

/// What one run of the binary did.
struct Ran {
    status: i32,
    stderr: String,
    stdout: String,
    /// Peak resident memory (bytes).
    peak: u64,
    elapsed: Duration,
}

/// Runs `ferroflow ARGS` under `ulimit -v`, optionally sending SIGINT after `interrupt`. The
/// child is reaped with `wait4` (for its own peak memory), not `Child::wait`.
#[allow(clippy::zombie_processes)]
fn ferroflow(args: &[String], interrupt: Option<Duration>) -> Ran {
    let quoted: Vec<String> = args.iter().map(|a| format!("'{}'", a.replace('\'', "'\\''"))).collect();
    let script =
        format!("ulimit -v {ADDRESS_SPACE_KIB} && exec '{}' {}", env!("CARGO_BIN_EXE_ferroflow"), quoted.join(" "));
    let start = Instant::now();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(script)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sh");
    let pid = child.id() as libc::pid_t;
    if let Some(after) = interrupt {
        std::thread::sleep(after);
        // SAFETY: `pid` is our child, not yet waited for, so the id is still its own.
        unsafe { libc::kill(pid, libc::SIGINT) };
    }
    let (mut stdout, mut stderr) = (String::new(), String::new());
    let mut err_pipe = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err_pipe.read_to_string(&mut s);
        s
    });
    let _ = child.stdout.take().unwrap().read_to_string(&mut stdout);
    stderr.push_str(&reader.join().unwrap());
    let mut status = 0;
    // SAFETY: plain FFI; `rusage` is written by the kernel before it is read.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid, "wait4");
    let elapsed = start.elapsed();
    let status = if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { 128 + libc::WTERMSIG(status) };
    Ran { status, stderr, stdout, peak: usage.ru_maxrss as u64 * 1024, elapsed }
}

/// Asserts a clean failure: status 1, one line under 300 characters holding every `names`,
/// and a peak far below the memory the input claims.
fn fails_cleanly(ran: &Ran, names: &[&str], claimed: u64) {
    fails_with(ran, names);
    let line = ran.stderr.trim_end();
    assert!(ran.peak < 300 << 20, "peak {} MB for an input claiming {claimed} bytes: {line}", ran.peak >> 20);
    assert!(ran.peak < claimed / 10, "peak {} bytes for an input claiming {claimed}", ran.peak);
}

/// Asserts a failure as one line: status 1, under 300 characters, holding every `names`.
fn fails_with(ran: &Ran, names: &[&str]) {
    let line = ran.stderr.trim_end();
    assert_eq!(ran.status, 1, "exit status; stderr: {line}");
    assert!(!line.contains('\n'), "one line: {line}");
    assert!(line.starts_with("error: "), "{line}");
    assert!(line.len() < 300, "{} characters: {line}", line.len());
    for n in names {
        assert!(line.contains(n), "names {n:?}: {line}");
    }
}

fn npy_file(dir: &Path, name: &str, t: &Tensor) -> String {
    let p = dir.join(name);
    npy::write_npy(&p, t).unwrap();
    p.display().to_string()
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn sizes_fed_at_run_time_are_checked_before_anything_is_allocated() {
    let dir = tempfile::tempdir().unwrap();
    let graph = hostile().join("fed_sizes.pbtxt").display().to_string();
    let x = npy_file(dir.path(), "x.npy", &Tensor::from_vec(&[2, 2], vec![1.0f32, 2.0, 3.0, 4.0]).unwrap());
    let cases: Vec<(&str, &str, Tensor, &str, u64)> = vec![
        ("tile", "multiples", Tensor::from_vec(&[2], vec![1i32 << 20, 1 << 20]).unwrap(), "Tile", 4 << 40),
        ("broadcast", "shape", Tensor::from_vec(&[3], vec![1i64 << 40, 2, 2]).unwrap(), "BroadcastTo", 16 << 40),
        ("pad", "paddings", Tensor::from_vec(&[2, 2], vec![1i32 << 30, 0, 1 << 30, 1]).unwrap(), "Pad", 4 << 60),
        ("one_hot", "depth", Tensor::scalar(i32::MAX), "OneHot", 24 << 30),
        ("resize", "size", Tensor::from_vec(&[2], vec![1i32 << 20, 1 << 20]).unwrap(), "ResizeBilinear", 4 << 40),
    ];
    for (node, input, value, op, claimed) in cases {
        let fed = npy_file(dir.path(), &format!("{input}.npy"), &value);
        let mut a = args(&["run", &graph, "--fetch", &format!("{node}:0"), "--feed"]);
        a.push(format!("{input}:0={fed}"));
        if node != "one_hot" {
            a.push("--feed".into());
            a.push(format!("x:0={x}"));
        }
        let ran = ferroflow(&a, None);
        fails_cleanly(&ran, &[&format!("node '{node}' ({op})"), "resource exhausted", "bytes"], claimed);
    }
    // The limit is the user's to set.
    let fed = npy_file(dir.path(), "small.npy", &Tensor::from_vec(&[2], vec![100i32, 100]).unwrap());
    let a = args(&["run", &graph, "--fetch", "tile:0", "--feed", &format!("multiples:0={fed}")]);
    let a = [a, args(&["--feed", &format!("x:0={x}"), "--memory-limit", "10000"])].concat();
    fails_cleanly(
        &ferroflow(&a, None),
        &["node 'tile' (Tile)", "[200, 200]", "160000 bytes", "limit of 10000"],
        1 << 40,
    );
    let a = [
        args(&["run", &graph, "--fetch", "tile:0", "--feed", &format!("multiples:0={fed}")]),
        args(&["--feed", &format!("x:0={x}")]),
    ]
    .concat();
    let ran = ferroflow(&a, None);
    assert_eq!(ran.status, 0, "{}", ran.stderr);
    assert!(ran.stdout.contains("tile:0: float [200, 200]"), "{}", ran.stdout);
}

#[test]
fn hostile_files_and_arguments_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    // A .npy whose header's descr holds a non-ASCII character (found by libFuzzer: a panic).
    let header = "{'descr': '<\u{e9}4', 'fortran_order': False, 'shape': (2,), }";
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    let padded = format!("{header:<118}\n");
    bytes.extend_from_slice(&(padded.len() as u16).to_le_bytes());
    bytes.extend_from_slice(padded.as_bytes());
    bytes.extend_from_slice(&[0; 8]);
    let bad_npy = dir.path().join("bad.npy");
    std::fs::write(&bad_npy, bytes).unwrap();
    let graph = hostile().join("fed_sizes.pbtxt").display().to_string();
    let a = args(&["run", &graph, "--fetch", "tile:0", "--feed", &format!("x:0={}", bad_npy.display())]);
    fails_cleanly(&ferroflow(&a, None), &["bad.npy", "descr"], 1 << 30);

    // Text nested a few thousand levels deep (a stack overflow before).
    let mut text = String::from("node { name: \"f\" op: \"NoOp\" ");
    for _ in 0..5000 {
        text.push_str("attr { key: \"f\" value { func { name: \"g\" ");
    }
    text.push_str(&"} } } ".repeat(5000));
    text.push_str("}\n");
    let deep = dir.path().join("deep.pbtxt");
    std::fs::write(&deep, text).unwrap();
    let deep = deep.display().to_string();
    for cmd in
        [args(&["run", &deep, "--target", "f"]), args(&["inspect", &deep]), args(&["optimize", &deep, "--fetch", "f"])]
    {
        fails_cleanly(&ferroflow(&cmd, None), &["deep.pbtxt", "nested more than"], 1 << 30);
    }

    // Thread counts far past what a machine has fail at once, naming the option.
    let endless = hostile().join("endless_v1.pbtxt").display().to_string();
    for opt in ["--inter-op-threads", "--intra-op-threads"] {
        let ran = ferroflow(&args(&["run", &endless, "--fetch", "out:0", opt, "1000000"]), None);
        let option = opt.trim_start_matches("--").replace('-', "_");
        fails_cleanly(&ran, &[&option, "1000000"], 1 << 30);
        assert!(ran.elapsed < Duration::from_secs(20), "{opt}: took {:?} (spawning threads?)", ran.elapsed);
    }
}

#[test]
fn deadlines_end_endless_loops_of_both_kinds() {
    let dir = tempfile::tempdir().unwrap();
    let n = npy_file(dir.path(), "n.npy", &Tensor::scalar(0i32));
    let v1 = args(&["run", &hostile().join("endless_v1.pbtxt").display().to_string(), "--fetch", "out:0"]);
    let v2 = [
        args(&["run", &hostile().join("endless_v2.pb").display().to_string(), "--fetch", "Identity:0"]),
        args(&["--feed", &format!("n:0={n}")]),
    ]
    .concat();
    for (what, cmd, node) in [("v1", v1, "loop/"), ("v2", v2, "(StatelessWhile)")] {
        let cmd = [cmd, args(&["--timeout-ms", "2000"])].concat();
        let ran = ferroflow(&cmd, None);
        fails_cleanly(&ran, &["deadline exceeded after 2000 ms", "still running", node], 1 << 30);
        // The step stops at its deadline, not much later (loose: shared machines are noisy).
        assert!(ran.elapsed >= Duration::from_millis(2000), "{what}: stopped early: {:?}", ran.elapsed);
        assert!(ran.elapsed < Duration::from_secs(20), "{what}: took {:?}", ran.elapsed);
        eprintln!("endless {what}: exit 1 after {:?}", ran.elapsed);
    }
}

#[test]
fn ctrl_c_stops_the_running_step_cleanly() {
    let cmd = args(&["run", &hostile().join("endless_v1.pbtxt").display().to_string(), "--fetch", "out:0"]);
    let ran = ferroflow(&cmd, Some(Duration::from_millis(1500)));
    assert_eq!(ran.status, 130, "{}", ran.stderr);
    let last = ran.stderr.lines().last().unwrap_or_default();
    assert!(last.starts_with("error: cancelled: the step fetching out:0 stopped; still running: loop/"), "{last}");
}

#[test]
fn a_long_tf1_loop_runs_in_constant_memory() {
    let dir = tempfile::tempdir().unwrap();
    let graph = hostile().join("count_v1.pbtxt").display().to_string();
    let peak = |n: i32| {
        let fed = npy_file(dir.path(), &format!("n{n}.npy"), &Tensor::scalar(n));
        let ran = ferroflow(
            &args(&["run", &graph, "--fetch", "count:0", "--fetch", "acc:0", "--feed", &format!("n:0={fed}")]),
            None,
        );
        assert_eq!(ran.status, 0, "{}", ran.stderr);
        assert!(ran.stdout.contains(&format!("count:0: int32 [] [{n}]")), "{}", ran.stdout);
        ran.peak
    };
    let (short, long) = (peak(1000), peak(200_000));
    // 1.2 KB per iteration before frames were freed: 240 MB more for the long loop.
    assert!(long < short + (20 << 20), "1000 iterations peak at {} MB, 200000 at {} MB", short >> 20, long >> 20);
}

#[test]
fn convert_refuses_invalid_constants_and_errors_name_the_node_once() {
    let dir = tempfile::tempdir().unwrap();
    // A float [2, 2] constant with 4 bytes of content (16 needed).
    let graph = dir.path().join("short.pbtxt");
    std::fs::write(
        &graph,
        r#"node { name: "c" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 } dim { size: 2 } }
  tensor_content: "\000\000\200?" } } } }"#,
    )
    .unwrap();
    let out = dir.path().join("out.pb");
    let a = args(&["convert", &graph.display().to_string(), &out.display().to_string()]);
    let ran = ferroflow(&a, None);
    fails_cleanly(&ran, &["short.pbtxt", "node 'c' (Const)", "attr 'value'", "byte length"], 1 << 30);
    assert!(!out.exists(), "nothing written for an invalid graph");
    let ran = ferroflow(&args(&["run", &graph.display().to_string(), "--fetch", "c:0"]), None);
    fails_cleanly(&ran, &["node 'c' (Const): attr 'value'"], 1 << 30);
    assert_eq!(ran.stderr.matches("node 'c'").count(), 1, "the node is named once: {}", ran.stderr);
}

#[test]
fn an_npz_bomb_is_refused_before_it_is_inflated() {
    use std::io::Write;
    // 768 MiB of zeros deflate to well under a megabyte; the reader refuses the member's
    // declared size (past half the 1 GiB address space) before inflating any of it. It used
    // to inflate it all and then copy it: 1.5 GB and more.
    let dir = tempfile::tempdir().unwrap();
    let bomb = dir.path().join("bomb.npz");
    let data = 768usize << 20;
    let header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({},), }}", data / 4);
    let padded = format!("{header:<118}\n");
    let mut zip = zip::ZipWriter::new(std::fs::File::create(&bomb).unwrap());
    let options =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated).large_file(true);
    zip.start_file("x:0.npy", options).unwrap();
    zip.write_all(b"\x93NUMPY\x01\x00").unwrap();
    zip.write_all(&(padded.len() as u16).to_le_bytes()).unwrap();
    zip.write_all(padded.as_bytes()).unwrap();
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..data >> 20 {
        zip.write_all(&zeros).unwrap();
    }
    zip.finish().unwrap();
    let size = std::fs::metadata(&bomb).unwrap().len();
    assert!(size < 4 << 20, "{size} bytes");
    let graph = hostile().join("fed_sizes.pbtxt").display().to_string();
    let ran = ferroflow(&args(&["run", &graph, "--fetch", "tile:0", "--inputs", &bomb.display().to_string()]), None);
    fails_cleanly(&ran, &["bomb.npz[x:0.npy]", "resource exhausted"], data as u64);
}

/// An output path that is a symbolic link, a FIFO or (as root) a device node is written
/// through, never replaced by a regular file: the link keeps pointing at the file it named,
/// a reader of the FIFO gets the bytes, the device stays a device.
#[test]
fn outputs_write_through_links_fifos_and_devices() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let graph = hostile().join("fed_sizes.pbtxt").display().to_string();
    let convert = |out: &Path| ferroflow(&args(&["convert", &graph, out.to_str().unwrap()]), None);

    let (real, link) = (dir.path().join("real.pb"), dir.path().join("link.pb"));
    std::os::unix::fs::symlink("real.pb", &link).unwrap();
    let ran = convert(&link);
    assert_eq!(ran.status, 0, "{}", ran.stderr);
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    let written = std::fs::read(&real).unwrap();
    assert!(!written.is_empty());

    let fifo = dir.path().join("fifo.pb");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    let ran = convert(&fifo);
    assert_eq!(ran.status, 0, "{}", ran.stderr);
    assert_eq!(reader.join().unwrap(), written, "the FIFO's reader gets the graph");
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());

    // A character device (the null device's numbers), where this user may make one.
    let node = dir.path().join("null.pb");
    let c = std::ffi::CString::new(node.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path; makedev of Linux's null device (1, 3).
    if unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) } == 0 {
        let ran = convert(&node);
        assert_eq!(ran.status, 0, "{}", ran.stderr);
        assert!(std::fs::symlink_metadata(&node).unwrap().file_type().is_char_device());
    }

    // A directory is refused, naming it.
    let sub = dir.path().join("sub.pb");
    std::fs::create_dir(&sub).unwrap();
    fails_cleanly(&convert(&sub), &["sub.pb", "is a directory"], u64::MAX);
}

/// Files of a few megabytes whose decoded messages would take gigabytes (each empty repeated
/// message is two bytes on disk and a whole struct decoded) fail against the memory limit
/// before the decoder allocates: a GraphDef for `inspect`, `run` and `tensorboard`, an XSpace
/// for `profile`, a SavedModel of empty meta graphs for `inspect` and `run`; the same for
/// text format (`node {}` lines).
#[test]
fn small_files_cannot_decode_into_gigabytes() {
    let dir = tempfile::tempdir().unwrap();
    let graph = dir.path().join("nodes.pb");
    std::fs::write(&graph, b"\x0a\x00".repeat(10_000_000)).unwrap();
    let text = dir.path().join("nodes.pbtxt");
    std::fs::write(&text, "node {}\n".repeat(2_500_000)).unwrap();
    let xspace = dir.path().join("planes.xplane.pb");
    std::fs::write(&xspace, b"\x0a\x00".repeat(10_000_000)).unwrap();
    let model = dir.path().join("model");
    std::fs::create_dir(&model).unwrap();
    std::fs::write(model.join("saved_model.pb"), b"\x12\x00".repeat(2_000_000)).unwrap();
    let (g, x, m) = (graph.to_str().unwrap(), xspace.to_str().unwrap(), model.to_str().unwrap());
    let logdir = dir.path().join("logs");
    let cases: Vec<(Vec<String>, &str, &str)> = vec![
        (args(&["inspect", g]), "nodes.pb", "tensorflow.GraphDef"),
        (args(&["inspect", text.to_str().unwrap()]), "nodes.pbtxt", "tensorflow.GraphDef"),
        (args(&["run", g, "--fetch", "x:0"]), "nodes.pb", "tensorflow.GraphDef"),
        (args(&["tensorboard", g, "--logdir", logdir.to_str().unwrap()]), "nodes.pb", "tensorflow.GraphDef"),
        (args(&["profile", x]), "planes.xplane.pb", "tensorflow.profiler.XSpace"),
        (args(&["inspect", m]), "saved_model.pb", "tensorflow.SavedModel"),
        (args(&["run", m]), "saved_model.pb", "tensorflow.SavedModel"),
    ];
    for (a, file, message) in cases {
        let ran = ferroflow(&a, None);
        fails_cleanly(&ran, &[file, message, "memory limit"], 2 << 30);
    }
}

/// `profile --chrome` on a capture of 300,000 events streams its JSON: the peak stays a small
/// multiple of the decoded capture instead of a document tree of 160 times the file's size.
#[test]
fn a_large_capture_streams_its_chrome_trace() {
    use ferroflow::proto::profiler::{x_event, XEvent, XEventMetadata, XLine, XPlane, XSpace};
    use ferroflow::proto::Message;
    let dir = tempfile::tempdir().unwrap();
    let mut plane = XPlane { id: 1, name: "/host:CPU".into(), ..Default::default() };
    plane.event_metadata.insert(1, XEventMetadata { id: 1, name: "MatMul".into(), ..Default::default() });
    let events = (0..300_000i64)
        .map(|i| XEvent {
            metadata_id: 1,
            duration_ps: 1_000_000,
            data: Some(x_event::Data::OffsetPs(i * 2_000_000)),
            ..Default::default()
        })
        .collect();
    plane.lines.push(XLine { id: 1, name: "worker".into(), timestamp_ns: 1, events, ..Default::default() });
    let space = XSpace { planes: vec![plane], ..Default::default() };
    let (capture, out) = (dir.path().join("big.xplane.pb"), dir.path().join("trace.json"));
    std::fs::write(&capture, space.encode_to_vec()).unwrap();
    drop(space);
    let size = std::fs::metadata(&capture).unwrap().len();
    let ran = ferroflow(&args(&["profile", capture.to_str().unwrap(), "--chrome", out.to_str().unwrap()]), None);
    assert_eq!(ran.status, 0, "{}", ran.stderr);
    // Counted in the bytes: a parsed document would make this process large, and a child
    // forked from a large process starts with its peak.
    let json = std::fs::read(&out).unwrap();
    assert!(json.starts_with(b"{\"traceEvents\":[") && json.ends_with(b"],\"displayTimeUnit\":\"ms\"}"));
    assert_eq!(json.windows(8).filter(|w| w == b"\"ph\":\"X\"").count(), 300_000);
    assert_eq!(json.windows(8).filter(|w| w == b"\"ph\":\"M\"").count(), 2);
    assert!(ran.peak < 40 * size + (60 << 20), "peak {} MB for a {} MB capture", ran.peak >> 20, size >> 20);
}

/// A gray progressive JPEG of `side`×`side` whose last scan is repeated until the file has
/// `scans` scans (libjpeg only warns about a repeated refinement scan, as it does for the
/// hostile files this imitates).
fn many_scan_jpeg(side: usize, scans: usize) -> Vec<u8> {
    use ferroflow::codec::jpeg::{encode_jpeg, EncodeOptions};
    let pixels = vec![128u8; side * side];
    let opts = EncodeOptions::default().with_progressive(true);
    let jpeg = encode_jpeg(&pixels, side, side, 1, &opts).unwrap();
    // Each scan: an SOS marker (ff da) up to the next marker that is not a stuffed byte or
    // a restart marker; the file ends with EOI (ff d9).
    let sos: Vec<usize> = jpeg.windows(2).enumerate().filter(|(_, w)| w == &[0xff, 0xda]).map(|(i, _)| i).collect();
    let last = *sos.last().expect("a progressive file has scans");
    let end = jpeg.len() - 2;
    assert_eq!(&jpeg[end..], [0xff, 0xd9]);
    let scan = &jpeg[last..end];
    let mut out = jpeg[..end].to_vec();
    for _ in sos.len()..scans {
        out.extend_from_slice(scan);
    }
    out.extend_from_slice(&[0xff, 0xd9]);
    out
}

/// A graph that reads `path` and decodes it with DecodeJpeg (`decode:0`).
fn decode_graph(dir: &Path, path: &Path) -> String {
    let text = format!(
        r#"node {{ name: "file" op: "Const" attr {{ key: "dtype" value {{ type: DT_STRING }} }}
  attr {{ key: "value" value {{ tensor {{ dtype: DT_STRING tensor_shape {{ }} string_val: "{}" }} }} }} }}
node {{ name: "read" op: "ReadFile" input: "file" }}
node {{ name: "decode" op: "DecodeJpeg" input: "read" attr {{ key: "channels" value {{ i: 1 }} }} }}
node {{ name: "next" op: "ExpandDims" input: "decode" input: "axis" attr {{ key: "T" value {{ type: DT_UINT8 }} }} }}
node {{ name: "axis" op: "Const" attr {{ key: "dtype" value {{ type: DT_INT32 }} }}
  attr {{ key: "value" value {{ tensor {{ dtype: DT_INT32 tensor_shape {{ }} int_val: 0 }} }} }} }}
"#,
        path.display()
    );
    let g = dir.join("decode.pbtxt");
    std::fs::write(&g, text).unwrap();
    g.display().to_string()
}

/// A progressive JPEG of 20,000 scans (a few hundred KB) fails at the scan limit, naming the
/// decoding node and the count; without the limit, a deadline or Ctrl-C stops it within
/// milliseconds, blaming DecodeJpeg and not the node after it.
#[test]
fn progressive_jpeg_scans_are_limited_and_decodes_stop_on_time() {
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("scans.jpg");
    std::fs::write(&image, many_scan_jpeg(2048, 20_000)).unwrap();
    let graph = decode_graph(dir.path(), &image);
    let ran = ferroflow(&args(&["run", &graph, "--fetch", "next:0"]), None);
    fails_cleanly(&ran, &["'decode'", "DecodeJpeg", "more than 1000 scans", "scan limit"], u64::MAX);
    let ran =
        ferroflow(&args(&["run", &graph, "--fetch", "next:0", "--jpeg-max-scans", "0", "--timeout-ms", "300"]), None);
    fails_cleanly(&ran, &["decode (DecodeJpeg)", "deadline exceeded"], u64::MAX);
    assert!(ran.elapsed < Duration::from_secs(3), "stopped after {:?}", ran.elapsed);
    let ran = ferroflow(
        &args(&["run", &graph, "--fetch", "next:0", "--jpeg-max-scans", "0"]),
        Some(Duration::from_millis(500)),
    );
    assert_eq!(ran.status, 130, "{}", ran.stderr);
    assert!(ran.elapsed < Duration::from_secs(3), "stopped after {:?}", ran.elapsed);
}

/// A FIFO named like an image in a class folder is skipped with a warning naming it (it would
/// block the reader forever); the other images are read.
#[test]
fn a_fifo_in_a_class_folder_is_skipped() {
    use ferroflow::codec::jpeg::{encode_jpeg, EncodeOptions};
    let dir = tempfile::tempdir().unwrap();
    let class = dir.path().join("cats");
    std::fs::create_dir(&class).unwrap();
    for i in 0..3 {
        let pixels = vec![(i * 40) as u8; 16 * 16 * 3];
        std::fs::write(
            class.join(format!("{i}.jpg")),
            encode_jpeg(&pixels, 16, 16, 3, &EncodeOptions::default()).unwrap(),
        )
        .unwrap();
    }
    let fifo = class.join("x.jpg");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let a = args(&["pipeline", dir.path().to_str().unwrap(), "--size", "8", "--batch", "2", "--epochs", "1"]);
    let ran = ferroflow(&a, None);
    assert_eq!(ran.status, 0, "{}", ran.stderr);
    assert!(ran.stderr.contains("x.jpg") && ran.stderr.contains("not a regular file (a FIFO)"), "{}", ran.stderr);
    assert!(ran.stdout.contains("3 images in 2 batches"), "{}", ran.stdout);
}

/// Messages: `run` on a directory without saved_model.pb names the missing file; a
/// checkpoint entry whose name is not UTF-8 is named by its position and escaped bytes.
#[test]
fn messages_name_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    fails_cleanly(
        &ferroflow(&args(&["run", dir.path().to_str().unwrap()]), None),
        &["without saved_model.pb"],
        u64::MAX,
    );
    let prefix = dir.path().join("ckpt");
    ferroflow::checkpoint::write_bundle(&prefix, &[("w\u{e9}ight".into(), Tensor::scalar(1.0f32))]).unwrap();
    let index = ferroflow::checkpoint::index_path(&prefix);
    let table = ferroflow::checkpoint::table::read(&std::fs::read(&index).unwrap()).unwrap();
    // 'é' is c3 a9 in UTF-8: a lone c3 followed by '!' is not UTF-8.
    let rows: Vec<(Vec<u8>, Vec<u8>)> =
        table.into_iter().map(|(k, v)| (if k.is_empty() { k } else { b"w\xc3!ight".to_vec() }, v)).collect();
    std::fs::write(&index, ferroflow::checkpoint::table::build(&rows).unwrap()).unwrap();
    let ran = ferroflow(&args(&["inspect-checkpoint", prefix.to_str().unwrap()]), None);
    fails_cleanly(&ran, &["entry 1", "not UTF-8", "w\\xc3!ight"], u64::MAX);
}

/// A node with a shape from a constant: `RandomUniform` of `dims` named `name`.
fn random_node(name: &str, dims: &[i64]) -> String {
    let dims: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
    format!(
        r#"node {{ name: "{name}_shape" op: "Const" attr {{ key: "dtype" value {{ type: DT_INT64 }} }}
  attr {{ key: "value" value {{ tensor {{ dtype: DT_INT64 tensor_shape {{ dim {{ size: {} }} }} int64_val: [{}] }} }} }} }}
node {{ name: "{name}" op: "RandomUniform" input: "{name}_shape" attr {{ key: "T" value {{ type: DT_INT64 }} }}
  attr {{ key: "dtype" value {{ type: DT_FLOAT }} }} attr {{ key: "seed" value {{ i: 1 }} }} }}
"#,
        dims.len(),
        dims.join(", ")
    )
}

/// Products and convolutions that take seconds stop at a deadline or Ctrl-C within a part's
/// time (the product is cut into parts when the step can stop), naming the node.
#[test]
fn long_products_and_convolutions_stop_on_time() {
    let dir = tempfile::tempdir().unwrap();
    let matmul = dir.path().join("matmul.pbtxt");
    std::fs::write(
        &matmul,
        random_node("a", &[4096, 4096])
            + &random_node("b", &[4096, 4096])
            + r#"node { name: "mm" op: "MatMul" input: "a" input: "b" attr { key: "T" value { type: DT_FLOAT } } }"#,
    )
    .unwrap();
    // A stride-1 SAME convolution of random [8, 128, 128, 512] images by a k×k filter: seconds
    // of work by either algorithm (the 3×3 Winograd one on 256 channels finished in 0.3 s).
    let conv_graph = |name: &str, k: i64| {
        let path = dir.path().join(name);
        let conv = r#"node { name: "conv" op: "Conv2D" input: "x" input: "w" attr { key: "T" value { type: DT_FLOAT } }
  attr { key: "strides" value { list { i: [1, 1, 1, 1] } } } attr { key: "padding" value { s: "SAME" } } }"#;
        std::fs::write(&path, random_node("x", &[8, 128, 128, 512]) + &random_node("w", &[k, k, 512, 512]) + conv)
            .unwrap();
        path
    };
    // 5×5: the GEMM path; 3×3: the Winograd path.
    let (conv, winograd) = (conv_graph("conv.pbtxt", 5), conv_graph("winograd.pbtxt", 3));
    let cases =
        [(&matmul, "mm:0", "mm (MatMul)"), (&conv, "conv:0", "conv (Conv2D)"), (&winograd, "conv:0", "conv (Conv2D)")];
    for (graph, fetch, node) in cases {
        let g = graph.to_str().unwrap();
        let ran = ferroflow(&args(&["run", g, "--fetch", fetch, "--timeout-ms", "500"]), None);
        fails_with(&ran, &["deadline exceeded"]);
        // The error names what was running: the product, or (on a loaded machine, in a debug
        // build) one of its random inputs still being drawn when the deadline came.
        let line = ran.stderr.trim_end();
        assert!(line.contains(node) || line.contains("(RandomUniform)"), "{node}: {line}");
        assert!(ran.elapsed < Duration::from_secs(3), "{node}: stopped after {:?}", ran.elapsed);
        let ran = ferroflow(&args(&["run", g, "--fetch", fetch]), Some(Duration::from_millis(700)));
        assert_eq!(ran.status, 130, "{node}: {}", ran.stderr);
        assert!(ran.elapsed < Duration::from_secs(3), "{node}: stopped after {:?}", ran.elapsed);
    }
}

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

/// Asserts a clean failure: status 1, one line under 300 characters holding every `names`.
fn fails_cleanly(ran: &Ran, names: &[&str], claimed: u64) {
    let line = ran.stderr.trim_end();
    assert_eq!(ran.status, 1, "exit status; stderr: {line}");
    assert!(!line.contains('\n'), "one line: {line}");
    assert!(line.starts_with("error: "), "{line}");
    assert!(line.len() < 300, "{} characters: {line}", line.len());
    for n in names {
        assert!(line.contains(n), "names {n:?}: {line}");
    }
    assert!(ran.peak < 300 << 20, "peak {} MB for an input claiming {claimed} bytes: {line}", ran.peak >> 20);
    assert!(ran.peak < claimed / 10, "peak {} bytes for an input claiming {claimed}", ran.peak);
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

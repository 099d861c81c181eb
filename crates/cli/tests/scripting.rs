//! The binary as scripts use it: a closed stdout never panics, the README's synopses list every
//! option `--help` shows (and no other), `-o/--output` is the one spelling of what a command
//! writes (old spellings still accepted), shell completions, and `-q`/`-v`.
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ferroflow"))
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

fn fixture(path: &str) -> String {
    fixtures().join(path).to_str().unwrap().to_string()
}

/// Whether a child ended as a command whose reader went away may: status 0, or killed by
/// SIGPIPE.
fn ended_quietly(status: std::process::ExitStatus) -> bool {
    use std::os::unix::process::ExitStatusExt;
    status.success() || status.signal() == Some(libc::SIGPIPE)
}

/// Runs `ferroflow ARGS` with stdout into a pipe whose reader reads the first line and
/// closes it (`| head -1`), or — `close_at_once` — closes it before the command writes
/// anything; returns (what the reader got, stderr, status).
fn piped(args: &[String], close_at_once: bool) -> (String, String, std::process::ExitStatus) {
    let mut child = bin().args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn ferroflow");
    let mut stdout = child.stdout.take().unwrap();
    let mut first = Vec::new();
    if !close_at_once {
        let mut byte = [0u8; 1];
        while stdout.read(&mut byte).unwrap_or(0) == 1 {
            first.push(byte[0]);
            if byte[0] == b'\n' {
                break;
            }
        }
    }
    drop(stdout);
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    let status = child.wait().unwrap();
    (String::from_utf8_lossy(&first).into_owned(), stderr, status)
}

/// Every subcommand that prints, with its output cut short after one line and with stdout
/// closed from the start: no panic, status 0 (or SIGPIPE's), and the reader got the line a
/// full run starts with.
#[test]
fn a_closed_stdout_ends_every_command_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let flowers = d("flowers");
    let o = bin().args(["flowers", &flowers, "--per-class", "2", "--size", "32x32"]).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let keras = fixture("keras/transfer.keras");
    let mlp = fixture("tf/mlp.pb");
    let mlp_inputs = fixture("tf/mlp.inputs.npz");
    let what_runs = fixture("tf/seed_000.pbtxt");
    let ckpt = fixture("tf/checkpoints/seed_003");
    let meta = fixture("tf/checkpoints/seed_003/model.ckpt-200.meta");
    let xplane = fixture("profile/tf_keras_fit.xplane.pb");
    let commands: Vec<Vec<&str>> = vec![
        vec!["--help"],
        vec!["--version"],
        vec!["run", "--help"],
        vec!["convert", "--help"],
        vec!["ops"],
        vec!["ops", "--json"],
        vec!["ops", "Relu6"],
        vec!["info"],
        vec!["completions", "bash"],
        vec!["inspect", &mlp],
        vec!["inspect", &mlp, "--json"],
        vec!["inspect", "--coverage", &mlp],
        vec!["inspect", &keras],
        vec!["inspect-checkpoint", &ckpt],
        vec!["inspect-checkpoint", &ckpt, "--all", "--max-values", "0"],
        vec!["profile", &xplane],
        vec!["profile", &xplane, "--json"],
        vec!["benchmark", &mlp, "--inputs", &mlp_inputs, "--fetch", "Identity:0", "--runs", "2", "--profile"],
        vec!["optimize", &what_runs, "--fetch", "Mul:0", "--report"],
        vec!["run", &mlp, "--inputs", &mlp_inputs, "--fetch", "Identity:0", "--fetch", "MatMul:0"],
        vec!["convert", &meta, "--fetch", "out_layer/Softmax:0", "-o", "FROZEN"],
        vec!["tensorboard", &what_runs, "--logdir", "LOGDIR"],
        vec!["pipeline", &flowers, "--size", "16", "--batch", "4", "--epochs", "2"],
        vec!["mnist", "--steps", "2"],
        // Keras's progress bar prints with `println!` in the library.
        vec!["fit", &keras, &flowers, "--max-steps", "2", "--batch", "4", "--size", "32"],
    ];
    for (i, cmd) in commands.iter().enumerate() {
        let frozen = d(&format!("frozen{i}.pb"));
        let logdir = d(&format!("logs{i}"));
        let args: Vec<String> = cmd
            .iter()
            .map(|a| match *a {
                "FROZEN" => frozen.clone(),
                "LOGDIR" => logdir.clone(),
                a => a.to_string(),
            })
            .collect();
        let full = bin().args(&args).output().unwrap();
        assert!(full.status.success(), "ferroflow {args:?}: {}", String::from_utf8_lossy(&full.stderr));
        let full = String::from_utf8_lossy(&full.stdout).into_owned();
        for close_at_once in [false, true] {
            let (first, stderr, status) = piped(&args, close_at_once);
            assert!(!stderr.contains("panicked"), "ferroflow {args:?} | head -1: {stderr}");
            assert!(ended_quietly(status), "ferroflow {args:?} | head -1: {status:?}: {stderr}");
            if !close_at_once {
                // The line a full run starts with (its numbers and file names may differ: timings,
                // event files named by time).
                let want = full.lines().next().map(|l| format!("{l}\n")).unwrap_or_default();
                let head = |l: &str| masked(l).split_whitespace().next().map(str::to_string);
                assert!(
                    head(&first) == head(&want) && first.ends_with('\n') == want.ends_with('\n'),
                    "{args:?}: {first:?} vs {want:?}"
                );
            }
        }
    }
}

/// `line` with its numbers as `#` (timings differ from run to run).
fn masked(line: &str) -> String {
    let mut out = String::new();
    for c in line.chars() {
        if c.is_ascii_digit() || (c == '.' && out.ends_with('#')) {
            if !out.ends_with('#') {
                out.push('#');
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The options (long names) of each `ferroflow SUB -h`, without `--help` and the global
/// `--quiet`/`--verbose`; and the subcommands `ferroflow --help` lists.
fn help_options() -> BTreeMap<String, BTreeSet<String>> {
    let top = bin().arg("--help").output().unwrap();
    let top = String::from_utf8(top.stdout).unwrap();
    let subcommands: Vec<String> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|s| *s != "help")
        .map(str::to_string)
        .collect();
    assert!(subcommands.len() > 15, "{top}");
    subcommands
        .into_iter()
        .map(|sub| {
            let help = bin().args([&sub, "-h"]).output().unwrap();
            let help = String::from_utf8(help.stdout).unwrap();
            let options = help
                .lines()
                .filter_map(|l| {
                    let l = l.trim_start();
                    let l = if l.len() > 4 && l.starts_with('-') && &l[2..4] == ", " { &l[4..] } else { l };
                    let name = l.strip_prefix("--")?;
                    let name: String =
                        name.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_').collect();
                    (!name.is_empty()).then_some(name)
                })
                .filter(|o| !["help", "quiet", "verbose"].contains(&o.as_str()))
                .collect();
            (sub, options)
        })
        .collect()
}

/// The README's synopses: in "## The command line", each ```text block whose first line is
/// `ferroflow SUB ...` is SUB's; its options are every `--name` in the block outside
/// backquotes (which quote other tools' command lines). The block starting `ferroflow [` holds
/// the global options.
fn readme_synopses() -> (BTreeMap<String, BTreeSet<String>>, BTreeSet<String>) {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md")).unwrap();
    let section = readme.split("\n## The command line\n").nth(1).expect("README has '## The command line'");
    let section = section.split("\n## ").next().unwrap();
    let long_options = |block: &str| -> BTreeSet<String> {
        let mut found = BTreeSet::new();
        let unquoted: String = block.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = unquoted.as_str();
        while let Some(i) = rest.find("--") {
            let before = rest[..i].chars().last();
            rest = &rest[i + 2..];
            let name: String =
                rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_').collect();
            if before.is_none_or(|c| !c.is_ascii_alphanumeric() && c != '-') && !name.is_empty() {
                found.insert(name.trim_end_matches('-').to_string());
            }
        }
        found
    };
    let mut subs: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut global = BTreeSet::new();
    for block in section.split("```text\n").skip(1) {
        let block = block.split("\n```").next().unwrap();
        let first = block.lines().next().unwrap_or_default();
        let mut words = first.split_whitespace();
        assert_eq!(words.next(), Some("ferroflow"), "a synopsis block starts with `ferroflow`: {block}");
        let sub = words.next().unwrap_or_default();
        let options: BTreeSet<String> = long_options(block);
        if sub.starts_with('[') {
            global.extend(options);
        } else {
            subs.entry(sub.to_string())
                .or_default()
                .extend(options.into_iter().filter(|o| !["help", "quiet", "verbose"].contains(&o.as_str())));
        }
    }
    (subs, global)
}

#[test]
fn the_readme_synopses_list_every_option_of_every_subcommand() {
    let help = help_options();
    let (readme, global) = readme_synopses();
    for o in ["quiet", "verbose", "version", "help"] {
        assert!(global.contains(o), "the README's global synopsis lacks --{o}: {global:?}");
    }
    let help_subs: BTreeSet<&String> = help.keys().collect();
    let readme_subs: BTreeSet<&String> = readme.keys().collect();
    assert_eq!(help_subs, readme_subs, "subcommands in --help vs README synopses");
    for (sub, options) in &help {
        let documented = &readme[sub];
        let missing: Vec<&String> = options.difference(documented).collect();
        let unknown: Vec<&String> = documented.difference(options).collect();
        assert!(missing.is_empty(), "README's `ferroflow {sub}` synopsis lacks {missing:?}");
        assert!(
            unknown.is_empty(),
            "README's `ferroflow {sub}` synopsis has options --help does not show: {unknown:?}"
        );
    }
}

/// `-o/--output` on every subcommand that writes a file; the old spellings still work.
#[test]
fn output_is_spelled_o_or_output_and_old_spellings_still_work() {
    let help = help_options();
    for sub in
        ["run", "optimize", "merge-partitions", "convert", "pipeline", "profile", "flowers", "fit", "keras-app", "demo"]
    {
        assert!(help[sub].contains("output"), "{sub} -h lacks --output: {:?}", help[sub]);
        let h = bin().args([sub, "-h"]).output().unwrap();
        assert!(String::from_utf8_lossy(&h.stdout).contains("-o, --output"), "{sub}");
    }
    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let mlp = fixture("tf/mlp.pb");
    let inputs = fixture("tf/mlp.inputs.npz");
    for (flag, file) in [("-o", "a.npz"), ("--output", "b.npz")] {
        let o =
            bin().args(["run", &mlp, "--inputs", &inputs, "--fetch", "Identity:0", flag, &d(file)]).output().unwrap();
        assert!(o.status.success() && Path::new(&d(file)).is_file(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let xplane = fixture("profile/tf_keras_fit.xplane.pb");
    for (flag, file) in [("-o", "a.json"), ("--chrome", "b.json")] {
        let o = bin().args(["profile", &xplane, flag, &d(file)]).output().unwrap();
        assert!(o.status.success() && Path::new(&d(file)).is_file(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let g = fixture("tf/seed_000.pbtxt");
    for args in
        [vec!["convert", &g, "-o", "c.pb"], vec!["convert", &g, "d.pbtxt"], vec!["convert", &g, "--output", "e.pb"]]
    {
        let out = d(args.last().unwrap());
        let args: Vec<String> = args[..args.len() - 1].iter().map(|a| a.to_string()).chain([out.clone()]).collect();
        let o = bin().args(&args).output().unwrap();
        assert!(o.status.success() && Path::new(&out).is_file(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    }
    let o = bin().args(["convert", &g]).output().unwrap();
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("<OUT>"));
    let o = bin().args(["convert", &g, &d("f.pb"), "-o", &d("g.pb")]).output().unwrap();
    assert!(!o.status.success(), "OUT and -o OUT together are refused");
}

#[test]
fn completions_for_every_shell() {
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef ferroflow"),
        ("fish", "complete -c ferroflow"),
        ("powershell", "Register-ArgumentCompleter"),
        ("elvish", "edit:completion"),
    ] {
        let o = bin().args(["completions", shell]).output().unwrap();
        assert!(o.status.success(), "{shell}: {}", String::from_utf8_lossy(&o.stderr));
        let script = String::from_utf8_lossy(&o.stdout);
        assert!(script.contains(marker) && script.contains("inspect-checkpoint"), "{shell}: {script}");
    }
    let o = bin().args(["completions", "tcsh"]).output().unwrap();
    assert!(!o.status.success());
}

/// `-q` and `-v` anywhere on the line; together they are refused.
#[test]
fn quiet_and_verbose_are_global() {
    let g = fixture("tf/seed_000.pbtxt");
    for args in [
        vec!["-q", "run", &g, "--fetch", "Mul:0"],
        vec!["run", &g, "--fetch", "Mul:0", "-vv"],
        vec!["--verbose", "info"],
    ] {
        let o = bin().args(&args).output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    }
    // By default the library's progress records are plain lines; -v adds each record's level and
    // source (`[LEVEL target] message`); -q leaves them out.
    let meta = fixture("tf/checkpoints/seed_003/model.ckpt-200.meta");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("f.pb");
    let convert = ["convert", &meta, "--fetch", "accuracy:0", "-o", out.to_str().unwrap()];
    let stderr_of = |global: &[&str]| {
        let o = bin().args(global).args(convert).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let e = stderr_of(&["-v"]);
    assert!(e.contains("[INFO ferroflow::commands::freeze] restored 21 variables from"), "{e}");
    let e = stderr_of(&[]);
    assert!(e.contains("restored 21 variables from") && !e.contains("[INFO"), "{e}");
    assert!(stderr_of(&["-q"]).is_empty());
    let o = bin().args(["-q", "-v", "info"]).output().unwrap();
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("cannot be used with"));
    let o = bin().arg("-V").output().unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), format!("ferroflow {}", env!("CARGO_PKG_VERSION")));
}

//! The global `-q/--quiet` and `-v/--verbose` flags: the level of the `log` facade the library
//! crates write their diagnostics through, and the logger that prints them on stderr: by
//! default informational records as plain lines (`Found 600 files belonging to 5 classes.`)
//! and warnings as `warning: message`; with `-v`, every record as `[LEVEL target] message`.
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

use log::{Level, LevelFilter, Log, Metadata, Record};

/// Whether `-q` was given (commands with progress output, such as `fit`, leave it out).
static QUIET: AtomicBool = AtomicBool::new(false);
/// Whether `-v` was given: records carry their level and target.
static DETAILED: AtomicBool = AtomicBool::new(false);

/// The level for `-q` (errors only), nothing (info: what the library reports as it works,
/// and warnings), `-v` (debug) and `-vv` or more (trace).
pub fn level(quiet: bool, verbose: u8) -> LevelFilter {
    match (quiet, verbose) {
        (true, _) => LevelFilter::Error,
        (false, 0) => LevelFilter::Info,
        (false, 1) => LevelFilter::Debug,
        (false, _) => LevelFilter::Trace,
    }
}

/// Installs the stderr logger at the level of `-q`/`-v`.
pub fn init(quiet: bool, verbose: u8) {
    QUIET.store(quiet, Ordering::Relaxed);
    DETAILED.store(verbose > 0, Ordering::Relaxed);
    static LOGGER: StderrLogger = StderrLogger;
    // Fails only if a logger is already set (then that one stays).
    let _ = log::set_logger(&LOGGER);
    log::set_max_level(level(quiet, verbose));
}

/// Whether `-q/--quiet` was given.
pub fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// `[LEVEL target] message` on stderr, one write per record.
struct StderrLogger;

impl Log for StderrLogger {
    fn enabled(&self, metadata: &Metadata) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let level = match record.level() {
            Level::Error => "ERROR",
            Level::Warn => "WARN",
            Level::Info => "INFO",
            Level::Debug => "DEBUG",
            Level::Trace => "TRACE",
        };
        let line = match record.level() {
            _ if DETAILED.load(Ordering::Relaxed) => format!("[{level} {}] {}\n", record.target(), record.args()),
            Level::Info => format!("{}\n", record.args()),
            Level::Warn => format!("warning: {}\n", record.args()),
            _ => format!("{}: {}\n", level.to_lowercase(), record.args()),
        };
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }

    fn flush(&self) {
        let _ = std::io::stderr().flush();
    }
}

#[cfg(test)]
mod tests {
    use log::LevelFilter;

    #[test]
    fn quiet_and_verbose_set_the_level() {
        assert_eq!(super::level(false, 0), LevelFilter::Info);
        assert_eq!(super::level(false, 1), LevelFilter::Debug);
        assert_eq!(super::level(false, 2), LevelFilter::Trace);
        assert_eq!(super::level(false, 5), LevelFilter::Trace);
        assert_eq!(super::level(true, 0), LevelFilter::Error);
    }
}

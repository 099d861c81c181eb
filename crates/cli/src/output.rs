//! Everything the CLI prints on stdout goes through here (the `out!` macro, [`Stdout`]): a
//! closed stdout — the reader of a pipe gone, as in `ferroflow profile DIR | head -1` — ends
//! the process quietly with status 0 (what a script piping into `head` expects), and any other
//! write error ends it with a one-line error and status 1. `println!` would panic instead.
//!
//! Library code that prints with `println!` (Keras's progress bar in `fit`) is covered by
//! [`install_panic_hook`]: the panic `println!` raises on a closed stdout also ends the process
//! quietly with status 0.
use std::fmt;
use std::io::{self, Write};

/// Writes `args` to stdout (the caller puts the line break in); see the module docs for what
/// happens when that fails.
pub fn print(args: fmt::Arguments<'_>) {
    let mut out = io::stdout().lock();
    if let Err(e) = out.write_fmt(args) {
        failed(&e);
    }
}

/// Writes `text` to stdout as it is (no line break added).
pub fn print_str(text: &str) {
    let mut out = io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()) {
        failed(&e);
    }
}

/// Ends the process after a failed write to stdout: quietly with status 0 when the reader has
/// gone (`EPIPE`), otherwise with an error line and status 1.
fn failed(e: &io::Error) -> ! {
    if e.kind() == io::ErrorKind::BrokenPipe {
        std::process::exit(0);
    }
    let _ = writeln!(io::stderr().lock(), "error: writing to stdout: {e}");
    std::process::exit(1);
}

/// Stdout as an `io::Write` for library functions that take a writer (the demo): writes and
/// flushes never return an error, they end the process as [`print`] does.
pub struct Stdout;

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match io::stdout().lock().write(buf) {
            Ok(n) => Ok(n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Err(e),
            Err(e) => failed(&e),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stdout().lock().flush().or_else(|e| failed(&e))
    }
}

/// Whether a panic's message is the one `print!`/`println!` raise when stdout is closed.
fn is_closed_stdout_panic(message: &str) -> bool {
    message.starts_with("failed printing to stdout") && message.contains("Broken pipe")
}

/// Makes the panic that `println!` raises on a closed stdout (in library code) end the
/// process quietly with status 0; every other panic is reported as before.
pub fn install_panic_hook() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("");
        if is_closed_stdout_panic(message) {
            std::process::exit(0);
        }
        default(info);
    }));
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_the_closed_stdout_panic_is_quiet() {
        assert!(super::is_closed_stdout_panic("failed printing to stdout: Broken pipe (os error 32)"));
        assert!(!super::is_closed_stdout_panic("failed printing to stdout: No space left on device (os error 28)"));
        assert!(!super::is_closed_stdout_panic("index out of bounds"));
    }
}

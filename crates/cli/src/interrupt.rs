//! Ctrl-C during a step: the cancellation it triggers, and the exit status after it.
use std::sync::OnceLock;

use ferroflow::runtime::Cancellation;

/// The exit status after Ctrl-C (128 + SIGINT, as shells report it).
pub const EXIT_INTERRUPTED: i32 = 130;

/// The cancellation Ctrl-C triggers, once `run` has installed its handler.
static CTRL_C: OnceLock<Cancellation> = OnceLock::new();

/// A cancellation that the first Ctrl-C triggers (the running step stops cleanly and its
/// error names the nodes it was running); a second Ctrl-C exits at once. `None` where the
/// handler cannot be installed (the default Ctrl-C behaviour stays).
pub fn interrupt_on_ctrl_c() -> Option<Cancellation> {
    let cancel = CTRL_C.get_or_init(Cancellation::new).clone();
    let handler = cancel.clone();
    let installed = ctrlc::set_handler(move || {
        if handler.is_cancelled() {
            std::process::exit(EXIT_INTERRUPTED);
        }
        eprintln!("interrupted: stopping the step (Ctrl-C again to exit at once)");
        handler.cancel();
    });
    installed.is_ok().then_some(cancel)
}

/// Whether Ctrl-C stopped the command.
pub fn interrupted() -> bool {
    CTRL_C.get().is_some_and(Cancellation::is_cancelled)
}

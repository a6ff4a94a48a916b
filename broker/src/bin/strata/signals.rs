//! SIGINT and SIGTERM for the client tools, which stop cleanly on either: `consume`
//! commits and leaves its group, `produce` stops reading and aborts its transaction
//! (instead of leaving it open until `transaction.timeout.ms`, holding back every
//! read_committed consumer of its partitions).

use tokio::signal::unix::{signal, Signal, SignalKind};

/// Both signals, registered once so none is lost between waits.
pub struct Shutdown {
    term: Signal,
    int: Signal,
}

impl Shutdown {
    /// Registers the handlers (from then on the signals no longer kill the process).
    pub fn new() -> std::io::Result<Shutdown> {
        Ok(Shutdown { term: signal(SignalKind::terminate())?, int: signal(SignalKind::interrupt())? })
    }

    /// Waits for either signal.
    pub async fn recv(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}

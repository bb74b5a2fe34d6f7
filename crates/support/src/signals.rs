//! The stop signals of a long-running command (`serve`, the app-server endpoint), caught from
//! the moment they are installed, so a supervisor that stops a server right after it said it is
//! up gets the drain, never the default kill.

/// SIGTERM and SIGINT, caught from the moment this is made (a signal that comes before anyone
/// waits is kept, not the default kill): made before a server says it is up.
pub struct StopSignals {
    terminate: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
}

impl StopSignals {
    pub fn install() -> std::io::Result<StopSignals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(StopSignals {
            terminate: signal(SignalKind::terminate())?,
            interrupt: signal(SignalKind::interrupt())?,
        })
    }

    /// The next stop signal.
    pub async fn next(&mut self) {
        tokio::select! {
            _ = self.terminate.recv() => {}
            _ = self.interrupt.recv() => {}
        }
    }
}

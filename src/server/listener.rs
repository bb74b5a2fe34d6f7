//! serve's accept loop, in the manner of mini-redis's `Listener`: accept, a bound on the sockets
//! held at once (a semaphore: a socket past it is closed at once), a backoff on accept errors (a
//! full file table must not spin the loop) and a stop. What a connection is served with is the
//! caller's ([`Listener::run`]'s `serve`).

use std::sync::Arc;

use jsonrpsee::server::StopHandle;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::settings::{ACCEPT_BACKOFF_MAX, ACCEPT_BACKOFF_MIN};

/// The bound socket and its bounds.
pub(super) struct Listener {
    pub(super) listener: TcpListener,
    /// One permit per socket held; the connection keeps it until it closes.
    pub(super) slots: Arc<Semaphore>,
    pub(super) stop: StopHandle,
}

impl Listener {
    /// Accept until the server stops; each socket that gets a slot goes to `serve` with it.
    pub(super) async fn run(self, mut serve: impl FnMut(TcpStream, OwnedSemaphorePermit)) {
        let mut backoff = ACCEPT_BACKOFF_MIN;
        loop {
            let accepted = tokio::select! {
                accepted = self.listener.accept() => accepted,
                _ = self.stop.clone().shutdown() => return,
            };
            let stream = match accepted {
                Ok((stream, _)) => {
                    backoff = ACCEPT_BACKOFF_MIN;
                    stream
                }
                Err(error) => {
                    tracing::warn!("accept failed ({error}); retrying in {backoff:?}");
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = self.stop.clone().shutdown() => return,
                    }
                    backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                    continue;
                }
            };
            match Arc::clone(&self.slots).try_acquire_owned() {
                Ok(permit) => serve(stream, permit),
                Err(_) => {
                    tracing::debug!("connection refused: --max-connections sockets are open");
                    drop(stream);
                }
            }
        }
    }
}

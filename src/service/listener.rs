//! The accept loop both servers stand on, in the manner of mini-redis's `Listener`: accept on
//! TCP or a Unix socket, a bound on the sockets held at once (each takes a slot the moment it is
//! accepted, so sockets that never speak cannot hold every descriptor), a backoff on accept
//! errors (a full file table must not spin the loop) and a stop. What a socket is served with,
//! and what one past the bound is told, are the caller's; [`unauthenticated`] is the deadline
//! both give a socket to make its first authenticated request.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The first pause after a failed accept; doubled per failure up to [`ACCEPT_BACKOFF_MAX`].
pub const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(50);
pub const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(2);

/// A bound listener.
pub enum Listener {
    Tcp(tokio::net::TcpListener),
    Unix(tokio::net::UnixListener),
}

/// An accepted socket.
pub enum Socket {
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
}

impl Listener {
    async fn accept(&self) -> std::io::Result<Socket> {
        match self {
            Listener::Tcp(listener) => listener.accept().await.map(|(stream, _)| {
                let _ = stream.set_nodelay(true);
                Socket::Tcp(stream)
            }),
            Listener::Unix(listener) => listener
                .accept()
                .await
                .map(|(stream, _)| Socket::Unix(stream)),
        }
    }
}

/// Accept until `stop()` resolves: each socket that gets one of `slots` goes to `serve` with
/// it, one past the bound to `full`.
pub async fn accept_loop<Stop, Stopped>(
    listener: Listener,
    slots: Arc<Semaphore>,
    stop: Stop,
    mut serve: impl FnMut(Socket, OwnedSemaphorePermit),
    mut full: impl FnMut(Socket),
) where
    Stop: Fn() -> Stopped,
    Stopped: Future<Output = ()>,
{
    let mut backoff = ACCEPT_BACKOFF_MIN;
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = stop() => return,
        };
        let socket = match accepted {
            Ok(socket) => {
                backoff = ACCEPT_BACKOFF_MIN;
                socket
            }
            Err(error) => {
                // Out of descriptors, most often: wait, never spin.
                tracing::warn!("accept failed ({error}); retrying in {backoff:?}");
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    () = stop() => return,
                }
                backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                continue;
            }
        };
        match Arc::clone(&slots).try_acquire_owned() {
            Ok(slot) => serve(socket, slot),
            Err(_) => {
                tracing::debug!("a socket past the connection bound");
                full(socket);
            }
        }
    }
}

/// Resolves once `deadline` has passed with `authenticated` still unset (the socket made no
/// authenticated request: it is to be closed); never, once it is set.
pub async fn unauthenticated(deadline: Duration, authenticated: Arc<AtomicBool>) {
    tokio::time::sleep(deadline).await;
    if authenticated.load(Ordering::SeqCst) {
        std::future::pending::<()>().await;
    }
}

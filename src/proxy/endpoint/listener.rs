//! The endpoint's listener: its own accept loop (each socket bounded and given a deadline), the
//! HTTP checks every request passes, `GET /status` and the upgrade into a client connection.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode};
use tokio::io::{AsyncRead, AsyncWrite};

use super::connection::Connection;
use super::{EndpointError, Shared, MAX_MESSAGE_BYTES};
pub(super) use crate::service::listener::{Listener, Socket};
use crate::support::sync::lock;

/// Accept sockets until the endpoint stops accepting (the service core's loop). Each socket
/// takes a connection slot from the moment it is accepted (one past the bound is answered 429
/// and closed) and must make an authenticated request within `upgrade_timeout`, else it is
/// closed: sockets that never speak cannot hold the listener's descriptors. An upgrade hands
/// its slot to the client connection it becomes.
pub(super) async fn accept_loop(listener: Listener, router: axum::Router, shared: Arc<Shared>) {
    let accepting = shared.accepting.clone();
    let serving = Arc::clone(&shared);
    let refusing = Arc::clone(&shared);
    crate::service::listener::accept_loop(
        listener,
        Arc::clone(&shared.slots),
        move || accepting.clone().cancelled_owned(),
        move |socket, slot| match socket {
            Socket::Tcp(stream) => serve_socket(&serving, &router, stream, slot),
            Socket::Unix(stream) => serve_socket(&serving, &router, stream, slot),
        },
        move |socket| {
            refusing.sockets.spawn(async move {
                use tokio::io::AsyncWriteExt;
                const FULL: &[u8] = b"HTTP/1.1 429 Too Many Requests\r\ncontent-type: text/plain\r\ncontent-length: 20\r\nconnection: close\r\n\r\ntoo many connections";
                let write = async {
                    match socket {
                        Socket::Tcp(mut stream) => stream.write_all(FULL).await,
                        Socket::Unix(mut stream) => stream.write_all(FULL).await,
                    }
                };
                let _ = tokio::time::timeout(Duration::from_secs(1), write).await;
            });
        },
    )
    .await;
}

/// A socket's slot, handed by the socket to the client connection it is upgraded into.
#[derive(Clone)]
pub(super) struct SocketSlot(Arc<Mutex<Option<tokio::sync::OwnedSemaphorePermit>>>);

/// Serve HTTP on one accepted socket (see [`accept_loop`]).
pub(super) fn serve_socket<I>(
    shared: &Arc<Shared>,
    router: &axum::Router,
    io: I,
    slot: tokio::sync::OwnedSemaphorePermit,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let slot = SocketSlot(Arc::new(Mutex::new(Some(slot))));
    let authenticated = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&authenticated);
    let carried = slot.clone();
    let service = tower::ServiceBuilder::new()
        .map_request(move |mut request: http::Request<hyper::body::Incoming>| {
            request.extensions_mut().insert(carried.clone());
            request
        })
        .map_response(move |response: Response| {
            // Only a client connection lifts the socket's deadline: a status read, a scrape
            // or a probe answered never does (a socket that keeps asking stays bounded).
            if response.status() == StatusCode::SWITCHING_PROTOCOLS {
                flag.store(true, Ordering::SeqCst);
            }
            response
        })
        .service(router.clone());
    let service = hyper_util::service::TowerToHyperService::new(service);
    let deadline = shared.upgrade_timeout;
    let stopping = shared.accepting.clone();
    shared.sockets.spawn(async move {
        let _slot = slot;
        let connection = hyper::server::conn::http1::Builder::new()
            .serve_connection(hyper_util::rt::TokioIo::new(io), service)
            .with_upgrades();
        tokio::pin!(connection);
        tokio::select! {
            served = connection.as_mut() => {
                if let Err(error) = served {
                    tracing::debug!("an HTTP connection ended: {error}");
                }
            }
            () = crate::service::listener::unauthenticated(deadline, authenticated) => {
                tracing::debug!("closed a socket that made no authenticated request within {deadline:?}");
            }
            () = stopping.cancelled() => {
                connection.as_mut().graceful_shutdown();
                let _ = tokio::time::timeout(Duration::from_secs(5), connection).await;
            }
        }
    });
}

/// Bind a Unix socket at `path`, readable and writable by its owner only. A stale socket left
/// by a process that died is replaced; one that answers, or any other file, is refused.
pub(super) fn bind_unix(path: &Path) -> Result<tokio::net::UnixListener, EndpointError> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let refused = |message: String| EndpointError::Socket {
        path: path.to_path_buf(),
        message,
    };
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(refused("another process listens there".into()));
            }
            std::fs::remove_file(path)
                .map_err(|error| refused(format!("cannot remove the stale socket: {error}")))?;
        }
        Ok(_) => return Err(refused("a file that is not a socket is there".into())),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(refused(error.to_string())),
    }
    let listener = tokio::net::UnixListener::bind(path).map_err(|source| EndpointError::Bind {
        addr: format!("unix://{}", path.display()),
        source,
    })?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|error| refused(format!("cannot make it private: {error}")))?;
    Ok(listener)
}

pub(super) fn refuse(status: StatusCode, why: &'static str) -> Response {
    (status, why).into_response()
}

/// `GET /status`, behind the same checks as an upgrade, for the operator only (it lists every
/// client's connections and threads).
pub(super) async fn status(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    match shared.guard.admit(&headers) {
        Err(refusal) => refusal.into_response(),
        Ok(caller) if !caller.operator => refuse(
            StatusCode::FORBIDDEN,
            "the status is the operator's (a named client sees its own threads only)",
        ),
        Ok(_) => axum::Json(shared.status()).into_response(),
    }
}

/// `GET /healthz`: the endpoint serves. No token and no data (a Kubernetes liveness probe).
pub(super) async fn healthz() -> Response {
    probe((StatusCode::OK, "ok\n").into_response())
}

/// A probe's answer closes its socket: a probe holds no connection slot past its answer (64
/// keep-alive probes would otherwise keep every client out).
fn probe(mut response: Response) -> Response {
    response.headers_mut().insert(
        http::header::CONNECTION,
        http::HeaderValue::from_static("close"),
    );
    response
}

/// `GET /readyz`: 200 when the endpoint can take a turn, else 503. No token and no data beyond
/// ready or not (a Kubernetes readiness probe).
pub(super) async fn readyz(State(shared): State<Arc<Shared>>) -> Response {
    probe(match shared.ready() {
        true => (StatusCode::OK, "ready\n").into_response(),
        false => (StatusCode::SERVICE_UNAVAILABLE, "not ready\n").into_response(),
    })
}

/// `GET /metrics`: the Prometheus text format, for the operator (as `/status`).
pub(super) async fn metrics(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    match shared.guard.admit(&headers) {
        Err(refusal) => refusal.into_response(),
        Ok(caller) if !caller.operator => refuse(
            StatusCode::FORBIDDEN,
            "the metrics are the operator's (a named client sees its own threads only)",
        ),
        Ok(_) => match shared.metrics_text() {
            Ok(text) => (
                StatusCode::OK,
                [(
                    http::header::CONTENT_TYPE,
                    crate::service::metrics::CONTENT_TYPE,
                )],
                text,
            )
                .into_response(),
            Err(_) => refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the metrics could not be written",
            ),
        },
    }
}

/// Every other HTTP request: checked, then upgraded to a client connection.
pub(super) async fn upgrade(
    State(shared): State<Arc<Shared>>,
    request: http::Request<Body>,
) -> Response {
    let caller = match shared.guard.admit(request.headers()) {
        Ok(caller) => caller,
        Err(refusal) => return refusal.into_response(),
    };
    // The socket's own slot becomes the client connection's.
    let slot = request
        .extensions()
        .get::<SocketSlot>()
        .and_then(|slot| lock(&slot.0).take());
    let Some(slot) = slot else {
        return refuse(StatusCode::TOO_MANY_REQUESTS, "too many connections");
    };
    let (accepted, pending) = match crate::support::ws::accept(request, MAX_MESSAGE_BYTES) {
        Ok(accepted) => accepted,
        Err(refusal) => return refusal.into_response(),
    };
    let connection_shared = Arc::clone(&shared);
    shared.connections.spawn(async move {
        let _slot = slot;
        if let Some((sender, receiver)) = pending.connect().await {
            Connection::run(connection_shared, caller, sender, receiver).await;
        }
    });
    accepted
}

//! The HTTP guard of every listener: what makes `clawbridge serve` and the `app-server`
//! endpoint safe to leave running on a machine with a web browser (docs/threat-model.md). Both
//! run the same checks, in this order, on plain HTTP requests and WebSocket upgrades alike,
//! before anything else:
//! 1. the `Host` check ([`HostCheck`]): the bound address, loopback names on its port and the
//!    operator's `--allow-host` entries only, so a DNS-rebinding page on a foreign name gets 403
//!    (none on a Unix socket, which no browser reaches by name);
//! 2. the `Origin` check ([`OriginCheck`]): a request that carries `Origin` (every browser page
//!    does) gets 403 unless the origin was listed with `--allow-origin` (serve only);
//! 3. (serve) CORS answers for the allowed origins, so their preflights succeed without a token;
//! 4. the bearer token ([`BearerCheck`]), compared in constant time, 401 otherwise; it names
//!    the caller (the operator or a named client).
//!
//! `serve` stacks them as tower layers ([`CheckLayer`]) around jsonrpsee; the endpoint calls
//! [`Guard::admit`]. A refusal is one [`Refusal`], made into either server's response.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use jsonrpsee::server::{HttpRequest, HttpResponse};
use tower::{Layer, Service};

pub use crate::service::clients::{Caller, KnownTokens};

/// The hosts a request may name: the bound address, loopback names on the bound port, and the
/// operator's `--allow-host` entries (`name`, `name:port` or `name:*`).
pub fn allowed_hosts(bound: SocketAddr, extra: &[String]) -> Vec<String> {
    let port = bound.port();
    let mut hosts = vec![
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
        bound.to_string(),
    ];
    hosts.extend(extra.iter().cloned());
    hosts.sort();
    hosts.dedup();
    hosts
}

/// Why a request was refused: its status and a message for the client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub status: http::StatusCode,
    pub message: String,
}

impl Refusal {
    fn new(status: http::StatusCode, message: impl Into<String>) -> Self {
        Refusal {
            status,
            message: message.into(),
        }
    }

    /// The refusal as an HTTP response of either server (`text/plain`; a 401 names the scheme).
    pub fn into_response<B: From<String>>(self) -> http::Response<B> {
        let mut response = http::Response::new(B::from(format!("clawbridge: {}\n", self.message)));
        *response.status_mut() = self.status;
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        if self.status == http::StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                http::header::WWW_AUTHENTICATE,
                http::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}

/// Admits requests whose `Host` is one of the allowed names: `name:port`, `name:*` (any port)
/// or `name` (no port), compared without case.
#[derive(Clone, Debug)]
pub struct HostCheck {
    allowed: Arc<Vec<(String, Option<String>)>>,
}

/// A `Host` value or an allowed entry as (name, port): `[::1]:80`, `name:*`, `name`.
fn split_host(text: &str) -> Option<(String, Option<String>)> {
    let text = text.trim().to_ascii_lowercase();
    let (name, port) = match text.strip_prefix('[') {
        Some(rest) => {
            let (inside, after) = rest.split_once(']')?;
            let port = match after {
                "" => None,
                after => Some(after.strip_prefix(':')?.to_string()),
            };
            (format!("[{inside}]"), port)
        }
        None => match text.rsplit_once(':') {
            Some((name, port)) => (name.to_string(), Some(port.to_string())),
            None => (text.clone(), None),
        },
    };
    let name_ok = !name.is_empty()
        && (name.starts_with('[')
            || name
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || ch == '.' || ch == '-' || ch == '_'));
    let port_ok = port.as_deref().is_none_or(|port| {
        port == "*" || (!port.is_empty() && port.chars().all(|ch| ch.is_ascii_digit()))
    });
    (name_ok && port_ok).then_some((name, port))
}

impl HostCheck {
    /// The check for `hosts` (see [`allowed_hosts`]); an entry that is not a host is a usage
    /// error naming it.
    pub fn new(hosts: &[String]) -> Result<Self, String> {
        let allowed = hosts
            .iter()
            .map(|host| {
                split_host(host).ok_or_else(|| {
                    format!("--allow-host {host}: not a host (name, name:port or name:*)")
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(HostCheck {
            allowed: Arc::new(allowed),
        })
    }
}

impl RequestCheck for HostCheck {
    fn admit(&self, headers: &http::HeaderMap) -> Result<Option<Caller>, Refusal> {
        let given = headers
            .get(http::header::HOST)
            .and_then(|value| value.to_str().ok())
            .and_then(split_host);
        let allowed = given.is_some_and(|(name, port)| {
            self.allowed.iter().any(|(allowed, allowed_port)| {
                *allowed == name
                    && match (allowed_port.as_deref(), port.as_deref()) {
                        (Some("*"), _) => true,
                        (expected, given) => expected == given,
                    }
            })
        });
        match allowed {
            true => Ok(None),
            false => Err(Refusal::new(
                http::StatusCode::FORBIDDEN,
                "unknown Host (a page on another name may not drive this server; --allow-host allows one)",
            )),
        }
    }
}

type BoxFuture<T, E> = Pin<Box<dyn std::future::Future<Output = Result<T, E>> + Send>>;

/// Set by the guard when a request of its connection passes every check (the token's names
/// the caller): serve's handshake deadline reads it, so a request counts as authenticated when
/// it is read, not when it is answered.
#[derive(Clone, Debug, Default)]
pub struct Admitted(pub Arc<std::sync::atomic::AtomicBool>);

/// One check on a request's headers: `Err(response)` refuses the request with that response;
/// an admitted one may say who it comes from (set as a request extension the methods read).
pub trait RequestCheck: Clone + Send + Sync + 'static {
    fn admit(&self, headers: &http::HeaderMap) -> Result<Option<Caller>, Refusal>;
}

/// A tower layer that runs one [`RequestCheck`] before the inner service.
#[derive(Clone, Debug)]
pub struct CheckLayer<C>(pub C);

impl<S, C: RequestCheck> Layer<S> for CheckLayer<C> {
    type Service = Checked<S, C>;
    fn layer(&self, inner: S) -> Self::Service {
        Checked {
            inner,
            check: self.0.clone(),
        }
    }
}

/// The service of a [`CheckLayer`].
#[derive(Clone, Debug)]
pub struct Checked<S, C> {
    inner: S,
    check: C,
}

impl<S, C, B> Service<HttpRequest<B>> for Checked<S, C>
where
    S: Service<HttpRequest<B>, Response = HttpResponse>,
    S::Future: Send + 'static,
    S::Error: 'static,
    C: RequestCheck,
{
    type Response = HttpResponse;
    type Error = S::Error;
    type Future = BoxFuture<HttpResponse, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: HttpRequest<B>) -> Self::Future {
        match self.check.admit(request.headers()) {
            Err(refusal) => {
                let response = refusal.into_response();
                Box::pin(async move { Ok(response) })
            }
            Ok(caller) => {
                if let Some(caller) = caller {
                    // The check that names a caller is the token's, the last of the guard:
                    // the connection this request came on is now authenticated.
                    if let Some(Admitted(flag)) = request.extensions().get::<Admitted>() {
                        flag.store(true, std::sync::atomic::Ordering::SeqCst);
                    }
                    request.extensions_mut().insert(caller);
                }
                Box::pin(self.inner.call(request))
            }
        }
    }
}

/// Refuses requests whose `Origin` is not on the operator's list.
#[derive(Clone, Debug)]
pub struct OriginCheck {
    allowed: Arc<Vec<String>>,
}

impl OriginCheck {
    /// The `Origin` check for the `--allow-origin` list (empty: every browser refused).
    pub fn new(allowed: &[String]) -> Self {
        let allowed = allowed
            .iter()
            .map(|origin| origin.trim_end_matches('/').to_ascii_lowercase())
            .collect();
        OriginCheck {
            allowed: Arc::new(allowed),
        }
    }
}

impl RequestCheck for OriginCheck {
    fn admit(&self, headers: &http::HeaderMap) -> Result<Option<Caller>, Refusal> {
        let Some(origin) = headers.get_all(http::header::ORIGIN).iter().find(|origin| {
            let origin = origin.to_str().unwrap_or_default().to_ascii_lowercase();
            !self.allowed.contains(&origin)
        }) else {
            return Ok(None);
        };
        let message = format!(
            "Origin {} is not allowed (a web page may not drive this server; start serve with --allow-origin to allow one)",
            String::from_utf8_lossy(origin.as_bytes())
        );
        tracing::warn!("refused a request: {message}");
        Err(Refusal::new(http::StatusCode::FORBIDDEN, message))
    }
}

/// Requires `Authorization: Bearer <token>` naming one of the known clients; with none known
/// (`--no-auth`) every request passes as the operator.
#[derive(Clone)]
pub struct BearerCheck {
    clients: Option<Arc<KnownTokens>>,
}

impl std::fmt::Debug for BearerCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BearerCheck")
            .field("enabled", &self.clients.is_some())
            .finish()
    }
}

impl BearerCheck {
    /// The bearer-token check: the operator's `token` (`None`: no token required) and the named
    /// clients (the SHA-256 of each one's token).
    pub fn new(token: Option<&str>, clients: &[crate::service::clients::ClientEntry]) -> Self {
        let clients = token.map(|token| Arc::new(KnownTokens::new(token, clients)));
        BearerCheck { clients }
    }
}

impl RequestCheck for BearerCheck {
    fn admit(&self, headers: &http::HeaderMap) -> Result<Option<Caller>, Refusal> {
        let Some(known) = self.clients.as_ref() else {
            return Ok(Some(Caller::operator()));
        };
        match known.caller(headers.get(http::header::AUTHORIZATION)) {
            Some(caller) => Ok(Some(caller)),
            None => Err(Refusal::new(
                http::StatusCode::UNAUTHORIZED,
                "missing or wrong bearer token (send Authorization: Bearer <token>; the server prints where its token file is)",
            )),
        }
    }
}

/// Every check of a listener, in order: what the endpoint runs on each request.
#[derive(Clone, Debug)]
pub struct Guard {
    /// `None` on a Unix socket (reached through the file system, never by a browser's name).
    pub host: Option<HostCheck>,
    pub origin: OriginCheck,
    pub bearer: BearerCheck,
}

impl Guard {
    /// The caller the request's token names, or why it is refused.
    pub fn admit(&self, headers: &http::HeaderMap) -> Result<Caller, Refusal> {
        let admitted = self.check(headers);
        // For the operator's log (-v): who was turned away and why, never a token; the reason
        // may quote a header, so its control characters are escaped.
        if let Err(refusal) = &admitted {
            tracing::info!(
                "refused a request: {} {}",
                refusal.status.as_u16(),
                crate::support::text::printable(&refusal.message)
            );
        }
        admitted
    }

    fn check(&self, headers: &http::HeaderMap) -> Result<Caller, Refusal> {
        if let Some(host) = &self.host {
            host.admit(headers)?;
        }
        self.origin.admit(headers)?;
        Ok(self.bearer.admit(headers)?.unwrap_or_else(Caller::operator))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names_and_the_bound_address_are_allowed_hosts() {
        let hosts = allowed_hosts("127.0.0.1:7077".parse().expect("addr"), &[]);
        assert_eq!(hosts, ["127.0.0.1:7077", "[::1]:7077", "localhost:7077"]);
        let check = HostCheck::new(&hosts).expect("hosts");
        assert!(HostCheck::new(&["not a host at all".to_string()]).is_err());
        let with = |host: &str| {
            let mut headers = http::HeaderMap::new();
            headers.insert(http::header::HOST, host.parse().expect("host"));
            check.admit(&headers).is_ok()
        };
        assert!(with("127.0.0.1:7077") && with("LOCALHOST:7077") && with("[::1]:7077"));
        assert!(!with("127.0.0.1:7078") && !with("evil.example:7077") && !with("localhost"));
        assert!(check.admit(&http::HeaderMap::new()).is_err(), "no Host");
        let any_port = HostCheck::new(&["bridge.internal:*".into(), "bare".into()]).expect("hosts");
        let mut headers = http::HeaderMap::new();
        headers.insert(
            http::header::HOST,
            "bridge.internal:9".parse().expect("host"),
        );
        assert!(any_port.admit(&headers).is_ok());
        headers.insert(http::header::HOST, "bare:9".parse().expect("host"));
        assert!(
            any_port.admit(&headers).is_err(),
            "a bare name allows no port"
        );
    }
}

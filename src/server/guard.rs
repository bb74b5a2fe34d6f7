//! The HTTP guard in front of every method: what makes `clawbridge serve` safe to leave running
//! on a machine with a web browser (docs/threat-model.md).
//!
//! Layout, outermost first, applied alike to plain HTTP requests and to WebSocket upgrades before
//! any method runs:
//! 1. the `Host` filter (jsonrpsee's [`HostFilterLayer`]): the bound address, loopback names and
//!    `--allow-host` entries only, so a DNS-rebinding page on a foreign name gets 403;
//! 2. the `Origin` check ([`origin_guard`]): a request that carries `Origin` (every browser page
//!    does) gets 403 unless the origin was listed with `--allow-origin`;
//! 3. CORS answers for the allowed origins (so their preflights succeed without a token);
//! 4. the bearer token ([`bearer_auth`]), compared in constant time, 401 otherwise.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use jsonrpsee::server::middleware::http::HostFilterLayer;
use jsonrpsee::server::{HttpBody, HttpRequest, HttpResponse};
use tower::{Layer, Service};

pub use crate::app::clients::{Caller, KnownTokens};

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

/// The `Host` filter for `hosts` (see [`allowed_hosts`]); an entry that is not a host is a usage
/// error naming it.
pub fn host_filter(hosts: &[String]) -> Result<HostFilterLayer, String> {
    for host in hosts {
        HostFilterLayer::new([host.as_str()])
            .map_err(|error| format!("--allow-host {host}: {error}"))?;
    }
    HostFilterLayer::new(hosts.iter().map(String::as_str)).map_err(|error| error.to_string())
}

fn refusal(status: u16, message: &str) -> HttpResponse {
    let mut response = HttpResponse::new(HttpBody::from(format!("clawbridge: {message}\n")));
    *response.status_mut() =
        http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::FORBIDDEN);
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

type BoxFuture<T, E> = Pin<Box<dyn std::future::Future<Output = Result<T, E>> + Send>>;

/// One check on a request's headers: `Err(response)` refuses the request with that response;
/// an admitted one may say who it comes from (set as a request extension the methods read).
pub trait RequestCheck: Clone + Send + Sync + 'static {
    fn admit(&self, headers: &http::HeaderMap) -> Result<Option<Caller>, Box<HttpResponse>>;
}

/// A tower layer that runs one [`RequestCheck`] before the inner service.
#[derive(Clone, Debug)]
pub struct CheckLayer<C>(C);

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
            Err(response) => Box::pin(async move { Ok(*response) }),
            Ok(caller) => {
                if let Some(caller) = caller {
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

/// The `Origin` check for the `--allow-origin` list.
pub fn origin_guard(allowed: &[String]) -> CheckLayer<OriginCheck> {
    let allowed = allowed
        .iter()
        .map(|origin| origin.trim_end_matches('/').to_ascii_lowercase())
        .collect();
    CheckLayer(OriginCheck {
        allowed: Arc::new(allowed),
    })
}

impl RequestCheck for OriginCheck {
    fn admit(&self, headers: &http::HeaderMap) -> Result<Option<Caller>, Box<HttpResponse>> {
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
        Err(Box::new(refusal(403, &message)))
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

/// The bearer-token check: the operator's `token` (`None`: no token required) and the named
/// clients (the SHA-256 of each one's token).
pub fn bearer_auth(
    token: Option<&str>,
    clients: &[crate::app::clients::ClientEntry],
) -> CheckLayer<BearerCheck> {
    let clients = token.map(|token| Arc::new(KnownTokens::new(token, clients)));
    CheckLayer(BearerCheck { clients })
}

impl RequestCheck for BearerCheck {
    fn admit(&self, headers: &http::HeaderMap) -> Result<Option<Caller>, Box<HttpResponse>> {
        let Some(known) = self.clients.as_ref() else {
            return Ok(Some(Caller::operator()));
        };
        if let Some(caller) = known.caller(headers.get(http::header::AUTHORIZATION)) {
            return Ok(Some(caller));
        }
        let mut response = refusal(
            401,
            "missing or wrong bearer token (send Authorization: Bearer <token>; serve prints where its token file is)",
        );
        response.headers_mut().insert(
            http::header::WWW_AUTHENTICATE,
            http::HeaderValue::from_static("Bearer"),
        );
        Err(Box::new(response))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names_and_the_bound_address_are_allowed_hosts() {
        let hosts = allowed_hosts("127.0.0.1:7077".parse().expect("addr"), &[]);
        assert_eq!(hosts, ["127.0.0.1:7077", "[::1]:7077", "localhost:7077"]);
        assert!(host_filter(&hosts).is_ok());
        assert!(host_filter(&["not a host at all".to_string()]).is_err());
    }
}

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
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tower::{Layer, Service};

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

/// One check on a request's headers: `Some(response)` refuses the request with that response.
pub trait RequestCheck: Clone + Send + Sync + 'static {
    fn refuse(&self, headers: &http::HeaderMap) -> Option<HttpResponse>;
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

    fn call(&mut self, request: HttpRequest<B>) -> Self::Future {
        match self.check.refuse(request.headers()) {
            Some(response) => Box::pin(async move { Ok(response) }),
            None => Box::pin(self.inner.call(request)),
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
    fn refuse(&self, headers: &http::HeaderMap) -> Option<HttpResponse> {
        let origin = headers
            .get_all(http::header::ORIGIN)
            .iter()
            .find(|origin| {
                let origin = origin.to_str().unwrap_or_default().to_ascii_lowercase();
                !self.allowed.contains(&origin)
            })?;
        let message = format!(
            "Origin {} is not allowed (a web page may not drive this server; start serve with --allow-origin to allow one)",
            String::from_utf8_lossy(origin.as_bytes())
        );
        tracing::warn!("refused a request: {message}");
        Some(refusal(403, &message))
    }
}

/// Requires `Authorization: Bearer <token>`; `None` lets every request through (`--no-auth`).
#[derive(Clone)]
pub struct BearerCheck {
    digest: Option<Arc<[u8; 32]>>,
}

impl std::fmt::Debug for BearerCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BearerCheck")
            .field("enabled", &self.digest.is_some())
            .finish()
    }
}

/// The bearer-token check (`None`: no token required).
pub fn bearer_auth(token: Option<&str>) -> CheckLayer<BearerCheck> {
    CheckLayer(BearerCheck {
        digest: token.map(|token| Arc::new(Sha256::digest(token.as_bytes()).into())),
    })
}

/// Constant-time check of an `Authorization` header: both sides are hashed first, so neither the
/// content nor the length of the token leaks through timing.
fn bearer_matches(header: Option<&http::HeaderValue>, digest: &[u8; 32]) -> bool {
    let Some(given) = header
        .map(http::HeaderValue::as_bytes)
        .and_then(|value| value.strip_prefix(b"Bearer "))
    else {
        return false;
    };
    let given: [u8; 32] = Sha256::digest(given).into();
    bool::from(given.ct_eq(digest))
}

impl RequestCheck for BearerCheck {
    fn refuse(&self, headers: &http::HeaderMap) -> Option<HttpResponse> {
        let digest = self.digest.as_ref()?;
        if bearer_matches(headers.get(http::header::AUTHORIZATION), digest) {
            return None;
        }
        let mut response = refusal(
            401,
            "missing or wrong bearer token (send Authorization: Bearer <token>; serve prints where its token file is)",
        );
        response.headers_mut().insert(
            http::header::WWW_AUTHENTICATE,
            http::HeaderValue::from_static("Bearer"),
        );
        Some(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_comparison_needs_the_exact_token() {
        let digest: [u8; 32] = Sha256::digest(b"s3cret-token-0123456789").into();
        let header = |value: &str| http::HeaderValue::from_str(value).expect("header");
        assert!(bearer_matches(
            Some(&header("Bearer s3cret-token-0123456789")),
            &digest
        ));
        assert!(!bearer_matches(
            Some(&header("Bearer s3cret-token-012345678")),
            &digest
        ));
        assert!(!bearer_matches(
            Some(&header("bearer s3cret-token-0123456789")),
            &digest
        ));
        assert!(!bearer_matches(None, &digest));
    }

    #[test]
    fn loopback_names_and_the_bound_address_are_allowed_hosts() {
        let hosts = allowed_hosts("127.0.0.1:7077".parse().expect("addr"), &[]);
        assert_eq!(hosts, ["127.0.0.1:7077", "[::1]:7077", "localhost:7077"]);
        assert!(host_filter(&hosts).is_ok());
        assert!(host_filter(&["not a host at all".to_string()]).is_err());
    }
}

//! The HTTP guard in front of every method: what makes `clawbridge serve` safe to leave running
//! on a machine with a web browser (docs/threat-model.md).
//!
//! Layout, outermost first, applied alike to plain HTTP requests and to WebSocket upgrades before
//! any method runs:
//! 1. the `Host` filter (jsonrpsee's [`HostFilterLayer`]): the bound address, loopback names and
//!    `--allow-host` entries only, so a DNS-rebinding page on a foreign name gets 403;
//! 2. the `Origin` check ([`OriginGuard`]): a request that carries `Origin` (every browser page
//!    does) gets 403 unless the origin was listed with `--allow-origin`;
//! 3. CORS answers for the allowed origins (so their preflights succeed without a token);
//! 4. the bearer token ([`BearerAuth`]), compared in constant time, 401 otherwise.

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

/// Refuses requests whose `Origin` is not on the operator's list.
#[derive(Clone, Debug)]
pub struct OriginGuardLayer {
    allowed: Arc<Vec<String>>,
}

impl OriginGuardLayer {
    pub fn new(allowed: &[String]) -> Self {
        let allowed = allowed
            .iter()
            .map(|origin| origin.trim_end_matches('/').to_ascii_lowercase())
            .collect();
        Self {
            allowed: Arc::new(allowed),
        }
    }
}

impl<S> Layer<S> for OriginGuardLayer {
    type Service = OriginGuard<S>;
    fn layer(&self, inner: S) -> Self::Service {
        OriginGuard {
            inner,
            allowed: Arc::clone(&self.allowed),
        }
    }
}

#[derive(Clone, Debug)]
pub struct OriginGuard<S> {
    inner: S,
    allowed: Arc<Vec<String>>,
}

impl<S, B> Service<HttpRequest<B>> for OriginGuard<S>
where
    S: Service<HttpRequest<B>, Response = HttpResponse>,
    S::Future: Send + 'static,
    S::Error: 'static,
{
    type Response = HttpResponse;
    type Error = S::Error;
    type Future = BoxFuture<HttpResponse, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: HttpRequest<B>) -> Self::Future {
        let origins = request.headers().get_all(http::header::ORIGIN);
        let refused = origins.iter().find(|origin| {
            let origin = origin.to_str().unwrap_or_default().to_ascii_lowercase();
            !self.allowed.contains(&origin)
        });
        if let Some(origin) = refused {
            let message = format!(
                "Origin {} is not allowed (a web page may not drive this server; start serve with --allow-origin to allow one)",
                String::from_utf8_lossy(origin.as_bytes())
            );
            tracing::warn!("refused a request: {message}");
            let response = refusal(403, &message);
            return Box::pin(async move { Ok(response) });
        }
        Box::pin(self.inner.call(request))
    }
}

/// Requires `Authorization: Bearer <token>`.
#[derive(Clone)]
pub struct BearerAuthLayer {
    digest: Option<Arc<[u8; 32]>>,
}

impl std::fmt::Debug for BearerAuthLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BearerAuthLayer")
            .field("enabled", &self.digest.is_some())
            .finish()
    }
}

impl BearerAuthLayer {
    /// `None` lets every request through (`--no-auth`).
    pub fn new(token: Option<&str>) -> Self {
        Self {
            digest: token.map(|token| Arc::new(Sha256::digest(token.as_bytes()).into())),
        }
    }
}

impl<S> Layer<S> for BearerAuthLayer {
    type Service = BearerAuth<S>;
    fn layer(&self, inner: S) -> Self::Service {
        BearerAuth {
            inner,
            digest: self.digest.clone(),
        }
    }
}

#[derive(Clone)]
pub struct BearerAuth<S> {
    inner: S,
    digest: Option<Arc<[u8; 32]>>,
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

impl<S, B> Service<HttpRequest<B>> for BearerAuth<S>
where
    S: Service<HttpRequest<B>, Response = HttpResponse>,
    S::Future: Send + 'static,
    S::Error: 'static,
{
    type Response = HttpResponse;
    type Error = S::Error;
    type Future = BoxFuture<HttpResponse, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: HttpRequest<B>) -> Self::Future {
        if let Some(digest) = &self.digest {
            let header = request.headers().get(http::header::AUTHORIZATION);
            if !bearer_matches(header, digest) {
                let mut response = refusal(
                    401,
                    "missing or wrong bearer token (send Authorization: Bearer <token>; serve prints where its token file is)",
                );
                response.headers_mut().insert(
                    http::header::WWW_AUTHENTICATE,
                    http::HeaderValue::from_static("Bearer"),
                );
                return Box::pin(async move { Ok(response) });
            }
        }
        Box::pin(self.inner.call(request))
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

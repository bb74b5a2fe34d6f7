//! serve's probes and metrics, answered before jsonrpsee sees the request: `GET /healthz` (the
//! process serves), `GET /readyz` (a run can start: not shutting down, a Codex to run it, and an
//! app-server that is not restarting or dead) and `GET /metrics` (OpenMetrics, the operator's
//! token; `service::metrics`). The probes carry no data beyond yes or no and need no token; they
//! are the outermost layer, so a probe that names the pod's address is answered too.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use jsonrpsee::server::{HttpBody, HttpRequest, HttpResponse};
use tower::{Layer, Service};

use super::bridge::Bridge;
use super::settings::CodexBinary;
use crate::service::guard::{Guard, Refusal};
use crate::service::metrics::{healthy, Metrics, CONTENT_TYPE};

type BoxFuture<T, E> = Pin<Box<dyn std::future::Future<Output = Result<T, E>> + Send>>;

/// The layer: the bridge it reports on and the guard `/metrics` passes.
#[derive(Clone)]
pub(super) struct ProbeLayer {
    pub(super) bridge: Arc<Bridge>,
    pub(super) guard: Guard,
}

impl<S> Layer<S> for ProbeLayer {
    type Service = Probed<S>;
    fn layer(&self, inner: S) -> Self::Service {
        Probed {
            inner,
            probes: self.clone(),
        }
    }
}

/// The service of a [`ProbeLayer`].
#[derive(Clone)]
pub(super) struct Probed<S> {
    inner: S,
    probes: ProbeLayer,
}

fn answer(status: http::StatusCode, content_type: &'static str, body: String) -> HttpResponse {
    let mut response = HttpResponse::new(HttpBody::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(content_type),
    );
    response
}

impl ProbeLayer {
    /// A run can start.
    fn ready(&self) -> bool {
        self.ready_with(&self.bridge.pool.status())
    }

    /// A run can start, `members` being the pool's now.
    fn ready_with(&self, members: &[crate::codex::client::pool::MemberStatus]) -> bool {
        let bridge = &self.bridge;
        let codex = matches!(bridge.config.codex_bin, CodexBinary::Found(_))
            || !bridge.config.remote_app_servers.is_empty();
        !bridge
            .shutting_down
            .load(std::sync::atomic::Ordering::SeqCst)
            && codex
            && (members.is_empty() || members.iter().any(|member| healthy(member.state)))
    }

    fn metrics(&self) -> Result<String, std::fmt::Error> {
        let members = self.bridge.pool.status();
        let mut metrics = Metrics::default();
        metrics.gauge(
            "ready",
            "1 when serve can start a run (what /readyz answers)",
            usize::from(self.ready_with(&members)),
        );
        metrics.gauge(
            "runs_running",
            "Runs whose turn is running",
            self.bridge.running_runs().len(),
        );
        metrics.gauge(
            "runs",
            "Runs serve keeps (running, and ended ones not yet pruned)",
            self.bridge.run_count(),
        );
        metrics.members(&members);
        metrics.text()
    }

    /// The answer to a probe or a scrape, or `None` for every other request.
    fn respond(&self, request: &http::Request<impl Sized>) -> Option<HttpResponse> {
        if request.method() != http::Method::GET {
            return None;
        }
        let text = "text/plain; charset=utf-8";
        // A probe's answer closes its socket: it holds no connection slot past its answer.
        let probe = |mut response: HttpResponse| {
            response.headers_mut().insert(
                http::header::CONNECTION,
                http::HeaderValue::from_static("close"),
            );
            response
        };
        Some(match request.uri().path() {
            "/healthz" => probe(answer(http::StatusCode::OK, text, "ok\n".into())),
            "/readyz" => probe(match self.ready() {
                true => answer(http::StatusCode::OK, text, "ready\n".into()),
                false => answer(
                    http::StatusCode::SERVICE_UNAVAILABLE,
                    text,
                    "not ready\n".into(),
                ),
            }),
            "/metrics" => match self.guard.admit(request.headers()) {
                Err(refusal) => refusal.into_response(),
                Ok(caller) if !caller.operator => Refusal {
                    status: http::StatusCode::FORBIDDEN,
                    message: "the metrics are the operator's".into(),
                }
                .into_response(),
                Ok(_) => match self.metrics() {
                    Ok(body) => answer(http::StatusCode::OK, CONTENT_TYPE, body),
                    Err(_) => answer(
                        http::StatusCode::INTERNAL_SERVER_ERROR,
                        text,
                        "the metrics could not be written\n".into(),
                    ),
                },
            },
            _ => return None,
        })
    }
}

impl<S, B> Service<HttpRequest<B>> for Probed<S>
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
        match self.probes.respond(&request) {
            Some(response) => Box::pin(async move { Ok(response) }),
            None => Box::pin(self.inner.call(request)),
        }
    }
}

//! Where spans go: OTLP over HTTP (protobuf or JSON) through the OpenTelemetry project's own
//! crates, behind a bounded queue that never holds up the caller.
//!
//! The SDK's batch processor runs its exports on a thread of its own; in front of it
//! [`Counting`] keeps the spans waiting under [`MAX_QUEUED_SPANS`] and counts every span ended,
//! exported, failed and dropped ([`SpanCounters`], shown in `/metrics`), so a collector that is
//! slow or gone costs spans, counted, never a forwarded message.
//!
//! The target follows the OpenTelemetry exporter variables when no flag names it:
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as it is), `OTEL_EXPORTER_OTLP_ENDPOINT` (plus
//! `/v1/traces`), `OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL` (`http/protobuf`, the default, or
//! `http/json`), `OTEL_EXPORTER_OTLP_[TRACES_]HEADERS`, `OTEL_SDK_DISABLED=true`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry::Context;
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider, Span, SpanData,
    SpanExporter, SpanProcessor,
};
use opentelemetry_sdk::Resource;

use super::spans::ContentPolicy;
use clawbridge_support::error::Error;

/// Spans ended and not yet exported at most; past it a span is dropped (counted).
pub const MAX_QUEUED_SPANS: u64 = 4096;
/// How long one export may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a stop waits for what is queued to be exported.
pub const SHUTDOWN_WAIT: Duration = Duration::from_secs(2);

/// The wire format of OTLP over HTTP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OtlpProtocol {
    Protobuf,
    Json,
}

impl std::str::FromStr for OtlpProtocol {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "http/protobuf" => Ok(Self::Protobuf),
            "http/json" => Ok(Self::Json),
            "grpc" => Err("OTLP over gRPC is not supported: use http/protobuf or http/json (a Collector or Phoenix takes both on its HTTP port)".to_string()),
            other => Err(format!("`{other}` is not an OTLP protocol (http/protobuf or http/json)")),
        }
    }
}

/// What the operator asked for (`--otel-endpoint`, `--otel-content`, `--otel-protocol`).
#[derive(Clone, Debug, Default)]
pub struct TraceSettings {
    /// The collector's base URL (`/v1/traces` is added unless the path already ends with it);
    /// `None`: the OpenTelemetry variables decide, and without them nothing is traced.
    pub endpoint: Option<String>,
    pub protocol: Option<OtlpProtocol>,
    pub content: ContentPolicy,
    /// Live: where to record what the collector took (`<transcript>/otel-sent.jsonl`).
    pub sent_record: Option<std::path::PathBuf>,
    /// Afterwards (`export-otel`): what a live trace sent already, left out.
    pub skip_sent: Option<Arc<super::sent::Sent>>,
}

/// Spans by what became of them.
#[derive(Debug, Default)]
pub struct SpanCounters {
    pub ended: AtomicU64,
    pub exported: AtomicU64,
    pub failed: AtomicU64,
    pub dropped: AtomicU64,
    queued: AtomicU64,
}

impl SpanCounters {
    /// `(ended, exported, failed, dropped)`.
    pub fn snapshot(&self) -> (u64, u64, u64, u64) {
        (
            self.ended.load(Ordering::Relaxed),
            self.exported.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
            self.dropped.load(Ordering::Relaxed),
        )
    }
}

/// The batch processor behind a bound that counts.
#[derive(Debug)]
struct Counting {
    inner: BatchSpanProcessor,
    counters: Arc<SpanCounters>,
    /// `export-otel`: traces held until their top span ends, those sent live left out.
    skip: Option<(
        Arc<super::sent::Sent>,
        std::sync::Mutex<super::sent::Holding>,
    )>,
}

impl Counting {
    /// What is still held goes out (before a flush or the end).
    fn release_held(&self) {
        if let Some((_, holding)) = &self.skip {
            let rest = clawbridge_support::sync::lock(holding).rest();
            for span in rest {
                self.pass(span);
            }
        }
    }
}

impl SpanProcessor for Counting {
    fn on_start(&self, span: &mut Span, context: &Context) {
        self.inner.on_start(span, context);
    }

    fn on_end(&self, span: SpanData) {
        match &self.skip {
            Some((sent, holding)) => {
                let ready = clawbridge_support::sync::lock(holding).ended(sent, span);
                for span in ready {
                    self.pass(span);
                }
            }
            None => self.pass(span),
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.release_held();
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.release_held();
        self.inner.shutdown_with_timeout(timeout)
    }

    /// The provider's resource (`service.name` and the rest) reaches the exporter only through
    /// this: without it every span would go out as an unknown service.
    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

impl Counting {
    fn pass(&self, span: SpanData) {
        self.counters.ended.fetch_add(1, Ordering::Relaxed);
        let queued = self.counters.queued.fetch_add(1, Ordering::Relaxed);
        if queued >= MAX_QUEUED_SPANS {
            self.counters.queued.fetch_sub(1, Ordering::Relaxed);
            if self.counters.dropped.fetch_add(1, Ordering::Relaxed) == 0 {
                tracing::warn!(
                    "traces: the exporter is behind ({MAX_QUEUED_SPANS} spans waiting); spans are dropped and counted (clawbridge_spans_total{{outcome=\"dropped\"}})"
                );
            }
            return;
        }
        self.inner.on_end(span);
    }
}

/// The OTLP exporter, counting what it sent.
#[derive(Debug)]
struct CountingExporter<E> {
    inner: E,
    counters: Arc<SpanCounters>,
    warned: std::sync::atomic::AtomicBool,
    /// The collector's URL, and how a log line shows it (its credentials redacted).
    target: (String, String),
    /// Live with a transcript: what the collector took is recorded for `export-otel`.
    sent: Option<Arc<super::sent::SentLog>>,
}

impl<E: SpanExporter> SpanExporter for CountingExporter<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len() as u64;
        let keys = self
            .sent
            .as_ref()
            .map(|_| super::sent::SentLog::keys(&batch));
        let result = self.inner.export(batch).await;
        self.counters.queued.fetch_sub(spans, Ordering::Relaxed);
        if let (Ok(()), Some(log), Some(keys)) = (&result, &self.sent, keys) {
            log.record(keys);
        }
        match &result {
            Ok(()) => self.counters.exported.fetch_add(spans, Ordering::Relaxed),
            Err(error) => {
                if !self.warned.swap(true, Ordering::Relaxed) {
                    let error = error.to_string().replace(&self.target.0, &self.target.1);
                    tracing::warn!(
                        "traces: an export failed ({}); failures are counted",
                        clawbridge_support::redact::redact_credentials(&error)
                    );
                }
                self.counters.failed.fetch_add(spans, Ordering::Relaxed)
            }
        };
        result
    }

    fn shutdown_with_timeout(&mut self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// A running export: the provider, its tracer and counters, and where it sends.
pub struct TraceExport {
    provider: SdkTracerProvider,
    pub counters: Arc<SpanCounters>,
    /// The traces URL, for the start notice.
    pub target: String,
    pub content: ContentPolicy,
}

impl std::fmt::Debug for TraceExport {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("TraceExport")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

/// The traces URL a base URL names: `/v1/traces` added to its path (once), before its query.
fn traces_url(base: &str) -> String {
    let Ok(mut url) = url::Url::parse(base) else {
        // Not a URL the exporter can use either: it says so when it tries.
        return base.to_string();
    };
    let path = url.path().trim_end_matches('/').to_string();
    if !path.ends_with("/v1/traces") {
        url.set_path(&format!("{path}/v1/traces"));
    }
    url.to_string()
}

fn variable(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .filter(|value| !value.trim().is_empty())
}

impl TraceExport {
    /// The traces URL `settings` and the environment name; `None` when nothing asks for traces
    /// (no endpoint and no variable, or `OTEL_SDK_DISABLED=true` without a flag).
    fn target(settings: &TraceSettings) -> Option<String> {
        if settings.endpoint.is_none()
            && variable("OTEL_SDK_DISABLED").is_some_and(|value| value.eq_ignore_ascii_case("true"))
        {
            return None;
        }
        match &settings.endpoint {
            Some(base) => Some(traces_url(base)),
            None => match (
                variable("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
                variable("OTEL_EXPORTER_OTLP_ENDPOINT"),
            ) {
                (Some(url), _) => Some(url),
                (None, Some(base)) => Some(traces_url(&base)),
                (None, None) => None,
            },
        }
    }

    /// The collector `settings` name, as logs show it (credentials redacted); `None` when
    /// nothing asks for traces.
    pub fn target_for_log(settings: &TraceSettings) -> Option<String> {
        Self::target(settings).map(|target| clawbridge_support::redact::url_for_log(&target))
    }

    /// The export `settings` and the environment ask for; `None` when nothing asks for traces.
    /// Builds the HTTP client on a thread of its own (it may not be built inside the runtime).
    pub fn start(settings: &TraceSettings) -> Result<Option<TraceExport>, Error> {
        let flag = |message: String| Error::InvalidArgument {
            flag: "--otel-endpoint".to_string(),
            message,
        };
        let Some(target) = Self::target(settings) else {
            return Ok(None);
        };
        if !(target.starts_with("http://") || target.starts_with("https://")) {
            return Err(flag(format!(
                "`{}` is not an http:// or https:// URL (OTLP over HTTP)",
                clawbridge_support::redact::url_for_log(&target)
            )));
        }
        let protocol = match settings.protocol {
            Some(protocol) => protocol,
            None => match variable("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                .or_else(|| variable("OTEL_EXPORTER_OTLP_PROTOCOL"))
            {
                Some(text) => text.parse().map_err(|message| Error::InvalidArgument {
                    flag: "OTEL_EXPORTER_OTLP_PROTOCOL".to_string(),
                    message,
                })?,
                None => OtlpProtocol::Protobuf,
            },
        };
        let counters = Arc::new(SpanCounters::default());
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(match protocol {
                OtlpProtocol::Protobuf => Protocol::HttpBinary,
                OtlpProtocol::Json => Protocol::HttpJson,
            })
            .with_endpoint(target.clone())
            .with_timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|error| {
                let shown = clawbridge_support::redact::url_for_log(&target);
                flag(format!(
                    "{shown}: {}",
                    error.to_string().replace(&target, &shown)
                ))
            })?;
        let exporter = CountingExporter {
            inner: exporter,
            counters: Arc::clone(&counters),
            warned: Default::default(),
            target: (
                target.clone(),
                clawbridge_support::redact::url_for_log(&target),
            ),
            sent: settings.sent_record.clone().map(|path| {
                Arc::new(super::sent::SentLog::new(
                    path,
                    clawbridge_support::redact::url_for_log(&target),
                ))
            }),
        };
        let batch = BatchSpanProcessor::builder(exporter)
            .with_batch_config(
                BatchConfigBuilder::default()
                    // Room beyond the counting bound, so the SDK itself never drops uncounted.
                    .with_max_queue_size(MAX_QUEUED_SPANS as usize + 512)
                    .with_max_export_batch_size(512)
                    .with_scheduled_delay(Duration::from_millis(500))
                    .build(),
            )
            .build();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(Counting {
                inner: batch,
                counters: Arc::clone(&counters),
                skip: settings
                    .skip_sent
                    .clone()
                    .map(|sent| (sent, std::sync::Mutex::new(Default::default()))),
            })
            .with_resource(
                Resource::builder()
                    .with_service_name("clawbridge")
                    .with_attribute(opentelemetry::KeyValue::new(
                        "service.version",
                        env!("CARGO_PKG_VERSION"),
                    ))
                    .build(),
            )
            .build();
        Ok(Some(TraceExport {
            provider,
            counters,
            target,
            content: settings.content,
        }))
    }

    /// The tracer spans are made with.
    pub fn tracer(&self) -> SdkTracer {
        self.provider.tracer("clawbridge")
    }

    /// Export what is queued, then stop: blocks [`SHUTDOWN_WAIT`] at most (a stalled collector
    /// holds no drain longer; call it off the runtime's threads, e.g. in `spawn_blocking`).
    pub fn shutdown(&self) {
        if let Err(error) = self.provider.shutdown_with_timeout(SHUTDOWN_WAIT) {
            tracing::warn!(
                "traces: the last export did not finish within {SHUTDOWN_WAIT:?}: {}",
                clawbridge_support::redact::redact_credentials(&error.to_string())
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_base_url_gets_the_traces_path_once() {
        assert_eq!(
            traces_url("http://127.0.0.1:6006"),
            "http://127.0.0.1:6006/v1/traces"
        );
        assert_eq!(
            traces_url("http://127.0.0.1:6006/"),
            "http://127.0.0.1:6006/v1/traces"
        );
        assert_eq!(
            traces_url("http://127.0.0.1:4318/v1/traces"),
            "http://127.0.0.1:4318/v1/traces"
        );
        // A query stays after the path.
        assert_eq!(
            traces_url("http://127.0.0.1:4318/base/?api_key=k1"),
            "http://127.0.0.1:4318/base/v1/traces?api_key=k1"
        );
    }

    #[test]
    fn grpc_and_unknown_protocols_are_refused_with_a_reason() {
        assert!("grpc"
            .parse::<OtlpProtocol>()
            .expect_err("grpc")
            .contains("http/protobuf"));
        assert!("thrift".parse::<OtlpProtocol>().is_err());
        assert_eq!("http/json".parse::<OtlpProtocol>(), Ok(OtlpProtocol::Json));
    }
}

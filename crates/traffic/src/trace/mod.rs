//! Traces: what clawbridge sees of a Codex turn, as OpenTelemetry spans an operator's own tools
//! read (Arize Phoenix, Jaeger, Langfuse, an OpenTelemetry Collector).
//!
//! clawbridge sees more of a turn than any other component: the JSON-RPC both ways and, with a
//! capture, every model request and response with its usage. [`spans::SpanBook`] turns that into
//! one trace per turn (model calls, tool calls and approvals under it, a thread's turns one
//! session); [`export::TraceExport`] sends the spans over OTLP/HTTP behind a bounded, counted
//! queue. Two ways in, one book:
//! - live ([`LiveTrace`]): `app-server` (the stdio slot and the endpoint) hands the book each
//!   message its observer sees and each model call its capture writer files, off the
//!   forwarding path;
//! - afterwards ([`offline::export_folder`], `clawbridge export-otel DIR`): the same messages
//!   and model calls read back from a transcript and capture folder, timed by Codex's own
//!   `emittedAtMs`.
//!
//! Attribute names: [`semconv`] (OpenTelemetry GenAI and OpenInference, cited there).

pub mod context;
pub mod export;
pub mod offline;
pub mod semconv;
pub mod sent;
pub mod spans;

use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use serde_json::Value;

use clawbridge_codex::protocol::wire::W3cTraceContext;

pub use export::{OtlpProtocol, SpanCounters, TraceExport, TraceSettings};
pub use spans::{agent_of_workspace, ContentPolicy, ModelCall, Side, SpanBook};

/// A live trace: the book, fed by the observer and the capture writer, and its export.
pub struct LiveTrace {
    book: Mutex<SpanBook>,
    export: TraceExport,
    salt: context::Salt,
}

impl std::fmt::Debug for LiveTrace {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("LiveTrace")
            .field("export", &self.export)
            .finish_non_exhaustive()
    }
}

impl LiveTrace {
    /// A live trace when `settings` or the environment ask for one; `captured_calls` when a
    /// capture writer will hand in the model calls.
    pub fn start(
        settings: &TraceSettings,
        captured_calls: bool,
    ) -> Result<Option<Arc<LiveTrace>>, clawbridge_support::error::Error> {
        let Some(export) = TraceExport::start(settings)? else {
            return Ok(None);
        };
        let salt = context::Salt::draw();
        let mut book = SpanBook::new(export.tracer(), settings.content, captured_calls);
        book.set_salt(salt);
        Ok(Some(Arc::new(LiveTrace {
            book: Mutex::new(book),
            export,
            salt,
        })))
    }

    /// Where the spans go, for the start notice (its password and query values redacted).
    pub fn target(&self) -> String {
        clawbridge_support::redact::url_for_log(&self.export.target)
    }

    /// What of the conversation spans carry.
    pub fn content(&self) -> ContentPolicy {
        self.export.content
    }

    pub fn counters(&self) -> &SpanCounters {
        &self.export.counters
    }

    /// The `trace` to put on a `turn/start` that connection `stream` forwards as request
    /// `request` (its id as JSON text): the ids the book gives the turn's span, under the
    /// client's own `trace` when it sent one.
    pub fn turn_trace(
        &self,
        stream: usize,
        request: &str,
        client: Option<&W3cTraceContext>,
    ) -> W3cTraceContext {
        let parent = client.and_then(context::parent_of);
        context::to_wire(&context::turn_context(
            &self.salt,
            stream,
            request,
            parent.as_ref(),
        ))
    }

    /// Name thread `thread`'s turns after `agent` from now on (told before its `turn/start`
    /// reaches the book: `serve` knows each run's agent, its connection's `initialize` names
    /// only clawbridge).
    pub fn name_thread(&self, thread: &str, agent: &str) {
        if let Ok(mut book) = self.book.lock() {
            book.name_thread(thread, agent, SystemTime::now());
        }
    }

    /// A message seen now.
    pub fn message(&self, stream: usize, side: Side, message: &Value) {
        if let Ok(mut book) = self.book.lock() {
            book.message(stream, side, message, SystemTime::now());
        }
    }

    /// A model call filed now.
    pub fn model_call(&self, call: &ModelCall) {
        if let Ok(mut book) = self.book.lock() {
            book.model_call(call, SystemTime::now());
        }
    }

    /// A member of the pool back (or given up) now, down since `since`.
    pub fn member_restart(&self, member: &str, reason: &str, since: SystemTime) {
        if let Ok(mut book) = self.book.lock() {
            book.member_restart(member, reason, since, SystemTime::now());
        }
    }

    /// End what is open and send what is queued (off the runtime's threads).
    pub async fn finish(self: Arc<Self>) {
        if let Ok(mut book) = self.book.lock() {
            book.finish(SystemTime::now());
        }
        let this = Arc::clone(&self);
        let flushed = tokio::task::spawn_blocking(move || this.export.shutdown());
        // The exporter gives up within its wait; this one bounds the thread it runs on too.
        let _ = tokio::time::timeout(export::SHUTDOWN_WAIT * 2, flushed).await;
    }
}

/// The spans a unit test's tracer finished, kept in memory. The SDK has one
/// (`InMemorySpanExporter`), behind its `testing` feature; turning that on for the tests would
/// give the test build an `opentelemetry_sdk` (and everything above it) of its own, so the
/// tests' build and the product's could not be one build.
#[cfg(test)]
pub(crate) mod collected {
    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::trace::{SpanData, SpanExporter};
    use std::sync::{Arc, Mutex};

    /// A clone shares the spans: one goes to the provider, the test keeps the other.
    #[derive(Clone, Debug, Default)]
    pub struct Collected {
        spans: Arc<Mutex<Vec<SpanData>>>,
    }

    impl Collected {
        /// Every span finished so far, in the order they ended.
        pub fn get_finished_spans(&self) -> Result<Vec<SpanData>, String> {
            self.spans
                .lock()
                .map(|spans| spans.clone())
                .map_err(|error| error.to_string())
        }
    }

    impl SpanExporter for Collected {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            let mut spans = self.spans.lock().map_err(|error| {
                opentelemetry_sdk::error::OTelSdkError::InternalFailure(error.to_string())
            })?;
            spans.extend(batch);
            Ok(())
        }
    }
}

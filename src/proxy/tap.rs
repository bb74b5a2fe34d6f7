//! The taps of `app-server`: copies of each message that never hold it up. The observer (the
//! schema check of every message, [`super::observe`]) and the transcript writer
//! ([`super::transcript`], on a thread of its own) are each fed through a queue bounded in
//! bytes; both faces (the stdio slot and the endpoint's connections) start them here.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::observe::{self, Observer};
use super::transcript::Transcript;
use super::{Direction, ProxyError};
use crate::codex::schema::conformance::WireSchemas;
use crate::codex::schema::{version_in, SchemaCache};
use crate::support::task::Tasks;
use crate::traffic::capture::live::Known;

/// A running observer: its queue, and how to stop it.
pub(crate) struct ObserverTap {
    pub(crate) lines: observe::ObserverQueue,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
}

impl ObserverTap {
    /// Start the observer on `tasks`: `schema` checks what it sees, `log` gets the
    /// `conformance.jsonl` lines, `known` what captures need, `audit` (`--audit`) each turn.
    pub(crate) fn start(
        tasks: &Tasks,
        schema: Option<observe::SchemaSource>,
        log: Option<PathBuf>,
        known: Arc<Mutex<Known>>,
        audit: Option<super::audit::LiveAudit>,
    ) -> Self {
        let (lines, observed) = observe::observer_queue(observe::OBSERVER_QUEUE_BYTES);
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let observer = Observer::new(schema, log, known).with_audit(audit);
        let task = tasks.spawn(observer.run(observed, stopped));
        ObserverTap { lines, stop, task }
    }

    /// Let the observer finish what it holds (bounded) and write its per-method summary.
    pub(crate) async fn finish(self) {
        let _ = self.stop.send(());
        let _ = tokio::time::timeout(Duration::from_secs(5), self.task).await;
    }
}

/// The live trace `settings` (or the OpenTelemetry variables) ask for, told to `known` so that
/// the observer and the capture writer feed it; its target is logged once.
pub(crate) fn start_trace(
    settings: &crate::traffic::trace::TraceSettings,
    captured_calls: bool,
    known: &Arc<Mutex<Known>>,
) -> Result<Option<Arc<crate::traffic::trace::LiveTrace>>, ProxyError> {
    let trace = crate::traffic::trace::LiveTrace::start(settings, captured_calls)?;
    if let Some(trace) = &trace {
        tracing::info!(
            "traces: OTLP to {} (content: {:?})",
            trace.target(),
            trace.content()
        );
        if let Ok(mut known) = known.lock() {
            known.trace = Some(Arc::clone(trace));
        }
    }
    Ok(trace)
}

/// The schemas of `binary`, from the cache or generated, on a blocking thread: the params
/// schemas (required) and the whole protocol's (the checks of every message; a folder without
/// them, such as an older cache entry, leaves only the params checked).
pub(crate) fn load_schema(
    tasks: &Tasks,
    binary: PathBuf,
    cache: Option<PathBuf>,
) -> observe::SchemaSource {
    tasks.spawn_blocking(move || {
        let cache = match cache {
            Some(root) => SchemaCache::at(root),
            None => SchemaCache::user().ok_or("no cache folder (HOME is not set)")?,
        };
        let mut command = std::process::Command::new(&binary);
        command.arg("--version");
        let output =
            crate::support::process::run_bounded(command, b"", Duration::from_secs(10), 4096)
                .map_err(|error| format!("{} --version: {error}", binary.display()))?;
        let version = version_in(&String::from_utf8_lossy(&output.stdout))
            .ok_or_else(|| format!("{} --version printed no version", binary.display()))?;
        let (params, generated) = cache
            .schemas_for(&binary, &version)
            .map_err(|error| error.to_string())?;
        let wire = cache
            .dir_for(&binary, &version)
            .and_then(|dir| WireSchemas::load(&dir, &version))
            .map_err(|error| error.to_string());
        Ok(observe::LoadedSchemas {
            params,
            wire,
            generated,
        })
    })
}

/// Bytes of lines waiting for the transcript writer at most.
const TRANSCRIPT_QUEUE_BYTES: usize = 256 * 1024 * 1024;

/// A transcript of `dir` written on a thread of its own, and the queue that feeds it (bounded in
/// bytes: a line waits for nothing on disk).
pub(crate) fn transcript_writer(
    dir: &Path,
    tasks: &Tasks,
) -> Result<(TranscriptQueue, tokio::task::JoinHandle<()>), ProxyError> {
    let mut transcript = Transcript::open(dir)?;
    let (sender, mut lines) = crate::support::queue::byte_queue::<(
        Direction,
        Vec<u8>,
        std::time::SystemTime,
    )>(TRANSCRIPT_QUEUE_BYTES, None);
    let task = tasks.spawn_blocking(move || {
        while let Some((direction, line, at)) = lines.blocking_recv() {
            transcript.record_at(direction, &line, at);
        }
    });
    let queue = TranscriptQueue {
        sender,
        warned: Arc::new(std::sync::atomic::AtomicBool::new(false)),
    };
    Ok((queue, task))
}

/// The pumps' side of the transcript writer.
#[derive(Clone)]
pub(crate) struct TranscriptQueue {
    sender: crate::support::queue::ByteSender<(Direction, Vec<u8>, std::time::SystemTime)>,
    warned: Arc<std::sync::atomic::AtomicBool>,
}

impl TranscriptQueue {
    /// Queue a line if the byte budget has room; never waits.
    pub(crate) fn offer(&self, direction: Direction, line: Vec<u8>) {
        if !self
            .sender
            .offer(line.len(), (direction, line, std::time::SystemTime::now()))
            && !self.warned.swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            tracing::warn!(
                "transcript: the writer is behind; a message was forwarded but not recorded"
            );
        }
    }
}

//! The taps of `app-server`: copies of each message that never hold it up. The observer (the
//! schema check of every message, [`super`]) and the transcript writer
//! ([`clawbridge_traffic::transcript`], on a thread of its own) are each fed through a queue bounded in
//! bytes; both faces (the stdio slot and the endpoint's connections) start them here.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{self as observe, Observer};
use clawbridge_codex::protocol::wire::Direction;
use clawbridge_codex::schema::conformance::WireSchemas;
use clawbridge_codex::schema::{version_in, SchemaCache};
use clawbridge_support::task::Tasks;
use clawbridge_traffic::capture::live::Known;

/// A running observer: its queue, and how to stop it.
pub struct ObserverTap {
    pub lines: observe::ObserverQueue,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
    schema_pending: Arc<std::sync::atomic::AtomicBool>,
}

impl ObserverTap {
    /// Start the observer on `tasks`: `schema` checks what it sees, `log` gets the
    /// `conformance.jsonl` lines, `known` what captures need and the live trace it tells each
    /// message (every face's: the stdio slot's, the endpoint's connections', `serve`'s
    /// app-servers'), `audit` (`--audit`) each turn.
    pub fn start(
        tasks: &Tasks,
        schema: Option<observe::SchemaSource>,
        log: Option<PathBuf>,
        known: Arc<Mutex<Known>>,
        audit: Option<super::audit::LiveAudit>,
    ) -> Self {
        let (lines, observed) = observe::observer_queue(observe::OBSERVER_QUEUE_BYTES);
        let lines = lines.feeding(Arc::clone(&known));
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let observer = Observer::new(schema, log, known).with_audit(audit);
        let schema_pending = Arc::clone(&observer.schema_pending);
        let task = tasks.spawn(observer.run(observed, stopped));
        ObserverTap {
            lines,
            stop,
            task,
            schema_pending,
        }
    }

    /// Let the observer finish what it holds and write its per-method summary. What it holds is
    /// bounded (its queue's bytes, taken at the stop), so its time is too, but not to a figure:
    /// Codex's schema may still be generating (a version seen for the first time), or a loaded
    /// machine checks and audits what was queued slowly (before, only a loading schema was
    /// waited for past the first 5 s). So it is waited for up to 5 s, then, said in the log, up
    /// to 30 s more.
    pub async fn finish(self) {
        let _ = self.stop.send(());
        let mut task = self.task;
        if tokio::time::timeout(FINISH_QUIETLY, &mut task)
            .await
            .is_ok()
        {
            return;
        }
        if self
            .schema_pending
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            tracing::info!("conformance: waiting for Codex's schema to check what is left");
        } else {
            tracing::info!("conformance: waiting for the observer to check what is left");
        }
        if tokio::time::timeout(FINISH_AT_MOST, task).await.is_err() {
            tracing::warn!(
                "conformance: the observer did not finish within {} s; its summary is not written",
                (FINISH_QUIETLY + FINISH_AT_MOST).as_secs()
            );
        }
    }
}

/// How long a stop waits for the observer's summary before it says it is waiting.
const FINISH_QUIETLY: Duration = Duration::from_secs(5);
/// How much longer it then waits.
const FINISH_AT_MOST: Duration = Duration::from_secs(30);

/// The live trace `settings` (or the OpenTelemetry variables) ask for, told to `known` so that
/// the observer and the capture writer feed it; its target is logged once.
pub fn start_trace(
    settings: &clawbridge_traffic::trace::TraceSettings,
    captured_calls: bool,
    known: &Arc<Mutex<Known>>,
) -> Result<Option<Arc<clawbridge_traffic::trace::LiveTrace>>, clawbridge_support::error::Error> {
    let trace = clawbridge_traffic::trace::LiveTrace::start(settings, captured_calls)?;
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
pub fn load_schema(
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
            clawbridge_support::process::run_bounded(command, b"", Duration::from_secs(10), 4096)
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

/// The taps of a client's connections to app-servers (`serve`'s, one per app-server
/// incarnation): each line both ways into `root/connection-N/` when a transcript is asked for
/// (the folder layout the endpoint writes, so every reader takes it) and to the `observer`
/// (conformance and the live audit, as connection N), and the client's requests and Codex's
/// version into `known`, what the captures label and redact by: here, before the line reaches
/// Codex, so no model request can be filed before what redacts it is known (the observer's copy
/// comes later and adds nothing new). The writers run on `tasks`; a connection whose folder cannot be made is
/// told once and not recorded (its turns go on).
pub fn connection_taps(
    root: Option<PathBuf>,
    observer: Option<super::ObserverQueue>,
    known: Arc<Mutex<Known>>,
    tasks: Tasks,
) -> clawbridge_codex::protocol::wire::TapMaker {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let next = std::sync::Arc::new(AtomicUsize::new(1));
    clawbridge_codex::protocol::wire::TapMaker(std::sync::Arc::new(move || {
        let stream = next.fetch_add(1, Ordering::SeqCst);
        let observer = observer.clone();
        let queue = root.as_ref().and_then(|root| {
            let dir = root.join(format!("connection-{stream}"));
            // serve's own requests are never routed.
            match clawbridge_traffic::transcript::transcript_writer(&dir, &tasks, false) {
                Ok((queue, _task)) => Some(queue),
                Err(error) => {
                    tracing::warn!("{error}; this app-server's lines are not recorded");
                    None
                }
            }
        });
        let known = std::sync::Arc::clone(&known);
        let versioned = AtomicBool::new(false);
        let tap: clawbridge_codex::protocol::wire::LineTap =
            std::sync::Arc::new(move |direction: Direction, line: &[u8]| {
                if let Some(queue) = &queue {
                    queue.offer(direction, line.to_vec());
                }
                if let Some(observer) = &observer {
                    // The observer's queue tells `known` the requests as they are offered.
                    observer.offer(stream, direction, line.to_vec());
                }
                match direction {
                    Direction::In if observer.is_none() => {
                        super::observe_request(&known, line);
                    }
                    Direction::In => {}
                    // The answer to `initialize` names Codex's version (the first line that
                    // carries a `userAgent`).
                    Direction::Out
                        if !versioned.load(Ordering::Relaxed)
                            && memchr::memmem::find(line, b"\"userAgent\"").is_some() =>
                    {
                        let message: serde_json::Value =
                            serde_json::from_slice(line).unwrap_or_default();
                        if let Some(version) = message["result"]["userAgent"]
                            .as_str()
                            .and_then(clawbridge_codex::protocol::wire::version_from_user_agent)
                        {
                            versioned.store(true, Ordering::Relaxed);
                            if let Ok(mut known) = known.lock() {
                                known.codex_version = Some(version);
                            }
                        }
                    }
                    Direction::Out => {}
                }
            });
        Some(tap)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A stop waits for the summary of an observer still busy past the first 5 s with its
    /// schema loaded (here a turn's audit that takes 6 s; on a loaded machine, checking what was
    /// queued): the summary is in the log when `finish` returns.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stop_waits_for_a_busy_observer_s_summary() {
        let dir = tempfile::tempdir().expect("dir");
        let log = dir.path().join("conformance.jsonl");
        let slow: super::super::audit::TurnAuditor = Arc::new(
            |_: &str, _: &serde_json::Value, _: &serde_json::Value, _: usize| {
                std::thread::sleep(Duration::from_secs(6));
                Err("not audited here".to_string())
            },
        );
        let audit = super::super::audit::LiveAudit::new(
            None,
            clawbridge_support::console::Console::quiet(),
            slow,
        );
        let tasks = Tasks::new();
        let tap = ObserverTap::start(
            &tasks,
            None,
            Some(log.clone()),
            Arc::new(Mutex::new(Known::default())),
            Some(audit),
        );
        let turn = json!({"id": 1, "method": "turn/start", "params": {"threadId": "t1", "cwd": "/srv/workspace"}});
        tap.lines
            .offer(1, Direction::In, turn.to_string().into_bytes());
        tap.finish().await;
        let written = std::fs::read_to_string(&log).expect("the summary was written");
        assert!(written.contains("\"summary\""), "{written}");
    }
}

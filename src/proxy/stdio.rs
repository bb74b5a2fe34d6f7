//! The stdio face of `clawbridge app-server`: OpenClaw's Codex slot.
//!
//! It starts the real `codex app-server` with the arguments OpenClaw passes and forwards every
//! line both ways, byte for byte ([`pump`]), handing a copy of each complete line to the taps
//! ([`crate::observe::tap`]) before its end goes out. It ends when Codex exits (with Codex's code), when
//! stdin closes (Codex gets 5 s), or on SIGTERM or SIGINT (Codex is killed first).

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

use super::args::{self, codex_args, AppServerArgs};
use super::MAX_TRANSCRIPT_LINE;
use super::{codex_binary, plane_settings, Direction, ProxyError, TrafficFlags};
use crate::observe;
use crate::observe::tap::{self, ObserverTap};
use crate::support::task::Tasks;
use crate::traffic::capture::live::Known;
use crate::traffic::plane::{OfflineHomeAt, Plane};
use crate::traffic::transcript::{transcript_writer, TranscriptQueue};
use crate::translate::live::{LiveRoute, LiveRouter};

/// The router both pumps share (`--route spec`): the inbound one asks it, the outbound one tells
/// it which thread a `thread/start` opened.
type SharedRouter = Option<Arc<Mutex<LiveRouter>>>;

/// What `clawbridge app-server` was given.
#[derive(Clone, Debug, Default)]
pub struct ProxySettings {
    pub codex_bin: Option<PathBuf>,
    pub transcript: Option<PathBuf>,
    /// What to pass to Codex (OpenClaw's `-c ... app-server --listen stdio://`).
    pub args: Vec<OsString>,
    /// Answer model requests with the loopback stub and capture them.
    pub offline: bool,
    /// Where offline captures go (default: `<transcript>/model-requests`).
    pub capture: Option<PathBuf>,
    /// The stub's script (default: a short text reply per request).
    pub stub_script: Option<PathBuf>,
    /// Check params against the running Codex's schema.
    pub check: bool,
    /// `--audit`: each turn audited as it starts.
    pub audit: bool,
    /// Where generated schemas are cached (default: the user's cache folder).
    pub schema_cache: Option<PathBuf>,
    /// `--capture` without `--offline`: where model requests are forwarded.
    pub upstream: Option<String>,
    pub upstream_ca: Option<PathBuf>,
    /// `--no-websocket`: the forwarder sends Codex to HTTP.
    pub no_websocket: bool,
    /// `--otel-*`: where traces go and what they carry.
    pub otel: crate::traffic::trace::TraceSettings,
    /// Where notices go (`--audit`'s tables).
    pub console: crate::support::console::Console,
    /// `--route`: OpenClaw's requests as sent, or with the workspace files where the spec puts
    /// them.
    pub route: LiveRoute,
}

impl From<AppServerArgs> for ProxySettings {
    fn from(args: AppServerArgs) -> Self {
        // OpenClaw's `--listen stdio://` is Codex's: it goes back where it was, after the rest.
        let mut codex = args.args;
        if let Some(listen) = args.listen {
            codex.push("--listen".into());
            codex.push(listen.into());
        }
        Self {
            codex_bin: args.codex_bin,
            transcript: args.transcript.clone(),
            args: codex,
            offline: args.offline,
            capture: args.capture,
            stub_script: args.stub_script,
            check: !args.no_check,
            audit: args.audit,
            schema_cache: None,
            upstream: args.upstream,
            upstream_ca: args.upstream_ca,
            no_websocket: args.no_websocket,
            otel: crate::traffic::trace::TraceSettings {
                sent_record: args
                    .transcript
                    .as_ref()
                    .map(|dir| dir.join(crate::traffic::trace::sent::SENT_RECORD)),
                ..args.otel.settings()
            },
            console: crate::support::console::Console::quiet(),
            route: args.route,
        }
    }
}

/// Run the proxy until Codex exits or stdin closes; returns the exit code to leave with.
pub async fn run_proxy(settings: ProxySettings) -> Result<i32, ProxyError> {
    let binary = codex_binary(settings.codex_bin.as_deref())?;
    // The transcript is written on a thread of its own, fed through a queue bounded in bytes:
    // a line waits for nothing on disk, and a line the queue has no room for is forwarded but
    // not recorded (with one warning).
    let tasks = Tasks::new();
    let (transcript, transcript_task) = match &settings.transcript {
        Some(dir) => {
            let (queue, task) = transcript_writer(dir, &tasks, settings.route == LiveRoute::Spec)?;
            (Some(queue), Some(task))
        }
        None => (None, None),
    };
    let known = Arc::new(Mutex::new(Known::default()));
    let mut codex = codex_args(&settings.args);

    // The model-traffic plane: offline, the stub (Codex's own home untouched, pointed at the
    // stub by `-c`); with a capture folder, the recording forwarder in front of the stub or the
    // real upstream.
    let plane = Plane::start(
        &plane_settings(
            TrafficFlags {
                offline: settings.offline,
                stub_script: settings.stub_script.as_deref(),
                capture: settings.capture.as_deref(),
                transcript: settings.transcript.as_deref(),
                upstream: settings.upstream.as_deref(),
                upstream_ca: settings.upstream_ca.as_deref(),
                no_websocket: settings.no_websocket,
            },
            OfflineHomeAt::ClientOwned,
            codex.clone(),
        )?,
        Arc::clone(&known),
    )
    .await
    .map_err(ProxyError::Offline)?;
    for value in plane.config_overrides() {
        codex = args::with_override(&codex, value);
    }
    let trace = crate::observe::tap::start_trace(&settings.otel, plane.captures(), &known)?;

    let schema = settings
        .check
        .then(|| tap::load_schema(&tasks, binary.clone(), settings.schema_cache.clone()));
    let log = settings
        .transcript
        .as_ref()
        .map(|dir| dir.join("conformance.jsonl"));
    let audit = settings.audit.then(|| {
        crate::observe::audit::LiveAudit::new(
            settings
                .transcript
                .as_ref()
                .map(|dir| dir.join("audit.jsonl")),
            settings.console.clone(),
            crate::app::audit::live_auditor(),
        )
    });
    let observer = ObserverTap::start(&tasks, schema, log, Arc::clone(&known), audit);
    let lines = observer.lines.clone();

    // Before Codex starts: a SIGTERM from then on ends Codex with the proxy, never orphans it.
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|source| ProxyError::Spawn {
        binary: "a SIGTERM handler".into(),
        source,
    })?;
    let mut child = tokio::process::Command::new(&binary)
        .args(&codex)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| ProxyError::Spawn {
            binary: binary.display().to_string(),
            source,
        })?;
    let (Some(child_in), Some(child_out)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(ProxyError::Spawn {
            binary: binary.display().to_string(),
            source: std::io::Error::other("no pipes to the child"),
        });
    };
    let router: SharedRouter =
        (settings.route == LiveRoute::Spec).then(|| Arc::new(Mutex::new(LiveRouter::new())));
    let inbound = tasks.spawn(pump(
        tokio::io::stdin(),
        child_in,
        Direction::In,
        transcript.clone(),
        lines.clone(),
        router.clone(),
    ));
    let outbound = tasks.spawn(pump(
        child_out,
        tokio::io::stdout(),
        Direction::Out,
        transcript,
        lines,
        router,
    ));
    let mut inbound = inbound;
    let code = tokio::select! {
        status = child.wait() => {
            // Whatever Codex printed last still reaches the client; then the proxy ends at once,
            // whether or not the client still holds stdin open: a dead Codex must look dead.
            let _ = tokio::time::timeout(Duration::from_secs(5), outbound).await;
            status.map_or(1, |status| exit_code(&status))
        }
        _ = &mut inbound => {
            // stdin closed: the pump dropped Codex's stdin; give it a moment to exit on its own.
            match tokio::time::timeout(Duration::from_secs(5), child.wait()).await {
                Ok(Ok(status)) => {
                    let _ = tokio::time::timeout(Duration::from_secs(5), outbound).await;
                    exit_code(&status)
                }
                _ => {
                    let _ = child.kill().await;
                    0
                }
            }
        }
        _ = terminate.recv() => {
            let _ = child.kill().await;
            143
        }
        _ = tokio::signal::ctrl_c() => {
            let _ = child.kill().await;
            130
        }
    };
    // The stdin pump may still wait on a client that keeps the pipe open; it holds a sender of
    // the observer's queue, so stop it, or the observer would wait for it.
    inbound.abort();
    // Let the observer, the transcript and the capture writer finish what they hold (bounded);
    // the observer then writes its per-method summary.
    observer.finish().await;
    if let Some(task) = transcript_task {
        let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
    }
    plane.finish().await;
    if let Some(trace) = trace {
        trace.finish().await;
    }
    Ok(code)
}

/// The code to leave with for Codex's exit: its own, or 128 + the signal that ended it (as a
/// shell reports it).
fn exit_code(status: &std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|signal| 128 + signal))
        .unwrap_or(1)
}

/// Copy `from` to `to` line by line, unchanged, recording each complete line and handing the
/// interesting ones to the observer. With a router, the client's lines are held whole and a
/// thread or turn request goes out as the spec routes it (the transcript records both, the
/// observer sees what Codex got), and Codex's answers tell the router which thread opened.
async fn pump(
    from: impl AsyncRead + Unpin,
    to: impl AsyncWrite + Unpin,
    direction: Direction,
    transcript: Option<TranscriptQueue>,
    observer: observe::ObserverQueue,
    router: SharedRouter,
) {
    pump_capped(
        from,
        to,
        direction,
        transcript,
        observer,
        router,
        MAX_TRANSCRIPT_LINE,
    )
    .await
}

/// [`pump`] with lines past `cap` bytes forwarded untouched (streamed, not held, recorded or
/// routed).
async fn pump_capped(
    from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    direction: Direction,
    transcript: Option<TranscriptQueue>,
    observer: observe::ObserverQueue,
    router: SharedRouter,
    cap: usize,
) {
    let routing = router.as_ref().filter(|_| direction == Direction::In);
    let mut reader = BufReader::with_capacity(256 * 1024, from);
    let mut line: Vec<u8> = Vec::new();
    let mut oversized = false;
    loop {
        let (consumed, ended_line) = match reader.fill_buf().await {
            Ok([]) | Err(_) => break,
            Ok(buffer) => {
                let (chunk, ended) = match memchr::memchr(b'\n', buffer) {
                    Some(at) => (&buffer[..=at], true),
                    None => (buffer, false),
                };
                // What a routing pump held of a line that turns out too long goes out first.
                let mut spill = Vec::new();
                if !oversized {
                    if line.len() + chunk.len() > cap {
                        oversized = true;
                        spill = std::mem::take(&mut line);
                        if routing.is_none() {
                            spill.clear();
                        }
                    } else {
                        line.extend_from_slice(chunk);
                    }
                }
                // The copies of a complete line are queued before its end goes out (queuing
                // never waits): the other side cannot answer a request before the observer and
                // the transcript have it, so an answer always finds its request.
                if let (Some(router), Direction::Out, true, false) =
                    (&router, direction, ended, oversized)
                {
                    learn_answer(router, &line);
                }
                if let (Some(router), false) = (routing, oversized) {
                    // Held whole until its end: it may go out rewritten.
                    let consumed = chunk.len();
                    if !ended {
                        reader.consume(consumed);
                        continue;
                    }
                    let original = std::mem::take(&mut line);
                    let routed = route_line(router, &original).await;
                    let out = routed.as_ref().map_or(&original, |(text, _)| text);
                    if let Some(queue) = &transcript {
                        queue.offer(direction, original.clone());
                        if let Some((text, notes)) = &routed {
                            queue.offer_routed(text.clone(), notes.clone());
                        }
                    }
                    // The observer checks what the client sent, as the endpoint's does; the
                    // captures learn what Codex got.
                    observer.offer(0, direction, original.clone());
                    if routed.is_some() {
                        observer.routed(out);
                    }
                    if to.write_all(out).await.is_err() {
                        return;
                    }
                    (consumed, ended)
                } else {
                    if !spill.is_empty() {
                        // Past the cap: what was held goes out first, the rest streams.
                        if to.write_all(&spill).await.is_err() {
                            return;
                        }
                    }
                    if ended && !oversized {
                        match &transcript {
                            Some(queue) => {
                                observer.offer(0, direction, line.clone());
                                queue.offer(direction, std::mem::take(&mut line));
                            }
                            None => observer.offer(0, direction, std::mem::take(&mut line)),
                        }
                    }
                    if to.write_all(chunk).await.is_err() {
                        return;
                    }
                    (chunk.len(), ended)
                }
            }
        };
        reader.consume(consumed);
        if ended_line {
            if to.flush().await.is_err() {
                return;
            }
            line.clear();
            oversized = false;
        }
    }
    let _ = to.flush().await;
    // Dropping `to` closes Codex's stdin (inbound) or our stdout (outbound).
}

/// A client's line as the spec routes it (its params replaced, the rest of its bytes kept), with
/// what moved; `None` to send it as it is. The workspace is read on the blocking pool.
async fn route_line(
    router: &Arc<Mutex<LiveRouter>>,
    line: &[u8],
) -> Option<(Vec<u8>, Vec<String>)> {
    let text = std::str::from_utf8(line).ok()?;
    let envelope = crate::codex::protocol::scan::scan_line(text.trim_end()).ok()?;
    let method = envelope.method?.read(text).into_owned();
    let id = envelope.id?.to_string();
    let (range, _) = envelope.params?;
    let params = text.get(range.clone())?.to_string();
    let rerouted = crate::translate::live::route_blocking(router, id, method, params).await?;
    let mut out = Vec::with_capacity(line.len() + rerouted.params.len());
    out.extend_from_slice(&line[..range.start]);
    out.extend_from_slice(rerouted.params.as_bytes());
    out.extend_from_slice(&line[range.end..]);
    Some((out, rerouted.notes))
}

/// Tell the router of an answer of Codex's (a `thread/start` answer names its thread). Most of
/// Codex's lines are notifications: only an answer while a thread opening waits is read.
fn learn_answer(router: &Arc<Mutex<LiveRouter>>, line: &[u8]) {
    let waiting = router.lock().is_ok_and(|router| router.awaits_answers());
    if !waiting || memchr::memmem::find(line, b"\"result\"").is_none() {
        return;
    }
    let Ok(text) = std::str::from_utf8(line) else {
        return;
    };
    let Ok(envelope) = crate::codex::protocol::scan::scan_line(text.trim_end()) else {
        return;
    };
    let (Some(id), None, Some(result)) = (envelope.id, envelope.method, envelope.result) else {
        return;
    };
    if let (Ok(mut router), Some(result)) = (router.lock(), text.get(result)) {
        router.answer(&id.to_string(), result);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    /// A writer that, when a line's end reaches it, takes what the observer has queued so far.
    struct Checking {
        feed: observe::ObserverFeed,
        seen_at_end: Vec<Option<Vec<u8>>>,
    }

    impl AsyncWrite for Checking {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            if buf.contains(&b'\n') {
                let queued = self.feed.try_next().map(|tapped| tapped.line);
                self.seen_at_end.push(queued);
            }
            Poll::Ready(Ok(buf.len()))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    /// Protection: a line's copy is queued for the observer before the line's end is forwarded,
    /// so Codex cannot answer a request the observer has not seen (the answer would otherwise
    /// count as unmatched, as it once did in CI).
    #[tokio::test]
    async fn copies_are_queued_before_the_line_goes_out() {
        let (queue, feed) = observe::observer_queue(1 << 20);
        let mut checking = Checking {
            feed,
            seen_at_end: Vec::new(),
        };
        let input: &[u8] = b"{\"id\":1,\"method\":\"a\"}\n{\"id\":2,\"method\":\"b\"}\n";
        pump(input, &mut checking, Direction::In, None, queue, None).await;
        assert_eq!(
            checking.seen_at_end,
            vec![
                Some(b"{\"id\":1,\"method\":\"a\"}\n".to_vec()),
                Some(b"{\"id\":2,\"method\":\"b\"}\n".to_vec())
            ]
        );
    }

    /// Protection: a routing pump holds a client's line until its end, and a line that turns
    /// out longer than the cap goes out whole all the same (what was held first, then the rest),
    /// untouched.
    #[tokio::test]
    async fn a_routing_pump_forwards_an_oversized_line_whole() {
        let (queue, _feed) = observe::observer_queue(1 << 20);
        let router: SharedRouter = Some(Arc::new(Mutex::new(LiveRouter::new())));
        let long = format!(
            "{{\"id\":1,\"method\":\"turn/start\",\"params\":{{\"x\":\"{}\"}}}}\n",
            "a".repeat(300_000)
        );
        let input = format!("{long}{{\"id\":2,\"method\":\"b\"}}\n");
        let reader = Trickle(input.as_bytes());
        let mut out: Vec<u8> = Vec::new();
        pump_capped(
            reader,
            &mut out,
            Direction::In,
            None,
            queue,
            router,
            100_000,
        )
        .await;
        assert_eq!(out.len(), input.len());
        assert_eq!(out, input.as_bytes());
    }

    /// A reader that gives at most 4 KiB per read, as a pipe does.
    struct Trickle<'a>(&'a [u8]);

    impl AsyncRead for Trickle<'_> {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> Poll<std::io::Result<()>> {
            let take = self.0.len().min(4096).min(buf.remaining());
            buf.put_slice(&self.0[..take]);
            self.0 = &self.0[take..];
            Poll::Ready(Ok(()))
        }
    }
}

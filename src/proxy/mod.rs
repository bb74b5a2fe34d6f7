//! `clawbridge app-server`: a transparent stdio proxy for OpenClaw's Codex slot
//! (`plugins.entries.codex.config.appServer.command`).
//!
//! It starts the real `codex app-server` with the arguments OpenClaw passes
//! (`[-c key=value]... app-server --listen stdio://`, read by [`args`]) and forwards every line
//! both ways, byte for byte, whatever the method: the proxy never rewrites what it forwards, so
//! ids keep their JSON type and a method it does not know passes like any other. It sends
//! nothing of its own on the connection, so no id of its own can collide with either side's.
//!
//! On top of forwarding, each a copy that never holds a line up:
//! - `--transcript DIR`: every message, per thread, secrets redacted ([`transcript`]), written on
//!   a thread of its own behind a queue bounded in bytes;
//! - conformance (on unless `--no-check`): every message both ways is checked against the
//!   schema generated from the Codex binary that runs (cached per version), and `thread/start`,
//!   `thread/resume`, `turn/start` and `turn/steer` params field by field; warnings name the
//!   field, unknown methods are counted, and the client's `clientInfo` is recorded next to the
//!   Codex version ([`observe`]; in `DIR/conformance.jsonl` with a transcript, one summary line
//!   per method at the end, read by `clawbridge app-server report DIR`: [`report`]);
//! - `--offline`: clawbridge's loopback Responses stub answers the model requests (Codex is
//!   given `-c openai_base_url=...`, which wins over OpenClaw's `modelProvider: "openai"`), and
//!   each request is written with its `layers.md` per thread and turn (`--capture DIR`, else
//!   `DIR/model-requests` of the transcript).
//!
//! It ends when Codex exits (with Codex's exit code, or 128 + the signal that killed it; at once,
//! even while the client keeps stdin open, so stdout closes with it) or when its stdin closes (Codex's stdin is
//! closed, Codex is given 5 s, then killed); on SIGTERM or SIGINT it kills Codex first.
//! Bounded: a line longer than [`MAX_TRANSCRIPT_LINE`] is forwarded but not transcribed or
//! checked, at most [`MAX_OPEN_FILES`] transcript files are open at once, at most
//! [`MAX_PENDING`] request ids are remembered to file their responses, and at most
//! [`observe::OBSERVER_QUEUE_BYTES`] of lines wait for the observer.

pub mod args;
pub mod endpoint;
pub mod observe;
pub mod report;
pub mod stall;
pub mod transcript;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

pub use crate::app::capture::live::safe_name;
use crate::app::capture::live::{CaptureWriter, Known};
use crate::app::offline::{ResponsesStub, StubScript};
use crate::codex::client::conformance::WireSchemas;
use crate::codex::client::process::{find_codex_binary, resolve_native_binary};
use crate::codex::client::schema::{version_in, SchemaCache};
pub use args::{
    codex_args, normalise, AppServerArgs, Normalised, PoolArgs, ReportArgs, StatusArgs,
};
use observe::Observer;
use transcript::Transcript;

/// Which way a line went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// From the client (OpenClaw) to Codex.
    In,
    /// From Codex to the client.
    Out,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::In => "in",
            Direction::Out => "out",
        }
    }
}

/// Longest line the transcript records (longer lines are forwarded untouched).
pub const MAX_TRANSCRIPT_LINE: usize = 64 * 1024 * 1024;
/// Transcript files open at once (the least recently used is closed, and reopened to append).
pub const MAX_OPEN_FILES: usize = 64;
/// Request ids remembered so a response lands in its request's thread file.
pub const MAX_PENDING: usize = 4096;
/// Model requests waiting to be written as captures.
const CAPTURE_QUEUE: usize = 64;

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
    /// Where generated schemas are cached (default: the user's cache folder).
    pub schema_cache: Option<PathBuf>,
    /// `--capture` without `--offline`: where model requests are forwarded.
    pub upstream: Option<String>,
    pub upstream_ca: Option<PathBuf>,
    /// `--no-websocket`: the forwarder sends Codex to HTTP.
    pub no_websocket: bool,
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
            transcript: args.transcript,
            args: codex,
            offline: args.offline,
            capture: args.capture,
            stub_script: args.stub_script,
            check: !args.no_check,
            schema_cache: None,
            upstream: args.upstream,
            upstream_ca: args.upstream_ca,
            no_websocket: args.no_websocket,
        }
    }
}

/// Why the proxy could not run.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("{0}")]
    NoCodex(String),
    #[error("cannot start {binary}: {source}")]
    Spawn {
        binary: String,
        #[source]
        source: std::io::Error,
    },
    #[error("transcript folder {path}: {source}")]
    Transcript {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("--offline")]
    Offline(#[source] crate::error::Error),
    #[error("cannot write the output: {0}")]
    Output(#[source] std::io::Error),
    #[error(transparent)]
    Endpoint(#[from] endpoint::EndpointError),
    #[error(transparent)]
    Setup(#[from] crate::error::Error),
}

fn codex_binary(explicit: Option<&Path>) -> Result<PathBuf, ProxyError> {
    let found = find_codex_binary(
        explicit,
        std::env::var_os("CODEX_BIN"),
        std::env::var_os("PATH"),
    )
    .map_err(ProxyError::NoCodex)?;
    Ok(resolve_native_binary(&found.path))
}

/// A slot call that is not an app-server start (OpenClaw's `login status` probe): the real
/// Codex, with the same arguments, in this process's place.
pub fn passthrough(args: &[OsString]) -> Result<std::convert::Infallible, ProxyError> {
    use std::os::unix::process::CommandExt;
    let binary = codex_binary(None)?;
    let source = std::process::Command::new(&binary).args(args).exec();
    Err(ProxyError::Spawn {
        binary: binary.display().to_string(),
        source,
    })
}

/// The schemas of `binary`, from the cache or generated, on a blocking thread: the params
/// schemas (required) and the whole protocol's (the checks of every message; a folder without
/// them, such as an older cache entry, leaves only the params checked).
fn load_schema(binary: PathBuf, cache: Option<PathBuf>) -> observe::SchemaSource {
    tokio::task::spawn_blocking(move || {
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

/// Run the proxy until Codex exits or stdin closes; returns the exit code to leave with.
pub async fn run_proxy(settings: ProxySettings) -> Result<i32, ProxyError> {
    let binary = codex_binary(settings.codex_bin.as_deref())?;
    // The transcript is written on a thread of its own, fed through a queue bounded in bytes:
    // a line waits for nothing on disk, and a line the queue has no room for is forwarded but
    // not recorded (with one warning).
    let (transcript, transcript_task) = match &settings.transcript {
        Some(dir) => {
            let (queue, task) = transcript_writer(dir)?;
            (Some(queue), Some(task))
        }
        None => (None, None),
    };
    let known = Arc::new(Mutex::new(Known::default()));
    let mut codex = codex_args(&settings.args);

    // Offline: the stub, its URL for Codex, and the capture writer.
    let mut stub_guard = None;
    let mut capture_task = None;
    if settings.offline {
        let script = match &settings.stub_script {
            Some(path) => StubScript::load(path).map_err(ProxyError::Offline)?,
            None => StubScript::default(),
        };
        let capture_dir = settings.capture.clone().or_else(|| {
            settings
                .transcript
                .as_ref()
                .map(|dir| dir.join("model-requests"))
        });
        let (sink, requests) = match capture_dir {
            Some(_) => {
                let (sink, requests) = tokio::sync::mpsc::channel(CAPTURE_QUEUE);
                (Some(sink), Some(requests))
            }
            None => {
                tracing::info!("--offline without --capture or --transcript: model requests are answered, not written");
                (None, None)
            }
        };
        let stub = ResponsesStub::start_with_sink(script, sink)
            .await
            .map_err(ProxyError::Offline)?;
        codex = args::with_override(&codex, &format!("openai_base_url=\"{}\"", stub.base_url()));
        if let (Some(dir), Some(requests)) = (capture_dir, requests) {
            let writer = CaptureWriter::new(dir, Arc::clone(&known));
            capture_task = Some(tokio::spawn(writer.run(requests)));
        }
        stub_guard = Some(stub);
    }
    // Live capture: the recording forwarder between Codex and the real upstream.
    let mut forwarder_guard = None;
    if let (false, Some(dir)) = (settings.offline, &settings.capture) {
        let live = start_recording(
            crate::app::forward::LiveCaptureSettings {
                dir: dir.clone(),
                upstream: settings.upstream.clone(),
                upstream_ca: settings.upstream_ca.clone(),
                no_websocket: settings.no_websocket,
            },
            &codex,
            Arc::clone(&known),
        )
        .await?;
        codex = args::with_override(&codex, &live.config_override());
        forwarder_guard = Some(live);
    }

    let (lines, observed) = observe::observer_queue(observe::OBSERVER_QUEUE_BYTES);
    let (stop_observer, observer_stop) = tokio::sync::oneshot::channel();
    let schema = settings
        .check
        .then(|| load_schema(binary.clone(), settings.schema_cache.clone()));
    let log = settings
        .transcript
        .as_ref()
        .map(|dir| dir.join("conformance.jsonl"));
    let observer =
        tokio::spawn(Observer::new(schema, log, Arc::clone(&known)).run(observed, observer_stop));

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
    let inbound = tokio::spawn(pump(
        tokio::io::stdin(),
        child_in,
        Direction::In,
        transcript.clone(),
        lines.clone(),
    ));
    let outbound = tokio::spawn(pump(
        child_out,
        tokio::io::stdout(),
        Direction::Out,
        transcript,
        lines,
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
    let _ = stop_observer.send(());
    let _ = tokio::time::timeout(Duration::from_secs(5), observer).await;
    if let Some(task) = transcript_task {
        let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
    }
    drop(stub_guard);
    if let Some(live) = forwarder_guard {
        live.finish().await;
    }
    if let Some(task) = capture_task {
        let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
    }
    Ok(code)
}

/// Start the recording forwarder and the writer of what it records into `dir`.
pub(crate) async fn start_recording(
    settings: crate::app::forward::LiveCaptureSettings,
    codex_args: &[OsString],
    known: Arc<Mutex<Known>>,
) -> Result<crate::app::forward::LiveCapture, ProxyError> {
    let codex_home = std::env::var_os("CODEX_HOME")
        .filter(|value| !value.is_empty())
        .map(PathBuf::from);
    Ok(
        crate::app::forward::LiveCapture::start(
            &settings,
            codex_args,
            codex_home.as_deref(),
            known,
        )
        .await?,
    )
}

/// Bytes of lines waiting for the transcript writer at most.
const TRANSCRIPT_QUEUE_BYTES: usize = 256 * 1024 * 1024;

/// A transcript of `dir` written on a thread of its own, and the queue that feeds it (bounded in
/// bytes: a line waits for nothing on disk).
fn transcript_writer(
    dir: &Path,
) -> Result<(TranscriptQueue, tokio::task::JoinHandle<()>), ProxyError> {
    let mut transcript = Transcript::open(dir)?;
    let (sender, mut lines) =
        crate::support::queue::byte_queue::<(Direction, Vec<u8>)>(TRANSCRIPT_QUEUE_BYTES, None);
    let task = tokio::task::spawn_blocking(move || {
        while let Some((direction, line)) = lines.blocking_recv() {
            transcript.record(direction, &line);
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
struct TranscriptQueue {
    sender: crate::support::queue::ByteSender<(Direction, Vec<u8>)>,
    warned: Arc<std::sync::atomic::AtomicBool>,
}

impl TranscriptQueue {
    /// Queue a line if the byte budget has room; never waits.
    fn offer(&self, direction: Direction, line: Vec<u8>) {
        if !self.sender.offer(line.len(), (direction, line))
            && !self.warned.swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            tracing::warn!(
                "transcript: the writer is behind; a message was forwarded but not recorded"
            );
        }
    }
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
/// interesting ones to the observer.
async fn pump(
    from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    direction: Direction,
    transcript: Option<TranscriptQueue>,
    observer: observe::ObserverQueue,
) {
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
                if !oversized {
                    if line.len() + chunk.len() > MAX_TRANSCRIPT_LINE {
                        oversized = true;
                        line = Vec::new();
                    } else {
                        line.extend_from_slice(chunk);
                    }
                }
                // The copies of a complete line are queued before its end goes out (queuing
                // never waits): the other side cannot answer a request before the observer and
                // the transcript have it, so an answer always finds its request.
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

/// `clawbridge app-server`: the WebSocket endpoint for `--listen ws://...` or `unix://...`
/// (`status` first: read a running endpoint's status), else the stdio proxy.
pub async fn run_app_server(args: AppServerArgs) -> Result<i32, ProxyError> {
    let endpoint = match args.listen.as_deref() {
        Some(url) if url.starts_with("ws://") || url.starts_with("unix://") => {
            Some(endpoint::ListenAddr::parse(url).map_err(|message| {
                crate::error::Error::InvalidArgument {
                    flag: "--listen".into(),
                    message,
                }
            })?)
        }
        Some(url) if url != "stdio://" => {
            return Err(ProxyError::Setup(crate::error::Error::InvalidArgument {
                flag: "--listen".into(),
                message: format!("{url}: not stdio://, ws://IP:PORT or unix://PATH"),
            }))
        }
        _ => None,
    };
    match endpoint {
        Some(listen) => run_endpoint(args, listen).await,
        None => run_proxy(args.into()).await,
    }
}

/// Write a command's output to stdout. A reader that went away (`| head`) is not an error,
/// and nothing here panics on it as `println!` would.
fn print_out(text: &str) -> Result<(), ProxyError> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(error) if error.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(ProxyError::Output(error))
        }
        _ => Ok(()),
    }
}

/// `clawbridge app-server report DIR [--json]`: the per-method conformance table of a
/// transcript folder; exits 1 when any message had problems.
/// `clawbridge app-server report DIR [--json]`: the per-method table of a transcript folder's
/// `conformance.jsonl`; 1 when any message had problems.
pub fn app_server_report(args: &ReportArgs) -> Result<i32, ProxyError> {
    let report = report::read(&args.dir)?;
    if args.json {
        let value = serde_json::to_value(&report).map_err(|error| {
            ProxyError::Setup(crate::error::Error::InvalidArgument {
                flag: "app-server report".into(),
                message: error.to_string(),
            })
        })?;
        print_out(&format!("{}\n", crate::support::json::to_pretty(&value)))?;
    } else {
        print_out(&report::render(&report))?;
    }
    Ok(i32::from(report.has_problems()))
}

/// `clawbridge app-server status --listen URL`: the running endpoint's connections, threads and
/// members, as JSON (the token from the same place the endpoint reads it).
pub async fn app_server_status(args: &StatusArgs) -> Result<i32, ProxyError> {
    let listen = endpoint::ListenAddr::parse(&args.listen).map_err(|message| {
        crate::error::Error::InvalidArgument {
            flag: "--listen".into(),
            message,
        }
    })?;
    let path = token_path(args.token_file.as_ref(), args.state_dir.as_ref())?;
    if !path.exists() {
        return Err(ProxyError::Setup(crate::error::Error::InvalidArgument {
            flag: "--token-file".into(),
            message: format!(
                "{}: no token there (the endpoint writes it on its first start)",
                path.display()
            ),
        }));
    }
    let token = read_token(&path)?;
    let status = endpoint::fetch_status(&listen, &token).await?;
    print_out(&format!("{}\n", crate::support::json::to_pretty(&status)))?;
    Ok(0)
}

fn token_path(
    token_file: Option<&PathBuf>,
    state_dir: Option<&PathBuf>,
) -> Result<PathBuf, ProxyError> {
    Ok(match token_file {
        Some(path) => path.clone(),
        None => crate::app::commands::state_dir(state_dir.cloned())?.join("app-server-token"),
    })
}

/// The endpoint's token file: a regular file of the user's only. A link (a planted
/// `token -> elsewhere`) or a file others may read is refused, naming the fix: anyone holding
/// the token runs commands as the operator through Codex (`command/exec`).
fn read_token(path: &Path) -> Result<String, ProxyError> {
    use std::os::unix::fs::PermissionsExt;
    let refused = |message: String| {
        ProxyError::Setup(crate::error::Error::InvalidArgument {
            flag: "--token-file".into(),
            message: format!("{}: {message}", path.display()),
        })
    };
    let meta = std::fs::symlink_metadata(path).map_err(|error| refused(error.to_string()))?;
    if meta.file_type().is_symlink() {
        return Err(refused(
            "is a symbolic link; refusing to follow it (replace it with the token file itself, mode 0600)".into(),
        ));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(refused(format!(
            "others may read it (mode {mode:o}); run `chmod 600 {}` and consider a new token",
            path.display()
        )));
    }
    let bytes = crate::support::fs::read_file_capped(path, 4096)?;
    let token = String::from_utf8_lossy(&bytes).trim().to_string();
    if token.len() < 16 || token.chars().any(char::is_control) {
        return Err(ProxyError::Setup(crate::error::Error::InvalidArgument {
            flag: "--token-file".into(),
            message: format!("{}: one line of at least 16 characters", path.display()),
        }));
    }
    Ok(token)
}

/// The native Codex home's `config.toml`, which every account's home gets (a regular file of
/// at most 1 MiB, a link to one included); none when there is none, and a warning when it
/// cannot be read.
fn native_config(codex_home: &Path) -> Option<String> {
    use crate::support::fs::ReadRefusal;
    let path = codex_home.join("config.toml");
    match crate::support::fs::read_capped_anywhere(&path, None, 1 << 20) {
        Ok(bytes) => Some(String::from_utf8_lossy(&bytes).into_owned()),
        Err(ReadRefusal::NotFound) => None,
        Err(refusal) => {
            tracing::warn!(
                "{}: {refusal}; the accounts' Codex homes get no config.toml",
                path.display()
            );
            None
        }
    }
}

/// The token clients of the endpoint send: from `--token-file`, else
/// `<state-dir>/app-server-token` (generated, 0600, on first start). It is never printed; its
/// file is named on stderr.
fn endpoint_token(args: &AppServerArgs) -> Result<String, ProxyError> {
    let path = token_path(args.token_file.as_ref(), args.state_dir.as_ref())?;
    if path.exists() {
        let token = read_token(&path)?;
        eprintln!(
            "clawbridge app-server: using the bearer token in {}",
            path.display()
        );
        return Ok(token);
    }
    if let Some(parent) = path.parent() {
        crate::support::fs::create_private_dir(parent).map_err(|source| {
            crate::error::Error::Write {
                path: parent.to_path_buf(),
                source,
            }
        })?;
    }
    let token = crate::support::hex::random(32).map_err(|source| crate::error::Error::Write {
        path: path.clone(),
        source,
    })?;
    crate::support::fs::write_private(&path, format!("{token}\n").as_bytes())?;
    eprintln!(
        "clawbridge app-server: generated a bearer token in {}",
        path.display()
    );
    Ok(token)
}

/// `--listen ws://IP:PORT` or `unix://PATH`: serve until SIGTERM or SIGINT (then drain); the
/// bound address is stdout's first line (`IP:PORT`, or the socket's path).
async fn run_endpoint(
    args: AppServerArgs,
    listen: endpoint::ListenAddr,
) -> Result<i32, ProxyError> {
    use crate::codex::client::fleet::FleetConfig;
    use crate::codex::client::pool::PoolConfig;
    let token = endpoint_token(&args)?;
    let state = crate::app::commands::state_dir(args.state_dir.clone())?;
    let remotes = crate::codex::client::remote::remote_endpoints(
        &args.pool.remote_app_servers,
        &args.pool.app_server_token_files,
    )?;
    let binary = if args.pool.app_servers > 0 {
        codex_binary(args.codex_bin.as_deref()).map_err(|error| error.to_string())
    } else {
        Err("no local app-servers (--app-servers 0)".to_string())
    };
    // What the schema check and the captures learn from the conversation.
    let known = Arc::new(Mutex::new(Known::default()));
    if let Some(dir) = &args.transcript {
        crate::support::fs::create_private_dir(dir).map_err(|source| ProxyError::Transcript {
            path: dir.display().to_string(),
            source,
        })?;
    }
    // Offline: the loopback stub and a throwaway home, as `serve --offline` does; each model
    // request captured per thread and turn when there is a folder for it.
    let mut capture_task = None;
    let offline = if args.offline {
        let script = match &args.stub_script {
            Some(path) => StubScript::load(path).map_err(ProxyError::Offline)?,
            None => StubScript::default(),
        };
        let capture_dir = args.capture.clone().or_else(|| {
            args.transcript
                .as_ref()
                .map(|dir| dir.join("model-requests"))
        });
        let (sink, requests) = match &capture_dir {
            Some(_) => {
                let (sink, requests) = tokio::sync::mpsc::channel(CAPTURE_QUEUE);
                (Some(sink), Some(requests))
            }
            None => (None, None),
        };
        let stub = ResponsesStub::start_with_sink(script, sink)
            .await
            .map_err(ProxyError::Offline)?;
        if let (Some(dir), Some(requests)) = (capture_dir, requests) {
            let writer = CaptureWriter::new(dir, Arc::clone(&known));
            capture_task = Some(tokio::spawn(writer.run(requests)));
        }
        // The offline homes live in the state dir, private and apart from the live ones: the
        // native one here, each logged-in account's beside it (see `homes` below).
        let dir = state.join("app-server-offline").join("native");
        crate::support::fs::ensure_private_dir(&dir).map_err(|source| {
            crate::error::Error::Write {
                path: dir.clone(),
                source,
            }
        })?;
        let home = crate::app::offline::OfflineHome::prepare(
            Some(&dir),
            &stub.base_url(),
            "gpt-5.5",
            dirs::home_dir().as_deref(),
        )
        .map_err(ProxyError::Offline)?;
        Some((stub, home))
    } else {
        None
    };
    let codex_home = match &offline {
        Some((_, home)) => home.path.clone(),
        None => std::env::var_os("CODEX_HOME")
            .filter(|value| !value.is_empty())
            .map(PathBuf::from)
            .or_else(|| dirs::home_dir().map(|home| home.join(".codex")))
            .unwrap_or_else(|| PathBuf::from(".codex")),
    };
    // Live capture: the members' model traffic through the recording forwarder.
    let mut forwarder = None;
    if let (None, Some(dir)) = (&offline, &args.capture) {
        forwarder = Some(
            start_recording(
                crate::app::forward::LiveCaptureSettings {
                    dir: dir.clone(),
                    upstream: args.upstream.clone(),
                    upstream_ca: args.upstream_ca.clone(),
                    no_websocket: args.no_websocket,
                },
                &[],
                Arc::clone(&known),
            )
            .await?,
        );
    }
    // Over WebSocket, OpenClaw's threads name Codex's `openai` provider: offline, it is pointed
    // at the stub as the stdio proxy does (after the home's own config, so it wins); with a live
    // capture, at the forwarder.
    let config_overrides = offline
        .iter()
        .map(|(stub, _)| stub.base_url())
        .chain(forwarder.iter().map(|forwarder| forwarder.base_url()))
        .map(|url| format!("openai_base_url=\"{url}\""))
        .collect();
    // Each account a connection logs in with gets app-servers over a Codex home of its own,
    // in the state dir (kept across restarts: a resumed thread finds its rollout there), with
    // the native home's `config.toml` (or the offline one) and never its login.
    let (homes, home_config) = match &offline {
        Some((stub, _)) => (
            state.join("app-server-offline"),
            Some(crate::app::offline::offline_account_config(
                &stub.base_url(),
                "gpt-5.5",
            )),
        ),
        None => (state.join("app-server-homes"), native_config(&codex_home)),
    };
    let total_locals = args.pool.app_servers.min(64);
    let pool = PoolConfig {
        locals: total_locals,
        remotes,
        isolate_environment: offline.is_some(),
        config_overrides,
        recycle_after_threads: args.pool.recycle_after_threads.max(1),
        recycle_rss_bytes: args.pool.recycle_rss_mb.max(1).saturating_mul(1024 * 1024),
        ..PoolConfig::new(binary, codex_home)
    };
    // The schema check of every client's thread and turn params, against the local Codex.
    let (lines, observed) = observe::observer_queue(observe::OBSERVER_QUEUE_BYTES);
    let (stop_observer, observer_stop) = tokio::sync::oneshot::channel();
    let schema = match (&pool.binary, args.no_check) {
        (Ok(binary), false) => Some(load_schema(binary.clone(), None)),
        _ => None,
    };
    let log = args
        .transcript
        .as_ref()
        .map(|dir| dir.join("conformance.jsonl"));
    let observer =
        tokio::spawn(Observer::new(schema, log, Arc::clone(&known)).run(observed, observer_stop));
    let clients_path = args
        .clients
        .clone()
        .unwrap_or_else(|| crate::app::clients::clients_path(&state));
    let clients = crate::app::clients::ClientsFile::load(&clients_path)?.clients;
    if !clients.is_empty() {
        eprintln!(
            "clawbridge app-server: {} named client(s) from {}",
            clients.len(),
            clients_path.display()
        );
    }
    let settings = endpoint::EndpointSettings {
        listen,
        token,
        clients,
        fleet: FleetConfig {
            per_identity: args
                .pool
                .app_servers_per_identity
                .unwrap_or(total_locals)
                .clamp(1, total_locals.max(1)),
            native: pool,
            homes,
            home_config,
            total_locals,
            wait_for_room: FleetConfig::DEFAULT_WAIT_FOR_ROOM,
        },
        max_connections: 64,
        idle_timeout: Duration::from_secs(60),
        ping_interval: Duration::from_secs(20),
        handshake_timeout: Duration::from_secs(30),
        upgrade_timeout: Duration::from_secs(10),
        cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
        transcript: args.transcript.clone(),
        observe: Some(lines),
        stalls: stall::StallSettings {
            completion_grace: args
                .completion_grace
                .map_or(stall::StallSettings::default().completion_grace, |secs| {
                    Duration::from_secs(secs.max(1))
                }),
            recover: args.completion_grace.is_some(),
            silence: Duration::from_secs(args.stall_after.max(1)),
        },
    };
    let running = endpoint::Endpoint::start(settings, args.allow_remote).await?;
    match &running.listen {
        endpoint::ListenAddr::Tcp(addr) => print_out(&format!("{addr}\n"))?,
        endpoint::ListenAddr::Unix(path) => print_out(&format!("{}\n", path.display()))?,
    }
    use tokio::signal::unix::{signal, SignalKind};
    let mut terminate = signal(SignalKind::terminate()).map_err(|source| ProxyError::Spawn {
        binary: "a SIGTERM handler".into(),
        source,
    })?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
    eprintln!("clawbridge app-server: shutting down (running turns interrupted, clients closed, app-servers stopped)");
    running.stop().await;
    let _ = stop_observer.send(());
    let _ = tokio::time::timeout(Duration::from_secs(5), observer).await;
    drop(offline);
    if let Some(live) = forwarder {
        live.finish().await;
    }
    if let Some(task) = capture_task {
        let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
    }
    Ok(0)
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
        pump(input, &mut checking, Direction::In, None, queue).await;
        assert_eq!(
            checking.seen_at_end,
            vec![
                Some(b"{\"id\":1,\"method\":\"a\"}\n".to_vec()),
                Some(b"{\"id\":2,\"method\":\"b\"}\n".to_vec())
            ]
        );
    }
}

//! `clawbridge app-server`, in two faces: the WebSocket endpoint ([`endpoint`], `--listen ws://`
//! or `unix://`) and the transparent stdio proxy for OpenClaw's Codex slot
//! (`plugins.entries.codex.config.appServer.command`; [`stdio`]). Both start the model-traffic
//! plane they are asked for (`traffic::plane`) and the taps ([`crate::observe::tap`]); this file dispatches the
//! command and its `report` and `status` subcommands.
//!
//! The stdio proxy starts the real `codex app-server` with the arguments OpenClaw passes
//! (`[-c key=value]... app-server --listen stdio://`, read by [`args`]) and forwards every line
//! both ways, byte for byte, whatever the method: the proxy never rewrites what it forwards, so
//! ids keep their JSON type and a method it does not know passes like any other. It sends
//! nothing of its own on the connection, so no id of its own can collide with either side's.
//!
//! On top of forwarding, each a copy that never holds a line up:
//! - `--transcript DIR`: every message, per thread, secrets redacted ([`crate::traffic::transcript`]), written on
//!   a thread of its own behind a queue bounded in bytes;
//! - conformance (on unless `--no-check`): every message both ways is checked against the
//!   schema generated from the Codex binary that runs (cached per version), and `thread/start`,
//!   `thread/resume`, `turn/start` and `turn/steer` params field by field; warnings name the
//!   field, unknown methods are counted, and the client's `clientInfo` is recorded next to the
//!   Codex version ([`crate::observe`]; in `DIR/conformance.jsonl` with a transcript, one summary line
//!   per method at the end, read by `clawbridge app-server report DIR`: [`report`]);
//! - `--offline`: clawbridge's loopback Responses stub answers the model requests (Codex is
//!   given `-c openai_base_url=...`, which wins over OpenClaw's `modelProvider: "openai"`), and
//!   each request and its answer are written with the request's `layers.md` per thread and turn
//!   (`--capture DIR`, else `DIR/model-requests` of the transcript), through the recording
//!   forwarder in front of the stub, as `run` and `serve` do.
//!
//! It ends when Codex exits (with Codex's exit code, or 128 + the signal that killed it; at once,
//! even while the client keeps stdin open, so stdout closes with it) or when its stdin closes (Codex's stdin is
//! closed, Codex is given 5 s, then killed); on SIGTERM or SIGINT it kills Codex first.
//! Bounded: a line longer than [`MAX_TRANSCRIPT_LINE`] is forwarded but not transcribed or
//! checked, at most [`crate::traffic::transcript::MAX_OPEN_FILES`] transcript files are open at once, at most
//! [`crate::traffic::transcript::MAX_PENDING`] request ids are remembered to file their responses, and at most
//! [`crate::observe::OBSERVER_QUEUE_BYTES`] of lines wait for the observer.

pub mod args;
pub mod conversation;
pub mod doctor;
pub mod endpoint;
pub mod report;
pub mod stall;
pub mod stdio;

pub use stdio::{run_proxy, ProxySettings};

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::codex::client::process::{find_codex_binary, resolve_native_binary};
use crate::support::console::Console;
use crate::traffic::forward::LiveCaptureSettings;
use crate::traffic::plane::{OfflineHomeAt, OfflineSettings, PlaneSettings};
use crate::traffic::stub::StubScript;
pub use args::{normalise, AppServerArgs, Normalised, PoolArgs, ReportArgs, StatusArgs};

pub use crate::codex::protocol::wire::Direction;
use crate::traffic::transcript::MAX_TRANSCRIPT_LINE;

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
    /// The fleet's state database cannot be used (locked, corrupt, read-only, newer).
    #[error(transparent)]
    Store(#[from] crate::service::store::StoreError),
    #[error(transparent)]
    Setup(#[from] crate::error::Error),
}

impl From<crate::traffic::transcript::TranscriptError> for ProxyError {
    fn from(error: crate::traffic::transcript::TranscriptError) -> ProxyError {
        ProxyError::Transcript {
            path: error.path,
            source: error.source,
        }
    }
}

pub(crate) fn codex_binary(explicit: Option<&Path>) -> Result<PathBuf, ProxyError> {
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

/// The traffic flags both faces of `app-server` take.
pub(crate) struct TrafficFlags<'a> {
    offline: bool,
    stub_script: Option<&'a Path>,
    capture: Option<&'a Path>,
    transcript: Option<&'a Path>,
    upstream: Option<&'a str>,
    upstream_ca: Option<&'a Path>,
    no_websocket: bool,
}

/// The plane `app-server` asks for: offline, the stub answers and the captures go to
/// `--capture`, else to the transcript's `model-requests`; online, `--capture` records on the way
/// to the upstream.
pub(crate) fn plane_settings(
    flags: TrafficFlags<'_>,
    home: OfflineHomeAt,
    codex_args: Vec<OsString>,
) -> Result<PlaneSettings, ProxyError> {
    let offline = match flags.offline {
        true => Some(OfflineSettings {
            script: match flags.stub_script {
                Some(path) => StubScript::load(path).map_err(ProxyError::Offline)?,
                None => StubScript::default(),
            },
            model: "gpt-5.5".to_string(),
            home,
        }),
        false => None,
    };
    let capture_dir = match flags.offline {
        true => flags
            .capture
            .map(Path::to_path_buf)
            .or_else(|| flags.transcript.map(|dir| dir.join("model-requests"))),
        false => flags.capture.map(Path::to_path_buf),
    };
    if flags.offline && capture_dir.is_none() {
        tracing::info!(
            "--offline without --capture or --transcript: model requests are answered, not written"
        );
    }
    Ok(PlaneSettings {
        offline,
        capture: capture_dir.map(|dir| LiveCaptureSettings {
            dir,
            upstream: flags.upstream.map(str::to_string),
            upstream_ca: flags.upstream_ca.map(Path::to_path_buf),
            no_websocket: flags.no_websocket,
        }),
        codex_home: None,
        codex_args,
    })
}

/// `clawbridge app-server`: the WebSocket endpoint for `--listen ws://...` or `unix://...`
/// (`status` first: read a running endpoint's status), else the stdio proxy.
pub async fn run_app_server(args: AppServerArgs, console: &Console) -> Result<i32, ProxyError> {
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
        Some(listen) => endpoint::command::run_endpoint(args, listen, console).await,
        None => {
            let mut settings = ProxySettings::from(args);
            settings.console = console.clone();
            stdio::run_proxy(settings).await
        }
    }
}

/// Write a command's output to its console.
pub(crate) fn print_out(console: &Console, text: &str) -> Result<(), ProxyError> {
    console.out(text).map_err(ProxyError::Output)
}

/// `clawbridge app-server report DIR [--json]`: the per-method conformance table of a
/// transcript folder; exits 1 when any message had problems.
/// `clawbridge app-server report DIR [--json]`: the per-method table of a transcript folder's
/// `conformance.jsonl`; 1 when any message had problems.
pub fn app_server_report(args: &ReportArgs, console: &Console) -> Result<i32, ProxyError> {
    let report = report::read(&args.dir)?;
    if args.json {
        let value = serde_json::to_value(&report).map_err(|error| {
            ProxyError::Setup(crate::error::Error::InvalidArgument {
                flag: "app-server report".into(),
                message: error.to_string(),
            })
        })?;
        print_out(
            console,
            &format!("{}\n", crate::support::json::to_pretty(&value)),
        )?;
    } else {
        print_out(console, &report::render(&report))?;
    }
    Ok(i32::from(report.has_problems()))
}

/// `clawbridge app-server status --listen URL`: the running endpoint's connections, threads and
/// members, as JSON (the token from the same place the endpoint reads it).
pub async fn app_server_status(args: &StatusArgs, console: &Console) -> Result<i32, ProxyError> {
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
    let token =
        crate::service::token::read_existing(&path).map_err(endpoint::command::token_error)?;
    let status = endpoint::fetch_status(&listen, &token).await?;
    let shown = if args.json {
        format!("{}\n", crate::support::json::to_pretty(&status))
    } else {
        endpoint::render_status_text(&status)
    };
    print_out(console, &shown)?;
    Ok(0)
}

pub(crate) fn token_path(
    token_file: Option<&PathBuf>,
    state_dir: Option<&PathBuf>,
) -> Result<PathBuf, ProxyError> {
    Ok(match token_file {
        Some(path) => path.clone(),
        None => crate::service::token::endpoint_token_path(&crate::app::commands::state_dir(
            state_dir.cloned(),
        )?),
    })
}

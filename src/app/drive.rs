//! One run driven through a real `codex app-server`, for the `clawbridge run` and `capture`
//! commands (`app::pairing`).
//!
//! [`run_pairing`] translates the run, optionally starts the offline stub and a throwaway
//! `CODEX_HOME`, spawns Codex, performs the handshake (opting into the experimental API exactly
//! when the params need it), starts or resumes the thread, runs the turn to its end and shuts the
//! process down.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::app::offline::{CapturedRequest, OfflineHome, ResponsesStub, StubScript};
use crate::codex::client::handler::DefaultHandler;
use crate::codex::client::peer::PeerConfig;
use crate::codex::client::process::SpawnOptions;
use crate::codex::client::session::{
    CodexSession, SessionError, TurnEvent, TurnLimits, TurnOutcome,
};
use crate::codex::protocol::params::CodexParams;
use crate::config::Run;

/// How to pair.
#[derive(Clone, Debug)]
pub struct PairingOptions {
    pub codex_bin: PathBuf,
    /// `--codex-home`; offline runs default to a throwaway folder, online runs to
    /// `$CODEX_HOME` or `~/.codex`.
    pub codex_home: Option<PathBuf>,
    pub offline: bool,
    pub stub_script: StubScript,
    pub handler: DefaultHandler,
    pub limits: TurnLimits,
    pub peer: PeerConfig,
    pub handshake_timeout: Duration,
    /// `--capture DIR`: every model request and response recorded on its way (to the real
    /// upstream, or offline to the stub).
    pub live_capture: Option<crate::app::forward::LiveCaptureSettings>,
}

impl PairingOptions {
    pub fn new(codex_bin: PathBuf) -> Self {
        Self {
            codex_bin,
            codex_home: None,
            offline: false,
            stub_script: StubScript::default(),
            handler: DefaultHandler::default(),
            limits: TurnLimits::default(),
            peer: PeerConfig::default(),
            handshake_timeout: Duration::from_secs(10),
            live_capture: None,
        }
    }
}

/// What a paired run produced.
#[derive(Debug)]
pub struct PairingResult {
    pub thread_id: String,
    pub outcome: TurnOutcome,
    pub codex_version: Option<String>,
    /// Offline runs: every model-bound request Codex sent.
    pub requests: Vec<CapturedRequest>,
    pub codex_home: PathBuf,
}

/// Failures of a paired run.
#[derive(Debug, thiserror::Error)]
pub enum PairingError {
    #[error(transparent)]
    Input(#[from] crate::Error),
    #[error(transparent)]
    Session(#[from] SessionError),
    /// `capture`: the turn ended before Codex asked the model anything.
    #[error("Codex sent no model request (turn {status}: {error})")]
    NoModelRequest { status: &'static str, error: String },
}

fn online_codex_home(explicit: Option<&Path>) -> PathBuf {
    if let Some(path) = explicit {
        return path.to_path_buf();
    }
    if let Some(home) = std::env::var_os("CODEX_HOME").filter(|value| !value.is_empty()) {
        return PathBuf::from(home);
    }
    dirs::home_dir()
        .map(|home| home.join(".codex"))
        .unwrap_or_else(|| PathBuf::from(".codex"))
}

/// Run one turn of `run` through Codex.
pub async fn run_pairing(
    run: &Run,
    params: CodexParams,
    options: &PairingOptions,
    observer: &mut (dyn FnMut(TurnEvent<'_>) + Send),
) -> Result<PairingResult, PairingError> {
    use crate::app::forward::{LiveCapture, LiveCaptureSettings};
    let known = || std::sync::Arc::new(std::sync::Mutex::new(Default::default()));
    let mut live = None;
    let (stub, home) = if options.offline {
        let stub = ResponsesStub::start(options.stub_script.clone()).await?;
        // With --capture the recording forwarder sits between Codex and the stub, as it would
        // between Codex and the real upstream.
        let mut base_url = stub.base_url();
        if let Some(settings) = &options.live_capture {
            let settings = LiveCaptureSettings {
                upstream: Some(stub.base_url()),
                ..settings.clone()
            };
            let started = LiveCapture::start(&settings, &[], None, known()).await?;
            base_url = started.base_url();
            live = Some(started);
        }
        let home = OfflineHome::prepare(
            options.codex_home.as_deref(),
            &base_url,
            &run.model,
            dirs::home_dir().as_deref(),
        )?;
        (Some(stub), Some(home))
    } else {
        (None, None)
    };
    let codex_home = match &home {
        Some(home) => home.path.clone(),
        None => online_codex_home(options.codex_home.as_deref()),
    };
    tracing::info!("CODEX_HOME={}", codex_home.display());
    let mut config_overrides = Vec::new();
    if let (false, Some(settings)) = (options.offline, &options.live_capture) {
        let started = LiveCapture::start(settings, &[], Some(&codex_home), known()).await?;
        config_overrides.push(started.config_override());
        live = Some(started);
    }
    let spawn = SpawnOptions {
        binary: options.codex_bin.clone(),
        codex_home: codex_home.clone(),
        cwd: run.cwd.clone(),
        isolate_environment: options.offline,
        config_overrides,
    };
    let session = CodexSession::spawn(
        &spawn,
        options.peer.clone(),
        params.experimental_api,
        options.handshake_timeout,
    )
    .await;
    let mut session = match session {
        Ok(session) => session,
        Err(error) => {
            if let Some(live) = live {
                live.finish().await;
            }
            return Err(error.into());
        }
    };
    let result = async {
        let thread_id = session.open_thread(&params.thread).await?;
        let mut turn = params.turn_start.clone();
        turn.thread_id = thread_id.clone();
        let outcome = session
            .run_turn(&turn, &options.handler, observer, options.limits)
            .await?;
        Ok::<_, SessionError>((thread_id, outcome))
    }
    .await;
    let codex_version = session.codex_version.clone();
    let finish_live = |live: Option<LiveCapture>| async move {
        if let Some(live) = live {
            live.finish().await;
        }
    };
    match result {
        Ok((thread_id, outcome)) => {
            session.shutdown(Duration::from_secs(5)).await;
            finish_live(live).await;
            Ok(PairingResult {
                thread_id,
                outcome,
                codex_version,
                requests: stub
                    .as_ref()
                    .map(ResponsesStub::requests)
                    .unwrap_or_default(),
                codex_home,
            })
        }
        Err(error) => {
            session.kill().await;
            finish_live(live).await;
            Err(error.into())
        }
    }
}

//! One run driven through a real `codex app-server`, for the `clawbridge run` and `capture`
//! commands (`app::pairing`).
//!
//! [`run_pairing`] translates the run, optionally starts the offline stub and a throwaway
//! `CODEX_HOME`, spawns Codex, performs the handshake (opting into the experimental API exactly
//! when the params need it), starts or resumes the thread, runs the turn to its end and shuts the
//! process down.

use std::path::PathBuf;
use std::time::Duration;

use crate::codex::client::handler::DefaultHandler;
use crate::codex::client::peer::PeerConfig;
use crate::codex::client::process::SpawnOptions;
use crate::codex::client::session::{
    CodexSession, SessionError, TurnEvent, TurnLimits, TurnOutcome,
};
use crate::codex::protocol::params::CodexParams;
use crate::config::Run;
use crate::traffic::plane::{OfflineHomeAt, OfflineSettings, Plane, PlaneSettings};
use crate::traffic::record::CapturedRequest;
use crate::traffic::stub::StubScript;

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
    pub live_capture: Option<crate::traffic::forward::LiveCaptureSettings>,
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

/// Run one turn of `run` through Codex.
pub async fn run_pairing(
    run: &Run,
    params: CodexParams,
    options: &PairingOptions,
    observer: &mut (dyn FnMut(TurnEvent<'_>) + Send),
) -> Result<PairingResult, PairingError> {
    let settings = PlaneSettings {
        offline: options.offline.then(|| OfflineSettings {
            script: options.stub_script.clone(),
            model: run.model.clone(),
            home: options
                .codex_home
                .clone()
                .map_or(OfflineHomeAt::Throwaway, OfflineHomeAt::Given),
        }),
        capture: options.live_capture.clone(),
        codex_home: options.codex_home.clone(),
        codex_args: Vec::new(),
    };
    let plane = Plane::start(&settings, Default::default()).await?;
    let codex_home = plane.codex_home().to_path_buf();
    tracing::info!("CODEX_HOME={}", codex_home.display());
    let config_overrides = plane.config_overrides().to_vec();
    let spawn = SpawnOptions {
        binary: options.codex_bin.clone(),
        codex_home: codex_home.clone(),
        cwd: run.cwd.clone(),
        isolate_environment: options.offline,
        config_overrides,
        environment: None,
        jail: None,
        reaper: None,
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
            plane.finish().await;
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
    match result {
        Ok((thread_id, outcome)) => {
            session.shutdown(Duration::from_secs(5)).await;
            let requests = plane.requests();
            plane.finish().await;
            Ok(PairingResult {
                thread_id,
                outcome,
                codex_version,
                requests,
                codex_home,
            })
        }
        Err(error) => {
            session.kill().await;
            plane.finish().await;
            Err(error.into())
        }
    }
}

//! The one composer of the model-traffic plane.
//!
//! Every command that runs Codex needs the same few things settled before Codex starts: whether
//! the model is the offline stub or the real upstream, whether a recording forwarder sits in
//! front of it, which `CODEX_HOME` Codex gets, and which `-c` overrides point Codex at the
//! stub or the forwarder. `run`, `capture`, `serve` and `app-server` (stdio and endpoint) all
//! describe what they want in one [`PlaneSettings`] and take those answers from
//! [`Plane::start`], so `--offline --capture` means the same everywhere: the forwarder stands
//! between Codex and the stub, and each request and its answer are filed.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::capture::live::Known;
use crate::forward::{LiveCapture, LiveCaptureSettings};
use crate::record::CapturedRequest;
use crate::stub::{OfflineHome, ResponsesStub, StubScript};
use clawbridge_support::error::{Error, Result};

/// Where the offline `CODEX_HOME` is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum OfflineHomeAt {
    /// A throwaway folder, removed with the plane (`run`, `capture`).
    #[default]
    Throwaway,
    /// This folder, made private (0700) first; it outlives the process (`serve` and the
    /// endpoint keep threads across restarts).
    Private(PathBuf),
    /// This folder as it is (`--codex-home`).
    Given(PathBuf),
    /// None: the client owns Codex's home; Codex is pointed at the stub by `-c` only (the
    /// stdio `app-server` slot).
    ClientOwned,
}

/// `--offline`: the stub answers.
#[derive(Clone, Debug, Default)]
pub struct OfflineSettings {
    pub script: StubScript,
    /// The model the offline home names.
    pub model: String,
    pub home: OfflineHomeAt,
}

/// What a command asks of the plane.
#[derive(Clone, Debug, Default)]
pub struct PlaneSettings {
    /// `--offline`; `None` is the real upstream.
    pub offline: Option<OfflineSettings>,
    /// `--capture DIR` (and its upstream flags): the recording forwarder. Offline, its upstream
    /// is the stub, whatever `upstream` says.
    pub capture: Option<LiveCaptureSettings>,
    /// `--codex-home` of an online run; else `$CODEX_HOME`, else `~/.codex`.
    pub codex_home: Option<PathBuf>,
    /// Codex's own arguments, where its base URL may be configured (the stdio slot).
    pub codex_args: Vec<OsString>,
}

/// A running plane: the stub, the forwarder and its writer; what Codex is given.
pub struct Plane {
    stub: Option<ResponsesStub>,
    live: Option<LiveCapture>,
    home: Option<OfflineHome>,
    codex_home: PathBuf,
    config_overrides: Vec<String>,
}

impl Plane {
    /// Start what `settings` asks for. `known` is what the caller learns of the conversations
    /// (threads, turns, versions) that the capture writer files requests under.
    pub async fn start(settings: &PlaneSettings, known: Arc<Mutex<Known>>) -> Result<Plane> {
        let Some(offline) = &settings.offline else {
            return Self::online(settings, known).await;
        };
        let stub = ResponsesStub::start(offline.script.clone()).await?;
        // With a capture, the forwarder sits between Codex and the stub, as it would between
        // Codex and the real upstream.
        let live = match &settings.capture {
            Some(capture) => {
                let capture = LiveCaptureSettings {
                    upstream: Some(stub.base_url()),
                    ..capture.clone()
                };
                Some(LiveCapture::start(&capture, &[], None, known).await?)
            }
            None => None,
        };
        let base_url = live
            .as_ref()
            .map_or_else(|| stub.base_url(), LiveCapture::base_url);
        let real_home = dirs::home_dir();
        let prepare = |dir: Option<&Path>| {
            OfflineHome::prepare(dir, &base_url, &offline.model, real_home.as_deref())
        };
        let home = match &offline.home {
            OfflineHomeAt::Throwaway => Some(prepare(None)?),
            OfflineHomeAt::Given(dir) => {
                clawbridge_support::fs::create_private_dir(dir).map_err(|source| Error::Write {
                    path: dir.clone(),
                    source,
                })?;
                Some(prepare(Some(dir))?)
            }
            OfflineHomeAt::Private(dir) => {
                clawbridge_support::fs::ensure_private_dir(dir).map_err(|source| Error::Write {
                    path: dir.clone(),
                    source,
                })?;
                Some(prepare(Some(dir))?)
            }
            OfflineHomeAt::ClientOwned => None,
        };
        let codex_home = match &home {
            Some(home) => home.path.clone(),
            None => codex_home(settings.codex_home.as_deref()),
        };
        // Codex's `openai` provider goes to the stub too: a thread that names it (OpenClaw's do)
        // stays on the machine.
        let config_overrides = vec![base_url_override(&base_url)];
        Ok(Plane {
            stub: Some(stub),
            live,
            home,
            codex_home,
            config_overrides,
        })
    }

    async fn online(settings: &PlaneSettings, known: Arc<Mutex<Known>>) -> Result<Plane> {
        let codex_home = codex_home(settings.codex_home.as_deref());
        let live = match &settings.capture {
            Some(capture) => Some(
                LiveCapture::start(capture, &settings.codex_args, Some(&codex_home), known).await?,
            ),
            None => None,
        };
        let config_overrides = live
            .iter()
            .map(|live| base_url_override(&live.base_url()))
            .collect();
        Ok(Plane {
            stub: None,
            live,
            home: None,
            codex_home,
            config_overrides,
        })
    }

    /// The `CODEX_HOME` Codex runs with.
    /// Whether a capture writer files each model call (a trace then takes its model calls
    /// from it, with their timings).
    pub fn captures(&self) -> bool {
        self.live.is_some()
    }

    pub fn codex_home(&self) -> &Path {
        &self.codex_home
    }

    /// The `-c key=value` overrides Codex runs with (pointing it at the stub or forwarder).
    pub fn config_overrides(&self) -> &[String] {
        &self.config_overrides
    }

    /// Offline: the model URL Codex is given (the forwarder's, in front of the stub, with a
    /// capture; else the stub's). `None` online.
    pub fn offline_url(&self) -> Option<String> {
        let stub = self.stub.as_ref()?;
        Some(
            self.live
                .as_ref()
                .map_or_else(|| stub.base_url(), LiveCapture::base_url),
        )
    }

    /// Offline: every model-bound request the stub received, in order.
    pub fn requests(&self) -> Vec<CapturedRequest> {
        self.stub
            .as_ref()
            .map(ResponsesStub::requests)
            .unwrap_or_default()
    }

    /// Stop the stub and the forwarder; let the capture writer file what it holds (bounded).
    pub async fn finish(mut self) {
        if let Some(live) = self.live.take() {
            live.finish().await;
        }
        self.stub.take();
        self.home.take();
    }
}

/// `openai_base_url="URL"`: Codex's `openai` provider pointed at `url`.
pub fn base_url_override(url: &str) -> String {
    format!("openai_base_url=\"{url}\"")
}

/// The Codex home of an online run: `explicit`, else `$CODEX_HOME`, else `~/.codex`.
pub fn codex_home(explicit: Option<&Path>) -> PathBuf {
    if let Some(path) = explicit {
        return path.to_path_buf();
    }
    std::env::var_os("CODEX_HOME")
        .filter(|value| !value.is_empty())
        .map(PathBuf::from)
        .or_else(|| dirs::home_dir().map(|home| home.join(".codex")))
        .unwrap_or_else(|| PathBuf::from(".codex"))
}

//! The offline turn both the peer and the serve_load benches drive straight at a `codex
//! app-server`, without clawbridge in between: the Telegram fixture run's params, the loopback
//! model stub with its throwaway `CODEX_HOME`, and the app-server process itself.

use std::path::{Path, PathBuf};

use clawbridge::Run;
use clawbridge::{translate, TranslateOptions};
use clawbridge::{CodexParams, ThreadParams};
use clawbridge::{OfflineHome, ResponsesStub, StubScript};
use serde_json::Value;

/// One offline turn's inputs; the stub and the home live as long as this does.
pub struct OfflineTurn {
    pub run: Run,
    pub params: CodexParams,
    /// `thread/start` params as JSON (the fixture run starts a thread).
    pub thread_start: Value,
    pub home: OfflineHome,
    /// Kept only to keep the model stub listening for the app-server.
    _stub: ResponsesStub,
}

impl OfflineTurn {
    pub async fn prepare() -> OfflineTurn {
        let run = Run::load(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/runs/telegram-direct.json"),
        )
        .expect("run");
        let params = translate(&run, &TranslateOptions::hermetic())
            .expect("translate")
            .codex_params(&run);
        let thread_start = match &params.thread {
            ThreadParams::ThreadStart(start) => serde_json::to_value(start).expect("json"),
            ThreadParams::ThreadResume(_) => unreachable!("the fixture run starts a thread"),
        };
        let stub = ResponsesStub::start(StubScript::default())
            .await
            .expect("stub");
        let home = OfflineHome::prepare(None, &stub.base_url(), "gpt-5.5", None).expect("home");
        OfflineTurn {
            run,
            params,
            thread_start,
            home,
            _stub: stub,
        }
    }

    /// `codex app-server` (the native binary) on piped stdio, pointed at the stub.
    pub fn spawn_app_server(&self, native: &Path) -> tokio::process::Child {
        tokio::process::Command::new(native)
            .arg("app-server")
            .current_dir(&self.run.cwd)
            .env("CODEX_HOME", &self.home.path)
            .env("HOME", &self.home.path)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn app-server")
    }
}

/// The Codex CLI the benches pair with: CLAWBRIDGE_CODEX_BIN, else the pinned install in
/// `.tools/` (scripts/install-codex), else `codex` on PATH.
pub fn codex_bin() -> Option<PathBuf> {
    std::env::var_os("CLAWBRIDGE_CODEX_BIN")
        .map(PathBuf::from)
        .filter(|path| path.is_file())
        .or_else(|| {
            let local =
                Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/codex/node_modules/.bin/codex");
            local.is_file().then_some(local)
        })
        .or_else(|| which::which("codex").ok())
}

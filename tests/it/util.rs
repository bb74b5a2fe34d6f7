//! Shared helpers: throwaway workspaces, run documents built in memory, the translation pipeline.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use clawbridge::CodexParams;
use clawbridge::{translate, TranslateOptions, Translation};
use clawbridge::{Run, RunDocument};
use serde_json::{json, Value};

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The built binary.
pub fn clawbridge() -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_clawbridge"));
    command.env_remove("CLAWBRIDGE_LOG");
    command
}

/// Run the binary from the repository root: (exit code, stdout, stderr).
pub fn run_cli(args: &[&str]) -> (i32, String, String) {
    let output = clawbridge()
        .args(args)
        .current_dir(repo_root())
        .output()
        .expect("spawn clawbridge");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// A temp workspace; dropped with the test.
pub struct TestWorkspace {
    pub dir: tempfile::TempDir,
}

pub const ALL_FILES: [&str; 7] = [
    "AGENTS.md",
    "SOUL.md",
    "TOOLS.md",
    "IDENTITY.md",
    "USER.md",
    "HEARTBEAT.md",
    "MEMORY.md",
];

/// The placeholder content of a bootstrap file.
pub fn placeholder(name: &str) -> String {
    format!("<{name} contents will be here>")
}

pub const WEATHER_SKILL: &str = "---\nname: weather\ndescription: Get weather <data> & \"forecasts\" it's\n---\n\n# Weather\n\nCall the forecast API.\n";

impl TestWorkspace {
    pub fn empty() -> Self {
        Self {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    /// All seven files with placeholders plus the weather skill.
    pub fn full() -> Self {
        let workspace = Self::empty();
        for name in ALL_FILES {
            workspace.write(name, &format!("{}\n", placeholder(name)));
        }
        workspace.write("skills/weather/SKILL.md", WEATHER_SKILL);
        workspace
    }

    pub fn path(&self) -> PathBuf {
        self.dir.path().canonicalize().expect("canonical")
    }

    pub fn write(&self, relative: &str, content: &str) {
        self.write_bytes(relative, content.as_bytes());
    }

    pub fn write_bytes(&self, relative: &str, bytes: &[u8]) {
        let path = self.dir.path().join(relative);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, bytes).expect("write");
    }

    pub fn remove(&self, relative: &str) {
        std::fs::remove_file(self.dir.path().join(relative)).expect("remove");
    }

    /// `<workspace>/<name>` as shown to the model.
    pub fn shown(&self, name: &str) -> String {
        format!("{}/{name}", self.path().display())
    }
}

/// A tool spec with an empty object schema.
pub fn tool(name: &str) -> Value {
    json!({"name": name, "description": format!("The {name} tool."), "inputSchema": {"type": "object", "properties": {}}})
}

/// Build a run from a JSON object merged over `{workspace}`.
pub fn run_with(workspace: &Path, fields: Value) -> Run {
    let mut document = json!({ "workspace": workspace });
    if let (Some(target), Value::Object(extra)) = (document.as_object_mut(), fields) {
        target.extend(extra);
    }
    let text = document.to_string();
    let source = Path::new("<test>");
    RunDocument::parse(&text, source)
        .and_then(|doc| doc.into_run(source, workspace))
        .expect("valid run")
}

/// Translate with hermetic options.
pub fn translate_run(run: &Run) -> (Translation, CodexParams) {
    let translation = translate(run, &TranslateOptions::hermetic()).expect("translate");
    let params = translation.codex_params(run);
    (translation, params)
}

/// The params as JSON.
pub fn params_json(run: &Run) -> Value {
    serde_json::to_value(translate_run(run).1).expect("json")
}

pub fn developer_instructions(params: &Value) -> String {
    params
        .get("threadStart")
        .or_else(|| params.get("threadResume"))
        .and_then(|thread| thread.get("developerInstructions"))
        .and_then(Value::as_str)
        .expect("developerInstructions")
        .to_string()
}

pub fn collaboration(params: &Value) -> Option<String> {
    params["turnStart"]["collaborationMode"]["settings"]["developer_instructions"]
        .as_str()
        .map(str::to_string)
}

pub fn turn_input(params: &Value) -> String {
    params["turnStart"]["input"][0]["text"]
        .as_str()
        .expect("text input")
        .to_string()
}

/// Every text surface joined, to assert something appears nowhere.
pub fn all_text(params: &Value) -> String {
    params.to_string()
}

/// Copy a folder tree (tests build throwaway repository roots from `fixtures/`).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// A throwaway repository root holding a copy of `fixtures/`.
pub fn fixture_root() -> tempfile::TempDir {
    let root = tempfile::tempdir().expect("root");
    copy_tree(&repo_root().join("fixtures"), &root.path().join("fixtures"));
    root
}

/// How often the waits below look again.
const POLL_EVERY: std::time::Duration = std::time::Duration::from_millis(20);

/// The one way tests wait for something another process or task does: look at `probe` until it
/// gives a value, for at most `limit`. `None` when it never did.
pub fn poll<T>(limit: std::time::Duration, mut probe: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Some(value) = probe() {
            return Some(value);
        }
        if std::time::Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(POLL_EVERY);
    }
}

/// [`poll`] that fails the test, naming what never happened.
pub fn wait_for<T>(what: &str, limit: std::time::Duration, probe: impl FnMut() -> Option<T>) -> T {
    poll(limit, probe).unwrap_or_else(|| panic!("{what}: not within {limit:?}"))
}

/// [`wait_for`] a condition.
pub fn wait_until(what: &str, limit: std::time::Duration, mut condition: impl FnMut() -> bool) {
    wait_for(what, limit, || condition().then_some(()))
}

/// [`poll`] from async code, without blocking the runtime's thread.
pub async fn poll_async<T>(
    limit: std::time::Duration,
    mut probe: impl FnMut() -> Option<T>,
) -> Option<T> {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(value) = probe() {
            return Some(value);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// [`wait_until`] from async code.
pub async fn wait_until_async(
    what: &str,
    limit: std::time::Duration,
    mut condition: impl FnMut() -> bool,
) {
    if poll_async(limit, || condition().then_some(()))
        .await
        .is_none()
    {
        panic!("{what}: not within {limit:?}");
    }
}

/// [`poll_async`] with a probe that is itself async (a request to the service under test).
pub async fn poll_with<T, F, Fut>(limit: std::time::Duration, mut probe: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(value) = probe().await {
            return Some(value);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// The per-method line the proxy wrote at exit for `method` in the `flow` family.
pub fn summary_row(log: &[Value], method: &str, flow: &str) -> Value {
    log.iter()
        .find(|entry| {
            entry["kind"] == "method" && entry["method"] == method && entry["message"] == flow
        })
        .cloned()
        .unwrap_or_else(|| panic!("no {method} {flow} row: {log:#?}"))
}

/// `clawbridge app-server report DIR`, run to its end.
pub fn conformance_report(dir: &Path) -> std::process::Output {
    clawbridge()
        .args(["app-server", "report"])
        .arg(dir)
        .output()
        .expect("clawbridge app-server report")
}

/// Write `contents` to a new file only its owner may read (0600): what a token file must be.
pub fn write_private(path: &Path, contents: &str) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    file.write_all(contents.as_bytes()).expect("write");
}

/// Whether process `pid` runs: its /proc entry is there and it is not a zombie waiting to be
/// reaped (a process whose parent went away is reaped by init, a moment later).
pub fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit_once(") Z").is_none())
}

/// A free loopback port for a child that binds it itself (Codex's `--listen`, Prometheus).
/// It is taken below the kernel's ephemeral range (32768 and up), where no `bind(0)` of
/// another test can be handed it between this check and the child's bind; successive calls
/// in one process never repeat a port.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering};
    static NEXT: AtomicU16 = AtomicU16::new(0);
    // Spread processes apart (two test binaries running at once start at different ports).
    let base = 20_000 + (std::process::id() % 500) as u16 * 20;
    for _ in 0..2_000 {
        let offset = NEXT.fetch_add(1, Ordering::SeqCst) % 12_000;
        let port = 20_000 + (base - 20_000 + offset) % 12_000;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port between 20000 and 32000");
}

/// `Command::output`, again while the program is "text file busy": a binary the test has just
/// copied can still be open for writing in a child another test thread forked meanwhile (the
/// child holds the descriptor until it execs), and the kernel refuses to run it until then.
pub trait OutputRetryingBusy {
    fn output_retrying_busy(&mut self) -> std::io::Result<std::process::Output>;
}

impl OutputRetryingBusy for std::process::Command {
    fn output_retrying_busy(&mut self) -> std::io::Result<std::process::Output> {
        let mut tries = 0;
        loop {
            match self.output() {
                Err(error)
                    if error.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 100 =>
                {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                other => return other,
            }
        }
    }
}

/// `serve`'s session bindings as its state database holds them (read-only, beside the running
/// service), in the shape `sessions.json` had: `{"sessions": {KEY: {"threadId", "fingerprint",
/// "owner"?, "member"?}}}`.
pub fn stored_sessions(state: &Path) -> Value {
    let connection = rusqlite::Connection::open_with_flags(
        state.join("serve.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .expect("serve.db");
    let mut statement = connection
        .prepare("SELECT session_key, id, fingerprint, owner, member FROM threads WHERE session_key IS NOT NULL")
        .expect("query");
    let mut sessions = serde_json::Map::new();
    let rows = statement
        .query_map([], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, Option<String>>(2)?,
                row.get::<_, String>(3)?,
                row.get::<_, String>(4)?,
            ))
        })
        .expect("rows");
    for row in rows {
        let (key, thread, fingerprint, owner, member) = row.expect("row");
        let mut binding = json!({"threadId": thread, "fingerprint": fingerprint});
        if owner != "operator" {
            binding["owner"] = json!(owner);
        }
        if !member.is_empty() {
            binding["member"] = json!(member);
        }
        sessions.insert(key, binding);
    }
    json!({ "sessions": sessions })
}

/// A TLS acceptor for `127.0.0.1` with a certificate of a CA made here; the CA's PEM.
pub fn tls_acceptor() -> (tokio_rustls::TlsAcceptor, String) {
    let ca_key = rcgen::KeyPair::generate().expect("ca key");
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("ca params");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "clawbridge test CA");
    let ca = ca_params.self_signed(&ca_key).expect("ca");
    let leaf_key = rcgen::KeyPair::generate().expect("leaf key");
    let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
        .expect("leaf params")
        .signed_by(&leaf_key, &ca, &ca_key)
        .expect("leaf");
    let config = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_no_client_auth()
    .with_single_cert(
        vec![leaf.der().clone()],
        rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into()),
    )
    .expect("server config");
    (
        tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config)),
        ca.pem(),
    )
}

pub use crate::services::Postgres;

/// A real `codex app-server --listen URL` over `home` (its `CODEX_HOME` and `HOME`), started in
/// `cwd` with none of this process's `OPENAI_*` and `CODEX_*` variables; with `token_file`, its
/// WebSocket asks for that capability token. The caller waits for it to listen and kills it.
pub fn codex_listener(
    home: &Path,
    cwd: &Path,
    listen: &str,
    token_file: Option<&Path>,
) -> std::process::Child {
    let mut command =
        std::process::Command::new(clawbridge::resolve_native_binary(&crate::e2e::codex_bin()));
    for (key, _) in std::env::vars_os() {
        let text = key.to_string_lossy();
        if text.starts_with("OPENAI_") || text.starts_with("CODEX_") {
            command.env_remove(&key);
        }
    }
    command.args(["app-server", "--listen", listen]);
    if let Some(token_file) = token_file {
        command
            .args(["--ws-auth", "capability-token", "--ws-token-file"])
            .arg(token_file);
    }
    command
        .env("CODEX_HOME", home)
        .env("HOME", home)
        .current_dir(cwd)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("codex app-server --listen")
}

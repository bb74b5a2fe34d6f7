//! `cargo bench --bench replicas`: what serving one fleet from several endpoints costs an
//! agent's turn.
//!
//! Two set-ups on the same real Codex and loopback model stub, in the same run: one endpoint on
//! its embedded store (`app-server.db`) with two local members, and two endpoints with one local
//! member each on one real PostgreSQL (`--store postgres://`, thread leases on), behind a real
//! HAProxy spreading the agents' connections over them. The same agent work runs on each,
//! alternately, round after round: `AGENTS` agents at once, each a new thread and `TURNS` turns
//! one after another. Printed: turn latency p50 and p99 of each and the ratio fleet / single.
//!
//! Needs the Codex CLI, PostgreSQL and HAProxy (`scripts/test` installs them; or
//! `CLAWBRIDGE_CODEX_BIN`, `CLAWBRIDGE_POSTGRES_BIN`, `CLAWBRIDGE_HAPROXY_BIN`).
//!
//! `cargo bench --bench replicas -- [--rounds 4] [--agents 4] [--turns 8]`.

use std::path::{Path, PathBuf};
use std::time::Duration;

#[path = "common/offline_turn.rs"]
#[allow(dead_code)]
mod offline_turn;
use offline_turn::{codex_bin, OfflineTurn};
#[path = "common/timing.rs"]
#[allow(dead_code)]
mod timing;
use timing::{flag, percentile};
#[path = "common/line.rs"]
mod line;
use line::{timed_session, Socket};
#[path = "../tests/it/services.rs"]
#[allow(dead_code)]
mod services;

const TOKEN: &str = "replicas-bench-token-0123456789abcdef";

/// One `clawbridge app-server --listen` process: its address.
struct Running {
    child: tokio::process::Child,
    addr: String,
}

/// An endpoint on `state` with `members` local members over the offline home, and `flags`.
async fn endpoint(offline: &OfflineTurn, state: &Path, members: usize, flags: &[&str]) -> Running {
    std::fs::create_dir_all(state).expect("state");
    let token = state.join("app-server-token");
    std::fs::write(&token, TOKEN).expect("token");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).expect("mode");
    }
    let codex: PathBuf = codex_bin().expect("no Codex CLI: scripts/install-codex");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_clawbridge"))
        .args(["app-server", "--listen", "ws://127.0.0.1:0", "--state-dir"])
        .arg(state)
        .arg("--workspace-root")
        .arg(&offline.run.cwd)
        .arg("--codex-bin")
        .arg(codex)
        .args(["--app-servers", &members.to_string()])
        .args(flags)
        .env("CODEX_HOME", &offline.home.path)
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env("RUST_LOG", "error")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("endpoint");
    let mut line = String::new();
    {
        use tokio::io::AsyncBufReadExt;
        let stdout = child.stdout.take().expect("stdout");
        tokio::io::BufReader::new(stdout)
            .read_line(&mut line)
            .await
            .expect("address");
    }
    assert!(!line.trim().is_empty(), "the endpoint printed no address");
    Running {
        child,
        addr: line.trim().to_string(),
    }
}

/// One agent's session through `addr`: a new thread and `turns` turns; each turn's latency.
async fn session(addr: &str, offline: &OfflineTurn, turns: usize) -> Vec<Duration> {
    let mut line = Socket::connect_with(TOKEN, addr).await;
    timed_session(
        &mut line,
        "replicas-bench",
        &offline.thread_start,
        turns,
        |turn| format!("turn {turn}: say hello"),
    )
    .await
}

/// `agents` sessions at once through `addr`: every turn's latency.
async fn round(addr: &str, offline: &OfflineTurn, agents: usize, turns: usize) -> Vec<Duration> {
    let sessions = (0..agents).map(|_| session(addr, offline, turns));
    futures_util::future::join_all(sessions)
        .await
        .into_iter()
        .flatten()
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds = flag(&args, "--rounds", 4);
    let agents = flag(&args, "--agents", 4);
    let turns = flag(&args, "--turns", 8);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("dir");
    runtime.block_on(async {
        let offline = OfflineTurn::prepare().await;
        let single = endpoint(&offline, &dir.path().join("single"), 2, &[]).await;
        let postgres = services::Postgres::start();
        let url = postgres.url();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("port")
            .port();
        let balancer = format!("127.0.0.1:{port}");
        // One state dir for both (the homes on shared storage): a reconnection may land on
        // either endpoint.
        let shared = dir.path().join("fleet");
        let flags = ["--store", url.as_str(), "--allow-host", balancer.as_str()];
        let a = endpoint(&offline, &shared, 1, &flags).await;
        let b = endpoint(&offline, &shared, 1, &flags).await;
        let haproxy =
            services::Haproxy::start_balanced(port, &[&a.addr, &b.addr], "roundrobin");
        // One warm-up round each (the members start), then the measured rounds, the order
        // alternating so neither always runs on a warmer machine.
        round(&single.addr, &offline, agents, 1).await;
        round(&haproxy.addr, &offline, agents.max(2), 1).await;
        let (mut one, mut fleet) = (Vec::new(), Vec::new());
        for number in 0..rounds {
            if number % 2 == 0 {
                one.extend(round(&single.addr, &offline, agents, turns).await);
                fleet.extend(round(&haproxy.addr, &offline, agents, turns).await);
            } else {
                fleet.extend(round(&haproxy.addr, &offline, agents, turns).await);
                one.extend(round(&single.addr, &offline, agents, turns).await);
            }
        }
        let show = |latency: Duration| format!("{:.1} ms", latency.as_secs_f64() * 1000.0);
        for (name, fraction) in [("p50", 0.5), ("p99", 0.99)] {
            let (f, s) = (percentile(&fleet, fraction), percentile(&one, fraction));
            println!(
                "turn latency {name}: HAProxy + 2 endpoints on PostgreSQL {}, 1 endpoint on SQLite {}: {:.2}x",
                show(f),
                show(s),
                f.as_secs_f64() / s.as_secs_f64().max(1e-9)
            );
        }
        println!(
            "({} turns each: {rounds} rounds of {agents} agents at once, {turns} turns each)",
            one.len()
        );
        drop(haproxy);
        for mut running in [single, a, b] {
            let _ = running.child.start_kill();
            let _ = running.child.wait().await;
        }
        drop(postgres);
    });
}

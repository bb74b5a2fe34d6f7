//! `cargo bench --bench store`: what keeping the fleet's state on disk costs.
//!
//! Two endpoints in one process, on the same real Codex and loopback model stub: one keeps its
//! state in an embedded database (`app-server.db`, as `clawbridge app-server --listen` does),
//! one in memory only. The same agent work runs on each, alternately, round after round: a new
//! thread and `TURNS` turns one after another (each turn is a placement, a budget count, a
//! touch). Printed: turn latency p50 and p99 of each, and the ratio database / memory (the goal:
//! at most 1.05x). Then the directory alone: 100,000 threads placed, the time per placement,
//! and the database's size on disk afterwards.
//!
//! `cargo bench --bench store -- [--rounds 4] [--turns 15] [--threads 100000]`.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clawbridge::{Endpoint, EndpointSettings, FleetConfig, ListenAddr, PoolConfig, StallSettings};

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

const TOKEN: &str = "store-bench-token-0123456789abcdef";

/// An endpoint on one local member over the offline home, its state in `store` (or memory).
async fn endpoint(
    offline: &OfflineTurn,
    store: Option<Arc<clawbridge::Store>>,
    homes: &Path,
) -> Endpoint {
    let native = PoolConfig {
        locals: 1,
        isolate_environment: true,
        recycle_rss_bytes: u64::MAX,
        ..PoolConfig::new(
            codex_bin().ok_or_else(|| "no Codex CLI: scripts/install-codex".to_string()),
            offline.home.path.clone(),
        )
    };
    let settings = EndpointSettings {
        listen: ListenAddr::Tcp("127.0.0.1:0".parse().expect("addr")),
        token: TOKEN.into(),
        clients: Vec::new(),
        fleet: FleetConfig {
            total_locals: 1,
            per_identity: 1,
            home_config: None,
            homes: homes.to_path_buf(),
            native,
            wait_for_room: FleetConfig::DEFAULT_WAIT_FOR_ROOM,
            one_account: None,
            account_members: Default::default(),
        },
        max_connections: 8,
        idle_timeout: Duration::from_secs(60),
        ping_interval: Duration::from_secs(20),
        handshake_timeout: Duration::from_secs(60),
        upgrade_timeout: Duration::from_secs(60),
        cwd: offline.run.cwd.clone(),
        transcript: None,
        observe: None,
        trace: None,
        first_tokens: None,
        stalls: StallSettings::default(),
        // A budget no turn reaches: counted (and kept) like an operator's.
        budget_tokens: Some(u64::MAX / 2),
        allow_hosts: Vec::new(),
        policy: clawbridge::EndpointPolicy::default(),
        fresh_thread_grace: clawbridge::FRESH_THREAD_GRACE,
        store,
        home: None,
        max_threads_in_memory: 100_000,
        lease_ttl: clawbridge::DEFAULT_LEASE_TTL,
        new_runtime_identity: false,
        home_retention: None,
        accounts: None,
        unnamed_accounts: false,
        route: clawbridge::LiveRoute::AsSent,
    };
    Endpoint::start(settings, false).await.expect("endpoint")
}

/// One agent's session on `endpoint`: a new thread and `turns` turns; each turn's latency.
async fn session(endpoint: &Endpoint, offline: &OfflineTurn, turns: usize) -> Vec<Duration> {
    let addr = endpoint.tcp_addr().expect("tcp").to_string();
    let mut line = Socket::connect_with(TOKEN, &addr).await;
    timed_session(
        &mut line,
        "store-bench",
        &offline.thread_start,
        turns,
        |turn| format!("turn {turn}: say hello"),
    )
    .await
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds = flag(&args, "--rounds", 4);
    let turns = flag(&args, "--turns", 15);
    let threads = flag(&args, "--threads", 100_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("dir");
    runtime.block_on(async {
        let offline = OfflineTurn::prepare().await;
        let store = Arc::new(
            clawbridge::Store::open(&dir.path().join("state").join("app-server.db"))
                .expect("store"),
        );
        let on_disk = endpoint(&offline, Some(store), &dir.path().join("homes-disk")).await;
        let in_memory = endpoint(&offline, None, &dir.path().join("homes-memory")).await;
        // One warm-up session each (the member starts), then the measured rounds, the order
        // alternating so neither always runs on a warmer machine.
        session(&on_disk, &offline, 1).await;
        session(&in_memory, &offline, 1).await;
        let (mut disk, mut memory) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            if round % 2 == 0 {
                disk.extend(session(&on_disk, &offline, turns).await);
                memory.extend(session(&in_memory, &offline, turns).await);
            } else {
                memory.extend(session(&in_memory, &offline, turns).await);
                disk.extend(session(&on_disk, &offline, turns).await);
            }
        }
        on_disk.stop().await;
        in_memory.stop().await;
        let show = |latency: Duration| format!("{:.1} ms", latency.as_secs_f64() * 1000.0);
        for (name, fraction) in [("p50", 0.5), ("p99", 0.99)] {
            let (d, m) = (percentile(&disk, fraction), percentile(&memory, fraction));
            println!(
                "turn latency {name}: database {}, memory {}: {:.2}x (goal <= 1.05x)",
                show(d),
                show(m),
                d.as_secs_f64() / m.as_secs_f64().max(1e-9)
            );
        }
        println!("({} turns each, {rounds} rounds of {turns})", disk.len());
    });
    // The directory alone: placements into a fresh database, and its size afterwards.
    let path = dir.path().join("size").join("app-server.db");
    let store = Arc::new(clawbridge::Store::open(&path).expect("store"));
    let directory = clawbridge::Directory::open(Some(Arc::clone(&store)), 100_000);
    let began = Instant::now();
    for n in 0..threads {
        let id = format!("019a{n:028x}");
        let rollout = format!(
            "/var/lib/clawbridge/app-server-homes/apiKey-1a2b3c4d5e6f7a8b/sessions/2026/12/05/rollout-2026-12-05T10-00-00-{id}.jsonl"
        );
        directory.place(
            &id,
            &clawbridge::Placement {
                identity: "apiKey-1a2b3c4d5e6f7a8b",
                member: "local-0@apiKey-1a2b3c4d5e6f7a8b",
                owner: "alice",
                rollout: Some(&rollout),
                home: Some("host-0a1b2c3d4e5f"),
            },
        );
    }
    store.flush();
    let took = began.elapsed();
    let size = |suffix: &str| {
        std::fs::metadata(format!("{}{suffix}", path.display())).map_or(0, |meta| meta.len())
    };
    println!(
        "{threads} threads placed: {:.1} us each (the writer's batches included); database {:.1} MiB, its write-ahead log {:.1} MiB; {} kept in memory",
        took.as_secs_f64() * 1e6 / threads.max(1) as f64,
        size("") as f64 / (1024.0 * 1024.0),
        size("-wal") as f64 / (1024.0 * 1024.0),
        directory.in_memory()
    );
}

//! `cargo bench --bench serve_load`: a bounded load test of `clawbridge serve`.
//!
//! 32 sessions x 4 turns run concurrently against one Codex app-server and the offline stub,
//! each session over its own WebSocket client; every run's completion must reach its subscriber
//! exactly once. Reports p50/p99 turn latency and memory next to the same 128 turns run
//! sequentially through `clawbridge run --offline` (one process each), and next to the same load
//! driven straight at one app-server by a minimal JSON-RPC client inside the bench (same
//! concurrency, same offline stub): what the bridge itself costs. Loopback only; bounded.
//! The serve load runs twice, on a pool of one and of two app-servers (`--app-servers`), each
//! next to the same load driven directly at one and at two app-servers: ratios from one run.
//! `-- --soak [RUNS]` instead runs RUNS (default 1,000) runs through one serve and fails when
//! clawbridge's memory grows with them. `-- --faults [RUNS]` runs RUNS (default 500) runs
//! through a pool of two while killing a random member every few seconds, and fails when a run
//! has no `turnEnd`, a binding is lost, or clawbridge's memory grows.

use std::path::PathBuf;
use std::time::{Duration, Instant};

#[path = "common/offline_turn.rs"]
mod offline_turn;
use offline_turn::{codex_bin, OfflineTurn};

use clawbridge::TurnLimits;
use clawbridge::{serve, ServeConfig};
use rpc_client_core::client::{ClientT, SubscriptionClientT};
use rpc_client_core::rpc_params;
use rpc_ws_client::WsClientBuilder;

/// The bench's bearer token (the production path authenticates every connection).
const TOKEN: &str = "serve-load-bench-token-0123456789";

fn auth_headers() -> rpc_http_client::HeaderMap {
    let mut headers = rpc_http_client::HeaderMap::new();
    if let Ok(value) = format!("Bearer {TOKEN}").parse() {
        headers.insert("authorization", value);
    }
    headers
}
use serde_json::{json, Value};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const SESSIONS: usize = 32;
const TURNS: usize = 4;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn rss_kib(pid: &str, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|line| line.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn document(session: usize) -> Value {
    let mut run: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("fixtures/runs/telegram-direct.json")).expect("run"),
    )
    .expect("json");
    run["workspace"] = json!("workspace");
    run["tools"] = json!(["tools/openclaw-tools.json"]);
    run["sessionKey"] = json!(format!("agent:main:load:{session}"));
    run
}

fn report(name: &str, mut latencies: Vec<Duration>, wall: Duration) {
    latencies.sort();
    println!(
        "  {name:<34} turns {:>4}  wall {:>8.2} s  p50 {:>7.1} ms  p99 {:>7.1} ms  throughput {:>6.1} turns/s",
        latencies.len(),
        wall.as_secs_f64(),
        percentile(&latencies, 0.5).as_secs_f64() * 1e3,
        percentile(&latencies, 0.99).as_secs_f64() * 1e3,
        latencies.len() as f64 / wall.as_secs_f64()
    );
}

fn serve_config(bin: PathBuf, state: &std::path::Path) -> ServeConfig {
    pool_config(bin, state, 1)
}

fn pool_config(bin: PathBuf, state: &std::path::Path, app_servers: usize) -> ServeConfig {
    ServeConfig {
        app_servers,
        listen: "127.0.0.1:0".parse().expect("addr"),
        token: Some(TOKEN.into()),
        offline: true,
        limits: TurnLimits {
            idle: Duration::from_secs(60),
            hard: Duration::from_secs(300),
            interrupt_grace: Duration::from_secs(5),
            ..TurnLimits::default()
        },
        answer_timeout: Duration::from_secs(30),
        ..ServeConfig::new(bin, vec![root().join("fixtures")], state.to_path_buf())
    }
}

/// `-- --soak [RUNS]`: RUNS (default 1,000) runs through one serve, 8 sessions at a time; prints
/// clawbridge's and Codex's RSS every 100 runs and exits 1 if clawbridge's RSS, at any later
/// sample, is more than 10 MiB above the warm-up sample. Warm-up lasts until the service's
/// bounded retention is full (`--max-finished-runs` finished runs kept for late subscribers): the
/// first sample after that many runs plus the workers'.
fn soak(bin: PathBuf, runs: usize) {
    const WORKERS: usize = 8;
    const ALLOWED_GROWTH_KIB: u64 = 10 * 1024;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let state = tempfile::tempdir().expect("state");
    let samples = runtime.block_on(async {
        let running = serve(serve_config(bin, state.path())).await.expect("serve");
        let url = format!("ws://{}", running.addr);
        let done = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let samples = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for worker in 0..WORKERS {
            let (url, done, samples) = (url.clone(), done.clone(), samples.clone());
            tasks.push(tokio::spawn(async move {
                let client = WsClientBuilder::default()
                    .set_headers(auth_headers())
                    .build(&url)
                    .await
                    .expect("client");
                loop {
                    let number = done.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                    if number > runs {
                        return;
                    }
                    let run: Value = client
                        .request("bridge.runStart", rpc_params![document(worker)])
                        .await
                        .expect("runStart");
                    let mut events = client
                        .subscribe::<Value, _>(
                            "bridge.subscribeRun",
                            rpc_params![run["runId"].clone()],
                            "bridge.unsubscribeRun",
                        )
                        .await
                        .expect("subscribe");
                    while let Ok(Some(Ok(event))) =
                        tokio::time::timeout(Duration::from_secs(120), events.next()).await
                    {
                        if event["event"] == "turnEnd" {
                            assert_eq!(event["status"], "completed", "{event}");
                            break;
                        }
                    }
                    if number % 100 == 0 {
                        let status: Value = client
                            .request("bridge.status", rpc_params![])
                            .await
                            .expect("status");
                        let codex = status["codex"]["pid"]
                            .as_u64()
                            .and_then(|pid| rss_kib(&pid.to_string(), "VmRSS:"));
                        let ours = rss_kib("self", "VmRSS:");
                        println!(
                            "  run {number:>5}: clawbridge RSS {} MiB, codex RSS {} MiB, runs listed {}",
                            ours.map_or("?".into(), |kib| format!("{:.1}", kib as f64 / 1024.0)),
                            codex.map_or("?".into(), |kib| format!("{:.1}", kib as f64 / 1024.0)),
                            status["runs"].as_array().map_or(0, Vec::len)
                        );
                        if let Ok(mut samples) = samples.lock() {
                            samples.push((number, ours.unwrap_or(0)));
                        }
                    }
                }
            }));
        }
        for task in tasks {
            task.await.expect("worker");
        }
        let samples = samples.lock().map(|samples| samples.clone()).unwrap_or_default();
        samples
    });
    let mut samples = samples;
    samples.sort();
    let warm = clawbridge::DEFAULT_MAX_FINISHED_RUNS + WORKERS;
    let after: Vec<(usize, u64)> = samples
        .iter()
        .copied()
        .filter(|(run, _)| *run >= warm)
        .collect();
    let (Some(first), Some(peak)) = (after.first(), after.iter().max_by_key(|sample| sample.1))
    else {
        println!("soak: too few runs past the warm-up ({warm}) to measure");
        return;
    };
    let growth = peak.1.saturating_sub(first.1);
    println!(
        "soak: {runs} runs; after warm-up clawbridge RSS {:.1} MiB at run {}, peak {:.1} MiB at run {} (growth {:.1} MiB, limit 10 MiB)",
        first.1 as f64 / 1024.0,
        first.0,
        peak.1 as f64 / 1024.0,
        peak.0,
        growth as f64 / 1024.0
    );
    if growth > ALLOWED_GROWTH_KIB {
        println!("soak: FAILED: memory grows with the number of runs");
        std::process::exit(1);
    }
}

/// The same load driven straight at one `codex app-server` (its native binary): a minimal client
/// (newline-delimited JSON over stdio, responses matched by id, `turn/completed` routed by
/// thread) and `SESSIONS` tasks of `TURNS` turns each, as the serve load runs them.
async fn direct_load(bin: &std::path::Path, sessions: usize) -> (Vec<Duration>, Duration) {
    use clawbridge::resolve_native_binary;
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    use tokio::sync::{mpsc, oneshot};

    let offline = OfflineTurn::prepare().await;
    let thread_start = offline.thread_start.clone();
    let turn_start = serde_json::to_value(&offline.params.turn_start).expect("json");
    let mut child = offline.spawn_app_server(&resolve_native_binary(bin));
    type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Value>>>>;
    type Routes = Arc<Mutex<HashMap<String, mpsc::UnboundedSender<Value>>>>;
    let stdin = Arc::new(tokio::sync::Mutex::new(child.stdin.take().expect("stdin")));
    let pending: Pending = Arc::default();
    let routes: Routes = Arc::default();
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    {
        let (pending, routes) = (pending.clone(), routes.clone());
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(message) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                if let Some(id) = message["id"]
                    .as_u64()
                    .filter(|_| message.get("method").is_none())
                {
                    if let Some(reply) = pending.lock().expect("pending").remove(&id) {
                        let _ = reply.send(message);
                    }
                } else if message["method"] == "turn/completed" {
                    let thread = message["params"]["threadId"].as_str().unwrap_or_default();
                    if let Some(route) = routes.lock().expect("routes").get(thread) {
                        let _ = route.send(message);
                    }
                }
            }
        });
    }
    let next_id = Arc::new(std::sync::atomic::AtomicU64::new(1));
    let request = {
        let (stdin, pending, next_id) = (stdin.clone(), pending.clone(), next_id.clone());
        move |method: &'static str, params: Value| {
            let (stdin, pending, next_id) = (stdin.clone(), pending.clone(), next_id.clone());
            async move {
                let id = next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let (reply, answer) = oneshot::channel();
                pending.lock().expect("pending").insert(id, reply);
                let line = format!(
                    "{}\n",
                    json!({"id": id, "method": method, "params": params})
                );
                stdin
                    .lock()
                    .await
                    .write_all(line.as_bytes())
                    .await
                    .expect("write");
                answer.await.expect("answer")
            }
        }
    };
    request(
        "initialize",
        json!({"clientInfo": {"name": "direct", "version": "0"}, "capabilities": {"experimentalApi": true}}),
    )
    .await;
    stdin
        .lock()
        .await
        .write_all(b"{\"method\":\"initialized\"}\n")
        .await
        .expect("write");
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..sessions {
        let (request, routes) = (request.clone(), routes.clone());
        let (thread_start, turn_start) = (thread_start.clone(), turn_start.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let thread = request("thread/start", thread_start).await;
            let thread_id = thread["result"]["thread"]["id"]
                .as_str()
                .expect("thread id")
                .to_string();
            let (route, mut completions) = mpsc::unbounded_channel();
            routes
                .lock()
                .expect("routes")
                .insert(thread_id.clone(), route);
            for _ in 0..TURNS {
                let begun = Instant::now();
                let mut turn = turn_start.clone();
                turn["threadId"] = json!(thread_id);
                request("turn/start", turn).await;
                let done = completions.recv().await.expect("turn/completed");
                assert_eq!(done["params"]["turn"]["status"], "completed", "{done}");
                latencies.push(begun.elapsed());
            }
            latencies
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.expect("direct session"));
    }
    let wall = started.elapsed();
    drop(stdin);
    let _ = child.kill().await;
    (all, wall)
}

/// `SESSIONS` sessions of `TURNS` turns each, concurrently, through one serve on a pool of
/// `app_servers`: the latencies, the wall time, and the app-servers' peak RSS (summed).
async fn serve_load(
    bin: &std::path::Path,
    app_servers: usize,
) -> (Vec<Duration>, Duration, Option<u64>) {
    let state = tempfile::tempdir().expect("state");
    {
        let config = pool_config(bin.to_path_buf(), state.path(), app_servers);
        let running = serve(config).await.expect("serve");
        let url = format!("ws://{}", running.addr);
        let started = Instant::now();
        let mut tasks = Vec::new();
        for session in 0..SESSIONS {
            let url = url.clone();
            tasks.push(tokio::spawn(async move {
                let client = WsClientBuilder::default()
                    .set_headers(auth_headers())
                    .build(&url)
                    .await
                    .expect("client");
                let mut latencies = Vec::new();
                for _ in 0..TURNS {
                    let begun = Instant::now();
                    let run: Value = client
                        .request("bridge.runStart", rpc_params![document(session)])
                        .await
                        .expect("runStart");
                    let mut subscription = client
                        .subscribe::<Value, _>(
                            "bridge.subscribeRun",
                            rpc_params![run["runId"].clone()],
                            "bridge.unsubscribeRun",
                        )
                        .await
                        .expect("subscribe");
                    let mut ends = 0;
                    while let Ok(Some(Ok(event))) = tokio::time::timeout(
                        Duration::from_millis(if ends == 0 { 120_000 } else { 200 }),
                        subscription.next(),
                    )
                    .await
                    {
                        if event["event"] == "turnEnd" {
                            assert_eq!(event["status"], "completed", "{event}");
                            ends += 1;
                            latencies.push(begun.elapsed());
                        }
                    }
                    assert_eq!(ends, 1, "each completion is delivered exactly once");
                }
                latencies
            }));
        }
        let mut all = Vec::new();
        for task in tasks {
            all.extend(task.await.expect("session"));
        }
        let wall = started.elapsed();
        let status: Value = WsClientBuilder::default()
            .set_headers(auth_headers())
            .build(&url)
            .await
            .expect("client")
            .request("bridge.status", rpc_params![])
            .await
            .expect("status");
        let codex_rss = status["codex"]["members"]
            .as_array()
            .map(|members| {
                members
                    .iter()
                    .filter_map(|member| member["pid"].as_u64())
                    .filter_map(|pid| rss_kib(&pid.to_string(), "VmHWM:"))
                    .sum::<u64>()
            })
            .filter(|kib| *kib > 0);
        running.stop().await;
        (all, wall, codex_rss)
    }
}

/// The direct load over `app_servers` app-servers at once, the sessions split between them.
async fn direct_pool_load(bin: &std::path::Path, app_servers: usize) -> (Vec<Duration>, Duration) {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..app_servers {
        let bin = bin.to_path_buf();
        tasks.push(tokio::spawn(async move {
            direct_load(&bin, SESSIONS / app_servers).await
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.expect("direct app-server").0);
    }
    (all, started.elapsed())
}

/// `a / b` ratios of throughput, p50 and p99.
fn ratios(
    name: &str,
    (a, b): (&str, &str),
    serve: &[Duration],
    serve_wall: Duration,
    direct: &[Duration],
    direct_wall: Duration,
) {
    let mut serve_sorted = serve.to_vec();
    serve_sorted.sort();
    let mut direct_sorted = direct.to_vec();
    direct_sorted.sort();
    println!(
        "  {name}: throughput {a} / {b} {:.3}x, p50 {a} / {b} {:.3}x, p99 {a} / {b} {:.3}x",
        (serve_sorted.len() as f64 / serve_wall.as_secs_f64())
            / (direct_sorted.len() as f64 / direct_wall.as_secs_f64()),
        percentile(&serve_sorted, 0.5).as_secs_f64()
            / percentile(&direct_sorted, 0.5).as_secs_f64(),
        percentile(&serve_sorted, 0.99).as_secs_f64()
            / percentile(&direct_sorted, 0.99).as_secs_f64()
    );
}

/// `-- --faults [RUNS]`: RUNS (default 500) offline runs through `serve --app-servers 2`, 8
/// sessions at a time (one session per worker, so each session has many runs), while a random
/// member is killed (`kill -9`) every few seconds. Prints each run's outcome (completed, or
/// appServerLost with whether the turn may have run; a refused start says why), then the
/// counts. Exits 1 if any run has no `turnEnd`, any session's binding is missing from
/// `sessions.json` or moved to another thread, or clawbridge's RSS grows by more than 10 MiB
/// after warm-up.
fn faults(bin: PathBuf, runs: usize) {
    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    const WORKERS: usize = 8;
    const KILL_EVERY: Duration = Duration::from_secs(3);
    const ALLOWED_GROWTH_KIB: u64 = 10 * 1024;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let state = tempfile::tempdir().expect("state");
    type Outcomes = Arc<Mutex<Vec<(usize, String)>>>;
    let (outcomes, samples, kills, bindings, threads) = runtime.block_on(async {
        let mut config = pool_config(bin, state.path(), 2);
        // Killed every few seconds on purpose: the crash loop that marks a member dead (5 in
        // 60 s) would otherwise end the soak; the pool's own tests cover that rule.
        config.crash_limit = (1000, Duration::from_secs(60));
        let running = serve(config).await.expect("serve");
        let url = format!("ws://{}", running.addr);
        let done = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let outcomes: Outcomes = Arc::default();
        let samples: Arc<Mutex<Vec<(usize, u64)>>> = Arc::default();
        let threads: Arc<Mutex<BTreeMap<String, BTreeSet<String>>>> = Arc::default();
        let killer = {
            let (url, stop) = (url.clone(), stop.clone());
            tokio::spawn(async move {
                let client = WsClientBuilder::default()
                    .set_headers(auth_headers())
                    .build(&url)
                    .await
                    .expect("client");
                let mut kills = 0usize;
                while !stop.load(Ordering::SeqCst) {
                    tokio::time::sleep(KILL_EVERY).await;
                    let status: Value = client
                        .request("bridge.status", rpc_params![])
                        .await
                        .expect("status");
                    let pids: Vec<u64> = status["codex"]["members"]
                        .as_array()
                        .map(|members| members.iter().filter_map(|m| m["pid"].as_u64()).collect())
                        .unwrap_or_default();
                    if pids.is_empty() || stop.load(Ordering::SeqCst) {
                        continue;
                    }
                    let mut random = [0u8; 1];
                    let _ = getrandom::fill(&mut random);
                    let pid = pids[usize::from(random[0]) % pids.len()];
                    let killed = std::process::Command::new("kill")
                        .args(["-9", &pid.to_string()])
                        .status()
                        .is_ok_and(|status| status.success());
                    if killed {
                        kills += 1;
                    }
                }
                kills
            })
        };
        let mut tasks = Vec::new();
        for worker in 0..WORKERS {
            let (url, done, outcomes, samples, threads) = (
                url.clone(),
                done.clone(),
                outcomes.clone(),
                samples.clone(),
                threads.clone(),
            );
            tasks.push(tokio::spawn(async move {
                let client = WsClientBuilder::default()
                    .set_headers(auth_headers())
                    .request_timeout(Duration::from_secs(120))
                    .build(&url)
                    .await
                    .expect("client");
                let session = format!("agent:main:load:{worker}");
                loop {
                    let number = done.fetch_add(1, Ordering::SeqCst) + 1;
                    if number > runs {
                        return;
                    }
                    let outcome = match client
                        .request::<Value, _>("bridge.runStart", rpc_params![document(worker)])
                        .await
                    {
                        Err(error) => format!("refused ({error})"),
                        Ok(run) => {
                            if let Some(thread) = run["threadId"].as_str() {
                                threads
                                    .lock()
                                    .expect("threads")
                                    .entry(session.clone())
                                    .or_default()
                                    .insert(thread.to_string());
                            }
                            let mut events = client
                                .subscribe::<Value, _>(
                                    "bridge.subscribeRun",
                                    rpc_params![run["runId"].clone()],
                                    "bridge.unsubscribeRun",
                                )
                                .await
                                .expect("subscribe");
                            let mut end = None;
                            while let Ok(Some(Ok(event))) =
                                tokio::time::timeout(Duration::from_secs(120), events.next()).await
                            {
                                if event["event"] == "turnEnd" {
                                    end = Some(event);
                                    break;
                                }
                            }
                            match end {
                                None => "NO TURNEND".to_string(),
                                Some(end) if end["status"] == "appServerLost" => {
                                    format!("appServerLost (mayHaveRun {})", end["mayHaveRun"])
                                }
                                Some(end) => end["status"].as_str().unwrap_or("?").to_string(),
                            }
                        }
                    };
                    println!("  run {number:>4} {session}: {outcome}");
                    outcomes.lock().expect("outcomes").push((number, outcome));
                    if number % 50 == 0 {
                        if let Some(kib) = rss_kib("self", "VmRSS:") {
                            samples.lock().expect("samples").push((number, kib));
                        }
                    }
                }
            }));
        }
        for task in tasks {
            task.await.expect("worker");
        }
        stop.store(true, Ordering::SeqCst);
        let kills = killer.await.expect("killer");
        let bindings: Value = serde_json::from_str(
            &std::fs::read_to_string(state.path().join("sessions.json")).unwrap_or_default(),
        )
        .unwrap_or(Value::Null);
        running.stop().await;
        let outcomes = outcomes.lock().expect("outcomes").clone();
        let samples = samples.lock().expect("samples").clone();
        let threads = threads.lock().expect("threads").clone();
        (outcomes, samples, kills, bindings, threads)
    });
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for (_, outcome) in &outcomes {
        let key = if outcome.starts_with("refused") {
            "refused at start".to_string()
        } else {
            outcome.clone()
        };
        *counts.entry(key).or_default() += 1;
    }
    println!(
        "faults: {} runs, {kills} app-servers killed (kill -9, every {KILL_EVERY:?})",
        outcomes.len()
    );
    for (outcome, count) in &counts {
        println!("  {outcome:<40} {count:>5}");
    }
    let no_end = counts.get("NO TURNEND").copied().unwrap_or(0);
    let lost: Vec<String> = threads
        .keys()
        .filter(|session| {
            bindings["sessions"][session.as_str()]["threadId"]
                .as_str()
                .is_none()
        })
        .cloned()
        .collect();
    let moved: Vec<(String, usize)> = threads
        .iter()
        .filter(|(_, seen)| seen.len() > 1)
        .map(|(session, seen)| (session.clone(), seen.len()))
        .collect();
    println!(
        "  sessions {}: bindings lost {}, sessions whose thread changed {}",
        threads.len(),
        lost.len(),
        moved.len()
    );
    let warm = clawbridge::DEFAULT_MAX_FINISHED_RUNS + WORKERS;
    let mut after: Vec<(usize, u64)> = samples
        .into_iter()
        .filter(|(run, _)| *run >= warm)
        .collect();
    after.sort();
    let growth = match (after.first(), after.iter().map(|sample| sample.1).max()) {
        (Some(first), Some(peak)) => {
            let growth = peak.saturating_sub(first.1);
            println!(
                "  clawbridge RSS after warm-up: {:.1} MiB at run {}, peak {:.1} MiB (growth {:.1} MiB, limit 10 MiB)",
                first.1 as f64 / 1024.0,
                first.0,
                peak as f64 / 1024.0,
                growth as f64 / 1024.0
            );
            growth
        }
        _ => {
            println!("  too few runs past the warm-up ({warm}) to measure memory");
            0
        }
    };
    if no_end > 0 || !lost.is_empty() || !moved.is_empty() || growth > ALLOWED_GROWTH_KIB {
        println!(
            "faults: FAILED (runs without turnEnd {no_end}, bindings lost {lost:?}, threads changed {moved:?}, RSS growth {growth} KiB)"
        );
        std::process::exit(1);
    }
    println!("faults: passed");
}

fn main() {
    let Some(bin) = codex_bin() else {
        println!("serve_load: skipped (no Codex CLI; run scripts/install-codex)");
        return;
    };
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|arg| arg == "--soak") {
        let runs = args
            .get(at + 1)
            .and_then(|runs| runs.parse().ok())
            .unwrap_or(1000);
        soak(bin, runs);
        return;
    }
    if let Some(at) = args.iter().position(|arg| arg == "--faults") {
        let runs = args
            .get(at + 1)
            .and_then(|runs| runs.parse().ok())
            .unwrap_or(500);
        faults(bin, runs);
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (latencies, wall, codex_rss) = runtime.block_on(serve_load(&bin, 1));
    assert_eq!(latencies.len(), SESSIONS * TURNS, "nothing lost");
    println!("serve_load: {SESSIONS} sessions x {TURNS} turns, one Codex app-server, offline stub");
    report("clawbridge serve (concurrent)", latencies.clone(), wall);
    println!(
        "  memory: clawbridge peak RSS {} MiB, codex app-server peak RSS {} MiB",
        rss_kib("self", "VmHWM:").map_or("?".into(), |kib| format!("{:.1}", kib as f64 / 1024.0)),
        codex_rss.map_or("?".into(), |kib| format!("{:.1}", kib as f64 / 1024.0))
    );
    // The same load straight at one app-server: what the bridge costs under load.
    let (direct, direct_wall) = runtime.block_on(direct_pool_load(&bin, 1));
    assert_eq!(direct.len(), SESSIONS * TURNS, "direct: nothing lost");
    report("app-server driven directly", direct.clone(), direct_wall);
    // A pool of two, and two app-servers driven directly.
    let (pooled, pooled_wall, pooled_rss) = runtime.block_on(serve_load(&bin, 2));
    assert_eq!(pooled.len(), SESSIONS * TURNS, "pool of two: nothing lost");
    report(
        "clawbridge serve --app-servers 2",
        pooled.clone(),
        pooled_wall,
    );
    let (direct2, direct2_wall) = runtime.block_on(direct_pool_load(&bin, 2));
    assert_eq!(direct2.len(), SESSIONS * TURNS, "direct two: nothing lost");
    report(
        "two app-servers driven directly",
        direct2.clone(),
        direct2_wall,
    );
    println!(
        "  memory of the pool of two: app-servers peak RSS {} MiB in all",
        pooled_rss.map_or("?".into(), |kib| format!("{:.1}", kib as f64 / 1024.0))
    );
    ratios(
        "bridge cost, N = 1",
        ("serve", "direct"),
        &latencies,
        wall,
        &direct,
        direct_wall,
    );
    ratios(
        "bridge cost, N = 2",
        ("serve", "direct"),
        &pooled,
        pooled_wall,
        &direct2,
        direct2_wall,
    );
    ratios(
        "pool of two over one (serve)",
        ("N=2", "N=1"),
        &pooled,
        pooled_wall,
        &latencies,
        wall,
    );

    // Baseline: the same turns one after another through `clawbridge run --offline`.
    let cli = root().join("target/release/clawbridge");
    let cli = if cli.is_file() {
        cli
    } else {
        root().join("target/debug/clawbridge")
    };
    if !cli.is_file() {
        println!("  sequential baseline skipped: build the binary first (cargo build --release)");
        return;
    }
    let dir = tempfile::tempdir().expect("dir");
    let mut sequential = Vec::new();
    let started = Instant::now();
    for session in 0..SESSIONS * TURNS / 4 {
        // A quarter of the turns keeps the baseline bounded; the ratio uses per-turn figures.
        let path = dir.path().join("run.json");
        let mut run = document(session);
        run["workspace"] = json!(root().join("fixtures/workspace"));
        run["tools"] = json!([root().join("fixtures/tools/openclaw-tools.json")]);
        std::fs::write(&path, run.to_string()).expect("write");
        let begun = Instant::now();
        let status = std::process::Command::new(&cli)
            .args(["run", "--offline", "--codex-bin"])
            .arg(&bin)
            .arg(&path)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .expect("clawbridge run");
        assert!(status.success());
        sequential.push(begun.elapsed());
    }
    let sequential_wall = started.elapsed();
    report(
        "clawbridge run (sequential CLI)",
        sequential.clone(),
        sequential_wall,
    );
    let mut concurrent = latencies;
    concurrent.sort();
    sequential.sort();
    println!("ratios:");
    println!(
        "  throughput serve / sequential run : {:>6.2}x",
        (concurrent.len() as f64 / wall.as_secs_f64())
            / (sequential.len() as f64 / sequential_wall.as_secs_f64())
    );
    println!(
        "  p50 latency serve / sequential run: {:>6.2}x",
        percentile(&concurrent, 0.5).as_secs_f64() / percentile(&sequential, 0.5).as_secs_f64()
    );
}

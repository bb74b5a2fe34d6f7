//! `cargo bench --bench fanout`: what the endpoint saves when many OpenClaw agents share it.
//!
//! OpenClaw gives each agent an app-server of its own (11 agents: 11 `codex app-server`
//! processes). Through `clawbridge app-server --listen`, N agents share M app-servers. Both are
//! run here in the same run, with the real Codex and the loopback model stub (`--offline`), on
//! the same work: N agents at once, each its own client, its own thread (the Telegram fixture's
//! `thread/start`) and `TURNS` turns one after another.
//!
//! - **direct**: N native `codex app-server` children, each with a Codex home of its own (as
//!   OpenClaw's per-agent homes), each agent on its own stdio;
//! - **endpoint M**: one `clawbridge app-server --listen ws://... --offline --app-servers M`,
//!   each agent a WebSocket client with the bearer token.
//!
//! Printed per N: peak and steady resident memory summed over every process of the setup
//! (clawbridge and its app-servers, or the N app-servers), and turn latency (p50, p99), each as
//! a ratio to direct at the same N. The goal: at N = 11 on 2-3 members, at most 0.5x the memory
//! and a p99 at most 1.2x. Loopback only; every process is killed at the end of its setup.
//!
//! `cargo bench --bench fanout -- [--agents 2,6,11] [--members 1,2,3] [--turns 3]`.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clawbridge::{resolve_native_binary, OfflineHome, ResponsesStub, StubScript};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

#[path = "common/offline_turn.rs"]
#[allow(dead_code)]
mod offline_turn;
use offline_turn::{codex_bin, OfflineTurn};
#[path = "common/timing.rs"]
#[allow(dead_code)]
mod timing;
use timing::percentile;
#[path = "common/line.rs"]
mod line;
use line::{timed_session, Line, Socket};

const TOKEN: &str = "fanout-bench-token-0123456789abcdef";

/// Resident memory of one process, in KiB (Linux).
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("VmRSS:"))
                .and_then(|line| line.split_whitespace().nth(1))
                .and_then(|kib| kib.parse().ok())
        })
        .unwrap_or(0)
}

/// `roots` and every process below them.
fn tree(roots: &[u32]) -> Vec<u32> {
    let mut parents: HashMap<u32, Vec<u32>> = HashMap::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|name| name.parse().ok())
            else {
                continue;
            };
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // The parent is the second field after the command's closing parenthesis.
            let parent = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|ppid| ppid.parse::<u32>().ok());
            if let Some(parent) = parent {
                parents.entry(parent).or_default().push(pid);
            }
        }
    }
    let mut all = roots.to_vec();
    let mut index = 0;
    while index < all.len() {
        if let Some(children) = parents.get(&all[index]) {
            all.extend(children);
        }
        index += 1;
    }
    all
}

/// Samples the summed memory of the process trees of `roots` every 100 ms; the peak so far.
struct Sampler {
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sampler {
    fn start(roots: Vec<u32>) -> Sampler {
        let peak = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen, stopped) = (Arc::clone(&peak), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            while !stopped.load(Ordering::SeqCst) {
                let sum: u64 = tree(&roots).into_iter().map(rss_kib).sum();
                seen.fetch_max(sum, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        Sampler {
            peak,
            stop,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.peak.load(Ordering::SeqCst)
    }
}

/// One setup's figures.
struct Figures {
    peak_kib: u64,
    steady_kib: u64,
    latencies: Vec<Duration>,
}

/// One agent's session: initialize, its thread, `turns` turns one after another; the latency
/// of each turn (`turn/start` sent to its `turn/completed`).
async fn agent(
    line: &mut impl Line,
    agent: usize,
    thread_start: &Value,
    turns: usize,
) -> Vec<Duration> {
    timed_session(line, "fanout-bench", thread_start, turns, |turn| {
        format!("agent {agent}, turn {turn}: say hello")
    })
    .await
}

/// An agent on an app-server's stdio.
struct Stdio {
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl Line for Stdio {
    async fn send(&mut self, message: Value) {
        let text = format!("{message}\n");
        self.stdin.write_all(text.as_bytes()).await.expect("write");
    }
    async fn next(&mut self) -> Value {
        let line = self
            .lines
            .next_line()
            .await
            .expect("read")
            .expect("the app-server closed");
        serde_json::from_str(&line).expect("json")
    }
}

/// Every agent's turn latencies, once all are done, and their connections (kept open, so the
/// steady memory is measured with every thread still loaded), after a second to settle.
async fn finished<L>(
    tasks: Vec<tokio::task::JoinHandle<(Vec<Duration>, L)>>,
) -> (Vec<Duration>, Vec<L>) {
    let mut latencies = Vec::new();
    let mut lines = Vec::new();
    for task in tasks {
        let (mut done, line) = task.await.expect("agent");
        latencies.append(&mut done);
        lines.push(line);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    (latencies, lines)
}

/// N app-servers, one per agent, each with a home of its own.
async fn direct(native: &Path, agents: usize, turns: usize, offline: &OfflineTurn) -> Figures {
    let stub = ResponsesStub::start(StubScript::default())
        .await
        .expect("stub");
    let homes: Vec<OfflineHome> = (0..agents)
        .map(|_| OfflineHome::prepare(None, &stub.base_url(), "gpt-5.5", None).expect("home"))
        .collect();
    let mut children: Vec<tokio::process::Child> = homes
        .iter()
        .map(|home| {
            tokio::process::Command::new(native)
                .arg("app-server")
                .current_dir(&offline.run.cwd)
                .env("CODEX_HOME", &home.path)
                .env("HOME", &home.path)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .expect("codex app-server")
        })
        .collect();
    let pids: Vec<u32> = children
        .iter()
        .filter_map(tokio::process::Child::id)
        .collect();
    let sampler = Sampler::start(pids.clone());
    let mut tasks = Vec::new();
    for (index, child) in children.iter_mut().enumerate() {
        let mut line = Stdio {
            stdin: child.stdin.take().expect("stdin"),
            lines: BufReader::new(child.stdout.take().expect("stdout")).lines(),
        };
        let thread_start = offline.thread_start.clone();
        tasks.push(tokio::spawn(async move {
            let latencies = agent(&mut line, index, &thread_start, turns).await;
            (latencies, line)
        }));
    }
    let (latencies, lines) = finished(tasks).await;
    let steady_kib = tree(&pids).into_iter().map(rss_kib).sum();
    let peak_kib = sampler.finish();
    drop(lines);
    for child in &mut children {
        let _ = child.kill().await;
    }
    Figures {
        peak_kib,
        steady_kib,
        latencies,
    }
}

/// One endpoint on `members` app-servers; the agents over WebSocket.
async fn endpoint(
    codex: &Path,
    members: usize,
    agents: usize,
    turns: usize,
    offline: &OfflineTurn,
) -> Figures {
    let dir = tempfile::tempdir().expect("dir");
    let token = dir.path().join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).expect("token");
    std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .expect("chmod");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("port")
        .port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_clawbridge"))
        .args([
            "app-server",
            "--listen",
            &format!("ws://{addr}"),
            "--offline",
            "--no-check",
        ])
        .args(["--app-servers", &members.to_string()])
        .arg("--codex-bin")
        .arg(codex)
        .arg("--token-file")
        .arg(&token)
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("clawbridge app-server --listen");
    let pid = child.id().expect("pid");
    let deadline = Instant::now() + Duration::from_secs(30);
    while tokio::net::TcpStream::connect(&addr).await.is_err() {
        assert!(Instant::now() < deadline, "the endpoint did not listen");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let sampler = Sampler::start(vec![pid]);
    let mut tasks = Vec::new();
    for index in 0..agents {
        let thread_start = offline.thread_start.clone();
        let addr = addr.clone();
        tasks.push(tokio::spawn(async move {
            let mut line = Socket::connect_with(TOKEN, &addr).await;
            let latencies = agent(&mut line, index, &thread_start, turns).await;
            (latencies, line)
        }));
    }
    let (latencies, lines) = finished(tasks).await;
    let steady_kib = tree(&[pid]).into_iter().map(rss_kib).sum();
    let peak_kib = sampler.finish();
    drop(lines);
    // SIGTERM: the endpoint stops its app-servers with it.
    let _ = std::process::Command::new("kill")
        .arg(pid.to_string())
        .status();
    let _ = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
    let _ = child.kill().await;
    Figures {
        peak_kib,
        steady_kib,
        latencies,
    }
}

fn list(args: &[String], flag: &str, default: &[usize]) -> Vec<usize> {
    args.iter()
        .position(|arg| arg == flag)
        .and_then(|at| args.get(at + 1))
        .map(|text| {
            text.split(',')
                .filter_map(|n| n.trim().parse().ok())
                .collect()
        })
        .unwrap_or_else(|| default.to_vec())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(codex) = codex_bin() else {
        println!("fanout: no Codex CLI (scripts/install-codex installs it); skipped");
        return;
    };
    let native = resolve_native_binary(&codex);
    let agent_counts = list(&args, "--agents", &[2, 6, 11]);
    let member_counts = list(&args, "--members", &[1, 2, 3]);
    let turns = list(&args, "--turns", &[3]).first().copied().unwrap_or(3);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let offline = runtime.block_on(OfflineTurn::prepare());
    let mib = |kib: u64| kib as f64 / 1024.0;
    println!("fanout: {turns} turns per agent, the real Codex, the loopback stub; memory summed over every process of the setup");
    println!(
        "{:<14} {:>6} {:>10} {:>10} {:>9} {:>9} {:>11} {:>11} {:>8} {:>8}",
        "setup",
        "agents",
        "peak MiB",
        "steady MiB",
        "p50 ms",
        "p99 ms",
        "peak ratio",
        "steady ratio",
        "p50 x",
        "p99 x"
    );
    for &agents in &agent_counts {
        let base = runtime.block_on(direct(&native, agents, turns, &offline));
        let (base_p50, base_p99) = (
            percentile(&base.latencies, 0.5),
            percentile(&base.latencies, 0.99),
        );
        let row = |name: &str, figures: &Figures| {
            let (p50, p99) = (
                percentile(&figures.latencies, 0.5),
                percentile(&figures.latencies, 0.99),
            );
            println!(
                "{:<14} {:>6} {:>10.0} {:>10.0} {:>9.0} {:>9.0} {:>10.2}x {:>10.2}x {:>7.2}x {:>7.2}x",
                name,
                agents,
                mib(figures.peak_kib),
                mib(figures.steady_kib),
                p50.as_secs_f64() * 1000.0,
                p99.as_secs_f64() * 1000.0,
                figures.peak_kib as f64 / base.peak_kib.max(1) as f64,
                figures.steady_kib as f64 / base.steady_kib.max(1) as f64,
                p50.as_secs_f64() / base_p50.as_secs_f64().max(1e-9),
                p99.as_secs_f64() / base_p99.as_secs_f64().max(1e-9),
            );
        };
        row("direct", &base);
        for &members in &member_counts {
            if members > agents {
                continue;
            }
            let figures = runtime.block_on(endpoint(&codex, members, agents, turns, &offline));
            row(&format!("endpoint M={members}"), &figures);
        }
    }
    println!("goal: at 11 agents on 2-3 members, peak ratio <= 0.50x and p99 <= 1.20x; at 30 agents on 3 members, peak ratio <= 0.30x and p99 <= 1.20x");
}

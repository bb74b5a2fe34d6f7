//! `cargo bench --bench peer`: the app-server stream through clawbridge's framer and dispatcher.
//!
//! A realistic stream (200,000 `item/agentMessage/delta` notifications of about 400 bytes, then one
//! 32 MiB response) is pushed through an in-memory pipe. Reported next to two baselines measured in
//! the same run over the same pipe: plain line splitting (the memory-bandwidth ceiling) and full
//! `serde_json::Value` parsing of every line (what a generic client does); only ratios against
//! those are printed. Then, when a Codex CLI is available, the cost of one
//! bridge-driven offline turn against the same turn driven directly over stdio.

use std::time::{Duration, Instant};

use clawbridge::codex::client::peer::{Peer, PeerConfig};
use clawbridge::codex::protocol::wire::Incoming;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The binary's allocator (cross-thread frees of messages are cheap with it).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const DELTAS: usize = 200_000;
const BIG_RESPONSE: usize = 32 * 1024 * 1024;
const PIPE: usize = 4 << 20;

fn stream() -> (Vec<u8>, usize) {
    let mut out = Vec::with_capacity(DELTAS * 420 + BIG_RESPONSE + 1024);
    let filler = "streamed text of the agent's reply, ".repeat(8);
    for n in 0..DELTAS {
        let line = json!({"method": "item/agentMessage/delta", "params": {
            "threadId": "01a22c62-8087-7fb1-8c6b-4fdef0530bf9", "turnId": "01a22c62-80a5-7c13-bc5c-3a6ed662d635",
            "itemId": "msg_resp_1", "delta": format!("{n} {}", &filler[..250])}, "emittedAtMs": 1796040982764u64});
        out.extend_from_slice(line.to_string().as_bytes());
        out.push(b'\n');
    }
    let blob = "r".repeat(BIG_RESPONSE);
    out.extend_from_slice(
        json!({"id": 1, "result": {"thread": {"id": "t", "turns": [{"blob": blob}]}}})
            .to_string()
            .as_bytes(),
    );
    out.push(b'\n');
    (out, DELTAS + 1)
}

async fn feed(bytes: &'static [u8]) -> tokio::io::DuplexStream {
    let (mut writer, reader) = tokio::io::duplex(PIPE);
    tokio::spawn(async move {
        for chunk in bytes.chunks(1 << 20) {
            if writer.write_all(chunk).await.is_err() {
                return;
            }
        }
    });
    reader
}

async fn baseline_lines(bytes: &'static [u8]) -> usize {
    let mut reader = feed(bytes).await;
    let mut buf = vec![0u8; 256 * 1024];
    let mut lines = 0;
    loop {
        let read = reader.read(&mut buf).await.expect("read");
        if read == 0 {
            return lines;
        }
        lines += memchr::memchr_iter(b'\n', &buf[..read]).count();
    }
}

async fn baseline_values(bytes: &'static [u8]) -> usize {
    let mut reader = feed(bytes).await;
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut parsed = 0;
    loop {
        let read = reader.read(&mut buf).await.expect("read");
        if read == 0 {
            return parsed;
        }
        pending.extend_from_slice(&buf[..read]);
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', &pending) {
            let value: Value = serde_json::from_slice(&pending[start..end]).expect("json");
            std::hint::black_box(&value);
            parsed += 1;
            start = end + 1;
        }
        pending.drain(..start);
    }
}

async fn framer_only(bytes: &'static [u8]) -> usize {
    let reader = feed(bytes).await;
    let mut frames = clawbridge::codex::client::framing::FrameReader::new(reader, 64 << 20);
    let mut count = 0;
    while let Some(frame) = frames.next().await.expect("read") {
        std::hint::black_box(&frame);
        count += 1;
    }
    count
}

async fn through_peer(bytes: &'static [u8]) -> usize {
    let reader = feed(bytes).await;
    let (sink, _) = tokio::io::duplex(PIPE);
    let config = PeerConfig {
        request_timeout: Duration::from_secs(600),
        ..PeerConfig::default()
    };
    let (peer, mut events) = Peer::connect(reader, sink, config);
    let response = tokio::spawn(async move {
        let raw = peer
            .request_raw("thread/resume", &json!({}))
            .await
            .expect("the 32 MiB response");
        raw.get().len()
    });
    let mut count = 0;
    while let Some(message) = events.recv().await {
        if let Incoming::Notification { method, .. } = &message {
            std::hint::black_box(method);
        }
        count += 1;
        if count == DELTAS {
            break;
        }
    }
    let size = response.await.expect("join");
    assert!(size > BIG_RESPONSE);
    count + 1
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (bytes, messages) = stream();
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    let megabytes = bytes.len() as f64 / 1e6;
    let rounds = 5;
    let measure = |name: &str, run: &dyn Fn() -> usize| {
        let _ = run();
        let samples: Vec<Duration> = (0..rounds)
            .map(|_| {
                let started = Instant::now();
                assert_eq!(run(), messages, "{name} saw every message");
                started.elapsed()
            })
            .collect();
        let time = median(samples);
        let rate = megabytes / time.as_secs_f64();
        println!(
            "  {name:<38} {:>8.1} ms  {rate:>8.1} MB/s  {:>10.0} msg/s",
            time.as_secs_f64() * 1e3,
            messages as f64 / time.as_secs_f64()
        );
        rate
    };
    println!("peer bench: {DELTAS} deltas (~400 B) + one 32 MiB response = {megabytes:.1} MB, median of {rounds}");
    if std::env::var_os("PEER_BENCH_FRAMER").is_some() {
        measure("framer only", &|| runtime.block_on(framer_only(bytes)));
    }
    if std::env::var_os("PEER_BENCH_ONLY_PEER").is_some() {
        measure("clawbridge framer + dispatcher", &|| {
            runtime.block_on(through_peer(bytes))
        });
        return;
    }
    let lines = measure("baseline: line splitting", &|| {
        runtime.block_on(baseline_lines(bytes))
    });
    let values = measure("baseline: serde_json::Value per line", &|| {
        runtime.block_on(baseline_values(bytes))
    });
    let peer = measure("clawbridge framer + dispatcher", &|| {
        runtime.block_on(through_peer(bytes))
    });
    println!("ratios:");
    println!(
        "  clawbridge / Value-per-line baseline : {:>5.2}x",
        peer / values
    );
    println!(
        "  clawbridge / line-splitting ceiling  : {:>5.2}x",
        peer / lines
    );
    runtime.block_on(turn_cost());
}

// ---------------------------------------------------------------------------------------------
// One offline turn: through clawbridge vs. driven directly over stdio
// ---------------------------------------------------------------------------------------------

fn codex_bin() -> Option<std::path::PathBuf> {
    std::env::var_os("CLAWBRIDGE_CODEX_BIN")
        .map(std::path::PathBuf::from)
        .filter(|path| path.is_file())
        .or_else(|| {
            let local = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join(".tools/codex/node_modules/.bin/codex");
            local.is_file().then_some(local)
        })
        .or_else(|| which::which("codex").ok())
}

async fn turn_cost() {
    use clawbridge::app::offline::{OfflineHome, ResponsesStub, StubScript};
    use clawbridge::codex::client::handler::DefaultHandler;
    use clawbridge::codex::client::process::{resolve_native_binary, SpawnOptions};
    use clawbridge::codex::client::session::{CodexSession, TurnLimits};
    use clawbridge::config::Run;
    use clawbridge::translate::{translate, TranslateOptions};
    use tokio::io::{AsyncBufReadExt, BufReader};

    let Some(bin) = codex_bin() else {
        println!("offline turn: skipped (no Codex CLI; run scripts/install-codex)");
        return;
    };
    let native = resolve_native_binary(&bin);
    let run = Run::load(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/runs/telegram-direct.json"),
    )
    .expect("run");
    let params = translate(&run, &TranslateOptions::hermetic())
        .expect("translate")
        .codex_params(&run);
    let stub = ResponsesStub::start(StubScript::default())
        .await
        .expect("stub");
    let home = OfflineHome::prepare(None, &stub.base_url(), "gpt-5.5", None).expect("home");
    let rounds = 9;

    let mut bridge = Vec::new();
    for _ in 0..rounds {
        let started = Instant::now();
        let spawn = SpawnOptions {
            binary: bin.clone(),
            codex_home: home.path.clone(),
            cwd: run.cwd.clone(),
            isolate_environment: true,
        };
        let mut session =
            CodexSession::spawn(&spawn, PeerConfig::default(), true, Duration::from_secs(20))
                .await
                .expect("spawn");
        let mut turn = params.turn_start.clone();
        turn.thread_id = session.open_thread(&params.thread).await.expect("thread");
        session
            .run_turn(
                &turn,
                &DefaultHandler::default(),
                &mut |_| {},
                TurnLimits::default(),
            )
            .await
            .expect("turn");
        session.shutdown(Duration::from_secs(5)).await;
        bridge.push(started.elapsed());
    }

    let thread_start = match &params.thread {
        clawbridge::codex::protocol::params::ThreadParams::ThreadStart(start) => {
            serde_json::to_value(start).expect("json")
        }
        clawbridge::codex::protocol::params::ThreadParams::ThreadResume(_) => unreachable!(),
    };
    let mut direct = Vec::new();
    for _ in 0..rounds {
        let started = Instant::now();
        let mut child = tokio::process::Command::new(&native)
            .arg("app-server")
            .current_dir(&run.cwd)
            .env("CODEX_HOME", &home.path)
            .env("HOME", &home.path)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn");
        let mut stdin = child.stdin.take().expect("stdin");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let send = |value: Value| format!("{value}\n");
        async fn until(
            lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
            pred: impl Fn(&Value) -> bool,
        ) -> Value {
            loop {
                let line = lines.next_line().await.expect("read").expect("line");
                let value: Value = serde_json::from_str(&line).expect("json");
                if pred(&value) {
                    return value;
                }
            }
        }
        stdin.write_all(send(json!({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "direct", "version": "0"}, "capabilities": {"experimentalApi": true}}})).as_bytes()).await.expect("w");
        until(&mut lines, |v| v["id"] == 1).await;
        stdin
            .write_all(send(json!({"method": "initialized"})).as_bytes())
            .await
            .expect("w");
        stdin
            .write_all(
                send(json!({"id": 2, "method": "thread/start", "params": thread_start})).as_bytes(),
            )
            .await
            .expect("w");
        let thread = until(&mut lines, |v| v["id"] == 2).await;
        let mut turn = serde_json::to_value(&params.turn_start).expect("json");
        turn["threadId"] = thread["result"]["thread"]["id"].clone();
        stdin
            .write_all(send(json!({"id": 3, "method": "turn/start", "params": turn})).as_bytes())
            .await
            .expect("w");
        until(&mut lines, |v| v["method"] == "turn/completed").await;
        drop(stdin);
        let _ = child.wait().await;
        direct.push(started.elapsed());
    }
    let bridge = median(bridge);
    let direct = median(direct);
    println!("offline turn (spawn, handshake, thread/start, turn to completion, exit), median of {rounds}:");
    println!(
        "  driven directly over stdio : {:>7.1} ms",
        direct.as_secs_f64() * 1e3
    );
    println!(
        "  driven by clawbridge       : {:>7.1} ms",
        bridge.as_secs_f64() * 1e3
    );
    println!(
        "  ratio clawbridge / direct  : {:>7.3}x",
        bridge.as_secs_f64() / direct.as_secs_f64()
    );
}

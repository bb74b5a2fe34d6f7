//! `cargo bench --bench peer`: the app-server stream through clawbridge's framer and dispatcher.
//!
//! A realistic stream (200,000 `item/agentMessage/delta` notifications of about 400 bytes, then one
//! 32 MiB response) is pushed through an in-memory pipe. Reported next to two baselines measured in
//! the same run over the same pipe: plain line splitting (the memory-bandwidth ceiling) and full
//! `serde_json::Value` parsing of every line (what a generic client does); only ratios against
//! those are printed. Then, when a Codex CLI is available, the cost of one
//! bridge-driven offline turn against the same turn driven directly over stdio.

use std::time::{Duration, Instant};

#[path = "common/offline_turn.rs"]
mod offline_turn;
#[path = "common/timing.rs"]
mod timing;
use offline_turn::{codex_bin, OfflineTurn};
use timing::{alternate, median};

use clawbridge::Incoming;
use clawbridge::{Peer, PeerConfig};
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
    let mut frames = clawbridge::FrameReader::new(reader, 64 << 20);
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

const THREAD: &str = "01a22c62-8087-7fb1-8c6b-4fdef0530bf9";
const TURN: &str = "01a22c62-80a5-7c13-bc5c-3a6ed662d635";

/// The production path of `clawbridge run --json`: a fake app-server answers `turn/start`, then
/// streams the turn's deltas and `turn/completed`; the bytes go through the framer, typed
/// dispatch, `drive_turn` and the `run --json` line writer into the buffer a consumer reads.
/// Returns the events written (and checks the output is every delta, line by line).
async fn production_path(deltas: &'static [u8]) -> usize {
    use clawbridge::RunEvent;
    use clawbridge::{drive_turn, TurnLimits};
    use clawbridge::{
        CollaborationMode, CollaborationSettings, SandboxPolicy, TurnStartParams, UserInput,
    };
    use tokio::io::AsyncBufReadExt;
    let (mut server_out, client_in) = tokio::io::duplex(PIPE);
    let (client_out, server_in) = tokio::io::duplex(PIPE);
    tokio::spawn(async move {
        let mut requests = tokio::io::BufReader::new(server_in).lines();
        let Ok(Some(line)) = requests.next_line().await else {
            return;
        };
        let request: Value = serde_json::from_str(&line).expect("turn/start");
        let answer = json!({"id": request["id"], "result": {"turn": {"id": TURN}}});
        let mut head = answer.to_string().into_bytes();
        head.push(b'\n');
        let _ = server_out.write_all(&head).await;
        for chunk in deltas.chunks(1 << 20) {
            if server_out.write_all(chunk).await.is_err() {
                return;
            }
        }
        let done = json!({"method": "turn/completed", "params": {"threadId": THREAD, "turn": {"id": TURN, "status": "completed"}}});
        let _ = server_out.write_all(format!("{done}\n").as_bytes()).await;
        // Keep reading so the client's writes never block.
        while let Ok(Some(_)) = requests.next_line().await {}
    });
    let (peer, mut events) = Peer::connect(client_in, client_out, PeerConfig::default());
    let turn = TurnStartParams {
        thread_id: THREAD.to_string(),
        input: vec![UserInput::Text {
            text: "hi".into(),
            text_elements: vec![],
        }],
        cwd: "/ws".into(),
        approval_policy: clawbridge::ApprovalPolicy::Never.into(),
        approvals_reviewer: "user",
        sandbox_policy: SandboxPolicy::DangerFullAccess,
        model: "gpt-5.5".into(),
        personality: "none",
        service_tier: None,
        effort: Some("medium"),
        collaboration_mode: CollaborationMode {
            mode: "default",
            settings: CollaborationSettings {
                model: "gpt-5.5".into(),
                reasoning_effort: Some("medium"),
                developer_instructions: None,
            },
        },
    };
    let handler = clawbridge::DefaultHandler::default();
    let mut output: Vec<u8> = Vec::with_capacity(deltas.len() + (deltas.len() >> 3));
    let mut line = Vec::with_capacity(4096);
    let mut written = 0usize;
    let mut observer = |event: clawbridge::TurnEvent<'_>| {
        line.clear();
        RunEvent::write_json_line(&event, &mut line);
        output.extend_from_slice(&line);
        written += 1;
    };
    let mut early = Vec::new();
    let outcome = drive_turn(
        &peer,
        &mut events,
        &mut early,
        &turn,
        &handler,
        &mut observer,
        TurnLimits::default(),
    )
    .await
    .expect("the turn completes");
    assert_eq!(outcome.status.as_str(), "completed");
    let lines = memchr::memchr_iter(b'\n', &output).count();
    assert_eq!(lines, written, "one line per event");
    std::hint::black_box(&output);
    // Every delta, then `turn/completed`.
    written - 1
}

/// The deltas alone (the production path's server stream), with the thread and turn ids the
/// fake turn uses.
fn delta_stream() -> (Vec<u8>, usize) {
    let mut out = Vec::with_capacity(DELTAS * 420);
    let filler = "streamed text of the agent's reply, ".repeat(8);
    for n in 0..DELTAS {
        let line = json!({"method": "item/agentMessage/delta", "params": {
            "threadId": THREAD, "turnId": TURN,
            "itemId": "msg_resp_1", "delta": format!("{n} {}", &filler[..250])}, "emittedAtMs": 1796040982764u64});
        out.extend_from_slice(line.to_string().as_bytes());
        out.push(b'\n');
    }
    (out, DELTAS)
}

/// Baseline for the production path: parse each line into a `Value` and write it back out as a
/// line, what a generic JSON-lines relay does.
async fn baseline_value_relay(bytes: &'static [u8]) -> usize {
    let mut reader = feed(bytes).await;
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut output: Vec<u8> = Vec::with_capacity(bytes.len() + (bytes.len() >> 3));
    let mut relayed = 0;
    loop {
        let read = reader.read(&mut buf).await.expect("read");
        if read == 0 {
            std::hint::black_box(&output);
            return relayed;
        }
        pending.extend_from_slice(&buf[..read]);
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', &pending) {
            let value: Value = serde_json::from_slice(&pending[start..end]).expect("json");
            serde_json::to_writer(&mut output, &value).expect("write");
            output.push(b'\n');
            relayed += 1;
            start = end + 1;
        }
        pending.drain(..start);
    }
}

/// The parsing stage alone, on one thread: each delta line typed as the turn driver reads it
/// (`decode_slice`, then `Inbound::from_incoming`: the one scan and the typing) against parsing
/// it into a `serde_json::Value`.
fn decode_per_line(deltas: &[u8], rounds: usize) {
    let lines: Vec<&str> = deltas
        .split(|byte| *byte == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| std::str::from_utf8(line).expect("utf-8"))
        .collect();
    let mut typed = || {
        for line in &lines {
            let message = clawbridge::decode_slice(line).expect("a message");
            std::hint::black_box(clawbridge::Inbound::from_incoming(message));
        }
    };
    let mut values = || {
        for line in &lines {
            std::hint::black_box(serde_json::from_str::<Value>(line).expect("json"));
        }
    };
    let [typed, values] = alternate(rounds, 1, [&mut typed, &mut values]);
    let per_line = |time: Duration| time.as_secs_f64() * 1e9 / lines.len() as f64;
    println!(
        "parsing alone, one thread ({} delta lines): typed by clawbridge {:.0} ns/line, a serde_json::Value {:.0} ns/line: {:.2}x",
        lines.len(),
        per_line(typed),
        per_line(values),
        values.as_secs_f64() / typed.as_secs_f64()
    );
}

fn report(name: &str, time: Duration, megabytes: f64, messages: Option<usize>) {
    let rate = match messages {
        Some(count) => format!("  {:>10.0} msg/s", count as f64 / time.as_secs_f64()),
        None => String::new(),
    };
    println!(
        "  {name:<42} {:>8.1} ms  {:>8.1} MB/s{rate}",
        time.as_secs_f64() * 1e3,
        megabytes / time.as_secs_f64()
    );
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
    let rounds = 9;
    println!("peer bench: {DELTAS} deltas (~400 B) + one 32 MiB response = {megabytes:.1} MB, median of {rounds} alternating rounds");
    if std::env::var_os("PEER_BENCH_FRAMER").is_some() {
        let mut framer = || assert_eq!(runtime.block_on(framer_only(bytes)), messages);
        let [framer] = alternate(rounds, 1, [&mut framer]);
        report("framer only", framer, megabytes, Some(messages));
        let (deltas, count) = delta_stream();
        let deltas: &'static [u8] = Box::leak(deltas.into_boxed_slice());
        let mut framer = || assert_eq!(runtime.block_on(framer_only(deltas)), count);
        let [framer] = alternate(rounds, 1, [&mut framer]);
        report(
            "framer only, the production path's deltas",
            framer,
            deltas.len() as f64 / 1e6,
            Some(count),
        );
    }
    if std::env::var_os("PEER_BENCH_ONLY_DECODE").is_some() {
        // For a profiler: the parsing stage alone.
        let (deltas, _) = delta_stream();
        decode_per_line(&deltas, 41);
        return;
    }
    if std::env::var_os("PEER_BENCH_ONLY_PRODUCTION").is_some() {
        // For a profiler: the production path alone, over and over.
        let (deltas, count) = delta_stream();
        let deltas: &'static [u8] = Box::leak(deltas.into_boxed_slice());
        for _ in 0..20 {
            assert_eq!(runtime.block_on(production_path(deltas)), count);
        }
        return;
    }
    if std::env::var_os("PEER_BENCH_ONLY_PEER").is_some() {
        let mut peer = || assert_eq!(runtime.block_on(through_peer(bytes)), messages);
        let [peer] = alternate(rounds, 1, [&mut peer]);
        report(
            "clawbridge framer + dispatcher",
            peer,
            megabytes,
            Some(messages),
        );
        return;
    }
    // Round-robin: one sample of each per round, so machine drift hits them all alike.
    let check = |count: usize| assert_eq!(count, messages, "every message seen");
    let works: [&mut dyn FnMut(); 3] = [
        &mut || check(runtime.block_on(baseline_lines(bytes))),
        &mut || check(runtime.block_on(baseline_values(bytes))),
        &mut || check(runtime.block_on(through_peer(bytes))),
    ];
    let [lines, values, peer] = alternate(rounds, 1, works);
    report("baseline: line splitting", lines, megabytes, Some(messages));
    report(
        "baseline: serde_json::Value per line",
        values,
        megabytes,
        Some(messages),
    );
    report(
        "clawbridge framer + dispatcher",
        peer,
        megabytes,
        Some(messages),
    );
    println!("ratios (time of the baseline / time of clawbridge):");
    println!(
        "  clawbridge / Value-per-line baseline : {:>5.2}x",
        values.as_secs_f64() / peer.as_secs_f64()
    );
    println!(
        "  clawbridge / line-splitting ceiling  : {:>5.2}x",
        lines.as_secs_f64() / peer.as_secs_f64()
    );
    // End to end: bytes in to the `run --json` lines a consumer receives.
    let (deltas, delta_count) = delta_stream();
    decode_per_line(&deltas, rounds);
    let deltas: &'static [u8] = Box::leak(deltas.into_boxed_slice());
    let delta_mb = deltas.len() as f64 / 1e6;
    println!("production path ({DELTAS} deltas = {delta_mb:.1} MB in, run --json lines out), median of {rounds} alternating rounds:");
    let check = |count: usize| assert_eq!(count, delta_count, "every delta seen");
    let works: [&mut dyn FnMut(); 3] = [
        &mut || check(runtime.block_on(baseline_lines(deltas))),
        &mut || check(runtime.block_on(baseline_value_relay(deltas))),
        &mut || check(runtime.block_on(production_path(deltas))),
    ];
    let [split, relay, production] = alternate(rounds, 1, works);
    report("baseline: line splitting", split, delta_mb, None);
    report(
        "baseline: Value per line, re-serialized",
        relay,
        delta_mb,
        None,
    );
    report(
        "clawbridge: framer, dispatch, turn, output",
        production,
        delta_mb,
        None,
    );
    println!(
        "  clawbridge end to end / Value relay  : {:>5.2}x (goal >= 2x); / line-splitting ceiling: {:.2}x",
        relay.as_secs_f64() / production.as_secs_f64(),
        split.as_secs_f64() / production.as_secs_f64()
    );
    runtime.block_on(turn_cost());
}

// ---------------------------------------------------------------------------------------------
// One offline turn: through clawbridge vs. driven directly over stdio
// ---------------------------------------------------------------------------------------------

async fn turn_cost() {
    use clawbridge::DefaultHandler;
    use clawbridge::{resolve_native_binary, SpawnOptions};
    use clawbridge::{CodexSession, TurnLimits};
    use tokio::io::{AsyncBufReadExt, BufReader};

    let Some(bin) = codex_bin() else {
        println!("offline turn: skipped (no Codex CLI; run scripts/install-codex)");
        return;
    };
    let native = resolve_native_binary(&bin);
    let offline = OfflineTurn::prepare().await;
    let (run, params, home) = (&offline.run, &offline.params, &offline.home);
    let rounds = 9;

    let mut bridge = Vec::new();
    for _ in 0..rounds {
        let started = Instant::now();
        let spawn = SpawnOptions {
            binary: bin.clone(),
            codex_home: home.path.clone(),
            cwd: run.cwd.clone(),
            isolate_environment: true,
            config_overrides: Vec::new(),
            environment: None,
            jail: None,
            reaper: None,
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

    let thread_start = &offline.thread_start;
    let mut direct = Vec::new();
    for _ in 0..rounds {
        let started = Instant::now();
        let mut child = offline.spawn_app_server(&native);
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

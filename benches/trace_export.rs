//! `cargo bench --bench trace_export`: what traces (`--otel-endpoint`, content `metadata`) cost
//! the forwarding of `clawbridge app-server`.
//!
//! The stdio proxy forwards a stream of turns between the bench (playing OpenClaw) and a fake
//! Codex (a small Python app-server that answers each `turn/start` with a turn's worth of
//! notifications: `turn/started`, 40 deltas, a tool item, a token update, `turn/completed`).
//! Each round pushes the same 400 turns through a proxy without traces and through one that
//! sends them to a loopback OTLP collector (a sink that answers 200), alternating, and times the
//! stream from the first request to the last `turn/completed`. Printed: the median of the
//! rounds' wall-time ratios, traced / untraced (the goal: at most 1.02x; each round runs both,
//! in alternating order), with the exports the collector got. Only figures from this run.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "common/timing.rs"]
#[allow(dead_code)]
mod timing;
use timing::median;

const TURNS: usize = 400;
const ROUNDS: usize = 21;

const FAKE_CODEX: &str = r#"
import json, sys
out = sys.stdout
for line in sys.stdin:
    message = json.loads(line)
    if message.get("method") != "turn/start":
        if "id" in message and "method" in message:
            out.write(json.dumps({"id": message["id"], "result": {}}) + "\n"); out.flush()
        continue
    n, thread = message["id"], message["params"]["threadId"]
    turn = "turn-%s" % n
    lines = [{"id": n, "result": {"turn": {"id": turn}}},
             {"method": "turn/started", "params": {"threadId": thread, "turn": {"id": turn}}}]
    for k in range(40):
        lines.append({"method": "item/agentMessage/delta", "params": {"threadId": thread, "turnId": turn, "itemId": "m", "delta": "word %d of the answer, " % k * 4}})
    lines.append({"method": "item/started", "params": {"threadId": thread, "turnId": turn, "item": {"id": "call-%s" % n, "type": "commandExecution", "command": "ls"}}})
    lines.append({"method": "item/completed", "params": {"threadId": thread, "turnId": turn, "item": {"id": "call-%s" % n, "type": "commandExecution", "status": "completed", "aggregatedOutput": "a\nb"}}})
    lines.append({"method": "thread/tokenUsage/updated", "params": {"threadId": thread, "turnId": turn, "tokenUsage": {"last": {"inputTokens": 1200, "cachedInputTokens": 1100, "outputTokens": 80, "reasoningOutputTokens": 10}}}})
    lines.append({"method": "turn/completed", "params": {"threadId": thread, "turn": {"id": turn, "status": "completed", "items": []}}})
    out.write("".join(json.dumps(l) + "\n" for l in lines)); out.flush()
"#;

/// A loopback OTLP sink: reads each request whole, answers 200, counts the requests.
fn sink() -> (String, Arc<AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let posts = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&posts);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let counted = Arc::clone(&counted);
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream);
                loop {
                    let mut length = 0usize;
                    let mut line = String::new();
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if let Some(value) =
                            line.to_ascii_lowercase().strip_prefix("content-length:")
                        {
                            length = value.trim().parse().unwrap_or(0);
                        }
                        if line == "\r\n" {
                            break;
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    counted.fetch_add(1, Ordering::Relaxed);
                    let answer = "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
                    if reader.get_mut().write_all(answer.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, posts)
}

/// Push `TURNS` turns through a fresh proxy (traced to `otel` when given): the time from the
/// first request written to the last `turn/completed` read (the proxy's start and its final
/// flush of spans are outside it).
fn run(fake: &std::path::Path, otel: Option<&str>) -> Duration {
    let mut command = Command::new(env!("CARGO_BIN_EXE_clawbridge"));
    command
        .args(["app-server", "--no-check", "--codex-bin"])
        .arg(fake);
    if let Some(url) = otel {
        command.args(["--otel-endpoint", url]);
    }
    let mut child = command
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("clawbridge app-server");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut reader = BufReader::new(child.stdout.take().expect("stdout"));
    // The proxy is up once it forwards: one request answered before the clock starts.
    stdin
        .write_all(b"{\"id\":\"ping\",\"method\":\"config/read\",\"params\":{}}\n")
        .expect("ping");
    let mut line = String::new();
    reader.read_line(&mut line).expect("pong");
    let started = Instant::now();
    let writer = std::thread::spawn(move || {
        let mut text = String::new();
        for n in 0..TURNS {
            text.push_str(&format!(
                "{{\"id\":{n},\"method\":\"turn/start\",\"params\":{{\"threadId\":\"thr-{}\",\"input\":[{{\"type\":\"text\",\"text\":\"turn {n}\"}}]}}}}\n",
                n % 8
            ));
        }
        stdin.write_all(text.as_bytes()).expect("write");
        stdin
    });
    let mut completed = 0;
    while completed < TURNS {
        line.clear();
        if reader.read_line(&mut line).expect("read") == 0 {
            panic!("the proxy closed after {completed} turns");
        }
        if line.contains("\"turn/completed\"") {
            completed += 1;
        }
    }
    let took = started.elapsed();
    drop(writer.join().expect("writer"));
    let _ = child.wait();
    took
}

fn main() {
    let dir = tempfile::tempdir().expect("dir");
    let fake = dir.path().join("codex");
    std::fs::write(&fake, format!("#!/usr/bin/env python3\n{FAKE_CODEX}")).expect("fake");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("mode");
    }
    let (url, posts) = sink();
    run(&fake, None);
    run(&fake, Some(&url));
    // Paired rounds, the order swapped every round (untraced first, then traced first), so a
    // machine that speeds up or slows down over the bench weighs on both sides alike; the
    // figure is the median of the rounds' own ratios.
    let (mut offs, mut ons, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let (off, on) = if round % 2 == 0 {
            let off = run(&fake, None);
            (off, run(&fake, Some(&url)))
        } else {
            let on = run(&fake, Some(&url));
            (run(&fake, None), on)
        };
        ratios.push(on.as_secs_f64() / off.as_secs_f64());
        offs.push(off);
        ons.push(on);
    }
    let (off, on) = (median(offs), median(ons));
    ratios.sort_by(f64::total_cmp);
    let ratio = ratios[ratios.len() / 2];
    println!(
        "trace_export: {TURNS} turns ({} lines each way) through app-server: untraced {:.0} ms, traced (metadata, OTLP to a loopback sink) {:.0} ms: {ratio:.3}x (goal <= 1.02x); the sink took {} exports",
        TURNS * 45,
        off.as_secs_f64() * 1000.0,
        on.as_secs_f64() * 1000.0,
        posts.load(Ordering::Relaxed)
    );
}

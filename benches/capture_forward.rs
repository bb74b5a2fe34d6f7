//! `cargo bench --bench capture_forward`: what the recording forwarder (`--capture` on real runs)
//! costs a model request.
//!
//! The loopback stub plays the upstream and streams a turn's answer with a pause between its
//! events, as a model does. Each round sends the same request straight to the stub and through
//! the forwarder (recording into a throwaway folder), alternating, and times the whole answer and
//! its first byte. Printed: the median wall-time ratio (through / straight; the goal is at most
//! 1.05x) and the median difference in time to first byte (the goal: under 1 ms). Only figures
//! from this run; nothing is compared with numbers from elsewhere.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use clawbridge::{
    spawn_recorder, Forwarder, ForwarderSettings, ResponsesStub, StubScript, StubStep, Upstream,
};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const ROUNDS: usize = 40;
/// Between the stub's events: a model streaming at a realistic pace.
const EVENT_PAUSE_MS: u64 = 20;

/// One POST of `body`; (time to first byte, time to the end).
fn post(base_url: &str, body: &str) -> (Duration, Duration) {
    let rest = base_url.trim_start_matches("http://");
    let (host, path) = rest.split_once('/').expect("path");
    let started = Instant::now();
    let mut stream = std::net::TcpStream::connect(host).expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let metadata = r#"{"thread_id":"bench-thread","turn_id":"bench-turn"}"#;
    write!(
        stream,
        "POST /{path}/responses HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nx-codex-turn-metadata: {metadata}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("write");
    let mut first = None;
    let mut buffer = [0u8; 65536];
    let mut seen = Vec::new();
    loop {
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(read) => {
                first.get_or_insert_with(|| started.elapsed());
                seen.extend_from_slice(&buffer[..read]);
            }
        }
    }
    assert!(
        seen.windows(18)
            .any(|window| window == b"response.completed"),
        "a whole answer"
    );
    (first.unwrap_or_default(), started.elapsed())
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let steps = (0..ROUNDS * 2 + 4)
        .map(|_| StubStep::Paced {
            ms: EVENT_PAUSE_MS,
            step: Box::new(StubStep::Text("A streamed answer of a few words.".into())),
        })
        .collect();
    let dir = tempfile::tempdir().expect("dir");
    let (stub, forwarder) = runtime.block_on(async {
        let stub = ResponsesStub::start(StubScript {
            responses: steps,
            ..Default::default()
        })
        .await
        .expect("stub");
        let (sink, _writer) = spawn_recorder(dir.path().join("capture"));
        let forwarder = Forwarder::start(
            ForwarderSettings {
                upstream: Upstream::Fixed(stub.base_url()),
                extra_ca: None,
                websocket: true,
            },
            sink,
        )
        .await
        .expect("forwarder");
        (stub, forwarder)
    });
    // A request the size of an OpenClaw turn's (about 80 KB: instructions, tools, history).
    let filler = "OpenClaw developer instructions and history. ".repeat(1800);
    let body = serde_json::json!({
        "model": "gpt-5.5", "instructions": "Base instructions.", "stream": true,
        "input": [{"type": "message", "role": "developer", "content": [{"type": "input_text", "text": filler}]},
                  {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
        "prompt_cache_key": "bench-thread",
    })
    .to_string();
    let straight_url = stub.base_url();
    let through_url = forwarder.base_url();
    // Warm both paths.
    post(&straight_url, &body);
    post(&through_url, &body);
    let (mut ratios, mut first_byte_delta, mut straight_totals) =
        (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let (a, b) = if round % 2 == 0 {
            let straight = post(&straight_url, &body);
            (straight, post(&through_url, &body))
        } else {
            let through = post(&through_url, &body);
            (post(&straight_url, &body), through)
        };
        ratios.push(b.1.as_secs_f64() / a.1.as_secs_f64());
        first_byte_delta.push((b.0.as_secs_f64() - a.0.as_secs_f64()) * 1000.0);
        straight_totals.push(a.1.as_secs_f64() * 1000.0);
    }
    println!(
        "capture forwarder: {} KB request, an answer of {EVENT_PAUSE_MS} ms-paced events (straight: {:.0} ms median), {ROUNDS} alternating rounds, medians",
        body.len() / 1024,
        median(straight_totals)
    );
    println!(
        "  wall time through the forwarder / straight to the upstream: {:.3}x (goal <= 1.05x)",
        median(ratios)
    );
    println!(
        "  time to first byte, through minus straight: {:+.2} ms (goal < 1 ms)",
        median(first_byte_delta)
    );
    drop(forwarder);
    drop(stub);
}

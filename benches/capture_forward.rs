//! `cargo bench --bench capture_forward`: what the recording forwarder (`--capture` on real runs)
//! costs a model request.
//!
//! The loopback stub plays the upstream and streams a turn's answer with a pause between its
//! events, as a model does. Each round sends the same request straight to the stub and through
//! the forwarder (recording into a throwaway folder), alternating, and times the whole answer and
//! its first byte. Printed: the median wall-time ratio (through / straight; the goal is at most
//! 1.05x) and the median difference in time to first byte (the goal: under 1 ms), for HTTP with
//! server-sent events and for the Responses WebSocket (a stub that speaks it; each round opens a
//! connection, sends one `response.create` frame and reads the events to the last; its client
//! runs on a runtime of its own, as Codex is a process of its own). Only figures from this run;
//! nothing is compared with numbers from elsewhere.

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

type Socket = tokio_util::compat::Compat<tokio::net::TcpStream>;
type OpenSocket = (
    soketto::connection::Sender<Socket>,
    soketto::connection::Receiver<Socket>,
);

/// A Responses WebSocket to `base_url`, open.
async fn open_websocket(base_url: &str) -> OpenSocket {
    use tokio_util::compat::TokioAsyncReadCompatExt;
    let rest = base_url.trim_start_matches("http://");
    let (host, path) = rest.split_once('/').expect("path");
    let socket = tokio::net::TcpStream::connect(host).await.expect("connect");
    socket.set_nodelay(true).expect("nodelay");
    let resource = format!("/{path}/responses");
    let mut client = soketto::handshake::Client::new(socket.compat(), host, &resource);
    let accepted = client.handshake().await.expect("handshake");
    assert!(
        matches!(
            accepted,
            soketto::handshake::ServerResponse::Accepted { .. }
        ),
        "{accepted:?}"
    );
    client.into_builder().finish()
}

/// One `response.create` frame on an open socket and its events up to `response.completed`;
/// (time to the first event, time to the end).
async fn request_on(socket: &mut OpenSocket, frame: &str) -> (Duration, Duration) {
    let started = Instant::now();
    socket.0.send_text(frame).await.expect("send");
    socket.0.flush().await.expect("flush");
    let mut first = None;
    loop {
        let mut data = Vec::new();
        socket.1.receive_data(&mut data).await.expect("an event");
        first.get_or_insert_with(|| started.elapsed());
        if data
            .windows(18)
            .any(|window| window == b"response.completed")
        {
            break;
        }
    }
    (first.unwrap_or_default(), started.elapsed())
}

/// One model request over the Responses WebSocket at `base_url`: a new connection, one
/// `response.create` frame, the events up to `response.completed`; (time to the first event,
/// time to the end), both from before the connection.
async fn over_websocket(base_url: &str, frame: &str) -> (Duration, Duration) {
    let started = Instant::now();
    let mut socket = open_websocket(base_url).await;
    let opened = started.elapsed();
    let (first, end) = request_on(&mut socket, frame).await;
    let _ = socket.0.close().await;
    (opened + first, opened + end)
}

/// Alternating rounds of `straight` and `through`: the medians of (through / straight wall time,
/// through minus straight first byte in ms, straight wall time in ms).
fn compare(mut one: impl FnMut(bool) -> (Duration, Duration)) -> (f64, f64, f64) {
    one(false);
    one(true);
    let (mut ratios, mut first_byte_delta, mut straight_totals) =
        (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let (a, b) = if round % 2 == 0 {
            let straight = one(false);
            (straight, one(true))
        } else {
            let through = one(true);
            (one(false), through)
        };
        ratios.push(b.1.as_secs_f64() / a.1.as_secs_f64());
        first_byte_delta.push((b.0.as_secs_f64() - a.0.as_secs_f64()) * 1000.0);
        straight_totals.push(a.1.as_secs_f64() * 1000.0);
    }
    (
        median(ratios),
        median(first_byte_delta),
        median(straight_totals),
    )
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
    // The WebSocket client plays Codex, a process of its own: it runs on a runtime of its own,
    // so its reads wake as Codex's would. On the servers' runtime, its wake-ups waited for a
    // worker the recorder kept busy (traced: the forwarder had passed the first event on at
    // +1.1 ms, the client read it at +3.4 ms).
    let client = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("client runtime");
    let steps: Vec<StubStep> = (0..ROUNDS * 4 + 8)
        .map(|_| StubStep::Paced {
            ms: EVENT_PAUSE_MS,
            step: Box::new(StubStep::Text("A streamed answer of a few words.".into())),
        })
        .collect();
    let dir = tempfile::tempdir().expect("dir");
    let start = |websocket: bool, steps: Vec<StubStep>, folder: &str| {
        runtime.block_on(async {
            let stub = ResponsesStub::start(StubScript {
                responses: steps,
                websocket,
                ..Default::default()
            })
            .await
            .expect("stub");
            let (sink, writer) = spawn_recorder(dir.path().join(folder));
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
            (stub, forwarder, writer)
        })
    };
    let (stub, forwarder, _writer) = start(false, steps.clone(), "capture");
    let (ws_stub, ws_forwarder, _ws_writer) = start(true, steps, "capture-ws");
    // A request the size of an OpenClaw turn's (about 80 KB: instructions, tools, history).
    let filler = "OpenClaw developer instructions and history. ".repeat(1800);
    let body = serde_json::json!({
        "model": "gpt-5.5", "instructions": "Base instructions.", "stream": true,
        "input": [{"type": "message", "role": "developer", "content": [{"type": "input_text", "text": filler}]},
                  {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
        "prompt_cache_key": "bench-thread",
    })
    .to_string();
    let (straight_url, through_url) = (stub.base_url(), forwarder.base_url());
    let (ratio, first_byte, straight) =
        compare(|through| post(if through { &through_url } else { &straight_url }, &body));
    println!(
        "capture forwarder: {} KB request, an answer of {EVENT_PAUSE_MS} ms-paced events, {ROUNDS} alternating rounds, medians",
        body.len() / 1024
    );
    println!("  HTTP/SSE (straight: {straight:.0} ms):");
    println!("    wall time through the forwarder / straight to the upstream: {ratio:.3}x (goal <= 1.05x)");
    println!("    time to first byte, through minus straight: {first_byte:+.2} ms (goal < 1 ms)");
    let mut frame: serde_json::Value = serde_json::from_str(&body).expect("json");
    frame["type"] = serde_json::json!("response.create");
    let frame = frame.to_string();
    let (ws_straight, ws_through) = (ws_stub.base_url(), ws_forwarder.base_url());
    let (ratio, first_byte, straight) = compare(|through| {
        client.block_on(over_websocket(
            if through { &ws_through } else { &ws_straight },
            &frame,
        ))
    });
    println!("  Responses WebSocket, a new connection per request (straight: {straight:.0} ms; through the forwarder it opens the upstream's socket first):");
    println!("    wall time through the forwarder / straight to the upstream: {ratio:.3}x (goal <= 1.05x)");
    println!("    time to the first event, through minus straight: {first_byte:+.2} ms");
    // As Codex uses it: one socket for many requests.
    let mut sockets = client.block_on(async {
        (
            open_websocket(&ws_straight).await,
            open_websocket(&ws_through).await,
        )
    });
    let (ratio, first_byte, straight) = compare(|through| {
        let socket = if through {
            &mut sockets.1
        } else {
            &mut sockets.0
        };
        client.block_on(request_on(socket, &frame))
    });
    println!("  Responses WebSocket, requests on an open socket (straight: {straight:.0} ms):");
    println!("    wall time through the forwarder / straight to the upstream: {ratio:.3}x (goal <= 1.05x)");
    println!(
        "    time to the first event, through minus straight: {first_byte:+.2} ms (goal < 1 ms)"
    );
    drop((forwarder, ws_forwarder));
    drop((stub, ws_stub));
}

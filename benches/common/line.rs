//! One agent's side of Codex's app-server protocol for the benches: a request and its answer
//! over any line (an app-server's stdio, the endpoint's WebSocket), and the WebSocket itself.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// Send a message; read the next one.
pub trait Line {
    async fn send(&mut self, message: Value);
    async fn next(&mut self) -> Value;
}

/// Send a request, read until its answer (which must not be an error).
pub async fn request(line: &mut impl Line, id: u64, method: &str, params: Value) -> Value {
    line.send(json!({"id": id, "method": method, "params": params}))
        .await;
    loop {
        let message = line.next().await;
        if message["id"] == id && message.get("method").is_none() {
            assert!(message.get("error").is_none(), "{method}: {message}");
            return message;
        }
    }
}

/// One agent's session on `line`: initialize (as OpenClaw, version `version`), a thread started
/// with `thread_start`, and `turns` turns one after another (`text` says each one's message); the
/// latency of each turn (`turn/start` sent to its `turn/completed`).
pub async fn timed_session(
    line: &mut impl Line,
    version: &str,
    thread_start: &Value,
    turns: usize,
    text: impl Fn(usize) -> String,
) -> Vec<Duration> {
    request(
        line,
        1,
        "initialize",
        json!({"clientInfo": {"name": "openclaw", "version": version}, "capabilities": {"experimentalApi": true}}),
    )
    .await;
    line.send(json!({"method": "initialized"})).await;
    let started = request(line, 2, "thread/start", thread_start.clone()).await;
    let thread = started["result"]["thread"]["id"]
        .as_str()
        .expect("thread id")
        .to_string();
    let mut latencies = Vec::new();
    for turn in 0..turns {
        let sent = Instant::now();
        let params = json!({"threadId": thread, "input": [{"type": "text", "text": text(turn)}]});
        request(line, 10 + turn as u64, "turn/start", params).await;
        loop {
            let message = line.next().await;
            if message["method"] == "turn/completed" && message["params"]["threadId"] == thread {
                break;
            }
        }
        latencies.push(sent.elapsed());
    }
    latencies
}

/// An agent on the endpoint's WebSocket.
pub struct Socket {
    sender: soketto::connection::Sender<tokio_util::compat::Compat<tokio::net::TcpStream>>,
    receiver: soketto::connection::Receiver<tokio_util::compat::Compat<tokio::net::TcpStream>>,
}

impl Socket {
    /// Upgrade a connection to `addr` with the bearer `token`.
    pub async fn connect_with(token: &str, addr: &str) -> Socket {
        use tokio_util::compat::TokioAsyncReadCompatExt;
        let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let mut client = soketto::handshake::Client::new(stream.compat(), addr, "/");
        let bearer = format!("Bearer {token}");
        let headers = [soketto::handshake::client::Header {
            name: "Authorization",
            value: bearer.as_bytes(),
        }];
        client.set_headers(&headers);
        match client.handshake().await.expect("handshake") {
            soketto::handshake::ServerResponse::Accepted { .. } => {}
            other => panic!("the endpoint refused the agent: {other:?}"),
        }
        let mut builder = client.into_builder();
        builder.set_max_message_size(64 * 1024 * 1024);
        let (sender, receiver) = builder.finish();
        Socket { sender, receiver }
    }
}

impl Line for Socket {
    async fn send(&mut self, message: Value) {
        self.sender
            .send_text(message.to_string())
            .await
            .expect("send");
        self.sender.flush().await.expect("flush");
    }
    async fn next(&mut self) -> Value {
        let mut data = Vec::new();
        self.receiver
            .receive_data(&mut data)
            .await
            .expect("receive");
        serde_json::from_slice(&data).expect("json")
    }
}

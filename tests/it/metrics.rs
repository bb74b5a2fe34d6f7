//! The endpoint's metrics read by a real Prometheus (Debian's, installed by
//! `scripts/install-prometheus`): it scrapes `/metrics` with the operator's token, and a query
//! answers the turn count.

use std::time::Duration;

use serde_json::Value;

use crate::endpoint::{endpoint, one_turn, tcp_client, TOKEN};

fn prometheus_bin() -> std::path::PathBuf {
    std::env::var_os("CLAWBRIDGE_PROMETHEUS_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| crate::util::repo_root().join(".tools/prometheus/usr/bin/prometheus"))
}

#[ignore = "pairs with the Codex CLI and Prometheus: scripts/test installs them and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_the_endpoint_and_counts_its_turns() {
    let binary = prometheus_bin();
    assert!(
        binary.is_file(),
        "no Prometheus at {} (scripts/install-prometheus)",
        binary.display()
    );
    let (endpoint, offline) = endpoint(vec![clawbridge::StubStep::Text("COUNTED".into())]).await;
    let mut client = tcp_client(&endpoint).await;
    client.initialize().await;
    let (_, done) = one_turn(&mut client, "count me").await;
    assert_eq!(done["params"]["turn"]["status"], "completed", "{done}");

    let dir = tempfile::tempdir().expect("dir");
    let token = dir.path().join("token");
    std::fs::write(&token, TOKEN).expect("token");
    let target = endpoint.tcp_addr().expect("tcp");
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: clawbridge\n    authorization:\n      credentials_file: {}\n    static_configs:\n      - targets: ['{target}']\n",
            token.display()
        ),
    )
    .expect("config");
    let port = crate::util::free_port();
    let mut prometheus = std::process::Command::new(&binary)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("prometheus");
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    crate::util::wait_until_async("Prometheus listening", Duration::from_secs(30), || {
        std::net::TcpStream::connect(addr).is_ok()
    })
    .await;
    let query = move |expression: &'static str| {
        let request = format!(
            "GET /api/v1/query?query={expression} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
        );
        let (status, text) = crate::serve_security::raw_http(addr, &request);
        let body = text
            .split("\r\n\r\n")
            .nth(1)
            .unwrap_or_default()
            .to_string();
        (
            status,
            serde_json::from_str::<Value>(&body).unwrap_or(Value::Null),
        )
    };
    let mut answer = Value::Null;
    for _ in 0..60 {
        let found = tokio::task::spawn_blocking(move || {
            query("sum(clawbridge_turns_total%7Bstatus%3D%22completed%22%7D)")
        })
        .await
        .expect("query");
        answer = found.1;
        if answer["data"]["result"][0]["value"][1].is_string() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let up = tokio::task::spawn_blocking(move || query("up%7Bjob%3D%22clawbridge%22%7D"))
        .await
        .expect("up");
    // The local app-server's resident memory, as Prometheus scraped it.
    let rss = tokio::task::spawn_blocking(move || query("max(clawbridge_member_rss_bytes)"))
        .await
        .expect("rss");
    let _ = prometheus.kill();
    let _ = prometheus.wait();
    assert_eq!(
        answer["data"]["result"][0]["value"][1], "1",
        "Prometheus counts the turn: {answer}"
    );
    assert_eq!(
        up.1["data"]["result"][0]["value"][1], "1",
        "the scrape is up (the token was accepted): {}",
        up.1
    );
    let rss_bytes: f64 = rss.1["data"]["result"][0]["value"][1]
        .as_str()
        .and_then(|value| value.parse().ok())
        .unwrap_or(0.0);
    assert!(
        rss_bytes > 10.0 * 1024.0 * 1024.0,
        "a running Codex app-server holds more than 10 MiB: {}",
        rss.1
    );
    drop(client);
    endpoint.stop().await;
    drop(offline);
}

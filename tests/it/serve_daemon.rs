//! `clawbridge serve` as a long-running daemon, against the real binary: it ends cleanly.

use std::time::Duration;

use jsonrpsee::core::client::{ClientT, SubscriptionClientT};
use jsonrpsee::rpc_params;
use serde_json::{json, Value};

use crate::e2e::codex_bin;
use crate::serve_security::Fixture;

#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_interrupts_running_turns_delivers_their_end_and_exits_zero() {
    codex_bin();
    let fixture = Fixture::new();
    let script = fixture.state.parent().expect("base").join("hang.json");
    std::fs::write(&script, json!({"responses": ["hang"]}).to_string()).expect("script");
    let mut serve = fixture.serve(&["--stub-script", &script.display().to_string()]);
    let client = serve.client().await;
    let started: Value = client
        .request("bridge.runStart", rpc_params![fixture.document()])
        .await
        .expect("run");
    let mut events = client
        .subscribe::<Value, _>(
            "bridge.subscribeRun",
            rpc_params![started["runId"].clone()],
            "bridge.unsubscribeRun",
        )
        .await
        .expect("subscribe");
    loop {
        let event = next(&mut events).await;
        if event["method"] == "turn/started" {
            break;
        }
    }
    let pid = serve.child.id().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill")
        .success());
    let end = loop {
        let event = next(&mut events).await;
        if event["event"] == "turnEnd" {
            break event;
        }
    };
    assert!(
        end["status"] == "interrupted" || end["status"] == "failed",
        "{end}"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = serve.child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "serve did not exit within 10 s of SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(status.code(), Some(0), "{}", serve.stderr());
    assert!(
        serve.stderr().contains("shutting down"),
        "{}",
        serve.stderr()
    );
}

async fn next(events: &mut jsonrpsee::core::client::Subscription<Value>) -> Value {
    tokio::time::timeout(Duration::from_secs(30), events.next())
        .await
        .expect("event in time")
        .expect("open")
        .expect("event")
}

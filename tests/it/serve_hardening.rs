//! `clawbridge serve` attacked a second time (Security 2, docs/threat-model.md): approvals under
//! the ceiling, fan-out skill trees, unbounded inputs. Each test fails when the protection it
//! names is removed.

use std::path::PathBuf;
use std::sync::Arc;

use jsonrpsee::core::client::ClientT;
use jsonrpsee::rpc_params;
use serde_json::{json, Value};

use crate::e2e::codex_bin;
use crate::serve_security::Fixture;

/// A folder no sandbox leaves writable: not under /tmp or $TMPDIR (Codex's workspace-write
/// sandbox leaves those writable), nor the checkout.
fn unsandboxed_dir() -> tempfile::TempDir {
    tempfile::tempdir_in("/var/tmp")
        .or_else(|_| {
            let cache = dirs::cache_dir().expect("a cache folder");
            std::fs::create_dir_all(&cache).expect("cache");
            tempfile::tempdir_in(cache)
        })
        .expect("outside folder")
}

/// Follow a run to its end, accepting every approval it asks for (the most a client can do).
async fn accept_everything(client: &jsonrpsee::ws_client::WsClient, run_id: &str) -> Vec<Value> {
    let mut subscription = crate::serve::subscribe(client, run_id).await;
    let mut events = Vec::new();
    loop {
        let event = crate::serve::next_event(&mut subscription).await;
        if event["event"] == "approvalRequest" {
            let _ = client
                .request::<Value, _>(
                    "bridge.approval",
                    rpc_params![json!({"approvalId": event["approvalId"], "decision": "accept"})],
                )
                .await;
        }
        let end = event["event"] == "turnEnd";
        events.push(event);
        if end {
            return events;
        }
    }
}

/// Protection: the sandbox ceiling binds approvals. A model that asks to run a command outside
/// the sandbox (`sandbox_permissions: "require_escalated"`), approved by the client, still cannot
/// write outside the roots under a `workspace-write` or `read-only` ceiling.
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_escalation_cannot_lift_the_ceiling() {
    codex_bin();
    for ceiling in ["workspace-write", "read-only"] {
        let fixture = Fixture::new();
        let outside = unsandboxed_dir();
        let escaped: PathBuf = outside.path().join("escaped.txt");
        let script = fixture.state.parent().expect("base").join("script.json");
        let escalate = json!({"toolCall": {"name": "exec_command", "arguments": {
            "cmd": format!("touch {}", escaped.display()),
            "sandbox_permissions": "require_escalated",
            "justification": "May I write outside the workspace?"}}});
        std::fs::write(
            &script,
            json!({"responses": [escalate.clone(), escalate, {"text": "done"}]}).to_string(),
        )
        .expect("script");
        let serve = fixture.serve(&[
            "--stub-script",
            &script.display().to_string(),
            "--max-sandbox",
            ceiling,
        ]);
        let client = Arc::new(serve.client().await);
        let mut document = fixture.document();
        document["approvalPolicy"] = json!("on-request");
        let started: Value = client
            .request("bridge.runStart", rpc_params![document])
            .await
            .expect("run");
        let events = accept_everything(&client, started["runId"].as_str().expect("id")).await;
        let asked: Vec<&Value> = events
            .iter()
            .filter(|event| event["event"] == "approvalRequest")
            .collect();
        assert!(
            !escaped.exists(),
            "an approved escalation wrote {} under the {ceiling} ceiling (approvals: {asked:?})",
            escaped.display()
        );
        assert!(
            asked.is_empty(),
            "no escalation reaches the client: {asked:?}"
        );
        let end = events.last().expect("end");
        assert_eq!(end["event"], "turnEnd");
        // Codex was told the bound policy, and rejected the escalation itself.
        let settings = events
            .iter()
            .find(|event| event["method"] == "thread/settings/updated")
            .expect("thread settings");
        assert_eq!(
            settings["params"]["threadSettings"]["approvalPolicy"]["granular"]["sandbox_approval"],
            false,
            "{settings}"
        );
    }
}

/// The other side of the same protection: where the operator allows full access, approvals reach
/// the client as before, and a declined escalation does not run.
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_a_full_access_ceiling_the_client_decides_escalations() {
    codex_bin();
    let fixture = Fixture::new();
    let outside = unsandboxed_dir();
    let escaped: PathBuf = outside.path().join("escaped.txt");
    let script = fixture.state.parent().expect("base").join("script.json");
    let escalate = json!({"toolCall": {"name": "exec_command", "arguments": {
        "cmd": format!("touch {}", escaped.display()),
        "sandbox_permissions": "require_escalated",
        "justification": "May I write outside the workspace?"}}});
    std::fs::write(
        &script,
        json!({"responses": [escalate, {"text": "done"}]}).to_string(),
    )
    .expect("script");
    let serve = fixture.serve(&[
        "--stub-script",
        &script.display().to_string(),
        "--max-sandbox",
        "danger-full-access",
    ]);
    let client = serve.client().await;
    let mut document = fixture.document();
    document["approvalPolicy"] = json!("on-request");
    document["sandbox"] = json!("workspace-write");
    let started: Value = client
        .request("bridge.runStart", rpc_params![document])
        .await
        .expect("run");
    let run_id = started["runId"].as_str().expect("id");
    let mut subscription = crate::serve::subscribe(&client, run_id).await;
    let mut asked = 0;
    loop {
        let event = crate::serve::next_event(&mut subscription).await;
        if event["event"] == "approvalRequest" {
            asked += 1;
            let ok: Value = client
                .request(
                    "bridge.approval",
                    rpc_params![json!({"approvalId": event["approvalId"], "decision": "decline"})],
                )
                .await
                .expect("decline");
            assert_eq!(ok["ok"], true);
        }
        if event["event"] == "turnEnd" {
            break;
        }
    }
    assert_eq!(asked, 1, "the escalation was the client's to decide");
    assert!(!escaped.exists(), "a declined escalation did not run");
}

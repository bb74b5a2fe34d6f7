//! Budgets that count real tokens (the "Operations" issue, item 1): `--budget-tokens` on the
//! endpoint, with the real Codex and the loopback upstream (each model call costs 15 tokens:
//! 10 in, 5 out).

use std::time::Duration;

use clawbridge::StubScript;
use serde_json::json;

use crate::endpoint::Client;
use crate::endpoint_accounts::accounts_endpoint_scripted;
use crate::fleet_state::turn;

type Ws = Client<tokio::net::TcpStream>;

async fn agent(accounts: &crate::endpoint_accounts::Accounts) -> Ws {
    let mut client = crate::endpoint::tcp_client(&accounts.endpoint).await;
    client.initialize().await;
    let login = client
        .request(
            "account/login/start",
            json!({"type": "apiKey", "apiKey": "sk-budget-A-0123456789abcdef"}),
        )
        .await;
    assert_eq!(login["result"]["type"], "apiKey", "{login}");
    client
}

fn used_today(accounts: &crate::endpoint_accounts::Accounts) -> u64 {
    let status = serde_json::to_value(accounts.endpoint.status()).expect("status");
    status["identities"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|identity| identity["identity"] != "native")
        .map(|identity| identity["tokensToday"].as_u64().unwrap_or(0))
        .sum()
}

/// Protection: usage is counted once, from the model's own calls. A resume (OpenClaw resumes its
/// session's thread at the start of every run) adds nothing; a budget of 20 trips at the call
/// that passes it, and that turn, which answered, is `completed`; the next turn, a review and a
/// compaction are refused, naming what the account used.
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_adds_nothing_and_the_budget_trips_at_its_tokens() {
    let accounts = accounts_endpoint_scripted(
        2,
        1,
        StubScript::default(),
        |pool| pool,
        |settings| clawbridge::EndpointSettings {
            budget_tokens: Some(20),
            ..settings
        },
    )
    .await;
    let mut first = agent(&accounts).await;
    let started = first
        .request("thread/start", json!({"modelProvider": "openai"}))
        .await;
    let thread = started["result"]["thread"]["id"]
        .as_str()
        .expect("thread")
        .to_string();
    let done = turn(&mut first, &thread, "round 0").await;
    assert_eq!(done["params"]["turn"]["status"], "completed", "{done}");
    assert_eq!(used_today(&accounts), 15, "one call, 15 tokens");
    // The next run, as OpenClaw makes it: a new connection that resumes the thread.
    drop(first);
    let mut next = agent(&accounts).await;
    let resumed = next
        .request("thread/resume", json!({"threadId": thread}))
        .await;
    assert_eq!(
        resumed["result"]["thread"]["id"],
        thread.as_str(),
        "{resumed}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(used_today(&accounts), 15, "a resume is no model call");
    // 15 + 15 = 30 passes the budget of 20: the turn answered, so it completed.
    let done = turn(&mut next, &thread, "round 1").await;
    assert_eq!(done["params"]["turn"]["status"], "completed", "{done}");
    assert_eq!(used_today(&accounts), 30);
    for (method, params) in [
        (
            "turn/start",
            json!({"threadId": thread, "input": [{"type": "text", "text": "round 2"}]}),
        ),
        (
            "review/start",
            json!({"threadId": thread, "target": {"type": "uncommittedChanges"}}),
        ),
        ("thread/compact/start", json!({"threadId": thread})),
    ] {
        let refused = next.request(method, params).await;
        let why = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(
            why.contains("used 30 tokens today") && why.contains("budget of 20"),
            "{method}: {refused}"
        );
    }
    accounts.endpoint.stop().await;
}

/// Protection: concurrent turns cannot run past the budget together. Two turns of one account
/// loop through tool calls (8 model calls each, 240 tokens if nothing stopped them); the budget is
/// 40: once a call passes it, the account's other running turn is stopped at once, and a turn
/// that calls the model again is stopped after that call. The account ends within a call per
/// running turn of its budget.
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_tool_loops_stop_at_the_budget() {
    let step =
        json!({"toolCall": {"name": "exec_command", "arguments": {"cmd": "true", "login": false}}});
    let mut loops = vec![step; 8];
    loops.push(json!({"text": "looped"}));
    let script: StubScript = serde_json::from_value(json!({"responses": [], "byInput": [
        {"contains": "loop one", "responses": loops.clone()},
        {"contains": "loop two", "responses": loops},
    ]}))
    .expect("script");
    let accounts = accounts_endpoint_scripted(
        2,
        2,
        script,
        |pool| pool,
        |settings| clawbridge::EndpointSettings {
            budget_tokens: Some(40),
            ..settings
        },
    )
    .await;
    let run = |name: &'static str| {
        let accounts = &accounts;
        async move {
            let mut client = agent(accounts).await;
            let started = client
                .request("thread/start", json!({"modelProvider": "openai"}))
                .await;
            let thread = started["result"]["thread"]["id"]
                .as_str()
                .expect("thread")
                .to_string();
            turn(&mut client, &thread, name).await
        }
    };
    let (one, two) = tokio::join!(run("loop one"), run("loop two"));
    let statuses = [
        one["params"]["turn"]["status"].clone(),
        two["params"]["turn"]["status"].clone(),
    ];
    assert!(
        statuses.iter().all(|status| status == "interrupted"),
        "both loops were stopped: {one}\n{two}"
    );
    let used = used_today(&accounts);
    // At most the budget, the call that passed it, and one more call per running turn.
    assert!(used <= 40 + 15 + 2 * 15, "used {used} of a budget of 40");
    accounts.endpoint.stop().await;
}

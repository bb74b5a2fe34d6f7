//! A fault soak through the WebSocket endpoint, with credentials in the loop: several accounts
//! (and a connection that never logs in) run turns side by side while members are killed with
//! SIGKILL at random and clients drop and reconnect. It fails (the test binary exits 1) when a
//! turn gets no answer, a model request carries another agent's key, or an agent's thread is
//! lost (its conversation does not go on after the soak).
//!
//! `CLAWBRIDGE_SOAK_SECS` sets the length (default 20 s, what CI runs), `CLAWBRIDGE_SOAK_SEED`
//! the random seed (printed). The counts are printed as one `SOAK:` line.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::endpoint::{tcp_client, turn_completed, Client};
use crate::endpoint_accounts::{accounts_endpoint_tuned, start_turn, Accounts};

/// A small deterministic generator (xorshift64*), so a failing run can be replayed by its seed.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

#[derive(Default)]
struct Counts {
    turns: AtomicUsize,
    completed: AtomicUsize,
    failed_with_member: AtomicUsize,
    refused: AtomicUsize,
    reconnects: AtomicUsize,
    kills: AtomicUsize,
}

/// One soak agent: a name, an optional key (none: it never logs in), its connection and thread.
struct SoakAgent {
    name: String,
    key: Option<String>,
    client: Client<tokio::net::TcpStream>,
    thread: String,
    /// Its thread must be resumed before the next turn (after a reconnect).
    resume: bool,
}

impl SoakAgent {
    async fn connect(
        accounts: &Accounts,
        name: &str,
        key: Option<String>,
        counts: &Counts,
    ) -> SoakAgent {
        let client = Self::session(accounts, key.as_deref(), counts).await;
        let mut agent = SoakAgent {
            name: name.to_string(),
            key,
            client,
            thread: String::new(),
            resume: false,
        };
        let params = match agent.key {
            Some(_) => json!({"modelProvider": "openai"}),
            None => json!({}),
        };
        let started = agent.client.request("thread/start", params).await;
        agent.thread = started["result"]["thread"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("{name}: {started}"))
            .to_string();
        // As OpenClaw does: a thread is started for a turn (till then Codex has no rollout).
        agent.turn(0, counts).await;
        agent
    }

    /// A new connection, logged in with the key. A login is answered: an error (its member was
    /// killed under it twice, or no room yet) is counted and the login tried again, at most 5
    /// times.
    async fn session(
        accounts: &Accounts,
        key: Option<&str>,
        counts: &Counts,
    ) -> Client<tokio::net::TcpStream> {
        let mut client = tcp_client(&accounts.endpoint).await;
        client.initialize().await;
        let Some(key) = key else {
            return client;
        };
        for _ in 0..5 {
            let login = client
                .request(
                    "account/login/start",
                    json!({"type": "apiKey", "apiKey": key}),
                )
                .await;
            if login["result"]["type"] == "apiKey" {
                return client;
            }
            assert!(login["error"].is_object(), "{login}");
            counts.refused.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("the login failed 5 times");
    }

    /// One turn to its answer: completed, failed (its member went away), or refused.
    async fn turn(&mut self, round: usize, counts: &Counts) {
        if self.resume {
            let resumed = self
                .client
                .request("thread/resume", json!({"threadId": self.thread}))
                .await;
            if resumed["error"].is_object() {
                counts.refused.fetch_add(1, Ordering::SeqCst);
                return;
            }
            self.resume = false;
        }
        counts.turns.fetch_add(1, Ordering::SeqCst);
        let answer = start_turn(&mut self.client, &self.thread, &self.name, round).await;
        if answer["error"].is_object() {
            // An answer: the member went away under the request, or no room yet.
            counts.refused.fetch_add(1, Ordering::SeqCst);
            self.resume = true;
            self.client.seen.clear();
            return;
        }
        // A turn left unanswered is named (the agent, its thread and round, what its connection
        // heard), before the client's own 60 s wait for any message gives up unnamed.
        let waited = tokio::time::timeout(
            Duration::from_secs(50),
            self.client
                .until("turn/completed", turn_completed(&self.thread)),
        )
        .await;
        let Ok(done) = waited else {
            panic!(
                "{}'s turn {round} on thread {} got no turn/completed within 50 s (its turn/start: {answer}); its connection heard {:#?}",
                self.name, self.thread, self.client.seen
            );
        };
        match done["params"]["turn"]["status"].as_str() {
            Some("completed") => counts.completed.fetch_add(1, Ordering::SeqCst),
            _ => {
                let why = done["params"]["turn"]["error"]["message"]
                    .as_str()
                    .unwrap_or_default();
                assert!(why.contains("went away"), "{}: {done}", self.name);
                self.resume = true;
                counts.failed_with_member.fetch_add(1, Ordering::SeqCst)
            }
        };
        self.client.seen.clear();
    }
}

#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fault_soak_through_the_endpoint_keeps_every_turn_answered_and_every_key_its_own() {
    let secs: u64 = std::env::var("CLAWBRIDGE_SOAK_SECS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(20);
    let seed: u64 = std::env::var("CLAWBRIDGE_SOAK_SEED")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |now| now.as_nanos() as u64)
                | 1
        });
    eprintln!("SOAK: {secs} s, seed {seed}");
    // Three members for three accounts and a native connection; kills must not mark a member
    // dead for the rest of the soak (that is tested elsewhere), so the crash limit is high.
    let mut accounts = accounts_endpoint_tuned(3, 1, |pool| clawbridge::PoolConfig {
        crash_limit: 1000,
        backoff_first: Duration::from_millis(100),
        backoff_max: Duration::from_millis(500),
        ..pool
    })
    .await;
    let accounts_ref = &accounts;
    let counts = Arc::new(Counts::default());
    let names = ["A", "B", "C", "N"];
    let mut agents = Vec::new();
    for name in names {
        let key = (name != "N").then(|| format!("sk-soak-{name}-0123456789abcdef"));
        agents.push(SoakAgent::connect(accounts_ref, name, key, &counts).await);
    }
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut random = Random(seed);
    // Each agent runs turns in a loop and sometimes drops its connection and comes back.
    let runs = agents.into_iter().enumerate().map(|(index, mut agent)| {
        let counts = Arc::clone(&counts);
        let mut random = Random(seed.wrapping_add(index as u64 * 7919) | 1);
        async move {
            let mut round = 1;
            while Instant::now() < deadline {
                if random.below(4) == 0 {
                    agent.client =
                        SoakAgent::session(accounts_ref, agent.key.as_deref(), &counts).await;
                    agent.resume = true;
                    counts.reconnects.fetch_add(1, Ordering::SeqCst);
                }
                agent.turn(round, &counts).await;
                round += 1;
            }
            agent
        }
    });
    // The killer: a running member, SIGKILL, every 1 to 4 s.
    let killer = async {
        while Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(1000 + random.below(3000))).await;
            let pids: Vec<u32> = accounts_ref
                .endpoint
                .members()
                .into_iter()
                .filter_map(|member| member.pid)
                .collect();
            if pids.is_empty() {
                continue;
            }
            let pid = pids[random.below(pids.len() as u64) as usize];
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status();
            counts.kills.fetch_add(1, Ordering::SeqCst);
        }
    };
    // The bound on app-servers holds at every moment, restarts after kills included: the
    // machine's own list of Codex processes, every 20 ms.
    let prefixes = accounts.home_prefixes();
    let most_processes = AtomicUsize::new(0);
    let sampler = async {
        while Instant::now() < deadline {
            let pids = crate::endpoint_accounts::codex_processes(&prefixes);
            let live = pids.len();
            most_processes.fetch_max(live, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let (mut agents, (), ()) = tokio::join!(futures_util::future::join_all(runs), killer, sampler);
    let most_processes = most_processes.load(Ordering::SeqCst);
    assert!(
        most_processes <= 3,
        "{most_processes} Codex processes ran at once; --app-servers is 3"
    );
    // No binding lost: each agent resumes its thread and its conversation goes on (the model
    // is sent the agent's first message again).
    for agent in agents.iter_mut() {
        agent.resume = true;
        let mut tries = 0;
        loop {
            let before = counts.completed.load(Ordering::SeqCst);
            agent.turn(10_000, &counts).await;
            if counts.completed.load(Ordering::SeqCst) > before {
                break;
            }
            tries += 1;
            assert!(tries < 5, "{}: its thread could not go on", agent.name);
            agent.resume = true;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    // On the upstream's side: every model request carried its own agent's key.
    let mut checked = 0;
    let mut by_agent: BTreeMap<String, usize> = BTreeMap::new();
    let mut history_kept = BTreeMap::new();
    while let Ok(request) = accounts.upstream.try_recv() {
        let body = request.body.to_string();
        let owner = names
            .iter()
            .find(|name| body.contains(&format!("message from agent {name} ")))
            .unwrap_or_else(|| panic!("a model request of no agent: {body}"));
        let auth = request.headers.get("authorization").cloned();
        let wanted = (*owner != "N").then(|| format!("Bearer sk-soak-{owner}-0123456789abcdef"));
        assert_eq!(
            auth, wanted,
            "agent {owner}'s request went out with another credential"
        );
        if body.contains("round 10000") {
            history_kept.insert(owner.to_string(), body.contains(" round 0\""));
        }
        *by_agent.entry(owner.to_string()).or_default() += 1;
        checked += 1;
    }
    for name in names {
        assert_eq!(
            history_kept.get(name),
            Some(&true),
            "agent {name}'s last turn carries its first message (its thread went on)"
        );
    }
    let report: Value = json!({
        "seconds": secs,
        "seed": seed,
        "turns": counts.turns.load(Ordering::SeqCst),
        "completed": counts.completed.load(Ordering::SeqCst),
        "failedWithTheirMember": counts.failed_with_member.load(Ordering::SeqCst),
        "refusedThenRetried": counts.refused.load(Ordering::SeqCst),
        "reconnects": counts.reconnects.load(Ordering::SeqCst),
        "kills": counts.kills.load(Ordering::SeqCst),
        "mostCodexProcesses": most_processes,
        "modelRequestsChecked": checked,
        "byAgent": by_agent,
    });
    eprintln!("SOAK: {report}");
    accounts.endpoint.stop().await;
}

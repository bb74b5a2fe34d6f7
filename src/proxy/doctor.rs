//! `clawbridge doctor --endpoint URL`: the checks of a running `app-server --listen` endpoint,
//! added to the machine's ([`crate::app::doctor`]). Each finding says what to do.
//!
//! The endpoint is asked the way `app-server status` asks it (`GET /status` with the token from
//! the same place the endpoint keeps it), so a doctor that passes means a client with that token
//! gets in. Read-only, bounded in time and size like the status read.

use std::path::PathBuf;

use crate::app::doctor::{finding, Finding, Level};
use crate::codex::client::pool::MemberState;
use crate::proxy::endpoint::{self, EndpointStatus, ListenAddr, StatusFailure};

/// The running endpoint's findings: whether it answers and takes the token ("endpoint"), its
/// app-servers ("endpoint members") and its turns ("endpoint turns").
pub async fn endpoint_findings(
    url: &str,
    token_file: Option<&PathBuf>,
    state_dir: Option<&PathBuf>,
) -> Vec<Finding> {
    let fail = |detail: String, fix: &str| vec![finding("endpoint", Level::Fail, detail, fix)];
    let listen = match ListenAddr::parse(url) {
        Ok(listen) => listen,
        Err(message) => {
            return fail(
                format!("{url}: {message}"),
                "give the address the endpoint prints: ws://IP:PORT or unix://PATH",
            )
        }
    };
    let path = match super::token_path(token_file, state_dir) {
        Ok(path) => path,
        Err(error) => return fail(error.to_string(), "pass --token-file FILE"),
    };
    let token = match crate::service::token::read_existing(&path) {
        Ok(token) => token,
        Err(error) => {
            return fail(
                format!("no token to knock with at {}: {error}", path.display()),
                "pass the endpoint's --token-file (or the --state-dir it was started with)",
            )
        }
    };
    let document = match endpoint::read_status(&listen, &token).await {
        Ok(document) => document,
        Err(StatusFailure::Unreachable(reason)) => {
            return fail(
                format!("nothing answers at {listen} ({reason})"),
                &format!("start it: clawbridge app-server --listen {listen} (docs/app-server.md)"),
            )
        }
        Err(StatusFailure::Http { status: 401, .. }) => {
            return fail(
                format!("{listen} refused the token in {} (401)", path.display()),
                "use the token file the endpoint was started with (--token-file, --state-dir)",
            )
        }
        Err(failure @ StatusFailure::Http { .. }) => {
            return fail(
                format!("{listen} answered {failure}"),
                "is it a clawbridge app-server endpoint? (`clawbridge app-server status`)",
            )
        }
        Err(StatusFailure::Invalid(reason)) => {
            return fail(
                format!("{listen}: {reason}"),
                "is it a clawbridge app-server endpoint of this version?",
            )
        }
    };
    let status: EndpointStatus = match serde_json::from_value(document) {
        Ok(status) => status,
        Err(error) => {
            return fail(
                format!("{listen}: a status this doctor cannot read ({error})"),
                "run the doctor of the endpoint's own version",
            )
        }
    };
    let mut findings = vec![finding(
        "endpoint",
        Level::Ok,
        format!(
            "{listen} answers with the token in {}: {} client connection(s), {} thread(s) known",
            path.display(),
            status.connections.len(),
            status.known_threads
        ),
        "",
    )];
    findings.push(members(&status));
    findings.push(turns(&status));
    findings
}

/// Dead members fail, restarting ones warn (with the reason each gave); otherwise a count.
fn members(status: &EndpointStatus) -> Finding {
    let mut dead = Vec::new();
    let mut restarting = Vec::new();
    let mut counts = std::collections::BTreeMap::<&str, usize>::new();
    for member in &status.members {
        let state = match member.state {
            MemberState::Idle => "idle",
            MemberState::Starting => "starting",
            MemberState::Ready => "ready",
            MemberState::Draining => "draining",
            MemberState::Restarting => "restarting",
            MemberState::Dead => "dead",
        };
        *counts.entry(state).or_default() += 1;
        let said = format!(
            "{} ({})",
            member.name,
            member.error.as_deref().unwrap_or("no reason given")
        );
        match member.state {
            MemberState::Dead => dead.push(said),
            MemberState::Restarting => restarting.push(said),
            _ => {}
        }
    }
    let tally = counts
        .iter()
        .map(|(state, count)| format!("{count} {state}"))
        .collect::<Vec<_>>()
        .join(", ");
    let tally = if tally.is_empty() {
        "none started yet".to_string()
    } else {
        tally
    };
    if !dead.is_empty() {
        finding(
            "endpoint members",
            Level::Fail,
            format!("{tally}; dead: {}", dead.join("; ")),
            "fix what the reason names (Codex binary, CODEX_HOME, login); a dead member is \
             tried again after the longest backoff",
        )
    } else if !restarting.is_empty() {
        finding(
            "endpoint members",
            Level::Warn,
            format!("{tally}; restarting: {}", restarting.join("; ")),
            "it restarts by itself; if it keeps crashing, read its reason in the endpoint's log",
        )
    } else {
        finding("endpoint members", Level::Ok, tally, "")
    }
}

/// Turns that stall now, or that filled the context window after compacting, warn by thread.
fn turns(status: &EndpointStatus) -> Finding {
    let mut stalled = Vec::new();
    let mut alarms = Vec::new();
    for thread in status.connections.iter().flat_map(|c| &c.threads) {
        if let Some(stall) = thread.stall.as_ref().filter(|stall| !stall.recovered) {
            stalled.push(format!(
                "{} {} for {} s",
                thread.id,
                stall.kind.as_str(),
                stall.quiet_secs
            ));
        }
        if thread.context_alarm {
            alarms.push(thread.id.clone());
        }
    }
    stalled.sort();
    stalled.dedup();
    alarms.sort();
    alarms.dedup();
    let mut problems = Vec::new();
    if !stalled.is_empty() {
        problems.push(format!("stalled: {}", stalled.join("; ")));
    }
    if !alarms.is_empty() {
        problems.push(format!(
            "context window full after compacting: {}",
            alarms.join(", ")
        ));
    }
    if problems.is_empty() {
        finding(
            "endpoint turns",
            Level::Ok,
            format!(
                "no turn stalled now ({} stall(s) and {} recovered turn(s) since the start)",
                status.stalls.values().sum::<usize>(),
                status.recovered_turns
            ),
            "",
        )
    } else {
        finding(
            "endpoint turns",
            Level::Warn,
            problems.join("; "),
            "`clawbridge app-server status` shows each thread (docs/app-server.md, \"Stalled turns\")",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(members: serde_json::Value, threads: serde_json::Value) -> EndpointStatus {
        serde_json::from_value(serde_json::json!({
            "listen": "ws://127.0.0.1:1",
            "connections": [{
                "number": 1, "identity": "native", "threads": threads,
                "requestsInFlight": 0, "waitingAnswers": 0
            }],
            "knownThreads": 1,
            "members": members,
            "identities": [],
            "stalls": {"silentAfterStart": 1},
            "recoveredTurns": 0,
            "contextAlarms": 0
        }))
        .expect("a status document")
    }

    fn member(name: &str, state: &str, error: Option<&str>) -> serde_json::Value {
        serde_json::json!({
            "name": name, "kind": "local", "state": state, "generation": 1,
            "activeThreads": 0, "loadedThreads": 0, "pendingRequests": 0, "threadsOpened": 0,
            "restarts": 0, "recycled": 0, "recentCrashes": 3, "error": error
        })
    }

    /// Protection: a dead member fails with its reason, a restarting one warns, a stalled turn
    /// and a full context window warn by thread.
    #[test]
    fn dead_members_fail_and_stalled_turns_warn() {
        let healthy = status(
            serde_json::json!([member("local-1", "ready", None)]),
            serde_json::json!([]),
        );
        assert_eq!(members(&healthy).level, Level::Ok);
        assert_eq!(turns(&healthy).level, Level::Ok);
        let sick = status(
            serde_json::json!([
                member("local-1", "dead", Some("codex exited: bad login")),
                member("local-2", "restarting", None)
            ]),
            serde_json::json!([{
                "id": "thr_1", "member": "local-1", "turn": "turn_1", "followers": 1,
                "stall": {"kind": "silentAfterStart", "quietSecs": 300, "recovered": false},
                "compactions": 2, "contextAlarm": true
            }]),
        );
        let dead = members(&sick);
        assert_eq!(dead.level, Level::Fail);
        assert!(
            dead.detail.contains("codex exited: bad login"),
            "{}",
            dead.detail
        );
        assert!(
            dead.detail.contains("1 dead, 1 restarting"),
            "{}",
            dead.detail
        );
        let stalled = turns(&sick);
        assert_eq!(stalled.level, Level::Warn);
        assert!(
            stalled.detail.contains("thr_1 silentAfterStart for 300 s"),
            "{}",
            stalled.detail
        );
        assert!(
            stalled.detail.contains("context window full"),
            "{}",
            stalled.detail
        );
    }
}

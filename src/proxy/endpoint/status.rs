//! What `GET /status` answers, and `clawbridge app-server status` reading it.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};

use super::{EndpointError, ListenAddr, MAX_STATUS_BYTES};
use crate::codex::client::pool::MemberStatus;
use crate::proxy::stall::StallStatus;

/// What `GET /status` answers (and `clawbridge app-server status` prints).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointStatus {
    pub listen: String,
    pub connections: Vec<ConnectionStatus>,
    /// Threads the endpoint knows the member of (for a resume from any connection).
    pub known_threads: usize,
    /// Every member of every identity.
    pub members: Vec<MemberStatus>,
    /// Each identity (`native`, or a login's kind and credential fingerprint) with its
    /// members and how many threads it owns.
    pub identities: Vec<IdentityStatus>,
    /// Stalled turns seen since the start, by kind (`missingTurnCompleted`,
    /// `silentAfterStart`, `noFollowUpAfterTool`).
    pub stalls: BTreeMap<String, usize>,
    /// Turns completed for their clients after a missing `turn/completed` (`--completion-grace`).
    pub recovered_turns: usize,
    /// Turns that compacted twice or more and still filled the model's context window.
    pub context_alarms: usize,
    /// Local app-servers holding a place (running, starting, draining or being stopped), of
    /// `--app-servers`: never more, at any moment.
    #[serde(default)]
    pub app_servers: PlacesStatus,
    /// The accounts' Codex homes: kept at the last sweep, removed since the start.
    #[serde(default)]
    pub account_homes: HomesStatus,
    /// Where the fleet's state (thread owners, budgets, the pinned `initialize` answer) is
    /// kept across restarts.
    #[serde(default)]
    pub state: String,
    /// What clients may ask: the sandbox ceiling, the workspace roots, how the app-servers are
    /// kept apart.
    #[serde(default)]
    pub policy: PolicyStatus,
    /// The named clients and what each was granted past its own threads.
    #[serde(default)]
    pub clients: Vec<ClientStatus>,
    /// With a store several endpoints share: this endpoint's id, the leases it holds, and the
    /// endpoints of the fleet that hold a live lease.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leases: Option<LeasesStatus>,
}

/// The leases of a shared store in [`EndpointStatus`].
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeasesStatus {
    /// This endpoint's id (host, pid, a random part).
    pub endpoint: String,
    /// Its state dir's id: the threads of its local members are filed under it, and only an
    /// endpoint on that state dir serves them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_dir: Option<String>,
    pub ttl_seconds: u64,
    /// The threads this endpoint holds, with their epochs.
    pub held: Vec<HeldLease>,
    /// Every endpoint holding a live lease, with how many (this one included).
    pub fleet: BTreeMap<String, usize>,
    /// The fleet's live leases, each thread's holder and epoch (at most
    /// [`SHOWN_FLEET_LEASES`], those ending soonest first).
    #[serde(default)]
    pub threads: Vec<FleetLease>,
}

/// The fleet's leases `app-server status` lists at most.
pub const SHOWN_FLEET_LEASES: usize = 200;

/// One live lease of the fleet in [`LeasesStatus`].
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetLease {
    pub thread: String,
    pub holder: String,
    pub epoch: u64,
    /// Seconds left (rounded up).
    pub seconds_left: u64,
}

/// One lease in [`LeasesStatus`].
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeldLease {
    pub thread: String,
    pub epoch: u64,
}

/// Places for local app-servers in [`EndpointStatus`].
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacesStatus {
    pub held: usize,
    pub bound: usize,
}

/// The account homes in [`EndpointStatus`] (`--home-retention-days`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HomesStatus {
    /// Homes kept at the last sweep (in use, used within the retention, or holding threads).
    pub kept: usize,
    /// Homes removed since the endpoint started.
    pub removed: usize,
    /// The retention in days; `None`: every home is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_days: Option<u64>,
}

/// The endpoint's policy in [`EndpointStatus`].
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyStatus {
    /// `--max-sandbox`.
    pub max_sandbox: String,
    /// `--workspace-root`s (named clients keep to them).
    pub workspace_roots: Vec<String>,
    /// How each account's app-servers are kept from the others' (`private view`), or why
    /// they are not.
    pub isolation: String,
}

/// A named client in [`EndpointStatus`].
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientStatus {
    pub name: String,
    pub operator: bool,
    /// What it may do past its own threads (`fs`, `exec`, ...).
    pub allow: Vec<String>,
}

/// One identity in [`EndpointStatus`].
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IdentityStatus {
    pub identity: String,
    /// The name the operator gave it (`clawbridge account add`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Connections running as it now.
    pub connections: usize,
    /// Threads it opened that the endpoint remembers.
    pub threads: usize,
    pub members: Vec<MemberStatus>,
    /// Codex's latest `account/rateLimits/updated` for the account (its params).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_limits: Option<Box<serde_json::value::RawValue>>,
    /// Tokens it used today (UTC), as Codex reported them (what `--budget-tokens` counts).
    pub tokens_today: u64,
}

/// One client connection in [`EndpointStatus`].
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionStatus {
    /// The connection's number (its transcript folder is `connection-N`).
    pub number: usize,
    /// Who its requests run as: `native`, or its login's fingerprint (a named account's: the
    /// one it is filed under).
    pub identity: String,
    /// The named account it runs as, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    /// The client its token names (`operator`, or a named client).
    #[serde(default)]
    pub caller: String,
    /// `clientInfo` of its `initialize` (`name version`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    pub threads: Vec<ThreadStatus>,
    pub requests_in_flight: usize,
    pub waiting_answers: usize,
}

/// One thread a connection follows.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadStatus {
    pub id: String,
    pub member: String,
    /// The thread's workspace as the client named it (its `cwd`, as Codex answered its start or
    /// resume).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// The OpenClaw agent the workspace is, when OpenClaw's layout names it (a configured
    /// agent's workspace is `workspace-<agent>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The running turn, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn: Option<String>,
    /// Connections that follow the thread (this one included).
    pub followers: usize,
    /// The running turn's stall, if it has gone quiet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stall: Option<StallStatus>,
    /// Codex's latest `thread/tokenUsage/updated` for the thread (its params: the last turn's
    /// and the thread's total tokens, and the model's context window).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_usage: Option<Box<serde_json::value::RawValue>>,
    /// `thread/compacted` in the running (or last) turn.
    pub compactions: u64,
    /// That turn compacted twice or more and the input still filled the model's context window
    /// (what compaction should have prevented: the thread needs a person).
    pub context_alarm: bool,
}

pub use crate::traffic::trace::agent_of_workspace;

/// `clawbridge app-server status`: a running endpoint's [`EndpointStatus`] document, read with
/// `GET /status` and the token (over TCP or the Unix socket); bounded in time and size.
pub async fn fetch_status(listen: &ListenAddr, token: &str) -> Result<Value, EndpointError> {
    read_status(listen, token)
        .await
        .map_err(|failure| EndpointError::Status(format!("{listen}: {failure}")))
}

/// Why a running endpoint's status could not be read (`doctor --endpoint` says what to do
/// about each).
#[derive(Debug, thiserror::Error)]
pub enum StatusFailure {
    /// Nothing answered: refused, no socket, or no answer in time.
    #[error("{0}")]
    Unreachable(String),
    /// It answered with another HTTP status than 200.
    #[error("HTTP {status}: {body}")]
    Http { status: u16, body: String },
    /// It answered something that is not a status document.
    #[error("{0}")]
    Invalid(String),
}

/// [`fetch_status`], its failure typed.
pub async fn read_status(listen: &ListenAddr, token: &str) -> Result<Value, StatusFailure> {
    let host = match listen {
        ListenAddr::Tcp(addr) => addr.to_string(),
        ListenAddr::Unix(_) => "localhost".to_string(),
    };
    let request = format!(
        "GET /status HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    let exchange = async {
        match listen {
            ListenAddr::Tcp(addr) => {
                let stream = tokio::net::TcpStream::connect(addr).await?;
                http_exchange(stream, &request).await
            }
            ListenAddr::Unix(path) => {
                let stream = tokio::net::UnixStream::connect(path).await?;
                http_exchange(stream, &request).await
            }
        }
    };
    let answer = tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .map_err(|_| StatusFailure::Unreachable("no answer within 10 s".into()))?
        .map_err(|error| StatusFailure::Unreachable(error.to_string()))?;
    let text = String::from_utf8_lossy(&answer);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| StatusFailure::Invalid("not an HTTP answer".into()))?;
    let status = head.split_whitespace().nth(1).unwrap_or("");
    if status != "200" {
        return Err(StatusFailure::Http {
            status: status.parse().unwrap_or(0),
            body: body.chars().take(200).collect(),
        });
    }
    serde_json::from_str(body)
        .map_err(|error| StatusFailure::Invalid(format!("not a status document: {error}")))
}

pub(super) async fn http_exchange(
    mut stream: impl AsyncRead + AsyncWrite + Unpin,
    request: &str,
) -> std::io::Result<Vec<u8>> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream.write_all(request.as_bytes()).await?;
    let mut answer = Vec::new();
    (&mut stream)
        .take(MAX_STATUS_BYTES as u64)
        .read_to_end(&mut answer)
        .await?;
    Ok(answer)
}

/// `app-server status` for a person: the endpoint, its places and homes, then a table each of
/// accounts, connections (with their threads) and app-servers, and the stalls; every row
/// within 100 columns. Read from the JSON the endpoint answered (any field it lacks shows as
/// empty: an older endpoint reads too). Names are escaped (`support::text::printable`): a
/// client's name is the client's.
pub fn render_status_text(status: &Value) -> String {
    use std::fmt::Write as _;
    let text = |value: &Value| -> String {
        let raw = match value {
            Value::String(text) => text.clone(),
            Value::Null => String::new(),
            other => other.to_string(),
        };
        crate::support::text::printable(&raw).into_owned()
    };
    let cut = |value: String, width: usize| -> String {
        if value.chars().count() <= width {
            value
        } else {
            let kept: String = value.chars().take(width.saturating_sub(1)).collect();
            format!("{kept}~")
        }
    };
    let count = |value: &Value| value.as_u64().unwrap_or(0);
    let list = |value: &Value| value.as_array().cloned().unwrap_or_default();
    let mut out = String::new();
    let _ = writeln!(out, "endpoint   {}", text(&status["listen"]));
    let _ = writeln!(out, "state      {}", text(&status["state"]));
    if let Some(leases) = status.get("leases").filter(|leases| leases.is_object()) {
        let fleet: Vec<String> = leases["fleet"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(holder, held)| format!("{} ({})", cut(holder.clone(), 40), count(held)))
            .collect();
        let _ = writeln!(
            out,
            "leases     this endpoint {}{}: {} held ({} s each); the fleet's: {}",
            cut(text(&leases["endpoint"]), 40),
            leases["stateDir"]
                .as_str()
                .map(|dir| format!(" (state dir {})", cut(dir.to_string(), 40)))
                .unwrap_or_default(),
            list(&leases["held"]).len(),
            count(&leases["ttlSeconds"]),
            if fleet.is_empty() {
                "none".to_string()
            } else {
                fleet.join(", ")
            }
        );
        let threads = list(&leases["threads"]);
        for lease in threads.iter().take(20) {
            let _ = writeln!(
                out,
                "           thread {} held by {} (epoch {}, {} s left)",
                text(&lease["thread"]),
                cut(text(&lease["holder"]), 40),
                count(&lease["epoch"]),
                count(&lease["secondsLeft"])
            );
        }
        if threads.len() > 20 {
            let _ = writeln!(
                out,
                "           and {} more (--json lists them)",
                threads.len() - 20
            );
        }
    }
    let _ = writeln!(
        out,
        "places     {} of {} app-servers held",
        count(&status["appServers"]["held"]),
        count(&status["appServers"]["bound"])
    );
    let homes = &status["accountHomes"];
    let retention = match homes["retentionDays"].as_u64() {
        Some(days) => format!("removed after {days} days unused"),
        None => "kept for ever".to_string(),
    };
    let _ = writeln!(
        out,
        "homes      {} kept, {} removed ({retention})",
        count(&homes["kept"]),
        count(&homes["removed"])
    );
    let policy = &status["policy"];
    let roots: Vec<String> = list(&policy["workspaceRoots"]).iter().map(text).collect();
    let _ = writeln!(
        out,
        "policy     ceiling {}; roots {}",
        text(&policy["maxSandbox"]),
        if roots.is_empty() {
            "none".to_string()
        } else {
            roots.join(", ")
        }
    );
    let _ = writeln!(out, "isolation  {}", cut(text(&policy["isolation"]), 89));
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<14} {:<34} {:>5} {:>7} {:>12} {:>5}",
        "NAME", "ACCOUNT", "CONNS", "THREADS", "TOKENS TODAY", "APPS"
    );
    for identity in list(&status["identities"]) {
        let name = match text(&identity["name"]) {
            name if name.is_empty() => "-".to_string(),
            name => name,
        };
        let _ = writeln!(
            out,
            "{:<14} {:<34} {:>5} {:>7} {:>12} {:>5}",
            cut(name, 14),
            cut(text(&identity["identity"]), 34),
            count(&identity["connections"]),
            count(&identity["threads"]),
            count(&identity["tokensToday"]),
            list(&identity["members"]).len()
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<5} {:<22} {:<14} {:<26} {:>7} {:>6}",
        "CONN", "CLIENT", "CALLER", "ACCOUNT", "THREADS", "FLIGHT"
    );
    let connections = list(&status["connections"]);
    for connection in &connections {
        let threads = list(&connection["threads"]);
        let _ = writeln!(
            out,
            "{:<5} {:<22} {:<14} {:<26} {:>7} {:>6}",
            count(&connection["number"]),
            cut(text(&connection["client"]), 22),
            cut(text(&connection["caller"]), 14),
            cut(
                match text(&connection["account"]) {
                    account if account.is_empty() => text(&connection["identity"]),
                    account => account,
                },
                26
            ),
            threads.len(),
            count(&connection["requestsInFlight"])
        );
        for thread in threads {
            let turn = match text(&thread["turn"]) {
                turn if turn.is_empty() => "idle".to_string(),
                turn => format!("turn {turn}"),
            };
            let stall = match text(&thread["stall"]["kind"]) {
                kind if kind.is_empty() => String::new(),
                kind => format!(", stalled: {kind}"),
            };
            let alarm = if thread["contextAlarm"] == true {
                ", context full after compacting"
            } else {
                ""
            };
            let agent = match text(&thread["agent"]) {
                agent if agent.is_empty() => String::new(),
                agent => format!(" agent {agent},"),
            };
            let line = format!(
                "      {} on {}:{agent} {turn}{stall}{alarm}",
                text(&thread["id"]),
                text(&thread["member"])
            );
            let _ = writeln!(out, "{}", cut(line, 100));
        }
    }
    if connections.is_empty() {
        let _ = writeln!(out, "(no connection)");
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<36} {:<10} {:>8} {:>7} {:>8} {:>7}",
        "APP-SERVER", "STATE", "PID", "THREADS", "RESTARTS", "WAITING"
    );
    for member in list(&status["members"]) {
        let _ = writeln!(
            out,
            "{:<36} {:<10} {:>8} {:>7} {:>8} {:>7}",
            cut(text(&member["name"]), 36),
            cut(text(&member["state"]), 10),
            text(&member["pid"]),
            count(&member["threadsOpened"]),
            count(&member["restarts"]),
            count(&member["waitingRequests"])
        );
        if let Some(error) = member["error"].as_str() {
            let _ = writeln!(
                out,
                "{}",
                cut(format!("      {}", text(&Value::from(error))), 100)
            );
        }
    }
    let stalls: Vec<String> = status["stalls"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(kind, seen)| format!("{kind} {}", count(seen)))
        .collect();
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "stalls     {}; recovered turns {}; context alarms {}",
        if stalls.is_empty() {
            "none".to_string()
        } else {
            stalls.join(", ")
        },
        count(&status["recoveredTurns"]),
        count(&status["contextAlarms"])
    );
    out
}

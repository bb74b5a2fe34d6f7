//! A pool of Codex app-servers, local children and remote listeners, that a service runs its
//! threads on.
//!
//! Codex lets one app-server write a thread at a time, so a thread stays on one member (sticky
//! affinity: the caller records the member's name with the session's binding and asks for it
//! again); a new thread goes to the member with the fewest active turns (then the fewest loaded
//! threads, so threads spread). Local members share one `CODEX_HOME`, so a thread of a member
//! that is no longer configured can resume on another local one; a remote member's threads live
//! on its host only.
//!
//! Faults: each member's current app-server has a watcher. When it goes away (exit, kill, a
//! dropped connection) the member is restarted (local) or reconnected (remote) after a backoff
//! that doubles with each crash in the window (`backoff_first` up to `backoff_max`); the runs on
//! it end on their own (their routes close) and their sessions' next runs resume their threads
//! on the new app-server. Each start is a new generation: a run keeps the app-server it was
//! leased ([`Lease::hub`]), so nothing of one incarnation (notifications, server requests,
//! interrupts) ever reaches a run of another. A member that crashes `crash_limit` times within
//! `crash_window` is marked dead: its threads move to another member only when a run asks for a
//! new thread, never silently. Failed starts count as crashes.
//!
//! Recycling (a member past its thread or memory budget) is not a crash: the app-server drains
//! (no new runs; stopped when its last run ends) and the member's next run starts a fresh one.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::hub::CodexHub;
use super::peer::PeerConfig;
use super::process::SpawnOptions;
use super::remote::{self, RemoteEndpoint};
use super::session::CodexSession;
use clawbridge_support::sync::lock;

/// Threads an app-server opens before it is recycled (Codex keeps about 1.1 MB per thread).
pub const DEFAULT_RECYCLE_AFTER_THREADS: usize = 500;
/// Resident memory past which an app-server is recycled.
pub const DEFAULT_RECYCLE_RSS_MB: u64 = 1024;

/// How the pool starts its members and when it gives up on one.
#[derive(Clone, Debug)]
pub struct PoolConfig {
    /// Local `codex app-server` children.
    pub locals: usize,
    /// Remote app-servers (Codex's WebSocket listener with a capability token).
    pub remotes: Vec<RemoteEndpoint>,
    /// The local Codex CLI, or why there is none (local members then fail to start with it).
    pub binary: Result<PathBuf, String>,
    pub codex_home: PathBuf,
    pub isolate_environment: bool,
    /// `-c key=value` overrides for local members.
    pub config_overrides: Vec<String>,
    pub peer: PeerConfig,
    pub handshake_timeout: Duration,
    /// The wait before the first restart after a crash; doubled per crash in the window.
    pub backoff_first: Duration,
    pub backoff_max: Duration,
    /// This many crashes within `crash_window` mark a member dead.
    pub crash_limit: usize,
    pub crash_window: Duration,
    /// Recycle an app-server once it opened this many threads or grew past this many bytes.
    pub recycle_after_threads: usize,
    pub recycle_rss_bytes: u64,
    /// Appended to every local member's name (`local-0@apiKey-1a2b…`): a pool of one
    /// identity names its members apart from another's.
    pub member_suffix: String,
    /// Told each time a member that went away is up again (for the trace's restart spans).
    pub on_restart: Option<RestartHook>,
    /// A service's members keep only these of its environment variables besides the default
    /// list (`process::MEMBER_ENVIRONMENT`); `None` keeps every variable.
    pub environment: Option<Vec<String>>,
    /// A service's members run in a private view of the machine (`support::jail`).
    pub jail: Option<clawbridge_support::jail::Jail>,
    /// Without a jail, members start under this helper's reaper (`support::reaper`).
    pub reaper: Option<PathBuf>,
    /// Shared by the pools of several accounts (the endpoint's fleet): a local app-server holds
    /// one place from before its process starts until it is reaped, so the bound holds at every
    /// moment, a restart after a crash, a recycled one draining and one being stopped counted.
    /// A member that finds no place starts on its next run.
    pub process_slots: Option<Arc<tokio::sync::Semaphore>>,
}

/// What the pool tells its [`PoolConfig::on_restart`] hook: the member, why it went away, and
/// since when it was down.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restart {
    pub member: String,
    pub reason: String,
    pub down_since: std::time::SystemTime,
}

/// A callback for [`Restart`]s (called outside the pool's locks; it must not block).
#[derive(Clone)]
pub struct RestartHook(pub Arc<dyn Fn(Restart) + Send + Sync>);

impl std::fmt::Debug for RestartHook {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("RestartHook")
    }
}

impl PoolConfig {
    pub const DEFAULT_BACKOFF_FIRST: Duration = Duration::from_millis(250);
    pub const DEFAULT_BACKOFF_MAX: Duration = Duration::from_secs(30);
    pub const DEFAULT_CRASH_LIMIT: usize = 5;
    pub const DEFAULT_CRASH_WINDOW: Duration = Duration::from_secs(60);

    /// One local member of `binary` over `codex_home`, every other setting at its default;
    /// callers change fields with struct update syntax.
    pub fn new(binary: Result<PathBuf, String>, codex_home: PathBuf) -> Self {
        PoolConfig {
            locals: 1,
            remotes: Vec::new(),
            binary,
            codex_home,
            isolate_environment: false,
            config_overrides: Vec::new(),
            peer: PeerConfig::default(),
            handshake_timeout: Duration::from_secs(20),
            backoff_first: Self::DEFAULT_BACKOFF_FIRST,
            backoff_max: Self::DEFAULT_BACKOFF_MAX,
            crash_limit: Self::DEFAULT_CRASH_LIMIT,
            crash_window: Self::DEFAULT_CRASH_WINDOW,
            recycle_after_threads: DEFAULT_RECYCLE_AFTER_THREADS,
            recycle_rss_bytes: DEFAULT_RECYCLE_RSS_MB * 1024 * 1024,
            member_suffix: String::new(),
            on_restart: None,
            environment: None,
            jail: None,
            reaper: None,
            process_slots: None,
        }
    }
}

/// How a member's app-server is reached: the one seam the pool asks (it never matches on the
/// kinds itself). A child is started over the pool's Codex home and holds one of the
/// machine's app-server places; a socket member (`ws://`, `wss://`, `unix://`, see
/// [`remote`]) is someone else's process, reached again when it goes away.
#[derive(Clone, Debug)]
enum MemberKind {
    Local,
    Remote(RemoteEndpoint),
}

impl MemberKind {
    /// A child of this process over the pool's Codex home (members of that kind share it, so
    /// any of them resumes another's thread, and each holds an app-server place).
    fn is_child(&self) -> bool {
        matches!(self, MemberKind::Local)
    }

    /// The status's word for it.
    fn label(&self) -> &'static str {
        match self {
            MemberKind::Local => "local",
            MemberKind::Remote(_) => "remote",
        }
    }

    /// Start the child or connect to the socket, and hand over the handshake.
    async fn open(
        &self,
        config: &PoolConfig,
        cwd: &Path,
    ) -> Result<(Arc<CodexHub>, Option<TaskTracker>), String> {
        match self {
            MemberKind::Local => {
                let binary = config.binary.clone()?;
                let options = SpawnOptions {
                    binary,
                    codex_home: config.codex_home.clone(),
                    cwd: cwd.to_path_buf(),
                    isolate_environment: config.isolate_environment,
                    config_overrides: config.config_overrides.clone(),
                    environment: config.environment.clone(),
                    jail: config.jail.clone(),
                    reaper: config.reaper.clone(),
                };
                let hub = CodexHub::spawn(&options, config.peer.clone(), config.handshake_timeout)
                    .await
                    .map_err(|error| error.to_string())?;
                Ok((hub, None))
            }
            MemberKind::Remote(endpoint) => {
                let connection = remote::connect(endpoint, config.handshake_timeout)
                    .await
                    .map_err(|error| error.to_string())?;
                let carriers = connection.tasks.clone();
                let handshake = CodexSession::connect(
                    connection.reader,
                    connection.writer,
                    config.peer.clone(),
                    true,
                );
                let session = match tokio::time::timeout(config.handshake_timeout, handshake).await
                {
                    Ok(Ok(session)) => session,
                    Ok(Err(error)) => return Err(format!("{}: {error}", endpoint.url)),
                    Err(_) => {
                        return Err(format!(
                            "{}: no answer to `initialize` within {:?}",
                            endpoint.url, config.handshake_timeout
                        ))
                    }
                };
                Ok((CodexHub::from_session(session), Some(carriers)))
            }
        }
    }
}

/// A member's state, as `bridge.status` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum MemberState {
    /// Not started yet (members start when a run first needs them).
    Idle,
    Starting,
    Ready,
    /// Recycled: its app-server takes no new runs and stops when its last run ends.
    Draining,
    /// Its app-server went away; it restarts after the backoff.
    Restarting,
    /// Crashed too often: no new runs (a run may ask for a new thread on another member); tried
    /// again after the longest backoff, it is back once a start succeeds.
    Dead,
}

/// One member as `bridge.status` lists it.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemberStatus {
    /// `local-N`, or the remote's `ws://` address.
    pub name: String,
    /// `local` or `remote`.
    pub kind: String,
    pub state: MemberState,
    /// The running app-server's process id (local members).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Starts so far; each is a new incarnation.
    pub generation: u64,
    pub active_threads: usize,
    pub loaded_threads: usize,
    pub pending_requests: usize,
    /// Client requests of the WebSocket endpoint waiting for a place among the member's
    /// requests in flight (at most `MEMBER_IN_FLIGHT`; served connection by connection).
    #[serde(default)]
    pub waiting_requests: usize,
    /// Threads the running app-server opened so far.
    pub threads_opened: usize,
    /// Starts after the first (after crashes and recycling).
    pub restarts: usize,
    pub recycled: usize,
    /// Crashes within the crash window.
    pub recent_crashes: usize,
    /// The running app-server's resident memory (local members, Linux).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_bytes: Option<u64>,
    /// Codex's latest `account/rateLimits/updated` on this app-server (its params).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limits: Option<serde_json::Value>,
    /// Why the last start or the last app-server failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Why the pool cannot give a run an app-server.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    #[error("app-server {member} could not be started: {reason}")]
    Unavailable { member: String, reason: String },
    #[error(
        "app-server {member} is marked dead after {crashes} crashes within {window:?}; its threads move only to a new thread (bridge.runStart with newThread: true)"
    )]
    Dead {
        member: String,
        crashes: usize,
        window: Duration,
    },
    #[error("app-server {member} is no longer configured; its threads live there (bridge.runStart with newThread: true starts a new one)")]
    Gone { member: String },
    #[error("every app-server of the pool is marked dead")]
    AllDead,
    #[error("the pool is shutting down")]
    ShuttingDown,
    #[error("app-server {member}: every app-server place is taken (--app-servers)")]
    NoRoom { member: String },
}

/// An app-server a run was given: the member, the incarnation, and the hub itself. The run
/// keeps the hub for as long as it runs, so it never talks to a later incarnation. While any
/// clone of it lives, it counts as one run on its member (placement reads that count).
#[derive(Clone)]
pub struct Lease {
    pub member: usize,
    pub name: String,
    /// A child of this process (over a Codex home in the state dir), not a remote member.
    pub local: bool,
    pub generation: u64,
    pub hub: Arc<CodexHub>,
    _counted: Arc<Counted>,
}

/// One run counted on a member, uncounted when the last clone of its lease goes.
struct Counted(Arc<std::sync::atomic::AtomicUsize>);

impl Counted {
    fn new(count: &Arc<std::sync::atomic::AtomicUsize>) -> Self {
        count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Counted(Arc::clone(count))
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

struct Slot {
    hub: Option<Arc<CodexHub>>,
    /// The remote connection's frame carriers, with their hub.
    carriers: Option<TaskTracker>,
    generation: u64,
    state: MemberState,
    crashes: VecDeque<Instant>,
    starts: usize,
    recycled: usize,
    not_before: Option<Instant>,
    error: Option<String>,
    /// The folder the member's local app-server starts in (the first run's).
    cwd: Option<PathBuf>,
    /// A task is trying the dead member again.
    reviving: bool,
    /// Why the current app-server was ended as unhealthy (its watcher files it as the crash).
    unhealthy: Option<String>,
    /// Since when the member has been down, and why (from its first crash until it is back).
    down: Option<(std::time::SystemTime, String)>,
}

impl Slot {
    /// Why `generation` went away, as its crash is filed: the health check it failed, if one
    /// ended it, else that it went away.
    fn why_gone(&mut self, generation: u64) -> String {
        self.unhealthy
            .take()
            .unwrap_or_else(|| format!("generation {generation} went away"))
    }
}

struct Member {
    index: usize,
    name: String,
    kind: MemberKind,
    slot: Mutex<Slot>,
    /// One start at a time per member (held across the handshake; only starters wait on it).
    starting: tokio::sync::Mutex<()>,
    /// Recycled app-servers still running their last runs.
    draining: Mutex<Vec<Arc<CodexHub>>>,
    /// Runs holding a lease on this member (from the moment it is given, before their thread
    /// is even open: runs that start together spread over the members).
    leased: Arc<std::sync::atomic::AtomicUsize>,
}

impl Member {
    fn live_hub(&self) -> Option<(Arc<CodexHub>, u64)> {
        let slot = lock(&self.slot);
        slot.hub
            .as_ref()
            .filter(|hub| hub.is_alive())
            .map(|hub| (Arc::clone(hub), slot.generation))
    }

    fn lease(&self, hub: Arc<CodexHub>, generation: u64, counted: Arc<Counted>) -> Lease {
        Lease {
            member: self.index,
            name: self.name.clone(),
            local: self.kind.is_child(),
            generation,
            hub,
            _counted: counted,
        }
    }

    /// Runs on this member now.
    fn runs(&self) -> usize {
        self.leased.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Note a crash now; the backoff before the next start, or `None` once the member is dead.
    fn note_crash(&self, slot: &mut Slot, config: &PoolConfig, error: String) -> Option<Duration> {
        let now = Instant::now();
        slot.crashes.push_back(now);
        while slot
            .crashes
            .front()
            .is_some_and(|at| now.duration_since(*at) > config.crash_window)
        {
            slot.crashes.pop_front();
        }
        if slot.down.is_none() {
            slot.down = Some((std::time::SystemTime::now(), error.clone()));
        }
        slot.error = Some(error);
        if slot.crashes.len() >= config.crash_limit.max(1) {
            // Tried again after the longest backoff (a remote listener that comes back, a
            // binary that is fixed): dead is not for ever.
            let was_dead = slot.state == MemberState::Dead;
            slot.state = MemberState::Dead;
            slot.not_before = Some(now + config.backoff_max);
            if !was_dead {
                tracing::error!(
                    "app-server {} crashed {} times within {:?}: marked dead (its sessions need a new thread); tried again every {:?}",
                    self.name,
                    slot.crashes.len(),
                    config.crash_window,
                    config.backoff_max
                );
            }
            return None;
        }
        let doublings = u32::try_from(slot.crashes.len().saturating_sub(1)).unwrap_or(u32::MAX);
        let backoff = config
            .backoff_first
            .saturating_mul(2u32.saturating_pow(doublings.min(16)))
            .min(config.backoff_max);
        slot.not_before = Some(now + backoff);
        slot.state = MemberState::Restarting;
        Some(backoff)
    }

    fn status(&self) -> MemberStatus {
        let slot = lock(&self.slot);
        let hub = slot.hub.as_ref().filter(|hub| hub.is_alive());
        let draining = lock(&self.draining);
        let active = hub.map_or(0, |hub| hub.active_threads())
            + draining
                .iter()
                .map(|old| old.active_threads())
                .sum::<usize>();
        MemberStatus {
            name: self.name.clone(),
            kind: self.kind.label().to_string(),
            state: slot.state,
            pid: hub.and_then(|hub| hub.pid),
            version: hub.and_then(|hub| hub.codex_version.clone()),
            generation: slot.generation,
            active_threads: active,
            loaded_threads: hub.map_or(0, |hub| hub.loaded_threads()),
            pending_requests: hub.map_or(0, |hub| hub.pending_requests()),
            waiting_requests: hub.map_or(0, |hub| hub.fair().load().1),
            threads_opened: hub.map_or(0, |hub| hub.threads_opened()),
            restarts: slot.starts.saturating_sub(1),
            recycled: slot.recycled,
            recent_crashes: slot.crashes.len(),
            rss_bytes: hub.and_then(|hub| hub.rss_bytes()),
            rate_limits: hub.and_then(|hub| hub.rate_limits()),
            error: slot.error.clone(),
        }
    }
}

/// Longest wait for the answer to the health probe of a new app-server.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// A new app-server must answer one request (a cheap one, `thread/loaded/list`) before it
/// takes work: one that answers `initialize` and then goes mute, or sends frames that are not
/// JSON-RPC, fails here instead of taking every new thread.
async fn probe(hub: &CodexHub, limit: Duration) -> Result<(), String> {
    use crate::protocol::methods::{Method as _, ThreadLoadedList, ThreadLoadedListParams};
    // Any answer will do: the list itself is not read.
    let asked = hub
        .peer()
        .request::<_, serde::de::IgnoredAny>(ThreadLoadedList::NAME, &ThreadLoadedListParams {});
    let limit = limit.min(PROBE_TIMEOUT);
    match tokio::time::timeout(limit, asked).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(error)) => Err(format!("unhealthy: the health probe failed: {error}")),
        Err(_) => Err(format!(
            "unhealthy: no answer to the health probe (thread/loaded/list) within {limit:?}"
        )),
    }
}

/// A dead member whose next try is not due yet (a due one may be started: a probe).
fn still_dead(slot: &Slot) -> bool {
    slot.state == MemberState::Dead && slot.not_before.is_none_or(|at| at > Instant::now())
}

/// The pool: its members, their watchers, and the policy above.
pub struct Pool {
    members: Vec<Arc<Member>>,
    /// Held while a run's member is chosen and counted (never across an await).
    choosing: Mutex<()>,
    config: PoolConfig,
    tasks: TaskTracker,
    cancel: CancellationToken,
}

impl Pool {
    pub fn new(config: PoolConfig) -> Arc<Pool> {
        let mut members = Vec::new();
        let kinds = (0..config.locals)
            .map(|index| {
                let name = format!("local-{index}{}", config.member_suffix);
                (name, MemberKind::Local)
            })
            .chain(
                config
                    .remotes
                    .iter()
                    .map(|remote| (remote.url.clone(), MemberKind::Remote(remote.clone()))),
            );
        for (index, (name, kind)) in kinds.enumerate() {
            members.push(Arc::new(Member {
                index,
                name,
                kind,
                slot: Mutex::new(Slot {
                    hub: None,
                    carriers: None,
                    generation: 0,
                    state: MemberState::Idle,
                    crashes: VecDeque::new(),
                    starts: 0,
                    recycled: 0,
                    not_before: None,
                    error: None,
                    cwd: None,
                    reviving: false,
                    unhealthy: None,
                    down: None,
                }),
                starting: tokio::sync::Mutex::new(()),
                draining: Mutex::new(Vec::new()),
                leased: Arc::default(),
            }));
        }
        Arc::new(Pool {
            members,
            choosing: Mutex::new(()),
            config,
            tasks: TaskTracker::new(),
            cancel: CancellationToken::new(),
        })
    }

    /// The members' running app-servers (none is started for it), by member name.
    pub fn live_hubs(&self) -> Vec<(String, Arc<CodexHub>)> {
        self.members
            .iter()
            .filter_map(|member| member.live_hub().map(|(hub, _)| (member.name.clone(), hub)))
            .collect()
    }

    /// Every member, as `bridge.status` lists them.
    pub fn status(&self) -> Vec<MemberStatus> {
        self.members.iter().map(|member| member.status()).collect()
    }

    /// An app-server for a run: the member named by the thread's affinity, else (a new thread,
    /// or no affinity recorded) the least busy member that is not dead. Starts or restarts the
    /// member when it has no live app-server (after its backoff).
    pub async fn lease(
        self: &Arc<Self>,
        affinity: Option<&str>,
        cwd: &Path,
    ) -> Result<Lease, PoolError> {
        self.lease_within(affinity, cwd, true).await
    }

    /// [`Pool::lease`], starting no app-server when `may_start` is false and a running one can
    /// take the run: a new thread then goes to the least busy running member, and a thread of a
    /// local member that is not running to another running local member (they share one
    /// Codex home). A caller that bounds the app-servers of several pools says so here.
    pub async fn lease_within(
        self: &Arc<Self>,
        affinity: Option<&str>,
        cwd: &Path,
        may_start: bool,
    ) -> Result<Lease, PoolError> {
        // Choose and count at once, so runs that start together see each other's choice.
        let choosing = lock(&self.choosing);
        let running = |member: &Arc<Member>| member.live_hub().is_some();
        let member = match affinity {
            Some(name) => match self.members.iter().find(|member| member.name == name) {
                Some(member) if !may_start && !running(member) && member.kind.is_child() => self
                    .least_busy_running(true)
                    .unwrap_or_else(|| Arc::clone(member)),
                Some(member) => Arc::clone(member),
                // Local members share one Codex home: another local member resumes the thread.
                None if name.starts_with("local-") => {
                    let member = self.least_busy(true).ok_or(PoolError::Gone {
                        member: name.to_string(),
                    })?;
                    tracing::warn!(
                        "app-server {name} is no longer configured; its thread resumes on {}",
                        member.name
                    );
                    member
                }
                None => {
                    return Err(PoolError::Gone {
                        member: name.to_string(),
                    })
                }
            },
            None if !may_start => match self.least_busy_running(false) {
                Some(member) => member,
                None => self.least_busy(false).ok_or(PoolError::AllDead)?,
            },
            None => self.least_busy(false).ok_or(PoolError::AllDead)?,
        };
        let counted = Arc::new(Counted::new(&member.leased));
        drop(choosing);
        let first = self.start(&member, cwd, counted).await;
        // A new thread is not bound to a member: when the chosen one cannot start, it goes to
        // another (the failed one is now chosen last), so one failing member costs no run.
        match first {
            Err(PoolError::Unavailable { .. } | PoolError::Dead { .. }) if affinity.is_none() => {
                let other = {
                    let _choosing = lock(&self.choosing);
                    let other = if may_start {
                        self.least_busy(false)
                    } else {
                        self.least_busy_running(false)
                            .or_else(|| self.least_busy(false))
                    };
                    other
                        .filter(|other| other.index != member.index)
                        .filter(|other| lock(&other.slot).state != MemberState::Restarting)
                        .map(|other| {
                            let counted = Arc::new(Counted::new(&other.leased));
                            (other, counted)
                        })
                };
                match other {
                    Some((other, counted)) => self.start(&other, cwd, counted).await,
                    None => first,
                }
            }
            first => first,
        }
    }

    /// The member with the fewest runs (leases given, so runs that start together spread),
    /// then the fewest loaded threads, then the fewest threads opened (so runs one after
    /// another spread too), then the lowest index; dead members never. Choosing
    /// counts the run at once (the returned lease-to-be is reserved by the caller's lease).
    fn least_busy(&self, local_only: bool) -> Option<Arc<Member>> {
        self.least_busy_of(local_only, false)
    }

    /// [`Pool::least_busy`] among the members with a running app-server.
    fn least_busy_running(&self, local_only: bool) -> Option<Arc<Member>> {
        self.least_busy_of(local_only, true)
    }

    fn least_busy_of(&self, local_only: bool, running_only: bool) -> Option<Arc<Member>> {
        self.members
            .iter()
            .filter(|member| !local_only || member.kind.is_child())
            // Remote members count against no bound of local ones: always eligible.
            .filter(|member| {
                !running_only || member.live_hub().is_some() || !member.kind.is_child()
            })
            .filter(|member| lock(&member.slot).state != MemberState::Dead)
            .min_by_key(|member| {
                let hub = member.live_hub().map(|(hub, _)| hub);
                // One that just failed (waiting for its restart or reconnection) last: a
                // member that stalls or sends garbage looks least busy, and must not take
                // every new thread while it is down.
                // Then one that failed within the crash window: a member that answers its
                // probe and goes mute again gets new threads only when nothing else can.
                let (failing, crashed) = {
                    let slot = lock(&member.slot);
                    (
                        slot.state == MemberState::Restarting,
                        !slot.crashes.is_empty(),
                    )
                };
                (
                    failing,
                    crashed,
                    member.runs(),
                    hub.as_ref().map_or(0, |hub| hub.loaded_threads()),
                    hub.as_ref().map_or(0, |hub| hub.threads_opened()),
                    member.index,
                )
            })
            .cloned()
    }

    /// A live app-server of `member` for a run already counted there (`counted`), starting
    /// one when there is none. Without a run to count (a watcher's restart), `counted` is a
    /// count of nobody's.
    async fn start(
        self: &Arc<Self>,
        member: &Arc<Member>,
        cwd: &Path,
        counted: Arc<Counted>,
    ) -> Result<Lease, PoolError> {
        let dead = |slot: &Slot| PoolError::Dead {
            member: member.name.clone(),
            crashes: slot.crashes.len(),
            window: self.config.crash_window,
        };
        {
            let slot = lock(&member.slot);
            if still_dead(&slot) {
                return Err(dead(&slot));
            }
        }
        if let Some((hub, generation)) = member.live_hub() {
            return Ok(member.lease(hub, generation, counted));
        }
        let _starting = member.starting.lock().await;
        let wait = {
            let mut slot = lock(&member.slot);
            if still_dead(&slot) {
                return Err(dead(&slot));
            }
            if let Some(hub) = slot.hub.as_ref().filter(|hub| hub.is_alive()) {
                return Ok(member.lease(Arc::clone(hub), slot.generation, counted));
            }
            // Gone before its watcher saw it: count the crash here (the watcher then finds
            // the slot already cleared and does nothing); its process is reaped, giving back
            // its place.
            if let Some(old) = slot.hub.take() {
                self.tasks.spawn(async move { old.kill().await });
                let generation = slot.generation;
                let why = slot.why_gone(generation);
                if member.note_crash(&mut slot, &self.config, why).is_none() {
                    let error = dead(&slot);
                    drop(slot);
                    self.revive(member);
                    return Err(error);
                }
            }
            slot.state = MemberState::Starting;
            slot.not_before
                .map(|at| at.saturating_duration_since(Instant::now()))
        };
        if let Some(wait) = wait.filter(|wait| !wait.is_zero()) {
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = self.cancel.cancelled() => return Err(PoolError::ShuttingDown),
            }
        }
        if self.cancel.is_cancelled() {
            return Err(PoolError::ShuttingDown);
        }
        // A place for its process, held until it is reaped: none free, the member waits for
        // its next run (not a crash).
        let place = match &self.config.process_slots {
            Some(slots) if member.kind.is_child() => match Arc::clone(slots).try_acquire_owned() {
                Ok(place) => Some(place),
                Err(_) => {
                    let mut slot = lock(&member.slot);
                    slot.state = MemberState::Idle;
                    return Err(PoolError::NoRoom {
                        member: member.name.clone(),
                    });
                }
            },
            _ => None,
        };
        // Kept from the first attempt: a member tried again in the background starts there too.
        let cwd = lock(&member.slot)
            .cwd
            .get_or_insert_with(|| cwd.to_path_buf())
            .clone();
        // Opened in a task of its own that holds the place: a start whose caller goes away
        // half-way (a dropped connection, a timeout) still ends with its process serving or
        // reaped, never dropped alive with its place already given back.
        let opening = {
            let pool = Arc::clone(self);
            let member = Arc::clone(member);
            let cwd = cwd.clone();
            self.tasks.spawn(async move {
                let (hub, carriers) = member.kind.open(&pool.config, &cwd).await?;
                if let Some(place) = place {
                    hub.hold_place(place);
                }
                match probe(&hub, pool.config.handshake_timeout).await {
                    Ok(()) => Ok((hub, carriers)),
                    Err(why) => {
                        hub.kill().await;
                        Err(why)
                    }
                }
            })
        };
        let connected = match opening.await {
            Ok(connected) => connected,
            Err(error) => Err(format!("starting the app-server: {error}")),
        };
        match connected {
            Ok((hub, carriers)) => {
                let (generation, was_down) = {
                    let mut slot = lock(&member.slot);
                    slot.generation += 1;
                    slot.starts += 1;
                    slot.hub = Some(Arc::clone(&hub));
                    slot.carriers = carriers;
                    slot.state = MemberState::Ready;
                    slot.not_before = None;
                    slot.cwd = Some(cwd);
                    (slot.generation, slot.down.take())
                };
                if let (Some((since, reason)), Some(hook)) = (was_down, &self.config.on_restart) {
                    (hook.0)(Restart {
                        member: member.name.clone(),
                        reason,
                        down_since: since,
                    });
                }
                // A remote member has no local process: no pid is said rather than `None`.
                let pid = hub
                    .pid
                    .map(|pid| format!(", pid {pid}"))
                    .unwrap_or_default();
                tracing::info!(
                    "app-server {} ready (generation {generation}, Codex {}{pid})",
                    member.name,
                    hub.codex_version.as_deref().unwrap_or("?"),
                );
                self.watch(Arc::clone(member), generation, Arc::clone(&hub));
                Ok(member.lease(hub, generation, counted))
            }
            Err(reason) => {
                let mut slot = lock(&member.slot);
                tracing::warn!("app-server {} could not be started: {reason}", member.name);
                let error = match member.note_crash(&mut slot, &self.config, reason.clone()) {
                    Some(_) => PoolError::Unavailable {
                        member: member.name.clone(),
                        reason,
                    },
                    None => dead(&slot),
                };
                drop(slot);
                // Tried again in the background, whether it is dead or only waiting.
                self.revive(member);
                Err(error)
            }
        }
    }

    /// Watch one incarnation: when it goes away (and is still the member's current one, so not
    /// recycled), note the crash and restart the member after the backoff.
    fn watch(self: &Arc<Self>, member: Arc<Member>, generation: u64, hub: Arc<CodexHub>) {
        let pool = Arc::clone(self);
        self.tasks.spawn(async move {
            tokio::select! {
                () = hub.gone() => {}
                () = pool.cancel.cancelled() => return,
            }
            // Reaped (whatever is left of it), so its place is free for the restart.
            hub.kill().await;
            drop(hub);
            let backoff = {
                let mut slot = lock(&member.slot);
                if slot.generation != generation || slot.hub.is_none() {
                    return; // recycled, or already handled by a starter
                }
                slot.hub = None;
                slot.carriers = None;
                let why = slot.why_gone(generation);
                tracing::warn!(
                    "app-server {} (generation {generation}): {why}",
                    member.name
                );
                member.note_crash(&mut slot, &pool.config, why)
            };
            let Some(backoff) = backoff else {
                pool.revive(&member);
                return;
            };
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = pool.cancel.cancelled() => return,
            }
            let cwd = lock(&member.slot).cwd.clone().unwrap_or_default();
            let nobody = Arc::new(Counted::new(&Arc::default()));
            if let Err(error) = pool.start(&member, &cwd, nobody).await {
                tracing::warn!("restarting app-server {}: {error}", member.name);
            }
        });
    }

    /// After a run on `lease` ended: recycle its app-server once it opened too many threads or
    /// grew too big (it drains; the member's next run starts a fresh one), and stop drained
    /// app-servers whose last run ended.
    pub async fn after_run(&self, lease: &Lease) {
        let Some(member) = self.members.get(lease.member) else {
            return;
        };
        let hub = &lease.hub;
        let threads = hub.threads_opened();
        let rss = hub.rss_bytes().unwrap_or(0);
        if threads >= self.config.recycle_after_threads || rss >= self.config.recycle_rss_bytes {
            let mut slot = lock(&member.slot);
            if slot.generation == lease.generation
                && slot.hub.as_ref().is_some_and(|live| Arc::ptr_eq(live, hub))
            {
                slot.hub = None;
                slot.recycled += 1;
                slot.state = MemberState::Draining;
                lock(&member.draining).push(Arc::clone(hub));
                tracing::info!(
                    "recycling app-server {} (generation {}): {threads} threads opened, {} MiB resident",
                    member.name,
                    lease.generation,
                    rss / (1024 * 1024)
                );
            }
        }
        let idle: Vec<Arc<CodexHub>> = {
            let mut draining = lock(&member.draining);
            let (idle, busy) = draining
                .drain(..)
                .partition(|old| old.active_threads() == 0 || !old.is_alive());
            *draining = busy;
            idle
        };
        for old in idle {
            old.kill().await;
        }
        let mut slot = lock(&member.slot);
        if slot.state == MemberState::Draining
            && slot.hub.is_none()
            && lock(&member.draining).is_empty()
        {
            slot.state = MemberState::Idle;
        }
    }

    /// Try a failing member again in the background, after its backoff (`backoff_max` once it
    /// is dead), until a start succeeds (a remote listener that came back, a local binary that
    /// starts again) or the pool shuts down; new threads meanwhile go to the other members.
    /// One such task per member.
    fn revive(self: &Arc<Self>, member: &Arc<Member>) {
        let failing =
            |state: MemberState| matches!(state, MemberState::Dead | MemberState::Restarting);
        {
            let mut slot = lock(&member.slot);
            if slot.reviving || !failing(slot.state) {
                return;
            }
            slot.reviving = true;
        }
        let pool = Arc::clone(self);
        let member = Arc::clone(member);
        self.tasks.spawn(async move {
            loop {
                let wait = {
                    let slot = lock(&member.slot);
                    if !failing(slot.state) {
                        break;
                    }
                    slot.not_before
                        .map(|at| at.saturating_duration_since(Instant::now()))
                        .unwrap_or(pool.config.backoff_max)
                };
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    () = pool.cancel.cancelled() => break,
                }
                let cwd = lock(&member.slot).cwd.clone().unwrap_or_default();
                let nobody = Arc::new(Counted::new(&Arc::default()));
                match pool.start(&member, &cwd, nobody).await {
                    Ok(_) => {
                        tracing::info!("app-server {} is back", member.name);
                        break;
                    }
                    Err(PoolError::ShuttingDown) => break,
                    Err(error) => {
                        tracing::debug!("trying app-server {} again: {error}", member.name)
                    }
                }
            }
            lock(&member.slot).reviving = false;
        });
    }

    /// Whether the pool has local members at all.
    pub fn has_locals(&self) -> bool {
        self.config.locals > 0
    }

    /// Local members with a running app-server (what a bound over several pools counts).
    pub fn running_locals(&self) -> usize {
        self.members
            .iter()
            .filter(|member| member.kind.is_child())
            .filter(|member| member.live_hub().is_some())
            .count()
    }

    /// Take one running local app-server that is idle (no work held, no request waiting) out
    /// of the pool, marked retired, for the caller to stop, so another pool may start one in
    /// its place: not a crash, the member is `idle` and starts again on its next run. The
    /// caller serializes this with every [`CodexHub::hold`] it takes, so nothing is held on an
    /// app-server it stops.
    pub fn take_idle(&self) -> Option<(String, Arc<CodexHub>)> {
        self.members.iter().find_map(|member| {
            if !member.kind.is_child() {
                return None;
            }
            let mut slot = lock(&member.slot);
            let idle = slot
                .hub
                .as_ref()
                .is_some_and(|hub| hub.is_alive() && hub.is_idle());
            if !idle {
                return None;
            }
            slot.state = MemberState::Idle;
            slot.carriers = None;
            let hub = slot.hub.take()?;
            hub.retire();
            Some((member.name.clone(), hub))
        })
    }

    /// Take one recycled app-server that is draining with nothing held on it (no running turn,
    /// no request waiting), or already gone, out of its member, for the caller to stop: it
    /// gives back its place among the app-servers, and its threads resume on their member's
    /// fresh app-server when next used. The caller serializes this with every hold it takes.
    pub fn take_idle_draining(&self) -> Option<(String, Arc<CodexHub>)> {
        self.members.iter().find_map(|member| {
            let mut draining = lock(&member.draining);
            let at = draining
                .iter()
                .position(|old| !old.is_alive() || old.is_idle())?;
            let old = draining.remove(at);
            old.retire();
            Some((member.name.clone(), old))
        })
    }

    /// The app-server of `lease` failed a health check (no answer within a deadline, frames
    /// that are not JSON-RPC): it is ended, filed as a crash with `why`, and its member
    /// restarted (local) or reconnected (remote) after the backoff. New threads go elsewhere
    /// meanwhile. A lease of an older incarnation changes nothing.
    pub async fn report_unhealthy(&self, lease: &Lease, why: String) {
        let Some(member) = self.members.get(lease.member) else {
            return;
        };
        {
            let mut slot = lock(&member.slot);
            let current = slot.generation == lease.generation
                && slot
                    .hub
                    .as_ref()
                    .is_some_and(|live| Arc::ptr_eq(live, &lease.hub));
            if !current {
                return;
            }
            tracing::warn!("app-server {}: unhealthy: {why}", member.name);
            slot.unhealthy = Some(format!("unhealthy: {why}"));
        }
        lease.hub.kill().await;
    }

    /// Recycled app-servers so far, over every member.
    pub fn recycled(&self) -> usize {
        self.members
            .iter()
            .map(|member| lock(&member.slot).recycled)
            .sum()
    }

    /// Stop every app-server (current and draining) and the watchers; wait for them (bounded).
    pub async fn shutdown(&self) {
        self.cancel.cancel();
        for member in &self.members {
            let (hub, carriers) = {
                let mut slot = lock(&member.slot);
                (slot.hub.take(), slot.carriers.take())
            };
            let draining: Vec<Arc<CodexHub>> = lock(&member.draining).drain(..).collect();
            for hub in hub.into_iter().chain(draining) {
                hub.kill().await;
            }
            if let Some(carriers) = carriers {
                let _ = tokio::time::timeout(Duration::from_secs(2), carriers.wait()).await;
            }
        }
        self.tasks.close();
        if tokio::time::timeout(Duration::from_secs(5), self.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("the pool's watchers did not end within 5 s");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(limit: usize) -> PoolConfig {
        PoolConfig {
            locals: 2,
            remotes: Vec::new(),
            binary: Err("no Codex here".into()),
            codex_home: PathBuf::from("/nonexistent"),
            isolate_environment: true,
            config_overrides: Vec::new(),
            peer: PeerConfig::default(),
            handshake_timeout: Duration::from_secs(1),
            backoff_first: Duration::from_millis(100),
            backoff_max: Duration::from_millis(350),
            crash_limit: limit,
            crash_window: Duration::from_secs(60),
            recycle_after_threads: 10,
            recycle_rss_bytes: u64::MAX,
            member_suffix: String::new(),
            on_restart: None,
            environment: None,
            jail: None,
            reaper: None,
            process_slots: None,
        }
    }

    #[test]
    fn backoff_doubles_to_its_cap_and_a_crash_loop_marks_the_member_dead() {
        let pool = Pool::new(config(5));
        let member = &pool.members[0];
        let mut slot = lock(&member.slot);
        let waits: Vec<Option<Duration>> = (0..5)
            .map(|_| member.note_crash(&mut slot, &pool.config, "boom".into()))
            .collect();
        assert_eq!(
            waits,
            [
                Some(Duration::from_millis(100)),
                Some(Duration::from_millis(200)),
                Some(Duration::from_millis(350)),
                Some(Duration::from_millis(350)),
                None
            ]
        );
        assert_eq!(slot.state, MemberState::Dead);
    }

    #[test]
    fn runs_that_start_together_spread_over_the_members() {
        let pool = Pool::new(config(5));
        let first = pool.least_busy(false).expect("a member");
        assert_eq!(first.index, 0);
        // Counted from the moment it is chosen, before any thread is open.
        let one = Counted::new(&first.leased);
        assert_eq!(pool.least_busy(false).expect("a member").index, 1);
        let two = Counted::new(&pool.members[1].leased);
        let three = Counted::new(&pool.members[1].leased);
        assert_eq!(pool.least_busy(false).expect("a member").index, 0);
        drop((one, two, three));
        assert_eq!(pool.members[0].runs() + pool.members[1].runs(), 0);
    }

    #[tokio::test]
    async fn a_member_that_cannot_start_fails_the_run_then_is_marked_dead() {
        let pool = Pool::new(config(2));
        let cwd = std::env::temp_dir();
        // A new thread tries another member when the first cannot start: with no Codex at all,
        // both fail, and the run is told why.
        let first = pool.lease(None, &cwd).await.err().map(|e| e.to_string());
        assert!(
            first
                .as_deref()
                .is_some_and(|e| e.contains("no Codex here")),
            "{first:?}"
        );
        assert!(pool.status().iter().all(|m| m.recent_crashes >= 1));
        // The second failure of local-0 (a bound run's, or its retry in the background) marks
        // it dead; a thread bound to it is refused, never moved silently.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match pool.lease(Some("local-0"), &cwd).await.err() {
                Some(PoolError::Dead { member, .. }) => {
                    assert_eq!(member, "local-0");
                    break;
                }
                other => assert!(Instant::now() < deadline, "{other:?}"),
            }
        }
        let bound = pool.lease(Some("local-0"), &cwd).await.err();
        assert!(matches!(bound, Some(PoolError::Dead { .. })), "{bound:?}");
        // Both are tried in the background until they are dead too: every member dead.
        let deadline = Instant::now() + Duration::from_secs(5);
        while pool.status().iter().any(|m| m.state != MemberState::Dead) {
            assert!(Instant::now() < deadline, "{:?}", pool.status());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let fresh = pool.lease(None, &cwd).await.err();
        assert!(matches!(fresh, Some(PoolError::AllDead)), "{fresh:?}");
        let gone = pool.lease(Some("ws://elsewhere:1"), &cwd).await.err();
        assert!(matches!(gone, Some(PoolError::Gone { .. })), "{gone:?}");
        pool.shutdown().await;
    }
}

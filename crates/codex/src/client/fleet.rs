//! App-servers by account: one [`Pool`] per auth identity, within one bound on local members.
//!
//! Why: an app-server logs in once for all its connections. OpenClaw's Codex plugin logs each
//! agent's own account in on its own connection (`account/login/start`), so two agents sharing
//! one app-server, or two app-servers sharing one `CODEX_HOME` (where Codex keeps `auth.json`),
//! send one agent's model requests under the other's key. Here each identity has app-servers of
//! its own over a Codex home of its own, and nothing of one identity is ever given to another.
//!
//! An identity is *native* (the connection never logged in: the operator's own Codex login, the
//! configured remote members) or the fingerprint of a login: the kind plus a short hash of the
//! credential that names the account (the API key, the ChatGPT account id). The secret itself is
//! never kept. Local members of every identity together stay within `total_locals`; one identity
//! has at most `per_identity`. When an identity needs its first member and the bound is
//! reached, an idle member of another identity (no turn running, no request waiting), the least
//! recently used first, is stopped to make room; its threads stay in its identity's home.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;

use super::hub::CodexHub;
use super::pool::{Lease, MemberStatus, Pool, PoolConfig, PoolError};
use clawbridge_support::sync::lock;

/// Entries of the homes folder looked at per sweep at most.
const MAX_HOME_ENTRIES: usize = 4 * MAX_IDENTITIES;
/// A home being removed is renamed to this prefix first (a crash mid-removal leaves no half
/// home under the account's name).
const REMOVING: &str = ".removing-";

/// What one sweep of the account homes did.
#[derive(Clone, Debug, Default)]
pub struct HomesSweep {
    /// Homes kept (in use, recent, or holding threads).
    pub kept: usize,
    /// The accounts whose homes were removed.
    pub removed: Vec<String>,
}

/// Whether `name` is an account key (`apiKey-1a2b…`): a kind, a dash, a hex fingerprint.
fn is_account_key(name: &str) -> bool {
    clawbridge_support::credential::is_fingerprint(name)
}

/// The newest change under `home` (the folder and what it holds, four levels deep, at most
/// 4096 entries: Codex writes its sessions, logs and caches there as it is used).
fn newest_change(home: &Path) -> Option<std::time::SystemTime> {
    let mut newest = std::fs::symlink_metadata(home).ok()?.modified().ok()?;
    let mut folders = vec![(home.to_path_buf(), 0)];
    let mut seen = 0;
    while let Some((folder, depth)) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > 4096 {
                return Some(newest);
            }
            let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
                continue;
            };
            if let Ok(changed) = meta.modified() {
                newest = newest.max(changed);
            }
            if meta.is_dir() && depth < 4 {
                folders.push((entry.path(), depth + 1));
            }
        }
    }
    Some(newest)
}

/// How often a request waiting for room looks again.
const ROOM_POLL: std::time::Duration = std::time::Duration::from_millis(200);

/// Identities remembered at once (one without running members is forgotten first).
pub const MAX_IDENTITIES: usize = 1024;

/// Who a connection's requests run as.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Identity {
    /// Not logged in through the connection: the members' own login.
    Native,
    /// Logged in with `account/login/start`: `kind` is the login's `type`, `hash` a short
    /// SHA-256 of the credential that names the account.
    Account { kind: String, hash: String },
}

/// Why a login cannot be served through a shared endpoint.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LoginRefusal {
    #[error("`account/login/start` params are not an object with a `type`")]
    Malformed,
    #[error("a `{0}` login needs a browser or a device code on the app-server's host; through the shared endpoint log in with an API key or ChatGPT auth tokens (OpenClaw auth profiles), or log Codex in on its host (`codex login`) and connect without logging in")]
    Interactive(String),
    #[error("a `{kind}` login needs `{field}`")]
    Missing { kind: String, field: &'static str },
    #[error("`accessToken` is not a JWT whose claims name its account and user (`https://api.openai.com/auth`: `chatgpt_account_id`, `chatgpt_user_id`)")]
    Claims,
    #[error("`chatgptAccountId` is not the account the access token's claims name: a login is the account of the token's holder")]
    AccountMismatch,
}

use clawbridge_support::credential::token_holder;

impl Identity {
    /// The identity an `account/login/start` asks for: whose credential it is. A key is its
    /// own holder; a ChatGPT token's holder is the account and the user its claims name (the
    /// account id a login states is no secret, and two users of one workspace share it; the
    /// token rotates, its holder does not), and the stated account must be the token's; AWS
    /// access keys are the key pair (a refreshed session token is the same holder).
    pub fn from_login(params: &Value) -> Result<Identity, LoginRefusal> {
        let kind = params
            .get("type")
            .and_then(Value::as_str)
            .ok_or(LoginRefusal::Malformed)?;
        let field = |name: &'static str| {
            params
                .get(name)
                .and_then(Value::as_str)
                .ok_or_else(|| LoginRefusal::Missing {
                    kind: kind.to_string(),
                    field: name,
                })
        };
        let material = match kind {
            "chatgpt" | "chatgptDeviceCode" => {
                return Err(LoginRefusal::Interactive(kind.to_string()))
            }
            "apiKey" | "amazonBedrock" => field("apiKey")?.to_string(),
            "chatgptAuthTokens" => {
                let stated = field("chatgptAccountId")?;
                let (account, user) =
                    token_holder(field("accessToken")?).ok_or(LoginRefusal::Claims)?;
                if account != stated {
                    return Err(LoginRefusal::AccountMismatch);
                }
                format!("{account}\0{user}")
            }
            "amazonBedrockAccessKeys" => {
                format!("{}\0{}", field("accessKeyId")?, field("secretAccessKey")?)
            }
            // A kind this endpoint does not know: its whole params name it.
            _ => params.to_string(),
        };
        // A kind names a home folder and a status row: letters only (every kind Codex has).
        if !kind.chars().all(|c| c.is_ascii_alphabetic()) || kind.is_empty() || kind.len() > 32 {
            return Err(LoginRefusal::Malformed);
        }
        Ok(Identity::Account {
            kind: kind.to_string(),
            hash: clawbridge_support::credential::hash(kind, &material),
        })
    }

    /// The identity a key names (`native`, or `apiKey-1a2b…` as [`Identity::key`] writes it).
    pub fn from_key(key: &str) -> Option<Identity> {
        if key == "native" {
            return Some(Identity::Native);
        }
        if !is_account_key(key) {
            return None;
        }
        let (kind, hash) = key.split_once('-')?;
        Some(Identity::Account {
            kind: kind.to_string(),
            hash: hash.to_string(),
        })
    }

    /// `native`, or `apiKey-1a2b3c4d5e6f7a8b`: a name safe in paths, logs and status.
    pub fn key(&self) -> String {
        match self {
            Identity::Native => "native".to_string(),
            Identity::Account { kind, hash } => format!("{kind}-{hash}"),
        }
    }
}

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.key())
    }
}

/// How the fleet makes each identity's pool.
#[derive(Clone, Debug)]
pub struct FleetConfig {
    /// The native identity's pool (its locals, its remotes, its Codex home); every other
    /// identity's pool is made from it, with local members only.
    pub native: PoolConfig,
    /// Where each other identity's Codex home is made (`DIR/<identity key>`, 0700, kept across
    /// restarts so a resumed thread finds its rollout).
    pub homes: PathBuf,
    /// The `config.toml` each identity's home gets (the native home's, or the offline one),
    /// rewritten when the identity's pool is made. Never `auth.json`.
    pub home_config: Option<String>,
    /// Local members of every identity together.
    pub total_locals: usize,
    /// Local members of one identity.
    pub per_identity: usize,
    /// How long a request waits for room (an identity needs its first member, every member is
    /// busy with other identities' work) before it is refused.
    pub wait_for_room: std::time::Duration,
    /// Why the members cannot be given a private view of the machine (`support::jail`), when
    /// they cannot: then one account's members could read another's login, so the fleet
    /// serves the first account that asks and refuses every other, saying why.
    pub one_account: Option<String>,
    /// Remote members given to one account each (`--app-server-account URL=ACCOUNT`), by the
    /// account's identity key: that account's pool is these members only (no local ones), and
    /// no other pool has them.
    pub account_members: std::collections::HashMap<String, Vec<super::remote::RemoteEndpoint>>,
}

impl FleetConfig {
    /// How long a request waits for room by default.
    pub const DEFAULT_WAIT_FOR_ROOM: std::time::Duration = std::time::Duration::from_secs(20);
}

/// Why the fleet cannot give a request an app-server.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    #[error(transparent)]
    Pool(#[from] PoolError),
    #[error("all {total} app-servers were busy with other accounts' work for {waited:?} (running turns, new threads); try again when one ends, or raise --app-servers")]
    Full {
        total: usize,
        waited: std::time::Duration,
    },
    #[error("cannot prepare the Codex home of {identity} ({path}): {message}")]
    Home {
        identity: String,
        path: PathBuf,
        message: String,
    },
    #[error("{MAX_IDENTITIES} accounts are served already and none can be let go")]
    TooManyIdentities,
    #[error("this endpoint serves one account ({served}) and no other: its app-servers cannot be kept out of each other's Codex homes on this machine ({why})")]
    OneAccount { served: String, why: String },
}

/// One identity in `app-server status`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IdentityStatus {
    /// `native`, or the login's kind and credential fingerprint (never the secret).
    pub identity: String,
    pub members: Vec<MemberStatus>,
}

struct Entry {
    pool: Arc<Pool>,
    last_used: Instant,
}

/// The pools, by identity.
pub struct Fleet {
    config: FleetConfig,
    pools: Mutex<BTreeMap<Identity, Entry>>,
    /// Held while a member may be started, so two starts never both pass the bound.
    starting: tokio::sync::Mutex<()>,
    /// Held while an idle app-server is taken out to be stopped, and while work is held on one
    /// (never across an await): nothing is held on an app-server being stopped.
    evicting: Mutex<()>,
    /// The one account served, when members cannot be kept apart ([`FleetConfig::one_account`]).
    served: Mutex<Option<Identity>>,
}

/// Work held on an app-server for as long as this lives (a request on its way, its answer not
/// back yet): its app-server is not stopped to make room meanwhile.
pub struct Hold(Arc<CodexHub>);

impl Drop for Hold {
    fn drop(&mut self) {
        self.0.release();
    }
}

impl Fleet {
    pub fn new(mut config: FleetConfig) -> Arc<Fleet> {
        // One place per local app-server of every account together: held from before a
        // process starts until it is reaped.
        config.native.process_slots =
            Some(Arc::new(tokio::sync::Semaphore::new(config.total_locals)));
        let native = PoolConfig {
            locals: config.native.locals.min(config.per_identity.max(1)),
            ..config.native.clone()
        };
        let mut pools = BTreeMap::new();
        pools.insert(
            Identity::Native,
            Entry {
                pool: Pool::new(native),
                last_used: Instant::now(),
            },
        );
        Arc::new(Fleet {
            config,
            pools: Mutex::new(pools),
            starting: tokio::sync::Mutex::new(()),
            evicting: Mutex::new(()),
            served: Mutex::new(None),
        })
    }

    /// How the accounts' app-servers are kept apart, for the status.
    pub fn isolation(&self) -> String {
        match (&self.config.native.jail, &self.config.one_account) {
            (Some(_), _) => "private view per app-server (mount and PID namespaces)".to_string(),
            (None, Some(why)) => format!("one account only: {why}"),
            (None, None) => "none (app-servers share the machine's view)".to_string(),
        }
    }

    /// Whether `identity` may have work here: always, when members are kept apart; else only
    /// the first account that asked (a handshake asks nothing of an account).
    pub fn admit(&self, identity: &Identity) -> Result<(), FleetError> {
        let Some(why) = &self.config.one_account else {
            return Ok(());
        };
        let mut served = lock(&self.served);
        match &*served {
            Some(first) if first != identity => Err(FleetError::OneAccount {
                served: first.key(),
                why: why.clone(),
            }),
            Some(_) => Ok(()),
            None => {
                *served = Some(identity.clone());
                Ok(())
            }
        }
    }

    /// The Codex home of a logged-in identity.
    pub fn home_of(&self, identity: &Identity) -> PathBuf {
        match identity {
            Identity::Native => self.config.native.codex_home.clone(),
            Identity::Account { .. } => self.config.homes.join(identity.key()),
        }
    }

    /// The identity's pool, made (with its home) on first need.
    fn pool(&self, identity: &Identity) -> Result<Arc<Pool>, FleetError> {
        let mut pools = lock(&self.pools);
        if let Some(entry) = pools.get_mut(identity) {
            entry.last_used = Instant::now();
            return Ok(Arc::clone(&entry.pool));
        }
        if pools.len() >= MAX_IDENTITIES {
            // Forget one with nothing running (its home stays on disk for its next login).
            let idle = pools
                .iter()
                .filter(|(id, entry)| **id != Identity::Native && entry.pool.running_locals() == 0)
                .min_by_key(|(_, entry)| entry.last_used)
                .map(|(id, _)| id.clone())
                .ok_or(FleetError::TooManyIdentities)?;
            pools.remove(&idle);
        }
        let home = self.home_of(identity);
        self.prepare_home(identity, &home)?;
        // An account's members never see the operator's own Codex home (its login).
        let jail = self
            .config
            .native
            .jail
            .as_ref()
            .map(|jail| jail.hiding(&self.config.native.codex_home));
        // An account given members of its own runs there only.
        let own = self.config.account_members.get(&identity.key());
        let config = PoolConfig {
            locals: match own {
                Some(_) => 0,
                None => self.config.per_identity.max(1),
            },
            remotes: own.cloned().unwrap_or_default(),
            codex_home: home,
            member_suffix: format!("@{}", identity.key()),
            jail,
            ..self.config.native.clone()
        };
        let pool = Pool::new(config);
        pools.insert(
            identity.clone(),
            Entry {
                pool: Arc::clone(&pool),
                last_used: Instant::now(),
            },
        );
        Ok(pool)
    }

    fn prepare_home(&self, identity: &Identity, home: &Path) -> Result<(), FleetError> {
        let failed = |message: String| FleetError::Home {
            identity: identity.key(),
            path: home.to_path_buf(),
            message,
        };
        // Private, a folder that was there already too: it holds the account's login.
        clawbridge_support::fs::ensure_private_dir(home)
            .map_err(|error| failed(error.to_string()))?;
        if let Some(config) = &self.config.home_config {
            clawbridge_support::fs::write_private(&home.join("config.toml"), config.as_bytes())
                .map_err(|error| failed(error.to_string()))?;
        }
        Ok(())
    }

    /// An app-server of `identity` for a request: the member named by `affinity` (the thread's),
    /// else the least busy. Starts one when the identity has none running, within the bounds,
    /// stopping an idle member of another identity when that is the only way.
    pub async fn lease(
        &self,
        identity: &Identity,
        affinity: Option<&str>,
        cwd: &Path,
    ) -> Result<(Lease, Hold), FleetError> {
        let began = tokio::time::Instant::now();
        loop {
            match self.try_lease(identity, affinity, cwd).await {
                Err(FleetError::Full { total, .. }) => {
                    let waited = began.elapsed();
                    if waited >= self.config.wait_for_room {
                        return Err(FleetError::Full { total, waited });
                    }
                    tokio::time::sleep(ROOM_POLL).await;
                }
                other => return other,
            }
        }
    }

    async fn try_lease(
        &self,
        identity: &Identity,
        affinity: Option<&str>,
        cwd: &Path,
    ) -> Result<(Lease, Hold), FleetError> {
        let pool = self.pool(identity)?;
        let _starting = self.starting.lock().await;
        let total = self.config.total_locals;
        // Places free: what runs, starts, drains or is being stopped holds one.
        let mut may_start = self.free_places() > 0;
        let has_running = !pool.live_hubs().is_empty();
        if !may_start && !has_running && pool.has_locals() {
            // Make room: a recycled app-server of any identity draining with nothing running
            // first (it takes no new work anyway).
            let drained = {
                let pools: Vec<Arc<Pool>> = lock(&self.pools)
                    .values()
                    .map(|entry| Arc::clone(&entry.pool))
                    .collect();
                let _evicting = lock(&self.evicting);
                pools.iter().find_map(|pool| pool.take_idle_draining())
            };
            if let Some((name, hub)) = drained {
                tracing::info!("app-server {name}: a drained incarnation stopped, to make room");
                hub.kill().await;
                may_start = self.free_places() > 0;
            }
        }
        if !may_start && !has_running && pool.has_locals() {
            // Make room: an idle member of another identity, least recently used first.
            let others: Vec<Arc<Pool>> = {
                let pools = lock(&self.pools);
                let mut others: Vec<(&Identity, &Entry)> =
                    pools.iter().filter(|(id, _)| *id != identity).collect();
                others.sort_by_key(|(_, entry)| entry.last_used);
                others
                    .into_iter()
                    .map(|(_, entry)| Arc::clone(&entry.pool))
                    .collect()
            };
            let taken = {
                let _evicting = lock(&self.evicting);
                others.iter().find_map(|other| other.take_idle())
            };
            if let Some((name, hub)) = taken {
                tracing::info!(
                    "app-server {name}: stopped while idle, to make room for {identity}"
                );
                hub.kill().await;
                may_start = true;
            }
            if !may_start {
                return Err(FleetError::Full {
                    total,
                    waited: std::time::Duration::ZERO,
                });
            }
        }
        let lease = match pool.lease_within(affinity, cwd, may_start).await {
            Ok(lease) => lease,
            // Taken meanwhile (a restart after a crash): wait for room as when full.
            Err(PoolError::NoRoom { .. }) => {
                return Err(FleetError::Full {
                    total,
                    waited: std::time::Duration::ZERO,
                })
            }
            Err(error) => return Err(error.into()),
        };
        // Still under `starting`: no eviction can come between the lease and its hold.
        let hold = {
            let _evicting = lock(&self.evicting);
            lease.hub.hold();
            Hold(Arc::clone(&lease.hub))
        };
        Ok((lease, hold))
    }

    /// Hold work on the app-server of a lease given earlier (a followed thread's), unless it
    /// was taken out to be stopped meanwhile (then `None`: lease again).
    pub fn hold(&self, lease: &Lease) -> Option<Hold> {
        let _evicting = lock(&self.evicting);
        if lease.hub.is_retired() || !lease.hub.is_alive() {
            return None;
        }
        lease.hub.hold();
        Some(Hold(Arc::clone(&lease.hub)))
    }

    /// `--app-servers`: local app-servers of every account together.
    pub fn total_locals(&self) -> usize {
        self.config.total_locals
    }

    /// Places for local app-servers free now.
    fn free_places(&self) -> usize {
        self.config
            .native
            .process_slots
            .as_ref()
            .map_or(0, |slots| slots.available_permits())
    }

    /// Local app-servers holding a place now (running, starting, draining, being stopped).
    pub fn places_held(&self) -> usize {
        self.config.total_locals.saturating_sub(self.free_places())
    }

    /// The account homes under [`FleetConfig::homes`]: each one unused for `retention` is
    /// removed, unless `keep` names its account (a connection logged in as it, a thread of it
    /// whose conversation is still there) or its app-servers run or are being leased. Only a
    /// real folder named as an account is touched (never a link, never anything else).
    pub fn sweep_homes(
        &self,
        retention: std::time::Duration,
        keep: &dyn Fn(&str) -> bool,
    ) -> HomesSweep {
        let mut sweep = HomesSweep::default();
        let Ok(entries) = std::fs::read_dir(&self.config.homes) else {
            return sweep;
        };
        for entry in entries.take(MAX_HOME_ENTRIES).flatten() {
            let name = entry.file_name().to_string_lossy().to_string();
            let path = entry.path();
            let is_folder = std::fs::symlink_metadata(&path).is_ok_and(|meta| meta.is_dir());
            // A removal a crash interrupted: finished now.
            if name.starts_with(REMOVING) && is_folder {
                let _ = std::fs::remove_dir_all(&path);
                continue;
            }
            if !is_folder || !is_account_key(&name) {
                continue;
            }
            // The account's own say first; the walk of its home only when that keeps nothing.
            let recent = || {
                newest_change(&path)
                    .and_then(|changed| changed.elapsed().ok())
                    .is_none_or(|idle| idle < retention)
            };
            if keep(&name) || recent() {
                sweep.kept += 1;
                continue;
            }
            // Under the pools' lock: nobody leases the account meanwhile, and its pool (idle,
            // held by nobody else) is forgotten with its home.
            let moved = {
                let mut pools = lock(&self.pools);
                let in_use = pools.iter().any(|(identity, entry)| {
                    identity.key() == name
                        && (entry.pool.running_locals() > 0
                            || Arc::strong_count(&entry.pool) > 1
                            || entry.last_used.elapsed() < retention)
                });
                if in_use {
                    None
                } else {
                    pools.retain(|identity, _| identity.key() != name);
                    let aside = self.config.homes.join(format!("{REMOVING}{name}"));
                    std::fs::rename(&path, &aside).ok().map(|()| aside)
                }
            };
            match moved {
                Some(aside) => {
                    if let Err(error) = std::fs::remove_dir_all(&aside) {
                        tracing::warn!("removing the account home {}: {error}", aside.display());
                    }
                    tracing::info!(
                        "account home {name} removed: unused for {} days, no thread of it kept",
                        retention.as_secs() / 86_400
                    );
                    sweep.removed.push(name);
                }
                None => sweep.kept += 1,
            }
        }
        sweep
    }

    /// The remote members given to `identity` (`--app-server-account`), by member name: each
    /// keeps its own login in its own Codex home, so a login of the account goes to every one.
    pub fn own_members(&self, identity: &Identity) -> Vec<String> {
        self.config
            .account_members
            .get(&identity.key())
            .map(|members| members.iter().map(|member| member.url.clone()).collect())
            .unwrap_or_default()
    }

    /// The running app-servers of one identity, by member name.
    pub fn live_hubs(&self, identity: &Identity) -> Vec<(String, Arc<CodexHub>)> {
        let pool = lock(&self.pools)
            .get(identity)
            .map(|entry| Arc::clone(&entry.pool));
        pool.map(|pool| pool.live_hubs()).unwrap_or_default()
    }

    /// The Codex answer to `initialize` of any running app-server (they run one Codex build),
    /// so a client's handshake starts nothing; see [`Fleet::initialize_answer`].
    pub fn any_initialize_result(&self) -> Option<Value> {
        let pools: Vec<Arc<Pool>> = lock(&self.pools)
            .values()
            .map(|entry| Arc::clone(&entry.pool))
            .collect();
        pools
            .iter()
            .flat_map(|pool| pool.live_hubs())
            .map(|(_, hub)| self.initialize_answer(&hub.initialize_result))
            .next()
    }

    /// What a client is told at `initialize`, whichever member's answer it comes from: the
    /// same for every connection, naming the native Codex home. A client logs in only after
    /// its handshake, and OpenClaw's plugin keys its thread bindings on this answer (a
    /// `codexHome` that changed with the member answering made it start a new thread on every
    /// run); no connection learns another account's home either.
    pub fn initialize_answer(&self, result: &Value) -> Value {
        let mut answer = result.clone();
        if let Some(home) = answer.get_mut("codexHome") {
            *home = Value::String(self.config.native.codex_home.display().to_string());
        }
        answer
    }

    /// The app-server of `lease` (of `identity`) failed a health check: see
    /// [`Pool::report_unhealthy`].
    pub async fn report_unhealthy(&self, identity: &Identity, lease: &Lease, why: String) {
        let pool = lock(&self.pools)
            .get(identity)
            .map(|entry| Arc::clone(&entry.pool));
        if let Some(pool) = pool {
            pool.report_unhealthy(lease, why).await;
        }
    }

    /// After a run on `lease` ended: see [`Pool::after_run`] (recycling by threads and memory).
    pub async fn after_run(&self, identity: &Identity, lease: &Lease) {
        let pool = lock(&self.pools)
            .get(identity)
            .map(|entry| Arc::clone(&entry.pool));
        if let Some(pool) = pool {
            pool.after_run(lease).await;
        }
    }

    /// Every identity with its members, native first.
    pub fn status(&self) -> Vec<IdentityStatus> {
        let pools: Vec<(Identity, Arc<Pool>)> = lock(&self.pools)
            .iter()
            .map(|(id, entry)| (id.clone(), Arc::clone(&entry.pool)))
            .collect();
        pools
            .into_iter()
            .map(|(identity, pool)| IdentityStatus {
                identity: identity.key(),
                members: pool.status(),
            })
            .collect()
    }

    /// Every member of every identity.
    pub fn members(&self) -> Vec<MemberStatus> {
        self.status()
            .into_iter()
            .flat_map(|identity| identity.members)
            .collect()
    }

    /// Stop every identity's app-servers.
    pub async fn shutdown(&self) {
        let pools: Vec<Arc<Pool>> = lock(&self.pools)
            .values()
            .map(|entry| Arc::clone(&entry.pool))
            .collect();
        for pool in pools {
            pool.shutdown().await;
        }
    }
}

/// A JWT-shaped token (unsigned) whose claims name `account` and `user`, as OpenAI's access
/// tokens do; `serial` makes tokens of one holder differ (a refresh).
#[cfg(test)]
pub fn test_token(account: &str, user: &str, serial: u32) -> String {
    use base64::Engine as _;
    let encode = |value: Value| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value.to_string().as_bytes())
    };
    format!(
        "{}.{}.sig",
        encode(serde_json::json!({"alg": "none", "typ": "JWT"})),
        encode(serde_json::json!({
            "https://api.openai.com/auth": {"chatgpt_account_id": account, "chatgpt_user_id": user},
            "sub": user,
            "iat": serial,
        }))
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Protection: where the app-servers cannot be kept apart, one account is served and every
    /// other is refused, saying why (a handshake asks nothing of an account).
    #[test]
    fn without_a_private_view_one_account_is_served() {
        let home = tempfile::tempdir().expect("home");
        let config = |one_account: Option<String>| FleetConfig {
            native: PoolConfig::new(Err("no codex".into()), home.path().to_path_buf()),
            homes: home.path().join("homes"),
            home_config: None,
            total_locals: 2,
            per_identity: 1,
            wait_for_room: FleetConfig::DEFAULT_WAIT_FOR_ROOM,
            one_account,
            account_members: Default::default(),
        };
        let key = |key: &str| Identity::from_login(&json!({"type": "apiKey", "apiKey": key}));
        let (a, b) = (key("sk-a").expect("a"), key("sk-b").expect("b"));
        let fleet = Fleet::new(config(Some("user namespaces are off".into())));
        fleet.admit(&a).expect("the first account");
        fleet.admit(&a).expect("the same account again");
        let refused = fleet.admit(&b).expect_err("another account").to_string();
        assert!(
            refused.contains(&a.key()) && refused.contains("user namespaces are off"),
            "{refused}"
        );
        assert!(fleet.admit(&Identity::Native).is_err());
        assert!(fleet.isolation().starts_with("one account only"));
        // Kept apart: every account.
        let fleet = Fleet::new(config(None));
        fleet.admit(&a).expect("a");
        fleet.admit(&b).expect("b");
    }

    #[test]
    fn a_login_names_its_account_by_a_fingerprint_never_the_secret() {
        let a = Identity::from_login(&json!({"type": "apiKey", "apiKey": "sk-aaaa"})).expect("a");
        let a2 = Identity::from_login(&json!({"type": "apiKey", "apiKey": "sk-aaaa"})).expect("a");
        let b = Identity::from_login(&json!({"type": "apiKey", "apiKey": "sk-bbbb"})).expect("b");
        assert_eq!(a, a2);
        assert_ne!(a, b);
        assert!(a.key().starts_with("apiKey-") && !a.key().contains("sk-aaaa"));
        assert_eq!(a.key().len(), "apiKey-".len() + 16);
        // Token logins are keyed by the token's holder: a refreshed access token of the same
        // user is the same account; another user naming the same account id is not, and a
        // token of another account naming this one is refused.
        let login = |token: String, account: &str| {
            Identity::from_login(
                &json!({"type": "chatgptAuthTokens", "accessToken": token, "chatgptAccountId": account}),
            )
        };
        let victim = login(test_token("acct-1", "user-v", 1), "acct-1").expect("victim");
        let refreshed = login(test_token("acct-1", "user-v", 2), "acct-1").expect("refresh");
        assert_eq!(victim, refreshed);
        let colleague = login(test_token("acct-1", "user-x", 1), "acct-1").expect("colleague");
        assert_ne!(victim, colleague, "the same workspace, another user");
        assert_eq!(
            login(test_token("acct-2", "user-x", 1), "acct-1"),
            Err(LoginRefusal::AccountMismatch)
        );
        assert_eq!(
            login("not-a-jwt".into(), "acct-1"),
            Err(LoginRefusal::Claims)
        );
        // AWS access keys: the key pair, whatever the session token and region.
        let keys = |session: &str, region: &str| {
            Identity::from_login(
                &json!({"type": "amazonBedrockAccessKeys", "accessKeyId": "AKIA1", "secretAccessKey": "s", "sessionToken": session, "region": region}),
            )
        };
        assert_eq!(keys("one", "us-east-1"), keys("two", "eu-west-1"));
        assert_eq!(
            Identity::from_login(
                &json!({"type": "amazonBedrockAccessKeys", "accessKeyId": "AKIA1"})
            ),
            Err(LoginRefusal::Missing {
                kind: "amazonBedrockAccessKeys".into(),
                field: "secretAccessKey"
            })
        );
        // The same secret under another kind is another identity.
        let bedrock = Identity::from_login(
            &json!({"type": "amazonBedrock", "apiKey": "sk-aaaa", "region": "x"}),
        )
        .expect("bedrock");
        assert_ne!(a, bedrock);
        assert_eq!(
            Identity::from_login(&json!({"type": "chatgpt"})),
            Err(LoginRefusal::Interactive("chatgpt".into()))
        );
        assert_eq!(
            Identity::from_login(&json!({"apiKey": "x"})),
            Err(LoginRefusal::Malformed)
        );
        assert_eq!(
            Identity::from_login(&json!({"type": "../../x"})),
            Err(LoginRefusal::Malformed)
        );
    }
}

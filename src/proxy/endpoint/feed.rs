//! A thread's feed: one claim of the thread's messages on one app-server incarnation, relayed
//! to every connection that follows the thread, with the stall watcher of its running turn.

use crate::codex::protocol::table::name as method;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::connection::Connection;
use super::INTERNAL_ERROR;
use crate::codex::client::fleet::{Fleet, Identity};
use crate::codex::client::hub::CodexHub;
use crate::codex::client::pool::Lease;
use crate::codex::protocol::inbound::{Inbound, NotificationKind, TokenUsage};
use crate::proxy::stall::{StallKind, TurnWatch, Verdict};
use crate::support::sync::lock;

/// A thread a connection follows: its member's lease and the thread's feed.
pub(super) struct Followed {
    pub(super) lease: Lease,
    pub(super) feed: Arc<Feed>,
}

/// One thread of one app-server incarnation, claimed once, relayed to every connection that
/// follows it (as Codex sends a thread's messages to each of its subscribed connections).
pub(super) struct Feed {
    pub(super) thread: String,
    /// The app-server incarnation it relays (`lease.hub`, on member `lease.name`), and whose:
    /// after each turn the member is checked for recycling (threads opened, memory), as `serve`
    /// does after each run.
    pub(super) lease: Lease,
    pub(super) identity: Identity,
    pub(super) fleet: Arc<Fleet>,
    /// The followers, oldest first; the last is the one server requests go to, unless
    /// `answerer` names a follower (the one that started the running turn).
    pub(super) followers: Mutex<Vec<Weak<Connection>>>,
    pub(super) answerer: Mutex<Option<usize>>,
    /// The running turn (from `turn/started` or `turn/start`'s answer until `turn/completed`).
    pub(super) turn: tokio::sync::watch::Sender<TurnState>,
    /// Started here and no turn yet: Codex has no rollout of it, so its app-server must not be
    /// stopped to make room (the thread could not be resumed).
    pub(super) fresh: AtomicBool,
    /// Started here and no turn yet, whether or not it still holds its app-server: if the
    /// app-server goes away now, the thread is gone with it (its followers hear
    /// `thread/closed`).
    pub(super) unpersisted: AtomicBool,
    /// Asks the relay to send what it holds, then acknowledge (see [`Connection::barrier`]).
    pub(super) barrier: mpsc::Sender<oneshot::Sender<()>>,
    pub(super) relay: Mutex<Option<tokio::task::JoinHandle<Option<()>>>>,
    /// The running turn, watched for stalls.
    pub(super) watch: Mutex<TurnWatch>,
    pub(super) stalls: Arc<StallCounts>,
    /// Codex's latest `thread/tokenUsage/updated` of the thread (its params, at most
    /// [`MAX_KEPT_USAGE`] bytes), shown in the status.
    pub(super) token_usage: Mutex<Option<Box<serde_json::value::RawValue>>>,
    /// `thread/compacted` seen in the running (or last) turn.
    pub(super) compactions: AtomicU64,
    /// The running (or last) turn compacted twice or more and the input still filled the
    /// model's context window: told once per turn, shown in the status.
    pub(super) context_alarm: AtomicBool,
    pub(super) usage: Arc<UsageCounts>,
    /// The model the thread runs on, as Codex answered its start or resume.
    pub(super) model: Mutex<Option<String>>,
    /// The thread's `cwd` as Codex answered its start or resume (at most
    /// [`MAX_WORKSPACE_BYTES`]), shown in the status with the agent it names.
    pub(super) workspace: Mutex<Option<String>>,
    /// The endpoint, to stop the account's other running turns when it passes its budget.
    pub(super) shared: std::sync::Weak<super::Shared>,
    /// The endpoint leases threads (a shared store): each relay checks the thread's lease.
    pub(super) leased: bool,
}

/// Tokens Codex reported, for `/metrics` and the accounts' daily budget (`--budget-tokens`).
#[derive(Debug, Default)]
pub(super) struct UsageCounts {
    /// Tokens by model and kind (`input`, `cachedInput`, `output`, `reasoningOutput`), all
    /// accounts; at most [`MAX_MODELS`] models (the rest count as `other`).
    pub(super) tokens: Mutex<BTreeMap<(String, &'static str), u64>>,
    /// Model calls (`thread/tokenUsage/updated` notifications) by model.
    pub(super) calls: Mutex<BTreeMap<String, u64>>,
    /// Identity key -> (the UTC day, tokens that day); one entry per identity the fleet allows.
    pub(super) today: Mutex<std::collections::HashMap<String, (u64, u64)>>,
    /// Tokens an account may use per day.
    pub(super) budget: Option<u64>,
    /// Where each account's tokens of the day are kept across restarts.
    pub(super) store: Option<Arc<crate::service::store::Store>>,
}

/// Where an account stands with its daily budget after a model call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Budget {
    Within,
    /// This call took it past the budget.
    Crossed,
    /// It was past the budget before this call (a call made after the budget was spent).
    Past,
}

/// How long the turn whose model call crossed the budget may go on to end by itself (a turn
/// that answered is `completed`); one still running after it is interrupted.
const BUDGET_GRACE: std::time::Duration = std::time::Duration::from_secs(3);

/// Models told apart in the token metrics.
const MAX_MODELS: usize = 64;

/// Days since the Unix epoch (UTC).
fn day_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs() / 86_400)
}

impl UsageCounts {
    /// Counts that go on from what `store` kept of today (a restart starts no day again).
    pub(super) fn new(
        budget: Option<u64>,
        store: Option<Arc<crate::service::store::Store>>,
    ) -> UsageCounts {
        let day = day_now();
        let today = store
            .as_ref()
            .map(|store| store.usage_on(day))
            .unwrap_or_default()
            .into_iter()
            .take(crate::codex::client::fleet::MAX_IDENTITIES)
            .map(|(identity, tokens)| (identity, (day, tokens)))
            .collect();
        UsageCounts {
            budget,
            store,
            today: Mutex::new(today),
            ..Default::default()
        }
    }

    /// Count one model call of a running turn (a `thread/tokenUsage/updated`: its `last`
    /// breakdown) for `identity`: where the account stands with its budget now.
    pub(super) fn add(&self, identity: &str, model: Option<&str>, params: &str) -> Budget {
        let Some(usage) = TokenUsage::of_params(params) else {
            return Budget::Within;
        };
        let last = usage.last;
        {
            let mut calls = lock(&self.calls);
            let model = match model {
                Some(model) if calls.contains_key(model) || calls.len() < MAX_MODELS => model,
                Some(_) => "other",
                None => "unknown",
            }
            .to_string();
            *calls.entry(model.clone()).or_default() += 1;
            let mut tokens = lock(&self.tokens);
            for (kind, count) in [
                ("input", last.input_tokens),
                ("cachedInput", last.cached_input_tokens),
                ("output", last.output_tokens),
                ("reasoningOutput", last.reasoning_output_tokens),
            ] {
                *tokens.entry((model.clone(), kind)).or_default() += count;
            }
        }
        let used = match last.total_tokens {
            0 => last.input_tokens + last.output_tokens,
            total => total,
        };
        let day = day_now();
        let mut today = lock(&self.today);
        if today.len() >= crate::codex::client::fleet::MAX_IDENTITIES
            && !today.contains_key(identity)
        {
            today.retain(|_, (seen, _)| *seen == day);
        }
        let entry = today.entry(identity.to_string()).or_insert((day, 0));
        if entry.0 != day {
            *entry = (day, 0);
        }
        let mut before = entry.1;
        entry.1 = before.saturating_add(used);
        if let Some(store) = &self.store {
            // Several endpoints on one database count one figure: the increment is added there
            // in one statement and the account's total across them comes back.
            match store.add_usage(identity, day, used) {
                Some(total) => {
                    before = total.saturating_sub(used);
                    entry.1 = total;
                }
                None => store.put_usage(identity, day, entry.1),
            }
        }
        match self.budget {
            Some(budget) if before > budget => Budget::Past,
            Some(budget) if entry.1 > budget => Budget::Crossed,
            _ => Budget::Within,
        }
    }

    /// Tokens `identity` used today.
    pub(super) fn used_today(&self, identity: &str) -> u64 {
        lock(&self.today)
            .get(identity)
            .filter(|(day, _)| *day == day_now())
            .map_or(0, |(_, used)| *used)
    }

    /// Whether counting a call or checking the budget asks a database several endpoints share
    /// (a network round trip: the callers make it off the async workers).
    pub(super) fn on_shared_store(&self) -> bool {
        self.store.as_ref().is_some_and(|store| store.is_shared())
    }

    /// [`UsageCounts::refusal`], on a blocking thread when it asks the shared store.
    pub(super) async fn refusal_of(self: &Arc<Self>, identity: String) -> Option<String> {
        if self.budget.is_none() || !self.on_shared_store() {
            return self.refusal(&identity);
        }
        let usage = Arc::clone(self);
        tokio::task::spawn_blocking(move || usage.refusal(&identity))
            .await
            .unwrap_or(None)
    }

    /// Why `identity` may not start a turn now (past its budget), if so. With a store several
    /// endpoints share, what the account used through all of them.
    pub(super) fn refusal(&self, identity: &str) -> Option<String> {
        let budget = self.budget?;
        let shared = self
            .store
            .as_ref()
            .and_then(|store| store.usage_of(identity, day_now()));
        let used = shared.unwrap_or_else(|| self.used_today(identity));
        (used > budget).then(|| {
            format!(
                "clawbridge: this account used {used} tokens today, past its budget of {budget} (--budget-tokens); requests that call the model (turns, reviews, compactions) are refused until tomorrow (UTC)"
            )
        })
    }
}

/// The largest usage or rate-limits notification kept for the status.
pub(super) const MAX_KEPT_USAGE: usize = 64 * 1024;
/// Longest workspace path kept for the status.
pub(super) const MAX_WORKSPACE_BYTES: usize = 4096;

/// Stalls seen so far, by kind, and turns completed for their clients.
#[derive(Default)]
pub(super) struct StallCounts {
    pub(super) by_kind: Mutex<BTreeMap<&'static str, usize>>,
    pub(super) recovered: AtomicUsize,
    /// Turns that compacted twice or more and still filled the model's context window.
    pub(super) context_alarms: AtomicUsize,
    /// Turns Codex ended, by the status it gave (`/metrics`).
    pub(super) turns_ended: Mutex<BTreeMap<&'static str, u64>>,
}

/// A feed's running turn, watched by a draining stop.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct TurnState {
    pub(super) id: Option<String>,
    /// Codex said `turn/started`: before it, Codex refuses to interrupt the turn.
    pub(super) active: bool,
    /// The feed's app-server went away (its relay ended and told the followers of the turn it
    /// had): no turn is noted from then on.
    pub(super) gone: bool,
}

impl TurnState {
    /// The app-server went away: the running turn, taken (its followers end it for their
    /// clients), and nothing noted from now on.
    fn go(&mut self) -> Option<String> {
        self.gone = true;
        self.active = false;
        self.id.take()
    }

    /// Note `turn` as running (`started`: Codex said `turn/started`), or none; whether it was
    /// noted. A turn whose `turn/start` answer is handled only after the app-server went away
    /// is not: the relay that told the followers did not know it, so the one that answered
    /// the client ends it for it (else the client waits on a turn nobody will end).
    fn note(&mut self, turn: Option<String>, started: bool) -> bool {
        if self.gone && turn.is_some() {
            return false;
        }
        // The same turn stays active once started; a new or no turn is not active yet.
        let running = turn.is_some();
        let same = self.id == turn;
        self.active = running && (started || (same && self.active));
        self.id = turn;
        true
    }
}

/// A feed's key: the app-server incarnation (its hub, alive as long as the feed holds it) and
/// the thread.
pub(super) type FeedKey = (usize, String);

pub(super) fn feed_key(hub: &Arc<CodexHub>, thread: &str) -> FeedKey {
    (Arc::as_ptr(hub) as usize, thread.to_string())
}

impl Feed {
    pub(super) fn followers(&self) -> Vec<Arc<Connection>> {
        lock(&self.followers)
            .iter()
            .filter_map(Weak::upgrade)
            .collect()
    }

    /// Add (or move to the end) a follower: the newest follows, and answers server requests.
    pub(super) fn add(&self, connection: &Arc<Connection>) {
        let mut followers = lock(&self.followers);
        followers.retain(|weak| {
            weak.upgrade()
                .is_some_and(|other| other.number != connection.number)
        });
        followers.push(Arc::downgrade(connection));
    }

    /// Remove a follower; whether anyone still follows.
    pub(super) fn remove(&self, number: usize) -> bool {
        let mut followers = lock(&self.followers);
        followers.retain(|weak| weak.upgrade().is_some_and(|other| other.number != number));
        let mut answerer = lock(&self.answerer);
        if *answerer == Some(number) {
            *answerer = None;
        }
        !followers.is_empty()
    }

    /// The running turn (`turn/start`'s answer), or none (it ended).
    pub(super) fn set_turn(&self, turn: Option<String>) {
        let _ = self.update_turn(turn, false);
    }

    /// Codex said `turn/started`: the turn is active (it can be interrupted), and its
    /// compactions are counted from zero.
    fn turn_started(&self, turn: String) {
        self.compactions.store(0, Ordering::SeqCst);
        self.context_alarm.store(false, Ordering::SeqCst);
        let _ = self.update_turn(Some(turn), true);
    }

    /// After a compaction or a usage update: two or more compactions in this turn and the
    /// latest model call's input still filled the context window raise the turn's alarm (once).
    fn check_context(&self) {
        let compactions = self.compactions.load(Ordering::SeqCst);
        if compactions < 2 {
            return;
        }
        let fills = lock(&self.token_usage)
            .as_ref()
            .and_then(|params| TokenUsage::of_params(params.get()))
            .is_some_and(|usage| usage.input_fills_window());
        if fills && !self.context_alarm.swap(true, Ordering::SeqCst) {
            self.stalls.context_alarms.fetch_add(1, Ordering::SeqCst);
            tracing::warn!(
                "thread {}: the input still fills the model's context window after {compactions} compactions in one turn",
                self.thread
            );
        }
    }

    /// Whether the turn was noted ([`TurnState::note`]).
    fn update_turn(&self, turn: Option<String>, started: bool) -> bool {
        let running = turn.is_some();
        if running {
            self.persisted();
            self.unpersisted.store(false, Ordering::SeqCst);
        }
        let mut noted = false;
        self.turn.send_modify(|state| {
            let was_running = state.id.is_some();
            noted = state.note(turn, started);
            match (was_running, state.id.is_some()) {
                (false, true) => self.lease.hub.hold(),
                (true, false) => self.lease.hub.release(),
                _ => {}
            }
        });
        noted
    }

    /// `turn/start`'s answer, handled by the connection that sent it: whether the turn is
    /// noted as running; false when the app-server went away first (its followers were told
    /// without this turn: the caller ends it for its client).
    pub(super) fn turn_answered(&self, turn: String) -> bool {
        self.update_turn(Some(turn), false)
    }

    /// Whether the feed's app-server went away ([`Feed::app_server_gone`]).
    pub(super) fn app_server_went_away(&self) -> bool {
        self.turn.borrow().gone
    }

    /// The app-server went away (the relay ended): the running turn, taken at the same moment
    /// no later one can be noted ([`Feed::turn_answered`] says so to its caller instead).
    pub(super) fn app_server_gone(&self) -> Option<String> {
        let mut taken = None;
        self.turn.send_modify(|state| {
            taken = state.go();
            if taken.is_some() {
                self.lease.hub.release();
            }
        });
        taken
    }

    /// A thread this app-server started and has no turn yet holds it (see `fresh`), for
    /// `grace` at most: an account that needs room is not kept waiting by threads nobody runs
    /// (after it, the thread is lost if its app-server is stopped to make room).
    pub(super) fn started_here(
        self: &Arc<Self>,
        grace: std::time::Duration,
        tasks: &crate::support::task::Tasks,
    ) {
        self.unpersisted.store(true, Ordering::SeqCst);
        if self.fresh.swap(true, Ordering::SeqCst) {
            return;
        }
        self.lease.hub.hold();
        let feed = Arc::downgrade(self);
        tasks.spawn_cancellable(async move {
            tokio::time::sleep(grace).await;
            if let Some(feed) = feed.upgrade() {
                if feed.fresh.load(Ordering::SeqCst) {
                    tracing::info!(
                        "thread {}: no turn {grace:?} after its start; its app-server may be stopped to make room for another account",
                        feed.thread
                    );
                    feed.persisted();
                }
            }
        });
    }

    /// Its first turn began (Codex writes the rollout), or the feed ended.
    pub(super) fn persisted(&self) {
        if self.fresh.swap(false, Ordering::SeqCst) {
            self.lease.hub.release();
        }
    }

    pub(super) fn turn(&self) -> Option<String> {
        self.turn.borrow().id.clone()
    }

    /// Where a server request of this thread goes: the follower that started the running turn,
    /// else the newest follower.
    pub(super) fn answering(&self) -> Option<Arc<Connection>> {
        let followers = self.followers();
        let wanted = *lock(&self.answerer);
        wanted
            .and_then(|number| followers.iter().find(|c| c.number == number).cloned())
            .or_else(|| followers.last().cloned())
    }

    /// The stall watcher's deadline passed: tell the stall once; with recovery on, complete a
    /// turn whose final agent message came without its `turn/completed` for the followers.
    pub(super) async fn stall_due(&self) {
        let Some(verdict) = lock(&self.watch).due() else {
            return;
        };
        let turn = self.turn().unwrap_or_default();
        let kind = match verdict {
            Verdict::Report(kind) => kind,
            Verdict::Recover => StallKind::MissingTurnCompleted,
        };
        *lock(&self.stalls.by_kind).entry(kind.as_str()).or_default() += 1;
        let quiet = lock(&self.watch)
            .status()
            .map_or(0, |stall| stall.quiet_secs);
        match verdict {
            Verdict::Report(kind) => tracing::warn!(
                "turn {turn} on thread {} ({}): stalled ({}): nothing for {quiet} s",
                self.thread,
                self.lease.name,
                kind.as_str()
            ),
            Verdict::Recover => {
                tracing::warn!(
                    "turn {turn} on thread {} ({}): no turn/completed {quiet} s after its final agent message; completed for the client (recovered)",
                    self.thread,
                    self.lease.name
                );
                self.stalls.recovered.fetch_add(1, Ordering::SeqCst);
                let ended = super::connection::completed_turn_end(&self.thread, &turn);
                for follower in self.followers() {
                    follower.push(ended.clone());
                }
                self.set_turn(None);
                *lock(&self.answerer) = None;
                self.fleet.after_run(&self.identity, &self.lease).await;
            }
        }
    }

    /// The model the thread runs on (kept short and printable: it labels metrics).
    pub(super) fn set_workspace(&self, cwd: &str) {
        if cwd.len() <= MAX_WORKSPACE_BYTES {
            *lock(&self.workspace) = Some(cwd.to_string());
        }
    }

    pub(super) fn set_model(&self, model: &str) {
        let model: String = crate::support::text::printable(model)
            .chars()
            .take(100)
            .collect();
        *lock(&self.model) = Some(model);
    }

    /// This thread's model call took its account past the daily budget: told once; every other
    /// running turn of the account is stopped now, and this one is stopped unless it ends by
    /// itself within [`BUDGET_GRACE`] (the call that crossed may have been its answer).
    fn budget_crossed(self: &Arc<Self>) {
        tracing::warn!(
            "account {} went past its token budget (--budget-tokens): its running turns are stopped and every model call is refused until tomorrow (UTC)",
            self.identity.key()
        );
        if let Some(shared) = self.shared.upgrade() {
            let others: Vec<Arc<Feed>> = lock(&shared.feeds)
                .values()
                .filter(|feed| feed.identity == self.identity && !Arc::ptr_eq(feed, self))
                .filter(|feed| feed.turn().is_some())
                .cloned()
                .collect();
            for feed in others {
                shared
                    .tasks
                    .spawn_cancellable(async move { feed.interrupt_turn().await });
            }
            let feed = Arc::clone(self);
            let turn = self.turn();
            shared.tasks.spawn_cancellable(async move {
                tokio::time::sleep(BUDGET_GRACE).await;
                if turn.is_some() && feed.turn() == turn {
                    feed.interrupt_turn().await;
                }
            });
        }
    }

    /// Interrupt this thread's running turn, if it has one (its followers get Codex's
    /// `turn/completed`, interrupted).
    pub(super) async fn interrupt_turn(&self) {
        let Some(turn_id) = self.turn() else {
            return;
        };
        let params = crate::codex::protocol::methods::TurnInterruptParams {
            thread_id: self.thread.clone(),
            turn_id,
        };
        let interrupt = self
            .lease
            .hub
            .peer()
            .call::<crate::codex::protocol::methods::TurnInterrupt>(&params);
        if let Ok(Err(error)) =
            tokio::time::timeout(std::time::Duration::from_secs(2), interrupt).await
        {
            tracing::debug!("turn/interrupt of {}: {error}", self.thread);
        }
    }

    /// One message of the thread to its followers.
    pub(super) async fn deliver(self: &Arc<Self>, message: Inbound) {
        // Across the endpoints of a shared store: nothing of a thread whose lease another
        // endpoint took is relayed from here (checked before each message: a paused endpoint
        // that wakes up relays nothing it no longer holds).
        if let Some(shared) = self.leased.then(|| self.shared.upgrade()).flatten() {
            if let Some(leases) = &shared.leases {
                if leases.may_relay(&self.thread) == super::leases::Relay::Lost {
                    shared.fence(&self.thread);
                    return;
                }
            }
        }
        match message {
            Inbound::Notification(notification) => {
                let item_type = (notification.method == method::ITEM_COMPLETED)
                    .then(|| item_type(notification.params.get()))
                    .flatten();
                let relay = lock(&self.watch).observe(&notification.method, item_type.as_deref());
                if !relay {
                    tracing::debug!(
                        "thread {}: Codex's late turn/completed of a recovered turn, not relayed",
                        self.thread
                    );
                    return;
                }
                let text = format!(
                    r#"{{"method":{},"params":{}}}"#,
                    Value::from(notification.method.as_str()),
                    notification.params.get()
                );
                let followers = self.followers();
                if notification.method == method::THREAD_TOKEN_USAGE_UPDATED
                    && notification.params.get().len() <= MAX_KEPT_USAGE
                {
                    *lock(&self.token_usage) = serde_json::value::RawValue::from_string(
                        notification.params.get().to_string(),
                    )
                    .ok();
                    // A model call of this thread's running turn is counted, once; the usage
                    // Codex tells again when a thread is resumed (no turn running, or another
                    // turn's) is not a call.
                    let running = self.turn();
                    let of_running = running.is_some()
                        && notification.scope().turn_id.as_deref() == running.as_deref();
                    if of_running {
                        let model = lock(&self.model).clone();
                        let budget = if self.usage.on_shared_store() {
                            // Added in the shared database: off the async workers, in order.
                            let (usage, identity, params) = (
                                Arc::clone(&self.usage),
                                self.identity.key(),
                                notification.params.get().to_string(),
                            );
                            tokio::task::spawn_blocking(move || {
                                usage.add(&identity, model.as_deref(), &params)
                            })
                            .await
                            .unwrap_or(Budget::Within)
                        } else {
                            self.usage.add(
                                &self.identity.key(),
                                model.as_deref(),
                                notification.params.get(),
                            )
                        };
                        match budget {
                            Budget::Within => {}
                            Budget::Crossed => self.budget_crossed(),
                            // A call made after the budget was spent: its turn stops now.
                            Budget::Past => self.interrupt_turn().await,
                        }
                    }
                    self.check_context();
                }
                match notification.method.as_str() {
                    method::THREAD_COMPACTED => {
                        self.compactions.fetch_add(1, Ordering::SeqCst);
                        self.check_context();
                    }
                    method::TURN_STARTED => {
                        if let Some(turn) = notification.scope().turn_id {
                            self.turn_started(turn.into_owned());
                        }
                    }
                    method::TURN_COMPLETED => {
                        let status = match &notification.kind {
                            NotificationKind::TurnCompleted {
                                state: Some(state), ..
                            } => state.as_str(),
                            _ => "unknown",
                        };
                        *lock(&self.stalls.turns_ended).entry(status).or_default() += 1;
                        // Queued before the turn counts as ended: a draining stop that sees no
                        // running turn closes after this message, never before it.
                        for follower in &followers {
                            follower.push(text.clone());
                        }
                        self.set_turn(None);
                        *lock(&self.answerer) = None;
                        self.fleet.after_run(&self.identity, &self.lease).await;
                        return;
                    }
                    _ => {}
                }
                for follower in &followers {
                    follower.push(text.clone());
                }
            }
            Inbound::Request(request) => match self.answering() {
                Some(connection) => connection.relay_request(&self.lease.hub, request).await,
                None => {
                    let _ = self
                        .lease
                        .hub
                        .peer()
                        .respond_error(
                            request.id,
                            INTERNAL_ERROR,
                            "clawbridge: no client follows this thread".into(),
                        )
                        .await;
                }
            },
            Inbound::Response(_) => {}
        }
    }
}

/// The `type` of an `item/completed`'s item.
pub(super) fn item_type(params: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Item {
        #[serde(rename = "type")]
        kind: String,
    }
    #[derive(serde::Deserialize)]
    struct Completed {
        item: Item,
    }
    serde_json::from_str::<Completed>(params)
        .ok()
        .map(|completed| completed.item.kind)
}

#[cfg(test)]
mod tests {
    use super::TurnState;

    #[test]
    fn a_turn_is_noted_started_and_ended() {
        let mut state = TurnState::default();
        assert!(state.note(Some("t1".into()), false));
        assert_eq!((state.id.as_deref(), state.active), (Some("t1"), false));
        assert!(state.note(Some("t1".into()), true));
        assert!(state.active);
        // `turn/start`'s answer after `turn/started` keeps it active.
        assert!(state.note(Some("t1".into()), false));
        assert!(state.active);
        assert!(state.note(None, false));
        assert_eq!(state, TurnState::default());
    }

    /// Protection (a turn never left hanging): once the app-server went away, the running turn
    /// is taken for the followers, and a `turn/start` answer handled afterwards is refused, so
    /// its connection ends the turn for its client.
    #[test]
    fn after_the_app_server_went_away_no_turn_is_noted() {
        let mut state = TurnState::default();
        assert!(state.note(Some("t1".into()), true));
        assert_eq!(state.go().as_deref(), Some("t1"));
        assert!(!state.active);
        assert!(!state.note(Some("t2".into()), false));
        assert_eq!(state.id, None);
        assert_eq!(state.go(), None);
        // Ending it is still fine.
        assert!(state.note(None, false));
    }
}

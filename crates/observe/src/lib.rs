//! The observation wing: what clawbridge learns from the lines a face carries between a client
//! and Codex, off the carrying path, the same for every face (the stdio slot and the endpoint's
//! connections feed their client's lines; `serve` feeds its own lines to each app-server through
//! the peer's tap). [`tap`] starts the observer and the live trace; [`audit`] is the live audit
//! of each turn; the transcript writer is `traffic::transcript` (below this layer, so the peer's
//! tap can use it).
//!
//! The pumps hand a copy of every complete line to one [`Observer`] task through an
//! [`ObserverQueue`] bounded in bytes; a full queue skips the copy (counted, with one warning),
//! never a forwarded line. The observer:
//! - checks every message in both directions against the schema generated from the running
//!   Codex ([`clawbridge_codex::schema::conformance`]): client requests and Codex's answers (paired by
//!   id, per connection), notifications both ways, Codex's server requests and the client's
//!   answers. Methods the schema does not know are counted as unknown, never dropped; at the end
//!   one summary line per method goes to `conformance.jsonl` (read back by
//!   `clawbridge app-server report DIR`, `proxy::report`);
//! - checks `thread/start`, `thread/resume`, `turn/start` and `turn/steer` params field by field
//!   ([`clawbridge_codex::schema`]), with a `check` line each, as before;
//! - records the client (OpenClaw's `clientInfo`) next to the Codex version, and remembers the
//!   developer instructions and working folders that the offline captures need to label and
//!   redact model requests ([`Known`], which the capture writer reads:
//!   [`clawbridge_traffic::capture::live`]).
//!
//! Bounded: requests waiting for their answer ([`clawbridge_traffic::transcript::MAX_PENDING`], the oldest forgotten
//! first), methods tallied ([`MAX_METHODS`], the rest under one row), problem lines written per
//! method ([`MAX_PROBLEM_LINES`]).

pub mod audit;
pub mod tap;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use clawbridge_codex::protocol::observed::Observed;
use clawbridge_codex::protocol::table::name as method;
use clawbridge_codex::protocol::wire::Direction;
use clawbridge_codex::schema::conformance::{Flow, Verdict, WireSchemas};
use clawbridge_codex::schema::{ParamsSchemas, Problem};
use clawbridge_support::queue::{byte_queue, ByteReceiver, ByteSender};
use clawbridge_traffic::capture::live::Known;

/// Bytes of lines waiting for the observer at most (each line counts at least 256).
pub const OBSERVER_QUEUE_BYTES: usize = 64 * 1024 * 1024;
/// Distinct (method, flow) rows tallied; further methods share one row.
pub const MAX_METHODS: usize = 512;
/// `problem` lines written per row (the rest are counted only).
pub const MAX_PROBLEM_LINES: u64 = 16;
/// Problems kept per row as examples for the summary.
const MAX_EXAMPLES: usize = 3;
/// Longest method name kept (a longer one is cut).
const MAX_METHOD_CHARS: usize = 128;

/// One line as a pump saw it: which connection (0 for the stdio proxy), which way.
pub struct Tapped {
    pub stream: usize,
    pub direction: Direction,
    pub line: Vec<u8>,
}

/// The pumps' side of the observer: never waits, bounded in bytes.
#[derive(Clone)]
pub struct ObserverQueue {
    /// What the captures redact and label by, fed from the client's requests as they are
    /// offered (before they reach Codex), not when the observer gets to them: a model request
    /// is filed as soon as Codex sends it, and the observer may still be loading its schema.
    known: Option<Arc<Mutex<Known>>>,
    queue: ByteSender<Tapped>,
    skipped: Arc<AtomicU64>,
    /// Requests clawbridge routed in place of the client's (`--route spec`).
    routed: Arc<AtomicU64>,
    /// Messages with schema problems, by method (for `/metrics`).
    problems: Arc<Mutex<BTreeMap<String, u64>>>,
    warned: Arc<AtomicBool>,
}

impl std::fmt::Debug for ObserverQueue {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ObserverQueue")
            .field("free_bytes", &self.queue.free_bytes())
            .finish_non_exhaustive()
    }
}

/// The observer's side of the queue.
pub struct ObserverFeed {
    lines: ByteReceiver<Tapped>,
    skipped: Arc<AtomicU64>,
    routed: Arc<AtomicU64>,
    problems: Arc<Mutex<BTreeMap<String, u64>>>,
}

impl ObserverFeed {
    /// The next queued copy, if one is queued already (the tests of the pumps' order read it).
    pub fn try_next(&mut self) -> Option<Tapped> {
        self.lines.try_recv()
    }
}

/// A queue of `bytes` at most.
pub fn observer_queue(bytes: usize) -> (ObserverQueue, ObserverFeed) {
    let (queue, lines) = byte_queue(bytes, None);
    let skipped = Arc::new(AtomicU64::new(0));
    let routed = Arc::new(AtomicU64::new(0));
    let problems = Arc::new(Mutex::new(BTreeMap::new()));
    (
        ObserverQueue {
            known: None,
            queue,
            skipped: Arc::clone(&skipped),
            routed: Arc::clone(&routed),
            problems: Arc::clone(&problems),
            warned: Arc::new(AtomicBool::new(false)),
        },
        ObserverFeed {
            lines,
            skipped,
            routed,
            problems,
        },
    )
}

/// Tell `known` what a client's request line says, when it is one of the few it reads (a cheap
/// look for the method first: most lines are not).
pub fn observe_request(known: &Mutex<Known>, line: &[u8]) {
    const READ: [&[u8]; 6] = [
        b"\"initialize\"",
        b"\"thread/start\"",
        b"\"thread/resume\"",
        b"\"thread/fork\"",
        b"\"thread/inject_items\"",
        b"\"turn/start\"",
    ];
    let read = READ
        .iter()
        .any(|method| memchr::memmem::find(line, method).is_some());
    if !read {
        return;
    }
    if let Ok(message) = serde_json::from_slice::<Value>(line) {
        if let Ok(mut known) = known.lock() {
            known.observe_request(&message);
        }
    }
}

impl ObserverQueue {
    /// Feed `known` from the client's requests as they are offered.
    pub fn feeding(mut self, known: Arc<Mutex<Known>>) -> Self {
        self.known = Some(known);
        self
    }

    /// What clawbridge sent Codex in place of a client's request (`--route spec`): the captures
    /// learn its texts (the developer instructions they label by), nothing is checked twice.
    pub fn routed(&self, line: &[u8]) {
        self.routed.fetch_add(1, Ordering::Relaxed);
        if let Some(known) = &self.known {
            observe_request(known, line);
        }
    }

    /// Copies the checker had no room for.
    pub fn skipped(&self) -> u64 {
        self.skipped.load(Ordering::Relaxed)
    }

    /// Messages with schema problems so far, by method.
    pub fn problems(&self) -> BTreeMap<String, u64> {
        self.problems
            .lock()
            .map(|problems| problems.clone())
            .unwrap_or_default()
    }

    /// Queue a copy of a line if the byte budget has room; never waits.
    pub fn offer(&self, stream: usize, direction: Direction, line: Vec<u8>) {
        if let (Direction::In, Some(known)) = (direction, &self.known) {
            observe_request(known, &line);
        }
        // A line counts at least 256 bytes: many tiny lines cost their bookkeeping too.
        let queued = self.queue.offer_with(line.len().max(256), || Tapped {
            stream,
            direction,
            line,
        });
        if !queued {
            self.skipped.fetch_add(1, Ordering::Relaxed);
            if !self.warned.swap(true, Ordering::Relaxed) {
                tracing::warn!("conformance: the checker is behind; a message went unchecked (counted as skipped)");
            }
        }
    }
}

/// Where the schemas come from, once they are there: the params schemas, the whole-protocol
/// schemas (or why not), and whether they were generated now.
pub type SchemaSource = tokio::task::JoinHandle<Result<LoadedSchemas, String>>;

/// What [`SchemaSource`] gives.
pub struct LoadedSchemas {
    pub params: ParamsSchemas,
    pub wire: Result<WireSchemas, String>,
    pub generated: bool,
}

/// One row of the tally: a method in one flow.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    pub seen: u64,
    pub valid: u64,
    pub problems: u64,
    pub unknown: u64,
    pub unchecked: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<Problem>,
}

impl Counts {
    pub fn add(&mut self, other: &Counts) {
        self.seen += other.seen;
        self.valid += other.valid;
        self.problems += other.problems;
        self.unknown += other.unknown;
        self.unchecked += other.unchecked;
        for example in &other.examples {
            if self.examples.len() < MAX_EXAMPLES && !self.examples.contains(example) {
                self.examples.push(example.clone());
            }
        }
    }
}

/// A request waiting for its answer: who sent it (its connection and direction) and its id.
type PendingKey = (usize, Direction, String);

/// The observer's state.
pub struct Observer {
    /// `app-server --audit`: each turn audited as it starts.
    audit: Option<audit::LiveAudit>,
    /// Where problems per method are told (`/metrics`), once running.
    shared_problems: Option<Arc<Mutex<BTreeMap<String, u64>>>>,
    schema: Option<SchemaSource>,
    /// Set while the schema is still loading (generating a new Codex version's takes seconds):
    /// a stop then waits longer for the summary.
    pub schema_pending: Arc<AtomicBool>,
    schemas: Option<ParamsSchemas>,
    wire: Option<WireSchemas>,
    log: Option<PathBuf>,
    known: Arc<Mutex<Known>>,
    initialize_id: Option<Value>,
    versions_recorded: bool,
    user_agent: Option<String>,
    failed: bool,
    /// Requests waiting for their answer -> (the request's method, its arrival number).
    pending: HashMap<PendingKey, (String, u64)>,
    arrivals: u64,
    tally: BTreeMap<(String, Flow), Counts>,
    /// The live trace, told every message (`--otel-endpoint`).
    trace: Option<Arc<clawbridge_traffic::trace::LiveTrace>>,
}

/// The method of a message, cut to [`MAX_METHOD_CHARS`].
fn method_name(method: &str) -> String {
    match method.char_indices().nth(MAX_METHOD_CHARS) {
        Some((at, _)) => format!("{}…", &method[..at]),
        None => method.to_string(),
    }
}

/// The tally row of `(method, flow)`; past [`MAX_METHODS`] rows, a shared one. (A function of
/// the tally alone, so the caller may hold other fields of the observer meanwhile.)
fn row_of(tally: &mut BTreeMap<(String, Flow), Counts>, method: String, flow: Flow) -> &mut Counts {
    let key = (method, flow);
    if tally.len() >= MAX_METHODS && !tally.contains_key(&key) {
        return tally
            .entry(("(other methods)".to_string(), flow))
            .or_default();
    }
    tally.entry(key).or_default()
}

/// An id as a map key that keeps its JSON type (`1` and `"1"` differ).
fn id_key(id: &Value) -> String {
    id.to_string()
}

impl Observer {
    /// `schema` is `None` when checks are off; `log` is the `conformance.jsonl` to append to.
    pub fn new(
        schema: Option<SchemaSource>,
        log: Option<PathBuf>,
        known: Arc<Mutex<Known>>,
    ) -> Self {
        let trace = known.lock().ok().and_then(|known| known.trace.clone());
        Self {
            audit: None,
            shared_problems: None,
            trace,
            schema_pending: Arc::new(AtomicBool::new(schema.is_some())),
            schema,
            schemas: None,
            wire: None,
            log,
            known,
            initialize_id: None,
            versions_recorded: false,
            user_agent: None,
            failed: false,
            pending: HashMap::new(),
            arrivals: 0,
            tally: BTreeMap::new(),
        }
    }

    /// Also audit each turn a client starts (`app-server --audit`).
    pub fn with_audit(mut self, audit: Option<audit::LiveAudit>) -> Self {
        self.audit = audit;
        self
    }

    /// Take lines until the pumps are done or `stop` fires (what is queued then is still
    /// taken), then write the summary.
    pub async fn run(mut self, mut feed: ObserverFeed, stop: tokio::sync::oneshot::Receiver<()>) {
        self.shared_problems = Some(Arc::clone(&feed.problems));
        let mut stop = stop;
        loop {
            tokio::select! {
                biased;
                item = feed.lines.recv() => match item {
                    Some(tapped) => self.take(tapped).await,
                    None => break,
                },
                _ = &mut stop => {
                    while let Some(tapped) = feed.lines.try_recv() {
                        self.take(tapped).await;
                    }
                    break;
                }
            }
        }
        self.summarise(
            feed.skipped.load(Ordering::Relaxed),
            feed.routed.load(Ordering::Relaxed),
        );
    }

    async fn take(&mut self, tapped: Tapped) {
        let Ok(message) = serde_json::from_slice::<Value>(&tapped.line) else {
            self.malformed("(not JSON)", tapped.direction);
            return;
        };
        if let Some(trace) = &self.trace {
            let side = match tapped.direction {
                Direction::In => clawbridge_traffic::trace::Side::Client,
                Direction::Out => clawbridge_traffic::trace::Side::Codex,
            };
            trace.message(tapped.stream, side, &message);
        }
        self.observe(tapped.direction, &message).await;
        if let Some(audit) = &mut self.audit {
            audit
                .observe(tapped.stream, tapped.direction, &message)
                .await;
        }
        self.conform(tapped.stream, tapped.direction, &message);
    }

    async fn observe(&mut self, direction: Direction, message: &Value) {
        let observed = Observed::of(message);
        match (direction, observed.method.unwrap_or_default()) {
            // What the captures learn from a request was told to `known` when it was offered
            // (`ObserverQueue::feeding`), not here.
            (Direction::In, method::INITIALIZE) => {
                self.initialize_id = observed.id.cloned();
                self.ensure_schema().await;
            }
            (Direction::Out, "")
                if self.initialize_id.is_some() && observed.id == self.initialize_id.as_ref() =>
            {
                self.user_agent = observed.user_agent().map(str::to_string);
                self.record_versions().await;
            }
            (Direction::In, method) if ParamsSchemas::checks(method) => {
                self.record_versions().await;
                self.check(method, &observed);
            }
            _ => {}
        }
    }

    /// A line that is no message at all, counted as a problem under `what`, in the family of
    /// its direction's requests (in) or notifications (out).
    fn malformed(&mut self, what: &str, direction: Direction) {
        let flow = match direction {
            Direction::In => Flow::Request,
            Direction::Out => Flow::Notification,
        };
        let row = self.row(what.to_string(), flow);
        row.seen += 1;
        row.problems += 1;
    }

    /// The tally row of `(method, flow)`; past [`MAX_METHODS`] rows, a shared one.
    fn row(&mut self, method: String, flow: Flow) -> &mut Counts {
        row_of(&mut self.tally, method, flow)
    }

    /// Classify a message, pair answers with their requests, and check it.
    fn conform(&mut self, stream: usize, direction: Direction, message: &Value) {
        let observed = Observed::of(message);
        let method = observed.method.map(method_name);
        let id = observed.id;
        let (flow, method) = match (direction, method, id) {
            (Direction::In, Some(method), Some(id)) => {
                self.remember(stream, direction, id, &method);
                (Flow::Request, method)
            }
            (Direction::In, Some(method), None) => (Flow::ClientNotification, method),
            (Direction::Out, Some(method), Some(id)) => {
                self.remember(stream, direction, id, &method);
                (Flow::ServerRequest, method)
            }
            (Direction::Out, Some(method), None) => (Flow::Notification, method),
            (_, None, Some(id)) => {
                let (flow, asker) = match direction {
                    Direction::Out => (Flow::Response, Direction::In),
                    Direction::In => (Flow::ServerRequestAnswer, Direction::Out),
                };
                match self.pending.remove(&(stream, asker, id_key(id))) {
                    Some((method, _)) => (flow, method),
                    None => {
                        let row = self.row("(unmatched answer)".into(), flow);
                        row.seen += 1;
                        row.unchecked += 1;
                        return;
                    }
                }
            }
            (_, None, None) => {
                self.malformed("(not JSON-RPC)", direction);
                return;
            }
        };
        let verdict = match self.wire.as_mut() {
            Some(wire) => wire.check(flow, &method, message),
            None => Verdict::Unchecked("no schema".into()),
        };
        let version = self.wire.as_ref().map(|wire| wire.version.as_str());
        let row = row_of(&mut self.tally, method.clone(), flow);
        row.seen += 1;
        match verdict {
            Verdict::Valid => row.valid += 1,
            Verdict::Unchecked(_) => row.unchecked += 1,
            Verdict::UnknownMethod => {
                row.unknown += 1;
                if row.unknown == 1 {
                    // A client's is the operator's to look at (a client ahead of the pinned
                    // Codex); what Codex itself sends beyond its own schema (its experimental
                    // notifications) no operator can act on: recorded, told at debug level.
                    let from_codex = matches!(
                        flow,
                        Flow::Response | Flow::Notification | Flow::ServerRequest
                    );
                    if from_codex {
                        tracing::debug!(
                            "conformance: {} `{method}` is not in Codex {}'s schema (forwarded, recorded as unknown)",
                            flow.as_str(),
                            version.unwrap_or("?")
                        );
                    } else {
                        tracing::warn!(
                            "conformance: {} `{method}` is not in Codex {}'s schema (forwarded, recorded as unknown)",
                            flow.as_str(),
                            version.unwrap_or("?")
                        );
                    }
                }
            }
            Verdict::Problems(problems) => {
                row.problems += 1;
                if let Some(Ok(mut shared)) =
                    self.shared_problems.as_ref().map(|shared| shared.lock())
                {
                    let key = if shared.len() >= MAX_METHODS && !shared.contains_key(&method) {
                        "(other methods)".to_string()
                    } else {
                        method.clone()
                    };
                    *shared.entry(key).or_default() += 1;
                }
                for problem in &problems {
                    if row.examples.len() < MAX_EXAMPLES && !row.examples.contains(problem) {
                        row.examples.push(problem.clone());
                    }
                }
                // The params of the methods `check` reads field by field already have their own
                // warning and `check` line; here they are only counted.
                let own_check = flow == Flow::Request && ParamsSchemas::checks(&method);
                let first = row.problems == 1 && !own_check;
                let write = row.problems <= MAX_PROBLEM_LINES && !own_check;
                if first {
                    if let Some(problem) = problems.first() {
                        tracing::warn!(
                            "conformance: {} {method} {}: {} [Codex {}]",
                            flow.as_str(),
                            problem.field,
                            problem.message,
                            version.unwrap_or("?")
                        );
                    }
                }
                if write {
                    let entry = json!({
                        "kind": "problem",
                        "method": method,
                        "message": flow,
                        "id": observed.id,
                        "threadId": observed.thread_id(),
                        "problems": problems,
                    });
                    self.append(&entry);
                }
            }
        }
    }

    /// Remember a request until its answer comes (the oldest is forgotten when full).
    fn remember(&mut self, stream: usize, direction: Direction, id: &Value, method: &str) {
        if self.pending.len() >= clawbridge_traffic::transcript::MAX_PENDING {
            if let Some(oldest) = self
                .pending
                .iter()
                .min_by_key(|(_, (_, arrival))| *arrival)
                .map(|(key, _)| key.clone())
            {
                self.pending.remove(&oldest);
            }
        }
        self.arrivals += 1;
        self.pending.insert(
            (stream, direction, id_key(id)),
            (method.to_string(), self.arrivals),
        );
    }

    /// One `method` line per row, and a `summary` line, at the end.
    fn summarise(&mut self, skipped: u64, routed: u64) {
        let (client, codex) = self.versions();
        let entry = json!({
            "kind": "summary",
            "client": client,
            "codexVersion": codex,
            "schemaChecks": self.wire.is_some(),
            "skipped": skipped,
            "routed": routed,
            "waitingAnswers": self.pending.len(),
        });
        self.append(&entry);
        let rows = std::mem::take(&mut self.tally);
        for ((method, flow), counts) in rows {
            let mut entry = json!({"kind": "method", "method": method, "message": flow});
            if let (Some(object), Ok(Value::Object(counts))) =
                (entry.as_object_mut(), serde_json::to_value(&counts))
            {
                object.extend(counts);
            }
            self.append(&entry);
        }
    }

    /// Wait for the schema (once) and note the versions in the log.
    async fn ensure_schema(&mut self) {
        let Some(source) = self.schema.take() else {
            return;
        };
        let loaded = source.await;
        self.schema_pending.store(false, Ordering::Relaxed);
        match loaded {
            Ok(Ok(loaded)) => {
                tracing::debug!(
                    "conformance: Codex {} schema {}",
                    loaded.params.version,
                    if loaded.generated {
                        "generated"
                    } else {
                        "from the cache"
                    }
                );
                if let Ok(mut known) = self.known.lock() {
                    known.codex_version = Some(loaded.params.version.clone());
                }
                self.schemas = Some(loaded.params);
                match loaded.wire {
                    Ok(wire) => self.wire = Some(wire),
                    Err(message) => {
                        tracing::warn!("conformance: only params are checked ({message})")
                    }
                }
            }
            Ok(Err(message)) => {
                tracing::warn!("conformance checks are off: {message}");
            }
            Err(error) => tracing::warn!("conformance checks are off: {error}"),
        }
    }

    async fn record_versions(&mut self) {
        self.ensure_schema().await;
        if self.versions_recorded {
            return;
        }
        let (client, codex) = self.versions();
        if client.is_none() && self.user_agent.is_none() {
            return; // nothing known yet
        }
        self.versions_recorded = true;
        let entry = json!({
            "kind": "versions",
            "client": client,
            "codexVersion": codex,
            "userAgent": self.user_agent,
            "schemaChecks": self.schemas.is_some(),
        });
        tracing::info!(
            "client {} with Codex {}",
            client.as_deref().unwrap_or("?"),
            codex.as_deref().unwrap_or("?")
        );
        self.append(&entry);
    }

    fn versions(&self) -> (Option<String>, Option<String>) {
        self.known
            .lock()
            .map(|known| (known.client.clone(), known.codex_version.clone()))
            .unwrap_or_default()
    }

    fn check(&mut self, method: &str, observed: &Observed<'_>) {
        let Some(schemas) = &self.schemas else {
            return;
        };
        let problems: Vec<Problem> = schemas.check(method, observed.params);
        let (client, codex) = self.versions();
        for problem in &problems {
            tracing::warn!(
                "conformance: {method} {} ({:?}): {} [client {}, Codex {}]",
                problem.field,
                problem.kind,
                problem.message,
                client.as_deref().unwrap_or("?"),
                codex.as_deref().unwrap_or("?")
            );
        }
        let entry = json!({
            "kind": "check",
            "method": method,
            "id": observed.id,
            "threadId": observed.thread_id(),
            "client": client,
            "codexVersion": codex,
            "problems": problems,
        });
        self.append(&entry);
    }

    fn append(&mut self, entry: &Value) {
        let Some(path) = &self.log else {
            return;
        };
        if let Err(error) = clawbridge_support::jsonl::append_line(path, entry) {
            if !self.failed {
                tracing::warn!("{}: {error}", path.display());
                self.failed = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An observer with a small schema (the folder stays as long as `dir`: answers' schemas are
    /// read when first needed).
    fn observer(dir: &std::path::Path) -> (Observer, PathBuf) {
        let schema = crate::schema_folder::folder();
        let wire = dir.join("schema");
        std::fs::rename(schema.path(), &wire).expect("move the schema");
        let log = dir.join("conformance.jsonl");
        let mut observer = Observer::new(
            None,
            Some(log.clone()),
            Arc::new(Mutex::new(Known::default())),
        );
        observer.wire = Some(WireSchemas::load(&wire, "9.9.9").expect("load"));
        (observer, log)
    }

    /// Protection (Security 3, item 5): the log is never written through a planted link.
    /// Protection: what the captures redact by is known as soon as the request is offered,
    /// with no observer running yet (it may be loading its schema while Codex already calls
    /// the model: a capture filed then kept the workspace path).
    #[test]
    fn the_captures_learn_a_thread_s_folder_when_its_request_is_offered() {
        let known = Arc::new(Mutex::new(Known::default()));
        let (queue, _feed) = observer_queue(1 << 20);
        let queue = queue.feeding(Arc::clone(&known));
        let start = json!({"id": 1, "method": "thread/start", "params": {"cwd": "/srv/agents/workspace-ops", "developerInstructions": "SOUL"}});
        queue.offer(1, Direction::Out, start.to_string().into_bytes());
        assert!(
            !format!("{:?}", known.lock().expect("known")).contains("workspace-ops"),
            "only the client's requests"
        );
        queue.offer(1, Direction::In, start.to_string().into_bytes());
        let now = format!("{:?}", known.lock().expect("known"));
        assert!(
            now.contains("/srv/agents/workspace-ops") && now.contains("SOUL"),
            "{now}"
        );
    }

    #[test]
    fn the_log_is_never_written_through_a_link() {
        let dir = tempfile::tempdir().expect("dir");
        let (mut observer, log) = observer(dir.path());
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious\n").expect("victim");
        std::os::unix::fs::symlink(&victim, &log).expect("plant");
        observer.append(&json!({"kind": "summary"}));
        assert_eq!(
            std::fs::read_to_string(&victim).expect("victim"),
            "precious\n"
        );
        assert!(observer.failed, "the refusal is told once");
    }

    fn lines(path: &std::path::Path) -> Vec<Value> {
        std::fs::read_to_string(path)
            .expect("log")
            .lines()
            .map(|line| serde_json::from_str(line).expect("json"))
            .collect()
    }

    /// Answers are paired with their request by id (its JSON type kept) per connection, every
    /// family is tallied, and an unknown method is counted, not lost.
    #[tokio::test]
    async fn every_message_is_tallied_per_method() {
        let dir = tempfile::tempdir().expect("dir");
        let (mut observer, log) = observer(dir.path());
        let feed: [(usize, Direction, &str); 9] = [
            (
                0,
                Direction::In,
                r#"{"id":1,"method":"thread/start","params":{"cwd":"/w"}}"#,
            ),
            (
                0,
                Direction::In,
                r#"{"id":"1","method":"bogus/thing","params":{}}"#,
            ),
            (
                1,
                Direction::In,
                r#"{"id":1,"method":"thread/start","params":{"cwd":3}}"#,
            ),
            (
                0,
                Direction::Out,
                r#"{"id":"1","error":{"code":-32601,"message":"unknown"}}"#,
            ),
            (
                1,
                Direction::Out,
                r#"{"id":1,"result":{"thread":{"id":"a"}}}"#,
            ),
            (0, Direction::Out, r#"{"id":1,"result":{"thread":{}}}"#),
            (
                0,
                Direction::Out,
                r#"{"method":"turn/started","params":{"threadId":"a"}}"#,
            ),
            (0, Direction::Out, r#"{"id":9,"result":{}}"#),
            (0, Direction::In, "not json"),
        ];
        for (stream, direction, line) in feed {
            observer
                .take(Tapped {
                    stream,
                    direction,
                    line: line.as_bytes().to_vec(),
                })
                .await;
        }
        observer.summarise(2, 0);
        let entries = lines(&log);
        let row = |method: &str, flow: &str| -> Value {
            entries
                .iter()
                .find(|entry| {
                    entry["kind"] == "method"
                        && entry["method"] == method
                        && entry["message"] == flow
                })
                .cloned()
                .unwrap_or_else(|| panic!("no row {method} {flow}: {entries:#?}"))
        };
        let counts = |value: Value| {
            (
                value["seen"].as_u64(),
                value["valid"].as_u64(),
                value["problems"].as_u64(),
                value["unknown"].as_u64(),
                value["unchecked"].as_u64(),
            )
        };
        assert_eq!(
            counts(row("thread/start", "request")),
            (Some(2), Some(1), Some(1), Some(0), Some(0))
        );
        assert_eq!(
            counts(row("thread/start", "response")),
            (Some(2), Some(1), Some(1), Some(0), Some(0)),
            "connection 1's answer went to its own request, connection 0's is missing thread.id"
        );
        assert_eq!(
            counts(row("bogus/thing", "request")),
            (Some(1), Some(0), Some(0), Some(1), Some(0))
        );
        assert_eq!(
            counts(row("bogus/thing", "response")),
            (Some(1), Some(0), Some(0), Some(1), Some(0))
        );
        assert_eq!(
            counts(row("turn/started", "notification")),
            (Some(1), Some(1), Some(0), Some(0), Some(0))
        );
        assert_eq!(counts(row("(unmatched answer)", "response")).0, Some(1));
        assert_eq!(counts(row("(not JSON)", "request")).2, Some(1));
        let summary = entries
            .iter()
            .find(|entry| entry["kind"] == "summary")
            .expect("summary");
        assert_eq!(summary["skipped"], 2);
        assert_eq!(summary["schemaChecks"], true);
        assert!(
            entries
                .iter()
                .any(|entry| entry["kind"] == "problem" && entry["method"] == "thread/start"),
            "a problem line names the method: {entries:#?}"
        );
    }

    /// Protection: the pending map and the tally are bounded.
    #[tokio::test]
    async fn pending_requests_and_methods_are_bounded() {
        let dir = tempfile::tempdir().expect("dir");
        let (mut observer, _) = observer(dir.path());
        for index in 0..(clawbridge_traffic::transcript::MAX_PENDING + 10) {
            let line = format!(
                r#"{{"id":{index},"method":"m{}","params":{{}}}}"#,
                index % 1000
            );
            observer
                .take(Tapped {
                    stream: 0,
                    direction: Direction::In,
                    line: line.into_bytes(),
                })
                .await;
        }
        assert_eq!(
            observer.pending.len(),
            clawbridge_traffic::transcript::MAX_PENDING
        );
        assert!(
            !observer
                .pending
                .contains_key(&(0, Direction::In, "0".into())),
            "the oldest went first"
        );
        assert_eq!(
            observer.tally.len(),
            MAX_METHODS + 1,
            "one shared row past the limit"
        );
        assert!(observer
            .tally
            .contains_key(&("(other methods)".into(), Flow::Request)));
    }

    /// Protection: the queue is bounded in bytes and counts what it skipped.
    #[test]
    fn a_full_queue_skips_and_counts() {
        let (queue, feed) = observer_queue(1024);
        for _ in 0..10 {
            queue.offer(0, Direction::In, vec![b'x'; 300]);
        }
        assert_eq!(
            feed.skipped.load(Ordering::Relaxed),
            7,
            "three 300-byte lines fit in 1024"
        );
    }
}

/// The codex crate's small schema folder, which its tests build too.
#[cfg(test)]
#[path = "../../codex/tests/support/schema_folder.rs"]
mod schema_folder;

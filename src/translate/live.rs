//! Live routing (`app-server --route spec`): the Codex requests a real OpenClaw sends, with the
//! workspace files moved to where the spec puts them.
//!
//! OpenClaw's own Codex harness puts the bootstrap files where its current release does (the
//! persona files as turn-scoped collaboration text, TOOLS.md nowhere, MEMORY.md as a pointer
//! only in some sessions; docs/audit.md has the record). In the users' live loop clawbridge sits
//! between that OpenClaw and Codex, so it can route them as `params` does: for each
//! `thread/start`, `thread/resume` and `turn/start`, the workspace at the thread's `cwd` is read
//! (confined to that folder, capped, by the same loader as every command), the run is inferred
//! from the params as the audit infers it, and clawbridge's own routing and texts
//! ([`crate::routing`], [`crate::render::codex`]) say where each file goes:
//! - what OpenClaw put of a file (its text, whole or cut, with the heading that named it, or a
//!   pointer line naming it) is taken out of OpenClaw's layers, and a section or tag block left
//!   with nothing but its introduction goes with it;
//! - the spec's text of the file is put where the spec puts it (the workspace block at the end of
//!   the thread's developer instructions, the memory note and the heartbeat pointer at the end of
//!   the collaboration instructions, turn-scoped files as runtime context before the input);
//! - a file OpenClaw sent that cannot be taken out (its text found where it cannot be cut out
//!   cleanly) is left as OpenClaw sent it and not added again, and the rewrite says so: a file
//!   reaches the model once, never twice;
//! - everything else OpenClaw sent (its runtime text, tools, additional context, the skills
//!   catalog it builds from its own config) is kept as sent.
//!
//! The rewrite is a pure function of the params, the workspace files and what the thread's
//! opening told ([`ThreadFacts`]), so consecutive turns of a thread send the same bytes and keep
//! the prompt cache. What the params cannot tell is inferred and said: the session key is not on
//! OpenClaw's wire, so a thread is a subagent's when OpenClaw pasted AGENTS.md into its
//! developer instructions (OpenClaw does that only for the subagent allow-list), and the memory
//! tools are the ones the thread's dynamic tools (or OpenClaw's list of deferred tools) name.
//! Budgets are OpenClaw's defaults: its config is not on the wire either.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::path::Path;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::routing::{RoutedWorkspace, MEMORY_TOOLS};

/// Characters of a file's (whitespace-collapsed) start that count as finding its head.
pub const HEAD_CHARS: usize = 120;
/// Threads the router remembers (the oldest forgotten first).
pub const MAX_THREADS: usize = 4096;
/// Thread openings awaiting their answer, remembered at most.
pub const MAX_PENDING: usize = 1024;
/// Longest file text looked for whatever whitespace separates its words (OpenClaw's per-file
/// budget is 20 000 characters).
const MAX_PATTERN_BYTES: usize = 128 * 1024;

/// How the app-server routes OpenClaw's requests (`--route`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LiveRoute {
    /// Byte for byte, as OpenClaw sent them.
    #[default]
    AsSent,
    /// The workspace files where the spec puts them.
    Spec,
}

impl LiveRoute {
    pub fn as_str(self) -> &'static str {
        match self {
            LiveRoute::AsSent => "as-sent",
            LiveRoute::Spec => "spec",
        }
    }

    pub fn parse(text: &str) -> Option<LiveRoute> {
        match text {
            "as-sent" => Some(LiveRoute::AsSent),
            "spec" => Some(LiveRoute::Spec),
            _ => None,
        }
    }
}

/// How a file's text is found in a text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum How {
    Whole,
    /// Its head only: cut.
    Cut,
    /// Named, without its content.
    Pointer,
}

impl How {
    pub fn label(self) -> &'static str {
        match self {
            How::Whole => "whole",
            How::Cut => "cut",
            How::Pointer => "pointer",
        }
    }
}

/// Text collapsed to single spaces (OpenClaw re-wraps and trims what it injects).
pub fn collapsed(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// How `content` (of the file `name`) is found in `haystack` (already collapsed).
pub fn find(name: &str, content: &str, haystack: &str) -> Option<How> {
    let content = collapsed(content);
    if content.is_empty() {
        return haystack.contains(name).then_some(How::Pointer);
    }
    if haystack.contains(&content) {
        return Some(How::Whole);
    }
    let head: String = content.chars().take(HEAD_CHARS).collect();
    if haystack.contains(&head) {
        return Some(How::Cut);
    }
    haystack.contains(name).then_some(How::Pointer)
}

/// Every string inside `value`, joined (for layers that are objects: `additionalContext`, a
/// model request).
fn all_strings(value: &Value, out: &mut String) {
    match value {
        Value::String(text) => {
            out.push_str(text);
            out.push('\n');
        }
        Value::Array(items) => items.iter().for_each(|item| all_strings(item, out)),
        Value::Object(map) => map.values().for_each(|item| all_strings(item, out)),
        _ => {}
    }
}

/// Every string inside `value`, collapsed.
pub fn strings_of(value: &Value) -> String {
    let mut out = String::new();
    all_strings(value, &mut out);
    collapsed(&out)
}

/// An OpenClaw session key in a text (`agent:<id>:<rest>`), the first one.
pub(crate) fn session_key_in(text: &str) -> Option<String> {
    let pattern = regex::Regex::new(r"agent:[A-Za-z0-9_-]{1,64}:[A-Za-z0-9:._+@-]{1,200}").ok()?;
    pattern
        .find(text)
        .map(|found| found.as_str().trim_end_matches(['.', ':']).to_string())
}

/// What the run is taken to be beyond its params.
#[derive(Clone, Debug, Default)]
pub struct InferOptions {
    /// The workspace was given (`audit --workspace`), not read from the params.
    pub workspace_given: bool,
    /// The session key, when known from elsewhere (`audit --session-key`).
    pub session_key: Option<String>,
    /// What the thread's opening told (the live router's memory of it).
    pub facts: Option<ThreadFacts>,
}

/// The tool names a thread's opening params offer: its dynamic tools and the members of their
/// namespaces, and the memory tools OpenClaw's developer instructions name (it lists the
/// deferred ones there, and a resume carries no tools).
pub fn tools_of(opening: &Value) -> Vec<String> {
    let mut names = BTreeSet::new();
    let mut add = |tool: &Value| {
        if let Some(name) = tool.get("name").and_then(Value::as_str) {
            names.insert(name.to_string());
        }
    };
    for tool in opening
        .get("dynamicTools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        add(tool);
        for member in tool
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            add(member);
        }
    }
    let instructions = opening
        .get("developerInstructions")
        .and_then(Value::as_str)
        .unwrap_or_default();
    for tool in MEMORY_TOOLS {
        if instructions
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .any(|word| word == tool)
        {
            names.insert(tool.to_string());
        }
    }
    names.into_iter().collect()
}

/// The run OpenClaw's params describe, as a run document, and what was inferred from what.
pub fn infer_run(
    cwd: &str,
    thread: &Value,
    turn: &Value,
    options: &InferOptions,
) -> (Value, Vec<String>) {
    let mut inferred = vec![if options.workspace_given {
        format!("workspace: {cwd} (given)")
    } else {
        format!("workspace: {cwd} (the thread's cwd)")
    }];
    // A given workspace may be relative (to where the command runs); the run document reads
    // paths relative to itself, so it gets the absolute one.
    let absolute = std::path::absolute(cwd).unwrap_or_else(|_| Path::new(cwd).to_path_buf());
    let mut document = serde_json::json!({
        "workspace": absolute,
        // Skills are not routed here: only the workspace's own folder is read.
        "managedSkillsDir": absolute.join(".clawbridge-no-skills"),
        "bundledSkillsDir": absolute.join(".clawbridge-no-skills"),
    });
    let everything = format!("{} {}", strings_of(thread), strings_of(turn));
    let subagent = options.facts.as_ref().is_some_and(|facts| facts.subagent);
    if let Some(key) = &options.session_key {
        inferred.push(format!("session key: {key} (given)"));
        document["sessionKey"] = Value::String(key.clone());
    } else if let Some(key) = session_key_in(&everything) {
        inferred.push(format!("session key: {key} (named in the params)"));
        document["sessionKey"] = Value::String(key);
    } else if subagent {
        inferred.push(
            "session: a subagent's (OpenClaw pasted AGENTS.md into the thread's developer instructions)"
                .into(),
        );
        document["sessionKey"] = Value::String("agent:main:subagent:live".into());
    } else {
        inferred.push("session key: none named in the params (a direct main session)".into());
    }
    let input = strings_of(&turn["input"]);
    let key = document["sessionKey"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if input.contains("HEARTBEAT_OK") || turn["turnTrigger"] == "heartbeat" {
        inferred.push("trigger: heartbeat (the turn asks for HEARTBEAT_OK)".into());
        document["trigger"] = "heartbeat".into();
    } else if key.contains(":cron:") || turn["turnTrigger"] == "cron" {
        inferred.push("trigger: cron (the session key or the turn's trigger)".into());
        document["trigger"] = "cron".into();
    }
    if let Some(model) = thread["model"]
        .as_str()
        .or(turn["model"].as_str())
        .or_else(|| {
            options
                .facts
                .as_ref()
                .and_then(|facts| facts.model.as_deref())
        })
    {
        document["model"] = Value::String(model.to_string());
    }
    // The opening's tools, as its facts have them (gathered once), else from the params.
    let tools = match &options.facts {
        Some(facts) => facts.tools.clone(),
        None => tools_of(thread),
    };
    let memory: Vec<&str> = MEMORY_TOOLS
        .iter()
        .copied()
        .filter(|tool| tools.iter().any(|name| name == tool))
        .collect();
    if !memory.is_empty() {
        inferred.push(format!(
            "memory tools: {} (the thread's tools)",
            memory.join(", ")
        ));
    }
    document["tools"] = Value::Array(
        tools
            .into_iter()
            .map(|name| serde_json::json!({ "name": name }))
            .collect(),
    );
    document["message"] = Value::String(input);
    inferred.push("budgets: OpenClaw's defaults (its config is not on the wire)".into());
    (document, inferred)
}

/// One workspace file the loader read: its name, path (as the run names it) and text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkspaceFile {
    pub name: String,
    pub path: String,
    pub text: String,
}

/// The spec's routing of an inferred run, and the workspace files it read.
pub fn spec_of(document: Value, cwd: &Path) -> Result<(RoutedWorkspace, Vec<WorkspaceFile>)> {
    let source = cwd.join("(inferred run)");
    let text = document.to_string();
    let roots =
        crate::support::fs::Roots::new(vec![std::fs::canonicalize(cwd).map_err(|source| {
            Error::Read {
                path: cwd.to_path_buf(),
                source,
            }
        })?]);
    let run = crate::config::run::RunDocument::parse(&text, &source)?.into_run_confined(
        &source,
        cwd,
        Some(roots),
    )?;
    let loaded = crate::workspace::load_bootstrap_files(&run);
    let routed = crate::routing::route_workspace(&run, &loaded)?;
    let files = loaded
        .files
        .iter()
        .filter_map(|file| {
            Some(WorkspaceFile {
                name: file.name.clone(),
                path: file.path.clone(),
                text: file.text()?.to_string(),
            })
        })
        .collect();
    Ok((routed, files))
}

/// What a thread's opening told the router, for its turns.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThreadFacts {
    pub cwd: Option<String>,
    pub model: Option<String>,
    pub tools: Vec<String>,
    /// OpenClaw treated the thread as a subagent's.
    pub subagent: bool,
}

/// What a rewrite did: the params to send, and what moved, in words (for the transcript and the
/// log).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rerouted {
    pub params: String,
    pub notes: Vec<String>,
}

/// The router of one connection (or one stdio slot): what it remembers of each thread, bounded.
#[derive(Debug, Default)]
pub struct LiveRouter {
    threads: HashMap<String, ThreadFacts>,
    order: VecDeque<String>,
    /// `thread/start` requests awaiting their answer (the thread id), by request id.
    pending: HashMap<String, ThreadFacts>,
    pending_order: VecDeque<String>,
}

impl LiveRouter {
    pub fn new() -> LiveRouter {
        LiveRouter::default()
    }

    /// A client request: its params as the spec routes them, or `None` to send them as they
    /// are (not a thread or turn request, an ephemeral utility thread, no workspace at its
    /// `cwd`, nothing to move). `id` is the request's id as JSON text.
    pub fn request(&mut self, id: &str, method: &str, params: &str) -> Option<Rerouted> {
        route_request(self, id, method, params)
    }

    /// Codex's answer to request `id` (its result as JSON text): a `thread/start` answer names
    /// the thread whose opening it remembers.
    pub fn answer(&mut self, id: &str, result: &str) {
        let Some(facts) = self.pending.remove(id) else {
            return;
        };
        let opened: crate::codex::protocol::inbound::ThreadOpenedAnswer =
            crate::codex::protocol::inbound::AnswerView::read(result);
        if let Some(thread) = opened.thread.id {
            self.remember(thread, facts);
        }
    }

    /// Whether a `thread/start` waits for its answer (the only answers the router reads).
    pub fn awaits_answers(&self) -> bool {
        !self.pending.is_empty()
    }

    fn remember(&mut self, thread: String, facts: ThreadFacts) {
        if !self.threads.contains_key(&thread) {
            if self.threads.len() >= MAX_THREADS {
                if let Some(old) = self.order.pop_front() {
                    self.threads.remove(&old);
                }
            }
            self.order.push_back(thread.clone());
        }
        self.threads.insert(thread, facts);
    }

    fn remember_pending(&mut self, id: String, facts: ThreadFacts) {
        if self.pending.len() >= MAX_PENDING {
            if let Some(old) = self.pending_order.pop_front() {
                self.pending.remove(&old);
            }
        }
        self.pending_order.push_back(id.clone());
        self.pending.insert(id, facts);
    }
}

/// What a thread's opening params (as the client sent them) tell about its turns, with the
/// workspace read at `cwd`: its folder, model and tools, and whether OpenClaw treated it as a
/// subagent's (it pasted AGENTS.md, which Codex reads itself, into the developer instructions:
/// OpenClaw does that only for the subagent allow-list).
pub fn facts_of(opening: &Value, cwd: &str) -> std::result::Result<ThreadFacts, String> {
    opening_spec(opening, cwd).map(|(facts, _)| facts)
}

/// [`facts_of`], with the spec's routing of the opening: the workspace is read once, and again
/// only for a subagent's thread (whose session loads fewer files).
fn opening_spec(
    opening: &Value,
    cwd: &str,
) -> std::result::Result<(ThreadFacts, (RoutedWorkspace, Vec<WorkspaceFile>)), String> {
    let mut facts = ThreadFacts {
        cwd: Some(cwd.to_string()),
        model: opening
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_string),
        tools: tools_of(opening),
        subagent: false,
    };
    let probe = spec_with(cwd, opening, &Value::Null, &facts)?;
    let instructions = collapsed(
        opening
            .get("developerInstructions")
            .and_then(Value::as_str)
            .unwrap_or_default(),
    );
    facts.subagent = probe.1.iter().any(|file| {
        file.name == "AGENTS.md"
            && matches!(
                find(&file.name, &file.text, &instructions),
                Some(How::Whole | How::Cut)
            )
    });
    if !facts.subagent {
        return Ok((facts, probe));
    }
    let spec = spec_with(cwd, opening, &Value::Null, &facts)?;
    Ok((facts, spec))
}

/// The spec's routing of the run a thread's and a turn's params describe, with what the
/// thread's opening told.
fn spec_with(
    cwd: &str,
    thread: &Value,
    turn: &Value,
    facts: &ThreadFacts,
) -> std::result::Result<(RoutedWorkspace, Vec<WorkspaceFile>), String> {
    let options = InferOptions {
        facts: Some(facts.clone()),
        ..InferOptions::default()
    };
    let (document, _) = infer_run(cwd, thread, turn, &options);
    spec_of(document, Path::new(cwd)).map_err(|error| error.to_string())
}

/// What the routing of one request asks of the router's memory: the facts of a thread, and
/// to keep those of a thread's opening. A router behind a lock is asked briefly, never held
/// while the workspace is read.
trait Memory {
    fn facts(&self, thread: &str) -> ThreadFacts;
    fn opened(&mut self, thread: Option<&str>, id: &str, facts: ThreadFacts);
}

impl Memory for LiveRouter {
    fn facts(&self, thread: &str) -> ThreadFacts {
        self.threads.get(thread).cloned().unwrap_or_default()
    }

    fn opened(&mut self, thread: Option<&str>, id: &str, facts: ThreadFacts) {
        match thread {
            Some(thread) => self.remember(thread.to_string(), facts),
            None => self.remember_pending(id.to_string(), facts),
        }
    }
}

impl Memory for &std::sync::Mutex<LiveRouter> {
    fn facts(&self, thread: &str) -> ThreadFacts {
        self.lock()
            .map(|router| router.facts(thread))
            .unwrap_or_default()
    }

    fn opened(&mut self, thread: Option<&str>, id: &str, facts: ThreadFacts) {
        if let Ok(mut router) = self.lock() {
            router.opened(thread, id, facts);
        }
    }
}

/// One request routed with `memory`'s facts ([`LiveRouter::request`]).
fn route_request(
    memory: &mut impl Memory,
    id: &str,
    method: &str,
    params: &str,
) -> Option<Rerouted> {
    use crate::codex::protocol::table::name;
    if !matches!(
        method,
        name::THREAD_START | name::THREAD_RESUME | name::TURN_START
    ) {
        return None;
    }
    let mut value: Value = serde_json::from_str(params).ok()?;
    let object = value.as_object_mut()?;
    let outcome = if method == name::TURN_START {
        let thread = object.get("threadId").and_then(Value::as_str)?.to_string();
        let facts = memory.facts(&thread);
        route_turn(object, &facts)
    } else {
        let (facts, outcome) = route_opening(object)?;
        let thread = object.get("threadId").and_then(Value::as_str);
        memory.opened(thread, id, facts);
        outcome
    };
    let notes = match outcome {
        Ok(notes) => notes,
        Err(why) => {
            tracing::info!("route spec: {method} sent as it is ({why})");
            return None;
        }
    };
    Some(Rerouted {
        params: serde_json::to_string(&value).ok()?,
        notes,
    })
}

/// [`LiveRouter::request`] on the blocking pool (the workspace is read there), for the faces'
/// async paths: the router's lock is taken only to read a thread's facts and to keep an
/// opening's, so one agent's workspace read never holds another's request.
pub async fn route_blocking(
    router: &std::sync::Arc<std::sync::Mutex<LiveRouter>>,
    id: String,
    method: String,
    params: String,
) -> Option<Rerouted> {
    let router = std::sync::Arc::clone(router);
    tokio::task::spawn_blocking(move || {
        let mut memory = &*router;
        route_request(&mut memory, &id, &method, &params)
    })
    .await
    .ok()?
}

/// A thread's opening (`thread/start`, `thread/resume`), rewritten in place: what it tells the
/// turns, and what moved (or why nothing could be). `None` for a thread the router leaves
/// alone entirely (ephemeral, or no `cwd`).
pub fn route_opening(
    params: &mut Map<String, Value>,
) -> Option<(ThreadFacts, std::result::Result<Vec<String>, String>)> {
    if params.get("ephemeral") == Some(&Value::Bool(true)) {
        return None;
    }
    let cwd = params.get("cwd").and_then(Value::as_str)?.to_string();
    let opening = Value::Object(params.clone());
    let facts = ThreadFacts {
        cwd: Some(cwd.clone()),
        ..ThreadFacts::default()
    };
    let instructions = params
        .get("developerInstructions")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let (facts, (routed, files)) = match opening_spec(&opening, &cwd) {
        Ok(spec) => spec,
        Err(why) => return Some((facts, Err(why))),
    };
    let mut notes = Vec::new();
    let mut text = Layer::new(&instructions);
    // Every workspace file goes out of the thread's layer; the spec's thread files come back in
    // its own block.
    let mut kept_in_place = BTreeSet::new();
    for file in &files {
        match text.take_out(file) {
            TakenOut::Nothing => {}
            TakenOut::Removed(how) => notes.push(format!(
                "{}: taken out of the thread's developer instructions ({})",
                file.name,
                how.label()
            )),
            TakenOut::Stuck => {
                notes.push(format!(
                    "{}: left in the thread's developer instructions as OpenClaw sent it (its text could not be taken out)",
                    file.name
                ));
                kept_in_place.insert(file.name.clone());
            }
        }
    }
    let mut routed = routed;
    routed
        .thread_files
        .retain(|file| !kept_in_place.contains(&file.name));
    let block = crate::render::adapter::codex_workspace_block(&routed);
    if block.is_some() {
        notes.push(format!(
            "{}: in the thread's developer instructions (the spec's workspace block)",
            names(&routed.thread_files)
        ));
    }
    let rewritten = text.finish(block.as_deref());
    if rewritten != instructions {
        params.insert("developerInstructions".into(), Value::String(rewritten));
    }
    Some((facts, Ok(notes)))
}

/// A `turn/start`, rewritten in place.
pub fn route_turn(
    params: &mut Map<String, Value>,
    facts: &ThreadFacts,
) -> std::result::Result<Vec<String>, String> {
    let cwd = params
        .get("cwd")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| facts.cwd.clone())
        .ok_or("no cwd in the turn's params or its thread's")?;
    let turn = Value::Object(params.clone());
    let (routed, files) = spec_with(&cwd, &Value::Null, &turn, facts)?;
    let mut notes = Vec::new();
    let collaboration = params
        .get("collaborationMode")
        .and_then(|mode| mode.get("settings"))
        .and_then(|settings| settings.get("developer_instructions"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let input_at = params
        .get("input")
        .and_then(Value::as_array)
        .and_then(|items| {
            items
                .iter()
                .position(|item| item.get("text").and_then(Value::as_str).is_some())
        });
    let input = input_at
        .and_then(|at| params.get("input")?.get(at)?.get("text")?.as_str())
        .map(str::to_string);
    let mut collab_layer = Layer::new(collaboration.as_deref().unwrap_or_default());
    let mut input_layer = Layer::new(input.as_deref().unwrap_or_default());
    let context = strings_of(params.get("additionalContext").unwrap_or(&Value::Null));
    let stuck = take_out_of_turn(
        &files,
        &mut [
            (&mut collab_layer, "collaboration instructions"),
            (&mut input_layer, "turn input"),
        ],
        &context,
        &mut notes,
    );
    let mut additions = Vec::new();
    if let Some(note) = routed
        .memory_note
        .as_ref()
        .filter(|_| !stuck.contains("MEMORY.md"))
    {
        additions.push(crate::render::codex::memory_note(note));
        notes.push("MEMORY.md: the memory note, in the collaboration instructions".into());
    }
    if let Some(path) = routed
        .heartbeat_pointer
        .as_deref()
        .filter(|_| !stuck.contains("HEARTBEAT.md"))
    {
        additions.push(crate::render::codex::heartbeat_pointer(path));
        notes.push("HEARTBEAT.md: pointed to in the collaboration instructions".into());
    }
    let mut routed = routed;
    routed.turn_files.retain(|file| !stuck.contains(&file.name));
    let runtime = crate::render::codex::runtime_context(&routed);
    if runtime.is_some() {
        notes.push(format!(
            "{}: runtime context before the turn's input",
            names(&routed.turn_files)
        ));
    }
    // The collaboration instructions: OpenClaw's, less the files, plus the spec's additions.
    let addition = (!additions.is_empty()).then(|| additions.join("\n\n"));
    let collab_text = collab_layer.finish(addition.as_deref());
    let changed_collab = match &collaboration {
        Some(original) => collab_text != *original,
        None => !collab_text.is_empty(),
    };
    if changed_collab {
        set_collaboration(params, &collab_text, facts);
    }
    // The input: the spec's runtime context, then OpenClaw's input less the files.
    let input_text = input_layer.finish(None);
    let input_text = match runtime {
        Some(context) => format!(
            "{context}\n\n{}\n{input_text}",
            crate::render::codex::REQUEST_LABEL
        ),
        None => input_text,
    };
    if input.as_deref() != Some(input_text.as_str()) {
        set_input(params, input_at, input_text);
    }
    Ok(notes)
}

/// The names of routed files, for a note.
fn names(files: &[crate::workspace::FittedFile]) -> String {
    files
        .iter()
        .map(|file| file.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Put `text` in the turn's input: as the text of its item at `at`, or as a text item first
/// when it had none.
fn set_input(params: &mut Map<String, Value>, at: Option<usize>, text: String) {
    match at {
        Some(at) => {
            if let Some(item) = params
                .get_mut("input")
                .and_then(Value::as_array_mut)
                .and_then(|items| items.get_mut(at))
                .and_then(Value::as_object_mut)
            {
                item.insert("text".into(), Value::String(text));
            }
        }
        None => {
            let item = serde_json::json!({"type": "text", "text": text, "text_elements": []});
            match params.get_mut("input").and_then(Value::as_array_mut) {
                Some(items) => items.insert(0, item),
                None => {
                    params.insert("input".into(), Value::Array(vec![item]));
                }
            }
        }
    }
}

/// Take every workspace file out of a turn's layers (each named for the notes); the names of
/// the files that stay where OpenClaw put them (their text there cannot be taken out, or it is
/// in `additionalContext`, whose collapsed strings are `context`).
fn take_out_of_turn(
    files: &[WorkspaceFile],
    layers: &mut [(&mut Layer, &str)],
    context: &str,
    notes: &mut Vec<String>,
) -> BTreeSet<String> {
    let mut stuck = BTreeSet::new();
    for file in files {
        for (layer, name) in layers.iter_mut() {
            match layer.take_out(file) {
                TakenOut::Nothing => {}
                TakenOut::Removed(how) => notes.push(format!(
                    "{}: taken out of the {name} ({})",
                    file.name,
                    how.label()
                )),
                TakenOut::Stuck => {
                    notes.push(format!(
                        "{}: left in the {name} as OpenClaw sent it (its text could not be taken out)",
                        file.name
                    ));
                    stuck.insert(file.name.clone());
                }
            }
        }
        if !file.text.trim().is_empty()
            && matches!(
                find(&file.name, &file.text, context),
                Some(How::Whole | How::Cut)
            )
        {
            notes.push(format!(
                "{}: left in additionalContext as OpenClaw sent it",
                file.name
            ));
            stuck.insert(file.name.clone());
        }
    }
    stuck
}

/// Put `text` in the turn's collaboration instructions: into the mode OpenClaw sent, or a
/// Default mode of the spec's (the pinned preset first) when it sent none.
fn set_collaboration(params: &mut Map<String, Value>, text: &str, facts: &ThreadFacts) {
    let existing = params
        .get_mut("collaborationMode")
        .and_then(|mode| mode.get_mut("settings"))
        .and_then(Value::as_object_mut);
    if let Some(settings) = existing {
        settings.insert(
            "developer_instructions".into(),
            Value::String(text.to_string()),
        );
        return;
    }
    let model = params
        .get("model")
        .cloned()
        .or_else(|| facts.model.clone().map(Value::String))
        .unwrap_or(Value::Null);
    let effort = params.get("effort").cloned().unwrap_or(Value::Null);
    let text = format!(
        "{}\n\n{text}",
        crate::render::codex::DEFAULT_COLLABORATION_PRESET.trim_end()
    );
    params.insert(
        "collaborationMode".into(),
        serde_json::json!({
            "mode": "default",
            "settings": {
                "developer_instructions": text,
                "model": model,
                "reasoning_effort": effort,
            }
        }),
    );
}

/// What taking a file out of a layer did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TakenOut {
    /// The layer did not hold it.
    Nothing,
    /// Its text (or the pointer naming it) went out.
    Removed(How),
    /// Its text is there and cannot be cut out cleanly.
    Stuck,
}

/// One of OpenClaw's texts, with workspace files being taken out of it.
struct Layer {
    text: String,
    /// The `## ` headings of the sections something was taken out of.
    touched: BTreeSet<String>,
}

impl Layer {
    fn new(text: &str) -> Layer {
        Layer {
            text: text.to_string(),
            touched: BTreeSet::new(),
        }
    }

    /// Take `file` out: its text (whole, or cut: from its head to the end of its block) with the
    /// heading line that names it, or the pointer lines that name it.
    fn take_out(&mut self, file: &WorkspaceFile) -> TakenOut {
        let content = file.text.trim();
        // Found first as the audit finds it (whitespace collapsed): most files are in no given
        // layer, and only one that is gets located for cutting.
        let found = find(&file.name, content, &collapsed(&self.text));
        if !content.is_empty() && matches!(found, Some(How::Whole | How::Cut)) {
            if found == Some(How::Whole) {
                if let Some(range) = locate(&self.text, content) {
                    self.cut(range, &file.name);
                    return TakenOut::Removed(How::Whole);
                }
            }
            let head: String = collapsed(content).chars().take(HEAD_CHARS).collect();
            if let Some(range) = locate(&self.text, &head) {
                let end = block_end(&self.text, range.end);
                self.cut(range.start..end, &file.name);
                return TakenOut::Removed(How::Cut);
            }
            return TakenOut::Stuck;
        }
        let pointers = pointer_lines(&self.text, file);
        if pointers.is_empty() {
            return TakenOut::Nothing;
        }
        for range in pointers.into_iter().rev() {
            self.touch(range.start);
            self.text.replace_range(range, "");
        }
        TakenOut::Removed(How::Pointer)
    }

    /// Cut `range` out, with the heading line just before it when that line names `name`.
    fn cut(&mut self, range: std::ops::Range<usize>, name: &str) {
        let mut start = range.start;
        let before = self.text[..start].trim_end_matches([' ', '\t', '\n', '\r']);
        let line_start = before.rfind('\n').map_or(0, |at| at + 1);
        let previous = &before[line_start..];
        if previous.trim_start().starts_with('#') && previous.contains(name) {
            start = line_start;
        }
        self.touch(start);
        self.text.replace_range(start..range.end, "");
    }

    /// Note the `## ` section that holds byte `at`.
    fn touch(&mut self, at: usize) {
        let before = &self.text[..at.min(self.text.len())];
        let heading = before
            .lines()
            .rev()
            .find(|line| line.starts_with("## "))
            .map(str::to_string);
        if let Some(heading) = heading {
            self.touched.insert(heading);
        }
    }

    /// The text with emptied tag blocks and emptied sections gone, blank runs made one, and
    /// `addition` appended.
    fn finish(mut self, addition: Option<&str>) -> String {
        if !self.touched.is_empty() {
            self.text = without_empty_blocks(&self.text);
            for heading in std::mem::take(&mut self.touched) {
                self.text = without_bare_section(&self.text, &heading);
            }
        }
        let mut text = tidy(&self.text);
        if let Some(addition) = addition {
            if !text.is_empty() {
                text.push_str("\n\n");
            }
            text.push_str(addition);
        }
        text
    }
}

/// Where `needle`'s words stand in `text`, whatever whitespace separates them there.
fn locate(text: &str, needle: &str) -> Option<std::ops::Range<usize>> {
    let needle = needle.trim();
    if needle.is_empty() {
        return None;
    }
    if let Some(at) = text.find(needle) {
        return Some(at..at + needle.len());
    }
    // Whitespace-tolerant matching compiles the text into a pattern: only for texts of a
    // bootstrap file's usual size (a longer one is found exactly or not at all).
    if needle.len() > MAX_PATTERN_BYTES {
        return None;
    }
    let pattern = needle
        .split_whitespace()
        .map(regex::escape)
        .collect::<Vec<_>>()
        .join(r"\s+");
    let pattern = regex::RegexBuilder::new(&pattern)
        .size_limit(64 * 1024 * 1024)
        .build()
        .ok()?;
    pattern.find(text).map(|found| found.range())
}

/// The end of the block a cut file's head starts: the next heading or closing tag line, or the
/// end of the text.
fn block_end(text: &str, from: usize) -> usize {
    let mut at = from;
    for line in text[from..].split_inclusive('\n') {
        let trimmed = line.trim_start();
        if at > from && (trimmed.starts_with('#') || trimmed.starts_with("</")) {
            return at;
        }
        at += line.len();
    }
    text.len()
}

/// The byte ranges of the lines that point to `file` (a list item naming its path, or its name
/// alone), each with its newline.
fn pointer_lines(text: &str, file: &WorkspaceFile) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let item = line.trim();
        if let Some(named) = item.strip_prefix("- ") {
            let named = named.trim().trim_matches('`');
            if named == file.path
                || named == file.name
                || named.ends_with(&format!("/{}", file.name))
            {
                out.push(at..at + line.len());
            }
        }
        at += line.len();
    }
    out
}

/// `<TAG>` blocks with nothing but whitespace inside, taken out.
fn without_empty_blocks(text: &str) -> String {
    let Ok(pattern) =
        regex::Regex::new(r"<([A-Za-z_][A-Za-z0-9_-]*)>\s*</([A-Za-z_][A-Za-z0-9_-]*)>")
    else {
        return text.to_string();
    };
    let mut out = text.to_string();
    loop {
        let Some(found) = pattern
            .captures_iter(&out)
            .find(|captures| {
                captures.get(1).map(|m| m.as_str()) == captures.get(2).map(|m| m.as_str())
            })
            .and_then(|captures| captures.get(0).map(|m| m.range()))
        else {
            return out;
        };
        out.replace_range(found, "");
    }
}

/// The section under `heading` (to the next `#`/`##` heading) taken out when what is left of it
/// is prose only: no sub-heading, list item, tag block or code.
fn without_bare_section(text: &str, heading: &str) -> String {
    let mut start = None;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if line.trim_end() == heading {
            start = Some(at);
            break;
        }
        at += line.len();
    }
    let Some(start) = start else {
        return text.to_string();
    };
    let body_start = start
        + text[start..]
            .find('\n')
            .map_or(text.len() - start, |at| at + 1);
    let mut end = text.len();
    let mut at = body_start;
    for line in text[body_start..].split_inclusive('\n') {
        if line.starts_with("## ") || line.starts_with("# ") {
            end = at;
            break;
        }
        at += line.len();
    }
    let body = &text[body_start..end];
    let bare = body.lines().all(|line| {
        let line = line.trim_start();
        !(line.starts_with('#')
            || line.starts_with("- ")
            || line.starts_with('<')
            || line.starts_with("```"))
    });
    if !bare {
        return text.to_string();
    }
    let mut out = text.to_string();
    out.replace_range(start..end, "");
    out
}

/// Runs of blank lines made one, the end trimmed.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = 0;
    for line in text.split('\n') {
        if line.trim().is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, text: &str) -> WorkspaceFile {
        WorkspaceFile {
            name: name.into(),
            path: format!("/w/{name}"),
            text: text.into(),
        }
    }

    #[test]
    fn files_go_out_with_their_headings_and_emptied_sections_go_too() {
        let text = "# Mode\n\nBe useful.\n\n## OpenClaw Agent Soul\n\nOpenClaw loaded these files.\n\n<AGENT_SOUL>\n\n### /w/SOUL.md\n\nI am calm.\nI am kind.\n\n### /w/USER.md\n\nThe user is Ada.\n\n</AGENT_SOUL>\n\n## Memory Recall\nUse memory_search.\n\n## OpenClaw Workspace Memory\n\nMEMORY.md exists.\n\n- /w/MEMORY.md\n\n## OpenClaw Skills\n\n<available_skills>\n  <skill>x</skill>\n</available_skills>\n";
        let mut layer = Layer::new(text);
        assert_eq!(
            layer.take_out(&file("SOUL.md", "I am calm.   I am kind.\n")),
            TakenOut::Removed(How::Whole)
        );
        assert_eq!(
            layer.take_out(&file("USER.md", "The user is Ada.")),
            TakenOut::Removed(How::Whole)
        );
        assert_eq!(
            layer.take_out(&file("MEMORY.md", "Ada likes tea.")),
            TakenOut::Removed(How::Pointer)
        );
        assert_eq!(
            layer.take_out(&file("TOOLS.md", "ls lists")),
            TakenOut::Nothing
        );
        let out = layer.finish(Some("## Ours\n\nadded"));
        assert_eq!(
            out,
            "# Mode\n\nBe useful.\n\n## Memory Recall\nUse memory_search.\n\n## OpenClaw Skills\n\n<available_skills>\n  <skill>x</skill>\n</available_skills>\n\n## Ours\n\nadded"
        );
    }

    #[test]
    fn a_cut_file_goes_out_to_the_end_of_its_block() {
        let long = "word ".repeat(100);
        let text = format!(
            "## Files\n\n### /w/SOUL.md\n\n{}[truncated]\n\n### /w/USER.md\n\nAda\n",
            &long[..300]
        );
        let mut layer = Layer::new(&text);
        assert_eq!(
            layer.take_out(&file("SOUL.md", &long)),
            TakenOut::Removed(How::Cut)
        );
        assert_eq!(layer.finish(None), "## Files\n\n### /w/USER.md\n\nAda");
    }

    #[test]
    fn prose_that_names_a_file_is_kept() {
        let text = "Read HEARTBEAT.md if it exists.";
        let mut layer = Layer::new(text);
        assert_eq!(
            layer.take_out(&file("HEARTBEAT.md", "check mail")),
            TakenOut::Nothing
        );
        assert_eq!(layer.finish(None), text);
    }

    #[test]
    fn route_names_parse() {
        assert_eq!(LiveRoute::parse("spec"), Some(LiveRoute::Spec));
        assert_eq!(LiveRoute::parse("as-sent"), Some(LiveRoute::AsSent));
        assert_eq!(LiveRoute::parse("other"), None);
        assert_eq!(LiveRoute::default().as_str(), "as-sent");
    }

    #[test]
    fn the_router_forgets_the_oldest_thread_past_its_bound() {
        let mut router = LiveRouter::new();
        for n in 0..MAX_THREADS + 3 {
            router.remember(format!("t{n}"), ThreadFacts::default());
        }
        assert_eq!(router.threads.len(), MAX_THREADS);
        assert!(!router.threads.contains_key("t0"));
        for n in 0..MAX_PENDING + 2 {
            router.remember_pending(n.to_string(), ThreadFacts::default());
        }
        assert_eq!(router.pending.len(), MAX_PENDING);
    }
    #[test]
    fn a_file_left_where_it_cannot_be_taken_out_is_not_added_again() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join("SOUL.md"), "Calm and kind.\n").expect("soul");
        std::fs::write(dir.path().join("MEMORY.md"), "Ada likes tea.\n").expect("memory");
        let cwd = dir.path().display().to_string();
        let facts = ThreadFacts {
            cwd: Some(cwd.clone()),
            tools: vec!["memory_search".into()],
            ..ThreadFacts::default()
        };
        let turn = serde_json::json!({
            "threadId": "t",
            "input": [{"type": "text", "text": "hello"}],
            "additionalContext": {"memory": {"value": "Ada likes tea."}},
            "collaborationMode": {"mode": "default", "settings": {"developer_instructions": "# Mode\n\n## Soul\n\n### SOUL.md\n\nCalm and kind.\n"}},
        });
        let mut params = turn.as_object().expect("object").clone();
        let notes = route_turn(&mut params, &facts).expect("routed");
        let collab = params["collaborationMode"]["settings"]["developer_instructions"]
            .as_str()
            .expect("collab");
        // SOUL.md went out of the turn (the thread's opening carries it); MEMORY.md stays in
        // additionalContext, so no memory note is added besides it.
        assert_eq!(collab, "# Mode", "{notes:?}");
        assert!(notes
            .iter()
            .any(|note| note.starts_with("MEMORY.md: left in additionalContext")));
        assert_eq!(params["additionalContext"], turn["additionalContext"]);
        assert_eq!(params["input"], turn["input"]);
    }

    #[test]
    fn a_subagent_s_opening_loses_agents_md_and_gains_tools_md() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(dir.path().join("AGENTS.md"), "Work in small steps.\n").expect("agents");
        std::fs::write(dir.path().join("TOOLS.md"), "ls lists files.\n").expect("tools");
        std::fs::write(dir.path().join("SOUL.md"), "Calm and kind.\n").expect("soul");
        let cwd = dir.path().display().to_string();
        let opening = serde_json::json!({
            "cwd": cwd,
            "developerInstructions": format!("You are an agent.\n\n## OpenClaw Agent Workspace Instructions\n\nOpenClaw loaded this snapshot.\n\n### {cwd}/AGENTS.md\n\nWork in small steps.\n"),
        });
        let mut params = opening.as_object().expect("object").clone();
        let (facts, notes) = route_opening(&mut params).expect("an opening");
        assert!(facts.subagent);
        let instructions = params["developerInstructions"].as_str().expect("text");
        assert!(
            !instructions.contains("Work in small steps."),
            "{instructions}"
        );
        assert!(
            !instructions.contains("Agent Workspace Instructions"),
            "{instructions}"
        );
        assert!(instructions.contains("ls lists files."), "{instructions}");
        // A subagent session loads AGENTS.md and TOOLS.md only: no persona.
        assert!(!instructions.contains("Calm and kind."), "{instructions}");
        assert!(instructions.starts_with("You are an agent.\n\n## OpenClaw Workspace Instructions"));
        assert!(notes.is_ok());
        // The same opening routed again gives the same bytes (the prompt cache holds).
        let mut again = opening.as_object().expect("object").clone();
        let (_, again_notes) = route_opening(&mut again).expect("an opening");
        assert!(again_notes.is_ok());
        assert_eq!(again, params);
        // An ephemeral thread is left alone.
        let mut ephemeral = opening.as_object().expect("object").clone();
        ephemeral.insert("ephemeral".into(), Value::Bool(true));
        assert!(route_opening(&mut ephemeral).is_none());
    }
}

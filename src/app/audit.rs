//! `clawbridge audit DIR`: where each workspace file of a real OpenClaw run went, against where
//! the system-prompt spec puts it.
//!
//! OpenClaw's Codex harness has moved away from the "System prompt" page it implements, and its
//! own prompt snapshots are reconstructed, not captured. The app-server's transcript holds what
//! OpenClaw really sent (`thread/start`, `thread/resume`, `turn/start`) and its capture what
//! reached the model; this command puts each workspace file's landing beside clawbridge's own
//! routing of the same run (the spec, docs/routing.md), one row per turn and file:
//! - *spec*: the layer clawbridge's routing gives the file for the run as inferred from the
//!   params (the workspace is the thread's `cwd`; session key, trigger and model read from the
//!   params; OpenClaw's budgets at their defaults, since its config is not in the transcript).
//!   What was inferred, and from what, is stated in the report.
//! - *OpenClaw*: the layers whose text holds the file's content (whole, or its head only: cut),
//!   or names the file without its content (a pointer).
//! - *model*: whether the model request of that turn held it (Codex adds AGENTS.md itself).
//!
//! Verdicts: as the spec says, moved (and where), missing, truncated differently, extra.
//!
//! Bounded and confined as the other readers of a transcript folder: only regular files, each
//! capped; the workspace files are read by the bootstrap loader (regular files below the `cwd`,
//! capped), never through a link out of it.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use crate::codex::protocol::table::name as method;
use crate::error::Result;
use crate::routing::Surface;
use crate::traffic::trace::offline::{
    files_in, json_lines, regular_file, sources, transcript_folder,
};
pub use crate::translate::live::{collapsed, find, How};
use crate::translate::live::{facts_of, infer_run, spec_of, strings_of, InferOptions, ThreadFacts};

/// Largest transcript or capture file read.
const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;
/// Thread files read at most.
const MAX_THREADS: usize = 10_000;
/// Turns of one thread audited at most (each reads its workspace again).
const MAX_TURNS: usize = 10_000;

/// A layer of what Codex is sent (or of what reached the model).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Layer {
    /// `thread/start|resume.developerInstructions`.
    ThreadDeveloperInstructions,
    /// `thread/start|resume.baseInstructions`.
    ThreadBaseInstructions,
    /// `turn/start.collaborationMode.settings.developer_instructions`.
    CollaborationInstructions,
    /// `turn/start.additionalContext`.
    AdditionalContext,
    /// `turn/start.input` (its text items).
    TurnInput,
    /// Not sent: Codex reads it from the workspace itself (AGENTS.md).
    LeftToCodex,
}

impl Layer {
    pub fn label(self) -> &'static str {
        match self {
            Layer::ThreadDeveloperInstructions => "thread developer instructions",
            Layer::ThreadBaseInstructions => "thread base instructions",
            Layer::CollaborationInstructions => "collaboration instructions",
            Layer::AdditionalContext => "additionalContext",
            Layer::TurnInput => "turn input",
            Layer::LeftToCodex => "left to Codex",
        }
    }
}

/// One landing of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Landing {
    pub layer: Layer,
    pub how: How,
}

fn landings_label(landings: &[Landing]) -> String {
    if landings.is_empty() {
        return "nowhere".to_string();
    }
    landings
        .iter()
        .map(|landing| match (landing.layer, landing.how) {
            (Layer::LeftToCodex, _) => "left to Codex".to_string(),
            (layer, How::Whole) => layer.label().to_string(),
            (layer, how) => format!("{} ({})", layer.label(), how.label()),
        })
        .collect::<Vec<_>>()
        .join(" + ")
}

/// A row's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Verdict {
    /// Where the spec puts it, as whole (or as cut) as the spec has it.
    AsSpec,
    /// Sent, in another layer than the spec's.
    Moved,
    /// The spec sends it; OpenClaw did not.
    Missing,
    /// In the spec's layer, but cut where the spec has it whole (or the other way).
    Truncated,
    /// Sent where the spec sends nothing (or sent besides Codex reading it itself).
    Extra,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Verdict::AsSpec => "as spec",
            Verdict::Moved => "moved",
            Verdict::Missing => "missing",
            Verdict::Truncated => "truncated",
            Verdict::Extra => "extra",
        }
    }

    /// What an operator does about it, in one line (`None` for as spec).
    pub fn fix(self) -> Option<&'static str> {
        match self {
            Verdict::AsSpec => None,
            Verdict::Moved => Some(
                "the model reads it in another layer than the seed's: `clawbridge app-server --route spec` (or the agent through `clawbridge serve`) gives the seed's layering, or leave it (nothing is lost)",
            ),
            Verdict::Missing => Some(
                "the model never saw it: keep it a regular file (not a link) in the agent's workspace within agents.defaults.bootstrapMaxChars / bootstrapTotalMaxChars (20000 / 60000); if it is, this OpenClaw leaves it out, and `clawbridge app-server --route spec` (or `clawbridge serve`) sends it as the seed does",
            ),
            Verdict::Truncated => Some(
                "cut where the seed has it whole (or the other way): shorten the file, or set agents.defaults.bootstrapMaxChars / bootstrapTotalMaxChars to the seed's 20000 / 60000",
            ),
            Verdict::Extra => Some(
                "sent where the seed sends nothing, or twice (Codex reads AGENTS.md itself): it costs tokens, nothing is lost; `clawbridge app-server --route spec` (or `clawbridge serve`) sends it as the seed does",
            ),
        }
    }

    /// A `--fail-on` name.
    pub fn parse(text: &str) -> Option<Verdict> {
        match text.trim() {
            "as-spec" | "asSpec" => Some(Verdict::AsSpec),
            "moved" => Some(Verdict::Moved),
            "missing" => Some(Verdict::Missing),
            "truncated" => Some(Verdict::Truncated),
            "extra" => Some(Verdict::Extra),
            _ => None,
        }
    }
}

/// One workspace file in one turn.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    pub file: String,
    pub spec: Vec<Landing>,
    pub openclaw: Vec<Landing>,
    /// Whether the turn's model request held it (`None`: no capture of the turn).
    pub model: Option<How>,
    pub verdict: Verdict,
    /// The verdict in words (where it moved, what was cut).
    pub detail: String,
    /// The file's text, redacted (`--show-content` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

/// One turn of a thread.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnAudit {
    /// 1-based, in the thread's order.
    pub turn: usize,
    /// What the run was taken to be, and from what.
    pub inferred: Vec<String>,
    /// What else OpenClaw's params carried that the spec does not have (the keys of
    /// `additionalContext`, thread config the spec does not set).
    pub notes: Vec<String>,
    /// The route clawbridge applied (`as-sent`, or `spec` when it moved the files:
    /// `app-server --route spec`), and what it moved.
    pub route: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub routed: Vec<String>,
    /// Whether the collaboration instructions Codex was sent reached the model request (from the
    /// capture; `None` without one, or without collaboration instructions).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collaboration_reached_model: Option<bool>,
    /// What never reached the model though the spec sends it (from the capture): a persona the
    /// agent never had.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
    pub rows: Vec<Row>,
}

/// A request as the client sent it and as Codex got it (the same, unless clawbridge routed it).
#[derive(Clone, Debug, Default)]
pub struct Sent {
    pub client: Value,
    pub codex: Value,
    /// What clawbridge moved, when it routed the request.
    pub routed: Option<Vec<String>>,
    /// What an opening tells of its thread's turns, read from the workspace once per opening
    /// (and folder), not once per turn.
    facts: std::cell::OnceCell<(String, Option<ThreadFacts>)>,
}

impl Sent {
    /// A request Codex got as the client sent it.
    pub fn as_sent(params: &Value) -> Sent {
        Sent {
            client: params.clone(),
            codex: params.clone(),
            routed: None,
            facts: std::cell::OnceCell::new(),
        }
    }

    /// What this opening (as the client sent it) tells of its thread, with the workspace at
    /// `cwd`; `None` for no opening or a workspace that cannot be read.
    fn facts(&self, cwd: &str) -> Option<ThreadFacts> {
        if self.client.is_null() {
            return None;
        }
        let (seen, facts) = self
            .facts
            .get_or_init(|| (cwd.to_string(), facts_of(&self.client, cwd).ok()));
        if seen == cwd {
            facts.clone()
        } else {
            facts_of(&self.client, cwd).ok()
        }
    }
}

/// One thread of the transcript.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadAudit {
    pub thread: String,
    /// The workspace read (the thread's `cwd`).
    pub cwd: String,
    /// Why the thread was not audited, if it was not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    pub turns: Vec<TurnAudit>,
}

/// The whole audit.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditReport {
    /// The client that sent the threads (`initialize`'s `clientInfo`), when the transcript has it.
    pub client: Option<String>,
    pub threads: Vec<ThreadAudit>,
    /// Rows per verdict.
    pub verdicts: BTreeMap<Verdict, usize>,
    /// What to do about each verdict found, in one line.
    pub fixes: BTreeMap<Verdict, &'static str>,
}

/// Options of an audit.
#[derive(Clone, Debug, Default)]
pub struct AuditOptions {
    /// Put each file's text (redacted) in its rows.
    pub show_content: bool,
    /// Read the workspace here instead of at each thread's `cwd` (a transcript recorded on
    /// another machine, or with its paths taken out: `scripts/seed-audit`).
    pub workspace: Option<std::path::PathBuf>,
    /// The run's session key, when the params name none (`openclaw agent --session-key`).
    pub session_key: Option<String>,
}

/// The texts of a turn's layers, collapsed: the thread's (from its latest start or resume) and
/// the turn's own.
#[derive(Clone, Debug, Default)]
pub struct Layers {
    pub texts: BTreeMap<Layer, String>,
}

impl Layers {
    /// The layers of a thread-opening request's params and a `turn/start`'s.
    pub fn of(thread: &Value, turn: &Value) -> Self {
        let mut texts = BTreeMap::new();
        let text = |value: &Value| value.as_str().map(collapsed).unwrap_or_default();
        texts.insert(
            Layer::ThreadDeveloperInstructions,
            text(&thread["developerInstructions"]),
        );
        texts.insert(
            Layer::ThreadBaseInstructions,
            text(&thread["baseInstructions"]),
        );
        texts.insert(
            Layer::CollaborationInstructions,
            text(&turn["collaborationMode"]["settings"]["developer_instructions"]),
        );
        texts.insert(
            Layer::AdditionalContext,
            strings_of(&turn["additionalContext"]),
        );
        let input: Vec<&str> = turn["input"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|item| item["text"].as_str())
            .collect();
        texts.insert(Layer::TurnInput, collapsed(&input.join("\n")));
        Self { texts }
    }

    /// Where `content` of `name` is found.
    pub fn landings(&self, name: &str, content: &str) -> Vec<Landing> {
        self.texts
            .iter()
            .filter_map(|(layer, text)| {
                find(name, content, text).map(|how| Landing { layer: *layer, how })
            })
            .collect()
    }
}

/// Where the spec puts a routed file.
pub fn spec_landings(surface: Surface, truncated: bool) -> Vec<Landing> {
    let whole = if truncated { How::Cut } else { How::Whole };
    let at = |layer, how| vec![Landing { layer, how }];
    match surface {
        Surface::ThreadDeveloperInstructions => at(Layer::ThreadDeveloperInstructions, whole),
        Surface::CollaborationInstructions => at(Layer::CollaborationInstructions, How::Pointer),
        Surface::TurnInput => at(Layer::TurnInput, whole),
        Surface::NativeCodex => at(Layer::LeftToCodex, How::Whole),
        Surface::SystemPrompt | Surface::SystemPromptDynamic | Surface::Omitted => Vec::new(),
    }
}

/// The verdict of one file: the spec's landings beside OpenClaw's.
pub fn verdict(spec: &[Landing], openclaw: &[Landing]) -> (Verdict, String) {
    let left_to_codex = spec
        .iter()
        .any(|landing| landing.layer == Layer::LeftToCodex);
    let spec_sent: Vec<&Landing> = spec
        .iter()
        .filter(|landing| landing.layer != Layer::LeftToCodex)
        .collect();
    let layers = |landings: &[&Landing]| {
        let mut layers: Vec<Layer> = landings.iter().map(|landing| landing.layer).collect();
        layers.dedup();
        layers
    };
    let theirs: Vec<&Landing> = openclaw.iter().collect();
    let named = |landings: &[&Landing]| {
        landings_label(&landings.iter().map(|landing| **landing).collect::<Vec<_>>())
    };
    match (spec_sent.is_empty(), theirs.is_empty()) {
        (true, true) if left_to_codex => (
            Verdict::AsSpec,
            "left to Codex (it reads the file itself)".to_string(),
        ),
        (true, true) => (
            Verdict::AsSpec,
            "sent nowhere, as the spec says".to_string(),
        ),
        (true, false) if left_to_codex => (
            Verdict::Extra,
            format!("sent in {} besides Codex reading it itself", named(&theirs)),
        ),
        (true, false) => (
            Verdict::Extra,
            format!(
                "the spec sends it nowhere; OpenClaw sent it in {}",
                named(&theirs)
            ),
        ),
        (false, true) => (
            Verdict::Missing,
            format!(
                "the spec sends it in {}; OpenClaw sent it nowhere",
                named(&spec_sent)
            ),
        ),
        (false, false) if layers(&spec_sent) != layers(&theirs) => (
            Verdict::Moved,
            format!("{} → {}", named(&spec_sent), named(&theirs)),
        ),
        (false, false) => {
            let cut =
                |landings: &[&Landing]| landings.iter().any(|landing| landing.how == How::Cut);
            let hows = |landings: &[&Landing]| {
                landings
                    .iter()
                    .map(|landing| landing.how)
                    .collect::<Vec<_>>()
            };
            if hows(&spec_sent) == hows(&theirs) {
                (Verdict::AsSpec, named(&theirs))
            } else if cut(&spec_sent) || cut(&theirs) {
                (
                    Verdict::Truncated,
                    format!("spec: {}; OpenClaw: {}", named(&spec_sent), named(&theirs)),
                )
            } else {
                (
                    Verdict::Moved,
                    format!("{} → {}", named(&spec_sent), named(&theirs)),
                )
            }
        }
    }
}

/// A regular file itself (never a link), read capped.
fn read_regular(path: &Path) -> Option<Vec<u8>> {
    if !regular_file(path) {
        return None;
    }
    crate::support::fs::read_file_capped(path, MAX_FILE_BYTES).ok()
}

/// The model request documents of a thread's turn (`model-requests/<thread>/turn-NN/`), their
/// bodies' strings collapsed; `None` without a capture of the turn.
fn model_text(dir: &Path, thread: &str, turn: usize) -> Option<String> {
    let folder = dir
        .join("model-requests")
        .join(crate::traffic::capture::live::safe_name(thread))
        .join(format!("turn-{turn:02}"));
    let mut texts = String::new();
    let mut any = false;
    for number in 1..=64 {
        let suffix = if number == 1 {
            String::new()
        } else {
            format!(".{number}")
        };
        let Some(bytes) = read_regular(&folder.join(format!("model-request{suffix}.json"))) else {
            break;
        };
        any = true;
        if let Ok(request) = serde_json::from_slice::<Value>(&bytes) {
            texts.push_str(&strings_of(&request["body"]));
            texts.push(' ');
        }
    }
    any.then_some(texts)
}

/// Thread config keys the spec's translation never sets, when OpenClaw sets them.
const NOTED_CONFIG: [&str; 2] = ["project_doc_max_bytes", "project_doc_fallback_filenames"];

/// What OpenClaw's params carry beyond the workspace files, in words.
fn notes_of(thread: &Value, turn: &Value) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(context) = turn["additionalContext"].as_object() {
        let keys: Vec<String> = context
            .keys()
            .map(|key| {
                crate::support::text::printable(key)
                    .chars()
                    .take(80)
                    .collect()
            })
            .collect();
        notes.push(format!("additionalContext ({})", keys.join(", ")));
    } else if !turn["additionalContext"].is_null() {
        notes.push("additionalContext".to_string());
    }
    for key in NOTED_CONFIG {
        if let Some(value) = thread["config"].get(key) {
            let value: String = value.to_string().chars().take(80).collect();
            notes.push(format!("thread config {key} = {value}"));
        }
    }
    if let Some(trigger) = turn["turnTrigger"].as_str() {
        notes.push(format!(
            "turnTrigger {}",
            crate::support::text::printable(trigger)
                .chars()
                .take(40)
                .collect::<String>()
        ));
    }
    notes
}

/// Audit the transcript folder `dir`.
pub fn audit(dir: &Path, options: &AuditOptions) -> Result<AuditReport> {
    transcript_folder(dir)?;
    let mut client = None;
    let mut threads = Vec::new();
    let mut files_of: Vec<(String, Vec<std::path::PathBuf>)> = Vec::new();
    for source in sources(dir) {
        let connection = source.join("connection.jsonl");
        let connection = match regular_file(&connection) {
            true => Some(json_lines(&connection)?),
            false => None,
        };
        for entry in connection.into_iter().flatten() {
            let entry = entry?;
            if entry["message"]["method"] == method::INITIALIZE {
                let name = entry["message"]["params"]["clientInfo"]["name"].as_str();
                let version = entry["message"]["params"]["clientInfo"]["version"].as_str();
                if let Some(name) = name {
                    client = Some(
                        crate::support::text::printable(&format!(
                            "{name} {}",
                            version.unwrap_or_default()
                        ))
                        .trim()
                        .to_string(),
                    );
                }
            }
        }
        for file in files_in(&source) {
            let Some(name) = file
                .file_name()
                .map(|name| name.to_string_lossy().to_string())
            else {
                continue;
            };
            let Some(thread_name) = name.strip_suffix(".jsonl") else {
                continue;
            };
            if crate::traffic::record::RESERVED_NAMES.contains(&thread_name) {
                continue;
            }
            // A thread is one, whichever connections carried it (OpenClaw resumes its thread
            // on a new connection every run): its files are read together, in order.
            let known = files_of.len();
            match files_of.iter_mut().find(|(name, _)| name == thread_name) {
                Some((_, files)) => files.push(file),
                None if known < MAX_THREADS => files_of.push((thread_name.to_string(), vec![file])),
                None => {}
            }
        }
    }
    for (thread_name, files) in &files_of {
        threads.push(audit_thread(dir, thread_name, files, options)?);
    }
    if threads.is_empty() {
        return Err(crate::traffic::trace::offline::no_thread_files(dir));
    }
    let mut verdicts = BTreeMap::new();
    for row in threads
        .iter()
        .flat_map(|thread| &thread.turns)
        .flat_map(|turn| &turn.rows)
    {
        *verdicts.entry(row.verdict).or_insert(0) += 1;
    }
    let fixes = verdicts
        .keys()
        .filter_map(|verdict| Some((*verdict, verdict.fix()?)))
        .collect();
    Ok(AuditReport {
        client,
        threads,
        verdicts,
        fixes,
    })
}

fn audit_thread(
    dir: &Path,
    thread: &str,
    files: &[std::path::PathBuf],
    options: &AuditOptions,
) -> Result<ThreadAudit> {
    let mut opened = Sent::default();
    let mut ephemeral = false;
    let mut cwd = String::new();
    let mut turns = Vec::new();
    let mut skipped = None;
    // A message two connections' files both hold (one request, as each saw it) counts once.
    let mut seen = std::collections::HashSet::new();
    'files: for file in files {
        // A line at a time, with one line of lookahead (a routed request follows the client's).
        let mut lines = json_lines(file)?.peekable();
        while let Some(entry) = lines.next() {
            let entry = entry?;
            if entry["direction"] != "in" {
                continue;
            }
            let message = &entry["message"];
            let counted = matches!(
                message["method"].as_str(),
                Some(method::THREAD_START | method::THREAD_RESUME | method::TURN_START)
            );
            if counted && entry["atMs"].is_number() && seen.len() < 4 * MAX_TURNS {
                let key = (
                    entry["atMs"].to_string(),
                    message["id"].to_string(),
                    message["method"].to_string(),
                );
                if !seen.insert(key) {
                    continue;
                }
            }
            let params = &message["params"];
            // What Codex got in its place, when clawbridge routed it (`--route spec`): the entry
            // that follows it, for the same request.
            let routed = match lines.peek() {
                Some(Ok(next))
                    if next["direction"] == "routed" && next["message"]["id"] == message["id"] =>
                {
                    lines.next().and_then(|next| next.ok())
                }
                _ => None,
            };
            let routed = routed.as_ref();
            let sent = Sent {
                client: params.clone(),
                codex: routed
                    .map_or(params, |next| &next["message"]["params"])
                    .clone(),
                facts: std::cell::OnceCell::new(),
                routed: routed.map(|next| {
                    next["notes"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                }),
            };
            match message["method"].as_str() {
                Some(method::THREAD_START | method::THREAD_RESUME) => {
                    ephemeral = params["ephemeral"] == true;
                    opened = sent;
                    if let Some(dir) = params["cwd"].as_str() {
                        cwd = dir.to_string();
                    }
                }
                Some(method::TURN_START) if ephemeral => {
                    skipped = Some(
                        "an ephemeral thread (a utility call of OpenClaw's, such as an activity recap, not an agent's turn): its workspace files are not routed"
                            .to_string(),
                    );
                }
                Some(method::TURN_START) => {
                    if let Some(dir) = params["cwd"].as_str() {
                        cwd = dir.to_string();
                    }
                    if let Some(dir) = &options.workspace {
                        cwd = dir.display().to_string();
                    }
                    if cwd.is_empty() {
                        skipped = Some("no cwd in the thread's or the turn's params".to_string());
                        continue;
                    }
                    if turns.len() >= MAX_TURNS {
                        skipped = Some(format!(
                            "more than {MAX_TURNS} turns: the first {MAX_TURNS} are audited"
                        ));
                        break 'files;
                    }
                    let number = turns.len() + 1;
                    match audit_turn(dir, thread, number, &cwd, &opened, &sent, options) {
                        Ok(turn) => turns.push(turn),
                        Err(error) => skipped = Some(error.to_string()),
                    }
                }
                _ => {}
            }
        }
    }
    Ok(ThreadAudit {
        thread: thread.to_string(),
        cwd,
        skipped: if turns.is_empty() {
            skipped.or_else(|| Some("no turn/start from the client".to_string()))
        } else {
            skipped
        },
        turns,
    })
}

fn audit_turn(
    dir: &Path,
    thread: &str,
    number: usize,
    cwd: &str,
    opened: &Sent,
    turn: &Sent,
    options: &AuditOptions,
) -> Result<TurnAudit> {
    let model = model_text(dir, thread, number);
    turn_audit(cwd, opened, turn, number, model, options)
}

/// One turn audited as it happens (`app-server --audit`): the thread's latest start or resume
/// params (`opened`) and the turn's, the workspace read at `cwd`; no model column (the model
/// request is not made yet).
pub fn audit_live_turn(
    cwd: &str,
    opened: &Value,
    turn: &Value,
    number: usize,
) -> Result<TurnAudit> {
    turn_audit(
        cwd,
        &Sent::as_sent(opened),
        &Sent::as_sent(turn),
        number,
        None,
        &AuditOptions::default(),
    )
}

/// [`audit_live_turn`] as the observation wing takes it (`app-server --audit`, `serve
/// --transcript`): each turn's table as text and its rows as JSON.
pub fn live_auditor() -> crate::observe::audit::TurnAuditor {
    std::sync::Arc::new(|cwd: &str, opened: &Value, turn: &Value, number: usize| {
        let audited =
            audit_live_turn(cwd, opened, turn, number).map_err(|error| error.to_string())?;
        Ok(crate::observe::audit::AuditedTurn {
            text: audited.render_text(),
            rows: serde_json::to_value(&audited).map_err(|error| error.to_string())?,
        })
    })
}

fn turn_audit(
    cwd: &str,
    opened: &Sent,
    turn: &Sent,
    number: usize,
    model: Option<String>,
    options: &AuditOptions,
) -> Result<TurnAudit> {
    // The run is inferred from what the client sent (what OpenClaw pasted tells what it took
    // the session for); the layers are what Codex got.
    let infer = InferOptions {
        workspace_given: options.workspace.is_some(),
        session_key: options.session_key.clone(),
        facts: opened.facts(cwd),
    };
    let (document, inferred) = infer_run(cwd, &opened.client, &turn.client, &infer);
    let (routed, files) = spec_of(document, Path::new(cwd))?;
    let layers = Layers::of(&opened.codex, &turn.codex);
    let mut rows = Vec::new();
    for routed_file in &routed.files {
        let content = files
            .iter()
            .find(|file| file.name == routed_file.name)
            .map(|file| file.text.as_str())
            .unwrap_or_default();
        let spec = spec_landings(routed_file.surface, routed_file.truncated);
        let openclaw = layers.landings(&routed_file.name, content);
        let (verdict, detail) = verdict(&spec, &openclaw);
        rows.push(Row {
            file: routed_file.name.clone(),
            spec,
            openclaw,
            model: model
                .as_deref()
                .and_then(|text| find(&routed_file.name, content, text)),
            verdict,
            detail,
            content: options
                .show_content
                .then(|| crate::support::redact::redact_text(content).into_owned()),
        });
    }
    let collaboration = collapsed(
        turn.codex["collaborationMode"]["settings"]["developer_instructions"]
            .as_str()
            .unwrap_or_default(),
    );
    let collaboration_reached_model = match (&model, collaboration.is_empty()) {
        (Some(text), false) => {
            let head: String = collaboration.chars().take(200).collect();
            Some(text.contains(&head))
        }
        _ => None,
    };
    let mut flags = Vec::new();
    if collaboration_reached_model == Some(false) {
        flags.push(
            "the collaboration instructions Codex was sent are not in the model request"
                .to_string(),
        );
    }
    if model.is_some() {
        for row in &rows {
            let sent_by_spec = row
                .spec
                .iter()
                .any(|landing| landing.layer != Layer::LeftToCodex);
            let has_content = files
                .iter()
                .any(|file| file.name == row.file && !file.text.trim().is_empty());
            if sent_by_spec && has_content && row.model.is_none() {
                flags.push(format!("{} never reached the model", row.file));
            }
        }
    }
    let routed: Vec<String> = opened
        .routed
        .iter()
        .chain(turn.routed.iter())
        .flatten()
        .cloned()
        .collect();
    Ok(TurnAudit {
        turn: number,
        inferred,
        notes: notes_of(&opened.client, &turn.client),
        route: if opened.routed.is_some() || turn.routed.is_some() {
            "spec"
        } else {
            "as-sent"
        },
        routed,
        collaboration_reached_model,
        flags,
        rows,
    })
}

impl TurnAudit {
    /// The turn's part of the terminal table: what was inferred, what else OpenClaw sent, and
    /// one row per file.
    pub fn render_text(&self) -> String {
        let mut out = format!("  turn {}\n", self.turn);
        for fact in &self.inferred {
            out.push_str(&format!("    inferred {fact}\n"));
        }
        for note in &self.notes {
            out.push_str(&format!("    OpenClaw also sent: {note}\n"));
        }
        if self.route == "spec" {
            out.push_str("    route: spec (clawbridge moved the workspace files)\n");
            for note in &self.routed {
                out.push_str(&format!("      {note}\n"));
            }
        }
        for flag in &self.flags {
            out.push_str(&format!("    ! {flag}\n"));
        }
        let header = ["file", "spec", "OpenClaw", "model", "verdict"];
        let rows: Vec<[String; 5]> = self
            .rows
            .iter()
            .map(|row| {
                [
                    row.file.clone(),
                    landings_label(&row.spec),
                    landings_label(&row.openclaw),
                    row.model
                        .map_or("-".to_string(), |how| how.label().to_string()),
                    row.verdict.label().to_string(),
                ]
            })
            .collect();
        let mut widths = header.map(str::len);
        for row in &rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let mut text = String::from("    ");
            for (index, (cell, width)) in cells.iter().zip(widths).enumerate() {
                text.push_str(cell);
                if index + 1 < cells.len() {
                    text.push_str(&" ".repeat(width - cell.chars().count() + 2));
                }
            }
            text.trim_end().to_string() + "\n"
        };
        out.push_str(&line(&header.map(str::to_string)));
        for row in &rows {
            out.push_str(&line(row));
        }
        out
    }
}

impl AuditReport {
    /// Whether any row has one of `verdicts`.
    pub fn any(&self, verdicts: &[Verdict]) -> bool {
        verdicts
            .iter()
            .any(|verdict| self.verdicts.get(verdict).copied().unwrap_or(0) > 0)
    }

    /// The terminal table.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        if let Some(client) = &self.client {
            out.push_str(&format!("client: {client}\n"));
        }
        for thread in &self.threads {
            out.push_str(&format!(
                "\nthread {} (workspace {})\n",
                thread.thread, thread.cwd
            ));
            if let Some(why) = &thread.skipped {
                out.push_str(&format!("  not audited: {why}\n"));
            }
            for turn in &thread.turns {
                out.push_str(&turn.render_text());
            }
        }
        let summary: Vec<String> = self
            .verdicts
            .iter()
            .map(|(verdict, count)| format!("{count} {}", verdict.label()))
            .collect();
        out.push_str(&format!("\n{}\n", summary.join(", ")));
        for (verdict, fix) in &self.fixes {
            out.push_str(&format!("{}: {fix}\n", verdict.label()));
        }
        out
    }
    /// One self-contained HTML page (no script, no outside resource).
    pub fn render_html(&self) -> String {
        let escape = crate::support::text::escape_html;
        let mut body = String::new();
        if let Some(client) = &self.client {
            body.push_str(&format!("<p>client: <b>{}</b></p>", escape(client)));
        }
        let summary: Vec<String> = self
            .verdicts
            .iter()
            .map(|(verdict, count)| {
                format!(
                    "<span class=\"v {}\">{count} {}</span>",
                    format!("{verdict:?}").to_lowercase(),
                    verdict.label()
                )
            })
            .collect();
        body.push_str(&format!("<p class=\"summary\">{}</p>", summary.join(" ")));
        for thread in &self.threads {
            body.push_str(&format!(
                "<h2>thread <code>{}</code></h2><p>workspace <code>{}</code></p>",
                escape(&thread.thread),
                escape(&thread.cwd)
            ));
            if let Some(why) = &thread.skipped {
                body.push_str(&format!("<p>not audited: {}</p>", escape(why)));
            }
            for turn in &thread.turns {
                body.push_str(&format!(
                    "<h3>turn {}</h3><ul class=\"inferred\">",
                    turn.turn
                ));
                for fact in &turn.inferred {
                    body.push_str(&format!("<li>inferred {}</li>", escape(fact)));
                }
                for note in &turn.notes {
                    body.push_str(&format!("<li>OpenClaw also sent: {}</li>", escape(note)));
                }
                body.push_str("</ul><table><tr><th>file</th><th>spec</th><th>OpenClaw</th><th>model</th><th>verdict</th><th>detail</th></tr>");
                for row in &turn.rows {
                    body.push_str(&format!(
                        "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td class=\"v {}\">{}</td><td>{}</td></tr>",
                        escape(&row.file),
                        escape(&landings_label(&row.spec)),
                        escape(&landings_label(&row.openclaw)),
                        row.model.map_or("-", How::label),
                        format!("{:?}", row.verdict).to_lowercase(),
                        row.verdict.label(),
                        escape(&row.detail),
                    ));
                    if let Some(content) = &row.content {
                        body.push_str(&format!(
                            "<tr class=\"content\"><td colspan=\"6\"><pre>{}</pre></td></tr>",
                            escape(content)
                        ));
                    }
                }
                body.push_str("</table>");
            }
        }
        format!(
            "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>clawbridge audit</title><style>{STYLE}</style></head><body><h1>Where each workspace file went</h1><p>Each bootstrap file of each turn: where the system-prompt spec puts it (clawbridge's routing of the same run), where OpenClaw put it, and whether the model request held it.</p>{body}</body></html>\n"
        )
    }
}

const STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:2em;color:#1b1f24;background:#fff}h1{font-size:1.4em}h2{font-size:1.15em;margin-top:2em}h3{font-size:1em}table{border-collapse:collapse;width:100%;margin:.5em 0 1.5em}th,td{border:1px solid #d0d7de;padding:.3em .6em;text-align:left;vertical-align:top}th{background:#f6f8fa}code{font:12px ui-monospace,monospace}pre{white-space:pre-wrap;font:12px ui-monospace,monospace;margin:0}.inferred{color:#57606a;font-size:.9em}.v{font-weight:600;padding:.1em .4em;border-radius:4px}.asspec{background:#dafbe1;color:#116329}.moved{background:#fff8c5;color:#7d4e00}.missing{background:#ffebe9;color:#a40e26}.truncated{background:#fbefff;color:#6e3f9e}.extra{background:#ddf4ff;color:#0550ae}.summary .v{margin-right:.5em}";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::live::{session_key_in, HEAD_CHARS};

    fn at(layer: Layer, how: How) -> Landing {
        Landing { layer, how }
    }

    #[test]
    fn find_tells_whole_cut_pointer_and_nothing() {
        let content = "# Soul\n\nBe   kind.\nAlways.";
        assert_eq!(
            find("SOUL.md", content, "x # Soul Be kind. Always. y"),
            Some(How::Whole)
        );
        let long = "word ".repeat(100);
        let head: String = collapsed(&long).chars().take(HEAD_CHARS).collect();
        assert_eq!(
            find("SOUL.md", &long, &format!("a {head} [cut]")),
            Some(How::Cut)
        );
        assert_eq!(
            find("SOUL.md", content, "read SOUL.md first"),
            Some(How::Pointer)
        );
        assert_eq!(find("SOUL.md", content, "nothing here"), None);
    }

    #[test]
    fn each_verdict() {
        let thread = at(Layer::ThreadDeveloperInstructions, How::Whole);
        let collab = at(Layer::CollaborationInstructions, How::Whole);
        let codex = at(Layer::LeftToCodex, How::Whole);
        assert_eq!(verdict(&[thread], &[thread]).0, Verdict::AsSpec);
        assert_eq!(verdict(&[], &[]).0, Verdict::AsSpec);
        assert_eq!(verdict(&[codex], &[]).0, Verdict::AsSpec);
        let (moved, detail) = verdict(&[thread], &[collab]);
        assert_eq!(moved, Verdict::Moved);
        assert_eq!(
            detail,
            "thread developer instructions → collaboration instructions"
        );
        assert_eq!(verdict(&[thread], &[]).0, Verdict::Missing);
        assert_eq!(
            verdict(
                &[thread],
                &[at(Layer::ThreadDeveloperInstructions, How::Cut)]
            )
            .0,
            Verdict::Truncated
        );
        assert_eq!(verdict(&[], &[collab]).0, Verdict::Extra);
        assert_eq!(verdict(&[codex], &[thread]).0, Verdict::Extra);
    }

    #[test]
    fn layers_read_openclaw_s_params() {
        let thread = serde_json::json!({"developerInstructions": "You are an agent.\n\nBe kind."});
        let turn = serde_json::json!({
            "collaborationMode": {"settings": {"developer_instructions": "<AGENT_SOUL>\nBe  calm.\n</AGENT_SOUL>"}},
            "additionalContext": {"openclaw_temporal_context": {"kind": "application", "value": "Current date: 2026-12-03"}},
            "input": [{"type": "text", "text": "hello"}]
        });
        let layers = Layers::of(&thread, &turn);
        assert_eq!(
            layers.landings("SOUL.md", "Be calm."),
            vec![at(Layer::CollaborationInstructions, How::Whole)]
        );
        assert_eq!(
            layers.landings("X.md", "Current date: 2026-12-03"),
            vec![at(Layer::AdditionalContext, How::Whole)]
        );
        assert_eq!(
            layers.landings("USER.md", "Be kind."),
            vec![at(Layer::ThreadDeveloperInstructions, How::Whole)]
        );
    }

    #[test]
    fn a_session_key_is_read_from_the_params() {
        assert_eq!(
            session_key_in("session agent:main:cron:nightly-backup. and more").as_deref(),
            Some("agent:main:cron:nightly-backup")
        );
        assert_eq!(session_key_in("no key"), None);
    }
}

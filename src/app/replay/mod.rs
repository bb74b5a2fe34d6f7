//! `clawbridge replay DIR`: a recorded OpenClaw session played again through today's clawbridge
//! and a real Codex, offline, and held against the recording turn by turn (docs/replay.md).
//!
//! A recording is an `app-server --transcript` folder with its captures (`model-requests/`, each
//! request beside the answer it got): what the client sent and saw, what the model was sent and
//! answered. The replay plays the client's side ([`drive`]) into `clawbridge app-server` as
//! OpenClaw runs it, over a real Codex with a scratch home, and answers the model's side from
//! the recording ([`crate::traffic::replay_book`]: by thread and turn, streamed as recorded).
//! Then every model request is held against its recorded twin layer by layer, and every message
//! the client saw against its twin ([`compare`]: ids, folders and the clock aside). The verdict
//! per turn says whether what the model receives changed, and where first.
//!
//! Nothing of the recording runs: Codex's requests are answered from it or declined, a thread's
//! hooks, MCP servers and providers are not sent, a recorded model that ran one of Codex's own
//! tools makes the recording unreplayable rather than run it again; Codex reaches nothing but
//! the loopback stub (and, when forking, the upstream the user names).

mod bundle;
mod compare;
mod drive;
mod recording;
mod report;

use crate::codex::protocol::table::name as method;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

pub use bundle::{bundle, BundleSummary};
pub use report::{Divergence, ReplayReport, TurnRow, Verdict};

use crate::error::Error;
use crate::traffic::replay_book::{ReplayBook, Served};
use compare::{parting, Folders, Pairing};
use recording::{Entry, Recording, Way};

/// How long the replay waits, by default, for what the recording says comes next.
pub const DEFAULT_STEP_TIMEOUT: Duration = Duration::from_secs(60);
/// Bytes of a workspace copied into the scratch folder at most, and files.
const MAX_WORKSPACE_BYTES: u64 = 256 * 1024 * 1024;
const MAX_WORKSPACE_FILES: usize = 20_000;

/// What `replay` is given besides the folder.
#[derive(Clone, Debug)]
pub struct ReplayOptions {
    /// The Codex CLI.
    pub codex_bin: PathBuf,
    /// The clawbridge binary that runs the slot (this one).
    pub clawbridge: PathBuf,
    /// `--workspace RECORDED=DIR`: the folder a recorded `cwd` is replayed from (copied).
    pub workspaces: Vec<(String, PathBuf)>,
    /// `--out DIR`: keep the replay's own transcript and captures there.
    pub out: Option<PathBuf>,
    pub step_timeout: Duration,
    /// `--until-turn N --then-upstream URL`: the turns past N go to the upstream, live.
    pub fork: Option<Fork>,
    /// `--route`: the slot's route for the replay (default: the recording's own, `spec` when it
    /// holds routed requests). The other one shows what routing changes in what the model
    /// receives on a real conversation.
    pub route: Option<crate::translate::live::LiveRoute>,
}

/// Where a forked replay goes live.
#[derive(Clone, Debug)]
pub struct Fork {
    pub after_turn: usize,
    /// The upstream's base URL (`.../v1`).
    pub upstream: String,
    /// The bearer key it takes, if any.
    pub key: Option<String>,
}

/// Replay `dir`; the report, or why it cannot be replayed.
pub async fn replay(dir: &Path, options: &ReplayOptions) -> Result<ReplayReport, Error> {
    let scratch = tempfile::Builder::new()
        .prefix("clawbridge-replay-")
        .tempdir()
        .map_err(|source| Error::Write {
            path: std::env::temp_dir(),
            source,
        })?;
    let scratch_path = scratch
        .path()
        .canonicalize()
        .unwrap_or_else(|_| scratch.path().to_path_buf());
    let recording = load_recording(dir, &scratch_path)?;
    let out = match &options.out {
        Some(out) => fresh_out(out)?,
        None => scratch_path.join("out"),
    };
    let home = scratch_path.join("home");
    let codex_home = scratch_path.join("codex-home");
    for folder in [&home, &codex_home, &out] {
        crate::support::fs::create_private_dir(folder).map_err(|source| Error::Write {
            path: folder.clone(),
            source,
        })?;
    }
    let mut notes = recording.skipped.clone();
    let mut folders = Folders::default();
    place_workspaces(&recording, options, &scratch_path, &mut folders, &mut notes)?;

    let book = Arc::new(Mutex::new(book_of(&recording, options.fork.as_ref())));
    let stub = crate::traffic::stub::ResponsesStub::start(Default::default()).await?;
    stub.answer_from(Arc::clone(&book));
    // No `config.toml`: the recorded Codex ran on its defaults and OpenClaw's `-c` flags (a
    // recorded `config/read` says which), and the replayed one does the same.

    let route_spec = options.route.map_or(recording.routed, |route| {
        route == crate::translate::live::LiveRoute::Spec
    });
    let mut pairing = Pairing::default();
    let mut rows = Vec::new();
    for (index, connection) in recording.connections.iter().enumerate() {
        let connection_out = out.join(format!("connection-{}", index + 1));
        crate::support::fs::create_private_dir(&connection_out).map_err(|source| Error::Write {
            path: connection_out.clone(),
            source,
        })?;
        let run = drive::ConnectionRun {
            clawbridge: &options.clawbridge,
            codex_bin: &options.codex_bin,
            out: connection_out.clone(),
            home: home.clone(),
            codex_home: codex_home.clone(),
            upstream: stub.base_url(),
            route_spec,
            session_flags: drive::session_flags(connection),
            step_timeout: options.step_timeout,
        };
        let driven = drive::drive(connection, &run, &mut pairing, &mut folders, &book).await?;
        notes.extend(driven.notes);
        if let Some(stalled) = &driven.stalled {
            notes.push(format!(
                "connection {}: stopped {stalled}",
                connection.label
            ));
        }
        rows.extend(compare_connection(
            &recording,
            connection,
            &connection_out.join("transcript"),
            &mut pairing,
            &folders,
            driven.stalled.as_deref(),
            options.fork.as_ref(),
        )?);
    }
    let served = crate::support::sync::lock(&book).served().to_vec();
    for served in &served {
        if let Served::Missing { reason } = served {
            notes.push(format!("a model request had no recorded twin: {reason}"));
        }
    }
    drop(stub);
    Ok(ReplayReport::new(
        dir,
        route_spec,
        rows,
        &served,
        notes,
        options.out.is_some().then(|| out.clone()),
    ))
}

/// The recording at `dir`: a bundle (one file) unpacked into `scratch` first, as hostile
/// input; a folder read where it is. Refused when nothing in it can be replayed or replaying it
/// would run what it recorded.
fn load_recording(dir: &Path, scratch: &Path) -> Result<Recording, Error> {
    let source = if std::fs::symlink_metadata(dir).is_ok_and(|meta| meta.is_file()) {
        let into = scratch.join("bundle");
        crate::support::fs::create_private_dir(&into).map_err(|source| Error::Write {
            path: into.clone(),
            source,
        })?;
        bundle::unpack(dir, &into)?;
        into
    } else {
        dir.to_path_buf()
    };
    let recording = Recording::load(&source)?;
    if recording.calls.is_empty() {
        return Err(unreplayable(
            dir,
            "it holds no model requests with their answers (model-requests/<thread>/turn-NN/model-response.json; record with `app-server --transcript DIR --offline` or `--capture`)",
        ));
    }
    refuse_native_tools(dir, &recording)?;
    refuse_mixed_sessions(dir, &recording)?;
    Ok(recording)
}

/// `--out DIR`, made (private) and refused when it holds anything: the replay's transcript is
/// appended to as it goes, and one left from an earlier replay would be read as this one's.
fn fresh_out(out: &Path) -> Result<PathBuf, Error> {
    let used = std::fs::read_dir(out).is_ok_and(|mut entries| entries.next().is_some());
    if used {
        return Err(Error::InvalidArgument {
            flag: "--out".into(),
            message: format!(
                "{} is not empty (give a new or empty folder)",
                out.display()
            ),
        });
    }
    crate::support::fs::create_private_dir(out).map_err(|source| Error::Write {
        path: out.to_path_buf(),
        source,
    })?;
    Ok(out.canonicalize().unwrap_or_else(|_| out.to_path_buf()))
}

/// The model's side of the replay: every recorded answer by thread and turn, and the fork.
fn book_of(recording: &Recording, fork: Option<&Fork>) -> ReplayBook {
    let mut book = ReplayBook::new();
    for thread in recording.calls.keys() {
        for (turn, answers) in recording.answers(thread) {
            book.add(thread, turn, answers);
        }
    }
    if let Some(fork) = fork {
        book.fork_after(fork.after_turn, fork.upstream.clone(), fork.key.clone());
    }
    book
}

fn unreplayable(dir: &Path, why: &str) -> Error {
    Error::InvalidArgument {
        flag: "DIR".into(),
        message: format!("{} cannot be replayed: {why}", dir.display()),
    }
}

/// A recorded model that ran one of Codex's own tools (a shell command, a patch) would have it
/// run again by the replayed Codex: such a recording is refused, naming the call. OpenClaw's
/// dynamic tools are answered from the recording and are fine.
fn refuse_native_tools(dir: &Path, recording: &Recording) -> Result<(), Error> {
    let dynamic: std::collections::BTreeSet<&str> = recording
        .entries()
        .flat_map(|entry| {
            entry.message["params"]["dynamicTools"]
                .as_array()
                .into_iter()
                .flatten()
        })
        .flat_map(|tool| ["name", "namespace"].map(|key| tool[key].as_str()))
        .flatten()
        .collect();
    for (thread, turns) in &recording.calls {
        for (turn, calls) in turns {
            for call in calls {
                for item in call
                    .answer
                    .as_ref()
                    .and_then(|answer| answer["output"].as_array())
                    .into_iter()
                    .flatten()
                {
                    let kind = item["type"].as_str().unwrap_or_default();
                    let name = item["name"].as_str().unwrap_or_default();
                    let namespace = item["namespace"].as_str().unwrap_or_default();
                    let native = match kind {
                        "function_call" => !dynamic.contains(name) && !dynamic.contains(namespace),
                        "message" | "reasoning" | "web_search_call" => false,
                        _ => kind.ends_with("_call"),
                    };
                    if native {
                        return Err(unreplayable(
                            dir,
                            &format!(
                                "the recorded model ran Codex's own tool `{}` (thread {thread}, turn {turn}), which a replay would run again on this machine",
                                if name.is_empty() { kind } else { name }
                            ),
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

/// A stdio transcript folder written by two app-server processes at once (OpenClaw's heartbeat
/// runs its activity recap beside the turn) keeps them apart by each line's `session`; one
/// written before transcripts named sessions holds two `initialize`s in one `connection.jsonl`,
/// their messages interleaved under the same request ids: which belongs to which cannot be
/// told, so such a folder is refused rather than replayed wrong.
fn refuse_mixed_sessions(dir: &Path, recording: &Recording) -> Result<(), Error> {
    for connection in &recording.connections {
        let sessions = connection
            .files
            .iter()
            .filter(|file| file.name == "connection")
            .flat_map(|file| &file.entries)
            .filter(|entry| entry.session.is_none())
            .filter(|entry| entry.way == Way::In && entry.message["method"] == method::INITIALIZE)
            .count();
        if sessions > 1 {
            return Err(unreplayable(
                dir,
                &format!(
                    "{}/connection.jsonl holds {sessions} sessions (app-server processes that wrote the folder at the same time); their messages share request ids and cannot be told apart",
                    connection.label
                ),
            ));
        }
    }
    Ok(())
}

/// The recorded `cwd`s, each replayed in a scratch copy of the folder the user (or the bundle's
/// manifest) names, or in an empty one (said in the notes).
fn place_workspaces(
    recording: &Recording,
    options: &ReplayOptions,
    scratch: &Path,
    folders: &mut Folders,
    notes: &mut Vec<String>,
) -> Result<(), Error> {
    for (index, cwd) in recording.cwds().iter().enumerate() {
        let target = scratch.join(format!("workspace-{}", index + 1));
        let source = recording.workspace_for(cwd, &options.workspaces);
        match source {
            Some(source) => copy_tree(&source, &target)?,
            None => {
                crate::support::fs::create_private_dir(&target).map_err(|source| Error::Write {
                    path: target.clone(),
                    source,
                })?;
                notes.push(format!(
                    "the session ran in {cwd}, which was not given (--workspace {cwd}=DIR): replayed in an empty folder"
                ));
            }
        }
        // The recorded Codex found a project root there (a `project` layer in its
        // `config/read`). A copy without the
        // marker (`.codex/`) gets one, or Codex would read another set of config layers.
        if recorded_project_root(recording, cwd) && !target.join(".codex").exists() {
            crate::support::fs::create_private_dir(&target.join(".codex")).map_err(|source| {
                Error::Write {
                    path: target.join(".codex"),
                    source,
                }
            })?;
            notes.push(format!("{cwd} was a project root to the recorded Codex: its copy got an empty .codex folder, the marker Codex found there"));
        }
        folders.add(cwd, &target.display().to_string());
    }
    Ok(())
}

/// Whether a recorded `config/read` answer names `cwd` as a project root.
fn recorded_project_root(recording: &Recording, cwd: &str) -> bool {
    let marker = format!("{}/.codex", cwd.trim_end_matches('/'));
    recording
        .entries()
        .filter(|entry| entry.way == Way::Out)
        .flat_map(|entry| {
            entry.message["result"]["layers"]
                .as_array()
                .into_iter()
                .flatten()
        })
        .any(|layer| {
            layer["name"]["type"] == "project" && layer["name"]["dotCodexFolder"] == marker.as_str()
        })
}

/// Copy `source` into `target`: regular files only (a link is not followed, a FIFO or device
/// not opened), within [`MAX_WORKSPACE_BYTES`] and [`MAX_WORKSPACE_FILES`].
fn copy_tree(source: &Path, target: &Path) -> Result<(), Error> {
    let (files, _) = recording::workspace_files(source, MAX_WORKSPACE_FILES)?;
    crate::support::fs::create_private_dir(target).map_err(|error| Error::Write {
        path: target.to_path_buf(),
        source: error,
    })?;
    let mut bytes = 0u64;
    for (relative, path) in files {
        let destination = target.join(&relative);
        if let Some(parent) = destination.parent() {
            std::fs::create_dir_all(parent).map_err(|error| Error::Write {
                path: parent.to_path_buf(),
                source: error,
            })?;
        }
        let left = MAX_WORKSPACE_BYTES.saturating_sub(bytes);
        let content = crate::support::fs::read_file_capped(&path, left)?;
        bytes += content.len() as u64;
        crate::support::fs::write_private(&destination, &content)?;
    }
    Ok(())
}

/// A file's entries cut into its thread's opening (turn 0) and turns (1-based), at each
/// `turn/start` the client sent.
fn by_turn(entries: &[Entry]) -> Vec<Vec<&Entry>> {
    let mut turns: Vec<Vec<&Entry>> = vec![Vec::new()];
    for entry in entries {
        if entry.way == Way::In && entry.message["method"] == method::TURN_START {
            turns.push(Vec::new());
        }
        if let Some(turn) = turns.last_mut() {
            turn.push(entry);
        }
    }
    turns
}

/// Each row of one connection: every thread's opening and turns, compared.
fn compare_connection(
    recording: &Recording,
    connection: &recording::RecordedConnection,
    live_dir: &Path,
    pairing: &mut Pairing,
    folders: &Folders,
    stalled: Option<&str>,
    fork: Option<&Fork>,
) -> Result<Vec<TurnRow>, Error> {
    let mut rows = Vec::new();
    for file in &connection.files {
        let live_name = if file.name == "connection" {
            Some("connection".to_string())
        } else {
            pairing
                .live(&file.name)
                .map(crate::traffic::capture::live::safe_name)
        };
        let live_entries = match &live_name {
            Some(name) => {
                let path = live_dir.join(format!("{name}.jsonl"));
                if path.is_file() {
                    let mut skipped = Vec::new();
                    recording::read_live(&path, &mut skipped)?
                } else {
                    Vec::new()
                }
            }
            None => Vec::new(),
        };
        let recorded_turns = by_turn(&file.entries);
        // The file's messages compared whole, stream by stream (when a notification comes
        // beside the client's next request is timing), the first difference named in the turn
        // its recorded message belongs to. A fork's live turns are left out.
        let compared = |entries: &[Entry]| -> usize {
            let turns = fork.map_or(usize::MAX, |fork| fork.after_turn);
            let mut seen = 0;
            entries
                .iter()
                .position(|entry| {
                    let starts =
                        entry.way == Way::In && entry.message["method"] == method::TURN_START;
                    seen += usize::from(starts);
                    starts && seen > turns
                })
                .unwrap_or(entries.len())
        };
        let recorded_refs: Vec<&Entry> = file.entries[..compared(&file.entries)].iter().collect();
        let live_refs: Vec<&Entry> = live_entries[..compared(&live_entries)].iter().collect();
        // (A message past the end of the recording is named in its last turn.)
        let mut event_divergence =
            compare_events(&recorded_refs, &live_refs, pairing, folders, stalled)
                .map(|(index, divergence)| (turn_of(&file.entries, index), divergence));
        for (turn, recorded) in recorded_turns.iter().enumerate() {
            let forked = fork.is_some_and(|fork| turn > fork.after_turn);
            let mut row = TurnRow::new(&connection.label, &file.name, turn);
            row.events = recorded.len();
            if live_name.is_none() {
                row.diverge(Divergence::missing(
                    "the thread was not opened again",
                    stalled,
                ));
                rows.push(row);
                continue;
            }
            let calls = (turn > 0)
                .then(|| {
                    recording
                        .calls
                        .get(&file.name)
                        .and_then(|turns| turns.get(&turn))
                })
                .flatten();
            row.model_requests = calls.map_or(0, Vec::len);
            if forked {
                row.verdict = Verdict::Live;
                rows.push(row);
                continue;
            }
            if let Some(calls) = calls {
                let live_folder = live_dir
                    .join("model-requests")
                    .join(live_name.as_deref().unwrap_or_default())
                    .join(format!("turn-{turn:02}"));
                if let Some(divergence) = compare_calls(calls, &live_folder, pairing, folders)? {
                    row.diverge(divergence);
                }
            }
            if event_divergence.as_ref().is_some_and(|(at, _)| *at == turn) {
                if let Some((_, divergence)) = event_divergence.take() {
                    row.diverge(divergence);
                }
            }
            if row.first.is_none() {
                row.verdict = if row.model_requests == 0 {
                    Verdict::Reused
                } else {
                    Verdict::Exact
                };
            }
            rows.push(row);
        }
    }
    Ok(rows)
}

/// The first model request of a turn that differs from its recorded twin, by layer.
fn compare_calls(
    calls: &[recording::RecordedCall],
    live_folder: &Path,
    pairing: &mut Pairing,
    folders: &Folders,
) -> Result<Option<Divergence>, Error> {
    for (index, call) in calls.iter().enumerate() {
        let name = if index == 0 {
            "model-request.json".to_string()
        } else {
            format!("model-request.{}.json", index + 1)
        };
        let path = live_folder.join(&name);
        let where_ = format!(
            "{}/{name}",
            live_folder
                .file_name()
                .map(|turn| turn.to_string_lossy().into_owned())
                .unwrap_or_default()
        );
        if !crate::traffic::trace::offline::regular_file(&path) {
            return Ok(Some(Divergence::model(
                &where_,
                None,
                "(request)",
                "a model request".into(),
                "(not sent)".into(),
            )));
        }
        let live = recording::read_json(&path)?;
        if let Some(divergence) = compare_bodies(
            &call.request["body"],
            &live["body"],
            &where_,
            pairing,
            folders,
        ) {
            return Ok(Some(divergence));
        }
    }
    // One request more than recorded is a divergence too.
    let extra = if calls.is_empty() {
        "model-request.json".to_string()
    } else {
        format!("model-request.{}.json", calls.len() + 1)
    };
    if crate::traffic::trace::offline::regular_file(&live_folder.join(&extra)) {
        return Ok(Some(Divergence::model(
            &extra,
            None,
            "(request)",
            "(not sent)".into(),
            "a model request".into(),
        )));
    }
    Ok(None)
}

/// Two request bodies, layer by layer (the cache report's labels), then the rest of the body.
fn compare_bodies(
    recorded: &Value,
    live: &Value,
    where_: &str,
    pairing: &mut Pairing,
    folders: &Folders,
) -> Option<Divergence> {
    let ours = crate::traffic::capture::label_layers(recorded, None);
    let theirs = crate::traffic::capture::label_layers(live, None);
    for (index, layer) in ours.iter().enumerate() {
        let Some(other) = theirs.get(index) else {
            return Some(Divergence::model(
                where_,
                Some(&layer.label),
                &layer.position,
                layer.text.clone(),
                "(absent)".into(),
            ));
        };
        let same = layer.label == other.label && layer.position == other.position;
        let parted = parting(
            &Value::String(layer.text.clone()),
            &Value::String(other.text.clone()),
            pairing,
            folders,
        );
        if !same || parted.is_some() {
            // Where in the body, exactly (`tools[2].description`), when the two bodies part
            // inside this layer's place.
            if let Some(exact) = parting(recorded, live, pairing, folders)
                .filter(|exact| exact.path.starts_with(layer.position.as_str()))
            {
                return Some(Divergence::model(
                    where_,
                    Some(&layer.label),
                    &exact.path,
                    exact.recorded,
                    exact.replayed,
                ));
            }
            let (a, b) = parted.map_or_else(
                || {
                    (
                        format!("{} at {}", layer.label, layer.position),
                        format!("{} at {}", other.label, other.position),
                    )
                },
                |parted| (parted.recorded, parted.replayed),
            );
            return Some(Divergence::model(
                where_,
                Some(&layer.label),
                &layer.position,
                a,
                b,
            ));
        }
    }
    if let Some(other) = theirs.get(ours.len()) {
        return Some(Divergence::model(
            where_,
            Some(&other.label),
            &other.position,
            "(absent)".into(),
            other.text.clone(),
        ));
    }
    parting(recorded, live, pairing, folders).map(|parted| {
        Divergence::model(where_, None, &parted.path, parted.recorded, parted.replayed)
    })
}

/// The first message the client saw differently, with its index in `recorded`. Each stream is
/// held against its own (what the client sent, what clawbridge routed, what Codex notified;
/// Codex's answers by request id): how they interleave is timing, not behaviour.
fn compare_events(
    recorded: &[&Entry],
    live: &[&Entry],
    pairing: &mut Pairing,
    folders: &Folders,
    stalled: Option<&str>,
) -> Option<(usize, Divergence)> {
    let mut first: Option<(usize, Divergence)> = None;
    let mut keep = |found: Option<(usize, Divergence)>| {
        if let Some((index, divergence)) = found {
            if first.as_ref().is_none_or(|(known, _)| index < *known) {
                first = Some((index, divergence));
            }
        }
    };
    for stream in [Stream::Sent, Stream::Routed, Stream::Notified] {
        let ours: Vec<(usize, &Entry)> = recorded
            .iter()
            .enumerate()
            .filter(|(_, entry)| Stream::of(entry) == Some(stream))
            .map(|(index, entry)| (index, *entry))
            .collect();
        let theirs: Vec<&Entry> = live
            .iter()
            .copied()
            .filter(|entry| Stream::of(entry) == Some(stream))
            .collect();
        keep(first_parting(
            &ours,
            &theirs,
            pairing,
            folders,
            stalled,
            recorded.len(),
        ));
    }
    // Codex's answers, each held against the answer to the same request: when an answer comes
    // among the notifications of its turn is Codex's own race.
    for (index, entry) in recorded.iter().enumerate() {
        if Stream::of(entry).is_some() {
            continue;
        }
        let id = &entry.message["id"];
        let twin = live
            .iter()
            .find(|other| Stream::of(other).is_none() && other.message["id"] == *id);
        let found = match twin {
            Some(twin) => parting(&entry.message, &twin.message, pairing, folders).map(|parted| {
                Divergence::event(
                    index,
                    &entry.message,
                    parted.recorded,
                    parted.replayed,
                    &parted.path,
                )
            }),
            None => Some(Divergence::event(
                index,
                &entry.message,
                "(the answer)".into(),
                format!(
                    "(not sent{})",
                    stalled
                        .map(|why| format!(": stopped {why}"))
                        .unwrap_or_default()
                ),
                "",
            )),
        };
        keep(found.map(|divergence| (index, divergence)));
    }
    first
}

/// The turn (0 for the opening) the entry at `index` of a file belongs to.
fn turn_of(entries: &[Entry], index: usize) -> usize {
    entries
        .iter()
        .take(index.saturating_add(1))
        .filter(|entry| entry.way == Way::In && entry.message["method"] == method::TURN_START)
        .count()
}

/// The ordered streams of a turn: what the client sent, what clawbridge routed, what Codex
/// notified. Codex's answers (`None`) are matched by id instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stream {
    Sent,
    Routed,
    Notified,
}

impl Stream {
    fn of(entry: &Entry) -> Option<Stream> {
        match entry.way {
            Way::In => Some(Stream::Sent),
            Way::Routed => Some(Stream::Routed),
            Way::Out if entry.message.get("method").is_some() => Some(Stream::Notified),
            Way::Out => None,
        }
    }
}

/// The first of `recorded` (with its index in the turn) that `live` does not match in order.
fn first_parting(
    recorded: &[(usize, &Entry)],
    live: &[&Entry],
    pairing: &mut Pairing,
    folders: &Folders,
    stalled: Option<&str>,
    turn_length: usize,
) -> Option<(usize, Divergence)> {
    for (position, (index, entry)) in recorded.iter().enumerate() {
        let Some(other) = live.get(position) else {
            let why = stalled
                .map(|why| format!(": stopped {why}"))
                .unwrap_or_default();
            return Some((
                *index,
                Divergence::event(
                    *index,
                    &entry.message,
                    "(the message)".into(),
                    format!("(not sent{why})"),
                    "",
                ),
            ));
        };
        // What the client sent (and clawbridge routed from it) went without what the replay
        // keeps from running: held against the recording tamed the same way.
        let ours = if matches!(entry.way, Way::In | Way::Routed) {
            drive::tame(&entry.message).0
        } else {
            entry.message.clone()
        };
        if let Some(parted) = parting(&ours, &other.message, pairing, folders) {
            return Some((
                *index,
                Divergence::event(
                    *index,
                    &entry.message,
                    parted.recorded,
                    parted.replayed,
                    &parted.path,
                ),
            ));
        }
    }
    live.get(recorded.len()).map(|extra| {
        (
            turn_length,
            Divergence::event(
                turn_length,
                &extra.message,
                "(not sent)".into(),
                "(the message)".into(),
                "",
            ),
        )
    })
}

//! A recorded session as `replay` reads it: each connection's transcript files, the model's
//! answers beside the captured requests, and the replay's own manifest when a bundle has one.
//!
//! Read as every reader of a transcript folder reads (`traffic::trace::offline`): regular files
//! only, never through a link, each capped, at most so many; a line that is not JSON is passed
//! over and counted, and a folder with nothing to replay is refused naming why.

use crate::codex::protocol::table::name as method;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::Error;
use crate::traffic::replay_book::RecordedAnswer;
use crate::traffic::trace::offline::{
    files_in, folders_in, json_lines, regular_file, sources, transcript_folder,
};

/// Thread files read at most over every connection.
const MAX_THREAD_FILES: usize = 10_000;
/// Messages read at most over the whole recording.
const MAX_MESSAGES: usize = 2_000_000;
/// Largest capture document read (a model request carries the thread's history).
const MAX_CAPTURE_BYTES: u64 = 64 * 1024 * 1024;
/// Turns and requests per turn read at most per thread.
const MAX_TURNS: usize = 10_000;
const MAX_REQUESTS_PER_TURN: usize = 1_000;
/// The manifest a bundle carries (and a user may write): the workspaces the session ran in.
pub const MANIFEST: &str = "replay.json";

/// Which way a transcript line went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Way {
    /// From the client to Codex.
    In,
    /// From Codex to the client.
    Out,
    /// What clawbridge sent Codex in place of the client's request (`--route spec`).
    Routed,
}

/// One message of a transcript file.
#[derive(Clone, Debug)]
pub struct Entry {
    pub way: Way,
    pub message: Value,
    /// The writer that recorded it (a transcript names one per process or connection; older
    /// ones name none).
    pub session: Option<String>,
}

/// One transcript file: `connection` or a thread's.
#[derive(Clone, Debug)]
pub struct RecordedFile {
    /// The thread id (the file's name), or `connection`.
    pub name: String,
    pub entries: Vec<Entry>,
}

/// One model request recorded, with the answer it got.
#[derive(Clone, Debug)]
pub struct RecordedCall {
    /// The capture document (`model-request[.N].json`).
    pub request: Value,
    pub answer: Option<Value>,
}

/// One connection of the recording (the stdio slot's folder, or an endpoint's `connection-N`).
#[derive(Clone, Debug)]
pub struct RecordedConnection {
    /// Its folder, relative to the recording (`.` for the folder itself).
    pub label: String,
    pub files: Vec<RecordedFile>,
}

/// A whole recording.
#[derive(Clone, Debug)]
pub struct Recording {
    pub connections: Vec<RecordedConnection>,
    /// Recorded thread -> turn (1-based) -> calls in order.
    pub calls: BTreeMap<String, BTreeMap<usize, Vec<RecordedCall>>>,
    /// Whether clawbridge routed the session (`--route spec`: `routed` entries).
    pub routed: bool,
    /// `replay.json`'s workspaces (recorded folder -> a folder inside the recording).
    pub workspaces: Vec<(String, PathBuf)>,
    /// What was passed over, by file: lines not JSON, links and odd files.
    pub skipped: Vec<String>,
}

impl Recording {
    /// Read `dir`; an error names what cannot be replayed.
    pub fn load(dir: &Path) -> Result<Self, Error> {
        transcript_folder(dir)?;
        let mut recording = Recording {
            connections: Vec::new(),
            calls: BTreeMap::new(),
            routed: false,
            workspaces: Vec::new(),
            skipped: Vec::new(),
        };
        let mut budget = MAX_MESSAGES;
        let mut files_left = MAX_THREAD_FILES;
        for source in sources(dir) {
            let label = source
                .strip_prefix(dir)
                .ok()
                .map(|relative| relative.display().to_string())
                .filter(|relative| !relative.is_empty())
                .unwrap_or_else(|| ".".to_string());
            let mut files = Vec::new();
            for path in jsonl_names(&source, &mut recording.skipped) {
                let Some(name) = path
                    .file_name()
                    .and_then(|name| name.to_str())
                    .and_then(|name| name.strip_suffix(".jsonl"))
                    .map(str::to_string)
                else {
                    continue;
                };
                if name != "connection"
                    && crate::traffic::record::RESERVED_NAMES.contains(&name.as_str())
                {
                    continue;
                }
                if files_left == 0 {
                    recording
                        .skipped
                        .push(format!("{}: past {MAX_THREAD_FILES} files", path.display()));
                    continue;
                }
                files_left -= 1;
                let entries = read_entries(&path, &mut budget, &mut recording)?;
                files.push(RecordedFile { name, entries });
            }
            // The connection's own messages first, then the threads in the order they opened.
            files.sort_by_key(|file| file.name != "connection");
            recording
                .connections
                .extend(Self::by_session(&label, files));
        }
        if recording.connections.is_empty() {
            return Err(crate::traffic::trace::offline::no_thread_files(dir));
        }
        for source in sources(dir) {
            read_calls(&source.join("model-requests"), &mut recording)?;
        }
        recording.workspaces = read_manifest(dir)?;
        Ok(recording)
    }

    /// A folder's files split by the session that wrote each line, in the order the sessions first
    /// wrote (`connection.jsonl` first): each is a connection of its own to replay. Lines without a
    /// session (an older transcript) stay together.
    fn by_session(label: &str, files: Vec<RecordedFile>) -> Vec<RecordedConnection> {
        let mut order: Vec<Option<String>> = Vec::new();
        for entry in files.iter().flat_map(|file| &file.entries) {
            if !order.contains(&entry.session) {
                order.push(entry.session.clone());
            }
        }
        let several = order.len() > 1;
        order
            .iter()
            .enumerate()
            .map(|(index, session)| RecordedConnection {
                label: if several && label == "." {
                    format!("session-{}", index + 1)
                } else if several {
                    format!("{label}/session-{}", index + 1)
                } else {
                    label.to_string()
                },
                files: files
                    .iter()
                    .map(|file| RecordedFile {
                        name: file.name.clone(),
                        entries: file
                            .entries
                            .iter()
                            .filter(|entry| entry.session == *session)
                            .cloned()
                            .collect(),
                    })
                    .filter(|file| !file.entries.is_empty())
                    .collect(),
            })
            .collect()
    }

    /// The recorded answers of a thread, as the replay book takes them.
    pub fn answers(&self, thread: &str) -> Vec<(usize, Vec<RecordedAnswer>)> {
        let deltas = self.deltas(thread);
        let ids = self.response_ids(thread);
        let mut ids = ids.into_iter();
        self.calls
            .get(thread)
            .into_iter()
            .flatten()
            .map(|(turn, calls)| {
                let answers = calls
                    .iter()
                    .map(|call| answer_of(call.answer.as_ref(), &deltas, ids.next().flatten()))
                    .collect();
                (*turn, answers)
            })
            .collect()
    }

    /// Every message of the recording, connection by connection.
    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.connections
            .iter()
            .flat_map(|connection| &connection.files)
            .flat_map(|file| &file.entries)
    }

    /// The folders the client named as a `cwd`, sorted.
    pub fn cwds(&self) -> Vec<String> {
        let cwds: std::collections::BTreeSet<String> = self
            .entries()
            .filter(|entry| entry.way == Way::In)
            .filter_map(|entry| entry.message["params"]["cwd"].as_str().map(str::to_string))
            .collect();
        cwds.into_iter().collect()
    }

    /// The folder of this machine that stands for the recorded `cwd`: the user's
    /// `--workspace RECORDED=DIR`, else the bundle's manifest.
    pub fn workspace_for(&self, cwd: &str, given: &[(String, PathBuf)]) -> Option<PathBuf> {
        let bare = |path: &str| path.trim_end_matches('/').to_string();
        given
            .iter()
            .chain(&self.workspaces)
            .find(|(recorded, _)| bare(recorded) == bare(cwd))
            .map(|(_, local)| local.clone())
    }

    /// A thread's file, by its recorded name.
    pub fn thread_file(&self, thread: &str) -> Option<&RecordedFile> {
        self.connections
            .iter()
            .flat_map(|connection| &connection.files)
            .find(|file| file.name == thread)
    }

    /// Each agent message's deltas in the thread, by item id (what the model streamed).
    fn deltas(&self, thread: &str) -> BTreeMap<String, Vec<String>> {
        let mut deltas: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for entry in self
            .thread_file(thread)
            .map(|file| &file.entries[..])
            .unwrap_or(&[])
        {
            let message = &entry.message;
            if entry.way == Way::Out && message["method"] == method::ITEM_AGENT_MESSAGE_DELTA {
                if let (Some(item), Some(delta)) = (
                    message["params"]["itemId"].as_str(),
                    message["params"]["delta"].as_str(),
                ) {
                    deltas
                        .entry(item.to_string())
                        .or_default()
                        .push(delta.to_string());
                }
            }
        }
        deltas
    }

    /// The response ids the client saw (`rawResponse/completed`), in order.
    fn response_ids(&self, thread: &str) -> Vec<Option<String>> {
        self.thread_file(thread)
            .map(|file| &file.entries[..])
            .unwrap_or(&[])
            .iter()
            .filter(|entry| {
                entry.way == Way::Out && entry.message["method"] == "rawResponse/completed"
            })
            .map(|entry| {
                entry.message["params"]["responseId"]
                    .as_str()
                    .map(str::to_string)
            })
            .collect()
    }
}

/// The answer the book streams for one recorded call.
fn answer_of(
    answer: Option<&Value>,
    deltas: &BTreeMap<String, Vec<String>>,
    response_id: Option<String>,
) -> RecordedAnswer {
    let Some(answer) = answer else {
        return RecordedAnswer {
            http_status: 200,
            status: "failed".into(),
            error: serde_json::json!({"code": "server_error", "message": "clawbridge replay: the recording kept no answer for this request"}),
            ..Default::default()
        };
    };
    let output = answer["output"].as_array().cloned().unwrap_or_default();
    let wanted: Vec<String> = output
        .iter()
        .filter_map(|item| item["id"].as_str().map(str::to_string))
        .collect();
    RecordedAnswer {
        response_id,
        http_status: answer["httpStatus"]
            .as_u64()
            .and_then(|code| u16::try_from(code).ok())
            .unwrap_or(200),
        status: answer["status"].as_str().unwrap_or("completed").to_string(),
        output,
        usage: answer["usage"].clone(),
        deltas: deltas
            .iter()
            .filter(|(item, _)| wanted.contains(item))
            .map(|(item, pieces)| (item.clone(), pieces.clone()))
            .collect(),
        error: answer["error"].clone(),
    }
}

/// The `*.jsonl` files directly in `dir` (regular files only: a link or a FIFO is named in
/// `skipped`).
fn jsonl_names(dir: &Path, skipped: &mut Vec<String>) -> Vec<PathBuf> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.extension().and_then(|ext| ext.to_str()) != Some("jsonl") {
            continue;
        }
        if regular_file(&path) {
            names.push(path);
        } else {
            skipped.push(format!(
                "{}: not a regular file (not followed)",
                path.display()
            ));
        }
    }
    names.sort();
    names
}

fn read_entries(
    path: &Path,
    budget: &mut usize,
    recording: &mut Recording,
) -> Result<Vec<Entry>, Error> {
    let mut lines = json_lines(path)?;
    let mut entries = Vec::new();
    for line in lines.by_ref() {
        let line = line?;
        let way = match line["direction"].as_str() {
            Some("in") => Way::In,
            Some("out") => Way::Out,
            Some("routed") => {
                recording.routed = true;
                Way::Routed
            }
            _ => continue,
        };
        if !line["message"].is_object() {
            continue;
        }
        if *budget == 0 {
            return Err(Error::InvalidArgument {
                flag: "DIR".into(),
                message: format!(
                    "{}: the recording holds more than {MAX_MESSAGES} messages",
                    path.display()
                ),
            });
        }
        *budget -= 1;
        entries.push(Entry {
            way,
            message: line["message"].clone(),
            session: line["session"].as_str().map(str::to_string),
        });
    }
    if lines.passed_over() > 0 {
        recording.skipped.push(format!(
            "{}: {} lines that are not JSON passed over",
            path.display(),
            lines.passed_over()
        ));
    }
    Ok(entries)
}

/// `model-requests/<thread>/turn-NN/model-request[.N].json` and their answers.
fn read_calls(root: &Path, recording: &mut Recording) -> Result<(), Error> {
    let is_dir = |path: &Path| std::fs::symlink_metadata(path).is_ok_and(|meta| meta.is_dir());
    if !is_dir(root) {
        return Ok(());
    }
    for thread in folders_in(root) {
        let Some(name) = thread
            .file_name()
            .and_then(|name| name.to_str())
            .map(str::to_string)
        else {
            continue;
        };
        for turn in folders_in(&thread).into_iter().take(MAX_TURNS) {
            let Some(number) = turn
                .file_name()
                .and_then(|name| name.to_str())
                .and_then(|name| name.strip_prefix("turn-"))
                .and_then(|number| number.parse::<usize>().ok())
            else {
                continue;
            };
            let mut calls = Vec::new();
            for index in 1..=MAX_REQUESTS_PER_TURN {
                let suffix = if index == 1 {
                    String::new()
                } else {
                    format!(".{index}")
                };
                let request = turn.join(format!("model-request{suffix}.json"));
                if !regular_file(&request) {
                    break;
                }
                let answer = turn.join(format!("model-response{suffix}.json"));
                calls.push(RecordedCall {
                    request: read_json(&request)?,
                    answer: regular_file(&answer)
                        .then(|| read_json(&answer))
                        .transpose()?,
                });
            }
            if !calls.is_empty() {
                recording
                    .calls
                    .entry(name.clone())
                    .or_default()
                    .insert(number, calls);
            }
        }
    }
    Ok(())
}

/// One JSON document, capped; an error names the file.
pub fn read_json(path: &Path) -> Result<Value, Error> {
    let bytes = crate::support::fs::read_file_capped(path, MAX_CAPTURE_BYTES)?;
    serde_json::from_slice(&bytes).map_err(|error| Error::InvalidDocument {
        path: path.to_path_buf(),
        message: error.to_string(),
    })
}

/// `replay.json`: `{"workspaces": {"/recorded/folder": "workspace"}}`, each folder inside the
/// recording (a manifest cannot name a folder of the replaying machine).
fn read_manifest(dir: &Path) -> Result<Vec<(String, PathBuf)>, Error> {
    let path = dir.join(MANIFEST);
    if std::fs::symlink_metadata(&path).is_err() {
        return Ok(Vec::new());
    }
    if !files_in(dir).contains(&path) {
        return Err(Error::InvalidDocument {
            path,
            message: "is not a regular file".into(),
        });
    }
    let manifest = read_json(&path)?;
    let mut workspaces = Vec::new();
    for (recorded, local) in manifest["workspaces"].as_object().into_iter().flatten() {
        let Some(local) = local.as_str() else {
            continue;
        };
        let inside = Path::new(local)
            .components()
            .all(|part| matches!(part, std::path::Component::Normal(_)));
        if !inside || local.is_empty() {
            return Err(Error::InvalidDocument {
                path,
                message: format!(
                    "workspaces.{recorded}: `{local}` is not a folder inside the recording"
                ),
            });
        }
        workspaces.push((recorded.clone(), dir.join(local)));
    }
    Ok(workspaces)
}

/// The messages of a transcript file the replay wrote (its own, trusted as any transcript is
/// read: capped, regular files only).
pub fn read_live(path: &Path, skipped: &mut Vec<String>) -> Result<Vec<Entry>, Error> {
    let mut scratch = Recording {
        connections: Vec::new(),
        calls: BTreeMap::new(),
        routed: false,
        workspaces: Vec::new(),
        skipped: Vec::new(),
    };
    let mut budget = MAX_MESSAGES;
    let entries = read_entries(path, &mut budget, &mut scratch)?;
    skipped.extend(scratch.skipped);
    Ok(entries)
}

/// A workspace's regular files, each as (its path relative to the folder, its path), and what it
/// holds that is neither a regular file nor a folder (never followed or opened), relative.
pub type WorkspaceFiles = (Vec<(PathBuf, PathBuf)>, Vec<PathBuf>);

/// A workspace folder's [`WorkspaceFiles`], at most `max` files (an error past it).
pub fn workspace_files(source: &Path, max: usize) -> Result<WorkspaceFiles, Error> {
    let meta = std::fs::symlink_metadata(source).map_err(|error| Error::Read {
        path: source.to_path_buf(),
        source: error,
    })?;
    if !meta.is_dir() {
        return Err(Error::InvalidArgument {
            flag: "--workspace".into(),
            message: format!("{} is not a folder", source.display()),
        });
    }
    let (mut files, mut others) = (Vec::new(), Vec::new());
    let mut stack = vec![source.to_path_buf()];
    while let Some(folder) = stack.pop() {
        for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            let relative = path.strip_prefix(source).unwrap_or(&path).to_path_buf();
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() {
                if files.len() >= max {
                    return Err(Error::InvalidArgument {
                        flag: "--workspace".into(),
                        message: format!("{}: more than {max} files", source.display()),
                    });
                }
                files.push((relative, path));
            } else {
                others.push(relative);
            }
        }
    }
    files.sort();
    others.sort();
    Ok((files, others))
}

//! `clawbridge cache-report`: where a thread's prompt cache breaks.
//!
//! The model's prompt cache serves the longest prefix a request shares with an earlier one of
//! the same cache key. Codex's requests are a sequence of elements in a fixed order: the
//! `instructions`, then each tool's schema, then the input items (developer and user messages,
//! the history). A thread's next request keeps the cache warm only if it *appends* to the one
//! before; when an earlier element changes (a rewritten instruction, a reordered tool list, a
//! clock in the developer instructions), everything after it is paid again. This module reads
//! captured requests (`model-request[.N].json`, as `capture`, `--offline` and `--capture` write
//! them), splits each into those elements, compares each request with the one before it in its
//! thread, and names the first element that differs with its layer label.
//!
//! Captures are redacted (clocks, ids and paths become placeholders), which would hide exactly
//! the volatile values that break caches; so the capture writer also stores each element's
//! fingerprint, taken from the request as Codex sent it (`cacheElements`: SHA-256 and bytes),
//! and the comparison uses those when present. Tokens are counted here, when a report is made,
//! never on the capture path: with the `o200k_base` BPE (the GPT-4o/GPT-5 family's encoding) on
//! each element's text as the capture holds it; placeholders and the server's own chat
//! formatting move the count by a few tokens, so the figures are close, not exact.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{json, Value};

use clawbridge_support::error::{Error, Result};

/// Largest request file read (a thread with a long history stays far below it).
const MAX_REQUEST_FILE: u64 = 64 * 1024 * 1024;
/// Files a report reads at most, and folders it walks.
const MAX_FILES: usize = 10_000;
const MAX_FOLDERS: usize = 100_000;
/// Characters of context around a change, and of the change itself, shown for a break.
const CONTEXT_CHARS: usize = 60;
const MAX_CHANGED_CHARS: usize = 300;

/// The placeholders a capture puts for ids.
static ID_PLACEHOLDERS: std::sync::LazyLock<Option<regex::Regex>> =
    std::sync::LazyLock::new(|| regex::Regex::new("<(turn-id|thread-id|uuid)>").ok());

/// `text` with every id placeholder the same.
fn ids_alike(text: &str) -> std::borrow::Cow<'_, str> {
    match &*ID_PLACEHOLDERS {
        Some(pattern) => pattern.replace_all(text, "<id>"),
        None => std::borrow::Cow::Borrowed(text),
    }
}

/// The BPE every count uses (loaded once).
fn tokenizer() -> Option<&'static tiktoken_rs::CoreBPE> {
    static BPE: std::sync::LazyLock<Option<tiktoken_rs::CoreBPE>> =
        std::sync::LazyLock::new(|| tiktoken_rs::o200k_base().ok());
    BPE.as_ref()
}

/// Tokens of `text` in `o200k_base` (characters / 4 only if the tokenizer failed to load).
pub fn count_tokens(text: &str) -> usize {
    match tokenizer() {
        Some(bpe) => bpe.encode_ordinary(text).len(),
        None => text.len().div_ceil(4),
    }
}

/// One element of a request, in the order the cache sees them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Element {
    /// `instructions`, `tools[3]`, `input[5]`.
    pub position: String,
    /// `instructions`, `tool` or `input`.
    pub kind: String,
    /// The layer it is (`Codex base instructions`, `OpenClaw developer instructions`, `Tool
    /// message`, `User input`...).
    pub label: String,
    pub bytes: usize,
    pub tokens: usize,
    /// SHA-256 (16 hex digits) of the element as sent, when the capture recorded it; else of
    /// the redacted text.
    pub fingerprint: String,
    #[serde(skip)]
    pub text: String,
}

/// The cache-relevant elements of a request body: what is fingerprinted.
fn element_texts(body: &Value) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    if let Some(instructions) = body["instructions"].as_str() {
        out.push((
            "instructions".to_string(),
            "instructions".to_string(),
            instructions.to_string(),
        ));
    }
    for (index, tool) in body["tools"].as_array().into_iter().flatten().enumerate() {
        out.push((
            format!("tools[{index}]"),
            "tool".to_string(),
            tool.to_string(),
        ));
    }
    for (index, item) in body["input"].as_array().into_iter().flatten().enumerate() {
        let text = match item["content"].as_array() {
            Some(parts) if !parts.is_empty() => {
                let texts: Vec<&str> = parts
                    .iter()
                    .filter_map(|part| part["text"].as_str())
                    .collect();
                if texts.len() == parts.len() {
                    format!(
                        "{}\n{}",
                        item["role"].as_str().unwrap_or("?"),
                        texts.join("\n")
                    )
                } else {
                    item.to_string()
                }
            }
            _ => item.to_string(),
        };
        out.push((format!("input[{index}]"), "input".to_string(), text));
    }
    out
}

/// What the capture writer stores next to a request (`cacheElements`): each element's
/// fingerprint and size, from the body as Codex sent it (before redaction). Cheap: a hash per
/// element, no tokenizer on the capture path.
pub fn fingerprints(body: &Value) -> Value {
    Value::Array(
        element_texts(body)
            .into_iter()
            .map(|(position, _, text)| {
                json!({
                    "position": position,
                    "sha256": clawbridge_support::hex::sha256(text.as_bytes(), 8),
                    "bytes": text.len(),
                })
            })
            .collect(),
    )
}

/// The labels the capture writer gave each position (`layers[.N].md`'s table), which know more
/// than the body alone (which developer message is OpenClaw's, which text was injected).
pub fn written_labels(layers_md: &str) -> Vec<(String, String)> {
    layers_md
        .lines()
        .filter(|line| line.starts_with("| ") && line.contains(" | `"))
        .filter_map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
            let position = cells.get(2)?.trim_matches('`').to_string();
            Some((position, cells.get(1)?.to_string()))
        })
        .collect()
}

/// The elements of a captured request document, labelled (with the writer's labels when its
/// `layers.md` is there).
/// Each position and every parent of it (`a.b.c`, `a.b`, `a`), mapped to the first label given
/// at or below it.
fn prefix_index<'a>(
    labels: impl Iterator<Item = (&'a str, &'a str)>,
) -> std::collections::HashMap<String, String> {
    let mut index = std::collections::HashMap::new();
    for (position, label) in labels {
        let mut at = position;
        loop {
            index
                .entry(at.to_string())
                .or_insert_with(|| label.to_string());
            match at.rfind('.') {
                Some(dot) => at = &at[..dot],
                None => break,
            }
        }
    }
    index
}

fn elements_labelled(document: &Value, written: &[(String, String)]) -> (Vec<Element>, bool) {
    let body = &document["body"];
    // The label of a position is the first one recorded at it or below it (`input[3]` takes
    // the label of `input[3].content[0]`): every recorded position is indexed under itself and
    // each of its parents once, so labelling is linear in the labels, not elements x labels.
    let written_index = prefix_index(
        written
            .iter()
            .map(|(at, label)| (at.as_str(), label.as_str())),
    );
    // The body's own labels, worked out only when the writer's do not name a position.
    let layers = std::cell::OnceCell::new();
    let label_of = |position: &str| -> Option<String> {
        written_index.get(position).cloned().or_else(|| {
            layers
                .get_or_init(|| {
                    let layers = super::label_layers(body, None);
                    prefix_index(
                        layers
                            .iter()
                            .map(|layer| (layer.position.as_str(), layer.label.as_str())),
                    )
                })
                .get(position)
                .cloned()
        })
    };
    let recorded: BTreeMap<String, (String, usize)> = document["cacheElements"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|entry| {
            Some((
                entry["position"].as_str()?.to_string(),
                (
                    entry["sha256"].as_str()?.to_string(),
                    entry["bytes"].as_u64()? as usize,
                ),
            ))
        })
        .collect();
    let texts = element_texts(body);
    let raw = !texts.is_empty()
        && texts
            .iter()
            .all(|(position, _, _)| recorded.contains_key(position));
    let elements = texts
        .into_iter()
        .map(|(position, kind, text)| {
            let label = match kind.as_str() {
                "instructions" => "Codex base instructions (instructions)".to_string(),
                "tool" => {
                    let index: usize = position
                        .trim_start_matches("tools[")
                        .trim_end_matches(']')
                        .parse()
                        .unwrap_or(0);
                    let tool = &body["tools"][index];
                    let name = tool["name"]
                        .as_str()
                        .or_else(|| tool["type"].as_str())
                        .unwrap_or("?");
                    format!("Tool `{name}` schema")
                }
                _ => label_of(&position).unwrap_or_else(|| "Input item".to_string()),
            };
            let tokens = count_tokens(&text);
            let (fingerprint, bytes) = match recorded.get(&position).filter(|_| raw) {
                Some((sha, bytes)) => (sha.clone(), *bytes),
                // Redacted text: the id placeholders depend on which turn wrote the file (this
                // turn's id is `<turn-id>`, an earlier turn's the same id is `<uuid>`), so they
                // are compared alike.
                None => (
                    clawbridge_support::hex::sha256(ids_alike(&text).as_bytes(), 8),
                    text.len(),
                ),
            };
            Element {
                position,
                kind,
                label,
                bytes,
                tokens,
                fingerprint,
                text,
            }
        })
        .collect();
    (elements, raw)
}

#[cfg(test)]
fn elements(document: &Value) -> (Vec<Element>, bool) {
    elements_labelled(document, &[])
}

/// How a request relates to the one before it in its thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Verdict {
    /// The thread's first request.
    First,
    /// Keeps every element of the previous request and adds after them: the cache holds.
    AppendOnly,
    /// The same elements (a retry).
    Identical,
    /// An element of the previous request changed or moved: the cache breaks there.
    Rewrite,
    /// Another model: no cache is shared.
    ModelChanged,
    /// Another `prompt_cache_key`: the request goes to another cache.
    CacheKeyChanged,
}

impl Verdict {
    pub fn is_break(self) -> bool {
        matches!(
            self,
            Verdict::Rewrite | Verdict::ModelChanged | Verdict::CacheKeyChanged
        )
    }
}

/// Where a rewrite starts.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CacheBreak {
    /// Index of the first element that differs.
    pub element: usize,
    pub position: String,
    pub label: String,
    /// What the previous request had there (`None`: nothing, the element was added before the
    /// end... never for a rewrite; or removed).
    pub previous_label: Option<String>,
    /// A short unified diff of the element (redacted texts), or why there is none.
    pub diff: String,
}

/// One request of a thread, compared with the one before it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestReport {
    pub file: String,
    pub model: Option<String>,
    pub verdict: Verdict,
    pub elements: Vec<Element>,
    pub total_bytes: usize,
    pub total_tokens: usize,
    /// The prefix shared with the previous request (what the cache can serve).
    pub shared_elements: usize,
    pub shared_bytes: usize,
    pub shared_tokens: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_break: Option<CacheBreak>,
    /// From the recorded response: what the model reported as served from its cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Fingerprints from the request as sent (`true`), or from the redacted text (a changing
    /// clock or id is then invisible).
    pub exact: bool,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadReport {
    pub thread: String,
    pub requests: Vec<RequestReport>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CacheReport {
    pub threads: Vec<ThreadReport>,
    /// Requests that break their thread's cache.
    pub breaks: usize,
    /// Request files that could not be read as captured requests, each with why; the rest of
    /// the folder is reported without them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<SkippedRequest>,
}

/// A request file the report left out.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SkippedRequest {
    pub file: String,
    pub reason: String,
}

/// A request file and what was recorded with it.
struct Loaded {
    file: String,
    document: Value,
    response: Option<Value>,
    labels: Vec<(String, String)>,
}

/// The requests of `paths`, grouped into threads: files given on their own form one thread in
/// the order given; a folder is walked, `<thread>/turn-NN/model-request[.N].json` grouped by
/// thread in turn and request order, any other folder holding requests is a thread of its own.
fn collect(paths: &[PathBuf]) -> Result<Vec<(String, Vec<PathBuf>)>> {
    let mut threads: Vec<(String, Vec<PathBuf>)> = Vec::new();
    let mut given = Vec::new();
    let mut read = 0usize;
    for path in paths {
        let meta = std::fs::symlink_metadata(path).map_err(|source| Error::Read {
            path: path.clone(),
            source,
        })?;
        if meta.is_file() {
            given.push(path.clone());
            continue;
        }
        if !meta.is_dir() {
            return Err(Error::InvalidArgument {
                flag: "PATH".into(),
                message: format!("{}: not a file or a folder", path.display()),
            });
        }
        let mut groups: BTreeMap<String, Vec<(String, usize, PathBuf)>> = BTreeMap::new();
        let mut folders = vec![path.clone()];
        let mut walked = 0usize;
        while let Some(folder) = folders.pop() {
            walked += 1;
            if walked > MAX_FOLDERS {
                break;
            }
            let Ok(entries) = std::fs::read_dir(&folder) else {
                continue;
            };
            for entry in entries.flatten() {
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                let entry_path = entry.path();
                if kind.is_dir() {
                    folders.push(entry_path);
                    continue;
                }
                let name = entry.file_name().to_string_lossy().into_owned();
                let Some(number) = request_number(&name) else {
                    continue;
                };
                if !kind.is_file() {
                    continue;
                }
                read += 1;
                if read > MAX_FILES {
                    return Err(Error::InvalidArgument {
                        flag: "PATH".into(),
                        message: format!("more than {MAX_FILES} requests under {}", path.display()),
                    });
                }
                let parent = entry_path.parent().unwrap_or(path).to_path_buf();
                let parent_name = parent
                    .file_name()
                    .map(|name| name.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let (thread_dir, turn) = match parent_name.strip_prefix("turn-") {
                    Some(_) => (parent.parent().unwrap_or(path).to_path_buf(), parent_name),
                    None => (parent.clone(), String::new()),
                };
                let thread = thread_dir
                    .strip_prefix(path)
                    .map(|relative| relative.display().to_string())
                    .unwrap_or_default();
                let thread = if thread.is_empty() {
                    path.display().to_string()
                } else {
                    thread
                };
                groups
                    .entry(thread)
                    .or_default()
                    .push((turn, number, entry_path));
            }
        }
        for (thread, mut files) in groups {
            files.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
            threads.push((thread, files.into_iter().map(|(_, _, path)| path).collect()));
        }
    }
    if !given.is_empty() {
        threads.insert(0, ("the files given, in order".to_string(), given));
    }
    Ok(threads)
}

/// `model-request.json` is 1, `model-request.N.json` is N.
fn request_number(name: &str) -> Option<usize> {
    let rest = name.strip_prefix("model-request")?.strip_suffix(".json")?;
    if rest.is_empty() {
        return Some(1);
    }
    rest.strip_prefix('.')?.parse().ok()
}

fn load(path: &Path) -> Result<Loaded> {
    let bytes = clawbridge_support::fs::read_file_capped(path, MAX_REQUEST_FILE)?;
    let document: Value =
        serde_json::from_slice(&bytes).map_err(|error| Error::InvalidDocument {
            path: path.to_path_buf(),
            message: format!("not a captured request: {error}"),
        })?;
    if !document["body"].is_object() {
        return Err(Error::InvalidDocument {
            path: path.to_path_buf(),
            message: "not a captured request (no `body` object)".into(),
        });
    }
    let name = path
        .file_name()
        .map(|name| {
            name.to_string_lossy()
                .replace("model-request", "model-response")
        })
        .unwrap_or_default();
    let sibling = |name: String| {
        path.parent()
            .map(|parent| parent.join(name))
            .filter(|file| file.is_file())
            .and_then(|file| clawbridge_support::fs::read_file_capped(&file, MAX_REQUEST_FILE).ok())
    };
    let response = sibling(name).and_then(|bytes| serde_json::from_slice(&bytes).ok());
    let layers_name = path
        .file_name()
        .map(|name| {
            name.to_string_lossy()
                .replace("model-request", "layers")
                .replace(".json", ".md")
        })
        .unwrap_or_default();
    let labels = sibling(layers_name)
        .map(|bytes| written_labels(&String::from_utf8_lossy(&bytes)))
        .unwrap_or_default();
    Ok(Loaded {
        file: path.display().to_string(),
        document,
        response,
        labels,
    })
}

/// Where two element texts differ: the character where they part, and each side's changed
/// stretch with a little context (long elements are one line of JSON: a line diff would show
/// nothing useful).
fn short_diff(before: &str, after: &str) -> String {
    if before == after {
        return "the texts are the same once redacted: the change is in a value the capture masks (a clock, an id, a path)".to_string();
    }
    let before: Vec<char> = before.chars().collect();
    let after: Vec<char> = after.chars().collect();
    let prefix = before
        .iter()
        .zip(&after)
        .take_while(|(a, b)| a == b)
        .count();
    let room = before.len().min(after.len()) - prefix;
    let suffix = before
        .iter()
        .rev()
        .zip(after.iter().rev())
        .take(room)
        .take_while(|(a, b)| a == b)
        .count();
    let show = |chars: &[char]| -> String {
        chars
            .iter()
            .map(|c| match c {
                '\n' => "⏎".to_string(),
                '\t' => "⇥".to_string(),
                c => c.to_string(),
            })
            .collect()
    };
    let side = |text: &[char]| -> String {
        let start = prefix.saturating_sub(CONTEXT_CHARS);
        let changed_end = text.len() - suffix;
        let shown_end = (changed_end + CONTEXT_CHARS).min(text.len());
        let changed = &text[prefix..changed_end];
        let (changed, cut) = if changed.len() > MAX_CHANGED_CHARS {
            (
                &changed[..MAX_CHANGED_CHARS],
                format!("…({} more)", changed.len() - MAX_CHANGED_CHARS),
            )
        } else {
            (changed, String::new())
        };
        format!(
            "{}{}[{}{cut}]{}{}",
            if start > 0 { "…" } else { "" },
            show(&text[start..prefix]),
            show(changed),
            show(&text[changed_end..shown_end]),
            if shown_end < text.len() { "…" } else { "" }
        )
    };
    format!(
        "they part at character {prefix} (the changed stretch in brackets):\n- {}\n+ {}\n",
        side(&before),
        side(&after)
    )
}

/// Bytes (and their tokens) two texts share at their start.
fn common_prefix(before: &str, after: &str) -> (usize, usize) {
    let mut bytes = before
        .bytes()
        .zip(after.bytes())
        .take_while(|(a, b)| a == b)
        .count();
    while !after.is_char_boundary(bytes) {
        bytes -= 1;
    }
    (bytes, count_tokens(&after[..bytes]))
}

fn compare(
    previous: Option<&RequestReport>,
    current: &mut RequestReport,
    previous_key: Option<&str>,
    key: Option<&str>,
) {
    let Some(previous) = previous else {
        current.verdict = Verdict::First;
        return;
    };
    let shared = previous
        .elements
        .iter()
        .zip(&current.elements)
        .take_while(|(a, b)| a.fingerprint == b.fingerprint)
        .count();
    current.shared_elements = shared;
    current.shared_bytes = current.elements[..shared].iter().map(|e| e.bytes).sum();
    current.shared_tokens = current.elements[..shared].iter().map(|e| e.tokens).sum();
    if previous.model != current.model {
        current.verdict = Verdict::ModelChanged;
        current.shared_bytes = 0;
        current.shared_tokens = 0;
        current.shared_elements = 0;
        return;
    }
    if previous_key != key {
        current.verdict = Verdict::CacheKeyChanged;
        current.shared_bytes = 0;
        current.shared_tokens = 0;
        current.shared_elements = 0;
        return;
    }
    if shared == previous.elements.len() {
        current.verdict = if shared == current.elements.len() {
            Verdict::Identical
        } else {
            Verdict::AppendOnly
        };
        return;
    }
    current.verdict = Verdict::Rewrite;
    let before = &previous.elements[shared];
    let (diff, label, position) = match current.elements.get(shared) {
        Some(after) => {
            let (bytes, tokens) = common_prefix(&before.text, &after.text);
            // With exact fingerprints a same-looking text still differs (a masked value):
            // the redacted texts cannot place the change within the element.
            if before.text != after.text {
                current.shared_bytes += bytes;
                current.shared_tokens += tokens;
            }
            (
                short_diff(&before.text, &after.text),
                after.label.clone(),
                after.position.clone(),
            )
        }
        None => (
            "removed: this request ends before it".to_string(),
            before.label.clone(),
            before.position.clone(),
        ),
    };
    current.cache_break = Some(CacheBreak {
        element: shared,
        position,
        label,
        previous_label: Some(before.label.clone()),
        diff,
    });
}

/// Read and compare the requests under `paths`.
pub fn cache_report(paths: &[PathBuf]) -> Result<CacheReport> {
    let mut threads = Vec::new();
    let mut breaks = 0;
    let mut skipped = Vec::new();
    for (thread, files) in collect(paths)? {
        let mut requests: Vec<RequestReport> = Vec::new();
        let mut previous_key: Option<String> = None;
        for file in files {
            let loaded = match load(&file) {
                Ok(loaded) => loaded,
                // One malformed body (the forwarder files what Codex sent) does not hide the
                // rest of the folder: it is named and skipped.
                Err(error) => {
                    skipped.push(SkippedRequest {
                        file: file.display().to_string(),
                        reason: error.to_string(),
                    });
                    continue;
                }
            };
            let (elements, exact) = elements_labelled(&loaded.document, &loaded.labels);
            let usage = loaded.response.as_ref().map(|response| &response["usage"]);
            let mut report = RequestReport {
                file: loaded.file,
                model: loaded.document["body"]["model"]
                    .as_str()
                    .map(str::to_string),
                verdict: Verdict::First,
                total_bytes: elements.iter().map(|e| e.bytes).sum(),
                total_tokens: elements.iter().map(|e| e.tokens).sum(),
                elements,
                shared_elements: 0,
                shared_bytes: 0,
                shared_tokens: 0,
                cache_break: None,
                cached_tokens: usage
                    .and_then(|usage| usage["input_tokens_details"]["cached_tokens"].as_u64()),
                input_tokens: usage.and_then(|usage| usage["input_tokens"].as_u64()),
                exact,
            };
            let key = loaded.document["body"]["prompt_cache_key"]
                .as_str()
                .map(str::to_string);
            compare(
                requests.last(),
                &mut report,
                previous_key.as_deref(),
                key.as_deref(),
            );
            if report.verdict.is_break() {
                breaks += 1;
            }
            previous_key = key;
            requests.push(report);
        }
        threads.push(ThreadReport { thread, requests });
    }
    Ok(CacheReport {
        threads,
        breaks,
        skipped,
    })
}

impl CacheReport {
    /// The text report: per thread, a line per request, and for each break its layer and diff.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        for thread in &self.threads {
            out.push_str(&format!("thread {}\n", thread.thread));
            for (index, request) in thread.requests.iter().enumerate() {
                let verdict = match request.verdict {
                    Verdict::First => "first request".to_string(),
                    Verdict::AppendOnly => "append-only (the cache holds)".to_string(),
                    Verdict::Identical => "identical to the previous".to_string(),
                    Verdict::Rewrite => "REWRITE: the cache breaks".to_string(),
                    Verdict::ModelChanged => "MODEL CHANGED: no shared cache".to_string(),
                    Verdict::CacheKeyChanged => "CACHE KEY CHANGED: another cache".to_string(),
                };
                let percent = |part: usize, whole: usize| {
                    if whole == 0 {
                        0.0
                    } else {
                        part as f64 * 100.0 / whole as f64
                    }
                };
                out.push_str(&format!(
                    "  {}. {}  {} elements, {} tokens ({} bytes): {verdict}\n",
                    index + 1,
                    request.file,
                    request.elements.len(),
                    request.total_tokens,
                    request.total_bytes
                ));
                if request.verdict != Verdict::First {
                    out.push_str(&format!(
                        "     shared prefix: {} elements, {} tokens ({:.1} %), {} bytes\n",
                        request.shared_elements,
                        request.shared_tokens,
                        percent(request.shared_tokens, request.total_tokens),
                        request.shared_bytes
                    ));
                }
                if let Some(cached) = request.cached_tokens {
                    out.push_str(&format!(
                        "     the model reported {cached} cached of {} input tokens\n",
                        request
                            .input_tokens
                            .map_or("?".to_string(), |n| n.to_string())
                    ));
                }
                if let Some(found) = &request.cache_break {
                    out.push_str(&format!(
                        "     first difference: element {} `{}`: {}\n",
                        found.element + 1,
                        found.position,
                        found.label
                    ));
                    if found.previous_label.as_deref() != Some(found.label.as_str()) {
                        if let Some(previous) = &found.previous_label {
                            out.push_str(&format!(
                                "     (the previous request had there: {previous})\n"
                            ));
                        }
                    }
                    for line in found.diff.lines() {
                        out.push_str(&format!("       {line}\n"));
                    }
                }
                if !request.exact {
                    out.push_str(
                        "     (compared as redacted: a clock or id that changed is not seen)\n",
                    );
                }
            }
        }
        for skipped in &self.skipped {
            out.push_str(&format!("skipped {}: {}\n", skipped.file, skipped.reason));
        }
        out.push_str(&format!(
            "{} thread(s), {} request(s), {} cache break(s)\n",
            self.threads.len(),
            self.threads.iter().map(|t| t.requests.len()).sum::<usize>(),
            self.breaks
        ));
        // Captured text reaches the terminal: its control characters and bidirectional marks
        // are escaped.
        clawbridge_support::text::printable(&out).into_owned()
    }

    /// One self-contained HTML page: each thread's requests as bars of their layers (width by
    /// tokens), the shared prefix shaded, the first differing element outlined in red.
    pub fn render_html(&self) -> String {
        let escape = clawbridge_support::text::escape_html;
        let colour = |element: &Element| {
            let label = element.label.as_str();
            match element.kind.as_str() {
                "instructions" => "#5b6ee1",
                "tool" => "#8e7cc3",
                _ if label.starts_with("Codex base") => "#5b6ee1",
                _ if label.starts_with("Tools (") => "#8e7cc3",
                _ if label.starts_with("OpenClaw developer")
                    || label.starts_with("Developer instructions") =>
                {
                    "#e69138"
                }
                _ if label.starts_with("Tool call") || label.starts_with("Tool result") => {
                    "#a2c4c9"
                }
                _ if label.starts_with("Turn context") || label.starts_with("Collaboration") => {
                    "#f1c232"
                }
                _ if label.starts_with("Injected") || label.starts_with("Developer text added") => {
                    "#c27ba0"
                }
                _ if label.starts_with("Codex") || label.starts_with("AGENTS.md") => "#6aa84f",
                _ if label.starts_with("User input") => "#3d85c6",
                _ if label.starts_with("Assistant") => "#76a5af",
                _ => "#999999",
            }
        };
        let mut body = String::new();
        body.push_str(&format!(
            "<p class=\"summary\">{} thread(s), {} cache break(s). Each bar is one model request; each segment one element in the order the prompt cache reads them (width: tokens). Shaded: the prefix shared with the request before. Red outline: the first element that differs.</p>\n",
            self.threads.len(),
            self.breaks
        ));
        body.push_str("<div class=\"legend\">");
        for (name, swatch) in [
            ("Codex base instructions", "#5b6ee1"),
            ("tools", "#8e7cc3"),
            ("OpenClaw developer instructions", "#e69138"),
            ("turn context / collaboration mode", "#f1c232"),
            ("injected into the history", "#c27ba0"),
            (
                "Codex context (AGENTS.md, environment, permissions)",
                "#6aa84f",
            ),
            ("user input", "#3d85c6"),
            ("assistant", "#76a5af"),
            ("tool calls and results", "#a2c4c9"),
            ("history items", "#999999"),
        ] {
            body.push_str(&format!(
                "<span><i style=\"background:{swatch}\"></i>{}</span>",
                escape(name)
            ));
        }
        body.push_str("</div>\n");
        for thread in &self.threads {
            body.push_str(&format!("<h2>thread {}</h2>\n", escape(&thread.thread)));
            let widest = thread
                .requests
                .iter()
                .map(|request| request.total_tokens)
                .max()
                .unwrap_or(1)
                .max(1);
            for (index, request) in thread.requests.iter().enumerate() {
                let verdict = match request.verdict {
                    Verdict::First => "first",
                    Verdict::AppendOnly => "append-only",
                    Verdict::Identical => "identical",
                    Verdict::Rewrite => "rewrite: cache breaks",
                    Verdict::ModelChanged => "model changed",
                    Verdict::CacheKeyChanged => "cache key changed",
                };
                let class = if request.verdict.is_break() {
                    "verdict break"
                } else {
                    "verdict"
                };
                body.push_str(&format!(
                    "<div class=\"request\"><div class=\"head\">{}. <code>{}</code> <span class=\"{class}\">{verdict}</span> {} tokens, shared {} ({} elements){}</div>\n<div class=\"bar\">",
                    index + 1,
                    escape(&request.file),
                    request.total_tokens,
                    request.shared_tokens,
                    request.shared_elements,
                    request.cached_tokens.map_or(String::new(), |cached| format!(", model-reported cached {cached}"))
                ));
                for (position, element) in request.elements.iter().enumerate() {
                    let width = (element.tokens.max(1) as f64) * 100.0 / widest as f64;
                    let shared = position < request.shared_elements;
                    let broken = request
                        .cache_break
                        .as_ref()
                        .is_some_and(|found| found.element == position);
                    let mut classes = vec!["seg"];
                    if shared {
                        classes.push("shared");
                    }
                    if broken {
                        classes.push("broken");
                    }
                    body.push_str(&format!(
                        "<span class=\"{}\" style=\"width:{width:.3}%;background:{}\" title=\"{} ({}): {} tokens\"></span>",
                        classes.join(" "),
                        colour(element),
                        escape(&element.label),
                        escape(&element.position),
                        element.tokens
                    ));
                }
                body.push_str("</div>\n");
                if let Some(found) = &request.cache_break {
                    body.push_str(&format!(
                        "<div class=\"break\">first difference: element {} <code>{}</code>: {}<pre>{}</pre></div>\n",
                        found.element + 1,
                        escape(&found.position),
                        escape(&found.label),
                        escape(&found.diff)
                    ));
                }
                body.push_str("</div>\n");
            }
        }
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>clawbridge cache report</title>\n<style>\nbody{{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222}}\nh1{{font-size:20px}} h2{{font-size:16px;margin-top:28px}}\n.legend span{{margin-right:14px;white-space:nowrap}} .legend i{{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:-2px}}\n.request{{margin:10px 0 16px}} .head{{margin-bottom:4px}}\n.bar{{display:flex;height:26px;border:1px solid #ccc;background:#fafafa}}\n.seg{{display:block;height:100%;box-sizing:border-box;border-right:1px solid #fff;opacity:.45}}\n.seg.shared{{opacity:1}}\n.seg.broken{{outline:3px solid #d00;outline-offset:-3px;opacity:1}}\n.verdict{{padding:1px 6px;border-radius:3px;background:#d9ead3}} .verdict.break{{background:#f4cccc;color:#900;font-weight:600}}\n.break pre{{background:#f6f6f6;padding:8px;white-space:pre-wrap;word-break:break-all;font-size:12px}}\n</style></head><body>\n<h1>Prompt cache report</h1>\n{body}</body></html>\n"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_o200k_and_files_are_numbered() {
        // "hello world" is two tokens in o200k_base (not 11 / 4).
        assert_eq!(count_tokens("hello world"), 2);
        assert_eq!(request_number("model-request.json"), Some(1));
        assert_eq!(request_number("model-request.12.json"), Some(12));
        assert_eq!(request_number("model-response.json"), None);
        assert_eq!(ids_alike("a <turn-id> b <uuid>"), "a <id> b <id>");
    }

    #[test]
    fn a_removed_element_is_a_break_and_an_unchanged_retry_is_identical() {
        let body = |items: usize| json!({"model": "m", "input": (0..items).map(|i| json!({"role": "user", "content": [{"type": "input_text", "text": format!("m{i}")}]})).collect::<Vec<_>>()});
        let view = |items: usize| {
            let (elements, exact) = elements(
                &json!({"body": body(items), "cacheElements": fingerprints(&body(items))}),
            );
            assert!(exact);
            RequestReport {
                file: String::new(),
                model: Some("m".into()),
                verdict: Verdict::First,
                total_bytes: 0,
                total_tokens: 0,
                elements,
                shared_elements: 0,
                shared_bytes: 0,
                shared_tokens: 0,
                cache_break: None,
                cached_tokens: None,
                input_tokens: None,
                exact: true,
            }
        };
        let first = view(3);
        let mut shorter = view(2);
        compare(Some(&first), &mut shorter, None, None);
        assert_eq!(shorter.verdict, Verdict::Rewrite);
        assert_eq!(
            shorter.cache_break.as_ref().map(|found| found.element),
            Some(2)
        );
        let mut same = view(3);
        compare(Some(&first), &mut same, None, None);
        assert_eq!(same.verdict, Verdict::Identical);
        let mut other_key = view(4);
        compare(Some(&first), &mut other_key, Some("a"), Some("b"));
        assert_eq!(other_key.verdict, Verdict::CacheKeyChanged);
    }
}

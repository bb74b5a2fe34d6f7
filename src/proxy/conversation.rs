//! `clawbridge transcript show DIR`: an `app-server --transcript` folder read back as the
//! conversation it recorded. One "hello" through OpenClaw is hundreds of kilobytes of JSON lines
//! (deltas, raw response items, status changes, config reads); a person wants who said what,
//! which tools ran and how they ended, what failed, and when. Each thread file becomes a list of
//! [`Line`]s: the user's input, the agent's messages, commands, tool calls, approvals asked and
//! answered, warnings, errors and each turn's end (status, duration, tokens), timed by when
//! clawbridge forwarded the message (`atMs`, shown in UTC).
//!
//! Reading is bounded and confined as `export-otel`'s is (regular files only, each capped, at
//! most so many), and the page (`--html`) escapes everything it shows: a transcript holds what
//! chat users typed.

use std::collections::HashMap;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use crate::codex::protocol::table::name as method;
use crate::error::Error;
use crate::traffic::trace::offline::{files_in, json_lines, sources, transcript_folder};

/// Characters of one line's text shown in the terminal before it is cut (`--full` shows all).
pub const SHOWN_CHARS: usize = 600;
/// Thread files read at most.
pub const MAX_THREADS: usize = 10_000;
/// Bytes of one line's text kept (`--full` and `--json` included): a longer text is cut, saying
/// how much was left out (the transcript file has it whole). Each string read is already cut
/// there (`support::jsonl`); a line made of several (a command and its output) is cut again.
pub const KEPT_BYTES: usize = crate::support::jsonl::STRING_BYTES;
/// Requests remembered per file for their answers.
const MAX_REMEMBERED: usize = 4096;

/// A transcript folder as conversations, one per thread file, in the order they began.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Conversation {
    pub threads: Vec<ThreadView>,
}

/// One thread (or a connection's own messages) as lines.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadView {
    /// The thread id (the file's name), or `connection`.
    pub thread: String,
    /// The file, relative to the folder.
    pub file: String,
    /// The client that opened the connection (`name version`), when its `initialize` was kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    pub lines: Vec<Line>,
}

/// One thing that happened.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Line {
    /// When clawbridge forwarded it (ms since the epoch), if the transcript says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at_ms: Option<u64>,
    /// Who or what: thread, user, agent, reasoning, command, tool, files, approval, plan,
    /// warning, error, turn.
    pub who: &'static str,
    pub text: String,
}

/// Which threads to show.
#[derive(Debug, Clone, Default)]
pub struct ShowOptions {
    /// Only threads whose id starts with this.
    pub thread: Option<String>,
}

/// Read `dir` (an `app-server --transcript` folder, its `connection-N/` folders included).
pub fn read(dir: &Path, options: &ShowOptions) -> Result<Conversation, Error> {
    transcript_folder(dir)?;
    let mut threads = Vec::new();
    let mut budget = MAX_THREADS;
    for source in sources(dir) {
        let connection = source.join("connection.jsonl");
        let client = files_in(&source)
            .contains(&connection)
            .then(|| read_view(&connection))
            .transpose()?;
        let relative = |file: &Path| file.strip_prefix(dir).unwrap_or(file).display().to_string();
        let (client, connection_lines) = client.unwrap_or_default();
        if !connection_lines.is_empty() && options.thread.is_none() {
            threads.push(ThreadView {
                thread: "connection".to_string(),
                file: relative(&connection),
                client: client.clone(),
                lines: connection_lines,
            });
        }
        for file in files_in(&source) {
            let Some(name) = file
                .file_name()
                .and_then(|name| name.to_str())
                .and_then(|name| name.strip_suffix(".jsonl"))
            else {
                continue;
            };
            if crate::traffic::record::RESERVED_NAMES.contains(&name) {
                continue;
            }
            if options
                .thread
                .as_deref()
                .is_some_and(|wanted| !name.starts_with(wanted))
            {
                continue;
            }
            if budget == 0 {
                break;
            }
            budget -= 1;
            threads.push(ThreadView {
                thread: name.to_string(),
                file: relative(&file),
                client: client.clone(),
                lines: read_view(&file)?.1,
            });
        }
    }
    if threads.is_empty() {
        return Err(Error::InvalidArgument {
            flag: "DIR".to_string(),
            message: match &options.thread {
                Some(wanted) => format!("{}: no thread starts with `{wanted}`", dir.display()),
                None => format!(
                    "{}: no transcript files (give the --transcript folder of app-server)",
                    dir.display()
                ),
            },
        });
    }
    threads.sort_by_key(|view| view.lines.iter().find_map(|line| line.at_ms));
    Ok(Conversation { threads })
}

/// `clawbridge transcript show DIR`: [`read`], and the page written (private: it holds the
/// conversation) when `html` names a file.
pub fn show(dir: &Path, options: &ShowOptions, html: Option<&Path>) -> Result<Conversation, Error> {
    let conversation = read(dir, options)?;
    if let Some(file) = html {
        crate::support::fs::write_private(file, conversation.render_html().as_bytes())?;
    }
    Ok(conversation)
}

/// `name version` of the client's `initialize`.
/// The client an entry's `initialize` names (`name version`).
fn client_in(entry: &Value) -> Option<String> {
    let message = &entry["message"];
    (message["method"] == method::INITIALIZE).then(|| {
        let info = &message["params"]["clientInfo"];
        format!(
            "{} {}",
            info["name"].as_str().unwrap_or("?"),
            info["version"].as_str().unwrap_or("")
        )
        .trim()
        .to_string()
    })
}

/// One file read a line at a time (`support::jsonl`): the client its first `initialize` names,
/// and what its entries say, as lines (lines too dense to read are told as a warning).
fn read_view(path: &Path) -> Result<(Option<String>, Vec<Line>), Error> {
    let mut reader = Reader::default();
    let mut client = None;
    let mut lines = json_lines(path)?;
    for entry in lines.by_ref() {
        let entry = entry?;
        if client.is_none() {
            client = client_in(&entry);
        }
        reader.entry(&entry);
    }
    if lines.passed_over() > 0 {
        reader.say(
            None,
            "warning",
            format!(
                "{} line(s) of this file passed over: not JSON, or too dense to hold in memory",
                lines.passed_over()
            ),
        );
    }
    Ok((client, reader.lines))
}

/// What entries say, as lines (the tests' way in).
#[cfg(test)]
fn view_of(entries: &[Value]) -> Vec<Line> {
    let mut reader = Reader::default();
    entries.iter().for_each(|entry| reader.entry(entry));
    reader.lines
}

#[derive(Default)]
struct Reader {
    lines: Vec<Line>,
    /// Request id (JSON text) -> its method (and, for a tool call, the tool's name).
    asked: HashMap<String, (String, String)>,
    turn_started: Option<u64>,
    /// The running turn's id (from `turn/started`), and the tokens of its own model calls:
    /// (calls, input, cached input, output). What Codex tells again of a resumed thread, or of
    /// another turn, is not the turn's.
    turn: Option<String>,
    turn_usage: (u64, u64, u64, u64),
}

impl Reader {
    /// One transcript entry.
    fn entry(&mut self, entry: &Value) {
        let at_ms = entry["atMs"]
            .as_u64()
            .or_else(|| entry["message"]["emittedAtMs"].as_u64());
        match entry["direction"].as_str() {
            Some("in") => self.client_said(&entry["message"], at_ms),
            Some("out") => self.codex_said(&entry["message"], at_ms),
            _ => {}
        }
    }

    fn say(&mut self, at_ms: Option<u64>, who: &'static str, mut text: String) {
        if text.len() > KEPT_BYTES {
            let mut end = KEPT_BYTES;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            let left = text.len() - end;
            text.truncate(end);
            text.shrink_to_fit();
            text.push_str(&crate::support::jsonl::cut_note(left));
        }
        self.lines.push(Line { at_ms, who, text });
    }

    fn remember(&mut self, message: &Value, detail: String) {
        if let (Some(id), Some(name)) = (message.get("id"), message["method"].as_str()) {
            if self.asked.len() >= MAX_REMEMBERED {
                self.asked.clear();
            }
            self.asked
                .insert(id.to_string(), (name.to_string(), detail));
        }
    }

    fn answered(&mut self, message: &Value) -> Option<(String, String)> {
        message
            .get("id")
            .and_then(|id| self.asked.remove(&id.to_string()))
    }

    /// A message from the client (OpenClaw) to Codex: a request, or its answer to Codex's.
    fn client_said(&mut self, message: &Value, at_ms: Option<u64>) {
        let params = &message["params"];
        match message["method"].as_str() {
            Some(method::TURN_START) => {
                self.turn_started = at_ms;
                self.say(at_ms, "user", input_text(&params["input"]));
            }
            Some(method::TURN_STEER) => {
                self.say(
                    at_ms,
                    "user",
                    format!("(steering) {}", input_text(&params["input"])),
                );
            }
            Some(method::TURN_INTERRUPT) => {
                self.say(at_ms, "turn", "interrupt asked by the client".to_string())
            }
            Some(_) => self.remember(message, String::new()),
            None => {
                let Some((asked, detail)) = self.answered(message) else {
                    return;
                };
                if let Some(error) = message.get("error") {
                    self.say(
                        at_ms,
                        "error",
                        format!("the client failed {asked}{detail}: {}", error_text(error)),
                    );
                } else if is_approval(&asked) {
                    let decision = &message["result"]["decision"];
                    let decision = decision
                        .as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| compact(decision));
                    self.say(at_ms, "approval", format!("answered: {decision}"));
                }
            }
        }
    }

    /// A message from Codex to the client.
    fn codex_said(&mut self, message: &Value, at_ms: Option<u64>) {
        let params = &message["params"];
        let Some(name) = message["method"].as_str() else {
            // An answer to the client's request.
            let Some((asked, _)) = self.answered(message) else {
                return;
            };
            if let Some(error) = message.get("error") {
                self.say(at_ms, "error", format!("{asked}: {}", error_text(error)));
                return;
            }
            let result = &message["result"];
            let opened = match asked.as_str() {
                method::THREAD_START => "started",
                method::THREAD_RESUME => "resumed",
                method::THREAD_FORK => "forked",
                _ => return,
            };
            let mut text = format!("{opened}: {}", result["model"].as_str().unwrap_or("?"));
            if let Some(cwd) = result["cwd"].as_str() {
                text.push_str(&format!(" in {cwd}"));
            }
            self.say(at_ms, "thread", text);
            return;
        };
        match name {
            method::ITEM_COMPLETED => self.item(&params["item"], at_ms),
            method::TURN_STARTED => {
                self.turn = params["turn"]["id"].as_str().map(str::to_string);
                self.turn_usage = (0, 0, 0, 0);
            }
            method::THREAD_TOKEN_USAGE_UPDATED => {
                let of_turn =
                    self.turn.is_some() && params["turnId"].as_str() == self.turn.as_deref();
                if of_turn {
                    let last = &params["tokenUsage"]["last"];
                    let count = |key: &str| last[key].as_u64().unwrap_or(0);
                    let usage = &mut self.turn_usage;
                    usage.0 += 1;
                    usage.1 += count("inputTokens");
                    usage.2 += count("cachedInputTokens");
                    usage.3 += count("outputTokens");
                }
            }
            method::TURN_COMPLETED => self.turn_end(&params["turn"], at_ms),
            method::ERROR => {
                let retry = if params["willRetry"] == true {
                    " (Codex retries)"
                } else {
                    ""
                };
                self.say(
                    at_ms,
                    "error",
                    format!("{}{retry}", error_text(&params["error"])),
                );
            }
            method::WARNING => {
                self.say(at_ms, "warning", text_of(&params["message"]));
            }
            method::CONFIG_WARNING => {
                self.say(at_ms, "warning", text_of(&params["summary"]));
            }
            method::THREAD_COMPACTED => {
                self.say(at_ms, "thread", "context compacted".to_string());
            }
            method::ITEM_TOOL_CALL => {
                let tool = qualified(&params["namespace"], &params["tool"]);
                self.remember(message, format!(" ({tool})"));
            }
            asked if is_approval(asked) => {
                let what = params["command"]
                    .as_str()
                    .map(str::to_string)
                    .or_else(|| params["command"].as_array().map(|parts| join_words(parts)))
                    .or_else(|| params["reason"].as_str().map(str::to_string))
                    .unwrap_or_else(|| asked.to_string());
                self.remember(message, String::new());
                self.say(at_ms, "approval", format!("asks: {what}"));
            }
            method::ITEM_TOOL_REQUEST_USER_INPUT | method::MCP_SERVER_ELICITATION_REQUEST => {
                self.remember(message, String::new());
                self.say(at_ms, "approval", format!("asks the user ({name})"));
            }
            _ => {
                if message.get("id").is_some() {
                    self.remember(message, String::new());
                }
            }
        }
    }

    /// A finished item: what the agent said or did.
    fn item(&mut self, item: &Value, at_ms: Option<u64>) {
        let kind = item["type"].as_str().unwrap_or("?");
        match kind {
            // Shown from turn/start already.
            "userMessage" | "hookPrompt" | "functionCallOutput" => {}
            "agentMessage" => self.say(at_ms, "agent", text_of(&item["text"])),
            "plan" => self.say(at_ms, "plan", text_of(&item["text"])),
            "reasoning" => {
                let summary = item["summary"]
                    .as_array()
                    .map(|parts| {
                        parts
                            .iter()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join("\n")
                    })
                    .unwrap_or_default();
                if !summary.trim().is_empty() {
                    self.say(at_ms, "reasoning", summary);
                }
            }
            "commandExecution" => {
                let mut text = format!(
                    "{} -> {}{}",
                    text_of(&item["command"]),
                    match item["exitCode"].as_i64() {
                        Some(code) => format!("exit {code}"),
                        None => text_of(&item["status"]),
                    },
                    duration(&item["durationMs"])
                );
                let output = text_of(&item["aggregatedOutput"]);
                if !output.trim().is_empty() {
                    text.push('\n');
                    text.push_str(output.trim_end());
                }
                self.say(at_ms, "command", text);
            }
            "dynamicToolCall" => {
                let outcome = match item["success"].as_bool() {
                    Some(true) => "ok".to_string(),
                    Some(false) => "failed".to_string(),
                    None => text_of(&item["status"]),
                };
                let mut text = format!(
                    "{} {} -> {outcome}{}",
                    qualified(&item["namespace"], &item["tool"]),
                    compact(&item["arguments"]),
                    duration(&item["durationMs"])
                );
                let said = content_text(&item["contentItems"]);
                if !said.is_empty() {
                    text.push('\n');
                    text.push_str(&said);
                }
                self.say(at_ms, "tool", text);
            }
            "mcpToolCall" => {
                let mut text = format!(
                    "{}.{} {} -> {}{}",
                    text_of(&item["server"]),
                    text_of(&item["tool"]),
                    compact(&item["arguments"]),
                    text_of(&item["status"]),
                    duration(&item["durationMs"])
                );
                if !item["error"].is_null() {
                    text.push_str(&format!(": {}", error_text(&item["error"])));
                }
                self.say(at_ms, "tool", text);
            }
            "webSearch" => self.say(
                at_ms,
                "tool",
                format!("web search: {}", text_of(&item["query"])),
            ),
            "fileChange" => {
                let paths: Vec<String> = item["changes"]
                    .as_array()
                    .map(|changes| changes.iter().map(|c| text_of(&c["path"])).collect())
                    .unwrap_or_default();
                self.say(
                    at_ms,
                    "files",
                    format!("{}: {}", text_of(&item["status"]), paths.join(", ")),
                );
            }
            "contextCompaction" => self.say(at_ms, "thread", "context compacted".to_string()),
            other => self.say(at_ms, "tool", other.to_string()),
        }
    }

    /// `turn/completed`: how the turn ended, how long it took, its tokens, its error.
    fn turn_end(&mut self, turn: &Value, at_ms: Option<u64>) {
        let status = turn["status"].as_str().unwrap_or("ended");
        let took = turn["durationMs"].as_u64().or_else(|| {
            at_ms
                .zip(self.turn_started)
                .map(|(end, start)| end.saturating_sub(start))
        });
        let mut text = status.to_string();
        if let Some(ms) = took {
            text.push_str(&format!(" in {}", seconds(ms)));
        }
        let (calls, input, cached, output) = std::mem::take(&mut self.turn_usage);
        if calls > 0 {
            text.push_str(&format!(
                "; {calls} model call{}, tokens in {input} (cached {cached}), out {output}",
                if calls == 1 { "" } else { "s" }
            ));
        }
        self.turn = None;
        self.turn_started = None;
        self.say(at_ms, "turn", text);
        if !turn["error"].is_null() {
            self.say(at_ms, "error", error_text(&turn["error"]));
        }
    }
}

fn is_approval(name: &str) -> bool {
    matches!(
        name,
        method::ITEM_COMMAND_EXECUTION_REQUEST_APPROVAL
            | method::ITEM_FILE_CHANGE_REQUEST_APPROVAL
            | method::EXEC_COMMAND_APPROVAL
            | method::APPLY_PATCH_APPROVAL
    )
}

/// The text of a turn's input items (images named by where they are).
fn input_text(input: &Value) -> String {
    input
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|item| match item["type"].as_str() {
                    Some("text") => text_of(&item["text"]),
                    Some("image") => format!("[image {}]", text_of(&item["url"])),
                    Some("localImage") => format!("[image {}]", text_of(&item["path"])),
                    Some(other) => format!("[{other}]"),
                    None => compact(item),
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// Text content items joined (`inputText`/`text`), others named by type.
fn content_text(items: &Value) -> String {
    items
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|item| match item["text"].as_str() {
                    Some(text) => text.to_string(),
                    None => format!("[{}]", text_of(&item["type"])),
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

fn error_text(error: &Value) -> String {
    let message = error["message"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| compact(error));
    match error["code"].as_i64() {
        Some(code) => format!("{message} ({code})"),
        None => message,
    }
}

fn qualified(namespace: &Value, tool: &Value) -> String {
    match namespace.as_str() {
        Some(namespace) if !namespace.is_empty() => format!("{namespace}.{}", text_of(tool)),
        _ => text_of(tool),
    }
}

fn join_words(parts: &[Value]) -> String {
    parts.iter().map(text_of).collect::<Vec<_>>().join(" ")
}

/// A string as it is (read, it is at most `support::jsonl::STRING_BYTES` and a note);
/// anything else as compact JSON; null as nothing.
fn text_of(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn compact(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn duration(ms: &Value) -> String {
    ms.as_u64()
        .map(|ms| format!(", {}", seconds(ms)))
        .unwrap_or_default()
}

fn seconds(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

impl Conversation {
    /// The conversation for a terminal: a header per thread, then one row per line (UTC time,
    /// who, text; continuation lines indented; a long text cut at [`SHOWN_CHARS`] unless `full`),
    /// every control character but newline and tab escaped.
    pub fn render_text(&self, full: bool) -> String {
        let mut out = String::new();
        let indent = " ".repeat(2 + 12 + 2 + 9 + 1);
        for (at, view) in self.threads.iter().enumerate() {
            if at > 0 {
                out.push('\n');
            }
            out.push_str(&format!("{}  ({}", heading(view), view.file));
            if let Some(client) = &view.client {
                out.push_str(&format!(", client {client}"));
            }
            out.push_str(")\n");
            let mut day = String::new();
            for line in &view.lines {
                let time = match line.at_ms.map(crate::support::clock::utc) {
                    Some((date, time)) => {
                        if date != day {
                            out.push_str(&format!("  {date} (UTC)\n"));
                            day = date;
                        }
                        time
                    }
                    None => " ".repeat(12),
                };
                let text = if full {
                    line.text.clone()
                } else {
                    cut(&line.text)
                };
                let mut rows = text.lines();
                out.push_str(&format!(
                    "  {time}  {:<9} {}\n",
                    line.who,
                    rows.next().unwrap_or("")
                ));
                for row in rows {
                    if row.trim().is_empty() {
                        out.push('\n');
                    } else {
                        out.push_str(&format!("{indent}{row}\n"));
                    }
                }
            }
            if view.lines.is_empty() {
                out.push_str("  (nothing said)\n");
            }
        }
        // What a model, a command or a client said stays text in the reader's terminal: control
        // characters and direction overrides are shown as escapes, as the other reports do.
        crate::support::text::printable(&out).into_owned()
    }

    /// The same as one self-contained page (every text escaped, long texts whole).
    pub fn render_html(&self) -> String {
        let mut body = String::new();
        for view in &self.threads {
            body.push_str(&format!(
                "<h2>{}</h2><p class=\"file\">{}{}</p><table>",
                escape(&heading(view)),
                escape(&view.file),
                view.client
                    .as_ref()
                    .map(|client| format!(" &middot; client {}", escape(client)))
                    .unwrap_or_default()
            ));
            for line in &view.lines {
                let time = line
                    .at_ms
                    .map(|ms| {
                        let (date, time) = crate::support::clock::utc(ms);
                        format!("<span title=\"{date} UTC\">{time}</span>")
                    })
                    .unwrap_or_default();
                body.push_str(&format!(
                    "<tr class=\"{}\"><td class=\"t\">{time}</td><td class=\"w\">{}</td><td class=\"x\">{}</td></tr>",
                    line.who,
                    line.who,
                    escape(&line.text)
                ));
            }
            body.push_str("</table>");
        }
        format!(
            "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>clawbridge transcript</title><style>{STYLE}</style></head><body><h1>Transcript</h1><p class=\"file\">times in UTC (hover for the date)</p>{body}</body></html>\n"
        )
    }
}

const STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:2em;max-width:72em;color:#222}\
h2{font-size:1.05em;margin-top:2em}code{font-size:.95em}.file{color:#666;margin:.2em 0 .8em}\
table{border-collapse:collapse;width:100%}td{vertical-align:top;padding:.3em .6em;border-bottom:1px solid #eee}\
td.t{color:#777;white-space:nowrap;font-family:ui-monospace,monospace;font-size:.9em}\
td.w{font-weight:600;white-space:nowrap}td.x{white-space:pre-wrap;word-break:break-word}\
tr.user td.w{color:#1a5fb4}tr.agent td.w{color:#26a269}tr.error td{background:#fdecea}tr.error td.w{color:#c01c28}\
tr.warning td.w{color:#b5835a}tr.turn td{color:#555;font-style:italic}tr.command td.x,tr.tool td.x{font-family:ui-monospace,monospace;font-size:.9em}\
tr.approval td.w{color:#813d9c}";

/// `thread <id>`, or `connection` for a connection's own messages.
fn heading(view: &ThreadView) -> String {
    if view.thread == "connection" {
        "connection".to_string()
    } else {
        format!("thread {}", view.thread)
    }
}

/// A text cut at [`SHOWN_CHARS`], saying how much was left out.
fn cut(text: &str) -> String {
    let total = text.chars().count();
    if total <= SHOWN_CHARS {
        return text.to_string();
    }
    let kept: String = text.chars().take(SHOWN_CHARS).collect();
    format!(
        "{kept}... ({} more characters; --full shows all)",
        total - SHOWN_CHARS
    )
}

use crate::support::text::escape_html as escape;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(at: u64, direction: &str, message: Value) -> Value {
        json!({"atMs": at, "direction": direction, "message": message})
    }

    #[test]
    fn a_turn_reads_as_who_said_what() {
        let entries = vec![
            entry(
                1000,
                "in",
                json!({"id": 4, "method": "thread/start", "params": {}}),
            ),
            entry(
                1100,
                "out",
                json!({"id": 4, "result": {"model": "gpt-5.5", "cwd": "/w", "thread": {"id": "t"}}}),
            ),
            // What Codex tells again of the thread's earlier turn (as after a resume): not this
            // turn's.
            entry(
                1150,
                "out",
                json!({"method": "thread/tokenUsage/updated", "params": {"threadId": "t", "turnId": "earlier", "tokenUsage": {"last": {"inputTokens": 900, "cachedInputTokens": 0, "outputTokens": 90}}}}),
            ),
            entry(
                1200,
                "in",
                json!({"id": 5, "method": "turn/start", "params": {"threadId": "t", "input": [{"type": "text", "text": "hello"}]}}),
            ),
            entry(
                1250,
                "out",
                json!({"method": "turn/started", "params": {"threadId": "t", "turn": {"id": "u"}}}),
            ),
            entry(
                1300,
                "out",
                json!({"method": "item/agentMessage/delta", "params": {"delta": "Hi"}}),
            ),
            entry(
                1400,
                "out",
                json!({"id": 9, "method": "item/commandExecution/requestApproval", "params": {"threadId": "t", "command": "rm -rf x"}}),
            ),
            entry(
                1500,
                "in",
                json!({"id": 9, "result": {"decision": "decline"}}),
            ),
            entry(
                1600,
                "out",
                json!({"method": "item/completed", "params": {"item": {"type": "dynamicToolCall", "tool": "message", "namespace": null, "arguments": {"text": "hey"}, "success": true, "contentItems": [{"type": "inputText", "text": "sent"}], "durationMs": 12}}}),
            ),
            entry(
                1700,
                "out",
                json!({"method": "item/completed", "params": {"item": {"type": "agentMessage", "text": "Hi there"}}}),
            ),
            entry(
                1800,
                "out",
                json!({"method": "thread/tokenUsage/updated", "params": {"threadId": "t", "turnId": "u", "tokenUsage": {"last": {"inputTokens": 10, "cachedInputTokens": 4, "outputTokens": 5}}}}),
            ),
            entry(
                1900,
                "out",
                json!({"method": "error", "params": {"error": {"message": "upstream 500"}, "willRetry": true}}),
            ),
            entry(
                2000,
                "out",
                json!({"method": "turn/completed", "params": {"turn": {"status": "failed", "durationMs": 800, "error": {"message": "stream disconnected"}}}}),
            ),
            entry(
                2100,
                "in",
                json!({"id": 6, "method": "thread/resume", "params": {}}),
            ),
            entry(
                2200,
                "out",
                json!({"id": 6, "error": {"code": -32603, "message": "no such thread"}}),
            ),
        ];
        let lines: Vec<(String, &str, String)> = view_of(&entries)
            .into_iter()
            .map(|line| {
                (
                    crate::support::clock::utc(line.at_ms.expect("time")).1,
                    line.who,
                    line.text,
                )
            })
            .collect();
        let said: Vec<(&str, &str)> = lines
            .iter()
            .map(|(_, who, text)| (*who, text.as_str()))
            .collect();
        assert_eq!(
            said,
            vec![
                ("thread", "started: gpt-5.5 in /w"),
                ("user", "hello"),
                ("approval", "asks: rm -rf x"),
                ("approval", "answered: decline"),
                ("tool", "message {\"text\":\"hey\"} -> ok, 12 ms\nsent"),
                ("agent", "Hi there"),
                ("error", "upstream 500 (Codex retries)"),
                (
                    "turn",
                    "failed in 800 ms; 1 model call, tokens in 10 (cached 4), out 5"
                ),
                ("error", "stream disconnected"),
                ("error", "thread/resume: no such thread (-32603)"),
            ]
        );
        assert_eq!(lines[0].0, "00:00:01.100");
    }

    /// Protection: chat text is data on the page (escaped), and a long text is cut in the
    /// terminal, saying so.
    #[test]
    fn the_page_escapes_and_the_terminal_cuts() {
        let conversation = Conversation {
            threads: vec![ThreadView {
                thread: "t".into(),
                file: "t.jsonl".into(),
                client: Some("<openclaw>".into()),
                lines: vec![
                    Line {
                        at_ms: Some(0),
                        who: "user",
                        text: "<script>alert(1)</script>".into(),
                    },
                    Line {
                        at_ms: Some(1),
                        who: "agent",
                        text: "x".repeat(SHOWN_CHARS + 5),
                    },
                ],
            }],
        };
        let page = conversation.render_html();
        assert!(!page.contains("<script>alert"), "{page}");
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(page.contains("client &lt;openclaw&gt;"));
        let text = conversation.render_text(false);
        assert!(
            text.contains("... (5 more characters; --full shows all)"),
            "{text}"
        );
        assert!(
            text.contains("  1970-01-01 (UTC)\n  00:00:00.000  user      <script>"),
            "{text}"
        );
        assert!(!conversation.render_text(true).contains("more characters"));
    }
}

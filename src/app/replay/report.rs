//! What a replay found: a row per thread opening and turn, each `reused`, `exact`, `diverged`
//! or `live`, with the first divergence of each; as text, JSON and one HTML page.
//!
//! Every recorded or replayed text a report shows is redacted again (`support::redact`) and cut
//! short, and the page escapes all of it: a recording holds what chat users typed.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use crate::traffic::replay_book::Served;

/// A turn's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Verdict {
    /// No model request in it (a thread's opening, a turn that asked the model nothing): the
    /// recording's answers were reused and the client saw the same.
    Reused,
    /// The model was sent the same, and the client saw the same.
    Exact,
    /// Something differs: the first difference is shown.
    Diverged,
    /// Past a fork's turn: sent to the upstream, not compared.
    Live,
}

impl Verdict {
    fn word(self) -> &'static str {
        match self {
            Verdict::Reused => "reused",
            Verdict::Exact => "exact",
            Verdict::Diverged => "diverged",
            Verdict::Live => "live",
        }
    }
}

/// The first difference of a turn.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Divergence {
    /// `model request` or `client event`.
    pub kind: String,
    /// The request file (`turn-01/model-request.json`) or the message (`#12 turn/started`).
    pub at: String,
    /// The layer of the request that differs (the cache report's labels), when it is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layer: Option<String>,
    /// Where in the layer or the message (a JSON path).
    pub path: String,
    pub recorded: String,
    pub replayed: String,
}

impl Divergence {
    pub fn model(
        at: &str,
        layer: Option<&str>,
        path: &str,
        recorded: String,
        replayed: String,
    ) -> Self {
        Divergence {
            kind: "model request".into(),
            at: at.into(),
            layer: layer.map(str::to_string),
            path: path.into(),
            recorded: shown(&recorded),
            replayed: shown(&replayed),
        }
    }

    pub fn event(
        index: usize,
        message: &Value,
        recorded: String,
        replayed: String,
        path: &str,
    ) -> Self {
        let what = message["method"]
            .as_str()
            .map(str::to_string)
            .or_else(|| message.get("id").map(|id| format!("answer to {id}")))
            .unwrap_or_else(|| "message".into());
        Divergence {
            kind: "client event".into(),
            at: shown(&format!("#{} {what}", index + 1)),
            layer: None,
            path: if path.is_empty() {
                "(whole)".into()
            } else {
                path.into()
            },
            recorded: shown(&recorded),
            replayed: shown(&replayed),
        }
    }

    pub fn missing(what: &str, stalled: Option<&str>) -> Self {
        Divergence {
            kind: "client event".into(),
            at: "(thread)".into(),
            layer: None,
            path: "(whole)".into(),
            recorded: "(the thread)".into(),
            replayed: match stalled {
                Some(why) => format!("{what}: stopped {why}"),
                None => what.into(),
            },
        }
    }
}

/// Characters of a text a report shows.
const SHOWN: usize = 400;

/// A text as a report shows it: redacted, cut, on one line (a line break as `\n`, a tab as
/// `\t`) and printable (`support::text::printable`: every other control character and
/// bidirectional mark escaped; a recording's text must not drive the terminal it is printed on).
fn shown(text: &str) -> String {
    let redacted = crate::support::redact::redact_text(text);
    let mut cut: String = redacted.chars().take(SHOWN).collect();
    let more = cut.len() < redacted.len();
    cut = cut.replace('\n', "\\n").replace('\t', "\\t");
    let mut out = crate::support::text::printable(&cut).into_owned();
    if more {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_shown_text_is_one_line_without_control_characters_or_secrets() {
        let shown =
            super::shown("one\ntwo\t\u{1b}[31mred\u{7} sk-proj-abcdefghijklmnopqrstuvwxyz012345");
        assert_eq!(shown, "one\\ntwo\\t\\u{001b}[31mred\\u{0007} <redacted>");
        assert!(super::shown(&"x".repeat(1000)).ends_with('…'));
    }
}

/// One thread's opening (turn 0) or one of its turns.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnRow {
    /// The connection's folder in the recording (`.` for the stdio slot's).
    pub connection: String,
    /// The recorded thread (its file's name), or `connection`.
    pub thread: String,
    /// 0 for what comes before the first turn.
    pub turn: usize,
    pub verdict: Verdict,
    pub model_requests: usize,
    pub events: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first: Option<Divergence>,
}

impl TurnRow {
    pub fn new(connection: &str, thread: &str, turn: usize) -> Self {
        TurnRow {
            connection: connection.into(),
            thread: thread.into(),
            turn,
            verdict: Verdict::Exact,
            model_requests: 0,
            events: 0,
            first: None,
        }
    }

    pub fn diverge(&mut self, divergence: Divergence) {
        self.verdict = Verdict::Diverged;
        self.first.get_or_insert(divergence);
    }
}

/// Where the model requests were answered from.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServedCounts {
    pub recorded: usize,
    pub upstream: usize,
    pub missing: usize,
}

/// The whole replay.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplayReport {
    /// The recording, as given.
    pub recording: String,
    /// `as-sent` or `spec`: how the replay's slot routed (the recording's own route unless
    /// `--route` said otherwise).
    pub route: String,
    pub reused: usize,
    pub exact: usize,
    pub diverged: usize,
    pub live: usize,
    pub rows: Vec<TurnRow>,
    pub model_requests: ServedCounts,
    /// What the replay did not do as recorded, or passed over.
    pub notes: Vec<String>,
    /// Where the replay's own transcript and captures are (`--out`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub out: Option<String>,
}

impl ReplayReport {
    pub fn new(
        dir: &Path,
        routed: bool,
        rows: Vec<TurnRow>,
        served: &[Served],
        notes: Vec<String>,
        out: Option<PathBuf>,
    ) -> Self {
        let count = |verdict: Verdict| rows.iter().filter(|row| row.verdict == verdict).count();
        let mut counts = ServedCounts::default();
        for served in served {
            match served {
                Served::Recorded { .. } => counts.recorded += 1,
                Served::Upstream { .. } => counts.upstream += 1,
                Served::Missing { .. } => counts.missing += 1,
            }
        }
        ReplayReport {
            recording: dir.display().to_string(),
            route: if routed { "spec" } else { "as-sent" }.into(),
            reused: count(Verdict::Reused),
            exact: count(Verdict::Exact),
            diverged: count(Verdict::Diverged),
            live: count(Verdict::Live),
            model_requests: counts,
            notes: notes.iter().map(|note| shown(note)).collect(),
            out: out.map(|out| out.display().to_string()),
            rows,
        }
    }

    /// Whether any turn diverged.
    pub fn has_divergence(&self) -> bool {
        self.diverged > 0
    }

    pub fn render_text(&self) -> String {
        let mut out = format!(
            "replay of {} (route {}): {} reused, {} exact, {} diverged{}; model requests answered from the recording {}, upstream {}, without a recorded twin {}\n",
            self.recording,
            self.route,
            self.reused,
            self.exact,
            self.diverged,
            if self.live > 0 { format!(", {} live", self.live) } else { String::new() },
            self.model_requests.recorded,
            self.model_requests.upstream,
            self.model_requests.missing,
        );
        for row in &self.rows {
            let place = if row.connection == "." {
                String::new()
            } else {
                format!("{}/", row.connection)
            };
            let turn = if row.turn == 0 {
                "opening".to_string()
            } else {
                format!("turn {}", row.turn)
            };
            out.push_str(&format!(
                "  {place}{:<14} {turn:<9} {:<9} {} model request(s), {} message(s)\n",
                row.thread,
                row.verdict.word(),
                row.model_requests,
                row.events
            ));
            if let Some(first) = &row.first {
                out.push_str(&format!(
                    "      first: {} {}{} at {}\n        recorded: {}\n        replayed: {}\n",
                    first.kind,
                    first.at,
                    first
                        .layer
                        .as_ref()
                        .map(|layer| format!(" [{layer}]"))
                        .unwrap_or_default(),
                    first.path,
                    first.recorded,
                    first.replayed
                ));
            }
        }
        for note in &self.notes {
            out.push_str(&format!("note: {note}\n"));
        }
        if let Some(kept) = &self.out {
            out.push_str(&format!("the replay's transcript and captures: {kept}\n"));
        }
        out
    }

    /// One self-contained page (no script, every text escaped).
    pub fn render_html(&self) -> String {
        let escape = crate::support::text::escape_html;
        let mut body = format!(
            "<p class=\"summary\">{} (route {}): <b>{}</b> reused, <b>{}</b> exact, <b>{}</b> diverged{}. Model requests answered from the recording: {}, upstream: {}, without a recorded twin: {}.</p>\n<table>\n<tr><th>thread</th><th>turn</th><th>verdict</th><th>model requests</th><th>messages</th><th>first divergence</th></tr>\n",
            escape(&self.recording),
            escape(&self.route),
            self.reused,
            self.exact,
            self.diverged,
            if self.live > 0 { format!(", <b>{}</b> live", self.live) } else { String::new() },
            self.model_requests.recorded,
            self.model_requests.upstream,
            self.model_requests.missing,
        );
        for row in &self.rows {
            let first = row.first.as_ref().map_or_else(String::new, |first| {
                format!(
                    "{} <code>{}</code>{} at <code>{}</code><pre class=\"recorded\">{}</pre><pre class=\"replayed\">{}</pre>",
                    escape(&first.kind),
                    escape(&first.at),
                    first.layer.as_ref().map(|layer| format!(" [{}]", escape(layer))).unwrap_or_default(),
                    escape(&first.path),
                    escape(&first.recorded),
                    escape(&first.replayed),
                )
            });
            body.push_str(&format!(
                "<tr><td><code>{}{}</code></td><td>{}</td><td><span class=\"verdict {v}\">{v}</span></td><td>{}</td><td>{}</td><td>{first}</td></tr>\n",
                if row.connection == "." { String::new() } else { format!("{}/", escape(&row.connection)) },
                escape(&row.thread),
                if row.turn == 0 { "opening".to_string() } else { row.turn.to_string() },
                row.model_requests,
                row.events,
                v = row.verdict.word(),
            ));
        }
        body.push_str("</table>\n");
        if !self.notes.is_empty() {
            body.push_str("<h2>Notes</h2>\n<ul>\n");
            for note in &self.notes {
                body.push_str(&format!("<li>{}</li>\n", escape(note)));
            }
            body.push_str("</ul>\n");
        }
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>clawbridge replay</title>\n<style>\nbody{{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222}}\nh1{{font-size:20px}} h2{{font-size:16px;margin-top:28px}}\ntable{{border-collapse:collapse}} td,th{{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}}\n.verdict{{padding:1px 6px;border-radius:3px;background:#eee}} .verdict.exact{{background:#d9ead3}} .verdict.diverged{{background:#f4cccc;color:#900;font-weight:600}} .verdict.live{{background:#cfe2f3}}\npre{{margin:4px 0;padding:6px;white-space:pre-wrap;word-break:break-all;font-size:12px;max-width:70em}} pre.recorded{{background:#f6f6f6}} pre.replayed{{background:#fff2cc}}\n</style></head><body>\n<h1>Replay</h1>\n{body}</body></html>\n"
        )
    }
}

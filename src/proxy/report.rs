//! `clawbridge app-server report DIR`: the per-method conformance table of a transcript folder.
//!
//! The proxy appends one `method` line per (method, message family) to `DIR/conformance.jsonl`
//! when it ends ([`crate::observe`]); a folder reused by several runs holds several sets, which
//! are added up. The table is for people; `--json` gives the same rows for scripts. The exit code
//! says whether any checked message had problems (1) or none did (0), so CI can gate on it;
//! unknown methods are shown, not failed on (a newer client may use methods an older Codex lacks).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::codex::schema::conformance::Flow;
use crate::observe::Counts;

/// Largest `conformance.jsonl` read.
const MAX_LOG_BYTES: u64 = 256 * 1024 * 1024;

/// What a folder's conformance log adds up to.
#[derive(Debug, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Proxy runs that wrote a summary.
    pub runs: u64,
    pub codex_versions: Vec<String>,
    pub clients: Vec<String>,
    /// Copies the checker had no room for.
    pub skipped: u64,
    /// Requests clawbridge sent Codex routed by the spec (`--route spec`): the transcript holds
    /// each beside the client's.
    pub routed: u64,
    /// No run has ended yet (a running endpoint's or proxy's folder): the rows count what the
    /// log holds so far, the params checks and the messages with problems, not every message.
    pub partial: bool,
    pub rows: Vec<Row>,
}

#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    pub method: String,
    pub message: Flow,
    #[serde(flatten)]
    pub counts: Counts,
}

impl Report {
    /// Whether any message had problems.
    pub fn has_problems(&self) -> bool {
        self.rows.iter().any(|row| row.counts.problems > 0)
    }
}

/// Read `DIR/conformance.jsonl` (lines that are not summaries, or not JSON, are passed over).
pub fn read(dir: &Path) -> Result<Report, crate::error::Error> {
    let path = dir.join("conformance.jsonl");
    let bytes = crate::support::fs::read_file_capped(&path, MAX_LOG_BYTES)?;
    let mut report = Report::default();
    let mut rows: BTreeMap<(String, Flow), Counts> = BTreeMap::new();
    // What a run that has not ended has written: its params checks and its problem lines.
    let mut so_far: BTreeMap<(String, Flow), Counts> = BTreeMap::new();
    let note = |list: &mut Vec<String>, value: &Value| {
        if let Some(text) = value.as_str() {
            if !list.iter().any(|known| known == text) {
                list.push(text.to_string());
            }
        }
    };
    for line in bytes.split(|byte| *byte == b'\n') {
        let Ok(entry) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        match entry["kind"].as_str() {
            Some("summary") => {
                report.runs += 1;
                report.skipped += entry["skipped"].as_u64().unwrap_or(0);
                report.routed += entry["routed"].as_u64().unwrap_or(0);
                note(&mut report.codex_versions, &entry["codexVersion"]);
                note(&mut report.clients, &entry["client"]);
            }
            Some("method") => {
                let (Some(method), Ok(flow), Ok(counts)) = (
                    entry["method"].as_str(),
                    serde_json::from_value::<Flow>(entry["message"].clone()),
                    serde_json::from_value::<Counts>(entry.clone()),
                ) else {
                    continue;
                };
                rows.entry((method.to_string(), flow))
                    .or_default()
                    .add(&counts);
            }
            Some(kind @ ("check" | "problem")) => {
                let Some(method) = entry["method"].as_str() else {
                    continue;
                };
                let flow = match kind {
                    "check" => Flow::Request,
                    _ => match serde_json::from_value::<Flow>(entry["message"].clone()) {
                        Ok(flow) => flow,
                        Err(_) => continue,
                    },
                };
                let problems: Vec<crate::codex::schema::Problem> =
                    serde_json::from_value(entry["problems"].clone()).unwrap_or_default();
                let counts = so_far.entry((method.to_string(), flow)).or_default();
                counts.seen += 1;
                if problems.is_empty() {
                    counts.valid += 1;
                } else {
                    counts.problems += 1;
                    for problem in problems {
                        if counts.examples.len() < 3 {
                            counts.examples.push(problem);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    if report.runs == 0 && rows.is_empty() {
        if so_far.is_empty() {
            return Err(crate::error::Error::InvalidArgument {
                flag: "DIR".into(),
                message: format!(
                    "{}: nothing checked yet (no client has sent a thread or turn, and no message had a problem)",
                    path.display()
                ),
            });
        }
        report.partial = true;
        rows = so_far;
    }
    report.rows = rows
        .into_iter()
        .map(|((method, message), counts)| Row {
            method,
            message,
            counts,
        })
        .collect();
    Ok(report)
}

/// The table: a header line, then one row per method and family, problems' examples below.
/// The text table, safe for a terminal: what clients and Codex said of themselves is redacted
/// (a key in a `clientInfo.version` is not shown) and its control characters escaped.
pub fn render(report: &Report) -> String {
    let text = render_raw(report);
    crate::support::text::printable(&crate::support::redact::redact_text(&text)).into_owned()
}

fn render_raw(report: &Report) -> String {
    let mut out = String::new();
    let list = |items: &[String]| {
        if items.is_empty() {
            "?".to_string()
        } else {
            items.join(", ")
        }
    };
    if report.partial {
        out.push_str(
            "partial: no run has ended yet; the rows count the params checked and the messages \
             with problems so far (the full table is written when the run ends)\n",
        );
    }
    out.push_str(&format!(
        "Codex {} · client {} · {} run{}{}\n\n",
        list(&report.codex_versions),
        list(&report.clients),
        report.runs,
        if report.runs == 1 { "" } else { "s" },
        if report.skipped > 0 {
            format!(
                " · {} messages skipped (the checker was behind)",
                report.skipped
            )
        } else {
            String::new()
        }
    ));
    if report.routed > 0 {
        out.push_str(&format!(
            "{} request{} routed by the spec (--route spec; the transcript holds each beside the client's, `clawbridge audit` shows both)\n\n",
            report.routed,
            if report.routed == 1 { "" } else { "s" }
        ));
    }
    let width = report
        .rows
        .iter()
        .map(|row| row.method.chars().count())
        .chain(std::iter::once("method".len()))
        .max()
        .unwrap_or(6);
    out.push_str(&format!(
        "{:<width$}  {:<19}  {:>6}  {:>6}  {:>8}  {:>7}  {:>9}\n",
        "method", "message", "seen", "valid", "problems", "unknown", "unchecked"
    ));
    let mut totals = Counts::default();
    for row in &report.rows {
        let counts = &row.counts;
        totals.add(&Counts {
            examples: Vec::new(),
            ..counts.clone()
        });
        out.push_str(&format!(
            "{:<width$}  {:<19}  {:>6}  {:>6}  {:>8}  {:>7}  {:>9}\n",
            row.method,
            row.message.as_str(),
            counts.seen,
            counts.valid,
            counts.problems,
            counts.unknown,
            counts.unchecked
        ));
        for example in &counts.examples {
            out.push_str(&format!(
                "{:<width$}    {} {:?}: {}\n",
                "", example.field, example.kind, example.message
            ));
        }
    }
    out.push_str(&format!(
        "{:<width$}  {:<19}  {:>6}  {:>6}  {:>8}  {:>7}  {:>9}\n",
        "total", "", totals.seen, totals.valid, totals.problems, totals.unknown, totals.unchecked
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_add_up_and_problems_set_the_exit() {
        let dir = tempfile::tempdir().expect("dir");
        let run = r#"{"kind":"versions","client":"openclaw 2026.9.6","codexVersion":"0.169.0"}
{"kind":"summary","client":"openclaw 2026.9.6","codexVersion":"0.169.0","skipped":0}
{"kind":"method","method":"thread/start","message":"request","seen":1,"valid":1,"problems":0,"unknown":0,"unchecked":0}
{"kind":"method","method":"turn/started","message":"notification","seen":3,"valid":2,"problems":1,"unknown":0,"unchecked":0,"examples":[{"field":"/params/x","kind":"unknownKey","message":"Codex 0.169.0 has no such key"}]}
"#;
        std::fs::write(
            dir.path().join("conformance.jsonl"),
            format!("{run}{run}not json\n"),
        )
        .expect("write");
        let report = read(dir.path()).expect("report");
        assert_eq!(report.runs, 2);
        assert_eq!(report.rows.len(), 2);
        assert_eq!(report.rows[0].method, "thread/start");
        assert_eq!(report.rows[0].counts.seen, 2);
        assert_eq!(report.rows[1].counts.problems, 2);
        assert!(report.has_problems());
        let table = render(&report);
        assert!(
            table.starts_with("Codex 0.169.0 · client openclaw 2026.9.6 · 2 runs"),
            "{table}"
        );
        assert!(table.contains("/params/x"), "{table}");
        assert!(
            table
                .lines()
                .any(|line| line.starts_with("total") && line.contains(" 8 ")),
            "{table}"
        );
    }

    #[test]
    fn a_folder_without_a_summary_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(
            dir.path().join("conformance.jsonl"),
            "{\"kind\":\"versions\"}\n",
        )
        .expect("write");
        let error = read(dir.path()).expect_err("no summary");
        assert!(error.to_string().contains("conformance.jsonl"), "{error}");
        assert!(read(&dir.path().join("missing")).is_err());
    }
    #[test]
    fn routed_requests_are_added_up_and_told() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(
            dir.path().join("conformance.jsonl"),
            "{\"kind\":\"summary\",\"client\":\"openclaw 2026.9.6\",\"codexVersion\":\"0.169.0\",\"skipped\":0,\"routed\":2}\n{\"kind\":\"summary\",\"client\":\"openclaw 2026.9.6\",\"codexVersion\":\"0.169.0\",\"skipped\":0,\"routed\":1}\n",
        )
        .expect("log");
        let report = read(dir.path()).expect("report");
        assert_eq!(report.routed, 3);
        assert!(render(&report).contains("3 requests routed by the spec"));
        std::fs::write(
            dir.path().join("conformance.jsonl"),
            "{\"kind\":\"summary\",\"client\":\"c\",\"codexVersion\":\"0.169.0\",\"skipped\":0}\n",
        )
        .expect("log");
        let report = read(dir.path()).expect("report");
        assert_eq!(report.routed, 0);
        assert!(!render(&report).contains("routed"));
    }
}

//! OpenClaw's bootstrap budgets: per-file head/tail truncation and the total budget, and the
//! report of what was cut.

use serde::Serialize;

use super::BootstrapFile;
use crate::config::BootstrapLimits;
use crate::support::text::{head16, len16, tail16, trim_end_js};

const HEAD_RATIO: f64 = 0.75;
const TAIL_RATIO: f64 = 0.25;
const MIN_REMAINING_BUDGET: usize = 64;
const MIN_KEPT_FOR_FULL_MARKER: usize = 16;
const FIT_ITERATIONS: usize = 3;

/// A file as it will be pasted, after the budgets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FittedFile {
    pub name: String,
    pub path: String,
    /// The injected text (possibly truncated, or a missing marker).
    pub text: String,
    /// `len16(trim_end(content))`; 0 for missing files.
    pub raw_chars: usize,
    pub injected_chars: usize,
    pub truncated: bool,
    /// `per-file` and/or `total`, sorted.
    pub causes: Vec<&'static str>,
}

/// The marker for a missing (or unreadable) file.
pub fn missing_marker(path: &str) -> String {
    format!("[missing: {path}]")
}

fn full_marker(name: &str, head: usize, tail: usize, total: usize) -> String {
    format!("\n[truncated {name}: kept {head}+{tail} of {total} chars; read {name} for the full text]\n")
}

fn compact_marker(name: &str, head: usize, tail: usize, total: usize) -> String {
    format!("[truncated {name} {head}+{tail}/{total}]")
}

/// `clamp(text, budget)` of docs/routing.md §4.2.
pub fn clamp_to_budget(text: &str, budget: usize) -> String {
    if budget == 0 {
        return String::new();
    }
    if len16(text) <= budget {
        return text.to_string();
    }
    if budget <= 3 {
        return head16(text, budget).to_string();
    }
    format!("{}…", head16(text, budget - 1))
}

/// `fit_file` of docs/routing.md §4.2: trim the end, then keep head and tail around a marker.
/// Returns the text and whether it was truncated.
pub fn fit_file(content: &str, name: &str, max: usize) -> (String, bool) {
    let trimmed = trim_end_js(content);
    let total = len16(trimmed);
    if total <= max {
        return (trimmed.to_string(), false);
    }
    // Full marker iff `max - len(F(0,0)) - 2 >= 16`.
    let use_full = max >= len16(&full_marker(name, 0, 0, total)) + 2 + MIN_KEPT_FOR_FULL_MARKER;
    let marker = |head: usize, tail: usize| {
        if use_full {
            full_marker(name, head, tail, total)
        } else {
            compact_marker(name, head, tail, total)
        }
    };
    let separators = |head: usize, tail: usize, marker: &str| {
        if marker.contains('\n') {
            usize::from(head > 0) + usize::from(tail > 0)
        } else {
            0
        }
    };
    let (mut head, mut tail) = (0usize, 0usize);
    let mut current = marker(0, 0);
    for _ in 0..FIT_ITERATIONS {
        let budget = max.saturating_sub(len16(&current) + separators(head, tail, &current));
        let next_head = (budget as f64 * HEAD_RATIO).floor() as usize;
        let next_tail = (budget as f64 * TAIL_RATIO).floor() as usize;
        let next = marker(next_head, next_tail);
        let stable = next_head == head && next_tail == tail && len16(&next) == len16(&current);
        head = next_head;
        tail = next_tail;
        current = next;
        if stable {
            break;
        }
    }
    loop {
        let used = head + tail + len16(&current) + separators(head, tail, &current);
        if used <= max || (head == 0 && tail == 0) {
            break;
        }
        let overflow = used - max;
        if tail > 0 {
            tail = tail.saturating_sub(overflow);
        } else {
            head = head.saturating_sub(overflow);
        }
        current = marker(head, tail);
    }
    if head == 0 && tail == 0 && total > 0 {
        let single = marker(1, 0);
        if 1 + len16(&single) + separators(1, 0, &single) <= max {
            head = 1;
            current = single;
        }
    }
    let head_text = head16(trimmed, head);
    let tail_text = if tail > 0 { tail16(trimmed, tail) } else { "" };
    let parts: Vec<&str> = [head_text, current.as_str(), tail_text]
        .into_iter()
        .filter(|part| !part.is_empty())
        .collect();
    let joined = parts.join(if use_full { "\n" } else { "" });
    (head16(&joined, max).to_string(), true)
}

/// A file with content that the total budget left out whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DroppedFile {
    pub name: String,
    pub path: String,
    pub raw_chars: usize,
    pub causes: Vec<&'static str>,
}

/// What the budgets made of a file list: the pasted files and the ones left out whole.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BudgetOutcome {
    pub fitted: Vec<FittedFile>,
    pub dropped: Vec<DroppedFile>,
}

/// `fit_all` of docs/routing.md §4.2 over the files that will actually be pasted, in order
/// (files that are not [`super::FileContent::Present`] render the missing marker), also naming the
/// files with content that the total budget dropped whole: they are truncations too (injected 0
/// of N), reported and noticed like any other.
pub fn fit_with_budget(files: &[&BootstrapFile], limits: BootstrapLimits) -> BudgetOutcome {
    let mut remaining = limits.total_max_chars.max(1);
    let mut fitted = Vec::new();
    let mut stopped_at = files.len();
    for (index, file) in files.iter().enumerate() {
        if remaining == 0 {
            stopped_at = index;
            break;
        }
        let Some(content) = file.text() else {
            let text = clamp_to_budget(&missing_marker(&file.path), remaining);
            if text.is_empty() {
                stopped_at = index;
                break;
            }
            remaining -= len16(&text);
            fitted.push(FittedFile {
                name: file.name.clone(),
                path: file.path.clone(),
                injected_chars: len16(&text),
                text,
                raw_chars: 0,
                truncated: false,
                causes: Vec::new(),
            });
            continue;
        };
        if remaining < MIN_REMAINING_BUDGET {
            tracing::warn!(
                "remaining bootstrap budget {remaining} (<{MIN_REMAINING_BUDGET}), skipping further bootstrap files"
            );
            stopped_at = index;
            break;
        }
        let file_max = limits.max_chars.min(remaining).max(1);
        let (text, cut) = fit_file(content, &file.name, file_max);
        let out = clamp_to_budget(&text, remaining);
        if out.is_empty() {
            continue;
        }
        let raw_chars = len16(trim_end_js(content));
        let injected_chars = len16(&out);
        let truncated = cut || injected_chars < raw_chars;
        let mut causes = Vec::new();
        if truncated {
            if raw_chars > limits.max_chars {
                causes.push("per-file");
            }
            if remaining < limits.max_chars && raw_chars > remaining {
                causes.push("total");
            }
            tracing::info!(
                "bootstrap file {} is {raw_chars} chars (limit {file_max}); truncating",
                file.name
            );
        }
        remaining -= injected_chars;
        fitted.push(FittedFile {
            name: file.name.clone(),
            path: file.path.clone(),
            text: out,
            raw_chars,
            injected_chars,
            truncated,
            causes,
        });
    }
    let dropped = files[stopped_at..]
        .iter()
        .filter(|file| file.has_content())
        .map(|file| {
            let raw_chars = file.raw_chars();
            let mut causes = Vec::new();
            if raw_chars > limits.max_chars {
                causes.push("per-file");
            }
            causes.push("total");
            DroppedFile {
                name: file.name.clone(),
                path: file.path.clone(),
                raw_chars,
                causes,
            }
        })
        .collect();
    BudgetOutcome { fitted, dropped }
}

// ---------------------------------------------------------------------------------------------
// Truncation notice
// ---------------------------------------------------------------------------------------------

/// The truncation notice, clawbridge wording (docs/routing.md §4.4).
pub const TRUNCATION_NOTICE: &str = "Note: some workspace bootstrap files in this prompt were truncated to fit OpenClaw's context budget, so the injected copy is partial. When details seem to be missing, read the file directly from the workspace.";

/// Per-run truncation facts for diagnostics and the `once` ledger.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TruncationReport {
    pub bootstrap_max_chars: usize,
    pub bootstrap_total_max_chars: usize,
    pub files: Vec<TruncatedFile>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TruncatedFile {
    pub path: String,
    pub raw_chars: usize,
    pub injected_chars: usize,
    pub causes: Vec<&'static str>,
}

impl TruncationReport {
    pub fn new(limits: BootstrapLimits, fitted: &[FittedFile]) -> Self {
        Self::with_dropped(limits, fitted, &[])
    }

    /// The report over pasted files and those the total budget dropped whole (injected 0).
    pub fn with_dropped(
        limits: BootstrapLimits,
        fitted: &[FittedFile],
        dropped: &[DroppedFile],
    ) -> Self {
        let mut files: Vec<TruncatedFile> = fitted
            .iter()
            .filter(|file| file.truncated)
            .map(|file| TruncatedFile {
                path: file.path.clone(),
                raw_chars: file.raw_chars,
                injected_chars: file.injected_chars,
                causes: file.causes.clone(),
            })
            .chain(dropped.iter().map(|file| TruncatedFile {
                path: file.path.clone(),
                raw_chars: file.raw_chars,
                injected_chars: 0,
                causes: file.causes.clone(),
            }))
            .collect();
        files.sort_by(|a, b| a.path.cmp(&b.path));
        Self {
            bootstrap_max_chars: limits.max_chars,
            bootstrap_total_max_chars: limits.total_max_chars,
            files,
        }
    }

    pub fn any_truncated(&self) -> bool {
        !self.files.is_empty()
    }

    /// Canonical JSON signature (keys sorted by serde_json's map).
    pub fn signature(&self) -> String {
        serde_json::to_value(self)
            .map(|value| value.to_string())
            .unwrap_or_default()
    }

    /// Diagnostic lines `NAME: raw -> injected (~P% removed; causes)`, top 3 then `+K more`.
    pub fn diagnostic_lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .files
            .iter()
            .take(3)
            .map(|file| {
                let removed = 100.0
                    * (file.raw_chars - file.injected_chars.min(file.raw_chars)) as f64
                    / file.raw_chars.max(1) as f64;
                format!(
                    "{}: {} -> {} (~{removed:.0}% removed; {})",
                    file.path,
                    file.raw_chars,
                    file.injected_chars,
                    file.causes.join(", ")
                )
            })
            .collect();
        if self.files.len() > 3 {
            lines.push(format!("+{} more", self.files.len() - 3));
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TruncationWarningMode;

    #[test]
    fn the_notice_does_not_say_where_the_files_are() {
        // It stands above the files in the system prompt and after them on Codex surfaces.
        for word in ["above", "below"] {
            assert!(!TRUNCATION_NOTICE.contains(word), "{word}");
        }
    }
    use crate::workspace::FileContent;

    fn present(name: &str, content: &str) -> BootstrapFile {
        BootstrapFile {
            name: name.to_string(),
            path: format!("/ws/{name}"),
            content: FileContent::Present(content.to_string()),
        }
    }

    fn missing(name: &str) -> BootstrapFile {
        BootstrapFile {
            name: name.to_string(),
            path: format!("/ws/{name}"),
            content: FileContent::Missing,
        }
    }

    fn limits(max_chars: usize, total_max_chars: usize) -> BootstrapLimits {
        BootstrapLimits {
            max_chars,
            total_max_chars,
            warning: TruncationWarningMode::Always,
        }
    }

    #[test]
    fn t1_soul_over_the_cap() {
        let (out, cut) = fit_file(&"S".repeat(25_000), "SOUL.md", 20_000);
        assert!(cut);
        assert_eq!(len16(&out), 19_999);
        let marker =
            "[truncated SOUL.md: kept 14934+4978 of 25000 chars; read SOUL.md for the full text]";
        assert_eq!(
            out,
            format!(
                "{}\n\n{marker}\n\n{}",
                "S".repeat(14_934),
                "S".repeat(4_978)
            )
        );
        assert_eq!(len16(&full_marker("SOUL.md", 0, 0, 25_000)), 78);
    }

    #[test]
    fn t2_boundaries() {
        let (out, cut) = fit_file(&"x".repeat(20_001), "SOUL.md", 20_000);
        assert!(cut);
        assert_eq!(len16(&out), 19_999);
        assert!(out.contains("kept 14934+4978 of 20001"));
        let exact = format!("{}\n\n  \n", "x".repeat(20_000));
        assert_eq!(
            fit_file(&exact, "SOUL.md", 20_000),
            ("x".repeat(20_000), false)
        );
    }

    #[test]
    fn t3_small_caps() {
        let content = "y".repeat(1000);
        let cases: [(usize, &str); 8] = [
            (200, "{y86}\n\n[truncated MEMORY.md: kept 86+28 of 1000 chars; read MEMORY.md for the full text]\n\n{y28}"),
            (120, "{y27}\n\n[truncated MEMORY.md: kept 27+9 of 1000 chars; read MEMORY.md for the full text]\n\n{y9}"),
            (100, "{y12}\n\n[truncated MEMORY.md: kept 12+4 of 1000 chars; read MEMORY.md for the full text]\n\n{y4}"),
            (60, "{y21}[truncated MEMORY.md 21+7/1000]{y7}"),
            (30, "[truncated MEMORY.md 0+0/1000]"),
            (10, "[truncated"),
            (3, "[tr"),
            (1, "["),
        ];
        for (cap, expected) in cases {
            let mut expected = expected.to_string();
            for n in [86, 28, 27, 9, 12, 4, 21, 7] {
                expected = expected.replace(&format!("{{y{n}}}"), &"y".repeat(n));
            }
            let (out, cut) = fit_file(&content, "MEMORY.md", cap);
            assert!(cut, "cap {cap}");
            assert_eq!(out, expected, "cap {cap}");
            assert!(len16(&out) <= cap);
        }
        assert_eq!(len16(&fit_file(&content, "MEMORY.md", 200).0), 199);
        assert_eq!(len16(&fit_file(&content, "MEMORY.md", 60).0), 59);
    }

    #[test]
    fn t4_total_cap_truncates_the_last_file() {
        let files = [
            present("AGENTS.md", &"A".repeat(19_000)),
            present("SOUL.md", &"S".repeat(19_000)),
            present("IDENTITY.md", &"I".repeat(19_000)),
            present("MEMORY.md", &"M".repeat(19_000)),
        ];
        let refs: Vec<&BootstrapFile> = files.iter().collect();
        let fitted = fit_with_budget(&refs, limits(20_000, 60_000)).fitted;
        assert_eq!(fitted.len(), 4);
        assert!(fitted[..3]
            .iter()
            .all(|file| !file.truncated && file.injected_chars == 19_000));
        let memory = &fitted[3];
        assert_eq!(memory.injected_chars, 2_999);
        assert!(memory.text.starts_with(&format!(
            "{}\n\n[truncated MEMORY.md: kept 2183+727 of 19000",
            "M".repeat(2183)
        )));
        assert!(memory.text.ends_with(&format!("\n\n{}", "M".repeat(727))));
        assert_eq!(memory.causes, vec!["total"]);
    }

    #[test]
    fn t5_minimum_remaining_budget() {
        let files = [
            present("AGENTS.md", &"a".repeat(60)),
            missing("SOUL.md"),
            present("IDENTITY.md", &"i".repeat(50)),
        ];
        let refs: Vec<&BootstrapFile> = files.iter().collect();
        let fitted = fit_with_budget(&refs, limits(20_000, 100)).fitted;
        assert_eq!(fitted.len(), 2);
        assert_eq!(fitted[0].text, "a".repeat(60));
        assert_eq!(fitted[1].text, "[missing: /ws/SOUL.md]");
        assert_eq!(fitted[1].injected_chars, 22);
    }

    #[test]
    fn t6_missing_marker_is_clamped() {
        let files = [present("AGENTS.md", &"a".repeat(90)), missing("SOUL.md")];
        let refs: Vec<&BootstrapFile> = files.iter().collect();
        let fitted = fit_with_budget(&refs, limits(20_000, 100)).fitted;
        assert_eq!(fitted[1].text, "[missing:…");
        assert_eq!(len16(&fitted[1].text), 10);
    }

    #[test]
    fn t7_astral_characters_never_split() {
        let content = format!("a{}", "😀".repeat(15_000));
        let (out, cut) = fit_file(&content, "SOUL.md", 20_000);
        assert!(cut);
        assert!(out.contains("kept 14934+4978 of 30001"));
        let head = out.split("\n\n").next().unwrap_or_default();
        assert_eq!(len16(head), 14_933);
        assert_eq!(len16(&out), 19_998);
        // A &str cannot hold a lone surrogate; check the UTF-16 round trip too.
        let units: Vec<u16> = out.encode_utf16().collect();
        assert!(String::from_utf16(&units).is_ok());
    }

    #[test]
    fn t8_empty_whitespace_and_crlf() {
        let files = [
            present("AGENTS.md", ""),
            present("SOUL.md", "  \n\t\n"),
            present("IDENTITY.md", "Name: Claw\r\n\r\n"),
        ];
        let refs: Vec<&BootstrapFile> = files.iter().collect();
        let fitted = fit_with_budget(&refs, limits(20_000, 60_000)).fitted;
        assert_eq!(fitted.len(), 1);
        assert_eq!(fitted[0].path, "/ws/IDENTITY.md");
        assert_eq!(fitted[0].text, "Name: Claw");
    }

    #[test]
    fn t9_bom_kept_trailing_bom_removed() {
        let (out, cut) = fit_file("\u{FEFF}Be warm.\u{FEFF} \u{00A0}\n", "SOUL.md", 20_000);
        assert_eq!(out, "\u{FEFF}Be warm.");
        assert!(!cut);
    }

    #[test]
    fn tiny_total_budget_of_one() {
        let files = [present("SOUL.md", "hello")];
        let refs: Vec<&BootstrapFile> = files.iter().collect();
        // Below the 64-unit floor nothing but missing markers may start.
        assert!(fit_with_budget(&refs, limits(20_000, 1)).fitted.is_empty());
    }

    #[test]
    fn truncation_report_lines_and_signature() {
        let files = [present("SOUL.md", &"S".repeat(300))];
        let refs: Vec<&BootstrapFile> = files.iter().collect();
        let fitted = fit_with_budget(&refs, limits(200, 60_000)).fitted;
        let report = TruncationReport::new(limits(200, 60_000), &fitted);
        assert!(report.any_truncated());
        assert!(report.signature().contains("/ws/SOUL.md"));
        assert_eq!(
            report.diagnostic_lines(),
            vec!["/ws/SOUL.md: 300 -> 200 (~33% removed; per-file)"]
        );
    }
}

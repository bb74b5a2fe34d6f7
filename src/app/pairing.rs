//! The pairing commands: `run` (one turn through a real Codex, streamed) and `capture` (the same
//! turn offline, with what Codex sent the model written out, redacted and labelled).
//!
//! Layout: [`PairingSettings`] is what the flags say; [`prepare`] turns it into a translated run
//! and [`PairingOptions`]; [`run_turn`] streams [`RunEvent`]s (or human text through
//! [`human_text`]) and ends with a [`RunReport`]; [`capture`] writes `model-request*.json` and
//! `layers.md` and returns a [`CaptureReport`].

use crate::codex::protocol::inbound::NotificationKind;
use crate::codex::protocol::table::name as method;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::app::commands::{load_run_file, require_codex, translate_options};
use crate::app::drive::{run_pairing, PairingError, PairingOptions, PairingResult};
use crate::app::events::{PairingFacts, RunEvent};
use crate::codex::client::handler::DefaultHandler;
use crate::codex::client::process::find_codex_binary;
use crate::codex::client::session::{SessionError, TurnEvent, TurnLimits, TurnStatus};
use crate::codex::protocol::params::{CodexParams, ThreadParams};
use crate::config::Run;
use crate::error::Error;
use crate::traffic::capture::{label_layers, redacted_request, render_layers, Redactions};
use crate::traffic::stub::StubScript;
use crate::translate::translate;

/// The pairing flags of `run`, `capture` and `snapshots gen --raw`.
#[derive(Clone, Debug, Default)]
pub struct PairingSettings {
    pub codex_bin: Option<PathBuf>,
    pub codex_home: Option<PathBuf>,
    pub stub_script: Option<PathBuf>,
    pub tool_handler: Option<String>,
    pub approve: bool,
    pub limits: TurnLimits,
    pub state_dir: Option<PathBuf>,
    pub offline: bool,
    /// `--capture DIR` (with `--upstream`, `--upstream-ca`).
    pub live_capture: Option<crate::traffic::forward::LiveCaptureSettings>,
}

/// The validated inputs of one paired run.
pub fn prepare(
    run_path: &Path,
    settings: &PairingSettings,
) -> Result<(Run, CodexParams, PairingOptions), PairingError> {
    let run = load_run_file(run_path)?;
    require_codex(&run)?;
    if settings.stub_script.is_some() && !settings.offline {
        return Err(Error::InvalidArgument {
            flag: "--stub-script".to_string(),
            message: "needs --offline".to_string(),
        }
        .into());
    }
    let options = translate_options(settings.state_dir.as_deref(), None, None);
    let params = translate(&run, &options)?.codex_params(&run);
    let binary = find_codex_binary(
        settings.codex_bin.as_deref(),
        std::env::var_os("CODEX_BIN"),
        std::env::var_os("PATH"),
    )
    .map_err(SessionError::BinaryNotFound)?;
    tracing::info!("using {} (from {})", binary.path.display(), binary.via);
    let mut pairing = PairingOptions::new(binary.path);
    pairing.codex_home = settings.codex_home.clone();
    pairing.offline = settings.offline;
    if let Some(path) = &settings.stub_script {
        pairing.stub_script = StubScript::load(path)?;
    }
    pairing.handler = DefaultHandler {
        tool_command: settings.tool_handler.clone(),
        approve: settings.approve,
        tool_timeout: Some(settings.limits.idle),
    };
    pairing.limits = settings.limits;
    pairing.live_capture = settings.live_capture.clone();
    Ok((run, params, pairing))
}

/// How a `run` ended.
#[derive(Clone, Debug)]
pub struct RunReport {
    pub status: TurnStatus,
    pub thread_id: String,
    pub turn_id: String,
    pub error: Option<String>,
    pub agent_messages: Vec<String>,
    /// See [`crate::codex::client::turn::TurnOutcome::recovered`].
    pub recovered: Option<&'static str>,
    pub codex_version: Option<String>,
    pub model_requests: usize,
    pub offline: bool,
}

impl RunReport {
    /// The closing `turnEnd` event of `run --json`.
    pub fn turn_end(&self) -> RunEvent {
        RunEvent::TurnEnd {
            status: self.status,
            thread_id: Some(self.thread_id.clone()),
            turn_id: Some(self.turn_id.clone()),
            error: self.error.clone(),
            agent_messages: Some(self.agent_messages.clone()),
            recovered: self.recovered.map(str::to_string),
            may_have_run: None,
            pairing: Some(PairingFacts {
                codex_version: self.codex_version.clone(),
                model_requests: self.model_requests,
            }),
        }
    }

    /// The closing lines of the human transcript (stderr).
    pub fn render_text(&self) -> String {
        self.render_text_with("")
    }

    /// [`Self::render_text`] with `extra` (duration, tokens) after the thread and version.
    pub fn render_text_with(&self, extra: &str) -> String {
        let mut text = format!(
            "clawbridge: turn {} (thread {}, codex {}){extra}{}\n",
            self.status.as_str(),
            self.thread_id,
            self.codex_version.as_deref().unwrap_or("?"),
            self.error
                .as_deref()
                .map(|error| format!(": {error}"))
                .unwrap_or_default()
        );
        if self.offline {
            text.push_str(&format!(
                "clawbridge: the offline stub received {} model request(s); `clawbridge capture` writes them out\n",
                self.model_requests
            ));
        }
        text
    }
}

/// One turn through Codex; every event goes to `on_event` as it happens.
pub async fn run_turn(
    run_path: &Path,
    settings: &PairingSettings,
    on_event: &mut (dyn FnMut(TurnEvent<'_>) + Send),
) -> Result<RunReport, PairingError> {
    let (run, params, options) = prepare(run_path, settings)?;
    let result = run_pairing(&run, params, &options, on_event).await?;
    Ok(RunReport {
        status: result.outcome.status,
        thread_id: result.thread_id.clone(),
        turn_id: result.outcome.turn_id.clone(),
        error: result.outcome.error.clone(),
        agent_messages: result.outcome.agent_messages.clone(),
        recovered: result.outcome.recovered,
        codex_version: result.codex_version.clone(),
        model_requests: result.requests.len(),
        offline: settings.offline,
    })
}

/// The human transcript of a turn event: (stdout text, stderr text); either may be empty.
pub fn human_text(event: &TurnEvent<'_>) -> (String, String) {
    match event {
        TurnEvent::Notification {
            method: method::ITEM_AGENT_MESSAGE_DELTA,
            params,
            ..
        } => {
            /// The delta, borrowed from the notification's text.
            #[derive(serde::Deserialize, Default)]
            #[serde(default)]
            struct Delta<'a> {
                #[serde(borrow)]
                delta: Option<std::borrow::Cow<'a, str>>,
            }
            let shown: Delta<'_> = serde_json::from_str(params.get()).unwrap_or_default();
            (shown.delta.unwrap_or_default().into_owned(), String::new())
        }
        TurnEvent::Notification {
            kind: NotificationKind::AgentMessage { .. },
            ..
        } => ("\n".to_string(), String::new()),
        TurnEvent::Notification {
            kind: NotificationKind::Error { message },
            ..
        } => (
            String::new(),
            format!("[error] {}\n", message.as_deref().unwrap_or("?")),
        ),
        TurnEvent::ServerRequest { request } => (
            String::new(),
            format!(
                "[{}] {} {}\n",
                request.method,
                request.params["tool"].as_str().unwrap_or(""),
                request.params["arguments"]
            ),
        ),
        TurnEvent::Answered {
            answer: Err(error), ..
        } => (
            String::new(),
            format!("[answer] error: {}\n", error.message),
        ),
        _ => (String::new(), String::new()),
    }
}

/// The readable transcript of `clawbridge run` (without `--json`): agent text as it streams on
/// stdout; tool calls, their answers, approvals and errors on stderr; and a closing status line
/// with the duration and the token usage Codex reported.
#[derive(Debug)]
pub struct HumanTranscript {
    started: std::time::Instant,
    /// Codex's last `thread/tokenUsage/updated` total: (input, cached input, output).
    tokens: Option<(u64, u64, u64)>,
}

impl Default for HumanTranscript {
    fn default() -> Self {
        HumanTranscript {
            started: std::time::Instant::now(),
            tokens: None,
        }
    }
}

impl HumanTranscript {
    /// (stdout text, stderr text) of one event; either may be empty.
    pub fn event(&mut self, event: &TurnEvent<'_>) -> (String, String) {
        match event {
            TurnEvent::Notification {
                method: method::THREAD_TOKEN_USAGE_UPDATED,
                params,
                ..
            } => {
                let usage: Value = params.parse().unwrap_or_default();
                let total = &usage["tokenUsage"]["total"];
                let count = |key: &str| total[key].as_u64().unwrap_or(0);
                if total.is_object() {
                    self.tokens = Some((
                        count("inputTokens"),
                        count("cachedInputTokens"),
                        count("outputTokens"),
                    ));
                }
                (String::new(), String::new())
            }
            TurnEvent::Answered {
                answer: Ok(result), ..
            } => {
                let shown = match (result["decision"].as_str(), result["success"].as_bool()) {
                    (Some(decision), _) => format!("[approval] {decision}\n"),
                    (None, Some(success)) => {
                        let text: String = result["contentItems"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(|item| item["text"].as_str())
                            .collect::<Vec<_>>()
                            .join(" ");
                        format!(
                            "[tool result] {}{}\n",
                            if success { "" } else { "(failed) " },
                            one_line(&text, 200)
                        )
                    }
                    _ => format!("[answer] {}\n", one_line(&result.to_string(), 200)),
                };
                (String::new(), shown)
            }
            other => human_text(other),
        }
    }

    /// The closing status line.
    pub fn finish(&self, report: &RunReport) -> String {
        let seconds = self.started.elapsed().as_secs_f64();
        let tokens = match self.tokens {
            Some((input, cached, output)) => {
                format!(", tokens {input} in ({cached} cached) {output} out")
            }
            None => String::new(),
        };
        report.render_text_with(&format!(" in {seconds:.1} s{tokens}"))
    }
}

/// `text` on one line, at most `max` characters.
fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(max) {
        Some((at, _)) => format!("{}...", &flat[..at]),
        None => flat,
    }
}

/// What `capture` wrote.
#[derive(Clone, Debug)]
pub struct CaptureReport {
    pub out: PathBuf,
    pub written: Vec<String>,
    pub requests: usize,
    pub layers: Vec<crate::traffic::capture::Layer>,
}

impl CaptureReport {
    pub fn render_text(&self) -> String {
        let mut summary = format!(
            "Captured {} model request(s) into {}:\n",
            self.requests,
            self.out.display()
        );
        for name in &self.written {
            summary.push_str(&format!("- {name}\n"));
        }
        summary.push_str("Layers of the first request:\n");
        // Labels in a column as wide as the longest, within a 100-column terminal: a longer
        // label keeps its name and as many of its listed items as fit (`+N more`), never cut
        // mid-word (layers.md has them whole).
        let width = self
            .layers
            .iter()
            .map(|layer| layer.label.chars().count())
            .max()
            .unwrap_or(0)
            .min(LABEL_COLUMNS);
        for layer in &self.layers {
            summary.push_str(&format!(
                "  {:<width$} {:<22} {:>7} chars\n",
                fit_label(&layer.label, width),
                layer.position,
                layer.chars
            ));
        }
        summary
    }
}

/// The widest label column of `capture`'s table: with its margin, position and size columns,
/// a row fits 100 columns.
const LABEL_COLUMNS: usize = 100 - 2 - 1 - 22 - 1 - 7 - 6;

/// `label` within `width` characters: whole when it fits; a `Name (a, b, c)` label keeps its
/// name and the items that fit, then `+N more`; any other is cut at a word, with `...`.
fn fit_label(label: &str, width: usize) -> String {
    if label.chars().count() <= width {
        return label.to_string();
    }
    if let Some((name, list)) = label
        .strip_suffix(')')
        .and_then(|inner| inner.split_once(" ("))
    {
        let items: Vec<&str> = list.split(", ").collect();
        for kept in (0..items.len()).rev() {
            let more = items.len() - kept;
            let shown = if kept == 0 {
                format!("{name} ({more} items)")
            } else {
                format!("{name} ({}, +{more} more)", items[..kept].join(", "))
            };
            if shown.chars().count() <= width {
                return shown;
            }
        }
    }
    let mut cut = String::new();
    for word in label.split(' ') {
        if cut.chars().count() + word.chars().count() + 4 > width {
            break;
        }
        if !cut.is_empty() {
            cut.push(' ');
        }
        cut.push_str(word);
    }
    cut.push_str(" ...");
    cut
}

/// The redaction policy of a capture: machine paths and ids become placeholders.
fn capture_redactions(run: &Run, result: &PairingResult) -> Redactions {
    let mut redactions = Redactions::default();
    redactions.add_path(&run.workspace, "<workspace>");
    redactions.add_path(&run.cwd, "<cwd>");
    // Codex reports the git checkout around the workspace in its turn metadata.
    if let Some(git_root) = run.cwd.ancestors().find(|dir| dir.join(".git").exists()) {
        redactions.add_path(git_root, "<git-root>");
    }
    redactions.add_path(&result.codex_home, "<codex-home>");
    if let Some(home) = dirs::home_dir() {
        redactions.add_path(&home, "<home>");
    }
    redactions.add_path(&std::env::temp_dir(), "<tmp>");
    redactions.add(result.thread_id.clone(), "<thread-id>");
    redactions
}

/// Run the turn offline and write what Codex sent the model into `out`.
pub async fn capture(
    run_path: &Path,
    out: &Path,
    settings: &PairingSettings,
) -> Result<CaptureReport, PairingError> {
    let settings = PairingSettings {
        offline: true,
        ..settings.clone()
    };
    let (run, params, options) = prepare(run_path, &settings)?;
    let developer = match &params.thread {
        ThreadParams::ThreadStart(start) => start.developer_instructions.clone(),
        ThreadParams::ThreadResume(resume) => resume.developer_instructions.clone(),
    };
    let mut observer = |_: TurnEvent<'_>| {};
    let result = run_pairing(&run, params, &options, &mut observer).await?;
    if result.requests.is_empty() {
        return Err(PairingError::NoModelRequest {
            status: result.outcome.status.as_str(),
            error: result.outcome.error.clone().unwrap_or_default(),
        });
    }
    let redactions = capture_redactions(&run, &result);
    let mut written = Vec::new();
    for (index, request) in result.requests.iter().enumerate() {
        let name = if index == 0 {
            "model-request.json".to_string()
        } else {
            format!("model-request.{}.json", index + 1)
        };
        let document = redacted_request(request, &redactions);
        let text = format!("{}\n", crate::support::json::to_pretty(&document));
        crate::support::fs::write_atomic(&out.join(&name), text.as_bytes())?;
        written.push(name);
    }
    let first = redacted_request(&result.requests[0], &redactions);
    let sent_developer = redactions.redact(&Value::String(developer));
    let layers = label_layers(&first["body"], sent_developer.as_str());
    let title = format!(
        "Model-bound request layers: {} (Codex {})",
        run_path
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default(),
        result.codex_version.as_deref().unwrap_or("?")
    );
    crate::support::fs::write_atomic(
        &out.join("layers.md"),
        render_layers(&layers, &title).as_bytes(),
    )?;
    written.push("layers.md".to_string());
    Ok(CaptureReport {
        out: out.to_path_buf(),
        written,
        requests: result.requests.len(),
        layers,
    })
}

/// `snapshots gen --raw`: capture every happy-path scenario through a real Codex (offline).
/// `snapshots gen --raw`'s captures, one per scenario; `progress` is told (done, total,
/// scenario) before each.
pub async fn capture_scenarios(
    root: &Path,
    codex_bin: Option<PathBuf>,
    progress: &mut dyn FnMut(usize, usize, &str),
) -> Result<Vec<CaptureReport>, PairingError> {
    let settings = PairingSettings {
        codex_bin,
        ..PairingSettings::default()
    };
    let mut reports = Vec::new();
    let scenarios = crate::artifacts::snapshots::scenario_runs();
    let total = scenarios.len();
    for (done, (scenario, run)) in scenarios.into_iter().enumerate() {
        let out = root
            .join(crate::artifacts::snapshots::RAW_DIR)
            .join(scenario);
        progress(done + 1, total, scenario);
        reports.push(capture(&root.join(run), &out, &settings).await?);
    }
    Ok(reports)
}

/// How long the CLI lets a turn idle and run by default (one place for both flags).
pub const DEFAULT_IDLE_SECS: u64 = TurnLimits::DEFAULT_IDLE.as_secs();
/// See [`DEFAULT_IDLE_SECS`].
pub const DEFAULT_TURN_SECS: u64 = TurnLimits::DEFAULT_HARD.as_secs();

/// Turn limits from the two flags (at least one second each).
pub fn turn_limits(idle_secs: u64, turn_secs: u64) -> TurnLimits {
    TurnLimits {
        idle: Duration::from_secs(idle_secs.max(1)),
        hard: Duration::from_secs(turn_secs.max(1)),
        ..TurnLimits::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layer_table_fits_100_columns() {
        let tools = "Tools (exec, wait, exec_command, write_stdin, request_user_input, apply_patch, view_image, get_goal, create_goal, update_goal, message, agents_list, sessions_spawn, sessions_yield, tool_search, web_search)";
        let fitted = fit_label(tools, LABEL_COLUMNS);
        assert!(fitted.chars().count() <= LABEL_COLUMNS, "{fitted}");
        assert!(
            fitted.starts_with("Tools (exec, wait, ") && fitted.ends_with(" more)"),
            "{fitted}"
        );
        let more: usize = fitted
            .rsplit_once('+')
            .and_then(|(_, rest)| rest.split(' ').next())
            .and_then(|count| count.parse().ok())
            .expect("a count");
        let shown = fitted.matches(", ").count();
        assert_eq!(shown + more, 16, "{fitted}");
        assert_eq!(
            fit_label("Codex permissions", LABEL_COLUMNS),
            "Codex permissions"
        );
        let long = "word ".repeat(40);
        let cut = fit_label(long.trim(), 30);
        assert!(cut.chars().count() <= 30 && cut.ends_with(" ..."), "{cut}");
        let report = CaptureReport {
            out: PathBuf::from("/tmp/x"),
            written: vec![],
            requests: 1,
            layers: vec![crate::traffic::capture::Layer {
                label: tools.to_string(),
                position: "tools".to_string(),
                role: String::new(),
                chars: 25_679,
                text: String::new(),
            }],
        };
        let text = report.render_text();
        assert!(
            text.lines().all(|line| line.chars().count() <= 100),
            "{text}"
        );
    }
}

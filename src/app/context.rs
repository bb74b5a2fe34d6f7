//! The `/context list` view: what each bootstrap file, skill and tool costs and where it landed.

use serde::Serialize;

use crate::config::{Harness, Run};
use crate::routing::RoutedFile;
use crate::skills::CatalogFormat;
use crate::support::text::len16;
use crate::translate::params::tool_placement;
use crate::translate::Translation;
use crate::workspace::OmittedFile;

/// The whole report (also the `--json` shape).
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextReport {
    pub harness: Harness,
    pub bootstrap: Vec<RoutedFile>,
    pub filtered: Vec<OmittedFile>,
    pub bootstrap_max_chars: usize,
    pub bootstrap_total_max_chars: usize,
    pub truncation: Vec<String>,
    pub truncation_notice_shown: bool,
    pub skills: SkillsSummary,
    pub tools: ToolsSummary,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<ContextDetail>,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SkillsSummary {
    pub eligible: usize,
    pub included: usize,
    pub prompt_chars: usize,
    pub format: String,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolsSummary {
    pub count: usize,
    pub schema_chars: usize,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextDetail {
    pub skills: Vec<SkillDetail>,
    pub tools: Vec<ToolDetail>,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SkillDetail {
    pub name: String,
    pub file_chars: usize,
    pub eligible: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ToolDetail {
    pub name: String,
    pub schema_chars: usize,
    pub placement: &'static str,
}

fn format_label(format: CatalogFormat) -> String {
    match format {
        CatalogFormat::Full => "full".to_string(),
        CatalogFormat::Compact(Some(cap)) => format!("compact (descriptions capped at {cap})"),
        CatalogFormat::Compact(None) => "compact (no descriptions)".to_string(),
        CatalogFormat::Empty => "none".to_string(),
    }
}

/// Build the report for `run`.
pub fn context_report(run: &Run, translation: &Translation, detail: bool) -> ContextReport {
    let limits = run.config.bootstrap_limits(&run.agent_id);
    let tool_chars = |tool: &crate::config::ToolSpec| {
        len16(&serde_json::to_string(&tool.input_schema).unwrap_or_default())
            + len16(&tool.description)
    };
    let detail = detail.then(|| ContextDetail {
        skills: translation
            .skills
            .iter()
            .map(|skill| SkillDetail {
                name: skill.name.clone(),
                file_chars: skill.file_chars,
                eligible: true,
                reason: None,
            })
            .chain(
                translation
                    .ineligible_skills
                    .iter()
                    .map(|skill| SkillDetail {
                        name: skill.name.clone(),
                        file_chars: 0,
                        eligible: false,
                        reason: Some(skill.reason.clone()),
                    }),
            )
            .collect(),
        tools: run
            .tools
            .iter()
            .map(|tool| ToolDetail {
                name: tool.name.clone(),
                schema_chars: tool_chars(tool),
                placement: tool_placement(run, &tool.name).label(),
            })
            .collect(),
    });
    ContextReport {
        harness: run.harness,
        bootstrap: translation.routed.files.clone(),
        filtered: translation.loaded.omitted.clone(),
        bootstrap_max_chars: limits.max_chars,
        bootstrap_total_max_chars: limits.total_max_chars,
        truncation: translation.routed.report.diagnostic_lines(),
        truncation_notice_shown: translation.routed.show_truncation_notice,
        skills: SkillsSummary {
            eligible: translation.skills.len(),
            included: translation.skills_prompt.included,
            prompt_chars: len16(&translation.skills_prompt.text),
            format: format_label(translation.skills_prompt.format),
        },
        tools: ToolsSummary {
            count: run.tools.len(),
            schema_chars: run.tools.iter().map(tool_chars).sum(),
        },
        detail,
    }
}

impl ContextReport {
    /// The human view.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        out.push_str(&format!(
            "Bootstrap files (limits: {} per file, {} total)\n",
            self.bootstrap_max_chars, self.bootstrap_total_max_chars
        ));
        out.push_str(&format!(
            "  {:<13} {:>8} {:>9} {:<9} {}\n",
            "file", "raw", "injected", "truncated", "surface"
        ));
        for file in &self.bootstrap {
            let note = file
                .note
                .as_deref()
                .map(|note| format!(" ({note})"))
                .unwrap_or_default();
            out.push_str(&format!(
                "  {:<13} {:>8} {:>9} {:<9} {}{note}\n",
                file.name,
                file.raw_chars,
                file.injected_chars,
                if file.truncated { "yes" } else { "no" },
                file.surface.label()
            ));
        }
        for file in &self.filtered {
            out.push_str(&format!("  {:<13} filtered: {}\n", file.name, file.reason));
        }
        if !self.truncation.is_empty() {
            out.push_str(&format!(
                "Truncated ({}):\n",
                if self.truncation_notice_shown {
                    "notice shown"
                } else {
                    "notice not shown"
                }
            ));
            for line in &self.truncation {
                out.push_str(&format!("  {line}\n"));
            }
        }
        out.push_str(&format!(
            "Skills: {} eligible, {} in the prompt, {} chars, format {}\n",
            self.skills.eligible,
            self.skills.included,
            self.skills.prompt_chars,
            self.skills.format
        ));
        out.push_str(&format!(
            "Tools: {} tools, {} schema chars\n",
            self.tools.count, self.tools.schema_chars
        ));
        if let Some(detail) = &self.detail {
            out.push_str("Skill detail:\n");
            for skill in &detail.skills {
                match &skill.reason {
                    None => out.push_str(&format!(
                        "  {:<24} {:>7} chars\n",
                        skill.name, skill.file_chars
                    )),
                    Some(reason) => {
                        out.push_str(&format!("  {:<24} not eligible: {reason}\n", skill.name))
                    }
                }
            }
            out.push_str("Tool detail:\n");
            for tool in &detail.tools {
                out.push_str(&format!(
                    "  {:<24} {:>7} chars  {}\n",
                    tool.name, tool.schema_chars, tool.placement
                ));
            }
        }
        out
    }
}

//! The `<available_skills>` catalog: full and compact formats within the prompt budget.

use super::SkillEntry;
use crate::support::text::{
    collate, escape_xml, escaped_len16, head16, len16, trim_end_js, trim_js,
};

/// Description caps tried in the compact format.
const MIN_DESCRIPTION_CAP: usize = 4;
const MAX_DESCRIPTION_CAP: usize = 220;

/// Which prompt the catalog is phrased for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CatalogSurface {
    /// OpenClaw's system prompt: skills are read with the `read` tool.
    SystemPrompt,
    /// Codex collaboration instructions: Codex reads files with its own tools.
    Codex,
}

/// The rendered skills prompt and how it was fitted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkillsPrompt {
    /// Empty when no skill fits or none is eligible.
    pub text: String,
    pub included: usize,
    pub total: usize,
    pub format: CatalogFormat,
}

/// Which tier of the budget algorithm produced the catalog.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CatalogFormat {
    Full,
    /// Compact with descriptions capped at this many units (`None`: omitted).
    Compact(Option<usize>),
    Empty,
}

pub(super) fn instructions(surface: CatalogSurface, compact_without_descriptions: bool) -> String {
    let read = match surface {
        CatalogSurface::SystemPrompt => {
            "read its SKILL.md at the listed location with the `read` tool"
        }
        CatalogSurface::Codex => "read its SKILL.md at the listed location",
    };
    let matching = if compact_without_descriptions {
        "When a task matches a skill's name"
    } else {
        "When a task matches a skill's description"
    };
    format!(
        "The skills below carry task-specific instructions. {matching}, {read} and follow it.\n\
         If a skill's <version> differs from the one you saw on an earlier turn, read it again.\n\
         Resolve relative paths in a skill file against the folder that contains its SKILL.md."
    )
}

#[cfg(test)]
pub(super) fn cap_description(description: &str, cap: usize) -> String {
    let collapsed = collapse_whitespace(description);
    let (kept, ellipsis) = capped(&collapsed, cap);
    if ellipsis {
        format!("{kept}...")
    } else {
        kept.to_string()
    }
}

pub(super) fn collapse_whitespace(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in text.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    trim_js(&out).to_string()
}

/// The capped description as (kept text, whether `...` follows).
pub(super) fn capped(collapsed: &str, cap: usize) -> (&str, bool) {
    if len16(collapsed) <= cap {
        (collapsed, false)
    } else {
        (trim_end_js(head16(collapsed, cap.saturating_sub(3))), true)
    }
}

/// One skill with its escaped fields computed once, so the budget search can price a catalog
/// without rendering it.
pub(super) struct PreparedSkill<'a> {
    name: String,
    location: String,
    version: &'a str,
    description: String,
    collapsed: String,
    /// Everything but the description line, priced once.
    fixed_len: usize,
    description_len: usize,
    collapsed_len: usize,
    collapsed_escaped_len: usize,
}

impl<'a> PreparedSkill<'a> {
    pub(super) fn new(skill: &'a SkillEntry) -> Self {
        let name = escape_xml(&skill.name);
        let location = escape_xml(&skill.location);
        let description = escape_xml(&skill.description);
        let collapsed = collapse_whitespace(&skill.description);
        let fixed_len = "  <skill>".len()
            + 1
            + "    <name></name>".len()
            + len16(&name)
            + 1
            + "    <location></location>".len()
            + len16(&location)
            + 1
            + "    <version></version>".len()
            + len16(&skill.version)
            + 1
            + "  </skill>".len();
        Self {
            fixed_len,
            description_len: len16(&description),
            collapsed_len: len16(&collapsed),
            collapsed_escaped_len: escaped_len16(&collapsed),
            name,
            location,
            version: &skill.version,
            description,
            collapsed,
        }
    }
}

impl PreparedSkill<'_> {
    /// Escaped description for a format: `None` cap = full text, `Some(None)` = omitted.
    pub(super) fn description(&self, cap: Option<Option<usize>>) -> Option<String> {
        match cap {
            None => Some(self.description.clone()),
            Some(None) => None,
            Some(Some(cap)) => {
                let (kept, ellipsis) = capped(&self.collapsed, cap);
                let mut text = escape_xml(kept);
                if ellipsis {
                    text.push_str("...");
                }
                Some(text)
            }
        }
    }

    pub(super) fn description_len(&self, cap: Option<Option<usize>>) -> usize {
        match cap {
            None => self.description_len,
            Some(None) => 0,
            Some(Some(cap)) if self.collapsed_len <= cap => self.collapsed_escaped_len,
            Some(Some(cap)) => {
                let (kept, ellipsis) = capped(&self.collapsed, cap);
                escaped_len16(kept) + if ellipsis { 3 } else { 0 }
            }
        }
    }

    /// UTF-16 length of this skill's lines joined by `\n` (see [`Self::render`]).
    pub(super) fn rendered_len(&self, cap: Option<Option<usize>>) -> usize {
        let description = self.description_len(cap);
        let description_line = if description > 0 {
            "    <description></description>".len() + description + 1
        } else {
            0
        };
        self.fixed_len + description_line
    }

    pub(super) fn render(&self, cap: Option<Option<usize>>, out: &mut Vec<String>) {
        out.push("  <skill>".to_string());
        out.push(format!("    <name>{}</name>", self.name));
        if let Some(description) = self.description(cap).filter(|text| !text.is_empty()) {
            out.push(format!("    <description>{description}</description>"));
        }
        out.push(format!("    <location>{}</location>", self.location));
        out.push(format!("    <version>{}</version>", self.version));
        out.push("  </skill>".to_string());
    }
}

const CATALOG_OPEN: &str = "<available_skills>";
const CATALOG_CLOSE: &str = "</available_skills>";

/// The catalog for the first `count` skills; `cap` as in [`PreparedSkill::description`].
pub(super) fn render_catalog(
    skills: &[PreparedSkill<'_>],
    surface: CatalogSurface,
    cap: Option<Option<usize>>,
    note: Option<String>,
) -> String {
    let mut lines = Vec::with_capacity(skills.len() * 6 + 5);
    lines.extend(note);
    lines.push(instructions(surface, matches!(cap, Some(None))));
    lines.push(String::new());
    lines.push(CATALOG_OPEN.to_string());
    for skill in skills {
        skill.render(cap, &mut lines);
    }
    lines.push(CATALOG_CLOSE.to_string());
    lines.join("\n")
}

/// `len16(render_catalog(..))` computed from the prepared lengths.
pub(super) fn catalog_len(
    skills: &[PreparedSkill<'_>],
    surface: CatalogSurface,
    cap: Option<Option<usize>>,
    note: Option<&str>,
) -> usize {
    let note_len = note.map_or(0, |note| len16(note) + 1);
    note_len
        + len16(&instructions(surface, matches!(cap, Some(None))))
        + 1 // after the instructions
        + 1 // after the empty line
        + CATALOG_OPEN.len()
        + 1 // after the opening tag
        + skills
            .iter()
            .map(|skill| skill.rendered_len(cap) + 1) // each entry is followed by a newline
            .sum::<usize>()
        + CATALOG_CLOSE.len()
}

/// The note of a full catalog cut by `maxSkillsInPrompt`.
pub(super) fn count_limit_note(included: usize, total: usize) -> String {
    format!(
        "Skills catalog: included {included} of {total} skills (the maxSkillsInPrompt limit); run `openclaw skills check` to see them all."
    )
}

pub(super) fn budget_note(included: usize, total: usize, shortened: bool) -> String {
    if included < total {
        format!(
            "Skills catalog: included {included} of {total} skills to fit the prompt budget (compact format); run `openclaw skills check` to see them all."
        )
    } else if shortened {
        "Skills catalog: compact format, descriptions shortened to fit the prompt budget; run `openclaw skills check` for details.".to_string()
    } else {
        "Skills catalog: compact format, descriptions omitted to fit the prompt budget; run `openclaw skills check` for details.".to_string()
    }
}

/// Render the catalog of `skills` (already eligible) within the budget (docs/routing.md §7.5).
pub fn render_skills_prompt(
    skills: &[SkillEntry],
    max_chars: usize,
    max_count: usize,
    surface: CatalogSurface,
) -> SkillsPrompt {
    let total = skills.len();
    let empty = SkillsPrompt {
        text: String::new(),
        included: 0,
        total,
        format: CatalogFormat::Empty,
    };
    if skills.is_empty() {
        return empty;
    }
    let mut sorted: Vec<&SkillEntry> = skills.iter().collect();
    // Discovery hands them over sorted already; checking is n comparisons, sorting n log n.
    if !sorted.is_sorted_by(|a, b| collate(&a.name, &b.name).is_le()) {
        sorted.sort_by(|a, b| collate(&a.name, &b.name));
    }
    sorted.truncate(max_count);
    let by_count: Vec<PreparedSkill<'_>> = sorted
        .iter()
        .map(|skill| PreparedSkill::new(skill))
        .collect();
    // The count limit alone keeps the full format (OpenClaw notes "included N of M").
    let count_note = (by_count.len() < total).then(|| count_limit_note(by_count.len(), total));
    if catalog_len(&by_count, surface, None, count_note.as_deref()) <= max_chars {
        return SkillsPrompt {
            text: render_catalog(&by_count, surface, None, count_note),
            included: by_count.len(),
            total,
            format: CatalogFormat::Full,
        };
    }
    // Compact: name, location and version always; descriptions capped or omitted.
    let note = |count: usize, cap: Option<usize>| budget_note(count, total, cap.is_some());
    let fits = |count: usize, cap: Option<usize>| {
        catalog_len(
            &by_count[..count],
            surface,
            Some(cap),
            Some(&note(count, cap)),
        ) <= max_chars
    };
    // The largest prefix that fits without descriptions.
    let count = if fits(by_count.len(), None) {
        by_count.len()
    } else {
        let (mut low, mut high) = (0usize, by_count.len());
        while low < high {
            let mid = (low + high).div_ceil(2);
            if fits(mid, None) {
                low = mid;
            } else {
                high = mid - 1;
            }
        }
        low
    };
    if count == 0 {
        return empty;
    }
    // Give descriptions back: the largest cap in [4, 220] that still fits.
    let mut best: Option<usize> = None;
    let (mut low, mut high) = (MIN_DESCRIPTION_CAP, MAX_DESCRIPTION_CAP);
    while low <= high {
        let mid = (low + high) / 2;
        if fits(count, Some(mid)) {
            best = Some(mid);
            low = mid + 1;
        } else {
            high = mid - 1;
        }
    }
    SkillsPrompt {
        text: render_catalog(
            &by_count[..count],
            surface,
            Some(best),
            Some(note(count, best)),
        ),
        included: count,
        total,
        format: CatalogFormat::Compact(best),
    }
}

//! The skills list: discovery, eligibility, the `<available_skills>` catalog and its budget.
//!
//! Layout: [`discover_skills`] walks the skill roots (configured extra dirs, then the workspace
//! `skills/` folder, a later root replacing a same-name skill) and parses each `SKILL.md`
//! frontmatter; [`eligible_skills`] applies routing.md §7.2 against explicit [`HostFacts`] (never
//! the live process environment, so tests and snapshots stay hermetic);
//! [`render_skills_prompt`] renders the catalog within `skills.limits.maxSkillsPromptChars`,
//! falling back to the compact format (routing.md §7.4-§7.5).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::config::Run;
use crate::support::text::{
    collate, escape_xml, escaped_len16, head16, len16, trim_end_js, trim_js,
};

/// How deep below a root a `SKILL.md` is looked for (nesting is organisational).
const MAX_SKILL_DEPTH: usize = 4;
/// Largest `SKILL.md` read.
const MAX_SKILL_FILE_BYTES: u64 = 1024 * 1024;
/// Description caps tried in the compact format.
const MIN_DESCRIPTION_CAP: usize = 4;
const MAX_DESCRIPTION_CAP: usize = 220;

/// Where a skill came from; a later tier replaces a same-name skill of an earlier one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum SkillTier {
    Extra,
    Workspace,
}

/// One parsed skill.
#[derive(Clone, Debug, PartialEq)]
pub struct SkillEntry {
    /// Flat name (frontmatter `name`, else the folder name).
    pub name: String,
    pub description: String,
    /// Absolute `SKILL.md` path shown to the model.
    pub location: String,
    /// `sha256:<16 hex>` of the raw `SKILL.md` bytes.
    pub version: String,
    /// `metadata.openclaw.skillKey`, else the name.
    pub skill_key: String,
    pub tier: SkillTier,
    /// Raw bytes of SKILL.md (for `/context` sizes).
    pub file_chars: usize,
    /// `metadata.openclaw` (gates), `Null` when absent.
    pub openclaw_metadata: Value,
    pub disable_model_invocation: bool,
    /// Owning plugin (`metadata.openclaw.plugin`): eligible only while it is enabled.
    pub plugin: Option<String>,
}

/// Host facts the eligibility gates look at.
#[derive(Clone, Debug, Default)]
pub struct HostFacts {
    /// Node-style platform name: `linux`, `darwin`, `win32`.
    pub platform: String,
    pub env: BTreeMap<String, String>,
    pub path_dirs: Vec<PathBuf>,
}

impl HostFacts {
    /// The facts of this process (the CLI uses this; tests and snapshots build their own).
    pub fn from_process() -> Self {
        let platform = match std::env::consts::OS {
            "macos" => "darwin",
            "windows" => "win32",
            other => other,
        }
        .to_string();
        let path_dirs = std::env::var_os("PATH")
            .map(|path| std::env::split_paths(&path).collect())
            .unwrap_or_default();
        Self {
            platform,
            env: std::env::vars().collect(),
            path_dirs,
        }
    }

    fn has_bin(&self, bin: &str) -> bool {
        self.path_dirs.iter().any(|dir| dir.join(bin).is_file())
    }
}

/// Skills found, plus the files that were skipped and why.
#[derive(Clone, Debug, Default)]
pub struct DiscoveredSkills {
    pub skills: Vec<SkillEntry>,
    pub warnings: Vec<String>,
}

/// `sha256:` + the first 16 hex digits of SHA-256 over the raw bytes.
pub fn skill_version(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// Parsed skills keyed by file identity (path, size, modification time), so a long-lived process
/// (the bridge service, the benchmarks' warm path) re-reads and re-hashes only files that changed.
/// An edit that keeps both the size and the mtime is not noticed; the CLI runs without a cache.
#[derive(Default)]
pub struct SkillCache {
    entries: std::sync::Mutex<std::collections::HashMap<PathBuf, CachedSkill>>,
}

struct CachedSkill {
    len: u64,
    modified: Option<std::time::SystemTime>,
    location: String,
    parsed: Result<SkillEntry, String>,
}

impl std::fmt::Debug for SkillCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let size = self
            .entries
            .lock()
            .map(|entries| entries.len())
            .unwrap_or(0);
        f.debug_struct("SkillCache")
            .field("entries", &size)
            .finish()
    }
}

impl SkillCache {
    fn parse(
        &self,
        file: &Path,
        metadata: &std::fs::Metadata,
        run: &Run,
        tier: SkillTier,
    ) -> Result<SkillEntry, String> {
        let location = run.display_path(file);
        let modified = metadata.modified().ok();
        if let Ok(entries) = self.entries.lock() {
            if let Some(cached) = entries.get(file) {
                if cached.len == metadata.len()
                    && cached.modified == modified
                    && cached.location == location
                {
                    return cached.parsed.clone().map(|mut skill| {
                        skill.tier = tier;
                        skill
                    });
                }
            }
        }
        let parsed = parse_skill_file(file, metadata, run, tier);
        if let Ok(mut entries) = self.entries.lock() {
            entries.insert(
                file.to_path_buf(),
                CachedSkill {
                    len: metadata.len(),
                    modified,
                    location,
                    parsed: parsed.clone(),
                },
            );
        }
        parsed
    }
}

/// Find every skill of the run (extra dirs, then the workspace `skills/` folder).
pub fn discover_skills(run: &Run) -> DiscoveredSkills {
    discover_skills_cached(run, None)
}

/// [`discover_skills`] through an optional [`SkillCache`].
pub fn discover_skills_cached(run: &Run, cache: Option<&SkillCache>) -> DiscoveredSkills {
    let mut found = DiscoveredSkills::default();
    let mut by_name: BTreeMap<String, SkillEntry> = BTreeMap::new();
    let mut roots: Vec<(PathBuf, SkillTier)> = run
        .config
        .skill_extra_dirs()
        .into_iter()
        .map(|dir| {
            let dir = crate::config::run::resolve_config_path(&dir, &run.workspace);
            (dir, SkillTier::Extra)
        })
        .collect();
    roots.push((run.workspace.join("skills"), SkillTier::Workspace));
    for (root, tier) in roots {
        // A confined run (the service) walks only folders below the operator's roots.
        if let Some(allowed) = &run.roots {
            if root.exists() && !allowed.admits(&root) {
                let warning = format!(
                    "{}: skill folder is outside every --workspace-root; skipped",
                    root.display()
                );
                tracing::warn!("{warning}");
                found.warnings.push(warning);
                continue;
            }
        }
        let mut files = Vec::new();
        find_skill_files(
            &root,
            0,
            run.roots.as_ref(),
            &mut files,
            &mut found.warnings,
        );
        files.sort_by(|a, b| a.0.cmp(&b.0));
        for (file, metadata) in files {
            let parsed = match cache {
                Some(cache) => cache.parse(&file, &metadata, run, tier),
                None => parse_skill_file(&file, &metadata, run, tier),
            };
            match parsed {
                Ok(skill) => {
                    by_name.insert(skill.name.clone(), skill);
                }
                Err(reason) => {
                    let warning = format!("{}: skipped skill: {reason}", file.display());
                    tracing::warn!("{warning}");
                    found.warnings.push(warning);
                }
            }
        }
    }
    found.skills = by_name.into_values().collect();
    found.skills.sort_by(|a, b| collate(&a.name, &b.name));
    found
}

/// Collect `SKILL.md` files (with their metadata, so the cache needs no second `stat`). Under
/// `roots`, a symlinked folder or SKILL.md that resolves outside them is skipped with a warning.
fn find_skill_files(
    dir: &Path,
    depth: usize,
    roots: Option<&crate::support::fs::Roots>,
    out: &mut Vec<(PathBuf, std::fs::Metadata)>,
    warnings: &mut Vec<String>,
) {
    if depth > MAX_SKILL_DEPTH {
        return;
    }
    let outside = |path: &Path, warnings: &mut Vec<String>| {
        let leaves = roots.is_some_and(|roots| !roots.admits(path));
        if leaves {
            let warning = format!(
                "{}: symlink leaves every --workspace-root; skipped",
                path.display()
            );
            tracing::warn!("{warning}");
            warnings.push(warning);
        }
        leaves
    };
    if depth > 0 {
        let skill_file = dir.join("SKILL.md");
        if std::fs::symlink_metadata(&skill_file).is_ok_and(|meta| meta.file_type().is_symlink())
            && outside(&skill_file, warnings)
        {
            return;
        }
        if let Ok(metadata) = std::fs::metadata(&skill_file) {
            if metadata.is_file() {
                out.push((skill_file, metadata));
                return;
            }
        }
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(|entry| entry.ok()) {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name == "node_modules" {
            continue;
        }
        // `file_type` comes with the directory listing; follow symlinks only when needed.
        let is_dir = match entry.file_type() {
            Ok(kind) if kind.is_dir() => true,
            Ok(kind) if kind.is_symlink() => {
                entry.path().is_dir() && !outside(&entry.path(), warnings)
            }
            _ => false,
        };
        if is_dir {
            find_skill_files(&entry.path(), depth + 1, roots, out, warnings);
        }
    }
}

/// Split `---` frontmatter from a SKILL.md (BOM stripped, CRLF normalised for parsing only).
/// Only the lines up to the closing fence are looked at; the body is never scanned.
fn frontmatter(text: &str) -> Option<String> {
    let text = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next()?;
    if first.trim_end_matches(['\n', '\r']) != "---" || !first.ends_with('\n') {
        return None;
    }
    let mut front = String::new();
    for line in lines {
        let bare = line.trim_end_matches(['\n', '\r']);
        if bare == "---" {
            return Some(front.trim_end_matches('\n').to_string());
        }
        front.push_str(bare);
        front.push('\n');
    }
    None
}

fn parse_skill_file(
    file: &Path,
    metadata: &std::fs::Metadata,
    run: &Run,
    tier: SkillTier,
) -> Result<SkillEntry, String> {
    let size = metadata.len();
    if size > MAX_SKILL_FILE_BYTES {
        return Err(format!("{size} bytes is over the 1 MiB limit"));
    }
    // The reported size is not trusted (procfs says 0): the read itself is capped and confined.
    let allowed = |real: &Path| run.roots.as_ref().is_none_or(|roots| roots.contains(real));
    let bytes = crate::support::fs::read_capped(file, MAX_SKILL_FILE_BYTES, &allowed).map_err(
        |refusal| match refusal {
            crate::support::fs::ReadRefusal::TooLarge { .. } => "over the 1 MiB limit".to_string(),
            other => other.to_string(),
        },
    )?;
    let folder_name = file
        .parent()
        .and_then(Path::file_name)
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    parse_skill(&bytes, &folder_name, run.display_path(file), tier)
}

/// The frontmatter keys we read; others are ignored. Type errors name the key.
#[derive(serde::Deserialize, Debug, Default, PartialEq)]
struct Frontmatter {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    metadata: Option<Value>,
    #[serde(default, rename = "disable-model-invocation")]
    disable_model_invocation: Option<bool>,
}

/// The common frontmatter, `key: plain text` lines only, without a YAML parser. Anything YAML
/// could read differently (quotes, flow or block syntax, comments, booleans, numbers, nulls,
/// repeated keys, `metadata`) returns `None` and goes through `serde_yaml_ng`.
fn plain_frontmatter(front: &str) -> Option<Frontmatter> {
    let mut meta = Frontmatter::default();
    let mut seen = std::collections::BTreeSet::new();
    for line in front.lines() {
        let (key, value) = line.split_once(": ")?;
        let plain_key = key
            .chars()
            .next()
            .is_some_and(|ch| ch.is_ascii_alphabetic())
            && key
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-');
        let value = value.trim();
        let starts_special = value.starts_with(|ch: char| "-?:,[]{}#&*!|>'\"%@`".contains(ch));
        let lower = value.to_ascii_lowercase();
        let scalar_keyword = matches!(
            lower.as_str(),
            "true" | "false" | "yes" | "no" | "on" | "off" | "null" | "~" | "y" | "n"
        ) || value.parse::<f64>().is_ok()
            || value.starts_with("0x")
            || value.starts_with("0o")
            || value.starts_with('.');
        if !plain_key
            || value.is_empty()
            || starts_special
            || scalar_keyword
            || value.contains(": ")
            || value.contains(" #")
            || value.ends_with(':')
            || !seen.insert(key)
        {
            return None;
        }
        match key {
            "name" => meta.name = Some(value.to_string()),
            "description" => meta.description = Some(value.to_string()),
            "metadata" | "disable-model-invocation" => return None,
            _ => {}
        }
    }
    Some(meta)
}

/// Parse one `SKILL.md` from its raw bytes; `location` is the path shown to the model.
pub fn parse_skill(
    bytes: &[u8],
    folder_name: &str,
    location: String,
    tier: SkillTier,
) -> Result<SkillEntry, String> {
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => std::borrow::Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    };
    let front = frontmatter(&text).ok_or("no `---` frontmatter block at the top of the file")?;
    let meta: Frontmatter = match plain_frontmatter(&front) {
        Some(meta) => meta,
        None => serde_yaml_ng::from_str(&front)
            .map_err(|error| format!("invalid frontmatter: {error}"))?,
    };
    let name = match meta.name {
        Some(name) if !trim_js(&name).is_empty() => trim_js(&name).to_string(),
        _ => folder_name.to_string(),
    };
    let description = match meta.description {
        Some(text) if !trim_js(&text).is_empty() => text,
        _ => return Err("missing `description`".to_string()),
    };
    // `metadata` is a mapping, or (as OpenClaw writes it) a JSON string.
    let metadata = match meta.metadata {
        Some(Value::String(json)) => serde_json::from_str(&json)
            .map_err(|error| format!("`metadata` is not valid JSON: {error}"))?,
        Some(other) => other,
        None => Value::Null,
    };
    let openclaw = metadata.get("openclaw").cloned().unwrap_or(Value::Null);
    let skill_key = openclaw
        .get("skillKey")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| name.clone());
    let plugin = openclaw
        .get("plugin")
        .and_then(Value::as_str)
        .map(str::to_string);
    let disable_model_invocation = meta.disable_model_invocation.unwrap_or(false);
    Ok(SkillEntry {
        name,
        description,
        location,
        version: skill_version(bytes),
        skill_key,
        tier,
        file_chars: len16(&text),
        openclaw_metadata: openclaw,
        disable_model_invocation,
        plugin,
    })
}

/// Why a skill was not offered (for `/context --detail`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IneligibleSkill {
    pub name: String,
    pub reason: String,
}

/// Apply routing.md §7.2 in order.
pub fn eligible_skills(
    skills: &[SkillEntry],
    run: &Run,
    host: &HostFacts,
) -> (Vec<SkillEntry>, Vec<IneligibleSkill>) {
    let allowlist = run.config.skills_allowlist(&run.agent_id);
    let mut kept = Vec::new();
    let mut dropped = Vec::new();
    for skill in skills {
        match ineligibility(skill, run, host, allowlist.as_deref()) {
            None => kept.push(skill.clone()),
            Some(reason) => dropped.push(IneligibleSkill {
                name: skill.name.clone(),
                reason,
            }),
        }
    }
    (kept, dropped)
}

fn ineligibility(
    skill: &SkillEntry,
    run: &Run,
    host: &HostFacts,
    allowlist: Option<&[String]>,
) -> Option<String> {
    let entry = run.config.skill_entry(&skill.skill_key);
    if entry
        .and_then(|entry| entry.get("enabled"))
        .and_then(Value::as_bool)
        == Some(false)
    {
        return Some(format!(
            "skills.entries.{}.enabled is false",
            skill.skill_key
        ));
    }
    let gates = &skill.openclaw_metadata;
    if let Some(os) = gates.get("os").and_then(Value::as_array) {
        if !os
            .iter()
            .any(|value| value.as_str() == Some(host.platform.as_str()))
        {
            return Some(format!("not available on {}", host.platform));
        }
    }
    let always = gates.get("always").and_then(Value::as_bool) == Some(true);
    if !always {
        let requires = gates.get("requires").cloned().unwrap_or(Value::Null);
        let list = |key: &str| {
            requires
                .get(key)
                .map(crate::config::openclaw::string_list)
                .unwrap_or_default()
        };
        for variable in list("env") {
            let configured = entry.is_some_and(|entry| {
                entry
                    .get("env")
                    .and_then(|env| env.get(&variable))
                    .is_some_and(|v| !v.is_null())
                    || entry.get("apiKey").is_some_and(|v| !v.is_null())
            });
            if !configured && host.env.get(&variable).is_none_or(String::is_empty) {
                return Some(format!("requires environment variable {variable}"));
            }
        }
        for path in list("config") {
            if !run.config.is_truthy(&path) {
                return Some(format!("requires config {path}"));
            }
        }
        for bin in list("bins") {
            if !host.has_bin(&bin) {
                return Some(format!("requires `{bin}` on PATH"));
            }
        }
        let any_bins = list("anyBins");
        if !any_bins.is_empty() && !any_bins.iter().any(|bin| host.has_bin(bin)) {
            return Some(format!("requires one of {} on PATH", any_bins.join(", ")));
        }
    }
    if let Some(allowed) = allowlist {
        if !allowed.iter().any(|name| name == &skill.name) {
            return Some("not in the agent's skills allowlist".to_string());
        }
    }
    if skill.disable_model_invocation {
        return Some("disable-model-invocation is true".to_string());
    }
    if let Some(plugin) = &skill.plugin {
        if !run.config.plugin_enabled(plugin) {
            return Some(format!("plugin {plugin} is disabled"));
        }
    }
    None
}

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

fn instructions(surface: CatalogSurface, compact_without_descriptions: bool) -> String {
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
fn cap_description(description: &str, cap: usize) -> String {
    let collapsed = collapse_whitespace(description);
    let (kept, ellipsis) = capped(&collapsed, cap);
    if ellipsis {
        format!("{kept}...")
    } else {
        kept.to_string()
    }
}

fn collapse_whitespace(text: &str) -> String {
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
fn capped(collapsed: &str, cap: usize) -> (&str, bool) {
    if len16(collapsed) <= cap {
        (collapsed, false)
    } else {
        (trim_end_js(head16(collapsed, cap.saturating_sub(3))), true)
    }
}

/// One skill with its escaped fields computed once, so the budget search can price a catalog
/// without rendering it.
struct PreparedSkill<'a> {
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
    fn new(skill: &'a SkillEntry) -> Self {
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
    fn description(&self, cap: Option<Option<usize>>) -> Option<String> {
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

    fn description_len(&self, cap: Option<Option<usize>>) -> usize {
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
    fn rendered_len(&self, cap: Option<Option<usize>>) -> usize {
        let description = self.description_len(cap);
        let description_line = if description > 0 {
            "    <description></description>".len() + description + 1
        } else {
            0
        };
        self.fixed_len + description_line
    }

    fn render(&self, cap: Option<Option<usize>>, out: &mut Vec<String>) {
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
fn render_catalog(
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
fn catalog_len(
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

fn budget_note(included: usize, total: usize, shortened: bool) -> String {
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

/// Render the catalog of `skills` (already eligible) within the budget (routing.md §7.5).
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
    sorted.sort_by(|a, b| collate(&a.name, &b.name));
    sorted.truncate(max_count);
    let by_count: Vec<PreparedSkill<'_>> = sorted
        .iter()
        .map(|skill| PreparedSkill::new(skill))
        .collect();
    if by_count.len() == total && catalog_len(&by_count, surface, None, None) <= max_chars {
        return SkillsPrompt {
            text: render_catalog(&by_count, surface, None, None),
            included: total,
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

#[cfg(test)]
mod tests {
    use super::*;

    const WEATHER: &str = "---\nname: weather\ndescription: Get weather <data> & \"forecasts\" it's\n---\n\n# Weather\n\nCall the forecast API.\n";

    #[test]
    fn version_vectors() {
        assert_eq!(WEATHER.len(), 108);
        assert_eq!(skill_version(WEATHER.as_bytes()), "sha256:76d67ed10de14fe0");
        let query = WEATHER.replace("Call", "Query");
        assert_eq!(skill_version(query.as_bytes()), "sha256:d87284054edf1452");
        let crlf = WEATHER.replace('\n', "\r\n");
        assert_eq!(skill_version(crlf.as_bytes()), "sha256:98e45c2993262ba2");
        let bom = format!("\u{FEFF}{WEATHER}");
        assert_eq!(skill_version(bom.as_bytes()), "sha256:7031c54dd88a990f");
        assert_eq!(skill_version(b""), "sha256:e3b0c44298fc1c14");
    }

    #[test]
    fn the_plain_fast_path_agrees_with_yaml() {
        for front in [
            "name: weather\ndescription: Get weather <data> & \"forecasts\" it's",
            "name: a\ndescription: Tab\there, trailing  ",
            "name: a\ndescription: uses ünïcödé and 😀",
            "description: x\nhomepage: https://example.com/a",
            "name: a\nversion: 1.2.3\ndescription: three parts",
        ] {
            let yaml: Frontmatter = serde_yaml_ng::from_str(front).expect("yaml");
            assert_eq!(plain_frontmatter(front), Some(yaml), "{front:?}");
        }
        for front in [
            "name: 'quoted'\ndescription: x",
            "name: a\ndescription: true",
            "name: a\ndescription: 12",
            "name: a\ndescription: x # comment",
            "name: a\nname: b\ndescription: x",
            "name: a\ndescription: >\n  folded",
            "name: a\nmetadata: {\"openclaw\": {}}\ndescription: x",
            "name: a\ndescription: key: value",
            "name: a\n# note\ndescription: x",
        ] {
            assert_eq!(
                plain_frontmatter(front),
                None,
                "{front:?} goes through YAML"
            );
        }
    }

    #[test]
    fn frontmatter_needs_both_fences() {
        assert_eq!(
            frontmatter("---\nname: a\n---\nbody").as_deref(),
            Some("name: a")
        );
        assert_eq!(
            frontmatter("\u{FEFF}---\r\nname: a\r\n---\r\n").as_deref(),
            Some("name: a")
        );
        assert_eq!(frontmatter("name: a\n---\n"), None);
        assert_eq!(frontmatter("---\nname: a\n"), None);
    }

    fn entry(name: &str, description: &str) -> SkillEntry {
        SkillEntry {
            name: name.to_string(),
            description: description.to_string(),
            location: format!("/ws/skills/{name}/SKILL.md"),
            version: skill_version(name.as_bytes()),
            skill_key: name.to_string(),
            tier: SkillTier::Workspace,
            file_chars: 0,
            openclaw_metadata: Value::Null,
            disable_model_invocation: false,
            plugin: None,
        }
    }

    #[test]
    fn priced_length_equals_rendered_length() {
        let skills: Vec<SkillEntry> = [
            ("a&b", "Tricky <desc> & \"quotes\" 'x'   with\n  newlines"),
            (
                "émoji",
                "😀 astral 😀 description that is somewhat long and keeps going and going",
            ),
            ("plain", "short"),
            ("Zed", "   "),
        ]
        .iter()
        .map(|(name, description)| entry(name, description))
        .collect();
        let prepared: Vec<PreparedSkill<'_>> = skills.iter().map(PreparedSkill::new).collect();
        for surface in [CatalogSurface::Codex, CatalogSurface::SystemPrompt] {
            for cap in [
                None,
                Some(None),
                Some(Some(4)),
                Some(Some(10)),
                Some(Some(220)),
            ] {
                for count in 0..=prepared.len() {
                    for note in [None, Some("a note ü")] {
                        let text = render_catalog(
                            &prepared[..count],
                            surface,
                            cap,
                            note.map(str::to_string),
                        );
                        assert_eq!(
                            catalog_len(&prepared[..count], surface, cap, note),
                            len16(&text),
                            "{cap:?} {count} {note:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn capped_descriptions_collapse_whitespace() {
        assert_eq!(cap_description("a  b\n c", 220), "a b c");
        assert_eq!(
            cap_description(&"A".repeat(1000), 220),
            format!("{}...", "A".repeat(217))
        );
    }
}

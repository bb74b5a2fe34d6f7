//! The pinned Codex model-prompt fixtures: sync from Codex's catalogs, drift check, verification.
//!
//! Layout: [`discovery_candidates`] lists where Codex keeps its model catalog (explicit `CODEX_HOME`
//! and home directory, never read from the process environment here); [`plan_sync`] renders the
//! fixture files in memory from one catalog (pure); [`apply_plan`] writes them atomically (both or
//! neither, unchanged files untouched); [`verify_fixtures`] checks every pinned file against the
//! SHA-256 recorded in its `source.json` and that the snapshots reference files that exist.
//! Spec: docs/snapshots.md §6.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use crate::error::{Error, Result};

/// Default model slug.
pub const DEFAULT_MODEL: &str = "gpt-5.5";
/// Default out dir, relative to the current directory.
pub const DEFAULT_OUT_DIR: &str = "fixtures/codex-model-catalog";

/// Personalities Codex catalogs carry variables for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Personality {
    Default,
    Friendly,
    Pragmatic,
}

impl Personality {
    pub fn as_str(self) -> &'static str {
        match self {
            Personality::Default => "default",
            Personality::Friendly => "friendly",
            Personality::Pragmatic => "pragmatic",
        }
    }
}

impl std::str::FromStr for Personality {
    type Err = Error;
    fn from_str(text: &str) -> Result<Self> {
        match text {
            "default" => Ok(Personality::Default),
            "friendly" => Ok(Personality::Friendly),
            "pragmatic" => Ok(Personality::Pragmatic),
            other => Err(Error::InvalidArgument {
                flag: "--personality".to_string(),
                message: format!(
                    "unsupported personality `{other}` (expected default, friendly or pragmatic)"
                ),
            }),
        }
    }
}

/// Where the discovery looks (passed in, so tests never touch the process environment).
#[derive(Clone, Debug, Default)]
pub struct DiscoveryEnv {
    /// Raw `CODEX_HOME` value (trimmed here; empty means unset).
    pub codex_home: Option<String>,
    /// The home directory (`dirs::home_dir()` in production).
    pub home: Option<PathBuf>,
}

impl DiscoveryEnv {
    pub fn from_process() -> Self {
        Self {
            codex_home: std::env::var("CODEX_HOME").ok(),
            home: dirs::home_dir(),
        }
    }
}

/// Candidate catalogs in search order, duplicates removed.
pub fn discovery_candidates(env: &DiscoveryEnv) -> Vec<PathBuf> {
    let mut candidates = Vec::new();
    let codex_home = env
        .codex_home
        .as_deref()
        .map(str::trim)
        .filter(|home| !home.is_empty())
        .map(PathBuf::from)
        .or_else(|| env.home.as_ref().map(|home| home.join(".codex")));
    if let Some(codex_home) = codex_home {
        candidates.push(codex_home.join("models_cache.json"));
    }
    if let Some(home) = &env.home {
        candidates.push(home.join(".codex").join("models_cache.json"));
        candidates.push(home.join("code/codex/codex-rs/models-manager/models.json"));
    }
    let mut unique = Vec::new();
    for candidate in candidates {
        if !unique.contains(&candidate) {
            unique.push(candidate);
        }
    }
    unique
}

/// The first candidate that exists, with every candidate looked at.
pub fn find_catalog(env: &DiscoveryEnv) -> (Option<PathBuf>, Vec<PathBuf>) {
    let candidates = discovery_candidates(env);
    let found = candidates.iter().find(|path| path.is_file()).cloned();
    (found, candidates)
}

/// The kind of catalog a file is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CatalogKind {
    ModelsCache,
    CheckedInCatalog,
    Unknown,
}

/// A parsed catalog file.
#[derive(Clone, Debug)]
pub struct Catalog {
    pub path: PathBuf,
    pub models: Vec<Value>,
    pub client_version: Option<String>,
    pub fetched_at: Option<String>,
    pub kind: CatalogKind,
}

/// Largest catalog read (Codex's `models.json` is about 1 MB).
const MAX_CATALOG_BYTES: u64 = 64 * 1024 * 1024;

/// A model slug names files in `--out-dir`: letters, digits, `.`, `-`, `_` only, so no slug can
/// reach outside it.
pub fn validate_slug(slug: &str) -> Result<()> {
    let fine = !slug.is_empty()
        && !slug.starts_with('.')
        && slug
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    if fine {
        Ok(())
    } else {
        Err(Error::InvalidArgument {
            flag: format!("--model {slug}"),
            message: "a model slug may hold only letters, digits, `.`, `-` and `_`".to_string(),
        })
    }
}

/// Read and validate a catalog (an object with a `models` array).
pub fn load_catalog(path: &Path) -> Result<Catalog> {
    let bytes = crate::support::fs::read_file_capped(path, MAX_CATALOG_BYTES)?;
    let text = String::from_utf8_lossy(&bytes);
    let invalid = |message: String| Error::InvalidDocument {
        path: path.to_path_buf(),
        message,
    };
    let value: Value =
        serde_json::from_str(&text).map_err(|error| invalid(format!("invalid JSON: {error}")))?;
    let Value::Object(mut object) = value else {
        return Err(invalid(
            "expected an object with a top-level models array (a models_cache.json or models.json), found a bare array or scalar".to_string(),
        ));
    };
    let Some(Value::Array(models)) = object.remove("models") else {
        return Err(invalid("expected a top-level models array".to_string()));
    };
    let string = |key: &str| object.get(key).and_then(Value::as_str).map(str::to_string);
    let client_version = string("client_version");
    let fetched_at = string("fetched_at");
    let file_name = path
        .file_name()
        .and_then(|name| name.to_str())
        .unwrap_or("");
    let normalized = path.to_string_lossy().replace('\\', "/");
    let kind =
        if file_name == "models_cache.json" || client_version.is_some() || fetched_at.is_some() {
            CatalogKind::ModelsCache
        } else if normalized.ends_with("models-manager/models.json") || file_name == "models.json" {
            CatalogKind::CheckedInCatalog
        } else {
            CatalogKind::Unknown
        };
    Ok(Catalog {
        path: path.to_path_buf(),
        models,
        client_version,
        fetched_at,
        kind,
    })
}

impl Catalog {
    /// The entry with exactly this slug; the error lists the slugs that exist.
    pub fn model(&self, slug: &str) -> Result<&Value> {
        self.models
            .iter()
            .find(|entry| entry.get("slug").and_then(Value::as_str) == Some(slug))
            .ok_or_else(|| {
                let slugs: Vec<&str> = self
                    .models
                    .iter()
                    .filter_map(|entry| entry.get("slug").and_then(Value::as_str))
                    .collect();
                Error::Catalog {
                    path: self.path.clone(),
                    message: format!("no model `{slug}`; the catalog has: {}", slugs.join(", ")),
                }
            })
    }

    /// `catalogPath` as recorded: never an absolute local path.
    pub fn display_path(&self) -> String {
        let normalized = self.path.to_string_lossy().replace('\\', "/");
        let file_name = self
            .path
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        if file_name == "models_cache.json" {
            "<codex-home>/models_cache.json".to_string()
        } else if normalized.ends_with("codex-rs/models-manager/models.json") {
            "<codex-checkout>/codex-rs/models-manager/models.json".to_string()
        } else {
            format!("<catalog>/{file_name}")
        }
    }
}

/// Rendered model instructions and the catalog field they came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderedInstructions {
    pub text: String,
    pub field: String,
    pub warnings: Vec<String>,
}

/// Render a model's instructions (docs/snapshots.md §6.3); a final `\n` is added only if
/// missing, nothing else is touched.
pub fn render_instructions(
    entry: &Value,
    slug: &str,
    personality: Personality,
) -> Result<RenderedInstructions> {
    let messages = entry.get("model_messages");
    let template = messages
        .and_then(|messages| messages.get("instructions_template"))
        .and_then(Value::as_str)
        .filter(|template| !template.is_empty());
    let mut warnings = Vec::new();
    let (text, field) = if let Some(template) = template {
        const PLACEHOLDER: &str = "{{ personality }}";
        if template.contains(PLACEHOLDER) {
            let variable = format!("personality_{}", personality.as_str());
            let value = messages
                .and_then(|messages| messages.get("instructions_variables"))
                .and_then(|variables| variables.get(&variable))
                .and_then(Value::as_str);
            if value.is_none() {
                warnings.push(format!(
                    "model {slug} has no model_messages.instructions_variables.{variable}; the placeholder renders empty"
                ));
            }
            (
                template.replace(PLACEHOLDER, value.unwrap_or("")),
                format!(
                    "model_messages.instructions_template + model_messages.instructions_variables.{variable}"
                ),
            )
        } else {
            (
                template.to_string(),
                "model_messages.instructions_template".to_string(),
            )
        }
    } else if let Some(base) = entry.get("base_instructions").and_then(Value::as_str) {
        (base.to_string(), "base_instructions".to_string())
    } else {
        return Err(Error::InvalidArgument {
            flag: format!("--model {slug}"),
            message: "the catalog entry has no renderable instructions (no model_messages.instructions_template and no base_instructions)".to_string(),
        });
    };
    Ok(RenderedInstructions {
        text: with_final_newline(text),
        field,
        warnings,
    })
}

fn with_final_newline(mut text: String) -> String {
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

/// SHA-256 as 64 lowercase hex digits.
pub fn sha256_hex(bytes: &[u8]) -> String {
    crate::support::hex::sha256(bytes, 32)
}

/// The `source` object of a provenance file (keys in this order).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FixtureSource {
    pub catalog_path: String,
    pub catalog_kind: CatalogKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub catalog_client_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub catalog_fetched_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub catalog_git_head: Option<String>,
    pub field: String,
    pub sha256: String,
}

#[derive(Serialize)]
struct InstructionsProvenance<'a> {
    model: &'a str,
    personality: &'a str,
    source: &'a FixtureSource,
}

#[derive(Serialize)]
struct PresetProvenance<'a> {
    model: &'a str,
    source: &'a FixtureSource,
}

/// What `sync-codex-model` was asked to do.
#[derive(Clone, Debug)]
pub struct SyncRequest {
    pub catalog: PathBuf,
    pub model: String,
    pub personality: Personality,
    pub out_dir: PathBuf,
    pub git_head: Option<String>,
    pub source_label: Option<String>,
    /// A captured Default-preset text to pin instead of (or besides) the catalog's.
    pub collaboration_default: Option<PathBuf>,
}

/// One file of a plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedFile {
    pub path: PathBuf,
    pub bytes: Vec<u8>,
}

/// Files to write plus notices for the user.
#[derive(Clone, Debug, Default)]
pub struct SyncPlan {
    pub files: Vec<PlannedFile>,
    pub notices: Vec<String>,
}

fn provenance_json<T: Serialize>(value: &T) -> String {
    // Key order is the struct's (not sorted); 2-space indent, final newline.
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    text
}

/// Render every fixture file from the catalog in memory (nothing is written).
pub fn plan_sync(request: &SyncRequest) -> Result<SyncPlan> {
    validate_slug(&request.model)?;
    let catalog = load_catalog(&request.catalog)?;
    let entry = catalog.model(&request.model)?;
    let rendered = render_instructions(entry, &request.model, request.personality)?;
    let mut plan = SyncPlan {
        notices: rendered.warnings.clone(),
        ..SyncPlan::default()
    };
    let catalog_path = request
        .source_label
        .clone()
        .unwrap_or_else(|| catalog.display_path());
    let source = |field: String, bytes: &[u8]| FixtureSource {
        catalog_path: catalog_path.clone(),
        catalog_kind: catalog.kind,
        catalog_client_version: catalog.client_version.clone(),
        catalog_fetched_at: catalog.fetched_at.clone(),
        catalog_git_head: request.git_head.clone(),
        field,
        sha256: sha256_hex(bytes),
    };
    let stem = format!("{}.{}", request.model, request.personality.as_str());
    let instructions_source = source(rendered.field.clone(), rendered.text.as_bytes());
    plan.files.push(PlannedFile {
        path: request.out_dir.join(format!("{stem}.instructions.md")),
        bytes: rendered.text.clone().into_bytes(),
    });
    plan.files.push(PlannedFile {
        path: request.out_dir.join(format!("{stem}.source.json")),
        bytes: provenance_json(&InstructionsProvenance {
            model: &request.model,
            personality: request.personality.as_str(),
            source: &instructions_source,
        })
        .into_bytes(),
    });
    let preset_path = request
        .out_dir
        .join(format!("{}.collaboration-default.md", request.model));
    let preset_source_path = request.out_dir.join(format!(
        "{}.collaboration-default.source.json",
        request.model
    ));
    let catalog_preset = entry
        .get("model_messages")
        .and_then(|messages| messages.get("collaboration_modes"))
        .and_then(|modes| modes.get("default"))
        .and_then(Value::as_str);
    let preset = if let Some(file) = &request.collaboration_default {
        let text = std::fs::read_to_string(file).map_err(|source| Error::Read {
            path: file.clone(),
            source,
        })?;
        let label = file
            .file_name()
            .map(|name| format!("<capture>/{}", name.to_string_lossy()))
            .unwrap_or_else(|| "<capture>".to_string());
        Some((
            with_final_newline(text),
            "captured".to_string(),
            Some(label),
        ))
    } else {
        catalog_preset.map(|text| {
            (
                with_final_newline(text.to_string()),
                "model_messages.collaboration_modes.default".to_string(),
                None,
            )
        })
    };
    match preset {
        Some((text, field, label)) => {
            let mut preset_source = source(field, text.as_bytes());
            if let Some(label) = label {
                preset_source.catalog_path = label;
                preset_source.catalog_kind = CatalogKind::Unknown;
                preset_source.catalog_client_version = None;
                preset_source.catalog_fetched_at = None;
            }
            plan.files.push(PlannedFile {
                path: preset_path,
                bytes: text.into_bytes(),
            });
            plan.files.push(PlannedFile {
                path: preset_source_path,
                bytes: provenance_json(&PresetProvenance {
                    model: &request.model,
                    source: &preset_source,
                })
                .into_bytes(),
            });
        }
        None => plan.notices.push(format!(
            "model {} carries no model_messages.collaboration_modes.default (Codex uses the preset compiled into its binary); the pinned Default preset {} is left as it is",
            request.model,
            preset_path.display()
        )),
    }
    Ok(plan)
}

/// What [`apply_plan`] did to each file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileOutcome {
    Written(PathBuf),
    Unchanged(PathBuf),
}

/// Write the plan: every changed file goes to a temp file first, then all are renamed, so a
/// failure while staging leaves every old file intact; a failing rename restores the files
/// already replaced. Unchanged files are not touched (their mtime stays).
pub fn apply_plan(plan: &SyncPlan) -> Result<Vec<FileOutcome>> {
    struct Staged {
        temp: tempfile::NamedTempFile,
        path: PathBuf,
        previous: Option<Vec<u8>>,
    }
    let mut staged = Vec::new();
    let mut outcomes = Vec::new();
    for file in &plan.files {
        let previous = std::fs::read(&file.path).ok();
        if previous.as_deref() == Some(file.bytes.as_slice()) {
            outcomes.push(FileOutcome::Unchanged(file.path.clone()));
            continue;
        }
        let write_error = |source| Error::Write {
            path: file.path.clone(),
            source,
        };
        let dir = file
            .path
            .parent()
            .filter(|dir| !dir.as_os_str().is_empty())
            .unwrap_or_else(|| Path::new("."));
        std::fs::create_dir_all(dir).map_err(write_error)?;
        let mut temp = tempfile::NamedTempFile::new_in(dir).map_err(write_error)?;
        std::io::Write::write_all(&mut temp, &file.bytes).map_err(write_error)?;
        temp.as_file().sync_all().map_err(write_error)?;
        staged.push(Staged {
            temp,
            path: file.path.clone(),
            previous,
        });
    }
    let mut replaced: Vec<(PathBuf, Option<Vec<u8>>)> = Vec::new();
    for Staged {
        temp,
        path,
        previous,
    } in staged
    {
        if let Err(error) = temp.persist(&path) {
            for (done, old) in replaced.iter().rev() {
                let _ = match old {
                    Some(bytes) => crate::support::fs::write_atomic(done, bytes),
                    None => std::fs::remove_file(done).map_err(|source| Error::Write {
                        path: done.clone(),
                        source,
                    }),
                };
            }
            return Err(Error::Write {
                path,
                source: error.error,
            });
        }
        outcomes.push(FileOutcome::Written(path.clone()));
        replaced.push((path, previous));
    }
    Ok(outcomes)
}

/// A unified diff between committed and rendered text (empty when equal).
pub fn unified_diff(old: &str, new: &str, old_label: &str, new_label: &str) -> String {
    if old == new {
        return String::new();
    }
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(old_label, new_label)
        .to_string()
}

/// Compare the plan with the files on disk; returns one diff per drifted or missing file.
pub fn check_plan(plan: &SyncPlan) -> Vec<(PathBuf, String)> {
    let mut drift = Vec::new();
    for file in &plan.files {
        let rendered = String::from_utf8_lossy(&file.bytes);
        match std::fs::read(&file.path) {
            Ok(current) if current == file.bytes => {}
            Ok(current) => {
                let label = file.path.display().to_string();
                drift.push((
                    file.path.clone(),
                    unified_diff(
                        &String::from_utf8_lossy(&current),
                        &rendered,
                        &format!("{label} (committed)"),
                        &format!("{label} (from catalog)"),
                    ),
                ));
            }
            Err(_) => drift.push((
                file.path.clone(),
                format!(
                    "{}: missing (the catalog renders {} bytes)\n",
                    file.path.display(),
                    file.bytes.len()
                ),
            )),
        }
    }
    drift
}

/// One problem found by [`verify_fixtures`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyProblem {
    pub path: PathBuf,
    pub message: String,
}

/// The fixture a provenance file describes: `<stem>.instructions.md` when it exists, else `<stem>.md`.
fn fixture_for(source_json: &Path) -> Option<PathBuf> {
    let name = source_json.file_name()?.to_str()?;
    let stem = name.strip_suffix(".source.json")?;
    let dir = source_json.parent()?;
    let instructions = dir.join(format!("{stem}.instructions.md"));
    if instructions.exists() {
        Some(instructions)
    } else {
        Some(dir.join(format!("{stem}.md")))
    }
}

fn sorted_entries(dir: &Path) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|entry| entry.ok())
                .map(|entry| entry.path())
                .collect()
        })
        .unwrap_or_default();
    entries.sort();
    entries
}

/// Check every pinned fixture under `<root>/fixtures/codex-model-catalog` against its recorded
/// SHA-256, that no fixture lacks provenance, and that the snapshots under
/// `<root>/fixtures/prompt-snapshots` reference fixtures that exist. Returns the number of
/// fixtures verified and the problems found.
pub fn verify_fixtures(root: &Path) -> (usize, Vec<VerifyProblem>) {
    let catalog_dir = root.join(DEFAULT_OUT_DIR);
    let mut problems = Vec::new();
    let mut verified = 0;
    let mut described = Vec::new();
    let entries = sorted_entries(&catalog_dir);
    if entries.is_empty() {
        problems.push(VerifyProblem {
            path: catalog_dir.clone(),
            message: "no pinned fixtures found".to_string(),
        });
    }
    for path in &entries {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if !name.ends_with(".source.json") {
            continue;
        }
        let problem = |message: String| VerifyProblem {
            path: path.clone(),
            message,
        };
        let recorded = std::fs::read_to_string(path)
            .ok()
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
            .and_then(|value| value["source"]["sha256"].as_str().map(str::to_string));
        let Some(recorded) = recorded else {
            problems.push(problem(
                "unreadable provenance: no source.sha256".to_string(),
            ));
            continue;
        };
        let Some(fixture) = fixture_for(path) else {
            continue;
        };
        described.push(fixture.clone());
        match std::fs::read(&fixture) {
            Ok(bytes) if sha256_hex(&bytes) == recorded => verified += 1,
            Ok(bytes) => problems.push(VerifyProblem {
                path: fixture.clone(),
                message: format!(
                    "SHA-256 {} does not match {} recorded in {}; re-pin it with `clawbridge sync-codex-model` (or restore it)",
                    sha256_hex(&bytes),
                    recorded,
                    path.display()
                ),
            }),
            Err(_) => problems.push(VerifyProblem {
                path: fixture.clone(),
                message: format!("missing (described by {})", path.display()),
            }),
        }
    }
    for path in &entries {
        let is_fixture = path.extension().is_some_and(|ext| ext == "md");
        if is_fixture && !described.contains(path) {
            problems.push(VerifyProblem {
                path: path.clone(),
                message: "pinned fixture without a .source.json (its provenance is unknown)"
                    .to_string(),
            });
        }
    }
    // Snapshots must reference fixtures that exist.
    let snapshots = root.join("fixtures/prompt-snapshots");
    let mut stack = vec![snapshots];
    while let Some(dir) = stack.pop() {
        for path in sorted_entries(&dir) {
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            for reference in fixture_references(&text) {
                if !root.join(DEFAULT_OUT_DIR).join(&reference).exists() {
                    problems.push(VerifyProblem {
                        path: path.clone(),
                        message: format!(
                            "references missing fixture codex-model-catalog/{reference}"
                        ),
                    });
                }
            }
        }
    }
    (verified, problems)
}

/// File names referenced as `codex-model-catalog/<name>` in a text.
fn fixture_references(text: &str) -> Vec<String> {
    let mut references = Vec::new();
    for (index, _) in text.match_indices("codex-model-catalog/") {
        let rest = &text[index + "codex-model-catalog/".len()..];
        let name: String = rest
            .chars()
            .take_while(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '.' | '-' | '_'))
            .collect();
        let name = name.trim_end_matches('.').to_string();
        if !name.is_empty() && !references.contains(&name) {
            references.push(name);
        }
    }
    references
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn w2_placeholder_and_missing_variable() {
        let entry = json!({"slug": "m", "model_messages": {"instructions_template": "A{{ personality }}B{{ personality }}",
            "instructions_variables": {"personality_pragmatic": "P"}}});
        let rendered = render_instructions(&entry, "m", Personality::Pragmatic).expect("render");
        assert_eq!(rendered.text, "APBP\n");
        assert_eq!(
            rendered.field,
            "model_messages.instructions_template + model_messages.instructions_variables.personality_pragmatic"
        );
        let friendly = render_instructions(&entry, "m", Personality::Friendly).expect("render");
        assert_eq!(friendly.text, "AB\n");
        assert_eq!(friendly.warnings.len(), 1);
    }

    #[test]
    fn w3_base_instructions_and_nothing() {
        let entry = json!({"slug": "m", "base_instructions": "Hello"});
        let rendered = render_instructions(&entry, "m", Personality::Pragmatic).expect("render");
        assert_eq!(
            (rendered.text.as_str(), rendered.field.as_str()),
            ("Hello\n", "base_instructions")
        );
        let error = render_instructions(&json!({"slug": "m"}), "m", Personality::Pragmatic)
            .expect_err("nothing to render");
        assert!(error.to_string().contains("no renderable instructions"));
    }

    #[test]
    fn template_is_kept_byte_for_byte() {
        let entry = json!({"slug": "m", "model_messages": {"instructions_template": "  keep\r\n  spaces  \n\n"}});
        let rendered = render_instructions(&entry, "m", Personality::Default).expect("render");
        assert_eq!(rendered.text, "  keep\r\n  spaces  \n\n");
    }

    #[test]
    fn discovery_order_and_dedup() {
        let env = DiscoveryEnv {
            codex_home: Some("  /ch  ".to_string()),
            home: Some(PathBuf::from("/home/u")),
        };
        assert_eq!(
            discovery_candidates(&env),
            vec![
                PathBuf::from("/ch/models_cache.json"),
                PathBuf::from("/home/u/.codex/models_cache.json"),
                PathBuf::from("/home/u/code/codex/codex-rs/models-manager/models.json"),
            ]
        );
        let unset = DiscoveryEnv {
            codex_home: Some("   ".to_string()),
            home: Some(PathBuf::from("/home/u")),
        };
        assert_eq!(
            discovery_candidates(&unset).len(),
            2,
            "empty CODEX_HOME falls back to ~/.codex once"
        );
    }

    #[test]
    fn references_are_found() {
        let text = "see `../codex-model-catalog/gpt-5.5.pragmatic.instructions.md`. and codex-model-catalog/x.md.";
        assert_eq!(
            fixture_references(text),
            vec!["gpt-5.5.pragmatic.instructions.md", "x.md"]
        );
    }
}

//! Conformance of params against a Codex version's own JSON Schema.
//!
//! Codex can describe its app-server protocol (`codex app-server generate-json-schema
//! --experimental --out DIR`); clawbridge checks `thread/start`, `thread/resume` and `turn/start`
//! params against the schema of the Codex that is actually running, not against a copy from
//! another version. Two kinds of problem are reported, each naming the field (a JSON pointer):
//!
//! - a value the schema refuses (wrong type, unknown enum value, a required key missing);
//! - a key the schema does not know. Codex's schemas do not forbid extra keys, so a misspelt or
//!   newer key would otherwise pass silently; Codex itself ignores it, which is exactly the
//!   silent loss this check exists to show.
//!
//! Generating the schema takes a Codex start, so [`SchemaCache`] keeps it per Codex version
//! under the user's cache folder (`~/.cache/clawbridge/codex-schema/<version>/`), written to a
//! temp folder beside it and renamed into place, so a crash never leaves half a schema.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use crate::support::process::run_bounded;

/// The methods whose params are checked, with the schema file of each.
pub const CHECKED_METHODS: [(&str, &str); 3] = [
    ("thread/start", "ThreadStartParams.json"),
    ("thread/resume", "ThreadResumeParams.json"),
    ("turn/start", "TurnStartParams.json"),
];

/// Largest schema file read (Codex 0.171.0's largest of these is about 60 KB).
const MAX_SCHEMA_BYTES: u64 = 16 * 1024 * 1024;
/// How long schema generation may take (one Codex start, no network).
const GENERATE_TIMEOUT: Duration = Duration::from_secs(60);
/// Problems reported per message at most (one broken message must not flood the log).
pub const MAX_PROBLEMS: usize = 32;

/// One thing a Codex version's schema says about params.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Problem {
    /// JSON pointer into the params, e.g. `/config/model_reasoning_summary`.
    pub field: String,
    pub kind: ProblemKind,
    /// What the schema says, in words.
    pub message: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ProblemKind {
    /// A key the schema has no property for (Codex ignores it).
    UnknownKey,
    /// A value the schema refuses.
    Invalid,
}

/// Why a schema could not be had.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error("cannot generate the schema of {binary}: {message}")]
    Generate { binary: String, message: String },
    #[error("schema {path}: {message}")]
    Load { path: PathBuf, message: String },
}

/// The compiled schemas of one Codex version, one per checked method.
pub struct ParamsSchemas {
    pub version: String,
    methods: Vec<(&'static str, Value, jsonschema::Validator)>,
}

impl std::fmt::Debug for ParamsSchemas {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ParamsSchemas")
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

impl ParamsSchemas {
    /// Load the three schema files from a generated folder (`DIR/v2/<Name>.json`).
    pub fn load(dir: &Path, version: &str) -> Result<Self, SchemaError> {
        let mut methods = Vec::new();
        for (method, file) in CHECKED_METHODS {
            let path = dir.join("v2").join(file);
            let load = |message: String| SchemaError::Load {
                path: path.clone(),
                message,
            };
            let bytes = crate::support::fs::read_capped_anywhere(&path, None, MAX_SCHEMA_BYTES)
                .map_err(|refusal| load(refusal.to_string()))?;
            let schema: Value =
                serde_json::from_slice(&bytes).map_err(|error| load(error.to_string()))?;
            let validator =
                jsonschema::validator_for(&schema).map_err(|error| load(error.to_string()))?;
            methods.push((method, schema, validator));
        }
        Ok(Self {
            version: version.to_string(),
            methods,
        })
    }

    /// Whether `method` is one this checks.
    pub fn checks(method: &str) -> bool {
        CHECKED_METHODS.iter().any(|(name, _)| *name == method)
    }

    /// The problems with `params` of `method` (empty when they conform, or when `method` is
    /// not checked). At most [`MAX_PROBLEMS`].
    pub fn check(&self, method: &str, params: &Value) -> Vec<Problem> {
        let Some((_, schema, validator)) = self.methods.iter().find(|(name, _, _)| *name == method)
        else {
            return Vec::new();
        };
        let mut problems: Vec<Problem> = validator
            .iter_errors(params)
            .map(|error| Problem {
                field: pointer_or_root(error.instance_path.to_string()),
                kind: ProblemKind::Invalid,
                message: error.to_string(),
            })
            .take(MAX_PROBLEMS)
            .collect();
        let mut unknown = Vec::new();
        unknown_keys(schema, schema, params, String::new(), &mut unknown, 0);
        problems.extend(unknown.into_iter().map(|field| Problem {
            message: format!("Codex {} has no such key; it is ignored", self.version),
            field,
            kind: ProblemKind::UnknownKey,
        }));
        problems.truncate(MAX_PROBLEMS);
        problems
    }
}

fn pointer_or_root(pointer: String) -> String {
    if pointer.is_empty() {
        "/".to_string()
    } else {
        pointer
    }
}

/// Deepest nesting walked (params are shallow; a hostile document must not recurse forever).
const MAX_DEPTH: usize = 64;

fn resolve<'a>(root: &'a Value, node: &'a Value, depth: usize) -> &'a Value {
    match node.get("$ref").and_then(Value::as_str) {
        Some(reference) if depth < MAX_DEPTH => {
            let name = reference
                .trim_start_matches("#/definitions/")
                .trim_start_matches("#/$defs/");
            let target = root
                .get("definitions")
                .and_then(|definitions| definitions.get(name))
                .or_else(|| root.get("$defs").and_then(|defs| defs.get(name)));
            match target {
                Some(target) => resolve(root, target, depth + 1),
                None => node,
            }
        }
        _ => node,
    }
}

/// The object-shaped branches of a node: itself and its `oneOf`/`anyOf`/`allOf` members.
fn branches<'a>(root: &'a Value, node: &'a Value, depth: usize) -> Vec<&'a Value> {
    let node = resolve(root, node, depth);
    let mut out = Vec::new();
    if depth >= MAX_DEPTH {
        return out;
    }
    for key in ["oneOf", "anyOf", "allOf"] {
        if let Some(members) = node.get(key).and_then(Value::as_array) {
            for member in members {
                out.extend(branches(root, member, depth + 1));
            }
        }
    }
    if node.get("properties").is_some() {
        out.push(node);
    }
    out
}

/// A branch whose `type` property is an enum matches only objects carrying one of its values
/// (Codex's tagged unions: `{"type": "text", ...}`).
fn branch_matches_type(branch: &Value, instance: &Map<String, Value>) -> bool {
    match (
        branch["properties"]["type"]["enum"].as_array(),
        instance.get("type"),
    ) {
        (Some(allowed), Some(actual)) => allowed.contains(actual),
        _ => true,
    }
}

/// Escape a key for a JSON pointer (RFC 6901).
fn pointer_token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Collect the pointers of keys no matching schema branch declares.
fn unknown_keys(
    root: &Value,
    node: &Value,
    instance: &Value,
    path: String,
    unknown: &mut Vec<String>,
    depth: usize,
) {
    if depth >= MAX_DEPTH || unknown.len() >= MAX_PROBLEMS {
        return;
    }
    match instance {
        Value::Object(map) => {
            let candidates: Vec<&Value> = branches(root, node, 0)
                .into_iter()
                .filter(|branch| branch_matches_type(branch, map))
                .collect();
            if candidates.is_empty() {
                return; // a free-form object (an input schema, config values)
            }
            let free_form = candidates.iter().any(|branch| {
                branch
                    .get("additionalProperties")
                    .is_some_and(|extra| extra.is_object() || extra == &Value::Bool(true))
            });
            for (key, value) in map {
                let child = format!("{path}/{}", pointer_token(key));
                match candidates
                    .iter()
                    .find_map(|branch| branch["properties"].get(key))
                {
                    Some(property) => {
                        unknown_keys(root, property, value, child, unknown, depth + 1);
                    }
                    None if free_form => {}
                    None => unknown.push(child),
                }
            }
        }
        Value::Array(items) => {
            let node = resolve(root, node, 0);
            let mut item_schemas = std::iter::once(node)
                .chain(branches(root, node, 0))
                .filter_map(|branch| branch.get("items"));
            let item_schema = item_schemas.next().or_else(|| {
                ["anyOf", "oneOf"].iter().find_map(|member| {
                    node.get(*member)
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .find_map(|alternative| resolve(root, alternative, 0).get("items"))
                })
            });
            if let Some(item_schema) = item_schema {
                for (index, item) in items.iter().enumerate() {
                    unknown_keys(
                        root,
                        item_schema,
                        item,
                        format!("{path}/{index}"),
                        unknown,
                        depth + 1,
                    );
                }
            }
        }
        _ => {}
    }
}

/// Generated schemas, one folder per Codex version, under a cache root.
#[derive(Clone, Debug)]
pub struct SchemaCache {
    root: PathBuf,
}

impl SchemaCache {
    /// `~/.cache/clawbridge/codex-schema` (`$XDG_CACHE_HOME` honoured), or `None` without a home.
    pub fn user() -> Option<Self> {
        dirs::cache_dir().map(|cache| Self::at(cache.join("clawbridge").join("codex-schema")))
    }

    pub fn at(root: PathBuf) -> Self {
        Self { root }
    }

    /// The folder of one version's schema.
    pub fn dir(&self, version: &str) -> PathBuf {
        let safe: String = version
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '+') {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        self.root.join(safe)
    }

    /// The schemas of `binary` (which reports `version`): from the cache, else generated by the
    /// binary into the cache first. Returns whether it was generated now.
    pub fn schemas_for(
        &self,
        binary: &Path,
        version: &str,
    ) -> Result<(ParamsSchemas, bool), SchemaError> {
        let dir = self.dir(version);
        if let Ok(schemas) = ParamsSchemas::load(&dir, version) {
            return Ok((schemas, false));
        }
        self.generate(binary, &dir)?;
        Ok((ParamsSchemas::load(&dir, version)?, true))
    }

    fn generate(&self, binary: &Path, dir: &Path) -> Result<(), SchemaError> {
        let failed = |message: String| SchemaError::Generate {
            binary: binary.display().to_string(),
            message,
        };
        std::fs::create_dir_all(&self.root)
            .map_err(|error| failed(format!("{}: {error}", self.root.display())))?;
        let temp = tempfile::Builder::new()
            .prefix(".generating-")
            .tempdir_in(&self.root)
            .map_err(|error| failed(format!("{}: {error}", self.root.display())))?;
        let mut command = std::process::Command::new(binary);
        command
            .args([
                "app-server",
                "generate-json-schema",
                "--experimental",
                "--out",
            ])
            .arg(temp.path());
        let output = run_bounded(command, b"", GENERATE_TIMEOUT, 64 * 1024)
            .map_err(|error| failed(error.to_string()))?;
        if !output.status.success() {
            return Err(failed(format!(
                "exited with {}: {}",
                output.status,
                output.stderr_tail.trim()
            )));
        }
        let generated = temp.keep();
        if std::fs::rename(&generated, dir).is_err() {
            // Another process may have cached the same version meanwhile (keep its copy when it
            // loads), or what is there is broken (replace it).
            let version = dir
                .file_name()
                .map(|name| name.to_string_lossy().into_owned());
            if ParamsSchemas::load(dir, version.as_deref().unwrap_or_default()).is_ok() {
                let _ = std::fs::remove_dir_all(&generated);
            } else {
                let _ = std::fs::remove_dir_all(dir);
                std::fs::rename(&generated, dir).map_err(|error| {
                    let _ = std::fs::remove_dir_all(&generated);
                    failed(format!(
                        "cannot move the schema into {}: {error}",
                        dir.display()
                    ))
                })?;
            }
        }
        Ok(())
    }
}

/// `codex-cli 0.169.0` (a `--version` line) -> `0.169.0`.
pub fn version_in(output: &str) -> Option<String> {
    output
        .split_whitespace()
        .find(|word| crate::codex::client::session::parse_semver(word).is_some())
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schemas() -> ParamsSchemas {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::create_dir_all(dir.path().join("v2")).expect("v2");
        let object = |properties: Value, required: Value| {
            json!({"type": "object", "properties": properties, "required": required,
                   "definitions": {"Input": {"oneOf": [
                       {"type": "object", "properties": {"type": {"enum": ["text"]}, "text": {"type": "string"}}},
                       {"type": "object", "properties": {"type": {"enum": ["image"]}, "url": {"type": "string"}}}]}}})
        };
        for (_, file) in CHECKED_METHODS {
            let schema = object(
                json!({"threadId": {"type": "string"}, "cwd": {"type": ["string", "null"]},
                       "input": {"type": "array", "items": {"$ref": "#/definitions/Input"}},
                       "config": {"type": ["object", "null"], "additionalProperties": true}}),
                json!(["threadId"]),
            );
            std::fs::write(dir.path().join("v2").join(file), schema.to_string()).expect("write");
        }
        ParamsSchemas::load(dir.path(), "9.9.9").expect("load")
    }

    #[test]
    fn unknown_keys_and_type_errors_name_the_field() {
        let schemas = schemas();
        let params = json!({"threadId": 3, "cwdd": "/w", "config": {"anything": 1},
            "input": [{"type": "text", "text": "hi", "txet": 1}, {"type": "image", "url": "u"}]});
        let problems = schemas.check("turn/start", &params);
        let fields: Vec<(&str, ProblemKind)> = problems
            .iter()
            .map(|problem| (problem.field.as_str(), problem.kind))
            .collect();
        assert!(
            fields.contains(&("/threadId", ProblemKind::Invalid)),
            "{problems:?}"
        );
        assert!(
            fields.contains(&("/cwdd", ProblemKind::UnknownKey)),
            "{problems:?}"
        );
        assert!(
            fields.contains(&("/input/0/txet", ProblemKind::UnknownKey)),
            "{problems:?}"
        );
        assert_eq!(
            fields.len(),
            3,
            "config is free-form, url belongs to image: {problems:?}"
        );
        assert!(problems[1].message.contains("9.9.9") || problems[0].message.contains("9.9.9"));
        assert!(schemas
            .check("turn/start", &json!({"threadId": "t", "input": []}))
            .is_empty());
        assert!(schemas.check("thread/list", &json!({"x": 1})).is_empty());
        assert!(ParamsSchemas::checks("thread/resume") && !ParamsSchemas::checks("initialize"));
    }

    #[test]
    fn a_missing_required_key_is_reported_at_the_root() {
        let problems = schemas().check("thread/start", &json!({}));
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].field, "/");
        assert!(problems[0].message.contains("threadId"), "{problems:?}");
    }

    /// A broken cached schema is generated again, not trusted.
    #[test]
    fn a_broken_cache_entry_is_replaced() {
        let dir = tempfile::tempdir().expect("dir");
        let cache = SchemaCache::at(dir.path().join("cache"));
        let broken = cache.dir("0.169.0").join("v2");
        std::fs::create_dir_all(&broken).expect("dir");
        std::fs::write(broken.join("TurnStartParams.json"), "{not json").expect("write");
        let fake = dir.path().join("fake-codex");
        let vendored = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/codex-schema/0.169.0");
        std::fs::write(&fake, format!("#!/bin/sh\ncp -r {vendored}/. \"$5\"\n")).expect("fake");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let (schemas, generated) = cache.schemas_for(&fake, "0.169.0").expect("schemas");
        assert!(generated, "regenerated");
        assert_eq!(schemas.version, "0.169.0");
        assert!(ParamsSchemas::load(&cache.dir("0.169.0"), "0.169.0").is_ok());
        let (_, again) = cache.schemas_for(&fake, "0.169.0").expect("schemas");
        assert!(!again, "then read from the cache");
    }

    #[test]
    fn version_lines_are_read() {
        assert_eq!(
            version_in("codex-cli 0.169.0\n").as_deref(),
            Some("0.169.0")
        );
        assert_eq!(version_in("nothing here"), None);
    }
}

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

pub mod conformance;
pub mod diff;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use crate::protocol::table::CodexMethod;
use clawbridge_support::process::run_bounded;

/// The methods whose params are checked, with the schema file of each (the method table's).
pub fn checked_methods() -> impl Iterator<Item = (&'static str, &'static str)> {
    CodexMethod::ALL
        .iter()
        .filter_map(|method| Some((method.name(), method.params_schema()?)))
}

/// Largest schema file read (Codex 0.171.0's largest of these is about 60 KB).
pub const MAX_SCHEMA_BYTES: u64 = 16 * 1024 * 1024;
/// How long schema generation may take (one Codex start, no network).
const GENERATE_TIMEOUT: Duration = Duration::from_secs(60);
/// Problems reported per message at most (one broken message must not flood the log).
pub const MAX_PROBLEMS: usize = 32;

/// One thing a Codex version's schema says about params.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Problem {
    /// JSON pointer into the params, e.g. `/config/model_reasoning_summary`.
    pub field: String,
    pub kind: ProblemKind,
    /// What the schema says, in words.
    pub message: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
        for (method, file) in checked_methods() {
            let path = dir.join("v2").join(file);
            let load = |message: String| SchemaError::Load {
                path: path.clone(),
                message,
            };
            let schema = read_schema_file(&path)?;
            if let Some(problem) = implausible(&schema, file) {
                return Err(load(problem));
            }
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
        checked_methods().any(|(name, _)| name == method)
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

/// A schema file of a generated folder, read as a regular file of at most
/// [`MAX_SCHEMA_BYTES`] and parsed (what it must hold is each caller's check).
pub fn read_schema_file(path: &Path) -> Result<Value, SchemaError> {
    let load = |message: String| SchemaError::Load {
        path: path.to_path_buf(),
        message,
    };
    let bytes = clawbridge_support::fs::read_capped_anywhere(path, None, MAX_SCHEMA_BYTES)
        .map_err(|refusal| load(refusal.to_string()))?;
    serde_json::from_slice(&bytes).map_err(|error| load(error.to_string()))
}

/// Why a schema file is not one Codex generated for its method: a planted permissive schema
/// (`{}`) would silence every warning, and a `$ref` cycle through `anyOf`/`oneOf`/`allOf` alone
/// (one that no instance key or item consumes) would make any validator recurse without end.
fn implausible(schema: &Value, file: &str) -> Option<String> {
    let name = file.trim_end_matches(".json");
    if schema.get("title").and_then(Value::as_str) != Some(name) {
        return Some(format!(
            "its title is not {name}: not a schema Codex generated"
        ));
    }
    let declared = schema
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|properties| !properties.is_empty());
    if schema.get("type").and_then(Value::as_str) != Some("object") || !declared {
        return Some("not an object schema with properties".into());
    }
    if let Some(name) = unproductive_cycle(schema) {
        return Some(format!(
            "the definition {name} refers to itself through anyOf/oneOf/allOf alone"
        ));
    }
    // A planted permissive entry (a title and some properties, each accepting anything) would
    // silence every warning: the fields clawbridge itself sends must be described, and the ones
    // Codex requires must be required, as every generated version has them.
    let (described, required) = essentials(name);
    let constraining = |key: &str| {
        schema["properties"].get(key).is_some_and(|property| {
            ["type", "$ref", "anyOf", "oneOf", "allOf", "enum", "const"]
                .iter()
                .any(|word| property.get(word).is_some())
        })
    };
    if let Some(key) = described.iter().find(|key| !constraining(key)) {
        return Some(format!(
            "it does not describe `{key}`: not a schema Codex generated"
        ));
    }
    let listed: Vec<&str> = schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if let Some(key) = required.iter().find(|key| !listed.contains(key)) {
        return Some(format!(
            "it does not require `{key}`: not a schema Codex generated"
        ));
    }
    None
}

/// Per checked params file: the fields clawbridge sends that a generated schema describes, and
/// the ones it requires (measured on Codex 0.169.0 and 0.171.0).
fn essentials(name: &str) -> (&'static [&'static str], &'static [&'static str]) {
    match name {
        "ThreadStartParams" => (
            &[
                "cwd",
                "model",
                "developerInstructions",
                "dynamicTools",
                "config",
            ],
            &[],
        ),
        "ThreadResumeParams" => (&["threadId", "cwd", "developerInstructions"], &["threadId"]),
        "TurnStartParams" => (
            &["threadId", "input", "collaborationMode"],
            &["threadId", "input"],
        ),
        "TurnSteerParams" => (
            &["threadId", "input", "expectedTurnId"],
            &["threadId", "input", "expectedTurnId"],
        ),
        _ => (&[], &[]),
    }
}

/// A definition reachable from itself through `$ref`, `anyOf`, `oneOf` and `allOf` only.
pub fn unproductive_cycle(root: &Value) -> Option<String> {
    let definitions = root
        .get("definitions")
        .or_else(|| root.get("$defs"))
        .and_then(Value::as_object)?;
    // The definitions each one reaches without consuming the instance.
    fn direct(node: &Value, out: &mut Vec<String>, budget: &mut usize) {
        if *budget == 0 {
            return;
        }
        *budget -= 1;
        if let Some(reference) = node.get("$ref").and_then(Value::as_str) {
            out.push(
                reference
                    .trim_start_matches("#/definitions/")
                    .trim_start_matches("#/$defs/")
                    .to_string(),
            );
        }
        for member in union_members(node) {
            direct(member, out, budget);
        }
    }
    let mut budget = 100_000usize;
    let edges: std::collections::HashMap<&str, Vec<String>> = definitions
        .iter()
        .map(|(name, node)| {
            let mut out = Vec::new();
            direct(node, &mut out, &mut budget);
            (name.as_str(), out)
        })
        .collect();
    // Depth-first search with colours (0 new, 1 on the stack, 2 done), iterative.
    let mut colour: std::collections::HashMap<&str, u8> = std::collections::HashMap::new();
    for start in edges.keys() {
        if colour.get(start).copied().unwrap_or(0) != 0 {
            continue;
        }
        let mut stack: Vec<(&str, usize)> = vec![(start, 0)];
        colour.insert(start, 1);
        while let Some((node, next)) = stack.pop() {
            let targets = edges.get(node).map(Vec::as_slice).unwrap_or_default();
            if let Some(target) = targets.get(next) {
                stack.push((node, next + 1));
                let Some((target, _)) = edges.get_key_value(target.as_str()) else {
                    continue;
                };
                match colour.get(target).copied().unwrap_or(0) {
                    1 => return Some((*target).to_string()),
                    0 => {
                        colour.insert(target, 1);
                        stack.push((target, 0));
                    }
                    _ => {}
                }
            } else {
                colour.insert(node, 2);
            }
        }
    }
    None
}

/// The members of a node's `anyOf`, `oneOf` and `allOf`, in that order.
pub fn union_members(node: &Value) -> impl Iterator<Item = &Value> {
    ["anyOf", "oneOf", "allOf"]
        .into_iter()
        .flat_map(move |key| {
            node.get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
        })
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

pub fn resolve<'a>(root: &'a Value, node: &'a Value, depth: usize) -> &'a Value {
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

/// Schema nodes one branch collection visits at most (a union of unions of a real schema is a
/// few dozen; a hostile fan-out would be exponential).
const MAX_BRANCH_VISITS: usize = 4096;

/// The object-shaped branches of a node: itself and its `oneOf`/`anyOf`/`allOf` members.
fn branches<'a>(root: &'a Value, node: &'a Value, depth: usize) -> Vec<&'a Value> {
    let mut out = Vec::new();
    let mut visits = MAX_BRANCH_VISITS;
    collect_branches(root, node, depth, &mut out, &mut visits);
    out
}

fn collect_branches<'a>(
    root: &'a Value,
    node: &'a Value,
    depth: usize,
    out: &mut Vec<&'a Value>,
    visits: &mut usize,
) {
    if depth >= MAX_DEPTH || *visits == 0 {
        return;
    }
    *visits -= 1;
    let node = resolve(root, node, depth);
    for key in ["oneOf", "anyOf", "allOf"] {
        if let Some(members) = node.get(key).and_then(Value::as_array) {
            for member in members {
                collect_branches(root, member, depth + 1, out, visits);
            }
        }
    }
    if node.get("properties").is_some() {
        out.push(node);
    }
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
pub fn unknown_keys(
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

fn is_link(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|meta| meta.file_type().is_symlink())
}

/// Generated schemas, one folder per Codex binary (version and hash), under a cache root.
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

    /// The folder of one Codex binary's schema: its version and 16 hex digits of the SHA-256 of
    /// the binary's identity (real path, size, modification time, device and inode), so an
    /// entry is used only for the very file that generated it, and a reinstalled or updated
    /// binary gets a new one. The identity, not the content: reading the ~300 MB binary on every
    /// proxy start would cost a second each, and a planted entry is refused by what it holds
    /// (`implausible`), not by its name.
    pub fn dir_for(&self, binary: &Path, version: &str) -> Result<PathBuf, SchemaError> {
        let failed = |error: std::io::Error| SchemaError::Generate {
            binary: binary.display().to_string(),
            message: format!("cannot read the binary's metadata: {error}"),
        };
        let real = binary.canonicalize().map_err(failed)?;
        let metadata = std::fs::metadata(&real).map_err(failed)?;
        let modified = metadata
            .modified()
            .ok()
            .and_then(|time| time.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |since| since.as_nanos());
        let mut identity = format!("{}\n{}\n{modified}", real.display(), metadata.len());
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            identity.push_str(&format!("\n{}:{}", metadata.dev(), metadata.ino()));
        }
        let hash = clawbridge_support::hex::sha256(identity.as_bytes(), 8);
        Ok(self.dir(&format!("{version}-{hash}")))
    }

    /// The folder of one cache key.
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
        let refused = |message: String| SchemaError::Load {
            path: self.root.clone(),
            message,
        };
        // A cache root or entry that is a link is not used (nor written through): a planted
        // `codex-schema -> /somewhere` must not receive files or feed the check.
        clawbridge_support::fs::create_private_dir(&self.root)
            .map_err(|error| refused(error.to_string()))?;
        if is_link(&self.root) {
            return Err(refused(
                "is a symbolic link; refusing to use it as the schema cache".into(),
            ));
        }
        let dir = self.dir_for(binary, version)?;
        if is_link(&dir) || is_link(&dir.join("v2")) {
            return Err(refused(format!(
                "{} is a symbolic link; refusing to use it",
                dir.display()
            )));
        }
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
        .find(|word| crate::client::session::parse_semver(word).is_some())
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
        for (_, file) in checked_methods() {
            // What every generated version requires of the file (`essentials`), and threadId.
            let (_, required) = essentials(file.trim_end_matches(".json"));
            let mut required: Vec<&str> = required.to_vec();
            if !required.contains(&"threadId") {
                required.push("threadId");
            }
            let mut schema = object(
                json!({"threadId": {"type": "string"}, "cwd": {"type": ["string", "null"]},
                       "input": {"type": "array", "items": {"$ref": "#/definitions/Input"}},
                       "config": {"type": ["object", "null"], "additionalProperties": true},
                       "model": {"type": ["string", "null"]},
                       "developerInstructions": {"type": ["string", "null"]},
                       "dynamicTools": {"type": ["array", "null"]},
                       "collaborationMode": {"type": ["object", "null"]},
                       "expectedTurnId": {"type": "string"}}),
                json!(required),
            );
            schema["title"] = json!(file.trim_end_matches(".json"));
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
        let fake = dir.path().join("fake-codex");
        let vendored = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/codex-schema/0.169.0"
        );
        std::fs::write(&fake, format!("#!/bin/sh\ncp -r {vendored}/. \"$5\"\n")).expect("fake");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let entry = cache.dir_for(&fake, "0.169.0").expect("key");
        let broken = entry.join("v2");
        std::fs::create_dir_all(&broken).expect("dir");
        std::fs::write(broken.join("TurnStartParams.json"), "{not json").expect("write");
        let (schemas, generated) = cache.schemas_for(&fake, "0.169.0").expect("schemas");
        assert!(generated, "regenerated");
        assert_eq!(schemas.version, "0.169.0");
        assert!(ParamsSchemas::load(&entry, "0.169.0").is_ok());
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

    /// Protection: a planted cache entry is not trusted. A permissive `{}` schema (which would
    /// silence every warning) and one whose definitions recurse through `anyOf` alone (which
    /// would make the check recurse without end) are refused and generated again; a symlinked
    /// cache root is not written through.
    #[test]
    fn planted_schemas_and_linked_cache_roots_are_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("dir");
        let vendored = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/codex-schema/0.169.0"
        );
        let fake = dir.path().join("fake-codex");
        std::fs::write(&fake, format!("#!/bin/sh\ncp -r {vendored}/. \"$5\"\n")).expect("fake");
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let cache = SchemaCache::at(dir.path().join("cache"));
        let entry = cache.dir_for(&fake, "0.169.0").expect("key");
        // A permissive entry: Codex's title and field names, each accepting anything.
        let permissive = serde_json::json!({"title": "ThreadStartParams", "type": "object",
            "properties": {"cwd": {}, "model": {}, "developerInstructions": {}, "dynamicTools": {}, "config": {}, "nonsense": {}}});
        let recursive = serde_json::json!({"title": "ThreadStartParams", "type": "object",
            "properties": {"x": {"$ref": "#/definitions/A"}},
            "definitions": {"A": {"anyOf": [{"$ref": "#/definitions/A"}, {"$ref": "#/definitions/B"}]},
                            "B": {"oneOf": [{"$ref": "#/definitions/A"}]}}});
        for planted in [serde_json::json!({}), recursive, permissive] {
            std::fs::create_dir_all(entry.join("v2")).expect("dir");
            for (_, file) in checked_methods() {
                // Each file with its own title, so only what it holds can give it away.
                let mut planted = planted.clone();
                if planted.get("title").is_some() {
                    planted["title"] = serde_json::json!(file.trim_end_matches(".json"));
                    for key in ["threadId", "input", "expectedTurnId"] {
                        planted["properties"][key] = serde_json::json!({});
                    }
                    planted["required"] =
                        serde_json::json!(["threadId", "input", "expectedTurnId"]);
                }
                std::fs::write(entry.join("v2").join(file), planted.to_string()).expect("plant");
            }
            let (schemas, generated) = cache.schemas_for(&fake, "0.169.0").expect("schemas");
            assert!(generated, "the planted entry was replaced: {planted}");
            let problems = schemas.check("thread/start", &serde_json::json!({"nonsense": 1}));
            assert!(!problems.is_empty(), "the real schema finds problems");
            std::fs::remove_dir_all(&entry).expect("clean");
        }
        let target = dir.path().join("elsewhere");
        std::fs::create_dir(&target).expect("target");
        let linked = dir.path().join("linked-cache");
        std::os::unix::fs::symlink(&target, &linked).expect("link");
        assert!(SchemaCache::at(linked)
            .schemas_for(&fake, "0.169.0")
            .is_err());
        assert_eq!(
            std::fs::read_dir(&target).expect("read").count(),
            0,
            "nothing written through"
        );
    }

    #[test]
    fn a_fan_out_of_unions_is_walked_within_a_budget() {
        // Each definition is a union of ten references to the next: 10^20 paths in all.
        let mut definitions = serde_json::Map::new();
        for level in 0..20 {
            let next = format!("#/definitions/D{}", level + 1);
            definitions.insert(
                format!("D{level}"),
                serde_json::json!({"anyOf": vec![serde_json::json!({"$ref": next}); 10]}),
            );
        }
        definitions.insert(
            "D20".into(),
            serde_json::json!({"type": "object", "properties": {"a": {}}}),
        );
        let root = serde_json::json!({"definitions": definitions});
        let node = serde_json::json!({"$ref": "#/definitions/D0"});
        let found = branches(&root, &node, 0);
        assert!(found.len() <= MAX_BRANCH_VISITS, "{}", found.len());
    }
}

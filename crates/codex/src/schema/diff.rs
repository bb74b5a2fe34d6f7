//! What a new Codex release changes for clawbridge: two generated schema folders compared for
//! the methods clawbridge sends, answers and reads ([`clawbridge_methods`]), field by field.
//!
//! Each message part (a request's params, an answer's result, a notification's params) is
//! flattened into field paths with a signature each (the JSON types, enum values, whether it is
//! required), walking `$ref`, unions (tagged variants get their tag in the path: `/input/[]<text>`)
//! and arrays (`[]`), bounded in depth and in nodes visited. Added fields are news; removed and
//! changed ones are what needs a look, since clawbridge sends or reads exactly these. Methods added
//! to or removed from the protocol as a whole are listed too. `clawbridge schema diff OLD NEW`
//! prints it; `scripts/codex-compat` runs it against the newest vendored folder.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::conformance::{clawbridge_methods, vendored_files, Flow, WireSchemas};
use super::{union_members, SchemaError};

/// Deepest field path followed (Codex's recursive types, such as JSON values, stop here).
const MAX_DEPTH: usize = 10;
/// Schema nodes visited per part at most.
const MAX_NODES: usize = 50_000;

/// The changes in one part of one method.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PartDiff {
    pub method: String,
    pub message: Flow,
    /// The part is in the old schema but not the new one (or the other way round).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing_in: Option<String>,
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// `(path, old signature, new signature)`.
    pub changed: Vec<(String, String, String)>,
}

/// Two schema folders compared.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SchemaDiff {
    pub old_version: String,
    pub new_version: String,
    /// Every vendored file is byte for byte the same.
    pub identical: bool,
    /// The vendored files whose bytes differ (or that one side lacks).
    pub files_differing: Vec<String>,
    pub methods_added: Vec<(Flow, String)>,
    pub methods_removed: Vec<(Flow, String)>,
    /// The parts of clawbridge's methods that changed.
    pub parts: Vec<PartDiff>,
}

impl SchemaDiff {
    /// Removals and changes in what clawbridge sends, answers or reads.
    pub fn breaking(&self) -> usize {
        self.parts
            .iter()
            .map(|part| {
                part.removed.len() + part.changed.len() + usize::from(part.missing_in.is_some())
            })
            .sum()
    }
}

fn resolve<'a>(root: &'a Value, node: &'a Value) -> &'a Value {
    super::resolve(root, node, 0)
}

/// A node's signature: its JSON types and enum values, its union members' too (resolved).
fn describe(root: &Value, node: &Value) -> String {
    let mut words: Vec<String> = Vec::new();
    let mut add = |node: &Value| {
        match node.get("type") {
            Some(Value::String(kind)) => words.push(kind.clone()),
            Some(Value::Array(kinds)) => {
                words.extend(kinds.iter().filter_map(Value::as_str).map(str::to_string))
            }
            _ => {}
        }
        if let Some(values) = node.get("enum").and_then(Value::as_array) {
            let mut values: Vec<String> = values.iter().map(Value::to_string).collect();
            values.sort();
            words.push(format!("enum[{}]", values.join(",")));
        }
    };
    let node = resolve(root, node);
    add(node);
    for member in union_members(node) {
        add(resolve(root, member));
    }
    words.sort();
    words.dedup();
    if words.is_empty() {
        "any".into()
    } else {
        words.join("|")
    }
}

/// The branches of a node that have properties, with the tag of a tagged variant.
fn branches<'a>(
    root: &'a Value,
    node: &'a Value,
    out: &mut Vec<(Option<String>, &'a Value)>,
    budget: &mut usize,
    depth: usize,
) {
    if *budget == 0 || depth > 8 {
        return;
    }
    *budget -= 1;
    let node = resolve(root, node);
    if node.get("properties").is_some() {
        let tag = node["properties"]["type"]["enum"]
            .as_array()
            .and_then(|values| values.first())
            .and_then(Value::as_str)
            .map(str::to_string);
        out.push((tag, node));
    }
    for member in union_members(node) {
        branches(root, member, out, budget, depth + 1);
    }
}

/// Flatten a part into `path -> signature`.
fn flatten(
    root: &Value,
    node: &Value,
    path: &str,
    out: &mut BTreeMap<String, String>,
    depth: usize,
    budget: &mut usize,
) {
    if depth >= MAX_DEPTH || *budget == 0 {
        return;
    }
    let mut found = Vec::new();
    branches(root, node, &mut found, budget, 0);
    for (tag, branch) in found {
        let base = match &tag {
            Some(tag) if path.ends_with("[]") || path.is_empty() => format!("{path}<{tag}>"),
            Some(tag) => format!("{path}<{tag}>"),
            None => path.to_string(),
        };
        let required: Vec<&str> = branch["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        for (key, property) in branch["properties"].as_object().into_iter().flatten() {
            // Every property visited is charged: a type that holds itself under many names
            // fans out as (names ^ depth) otherwise (once, 710 MB for a 206 KiB file).
            if *budget == 0 {
                return;
            }
            *budget -= 1;
            let child = format!("{base}/{key}");
            let mut signature = describe(root, property);
            if required.contains(&key.as_str()) {
                signature.push_str(" (required)");
            }
            out.insert(child.clone(), signature);
            flatten(root, property, &child, out, depth + 1, budget);
        }
    }
    let resolved = resolve(root, node);
    let mut item_nodes: Vec<&Value> = resolved.get("items").into_iter().collect();
    for key in ["anyOf", "oneOf"] {
        for member in resolved
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            item_nodes.extend(resolve(root, member).get("items"));
        }
    }
    for items in item_nodes {
        flatten(root, items, &format!("{path}/[]"), out, depth + 1, budget);
    }
}

fn fields(schemas: &WireSchemas, flow: Flow, method: &str) -> Option<BTreeMap<String, String>> {
    let (root, node) = schemas.part(flow, method)?;
    let mut out = BTreeMap::new();
    let mut budget = MAX_NODES;
    out.insert(String::new(), describe(&root, &node));
    flatten(&root, &node, "", &mut out, 0, &mut budget);
    Some(out)
}

/// The version a schema folder is named after (its last path component).
fn folder_version(dir: &Path) -> String {
    dir.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string())
}

/// A schema file's bytes to compare: a regular file of at most the schema cap, else `None` (a
/// FIFO must not hang the diff, nor `/dev/zero` fill memory).
fn read_capped(path: &Path) -> Option<Vec<u8>> {
    clawbridge_support::fs::read_capped_anywhere(path, None, super::MAX_SCHEMA_BYTES).ok()
}

/// Compare two generated (or vendored) schema folders.
pub fn diff(old: &Path, new: &Path) -> Result<SchemaDiff, SchemaError> {
    let old_schemas = WireSchemas::load(old, &folder_version(old))?;
    let new_schemas = WireSchemas::load(new, &folder_version(new))?;
    let files_differing: Vec<String> = vendored_files()
        .iter()
        .filter(|file| read_capped(&old.join(file)) != read_capped(&new.join(file)))
        .map(|file| (*file).to_string())
        .collect();
    let old_methods = old_schemas.methods();
    let new_methods = new_schemas.methods();
    let methods_added = new_methods
        .iter()
        .filter(|method| !old_methods.contains(method))
        .cloned()
        .collect();
    let methods_removed = old_methods
        .iter()
        .filter(|method| !new_methods.contains(method))
        .cloned()
        .collect();
    let mut parts = Vec::new();
    for (flow, method) in clawbridge_methods() {
        let mut flows = vec![flow];
        match flow {
            Flow::Request => flows.push(Flow::Response),
            Flow::ServerRequest => flows.push(Flow::ServerRequestAnswer),
            _ => {}
        }
        for flow in flows {
            let (before, after) = (
                fields(&old_schemas, flow, method),
                fields(&new_schemas, flow, method),
            );
            let mut part = PartDiff {
                method: method.to_string(),
                message: flow,
                missing_in: None,
                added: Vec::new(),
                removed: Vec::new(),
                changed: Vec::new(),
            };
            match (before, after) {
                (Some(before), Some(after)) => {
                    for (path, signature) in &after {
                        match before.get(path) {
                            None => part.added.push(format!("{path} ({signature})")),
                            Some(old) if old != signature => {
                                part.changed
                                    .push((path.clone(), old.clone(), signature.clone()))
                            }
                            Some(_) => {}
                        }
                    }
                    part.removed = before
                        .iter()
                        .filter(|(path, _)| !after.contains_key(*path))
                        .map(|(path, signature)| format!("{path} ({signature})"))
                        .collect();
                }
                (Some(_), None) => part.missing_in = Some(new_schemas.version.clone()),
                (None, Some(_)) => {}
                (None, None) => continue,
            }
            if part.missing_in.is_some()
                || !part.added.is_empty()
                || !part.removed.is_empty()
                || !part.changed.is_empty()
            {
                parts.push(part);
            }
        }
    }
    Ok(SchemaDiff {
        old_version: old_schemas.version,
        new_version: new_schemas.version,
        identical: files_differing.is_empty(),
        files_differing,
        methods_added,
        methods_removed,
        parts,
    })
}

/// The diff for people.
pub fn render(diff: &SchemaDiff) -> String {
    let mut out = format!(
        "Codex schema {} -> {}: what clawbridge sends, answers and reads\n",
        diff.old_version, diff.new_version
    );
    if diff.identical {
        out.push_str("identical: every vendored file is the same, byte for byte\n");
        return out;
    }
    let list = |methods: &[(Flow, String)]| {
        methods
            .iter()
            .map(|(flow, method)| format!("{method} ({})", flow.as_str()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    out.push_str(&format!(
        "protocol methods: {} added, {} removed\n",
        diff.methods_added.len(),
        diff.methods_removed.len()
    ));
    if !diff.methods_added.is_empty() {
        out.push_str(&format!("  added: {}\n", list(&diff.methods_added)));
    }
    if !diff.methods_removed.is_empty() {
        out.push_str(&format!("  removed: {}\n", list(&diff.methods_removed)));
    }
    if diff.parts.is_empty() {
        out.push_str("clawbridge's methods: no field added, removed or changed\n");
    }
    for part in &diff.parts {
        let what = match part.message {
            Flow::Response | Flow::ServerRequestAnswer => "answer",
            _ => "params",
        };
        out.push_str(&format!(
            "{} {what}: {} added, {} removed, {} changed{}\n",
            part.method,
            part.added.len(),
            part.removed.len(),
            part.changed.len(),
            part.missing_in
                .as_ref()
                .map(|version| format!(" (gone in {version})"))
                .unwrap_or_default()
        ));
        for path in &part.added {
            out.push_str(&format!("  + {path}\n"));
        }
        for path in &part.removed {
            out.push_str(&format!("  - {path}\n"));
        }
        for (path, old, new) in &part.changed {
            out.push_str(&format!("  ~ {path}: {old} -> {new}\n"));
        }
    }
    out.push_str(&format!(
        "files that differ: {}\n",
        diff.files_differing.join(", ")
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vendored(version: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/codex-schema")
            .join(version)
    }

    /// Protection: a type that contains itself (Codex's JSON values do) and a wide fan-out of
    /// unions are flattened within the depth and node bounds, not forever.
    #[test]
    fn recursive_and_fanned_out_schemas_are_walked_within_bounds() {
        let mut definitions = serde_json::Map::new();
        definitions.insert(
            "Node".into(),
            serde_json::json!({"type": "object", "properties": {
                "child": {"$ref": "#/definitions/Node"},
                "items": {"type": "array", "items": {"$ref": "#/definitions/Node"}},
                "either": {"anyOf": vec![serde_json::json!({"$ref": "#/definitions/Node"}); 8]}}}),
        );
        let root = serde_json::json!({"definitions": definitions});
        let node = serde_json::json!({"$ref": "#/definitions/Node"});
        let mut out = BTreeMap::new();
        let mut budget = MAX_NODES;
        flatten(&root, &node, "", &mut out, 0, &mut budget);
        assert!(
            out.contains_key("/child/child"),
            "{:?}",
            out.keys().take(5).collect::<Vec<_>>()
        );
        assert!(
            out.keys()
                .all(|path| path.matches('/').count() <= MAX_DEPTH),
            "no path deeper than the bound"
        );
        assert!(out.len() < MAX_NODES, "{}", out.len());
    }

    /// Protection: a type that holds itself under 64 names is walked within the node budget
    /// (every property visited is charged), not as 64 ^ depth paths.
    #[test]
    fn a_self_referencing_type_with_many_properties_stays_within_the_budget() {
        let properties: serde_json::Map<String, Value> = (0..64)
            .map(|index| {
                (
                    format!("p{index}"),
                    serde_json::json!({"$ref": "#/definitions/Node"}),
                )
            })
            .collect();
        let root = serde_json::json!({"definitions": {"Node": {"type": "object", "properties": properties}}});
        let node = serde_json::json!({"$ref": "#/definitions/Node"});
        let mut out = BTreeMap::new();
        let mut budget = MAX_NODES;
        flatten(&root, &node, "", &mut out, 0, &mut budget);
        assert!(out.len() <= MAX_NODES, "{}", out.len());
        assert!(out.contains_key("/p0/p0"), "the walk went in");
    }

    #[test]
    fn a_folder_against_itself_is_identical() {
        let diff = diff(&vendored("0.169.0"), &vendored("0.169.0")).expect("diff");
        assert!(diff.identical && diff.parts.is_empty() && diff.breaking() == 0);
        assert!(render(&diff).contains("identical"));
    }

    /// A field clawbridge sends, removed from a copy of the schema, and one added, are found.
    #[test]
    fn removed_and_added_fields_are_named() {
        let dir = tempfile::tempdir().expect("dir");
        let copy = dir.path().join("9.9.9");
        for file in vendored_files() {
            let target = copy.join(file);
            std::fs::create_dir_all(target.parent().expect("parent")).expect("mkdir");
            std::fs::copy(vendored("0.169.0").join(file), &target).expect("copy");
        }
        let path = copy.join("ClientRequest.json");
        let mut union: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
        let properties = union["definitions"]["TurnStartParams"]["properties"]
            .as_object_mut()
            .expect("properties");
        assert!(
            properties.remove("effort").is_some(),
            "0.169.0 has turn/start effort"
        );
        properties.insert("shiny".into(), serde_json::json!({"type": "string"}));
        std::fs::write(&path, union.to_string()).expect("write");
        let diff = diff(&vendored("0.169.0"), &copy).expect("diff");
        assert!(!diff.identical);
        assert_eq!(diff.files_differing, ["ClientRequest.json"]);
        let part = diff
            .parts
            .iter()
            .find(|part| part.method == "turn/start" && part.message == Flow::Request)
            .expect("turn/start params changed");
        assert!(
            part.removed.iter().any(|path| path.starts_with("/effort ")),
            "{part:?}"
        );
        assert!(
            part.added.iter().any(|path| path == "/shiny (string)"),
            "{part:?}"
        );
        assert!(diff.breaking() >= 1);
        let text = render(&diff);
        assert!(text.contains("- /effort"), "{text}");
    }
}

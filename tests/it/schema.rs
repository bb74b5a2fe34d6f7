//! Params are valid against Codex 0.169.0's generated JSON Schema (experimental bundle, vendored
//! under fixtures/codex-schema/), and every key we emit is a property the schema knows: the schema
//! does not forbid extra keys, so a misspelt key would otherwise pass.

use std::path::Path;

use serde_json::{json, Map, Value};

use crate::util::*;

fn load_schema(name: &str) -> Value {
    let path = repo_root()
        .join("fixtures/codex-schema/0.169.0/v2")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("schema json")
}

fn validate(schema_name: &str, instance: &Value) {
    let schema = load_schema(schema_name);
    let validator = jsonschema::validator_for(&schema).expect("compile schema");
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .map(|error| format!("{} at {}", error, error.instance_path))
        .collect();
    assert!(errors.is_empty(), "{schema_name}: {errors:#?}");
    let mut unknown = Vec::new();
    known_keys(&schema, &schema, instance, String::new(), &mut unknown);
    assert!(
        unknown.is_empty(),
        "{schema_name}: keys the schema does not know: {unknown:?}"
    );
}

fn resolve<'a>(root: &'a Value, node: &'a Value) -> &'a Value {
    match node.get("$ref").and_then(Value::as_str) {
        Some(reference) => {
            let name = reference.trim_start_matches("#/definitions/");
            resolve(root, &root["definitions"][name])
        }
        None => node,
    }
}

/// Object branches of a node (itself, or its oneOf/anyOf/allOf members).
fn branches<'a>(root: &'a Value, node: &'a Value) -> Vec<&'a Value> {
    let node = resolve(root, node);
    let mut out = Vec::new();
    for key in ["oneOf", "anyOf", "allOf"] {
        if let Some(members) = node.get(key).and_then(Value::as_array) {
            for member in members {
                out.extend(branches(root, member));
            }
        }
    }
    if node.get("properties").is_some() {
        out.push(node);
    }
    out
}

fn known_keys(
    root: &Value,
    node: &Value,
    instance: &Value,
    path: String,
    unknown: &mut Vec<String>,
) {
    match instance {
        Value::Object(map) => {
            let candidates: Vec<&Value> = branches(root, node)
                .into_iter()
                .filter(|branch| branch_matches_type(branch, map))
                .collect();
            if candidates.is_empty() {
                return; // free-form object (e.g. inputSchema, config values)
            }
            for (key, value) in map {
                let property = candidates
                    .iter()
                    .find_map(|branch| branch["properties"].get(key));
                match property {
                    Some(property) => {
                        known_keys(root, property, value, format!("{path}.{key}"), unknown)
                    }
                    None => unknown.push(format!("{path}.{key}")),
                }
            }
        }
        Value::Array(items) => {
            let node = resolve(root, node);
            for branch in std::iter::once(node).chain(branches(root, node)) {
                if let Some(item_schema) = branch.get("items") {
                    for (index, item) in items.iter().enumerate() {
                        known_keys(root, item_schema, item, format!("{path}[{index}]"), unknown);
                    }
                    return;
                }
            }
            for member in ["anyOf", "oneOf"] {
                for alternative in node
                    .get(member)
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let alternative = resolve(root, alternative);
                    if let Some(item_schema) = alternative.get("items") {
                        for (index, item) in items.iter().enumerate() {
                            known_keys(
                                root,
                                item_schema,
                                item,
                                format!("{path}[{index}]"),
                                unknown,
                            );
                        }
                        return;
                    }
                }
            }
        }
        _ => {}
    }
}

/// A branch whose `type` property is an enum matches only instances carrying one of its values.
fn branch_matches_type(branch: &Value, instance: &Map<String, Value>) -> bool {
    match (
        branch["properties"]["type"]["enum"].as_array(),
        instance.get("type"),
    ) {
        (Some(allowed), Some(actual)) => allowed.contains(actual),
        _ => true,
    }
}

fn check_run(path: &Path) {
    let run = clawbridge::config::Run::load(path).expect("run");
    let params = params_json(&run);
    if let Some(start) = params.get("threadStart") {
        validate("ThreadStartParams.json", start);
    }
    if let Some(resume) = params.get("threadResume") {
        validate("ThreadResumeParams.json", resume);
    }
    validate("TurnStartParams.json", &params["turnStart"]);
    assert_eq!(params["experimentalApi"], true);
}

#[test]
fn every_bundled_run_produces_schema_valid_params() {
    let dir = repo_root().join("fixtures/runs");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).expect("runs dir") {
        let path = entry.expect("entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let document: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
        if document.get("harness").and_then(Value::as_str) == Some("embedded") {
            continue;
        }
        check_run(&path);
        checked += 1;
    }
    assert!(checked >= 5, "checked {checked} runs");
}

#[test]
fn resume_and_other_sandboxes_are_schema_valid() {
    let ws = TestWorkspace::full();
    for (sandbox, approval) in [
        ("read-only", "untrusted"),
        ("workspace-write", "on-request"),
        ("danger-full-access", "never"),
    ] {
        let run = run_with(
            &ws.path(),
            json!({"threadId": "thr_123", "sandbox": sandbox, "approvalPolicy": approval, "thinking": "off",
                   "model": "acme/gpt-x", "tools": [tool("message"), tool("cron")]}),
        );
        let params = params_json(&run);
        validate("ThreadResumeParams.json", &params["threadResume"]);
        validate("TurnStartParams.json", &params["turnStart"]);
        assert_eq!(params["threadResume"]["modelProvider"], "acme");
        assert!(params["turnStart"].get("effort").is_none());
    }
}

#[test]
fn the_key_check_catches_a_misspelt_key() {
    let schema = load_schema("TurnStartParams.json");
    let mut unknown = Vec::new();
    let instance = json!({"threadId": "t", "input": [], "colaborationMode": {}});
    known_keys(&schema, &schema, &instance, String::new(), &mut unknown);
    assert_eq!(unknown, vec![".colaborationMode"]);
    let mut unknown = Vec::new();
    let instance =
        json!({"threadId": "t", "input": [{"type": "text", "text": "x", "text_elemnts": []}]});
    known_keys(&schema, &schema, &instance, String::new(), &mut unknown);
    assert_eq!(unknown, vec![".input[0].text_elemnts"]);
}

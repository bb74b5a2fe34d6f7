//! Params are valid against Codex 0.169.0's generated JSON Schema (experimental bundle, vendored
//! under fixtures/codex-schema/), and every key we emit is a property the schema knows: the schema
//! does not forbid extra keys, so a misspelt key would otherwise pass.

use std::path::Path;

use clawbridge::{ParamsSchemas, ProblemKind};
use serde_json::{json, Value};

use crate::util::*;

/// The schema folders params are checked against: every vendored Codex version
/// (`fixtures/codex-schema/<version>`, written by `scripts/regen-codex-schema`) and, when
/// `CLAWBRIDGE_CODEX_SCHEMA_DIR` is set, a schema generated from the Codex binary under test
/// (`scripts/test-codex` sets it).
fn schema_dirs() -> Vec<(String, std::path::PathBuf)> {
    let mut dirs: Vec<(String, std::path::PathBuf)> =
        std::fs::read_dir(repo_root().join("fixtures/codex-schema"))
            .expect("fixtures/codex-schema")
            .map(|entry| entry.expect("entry").path())
            .filter(|path| path.join("v2").is_dir())
            .map(|path| {
                let name = path
                    .file_name()
                    .expect("name")
                    .to_string_lossy()
                    .into_owned();
                (name, path)
            })
            .collect();
    dirs.sort();
    if let Some(generated) = std::env::var_os("CLAWBRIDGE_CODEX_SCHEMA_DIR") {
        dirs.push(("generated".into(), generated.into()));
    }
    assert!(
        dirs.iter()
            .any(|(name, _)| name == clawbridge::PINNED_CODEX_VERSION)
            && dirs
                .iter()
                .any(|(name, _)| { name == clawbridge::NEWEST_TESTED_CODEX_VERSION }),
        "the pinned and the newest tested Codex versions are vendored: {dirs:?}"
    );
    dirs
}

/// The method whose params a schema file describes.
fn method_of_schema(schema_name: &str) -> &'static str {
    match schema_name {
        "ThreadStartParams.json" => "thread/start",
        "ThreadResumeParams.json" => "thread/resume",
        "TurnStartParams.json" => "turn/start",
        "TurnSteerParams.json" => "turn/steer",
        other => panic!("no method for {other}"),
    }
}

/// Valid against every Codex version's schema, and no key a version does not know: the check
/// `clawbridge app-server` runs on OpenClaw's params (`codex::schema`).
fn validate(schema_name: &str, instance: &Value) {
    for (version, dir) in schema_dirs() {
        let schemas = ParamsSchemas::load(&dir, &version).expect("compile the schemas");
        let problems = schemas.check(method_of_schema(schema_name), instance);
        let invalid: Vec<String> = problems
            .iter()
            .filter(|problem| problem.kind == ProblemKind::Invalid)
            .map(|problem| format!("{} at {}", problem.message, problem.field))
            .collect();
        assert!(
            invalid.is_empty(),
            "Codex {version} {schema_name}: {invalid:#?}"
        );
        let unknown: Vec<&str> = problems
            .iter()
            .filter(|problem| problem.kind == ProblemKind::UnknownKey)
            .map(|problem| problem.field.as_str())
            .collect();
        assert!(
            unknown.is_empty(),
            "Codex {version} {schema_name}: keys the schema does not know: {unknown:?}"
        );
    }
}

/// The unknown keys the pinned Codex's schema finds in `instance`.
fn unknown_keys(schema_name: &str, instance: &Value) -> Vec<String> {
    let dir = repo_root()
        .join("fixtures/codex-schema")
        .join(clawbridge::PINNED_CODEX_VERSION);
    let schemas =
        ParamsSchemas::load(&dir, clawbridge::PINNED_CODEX_VERSION).expect("compile the schemas");
    schemas
        .check(method_of_schema(schema_name), instance)
        .into_iter()
        .filter(|problem| problem.kind == ProblemKind::UnknownKey)
        .map(|problem| problem.field)
        .collect()
}

fn check_run(path: &Path) {
    let run = clawbridge::Run::load(path).expect("run");
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
    let instance = json!({"threadId": "t", "input": [], "colaborationMode": {}});
    assert_eq!(
        unknown_keys("TurnStartParams.json", &instance),
        vec!["/colaborationMode"]
    );
    let instance =
        json!({"threadId": "t", "input": [{"type": "text", "text": "x", "text_elemnts": []}]});
    assert_eq!(
        unknown_keys("TurnStartParams.json", &instance),
        vec!["/input/0/text_elemnts"]
    );
}

// ---------------------------------------------------------------------------------------------
// The run document's own schema (docs/run-document.schema.json)
// ---------------------------------------------------------------------------------------------

fn run_document_schema() -> Value {
    let (code, stdout, stderr) = run_cli(&["schema", "run-document"]);
    assert_eq!(code, 0, "{stderr}");
    serde_json::from_str(&stdout).expect("schema json")
}

#[test]
fn the_committed_run_document_schema_is_the_generated_one() {
    let committed = std::fs::read_to_string(repo_root().join("docs/run-document.schema.json"))
        .expect("docs/run-document.schema.json");
    let (_, generated, _) = run_cli(&["schema", "run-document"]);
    assert_eq!(
        committed, generated,
        "docs/run-document.schema.json is stale: run `clawbridge schema run-document > docs/run-document.schema.json`"
    );
}

#[test]
fn every_fixture_run_document_validates_and_bad_ones_do_not() {
    let schema = run_document_schema();
    let validator = jsonschema::validator_for(&schema).expect("compile the run-document schema");
    let runs = repo_root().join("fixtures/runs");
    let mut checked = 0;
    for entry in std::fs::read_dir(&runs).expect("fixtures/runs") {
        let path = entry.expect("entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let document: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
        let errors: Vec<String> = validator
            .iter_errors(&document)
            .map(|error| format!("{error} at {}", error.instance_path))
            .collect();
        assert!(errors.is_empty(), "{}: {errors:#?}", path.display());
        checked += 1;
    }
    assert!(checked >= 5, "only {checked} fixture run documents");
    // What `Run::load` refuses for its structure, the schema refuses too.
    let dir = tempfile::tempdir().expect("dir");
    for bad in [
        json!({"workspace": ".", "sesionKey": "typo"}),
        json!({"workspace": ".", "sandbox": "everything"}),
        json!({"workspace": ".", "channel": {"chatType": "broadcast"}}),
        json!({"workspace": ".", "tools": [{"name": "t", "inputSchema": {}, "extra": 1}]}),
        json!({"workspace": ".", "lightweight": "yes"}),
        json!({"message": "no workspace"}),
    ] {
        assert!(!validator.is_valid(&bad), "the schema accepts {bad}");
        let path = dir.path().join("run.json");
        std::fs::write(&path, bad.to_string()).expect("write");
        let (code, _, _) = run_cli(&["params", path.to_str().expect("utf-8")]);
        assert_ne!(code, 0, "params accepts {bad}");
    }
    assert!(validator.is_valid(&json!({"workspace": ".", "tools": ["tools.json", {"name": "t"}]})));
    // An editor's `$schema` key is part of the contract: valid, and ignored by clawbridge.
    let with_schema = json!({"$schema": "../docs/run-document.schema.json", "workspace": "."});
    assert!(validator.is_valid(&with_schema));
    let path = dir.path().join("run.json");
    std::fs::write(&path, with_schema.to_string()).expect("write");
    let (code, _, stderr) = run_cli(&["params", path.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{stderr}");
}

// ---------------------------------------------------------------------------------------------
// The bridge API's OpenRPC document (docs/openrpc.json)
// ---------------------------------------------------------------------------------------------

#[test]
fn the_committed_openrpc_document_is_the_generated_one() {
    let committed =
        std::fs::read_to_string(repo_root().join("docs/openrpc.json")).expect("docs/openrpc.json");
    let (code, generated, stderr) = run_cli(&["schema", "openrpc"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        committed, generated,
        "docs/openrpc.json is stale: run `clawbridge schema openrpc > docs/openrpc.json`"
    );
}

/// A validator for one schema of the OpenRPC document, its `#/components/schemas/...` references
/// resolved against the document.
pub fn openrpc_validator(document: &Value, schema: &Value) -> jsonschema::Validator {
    let mut root = schema.clone();
    if let Some(object) = root.as_object_mut() {
        object.insert("components".into(), document["components"].clone());
    } else {
        root = json!({"allOf": [schema], "components": document["components"]});
    }
    jsonschema::validator_for(&root).expect("compile an OpenRPC schema")
}

pub fn assert_valid(document: &Value, schema: &Value, instance: &Value, what: &str) {
    let validator = openrpc_validator(document, schema);
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .map(|error| format!("{error} at {}", error.instance_path))
        .collect();
    assert!(errors.is_empty(), "{what}: {errors:#?}\n{instance}");
}

pub fn method_of<'a>(document: &'a Value, name: &str) -> &'a Value {
    document["methods"]
        .as_array()
        .and_then(|methods| methods.iter().find(|method| method["name"] == name))
        .unwrap_or_else(|| panic!("{name} is not in the OpenRPC document"))
}

/// The `turn/steer` params clawbridge sends are valid against every vendored Codex version's
/// schema, with no key a version does not know.
#[test]
fn steer_params_are_schema_valid() {
    let params = clawbridge::TurnSteerParams {
        thread_id: "t1".into(),
        expected_turn_id: "u1".into(),
        input: vec![clawbridge::UserInput::Text {
            text: "also check the tests".into(),
            text_elements: Vec::new(),
        }],
    };
    validate(
        "TurnSteerParams.json",
        &serde_json::to_value(&params).expect("json"),
    );
}

/// Each vendored schema folder holds exactly the files clawbridge sends or reads
/// (`vendored_files()`, which `scripts/regen-codex-schema` copies and `scripts/codex-compat`
/// diffs).
#[test]
fn vendored_schema_folders_hold_the_listed_files() {
    for (version, dir) in schema_dirs() {
        if version == "generated" {
            continue;
        }
        let mut found: Vec<String> = Vec::new();
        let mut stack = vec![dir.clone()];
        while let Some(folder) = stack.pop() {
            for entry in std::fs::read_dir(&folder).expect("read") {
                let path = entry.expect("entry").path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    let relative = path.strip_prefix(&dir).expect("inside");
                    found.push(relative.to_string_lossy().into_owned());
                }
            }
        }
        found.sort();
        let mut listed: Vec<String> = clawbridge::vendored_files()
            .iter()
            .map(|file| file.to_string())
            .collect();
        listed.sort();
        assert_eq!(found, listed, "fixtures/codex-schema/{version}");
    }
}

/// Every request's answer and every server request's answer has a schema the proxy can check
/// it against: in a full generated folder (`scripts/test-codex` sets
/// `CLAWBRIDGE_CODEX_SCHEMA_DIR`), for every method; in the vendored folders, for the methods
/// clawbridge itself sends and answers.
#[test]
fn every_method_s_answer_has_a_schema() {
    use clawbridge::{Flow, WireSchemas};
    let ours = [
        "initialize",
        "thread/start",
        "thread/resume",
        "turn/start",
        "turn/steer",
        "turn/interrupt",
        "item/tool/call",
        "item/commandExecution/requestApproval",
        "item/fileChange/requestApproval",
        "execCommandApproval",
        "applyPatchApproval",
        "item/tool/requestUserInput",
        "mcpServer/elicitation/request",
    ];
    for (version, dir) in schema_dirs() {
        let schemas = WireSchemas::load(&dir, &version).expect("load the unions");
        let mut missing = Vec::new();
        let mut checked = 0;
        for flow in [Flow::Response, Flow::ServerRequestAnswer] {
            for (method, answer) in schemas.answer_types(flow) {
                if version != "generated" && !ours.contains(&method.as_str()) {
                    continue;
                }
                checked += 1;
                if answer.is_none()
                    && !clawbridge::answers_without_schema().contains(&method.as_str())
                {
                    missing.push(method);
                }
            }
        }
        assert!(
            missing.is_empty(),
            "Codex {version}: no answer schema for {missing:?}"
        );
        let least = if version == "generated" {
            150
        } else {
            ours.len()
        };
        assert!(checked >= least, "Codex {version}: {checked} methods");
    }
}

/// What clawbridge sends passes the whole-message check the proxy runs, for every Codex version:
/// the request envelope and its params.
#[test]
fn whole_messages_clawbridge_sends_conform() {
    use clawbridge::{Flow, WireSchemas, WireVerdict};
    let run = clawbridge::Run::load(&repo_root().join("fixtures/runs/telegram-direct.json"))
        .expect("run");
    let params = params_json(&run);
    for (version, dir) in schema_dirs() {
        let mut schemas = WireSchemas::load(&dir, &version).expect("load the unions");
        for (method, params) in [
            ("thread/start", &params["threadStart"]),
            ("turn/start", &params["turnStart"]),
        ] {
            let message = json!({"id": 7, "method": method, "params": params});
            assert_eq!(
                schemas.check(Flow::Request, method, &message),
                WireVerdict::Valid,
                "Codex {version} {method}"
            );
        }
        let initialize = json!({"id": 0, "method": "initialize", "params": {
            "clientInfo": {"name": "clawbridge", "version": "0.1.0"},
            "capabilities": {"experimentalApi": true}}});
        assert_eq!(
            schemas.check(Flow::Request, "initialize", &initialize),
            WireVerdict::Valid,
            "Codex {version} initialize"
        );
        let broken =
            json!({"id": 7, "method": "turn/start", "params": {"threadId": 1, "inputs": []}});
        assert!(
            matches!(
                schemas.check(Flow::Request, "turn/start", &broken),
                WireVerdict::Problems(_)
            ),
            "Codex {version}: a broken turn/start is caught"
        );
    }
}

//! A small generated-looking Codex schema folder: one request with its answer, one
//! notification. The unit tests of the codex crate and of the observe crate include this file
//! (`#[path]`): as a `testing` feature of the library it made the tests' build of the codex
//! crate, and of every crate above it, differ from the product's (docs/development.md, "One
//! build"); under `tests/` it is in no build of the product.

use serde_json::{json, Value};

/// A small generated-looking folder: one request with its answer, one notification.
pub fn folder() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("dir");
    let union = |title: &str, variants: Value, definitions: Value| json!({"title": title, "oneOf": variants, "definitions": definitions});
    let variant = |method: &str, params: Value, id: bool| {
        let mut properties =
            json!({"method": {"enum": [method], "type": "string"}, "params": params});
        let mut required = vec!["method"];
        if id {
            properties["id"] = json!({"type": ["string", "integer"]});
            required.push("id");
        }
        json!({"type": "object", "properties": properties, "required": required})
    };
    let files = [
        (
            "ClientRequest.json",
            union(
                "ClientRequest",
                json!([variant(
                    "thread/start",
                    json!({"$ref": "#/definitions/ThreadStartParams"}),
                    true
                )]),
                json!({"ThreadStartParams": {"type": "object", "properties": {"cwd": {"type": "string"}}, "required": ["cwd"]}}),
            ),
        ),
        (
            "ClientNotification.json",
            union(
                "ClientNotification",
                json!([{"type": "object", "properties": {"method": {"enum": ["initialized"]}}}]),
                json!({}),
            ),
        ),
        (
            "ServerRequest.json",
            union("ServerRequest", json!([]), json!({})),
        ),
        (
            "ServerNotification.json",
            union(
                "ServerNotification",
                json!([variant(
                    "turn/started",
                    json!({"$ref": "#/definitions/TurnStartedNotification"}),
                    false
                )]),
                json!({"TurnStartedNotification": {"type": "object", "properties": {"threadId": {"type": "string"}}, "required": ["threadId"]}}),
            ),
        ),
        (
            "v2/ThreadStartResponse.json",
            json!({"title": "ThreadStartResponse", "type": "object", "properties": {"thread": {"$ref": "#/definitions/Thread"}}, "required": ["thread"],
                   "definitions": {"Thread": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}}}),
        ),
    ];
    for (name, value) in files {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, value.to_string()).expect("write");
    }
    dir
}

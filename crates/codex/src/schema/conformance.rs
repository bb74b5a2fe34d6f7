//! Every app-server message against the running Codex's own schema, not only the params
//! clawbridge writes.
//!
//! `codex app-server generate-json-schema` describes the whole protocol: one union per message
//! family (`ClientRequest.json`, `ClientNotification.json`, `ServerRequest.json`,
//! `ServerNotification.json`, each a `oneOf` of `{method, params}` variants) and one file per
//! result type (`v2/ThreadStartResponse.json`, ...). What it does not say is which result type
//! answers which method (Codex keeps that pairing in a Rust macro), so `response_name` derives
//! it from the params type's name (`ThreadStartParams` -> `ThreadStartResponse`) or the method,
//! with the few irregular names Codex uses listed; a method whose answer has no schema file is
//! counted as unchecked, never guessed.
//!
//! Kinds of problem are those of [`super`]: a value the schema refuses, and a key it does
//! not declare (Codex's schemas allow extra keys, so an unknown key would otherwise pass).
//! Validators are compiled the first time a method is seen, once per method; the unions are
//! shared between them through one registry, so a week-long proxy holds one copy of the schema.

use crate::protocol::table::{self, CodexMethod};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use jsonschema::{Draft, Registry, Validator};
use serde_json::Value;

use super::{Problem, ProblemKind, SchemaError, MAX_PROBLEMS};

/// Which of the six message families a message belongs to.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "camelCase")]
pub enum Flow {
    /// Client -> Codex, with an id.
    Request,
    /// Codex -> client: the answer to a request.
    Response,
    /// Client -> Codex, without an id (`initialized`).
    ClientNotification,
    /// Codex -> client, without an id.
    Notification,
    /// Codex -> client, with an id (approvals, dynamic tool calls).
    ServerRequest,
    /// Client -> Codex: the answer to a server request.
    ServerRequestAnswer,
}

impl Flow {
    pub fn as_str(self) -> &'static str {
        match self {
            Flow::Request => "request",
            Flow::Response => "response",
            Flow::ClientNotification => "clientNotification",
            Flow::Notification => "notification",
            Flow::ServerRequest => "serverRequest",
            Flow::ServerRequestAnswer => "serverRequestAnswer",
        }
    }

    /// The union a message of this flow is a variant of (answers have none: see
    /// `response_name`).
    fn union(self) -> Union {
        match self {
            Flow::Request | Flow::Response => Union::ClientRequest,
            Flow::ClientNotification => Union::ClientNotification,
            Flow::Notification => Union::ServerNotification,
            Flow::ServerRequest | Flow::ServerRequestAnswer => Union::ServerRequest,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Union {
    ClientRequest,
    ClientNotification,
    ServerRequest,
    ServerNotification,
}

impl Union {
    const ALL: [Union; 4] = [
        Union::ClientRequest,
        Union::ClientNotification,
        Union::ServerRequest,
        Union::ServerNotification,
    ];

    fn name(self) -> &'static str {
        match self {
            Union::ClientRequest => "ClientRequest",
            Union::ClientNotification => "ClientNotification",
            Union::ServerRequest => "ServerRequest",
            Union::ServerNotification => "ServerNotification",
        }
    }

    fn uri(self) -> String {
        format!("urn:codex-schema:{}", self.name())
    }
}

/// What the schema says of one message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Valid,
    Problems(Vec<Problem>),
    /// The schema has no such method (the message is forwarded all the same).
    UnknownMethod,
    /// Nothing to check it against (an answer whose type has no schema file).
    Unchecked(String),
}

/// The generated schema of one Codex version, for every message family.
pub struct WireSchemas {
    pub version: String,
    dir: PathBuf,
    registry: Registry,
    unions: HashMap<Union, Arc<Value>>,
    /// Per union: method -> the variant's index in the union's `oneOf` (looked up by `&str`,
    /// so a checked message costs no key allocation).
    variants: HashMap<Union, HashMap<String, usize>>,
    /// Compiled on first use: a variant's validator, or an answer's (with its own document).
    compiled: HashMap<Flow, HashMap<String, Option<Compiled>>>,
}

struct Compiled {
    validator: Validator,
    /// The document `$ref`s of the checked part resolve in, and the part's schema node (for the
    /// unknown-key walk).
    root: Arc<Value>,
    node: Value,
}

impl std::fmt::Debug for WireSchemas {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("WireSchemas")
            .field("version", &self.version)
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// A schema file Codex generated: titled as expected, and without a `$ref` cycle a validator
/// would recurse through forever.
fn load_file(path: &Path, title: &str) -> Result<Value, SchemaError> {
    let load = |message: String| SchemaError::Load {
        path: path.to_path_buf(),
        message,
    };
    let schema = super::read_schema_file(path)?;
    if schema.get("title").and_then(Value::as_str) != Some(title) {
        return Err(load(format!(
            "its title is not {title}: not a schema Codex generated"
        )));
    }
    if let Some(name) = super::unproductive_cycle(&schema) {
        return Err(load(format!(
            "the definition {name} refers to itself through anyOf/oneOf/allOf alone"
        )));
    }
    Ok(schema)
}

/// The method a union variant is for (`properties.method.enum[0]`).
fn variant_method(variant: &Value) -> Option<&str> {
    variant["properties"]["method"]["enum"]
        .as_array()
        .and_then(|values| values.first())
        .and_then(Value::as_str)
}

/// The words of a method in PascalCase: `account/rateLimits/read` ->
/// `["Account", "RateLimits", "Read"]`.
fn pascal_words(method: &str) -> Vec<String> {
    method
        .split('/')
        .filter(|word| !word.is_empty())
        .map(|word| {
            let mut chars = word.chars();
            chars
                .next()
                .map(|first| first.to_uppercase().chain(chars).collect())
                .unwrap_or_default()
        })
        .collect()
}

/// Methods whose answer type Codex's generated folder has no file for under any name we can
/// derive (Codex 0.171.0's `modelProvider/default/set`): their answers are counted unchecked,
/// never checked against a guess (the method table's `answer: Some("")`).
pub fn answers_without_schema() -> Vec<&'static str> {
    CodexMethod::ALL
        .iter()
        .filter(|method| method.answer_schema() == Some(""))
        .map(|method| method.name())
        .collect()
}

/// The names the answer type of `method` may have, most likely first: the params type's name
/// with `Response` for `Params` (`Nullable` dropped), the listed irregular name, then the
/// method's words (`memory/reset` -> `MemoryResetResponse`, without the first word, and in
/// verb-first order).
pub fn response_names(method: &str, params_type: Option<&str>) -> Vec<String> {
    let mut names = Vec::new();
    if let Some(params) = params_type {
        let params = params.strip_prefix("Nullable").unwrap_or(params);
        if let Some(stem) = params.strip_suffix("Params") {
            names.push(format!("{stem}Response"));
        }
    }
    // Codex's answers whose type is named after neither the params nor the method (measured
    // on 0.169.0 and 0.171.0; `schema::every_method_s_answer_has_a_schema` fails when a version
    // adds one): the method table names them.
    if let Some((_, name)) =
        CodexMethod::irregular_answers().find(|(known, _)| known.name() == method)
    {
        names.push(name.to_string());
    }
    let words = pascal_words(method);
    names.push(format!("{}Response", words.concat()));
    if words.len() > 1 {
        names.push(format!("{}Response", words[1..].concat()));
        if let Some((verb, rest)) = words.split_last() {
            names.push(format!("{verb}{}Response", rest.concat()));
        }
    }
    names.dedup();
    names
}

impl WireSchemas {
    /// Load the four unions from a generated folder; answers are read when first needed.
    pub fn load(dir: &Path, version: &str) -> Result<Self, SchemaError> {
        let mut unions = HashMap::new();
        let mut variants = HashMap::new();
        let mut resources = Vec::new();
        for union in Union::ALL {
            let schema = load_file(&dir.join(format!("{}.json", union.name())), union.name())?;
            for (index, variant) in schema["oneOf"].as_array().into_iter().flatten().enumerate() {
                if let Some(method) = variant_method(variant) {
                    variants
                        .entry(union)
                        .or_insert_with(HashMap::new)
                        .insert(method.to_string(), index);
                }
            }
            let schema = Arc::new(schema);
            resources.push((
                union.uri(),
                Draft::Draft7.create_resource(Value::clone(&schema)),
            ));
            unions.insert(union, schema);
        }
        let registry = Registry::options()
            .draft(Draft::Draft7)
            .build(resources)
            .map_err(|error| SchemaError::Load {
                path: dir.to_path_buf(),
                message: error.to_string(),
            })?;
        Ok(Self {
            version: version.to_string(),
            dir: dir.to_path_buf(),
            registry,
            unions,
            variants,
            compiled: HashMap::new(),
        })
    }

    /// The index of `method`'s variant in `union`'s `oneOf`.
    fn variant(&self, union: Union, method: &str) -> Option<usize> {
        self.variants.get(&union)?.get(method).copied()
    }

    /// Whether the schema knows `method` in `flow`'s family.
    pub fn knows(&self, flow: Flow, method: &str) -> bool {
        self.variant(flow.union(), method).is_some()
    }

    /// The answer type's file of `method` (a request or a server request), if the folder has one.
    fn response_file(&self, union: Union, method: &str) -> Option<(PathBuf, String)> {
        let index = self.variant(union, method)?;
        let params_type = self.unions[&union]["oneOf"][index]["properties"]["params"]["$ref"]
            .as_str()
            .and_then(|reference| reference.rsplit('/').next());
        response_names(method, params_type)
            .into_iter()
            .find_map(|name| {
                ["", "v2/", "v1/"].iter().find_map(|folder| {
                    let path = self.dir.join(format!("{folder}{name}.json"));
                    path.is_file().then(|| (path, name.clone()))
                })
            })
    }

    /// The answer type of every method of a family, `None` where no file has it (for the
    /// schema tests and `scripts/codex-compat`).
    pub fn answer_types(&self, flow: Flow) -> Vec<(String, Option<String>)> {
        let union = flow.union();
        let mut methods: Vec<(String, Option<String>)> = self
            .variants
            .get(&union)
            .into_iter()
            .flat_map(HashMap::keys)
            .map(|method| {
                (
                    method.clone(),
                    self.response_file(union, method).map(|(_, name)| name),
                )
            })
            .collect();
        methods.sort();
        methods
    }

    /// The schema of what a message of `flow` for `method` carries: a request's or
    /// notification's params (within its union), or an answer's result (its own document).
    /// `None` when the schema has no such method or answer.
    pub fn part(&self, flow: Flow, method: &str) -> Option<(Arc<Value>, Value)> {
        let union = flow.union();
        match flow {
            Flow::Response | Flow::ServerRequestAnswer => {
                let (path, name) = self.response_file(union, method)?;
                let document = load_file(&path, &name).ok()?;
                Some((Arc::new(document.clone()), document))
            }
            _ => {
                let index = self.variant(union, method)?;
                let root = Arc::clone(&self.unions[&union]);
                let node = root["oneOf"][index]["properties"]["params"].clone();
                Some((root, node))
            }
        }
    }

    /// Every method of every family the schema knows.
    pub fn methods(&self) -> Vec<(Flow, String)> {
        let mut methods: Vec<(Flow, String)> = self
            .variants
            .iter()
            .flat_map(|(union, methods)| {
                let flow = match union {
                    Union::ClientRequest => Flow::Request,
                    Union::ClientNotification => Flow::ClientNotification,
                    Union::ServerRequest => Flow::ServerRequest,
                    Union::ServerNotification => Flow::Notification,
                };
                methods.keys().map(move |method| (flow, method.clone()))
            })
            .collect();
        methods.sort();
        methods
    }

    fn compile(&self, flow: Flow, method: &str) -> Result<Option<Compiled>, String> {
        let union = flow.union();
        match flow {
            Flow::Response | Flow::ServerRequestAnswer => {
                let Some((path, name)) = self.response_file(union, method) else {
                    return Ok(None);
                };
                let document = load_file(&path, &name).map_err(|error| error.to_string())?;
                let validator = jsonschema::options()
                    .with_draft(Draft::Draft7)
                    .build(&document)
                    .map_err(|error| format!("{}: {error}", path.display()))?;
                Ok(Some(Compiled {
                    validator,
                    node: document.clone(),
                    root: Arc::new(document),
                }))
            }
            _ => {
                let Some(index) = self.variant(union, method) else {
                    return Ok(None);
                };
                let reference =
                    serde_json::json!({"$ref": format!("{}#/oneOf/{index}", union.uri())});
                let validator = jsonschema::options()
                    .with_draft(Draft::Draft7)
                    .with_registry(self.registry.clone())
                    .build(&reference)
                    .map_err(|error| format!("{} {method}: {error}", union.name()))?;
                let root = Arc::clone(&self.unions[&union]);
                let node = root["oneOf"][index]["properties"]["params"].clone();
                Ok(Some(Compiled {
                    validator,
                    root,
                    node,
                }))
            }
        }
    }

    /// Check one message of `flow` for `method` (for answers: the method of the request they
    /// answer). Answers are checked by their `result` (an `error` is checked for its shape).
    pub fn check(&mut self, flow: Flow, method: &str, message: &Value) -> Verdict {
        let answer = matches!(flow, Flow::Response | Flow::ServerRequestAnswer);
        if !self.knows(flow, method) {
            return Verdict::UnknownMethod;
        }
        if answer {
            if let Some(error) = message.get("error") {
                return error_verdict(error);
            }
        }
        // Compiled once per method; a message of a method seen before allocates no key.
        let seen = self
            .compiled
            .get(&flow)
            .is_some_and(|methods| methods.contains_key(method));
        if !seen {
            let compiled = match self.compile(flow, method) {
                Ok(compiled) => compiled,
                Err(message) => return Verdict::Unchecked(message),
            };
            self.compiled
                .entry(flow)
                .or_default()
                .insert(method.to_string(), compiled);
        }
        let Some(Some(compiled)) = self
            .compiled
            .get(&flow)
            .and_then(|methods| methods.get(method))
        else {
            return Verdict::Unchecked(format!(
                "Codex {} has no schema for the answer to {method}",
                self.version
            ));
        };
        let (instance, prefix) = if answer {
            (message.get("result").unwrap_or(&Value::Null), "/result")
        } else {
            (message, "")
        };
        let mut problems: Vec<Problem> = compiled
            .validator
            .iter_errors(instance)
            .map(|error| Problem {
                field: pointer(prefix, &error.instance_path.to_string()),
                kind: ProblemKind::Invalid,
                message: error.to_string(),
            })
            .take(MAX_PROBLEMS)
            .collect();
        let (checked, prefix) = if answer {
            (instance, "/result")
        } else {
            (message.get("params").unwrap_or(&Value::Null), "/params")
        };
        let mut unknown = Vec::new();
        super::unknown_keys(
            &compiled.root,
            &compiled.node,
            checked,
            String::new(),
            &mut unknown,
            0,
        );
        problems.extend(unknown.into_iter().map(|field| Problem {
            message: format!("Codex {} has no such key", self.version),
            field: pointer(prefix, &field),
            kind: ProblemKind::UnknownKey,
        }));
        problems.truncate(MAX_PROBLEMS);
        if problems.is_empty() {
            Verdict::Valid
        } else {
            Verdict::Problems(problems)
        }
    }
}

fn pointer(prefix: &str, path: &str) -> String {
    match (prefix, path) {
        ("", "") => "/".into(),
        (prefix, path) => format!("{prefix}{path}"),
    }
}

/// A JSON-RPC error object: an integer `code` and a string `message`.
fn error_verdict(error: &Value) -> Verdict {
    let mut problems = Vec::new();
    if !error["code"].is_i64() {
        problems.push(Problem {
            field: "/error/code".into(),
            kind: ProblemKind::Invalid,
            message: "an error's code must be an integer".into(),
        });
    }
    if !error["message"].is_string() {
        problems.push(Problem {
            field: "/error/message".into(),
            kind: ProblemKind::Invalid,
            message: "an error's message must be a string".into(),
        });
    }
    if problems.is_empty() {
        Verdict::Valid
    } else {
        Verdict::Problems(problems)
    }
}

/// The methods clawbridge itself sends, answers or reads, by family: what a new Codex release
/// must keep for clawbridge to work (`scripts/codex-compat` diffs these field by field); the
/// method table's `kept`, in its order.
pub fn clawbridge_methods() -> Vec<(Flow, &'static str)> {
    CodexMethod::ALL
        .iter()
        .filter(|method| method.kept())
        .map(|method| {
            let flow = match method.flow() {
                table::Flow::Request => Flow::Request,
                table::Flow::ClientNotification => Flow::ClientNotification,
                table::Flow::ServerRequest => Flow::ServerRequest,
                table::Flow::Notification => Flow::Notification,
            };
            (flow, method.name())
        })
        .collect()
}

/// The files of a generated schema folder that [`WireSchemas`] and [`super`] read for
/// what clawbridge itself sends and reads (`scripts/regen-codex-schema` vendors these,
/// `scripts/codex-compat` diffs them between versions): the method table's.
pub use crate::protocol::table::vendored_files;

/// What the tests of this crate build schema folders with (the observe crate's tests include the
/// same file).
#[cfg(test)]
#[path = "../../tests/support/schema_folder.rs"]
pub(crate) mod testing;

#[cfg(test)]
mod tests {
    use super::testing::folder;
    use super::*;
    use serde_json::json;

    #[test]
    fn answer_types_are_named_from_params_or_method() {
        assert_eq!(
            response_names("thread/start", Some("ThreadStartParams"))[0],
            "ThreadStartResponse"
        );
        assert!(response_names("memory/reset", None).contains(&"MemoryResetResponse".into()));
        assert!(response_names("account/gatewayOAuth/read", None)
            .contains(&"GatewayOAuthReadResponse".into()));
        assert!(response_names("account/logout", None).contains(&"LogoutAccountResponse".into()));
        assert!(response_names(
            "remoteControl/enable",
            Some("NullableRemoteControlEnableParams")
        )
        .contains(&"RemoteControlEnableResponse".into()));
    }

    #[test]
    fn every_family_is_checked_against_its_union() {
        let dir = folder();
        let mut schemas = WireSchemas::load(dir.path(), "9.9.9").expect("load");
        let request = json!({"id": 1, "method": "thread/start", "params": {"cwd": "/w"}});
        assert_eq!(
            schemas.check(Flow::Request, "thread/start", &request),
            Verdict::Valid
        );
        let Verdict::Problems(problems) = schemas.check(
            Flow::Request,
            "thread/start",
            &json!({"id": 1, "method": "thread/start", "params": {"cwd": 3, "cwdd": "/w"}}),
        ) else {
            panic!("problems expected");
        };
        let fields: Vec<(&str, ProblemKind)> = problems
            .iter()
            .map(|p| (p.field.as_str(), p.kind))
            .collect();
        assert_eq!(
            fields,
            [
                ("/params/cwd", ProblemKind::Invalid),
                ("/params/cwdd", ProblemKind::UnknownKey)
            ]
        );
        assert_eq!(
            schemas.check(
                Flow::Response,
                "thread/start",
                &json!({"id": 1, "result": {"thread": {"id": "t"}}})
            ),
            Verdict::Valid
        );
        let Verdict::Problems(problems) = schemas.check(
            Flow::Response,
            "thread/start",
            &json!({"id": 1, "result": {"thread": {"id": 7, "extra": true}}}),
        ) else {
            panic!("problems expected");
        };
        let fields: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(fields, ["/result/thread/id", "/result/thread/extra"]);
        assert_eq!(
            schemas.check(
                Flow::Response,
                "thread/start",
                &json!({"id": 1, "error": {"code": -32600, "message": "no"}})
            ),
            Verdict::Valid
        );
        assert!(matches!(
            schemas.check(
                Flow::Response,
                "thread/start",
                &json!({"id": 1, "error": {"code": "x"}})
            ),
            Verdict::Problems(_)
        ));
        assert_eq!(
            schemas.check(
                Flow::Notification,
                "turn/started",
                &json!({"method": "turn/started", "params": {"threadId": "t"}})
            ),
            Verdict::Valid
        );
        assert!(matches!(
            schemas.check(
                Flow::Notification,
                "turn/started",
                &json!({"method": "turn/started", "params": {}})
            ),
            Verdict::Problems(_)
        ));
        assert_eq!(
            schemas.check(
                Flow::ClientNotification,
                "initialized",
                &json!({"method": "initialized"})
            ),
            Verdict::Valid
        );
        assert_eq!(
            schemas.check(
                Flow::Request,
                "bogus/method",
                &json!({"id": 2, "method": "bogus/method"})
            ),
            Verdict::UnknownMethod
        );
        assert_eq!(
            schemas.check(
                Flow::Notification,
                "thread/start",
                &json!({"method": "thread/start"})
            ),
            Verdict::UnknownMethod,
            "a request's method is not a notification's"
        );
    }

    /// Protection: a planted union (wrong title) is refused, not used to pass everything.
    #[test]
    fn a_union_that_is_not_codex_s_is_refused() {
        let dir = folder();
        std::fs::write(dir.path().join("ServerNotification.json"), "{}").expect("plant");
        let error = WireSchemas::load(dir.path(), "9.9.9").expect_err("refused");
        assert!(error.to_string().contains("ServerNotification"), "{error}");
    }
}

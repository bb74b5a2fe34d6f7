//! What a client may ask a member: the method policy and the sandbox ceiling.
//!
//! Why: a member is one Codex app-server for every connection of its account, run as the
//! operator's user. Codex's own API reaches far past a thread (the host's files and processes,
//! configuration every client of the member shares, thread listings of the whole Codex home),
//! and a thread's params choose its sandbox. The endpoint therefore looks at each request
//! before it goes on:
//!
//! * **the method policy**, from the method table's [`Access`] column: a named client uses the
//!   methods of its own threads and the reads every client may see; a listing or search answers
//!   with its own threads only; host access needs a grant the operator gave it (`clawbridge
//!   client allow NAME fs`); what cannot be kept to one tenant, and any method the table does not
//!   know (a newer Codex), is the operator's only. The operator's token keeps Codex's whole API.
//! * **the confinement** of a named client to the workspace roots: every folder or file a
//!   request names (a thread's `cwd`, writable roots, an image's path, `fs/*` paths) must lie
//!   under one; a rollout `path` is refused (it names a file, not a thread the owner check can
//!   read); a thread's `config` keeps to the keys OpenClaw sends unless granted more.
//! * **the sandbox ceiling** (`--max-sandbox`, default `workspace-write`), for every client:
//!   a thread, turn or command that asks for more, or names none, gets the ceiling; approvals
//!   below `danger-full-access` are bound so that no approved prompt leaves the sandbox; what runs
//!   outside Codex's sandbox altogether (`process/spawn`, `thread/shellCommand`, hook and notify
//!   commands of a named client) needs a `danger-full-access` ceiling. What can be lowered is
//!   lowered; what cannot (a named permission profile) is refused. Nothing above the ceiling is
//!   passed on.

use serde_json::{Map, Value};

use crate::codex::protocol::params::{AskForApproval, SandboxMode};
use crate::codex::protocol::table::{Access, CodexMethod, Grant};
use crate::service::clients::Caller;
use crate::support::fs::Roots;

/// The endpoint's policy settings.
#[derive(Clone, Debug)]
pub struct Policy {
    /// The most sandbox access any thread, turn or command gets.
    pub ceiling: SandboxMode,
    /// The folders named clients' requests may name (canonical); `None` when the operator gave
    /// none (then the endpoint serves no named client).
    pub roots: Option<Roots>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            ceiling: SandboxMode::WorkspaceWrite,
            roots: None,
        }
    }
}

/// A request the policy lets through.
#[derive(Debug, Default)]
pub(super) struct Admitted {
    /// The params to send instead of the client's (something was lowered or set); `None`
    /// sends the client's bytes unchanged.
    pub params: Option<String>,
    /// The answer lists threads: a named client gets only its own.
    pub listing: bool,
    /// The answer is the member's configuration: a named client gets it with secrets redacted.
    pub redact_answer: bool,
    /// What was lowered or set, for the log (each kind once per connection).
    pub lowered: Vec<&'static str>,
}

/// Folder and file fields at the top of a request's params that a named client's request must
/// keep within the workspace roots (a string, or a list of strings).
const PATH_FIELDS: [&str; 15] = [
    "cwd",
    "cwds",
    "path",
    "roots",
    "runtimeWorkspaceRoots",
    "attachmentPath",
    "savePath",
    "sourcePath",
    "destinationPath",
    "marketplacePath",
    "pluginPath",
    "credentialFile",
    "extraRoots",
    "filePath",
    "extraLogFiles",
];

/// Keys of a thread's `config` a named client may set without the `config` grant: what
/// OpenClaw's Codex plugin sends (its features, tool and skill switches, the web search mode)
/// and the model's own knobs. Each is a key or a dotted prefix (`features` covers
/// `features.goals`).
const OPEN_CONFIG_KEYS: [&str; 20] = [
    "features",
    "apps",
    "skills",
    "tools",
    "orchestrator",
    "web_search",
    "include_environment_context",
    "project_doc_max_bytes",
    "suppress_unstable_features_warning",
    "agents.enabled",
    "model",
    "model_reasoning_effort",
    "model_reasoning_summary",
    "model_verbosity",
    "model_context_window",
    "model_auto_compact_token_limit",
    "hide_agent_reasoning",
    "show_raw_agent_reasoning",
    "personality",
    "tool_output_token_limit",
];

/// Keys of a thread's `config` whose values are commands Codex runs outside its sandbox.
const COMMAND_CONFIG_KEYS: [&str; 2] = ["hooks", "notify"];

/// The sandbox a policy object of Codex's (`{"type": "workspaceWrite", ...}`) grants, or `None`
/// for a type this policy does not know (refused: it cannot be ranked).
fn policy_mode(policy: &Value) -> Option<SandboxMode> {
    match policy.get("type")?.as_str()? {
        "readOnly" => Some(SandboxMode::ReadOnly),
        "workspaceWrite" => Some(SandboxMode::WorkspaceWrite),
        // An external sandbox is Codex running commands without its own.
        "dangerFullAccess" | "externalSandbox" => Some(SandboxMode::DangerFullAccess),
        _ => None,
    }
}

/// Codex's policy object for a mode, with its defaults (no extra writable roots, no network
/// below full access).
fn mode_policy(mode: SandboxMode) -> Value {
    let kind = match mode {
        SandboxMode::ReadOnly => "readOnly",
        SandboxMode::WorkspaceWrite => "workspaceWrite",
        SandboxMode::DangerFullAccess => "dangerFullAccess",
    };
    Value::Object(Map::from_iter([("type".to_string(), Value::from(kind))]))
}

fn mode_name(value: &str) -> Option<SandboxMode> {
    [
        SandboxMode::ReadOnly,
        SandboxMode::WorkspaceWrite,
        SandboxMode::DangerFullAccess,
    ]
    .into_iter()
    .find(|mode| mode.as_str() == value)
}

/// Why a named client may not use a method of this access, in words for the refusal.
fn host_reach(grant: Grant) -> &'static str {
    match grant {
        Grant::Fs => "it reads or writes files on the app-server's host",
        Grant::Exec => "it runs commands on the app-server's host",
        Grant::Config => "it changes or reads configuration every client of the app-server shares",
        Grant::Plugins => "it installs or reads plugins every client of the app-server shares",
        Grant::Mcp => "it reaches MCP servers every client of the app-server shares",
        Grant::Account => "it acts on the account itself",
    }
}

impl Policy {
    /// Whether `caller` may send `method` with `params`, and what goes on: the client's params,
    /// or params with what exceeded the ceiling lowered. A refusal says why, naming the method,
    /// the field and the rule.
    pub(super) fn admit(
        &self,
        caller: &Caller,
        connection: usize,
        method: &str,
        params: &str,
    ) -> Result<Admitted, String> {
        let known = CodexMethod::from_name(method);
        let named = !caller.operator;
        let mut admitted = Admitted::default();
        if named {
            match known.and_then(CodexMethod::access) {
                None => {
                    return Err(format!(
                        "clawbridge: `{method}` is not in clawbridge's table of Codex methods (a \
                         newer Codex than it knows?); only the operator may use it until \
                         clawbridge has a rule for it"
                    ))
                }
                Some(Access::Operator) => {
                    return Err(format!(
                        "clawbridge: `{method}` is the operator's only: it acts on or reports \
                         every thread of the account's Codex home, or the whole app-server"
                    ))
                }
                Some(Access::Host(grant)) if !caller.has(grant) => {
                    return Err(format!(
                        "clawbridge: `{method}` is not allowed to client {}: {}. The operator \
                         allows it with `clawbridge client allow {} {grant}` (and a restart of \
                         the endpoint)",
                        caller.name,
                        host_reach(grant),
                        caller.name
                    ))
                }
                Some(Access::Listing) => admitted.listing = true,
                _ => {}
            }
            admitted.redact_answer = known == Some(CodexMethod::ConfigRead);
        }
        let Some(known) = known else {
            return Ok(admitted);
        };
        let ceilinged = matches!(
            known,
            CodexMethod::ThreadStart
                | CodexMethod::ThreadResume
                | CodexMethod::ThreadFork
                | CodexMethod::TurnStart
                | CodexMethod::ThreadSettingsUpdate
                | CodexMethod::CommandExec
                | CodexMethod::ProcessSpawn
                | CodexMethod::ThreadShellCommand
        );
        let handled = names_a_handle(known);
        if !ceilinged && !named && !handled {
            return Ok(admitted);
        }
        let mut value: Value = match serde_json::from_str(params) {
            Ok(value) => value,
            Err(_) => return Ok(admitted),
        };
        let Some(map) = value.as_object_mut() else {
            return Ok(admitted);
        };
        let before = map.clone();
        if named {
            self.confine(caller, known, map)?;
        }
        self.ceiling(known, map, &mut admitted.lowered)?;
        if handled {
            scope_handles(connection, map);
        }
        if *map != before {
            admitted.params = Some(value.to_string());
        }
        Ok(admitted)
    }

    /// A named client's request keeps within the workspace roots and its grants.
    fn confine(
        &self,
        caller: &Caller,
        method: CodexMethod,
        map: &mut Map<String, Value>,
    ) -> Result<(), String> {
        let name = method.name();
        if method == CodexMethod::ThreadStart && map.get("cwd").is_none_or(Value::is_null) {
            return Err(format!(
                "clawbridge: `{name}` of a named client must name its `cwd`, a folder within the \
                 endpoint's workspace roots (--workspace-root)"
            ));
        }
        if matches!(method, CodexMethod::ThreadResume | CodexMethod::ThreadFork)
            && map.get("path").is_some_and(|path| !path.is_null())
        {
            return Err(format!(
                "clawbridge: `{name}` with a rollout `path` is the operator's only; name the \
                 thread by its `threadId`"
            ));
        }
        let mut paths: Vec<(&str, &str)> = Vec::new();
        for field in PATH_FIELDS {
            match map.get(field) {
                Some(Value::String(path)) => paths.push((field, path)),
                Some(Value::Array(items)) => paths.extend(
                    items
                        .iter()
                        .filter_map(Value::as_str)
                        .map(|path| (field, path)),
                ),
                _ => {}
            }
        }
        if let Some(roots) = map
            .get("sandboxPolicy")
            .and_then(|policy| policy.get("writableRoots"))
            .and_then(Value::as_array)
        {
            paths.extend(
                roots
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|path| ("sandboxPolicy.writableRoots", path)),
            );
        }
        if let Some(items) = map.get("input").and_then(Value::as_array) {
            paths.extend(
                items
                    .iter()
                    .filter_map(|item| item.get("path").and_then(Value::as_str))
                    .map(|path| ("input[].path", path)),
            );
        }
        for (field, path) in paths {
            self.within_roots(name, field, path)?;
        }
        if map
            .get("environments")
            .and_then(Value::as_array)
            .is_some_and(|environments| !environments.is_empty())
            && !caller.has(Grant::Exec)
        {
            return Err(format!(
                "clawbridge: `{name}` field `environments`: commands in another environment are \
                 not allowed to client {} (the operator allows them with `clawbridge client \
                 allow {} exec`)",
                caller.name, caller.name
            ));
        }
        if map
            .get("selectedCapabilityRoots")
            .and_then(Value::as_array)
            .is_some_and(|roots| !roots.is_empty())
            && !caller.has(Grant::Config)
        {
            return Err(format!(
                "clawbridge: `{name}` field `selectedCapabilityRoots` is not allowed to client {} \
                 (the operator allows it with `clawbridge client allow {} config`)",
                caller.name, caller.name
            ));
        }
        if let Some(config) = map.get_mut("config").and_then(Value::as_object_mut) {
            self.confine_config(caller, name, config)?;
        }
        Ok(())
    }

    /// `path` must lie under a workspace root (symlinks resolved, also for parts that do not
    /// exist yet), and be absolute.
    fn within_roots(&self, method: &str, field: &str, path: &str) -> Result<(), String> {
        let path = std::path::Path::new(path);
        let admitted =
            path.is_absolute() && self.roots.as_ref().is_some_and(|roots| roots.admits(path));
        if admitted {
            return Ok(());
        }
        Err(format!(
            "clawbridge: `{method}` field `{field}`: {} is not an absolute path within the \
             endpoint's workspace roots (--workspace-root)",
            crate::support::text::printable(&path.display().to_string())
        ))
    }

    /// A thread's `config` from a named client: the keys OpenClaw sends pass; commands (hooks,
    /// notify) only with the `exec` grant under a `danger-full-access` ceiling, else they are
    /// dropped; any other key needs the `config` grant.
    fn confine_config(
        &self,
        caller: &Caller,
        method: &str,
        config: &mut Map<String, Value>,
    ) -> Result<(), String> {
        let commands_allowed =
            caller.has(Grant::Exec) && self.ceiling == SandboxMode::DangerFullAccess;
        for (key, value) in config.iter_mut() {
            let root = key.split('.').next().unwrap_or(key);
            if COMMAND_CONFIG_KEYS.contains(&root) {
                if !commands_allowed {
                    drop_commands(key, value);
                }
                continue;
            }
            let open = OPEN_CONFIG_KEYS.iter().any(|open| {
                key == open
                    || key
                        .strip_prefix(open)
                        .is_some_and(|rest| rest.starts_with('.'))
            });
            if !open && !caller.has(Grant::Config) {
                return Err(format!(
                    "clawbridge: `{method}` field `config.{}` is not allowed to client {} (a \
                     thread's config keeps to the keys OpenClaw sends; the operator allows \
                     more with `clawbridge client allow {} config`)",
                    crate::support::text::printable(key),
                    caller.name,
                    caller.name
                ));
            }
        }
        Ok(())
    }

    /// Lower what a request asks past the ceiling, set it where the request names none, and
    /// refuse what cannot be lowered.
    fn ceiling(
        &self,
        method: CodexMethod,
        map: &mut Map<String, Value>,
        lowered: &mut Vec<&'static str>,
    ) -> Result<(), String> {
        let ceiling = self.ceiling;
        let name = method.name();
        let bound = ceiling < SandboxMode::DangerFullAccess;
        let refuse_profile = |field: &str, map: &Map<String, Value>| {
            if bound && map.get(field).is_some_and(|profile| !profile.is_null()) {
                return Err(format!(
                    "clawbridge: `{name}` field `{field}`: a named permission profile cannot be \
                     held to this endpoint's sandbox ceiling {}; name a sandbox instead",
                    ceiling.as_str()
                ));
            }
            Ok(())
        };
        match method {
            CodexMethod::ThreadStart | CodexMethod::ThreadResume | CodexMethod::ThreadFork => {
                refuse_profile("permissions", map)?;
                let asked = match map.get("sandbox") {
                    None | Some(Value::Null) => None,
                    Some(Value::String(mode)) => Some(mode_name(mode).ok_or_else(|| {
                        format!("clawbridge: `{name}` field `sandbox`: unknown mode {mode:?}")
                    })?),
                    Some(_) => {
                        return Err(format!(
                            "clawbridge: `{name}` field `sandbox` is not a mode"
                        ))
                    }
                };
                match asked {
                    Some(mode) if mode <= ceiling => {}
                    Some(_) => {
                        map.insert("sandbox".into(), Value::from(ceiling.as_str()));
                        lowered.push("a thread's sandbox lowered to the ceiling");
                    }
                    None => {
                        map.insert("sandbox".into(), Value::from(ceiling.as_str()));
                    }
                }
                self.bind_approvals(map, lowered);
            }
            CodexMethod::TurnStart | CodexMethod::ThreadSettingsUpdate => {
                refuse_profile("permissions", map)?;
                if let Some(policy) = map.get("sandboxPolicy").filter(|p| !p.is_null()) {
                    self.lower_policy(name, policy.clone(), map, lowered)?;
                }
                self.bind_approvals(map, lowered);
            }
            CodexMethod::CommandExec => {
                refuse_profile("permissionProfile", map)?;
                match map.get("sandboxPolicy").filter(|p| !p.is_null()) {
                    Some(policy) => self.lower_policy(name, policy.clone(), map, lowered)?,
                    None => {
                        map.insert("sandboxPolicy".into(), mode_policy(ceiling));
                    }
                }
            }
            CodexMethod::ProcessSpawn | CodexMethod::ThreadShellCommand if bound => {
                return Err(format!(
                    "clawbridge: `{name}` runs a command without Codex's sandbox, above this \
                     endpoint's sandbox ceiling {} (the operator raises it with --max-sandbox)",
                    ceiling.as_str()
                ));
            }
            _ => {}
        }
        Ok(())
    }

    /// A `sandboxPolicy` past the ceiling becomes the ceiling's (a named client's writable roots
    /// were held to the workspace roots by [`Policy::confine`]).
    fn lower_policy(
        &self,
        method: &str,
        policy: Value,
        map: &mut Map<String, Value>,
        lowered: &mut Vec<&'static str>,
    ) -> Result<(), String> {
        let Some(mode) = policy_mode(&policy) else {
            return Err(format!(
                "clawbridge: `{method}` field `sandboxPolicy`: a type this endpoint cannot hold \
                 to its sandbox ceiling ({})",
                crate::support::text::printable(&policy.to_string())
            ));
        };
        if mode > self.ceiling {
            map.insert("sandboxPolicy".into(), mode_policy(self.ceiling));
            lowered.push("a sandbox policy lowered to the ceiling");
        }
        Ok(())
    }

    /// Below `danger-full-access` an approval is a way out of the sandbox: any policy that may
    /// ask becomes Codex's granular one that rejects every prompt to leave it.
    fn bind_approvals(&self, map: &mut Map<String, Value>, lowered: &mut Vec<&'static str>) {
        if self.ceiling == SandboxMode::DangerFullAccess {
            return;
        }
        let bound = serde_json::to_value(AskForApproval::SANDBOX_BOUND).unwrap_or(Value::Null);
        match map.get("approvalPolicy") {
            None | Some(Value::Null) => {}
            Some(Value::String(policy)) if policy == "never" => {}
            Some(policy) if *policy == bound => {}
            Some(_) => {
                map.insert("approvalPolicy".into(), bound);
                lowered.push("an approval policy bound to the sandbox");
            }
        }
    }
}

/// What a client names itself for something that runs on the member past its answer (a
/// process, a file watch, a search session, an MCP event stream), and what Codex's
/// notifications about it carry.
const HANDLE_FIELDS: [&str; 5] = [
    "processId",
    "processHandle",
    "watchId",
    "sessionId",
    "subscriptionId",
];

/// Whether a request names a handle of [`HANDLE_FIELDS`].
fn names_a_handle(method: CodexMethod) -> bool {
    use CodexMethod as M;
    matches!(
        method,
        M::CommandExec
            | M::CommandExecWrite
            | M::CommandExecTerminate
            | M::CommandExecResize
            | M::ProcessSpawn
            | M::ProcessWriteStdin
            | M::ProcessKill
            | M::ProcessResizePty
            | M::FsWatch
            | M::FsUnwatch
            | M::FuzzyFileSearchSessionStart
            | M::FuzzyFileSearchSessionUpdate
            | M::FuzzyFileSearchSessionStop
            | M::McpServerEventStreamStart
            | M::McpServerEventStreamStop
    )
}

/// Every connection's handles are its own on a member all its account's connections share:
/// `c<N>.<handle>` to Codex, so two clients' `processId`s never meet, one cannot write to or
/// end another's process, and Codex's notifications about it go back to its connection alone
/// ([`owner_of_handle`]).
fn scope_handles(connection: usize, map: &mut Map<String, Value>) {
    for field in HANDLE_FIELDS {
        if let Some(Value::String(handle)) = map.get_mut(field) {
            *handle = format!("c{connection}.{handle}");
        }
    }
}

/// The connection a notification about a handle belongs to, and the notification's params as
/// that connection named the handle; `None` for a notification that names no handle.
/// `Some((None, _))`: it names a handle no connection made here (it reaches nobody).
pub(super) fn owner_of_handle(params: &str) -> Option<(Option<usize>, String)> {
    if !HANDLE_FIELDS.iter().any(|field| params.contains(field)) {
        return None;
    }
    let mut value: Value = serde_json::from_str(params).ok()?;
    let map = value.as_object_mut()?;
    let field = HANDLE_FIELDS
        .into_iter()
        .find(|field| map.get(*field).is_some_and(Value::is_string))?;
    let Some(Value::String(handle)) = map.get_mut(field) else {
        return None;
    };
    let owner = handle
        .strip_prefix('c')
        .and_then(|rest| rest.split_once('.'))
        .and_then(|(number, own)| Some((number.parse::<usize>().ok()?, own.to_string())));
    let Some((connection, own)) = owner else {
        return Some((None, String::new()));
    };
    *handle = own;
    Some((Some(connection), value.to_string()))
}

/// Drop the commands of a `hooks` or `notify` value (hook groups keep their matchers, with no
/// hooks): a named client without the grant sets no command Codex runs outside its sandbox.
fn drop_commands(key: &str, value: &mut Value) {
    match value {
        Value::Array(items) if key == "notify" => items.clear(),
        Value::Array(groups) => groups.clear(),
        Value::Object(events) => {
            for (event, groups) in events.iter_mut() {
                // `hooks.state` records which hooks were trusted; it runs nothing.
                if key == "hooks" && event == "state" {
                    continue;
                }
                if let Value::Array(groups) = groups {
                    groups.clear();
                }
            }
        }
        _ => {}
    }
}

/// Keep only the caller's threads in a listing: in every list of the answer (`data`: ids,
/// `Thread` objects, search results and attachment owners alike) and in every map keyed by
/// thread (`thread/list`'s `readStates`). Cursors and other plain fields stay.
pub(super) fn filter_listing(answer: &str, mine: impl Fn(&str) -> bool) -> Option<String> {
    let mut value: Value = serde_json::from_str(answer).ok()?;
    let fields = value.as_object_mut()?;
    for field in fields.values_mut() {
        match field {
            Value::Array(items) => items.retain(|item| {
                let id = item
                    .as_str()
                    .or_else(|| item.get("id").and_then(Value::as_str))
                    .or_else(|| item.get("threadId").and_then(Value::as_str))
                    .or_else(|| {
                        item.get("thread")
                            .and_then(|thread| thread.get("id"))
                            .and_then(Value::as_str)
                    });
                id.is_some_and(&mine)
            }),
            Value::Object(by_thread) => by_thread.retain(|thread, _| mine(thread)),
            _ => {}
        }
    }
    Some(value.to_string())
}

/// The member's configuration with its secrets redacted (what a named client reads of it).
pub(super) fn redact_answer(answer: &str) -> Option<String> {
    let mut value: Value = serde_json::from_str(answer).ok()?;
    crate::support::redact::redact_value(&mut value);
    Some(value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn named(grants: &[Grant]) -> Caller {
        Caller {
            name: "bob".into(),
            operator: false,
            grants: grants.to_vec(),
        }
    }

    fn policy(root: &std::path::Path) -> Policy {
        Policy {
            ceiling: SandboxMode::WorkspaceWrite,
            roots: Some(Roots::new(vec![root.canonicalize().expect("root")])),
        }
    }

    fn sent(admitted: &Admitted, original: &Value) -> Value {
        admitted.params.as_deref().map_or_else(
            || original.clone(),
            |text| serde_json::from_str(text).expect("json"),
        )
    }

    #[test]
    fn named_clients_get_their_own_threads_and_what_they_were_granted() {
        let root = tempfile::tempdir().expect("root");
        let policy = policy(root.path());
        let bob = named(&[]);
        let refused = |caller: &Caller, method: &str, params: Value| {
            policy
                .admit(caller, 1, method, &params.to_string())
                .expect_err(method)
        };
        let error = refused(&bob, "fs/readFile", json!({"path": "/etc/passwd"}));
        assert!(
            error.contains("fs/readFile") && error.contains("client allow bob fs"),
            "{error}"
        );
        for (method, why) in [
            ("command/exec", "exec"),
            ("config/value/write", "config"),
            ("plugin/install", "plugins"),
            ("mcpServer/tool/call", "mcp"),
            ("accountSession/switch", "account"),
        ] {
            let error = refused(&bob, method, json!({}));
            assert!(
                error.contains(&format!("client allow bob {why}")),
                "{error}"
            );
        }
        let error = refused(&bob, "memory/reset", json!({}));
        assert!(error.contains("operator's only"), "{error}");
        let error = refused(&bob, "thread/brandNew", json!({}));
        assert!(error.contains("not in clawbridge's table"), "{error}");
        // The operator keeps the whole API, unknown methods included.
        let operator = Caller::operator();
        for method in ["fs/readFile", "memory/reset", "thread/brandNew"] {
            policy.admit(&operator, 1, method, "{}").expect(method);
        }
        // A grant opens its family, within the roots.
        let granted = named(&[Grant::Fs]);
        let inside = root.path().join("notes.md");
        let admitted = policy
            .admit(
                &granted,
                1,
                "fs/readFile",
                &json!({"path": inside}).to_string(),
            )
            .expect("inside the roots");
        assert!(admitted.params.is_none(), "passed as sent");
        let error = refused(&granted, "fs/readFile", json!({"path": "/etc/passwd"}));
        assert!(
            error.contains("within the endpoint's workspace roots"),
            "{error}"
        );
        let error = refused(
            &granted,
            "fs/readFile",
            json!({"path": format!("{}/../../etc/passwd", root.path().display())}),
        );
        assert!(error.contains("workspace roots"), "{error}");
        // Listings are filtered; reads of what every client sees pass.
        assert!(
            policy
                .admit(&bob, 1, "thread/list", "{}")
                .expect("list")
                .listing
        );
        assert!(
            policy
                .admit(&bob, 1, "config/read", "{}")
                .expect("read")
                .redact_answer
        );
        policy.admit(&bob, 1, "model/list", "{}").expect("models");
        // A rollout path names a file, not a thread.
        let error = refused(
            &bob,
            "thread/resume",
            json!({"threadId": "t", "path": "/x/rollout.jsonl"}),
        );
        assert!(error.contains("rollout `path`"), "{error}");
    }

    #[test]
    fn the_ceiling_lowers_what_it_can_and_refuses_what_it_cannot() {
        let root = tempfile::tempdir().expect("root");
        let policy = policy(root.path());
        let cwd = root.path().canonicalize().expect("cwd");
        for caller in [Caller::operator(), named(&[])] {
            let start = json!({"cwd": cwd, "sandbox": "danger-full-access", "approvalPolicy": "on-request"});
            let admitted = policy
                .admit(&caller, 1, "thread/start", &start.to_string())
                .expect("start");
            let params = sent(&admitted, &start);
            assert_eq!(params["sandbox"], "workspace-write");
            assert_eq!(
                params["approvalPolicy"],
                serde_json::to_value(AskForApproval::SANDBOX_BOUND).expect("bound")
            );
            // None named: the ceiling.
            let bare = json!({"cwd": cwd});
            let admitted = policy
                .admit(&caller, 1, "thread/start", &bare.to_string())
                .expect("start");
            assert_eq!(sent(&admitted, &bare)["sandbox"], "workspace-write");
            // Within it: as sent.
            let lower = json!({"cwd": cwd, "sandbox": "read-only", "approvalPolicy": "never"});
            let admitted = policy
                .admit(&caller, 1, "thread/start", &lower.to_string())
                .expect("start");
            assert!(admitted.params.is_none());
            for asked in ["dangerFullAccess", "externalSandbox"] {
                let turn = json!({"threadId": "t", "cwd": cwd, "input": [], "sandboxPolicy": {"type": asked}});
                let admitted = policy
                    .admit(&caller, 1, "turn/start", &turn.to_string())
                    .expect("turn");
                assert_eq!(
                    sent(&admitted, &turn)["sandboxPolicy"],
                    json!({"type": "workspaceWrite"})
                );
            }
            let error = policy
                .admit(
                    &caller,
                    1,
                    "thread/start",
                    &json!({"cwd": cwd, "permissions": "full"}).to_string(),
                )
                .expect_err("profile");
            assert!(error.contains("permission profile"), "{error}");
            let error = policy
                .admit(&caller, 1, "turn/start", &json!({"threadId": "t", "input": [], "sandboxPolicy": {"type": "somethingNew"}}).to_string())
                .expect_err("unknown policy");
            assert!(error.contains("sandboxPolicy"), "{error}");
            let error = policy
                .admit(
                    &caller,
                    1,
                    "thread/shellCommand",
                    &json!({"threadId": "t", "command": "id"}).to_string(),
                )
                .expect_err(if caller.operator {
                    "above the ceiling"
                } else {
                    "not granted"
                });
            assert!(error.contains("thread/shellCommand"), "{error}");
        }
        // A command the operator runs gets the ceiling when it names no sandbox.
        let exec = json!({"command": ["id"]});
        let admitted = policy
            .admit(&Caller::operator(), 1, "command/exec", &exec.to_string())
            .expect("exec");
        assert_eq!(
            sent(&admitted, &exec)["sandboxPolicy"],
            json!({"type": "workspaceWrite"})
        );
        // Under a full-access ceiling nothing is lowered.
        let open = Policy {
            ceiling: SandboxMode::DangerFullAccess,
            ..policy.clone()
        };
        let start =
            json!({"cwd": cwd, "sandbox": "danger-full-access", "approvalPolicy": "on-request"});
        let admitted = open
            .admit(&Caller::operator(), 1, "thread/start", &start.to_string())
            .expect("start");
        assert!(admitted.params.is_none());
    }

    #[test]
    fn a_named_client_s_thread_config_keeps_to_openclaw_s_keys() {
        let root = tempfile::tempdir().expect("root");
        let policy = policy(root.path());
        let cwd = root.path().canonicalize().expect("cwd");
        let hooks = json!([{"hooks": [{"type": "command", "command": "cat /secret"}]}]);
        let start = json!({"cwd": cwd, "sandbox": "workspace-write", "config": {
            "features.goals": false,
            "web_search": "cached",
            "hooks.PermissionRequest": hooks,
            "hooks": {"Stop": hooks, "state": {"x": {"enabled": true}}},
            "notify": ["sh", "-c", "cat /secret"],
        }});
        let admitted = policy
            .admit(&named(&[]), 1, "thread/start", &start.to_string())
            .expect("start");
        let config = &sent(&admitted, &start)["config"];
        assert_eq!(config["features.goals"], false);
        assert_eq!(config["hooks.PermissionRequest"], json!([]));
        assert_eq!(config["hooks"]["Stop"], json!([]));
        assert_eq!(config["hooks"]["state"], json!({"x": {"enabled": true}}));
        assert_eq!(config["notify"], json!([]));
        // The operator's hooks stand.
        let admitted = policy
            .admit(&Caller::operator(), 1, "thread/start", &start.to_string())
            .expect("start");
        assert_eq!(
            sent(&admitted, &start)["config"]["notify"],
            start["config"]["notify"]
        );
        for key in [
            "mcp_servers.evil.command",
            "model_providers.x.base_url",
            "openai_base_url",
            "sandbox_mode",
            "agents.explorer.config_file",
        ] {
            let start = json!({"cwd": cwd, "config": {key: "x"}});
            let error = policy
                .admit(&named(&[]), 1, "thread/start", &start.to_string())
                .expect_err(key);
            assert!(
                error.contains(key) && error.contains("allow bob config"),
                "{error}"
            );
            policy
                .admit(
                    &named(&[Grant::Config]),
                    1,
                    "thread/start",
                    &start.to_string(),
                )
                .expect("granted");
        }
        let error = policy
            .admit(
                &named(&[]),
                1,
                "thread/start",
                &json!({"cwd": "/"}).to_string(),
            )
            .expect_err("cwd outside");
        assert!(error.contains("`cwd`"), "{error}");
    }

    #[test]
    fn a_connection_s_handles_are_its_own() {
        let policy = Policy::default();
        let exec = json!({"command": ["id"], "processId": "p1", "streamStdoutStderr": true});
        let admitted = policy
            .admit(&Caller::operator(), 7, "command/exec", &exec.to_string())
            .expect("exec");
        assert_eq!(sent(&admitted, &exec)["processId"], "c7.p1");
        let delta = json!({"processId": "c7.p1", "deltaBase64": "aGk="}).to_string();
        let (owner, params) = owner_of_handle(&delta).expect("a handle");
        assert_eq!(owner, Some(7));
        assert_eq!(
            serde_json::from_str::<Value>(&params).expect("json")["processId"],
            "p1"
        );
        assert_eq!(
            owner_of_handle(&json!({"processId": "p1"}).to_string()).map(|(owner, _)| owner),
            Some(None),
            "a handle no connection made reaches nobody"
        );
        assert!(owner_of_handle(&json!({"threadId": "t"}).to_string()).is_none());
    }

    #[test]
    fn listings_keep_the_caller_s_threads() {
        let mine = |id: &str| id.starts_with("mine");
        let list = json!({"data": [{"id": "mine-1"}, {"id": "theirs"}], "nextCursor": "c",
            "readStates": {"mine-1": {"revision": "r"}, "theirs": {"revision": "s"}}});
        let kept: Value =
            serde_json::from_str(&filter_listing(&list.to_string(), mine).expect("list"))
                .expect("json");
        assert_eq!(kept["data"], json!([{"id": "mine-1"}]));
        assert_eq!(kept["readStates"], json!({"mine-1": {"revision": "r"}}));
        assert_eq!(kept["nextCursor"], "c");
        let search = json!({"data": [{"snippet": "x", "thread": {"id": "theirs"}}]});
        let kept: Value =
            serde_json::from_str(&filter_listing(&search.to_string(), mine).expect("search"))
                .expect("json");
        assert_eq!(kept["data"], json!([]));
        let owners = json!({"data": [{"threadId": "mine-2", "archived": false}, {"threadId": "x", "archived": true}]});
        let kept: Value =
            serde_json::from_str(&filter_listing(&owners.to_string(), mine).expect("owners"))
                .expect("json");
        assert_eq!(kept["data"].as_array().map(Vec::len), Some(1));
        let redacted = redact_answer(
            &json!({"config": {"mcp_servers": {"x": {"env": {"API_TOKEN": "s3cret"}}}}})
                .to_string(),
        )
        .expect("redact");
        assert!(!redacted.contains("s3cret"), "{redacted}");
    }
}

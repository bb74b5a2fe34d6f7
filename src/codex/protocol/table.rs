//! The one table of the Codex app-server methods clawbridge knows, in the manner of codex-rs's
//! `client_request_definitions!`: each method once, with its direction, whether it belongs to a
//! thread, and the generated-schema files its params and answer are checked against.
//!
//! Everything else reads it: the names the code matches on and sends ([`name`]), the typed
//! requests of [`super::methods`] (`Method::NAME`), the notifications the wire names without
//! holding the line (`wire`), what a new Codex must keep for clawbridge ([`CodexMethod::kept`]:
//! the conformance families and `schema diff`), the generated-schema files vendored
//! ([`vendored_files`]), the params checked field by field ([`CodexMethod::params_schema`]),
//! the answer types Codex names irregularly, and the endpoint's routing. No method name is
//! spelled anywhere else in `src/` (`tests/it/layers.rs` greps for them).
//!
//! Measured against Codex CLI 0.169.0 and 0.171.0 (docs/codex-wire.md); a method Codex added
//! later passes through every proxy untouched and is tallied by name, unknown.

/// Which way a message goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Flow {
    /// A request from the client (OpenClaw or clawbridge) to Codex; Codex answers it.
    Request,
    /// A notification from the client to Codex.
    ClientNotification,
    /// A request from Codex to the client (tools, approvals, elicitations); the client answers.
    ServerRequest,
    /// A notification from Codex.
    Notification,
}

/// Whether a method's params name the thread it is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    /// `threadId` in the params (or, for `thread/start`, the thread it creates).
    Thread,
    /// The connection or the account.
    Connection,
}

/// The files of a generated schema folder every check reads, whatever the method.
pub const ROOT_SCHEMA_FILES: [&str; 4] = [
    "ClientRequest.json",
    "ClientNotification.json",
    "ServerRequest.json",
    "ServerNotification.json",
];

macro_rules! codex_methods {
    ($(
        $(#[$doc:meta])*
        $variant:ident, $constant:ident = $name:literal, $flow:ident, $scope:ident,
            files: [$($file:literal),*], params: $params:expr, answer: $answer:expr, kept: $kept:literal;
    )*) => {
        /// A Codex method clawbridge knows.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum CodexMethod {
            $( $(#[$doc])* $variant, )*
        }

        /// Each method's name on the wire, as a constant (usable in `match` patterns); every
        /// method of the table has one, whether or not code matches on it yet.
        #[allow(dead_code)]
        pub mod name {
            $( pub const $constant: &str = $name; )*
        }

        impl CodexMethod {
            /// Every method of the table, in its order.
            pub const ALL: &'static [CodexMethod] = &[$(CodexMethod::$variant),*];

            /// Its name on the wire.
            pub const fn name(self) -> &'static str {
                match self { $(CodexMethod::$variant => $name,)* }
            }

            /// The method of a wire name, if the table has it.
            pub fn from_name(name: &str) -> Option<CodexMethod> {
                match name {
                    $($name => Some(CodexMethod::$variant),)*
                    _ => None,
                }
            }

            pub const fn flow(self) -> Flow {
                match self { $(CodexMethod::$variant => Flow::$flow,)* }
            }

            pub const fn scope(self) -> Scope {
                match self { $(CodexMethod::$variant => Scope::$scope,)* }
            }

            /// The files of Codex's generated schema for its params and answer that clawbridge
            /// vendors (`fixtures/codex-schema/<version>/`).
            pub const fn schema_files(self) -> &'static [&'static str] {
                match self { $(CodexMethod::$variant => &[$($file),*],)* }
            }

            /// The params file (in the generated folder's `v2/`) that clawbridge checks field by
            /// field, for the params it builds itself.
            pub const fn params_schema(self) -> Option<&'static str> {
                match self { $(CodexMethod::$variant => $params,)* }
            }

            /// The answer's type, where Codex names it after neither the params nor the method
            /// (`Some("")`: the generated folder has no file for it; the answer is counted,
            /// never checked against a guess).
            pub const fn answer_schema(self) -> Option<&'static str> {
                match self { $(CodexMethod::$variant => $answer,)* }
            }

            /// What a new Codex release must keep for clawbridge to work: the methods it sends,
            /// answers or reads (`scripts/codex-compat` diffs these field by field).
            pub const fn kept(self) -> bool {
                match self { $(CodexMethod::$variant => $kept,)* }
            }
        }
    };
}

codex_methods! {
    /// The handshake: the client's name and capabilities; Codex's version and home.
    Initialize, INITIALIZE = "initialize", Request, Connection,
        files: ["v1/InitializeResponse.json"], params: None, answer: None, kept: true;
    ThreadStart, THREAD_START = "thread/start", Request, Thread,
        files: ["v2/ThreadStartParams.json", "v2/ThreadStartResponse.json"],
        params: Some("ThreadStartParams.json"), answer: None, kept: true;
    ThreadResume, THREAD_RESUME = "thread/resume", Request, Thread,
        files: ["v2/ThreadResumeParams.json", "v2/ThreadResumeResponse.json"],
        params: Some("ThreadResumeParams.json"), answer: None, kept: true;
    TurnStart, TURN_START = "turn/start", Request, Thread,
        files: ["v2/TurnStartParams.json", "v2/TurnStartResponse.json"],
        params: Some("TurnStartParams.json"), answer: None, kept: true;
    TurnSteer, TURN_STEER = "turn/steer", Request, Thread,
        files: ["v2/TurnSteerParams.json", "v2/TurnSteerResponse.json"],
        params: Some("TurnSteerParams.json"), answer: None, kept: true;
    TurnInterrupt, TURN_INTERRUPT = "turn/interrupt", Request, Thread,
        files: ["v2/TurnInterruptParams.json", "v2/TurnInterruptResponse.json"],
        params: None, answer: None, kept: true;
    /// The handshake's end, from the client.
    Initialized, INITIALIZED = "initialized", ClientNotification, Connection,
        files: [], params: None, answer: None, kept: true;
    ThreadFork, THREAD_FORK = "thread/fork", Request, Thread,
        files: [], params: None, answer: None, kept: false;
    ThreadUnsubscribe, THREAD_UNSUBSCRIBE = "thread/unsubscribe", Request, Thread,
        files: [], params: None, answer: None, kept: false;
    ThreadLoadedList, THREAD_LOADED_LIST = "thread/loaded/list", Request, Connection,
        files: [], params: None, answer: None, kept: false;
    AccountRead, ACCOUNT_READ = "account/read", Request, Connection,
        files: [], params: None, answer: None, kept: false;
    AccountLoginStart, ACCOUNT_LOGIN_START = "account/login/start", Request, Connection,
        files: [], params: None, answer: None, kept: false;
    AccountLogout, ACCOUNT_LOGOUT = "account/logout", Request, Connection,
        files: [], params: None, answer: Some("LogoutAccountResponse"), kept: false;
    AccountRateLimitsRead, ACCOUNT_RATE_LIMITS_READ = "account/rateLimits/read", Request, Connection,
        files: [], params: None, answer: Some("GetAccountRateLimitsResponse"), kept: false;
    AccountSecuritySetupRead, ACCOUNT_SECURITY_SETUP_READ = "account/securitySetup/read", Request, Connection,
        files: [], params: None, answer: Some("GetAccountSecuritySetupResponse"), kept: false;
    AccountUsageRead, ACCOUNT_USAGE_READ = "account/usage/read", Request, Connection,
        files: [], params: None, answer: Some("GetAccountTokenUsageResponse"), kept: false;
    AccountWorkspaceMessagesRead, ACCOUNT_WORKSPACE_MESSAGES_READ = "account/workspaceMessages/read", Request, Connection,
        files: [], params: None, answer: Some("GetWorkspaceMessagesResponse"), kept: false;
    AccountSessionList, ACCOUNT_SESSION_LIST = "accountSession/list", Request, Connection,
        files: [], params: None, answer: Some("AccountSessionsResponse"), kept: false;
    ConfigMcpServerReload, CONFIG_MCP_SERVER_RELOAD = "config/mcpServer/reload", Request, Connection,
        files: [], params: None, answer: Some("McpServerRefreshResponse"), kept: false;
    ConfigValueWrite, CONFIG_VALUE_WRITE = "config/value/write", Request, Connection,
        files: [], params: None, answer: Some("ConfigWriteResponse"), kept: false;
    ConfigBatchWrite, CONFIG_BATCH_WRITE = "config/batchWrite", Request, Connection,
        files: [], params: None, answer: Some("ConfigWriteResponse"), kept: false;
    ExternalAgentConfigImportReadHistories, EXTERNAL_AGENT_CONFIG_IMPORT_READ_HISTORIES = "externalAgentConfig/import/readHistories", Request, Connection,
        files: [], params: None, answer: Some("ExternalAgentConfigImportHistoriesReadResponse"), kept: false;
    /// Codex 0.171.0: its answer type has no file in the generated folder.
    ModelProviderDefaultSet, MODEL_PROVIDER_DEFAULT_SET = "modelProvider/default/set", Request, Connection,
        files: [], params: None, answer: Some(""), kept: false;
    /// A dynamic tool's call (OpenClaw's tools).
    ItemToolCall, ITEM_TOOL_CALL = "item/tool/call", ServerRequest, Thread,
        files: ["DynamicToolCallParams.json", "DynamicToolCallResponse.json"],
        params: None, answer: None, kept: true;
    ItemCommandExecutionRequestApproval, ITEM_COMMAND_EXECUTION_REQUEST_APPROVAL = "item/commandExecution/requestApproval", ServerRequest, Thread,
        files: ["CommandExecutionRequestApprovalResponse.json"], params: None, answer: None, kept: true;
    ItemFileChangeRequestApproval, ITEM_FILE_CHANGE_REQUEST_APPROVAL = "item/fileChange/requestApproval", ServerRequest, Thread,
        files: ["FileChangeRequestApprovalResponse.json"], params: None, answer: None, kept: true;
    /// The v1 approvals, still sent by some Codex paths.
    ExecCommandApproval, EXEC_COMMAND_APPROVAL = "execCommandApproval", ServerRequest, Thread,
        files: ["ExecCommandApprovalResponse.json"], params: None, answer: None, kept: true;
    ApplyPatchApproval, APPLY_PATCH_APPROVAL = "applyPatchApproval", ServerRequest, Thread,
        files: ["ApplyPatchApprovalResponse.json"], params: None, answer: None, kept: true;
    ItemToolRequestUserInput, ITEM_TOOL_REQUEST_USER_INPUT = "item/tool/requestUserInput", ServerRequest, Thread,
        files: ["ToolRequestUserInputResponse.json"], params: None, answer: None, kept: true;
    McpServerElicitationRequest, MCP_SERVER_ELICITATION_REQUEST = "mcpServer/elicitation/request", ServerRequest, Thread,
        files: ["McpServerElicitationRequestResponse.json"], params: None, answer: None, kept: true;
    CurrentTimeRead, CURRENT_TIME_READ = "currentTime/read", ServerRequest, Connection,
        files: [], params: None, answer: None, kept: false;
    ItemAgentMessageDelta, ITEM_AGENT_MESSAGE_DELTA = "item/agentMessage/delta", Notification, Thread,
        files: [], params: None, answer: None, kept: true;
    ItemReasoningSummaryTextDelta, ITEM_REASONING_SUMMARY_TEXT_DELTA = "item/reasoning/summaryTextDelta", Notification, Thread,
        files: [], params: None, answer: None, kept: true;
    ItemReasoningTextDelta, ITEM_REASONING_TEXT_DELTA = "item/reasoning/textDelta", Notification, Thread,
        files: [], params: None, answer: None, kept: true;
    ItemReasoningSummaryPartAdded, ITEM_REASONING_SUMMARY_PART_ADDED = "item/reasoning/summaryPartAdded", Notification, Thread,
        files: [], params: None, answer: None, kept: true;
    ItemCommandExecutionOutputDelta, ITEM_COMMAND_EXECUTION_OUTPUT_DELTA = "item/commandExecution/outputDelta", Notification, Thread,
        files: [], params: None, answer: None, kept: true;
    ItemFileChangeOutputDelta, ITEM_FILE_CHANGE_OUTPUT_DELTA = "item/fileChange/outputDelta", Notification, Thread,
        files: [], params: None, answer: None, kept: true;
    ItemPlanDelta, ITEM_PLAN_DELTA = "item/plan/delta", Notification, Thread,
        files: [], params: None, answer: None, kept: true;
    ItemStarted, ITEM_STARTED = "item/started", Notification, Thread,
        files: [], params: None, answer: None, kept: true;
    ItemCompleted, ITEM_COMPLETED = "item/completed", Notification, Thread,
        files: [], params: None, answer: None, kept: true;
    TurnStarted, TURN_STARTED = "turn/started", Notification, Thread,
        files: [], params: None, answer: None, kept: true;
    TurnCompleted, TURN_COMPLETED = "turn/completed", Notification, Thread,
        files: [], params: None, answer: None, kept: true;
    TurnDiffUpdated, TURN_DIFF_UPDATED = "turn/diff/updated", Notification, Thread,
        files: [], params: None, answer: None, kept: true;
    TurnPlanUpdated, TURN_PLAN_UPDATED = "turn/plan/updated", Notification, Thread,
        files: [], params: None, answer: None, kept: true;
    ThreadStarted, THREAD_STARTED = "thread/started", Notification, Thread,
        files: [], params: None, answer: None, kept: true;
    ThreadStatusChanged, THREAD_STATUS_CHANGED = "thread/status/changed", Notification, Thread,
        files: [], params: None, answer: None, kept: true;
    ThreadTokenUsageUpdated, THREAD_TOKEN_USAGE_UPDATED = "thread/tokenUsage/updated", Notification, Thread,
        files: [], params: None, answer: None, kept: true;
    /// The thread's context was compacted (traces count compactions per turn).
    ThreadCompacted, THREAD_COMPACTED = "thread/compacted", Notification, Thread,
        files: [], params: None, answer: None, kept: false;
    AccountRateLimitsUpdated, ACCOUNT_RATE_LIMITS_UPDATED = "account/rateLimits/updated", Notification, Connection,
        files: [], params: None, answer: None, kept: true;
    /// Codex's error notification (a turn's failure, told before `turn/completed`).
    Error, ERROR = "error", Notification, Thread,
        files: [], params: None, answer: None, kept: true;
    /// A warning about a thread (`transcript show` says it).
    Warning, WARNING = "warning", Notification, Thread,
        files: [], params: None, answer: None, kept: false;
    /// A warning about Codex's configuration (`transcript show` says it).
    ConfigWarning, CONFIG_WARNING = "configWarning", Notification, Connection,
        files: [], params: None, answer: None, kept: false;
}

impl CodexMethod {
    /// The methods whose answer type Codex names irregularly, with that name.
    pub fn irregular_answers() -> impl Iterator<Item = (CodexMethod, &'static str)> {
        CodexMethod::ALL
            .iter()
            .filter_map(|method| Some((*method, method.answer_schema()?)))
            .filter(|(_, answer)| !answer.is_empty())
    }
}

/// The files of a generated schema folder clawbridge vendors: the root files, then each kept
/// method's (`scripts/regen-codex-schema` copies these; `scripts/codex-compat` diffs them).
pub fn vendored_files() -> Vec<&'static str> {
    ROOT_SCHEMA_FILES
        .iter()
        .copied()
        .chain(
            CodexMethod::ALL
                .iter()
                .flat_map(|method| method.schema_files().iter().copied()),
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_read_back() {
        let mut seen = std::collections::HashSet::new();
        for method in CodexMethod::ALL {
            assert!(seen.insert(method.name()), "{} twice", method.name());
            assert_eq!(CodexMethod::from_name(method.name()), Some(*method));
        }
        assert_eq!(CodexMethod::from_name("bogus/method"), None);
        assert_eq!(name::TURN_STARTED, "turn/started");
        assert_eq!(
            CodexMethod::ThreadStart.params_schema(),
            Some("ThreadStartParams.json")
        );
        assert_eq!(vendored_files().len(), 23);
    }
}

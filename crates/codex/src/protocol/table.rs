//! The one table of the Codex app-server methods clawbridge knows, in the manner of codex-rs's
//! `client_request_definitions!`: each method once, with its direction, whether it belongs to a
//! thread, the generated-schema files its params and answer are checked against, and, for the
//! requests clawbridge sends, their types (the `typed` column: a marker with its params and
//! result, whose [`Method`](super::methods::Method) impl the table generates into [`typed`]).
//!
//! Everything else reads it: the names the code matches on and sends ([`name`]), the typed
//! requests (`Method::NAME` is the row's name), the notifications the wire names without
//! holding the line (`wire`), what a new Codex must keep for clawbridge ([`CodexMethod::kept`]:
//! the conformance families and `schema diff`), the generated-schema files vendored
//! ([`vendored_files`]), the params checked field by field ([`CodexMethod::params_schema`]),
//! the answer types Codex names irregularly, and the endpoint's routing. No method name is
//! spelled anywhere else in `src/` (`tests/it/layers.rs` greps for them).
//!
//! Every request of Codex CLI 0.169.0 and 0.171.0 is here with its [`Access`]: what a named
//! client of the endpoint may do with it (docs/codex-wire.md, docs/threat-model.md). A method
//! Codex added later passes through the stdio proxy untouched and is tallied by name, unknown;
//! the endpoint refuses it to named clients until the table knows it
//! (`tests::every_request_of_the_vendored_schemas_has_a_rule` fails on a new vendored version
//! with a request the table lacks).

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

/// What a client that is not the operator may do with a request (the endpoint's method
/// policy, `proxy::endpoint::policy`). The operator's token keeps Codex's whole API; a named
/// client gets what its rule says and, for host access, what the operator granted it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// The handshake and the account a connection runs as: the endpoint answers or routes them
    /// itself.
    Endpoint,
    /// What the member offers every client alike (models, features, the configuration, the
    /// connection's own account), and a new thread: anyone. A `threadId` it names must be the
    /// caller's, and the folders it names must lie within the workspace roots.
    Open,
    /// About the thread its `threadId` names: only that thread's owner.
    Thread,
    /// Lists or searches threads: a named client's answer holds only its own.
    Listing,
    /// Reaches past the threads (the host's files and processes, configuration every client of
    /// a member shares, plugins, MCP servers, the account itself): only with the grant.
    Host(Grant),
    /// Cannot be kept to one tenant (it acts on or reports every thread of a Codex home, or the
    /// whole app-server): the operator's only.
    Operator,
}

/// Where the endpoint (`app-server --listen`) sends a request: the table's routing column,
/// which its router reads before anything else.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Route {
    /// The endpoint answers it itself: the handshake, the account a connection runs as, the
    /// threads loaded over every member of the connection's account.
    Endpoint,
    /// A new thread: the account's least busy member. It names no thread yet, whatever its
    /// params carry.
    NewThread,
    /// The member of the thread its `threadId` names (its owner's only), else the account's
    /// least busy member. Every method the table has no other route for, and every method it
    /// does not know.
    Member,
}

/// What the operator may grant a named client past its own threads (`clawbridge client add
/// NAME --allow GRANT`).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Grant {
    /// The member host's files (`fs/*`, `fuzzyFileSearch*`), within the workspace roots.
    Fs,
    /// Commands and processes on the member host (`command/exec*`, `process/*`,
    /// `thread/shellCommand`), and hooks and notify commands in a thread's `config`.
    Exec,
    /// Configuration every client of a member shares (`config/*/write`, providers, features,
    /// environments, projects and sections), and keys of a thread's `config` past the ones
    /// OpenClaw sends.
    Config,
    /// Plugin marketplaces and installs.
    Plugins,
    /// MCP servers: logins, tool calls, resources, reloads.
    Mcp,
    /// The account itself: sessions, credits, cloud setups, verification.
    Account,
}

impl Grant {
    /// Every grant, in its order.
    pub const ALL: [Grant; 6] = [
        Grant::Fs,
        Grant::Exec,
        Grant::Config,
        Grant::Plugins,
        Grant::Mcp,
        Grant::Account,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Grant::Fs => "fs",
            Grant::Exec => "exec",
            Grant::Config => "config",
            Grant::Plugins => "plugins",
            Grant::Mcp => "mcp",
            Grant::Account => "account",
        }
    }

    /// The grant a name (as `--allow` takes it) stands for.
    pub fn parse(name: &str) -> Option<Grant> {
        Grant::ALL.into_iter().find(|grant| grant.as_str() == name)
    }
}

impl std::fmt::Display for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The files of a generated schema folder every check reads, whatever the method.
pub const ROOT_SCHEMA_FILES: [&str; 4] = [
    "ClientRequest.json",
    "ClientNotification.json",
    "ServerRequest.json",
    "ServerNotification.json",
];

macro_rules! codex_methods {
    (@access) => { None };
    (@access $access:expr) => { Some($access) };
    (@route) => { Route::Member };
    (@route $route:expr) => { $route };
    ($(
        $(#[$doc:meta])*
        $variant:ident, $constant:ident = $name:literal, $flow:ident,
            files: [$($file:literal),*], params: $params:expr, answer: $answer:expr, kept: $kept:literal
            $(, access: $access:expr)? $(, route: $route:expr)?
            $(, typed: [$($(#[$typed_doc:meta])* $marker:ident($typed_params:ty => $typed_result:ty)),+])?;
    )*) => {
        /// The requests clawbridge sends, typed by the table's `typed` column: each marker is a
        /// [`Method`](super::methods::Method) whose name is its row's, so a typed call cannot
        /// name another method than the one its params are for. [`super::methods`] holds the
        /// params and results and re-exports the markers.
        pub mod typed {
            #[allow(unused_imports)]
            use super::super::methods::*;
            #[allow(unused_imports)]
            use super::super::params::*;
            $($($(
                $(#[$typed_doc])*
                pub struct $marker;

                impl Method for $marker {
                    const NAME: &'static str = $name;
                    type Params = $typed_params;
                    type Result = $typed_result;
                }
            )+)?)*
        }

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

            /// What a named client (not the operator) may do with a request: every request of
            /// the table has a rule; notifications and server requests have none.
            pub const fn access(self) -> Option<Access> {
                match self { $(CodexMethod::$variant => codex_methods!(@access $($access)?),)* }
            }

            /// Where the endpoint sends it ([`Route`]).
            pub const fn route(self) -> Route {
                match self { $(CodexMethod::$variant => codex_methods!(@route $($route)?),)* }
            }
        }
    };
}

codex_methods! {
    /// The handshake: the client's name and capabilities; Codex's version and home.
    Initialize, INITIALIZE = "initialize", Request,
        files: ["v1/InitializeResponse.json"], params: None, answer: None, kept: true, access: Access::Endpoint,
        route: Route::Endpoint,
        typed: [
            /// clawbridge names itself and, when asked, opts into Codex's experimental API; the
            /// answer is kept whole (the endpoint hands the same one to every client).
            Initialize(InitializeParams => serde_json::Value)
        ];
    ThreadStart, THREAD_START = "thread/start", Request,
        files: ["v2/ThreadStartParams.json", "v2/ThreadStartResponse.json"],
        params: Some("ThreadStartParams.json"), answer: None, kept: true, access: Access::Open,
        route: Route::NewThread, typed: [ThreadStart(ThreadStartParams => ThreadOpened)];
    ThreadResume, THREAD_RESUME = "thread/resume", Request,
        files: ["v2/ThreadResumeParams.json", "v2/ThreadResumeResponse.json"],
        params: Some("ThreadResumeParams.json"), answer: None, kept: true, access: Access::Thread,
        typed: [
            ThreadResume(ThreadResumeParams => ThreadOpened),
            /// The thread alone: load a thread Codex has on disk onto this app-server (the
            /// endpoint does it before relaying a turn to a member that has not loaded the
            /// thread), keeping what the thread was started with.
            ThreadReattach(ThreadIdParams => serde::de::IgnoredAny)
        ];
    TurnStart, TURN_START = "turn/start", Request,
        files: ["v2/TurnStartParams.json", "v2/TurnStartResponse.json"],
        params: Some("TurnStartParams.json"), answer: None, kept: true, access: Access::Thread,
        typed: [TurnStart(TurnStartParams => TurnStarted)];
    TurnSteer, TURN_STEER = "turn/steer", Request,
        files: ["v2/TurnSteerParams.json", "v2/TurnSteerResponse.json"],
        params: Some("TurnSteerParams.json"), answer: None, kept: true, access: Access::Thread,
        typed: [
            /// Add user input to a running turn (Codex 0.169.0 and 0.171.0 measured).
            TurnSteer(TurnSteerParams => TurnSteerResult)
        ];
    TurnInterrupt, TURN_INTERRUPT = "turn/interrupt", Request,
        files: ["v2/TurnInterruptParams.json", "v2/TurnInterruptResponse.json"],
        params: None, answer: None, kept: true, access: Access::Thread,
        typed: [
            /// End a running turn (Codex answers `{}` and then `turn/completed`).
            TurnInterrupt(TurnInterruptParams => serde::de::IgnoredAny)
        ];
    /// The handshake's end, from the client.
    Initialized, INITIALIZED = "initialized", ClientNotification,
        files: [], params: None, answer: None, kept: true;
    ThreadFork, THREAD_FORK = "thread/fork", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadUnsubscribe, THREAD_UNSUBSCRIBE = "thread/unsubscribe", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread,
        typed: [
            /// Let Codex unload a thread nobody follows any more.
            ThreadUnsubscribe(ThreadIdParams => serde::de::IgnoredAny)
        ];
    ThreadLoadedList, THREAD_LOADED_LIST = "thread/loaded/list", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Listing, route: Route::Endpoint,
        typed: [
            /// The threads an app-server holds in memory (one page, no cursor).
            ThreadLoadedList(ThreadLoadedListParams => ThreadLoadedListResult)
        ];
    AccountRead, ACCOUNT_READ = "account/read", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Open;
    AccountLoginStart, ACCOUNT_LOGIN_START = "account/login/start", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Endpoint, route: Route::Endpoint;
    AccountLogout, ACCOUNT_LOGOUT = "account/logout", Request,
        files: [], params: None, answer: Some("LogoutAccountResponse"), kept: false, access: Access::Endpoint,
        route: Route::Endpoint;
    AccountRateLimitsRead, ACCOUNT_RATE_LIMITS_READ = "account/rateLimits/read", Request,
        files: [], params: None, answer: Some("GetAccountRateLimitsResponse"), kept: false, access: Access::Open;
    AccountSecuritySetupRead, ACCOUNT_SECURITY_SETUP_READ = "account/securitySetup/read", Request,
        files: [], params: None, answer: Some("GetAccountSecuritySetupResponse"), kept: false, access: Access::Open;
    AccountUsageRead, ACCOUNT_USAGE_READ = "account/usage/read", Request,
        files: [], params: None, answer: Some("GetAccountTokenUsageResponse"), kept: false, access: Access::Open;
    AccountWorkspaceMessagesRead, ACCOUNT_WORKSPACE_MESSAGES_READ = "account/workspaceMessages/read", Request,
        files: [], params: None, answer: Some("GetWorkspaceMessagesResponse"), kept: false, access: Access::Open;
    AccountSessionList, ACCOUNT_SESSION_LIST = "accountSession/list", Request,
        files: [], params: None, answer: Some("AccountSessionsResponse"), kept: false, access: Access::Host(Grant::Account);
    ConfigMcpServerReload, CONFIG_MCP_SERVER_RELOAD = "config/mcpServer/reload", Request,
        files: [], params: None, answer: Some("McpServerRefreshResponse"), kept: false, access: Access::Host(Grant::Mcp);
    ConfigValueWrite, CONFIG_VALUE_WRITE = "config/value/write", Request,
        files: [], params: None, answer: Some("ConfigWriteResponse"), kept: false, access: Access::Host(Grant::Config);
    ConfigBatchWrite, CONFIG_BATCH_WRITE = "config/batchWrite", Request,
        files: [], params: None, answer: Some("ConfigWriteResponse"), kept: false, access: Access::Host(Grant::Config);
    ExternalAgentConfigImportReadHistories, EXTERNAL_AGENT_CONFIG_IMPORT_READ_HISTORIES = "externalAgentConfig/import/readHistories", Request,
        files: [], params: None, answer: Some("ExternalAgentConfigImportHistoriesReadResponse"), kept: false, access: Access::Host(Grant::Config);
    /// Codex 0.171.0: its answer type has no file in the generated folder.
    ModelProviderDefaultSet, MODEL_PROVIDER_DEFAULT_SET = "modelProvider/default/set", Request,
        files: [], params: None, answer: Some(""), kept: false, access: Access::Host(Grant::Config);
    // Every other request of Codex 0.169.0 and 0.171.0, with what a named client may do with it.
    ServerDiagnostics, SERVER_DIAGNOSTICS = "server/diagnostics", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Operator;
    UserVerificationStatus, USER_VERIFICATION_STATUS = "userVerification/status", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Account);
    UserVerificationEnroll, USER_VERIFICATION_ENROLL = "userVerification/enroll", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Account);
    UserVerificationDelete, USER_VERIFICATION_DELETE = "userVerification/delete", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Account);
    UserVerificationVerify, USER_VERIFICATION_VERIFY = "userVerification/verify", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Account);
    UserVerificationCancel, USER_VERIFICATION_CANCEL = "userVerification/cancel", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Account);
    ThreadSample, THREAD_SAMPLE = "thread/sample", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadSampleCancel, THREAD_SAMPLE_CANCEL = "thread/sample/cancel", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Open;
    ThreadArchive, THREAD_ARCHIVE = "thread/archive", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadDelete, THREAD_DELETE = "thread/delete", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadIncrementElicitation, THREAD_INCREMENT_ELICITATION = "thread/increment_elicitation", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadDecrementElicitation, THREAD_DECREMENT_ELICITATION = "thread/decrement_elicitation", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadNameSet, THREAD_NAME_SET = "thread/name/set", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadPredictionRequest, THREAD_PREDICTION_REQUEST = "thread/prediction/request", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadGoalSet, THREAD_GOAL_SET = "thread/goal/set", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadGoalGet, THREAD_GOAL_GET = "thread/goal/get", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadGoalClear, THREAD_GOAL_CLEAR = "thread/goal/clear", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadQueueAdd, THREAD_QUEUE_ADD = "thread/queue/add", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadQueueList, THREAD_QUEUE_LIST = "thread/queue/list", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadQueueUpdate, THREAD_QUEUE_UPDATE = "thread/queue/update", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadQueueDelete, THREAD_QUEUE_DELETE = "thread/queue/delete", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadQueueReorder, THREAD_QUEUE_REORDER = "thread/queue/reorder", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadQueueStart, THREAD_QUEUE_START = "thread/queue/start", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadMetadataUpdate, THREAD_METADATA_UPDATE = "thread/metadata/update", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadAttachmentAdd, THREAD_ATTACHMENT_ADD = "thread/attachment/add", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadAttachmentList, THREAD_ATTACHMENT_LIST = "thread/attachment/list", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadAttachmentOwnerList, THREAD_ATTACHMENT_OWNER_LIST = "thread/attachmentOwner/list", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Listing;
    ThreadAttachmentRemove, THREAD_ATTACHMENT_REMOVE = "thread/attachment/remove", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadSectionMove, THREAD_SECTION_MOVE = "thread/section/move", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Config);
    ThreadSettingsUpdate, THREAD_SETTINGS_UPDATE = "thread/settings/update", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadMemoryModeSet, THREAD_MEMORY_MODE_SET = "thread/memoryMode/set", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadMemoryRead, THREAD_MEMORY_READ = "thread/memory/read", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    MemoryStatus, MEMORY_STATUS = "memory/status", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Operator;
    MemoryReset, MEMORY_RESET = "memory/reset", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Operator;
    RolloutCompress, ROLLOUT_COMPRESS = "rollout/compress", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Operator;
    ThreadUnarchive, THREAD_UNARCHIVE = "thread/unarchive", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadCompactStart, THREAD_COMPACT_START = "thread/compact/start", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadShellCommand, THREAD_SHELL_COMMAND = "thread/shellCommand", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Exec);
    ThreadApproveGuardianDeniedAction, THREAD_APPROVE_GUARDIAN_DENIED_ACTION = "thread/approveGuardianDeniedAction", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadBackgroundTerminalsClean, THREAD_BACKGROUND_TERMINALS_CLEAN = "thread/backgroundTerminals/clean", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadBackgroundTerminalsList, THREAD_BACKGROUND_TERMINALS_LIST = "thread/backgroundTerminals/list", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadBackgroundTerminalsTerminate, THREAD_BACKGROUND_TERMINALS_TERMINATE = "thread/backgroundTerminals/terminate", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadRevert, THREAD_REVERT = "thread/revert", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadList, THREAD_LIST = "thread/list", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Listing;
    ProjectList, PROJECT_LIST = "project/list", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Config);
    ProjectRead, PROJECT_READ = "project/read", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Config);
    ProjectCreate, PROJECT_CREATE = "project/create", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Config);
    ProjectImport, PROJECT_IMPORT = "project/import", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Config);
    ProjectUpdate, PROJECT_UPDATE = "project/update", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Config);
    ProjectMove, PROJECT_MOVE = "project/move", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Config);
    ProjectDelete, PROJECT_DELETE = "project/delete", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Config);
    ThreadSectionList, THREAD_SECTION_LIST = "threadSection/list", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Config);
    ThreadSectionCreate, THREAD_SECTION_CREATE = "threadSection/create", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Config);
    ThreadSectionUpdate, THREAD_SECTION_UPDATE = "threadSection/update", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Config);
    ThreadSectionDelete, THREAD_SECTION_DELETE = "threadSection/delete", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Config);
    ThreadSearch, THREAD_SEARCH = "thread/search", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Listing;
    ThreadSearchOccurrences, THREAD_SEARCH_OCCURRENCES = "thread/searchOccurrences", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadRead, THREAD_READ = "thread/read", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadReadStateUpdate, THREAD_READ_STATE_UPDATE = "thread/readState/update", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadTurnsList, THREAD_TURNS_LIST = "thread/turns/list", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadItemsList, THREAD_ITEMS_LIST = "thread/items/list", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadItemsRead, THREAD_ITEMS_READ = "thread/items/read", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadGuardianReview, THREAD_GUARDIAN_REVIEW = "thread/guardianReview", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadInjectItems, THREAD_INJECT_ITEMS = "thread/inject_items", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadPrepareApprovedPlan, THREAD_PREPARE_APPROVED_PLAN = "thread/prepareApprovedPlan", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    SkillsList, SKILLS_LIST = "skills/list", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Open;
    SkillsExtraRootsSet, SKILLS_EXTRA_ROOTS_SET = "skills/extraRoots/set", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Config);
    HooksList, HOOKS_LIST = "hooks/list", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Open;
    MarketplaceAdd, MARKETPLACE_ADD = "marketplace/add", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Plugins);
    MarketplaceRemove, MARKETPLACE_REMOVE = "marketplace/remove", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Plugins);
    MarketplaceUpgrade, MARKETPLACE_UPGRADE = "marketplace/upgrade", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Plugins);
    PluginList, PLUGIN_LIST = "plugin/list", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Open;
    PluginSearch, PLUGIN_SEARCH = "plugin/search", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Open;
    PluginInstalled, PLUGIN_INSTALLED = "plugin/installed", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Open;
    PluginReconcile, PLUGIN_RECONCILE = "plugin/reconcile", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Plugins);
    PluginRead, PLUGIN_READ = "plugin/read", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Plugins);
    PluginSkillRead, PLUGIN_SKILL_READ = "plugin/skill/read", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Plugins);
    PluginShareSave, PLUGIN_SHARE_SAVE = "plugin/share/save", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Plugins);
    PluginShareUpdateTargets, PLUGIN_SHARE_UPDATE_TARGETS = "plugin/share/updateTargets", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Plugins);
    PluginShareList, PLUGIN_SHARE_LIST = "plugin/share/list", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Plugins);
    PluginShareCheckout, PLUGIN_SHARE_CHECKOUT = "plugin/share/checkout", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Plugins);
    PluginShareDelete, PLUGIN_SHARE_DELETE = "plugin/share/delete", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Plugins);
    AppRead, APP_READ = "app/read", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Open;
    AppList, APP_LIST = "app/list", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Open;
    AppInstalled, APP_INSTALLED = "app/installed", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Open;
    FsReadFile, FS_READ_FILE = "fs/readFile", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Fs);
    FsWriteFile, FS_WRITE_FILE = "fs/writeFile", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Fs);
    FsCreateDirectory, FS_CREATE_DIRECTORY = "fs/createDirectory", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Fs);
    FsGetMetadata, FS_GET_METADATA = "fs/getMetadata", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Fs);
    FsReadDirectory, FS_READ_DIRECTORY = "fs/readDirectory", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Fs);
    FsRemove, FS_REMOVE = "fs/remove", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Fs);
    FsCopy, FS_COPY = "fs/copy", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Fs);
    FsWatch, FS_WATCH = "fs/watch", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Fs);
    FsUnwatch, FS_UNWATCH = "fs/unwatch", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Fs);
    SkillsConfigWrite, SKILLS_CONFIG_WRITE = "skills/config/write", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Config);
    PluginInstall, PLUGIN_INSTALL = "plugin/install", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Plugins);
    PluginUninstall, PLUGIN_UNINSTALL = "plugin/uninstall", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Plugins);
    TurnSettingsUpdate, TURN_SETTINGS_UPDATE = "turn/settings/update", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadRealtimeStart, THREAD_REALTIME_START = "thread/realtime/start", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadRealtimeAppendAudio, THREAD_REALTIME_APPEND_AUDIO = "thread/realtime/appendAudio", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadRealtimeAppendText, THREAD_REALTIME_APPEND_TEXT = "thread/realtime/appendText", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadRealtimeAppendSpeech, THREAD_REALTIME_APPEND_SPEECH = "thread/realtime/appendSpeech", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadRealtimeStop, THREAD_REALTIME_STOP = "thread/realtime/stop", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadTimelineList, THREAD_TIMELINE_LIST = "thread/timeline/list", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ThreadRealtimeListVoices, THREAD_REALTIME_LIST_VOICES = "thread/realtime/listVoices", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Open;
    ReviewStart, REVIEW_START = "review/start", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Thread;
    ModelList, MODEL_LIST = "model/list", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Open;
    AccountGatewayOAuthRead, ACCOUNT_GATEWAY_OAUTH_READ = "account/gatewayOAuth/read", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Open;
    AccountGatewayOAuthLogin, ACCOUNT_GATEWAY_OAUTH_LOGIN = "account/gatewayOAuth/login", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Account);
    AccountGatewayOAuthCancel, ACCOUNT_GATEWAY_OAUTH_CANCEL = "account/gatewayOAuth/cancel", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Account);
    ModelProviderList, MODEL_PROVIDER_LIST = "modelProvider/list", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Open;
    ModelProviderConfigWrite, MODEL_PROVIDER_CONFIG_WRITE = "modelProvider/config/write", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Config);
    ModelProviderCapabilitiesRead, MODEL_PROVIDER_CAPABILITIES_READ = "modelProvider/capabilities/read", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Open;
    ExperimentalFeatureList, EXPERIMENTAL_FEATURE_LIST = "experimentalFeature/list", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Open;
    PermissionProfileList, PERMISSION_PROFILE_LIST = "permissionProfile/list", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Open;
    ExperimentalFeatureEnablementSet, EXPERIMENTAL_FEATURE_ENABLEMENT_SET = "experimentalFeature/enablement/set", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Config);
    RemoteControlEnable, REMOTE_CONTROL_ENABLE = "remoteControl/enable", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Operator;
    RemoteControlDisable, REMOTE_CONTROL_DISABLE = "remoteControl/disable", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Operator;
    RemoteControlStatusRead, REMOTE_CONTROL_STATUS_READ = "remoteControl/status/read", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Operator;
    RemoteControlPairingStart, REMOTE_CONTROL_PAIRING_START = "remoteControl/pairing/start", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Operator;
    RemoteControlPairingStatus, REMOTE_CONTROL_PAIRING_STATUS = "remoteControl/pairing/status", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Operator;
    RemoteControlClientList, REMOTE_CONTROL_CLIENT_LIST = "remoteControl/client/list", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Operator;
    RemoteControlClientRevoke, REMOTE_CONTROL_CLIENT_REVOKE = "remoteControl/client/revoke", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Operator;
    CollaborationModeList, COLLABORATION_MODE_LIST = "collaborationMode/list", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Open;
    MockExperimentalMethod, MOCK_EXPERIMENTAL_METHOD = "mock/experimentalMethod", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Operator;
    EnvironmentAdd, ENVIRONMENT_ADD = "environment/add", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Config);
    EnvironmentInfo, ENVIRONMENT_INFO = "environment/info", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Config);
    EnvironmentStatus, ENVIRONMENT_STATUS = "environment/status", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Config);
    McpServerOauthLogin, MCP_SERVER_OAUTH_LOGIN = "mcpServer/oauth/login", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Mcp);
    McpServerStatusList, MCP_SERVER_STATUS_LIST = "mcpServerStatus/list", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Open;
    McpServerResourceRead, MCP_SERVER_RESOURCE_READ = "mcpServer/resource/read", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Mcp);
    McpServerEventStreamStart, MCP_SERVER_EVENT_STREAM_START = "mcpServer/event/stream/start", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Mcp);
    McpServerEventStreamStop, MCP_SERVER_EVENT_STREAM_STOP = "mcpServer/event/stream/stop", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Mcp);
    McpServerToolCall, MCP_SERVER_TOOL_CALL = "mcpServer/tool/call", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Mcp);
    WindowsSandboxSetupStart, WINDOWS_SANDBOX_SETUP_START = "windowsSandbox/setupStart", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Config);
    WindowsSandboxReadiness, WINDOWS_SANDBOX_READINESS = "windowsSandbox/readiness", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Open;
    AccountBedrockDiscover, ACCOUNT_BEDROCK_DISCOVER = "account/bedrock/discover", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Account);
    AccountBedrockSetup, ACCOUNT_BEDROCK_SETUP = "account/bedrock/setup", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Account);
    AccountGcpSetup, ACCOUNT_GCP_SETUP = "account/gcp/setup", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Account);
    AccountBedrockCheckGovCloudRequirements, ACCOUNT_BEDROCK_CHECK_GOV_CLOUD_REQUIREMENTS = "account/bedrock/checkGovCloudRequirements", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Account);
    AccountLoginCancel, ACCOUNT_LOGIN_CANCEL = "account/login/cancel", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Account);
    AccountSessionSwitch, ACCOUNT_SESSION_SWITCH = "accountSession/switch", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Account);
    AccountRateLimitResetCreditConsume, ACCOUNT_RATE_LIMIT_RESET_CREDIT_CONSUME = "account/rateLimitResetCredit/consume", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Account);
    AccountSendAddCreditsNudgeEmail, ACCOUNT_SEND_ADD_CREDITS_NUDGE_EMAIL = "account/sendAddCreditsNudgeEmail", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Account);
    FeedbackUpload, FEEDBACK_UPLOAD = "feedback/upload", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Operator;
    FeedbackSave, FEEDBACK_SAVE = "feedback/save", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Operator;
    CommandExec, COMMAND_EXEC = "command/exec", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Exec);
    CommandExecWrite, COMMAND_EXEC_WRITE = "command/exec/write", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Exec);
    CommandExecTerminate, COMMAND_EXEC_TERMINATE = "command/exec/terminate", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Exec);
    CommandExecResize, COMMAND_EXEC_RESIZE = "command/exec/resize", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Exec);
    ProcessSpawn, PROCESS_SPAWN = "process/spawn", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Exec);
    ProcessWriteStdin, PROCESS_WRITE_STDIN = "process/writeStdin", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Exec);
    ProcessKill, PROCESS_KILL = "process/kill", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Exec);
    ProcessResizePty, PROCESS_RESIZE_PTY = "process/resizePty", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Exec);
    ConfigRead, CONFIG_READ = "config/read", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Open;
    ExternalAgentConfigDetect, EXTERNAL_AGENT_CONFIG_DETECT = "externalAgentConfig/detect", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Config);
    ExternalAgentConfigImport, EXTERNAL_AGENT_CONFIG_IMPORT = "externalAgentConfig/import", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Config);
    ExternalAgentConfigImportRecordHistory, EXTERNAL_AGENT_CONFIG_IMPORT_RECORD_HISTORY = "externalAgentConfig/import/recordHistory", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Config);
    ConfigRequirementsRead, CONFIG_REQUIREMENTS_READ = "configRequirements/read", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Open;
    FuzzyFileSearch, FUZZY_FILE_SEARCH = "fuzzyFileSearch", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Fs);
    FuzzyFileSearchSessionStart, FUZZY_FILE_SEARCH_SESSION_START = "fuzzyFileSearch/sessionStart", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Fs);
    FuzzyFileSearchSessionUpdate, FUZZY_FILE_SEARCH_SESSION_UPDATE = "fuzzyFileSearch/sessionUpdate", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Fs);
    FuzzyFileSearchSessionStop, FUZZY_FILE_SEARCH_SESSION_STOP = "fuzzyFileSearch/sessionStop", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Host(Grant::Fs);
    ThreadSearchStream, THREAD_SEARCH_STREAM = "thread/search/stream", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Operator;
    ThreadSearchCancel, THREAD_SEARCH_CANCEL = "thread/search/cancel", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Operator;
    ThreadSearchStreamCancel, THREAD_SEARCH_STREAM_CANCEL = "thread/search/stream/cancel", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Operator;
    ThreadRealtimeList, THREAD_REALTIME_LIST = "thread/realtime/list", Request,
        files: [], params: None, answer: None, kept: false, access: Access::Operator;
    /// A dynamic tool's call (OpenClaw's tools).
    ItemToolCall, ITEM_TOOL_CALL = "item/tool/call", ServerRequest,
        files: ["DynamicToolCallParams.json", "DynamicToolCallResponse.json"],
        params: None, answer: None, kept: true;
    ItemCommandExecutionRequestApproval, ITEM_COMMAND_EXECUTION_REQUEST_APPROVAL = "item/commandExecution/requestApproval", ServerRequest,
        files: ["CommandExecutionRequestApprovalResponse.json"], params: None, answer: None, kept: true;
    ItemFileChangeRequestApproval, ITEM_FILE_CHANGE_REQUEST_APPROVAL = "item/fileChange/requestApproval", ServerRequest,
        files: ["FileChangeRequestApprovalResponse.json"], params: None, answer: None, kept: true;
    /// The v1 approvals, still sent by some Codex paths.
    ExecCommandApproval, EXEC_COMMAND_APPROVAL = "execCommandApproval", ServerRequest,
        files: ["ExecCommandApprovalResponse.json"], params: None, answer: None, kept: true;
    ApplyPatchApproval, APPLY_PATCH_APPROVAL = "applyPatchApproval", ServerRequest,
        files: ["ApplyPatchApprovalResponse.json"], params: None, answer: None, kept: true;
    ItemToolRequestUserInput, ITEM_TOOL_REQUEST_USER_INPUT = "item/tool/requestUserInput", ServerRequest,
        files: ["ToolRequestUserInputResponse.json"], params: None, answer: None, kept: true;
    McpServerElicitationRequest, MCP_SERVER_ELICITATION_REQUEST = "mcpServer/elicitation/request", ServerRequest,
        files: ["McpServerElicitationRequestResponse.json"], params: None, answer: None, kept: true;
    /// Codex asks the client for a fresh ChatGPT access token (it got 401 upstream).
    AccountChatgptAuthTokensRefresh, ACCOUNT_CHATGPT_AUTH_TOKENS_REFRESH = "account/chatgptAuthTokens/refresh", ServerRequest,
        files: [], params: None, answer: None, kept: false;
    CurrentTimeRead, CURRENT_TIME_READ = "currentTime/read", ServerRequest,
        files: [], params: None, answer: None, kept: false;
    ItemAgentMessageDelta, ITEM_AGENT_MESSAGE_DELTA = "item/agentMessage/delta", Notification,
        files: [], params: None, answer: None, kept: true;
    ItemReasoningSummaryTextDelta, ITEM_REASONING_SUMMARY_TEXT_DELTA = "item/reasoning/summaryTextDelta", Notification,
        files: [], params: None, answer: None, kept: true;
    ItemReasoningTextDelta, ITEM_REASONING_TEXT_DELTA = "item/reasoning/textDelta", Notification,
        files: [], params: None, answer: None, kept: true;
    ItemReasoningSummaryPartAdded, ITEM_REASONING_SUMMARY_PART_ADDED = "item/reasoning/summaryPartAdded", Notification,
        files: [], params: None, answer: None, kept: true;
    ItemCommandExecutionOutputDelta, ITEM_COMMAND_EXECUTION_OUTPUT_DELTA = "item/commandExecution/outputDelta", Notification,
        files: [], params: None, answer: None, kept: true;
    ItemFileChangeOutputDelta, ITEM_FILE_CHANGE_OUTPUT_DELTA = "item/fileChange/outputDelta", Notification,
        files: [], params: None, answer: None, kept: true;
    ItemPlanDelta, ITEM_PLAN_DELTA = "item/plan/delta", Notification,
        files: [], params: None, answer: None, kept: true;
    ItemStarted, ITEM_STARTED = "item/started", Notification,
        files: [], params: None, answer: None, kept: true;
    ItemCompleted, ITEM_COMPLETED = "item/completed", Notification,
        files: [], params: None, answer: None, kept: true;
    TurnStarted, TURN_STARTED = "turn/started", Notification,
        files: [], params: None, answer: None, kept: true;
    TurnCompleted, TURN_COMPLETED = "turn/completed", Notification,
        files: [], params: None, answer: None, kept: true;
    TurnDiffUpdated, TURN_DIFF_UPDATED = "turn/diff/updated", Notification,
        files: [], params: None, answer: None, kept: true;
    TurnPlanUpdated, TURN_PLAN_UPDATED = "turn/plan/updated", Notification,
        files: [], params: None, answer: None, kept: true;
    ThreadStarted, THREAD_STARTED = "thread/started", Notification,
        files: [], params: None, answer: None, kept: true;
    /// A thread is no longer loaded (the endpoint also says it of a thread that went with its
    /// app-server before its first turn).
    ThreadClosed, THREAD_CLOSED = "thread/closed", Notification,
        files: [], params: None, answer: None, kept: false;
    ThreadStatusChanged, THREAD_STATUS_CHANGED = "thread/status/changed", Notification,
        files: [], params: None, answer: None, kept: true;
    ThreadTokenUsageUpdated, THREAD_TOKEN_USAGE_UPDATED = "thread/tokenUsage/updated", Notification,
        files: [], params: None, answer: None, kept: true;
    /// The thread's context was compacted (traces count compactions per turn).
    ThreadCompacted, THREAD_COMPACTED = "thread/compacted", Notification,
        files: [], params: None, answer: None, kept: false;
    AccountRateLimitsUpdated, ACCOUNT_RATE_LIMITS_UPDATED = "account/rateLimits/updated", Notification,
        files: [], params: None, answer: None, kept: true;
    /// Codex's error notification (a turn's failure, told before `turn/completed`).
    Error, ERROR = "error", Notification,
        files: [], params: None, answer: None, kept: true;
    /// A warning about a thread (`transcript show` says it).
    Warning, WARNING = "warning", Notification,
        files: [], params: None, answer: None, kept: false;
    /// A warning about Codex's configuration (`transcript show` says it).
    ConfigWarning, CONFIG_WARNING = "configWarning", Notification,
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
    fn the_routing_column_names_what_the_endpoint_answers_itself_and_the_new_thread() {
        let routed = |route: Route| -> Vec<&str> {
            CodexMethod::ALL
                .iter()
                .filter(|method| method.route() == route)
                .map(|method| method.name())
                .collect()
        };
        assert_eq!(
            routed(Route::Endpoint),
            [
                "initialize",
                "thread/loaded/list",
                "account/login/start",
                "account/logout"
            ]
        );
        assert_eq!(routed(Route::NewThread), ["thread/start"]);
        // What the endpoint answers or routes itself (its access rule) it also routes itself.
        for method in CodexMethod::ALL {
            if method.access() == Some(Access::Endpoint) {
                assert_eq!(method.route(), Route::Endpoint, "{}", method.name());
            }
            if method.flow() != Flow::Request {
                assert_eq!(method.route(), Route::Member, "{}", method.name());
            }
        }
    }

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

    #[test]
    fn every_request_has_a_rule_and_nothing_else_has_one() {
        for method in CodexMethod::ALL {
            assert_eq!(
                method.access().is_some(),
                method.flow() == Flow::Request,
                "{}",
                method.name()
            );
        }
        assert_eq!(
            CodexMethod::FsReadFile.access(),
            Some(Access::Host(Grant::Fs))
        );
        assert_eq!(CodexMethod::ThreadList.access(), Some(Access::Listing));
        for grant in Grant::ALL {
            assert_eq!(Grant::parse(grant.as_str()), Some(grant));
        }
    }

    /// A Codex version vendored with a request the table lacks fails here: the endpoint would
    /// refuse that method to every named client until it has a rule.
    #[test]
    fn every_request_of_the_vendored_schemas_has_a_rule() {
        let root =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/codex-schema");
        let mut versions = 0;
        for entry in std::fs::read_dir(&root).expect("vendored schemas") {
            let path = entry.expect("entry").path().join("ClientRequest.json");
            let text = std::fs::read_to_string(&path).expect("ClientRequest.json");
            let union: serde_json::Value = serde_json::from_str(&text).expect("json");
            let mut requests = 0;
            for variant in union["oneOf"].as_array().expect("oneOf") {
                let method = &variant["properties"]["method"];
                let name = method["enum"][0]
                    .as_str()
                    .or_else(|| method["const"].as_str())
                    .expect("a method name");
                let known = CodexMethod::from_name(name);
                assert!(
                    known.is_some_and(|method| method.flow() == Flow::Request),
                    "{}: {name} has no row in the method table",
                    path.display()
                );
                requests += 1;
            }
            assert!(requests > 150, "{}: {requests} requests", path.display());
            versions += 1;
        }
        assert!(versions >= 2);
    }
}

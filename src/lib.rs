//! clawbridge: OpenClaw runs in, OpenAI Codex app-server JSON-RPC out.
//!
//! Data flows one way, and the folders follow it (docs/architecture.md). Each layer may use the
//! layers listed before it, never one after it (`tests/it/layers.rs` checks this):
//!
//! 0. [`error`], [`support`]: typed errors; JavaScript string semantics, confined reads and
//!    atomic writes, deterministic JSON, redaction, credential fingerprints, deadlines, bounded
//!    processes, stop signals; and [`codex::protocol`]: the typed app-server wire (params out,
//!    typed messages in), no I/O and no policy;
//! 1. [`config`]: the run document and the OpenClaw config it carries (one table of keys);
//! 2. [`workspace`] (bootstrap files, hook, budgets) and [`skills`] (discovery, eligibility,
//!    catalog);
//! 3. [`routing`]: which surface each file lands on (pure);
//! 4. [`mod@render`]: OpenClaw's system prompt and every Codex text, through one facade;
//! 6. [`mod@translate`]: the one pipeline every consumer calls, and the params policy;
//! 7. [`codex::client`]: the app-server process, framing, peer, turns, hub, pool, fleet;
//!    [`codex::schema`]: what goes over the wire checked against the running Codex's schema;
//!    and [`traffic`]: what stands between Codex and the model (the offline stub, the recording
//!    forwarder, capture, traces), composed in one place;
//! 8. [`artifacts`]: snapshots and pinned-fixture sync (files other people review);
//! 9. [`service`]: what both servers keep and stand on (the durable state, the thread
//!    directory, the token, the HTTP guard, named clients and accounts, the members' isolation);
//! 10. [`app`]: every command, implemented once for the CLI and the bridge API, with the run
//!     events, pairing, doctor, the audit and the state the process keeps; and [`observe`]:
//!     what every face learns from the lines it carries (conformance, the live audit, traces);
//! 11. [`server`]: the bridge API (`clawbridge serve`), and [`proxy`]: `clawbridge app-server`
//!     (OpenClaw's Codex slot over stdio, and the WebSocket endpoint);
//! 12. [`face`]: the command line both binaries share (flags, the one-shot handlers, exit codes).
//!
//! The numbers are docs/architecture.md's (the layer test checks that page against the code).
//!
//! The modules are private but [`face`]; the `pub use` list below is the rest of the public
//! surface.
//!
//! Platforms: Unix only (it relies on Unix file modes, `O_NOFOLLOW`, process groups and Unix
//! sockets), built and tested on Linux; the few Linux-only calls (`fstatfs`, the process group
//! kill through `rustix`) have Unix fallbacks. Elsewhere the build stops here, saying so.

#[cfg(not(unix))]
compile_error!("clawbridge runs on Unix (built and tested on Linux): it relies on Unix file modes, O_NOFOLLOW, process groups and Unix sockets");

mod app;
mod artifacts;
mod config;
pub mod face;
mod proxy;
mod render;
mod routing;
mod server;
mod service;
mod skills;
mod translate;
mod workspace;

// The layers below the service core are crates of their own (crates/); the rest of the crate
// names them by the paths it always has.
use clawbridge_codex as codex;
use clawbridge_observe as observe;
use clawbridge_support as support;
use clawbridge_support::error;
use clawbridge_traffic as traffic;

// The public surface: what the binary, the integration tests and the benches use, and nothing
// else. The modules are private, so the compiler reports whatever the crate no longer uses. The
// app layer's command modules are public whole: they are the binary's faces of each command.
pub use app::audit::AuditOptions;
pub use app::commands::{
    load_provider, load_run_file, state_dir, translate_options, PromptSettings,
};
pub use app::doctor::DoctorSettings;
pub use app::drive::PairingError;
pub use app::events::RunEvent;
pub use app::fixtures::SyncSettings;
pub use app::state::WarningLedger;
pub use app::{commands, doctor, fixtures, pairing, replay};
pub use artifacts::model_fixture::{
    apply_plan, find_catalog, load_catalog, plan_sync, sha256_hex, CatalogKind, DiscoveryEnv,
    FileOutcome, Personality, SyncRequest, DEFAULT_MODEL as DEFAULT_FIXTURE_MODEL, DEFAULT_OUT_DIR,
};
pub use artifacts::snapshots::{
    check_snapshots, generate as generate_snapshots, write_snapshots, DriftKind, SNAPSHOT_DIR,
};
pub use codex::client::fleet::{FleetConfig, Identity};
pub use codex::client::framing::FrameReader;
pub use codex::client::handler::DefaultHandler;
pub use codex::client::hub::{CodexHub, MAX_LOADED_THREADS};
pub use codex::client::peer::{Events, Peer, PeerConfig, PeerError};
pub use codex::client::pool::{MemberState, PoolConfig, Restart, RestartHook};
pub use codex::client::process::{find_codex_binary, resolve_native_binary, SpawnOptions};
pub use codex::client::remote::remote_endpoints;
pub use codex::client::remote::RemoteEndpoint;
pub use codex::client::session::{
    version_from_user_agent, CodexSession, HandlerFuture, ServerRequest, ServerRequestHandler,
    SessionError, TurnEvent, TurnLimits, TurnStatus,
};
pub use codex::client::turn::{drive_turn, MISSING_TURN_COMPLETED};
pub use codex::protocol::inbound::Inbound;
pub use codex::protocol::methods::TurnSteerParams;
pub use codex::protocol::params::{
    CodexParams, CollaborationMode, CollaborationSettings, SandboxPolicy, ThreadParams,
    TurnStartParams, UserInput,
};
pub use codex::protocol::wire::{decode_slice, Incoming, RequestId, RpcError};
pub use codex::protocol::{
    supported_range, CODEX_VERSIONS, NEWEST_TESTED_CODEX_VERSION, OLDEST_SUPPORTED_CODEX_VERSION,
    PINNED_CODEX_VERSION,
};
pub use codex::schema::conformance::{
    answers_without_schema, vendored_files, Flow, Verdict as WireVerdict, WireSchemas,
};
pub use codex::schema::diff::{diff as schema_diff, render as render_schema_diff, SchemaDiff};
pub use codex::schema::{ParamsSchemas, ProblemKind};
pub use config::keys::KNOWN as KNOWN_CONFIG_KEYS;
pub use config::run::run_document_schema;
pub use config::{ApprovalPolicy, Harness, PromptMode, Run, RunDocument, SandboxMode};
pub use error::{Error, ErrorKind, Result};
pub use proxy::conversation::{show as transcript_show, Conversation, ShowOptions};
pub use proxy::doctor::endpoint_findings;
pub use proxy::endpoint::{
    agent_of_workspace, fetch_status, render_status_text, Endpoint, EndpointError,
    EndpointSettings, EndpointStatus, ListenAddr, Policy as EndpointPolicy, DEFAULT_LEASE_TTL,
    FRESH_THREAD_GRACE, MAX_MESSAGE_BYTES as ENDPOINT_MAX_MESSAGE_BYTES,
};
pub use proxy::stall::{StallKind, StallSettings};
pub use proxy::{
    app_server_report, app_server_status, normalise, passthrough, run_app_server, run_proxy,
    AppServerArgs, Normalised, PoolArgs, ProxyError, ProxySettings, ReportArgs, StatusArgs,
};
pub use render::adapter::{codex_developer_instructions, HostRuntime, PromptOptions};
pub use render::codex::{
    heartbeat_note, CRON_NOTE, DEFAULT_COLLABORATION_PRESET, HEARTBEAT_POINTER_HEADING,
    MEMORY_NOTE_HEADING, REQUEST_LABEL, SKILLS_HEADING, WORKSPACE_BLOCK_HEADING,
};
pub use render::hooks::{apply_before_prompt_build, BeforePromptBuild};
pub use render::provider::ProviderContribution;
pub use render::sections::{
    runtime_line, ContextFile, DelegationMode, PromptInputs, RuntimeInfo, SilentReplyMode,
    SourceReplyDelivery, IDENTITY_LINE,
};
pub use render::{render, PromptRequest, SystemPrompt, CACHE_BOUNDARY};
pub use routing::{route_workspace, Surface};
pub use server::openrpc;
pub use server::{
    start as serve, CodexBinary, Running, ServeConfig, ServeError, DEFAULT_ANSWER_TIMEOUT,
    DEFAULT_FINISHED_RUN_TTL, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_FINISHED_RUNS, DEFAULT_MAX_RUNS, DEFAULT_MAX_RUN_BYTES, DEFAULT_MAX_SESSIONS,
    DEFAULT_RECYCLE_AFTER_THREADS, DEFAULT_RECYCLE_RSS_MB, DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_SUBSCRIBER_STALL, MAX_SESSIONS_LIMIT,
};
pub use service::clients;
pub use service::clients::{token_sha256, ClientEntry};
pub use service::directory::{Directory, Placement};
pub use service::store::{LeaseTaken, MemberRecord, Store, StoreError, ThreadRecord};
pub use skills::{
    discover_skills, eligible_skills, parse_skill, render_skills_prompt, skill_version,
    CatalogFormat, CatalogSurface, HostFacts, SkillCache, SkillEntry, SkillTier,
};
pub use support::console::Console;
pub use support::fs::Roots;
pub use support::fs::TEMP_PREFIX;
pub use support::jail::{entry_point as jail_entry_point, Jail};
pub use support::json::{to_pretty, DATA_BLOCK_CLOSE, DATA_BLOCK_OPEN};
pub use support::signals::StopSignals;
pub use support::text::len16;
pub use traffic::capture::cache::{fingerprints as cache_fingerprints, CacheReport, Verdict};
pub use traffic::capture::credential_fingerprint;
pub use traffic::capture::live::spawn_recorder;
pub use traffic::forward::{
    Forwarder, ForwarderSettings, LiveCapture, LiveCaptureSettings, Upstream,
};
pub use traffic::record::{CapturedRequest, Recorded};
pub use traffic::stub::{
    offline_account_config, offline_config, OfflineHome, ResponsesStub, StubRule, StubScript,
    StubStep,
};
pub use traffic::trace::{ContentPolicy, TraceSettings};
pub use translate::live::{LiveRoute, LiveRouter, Rerouted};
pub use translate::params::{build_params, dynamic_tools};
pub use translate::{translate, NoticeMemory, TranslateOptions, Translation};
pub use workspace::{
    load_bootstrap_files, BootstrapFile, FileContent, LoadedWorkspace, BOOTSTRAP_FILE_NAMES,
    TRUNCATION_NOTICE,
};

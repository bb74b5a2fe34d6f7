//! Inputs of a run: the run document a caller hands us and the OpenClaw config inside it.
//!
//! Layout: [`run`] parses and validates the run document (strict: an unknown key is an error that
//! names it); [`openclaw`] reads the OpenClaw config object (lenient: keys we do not read are
//! reported as warnings, never errors, because openclaw.json carries far more than we need);
//! [`keys`] is the one table of config keys, used for every read and for that warning.
//!
//! Uses only `error` and `support` (docs/architecture.md).

pub mod fields;
pub mod keys;
pub mod openclaw;
pub mod run;

pub use openclaw::{BootstrapLimits, OpenClawConfig, TruncationWarningMode};
pub use run::{
    ApprovalPolicy, ChatType, Harness, OpenAiAuth, PromptMode, ReactionLevel, ReasoningLevel, Run,
    RunDocument, SandboxMode, ServiceTier, SessionKind, SourceReplyDelivery, Thinking, ToolSpec,
    Trigger,
};

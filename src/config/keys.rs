//! The one table of OpenClaw config keys clawbridge reads.
//!
//! Every read goes through a constant declared here ([`Key`] for a fixed path, [`AgentKey`] for a
//! per-agent key that falls back to `agents.defaults`), and the "config key is not read" warning
//! is computed from the same table ([`KNOWN`]), so the two cannot drift apart. A key is a dotted
//! path; in [`KNOWN`], `*` matches one object key and `[]` an array element, and a key covers the
//! whole subtree below it.

/// A config key at a fixed dotted path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key(&'static str);

impl Key {
    pub const fn path(self) -> &'static str {
        self.0
    }
}

/// A per-agent key: `agents.list[<id>].<name>`, else `agents.defaults.<name>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AgentKey(&'static str);

impl AgentKey {
    /// The path below the agent entry (`bootstrapMaxChars`, `subagents.delegationMode`).
    pub const fn name(self) -> &'static str {
        self.0
    }
}

macro_rules! config_keys {
    (
        keys { $($key:ident = $path:literal,)* }
        containers { $($container:ident = $holder:literal,)* }
        agent_keys { $($agent:ident = $name:literal,)* }
        list_keys { $($list:literal,)* }
    ) => {
        $(pub const $key: Key = Key($path);)*
        $(
            /// A container walked to reach the keys below it; it does not cover its subtree.
            pub const $container: Key = Key($holder);
        )*
        $(pub const $agent: AgentKey = AgentKey($name);)*
        /// Every path clawbridge reads, per-agent keys under both their homes.
        pub const KNOWN: &[&str] = &[
            $($path,)*
            $(concat!("agents.list[].", $name), concat!("agents.defaults.", $name),)*
            $($list,)*
        ];
    };
}

config_keys! {
    keys {
        BOOTSTRAP_TRUNCATION_WARNING = "agents.defaults.bootstrapPromptTruncationWarning",
        DEFAULT_WORKSPACE = "agents.defaults.workspace",
        REPO_ROOT = "agents.defaults.repoRoot",
        USER_TIMEZONE = "agents.defaults.userTimezone",
        MODELS = "agents.defaults.models",
        SANDBOX = "agents.defaults.sandbox",
        SKILLS_ALLOW_BUNDLED = "skills.allowBundled",
        SKILLS_EXTRA_DIRS = "skills.load.extraDirs",
        SKILLS_MAX_PROMPT_CHARS = "skills.limits.maxSkillsPromptChars",
        SKILLS_MAX_IN_PROMPT = "skills.limits.maxSkillsInPrompt",
        OPENAI_PERSONALITY = "plugins.entries.openai.config.personality",
        WEB_SEARCH = "tools.web.search",
        EXEC_NOTIFY_ON_EXIT = "tools.exec.notifyOnExit",
        TTS = "messages.tts",
        VISIBLE_REPLIES = "messages.visibleReplies",
        GROUP_VISIBLE_REPLIES = "messages.groupChat.visibleReplies",
        MEMORY_CITATIONS = "memory.citations",
        OWNER_DISPLAY = "commands.ownerDisplay",
        OWNER_DISPLAY_SECRET = "commands.ownerDisplaySecret",
        OWNER_ALLOW_FROM = "commands.ownerAllowFrom",
        DOCS_PATH = "docs.path",
    }
    containers {
        AGENTS_LIST = "agents.list",
        SKILL_ENTRIES = "skills.entries",
        PLUGIN_ENTRIES = "plugins.entries",
    }
    agent_keys {
        BOOTSTRAP_MAX_CHARS = "bootstrapMaxChars",
        BOOTSTRAP_TOTAL_MAX_CHARS = "bootstrapTotalMaxChars",
        SKILLS = "skills",
        DELEGATION_MODE = "subagents.delegationMode",
        HEARTBEAT_EVERY = "heartbeat.every",
        HEARTBEAT_IN_PROMPT = "heartbeat.includeSystemPromptSection",
        HEARTBEAT_PROMPT = "heartbeat.prompt",
        MODEL = "model",
    }
    list_keys {
        "agents.list[].id",
        "agents.list[].default",
        "agents.list[].workspace",
        "agents.list[].skillsLimits.maxSkillsPromptChars",
        "agents.list[].tts",
        "agents.list[].tools.exec.notifyOnExit",
        "skills.entries.*.enabled",
        "skills.entries.*.env",
        "skills.entries.*.apiKey",
        "plugins.entries.*.enabled",
    }
}

/// Config paths that hold paths (a string or a list of strings), besides
/// `agents.list[].workspace`; the service checks each against its roots.
pub const PATH_KEYS: &[Key] = &[SKILLS_EXTRA_DIRS, DEFAULT_WORKSPACE, REPO_ROOT, DOCS_PATH];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_key_is_a_dotted_path() {
        for key in KNOWN {
            assert!(
                !key.is_empty() && !key.starts_with('.') && !key.ends_with('.'),
                "{key}"
            );
        }
        let mut sorted = KNOWN.to_vec();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), KNOWN.len(), "no key is listed twice");
    }
}

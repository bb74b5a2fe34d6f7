//! OpenClaw's system prompt: goldens per mode and surface, section order and gates, the cache
//! boundary, provider overrides, the hooks (docs/system-prompt.md §11 vectors).

use std::path::PathBuf;

use clawbridge::ProviderContribution;
use clawbridge::{apply_before_prompt_build, BeforePromptBuild};
use clawbridge::{codex_developer_instructions, HostRuntime, PromptOptions};
use clawbridge::{render, PromptRequest, SystemPrompt, CACHE_BOUNDARY};
use clawbridge::{
    runtime_line, ContextFile, DelegationMode, PromptInputs, RuntimeInfo, SilentReplyMode,
    SourceReplyDelivery, IDENTITY_LINE,
};
use clawbridge::{translate, TranslateOptions};
use clawbridge::{Harness, PromptMode, Run};

use serde_json::json;

use crate::util::*;

/// An insta snapshot in `tests/golden/prompt/<name>.snap`; review changes with
/// `cargo insta review` (or `scripts/update-goldens`).
fn golden(name: &str, actual: &str) {
    let name = name
        .trim_start_matches("prompt/")
        .trim_end_matches(".txt")
        .to_string();
    insta::with_settings!({
        snapshot_path => repo_root().join("tests/golden/prompt"),
        prepend_module_to_snapshot => false,
        omit_expression => true,
    }, {
        insta::assert_snapshot!(name, actual);
    });
}

fn fixed_host() -> HostRuntime {
    HostRuntime {
        host: Some("clawbridge-host".into()),
        os: Some("linux".into()),
        arch: Some("x86_64".into()),
        shell: Some("bash".into()),
        time_zone: Some("UTC".into()),
    }
}

fn embedded_run(name: &str) -> Run {
    let mut run = Run::load(&repo_root().join("fixtures/runs").join(name)).expect("run");
    run.harness = Harness::Embedded;
    let real = run.workspace.clone();
    run.with_path_alias(real, PathBuf::from("/srv/openclaw-happy-path/workspace"))
}

fn prompt_for(run: &Run, mode: Option<PromptMode>) -> SystemPrompt {
    let translation = translate(run, &TranslateOptions::hermetic()).expect("translate");
    translation.system_prompt(
        run,
        &PromptOptions {
            mode,
            host: fixed_host(),
            ..PromptOptions::default()
        },
    )
}

fn headings(text: &str) -> Vec<String> {
    text.lines()
        .filter(|line| line.starts_with("## ") || line.starts_with("# ") || *line == CACHE_BOUNDARY)
        .map(|line| line.trim_start_matches('#').trim().to_string())
        .collect()
}

#[test]
fn golden_prompts_per_mode_and_surface() {
    for (run_name, mode, golden_name) in [
        ("discord-group.json", None, "discord-group.full.txt"),
        (
            "discord-group.json",
            Some(PromptMode::Minimal),
            "discord-group.minimal.txt",
        ),
        (
            "discord-group.json",
            Some(PromptMode::None),
            "discord-group.none.txt",
        ),
        ("telegram-direct.json", None, "telegram-direct.full.txt"),
        ("heartbeat.json", None, "heartbeat.full.txt"),
        ("subagent.json", None, "subagent.minimal.txt"),
    ] {
        let run = embedded_run(run_name);
        golden(
            &format!("prompt/{golden_name}"),
            &format!("{}\n", prompt_for(&run, mode).text()),
        );
    }
    let mut run = Run::load(&repo_root().join("fixtures/runs/telegram-direct.json")).expect("run");
    let real = run.workspace.clone();
    run = run.with_path_alias(real, PathBuf::from("/srv/openclaw-happy-path/workspace"));
    let translation = translate(&run, &TranslateOptions::hermetic()).expect("translate");
    let (_, deferred) = clawbridge::dynamic_tools(&run);
    golden(
        "prompt/codex-developer.telegram-direct.txt",
        &format!(
            "{}\n",
            codex_developer_instructions(&run, &translation.routed, &deferred)
        ),
    );
}

#[test]
fn project_context_above_the_boundary_runtime_below() {
    let prompt = prompt_for(&embedded_run("discord-group.json"), None);
    assert!(prompt.stable_prefix.contains("# Project Context"));
    assert!(prompt.stable_prefix.contains(&placeholder("SOUL.md")));
    assert!(
        !prompt.stable_prefix.contains("## Runtime")
            && prompt.dynamic_suffix.contains("## Runtime")
    );
    for volatile in [
        "## Messaging",
        "## Group Chat Context",
        "## Heartbeats",
        "# Dynamic Project Context",
    ] {
        assert!(
            prompt.dynamic_suffix.contains(volatile),
            "{volatile} below the boundary"
        );
        assert!(
            !prompt.stable_prefix.contains(volatile),
            "{volatile} not above"
        );
    }
    assert!(
        prompt.dynamic_suffix.contains(&placeholder("HEARTBEAT.md")),
        "HEARTBEAT.md is dynamic context"
    );
    let text = prompt.text();
    assert_eq!(text.matches(CACHE_BOUNDARY).count(), 1);
    assert!(text.contains(&format!("\n\n{CACHE_BOUNDARY}\n\n")));
    assert_eq!(
        SystemPrompt::split(&text).stable_prefix,
        prompt.stable_prefix,
        "P9 split"
    );
    assert_eq!(
        SystemPrompt::split(&text).dynamic_suffix,
        prompt.dynamic_suffix
    );
    assert!(!prompt.text_without_boundary().contains(CACHE_BOUNDARY));
    // Tool descriptions do not embed the current channel name.
    assert!(
        !prompt.stable_prefix.contains("discord"),
        "stable prefix stays channel-neutral"
    );
}

#[test]
fn p1_none_mode_is_the_identity_line() {
    let inputs = PromptInputs {
        workspace_dir: "/w".into(),
        prompt_mode: PromptMode::None,
        tool_names: vec!["read".into()],
        ..Default::default()
    };
    assert_eq!(
        render(&PromptRequest::OpenClaw(&inputs)).text(),
        IDENTITY_LINE
    );
}

#[test]
fn p2_empty_full_prompt() {
    let inputs = PromptInputs {
        workspace_dir: "/home/u/.openclaw/workspace".into(),
        ..Default::default()
    };
    let text = render(&PromptRequest::OpenClaw(&inputs)).text();
    assert_eq!(
        headings(&text),
        vec![
            "Tooling",
            "Tool Call Style",
            "Execution Bias",
            "Safety",
            "OpenClaw Control",
            "Workspace",
            "Documentation",
            "Workspace Files (injected)",
            CACHE_BOUNDARY,
            "Assistant Output Directives",
            "Messaging",
            "Silent Replies",
            "Runtime"
        ]
    );
    assert!(text.starts_with(IDENTITY_LINE));
    assert!(text.contains("\nRuntime: thinking=off\n"));
    assert!(!text.ends_with('\n'));
}

fn p3_inputs(mode: PromptMode) -> PromptInputs {
    PromptInputs {
        workspace_dir: "/w".into(),
        prompt_mode: mode,
        tool_names: vec!["read".into(), "exec".into()],
        skills_prompt: "<available_skills>\n</available_skills>".into(),
        user_timezone: Some("UTC".into()),
        extra_system_prompt: Some("Do X.".into()),
        owner_lines: vec!["+1".into()],
        model_alias_lines: vec!["- fast: openai/gpt-5-mini".into()],
        context_files: vec![ContextFile {
            path: "/w/AGENTS.md".into(),
            content: "A".into(),
            missing: false,
        }],
        ..Default::default()
    }
}

#[test]
fn p3_minimal_and_full_gates() {
    let minimal = render(&PromptRequest::OpenClaw(&p3_inputs(PromptMode::Minimal))).text();
    assert_eq!(
        headings(&minimal),
        vec![
            "Tooling",
            "Tool Call Style",
            "Safety",
            "Skills",
            "OpenClaw Control",
            "Workspace",
            "Workspace Files (injected)",
            "Current Date & Time",
            "Project Context",
            "/w/AGENTS.md",
            CACHE_BOUNDARY,
            "Subagent Context",
            "Runtime"
        ]
    );
    assert!(
        minimal.contains("- read\n- exec\n")
            && minimal.contains("start now and keep running in the background")
    );
    assert!(
        minimal.contains("Exec approvals:"),
        "exec approval guidance is kept in minimal"
    );
    assert!(minimal.contains("## Subagent Context\nDo X."));
    let full = render(&PromptRequest::OpenClaw(&p3_inputs(PromptMode::Full))).text();
    let full_headings = headings(&full);
    for added in [
        "Execution Bias",
        "Model Aliases",
        "User Identity",
        "Documentation",
        "Assistant Output Directives",
        "Messaging",
        "Silent Replies",
        "Group Chat Context",
    ] {
        assert!(full_headings.iter().any(|h| h == added), "{added} in full");
        assert!(
            !headings(&minimal).iter().any(|h| h == added),
            "{added} not in minimal"
        );
    }
}

#[test]
fn p4_p5_runtime_lines() {
    let runtime = RuntimeInfo {
        agent_id: Some("main".into()),
        session_key: Some("agent:main:main".into()),
        host: Some("box".into()),
        os: Some("Linux 6.1".into()),
        arch: Some("x64".into()),
        node: Some("v22.1.0".into()),
        model: Some("anthropic/claude-x".into()),
        default_model: Some("anthropic/claude-x".into()),
        shell: Some("bash".into()),
        channel: Some("Telegram".into()),
        capabilities: vec!["inlineButtons".into(), "markdownDetails".into()],
        repo_root: Some("/src/app".into()),
    };
    assert_eq!(
        runtime_line(&runtime, Some("low")),
        "Runtime: agent=main | session=agent:main:main | host=box | repo=/src/app | os=Linux 6.1 (x64) | node=v22.1.0 | model=anthropic/claude-x | default_model=anthropic/claude-x | shell=bash | channel=telegram | capabilities=inlinebuttons,markdowndetails | thinking=low"
    );
    let cron = RuntimeInfo {
        agent_id: Some("main".into()),
        session_key: Some("agent:main:cron:daily:run:abc123".into()),
        os: Some("Darwin 24.0".into()),
        node: Some("v22".into()),
        ..Default::default()
    };
    assert_eq!(runtime_line(&cron, None), "Runtime: agent=main | session=agent:main:cron:daily | os=Darwin 24.0 | node=v22 | thinking=off");
}

#[test]
fn p6_time_zone_only_and_fallback() {
    let ws = TestWorkspace::full();
    let run = run_with(
        &ws.path(),
        serde_json::json!({"harness": "embedded", "config": {"agents": {"defaults": {"userTimezone": "Asia/Tokyo"}}}}),
    );
    let prompt = prompt_for(&run, None);
    assert!(prompt
        .stable_prefix
        .contains("## Current Date & Time\nTime zone: Asia/Tokyo"));
    let run = run_with(
        &ws.path(),
        serde_json::json!({"harness": "embedded", "config": {"agents": {"defaults": {"userTimezone": "Not/AZone"}}}}),
    );
    assert!(
        prompt_for(&run, None)
            .stable_prefix
            .contains("Time zone: UTC"),
        "host zone fallback"
    );
}

#[test]
fn p7_override_renders_in_minimal_and_replaces_exactly_its_section() {
    let overrides = ProviderContribution {
        execution_bias: Some("## Execution Bias\nCustom.".into()),
        interaction_style: Some("  \n ".into()),
        ..Default::default()
    };
    let inputs = PromptInputs {
        prompt_mode: PromptMode::Minimal,
        provider_contribution: overrides.clone(),
        ..Default::default()
    };
    let text = render(&PromptRequest::OpenClaw(&inputs)).text();
    assert!(
        text.starts_with(&format!(
            "{IDENTITY_LINE}\n\n## Execution Bias\nCustom.\n\n## Safety"
        )),
        "{text}"
    );
    assert!(!text.contains("## Tooling") && !text.contains("## Tool Call Style"));
    let full_default = render(&PromptRequest::OpenClaw(&PromptInputs::default())).text();
    let full_override = render(&PromptRequest::OpenClaw(&PromptInputs {
        provider_contribution: overrides,
        ..Default::default()
    }))
    .text();
    let removed: Vec<&str> = full_default
        .lines()
        .filter(|l| !full_override.contains(l))
        .collect();
    assert_eq!(
        removed.len(),
        1,
        "only the default execution bias text went: {removed:?}"
    );
    assert!(removed[0].starts_with("When a request is actionable"));
}

#[test]
fn p8_delegation_gate() {
    let with = |mode, tools: Vec<&str>, delegation| {
        let inputs = PromptInputs {
            prompt_mode: mode,
            tool_names: tools.into_iter().map(String::from).collect(),
            delegation_mode: delegation,
            ..Default::default()
        };
        render(&PromptRequest::OpenClaw(&inputs))
            .text()
            .contains("## Sub-Agent Delegation")
    };
    assert!(with(
        PromptMode::Full,
        vec!["sessions_spawn"],
        DelegationMode::Prefer
    ));
    assert!(!with(
        PromptMode::Full,
        vec!["read"],
        DelegationMode::Prefer
    ));
    assert!(!with(
        PromptMode::Full,
        vec!["sessions_spawn"],
        DelegationMode::Suggest
    ));
    assert!(!with(
        PromptMode::Minimal,
        vec!["sessions_spawn"],
        DelegationMode::Prefer
    ));
}

#[test]
fn silent_replies_only_for_automatic_group_replies() {
    let direct = prompt_for(&embedded_run("telegram-direct.json"), None).text();
    assert!(
        !direct.contains("NO_REPLY"),
        "message-tool-only direct chat"
    );
    let ws = TestWorkspace::full();
    let group = |delivery: &str| {
        let run = run_with(
            &ws.path(),
            serde_json::json!({"harness": "embedded", "sourceReplyDelivery": delivery, "tools": [tool("message")],
            "channel": {"name": "discord", "chatType": "group"}}),
        );
        prompt_for(&run, None).text()
    };
    assert!(group("automatic").contains("## Silent Replies"));
    assert!(!group("messageToolOnly").contains("NO_REPLY"));
    // Unstated, the mode follows OpenClaw's config: a group whose visible replies go through the
    // message tool owns the contract (no generic Silent Replies), when the tool is offered;
    // `messages.visibleReplies` is the fallback; a stated mode wins over both.
    let configured = |config: serde_json::Value, tools: serde_json::Value, stated: Option<&str>| {
        let mut fields = serde_json::json!({"harness": "embedded", "tools": tools, "config": config,
            "channel": {"name": "discord", "chatType": "group"}});
        if let Some(stated) = stated {
            fields["sourceReplyDelivery"] = serde_json::json!(stated);
        }
        prompt_for(&run_with(&ws.path(), fields), None).text()
    };
    let group_tool =
        serde_json::json!({"messages": {"groupChat": {"visibleReplies": "message_tool"}}});
    let with_message = serde_json::json!([tool("message")]);
    assert!(
        !configured(group_tool.clone(), with_message.clone(), None).contains("## Silent Replies")
    );
    assert!(
        configured(group_tool.clone(), serde_json::json!([]), None).contains("## Silent Replies"),
        "without the message tool the replies stay automatic"
    );
    assert!(
        configured(group_tool, with_message.clone(), Some("automatic"))
            .contains("## Silent Replies")
    );
    let fallback = serde_json::json!({"messages": {"visibleReplies": "message_tool"}});
    assert!(!configured(fallback, with_message.clone(), None).contains("## Silent Replies"));
    let group_wins = serde_json::json!({"messages": {"visibleReplies": "message_tool", "groupChat": {"visibleReplies": "automatic"}}});
    assert!(configured(group_wins, with_message, None).contains("## Silent Replies"));
    let direct_auto = prompt_for(&run_with(&ws.path(), serde_json::json!({"harness": "embedded", "channel": {"name": "telegram", "chatType": "direct"}})), None).text();
    assert!(
        !direct_auto.contains("NO_REPLY"),
        "direct chats never get NO_REPLY"
    );
    let inputs = PromptInputs {
        delivery_mode: SourceReplyDelivery::MessageToolOnly,
        silent_reply_mode: SilentReplyMode::None,
        tool_names: vec!["message".into()],
        ..Default::default()
    };
    assert!(render(&PromptRequest::OpenClaw(&inputs))
        .text()
        .contains("Never repeat content you already sent"));
}

#[test]
fn update_plan_guidance_only_with_the_tool() {
    let with_plan = PromptInputs {
        tool_names: vec!["update_plan".into()],
        ..Default::default()
    };
    assert!(render(&PromptRequest::OpenClaw(&with_plan))
        .text()
        .contains("`update_plan`"));
    assert!(!render(&PromptRequest::OpenClaw(&PromptInputs::default()))
        .text()
        .contains("update_plan"));
}

#[test]
fn the_renderer_reads_nothing_from_disk() {
    // A workspace that does not exist and inline context: everything comes from the inputs.
    let inputs = PromptInputs {
        workspace_dir: "/definitely/not/here".into(),
        context_files: vec![ContextFile {
            path: "/definitely/not/here/SOUL.md".into(),
            content: "inline soul".into(),
            missing: false,
        }],
        ..Default::default()
    };
    let first = render(&PromptRequest::OpenClaw(&inputs)).text();
    assert!(
        first.contains("inline soul") && first.contains("Working directory: /definitely/not/here")
    );
    assert_eq!(
        first,
        render(&PromptRequest::OpenClaw(&inputs)).text(),
        "pure: same inputs, same text"
    );
}

#[test]
fn before_prompt_build_hook_is_separate_from_contributions() {
    let prompt = render(&PromptRequest::OpenClaw(&PromptInputs::default()));
    let prepended = apply_before_prompt_build(
        prompt.clone(),
        "acme",
        BeforePromptBuild::Prepend("Global rule.".into()),
    );
    assert!(
        prepended
            .stable_prefix
            .starts_with("<plugin-context source=\"acme\">")
            && prepended.stable_prefix.contains("Global rule.")
    );
    let appended = apply_before_prompt_build(
        prompt.clone(),
        "acme",
        BeforePromptBuild::Append("Late rule.".into()),
    );
    assert!(appended.dynamic_suffix.ends_with("</plugin-context>"));
    assert_eq!(
        appended.stable_prefix, prompt.stable_prefix,
        "the cacheable prefix is untouched"
    );
    let replaced =
        apply_before_prompt_build(prompt, "acme", BeforePromptBuild::Replace("X".into()));
    assert_eq!(replaced.text(), "X");
}

#[test]
fn gpt5_overlay_follows_the_model_and_config() {
    let ws = TestWorkspace::full();
    let gpt5 = prompt_for(
        &run_with(
            &ws.path(),
            serde_json::json!({"harness": "embedded", "model": "openai/gpt-5.5"}),
        ),
        None,
    );
    assert!(
        gpt5.stable_prefix.contains("## GPT-5 Working Style")
            && gpt5.stable_prefix.contains("## Interaction Style")
    );
    let claude = prompt_for(
        &run_with(
            &ws.path(),
            serde_json::json!({"harness": "embedded", "model": "anthropic/claude-x"}),
        ),
        None,
    );
    assert!(!claude.stable_prefix.contains("GPT-5"));
    let off = prompt_for(
        &run_with(
            &ws.path(),
            serde_json::json!({"harness": "embedded", "config": {"plugins": {"entries": {"openai": {"config": {"personality": false}}}}}}),
        ),
        None,
    );
    assert!(
        off.stable_prefix.contains("## GPT-5 Working Style")
            && !off.stable_prefix.contains("## Interaction Style")
    );
    // A heartbeat run's interaction style ends with the heartbeat guidance (as OpenClaw 6.10's
    // overlay does for trigger `heartbeat`); other runs have none of it.
    assert!(!gpt5.text().contains("### Heartbeats"));
    let heartbeat = prompt_for(
        &run_with(
            &ws.path(),
            serde_json::json!({"harness": "embedded", "model": "openai/gpt-5.5", "trigger": "heartbeat"}),
        ),
        None,
    );
    let text = heartbeat.text();
    let style = text
        .find("## Interaction Style")
        .expect("the interaction style");
    let guidance = text.find("### Heartbeats").expect("the heartbeat guidance");
    assert!(style < guidance, "the guidance follows the style: {text}");
    let quiet = prompt_for(
        &run_with(
            &ws.path(),
            serde_json::json!({"harness": "embedded", "model": "openai/gpt-5.5", "trigger": "heartbeat",
                "config": {"plugins": {"entries": {"openai": {"config": {"personality": false}}}}}}),
        ),
        None,
    );
    assert!(
        !quiet.text().contains("### Heartbeats"),
        "no interaction style, no heartbeat block"
    );
}

#[test]
fn cli_prompt_modes_split_provider_and_bootstrap_hook() {
    let (code, full, _) = run_cli(&["prompt", "fixtures/runs/discord-group.json"]);
    assert_eq!(code, 0);
    let (_, minimal, _) = run_cli(&[
        "prompt",
        "fixtures/runs/discord-group.json",
        "--mode",
        "minimal",
    ]);
    let (_, none, _) = run_cli(&[
        "prompt",
        "fixtures/runs/discord-group.json",
        "--mode",
        "none",
    ]);
    assert!(full.len() > minimal.len() && minimal.len() > none.len());
    assert_eq!(none.trim_end(), IDENTITY_LINE);
    let (_, split, _) = run_cli(&["prompt", "fixtures/runs/discord-group.json", "--split"]);
    let value: serde_json::Value = serde_json::from_str(&split).expect("json");
    assert!(value["stablePrefix"]
        .as_str()
        .unwrap_or_default()
        .contains("# Project Context"));
    assert!(value["dynamicSuffix"]
        .as_str()
        .unwrap_or_default()
        .contains("## Runtime"));

    let dir = tempfile::tempdir().expect("dir");
    let provider = dir.path().join("provider.json");
    std::fs::write(
        &provider,
        r###"{"toolCallStyle": "## Tool Call Style\nBatch your calls."}"###,
    )
    .expect("write");
    let (code, overridden, _) = run_cli(&[
        "prompt",
        "fixtures/runs/discord-group.json",
        "--provider",
        &provider.display().to_string(),
    ]);
    assert_eq!(code, 0);
    assert!(
        overridden.contains("## Tool Call Style\nBatch your calls.")
            && !overridden.contains("narrate briefly")
    );

    let hook = "python3 -c 'import json,sys; d=json.load(sys.stdin); [f.update(content=\"An alternative persona.\") for f in d[\"files\"] if f[\"name\"]==\"SOUL.md\"]; print(json.dumps(d))'";
    let (code, hooked, stderr) = run_cli(&[
        "prompt",
        "fixtures/runs/discord-group.json",
        "--bootstrap-hook",
        hook,
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        hooked.contains("An alternative persona.") && !hooked.contains(&placeholder("SOUL.md"))
    );
    let (code, params, _) = run_cli(&[
        "params",
        "fixtures/runs/telegram-direct.json",
        "--bootstrap-hook",
        hook,
    ]);
    assert_eq!(code, 0);
    assert!(
        params.contains("An alternative persona."),
        "the hook applies to the Codex surface too"
    );
    let (code, _, stderr) = run_cli(&[
        "prompt",
        "fixtures/runs/discord-group.json",
        "--bootstrap-hook",
        "exit 3",
    ]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("bootstrap hook `exit 3` failed"),
        "{stderr}"
    );
}

#[test]
fn bootstrap_hook_results_are_cleaned_up() {
    let ws = TestWorkspace::full();
    let run = run_with(
        &ws.path(),
        serde_json::json!({"harness": "embedded", "sessionKey": "agent:main:subagent:1"}),
    );
    let hook = format!(
        "cat > /dev/null; echo '{{\"files\": [{{\"path\": \"   \"}}, {{\"path\": \"{0}/TOOLS.md\", \"content\": \"T\"}}, {{\"path\": \"{0}/./TOOLS.md\", \"content\": \"dup\"}}, {{\"path\": \"{0}/SOUL.md\", \"content\": \"S\"}}, {{\"path\": \"db:main/NOTES.md\", \"name\": \"AGENTS.md\", \"content\": \"N\"}}]}}'",
        ws.path().display()
    );
    let options = TranslateOptions {
        bootstrap_hook: Some(hook),
        ..TranslateOptions::hermetic()
    };
    let translation = translate(&run, &options).expect("translate");
    let paths: Vec<&str> = translation
        .loaded
        .files
        .iter()
        .map(|f| f.path.as_str())
        .collect();
    assert_eq!(
        paths,
        vec![
            format!("{}/TOOLS.md", ws.path().display()).as_str(),
            "db:main/NOTES.md"
        ],
        "blank dropped, duplicate dropped, SOUL.md filtered for subagents, synthetic id kept"
    );
    assert!(translation
        .warnings
        .iter()
        .any(|w| w.contains("empty path")));
}

#[test]
fn prompt_mode_minimal_shapes_the_prompt_and_the_session_key_the_files() {
    // As OpenClaw: the file filter follows the session key (a subagent session keeps AGENTS.md
    // and TOOLS.md); `--mode minimal` (the run's prompt mode) alone leaves the files alone.
    let headings = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|line| line.starts_with("## /"))
            .map(|line| line.rsplit('/').next().unwrap_or(line).to_string())
            .collect()
    };
    let (code, full, stderr) = run_cli(&["prompt", "fixtures/runs/telegram-direct.json"]);
    assert_eq!(code, 0, "{stderr}");
    let (code, minimal, stderr) = run_cli(&[
        "prompt",
        "fixtures/runs/telegram-direct.json",
        "--mode",
        "minimal",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(headings(&minimal), headings(&full), "{minimal}");
    assert_ne!(minimal, full, "the minimal prompt is not the full one");
    let ws = TestWorkspace::full();
    let document = ws.path().join("run.json");
    std::fs::write(
        &document,
        json!({"workspace": ws.path(), "promptMode": "minimal", "sessionKey": "agent:main:subagent:1"}).to_string(),
    )
    .expect("write");
    let (code, subagent, stderr) = run_cli(&["prompt", document.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(headings(&subagent), ["AGENTS.md", "TOOLS.md"], "{subagent}");
}

/// `fixtures/runs/every-input.json` with the fixtures folder shown as a virtual one.
fn every_input_run() -> Run {
    let run = Run::load(&repo_root().join("fixtures/runs/every-input.json")).expect("run");
    let fixtures = repo_root()
        .join("fixtures")
        .canonicalize()
        .expect("fixtures");
    run.with_path_alias(fixtures, PathBuf::from("/srv/openclaw-happy-path"))
}

#[test]
fn golden_every_input_reaches_its_surface() {
    // Every run-document input the renderer and the params support, in one run.
    let mut run = every_input_run();
    let codex = clawbridge::translate(&run, &TranslateOptions::hermetic())
        .expect("translate")
        .codex_params(&run);
    let params = serde_json::to_value(&codex).expect("json");
    golden(
        "prompt/every-input.params.json",
        &format!("{}\n", clawbridge::to_pretty(&params)),
    );
    run.harness = Harness::Embedded;
    let prompt = prompt_for(&run, None).text();
    golden("prompt/every-input.full.txt", &format!("{prompt}\n"));
    // Each input is visible where it belongs.
    for expected in [
        "## Reasoning Format\nPut your reasoning in <think>",
        "## Sandbox",
        "/workspace",
        "/srv/openclaw/agents/main",
        "/opt/openclaw/docs",
        "/opt/openclaw",
        "Release notes live in notes/releases/.",
        "Telegram: use `buttons` for yes/no questions.",
        "## Reactions",
        "node=v22.19.0",
        "capabilities=inlinebuttons,nativeapprovals,reactions,voice",
    ] {
        assert!(prompt.contains(expected), "{expected:?} in\n{prompt}");
    }
    assert!(prompt.contains("\nReasoning: stream."), "reasoning level");
    let developer = developer_instructions(&params);
    assert!(developer.contains("`acme_deploy` tool deploys staging only"));
    assert_eq!(params["threadStart"]["modelProvider"], "openai");
    assert_eq!(params["threadStart"]["serviceTier"], "flex");
    assert_eq!(params["turnStart"]["serviceTier"], "flex");
    assert_eq!(
        params["turnStart"]["input"][1],
        json!({"type": "localImage", "path": "/srv/openclaw-happy-path/images/pixel.png"})
    );
    // setupComplete: no BOOTSTRAP.md anywhere, whatever the workspace holds.
    assert!(!params.to_string().contains("BOOTSTRAP.md contents"));
}

#[test]
fn the_no_boundary_variant_and_the_before_prompt_build_hook() {
    let (code, plain, stderr) = run_cli(&[
        "prompt",
        "fixtures/runs/telegram-direct.json",
        "--no-cache-boundary",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(!plain.contains(CACHE_BOUNDARY));
    let (_, marked, _) = run_cli(&["prompt", "fixtures/runs/telegram-direct.json"]);
    assert_eq!(
        marked.replace(&format!("\n\n{CACHE_BOUNDARY}\n\n"), "\n\n"),
        plain,
        "the halves joined by one blank line"
    );
    let hook = r#"python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["event"]=="before_prompt_build" and d["prompt"]["stablePrefix"]; print(json.dumps({"plugin": "acme", "appendSystemContext": "Acme is in maintenance mode."}))'"#;
    let (code, hooked, stderr) = run_cli(&[
        "prompt",
        "fixtures/runs/telegram-direct.json",
        "--before-prompt-build",
        hook,
    ]);
    assert_eq!(code, 0, "{stderr}");
    let (_, dynamic) = hooked.split_once(CACHE_BOUNDARY).expect("boundary kept");
    assert!(
        dynamic.contains("<plugin-context source=\"acme\">"),
        "{hooked}"
    );
    assert!(dynamic.contains("Acme is in maintenance mode."));
    // A hook that answers two things at once is refused, naming the hook.
    let (code, _, stderr) = run_cli(&[
        "prompt",
        "fixtures/runs/telegram-direct.json",
        "--before-prompt-build",
        r#"echo '{"systemPrompt": "x", "appendSystemContext": "y"}'"#,
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("more than one"), "{stderr}");
}

/// The `agent:bootstrap` hook gets the context routing.md §3.5 lists: the workspace, the file
/// list, the config, the session key and id, the agent id.
#[test]
fn the_bootstrap_hook_receives_config_and_session_id() {
    let dir = tempfile::tempdir().expect("dir");
    let seen = dir.path().join("seen.json");
    let ws = TestWorkspace::full();
    let document = dir.path().join("run.json");
    std::fs::write(
        &document,
        json!({
            "workspace": ws.path(),
            "sessionKey": "agent:main:telegram:direct:1",
            "sessionId": "9f0c2d4e-session",
            "config": {"agents": {"defaults": {"bootstrapMaxChars": 12000}}}
        })
        .to_string(),
    )
    .expect("write");
    let hook = format!(
        "python3 -c 'import json,sys; d=json.load(sys.stdin); open(\"{}\",\"w\").write(json.dumps(d)); print(json.dumps({{\"files\": d[\"files\"]}}))'",
        seen.display()
    );
    let (code, _, stderr) = run_cli(&[
        "params",
        document.to_str().expect("utf-8"),
        "--bootstrap-hook",
        &hook,
    ]);
    assert_eq!(code, 0, "{stderr}");
    let input: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&seen).expect("the hook ran")).expect("json");
    assert_eq!(input["event"], "agent:bootstrap");
    assert_eq!(input["sessionId"], "9f0c2d4e-session");
    assert_eq!(input["sessionKey"], "agent:main:telegram:direct:1");
    assert_eq!(
        input["config"]["agents"]["defaults"]["bootstrapMaxChars"],
        12000
    );
    assert!(input["files"]
        .as_array()
        .is_some_and(|files| !files.is_empty()));
}

#[test]
fn exec_approvals_use_the_card_on_every_channel_openclaw_knows_to_have_one() {
    let ws = TestWorkspace::full();
    let native = |channel: &str| {
        let run = run_with(
            &ws.path(),
            serde_json::json!({"harness": "embedded", "tools": [tool("exec")],
            "channel": {"name": channel, "chatType": "direct"}}),
        );
        let text = prompt_for(&run, None).text();
        assert!(text.contains("Exec approvals:"), "{channel}");
        text.contains("native approval UI")
    };
    // OpenClaw 2026.6.10's known channels, in any case.
    for channel in [
        "telegram",
        "discord",
        "slack",
        "signal",
        "matrix",
        "googlechat",
        "qqbot",
        "Signal",
        "MATRIX",
        "GoogleChat",
    ] {
        assert!(native(channel), "{channel} has approval cards");
    }
    for channel in ["whatsapp", "imessage", "webchat", "sms", "signal-x"] {
        assert!(!native(channel), "{channel}: the manual /approve flow");
    }
}

/// Memory Recall as OpenClaw 2026.6.10 builds it (issue 38, items 2 and 8): the memory tools are
/// found in any casing, and `memory.citations` turns citations off only when it is exactly
/// `"off"` (OpenClaw compares it as written: `" off "` and `"OFF"` leave them on).
#[test]
fn memory_recall_finds_tools_in_any_case_and_reads_citations_as_written() {
    let ws = TestWorkspace::full();
    let prompt = |tool_name: &str, citations: Option<&str>| {
        let mut fields =
            serde_json::json!({"harness": "embedded", "tools": [tool("read"), tool(tool_name)]});
        if let Some(citations) = citations {
            fields["config"] = serde_json::json!({"memory": {"citations": citations}});
        }
        prompt_for(&run_with(&ws.path(), fields), None).text()
    };
    for name in ["memory_search", "Memory_Search", " MEMORY_GET "] {
        assert!(prompt(name, None).contains("## Memory Recall"), "{name}");
    }
    assert!(!prompt("memory_searcher", None).contains("## Memory Recall"));
    let off = "Never mention memory file paths";
    assert!(prompt("memory_search", Some("off")).contains(off));
    for kept_on in [" off ", "OFF", "auto"] {
        let text = prompt("memory_search", Some(kept_on));
        assert!(
            !text.contains(off) && text.contains("Source: <path#line>"),
            "{kept_on:?}"
        );
    }
}

/// Seed sentences that had no test (issue 38): the `session_status` guidance only with the tool;
/// the automatic completion wake bullet only with `exec` and exec's `notifyOnExit` not false (the
/// agent's own setting first); the public docs mirror named with its address beside local docs.
#[test]
fn session_status_wake_and_docs_mirror_follow_their_inputs() {
    let ws = TestWorkspace::full();
    let prompt = |tools: &[&str], config: serde_json::Value| {
        let tools: Vec<serde_json::Value> = tools.iter().map(|name| tool(name)).collect();
        let fields = serde_json::json!({"harness": "embedded", "tools": tools, "config": config});
        prompt_for(&run_with(&ws.path(), fields), None).text()
    };
    let status = "`session_status` shows the current time";
    assert!(prompt(&["read", "session_status"], serde_json::json!({})).contains(status));
    assert!(!prompt(&["read"], serde_json::json!({})).contains(status));
    let wake = "rely on the push-based wake";
    assert!(prompt(&["exec"], serde_json::json!({})).contains(wake));
    assert!(!prompt(&["read"], serde_json::json!({})).contains(wake));
    let off = serde_json::json!({"tools": {"exec": {"notifyOnExit": false}}});
    assert!(!prompt(&["exec"], off).contains(wake), "notifyOnExit false");
    let agent_on = serde_json::json!({"tools": {"exec": {"notifyOnExit": false}},
        "agents": {"list": [{"id": "main", "tools": {"exec": {"notifyOnExit": true}}}]}});
    assert!(
        prompt(&["exec"], agent_on).contains(wake),
        "the agent's own wins"
    );
    let agent_off = serde_json::json!({"agents": {"list": [{"id": "main", "tools": {"exec": {"notifyOnExit": false}}}]}});
    assert!(!prompt(&["exec"], agent_off).contains(wake));
    let local = prompt(
        &["read"],
        serde_json::json!({"docs": {"path": "/srv/openclaw/docs"}}),
    );
    assert!(
        local.contains("/srv/openclaw/docs (local; public mirror: https://docs.openclaw.ai)"),
        "{local}"
    );
    assert!(prompt(&["read"], serde_json::json!({}))
        .contains("OpenClaw docs: https://docs.openclaw.ai"));
}

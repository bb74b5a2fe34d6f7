//! Routing for every trigger and mode (docs/routing.md §8.1, RV1-RV11) plus the load-time safety rules.

use clawbridge::Surface;
use clawbridge::DEFAULT_COLLABORATION_PRESET;
use clawbridge::TRUNCATION_NOTICE;
use clawbridge::{
    heartbeat_note, CRON_NOTE, HEARTBEAT_POINTER_HEADING, MEMORY_NOTE_HEADING, REQUEST_LABEL,
    SKILLS_HEADING, WORKSPACE_BLOCK_HEADING,
};
use clawbridge::{translate, TranslateOptions};
use serde_json::{json, Value};

use crate::util::*;

const PROMPT: &str = "Please check the calendar.";

fn memory_tools() -> Value {
    json!([tool("message"), tool("memory_search"), tool("cron")])
}

fn preset() -> &'static str {
    DEFAULT_COLLABORATION_PRESET.trim_end()
}

/// Offsets of `needles` in `haystack`, asserting each occurs and they are in order.
fn assert_in_order(haystack: &str, needles: &[&str]) {
    let mut last = 0;
    for needle in needles {
        let found = haystack[last..]
            .find(needle)
            .unwrap_or_else(|| panic!("{needle:?} missing or out of order in:\n{haystack}"));
        last += found + needle.len();
    }
}

#[test]
fn rv1_codex_user_turn_with_memory_tools() {
    let ws = TestWorkspace::full();
    let run = run_with(
        &ws.path(),
        json!({"message": PROMPT, "tools": memory_tools()}),
    );
    let params = params_json(&run);
    let developer = developer_instructions(&params);
    assert_in_order(
        &developer,
        &[
            WORKSPACE_BLOCK_HEADING,
            &format!("### {}", ws.shown("SOUL.md")),
            &placeholder("SOUL.md"),
            &format!("### {}", ws.shown("IDENTITY.md")),
            &format!("### {}", ws.shown("USER.md")),
            &format!("### {}", ws.shown("TOOLS.md")),
            &placeholder("TOOLS.md"),
        ],
    );
    let collaboration = collaboration(&params).expect("collaboration text");
    assert!(collaboration.starts_with(preset()));
    assert_in_order(
        &collaboration,
        &[
            preset(),
            MEMORY_NOTE_HEADING,
            &format!("- {}", ws.shown("MEMORY.md")),
            SKILLS_HEADING,
            "<name>weather</name>",
        ],
    );
    assert_eq!(
        turn_input(&params),
        PROMPT,
        "nothing routed to the turn input"
    );
    let everything = all_text(&params);
    for absent in ["AGENTS.md", "HEARTBEAT.md", "MEMORY.md"] {
        assert!(
            !everything.contains(&placeholder(absent)),
            "{absent} content leaked"
        );
    }
    assert!(!everything.contains(HEARTBEAT_POINTER_HEADING));
}

/// A memory tool named in another casing or with spaces around it is still the memory tool, as
/// OpenClaw's Codex memory routing compares names (trimmed, lower-cased): MEMORY.md gets the
/// memory note, not a paste into the turn (issue 38, item 2).
#[test]
fn a_memory_tool_in_another_casing_still_routes_memory_md_to_the_note() {
    let ws = TestWorkspace::full();
    for name in ["Memory_Search", " MEMORY_GET "] {
        let run = run_with(
            &ws.path(),
            json!({"message": PROMPT, "tools": [tool("message"), tool(name)]}),
        );
        let params = params_json(&run);
        let collaboration = collaboration(&params).expect("collaboration text");
        assert!(collaboration.contains(MEMORY_NOTE_HEADING), "{name}");
        assert!(
            !all_text(&params).contains(&placeholder("MEMORY.md")),
            "{name}: MEMORY.md pasted"
        );
        assert_eq!(turn_input(&params), PROMPT, "{name}");
    }
}

#[test]
fn rv2_memory_plugin_disabled_sends_memory_in_turn_input() {
    let ws = TestWorkspace::full();
    let run = run_with(
        &ws.path(),
        json!({"message": PROMPT, "tools": [tool("message")]}),
    );
    let params = params_json(&run);
    let collaboration = collaboration(&params).expect("collaboration text");
    assert!(!collaboration.contains(MEMORY_NOTE_HEADING));
    assert_in_order(&collaboration, &[preset(), SKILLS_HEADING]);
    let input = turn_input(&params);
    assert_in_order(
        &input,
        &[
            "# Project Context",
            &format!("## {}", ws.shown("MEMORY.md")),
            &placeholder("MEMORY.md"),
            REQUEST_LABEL,
            PROMPT,
        ],
    );
    assert!(input.ends_with(&format!("{REQUEST_LABEL}\n{PROMPT}")));
}

#[test]
fn rv3_other_memory_workspace_sends_memory_in_turn_input() {
    let ws = TestWorkspace::full();
    let memory = TestWorkspace::full();
    let run = run_with(
        &ws.path(),
        json!({"message": PROMPT, "tools": memory_tools(), "memoryWorkspace": memory.path()}),
    );
    let params = params_json(&run);
    assert!(!collaboration(&params)
        .unwrap_or_default()
        .contains(MEMORY_NOTE_HEADING));
    assert!(turn_input(&params).contains(&format!("## {}", ws.shown("MEMORY.md"))));
}

#[test]
fn rv3_a_configured_agent_workspace_elsewhere_sends_memory_in_turn_input() {
    let ws = TestWorkspace::full();
    let agent_home = TestWorkspace::full();
    for config in [
        json!({"agents": {"defaults": {"workspace": agent_home.path()}}}),
        json!({"agents": {"list": [{"id": "main", "workspace": agent_home.path()}]}}),
    ] {
        let run = run_with(
            &ws.path(),
            json!({"message": PROMPT, "tools": memory_tools(), "config": config}),
        );
        let params = params_json(&run);
        assert!(
            !collaboration(&params)
                .unwrap_or_default()
                .contains(MEMORY_NOTE_HEADING),
            "{config}"
        );
        assert!(
            turn_input(&params).contains(&placeholder("MEMORY.md")),
            "{config}"
        );
    }
    // The configured workspace is the run's: the note, as before.
    let run = run_with(
        &ws.path(),
        json!({"message": PROMPT, "tools": memory_tools(),
               "config": {"agents": {"defaults": {"workspace": ws.path()}}}}),
    );
    assert!(collaboration(&params_json(&run))
        .unwrap_or_default()
        .contains(MEMORY_NOTE_HEADING));
}

#[test]
fn a_hook_supplied_memory_md_elsewhere_travels_in_the_turn_input() {
    let ws = TestWorkspace::full();
    let run = run_with(
        &ws.path(),
        json!({"message": PROMPT, "tools": memory_tools()}),
    );
    let hook = "python3 -c 'import json,sys; d=json.load(sys.stdin); [f.update(path=\"/notes/MEMORY.md\", content=\"Hooked memory.\") for f in d[\"files\"] if f[\"name\"]==\"MEMORY.md\"]; print(json.dumps(d))'";
    let options = TranslateOptions {
        bootstrap_hook: Some(hook.to_string()),
        ..TranslateOptions::hermetic()
    };
    let params = serde_json::to_value(
        translate(&run, &options)
            .expect("translate")
            .codex_params(&run),
    )
    .expect("json");
    assert!(!collaboration(&params)
        .unwrap_or_default()
        .contains(MEMORY_NOTE_HEADING));
    let input = turn_input(&params);
    assert!(
        input.contains("## /notes/MEMORY.md\n\nHooked memory."),
        "{input}"
    );
}

#[test]
fn rv4_heartbeat_turn_points_at_heartbeat_md() {
    let ws = TestWorkspace::full();
    let run = run_with(
        &ws.path(),
        json!({"message": "Heartbeat wake.", "trigger": "heartbeat", "tools": memory_tools()}),
    );
    let params = params_json(&run);
    let collaboration = collaboration(&params).expect("collaboration text");
    assert_in_order(
        &collaboration,
        &[
            preset(),
            &heartbeat_note(),
            MEMORY_NOTE_HEADING,
            SKILLS_HEADING,
            HEARTBEAT_POINTER_HEADING,
            &format!("- {}", ws.shown("HEARTBEAT.md")),
        ],
    );
    assert!(!all_text(&params).contains(&placeholder("HEARTBEAT.md")));

    ws.write("HEARTBEAT.md", "  \n\t\n");
    let params = params_json(&run);
    let text = crate::util::collaboration(&params).expect("collaboration text");
    assert!(text.contains(&heartbeat_note()));
    assert!(!text.contains(HEARTBEAT_POINTER_HEADING));
}

#[test]
fn rv5_nothing_to_add_sends_null() {
    let ws = TestWorkspace::full();
    ws.remove("MEMORY.md");
    ws.remove("skills/weather/SKILL.md");
    let run = run_with(
        &ws.path(),
        json!({"message": PROMPT, "tools": memory_tools()}),
    );
    let params = params_json(&run);
    assert_eq!(
        params["turnStart"]["collaborationMode"]["settings"]["developer_instructions"],
        Value::Null
    );
    assert_eq!(params["turnStart"]["collaborationMode"]["mode"], "default");
}

#[test]
fn rv6_lightweight_cron_forwards_the_prompt_byte_for_byte() {
    let ws = TestWorkspace::full();
    let scheduled = "  run: ./backup.sh --all\n";
    let run = run_with(
        &ws.path(),
        json!({"message": scheduled, "trigger": "cron", "lightweight": true, "tools": memory_tools()}),
    );
    let params = params_json(&run);
    assert_eq!(turn_input(&params), scheduled);
    assert_eq!(collaboration(&params), None);
    assert_eq!(params["threadStart"]["config"]["project_doc_max_bytes"], 0);
    let developer = developer_instructions(&params);
    assert!(!developer.contains(WORKSPACE_BLOCK_HEADING));
    for name in ALL_FILES {
        assert!(
            !all_text(&params).contains(&placeholder(name)),
            "{name} leaked"
        );
    }
}

#[test]
fn rv7_full_context_cron_turn() {
    let ws = TestWorkspace::full();
    let run = run_with(
        &ws.path(),
        json!({"message": "nightly report", "trigger": "cron", "tools": memory_tools()}),
    );
    let params = params_json(&run);
    let collaboration = collaboration(&params).expect("collaboration text");
    assert_in_order(
        &collaboration,
        &[preset(), CRON_NOTE, MEMORY_NOTE_HEADING, SKILLS_HEADING],
    );
    assert!(params["threadStart"]["config"]
        .get("project_doc_max_bytes")
        .is_none());
    assert!(developer_instructions(&params).contains(&placeholder("SOUL.md")));
}

#[test]
fn rv8_subagent_session_gets_tools_md_only() {
    let ws = TestWorkspace::full();
    let run = run_with(
        &ws.path(),
        json!({"message": PROMPT, "sessionKey": "agent:main:subagent:42", "tools": memory_tools()}),
    );
    let params = params_json(&run);
    let developer = developer_instructions(&params);
    assert_eq!(developer.matches("\n### ").count(), 1, "{developer}");
    assert!(developer.contains(&format!("### {}", ws.shown("TOOLS.md"))));
    for name in [
        "SOUL.md",
        "IDENTITY.md",
        "USER.md",
        "MEMORY.md",
        "HEARTBEAT.md",
        "AGENTS.md",
    ] {
        assert!(
            !all_text(&params).contains(&placeholder(name)),
            "{name} leaked"
        );
    }
    assert_eq!(turn_input(&params), PROMPT);
    let collaboration = collaboration(&params).expect("skills still listed");
    assert!(!collaboration.contains(MEMORY_NOTE_HEADING));
}

#[test]
fn rv9_brand_new_workspace_sends_bootstrap_md_until_setup_completes() {
    // Brand new: OpenClaw's seeded templates and BOOTSTRAP.md, no memory and no skills yet.
    let brand_new = || {
        let ws = TestWorkspace::full();
        ws.remove("MEMORY.md");
        std::fs::remove_dir_all(ws.path().join("skills")).expect("rm skills");
        ws.write("BOOTSTRAP.md", "<BOOTSTRAP.md contents will be here>\n");
        ws
    };
    let bootstrap_sent = |ws: &TestWorkspace, extra: Value| {
        let mut fields = json!({"message": PROMPT});
        if let (Some(target), Value::Object(extra)) = (fields.as_object_mut(), extra) {
            target.extend(extra);
        }
        all_text(&params_json(&run_with(&ws.path(), fields))).contains(&placeholder("BOOTSTRAP.md"))
    };
    let ws = brand_new();
    let input = turn_input(&params_json(&run_with(
        &ws.path(),
        json!({"message": PROMPT}),
    )));
    assert_in_order(
        &input,
        &[
            "# Project Context",
            &format!("## {}", ws.shown("BOOTSTRAP.md")),
            &placeholder("BOOTSTRAP.md"),
        ],
    );
    let done = r#"{"version":1,"setupCompletedAt":"2026-01-01T00:00:00Z"}"#;
    let pending = r#"{"version":1,"bootstrapSeededAt":"2026-01-01T00:00:00Z"}"#;
    // OpenClaw 2026.6's file at the workspace root.
    let ws = brand_new();
    ws.write("openclaw-workspace-state.json", done);
    assert!(!bootstrap_sent(&ws, json!({})), "root state file");
    // The legacy file is a fallback only: a root file that says "pending" wins over it.
    let ws = brand_new();
    ws.write(".openclaw/workspace-state.json", done);
    assert!(!bootstrap_sent(&ws, json!({})), "legacy state file");
    ws.write("openclaw-workspace-state.json", pending);
    assert!(bootstrap_sent(&ws, json!({})), "the root file wins");
    // The older key, and a blank stamp that records nothing.
    let ws = brand_new();
    ws.write(
        "openclaw-workspace-state.json",
        r#"{"onboardingCompletedAt":"2026-01-01"}"#,
    );
    assert!(!bootstrap_sent(&ws, json!({})), "onboardingCompletedAt");
    ws.write(
        "openclaw-workspace-state.json",
        r#"{"setupCompletedAt":"  "}"#,
    );
    assert!(bootstrap_sent(&ws, json!({})), "a blank stamp");
    // User content means the workspace is established: a stale BOOTSTRAP.md stays out.
    for evidence in [
        "MEMORY.md",
        "memory/2026-01-01.md",
        "skills/weather/SKILL.md",
    ] {
        let ws = brand_new();
        ws.write(evidence, WEATHER_SKILL);
        assert!(!bootstrap_sent(&ws, json!({})), "{evidence}");
    }
    // The run document states the fact, both ways.
    let ws = brand_new();
    assert!(!bootstrap_sent(&ws, json!({"setupComplete": true})));
    ws.write("openclaw-workspace-state.json", done);
    assert!(bootstrap_sent(&ws, json!({"setupComplete": false})));
}

#[test]
fn rv10_embedded_heartbeat_gate() {
    let ws = TestWorkspace::full();
    let config =
        json!({"agents": {"defaults": {"heartbeat": {"includeSystemPromptSection": false}}}});
    let run = run_with(&ws.path(), json!({"harness": "embedded", "config": config}));
    let (translation, _) = translate_run(&run);
    assert!(translation
        .routed
        .files
        .iter()
        .all(|file| file.name != "HEARTBEAT.md"));
    assert!(translation
        .loaded
        .omitted
        .iter()
        .any(|file| file.name == "HEARTBEAT.md"));

    let run = run_with(
        &ws.path(),
        json!({"harness": "embedded", "config": config, "trigger": "heartbeat"}),
    );
    let (translation, _) = translate_run(&run);
    let heartbeat = translation
        .routed
        .files
        .iter()
        .find(|file| file.name == "HEARTBEAT.md")
        .expect("heartbeat kept");
    assert_eq!(heartbeat.surface, Surface::SystemPromptDynamic);
    assert_eq!(translation.routed.dynamic_project_files.len(), 1);
}

#[test]
fn rv11_missing_soul() {
    let ws = TestWorkspace::full();
    ws.remove("SOUL.md");
    let run = run_with(&ws.path(), json!({"harness": "embedded"}));
    let (translation, _) = translate_run(&run);
    let soul = translation
        .routed
        .project_files
        .iter()
        .find(|file| file.name == "SOUL.md")
        .expect("marker");
    assert_eq!(soul.text, format!("[missing: {}]", ws.shown("SOUL.md")));
    // A missing SOUL.md defines no persona: the prompt does not claim it does.
    let prompt = translation
        .system_prompt(&run, &clawbridge::PromptOptions::default())
        .text();
    assert!(prompt.contains(&format!("## {}", ws.shown("SOUL.md"))));
    assert!(!prompt.contains("persona and tone"), "{prompt}");

    let run = run_with(&ws.path(), json!({"message": PROMPT}));
    let params = params_json(&run);
    let everything = all_text(&params);
    assert!(!everything.contains("[missing:"), "no marker on Codex");
    assert!(
        !everything.contains(&ws.shown("SOUL.md")),
        "no SOUL.md entry on Codex"
    );
    assert!(!developer_instructions(&params).contains("persona and tone"));
}

#[test]
fn oversized_soul_is_cut_to_the_cap_with_marker_and_notice() {
    let ws = TestWorkspace::full();
    ws.write("SOUL.md", &"S".repeat(25_000));
    let run = run_with(&ws.path(), json!({"message": PROMPT}));
    let (translation, params) = translate_run(&run);
    let soul = translation
        .routed
        .thread_files
        .iter()
        .find(|file| file.name == "SOUL.md")
        .expect("soul");
    assert!(soul.injected_chars <= 20_000);
    assert!(soul
        .text
        .contains("[truncated SOUL.md: kept 14934+4978 of 25000 chars"));
    let developer = serde_json::to_value(&params)
        .map(|p| developer_instructions(&p))
        .expect("json");
    assert!(developer.ends_with(TRUNCATION_NOTICE));
    assert!(!turn_input(&serde_json::to_value(&params).expect("json")).contains(TRUNCATION_NOTICE));

    // `off` hides the notice but still truncates.
    let run = run_with(
        &ws.path(),
        json!({"message": PROMPT, "config": {"agents": {"defaults": {"bootstrapPromptTruncationWarning": "off"}}}}),
    );
    let developer = developer_instructions(&params_json(&run));
    assert!(developer.contains("[truncated SOUL.md"));
    assert!(!developer.contains(TRUNCATION_NOTICE));
}

#[test]
fn per_agent_budget_override() {
    let ws = TestWorkspace::full();
    ws.write("SOUL.md", &"S".repeat(3_000));
    let run = run_with(
        &ws.path(),
        json!({"agentId": "ops", "config": {"agents": {"list": [{"id": "ops", "bootstrapMaxChars": 1000}]}}}),
    );
    let (translation, _) = translate_run(&run);
    let soul = translation
        .routed
        .files
        .iter()
        .find(|file| file.name == "SOUL.md")
        .expect("soul");
    assert!(soul.truncated && soul.injected_chars <= 1000);
}

#[test]
fn memory_md_is_loaded_by_exact_name_only() {
    let ws = TestWorkspace::full();
    ws.remove("MEMORY.md");
    ws.write("memory.md", "<lower-case memory>\n");
    let run = run_with(&ws.path(), json!({"message": PROMPT}));
    assert!(!all_text(&params_json(&run)).contains("lower-case memory"));
}

#[cfg(unix)]
#[test]
fn symlink_leaving_the_workspace_is_never_read() {
    let ws = TestWorkspace::full();
    let outside = TestWorkspace::empty();
    outside.write("secret.md", "TOP SECRET\n");
    ws.remove("USER.md");
    std::os::unix::fs::symlink(
        outside.dir.path().join("secret.md"),
        ws.dir.path().join("USER.md"),
    )
    .expect("symlink");
    let run = run_with(&ws.path(), json!({"harness": "embedded"}));
    let (translation, _) = translate_run(&run);
    let user = translation
        .routed
        .files
        .iter()
        .find(|file| file.name == "USER.md")
        .expect("user");
    assert!(
        user.note
            .as_deref()
            .unwrap_or_default()
            .contains("unreadable"),
        "{user:?}"
    );
    assert!(translation
        .routed
        .project_files
        .iter()
        .all(|file| !file.text.contains("TOP SECRET")));
    assert!(translation
        .warnings
        .iter()
        .any(|warning| warning.contains("symlink leaves the workspace")));
    let run = run_with(&ws.path(), json!({}));
    assert!(!all_text(&params_json(&run)).contains("TOP SECRET"));
}

#[test]
fn invalid_utf8_is_replaced_with_a_warning() {
    let ws = TestWorkspace::full();
    ws.write_bytes("SOUL.md", b"Be \xff warm.\n");
    let run = run_with(&ws.path(), json!({}));
    let (translation, params) = translate_run(&run);
    let developer = developer_instructions(&serde_json::to_value(params).expect("json"));
    assert!(developer.contains("Be \u{FFFD} warm."));
    assert!(translation
        .warnings
        .iter()
        .any(|w| w.contains("SOUL.md") && w.contains("invalid UTF-8")));
}

#[test]
fn files_over_two_mebibytes_are_not_read() {
    let ws = TestWorkspace::full();
    ws.write("TOOLS.md", &"t".repeat(2 * 1024 * 1024 + 1));
    let run = run_with(&ws.path(), json!({}));
    let (translation, _) = translate_run(&run);
    assert!(translation
        .routed
        .thread_files
        .iter()
        .all(|file| file.name != "TOOLS.md"));
    assert!(translation
        .warnings
        .iter()
        .any(|w| w.contains("TOOLS.md") && w.contains("2 MiB")));
}

#[test]
fn lightweight_heartbeat_keeps_only_the_pointer() {
    let ws = TestWorkspace::full();
    let run = run_with(
        &ws.path(),
        json!({"trigger": "heartbeat", "lightweight": true, "tools": memory_tools()}),
    );
    let params = params_json(&run);
    assert!(!developer_instructions(&params).contains(WORKSPACE_BLOCK_HEADING));
    let collaboration = collaboration(&params).expect("collaboration");
    assert_in_order(
        &collaboration,
        &[
            preset(),
            &heartbeat_note(),
            SKILLS_HEADING,
            HEARTBEAT_POINTER_HEADING,
        ],
    );
    assert!(!collaboration.contains(MEMORY_NOTE_HEADING));
}

#[test]
fn resume_sends_the_same_developer_instructions() {
    let ws = TestWorkspace::full();
    let start = params_json(&run_with(&ws.path(), json!({"message": PROMPT})));
    let resume = params_json(&run_with(
        &ws.path(),
        json!({"message": PROMPT, "threadId": "thr_1"}),
    ));
    assert_eq!(
        developer_instructions(&start),
        developer_instructions(&resume)
    );
    assert_eq!(resume["threadResume"]["threadId"], "thr_1");
    assert_eq!(resume["turnStart"]["threadId"], "thr_1");
    assert_eq!(start["turnStart"]["threadId"], "<thread-id>");
    for absent in [
        "cwd",
        "serviceName",
        "dynamicTools",
        "experimentalRawEvents",
    ] {
        assert!(
            resume["threadResume"].get(absent).is_none(),
            "{absent} on resume"
        );
    }
}

#[test]
fn dynamic_tools_split_direct_and_searchable() {
    let ws = TestWorkspace::full();
    let run = run_with(
        &ws.path(),
        json!({"tools": [tool("read"), tool("cron"), tool("message"), tool("exec"), tool("sessions_spawn"), tool("bash"), tool("web_search")],
               "directTools": ["message"]}),
    );
    let params = params_json(&run);
    let tools = params["threadStart"]["dynamicTools"]
        .as_array()
        .expect("tools");
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, vec!["message", "sessions_spawn", "openclaw"]);
    let namespace = &tools[2];
    assert_eq!(namespace["type"], "namespace");
    assert!(!namespace["description"]
        .as_str()
        .unwrap_or_default()
        .is_empty());
    let inner: Vec<&str> = namespace["tools"]
        .as_array()
        .expect("inner")
        .iter()
        .map(|t| {
            assert_eq!(t["deferLoading"], true);
            assert_eq!(t["type"], "function");
            t["name"].as_str().unwrap_or_default()
        })
        .collect();
    assert_eq!(inner, vec!["cron", "web_search"]);
    assert!(tools[0].get("deferLoading").is_none());
    assert!(developer_instructions(&params).contains("available on demand: cron, web_search."));
}

#[test]
fn an_unreadable_bootstrap_file_gets_a_warning_and_a_marker() {
    let ws = TestWorkspace::full();
    // Not a regular file: never read, named in a warning, and shown as missing.
    std::fs::remove_file(ws.path().join("USER.md")).expect("rm");
    std::fs::create_dir_all(ws.path().join("USER.md")).expect("dir");
    let run = run_with(&ws.path(), json!({"harness": "embedded"}));
    let (translation, _) = translate_run(&run);
    assert!(
        translation
            .warnings
            .iter()
            .any(|w| w.contains("USER.md") && w.contains("not a regular file")),
        "{:?}",
        translation.warnings
    );
    assert!(translation
        .routed
        .project_files
        .iter()
        .any(|file| file.name == "USER.md" && file.text.starts_with("[missing:")));
}

#[test]
fn a_file_the_total_budget_drops_whole_is_reported_and_noticed() {
    // T5 shape: AGENTS.md takes the budget, 36 units remain (< 64), USER.md is dropped whole.
    let ws = TestWorkspace::empty();
    ws.write("AGENTS.md", &"a".repeat(64));
    ws.write("USER.md", "Prefers short answers.");
    let config = json!({"agents": {"defaults": {"bootstrapTotalMaxChars": 100}}});
    // Embedded: AGENTS.md is pasted, USER.md is not, and the notice says so.
    let run = run_with(&ws.path(), json!({"harness": "embedded", "config": config}));
    let (translation, _) = translate_run(&run);
    let report = &translation.routed.report;
    assert_eq!(report.files.len(), 1, "{report:?}");
    assert_eq!(report.files[0].path, ws.shown("USER.md"));
    assert_eq!(report.files[0].injected_chars, 0);
    assert_eq!(report.files[0].causes, vec!["total"]);
    let prompt = translation
        .system_prompt(&run, &clawbridge::PromptOptions::default())
        .text();
    assert!(!prompt.contains("Prefers short answers."));
    assert!(prompt.contains(TRUNCATION_NOTICE), "{prompt}");
    let user = translation
        .routed
        .files
        .iter()
        .find(|file| file.name == "USER.md")
        .expect("USER.md row");
    assert!(
        user.truncated && user.surface == Surface::Omitted,
        "{user:?}"
    );
    // Codex: AGENTS.md is native, so it costs nothing; a large SOUL.md takes the budget instead
    // and USER.md, bound for the thread developer instructions, is dropped there.
    ws.write("SOUL.md", &"s".repeat(64));
    let run = run_with(&ws.path(), json!({"config": config}));
    let (translation, params) = translate_run(&run);
    let params = serde_json::to_value(params).expect("json");
    assert_eq!(translation.routed.report.files.len(), 1);
    let developer = developer_instructions(&params);
    assert!(!developer.contains("Prefers short answers."));
    assert!(developer.contains(TRUNCATION_NOTICE), "{developer}");
    assert!(!turn_input(&params).contains(TRUNCATION_NOTICE));
}

#[test]
fn an_agent_with_heartbeats_off_gets_no_heartbeats_section_and_no_heartbeat_md() {
    let ws = TestWorkspace::full();
    let run = run_with(
        &ws.path(),
        json!({"harness": "embedded", "agentId": "main", "config": {"agents": {
            "defaults": {"heartbeat": {"every": "30m"}},
            "list": [{"id": "main", "heartbeat": {"every": "0m"}}]
        }}}),
    );
    let (translation, _) = translate_run(&run);
    let prompt = translation
        .system_prompt(&run, &clawbridge::PromptOptions::default())
        .text();
    assert!(!prompt.contains("## Heartbeats"), "{prompt}");
    assert!(!prompt.contains(&placeholder("HEARTBEAT.md")));
}

/// The session and context-mode filters compose (docs/routing.md §3.2): a file stays only if
/// every filter that applies keeps it. Fails with the old rule, where a subagent session or a
/// minimal prompt replaced the lightweight filter.
#[test]
fn session_and_lightweight_filters_compose() {
    let ws = TestWorkspace::full();
    let kept = |fields: Value| -> Vec<String> {
        let run = run_with(&ws.path(), fields);
        let (translation, _) = translate_run(&run);
        translation
            .loaded
            .files
            .iter()
            .map(|file| file.name.clone())
            .collect()
    };
    // A lightweight heartbeat with a minimal prompt (a main session): HEARTBEAT.md only.
    assert_eq!(
        kept(json!({"trigger": "heartbeat", "lightweight": true, "promptMode": "minimal"})),
        ["HEARTBEAT.md"]
    );
    // A lightweight heartbeat of a subagent session: nothing (HEARTBEAT.md is not a subagent's).
    assert_eq!(
        kept(
            json!({"trigger": "heartbeat", "lightweight": true, "sessionKey": "agent:main:subagent:1"})
        ),
        Vec::<String>::new()
    );
    // A lightweight cron run of a subagent: nothing.
    assert_eq!(
        kept(
            json!({"trigger": "cron", "lightweight": true, "sessionKey": "Agent:Main:SubAgent:X"})
        ),
        Vec::<String>::new()
    );
    // A subagent in full context mode, whatever the casing of its key: AGENTS.md and TOOLS.md.
    assert_eq!(
        kept(json!({"sessionKey": "AGENT:main:SUBAGENT:x"})),
        ["AGENTS.md", "TOOLS.md"]
    );
    // `:subagent:` further along the key is not a subagent session.
    assert!(kept(json!({"sessionKey": "agent:main:telegram:subagent:x"})).len() > 2);
}

/// The budget walk stops at the 64-unit floor on an empty file too (docs/routing.md §4.2): with a
/// total of 100, AGENTS.md at 60 units and an empty SOUL.md, no later missing marker is emitted.
/// Before, empty files were left out of the walk and the markers after them still came.
#[test]
fn the_budget_floor_stops_the_walk_at_an_empty_file() {
    let ws = TestWorkspace::empty();
    ws.write("AGENTS.md", &"a".repeat(60));
    ws.write("SOUL.md", "");
    let config = json!({"agents": {"defaults": {"bootstrapTotalMaxChars": 100}}});
    let run = run_with(&ws.path(), json!({"harness": "embedded", "config": config}));
    let (translation, _) = translate_run(&run);
    let injected: Vec<&str> = translation
        .routed
        .project_files
        .iter()
        .map(|file| file.name.as_str())
        .collect();
    assert_eq!(injected, ["AGENTS.md"], "{:?}", translation.routed.files);
    // With SOUL.md missing instead of empty, its marker still fits (markers come before the
    // floor check).
    std::fs::remove_file(ws.path().join("SOUL.md")).expect("remove");
    let (translation, _) = translate_run(&run_with(
        &ws.path(),
        json!({"harness": "embedded", "config": config}),
    ));
    assert!(translation
        .routed
        .project_files
        .iter()
        .any(|file| file.name == "SOUL.md"));
}

/// The thread `config` as OpenClaw 2026.6.10 builds it (docs/codex-wire.md §4.4): hosted web
/// search with `openaiCodex`'s domains (trimmed, unique), context size and location; a search
/// provider of OpenClaw's own, or `openaiCodex.enabled: false`, turns Codex's off; the caller's
/// keys go under web search and over code mode; code mode off wins over the caller and drops the
/// patch events; `gpt-5.4-nano` cannot use tool search.
#[test]
fn thread_config_follows_openclaw_s_rules() {
    let ws = TestWorkspace::full();
    let config_of = |fields: Value| -> Value {
        let mut document = json!({"tools": [tool("message")]});
        if let (Some(target), Value::Object(extra)) = (document.as_object_mut(), fields) {
            target.extend(extra);
        }
        params_json(&run_with(&ws.path(), document))["threadStart"]["config"].clone()
    };
    let hosted = config_of(
        json!({"config": {"tools": {"web": {"search": {"openaiCodex": {
        "mode": "live", "allowedDomains": [" example.com ", "example.com", "", "docs.rs"],
        "contextSize": "high", "userLocation": {"country": " DE ", "city": "Berlin", "region": "  "}}}}}}}),
    );
    assert_eq!(hosted["web_search"], "live");
    assert_eq!(
        hosted["tools.web_search.allowed_domains"],
        json!(["example.com", "docs.rs"])
    );
    assert_eq!(hosted["tools.web_search.context_size"], "high");
    assert_eq!(hosted["tools.web_search.location.country"], "DE");
    assert_eq!(hosted["tools.web_search.location.city"], "Berlin");
    assert!(hosted.get("tools.web_search.location.region").is_none());
    for off in [
        json!({"tools": {"web": {"search": {"provider": "brave"}}}}),
        json!({"tools": {"web": {"search": {"provider": "openai"}}}}),
        json!({"tools": {"web": {"search": {"openaiCodex": {"enabled": false, "allowedDomains": ["a.b"]}}}}}),
        json!({"tools": {"web": {"search": {"enabled": false}}}}),
    ] {
        let config = config_of(json!({ "config": off }));
        assert_eq!(config["web_search"], "disabled", "{config}");
        assert!(config.get("tools.web_search.allowed_domains").is_none());
    }
    let merged = config_of(
        json!({"codexConfig": {"features.code_mode_only": true, "web_search": "live", "model_verbosity": "low"}}),
    );
    assert_eq!(
        merged["features.code_mode_only"], true,
        "the caller over code mode"
    );
    assert_eq!(merged["web_search"], "cached", "web search over the caller");
    assert_eq!(merged["model_verbosity"], "low");
    let plain = config_of(json!({}));
    assert_eq!(plain["features.apply_patch_streaming_events"], true);
    assert!(plain.get("features.multi_agent").is_none());
    let no_code_mode = config_of(
        json!({"codeMode": false, "codexConfig": {"features.code_mode": true, "features.apply_patch_streaming_events": true}}),
    );
    assert_eq!(no_code_mode["features.code_mode"], false);
    assert_eq!(no_code_mode["features.code_mode_only"], false);
    assert!(no_code_mode
        .get("features.apply_patch_streaming_events")
        .is_none());
    let nano = config_of(json!({"model": "openai/gpt-5.4-nano"}));
    assert_eq!(nano["features.multi_agent"], false);
}

/// A bare `/new` or `/reset` turn that OpenClaw opened with its startup block of recent daily
/// memory reaches Codex byte for byte (seed: the startup context of that first turn), both when
/// nothing else goes into the turn input and when MEMORY.md travels with it (issue 38).
#[test]
fn a_startup_memory_block_survives_byte_for_byte() {
    let ws = TestWorkspace::full();
    let startup = "[Startup context: recent daily memory]\r\n## memory/2026-06-09.md\n  Bought\u{00A0}milk; 🎉 call Ana  \n\n\t<not a tag> & \"quotes\"\n\n/new";
    for command in [startup.to_string(), startup.replace("/new", "/reset")] {
        let with_tools = run_with(
            &ws.path(),
            json!({"message": command, "tools": memory_tools()}),
        );
        assert_eq!(turn_input(&params_json(&with_tools)), command);
        let pasted = run_with(
            &ws.path(),
            json!({"message": command, "tools": [tool("message")]}),
        );
        let input = turn_input(&params_json(&pasted));
        assert!(input.contains(&placeholder("MEMORY.md")));
        assert!(
            input.ends_with(&format!("{REQUEST_LABEL}\n{command}")),
            "{input:?}"
        );
    }
}

//! Skills discovery, eligibility, catalog and budget (docs/routing.md §7, §8.2).

use clawbridge::len16;
use clawbridge::{render_skills_prompt, CatalogFormat, CatalogSurface};
use serde_json::{json, Value};

use crate::util::*;

fn skill(name: &str, description: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n")
}

#[test]
fn sv1_escaping_and_version() {
    let ws = TestWorkspace::full();
    let run = run_with(&ws.path(), json!({}));
    let (translation, _) = translate_run(&run);
    let expected = format!(
        "  <skill>\n    <name>weather</name>\n    <description>Get weather &lt;data&gt; &amp; &quot;forecasts&quot; it&apos;s</description>\n    <location>{}</location>\n    <version>sha256:76d67ed10de14fe0</version>\n  </skill>",
        ws.shown("skills/weather/SKILL.md")
    );
    assert!(
        translation.skills_prompt.text.contains(&expected),
        "{}",
        translation.skills_prompt.text
    );
}

#[test]
fn sv3_nested_skill_keeps_its_flat_name() {
    let ws = TestWorkspace::empty();
    ws.write("skills/personal/foo/SKILL.md", &skill("foo", "Foo things"));
    let (translation, _) = translate_run(&run_with(&ws.path(), json!({})));
    let text = &translation.skills_prompt.text;
    assert!(text.contains("<name>foo</name>"));
    assert!(text.contains(&format!(
        "<location>{}</location>",
        ws.shown("skills/personal/foo/SKILL.md")
    )));
}

#[test]
fn sv4_locale_order() {
    let ws = TestWorkspace::empty();
    for name in ["zoo", "apple", "Mango"] {
        ws.write(&format!("skills/{name}/SKILL.md"), &skill(name, "d"));
    }
    let (translation, _) = translate_run(&run_with(&ws.path(), json!({})));
    let names: Vec<&str> = translation.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, vec!["apple", "Mango", "zoo"]);
    let text = &translation.skills_prompt.text;
    let apple = text.find("<name>apple").expect("apple");
    let mango = text.find("<name>Mango").expect("mango");
    let zoo = text.find("<name>zoo").expect("zoo");
    assert!(apple < mango && mango < zoo);
}

#[test]
fn sv5_agent_allowlist_is_final() {
    let ws = TestWorkspace::full();
    ws.write("skills/calendar/SKILL.md", &skill("calendar", "Calendar"));
    let config = json!({"agents": {"defaults": {"skills": ["weather"]}, "list": [{"id": "main", "skills": []}]}});
    let (translation, params) = translate_run(&run_with(&ws.path(), json!({"config": config})));
    assert!(translation.skills.is_empty());
    assert!(translation.skills_prompt.text.is_empty());
    let params = serde_json::to_value(params).expect("json");
    assert!(collaboration(&params)
        .unwrap_or_default()
        .find("OpenClaw Skills")
        .is_none());

    let config = json!({"agents": {"defaults": {"skills": ["weather"]}, "list": [{"id": "main"}]}});
    let (translation, _) = translate_run(&run_with(&ws.path(), json!({"config": config})));
    let names: Vec<&str> = translation.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, vec!["weather"]);
}

#[test]
fn sv6_plugin_skill_follows_its_plugin() {
    let ws = TestWorkspace::empty();
    ws.write(
        "skills/acme-tool/SKILL.md",
        "---\nname: acme-tool\ndescription: Acme\nmetadata: {\"openclaw\": {\"plugin\": \"acme\"}}\n---\n",
    );
    let (enabled, _) = translate_run(&run_with(&ws.path(), json!({})));
    assert_eq!(enabled.skills.len(), 1);
    let config = json!({"plugins": {"entries": {"acme": {"enabled": false}}}});
    let (disabled, _) = translate_run(&run_with(&ws.path(), json!({"config": config})));
    assert!(disabled.skills.is_empty());
    assert!(disabled.ineligible_skills[0].reason.contains("acme"));
}

#[test]
fn entries_enabled_false_and_gates() {
    let ws = TestWorkspace::full();
    ws.write(
        "skills/gated/SKILL.md",
        "---\nname: gated\ndescription: Needs a key\nmetadata:\n  openclaw:\n    requires:\n      env: [GATED_KEY]\n      bins: [no-such-binary-xyz]\n---\n",
    );
    ws.write(
        "skills/mac/SKILL.md",
        "---\nname: mac\ndescription: Mac only\nmetadata: {\"openclaw\": {\"os\": [\"darwin\"]}}\n---\n",
    );
    let config = json!({"skills": {"entries": {"weather": {"enabled": false}}}});
    let (translation, _) = translate_run(&run_with(&ws.path(), json!({"config": config})));
    assert!(translation.skills.is_empty(), "{:?}", translation.skills);
    let reasons: Vec<String> = translation
        .ineligible_skills
        .iter()
        .map(|s| s.reason.clone())
        .collect();
    assert!(reasons.iter().any(|r| r.contains("GATED_KEY")));
    assert!(reasons.iter().any(|r| r.contains("linux")));
    assert!(reasons.iter().any(|r| r.contains("enabled is false")));
}

#[test]
fn malformed_skill_is_skipped_with_a_warning_naming_the_file() {
    let ws = TestWorkspace::full();
    ws.write("skills/broken/SKILL.md", "no frontmatter here\n");
    ws.write("skills/nodesc/SKILL.md", "---\nname: nodesc\n---\n");
    ws.write(
        "skills/badyaml/SKILL.md",
        "---\nname: [unclosed\ndescription: x\n---\n",
    );
    let (translation, _) = translate_run(&run_with(&ws.path(), json!({})));
    // `badyaml` is not valid YAML: read line by line, as OpenClaw does, kept with a warning.
    assert_eq!(translation.skills.len(), 2, "{:?}", translation.skills);
    for name in ["broken", "nodesc", "badyaml"] {
        assert!(
            translation
                .warnings
                .iter()
                .any(|w| w.contains(&format!("skills/{name}/SKILL.md"))),
            "{name}: {:?}",
            translation.warnings
        );
    }
}

#[test]
fn sv7_budget_tiers() {
    let ws = TestWorkspace::empty();
    for i in 0..30 {
        ws.write(
            &format!("skills/skill-{i:02}/SKILL.md"),
            &skill(&format!("skill-{i:02}"), &"A".repeat(1000)),
        );
    }
    let (translation, _) = translate_run(&run_with(&ws.path(), json!({})));
    let prompt = &translation.skills_prompt;
    assert_eq!(prompt.format, CatalogFormat::Compact(Some(220)));
    assert_eq!(prompt.included, 30);
    assert!(prompt.text.contains(&format!(
        "<description>{}...</description>",
        "A".repeat(217)
    )));
    assert!(prompt.text.contains("descriptions shortened"));
    assert!(len16(&prompt.text) <= 30_000);

    let skills = &translation.skills;
    let small = render_skills_prompt(skills, 3000, 150, CatalogSurface::Codex);
    assert!(matches!(small.format, CatalogFormat::Compact(_)));
    assert!(small.included < 30 && small.included > 0);
    assert!(small
        .text
        .contains(&format!("included {} of 30", small.included)));
    assert!(len16(&small.text) <= 3000);

    let none = render_skills_prompt(skills, 10, 150, CatalogSurface::Codex);
    assert_eq!(none.format, CatalogFormat::Empty);
    assert!(none.text.is_empty());

    let capped = render_skills_prompt(skills, 1_000_000, 5, CatalogSurface::Codex);
    assert_eq!(capped.included, 5);
    assert!(capped.text.contains("included 5 of 30"));
}

#[test]
fn per_agent_skills_budget_override() {
    let ws = TestWorkspace::empty();
    for i in 0..5 {
        ws.write(
            &format!("skills/s{i}/SKILL.md"),
            &skill(&format!("s{i}"), &"B".repeat(500)),
        );
    }
    let config = json!({"agents": {"list": [{"id": "main", "skillsLimits": {"maxSkillsPromptChars": 1200}}]}});
    let (translation, _) = translate_run(&run_with(&ws.path(), json!({"config": config})));
    assert!(len16(&translation.skills_prompt.text) <= 1200);
    assert!(matches!(
        translation.skills_prompt.format,
        CatalogFormat::Compact(_)
    ));
}

#[test]
fn adversarial_frontmatter_is_refused_before_the_yaml_parser() {
    let ws = TestWorkspace::full();
    // 240 kB of nesting (under the 256,000-byte file cap, so the frontmatter bound is what
    // refuses it): unbounded YAML parsing of this takes minutes.
    let nested = format!(
        "---\nname: deep\ndescription: {}x{}\n---\n",
        "[".repeat(120_000),
        "]".repeat(120_000)
    );
    ws.write("skills/deep/SKILL.md", &nested);
    let indented: String = (0..400)
        .map(|level| format!("{}k{level}:\n", " ".repeat(level)))
        .collect();
    ws.write(
        "skills/indented/SKILL.md",
        &format!("---\nname: indented\ndescription: d\nmetadata:\n{indented}---\n"),
    );
    ws.write(
        "skills/fine/SKILL.md",
        "---\nname: fine\ndescription: ok\n---\n",
    );
    let run = run_with(&ws.path(), serde_json::json!({}));
    let found = clawbridge::discover_skills(&run, &clawbridge::HostFacts::default());
    let names: Vec<&str> = found
        .skills
        .iter()
        .map(|skill| skill.name.as_str())
        .collect();
    assert!(
        names.contains(&"fine") && !names.contains(&"deep") && !names.contains(&"indented"),
        "{names:?}"
    );
    for folder in ["deep", "indented"] {
        assert!(
            found.warnings.iter().any(|warning| warning.contains(folder)
                && (warning.contains("nests deeper") || warning.contains("byte limit"))),
            "{folder}: {:?}",
            found.warnings
        );
    }
}

fn skill_names(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| line.trim().strip_prefix("<name>"))
        .filter_map(|line| line.strip_suffix("</name>"))
        .map(str::to_string)
        .collect()
}

#[test]
fn accented_names_sort_with_their_base_letter() {
    let ws = TestWorkspace::empty();
    for name in ["zoo", "éclair", "eclairs", "dune"] {
        ws.write(&format!("skills/{name}/SKILL.md"), &skill(name, "Things."));
    }
    let (translation, _) = translate_run(&run_with(&ws.path(), json!({})));
    assert_eq!(
        skill_names(&translation.skills_prompt.text),
        vec!["dune", "éclair", "eclairs", "zoo"]
    );
}

#[test]
fn the_count_limit_keeps_the_full_format_and_says_so() {
    let ws = TestWorkspace::empty();
    for name in ["alpha", "beta", "gamma"] {
        ws.write(
            &format!("skills/{name}/SKILL.md"),
            &skill(name, "Does things."),
        );
    }
    let run = run_with(
        &ws.path(),
        json!({"config": {"skills": {"limits": {"maxSkillsInPrompt": 2}}}}),
    );
    let (translation, _) = translate_run(&run);
    let prompt = &translation.skills_prompt;
    assert_eq!(prompt.format, CatalogFormat::Full);
    assert_eq!((prompt.included, prompt.total), (2, 3));
    assert!(prompt.text.contains("included 2 of 3"), "{}", prompt.text);
    assert!(prompt
        .text
        .contains("<description>Does things.</description>"));
    assert_eq!(skill_names(&prompt.text), vec!["alpha", "beta"]);
}

#[test]
fn descriptions_are_trimmed() {
    let ws = TestWorkspace::empty();
    ws.write(
        "skills/padded/SKILL.md",
        "---\nname: padded\ndescription: \"  Pads.\\n  \"\n---\n",
    );
    let (translation, _) = translate_run(&run_with(&ws.path(), json!({})));
    assert!(
        translation
            .skills_prompt
            .text
            .contains("<description>Pads.</description>"),
        "{}",
        translation.skills_prompt.text
    );
}

#[test]
fn skills_are_found_six_folders_deep_and_no_deeper() {
    let ws = TestWorkspace::empty();
    ws.write("skills/a/b/c/d/e/six/SKILL.md", &skill("six", "Deep."));
    ws.write(
        "skills/a/b/c/d/e/f/seven/SKILL.md",
        &skill("seven", "Deeper."),
    );
    let (translation, _) = translate_run(&run_with(&ws.path(), json!({})));
    assert_eq!(skill_names(&translation.skills_prompt.text), vec!["six"]);
}

#[test]
fn a_skill_md_over_256000_bytes_is_skipped() {
    let ws = TestWorkspace::empty();
    let head = skill("big", "Big.");
    ws.write(
        "skills/big/SKILL.md",
        &format!("{head}{}", "x".repeat(256_001 - head.len())),
    );
    ws.write(
        "skills/limit/SKILL.md",
        &format!(
            "{}{}",
            skill("limit", "Exactly."),
            "x".repeat(256_000 - skill("limit", "Exactly.").len())
        ),
    );
    let (translation, _) = translate_run(&run_with(&ws.path(), json!({})));
    assert_eq!(skill_names(&translation.skills_prompt.text), vec!["limit"]);
    assert!(
        translation
            .warnings
            .iter()
            .any(|warning| warning.contains("big") && warning.contains("256000")),
        "{:?}",
        translation.warnings
    );
}

#[test]
fn managed_and_bundled_skills_are_found_with_their_precedence_and_gates() {
    let ws = TestWorkspace::empty();
    let managed = TestWorkspace::empty();
    let bundled = TestWorkspace::empty();
    let extra = TestWorkspace::empty();
    extra.write("shared/SKILL.md", &skill("shared", "From extra."));
    bundled.write("shared/SKILL.md", &skill("shared", "From bundled."));
    bundled.write("github/SKILL.md", &skill("github", "Bundled GitHub."));
    bundled.write("weather/SKILL.md", &skill("weather", "Bundled weather."));
    managed.write("shared/SKILL.md", &skill("shared", "From managed."));
    managed.write("notes/SKILL.md", &skill("notes", "Managed notes."));
    let fields = |allow: Value| {
        json!({
            "managedSkillsDir": managed.path(),
            "bundledSkillsDir": bundled.path(),
            "config": {"skills": {"load": {"extraDirs": [extra.path()]}, "allowBundled": allow}},
        })
    };
    let (translation, _) = translate_run(&run_with(&ws.path(), fields(json!([]))));
    let text = &translation.skills_prompt.text;
    assert_eq!(
        skill_names(text),
        vec!["github", "notes", "shared", "weather"]
    );
    assert!(
        text.contains("From managed."),
        "managed beats bundled and extra"
    );
    // The workspace beats them all.
    ws.write(
        "skills/shared/SKILL.md",
        &skill("shared", "From the workspace."),
    );
    let (translation, _) = translate_run(&run_with(&ws.path(), fields(json!(["github"]))));
    let text = &translation.skills_prompt.text;
    assert!(text.contains("From the workspace."));
    // `skills.allowBundled` restricts bundled skills only.
    assert_eq!(skill_names(text), vec!["github", "notes", "shared"]);
    assert!(translation
        .ineligible_skills
        .iter()
        .any(|skill| skill.name == "weather" && skill.reason.contains("allowBundled")));
}

/// `disable-model-invocation` is read as OpenClaw reads booleans: `no`/`off`/`0` (which YAML 1.2
/// gives as strings) are false and keep the skill; `yes`/`on`/`1` are true and keep it out of
/// the model's list. Before, a string value made the whole skill invalid.
#[test]
fn boolean_strings_in_disable_model_invocation_are_read_as_openclaw_reads_them() {
    let ws = TestWorkspace::empty();
    for (name, value) in [
        ("keep-no", "no"),
        ("keep-off", "\"off\""),
        ("keep-zero", "0"),
        ("keep-false", "False"),
        ("hide-yes", "yes"),
        ("hide-on", "\"ON\""),
        ("hide-one", "1"),
    ] {
        ws.write(
            &format!("skills/{name}/SKILL.md"),
            &format!("---\nname: {name}\ndescription: A skill.\ndisable-model-invocation: {value}\n---\n"),
        );
    }
    let (translation, _) = translate_run(&run_with(&ws.path(), json!({})));
    let mut offered: Vec<&str> = translation.skills.iter().map(|s| s.name.as_str()).collect();
    offered.sort_unstable();
    assert_eq!(offered, ["keep-false", "keep-no", "keep-off", "keep-zero"]);
    let hidden: Vec<&str> = translation
        .ineligible_skills
        .iter()
        .filter(|skill| skill.reason.contains("disable-model-invocation"))
        .map(|skill| skill.name.as_str())
        .collect();
    assert_eq!(hidden.len(), 3, "{:?}", translation.ineligible_skills);
    assert!(
        translation.warnings.iter().all(|w| !w.contains("SKILL.md")),
        "no skill was rejected: {:?}",
        translation.warnings
    );
}

/// Values as people write them: allowlist entries and folder names with spaces around them are
/// trimmed; a `requires.config` value of blanks is not a value; an unset `browser.enabled` is
/// true (OpenClaw's default).
#[test]
fn allowlists_folder_names_and_config_gates_are_trimmed() {
    let ws = TestWorkspace::empty();
    ws.write(
        "skills/ spaced /SKILL.md",
        "---\ndescription: A spaced folder.\n---\n",
    );
    ws.write("skills/weather/SKILL.md", &skill("weather", "Weather."));
    ws.write(
        "skills/blank-gate/SKILL.md",
        "---\nname: blank-gate\ndescription: Needs a value.\nmetadata: {\"openclaw\": {\"requires\": {\"config\": [\"channels.token\"]}}}\n---\n",
    );
    ws.write(
        "skills/browser/SKILL.md",
        "---\nname: browser\ndescription: Needs the browser.\nmetadata: {\"openclaw\": {\"requires\": {\"config\": [\"browser.enabled\"]}}}\n---\n",
    );
    let config = json!({
        "channels": {"token": "   "},
        "agents": {"list": [{"id": "main", "skills": [" weather ", "spaced", "blank-gate", "browser"]}]}
    });
    let (translation, _) = translate_run(&run_with(&ws.path(), json!({"config": config})));
    let mut offered: Vec<&str> = translation.skills.iter().map(|s| s.name.as_str()).collect();
    offered.sort_unstable();
    assert_eq!(
        offered,
        ["browser", "spaced", "weather"],
        "{:?}",
        translation.ineligible_skills
    );
    assert!(translation
        .ineligible_skills
        .iter()
        .any(|skill| skill.name == "blank-gate" && skill.reason.contains("channels.token")));
}

/// A skill in `ws` named `name` with `openclaw` as its metadata's gates.
fn gated_skill(ws: &TestWorkspace, name: &str, openclaw: Value) {
    ws.write(
        &format!("skills/{name}/SKILL.md"),
        &format!(
            "---\nname: {name}\ndescription: Gated.\nmetadata: {}\n---\n",
            json!({"openclaw": openclaw})
        ),
    );
}

/// Gates as people write them: `os` and `requires.bins` as comma-separated strings are read
/// (a win32-only skill or one needing a missing binary is not offered); `requires.env` is not
/// met by an empty `env.VAR`, nor by an `apiKey` when the skill's `primaryEnv` is another
/// variable, and is met by the `apiKey` when it is that variable.
#[test]
fn comma_separated_gates_and_env_requirements_read_as_openclaw_reads_them() {
    let ws = TestWorkspace::empty();
    let gated = |name: &str, openclaw: Value| gated_skill(&ws, name, openclaw);
    gated("windows", json!({"os": "win32, darwin"}));
    gated("linux-too", json!({"os": " linux , win32"}));
    gated(
        "missing-bin",
        json!({"requires": {"bins": "sh, no-such-binary-xyz"}}),
    );
    gated(
        "empty-env",
        json!({"requires": {"env": ["SKILL_TEST_EMPTY"]}}),
    );
    gated(
        "other-primary",
        json!({"primaryEnv": "OTHER_KEY", "requires": {"env": ["SKILL_TEST_KEY"]}}),
    );
    gated(
        "right-primary",
        json!({"primaryEnv": "SKILL_TEST_KEY", "requires": {"env": "SKILL_TEST_KEY"}}),
    );
    let config = json!({"skills": {"entries": {
        "empty-env": {"env": {"SKILL_TEST_EMPTY": ""}},
        "other-primary": {"apiKey": "k-123"},
        "right-primary": {"apiKey": "k-123"}
    }}});
    let (translation, _) = translate_run(&run_with(&ws.path(), json!({"config": config})));
    let mut offered: Vec<&str> = translation.skills.iter().map(|s| s.name.as_str()).collect();
    offered.sort_unstable();
    assert_eq!(
        offered,
        ["linux-too", "right-primary"],
        "{:?}",
        translation.ineligible_skills
    );
}

/// Metadata written as JSON5, as OpenClaw's manifest allows, is read (before, the skill was
/// dropped as invalid JSON).
#[test]
fn json5_metadata_is_read() {
    let ws = TestWorkspace::empty();
    ws.write(
        "skills/json5-linux/SKILL.md",
        "---\nname: json5-linux\ndescription: JSON5 metadata.\nmetadata: '{openclaw: {os: [\"linux\"], requires: {env: [],},}}'\n---\n",
    );
    ws.write(
        "skills/json5-mac/SKILL.md",
        "---\nname: json5-mac\ndescription: JSON5 metadata.\nmetadata: \"{openclaw: {os: ['darwin']}}\"\n---\n",
    );
    let (translation, _) = translate_run(&run_with(&ws.path(), json!({})));
    let offered: Vec<&str> = translation.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        offered,
        ["json5-linux"],
        "{:?}",
        translation.ineligible_skills
    );
    assert!(translation
        .ineligible_skills
        .iter()
        .any(|skill| skill.name == "json5-mac" && skill.reason.contains("linux")));
}

/// Frontmatter YAML cannot read, as real skills write it, is read line by line (as OpenClaw
/// does) and the skill listed, with a warning naming the file: a `description` with a colon, a
/// repeated key, fences with trailing blanks.
#[test]
fn frontmatter_yaml_cannot_read_falls_back_to_lines() {
    let ws = TestWorkspace::empty();
    ws.write(
        "skills/colon/SKILL.md",
        "---\nname: colon\ndescription: Use this: for things\n---\n",
    );
    ws.write(
        "skills/twice/SKILL.md",
        "---\nname: twice\ndescription: First.\ndescription: Second.\n---\n",
    );
    ws.write(
        "skills/fence/SKILL.md",
        "---  \nname: fence\ndescription: Trailing blanks on the fences.\n---   \n",
    );
    let (translation, _) = translate_run(&run_with(&ws.path(), json!({})));
    let found: Vec<(&str, &str)> = translation
        .skills
        .iter()
        .map(|s| (s.name.as_str(), s.description.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            ("colon", "Use this: for things"),
            ("fence", "Trailing blanks on the fences."),
            ("twice", "Second.")
        ]
    );
    for name in ["colon", "twice"] {
        assert!(
            translation
                .warnings
                .iter()
                .any(|w| w.contains(&format!("skills/{name}/SKILL.md"))
                    && w.contains("line by line")),
            "{name}: {:?}",
            translation.warnings
        );
    }
}

/// A skill folder (or SKILL.md) that is a symlink leading outside its skills folder is skipped
/// with a warning, in every run, confined or not (OpenClaw's "escaped skill path"); a symlink
/// that stays inside the skills folder is followed.
#[test]
fn symlinks_that_escape_the_skills_folder_are_skipped_everywhere() {
    let ws = TestWorkspace::empty();
    let outside = tempfile::tempdir().expect("outside");
    std::fs::create_dir_all(outside.path().join("escaped")).expect("dir");
    std::fs::write(
        outside.path().join("escaped/SKILL.md"),
        skill("escaped", "From outside."),
    )
    .expect("write");
    ws.write("skills/real/SKILL.md", &skill("real", "Inside."));
    ws.write(
        "skills/store/inner/SKILL.md",
        &skill("inner", "Inside, linked."),
    );
    std::fs::create_dir_all(ws.path().join("skills/file-link")).expect("dir");
    std::os::unix::fs::symlink(
        outside.path().join("escaped"),
        ws.path().join("skills/escaped"),
    )
    .expect("link");
    std::os::unix::fs::symlink(
        outside.path().join("escaped/SKILL.md"),
        ws.path().join("skills/file-link/SKILL.md"),
    )
    .expect("link");
    std::os::unix::fs::symlink(
        ws.path().join("skills/store/inner"),
        ws.path().join("skills/alias"),
    )
    .expect("link");
    let (translation, _) = translate_run(&run_with(&ws.path(), json!({})));
    let mut offered: Vec<&str> = translation.skills.iter().map(|s| s.name.as_str()).collect();
    offered.sort_unstable();
    assert_eq!(offered, ["inner", "real"], "{:?}", translation.warnings);
    for link in ["skills/escaped", "skills/file-link/SKILL.md"] {
        assert!(
            translation
                .warnings
                .iter()
                .any(|w| w.contains(link) && w.contains("escaped skill path")),
            "{link}: {:?}",
            translation.warnings
        );
    }
}

/// Config values as OpenClaw 2026.6.10 reads them (issue 38, items 5-7): a `requires.env` is met
/// by a configured value JavaScript calls true (`"  "` is, `""` is not) or by an `apiKey` of
/// blanks when the variable is the skill's `primaryEnv`; `skills.allowBundled` entries are
/// trimmed; a `requires.config` path skips empty segments (`a..b`) and indexes arrays (`a.list.0`).
#[test]
fn env_gates_bundled_allowlists_and_config_paths_read_as_openclaw_reads_them() {
    let ws = TestWorkspace::empty();
    let bundled = TestWorkspace::empty();
    bundled.write("github/SKILL.md", &skill("github", "Bundled GitHub."));
    bundled.write("weather/SKILL.md", &skill("weather", "Bundled weather."));
    let gated = |name: &str, openclaw: Value| gated_skill(&ws, name, openclaw);
    gated(
        "blank-env",
        json!({"requires": {"env": ["SKILL_TEST_BLANK"]}}),
    );
    gated(
        "blank-key",
        json!({"primaryEnv": "SKILL_TEST_KEY", "requires": {"env": ["SKILL_TEST_KEY"]}}),
    );
    gated(
        "empty-key",
        json!({"primaryEnv": "SKILL_TEST_KEY", "requires": {"env": ["SKILL_TEST_KEY"]}}),
    );
    gated(
        "double-dot",
        json!({"requires": {"config": ["channels..token"]}}),
    );
    gated(
        "indexed",
        json!({"requires": {"config": ["channels.list.0.token"]}}),
    );
    gated(
        "out-of-range",
        json!({"requires": {"config": ["channels.list.1"]}}),
    );
    gated(
        "null-browser",
        json!({"requires": {"config": ["browser.enabled"]}}),
    );
    let config = json!({
        "skills": {
            "allowBundled": [" github "],
            "entries": {
                "blank-env": {"env": {"SKILL_TEST_BLANK": "  "}},
                "blank-key": {"apiKey": " "},
                "empty-key": {"apiKey": ""}
            }
        },
        "channels": {"token": "t", "list": [{"token": "t"}]},
        "browser": {"enabled": null}
    });
    let (translation, _) = translate_run(&run_with(
        &ws.path(),
        json!({"bundledSkillsDir": bundled.path(), "config": config}),
    ));
    let mut offered: Vec<&str> = translation.skills.iter().map(|s| s.name.as_str()).collect();
    offered.sort_unstable();
    assert_eq!(
        offered,
        ["blank-env", "blank-key", "double-dot", "github", "indexed"],
        "{:?}",
        translation.ineligible_skills
    );
}

/// A lightweight cron turn on Codex carries the scheduled prompt alone (no skills in the
/// collaboration instructions), but OpenClaw's own system prompt for it keeps the Skills
/// section: the spec's routing table names the exception for Codex only (docs/routing.md,
/// "Where each file goes"), and OpenClaw 2026.6.10's cron runner renders the skills of a
/// `--light-context` job (fixtures/live-lane/2026.6.10/cron-light.json).
#[test]
fn a_lightweight_cron_run_keeps_its_skills_on_the_embedded_prompt_only() {
    let ws = TestWorkspace::empty();
    ws.write(
        "skills/nightly/SKILL.md",
        &skill("nightly", "Write the nightly report."),
    );
    let fields = json!({ "sessionKey": "agent:main:cron:nightly", "trigger": "cron", "lightweight": true, "message": "Run it." });
    let run = run_with(&ws.path(), fields.clone());
    let params = params_json(&run);
    assert!(!all_text(&params).contains("nightly</name>"), "{params}");
    let mut embedded = fields;
    embedded["harness"] = json!("embedded");
    let (translation, _) = translate_run(&run_with(&ws.path(), embedded));
    assert!(
        translation
            .skills_prompt
            .text
            .contains("<name>nightly</name>"),
        "{}",
        translation.skills_prompt.text
    );
}

/// The CLI's skill gates read this process's environment, one variable when a gate names it: a
/// set variable offers the skill, an unset or empty one does not, and a variable elsewhere in
/// the environment that is not UTF-8 changes nothing (copying the whole environment stopped
/// on it with a panic).
#[test]
fn env_gates_read_the_process_environment_and_survive_a_non_utf8_variable() {
    use std::os::unix::ffi::OsStrExt as _;
    let ws = TestWorkspace::empty();
    ws.write(
        "skills/keyed/SKILL.md",
        "---\nname: keyed\ndescription: Needs a key\nmetadata: {\"openclaw\": {\"requires\": {\"env\": [\"CLAWBRIDGE_TEST_SKILL_KEY\"]}}}\n---\n",
    );
    let run = ws.path().join("run.json");
    std::fs::write(&run, json!({ "workspace": ws.path() }).to_string()).expect("run");
    let offered = |key: Option<&str>| {
        let mut command = clawbridge();
        command
            .args(["params".as_ref(), run.as_os_str()])
            .env_remove("CLAWBRIDGE_TEST_SKILL_KEY")
            .env(
                "CLAWBRIDGE_TEST_NOT_UTF8",
                std::ffi::OsStr::from_bytes(b"caf\xe9"),
            );
        if let Some(key) = key {
            command.env("CLAWBRIDGE_TEST_SKILL_KEY", key);
        }
        let output = command.output().expect("clawbridge params");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).contains("<name>keyed</name>")
    };
    assert!(offered(Some("k-1")));
    assert!(!offered(Some("")));
    assert!(!offered(None));
}

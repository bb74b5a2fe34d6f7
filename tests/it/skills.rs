//! Skills discovery, eligibility, catalog and budget (docs/routing.md §7, §8.2).

use clawbridge::skills::{render_skills_prompt, CatalogFormat, CatalogSurface};
use clawbridge::support::text::len16;
use serde_json::json;

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
    assert_eq!(translation.skills.len(), 1);
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
    // About 1 MiB of nesting: unbounded YAML parsing of this takes minutes.
    let nested = format!(
        "---\nname: deep\ndescription: {}x{}\n---\n",
        "[".repeat(500_000),
        "]".repeat(500_000)
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
    let found = clawbridge::skills::discover_skills(&run);
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

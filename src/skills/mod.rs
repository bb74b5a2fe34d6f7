//! The skills list: discovery, eligibility, the `<available_skills>` catalog and its budget.
//!
//! Layout: `discover` ([`discover_skills`]) walks the skill roots (configured extra dirs, then
//! the workspace `skills/` folder, a later root replacing a same-name skill), confined and
//! capped, and parses each `SKILL.md` frontmatter; `eligibility` ([`eligible_skills`]) applies
//! the gates against the [`HostFacts`] it is given (the CLI's read this process's environment
//! when a gate asks; tests and snapshots give fixed ones, so they stay hermetic); `catalog`
//! ([`render_skills_prompt`]) renders the catalog within `skills.limits.maxSkillsPromptChars`,
//! falling back to the compact format (docs/routing.md, "Skills").

mod available;
mod discover;
mod eligibility;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;

pub use available::{render_skills_prompt, CatalogFormat, CatalogSurface, SkillsPrompt};
pub use discover::{discover_skills, discover_skills_cached, parse_skill, skill_roots, SkillCache};
pub use eligibility::{eligible_skills, IneligibleSkill};

/// Where a skill came from; a later tier replaces a same-name skill of an earlier one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum SkillTier {
    /// `skills.load.extraDirs` (and plugin skill folders).
    Extra,
    /// Shipped with OpenClaw (`bundledSkillsDir`, `$OPENCLAW_BUNDLED_SKILLS_DIR`).
    Bundled,
    /// Installed for every agent (`managedSkillsDir`, `$OPENCLAW_STATE_DIR/skills`,
    /// `~/.openclaw/skills`).
    Managed,
    /// `<workspace>/skills`.
    Workspace,
}

/// One parsed skill.
#[derive(Clone, Debug, PartialEq)]
pub struct SkillEntry {
    /// Flat name (frontmatter `name`, else the folder name).
    pub name: String,
    pub description: String,
    /// Absolute `SKILL.md` path shown to the model.
    pub location: String,
    /// `sha256:<16 hex>` of the raw `SKILL.md` bytes.
    pub version: String,
    /// `metadata.openclaw.skillKey`, else the name.
    pub skill_key: String,
    pub tier: SkillTier,
    /// Raw bytes of SKILL.md (for `/context` sizes).
    pub file_chars: usize,
    /// `metadata.openclaw` (gates), `Null` when absent.
    pub openclaw_metadata: Value,
    pub disable_model_invocation: bool,
    /// Owning plugin (`metadata.openclaw.plugin`): eligible only while it is enabled.
    pub plugin: Option<String>,
    /// Why the file was read with a fallback (its frontmatter is not valid YAML): a warning
    /// naming the file, the skill kept.
    pub parse_note: Option<String>,
}

/// Host facts the eligibility gates look at.
#[derive(Clone, Debug, Default)]
pub struct HostFacts {
    /// Node-style platform name: `linux`, `darwin`, `win32`.
    pub platform: String,
    /// The environment a skill's `requires.env` gate reads ([`HostFacts::env_var`]).
    pub env: HostEnv,
    pub path_dirs: Vec<PathBuf>,
    /// OpenClaw's managed skills folder; a run's `managedSkillsDir` wins.
    pub managed_skills_dir: Option<PathBuf>,
    /// OpenClaw's bundled skills folder; a run's `bundledSkillsDir` wins.
    pub bundled_skills_dir: Option<PathBuf>,
}

/// Where a host's environment variables come from.
#[derive(Clone, Debug)]
pub enum HostEnv {
    /// This process's environment, read when a gate asks: a start-up copies none of it (and a
    /// variable that is not UTF-8 reads as unset instead of stopping the copy).
    Process,
    /// A fixed set (tests, snapshots, hermetic translation).
    Given(BTreeMap<String, String>),
}

impl Default for HostEnv {
    fn default() -> Self {
        HostEnv::Given(BTreeMap::new())
    }
}

impl HostFacts {
    /// The facts of this process (the CLI uses this; tests and snapshots build their own).
    pub fn from_process() -> Self {
        let platform = match std::env::consts::OS {
            "macos" => "darwin",
            "windows" => "win32",
            other => other,
        }
        .to_string();
        let path_dirs = std::env::var_os("PATH")
            .map(|path| std::env::split_paths(&path).collect())
            .unwrap_or_default();
        let set = |name: &str| {
            std::env::var(name)
                .ok()
                .filter(|value| !value.trim().is_empty())
                .map(|value| PathBuf::from(value.trim()))
        };
        // Where OpenClaw itself looks: its state dir (`$OPENCLAW_STATE_DIR`, else ~/.openclaw).
        let managed_skills_dir = set("OPENCLAW_STATE_DIR")
            .or_else(|| dirs::home_dir().map(|home| home.join(".openclaw")))
            .map(|state| state.join("skills"));
        let bundled_skills_dir = set("OPENCLAW_BUNDLED_SKILLS_DIR");
        Self {
            platform,
            path_dirs,
            managed_skills_dir,
            bundled_skills_dir,
            env: HostEnv::Process,
        }
    }

    /// A variable of the host's environment, as a skill's `requires.env` gate reads it.
    pub fn env_var(&self, name: &str) -> Option<String> {
        match &self.env {
            HostEnv::Process => std::env::var(name).ok(),
            HostEnv::Given(env) => env.get(name).cloned(),
        }
    }

    fn has_bin(&self, bin: &str) -> bool {
        self.path_dirs.iter().any(|dir| dir.join(bin).is_file())
    }
}

/// Skills found, plus the files that were skipped and why.
#[derive(Clone, Debug, Default)]
pub struct DiscoveredSkills {
    pub skills: Vec<SkillEntry>,
    pub warnings: Vec<String>,
}

/// `sha256:` + the first 16 hex digits of SHA-256 over the raw bytes.
pub fn skill_version(bytes: &[u8]) -> String {
    format!("sha256:{}", crate::support::hex::sha256(bytes, 8))
}

#[cfg(test)]
mod tests {
    use super::available::*;
    use super::discover::*;
    use super::*;
    use crate::support::text::len16;

    const WEATHER: &str = "---\nname: weather\ndescription: Get weather <data> & \"forecasts\" it's\n---\n\n# Weather\n\nCall the forecast API.\n";

    #[test]
    fn version_vectors() {
        assert_eq!(WEATHER.len(), 108);
        assert_eq!(skill_version(WEATHER.as_bytes()), "sha256:76d67ed10de14fe0");
        let query = WEATHER.replace("Call", "Query");
        assert_eq!(skill_version(query.as_bytes()), "sha256:d87284054edf1452");
        let crlf = WEATHER.replace('\n', "\r\n");
        assert_eq!(skill_version(crlf.as_bytes()), "sha256:98e45c2993262ba2");
        let bom = format!("\u{FEFF}{WEATHER}");
        assert_eq!(skill_version(bom.as_bytes()), "sha256:7031c54dd88a990f");
        assert_eq!(skill_version(b""), "sha256:e3b0c44298fc1c14");
    }

    #[test]
    fn the_plain_fast_path_agrees_with_yaml() {
        for front in [
            "name: weather\ndescription: Get weather <data> & \"forecasts\" it's",
            "name: a\ndescription: Tab\there, trailing  ",
            "name: a\ndescription: uses ünïcödé and 😀",
            "description: x\nhomepage: https://example.com/a",
            "name: a\nversion: 1.2.3\ndescription: three parts",
        ] {
            let yaml: Frontmatter = serde_yaml_ng::from_str(front).expect("yaml");
            assert_eq!(plain_frontmatter(front), Some(yaml), "{front:?}");
        }
        for front in [
            "name: 'quoted'\ndescription: x",
            "name: a\ndescription: true",
            "name: a\ndescription: 12",
            "name: a\ndescription: x # comment",
            "name: a\nname: b\ndescription: x",
            "name: a\ndescription: >\n  folded",
            "name: a\nmetadata: {\"openclaw\": {}}\ndescription: x",
            "name: a\ndescription: key: value",
            "name: a\n# note\ndescription: x",
        ] {
            assert_eq!(
                plain_frontmatter(front),
                None,
                "{front:?} goes through YAML"
            );
        }
    }

    #[test]
    fn frontmatter_needs_both_fences() {
        assert_eq!(
            frontmatter("---\nname: a\n---\nbody").as_deref(),
            Some("name: a")
        );
        assert_eq!(
            frontmatter("\u{FEFF}---\r\nname: a\r\n---\r\n").as_deref(),
            Some("name: a")
        );
        assert_eq!(frontmatter("name: a\n---\n"), None);
        assert_eq!(frontmatter("---\nname: a\n"), None);
    }

    fn entry(name: &str, description: &str) -> SkillEntry {
        SkillEntry {
            name: name.to_string(),
            description: description.to_string(),
            location: format!("/ws/skills/{name}/SKILL.md"),
            version: skill_version(name.as_bytes()),
            skill_key: name.to_string(),
            tier: SkillTier::Workspace,
            file_chars: 0,
            openclaw_metadata: Value::Null,
            disable_model_invocation: false,
            plugin: None,
            parse_note: None,
        }
    }

    #[test]
    fn priced_length_equals_rendered_length() {
        let skills: Vec<SkillEntry> = [
            ("a&b", "Tricky <desc> & \"quotes\" 'x'   with\n  newlines"),
            (
                "émoji",
                "😀 astral 😀 description that is somewhat long and keeps going and going",
            ),
            ("plain", "short"),
            ("Zed", "   "),
        ]
        .iter()
        .map(|(name, description)| entry(name, description))
        .collect();
        let prepared: Vec<PreparedSkill<'_>> = skills.iter().map(PreparedSkill::new).collect();
        for surface in [CatalogSurface::Codex, CatalogSurface::SystemPrompt] {
            for cap in [
                None,
                Some(None),
                Some(Some(4)),
                Some(Some(10)),
                Some(Some(220)),
            ] {
                for count in 0..=prepared.len() {
                    for note in [None, Some("a note ü")] {
                        let text = render_catalog(
                            &prepared[..count],
                            surface,
                            cap,
                            note.map(str::to_string),
                        );
                        assert_eq!(
                            catalog_len(&prepared[..count], surface, cap, note),
                            len16(&text),
                            "{cap:?} {count} {note:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn capped_descriptions_collapse_whitespace() {
        assert_eq!(cap_description("a  b\n c", 220), "a b c");
        assert_eq!(
            cap_description(&"A".repeat(1000), 220),
            format!("{}...", "A".repeat(217))
        );
    }
}

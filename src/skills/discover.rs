//! Finding and parsing skills: the confined walk of the skill roots, the frontmatter, the cache.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{skill_version, DiscoveredSkills, HostFacts, SkillEntry, SkillTier};
use crate::config::Run;
use crate::support::fs::{Beneath, OpenedFile};
use crate::support::text::{collate, len16, trim_js};

/// How deep below a root a `SKILL.md` is looked for (nesting is organisational; OpenClaw's
/// grouped-skill scan goes six folders down).
const MAX_SKILL_DEPTH: usize = 6;
/// Largest `SKILL.md` read: OpenClaw skips bigger ones (`maxSkillFileBytes`, 256,000 bytes).
pub const MAX_SKILL_FILE_BYTES: u64 = 256_000;
/// Largest frontmatter handed to the YAML parser (real ones are a few hundred bytes).
const MAX_FRONTMATTER_BYTES: usize = 64 * 1024;
/// Deepest flow (`[`, `{`) nesting and widest indentation handed to the YAML parser: its time
/// grows with the square of the nesting, so the bound is checked before it runs.
const MAX_FRONTMATTER_NESTING: usize = 64;
const MAX_FRONTMATTER_INDENT: usize = 256;

/// Refuse frontmatter the YAML parser could spend unbounded time on.
pub(super) fn check_frontmatter_bounds(front: &str) -> Result<(), String> {
    if front.len() > MAX_FRONTMATTER_BYTES {
        return Err(format!(
            "frontmatter is {} bytes, over the {MAX_FRONTMATTER_BYTES}-byte limit",
            front.len()
        ));
    }
    let mut depth = 0usize;
    let mut deepest = 0usize;
    for byte in front.bytes() {
        match byte {
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    let widest = front
        .lines()
        .map(|line| line.len() - line.trim_start_matches([' ', '\t']).len())
        .max()
        .unwrap_or(0);
    if deepest > MAX_FRONTMATTER_NESTING || widest > MAX_FRONTMATTER_INDENT {
        return Err(format!(
            "frontmatter nests deeper than {MAX_FRONTMATTER_NESTING} levels (or indents past {MAX_FRONTMATTER_INDENT} columns); not parsed"
        ));
    }
    Ok(())
}

/// Parsed skills keyed by file identity (path, size, modification time), so a long-lived process
/// (the bridge service, the benchmarks' warm path) re-reads and re-hashes only files that changed.
/// An edit that keeps both the size and the mtime is not noticed; the CLI runs without a cache.
#[derive(Default)]
pub struct SkillCache {
    entries: std::sync::Mutex<std::collections::HashMap<PathBuf, CachedSkill>>,
}

pub(super) struct CachedSkill {
    len: u64,
    modified: Option<std::time::SystemTime>,
    location: String,
    parsed: Result<SkillEntry, String>,
}

impl std::fmt::Debug for SkillCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let size = self
            .entries
            .lock()
            .map(|entries| entries.len())
            .unwrap_or(0);
        f.debug_struct("SkillCache")
            .field("entries", &size)
            .finish()
    }
}

impl SkillCache {
    fn parse(
        &self,
        found: &FoundSkill,
        beneath: &Beneath,
        run: &Run,
        tier: SkillTier,
    ) -> Result<SkillEntry, String> {
        let (file, metadata) = (&found.path, &found.metadata);
        let location = run.display_path(file);
        let modified = metadata.modified().ok();
        if let Ok(entries) = self.entries.lock() {
            if let Some(cached) = entries.get(file) {
                if cached.len == metadata.len()
                    && cached.modified == modified
                    && cached.location == location
                {
                    return cached.parsed.clone().map(|mut skill| {
                        skill.tier = tier;
                        skill
                    });
                }
            }
        }
        let parsed = parse_skill_file(found, beneath, run, tier);
        if let Ok(mut entries) = self.entries.lock() {
            entries.insert(
                file.clone(),
                CachedSkill {
                    len: metadata.len(),
                    modified,
                    location,
                    parsed: parsed.clone(),
                },
            );
        }
        parsed
    }
}

/// The skill roots of a run, lowest precedence first: extra dirs, bundled, managed, workspace.
pub fn skill_roots(run: &Run, host: &HostFacts) -> Vec<(PathBuf, SkillTier)> {
    let mut roots: Vec<(PathBuf, SkillTier)> = run
        .config
        .skill_extra_dirs()
        .into_iter()
        .map(|dir| {
            let dir = crate::config::run::resolve_config_path(&dir, &run.workspace);
            (dir, SkillTier::Extra)
        })
        .collect();
    let bundled = run
        .bundled_skills_dir
        .clone()
        .or_else(|| host.bundled_skills_dir.clone());
    let managed = run
        .managed_skills_dir
        .clone()
        .or_else(|| host.managed_skills_dir.clone());
    roots.extend(bundled.map(|dir| (dir, SkillTier::Bundled)));
    roots.extend(managed.map(|dir| (dir, SkillTier::Managed)));
    roots.push((run.workspace.join("skills"), SkillTier::Workspace));
    roots
}

/// Find every skill of the run, lowest precedence first: extra dirs, bundled, managed, then the
/// workspace `skills/` folder; a later tier replaces a same-name skill (docs/routing.md §7.1).
pub fn discover_skills(run: &Run, host: &HostFacts) -> DiscoveredSkills {
    discover_skills_cached(run, host, None)
}

/// [`discover_skills`] through an optional [`SkillCache`].
pub fn discover_skills_cached(
    run: &Run,
    host: &HostFacts,
    cache: Option<&SkillCache>,
) -> DiscoveredSkills {
    let mut found = DiscoveredSkills::default();
    let mut by_name: BTreeMap<String, SkillEntry> = BTreeMap::new();
    let roots = skill_roots(run, host);
    let mut walk = Walk::default();
    for (root, tier) in roots {
        // A confined run (the service) walks only folders below the operator's roots.
        if let Some(allowed) = &run.roots {
            if root.exists() && !allowed.admits(&root) {
                let warning = format!(
                    "{}: skill folder is outside every --workspace-root; skipped",
                    root.display()
                );
                tracing::warn!("{warning}");
                found.warnings.push(warning);
                continue;
            }
        }
        let mut files = Vec::new();
        walk.next_root_at(&root);
        // With a cache, a skill found unchanged is not read: the walk's one `lstat` answers it
        // (opening it would cost an open, an `fstat` and a close). Without one, every skill
        // found is read, so the walk opens it as it looks.
        walk.open_skill_files = cache.is_none();
        // Reads stay beneath the real skills folder (and, confined, the roots): the same
        // containment the walk checks for symlinks, kept by the kernel at every open.
        let real_root = walk.root.clone();
        let allowed = |real: &Path| {
            real_root
                .as_ref()
                .is_some_and(|root| real.starts_with(root))
                && run.roots.as_ref().is_none_or(|roots| roots.contains(real))
        };
        let beneath = Beneath::open(&root, real_root.as_deref(), &allowed);
        find_skill_files(
            &root,
            None,
            0,
            run.roots.as_ref(),
            Some(&beneath),
            &mut walk,
            &mut files,
            &mut found.warnings,
        );
        if let Some(warning) = walk.take_stop_warning(&root) {
            tracing::warn!("{warning}");
            found.warnings.push(warning);
        }
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let parse = |found: &FoundSkill| match cache {
            Some(cache) => cache.parse(found, &beneath, run, tier),
            None => parse_skill_file(found, &beneath, run, tier),
        };
        // A warm cache answers from one `stat` per skill: threads would cost more than they save.
        let parsed_all = match cache {
            Some(_) => files.iter().map(parse).collect(),
            None => parse_in_parallel(&files, parse),
        };
        for (FoundSkill { path: file, .. }, parsed) in files.iter().zip(parsed_all) {
            match parsed {
                Ok(skill) => {
                    if let Some(note) = &skill.parse_note {
                        let warning = format!("{}: {note}", file.display());
                        tracing::warn!("{warning}");
                        found.warnings.push(warning);
                    }
                    by_name.insert(skill.name.clone(), skill);
                }
                Err(reason) => {
                    let warning = format!("{}: skipped skill: {reason}", file.display());
                    tracing::warn!("{warning}");
                    found.warnings.push(warning);
                }
            }
        }
    }
    found.skills = by_name.into_values().collect();
    found.skills.sort_by(|a, b| collate(&a.name, &b.name));
    found
}

/// The cores this process may use, asked once (a long-lived `serve` translates many runs).
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from))
}

/// Fewest skills per worker thread: below this, a thread costs more than it saves.
const SKILLS_PER_WORKER: usize = 24;
/// Most worker threads one discovery uses.
const MAX_WORKERS: usize = 4;

/// `parse` over `items` in order, on up to [`MAX_WORKERS`] scoped threads when there are enough
/// items (reading and hashing 150 SKILL.md files is most of a cold translation).
fn parse_in_parallel<T: Sync, R: Send>(items: &[T], parse: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let wanted = (items.len() / SKILLS_PER_WORKER).min(MAX_WORKERS);
    // Asked only when threads could help: the answer reads cgroup files, which costs a small run
    // more than its translation.
    let workers = if wanted < 2 { 1 } else { wanted.min(cores()) };
    if workers < 2 {
        return items.iter().map(&parse).collect();
    }
    let chunk = items.len().div_ceil(workers);
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|part| scope.spawn(|| part.iter().map(&parse).collect::<Vec<R>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|handle| match handle.join() {
                Ok(parsed) => parsed,
                // A worker only panics if `parse` does; surface it where it happened.
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    })
}

/// Most directory entries one discovery looks at, over all its roots (a real skills tree has a
/// few hundred). Past it the walk stops with a warning: a tree of links (`skills/lN -> .`) would
/// otherwise cost k^depth folders.
pub(super) const MAX_WALK_ENTRIES: usize = 20_000;

/// One discovery's walk state: the real folders already walked under the current root (a
/// symlinked folder that leads back into the tree is walked once), the entries looked at so
/// far, and why it stopped early, if it did.
#[derive(Default)]
pub(super) struct Walk {
    visited: std::collections::HashSet<FolderId>,
    entries: usize,
    stopped: Option<&'static str>,
    /// The real path of the skills folder being walked: a symlink that resolves outside it is
    /// skipped (OpenClaw's "escaped skill path"), confined run or not.
    root: Option<PathBuf>,
    /// `SKILL.md` files found and still open ([`MAX_FILES_HELD_OPEN`]).
    held_open: usize,
    /// Whether the walk opens each `SKILL.md` it finds (to be read) or only looks at it.
    open_skill_files: bool,
}

/// A folder's identity on disk: device and inode, so every path that reaches it is one folder.
#[cfg(unix)]
type FolderId = (u64, u64);
#[cfg(not(unix))]
type FolderId = PathBuf;

#[cfg(unix)]
fn folder_id(_dir: &Path, metadata: &std::fs::Metadata) -> Option<FolderId> {
    use std::os::unix::fs::MetadataExt;
    Some((metadata.dev(), metadata.ino()))
}

#[cfg(not(unix))]
fn folder_id(dir: &Path, _metadata: &std::fs::Metadata) -> Option<FolderId> {
    dir.canonicalize().ok()
}

impl Walk {
    /// Start the next root: its folders are new to it (a folder two tiers share counts in each),
    /// the entry budget is shared.
    pub(super) fn next_root(&mut self) {
        self.visited.clear();
        self.root = None;
        // The previous root's files were parsed and closed.
        self.held_open = 0;
    }

    /// Walk `root` next, keeping symlinks inside its real path.
    pub(super) fn next_root_at(&mut self, root: &Path) {
        self.next_root();
        self.root = std::fs::canonicalize(root).ok();
    }

    /// Why the walk stopped early, once, as a warning naming the root.
    pub(super) fn take_stop_warning(&mut self, root: &Path) -> Option<String> {
        self.stopped.take().map(|why| {
            format!(
                "{}: skills walk stopped early: {why}; some skills were not looked for",
                root.display()
            )
        })
    }

    /// Count one entry; false once the walk must stop (budget spent or deadline passed).
    fn admit(&mut self) -> bool {
        if self.stopped.is_some() {
            return false;
        }
        self.entries += 1;
        if self.entries > MAX_WALK_ENTRIES {
            self.stopped = Some("more than 20000 entries (MAX_WALK_ENTRIES)");
        } else if crate::support::deadline::expired() {
            self.stopped = Some("the request deadline passed (--request-timeout)");
        }
        self.stopped.is_none()
    }
}

/// A `SKILL.md` the walk found: its path, its metadata and, for the first
/// [`MAX_FILES_HELD_OPEN`] of a walk, the file itself, opened as the walk looked for it, so
/// finding and reading a skill is one pass (one `openat2`, one `fstat`, the reads).
pub(super) struct FoundSkill {
    pub(super) path: PathBuf,
    pub(super) metadata: std::fs::Metadata,
    opened: Option<OpenedFile>,
}

/// Most `SKILL.md` files one walk keeps open until they are parsed (a file descriptor each);
/// later ones are opened again to be read.
const MAX_FILES_HELD_OPEN: usize = 512;

/// Collect `SKILL.md` files (with their metadata, so the cache needs no second `stat`). Under
/// `roots`, a symlinked folder or SKILL.md that resolves outside them is skipped with a warning.
/// Each real folder is walked once, and the whole walk is bounded ([`Walk`]).
///
/// `id` is the folder's identity when its parent's listing already gave it (a plain folder:
/// the parent's device and the entry's inode), which saves a `stat` per folder. With `beneath`
/// (the skills folder held open), a folder's `SKILL.md` is opened directly beneath it: a
/// regular file is a skill, a missing or non-regular one means the folder is walked on, and
/// anything the kernel refuses (a symlink out of the folder) takes the checked path below.
#[allow(clippy::too_many_arguments)]
pub(super) fn find_skill_files(
    dir: &Path,
    id: Option<FolderId>,
    depth: usize,
    roots: Option<&crate::support::fs::Roots>,
    beneath: Option<&Beneath>,
    walk: &mut Walk,
    out: &mut Vec<FoundSkill>,
    warnings: &mut Vec<String>,
) {
    if depth > MAX_SKILL_DEPTH || !walk.admit() {
        return;
    }
    let id = match id {
        Some(id) => id,
        None => match std::fs::metadata(dir)
            .ok()
            .and_then(|metadata| folder_id(dir, &metadata))
        {
            Some(id) => id,
            None => return,
        },
    };
    let device = folder_device(&id);
    if !walk.visited.insert(id) {
        return;
    }
    let skills_root = walk.root.clone();
    let outside = |path: &Path, warnings: &mut Vec<String>| {
        let leaves = roots.is_some_and(|roots| !roots.admits(path));
        let escapes = !leaves
            && skills_root.as_ref().is_some_and(|root| {
                !std::fs::canonicalize(path).is_ok_and(|real| real.starts_with(root))
            });
        if leaves || escapes {
            let why = if leaves {
                "symlink leaves every --workspace-root"
            } else {
                "symlink leads outside its skills folder (an escaped skill path)"
            };
            let warning = format!("{}: {why}; skipped", path.display());
            tracing::warn!("{warning}");
            warnings.push(warning);
        }
        leaves || escapes
    };
    if depth > 0 {
        let skill_file = dir.join("SKILL.md");
        let relative = beneath.and_then(|beneath| {
            skill_file
                .strip_prefix(beneath.folder())
                .ok()
                .map(|relative| (beneath, relative))
        });
        let fast = relative
            .filter(|_| walk.open_skill_files)
            .and_then(|(beneath, relative)| beneath.try_open(relative));
        let metadata = match fast {
            Some(Ok(opened)) => {
                let metadata = opened.metadata().clone();
                let opened = (walk.held_open < MAX_FILES_HELD_OPEN).then_some(opened);
                walk.held_open += usize::from(opened.is_some());
                out.push(FoundSkill {
                    path: skill_file,
                    metadata,
                    opened,
                });
                return;
            }
            // No SKILL.md here, or not a regular one: walk on.
            Some(Err(_)) => None,
            // One `stat` for a plain SKILL.md; a link is checked against the roots, then followed.
            None => match std::fs::symlink_metadata(&skill_file) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    if (roots.is_some() || skills_root.is_some()) && outside(&skill_file, warnings)
                    {
                        return;
                    }
                    std::fs::metadata(&skill_file).ok()
                }
                found => found.ok(),
            },
        };
        if let Some(metadata) = metadata.filter(std::fs::Metadata::is_file) {
            out.push(FoundSkill {
                path: skill_file,
                metadata,
                opened: None,
            });
            return;
        }
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(|entry| entry.ok()) {
        if !walk.admit() {
            return;
        }
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name == "node_modules" {
            continue;
        }
        // `file_type` comes with the directory listing; follow symlinks only when needed.
        let (is_dir, child_id) = match entry.file_type() {
            Ok(kind) if kind.is_dir() => (true, listed_id(device, &entry)),
            Ok(kind) if kind.is_symlink() => (
                entry.path().is_dir() && !outside(&entry.path(), warnings),
                None,
            ),
            _ => (false, None),
        };
        if is_dir {
            find_skill_files(
                &entry.path(),
                child_id,
                depth + 1,
                roots,
                beneath,
                walk,
                out,
                warnings,
            );
        }
    }
}

/// A plain folder's identity from its parent's listing: the parent's device (a folder is on its
/// parent's filesystem unless it is a mount point, whose covered inode is still unique there)
/// and the entry's inode, with no `stat`.
#[cfg(unix)]
fn listed_id(device: Option<u64>, entry: &std::fs::DirEntry) -> Option<FolderId> {
    use std::os::unix::fs::DirEntryExt;
    device.map(|device| (device, entry.ino()))
}

#[cfg(not(unix))]
fn listed_id(_device: Option<u64>, _entry: &std::fs::DirEntry) -> Option<FolderId> {
    None
}

/// The device a folder is on, where its identity says.
#[cfg(unix)]
fn folder_device(id: &FolderId) -> Option<u64> {
    Some(id.0)
}

#[cfg(not(unix))]
fn folder_device(_id: &FolderId) -> Option<u64> {
    None
}

/// Split `---` frontmatter from a SKILL.md (BOM stripped, CRLF normalised for parsing only).
/// Only the lines up to the closing fence are looked at; the body is never scanned.
pub(super) fn frontmatter(text: &str) -> Option<String> {
    let text = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next()?;
    // A fence with trailing blanks is still a fence (OpenClaw trims the line).
    if first.trim_end() != "---" || !first.ends_with('\n') {
        return None;
    }
    let mut front = String::new();
    for line in lines {
        let bare = line.trim_end_matches(['\n', '\r']);
        if bare.trim_end() == "---" {
            return Some(front.trim_end_matches('\n').to_string());
        }
        front.push_str(bare);
        front.push('\n');
    }
    None
}

pub(super) fn parse_skill_file(
    found: &FoundSkill,
    beneath: &Beneath,
    run: &Run,
    tier: SkillTier,
) -> Result<SkillEntry, String> {
    let (file, metadata) = (found.path.as_path(), &found.metadata);
    let size = metadata.len();
    if size > MAX_SKILL_FILE_BYTES {
        return Err(format!(
            "{size} bytes is over OpenClaw's {MAX_SKILL_FILE_BYTES}-byte SKILL.md limit"
        ));
    }
    // The reported size is not trusted (procfs says 0): the read itself is capped and confined.
    let relative = file.strip_prefix(beneath.folder()).ok();
    let read = match (&found.opened, relative, &run.roots) {
        (Some(opened), _, _) => opened.read_capped(MAX_SKILL_FILE_BYTES),
        // Not opened by the walk (a cached run's miss, past the open-file limit): opened now,
        // beneath the skills folder all the same.
        (None, Some(relative), _) => beneath.read_capped(relative, MAX_SKILL_FILE_BYTES),
        (None, None, Some(roots)) => {
            crate::support::fs::read_capped(file, MAX_SKILL_FILE_BYTES, &|real| {
                roots.contains(real)
            })
        }
        // The walk's `stat` is the one the read needs.
        (None, None, None) => {
            crate::support::fs::read_capped_anywhere(file, Some(metadata), MAX_SKILL_FILE_BYTES)
        }
    };
    let bytes = read.map_err(|refusal| match refusal {
        crate::support::fs::ReadRefusal::TooLarge { .. } => {
            format!("over OpenClaw's {MAX_SKILL_FILE_BYTES}-byte SKILL.md limit")
        }
        other => other.to_string(),
    })?;
    let folder_name = file
        .parent()
        .and_then(Path::file_name)
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    parse_skill(&bytes, &folder_name, run.display_path(file), tier)
}

/// The frontmatter keys we read; others are ignored. Type errors name the key.
#[derive(serde::Deserialize, Debug, Default, PartialEq)]
pub(super) struct Frontmatter {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    metadata: Option<Value>,
    /// A boolean as OpenClaw reads one: `true`/`false`, or the strings and numbers it accepts
    /// (see [`openclaw_bool`]); YAML 1.2 reads `no`/`off`/`yes`/`on` as strings.
    #[serde(default, rename = "disable-model-invocation")]
    disable_model_invocation: Option<Value>,
}

/// A frontmatter boolean as OpenClaw reads it: a boolean; a number (0 is false, 1 true); or a
/// string, trimmed and case-insensitive: `true`, `1`, `yes`, `on` / `false`, `0`, `no`, `off`.
/// Anything else is no answer (the default applies).
pub(super) fn openclaw_bool(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(flag) => Some(*flag),
        Value::Number(number) => match number.as_u64() {
            Some(1) => Some(true),
            Some(0) => Some(false),
            _ => None,
        },
        Value::String(text) => match text.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => Some(true),
            "false" | "0" | "no" | "off" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// The common frontmatter, `key: plain text` lines only, without a YAML parser. Anything YAML
/// could read differently (quotes, flow or block syntax, comments, booleans, numbers, nulls,
/// repeated keys, `metadata`) returns `None` and goes through `serde_yaml_ng`.
pub(super) fn plain_frontmatter(front: &str) -> Option<Frontmatter> {
    let mut meta = Frontmatter::default();
    let mut seen = std::collections::BTreeSet::new();
    for line in front.lines() {
        let (key, value) = line.split_once(": ")?;
        let plain_key = key
            .chars()
            .next()
            .is_some_and(|ch| ch.is_ascii_alphabetic())
            && key
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-');
        let value = value.trim();
        let starts_special = value.starts_with(|ch: char| "-?:,[]{}#&*!|>'\"%@`".contains(ch));
        let lower = value.to_ascii_lowercase();
        let scalar_keyword = matches!(
            lower.as_str(),
            "true" | "false" | "yes" | "no" | "on" | "off" | "null" | "~" | "y" | "n"
        ) || value.parse::<f64>().is_ok()
            || value.starts_with("0x")
            || value.starts_with("0o")
            || value.starts_with('.');
        if !plain_key
            || value.is_empty()
            || starts_special
            || scalar_keyword
            || value.contains(": ")
            || value.contains(" #")
            || value.ends_with(':')
            || !seen.insert(key)
        {
            return None;
        }
        match key {
            "name" => meta.name = Some(value.to_string()),
            "description" => meta.description = Some(value.to_string()),
            "metadata" | "disable-model-invocation" => return None,
            _ => {}
        }
    }
    Some(meta)
}

/// The fallback for frontmatter YAML cannot read: each `key: value` line at the start of a line,
/// split at its first colon, the value trimmed and unquoted; a later line of the same key wins;
/// indented lines and comments are skipped.
pub(super) fn line_frontmatter(front: &str) -> Frontmatter {
    let mut meta = Frontmatter::default();
    for line in front.lines() {
        if line.starts_with([' ', '\t', '#']) {
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        let value = [('"', '"'), ('\'', '\'')]
            .iter()
            .find_map(|(open, close)| {
                value
                    .strip_prefix(*open)
                    .and_then(|inner| inner.strip_suffix(*close))
            })
            .unwrap_or(value)
            .to_string();
        match key.trim() {
            "name" => meta.name = Some(value),
            "description" => meta.description = Some(value),
            "metadata" if !value.is_empty() => meta.metadata = Some(Value::String(value)),
            "disable-model-invocation" => {
                meta.disable_model_invocation = Some(Value::String(value))
            }
            _ => {}
        }
    }
    meta
}

/// Parse one `SKILL.md` from its raw bytes; `location` is the path shown to the model.
pub fn parse_skill(
    bytes: &[u8],
    folder_name: &str,
    location: String,
    tier: SkillTier,
) -> Result<SkillEntry, String> {
    let text = match crate::support::text::utf8(bytes) {
        Some(text) => std::borrow::Cow::Borrowed(text),
        None => String::from_utf8_lossy(bytes),
    };
    let front = frontmatter(&text).ok_or("no `---` frontmatter block at the top of the file")?;
    check_frontmatter_bounds(&front)?;
    let mut parse_note = None;
    let meta: Frontmatter = match plain_frontmatter(&front) {
        Some(meta) => meta,
        None => match serde_yaml_ng::from_str(&front) {
            Ok(meta) => meta,
            // As OpenClaw: YAML that does not parse (a `description: Use this: for things`
            // line, a repeated key) is read again line by line, with a warning.
            Err(error) => {
                parse_note = Some(format!(
                    "the frontmatter is not valid YAML ({error}); read line by line"
                ));
                line_frontmatter(&front)
            }
        },
    };
    let name = match meta.name {
        Some(name) if !trim_js(&name).is_empty() => trim_js(&name).to_string(),
        // The folder's name, trimmed as OpenClaw trims it (a folder ` spaced ` is `spaced`).
        _ => trim_js(folder_name).to_string(),
    };
    // Trimmed like OpenClaw's loader (`description.trim()`); internal newlines stay.
    let description = match meta.description {
        Some(text) if !trim_js(&text).is_empty() => trim_js(&text).to_string(),
        _ => return Err("missing `description`".to_string()),
    };
    // `metadata` is a mapping, or (as OpenClaw writes it) a JSON5 string: plain JSON first,
    // then JSON5 (unquoted keys, single quotes, trailing commas), as OpenClaw's manifest reader.
    let metadata = match meta.metadata {
        Some(Value::String(json)) => match serde_json::from_str(&json) {
            Ok(value) => value,
            Err(_) => json5::from_str::<Value>(&json)
                .map_err(|error| format!("`metadata` is not valid JSON5: {error}"))?,
        },
        Some(other) => other,
        None => Value::Null,
    };
    let openclaw = metadata.get("openclaw").cloned().unwrap_or(Value::Null);
    let skill_key = openclaw
        .get("skillKey")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| name.clone());
    let plugin = openclaw
        .get("plugin")
        .and_then(Value::as_str)
        .map(str::to_string);
    let disable_model_invocation = meta
        .disable_model_invocation
        .as_ref()
        .and_then(openclaw_bool)
        .unwrap_or(false);
    Ok(SkillEntry {
        name,
        description,
        location,
        version: skill_version(bytes),
        skill_key,
        tier,
        file_chars: len16(&text),
        openclaw_metadata: openclaw,
        disable_model_invocation,
        plugin,
        parse_note,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder reached by its own name (identity from the listing) and through a link (from
    /// `stat`) is one folder: its skill is found once.
    #[cfg(unix)]
    #[test]
    fn a_folder_and_a_link_to_it_are_walked_once() {
        let dir = tempfile::tempdir().expect("dir");
        let root = dir.path().canonicalize().expect("canonical");
        std::fs::create_dir_all(root.join("group/a")).expect("dirs");
        std::fs::write(root.join("group/a/SKILL.md"), "---\nname: a\n---\n").expect("skill");
        std::os::unix::fs::symlink("group/a", root.join("link")).expect("link");
        std::os::unix::fs::symlink(".", root.join("group/again")).expect("loop");
        let mut walk = Walk::default();
        walk.next_root_at(&root);
        walk.open_skill_files = true;
        let allowed = |real: &Path| real.starts_with(&root);
        let beneath = Beneath::open(&root, Some(&root), &allowed);
        let (mut out, mut warnings) = (Vec::new(), Vec::new());
        find_skill_files(
            &root,
            None,
            0,
            None,
            Some(&beneath),
            &mut walk,
            &mut out,
            &mut warnings,
        );
        assert_eq!(
            out.len(),
            1,
            "{:?}",
            out.iter().map(|f| &f.path).collect::<Vec<_>>()
        );
        assert!(warnings.is_empty(), "{warnings:?}");
        assert!(out[0].opened.is_some(), "found and opened in one pass");
    }

    #[test]
    fn a_passed_deadline_stops_the_walk_with_a_warning() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::create_dir_all(dir.path().join("a/b")).expect("dirs");
        std::fs::write(dir.path().join("a/b/SKILL.md"), "---\nname: b\n---\n").expect("skill");
        let find = |walk: &mut Walk, out: &mut Vec<FoundSkill>, warnings: &mut Vec<String>| {
            find_skill_files(dir.path(), None, 0, None, None, walk, out, warnings)
        };
        let mut walk = Walk::default();
        let (mut out, mut warnings) = (Vec::new(), Vec::new());
        let past = std::time::Instant::now();
        crate::support::deadline::within(past, || find(&mut walk, &mut out, &mut warnings));
        assert!(out.is_empty(), "nothing walked after the deadline");
        let warning = walk.take_stop_warning(dir.path()).expect("a warning");
        assert!(warning.contains("deadline"), "{warning}");
        // Without a deadline the same walk finds the skill.
        let mut walk = Walk::default();
        find(&mut walk, &mut out, &mut warnings);
        assert_eq!(out.len(), 1);
    }
}

//! `cargo bench --bench translate`: an at-caps workspace (8 bootstrap files of 25,000 chars,
//! 150 skills of 3,000 chars, 15 tools) translated to full Codex params.
//!
//! Prints the median per run from in-memory inputs, from disk and from disk with a warm skill
//! cache (what `serve` keeps), each as a ratio against the floor measured in the same run:
//! reading the same files from disk plus hashing the SKILL.md bytes (work no translation can
//! skip). Then two whole-process figures, each against a binary compiled in the same run and
//! spawned alternately with it: `clawbridge params` on the at-caps workspace against the
//! physical floor (a minimal binary that reads the same files and hashes the SKILL.md bytes with
//! the same `sha2` build), and start-up (`clawbridge params` on an empty workspace) against a
//! minimal Rust binary that only parses its arguments, timed and counted: what each process
//! does (its minor page faults from its resource usage, its system calls by `strace -c`, its
//! instructions by `perf stat` where the machine exposes a counter, else by valgrind's callgrind), which the binary's layout
//! does not move as it moves wall time. `BENCH_BREAKDOWN=1` adds per-stage
//! medians; `BENCH_PROFILE=1` loops the from-disk path for a profiler. OpenClaw's own figures
//! come from `scripts/bench-vs-openclaw`.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use clawbridge::build_params;
use clawbridge::route_workspace;
use clawbridge::{
    eligible_skills, parse_skill, render_skills_prompt, skill_version, CatalogSurface, SkillTier,
};
use clawbridge::{translate, TranslateOptions};
use clawbridge::{BootstrapFile, FileContent, LoadedWorkspace, BOOTSTRAP_FILE_NAMES};
use clawbridge::{Run, RunDocument};
use serde_json::json;

#[path = "common/timing.rs"]
mod timing;
use timing::{alternate, median};

/// The binary's allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const FILE_CHARS: usize = 25_000;
const SKILLS: usize = 150;
const SKILL_CHARS: usize = 3_000;
const TOOLS: usize = 15;

fn paragraph(seed: usize, chars: usize) -> String {
    let words = [
        "agent",
        "workspace",
        "memory",
        "the",
        "careful",
        "notes",
        "and",
        "tools",
        "ü",
        "naïve",
    ];
    let mut text = String::with_capacity(chars + 16);
    let mut count = 0;
    let mut i = seed;
    while count < chars {
        let word = words[i % words.len()];
        text.push_str(word);
        text.push(if i.is_multiple_of(13) { '\n' } else { ' ' });
        count += word.chars().count() + 1;
        i += 7;
    }
    text.chars().take(chars).collect()
}

fn skill_text(index: usize) -> String {
    let header = format!(
        "---\nname: skill-{index:03}\ndescription: Skill number {index} for {}\n---\n\n",
        paragraph(index, 120).replace('\n', " ")
    );
    let body_chars = SKILL_CHARS.saturating_sub(header.chars().count());
    format!("{header}{}", paragraph(index * 31, body_chars))
}

fn tools() -> Vec<serde_json::Value> {
    (0..TOOLS)
        .map(|i| {
            json!({"name": format!("tool_{i:02}"), "description": paragraph(i, 200),
                   "inputSchema": {"type": "object", "properties": {
                       "action": {"type": "string", "enum": ["a", "b", "c"], "description": paragraph(i + 1, 120)},
                       "target": {"type": "string", "description": paragraph(i + 2, 80)}},
                   "required": ["action"]}})
        })
        .collect()
}

/// Parse every SKILL.md from memory, as the workspace would show them.
fn parse_all(skills: &[(String, Vec<u8>)]) -> Vec<clawbridge::SkillEntry> {
    skills
        .iter()
        .map(|(folder, bytes)| {
            parse_skill(
                bytes,
                folder,
                format!("/ws/skills/{folder}/SKILL.md"),
                SkillTier::Workspace,
            )
            .expect("skill")
        })
        .collect()
}

/// Bootstrap files already in memory.
fn loaded_from(files: &[(String, String)]) -> LoadedWorkspace {
    LoadedWorkspace {
        files: files
            .iter()
            .map(|(name, text)| BootstrapFile {
                name: name.clone(),
                path: format!("/ws/{name}"),
                content: FileContent::Present(text.clone()),
            })
            .collect(),
        ..LoadedWorkspace::default()
    }
}

fn measure(iterations: usize, mut work: impl FnMut()) -> Duration {
    for _ in 0..iterations / 10 + 1 {
        work();
    }
    let samples = (0..iterations)
        .map(|_| {
            let start = Instant::now();
            work();
            start.elapsed()
        })
        .collect();
    median(samples)
}

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

/// `BENCH_RUN=<run.json>` (scripts/bench-vs-openclaw): translate that run in process, from disk,
/// and print `{"coldUs", "warmUs"}`: medians of `BENCH_ROUNDS` (default 20) runs without and with
/// a warm skill cache.
fn time_one_run(run_path: &Path) {
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(20);
    let cold_options = TranslateOptions::hermetic();
    let warm_options = TranslateOptions {
        skill_cache: Some(std::sync::Arc::new(clawbridge::SkillCache::default())),
        ..TranslateOptions::hermetic()
    };
    let once = |options: &TranslateOptions| {
        let started = Instant::now();
        let run = Run::load(run_path).expect("load run");
        let translation = translate(&run, options).expect("translate");
        std::hint::black_box(serde_json::to_string(&translation.codex_params(&run)).ok());
        started.elapsed()
    };
    once(&warm_options);
    let (mut cold, mut warm) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        cold.push(once(&cold_options));
        warm.push(once(&warm_options));
    }
    println!(
        "{{\"coldUs\": {:.1}, \"warmUs\": {:.1}}}",
        micros(median(cold)),
        micros(median(warm))
    );
}

fn main() {
    if let Some(run) = std::env::var_os("BENCH_RUN") {
        return time_one_run(Path::new(&run));
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path();
    let files: Vec<(String, String)> = BOOTSTRAP_FILE_NAMES
        .iter()
        .enumerate()
        .map(|(i, name)| (name.to_string(), paragraph(i * 3, FILE_CHARS)))
        .collect();
    for (name, text) in &files {
        std::fs::write(ws.join(name), text).expect("write bootstrap");
    }
    let skills: Vec<(String, Vec<u8>)> = (0..SKILLS)
        .map(|i| (format!("skill-{i:03}"), skill_text(i).into_bytes()))
        .collect();
    for (folder, bytes) in &skills {
        let path = ws.join("skills").join(folder);
        std::fs::create_dir_all(&path).expect("mkdir");
        std::fs::write(path.join("SKILL.md"), bytes).expect("write skill");
    }
    let document = json!({"workspace": ws, "message": "Summarize the workspace.", "tools": tools(),
                          "channel": {"name": "telegram", "chatType": "direct"}});
    let run_path = ws.join("run.json");
    std::fs::write(&run_path, document.to_string()).expect("write run");
    let run: Run = RunDocument::parse(&document.to_string(), Path::new("bench"))
        .and_then(|doc| doc.into_run(Path::new("bench"), ws))
        .expect("run");
    let options = TranslateOptions::hermetic();
    let iterations = 300;
    // BENCH_PROFILE=1: only the from-disk path, in a loop, for a profiler (`perf record`).
    if std::env::var_os("BENCH_PROFILE").is_some() {
        for _ in 0..2_000 {
            let run = Run::load(&run_path).expect("load run");
            let translation = translate(&run, &options).expect("translate");
            std::hint::black_box(serde_json::to_string(&translation.codex_params(&run)).ok());
        }
        return;
    }

    let mut in_memory_work = || {
        let loaded = loaded_from(&files);
        let routed = route_workspace(&run, &loaded).expect("route");
        let parsed = parse_all(&skills);
        let (eligible, _) = eligible_skills(&parsed, &run, &options.host);
        let prompt = render_skills_prompt(&eligible, 30_000, 150, CatalogSurface::Codex);
        let params = build_params(&run, &routed, &prompt);
        std::hint::black_box(serde_json::to_string(&params).expect("json"));
    };
    // BENCH_BREAKDOWN=1 adds per-stage medians (skill parsing, catalog, routing, params).
    if std::env::var_os("BENCH_BREAKDOWN").is_some() {
        let parsed = parse_all(&skills);
        let t_parse = measure(50, || {
            for (folder, bytes) in &skills {
                std::hint::black_box(
                    parse_skill(bytes, folder, String::new(), SkillTier::Workspace).ok(),
                );
            }
        });
        let t_render = measure(50, || {
            std::hint::black_box(render_skills_prompt(
                &parsed,
                30_000,
                150,
                CatalogSurface::Codex,
            ));
        });
        let loaded = loaded_from(&files);
        let t_route = measure(50, || {
            std::hint::black_box(route_workspace(&run, &loaded).ok());
        });
        let routed = route_workspace(&run, &loaded).expect("route");
        let prompt = render_skills_prompt(&parsed, 30_000, 150, CatalogSurface::Codex);
        let t_params = measure(50, || {
            std::hint::black_box(serde_json::to_string(&build_params(&run, &routed, &prompt)).ok());
        });
        let t_load_run = measure(200, || {
            std::hint::black_box(Run::load(&run_path).ok());
        });
        let t_discover = measure(200, || {
            std::hint::black_box(clawbridge::discover_skills(&run, &options.host));
        });
        let t_bootstrap = measure(200, || {
            std::hint::black_box(clawbridge::load_bootstrap_files(&run));
        });
        println!(
            "breakdown: parse {:.1}us render {:.1}us route {:.1}us params {:.1}us; from disk: run document {:.1}us skills walk+read+parse {:.1}us bootstrap files {:.1}us",
            micros(t_parse),
            micros(t_render),
            micros(t_route),
            micros(t_params),
            micros(t_load_run),
            micros(t_discover),
            micros(t_bootstrap)
        );
    }
    let mut from_disk_work = || {
        let run = Run::load(&run_path).expect("load run");
        let translation = translate(&run, &options).expect("translate");
        let params = translation.codex_params(&run);
        std::hint::black_box(serde_json::to_string(&params).expect("json"));
    };
    let warm_options = TranslateOptions {
        skill_cache: Some(std::sync::Arc::new(clawbridge::SkillCache::default())),
        ..TranslateOptions::hermetic()
    };
    let mut warm_work = || {
        let run = Run::load(&run_path).expect("load run");
        let translation = translate(&run, &warm_options).expect("translate");
        let params = translation.codex_params(&run);
        std::hint::black_box(serde_json::to_string(&params).expect("json"));
    };
    let mut hash_work = || {
        for (_, bytes) in &skills {
            std::hint::black_box(skill_version(bytes));
        }
    };
    let mut read_work = || {
        for (name, _) in &files {
            std::hint::black_box(std::fs::read(ws.join(name)).expect("read"));
        }
        for (folder, _) in &skills {
            std::hint::black_box(
                std::fs::read(ws.join("skills").join(folder).join("SKILL.md")).expect("read"),
            );
        }
    };
    // Round-robin: one sample of each per round, so machine drift hits them all alike.
    let works: [&mut dyn FnMut(); 5] = [
        &mut in_memory_work,
        &mut from_disk_work,
        &mut warm_work,
        &mut hash_work,
        &mut read_work,
    ];
    let [in_memory, from_disk, from_disk_warm, hashing, read_floor] =
        alternate(iterations, iterations / 10 + 1, works);

    let floor = read_floor + hashing;
    println!("translate bench: 8 bootstrap files x {FILE_CHARS} chars, {SKILLS} skills x {SKILL_CHARS} chars, {TOOLS} tools; median of {iterations} runs");
    println!("  floor: read the same files + hash the SKILL.md bytes: {:>8.1} us/run (read {:.1}, hash {:.1})", micros(floor), micros(read_floor), micros(hashing));
    let ratio = |name: &str, time: Duration| {
        println!(
            "  {name:<34} {:>8.1} us/run = {:>5.2}x the floor",
            micros(time),
            time.as_secs_f64() / floor.as_secs_f64()
        );
    };
    ratio("in-memory inputs -> params JSON", in_memory);
    ratio("from disk -> params JSON", from_disk);
    ratio("from disk, warm skill cache (serve)", from_disk_warm);
    whole_process(ws, &run_path);
}

/// The floor of a whole `clawbridge params` on the at-caps workspace: a minimal program that
/// reads the run document, the bootstrap files and every SKILL.md (listing the skills folder) and
/// hashes the SKILL.md bytes with SHA-256, as clawbridge must. It links the same `sha2` build the
/// bench links (the rlib cargo built for this profile), so hashing costs the same on both sides.
const FLOOR_SOURCE: &str = r#"
use sha2::Digest;
fn main() {
    let mut args = std::env::args_os().skip(1);
    let (Some(run), Some(ws)) = (args.next(), args.next()) else { std::process::exit(2) };
    let ws = std::path::PathBuf::from(ws);
    let mut total = std::fs::read(run).expect("run").len();
    for name in ["AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md", "USER.md", "HEARTBEAT.md",
                 "BOOTSTRAP.md", "MEMORY.md"] {
        total += std::fs::read(ws.join(name)).map(|bytes| bytes.len()).unwrap_or(0);
    }
    let mut digest = 0u8;
    for entry in std::fs::read_dir(ws.join("skills")).expect("skills") {
        let path = entry.expect("entry").path().join("SKILL.md");
        let bytes = std::fs::read(path).expect("skill");
        total += bytes.len();
        digest ^= sha2::Sha256::digest(&bytes)[0];
    }
    if total == usize::MAX { println!("{digest}"); }
}
"#;

/// Where cargo put the rlib of `name` for this profile (the bench binary's own folder).
fn dependency_rlib(name: &str) -> Option<std::path::PathBuf> {
    let deps = std::env::current_exe().ok()?.parent()?.to_path_buf();
    let prefix = format!("lib{name}-");
    std::fs::read_dir(&deps)
        .ok()?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| {
            path.file_name()
                .and_then(|file| file.to_str())
                .is_some_and(|file| file.starts_with(&prefix) && file.ends_with(".rlib"))
        })
        .max_by_key(|path| std::fs::metadata(path).and_then(|m| m.modified()).ok())
}

/// Compile `source` with `rustc -O` (with `extern` crates from this profile's rlibs).
fn compile(
    scratch: &Path,
    name: &str,
    source: &str,
    externs: &[&str],
) -> Option<std::path::PathBuf> {
    let source_path = scratch.join(format!("{name}.rs"));
    let binary = scratch.join(name);
    std::fs::write(&source_path, source).ok()?;
    let mut rustc = Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()));
    rustc
        .args(["-O", "--edition", "2021", "-o"])
        .arg(&binary)
        .arg(&source_path);
    for name in externs {
        let rlib = dependency_rlib(name)?;
        let deps = rlib.parent()?.to_path_buf();
        rustc
            .arg("--extern")
            .arg(format!("{name}={}", rlib.display()));
        rustc
            .arg("-L")
            .arg(format!("dependency={}", deps.display()));
    }
    let built = rustc.status();
    built.is_ok_and(|status| status.success()).then_some(binary)
}

/// Spawn two commands `rounds` times, alternately (after 5 unmeasured spawns of each).
fn alternate_spawns(rounds: usize, [mut first, mut second]: [Command; 2]) -> [Duration; 2] {
    let spawn = |command: &mut Command| {
        let status = command.status().expect("spawn");
        assert!(status.success(), "{command:?} failed");
    };
    alternate(
        rounds,
        5,
        [&mut || spawn(&mut first), &mut || spawn(&mut second)],
    )
}

/// `program` as a user starts it: quiet, and without the library path `cargo bench` sets for
/// its own processes (with it, the loader of both binaries searches cargo's folders first:
/// about 350 more system calls each, which made the two look closer than they are).
fn quiet(program: &Path) -> Command {
    let mut command = Command::new(program);
    command
        .env_remove("LD_LIBRARY_PATH")
        .env("CLAWBRIDGE_LOG", "error")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    command
}

/// Whole processes: `clawbridge params` on the at-caps workspace against the physical floor,
/// and on an empty workspace against a minimal Rust binary, each spawned alternately.
fn whole_process(ws: &Path, run_path: &Path) {
    let clawbridge = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/clawbridge");
    if !clawbridge.exists() {
        println!(
            "whole process: {} not built (cargo build --release); skipped",
            clawbridge.display()
        );
        return;
    }
    let scratch = tempfile::tempdir().expect("scratch");
    let rounds = 200;
    match compile(scratch.path(), "floor", FLOOR_SOURCE, &["sha2"]) {
        Some(floor) => {
            let mut ours = quiet(&clawbridge);
            ours.arg("params").arg(run_path);
            let mut base = quiet(&floor);
            base.arg(run_path).arg(ws);
            let times = alternate_spawns(rounds, [base, ours]);
            let ratio = times[1].as_secs_f64() / times[0].as_secs_f64();
            println!(
                "whole process: clawbridge params on the at-caps workspace {:>7.1} us = {ratio:.2}x the floor (a minimal binary reading the same files and hashing the SKILL.md bytes: {:.1} us), alternated, median of {rounds}; {}",
                micros(times[1]),
                micros(times[0]),
                against_goal(ratio)
            );
        }
        None => println!("whole process: rustc could not build the floor binary; skipped"),
    }
    let minimal =
        "fn main() { let n = std::env::args().count(); if n > 99 { println!(\"{n}\"); } }\n";
    let Some(minimal) = compile(scratch.path(), "minimal", minimal, &[]) else {
        println!("start-up: rustc could not build the minimal binary; skipped");
        return;
    };
    let empty = scratch.path().join("empty-workspace");
    std::fs::create_dir_all(&empty).expect("empty workspace");
    let run = empty.join("run.json");
    std::fs::write(&run, "{\"workspace\": \".\"}").expect("run");
    let mut ours = quiet(&clawbridge);
    ours.arg("params").arg(&run);
    let times = alternate_spawns(rounds, [quiet(&minimal), ours]);
    let ratio = times[1].as_secs_f64() / times[0].as_secs_f64();
    println!(
        "start-up: clawbridge params on an empty workspace {:>7.1} us = {ratio:.2}x a minimal Rust binary ({:.1} us), alternated, median of {rounds}; {}",
        micros(times[1]),
        micros(times[0]),
        against_goal(ratio)
    );
    let mut ours = quiet(&clawbridge);
    ours.arg("params").arg(&run);
    start_up_counts(&mut quiet(&minimal), &mut ours);
    let mut ours = quiet(&clawbridge);
    ours.arg("--version");
    let times = alternate_spawns(rounds, [quiet(&minimal), ours]);
    let ratio = times[1].as_secs_f64() / times[0].as_secs_f64();
    println!(
        "start-up: clawbridge --version (the front alone) {:>7.1} us = {ratio:.2}x a minimal Rust binary ({:.1} us), alternated, median of {rounds}; {}",
        micros(times[1]),
        micros(times[0]),
        against_goal(ratio)
    );
}

/// What a start-up does, counted for `ours` against `minimal` (issue "Performance 4", item 2):
/// minor page faults (the median of 21 runs' resource usage: the kernel's own count of the pages
/// the process touched), system calls (`strace -f -c`, when installed) and user-space
/// instructions (`perf stat` where the machine exposes the counter, else valgrind's callgrind).
fn start_up_counts(minimal: &mut Command, ours: &mut Command) {
    let faults = |command: &mut Command| {
        let mut seen: Vec<u64> = (0..21).filter_map(|_| minor_faults(command)).collect();
        seen.sort_unstable();
        seen.get(seen.len() / 2).copied()
    };
    match (faults(minimal), faults(ours)) {
        (Some(base), Some(count)) => println!(
            "start-up counts: minor page faults {count} = {:.2}x a minimal Rust binary ({base}), median of 21",
            count as f64 / base.max(1) as f64
        ),
        _ => println!("start-up counts: minor page faults unavailable (no resource usage)"),
    }
    for (what, count) in [
        ("system calls", syscalls as fn(&Command) -> Option<u64>),
        ("user-space instructions", instructions),
    ] {
        match (count(minimal), count(ours)) {
            (Some(base), Some(count)) => println!(
                "start-up counts: {what} {count} = {:.2}x a minimal Rust binary ({base})",
                count as f64 / base.max(1) as f64
            ),
            _ => println!("start-up counts: {what} not counted on this machine (strace, and perf's counter or valgrind, missing)"),
        }
    }
}

/// The minor page faults of one run of `command`: what this process's count of its waited-for
/// children's faults (`cminflt` in /proc/self/stat) grew by while it ran and was waited for.
fn minor_faults(command: &mut Command) -> Option<u64> {
    fn children_faults() -> Option<u64> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        // After the command name's closing parenthesis: state is field 3, cminflt field 11.
        let (_, rest) = stat.rsplit_once(')')?;
        rest.split_whitespace().nth(8)?.parse().ok()
    }
    let before = children_faults()?;
    let status = command.status().ok()?;
    let after = children_faults()?;
    status.success().then(|| after.saturating_sub(before))
}

/// `tool` with `args`, in the environment `command` would run in (its variables set and
/// removed), to run `command` under it.
fn like(command: &Command, tool: &str, args: &[&str]) -> Command {
    let mut wrapped = Command::new(tool);
    wrapped.args(args);
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => wrapped.env(key, value),
            None => wrapped.env_remove(key),
        };
    }
    wrapped
}

/// The system calls of one run of `command` (and its children), by `strace -f -c`.
fn syscalls(command: &Command) -> Option<u64> {
    let report = tempfile::NamedTempFile::new().ok()?;
    let status = like(command, "strace", &["-f", "-c", "-o"])
        .arg(report.path())
        .arg(command.get_program())
        .args(command.get_args())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .ok()?;
    if !status.success() {
        return None;
    }
    // The summary's last line: "100.00 ... CALLS [ERRORS] total".
    let text = std::fs::read_to_string(report.path()).ok()?;
    let total = text
        .lines()
        .rev()
        .find(|line| line.trim_end().ends_with("total"))?;
    let fields: Vec<&str> = total.split_whitespace().collect();
    fields
        .iter()
        .rev()
        .nth(if fields.len() >= 6 { 2 } else { 1 })?
        .parse()
        .ok()
}

/// The user-space instructions of one run of `command`, the dynamic loader's included: by `perf
/// stat` if the machine counts them (`<not supported>` in most VMs), else by valgrind's callgrind
/// (it executes the program on a synthetic CPU and counts every instruction, so the figure is the
/// same on every run and no layout moves it).
fn instructions(command: &Command) -> Option<u64> {
    perf_instructions(command).or_else(|| callgrind_instructions(command))
}

/// The instructions of one run under valgrind's callgrind (its `Collected` count).
fn callgrind_instructions(command: &Command) -> Option<u64> {
    let output = like(
        command,
        "valgrind",
        &["--tool=callgrind", "--callgrind-out-file=/dev/null"],
    )
    .arg(command.get_program())
    .args(command.get_args())
    .stdout(std::process::Stdio::null())
    .output()
    .ok()?;
    if !output.status.success() {
        return None;
    }
    // "==PID== Collected : 1046207"
    let text = String::from_utf8_lossy(&output.stderr);
    text.lines()
        .find_map(|line| line.split_once("Collected :"))?
        .1
        .trim()
        .parse()
        .ok()
}

/// `perf stat -e instructions:u`, when the machine exposes the counter.
fn perf_instructions(command: &Command) -> Option<u64> {
    let output = like(
        command,
        "perf",
        &["stat", "-x", ",", "-e", "instructions:u", "--"],
    )
    .arg(command.get_program())
    .args(command.get_args())
    .stdout(std::process::Stdio::null())
    .output()
    .ok()?;
    let text = String::from_utf8_lossy(&output.stderr);
    text.lines()
        .find(|line| line.contains("instructions"))?
        .split(',')
        .next()?
        .parse()
        .ok()
}

/// The start-up and whole-process goal (issue "Performance 3"): at most 1.5x its floor.
const GOAL: f64 = 1.5;

fn against_goal(ratio: f64) -> String {
    if ratio <= GOAL {
        format!("goal <= {GOAL}x: met")
    } else {
        format!("goal <= {GOAL}x: {:.2}x over", ratio / GOAL)
    }
}

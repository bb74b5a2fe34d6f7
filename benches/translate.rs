//! `cargo bench --bench translate`: an at-caps workspace (8 bootstrap files of 25,000 chars,
//! 150 skills of 3,000 chars, 15 tools) translated to full Codex params.
//!
//! Prints the median per run from in-memory inputs, from disk and from disk with a warm skill
//! cache (what `serve` keeps), each as a ratio against the floor measured in the same run:
//! reading the same files from disk plus hashing the SKILL.md bytes (work no translation can
//! skip). Then start-up: whole-process `clawbridge params` on an empty workspace against a
//! minimal Rust binary (it only parses its arguments) compiled with `rustc -O` in the same run,
//! timed alternately. `BENCH_BREAKDOWN=1` adds per-stage medians; `BENCH_PROFILE=1` loops the
//! from-disk path for a profiler. OpenClaw's own figures come from `scripts/bench-vs-openclaw`.

use std::path::Path;
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

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
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

/// Median of each piece of work, sampled in round-robin.
fn alternate<const N: usize>(iterations: usize, mut works: [&mut dyn FnMut(); N]) -> [Duration; N] {
    for work in works.iter_mut() {
        for _ in 0..iterations / 10 + 1 {
            work();
        }
    }
    let mut samples: [Vec<Duration>; N] = std::array::from_fn(|_| Vec::with_capacity(iterations));
    for _ in 0..iterations {
        for (work, samples) in works.iter_mut().zip(samples.iter_mut()) {
            let start = Instant::now();
            work();
            samples.push(start.elapsed());
        }
    }
    samples.map(median)
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
    let [in_memory, from_disk, from_disk_warm, hashing, read_floor] = alternate(iterations, works);

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
    startup(ws);
}

/// Whole-process start-up: `clawbridge params` on an empty workspace against a minimal Rust
/// binary built here, both spawned alternately so machine drift cancels.
fn startup(scratch: &Path) {
    let minimal_src = scratch.join("minimal.rs");
    let minimal = scratch.join("minimal");
    std::fs::write(
        &minimal_src,
        "fn main() { let n = std::env::args().count(); if n > 99 { println!(\"{n}\"); } }\n",
    )
    .expect("write minimal");
    let built =
        std::process::Command::new(std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into()))
            .args(["-O", "-o"])
            .arg(&minimal)
            .arg(&minimal_src)
            .status();
    if !built.is_ok_and(|status| status.success()) {
        println!("start-up: rustc could not build the minimal binary; skipped");
        return;
    }
    let clawbridge = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/clawbridge");
    if !clawbridge.exists() {
        println!(
            "start-up: {} not built (cargo build --release); skipped",
            clawbridge.display()
        );
        return;
    }
    let empty = scratch.join("empty-workspace");
    std::fs::create_dir_all(&empty).expect("empty workspace");
    let run = empty.join("run.json");
    std::fs::write(&run, "{\"workspace\": \".\"}").expect("run");
    let spawn = |program: &Path| {
        let started = Instant::now();
        let status = std::process::Command::new(program)
            .arg("params")
            .arg(&run)
            .env("CLAWBRIDGE_LOG", "error")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .expect("spawn");
        assert!(status.success(), "{} params failed", program.display());
        started.elapsed()
    };
    let (mut ours, mut base) = (Vec::new(), Vec::new());
    for _ in 0..200 {
        base.push(spawn(&minimal));
        ours.push(spawn(&clawbridge));
    }
    let (ours, base) = (median(ours), median(base));
    println!(
        "start-up: clawbridge params on an empty workspace {:>7.1} us = {:.2}x a minimal Rust binary ({:.1} us), alternated, median of 200",
        micros(ours),
        ours.as_secs_f64() / base.as_secs_f64(),
        micros(base)
    );
}

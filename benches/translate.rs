//! `cargo bench --bench translate`: an at-caps workspace (8 bootstrap files of 25,000 chars,
//! 150 skills of 3,000 chars, 15 tools) translated to full Codex params.
//!
//! Prints the median per run from in-memory inputs and from disk, the share spent hashing
//! SKILL.md bytes, and ratios against baselines measured in the same run: reading the same files
//! from disk (the I/O floor) and OpenClaw's Node implementation of the same work (~1 ms per run on
//! the reference machine, a fixed figure from the issue, printed for comparison only).

use std::path::Path;
use std::time::{Duration, Instant};

use clawbridge::codex::protocol::params::build_params;
use clawbridge::config::{Run, RunDocument};
use clawbridge::routing::route_workspace;
use clawbridge::skills::{
    eligible_skills, parse_skill, render_skills_prompt, skill_version, CatalogSurface, SkillTier,
};
use clawbridge::translate::{translate, TranslateOptions};
use clawbridge::workspace::{BootstrapFile, FileContent, LoadedWorkspace, BOOTSTRAP_FILE_NAMES};
use serde_json::json;

/// The binary's allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const FILE_CHARS: usize = 25_000;
const SKILLS: usize = 150;
const SKILL_CHARS: usize = 3_000;
const TOOLS: usize = 15;
const NODE_REFERENCE: Duration = Duration::from_micros(1_000);

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
fn parse_all(skills: &[(String, Vec<u8>)]) -> Vec<clawbridge::skills::SkillEntry> {
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

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

fn main() {
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

    let in_memory = measure(iterations, || {
        let loaded = loaded_from(&files);
        let routed = route_workspace(&run, &loaded).expect("route");
        let parsed = parse_all(&skills);
        let (eligible, _) = eligible_skills(&parsed, &run, &options.host);
        let prompt = render_skills_prompt(&eligible, 30_000, 150, CatalogSurface::Codex);
        let params = build_params(&run, &routed, &prompt);
        std::hint::black_box(serde_json::to_string(&params).expect("json"));
    });
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
            std::hint::black_box(clawbridge::skills::discover_skills(&run, &options.host));
        });
        let t_bootstrap = measure(200, || {
            std::hint::black_box(clawbridge::workspace::load_bootstrap_files(&run));
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
    let from_disk = measure(iterations, || {
        let run = Run::load(&run_path).expect("load run");
        let translation = translate(&run, &options).expect("translate");
        let params = translation.codex_params(&run);
        std::hint::black_box(serde_json::to_string(&params).expect("json"));
    });
    let warm_options = TranslateOptions {
        skill_cache: Some(std::sync::Arc::new(
            clawbridge::skills::SkillCache::default(),
        )),
        ..TranslateOptions::hermetic()
    };
    let from_disk_warm = measure(iterations, || {
        let run = Run::load(&run_path).expect("load run");
        let translation = translate(&run, &warm_options).expect("translate");
        let params = translation.codex_params(&run);
        std::hint::black_box(serde_json::to_string(&params).expect("json"));
    });
    let hashing = measure(iterations, || {
        for (_, bytes) in &skills {
            std::hint::black_box(skill_version(bytes));
        }
    });
    let read_floor = measure(iterations, || {
        for (name, _) in &files {
            std::hint::black_box(std::fs::read(ws.join(name)).expect("read"));
        }
        for (folder, _) in &skills {
            std::hint::black_box(
                std::fs::read(ws.join("skills").join(folder).join("SKILL.md")).expect("read"),
            );
        }
    });

    println!("translate bench: 8 bootstrap files x {FILE_CHARS} chars, {SKILLS} skills x {SKILL_CHARS} chars, {TOOLS} tools; median of {iterations} runs");
    println!(
        "  in-memory inputs -> params JSON : {:>9.1} us/run",
        micros(in_memory)
    );
    println!(
        "  from disk -> params JSON        : {:>9.1} us/run",
        micros(from_disk)
    );
    println!(
        "  from disk, warm skill cache     : {:>9.1} us/run (serve keeps one)",
        micros(from_disk_warm)
    );
    println!("  hashing SKILL.md bytes (SHA-256): {:>9.1} us/run ({:.1}% of in-memory, {:.1}% of from-disk)",
        micros(hashing), 100.0 * hashing.as_secs_f64() / in_memory.as_secs_f64(), 100.0 * hashing.as_secs_f64() / from_disk.as_secs_f64());
    println!(
        "  baseline, reading the same files: {:>9.1} us/run",
        micros(read_floor)
    );
    println!("ratios:");
    println!(
        "  from disk / read-only baseline  : {:>6.2}x",
        from_disk.as_secs_f64() / read_floor.as_secs_f64()
    );
    println!(
        "  Node reference (1 ms) / in-memory: {:>6.2}x faster",
        NODE_REFERENCE.as_secs_f64() / in_memory.as_secs_f64()
    );
    println!(
        "  Node reference (1 ms) / from disk: {:>6.2}x faster",
        NODE_REFERENCE.as_secs_f64() / from_disk.as_secs_f64()
    );
    println!(
        "  Node reference (1 ms) / warm     : {:>6.2}x faster",
        NODE_REFERENCE.as_secs_f64() / from_disk_warm.as_secs_f64()
    );
}

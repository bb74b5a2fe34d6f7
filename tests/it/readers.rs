//! Protection: the transcript readers (`transcript show`, `audit`, `export-otel`) hold one line
//! at a time. A folder of 40 MiB (a long thread of small notifications, a command output of
//! 16 MiB in one line, and a line of 8 MiB of numbers) is read by the real binary; its peak
//! memory, less the same command's on a one-line folder measured in the same run, stays within
//! three times its largest file (read whole, as values, it took seven times this folder's
//! bytes, and twenty-five times a folder of small lines only).

use std::io::{BufRead, Read, Write};
use std::path::Path;

use serde_json::json;

/// Where one JSON line goes.
fn line(out: &mut impl Write, value: &serde_json::Value) {
    serde_json::to_writer(&mut *out, value).expect("write");
    out.write_all(b"\n").expect("write");
}

/// The big folder: `connection.jsonl`; `t-1.jsonl`, turns of streamed deltas (what most of a
/// real transcript is) up to `small_bytes`; `t-2.jsonl`, one command's output of 16 MiB as one
/// line, then a line of 8 MiB of `1,`.
fn big_folder(dir: &Path, small_bytes: u64) {
    std::fs::create_dir_all(dir).expect("dir");
    std::fs::write(
        dir.join("connection.jsonl"),
        format!(
            "{}\n",
            json!({"direction": "in", "message": {"id": 0, "method": "initialize", "params": {"clientInfo": {"name": "big", "version": "1"}}}})
        ),
    )
    .expect("connection");
    let file = std::fs::File::create(dir.join("t-1.jsonl")).expect("t-1");
    let mut out = std::io::BufWriter::new(file);
    line(
        &mut out,
        &json!({"direction": "in", "message": {"id": 1, "method": "thread/start", "params": {"cwd": "/nonexistent", "model": "gpt-5.5"}}}),
    );
    line(
        &mut out,
        &json!({"direction": "out", "message": {"id": 1, "result": {"thread": {"id": "t-1"}, "model": "gpt-5.5"}}}),
    );
    let mut written = 0u64;
    let mut turn = 0u64;
    while written < small_bytes {
        turn += 1;
        let id = format!("u-{turn}");
        let mut lines = vec![
            json!({"direction": "in", "message": {"id": turn + 1, "method": "turn/start", "params": {"threadId": "t-1", "input": [{"type": "text", "text": format!("hello {turn}")}]}}}),
            json!({"direction": "out", "message": {"id": turn + 1, "result": {"turn": {"id": id, "status": "inProgress", "items": []}}}}),
            json!({"direction": "out", "message": {"method": "turn/started", "params": {"threadId": "t-1", "turn": {"id": id, "status": "inProgress", "items": []}}}}),
        ];
        for delta in 0..200 {
            lines.push(json!({"direction": "out", "message": {"method": "item/agentMessage/delta", "params": {"threadId": "t-1", "turnId": id, "itemId": format!("m-{turn}"), "delta": format!("w{delta} ")}}}));
        }
        lines.push(json!({"direction": "out", "message": {"method": "thread/tokenUsage/updated", "params": {"threadId": "t-1", "turnId": id, "tokenUsage": {
            "last": {"totalTokens": turn, "inputTokens": turn, "cachedInputTokens": 0, "outputTokens": 1, "reasoningOutputTokens": 0},
            "total": {"totalTokens": turn, "inputTokens": turn, "cachedInputTokens": 0, "outputTokens": 1, "reasoningOutputTokens": 0}}}}}));
        lines.push(json!({"direction": "out", "message": {"method": "item/completed", "params": {"threadId": "t-1", "turnId": id, "item": {"type": "agentMessage", "id": format!("m-{turn}"), "text": "w ".repeat(200)}}}}));
        lines.push(json!({"direction": "out", "message": {"method": "turn/completed", "params": {"threadId": "t-1", "turn": {"id": id, "status": "completed", "items": []}}}}));
        for value in &lines {
            let text = value.to_string();
            written += text.len() as u64 + 1;
            out.write_all(text.as_bytes()).expect("write");
            out.write_all(b"\n").expect("write");
        }
    }
    out.flush().expect("flush");
    let file = std::fs::File::create(dir.join("t-2.jsonl")).expect("t-2");
    let mut out = std::io::BufWriter::new(file);
    line(
        &mut out,
        &json!({"direction": "in", "message": {"id": 1, "method": "turn/start", "params": {"threadId": "t-2", "input": [{"type": "text", "text": "run it"}]}}}),
    );
    line(
        &mut out,
        &json!({"direction": "out", "message": {"method": "item/completed", "params": {"threadId": "t-2", "turnId": "u-1", "item": {
            "type": "commandExecution", "id": "c-1", "command": "yes", "status": "completed", "exitCode": 0,
            "aggregatedOutput": "yes ".repeat(4 * 1024 * 1024)}}}}),
    );
    out.write_all(br#"{"direction":"out","message":["#)
        .expect("write");
    for _ in 0..(4 * 1024 * 1024) {
        out.write_all(b"1,").expect("write");
    }
    out.write_all(b"1]}\n").expect("write");
    out.flush().expect("flush");
}

/// The folder's bytes, and its largest file's.
fn folder_bytes(dir: &Path) -> (u64, u64) {
    let sizes: Vec<u64> = std::fs::read_dir(dir)
        .expect("dir")
        .map(|entry| entry.expect("entry").metadata().expect("metadata").len())
        .collect();
    (sizes.iter().sum(), sizes.iter().copied().max().unwrap_or(0))
}

/// The binary run with `-vv` and `args`, stdout to a file in `dir`: (exit code, stderr, peak
/// resident memory in bytes, as the process itself tells it at the end).
fn peak(dir: &Path, args: &[String]) -> (i32, String, u64) {
    let stdout = std::fs::File::create(dir.join("stdout")).expect("stdout");
    let output = crate::util::clawbridge()
        .arg("-vv")
        .args(args)
        .stdout(stdout)
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let kib: u64 = stderr
        .lines()
        .find_map(|line| line.split("peak resident memory ").nth(1))
        .and_then(|rest| rest.strip_suffix(" KiB"))
        .and_then(|number| number.parse().ok())
        .unwrap_or_else(|| panic!("no peak told: {stderr}"));
    (output.status.code().unwrap_or(-1), stderr, kib * 1024)
}

/// An OTLP/HTTP collector on loopback that takes every request and answers 200.
fn sink() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut writer = stream.try_clone().expect("clone");
                let mut reader = std::io::BufReader::new(stream);
                loop {
                    let mut length = 0usize;
                    loop {
                        let mut header = String::new();
                        if reader.read_line(&mut header).unwrap_or(0) == 0 {
                            return;
                        }
                        let header = header.trim_end();
                        if header.is_empty() {
                            break;
                        }
                        if let Some((name, value)) = header.split_once(':') {
                            if name.eq_ignore_ascii_case("content-length") {
                                length = value.trim().parse().unwrap_or(0);
                            }
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let answered =
                        writer.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
                    if answered.is_err() {
                        return;
                    }
                }
            });
        }
    });
    format!("http://{addr}")
}

#[test]
fn transcript_readers_hold_a_line_at_a_time() {
    let dir = tempfile::tempdir().expect("dir");
    let big = dir.path().join("big");
    big_folder(&big, 16 * 1024 * 1024);
    let (size, largest) = folder_bytes(&big);
    let small = dir.path().join("small");
    std::fs::create_dir_all(&small).expect("small");
    std::fs::copy(big.join("connection.jsonl"), small.join("connection.jsonl")).expect("copy");
    std::fs::write(
        small.join("t-1.jsonl"),
        format!(
            "{}\n",
            json!({"direction": "in", "message": {"id": 1, "method": "thread/start", "params": {"cwd": "/nonexistent", "model": "gpt-5.5"}}})
        ),
    )
    .expect("t-1");
    let collector = sink();
    // (name, the words before the folder, the words after it)
    // (`transcript show` without `--json` reads as `--json` does, and prints less.)
    let runs: [(&str, &[&str], Vec<String>); 3] = [
        (
            "transcript show --json",
            &["transcript", "show"],
            vec!["--json".into()],
        ),
        ("audit --json", &["audit"], vec!["--json".into()]),
        (
            "export-otel",
            &["export-otel"],
            vec!["--otel-endpoint".into(), collector.clone()],
        ),
    ];
    let mut report = Vec::new();
    for (name, before, after) in runs {
        let line = |folder: &Path| {
            let mut words: Vec<String> = before.iter().map(|word| word.to_string()).collect();
            words.push(folder.to_str().expect("utf-8").to_string());
            words.extend(after.iter().cloned());
            words
        };
        let (small_line, big_line) = (line(&small), line(&big));
        let (code, stderr, base) = peak(dir.path(), &small_line);
        assert_eq!(code, 0, "{name} (one line): {stderr}");
        let (code, stderr, used) = peak(dir.path(), &big_line);
        assert_eq!(code, 0, "{name}: {stderr}");
        let held = used.saturating_sub(base);
        report.push(format!(
            "{name}: {} MiB over a {} MiB baseline for a {} MiB folder, its largest file {} MiB ({:.2}x)",
            held >> 20,
            base >> 20,
            size >> 20,
            largest >> 20,
            held as f64 / largest as f64
        ));
        if name == "transcript show --json" {
            // The line too dense to hold is said to be passed over, not silently lost.
            let shown = std::fs::read_to_string(dir.path().join("stdout")).expect("stdout");
            assert!(
                shown.contains("passed over"),
                "{}",
                &shown[..shown.len().min(2000)]
            );
            assert!(shown.contains("yes yes"), "the long output is shown");
        }
        assert!(held <= 3 * largest, "{name} held too much: {report:#?}");
    }
    eprintln!("{report:#?}");
}

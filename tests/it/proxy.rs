//! `clawbridge app-server`: the transparent proxy for OpenClaw's Codex slot.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::util::*;

fn transcript_lines(dir: &std::path::Path, file: &str) -> Vec<Value> {
    std::fs::read_to_string(dir.join(file))
        .unwrap_or_else(|error| panic!("{file}: {error}"))
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect()
}

/// With a stand-in app-server (`cat`): bytes pass unchanged both ways, OpenClaw's arguments reach
/// the child as given, the transcript files each message by thread with secrets redacted, and
/// closing stdin ends the proxy.
#[test]
fn messages_pass_unchanged_and_are_transcribed_per_thread() {
    let dir = tempfile::tempdir().expect("dir");
    let fake = dir.path().join("fake-codex");
    std::fs::write(
        &fake,
        "#!/bin/sh\nprintf '%s\\n' \"$@\" > \"$(dirname \"$0\")/args.txt\"\nexec cat\n",
    )
    .expect("fake");
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let transcript = dir.path().join("transcript");
    let input = [
        r#"{"id":7,"method":"initialize","params":{"clientInfo":{"name":"openclaw","version":"2026.9.6"}}}"#,
        r#"{"id":"7","method":"some/futureMethod","params":{"x":[1,2.50,"\u00e9"]}}"#,
        r#"{"id":9,"result":{"thread":{"id":"thr-abc"}}}"#,
        r#"{"method":"turn/started","params":{"threadId":"thr-abc","turn":{"id":"t1"}}}"#,
        r#"{"id":10,"method":"account/login/start","params":{"type":"apiKey","apiKey":"sk-secret-value"}}"#,
        r#"{"method":"thread/started","params":{"threadId":"../escape"}}"#,
    ]
    .join("\n")
        + "\n";
    let mut child = clawbridge()
        .args(["app-server", "--no-check", "--codex-bin"])
        .arg(&fake)
        .arg("--transcript")
        .arg(&transcript)
        .args([
            "-c",
            "cli_auth_credentials_store=\"ephemeral\"",
            "app-server",
            "--listen",
            "stdio://",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let started = Instant::now();
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write");
    // stdin is closed here: the proxy must end.
    let output = child.wait_with_output().expect("wait");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the proxy ended when stdin closed"
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        input,
        "byte for byte"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("args.txt")).expect("args"),
        "-c\ncli_auth_credentials_store=\"ephemeral\"\napp-server\n--listen\nstdio://\n"
    );
    let connection = transcript_lines(&transcript, "connection.jsonl");
    let thread = transcript_lines(&transcript, "thr-abc.jsonl");
    assert!(connection
        .iter()
        .any(|entry| entry["direction"] == "in" && entry["message"]["id"] == 7));
    assert!(connection
        .iter()
        .any(|entry| entry["direction"] == "out" && entry["message"]["id"] == "7"));
    assert!(thread
        .iter()
        .any(|entry| entry["message"]["method"] == "turn/started"));
    assert!(thread
        .iter()
        .any(|entry| entry["message"]["result"]["thread"]["id"] == "thr-abc"));
    // A thread id cannot name a path outside the folder.
    assert!(std::fs::read_dir(&transcript)
        .expect("dir")
        .filter_map(Result::ok)
        .any(|entry| entry
            .file_name()
            .to_string_lossy()
            .starts_with("___escape-")));
    assert!(!dir.path().join("escape.jsonl").exists());
    // Private: the conversation is in there.
    let mode = |path: &std::path::Path| {
        std::fs::metadata(path)
            .expect("metadata")
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode(&transcript), 0o700);
    assert_eq!(mode(&transcript.join("thr-abc.jsonl")), 0o600);
    let all = std::fs::read_to_string(transcript.join("connection.jsonl")).expect("read");
    assert!(!all.contains("sk-secret-value"), "the API key is redacted");
    assert!(all.contains("<redacted>"));
}

/// With the real Codex: the handshake and a thread/start pass through with their id types, the
/// transcript has the thread's file, and the proxy ends with Codex when stdin closes.
#[ignore = "pairs with the Codex CLI: scripts/test installs it and runs these (--include-ignored)"]
#[test]
fn the_real_codex_answers_through_the_proxy() {
    let bin = crate::e2e::codex_bin();
    let dir = tempfile::tempdir().expect("dir");
    let home = dir.path().join("codex-home");
    std::fs::create_dir(&home).expect("home");
    let transcript = dir.path().join("transcript");
    let mut child = clawbridge()
        .args(["app-server", "--codex-bin"])
        .arg(&bin)
        .arg("--transcript")
        .arg(&transcript)
        .args([
            "-c",
            "cli_auth_credentials_store=\"ephemeral\"",
            "app-server",
            "--listen",
            "stdio://",
        ])
        .env("CODEX_HOME", &home)
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut send = |value: Value| {
        writeln!(stdin, "{value}").expect("write");
    };
    let mut until_id = |id: &Value| -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            assert!(Instant::now() < deadline, "no answer to {id}");
            let mut line = String::new();
            assert!(
                stdout.read_line(&mut line).expect("read") > 0,
                "proxy closed"
            );
            let message: Value = serde_json::from_str(&line).expect("json");
            if &message["id"] == id && message.get("method").is_none() {
                return message;
            }
        }
    };
    send(
        json!({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "openclaw", "version": "2026.9.6"}, "capabilities": {"experimentalApi": true}}}),
    );
    let initialized = until_id(&json!(1));
    assert!(
        initialized["result"]["userAgent"].as_str().is_some(),
        "{initialized}"
    );
    send(json!({"method": "initialized"}));
    send(
        json!({"id": "start", "method": "thread/start", "params": {"cwd": dir.path(), "approvalPolicy": "never"}}),
    );
    let started = until_id(&json!("start"));
    let thread_id = started["result"]["thread"]["id"]
        .as_str()
        .expect("thread id")
        .to_string();
    // A method this Codex does not have: forwarded all the same, answered by Codex, counted.
    send(json!({"id": 99, "method": "bogus/method", "params": {}}));
    let refused = until_id(&json!(99));
    assert!(refused.get("error").is_some(), "{refused}");
    drop(stdin);
    let status = crate::util::wait_for(
        "the proxy's end after stdin closed",
        Duration::from_secs(15),
        || child.try_wait().expect("wait"),
    );
    assert!(status.success() || status.code().is_some(), "{status:?}");
    let thread = transcript_lines(&transcript, &format!("{thread_id}.jsonl"));
    assert!(thread
        .iter()
        .any(|entry| entry["direction"] == "out" && entry["message"]["id"] == "start"));
    assert!(
        thread
            .iter()
            .any(|entry| entry["direction"] == "in" && entry["message"]["method"] == "thread/start"),
        "thread/start is filed with the thread its answer names"
    );
    // The schema was generated from this binary, and the thread/start conforms to it.
    let log = transcript_lines(&transcript, "conformance.jsonl");
    let version = log[0]["codexVersion"]
        .as_str()
        .expect("version")
        .to_string();
    assert_eq!(log[0]["client"], "openclaw 2026.9.6");
    let cached = std::fs::read_dir(dir.path().join("cache/clawbridge/codex-schema"))
        .expect("cache")
        .filter_map(Result::ok)
        .any(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .starts_with(&format!("{version}-"))
                && entry.path().join("v2/ThreadStartParams.json").is_file()
        });
    assert!(cached, "the schema is cached for this version and binary");
    let check = log
        .iter()
        .find(|entry| entry["method"] == "thread/start")
        .expect("thread/start checked");
    assert_eq!(check["problems"], json!([]), "{check}");
    // Every message was checked against this Codex's schema: one summary line per method and
    // family, nothing with problems, the unknown method counted both ways.
    let row = |method: &str, flow: &str| summary_row(&log, method, flow);
    for (method, flow) in [
        ("initialize", "request"),
        ("initialize", "response"),
        ("initialized", "clientNotification"),
        ("thread/start", "request"),
        ("thread/start", "response"),
        ("thread/started", "notification"),
    ] {
        let counts = row(method, flow);
        assert_eq!(counts["seen"], 1, "{counts}");
        assert_eq!(counts["valid"], 1, "{method} {flow} conforms: {counts}");
    }
    assert_eq!(row("bogus/method", "request")["unknown"], 1);
    assert_eq!(row("bogus/method", "response")["unknown"], 1);
    assert!(
        log.iter()
            .filter(|entry| entry["kind"] == "method")
            .all(|entry| entry["problems"] == 0),
        "Codex's own messages conform to its own schema: {log:#?}"
    );
    // The report reads it back: a table with every row, exit 0 (no problems).
    let report = conformance_report(&transcript);
    let table = String::from_utf8_lossy(&report.stdout);
    assert!(
        report.status.success(),
        "{table}{}",
        String::from_utf8_lossy(&report.stderr)
    );
    assert!(
        table.starts_with(&format!(
            "Codex {version} · client openclaw 2026.9.6 · 1 run"
        )),
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|line| line.starts_with("bogus/method") && line.contains("request")),
        "{table}"
    );
}

/// Run `command` with `input` on its stdin (then closed) and collect what it printed.
fn fed(mut command: std::process::Command, input: &str) -> std::process::Output {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write");
    child.wait_with_output().expect("wait")
}

/// A stand-in Codex that reports a version, generates its schema from the vendored 0.169.0 one
/// (counting generations), and otherwise echoes stdin.
fn schema_generating_fake(dir: &std::path::Path) -> std::path::PathBuf {
    let fake = dir.join("fake-codex");
    let vendored = repo_root().join("fixtures/codex-schema/0.169.0");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\n\
             if [ \"$1\" = --version ]; then echo 'codex-cli 0.169.0'; exit 0; fi\n\
             if [ \"$2\" = generate-json-schema ]; then\n\
               echo generated >> \"$(dirname \"$0\")/generations.txt\"\n\
               cp -r {}/. \"$5\"; exit 0\n\
             fi\n\
             printf '%s\\n' \"$@\" > \"$(dirname \"$0\")/args.txt\"\n\
             exec cat\n",
            vendored.display()
        ),
    )
    .expect("fake");
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    fake
}

/// OpenClaw's own command line (`clawbridge -c ... app-server --transcript DIR --listen ...`):
/// params are checked against the schema generated from the running Codex (cached, generated
/// once per version); unknown keys and type errors are warned about by field, with the client's
/// version next to Codex's; everything is still forwarded unchanged.
#[test]
fn params_are_checked_against_the_running_codex_schema() {
    let dir = tempfile::tempdir().expect("dir");
    let fake = schema_generating_fake(dir.path());
    let cache = dir.path().join("cache");
    let transcript = dir.path().join("transcript");
    let input = [
        r#"{"id":1,"method":"initialize","params":{"clientInfo":{"name":"openclaw","version":"2026.9.6"},"capabilities":{"experimentalApi":true}}}"#,
        r#"{"id":1,"result":{"userAgent":"openclaw/0.169.0 (Linux; x86_64) (openclaw; 2026.9.6)"}}"#,
        r#"{"id":2,"method":"thread/start","params":{"cwd":"/w","approvalPolicy":"never","developerInstructionz":"x","config":{"anything":1}}}"#,
        r#"{"id":3,"method":"turn/start","params":{"threadId":"thr-1","input":[{"type":"text","text":"hi","text_elements":[]}],"approvalPolicy":42}}"#,
        r#"{"id":4,"method":"thread/resume","params":{"threadId":"thr-1"}}"#,
    ]
    .join("\n")
        + "\n";
    let run = |input: &str| {
        let mut command = clawbridge();
        command
            .args([
                "-c",
                "cli_auth_credentials_store=\"ephemeral\"",
                "app-server",
                "--transcript",
            ])
            .arg(&transcript)
            .args(["--listen", "stdio://", "--codex-bin"])
            .arg(&fake)
            .env("XDG_CACHE_HOME", &cache);
        fed(command, input)
    };
    let output = run(&input);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        input,
        "forwarded unchanged"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("args.txt")).expect("args"),
        "-c\ncli_auth_credentials_store=\"ephemeral\"\napp-server\n--listen\nstdio://\n",
        "Codex gets OpenClaw's arguments, not the proxy's own flags"
    );
    for (field, method) in [
        ("/developerInstructionz", "thread/start"),
        ("/approvalPolicy", "turn/start"),
    ] {
        assert!(
            stderr.contains(field) && stderr.contains(method),
            "a warning names {method} {field}:\n{stderr}"
        );
    }
    assert!(
        stderr.contains("openclaw 2026.9.6") && stderr.contains("Codex 0.169.0"),
        "{stderr}"
    );
    let log = transcript_lines(&transcript, "conformance.jsonl");
    assert_eq!(log[0]["kind"], "versions");
    assert_eq!(log[0]["client"], "openclaw 2026.9.6");
    assert_eq!(log[0]["codexVersion"], "0.169.0");
    let problems = |method: &str| -> Vec<(String, String)> {
        let entry = log
            .iter()
            .find(|entry| entry["kind"] == "check" && entry["method"] == method)
            .unwrap_or_else(|| panic!("{method} was checked: {log:#?}"));
        assert_eq!(entry["client"], "openclaw 2026.9.6");
        entry["problems"]
            .as_array()
            .expect("problems")
            .iter()
            .map(|problem| {
                (
                    problem["field"].as_str().unwrap_or_default().to_string(),
                    problem["kind"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect()
    };
    assert_eq!(
        problems("thread/start"),
        vec![(
            "/developerInstructionz".to_string(),
            "unknownKey".to_string()
        )],
        "config is free-form; only the misspelt key is reported"
    );
    assert_eq!(
        problems("turn/start"),
        vec![("/approvalPolicy".to_string(), "invalid".to_string())]
    );
    assert_eq!(
        problems("thread/resume"),
        vec![],
        "a conforming message has no problems"
    );
    let entries: Vec<String> = std::fs::read_dir(cache.join("clawbridge/codex-schema"))
        .expect("cache")
        .filter_map(Result::ok)
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| !name.starts_with('.'))
        .collect();
    assert!(
        entries.len() == 1
            && entries[0].starts_with("0.169.0-")
            && cache
                .join("clawbridge/codex-schema")
                .join(&entries[0])
                .join("v2/TurnStartParams.json")
                .is_file(),
        "the generated schema is cached per version and binary: {entries:?}"
    );
    // A second start reads the cache instead of generating again.
    let again = run(&input);
    assert!(again.status.success());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("generations.txt")).expect("generations"),
        "generated\n",
        "generated once"
    );
    assert!(String::from_utf8_lossy(&again.stderr).contains("/developerInstructionz"));
    // --no-check: no checks, no schema generation.
    let mut quiet = clawbridge();
    quiet
        .args(["app-server", "--no-check", "--codex-bin"])
        .arg(&fake)
        .env("XDG_CACHE_HOME", dir.path().join("other-cache"));
    let output = fed(quiet, &input);
    assert!(!String::from_utf8_lossy(&output.stderr).contains("/developerInstructionz"));
    assert!(!dir.path().join("other-cache").exists());
}

/// `clawbridge -c ... login status` (OpenClaw's probe for a user-scoped Codex home) runs the
/// real Codex with the same arguments.
#[test]
fn other_codex_calls_in_the_slot_reach_codex_unchanged() {
    let dir = tempfile::tempdir().expect("dir");
    let fake = schema_generating_fake(dir.path());
    let output = clawbridge()
        .args(["-c", "x=1", "login", "status"])
        .env("CODEX_BIN", &fake)
        .output()
        .expect("run");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("args.txt")).expect("args"),
        "-c\nx=1\nlogin\nstatus\n"
    );
}

/// A proxy whose client keeps stdin open (as OpenClaw does), over the fake Codex `script`:
/// (exit status, seconds until stdout closed). With `signal`, the proxy gets SIGTERM once the
/// fake Codex runs.
fn proxy_with_open_stdin(script: &str, signal: bool) -> (std::process::ExitStatus, Duration) {
    let dir = tempfile::tempdir().expect("dir");
    let fake = dir.path().join("fake-codex");
    let marker = dir.path().join("started");
    std::fs::write(
        &fake,
        format!("#!/bin/sh\n: > '{}'\n{script}\n", marker.display()),
    )
    .expect("fake");
    let signal_once = signal.then_some(&marker);
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let mut child = clawbridge()
        .args(["app-server", "--no-check", "--codex-bin"])
        .arg(&fake)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let _stdin = child.stdin.take().expect("stdin");
    let mut stdout = child.stdout.take().expect("stdout");
    let started = Instant::now();
    if let Some(marker) = signal_once {
        // The fake Codex is running (so the proxy's SIGTERM handler is in place).
        crate::util::wait_until("the fake Codex's start", Duration::from_secs(10), || {
            marker.exists()
        });
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
    }
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = std::io::Read::read_to_end(&mut stdout, &mut sink);
        let _ = sender.send(started.elapsed());
    });
    let closed = receiver.recv_timeout(Duration::from_secs(20));
    let status = child.wait().expect("wait");
    let closed = closed.unwrap_or_else(|_| panic!("stdout stayed open while stdin was open"));
    (status, closed)
}

/// Protection: Codex's death is the proxy's. When Codex exits (or is killed) while the client
/// keeps stdin open, the proxy exits at once with Codex's code (128 + signal for a kill) and its
/// stdout closes; on SIGTERM it exits 143 the same way.
#[test]
fn the_proxy_ends_with_codex_even_while_stdin_stays_open() {
    let (status, closed) = proxy_with_open_stdin("exit 7", false);
    assert_eq!(status.code(), Some(7));
    assert!(closed < Duration::from_secs(10), "{closed:?}");
    let (status, closed) = proxy_with_open_stdin("kill -9 $$", false);
    assert_eq!(status.code(), Some(128 + 9));
    assert!(closed < Duration::from_secs(10), "{closed:?}");
    let (status, closed) = proxy_with_open_stdin("exec sleep 600", true);
    assert_eq!(status.code(), Some(143));
    assert!(closed < Duration::from_secs(10), "{closed:?}");
}

/// Protection: the transcript is written off the forwarding path. Its writer is made to block
/// for good (the thread's transcript file is a FIFO nobody reads, so opening it never returns),
/// and every line still goes through, a 60 MiB one and the small one after it. Were the
/// transcript written on the way, nothing would come back.
#[test]
fn a_stuck_transcript_writer_holds_up_nothing() {
    let dir = tempfile::tempdir().expect("dir");
    let fake = dir.path().join("fake-codex");
    std::fs::write(&fake, "#!/bin/sh\nexec cat\n").expect("fake");
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let transcript = dir.path().join("transcript");
    std::fs::create_dir(&transcript).expect("transcript dir");
    std::fs::set_permissions(&transcript, std::fs::Permissions::from_mode(0o700)).expect("0700");
    let fifo = transcript.join("t.jsonl");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let mut child = clawbridge()
        .args(["app-server", "--no-check", "--codex-bin"])
        .arg(&fake)
        .arg("--transcript")
        .arg(&transcript)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let big = format!(
        "{{\"method\":\"item/agentMessage/delta\",\"params\":{{\"threadId\":\"t\",\"delta\":\"{}\"}}}}\n",
        "x".repeat(60 * 1024 * 1024)
    );
    let writer = std::thread::spawn(move || {
        stdin.write_all(big.as_bytes()).expect("big");
        stdin
            .write_all(b"{\"method\":\"small\",\"params\":{\"threadId\":\"t\"}}\n")
            .expect("small");
        stdin
    });
    // Read on a thread: a proxy that waited on its transcript would never answer, and the test
    // must fail rather than hang (the limit is a guard against a hang, not a measure).
    let (lines, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        for _ in 0..2 {
            line.clear();
            if stdout.read_line(&mut line).is_err() {
                return;
            }
            let _ = lines.send(line.len().min(200));
            if line.contains("\"small\"") {
                let _ = lines.send(0);
            }
        }
    });
    let guard = Duration::from_secs(120);
    assert!(received.recv_timeout(guard).expect("the big line back") > 100);
    assert!(received.recv_timeout(guard).is_ok(), "the small line back");
    assert_eq!(
        received.recv_timeout(guard),
        Ok(0),
        "the small line is the small one"
    );
    // The writer stays stuck on the FIFO: the proxy is killed, not asked to finish.
    let _ = child.kill();
    drop(writer.join().expect("writer"));
    let _ = child.wait();
}

/// `app-server report DIR` reads back what the proxy wrote: a usage error without DIR (exit 2),
/// exit 1 when a message had problems, and a reader that goes away (`| head`) ends it quietly,
/// never with a panic.
#[test]
fn the_report_reads_the_summary_and_survives_a_closed_pipe() {
    let dir = tempfile::tempdir().expect("dir");
    let mut log = String::from(
        "{\"kind\":\"summary\",\"client\":\"openclaw 2026.9.6\",\"codexVersion\":\"0.169.0\",\"skipped\":0}\n",
    );
    for index in 0..3000 {
        log.push_str(&format!(
            "{{\"kind\":\"method\",\"method\":\"m/{index}\",\"message\":\"notification\",\"seen\":2,\"valid\":1,\"problems\":1,\"unknown\":0,\"unchecked\":0}}\n"
        ));
    }
    std::fs::write(dir.path().join("conformance.jsonl"), log).expect("write");
    let output = clawbridge()
        .args(["app-server", "report"])
        .arg(dir.path())
        .output()
        .expect("report");
    assert_eq!(output.status.code(), Some(1), "problems: exit 1");
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(
        table.contains("m/2999") && table.lines().count() > 3000,
        "{}",
        table.len()
    );
    let usage = clawbridge()
        .args(["app-server", "report"])
        .output()
        .expect("usage");
    assert_eq!(usage.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&usage.stderr).contains("report DIR"));
    let mut child = clawbridge()
        .args(["app-server", "report"])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    drop(child.stdout.take());
    let closed = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&closed.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// Protection: `app-server report` prints what clients said of themselves redacted and
/// escaped: a key in `clientInfo.version`, terminal escapes and a right-to-left mark in a
/// method name never reach the reader's terminal as they were.
#[test]
fn the_report_prints_no_secret_and_no_control_character() {
    let dir = tempfile::tempdir().expect("dir");
    let key = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789";
    let log = format!(
        "{{\"kind\":\"summary\",\"client\":\"openclaw {key}\",\"codexVersion\":\"0.169.0\",\"skipped\":0}}\n{{\"kind\":\"method\",\"method\":\"m/\\u001b]0;owned\\u0007\\u202eevil\",\"message\":\"notification\",\"seen\":1,\"valid\":1,\"problems\":0,\"unknown\":0,\"unchecked\":0}}\n"
    );
    std::fs::write(dir.path().join("conformance.jsonl"), log).expect("write");
    let output = clawbridge()
        .args(["app-server", "report"])
        .arg(dir.path())
        .output()
        .expect("report");
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(!table.contains(key), "the key is printed: {table}");
    assert!(
        !table.contains(['\u{1b}', '\u{7}', '\u{202e}']),
        "controls reach the terminal: {table:?}"
    );
    assert!(table.contains("m/"), "{table}");
}

/// Protection (fail-fast start): an endpoint that could not start an app-server never says it
/// is listening. Without a Codex CLI, or with a Codex home that cannot be a folder, `app-server
/// --listen` exits 2 naming the fix, and prints no address.
#[test]
fn an_endpoint_that_cannot_start_codex_refuses_to_listen() {
    let dir = tempfile::tempdir().expect("dir");
    let state = dir.path().join("state");
    let run = |codex_bin: &std::path::Path, home: &std::path::Path| {
        let output = clawbridge()
            .args(["app-server", "--listen", "ws://127.0.0.1:0", "--codex-bin"])
            .arg(codex_bin)
            .arg("--state-dir")
            .arg(&state)
            .env_remove("CODEX_BIN")
            .env("PATH", "/usr/bin:/bin")
            .env("CODEX_HOME", home)
            .stdin(Stdio::null())
            .output()
            .expect("run");
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).to_string(),
            String::from_utf8_lossy(&output.stderr).to_string(),
        )
    };
    let home = dir.path().join("codex-home");
    let (code, stdout, stderr) = run(&dir.path().join("no-codex"), &home);
    assert_eq!(code, Some(2), "{stdout}\n{stderr}");
    assert!(stdout.is_empty(), "no address: {stdout}");
    assert!(stderr.contains("--codex-bin"), "{stderr}");

    let fake = dir.path().join("fake-codex");
    std::fs::write(&fake, "#!/bin/sh\nexec cat\n").expect("fake");
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let not_a_folder = dir.path().join("a-file");
    std::fs::write(&not_a_folder, "").expect("file");
    let (code, stdout, stderr) = run(&fake, &not_a_folder);
    assert_eq!(code, Some(2), "{stdout}\n{stderr}");
    assert!(stdout.is_empty(), "no address: {stdout}");
    assert!(
        stderr.contains("CODEX_HOME") && stderr.contains("a-file"),
        "{stderr}"
    );
}

/// `app-server report` on the folder of a run that has not ended (a running endpoint's): the
/// rows so far, from its params checks and problem lines, marked partial; the exit code says
/// whether any had problems. A log with nothing checked yet is named as such (exit 2).
#[test]
fn the_report_reads_a_running_folder_as_partial() {
    let dir = tempfile::tempdir().expect("dir");
    let log = [
        r#"{"kind":"versions","client":"openclaw 2026.9.6","codexVersion":"0.169.0"}"#,
        r#"{"kind":"check","method":"thread/start","id":1,"problems":[]}"#,
        r#"{"kind":"check","method":"turn/start","id":2,"problems":[]}"#,
        r#"{"kind":"check","method":"turn/start","id":3,"problems":[{"field":"/effort","kind":"invalid","message":"not one of the efforts"}]}"#,
        r#"{"kind":"problem","method":"item/completed","message":"notification","problems":[{"field":"/item/kind","kind":"unknownKey","message":"no such property"}]}"#,
    ]
    .join("\n")
        + "\n";
    std::fs::write(dir.path().join("conformance.jsonl"), &log).expect("write");
    let report = |json: bool| {
        let mut command = clawbridge();
        command.args(["app-server", "report"]).arg(dir.path());
        if json {
            command.arg("--json");
        }
        let output = command.output().expect("report");
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).to_string(),
            String::from_utf8_lossy(&output.stderr).to_string(),
        )
    };
    let (code, table, stderr) = report(false);
    assert_eq!(code, Some(1), "a problem so far: exit 1\n{table}\n{stderr}");
    assert!(table.starts_with("partial:"), "{table}");
    assert!(
        table.contains("/effort") && table.contains("item/completed"),
        "{table}"
    );
    let (_, json, _) = report(true);
    let parsed: Value = serde_json::from_str(&json).expect("json");
    assert_eq!(parsed["partial"], true);
    let turn = parsed["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .find(|row| row["method"] == "turn/start")
        .expect("turn/start row")
        .clone();
    assert_eq!(
        (
            turn["seen"].as_u64(),
            turn["valid"].as_u64(),
            turn["problems"].as_u64()
        ),
        (Some(2), Some(1), Some(1)),
        "{turn}"
    );

    std::fs::write(
        dir.path().join("conformance.jsonl"),
        format!("{}\n", log.lines().next().expect("line")),
    )
    .expect("write");
    let (code, _, stderr) = report(false);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("nothing checked yet"), "{stderr}");
}

/// Operator logs (`-v`): the endpoint tells who it turned away and why (never a token), and
/// each client connection's opening and closing; a refusal repeated is printed once and
/// counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_logs_refusals_connects_and_disconnects_at_info() {
    use std::io::Read as _;
    let dir = tempfile::tempdir().expect("dir");
    let fake = dir.path().join("fake-codex");
    std::fs::write(&fake, "#!/bin/sh\nexec cat\n").expect("fake");
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let token = dir.path().join("token");
    std::fs::write(&token, format!("{}\n", crate::endpoint::TOKEN)).expect("token");
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let mut child = clawbridge()
        .args([
            "-v",
            "app-server",
            "--listen",
            "ws://127.0.0.1:0",
            "--offline",
            "--no-check",
        ])
        .arg("--codex-bin")
        .arg(&fake)
        .arg("--token-file")
        .arg(&token)
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("endpoint");
    let mut address = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut address)
        .expect("address");
    let addr: std::net::SocketAddr = address.trim().parse().expect("the bound address");
    // A client with a stale token knocking again and again: one line and a count.
    for _ in 0..5 {
        let (status, _) =
            crate::endpoint::http_get(addr, "/status", Some("not-the-token-0123456789")).await;
        assert_eq!(status, 401);
    }
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let client = crate::endpoint::ws_client(stream, &addr.to_string(), crate::endpoint::TOKEN)
        .await
        .expect("upgraded");
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(client);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pid = child.id().to_string();
    let _ = std::process::Command::new("kill").arg(&pid).status();
    let _ = child.wait();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("stderr");
    assert_eq!(
        stderr.matches("refused a request: 401").count(),
        2,
        "the refusal once, then its count at the end: {stderr}"
    );
    assert!(
        stderr
            .lines()
            .any(|line| line.contains("refused a request: 401")
                && line.ends_with("(4 times more, not shown)")),
        "{stderr}"
    );
    assert!(
        !stderr.contains("not-the-token"),
        "no token in the log: {stderr}"
    );
    assert!(
        stderr.contains("client connection 1 opened (operator)"),
        "{stderr}"
    );
    assert!(stderr.contains("client connection 1 closed"), "{stderr}");
}

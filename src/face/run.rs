//! `clawbridge run`'s output: the turn's events as they happen, on stdout (JSON lines with
//! `--json`, else the readable transcript: the agent's text on stdout, the rest on stderr), then
//! the closing line. The turn itself is the app layer's (`pairing::run_turn`).

use std::path::Path;

use crate::TurnEvent;

/// `clawbridge run`: the turn's events on stdout as they happen (JSON lines with `json`, else
/// the readable transcript: the agent's text on stdout, the rest on stderr), then the closing
/// line. True when the turn completed.
pub async fn run_to_stdout(
    run_path: &Path,
    json: bool,
    settings: &crate::pairing::PairingSettings,
) -> Result<bool, crate::PairingError> {
    use std::io::Write as _;
    let mut out = std::io::stdout();
    let mut write_failed = false;
    let mut line = Vec::with_capacity(4096);
    let mut transcript = crate::pairing::HumanTranscript::default();
    let mut observer = |event: TurnEvent<'_>| {
        line.clear();
        if json {
            crate::RunEvent::write_json_line(&event, &mut line);
        } else {
            let (stdout, stderr) = transcript.event(&event);
            eprint!("{stderr}");
            line.extend_from_slice(stdout.as_bytes());
        }
        // Each event is written (and flushed) as it happens: a consumer streams them.
        if !line.is_empty() && !write_failed {
            write_failed = out.write_all(&line).and_then(|()| out.flush()).is_err();
        }
    };
    let report = crate::pairing::run_turn(run_path, settings, &mut observer).await?;
    if json {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", report.turn_end().to_value());
        let _ = out.flush();
    } else {
        eprint!("{}", transcript.finish(&report));
    }
    Ok(report.status == crate::TurnStatus::Completed)
}

//! The log on stderr, with repeats folded.
//!
//! A long-lived endpoint can hit the same condition many times in a row: a live capture whose
//! upstream is down warned once per retried model request (36 identical lines for one turn),
//! a client with a stale token is refused on every reconnect. An operator needs the first line
//! and a count, not the flood. So each formatted event is compared with the lines printed in
//! the last [`WINDOW`]: an identical one is counted instead of printed, and the count is said
//! when the line comes back after the window ("also N times in the 60 s before"), when it is
//! pushed out of the bounded memory, and when the process ends ([`flush`]).
//!
//! Events are whole lines here (the formatter writes each event in one call); a line longer
//! than [`MAX_LINE`] is printed as it is and not remembered, and at most [`REMEMBERED`] lines
//! are remembered, so the memory stays bounded however long the process runs.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long an identical line is folded into the first one.
pub const WINDOW: Duration = Duration::from_secs(60);
/// Lines remembered at once (the oldest is forgotten first, its count said).
pub const REMEMBERED: usize = 128;
/// Longer lines are not folded.
pub const MAX_LINE: usize = 4096;

struct Seen {
    line: Vec<u8>,
    shown_at: Instant,
    folded: u64,
}

/// The lines printed lately and how many copies of each were held back.
#[derive(Default)]
pub struct Repeats {
    seen: VecDeque<Seen>,
}

impl Repeats {
    /// What to print for `line` at `now` (nothing while it repeats within the window).
    pub fn admit(&mut self, line: &[u8], now: Instant) -> Vec<u8> {
        if line.len() > MAX_LINE {
            return line.to_vec();
        }
        let wanted = without_time(line);
        if let Some(at) = self
            .seen
            .iter()
            .position(|seen| without_time(&seen.line) == wanted)
        {
            let seen = &mut self.seen[at];
            if now.saturating_duration_since(seen.shown_at) < WINDOW {
                seen.folded += 1;
                return Vec::new();
            }
            let folded = std::mem::take(&mut seen.folded);
            seen.shown_at = now;
            seen.line = line.to_vec();
            return if folded == 0 {
                line.to_vec()
            } else {
                with_note(
                    line,
                    &format!(
                        "also {} in the {} s before",
                        times(folded),
                        WINDOW.as_secs()
                    ),
                )
            };
        }
        let mut out = Vec::new();
        if self.seen.len() >= REMEMBERED {
            if let Some(oldest) = self.seen.pop_front() {
                out.extend(summary(&oldest));
            }
        }
        self.seen.push_back(Seen {
            line: line.to_vec(),
            shown_at: now,
            folded: 0,
        });
        out.extend_from_slice(line);
        out
    }

    /// The counts still held back, one line each (at the end of the process).
    pub fn drain(&mut self) -> Vec<u8> {
        self.seen
            .drain(..)
            .flat_map(|seen| summary(&seen))
            .collect()
    }
}

fn summary(seen: &Seen) -> Vec<u8> {
    if seen.folded == 0 {
        return Vec::new();
    }
    with_note(
        &seen.line,
        &format!("{} more, not shown", times(seen.folded)),
    )
}

fn times(count: u64) -> String {
    if count == 1 {
        "once".to_string()
    } else {
        format!("{count} times")
    }
}

/// `line` without its timestamp (RFC 3339, UTC: the text format's first word, colour codes
/// around it or not; the JSON format's first field): two lines that differ only in their
/// time are the same line.
fn without_time(line: &[u8]) -> &[u8] {
    const JSON: &[u8] = b"{\"timestamp\":\"";
    if let Some(rest) = line.strip_prefix(JSON) {
        return match rest.windows(2).position(|pair| pair == b"\",") {
            Some(end) => &rest[end + 2..],
            None => line,
        };
    }
    let head = &line[..line.len().min(64)];
    let digit = |at: usize| head.get(at).is_some_and(u8::is_ascii_digit);
    let start = (0..head.len()).find(|&at| {
        (0..4).all(|offset| digit(at + offset))
            && head.get(at + 4) == Some(&b'-')
            && head.get(at + 10) == Some(&b'T')
    });
    let end = start.and_then(|start| {
        head[start..]
            .iter()
            .position(|byte| *byte == b'Z')
            .map(|z| start + z + 1)
    });
    match end {
        Some(end) => &line[end..],
        None => line,
    }
}

/// `line` with `(note)` before its newline.
fn with_note(line: &[u8], note: &str) -> Vec<u8> {
    let body = line.strip_suffix(b"\n").unwrap_or(line);
    let mut out = body.to_vec();
    out.extend_from_slice(format!(" ({note})\n").as_bytes());
    out
}

static REPEATS: Mutex<Option<Repeats>> = Mutex::new(None);

/// stderr, through the process's [`Repeats`].
pub struct Stderr;

impl Write for Stderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let out = {
            let mut repeats = REPEATS
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            repeats
                .get_or_insert_with(Repeats::default)
                .admit(buf, Instant::now())
        };
        if !out.is_empty() {
            std::io::stderr().lock().write_all(&out)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// Say the counts still held back (call once, as the process ends).
pub fn flush() {
    let out = {
        let mut repeats = REPEATS
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        repeats.as_mut().map(Repeats::drain).unwrap_or_default()
    };
    if !out.is_empty() {
        let _ = std::io::stderr().lock().write_all(&out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(bytes: Vec<u8>) -> String {
        String::from_utf8(bytes).expect("utf-8")
    }

    /// Protection: an identical line within the window is counted, not printed; the count is
    /// said when the line comes back later and at the end; other lines pass between.
    #[test]
    fn repeats_are_counted_not_printed() {
        let mut repeats = Repeats::default();
        let start = Instant::now();
        let warn = b" WARN upstream down\n";
        assert_eq!(text(repeats.admit(warn, start)), " WARN upstream down\n");
        for second in 1..=35 {
            assert!(repeats
                .admit(warn, start + Duration::from_secs(second / 2))
                .is_empty());
        }
        assert_eq!(
            text(repeats.admit(b" INFO other\n", start)),
            " INFO other\n"
        );
        assert_eq!(
            text(repeats.admit(warn, start + WINDOW + Duration::from_secs(1))),
            " WARN upstream down (also 35 times in the 60 s before)\n"
        );
        assert!(repeats
            .admit(warn, start + WINDOW + Duration::from_secs(2))
            .is_empty());
        assert_eq!(
            text(repeats.drain()),
            " WARN upstream down (once more, not shown)\n"
        );
        assert!(repeats.drain().is_empty());
    }

    /// The memory is bounded: past [`REMEMBERED`] lines the oldest is forgotten, its count
    /// said first; long lines are never remembered.
    #[test]
    fn lines_that_differ_in_their_time_only_are_repeats() {
        let mut repeats = Repeats::default();
        let now = Instant::now();
        let first = b"2026-12-05T21:54:47.658176Z  WARN upstream down\n";
        let second = b"2026-12-05T21:54:48.000001Z  WARN upstream down\n";
        let coloured = b"\x1b[2m2026-12-05T21:54:49.1Z\x1b[0m  WARN upstream down\n";
        assert_eq!(repeats.admit(first, now), first.to_vec());
        assert!(repeats.admit(second, now).is_empty());
        let other = b"2026-12-05T21:54:49.000001Z  WARN upstream up\n";
        assert_eq!(repeats.admit(other, now), other.to_vec());
        let json_a =
            br#"{"timestamp":"2026-12-05T21:54:47.1Z","level":"WARN","fields":{"message":"x"}}"#;
        let json_b =
            br#"{"timestamp":"2026-12-05T21:55:47.1Z","level":"WARN","fields":{"message":"x"}}"#;
        assert_eq!(repeats.admit(json_a, now), json_a.to_vec());
        assert!(repeats.admit(json_b, now).is_empty());
        assert_eq!(without_time(coloured), b"\x1b[0m  WARN upstream down\n");
    }

    #[test]
    fn the_memory_is_bounded() {
        let mut repeats = Repeats::default();
        let now = Instant::now();
        repeats.admit(b"first\n", now);
        repeats.admit(b"first\n", now);
        for n in 0..REMEMBERED - 1 {
            repeats.admit(format!("line {n}\n").as_bytes(), now);
        }
        assert_eq!(repeats.seen.len(), REMEMBERED);
        assert_eq!(
            text(repeats.admit(b"one too many\n", now)),
            "first (once more, not shown)\none too many\n"
        );
        assert_eq!(repeats.seen.len(), REMEMBERED);
        let long = vec![b'x'; MAX_LINE + 1];
        assert_eq!(repeats.admit(&long, now).len(), long.len());
        assert_eq!(repeats.admit(&long, now).len(), long.len());
    }
}

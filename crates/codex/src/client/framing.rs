//! Line framing for the app-server stdio stream (docs/codex-wire.md §2).
//!
//! One JSON object per `\n`-terminated line (a trailing `\r` is tolerated). Three kinds of damage
//! are survived: a raw newline inside a JSON string splits a message over two lines (the pieces
//! are re-joined, string-aware, restoring the newline as `\n`); non-JSON lines such as banners are
//! skipped and logged; a line over the frame cap is discarded up to the next newline and reported
//! with whatever request id its prefix carries, so the matching pending request can fail.

use tokio::io::{AsyncRead, AsyncReadExt};

use crate::protocol::wire::{decode, decode_slice, Incoming, RequestId};

/// Default frame cap: 64 MiB.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 64 * 1024 * 1024;
/// How many pieces of one message may be re-joined.
const MAX_FRAGMENTS: usize = 64;
/// How many skipped lines are logged individually.
const MAX_LOGGED_SKIPS: usize = 20;
/// How much of an oversized line is kept to find its id.
const ID_PREFIX_BYTES: usize = 512;
const READ_CHUNK: usize = 1024 * 1024;
/// Lines at least this long are moved out of the read buffer rather than copied.
const BIG_LINE_BYTES: usize = 4 * 1024 * 1024;

/// What the reader produced.
#[derive(Debug)]
pub enum Frame {
    Message(Incoming),
    /// A line over the cap was dropped; `id` is the request id its prefix carried, if any.
    Oversized {
        id: Option<RequestId>,
        bytes: usize,
    },
}

/// Counters for diagnostics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameStats {
    pub messages: u64,
    pub skipped_lines: u64,
    pub rejoined: u64,
    pub oversized: u64,
}

/// Reads frames from any byte stream.
pub struct FrameReader<R> {
    reader: R,
    buf: Vec<u8>,
    /// Start of the unconsumed part of `buf`.
    start: usize,
    /// Where the newline search resumes.
    scan: usize,
    max_frame: usize,
    fragment: Option<(String, usize)>,
    /// Set while an oversized line is being discarded: (prefix, bytes seen).
    discarding: Option<(Vec<u8>, usize)>,
    eof: bool,
    pub stats: FrameStats,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    pub fn new(reader: R, max_frame: usize) -> Self {
        Self {
            reader,
            buf: Vec::with_capacity(READ_CHUNK),
            start: 0,
            scan: 0,
            max_frame,
            fragment: None,
            discarding: None,
            eof: false,
            stats: FrameStats::default(),
        }
    }

    /// True when a complete line is already buffered (the next `next()` needs no read).
    pub fn has_buffered_line(&self) -> bool {
        self.discarding.is_none() && memchr::memchr(b'\n', &self.buf[self.scan..]).is_some()
    }

    /// The next frame, or `None` at end of stream.
    pub async fn next(&mut self) -> std::io::Result<Option<Frame>> {
        loop {
            if let Some(offset) = memchr::memchr(b'\n', &self.buf[self.scan..]) {
                let end = self.scan + offset;
                let line_start = self.start;
                self.start = end + 1;
                self.scan = self.start;
                if let Some((mut prefix, seen)) = self.discarding.take() {
                    let total = seen + (end - line_start);
                    let tail = &self.buf[line_start..end];
                    let room = ID_PREFIX_BYTES.saturating_sub(prefix.len());
                    prefix.extend_from_slice(&tail[..tail.len().min(room)]);
                    self.stats.oversized += 1;
                    return Ok(Some(Frame::Oversized {
                        id: id_from_prefix(&prefix),
                        bytes: total,
                    }));
                }
                if end - line_start > self.max_frame {
                    let prefix = self.buf
                        [line_start..line_start + ID_PREFIX_BYTES.min(end - line_start)]
                        .to_vec();
                    self.stats.oversized += 1;
                    return Ok(Some(Frame::Oversized {
                        id: id_from_prefix(&prefix),
                        bytes: end - line_start,
                    }));
                }
                let frame = if end - line_start >= BIG_LINE_BYTES && self.fragment.is_none() {
                    // Hand the buffer itself over instead of copying a huge line out of it.
                    let mut line = std::mem::take(&mut self.buf);
                    self.buf = line.split_off(end + 1);
                    line.truncate(end);
                    line.drain(..line_start);
                    self.start = 0;
                    self.scan = 0;
                    handle_owned_line(line, &mut self.fragment, &mut self.stats, self.max_frame)
                } else {
                    handle_line(
                        &self.buf[line_start..end],
                        &mut self.fragment,
                        &mut self.stats,
                        self.max_frame,
                    )
                };
                if let Some(frame) = frame {
                    return Ok(Some(frame));
                }
                continue;
            }
            self.scan = self.buf.len();
            // No newline yet: an over-cap partial line switches to discard mode.
            let pending = self.buf.len() - self.start;
            if pending > self.max_frame {
                let (mut prefix, seen) = self.discarding.take().unwrap_or_default();
                let chunk = &self.buf[self.start..];
                let room = ID_PREFIX_BYTES.saturating_sub(prefix.len());
                prefix.extend_from_slice(&chunk[..chunk.len().min(room)]);
                self.discarding = Some((prefix, seen + pending));
                self.buf.clear();
                self.start = 0;
                self.scan = 0;
            } else if let Some((prefix, seen)) = self.discarding.take() {
                // Keep discarding without holding the bytes.
                self.discarding = Some((prefix, seen + pending));
                self.buf.clear();
                self.start = 0;
                self.scan = 0;
            }
            if self.eof {
                if self.start < self.buf.len() {
                    let line_start = self.start;
                    self.start = self.buf.len();
                    self.scan = self.start;
                    let frame = handle_line(
                        &self.buf[line_start..],
                        &mut self.fragment,
                        &mut self.stats,
                        self.max_frame,
                    );
                    if let Some(frame) = frame {
                        return Ok(Some(frame));
                    }
                }
                return Ok(None);
            }
            // Compact, then read more.
            if self.start > 0 {
                self.buf.drain(..self.start);
                self.scan -= self.start;
                self.start = 0;
            }
            self.buf.reserve(READ_CHUNK);
            let read = (&mut self.reader)
                .take(READ_CHUNK as u64)
                .read_buf(&mut self.buf)
                .await?;
            if read == 0 {
                self.eof = true;
            }
        }
    }
}

fn skip(stats: &mut FrameStats, line: &[u8], why: &str) {
    stats.skipped_lines += 1;
    if stats.skipped_lines as usize <= MAX_LOGGED_SKIPS {
        let shown = String::from_utf8_lossy(&line[..line.len().min(200)]);
        tracing::warn!("app-server stdout: skipped {why}: {shown}");
    }
}

/// Decode a line we own (a huge one moved out of the read buffer).
fn handle_owned_line(
    mut line: Vec<u8>,
    fragment: &mut Option<(String, usize)>,
    stats: &mut FrameStats,
    max_frame: usize,
) -> Option<Frame> {
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    match String::from_utf8(line) {
        Ok(text) if text.trim_start().starts_with('{') => match decode(text) {
            Ok(message) => {
                stats.messages += 1;
                Some(Frame::Message(message))
            }
            Err(error) => {
                skip(
                    stats,
                    b"<large line>",
                    &format!("an undecodable line ({error})"),
                );
                None
            }
        },
        Ok(text) => handle_line(text.as_bytes(), fragment, stats, max_frame),
        Err(error) => {
            skip(stats, &error.into_bytes()[..0], "a line that is not UTF-8");
            None
        }
    }
}

/// Decode one line (borrowed from the read buffer; the message keeps the only copy).
fn handle_line(
    raw: &[u8],
    fragment: &mut Option<(String, usize)>,
    stats: &mut FrameStats,
    max_frame: usize,
) -> Option<Frame> {
    let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
    let Some(text) = clawbridge_support::text::utf8(raw) else {
        skip(stats, raw, "a line that is not UTF-8");
        return None;
    };
    let joined;
    let (line, pieces): (&str, usize) = match fragment.take() {
        Some((mut text_so_far, pieces)) => {
            text_so_far.push_str("\\n");
            text_so_far.push_str(text);
            joined = text_so_far;
            (joined.as_str(), pieces + 1)
        }
        None => {
            let trimmed = text.trim_start();
            if trimmed.is_empty() {
                return None;
            }
            if !trimmed.starts_with('{') {
                skip(stats, raw, "a non-JSON line");
                return None;
            }
            (text, 1)
        }
    };
    match decode_slice(line) {
        Ok(message) => {
            stats.messages += 1;
            if pieces > 1 {
                stats.rejoined += 1;
            }
            Some(Frame::Message(message))
        }
        Err(error) if error.is_unterminated_string() => {
            if pieces < MAX_FRAGMENTS && line.len() <= max_frame {
                *fragment = Some((line.to_string(), pieces));
            } else {
                skip(stats, line.as_bytes(), "an unterminated message");
            }
            None
        }
        Err(error) => {
            skip(
                stats,
                line.as_bytes(),
                &format!("an undecodable line ({error})"),
            );
            None
        }
    }
}

/// Find `"id": <int or string>` near the start of a truncated frame.
fn id_from_prefix(prefix: &[u8]) -> Option<RequestId> {
    let text = String::from_utf8_lossy(prefix);
    let at = text.find("\"id\"")?;
    let rest = text[at + 4..].trim_start().strip_prefix(':')?.trim_start();
    if let Some(string) = rest.strip_prefix('"') {
        let end = string.find('"')?;
        return Some(RequestId::String(string[..end].to_string()));
    }
    let digits: String = rest
        .chars()
        .take_while(|ch| ch.is_ascii_digit() || *ch == '-')
        .collect();
    digits.parse().ok().map(RequestId::Integer)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn frames(input: &[u8], cap: usize) -> Vec<Frame> {
        let mut reader = FrameReader::new(input, cap);
        let mut out = Vec::new();
        while let Some(frame) = reader.next().await.expect("read") {
            out.push(frame);
        }
        out
    }

    fn method(frame: &Frame) -> Option<&str> {
        match frame {
            Frame::Message(message) => message.method(),
            Frame::Oversized { .. } => None,
        }
    }

    #[tokio::test]
    async fn banners_crlf_and_raw_newlines() {
        let input = b"codex banner v1\r\n{\"method\":\"a\",\"params\":{\"text\":\"line one\nline two\"}}\r\n\n{\"method\":\"b\"}";
        let out = frames(input, 1024).await;
        assert_eq!(out.len(), 2);
        assert_eq!(method(&out[0]), Some("a"));
        let Frame::Message(message) = &out[0] else {
            panic!()
        };
        let params: serde_json::Value = message.params().expect("params").expect("json");
        assert_eq!(params["text"], "line one\nline two");
        assert_eq!(
            method(&out[1]),
            Some("b"),
            "last line without newline at EOF"
        );
    }

    #[tokio::test]
    async fn oversized_line_reports_its_id_and_resyncs() {
        let big = format!(
            "{{\"id\":7,\"result\":{{\"blob\":\"{}\"}}}}\n{{\"method\":\"after\"}}\n",
            "x".repeat(5000)
        );
        let out = frames(big.as_bytes(), 1000).await;
        assert!(
            matches!(&out[0], Frame::Oversized { id: Some(RequestId::Integer(7)), bytes } if *bytes > 5000)
        );
        assert_eq!(method(&out[1]), Some("after"));
        assert_eq!(
            id_from_prefix(br#"{"id": "abc-1", "result"#),
            Some(RequestId::String("abc-1".into()))
        );
    }

    #[tokio::test]
    async fn huge_line_split_across_reads_is_discarded_without_buffering() {
        let mut big = b"{\"id\":\"s1\",\"result\":\"".to_vec();
        big.extend(std::iter::repeat_n(b'y', 3 * READ_CHUNK));
        big.extend_from_slice(b"\"}\n{\"method\":\"next\"}\n");
        let out = frames(&big, 2 * READ_CHUNK).await;
        assert!(
            matches!(&out[0], Frame::Oversized { id: Some(RequestId::String(id)), .. } if id == "s1")
        );
        assert_eq!(method(&out[1]), Some("next"));
    }
}

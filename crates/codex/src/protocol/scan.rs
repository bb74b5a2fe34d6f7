//! One pass over a frame: validate the JSON and find what the transport and the driver read.
//!
//! Nearly every line Codex sends during a turn is a delta notification of a few hundred bytes,
//! and clawbridge reads only a handful of its fields: the envelope (`id`, `method`, where
//! `params`/`result`/`error` start and end) and, inside `params`, the thread and turn it belongs
//! to and the few facts the turn driver acts on ([`Peek`]). A generic parser reads such a line
//! twice (the envelope, then the params' fields) and copies the params out of the line; this
//! scanner walks the bytes once, validates them as JSON as strictly as `serde_json` does, and
//! returns byte ranges into the line, so nothing is copied and no field is built that nobody
//! reads. Strings that carry escapes (rare in ids and methods) are decoded on demand.
//!
//! The rules are serde_json's, field for field, and a property test holds the two together
//! (`scan_agrees_with_serde_json` in this module's tests): what `serde_json` rejects is rejected
//! (control characters in strings, bad escapes, bad numbers, trailing text, nesting past 128),
//! the envelope's fields are typed as the former `Envelope` struct typed them (a duplicated
//! envelope field is an error; `null` reads as absent), and the peeked fields are lenient: a value
//! of another JSON type reads as absent, and a duplicated peeked key empties the whole peek.
//! A line that ends inside a string is [`ScanError::UnterminatedString`]: the framer's cue that
//! a raw newline split a message.

use std::borrow::Cow;
use std::ops::Range;

use super::wire::{RequestId, RpcError};

/// Nesting deeper than this is refused (serde_json's limit), so a hostile line cannot exhaust
/// the stack.
const MAX_DEPTH: usize = 128;

/// Why a line is not valid JSON of a message's shape.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScanError {
    /// The text ended inside a string.
    #[error("EOF while parsing a string")]
    UnterminatedString,
    /// Not JSON: what was wrong, and the byte offset.
    #[error("{what} at byte {at}")]
    Syntax { what: &'static str, at: usize },
    /// JSON, but an envelope field of the wrong type, or given twice.
    #[error("{0}")]
    Field(String),
}

/// A string's contents (the bytes between its quotes) and whether it has escapes to decode.
/// Offsets are `u32` (a line is refused past 4 GiB) so that a message stays small to move.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Text {
    start: u32,
    end: u32,
    escaped: bool,
}

impl Text {
    fn new(range: Range<usize>, escaped: bool) -> Text {
        // scan_line refuses lines whose offsets do not fit.
        Text {
            start: u32::try_from(range.start).unwrap_or(u32::MAX),
            end: u32::try_from(range.end).unwrap_or(u32::MAX),
            escaped,
        }
    }

    /// The decoded string, from the text it was scanned in. An escaped string was checked to
    /// decode when it was scanned.
    pub fn read<'a>(&self, source: &'a str) -> Cow<'a, str> {
        let Some(contents) = source.get(self.range()) else {
            return Cow::Borrowed("");
        };
        if self.escaped {
            Cow::Owned(unescape(source, &self.range()).unwrap_or_default())
        } else {
            Cow::Borrowed(contents)
        }
    }

    /// The raw contents' byte range.
    pub fn range(&self) -> Range<usize> {
        self.start as usize..self.end as usize
    }

    /// True when the string has no escapes (its range is its text).
    pub fn is_plain(&self) -> bool {
        !self.escaped
    }
}

/// Decode an escaped string whose contents are `range` in `source` (the quotes are around it).
fn unescape(source: &str, range: &Range<usize>) -> Option<String> {
    let quoted = source.get(range.start.checked_sub(1)?..range.end + 1)?;
    serde_json::from_str(quoted).ok()
}

/// What clawbridge reads of a notification's params; ranges are into the params text. A field
/// is absent when missing or of another JSON type, and every field is when any peeked key was
/// given twice. Small on purpose (every message carries one): the thread and turn every message
/// names, and the rarer facts boxed, present only when the params had any of them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Peek {
    /// `threadId`, else `thread.id`.
    pub thread: Option<Text>,
    /// `turnId`, else `turn.id`.
    pub turn: Option<Text>,
    pub detail: Option<Box<Detail>>,
}

/// The facts only a few methods carry (`turn/completed`, `item/completed`, `error`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Detail {
    /// `turn.status`.
    pub turn_status: Option<Text>,
    /// `turn.error.message`.
    pub turn_error_message: Option<Text>,
    /// `item.type`.
    pub item_type: Option<Text>,
    /// `item.text`.
    pub item_text: Option<Text>,
    /// `error.message`.
    pub error_message: Option<Text>,
}

/// Every peeked field while the params are scanned.
#[derive(Default)]
struct Fields {
    thread_id: Option<Text>,
    turn_id: Option<Text>,
    thread_ref_id: Option<Text>,
    turn_ref_id: Option<Text>,
    detail: Detail,
}

impl Fields {
    fn into_peek(self) -> Peek {
        let detail = self.detail;
        let any = detail.turn_status.is_some()
            || detail.turn_error_message.is_some()
            || detail.item_type.is_some()
            || detail.item_text.is_some()
            || detail.error_message.is_some();
        Peek {
            thread: self.thread_id.or(self.thread_ref_id),
            turn: self.turn_id.or(self.turn_ref_id),
            detail: any.then(|| Box::new(detail)),
        }
    }
}

/// A message's envelope: ranges into the line.
#[derive(Debug, Default)]
pub struct Envelope {
    pub id: Option<RequestId>,
    pub method: Option<Text>,
    /// The params' range and what was peeked in them (`null` reads as absent).
    pub params: Option<(Range<usize>, Peek)>,
    /// The result's range (`null` reads as absent).
    pub result: Option<Range<usize>>,
    pub error: Option<RpcError>,
}

/// Scan one line: the envelope of a JSON-RPC message and the peeked fields of its params.
pub fn scan_line(line: &str) -> Result<Envelope, ScanError> {
    if u32::try_from(line.len()).is_err() {
        return Err(ScanError::Field("a line over 4 GiB".into()));
    }
    let mut scanner = Scanner::new(line);
    scanner.whitespace();
    if scanner.byte() != Some(b'{') {
        return Err(scanner.syntax("expected a JSON object"));
    }
    let mut envelope = Envelope::default();
    let mut seen = 0u8;
    let mut error_range = None;
    scanner.object(|scanner, key| {
        let (bit, name) = match scanner.key(&key).as_deref() {
            Some("id") => (1, "id"),
            Some("method") => (2, "method"),
            Some("params") => (4, "params"),
            Some("result") => (8, "result"),
            Some("error") => (16, "error"),
            Some(_) => return scanner.value(),
            None => return Err(ScanError::Field("a key with an invalid escape".into())),
        };
        if seen & bit != 0 {
            return Err(ScanError::Field(format!("duplicate field `{name}`")));
        }
        seen |= bit;
        if scanner.null()? {
            return Ok(());
        }
        let start = scanner.pos;
        match bit {
            1 => envelope.id = Some(scanner.request_id()?),
            2 => {
                if scanner.byte() != Some(b'"') {
                    scanner.value()?;
                    return Err(ScanError::Field(
                        "invalid type: method is not a string".into(),
                    ));
                }
                let text = scanner.string()?;
                if text.escaped && unescape(line, &text.range()).is_none() {
                    return Err(ScanError::Field("method: an invalid escape".into()));
                }
                envelope.method = Some(text);
            }
            4 => {
                // The params are scanned on their own, so the peeked ranges are theirs.
                let mut params = scanner.rest();
                let peek = params.peek()?;
                scanner.pos += params.pos;
                envelope.params = Some((start..scanner.pos, peek));
            }
            8 => {
                scanner.value()?;
                envelope.result = Some(start..scanner.pos);
            }
            _ => {
                scanner.value()?;
                error_range = Some(start..scanner.pos);
            }
        }
        Ok(())
    })?;
    scanner.end()?;
    if let Some(range) = error_range {
        // Errors are rare: typed by serde from their own text.
        envelope.error = Some(
            serde_json::from_str(&line[range])
                .map_err(|error| ScanError::Field(format!("error: {error}")))?,
        );
    }
    Ok(envelope)
}

/// Scan a params text alone (params built by clawbridge, or given by a test): what
/// [`scan_line`] peeks, with ranges into `params`.
pub fn peek(params: &str) -> Result<Peek, ScanError> {
    if u32::try_from(params.len()).is_err() {
        return Err(ScanError::Field("params over 4 GiB".into()));
    }
    let mut scanner = Scanner::new(params);
    scanner.whitespace();
    let peek = scanner.peek()?;
    scanner.end()?;
    Ok(peek)
}

/// What the endpoint reads of a client's request params before it decides anything by them:
/// the thread they name (`threadId`, a string) and the first top-level key they give twice.
/// Codex reads params that give a key twice too, keeping the last value; anything decided by a
/// key (the thread a request is about, and so whose it is) must read what Codex will, so the
/// endpoint refuses such params before it reads them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestPeek {
    pub thread: Option<String>,
    pub twice: Option<String>,
}

/// [`RequestPeek`] of a request's params, in one pass of the scanner. Params that are not an
/// object, not JSON, or have a key or `threadId` that does not decode give nothing: Codex
/// refuses them itself.
pub fn request_peek(params: &str) -> RequestPeek {
    if u32::try_from(params.len()).is_err() {
        return RequestPeek::default();
    }
    let mut scanner = Scanner::new(params);
    scanner.whitespace();
    if scanner.byte() != Some(b'{') {
        return RequestPeek::default();
    }
    let mut peek = RequestPeek::default();
    let mut seen = std::collections::HashSet::new();
    let mut undecodable = false;
    let walked = scanner
        .object(|scanner, key| {
            let Some(name) = scanner.key(&key) else {
                undecodable = true;
                return scanner.value();
            };
            if name == "threadId" {
                peek.thread = scanner
                    .lenient_text(&mut undecodable)?
                    .map(|text| text.read(scanner.text).into_owned());
            } else {
                scanner.value()?;
            }
            if peek.twice.is_none() && !seen.insert(name.clone()) {
                peek.twice = Some(name.into_owned());
            }
            Ok(())
        })
        .and_then(|()| scanner.end());
    if walked.is_err() || undecodable {
        return RequestPeek::default();
    }
    peek
}

/// The bytes that end a run of plain string contents: a quote, a backslash, a control character.
const STRING_STOPS: [bool; 256] = {
    let mut stops = [false; 256];
    let mut byte = 0;
    while byte < 0x20 {
        stops[byte] = true;
        byte += 1;
    }
    stops[b'"' as usize] = true;
    stops[b'\\' as usize] = true;
    stops
};

/// True when no byte is below 0x20 (no control character can be inside a string). No early
/// exit: the compiler turns this into a few vector compares per 32 bytes.
fn free_of_controls(bytes: &[u8]) -> bool {
    bytes
        .iter()
        .fold(0u8, |any, &byte| any | u8::from(byte < 0x20))
        == 0
}

/// A cursor over one JSON text.
struct Scanner<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    depth: usize,
    /// No byte below 0x20 in `bytes`: strings need no control-character check.
    clean: bool,
}

impl<'a> Scanner<'a> {
    fn new(text: &'a str) -> Self {
        Scanner {
            text,
            bytes: text.as_bytes(),
            pos: 0,
            depth: 0,
            clean: free_of_controls(text.as_bytes()),
        }
    }

    /// A scanner over the rest of this one's text (from a value's first byte, an ASCII byte),
    /// at the same depth.
    fn rest(&self) -> Scanner<'a> {
        let text = self.text.get(self.pos..).unwrap_or_default();
        Scanner {
            text,
            bytes: text.as_bytes(),
            pos: 0,
            depth: self.depth,
            clean: self.clean,
        }
    }

    fn byte(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn syntax(&self, what: &'static str) -> ScanError {
        ScanError::Syntax { what, at: self.pos }
    }

    fn whitespace(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.byte() {
            self.pos += 1;
        }
    }

    /// Only whitespace may follow the value.
    fn end(&mut self) -> Result<(), ScanError> {
        self.whitespace();
        if self.pos != self.bytes.len() {
            return Err(self.syntax("trailing characters"));
        }
        Ok(())
    }

    /// A key's text: borrowed, decoded when it has escapes, `None` when those do not decode.
    fn key(&self, key: &Text) -> Option<Cow<'a, str>> {
        if key.escaped {
            unescape(self.text, &key.range()).map(Cow::Owned)
        } else {
            self.text.get(key.range()).map(Cow::Borrowed)
        }
    }

    /// True when a key without escapes is `name` (an escaped key is decoded first).
    fn key_is(&self, key: &Text, name: &str) -> bool {
        if key.escaped {
            return self.key(key).as_deref() == Some(name);
        }
        self.bytes.get(key.range()) == Some(name.as_bytes())
    }

    /// At a value: true (and past it) when it is `null`.
    fn null(&mut self) -> Result<bool, ScanError> {
        if self.byte() == Some(b'n') {
            self.literal(b"null")?;
            return Ok(true);
        }
        Ok(false)
    }

    fn literal(&mut self, word: &'static [u8]) -> Result<(), ScanError> {
        let rest = self.bytes.get(self.pos..).unwrap_or_default();
        if rest.starts_with(word) {
            self.pos += word.len();
            return Ok(());
        }
        if word.starts_with(rest) {
            self.pos = self.bytes.len();
            return Err(self.syntax("EOF while parsing a value"));
        }
        Err(self.syntax("expected a value"))
    }

    /// Skip one value (at its first byte), validating it.
    fn value(&mut self) -> Result<(), ScanError> {
        match self.byte() {
            Some(b'"') => self.string().map(drop),
            Some(b'{') => self.object(|scanner, _| scanner.value()),
            Some(b'[') => self.array(),
            Some(b'-' | b'0'..=b'9') => self.number().map(drop),
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            Some(_) => Err(self.syntax("expected a value")),
            None => Err(self.syntax("EOF while parsing a value")),
        }
    }

    fn enter(&mut self) -> Result<(), ScanError> {
        self.depth += 1;
        if self.depth >= MAX_DEPTH {
            return Err(self.syntax("recursion limit exceeded"));
        }
        self.pos += 1;
        self.whitespace();
        Ok(())
    }

    /// An object (at its `{`): `field` is called at each member's value with the member's key
    /// and must consume the value.
    fn object<F>(&mut self, mut field: F) -> Result<(), ScanError>
    where
        F: FnMut(&mut Self, Text) -> Result<(), ScanError>,
    {
        self.enter()?;
        if self.byte() == Some(b'}') {
            self.pos += 1;
            self.depth -= 1;
            return Ok(());
        }
        loop {
            match self.byte() {
                Some(b'"') => {}
                None => return Err(self.syntax("EOF while parsing an object")),
                Some(_) => return Err(self.syntax("key must be a string")),
            }
            let key = self.string()?;
            self.whitespace();
            match self.byte() {
                Some(b':') => self.pos += 1,
                None => return Err(self.syntax("EOF while parsing an object")),
                Some(_) => return Err(self.syntax("expected `:`")),
            }
            self.whitespace();
            field(self, key)?;
            self.whitespace();
            match self.byte() {
                Some(b',') => {
                    self.pos += 1;
                    self.whitespace();
                }
                Some(b'}') => {
                    self.pos += 1;
                    self.depth -= 1;
                    return Ok(());
                }
                None => return Err(self.syntax("EOF while parsing an object")),
                Some(_) => return Err(self.syntax("expected `,` or `}`")),
            }
        }
    }

    fn array(&mut self) -> Result<(), ScanError> {
        self.enter()?;
        if self.byte() == Some(b']') {
            self.pos += 1;
            self.depth -= 1;
            return Ok(());
        }
        loop {
            self.value()?;
            self.whitespace();
            match self.byte() {
                Some(b',') => {
                    self.pos += 1;
                    self.whitespace();
                }
                Some(b']') => {
                    self.pos += 1;
                    self.depth -= 1;
                    return Ok(());
                }
                None => return Err(self.syntax("EOF while parsing a list")),
                Some(_) => return Err(self.syntax("expected `,` or `]`")),
            }
        }
    }

    /// A number (at its first byte), by JSON's grammar; returns its range.
    fn number(&mut self) -> Result<Range<usize>, ScanError> {
        let start = self.pos;
        if self.byte() == Some(b'-') {
            self.pos += 1;
        }
        match self.byte() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => self.digits(),
            None => return Err(self.syntax("EOF while parsing a value")),
            Some(_) => return Err(self.syntax("invalid number")),
        }
        if self.byte() == Some(b'.') {
            self.pos += 1;
            self.some_digits()?;
        }
        if let Some(b'e' | b'E') = self.byte() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.byte() {
                self.pos += 1;
            }
            self.some_digits()?;
        }
        Ok(start..self.pos)
    }

    fn some_digits(&mut self) -> Result<(), ScanError> {
        match self.byte() {
            Some(b'0'..=b'9') => {
                self.digits();
                Ok(())
            }
            None => Err(self.syntax("EOF while parsing a value")),
            Some(_) => Err(self.syntax("invalid number")),
        }
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.byte() {
            self.pos += 1;
        }
    }

    /// A string (at its opening quote): its contents' range, validated (no control characters,
    /// only JSON's escapes). A line with no control byte at all (what Codex sends: it escapes
    /// them) was found so once, up front; then a short string (a key, an id) is walked byte by
    /// byte and a long one (a delta's text, a 32 MiB response) is skipped with `memchr2`'s SIMD
    /// search for its closing quote or next backslash.
    fn string(&mut self) -> Result<Text, ScanError> {
        // Long enough for an id (a UUID is 36 bytes) to be walked without a call.
        const SHORT: usize = 48;
        let bytes = self.bytes;
        let start = self.pos + 1;
        let mut at = start;
        let mut escaped = false;
        loop {
            let limit = if self.clean {
                bytes.len().min(at + SHORT)
            } else {
                bytes.len()
            };
            let head = bytes.get(at..limit).unwrap_or_default();
            let mut found = head
                .iter()
                .position(|&byte| STRING_STOPS[usize::from(byte)])
                .map(|offset| at + offset);
            if found.is_none() && limit < bytes.len() {
                found = memchr::memchr2(b'"', b'\\', &bytes[limit..]).map(|offset| limit + offset);
            }
            let Some(end) = found else {
                self.pos = bytes.len();
                return Err(ScanError::UnterminatedString);
            };
            match bytes[end] {
                b'"' => {
                    self.pos = end + 1;
                    return Ok(Text::new(start..end, escaped));
                }
                b'\\' => {
                    escaped = true;
                    at = self.escape(end + 1)?;
                }
                _ => {
                    self.pos = end;
                    return Err(self.syntax("control character while parsing a string"));
                }
            }
        }
    }

    /// An escape's body (just past the backslash): where the string goes on.
    fn escape(&mut self, at: usize) -> Result<usize, ScanError> {
        match self.bytes.get(at) {
            None => Err(ScanError::UnterminatedString),
            Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => Ok(at + 1),
            Some(b'u') => {
                // Four bytes are taken before they are judged (a line that ends first is
                // unterminated, whatever those it has), as serde_json does.
                let Some(digits) = self.bytes.get(at + 1..at + 5) else {
                    return Err(ScanError::UnterminatedString);
                };
                if let Some(bad) = digits.iter().position(|digit| !digit.is_ascii_hexdigit()) {
                    self.pos = at + 1 + bad;
                    return Err(self.syntax("invalid escape"));
                }
                Ok(at + 5)
            }
            Some(_) => {
                self.pos = at;
                Err(self.syntax("invalid escape"))
            }
        }
    }

    /// A request id: an integer that fits `i64`, or a string.
    fn request_id(&mut self) -> Result<RequestId, ScanError> {
        let mismatch = || ScanError::Field("id is neither an integer nor a string".into());
        match self.byte() {
            Some(b'"') => {
                let text = self.string()?;
                self.key(&text)
                    .map(|id| RequestId::String(id.into_owned()))
                    .ok_or_else(mismatch)
            }
            Some(b'-' | b'0'..=b'9') => {
                let range = self.number()?;
                let digits = self.text.get(range).unwrap_or_default();
                // serde_json reads `-0` as a float (it keeps the sign): not an integer id.
                if digits == "-0" {
                    return Err(mismatch());
                }
                digits
                    .parse()
                    .map(RequestId::Integer)
                    .map_err(|_| mismatch())
            }
            _ => {
                self.value()?;
                Err(mismatch())
            }
        }
    }

    /// A notification's params (at their first byte): the peeked fields of an object; any other
    /// value is skipped and peeks nothing.
    fn peek(&mut self) -> Result<Peek, ScanError> {
        if self.byte() != Some(b'{') {
            self.value()?;
            return Ok(Peek::default());
        }
        let mut fields = Fields::default();
        let mut broken = false;
        let mut seen = 0u8;
        self.object(|scanner, key| {
            let Some(name) = scanner.key(&key) else {
                broken = true;
                return scanner.value();
            };
            let bit = match name.as_ref() {
                "threadId" => 1,
                "turnId" => 2,
                "thread" => 4,
                "turn" => 8,
                "item" => 16,
                "error" => 32,
                _ => return scanner.value(),
            };
            broken |= seen & bit != 0;
            seen |= bit;
            let detail = &mut fields.detail;
            match bit {
                1 => fields.thread_id = scanner.lenient_text(&mut broken)?,
                2 => fields.turn_id = scanner.lenient_text(&mut broken)?,
                4 => scanner.lenient_object(
                    &mut broken,
                    &mut [("id", &mut fields.thread_ref_id)],
                    None,
                )?,
                8 => scanner.lenient_object(
                    &mut broken,
                    &mut [
                        ("id", &mut fields.turn_ref_id),
                        ("status", &mut detail.turn_status),
                    ],
                    Some(&mut detail.turn_error_message),
                )?,
                16 => scanner.lenient_object(
                    &mut broken,
                    &mut [
                        ("type", &mut detail.item_type),
                        ("text", &mut detail.item_text),
                    ],
                    None,
                )?,
                _ => scanner.lenient_object(
                    &mut broken,
                    &mut [("message", &mut detail.error_message)],
                    None,
                )?,
            }
            Ok(())
        })?;
        if broken {
            tracing::warn!(
                "codex app-server sent params with a repeated or undecodable key; read as empty"
            );
            return Ok(Peek::default());
        }
        Ok(fields.into_peek())
    }

    /// A string field read leniently: a string's text, or absent for any other value. An escape
    /// that does not decode marks the peek broken, as serde's reading did.
    fn lenient_text(&mut self, broken: &mut bool) -> Result<Option<Text>, ScanError> {
        if self.byte() != Some(b'"') {
            self.value()?;
            return Ok(None);
        }
        let text = self.string()?;
        if text.escaped && unescape(self.text, &text.range()).is_none() {
            *broken = true;
        }
        Ok(Some(text))
    }

    /// An object field read leniently: each of `slots`' keys read as a lenient string, and, with
    /// `error_message`, an `error` object's `message`; any other value reads as absent.
    fn lenient_object(
        &mut self,
        broken: &mut bool,
        slots: &mut [(&str, &mut Option<Text>)],
        mut error_message: Option<&mut Option<Text>>,
    ) -> Result<(), ScanError> {
        if self.byte() != Some(b'{') {
            return self.value();
        }
        let mut seen = 0u8;
        self.object(|scanner, key| {
            let index = slots
                .iter()
                .position(|(name, _)| scanner.key_is(&key, name));
            let index = match index {
                Some(index) => index,
                None if error_message.is_some() && scanner.key_is(&key, "error") => slots.len(),
                None => {
                    *broken |= key.escaped && scanner.key(&key).is_none();
                    return scanner.value();
                }
            };
            *broken |= seen & (1 << index) != 0;
            seen |= 1 << index;
            match (slots.get_mut(index), error_message.as_deref_mut()) {
                (Some((_, slot)), _) => **slot = scanner.lenient_text(broken)?,
                (None, Some(slot)) => {
                    scanner.lenient_object(broken, &mut [("message", slot)], None)?
                }
                (None, None) => scanner.value()?,
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    //! The scanner against serde_json: the reference below is how clawbridge read frames before
    //! the scanner (a derived envelope, then a lenient derived peek of the params), kept here as
    //! the oracle.
    use std::borrow::Cow;

    use proptest::prelude::*;
    use serde::Deserialize;
    use serde_json::value::RawValue;

    use super::*;

    #[derive(Deserialize)]
    struct RefEnvelope<'a> {
        #[serde(default)]
        id: Option<RequestId>,
        #[serde(default, borrow)]
        method: Option<Cow<'a, str>>,
        #[serde(default, borrow)]
        params: Option<&'a RawValue>,
        #[serde(default, borrow)]
        result: Option<&'a RawValue>,
        #[serde(default)]
        error: Option<RpcError>,
    }

    /// What the peek means, decoded: the reference and the scanner are compared on this.
    #[derive(Debug, Default, PartialEq)]
    struct Read {
        thread: Option<String>,
        turn: Option<String>,
        turn_status: Option<String>,
        turn_error_message: Option<String>,
        item_type: Option<String>,
        item_text: Option<String>,
        error_message: Option<String>,
    }

    fn read(peek: &Peek, source: &str) -> Read {
        let text = |t: &Option<Text>| t.as_ref().map(|t| t.read(source).into_owned());
        let detail = peek.detail.as_deref().cloned().unwrap_or_default();
        Read {
            thread: text(&peek.thread),
            turn: text(&peek.turn),
            turn_status: text(&detail.turn_status),
            turn_error_message: text(&detail.turn_error_message),
            item_type: text(&detail.item_type),
            item_text: text(&detail.item_text),
            error_message: text(&detail.error_message),
        }
    }

    /// A lenient string: a string, or absent for any other value.
    #[derive(Default)]
    struct Lenient(Option<String>);

    /// As the former reader did: a string is decoded, anything else is skipped undecoded.
    impl<'de> Deserialize<'de> for Lenient {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct Visitor;
            impl<'de> serde::de::Visitor<'de> for Visitor {
                type Value = Lenient;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("any JSON value")
                }
                fn visit_str<E>(self, text: &str) -> Result<Lenient, E> {
                    Ok(Lenient(Some(text.to_string())))
                }
                fn visit_bool<E>(self, _: bool) -> Result<Lenient, E> {
                    Ok(Lenient(None))
                }
                fn visit_i64<E>(self, _: i64) -> Result<Lenient, E> {
                    Ok(Lenient(None))
                }
                fn visit_u64<E>(self, _: u64) -> Result<Lenient, E> {
                    Ok(Lenient(None))
                }
                fn visit_f64<E>(self, _: f64) -> Result<Lenient, E> {
                    Ok(Lenient(None))
                }
                fn visit_unit<E>(self) -> Result<Lenient, E> {
                    Ok(Lenient(None))
                }
                fn visit_seq<A: serde::de::SeqAccess<'de>>(
                    self,
                    mut seq: A,
                ) -> Result<Lenient, A::Error> {
                    while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                    Ok(Lenient(None))
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> Result<Lenient, A::Error> {
                    while map
                        .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                        .is_some()
                    {}
                    Ok(Lenient(None))
                }
            }
            d.deserialize_any(Visitor)
        }
    }

    /// A lenient object: `T` for an object, absent for any other value.
    struct LenientObject<T>(Option<T>);

    impl<T> Default for LenientObject<T> {
        fn default() -> Self {
            LenientObject(None)
        }
    }

    impl<'de, T: serde::de::DeserializeOwned> Deserialize<'de> for LenientObject<T> {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            let raw = Box::<RawValue>::deserialize(d)?;
            if !raw.get().starts_with('{') {
                return Ok(LenientObject(None));
            }
            serde_json::from_str(raw.get())
                .map(|value| LenientObject(Some(value)))
                .map_err(serde::de::Error::custom)
        }
    }

    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct RefPeek {
        thread_id: Lenient,
        turn_id: Lenient,
        thread: LenientObject<RefId>,
        turn: LenientObject<RefTurn>,
        item: LenientObject<RefItem>,
        error: LenientObject<RefError>,
    }

    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct RefId {
        id: Lenient,
    }

    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct RefTurn {
        id: Lenient,
        status: Lenient,
        error: LenientObject<RefError>,
    }

    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct RefItem {
        #[serde(rename = "type")]
        kind: Lenient,
        text: Lenient,
    }

    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct RefError {
        message: Lenient,
    }

    /// The former reading; `None` where it failed only because serde decodes every key of an
    /// object it skips (a lone surrogate in a key nobody reads emptied the whole peek), which the
    /// scanner, decoding only the keys it looks for, reads past on purpose.
    fn reference_peek(params: &str) -> Option<Read> {
        if !params.starts_with('{') {
            return Some(Read::default());
        }
        let peek = match serde_json::from_str::<RefPeek>(params) {
            Ok(peek) => peek,
            Err(error) => {
                let message = error.to_string();
                let undecodable = message.contains("surrogate") || message.contains("hex escape");
                return (!undecodable).then(Read::default);
            }
        };
        let (thread, turn, item, error) = (
            peek.thread.0.unwrap_or_default(),
            peek.turn.0.unwrap_or_default(),
            peek.item.0.unwrap_or_default(),
            peek.error.0.unwrap_or_default(),
        );
        Some(Read {
            thread: peek.thread_id.0.or(thread.id.0),
            turn: peek.turn_id.0.or(turn.id.0),
            turn_status: turn.status.0,
            turn_error_message: turn.error.0.unwrap_or_default().message.0,
            item_type: item.kind.0,
            item_text: item.text.0,
            error_message: error.message.0,
        })
    }

    /// Compare the scanner with the reference on one line.
    fn agree(line: &str) -> Result<(), TestCaseError> {
        // The framer hands over only lines that start with `{` (others are banners); anything
        // else is not a message either way.
        if !line.trim_start().starts_with('{') {
            prop_assert!(scan_line(line).is_err());
            return Ok(());
        }
        let reference = serde_json::from_str::<RefEnvelope<'_>>(line);
        let scanned = scan_line(line);
        match (&reference, &scanned) {
            (Ok(reference), Ok(scanned)) => {
                prop_assert_eq!(&reference.id, &scanned.id, "id of {}", line);
                let method = scanned.method.as_ref().map(|m| m.read(line).into_owned());
                prop_assert_eq!(
                    reference.method.as_deref(),
                    method.as_deref(),
                    "method of {}",
                    line
                );
                let reference_params = reference.params.map(RawValue::get);
                let params = scanned
                    .params
                    .as_ref()
                    .map(|(range, _)| &line[range.clone()]);
                prop_assert_eq!(reference_params, params, "params of {}", line);
                let result = scanned.result.as_ref().map(|range| &line[range.clone()]);
                prop_assert_eq!(
                    reference.result.map(RawValue::get),
                    result,
                    "result of {}",
                    line
                );
                prop_assert_eq!(&reference.error, &scanned.error, "error of {}", line);
                if let (Some(text), Some((_, peek))) = (params, &scanned.params) {
                    if let Some(reference) = reference_peek(text) {
                        prop_assert_eq!(reference, read(peek, text), "peek of {}", line);
                    }
                    let alone = peek_alone(text);
                    prop_assert_eq!(
                        read(&alone, text),
                        read(peek, text),
                        "peek alone of {}",
                        line
                    );
                }
            }
            (Err(reference), Err(scanned)) => {
                let unterminated = reference.is_eof()
                    && reference
                        .to_string()
                        .starts_with("EOF while parsing a string");
                // serde stops at the first value of the wrong type (an `error` that is a list)
                // or key it cannot decode (a lone surrogate in one of the `error` object's keys,
                // which it reads as a struct); the scanner checks the syntax to the line's end,
                // and a line that ends inside a string is a piece of a message split by a raw
                // newline, whatever came before.
                let message = reference.to_string();
                let typed_first = reference.classify() == serde_json::error::Category::Data
                    || message.contains("surrogate")
                    || message.starts_with("unexpected end of hex escape");
                if !(typed_first && *scanned == ScanError::UnterminatedString) {
                    prop_assert_eq!(
                        unterminated,
                        *scanned == ScanError::UnterminatedString,
                        "{} vs {} for {}",
                        reference,
                        scanned,
                        line
                    );
                }
            }
            _ => prop_assert!(
                false,
                "serde_json says {:?}, the scanner {:?}, for {}",
                reference.as_ref().map(|_| "ok"),
                scanned.as_ref().map(|_| "ok"),
                line
            ),
        }
        Ok(())
    }

    fn peek_alone(params: &str) -> Peek {
        peek(params).unwrap_or_default()
    }

    /// Strings as JSON text (with their quotes): plain, escaped, non-ASCII, and broken.
    fn string_text() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            4 => "[a-zA-Z0-9 _/.-]{0,12}",
            1 => Just("\\\"".to_string()),
            1 => Just("\\\\".to_string()),
            1 => Just("\\n".to_string()),
            1 => Just("\\u00e9".to_string()),
            1 => Just("\\ud83d\\ude00".to_string()),
            1 => Just("é中😀".to_string()),
            1 => Just("\\ud800".to_string()),
            1 => Just("\\x".to_string()),
            1 => Just("\\u12".to_string()),
            1 => Just("\t".to_string()),
            1 => Just("\u{1}".to_string()),
        ];
        proptest::collection::vec(piece, 0..4).prop_map(|pieces| format!("\"{}\"", pieces.concat()))
    }

    /// A key, often one the scanner looks for.
    fn key_text() -> impl Strategy<Value = String> {
        prop_oneof![
            6 => prop::sample::select(vec![
                "id", "method", "params", "result", "error", "threadId", "turnId", "thread",
                "turn", "item", "type", "text", "status", "message", "code", "data", "delta",
                "emittedAtMs",
            ])
            .prop_map(|key| format!("\"{key}\"")),
            1 => Just("\"thread\\u0049d\"".to_string()),
            1 => Just("\"\\ud800\"".to_string()),
            1 => string_text(),
        ]
    }

    /// JSON-ish text: mostly valid values, with messages' shapes likely.
    fn value_text() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            3 => string_text(),
            1 => prop::sample::select(vec![
                "0", "-0", "7", "-12", "3.5", "1e3", "-2.5E-3", "9223372036854775807",
                "9223372036854775808", "-9223372036854775809", "01", "1.", ".5", "-", "1e",
                "true", "false", "null", "nul", "tru",
            ])
            .prop_map(str::to_string),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4)
                    .prop_map(|items| format!("[{}]", items.join(","))),
                proptest::collection::vec((key_text(), inner), 0..6).prop_map(|members| {
                    let members: Vec<String> = members
                        .into_iter()
                        .map(|(k, v)| format!("{k}:{v}"))
                        .collect();
                    format!("{{{}}}", members.join(","))
                }),
            ]
        })
    }

    /// A line: an object of envelope-ish members, spaced, and now and then damaged.
    fn line_text() -> impl Strategy<Value = String> {
        let member = (key_text(), value_text(), " {0,1}");
        (
            proptest::collection::vec(member, 0..6),
            prop_oneof![
                8 => Just(None),
                1 => any::<prop::sample::Index>().prop_map(|i| Some((i, None))),
                1 => (any::<prop::sample::Index>(), prop::sample::select(vec![
                    "\"", "\\", "\n", "}", "{", ",", ":", "]", " ", "\u{0}", "x",
                ])).prop_map(|(i, byte)| Some((i, Some(byte)))),
            ],
        )
            .prop_map(|(members, damage)| {
                let members: Vec<String> = members
                    .into_iter()
                    .map(|(k, v, space)| format!("{k}{space}:{space}{v}"))
                    .collect();
                let mut line = format!("{{{}}}", members.join(", "));
                if let Some((index, insert)) = damage {
                    let mut at = index.index(line.len() + 1);
                    while !line.is_char_boundary(at) {
                        at -= 1;
                    }
                    match insert {
                        Some(text) => line.insert_str(at, text),
                        None => line.truncate(at),
                    }
                }
                line
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        #[test]
        fn scan_agrees_with_serde_json(line in line_text()) {
            agree(&line)?;
        }

        #[test]
        fn scan_agrees_on_notifications(
            method in string_text(),
            params in value_text(),
            extra in proptest::option::of(value_text()),
        ) {
            let extra = extra.map(|value| format!(",\"emittedAtMs\":{value}")).unwrap_or_default();
            agree(&format!("{{\"method\":{method},\"params\":{params}{extra}}}"))?;
        }
    }

    #[test]
    fn shapes_codex_sends() {
        let line = r#"{"method":"turn/completed","params":{"threadId":"t","turn":{"id":"u","status":"failed","error":{"message":"quota \"hit\""},"items":[]}},"emittedAtMs":1}"#;
        let envelope = scan_line(line).expect("scan");
        let (range, peek) = envelope.params.expect("params");
        let params = &line[range];
        let read = read(&peek, params);
        assert_eq!(read.thread.as_deref(), Some("t"));
        assert_eq!(read.turn.as_deref(), Some("u"));
        assert_eq!(read.turn_status.as_deref(), Some("failed"));
        assert_eq!(read.turn_error_message.as_deref(), Some("quota \"hit\""));
        assert_eq!(
            envelope.method.expect("method").read(line),
            "turn/completed"
        );
        let response = scan_line(r#"{"id":53,"result":{"turn":{"id":"u"}}}"#).expect("scan");
        assert_eq!(response.id, Some(RequestId::Integer(53)));
        assert_eq!(
            scan_line(r#"{"id":"a","method":"item/tool/call""#).err(),
            Some(ScanError::Syntax {
                what: "EOF while parsing an object",
                at: 35
            })
        );
        assert!(matches!(
            scan_line("{\"method\":\"x\",\"params\":{\"text\":\"line one"),
            Err(ScanError::UnterminatedString)
        ));
    }

    #[test]
    fn deep_nesting_is_refused_not_a_stack_overflow() {
        let deep = format!(
            "{{\"params\":{}{}}}",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert!(matches!(
            scan_line(&deep),
            Err(ScanError::Syntax {
                what: "recursion limit exceeded",
                ..
            })
        ));
        assert!(serde_json::from_str::<serde_json::Value>(&deep).is_err());
    }
    #[test]
    fn a_request_peek_reads_the_thread_and_the_first_key_given_twice() {
        let twice = |params: &str| request_peek(params).twice;
        assert_eq!(
            twice(r#"{"threadId": "a", "input": [], "threadId": "b"}"#).as_deref(),
            Some("threadId")
        );
        // The same key escaped is the same key, as Codex reads it.
        assert_eq!(
            twice(r#"{"threadId": "a", "thread\u0049d": "b"}"#).as_deref(),
            Some("threadId")
        );
        // Only the top level counts.
        assert_eq!(
            twice(r#"{"threadId": "a", "turn": {"id": 1, "id": 2}}"#),
            None
        );
        assert_eq!(twice(r#"{"threadId": "a", "input": []}"#), None);
        assert_eq!(twice("[1, 1]"), None);
        assert_eq!(twice("null"), None);
        assert_eq!(
            request_peek(r#" {"input": [], "threadId": "t\u00e9"} "#)
                .thread
                .as_deref(),
            Some("té")
        );
        // A thread of another type names none; broken params give nothing.
        assert_eq!(request_peek(r#"{"threadId": 7}"#), RequestPeek::default());
        assert_eq!(request_peek(r#"{"threadId": "a""#), RequestPeek::default());
        assert_eq!(
            request_peek(r#"{"threadId": "a"} x"#),
            RequestPeek::default()
        );
        assert_eq!(
            request_peek(r#"{"threadId": "\ud800"}"#),
            RequestPeek::default()
        );
        assert_eq!(
            request_peek(r#"{"\ud800": 1, "threadId": "a"}"#),
            RequestPeek::default()
        );
    }
}

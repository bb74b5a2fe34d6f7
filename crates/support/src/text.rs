//! JavaScript string semantics for budgets and cuts.
//!
//! OpenClaw is JavaScript, so every length in its config and markers is counted in UTF-16 code
//! units. These helpers reproduce that unit (docs/routing.md §2) without ever splitting a character:
//! a cut that would land inside a surrogate pair keeps one unit less.

use std::borrow::Cow;

/// Length in UTF-16 code units (a character outside the BMP counts 2).
///
/// Counted on the UTF-8 bytes: every byte that is not a continuation byte starts a character,
/// and a 4-byte lead byte starts one that needs a surrogate pair. Both counts vectorize.
pub fn len16(text: &str) -> usize {
    // Byte-wide accumulators over chunks of at most 255 bytes cannot overflow and let the
    // compiler use full-width SIMD lanes.
    text.as_bytes()
        .chunks(255)
        .map(|chunk| {
            let starts = chunk
                .iter()
                .fold(0u8, |acc, &byte| acc + u8::from((byte as i8) >= -64));
            let astral = chunk
                .iter()
                .fold(0u8, |acc, &byte| acc + u8::from(byte >= 0xF0));
            usize::from(starts) + usize::from(astral)
        })
        .sum()
}

/// The longest prefix of whole characters whose UTF-16 length is at most `max_units`.
pub fn head16(text: &str, max_units: usize) -> &str {
    if text.len() <= max_units {
        return text; // never more units than bytes
    }
    // The first `max_units` bytes hold at most `max_units` units; extend from there.
    let mut end = max_units;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut used = len16(&text[..end]);
    for ch in text[end..].chars() {
        let units = ch.len_utf16();
        if used + units > max_units {
            break;
        }
        used += units;
        end += ch.len_utf8();
    }
    &text[..end]
}

/// The longest suffix of whole characters whose UTF-16 length is at most `max_units`.
pub fn tail16(text: &str, max_units: usize) -> &str {
    if text.len() <= max_units {
        return text;
    }
    let mut start = text.len() - max_units;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let mut used = len16(&text[start..]);
    for ch in text[..start].chars().rev() {
        let units = ch.len_utf16();
        if used + units > max_units {
            break;
        }
        used += units;
        start -= ch.len_utf8();
    }
    &text[start..]
}

/// Whitespace as JavaScript's `String.prototype.trimEnd` sees it (includes U+FEFF, which
/// Rust's `char::is_whitespace` does not).
pub fn is_js_whitespace(ch: char) -> bool {
    matches!(
        ch,
        '\u{0009}'..='\u{000D}'
            | ' '
            | '\u{00A0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200A}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202F}'
            | '\u{205F}'
            | '\u{3000}'
            | '\u{FEFF}'
    )
}

/// `trimEnd()` with the JavaScript whitespace set.
pub fn trim_end_js(text: &str) -> &str {
    text.trim_end_matches(is_js_whitespace)
}

/// `trim()` with the JavaScript whitespace set.
pub fn trim_js(text: &str) -> &str {
    text.trim_matches(is_js_whitespace)
}

/// `text` without terminal escape sequences (CSI such as colours, `ESC [ ... letter`, and
/// two-byte escapes), and without other control characters but tab.
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(ch) = chars.next() {
        if ch == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                // Parameters and intermediates, then one final byte in @..~.
                for next in chars.by_ref() {
                    if ('@'..='~').contains(&next) {
                        break;
                    }
                }
            } else {
                chars.next();
            }
        } else if !ch.is_control() || ch == '\t' {
            out.push(ch);
        }
    }
    out
}

/// `text` safe to print on an operator's terminal: every control character but the line feed
/// and tab (ESC sequences, BEL, carriage returns, DEL, the C1 range) and every bidirectional
/// mark (which can make a line read as something else) written as a visible `\u{..}` escape.
pub fn printable(text: &str) -> Cow<'_, str> {
    let hostile = |ch: char| {
        (ch.is_control() && ch != '\n' && ch != '\t')
            || matches!(ch, '\u{200e}' | '\u{200f}' | '\u{061c}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !text.chars().any(hostile) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for ch in text.chars() {
        if hostile(ch) {
            out.push_str(&format!("\\u{{{:04x}}}", u32::from(ch)));
        } else {
            out.push(ch);
        }
    }
    Cow::Owned(out)
}

/// The one joining rule for multi-part texts (docs/routing.md §2.5): trim each part's end, drop
/// empty parts, join the rest with one blank line.
pub fn join_parts<S: AsRef<str>>(parts: &[S]) -> String {
    let kept: Vec<&str> = parts
        .iter()
        .map(|part| trim_end_js(part.as_ref()))
        .filter(|part| !part.is_empty())
        .collect();
    kept.join("\n\n")
}

/// Counts as `{chars, roughTokens}` use: UTF-16 units and `ceil(chars / 4)`.
pub fn rough_tokens(chars: usize) -> usize {
    chars.div_ceil(4)
}

/// Locale-aware name order, as OpenClaw sorts with `localeCompare` (ICU, English = the CLDR root
/// collation): `apple, Mango, zoo`, `éclair` next to `eclair`, lower case before upper case for
/// equal letters. Full Unicode collation by ICU4X; code points break the ties collation leaves
/// (so the order is total and deterministic).
pub fn collate(a: &str, b: &str) -> std::cmp::Ordering {
    use std::sync::LazyLock;
    static COLLATOR: LazyLock<Option<icu_collator::CollatorBorrowed<'static>>> =
        LazyLock::new(|| {
            icu_collator::Collator::try_new(Default::default(), Default::default()).ok()
        });
    match COLLATOR.as_ref() {
        Some(collator) => collator.compare(a, b).then_with(|| a.cmp(b)),
        // Compiled data cannot fail to load; keep an order anyway.
        None => a
            .to_lowercase()
            .cmp(&b.to_lowercase())
            .then_with(|| a.cmp(b)),
    }
}

/// Escape text for an HTML page (the audit's, the cache report's, the conversation's): the same
/// five characters as [`escape_xml`], so one escaper serves every page.
pub fn escape_html(text: &str) -> String {
    escape_xml(text)
}

/// Escape for the skills XML (docs/routing.md §7.4: `&` first, then `<`, `>`, `"`, `'`; one pass
/// gives the same result because no replacement introduces a character escaped later).
pub fn escape_xml(text: &str) -> String {
    if !text
        .bytes()
        .any(|byte| matches!(byte, b'&' | b'<' | b'>' | b'"' | b'\''))
    {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for ch in text.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            other => out.push(other),
        }
    }
    out
}

/// `len16(escape_xml(text))` without building the string.
pub fn escaped_len16(text: &str) -> usize {
    len16(text)
        + text
            .bytes()
            .map(|byte| match byte {
                b'&' => 4,
                b'<' | b'>' => 3,
                b'"' | b'\'' => 5,
                _ => 0,
            })
            .sum::<usize>()
}

/// `bytes` as text when they are valid UTF-8: SIMD validation (`simdutf8`), several times faster
/// than the standard library's on non-ASCII text (every bootstrap file, SKILL.md and Codex line
/// passes here).
pub fn utf8(bytes: &[u8]) -> Option<&str> {
    simdutf8::basic::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_escapes_terminal_controls_and_bidi_marks() {
        assert_eq!(printable("plain\ttext\nline"), "plain\ttext\nline");
        assert_eq!(
            printable("a\u{1b}[2Jb\u{7}c\rd\u{202e}e\u{9b}f"),
            "a\\u{001b}[2Jb\\u{0007}c\\u{000d}d\\u{202e}e\\u{009b}f"
        );
    }

    #[test]
    fn cuts_never_split_surrogate_pairs() {
        let text = "a😀b";
        assert_eq!(len16(text), 4);
        assert_eq!(head16(text, 2), "a");
        assert_eq!(head16(text, 3), "a😀");
        assert_eq!(tail16(text, 2), "b");
        assert_eq!(tail16(text, 3), "😀b");
        assert_eq!(tail16(text, 10), text);
        assert_eq!(head16("ü😀", 1), "ü");
        assert_eq!(head16("ü😀", 2), "ü");
        assert_eq!(tail16("ü😀", 1), "");
        assert_eq!(tail16("😀ü", 1), "ü");
        for sample in ["", "abc", "ü", "a😀b", "\u{FEFF}x\u{10FFFF}", "üü😀😀aaü😀"] {
            assert_eq!(len16(sample), sample.encode_utf16().count());
            for n in 0..=len16(sample) + 1 {
                // Reference: the char-by-char definitions.
                let mut used = 0;
                let head: String = sample
                    .chars()
                    .take_while(|ch| {
                        used += ch.len_utf16();
                        used <= n
                    })
                    .collect();
                let mut used = 0;
                let mut tail: Vec<char> = sample
                    .chars()
                    .rev()
                    .take_while(|ch| {
                        used += ch.len_utf16();
                        used <= n
                    })
                    .collect();
                tail.reverse();
                assert_eq!(head16(sample, n), head, "head {sample:?} {n}");
                assert_eq!(
                    tail16(sample, n),
                    tail.into_iter().collect::<String>(),
                    "tail {sample:?} {n}"
                );
            }
        }
    }

    #[test]
    fn escaping_in_one_pass_matches_the_ordered_replacements() {
        let text = "a&b<c>d\"e'f&amp;";
        let ordered = text
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
            .replace('\'', "&apos;");
        assert_eq!(escape_xml(text), ordered);
        assert_eq!(escaped_len16(text), len16(&ordered));
    }

    #[test]
    fn trim_end_matches_javascript() {
        assert_eq!(
            trim_end_js("\u{FEFF}Be warm.\u{FEFF} \u{00A0}\n"),
            "\u{FEFF}Be warm."
        );
        assert_eq!(trim_end_js("Name: Claw\r\n\r\n"), "Name: Claw");
    }

    #[test]
    fn collation_orders_like_locale_compare() {
        let mut names = vec!["zoo", "Mango", "apple", "mango"];
        names.sort_by(|a, b| collate(a, b));
        assert_eq!(names, vec!["apple", "mango", "Mango", "zoo"]);
        // Accents sort with their base letter, not after `z` (the code-point order).
        let mut accented = vec!["zoo", "éclair", "eclairs", "dune", "Éclair"];
        accented.sort_by(|a, b| collate(a, b));
        assert_eq!(accented, vec!["dune", "éclair", "Éclair", "eclairs", "zoo"]);
        let mut punctuated = vec!["b-2", "b_1", "b10", "b2", "a"];
        punctuated.sort_by(|a, b| collate(a, b));
        assert_eq!(punctuated, vec!["a", "b_1", "b-2", "b10", "b2"]);
    }
}

#[cfg(test)]
mod ansi_tests {
    use super::strip_ansi;

    #[test]
    fn colour_codes_and_control_characters_are_dropped() {
        assert_eq!(
            strip_ansi("\u{1b}[2m2026-12-02T05:25:38Z\u{1b}[0m \u{1b}[31mERROR\u{1b}[0m codex: no\u{7}bwrap\tok"),
            "2026-12-02T05:25:38Z ERROR codex: nobwrap\tok"
        );
        assert_eq!(strip_ansi("plain"), "plain");
        assert_eq!(strip_ansi("\u{1b}"), "");
    }
}

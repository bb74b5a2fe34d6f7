//! JavaScript string semantics for budgets and cuts.
//!
//! OpenClaw is JavaScript, so every length in its config and markers is counted in UTF-16 code
//! units. These helpers reproduce that unit (routing.md §2) without ever splitting a character:
//! a cut that would land inside a surrogate pair keeps one unit less.

/// Length in UTF-16 code units (a character outside the BMP counts 2).
pub fn len16(text: &str) -> usize {
    text.chars().map(char::len_utf16).sum()
}

/// The longest prefix of whole characters whose UTF-16 length is at most `max_units`.
pub fn head16(text: &str, max_units: usize) -> &str {
    let mut used = 0;
    for (index, ch) in text.char_indices() {
        used += ch.len_utf16();
        if used > max_units {
            return &text[..index];
        }
    }
    text
}

/// The longest suffix of whole characters whose UTF-16 length is at most `max_units`.
pub fn tail16(text: &str, max_units: usize) -> &str {
    let mut used = 0;
    for (index, ch) in text.char_indices().rev() {
        used += ch.len_utf16();
        if used > max_units {
            return &text[index + ch.len_utf8()..];
        }
    }
    text
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

/// True when nothing but JavaScript whitespace is left.
pub fn is_blank_js(text: &str) -> bool {
    trim_end_js(text).is_empty()
}

/// The one joining rule for multi-part texts (routing.md §2.5): trim each part's end, drop
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

/// Locale-aware name order used by OpenClaw (`localeCompare` with the root locale), approximated
/// for the names we sort (skills, tool names): letters compare case-insensitively first, then lower
/// case sorts before upper case, then code points break the remaining ties.
pub fn collate(a: &str, b: &str) -> std::cmp::Ordering {
    fn primary(ch: char) -> (u8, String) {
        let class = if ch.is_alphabetic() {
            3
        } else if ch.is_numeric() {
            2
        } else if ch.is_whitespace() {
            0
        } else {
            1
        };
        (class, ch.to_lowercase().collect())
    }
    let primary_order = a.chars().map(primary).cmp(b.chars().map(primary));
    primary_order
        .then_with(|| {
            // Tertiary level: lower case before upper case at the first differing position.
            a.chars()
                .map(|ch| ch.is_uppercase())
                .cmp(b.chars().map(|ch| ch.is_uppercase()))
        })
        .then_with(|| a.cmp(b))
}

/// Escape for the skills XML, in the order routing.md §7.4 fixes (`&` first).
pub fn escape_xml(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_never_split_surrogate_pairs() {
        let text = "a😀b";
        assert_eq!(len16(text), 4);
        assert_eq!(head16(text, 2), "a");
        assert_eq!(head16(text, 3), "a😀");
        assert_eq!(tail16(text, 2), "b");
        assert_eq!(tail16(text, 3), "😀b");
        assert_eq!(tail16(text, 10), text);
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
    }
}

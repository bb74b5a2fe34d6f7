//! Deterministic JSON text for artifacts (docs/snapshots.md §4.1).
//!
//! Keys sorted by code point at every depth (serde_json's default map is a `BTreeMap`), two-space
//! indentation, non-ASCII kept raw, arrays of scalars on one line when that line fits in 100
//! columns, objects always expanded, `{}` and `[]` inline.

use serde_json::Value;

/// Widest one-line scalar array, indentation included.
const MAX_INLINE_WIDTH: usize = 100;

/// Render `value` with the artifact rules (no trailing newline).
pub fn to_pretty(value: &Value) -> String {
    let mut out = String::new();
    write_value(value, 0, 0, &mut out);
    out
}

/// Untrusted text (anything a chat channel supplies) as a fenced, escaped data block: the value as
/// [`to_pretty`] JSON inside a ```` ```json ```` fence. Inside JSON strings, newlines are already
/// `\n`; the characters that could still form Markdown or tag structure (backtick, `<`, `>`, `&`,
/// U+2028, U+2029) become `\uXXXX` escapes. So the block holds no line break of its own, no
/// fence and no tag: whatever the text says, it cannot end the block or start a section
/// (docs/threat-model.md, "Untrusted channel text").
pub fn data_block(value: &Value) -> String {
    let mut json = String::new();
    for ch in to_pretty(value).chars() {
        match ch {
            // Outside strings JSON never uses these characters, so escaping them everywhere only
            // touches string contents, and the text still parses to the same value.
            '`' | '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                json.push_str(&format!("\\u{:04x}", ch as u32));
            }
            _ => json.push(ch),
        }
    }
    format!("{DATA_BLOCK_OPEN}{json}{DATA_BLOCK_CLOSE}")
}

/// The opening fence of a [`data_block`].
pub const DATA_BLOCK_OPEN: &str = "```json\n";
/// The closing fence of a [`data_block`] (its content never holds a backtick).
pub const DATA_BLOCK_CLOSE: &str = "\n```";

/// The names of a struct's fields as serde reads them (renames applied), in declaration order:
/// the order in which a positional (array) form of the struct is read. Empty for a type that is
/// not read as a struct. Used to list a method's params in the order the handler takes them
/// (schemars lists properties sorted).
pub fn struct_fields<T: serde::de::DeserializeOwned>() -> &'static [&'static str] {
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(FieldProbe(&mut fields));
    fields
}

/// A deserializer that answers nothing and notes the fields a struct asks for.
struct FieldProbe<'a>(&'a mut &'static [&'static str]);

#[derive(Debug)]
struct Probed;

impl std::fmt::Display for Probed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("probed")
    }
}

impl std::error::Error for Probed {}

impl serde::de::Error for Probed {
    fn custom<T: std::fmt::Display>(_: T) -> Self {
        Probed
    }
}

impl<'de> serde::Deserializer<'de> for FieldProbe<'_> {
    type Error = Probed;

    fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Probed> {
        Err(Probed)
    }

    fn deserialize_struct<V: serde::de::Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Probed> {
        *self.0 = fields;
        Err(Probed)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

fn scalar(value: &Value) -> String {
    // Scalars (and empty containers) have a single canonical compact form.
    serde_json::to_string(value).unwrap_or_default()
}

/// `prefix_width` is how many columns precede the value on its line (indent plus `"key": `).
fn write_value(value: &Value, indent: usize, prefix_width: usize, out: &mut String) {
    let pad = "  ".repeat(indent + 1);
    match value {
        Value::Object(map) if !map.is_empty() => {
            out.push_str("{\n");
            let last = map.len() - 1;
            for (index, (key, child)) in map.iter().enumerate() {
                let key_text = format!("{}: ", scalar(&Value::String(key.clone())));
                out.push_str(&pad);
                out.push_str(&key_text);
                write_value(child, indent + 1, pad.len() + key_text.chars().count(), out);
                if index != last {
                    out.push(',');
                }
                out.push('\n');
            }
            out.push_str(&"  ".repeat(indent));
            out.push('}');
        }
        Value::Array(items) if !items.is_empty() => {
            let all_scalar = items.iter().all(|item| {
                !matches!(item, Value::Object(map) if !map.is_empty())
                    && !matches!(item, Value::Array(list) if !list.is_empty())
            });
            if all_scalar {
                let inline = format!(
                    "[{}]",
                    items.iter().map(scalar).collect::<Vec<_>>().join(", ")
                );
                if prefix_width + inline.chars().count() <= MAX_INLINE_WIDTH {
                    out.push_str(&inline);
                    return;
                }
            }
            out.push_str("[\n");
            let last = items.len() - 1;
            for (index, item) in items.iter().enumerate() {
                out.push_str(&pad);
                write_value(item, indent + 1, pad.len(), out);
                if index != last {
                    out.push(',');
                }
                out.push('\n');
            }
            out.push_str(&"  ".repeat(indent));
            out.push(']');
        }
        other => out.push_str(&scalar(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn struct_fields_are_listed_in_declaration_order_as_serde_names_them() {
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        #[allow(dead_code)]
        struct Sample {
            zeta: u8,
            call_id: String,
            #[serde(default)]
            alpha: Option<bool>,
        }
        assert_eq!(struct_fields::<Sample>(), ["zeta", "callId", "alpha"]);
        assert!(struct_fields::<String>().is_empty());
    }
    use serde_json::json;

    #[test]
    fn sorted_keys_inline_scalar_arrays() {
        let value = json!({"b": [1, "x"], "a": {}, "c": [], "d": {"z": null, "y": [{"k": 1}]}});
        assert_eq!(
            to_pretty(&value),
            "{\n  \"a\": {},\n  \"b\": [1, \"x\"],\n  \"c\": [],\n  \"d\": {\n    \"y\": [\n      {\n        \"k\": 1\n      }\n    ],\n    \"z\": null\n  }\n}"
        );
    }

    #[test]
    fn long_scalar_arrays_break() {
        let names: Vec<String> = (0..20).map(|i| format!("tool_{i:02}")).collect();
        let text = to_pretty(&json!({ "names": names }));
        assert!(text.contains("[\n    \"tool_00\",\n"));
    }
}

//! The run document's checked values: each one a type that cannot hold a bad value, checked
//! where serde reads it (`#[serde(try_from = "String")]`), so the parse itself refuses it and the
//! error names the field (`RunDocument::parse`). Their JSON Schema is a plain string's: the
//! checks that a schema cannot say stay here.
//!
//! Why they are checked: identifiers are keys of the service's maps and its state file
//! (bounded, no control characters); one-line values and channel ids are printed into prompt
//! structure, so they must stay one line or an identifier, never free text
//! (docs/threat-model.md, "Untrusted channel text").

use std::fmt;
use std::ops::Deref;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};

/// Longest `sessionKey` (OpenClaw's are `agent:<id>:<channel>:<kind>:<peer>`, well under this).
pub const MAX_SESSION_KEY_BYTES: usize = 512;
/// Longest `agentId` and `threadId` (Codex thread ids are UUIDs).
pub const MAX_ID_BYTES: usize = 256;
/// Longest one-line value (paths, notes, hints) printed into a prompt.
pub const MAX_PROMPT_LINE_BYTES: usize = 4096;
/// Longest multi-line operator text (plugin guidance, the reasoning-format hint).
pub const MAX_PROMPT_BLOCK_BYTES: usize = 64 * 1024;
/// Longest channel or capability id.
const MAX_CHANNEL_ID_BYTES: usize = 64;

/// Declares a string type whose values pass `check`: read through it, shown and compared as the
/// text, described as a string.
macro_rules! checked_text {
    ($(#[$doc:meta])* $name:ident, $check:expr) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
        #[serde(try_from = "String")]
        pub struct $name(String);

        impl TryFrom<String> for $name {
            type Error = String;

            fn try_from(value: String) -> Result<Self, String> {
                let check: fn(&str) -> Result<(), String> = $check;
                check(&value)?;
                Ok(Self(value))
            }
        }

        impl $name {
            /// The value, checked.
            pub fn new(value: impl Into<String>) -> Result<Self, String> {
                Self::try_from(value.into())
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl Deref for $name {
            type Target = str;

            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<$name> for String {
            fn from(value: $name) -> String {
                value.0
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(&self.0)
            }
        }

        impl JsonSchema for $name {
            fn inline_schema() -> bool {
                true
            }

            fn schema_name() -> std::borrow::Cow<'static, str> {
                String::schema_name()
            }

            fn json_schema(generator: &mut SchemaGenerator) -> Schema {
                String::json_schema(generator)
            }
        }
    };
}

fn bounded_identifier(value: &str, limit: usize) -> Result<(), String> {
    if value.len() > limit || value.chars().any(char::is_control) {
        return Err(format!(
            "must be at most {limit} bytes without control characters (got {} bytes)",
            value.len()
        ));
    }
    Ok(())
}

fn is_id(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= MAX_CHANNEL_ID_BYTES
        && value
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '-' | '_' | '.'))
}

checked_text!(
    /// `sessionKey`: at most [`MAX_SESSION_KEY_BYTES`], no control characters.
    SessionKey,
    |value| bounded_identifier(value, MAX_SESSION_KEY_BYTES)
);

checked_text!(
    /// `agentId`: at most [`MAX_ID_BYTES`], no control characters.
    AgentId,
    |value| bounded_identifier(value, MAX_ID_BYTES)
);

checked_text!(
    /// `threadId`: a Codex thread id, not blank, at most [`MAX_ID_BYTES`], no control characters.
    ThreadId,
    |value| {
        bounded_identifier(value, MAX_ID_BYTES)?;
        if value.trim().is_empty() {
            return Err("must not be empty".to_string());
        }
        Ok(())
    }
);

checked_text!(
    /// `channel.name`: printed into prompt structure (the group intro, `channel=` on the Runtime
    /// line), so an identifier, not free text.
    ChannelName,
    |value| {
        if is_id(value) {
            Ok(())
        } else {
            Err("must be a channel id: 1 to 64 ASCII letters, digits, `-`, `_` or `.`".to_string())
        }
    }
);

checked_text!(
    /// One of `channel.capabilities`: an identifier, as [`ChannelName`].
    CapabilityId,
    |value| {
        if is_id(value) {
            Ok(())
        } else {
            Err(
                "must be a capability id: 1 to 64 ASCII letters, digits, `-`, `_` or `.`"
                    .to_string(),
            )
        }
    }
);

checked_text!(
    /// An operator-supplied value printed into prompt structure as one line (paths, notes,
    /// hints): not blank, at most [`MAX_PROMPT_LINE_BYTES`], no control characters.
    OneLine,
    |value| {
        if value.trim().is_empty()
            || value.len() > MAX_PROMPT_LINE_BYTES
            || value.chars().any(char::is_control)
        {
            return Err(format!(
                "must be one non-empty line of at most {MAX_PROMPT_LINE_BYTES} bytes, without control characters"
            ));
        }
        Ok(())
    }
);

checked_text!(
    /// Multi-line operator text (plugin guidance, the reasoning-format hint): not blank, at most
    /// [`MAX_PROMPT_BLOCK_BYTES`].
    TextBlock,
    |value| {
        if value.trim().is_empty() || value.len() > MAX_PROMPT_BLOCK_BYTES {
            return Err(format!(
                "must be non-empty text of at most {MAX_PROMPT_BLOCK_BYTES} bytes"
            ));
        }
        Ok(())
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_type_refuses_what_its_field_must_not_hold() {
        assert!(SessionKey::new("agent:main:main").is_ok());
        assert!(SessionKey::new("k".repeat(MAX_SESSION_KEY_BYTES + 1)).is_err());
        assert!(SessionKey::new("a\u{7}b").is_err());
        assert!(AgentId::new("x".repeat(MAX_ID_BYTES + 1)).is_err());
        assert!(ThreadId::new("  ").is_err());
        assert!(ThreadId::new("thr-1").is_ok());
        assert!(ChannelName::new("telegram").is_ok());
        assert!(ChannelName::new("tele gram").is_err());
        assert!(CapabilityId::new("").is_err());
        assert!(OneLine::new("two\nlines").is_err());
        assert!(OneLine::new("   ").is_err());
        assert!(TextBlock::new("two\nlines").is_ok());
        assert!(TextBlock::new("x".repeat(MAX_PROMPT_BLOCK_BYTES + 1)).is_err());
    }

    #[test]
    fn serde_reads_through_the_check_and_writes_the_text() {
        let error = serde_json::from_str::<OneLine>("\"a\\nb\"").expect_err("two lines");
        assert!(error.to_string().contains("one non-empty line"), "{error}");
        let line: OneLine = serde_json::from_str("\"notes\"").expect("one line");
        assert_eq!(serde_json::to_string(&line).expect("json"), "\"notes\"");
        assert_eq!(
            serde_json::to_value(schemars::schema_for!(OneLine)).expect("schema")["type"],
            "string"
        );
    }
}

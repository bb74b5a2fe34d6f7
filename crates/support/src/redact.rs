//! Secret redaction for what clawbridge writes down (transcripts, captures' headers).
//!
//! Two nets, because secrets travel in two shapes. By key: a value under a key that names a
//! secret (`apiKey`, `GITHUB_TOKEN`, `DB_PASSWORD`, `Cookie`, `Authorization`), in any case and
//! spelling (`_`, `-` and `.` ignored), also in Codex's dotted config form
//! (`model_providers.corp.http_headers.Authorization`, whose last segment is the key), and every
//! value of a header map (`http_headers`, `env_http_headers`): headers are where providers put
//! credentials. By value: wherever text appears (free text, `-c key=value` arguments, shell
//! commands), bearer and basic credentials, JWTs, `sk-` keys, the password of a URL
//! (`https://user:pass@host`), cookie headers and `SECRET_KEY=value` assignments are replaced.
//! What is replaced becomes `<redacted>`; everything else is kept byte for byte.

use std::borrow::Cow;
use std::sync::OnceLock;

use regex::Regex;
use serde_json::Value;

/// What a redacted secret reads as.
pub const REDACTED: &str = "<redacted>";

/// Keys (folded: lowercase, without `_`, `-`, `.`) whose values are secrets.
const SECRET_KEYS: [&str; 15] = [
    "token",
    "passphrase",
    "authorization",
    "proxyauthorization",
    "password",
    "passwd",
    "secret",
    "cookie",
    "setcookie",
    "credentials",
    "credential",
    "privatekey",
    "xapikey",
    "apikey",
    "bearer",
];

/// Endings of folded keys that name secrets (`accessToken`, `OPENAI_API_KEY`, `DB_PASSWORD`).
const SECRET_SUFFIXES: [&str; 9] = [
    "token",
    "passphrase",
    "apikey",
    "secret",
    "password",
    "passwd",
    "privatekey",
    "credentials",
    "cookie",
];

/// Keys (folded, their last dotted segment) that name collections of secrets (`tokens: [...]`,
/// `apiKeys: {...}`): every string beneath them is redacted. Exact keys only: a suffix would
/// take Codex's token counts (`inputTokens`), which are numbers and kept anyway.
const SECRET_COLLECTIONS: [&str; 8] = [
    "tokens",
    "apikeys",
    "secrets",
    "passwords",
    "passphrases",
    "credentials",
    "cookies",
    "privatekeys",
];

/// Keys (folded) whose object values are header maps: every value in them is redacted.
const HEADER_MAPS: [&str; 3] = ["httpheaders", "envhttpheaders", "headers"];

fn fold(key: &str) -> String {
    key.chars()
        .filter(|c| !matches!(c, '_' | '-' | '.'))
        .flat_map(char::to_lowercase)
        .collect()
}

/// True when a key names a secret (its last dotted segment, or the whole key).
pub fn is_secret_key(key: &str) -> bool {
    let last = key.rsplit('.').next().unwrap_or(key);
    [fold(last), fold(key)].iter().any(|folded| {
        SECRET_KEYS.contains(&folded.as_str())
            || SECRET_SUFFIXES
                .iter()
                .any(|suffix| folded.ends_with(suffix))
    })
}

/// True when a key names a collection of secrets (see [`SECRET_COLLECTIONS`]).
fn is_secret_collection(key: &str) -> bool {
    let last = key.rsplit('.').next().unwrap_or(key);
    SECRET_COLLECTIONS.contains(&fold(last).as_str())
}

/// True when a key holds a header map (also dotted: `model_providers.x.http_headers`).
fn is_header_map(key: &str) -> bool {
    let last = key.rsplit('.').next().unwrap_or(key);
    HEADER_MAPS.contains(&fold(last).as_str())
}

/// True when a dotted key lies inside a header map (`...http_headers.X-Team`).
fn is_inside_header_map(key: &str) -> bool {
    let mut segments: Vec<&str> = key.split('.').collect();
    segments.pop();
    segments
        .iter()
        .any(|segment| HEADER_MAPS[..2].contains(&fold(segment).as_str()))
}

/// Redact every secret in `value`, in place.
pub fn redact_value(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                if key == "properties" && item.is_object() {
                    // A JSON Schema's properties: each key names a property (`gatewayToken`,
                    // `apiKey`) and its object is the property's schema, not a secret. A
                    // schema kept whole is what a replay needs to send the tool as it was.
                    redact_schema_properties(item);
                } else if (is_header_map(key) && item.is_object())
                    || is_secret_collection(key)
                    || (is_secret_key(key) && (item.is_object() || item.is_array()))
                {
                    // A header map, a list of keys, a token object (`{"value": ...}`): every
                    // string in it.
                    redact_all_strings(item);
                } else if (is_secret_key(key) || is_inside_header_map(key)) && is_scalar(item) {
                    *item = Value::from(REDACTED);
                } else {
                    redact_value(item);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact_value),
        Value::String(text) => {
            // A value that is a credential as a whole (a header value).
            let lower = text
                .get(..7)
                .map(str::to_ascii_lowercase)
                .unwrap_or_default();
            if lower.starts_with("bearer ") || lower.starts_with("basic ") {
                *text = REDACTED.to_string();
            } else if let Cow::Owned(redacted) = redact_text(text) {
                *text = redacted;
            }
        }
        _ => {}
    }
}

/// A JSON Schema `properties` map: a schema (an object) under any name is redacted as any
/// value is; a scalar under a secret's name (a map that only looked like a schema) still goes.
fn redact_schema_properties(properties: &mut Value) {
    let Value::Object(map) = properties else {
        return;
    };
    for (key, item) in map.iter_mut() {
        if item.is_object() {
            redact_value(item);
        } else if is_secret_key(key) && is_scalar(item) {
            *item = Value::from(REDACTED);
        } else {
            redact_value(item);
        }
    }
}

fn is_scalar(value: &Value) -> bool {
    !value.is_null() && !value.is_object() && !value.is_array()
}

/// Every string under `value` (a header map's values; the keys are header names).
fn redact_all_strings(value: &mut Value) {
    match value {
        Value::Object(map) => map.values_mut().for_each(redact_all_strings),
        Value::Array(items) => items.iter_mut().for_each(redact_all_strings),
        Value::String(text) => *text = REDACTED.to_string(),
        _ => {}
    }
}

/// The value patterns, with the group that is kept (the rest of the match is the secret).
struct Patterns {
    /// A cheap first check: most text has none of these.
    any: Regex,
    rules: Vec<(Regex, &'static str)>,
}

fn patterns() -> &'static Patterns {
    static PATTERNS: OnceLock<Patterns> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        let rule = |pattern: &str, keep: &'static str| {
            (
                Regex::new(pattern).unwrap_or_else(|error| panic!("redaction pattern: {error}")),
                keep,
            )
        };
        Patterns {
            any: Regex::new(
                r"(?i)bearer|basic|eyJ|sk-|[sr]k_|://[^/\s:@]*:[^/\s@]*@|cookie|token|secret|passw|passphrase|api[_-]?key|authorization|gh[pousr]_|github_pat_|xox[abprs]-|AKIA|AIza|PRIVATE KEY",
            )
            .unwrap_or_else(|error| panic!("redaction pattern: {error}")),
            rules: vec![
                // The high-confidence shapes captures redact too (see `redact_credentials`).
                rule(HIGH_CONFIDENCE[0], "<redacted>"),
                rule(HIGH_CONFIDENCE[1], "<redacted>"),
                rule(HIGH_CONFIDENCE[2], "$1 <redacted>"),
                // `Authorization: token x` (GitHub's scheme), `Authorization: Digest x`: the
                // scheme and its value.
                rule(
                    r#"(?i)\b(authorization)(\s*[=:]\s*)(?:(?:bearer|basic|token|digest)\s+)?("[^"]*"|'[^']*'|[^\s"',;]+)"#,
                    "$1$2<redacted>",
                ),
                // `Authorization: Bearer x`, `Bearer x` in any text.
                rule(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=:-]{6,}", "$1 <redacted>"),
                // JSON Web Tokens.
                rule(r"\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*", "<redacted>"),
                // OpenAI-style keys (`sk-...`, `sk-proj-...`).
                rule(r"\bsk-[A-Za-z0-9_-]{8,}", "<redacted>"),
                // The password of a URL.
                rule(r"([A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*):[^/\s@]+@", "$1:<redacted>@"),
                // Cookie headers in text: the rest of the line.
                rule(r"(?i)\b((?:set-)?cookie:)\s*[^\r\n]+", "$1 <redacted>"),
                // `apiKeys: [...]`, `"tokens": [...]`: a list under a name of secrets, whole.
                rule(
                    r#"(?i)\b([A-Za-z0-9_.-]*(?:tokens|secrets|passwords|passphrases|api[_-]?keys)"?)(\s*[=:]\s*)\[[^\]]*\]"#,
                    "$1$2[<redacted>]",
                ),
                // `token: {"value": "..."}`: an object under a secret name, whole.
                rule(
                    r#"(?i)\b([A-Za-z0-9_.-]*(?:token|secret|password|passwd|passphrase|api[_-]?key|credentials)"?)(\s*[=:]\s*)\{[^{}]*\}"#,
                    "$1$2{<redacted>}",
                ),
                // `NAME=value` / `name: value` / `"name": "value"` where the name ends in a
                // secret word.
                rule(
                    r#"(?i)\b([A-Za-z0-9_.-]*(?:token|secret|password|passwd|passphrase|api[_-]?key|authorization|credentials)"?)(\s*[=:]\s*)("[^"]*"|'[^']*'|[^\s"',;\[{]+)"#,
                    "$1$2<redacted>",
                ),
            ],
        }
    })
}

/// Secret shapes no ordinary text has: provider tokens (GitHub, Slack, AWS access keys, Google
/// API keys, Stripe secret and restricted keys), PEM private key blocks, and a password followed by a value with a digit or a
/// symbol (`password hunter2`, `passphrase: c0rrect-horse`; not `password manager`).
const HIGH_CONFIDENCE: [&str; 3] = [
    r"\b(?:[sr]k_(?:live|test)_[A-Za-z0-9]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{35})",
    r"-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----[\s\S]*?(?:-----END (?:[A-Z]+ )?PRIVATE KEY-----|$)",
    r#"(?i)\b(password|passwd|passphrase)(?:\s*[=:]\s*|\s+is\s+|\s+)[A-Za-z]*[0-9!@#$%^&*_+~-][^\s"',;]*"#,
];

/// A URL as a log line may show it: its password and every query value replaced by
/// `<redacted>` (a collector's `?api_key=...`, `https://user:PASS@host`); text that is no URL is
/// redacted as free text.
pub fn url_for_log(text: &str) -> String {
    let Ok(mut url) = url::Url::parse(text) else {
        return redact_text(text).into_owned();
    };
    if url.password().is_some() {
        let _ = url.set_password(Some(REDACTED));
    }
    if url.query().is_some() {
        let pairs: Vec<(String, String)> = url
            .query_pairs()
            .map(|(key, _)| (key.into_owned(), REDACTED.to_string()))
            .collect();
        url.query_pairs_mut().clear().extend_pairs(pairs);
    }
    url.to_string()
}

/// The credentials in `text` that no prompt holds by accident: the high-confidence shapes, the
/// password of a URL, `sk-` keys and JWTs. What captures redact in the prompt text itself (the
/// full `redact_text` would also take words a prompt uses, such as `basic` or `token:`).
pub fn redact_credentials(text: &str) -> Cow<'_, str> {
    static RULES: OnceLock<Vec<(Regex, &'static str)>> = OnceLock::new();
    let rules = RULES.get_or_init(|| {
        let rule = |pattern: &str, keep: &'static str| {
            (
                Regex::new(pattern).unwrap_or_else(|error| panic!("redaction pattern: {error}")),
                keep,
            )
        };
        vec![
            rule(HIGH_CONFIDENCE[0], "<redacted>"),
            rule(HIGH_CONFIDENCE[1], "<redacted>"),
            rule(HIGH_CONFIDENCE[2], "$1 <redacted>"),
            rule(
                r"\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*",
                "<redacted>",
            ),
            rule(r"\bsk-[A-Za-z0-9_-]{8,}", "<redacted>"),
            rule(
                r"([A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*):[^/\s@]+@",
                "$1:<redacted>@",
            ),
        ]
    });
    let mut out = Cow::Borrowed(text);
    for (pattern, keep) in rules {
        if let Cow::Owned(replaced) = pattern.replace_all(&out, *keep) {
            out = Cow::Owned(replaced);
        }
    }
    out
}

/// `text` with every secret pattern replaced (borrowed when there was none).
pub fn redact_text(text: &str) -> Cow<'_, str> {
    let patterns = patterns();
    if !patterns.any.is_match(text) {
        return Cow::Borrowed(text);
    }
    let mut out = Cow::Borrowed(text);
    for (pattern, keep) in &patterns.rules {
        if let Cow::Owned(replaced) = pattern.replace_all(&out, *keep) {
            out = Cow::Owned(replaced);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Free-text forms a secret takes in a transcript line or a prompt: each is redacted by
    /// `redact_text` (transcripts, reports), and the credential-shaped ones by
    /// `redact_credentials` (captures) too.
    fn planted_in_text() -> Vec<(&'static str, &'static str, bool)> {
        // (text, the secret, a credential shape captures redact too)
        vec![
            (
                "clone https://deploy:Hunter2pass@git.example.com/repo",
                "Hunter2pass",
                true,
            ),
            ("db at postgres://app:s3cr3tpw@db:5432/x", "s3cr3tpw", true),
            ("my password hunter2 for the vpn", "hunter2", true),
            ("password: c0rrect-horse", "c0rrect-horse", true),
            ("the passphrase is tr0ub4dor", "tr0ub4dor", true),
            (
                "export GH=ghp_abcdefghijklmnopqrstuvwxyz0123456789",
                "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
                true,
            ),
            (
                "token github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
                "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
                true,
            ),
            (
                "slack xoxb-123456789012-abcdefghijkl",
                "xoxb-123456789012-abcdefghijkl",
                true,
            ),
            ("aws AKIAIOSFODNN7EXAMPLE key", "AKIAIOSFODNN7EXAMPLE", true),
            (
                "maps AIzaSyA1234567890abcdefghijklmnopqrstuv",
                "AIzaSyA1234567890abcdefghijklmnopqrstuv",
                true,
            ),
            (
                "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7\n-----END RSA PRIVATE KEY-----",
                "MIIEpAIBAAKCAQEA7",
                true,
            ),
            (
                "key sk-proj-abcdefghij0123456789",
                "sk-proj-abcdefghij0123456789",
                true,
            ),
            (
                "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl",
                "eyJzdWIiOiIxIn0",
                true,
            ),
            (
                "Authorization: token abcdef0123456789",
                "abcdef0123456789",
                false,
            ),
            (
                "Authorization: Bearer abcdef0123456789",
                "abcdef0123456789",
                false,
            ),
            (
                "curl -H 'X-Api-Key: abcdef0123456789'",
                "abcdef0123456789",
                false,
            ),
            (
                "GITHUB_TOKEN=abcdef0123456789 make",
                "abcdef0123456789",
                false,
            ),
            (
                "?access_token=abcdef0123456789&x=1",
                "abcdef0123456789",
                false,
            ),
            ("Cookie: sid=abcdef0123456789", "abcdef0123456789", false),
            (
                "client_secret: \"abcdef0123456789\"",
                "abcdef0123456789",
                false,
            ),
            (
                "stripe sk_live_51Habcdefghij0123456789",
                "sk_live_51Habcdefghij0123456789",
                true,
            ),
            (
                "restricted rk_test_51Habcdefghij0123456789",
                "rk_test_51Habcdefghij0123456789",
                true,
            ),
            ("passphrase=correcthorse", "correcthorse", false),
            (
                r#"cat conf.json: {"passphrase": "batterystaple"}"#,
                "batterystaple",
                false,
            ),
            (
                r#"{"apiKeys": ["firstkeyvalue", "secondkeyvalue"]}"#,
                "secondkeyvalue",
                false,
            ),
            ("tokens: [tokenone111, tokentwo222]", "tokentwo222", false),
            (
                r#"{"token": {"value": "tokenobjectvalue"}}"#,
                "tokenobjectvalue",
                false,
            ),
        ]
    }

    #[test]
    fn a_schema_property_named_like_a_secret_keeps_its_schema() {
        // OpenClaw's message tool has a `gatewayToken` property: its schema is not a secret,
        // and a transcript that redacted it could not be replayed as it was sent.
        let mut value = serde_json::json!({"parameters": {"type": "object", "properties": {
            "gatewayToken": {"type": "string", "description": "the gateway's token"},
            "pageToken": {"type": "string"},
            "apiKey": "sk-proj-abcdefghijklmnopqrstuvwxyz012345",
            "note": {"type": "string", "default": "sk-proj-abcdefghijklmnopqrstuvwxyz012345"}
        }}});
        redact_value(&mut value);
        let properties = &value["parameters"]["properties"];
        assert_eq!(properties["gatewayToken"]["type"], "string");
        assert_eq!(
            properties["gatewayToken"]["description"],
            "the gateway's token"
        );
        assert_eq!(properties["pageToken"]["type"], "string");
        // A scalar under a secret's name, and a secret by its shape, still go.
        assert_eq!(properties["apiKey"], REDACTED);
        assert_eq!(properties["note"]["default"], REDACTED);
    }

    #[test]
    fn every_planted_form_is_redacted_in_text() {
        for (text, secret, credential) in planted_in_text() {
            let redacted = redact_text(text);
            assert!(!redacted.contains(secret), "{text:?} -> {redacted:?}");
            if credential {
                let captured = redact_credentials(text);
                assert!(
                    !captured.contains(secret),
                    "capture: {text:?} -> {captured:?}"
                );
            }
        }
        // What prompts say in passing stays.
        for kept in [
            "Never collect tokens, API keys, or passwords in chat.",
            "Use the password manager.",
            "a basic understanding of the codebase",
        ] {
            assert_eq!(redact_credentials(kept), kept);
        }
    }

    /// (where, the secret, how it is written): at least 30 shapes secrets travel in.
    fn corpus() -> Vec<(&'static str, Value, &'static str)> {
        vec![
            ("apiKey", json!({"apiKey": "plainvalue1"}), "plainvalue1"),
            ("api_key", json!({"api_key": "plainvalue2"}), "plainvalue2"),
            (
                "OPENAI_API_KEY",
                json!({"OPENAI_API_KEY": "plainvalue3"}),
                "plainvalue3",
            ),
            (
                "access_token",
                json!({"access_token": "plainvalue4"}),
                "plainvalue4",
            ),
            (
                "refreshToken",
                json!({"refreshToken": "plainvalue5"}),
                "plainvalue5",
            ),
            (
                "id_token",
                json!({"id_token": "plainvalue6"}),
                "plainvalue6",
            ),
            (
                "GITHUB_TOKEN env",
                json!({"env": {"GITHUB_TOKEN": "plainvalue7"}}),
                "plainvalue7",
            ),
            (
                "DB_PASSWORD env",
                json!({"env": {"DB_PASSWORD": "plainvalue8"}}),
                "plainvalue8",
            ),
            (
                "AWS_SECRET env",
                json!({"env": {"AWS_SECRET": "plainvalue9"}}),
                "plainvalue9",
            ),
            (
                "client_secret",
                json!({"client_secret": "plainvalue10"}),
                "plainvalue10",
            ),
            (
                "password",
                json!({"password": "plainvalue11"}),
                "plainvalue11",
            ),
            (
                "Cookie header",
                json!({"headers": {"Cookie": "sid=plainvalue12"}}),
                "plainvalue12",
            ),
            (
                "Set-Cookie header",
                json!({"Set-Cookie": "sid=plainvalue13; Path=/"}),
                "plainvalue13",
            ),
            (
                "dotted http_headers.Authorization",
                json!({"config": {"model_providers.corp.http_headers.Authorization": "Bearer plainvalue14"}}),
                "plainvalue14",
            ),
            (
                "dotted http_headers other header",
                json!({"config": {"model_providers.corp.http_headers.X-Team-Key": "plainvalue15"}}),
                "plainvalue15",
            ),
            (
                "nested http_headers map",
                json!({"model_providers": {"corp": {"http_headers": {"X-Custom": "plainvalue16"}}}}),
                "plainvalue16",
            ),
            (
                "env_http_headers map",
                json!({"env_http_headers": {"X-Org": "plainvalue17"}}),
                "plainvalue17",
            ),
            (
                "-c argument",
                json!({"args": ["-c", "model_providers.corp.http_headers.Authorization=\"Bearer plainvalue18\""]}),
                "plainvalue18",
            ),
            (
                "bearer in text",
                json!({"text": "use Bearer plainvalue19abc now"}),
                "plainvalue19abc",
            ),
            (
                "basic in text",
                json!({"text": "Authorization: Basic dXNlcjpwYXNzd29yZA=="}),
                "dXNlcjpwYXNzd29yZA==",
            ),
            (
                "JWT in text",
                json!({"text": "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjMifQ.sig-nature_x ok"}),
                "eyJzdWIiOiIxMjMifQ",
            ),
            (
                "JWT value",
                json!({"value": "eyJhbGciOiJub25lIn0.eyJhIjoiYiJ9.c2lnbmF0dXJl"}),
                "eyJhIjoiYiJ9",
            ),
            (
                "sk- in text",
                json!({"text": "my key is sk-proj-plainvalue23xyz, keep it"}),
                "plainvalue23xyz",
            ),
            (
                "sk- value",
                json!({"value": "sk-plainvalue24abcdef"}),
                "plainvalue24abcdef",
            ),
            (
                "basic-auth URL",
                json!({"url": "https://alice:plainvalue25@proxy.example/v1"}),
                "plainvalue25",
            ),
            (
                "basic-auth URL in text",
                json!({"text": "git clone https://bot:plainvalue26@git.example/repo.git"}),
                "plainvalue26",
            ),
            (
                "shell export",
                json!({"command": "export OPENAI_API_KEY=plainvalue27 && run"}),
                "plainvalue27",
            ),
            (
                "env assignment quoted",
                json!({"command": "SLACK_BOT_TOKEN=\"plainvalue28\" ./post"}),
                "plainvalue28",
            ),
            (
                "yaml line",
                json!({"text": "client_secret: plainvalue29\nname: x"}),
                "plainvalue29",
            ),
            (
                "cookie line in text",
                json!({"text": "Cookie: session=plainvalue30; theme=dark"}),
                "plainvalue30",
            ),
            (
                "x-api-key header",
                json!({"X-Api-Key": "plainvalue31"}),
                "plainvalue31",
            ),
            (
                "private_key",
                json!({"private_key": "plainvalue32"}),
                "plainvalue32",
            ),
            (
                "proxy-authorization",
                json!({"Proxy-Authorization": "plainvalue33"}),
                "plainvalue33",
            ),
            (
                "credentials",
                json!({"credentials": "plainvalue34"}),
                "plainvalue34",
            ),
            (
                "array of bearer",
                json!({"headers": ["Bearer plainvalue35xyz"]}),
                "plainvalue35xyz",
            ),
            (
                "passphrase",
                json!({"passphrase": "plainvalue36"}),
                "plainvalue36",
            ),
            (
                "token object",
                json!({"token": {"value": "plainvalue37"}}),
                "plainvalue37",
            ),
            (
                "tokens list",
                json!({"tokens": ["plainvalue38", "other"]}),
                "plainvalue38",
            ),
            (
                "apiKeys list",
                json!({"apiKeys": ["plainvalue39"]}),
                "plainvalue39",
            ),
            (
                "Stripe key",
                json!({"text": "charge with sk_live_plainvalue40abcdefgh"}),
                "plainvalue40abcdefgh",
            ),
        ]
    }

    #[test]
    fn every_shape_of_the_corpus_is_redacted() {
        let corpus = corpus();
        assert!(corpus.len() >= 30);
        for (shape, mut value, secret) in corpus {
            redact_value(&mut value);
            let text = value.to_string();
            assert!(!text.contains(secret), "{shape}: {text}");
            assert!(text.contains("redacted"), "{shape}: {text}");
        }
    }

    #[test]
    fn ordinary_text_and_usage_are_kept() {
        let mut value = json!({
            "type": "apiKey",
            "tokenUsage": {"total": 3, "inputTokens": 10},
            "usage": {"tokens": 42, "cachedInputTokens": 7},
            "text": "The token budget is 4000 tokens; see https://example.com/docs and be kind.",
            "command": "cargo test --all",
            "cwd": "/home/me/secret-project-notes",
            "model": "gpt-5.5",
        });
        let before = value.clone();
        redact_value(&mut value);
        assert_eq!(value, before);
    }
}

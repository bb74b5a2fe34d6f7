//! The one fingerprint of a credential: which account a key or a token names, never the secret.
//!
//! Why one form: the endpoint files each login's Codex home, threads and budget under it, the
//! captures file each model request's `Authorization` under it, `clawbridge account` tells it for
//! a key, and named accounts list it. An operator compares them by eye; two hashes of one key
//! (one over the key, one over the header) would tell two accounts where there is one.
//!
//! The form is `<kind>-<16 hex>`: the kind of login (`apiKey`, `chatgptAuthTokens`, ...) and the
//! first 16 hex digits of SHA-256 over `<kind>`, a NUL and the material that names the account:
//! the key itself for a key; for a ChatGPT access token, its holder (the account and the user
//! its claims name, joined by a NUL), so a refreshed token is the same account.

use serde_json::Value;

/// The claim object of OpenAI's tokens that names the account and the user.
const AUTH_CLAIMS: &str = "https://api.openai.com/auth";

/// The hash part of a fingerprint: the first 16 hex digits of SHA-256(kind NUL material).
pub fn hash(kind: &str, material: &str) -> String {
    super::hex::sha256(format!("{kind}\0{material}").as_bytes(), 8)
}

/// `<kind>-<first 16 hex of SHA-256(kind NUL material)>`.
pub fn fingerprint(kind: &str, material: &str) -> String {
    format!("{kind}-{}", hash(kind, material))
}

/// The claims of a JWT (its middle part, base64url), read, not verified: they decide which
/// account a token names, never what the upstream accepts (the upstream checks the signature
/// of every request it gets).
fn jwt_claims(token: &str) -> Option<Value> {
    use base64::Engine as _;
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Who holds a ChatGPT access token: its account and its user, from its claims.
pub fn token_holder(token: &str) -> Option<(String, String)> {
    let claims = jwt_claims(token)?;
    let auth = claims.get(AUTH_CLAIMS);
    let text = |value: Option<&Value>| value.and_then(Value::as_str).map(str::to_string);
    let account = text(auth.and_then(|auth| auth.get("chatgpt_account_id")))
        .or_else(|| text(auth.and_then(|auth| auth.get("account_id"))))?;
    let user = text(auth.and_then(|auth| auth.get("chatgpt_user_id")))
        .or_else(|| text(auth.and_then(|auth| auth.get("user_id"))))
        .or_else(|| text(claims.get("sub")))?;
    Some((account, user))
}

/// The fingerprint of an HTTP `Authorization` value, in the form a login of the same credential
/// gets: a bearer ChatGPT token is its holder's `chatgptAuthTokens-…`, any other bearer value an
/// `apiKey-…`; a value of another scheme (a signature, basic auth) is `other-…` over the whole
/// value.
pub fn of_authorization(authorization: &str) -> String {
    let value = authorization.trim();
    let bearer = value
        .split_once(' ')
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim());
    match bearer {
        Some(token) => match token_holder(token) {
            Some((account, user)) => {
                fingerprint("chatgptAuthTokens", &format!("{account}\0{user}"))
            }
            None => fingerprint("apiKey", token),
        },
        None => fingerprint("other", value),
    }
}

/// Whether `text` has the fingerprint form (`apiKey-1a2b…`): a kind of letters, a dash, hex.
pub fn is_fingerprint(text: &str) -> bool {
    let Some((kind, hash)) = text.split_once('-') else {
        return false;
    };
    (1..=32).contains(&kind.len())
        && kind.bytes().all(|byte| byte.is_ascii_alphabetic())
        && (8..=64).contains(&hash.len())
        && hash.bytes().all(|byte| byte.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_has_one_fingerprint_as_a_login_and_as_a_header() {
        let key = "sk-test-0123456789";
        let login = fingerprint("apiKey", key);
        assert!(login.starts_with("apiKey-") && login.len() == "apiKey-".len() + 16);
        assert_eq!(of_authorization(&format!("Bearer {key}")), login);
        assert_eq!(of_authorization(&format!("bearer  {key} ")), login);
        assert_ne!(of_authorization("Bearer sk-other"), login);
        assert!(of_authorization("Basic dXNlcjpwYXNz").starts_with("other-"));
        assert!(is_fingerprint(&login));
        assert!(!is_fingerprint("apiKey-xyz"));
        assert!(!is_fingerprint("alice"));
    }
}

//! "Did you mean": the known name nearest to a mistyped one, for every place that refuses or
//! ignores a name the user typed (run-document keys, OpenClaw config keys, flag values that
//! are parsed after clap, which suggests for its own closed sets).
//!
//! Names are compared after folding case and dropping `_` and `-` (so `session_key` and
//! `SessionKey` find `sessionKey`), then by optimal-string-alignment distance with a budget
//! that grows with the name's length: one edit for short names, two from five characters,
//! three from twelve. A name further than that gets no suggestion (a wrong hint is worse than
//! none).

/// The known name nearest to `given`, if one is near enough; the first of equals wins.
pub fn closest<'a>(given: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let folded = fold(given);
    let budget = match folded.chars().count() {
        0..=4 => 1,
        5..=11 => 2,
        _ => 3,
    };
    known
        .into_iter()
        .filter(|candidate| *candidate != given)
        .map(|candidate| (strsim::osa_distance(&folded, &fold(candidate)), candidate))
        .filter(|(distance, _)| *distance <= budget)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

fn fold(name: &str) -> String {
    name.chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect()
}

/// serde's "unknown field `x`, expected one of `a`, `b`" (or "unknown variant") with the
/// nearest expected name added after the unknown one; any other message unchanged.
pub fn serde_message(message: &str) -> String {
    let Some((head, rest)) = ["unknown field `", "unknown variant `"]
        .iter()
        .find_map(|head| message.strip_prefix(head).map(|rest| (*head, rest)))
    else {
        return message.to_string();
    };
    let Some((given, expected)) = rest.split_once('`') else {
        return message.to_string();
    };
    let names: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    match closest(given, names) {
        Some(near) => format!("{head}{given}` (did you mean `{near}`?){expected}"),
        None => message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::{closest, serde_message};

    #[test]
    fn near_names_are_found_and_far_ones_are_not() {
        let keys = ["message", "sessionKey", "workspace", "model"];
        assert_eq!(closest("mesage", keys), Some("message"));
        assert_eq!(closest("session_key", keys), Some("sessionKey"));
        assert_eq!(closest("Workspace", keys), Some("workspace"));
        assert_eq!(closest("modle", keys), Some("model"));
        assert_eq!(closest("threadId", keys), None);
        assert_eq!(closest("x", keys), None);
        assert_eq!(
            closest("missin", ["missing", "moved", "extra"]),
            Some("missing")
        );
    }

    #[test]
    fn serde_messages_gain_the_suggestion() {
        assert_eq!(
            serde_message("unknown field `mesage`, expected one of `workspace`, `message`"),
            "unknown field `mesage` (did you mean `message`?), expected one of `workspace`, `message`"
        );
        assert_eq!(
            serde_message("unknown variant `ful`, expected `full` or `none`"),
            "unknown variant `ful` (did you mean `full`?), expected `full` or `none`"
        );
        let far = "unknown field `zzz`, expected `message`";
        assert_eq!(serde_message(far), far);
        assert_eq!(
            serde_message("invalid type: string"),
            "invalid type: string"
        );
    }
}

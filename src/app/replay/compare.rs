//! How a replayed message is held against its recorded twin.
//!
//! Three things differ between two runs of the same session and say nothing of what clawbridge
//! or Codex did: the random ids (threads, turns, items; a committed recording has them renamed
//! `id-N`), the folders (the recording's workspace and Codex home against the replay's scratch
//! copies) and the clock (dates and times in text, the moments and durations Codex stamps).
//! [`Pairing`] holds the ids as a one-to-one correspondence, learned as the replay goes (an id
//! the recording gave one thread must be the same live id everywhere after), [`Folders`] maps
//! the live folders back to the recorded ones, and the clock is taken out of both sides alike.
//! Everything else must be equal.

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

/// A random id: a UUID, or the `id-N` a committed recording renamed one to.
static ID: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|id-[0-9]+\b").ok()
});
/// Dates and clock times in text (Codex's `<current_date>`, a rollout's file name).
static CLOCK: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"\d{4}[-/]\d{2}[-/]\d{2}|\d{2}[:-]\d{2}[:-]\d{2}(\.\d+)?Z?").ok());

/// The loopback stub's URL (its port and secret path are new each run).
static STUB_URL: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"http://127\.0\.0\.1:\d+/[0-9a-f]{32}/v1").ok());

/// The moments and durations Codex and OpenClaw stamp on what they send (as a committed
/// recording takes them out).
pub const TIMES: [&str; 18] = [
    "atMs",
    "emittedAtMs",
    "startedAt",
    "startedAtMs",
    "completedAt",
    "completedAtMs",
    "createdAt",
    "updatedAt",
    "create_time",
    "durationMs",
    "timeMs",
    "recencyAt",
    "sectionEnteredAt",
    "expiresAt",
    "retirementAt",
    "anchorMs",
    "firstByteMs",
    "totalMs",
];

/// Ids of the recording and of the replay, one to one.
#[derive(Clone, Debug, Default)]
pub struct Pairing {
    recorded_to_live: HashMap<String, String>,
    live_to_recorded: HashMap<String, String>,
}

/// Ids paired at most (each replayed message can add a few; a recording is bounded).
const MAX_PAIRS: usize = 1_000_000;

impl Pairing {
    /// Pair `recorded` with `live` when neither is paired yet; whether they are now paired
    /// with each other.
    pub fn bind(&mut self, recorded: &str, live: &str) -> bool {
        match (
            self.recorded_to_live.get(recorded),
            self.live_to_recorded.get(live),
        ) {
            (Some(known), _) => known == live,
            (None, Some(_)) => false,
            (None, None) => {
                if self.recorded_to_live.len() < MAX_PAIRS {
                    self.recorded_to_live
                        .insert(recorded.to_string(), live.to_string());
                    self.live_to_recorded
                        .insert(live.to_string(), recorded.to_string());
                }
                true
            }
        }
    }

    /// The live id of a recorded one.
    pub fn live(&self, recorded: &str) -> Option<&str> {
        self.recorded_to_live.get(recorded).map(String::as_str)
    }

    /// The recorded id of a live one.
    pub fn recorded(&self, live: &str) -> Option<&str> {
        self.live_to_recorded.get(live).map(String::as_str)
    }

    /// Learn the ids of `live` from `recorded` where they stand in the same place.
    pub fn learn(&mut self, recorded: &Value, live: &Value) {
        match (recorded, live) {
            (Value::Object(recorded), Value::Object(live)) => {
                for (key, value) in recorded {
                    if let Some(other) = live.get(key) {
                        self.learn(value, other);
                    }
                }
            }
            (Value::Array(recorded), Value::Array(live)) => {
                for (value, other) in recorded.iter().zip(live) {
                    self.learn(value, other);
                }
            }
            (Value::String(recorded), Value::String(live)) => {
                let (ours, theirs) = (ids_in(recorded), ids_in(live));
                if ours.len() == theirs.len() {
                    for (ours, theirs) in ours.iter().zip(&theirs) {
                        self.bind(ours, theirs);
                    }
                }
            }
            _ => {}
        }
    }

    /// `recorded` with each id the replay has a live twin for replaced by it.
    pub fn to_live(&self, text: &str) -> String {
        match ID.as_ref() {
            Some(id) => id
                .replace_all(text, |found: &regex::Captures<'_>| {
                    let found = &found[0];
                    self.live(found).unwrap_or(found).to_string()
                })
                .into_owned(),
            None => text.to_string(),
        }
    }
}

fn ids_in(text: &str) -> Vec<String> {
    ID.as_ref()
        .map(|id| {
            id.find_iter(text)
                .map(|found| found.as_str().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Folder pairs: what the recording named and where the replay put it.
#[derive(Clone, Debug, Default)]
pub struct Folders {
    /// (recorded, live), longest live first when mapping back.
    pairs: Vec<(String, String)>,
}

impl Folders {
    pub fn add(&mut self, recorded: &str, live: &str) {
        if recorded != live
            && !live.is_empty()
            && !self.pairs.iter().any(|(_, known)| known == live)
        {
            self.pairs.push((recorded.to_string(), live.to_string()));
            self.pairs
                .sort_by_key(|(_, live)| std::cmp::Reverse(live.len()));
        }
    }

    /// A live text with the replay's folders named as the recording named them.
    pub fn to_recorded(&self, text: &str) -> String {
        let mut text = text.to_string();
        for (recorded, live) in &self.pairs {
            if text.contains(live.as_str()) {
                text = text.replace(live.as_str(), recorded);
            }
        }
        text
    }

    /// A recorded text with its folders named as the replay has them.
    pub fn to_live(&self, text: &str) -> String {
        let mut pairs: Vec<&(String, String)> = self.pairs.iter().collect();
        pairs.sort_by_key(|(recorded, _)| std::cmp::Reverse(recorded.len()));
        let mut text = text.to_string();
        for (recorded, live) in pairs {
            if text.contains(recorded.as_str()) {
                text = text.replace(recorded.as_str(), live);
            }
        }
        text
    }
}

/// A text with its dates, clock times and the stub's URL as placeholders.
fn clockless(text: &str) -> String {
    let text = match STUB_URL.as_ref() {
        Some(stub) => stub.replace_all(text, "<loopback-stub>").into_owned(),
        None => text.to_string(),
    };
    match CLOCK.as_ref() {
        Some(clock) => clock.replace_all(&text, "<clock>").into_owned(),
        None => text,
    }
}

/// A key whose value is made of what differs between runs by nature: the hash of the `-c`
/// flags layer of a `config/read` answer (the flags name the stub's URL).
fn volatile(object: &serde_json::Map<String, Value>, key: &str) -> bool {
    key == "version"
        && object
            .get("name")
            .is_some_and(|name| name["type"] == "sessionFlags")
}

/// Where two values first part, and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parting {
    /// A JSON path (`params.item.text`, `input[3].content[0].text`).
    pub path: String,
    pub recorded: String,
    pub replayed: String,
}

/// Characters of context shown each side of where two texts part.
const CONTEXT: usize = 120;

/// Compare a recorded value with its live twin: `None` when they are the same but for ids (as
/// paired), folders and the clock.
pub fn parting(
    recorded: &Value,
    live: &Value,
    pairing: &mut Pairing,
    folders: &Folders,
) -> Option<Parting> {
    let mut path = String::new();
    walk(recorded, live, pairing, folders, &mut path)
}

fn walk(
    recorded: &Value,
    live: &Value,
    pairing: &mut Pairing,
    folders: &Folders,
    path: &mut String,
) -> Option<Parting> {
    let here = |path: &String, recorded: String, replayed: String| {
        Some(Parting {
            path: if path.is_empty() {
                "(whole)".into()
            } else {
                path.clone()
            },
            recorded,
            replayed,
        })
    };
    match (recorded, live) {
        (Value::Object(ours), Value::Object(theirs)) => {
            let keys: std::collections::BTreeSet<&String> = ours
                .keys()
                .chain(theirs.keys())
                .filter(|key| !TIMES.contains(&key.as_str()) && !volatile(ours, key))
                .collect();
            for key in keys {
                let length = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
                let found = match (ours.get(key.as_str()), theirs.get(key.as_str())) {
                    (Some(a), Some(b)) => walk(a, b, pairing, folders, path),
                    (Some(a), None) => here(path, shown(a), "(absent)".into()),
                    (None, Some(b)) => here(path, "(absent)".into(), shown(b)),
                    (None, None) => None,
                };
                path.truncate(length);
                if found.is_some() {
                    return found;
                }
            }
            None
        }
        (Value::Array(ours), Value::Array(theirs)) => {
            for (index, (a, b)) in ours.iter().zip(theirs).enumerate() {
                let length = path.len();
                path.push_str(&format!("[{index}]"));
                let found = walk(a, b, pairing, folders, path);
                path.truncate(length);
                if found.is_some() {
                    return found;
                }
            }
            if ours.len() != theirs.len() {
                let index = ours.len().min(theirs.len());
                let length = path.len();
                path.push_str(&format!("[{index}]"));
                let found = here(
                    path,
                    ours.get(index).map_or_else(|| "(absent)".into(), shown),
                    theirs.get(index).map_or_else(|| "(absent)".into(), shown),
                );
                path.truncate(length);
                return found;
            }
            None
        }
        (Value::String(ours), Value::String(theirs)) => same_text(ours, theirs, pairing, folders)
            .then_some(())
            .map_or_else(
                || {
                    let theirs = folders.to_recorded(theirs);
                    let (a, b) = around_parting(ours, &theirs);
                    here(path, a, b)
                },
                |()| None,
            ),
        (ours, theirs) if ours == theirs => None,
        (ours, theirs) => here(path, shown(ours), shown(theirs)),
    }
}

/// Whether a recorded text and a live one are the same but for ids, folders and the clock.
fn same_text(recorded: &str, live: &str, pairing: &mut Pairing, folders: &Folders) -> bool {
    if recorded == live {
        return true;
    }
    let live = folders.to_recorded(live);
    let (recorded, live) = (clockless(recorded), clockless(&live));
    if recorded == live {
        return true;
    }
    let Some(id) = ID.as_ref() else {
        return false;
    };
    let ours: Vec<&str> = id.split(&recorded).collect();
    let theirs: Vec<&str> = id.split(&live).collect();
    if ours != theirs {
        return false;
    }
    let (ours, theirs) = (ids_in(&recorded), ids_in(&live));
    ours.len() == theirs.len()
        && ours
            .iter()
            .zip(&theirs)
            .all(|(ours, theirs)| pairing.bind(ours, theirs))
}

/// A value as shown in a report: short, one line.
fn shown(value: &Value) -> String {
    cut(&value.to_string(), 0)
}

/// The two texts around where they first part (after the common start).
fn around_parting(recorded: &str, replayed: &str) -> (String, String) {
    let common = recorded
        .char_indices()
        .zip(replayed.chars())
        .find(|((_, a), b)| a != b)
        .map_or_else(|| recorded.len().min(replayed.len()), |((at, _), _)| at);
    let start = common.saturating_sub(CONTEXT / 2);
    (cut(recorded, start), cut(replayed, start))
}

/// At most [`CONTEXT`] * 2 characters of `text` from about byte `start`, marked where cut.
fn cut(text: &str, start: usize) -> String {
    let start = (0..=start.min(text.len()))
        .rev()
        .find(|at| text.is_char_boundary(*at))
        .unwrap_or(0);
    let rest = &text[start..];
    let shown: String = rest.chars().take(CONTEXT * 2).collect();
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    out.push_str(&shown);
    if shown.len() < rest.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const A: &str = "0195f0a1-aaaa-7bbb-8ccc-0123456789ab";
    const B: &str = "0195f0a1-bbbb-7bbb-8ccc-0123456789ab";

    #[test]
    fn ids_pair_one_to_one_and_a_swapped_id_parts() {
        let mut pairing = Pairing::default();
        let folders = Folders::default();
        let recorded = json!({"threadId": "id-3", "turn": {"id": "id-4"}});
        let live = json!({"threadId": A, "turn": {"id": B}});
        assert_eq!(parting(&recorded, &live, &mut pairing, &folders), None);
        // The same recorded thread must be the same live one after.
        let swapped = json!({"threadId": B, "turn": {"id": A}});
        let found = parting(&recorded, &swapped, &mut pairing, &folders).expect("parts");
        assert_eq!(found.path, "threadId");
    }

    #[test]
    fn folders_clocks_and_times_are_not_differences_but_text_is() {
        let mut pairing = Pairing::default();
        let mut folders = Folders::default();
        folders.add("/home/openclaw/workspace", "/tmp/replay-1/workspace");
        let recorded =
            json!({"text": "<cwd>/home/openclaw/workspace</cwd> on 2026-12-06", "durationMs": 5});
        let live =
            json!({"text": "<cwd>/tmp/replay-1/workspace</cwd> on 2027-01-02", "durationMs": 9});
        assert_eq!(parting(&recorded, &live, &mut pairing, &folders), None);
        let changed = json!({"text": "<cwd>/tmp/replay-1/workspace</cwd> on 2027-01-02 and more"});
        let found = parting(&recorded, &changed, &mut pairing, &folders).expect("parts");
        assert_eq!(found.path, "text");
        assert!(found.replayed.contains("and more"), "{found:?}");
        assert!(found.recorded.contains("/home/openclaw/workspace"));
    }

    #[test]
    fn arrays_part_at_the_first_extra_or_missing_element() {
        let mut pairing = Pairing::default();
        let found = parting(
            &json!({"input": [1, 2]}),
            &json!({"input": [1, 2, 3]}),
            &mut pairing,
            &Folders::default(),
        )
        .expect("parts");
        assert_eq!(
            (
                found.path.as_str(),
                found.recorded.as_str(),
                found.replayed.as_str()
            ),
            ("input[2]", "(absent)", "3")
        );
    }

    #[test]
    fn learned_ids_are_put_back_into_what_is_sent() {
        let mut pairing = Pairing::default();
        pairing.learn(
            &json!({"thread": {"id": "id-3"}}),
            &json!({"thread": {"id": A}}),
        );
        assert_eq!(
            pairing.to_live("resume id-3, not id-30"),
            format!("resume {A}, not id-30")
        );
    }
}

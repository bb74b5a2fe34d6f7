//! The model's side of a replay (`clawbridge replay`): recorded answers, taken by thread and
//! turn.
//!
//! A recorded session holds, beside each model request, the answer it got
//! (`model-requests/<thread>/turn-NN/model-response[.N].json`). Replaying it, the stub must give
//! each new model request the answer its recorded twin got. Order alone cannot tell which that
//! is: two threads' requests race, and a Codex that sends one request more (a title, a
//! compaction) would shift every answer after it. So the book is keyed the way the captures
//! are: the replay driver binds each live thread to the recorded thread it replays (it learns
//! the live id from `thread/start`'s answer, before the thread's first turn), and the book
//! numbers each live thread's turns by the order their ids first reach the model, and the
//! requests of a turn by their order in it. A request with no recorded twin gets a
//! `response.failed` naming what was missing (or, past a fork's turn, the upstream); the book
//! keeps what it served for the replay's report.

use std::collections::{BTreeMap, HashMap};

use serde_json::{json, Value};

/// What the book says to answer a model request with (the stub streams it: `StubStep`).
#[derive(Clone, Debug, PartialEq)]
pub enum BookAnswer {
    /// The recorded answer.
    Recorded(Box<RecordedAnswer>),
    /// The recorded HTTP error status.
    HttpStatus(u16),
    /// A `response.failed` with this message.
    Fail(String),
    /// Past the fork: sent on to this upstream (with this bearer key).
    Forward { url: String, bearer: Option<String> },
}

/// Live threads a book follows at most (a replay opens a handful; a hostile recording cannot
/// make it grow without bound).
const MAX_LIVE_THREADS: usize = 4096;

/// One recorded answer, as the stub streams it back.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecordedAnswer {
    /// The response id the client saw (`rawResponse/completed`), when the transcript kept it.
    pub response_id: Option<String>,
    /// The HTTP status recorded (200 for a stream).
    pub http_status: u16,
    /// `completed`, `failed`, `incomplete`.
    pub status: String,
    /// The output items, in order.
    pub output: Vec<Value>,
    pub usage: Value,
    /// Each message item's text in the pieces it streamed in (the transcript's
    /// `item/agentMessage/delta`), by item id; a message without them streams whole.
    pub deltas: BTreeMap<String, Vec<String>>,
    /// The error of a failed response.
    pub error: Value,
}

impl RecordedAnswer {
    /// The Responses events of this answer, in the order the model sent them.
    pub fn events(&self, fallback_id: &str) -> Vec<Value> {
        let id = self.response_id.as_deref().unwrap_or(fallback_id);
        let mut events = vec![
            json!({"type": "response.created", "response": {"id": id}}),
            json!({"type": "response.in_progress", "response": {"id": id}}),
        ];
        for (index, item) in self.output.iter().enumerate() {
            events.extend(item_events(index, item, &self.deltas));
        }
        if self.status == "failed" {
            let error = if self.error.is_null() {
                json!({"code": "server_error", "message": "the recorded response failed"})
            } else {
                self.error.clone()
            };
            events.push(json!({"type": "response.failed", "response": {"id": id, "error": error}}));
        } else {
            events.push(
                json!({"type": "response.completed", "response": {"id": id, "usage": self.usage}}),
            );
        }
        events
    }
}

/// The events of one output item: a message's text streamed as recorded, any other item added
/// and done whole.
fn item_events(index: usize, item: &Value, deltas: &BTreeMap<String, Vec<String>>) -> Vec<Value> {
    let item_id = item["id"].as_str().unwrap_or_default();
    let text = item["content"]
        .as_array()
        .filter(|_| item["type"] == "message")
        .and_then(|parts| parts.iter().find(|part| part["type"] == "output_text"))
        .and_then(|part| part["text"].as_str());
    let Some(text) = text else {
        return vec![
            json!({"type": "response.output_item.added", "output_index": index, "item": item}),
            json!({"type": "response.output_item.done", "output_index": index, "item": item}),
        ];
    };
    let mut opened = item.clone();
    opened["status"] = json!("in_progress");
    opened["content"] = json!([]);
    let mut events = vec![
        json!({"type": "response.output_item.added", "output_index": index, "item": opened}),
        json!({"type": "response.content_part.added", "item_id": item_id, "output_index": index, "content_index": 0,
               "part": {"type": "output_text", "text": "", "annotations": []}}),
    ];
    // The recorded pieces when they add up to the text; the text whole otherwise.
    let pieces = deltas
        .get(item_id)
        .filter(|pieces| pieces.concat() == text)
        .cloned()
        .unwrap_or_else(|| vec![text.to_string()]);
    for delta in pieces.iter().filter(|delta| !delta.is_empty()) {
        events.push(json!({"type": "response.output_text.delta", "item_id": item_id, "output_index": index, "content_index": 0, "delta": delta}));
    }
    events.push(json!({"type": "response.output_text.done", "item_id": item_id, "output_index": index, "content_index": 0, "text": text}));
    events.push(json!({"type": "response.content_part.done", "item_id": item_id, "output_index": index, "content_index": 0,
                       "part": {"type": "output_text", "text": text, "annotations": []}}));
    events.push(json!({"type": "response.output_item.done", "output_index": index, "item": item}));
    events
}

/// Where a model request of the replay was answered from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Served {
    /// Its recorded twin's answer: the recorded thread, the turn (1-based) and the request in
    /// the turn (1-based).
    Recorded {
        thread: String,
        turn: usize,
        request: usize,
    },
    /// Past the fork's turn: sent to the upstream.
    Upstream {
        thread: String,
        turn: usize,
        request: usize,
    },
    /// Nothing recorded for it: answered `response.failed`, saying why.
    Missing { reason: String },
}

/// A live thread: the recorded thread it replays and its turns so far (id, requests).
#[derive(Debug, Default)]
struct LiveThread {
    recorded: String,
    turns: Vec<(String, usize)>,
}

/// The recorded answers of a session, by recorded thread, turn and request.
#[derive(Debug, Default)]
pub struct ReplayBook {
    recorded: HashMap<String, BTreeMap<usize, Vec<RecordedAnswer>>>,
    live: HashMap<String, LiveThread>,
    served: Vec<Served>,
    /// `--until-turn N --then-upstream URL`: turns past N of every thread go to this base URL
    /// (with this bearer key, if any).
    fork: Option<(usize, String, Option<String>)>,
}

impl ReplayBook {
    /// A book of no answers yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The answers of a recorded thread's turn (`turn` 1-based), in request order.
    pub fn add(&mut self, thread: &str, turn: usize, answers: Vec<RecordedAnswer>) {
        self.recorded
            .entry(thread.to_string())
            .or_default()
            .insert(turn, answers);
    }

    /// Send the turns past `turn` (of every thread) to `upstream` instead.
    pub fn fork_after(&mut self, turn: usize, upstream: String, bearer: Option<String>) {
        self.fork = Some((turn, upstream, bearer));
    }

    /// The live thread `live` replays the recorded thread `recorded`.
    pub fn bind(&mut self, live: &str, recorded: &str) {
        if self.live.len() >= MAX_LIVE_THREADS && !self.live.contains_key(live) {
            return;
        }
        self.live.insert(
            live.to_string(),
            LiveThread {
                recorded: recorded.to_string(),
                turns: Vec::new(),
            },
        );
    }

    /// What was served, in order.
    pub fn served(&self) -> &[Served] {
        &self.served
    }

    /// The answer for a model request with these headers (Codex names the thread and turn in
    /// `x-codex-turn-metadata`).
    pub fn answer(&mut self, headers: &BTreeMap<String, String>) -> BookAnswer {
        let metadata: Value = headers
            .get("x-codex-turn-metadata")
            .and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or(Value::Null);
        let (Some(thread), Some(turn)) =
            (metadata["thread_id"].as_str(), metadata["turn_id"].as_str())
        else {
            return self.missing("a model request that names no thread or turn".to_string());
        };
        let Some(live) = self.live.get_mut(thread) else {
            return self.missing(format!(
                "a model request of a thread the replay did not open ({thread})"
            ));
        };
        let index = match live.turns.iter().position(|(id, _)| id == turn) {
            Some(index) => index,
            None => {
                live.turns.push((turn.to_string(), 0));
                live.turns.len() - 1
            }
        };
        live.turns[index].1 += 1;
        let (turn_number, request) = (index + 1, live.turns[index].1);
        let recorded_thread = live.recorded.clone();
        if let Some((after, upstream, bearer)) = &self.fork {
            if turn_number > *after {
                self.served.push(Served::Upstream {
                    thread: recorded_thread,
                    turn: turn_number,
                    request,
                });
                return BookAnswer::Forward {
                    url: upstream.clone(),
                    bearer: bearer.clone(),
                };
            }
        }
        let answer = self
            .recorded
            .get(&recorded_thread)
            .and_then(|turns| turns.get(&turn_number))
            .and_then(|answers| answers.get(request - 1))
            .cloned();
        match answer {
            Some(answer) => {
                self.served.push(Served::Recorded {
                    thread: recorded_thread,
                    turn: turn_number,
                    request,
                });
                if answer.http_status != 200 && answer.http_status != 0 {
                    return BookAnswer::HttpStatus(answer.http_status);
                }
                BookAnswer::Recorded(Box::new(answer))
            }
            None => self.missing(format!(
                "no recorded answer for thread {recorded_thread}, turn {turn_number}, request {request}"
            )),
        }
    }

    fn missing(&mut self, reason: String) -> BookAnswer {
        self.served.push(Served::Missing {
            reason: reason.clone(),
        });
        BookAnswer::Fail(format!("clawbridge replay: {reason}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(thread: &str, turn: &str) -> BTreeMap<String, String> {
        [(
            "x-codex-turn-metadata".to_string(),
            json!({"thread_id": thread, "turn_id": turn}).to_string(),
        )]
        .into_iter()
        .collect()
    }

    fn text(text: &str) -> RecordedAnswer {
        RecordedAnswer {
            http_status: 200,
            status: "completed".into(),
            output: vec![json!({"type": "message", "id": "m", "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}]})],
            ..Default::default()
        }
    }

    #[test]
    fn answers_go_by_thread_and_turn_whatever_the_order_requests_come_in() {
        let mut book = ReplayBook::new();
        book.add("rec-a", 1, vec![text("a1")]);
        book.add("rec-a", 2, vec![text("a2")]);
        book.add("rec-b", 1, vec![text("b1"), text("b1 again")]);
        book.bind("live-b", "rec-b");
        book.bind("live-a", "rec-a");
        let said = |step: BookAnswer| match step {
            BookAnswer::Recorded(answer) => answer.output[0]["content"][0]["text"].clone(),
            other => json!(format!("{other:?}")),
        };
        assert_eq!(said(book.answer(&headers("live-b", "t1"))), json!("b1"));
        assert_eq!(said(book.answer(&headers("live-a", "t9"))), json!("a1"));
        assert_eq!(said(book.answer(&headers("live-a", "t10"))), json!("a2"));
        assert_eq!(
            said(book.answer(&headers("live-b", "t1"))),
            json!("b1 again")
        );
        // A third request of the same turn has no twin: failed, named.
        assert!(matches!(
            book.answer(&headers("live-b", "t1")),
            BookAnswer::Fail(message) if message.contains("rec-b, turn 1, request 3")
        ));
        assert!(matches!(
            book.answer(&headers("stranger", "t1")),
            BookAnswer::Fail(message) if message.contains("did not open")
        ));
    }

    #[test]
    fn a_fork_sends_the_turns_past_it_upstream() {
        let mut book = ReplayBook::new();
        book.add("rec", 1, vec![text("one")]);
        book.add("rec", 2, vec![text("two")]);
        book.fork_after(1, "http://127.0.0.1:9/v1".into(), None);
        book.bind("live", "rec");
        assert!(matches!(
            book.answer(&headers("live", "t1")),
            BookAnswer::Recorded(_)
        ));
        assert!(
            matches!(book.answer(&headers("live", "t2")), BookAnswer::Forward { url, .. } if url.ends_with("/v1"))
        );
    }

    #[test]
    fn a_message_streams_in_its_recorded_pieces() {
        let mut answer = text("hello there");
        answer
            .deltas
            .insert("m".into(), vec!["hello ".into(), "there".into()]);
        let events = answer.events("resp_1");
        let deltas: Vec<&str> = events
            .iter()
            .filter(|event| event["type"] == "response.output_text.delta")
            .filter_map(|event| event["delta"].as_str())
            .collect();
        assert_eq!(deltas, ["hello ", "there"]);
        // Pieces that do not add up to the text are not trusted: the text goes whole.
        answer.deltas.insert("m".into(), vec!["other".into()]);
        let events = answer.events("resp_1");
        assert_eq!(
            events
                .iter()
                .filter(|event| event["type"] == "response.output_text.delta")
                .count(),
            1
        );
        assert_eq!(
            events.last().map(|event| event["type"].clone()),
            Some(json!("response.completed"))
        );
    }
}

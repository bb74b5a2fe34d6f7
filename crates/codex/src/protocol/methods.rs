//! The Codex requests clawbridge sends, typed: each is a [`Method`] with its name, params and
//! result, declared in its row of the method table ([`super::table`]'s `typed` column) and
//! re-exported here, so no call site spells a method name or builds params by hand. The thread
//! and turn params are [`super::params`]'; the rest, and what clawbridge reads of the answers,
//! are here.

use serde::de::DeserializeOwned;
use serde::Serialize;

pub use super::table::typed::*;

/// A request to Codex: its method name, what it takes and what it answers. The method table
/// declares each (its `typed` column); this module holds what they take and answer.
pub trait Method {
    const NAME: &'static str;
    type Params: Serialize + Send + Sync;
    type Result: DeserializeOwned;
}

/// The params of a request about one thread and nothing else (`thread/unsubscribe`, the
/// endpoint's `thread/resume` of a thread alone).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadIdParams {
    pub thread_id: String,
}

/// What clawbridge says of itself in `initialize`. The fields are in the order the bytes have
/// always had (sorted: `capabilities` before `clientInfo`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeParams {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<InitializeCapabilities>,
    pub client_info: ClientInfo,
}

/// `initialize`'s `clientInfo`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ClientInfo {
    pub name: String,
    pub title: String,
    pub version: String,
}

/// `initialize`'s `capabilities`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeCapabilities {
    pub experimental_api: bool,
}

impl InitializeParams {
    /// clawbridge's own handshake, its version the workspace's (`clawbridge --version`).
    pub fn clawbridge(experimental_api: bool) -> Self {
        InitializeParams {
            capabilities: experimental_api.then_some(InitializeCapabilities {
                experimental_api: true,
            }),
            client_info: ClientInfo {
                name: "clawbridge".into(),
                title: "clawbridge".into(),
                version: env!("CARGO_PKG_VERSION").into(),
            },
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnInterruptParams {
    pub thread_id: String,
    pub turn_id: String,
}

/// What clawbridge reads of a `thread/start` or `thread/resume` answer: the thread's id, which
/// it needs (an answer without one fails the call). The endpoint and the observers read
/// answers through the lenient [`super::inbound::ThreadOpenedAnswer`] instead.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
pub struct ThreadOpened {
    pub thread: OpenedThread,
}

/// See [`ThreadOpened`].
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
pub struct OpenedThread {
    pub id: String,
}

/// What clawbridge reads of a `turn/start` answer: the turn's id.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
pub struct TurnStarted {
    pub turn: StartedTurn,
}

/// See [`TurnStarted`].
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
pub struct StartedTurn {
    pub id: String,
}

/// No params: every loaded thread.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ThreadLoadedListParams {}

/// `thread/loaded/list`'s answer as clawbridge reads it and answers it to a client (`nextCursor`
/// always written: `null` when the list is whole).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadLoadedListResult {
    #[serde(default)]
    pub data: Vec<String>,
    #[serde(default)]
    pub next_cursor: Option<String>,
}

/// `thread/unsubscribe`'s answer: what became of the subscription (`unsubscribed`,
/// `notSubscribed`, `notLoaded`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ThreadUnsubscribeResult {
    pub status: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initialize_keeps_the_bytes_it_always_had() {
        let version = env!("CARGO_PKG_VERSION");
        assert_eq!(
            serde_json::to_string(&InitializeParams::clawbridge(true)).expect("json"),
            format!(
                r#"{{"capabilities":{{"experimentalApi":true}},"clientInfo":{{"name":"clawbridge","title":"clawbridge","version":"{version}"}}}}"#
            )
        );
        assert_eq!(
            serde_json::to_string(&InitializeParams::clawbridge(false)).expect("json"),
            format!(
                r#"{{"clientInfo":{{"name":"clawbridge","title":"clawbridge","version":"{version}"}}}}"#
            )
        );
    }

    #[test]
    fn the_endpoint_s_own_messages_keep_their_bytes() {
        assert_eq!(ThreadReattach::NAME, "thread/resume");
        assert_eq!(
            serde_json::to_string(&ThreadIdParams {
                thread_id: "t".into()
            })
            .expect("json"),
            r#"{"threadId":"t"}"#
        );
        assert_eq!(
            serde_json::to_string(&ThreadLoadedListParams {}).expect("json"),
            "{}"
        );
        let list = ThreadLoadedListResult {
            data: vec!["a".into()],
            next_cursor: None,
        };
        assert_eq!(
            serde_json::to_string(&list).expect("json"),
            r#"{"data":["a"],"nextCursor":null}"#
        );
        let page: ThreadLoadedListResult =
            serde_json::from_str(r#"{"data":["x"],"other":1}"#).expect("lenient");
        assert_eq!(page.data, ["x"]);
        assert_eq!(
            serde_json::to_string(&ThreadUnsubscribeResult {
                status: "unsubscribed"
            })
            .expect("json"),
            r#"{"status":"unsubscribed"}"#
        );
    }

    #[test]
    fn params_are_camel_case_on_the_wire() {
        let interrupt = TurnInterruptParams {
            thread_id: "t".into(),
            turn_id: "u".into(),
        };
        assert_eq!(
            serde_json::to_string(&interrupt).expect("json"),
            r#"{"threadId":"t","turnId":"u"}"#
        );
        let unsubscribe = ThreadIdParams {
            thread_id: "t".into(),
        };
        assert_eq!(
            serde_json::to_string(&unsubscribe).expect("json"),
            r#"{"threadId":"t"}"#
        );
        assert_eq!(TurnInterrupt::NAME, "turn/interrupt");
        assert_eq!(ThreadUnsubscribe::NAME, "thread/unsubscribe");
    }
}

/// The first Codex version known to have `turn/steer`.
pub const TURN_STEER_SINCE: (u64, u64, u64) = (0, 169, 0);

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnSteerParams {
    pub thread_id: String,
    /// Codex refuses the steer unless this is the thread's running turn.
    pub expected_turn_id: String,
    pub input: Vec<super::params::UserInput>,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnSteerResult {
    pub turn_id: String,
}

//! The Codex requests clawbridge sends beyond the thread and turn params, typed: each is a
//! [`Method`] with its name, params and result, so no call site spells a method name or builds
//! params by hand.

use crate::protocol::table::name as method;
use serde::de::{DeserializeOwned, IgnoredAny};
use serde::Serialize;

/// A request to Codex: its method name, what it takes and what it answers.
pub trait Method {
    const NAME: &'static str;
    type Params: Serialize + Send + Sync;
    type Result: DeserializeOwned;
}

/// One [`Method`]: its marker type, the name the method table gives it, what it takes and what
/// it answers.
macro_rules! codex_method {
    ($(#[$doc:meta])* $name:ident = $constant:ident, $params:ty => $result:ty) => {
        $(#[$doc])*
        pub struct $name;

        impl Method for $name {
            const NAME: &'static str = method::$constant;
            type Params = $params;
            type Result = $result;
        }
    };
}

/// The params of a request about one thread and nothing else (`thread/unsubscribe`, the
/// endpoint's `thread/resume` of a thread alone).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadIdParams {
    pub thread_id: String,
}

codex_method! {
    /// `initialize`: the handshake. clawbridge names itself and, when asked, opts into Codex's
    /// experimental API; the answer is kept whole (the endpoint hands the same one to every
    /// client), so it stays a JSON value.
    Initialize = INITIALIZE, InitializeParams => serde_json::Value
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

codex_method! {
    /// `turn/interrupt`: end a running turn (Codex answers `{}` and then `turn/completed`).
    TurnInterrupt = TURN_INTERRUPT, TurnInterruptParams => IgnoredAny
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnInterruptParams {
    pub thread_id: String,
    pub turn_id: String,
}

codex_method! {
    /// `thread/unsubscribe`: let Codex unload a thread nobody follows any more.
    ThreadUnsubscribe = THREAD_UNSUBSCRIBE, ThreadIdParams => IgnoredAny
}

codex_method! {
    /// `thread/resume` with the thread alone: load a thread Codex has on disk onto this
    /// app-server (the endpoint does it before relaying a turn to a member that has not loaded
    /// the thread), keeping what the thread was started with.
    ThreadReattach = THREAD_RESUME, ThreadIdParams => IgnoredAny
}

codex_method! {
    /// `thread/loaded/list`: the threads an app-server holds in memory (one page, no cursor).
    ThreadLoadedList = THREAD_LOADED_LIST, ThreadLoadedListParams => ThreadLoadedListResult
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

codex_method! {
    /// `turn/steer`: add user input to a running turn (Codex 0.169.0 and 0.171.0 measured; the
    /// params are those of both versions' generated schema, `v2/TurnSteerParams.json`).
    TurnSteer = TURN_STEER, TurnSteerParams => TurnSteerResult
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

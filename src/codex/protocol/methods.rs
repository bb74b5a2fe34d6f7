//! The Codex requests clawbridge sends beyond the thread and turn params, typed: each is a
//! [`Method`] with its name, params and result, so no call site spells a method name or builds
//! params by hand.

use serde::de::{DeserializeOwned, IgnoredAny};
use serde::Serialize;

/// A request to Codex: its method name, what it takes and what it answers.
pub trait Method {
    const NAME: &'static str;
    type Params: Serialize + Send + Sync;
    type Result: DeserializeOwned;
}

/// `turn/interrupt`: end a running turn (Codex answers `{}` and then `turn/completed`).
pub struct TurnInterrupt;

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnInterruptParams {
    pub thread_id: String,
    pub turn_id: String,
}

impl Method for TurnInterrupt {
    const NAME: &'static str = "turn/interrupt";
    type Params = TurnInterruptParams;
    type Result = IgnoredAny;
}

/// `thread/unsubscribe`: let Codex unload a thread nobody follows any more.
pub struct ThreadUnsubscribe;

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadUnsubscribeParams {
    pub thread_id: String,
}

impl Method for ThreadUnsubscribe {
    const NAME: &'static str = "thread/unsubscribe";
    type Params = ThreadUnsubscribeParams;
    type Result = IgnoredAny;
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let unsubscribe = ThreadUnsubscribeParams {
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

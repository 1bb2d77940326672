//! Floor 0: the reader of the upstream direction. Most upstream frames are answers to relayed
//! calls, read here without building a tree ([`Reply`]); what that reading cannot settle is read
//! as a whole tree by the caller ([`upstream_status`] is the general reading of the audit word).

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

/// An upstream frame as the relay first reads it: borrowed, no tree built. Presence is what
/// counts (`"id": null` is an id, as in a `Value`), so members are kept raw.
#[derive(Deserialize)]
pub(super) struct Reply<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    pub(super) method: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    pub(super) id: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    error: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    result: Option<&'a RawValue>,
}

/// The one member of a result the audit outcome needs.
#[derive(Deserialize)]
struct ResultFlags<'a> {
    #[serde(borrow, default, rename = "isError", deserialize_with = "present")]
    is_error: Option<&'a RawValue>,
}

/// A member that is there, whatever its value (`null` included).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// Whether `text` is an object: a struct would also accept an array, which is no single
/// JSON-RPC message.
fn is_object(text: &str) -> bool {
    text.trim_start().starts_with('{')
}

/// `text` read as `T` if it is an object that reading takes.
fn read_object<'a, T: Deserialize<'a>>(text: &'a str) -> Option<T> {
    if is_object(text) {
        serde_json::from_str(text).ok()
    } else {
        None
    }
}

impl<'a> Reply<'a> {
    pub(super) fn read(line: &'a str) -> Option<Self> {
        read_object(line)
    }

    /// The audit word for this answer, as [`upstream_status`] says it; `None` when the result
    /// needs the general reading.
    pub(super) fn status(&self) -> Option<&'static str> {
        if self.error.is_some() {
            return Some("error");
        }
        let Some(result) = self.result else {
            return Some("ok");
        };
        if !is_object(result.get()) {
            return Some("ok");
        }
        let flags: ResultFlags<'_> = read_object(result.get())?;
        Some(match flags.is_error.map(RawValue::get) {
            Some("true") => "tool_error",
            _ => "ok",
        })
    }
}

/// A raw JSON-RPC id as a value: keys are made from the value, as the general reading makes
/// them, so both readings agree on every id.
pub(super) fn raw_id(id: &RawValue) -> Option<Value> {
    serde_json::from_str(id.get()).ok()
}

/// The audit word for an upstream answer: a JSON-RPC error, a tool error, or ok.
pub(super) fn upstream_status(frame: &Value) -> &'static str {
    if frame.get("error").is_some() {
        "error"
    } else if frame.pointer("/result/isError") == Some(&Value::Bool(true)) {
        "tool_error"
    } else {
        "ok"
    }
}

/// The key of a JSON-RPC id (its JSON text: `1` and `"1"` stay distinct).
pub(super) fn id_key(id: &Value) -> String {
    id.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quick_reading_of_an_answer_agrees_with_the_full_one() {
        for frame in [
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"isError":true}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"isError":false}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"isError":"true"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{ "isError" : true }}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":[true]}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":null}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}"#,
            r#"{"jsonrpc":"2.0","id":1}"#,
        ] {
            let quick = Reply::read(frame).and_then(|r| r.status());
            let full = upstream_status(&serde_json::from_str(frame).unwrap());
            assert_eq!(quick, Some(full), "{frame}");
        }
    }

    #[test]
    fn what_the_quick_reading_cannot_settle_goes_to_the_full_one() {
        // A duplicated member: a tree keeps the last, the quick reading declines.
        let twice = r#"{"jsonrpc":"2.0","id":1,"result":{"isError":false,"isError":true}}"#;
        assert_eq!(Reply::read(twice).and_then(|r| r.status()), None);
        assert_eq!(
            upstream_status(&serde_json::from_str(twice).unwrap()),
            "tool_error"
        );
        // A batch is no single message, even where a struct reader would take an array.
        assert!(Reply::read(r#"[{"id":1,"result":{}}]"#).is_none());
        assert!(Reply::read("not json").is_none());
    }

    #[test]
    fn a_present_null_id_is_an_id() {
        let r = Reply::read(r#"{"jsonrpc":"2.0","id":null,"error":{}}"#).unwrap();
        assert_eq!(r.id.and_then(raw_id), Some(Value::Null));
        let r = Reply::read(r#"{"method":"notifications/initialized"}"#).unwrap();
        assert!(r.id.is_none());
        // Ids are keyed by value: spacing does not make another id.
        let spaced = Reply::read(r#"{"id" : "a" ,"result":{}}"#).unwrap();
        assert_eq!(
            spaced.id.and_then(raw_id).map(|v| id_key(&v)),
            Some(id_key(&Value::from("a")))
        );
    }
}

//! Removing members from a JSON frame without re-serializing it.
//!
//! The approved retry of a 2026-07-28 multi round-trip call carries the interposer's own
//! `requestState` and its `inputResponses` entry; the upstream must not see them (a real upstream
//! refuses a state it did not seal), but the `arguments` it receives must be the very bytes that
//! were hashed. So members are cut out of the original text by their byte ranges, and every other
//! byte of the frame (including `arguments`, whitespace and member order) is kept.

use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use std::ops::Range;

/// The top-level members of a JSON object text: each key and the byte range of its value in
/// `text`. `None` if `text` is not a JSON object.
fn members(text: &str) -> Option<Vec<(String, Range<usize>)>> {
    struct Members;
    impl<'de> Visitor<'de> for Members {
        type Value = Vec<(String, &'de RawValue)>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some((k, v)) = map.next_entry::<String, &'de RawValue>()? {
                out.push((k, v));
            }
            Ok(out)
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let raw = (&mut de).deserialize_map(Members).ok()?;
    de.end().ok()?;
    let base = text.as_ptr() as usize;
    raw.into_iter()
        .map(|(k, v)| {
            // A RawValue borrowed from `text` is a sub-slice of it: its offset is its position.
            let start = (v.get().as_ptr() as usize).checked_sub(base)?;
            let end = start.checked_add(v.get().len())?;
            (end <= text.len()).then_some((k, start..end))
        })
        .collect()
}

/// Where `part`, a slice borrowed from `text` (a `RawValue` read from it), lies in `text`.
pub(crate) fn range_of(text: &str, part: &str) -> Option<Range<usize>> {
    let start = (part.as_ptr() as usize).checked_sub(text.as_ptr() as usize)?;
    let end = start.checked_add(part.len())?;
    (end <= text.len()).then_some(start..end)
}

/// `text` with the bytes in `at` replaced by `with`.
pub(crate) fn replace(text: &str, at: Range<usize>, with: &str) -> String {
    let mut out = String::with_capacity(text.len() + with.len());
    out.push_str(&text[..at.start]);
    out.push_str(with);
    out.push_str(&text[at.end..]);
    out
}

/// The byte range of member `key`'s value in object `text` (the last one, as serde_json reads
/// duplicates).
pub(crate) fn member(text: &str, key: &str) -> Option<Range<usize>> {
    members(text)?
        .into_iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, r)| r)
}

/// Object `text` without every member named `key`; `None` if `text` is not an object. The
/// separating comma goes with the removed member; nothing else changes.
pub(crate) fn without(text: &str, key: &str) -> Option<String> {
    let mut text = text.to_owned();
    // One member at a time (duplicates are rare): each cut is computed on the current text.
    loop {
        let all = members(&text)?;
        let Some(i) = all.iter().position(|(k, _)| k == key) else {
            return Some(text);
        };
        let value = all.get(i)?.1.clone();
        let previous = i.checked_sub(1).and_then(|p| all.get(p));
        let range = if let Some((_, previous)) = previous {
            // From the end of the previous value: `, "key": value`.
            previous.end..value.end
        } else {
            // The first member: from after `{` up to and including the comma after it, if any.
            let open = text.find('{')? + 1;
            let rest = &text[value.end..];
            let gap = rest.len() - rest.trim_start().len();
            match rest.trim_start().strip_prefix(',') {
                Some(_) => open..value.end + gap + 1,
                None => open..value.end,
            }
        };
        text.replace_range(range, "");
    }
}

/// Whether object `text` has no members.
pub(crate) fn is_empty_object(text: &str) -> bool {
    members(text).is_some_and(|m| m.is_empty())
}

/// `line` with its top-level `id` replaced by the JSON text `id`.
pub(crate) fn with_id(line: &str, id: &str) -> Option<String> {
    let at = member(line, "id")?;
    Some(replace(line, at, id))
}

/// A `notifications/cancelled` line with `params.requestId` replaced by the JSON text `id`.
pub(crate) fn with_request_id(line: &str, id: &str) -> Option<String> {
    let params = member(line, "params")?;
    let inner = member(&line[params.clone()], "requestId")?;
    let at = params.start + inner.start..params.start + inner.end;
    Some(replace(line, at, id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_is_cut_out_and_every_other_byte_is_kept() {
        let t = r#"{"a" : 1,  "b":{"x": [1,2]} ,"c":"z"}"#;
        assert_eq!(without(t, "b").unwrap(), r#"{"a" : 1 ,"c":"z"}"#);
        assert_eq!(without(t, "a").unwrap(), r#"{  "b":{"x": [1,2]} ,"c":"z"}"#);
        assert_eq!(without(t, "c").unwrap(), r#"{"a" : 1,  "b":{"x": [1,2]}}"#);
        assert_eq!(without(t, "nope").unwrap(), t);
        assert_eq!(without(r#"{ "only": 1 }"#, "only").unwrap(), "{ }");
        assert!(is_empty_object(
            &without(r#"{ "only": 1 }"#, "only").unwrap()
        ));
        // Duplicates all go; neighbours survive.
        let d = r#"{"k":1,"k":2,"m":3}"#;
        assert_eq!(without(d, "k").unwrap(), r#"{"m":3}"#);
        let d = r#"{"m":3,"k":1,"k":2}"#;
        assert_eq!(without(d, "k").unwrap(), r#"{"m":3}"#);
        for text in [t, d] {
            for key in ["a", "b", "c", "k", "m"] {
                let out = without(text, key).unwrap();
                assert!(
                    serde_json::from_str::<serde_json::Value>(&out).is_ok(),
                    "{out}"
                );
            }
        }
    }

    #[test]
    fn escaped_keys_and_non_objects() {
        let t = r#"{"re\u0071uestState":"s","arguments":{"p":"\u00e9"}}"#;
        let out = without(t, "requestState").unwrap();
        assert_eq!(out, r#"{"arguments":{"p":"\u00e9"}}"#);
        assert_eq!(
            member(t, "arguments").map(|r| &t[r]),
            Some(r#"{"p":"\u00e9"}"#)
        );
        assert!(without("[1]", "a").is_none());
        assert!(without("{\"a\":1} x", "a").is_none());
    }

    #[test]
    fn ids_are_swapped_in_the_text_and_nothing_else_changes() {
        let line = r#"{"jsonrpc":"2.0", "id" : 7 ,"method":"x","params":{"id":1}}"#;
        assert_eq!(
            with_id(line, r#""cs-1""#).unwrap(),
            r#"{"jsonrpc":"2.0", "id" : "cs-1" ,"method":"x","params":{"id":1}}"#
        );
        let cancel = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a","reason":"r"}}"#;
        assert_eq!(
            with_request_id(cancel, r#""cs-9""#).unwrap(),
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"cs-9","reason":"r"}}"#
        );
        assert_eq!(with_request_id(r#"{"params":{}}"#, "1"), None);
    }
}

//! Floor 9: the dispatcher of the upstream direction. An answer to a request the interposer
//! forwarded goes back under the client's own id; on the way, the answers the interposer tracks
//! are read (the negotiated revision, the catalog, a call's audit outcome, a continuation pass).
//! Everything else passes as it is.

use super::interposer::{Interposer, Lines};
use super::outbox::{Effect, Outbox, Record};
use super::outcome;
use super::session::{ClientId, Forwarded};
use super::upstream_reader::{Reply, id_key, raw_id, upstream_status};
use crate::config::{ListedTool, Rule};
use crate::tasks;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::io::{AsyncBufRead, AsyncBufReadExt as _};

impl Interposer {
    pub(super) async fn upstream_loop<R: AsyncBufRead + Unpin>(
        self: Arc<Self>,
        input: R,
        to_client: Lines,
    ) -> std::io::Result<()> {
        let mut lines = input.lines();
        while let Some(line) = lines.next_line().await? {
            if let Some(line) = self.upstream_message(line) {
                Outbox::client(&self, &to_client).send(Effect::Client(line));
            }
        }
        Ok(())
    }

    /// One message from the upstream (a stdio line, an HTTP body, an SSE event's data), as the
    /// client is to get it; `None` for the answer to a call a task ran, which ends the task and
    /// is nobody's to relay.
    pub(crate) fn upstream_message(&self, line: String) -> Option<String> {
        let line = self.upstream_frame(line);
        self.task_answer(line)
    }

    /// One frame from the upstream, as the client is to get it. Most frames are answers to
    /// relayed calls: read without building a tree, and only the ids the interposer tracks
    /// matter.
    fn upstream_frame(&self, line: String) -> String {
        let Some(reply) = Reply::read(&line) else {
            return self.upstream_frame_general(line);
        };
        if reply.method.is_some() {
            return line;
        }
        let Some(raw) = reply.id else {
            return line;
        };
        let Some(id) = raw_id(raw) else {
            return line;
        };
        let key = id_key(&id);
        let id_at = crate::splice::range_of(&line, raw.get());
        let (client, forwarded) = {
            let mut s = self.session();
            if s.initialize_ids.contains(&key)
                || s.list_ids.contains(&key)
                || s.discover_ids.contains(&key)
            {
                drop(s);
                return self.upstream_frame_general(line);
            }
            (s.answered(&key), s.forwarded.remove(&key))
        };
        if let Some(f) = forwarded {
            let status = reply.status();
            let upstream = self.answer_word(&f, &line, status);
            self.record_answer(f, upstream);
        }
        match (client, id_at) {
            (Some(client), Some(at)) => crate::splice::replace(&line, at, &client.raw),
            _ => line,
        }
    }

    /// The audit word for the upstream's answer `line` to forwarded call `f`; `quick` is the
    /// borrowed reading's, if it settled one. The answer to an approved call is read whole: it
    /// may ask for input, and its `requestState` then becomes a pass.
    fn answer_word(&self, f: &Forwarded, line: &str, quick: Option<&'static str>) -> &'static str {
        if f.bound.is_none() {
            return quick.unwrap_or_else(|| {
                serde_json::from_str::<Value>(line).map_or("ok", |v| upstream_status(&v))
            });
        }
        let frame: Value = serde_json::from_str(line).unwrap_or_default();
        if self.asks_for_input(f, &frame) {
            return outcome::INPUT_REQUIRED;
        }
        quick.unwrap_or_else(|| upstream_status(&frame))
    }

    /// An upstream frame read as a whole tree: the answers to `initialize` and `tools/list`,
    /// and whatever the borrowed reading declined.
    fn upstream_frame_general(&self, line: String) -> String {
        let Ok(mut frame) = serde_json::from_str::<Value>(&line) else {
            return line;
        };
        if frame.get("method").is_some() {
            return line;
        }
        let Some(key) = frame.get("id").map(id_key) else {
            return line;
        };
        let mut s = self.session();
        let back = Back(s.answered(&key));
        if let Some(at) = s.initialize_ids.iter().position(|i| *i == key) {
            s.initialize_ids.swap_remove(at);
            if let Some(v) = frame
                .pointer("/result/protocolVersion")
                .and_then(Value::as_str)
            {
                s.client.revision = Some(v.to_owned());
            }
            s.upstream_lists_tasks = frame.pointer("/result/capabilities/tasks/list").is_some();
            drop(s);
            if self.session_takes_tasks()
                && let Some(result) = frame.get_mut("result")
            {
                tasks::add_capability(result);
                return back.rewritten(frame);
            }
            return back.unchanged(line);
        }
        if let Some(at) = s.discover_ids.iter().position(|i| *i == key) {
            s.discover_ids.swap_remove(at);
            drop(s);
            if self.config().tasks
                && let Some(result) = frame.get_mut("result")
            {
                tasks::add_extension(result);
                return back.rewritten(frame);
            }
            return back.unchanged(line);
        }
        if let Some(at) = s.list_ids.iter().position(|i| *i == key) {
            s.list_ids.swap_remove(at);
            drop(s);
            return match self.tools_listed(&mut frame) {
                true => back.rewritten(frame),
                false => back.unchanged(line),
            };
        }
        if let Some(f) = s.forwarded.remove(&key) {
            drop(s);
            let upstream = if self.asks_for_input(&f, &frame) {
                outcome::INPUT_REQUIRED
            } else {
                upstream_status(&frame)
            };
            self.record_answer(f, upstream);
        }
        back.unchanged(line)
    }

    /// The audit outcome of forwarded call `f`, now that the upstream answered it `upstream`.
    fn record_answer(&self, f: Forwarded, upstream: &'static str) {
        let call_id = f.call_id.clone();
        let record = Record::answered(f, upstream);
        Outbox::log(self).send(Effect::Record { call_id, record });
    }

    /// Remember a `tools/list` result; with a description suffix configured, append it to every
    /// tool that would be held (and offer tasks for them). Whether `frame` was changed.
    fn tools_listed(&self, frame: &mut Value) -> bool {
        let Some(catalog) = catalog(frame) else {
            return false;
        };
        // A paginated list is merged into what the earlier pages said.
        let paginated = frame.pointer("/result/nextCursor").is_some();
        {
            let mut s = self.session();
            match (&mut s.catalog, paginated) {
                (Some(existing), true) => existing.extend(catalog.clone()),
                _ => s.catalog = Some(catalog.clone()),
            }
        }
        let offer_tasks = self.session_takes_tasks();
        self.mark_held(frame, &catalog, offer_tasks).is_some()
    }

    /// Tell the client which listed tools are held: the description suffix, and the offer of a
    /// task. `Some` only when a tool's entry was changed: a list with nothing to mark is relayed
    /// byte for byte as the upstream wrote it, not re-serialized.
    fn mark_held(
        &self,
        frame: &mut Value,
        catalog: &HashMap<String, ListedTool>,
        offer_tasks: bool,
    ) -> Option<()> {
        let config = self.config();
        let suffix = config.hold_description_suffix.as_deref();
        if suffix.is_none() && !offer_tasks {
            return None;
        }
        let tools = frame.pointer_mut("/result/tools")?.as_array_mut()?;
        let mut changed = false;
        for t in tools {
            let Some(name) = t.get("name").and_then(Value::as_str) else {
                continue;
            };
            if !matches!(config.rule(name, catalog.get(name)), Rule::Hold(_)) {
                continue;
            }
            let description =
                suffix.map(
                    |suffix| match t.get("description").and_then(Value::as_str) {
                        Some(d) if !d.is_empty() => format!("{d} {suffix}"),
                        _ => suffix.to_owned(),
                    },
                );
            let Some(o) = t.as_object_mut() else {
                continue;
            };
            if let Some(description) = description {
                o.insert("description".into(), description.into());
                changed = true;
            }
            if offer_tasks {
                // The interposer can run a held call as a task, whatever the upstream can; a
                // tool whose upstream requires tasks keeps saying so (docs/MCP.md, "Tasks").
                let execution = o.entry("execution").or_insert_with(|| json!({}));
                if let Some(e) = execution.as_object_mut()
                    && e.get("taskSupport").and_then(Value::as_str) != Some("required")
                {
                    e.insert("taskSupport".into(), "optional".into());
                    changed = true;
                }
            }
        }
        changed.then_some(())
    }

    /// A forwarded request whose answer will never come (the upstream could not be reached, or
    /// the session ended): its audit outcome says so.
    /// `id` is the client's: the id the request went upstream under is looked up.
    pub(crate) fn no_answer(&self, id: &Value) {
        let upstream = self.session().outbound_by_client.get(&id_key(id)).cloned();
        if let Some(key) = upstream {
            self.no_answer_upstream(&key);
        }
    }

    /// [`Self::no_answer`] by the key of the id the request went upstream under.
    pub(super) fn no_answer_upstream(&self, key: &str) {
        let key = key.to_owned();
        Outbox::log(self).send(Effect::NoAnswer { key });
    }

    /// The session is over: parked responses are dropped (their approvals stay pending) and
    /// forwarded calls still unanswered are audited `no_answer`.
    pub(crate) fn end_session(&self) {
        let keys: Vec<String> = {
            let mut s = self.session();
            s.drop_pending_answers();
            s.forwarded.keys().cloned().collect()
        };
        for key in keys {
            self.no_answer_upstream(&key);
        }
    }
}

/// The catalog a `tools/list` result gives: each tool's name and its read-only hint.
fn catalog(frame: &Value) -> Option<HashMap<String, ListedTool>> {
    let tools = frame.pointer("/result/tools")?.as_array()?;
    let mut catalog = HashMap::new();
    for t in tools {
        if let Some(name) = t.get("name").and_then(Value::as_str) {
            let read_only_hint = t.pointer("/annotations/readOnlyHint") == Some(&Value::Bool(true));
            catalog.insert(name.to_owned(), ListedTool { read_only_hint });
        }
    }
    Some(catalog)
}

/// The client an answer goes back to, if it answers a forwarded request.
struct Back(Option<ClientId>);

impl Back {
    /// The line itself with the client's id back, for an answer passed on unchanged.
    fn unchanged(&self, line: String) -> String {
        match &self.0 {
            Some(c) => crate::splice::with_id(&line, &c.raw).unwrap_or(line),
            None => line,
        }
    }

    /// A frame rewritten as a tree carries the client's id too.
    fn rewritten(&self, mut frame: Value) -> String {
        if let Some(c) = &self.0
            && let Ok(id) = serde_json::from_str::<Value>(&c.raw)
            && let Some(o) = frame.as_object_mut()
        {
            o.insert("id".into(), id);
        }
        frame.to_string()
    }
}

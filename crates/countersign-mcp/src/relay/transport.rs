//! Floor 10, beside the stdio loop: the entrances of a transport that carries each message on a
//! request of its own (HTTP: a POST, its answer, an event stream). The transport moves bytes and
//! sets status codes; what the relay does about a message still goes through the outbox, as on
//! stdio: a refused body's answer, a request its client stopped waiting for, a call that got no
//! answer.

use super::client::inadmissible_error;
use super::interposer::{Interposer, Lines};
use super::outbox::{Effect, Outbox};
use super::upstream_reader::id_key;
use crate::admission::{self, Rejection};
use serde_json::Value;

impl Interposer {
    /// Refuse a body admission did not take (a body is one message: even a batch gets one
    /// error, under the id that can be read, else `null`): its answer goes to `to_client`.
    pub(crate) fn refuse_body(&self, body: &[u8], why: &Rejection, to_client: &Lines) {
        let id = admission::recover_id(body).unwrap_or(Value::Null);
        let answer = inadmissible_error(&id, why).to_string();
        Outbox::client(self, to_client).send(Effect::Client(answer));
    }

    /// The client closed request `id` while the interposer was still deciding it (a parked
    /// retry): as for a `notifications/cancelled`, only its answer is dropped; the approval
    /// stays pending, and whatever the relay still forwards is forwarded.
    pub(crate) fn abandoned(&self, id: &Value) {
        let id = id.clone();
        Outbox::log(self).send(Effect::Abandon { id });
    }

    /// The call a task ran, forwarded under the interposer's own id `id`, got no JSON-RPC
    /// answer: its outcome line says so (no client id to map), and its task fails rather than
    /// wait for nothing.
    pub(crate) fn task_call_unanswered(&self, id: &Value) {
        let key = id_key(id);
        Outbox::log(self).send(Effect::NoAnswer { key });
        self.task_unanswered(id);
    }
}

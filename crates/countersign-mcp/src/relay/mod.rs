//! The relay: newline-delimited JSON-RPC between one client and one server. Every client frame is
//! admitted first ([`crate::admission`]): one that is not is answered with its error and nothing
//! of it goes upstream. An admitted frame the relay does not decode is forwarded as the line it
//! arrived as, a request under an id of the interposer's own (the client's comes back on the
//! answer); a `tools/call` that is forwarded is its original line too, so the upstream receives
//! the bytes that were hashed (an approved 2026-07-28 retry loses only the interposer's own
//! `requestState` and `inputResponses` entry, cut out of the line: see [`crate::splice`]).
//!
//! The relay is built in floors; a file imports only from the floors below it.
//!
//! | floor | file | what it is |
//! |---|---|---|
//! | 0 | `client_reader`, `upstream_reader`, `outcome` | one reader per direction (a `tools/call` is decoded once into a typed frame); the audit words |
//! | 1 | `shared` | what every session shares: policy, service, audit log, tickets, ids, passes |
//! | 2 | `session` | what one session owns: the id map, the calls being decided, its tasks |
//! | 3 | `interposer` | the type: shared state, session state, agent; small accessors |
//! | 4 | `outbox`, `record` | every effect, as a value: forward, answer, refuse, record; an outcome line's members |
//! | 5 | `release` | `release()`, the checks before a held call runs, and `settle()`, its one entrance |
//! | 6 | `ticket`, `continuation` | the one ticket opener; nested multi round trips |
//! | 7 | `task` | the task driver and `tasks/*` |
//! | 8 | `hold`, `task_request` | a call refused or held, from its decision to its verdict; `tasks/*` |
//! | 9 | `client`, `upstream` | one dispatcher per direction |
//! | 10 | this file, `transport` | the stdio run loop; the entrances of the HTTP transport |

mod client;
mod client_reader;
mod continuation;
mod hold;
mod interposer;
mod outbox;
mod outcome;
mod record;
mod release;
mod session;
mod shared;
mod task;
mod task_request;
mod ticket;
mod transport;
mod upstream;
mod upstream_reader;

pub(crate) use interposer::Lines;
pub use interposer::{Interposer, Settings};
pub use shared::now_rfc3339;

use std::sync::Arc;
use tokio::io::{AsyncBufRead, AsyncWrite, AsyncWriteExt as _};
use tokio::sync::mpsc;

/// Most bytes a relay writer gathers into one write.
const WRITE_BATCH_BYTES: usize = 1 << 20;

impl Interposer {
    /// Relay until the client closes its side; then close the upstream's input, wait for its
    /// output to end, and close the audit record.
    pub async fn run<CR, CW, UR, UW>(
        self: Arc<Self>,
        client_in: CR,
        client_out: CW,
        upstream_in: UR,
        upstream_out: UW,
    ) -> std::io::Result<()>
    where
        CR: AsyncBufRead + Unpin + Send + 'static,
        CW: AsyncWrite + Unpin + Send + 'static,
        UR: AsyncBufRead + Unpin + Send + 'static,
        UW: AsyncWrite + Unpin + Send + 'static,
    {
        let (to_client, client_rx) = mpsc::unbounded_channel::<String>();
        let (to_upstream, upstream_rx) = mpsc::unbounded_channel::<String>();
        let client_writer = tokio::spawn(write_lines(client_rx, client_out));
        let upstream_writer = tokio::spawn(write_lines(upstream_rx, upstream_out));
        let from_upstream = {
            let me = self.clone();
            let to_client = to_client.clone();
            tokio::spawn(async move { me.upstream_loop(upstream_in, to_client).await })
        };
        let result = self
            .clone()
            .client_loop(client_in, to_client.clone(), to_upstream.clone())
            .await;
        // The client is gone: parked responses have nobody to go to (their approvals stay
        // pending at the service), and no held call is collected for it any more; closing the
        // upstream's input asks it to exit.
        self.session().drop_pending_answers();
        self.withdraw_on_disconnect().await;
        drop(to_upstream);
        let _ = upstream_writer.await;
        let _ = from_upstream.await;
        drop(to_client);
        let _ = client_writer.await;
        // Forwarded calls the upstream never answered.
        let keys: Vec<String> = self.session().forwarded.keys().cloned().collect();
        for key in keys {
            self.no_answer_upstream(&key);
        }
        self.shared.audit.close();
        result
    }

    /// With `cancel_on_disconnect`, when the client has left (stdio: it closed its side; HTTP:
    /// it ended its session with DELETE), withdraw the approvals it left pending whose ticket is
    /// still open here (one decided or collected meanwhile is left alone). The service settles
    /// each DENIED `cancelled` and logs it; the ticket is closed, so a later identical call opens
    /// a new approval. Best effort: an unreachable service leaves the approval to expire.
    pub(crate) async fn withdraw_on_disconnect(&self) {
        if !self.config().cancel_on_disconnect {
            return;
        }
        let held = std::mem::take(&mut self.session().held);
        for (op_hash, approval_id) in held {
            if !self.shared.ticket_open(&op_hash, &approval_id) {
                continue;
            }
            self.shared.gateway.withdraw(&approval_id).await;
            self.drop_ticket(&op_hash);
            tracing::info!(approval_id, "client disconnected: approval withdrawn");
        }
    }
}

async fn write_lines<W: AsyncWrite + Unpin>(
    mut rx: mpsc::UnboundedReceiver<String>,
    mut out: W,
) -> std::io::Result<()> {
    // Every line queued by the time the writer wakes goes out in one write: one syscall per
    // burst, and no added latency for a line alone.
    let mut buf = Vec::new();
    while let Some(line) = rx.recv().await {
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
        while buf.len() < WRITE_BATCH_BYTES {
            let Ok(line) = rx.try_recv() else { break };
            buf.extend_from_slice(line.as_bytes());
            buf.push(b'\n');
        }
        out.write_all(&buf).await?;
        out.flush().await?;
        buf.clear();
        if buf.capacity() > WRITE_BATCH_BYTES {
            buf.shrink_to(WRITE_BATCH_BYTES);
        }
    }
    out.flush().await?;
    out.shutdown().await
}

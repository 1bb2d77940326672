//! The interposer's own audit log: the service's line format and seal (`countersign audit verify`
//! checks it), with MCP kinds. Seed 000's rule: the record of a call closes at once (intent, then
//! outcome); only a response may park.

use countersign_server::audit::{AuditEvent, AuditSealer, GENESIS_HASH, line_hash};
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::io::Write as _;
use std::path::Path;
use std::sync::Mutex;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// A held call the log says is waiting for a verdict (rebuilt at start).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenTicket {
    pub approval_id: String,
    pub expires_at: Option<String>,
}

struct Tail {
    file: Option<std::fs::File>,
    seq: u64,
    prev: [u8; 32],
}

/// An append-only, sealed log (or nothing, when not configured).
pub struct AuditLog {
    sealer: Option<AuditSealer>,
    tail: Mutex<Tail>,
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditLog")
            .field("enabled", &self.sealer.is_some())
            .finish_non_exhaustive()
    }
}

/// What the interposer writes about one outcome.
#[derive(Debug, Clone, Default)]
pub struct Outcome<'a> {
    pub outcome: &'a str,
    pub op_hash: &'a str,
    pub approval_id: Option<&'a str>,
    pub approval_ref: Option<&'a str>,
    pub reason_code: Option<&'a str>,
    pub expires_at: Option<&'a str>,
    pub upstream: Option<&'a str>,
}

fn now() -> String {
    OffsetDateTime::now_utc()
        .format(&Rfc3339)
        .unwrap_or_default()
}

impl AuditLog {
    /// No log.
    pub fn disabled() -> Self {
        Self {
            sealer: None,
            tail: Mutex::new(Tail {
                file: None,
                seq: 0,
                prev: GENESIS_HASH,
            }),
        }
    }

    /// Open (or create) the log at `path`, sealed with the key at `key`; returns the log and the
    /// tickets it still has open (a `pending_approval` with no later executed or denied line for
    /// the same op_hash).
    pub fn open(path: &Path, key: &Path) -> anyhow::Result<(Self, HashMap<String, OpenTicket>)> {
        use anyhow::Context as _;
        let sealer = AuditSealer::load_or_create(key)?;
        // The verifying key beside the seed, for `audit verify --interposer-key` (the seed is
        // private; what it verifies is not).
        let mut public = key.as_os_str().to_owned();
        public.push(".pub");
        let public = std::path::PathBuf::from(public);
        if !public.exists() {
            std::fs::write(&public, format!("{}\n", sealer.public_key_b64()))
                .with_context(|| format!("writing {}", public.display()))?;
        }
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        let mut seq = 0;
        let mut prev = GENESIS_HASH;
        let mut tickets = HashMap::new();
        for line in text.lines() {
            seq += 1;
            prev = line_hash(line);
            let Ok(Value::Object(o)) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            if o.get("kind").and_then(Value::as_str) != Some("mcp_outcome") {
                continue;
            }
            let s = |k: &str| o.get(k).and_then(Value::as_str).map(str::to_owned);
            let Some(op_hash) = s("op_hash") else {
                continue;
            };
            match s("outcome").as_deref() {
                Some("pending_approval") => {
                    if let Some(approval_id) = s("approval_id") {
                        tickets.insert(
                            op_hash,
                            OpenTicket {
                                approval_id,
                                expires_at: s("expires_at"),
                            },
                        );
                    }
                }
                Some("executed" | "denied") => {
                    tickets.remove(&op_hash);
                }
                _ => {}
            }
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        Ok((
            Self {
                sealer: Some(sealer),
                tail: Mutex::new(Tail {
                    file: Some(file),
                    seq,
                    prev,
                }),
            },
            tickets,
        ))
    }

    fn append(&self, body: Value) {
        let Some(sealer) = &self.sealer else {
            return;
        };
        let Value::Object(map) = body else {
            return;
        };
        let mut tail = self.tail.lock().unwrap_or_else(|p| p.into_inner());
        let seq = tail.seq + 1;
        let sealed = sealer.seal(seq, &tail.prev, &AuditEvent::from_body(map));
        let Some(file) = tail.file.as_mut() else {
            return;
        };
        // One write per line: a crash leaves at most a torn last line, which verify reports.
        match file.write_all(format!("{}\n", sealed.line).as_bytes()) {
            Ok(()) => {
                tail.seq = seq;
                tail.prev = sealed.hash;
            }
            Err(e) => tracing::error!("audit log write failed: {e}"),
        }
    }

    /// The intent of a call, written before anything is done with it.
    pub fn call(
        &self,
        call_id: &str,
        agent_id: &str,
        server_id: &str,
        tool_name: &str,
        op_hash: &str,
        rule: &str,
    ) {
        self.append(json!({
            "kind": "mcp_call",
            "ts": now(),
            "call_id": call_id,
            "agent_id": agent_id,
            "server_id": server_id,
            "tool_name": tool_name,
            "op_hash": op_hash,
            "rule": rule,
        }));
    }

    /// The outcome of a call.
    pub fn outcome(&self, call_id: &str, o: &Outcome<'_>) {
        let mut body = Map::new();
        body.insert("kind".into(), "mcp_outcome".into());
        body.insert("ts".into(), now().into());
        body.insert("call_id".into(), call_id.into());
        body.insert("outcome".into(), o.outcome.into());
        body.insert("op_hash".into(), o.op_hash.into());
        for (k, v) in [
            ("approval_id", o.approval_id),
            ("approval_ref", o.approval_ref),
            ("reason_code", o.reason_code),
            ("expires_at", o.expires_at),
            ("upstream", o.upstream),
        ] {
            if let Some(v) = v {
                body.insert(k.into(), v.into());
            }
        }
        self.append(Value::Object(body));
    }

    /// The clean end of this log's writer: intents still without outcome become violations.
    pub fn close(&self) {
        self.append(json!({ "kind": "mcp_close", "ts": now() }));
    }

    /// The verifying key (base64url), when the log is enabled.
    pub fn public_key(&self) -> Option<String> {
        self.sealer.as_ref().map(AuditSealer::public_key_b64)
    }
}

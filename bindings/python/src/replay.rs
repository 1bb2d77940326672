//! Replay state shared by every thread (memory) or every process (SQLite) of a gateway.
//!
//! The core reads the state during verification (`is_spent`, `sign_count`) and records the
//! verified entries at the end. Several threads verify at once here (the GIL is released), and
//! several processes may share one SQLite file, so reading and recording are not one atomic
//! step. The binding closes that gap the way the service's store does: the core's `record` calls
//! are buffered, then committed in one transaction that re-checks every entry against the state
//! as it is *at commit*, with the core's own rules (a spent nonce is `replayed`; a counter not
//! above the recorded one, unless both are 0, is `counter_regression`). If a concurrent verifier
//! got there first, nothing is recorded and the verdict becomes that DENY: exactly the verdict
//! the core gives when the two verifications run one after the other.
//!
//! A spend is an `INSERT` into a table keyed by the nonce; the counter advance is a conditional
//! update (`max`). Failing to read or write the state raises `ReplayStateError`: it is never a
//! reason to proceed.

use crate::verdict::Verdict;
use countersign::webauthn::{AssertionError, AuthDataError};
use countersign::{ApprovalResult, Effect, EvidenceError, IdentityAssurance, VerifyError, b64};
use pyo3::create_exception;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

create_exception!(
    countersign,
    ReplayStateError,
    PyRuntimeError,
    "The replay state could not be read or written (e.g. the SQLite file is unreachable).\n\n\
     Never a reason to proceed: no verdict was reached."
);

/// Why the state could not be used.
#[derive(Debug)]
pub(crate) struct StoreError(String);

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        Self(e.to_string())
    }
}

pub(crate) fn to_py(e: StoreError) -> PyErr {
    ReplayStateError::new_err(format!("replay state: {}", e.0))
}

/// One verified entry the core asked to record.
#[derive(Debug, Clone)]
pub(crate) struct Spend {
    nonce: Vec<u8>,
    credential_id: Vec<u8>,
    sign_count: u32,
}

/// Why a commit was refused: another verifier recorded first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Conflict {
    Replayed,
    CounterRegression { stored: u32 },
}

/// The core's rules for one entry against the state as it is now.
fn conflict(spent: bool, known: Option<u32>, got: u32) -> Option<Conflict> {
    if spent {
        return Some(Conflict::Replayed);
    }
    match known {
        Some(stored) if !(got == 0 && stored == 0) && got <= stored => {
            Some(Conflict::CounterRegression { stored })
        }
        _ => None,
    }
}

/// Storage for spent nonces and counters.
pub(crate) trait Store: Send + Sync {
    fn is_spent(&self, nonce: &[u8]) -> Result<bool, StoreError>;
    fn sign_count(&self, credential_id: &[u8]) -> Result<Option<u32>, StoreError>;
    /// Atomically: check every spend against the state before this commit; if none conflicts,
    /// spend every nonce and advance every counter; else record nothing and name the first
    /// conflicting entry.
    fn commit(&self, spends: &[Spend]) -> Result<Option<(usize, Conflict)>, StoreError>;
    fn spent_count(&self) -> Result<u64, StoreError>;
    fn describe(&self) -> String;
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave the sets half-updated (each update is one
    // insert), so a poisoned lock is still consistent.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One process's state, shared by its threads.
#[derive(Debug, Default)]
struct Memory {
    inner: Mutex<Sets>,
}

/// Spent nonces, and the highest counter per credential id.
#[derive(Debug, Default)]
struct Sets(HashSet<Vec<u8>>, HashMap<Vec<u8>, u32>);

impl Store for Memory {
    fn is_spent(&self, nonce: &[u8]) -> Result<bool, StoreError> {
        Ok(lock(&self.inner).0.contains(nonce))
    }
    fn sign_count(&self, credential_id: &[u8]) -> Result<Option<u32>, StoreError> {
        Ok(lock(&self.inner).1.get(credential_id).copied())
    }
    fn commit(&self, spends: &[Spend]) -> Result<Option<(usize, Conflict)>, StoreError> {
        let mut guard = lock(&self.inner);
        let Sets(spent, counters) = &mut *guard;
        for (i, s) in spends.iter().enumerate() {
            let found = conflict(
                spent.contains(&s.nonce),
                counters.get(&s.credential_id).copied(),
                s.sign_count,
            );
            if let Some(c) = found {
                return Ok(Some((i, c)));
            }
        }
        for s in spends {
            spent.insert(s.nonce.clone());
            let entry = counters
                .entry(s.credential_id.clone())
                .or_insert(s.sign_count);
            *entry = (*entry).max(s.sign_count);
        }
        Ok(None)
    }
    fn spent_count(&self) -> Result<u64, StoreError> {
        Ok(u64::try_from(lock(&self.inner).0.len()).unwrap_or(u64::MAX))
    }
    fn describe(&self) -> String {
        "memory".into()
    }
}

/// A SQLite file several processes may share (WAL, busy timeout, immediate transactions).
#[derive(Debug)]
struct Sqlite {
    path: PathBuf,
    conn: Mutex<Connection>,
}

/// The schema of the Rust client's `ReplayStore::sqlite` (countersign-client), so a Rust gateway
/// and a Python one can share one file (`DIR/countersign-replay.sqlite3`).
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS spent_nonces (
    nonce         BLOB PRIMARY KEY,
    credential_id BLOB NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sign_counts (
    credential_id BLOB PRIMARY KEY,
    sign_count    INTEGER NOT NULL
) WITHOUT ROWID;
";

impl Sqlite {
    fn open(path: PathBuf) -> Result<Self, StoreError> {
        let conn = Connection::open(&path)?;
        // Another process may hold the write lock: wait for it rather than fail.
        conn.busy_timeout(Duration::from_secs(10))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        // A spend must survive a power cut once the verdict was returned: FULL, not NORMAL.
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.execute_batch(SCHEMA)?;
        Ok(Self {
            path,
            conn: Mutex::new(conn),
        })
    }
}

fn count_from_sql(v: i64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

impl Store for Sqlite {
    fn is_spent(&self, nonce: &[u8]) -> Result<bool, StoreError> {
        let conn = lock(&self.conn);
        let found: Option<i64> = conn
            .query_row(
                "SELECT 1 FROM spent_nonces WHERE nonce = ?1",
                params![nonce],
                |r| r.get(0),
            )
            .optional()?;
        Ok(found.is_some())
    }
    fn sign_count(&self, credential_id: &[u8]) -> Result<Option<u32>, StoreError> {
        let conn = lock(&self.conn);
        let found: Option<i64> = conn
            .query_row(
                "SELECT sign_count FROM sign_counts WHERE credential_id = ?1",
                params![credential_id],
                |r| r.get(0),
            )
            .optional()?;
        Ok(found.map(count_from_sql))
    }
    fn commit(&self, spends: &[Spend]) -> Result<Option<(usize, Conflict)>, StoreError> {
        let mut conn = lock(&self.conn);
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        // Check every entry against the state before this commit (the core checks each entry
        // against the state it read, not against its siblings), then write.
        for (i, s) in spends.iter().enumerate() {
            let spent = tx
                .query_row(
                    "SELECT 1 FROM spent_nonces WHERE nonce = ?1",
                    params![s.nonce],
                    |r| r.get::<_, i64>(0),
                )
                .optional()?
                .is_some();
            let known: Option<u32> = tx
                .query_row(
                    "SELECT sign_count FROM sign_counts WHERE credential_id = ?1",
                    params![s.credential_id],
                    |r| r.get::<_, i64>(0),
                )
                .optional()?
                .map(count_from_sql);
            if let Some(c) = conflict(spent, known, s.sign_count) {
                // Dropping the transaction rolls it back: nothing is burnt.
                return Ok(Some((i, c)));
            }
        }
        for (i, s) in spends.iter().enumerate() {
            // The unique key is the spend: if a sibling entry of this very result carried the
            // same nonce the core would have refused it, so zero rows here is a conflict too.
            let inserted = tx.execute(
                "INSERT INTO spent_nonces (nonce, credential_id) VALUES (?1, ?2)
                 ON CONFLICT (nonce) DO NOTHING",
                params![s.nonce, s.credential_id],
            )?;
            if inserted == 0 {
                return Ok(Some((i, Conflict::Replayed)));
            }
            tx.execute(
                "INSERT INTO sign_counts (credential_id, sign_count) VALUES (?1, ?2)
                 ON CONFLICT (credential_id) DO UPDATE SET sign_count = excluded.sign_count
                 WHERE excluded.sign_count > sign_counts.sign_count",
                params![s.credential_id, i64::from(s.sign_count)],
            )?;
        }
        tx.commit()?;
        Ok(None)
    }
    fn spent_count(&self) -> Result<u64, StoreError> {
        let conn = lock(&self.conn);
        let n: i64 = conn.query_row("SELECT count(*) FROM spent_nonces", [], |r| r.get(0))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }
    fn describe(&self) -> String {
        format!("sqlite:{}", self.path.display())
    }
}

/// The core's view of the state during one verification: reads go to the store, records are
/// buffered for [`Store::commit`].
struct Call<'a> {
    store: &'a dyn Store,
    pending: Vec<Spend>,
    error: RefCell<Option<StoreError>>,
}

impl Call<'_> {
    fn failed(&self, e: StoreError) {
        self.error.borrow_mut().get_or_insert(e);
    }
}

impl countersign::ReplayState for Call<'_> {
    fn is_spent(&self, nonce: &[u8]) -> bool {
        // On a read error answer "spent" (fail closed); the error is raised after the call.
        self.store.is_spent(nonce).unwrap_or_else(|e| {
            self.failed(e);
            true
        })
    }
    fn sign_count(&self, credential_id: &[u8]) -> Option<u32> {
        self.store.sign_count(credential_id).unwrap_or_else(|e| {
            self.failed(e);
            Some(u32::MAX)
        })
    }
    fn record(&mut self, nonce: &[u8], credential_id: &[u8], sign_count: u32) {
        self.pending.push(Spend {
            nonce: nonce.to_vec(),
            credential_id: credential_id.to_vec(),
            sign_count,
        });
    }
}

/// Run one verification against `store` and commit what it recorded.
pub(crate) fn verify(
    store: &dyn Store,
    result: &ApprovalResult,
    run: impl FnOnce(&mut dyn countersign::ReplayState) -> countersign::Verdict,
) -> Result<Verdict, StoreError> {
    let mut call = Call {
        store,
        pending: Vec::new(),
        error: RefCell::new(None),
    };
    let verdict = run(&mut call);
    if let Some(e) = call.error.into_inner() {
        return Err(e);
    }
    if call.pending.is_empty() {
        return Ok(Verdict::from_core(verdict));
    }
    Ok(match store.commit(&call.pending)? {
        None => Verdict::from_core(verdict),
        Some((index, c)) => {
            let spend = call.pending.get(index);
            Verdict::from_core(concurrent_deny(result, index, spend, c))
        }
    })
}

/// The DENY the core gives an entry whose nonce or counter another verifier recorded first.
fn concurrent_deny(
    result: &ApprovalResult,
    index: usize,
    spend: Option<&Spend>,
    c: Conflict,
) -> countersign::Verdict {
    let error = match (c, spend) {
        (Conflict::CounterRegression { stored }, Some(s)) => {
            EvidenceError::Assertion(AssertionError::from(AuthDataError::CounterRegression {
                stored,
                got: s.sign_count,
            }))
        }
        (_, s) => EvidenceError::Replayed(s.map(|s| b64::encode(&s.nonce)).unwrap_or_default()),
    };
    let error = VerifyError::Evidence { index, error };
    countersign::Verdict {
        effective: Effect::Deny,
        decision: result.status,
        reason_code: Some(error.reason_code()),
        identity_assurance: IdentityAssurance::declared(result.identity_assurance.as_ref()),
        approvers: Vec::new(),
        replay: "enforced",
        detail: Some(error.to_string()),
        findings: Vec::new(),
        error: Some(error),
    }
}

/// Spent nonces and signature counters: `ReplayState.memory()` or `ReplayState.sqlite(path)`.
///
/// Share one object between every thread that verifies for the same gateway; share one SQLite
/// file between processes (each process opens it itself).
#[pyclass(frozen, module = "countersign")]
pub struct ReplayState {
    store: Arc<dyn Store>,
}

impl ReplayState {
    pub(crate) fn store(&self) -> Arc<dyn Store> {
        Arc::clone(&self.store)
    }
}

#[pymethods]
impl ReplayState {
    /// A state in this process's memory: lost on restart. Tests and single-process tools only.
    #[staticmethod]
    fn memory() -> Self {
        Self {
            store: Arc::new(Memory::default()),
        }
    }

    /// A durable state in the SQLite file `path` (created if absent). Several processes may
    /// open the same file: a nonce is spent exactly once among all of them.
    #[staticmethod]
    fn sqlite(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        let store = py.detach(|| Sqlite::open(path)).map_err(to_py)?;
        Ok(Self {
            store: Arc::new(store),
        })
    }

    /// How many nonces are spent.
    fn spent_count(&self, py: Python<'_>) -> PyResult<u64> {
        py.detach(|| self.store.spent_count()).map_err(to_py)
    }

    fn __repr__(&self) -> String {
        format!("ReplayState({})", self.store.describe())
    }
}

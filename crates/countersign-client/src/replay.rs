//! The gateway's replay state: the nonces of evidence it has accepted, and the last signature
//! counter it has seen per credential.
//!
//! It must outlive the process. A gateway that forgets its spent nonces on restart accepts the
//! same APPROVED evidence again for an identical call, and the single-use grant at the service is
//! then the only guard left. So the default is a small SQLite file in a directory the gateway
//! names ([`ReplayStore::sqlite`]); [`ReplayStore::memory`] is an explicit choice (tests, a
//! gateway whose calls are idempotent anyway).
//!
//! Several gateway processes may share one directory: the file is in WAL mode with a busy
//! timeout, and a spend is an `INSERT` into a table whose key is the nonce, inside an immediate
//! transaction. Two processes verifying the same evidence at once may both read "not spent", but
//! only one insert succeeds; the other is refused `replayed`. A store that cannot be read or
//! written also refuses `replayed`: the gateway cannot tell a first use from a replay, so it
//! fails closed.

use countersign::{MemoryReplayState, ReplayState};
use rusqlite::{Connection, OptionalExtension as _, params};
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The file [`ReplayStore::sqlite`] keeps in its directory.
pub const REPLAY_FILE: &str = "countersign-replay.sqlite3";

/// How long a writer waits for another process's transaction before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a replay store could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ReplayStoreError {
    #[error("creating the replay directory {path}: {source}")]
    Dir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("opening the replay store {path}: {source}")]
    Open {
        path: PathBuf,
        source: rusqlite::Error,
    },
}

/// Where a gateway keeps its replay state.
#[derive(Debug)]
pub struct ReplayStore {
    inner: Inner,
}

enum Inner {
    Memory(MemoryReplayState),
    Sqlite { conn: Connection, path: PathBuf },
    Custom(Box<dyn ReplayState + Send>),
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Memory(m) => f.debug_tuple("Memory").field(m).finish(),
            Self::Sqlite { path, .. } => f.debug_struct("Sqlite").field("path", path).finish(),
            Self::Custom(_) => f.write_str("Custom"),
        }
    }
}

impl ReplayStore {
    /// A durable store in `dir` (created if missing): the file [`REPLAY_FILE`], shareable by
    /// several gateway processes.
    pub fn sqlite(dir: impl AsRef<Path>) -> Result<Self, ReplayStoreError> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|source| ReplayStoreError::Dir {
            path: dir.to_owned(),
            source,
        })?;
        let path = dir.join(REPLAY_FILE);
        let open = |path: &Path| -> rusqlite::Result<Connection> {
            let conn = Connection::open(path)?;
            conn.busy_timeout(BUSY_TIMEOUT)?;
            // WAL: readers never block the writer, and several processes share the file.
            // synchronous = FULL: a spend acknowledged is on disk even after a power loss.
            conn.pragma_update(None, "journal_mode", "WAL")?;
            conn.pragma_update(None, "synchronous", "FULL")?;
            conn.execute_batch(
                "CREATE TABLE IF NOT EXISTS spent_nonces (
                     nonce BLOB PRIMARY KEY,
                     credential_id BLOB NOT NULL
                 ) WITHOUT ROWID;
                 CREATE TABLE IF NOT EXISTS sign_counts (
                     credential_id BLOB PRIMARY KEY,
                     sign_count INTEGER NOT NULL
                 ) WITHOUT ROWID;",
            )?;
            Ok(conn)
        };
        let conn = open(&path).map_err(|source| ReplayStoreError::Open {
            path: path.clone(),
            source,
        })?;
        Ok(Self {
            inner: Inner::Sqlite { conn, path },
        })
    }

    /// A state that lives as long as this process: a restart forgets every spent nonce.
    pub fn memory() -> Self {
        Self {
            inner: Inner::Memory(MemoryReplayState::new()),
        }
    }

    /// Any other [`ReplayState`] (a shared database of your own). Its `record` must spend a
    /// nonce atomically if several verifiers share it.
    pub fn custom(state: Box<dyn ReplayState + Send>) -> Self {
        Self {
            inner: Inner::Custom(state),
        }
    }

    /// Whether this store survives a restart.
    pub fn is_durable(&self) -> bool {
        !matches!(self.inner, Inner::Memory(_))
    }

    /// Run `verify` against this state, then make its spends permanent.
    ///
    /// `verify` reads the state and records spends; for the SQLite store the spends are buffered
    /// and inserted afterwards in one transaction. Returns `verify`'s output and whether every
    /// recorded nonce was spent by this call (false: another verifier spent one first, or the
    /// store failed; the string says which).
    pub(crate) fn verify_and_spend<T>(
        &mut self,
        verify: impl FnOnce(&mut dyn ReplayState) -> T,
    ) -> (T, Result<(), String>) {
        match &mut self.inner {
            Inner::Memory(state) => (verify(state), Ok(())),
            Inner::Custom(state) => (verify(state.as_mut()), Ok(())),
            Inner::Sqlite { conn, .. } => {
                let mut view = SqliteView {
                    conn,
                    pending: Vec::new(),
                    error: Cell::new(None),
                };
                let out = verify(&mut view);
                let SqliteView { pending, error, .. } = view;
                if let Some(e) = error.into_inner() {
                    return (out, Err(format!("replay store unreadable: {e}")));
                }
                let spent = commit(conn, &pending).map_err(|e| match e {
                    Commit::Spent => {
                        "the evidence's nonce was already spent by another verifier".to_owned()
                    }
                    Commit::Store(e) => format!("replay store unwritable: {e}"),
                });
                (out, spent)
            }
        }
    }
}

/// Reads go to the database; records wait for [`commit`].
struct SqliteView<'a> {
    conn: &'a Connection,
    pending: Vec<(Vec<u8>, Vec<u8>, u32)>,
    /// The first read error: reads take `&self`, and a failed read must refuse the evidence.
    error: Cell<Option<rusqlite::Error>>,
}

impl SqliteView<'_> {
    fn failed(&self, e: rusqlite::Error) {
        let first = self.error.take().unwrap_or(e);
        self.error.set(Some(first));
    }
}

impl ReplayState for SqliteView<'_> {
    fn is_spent(&self, nonce: &[u8]) -> bool {
        if self.pending.iter().any(|(n, _, _)| n == nonce) {
            return true;
        }
        match self
            .conn
            .query_row(
                "SELECT 1 FROM spent_nonces WHERE nonce = ?1",
                [nonce],
                |_| Ok(()),
            )
            .optional()
        {
            Ok(found) => found.is_some(),
            Err(e) => {
                self.failed(e);
                true
            }
        }
    }

    fn sign_count(&self, credential_id: &[u8]) -> Option<u32> {
        let stored = match self
            .conn
            .query_row(
                "SELECT sign_count FROM sign_counts WHERE credential_id = ?1",
                [credential_id],
                |row| row.get::<_, u32>(0),
            )
            .optional()
        {
            Ok(stored) => stored,
            Err(e) => {
                self.failed(e);
                None
            }
        };
        let pending = self
            .pending
            .iter()
            .filter(|(_, c, _)| c == credential_id)
            .map(|(_, _, n)| *n)
            .max();
        stored.max(pending)
    }

    fn record(&mut self, nonce: &[u8], credential_id: &[u8], sign_count: u32) {
        self.pending
            .push((nonce.to_vec(), credential_id.to_vec(), sign_count));
    }
}

enum Commit {
    Spent,
    Store(rusqlite::Error),
}

impl From<rusqlite::Error> for Commit {
    fn from(e: rusqlite::Error) -> Self {
        Self::Store(e)
    }
}

/// Spend every pending nonce and raise the counters, all or nothing.
fn commit(conn: &mut Connection, pending: &[(Vec<u8>, Vec<u8>, u32)]) -> Result<(), Commit> {
    if pending.is_empty() {
        return Ok(());
    }
    // IMMEDIATE takes the write lock up front, so two processes serialize here rather than
    // failing at commit.
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    for (nonce, credential_id, sign_count) in pending {
        let inserted = tx.execute(
            "INSERT INTO spent_nonces (nonce, credential_id) VALUES (?1, ?2)
             ON CONFLICT (nonce) DO NOTHING",
            params![nonce, credential_id],
        )?;
        if inserted == 0 {
            // Dropping the transaction rolls back the spends made so far.
            return Err(Commit::Spent);
        }
        tx.execute(
            "INSERT INTO sign_counts (credential_id, sign_count) VALUES (?1, ?2)
             ON CONFLICT (credential_id) DO UPDATE
             SET sign_count = max(sign_count, excluded.sign_count)",
            params![credential_id, sign_count],
        )?;
    }
    tx.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("countersign-replay-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    /// A stand-in for `verify_evidence`: deny when spent, otherwise record.
    fn spend(store: &mut ReplayStore, nonce: &[u8], count: u32) -> Result<bool, String> {
        let (fresh, committed) = store.verify_and_spend(|s| {
            if s.is_spent(nonce) {
                return false;
            }
            s.record(nonce, b"cred", count);
            true
        });
        committed.map(|()| fresh)
    }

    #[test]
    fn a_spend_survives_a_new_store_over_the_same_directory() {
        let d = dir("restart");
        let mut first = ReplayStore::sqlite(&d).unwrap();
        assert!(first.is_durable());
        assert_eq!(spend(&mut first, b"n1", 5), Ok(true));
        drop(first);
        let mut again = ReplayStore::sqlite(&d).unwrap();
        assert_eq!(
            spend(&mut again, b"n1", 5),
            Ok(false),
            "the restart remembers"
        );
        assert_eq!(spend(&mut again, b"n2", 6), Ok(true));
        let (count, _) = again.verify_and_spend(|s| s.sign_count(b"cred"));
        assert_eq!(count, Some(6));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_memory_store_forgets_on_restart() {
        let mut first = ReplayStore::memory();
        assert!(!first.is_durable());
        assert_eq!(spend(&mut first, b"n1", 1), Ok(true));
        assert_eq!(spend(&mut first, b"n1", 1), Ok(false));
        assert_eq!(spend(&mut ReplayStore::memory(), b"n1", 1), Ok(true));
    }

    #[test]
    fn two_stores_on_one_file_cannot_both_spend_a_nonce() {
        let d = dir("race");
        let mut a = ReplayStore::sqlite(&d).unwrap();
        let mut b = ReplayStore::sqlite(&d).unwrap();
        // Both read "not spent" before either commits: the interleaving of two processes.
        let (_, first) = a.verify_and_spend(|sa| {
            assert!(!sa.is_spent(b"n"));
            let (_, second) = b.verify_and_spend(|sb| {
                assert!(!sb.is_spent(b"n"));
                sb.record(b"n", b"cred", 1);
            });
            assert_eq!(second, Ok(()), "b commits first");
            sa.record(b"n", b"cred", 1);
        });
        let err = first.unwrap_err();
        assert!(err.contains("already spent"), "{err}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn an_unusable_directory_is_an_error_not_a_memory_fallback() {
        let d = dir("file");
        std::fs::create_dir_all(d.parent().unwrap()).unwrap();
        std::fs::write(&d, b"not a directory").unwrap();
        assert!(matches!(
            ReplayStore::sqlite(&d),
            Err(ReplayStoreError::Dir { .. })
        ));
        let _ = std::fs::remove_file(&d);
    }
}

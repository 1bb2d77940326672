//! Test support: a PostgreSQL schema of its own per test or benchmark run.
//!
//! Compiled for this crate's tests and, behind the `testing` feature, for the CLI's tests and
//! the benchmarks; never part of the service.

use super::StoreError;
use super::postgres::db;
use ::postgres::{Client, NoTls};

/// A schema of its own for one test or benchmark run, dropped (with everything in it) on drop.
///
/// Tests share one database; each gets a fresh schema and a URL whose `search_path` points at
/// it, so tests run in parallel and leave nothing behind.
#[doc(hidden)]
#[derive(Debug)]
pub struct ScratchSchema {
    base: String,
    name: String,
}

/// Environment variable naming the PostgreSQL database tests use (CI sets it). The tests that need
/// PostgreSQL are ignored unless asked for; the store suite runs its PostgreSQL half only when it
/// is set.
pub const TEST_DATABASE_ENV: &str = "COUNTERSIGN_TEST_POSTGRES";
/// What the tests try when [`TEST_DATABASE_ENV`] is not set.
pub const TEST_DATABASE_DEFAULT: &str = "postgres://postgres@127.0.0.1:5432/test";

impl ScratchSchema {
    /// For a test that needs PostgreSQL: a fresh schema in the test database
    /// ([`TEST_DATABASE_ENV`], else [`TEST_DATABASE_DEFAULT`]), or an error saying where none
    /// answered.
    ///
    /// Such tests are marked `#[ignore = "needs PostgreSQL …"]`, so a run without a database
    /// reports them as ignored, with the reason, instead of passing them silently; `cargo test
    /// -- --include-ignored` (.ci/steps/postgres.sh) runs them, and then a missing database fails.
    pub fn required(label: &str) -> Result<Self, StoreError> {
        let base = match std::env::var(TEST_DATABASE_ENV) {
            Ok(url) if !url.is_empty() => url,
            _ => TEST_DATABASE_DEFAULT.to_owned(),
        };
        if !port_open(&base) {
            return Err(StoreError::Database(format!(
                "{label} needs PostgreSQL and none answers at {base}: set \
                 {TEST_DATABASE_ENV}=postgres://… (.ci/steps/postgres.sh does)"
            )));
        }
        Self::create(&base)
    }

    /// For the PostgreSQL half of a suite that runs on SQLite anyway: a fresh schema when
    /// [`TEST_DATABASE_ENV`] names a database (an unusable one is an error), `None` when it is
    /// not set. The suite's ignored marker test names the half that did not run.
    pub fn if_configured(label: &str) -> Result<Option<Self>, StoreError> {
        match std::env::var(TEST_DATABASE_ENV) {
            Ok(url) if !url.is_empty() => Self::create(&url)
                .map(Some)
                .map_err(|e| StoreError::Database(format!("{label}: {e}"))),
            _ => Ok(None),
        }
    }

    /// Create a uniquely named schema in the database at `base`.
    pub fn create(base: &str) -> Result<Self, StoreError> {
        let mut random = [0u8; 8];
        getrandom::fill(&mut random).map_err(|e| StoreError::Database(e.to_string()))?;
        let name = format!("cs_test_{}", hex_lower(&random));
        let base = base.to_owned();
        let sql = format!("CREATE SCHEMA {name}");
        admin(&base, &sql)?;
        Ok(Self { base, name })
    }

    /// The database URL with `search_path` set to this schema.
    pub fn url(&self) -> String {
        let sep = if self.base.contains('?') { '&' } else { '?' };
        format!("{}{sep}options=-csearch_path%3D{}", self.base, self.name)
    }

    /// The schema's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for ScratchSchema {
    fn drop(&mut self) {
        let sql = format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name);
        if let Err(e) = admin(&self.base, &sql) {
            eprintln!("dropping schema {}: {e}", self.name);
        }
    }
}

/// Run one statement on a connection of its own, on a thread of its own (the caller may be
/// inside an async runtime, where the synchronous client cannot run).
fn admin(url: &str, sql: &str) -> Result<(), StoreError> {
    let (url, sql) = (url.to_owned(), sql.to_owned());
    std::thread::spawn(move || {
        let mut client = Client::connect(&url, NoTls).map_err(db)?;
        client.batch_execute(&sql).map_err(db)
    })
    .join()
    .map_err(|_| StoreError::Database("admin connection thread panicked".into()))?
}

fn hex_lower(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether the URL's host:port accepts a TCP connection within a short timeout.
pub(super) fn port_open(url: &str) -> bool {
    use std::net::ToSocketAddrs as _;
    let Ok(config) = url.parse::<::postgres::Config>() else {
        return false;
    };
    let host = match config.get_hosts().first() {
        Some(::postgres::config::Host::Tcp(h)) => h.clone(),
        _ => "127.0.0.1".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let Ok(addrs) = (host.as_str(), port).to_socket_addrs() else {
        return false;
    };
    addrs.into_iter().any(|a| {
        std::net::TcpStream::connect_timeout(&a, std::time::Duration::from_millis(300)).is_ok()
    })
}

//! The seam between the store's rules and a database: statements, parameters, rows.
//!
//! The rules (`rules.rs`) are written once against [`Tx`]; a backend implements it with its
//! driver, binding [`Param`]s and turning result rows into [`Row`]s of [`Value`]s. A statement is
//! an [`Sql`]: one text when the two dialects agree, two when they do not (row locks, the
//! database clock, collations). Placeholders are written `?N` everywhere; the PostgreSQL backend
//! rewrites them to `$N` once, when it prepares the statement.

use super::StoreError;

/// Which SQL dialect a transaction speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// One writer at a time (`BEGIN IMMEDIATE`): no row locks needed, the chain head is the
    /// last audit line.
    Sqlite,
    /// Many replicas: rows are locked `FOR UPDATE`, the chain head is a row of its own.
    Postgres,
}

/// A statement, in the text each dialect needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sql {
    sqlite: &'static str,
    postgres: &'static str,
}

impl Sql {
    /// One text both dialects accept.
    pub(crate) const fn same(text: &'static str) -> Self {
        Self {
            sqlite: text,
            postgres: text,
        }
    }

    /// A text per dialect.
    pub(crate) const fn each(sqlite: &'static str, postgres: &'static str) -> Self {
        Self { sqlite, postgres }
    }

    /// The text for `dialect` (still with `?N` placeholders).
    pub(crate) fn text(&self, dialect: Dialect) -> &'static str {
        match dialect {
            Dialect::Sqlite => self.sqlite,
            Dialect::Postgres => self.postgres,
        }
    }
}

/// `?N` placeholders as `$N` (PostgreSQL). Only a `?` followed by a digit is a placeholder;
/// the store's statements hold no `?` anywhere else.
pub(crate) fn dollar_placeholders(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '?' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('$');
        } else {
            out.push(c);
        }
    }
    out
}

/// A statement parameter, borrowed from the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Param<'a> {
    Null,
    Int(i64),
    Text(&'a str),
    Blob(&'a [u8]),
    /// Arrays, for PostgreSQL's `unnest` (many rows in one statement); SQLite refuses them.
    Ints(&'a [i64]),
    Texts(&'a [String]),
    Blobs(&'a [Vec<u8>]),
}

impl From<i64> for Param<'_> {
    fn from(v: i64) -> Self {
        Self::Int(v)
    }
}

impl From<u32> for Param<'_> {
    fn from(v: u32) -> Self {
        Self::Int(i64::from(v))
    }
}

impl<'a> From<&'a str> for Param<'a> {
    fn from(v: &'a str) -> Self {
        Self::Text(v)
    }
}

impl<'a> From<&'a String> for Param<'a> {
    fn from(v: &'a String) -> Self {
        Self::Text(v)
    }
}

impl<'a> From<&'a [u8]> for Param<'a> {
    fn from(v: &'a [u8]) -> Self {
        Self::Blob(v)
    }
}

impl<'a> From<&'a Vec<u8>> for Param<'a> {
    fn from(v: &'a Vec<u8>) -> Self {
        Self::Blob(v)
    }
}

impl<'a> From<&'a [u8; 32]> for Param<'a> {
    fn from(v: &'a [u8; 32]) -> Self {
        Self::Blob(v)
    }
}

impl<'a, T: Into<Param<'a>>> From<Option<T>> for Param<'a> {
    fn from(v: Option<T>) -> Self {
        v.map_or(Self::Null, Into::into)
    }
}

impl<'a, T: Copy + Into<Param<'a>>> From<&Option<T>> for Param<'a> {
    fn from(v: &Option<T>) -> Self {
        v.map_or(Self::Null, Into::into)
    }
}

/// `[Param::from(a), Param::from(b), …]`.
macro_rules! params {
    ($($p:expr),* $(,)?) => {
        &[$($crate::store::seam::Param::from($p)),*][..]
    };
}
pub(crate) use params;

/// A column value of a result row.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum Value {
    #[default]
    Null,
    Int(i64),
    Text(String),
    Blob(Vec<u8>),
    Bool(bool),
}

/// A result row; each getter takes its column out (read each once), checking its type.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Row(pub(crate) Vec<Value>);

impl Row {
    fn take(&mut self, i: usize) -> Value {
        self.0.get_mut(i).map(std::mem::take).unwrap_or_default()
    }

    fn wrong(i: usize, want: &str, got: &Value) -> StoreError {
        StoreError::Corrupt(format!("column {i}: expected {want}, found {got:?}"))
    }

    pub(crate) fn opt_int(&mut self, i: usize) -> Result<Option<i64>, StoreError> {
        match self.take(i) {
            Value::Null => Ok(None),
            Value::Int(v) => Ok(Some(v)),
            other => Err(Self::wrong(i, "an integer", &other)),
        }
    }

    pub(crate) fn int(&mut self, i: usize) -> Result<i64, StoreError> {
        self.opt_int(i)?
            .ok_or_else(|| StoreError::Corrupt(format!("column {i} is NULL")))
    }

    /// A count or counter column as `u32`.
    pub(crate) fn u32(&mut self, i: usize, what: &str) -> Result<u32, StoreError> {
        let v = self.int(i)?;
        u32::try_from(v).map_err(|_| StoreError::Corrupt(format!("{what} {v} out of range")))
    }

    /// A sequence number as `u64`.
    pub(crate) fn u64(&mut self, i: usize, what: &str) -> Result<u64, StoreError> {
        let v = self.int(i)?;
        u64::try_from(v).map_err(|_| StoreError::Corrupt(format!("negative {what}")))
    }

    pub(crate) fn opt_text(&mut self, i: usize) -> Result<Option<String>, StoreError> {
        match self.take(i) {
            Value::Null => Ok(None),
            Value::Text(v) => Ok(Some(v)),
            other => Err(Self::wrong(i, "text", &other)),
        }
    }

    pub(crate) fn text(&mut self, i: usize) -> Result<String, StoreError> {
        self.opt_text(i)?
            .ok_or_else(|| StoreError::Corrupt(format!("column {i} is NULL")))
    }

    pub(crate) fn opt_blob(&mut self, i: usize) -> Result<Option<Vec<u8>>, StoreError> {
        match self.take(i) {
            Value::Null => Ok(None),
            Value::Blob(v) => Ok(Some(v)),
            other => Err(Self::wrong(i, "bytes", &other)),
        }
    }

    pub(crate) fn blob(&mut self, i: usize) -> Result<Vec<u8>, StoreError> {
        self.opt_blob(i)?
            .ok_or_else(|| StoreError::Corrupt(format!("column {i} is NULL")))
    }

    /// A 32-byte hash column.
    pub(crate) fn hash(&mut self, i: usize, what: &str) -> Result<[u8; 32], StoreError> {
        hash32(self.blob(i)?, what)
    }

    /// A truth value: PostgreSQL's `BOOLEAN`, SQLite's 0/1.
    pub(crate) fn bool(&mut self, i: usize) -> Result<bool, StoreError> {
        match self.take(i) {
            Value::Bool(v) => Ok(v),
            Value::Int(v) => Ok(v != 0),
            other => Err(Self::wrong(i, "a boolean", &other)),
        }
    }
}

pub(crate) fn hash32(bytes: Vec<u8>, what: &str) -> Result<[u8; 32], StoreError> {
    <[u8; 32]>::try_from(bytes).map_err(|_| StoreError::Corrupt(format!("{what} is not 32 bytes")))
}

/// One open transaction (or, for a single statement, a connection in autocommit).
pub(crate) trait Tx {
    fn dialect(&self) -> Dialect;
    /// Run a statement; returns the rows it changed.
    fn execute(&mut self, sql: &Sql, params: &[Param<'_>]) -> Result<u64, StoreError>;
    /// Run a statement that returns rows (a `SELECT`, or a write with `RETURNING`).
    fn query(&mut self, sql: &Sql, params: &[Param<'_>]) -> Result<Vec<Row>, StoreError>;
    /// Run several statements without parameters (a migration step).
    fn batch(&mut self, sql: &str) -> Result<(), StoreError>;

    /// [`Tx::query`] for at most one row.
    fn query_opt(&mut self, sql: &Sql, params: &[Param<'_>]) -> Result<Option<Row>, StoreError> {
        Ok(self.query(sql, params)?.into_iter().next())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_become_dollars_and_nothing_else_changes() {
        assert_eq!(
            dollar_placeholders("UPDATE t SET a = ?2 WHERE b = ?1 AND c = '?' AND d = ?10"),
            "UPDATE t SET a = $2 WHERE b = $1 AND c = '?' AND d = $10"
        );
    }

    #[test]
    fn getters_check_the_column_type() {
        let mut row = Row(vec![
            Value::Int(3),
            Value::Null,
            Value::Text("x".into()),
            Value::Blob(vec![1; 32]),
            Value::Int(1),
        ]);
        assert_eq!(row.int(0).ok(), Some(3));
        assert_eq!(row.opt_text(1).ok(), Some(None));
        assert!(matches!(row.blob(2), Err(StoreError::Corrupt(_))));
        assert_eq!(row.hash(3, "h").ok(), Some([1; 32]));
        assert_eq!(row.bool(4).ok(), Some(true));
        assert!(matches!(row.int(5), Err(StoreError::Corrupt(_))));
    }
}

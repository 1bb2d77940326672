//! Operator preauthorizations: `[[preauthorizations]]` in the service config.
//!
//! Each entry is a stable `slug` plus a [`countersign::Scope`] (agent and tool patterns, argument
//! constraints, `expires_at`, `max_uses`). A call the scope covers is APPROVED without a human,
//! and says so: the result and the audit lines name the slug and carry the digest of its
//! definition. The definition is refused at load when anything in it is unknown or ambiguous —
//! an unknown constraint kind or member, an expiry without an explicit offset (a TOML local
//! date-time such as `2026-12-31T00:00:00` is refused, never read in the host's zone), a
//! duplicate slug.

use countersign::{Scope, ScopeError};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};

/// The longest slug, in bytes.
pub const MAX_SLUG_BYTES: usize = 64;

/// One operator preauthorization, as loaded (and validated) from the config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Preauthorization {
    /// The stable name: `[a-z0-9][a-z0-9_-]*`, at most 64 bytes. Usage and a manual disable are
    /// kept per slug across restarts.
    pub slug: String,
    /// What it covers.
    pub scope: Scope,
}

/// A preauthorization entry that cannot be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PreauthError {
    #[error("preauthorization {index}: slug {slug:?} must be [a-z0-9][a-z0-9_-]*, 1 to 64 bytes")]
    BadSlug { index: usize, slug: String },
    #[error("preauthorization {index}: the member `slug` is required")]
    NoSlug { index: usize },
    #[error("preauthorization {slug:?} is defined twice")]
    DuplicateSlug { slug: String },
    #[error("preauthorization {slug:?}: {source}")]
    Scope { slug: String, source: ScopeError },
    #[error(
        "preauthorization {slug:?}: {member} = {value} has no UTC offset; write it with Z or \
         ±hh:mm (a local time would be read in whatever zone the host is in)"
    )]
    LocalTime {
        slug: String,
        member: String,
        value: String,
    },
    #[error("preauthorization {slug:?}: {member} is a TOML {what}, which has no JSON form")]
    Unrepresentable {
        slug: String,
        member: String,
        what: &'static str,
    },
}

impl Preauthorization {
    /// Validate one `[[preauthorizations]]` table.
    pub fn from_toml(index: usize, table: &toml::Table) -> Result<Self, PreauthError> {
        let slug = match table.get("slug") {
            Some(toml::Value::String(s)) => s.clone(),
            Some(other) => {
                return Err(PreauthError::BadSlug {
                    index,
                    slug: format!("a {}, not a string", other.type_str()),
                });
            }
            None => return Err(PreauthError::NoSlug { index }),
        };
        if !valid_slug(&slug) {
            return Err(PreauthError::BadSlug { index, slug });
        }
        let mut scope = Map::new();
        for (key, value) in table.iter().filter(|(k, _)| *k != "slug") {
            scope.insert(key.clone(), to_json(&slug, key, value)?);
        }
        let scope =
            Scope::from_value(Value::Object(scope)).map_err(|source| PreauthError::Scope {
                slug: slug.clone(),
                source,
            })?;
        Ok(Self { slug, scope })
    }

    /// The definition as JSON: `{"slug": …, "scope": …}`.
    pub fn definition(&self) -> Value {
        serde_json::json!({ "slug": self.slug, "scope": self.scope })
    }

    /// SHA-256 over the JCS form of [`Self::definition`]: what the result, the audit lines and
    /// the stored row carry, and what the recheck before a grant compares.
    pub fn digest(&self) -> [u8; 32] {
        // The definition holds only strings, safe integers and validated values: JCS cannot
        // fail on it, and serde_json's compact form of it would be a fallback with the same
        // member set (sorted: `Map` is a BTreeMap in this workspace).
        let bytes = self
            .scope
            .to_jcs()
            .map(|scope| {
                let mut out = Vec::with_capacity(scope.len() + self.slug.len() + 24);
                out.extend_from_slice(b"{\"scope\":");
                out.extend_from_slice(&scope);
                out.extend_from_slice(b",\"slug\":");
                out.extend_from_slice(Value::from(self.slug.as_str()).to_string().as_bytes());
                out.push(b'}');
                out
            })
            .unwrap_or_else(|_| self.definition().to_string().into_bytes());
        Sha256::digest(bytes).into()
    }
}

fn valid_slug(slug: &str) -> bool {
    let mut bytes = slug.bytes();
    slug.len() <= MAX_SLUG_BYTES
        && bytes
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

/// A TOML value as JSON. A date-time becomes its RFC 3339 text only when it has a date, a time
/// and an offset; the scope parser then checks the text again.
fn to_json(slug: &str, member: &str, value: &toml::Value) -> Result<Value, PreauthError> {
    Ok(match value {
        toml::Value::String(s) => Value::from(s.as_str()),
        toml::Value::Integer(i) => Value::from(*i),
        toml::Value::Float(f) => {
            // Kept as a float so the scope parser refuses it where floats are not allowed.
            serde_json::Number::from_f64(*f)
                .map(Value::Number)
                .ok_or_else(|| PreauthError::Unrepresentable {
                    slug: slug.to_owned(),
                    member: member.to_owned(),
                    what: "non-finite float",
                })?
        }
        toml::Value::Boolean(b) => Value::from(*b),
        toml::Value::Datetime(dt) => {
            if dt.date.is_none() || dt.time.is_none() || dt.offset.is_none() {
                return Err(PreauthError::LocalTime {
                    slug: slug.to_owned(),
                    member: member.to_owned(),
                    value: dt.to_string(),
                });
            }
            Value::from(dt.to_string())
        }
        toml::Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| to_json(slug, member, v))
                .collect::<Result<_, _>>()?,
        ),
        toml::Value::Table(t) => Value::Object(
            t.iter()
                .map(|(k, v)| Ok((k.clone(), to_json(slug, member, v)?)))
                .collect::<Result<_, PreauthError>>()?,
        ),
    })
}

/// Validate every `[[preauthorizations]]` table, refusing duplicate slugs.
pub fn load_all(tables: &[toml::Table]) -> Result<Vec<Preauthorization>, PreauthError> {
    let mut out: Vec<Preauthorization> = Vec::with_capacity(tables.len());
    for (index, table) in tables.iter().enumerate() {
        let p = Preauthorization::from_toml(index, table)?;
        if out.iter().any(|q| q.slug == p.slug) {
            return Err(PreauthError::DuplicateSlug { slug: p.slug });
        }
        out.push(p);
    }
    Ok(out)
}

/// Serde glue for `Config::preauthorizations`: the tables are validated as they are read, so
/// a config with a bad entry does not load at all.
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Vec<Preauthorization>, D::Error> {
    let tables = Vec::<toml::Table>::deserialize(d)?;
    load_all(&tables).map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Vec<Preauthorization>, PreauthError> {
        #[derive(Deserialize)]
        struct Doc {
            preauthorizations: Vec<toml::Table>,
        }
        let doc: Doc = toml::from_str(text).unwrap_or_else(|e| panic!("{e}"));
        load_all(&doc.preauthorizations)
    }

    const GOOD: &str = r#"
        [[preauthorizations]]
        slug = "small-eur-payments"
        agent = "billing-*"
        tool = "payments.transfer"
        expires_at = 2099-01-01T00:00:00Z
        max_uses = 5
        constraints = [
            { kind = "currency", arg = "/currency", allowed = ["EUR"] },
            { kind = "max", arg = "/amount", max = "100.00" },
        ]
    "#;

    #[test]
    fn a_complete_entry_loads_with_a_stable_digest() {
        let all = load(GOOD).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].slug, "small-eur-payments");
        assert_eq!(all[0].scope.expires_at.as_str(), "2099-01-01T00:00:00Z");
        let again = load(GOOD).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(all[0].digest(), again[0].digest());
        let quoted = load(&GOOD.replace("2099-01-01T00:00:00Z", "\"2099-01-01T00:00:00Z\""))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            quoted[0].digest(),
            all[0].digest(),
            "quoted or bare date-time"
        );
        let changed = load(&GOOD.replace("100.00", "100.01")).unwrap_or_else(|e| panic!("{e}"));
        assert_ne!(changed[0].digest(), all[0].digest());
    }

    #[test]
    fn a_local_date_time_is_refused() {
        for local in [
            "2099-01-01T00:00:00",
            "2099-01-01",
            "\"2099-01-01T00:00:00\"",
        ] {
            let err = load(&GOOD.replace("2099-01-01T00:00:00Z", local)).err();
            assert!(
                matches!(
                    err,
                    Some(PreauthError::LocalTime { .. } | PreauthError::Scope { .. })
                ),
                "{local}: {err:?}"
            );
        }
    }

    #[test]
    fn unknown_kinds_members_and_bad_slugs_are_refused() {
        let err = load(&GOOD.replace("kind = \"max\"", "kind = \"maximum\"")).err();
        assert!(matches!(err, Some(PreauthError::Scope { .. })), "{err:?}");
        let err = load(&GOOD.replace("max_uses = 5", "max_uses = 5\nnote = \"x\"")).err();
        assert!(matches!(err, Some(PreauthError::Scope { .. })), "{err:?}");
        let err = load(&GOOD.replace("small-eur-payments", "Small EUR")).err();
        assert!(matches!(err, Some(PreauthError::BadSlug { .. })), "{err:?}");
        let err = load(&GOOD.replace("slug = \"small-eur-payments\"", "")).err();
        assert!(matches!(err, Some(PreauthError::NoSlug { .. })), "{err:?}");
        let err = load(&format!("{GOOD}\n{GOOD}")).err();
        assert!(
            matches!(err, Some(PreauthError::DuplicateSlug { .. })),
            "{err:?}"
        );
        let err = load(&GOOD.replace("max_uses = 5", "max_uses = 5.0")).err();
        assert!(matches!(err, Some(PreauthError::Scope { .. })), "{err:?}");
    }
}

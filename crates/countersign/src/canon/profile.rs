//! Profiles as data. OWNED BY THE CANON HELPER — contract stub.

use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FieldKind {
    String,
    Decimal,
    Integer,
    Boolean,
    Object,
    Any,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FieldSpec {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: FieldKind,
    pub label: String,
    #[serde(default)]
    pub exact: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    pub id: String,
    pub fields: Vec<FieldSpec>,
    pub allow_floats: bool,
    pub digest: [u8; 32],
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    #[error("invalid profile: {0}")]
    Invalid(String),
}

#[derive(Debug, Clone, Default)]
pub struct ProfileRegistry {
    profiles: BTreeMap<String, Profile>,
}

impl ProfileRegistry {
    /// The two built-in profiles.
    pub fn builtin() -> Self {
        Self::default()
    }
    pub fn get(&self, id: &str) -> Option<&Profile> {
        self.profiles.get(id)
    }
}

//! One rule for every optional member of a wire object: absent takes its documented default, and
//! `null` is refused (docs/SPEC.md §2).
//!
//! Why a rule of its own: serde reads `null` into an `Option<T>` as `None`, the same as absent.
//! For several members absent means "no restriction" (`approvers`: every principal may decide;
//! `aal3_aaguids`: any attested key reaches AAL3; `backup_eligible`: no backup check), so a
//! producer that writes `null` meaning "none" would silently get "anything". Refusing `null`
//! leaves one spelling for each reading: omit the member, or give it a value of its type.
//!
//! The one place that reads `null` as absent is the result envelope's transport strings that
//! restrict nothing (`reason_code`, `expires_at`, `redrive_url`, a non-PENDING `approval_id`:
//! `result::informational_string`, docs/SPEC.md §2.1). Nothing here does.
//!
//! Use: `#[serde(default, deserialize_with = "path::to::member_fn")]` on the `Option<T>` field,
//! where `member_fn` comes from [`refuse_null!`] so the error names the member.

use serde::{Deserialize, Deserializer, de::Error as _};

/// Read a member that is present (serde calls `deserialize_with` only for present members):
/// a value of type `T`, never `null`. The error names `member`.
pub fn present_not_null<'de, D, T>(deserializer: D, member: &str) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    match Option::<T>::deserialize(deserializer)? {
        Some(value) => Ok(Some(value)),
        None => Err(D::Error::custom(format!(
            "member {member:?} is null: null is refused, omit the member to take its default"
        ))),
    }
}

/// Declare one `deserialize_with` function per member, each naming its member in the error:
/// `refuse_null! { approvers => "approvers", aal3_aaguids => "aal3_aaguids" }`.
macro_rules! refuse_null {
    ($($function:ident => $member:literal),* $(,)?) => {
        $(
            pub(crate) fn $function<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
            where
                D: serde::Deserializer<'de>,
                T: serde::Deserialize<'de>,
            {
                $crate::absent_or_value::present_not_null(d, $member)
            }
        )*
    };
}
pub(crate) use refuse_null;

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    mod members {
        super::super::refuse_null! { limit => "limit" }
    }

    #[derive(Debug, Deserialize, PartialEq)]
    struct Sample {
        #[serde(default, deserialize_with = "members::limit")]
        limit: Option<u32>,
    }

    fn parse(text: &str) -> Result<Sample, String> {
        serde_json::from_str(text).map_err(|e| e.to_string())
    }

    #[test]
    fn absent_is_none_and_a_value_is_read() {
        assert_eq!(parse("{}"), Ok(Sample { limit: None }));
        assert_eq!(parse(r#"{"limit":7}"#), Ok(Sample { limit: Some(7) }));
    }

    #[test]
    fn null_is_refused_naming_the_member() {
        let err = parse(r#"{"limit":null}"#).err().unwrap_or_default();
        assert!(err.contains("\"limit\" is null"), "{err}");
    }

    #[test]
    fn a_wrong_type_is_still_refused() {
        assert!(parse(r#"{"limit":"7"}"#).is_err());
        assert!(parse(r#"{"limit":-1}"#).is_err());
    }
}

//! Which calls a standing grant may approve besides its agent, tool and argument rules: the call
//! profile, the MCP server when that profile signs one, and the gateways that may spend it.
//!
//! An agent id and a tool name are names a gateway chooses; two tenants of one service can both
//! have a `ci-bot` calling `deploy`, and two MCP servers can both expose `delete_file`. Without
//! these members a grant signed for one of them would approve the other. They are part of the
//! signed fields, so the approver sees them and no one can widen them after signing.
//!
//! The members are exact names, never patterns: a grant names the one profile, the one server and
//! the gateways it was asked for. `server_id` is present exactly when the named profile signs a
//! server (absent is not `null`: `null` is refused). An offline verifier checks the profile and
//! the server against the call; it does not know which gateway asks, so the gateways are the
//! service's to enforce (docs/SPEC.md §14.5).

use super::error::{OutOfScope, ScopeError};
use serde::{Deserialize, Deserializer, Serialize};

/// The longest profile id or server id accepted, in bytes.
pub const MAX_NAME_BYTES: usize = 256;
/// The longest gateway name accepted, in bytes (the service's limit for a gateway's name).
pub const MAX_GATEWAY_BYTES: usize = 64;
/// The most gateways one grant may name.
pub const MAX_GATEWAYS: usize = 64;

/// The calls a standing grant covers: one profile, one server (for a profile that signs one) and
/// the gateways that may spend it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Calls {
    /// The profile the covered calls are signed under (`countersign.tool-call/1`, ...).
    pub profile: ExactName,
    /// The MCP server of the covered calls; present exactly for a profile that signs one.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "server_id_not_null"
    )]
    pub server_id: Option<ExactName>,
    /// The gateways whose calls the grant covers.
    pub gateways: Gateways,
}

fn server_id_not_null<'de, D: Deserializer<'de>>(d: D) -> Result<Option<ExactName>, D::Error> {
    crate::absent_or_value::present_not_null(d, "server_id")
}

impl Calls {
    /// Whether a call signed under `profile`, to `server_id` (the call's signed `server_id`
    /// field, `None` when its profile has none), is one the grant names.
    pub fn covers(&self, profile: &str, server_id: Option<&str>) -> Result<(), OutOfScope> {
        if self.profile.as_str() != profile {
            return Err(OutOfScope::ProfileNotCovered {
                named: self.profile.as_str().to_owned(),
                profile: profile.to_owned(),
            });
        }
        // Absent on one side and present on the other is a mismatch too: a grant that names no
        // server does not cover a call that signs one, whatever its tool is called.
        let named = self.server_id.as_ref().map(ExactName::as_str);
        if named != server_id {
            return Err(OutOfScope::ServerNotCovered {
                named: named.map(str::to_owned),
                server: server_id.map(str::to_owned),
            });
        }
        Ok(())
    }

    /// Whether `gateway` is one of the gateways the grant names.
    pub fn covers_gateway(&self, gateway: &str) -> Result<(), OutOfScope> {
        if self.gateways.names().any(|g| g == gateway) {
            return Ok(());
        }
        Err(OutOfScope::GatewayNotCovered {
            gateways: self.gateways.names().map(str::to_owned).collect(),
            gateway: gateway.to_owned(),
        })
    }
}

/// A profile id or server id: 1 to 256 bytes, no control character, compared exactly.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ExactName(String);

impl ExactName {
    /// Validate a name.
    pub fn new(text: &str) -> Result<Self, ScopeError> {
        let why = if text.is_empty() {
            Some("is empty")
        } else if text.len() > MAX_NAME_BYTES {
            Some("is longer than 256 bytes")
        } else if text.chars().any(char::is_control) {
            Some("holds a control character")
        } else {
            None
        };
        match why {
            Some(why) => Err(ScopeError::BadName {
                name: super::amount::excerpt(text),
                why,
            }),
            None => Ok(Self(text.to_owned())),
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for ExactName {
    type Error = ScopeError;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        Self::new(&text)
    }
}

impl From<ExactName> for String {
    fn from(n: ExactName) -> Self {
        n.0
    }
}

/// The gateways a grant names: 1 to 64 distinct names, each 1 to 64 bytes of `A-Z a-z 0-9 . _ -`
/// (the alphabet the service gives gateway names, which cannot hide one name behind another).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Vec<String>", into = "Vec<String>")]
pub struct Gateways(Vec<String>);

impl Gateways {
    /// The names, in the order written.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }
}

impl TryFrom<Vec<String>> for Gateways {
    type Error = ScopeError;
    fn try_from(names: Vec<String>) -> Result<Self, Self::Error> {
        if names.is_empty() || names.len() > MAX_GATEWAYS {
            return Err(ScopeError::GatewayCount { got: names.len() });
        }
        for (index, name) in names.iter().enumerate() {
            let earlier = names.get(..index).unwrap_or_default();
            let plain = !name.is_empty()
                && name.len() <= MAX_GATEWAY_BYTES
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
            if !plain {
                return Err(ScopeError::BadGatewayName {
                    name: super::amount::excerpt(name),
                });
            }
            // One list, one spelling: a repeated name adds nothing and makes two texts sign
            // the same permission.
            if earlier.contains(name) {
                return Err(ScopeError::DuplicateGateway { name: name.clone() });
            }
        }
        Ok(Self(names))
    }
}

impl From<Gateways> for Vec<String> {
    fn from(g: Gateways) -> Self {
        g.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn calls(value: serde_json::Value) -> Result<Calls, String> {
        serde_json::from_value(value).map_err(|e| e.to_string())
    }

    fn mcp() -> Calls {
        calls(
            json!({"profile": "countersign.mcp-tool-call/1", "server_id": "github",
                     "gateways": ["ci-gw"]}),
        )
        .unwrap()
    }

    #[test]
    fn the_named_profile_and_server_are_covered() {
        assert_eq!(
            mcp().covers("countersign.mcp-tool-call/1", Some("github")),
            Ok(())
        );
        let plain =
            calls(json!({"profile": "countersign.tool-call/1", "gateways": ["ci-gw"]})).unwrap();
        assert_eq!(plain.covers("countersign.tool-call/1", None), Ok(()));
    }

    #[test]
    fn another_profile_is_not_covered() {
        let e = mcp().covers("countersign.tool-call/1", None).unwrap_err();
        assert_eq!(e.code(), "profile_not_covered");
    }

    #[test]
    fn another_server_or_a_missing_one_is_not_covered() {
        let e = mcp()
            .covers("countersign.mcp-tool-call/1", Some("filesystem"))
            .unwrap_err();
        assert_eq!(e.code(), "server_not_covered");
        let e = mcp()
            .covers("countersign.mcp-tool-call/1", None)
            .unwrap_err();
        assert_eq!(e.code(), "server_not_covered");
        // A grant that names no server covers no call that signs one.
        let unnamed = calls(json!({"profile": "countersign.mcp-tool-call/1",
                                   "gateways": ["ci-gw"]}))
        .unwrap();
        let e = unnamed
            .covers("countersign.mcp-tool-call/1", Some("github"))
            .unwrap_err();
        assert_eq!(e.code(), "server_not_covered");
    }

    #[test]
    fn only_the_named_gateways_are_covered() {
        assert_eq!(mcp().covers_gateway("ci-gw"), Ok(()));
        let e = mcp().covers_gateway("other-team").unwrap_err();
        assert_eq!(e.code(), "gateway_not_covered");
        // Exact: no pattern, no prefix, no case folding.
        for near in ["ci-gw2", "CI-GW", "ci-*", "*"] {
            assert!(mcp().covers_gateway(near).is_err(), "{near}");
        }
    }

    #[test]
    fn malformed_members_are_refused_when_read() {
        for bad in [
            json!({"profile": "countersign.tool-call/1"}),
            json!({"gateways": ["ci-gw"]}),
            json!({"profile": "countersign.tool-call/1", "gateways": []}),
            json!({"profile": "countersign.tool-call/1", "gateways": ["ci gw"]}),
            json!({"profile": "countersign.tool-call/1", "gateways": ["a", "a"]}),
            json!({"profile": "countersign.tool-call/1", "gateways": "ci-gw"}),
            json!({"profile": "", "gateways": ["ci-gw"]}),
            json!({"profile": "countersign.tool-call/1", "server_id": null, "gateways": ["g"]}),
            json!({"profile": "countersign.tool-call/1", "server_id": "", "gateways": ["g"]}),
            json!({"profile": "countersign.tool-call/1", "gateways": ["g"], "tenant": "x"}),
        ] {
            assert!(calls(bad.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_absent_server_stays_absent_when_written() {
        let plain =
            calls(json!({"profile": "countersign.tool-call/1", "gateways": ["g"]})).unwrap();
        assert_eq!(
            serde_json::to_value(&plain).unwrap(),
            json!({"profile": "countersign.tool-call/1", "gateways": ["g"]})
        );
    }
}

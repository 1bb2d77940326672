//! The fields a tool call is signed as, under the two call profiles.
//!
//! The generic tool-call profile signs `{agent_id, tool_name, params}` and the MCP tool-call
//! profile `{agent_id, server_id, tool_name, params}`; any other (typed) profile signs the tool's
//! own arguments. A service building the action from a request and a gateway rebuilding it to
//! verify the answer must produce the same document, so both call [`call_fields_json`].

use thiserror::Error;

/// The generic tool-call profile (the default when a request names none).
pub const TOOL_CALL_PROFILE: &str = "countersign.tool-call/1";

/// The profile of a call relayed by the MCP interposer: the tool-call fields plus `server_id`.
pub const MCP_TOOL_CALL_PROFILE: &str = "countersign.mcp-tool-call/1";

/// A tool call as a gateway holds it, before it becomes an action's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolCallParts<'a> {
    /// The agent asking to run the call.
    pub agent_id: &'a str,
    /// The MCP server the call goes to; signed only by [`MCP_TOOL_CALL_PROFILE`].
    pub server_id: Option<&'a str>,
    /// The tool about to run.
    pub tool_name: &'a str,
    /// The JSON text of the arguments, exactly as the tool will receive them. It is embedded as
    /// is (admission checks it later), so the approver sees the bytes the tool will run.
    pub params_json: &'a str,
}

/// A call whose `server_id` does not fit its profile.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum CallFieldsError {
    /// The MCP tool-call profile signs the server, so the call must name one.
    #[error("server_id is required with the MCP tool-call profile")]
    ServerIdMissing,
    /// A `server_id` under another profile would be signed by none: refused, not dropped.
    #[error("server_id is signed only by {MCP_TOOL_CALL_PROFILE}, not by {profile}")]
    ServerIdNotSigned {
        /// The profile the call names.
        profile: String,
    },
}

/// The JSON text of the action's fields for `call` under `profile`.
///
/// The call profiles take `agent_id`, `tool_name` (and `server_id`) from the call itself, so the
/// signed operation is the call's by construction; a typed profile's fields are `params_json`.
pub fn call_fields_json(
    profile: &str,
    call: &ToolCallParts<'_>,
) -> Result<String, CallFieldsError> {
    // Value's Display is JSON with the string escaped: it cannot fail, unlike to_string.
    let string = |s: &str| serde_json::Value::from(s).to_string();
    let (agent, tool, params) = (
        string(call.agent_id),
        string(call.tool_name),
        call.params_json,
    );
    match (profile, call.server_id) {
        (MCP_TOOL_CALL_PROFILE, Some(server)) => Ok(format!(
            "{{\"agent_id\":{agent},\"server_id\":{},\"tool_name\":{tool},\"params\":{params}}}",
            string(server)
        )),
        (MCP_TOOL_CALL_PROFILE, None) => Err(CallFieldsError::ServerIdMissing),
        (_, Some(_)) => Err(CallFieldsError::ServerIdNotSigned {
            profile: profile.to_owned(),
        }),
        (TOOL_CALL_PROFILE, None) => Ok(format!(
            "{{\"agent_id\":{agent},\"tool_name\":{tool},\"params\":{params}}}"
        )),
        (_, None) => Ok(params.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(server_id: Option<&'static str>) -> ToolCallParts<'static> {
        ToolCallParts {
            agent_id: "agent-\"7\"",
            server_id,
            tool_name: "payments.transfer",
            params_json: r#"{"to":"A","n":1}"#,
        }
    }

    #[test]
    fn the_call_profiles_wrap_the_arguments_text_unchanged() {
        assert_eq!(
            call_fields_json(TOOL_CALL_PROFILE, &call(None)).unwrap(),
            r#"{"agent_id":"agent-\"7\"","tool_name":"payments.transfer","params":{"to":"A","n":1}}"#
        );
        assert_eq!(
            call_fields_json(MCP_TOOL_CALL_PROFILE, &call(Some("files"))).unwrap(),
            r#"{"agent_id":"agent-\"7\"","server_id":"files","tool_name":"payments.transfer","params":{"to":"A","n":1}}"#
        );
        assert_eq!(
            call_fields_json("countersign.payment/1", &call(None)).unwrap(),
            r#"{"to":"A","n":1}"#
        );
    }

    #[test]
    fn a_server_id_must_match_the_profile() {
        assert_eq!(
            call_fields_json(MCP_TOOL_CALL_PROFILE, &call(None)),
            Err(CallFieldsError::ServerIdMissing)
        );
        assert!(matches!(
            call_fields_json(TOOL_CALL_PROFILE, &call(Some("files"))),
            Err(CallFieldsError::ServerIdNotSigned { .. })
        ));
    }

    #[test]
    fn the_wrapped_fields_are_admissible_under_their_profile() {
        let registry = crate::ProfileRegistry::builtin();
        for (profile, server) in [
            (TOOL_CALL_PROFILE, None),
            (MCP_TOOL_CALL_PROFILE, Some("files")),
        ] {
            let json = call_fields_json(profile, &call(server)).unwrap();
            let profile = registry.get(profile).unwrap();
            assert!(
                crate::admit_fields(profile, json.as_bytes()).is_ok(),
                "{json}"
            );
        }
    }
}

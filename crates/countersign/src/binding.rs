//! Binding the action (docs/SPEC.md §6 step 3): admit its fields under the policy's NFC rule, then
//! check that the operation the gateway is about to run is the one the evidence is about.
//!
//! Policy must be chosen only from signed data. The tool-call profile signs its operation (its
//! `tool_name` field is inside op_hash), so evidence for one tool can never pass for another. A
//! typed profile such as `countersign.payment/1` signs no operation: a payment approved for
//! `payments.transfer` would verify for any tool that submits the same fields, including one whose
//! rule asks less. For those profiles the verifier's own configuration binds the profile to the one
//! tool allowed to use it (`profile_tools`).

use crate::canon::{self, CanonicalFields, Profile};
use crate::policy::Policy;
use crate::verify::{Action, VerifyError};
use serde_json::Value;

/// The field whose presence in a profile means the profile signs its operation.
pub(crate) const OPERATION_FIELD: &str = "tool_name";

impl Policy {
    /// Check that `action.tool` may run with evidence about `action` under `profile`.
    ///
    /// - `profile` signs its operation (declares a `tool_name` field): when `action.tool` is
    ///   given it must equal the admitted `tool_name` (else `binding_mismatch`);
    /// - otherwise, when `action.tool` is given, `profile_tools` must bind `profile` to exactly
    ///   that tool; when it is absent, `profile_tools` must not bind `profile` at all (the verifier
    ///   knows the profile belongs to one tool and the action does not say which). Both refusals
    ///   are `action_inadmissible`.
    ///
    /// An action without a tool whose profile has no binding is accepted: a single-purpose
    /// verifier, where nothing chooses a policy by tool name.
    ///
    /// This admits the fields (under [`Policy::nfc`]) to read the signed `tool_name`; a refusal
    /// there is returned as [`VerifyError::Action`].
    pub fn check_operation(&self, action: &Action, profile: &Profile) -> Result<(), VerifyError> {
        let fields = if signs_operation(profile) {
            Some(
                canon::admit_fields_with(profile, &action.fields_json, self.nfc)
                    .map_err(VerifyError::Action)?,
            )
        } else {
            None
        };
        self.check_operation_admitted(action, profile, fields.as_ref())
    }

    /// [`Policy::check_operation`] with the fields already admitted under `profile` (`fields` may
    /// be `None` only for a profile that does not sign its operation).
    pub(crate) fn check_operation_admitted(
        &self,
        action: &Action,
        profile: &Profile,
        fields: Option<&CanonicalFields>,
    ) -> Result<(), VerifyError> {
        if signs_operation(profile) {
            let Some(tool) = action.tool.as_deref() else {
                return Ok(());
            };
            let signed = fields.and_then(|f| f.as_value().get(OPERATION_FIELD));
            return match signed {
                Some(Value::String(signed)) if signed == tool => Ok(()),
                other => Err(VerifyError::OperationMismatch {
                    tool: tool.to_owned(),
                    signed: match other {
                        Some(Value::String(s)) => s.clone(),
                        Some(v) => v.to_string(),
                        None => String::new(),
                    },
                }),
            };
        }
        let bound = self.profile_tools.get(&profile.id);
        match (action.tool.as_deref(), bound) {
            (Some(tool), Some(bound)) if tool == bound => Ok(()),
            (Some(tool), bound) => Err(VerifyError::OperationNotBound {
                profile: profile.id.clone(),
                tool: tool.to_owned(),
                bound: bound.cloned(),
            }),
            (None, Some(bound)) => Err(VerifyError::OperationUnnamed {
                profile: profile.id.clone(),
                bound: bound.clone(),
            }),
            (None, None) => Ok(()),
        }
    }
}

/// Whether `profile` signs its operation: its field list has a field named `tool_name`. Then
/// evidence for one tool cannot be presented for another, and any number of tools may share the
/// profile; otherwise the verifier's `profile_tools` must bind it to one tool.
pub fn signs_operation(profile: &Profile) -> bool {
    profile.field(OPERATION_FIELD).is_some()
}

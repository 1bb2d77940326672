//! The exit codes every subcommand answers with; part of the contract (docs/SPEC.md §9).

/// The action is allowed, or the command did what was asked.
pub(crate) const EXIT_ALLOW: u8 = 0;
/// The action is refused, or the command found what it was asked to check wanting.
pub(crate) const EXIT_DENY: u8 = 1;
/// The input itself is unusable (the reason is on stderr).
pub(crate) const EXIT_UNUSABLE: u8 = 2;

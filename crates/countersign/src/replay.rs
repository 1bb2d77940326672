//! Replay state: spent nonces and the last signature counter seen per credential.
//!
//! A gateway enforces both; its state must be shared by every verifier instance that guards the
//! same actions (the reference service keeps it in its database). An offline auditor replaying an
//! old record has no such state and no meaningful "now": [`danger::OfflineAudit`] reports instead
//! of enforcing, and says so in the verdict.

use std::collections::{HashMap, HashSet};

/// Whether replay and freshness findings deny or are only reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enforcement {
    /// A spent nonce, a stale assertion or a counter behind the state's counter is a DENY.
    Enforce,
    /// Findings are listed in the verdict; they do not change it. For offline audits only.
    ReportOnly,
}

/// Storage for spent nonces and counters.
pub trait ReplayState {
    /// Whether findings are enforced (the default) or only reported.
    fn enforcement(&self) -> Enforcement {
        Enforcement::Enforce
    }
    /// Whether `nonce` was already spent.
    fn is_spent(&self, nonce: &[u8]) -> bool;
    /// The highest signature counter recorded for `credential_id`, if any.
    fn sign_count(&self, credential_id: &[u8]) -> Option<u32>;
    /// Record a verified assertion: spend its nonce and advance the credential's counter.
    fn record(&mut self, nonce: &[u8], credential_id: &[u8], sign_count: u32);
}

/// An in-memory replay state (one process, e.g. one `countersign verify` run).
#[derive(Clone, Debug, Default)]
pub struct MemoryReplayState {
    spent: HashSet<Vec<u8>>,
    counters: HashMap<Vec<u8>, u32>,
}

impl MemoryReplayState {
    /// An empty state.
    pub fn new() -> Self {
        Self::default()
    }
    /// Number of spent nonces.
    pub fn spent_count(&self) -> usize {
        self.spent.len()
    }
}

impl ReplayState for MemoryReplayState {
    fn is_spent(&self, nonce: &[u8]) -> bool {
        self.spent.contains(nonce)
    }
    fn sign_count(&self, credential_id: &[u8]) -> Option<u32> {
        self.counters.get(credential_id).copied()
    }
    fn record(&mut self, nonce: &[u8], credential_id: &[u8], sign_count: u32) {
        self.spent.insert(nonce.to_vec());
        let entry = self
            .counters
            .entry(credential_id.to_vec())
            .or_insert(sign_count);
        *entry = (*entry).max(sign_count);
    }
}

/// Options that weaken enforcement. Never use them on an enforcement path.
pub mod danger {
    use super::{Enforcement, MemoryReplayState, ReplayState};

    /// Offline audit: verify signatures and bindings of an old record without replay state or a
    /// meaningful "now". Replay, freshness and counter findings are reported in the verdict and do
    /// not change it. A verdict produced this way says `replay: report_only`.
    #[derive(Clone, Debug, Default)]
    pub struct OfflineAudit {
        inner: MemoryReplayState,
    }

    impl OfflineAudit {
        /// A fresh audit state.
        pub fn new() -> Self {
            Self::default()
        }
    }

    impl ReplayState for OfflineAudit {
        fn enforcement(&self) -> Enforcement {
            Enforcement::ReportOnly
        }
        fn is_spent(&self, nonce: &[u8]) -> bool {
            self.inner.is_spent(nonce)
        }
        fn sign_count(&self, credential_id: &[u8]) -> Option<u32> {
            self.inner.sign_count(credential_id)
        }
        fn record(&mut self, nonce: &[u8], credential_id: &[u8], sign_count: u32) {
            self.inner.record(nonce, credential_id, sign_count);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_state_spends_nonces_and_keeps_the_highest_counter() {
        let mut s = MemoryReplayState::new();
        assert!(!s.is_spent(b"n1"));
        s.record(b"n1", b"cred", 7);
        assert!(s.is_spent(b"n1"));
        assert!(!s.is_spent(b"n2"));
        s.record(b"n2", b"cred", 3);
        assert_eq!(s.sign_count(b"cred"), Some(7));
        assert_eq!(s.sign_count(b"other"), None);
        assert_eq!(s.enforcement(), Enforcement::Enforce);
        assert_eq!(
            danger::OfflineAudit::new().enforcement(),
            Enforcement::ReportOnly
        );
    }
}

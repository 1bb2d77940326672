//! The login rate limit: a per-client fixed window over approver sign-in attempts. State the
//! service holds (in [`super::AppState`]) and the HTTP layer consults before a login.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

/// Login attempts (challenges and assertions) one client address may make per window.
const LOGIN_ATTEMPTS_PER_WINDOW: u32 = 20;
const WINDOW_MS: i64 = 60_000;
/// Bound of the rate limiter's memory.
const MAX_TRACKED_CLIENTS: usize = 10_000;

/// Per-client fixed-window counters for login attempts.
#[derive(Debug, Default)]
pub(crate) struct WebGuard {
    windows: Mutex<HashMap<Option<IpAddr>, (i64, u32)>>,
}

impl WebGuard {
    /// Count one attempt by `client` at `now`: `Err(seconds until its window ends)` when the
    /// client is over its budget.
    pub(crate) fn allow(&self, client: Option<IpAddr>, now: i64) -> Result<(), u64> {
        let mut windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        if windows.len() >= MAX_TRACKED_CLIENTS {
            windows.retain(|_, (start, _)| now.saturating_sub(*start) < WINDOW_MS);
        }
        let entry = windows.entry(client).or_insert((now, 0));
        if now.saturating_sub(entry.0) >= WINDOW_MS {
            *entry = (now, 0);
        }
        entry.1 = entry.1.saturating_add(1);
        if entry.1 <= LOGIN_ATTEMPTS_PER_WINDOW {
            return Ok(());
        }
        let left_ms = entry.0.saturating_add(WINDOW_MS).saturating_sub(now);
        Err(u64::try_from(left_ms.saturating_add(999) / 1000).unwrap_or(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limit_counts_per_client_and_resets_after_the_window() {
        let g = WebGuard::default();
        let a = Some(IpAddr::from([127, 0, 0, 1]));
        let b = Some(IpAddr::from([127, 0, 0, 2]));
        for _ in 0..LOGIN_ATTEMPTS_PER_WINDOW {
            assert!(g.allow(a, 0).is_ok());
        }
        assert_eq!(g.allow(a, 1), Err(60), "over budget, 59.999 s left");
        assert!(g.allow(b, 1).is_ok(), "another client has its own budget");
        assert!(g.allow(a, WINDOW_MS).is_ok(), "a new window");
    }
}

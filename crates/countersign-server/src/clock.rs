//! Time as an injected dependency, so expiry can be tested without sleeping.

use std::sync::Mutex;
use time::OffsetDateTime;

/// The service's notion of "now".
pub trait Clock: Send + Sync + std::fmt::Debug + 'static {
    fn now(&self) -> OffsetDateTime;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }
}

/// A clock that moves only when told to (tests).
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<OffsetDateTime>,
}

impl ManualClock {
    /// A clock stopped at `start`.
    pub fn new(start: OffsetDateTime) -> Self {
        Self {
            now: Mutex::new(start),
        }
    }
    /// Move the clock forward (or backward with a negative duration).
    pub fn advance(&self, by: time::Duration) {
        let mut now = self.now.lock().unwrap_or_else(|p| p.into_inner());
        *now += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> OffsetDateTime {
        *self.now.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Milliseconds since the Unix epoch (the database's time unit).
pub fn to_ms(t: OffsetDateTime) -> i64 {
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX)
}

/// The system clock in ms since the Unix epoch: for the CLI and start-up code that run outside
/// an [`AppState`](crate::AppState) (which reads its injected [`Clock`] instead).
pub fn system_now_ms() -> i64 {
    to_ms(SystemClock.now())
}

/// A configured duration in seconds as ms, saturating: a huge timeout means "never", not an
/// overflow.
pub fn secs_to_ms(seconds: u64) -> i64 {
    i64::try_from(seconds.saturating_mul(1000)).unwrap_or(i64::MAX)
}

/// The inverse of [`to_ms`]; out-of-range values clamp to the epoch.
pub fn from_ms(ms: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

/// RFC 3339 with millisecond precision, UTC.
pub fn rfc3339(t: OffsetDateTime) -> String {
    let t = from_ms(to_ms(t));
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_advanced_and_ms_round_trips() {
        let start = OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_000);
        let c = ManualClock::new(start);
        assert_eq!(c.now(), start);
        c.advance(time::Duration::milliseconds(1500));
        assert_eq!(to_ms(c.now()) - to_ms(start), 1500);
        assert_eq!(from_ms(to_ms(c.now())), c.now());
        assert!(rfc3339(c.now()).ends_with('Z'));
    }

    #[test]
    fn seconds_saturate_instead_of_overflowing() {
        assert_eq!(secs_to_ms(0), 0);
        assert_eq!(secs_to_ms(90), 90_000);
        assert_eq!(secs_to_ms(u64::MAX), i64::MAX);
        assert_eq!(secs_to_ms(u64::MAX / 1000), i64::MAX);
    }
}

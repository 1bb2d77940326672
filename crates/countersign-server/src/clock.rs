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

/// A wall clock that never runs backward and never runs slower than real time: each reading is
/// the later of the wall clock and the previous reading plus the monotonic time elapsed since it.
///
/// Expiry is decided against this clock, so a wall clock stepped back (an NTP correction, an
/// operator's `date -s`) cannot reopen an approval to a verdict after its time has run out, nor
/// lengthen any window: elapsed real time always counts. A step forward is followed at once
/// (approvals then expire early, the safe direction) and is kept when the wall clock steps back
/// again. `countersign serve` runs on it over [`SystemClock`].
#[derive(Debug)]
pub struct SteadyClock<C: Clock = SystemClock> {
    wall: C,
    /// The previous reading and the monotonic instant it was taken at.
    last: Mutex<Option<(OffsetDateTime, std::time::Instant)>>,
}

impl<C: Clock> SteadyClock<C> {
    /// Steady readings of `wall`.
    pub fn new(wall: C) -> Self {
        Self {
            wall,
            last: Mutex::new(None),
        }
    }
}

impl<C: Clock> Clock for SteadyClock<C> {
    fn now(&self) -> OffsetDateTime {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let at = std::time::Instant::now();
        let wall = self.wall.now();
        let now = match *last {
            Some((prev, then)) => {
                let elapsed = at.saturating_duration_since(then);
                let steady = time::Duration::try_from(elapsed)
                    .ok()
                    .and_then(|d| prev.checked_add(d))
                    .unwrap_or(prev);
                wall.max(steady)
            }
            None => wall,
        };
        *last = Some((now, at));
        now
    }
}

impl<C: Clock> Clock for std::sync::Arc<C> {
    fn now(&self) -> OffsetDateTime {
        C::now(self)
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
    fn steady_clock_follows_forward_steps_and_ignores_backward_ones() {
        let start = OffsetDateTime::UNIX_EPOCH + time::Duration::days(20_000);
        let wall = std::sync::Arc::new(ManualClock::new(start));
        let steady = SteadyClock::new(wall.clone());
        let t0 = steady.now();
        assert!(t0 >= start);
        // Back one hour: the reading does not go back.
        wall.advance(time::Duration::hours(-1));
        let t1 = steady.now();
        assert!(t1 >= t0, "{t1} < {t0}");
        // Forward two hours (one past the start): followed at once.
        wall.advance(time::Duration::hours(2));
        let t2 = steady.now();
        assert!(t2 >= start + time::Duration::hours(1), "{t2}");
        // Back again: the forward step is kept.
        wall.advance(time::Duration::hours(-2));
        assert!(steady.now() >= t2);
    }

    #[test]
    fn seconds_saturate_instead_of_overflowing() {
        assert_eq!(secs_to_ms(0), 0);
        assert_eq!(secs_to_ms(90), 90_000);
        assert_eq!(secs_to_ms(u64::MAX), i64::MAX);
        assert_eq!(secs_to_ms(u64::MAX / 1000), i64::MAX);
    }
}

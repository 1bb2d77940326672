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

/// The database server's clock, as this process last read it, run forward on the monotonic
/// clock between readings.
///
/// Replicas of one PostgreSQL database each have a wall clock of their own; if each decided
/// expiry by its own, a replica whose clock is behind would accept a verdict the others already
/// consider late, and one that is ahead would create approvals that live longer than configured.
/// Reading the one clock they share, the database's, gives every replica the same time, within
/// half a round trip and the monotonic clock's drift since the last reading (`serve` reads it
/// at start and every 500 ms). The host's wall clock plays no part. `countersign serve` runs
/// PostgreSQL replicas on [`SteadyClock`] over this, so that a reading that moves back (the
/// database server's clock stepped back, or a reading's error) never moves the service back.
#[derive(Debug)]
pub struct DatabaseTime {
    /// The database's time at the last reading and the monotonic instant it is taken to
    /// correspond to.
    anchor: Mutex<(OffsetDateTime, std::time::Instant)>,
}

impl DatabaseTime {
    /// Anchored at one reading: the database answered `db_now` to a query sent at `sent` and
    /// answered at `received`.
    pub fn new(
        db_now: OffsetDateTime,
        sent: std::time::Instant,
        received: std::time::Instant,
    ) -> Self {
        Self {
            anchor: Mutex::new((db_now, midpoint(sent, received))),
        }
    }

    /// Read the database's clock with `now_ms` (one round trip to the database, blocking: the
    /// store's `database_now_ms`). The clock knows nothing of the store, so the store may use it.
    pub fn read<E>(now_ms: impl FnOnce() -> Result<i64, E>) -> Result<Self, E> {
        let (db_now, at) = reading(now_ms)?;
        Ok(Self {
            anchor: Mutex::new((db_now, at)),
        })
    }

    /// Re-anchor at a new reading.
    pub fn update(
        &self,
        db_now: OffsetDateTime,
        sent: std::time::Instant,
        received: std::time::Instant,
    ) {
        *self.anchor.lock().unwrap_or_else(|p| p.into_inner()) = (db_now, midpoint(sent, received));
    }

    /// Read the database's clock again with `now_ms` and re-anchor (blocking); on an error the
    /// clock keeps running from its last reading.
    pub fn refresh<E>(&self, now_ms: impl FnOnce() -> Result<i64, E>) -> Result<(), E> {
        let reading = reading(now_ms)?;
        *self.anchor.lock().unwrap_or_else(|p| p.into_inner()) = reading;
        Ok(())
    }
}

/// One reading of the database's clock, and the monotonic instant it is taken to correspond to.
fn reading<E>(
    now_ms: impl FnOnce() -> Result<i64, E>,
) -> Result<(OffsetDateTime, std::time::Instant), E> {
    let sent = std::time::Instant::now();
    let db_now = now_ms()?;
    Ok((from_ms(db_now), midpoint(sent, std::time::Instant::now())))
}

/// The instant halfway through a round trip: where an answer's reading is assumed to be taken,
/// wrong by at most half the round trip.
fn midpoint(sent: std::time::Instant, received: std::time::Instant) -> std::time::Instant {
    sent + received.saturating_duration_since(sent) / 2
}

impl Clock for DatabaseTime {
    fn now(&self) -> OffsetDateTime {
        let (db_now, at) = *self.anchor.lock().unwrap_or_else(|p| p.into_inner());
        let elapsed = std::time::Instant::now().saturating_duration_since(at);
        time::Duration::try_from(elapsed)
            .ok()
            .and_then(|d| db_now.checked_add(d))
            .unwrap_or(db_now)
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
    fn database_time_reads_through_the_function_it_is_given_and_keeps_its_reading_on_error() {
        // Readings an hour and two hours away from this host's wall clock (milliseconds).
        let hour_ago = OffsetDateTime::now_utc() - time::Duration::hours(1);
        let ms = |t: OffsetDateTime| i64::try_from(t.unix_timestamp_nanos() / 1_000_000).unwrap();
        let clock = DatabaseTime::read(|| Ok::<_, String>(ms(hour_ago))).unwrap();
        let first = clock.now();
        assert!(first >= hour_ago - time::Duration::seconds(1), "{first}");
        assert!(first < hour_ago + time::Duration::minutes(10), "{first}");
        // A failed reading is the caller's error, and the clock runs on from the last one.
        let failed = clock.refresh(|| Err::<i64, _>("database gone".to_owned()));
        assert_eq!(failed, Err("database gone".to_owned()));
        assert!(clock.now() < hour_ago + time::Duration::minutes(10));
        let two_hours_ago = hour_ago - time::Duration::hours(1);
        clock
            .refresh(|| Ok::<_, String>(ms(two_hours_ago)))
            .unwrap();
        assert!(clock.now() < hour_ago - time::Duration::minutes(30));
        assert!(DatabaseTime::read(|| Err::<i64, _>("refused")).is_err());
    }

    #[test]
    fn database_time_runs_from_its_last_reading_and_ignores_the_wall_clock() {
        use std::time::{Duration, Instant};
        // A reading an hour away from this host's wall clock, answered in a 10 ms round trip.
        let db = OffsetDateTime::now_utc() - time::Duration::hours(1);
        let sent = Instant::now();
        let clock = DatabaseTime::new(db, sent, sent + Duration::from_millis(10));
        // Read at the round trip's midpoint, and the monotonic time since then added.
        let now = clock.now();
        assert!(now >= db - time::Duration::milliseconds(5), "{now} vs {db}");
        assert!(
            now < db + time::Duration::minutes(10),
            "the wall clock leaked in: {now}"
        );
        // A later reading replaces the anchor, in either direction.
        let later = db + time::Duration::hours(3);
        let at = Instant::now();
        clock.update(later, at, at);
        assert!(clock.now() >= later);
        let earlier = db - time::Duration::hours(3);
        clock.update(earlier, at, at);
        assert!(clock.now() < db);
        // Under SteadyClock (as `serve` runs it) a reading that moves back is not followed.
        let steady = SteadyClock::new(std::sync::Arc::new(clock));
        let t0 = steady.now();
        steady.wall.update(later, Instant::now(), Instant::now());
        let t1 = steady.now();
        assert!(t1 >= later, "a forward reading is followed: {t1}");
        steady.wall.update(earlier, Instant::now(), Instant::now());
        let t2 = steady.now();
        assert!(t2 >= t1 && t1 >= t0, "{t0} {t1} {t2}");
    }

    #[test]
    fn a_round_trips_midpoint_is_halfway() {
        use std::time::{Duration, Instant};
        let sent = Instant::now();
        assert_eq!(
            midpoint(sent, sent + Duration::from_millis(10)),
            sent + Duration::from_millis(5)
        );
        // A clock read "before" it was sent (it cannot be) counts as a zero round trip.
        assert_eq!(
            midpoint(sent + Duration::from_millis(10), sent),
            sent + Duration::from_millis(10)
        );
    }

    #[test]
    fn seconds_saturate_instead_of_overflowing() {
        assert_eq!(secs_to_ms(0), 0);
        assert_eq!(secs_to_ms(90), 90_000);
        assert_eq!(secs_to_ms(u64::MAX), i64::MAX);
        assert_eq!(secs_to_ms(u64::MAX / 1000), i64::MAX);
    }
}

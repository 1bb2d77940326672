//! Long-poll waiters: one wake-up channel per approval that someone is waiting on, and a cap on
//! how many wait at once.
//!
//! A settlement wakes the waiters of its own approval and nobody else's. (Before, one channel for
//! the whole service woke every waiter on every settlement, and each woke to re-read its
//! approval from the database: 1,500 idle polls turned one unrelated withdrawal into 1,500
//! reads.) A waiter holds a [`WaitGuard`]; the channel of an approval exists only while someone
//! holds a guard for it, so memory is bounded by the cap, not by the number of approvals.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// Counters of the long-poll machinery (for tests and metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WaiterStats {
    /// Long polls waiting now.
    pub waiting: usize,
    /// Wake-ups delivered since start: each settlement adds the number of waiters of its own
    /// approval.
    pub woken: u64,
    /// Long polls refused because `limits.long_poll_waiters` were already waiting.
    pub refused: u64,
}

#[derive(Debug)]
struct Channel {
    notify: Arc<Notify>,
    waiters: usize,
}

#[derive(Debug, Default)]
struct Table {
    channels: HashMap<String, Channel>,
    waiting: usize,
}

/// The waiters of every approval.
#[derive(Debug)]
pub(crate) struct Waiters {
    cap: usize,
    table: Mutex<Table>,
    woken: AtomicU64,
    refused: AtomicU64,
}

/// One registered long poll; dropping it unregisters.
#[derive(Debug)]
pub(crate) struct WaitGuard {
    waiters: Arc<Waiters>,
    id: String,
    notify: Arc<Notify>,
}

impl WaitGuard {
    /// The approval's wake-up channel. A `notified()` future created before reading the approval
    /// receives a wake-up sent after that point even if it is polled later (tokio's `Notify`
    /// guarantee for `notify_waiters`), so no settlement falls between the read and the wait.
    pub(crate) fn notify(&self) -> &Notify {
        &self.notify
    }
}

impl Drop for WaitGuard {
    fn drop(&mut self) {
        let mut table = self.waiters.lock();
        table.waiting = table.waiting.saturating_sub(1);
        if let Some(channel) = table.channels.get_mut(&self.id) {
            channel.waiters = channel.waiters.saturating_sub(1);
            if channel.waiters == 0 {
                table.channels.remove(&self.id);
            }
        }
    }
}

impl Waiters {
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            cap,
            table: Mutex::new(Table::default()),
            woken: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Register a waiter on approval `id`; `None` when `cap` waiters are already waiting.
    pub(crate) fn register(self: &Arc<Self>, id: &str) -> Option<WaitGuard> {
        let mut table = self.lock();
        if table.waiting >= self.cap {
            drop(table);
            self.refused.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        table.waiting += 1;
        let channel = table
            .channels
            .entry(id.to_owned())
            .or_insert_with(|| Channel {
                notify: Arc::new(Notify::new()),
                waiters: 0,
            });
        channel.waiters += 1;
        let notify = channel.notify.clone();
        Some(WaitGuard {
            waiters: self.clone(),
            id: id.to_owned(),
            notify,
        })
    }

    /// Wake the waiters of approval `id` (after its settlement committed).
    pub(crate) fn wake(&self, id: &str) {
        let table = self.lock();
        if let Some(channel) = table.channels.get(id) {
            channel.notify.notify_waiters();
            self.woken.fetch_add(
                u64::try_from(channel.waiters).unwrap_or(u64::MAX),
                Ordering::Relaxed,
            );
        }
    }

    pub(crate) fn stats(&self) -> WaiterStats {
        WaiterStats {
            waiting: self.lock().waiting,
            woken: self.woken.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_wake_reaches_only_its_approval_and_guards_unregister() {
        let w = Arc::new(Waiters::new(3));
        let a = w.register("a").unwrap();
        let b = w.register("b").unwrap();
        {
            let a_notified = a.notify().notified();
            let b_notified = b.notify().notified();
            tokio::pin!(a_notified, b_notified);
            a_notified.as_mut().enable();
            b_notified.as_mut().enable();
            w.wake("a");
            assert_eq!(w.stats().woken, 1);
            // A's future completes; B's was not woken.
            a_notified.await;
            assert!(poll_once(b_notified.as_mut()).is_pending());
        }
        drop(a);
        assert_eq!(w.stats().waiting, 1);
        w.wake("a");
        assert_eq!(w.stats().woken, 1, "no waiter left on a");
        drop(b);
        assert_eq!(w.stats().waiting, 0);
        assert!(w.lock().channels.is_empty());
    }

    #[test]
    fn the_cap_refuses_and_frees_on_drop() {
        let w = Arc::new(Waiters::new(2));
        let g1 = w.register("x").unwrap();
        let _g2 = w.register("x").unwrap();
        assert!(w.register("y").is_none());
        assert_eq!(w.stats().refused, 1);
        drop(g1);
        assert!(w.register("y").is_some());
    }

    fn poll_once<F: std::future::Future>(f: std::pin::Pin<&mut F>) -> std::task::Poll<F::Output> {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        f.poll(&mut cx)
    }
}

//! Waiting outside the driver: the shard parks in another poller (its
//! tokio runtime's reactor, `scheduler/tokio_shard.rs`) instead of in
//! `epoll_wait`.
//!
//! That poller watches this driver's epoll fd, which turns readable when
//! an event is ready in its set (the doorbell eventfd is one of them).
//! Epoll reports a nested epoll fd on each newly ready event, so
//! [`EpollDriver::prepare_wait`] first collects everything ready now:
//! an event already queued when the wait began would report nothing new.
//! That collection drains the doorbell eventfd if it was rung, so a rung
//! doorbell (work published for the shard after it said it was parked)
//! also means "do not wait": drained, it would wake nothing.

use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use super::EpollDriver;
use crate::driver::ops_table::{OpTable, Reaped};

impl EpollDriver {
    /// The fd that turns readable when this driver has something to do
    /// (the epoll fd itself: `notify`, made for a ring, is not needed).
    pub(crate) fn wait_fd(&mut self, notify: Option<std::os::fd::OwnedFd>) -> io::Result<RawFd> {
        drop(notify);
        Ok(self.poller.fd())
    }

    /// None: the doorbell eventfd is in this driver's own set.
    pub(crate) fn doorbell_fd(&self) -> Option<RawFd> {
        None
    }

    /// Everything [`EpollDriver::park`] does before it blocks. `None`:
    /// something is ready now, do not wait. `Some(t)`: wait on
    /// [`EpollDriver::wait_fd`] for at most `t` (which covers the
    /// driver's own timers), then call [`EpollDriver::finish_wait`].
    pub(crate) fn prepare_wait(
        &mut self,
        timeout: Option<Duration>,
    ) -> io::Result<Option<Option<Duration>>> {
        self.run_again();
        self.rung = false;
        self.wait_events(Some(Duration::ZERO))?;
        if self.has_completions() || self.rung {
            return Ok(None);
        }
        let timer = self
            .timers
            .first()
            .map(|&(d, _)| d.saturating_duration_since(Instant::now()));
        Ok(Some(crate::time::earliest(timeout, timer)))
    }

    /// After a wait on [`EpollDriver::wait_fd`]: collects what is ready
    /// without blocking.
    pub(crate) fn finish_wait(&mut self, ops: &OpTable, out: &mut Reaped) -> io::Result<usize> {
        self.run_again();
        let n = self.wait_events(Some(Duration::ZERO))?;
        Ok(n + self.collect(ops, out))
    }
}

//! Provided-buffer rings on epoll: the driver plays the kernel's part.
//!
//! A ring registered with [`BufGroups::register`] is the same memory the
//! io_uring backend would register (`buf/ring.rs`): descriptors written by
//! the application, which publishes them by advancing the tail (descriptor
//! 0's `resv`) with a release store. The kernel's private head becomes the
//! driver's: a buffer-select receive takes the descriptor at the head,
//! receives into it, and advances the head only when bytes arrived (a
//! receive that would block leaves the buffer in the ring).

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicU16, Ordering};

use crate::driver::BgidPool;

const DESC: usize = 16;
const TAIL_OFFSET: usize = 14;

/// One registered ring.
#[derive(Debug)]
pub(super) struct Group {
    ring: u64,
    entries: u16,
    head: u16,
}

impl Group {
    fn tail(&self) -> u16 {
        // SAFETY: the ring is page-aligned memory of `entries` descriptors,
        // registered until `unregister` (the registrant's contract); offset
        // 14 is 2-byte aligned; the application writes it atomically.
        let tail = unsafe { &*((self.ring as usize + TAIL_OFFSET) as *const AtomicU16) };
        // Acquire: pairs with the application's release store of the tail,
        // after which the descriptors before it are written.
        tail.load(Ordering::Acquire)
    }

    /// The buffer at the head: `(address, length, buffer id)`.
    pub(super) fn peek(&self) -> Option<(u64, u32, u16)> {
        if self.head == self.tail() {
            return None;
        }
        let slot = usize::from(self.head & (self.entries - 1));
        let desc = self.ring as usize + slot * DESC;
        // SAFETY: `slot < entries`, inside the ring; the descriptor is in
        // the published window [head, tail), which the application does not
        // write (it only writes at its tail, outside the window).
        unsafe {
            Some((
                std::ptr::read(desc as *const u64),
                std::ptr::read((desc + 8) as *const u32),
                std::ptr::read((desc + 12) as *const u16),
            ))
        }
    }

    /// Takes the buffer [`peek`](Group::peek) returned.
    pub(super) fn consume(&mut self) {
        self.head = self.head.wrapping_add(1);
    }
}

/// The shard's registered rings by buffer group id.
#[derive(Debug, Default)]
pub(super) struct BufGroups {
    groups: HashMap<u16, Group>,
    ids: BgidPool,
}

impl BufGroups {
    /// Registers a ring; returns its group id.
    ///
    /// # Safety
    ///
    /// `ring` is page-aligned memory for `entries` (a power of two)
    /// descriptors that stays allocated until [`BufGroups::unregister`].
    pub(super) unsafe fn register(&mut self, ring: u64, entries: u16) -> io::Result<u16> {
        if !entries.is_power_of_two() {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let bgid = self.ids.take()?;
        self.groups.insert(
            bgid,
            Group {
                ring,
                entries,
                head: 0,
            },
        );
        Ok(bgid)
    }

    pub(super) fn unregister(&mut self, bgid: u16) -> io::Result<()> {
        match self.groups.remove(&bgid) {
            Some(_) => {
                self.ids.give_back(bgid);
                Ok(())
            }
            None => Err(io::Error::from_raw_os_error(libc::ENOENT)),
        }
    }

    pub(super) fn get_mut(&mut self, bgid: u16) -> Option<&mut Group> {
        self.groups.get_mut(&bgid)
    }
}

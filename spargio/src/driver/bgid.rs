//! Buffer group ids for provided-buffer rings, per shard (both backends).

use std::io;

/// Hands out `u16` buffer group ids, reusing freed ones first.
#[derive(Debug, Default)]
pub(crate) struct BgidPool {
    next: u16,
    free: Vec<u16>,
}

impl BgidPool {
    /// A fresh id, or an error when all 65535 are in use.
    pub(crate) fn take(&mut self) -> io::Result<u16> {
        match self.free.pop() {
            Some(id) => Ok(id),
            None if self.next < u16::MAX => {
                self.next += 1;
                Ok(self.next - 1)
            }
            None => Err(io::Error::other("every buffer group id is in use")),
        }
    }

    /// Makes `id` available again.
    pub(crate) fn give_back(&mut self, id: u16) {
        self.free.push(id);
    }
}

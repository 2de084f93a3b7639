//! The model: what each direction's bytes must be, and the op trace.
//!
//! Inbound (peer → spargio): the peer sends `stream_byte(key, i)` for
//! i = 0, 1, ...; `committed` bytes have been asked of it. Every read
//! must continue exactly at `r`, unless an operation whose rustdoc
//! allows a loss (a dropped `read_exact`, a dropped `RecvSegments`, a
//! dropped `BufReader` refill, a `Compat` left with reads held) was
//! abandoned since the last check: then the next read may start up to
//! `loss` bytes further on (found by search), never earlier.
//!
//! Outbound (spargio → peer): `expected` is every byte a write handed to
//! the runtime, in order. Bytes a write reported accepted are certain;
//! a write that was dropped before it reported (or a documented loss such
//! as `Compat::into_inner` before a flush) is a *window*: the peer gets
//! some prefix of it, then what follows.

use std::sync::{Arc, Mutex};

use super::rng::{stream_byte, stream_bytes};

/// How much of the peer's stream a failure excerpt shows.
const SHOW: usize = 12;

#[derive(Debug)]
pub struct Inbound {
    key: u64,
    /// The positions the next read may start at: one, unless a read after
    /// a documented loss was too short to tell where it came from.
    cands: Vec<u64>,
    /// Bytes the peer has been told to send.
    pub committed: u64,
    /// Bytes a documented loss may have skipped since the last check.
    pub loss: u64,
}

impl Inbound {
    pub fn new(key: u64) -> Inbound {
        Inbound {
            key,
            cands: vec![0],
            committed: 0,
            loss: 0,
        }
    }

    /// The next byte spargio must read (the earliest candidate).
    pub fn r(&self) -> u64 {
        self.cands[0]
    }

    /// Bytes certainly still to come.
    pub fn available(&self) -> u64 {
        let last = *self.cands.last().expect("a candidate");
        self.committed.saturating_sub(last + self.loss)
    }

    /// An operation whose rustdoc allows losing up to `bound` bytes was
    /// abandoned.
    pub fn may_lose(&mut self, bound: u64) {
        self.loss += bound;
    }

    /// True when end of stream here is right: nothing certain is missing.
    pub fn at_end(&self) -> bool {
        self.loss > 0 || self.cands.contains(&self.committed)
    }

    /// Checks one read's bytes and advances.
    pub fn check(&mut self, got: &[u8]) -> Result<(), String> {
        if got.is_empty() {
            return Ok(());
        }
        let len = got.len() as u64;
        if self.loss == 0 && self.cands.len() == 1 {
            let r = self.cands[0];
            if let Some(k) = (0..got.len()).find(|&k| got[k] != stream_byte(self.key, r + k as u64))
            {
                let at = r + k as u64;
                return Err(format!(
                    "inbound: first mismatching byte at peer-stream position {at} (a read of {len} \
                     bytes at {r}): expected {:02x?}, got {:02x?}{}",
                    stream_bytes(self.key, at, SHOW.min(got.len() - k)),
                    &got[k..(k + SHOW).min(got.len())],
                    self.locate(&got[k..], at)
                ));
            }
            self.cands[0] += len;
            return Ok(());
        }
        let mut next = Vec::new();
        for &c in &self.cands {
            let last = (c + self.loss).min(self.committed.saturating_sub(len));
            next.extend(
                (c..=last)
                    .filter(|&j| self.matches_at(j, got))
                    .map(|j| j + len),
            );
        }
        next.sort_unstable();
        next.dedup();
        if next.is_empty() {
            return Err(format!(
                "inbound: after a documented loss of at most {} bytes at position {}, a read of \
                 {len} bytes matches no position it may start at{}",
                self.loss,
                self.r(),
                self.locate(got, self.r())
            ));
        }
        self.cands = next;
        self.loss = 0;
        Ok(())
    }

    fn matches_at(&self, j: u64, got: &[u8]) -> bool {
        got.iter()
            .enumerate()
            .all(|(k, &b)| stream_byte(self.key, j + k as u64) == b)
    }

    /// Where in the peer's stream `got` does come from, if anywhere near.
    fn locate(&self, got: &[u8], r: u64) -> String {
        if got.len() < 4 {
            return "; too few bytes to tell where they come from".to_string();
        }
        let probe = &got[..got.len().min(16)];
        let lo = r.saturating_sub(4 << 20);
        let hi = self.committed.saturating_sub(probe.len() as u64);
        match (lo..=hi).find(|&j| self.matches_at(j, probe)) {
            Some(j) if j > r => format!(
                "; those bytes are the peer's from position {j}: {} bytes skipped",
                j - r
            ),
            Some(j) => format!(
                "; those bytes are the peer's from position {j}: {} bytes read twice, or \
                 delivered after later ones",
                r - j
            ),
            None => "; they match nowhere near in the peer's stream".to_string(),
        }
    }
}

#[derive(Debug)]
pub struct Outbound {
    key: u64,
    pub expected: Vec<u8>,
    /// `expected[a..b]`: the peer gets some prefix of it (module docs).
    windows: Vec<(usize, usize)>,
}

impl Outbound {
    pub fn new(key: u64) -> Outbound {
        Outbound {
            key,
            expected: Vec::new(),
            windows: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.expected.len()
    }

    /// The content of the next `n` bytes spargio writes.
    pub fn next_bytes(&self, n: usize) -> Vec<u8> {
        stream_bytes(self.key, self.expected.len() as u64, n)
    }

    /// Bytes handed to a write.
    pub fn accept(&mut self, bytes: &[u8]) {
        self.expected.extend_from_slice(bytes);
    }

    /// `expected[from..to]` may arrive only in part (a prefix of it).
    /// Windows one after the other stay apart: each contributes its own
    /// prefix (two dropped writes in a row: some of the first, then some
    /// of the second), which is not a prefix of the two joined.
    pub fn window(&mut self, from: usize, to: usize) {
        if from >= to {
            return;
        }
        self.windows.retain(|&(a, _)| a < from);
        if let Some(last) = self.windows.last_mut() {
            if last.1 > from {
                // Overlapping (a window widened from inside): one window.
                last.1 = last.1.max(to);
                return;
            }
        }
        self.windows.push((from, to));
    }

    /// Checks what the peer received. `whole`: the peer read to a clean
    /// end of stream, so every certain byte must be there.
    pub fn check(&self, got: &[u8], whole: bool) -> Result<(), String> {
        self.check_to(got, if whole { self.expected.len() } else { 0 })
    }

    /// [`check`](Outbound::check) for a stream that may end anywhere from
    /// written position `certain_to` on (the peer read to a clean end of
    /// stream, and the writer's promise covers the bytes before it: a TLS
    /// stream dropped with records unflushed).
    pub fn check_to(&self, got: &[u8], certain_to: usize) -> Result<(), String> {
        let mut furthest = None;
        if self.check_from(got, certain_to, 0, 0, 0, &mut furthest) {
            return Ok(());
        }
        Err(furthest.map_or_else(|| "outbound: no match".into(), |(_, e)| e))
    }

    /// Matches `got[p..]` against `expected[q..]`, the windows from
    /// `windows[w]` on: each window by every prefix that arrived, longest
    /// first. The failure that got furthest into `got` is kept in
    /// `furthest`.
    fn check_from(
        &self,
        got: &[u8],
        certain_to: usize,
        mut p: usize,
        q: usize,
        w: usize,
        furthest: &mut Option<(usize, String)>,
    ) -> bool {
        let mut fail = |at: usize, e: String| {
            if furthest.as_ref().is_none_or(|(f, _)| at >= *f) {
                *furthest = Some((at, e));
            }
            false
        };
        // The certain bytes up to the next window.
        let end = self.windows.get(w).map_or(self.expected.len(), |win| win.0);
        let n = end - q;
        let have = got.len() - p;
        let cmp = n.min(have);
        if let Some(k) = (0..cmp).find(|&k| got[p + k] != self.expected[q + k]) {
            return fail(
                p + k,
                format!(
                    "outbound: first mismatching byte at written-stream position {} (peer's byte {}): \
                     expected {:02x?}, got {:02x?}{}",
                    q + k,
                    p + k,
                    &self.expected[q + k..(q + k + SHOW).min(self.expected.len())],
                    &got[p + k..(p + k + SHOW).min(got.len())],
                    self.locate(&got[p + k..], q + k)
                ),
            );
        }
        if have < n {
            if q + have < certain_to {
                return fail(
                    got.len(),
                    format!(
                        "outbound: the peer read end of stream after {} bytes; written-stream bytes \
                         {}..{} (at least {} bytes) were accepted by writes but never arrived",
                        got.len(),
                        q + have,
                        end,
                        n - have
                    ),
                );
            }
            return true;
        }
        p += n;
        let Some(&(a, b)) = self.windows.get(w) else {
            if p < got.len() {
                return fail(
                    p,
                    format!(
                        "outbound: the peer got {} bytes more than were written ({} expected)",
                        got.len() - p,
                        self.expected.len()
                    ),
                );
            }
            return true;
        };
        // The longest prefix of the window that arrived; then each
        // shorter one, for what follows to continue after it.
        let m = (0..(b - a).min(got.len() - p))
            .find(|&k| got[p + k] != self.expected[a + k])
            .unwrap_or((b - a).min(got.len() - p));
        (0..=m)
            .rev()
            .any(|k| self.check_from(got, certain_to, p + k, b, w + 1, furthest))
    }

    fn locate(&self, got: &[u8], q: usize) -> String {
        if got.is_empty() {
            return String::new();
        }
        let probe = &got[..got.len().min(16)];
        match self.expected.windows(probe.len()).position(|w| w == probe) {
            Some(j) if j > q => format!(
                "; those are the written bytes from {j}: {} bytes skipped",
                j - q
            ),
            Some(j) => format!("; those are the written bytes from {j}: repeated or reordered"),
            None => "; they match nowhere in the written stream".to_string(),
        }
    }
}

/// The op trace, shared with the watchdog so a hang can print it.
#[derive(Clone, Default)]
pub struct Trace(Arc<Mutex<Vec<String>>>);

impl Trace {
    pub fn push(&self, line: String) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(line);
    }

    pub fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// The trace, the last `max` lines of it.
    pub fn dump(&self, max: usize) -> String {
        let lines = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let skip = lines.len().saturating_sub(max);
        let mut out = String::new();
        if skip > 0 {
            out += &format!("  ... {skip} earlier lines\n");
        }
        for l in &lines[skip..] {
            out += "  ";
            out += l;
            out += "\n";
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `expected` = 0..300 of key 1; windows [100, 150) and [150, 200).
    fn two_windows() -> Outbound {
        let mut out = Outbound::new(1);
        out.accept(&stream_bytes(1, 0, 300));
        out.window(100, 150);
        out.window(150, 200);
        out
    }

    fn join(parts: &[(usize, usize)]) -> Vec<u8> {
        parts
            .iter()
            .flat_map(|&(a, b)| stream_bytes(1, a as u64, b - a))
            .collect()
    }

    #[test]
    fn adjacent_windows_each_give_their_own_prefix() {
        let out = two_windows();
        // Nothing of the first, part of the second.
        let got = join(&[(0, 100), (150, 170), (200, 300)]);
        assert_eq!(out.check(&got, true), Ok(()));
        // Part of each.
        let got = join(&[(0, 100), (100, 120), (150, 151), (200, 300)]);
        assert_eq!(out.check(&got, true), Ok(()));
    }

    #[test]
    fn a_gap_in_certain_bytes_or_a_window_out_of_order_fails() {
        let out = two_windows();
        let gap = join(&[(0, 99), (100, 150), (150, 200), (200, 300)]);
        assert!(out.check(&gap, true).is_err());
        let reordered = join(&[(0, 100), (150, 160), (100, 110), (200, 300)]);
        assert!(out.check(&reordered, true).is_err());
        let short = join(&[(0, 100), (200, 299)]);
        assert!(out.check(&short, true).is_err());
        assert_eq!(out.check(&short, false), Ok(()));
    }
}

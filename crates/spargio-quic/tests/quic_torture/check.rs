//! The invariants, checked after the run from what both sides recorded.
//!
//! Up (ours -> peer), per stream: what the peer received is what our
//! writes took, in order, a dropped write's bytes a prefix of them at
//! most ([`UpModel`]). A stream we finished, or dropped
//! without finish or reset (rustdoc: dropping finishes it), arrives whole
//! and ends with FIN; one we reset ends with our reset code; only the
//! peer's planned stop stops it.
//!
//! Down (peer -> ours): what our reads returned is the exact prefix of
//! what the peer's writes took, except where a dropped read documented
//! as not cancel safe may have consumed bytes (then the next read may
//! start up to that many bytes later, found by search); an end we read
//! is the peer's FIN after its last byte; a reset we read is the peer's,
//! with its code; a stop the peer saw is ours, with our code (0 for a
//! dropped half: rustdoc "stops the stream with code 0").
//!
//! In a run that aborts the connection mid-flight only the prefixes and
//! the codes are checked.

use crate::plan::{codes, PeerRecv, PeerSend, StreamPlan};
use crate::rng::stream_bytes;

/// Bytes shown around a mismatch.
const SHOW: usize = 12;

/// What both sides saw of one stream.
#[derive(Debug, Default)]
pub struct Record {
    /// Our writes (ours -> peer).
    pub up_model: Option<UpModel>,
    pub up_end: Option<SendEnd>,
    pub peer_in: Vec<u8>,
    pub peer_in_end: Option<PeerEnd>,
    /// What the peer's writes took (peer -> ours).
    pub peer_out: Vec<u8>,
    pub peer_out_end: Option<PeerEnd>,
    pub our_in: Vec<Piece>,
    /// Bytes lost after the last piece.
    pub our_in_loss: u64,
    pub our_in_end: Option<RecvEnd>,
}

/// How our send half ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendEnd {
    /// `finish` (or a close) returned `Ok`.
    Finished,
    /// Dropped without finish or reset.
    Dropped,
    Reset(u64),
    /// A write or the finish reported the peer's stop.
    Stopped(u64),
    /// The connection went first (aborting runs).
    Lost,
}

/// How our receive half ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecvEnd {
    Fin,
    Reset(u64),
    /// We stopped it with this code.
    Stopped(u64),
    /// Dropped before the end.
    Dropped,
    Lost,
}

/// How one of the peer's halves ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerEnd {
    /// Receiving: read FIN. Sending: finished.
    Fin,
    /// Receiving: our reset. Sending: its own reset.
    Reset(u64),
    /// Receiving: it stopped. Sending: we stopped it.
    Stop(u64),
    Lost,
}

/// Bytes one of our reads returned.
#[derive(Debug)]
pub struct Piece {
    /// The op, as traced.
    pub what: String,
    /// Bytes documented losses may have skipped just before.
    pub loss_before: u64,
    pub bytes: Vec<u8>,
}

/// Checks stream `i`.
pub fn stream(i: usize, sp: &StreamPlan, r: &Record, aborted: bool) -> Result<(), String> {
    if let Some(up) = sp.up {
        check_up(i, up, r, aborted).map_err(|e| format!("s{i} up: {e}"))?;
    }
    if let Some(down) = sp.down {
        check_down(i, down, r, aborted).map_err(|e| format!("s{i} down: {e}"))?;
    }
    Ok(())
}

fn check_up(i: usize, plan: PeerRecv, r: &Record, aborted: bool) -> Result<(), String> {
    let peer_stop = codes::peer_stop(i);
    let may_stop = matches!(plan, PeerRecv::StopAfter(_));
    let (Some(ours), Some(peer)) = (r.up_end, r.peer_in_end.clone()) else {
        return match aborted {
            true => Ok(()),
            false => Err(format!(
                "a half never ended: ours {:?}, the peer's {:?}",
                r.up_end, r.peer_in_end
            )),
        };
    };
    let model = r.up_model.as_ref().expect("a model with the end");
    let delivered = matches!(ours, SendEnd::Finished | SendEnd::Dropped);
    let whole = !aborted && delivered && peer == PeerEnd::Fin;
    model.check(&r.peer_in, whole)?;
    let consistent = match (&peer, ours) {
        (PeerEnd::Fin, _) => delivered,
        (PeerEnd::Reset(c), SendEnd::Reset(o)) => *c == o,
        (PeerEnd::Reset(_), _) => false,
        (PeerEnd::Stop(c), _) => may_stop && *c == peer_stop,
        (PeerEnd::Lost, _) => aborted,
    };
    let ours_ok = match ours {
        SendEnd::Stopped(c) => peer == PeerEnd::Stop(c),
        SendEnd::Lost => aborted,
        _ => true,
    };
    if !consistent || !ours_ok {
        return Err(format!(
            "our half ended {ours:?}, the peer's {peer:?} (plan {plan:?}, {} bytes arrived)",
            r.peer_in.len()
        ));
    }
    // A stream we finished or dropped reaches its FIN unless stopped.
    if !aborted && delivered && !matches!(peer, PeerEnd::Fin | PeerEnd::Stop(_)) {
        return Err(format!("finished or dropped, yet the peer saw {peer:?}"));
    }
    Ok(())
}

fn check_down(i: usize, plan: PeerSend, r: &Record, aborted: bool) -> Result<(), String> {
    let (Some(ours), Some(peer)) = (r.our_in_end, r.peer_out_end.clone()) else {
        return match aborted {
            true => Ok(()),
            false => Err(format!(
                "a half never ended: ours {:?}, the peer's {:?}",
                r.our_in_end, r.peer_out_end
            )),
        };
    };
    // The peer's own bytes: the keyed stream, or an echo of what it got.
    let source_ok = match plan {
        PeerSend::Keyed { key, .. } | PeerSend::ResetAfter { key, .. } => {
            r.peer_out == stream_bytes(key, 0, r.peer_out.len())
        }
        PeerSend::Echo => r.peer_in.starts_with(&r.peer_out),
        PeerSend::Empty => r.peer_out.is_empty(),
    };
    if !source_ok {
        return Err("the peer sent other bytes than its plan's (harness bug)".into());
    }
    let ends = inbound(&r.our_in, &r.peer_out)?;
    let reset_code = match plan {
        PeerSend::ResetAfter { .. } => Some(codes::peer_reset(i)),
        PeerSend::Echo => Some(codes::echo_reset(i)),
        _ => None,
    };
    let whole = r.our_in_loss > 0 || ends.contains(&r.peer_out.len());
    if ours == RecvEnd::Fin && peer == PeerEnd::Fin && !whole {
        return Err(format!(
            "we read the end after byte {} (of candidates {:?}); the peer sent {}",
            ends[0],
            &ends[..ends.len().min(4)],
            r.peer_out.len()
        ));
    }
    let consistent = match (ours, &peer) {
        (RecvEnd::Fin, p) => *p == PeerEnd::Fin,
        (RecvEnd::Reset(c), PeerEnd::Reset(p)) => c == *p && Some(c) == reset_code,
        (RecvEnd::Reset(_), _) => false,
        (RecvEnd::Stopped(_) | RecvEnd::Dropped, PeerEnd::Stop(p)) => {
            *p == match ours {
                RecvEnd::Stopped(c) => c,
                _ => 0,
            }
        }
        (RecvEnd::Stopped(_) | RecvEnd::Dropped, PeerEnd::Fin | PeerEnd::Reset(_)) => true,
        (RecvEnd::Lost, _) | (_, PeerEnd::Lost) => aborted,
    };
    if !consistent {
        return Err(format!(
            "we ended {ours:?}, the peer {peer:?} (plan {plan:?}, {} bytes sent)",
            r.peer_out.len()
        ));
    }
    Ok(())
}

/// Checks our reads against the bytes the peer sent; the positions the
/// last read may have ended at.
fn inbound(pieces: &[Piece], sent: &[u8]) -> Result<Vec<usize>, String> {
    let mut cands = vec![0usize];
    for p in pieces {
        let len = p.bytes.len();
        let loss = usize::try_from(p.loss_before).unwrap_or(usize::MAX);
        if loss == 0 && cands.len() == 1 {
            let at = cands[0];
            let want = sent.get(at..).unwrap_or_default();
            if let Some(k) = (0..len).find(|&k| want.get(k) != Some(&p.bytes[k])) {
                return Err(format!(
                    "{}: {len} bytes at {at}: first mismatch at {} (of {} sent): expected \
                     {:02x?}, got {:02x?}{}",
                    p.what,
                    at + k,
                    sent.len(),
                    &want[k.min(want.len())..(k + SHOW).min(want.len())],
                    &p.bytes[k..(k + SHOW).min(len)],
                    locate(&p.bytes[k..], sent, at + k)
                ));
            }
            cands[0] += len;
            continue;
        }
        let mut next = Vec::new();
        for &c in &cands {
            let hi = c.saturating_add(loss).min(sent.len().saturating_sub(len));
            next.extend(
                (c..=hi)
                    .filter(|&j| j + len <= sent.len() && sent[j..j + len] == p.bytes[..])
                    .map(|j| j + len),
            );
        }
        next.sort_unstable();
        next.dedup();
        if next.is_empty() {
            return Err(format!(
                "{}: {len} bytes after a loss of at most {} from {:?}: they match no position \
                 they may start at{}",
                p.what,
                p.loss_before,
                &cands[..cands.len().min(4)],
                locate(&p.bytes, sent, cands[0])
            ));
        }
        cands = next;
    }
    Ok(cands)
}

/// Where `got` comes from in `sent`, if anywhere.
fn locate(got: &[u8], sent: &[u8], at: usize) -> String {
    if got.len() < 4 {
        return "; too few bytes to tell where they come from".into();
    }
    let probe = &got[..got.len().min(16)];
    match sent.windows(probe.len()).position(|w| w == probe) {
        Some(j) if j > at => format!("; they are the peer's from {j}: {} bytes skipped", j - at),
        Some(j) => format!("; they are the peer's from {j}: read twice or out of order"),
        None => "; they match nowhere in what the peer sent".into(),
    }
}

/// How far a cut may lie before the first mismatch: bytes after a cut
/// that equal the skipped ones by chance.
const BACK: usize = 16;

/// Our writes on one stream: the keyed bytes handed to writes, in
/// order, and the ranges a dropped write may have cut short (the peer
/// gets a prefix of each, then what follows). Unlike the core harness's
/// `Outbound`, adjacent ranges stay apart: two dropped writes in a row
/// may each deliver a part.
#[derive(Debug)]
pub struct UpModel {
    key: u64,
    expected: Vec<u8>,
    windows: Vec<(usize, usize)>,
}

impl UpModel {
    pub fn new(key: u64) -> UpModel {
        UpModel {
            key,
            expected: Vec::new(),
            windows: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.expected.len()
    }

    /// The next `n` bytes to write, handed over.
    pub fn take(&mut self, n: usize) -> Vec<u8> {
        let data = stream_bytes(self.key, self.expected.len() as u64, n);
        self.expected.extend_from_slice(&data);
        data
    }

    /// Of the bytes handed over last, from `at`, only `k` were taken.
    pub fn took(&mut self, at: usize, k: usize) {
        self.expected.truncate(at + k);
    }

    /// `expected[from..to]` may arrive in part (a prefix of it).
    pub fn window(&mut self, from: usize, to: usize) {
        if from < to {
            self.windows.push((from, to));
        }
    }

    /// The window holding position `q` (a cut there delivers `q - a`).
    fn window_at(&self, q: usize) -> Option<usize> {
        self.windows.iter().position(|&(a, b)| a <= q && q < b)
    }

    /// Checks what the peer received. `whole`: it read a clean end, so
    /// every byte outside the windows must be there.
    pub fn check(&self, got: &[u8], whole: bool) -> Result<(), String> {
        let exp = &self.expected;
        let (mut p, mut q) = (0usize, 0usize);
        loop {
            let run = got[p..]
                .iter()
                .zip(&exp[q..])
                .take_while(|(a, b)| a == b)
                .count();
            p += run;
            q += run;
            if p == got.len() {
                if whole {
                    if let Some(gap) = self.first_certain(q) {
                        return Err(format!(
                            "the peer read the end after {} bytes; written-stream byte {gap} \
                             ({} written) was taken by a write and never arrived",
                            got.len(),
                            exp.len()
                        ));
                    }
                }
                return Ok(());
            }
            if q == exp.len() {
                return Err(format!(
                    "the peer got {} bytes more than were written ({})",
                    got.len() - p,
                    exp.len()
                ));
            }
            match self.resume(got, p, q) {
                Some((p2, q2)) => (p, q) = (p2, q2),
                None => {
                    return Err(format!(
                        "first mismatching byte at written-stream position {q} (the peer's \
                         byte {p}): expected {:02x?}, got {:02x?}{}",
                        &exp[q..(q + SHOW).min(exp.len())],
                        &got[p..(p + SHOW).min(got.len())],
                        self.locate(&got[p..], q)
                    ))
                }
            }
        }
    }

    /// After a mismatch at (`p`, `q`): a cut inside a window at or a few
    /// bytes before `q`, after which `got` goes on with the end of that
    /// window (or of a run of adjacent windows that delivered nothing).
    fn resume(&self, got: &[u8], p: usize, q: usize) -> Option<(usize, usize)> {
        let exp = &self.expected;
        for back in 0..=BACK.min(q).min(p) {
            let (pc, c) = (p - back, q - back);
            let Some(mut w) = self.window_at(c) else {
                continue;
            };
            loop {
                let t = self.windows[w].1;
                let n = (got.len() - pc).min(exp.len() - t).min(32);
                if n > 0 && got[pc..pc + n] == exp[t..t + n] {
                    return Some((pc, t));
                }
                match self.windows.get(w + 1) {
                    Some(&(a, _)) if a == t => w += 1,
                    _ => break,
                }
            }
        }
        None
    }

    /// The first position from `q` on outside every window.
    fn first_certain(&self, mut q: usize) -> Option<usize> {
        while q < self.expected.len() {
            match self.window_at(q) {
                Some(w) => q = self.windows[w].1,
                None => return Some(q),
            }
        }
        None
    }

    fn locate(&self, got: &[u8], q: usize) -> String {
        let probe = &got[..got.len().min(16)];
        match self.expected.windows(probe.len()).position(|w| w == probe) {
            Some(j) if j > q => format!("; those are the written bytes from {j}"),
            Some(j) => format!("; those are the written bytes from {j}: repeated or reordered"),
            None => "; they match nowhere in the written stream".into(),
        }
    }
}

/// The up model on hand-made cases: adjacent windows each cut short, a
/// lost certain byte, a repeat.
#[test]
fn up_model_cases() {
    let mut m = UpModel::new(7);
    let a = m.take(100);
    m.window(0, 100);
    let b = m.take(100);
    m.window(100, 200);
    let c = m.take(50);
    let cat = |parts: &[&[u8]]| parts.concat();
    // Each window delivers a part, then the certain bytes.
    let got = cat(&[&a[..40], &b[..70], &c]);
    assert_eq!(m.check(&got, true), Ok(()));
    // Both windows deliver nothing.
    assert_eq!(m.check(&c, true), Ok(()));
    // A certain byte missing at the end of a whole stream.
    let got = cat(&[&a[..40], &b[..70], &c[..49]]);
    assert!(m.check(&got, true).is_err());
    assert_eq!(m.check(&got, false), Ok(()));
    // A repeat.
    let got = cat(&[&a[..40], &a[..40], &b, &c]);
    assert!(m.check(&got, false).is_err());
    // More than written.
    let got = cat(&[&a, &b, &c, &c[..1]]);
    assert!(m.check(&got, false).is_err());
}

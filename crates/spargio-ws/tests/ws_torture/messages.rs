//! The model, in messages: what each direction must carry.
//!
//! Inbound (peer → ours): the peer's message `i` is a function of its key
//! and `i` ([`peer_message`]): binary, text or ping, 0 bytes to 300 KiB.
//! Every receive is cancel safe (a `poll_next` keeps a partial frame in
//! tungstenite), so each must return exactly message `r`, then `r + 1`
//! ...; pongs in between answer our pings: in order, any of them may be
//! missing (tungstenite keeps only the latest unsent pong).
//!
//! Outbound (ours → peer): every message handed to a send, in order,
//! certain or not: a send dropped before it reported may have queued its
//! message or not, and a queued message goes out whole (tungstenite keeps
//! the rest of a frame it could not write). The peer's record must be the
//! certain messages with some of the others, in order, each at most once;
//! a stream dropped unclosed may end it anywhere after the last message a
//! completed flush covered.

use std::collections::BTreeSet;

use spargio_ws::Message;

use super::rng::{stream_bytes, Rng};

/// Messages go up to this.
pub const MAX_MESSAGE: usize = 300 << 10;

/// The kinds of message a send draws.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    Binary,
    Text,
    Ping,
}

impl Kind {
    pub fn draw(rng: &mut Rng) -> Kind {
        match rng.weighted(&[55, 30, 15]) {
            0 => Kind::Binary,
            1 => Kind::Text,
            _ => Kind::Ping,
        }
    }
}

/// A size: 0 sometimes, over 64 KiB sometimes, else skewed small; a
/// ping's at most 125 bytes.
pub fn draw_size(rng: &mut Rng, kind: Kind) -> usize {
    if let Kind::Ping = kind {
        return rng.below(126) as usize;
    }
    match rng.weighted(&[6, 12, 82]) {
        0 => 0,
        1 => (64 << 10) + rng.below((MAX_MESSAGE - (64 << 10)) as u64) as usize,
        _ => rng.size(MAX_MESSAGE),
    }
}

/// Message `index` of the stream keyed by `key`, of `kind`, about `size`
/// bytes (text: whole characters, some of them several bytes long).
pub fn message(key: u64, index: u64, kind: Kind, size: usize) -> Message {
    let bytes = stream_bytes(key ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15), 0, size);
    match kind {
        Kind::Binary => Message::binary(bytes),
        Kind::Ping => Message::Ping(bytes.into()),
        Kind::Text => {
            const ALPHABET: [char; 8] = ['a', 'z', ' ', '0', 'é', '€', '𝄞', '\n'];
            let mut text = String::with_capacity(size);
            for b in bytes {
                if text.len() >= size {
                    break;
                }
                text.push(ALPHABET[usize::from(b) % ALPHABET.len()]);
            }
            Message::text(text)
        }
    }
}

/// The peer's message `i`.
pub fn peer_message(key: u64, i: u64) -> Message {
    let mut rng = Rng::new(key ^ i.wrapping_mul(0xd1b5_4a32_d192_ed03));
    let kind = match rng.weighted(&[55, 35, 10]) {
        0 => Kind::Binary,
        1 => Kind::Text,
        _ => Kind::Ping,
    };
    let size = draw_size(&mut rng, kind);
    message(key, i, kind, size)
}

/// A message for the trace: kind and length.
pub fn describe(m: &Message) -> String {
    match m {
        Message::Text(t) => format!("Text({} B)", t.len()),
        Message::Binary(b) => format!("Binary({})", b.len()),
        Message::Ping(b) => format!("Ping({})", b.len()),
        Message::Pong(b) => format!("Pong({})", b.len()),
        Message::Close(f) => format!("Close({f:?})"),
        Message::Frame(f) => format!("Frame({})", f.len()),
    }
}

/// Checks that `pongs` answer `pings`, in order, each at most once (some
/// may be missing). `who` names the side that sent the pings.
pub fn check_pongs(pings: &[Vec<u8>], pongs: &[Vec<u8>], who: &str) -> Result<(), String> {
    let mut next = 0;
    for (k, pong) in pongs.iter().enumerate() {
        match pings[next..].iter().position(|p| p == pong) {
            Some(at) => next += at + 1,
            None => {
                return Err(format!(
                    "{who}: pong {k} ({} bytes) answers none of the pings after the one the \
                     previous pong answered ({} pings)",
                    pong.len(),
                    pings.len()
                ))
            }
        }
    }
    Ok(())
}

/// Inbound: the peer's messages, and the pongs to our pings.
pub struct Inbound {
    key: u64,
    /// The next peer message a receive must return.
    pub r: u64,
    /// Messages the peer has been told to send.
    pub committed: u64,
    /// Our pings' payloads, in the order sent (or dropped mid-send).
    pub pings: Vec<Vec<u8>>,
    /// The pongs received.
    pub pongs: Vec<Vec<u8>>,
}

impl Inbound {
    pub fn new(key: u64) -> Inbound {
        Inbound {
            key,
            r: 0,
            committed: 0,
            pings: Vec::new(),
            pongs: Vec::new(),
        }
    }

    /// Checks one received message and advances.
    pub fn check(&mut self, got: &Message) -> Result<(), String> {
        if let Message::Pong(p) = got {
            self.pongs.push(p.to_vec());
            return check_pongs(&self.pings, &self.pongs, "inbound");
        }
        if self.r >= self.committed {
            return Err(format!(
                "inbound: received {} after all {} messages the peer sent",
                describe(got),
                self.committed
            ));
        }
        let want = peer_message(self.key, self.r);
        if *got != want {
            let found = (0..self.committed).find(|&i| peer_message(self.key, i) == *got);
            return Err(format!(
                "inbound: message {} should be {}, got {}{}",
                self.r,
                describe(&want),
                describe(got),
                match found {
                    Some(i) => format!(" (the peer's message {i})"),
                    None => " (none of the peer's messages)".into(),
                }
            ));
        }
        self.r += 1;
        Ok(())
    }
}

/// Outbound: every message handed to a send, and whether it is certain.
#[derive(Default)]
pub struct Outbound {
    pub sent: Vec<(Message, bool)>,
}

impl Outbound {
    pub fn len(&self) -> usize {
        self.sent.len()
    }

    /// A message handed to a send; certain until [`maybe`](Outbound::maybe).
    pub fn push(&mut self, m: Message) {
        self.sent.push((m, true));
    }

    /// Message `i`'s send was dropped before it reported.
    pub fn maybe(&mut self, i: usize) {
        self.sent[i].1 = false;
    }

    /// Checks the peer's record: every certain message before `certain_to`
    /// there, in order, the others at most once, nothing else.
    pub fn check(&self, got: &[Message], certain_to: usize) -> Result<(), String> {
        // The positions in `got` the walk may be at (a set: an uncertain
        // message equal to a later one may be either).
        let mut front = BTreeSet::from([0usize]);
        for (i, (m, certain)) in self.sent.iter().enumerate() {
            if i >= certain_to && front.contains(&got.len()) {
                return Ok(());
            }
            let mut next = BTreeSet::new();
            for &j in &front {
                if !certain {
                    next.insert(j);
                }
                if got.get(j) == Some(m) {
                    next.insert(j + 1);
                }
            }
            if next.is_empty() {
                let j = *front.first().expect("a position");
                return Err(match got.get(j) {
                    None => format!(
                        "outbound: the peer's record ends after {} messages; our message {i} ({}), \
                         whose send reported Ok, never arrived",
                        got.len(),
                        describe(m)
                    ),
                    Some(g) => format!(
                        "outbound: our message {i} should be the peer's message {j}: expected {}, \
                         got {}{}",
                        describe(m),
                        describe(g),
                        match self.sent.iter().position(|(s, _)| s == g) {
                            Some(k) => format!(" (our message {k})"),
                            None => " (none of ours)".into(),
                        }
                    ),
                });
            }
            front = next;
        }
        if front.contains(&got.len()) {
            return Ok(());
        }
        let j = *front.last().expect("a position");
        Err(format!(
            "outbound: the peer received {} messages more than were sent (first: {})",
            got.len() - j,
            describe(&got[j])
        ))
    }
}

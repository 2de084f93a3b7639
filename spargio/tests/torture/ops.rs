//! The spargio side's building blocks: one trait over TCP and Unix
//! streams, and the wrappers an operation runs in.

use std::fmt;
use std::future::{poll_fn, Future};
use std::io;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use spargio::io::{CompatStream, SharedDuplex};
use spargio::net::{RecvPoolConfig, RecvSegments, TcpStream, UnixStream};
use spargio::RuntimeHandle;

use super::rng::Rng;

/// A stream under test: `TcpStream` or `UnixStream`, through their
/// inherent methods (names changed so they never meet the io traits').
pub trait Sock: Clone + Send + Sync + fmt::Debug + 'static + CompatStream + SharedDuplex {
    fn send_o(&self, b: Vec<u8>) -> impl Future<Output = io::Result<(usize, Vec<u8>)>> + Send;
    fn recv_o(&self, b: Vec<u8>) -> impl Future<Output = io::Result<(usize, Vec<u8>)>> + Send;
    fn write_all_o(&self, b: Vec<u8>) -> impl Future<Output = io::Result<Vec<u8>>> + Send;
    fn write_all_s(&self, d: &[u8]) -> impl Future<Output = io::Result<()>> + Send;
    fn read_exact_s(&self, out: &mut [u8]) -> impl Future<Output = io::Result<()>> + Send;
    fn read_exact_o(&self, b: Box<[u8]>) -> impl Future<Output = io::Result<Box<[u8]>>> + Send;
    fn segments(&self, c: RecvPoolConfig) -> impl Future<Output = io::Result<RecvSegments>> + Send;
    fn shut_write(&self) -> impl Future<Output = io::Result<()>> + Send;
    fn session(&self) -> usize;
}

macro_rules! sock_impl {
    ($t:ty) => {
        impl Sock for $t {
            fn send_o(
                &self,
                b: Vec<u8>,
            ) -> impl Future<Output = io::Result<(usize, Vec<u8>)>> + Send {
                <$t>::send_owned(self, b)
            }
            fn recv_o(
                &self,
                b: Vec<u8>,
            ) -> impl Future<Output = io::Result<(usize, Vec<u8>)>> + Send {
                <$t>::recv_owned(self, b)
            }
            fn write_all_o(&self, b: Vec<u8>) -> impl Future<Output = io::Result<Vec<u8>>> + Send {
                <$t>::write_all_owned(self, b)
            }
            fn write_all_s(&self, d: &[u8]) -> impl Future<Output = io::Result<()>> + Send {
                <$t>::write_all(self, d)
            }
            fn read_exact_s(&self, out: &mut [u8]) -> impl Future<Output = io::Result<()>> + Send {
                <$t>::read_exact(self, out)
            }
            fn read_exact_o(
                &self,
                b: Box<[u8]>,
            ) -> impl Future<Output = io::Result<Box<[u8]>>> + Send {
                <$t>::read_exact_owned(self, b)
            }
            fn segments(
                &self,
                c: RecvPoolConfig,
            ) -> impl Future<Output = io::Result<RecvSegments>> + Send {
                <$t>::recv_multishot_segments_with(self, c)
            }
            fn shut_write(&self) -> impl Future<Output = io::Result<()>> + Send {
                <$t>::shutdown(self, std::net::Shutdown::Write)
            }
            fn session(&self) -> usize {
                self.session_shard()
            }
        }
    };
}

sock_impl!(TcpStream);
sock_impl!(UnixStream);

/// What an operation runs in.
#[derive(Clone, Copy, Debug)]
pub enum Wrap {
    /// Awaited to the end.
    Plain,
    /// `spargio::time::timeout` of this many µs; dropped if it fires.
    Timeout(u64),
    /// A `select!` against a branch ready after this many polls: the
    /// operation is dropped if it is not done first.
    LoseRace(u32),
    /// Polled this many times, a sleep of this many µs after each, then
    /// dropped (without a last poll: a completion that came in the sleep
    /// is dropped with it).
    DropAfter(u32, u64),
    /// Run as a stealable task of its own (for cheap-to-move operations).
    Steal,
    /// Run pinned to the shard that is not the stream's session shard.
    OtherShard,
}

impl Wrap {
    /// Draws a wrapper; `cancel` is the weight of the dropping ones,
    /// `spawn` whether `Steal`/`OtherShard` may be drawn.
    pub fn draw(rng: &mut Rng, cancel: u32, spawn: bool) -> Wrap {
        let s = if spawn { 12 } else { 0 };
        match rng.weighted(&[60, cancel, cancel, cancel, s, s]) {
            0 => Wrap::Plain,
            1 => Wrap::Timeout(1 + rng.below(2000)),
            2 => Wrap::LoseRace(1 + rng.below(4) as u32),
            3 => Wrap::DropAfter(1 + rng.below(3) as u32, rng.below(3000)),
            4 => Wrap::Steal,
            _ => Wrap::OtherShard,
        }
    }
}

/// An operation's end.
#[derive(Debug)]
pub enum Out<T> {
    Done(T),
    Dropped,
}

/// Runs `f` in `w` (`Steal` and `OtherShard` are only for [`spawned`]:
/// here they run it plainly).
pub async fn wrap<F: Future>(w: Wrap, f: F) -> Out<F::Output> {
    match w {
        Wrap::Plain | Wrap::Steal | Wrap::OtherShard => Out::Done(f.await),
        Wrap::Timeout(us) => match spargio::time::timeout(Duration::from_micros(us), f).await {
            Ok(v) => Out::Done(v),
            Err(_) => Out::Dropped,
        },
        Wrap::LoseRace(k) => {
            let mut f = pin!(f);
            let mut polls = 0;
            poll_fn(|cx| {
                if let Poll::Ready(v) = f.as_mut().poll(cx) {
                    return Poll::Ready(Out::Done(v));
                }
                polls += 1;
                if polls > k {
                    return Poll::Ready(Out::Dropped);
                }
                cx.waker().wake_by_ref();
                Poll::Pending
            })
            .await
        }
        Wrap::DropAfter(k, us) => {
            let mut f = pin!(f);
            for _ in 0..k {
                let once = poll_fn(|cx| Poll::Ready(f.as_mut().poll(cx))).await;
                if let Poll::Ready(v) = once {
                    return Out::Done(v);
                }
                spargio::time::sleep(Duration::from_micros(us)).await;
            }
            Out::Dropped
        }
    }
}

/// [`wrap`], with `Steal` and `OtherShard` running `f` as a task of its
/// own (`f` must then be `'static`).
pub async fn spawned<F>(h: &RuntimeHandle, session: usize, w: Wrap, f: F) -> Out<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let join = match w {
        Wrap::Steal => h.spawn_stealable(f),
        Wrap::OtherShard => h.spawn_pinned((session + 1) % h.shard_count(), f),
        _ => return wrap(w, f).await,
    };
    Out::Done(join.expect("spawn").await.expect("an op task panicked"))
}

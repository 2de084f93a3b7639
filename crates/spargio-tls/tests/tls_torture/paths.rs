//! The paths in and out of our TLS stream: every I/O trait the crate
//! implements (`futures_io`, spargio's owned buffers, tokio's with the
//! `tokio-io` feature), and the halves of `split`, as data a script draws
//! and [`perform`] runs.

use std::fmt;
use std::future::Future;
use std::io::{self, IoSlice};

use futures_util::io::{AsyncReadExt as FRead, AsyncWriteExt as FWrite};
use spargio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use spargio::net::TcpStream;
use spargio_tls::{ClientTlsStream, ServerTlsStream, TlsReadHalf, TlsWriteHalf};

use super::rng::Rng;
use super::Pki;

/// The tokio traits, with the `tokio-io` feature (hyper's path).
#[cfg(feature = "tokio-io")]
pub trait TokioIo: tokio::io::AsyncRead + tokio::io::AsyncWrite {}
#[cfg(feature = "tokio-io")]
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite> TokioIo for T {}
/// The tokio traits, with the `tokio-io` feature (hyper's path).
#[cfg(not(feature = "tokio-io"))]
pub trait TokioIo {}
#[cfg(not(feature = "tokio-io"))]
impl<T> TokioIo for T {}

/// Our side: a client or a server TLS stream, through every I/O trait
/// the crate implements.
pub trait Side:
    futures_io::AsyncRead
    + futures_io::AsyncWrite
    + AsyncRead
    + AsyncWrite
    + TokioIo
    + Unpin
    + Send
    + fmt::Debug
    + Sized
    + 'static
{
    const ROLE: &'static str;
    fn handshake(tcp: TcpStream, pki: &Pki) -> impl Future<Output = io::Result<Self>> + Send;
    fn tcp(&self) -> &TcpStream;
    fn split_halves(self) -> (TlsReadHalf<Self>, TlsWriteHalf<Self>);
}

impl Side for ClientTlsStream {
    const ROLE: &'static str = "client";
    async fn handshake(tcp: TcpStream, pki: &Pki) -> io::Result<Self> {
        let connector = spargio_tls::TlsConnector::with_root_ca_pem(pki.cert_pem.as_bytes())?;
        connector.connect_stream("localhost", tcp).await
    }
    fn tcp(&self) -> &TcpStream {
        self.get_ref()
    }
    fn split_halves(self) -> (TlsReadHalf<Self>, TlsWriteHalf<Self>) {
        self.split()
    }
}

impl Side for ServerTlsStream {
    const ROLE: &'static str = "server";
    async fn handshake(tcp: TcpStream, pki: &Pki) -> io::Result<Self> {
        let acceptor =
            spargio_tls::TlsAcceptor::from_pem(pki.cert_pem.as_bytes(), pki.key_pem.as_bytes())?;
        acceptor.accept(tcp).await
    }
    fn tcp(&self) -> &TcpStream {
        self.get_ref()
    }
    fn split_halves(self) -> (TlsReadHalf<Self>, TlsWriteHalf<Self>) {
        self.split()
    }
}

/// A write path.
#[derive(Clone, Copy, Debug)]
pub enum WriteHow {
    /// `futures_io`: one `poll_write`.
    Write,
    WriteAll,
    /// `poll_write_vectored` with the bytes in three slices.
    WriteVectored,
    /// spargio's owned-buffer `AsyncWrite::write`.
    OwnedWrite,
    OwnedWriteAll,
    #[cfg(feature = "tokio-io")]
    TokioWrite,
    #[cfg(feature = "tokio-io")]
    TokioWriteAll,
}

/// A read path.
#[derive(Clone, Copy, Debug)]
pub enum ReadHow {
    Read,
    ReadExact,
    OwnedRead,
    OwnedReadExact,
    #[cfg(feature = "tokio-io")]
    TokioRead,
    #[cfg(feature = "tokio-io")]
    TokioReadExact,
}

/// A flush path.
#[derive(Clone, Copy, Debug)]
pub enum FlushHow {
    Flush,
    OwnedFlush,
    #[cfg(feature = "tokio-io")]
    TokioFlush,
}

/// A close path (`close_notify`, then the TCP write side shut down).
#[derive(Clone, Copy, Debug)]
pub enum CloseHow {
    Close,
    OwnedShutdown,
    #[cfg(feature = "tokio-io")]
    TokioShutdown,
}

pub const WRITES: &[WriteHow] = &[
    WriteHow::Write,
    WriteHow::WriteAll,
    WriteHow::WriteVectored,
    WriteHow::OwnedWrite,
    WriteHow::OwnedWriteAll,
    #[cfg(feature = "tokio-io")]
    WriteHow::TokioWrite,
    #[cfg(feature = "tokio-io")]
    WriteHow::TokioWriteAll,
];

pub const READS: &[ReadHow] = &[
    ReadHow::Read,
    ReadHow::ReadExact,
    ReadHow::OwnedRead,
    ReadHow::OwnedReadExact,
    #[cfg(feature = "tokio-io")]
    ReadHow::TokioRead,
    #[cfg(feature = "tokio-io")]
    ReadHow::TokioReadExact,
];

/// The read half has spargio's and `futures_io`'s read traits.
pub const SPLIT_READS: &[ReadHow] = &[
    ReadHow::Read,
    ReadHow::ReadExact,
    ReadHow::OwnedRead,
    ReadHow::OwnedReadExact,
];

pub const FLUSHES: &[FlushHow] = &[
    FlushHow::Flush,
    FlushHow::OwnedFlush,
    #[cfg(feature = "tokio-io")]
    FlushHow::TokioFlush,
];

pub const CLOSES: &[CloseHow] = &[
    CloseHow::Close,
    CloseHow::OwnedShutdown,
    #[cfg(feature = "tokio-io")]
    CloseHow::TokioShutdown,
];

pub fn pick<T: Copy>(rng: &mut Rng, from: &[T]) -> T {
    from[rng.below(from.len() as u64) as usize]
}

impl WriteHow {
    /// Whether it writes every byte (else it reports how many it took).
    pub fn all(self) -> bool {
        match self {
            WriteHow::WriteAll | WriteHow::OwnedWriteAll => true,
            #[cfg(feature = "tokio-io")]
            WriteHow::TokioWriteAll => true,
            _ => false,
        }
    }
}

impl ReadHow {
    /// Whether it fills its buffer (and loses what it placed if dropped:
    /// `read_exact` is not cancel safe).
    pub fn exact(self) -> bool {
        match self {
            ReadHow::ReadExact | ReadHow::OwnedReadExact => true,
            #[cfg(feature = "tokio-io")]
            ReadHow::TokioReadExact => true,
            _ => false,
        }
    }
}

pub enum Op {
    Write(WriteHow, Vec<u8>),
    Read(ReadHow, usize),
    Flush(FlushHow),
}

pub enum Got {
    Wrote(usize),
    Read(Vec<u8>),
    Flushed,
}

/// Runs `op` on `s`, through the path it names.
pub async fn perform<S: Side>(s: &mut S, op: Op) -> io::Result<Got> {
    match op {
        Op::Write(how, data) => {
            let n = data.len();
            let k = match how {
                WriteHow::Write => FWrite::write(s, &data).await?,
                WriteHow::WriteAll => FWrite::write_all(s, &data).await.map(|()| n)?,
                WriteHow::WriteVectored => {
                    let (a, rest) = data.split_at(n / 3);
                    let (b, c) = rest.split_at(rest.len() / 2);
                    let slices = [IoSlice::new(a), IoSlice::new(b), IoSlice::new(c)];
                    FWrite::write_vectored(s, &slices).await?
                }
                WriteHow::OwnedWrite => AsyncWrite::write(s, data).await.0?,
                WriteHow::OwnedWriteAll => AsyncWriteExt::write_all(s, data).await.0.map(|()| n)?,
                #[cfg(feature = "tokio-io")]
                WriteHow::TokioWrite => tokio::io::AsyncWriteExt::write(s, &data).await?,
                #[cfg(feature = "tokio-io")]
                WriteHow::TokioWriteAll => tokio::io::AsyncWriteExt::write_all(s, &data)
                    .await
                    .map(|()| n)?,
            };
            Ok(Got::Wrote(k))
        }
        Op::Read(how, n) => {
            let mut buf = vec![0u8; n];
            let k = match how {
                ReadHow::Read => FRead::read(s, &mut buf).await?,
                ReadHow::ReadExact => FRead::read_exact(s, &mut buf).await.map(|()| n)?,
                ReadHow::OwnedRead => {
                    let (res, b) = AsyncRead::read(s, Vec::with_capacity(n)).await;
                    buf = b;
                    res?
                }
                ReadHow::OwnedReadExact => {
                    let (res, b) = AsyncReadExt::read_exact(s, buf.into_boxed_slice()).await;
                    buf = b.into();
                    res.map(|()| n)?
                }
                #[cfg(feature = "tokio-io")]
                ReadHow::TokioRead => tokio::io::AsyncReadExt::read(s, &mut buf).await?,
                #[cfg(feature = "tokio-io")]
                ReadHow::TokioReadExact => tokio::io::AsyncReadExt::read_exact(s, &mut buf).await?,
            };
            buf.truncate(k);
            Ok(Got::Read(buf))
        }
        Op::Flush(how) => {
            match how {
                FlushHow::Flush => FWrite::flush(s).await?,
                FlushHow::OwnedFlush => AsyncWrite::flush(s).await?,
                #[cfg(feature = "tokio-io")]
                FlushHow::TokioFlush => tokio::io::AsyncWriteExt::flush(s).await?,
            }
            Ok(Got::Flushed)
        }
    }
}

pub async fn close<S: Side>(s: &mut S, how: CloseHow) -> io::Result<()> {
    match how {
        CloseHow::Close => FWrite::close(s).await,
        CloseHow::OwnedShutdown => AsyncWrite::shutdown(s).await,
        #[cfg(feature = "tokio-io")]
        CloseHow::TokioShutdown => tokio::io::AsyncWriteExt::shutdown(s).await,
    }
}

pub async fn read_half<S>(rh: &mut TlsReadHalf<S>, how: ReadHow, n: usize) -> io::Result<Vec<u8>>
where
    S: futures_io::AsyncRead + Unpin + Send,
{
    let mut buf = vec![0u8; n];
    let k = match how {
        ReadHow::Read => FRead::read(rh, &mut buf).await?,
        ReadHow::ReadExact => FRead::read_exact(rh, &mut buf).await.map(|()| n)?,
        ReadHow::OwnedRead => {
            let (res, b) = AsyncRead::read(rh, Vec::with_capacity(n)).await;
            buf = b;
            res?
        }
        ReadHow::OwnedReadExact => {
            let (res, b) = AsyncReadExt::read_exact(rh, buf.into_boxed_slice()).await;
            buf = b.into();
            res.map(|()| n)?
        }
        #[cfg(feature = "tokio-io")]
        ReadHow::TokioRead | ReadHow::TokioReadExact => {
            unreachable!("the read half has no tokio traits")
        }
    };
    buf.truncate(k);
    Ok(buf)
}

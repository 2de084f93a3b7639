//! Stream operations of the native backend (called from any shard).

use std::io;

use bytes::Bytes;
use quinn_proto::{FinishError, ReadError, ReadableError, StreamId, VarInt, WriteError};

use super::conn::{ConnRef, ConnState, Step};
use super::waiters::WaitKind;
use crate::error::{from_connection_error, from_read_error, from_write_error};

fn closed_stream(st: &ConnState) -> io::Error {
    match &st.error {
        Some(e) => from_connection_error(e.clone()),
        None => io::Error::new(io::ErrorKind::NotConnected, "spargio-quic: stream closed"),
    }
}

/// The send half of a native stream.
#[derive(Debug)]
pub(crate) struct NativeSend {
    pub(crate) conn: ConnRef,
    pub(crate) id: StreamId,
    /// Finished or reset: dropping it sends nothing more.
    done: bool,
}

impl NativeSend {
    pub(crate) fn new(conn: ConnRef, id: StreamId) -> NativeSend {
        NativeSend {
            conn,
            id,
            done: false,
        }
    }

    /// Writes some of `data` (waits for flow-control credit).
    pub(crate) async fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let id = self.id;
        self.conn
            .run(|st, dirty| {
                if let Some(e) = &st.error {
                    return Step::Done(Err(from_connection_error(e.clone())));
                }
                match st.conn.send_stream(id).write(data) {
                    Ok(n) => {
                        *dirty = true;
                        Step::Done(Ok(n))
                    }
                    Err(WriteError::Blocked) => Step::Wait(WaitKind::Write(id)),
                    Err(WriteError::ClosedStream) => Step::Done(Err(closed_stream(st))),
                    Err(e) => Step::Done(Err(from_write_error(e))),
                }
            })
            .await
    }

    /// Writes all of `data` (`Bytes` chunks move into quinn-proto's send
    /// buffer without a copy; a partial write keeps the rest).
    pub(crate) async fn write_bytes(&mut self, data: Bytes) -> io::Result<()> {
        let id = self.id;
        let mut chunks = [data];
        while !chunks[0].is_empty() {
            self.conn
                .run(|st, dirty| {
                    if let Some(e) = &st.error {
                        return Step::Done(Err(from_connection_error(e.clone())));
                    }
                    match st.conn.send_stream(id).write_chunks(&mut chunks) {
                        Ok(_) => {
                            *dirty = true;
                            Step::Done(Ok(()))
                        }
                        Err(WriteError::Blocked) => Step::Wait(WaitKind::Write(id)),
                        Err(WriteError::ClosedStream) => Step::Done(Err(closed_stream(st))),
                        Err(e) => Step::Done(Err(from_write_error(e))),
                    }
                })
                .await?;
        }
        Ok(())
    }

    /// Finishes the stream (FIN after the buffered data).
    pub(crate) fn finish(&mut self) -> io::Result<()> {
        let res = {
            let mut st = self.conn.lock();
            match st.conn.send_stream(self.id).finish() {
                Ok(()) => Ok(()),
                Err(FinishError::Stopped(code)) => Err(from_write_error(WriteError::Stopped(code))),
                Err(FinishError::ClosedStream) => Err(closed_stream(&st)),
            }
        };
        if res.is_ok() {
            self.done = true;
            self.conn.mark_dirty();
        }
        res
    }

    /// Abandons the stream with `code` (RESET_STREAM).
    pub(crate) fn reset(&mut self, code: VarInt) -> io::Result<()> {
        let res = {
            let mut st = self.conn.lock();
            st.conn
                .send_stream(self.id)
                .reset(code)
                .map_err(|_| closed_stream(&st))
        };
        self.done = true;
        self.conn.mark_dirty();
        res
    }

    /// Waits until the peer stops the stream (`Some(code)`) or has
    /// received everything after `finish` (`None`).
    pub(crate) async fn stopped(&mut self) -> io::Result<Option<u64>> {
        let id = self.id;
        self.conn
            .run(|st, _| match st.conn.send_stream(id).stopped() {
                Ok(Some(code)) => Step::Done(Ok(Some(code.into_inner()))),
                Ok(None) => match &st.error {
                    Some(e) => Step::Done(Err(from_connection_error(e.clone()))),
                    None => Step::Wait(WaitKind::Write(id)),
                },
                // The stream state is gone: everything was acknowledged.
                Err(_) => Step::Done(Ok(None)),
            })
            .await
    }
}

impl Drop for NativeSend {
    fn drop(&mut self) {
        if !self.done {
            // As quinn: an unfinished, unreset stream is finished on drop.
            let _ = self.conn.lock().conn.send_stream(self.id).finish();
            self.conn.mark_dirty();
        }
    }
}

/// The receive half of a native stream.
#[derive(Debug)]
pub(crate) struct NativeRecv {
    pub(crate) conn: ConnRef,
    pub(crate) id: StreamId,
    /// FIN or reset seen, or stopped: nothing more to read or stop.
    done: bool,
    /// The reset code, once a reset was seen (later reads repeat it).
    reset: Option<VarInt>,
}

impl NativeRecv {
    pub(crate) fn new(conn: ConnRef, id: StreamId) -> NativeRecv {
        NativeRecv {
            conn,
            id,
            done: false,
            reset: None,
        }
    }

    /// The next chunk of at most `max` bytes, in order; `None` at the end.
    /// If the future is dropped before it completes, no data is lost (a
    /// chunk leaves quinn-proto only in the same locked step that returns
    /// it).
    pub(crate) async fn read_chunk(&mut self, max: usize) -> io::Result<Option<Bytes>> {
        if let Some(code) = self.reset {
            return Err(from_read_error(ReadError::Reset(code)));
        }
        if self.done {
            return Ok(None);
        }
        let id = self.id;
        let res = self
            .conn
            .run(|st, dirty| {
                let out = {
                    let mut stream = st.conn.recv_stream(id);
                    let res = match stream.read(true) {
                        Ok(mut chunks) => {
                            let out = chunks.next(max.max(1));
                            *dirty |= chunks.finalize().should_transmit();
                            Ok(out)
                        }
                        Err(e) => Err(e),
                    };
                    res
                };
                let out = match out {
                    Ok(out) => out,
                    Err(ReadableError::ClosedStream) => return Step::Done(Err(closed_stream(st))),
                    Err(e @ ReadableError::IllegalOrderedRead) => {
                        return Step::Done(Err(io::Error::other(e)))
                    }
                };
                match out {
                    Ok(Some(chunk)) => Step::Done(Ok(Some(chunk.bytes))),
                    Ok(None) => Step::Done(Ok(None)),
                    Err(ReadError::Blocked) => match &st.error {
                        Some(e) => Step::Done(Err(from_connection_error(e.clone()))),
                        None => Step::Wait(WaitKind::Read(id)),
                    },
                    Err(e) => Step::Done(Err(from_read_error(e))),
                }
            })
            .await;
        match &res {
            Ok(None) => self.done = true,
            Err(e) => {
                if let Some(ReadError::Reset(code)) =
                    e.get_ref().and_then(|i| i.downcast_ref::<ReadError>())
                {
                    self.done = true;
                    self.reset = Some(*code);
                }
            }
            _ => {}
        }
        res
    }

    /// Stops receiving (STOP_SENDING with `code`).
    pub(crate) fn stop(&mut self, code: VarInt) -> io::Result<()> {
        if self.done {
            return Ok(());
        }
        let res = {
            let mut st = self.conn.lock();
            st.conn
                .recv_stream(self.id)
                .stop(code)
                .map_err(|_| closed_stream(&st))
        };
        self.done = true;
        self.conn.mark_dirty();
        res
    }
}

impl Drop for NativeRecv {
    fn drop(&mut self) {
        if !self.done {
            // As quinn: a stream dropped before its end is stopped (0).
            let _ = self.stop(VarInt::from_u32(0));
        }
    }
}

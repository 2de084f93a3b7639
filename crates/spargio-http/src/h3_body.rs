//! The one `http_body::Body` state machine of both HTTP/3 bodies (the
//! server's request body, [`crate::H3Body`], and the client's response
//! body): DATA frames, then trailers, then the end. `h3`'s server and
//! client request streams have the same receive methods but no common
//! trait, so [`RecvFrames`] gives them one.

use std::task::{ready, Context, Poll};

use bytes::{Buf, Bytes};
use http::HeaderMap;
use http_body::Frame;

use crate::BoxError;

/// Where a body stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BodyState {
    Data,
    Trailers,
    Done,
}

/// The receive side of an `h3` request stream.
pub(crate) trait RecvFrames {
    /// The next DATA frame's payload; `None` after the last.
    fn poll_data(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Bytes>, BoxError>>;
    /// The trailers, if the peer sent any (after the last DATA frame).
    fn poll_trailers(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<HeaderMap>, BoxError>>;
}

macro_rules! recv_frames {
    ($stream:ident) => {
        impl<S, B> RecvFrames for h3::$stream::RequestStream<S, B>
        where
            S: h3::quic::RecvStream,
            B: Buf,
        {
            fn poll_data(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Bytes>, BoxError>> {
                Poll::Ready(match ready!(self.poll_recv_data(cx)) {
                    Ok(Some(mut buf)) => Ok(Some(buf.copy_to_bytes(buf.remaining()))),
                    Ok(None) => Ok(None),
                    Err(e) => Err(e.into()),
                })
            }

            fn poll_trailers(
                &mut self,
                cx: &mut Context<'_>,
            ) -> Poll<Result<Option<HeaderMap>, BoxError>> {
                self.poll_recv_trailers(cx).map_err(Into::into)
            }
        }
    };
}

recv_frames!(server);
recv_frames!(client);

/// `Body::poll_frame` over `recv`: empty DATA frames are skipped, an error
/// ends the body.
pub(crate) fn poll_frame(
    state: &mut BodyState,
    recv: &mut impl RecvFrames,
    cx: &mut Context<'_>,
) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
    loop {
        match *state {
            BodyState::Data => match ready!(recv.poll_data(cx)) {
                Ok(Some(bytes)) if bytes.is_empty() => {}
                Ok(Some(bytes)) => return Poll::Ready(Some(Ok(Frame::data(bytes)))),
                Ok(None) => *state = BodyState::Trailers,
                Err(e) => {
                    *state = BodyState::Done;
                    return Poll::Ready(Some(Err(e)));
                }
            },
            BodyState::Trailers => {
                let trailers = ready!(recv.poll_trailers(cx));
                *state = BodyState::Done;
                return Poll::Ready(match trailers {
                    Ok(Some(t)) => Some(Ok(Frame::trailers(t))),
                    Ok(None) => None,
                    Err(e) => Some(Err(e)),
                });
            }
            BodyState::Done => return Poll::Ready(None),
        }
    }
}

//! The one-shot reply slot shared by a caller's ticket and the request.

use std::sync::{Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use super::BoundaryError;

pub(crate) struct Reply<Resp> {
    state: Mutex<State<Resp>>,
}

enum State<Resp> {
    Waiting(Option<Waker>),
    Done(Result<Resp, BoundaryError>),
    Taken,
    /// The caller dropped its ticket or timed out.
    CallerGone,
}

impl<Resp> Reply<Resp> {
    pub(crate) fn new() -> Reply<Resp> {
        Reply {
            state: Mutex::new(State::Waiting(None)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<Resp>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Server side. `Err(Canceled)` when the caller is gone (the value is
    /// dropped).
    pub(crate) fn complete(
        &self,
        result: Result<Resp, BoundaryError>,
    ) -> Result<(), BoundaryError> {
        let mut state = self.lock();
        match std::mem::replace(&mut *state, State::Taken) {
            State::Waiting(waker) => {
                *state = State::Done(result);
                drop(state);
                if let Some(w) = waker {
                    w.wake();
                }
                Ok(())
            }
            State::CallerGone => {
                *state = State::CallerGone;
                Err(BoundaryError::Canceled)
            }
            done @ (State::Done(_) | State::Taken) => {
                *state = done;
                Ok(())
            }
        }
    }

    pub(crate) fn poll(&self, cx: &mut Context<'_>) -> Poll<Result<Resp, BoundaryError>> {
        let mut state = self.lock();
        match &mut *state {
            State::Waiting(waker) => {
                if !waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    *waker = Some(cx.waker().clone());
                }
                Poll::Pending
            }
            State::Done(_) => match std::mem::replace(&mut *state, State::Taken) {
                State::Done(result) => Poll::Ready(result),
                _ => unreachable!("matched Done"),
            },
            State::Taken | State::CallerGone => panic!("BoundaryTicket polled after it completed"),
        }
    }

    /// Caller side: gives up waiting.
    pub(crate) fn abandon(&self) {
        let mut state = self.lock();
        if matches!(*state, State::Waiting(_)) {
            *state = State::CallerGone;
        }
    }

    pub(crate) fn is_abandoned(&self) -> bool {
        matches!(*self.lock(), State::CallerGone)
    }
}

//! One accepted connection: TLS handshake (if any), then hyper's auto
//! connection (HTTP/1.1 or HTTP/2), watched for drain and abort.

use std::future::{poll_fn, Future};
use std::pin::pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;

use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use spargio_tls::{HandshakeOptions, TlsAcceptor};

use super::hub::ConnGuard;
use super::idle::{ConnState, EXPIRE_NONE, EXPIRE_NOW};
use super::listener::Accepted;
use super::service::{ConnService, HttpBody, HttpService};
use crate::rt::{Executor, Io, Serves, Transport};

/// What every connection of one server shares.
pub(crate) struct Shared {
    /// HTTP/1.1 and HTTP/2, told apart by the first bytes.
    pub(crate) builder: auto::Builder<Executor>,
    /// What the server serves (`http1_only`, `http2_only`), enforced by
    /// the connection's [`Io`]: the builder serves both whatever it is
    /// told when it serves with upgrades.
    pub(crate) serves: Serves,
    pub(crate) tls: Option<(TlsAcceptor, HandshakeOptions)>,
    pub(crate) connect_info: bool,
    /// `header_read_timeout`, enforced by the hub's sweeper (`idle.rs`).
    pub(crate) idle_timeout: bool,
}

/// Serves one connection until it ends, the server aborts, or (draining)
/// its in-flight requests are answered.
pub(crate) async fn serve_connection<St, S, B>(
    shared: Arc<Shared>,
    stream: St,
    service: S,
    state: Option<Arc<ConnState>>,
    mut guard: ConnGuard,
) where
    St: Accepted,
    S: HttpService<B>,
    B: HttpBody,
{
    stream.prepare();
    let peer = if shared.connect_info {
        stream.peer()
    } else {
        None
    };
    let service = TowerToHyperService::new(ConnService {
        inner: service,
        peer,
        state,
    });
    let handshake = match &shared.tls {
        None => Err(stream),
        Some((acceptor, options)) => stream.tls(acceptor, *options),
    };
    match handshake {
        Err(stream) => {
            let io = Io::new(stream.into_io());
            drive(&shared.builder, io, shared.serves, service, &mut guard).await;
        }
        Ok(handshake) => {
            let tls = match watch(handshake, &mut guard, true).await {
                Some(Ok(tls)) => tls,
                _ => return,
            };
            let serves = by_alpn(shared.serves, tls.alpn_protocol());
            // Boxed: the TLS state is large, and an inline branch would
            // make every plain connection's task as big as a TLS one's.
            Box::pin(drive(
                &shared.builder,
                Io::new(tls),
                serves,
                service,
                &mut guard,
            ))
            .await;
        }
    }
}

/// What a TLS connection may speak: the protocol ALPN chose, if the
/// server serves it (an acceptor with its own ALPN list may offer one it
/// does not: then nothing), or what the server serves when ALPN chose
/// none.
fn by_alpn(serves: Serves, alpn: Option<&[u8]>) -> Serves {
    match alpn {
        Some(b"h2") => Serves {
            http1: false,
            ..serves
        },
        Some(b"http/1.1") => Serves {
            http2: false,
            ..serves
        },
        _ => serves,
    }
}

async fn drive<T, S, B>(
    builder: &auto::Builder<Executor>,
    mut io: Io<T>,
    serves: Serves,
    service: TowerToHyperService<ConnService<S>>,
    guard: &mut ConnGuard,
) where
    T: Transport,
    S: HttpService<B>,
    B: HttpBody,
{
    let h2 = io.sniff(serves);
    let mut conn = pin!(builder.serve_connection_with_upgrades(io, service));
    let mut shutting_down = false;
    let mut deferred = false;
    poll_fn(|cx| {
        let flags = guard.poll_flags(cx);
        let is_h2 = h2.load(Ordering::Relaxed);
        // Idle timeout: HTTP/1.1 closes at once (as hyper's own header
        // timeout does); HTTP/2 gets GOAWAY first, then is closed if the
        // sweeper finds it still quiet.
        let expired_now = flags.expire == EXPIRE_NOW || (flags.expire != EXPIRE_NONE && !is_h2);
        if flags.aborted || expired_now {
            return Poll::Ready(());
        }
        if (flags.draining || flags.expire != EXPIRE_NONE) && !shutting_down {
            shutting_down = true;
            conn.as_mut().graceful_shutdown();
        }
        // HTTP/2: a stream task that finishes its response wakes this task
        // while it runs, which would run this task next and write that one
        // response alone. Going to the back of the queue once per wake lets
        // the other ready streams finish first: their responses go out in
        // one write.
        if is_h2 && !std::mem::take(&mut deferred) {
            deferred = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        conn.as_mut().poll(cx).map(|_| ())
    })
    .await
}

/// Polls `fut` unless the server aborts (or, with `stop_on_drain`, starts
/// draining): then `None`.
async fn watch<F: Future + Unpin>(
    mut fut: F,
    guard: &mut ConnGuard,
    stop_on_drain: bool,
) -> Option<F::Output> {
    poll_fn(|cx| {
        let flags = guard.poll_flags(cx);
        if flags.aborted || (stop_on_drain && flags.draining) {
            return Poll::Ready(None);
        }
        std::pin::Pin::new(&mut fut).poll(cx).map(Some)
    })
    .await
}

#[cfg(test)]
mod tests {
    /// A plain connection's task must not carry the TLS state inline: an
    /// idle keep-alive connection costs its task's size (10 KiB with the
    /// TLS branch inline, 3.7 KiB boxed).
    #[test]
    fn a_plain_connection_task_does_not_carry_tls_state() {
        let rt = spargio::Runtime::builder().shards(1).build().unwrap();
        let h = rt.handle();
        let size = spargio::block_on(
            h.clone()
                .spawn_stealable(async move {
                    let h = spargio::ShardCtx::current().unwrap().handle();
                    let l = spargio::net::TcpListener::bind(&h, "127.0.0.1:0")
                        .await
                        .unwrap();
                    let addr = l.local_addr().unwrap();
                    let c = std::net::TcpStream::connect(addr).unwrap();
                    let (s, _) = l.accept().await.unwrap();
                    let shared = std::sync::Arc::new(super::super::builders(
                        &super::super::Config::default(),
                        None,
                        &crate::rt::Executor::new(&h),
                        &crate::rt::Timer::new(&h),
                    ));
                    let hub = std::sync::Arc::new(super::super::hub::Hub::default());
                    let svc = crate::hyper_service(hyper::service::service_fn(|_r| async {
                        Ok::<_, std::convert::Infallible>(http::Response::new(
                            http_body_util::Empty::<bytes::Bytes>::new(),
                        ))
                    }));
                    let fut = super::serve_connection(shared, s, svc, None, hub.enter(None));
                    drop(c);
                    std::mem::size_of_val(&fut)
                })
                .unwrap(),
        )
        .unwrap();
        assert!(size < 6 * 1024, "serve_connection future: {size} bytes");
    }
}

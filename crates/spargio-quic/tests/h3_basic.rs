//! `h3` over our own connections on both sides: the adapter's streams,
//! opens, accepts, big bodies, concurrency (both QUIC backends), resets.

mod common;
mod support;

use bytes::{Buf, Bytes};
use http::{Method, Request, Response, StatusCode};
use spargio::RuntimeHandle;
use spargio_quic::{H3Connection, QuicBackend, QuicConnection, QuicEndpointOptions};

use common::{checksum, pattern, TestCerts};
use support::*;

type Server = h3::server::Connection<H3Connection, Bytes>;

/// Serves `conn`: `GET /n/<N>` answers N pattern bytes in 64 KiB DATA
/// frames, `POST /sum` the checksum of the body (8 bytes LE), anything
/// else 404. Returns the number of requests served.
async fn serve(handle: RuntimeHandle, conn: QuicConnection) -> usize {
    let mut h3: Server = h3::server::Connection::new(H3Connection::new(conn))
        .await
        .expect("h3 server handshake");
    let mut served = 0;
    let mut tasks = Vec::new();
    while let Ok(Some(resolver)) = h3.accept().await {
        served += 1;
        tasks.push(
            handle
                .spawn_stealable(async move {
                    let (req, mut stream) = resolver.resolve_request().await.unwrap();
                    let path = req.uri().path().to_owned();
                    if let Some(n) = path.strip_prefix("/n/") {
                        let n: usize = n.parse().unwrap();
                        let body = Bytes::from(pattern(n, 3));
                        stream.send_response(Response::new(())).await.unwrap();
                        for chunk in body.chunks(64 * 1024) {
                            stream.send_data(body.slice_ref(chunk)).await.unwrap();
                        }
                        stream.finish().await.unwrap();
                    } else if path == "/sum" && req.method() == Method::POST {
                        let mut sum = common::Checksum::new();
                        while let Some(mut chunk) = stream.recv_data().await.unwrap() {
                            let bytes = chunk.copy_to_bytes(chunk.remaining());
                            sum.update(&bytes);
                        }
                        stream.send_response(Response::new(())).await.unwrap();
                        let out = Bytes::copy_from_slice(&sum.value().to_le_bytes());
                        stream.send_data(out).await.unwrap();
                        stream.finish().await.unwrap();
                    } else {
                        let resp = Response::builder()
                            .status(StatusCode::NOT_FOUND)
                            .body(())
                            .unwrap();
                        stream.send_response(resp).await.unwrap();
                        stream.finish().await.unwrap();
                    }
                })
                .unwrap(),
        );
    }
    for t in tasks {
        t.await.unwrap();
    }
    served
}

async fn endpoints(handle: &RuntimeHandle, certs: &TestCerts) -> (QuicConnection, QuicConnection) {
    endpoints_on(handle, certs, QuicBackend::Native).await
}

async fn endpoints_on(
    handle: &RuntimeHandle,
    certs: &TestCerts,
    backend: QuicBackend,
) -> (QuicConnection, QuicConnection) {
    let opts = QuicEndpointOptions::default().with_backend(backend);
    let server = QuicEndpoint::server_with_options(
        handle,
        localhost(),
        certs.quinn_server_config(&[b"h3"], None),
        opts.clone(),
    )
    .unwrap();
    let client = QuicEndpoint::client_with_options(handle, localhost(), opts).unwrap();
    client.set_default_client_config(certs.quinn_client_config(&[b"h3"], None));
    let (c, s) = pair(&client, &server).await;
    // The endpoints live as long as their connections.
    std::mem::forget((client, server));
    (c, s)
}

use spargio_quic::QuicEndpoint;

async fn get(
    send: &mut h3::client::SendRequest<spargio_quic::H3OpenStreams, Bytes>,
    path: &str,
) -> (StatusCode, Vec<u8>) {
    let req = Request::get(format!("https://localhost{path}"))
        .body(())
        .unwrap();
    let mut stream = send.send_request(req).await.unwrap();
    stream.finish().await.unwrap();
    let resp = stream.recv_response().await.unwrap();
    let mut body = Vec::new();
    while let Some(mut chunk) = stream.recv_data().await.unwrap() {
        body.extend_from_slice(&chunk.copy_to_bytes(chunk.remaining()));
    }
    (resp.status(), body)
}

#[spargio::test(shards = 2)]
async fn get_post_and_concurrent_requests_over_our_own_h3(handle: RuntimeHandle) {
    for backend in [QuicBackend::Native, QuicBackend::Bridge] {
        round_trips(&handle, backend).await;
    }
}

async fn round_trips(handle: &RuntimeHandle, backend: QuicBackend) {
    let handle = handle.clone();
    let certs = TestCerts::generate();
    let (c, s) = endpoints_on(&handle, &certs, backend).await;
    let server = handle.spawn_stealable(serve(handle.clone(), s)).unwrap();

    let (mut driver, mut send) = h3::client::new(H3Connection::new(c)).await.unwrap();
    let drive = handle
        .spawn_stealable(async move { std::future::poll_fn(|cx| driver.poll_close(cx)).await })
        .unwrap();

    let (status, body) = hang("GET", get(&mut send, "/n/100")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, pattern(100, 3));
    let (status, body) = hang("GET 4 MiB", get(&mut send, &format!("/n/{}", 4 * MIB))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(checksum(&body), checksum(&pattern(4 * MIB, 3)));
    assert_eq!(
        hang("404", get(&mut send, "/nope")).await.0,
        StatusCode::NOT_FOUND
    );

    // A 3 MiB upload in 100 KiB DATA frames.
    let up = pattern(3 * MIB, 9);
    let mut stream = send
        .send_request(Request::post("https://localhost/sum").body(()).unwrap())
        .await
        .unwrap();
    for chunk in up.chunks(100 * 1024) {
        stream
            .send_data(Bytes::copy_from_slice(chunk))
            .await
            .unwrap();
    }
    stream.finish().await.unwrap();
    assert_eq!(
        stream.recv_response().await.unwrap().status(),
        StatusCode::OK
    );
    let mut answer = Vec::new();
    while let Some(mut chunk) = stream.recv_data().await.unwrap() {
        answer.extend_from_slice(&chunk.copy_to_bytes(chunk.remaining()));
    }
    assert_eq!(answer, checksum(&up).to_le_bytes());

    // 100 requests at once on the one connection.
    let mut jobs = Vec::new();
    for i in 0..100usize {
        let mut send = send.clone();
        jobs.push(
            handle
                .spawn_stealable(async move { get(&mut send, &format!("/n/{}", 1000 + i)).await })
                .unwrap(),
        );
    }
    for (i, job) in jobs.into_iter().enumerate() {
        let (status, body) = hang("concurrent GET", job).await.unwrap();
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body, pattern(1000 + i, 3));
    }
    drop(send);
    let end = hang("client driver", drive).await.unwrap();
    assert!(end.is_h3_no_error(), "the client closed cleanly: {end:?}");
    assert_eq!(hang("server", server).await.unwrap(), 104);
}

/// A request dropped mid-body (its future gone) resets its stream with
/// `H3_REQUEST_CANCELLED`: the server's body read fails with that code,
/// and never sees a body that merely ended early.
#[spargio::test(shards = 2)]
async fn a_request_dropped_mid_body_is_reset_with_request_cancelled(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let (c, s) = endpoints(&handle, &certs).await;
    let server = handle
        .spawn_stealable(async move {
            let mut h3: Server = h3::server::Connection::new(H3Connection::new(s))
                .await
                .unwrap();
            let resolver = h3.accept().await.unwrap().expect("a request");
            // The reset may come before the request is resolved.
            let (_req, mut stream) = match resolver.resolve_request().await {
                Ok(r) => r,
                Err(e) => return Err((0, format!("{e:?}"))),
            };
            let mut got = 0;
            loop {
                match stream.recv_data().await {
                    Ok(Some(chunk)) => got += chunk.remaining(),
                    Ok(None) => return Ok(got),
                    Err(e) => return Err((got, format!("{e:?}"))),
                }
            }
        })
        .unwrap();
    let (mut driver, mut send) = h3::client::new(H3Connection::new(c)).await.unwrap();
    let _drive = handle
        .spawn_stealable(async move { std::future::poll_fn(|cx| driver.poll_close(cx)).await })
        .unwrap();
    let mut stream = send
        .send_request(Request::post("https://localhost/up").body(()).unwrap())
        .await
        .unwrap();
    stream
        .send_data(Bytes::from(pattern(50_000, 1)))
        .await
        .unwrap();
    drop(stream);
    let res = hang("server read", server).await.unwrap();
    let (got, err) = res.expect_err("the body must not look complete");
    assert!(got <= 50_000);
    assert!(
        err.contains("H3_REQUEST_CANCELLED"),
        "reset with H3_REQUEST_CANCELLED: {err}"
    );
}

//! hyper's connection settings reach through `Serve::hyper_builder`
//! (issue 50, item 7): an HTTP/1.1 response's header names are written
//! title-cased when the builder says so, lower-case otherwise, as on
//! tokio with hyper-util's auto builder.

mod common;

use axum::routing::get;
use axum::Router;
use spargio::net::TcpListener;

fn response_head(title_case: bool) -> String {
    common::run(move |h| async move {
        let listener = TcpListener::bind(&h, "127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = Router::new().route("/", get(|| async { "hi" }));
        let mut serve = spargio_http::serve(listener, app);
        if title_case {
            serve = serve.hyper_builder(|b| {
                b.http1().title_case_headers(true);
            });
        }
        let server = h
            .spawn_stealable(std::future::IntoFuture::into_future(serve))
            .unwrap();
        let out = h
            .spawn_blocking(move || {
                common::raw_exchange(
                    addr,
                    b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
                )
            })
            .unwrap()
            .await
            .unwrap();
        server.abort();
        String::from_utf8(out).unwrap()
    })
}

#[test]
fn hyper_builder_settings_apply_to_connections() {
    let plain = response_head(false);
    assert!(plain.contains("\r\ncontent-type: "), "{plain}");
    let titled = response_head(true);
    assert!(titled.contains("\r\nContent-Type: "), "{titled}");
    assert!(titled.ends_with("hi"), "{titled}");
}

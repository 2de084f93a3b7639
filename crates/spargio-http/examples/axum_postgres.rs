//! An axum app on spargio with PostgreSQL through sqlx: TechEmpower's
//! fortunes page and one random `world` row as JSON.
//!
//! ```text
//! cargo run -p spargio-http --example axum_postgres --features tokio-compat
//! curl localhost:3000/fortunes
//! curl localhost:3000/db
//! ```
//!
//! The database is `DATABASE_URL` (with TechEmpower's tables `fortune`
//! and `world`); when it is unset, the example starts a private PostgreSQL
//! server with those tables (`spargio_test_peers::postgres()`, which needs
//! PostgreSQL installed: `scripts/install-test-peers.sh`) and stops it on
//! exit. It listens on 127.0.0.1, port `PORT` (default 3000), until
//! ctrl-c or SIGTERM.
//!
//! sqlx runs on tokio: with spargio's feature `tokio-compat` every shard
//! drives a tokio runtime of its own, so the pool's sockets and timers
//! work inside spargio tasks, handlers included, unchanged.

use std::error::Error;
use std::hash::{BuildHasher, Hasher};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;
use spargio::RuntimeHandle;
use sqlx::postgres::{PgPool, PgPoolOptions};

#[derive(Serialize)]
struct World {
    id: i32,
    #[serde(rename = "randomNumber")]
    random_number: i32,
}

/// A database error, answered as 500.
struct DbError(sqlx::Error);

impl From<sqlx::Error> for DbError {
    fn from(e: sqlx::Error) -> DbError {
        DbError(e)
    }
}

impl IntoResponse for DbError {
    fn into_response(self) -> Response {
        (StatusCode::INTERNAL_SERVER_ERROR, self.0.to_string()).into_response()
    }
}

/// Every fortune plus one added now, sorted by message, as an HTML table.
async fn fortunes(State(pool): State<PgPool>) -> Result<Html<String>, DbError> {
    let mut rows: Vec<(i32, String)> = sqlx::query_as("SELECT id, message FROM fortune")
        .fetch_all(&pool)
        .await?;
    rows.push((0, "Additional fortune added at request time.".into()));
    rows.sort_by(|a, b| a.1.cmp(&b.1));
    let mut html = String::from(
        "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>\
         <tr><th>id</th><th>message</th></tr>",
    );
    for (id, message) in &rows {
        html.push_str(&format!(
            "<tr><td>{id}</td><td>{}</td></tr>",
            escape(message)
        ));
    }
    html.push_str("</table></body></html>");
    Ok(Html(html))
}

/// One random row of `world` (ids 1..=10000).
async fn db(State(pool): State<PgPool>) -> Result<Json<World>, DbError> {
    // A random number from std alone: each `RandomState` is keyed afresh.
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    let id = (random % 10_000) as i32 + 1;
    let (id, random_number) = sqlx::query_as("SELECT id, randomnumber FROM world WHERE id = $1")
        .bind(id)
        .fetch_one(&pool)
        .await?;
    Ok(Json(World { id, random_number }))
}

/// `text` with `& < > " '` as HTML entities.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#x27;"),
            c => out.push(c),
        }
    }
    out
}

/// `DATABASE_URL`, else a private server's (started on the blocking pool:
/// initdb and start take a second or two).
async fn database_url(handle: &RuntimeHandle) -> Result<String, Box<dyn Error + Send + Sync>> {
    if let Ok(url) = std::env::var("DATABASE_URL") {
        return Ok(url);
    }
    use spargio_test_peers::{is_present, postgres, Peer};
    if !is_present(Peer::Postgres) {
        return Err(format!(
            "DATABASE_URL is unset and PostgreSQL is not installed (`{}`)",
            Peer::Postgres.install_hint()
        )
        .into());
    }
    let url = handle
        .spawn_blocking(|| {
            let pg = postgres();
            pg.techempower_schema();
            pg.url()
        })?
        .await?;
    println!("started a private PostgreSQL: {url}");
    Ok(url)
}

/// Resolves on SIGTERM or SIGINT (ctrl-c).
async fn shutdown_signal(handle: RuntimeHandle) {
    match spargio_signal::signal(&handle, &[libc::SIGTERM, libc::SIGINT]) {
        Ok(mut signals) => {
            let _ = signals.recv().await;
        }
        Err(e) => {
            eprintln!("no signal handling ({e}); serving until killed");
            std::future::pending::<()>().await
        }
    }
}

#[spargio::main(tokio_compat = true)]
async fn main(handle: RuntimeHandle) -> Result<(), Box<dyn Error + Send + Sync>> {
    let url = database_url(&handle).await?;
    let pool = PgPoolOptions::new()
        .max_connections(16)
        .connect(&url)
        .await?;
    let app = Router::new()
        .route("/fortunes", get(fortunes))
        .route("/db", get(db))
        .with_state(pool);
    let port: u16 = match std::env::var("PORT") {
        Ok(port) => port.parse()?,
        Err(_) => 3000,
    };
    let listener = spargio::net::TcpListener::bind(&handle, ("127.0.0.1", port)).await?;
    println!("listening on http://127.0.0.1:{port} (/fortunes, /db)");
    spargio_http::serve(listener, app)
        .with_graceful_shutdown(shutdown_signal(handle.clone()))
        .await?;
    println!("bye");
    // Returning from main stops the private PostgreSQL, if one started.
    Ok(())
}

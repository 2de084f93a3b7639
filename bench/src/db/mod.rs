//! The router of `db_server`: the six TechEmpower test types on one axum
//! `Router`, whatever runtime serves it and whichever client reaches the
//! database ([`store::Db`]).
//!
//! Per the TechEmpower rules: every response carries `Server` (here) and
//! `Date` (hyper adds it); JSON is serialized per request; `/queries` and
//! `/updates` take `q` (or TechEmpower's own name, `queries`), clamped to
//! 1..=500, anything unparsable counting as 1, and always answer an array;
//! each row is read by a query of its own; `/fortunes` adds a row at
//! request time, sorts by message and escapes into the standard template.

pub mod store;

use std::cell::Cell;
use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::http::header::{CONTENT_TYPE, SERVER};
use axum::http::HeaderValue;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;

use store::{Db, DbError};

/// The `Server` header of every response.
static SERVER_NAME: HeaderValue = HeaderValue::from_static("axum");
static TEXT_HTML: HeaderValue = HeaderValue::from_static("text/html; charset=utf-8");

/// A row of `world`, as TechEmpower's JSON spells it.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct World {
    pub id: i32,
    #[serde(rename = "randomNumber")]
    pub random_number: i32,
}

/// A row of `fortune`.
#[derive(Debug)]
pub struct Fortune {
    pub id: i32,
    pub message: String,
}

#[derive(Serialize)]
struct Message {
    message: &'static str,
}

/// The router, with `db` as its state.
pub fn app(db: Arc<Db>) -> Router {
    Router::new()
        .route("/plaintext", get(plaintext))
        .route("/json", get(json))
        .route("/db", get(single))
        .route("/queries", get(queries))
        .route("/fortunes", get(fortunes))
        .route("/updates", get(updates))
        .with_state(db)
}

async fn plaintext() -> impl IntoResponse {
    // `&'static str`: `text/plain; charset=utf-8`.
    ([(SERVER, SERVER_NAME.clone())], "Hello, World!")
}

async fn json() -> impl IntoResponse {
    (
        [(SERVER, SERVER_NAME.clone())],
        Json(Message {
            message: "Hello, World!",
        }),
    )
}

async fn single(State(db): State<Arc<Db>>) -> Result<impl IntoResponse, DbError> {
    let world = db.world(random_id()).await?;
    Ok(([(SERVER, SERVER_NAME.clone())], Json(world)))
}

async fn queries(
    State(db): State<Arc<Db>>,
    RawQuery(query): RawQuery,
) -> Result<impl IntoResponse, DbError> {
    let ids: Vec<i32> = (0..count(query.as_deref())).map(|_| random_id()).collect();
    let worlds = db.worlds(&ids).await?;
    Ok(([(SERVER, SERVER_NAME.clone())], Json(worlds)))
}

async fn updates(
    State(db): State<Arc<Db>>,
    RawQuery(query): RawQuery,
) -> Result<impl IntoResponse, DbError> {
    let ids: Vec<i32> = (0..count(query.as_deref())).map(|_| random_id()).collect();
    let mut worlds = db.worlds(&ids).await?;
    // A new number for each row read (never the one it had). An id drawn
    // twice is written once, and both entries of the answer show the
    // number written: the pairs sorted by id (so concurrent updates lock
    // rows in the same order) and deduplicated.
    for world in &mut worlds {
        let old = world.random_number;
        while world.random_number == old {
            world.random_number = random_id();
        }
    }
    let mut rows: Vec<(i32, i32)> = worlds.iter().map(|w| (w.id, w.random_number)).collect();
    rows.sort_by_key(|&(id, _)| id);
    rows.dedup_by_key(|&mut (id, _)| id);
    for world in &mut worlds {
        if let Ok(i) = rows.binary_search_by_key(&world.id, |&(id, _)| id) {
            world.random_number = rows[i].1;
        }
    }
    let (ids, numbers): (Vec<i32>, Vec<i32>) = rows.into_iter().unzip();
    db.update(&ids, &numbers).await?;
    Ok(([(SERVER, SERVER_NAME.clone())], Json(worlds)))
}

async fn fortunes(State(db): State<Arc<Db>>) -> Result<impl IntoResponse, DbError> {
    let mut fortunes = db.fortunes().await?;
    fortunes.push(Fortune {
        id: 0,
        message: "Additional fortune added at request time.".into(),
    });
    fortunes.sort_unstable_by(|a, b| a.message.cmp(&b.message));
    Ok((
        [
            (SERVER, SERVER_NAME.clone()),
            (CONTENT_TYPE, TEXT_HTML.clone()),
        ],
        fortunes_html(&fortunes),
    ))
}

/// The standard fortunes template, every message escaped.
pub fn fortunes_html(fortunes: &[Fortune]) -> String {
    let mut html = String::with_capacity(1536);
    html.push_str(
        "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>\
         <tr><th>id</th><th>message</th></tr>",
    );
    for fortune in fortunes {
        html.push_str("<tr><td>");
        html.push_str(itoa(fortune.id, &mut [0; 11]));
        html.push_str("</td><td>");
        escape_html(&fortune.message, &mut html);
        html.push_str("</td></tr>");
    }
    html.push_str("</table></body></html>");
    html
}

/// `&`, `<`, `>`, `"` and `'` as entities; runs of other characters are
/// copied whole.
pub fn escape_html(text: &str, out: &mut String) {
    let mut from = 0;
    for (i, b) in text.bytes().enumerate() {
        let entity = match b {
            b'&' => "&amp;",
            b'<' => "&lt;",
            b'>' => "&gt;",
            b'"' => "&quot;",
            b'\'' => "&#x27;",
            _ => continue,
        };
        out.push_str(&text[from..i]);
        out.push_str(entity);
        from = i + 1;
    }
    out.push_str(&text[from..]);
}

/// `n` in decimal, in `buf`.
fn itoa(n: i32, buf: &mut [u8; 11]) -> &str {
    let mut i = buf.len();
    let mut v = n.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    if n < 0 {
        i -= 1;
        buf[i] = b'-';
    }
    // Only ASCII digits and '-' were written.
    std::str::from_utf8(&buf[i..]).unwrap_or("")
}

/// The row count of `/queries` and `/updates`: `q=` (or `queries=`),
/// clamped to 1..=500; missing or not a number counts as 1.
pub fn count(query: Option<&str>) -> usize {
    let n = query
        .and_then(|q| {
            q.split('&').find_map(|pair| {
                let (key, value) = pair.split_once('=')?;
                (key == "q" || key == "queries").then_some(value)
            })
        })
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or(1);
    n.clamp(1, 500) as usize
}

thread_local! {
    /// xorshift64 state of this thread, seeded once from the clock and the
    /// thread's own address (nonzero).
    static RNG: Cell<u64> = Cell::new(seed());
}

fn seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let here = &nanos as *const u64 as u64;
    // splitmix64 of the mix, so nearby seeds give unrelated streams.
    let mut z = (nanos ^ here.rotate_left(32)).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) | 1
}

/// A random id in 1..=10000 (xorshift64, scaled by multiplication).
pub fn random_id() -> i32 {
    RNG.with(|state| {
        let mut x = state.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        state.set(x);
        (((x >> 32) * 10_000) >> 32) as i32 + 1
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts() {
        assert_eq!(count(None), 1);
        assert_eq!(count(Some("q=20")), 20);
        assert_eq!(count(Some("queries=0")), 1);
        assert_eq!(count(Some("q=foo")), 1);
        assert_eq!(count(Some("q=501")), 500);
        assert_eq!(count(Some("x=1&queries=-3")), 1);
    }

    #[test]
    fn escapes() {
        let mut out = String::new();
        escape_html("<a href=\"x\">'&'</a> フ", &mut out);
        assert_eq!(
            out,
            "&lt;a href=&quot;x&quot;&gt;&#x27;&amp;&#x27;&lt;/a&gt; フ"
        );
    }

    #[test]
    fn ids_in_range() {
        for _ in 0..100_000 {
            assert!((1..=10_000).contains(&random_id()));
        }
    }
}

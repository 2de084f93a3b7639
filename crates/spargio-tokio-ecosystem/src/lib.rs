//! Tests only: tokio-ecosystem crates (sqlx, tokio-postgres, redis) inside
//! spargio tasks, against the private PostgreSQL and Redis servers of
//! `spargio-test-peers`. The tests live in `tests/`; this library is
//! empty.

//! The `grpc-timeout` request header, as the gRPC over HTTP/2 spec
//! defines it: `TimeoutValue TimeoutUnit`, at most 8 ASCII digits then
//! one of `H` (hours), `M` (minutes), `S` (seconds), `m` (milliseconds),
//! `u` (microseconds), `n` (nanoseconds). Read by the server (a request's
//! deadline) and by `grpc::Channel` (a call's).

use std::time::Duration;

use http::header::{HeaderMap, HeaderValue, CONTENT_TYPE};

/// The header's name.
pub(crate) const GRPC_TIMEOUT: &str = "grpc-timeout";

/// The timeout `headers` carry, if any. A malformed value is no timeout
/// (tonic's server and channel ignore one too).
pub(crate) fn from_headers(headers: &HeaderMap) -> Option<Duration> {
    headers.get(GRPC_TIMEOUT).and_then(parse)
}

/// One header value, `None` when malformed. Eight digits at most keep
/// every product below `u64::MAX` (99,999,999 hours is 3.6e11 s).
fn parse(value: &HeaderValue) -> Option<Duration> {
    let bytes = value.as_bytes();
    let (&unit, digits) = bytes.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = digits
        .iter()
        .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
    Some(match unit {
        b'H' => Duration::from_secs(n * 60 * 60),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

/// Whether `headers` are a gRPC request's: `content-type` is
/// `application/grpc`, bare or with a `+codec` or `;parameters` suffix.
/// gRPC-Web (`application/grpc-web*`) is not: its status travels in the
/// body, which a server-made trailers-only answer would not match.
pub(crate) fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.as_bytes().strip_prefix(b"application/grpc"))
        .is_some_and(|rest| matches!(rest.first(), None | Some(b'+' | b';')))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeout(value: &str) -> Option<Duration> {
        let mut headers = HeaderMap::new();
        headers.insert(GRPC_TIMEOUT, HeaderValue::from_str(value).unwrap());
        from_headers(&headers)
    }

    #[test]
    fn every_unit() {
        assert_eq!(timeout("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(timeout("3M"), Some(Duration::from_secs(180)));
        assert_eq!(timeout("4S"), Some(Duration::from_secs(4)));
        assert_eq!(timeout("300m"), Some(Duration::from_millis(300)));
        assert_eq!(timeout("300000u"), Some(Duration::from_millis(300)));
        assert_eq!(timeout("99999999n"), Some(Duration::from_nanos(99_999_999)));
        assert_eq!(timeout("0m"), Some(Duration::ZERO));
        assert_eq!(
            timeout("99999999H"),
            Some(Duration::from_secs(99_999_999 * 3600))
        );
    }

    #[test]
    fn malformed_values_are_no_timeout() {
        for bad in [
            "",
            "m",
            "100",
            "1x",
            "1h",
            "123456789n",
            "-1m",
            "+1m",
            "1.5S",
            " 1m",
            "1m ",
            "1 m",
        ] {
            assert_eq!(timeout(bad), None, "{bad:?}");
        }
        let mut headers = HeaderMap::new();
        headers.insert(GRPC_TIMEOUT, HeaderValue::from_bytes(b"1\xe9m").unwrap());
        assert_eq!(from_headers(&headers), None);
        assert_eq!(from_headers(&HeaderMap::new()), None);
    }

    #[test]
    fn grpc_content_types() {
        let is = |ct: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(CONTENT_TYPE, HeaderValue::from_str(ct).unwrap());
            is_grpc(&headers)
        };
        assert!(is("application/grpc"));
        assert!(is("application/grpc+proto"));
        assert!(is("application/grpc;charset=utf-8"));
        assert!(!is("application/grpc-web"));
        assert!(!is("application/grpc-web+proto"));
        assert!(!is("application/json"));
        assert!(!is("text/plain"));
        assert!(!is_grpc(&HeaderMap::new()));
    }
}

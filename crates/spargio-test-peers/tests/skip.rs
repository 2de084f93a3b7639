//! What a test binary does when its peers are missing: this binary runs
//! itself again as a child whose PATH finds no program at all, so every
//! peer is absent, and the child's `child_*` tests are the tests that
//! need them.

use std::process::{Command, Output};

use spargio_test_peers::{assert_present, require_peer, Peer};

/// Set in the child; the `child_*` tests do nothing without it.
const CHILD: &str = "SPARGIO_TEST_PEERS_CHILD";

fn in_child() -> bool {
    std::env::var_os(CHILD).is_some()
}

// ===== the child's tests =====

#[test]
fn child_needs_curl() {
    if !in_child() {
        return;
    }
    require_peer!(Peer::Curl);
    panic!("ran without curl");
}

#[test]
fn child_needs_curl_and_openssl() {
    if !in_child() {
        return;
    }
    require_peer!(Peer::Curl, Peer::Openssl);
    panic!("ran without curl");
}

#[test]
fn child_needs_websockets() {
    if !in_child() {
        return;
    }
    require_peer!(Peer::PythonWebsockets);
    panic!("ran without python3");
}

#[test]
fn child_unchecked_helper() {
    if !in_child() {
        return;
    }
    assert_present(Peer::Curl);
}

// ===== the checks =====

/// Runs the child tests matching `filter` with no program on the PATH.
fn child(filter: &str, require: bool) -> (Output, String) {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([filter, "--test-threads=2"])
        .env(CHILD, "1")
        .env("PATH", "/nonexistent");
    if require {
        cmd.env("SPARGIO_REQUIRE_PEERS", "1");
    } else {
        cmd.env_remove("SPARGIO_REQUIRE_PEERS");
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stderr)
}

fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

#[test]
fn a_missing_peer_skips_with_one_line_and_a_summary() {
    let (out, stderr) = child("child_needs_", false);
    assert!(out.status.success(), "{out:?}");
    // One line per missing peer, however many tests it skips.
    let skip = "SKIP: tests that need curl are skipped; install it with `apt-get install curl`";
    assert_eq!(count(&stderr, skip), 1, "{stderr}");
    // A Python package whose Python is missing says to install Python.
    assert_eq!(
        count(
            &stderr,
            "SKIP: tests that need Python websockets are skipped; install it with \
             `apt-get install python3 python3-pip`, then `python3 -m pip install websockets`"
        ),
        1,
        "{stderr}"
    );
    // `require_peer!` stops at the first missing peer: openssl is never
    // looked for.
    assert_eq!(count(&stderr, "openssl"), 0, "{stderr}");
    // The summary at exit: each peer once, with its count.
    assert_eq!(
        count(&stderr, "SKIPPED: 2 test(s) need curl; to run them, install it with `apt-get install curl` (or scripts/install-test-peers.sh)"),
        1,
        "{stderr}"
    );
    assert_eq!(
        count(&stderr, "SKIPPED: 1 test(s) need Python websockets"),
        1,
        "{stderr}"
    );
}

#[test]
fn a_missing_peer_fails_when_peers_are_required() {
    let (out, stderr) = child("child_needs_curl", true);
    assert!(!out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        count(
            &stdout,
            "peer curl is missing and SPARGIO_REQUIRE_PEERS=1; install it with `apt-get install curl`"
        ),
        2,
        "{stdout}"
    );
    assert!(!stderr.contains("SKIP"), "{stderr}");
}

#[test]
fn a_helper_reached_without_the_check_fails_naming_it() {
    let (out, _) = child("child_unchecked_helper", false);
    assert!(!out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(
            "peer curl is missing and this test does not check for it: start the test with \
             `spargio_test_peers::require_peer!(spargio_test_peers::Peer::Curl);`"
        ),
        "{stdout}"
    );
}

//! Finds the external peers the interop tests talk to.
//!
//! A test that needs a real peer starts with
//! `spargio_test_peers::require_peer!(Peer::Curl);` (or calls
//! [`available`]). When the peer is present the test runs. When it is
//! absent:
//!
//! * by default the test returns early (it passes as skipped); the first
//!   skip of each peer in a test binary writes one line to stderr naming
//!   the peer and the command that installs it, and at exit the binary
//!   lists each missing peer once with how many tests it skipped;
//! * with `SPARGIO_REQUIRE_PEERS=1` (set by `.ci/run`) the test fails,
//!   so CI keeps proving interop.
//!
//! Each peer is looked up once per test binary.
//!
//! The check belongs at the top of the test, before a runtime is built or
//! a peer's helper runs, so a skip costs nothing and says why. Helpers
//! that spawn a peer call [`assert_present`], which turns a forgotten
//! check into a failure naming the missing `require_peer!` instead of a
//! spawn error deep in the helper.
//!
//! `scripts/install-test-peers.sh` installs every peer listed here.
//!
//! Two peers are servers a test talks to as a client: [`postgres`] and
//! [`redis`] start a private instance per test binary on first use (a
//! temp dir, a free port on 127.0.0.1, never a system instance or a
//! default port) and stop it at exit, removing its dir.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};

mod postgres;
mod redis;
mod server;

pub use postgres::{postgres, PostgresInstance};
pub use redis::{redis, RedisInstance};

/// An external program or package an interop test talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Peer {
    /// The `openssl` command line tool.
    Openssl,
    /// `curl` (with HTTP/2 support for the `--http2` tests).
    Curl,
    /// Python 3 itself.
    Python,
    /// Python's `websockets` package.
    PythonWebsockets,
    /// Python's `aioquic` package.
    PythonAioquic,
    /// Python's `grpcio` package.
    PythonGrpcio,
    /// Python's `prometheus_client` package (its text-format parser).
    PythonPrometheusClient,
    /// `h2load` (Debian `nghttp2-client`).
    H2load,
    /// `nginx`.
    Nginx,
    /// Node.js (`node`).
    Node,
    /// The `wrk` load generator.
    Wrk,
    /// The PostgreSQL server programs (`initdb`, `postgres`, and the
    /// clients `psql`, `createdb`, `pg_isready`) in
    /// `/usr/lib/postgresql/<version>/bin`; see [`postgres`].
    Postgres,
    /// `redis-server`; see [`redis`].
    Redis,
}

impl Peer {
    /// A short name for messages.
    pub fn name(self) -> &'static str {
        match self {
            Peer::Openssl => "openssl",
            Peer::Curl => "curl",
            Peer::Python => "python3",
            Peer::PythonWebsockets => "Python websockets",
            Peer::PythonAioquic => "Python aioquic",
            Peer::PythonGrpcio => "Python grpcio",
            Peer::PythonPrometheusClient => "Python prometheus_client",
            Peer::H2load => "h2load",
            Peer::Nginx => "nginx",
            Peer::Node => "node",
            Peer::Wrk => "wrk",
            Peer::Postgres => "PostgreSQL",
            Peer::Redis => "redis-server",
        }
    }

    /// The command that installs this peer on Debian/Ubuntu.
    pub fn install_hint(self) -> &'static str {
        match self {
            Peer::Openssl => "apt-get install openssl",
            Peer::Curl => "apt-get install curl",
            Peer::Python => "apt-get install python3 python3-pip",
            Peer::PythonWebsockets => "python3 -m pip install websockets",
            Peer::PythonAioquic => "python3 -m pip install aioquic",
            Peer::PythonGrpcio => "python3 -m pip install grpcio",
            Peer::PythonPrometheusClient => "python3 -m pip install prometheus_client",
            Peer::H2load => "apt-get install nghttp2-client",
            Peer::Nginx => "apt-get install nginx",
            Peer::Node => "apt-get install nodejs",
            Peer::Wrk => "apt-get install wrk",
            Peer::Postgres => "apt-get install postgresql",
            Peer::Redis => "apt-get install redis-server",
        }
    }

    fn probe(self) -> bool {
        match self {
            Peer::Openssl => runs("openssl", &["version"]),
            Peer::Curl => runs("curl", &["--version"]),
            Peer::Python => runs("python3", &["--version"]),
            Peer::PythonWebsockets => {
                python_imports("websockets.sync.client, websockets.asyncio.server")
            }
            Peer::PythonAioquic => python_imports("aioquic"),
            Peer::PythonGrpcio => python_imports("grpc"),
            Peer::PythonPrometheusClient => python_imports("prometheus_client.parser"),
            Peer::H2load => runs("h2load", &["--version"]),
            Peer::Nginx => runs("nginx", &["-v"]),
            Peer::Node => runs("node", &["--version"]),
            Peer::Wrk => runs("wrk", &["--version"]) || on_path("wrk"),
            Peer::Postgres => postgres::bin_dir().is_some(),
            Peer::Redis => redis::server_binary().is_some(),
        }
    }
}

fn runs(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

fn python_imports(modules: &str) -> bool {
    runs("python3", &["-c", &format!("import {modules}")])
}

/// `SPARGIO_REQUIRE_PEERS=1`: a missing peer fails the test.
pub fn peers_required() -> bool {
    std::env::var("SPARGIO_REQUIRE_PEERS").is_ok_and(|v| v == "1")
}

struct State {
    found: BTreeMap<Peer, bool>,
    skipped: BTreeMap<Peer, usize>,
}

fn state() -> &'static Mutex<State> {
    static STATE: OnceLock<Mutex<State>> = OnceLock::new();
    STATE.get_or_init(|| {
        Mutex::new(State {
            found: BTreeMap::new(),
            skipped: BTreeMap::new(),
        })
    })
}

fn found(st: &mut State, peer: Peer) -> bool {
    if let Some(&f) = st.found.get(&peer) {
        return f;
    }
    let f = peer.probe();
    st.found.insert(peer, f);
    f
}

/// How to install `peer`, naming Python itself first when a Python
/// package is missing because `python3` is.
fn how_to_install(st: &mut State, peer: Peer) -> String {
    let python_package = matches!(
        peer,
        Peer::PythonWebsockets
            | Peer::PythonAioquic
            | Peer::PythonGrpcio
            | Peer::PythonPrometheusClient
    );
    if python_package && !found(st, Peer::Python) {
        format!(
            "`{}`, then `{}`",
            Peer::Python.install_hint(),
            peer.install_hint()
        )
    } else {
        format!("`{}`", peer.install_hint())
    }
}

/// Whether `peer` is present (looked up once per process).
///
/// Absent with `SPARGIO_REQUIRE_PEERS=1`: panics, naming the install
/// command. Absent otherwise: records a skip and returns `false`.
#[track_caller]
pub fn available(peer: Peer) -> bool {
    let mut st = state().lock().unwrap_or_else(|e| e.into_inner());
    if found(&mut st, peer) {
        return true;
    }
    let install = how_to_install(&mut st, peer);
    if peers_required() {
        drop(st);
        panic!(
            "peer {} is missing and SPARGIO_REQUIRE_PEERS=1; install it with {install} (or scripts/install-test-peers.sh)",
            peer.name(),
        );
    }
    let first = st.skipped.is_empty();
    let count = st.skipped.entry(peer).or_insert(0);
    *count += 1;
    if *count == 1 {
        // Straight to the stream: the test harness captures `eprintln!`.
        let _ = writeln!(
            std::io::stderr(),
            "SKIP: tests that need {} are skipped; install it with {install} (or scripts/install-test-peers.sh)",
            peer.name(),
        );
    }
    if first {
        // SAFETY: `summary` is the `extern "C" fn()` atexit takes; it
        // reads only the static `STATE`, which outlives `main`, and being
        // `extern "C"` it aborts rather than unwinds into libc if it panics.
        unsafe { libc::atexit(summary) };
    }
    false
}

/// Whether `peer` is present, looked up once per process like
/// [`available`], but recording nothing and never panicking: for programs
/// (not tests) that use a peer, such as `spargio-peer-db`.
pub fn is_present(peer: Peer) -> bool {
    let mut st = state().lock().unwrap_or_else(|e| e.into_inner());
    found(&mut st, peer)
}

/// For helpers that spawn `peer`: panics when it is absent, saying that
/// the test must start with `require_peer!`. Records no skip; present, it
/// costs a map lookup (the probe is shared with [`available`]).
#[track_caller]
pub fn assert_present(peer: Peer) {
    let mut st = state().lock().unwrap_or_else(|e| e.into_inner());
    if found(&mut st, peer) {
        return;
    }
    drop(st);
    panic!(
        "peer {} is missing and this test does not check for it: start the test with \
         `spargio_test_peers::require_peer!(spargio_test_peers::Peer::{peer:?});`",
        peer.name(),
    );
}

extern "C" fn summary() {
    // A thread still inside `available` at exit holds the lock: print
    // nothing rather than wait for it.
    let mut st = match state().try_lock() {
        Ok(st) => st,
        Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => return,
    };
    let skipped: Vec<(Peer, usize)> = st.skipped.iter().map(|(&p, &n)| (p, n)).collect();
    let mut err = std::io::stderr().lock();
    for (peer, n) in skipped {
        let install = how_to_install(&mut st, peer);
        let _ = writeln!(
            err,
            "SKIPPED: {n} test(s) need {}; to run them, install it with {install} \
             (or scripts/install-test-peers.sh)",
            peer.name(),
        );
    }
}

/// Returns from the enclosing test when any of the peers is absent (see
/// [`available`]).
#[macro_export]
macro_rules! require_peer {
    ($($peer:expr),+ $(,)?) => {
        $(
            if !$crate::available($peer) {
                return;
            }
        )+
    };
}

/// Parses Prometheus text exposition with Python `prometheus_client`'s
/// parser (the reference implementation) and returns, as JSON, each
/// family's type, help and samples: `{family: {"type": t, "help": h,
/// "samples": [[name, labels, value], ...]}}`. Panics, with the parser's
/// error, when it refuses the text. Needs [`Peer::PythonPrometheusClient`].
pub fn parse_prometheus_text(text: &str) -> String {
    const SCRIPT: &str = "\
import json, sys
from prometheus_client.parser import text_string_to_metric_families
families = {}
for family in text_string_to_metric_families(sys.stdin.read()):
    families[family.name] = {
        'type': family.type,
        'help': family.documentation,
        'samples': [[s.name, s.labels, s.value] for s in family.samples],
    }
json.dump(families, sys.stdout)
";
    assert_present(Peer::PythonPrometheusClient);
    let mut child = Command::new("python3")
        .args(["-c", SCRIPT])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut stdin = child.stdin.take().expect("piped stdin");
    stdin
        .write_all(text.as_bytes())
        .expect("write the exposition");
    drop(stdin);
    let out = child.wait_with_output().expect("python3 ran");
    assert!(
        out.status.success(),
        "prometheus_client refused the exposition: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("JSON is UTF-8")
}

// HTTPS over Node's `tls` for the soak (scripts/soak.sh): HTTP/1.1 by
// hand over TLS connections to the server's HTTPS port (ALPN http/1.1).
//
//   node tls_client.js SECONDS HTTPS_PORT CA_FILE [CONNECTIONS]
//
// CONNECTIONS (default 4) loops; each opens a TLS connection and makes 1
// to 6 keep-alive requests on it (GET /, GET /big/N up to 1 MiB, POST
// /echo up to 512 KiB written in pieces, every body checked), the last
// one with `Connection: close` half the time (the server must then close).
// Deliberate aborts: one connection in ten is destroyed mid-handshake,
// and one request in twenty is cut off mid-head, mid-body or
// mid-response. Every request (and every handshake) has REQUEST_TIMEOUT:
// running out of it is a hang.
//
// Prints `soak-client node-tls: ok=N aborted=N failed=N hung=N [...]`
// like the Python clients; exits 1 when anything failed or hung.
'use strict';
const tls = require('tls');
const fs = require('fs');

const REQUEST_TIMEOUT = 10000;
const MAX_OPS = 1000000;

const seconds = Number(process.argv[2]);
const port = Number(process.argv[3]);
const ca = fs.readFileSync(process.argv[4]);
const connections = Number(process.argv[5] || 4);
const deadline = Date.now() + seconds * 1000;

const counts = { ok: 0, aborted: 0, failed: 0, hung: 0 };
const detail = {};
const samples = [];
function add(outcome, what, note) {
  counts[outcome]++;
  const key = `${outcome}:${what}`;
  detail[key] = (detail[key] || 0) + 1;
  if (note && samples.length < 8) samples.push(`${outcome}: ${new Date().toISOString()} ${what}: ${note}`);
}

const rand = (n) => Math.floor(Math.random() * n);

class Hang extends Error {}
class Aborted extends Error {}

// A TLS connection with a queue of received bytes and an `end` flag.
function open() {
  return new Promise((resolve, reject) => {
    const sock = tls.connect({ host: '127.0.0.1', port, ca, servername: 'localhost', ALPNProtocols: ['http/1.1'] });
    const conn = { sock, buf: Buffer.alloc(0), ended: false, error: null, wake: null };
    const timer = setTimeout(() => { sock.destroy(); reject(new Hang('TLS handshake timed out')); }, REQUEST_TIMEOUT);
    sock.on('data', (d) => { conn.buf = Buffer.concat([conn.buf, d]); if (conn.wake) conn.wake(); });
    sock.on('end', () => { conn.ended = true; if (conn.wake) conn.wake(); });
    sock.on('close', () => { conn.ended = true; if (conn.wake) conn.wake(); });
    sock.on('error', (e) => { conn.error = e; clearTimeout(timer); reject(e); if (conn.wake) conn.wake(); });
    sock.on('secureConnect', () => { clearTimeout(timer); resolve(conn); });
    if (Math.random() < 0.1) {
      // Mid-handshake: the TCP connection is up, the handshake is not.
      sock.once('connect', () => { clearTimeout(timer); sock.destroy(); reject(new Aborted('handshake')); });
    }
  });
}

// Waits until `pred()` holds, the connection ends, or the deadline.
function until(conn, pred, limit, what) {
  return new Promise((resolve, reject) => {
    const check = () => {
      if (pred()) { conn.wake = null; clearTimeout(timer); resolve(); return true; }
      if (conn.error || conn.ended) {
        conn.wake = null; clearTimeout(timer);
        reject(conn.error || new Error(`connection ended while waiting for ${what}`));
        return true;
      }
      return false;
    };
    const timer = setTimeout(() => { conn.wake = null; reject(new Hang(`${what}: no answer in ${REQUEST_TIMEOUT} ms`)); }, limit - Date.now());
    if (!check()) conn.wake = check;
  });
}

async function readResponse(conn, limit) {
  let end = -1;
  await until(conn, () => (end = conn.buf.indexOf('\r\n\r\n')) >= 0, limit, 'response head');
  const head = conn.buf.subarray(0, end).toString('latin1').split('\r\n');
  const status = Number(head[0].split(' ')[1]);
  const lenLine = head.find((l) => l.toLowerCase().startsWith('content-length:'));
  if (!lenLine) throw new Error(`status ${status} without content-length`);
  const length = Number(lenLine.split(':')[1]);
  await until(conn, () => conn.buf.length >= end + 4 + length, limit, `body of ${length} bytes`);
  const body = conn.buf.subarray(end + 4, end + 4 + length);
  conn.buf = conn.buf.subarray(end + 4 + length);
  return { status, body };
}

const write = (conn, data) => new Promise((resolve) => conn.sock.write(data, resolve));

async function exchange(conn, close) {
  const pick = rand(3);
  const limit = Date.now() + REQUEST_TIMEOUT;
  const cutOff = Math.random() < 0.05 ? ['head', 'body', 'response'][rand(3)] : null;
  const conn_hdr = close ? 'Connection: close\r\n' : '';
  let body = null;
  let path = '/';
  let expect = null;
  if (pick === 1) {
    const n = rand(1 << 20);
    path = `/big/${n}`;
    expect = (b) => b.length === n && b.every((c) => c === 120);
  } else if (pick === 2) {
    body = Buffer.alloc(rand(512 << 10), rand(256));
    path = '/echo';
    expect = (b) => b.equals(body);
  } else {
    expect = (b) => b.toString().startsWith('hello');
  }
  const method = body ? 'POST' : 'GET';
  const head = Buffer.from(`${method} ${path} HTTP/1.1\r\nHost: localhost\r\n${conn_hdr}` +
    (body ? `Content-Length: ${body.length}\r\n` : '') + '\r\n');
  if (cutOff === 'head') {
    await write(conn, head.subarray(0, 1 + rand(head.length - 1)));
    throw new Aborted('mid-head');
  }
  await write(conn, head);
  if (body) {
    // In pieces, so the server reads the body across several records.
    for (let i = 0; i < body.length; i += 65536) {
      if (cutOff === 'body' && i > 0) throw new Aborted('mid-body');
      await write(conn, body.subarray(i, i + 65536));
    }
  }
  if (cutOff === 'response') {
    await until(conn, () => conn.buf.length > 0, limit, 'first response bytes');
    throw new Aborted('mid-response');
  }
  const res = await readResponse(conn, limit);
  if (res.status !== 200 || !expect(res.body)) {
    throw new Error(`${method} ${path}: status ${res.status}, ${res.body.length} body bytes differ`);
  }
  if (close) await until(conn, () => false, limit, 'close after Connection: close').catch((e) => {
    if (e instanceof Hang) throw e;
  });
  return path.split('/')[1] || 'root';
}

async function loop() {
  for (let op = 0; op < MAX_OPS && Date.now() < deadline; op++) {
    let conn = null;
    try {
      conn = await open();
      const n = 1 + rand(6);
      for (let i = 0; i < n; i++) {
        const close = i === n - 1 && Math.random() < 0.5;
        add('ok', await exchange(conn, close));
        if (close) break;
      }
    } catch (e) {
      if (e instanceof Aborted) add('aborted', e.message);
      else if (e instanceof Hang) add('hung', 'request', e.message);
      else add('failed', 'request', `${e.code || e.name}: ${e.message}`);
    } finally {
      if (conn) conn.sock.destroy();
    }
  }
}

(async () => {
  await Promise.all(Array.from({ length: connections }, loop));
  const d = Object.keys(detail).sort().map((k) => `${k}=${detail[k]}`).join(' ');
  console.log(`soak-client node-tls: ok=${counts.ok} aborted=${counts.aborted} failed=${counts.failed} hung=${counts.hung} [${d}]`);
  for (const s of samples) console.log(`  ${s}`);
  process.exitCode = counts.failed || counts.hung ? 1 : 0;
})();

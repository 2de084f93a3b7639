// Node's `tls.connect` against an echo server, one connection per round:
// writes `size` bytes in one `write`, reads until the echo is complete
// (checking every byte), then `end()`s.
//
// Usage: node echo_client.js <port> <ca.pem> <size> <rounds> <round timeout ms>
// Prints `ok <rounds> <bytes echoed>`; on a stall, the round, the bytes
// echoed so far and exits 1; on a wrong byte, its offset and exits 1.
'use strict';
const tls = require('tls');
const fs = require('fs');

const [port, caFile, size, rounds, limitMs] = process.argv.slice(2);
const ca = fs.readFileSync(caFile);
const len = Number(size);

// The same pattern as the Rust tests: a dropped, repeated or reordered
// chunk changes it; `seed` tells rounds apart.
function pattern(len, seed) {
  const buf = Buffer.alloc(len);
  for (let i = 0; i < len; i++) buf[i] = ((i % 251) ^ ((i >> 13) & 0xff) ^ seed) & 0xff;
  return buf;
}

function round(n) {
  return new Promise((resolve, reject) => {
    const want = pattern(len, n & 0xff);
    let got = 0;
    let settled = false;
    const sock = tls.connect({ port: Number(port), host: '127.0.0.1', servername: 'localhost', ca });
    const timer = setTimeout(() => {
      settled = true;
      sock.destroy();
      reject(new Error(`round ${n}: stalled with ${got} of ${len} bytes echoed after ${limitMs} ms`));
    }, Number(limitMs));
    sock.on('secureConnect', () => sock.write(want));
    sock.on('data', (chunk) => {
      if (settled) return;
      for (let i = 0; i < chunk.length; i++) {
        if (got + i >= len || chunk[i] !== want[got + i]) {
          settled = true;
          clearTimeout(timer);
          sock.destroy();
          reject(new Error(`round ${n}: wrong byte at offset ${got + i}`));
          return;
        }
      }
      got += chunk.length;
      if (got === len) {
        settled = true;
        clearTimeout(timer);
        sock.end();
        sock.on('close', () => resolve(got));
      }
    });
    sock.on('error', (err) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      reject(new Error(`round ${n}: ${err.message} after ${got} bytes`));
    });
  });
}

(async () => {
  let total = 0;
  for (let n = 0; n < Number(rounds); n++) total += await round(n);
  console.log(`ok ${rounds} ${total}`);
})().catch((err) => {
  console.log(`FAIL ${err.message}`);
  process.exit(1);
});

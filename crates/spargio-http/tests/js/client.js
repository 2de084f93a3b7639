// Node's own http and http2 clients against a spargio-http server.
// usage: node client.js <port> <requests>
// Prints one line per protocol: "<proto> <ok>/<total> <bytes>".
const http = require('http');
const http2 = require('http2');

const port = Number(process.argv[2]);
const total = Number(process.argv[3] || 20);

function h1() {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
  let ok = 0, bytes = 0, done = 0;
  return new Promise((resolve, reject) => {
    for (let i = 0; i < total; i++) {
      http.get({ port, host: '127.0.0.1', path: `/big/${1000 + i}`, agent }, (res) => {
        let n = 0;
        res.on('data', (c) => { n += c.length; });
        res.on('end', () => {
          if (res.statusCode === 200 && n === 1000 + i) ok++;
          bytes += n;
          if (++done === total) { agent.destroy(); resolve(`http1 ${ok}/${total} ${bytes}`); }
        });
      }).on('error', reject);
    }
  });
}

function h2() {
  const session = http2.connect(`http://127.0.0.1:${port}`);
  let ok = 0, bytes = 0, done = 0;
  return new Promise((resolve, reject) => {
    session.on('error', reject);
    for (let i = 0; i < total; i++) {
      const req = session.request({ ':path': `/big/${1000 + i}` });
      let status = 0, n = 0;
      req.on('response', (h) => { status = h[':status']; });
      req.on('data', (c) => { n += c.length; });
      req.on('end', () => {
        if (status === 200 && n === 1000 + i) ok++;
        bytes += n;
        if (++done === total) { session.close(); resolve(`http2 ${ok}/${total} ${bytes}`); }
      });
      req.on('error', reject);
      req.end();
    }
  });
}

(async () => {
  console.log(await h1());
  console.log(await h2());
})().catch((e) => { console.error(e); process.exit(1); });

// The conformance suite's client sends no credentials, and the interposer's HTTP face refuses a
// request without an agent's bearer token. This proxy stands where an agent host's HTTP stack
// would: it adds `Authorization: Bearer $AGENT_TOKEN` to every request and otherwise passes the
// request and the response through unchanged (method, path, every header including `Host`,
// body, streamed response), so a scenario that probes the interposer's own checks (the DNS
// rebinding scenario's foreign `Host`) still reaches them.
//
// Usage: AGENT_TOKEN=... node bearer-proxy.mjs http://127.0.0.1:PORT   (prints "listening PORT")
import http from 'node:http';

const target = new URL(process.argv[2]);
const token = process.env.AGENT_TOKEN;
if (!token) {
  console.error('bearer-proxy: AGENT_TOKEN is not set');
  process.exit(2);
}

const server = http.createServer((req, res) => {
  const headers = { ...req.headers, authorization: `Bearer ${token}` };
  const upstream = http.request(
    { host: target.hostname, port: target.port, method: req.method, path: req.url, headers },
    (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    },
  );
  upstream.on('error', () => {
    if (!res.headersSent) res.writeHead(502);
    res.end();
  });
  // A client that goes away ends the relayed request too (an SSE stream the client dropped).
  res.on('close', () => upstream.destroy());
  req.pipe(upstream);
});
server.keepAliveTimeout = 1000;
server.listen(0, '127.0.0.1', () => console.log(`listening ${server.address().port}`));

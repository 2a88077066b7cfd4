// s8.mjs — bench/run data's S8, the change stream: subscribers on many tenants, one writer.
//
//   node bench/s8.mjs --port P --prefix t --tenants 100 --subs 10 --keys FILE --api /api
//                     --table items --rate 200 --seconds 20 [--hub-pid PID] [--drain 3]
//                     [--ledger FILE]
//
// Opens SUBS Server-Sent Events streams per tenant (GET API/subscribe?tables=TABLE, each
// with its tenant's key and Host PREFIXd.localhost), waits until all are open, reads the
// hub's RSS before and after (PID's VmRSS), then inserts one row every 1/RATE s into the
// tenants in turn for SECONDS, each with an id that names its tenant and its sequence
// number (d * 1e6 + seq, so a misrouted event is seen by its id alone: the data API's event
// carries the ids, not the rows). Latency of a delivery = its receipt minus the moment just
// before the writer sent the insert (the commit lies between the two; the 201's arrival is
// recorded too). A stream answered 503 (the tenant's worker share busy) or 502 (tenancyd's
// listen queue full) is asked again after 100-300 ms, up to 30 times, and counted. After a drain it prints one JSON object. LEDGER gets "d 0 0 rows" lines,
// the rows acknowledged per tenant, for the persisted-rows check.
// Must not: talk to anything but 127.0.0.1:PORT, or run longer than its bounded waits.
import http from 'node:http';
import { readFileSync, writeFileSync } from 'node:fs';

const a = {};
for (let i = 2; i < process.argv.length; i += 2) a[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
const port = Number(a.port), pre = a.prefix || 't', nt = Number(a.tenants || 100);
const subs = Number(a.subs || 10), rate = Number(a.rate || 200), secs = Number(a.seconds || 20);
const api = a.api || '', table = a.table || 'items', drain = Number(a.drain || 3);
const keys = readFileSync(a.keys, 'utf8').split('\n');
// line d: "Authorization: Bearer KEY"; the header value is what follows the colon
const key = (d) => { const l = keys[d - 1] || ''; const i = l.indexOf(':'); return l.slice(i + 1).trim(); };
const now = () => performance.timeOrigin + performance.now();
const rss = () => {
  if (!a['hub-pid']) return null;
  try { return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${a['hub-pid']}/status`, 'utf8'))[1]); } catch { return null; }
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
const streams = [];   // {d, got: Map(id -> receive time), open, err, misrouted, dup, other}
let opened = 0, openErrors = 0, closedEarly = 0;

const openRetries = { 502: 0, 503: 0 };
function subscribe(d, s = null, attempt = 0) {
  if (!s) { s = { d, got: new Map(), open: false, misrouted: 0, dup: 0, other: 0, buf: '' }; streams.push(s); }
  const req = http.request({
    host: '127.0.0.1', port, method: 'GET', path: `${api}/subscribe?tables=${table}`, agent: false,
    headers: { Host: `${pre}${d}.localhost`, Authorization: key(d), Accept: 'text/event-stream' },
  }, (res) => {
    // 503 with Retry-After: the tenant's share of the workers is busy (10 streams of one
    // tenant asked at once); 502: nginx found tenancyd's listen queue full (1,000 connects at
    // once). Try again soon, as a reconnecting client would, a bounded number of times.
    if ((res.statusCode === 503 || res.statusCode === 502) && attempt < 30) {
      openRetries[res.statusCode]++; res.resume();
      setTimeout(() => subscribe(d, s, attempt + 1), 100 + Math.random() * 200);
      return;
    }
    if (res.statusCode !== 200) { openErrors++; s.err = `status ${res.statusCode}`; res.resume(); return; }
    s.open = true; opened++;
    res.setEncoding('utf8');
    res.on('data', (chunk) => {
      const t = now();
      s.buf += chunk;
      let i;
      while ((i = s.buf.indexOf('\n\n')) >= 0) {
        const ev = s.buf.slice(0, i); s.buf = s.buf.slice(i + 2);
        let type = 'message', data = '';
        for (const line of ev.split('\n')) {
          if (line.startsWith('event:')) type = line.slice(6).trim();
          else if (line.startsWith('data:')) data += line.slice(5).trim();
        }
        if (!data) continue;   // a heartbeat comment
        // the hub names the event by its channel; the data API's payload names the table
        let o = null;
        try { o = JSON.parse(data); } catch { o = null; }
        if (!o || o.table !== table || !Array.isArray(o.ids) || (type !== 'message' && type !== `table:${table}`)) { s.other++; continue; }
        const ids = o.ids;
        for (const id of ids) {
          if (Math.floor(id / 1e6) !== d) { s.misrouted++; continue; }
          if (s.got.has(id)) s.dup++; else s.got.set(id, t);
        }
      }
    });
    res.on('end', () => { if (!stopping) closedEarly++; s.open = false; });
  });
  req.on('error', (e) => { if (!stopping) { openErrors++; s.err = String(e.message); } });
  req.end();
  s.req = req;
}

let stopping = false;
const rss0 = rss();
for (let d = 1; d <= nt; d++) for (let k = 0; k < subs; k++) subscribe(d);
const total = nt * subs, t0open = now();
while (opened + openErrors < total && now() - t0open < 60000) await sleep(50);
const openSecs = (now() - t0open) / 1000;
await sleep(1000);   // settled, idle
const rssIdle = rss();

// the writer: open loop, one insert every 1000/rate ms, tenants in turn
const sent = new Map();   // id -> {d, t_send, t_ack, status}
let seq = 0, inflight = 0, acked = 0, failed = 0;
const ackedPer = new Array(nt + 1).fill(0);
function write(d, s) {
  const id = d * 1e6 + s;
  const body = JSON.stringify({ id, name: `s8-${d}-${s}`, n: s });
  const rec = { d, t_send: now(), t_ack: null, status: null };
  sent.set(id, rec);
  inflight++;
  const req = http.request({
    host: '127.0.0.1', port, method: 'POST', path: `${api}/${table}?select=id`, agent,
    headers: { Host: `${pre}${d}.localhost`, Authorization: key(d), 'Content-Type': 'application/json',
      Prefer: 'return=representation', 'Content-Length': Buffer.byteLength(body) },
  }, (res) => {
    res.resume();
    res.on('end', () => {
      rec.t_ack = now(); rec.status = res.statusCode; inflight--;
      if (res.statusCode >= 200 && res.statusCode < 300) { acked++; ackedPer[d]++; } else failed++;
    });
  });
  req.setTimeout(10000, () => req.destroy(new Error('timeout')));
  req.on('error', () => { if (rec.status === null) { rec.status = 0; inflight--; failed++; } });
  req.end(body);
}
const tw0 = now(), every = 1000 / rate, nwrites = Math.round(secs * rate);
for (let i = 0; i < nwrites; i++) {
  const due = tw0 + i * every;
  const wait = due - now();
  if (wait > 1) await sleep(wait);
  seq++;
  write(((i % nt) + 1), seq);
}
const writeSecs = (now() - tw0) / 1000;
const tdrain = now();
while (inflight > 0 && now() - tdrain < 15000) await sleep(20);
await sleep(drain * 1000);
const rssEnd = rss();
stopping = true;
const stillOpen = streams.filter((s) => s.open).length;
for (const s of streams) s.req.destroy();
agent.destroy();

// delivery: every acknowledged row of a tenant to each of its streams
const lat = [], latAck = [];
let expected = 0, received = 0, lost = 0, misrouted = 0, dup = 0, unknown = 0;
const perTenantIds = new Map();
for (const [id, r] of sent) {
  if (r.status >= 200 && r.status < 300) {
    if (!perTenantIds.has(r.d)) perTenantIds.set(r.d, []);
    perTenantIds.get(r.d).push(id);
  }
}
for (const s of streams) {
  misrouted += s.misrouted; dup += s.dup;
  const ids = perTenantIds.get(s.d) || [];
  for (const id of ids) {
    expected++;
    const t = s.got.get(id);
    if (t === undefined) { lost++; continue; }
    received++;
    const r = sent.get(id);
    lat.push(t - r.t_send);
    latAck.push(t - r.t_ack);
  }
  for (const id of s.got.keys()) if (!sent.has(id) || !(sent.get(id).status >= 200 && sent.get(id).status < 300)) unknown++;
}
const pct = (v, p) => { if (!v.length) return null; const x = [...v].sort((p1, p2) => p1 - p2); return Math.round(x[Math.min(x.length - 1, Math.ceil(p / 100 * x.length) - 1)] * 1000) / 1000; };
const wl = []; for (const r of sent.values()) if (r.t_ack !== null && r.status >= 200 && r.status < 300) wl.push(r.t_ack - r.t_send);
if (a.ledger) writeFileSync(a.ledger, ackedPer.map((c, d) => (d && c ? `${d} 0 0 ${c}` : null)).filter(Boolean).join('\n') + '\n');
console.log(JSON.stringify({
  tenants: nt, subscribers_per_tenant: subs, subscribers: total, opened, open_errors: openErrors, open_retries_503: openRetries[503], open_retries_502: openRetries[502],
  open_error_example: (streams.find((s) => s.err) || {}).err || null, open_s: Math.round(openSecs * 1000) / 1000,
  closed_early: closedEarly, still_open_at_end: stillOpen,
  rate_per_s: rate, writes: nwrites, write_s: Math.round(writeSecs * 1000) / 1000, acked, failed,
  write_ms: { p50: pct(wl, 50), p99: pct(wl, 99) },
  deliveries_expected: expected, received, lost, misrouted, duplicates: dup, unknown_ids: unknown,
  other_events: streams.reduce((x, s) => x + s.other, 0),
  latency_ms_from_send: { p50: pct(lat, 50), p95: pct(lat, 95), p99: pct(lat, 99), max: pct(lat, 100) },
  latency_ms_from_ack: { p50: pct(latAck, 50), p99: pct(latAck, 99) },
  hub_rss_kb: { before: rss0, idle: rssIdle, end: rssEnd },
  hub_bytes_per_idle_subscriber: (rss0 !== null && rssIdle !== null && opened === total) ? Math.round((rssIdle - rss0) * 1024 / total) : null,
}));
process.exit(0);

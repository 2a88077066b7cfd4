// sse.mjs — holds Server-Sent Events streams open with the npm `eventsource` client and
// writes what arrives, for tests/integration/stream.sh and stream_many.sh.
//
//   node sse.mjs --url URL --out FILE [--types a,b] [--count N] [--seconds S]
//                [--last-id N] [--header 'Name: value'] [--no-reconnect]
//
// Each stream appends lines to FILE: "open K", "event K ID TYPE DATA" (data lines joined by
// "|"), "error K STATUS|MESSAGE". K is the stream's number (0..N-1). The client reconnects
// as EventSource does (sending Last-Event-ID), unless --no-reconnect. After --seconds (10)
// it closes everything and prints one line: "opened=A events=B errors=C". Every wait is
// bounded; exit status 0, or 2 for a usage error. (Node's fetch sets Host from the URL: the
// tests name the tenant in the path, tenant.resolvers = path.)
// Must not: talk to anything but the given URL on loopback.
import { EventSource } from 'eventsource';
import { appendFileSync } from 'node:fs';

const args = {};
for (let i = 2; i < process.argv.length; i++) {
  const a = process.argv[i];
  if (!a.startsWith('--')) { console.error(`sse.mjs: unexpected ${a}`); process.exit(2); }
  const k = a.slice(2);
  if (k === 'no-reconnect') { args[k] = true; continue; }
  args[k] = process.argv[++i];
}
if (!args.url || !args.out) { console.error('sse.mjs: --url and --out are required'); process.exit(2); }
const count = Number(args.count || 1), seconds = Number(args.seconds || 10);
const types = (args.types || '').split(',').filter(Boolean).concat(['end', 'dropped', 'reset']);
let lines = [], opened = 0, events = 0, errors = 0;
const flush = () => { if (lines.length) { appendFileSync(args.out, lines.join('\n') + '\n'); lines = []; } };
const timer = setInterval(flush, 50);

const sources = [];
for (let k = 0; k < count; k++) {
  const es = new EventSource(args.url, {
    fetch: (input, init) => {
      const headers = new Headers(init.headers);
      if (args['last-id'] && !headers.has('last-event-id')) headers.set('last-event-id', args['last-id']);
      if (args.header) {
        const i = args.header.indexOf(':');
        headers.set(args.header.slice(0, i).trim(), args.header.slice(i + 1).trim());
      }
      return fetch(input, { ...init, headers });
    },
  });
  es.onopen = () => { opened++; lines.push(`open ${k}`); };
  const on = (ev) => {
    events++;
    lines.push(`event ${k} ${ev.lastEventId || '-'} ${ev.type} ${String(ev.data).split('\n').join('|')}`);
    if (ev.type === 'end' && args['no-reconnect']) es.close();
  };
  for (const t of types) es.addEventListener(t, on);
  es.onmessage = on;
  es.onerror = (e) => {
    errors++;
    lines.push(`error ${k} ${e.code || '-'} ${e.message || ''}`.trim());
    if (args['no-reconnect']) es.close();
  };
  sources.push(es);
}
setTimeout(() => {
  for (const es of sources) es.close();
  clearInterval(timer);
  flush();
  console.log(`opened=${opened} events=${events} errors=${errors}`);
  process.exit(0);
}, seconds * 1000);

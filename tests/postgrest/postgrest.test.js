// postgrest.test.js — the data API (apps/data) driven by PostgREST's own client,
// @supabase/postgrest-js, so that compatibility is judged by code nobody here wrote.
//
// tests/integration/data_postgrest.sh starts nginx and tenancyd, creates two tenants (their
// names in TENANT_A and TENANT_B), a table `todos` (title text unique, done boolean, prio
// integer) in each, a key for each and a row "only in b" in B's, then runs:
//   TENANT_A=a TENANT_B=b node postgrest.test.js PORT PREFIX KEY_A KEY_B
// Tenants are told apart by the Host header (a.localhost, b.localhost), which the fetch
// given to the client sets while it connects to 127.0.0.1.
'use strict';
const assert = require('node:assert/strict');
const http = require('node:http');
const { PostgrestClient } = require('@supabase/postgrest-js');

const [port, prefix, keyA, keyB] = process.argv.slice(2);
if (!keyB) {
  console.error('usage: node postgrest.test.js PORT PREFIX KEY_A KEY_B');
  process.exit(2);
}

// A fetch that sends every request to loopback with the tenant's Host header. Node's own
// fetch will not send a Host of our choosing, so this one speaks through node:http and
// hands the client a standard Response.
function fetchFor(host) {
  return (url, init = {}) => new Promise((resolve, reject) => {
    const u = new URL(url);
    const headers = Object.fromEntries(new Headers(init.headers || {}).entries());
    headers.host = host;
    const req = http.request({
      host: '127.0.0.1', port, method: init.method || 'GET',
      path: u.pathname + u.search, headers,
    }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const h = new Headers();
        for (const [k, v] of Object.entries(res.headers)) h.set(k, Array.isArray(v) ? v.join(', ') : v);
        const body = [204, 205, 304].includes(res.statusCode) ? null : Buffer.concat(chunks);
        resolve(new Response(body, { status: res.statusCode, statusText: res.statusMessage, headers: h }));
      });
    });
    req.on('error', reject);
    if (init.body != null) req.write(init.body);
    req.end();
  });
}

function client(tenant, key) {
  return new PostgrestClient(`http://${tenant}.localhost:${port}${prefix}`, {
    headers: { Authorization: `Bearer ${key}` },
    fetch: fetchFor(`${tenant}.localhost`),
  });
}

let failures = 0;
async function step(name, fn) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    failures++;
    console.log(`FAIL ${name}: ${e && e.stack ? e.stack : e}`);
  }
}

function ok(res) {
  assert.equal(res.error, null, `error: ${JSON.stringify(res.error)}`);
  return res;
}

// The tenants' names (their subdomains): a and b unless the caller says otherwise.
const nameA = process.env.TENANT_A || 'a';
const nameB = process.env.TENANT_B || 'b';

async function main() {
  const a = client(nameA, keyA);
  const b = client(nameB, keyB);

  await step('insert one row and get it back (return=representation)', async () => {
    const res = ok(await a.from('todos').insert({ title: 'alpha of a', done: false, prio: 1 })
      .select('title,done,prio'));
    assert.equal(res.status, 201);
    assert.deepEqual(res.data, [{ title: 'alpha of a', done: false, prio: 1 }]);
  });

  await step('bulk insert an array', async () => {
    const rows = [
      { title: 'beta of a', done: true, prio: 2 },
      { title: 'gamma of a', done: false, prio: 3 },
      { title: 'delta of a', done: false, prio: null },
    ];
    const res = ok(await a.from('todos').insert(rows));
    assert.equal(res.status, 201);
    assert.equal(res.data, null);
  });

  await step('select with filters, order and range, count exact', async () => {
    const res = ok(await a.from('todos').select('title,prio', { count: 'exact' })
      .eq('done', false).order('prio', { ascending: false, nullsFirst: false }).range(0, 1));
    assert.deepEqual(res.data, [{ title: 'gamma of a', prio: 3 }, { title: 'alpha of a', prio: 1 }]);
    assert.equal(res.count, 3);
  });

  await step('in, like, ilike, is, neq, gt, or', async () => {
    let res = ok(await a.from('todos').select('title').in('prio', [1, 2]).order('prio'));
    assert.deepEqual(res.data.map((r) => r.title), ['alpha of a', 'beta of a']);
    res = ok(await a.from('todos').select('title').like('title', '*ta of*').order('title'));
    assert.deepEqual(res.data.map((r) => r.title), ['beta of a', 'delta of a']);
    res = ok(await a.from('todos').select('title').ilike('title', 'ALPHA*'));
    assert.deepEqual(res.data.map((r) => r.title), ['alpha of a']);
    res = ok(await a.from('todos').select('title').is('prio', null));
    assert.deepEqual(res.data.map((r) => r.title), ['delta of a']);
    res = ok(await a.from('todos').select('title').neq('done', false).gt('prio', 1));
    assert.deepEqual(res.data.map((r) => r.title), ['beta of a']);
    res = ok(await a.from('todos').select('title').or('prio.eq.3,title.eq.alpha of a').order('title'));
    assert.deepEqual(res.data.map((r) => r.title), ['alpha of a', 'gamma of a']);
  });

  await step('single() gives one object', async () => {
    const res = ok(await a.from('todos').select('title,done').eq('prio', 2).single());
    assert.deepEqual(res.data, { title: 'beta of a', done: true });
  });

  await step('update with a filter, returning the rows', async () => {
    const res = ok(await a.from('todos').update({ done: true }).eq('title', 'gamma of a')
      .select('title,done'));
    assert.deepEqual(res.data, [{ title: 'gamma of a', done: true }]);
  });

  await step('upsert merges on a unique column', async () => {
    const res = ok(await a.from('todos').upsert({ title: 'alpha of a', done: true, prio: 9 },
      { onConflict: 'title' }).select('title,done,prio'));
    assert.deepEqual(res.data, [{ title: 'alpha of a', done: true, prio: 9 }]);
    const all = ok(await a.from('todos').select('title', { count: 'exact', head: true }));
    assert.equal(all.count, 4);
  });

  await step('delete with a filter', async () => {
    const res = ok(await a.from('todos').delete().eq('title', 'delta of a').select('title'));
    assert.deepEqual(res.data, [{ title: 'delta of a' }]);
    const left = ok(await a.from('todos').select('title').order('title'));
    assert.deepEqual(left.data.map((r) => r.title), ['alpha of a', 'beta of a', 'gamma of a']);
  });

  await step("tenant b sees only its own rows", async () => {
    const res = ok(await b.from('todos').select('title'));
    assert.deepEqual(res.data, [{ title: 'only in b' }]);
  });

  await step("a's key is refused at b's host", async () => {
    const wrong = new PostgrestClient(`http://${nameB}.localhost:${port}${prefix}`, {
      headers: { Authorization: `Bearer ${keyA}` },
      fetch: fetchFor(`${nameB}.localhost`),
    });
    const res = await wrong.from('todos').select('title');
    assert.equal(res.status, 401);
    assert.equal(res.data, null);
  });

  await step('an unknown column is a clear error, not a 500', async () => {
    const res = await a.from('todos').select('nope');
    assert.equal(res.status, 400);
    assert.ok(res.error && res.error.code, JSON.stringify(res.error));
  });

  if (failures > 0) {
    console.log(`${failures} step(s) failed`);
    process.exit(1);
  }
  console.log('all steps passed');
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});

// End-to-end test of `outrigger inspect` in a real browser (run it through scripts/inspect-e2e,
// which installs playwright-core and checks for Chromium).
//
//   node tests/e2e/inspect.mjs [path-to-outrigger-binary]
//
// 1. Builds a database by driving the real sidecar over JSON-RPC (scripted provider): a chat
//    whose user message holds an XSS string, with a read_file tool call; a second turn; a fork
//    of it ("try B", before the last user message) with a turn whose tool call fails; a second
//    fork ("try C"); an unrelated chat. Then shuts the sidecar down.
// 2. Starts `outrigger inspect --storage-path <db>` and reads the URL from its stdout.
// 3. Drives headless Chromium (playwright-core) through the page and checks the session list,
//    search, the branch tree, the transcript (folded tool calls, the XSS text as text), the
//    traces and the timeline, reload/back with the URL hash, and that there are no console
//    errors, page errors, dialogs or CSP violations.
// 4. Writes a full-page screenshot (1400x900) to target/inspect-e2e/inspector.png and copies it
//    to docs/images/inspector.png.
// 5. Starts a live sidecar on the same database beside the inspector and checks that its new
//    chat shows up on refresh (the inspector takes no write lease).
// Exits 1 with a message naming the failed check. Every child process is killed at the end.

import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const BIN = path.resolve(process.argv[2] || path.join(REPO, 'target/debug/outrigger'));
const PLAYWRIGHT = process.env.INSPECT_E2E_PLAYWRIGHT || path.join(REPO, 'target/npm-e2e/node_modules/playwright-core/index.js');
const CHROMIUM = process.env.INSPECT_E2E_CHROMIUM || '/usr/bin/chromium';
const SHOT = path.join(REPO, 'target/inspect-e2e/inspector.png');
const DOC_SHOT = path.join(REPO, 'docs/images/inspector.png');
const XSS = '<img src=x onerror=alert(1)>';
const FORK = 'chat_demo:try B'; // a record id with ':' and a space: the URLs must encode it
const FORK_C = 'chat_demo:try C';
const WAIT_MS = 15000;

const t0 = Date.now();
const log = (msg) => process.stderr.write(`[inspect-e2e ${((Date.now() - t0) / 1000).toFixed(1).padStart(5)}s] ${msg}\n`);
class CheckFailed extends Error {}
function check(cond, msg) {
  if (!cond) throw new CheckFailed(msg);
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---- child processes ----
const children = new Set();
function start(args, env, cwd) {
  const p = spawn(BIN, args, { env, cwd, stdio: ['pipe', 'pipe', 'pipe'] });
  p.stderrText = '';
  p.stderr.on('data', (d) => { p.stderrText = (p.stderrText + d).slice(-8000); });
  p.exited = new Promise((resolve) => p.on('exit', (code, signal) => resolve({ code, signal })));
  p.on('error', (e) => { p.spawnError = e; });
  children.add(p);
  p.exited.then(() => children.delete(p));
  return p;
}
async function stop(p, signal = 'SIGTERM', ms = 5000) {
  if (!children.has(p)) return p.exited;
  p.kill(signal);
  const r = await Promise.race([p.exited, sleep(ms).then(() => null)]);
  if (r) return r;
  p.kill('SIGKILL');
  return p.exited;
}

/** A sidecar driven over JSON-RPC lines on stdin/stdout. */
class Sidecar {
  constructor(db, env, cwd) {
    this.p = start(['--storage-path', db], env, cwd);
    this.backlog = [];
    this.waiters = [];
    this.nextId = 1;
    createInterface({ input: this.p.stdout }).on('line', (line) => {
      let v;
      try { v = JSON.parse(line); } catch { return; }
      const i = this.waiters.findIndex((w) => w.pred(v));
      if (i < 0) return void this.backlog.push(v);
      const [w] = this.waiters.splice(i, 1);
      clearTimeout(w.timer);
      w.resolve(v);
    });
  }
  waitFor(pred, what, ms = WAIT_MS) {
    const i = this.backlog.findIndex(pred);
    if (i >= 0) return Promise.resolve(this.backlog.splice(i, 1)[0]);
    return new Promise((resolve, reject) => {
      const w = { pred, resolve };
      w.timer = setTimeout(() => {
        this.waiters.splice(this.waiters.indexOf(w), 1);
        reject(new CheckFailed(`sidecar: no ${what} within ${ms} ms; its stderr ends:\n${this.p.stderrText.slice(-1500)}`));
      }, ms);
      this.waiters.push(w);
    });
  }
  ready() { return this.waitFor((v) => v.method === 'lifecycle.ready', 'lifecycle.ready notification'); }
  async call(method, params) {
    const id = this.nextId++;
    this.p.stdin.write(JSON.stringify({ jsonrpc: '2.0', id, method, params }) + '\n');
    const r = await this.waitFor((v) => v.id === id && !v.method, `response to ${method}`);
    check(!r.error, `sidecar: ${method} failed: ${JSON.stringify(r.error)}`);
    return r.result;
  }
  async turn(params) {
    const { streamId } = await this.call('agent.chat.stream', params);
    const done = await this.waitFor((v) => v.method === 'stream.done' && v.params?.streamId === streamId, `stream.done for ${params.recordId}`);
    check(done.params.status === 'completed', `sidecar: the turn on ${params.recordId} ended ${JSON.stringify(done.params)}`);
    return done.params;
  }
  async shutdown() {
    await this.call('system.shutdown', {});
    const r = await Promise.race([this.p.exited, sleep(10000).then(() => null)]);
    check(r, 'sidecar: did not exit within 10 s of system.shutdown');
    check(r.code === 0, `sidecar: exited ${JSON.stringify(r)} after system.shutdown`);
  }
}

// ---- 1. the database ----
async function buildDatabase(dir, env) {
  const ws = path.join(dir, 'workspace');
  fs.mkdirSync(ws);
  fs.writeFileSync(path.join(ws, 'notes.txt'), 'Ship the inspector on Friday.\nRemember: the store is read-only.\n');
  const db = path.join(dir, 'outrigger.db');
  const s = new Sidecar(db, env, ws);
  await s.ready();
  // gpt-4o-mini is priced in the catalog, so the llm spans carry costUsd.
  const base = { provider: 'scripted', model: 'gpt-4o-mini', cwd: ws };
  const usage = (promptTokens, completionTokens) => ({ promptTokens, completionTokens });
  await s.turn({ ...base, recordId: 'chat_demo',
    messages: [{ role: 'user', content: `What is in notes.txt? And does this render as text: ${XSS}` }],
    script: [
      { delayMs: 30, text: 'Let me read it.', toolCalls: [{ id: 'c1', name: 'read_file', arguments: { path: 'notes.txt' } }], usage: usage(1250, 38) },
      { delayMs: 40, text: 'notes.txt says to ship the inspector on Friday, and that the store is read-only. The tag above is just text.', usage: usage(1420, 61) },
    ] });
  await s.turn({ ...base, recordId: 'chat_demo', fromRecord: true,
    messages: [{ role: 'user', content: 'Summarise it in one line.' }],
    script: [{ delayMs: 20, text: 'Ship Friday; read-only store.', usage: usage(1500, 12) }] });
  const c = await s.call('agent.session.fork', { recordId: 'chat_demo', untilSeq: 0, label: 'try C', newRecordId: FORK_C });
  check(c.recordId === FORK_C, `agent.session.fork answered ${JSON.stringify(c)}`);
  const b = await s.call('agent.session.fork', { recordId: 'chat_demo', beforeLastUser: true, label: 'try B', newRecordId: FORK });
  check(b.recordId === FORK && b.sourceRecordId === 'chat_demo', `agent.session.fork answered ${JSON.stringify(b)}`);
  // The fork re-asks the last user message: a failing tool call, then the answer.
  await s.turn({ ...base, recordId: FORK, resume: true, messages: [],
    script: [
      { delayMs: 25, toolCalls: [{ id: 'c2', name: 'read_file', arguments: { path: 'missing.txt' } }], usage: usage(1510, 20) },
      { delayMs: 30, text: 'In one line: ship the read-only inspector on Friday.', usage: usage(1580, 15) },
    ] });
  await s.turn({ ...base, recordId: 'chat_other', messages: [{ role: 'user', content: 'Name an animal with stripes.' }],
    script: [{ text: 'A zebra.', usage: usage(20, 3) }] });
  await s.shutdown();
  return { db, ws };
}

// ---- 2. the inspector ----
async function startInspector(db, env) {
  const p = start(['inspect', '--storage-path', db], env, os.tmpdir());
  const line = await Promise.race([
    new Promise((resolve) => createInterface({ input: p.stdout }).once('line', resolve)),
    p.exited.then((r) => { throw new CheckFailed(`inspect exited ${JSON.stringify(r)} before printing its URL; stderr:\n${p.stderrText}`); }),
    sleep(WAIT_MS).then(() => { throw new CheckFailed(`inspect printed no URL on stdout within ${WAIT_MS} ms; stderr:\n${p.stderrText}`); }),
  ]);
  check(/^http:\/\/127\.0\.0\.1:\d+\/\?token=[0-9a-f]{32}$/.test(line), `inspect's stdout line is not the URL: ${JSON.stringify(line)}`);
  return { p, url: line };
}

/** A few HTTP checks of the contract the page relies on. */
async function checkHttp(url) {
  const u = new URL(url);
  const token = u.searchParams.get('token');
  const origin = u.origin;
  const get = (p, headers = {}) => fetch(origin + p, { headers });
  const auth = { Authorization: `Bearer ${token}` };
  let r = await get('/api/records');
  check(r.status === 401, `GET /api/records without a token: expected 401, got ${r.status}`);
  r = await get('/api/records', { Authorization: 'Bearer 00000000000000000000000000000000' });
  check(r.status === 403, `GET /api/records with a wrong token: expected 403, got ${r.status}`);
  r = await get('/?token=' + token);
  check(r.status === 200, `GET /?token=…: expected 200, got ${r.status}`);
  const csp = r.headers.get('content-security-policy') || '';
  check(/script-src 'self'/.test(csp) && /style-src 'self'/.test(csp), `GET / has no strict CSP header: ${JSON.stringify(csp)}`);
  const html = await r.text();
  check(html.includes(`app.js?token=${token}`) && !html.includes('__TOKEN__'), 'GET / did not replace __TOKEN__ with the token');
  r = await get(`/api/records/${encodeURIComponent(FORK)}/messages`, auth);
  const body = await r.text();
  check(r.status === 200, `GET /api/records/${encodeURIComponent(FORK)}/messages: expected 200, got ${r.status} ${body}`);
  const m = JSON.parse(body);
  check(m.recordId === FORK && Array.isArray(m.messages), `GET …/messages of the fork answered ${JSON.stringify(m).slice(0, 300)}`);
}

// ---- 3. the browser ----
async function browse(url, env, db, ws) {
  const { chromium } = createRequire(import.meta.url)(PLAYWRIGHT);
  const browser = await chromium.launch({
    executablePath: CHROMIUM, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  try {
    const context = await browser.newContext({ viewport: { width: 1400, height: 900 }, colorScheme: 'light', deviceScaleFactor: 1 });
    const page = await context.newPage();
    const problems = [];
    page.on('console', (m) => {
      if (m.type() === 'error' || /Content Security Policy/i.test(m.text())) problems.push(`console ${m.type()}: ${m.text()}`);
    });
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    page.on('dialog', (d) => { problems.push(`dialog (${d.type()}): ${d.message()}`); d.dismiss().catch(() => {}); });
    page.on('response', (r) => { if (r.status() >= 400) problems.push(`HTTP ${r.status()} for ${r.url()}`); });
    // Runs outside the page's CSP (a DevTools init script): records violations the console might not.
    await page.addInitScript(() => {
      window.__cspViolations = [];
      document.addEventListener('securitypolicyviolation', (e) => window.__cspViolations.push(`${e.violatedDirective} blocked ${e.blockedURI || 'inline'}`));
    });

    async function clean(when) {
      const csp = await page.evaluate(() => window.__cspViolations || []);
      check(csp.length === 0, `CSP violations ${when}: ${csp.join('; ')}`);
      check(problems.length === 0, `the page reported problems ${when}:\n  ${problems.join('\n  ')}`);
    }
    /** Polls `fn` in the page until it returns {ok: true}; fails with what it saw last. */
    async function until(desc, fn, arg, ms = WAIT_MS) {
      const start = Date.now();
      let last;
      for (;;) {
        last = await page.evaluate(fn, arg);
        if (last?.ok) return last;
        if (Date.now() - start > ms) throw new CheckFailed(`${desc} (within ${ms} ms; last seen: ${JSON.stringify(last?.seen ?? last)})`);
        await sleep(100);
      }
    }

    await page.goto(url);
    log(`opened ${url.replace(/token=\w+/, 'token=…')}`);

    // The session list: every record, the forks marked.
    await until('the session list shows chat_demo, both forks and chat_other', (want) => {
      const seen = [...document.querySelectorAll('[data-testid=session-list] [data-testid=session-item]')].map((e) => e.dataset.recordId);
      return { ok: want.every((w) => seen.includes(w)), seen };
    }, ['chat_demo', FORK, FORK_C, 'chat_other']);
    const marks = await page.evaluate(() => Object.fromEntries([...document.querySelectorAll('[data-testid=session-item]')]
      .map((e) => [e.dataset.recordId, !!e.querySelector('.badge.fork')])));
    check(marks[FORK] && marks[FORK_C] && !marks.chat_demo && !marks.chat_other, `fork markers: expected on the two forks only, got ${JSON.stringify(marks)}`);
    log('✓ session list: 4 records, forks marked');

    // Search narrows the list (debounced, server-side through ?q=).
    await page.fill('[data-testid=search]', 'zebra');
    await until('searching "zebra" leaves only chat_other', () => {
      const seen = [...document.querySelectorAll('[data-testid=session-item]')].map((e) => e.dataset.recordId);
      return { ok: seen.length === 1 && seen[0] === 'chat_other', seen };
    });
    await page.fill('[data-testid=search]', 'TRY b');
    await until('searching "TRY b" (a fork label, any case) lists the fork and not chat_other', (fork) => {
      const seen = [...document.querySelectorAll('[data-testid=session-item]')].map((e) => e.dataset.recordId);
      return { ok: seen.includes(fork) && !seen.includes('chat_other'), seen };
    }, FORK);
    await page.fill('[data-testid=search]', '');
    await until('clearing the search lists every record again', () => ({ ok: document.querySelectorAll('[data-testid=session-item]').length >= 4 }));
    log('✓ search narrows the list');

    // Open the root chat, then the fork through the tree; Back returns to the root.
    await page.click('[data-testid=session-item][data-record-id="chat_demo"]');
    // Six stored messages; the tool result is shown inside its call, not as a message of its own.
    await until('opening chat_demo shows its transcript', () => {
      const h = new URLSearchParams(location.hash.slice(1));
      const roles = [...document.querySelectorAll('[data-testid=transcript] [data-testid=message]')].map((m) => m.dataset.role).join();
      return { ok: h.get('record') === 'chat_demo' && roles === 'user,assistant,assistant,user,assistant', seen: { hash: location.hash, roles } };
    });
    await until('chat_demo has two traces, the newest selected, its timeline drawn', () => {
      const items = document.querySelectorAll('[data-testid=trace-item]');
      const tl = document.querySelector('[data-testid=timeline]');
      return { ok: items.length === 2 && tl.dataset.traceId === items[1].dataset.traceId && !!tl.querySelector('[data-testid=span-bar]'),
        seen: { traces: items.length, timeline: tl.dataset.traceId } };
    });
    // The first turn's trace: llm, tool (read_file ok), llm.
    await page.click('[data-testid=trace-item] >> nth=0');
    const rootTrace = await until('selecting chat_demo\'s first trace shows llm and tool bars', () => {
      const first = document.querySelector('[data-testid=trace-item]').dataset.traceId;
      const tl = document.querySelector('[data-testid=timeline]');
      const bars = [...tl.querySelectorAll('[data-testid=span-bar]')].map((b) => `${b.dataset.kind}:${b.dataset.status}`);
      const h = new URLSearchParams(location.hash.slice(1));
      return { ok: tl.dataset.traceId === first && h.get('trace') === first && bars.join() === 'llm:ok,tool:ok,llm:ok', seen: { bars, hash: location.hash }, first };
    });
    log('✓ chat_demo: transcript, 2 traces, timeline llm/tool/llm');

    await page.click(`[data-testid=branch-tree] [data-testid=tree-node][data-record-id="${FORK}"]`);
    await until('clicking the fork in the tree opens it', (fork) => ({ ok: new URLSearchParams(location.hash.slice(1)).get('record') === fork
      && document.querySelector('[data-testid=session-item].selected')?.dataset.recordId === fork, seen: location.hash }), FORK);
    await page.goBack();
    await until('Back returns to chat_demo with the trace it showed', (trace) => {
      const h = new URLSearchParams(location.hash.slice(1));
      const tl = document.querySelector('[data-testid=timeline]');
      return { ok: h.get('record') === 'chat_demo' && h.get('trace') === trace && tl.dataset.traceId === trace
        && document.querySelectorAll('[data-testid=message]').length === 5, seen: { hash: location.hash, timeline: tl.dataset.traceId } };
    }, rootTrace.first);
    log('✓ tree click and Back follow the URL hash');

    // The fork, from the session list.
    await page.click(`[data-testid=session-item][data-record-id="${FORK}"]`);
    await until('the fork\'s tree shows the root and both branches, the fork\'s path active', ({ fork, forkC }) => {
      const nodes = Object.fromEntries([...document.querySelectorAll('[data-testid=branch-tree] svg [data-testid=tree-node]')]
        .map((n) => [n.dataset.recordId, n.dataset.active]));
      const edges = document.querySelectorAll('[data-testid=branch-tree] svg path').length;
      return { ok: Object.keys(nodes).length === 3 && nodes.chat_demo === 'true' && nodes[fork] === 'true' && nodes[forkC] === 'false' && edges === 2,
        seen: { nodes, edges } };
    }, { fork: FORK, forkC: FORK_C });
    log('✓ branch tree: root + 2 branches, active path root → try B');

    const tr = await until('the fork\'s transcript: messages with roles, tool calls folded', () => {
      const msgs = [...document.querySelectorAll('[data-testid=transcript] [data-testid=message]')];
      const calls = [...document.querySelectorAll('[data-testid=transcript] [data-testid=tool-call]')];
      const roles = msgs.map((m) => m.dataset.role);
      return { ok: msgs.length >= 6 && calls.length === 2 && roles[0] === 'user' && roles.includes('assistant'),
        seen: { roles, calls: calls.length }, closed: calls.map((c) => c.tagName === 'DETAILS' && !c.open) };
    });
    check(tr.closed.every(Boolean), `tool calls must be folded (<details> closed) by default: ${JSON.stringify(tr.closed)}`);
    const xss = await page.evaluate((x) => ({
      text: [...document.querySelectorAll('[data-testid=message][data-role=user]')].some((m) => m.textContent.includes(x)),
      imgs: document.querySelectorAll('img').length,
    }), XSS);
    check(xss.text, `the user message's ${XSS} must show as literal text in the transcript`);
    check(xss.imgs === 0, `the transcript's ${XSS} created ${xss.imgs} <img> element(s)`);
    // Unfold the first call: arguments and the result, pretty-printed.
    await page.click('[data-testid=tool-call] >> nth=0 >> summary');
    const open = await page.evaluate(() => {
      const d = document.querySelector('[data-testid=tool-call]');
      return { open: d.open, text: d.textContent };
    });
    check(open.open && open.text.includes('"path": "notes.txt"') && open.text.includes('Ship the inspector on Friday'),
      `an unfolded tool call shows its pretty-printed arguments and result: ${JSON.stringify(open).slice(0, 400)}`);
    await page.click('[data-testid=tool-call] >> nth=0 >> summary');
    log('✓ transcript: roles, tool calls folded, XSS text inert');

    // The fork's trace: llm ok, read_file error (with its message), llm ok.
    await page.click('[data-testid=trace-item] >> nth=0');
    const forkTrace = await until('the fork\'s timeline: an llm bar, a red tool bar with its error', () => {
      const tl = document.querySelector('[data-testid=timeline]');
      const item = document.querySelector('[data-testid=trace-item]');
      const bars = [...tl.querySelectorAll('[data-testid=span-bar]')].map((b) => `${b.dataset.kind}:${b.dataset.status}`);
      const red = tl.querySelector('[data-testid=span-bar][data-kind=tool][data-status=error]');
      return { ok: tl.dataset.traceId === item.dataset.traceId && bars.includes('llm:ok') && !!red && tl.textContent.includes('missing.txt')
        && /tok/.test(tl.textContent) && /\$0\.000/.test(tl.textContent), seen: { bars, text: tl.textContent.slice(0, 300) }, id: item.dataset.traceId };
    });
    const colors = await page.evaluate(() => Object.fromEntries(['llm', 'tool'].map((k) => [k,
      getComputedStyle(document.querySelector(`[data-testid=span-bar][data-kind=${k}][data-status]`)).backgroundColor])));
    check(colors.llm !== colors.tool, `llm and tool bars must differ in colour: ${JSON.stringify(colors)}`);
    log('✓ timeline: llm and tool bars, the error span red with its message');

    // Reload keeps the selection.
    await page.reload();
    await until('after a reload the fork and its trace are still selected', ({ fork, trace }) => {
      const tl = document.querySelector('[data-testid=timeline]');
      return { ok: document.querySelector('[data-testid=session-item].selected')?.dataset.recordId === fork && tl?.dataset.traceId === trace
        && !!tl.querySelector('[data-testid=span-bar]'), seen: location.hash };
    }, { fork: FORK, trace: forkTrace.id });
    log('✓ reload keeps #record=…&trace=…');

    await clean('before the screenshot');
    await page.evaluate(() => document.fonts.ready);
    fs.mkdirSync(path.dirname(SHOT), { recursive: true });
    await page.screenshot({ path: SHOT, fullPage: true });
    fs.mkdirSync(path.dirname(DOC_SHOT), { recursive: true });
    fs.copyFileSync(SHOT, DOC_SHOT);
    log(`✓ screenshot: ${path.relative(REPO, SHOT)} (copied to ${path.relative(REPO, DOC_SHOT)})`);

    // A live sidecar beside the inspector: its new chat appears on refresh.
    const live = new Sidecar(db, env, ws);
    try {
      await live.ready();
      await live.turn({ provider: 'scripted', model: 'm', cwd: ws, recordId: 'chat_live',
        messages: [{ role: 'user', content: 'Written while the inspector runs.' }], script: [{ text: 'Seen.' }] });
      await page.click('#refresh');
      await until('a chat written by a live sidecar appears after Refresh', () => {
        const seen = [...document.querySelectorAll('[data-testid=session-item]')].map((e) => e.dataset.recordId);
        return { ok: seen[0] === 'chat_live', seen };
      });
      await live.shutdown();
    } finally {
      await stop(live.p);
    }
    log('✓ a live sidecar writes beside the inspector; Refresh shows its chat');

    await clean('after Refresh');
    log('✓ no console errors, page errors, dialogs, failed requests or CSP violations');
  } catch (e) {
    const shot = path.join(path.dirname(SHOT), 'failure.png');
    fs.mkdirSync(path.dirname(shot), { recursive: true });
    for (const p of browser.contexts().flatMap((c) => c.pages())) await p.screenshot({ path: shot, fullPage: true }).catch(() => {});
    if (fs.existsSync(shot)) log(`the page at the failure: ${path.relative(REPO, shot)}`);
    throw e;
  } finally {
    await browser.close().catch(() => {});
  }
}

async function main() {
  check(fs.existsSync(BIN), `no outrigger binary at ${BIN}; build it (cargo build --bin outrigger) or pass its path`);
  check(fs.existsSync(PLAYWRIGHT), `playwright-core is not installed at ${PLAYWRIGHT}; run scripts/inspect-e2e`);
  check(fs.existsSync(CHROMIUM), `no Chromium at ${CHROMIUM}; run scripts/inspect-e2e (it installs Debian's chromium)`);
  fs.rmSync(path.join(path.dirname(SHOT), 'failure.png'), { force: true });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'outrigger-inspect-e2e-'));
  const env = { PATH: process.env.PATH || '/usr/bin:/bin', HOME: dir, OUTRIGGER_HOME: dir };
  try {
    const { db, ws } = await buildDatabase(dir, env);
    log(`✓ database built by the sidecar: ${db}`);
    const insp = await startInspector(db, env);
    log(`✓ inspect is listening: ${insp.url.replace(/token=\w+/, 'token=…')}`);
    await checkHttp(insp.url);
    log('✓ HTTP: 401/403 without/with a wrong token, CSP, token substitution, encoded record ids');
    await browse(insp.url, env, db, ws);
    const r = await stop(insp.p);
    check(r.code === 0, `inspect exited ${JSON.stringify(r)} on SIGTERM (expected 0); stderr:\n${insp.p.stderrText}`);
    log('✓ inspect exits 0 on SIGTERM');
  } finally {
    await Promise.all([...children].map((p) => stop(p, 'SIGKILL')));
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

setTimeout(() => {
  process.stderr.write('inspect-e2e: FAILED: the test did not finish within 90 s\n');
  for (const p of children) p.kill('SIGKILL');
  process.exit(1);
}, 90000).unref();
main().then(() => {
  log('PASS');
  process.exit(0);
}, (e) => {
  process.stderr.write(`inspect-e2e: FAILED: ${e instanceof CheckFailed ? e.message : e.stack || e}\n`);
  process.exit(1);
});

// outrigger inspect: a read-only view of the durable store. Plain DOM, no framework.
// Every piece of stored data reaches the page through textContent / createTextNode only:
// transcripts are untrusted text.
'use strict';
(() => {
  const TOKEN = new URLSearchParams(location.search).get('token') || '';
  const $ = (id) => document.getElementById(id);
  const enc = encodeURIComponent;
  const NS = 'http://www.w3.org/2000/svg';

  // ---- DOM helpers (never innerHTML) ----
  function attrs(el, props) {
    for (const [k, v] of Object.entries(props || {})) {
      if (v == null || v === false) continue;
      if (k === 'class') el.setAttribute('class', v);
      else if (k === 'text') el.textContent = String(v);
      else if (k === 'testid') el.setAttribute('data-testid', v);
      else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
    return el;
  }
  function h(tag, props, ...kids) {
    const el = attrs(document.createElement(tag), props);
    for (const c of kids.flat()) if (c != null && c !== false) el.append(c instanceof Node ? c : String(c));
    return el;
  }
  function s(tag, props, ...kids) {
    const el = attrs(document.createElementNS(NS, tag), props);
    for (const c of kids.flat()) if (c != null && c !== false) el.append(c instanceof Node ? c : String(c));
    return el;
  }

  // ---- formatting ----
  const nf = new Intl.NumberFormat();
  const num = (n) => nf.format(n);
  const plural = (n, one, many = one + 's') => `${num(n)} ${n === 1 ? one : many}`;
  const clip = (t, n) => (t.length > n ? t.slice(0, n - 1) + '…' : t);
  function ms(n) {
    if (n == null || !isFinite(n)) return '–';
    if (n < 1000) return `${Math.round(n)} ms`;
    if (n < 60000) return `${(n / 1000).toFixed(n < 10000 ? 2 : 1)} s`;
    const m = Math.floor(n / 60000);
    return `${m}m ${String(Math.round((n % 60000) / 1000)).padStart(2, '0')}s`;
  }
  function usd(n) {
    if (typeof n !== 'number') return null;
    return '$' + (n >= 0.01 ? n.toFixed(4) : n.toPrecision(2));
  }
  function when(v) {
    const d = new Date(v);
    return isNaN(d) ? String(v ?? '') : d.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
  }
  function ago(v) {
    const d = new Date(v);
    if (isNaN(d)) return '';
    const sec = (Date.now() - d) / 1000;
    if (sec < 45) return 'just now';
    if (sec < 3600) return `${Math.round(sec / 60)} min ago`;
    if (sec < 86400) return `${Math.round(sec / 3600)} h ago`;
    if (sec < 86400 * 30) return `${Math.round(sec / 86400)} d ago`;
    return d.toLocaleDateString();
  }
  function parseJSON(t) {
    if (typeof t !== 'string') return undefined;
    try { return JSON.parse(t); } catch { return undefined; }
  }
  const pretty = (v) => (typeof v === 'string' ? v : JSON.stringify(v, null, 2));
  function argsPreview(a) {
    if (a === undefined) return '';
    if (a && typeof a === 'object' && !Array.isArray(a)) {
      return clip(Object.entries(a).map(([k, v]) => `${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`).join(', '), 90);
    }
    return clip(typeof a === 'string' ? a : JSON.stringify(a) ?? '', 90);
  }

  // ---- API ----
  class ApiError extends Error {
    constructor(status, message) { super(message); this.status = status; }
  }
  async function api(path) {
    let r;
    try {
      r = await fetch(path, { headers: { Authorization: `Bearer ${TOKEN}` }, cache: 'no-store' });
    } catch (e) {
      throw new ApiError(0, 'The inspector is not reachable (was `outrigger inspect` stopped?)');
    }
    let body = null;
    try { body = await r.json(); } catch { /* not JSON */ }
    if (!r.ok) throw new ApiError(r.status, body?.error?.message || `HTTP ${r.status}`);
    return body;
  }
  function banner(err) {
    const b = $('banner');
    if (!err) { b.hidden = true; b.textContent = ''; return; }
    const hint = err.status === 401 || err.status === 403 ? ' — open the URL printed by `outrigger inspect` (it carries the token).' : '';
    b.textContent = `${err.status ? err.status + ': ' : ''}${err.message}${hint}`;
    b.hidden = false;
  }

  // ---- state and URL hash (#record=<id>&trace=<id>) ----
  const st = { q: '', offset: 0, records: [], truncated: false, recordId: null, traceId: null,
    tree: null, traces: [], listSeq: 0, recSeq: 0, traceSeq: 0, poll: 0 };
  function readHash() {
    const p = new URLSearchParams(location.hash.slice(1));
    return { record: p.get('record'), trace: p.get('trace') };
  }
  function setHash(record, trace, replace) {
    const p = new URLSearchParams();
    if (record) p.set('record', record);
    if (trace) p.set('trace', trace);
    const next = '#' + p.toString();
    if (next === location.hash) return;
    if (replace) history.replaceState(null, '', next);
    else location.hash = next;
  }
  function route() {
    const { record, trace } = readHash();
    if (!record) return showEmpty();
    if (record !== st.recordId) openRecord(record, trace);
    else if (trace && trace !== st.traceId) openTrace(trace);
  }

  // ---- session list ----
  async function loadList(more) {
    const seq = ++st.listSeq;
    const p = new URLSearchParams({ limit: '50', offset: String(more ? st.offset : 0) });
    if (st.q) p.set('q', st.q);
    $('list-status').textContent = 'Loading…';
    try {
      const r = await api(`/api/records?${p}`);
      if (seq !== st.listSeq) return;
      st.records = more ? st.records.concat(r.records) : r.records;
      st.offset = st.records.length;
      st.truncated = !!r.truncated;
      banner(null);
      renderList();
    } catch (e) {
      if (seq === st.listSeq) { $('list-status').textContent = ''; banner(e); }
    }
  }
  function forkBadge(r) {
    return h('span', { class: 'badge fork', title: `fork of ${r.sourceRecordId} after seq ${r.sourceUntilSeq}` }, 'fork');
  }
  function renderList() {
    const n = st.records.length;
    $('list-status').textContent = n
      ? `${plural(n, 'session')}${st.truncated ? ' (more below)' : ''}${st.q ? ` matching “${st.q}”` : ''}`
      : st.q ? `No session matches “${st.q}”.` : 'No sessions in this store yet.';
    $('more').hidden = !st.truncated;
    $('session-list').replaceChildren(...st.records.map((r) => {
      const open = () => setHash(r.recordId, null);
      return h('li', {
        class: 'session' + (r.recordId === st.recordId ? ' selected' : ''), testid: 'session-item',
        'data-record-id': r.recordId, tabindex: '0', role: 'button',
        onclick: open, onkeydown: (e) => { if (e.key === 'Enter') open(); },
      },
      h('div', { class: 's-title' }, r.sourceRecordId ? forkBadge(r) : null,
        h('span', { text: r.title || r.label || r.recordId })),
      h('div', { class: 's-id mono', text: r.recordId }),
      h('div', { class: 's-meta' },
        h('time', { datetime: r.updatedAt, title: `updated ${when(r.updatedAt)}`, text: ago(r.updatedAt) }),
        ` · ${plural(r.entryCount, 'entry', 'entries')} · ${plural(r.traceCount, 'trace')}`));
    }));
  }
  function markSelected() {
    for (const li of $('session-list').children) li.classList.toggle('selected', li.dataset.recordId === st.recordId);
  }

  // ---- a record ----
  function showEmpty() {
    st.recordId = st.traceId = null;
    $('record').hidden = true;
    $('empty').hidden = false;
    markSelected();
  }
  async function openRecord(id, traceId) {
    const seq = ++st.recSeq;
    st.recordId = id;
    st.traceId = null;
    clearTimeout(st.poll);
    markSelected();
    $('empty').hidden = true;
    $('record').hidden = false;
    $('record').classList.add('loading');
    const base = `/api/records/${enc(id)}`;
    try {
      const [m, t, tr] = await Promise.all([api(`${base}/messages`), api(`${base}/tree`), api(`${base}/traces`)]);
      if (seq !== st.recSeq) return;
      banner(null);
      st.tree = t;
      st.traces = tr.traces || [];
      const node = findNode(t.tree, id) || { recordId: id };
      renderHead(id, node, m.messages);
      renderTree(t, id);
      renderTranscript(m.messages, node);
      renderTraces();
      const pick = traceId && st.traces.some((x) => x.traceId === traceId) ? traceId : st.traces.at(-1)?.traceId;
      if (pick) {
        if (pick !== traceId) setHash(id, pick, true);
        openTrace(pick);
      } else {
        $('timeline').replaceChildren(h('p', { class: 'muted', text: 'No traces recorded for this session.' }));
      }
    } catch (e) {
      if (seq !== st.recSeq) return;
      banner(e);
      $('record').hidden = true;
      $('empty').hidden = false;
      $('empty').textContent = e.status === 404 ? `No record “${id}” in this store.` : 'Could not load this session.';
    } finally {
      if (seq === st.recSeq) $('record').classList.remove('loading');
    }
  }
  function findNode(n, id) {
    if (!n) return null;
    if (n.recordId === id) return n;
    for (const c of n.children || []) { const f = findNode(c, id); if (f) return f; }
    return null;
  }
  function renderHead(id, node, msgs) {
    const r = st.records.find((x) => x.recordId === id);
    const firstUser = msgs.find((m) => m.role === 'user' && typeof m.content === 'string');
    $('rec-title').textContent = r?.title || (node.sourceRecordId ? node.label : null) || clip(firstUser?.content || id, 120);
    const meta = [h('span', { class: 'mono', text: id })];
    if (node.sourceRecordId) {
      meta.push(h('span', null, forkBadge(node), ' of ',
        h('a', { href: '#record=' + enc(node.sourceRecordId), class: 'mono', text: node.sourceRecordId }),
        ` after seq ${node.sourceUntilSeq}`));
    }
    if (r) meta.push(h('span', { text: `updated ${when(r.updatedAt)}` }), h('span', { text: plural(r.entryCount, 'entry', 'entries') }));
    $('rec-meta').replaceChildren(...meta);
  }

  // ---- branch tree (SVG) ----
  function renderTree(res, current) {
    const NW = 176, NH = 42, GX = 84, GY = 12, PAD = 6;
    const nodes = [], edges = [];
    let leaves = 0, maxDepth = 0;
    (function lay(n, depth, parent) {
      const me = { n, depth };
      nodes.push(me);
      maxDepth = Math.max(maxDepth, depth);
      if (parent) edges.push([parent, me]);
      const kids = (n.children || []).map((c) => lay(c, depth + 1, me));
      me.slot = kids.length ? (kids[0].slot + kids[kids.length - 1].slot) / 2 : leaves++;
      return me;
    })(res.tree, 0, null);
    const path = new Set();
    (function walk(n) {
      if (n.recordId === current || (n.children || []).some(walk)) { path.add(n.recordId); return true; }
      return false;
    })(res.tree);
    const X = (m) => PAD + m.depth * (NW + GX), Y = (m) => PAD + m.slot * (NH + GY);
    const W = PAD * 2 + maxDepth * (NW + GX) + NW, H = PAD * 2 + leaves * (NH + GY) - GY;
    const svg = s('svg', { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': 'Branch tree' });
    for (const [a, b] of edges) {
      const x1 = X(a) + NW, y1 = Y(a) + NH / 2, x2 = X(b), y2 = Y(b) + NH / 2, mx = (x1 + x2) / 2;
      const on = path.has(b.n.recordId);
      svg.append(s('path', { class: 'edge' + (on ? ' active' : ''), d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}` }));
      if (b.n.sourceUntilSeq != null) {
        svg.append(s('text', { class: 'edge-label' + (on ? ' active' : ''), x: x2 - 6, y: y2 - 6, 'text-anchor': 'end' },
          `@ seq ${b.n.sourceUntilSeq}`, s('title', null, `forked after seq ${b.n.sourceUntilSeq} of ${a.n.recordId}`)));
      }
    }
    for (const m of nodes) {
      const id = m.n.recordId, on = path.has(id);
      const open = () => setHash(id, null);
      const g = s('g', {
        class: 'node' + (on ? ' active' : '') + (id === current ? ' current' : ''), testid: 'tree-node',
        'data-record-id': id, 'data-active': on ? 'true' : 'false', tabindex: '0', role: 'button',
        transform: `translate(${X(m)},${Y(m)})`,
        onclick: open, onkeydown: (e) => { if (e.key === 'Enter') open(); },
      });
      g.append(s('rect', { width: NW, height: NH, rx: 8 }),
        s('text', { class: 'n-label', x: 12, y: 18 }, clip(m.n.label || id, 24)),
        s('text', { class: 'n-id', x: 12, y: 33 }, clip(id, 28)),
        s('title', null, `${m.n.label || ''}\n${id}`));
      svg.append(g);
    }
    const box = $('tree');
    box.replaceChildren(svg);
    if (res.truncated) box.append(h('p', { class: 'muted small', text: `Showing ${res.nodeCount} records; the family is larger.` }));
  }

  // ---- transcript ----
  const LONG_CHARS = 1600, LONG_LINES = 24;
  function textBlock(t, cls = 'text') {
    const lines = t.split('\n');
    if (t.length <= LONG_CHARS && lines.length <= LONG_LINES) return h('div', { class: cls, text: t });
    const preview = clip(lines.slice(0, 10).join('\n').slice(0, 600), 600) + (t.length > 600 || lines.length > 10 ? ' …' : '');
    return h('div', { class: 'long-wrap' }, h('div', { class: cls + ' preview', text: preview }),
      h('details', { class: 'long' }, h('summary', { text: `Show all (${plural(t.length, 'char')}, ${plural(lines.length, 'line')})` }),
        h('div', { class: cls, text: t })));
  }
  function contentOf(m) {
    const out = [];
    if (typeof m.content === 'string' && m.content !== '') out.push(textBlock(m.content));
    else if (m.content != null && typeof m.content !== 'string') out.push(h('pre', { class: 'code', text: pretty(m.content) }));
    for (const p of m.parts || []) {
      if (p.type === 'text' && p.text && p.text !== m.content) out.push(textBlock(p.text));
      else if (p.type === 'image') out.push(h('div', { class: 'muted small', text: `[image${p.mediaType ? ' ' + p.mediaType : ''}]` }));
    }
    return out;
  }
  function toolCall(c, res) {
    const parsed = res ? parseJSON(res.content) : undefined;
    const failed = parsed?.success === false;
    const status = !res ? 'no result' : failed ? 'error' : 'ok';
    return h('details', { class: `tool-call ${failed ? 'failed' : !res ? 'pending' : ''}`, testid: 'tool-call', 'data-call-id': c.id, 'data-tool': c.name },
      h('summary', null,
        h('span', { class: 'tc-name mono', text: c.name }),
        h('span', { class: 'tc-args mono', text: argsPreview(c.arguments) }),
        h('span', { class: `tc-status ${failed ? 'err' : !res ? 'warn' : 'ok'}`, text: failed && parsed.error ? clip(String(parsed.error), 60) : status })),
      h('div', { class: 'tc-body' },
        c.arguments !== undefined ? h('div', { class: 'tc-label', text: `Arguments · call ${c.id}` }) : null,
        c.arguments !== undefined ? h('pre', { class: 'code', text: pretty(c.arguments) }) : null,
        res ? h('div', { class: 'tc-label', text: `Result${res.seq != null ? ` · seq ${res.seq}` : ''}` }) : null,
        res ? h('pre', { class: 'code', text: pretty(parsed ?? res.content) }) : null));
  }
  function renderTranscript(msgs, node) {
    const results = new Map();
    for (const m of msgs) if (m.role === 'tool' && m.toolCallId) results.set(m.toolCallId, m);
    const called = new Set(msgs.flatMap((m) => (m.toolCalls || []).map((c) => c.id)));
    const seedSeq = node.sourceRecordId && msgs.length ? msgs[0].seq : null;
    const out = [];
    let seeded = seedSeq != null;
    const divider = () => h('div', { class: 'divider' }, h('span', { text: `forked from ${node.sourceRecordId} after seq ${node.sourceUntilSeq} · new on this branch below` }));
    for (const m of msgs) {
      if (seeded && m.seq !== seedSeq) { out.push(divider()); seeded = false; }
      if (m.role === 'tool' && called.has(m.toolCallId)) continue; // shown inside its call
      const role = ['user', 'assistant', 'tool', 'system'].includes(m.role) ? m.role : 'other';
      const body = m.role === 'system'
        ? [h('details', { class: 'long' }, h('summary', { text: `System prompt (${plural(String(m.content ?? '').length, 'char')})` }), ...contentOf(m))]
        : contentOf(m);
      if (m.reasoning) body.unshift(h('details', { class: 'reasoning' }, h('summary', { text: 'Reasoning' }), textBlock(String(m.reasoning))));
      if (m.role === 'tool') {
        body.splice(0, body.length, toolCall({ id: m.toolCallId, name: m.name || 'tool' }, m));
      }
      for (const c of m.toolCalls || []) body.push(toolCall(c, results.get(c.id)));
      out.push(h('div', { class: `msg ${role}` + (seedSeq != null && m.seq === seedSeq ? ' inherited' : ''), testid: 'message', 'data-role': m.role, 'data-seq': m.seq },
        h('div', { class: 'msg-head' }, h('span', { class: `badge role ${role}`, text: m.role }),
          m.name && m.role !== 'tool' ? h('span', { class: 'mono small', text: m.name }) : null,
          h('span', { class: 'seq', text: m.seq != null ? `seq ${m.seq}` : '' })),
        h('div', { class: 'msg-body' }, body)));
    }
    if (seeded) out.push(divider());
    $('msg-count').textContent = msgs.length ? `· ${plural(msgs.length, 'message')}` : '';
    $('transcript').replaceChildren(...(out.length ? out : [h('p', { class: 'muted', text: 'No messages.' })]));
  }

  // ---- traces ----
  function statusBadge(status) {
    const cls = status === 'completed' || status === 'ok' ? 'ok' : status === 'running' ? 'run' : status === 'cancelled' ? 'warn' : 'err';
    return h('span', { class: `badge st ${cls}`, text: status || 'unknown' });
  }
  function renderTraces() {
    $('trace-count').textContent = st.traces.length ? `· ${st.traces.length}` : '';
    $('trace-list').replaceChildren(...st.traces.map((t, i) => {
      const open = () => setHash(st.recordId, t.traceId);
      return h('li', {
        class: 'trace-item' + (t.traceId === st.traceId ? ' selected' : ''), testid: 'trace-item', 'data-trace-id': t.traceId,
        tabindex: '0', role: 'button', title: t.traceId, onclick: open, onkeydown: (e) => { if (e.key === 'Enter') open(); },
      },
      h('span', { class: 'ti-n', text: `#${i + 1}` }), statusBadge(t.status),
      h('span', { class: 'ti-when', text: when(t.startedAtMs ?? t.createdAt) }),
      h('span', { class: 'ti-facts', text: `${ms(t.durationMs)} · ${plural(t.totalTokens || 0, 'token')} · ${plural(t.spanCount || 0, 'span')}` }),
      t.hadError ? h('span', { class: 'ti-err', text: clip(t.errorMessage || 'error', 60) }) : null);
    }));
  }
  async function openTrace(id) {
    const seq = ++st.traceSeq;
    clearTimeout(st.poll);
    st.traceId = id;
    for (const li of $('trace-list').children) li.classList.toggle('selected', li.dataset.traceId === id);
    try {
      const t = await api(`/api/traces/${enc(id)}`);
      if (seq !== st.traceSeq) return;
      renderTimeline(t);
      if (t.trace.status === 'running') st.poll = setTimeout(() => { if (seq === st.traceSeq) openTrace(id); }, 2000);
    } catch (e) {
      if (seq !== st.traceSeq) return;
      $('timeline').replaceChildren(h('p', { class: 'muted', text: `Could not load trace ${id}: ${e.message}` }));
    }
  }
  function niceStep(total) {
    const raw = total / 5, p = 10 ** Math.floor(Math.log10(raw || 1));
    return [1, 2, 5, 10].map((k) => k * p).find((x) => x >= raw) || p;
  }
  function fact(k, v) { return v == null || v === '' ? null : h('span', { class: 'fact' }, h('span', { class: 'k', text: k }), h('span', { class: 'v', text: v })); }
  function renderTimeline({ trace, spans = [] }) {
    const running = trace.status === 'running';
    const t0 = trace.startedAtMs ?? Math.min(...spans.map((x) => x.startMs));
    const ends = spans.map((x) => x.endMs ?? x.startMs);
    const lastKnown = Math.max(t0 + (trace.durationMs || 0), ...ends, t0 + 1);
    const tEnd = running ? Math.max(Date.now(), lastKnown) : lastKnown;
    const total = Math.max(1, tEnd - t0);
    const pct = (v) => `${(Math.min(Math.max(v, 0), total) / total) * 100}%`;
    let cost = 0, hasCost = false;
    for (const x of spans) if (typeof x.attrs?.costUsd === 'number') { cost += x.attrs.costUsd; hasCost = true; }
    const head = h('div', { class: 'tl-head' },
      statusBadge(trace.status),
      fact('duration', ms(trace.durationMs ?? (running ? tEnd - t0 : null))),
      fact('tokens', num(trace.totalTokens || 0)),
      fact('model', trace.modelId),
      fact('spans', String(trace.spanCount ?? spans.length)),
      hasCost ? fact('cost', usd(cost)) : null,
      fact('started', when(t0)));
    const out = [head];
    if (trace.errorMessage || trace.hadError) out.push(h('div', { class: 'tl-error', text: trace.errorMessage || 'The trace recorded an error.' }));
    const step = niceStep(total);
    const axis = h('div', { class: 'track axis' });
    for (let v = 0; v <= total + 1e-9; v += step) {
      const tick = h('span', { class: 'tick', text: ms(v) });
      tick.style.setProperty('--l', pct(v));
      axis.append(tick);
    }
    out.push(h('div', { class: 'tl-row axis-row' }, axis));
    for (const x of spans) {
      const a = x.attrs || {}, u = a.usage || a;
      const kind = x.kind === 'llm' || x.kind === 'tool' ? x.kind : 'other';
      const end = x.endMs ?? tEnd;
      const dur = x.durationMs ?? (x.endMs != null ? x.endMs - x.startMs : null);
      const bar = h('div', { class: `bar ${kind} ${x.status}`, testid: 'span-bar', 'data-kind': x.kind, 'data-status': x.status,
        title: `${x.name} · ${x.status} · ${dur != null ? ms(dur) : 'running'}` });
      bar.style.setProperty('--l', pct(x.startMs - t0));
      bar.style.setProperty('--w', `max(3px, ${pct(end - x.startMs)})`);
      const meta = [h('span', { class: 'dur', text: dur != null ? ms(dur) : `running ${ms(end - x.startMs)}` })];
      if (u.promptTokens != null || u.completionTokens != null) {
        meta.push(h('span', { class: 'tok', title: 'prompt → completion tokens', text: `${num(u.promptTokens ?? 0)} → ${num(u.completionTokens ?? 0)} tok` }));
      }
      if (typeof a.costUsd === 'number') meta.push(h('span', { class: 'cost', text: usd(a.costUsd) }));
      const sub = [a.round != null ? `round ${a.round}` : null, a.callId ? a.callId : null, a.model && kind === 'llm' && a.model !== trace.modelId ? a.model : null].filter(Boolean).join(' · ');
      out.push(h('div', { class: `tl-row ${kind} ${x.status}`, 'data-span-id': x.spanId },
        h('div', { class: 'tl-name' }, h('span', { class: `dot ${kind}` }), h('span', { class: 'nm', text: x.name, title: x.name }), sub ? h('span', { class: 'sub', text: sub }) : null),
        h('div', { class: 'track' }, bar),
        h('div', { class: 'tl-meta' }, meta),
        x.status === 'error' || a.error ? h('div', { class: 'span-error', text: String(a.error || 'error') }) : null));
    }
    if (!spans.length) out.push(h('p', { class: 'muted', text: 'No spans recorded.' }));
    out.push(h('div', { class: 'legend' },
      h('span', null, h('span', { class: 'dot llm' }), 'LLM request'), h('span', null, h('span', { class: 'dot tool' }), 'tool'),
      h('span', null, h('span', { class: 'dot error' }), 'error'), h('span', null, h('span', { class: 'dot running' }), 'running')));
    $('timeline').replaceChildren(...out);
    $('timeline').dataset.traceId = trace.traceId;
  }

  // ---- wiring ----
  let debounce = 0;
  $('search').addEventListener('input', (e) => {
    clearTimeout(debounce);
    debounce = setTimeout(() => { st.q = e.target.value.trim(); loadList(false); }, 250);
  });
  $('more').addEventListener('click', () => loadList(true));
  $('refresh').addEventListener('click', () => {
    loadList(false);
    const { record, trace } = readHash();
    if (record) { st.recordId = null; openRecord(record, trace); }
  });
  window.addEventListener('hashchange', route);
  api('/api/info').then((i) => {
    $('info').replaceChildren(h('span', { class: 'mono', title: 'storage path', text: i.storagePath }),
      h('span', { text: `schema v${i.schemaVersion}` }), i.readOnly ? h('span', { class: 'badge ro', text: 'read-only' }) : null,
      h('span', { text: `v${i.version}` }));
  }).catch(banner);
  loadList(false);
  route();
})();

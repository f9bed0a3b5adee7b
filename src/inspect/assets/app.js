// outrigger inspect: a read-only view of the durable store. Plain DOM, no framework.
// Stored data reaches the page only as text (textContent, text nodes): transcripts are untrusted.
'use strict';
(() => {
  const TOKEN = new URLSearchParams(location.search).get('token') || '';
  const $ = (id) => document.getElementById(id);
  const enc = encodeURIComponent;

  // ---- DOM: h('tag.cls', 'text' | {attrs}, ...children); never innerHTML ----
  function mk(el, a, kids) {
    if (typeof a === 'string' || typeof a === 'number') el.textContent = a;
    else for (const [k, v] of Object.entries(a || {})) {
      if (v == null || v === false) continue;
      if (k === 'text') el.textContent = v;
      else if (k === 'class') el.classList.add(...String(v).split(' ').filter(Boolean));
      else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k === 'testid' ? 'data-testid' : k, v);
    }
    for (const c of kids.flat()) if (c != null && c !== false) el.append(c);
    return el;
  }
  function h(sel, a, ...kids) {
    const [tag, ...cls] = sel.split('.');
    const el = document.createElement(tag);
    if (cls.length) el.className = cls.join(' ');
    return mk(el, a, kids);
  }
  const fill = (el, ...kids) => el.replaceChildren(...kids.flat().filter((k) => k != null && k !== false));
  const s = (tag, a, ...kids) => mk(document.createElementNS('http://www.w3.org/2000/svg', tag), a, kids);
  const button = (a, open) => Object.assign(a, { tabindex: 0, role: 'button', onclick: open, onkeydown: (e) => e.key === 'Enter' && open() });

  // ---- formatting ----
  const nf = new Intl.NumberFormat();
  const num = (n) => nf.format(n);
  const plural = (n, one, many = one + 's') => `${num(n)} ${n === 1 ? one : many}`;
  const clip = (t, n) => (t.length > n ? t.slice(0, n - 1) + '…' : t);
  function ms(n) {
    if (n == null || !isFinite(n)) return '–';
    if (n < 1000) return `${Math.round(n)} ms`;
    if (n < 60000) return `${(n / 1000).toFixed(n < 10000 ? 2 : 1)} s`;
    return `${Math.floor(n / 60000)}m ${String(Math.round((n % 60000) / 1000)).padStart(2, '0')}s`;
  }
  const usd = (n) => '$' + (n >= 0.01 ? n.toFixed(4) : n.toPrecision(2));
  function when(v) {
    const d = new Date(v);
    return isNaN(d) ? String(v ?? '') : d.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
  }
  function ago(v) {
    const sec = (Date.now() - new Date(v)) / 1000;
    if (isNaN(sec)) return '';
    if (sec < 45) return 'just now';
    if (sec < 3600) return `${Math.round(sec / 60)} min ago`;
    if (sec < 86400) return `${Math.round(sec / 3600)} h ago`;
    return sec < 2592000 ? `${Math.round(sec / 86400)} d ago` : new Date(v).toLocaleDateString();
  }
  function parseJSON(t) {
    try { return typeof t === 'string' ? JSON.parse(t) : undefined; } catch { return undefined; }
  }
  const pretty = (v) => (typeof v === 'string' ? v : JSON.stringify(v, null, 2));
  function argsPreview(a) {
    if (a === undefined) return '';
    if (a && typeof a === 'object' && !Array.isArray(a)) {
      return clip(Object.entries(a).map(([k, v]) => `${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`).join(', '), 90);
    }
    return clip(typeof a === 'string' ? a : JSON.stringify(a) ?? '', 90);
  }

  // ---- API: the token goes in the Authorization header ----
  async function api(path) {
    let r, body = null;
    try {
      r = await fetch(path, { headers: { Authorization: `Bearer ${TOKEN}` }, cache: 'no-store' });
      body = await r.json();
    } catch {
      if (!r) throw Object.assign(new Error('the inspector is not reachable (was `outrigger inspect` stopped?)'), { status: 0 });
    }
    if (!r.ok) throw Object.assign(new Error(body?.error?.message || `HTTP ${r.status}`), { status: r.status });
    return body;
  }
  function banner(err) {
    const b = $('banner');
    b.hidden = !err;
    b.textContent = !err ? '' : `${err.status ? err.status + ': ' : ''}${err.message}${err.status === 401 || err.status === 403
      ? ' — open the URL `outrigger inspect` printed (it carries the token)' : ''}`;
  }

  // ---- state; the URL hash (#record=<id>&trace=<id>) is the selection ----
  const st = { q: '', records: [], truncated: false, recordId: null, traceId: null, traces: [],
    listSeq: 0, recSeq: 0, traceSeq: 0, poll: 0, running: null };
  function readHash() {
    const p = new URLSearchParams(location.hash.slice(1));
    return { record: p.get('record'), trace: p.get('trace') };
  }
  function setHash(record, trace, replace) {
    const p = new URLSearchParams();
    if (record) p.set('record', record);
    if (trace) p.set('trace', trace);
    const next = '#' + p;
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
    const p = new URLSearchParams({ limit: 50, offset: more ? st.records.length : 0 });
    if (st.q) p.set('q', st.q);
    $('list-status').textContent = 'Loading…';
    try {
      const r = await api(`/api/records?${p}`);
      if (seq !== st.listSeq) return;
      st.records = more ? st.records.concat(r.records) : r.records;
      st.truncated = !!r.truncated;
      banner(null);
      renderList();
    } catch (e) {
      if (seq === st.listSeq) { $('list-status').textContent = ''; banner(e); }
    }
  }
  const forkBadge = (r) => h('span.badge.fork', { title: `fork of ${r.sourceRecordId} after seq ${r.sourceUntilSeq}` }, 'fork');
  function renderList() {
    const n = st.records.length, q = st.q ? ` matching “${st.q}”` : '';
    $('list-status').textContent = n ? `${plural(n, 'session')}${q}${st.truncated ? ', more below' : ''}`
      : st.q ? `No session matches “${st.q}”.` : 'No sessions in this store yet.';
    $('more').hidden = !st.truncated;
    $('session-list').replaceChildren(...st.records.map((r) => h('li.session', button({
      class: r.recordId === st.recordId && 'selected', testid: 'session-item', 'data-record-id': r.recordId,
    }, () => setHash(r.recordId)),
    h('div.s-title', null, r.sourceRecordId && forkBadge(r), h('span', r.title || r.label || r.recordId)),
    h('div.s-id.mono', r.recordId),
    h('div.s-meta', null, h('time', { datetime: r.updatedAt, title: `updated ${when(r.updatedAt)}`, text: ago(r.updatedAt) }),
      ` · ${plural(r.entryCount, 'entry', 'entries')} · ${plural(r.traceCount, 'trace')}`))));
  }
  function markSelected() {
    for (const li of $('session-list').children) li.classList.toggle('selected', li.dataset.recordId === st.recordId);
  }

  // ---- a record: header, tree, transcript, traces ----
  function showEmpty() {
    st.recordId = st.traceId = null;
    $('record').hidden = true;
    $('empty').hidden = false;
    markSelected();
  }
  async function openRecord(id, traceId) {
    const seq = ++st.recSeq;
    Object.assign(st, { recordId: id, traceId: null });
    clearTimeout(st.poll);
    markSelected();
    $('empty').hidden = true;
    $('record').hidden = false;
    $('record').classList.add('loading');
    const base = `/api/records/${enc(id)}`;
    try {
      const [m, t, tr] = await Promise.all(['messages', 'tree', 'traces'].map((k) => api(`${base}/${k}`)));
      // Stale when another record was opened, or the URL moved on (Back) with its hashchange pending.
      if (seq !== st.recSeq || readHash().record !== id) return;
      banner(null);
      st.traces = tr.traces || [];
      const node = findNode(t.tree, id) || { recordId: id };
      renderHead(id, node, m.messages);
      renderTree(t, id);
      renderTranscript(m.messages, node);
      renderTraces();
      const pick = st.traces.some((x) => x.traceId === traceId) ? traceId : st.traces.at(-1)?.traceId;
      if (!pick) return $('timeline').replaceChildren(h('p.muted', 'No traces recorded for this session.'));
      if (pick !== traceId) setHash(id, pick, true);
      openTrace(pick);
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
    if (!n || n.recordId === id) return n;
    for (const c of n.children || []) { const f = findNode(c, id); if (f) return f; }
    return null;
  }
  function renderHead(id, node, msgs) {
    const r = st.records.find((x) => x.recordId === id);
    const first = msgs.find((m) => m.role === 'user' && typeof m.content === 'string');
    $('rec-title').textContent = r?.title || (node.sourceRecordId && node.label) || clip(first?.content || id, 120);
    fill($('rec-meta'), h('span.mono', id),
      node.sourceRecordId && h('span', null, forkBadge(node), ' of ',
        h('a.mono', { href: '#record=' + enc(node.sourceRecordId), text: node.sourceRecordId }), ` after seq ${node.sourceUntilSeq}`),
      r && h('span', `updated ${when(r.updatedAt)}`), r && h('span', plural(r.entryCount, 'entry', 'entries')));
  }

  // The family tree as SVG: depth left to right, leaves top to bottom, a parent centred on its
  // children; the path from the root to the open record is the active branch.
  function renderTree(res, current) {
    const NW = 176, NH = 42, GX = 84, GY = 12, P = 6, nodes = [], edges = [];
    let leaves = 0, depth = 0;
    (function lay(n, d, parent) {
      const me = { n, d };
      nodes.push(me);
      depth = Math.max(depth, d);
      if (parent) edges.push([parent, me]);
      const kids = (n.children || []).map((c) => lay(c, d + 1, me));
      me.slot = kids.length ? (kids[0].slot + kids.at(-1).slot) / 2 : leaves++;
      return me;
    })(res.tree, 0, null);
    const path = new Set();
    (function walk(n) {
      return (n.recordId === current || (n.children || []).some(walk)) && !!path.add(n.recordId);
    })(res.tree);
    const X = (m) => P + m.d * (NW + GX), Y = (m) => P + m.slot * (NH + GY);
    const W = P * 2 + depth * (NW + GX) + NW, H = P * 2 + leaves * (NH + GY) - GY;
    const svg = s('svg', { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': 'branch tree' });
    for (const [a, b] of edges) {
      const x1 = X(a) + NW, y1 = Y(a) + NH / 2, x2 = X(b), y2 = Y(b) + NH / 2, mx = (x1 + x2) / 2;
      const on = path.has(b.n.recordId) && 'active', at = b.n.sourceUntilSeq;
      svg.append(s('path', { class: ['edge', on].join(' '), d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}` }));
      if (at != null) {
        svg.append(s('text', { class: ['edge-label', on].join(' '), x: x2 - 6, y: y2 - 6, 'text-anchor': 'end' },
          `@ seq ${at}`, s('title', `forked after seq ${at} of ${a.n.recordId}`)));
      }
    }
    for (const m of nodes) {
      const id = m.n.recordId, on = path.has(id);
      svg.append(s('g', button({
        class: `node ${on ? 'active' : ''} ${id === current ? 'current' : ''}`, testid: 'tree-node', 'data-record-id': id,
        'data-active': String(on), transform: `translate(${X(m)},${Y(m)})`,
      }, () => setHash(id)),
      s('rect', { width: NW, height: NH, rx: 8 }), s('text', { class: 'n-label', x: 12, y: 18 }, clip(m.n.label || id, 24)),
      s('text', { class: 'n-id', x: 12, y: 33 }, clip(id, 28)), s('title', `${m.n.label || ''}\n${id}`)));
    }
    fill($('tree'), svg, res.truncated && h('p.muted.small', `Showing ${res.nodeCount} records; the family is larger.`));
  }

  // ---- transcript ----
  function textBlock(t) {
    const lines = t.split('\n');
    if (t.length <= 1600 && lines.length <= 24) return h('div.text', t);
    const preview = lines.slice(0, 10).join('\n').slice(0, 600) + ' …';
    return h('div.long-wrap', null, h('div.text.preview', preview), h('details.long', null,
      h('summary', `Show all (${plural(t.length, 'char')}, ${plural(lines.length, 'line')})`), h('div.text', t)));
  }
  function contentOf(m) {
    const out = [];
    if (typeof m.content === 'string' && m.content) out.push(textBlock(m.content));
    else if (m.content != null && typeof m.content !== 'string') out.push(h('pre.code', pretty(m.content)));
    for (const p of m.parts || []) {
      if (p.type === 'text' && p.text && p.text !== m.content) out.push(textBlock(p.text));
      else if (p.type === 'image') out.push(h('div.muted.small', `[image${p.mediaType ? ' ' + p.mediaType : ''}]`));
    }
    return out;
  }
  // A tool call folded with its result: <details> closed, the summary a one-line preview.
  function toolCall(c, res) {
    const parsed = res ? parseJSON(res.content) : undefined;
    const failed = parsed?.success === false, hasArgs = c.arguments !== undefined;
    return h('details.tool-call', { class: failed ? 'failed' : !res && 'pending', testid: 'tool-call', 'data-call-id': c.id, 'data-tool': c.name },
      h('summary', null, h('span.tc-name.mono', c.name), h('span.tc-args.mono', argsPreview(c.arguments)),
        h('span.tc-status', { class: failed ? 'err' : res ? 'ok' : 'warn',
          text: failed ? clip(String(parsed.error || 'error'), 60) : res ? 'ok' : 'no result' })),
      h('div.tc-body', null,
        hasArgs && h('div.tc-label', `Arguments · call ${c.id}`), hasArgs && h('pre.code', pretty(c.arguments)),
        res && h('div.tc-label', `Result${res.seq != null ? ` · seq ${res.seq}` : ''}`), res && h('pre.code', pretty(parsed ?? res.content))));
  }
  function renderTranscript(msgs, node) {
    const results = new Map(msgs.filter((m) => m.role === 'tool' && m.toolCallId).map((m) => [m.toolCallId, m]));
    const called = new Set(msgs.flatMap((m) => (m.toolCalls || []).map((c) => c.id)));
    // A fork's inherited messages all carry its seed entry's seq (the first one).
    const seed = node.sourceRecordId && msgs.length ? msgs[0].seq : null;
    let inSeed = seed != null;
    const divider = () => h('div.divider', null, h('span', `forked from ${node.sourceRecordId} after seq ${node.sourceUntilSeq} · new on this branch below`));
    const out = [];
    for (const m of msgs) {
      if (inSeed && m.seq !== seed) { out.push(divider()); inSeed = false; }
      if (m.role === 'tool' && called.has(m.toolCallId)) continue; // shown inside its call
      const role = ['user', 'assistant', 'tool', 'system'].includes(m.role) ? m.role : 'other';
      let body = contentOf(m);
      if (role === 'system') body = [h('details.long', null, h('summary', `System prompt (${plural(String(m.content ?? '').length, 'char')})`), body)];
      if (role === 'tool') body = [toolCall({ id: m.toolCallId, name: m.name || 'tool' }, m)];
      if (m.reasoning) body.unshift(h('details.reasoning', null, h('summary', 'Reasoning'), textBlock(String(m.reasoning))));
      for (const c of m.toolCalls || []) body.push(toolCall(c, results.get(c.id)));
      out.push(h('div.msg', { class: `${role} ${inSeed ? 'inherited' : ''}`, testid: 'message', 'data-role': m.role, 'data-seq': m.seq },
        h('div.msg-head', null, h('span.badge.role', { class: role, text: m.role }),
          m.name && role !== 'tool' && h('span.mono.small', m.name), h('span.seq', m.seq != null ? `seq ${m.seq}` : '')),
        h('div.msg-body', null, body)));
    }
    if (inSeed) out.push(divider());
    $('msg-count').textContent = msgs.length ? `· ${plural(msgs.length, 'message')}` : '';
    $('transcript').replaceChildren(...(out.length ? out : [h('p.muted', 'No messages.')]));
  }

  // ---- traces and the timeline ----
  function statusBadge(v) {
    const cls = { completed: 'ok', ok: 'ok', running: 'run', cancelled: 'warn' }[v] || 'err';
    return h('span.badge.st', { class: cls, text: v || 'unknown' });
  }
  function renderTraces() {
    $('trace-count').textContent = st.traces.length ? `· ${st.traces.length}` : '';
    $('trace-list').replaceChildren(...st.traces.map((t, i) => h('li.trace-item', button({
      class: t.traceId === st.traceId && 'selected', testid: 'trace-item', 'data-trace-id': t.traceId, title: t.traceId,
    }, () => setHash(st.recordId, t.traceId)),
    h('span.ti-n', `#${i + 1}`), statusBadge(t.status), h('span.ti-when', when(t.startedAtMs ?? t.createdAt)),
    h('span.ti-facts', t.status === 'running' ? 'in progress'
      : `${ms(t.durationMs)} · ${plural(t.totalTokens || 0, 'token')} · ${plural(t.spanCount || 0, 'span')}`),
    t.hadError && h('span.ti-err', clip(t.errorMessage || 'error', 80)))));
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
      if (t.trace.status === 'running') {
        st.running = id;
        st.poll = setTimeout(() => seq === st.traceSeq && openTrace(id), 2000);
      } else if (st.running === id) {
        // It just finished: reload the record (transcript, trace list).
        Object.assign(st, { running: null, recordId: null });
        route();
      }
    } catch (e) {
      if (seq === st.traceSeq) $('timeline').replaceChildren(h('p.muted', `Could not load trace ${id}: ${e.message}`));
    }
  }
  function niceStep(total) {
    const raw = total / 5, p = 10 ** Math.floor(Math.log10(raw || 1));
    return [1, 2, 5, 10].map((k) => k * p).find((x) => x >= raw);
  }
  const fact = (k, v) => v != null && h('span.fact', null, h('span.k', k), h('span.v', String(v)));
  function bar(a, left, width, pct) {
    const b = h('div.bar', a);
    b.style.setProperty('--l', pct(left));
    b.style.setProperty('--w', `max(3px, ${pct(width)})`);
    return b;
  }
  function renderTimeline({ trace, spans = [] }) {
    const running = trace.status === 'running';
    const t0 = trace.startedAtMs ?? Math.min(...spans.map((x) => x.startMs));
    const ends = spans.map((x) => x.endMs ?? x.startMs);
    const known = Math.max(t0 + (trace.durationMs || 0), ...ends, t0 + 1);
    const tEnd = running ? Math.max(Date.now(), known) : known;
    const total = tEnd - t0;
    const pct = (v) => `${(Math.min(Math.max(v, 0), total) / total) * 100}%`;
    let cost = 0, priced = false, tokens = 0;
    for (const { attrs: a = {} } of spans) {
      if (typeof a.costUsd === 'number') { cost += a.costUsd; priced = true; }
      if (a.usage) tokens += a.usage.totalTokens ?? (a.usage.promptTokens || 0) + (a.usage.completionTokens || 0);
    }
    const out = [h('div.tl-head', null, statusBadge(trace.status),
      fact('duration', ms(trace.durationMs ?? tEnd - t0)),
      // A running trace's stored header may lag behind its finished spans: count those too.
      fact('tokens', num(Math.max(trace.totalTokens || 0, tokens))), fact('model', trace.modelId),
      fact('spans', Math.max(trace.spanCount || 0, spans.length)), priced && fact('cost', usd(cost)), fact('started', when(t0)))];
    if (trace.errorMessage || trace.hadError) out.push(h('div.tl-error', trace.errorMessage || 'The trace recorded an error.'));
    const axis = h('div.track.axis');
    for (let v = 0, step = niceStep(total); v <= total; v += step) {
      const tick = h('span.tick', ms(v));
      tick.style.setProperty('--l', pct(v));
      axis.append(tick);
    }
    out.push(h('div.tl-row.axis-row', null, axis));
    for (const x of spans) {
      const a = x.attrs || {}, u = a.usage || a;
      const kind = x.kind === 'llm' || x.kind === 'tool' ? x.kind : 'other';
      const dur = x.durationMs ?? (x.endMs != null ? x.endMs - x.startMs : null);
      const sub = [a.round != null && `round ${a.round}`, a.callId, kind === 'llm' && a.model !== trace.modelId && a.model].filter(Boolean).join(' · ');
      out.push(h('div.tl-row', { class: `${kind} ${x.status}`, 'data-span-id': x.spanId },
        h('div.tl-name', null, h('span.dot', { class: kind }), h('span.nm', { text: x.name, title: x.name }), sub && h('span.sub', sub)),
        h('div.track', null, bar({ class: `${kind} ${x.status}`, testid: 'span-bar', 'data-kind': x.kind, 'data-status': x.status,
          title: `${x.name} · ${x.status} · ${dur != null ? ms(dur) : 'running'}` }, x.startMs - t0, (x.endMs ?? tEnd) - x.startMs, pct)),
        h('div.tl-meta', null, h('span.dur', dur != null ? ms(dur) : `running ${ms(tEnd - x.startMs)}`),
          (u.promptTokens != null || u.completionTokens != null) && h('span.tok', { title: 'prompt → completion tokens',
            text: `${num(u.promptTokens ?? 0)} → ${num(u.completionTokens ?? 0)} tok` }),
          typeof a.costUsd === 'number' && h('span.cost', usd(a.costUsd))),
        (x.status === 'error' || a.error) && h('div.span-error', String(a.error || 'error'))));
    }
    if (running) {
      // What runs now is not stored yet: a striped row from the last finished span to now.
      const from = Math.min(Math.max(t0, ...ends), tEnd);
      out.push(h('div.tl-row.pending', null, h('div.tl-name', null, h('span.dot.running'), h('span.nm', 'in progress…')),
        h('div.track', null, bar({ class: 'running', title: 'in progress' }, from - t0, tEnd - from, pct)),
        h('div.tl-meta', null, h('span.dur', ms(tEnd - from)))));
    } else if (!spans.length) out.push(h('p.muted', 'No spans recorded.'));
    out.push(h('div.legend', null, [['llm', 'LLM request'], ['tool', 'tool'], ['error', 'error'], ['running', 'running']]
      .map(([k, t]) => h('span', null, h('span.dot', { class: k }), t))));
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
    st.recordId = null;
    route();
  });
  window.addEventListener('hashchange', route);
  api('/api/info').then((i) => fill($('info'), h('span.mono', { title: 'storage path', text: i.storagePath }),
    h('span', `schema v${i.schemaVersion}`), i.readOnly && h('span.badge.ro', 'read-only'), h('span', `v${i.version}`)), banner);
  loadList(false);
  route();
})();

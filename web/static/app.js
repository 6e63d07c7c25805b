// Flotilla operator UI: the application list, one application's detail, and
// a live event stream that re-reads whatever changed.
//
// Everything the API returns is untrusted text (names, messages and drift
// values come from repositories and the swarm), so the DOM is built with
// el() and text nodes only; nothing here assigns HTML.
'use strict';

// The page is served one level below the API's root (/ui/), so the API is
// found relative to it; that keeps working behind a path-prefixing proxy.
const API = new URL('../api/v1/', location.href).pathname;
const TOKEN_KEY = 'flotilla.token';
const $ = (id) => document.getElementById(id);

const state = {
  apps: new Map(),     // name -> status (summary or full)
  history: new Map(),  // name -> {items} or {error}
  ops: new Map(),      // name -> last Sync/Refresh answer, kept across re-renders
  forbidden: '',       // the API's 403 message, once a write was refused
  lastEventId: '',
  retry: 2000,
  stream: null,        // AbortController of the running event stream
};

// el builds an element; string children become text nodes, never markup.
function el(tag, attrs, ...children) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k === 'class') n.className = v;
    else if (k.startsWith('on')) n.addEventListener(k.slice(2), v);
    else n.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c == null || c === false || c === '') continue;
    n.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return n;
}

const enc = encodeURIComponent;
const token = () => sessionStorage.getItem(TOKEN_KEY) || '';
const shortRev = (r) => (r && /^[0-9a-f]{12,}$/i.test(r) ? r.slice(0, 7) : r || '—');
const when = (t) => (t ? new Date(t).toLocaleString() : '—');

class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

// api calls /api/v1 with the token, if any, and returns the decoded JSON. A
// failure throws ApiError carrying the API's own message.
async function api(method, path, body) {
  const headers = { Accept: 'application/json' };
  if (token()) headers.Authorization = 'Bearer ' + token();
  if (method !== 'GET' && method !== 'HEAD') {
    // Every write declares JSON and carries the header the API demands of
    // writes, which a cross-origin page or a form cannot send.
    headers['Content-Type'] = 'application/json';
    headers['X-Flotilla-Request'] = '1';
  }
  const res = await fetch(API + path, {
    method, headers, cache: 'no-store',
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  try { data = await res.json(); } catch { /* an empty or non-JSON answer */ }
  if (!res.ok) {
    const msg = (data && data.message) || `${res.status} ${res.statusText}`;
    if (res.status === 401) askToken(msg);
    throw new ApiError(res.status, msg);
  }
  return data;
}

// ---- sign-in -------------------------------------------------------------

function askToken(message) {
  stopStream();
  sessionStorage.removeItem(TOKEN_KEY);
  for (const id of ['list', 'detail', 'signout']) $(id).hidden = true;
  $('login').hidden = false;
  // With no token yet, "missing bearer token" is just the reason for the form.
  const shown = message && !message.startsWith('missing bearer token');
  $('login-error').hidden = !shown;
  $('login-error').textContent = shown ? message : '';
  $('token').focus();
}

$('login').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const t = $('token').value.trim();
  if (!t) return;
  sessionStorage.setItem(TOKEN_KEY, t);
  $('token').value = '';
  start();
});

$('signout').addEventListener('click', () => askToken(''));

async function start() {
  $('login').hidden = true;
  state.forbidden = '';
  try {
    await loadAll();
  } catch (e) {
    if (e.status !== 401) showError('Cannot list applications: ' + e.message);
    return;
  }
  $('signout').hidden = !token();
  startStream();
  route();
}

function showError(msg) {
  $('error').hidden = !msg;
  $('error').textContent = msg || '';
}

// ---- data ----------------------------------------------------------------

async function loadAll() {
  const list = await api('GET', 'applications');
  state.apps = new Map(list.items.map((a) => [a.name, a]));
  showError('');
  render();
}

// refreshApp re-reads one application, and its history when it is open.
async function refreshApp(name) {
  try {
    state.apps.set(name, await api('GET', 'applications/' + enc(name)));
  } catch (e) {
    if (e.status === 404) state.apps.delete(name);
    else return showError(`Cannot read ${name}: ${e.message}`);
  }
  if (openApp() === name) await loadHistory(name);
  render();
}

async function loadHistory(name) {
  try {
    state.history.set(name, await api('GET', `applications/${enc(name)}/history`));
  } catch (e) {
    state.history.set(name, { error: e.message });
  }
}

// Service counts: the list endpoint sends them, a full status has services.
function counts(a) {
  if (!a.services) return [a.servicesHealthy || 0, a.serviceCount || 0];
  const ok = a.services.filter((s) => s.health === 'Healthy' || s.health === 'Suspended');
  return [ok.length, a.services.length];
}

// ---- routing and rendering -------------------------------------------------

function openApp() {
  const m = location.hash.match(/^#\/app\/(.+)$/);
  if (!m) return null;
  try { return decodeURIComponent(m[1]); } catch { return m[1]; } // a hand-typed, malformed escape
}

// route shows what the hash names; a detail page re-reads its application
// and history, since the list holds only summaries.
async function route() {
  render();
  const name = openApp();
  if (name !== null) await refreshApp(name);
}
window.addEventListener('hashchange', () => { if ($('login').hidden) route(); });
$('filter').addEventListener('input', () => renderList());

function render() {
  const name = openApp();
  if (logs.name !== null && logs.name !== name) stopLogs(true);
  $('list').hidden = name !== null;
  $('detail').hidden = name === null;
  if (name === null) renderList();
  else renderDetail(name);
}

const syncBadge = (a) => el('span', { class: 'badge sync-' + a.sync },
  a.sync || 'Unknown', a.syncReason ? ` (${a.syncReason})` : '');
const healthBadge = (h) => el('span', { class: 'badge health-' + (h || 'Unknown') }, h || 'Unknown');

function revisionCell(a) {
  const gap = a.seenRevision && a.seenRevision !== a.revision;
  return el('span', { class: gap ? 'warn' : null, title: `deployed ${a.revision || 'none'}, seen ${a.seenRevision || 'none'}` },
    el('code', {}, shortRev(a.revision)), gap ? ['  → ', el('code', {}, shortRev(a.seenRevision))] : null);
}

function notes(a) {
  return [
    a.lastError && el('div', { class: 'error' }, a.lastError),
    a.pinned && el('div', { class: 'note' }, 'Pinned: ' + a.pinned),
    a.waiting && el('div', { class: 'note' }, 'Held: ' + a.waiting),
    (a.unavailable || []).length > 0 && el('div', { class: 'muted' }, 'Unavailable: ' + a.unavailable.join('; ')),
  ];
}

function renderList() {
  const q = $('filter').value.trim().toLowerCase();
  const apps = [...state.apps.values()]
    .filter((a) => !q || a.name.toLowerCase().includes(q) || (a.stack || '').toLowerCase().includes(q)
      || (a.destination || 'local').toLowerCase().includes(q) || (a.set || '').toLowerCase().includes(q))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const rows = apps.map((a) => {
    const [ok, total] = counts(a);
    const href = '#/app/' + enc(a.name);
    return el('tr', { onclick: (ev) => { if (ev.target.tagName !== 'A') location.hash = href; } },
      el('td', {}, el('a', { href }, a.name), a.set && el('div', { class: 'muted small' }, 'set ' + a.set)),
      el('td', {}, a.stack || ''),
      el('td', {}, a.destination || 'local'),
      el('td', {}, syncBadge(a)),
      el('td', {}, healthBadge(a.health), a.healthMessage && el('div', { class: 'muted small' }, a.healthMessage)),
      el('td', {}, revisionCell(a)),
      el('td', { class: ok < total ? 'warn num' : 'num' }, `${ok}/${total}`),
      el('td', {}, notes(a)));
  });
  $('apps').tBodies[0].replaceChildren(...rows);
  $('empty').hidden = apps.length > 0;
  $('count').textContent = `${apps.length} of ${state.apps.size}`;
}

function table(headers, rows, empty) {
  if (!rows.length) return el('p', { class: 'muted' }, empty);
  return el('table', {}, el('thead', {}, el('tr', {}, headers.map((h) => el('th', {}, h)))),
    el('tbody', {}, rows.map((r) => el('tr', {}, r.map((c) => el('td', {}, c))))));
}

const list = (title, items) => (items && items.length
  ? el('div', {}, el('h4', {}, title), el('ul', {}, items.map((i) => el('li', {}, i)))) : null);

function renderDetail(name) {
  const a = state.apps.get(name);
  const back = el('a', { href: '#/', class: 'back' }, '← Applications');
  if (!a) {
    $('detail').replaceChildren(back, el('h2', {}, name), el('p', { class: 'muted' }, 'No such application (yet).'));
    return;
  }
  // The controller masks secret-looking values itself ("***"); the row only
  // says so, and "(none)" on one side stays readable.
  const drift = (a.drift || []).map((d) => [d.service,
    [d.field, d.masked ? el('span', { class: 'muted small' }, ' (masked)') : null], d.desired, d.live]);
  const services = (a.services || []).map((s) => [s.name, healthBadge(s.health),
    `${s.running}/${s.desired}`, s.message || '']);
  const hist = state.history.get(name);
  const sw = a.sweep;
  const parts = [
    back,
    el('h2', {}, a.name, ' ', syncBadge(a), ' ', healthBadge(a.health)),
    el('dl', { class: 'meta' },
      el('dt', {}, 'Stack'), el('dd', {}, a.stack || '—'),
      el('dt', {}, 'Swarm'), el('dd', {}, a.destination || 'local'),
      a.set && [el('dt', {}, 'Set'), el('dd', {}, a.set)],
      el('dt', {}, 'Health'), el('dd', {}, a.healthMessage || a.health || '—'),
      el('dt', {}, 'Deployed'), el('dd', { title: a.revision || '' }, shortRev(a.revision),
        a.lastAppliedRevision ? ` (release ${a.lastAppliedRevision})` : ''),
      el('dt', {}, 'Seen'), el('dd', { title: a.seenRevision || '' }, shortRev(a.seenRevision)),
      a.chart ? [el('dt', {}, 'Chart'), el('dd', {}, a.chart)] : null,
      el('dt', {}, 'Last sync'), el('dd', {}, when(a.lastSyncTime)),
      el('dt', {}, 'Last pass'), el('dd', {}, when(a.lastPass))),
    el('div', { class: 'notes' }, notes(a)),
    actions(a),
    el('h3', {}, 'Services'),
    table(['Service', 'Health', 'Running', 'Message'], services, 'No services reported.'),
    el('h3', {}, 'Resources'),
    resourceTree(a),
    el('h3', {}, 'Drift'),
    table(['Service', 'Field', 'Desired', 'Live'], drift, 'No drift.'),
    el('h3', {}, 'Logs'),
    logsPanel(a),
    list('Rolled back by Swarm', a.rolledBack),
    list('Changed by another writer', a.outOfBand),
    el('h3', {}, 'Sweep'),
    sw ? el('div', { class: 'sweep' },
      list(sw.dryRun ? 'Pending removals (prune is off)' : 'Pending removals', sw.pending),
      list('Removed', sw.removed),
      list('Unmanaged (never touched)', sw.unmanaged),
      list('Messages', sw.messages)) : el('p', { class: 'muted' }, 'No sweep has run yet.'),
    el('h3', {}, 'History'),
    !hist ? el('p', { class: 'muted' }, 'Loading…')
      : hist.error ? el('p', { class: 'muted' }, 'History unavailable: ' + hist.error)
        : table(['Release', 'Commit', 'Chart', 'Time', 'Trigger', 'Message'], hist.items.map((r) => [
          String(r.revision), el('code', { title: r.commit || '' }, shortRev(r.commit)),
          r.chart ? el('span', { title: r.chart.valuesDigest || '' }, `${r.chart.name}-${r.chart.version}`) : '',
          when(r.time), r.trigger || '', r.message || '']), 'No releases recorded.'),
  ];
  $('detail').replaceChildren(...parts.filter(Boolean));
}

// ago says how long since t, coarsely.
function ago(t) {
  if (!t) return '';
  const s = Math.max(0, (Date.now() - new Date(t).getTime()) / 1000);
  if (s < 90) return `${Math.round(s)}s`;
  if (s < 5400) return `${Math.round(s / 60)}m`;
  if (s < 129600) return `${Math.round(s / 3600)}h`;
  return `${Math.round(s / 86400)}d`;
}

// resourceTree shows the stack, its services and their tasks, each with its
// health, and the reason where one is unhealthy. Details elements keep it
// usable by keyboard and screen reader without any script of their own; an
// unhealthy service starts open.
function resourceTree(a) {
  const bad = (h) => h && h !== 'Healthy' && h !== 'Suspended';
  const task = (t) => el('li', { class: 'tree-task' + (t.error ? ' unhealthy' : '') },
    el('code', { title: t.id }, (t.id || '').slice(0, 12)),
    t.slot ? ` slot ${t.slot}` : '',
    ' ', el('span', { class: 'badge task-' + t.state }, t.state),
    t.desiredState && t.desiredState !== t.state ? el('span', { class: 'muted small' }, ` → ${t.desiredState}`) : null,
    t.health ? el('span', { class: 'muted small' }, ` (${t.health})`) : null,
    t.node ? el('span', { class: 'muted small' }, ` on ${t.node.slice(0, 12)}`) : null,
    t.since ? el('span', { class: 'muted small', title: when(t.since) }, ` ${ago(t.since)}`) : null,
    t.error ? el('div', { class: 'error small' }, t.error)
      : t.message && t.state !== 'running' ? el('div', { class: 'muted small' }, t.message) : null);
  const service = (s) => el('li', { class: 'tree-service' },
    el('details', { open: bad(s.health) || null },
      el('summary', {}, el('span', { class: 'kind' }, 'service '), s.name, ' ', healthBadge(s.health),
        ` ${s.running}/${s.desired}`, bad(s.health) && s.message ? el('span', { class: 'error small' }, ' — ' + s.message) : null),
      (s.tasks || []).length ? el('ul', {}, s.tasks.map(task)) : el('p', { class: 'muted small' }, 'No tasks.'),
      uses(s)));
  // Names only: a secret's value never reaches the API.
  const uses = (s) => {
    const kinds = [['network', s.networks], ['config', s.configs], ['secret', s.secrets]].filter(([, v]) => v && v.length);
    return kinds.length ? el('ul', { class: 'tree-uses' }, kinds.flatMap(([k, v]) =>
      v.map((n) => el('li', { class: 'tree-use' }, el('span', { class: 'kind' }, k + ' '), n)))) : null;
  };
  return el('ul', { class: 'tree', id: 'tree', 'aria-label': 'Resources' },
    el('li', { class: 'tree-stack' },
      el('details', { open: true },
        el('summary', {}, el('span', { class: 'kind' }, 'stack '), a.stack || a.name, ' ', healthBadge(a.health),
          bad(a.health) && a.healthMessage ? el('span', { class: 'error small' }, ' — ' + a.healthMessage) : null),
        (a.services || []).length ? el('ul', {}, a.services.map(service)) : el('p', { class: 'muted small' }, 'No services reported.'))));
}

// actions renders Sync and Refresh. A read-only token learns it may not
// write from the API's 403, which is then shown and disables both buttons.
function actions(a) {
  const op = state.ops.get(a.name);
  const button = (label, path) => el('button', {
    type: 'button', disabled: !!state.forbidden, title: state.forbidden || null,
    onclick: () => operate(a.name, label, path),
  }, label);
  return el('div', { class: 'actions' },
    button('Sync', 'sync'), button('Refresh', 'refresh'),
    op && el('output', { class: op.ok ? 'ok' : 'error', id: 'op-result' }, op.text));
}

async function operate(name, label, path) {
  let res;
  try {
    const r = await api('POST', `applications/${enc(name)}/${path}`, {});
    res = { ok: true, text: `${label}: ${r.phase}${r.message ? ' — ' + r.message : ''}` };
  } catch (e) {
    if (e.status === 403) state.forbidden = e.message;
    res = { ok: false, text: `${label} refused: ${e.message}` };
  }
  state.ops.set(name, res);
  render();
}

// ---- service logs ------------------------------------------------------------

// The logs panel outlives the detail page's re-renders (every event
// rebuilds the page), so it is built once per application and re-attached;
// its stream runs until Stop, another page, or the end of the logs.
const logs = { name: null, panel: null, ctl: null, lines: 0 };
const MAX_LOG_LINES = 5000; // kept in the page; older lines are dropped

function logsPanel(a) {
  if (logs.name !== a.name) {
    stopLogs(true);
    logs.name = a.name;
    logs.panel = buildLogsPanel();
  }
  const sel = logs.panel.querySelector('#log-service');
  const want = ['', ...(a.services || []).map((s) => s.name)];
  const have = [...sel.options].map((o) => o.value);
  if (want.join('\n') !== have.join('\n')) {
    const keep = sel.value;
    sel.replaceChildren(...want.map((v) => el('option', { value: v }, v || 'All services')));
    sel.value = want.includes(keep) ? keep : '';
  }
  return logs.panel;
}

function buildLogsPanel() {
  const field = (label, input) => el('label', {}, label, ' ', input);
  const form = el('form', { class: 'logs-form', id: 'log-form', 'aria-label': 'Log options' },
    field('Service', el('select', { id: 'log-service' })),
    field('Tail', el('input', { id: 'log-tail', type: 'number', min: '0', max: '10000', value: '100', class: 'num-input' })),
    el('label', {}, el('input', { id: 'log-follow', type: 'checkbox' }), ' Follow'),
    el('label', {}, el('input', { id: 'log-timestamps', type: 'checkbox' }), ' Timestamps'),
    el('button', { type: 'submit', id: 'log-start' }, 'Show logs'),
    el('button', { type: 'button', id: 'log-stop', disabled: true, onclick: () => stopLogs(false) }, 'Stop'),
    el('output', { id: 'log-status', class: 'muted small' }));
  form.addEventListener('submit', (ev) => { ev.preventDefault(); startLogs(); });
  const out = el('pre', { id: 'log-output', class: 'log', tabindex: '0', 'aria-label': 'Log lines', 'aria-live': 'off' });
  return el('div', { class: 'logs' }, form, out);
}

function logStatus(text, cls) {
  const o = logs.panel.querySelector('#log-status');
  o.className = cls || 'muted small';
  o.textContent = text;
}

function stopLogs(quiet) {
  if (logs.ctl) logs.ctl.abort();
  logs.ctl = null;
  if (logs.panel) {
    logs.panel.querySelector('#log-start').disabled = false;
    logs.panel.querySelector('#log-stop').disabled = true;
    if (!quiet) logStatus('stopped');
  }
}

// startLogs reads GET …/logs, one JSON line at a time, with the token in a
// header (never the URL).
async function startLogs() {
  stopLogs(true);
  const p = logs.panel;
  const name = logs.name;
  const q = new URLSearchParams();
  const svc = p.querySelector('#log-service').value;
  if (svc) q.set('service', svc);
  q.set('tail', p.querySelector('#log-tail').value || '100');
  const follow = p.querySelector('#log-follow').checked;
  const stamps = p.querySelector('#log-timestamps').checked;
  if (follow) q.set('follow', '1');
  if (stamps) q.set('timestamps', '1');
  const out = p.querySelector('#log-output');
  out.replaceChildren();
  logs.lines = 0;
  const ctl = new AbortController();
  logs.ctl = ctl;
  p.querySelector('#log-start').disabled = true;
  p.querySelector('#log-stop').disabled = false;
  logStatus(follow ? 'following…' : 'reading…');
  try {
    const headers = { Accept: 'application/x-ndjson' };
    if (token()) headers.Authorization = 'Bearer ' + token();
    const res = await fetch(`${API}applications/${enc(name)}/logs?${q}`, { headers, signal: ctl.signal, cache: 'no-store' });
    if (!res.ok) {
      let msg = `${res.status} ${res.statusText}`;
      try { msg = (await res.json()).message || msg; } catch { /* not JSON */ }
      throw new Error(msg);
    }
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value;
      const lines = buf.split('\n');
      buf = lines.pop();
      for (const line of lines) if (line) appendLog(out, JSON.parse(line), stamps);
    }
    if (logs.ctl === ctl) { stopLogs(true); logStatus(`${logs.lines} lines`); }
  } catch (e) {
    if (ctl.signal.aborted) return;
    stopLogs(true);
    logStatus('Logs unavailable: ' + e.message, 'error');
  }
}

function appendLog(out, l, stamps) {
  if (l.error) { logStatus('The stream ended: ' + l.error, 'error'); return; }
  const stick = out.scrollTop + out.clientHeight >= out.scrollHeight - 4;
  const task = (l.task || '').slice(0, 12);
  out.appendChild(el('span', { class: 'log-line' },
    stamps && l.time ? el('span', { class: 'log-time' }, l.time + ' ') : null,
    el('span', { class: 'log-src' }, `${l.service}.${task} `), l.text + '\n'));
  if (++logs.lines > MAX_LOG_LINES) out.firstChild.remove();
  if (stick) out.scrollTop = out.scrollHeight;
}

// ---- live updates ------------------------------------------------------------

function setLive(mode, text) {
  $('live').className = 'live ' + mode;
  $('live').textContent = text;
}

// Events name an application; its refresh waits a moment so a burst of
// progress events costs one read, not one per event.
const due = new Set();
let dueTimer = 0;
function schedule(name) {
  due.add(name);
  if (!dueTimer) dueTimer = setTimeout(flushDue, 250);
}
function flushDue() {
  dueTimer = 0;
  const names = [...due];
  due.clear();
  if (names.includes('')) loadAll().catch((e) => showError(e.message));
  for (const n of names) if (n) refreshApp(n);
}

function stopStream() {
  if (state.stream) state.stream.abort();
  state.stream = null;
  setLive('off', 'offline');
}

// startStream follows GET /api/v1/events. It uses fetch rather than
// EventSource, which cannot send an Authorization header, and a token must
// never go into a URL. It resumes with Last-Event-ID after a drop.
async function startStream() {
  stopStream();
  const ctl = new AbortController();
  state.stream = ctl;
  let wait = state.retry;
  while (!ctl.signal.aborted) {
    let lagged = false;
    try {
      const headers = { Accept: 'text/event-stream' };
      if (token()) headers.Authorization = 'Bearer ' + token();
      if (state.lastEventId) headers['Last-Event-ID'] = state.lastEventId;
      const res = await fetch(API + 'events', { headers, signal: ctl.signal, cache: 'no-store' });
      if (res.status === 401) return askToken('Token rejected by the event stream');
      if (res.status === 403 || res.status === 501) {
        return setLive('off', res.status === 501 ? 'no event stream' : 'events forbidden');
      }
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      setLive('on', 'live');
      wait = state.retry;
      lagged = await readEvents(res.body);
    } catch { /* a dropped connection: reconnect below */ }
    if (ctl.signal.aborted) return;
    setLive('retry', 'reconnecting…');
    await new Promise((r) => setTimeout(r, lagged ? 0 : wait));
    wait = Math.min(wait * 2, 30000);
  }
}

// readEvents parses one connection's Server-Sent Events until it ends, and
// returns true if the server cut it off for lagging (resume at once).
async function readEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  let frame = { type: '', data: [] };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return false;
    buf += value;
    const lines = buf.split('\n');
    buf = lines.pop();
    for (let line of lines) {
      if (line.endsWith('\r')) line = line.slice(0, -1);
      if (line === '') {
        if (dispatch(frame)) { reader.cancel(); return true; }
        frame = { type: '', data: [] };
        continue;
      }
      if (line.startsWith(':')) continue; // heartbeat comment
      const i = line.indexOf(':');
      const field = i < 0 ? line : line.slice(0, i);
      let v = i < 0 ? '' : line.slice(i + 1);
      if (v.startsWith(' ')) v = v.slice(1);
      if (field === 'id') state.lastEventId = v;
      else if (field === 'event') frame.type = v;
      else if (field === 'data') frame.data.push(v);
      else if (field === 'retry' && /^\d+$/.test(v)) state.retry = Number(v);
    }
  }
}

// dispatch acts on one event and reports whether it was the lagged marker.
function dispatch(frame) {
  if (!frame.data.length) return false;
  let ev;
  try { ev = JSON.parse(frame.data.join('\n')); } catch { return false; }
  const type = ev.type || frame.type;
  if (type === 'stream.lagged') return true;
  // A gap means events were lost: re-read everything, not just one app.
  schedule(type === 'stream.gap' ? '' : ev.app || '');
  return false;
}

start();

// Flotilla operator UI: sign-in, routing and a live event stream that
// re-reads whatever changed; the application list is list.js, one
// application's view detail.js.
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
  operate: new Map(),  // name -> whether the caller may operate it (X-Flotilla-Operate), once read
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
// failure throws ApiError carrying the API's own message. seen, if given,
// gets the response, for its headers.
async function api(method, path, body, seen) {
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
  if (seen) seen(res);
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
  for (const id of ['list', 'detail', 'signout', 'sso-user', 'sso-signout']) $(id).hidden = true;
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

// showSSOUser offers Sign out when the page works through a single sign-on
// session (the cookie, which the page cannot read) rather than a token.
async function showSSOUser() {
  let user = '';
  if (!token()) {
    try {
      const res = await fetch('/auth/session', { headers: { Accept: 'application/json' }, cache: 'no-store' });
      if (res.ok) user = (await res.json()).user || '';
    } catch { /* no single sign-on here */ }
  }
  $('sso-user').textContent = user.replace(/^sso:/, '');
  $('sso-user').hidden = !user;
  $('sso-signout').hidden = !user;
}

// Sign out ends the session at the controller (a write, so it carries the
// header every write needs) and returns to the sign-in form.
$('sso-signout').addEventListener('click', async () => {
  try {
    await fetch('/auth/logout', {
      method: 'POST', body: '{}', cache: 'no-store',
      headers: { 'Content-Type': 'application/json', 'X-Flotilla-Request': '1' },
    });
  } catch { /* the form below is shown either way */ }
  askToken('');
});

// start loads the list and then follows events. A controller that cannot
// be reached (restarting, a dropped connection) or answers 5xx is asked
// again, waiting longer each time, rather than leaving the page on an
// error until someone reloads it; a 4xx is an answer and stays on screen.
let starts = 0;
async function start() {
  const mine = ++starts;
  $('login').hidden = true;
  state.forbidden = '';
  for (let wait = state.retry; ; wait = Math.min(wait * 2, 30000)) {
    try {
      await loadAll();
      break;
    } catch (e) {
      if (e.status === 401) return;
      if (e.status && e.status < 500) return showError('Cannot list applications: ' + e.message);
      showError(`Cannot list applications: ${e.message}. Trying again in ${Math.round(wait / 1000)} s.`);
      await new Promise((r) => setTimeout(r, wait));
      // Signed out, or started again by a sign-in, while waiting.
      if (mine !== starts || !$('login').hidden) return;
    }
  }
  $('signout').hidden = !token();
  showSSOUser();
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
    state.apps.set(name, await api('GET', 'applications/' + enc(name), undefined, (res) => {
      // A controller that does not say is older: the buttons show, and its 403 hides them.
      const may = res.headers.get('X-Flotilla-Operate');
      if (res.ok) state.operate.set(name, may === null || may === 'true');
    }));
  } catch (e) {
    if (e.status === 404) state.apps.delete(name);
    else return showError(`Cannot read ${name}: ${e.message}`);
  }
  listTouched(name); // list.js updates that one row
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
  if (!dueTimer) dueTimer = setTimeout(flushDue, 100);
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
  noteEvent({ ...ev, type }); // the timeline (detail.js)
  // An audit entry says who wrote, not that the application changed: the
  // write's own events (sync started, succeeded, ...) bring the re-read.
  if (type === 'audit.recorded') return false;
  // A gap means events were lost: re-read everything, not just one app.
  schedule(type === 'stream.gap' ? '' : ev.app || '');
  return false;
}

start();

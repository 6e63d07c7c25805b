// Flotilla operator UI: the application list. Counts by sync and health,
// filters, search and sorting, all kept in the hash's query ("#/?health=
// Degraded&sort=name") so a reload, a shared link and back/forward restore
// the view.
//
// It keeps one row element per application for the page's life. An event
// re-reads one application (app.js), which marks it touched; the next
// render rebuilds that row's cells in place and moves the row only if its
// place in the sorted, filtered order changed. A filter or sort change
// re-orders the existing rows rather than building new ones. With thousands
// of applications, rows are put into the table in chunks so the first
// screenful paints at once, in row groups of 100 that the browser skips
// whole while off screen (list.css), so a frame's work does not grow with
// every row.
//
// Loaded before app.js: nothing here runs app.js's helpers (el, state,
// counts, the badges) until app.js renders.
'use strict';

const LIST_DIMS = ['sync', 'health', 'swarm', 'project', 'set'];
// Worst first: an ascending sort by sync or health puts trouble on top.
const SYNC_ORDER = ['OutOfSync', 'Unknown', 'Synced'];
const HEALTH_ORDER = ['Degraded', 'Missing', 'Progressing', 'Unknown', 'Suspended', 'Healthy'];
const LIST_FIRST_ROWS = 80;  // rows put in before the first paint
const LIST_CHUNK_ROWS = 500; // rows per later task until the table is complete
// Rows go into row groups (tbody elements) of this many; a group off screen
// is skipped whole, so a frame's work grows with the groups, not the rows.
const LIST_GROUP_ROWS = 100;

const cmpStr = (a, b) => (a < b ? -1 : a > b ? 1 : 0);
const orderRank = (order, v) => { const i = order.indexOf(v); return i < 0 ? order.length : i; };
const serviceRatio = (r) => (r.total ? r.ok / r.total : 1);

// Sort keys compare two row records; ties fall back to the name.
const LIST_SORTS = {
  name: () => 0,
  stack: (a, b) => cmpStr(a.data.stack || '', b.data.stack || ''),
  swarm: (a, b) => cmpStr(a.keys.swarm, b.keys.swarm),
  sync: (a, b) => orderRank(SYNC_ORDER, a.keys.sync) - orderRank(SYNC_ORDER, b.keys.sync),
  health: (a, b) => orderRank(HEALTH_ORDER, a.keys.health) - orderRank(HEALTH_ORDER, b.keys.health),
  revision: (a, b) => cmpStr(a.data.revision || '', b.data.revision || ''),
  services: (a, b) => serviceRatio(a) - serviceRatio(b) || b.total - a.total,
};

const lv = {
  source: null,        // the state.apps map last reconciled in full
  rows: new Map(),     // name -> row record {name, tr, data, sig, keys, text, ok, total, in, stale}
  projects: new Map(), // name -> project, from list summaries (a full status has none)
  dirty: new Set(),    // names re-read since the last render
  tally: Object.fromEntries(LIST_DIMS.map((d) => [d, new Map()])),
  view: null,          // the view last applied
  cmp: null,           // its comparator
  shown: [],           // names passing the filter, in sort order
  built: 0,            // shown[0..built) are in the row groups, in that order
  fillTimer: 0,
};

// listTouched marks an application re-read (or gone); app.js calls it.
function listTouched(name) { lv.dirty.add(name); }

// listHref is the link back to the list as it was last shown, filters and
// sort included, for a page that links back to it.
function listHref() { return lv.view ? listHash(lv.view) : '#/'; }

// ---- the view in the URL ------------------------------------------------------

function listViewFromHash() {
  const h = location.hash;
  const p = new URLSearchParams(h.startsWith('#/?') ? h.slice(3) : '');
  const v = { q: p.get('q') || '' };
  for (const d of LIST_DIMS) v[d] = p.get(d) || '';
  const sort = p.get('sort');
  v.sort = Object.hasOwn(LIST_SORTS, sort) ? sort : 'name';
  v.dir = p.get('dir') === 'desc' ? 'desc' : 'asc';
  return v;
}

function listHash(v) {
  const p = new URLSearchParams();
  if (v.q) p.set('q', v.q);
  for (const d of LIST_DIMS) if (v[d]) p.set(d, v[d]);
  if (v.sort !== 'name') p.set('sort', v.sort);
  if (v.dir !== 'asc') p.set('dir', v.dir);
  const s = p.toString();
  return s ? '#/?' + s : '#/';
}

// listNavigate changes the view: a click adds a history entry (push), so
// Back undoes it; typing in the search box replaces the current one.
function listNavigate(change, push) {
  const h = listHash({ ...listViewFromHash(), ...change });
  if (h !== (location.hash || '#/')) {
    if (push) history.pushState(null, '', h);
    else history.replaceState(null, '', h);
  }
  renderList();
}

const sameView = (a, b) => !!a && a.q === b.q && a.sort === b.sort && a.dir === b.dir && LIST_DIMS.every((d) => a[d] === b[d]);

function listComparator(v) {
  const key = LIST_SORTS[v.sort];
  const sign = v.dir === 'desc' ? -1 : 1;
  const nameSign = v.sort === 'name' ? sign : 1;
  return (a, b) => sign * key(a, b) || nameSign * cmpStr(a.name, b.name);
}

function listMatches(r, v) {
  for (const d of LIST_DIMS) if (v[d] && r.keys[d] !== v[d]) return false;
  const q = v.q.trim().toLowerCase();
  return !q || r.text.includes(q);
}

// ---- rows ---------------------------------------------------------------------

function listKeys(name, a) {
  return {
    sync: a.sync || 'Unknown', health: a.health || 'Unknown', swarm: a.destination || 'local',
    project: lv.projects.get(name) || '', set: a.set || '',
  };
}

function tallyKeys(keys, delta) {
  for (const d of LIST_DIMS) {
    const m = lv.tally[d];
    const n = (m.get(keys[d]) || 0) + delta;
    if (n > 0) m.set(keys[d], n); else m.delete(keys[d]);
  }
}

// listSet brings name's record up to date with state.apps, rebuilding its
// cells only if what it shows changed; it reports whether it did.
function listSet(name) {
  const a = state.apps.get(name);
  let r = lv.rows.get(name);
  if (!a) {
    if (r) { tallyKeys(r.keys, -1); lv.rows.delete(name); }
    return !!r;
  }
  // Only the list's summaries carry the project; keep it across a full
  // status read for the detail page.
  if ('serviceCount' in a) lv.projects.set(name, a.project || '');
  const sig = JSON.stringify(a) + '\n' + (lv.projects.get(name) || '');
  if (r && r.sig === sig) return false;
  if (!r) {
    r = { name, tr: el('tr', { role: 'row', 'data-name': name }), in: false };
    lv.rows.set(name, r);
  } else {
    tallyKeys(r.keys, -1);
  }
  r.data = a;
  r.sig = sig;
  r.keys = listKeys(name, a);
  [r.ok, r.total] = counts(a);
  // Search reads the name and stack, and the swarm, set and project.
  r.text = [name, a.stack || '', r.keys.swarm, r.keys.set, r.keys.project].join('\n').toLowerCase();
  tallyKeys(r.keys, 1);
  // A row not in the table gets its cells when it is put there.
  r.stale = true;
  if (r.tr.isConnected) listCells(r);
  return true;
}

function listCells(r) {
  r.stale = false;
  const a = r.data;
  const href = '#/app/' + enc(r.name);
  const sub = [r.keys.project && 'project ' + r.keys.project, a.set && 'set ' + a.set].filter(Boolean).join(' · ');
  const cell = (cls, label, ...c) => el('td', { role: 'cell', class: cls, 'data-label': label }, ...c);
  r.tr.replaceChildren(
    cell('c-name', null, el('a', { href }, r.name), sub && el('div', { class: 'muted small' }, sub)),
    cell('c-stack', 'Stack', a.stack || ''),
    cell('c-swarm', 'Swarm', r.keys.swarm),
    cell('c-sync', null, syncBadge(a)),
    cell('c-health', null, healthBadge(a.health), a.healthMessage && el('div', { class: 'muted small' }, a.healthMessage)),
    cell('c-revision', 'Revision', revisionCell(a)),
    cell(r.ok < r.total ? 'c-services warn num' : 'c-services num', 'Services', `${r.ok}/${r.total}`),
    cell('c-notes', null, notes(a)));
}

// ---- placement ----------------------------------------------------------------

const tableEl = () => document.getElementById('apps');

// lastGroup is the row group new rows are appended to, a new one once the
// last is full.
function lastGroup() {
  const t = tableEl();
  const g = t.tBodies[t.tBodies.length - 1];
  if (g.childElementCount < LIST_GROUP_ROWS) return g;
  return t.appendChild(el('tbody', { role: 'rowgroup' }));
}

// unplaceRow takes a row out of the table, and its group with it once
// empty (the first group stays, for the table's shape).
function unplaceRow(tr) {
  const g = tr.parentNode;
  tr.remove();
  if (g && !g.firstElementChild && g !== tableEl().tBodies[0]) g.remove();
}

// listSlot is where r belongs in shown: its index if it is there, else
// where it would go.
function listSlot(r) {
  let lo = 0;
  let hi = lv.shown.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (lv.cmp(lv.rows.get(lv.shown[mid]), r) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function listPlace(r) {
  if (!listMatches(r, lv.view)) return;
  const i = listSlot(r);
  lv.shown.splice(i, 0, r.name);
  r.in = true;
  if (i < lv.built || lv.built === lv.shown.length - 1) {
    if (r.stale) listCells(r);
  }
  if (i < lv.built) {
    const next = lv.rows.get(lv.shown[i + 1]).tr;
    next.parentNode.insertBefore(r.tr, next);
    lv.built++;
  } else if (lv.built === lv.shown.length - 1) {
    lastGroup().appendChild(r.tr);
    lv.built++;
  } // otherwise a later chunk appends it
}

// listUpdateOne applies one re-read application to a list already laid
// out; a row that keeps its place is not moved, so focus stays on it.
function listUpdateOne(name) {
  const old = lv.rows.get(name);
  // Locate the row by the data it was sorted with, before that changes.
  let at = -1;
  if (old && old.in) {
    at = listSlot(old);
    if (lv.shown[at] !== name) at = lv.shown.indexOf(name); // never expected; stay correct
  }
  if (!listSet(name)) return;
  const r = lv.rows.get(name) || old; // gone: still take it out
  if (at >= 0 && lv.rows.has(name) && listMatches(r, lv.view)) {
    const before = at > 0 ? lv.rows.get(lv.shown[at - 1]) : null;
    const after = at + 1 < lv.shown.length ? lv.rows.get(lv.shown[at + 1]) : null;
    if ((!before || lv.cmp(before, r) < 0) && (!after || lv.cmp(r, after) < 0)) return; // same place
  }
  if (at >= 0) {
    lv.shown.splice(at, 1);
    if (at < lv.built) { unplaceRow(r.tr); lv.built--; }
    r.in = false;
  }
  if (lv.rows.has(name)) listPlace(r);
}

// listRebuild filters and sorts every record and refills the table with
// the same row elements.
function listRebuild() {
  clearTimeout(lv.fillTimer);
  lv.fillTimer = 0;
  const recs = [];
  for (const r of lv.rows.values()) if ((r.in = listMatches(r, lv.view))) recs.push(r);
  recs.sort(lv.cmp);
  lv.shown = recs.map((r) => r.name);
  const t = tableEl();
  while (t.tBodies.length > 1) t.tBodies[t.tBodies.length - 1].remove();
  t.tBodies[0].replaceChildren();
  lv.built = 0;
  listFill(LIST_FIRST_ROWS);
}

function listFill(n) {
  lv.fillTimer = 0;
  const end = Math.min(lv.shown.length, lv.built + n);
  for (let i = lv.built; i < end;) {
    const g = lastGroup();
    const frag = document.createDocumentFragment();
    for (let room = LIST_GROUP_ROWS - g.childElementCount; room > 0 && i < end; room--, i++) {
      const r = lv.rows.get(lv.shown[i]);
      if (r.stale) listCells(r);
      frag.appendChild(r.tr);
    }
    g.appendChild(frag);
  }
  lv.built = Math.max(lv.built, end);
  if (lv.built < lv.shown.length) lv.fillTimer = setTimeout(() => listFill(LIST_CHUNK_ROWS), 0);
}

// ---- render -------------------------------------------------------------------

// renderList is what app.js's render calls while the list shows. Without a
// new view, a new application map or a touched application it does nothing.
function renderList() {
  listWire();
  const v = listViewFromHash();
  const viewChanged = !sameView(lv.view, v);
  let changed = false;
  if (state.apps !== lv.source) {
    // A full re-read (sign-in, or events were lost): bring every record up
    // to date; rows whose data did not change keep their cells.
    lv.source = state.apps;
    lv.dirty.clear();
    for (const name of [...lv.rows.keys()]) if (!state.apps.has(name)) listSet(name);
    for (const name of state.apps.keys()) listSet(name);
    lv.view = v;
    lv.cmp = listComparator(v);
    listRebuild();
    changed = true;
  } else if (viewChanged) {
    for (const name of lv.dirty) listSet(name);
    lv.dirty.clear();
    lv.view = v;
    lv.cmp = listComparator(v);
    listRebuild();
    changed = true;
  } else if (lv.dirty.size) {
    for (const name of lv.dirty) listUpdateOne(name);
    lv.dirty.clear();
    changed = true;
  }
  if (!changed) return;
  if (viewChanged) listControls(v);
  listCounts(v);
  const empty = document.getElementById('empty');
  empty.hidden = lv.shown.length > 0;
  const why = lv.rows.size ? 'No application matches the filters.' : 'No applications.';
  if (empty.textContent !== why) empty.textContent = why;
  const count = document.getElementById('count');
  const text = `${lv.shown.length} of ${lv.rows.size}`;
  if (count.textContent !== text) count.textContent = text;
}

// listControls shows the view in the search box, the sort headers and the
// clear button.
function listControls(v) {
  const q = document.getElementById('filter');
  if (q.value !== v.q) q.value = v.q;
  for (const th of document.querySelectorAll('#apps thead th[data-sort]')) {
    if (th.dataset.sort === v.sort) th.setAttribute('aria-sort', v.dir === 'desc' ? 'descending' : 'ascending');
    else th.removeAttribute('aria-sort');
  }
  document.getElementById('f-clear').hidden = !v.q && LIST_DIMS.every((d) => !v[d]);
}

// listCounts updates the count buttons and the filter menus in place, so
// a focused control keeps its focus while events change the numbers.
function listCounts(v) {
  const bar = document.getElementById('counts');
  for (const [dim, order, label] of [['sync', SYNC_ORDER, 'Sync'], ['health', HEALTH_ORDER, 'Health']]) {
    let group = bar.querySelector(`[data-dim="${dim}"]`);
    if (!group) {
      group = el('div', { class: 'count-group', role: 'group', 'aria-label': label, 'data-dim': dim },
        el('span', { class: 'count-label', 'aria-hidden': 'true' }, label));
      bar.appendChild(group);
    }
    const tally = lv.tally[dim];
    const values = [...order, ...[...tally.keys()].filter((k) => !order.includes(k)).sort()];
    if (v[dim] && !values.includes(v[dim])) values.push(v[dim]);
    for (const val of values) {
      const n = tally.get(val) || 0;
      let b = group.querySelector(`button[data-value="${CSS.escape(val)}"]`);
      if (!n && v[dim] !== val) { if (b) b.remove(); continue; }
      if (!b) {
        b = el('button', { type: 'button', class: `count ${dim}-${val}`, 'data-dim': dim, 'data-value': val },
          el('span', { class: 'count-n' }), ' ', val);
        // Keep the fixed order: before the next present value.
        const next = values.slice(values.indexOf(val) + 1).map((x) => group.querySelector(`button[data-value="${CSS.escape(x)}"]`)).find(Boolean);
        group.insertBefore(b, next || null);
      }
      const ns = String(n);
      if (b.firstChild.textContent !== ns) b.firstChild.textContent = ns;
      const pressed = String(v[dim] === val);
      if (b.getAttribute('aria-pressed') !== pressed) {
        b.setAttribute('aria-pressed', pressed);
        b.title = v[dim] === val ? `Showing only ${label.toLowerCase()} ${val}; press again to show all` : `Show only ${label.toLowerCase()} ${val}`;
      }
    }
  }
  for (const dim of ['swarm', 'project', 'set']) {
    const sel = document.getElementById('f-' + dim);
    const tally = lv.tally[dim];
    const values = [...tally.keys()].filter((k) => k !== '').sort(cmpStr);
    if (v[dim] && !values.includes(v[dim])) values.push(v[dim]);
    const want = ['', ...values];
    const have = [...sel.options].map((o) => o.value);
    if (want.join('\n') !== have.join('\n')) {
      sel.replaceChildren(...want.map((val) => el('option', { value: val })));
    }
    for (const o of sel.options) {
      const t = o.value ? `${o.value} (${tally.get(o.value) || 0})` : 'All';
      if (o.textContent !== t) o.textContent = t;
    }
    if (sel.value !== v[dim]) sel.value = v[dim];
    // A menu with nothing to choose is left out, unless the URL asks for it.
    sel.closest('label').hidden = values.length === 0 || (dim === 'swarm' && values.length < 2 && !v[dim]);
  }
}

// ---- controls -----------------------------------------------------------------

let listWired = false;

// listWire attaches the list's handlers once; delegated, so 5,000 rows
// carry no listeners of their own.
function listWire() {
  if (listWired) return;
  listWired = true;
  const table = tableEl();
  table.addEventListener('click', (ev) => {
    if (ev.target.closest('a')) return;
    const tr = ev.target.closest('tr[data-name]');
    if (tr) location.hash = '#/app/' + enc(tr.dataset.name);
  });
  // Arrow keys move between rows, Home and End to the first and last; the
  // name link is each row's stop, and Enter opens it.
  table.addEventListener('keydown', (ev) => {
    const tr = ev.target.closest('tr[data-name]');
    if (!tr || ev.altKey || ev.ctrlKey || ev.metaKey) return;
    const rows = () => table.querySelectorAll('tbody tr');
    const step = (dir) => {
      const sib = dir > 0 ? tr.nextElementSibling : tr.previousElementSibling;
      if (sib) return sib;
      for (let g = dir > 0 ? tr.parentNode.nextElementSibling : tr.parentNode.previousElementSibling; g;
        g = dir > 0 ? g.nextElementSibling : g.previousElementSibling) {
        const r = dir > 0 ? g.firstElementChild : g.lastElementChild;
        if (r) return r;
      }
      return null;
    };
    const pick = { ArrowDown: () => step(1), ArrowUp: () => step(-1), Home: () => rows()[0], End: () => { const all = rows(); return all[all.length - 1]; } }[ev.key];
    if (!pick) return;
    ev.preventDefault();
    const next = pick();
    if (next) next.querySelector('a').focus();
  });
  table.tHead.addEventListener('click', (ev) => {
    const th = ev.target.closest('th[data-sort]');
    if (!th) return;
    const v = listViewFromHash();
    const key = th.dataset.sort;
    listNavigate({ sort: key, dir: v.sort === key && v.dir === 'asc' ? 'desc' : 'asc' }, true);
  });
  document.getElementById('counts').addEventListener('click', (ev) => {
    const b = ev.target.closest('button[data-dim]');
    if (!b) return;
    const v = listViewFromHash();
    listNavigate({ [b.dataset.dim]: v[b.dataset.dim] === b.dataset.value ? '' : b.dataset.value }, true);
  });
  for (const dim of ['swarm', 'project', 'set']) {
    document.getElementById('f-' + dim).addEventListener('change', (ev) => listNavigate({ [dim]: ev.target.value }, true));
  }
  document.getElementById('filter').addEventListener('input', (ev) => listNavigate({ q: ev.target.value }, false));
  document.getElementById('f-clear').addEventListener('click', () => {
    listNavigate({ q: '', ...Object.fromEntries(LIST_DIMS.map((d) => [d, ''])) }, true);
    document.getElementById('filter').focus();
  });
  // "/" jumps to the search box, as on many consoles.
  document.addEventListener('keydown', (ev) => {
    if (ev.key !== '/' || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (document.getElementById('list').hidden || ev.target.closest('input, select, textarea, [contenteditable]')) return;
    ev.preventDefault();
    document.getElementById('filter').focus();
  });
}

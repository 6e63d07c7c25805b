// Flotilla operator UI: one application's view. Its status, the resource
// tree, a side-by-side diff (against the live swarm or a recorded revision),
// history with a confirmed rollback, sync with a dry-run preview, a live
// timeline and the service logs; rollout.js adds the rollouts panel,
// images.js the image updates panel.
//
// It uses app.js's helpers (el, api, state, enc, ...), which exist by the
// time anything here runs: this file only defines functions and state, and
// app.js, loaded after it, starts the page. As in app.js, everything the API
// returns is untrusted text and becomes text nodes only.
'use strict';

// The panels below outlive the page's re-renders (every event rebuilds it):
// each is built once per application and re-attached, so a diff being read,
// a preview awaiting its confirmation or the focus inside them survive.
const view = {
  name: null,
  diff: null,       // {panel, mode, busy}
  sync: null,       // {panel, prune, plan}
  timeline: null,   // {panel, shown}
  history: null,    // {sig, node}
};

// Events seen since the page loaded, per application, newest last; the
// timeline merges them with the release history.
const seen = new Map();
const MAX_SEEN = 200;

// noteEvent is app.js's hook for every event of the stream.
function noteEvent(ev) {
  if (!ev.app || !ev.type || ev.type.startsWith('stream.')) return;
  let l = seen.get(ev.app);
  if (!l) seen.set(ev.app, (l = []));
  l.push(ev);
  if (l.length > MAX_SEEN) l.shift();
  if (view.name === ev.app && view.timeline) renderTimeline(state.apps.get(ev.app));
}

// nodes turns children as el() takes them (nested arrays, strings, nulls)
// into nodes, for replaceChildren, which takes neither arrays nor nulls.
const nodes = (...c) => [...el('div', {}, ...c.flat(Infinity)).childNodes];

function table(headers, rows, empty) {
  if (!rows.length) return el('p', { class: 'muted' }, empty);
  // A table wider than a phone scrolls inside its box, not the page.
  return el('div', { class: 'scroll' }, el('table', {}, el('thead', {}, el('tr', {}, headers.map((h) => el('th', {}, h)))),
    el('tbody', {}, rows.map((r) => el('tr', {}, r.map((c) => el('td', {}, c)))))));
}

const list = (title, items) => (items && items.length
  ? el('div', {}, el('h4', {}, title), el('ul', {}, items.map((i) => el('li', {}, i)))) : null);

function enterApp(name) {
  if (view.name === name) return;
  view.name = name;
  view.diff = null;
  view.sync = null;
  view.timeline = null;
  view.history = null;
  closeDialog();
}

// refVersion is a store value's version: the entry's number (Vault KV v2,
// 1Password), or the start of a version id (AWS Secrets Manager's are
// 36-character UUIDs) with the whole id on hover, as a commit is shown;
// '—' for a store that keeps no versions.
function refVersion(r) {
  if (r.versionID) {
    return el('span', { title: r.versionID },
      r.versionID.length > 8 ? r.versionID.slice(0, 8) : r.versionID);
  }
  return r.version ? String(r.version) : '—';
}

// secretRefsSection lists the secrets, configs and environment values the
// deployed release took from secret stores: where from, which version, when
// last rotated; never a value.
function secretRefsSection(a) {
  const refs = a.secretRefs || [];
  if (!refs.length) return null;
  const use = (r) => (r.kind === 'config' ? `config ${r.secret}`
    : r.kind === 'env' ? `${r.service} env ${r.secret}` : r.secret);
  const rows = refs.map((r) => [use(r), r.store, r.path, r.key, refVersion(r),
    r.rotatedRevision ? `${when(r.lastRotated)} (release ${r.rotatedRevision})` : 'never']);
  return el('div', { id: 'secretrefs' }, el('h3', {}, 'Secrets from stores'),
    table(['Used as', 'Store', 'Path', 'Key', 'Version', 'Last rotated'], rows, ''));
}

function renderDetail(name) {
  enterApp(name);
  const a = state.apps.get(name);
  const back = el('a', { href: listHref(), class: 'back' }, '← Applications');
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
    syncPanel(a),
    rolloutPanel(a), // rollout.js
    imagesPanel(a), // images.js
    hooksSection(a),
    el('h3', {}, 'Services'),
    table(['Service', 'Health', 'Running', 'Message'], services, 'No services reported.'),
    secretRefsSection(a),
    el('h3', {}, 'Resources'),
    resourceTree(a),
    el('h3', {}, 'Drift'),
    table(['Service', 'Field', 'Desired', 'Live'], drift, 'No drift.'),
    el('h3', { id: 'diff-heading' }, 'Diff'),
    diffPanel(a, hist),
    el('h3', {}, 'Timeline'),
    timelinePanel(a),
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
    historyTable(a, hist),
  ];
  place($('detail'), nodes(parts));
}

// place makes kids the children of parent without taking out the ones that
// stay: a panel kept across renders is never detached, so it keeps its
// focus, its scroll position and the node a click was aimed at.
function place(parent, kids) {
  const keep = new Set(kids);
  for (const c of [...parent.childNodes]) if (!keep.has(c)) c.remove();
  kids.forEach((k, i) => { if (parent.childNodes[i] !== k) parent.insertBefore(k, parent.childNodes[i] || null); });
}

// historyTable is rebuilt only when the history or the caller's rights
// change, so its buttons stay the nodes a click was aimed at.
function historyTable(a, hist) {
  const sig = JSON.stringify([hist, state.forbidden]);
  if (view.history && view.history.sig === sig) return view.history.node;
  view.history = { sig, node: buildHistory(a, hist) };
  return view.history.node;
}

function buildHistory(a, hist) {
  if (!hist) return el('p', { class: 'muted' }, 'Loading…');
  if (hist.error) return el('p', { class: 'muted' }, 'History unavailable: ' + hist.error);
  const newest = Math.max(0, ...hist.items.map((r) => r.revision));
  return table(['Release', 'Commit', 'Chart', 'Time', 'Trigger', 'Message', ''], hist.items.map((r) => [
    String(r.revision), el('code', { title: r.commit || '' }, shortRev(r.commit)),
    r.chart ? el('span', { title: r.chart.valuesDigest || '' }, `${r.chart.name}-${r.chart.version}`) : '',
    when(r.time), r.trigger || '', r.message || '',
    el('span', { class: 'row-actions' },
      el('button', { type: 'button', class: 'diff-rev', 'data-revision': String(r.revision),
        'aria-label': `Diff revision ${r.revision} against the declared manifest`,
        onclick: () => { showDiff(a.name, String(r.revision)); $('diff-heading')?.scrollIntoView(); } }, 'Diff'),
      r.revision !== newest ? el('button', { type: 'button', class: 'rollback', 'data-revision': String(r.revision),
        disabled: !!state.forbidden, title: state.forbidden || null,
        'aria-label': `Roll back to revision ${r.revision}`,
        onclick: (ev) => confirmRollback(a.name, r.revision, ev.currentTarget) }, 'Rollback') : null),
  ]), 'No releases recorded.');
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
    t.nodeName || t.node ? el('span', { class: 'muted small', title: t.node || '' }, ` on ${t.nodeName || t.node.slice(0, 12)}`) : null,
    // The node is down: the state shown is only what it last reported.
    t.nodeLost ? el('span', { class: 'error small' }, ' (node down: last report)') : null,
    t.since ? el('span', { class: 'muted small', title: when(t.since) }, ` ${ago(t.since)}`) : null,
    // Swarm keeps only so many tasks per slot: at that limit there may have been more.
    t.restarts ? el('span', { class: 'small' + (t.restartsFull ? ' error' : ' muted'), title: 'earlier tasks of this slot' },
      ` restarts: ${t.restartsFull ? '\u2265' : ''}${t.restarts}`) : null,
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
    // A path is a bind mount or anonymous volume, by where it is mounted.
    const vols = s.volumes || [];
    const kinds = [['network', s.networks], ['config', s.configs], ['secret', s.secrets],
      ['volume', vols.filter((v) => !v.startsWith('/'))], ['mount', vols.filter((v) => v.startsWith('/'))]]
      .filter(([, v]) => v && v.length);
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

// hooksSection shows each hook job of the manifest (phase, wave, state,
// exit code, the tail of a failed one's logs) when the controller reports
// them, and nothing otherwise.
function hooksSection(a) {
  const hooks = Array.isArray(a.hooks) ? a.hooks : [];
  if (!hooks.length) return null;
  const took = (h) => (h.startedAt && h.finishedAt
    ? `${Math.max(0, Math.round((new Date(h.finishedAt) - new Date(h.startedAt)) / 1000))}s` : '');
  return [el('h3', {}, 'Hooks'),
    el('div', { id: 'hooks' }, table(['Hook', 'Phase', 'State', 'Revision', 'Took', 'Message'], hooks.map((h) => [
      h.name || '', `${h.phase || ''}${h.wave ? ' wave ' + h.wave : ''}`,
      el('span', { class: 'badge hook-' + (h.state || 'Unknown') }, h.state || 'Unknown'),
      h.revision ? String(h.revision) : '',
      took(h),
      [h.message || '', h.exitCode != null ? el('span', { class: 'muted small' }, ` (exit ${h.exitCode})`) : null,
        (h.logTail || []).length ? el('details', {}, el('summary', { class: 'small' }, 'Last log lines'),
          el('pre', { class: 'log' }, h.logTail.join('\n'))) : null]]), 'No hooks.'))];
}

// ---- actions: sync (with prune and dry run) and refresh ----------------------

// actions renders Sync, its dry-run preview and Refresh. A read-only token
// learns it may not write from the API's 403, which is then shown and
// disables the buttons.
function actions(a) {
  const sp = syncState(a.name);
  if (!sp.bar) {
    const name = a.name;
    const button = (label, onclick, id) => el('button', { type: 'button', id, onclick }, label);
    const prune = el('input', { type: 'checkbox', id: 'sync-prune', onchange: (ev) => { sp.prune = ev.target.checked; } });
    sp.bar = el('div', { class: 'actions' },
      button('Sync', () => sync(name, false), 'sync-now'),
      button('Preview sync', () => sync(name, true), 'sync-preview'),
      el('label', { class: 'small' }, prune, ' Prune'),
      button('Refresh', () => operate(name, 'Refresh', 'refresh', {})),
      el('output', { id: 'op-result', hidden: true }));
  }
  // Built once and updated in place, so a click never lands on a node a
  // re-render just replaced.
  for (const b of sp.bar.querySelectorAll('button')) {
    b.disabled = !!state.forbidden;
    if (state.forbidden) b.title = state.forbidden;
    else b.removeAttribute('title');
  }
  const op = state.ops.get(a.name);
  const out = sp.bar.querySelector('output');
  out.hidden = !op;
  out.className = op && op.ok ? 'ok' : 'error';
  out.textContent = op ? op.text : '';
  return sp.bar;
}

function syncState(name) {
  if (!view.sync || view.sync.name !== name) {
    view.sync = { name, prune: false, bar: null, panel: el('section', { id: 'sync-plan', class: 'plan', hidden: true, 'aria-labelledby': 'sync-plan-title' }) };
  }
  return view.sync;
}

function syncPanel(a) { return syncState(a.name).panel; }

// operate POSTs an operation; the answer, or the refusal, is kept in
// state.ops so it survives re-renders.
async function operate(name, label, path, body, query) {
  let res;
  let r = null;
  try {
    r = await api('POST', `applications/${enc(name)}/${path}${query || ''}`, body);
    res = { ok: r.phase !== 'Failed', text: `${label}: ${r.phase}${r.error ? ' — ' + r.error : r.message ? ' — ' + r.message : ''}` };
  } catch (e) {
    if (e.status === 403) state.forbidden = e.message;
    res = { ok: false, text: `${label} refused: ${e.message}` };
  }
  state.ops.set(name, res);
  render();
  return r;
}

// sync runs a real sync, or a dry run whose plan is previewed with a
// button to then sync for real with the same prune setting.
async function sync(name, dryRun) {
  const sp = syncState(name);
  const prune = sp.prune;
  if (!dryRun) {
    sp.panel.hidden = true;
    sp.panel.replaceChildren();
    await operate(name, 'Sync', 'sync', { prune });
    return;
  }
  sp.panel.hidden = false;
  sp.panel.replaceChildren(...nodes(el('h3', { id: 'sync-plan-title' }, 'Sync preview'), el('p', { class: 'muted', role: 'status' }, 'Planning a dry run…')));
  const r = await operate(name, 'Preview', 'sync', { dryRun: true, prune }, '?wait=true&timeout=5m');
  if (!r || !r.plan) {
    sp.panel.replaceChildren(...nodes(el('h3', { id: 'sync-plan-title' }, 'Sync preview'),
      el('p', { class: 'muted' }, r ? 'The controller sent no plan (' + r.phase + ').' : 'No preview.')));
    return;
  }
  const plan = r.plan;
  const writes = plan.services || [];
  const removals = plan.pendingRemovals || [];
  const nothing = !writes.length && !removals.length && !plan.manifest;
  sp.panel.replaceChildren(...nodes(
    el('h3', { id: 'sync-plan-title' }, 'Sync preview ', el('span', { class: 'muted small' },
      `(dry run${prune ? ', prune' : ''}; nothing was written)`)),
    el('p', {}, 'Planned: ', el('strong', {}, r.action || plan.action || 'unknown'),
      plan.revision ? [' to commit ', el('code', { title: plan.revision }, shortRev(plan.revision))] : null),
    nothing ? el('p', { class: 'muted' }, 'Nothing to write or remove.') : null,
    writes.length ? [el('h4', {}, 'Writes'), serviceChanges(writes.filter((s) => s.change !== 'remove'), 'plan-writes')] : null,
    el('h4', {}, prune ? 'Removals' : 'Removals (prune is off: these stay)'),
    removals.length ? el('ul', { id: 'plan-removals' }, removals.map((x) => el('li', { class: prune ? 'del-item' : 'muted' },
      prune ? 'remove ' : 'would stay: ', x))) : el('p', { class: 'muted' }, 'None.'),
    plan.manifest ? [el('h4', {}, 'Manifest'), sideBySide(plan.manifest)] : null,
    (plan.unavailable || []).length ? el('p', { class: 'muted small' }, 'Unavailable: ' + plan.unavailable.join('; ')) : null,
    el('div', { class: 'actions-row' },
      el('button', { type: 'button', id: 'plan-apply', disabled: !!state.forbidden, onclick: () => sync(name, false) },
        prune ? 'Sync with prune now' : 'Sync now'),
      el('button', { type: 'button', id: 'plan-discard', onclick: () => { sp.panel.hidden = true; sp.panel.replaceChildren(); } }, 'Discard'))));
}

// ---- diff ----------------------------------------------------------------------

// diffPanel compares the declared manifest with the live swarm (the deployed
// manifest as text, and each service field by field) or with a recorded
// revision's manifest, chosen from the history.
function diffPanel(a, hist) {
  if (!view.diff) {
    const sel = el('select', { id: 'diff-against', 'aria-label': 'Compare the declared manifest with' });
    const form = el('form', { class: 'diff-form', 'aria-label': 'Diff options' },
      el('label', { for: 'diff-against' }, 'Declared manifest against '), sel, ' ',
      el('button', { type: 'submit', id: 'diff-show' }, 'Show diff'),
      el('output', { id: 'diff-status', class: 'muted small' }));
    form.addEventListener('submit', (ev) => { ev.preventDefault(); showDiff(view.name, sel.value); });
    view.diff = { panel: el('div', { class: 'diff' }, form, el('div', { id: 'diff-body' })), sel };
  }
  const want = ['live', ...((hist && hist.items) || []).map((r) => String(r.revision))];
  const sel = view.diff.sel;
  if (want.join(',') !== [...sel.options].map((o) => o.value).join(',')) {
    const keep = sel.value;
    sel.replaceChildren(...want.map((v) => el('option', { value: v },
      v === 'live' ? 'the live swarm' : `revision ${v}`)));
    sel.value = want.includes(keep) ? keep : 'live';
  }
  return view.diff.panel;
}

async function showDiff(name, against) {
  diffPanel(state.apps.get(name) || { name }, state.history.get(name));
  const d = view.diff;
  d.sel.value = against;
  const body = d.panel.querySelector('#diff-body');
  const status = d.panel.querySelector('#diff-status');
  status.textContent = 'loading…';
  const path = `applications/${enc(name)}/diff` + (against === 'live' ? '' : `?revision=${enc(against)}&against=declared`);
  let r;
  try {
    r = await api('GET', path);
  } catch (e) {
    status.textContent = '';
    body.replaceChildren(...nodes(el('p', { class: 'error' }, 'Diff unavailable: ' + e.message)));
    return;
  }
  status.textContent = '';
  const live = against === 'live';
  body.replaceChildren(...nodes(
    el('p', { class: 'muted small' }, live ? 'Deployed and running (left) against declared (right).'
      : `Revision ${against} (left) against declared (right).`,
    r.revision ? [' Declared commit ', el('code', { title: r.revision }, shortRev(r.revision)), '.'] : null),
    el('h4', {}, 'Manifest'),
    r.manifest ? sideBySide(r.manifest) : el('p', { class: 'muted', id: 'diff-same' }, 'The manifests are the same.'),
    live ? [el('h4', {}, 'Live services, field by field'),
      (r.services || []).length ? serviceChanges(r.services, 'diff-services') : el('p', { class: 'muted' }, 'Every service matches.'),
      list('A prune would remove', r.pendingRemovals)] : null,
    list('Notes', r.notes),
    (r.unavailable || []).length ? el('p', { class: 'muted small' }, 'Unavailable: ' + r.unavailable.join('; ')) : null));
}

const changeText = {
  create: 'create', update: 'update', drift: 'drifted', remove: 'remove',
  rolledBack: 'rolled back by Swarm', updating: 'updating (compared once settled)', notKept: 'not kept by the daemon',
};

// serviceChanges lists services with their changed fields as two columns:
// declared on the left, live on the right.
function serviceChanges(services, id) {
  return el('div', { id, class: 'svc-changes' }, services.map((s) => el('div', { class: 'svc-change change-' + s.change },
    el('h5', {}, el('span', { class: 'badge change-badge' }, changeText[s.change] || s.change), ' ', s.name),
    (s.fields || []).length ? el('div', { class: 'scroll' }, el('table', { class: 'fields' },
      el('thead', {}, el('tr', {}, el('th', {}, 'Field'), el('th', {}, 'Declared'), el('th', {}, 'Live'))),
      el('tbody', {}, s.fields.map((f) => el('tr', { class: 'changed' },
        el('td', {}, el('code', {}, f.field), f.masked ? el('span', { class: 'muted small' }, ' (masked)') : null),
        el('td', { class: 'side-new' }, el('code', {}, f.desired)),
        el('td', { class: 'side-old' }, el('code', {}, f.live))))))) : null)));
}

// parseUnified turns a unified diff into aligned rows: a run of removed
// lines followed by added ones pairs up line by line as changed, the rest
// of the run shows on one side only.
function parseUnified(text) {
  const out = { from: 'old', to: 'new', rows: [] };
  let ln = 0;
  let rn = 0;
  let dels = [];
  let adds = [];
  const flush = () => {
    for (let i = 0; i < Math.max(dels.length, adds.length); i++) {
      const l = dels[i];
      const r = adds[i];
      out.rows.push({ kind: l && r ? 'change' : l ? 'del' : 'add', l: l && l.text, ln: l && l.n, r: r && r.text, rn: r && r.n });
    }
    dels = [];
    adds = [];
  };
  for (const line of text.split('\n')) {
    if (line.startsWith('--- ') && !out.rows.length && !dels.length) { out.from = line.slice(4).split('\t')[0].trim(); continue; }
    if (line.startsWith('+++ ') && !out.rows.length && !adds.length) { out.to = line.slice(4).split('\t')[0].trim(); continue; }
    const h = line.match(/^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/);
    if (h) {
      flush();
      ln = Number(h[1]) || 1;
      rn = Number(h[2]) || 1;
      if (out.rows.length) out.rows.push({ kind: 'gap' });
      continue;
    }
    if (line.startsWith('-')) dels.push({ text: line.slice(1), n: ln++ });
    else if (line.startsWith('+')) adds.push({ text: line.slice(1), n: rn++ });
    else if (line.startsWith(' ')) {
      flush();
      out.rows.push({ kind: 'same', l: line.slice(1), ln: ln++, r: line.slice(1), rn: rn++ });
    }
  }
  flush();
  return out;
}

// sideBySide renders a unified diff as two columns. Changed lines carry a
// sign as well as a colour, so the mark does not depend on colour alone.
function sideBySide(text) {
  const d = parseUnified(text);
  const sign = { change: ['~', '~'], del: ['−', ''], add: ['', '+'], same: ['', ''] };
  const rows = d.rows.map((row) => {
    if (row.kind === 'gap') return el('tr', { class: 'gap' }, el('td', { colspan: '6' }, '⋯'));
    const [ls, rs] = sign[row.kind];
    return el('tr', { class: 'row-' + row.kind },
      el('td', { class: 'ln' }, row.ln == null ? '' : String(row.ln)),
      el('td', { class: 'mark', 'aria-label': ls ? (row.kind === 'change' ? 'changed' : 'removed') : null }, ls),
      el('td', { class: 'code left' + (row.l == null ? ' blank' : '') }, row.l == null ? '' : row.l),
      el('td', { class: 'ln' }, row.rn == null ? '' : String(row.rn)),
      el('td', { class: 'mark', 'aria-label': rs ? (row.kind === 'change' ? 'changed' : 'added') : null }, rs),
      el('td', { class: 'code right' + (row.r == null ? ' blank' : '') }, row.r == null ? '' : row.r));
  });
  // Fixed layout takes its widths from the columns, not the headers,
  // which span three each.
  const cols = ['ln', 'mark', 'code', 'ln', 'mark', 'code'].map((c) => el('col', { class: 'col-' + c }));
  return el('div', { class: 'scroll' }, el('table', { class: 'sbs', 'aria-label': `${d.from} against ${d.to}` },
    el('colgroup', {}, cols),
    el('thead', {}, el('tr', {}, el('th', { colspan: '3', class: 'side-from' }, d.from), el('th', { colspan: '3', class: 'side-to' }, d.to))),
    el('tbody', {}, rows)));
}

// ---- rollback, confirmed in a dialog -----------------------------------------

const dialog = { node: null, opener: null };

function closeDialog() {
  if (!dialog.node) return;
  const { node, opener } = dialog;
  dialog.node = null;
  if (node.open) node.close();
  node.remove();
  if (opener && opener.isConnected) opener.focus();
  else if (opener) document.querySelector(`button.rollback[data-revision="${opener.dataset.revision}"]`)?.focus();
}

// confirmRollback shows what a rollback to revision would change (the
// deployed manifest against that revision's) in a modal dialog, and only
// its confirm button POSTs the rollback. The dialog keeps Tab inside it and
// Escape cancels.
async function confirmRollback(name, revision, opener) {
  closeDialog();
  const body = el('div', { id: 'rollback-diff' }, el('p', { class: 'muted', role: 'status' }, 'Loading what would change…'));
  const confirm = el('button', { type: 'button', id: 'rollback-confirm', class: 'danger', disabled: true }, `Roll back to revision ${revision}`);
  const cancel = el('button', { type: 'button', id: 'rollback-cancel' }, 'Cancel');
  const node = el('dialog', { id: 'rollback-dialog', class: 'dialog', 'aria-labelledby': 'rollback-title', 'aria-describedby': 'rollback-desc' },
    el('h2', { id: 'rollback-title' }, `Roll back ${name} to revision ${revision}?`),
    el('p', { id: 'rollback-desc' }, 'This redeploys the manifest recorded as revision ', String(revision),
      ' and records it as a new revision. An automated application stays on it until the next commit or an explicit sync.'),
    body,
    el('div', { class: 'actions-row' }, confirm, cancel));
  dialog.node = node;
  dialog.opener = opener;
  cancel.addEventListener('click', closeDialog);
  node.addEventListener('cancel', (ev) => { ev.preventDefault(); closeDialog(); }); // Escape
  node.addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape') { ev.preventDefault(); closeDialog(); return; }
    if (ev.key !== 'Tab') return;
    const f = [...node.querySelectorAll('button, [href], input, select, textarea, [tabindex]:not([tabindex="-1"])')]
      .filter((x) => !x.disabled && x.offsetParent !== null);
    if (!f.length) return;
    const first = f[0];
    const last = f[f.length - 1];
    if (ev.shiftKey && (document.activeElement === first || !node.contains(document.activeElement))) { ev.preventDefault(); last.focus(); }
    else if (!ev.shiftKey && (document.activeElement === last || !node.contains(document.activeElement))) { ev.preventDefault(); first.focus(); }
  });
  confirm.addEventListener('click', async () => {
    confirm.disabled = true;
    closeDialog();
    await operate(name, 'Rollback', 'rollback', { revision });
  });
  document.body.appendChild(node);
  node.showModal();
  cancel.focus();
  try {
    const r = await api('GET', `applications/${enc(name)}/diff?revision=${revision}&against=deployed`);
    if (dialog.node !== node) return;
    body.replaceChildren(...nodes(r.manifest ? sideBySide(r.manifest)
      : el('p', { class: 'muted' }, 'The manifests are the same: the rollback would change nothing.')));
    confirm.disabled = !!state.forbidden;
  } catch (e) {
    if (dialog.node !== node) return;
    body.replaceChildren(...nodes(el('p', { class: 'error' }, 'Cannot show what would change: ' + e.message)));
  }
}

// ---- timeline ------------------------------------------------------------------

function timelinePanel(a) {
  if (!view.timeline) {
    view.timeline = { panel: el('ol', { id: 'timeline', class: 'timeline', 'aria-label': 'Timeline', 'aria-live': 'polite' }), shown: '' };
  }
  renderTimeline(a);
  return view.timeline.panel;
}

// renderTimeline merges the events seen since the page loaded with the
// recorded releases, newest first, and redraws only when they changed.
function renderTimeline(a) {
  if (!a || !view.timeline) return;
  const hist = state.history.get(a.name);
  const items = [
    ...(seen.get(a.name) || []).map((e) => ({ t: e.time, kind: 'event', type: e.type, text: e.message || '', service: e.service, rev: e.revision, key: 'e' + e.id })),
    ...((hist && hist.items) || []).map((r) => ({ t: r.time, kind: 'release', type: `release ${r.revision}`,
      text: [r.trigger, r.message].filter(Boolean).join(' — '), rev: r.commit, key: 'r' + r.revision })),
  ].sort((x, y) => (new Date(y.t) - new Date(x.t)) || (x.key < y.key ? 1 : -1)).slice(0, 100);
  const sig = items.map((i) => i.key).join(',');
  if (sig === view.timeline.shown) return;
  view.timeline.shown = sig;
  view.timeline.panel.replaceChildren(...(items.length ? items.map((i) => el('li', { class: 'tl-' + i.kind },
    el('time', { datetime: i.t || '', title: when(i.t) }, i.t ? new Date(i.t).toLocaleTimeString() : '—'), ' ',
    el('span', { class: 'badge tl-type' }, i.type), ' ',
    i.service ? el('span', { class: 'muted' }, i.service + ': ') : null, i.text,
    i.rev ? [' ', el('code', { class: 'muted', title: i.rev }, shortRev(i.rev))] : null))
    : [el('li', { class: 'muted' }, 'Nothing yet; events appear here as they happen.')]));
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


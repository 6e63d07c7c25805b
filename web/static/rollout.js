// Flotilla operator UI: the rollouts panel of one application's view. For
// each canary or blue/green rollout it shows where it stands (phase, step,
// the traffic split as a bar, replicas, the last analysis verdict with its
// evidence, the reason, the next check, an error) and, to a caller who may
// operate the application, the commands that phase takes.
//
// Like detail.js it only defines functions and state, and uses app.js's
// helpers; detail.js places the panel. The reason, metric and values come
// from the controller's analysis of a release an untrusted repository
// declares, so they become text nodes only.
'use strict';

// The panel is rebuilt only when what it shows changes, so a button stays
// the node a click was aimed at across the re-renders every event brings.
let rolloutView = { name: null, sig: '', node: null, ops: new Map() }; // ops: service -> {ok, text}

// rolloutCommands are the commands of POST …/rollout/{command}, with what
// the confirmation dialog says of those that need one.
const rolloutCommands = {
  promote: { label: 'Promote', confirm: (r) => (r.phase === 'Aborted'
    ? `Ship the aborted revision of ${r.service} anyway? The stable service is updated to it under its own traffic.`
    : `Promote the rollout of ${r.service}? The remaining steps and pauses are skipped: the stable service gets the new revision now, then the rollout finishes.`) },
  abort: { label: 'Abort', confirm: (r) => `Abort the rollout of ${r.service}? All traffic goes back to the stable service and ${r.colour || 'the new colour'} is scaled to zero.` },
  pause: { label: 'Pause' },
  resume: { label: 'Resume' },
  retry: { label: 'Retry' },
};

// commandsFor lists the commands that act in a rollout's phase (the others
// the controller ignores, see docs/rollouts.md).
function commandsFor(r) {
  switch (r.phase) {
    case 'Progressing': case 'Previewing': case 'Switched':
      return ['promote', 'abort', r.paused ? 'resume' : 'pause'];
    case 'Aborted':
      return ['promote', 'retry'];
    default: // Promoting, Completed, Superseded, or nothing rolled out yet
      return [];
  }
}

// mayOperate: the application's own answer said the caller may operate it.
// Until that answer arrives (the list's summary does not say) no button
// shows, so a viewer never sees one flash.
const mayOperate = (name) => state.operate.get(name) === true && !state.forbidden;

function rolloutPanel(a) {
  if (rolloutView.name !== a.name) rolloutView = { name: a.name, sig: '', node: null, ops: new Map() };
  const rs = Array.isArray(a.rollouts) ? a.rollouts : [];
  if (!rs.length) return null;
  const can = mayOperate(a.name);
  const sig = JSON.stringify([rs, can, [...rolloutView.ops]]);
  if (sig !== rolloutView.sig) {
    rolloutView.sig = sig;
    rolloutView.node = el('section', { id: 'rollouts', class: 'rollouts', 'aria-labelledby': 'rollouts-title' },
      el('h3', { id: 'rollouts-title' }, 'Rollouts'),
      rs.map((r) => rolloutCard(a.name, r, can)));
  }
  return rolloutView.node;
}

function rolloutCard(name, r, can) {
  const aborted = r.phase === 'Aborted';
  const canary = r.strategy !== 'blueGreen';
  const op = rolloutView.ops.get(r.service);
  const row = (label, ...value) => [el('dt', {}, label), el('dd', {}, ...value)];
  return el('article', { class: 'rollout' + (aborted ? ' aborted' : ''), 'data-service': r.service || '',
    'aria-label': `Rollout of ${r.service}` },
  el('h4', {}, r.service || '', ' ',
    el('span', { class: 'badge rollout-strategy' }, canary ? 'canary' : 'blue/green'), ' ',
    el('span', { class: 'badge rollout-phase phase-' + (r.phase || 'None') }, r.phase || 'not started'),
    r.paused ? [' ', el('span', { class: 'badge rollout-paused' }, 'paused')] : null,
    // A command accepted and not yet deployed by a pass; the controller
    // holds it in memory only, so one that restarts first forgets it.
    r.pending ? [' ', el('span', { class: 'badge rollout-pending', title: 'accepted; the next pass deploys it' },
      `${r.pending} pending`)] : null),
  aborted ? el('div', { class: 'rollout-abort error', role: 'note' },
    el('strong', {}, 'Aborted: '), r.reason || 'no reason given',
    r.metric || r.values ? el('div', { class: 'rollout-evidence' }, 'Evidence: ',
      r.metric ? el('code', { class: 'rollout-metric' }, r.metric) : null,
      r.values ? [r.metric ? ' = ' : '', el('code', { class: 'rollout-values' }, r.values)] : null) : null) : null,
  r.error ? el('div', { class: 'rollout-error error' }, 'Cannot decide: ', r.error,
    el('span', { class: 'muted small' }, ' (all traffic stays on the stable service)')) : null,
  trafficBar(r, canary),
  el('dl', { class: 'meta rollout-meta' },
    row('Colour', r.colour || '—'),
    canary ? row('Step', el('span', { class: 'rollout-step' }, `step ${r.step ?? 0}`),
      el('span', { class: 'muted small' }, ` at ${r.weight ?? 0}% (steps count from 0)`)) : null,
    canary && Array.isArray(r.steps) && r.steps.length ? row('Steps', stepList(r)) : null,
    row('Replicas', String(r.replicas ?? 0), el('span', { class: 'muted small' }, ` of ${r.colour || 'the new colour'}`)),
    row('Revision', r.revision ? el('code', { title: r.revision }, shortRev(r.revision)) : '—'),
    row('Analysis', r.verdict ? el('span', { class: 'badge verdict-' + r.verdict }, r.verdict) : el('span', { class: 'muted' }, 'no verdict yet'),
      !aborted && (r.metric || r.values) ? [' ', el('code', {}, r.metric || ''), r.values ? [' ', el('code', {}, r.values)] : null] : null),
    !aborted ? row('Reason', el('span', { class: 'rollout-reason' }, r.reason || '—')) : null,
    row('Next check', r.nextCheck ? el('time', { datetime: r.nextCheck, title: when(r.nextCheck) }, new Date(r.nextCheck).toLocaleTimeString())
      : el('span', { class: 'muted' }, 'on a new revision or a command'))),
  can ? rolloutButtons(name, r) : null,
  op ? el('output', { class: 'rollout-result small ' + (op.ok ? 'ok' : 'error') }, op.text) : null);
}

// stepList is the canary's declared steps, the current one marked: where
// the rollout stands in its whole plan.
function stepList(r) {
  const cur = Number(r.step) || 0;
  const items = r.steps.map((w, i) => el('li', i === cur && r.phase === 'Progressing'
    ? { class: 'current', 'aria-current': 'step' } : {}, `${Number(w) || 0}%`));
  return el('ol', { class: 'rollout-steps', start: '0' }, ...items);
}

// trafficBar draws the split between the stable service and the new colour
// as two segments, with the numbers in text too, so the split does not
// depend on the bar being seen.
function trafficBar(r, canary) {
  const w = Math.max(0, Math.min(100, Number(r.weight) || 0));
  const stable = `${r.service} (stable) ${100 - w}%`;
  const next = `${r.colour || (canary ? 'canary' : 'preview')} (${canary ? 'canary' : 'preview'}) ${w}%`;
  const seg = (cls, pct) => {
    const s = el('span', { class: 'seg ' + cls }, pct >= 15 ? `${pct}%` : '');
    s.style.width = pct + '%'; // through the CSSOM: the policy forbids style attributes
    return s;
  };
  return el('div', { class: 'rollout-traffic' },
    el('div', { class: 'weight-bar', role: 'img', 'aria-label': `Traffic: ${stable}, ${next}` },
      seg('seg-stable', 100 - w), seg('seg-new', w)),
    el('div', { class: 'small weight-legend' },
      el('span', { class: 'key key-stable' }, stable), ' · ', el('span', { class: 'key key-new' }, next)));
}

function rolloutButtons(name, r) {
  const cmds = commandsFor(r);
  if (!cmds.length) return null;
  return el('div', { class: 'actions-row rollout-actions' }, cmds.map((c) => {
    const spec = rolloutCommands[c];
    return el('button', { type: 'button', class: 'rollout-cmd' + (c === 'abort' ? ' danger' : ''), 'data-command': c,
      'aria-label': `${spec.label} the rollout of ${r.service}`,
      onclick: (ev) => (spec.confirm ? confirmRolloutCommand(name, r, c, ev.currentTarget) : rolloutCommand(name, r.service, c)) },
    spec.label);
  }));
}

// confirmRolloutCommand asks before a promote or an abort, in a modal
// dialog like the rollback's: only its confirm button sends the command.
function confirmRolloutCommand(name, r, command, opener) {
  closeDialog();
  const spec = rolloutCommands[command];
  const confirm = el('button', { type: 'button', id: 'rollout-confirm', class: command === 'abort' ? 'danger' : null },
    `${spec.label} ${r.service}`);
  const cancel = el('button', { type: 'button', id: 'rollout-cancel' }, 'Cancel');
  const node = el('dialog', { id: 'rollout-dialog', class: 'dialog', 'aria-labelledby': 'rollout-title', 'aria-describedby': 'rollout-desc' },
    el('h2', { id: 'rollout-title' }, `${spec.label} the rollout of ${r.service} in ${name}?`),
    el('p', { id: 'rollout-desc' }, spec.confirm(r)),
    el('div', { class: 'actions-row' }, confirm, cancel));
  dialog.node = node;
  dialog.opener = opener;
  cancel.addEventListener('click', closeDialog);
  node.addEventListener('cancel', (ev) => { ev.preventDefault(); closeDialog(); }); // Escape
  confirm.addEventListener('click', () => {
    confirm.disabled = true;
    closeDialog();
    rolloutCommand(name, r.service, command);
  });
  document.body.appendChild(node);
  node.showModal();
  cancel.focus();
}

// rolloutCommand POSTs the command through api(), which sends the token and
// the header every write needs. The answer (Queued: the next pass acts on
// it) or the refusal stays under the rollout until the next command; a 403
// hides the buttons, as it disables the others.
async function rolloutCommand(name, service, command) {
  const label = rolloutCommands[command].label;
  let res;
  try {
    const r = await api('POST', `applications/${enc(name)}/rollout/${command}`, { service });
    res = { ok: true, text: `${label}: ${r.phase}${r.message ? ' — ' + r.message : ''}` };
  } catch (e) {
    if (e.status === 403) state.forbidden = e.message;
    res = { ok: false, text: `${label} refused: ${e.message}` };
  }
  if (rolloutView.name === name) rolloutView.ops.set(service, res);
  render();
}

// Flotilla operator UI: the images panel of one application's view. For an
// application with image updates it shows what the last run found: each
// marked field with the image it follows, its value in git, the newest
// reference the registry offered and the outcome (an update, current, or
// held back: backwards, vanished, no candidate, an error) with its reason,
// and the run's last commit and last error.
//
// Like rollout.js it only defines functions, and uses app.js's helpers;
// detail.js places the panel. Tags come from registries and errors from
// registries and git remotes, none of them trusted, so everything becomes
// text nodes only. The panel follows the event stream like the rest of the
// page: image.committed and image.held name the application, which app.js
// re-reads.
'use strict';

// imageOutcomes says how each outcome reads. The held ones wrote nothing
// and wait for the registry or the policy to change.
const imageOutcomes = {
  update: { label: 'update', title: 'a newer reference was chosen and written' },
  current: { label: 'current', title: 'git already has the newest reference' },
  backwards: { label: 'backwards', held: true, title: 'the newest candidate is older than the value in git; nothing is written' },
  vanished: { label: 'vanished', held: true, title: 'the tag in git is no longer in the registry and nothing newer is; nothing is written' },
  'no-candidate': { label: 'no candidate', held: true, title: 'no tag satisfies the policy; nothing is written' },
  error: { label: 'error', held: true, title: 'the field could not be decided or written' },
};

// Rebuilt only when the section changes, like the history table.
let imagesView = { name: null, sig: '', node: null };

function imagesPanel(a) {
  const im = a.images;
  if (!im) return null; // no imageUpdates, or no run yet
  const sig = JSON.stringify([a.name, im]);
  if (imagesView.name === a.name && imagesView.sig === sig) return imagesView.node;
  imagesView = { name: a.name, sig, node: buildImages(im) };
  return imagesView.node;
}

function buildImages(im) {
  const fields = Array.isArray(im.fields) ? im.fields : [];
  const held = fields.filter((f) => (imageOutcomes[f.outcome] || {}).held).length;
  const row = (label, ...value) => [el('dt', {}, label), el('dd', {}, ...value)];
  const time = (t) => el('time', { datetime: t, title: when(t) }, when(t));
  return el('section', { id: 'images', class: 'images', 'aria-labelledby': 'images-title' },
    el('h3', { id: 'images-title' }, 'Images'),
    el('dl', { class: 'meta images-meta' },
      row('Last run', im.lastRun ? time(im.lastRun) : el('span', { class: 'muted' }, 'not yet')),
      im.lastCommit
        ? row('Last commit', el('code', { class: 'images-commit', title: im.lastCommit }, shortRev(im.lastCommit)),
          im.lastCommitTime ? ' ' : null, im.lastCommitTime ? time(im.lastCommitTime) : null)
        : row('Last commit', el('span', { class: 'muted' }, 'none since the controller started')),
      im.pullRequest ? row('Pull request', pullRequestLink(im.pullRequest),
        el('span', { class: 'muted small' }, ` ${im.pullRequest.branch || ''} into ${im.pullRequest.base || ''}`)) : null,
      row('Fields', `${fields.length} marked`, held ? el('span', { class: 'images-held-count' }, `, ${held} held back`) : null)),
    im.lastError ? el('div', { class: 'images-error error', role: 'note' },
      el('strong', {}, 'Last run failed: '), im.lastError,
      el('span', { class: 'muted small' }, ' (retried next interval)')) : null,
    fields.length ? imageTable(fields) : el('p', { class: 'muted' }, 'No marked field reported.'));
}

// pullRequestLink links the pull request the updates are proposed in. The
// address comes from the forge's answer, so only an http(s) one becomes a
// link: a javascript: or data: address is shown as text, never followed.
function pullRequestLink(pr) {
  const label = `#${Number(pr.number) || 0}`;
  let safe = false;
  try { safe = ['http:', 'https:'].includes(new URL(pr.url).protocol); } catch (e) { safe = false; }
  return safe ? el('a', { class: 'images-pr', href: pr.url, rel: 'noopener noreferrer', target: '_blank' }, label)
    : el('span', { class: 'images-pr' }, label);
}

// shortRef shows a digest by its first 12 hex digits; the whole reference
// is the element's title, and what a copy takes.
const digestRe = /sha256:([0-9a-f]{12})[0-9a-f]{52}/g;
function refCode(s) {
  if (!s) return el('span', { class: 'muted' }, '—');
  const short = s.replace(digestRe, 'sha256:$1…');
  return el('code', short === s ? {} : { title: s, 'aria-label': s }, short);
}

// imageTable has one row per marked field. Below 720 px each row becomes a
// card whose cells carry their column's name (data-label, shown by CSS).
function imageTable(fields) {
  const head = ['Image and field', 'Current', 'Newest', 'Outcome', 'Reason'];
  const cell = (label, ...c) => el('td', { 'data-label': label }, ...c);
  const rows = fields.map((f) => {
    const o = imageOutcomes[f.outcome] || { label: f.outcome || 'unknown', title: '' };
    const heldBadge = o.held && f.outcome !== 'error';
    return el('tr', { class: 'image-field' + (o.held ? ' held' : ''), 'data-outcome': f.outcome || '' },
      cell(head[0], el('code', { class: 'image-name' }, f.image || ''),
        el('div', { class: 'muted small image-where' }, f.file || '', ' ', el('code', {}, f.field || ''))),
      cell(head[1], refCode(f.current)),
      cell(head[2], refCode(f.newest)),
      cell(head[3], heldBadge ? el('span', { class: 'badge image-held' }, 'held') : null, heldBadge ? ' ' : null,
        el('span', { class: 'badge outcome outcome-' + (imageOutcomes[f.outcome] ? f.outcome : 'unknown'), title: o.title }, o.label)),
      el('td', { class: 'image-reason', 'data-label': head[4] }, f.reason || ''));
  });
  return el('div', { class: 'scroll' }, el('table', { class: 'images-table' },
    el('thead', {}, el('tr', {}, head.map((h) => el('th', { scope: 'col' }, h)))),
    el('tbody', {}, rows)));
}

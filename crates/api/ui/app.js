// The Trainyard dashboard: routing, live updates, authentication,
// keyboard shortcuts and timing. Each view lives in /ui/views/NAME.js
// and exports `mount(root, route, app)`, which builds the view's skeleton
// and returns a controller `{refresh(update) → cycle number, destroy()}`:
// `refresh` fetches the view's data and renders it into `root` (in place
// on updates, keeping scroll, focus and form input).

import { api, ApiError, authHeaders, esc, onUnauthorized, setNow, setToken, token, afterPaint } from '/ui/util.js';
import * as queues from '/ui/views/queues.js';
import * as jobs from '/ui/views/jobs.js';
import * as job from '/ui/views/job.js';
import * as gpus from '/ui/views/gpus.js';
import * as evictions from '/ui/views/evictions.js';

const VIEWS = { queues, jobs, job, gpus, evictions };

// What the browser tests and the benchmark read.
const perf = (window.__trainyard = { render: {}, updates: [] });

const $ = (sel) => document.querySelector(sel);

// ---------------------------------------------------------------- routes

/**
 * The route of a hash: `#/jobs?queue=a` → {view: 'jobs', args: [], params}.
 * `#/job/NS/NAME` → {view: 'job', args: [NS, NAME]}.
 */
function parseHash(hash) {
  const h = (hash || '').replace(/^#\/?/, '');
  const qi = h.indexOf('?');
  const path = qi < 0 ? h : h.slice(0, qi);
  const params = new URLSearchParams(qi < 0 ? '' : h.slice(qi + 1));
  const parts = path.split('/').filter(Boolean).map((p) => {
    try { return decodeURIComponent(p); } catch { return p; }
  });
  const view = VIEWS[parts[0]] ? parts[0] : 'queues';
  return { view, args: parts.slice(1), params };
}

/** Replace the current hash's parameters without a new history entry or a remount. */
function setParams(params) {
  const r = current.route;
  const base = '#/' + [r.view, ...r.args.map(encodeURIComponent)].join('/');
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v) q.set(k, v);
  const s = q.toString();
  history.replaceState(null, '', base + (s ? '?' + s : ''));
  r.params = q;
}

// ---------------------------------------------------------------- the current view

const current = { route: null, ctl: null, root: null, mountedAt: 0 };
let lastCycle = 0; // the newest cycle number the stream announced

// The refresh in flight, and whether another was asked for meanwhile.
let inflight = null;
let again = false;

/** Show the view of the current hash (a fresh `main#view`). */
function show() {
  const route = parseHash(location.hash);
  if (current.ctl && current.ctl.destroy) current.ctl.destroy();
  const old = $('#view');
  const root = document.createElement('main');
  root.id = 'view';
  root.tabIndex = -1;
  root.dataset.view = route.view;
  root.setAttribute('aria-busy', 'true');
  old.replaceWith(root);
  for (const a of document.querySelectorAll('nav a[data-view]')) {
    const on = a.dataset.view === route.view || (route.view === 'job' && a.dataset.view === 'jobs');
    if (on) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  }
  current.route = route;
  current.root = root;
  current.ctl = VIEWS[route.view].mount(root, route, app);
  document.title = 'Trainyard · ' + (route.view === 'job' ? route.args.join('/') : route.view);
  inflight = null;
  again = false;
  refresh(false);
}

/**
 * Refresh the current view; coalesced: at most one in flight, and one
 * more after it when asked for meanwhile.
 */
function refresh(update = true) {
  if (inflight) { again = true; return inflight; }
  const ctl = current.ctl;
  const p = run(ctl, update).finally(() => {
    if (inflight !== p) return; // the view changed meanwhile
    inflight = null;
    if (again && current.ctl === ctl) { again = false; refresh(true); }
  });
  inflight = p;
  return p;
}

/** One refresh of `ctl`, timed, with its errors shown in the view. */
async function run(ctl, update) {
  const root = current.root;
  const view = current.route.view;
  const t0 = performance.now();
  const frames = watchFrames();
  let cycle;
  try {
    cycle = await ctl.refresh(update);
    if (current.ctl !== ctl) return;
    clearError(root);
  } catch (e) {
    if (current.ctl !== ctl) return;
    showError(root, e, update);
    frames.stop();
    if (!again) root.removeAttribute('aria-busy');
    return;
  }
  await afterPaint();
  const ms = performance.now() - t0;
  const longest = await frames.stop();
  if (current.ctl !== ctl) return;
  if (!again) root.removeAttribute('aria-busy'); // else the next refresh clears it
  if (cycle === undefined || cycle === null) cycle = lastCycle;
  root.dataset.cycle = String(cycle);
  const live = $('#live');
  live.dataset.cycle = String(cycle);
  if (!update && perf.render[view] === undefined) perf.render[view] = Math.round(ms);
  else if (update) {
    perf.updates.push({ view, cycle, ms: Math.round(ms), longestFrameMs: Math.round(longest) });
    if (perf.updates.length > 200) perf.updates.shift();
  }
}

/** The error of a failed refresh: in place of the view on the first load, else above it. */
function showError(root, e, update) {
  const msg = e instanceof ApiError ? e.message : 'The page failed: ' + (e && e.message);
  if (!(e instanceof ApiError)) console.error(e);
  let box = root.querySelector(':scope > .error');
  if (!box) {
    box = document.createElement('div');
    box.className = 'error';
    box.setAttribute('role', 'alert');
    root.prepend(box);
  }
  const what = e.status === 401 ? 'Sign-in needed'
    : e.status === 403 ? 'Not allowed'
    : e.status === 404 ? 'Not found'
    : update ? 'Update failed' : 'Could not load';
  box.innerHTML = `<strong>${esc(what)}:</strong> ${esc(msg)}` +
    (e.status === 401 ? ' <button type="button" data-action="token">Enter a token</button>' : '') +
    ' <button type="button" data-action="retry">Retry</button>';
}

function clearError(root) {
  const box = root.querySelector(':scope > .error');
  if (box) box.remove();
}

// ---------------------------------------------------------------- frame watch

// Long animation frames (or long tasks) as the browser reports them.
const longFrames = [];
try {
  const type = PerformanceObserver.supportedEntryTypes.includes('long-animation-frame') ? 'long-animation-frame'
    : PerformanceObserver.supportedEntryTypes.includes('longtask') ? 'longtask' : null;
  if (type) {
    new PerformanceObserver((list) => {
      for (const e of list.getEntries()) longFrames.push(e);
      if (longFrames.length > 500) longFrames.splice(0, longFrames.length - 500);
    }).observe({ type, buffered: false });
  }
} catch { /* no PerformanceObserver */ }

/**
 * Watch frames from now: `stop()` resolves to the longest frame seen, the
 * larger of the longest gap between animation frames and the longest
 * long-animation-frame entry in the window.
 */
function watchFrames() {
  const start = performance.now();
  let last = start;
  let maxGap = 0;
  let on = true;
  const tick = (t) => {
    maxGap = Math.max(maxGap, t - last);
    last = t;
    if (on) requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
  return {
    stop() {
      on = false;
      const end = performance.now();
      // Let the observer deliver the last frame's entry.
      return new Promise((r) => setTimeout(() => {
        let m = maxGap;
        for (const e of longFrames) {
          if (e.startTime + e.duration >= start && e.startTime <= end) m = Math.max(m, e.duration);
        }
        r(m);
      }, 0));
    },
  };
}

// ---------------------------------------------------------------- live stream

let streamCtl = null;
let backoff = 1000;

function setLive(text, state) {
  const live = $('#live');
  live.querySelector('.txt').textContent = text;
  live.dataset.state = state;
}

function announce(text) {
  const a = $('#announce');
  a.textContent = '';
  setTimeout(() => { a.textContent = text; }, 50);
}

/**
 * Read /ui/api/stream with fetch (the Authorization header rules out
 * EventSource), parse its server-sent events, and refresh the view on each
 * `cycle` event; reconnect with backoff.
 */
async function stream() {
  if (streamCtl) streamCtl.abort();
  const ctl = new AbortController();
  streamCtl = ctl;
  let wasLive = false;
  try {
    const res = await fetch('/ui/api/stream', { headers: { ...authHeaders(), Accept: 'text/event-stream' }, signal: ctl.signal, cache: 'no-store' });
    if (res.status === 401) {
      setLive('signed out', 'off');
      showTokenForm();
      return; // the token form restarts the stream
    }
    if (!res.ok || !res.body) throw new Error('HTTP ' + res.status);
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    let buf = '';
    let event = 'message';
    let data = [];
    setLive(lastCycle ? 'live · cycle ' + lastCycle : 'live', 'live');
    if (!wasLive) announce('Live updates connected');
    wasLive = true;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        let line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line.endsWith('\r')) line = line.slice(0, -1);
        if (line === '') { // end of an event
          if (data.length) onEvent(event, data.join('\n'));
          event = 'message';
          data = [];
        } else if (line.startsWith(':')) {
          // comment (keep-alive)
        } else {
          const c = line.indexOf(':');
          const field = c < 0 ? line : line.slice(0, c);
          let v = c < 0 ? '' : line.slice(c + 1);
          if (v.startsWith(' ')) v = v.slice(1);
          if (field === 'event') event = v;
          else if (field === 'data') data.push(v);
        }
      }
      backoff = 1000; // reading works: reset the backoff
    }
  } catch (e) {
    if (ctl.signal.aborted) return;
  }
  if (ctl.signal.aborted) return;
  // Reconnect with exponential backoff (1 s … 30 s, jittered).
  setLive('reconnecting…', 'reconnecting');
  if (wasLive) announce('Live updates lost, reconnecting');
  const wait = backoff * (0.75 + Math.random() / 2);
  backoff = Math.min(backoff * 2, 30000);
  setTimeout(() => { if (streamCtl === ctl) stream(); }, wait);
}

function onEvent(event, data) {
  if (event === 'error') {
    // A cycle the server could not send (it goes on with the next).
    let msg = data;
    try { msg = JSON.parse(data).error || data; } catch { /* plain text */ }
    $('#live').title = 'stream error: ' + msg;
    return;
  }
  if (event !== 'cycle') return;
  let msg;
  try { msg = JSON.parse(data); } catch { return; }
  const c = msg.cycle || {};
  lastCycle = Number(c.number) || lastCycle;
  setNow(c.timeMs);
  setLive('live · cycle ' + lastCycle, 'live');
  const live = $('#live');
  live.title = `cycle ${lastCycle}: ${msg.binds ?? 0} binds, ${msg.evictions ?? 0} evictions, ${msg.pending ?? 0} pending`;
  if (current.ctl && current.ctl.relevant && !current.ctl.relevant(msg)) {
    // The view says nothing it shows changed: only its cycle moves on.
    return;
  }
  refresh(true);
}

// ---------------------------------------------------------------- auth

function showTokenForm(message) {
  const dlg = $('#token-dialog');
  if (!dlg.hidden) return;
  dlg.hidden = false;
  $('#token-msg').textContent = message || '';
  const input = $('#token-input');
  input.value = '';
  input.focus();
}

function hideTokenForm() { $('#token-dialog').hidden = true; }

onUnauthorized((e) => showTokenForm(e.message));

function setupAuth() {
  $('#token-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const t = $('#token-input').value.trim().replace(/^Bearer\s+/i, '');
    setToken(t);
    hideTokenForm();
    updateSignout();
    whoami();
    show();
    stream();
  });
  $('#token-cancel').addEventListener('click', hideTokenForm);
  $('#signout').addEventListener('click', () => {
    setToken('');
    updateSignout();
    show();
    stream();
  });
  updateSignout();
}

function updateSignout() { $('#signout').hidden = !token(); }

async function whoami() {
  try {
    const w = await api('whoami');
    $('#whoami').textContent = w.user ? w.user : '';
    $('#whoami').title = `scheduler ${w.scheduler || ''}${w.trusted ? ' · trusted' : ''}`;
  } catch { /* a 401 opens the token form */ }
}

// ---------------------------------------------------------------- keyboard

let gPending = 0;

function toggleHelp(show) {
  const h = $('#help');
  h.hidden = show === undefined ? !h.hidden : !show;
  if (!h.hidden) h.querySelector('button').focus();
}

function setupKeys() {
  document.addEventListener('keydown', (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const t = ev.target;
    const typing = t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName));
    if (ev.key === 'Escape') {
      if (!$('#help').hidden) { toggleHelp(false); ev.preventDefault(); }
      else if (!$('#token-dialog').hidden) hideTokenForm();
      else if (typing) t.blur();
      return;
    }
    if (typing) return;
    if (gPending && Date.now() - gPending < 1500) {
      gPending = 0;
      const to = { q: 'queues', j: 'jobs', g: 'gpus', e: 'evictions' }[ev.key];
      if (to) { ev.preventDefault(); location.hash = '#/' + to; }
      return;
    }
    if (ev.key === 'g') { gPending = Date.now(); return; }
    if (ev.key === '?') { ev.preventDefault(); toggleHelp(); return; }
    if (ev.key === '/') {
      ev.preventDefault();
      const f = document.querySelector('#filter-text');
      if (f) f.focus();
      else { sessionStorage.setItem('trainyard-focus-filter', '1'); location.hash = '#/jobs'; }
    }
  });
  $('#help-btn').addEventListener('click', () => toggleHelp());
  $('#help-close').addEventListener('click', () => toggleHelp(false));
  // Retry / token buttons inside error boxes.
  document.addEventListener('click', (ev) => {
    const b = ev.target.closest('[data-action]');
    if (!b) return;
    if (b.dataset.action === 'retry') refresh(true);
    if (b.dataset.action === 'token') showTokenForm();
  });
}

// ---------------------------------------------------------------- start

/** What views see of the app. */
const app = {
  refresh: () => refresh(true),
  /** Mark the view busy until its next refresh completes (a filter changed). */
  busy() { if (current.root) current.root.setAttribute('aria-busy', 'true'); },
  setParams,
  get lastCycle() { return lastCycle; },
  announce,
};

setupAuth();
setupKeys();
window.addEventListener('hashchange', show);
if (!location.hash) history.replaceState(null, '', '#/queues');
show();
whoami();
stream();

// Jobs (#/jobs?queue=Q&namespace=N&user=U&state=S&q=TEXT&sort=COL&dir=asc|desc):
// every job the caller sees, filtered on the server (queue, namespace,
// user, state) and by name here (q), sortable, with pending reasons and
// start forecasts (fetched after the list). The table is virtualised:
// only the visible rows are in the DOM, at a fixed height, between two
// spacer rows, so 50,000 jobs stay fast.
//
// The list itself lives in a worker (/ui/worker.js: JobStore): it fetches
// and parses /ui/api/jobs (17.5 MB at 50,000 jobs), filters by name, sorts
// and merges the forecasts there; this page asks it for the rows in view
// (and some around them) and draws only those. Without workers the same
// store runs here. Live updates are throttled: after a refresh of T ms the
// next starts no sooner than max(2 s, 3 × T) after it ended (a cycle
// meanwhile is kept for then); filters and sorting apply at once.

import { api, apiError, apiURL, authHeaders, esc, gpus, dur, durShort, rel, clock, fullTime, jobHref, setNow, now, STATES } from '/ui/util.js';
import { JobStore, timeLeft as timeLeftAt } from '/ui/worker.js';

const ROW_H = 30;      // px; keep in step with style.css (.vtable tbody tr)
const OVERSCAN = 12;   // rows rendered above and below the visible ones
const PREFETCH = 150;  // rows kept here beyond the rendered ones: scrolling draws without asking
const MIN_GAP_MS = 2000; // live refreshes: at least this long between one's end and the next's start,
const GAP_FACTOR = 3;    // and at least this many times the last one's duration

// Columns: key, header, class (their sort values: worker.js, SORT).
const COLS = [
  { key: 'state', label: 'State', cls: 'c-state' },
  { key: 'job', label: 'Job', cls: 'c-job' },
  { key: 'queue', label: 'Queue', cls: 'c-queue' },
  { key: 'pods', label: 'Pods', cls: 'c-pods num' },
  { key: 'gpus', label: 'GPUs', cls: 'c-gpus num' },
  { key: 'reason', label: 'Reason', cls: 'c-reason' },
  { key: 'forecast', label: 'Expected start', cls: 'c-forecast' },
  { key: 'age', label: 'Age', cls: 'c-age num' },
  { key: 'walltime', label: 'Walltime · left', cls: 'c-wall' },
  { key: 'placement', label: 'Placement', cls: 'c-place' },
];

/** Seconds of walltime left for a started job with a walltime, else null. */
function timeLeft(j) { return timeLeftAt(j, now()); }

/**
 * The job store: a worker, else (no workers, or it failed to start) a
 * JobStore on this thread. `post(message)` → its answer (worker.js).
 */
function openStore() {
  let local = null;
  let worker = null;
  let next = 1;
  const waiting = new Map(); // id → [resolve, message]
  function goLocal() {
    if (worker) { worker.terminate(); worker = null; }
    if (!local) local = new JobStore();
    const left = [...waiting.values()];
    waiting.clear();
    for (const [resolve, m] of left) local.handle(m).then(resolve);
  }
  try {
    worker = new Worker('/ui/worker.js', { type: 'module' });
    worker.onmessage = (ev) => {
      const a = ev.data;
      const w = waiting.get(a.id);
      if (!w) return;
      waiting.delete(a.id);
      w[0](a);
    };
    // The worker could not start (blocked, failed to load): run the store here.
    worker.onerror = (ev) => { if (ev && ev.preventDefault) ev.preventDefault(); goLocal(); };
  } catch {
    local = new JobStore();
  }
  return {
    post(m) {
      if (local) return local.handle(m);
      return new Promise((resolve) => {
        const id = next++;
        waiting.set(id, [resolve, m]);
        worker.postMessage({ ...m, id });
      });
    },
    close() {
      if (worker) worker.terminate();
      worker = null;
      waiting.clear();
    },
  };
}

export function mount(root, route, app) {
  const p = route.params;
  root.innerHTML = `
    <div class="toolbar filters" role="search" aria-label="Filter jobs">
      <h1>Jobs</h1>
      <label>Queue <input id="filter-queue" list="queue-list" value="${esc(p.get('queue') || '')}" placeholder="any" size="12" autocomplete="off"></label>
      <label>Namespace <input id="filter-namespace" value="${esc(p.get('namespace') || '')}" placeholder="any" size="10" autocomplete="off"></label>
      <label>User <input id="filter-user" value="${esc(p.get('user') || '')}" placeholder="any" size="8" autocomplete="off"></label>
      <label>State <select id="filter-state">
        ${['', 'pending', 'running', 'partial', 'terminating', 'rejected'].map((s) => `<option value="${s}"${(p.get('state') || '') === s ? ' selected' : ''}>${s || 'any'}</option>`).join('')}
      </select></label>
      <label>Name <input id="filter-text" type="search" value="${esc(p.get('q') || '')}" placeholder="contains… ( / )" size="14" autocomplete="off"></label>
      <button type="button" id="filter-clear" class="link">clear</button>
      <div class="spacer"></div>
      <span id="jobs-count" data-count="0" aria-live="polite">…</span>
      <span id="forecast-status" class="muted small"></span>
      <datalist id="queue-list"></datalist>
    </div>
    <div class="card flush vscroll" id="jobs-scroll">
      <table id="jobs" class="grid vtable" aria-rowcount="0">
        <caption class="sr-only">Jobs; Enter on a row opens the job</caption>
        <colgroup>${COLS.map((c) => `<col class="${c.cls.split(' ')[0]}">`).join('')}</colgroup>
        <thead><tr>${COLS.map((c) => `<th scope="col" class="${c.cls}" data-col="${c.key}"><button type="button" class="sort" data-sort="${c.key}">${c.label}<span class="arrow" aria-hidden="true"></span></button></th>`).join('')}</tr></thead>
        <tbody></tbody>
      </table>
    </div>`;

  const scroller = root.querySelector('#jobs-scroll');
  const table = root.querySelector('#jobs');
  const tbody = table.querySelector('tbody');
  const countEl = root.querySelector('#jobs-count');
  const fcStatus = root.querySelector('#forecast-status');

  const store = openStore();
  let loaded = false;        // a list has come
  let count = 0;             // rows after the name filter
  let total = 0;             // jobs the server answered
  let hasForecasts = false;  // forecasts merged
  let cache = { from: 0, rows: [] }; // rows from..from+rows.length, as the store last sent them
  let forecastCycle = 0;
  let sortKey = p.get('sort') || '';
  let sortDir = p.get('dir') === 'desc' ? -1 : 1;
  let destroyed = false;
  let serverKey = '';        // the server-side filters of the list
  let activeJob = null;      // the row in the Tab order (roving tabindex)
  let focusIndex = null;     // a row to focus once drawn (keyboard moves)

  // ---- filters

  const inputs = {
    queue: root.querySelector('#filter-queue'),
    namespace: root.querySelector('#filter-namespace'),
    user: root.querySelector('#filter-user'),
    state: root.querySelector('#filter-state'),
    q: root.querySelector('#filter-text'),
  };
  function filters() {
    return {
      queue: inputs.queue.value.trim(),
      namespace: inputs.namespace.value.trim(),
      user: inputs.user.value.trim(),
      state: inputs.state.value,
    };
  }
  function writeHash() {
    app.setParams({ ...filters(), q: inputs.q.value.trim(), sort: sortKey, dir: sortKey && sortDir < 0 ? 'desc' : '' });
  }
  let debounce = 0;
  function onFilter(ev) {
    writeHash();
    clearTimeout(debounce);
    if (ev.target === inputs.q) { applyView(); return; } // local: no fetch
    app.busy();
    debounce = setTimeout(() => app.refresh(), ev.type === 'change' ? 0 : 350);
  }
  for (const el of Object.values(inputs)) {
    el.addEventListener('input', onFilter);
    el.addEventListener('change', onFilter);
  }
  root.querySelector('#filter-clear').addEventListener('click', () => {
    for (const el of Object.values(inputs)) el.value = '';
    writeHash();
    app.busy();
    app.refresh();
  });
  if (sessionStorage.getItem('trainyard-focus-filter')) {
    sessionStorage.removeItem('trainyard-focus-filter');
    inputs.q.focus();
  }

  // ---- sorting

  table.querySelector('thead').addEventListener('click', (ev) => {
    const b = ev.target.closest('button.sort');
    if (!b) return;
    const k = b.dataset.sort;
    if (sortKey === k) sortDir = -sortDir; else { sortKey = k; sortDir = k === 'age' ? -1 : 1; }
    writeHash();
    showSort();
    applyView();
  });
  function showSort() {
    for (const th of table.querySelectorAll('thead th')) {
      const on = th.dataset.col === sortKey;
      th.setAttribute('aria-sort', on ? (sortDir > 0 ? 'ascending' : 'descending') : 'none');
      th.querySelector('.arrow').textContent = on ? (sortDir > 0 ? ' ▲' : ' ▼') : '';
    }
  }
  showSort();

  /** What the store filters and sorts by. */
  function viewState() { return { q: inputs.q.value.trim(), sortKey, sortDir }; }

  /** The rows to ask the store for: those drawn and PREFETCH more each side. */
  function wanted() {
    const [first, last] = visibleRange();
    return { from: Math.max(0, first - PREFETCH), to: last + PREFETCH };
  }

  /** Name filter + sort (in the store), then redraw. */
  function applyView() {
    // Before the first list: the store keeps them for it (nothing to draw yet).
    store.post({ type: 'view', ...viewState(), ...wanted() }).then((a) => { if (!destroyed && loaded) take(a); });
  }

  /** An answer of the store: its rows, counts, and a redraw. */
  function take(a) {
    cache = { from: a.from, rows: a.rows };
    hasForecasts = a.forecasts;
    if (!loaded || a.count !== count || a.total !== total) {
      count = a.count;
      total = a.total;
      countEl.textContent = `${count.toLocaleString()} job${count === 1 ? '' : 's'}` + (total !== count ? ` of ${total.toLocaleString()}` : '');
      countEl.dataset.count = String(count);
      table.setAttribute('aria-rowcount', String(count + 1));
    }
    loaded = true;
    draw(true);
  }

  // ---- the virtualised table

  /** The rows to render: those in view and OVERSCAN more each side, [first, last). */
  function visibleRange() {
    const top = scroller.scrollTop;
    const h = scroller.clientHeight || 600;
    return [Math.max(0, Math.floor(top / ROW_H) - OVERSCAN), Math.ceil((top + h) / ROW_H) + OVERSCAN];
  }

  let drawnFirst = -1, drawnLast = -1;
  /** Render the rows in view from the cache, or ask the store for them. */
  function draw(force) {
    if (!loaded) return;
    let [first, last] = visibleRange();
    last = Math.min(count, last);
    first = Math.min(first, last);
    if (first < cache.from || last > cache.from + cache.rows.length) { ask(); return; }
    if (!force && first === drawnFirst && last === drawnLast) return;
    render(first, last);
  }

  // One window asked of the store at a time; scrolling meanwhile asks again after.
  let asking = false, askAgain = false;
  function ask() {
    if (asking) { askAgain = true; return; }
    asking = true;
    store.post({ type: 'window', ...wanted() }).then((a) => {
      asking = false;
      askAgain = false;
      if (!destroyed) take(a);
    });
  }

  /** Rows first..last-1 (in the cache) into the table, keeping the focused row's focus. */
  function render(first, last) {
    drawnFirst = first; drawnLast = last;
    const act = document.activeElement;
    const focusJob = act && tbody.contains(act) ? act.closest('tr[data-job]')?.dataset.job : null;
    const row = (i) => cache.rows[i - cache.from];
    // Roving tabindex: the active row when drawn, else the first in view.
    let tabJob = null;
    for (let i = first; i < last && activeJob !== null; i++) if (row(i).id === activeJob) { tabJob = activeJob; break; }
    if (tabJob === null && last > first) tabJob = row(Math.min(last - 1, Math.max(first, Math.floor(scroller.scrollTop / ROW_H)))).id;
    let html = `<tr class="spacer" aria-hidden="true" style="height:${first * ROW_H}px"></tr>`;
    for (let i = first; i < last; i++) { const j = row(i); html += rowHTML(j, i, j.id === tabJob); }
    html += `<tr class="spacer" aria-hidden="true" style="height:${(count - last) * ROW_H}px"></tr>`;
    if (!count) html = `<tr><td colspan="${COLS.length}" class="empty">${total ? 'No job matches the name filter.' : 'No jobs match these filters.'}</td></tr>`;
    tbody.innerHTML = html;
    if (focusIndex !== null) {
      const tr = tbody.querySelector(`tr[aria-rowindex="${focusIndex + 2}"]`);
      const cur = document.activeElement;
      if (tr && (!cur || cur === document.body || tbody.contains(cur))) {
        focusIndex = null;
        tr.focus({ preventScroll: true });
        return;
      }
    }
    if (focusJob) {
      const tr = tbody.querySelector(`tr[data-job="${CSS.escape(focusJob)}"]`);
      if (tr) tr.focus({ preventScroll: true });
    }
  }
  let scrollRaf = 0;
  scroller.addEventListener('scroll', () => {
    if (scrollRaf) return;
    scrollRaf = requestAnimationFrame(() => { scrollRaf = 0; draw(false); });
  }, { passive: true });
  const onResize = () => { fitHeight(); draw(false); };
  window.addEventListener('resize', onResize);

  /** The scroller fills the window below the toolbar. */
  function fitHeight() {
    const r = scroller.getBoundingClientRect();
    scroller.style.height = Math.max(240, window.innerHeight - r.top - 12) + 'px';
  }
  fitHeight();

  function rowHTML(j, i, tab) {
    const s = STATES[j.state] || STATES.JOB_STATE_UNSPECIFIED;
    const pending = j.state === 'JOB_STATE_PENDING' || j.state === 'JOB_STATE_PARTIAL';
    const nodes = (j.placement && j.placement.nodes) || [];
    const f = j._fc;
    let fc = '';
    if (pending) {
      if (f) fc = f.starts
        ? `<td class="c-forecast" data-field="forecast" data-p50-ms="${f.p50Ms}" title="expected ${esc(fullTime(f.expectedMs))}; p50 ${esc(fullTime(f.p50Ms))}, p90 ${esc(fullTime(f.p90Ms))}">${esc(rel(f.p50Ms))} <span class="muted">${esc(clock(f.p50Ms))}</span></td>`
        : `<td class="c-forecast muted" data-field="forecast" data-starts="false">beyond look-ahead</td>`;
      else fc = `<td class="c-forecast muted" data-field="forecast">${hasForecasts ? '–' : '…'}</td>`;
    } else fc = '<td class="c-forecast" data-field="forecast"></td>';
    const left = timeLeft(j);
    const wall = j.walltimeSeconds
      ? `${durShort(j.walltimeSeconds)}${left === null ? '' : left >= 0 ? ` · <span class="${left < 600 ? 'warn-txt' : ''}">${durShort(left)} left</span>` : ' · <span class="warn-txt">overdue</span>'}`
      : '<span class="muted">–</span>';
    const started = j.startMs ? `; started ${fullTime(j.startMs)} (${rel(j.startMs)})` : '';
    return `<tr data-job="${esc(j.id)}" tabindex="${tab ? 0 : -1}" aria-rowindex="${i + 2}">
      <td class="c-state" data-field="state" data-state="${esc(j.state)}"><span class="state ${s.cls}"><span class="icon" aria-hidden="true">${s.icon}</span>${s.name}</span></td>
      <td class="c-job"><a href="${jobHref(j.id)}" tabindex="-1"><span class="muted">${esc(j.namespace)}/</span>${esc(j.name)}</a></td>
      <td class="c-queue" data-field="queue">${esc(j.queue)}</td>
      <td class="c-pods num" data-field="pods">${j.podsBound}/${j.pods}</td>
      <td class="c-gpus num" title="held ${gpus(j.gpuMilliBound)} of ${gpus(j.gpuMilli)} GPUs">${gpus(j.gpuMilli)}</td>
      <td class="c-reason" data-field="reason" title="${esc(j.reason ? j.reason + ': ' + j.message : '')}">${j.reason ? `<b>${esc(j.reason)}</b> ${esc(j.message)}` : ''}</td>
      ${fc}
      <td class="c-age num" data-field="age" data-seconds="${j.ageSeconds}" title="submitted ${esc(dur(j.ageSeconds))} ago${esc(started)}">${durShort(j.ageSeconds)}</td>
      <td class="c-wall">${wall}</td>
      <td class="c-place" data-field="placement" data-nodes="${esc(nodes.join(','))}" title="${esc(nodes.join(', '))}">${nodes.length ? `${esc(nodes.join(', '))}` : ''}</td>
    </tr>`;
  }

  // ---- keyboard: ↑/↓ between rows, Enter opens, Home/End; one row in the Tab order

  tbody.addEventListener('focusin', (ev) => {
    const tr = ev.target.closest('tr[data-job]');
    if (!tr) return;
    activeJob = tr.dataset.job;
    for (const o of tbody.querySelectorAll('tr[data-job][tabindex="0"]')) if (o !== tr) o.tabIndex = -1;
    tr.tabIndex = 0;
  });
  tbody.addEventListener('keydown', (ev) => {
    const tr = ev.target.closest('tr[data-job]');
    if (!tr) return;
    const i = Number(tr.getAttribute('aria-rowindex')) - 2;
    let to = null;
    if (ev.key === 'Enter') { location.hash = jobHref(tr.dataset.job); return; }
    if (ev.key === 'ArrowDown') to = i + 1;
    else if (ev.key === 'ArrowUp') to = i - 1;
    else if (ev.key === 'PageDown') to = i + Math.floor(scroller.clientHeight / ROW_H) - 1;
    else if (ev.key === 'PageUp') to = i - Math.floor(scroller.clientHeight / ROW_H) + 1;
    else if (ev.key === 'Home') to = 0;
    else if (ev.key === 'End') to = count - 1;
    if (to === null) return;
    ev.preventDefault();
    to = Math.max(0, Math.min(count - 1, to));
    // Scroll the target into view, draw, focus it (when its row is not
    // here yet: once the store has sent it).
    const y = to * ROW_H;
    const head = table.tHead.offsetHeight;
    if (y < scroller.scrollTop) scroller.scrollTop = y;
    else if (y + ROW_H + head > scroller.scrollTop + scroller.clientHeight) scroller.scrollTop = y + ROW_H + head - scroller.clientHeight;
    focusIndex = null;
    draw(false);
    const next = tbody.querySelector(`tr[aria-rowindex="${to + 2}"]`);
    if (next) next.focus({ preventScroll: true });
    else focusIndex = to;
  });
  tbody.addEventListener('dblclick', (ev) => {
    const tr = ev.target.closest('tr[data-job]');
    if (tr && !ev.target.closest('a')) location.hash = jobHref(tr.dataset.job);
  });

  // ---- data

  /** Forecasts of the pending jobs, after the list; filled in when they come. */
  let forecasting = false;
  async function loadForecasts() {
    if (destroyed || forecasting) return;
    forecasting = true;
    fcStatus.textContent = 'forecasting…';
    try {
      const a = await store.post({ type: 'forecasts', url: apiURL('forecasts'), headers: authHeaders(), ...wanted() });
      if (destroyed) return;
      if (a.forecastError) {
        fcStatus.textContent = 'no forecast: ' + apiError(a.forecastError).message;
        return;
      }
      forecastCycle = a.forecast.cycle;
      fcStatus.textContent = `forecast of cycle ${forecastCycle}` + (a.forecast.horizonMs ? `, look-ahead to ${clock(a.forecast.horizonMs)}` : '');
      take(a);
    } finally {
      forecasting = false;
    }
  }

  let queuesLoaded = false;
  async function loadQueueNames() {
    queuesLoaded = true;
    try {
      const d = await api('queues');
      root.querySelector('#queue-list').innerHTML = (d.queues || []).map((q) => `<option value="${esc(q.path || q.name)}">`).join('');
    } catch { /* suggestions only */ }
  }

  // ---- live updates, throttled: after a refresh of T ms the next starts
  // no sooner than max(2 s, 3 × T) after its end; a cycle meanwhile is
  // kept (`deferred`) and applied then. The app's own refreshes (filters,
  // retry) are not held back.

  let refreshing = false;
  let nextAt = 0;       // performance.now() from which a live refresh may start
  let deferred = false; // a cycle came while held back
  let timer = 0;

  /** The app asks before a live refresh: now, or later (then we start it). */
  function relevant() {
    if (!refreshing && performance.now() >= nextAt) return true;
    deferred = true;
    schedule();
    return false;
  }
  function schedule() {
    if (!deferred || refreshing || timer || destroyed) return;
    timer = setTimeout(() => {
      timer = 0;
      if (destroyed || !deferred || refreshing) return;
      deferred = false;
      app.refresh();
    }, Math.max(0, nextAt - performance.now()));
  }

  async function refresh() {
    const t0 = performance.now();
    refreshing = true;
    deferred = false; // this refresh fetches the newest list
    clearTimeout(timer);
    timer = 0;
    try {
      const f = filters();
      const key = JSON.stringify(f);
      if (key !== serverKey) { scroller.scrollTop = 0; serverKey = key; }
      const a = await store.post({ type: 'load', url: apiURL('jobs', f), headers: authHeaders(), ...viewState(), ...wanted() });
      if (destroyed) return;
      if (a.error) throw apiError(a.error);
      setNow(a.cycle && a.cycle.timeMs);
      take(a);
      // Forecasts: once per cycle at most, after the list is on screen.
      if (!a.cycle || a.cycle.number !== forecastCycle) setTimeout(loadForecasts, 0);
      if (!queuesLoaded) setTimeout(loadQueueNames, 50);
      return a.cycle && a.cycle.number;
    } finally {
      refreshing = false;
      const end = performance.now();
      nextAt = end + Math.max(MIN_GAP_MS, GAP_FACTOR * (end - t0));
      schedule();
    }
  }

  return {
    refresh,
    relevant,
    destroy() {
      destroyed = true;
      clearTimeout(timer);
      clearTimeout(debounce);
      store.close();
      window.removeEventListener('resize', onResize);
    },
  };
}

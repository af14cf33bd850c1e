// Jobs (#/jobs?queue=Q&namespace=N&user=U&state=S&q=TEXT&sort=COL&dir=asc|desc):
// every job the caller sees, filtered on the server (queue, namespace,
// user, state) and by name here (q), sortable, with pending reasons and
// start forecasts (fetched after the list). The table is virtualised:
// only the visible rows are in the DOM, at a fixed height, between two
// spacer rows, so 50,000 jobs stay fast.

import { api, esc, gpus, dur, durShort, rel, clock, fullTime, stateHTML, jobHref, setNow, now, STATES } from '/ui/util.js';

const ROW_H = 30;      // px; keep in step with style.css (.vtable tbody tr)
const OVERSCAN = 12;   // rows rendered above and below the visible ones

// Columns: key, header, sort value, class.
const COLS = [
  { key: 'state', label: 'State', sort: (j) => stateRank(j.state), cls: 'c-state' },
  { key: 'job', label: 'Job', sort: (j) => j.id, cls: 'c-job' },
  { key: 'queue', label: 'Queue', sort: (j) => j.queue, cls: 'c-queue' },
  { key: 'pods', label: 'Pods', sort: (j) => j.pods, cls: 'c-pods num' },
  { key: 'gpus', label: 'GPUs', sort: (j) => j.gpuMilli, cls: 'c-gpus num' },
  { key: 'reason', label: 'Reason', sort: (j) => j.reason || '\uffff', cls: 'c-reason' },
  { key: 'forecast', label: 'Expected start', sort: (j) => j._p50 || Infinity, cls: 'c-forecast' },
  { key: 'age', label: 'Age', sort: (j) => j.ageSeconds, cls: 'c-age num' },
  { key: 'walltime', label: 'Walltime · left', sort: (j) => timeLeft(j) ?? Infinity, cls: 'c-wall' },
  { key: 'placement', label: 'Placement', sort: (j) => (j.placement && j.placement.nodes && j.placement.nodes[0]) || '\uffff', cls: 'c-place' },
];

const STATE_ORDER = ['JOB_STATE_PENDING', 'JOB_STATE_PARTIAL', 'JOB_STATE_RUNNING', 'JOB_STATE_TERMINATING', 'JOB_STATE_REJECTED'];
function stateRank(s) { const i = STATE_ORDER.indexOf(s); return i < 0 ? 9 : i; }

/** Seconds of walltime left for a started job with a walltime, else null. */
function timeLeft(j) {
  if (!j.walltimeSeconds || !j.startMs) return null;
  return (j.startMs + j.walltimeSeconds * 1000 - now()) / 1000;
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

  let all = [];         // jobs from the server (server-side filters applied)
  let rows = [];        // after the name filter, sorted
  let forecasts = null; // ns/name → forecast
  let forecastCycle = 0;
  let sortKey = p.get('sort') || '';
  let sortDir = p.get('dir') === 'desc' ? -1 : 1;
  let destroyed = false;
  let serverKey = '';   // the server-side filters of `all`

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
    if (ev.target === inputs.q) { applyRows(); return; } // local: no fetch
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
    applyRows();
  });
  function showSort() {
    for (const th of table.querySelectorAll('thead th')) {
      const on = th.dataset.col === sortKey;
      th.setAttribute('aria-sort', on ? (sortDir > 0 ? 'ascending' : 'descending') : 'none');
      th.querySelector('.arrow').textContent = on ? (sortDir > 0 ? ' ▲' : ' ▼') : '';
    }
  }

  /** Name filter + sort, then redraw. */
  function applyRows() {
    const q = inputs.q.value.trim().toLowerCase();
    rows = q ? all.filter((j) => j.id.toLowerCase().includes(q)) : all.slice();
    const col = COLS.find((c) => c.key === sortKey);
    if (col) {
      const keys = new Map();
      for (const j of rows) keys.set(j, col.sort(j));
      const d = sortDir;
      rows.sort((a, b) => {
        const x = keys.get(a), y = keys.get(b);
        return (x < y ? -d : x > y ? d : 0) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
      });
    }
    showSort();
    countEl.textContent = `${rows.length.toLocaleString()} job${rows.length === 1 ? '' : 's'}` + (all.length !== rows.length ? ` of ${all.length.toLocaleString()}` : '');
    countEl.dataset.count = String(rows.length);
    table.setAttribute('aria-rowcount', String(rows.length + 1));
    draw(true);
  }

  // ---- the virtualised table

  let drawnFirst = -1, drawnLast = -1;
  /** Render the rows in view (and a few more), keeping the focused row's focus. */
  function draw(force) {
    const top = scroller.scrollTop;
    const h = scroller.clientHeight || 600;
    const first = Math.max(0, Math.floor(top / ROW_H) - OVERSCAN);
    const last = Math.min(rows.length, Math.ceil((top + h) / ROW_H) + OVERSCAN);
    if (!force && first === drawnFirst && last === drawnLast) return;
    drawnFirst = first; drawnLast = last;
    const act = document.activeElement;
    const focusJob = act && tbody.contains(act) ? act.closest('tr[data-job]')?.dataset.job : null;
    let html = `<tr class="spacer" aria-hidden="true" style="height:${first * ROW_H}px"></tr>`;
    for (let i = first; i < last; i++) html += rowHTML(rows[i], i);
    html += `<tr class="spacer" aria-hidden="true" style="height:${(rows.length - last) * ROW_H}px"></tr>`;
    if (!rows.length) html = `<tr><td colspan="${COLS.length}" class="empty">${all.length ? 'No job matches the name filter.' : 'No jobs match these filters.'}</td></tr>`;
    tbody.innerHTML = html;
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

  function rowHTML(j, i) {
    const s = STATES[j.state] || STATES.JOB_STATE_UNSPECIFIED;
    const pending = j.state === 'JOB_STATE_PENDING' || j.state === 'JOB_STATE_PARTIAL';
    const nodes = (j.placement && j.placement.nodes) || [];
    const f = forecasts && forecasts[j.id];
    let fc = '';
    if (pending) {
      if (f) fc = f.starts
        ? `<td class="c-forecast" data-field="forecast" data-p50-ms="${f.p50Ms}" title="expected ${esc(fullTime(f.expectedMs))}; p50 ${esc(fullTime(f.p50Ms))}, p90 ${esc(fullTime(f.p90Ms))}">${esc(rel(f.p50Ms))} <span class="muted">${esc(clock(f.p50Ms))}</span></td>`
        : `<td class="c-forecast muted" data-field="forecast" data-starts="false">beyond look-ahead</td>`;
      else fc = `<td class="c-forecast muted" data-field="forecast">${forecasts ? '–' : '…'}</td>`;
    } else fc = '<td class="c-forecast" data-field="forecast"></td>';
    const left = timeLeft(j);
    const wall = j.walltimeSeconds
      ? `${durShort(j.walltimeSeconds)}${left === null ? '' : left >= 0 ? ` · <span class="${left < 600 ? 'warn-txt' : ''}">${durShort(left)} left</span>` : ' · <span class="warn-txt">overdue</span>'}`
      : '<span class="muted">–</span>';
    const started = j.startMs ? `; started ${fullTime(j.startMs)} (${rel(j.startMs)})` : '';
    return `<tr data-job="${esc(j.id)}" tabindex="0" aria-rowindex="${i + 2}">
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

  // ---- keyboard: ↑/↓ between rows, Enter opens, Home/End

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
    else if (ev.key === 'End') to = rows.length - 1;
    if (to === null) return;
    ev.preventDefault();
    to = Math.max(0, Math.min(rows.length - 1, to));
    // Scroll the target into view, draw, focus it.
    const y = to * ROW_H;
    const head = table.tHead.offsetHeight;
    if (y < scroller.scrollTop) scroller.scrollTop = y;
    else if (y + ROW_H + head > scroller.scrollTop + scroller.clientHeight) scroller.scrollTop = y + ROW_H + head - scroller.clientHeight;
    draw(true);
    const next = tbody.querySelector(`tr[aria-rowindex="${to + 2}"]`);
    if (next) next.focus({ preventScroll: true });
  });
  tbody.addEventListener('dblclick', (ev) => {
    const tr = ev.target.closest('tr[data-job]');
    if (tr && !ev.target.closest('a')) location.hash = jobHref(tr.dataset.job);
  });

  // ---- data

  /** Forecasts of the pending jobs, after the list; filled in when they come. */
  async function loadForecasts() {
    fcStatus.textContent = 'forecasting…';
    try {
      const d = await api('forecasts');
      if (destroyed) return;
      forecasts = d.jobs || {};
      forecastCycle = d.cycle ? d.cycle.number : 0;
      for (const j of all) { const f = forecasts[j.id]; j._p50 = f && f.starts ? f.p50Ms : 0; }
      fcStatus.textContent = `forecast of cycle ${forecastCycle}` + (d.horizonMs ? `, look-ahead to ${clock(d.horizonMs)}` : '');
      if (sortKey === 'forecast') applyRows(); else draw(true);
    } catch (e) {
      if (destroyed) return;
      fcStatus.textContent = 'no forecast: ' + e.message;
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

  async function refresh() {
    const f = filters();
    const key = JSON.stringify(f);
    const d = await api('jobs', f);
    if (destroyed) return;
    setNow(d.cycle && d.cycle.timeMs);
    const list = d.jobs || [];
    for (const j of list) {
      j.id = j.namespace + '/' + j.name;
      const fc = forecasts && forecasts[j.id];
      j._p50 = fc && fc.starts ? fc.p50Ms : 0;
    }
    if (key !== serverKey) { scroller.scrollTop = 0; serverKey = key; }
    all = list;
    applyRows();
    // Forecasts: once per cycle at most, after the list is on screen.
    if (!d.cycle || d.cycle.number !== forecastCycle) setTimeout(loadForecasts, 0);
    if (!queuesLoaded) setTimeout(loadQueueNames, 50);
    return d.cycle && d.cycle.number;
  }

  return {
    refresh,
    destroy() { destroyed = true; window.removeEventListener('resize', onResize); },
  };
}

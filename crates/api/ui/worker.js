// The dashboard's worker (a module worker): tens of megabytes of JSON are
// fetched and parsed here, off the page's thread.
//
// - The GPU view's pending-job select: `{url, headers}` (no `type`) →
//   `{ids: [[namespace/name, queue], ...]}`.
// - The jobs view: a `JobStore` keeps every job of `/ui/api/jobs`, the
//   name filter, the sort and the forecasts; the page asks it for a window
//   of rows (`{from, to}`) and gets back only those rows and the counts.
//   Messages `{id, type, ...}`; every answer `{id, ...}` is made from the
//   store as it is when the answer is posted (answers keep their order).
//
// Errors come back as `{error: {status, code, message}}` (`status` 0 when
// the server cannot be reached), as `api()` in util.js throws them.
// A file of its own: the server's Content-Security-Policy allows scripts
// from 'self' only (no blob: workers). Without workers the page runs a
// `JobStore` itself (views/jobs.js imports this module).

const STATE_ORDER = ['JOB_STATE_PENDING', 'JOB_STATE_PARTIAL', 'JOB_STATE_RUNNING', 'JOB_STATE_TERMINATING', 'JOB_STATE_REJECTED'];
function stateRank(s) { const i = STATE_ORDER.indexOf(s); return i < 0 ? 9 : i; }

/** Seconds of walltime left for a started job with a walltime, else null. */
export function timeLeft(j, nowMs) {
  if (!j.walltimeSeconds || !j.startMs) return null;
  return (j.startMs + j.walltimeSeconds * 1000 - nowMs) / 1000;
}

// The sort value of each column of the jobs table (views/jobs.js: COLS).
const SORT = {
  state: (j) => stateRank(j.state),
  job: (j) => j.id,
  queue: (j) => j.queue,
  pods: (j) => j.pods,
  gpus: (j) => j.gpuMilli,
  reason: (j) => j.reason || '\uffff',
  forecast: (j) => j._p50 || Infinity,
  age: (j) => j.ageSeconds,
  walltime: (j, nowMs) => timeLeft(j, nowMs) ?? Infinity,
  placement: (j) => (j.placement && j.placement.nodes && j.placement.nodes[0]) || '\uffff',
};

/** GET `url` and parse its JSON; an error answer or a failed fetch → `{error}`. */
async function getJSON(url, headers) {
  let res;
  try {
    res = await fetch(url, { headers: headers || {}, cache: 'no-store' });
  } catch (e) {
    return { error: { status: 0, code: 'UNAVAILABLE', message: 'Cannot reach the server (' + (e && e.message) + ')' } };
  }
  if (!res.ok) {
    let body = null;
    try { body = await res.json(); } catch { /* not JSON */ }
    return { error: { status: res.status, code: (body && body.code) || '',
      message: (body && body.error) || `${res.status} ${res.statusText || 'error'}` } };
  }
  try {
    return { body: await res.json() };
  } catch (e) {
    return { error: { status: 0, code: 'UNAVAILABLE', message: 'Cannot read the answer (' + (e && e.message) + ')' } };
  }
}

/**
 * The jobs of the jobs view. `handle(message)` → the answer:
 * - `{type: 'load', url, headers, q, sortKey, sortDir, from, to}`: fetch
 *   `/ui/api/jobs?...` (`url`), keep its jobs, filter and sort them;
 *   answers `{cycle, ...window}` or `{error}`.
 * - `{type: 'forecasts', url, headers, from, to}`: fetch the forecasts and
 *   merge them (`_p50`, and `_fc` on the rows sent); answers
 *   `{forecast: {cycle, horizonMs}, ...window}` or `{forecastError, ...window}`.
 * - `{type: 'view', q, sortKey, sortDir, from, to}`: the name filter and the sort.
 * - `{type: 'window', from, to}`.
 * A window is `{from, rows, count, total, forecasts}`: the rows from..to of
 * the filtered, sorted list, how many it has, how many the server
 * answered, and whether forecasts were merged.
 */
export class JobStore {
  constructor() {
    this.all = [];          // the server's answer (server-side filters applied)
    this.rows = [];         // after the name filter, sorted
    this.forecasts = null;  // ns/name → forecast
    this.q = '';
    this.sortKey = '';
    this.sortDir = 1;
    this.nowMs = 0;         // the time of the answer's cycle (walltime left)
  }

  async handle(m) {
    switch (m.type) {
      case 'load': {
        // The view as asked now: a `view` message while the list loads changes it.
        this.takeView(m);
        const r = await getJSON(m.url, m.headers);
        if (r.error) return { error: r.error };
        const d = r.body || {};
        const list = d.jobs || [];
        const fc = this.forecasts;
        for (const j of list) {
          j.id = j.namespace + '/' + j.name;
          const f = fc && fc[j.id];
          j._p50 = f && f.starts ? f.p50Ms : 0;
        }
        this.all = list;
        this.nowMs = (d.cycle && d.cycle.timeMs) || Date.now();
        this.apply();
        return { cycle: d.cycle || null, ...this.window(m.from, m.to) };
      }
      case 'forecasts': {
        const r = await getJSON(m.url, m.headers);
        if (r.error) return { forecastError: r.error, ...this.window(m.from, m.to) };
        const d = r.body || {};
        const fc = (this.forecasts = d.jobs || {});
        for (const j of this.all) { const f = fc[j.id]; j._p50 = f && f.starts ? f.p50Ms : 0; }
        if (this.sortKey === 'forecast') this.apply();
        return { forecast: { cycle: d.cycle ? d.cycle.number : 0, horizonMs: d.horizonMs || 0 }, ...this.window(m.from, m.to) };
      }
      case 'view':
        if (this.takeView(m)) this.apply();
        return this.window(m.from, m.to);
      case 'window':
        return this.window(m.from, m.to);
      default:
        return { error: { status: 0, code: 'INTERNAL', message: 'unknown message ' + m.type } };
    }
  }

  /** Take the name filter and sort of `m`; true when they changed. */
  takeView(m) {
    const q = String(m.q || '').trim().toLowerCase();
    const sortKey = SORT[m.sortKey] ? m.sortKey : '';
    const sortDir = m.sortDir < 0 ? -1 : 1;
    if (q === this.q && sortKey === this.sortKey && sortDir === this.sortDir) return false;
    this.q = q;
    this.sortKey = sortKey;
    this.sortDir = sortDir;
    return true;
  }

  /** The name filter, then the sort (ties by id). */
  apply() {
    const q = this.q;
    const rows = q ? this.all.filter((j) => j.id.toLowerCase().includes(q)) : this.all.slice();
    const key = SORT[this.sortKey];
    if (key) {
      const nowMs = this.nowMs;
      const d = this.sortDir;
      const dec = rows.map((j) => ({ k: key(j, nowMs), id: j.id, j }));
      dec.sort((a, b) => {
        const x = a.k, y = b.k;
        return (x < y ? -d : x > y ? d : 0) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
      });
      for (let i = 0; i < dec.length; i++) rows[i] = dec[i].j;
    }
    this.rows = rows;
  }

  /** Rows from..to (clamped) with their forecast (`_fc`), and the counts. */
  window(from, to) {
    const n = this.rows.length;
    const a = Math.max(0, Math.min(n, Math.floor(Number(from) || 0)));
    const b = Math.max(a, Math.min(n, Math.floor(Number(to) || 0)));
    const fc = this.forecasts;
    const rows = this.rows.slice(a, b).map((j) => (fc && fc[j.id] ? { ...j, _fc: fc[j.id] } : j));
    return { from: a, rows, count: n, total: this.all.length, forecasts: !!fc };
  }
}

// ---- in a worker: answer the page's messages

if (typeof WorkerGlobalScope !== 'undefined' && self instanceof WorkerGlobalScope) {
  const store = new JobStore();
  self.onmessage = async (ev) => {
    const m = ev.data || {};
    if (!m.type) {
      // The GPU view's pending-job select.
      const r = await getJSON(m.url, m.headers);
      if (r.error) postMessage({ status: r.error.status, code: r.error.code, error: r.error.message });
      else postMessage({ ids: ((r.body && r.body.jobs) || []).map((j) => [j.namespace + '/' + j.name, j.queue]) });
      return;
    }
    let answer;
    try {
      answer = await store.handle(m);
    } catch (e) {
      answer = { error: { status: 0, code: 'INTERNAL', message: 'The worker failed: ' + (e && e.message) } };
    }
    postMessage({ ...answer, id: m.id });
  };
}

// Shared helpers of the Trainyard dashboard: fetching the JSON API with
// the bearer token, escaping, formatting numbers, times and job states,
// and the job colours. No framework, no dependencies.

// ---------------------------------------------------------------- fetching

const TOKEN_KEY = 'trainyard-token';

/** The bearer token pasted into the token form, if any. */
export function token() {
  try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch { return ''; }
}

export function setToken(t) {
  try {
    if (t) sessionStorage.setItem(TOKEN_KEY, t); else sessionStorage.removeItem(TOKEN_KEY);
  } catch { /* storage disabled: the token lives until the page reloads */ }
}

/** Headers of every request: the token when one is set. */
export function authHeaders() {
  const t = token();
  return t ? { Authorization: 'Bearer ' + t } : {};
}

/** An error answer of the API (`{"error", "code"}`) or a failed fetch. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// Called with the error on every 401 (the app shows the token form).
let unauthorized = () => {};
export function onUnauthorized(f) { unauthorized = f; }

/**
 * GET `/ui/api/PATH` with `params` (empty values left out) and return the
 * parsed JSON. Throws ApiError with the server's message on an error.
 */
export async function api(path, params) {
  let url = '/ui/api/' + path;
  if (params) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) {
      if (v !== '' && v !== undefined && v !== null) q.set(k, v);
    }
    const s = q.toString();
    if (s) url += '?' + s;
  }
  let res;
  try {
    res = await fetch(url, { headers: authHeaders(), cache: 'no-store' });
  } catch (e) {
    throw new ApiError(0, 'UNAVAILABLE', 'Cannot reach the server (' + e.message + ')');
  }
  if (!res.ok) {
    let body = null;
    try { body = await res.json(); } catch { /* not JSON */ }
    const err = new ApiError(res.status, (body && body.code) || '',
      (body && body.error) || `${res.status} ${res.statusText || 'error'}`);
    if (res.status === 401) unauthorized(err);
    throw err;
  }
  return res.json();
}

/**
 * The ApiError of an error answer a worker passed on (`{status, code,
 * message}`), the token form asked for on a 401 as `api` does.
 */
export function apiError(e) {
  const err = new ApiError(e.status || 0, e.code || '', e.message || 'error');
  if (e.status === 401) unauthorized(err);
  return err;
}

/** `/ui/api/PATH?params` (empty values left out), absolute: for a worker. */
export function apiURL(path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== '' && v !== undefined && v !== null) q.set(k, v);
  }
  const s = q.toString();
  return new URL('/ui/api/' + path + (s ? '?' + s : ''), location.href).href;
}

/**
 * GET `/ui/api/jobs` with `params` in a worker, answering only
 * `[[namespace/name, queue], ...]`: parsing tens of megabytes of JSON
 * there keeps the page's frames short. Throws ApiError like `api`.
 */
export async function jobIdsInWorker(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) if (v) q.set(k, v);
  const url = new URL('/ui/api/jobs?' + q, location.href).href;
  let w;
  try {
    w = new Worker('/ui/worker.js', { type: 'module' });
  } catch {
    // No workers: parse here.
    const d = await api('jobs', params);
    return (d.jobs || []).map((j) => [j.namespace + '/' + j.name, j.queue]);
  }
  return new Promise((resolve, reject) => {
    w.onmessage = (ev) => {
      w.terminate();
      const m = ev.data;
      if (m.ids) resolve(m.ids);
      else {
        const err = new ApiError(m.status, m.code || '', m.error);
        if (m.status === 401) unauthorized(err);
        reject(err);
      }
    };
    w.onerror = () => {
      // The worker could not start (blocked, failed to load): parse here.
      w.terminate();
      api('jobs', params).then((d) => resolve((d.jobs || []).map((j) => [j.namespace + '/' + j.name, j.queue])), reject);
    };
    w.postMessage({ url, headers: authHeaders() });
  });
}

// ---------------------------------------------------------------- strings

const ESC = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
/** Text safe inside HTML, attribute values included. */
export function esc(s) {
  return String(s ?? '').replace(/[&<>"']/g, (c) => ESC[c]);
}

/** The hash of the job page of `ns/name`. */
export function jobHref(id) {
  const i = id.indexOf('/');
  if (i < 0) return '#/job/' + encodeURIComponent(id);
  return '#/job/' + encodeURIComponent(id.slice(0, i)) + '/' + encodeURIComponent(id.slice(i + 1));
}

/** A link to the job page, or plain text for an empty (redacted) name. */
export function jobLink(id, cls = '') {
  if (!id) return '<span class="muted">(hidden)</span>';
  return `<a class="${cls}" href="${jobHref(id)}">${esc(id)}</a>`;
}

// ---------------------------------------------------------------- numbers

/** True for units in thousandths (milli-GPU, millicores). */
function isMilli(unit) { return unit === 'milli' || unit === 'mGPU' || unit === 'm'; }

/** A number with at most `d` decimals, trailing zeros dropped. */
export function num(x, d = 1) {
  if (!isFinite(x)) return '–';
  const r = Math.round(x * 10 ** d) / 10 ** d;
  return numberFormat(d).format(r);
}

// Intl formatters, made once: `toLocaleString` with options builds a new
// one per call (~0.1 ms each: hundreds of table cells took 100 ms).
const numberFormats = new Map();
function numberFormat(d) {
  let f = numberFormats.get(d);
  if (!f) numberFormats.set(d, (f = new Intl.NumberFormat(undefined, { maximumFractionDigits: d })));
  return f;
}

/** GPUs from milli-GPUs: 1000 → "1", 500 → "0.5". */
export function gpus(milli) { return num((milli || 0) / 1000, 2); }

/** A short name of a resource: GPUs, CPU, memory, … */
export function resourceLabel(r) {
  if (r === 'nvidia.com/gpu' || /gpu$/i.test(r)) return 'GPUs';
  if (r === 'cpu') return 'CPU';
  if (r === 'memory') return 'memory';
  return r.replace(/^.*\//, '');
}

/** An amount of resource `r` in `unit` as people read it (no unit suffix for GPUs/CPUs). */
export function amount(value, unit, r) {
  value = Number(value) || 0;
  if (unit === 'By') {
    const gi = value / 2 ** 30;
    return gi >= 1024 ? num(gi / 1024, 1) + ' Ti' : num(gi, gi < 10 ? 1 : 0) + ' Gi';
  }
  if (isMilli(unit)) return num(value / 1000, 2);
  return num(value, 0);
}

/** Resource order: GPUs first, then CPU, memory, the rest by name. */
export function resourceOrder(a, b) {
  const rank = (r) => (/gpu/i.test(r) ? 0 : r === 'cpu' ? 1 : r === 'memory' ? 2 : 3);
  return rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0);
}

// ---------------------------------------------------------------- times

// The date formats below, made once (as `toLocale*String` with the same options).
let fmtTime = null, fmtDay = null, fmtFull = null;

/** Local clock time: "14:32", with the day when not today. */
export function clock(ms) {
  if (!ms) return '–';
  const d = new Date(ms);
  const now = new Date();
  fmtTime ??= new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', hour12: false });
  const t = fmtTime.format(d);
  if (d.getFullYear() === now.getFullYear() && d.getMonth() === now.getMonth() && d.getDate() === now.getDate()) return t;
  fmtDay ??= new Intl.DateTimeFormat(undefined, { weekday: 'short', day: 'numeric', month: 'short' });
  return fmtDay.format(d) + ' ' + t;
}

/** Local date and time with seconds (tooltips). */
export function fullTime(ms) {
  if (!ms) return '';
  fmtFull ??= new Intl.DateTimeFormat(undefined, { year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric', hour12: false });
  return fmtFull.format(new Date(ms));
}

/** A duration in seconds as "45 s", "12 min", "3 h 05 min", "2 d 4 h". */
export function dur(s) {
  s = Math.max(0, Math.round(s));
  if (s < 60) return s + ' s';
  const m = Math.floor(s / 60);
  if (m < 60) return m + ' min';
  const h = Math.floor(m / 60);
  if (h < 48) return h + ' h' + (m % 60 ? ' ' + String(m % 60).padStart(2, '0') + ' min' : '');
  const d = Math.floor(h / 24);
  return d + ' d' + (h % 24 ? ' ' + (h % 24) + ' h' : '');
}

/** A compact duration for tables: "45s", "12m", "5h 03m", "3d 4h". */
export function durShort(s) {
  s = Math.max(0, Math.round(s));
  if (s < 60) return s + 's';
  const m = Math.floor(s / 60);
  if (m < 60) return m + 'm';
  const h = Math.floor(m / 60);
  if (h < 24) return h + 'h ' + String(m % 60).padStart(2, '0') + 'm';
  const d = Math.floor(h / 24);
  return d + 'd ' + (h % 24) + 'h';
}

// The time the data is about (the latest cycle's), else the browser's.
let nowMs = 0;
export function setNow(ms) { if (ms) nowMs = ms; }
export function now() { return nowMs || Date.now(); }

/** Relative to now: "in 12 min", "3 h ago", "now". */
export function rel(ms) {
  if (!ms) return '';
  const d = (ms - now()) / 1000;
  if (Math.abs(d) < 30) return 'now';
  return d > 0 ? 'in ' + dur(d) : dur(-d) + ' ago';
}

/** A time as "14:32 (in 12 min)" inside a <time> element. */
export function timeHTML(ms) {
  if (!ms) return '<span class="muted">–</span>';
  return `<time datetime="${new Date(ms).toISOString()}" title="${esc(fullTime(ms))}">${esc(clock(ms))} <span class="muted">(${esc(rel(ms))})</span></time>`;
}

// ---------------------------------------------------------------- job states

// Each state: a short name, a shape (colour is never the only signal) and a class.
export const STATES = {
  JOB_STATE_PENDING: { name: 'pending', icon: '○', cls: 'st-pending' },
  JOB_STATE_PARTIAL: { name: 'partial', icon: '◐', cls: 'st-partial' },
  JOB_STATE_RUNNING: { name: 'running', icon: '●', cls: 'st-running' },
  JOB_STATE_TERMINATING: { name: 'terminating', icon: '■', cls: 'st-terminating' },
  JOB_STATE_REJECTED: { name: 'rejected', icon: '✕', cls: 'st-rejected' },
  JOB_STATE_UNSPECIFIED: { name: 'unknown', icon: '?', cls: 'st-unknown' },
};

/** A state badge: shape icon + name. */
export function stateHTML(state) {
  const s = STATES[state] || STATES.JOB_STATE_UNSPECIFIED;
  return `<span class="state ${s.cls}"><span class="icon" aria-hidden="true">${s.icon}</span>${s.name}</span>`;
}

// ---------------------------------------------------------------- colours

/** The colour class (c0…c7, Okabe–Ito) of a job, hashed from its id (FNV-1a). */
export function colorIndex(id) {
  let h = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) {
    h ^= id.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  // FNV's low bits mix poorly (similar names would share a colour): finish
  // with murmur3's avalanche.
  h ^= h >>> 16; h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13; h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return (h >>> 0) % 8;
}

// ---------------------------------------------------------------- frames

/** Resolves after the next frame has been painted. */
export function afterPaint() {
  return new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
}

// Queues (#/queues): the queue tree with, per resource, bars of quota,
// fair share, allocation and pending demand; the last hours of GPU
// history and hourly GPU-hours; job counts; conditions; invalid queues.

import { api, esc, amount, resourceLabel, resourceOrder, clock, fullTime, num, setNow } from '/ui/util.js';

const COLLAPSED_KEY = 'trainyard-collapsed';

export function mount(root, route, app) {
  // Collapsed queue paths, kept for the tab.
  let collapsed;
  try { collapsed = new Set(JSON.parse(sessionStorage.getItem(COLLAPSED_KEY) || '[]')); } catch { collapsed = new Set(); }

  root.innerHTML = `
    <div class="toolbar">
      <h1>Queues</h1>
      <span id="queues-summary" class="muted"></span>
      <div class="spacer"></div>
      <div class="legend" aria-label="Legend of the bars">
        <span><i class="sw sw-alloc"></i> allocated</span>
        <span><i class="sw sw-pend"></i> pending demand</span>
        <span><i class="sw sw-share"></i> fair share</span>
        <span><i class="sw sw-quota"></i> quota</span>
        <span><i class="sw sw-limit"></i> limit</span>
      </div>
    </div>
    <div class="card flush">
    <table id="queues" class="grid">
      <caption class="sr-only">Queues, in tree order, with their resources, history and conditions</caption>
      <thead><tr>
        <th scope="col" class="col-name">Queue</th>
        <th scope="col" class="num">Weight</th>
        <th scope="col" class="num" title="Running jobs">Run</th>
        <th scope="col" class="num" title="Pending jobs">Pend</th>
        <th scope="col" class="col-res">Resources</th>
        <th scope="col" class="col-hist">GPUs, last 6 h</th>
        <th scope="col" class="col-usage">GPU-hours / hour</th>
        <th scope="col">Conditions</th>
      </tr></thead>
      <tbody></tbody>
    </table>
    </div>`;
  const tbody = root.querySelector('#queues tbody');
  let queues = [];

  // Expand / collapse a subtree (delegated).
  tbody.addEventListener('click', (ev) => {
    const b = ev.target.closest('button.tw');
    if (!b) return;
    const path = b.dataset.path;
    if (collapsed.has(path)) collapsed.delete(path); else collapsed.add(path);
    try { sessionStorage.setItem(COLLAPSED_KEY, JSON.stringify([...collapsed])); } catch { /* ignore */ }
    applyCollapsed();
  });

  /** Hide the rows below a collapsed queue. */
  function applyCollapsed() {
    for (const tr of tbody.querySelectorAll('tr[data-path]')) {
      const path = tr.dataset.path;
      let hidden = false;
      for (const c of collapsed) if (path.startsWith(c + '/')) { hidden = true; break; }
      tr.hidden = hidden;
      const b = tr.querySelector('button.tw');
      if (b) {
        const open = !collapsed.has(path);
        b.setAttribute('aria-expanded', String(open));
        b.textContent = open ? '▾' : '▸';
      }
    }
  }

  async function refresh() {
    const d = await api('queues');
    setNow(d.cycle && d.cycle.timeMs);
    queues = d.queues || [];
    // Keep focus on the same row across the re-render.
    const focused = document.activeElement && document.activeElement.closest && document.activeElement.closest('#queues tr[data-queue]');
    const focusKey = focused ? focused.dataset.queue : null;
    const focusBtn = document.activeElement && document.activeElement.classList.contains('tw');

    tbody.innerHTML = render(d);
    applyCollapsed();
    if (focusKey) {
      const tr = tbody.querySelector(`tr[data-queue="${CSS.escape(focusKey)}"]`);
      if (tr) ((focusBtn && tr.querySelector('button.tw')) || tr).focus({ preventScroll: true });
    }
    const gpu = sumTop(queues);
    root.querySelector('#queues-summary').textContent =
      `${queues.length} queues · ${gpu ? `${amount(gpu.allocated, gpu.unit)} / ${amount(gpu.quota, gpu.unit)} GPUs allocated / quota at the top · ` : ''}` +
      `cycle ${d.cycle ? d.cycle.number : '?'} at ${d.cycle ? clock(d.cycle.timeMs) : '?'}`;
    return d.cycle && d.cycle.number;
  }

  return { refresh };
}

/** GPU totals of the top-level queues. */
function sumTop(queues) {
  let t = null;
  for (const q of queues) {
    if (q.depth > (queues[0] ? queues[0].depth : 0)) continue;
    for (const r of q.resources || []) {
      if (!/gpu/i.test(r.resource)) continue;
      t = t || { allocated: 0, quota: 0, unit: r.unit };
      t.allocated += Number(r.allocated) || 0;
      t.quota += Number(r.quota) || 0;
    }
  }
  return t;
}

/** The rows: valid queues in tree order, then the invalid ones. */
function render(d) {
  const queues = d.queues || [];
  const conds = d.conditions || {};
  const hist = d.history || null;
  const usage = d.usage || null;
  const minDepth = queues.reduce((m, q) => Math.min(m, q.depth), Infinity);
  const hasKids = new Set(queues.map((q) => q.parent));
  let html = '';
  for (const q of queues) {
    const depth = q.depth - (isFinite(minDepth) ? minDepth : 0);
    const path = q.path || q.name;
    const kids = hasKids.has(path) && !q.leaf;
    const res = (q.resources || []).slice().sort((a, b) => resourceOrder(a.resource, b.resource));
    const jobsHref = `#/jobs?queue=${encodeURIComponent(path)}`;
    html += `<tr data-queue="${esc(q.name)}" data-path="${esc(path)}" tabindex="-1" class="${q.leaf ? 'leaf' : 'inner'}">
      <th scope="row" class="col-name"><div class="tree" style="--depth:${depth}">${kids
        ? `<button type="button" class="tw" data-path="${esc(path)}" aria-expanded="true" aria-label="Collapse or expand ${esc(q.name)}">▾</button>`
        : '<span class="tw-pad"></span>'}<a href="${jobsHref}" title="${esc(path)} — its jobs">${esc(q.name)}</a>${q.priority ? ` <span class="tag" title="priority">p${esc(q.priority)}</span>` : ''}</div></th>
      <td class="num" data-field="weight">${esc(q.weight)}</td>
      <td class="num" data-field="running"><a href="${jobsHref}&state=running">${esc(q.runningJobs)}</a></td>
      <td class="num" data-field="pending"><a href="${jobsHref}&state=pending">${esc(q.pendingJobs)}</a></td>
      <td class="col-res">${res.map(resourceBar).join('')}</td>
      <td class="col-hist">${historyChart(hist, q.name)}</td>
      <td class="col-usage">${usageChart(usage, q.name)}</td>
      <td data-field="conditions">${conditionsHTML(conds[q.name])}</td>
    </tr>`;
  }
  for (const q of d.invalid || []) {
    html += `<tr data-queue="${esc(q.name)}" data-invalid="true" data-path="${esc(q.name)}" tabindex="-1" class="invalid">
      <th scope="row" class="col-name"><div class="tree" style="--depth:0"><span class="tw-pad"></span><span class="warn" aria-hidden="true">⚠</span> ${esc(q.name)} <span class="tag bad">invalid</span></div>
        <div class="muted small">parent ${esc(q.parent || '–')} · left out of the tree</div></th>
      <td class="num" data-field="weight">–</td>
      <td class="num" data-field="running">–</td>
      <td class="num" data-field="pending">–</td>
      <td class="col-res muted">not scheduled</td>
      <td class="col-hist"></td>
      <td class="col-usage"></td>
      <td data-field="conditions">${conditionsHTML(q.conditions)}</td>
    </tr>`;
  }
  if (!html) html = '<tr><td colspan="8" class="empty">No queues.</td></tr>';
  return html;
}

/**
 * One resource's bar: allocated (solid), pending demand (hatched, after
 * it), fair share (solid marker), quota (dashed marker), limit (end mark);
 * labelled with numbers; the raw numbers in data attributes.
 */
function resourceBar(r) {
  const n = (x) => Number(x) || 0;
  const alloc = n(r.allocated), pend = n(r.pendingDemand), share = n(r.fairShare), quota = n(r.quota);
  const unlimited = !r.limit || r.limit.unlimited;
  const limit = unlimited ? null : n(r.limit.value);
  const scale = Math.max(1, alloc + pend, share, quota, limit ?? 0) * 1.04;
  const pct = (x) => (100 * x / scale).toFixed(2);
  const label = resourceLabel(r.resource);
  const a = (x) => amount(x, r.unit, r.resource);
  const gpu = /gpu/i.test(r.resource);
  const title = `${label}: allocated ${a(alloc)}, quota ${a(quota)}, fair share ${a(share)}, pending demand ${a(pend)}, limit ${limit === null ? 'unlimited' : a(limit)}`;
  return `<div class="res${gpu ? ' gpu' : ''}" data-resource="${esc(r.resource)}" data-quota="${quota}" data-limit="${limit === null ? 'unlimited' : limit}" data-fair-share="${share}" data-allocated="${alloc}" data-pending-demand="${pend}" title="${esc(title)}">
    <div class="res-label"><span class="rname">${esc(label)}</span> <b>${a(alloc)}</b> / ${a(quota)}${pend ? ` <span class="pend-txt">+${a(pend)} pending</span>` : ''} <span class="muted">share ${a(share)}${limit === null ? '' : ' · limit ' + a(limit)}</span></div>
    <div class="bar" role="img" aria-label="${esc(title)}">
      <span class="b-alloc" style="width:${pct(alloc)}%"></span>
      <span class="b-pend" style="left:${pct(alloc)}%;width:${pct(pend)}%"></span>
      <span class="m-share" style="left:${pct(share)}%"></span>
      <span class="m-quota" style="left:${pct(quota)}%"></span>
      ${limit === null ? '' : `<span class="m-limit" style="left:${pct(limit)}%"></span>`}
    </div></div>`;
}

/**
 * The queue's GPU history as an inline SVG: allocated (area), pending
 * demand stacked above it (hatched area), fair share (line).
 */
function historyChart(hist, name) {
  if (!hist || !hist.queues || !hist.queues[name]) return '<span class="muted small">–</span>';
  const byRes = hist.queues[name];
  const key = Object.keys(byRes).find((k) => /gpu/i.test(k)) || Object.keys(byRes)[0];
  if (!key) return '';
  const h = byRes[key];
  const alloc = h.allocated || [], share = h.fairShare || [], pend = h.pendingDemand || [];
  const n = Math.max(alloc.length, share.length, pend.length);
  if (n < 2) return '<span class="muted small">–</span>';
  const W = 150, H = 34;
  let max = 1;
  for (let i = 0; i < n; i++) max = Math.max(max, (alloc[i] || 0) + (pend[i] || 0), share[i] || 0);
  const x = (i) => (i * W / (n - 1)).toFixed(1);
  const y = (v) => (H - 1 - (v / max) * (H - 3)).toFixed(1);
  let top = '', mid = '', line = '';
  for (let i = 0; i < n; i++) {
    const a = alloc[i] || 0;
    mid += `${i ? 'L' : 'M'}${x(i)},${y(a)}`;
    top += `${i ? 'L' : 'M'}${x(i)},${y(a + (pend[i] || 0))}`;
    line += `${i ? 'L' : 'M'}${x(i)},${y(share[i] || 0)}`;
  }
  // Areas: pending from alloc up to alloc+pending; alloc down to 0.
  let back = '';
  for (let i = n - 1; i >= 0; i--) back += `L${x(i)},${y(alloc[i] || 0)}`;
  const pendArea = top + back + 'Z';
  const allocArea = mid + `L${W},${H}L0,${H}Z`;
  const unit = h.unit || 'milli';
  const f = (v) => amount(v, unit);
  const last = n - 1;
  const t0 = hist.times && hist.times[0], t1 = hist.times && hist.times[hist.times.length - 1];
  const title = `${resourceLabel(key)} ${t0 ? clock(t0) : ''}–${t1 ? clock(t1) : ''}: now allocated ${f(alloc[last] || 0)}, pending ${f(pend[last] || 0)}, fair share ${f(share[last] || 0)}; peak ${f(max)}`;
  return `<svg class="spark" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="${esc(title)}" preserveAspectRatio="none"><title>${esc(title)}</title>
    <path class="s-pend" d="${pendArea}"/><path class="s-alloc" d="${allocArea}"/><path class="s-share" d="${line}"/></svg>`;
}

/** Hourly GPU-hours of the queue, as small bars (from `usage`, when kept). */
function usageChart(usage, name) {
  if (!usage || !usage.hours || !usage.hours.length) return '<span class="muted small">–</span>';
  const hours = usage.hours.slice(-12);
  const vals = hours.map((h) => (h.queues && h.queues[name] ? Number(h.queues[name].gpuHours) || 0 : 0));
  const max = Math.max(1e-9, ...vals);
  const W = 96, H = 26, bw = W / vals.length;
  const total = vals.reduce((a, b) => a + b, 0);
  const bars = vals.map((v, i) => {
    const h = Math.max(v > 0 ? 1 : 0, (v / max) * (H - 2));
    const t = `${clock(hours[i].fromS * 1000)}–${clock(hours[i].toS * 1000)}: ${num(v, 1)} GPU-h`;
    return `<rect x="${(i * bw + 0.5).toFixed(1)}" y="${(H - h).toFixed(1)}" width="${(bw - 1).toFixed(1)}" height="${h.toFixed(1)}"><title>${esc(t)}</title></rect>`;
  }).join('');
  return `<div class="usage"><svg class="ubars" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" role="img" aria-label="GPU-hours per hour, last ${vals.length} hours: ${num(total, 1)} in all">${bars}</svg>
    <span class="small" title="GPU-hours in the last ${vals.length} hours">${num(total, 1)} h</span></div>`;
}

/** Conditions as badges: type, status (✓ / ✕ / ?), reason and message. */
function conditionsHTML(list) {
  if (!list || !list.length) return '<span class="muted small">–</span>';
  return list.map((c) => {
    const ok = c.status === 'True';
    const bad = c.status === 'False';
    // For most condition types True is good; a few are problems when True.
    const negative = /^(Invalid|Degraded|Error|Failed|Stalled|Over|AtLimit|Blocked|Suspended)/i.test(c.type);
    const good = negative ? bad : ok;
    const icon = c.status === 'Unknown' ? '?' : good ? '✓' : '✕';
    const when = c.lastTransitionTime ? Date.parse(c.lastTransitionTime) : 0;
    return `<div class="cond ${good ? 'good' : c.status === 'Unknown' ? 'unknown' : 'badc'}" title="${esc(when ? 'since ' + fullTime(when) : '')}">
      <span class="cicon" aria-hidden="true">${icon}</span><b>${esc(c.type)}</b>=${esc(c.status)}${c.reason ? ` <span class="reason">${esc(c.reason)}</span>` : ''}${c.message ? ` <span class="msg">${esc(c.message)}</span>` : ''}</div>`;
  }).join('');
}

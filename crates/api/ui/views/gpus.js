// GPUs (#/gpus?job=NS/NAME&node=N): every node grouped by topology domain
// (nested boxes), each a row of device cells coloured by the job holding
// it. Built as one HTML string; updates replace only the nodes whose HTML
// changed; one set of delegated listeners (hover/focus tooltip, click,
// arrow keys) serves all cells.

import { api, jobIdsInWorker, esc, gpus, colorIndex, clock, rel, jobHref, setNow } from '/ui/util.js';

export function mount(root, route, app) {
  const selected = route.params.get('job') || '';
  const focusNode = route.params.get('node') || '';
  root.innerHTML = `
    <div class="toolbar">
      <h1>GPUs</h1>
      <span id="gpu-summary" class="muted"></span>
      <div class="spacer"></div>
      <input id="gpu-job-search" type="search" placeholder="find a pending job…" aria-label="Find a pending job for the select" size="18" hidden>
      <label>Where could <select id="gpu-job" aria-label="A pending job whose possible devices to outline">
        <option value="">— pick a pending job —</option>
        ${selected ? `<option value="${esc(selected)}" selected>${esc(selected)}</option>` : ''}
      </select> fit?</label>
    </div>
    <div id="gpu-legend" class="legend" aria-label="Legend of the device cells">
      <span><i class="dev-sw held c2"></i> held (colour per job)</span>
      <span><i class="dev-sw held shared" style="background:linear-gradient(to right,var(--c1) 0 50%,var(--c5) 50% 100%)"></i> shared (split by share)</span>
      <span><i class="dev-sw free"></i> free</span>
      <span><i class="dev-sw outside"></i> pods outside Trainyard</span>
      <span><i class="dev-sw free nom"></i> nominated</span>
      <span><i class="dev-sw free fit"></i> fits the picked job</span>
      <span><span class="node-sw reserved">R</span> node reserved</span>
      <span><span class="node-sw notready">✕</span> not ready / cordoned</span>
    </div>
    <div id="gpu-fit" class="muted small" aria-live="polite"></div>
    <div id="gpu-map" role="list" aria-label="GPU map: nodes by topology domain; arrow keys move between devices, Enter opens the holding job"></div>
    <div id="gpu-tip" role="tooltip" hidden></div>`;

  const map = root.querySelector('#gpu-map');
  const tip = root.querySelector('#gpu-tip');
  const sel = root.querySelector('#gpu-job');
  let nodeEls = [];   // node index → element
  let nodeHtml = [];  // node index → its last HTML
  let shape = '';     // the domain structure rendered, to know when to rebuild
  let destroyed = false;
  let pendingAt = 0;    // when the select's pending jobs were last asked for
  let pendingCount = 0; // how many there were

  // ---- picking a job: ?job=ns/name in the hash, then refetch
  sel.addEventListener('change', () => {
    const p = { job: sel.value };
    app.setParams(p);
    current = sel.value;
    app.busy();
    app.refresh();
  });
  let current = selected;

  /**
   * The pending jobs for the select. A select of tens of thousands of
   * options takes seconds to build: past MAX_OPTIONS it holds the ones
   * matching the search box beside it (the picked job always).
   */
  const MAX_OPTIONS = 500;
  let pendingJobs = []; // [{id, queue}]
  const search = root.querySelector('#gpu-job-search');
  search.addEventListener('input', fillSelect);

  async function loadPending() {
    pendingAt = Date.now();
    if (document.activeElement === sel) return; // do not rebuild an open select
    try {
      const ids = await jobIdsInWorker({ state: 'pending' });
      if (destroyed) return;
      pendingCount = ids.length;
      pendingJobs = ids.map(([id, queue]) => ({ id, queue }));
      pendingJobs.sort((a, b) => (a.queue < b.queue ? -1 : a.queue > b.queue ? 1 : a.id < b.id ? -1 : 1));
      search.hidden = pendingJobs.length <= MAX_OPTIONS;
      fillSelect();
    } catch { /* the select keeps what it has */ }
  }

  function fillSelect() {
    const q = search.hidden ? '' : search.value.trim().toLowerCase();
    let html = '<option value="">— pick a pending job —</option>';
    let found = false, shown = 0, group = null;
    for (const j of pendingJobs) {
      if (q && !j.id.toLowerCase().includes(q) && j.id !== current) continue;
      if (shown >= MAX_OPTIONS && j.id !== current) continue;
      if (j.queue !== group) { html += (group === null ? '' : '</optgroup>') + `<optgroup label="${esc(j.queue)}">`; group = j.queue; }
      if (j.id === current) found = true;
      html += `<option value="${esc(j.id)}"${j.id === current ? ' selected' : ''}>${esc(j.id)}</option>`;
      shown++;
    }
    if (group !== null) html += '</optgroup>';
    if (current && !found) html += `<option value="${esc(current)}" selected>${esc(current)} (not pending)</option>`;
    sel.innerHTML = html;
    search.title = `${shown} of ${pendingJobs.length} pending jobs listed`;
  }

  // ---- tooltip, click, keys: delegated

  function describe(dev) {
    const node = dev.closest('.node');
    const parts = [`<b>${esc(node.dataset.node)}</b> · GPU ${esc(dev.dataset.device)}`];
    const holders = dev.dataset.holders;
    if (!holders) parts.push('free');
    else {
      for (const h of holders.split(',')) {
        const i = h.lastIndexOf(':');
        const who = h.slice(0, i), milli = Number(h.slice(i + 1));
        const share = `${Math.round(milli / 10)}% (${gpus(milli)} GPU)`;
        parts.push(who === 'outside' ? `a pod outside Trainyard: ${share}` : `${esc(who || '(hidden job)')}: ${share}`);
      }
    }
    if (dev.dataset.nominatedFor) parts.push(`nominated for ${esc(dev.dataset.nominatedFor)}`);
    if (node.dataset.reservedFor) parts.push(`node reserved for ${esc(node.dataset.reservedFor)}`);
    if (dev.classList.contains('fit')) parts.push(`free for a pod of ${esc(current)}`);
    if (node.classList.contains('notready')) parts.push('node not ready');
    if (node.classList.contains('cordoned')) parts.push('node cordoned');
    return parts.join('<br>');
  }
  function showTip(dev) {
    tip.innerHTML = describe(dev);
    tip.hidden = false;
    const r = dev.getBoundingClientRect();
    const rr = root.getBoundingClientRect();
    let x = r.left - rr.left, y = r.bottom - rr.top + 6;
    tip.style.left = Math.max(0, Math.min(x, rr.width - 260)) + 'px';
    tip.style.top = y + 'px';
  }
  map.addEventListener('mouseover', (ev) => {
    const dev = ev.target.closest('.dev');
    if (dev) showTip(dev); else tip.hidden = true;
  });
  map.addEventListener('mouseleave', () => { tip.hidden = true; });
  map.addEventListener('focusin', (ev) => {
    const dev = ev.target.closest('.dev');
    if (dev) showTip(dev);
  });
  map.addEventListener('focusout', () => { tip.hidden = true; });
  function open(dev) {
    const h = dev.dataset.holders;
    if (!h) return;
    const first = h.split(',').map((x) => x.slice(0, x.lastIndexOf(':'))).find((w) => w && w !== 'outside');
    if (first) location.hash = jobHref(first);
  }
  map.addEventListener('click', (ev) => {
    const dev = ev.target.closest('.dev');
    if (dev) open(dev);
  });

  // Roving focus: one device is in the tab order; arrows move it.
  function moveFocus(from, to) {
    if (!to) return;
    from.tabIndex = -1;
    to.tabIndex = 0;
    to.focus();
  }
  function nodeStep(node, dir) {
    // The next/previous node in document order, across domains.
    const all = nodeEls;
    const i = Number(node.dataset.i);
    // nodeEls is in node-index order; the document order is by domain: use the DOM.
    let n = dir > 0 ? node.nextElementSibling : node.previousElementSibling;
    if (n && n.classList.contains('node')) return n;
    const list = map.querySelectorAll('.node');
    const k = Array.prototype.indexOf.call(list, node);
    return list[k + dir] || null;
  }
  map.addEventListener('keydown', (ev) => {
    const dev = ev.target.closest('.dev');
    if (!dev) return;
    const node = dev.closest('.node');
    const idx = Number(dev.dataset.device);
    let to = null;
    if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); open(dev); return; }
    if (ev.key === 'ArrowRight') to = dev.nextElementSibling || nodeStep(node, 1)?.querySelector('.dev');
    else if (ev.key === 'ArrowLeft') to = dev.previousElementSibling || [...(nodeStep(node, -1)?.querySelectorAll('.dev') || [])].pop();
    else if (ev.key === 'ArrowDown' || ev.key === 'ArrowUp') {
      const n = nodeStep(node, ev.key === 'ArrowDown' ? 1 : -1);
      if (n) { const ds = n.querySelectorAll('.dev'); to = ds[Math.min(idx, ds.length - 1)]; }
    } else return;
    ev.preventDefault();
    if (to) moveFocus(dev, to);
  });

  // ---- rendering

  async function refresh() {
    // The select's pending jobs: after the first map, then beside the map
    // on every update while the list is small (so it matches the map's
    // cycle), else at most every 2 min in the background.
    let pendingP = null;
    const first = !pendingAt;
    if (!first && pendingCount < 2000) pendingP = loadPending();
    else if (Date.now() - pendingAt > 120000) setTimeout(loadPending, 100);
    const d = await api('gpus', current ? { job: current } : undefined);
    if (destroyed) return;
    setNow(d.cycle && d.cycle.timeMs);
    const ctx = context(d);
    const nodes = d.nodes || [];
    const htmls = nodes.map((n, i) => nodeHTML(n, i, d, ctx));
    const newShape = JSON.stringify([d.levels, d.domains, nodes.length, nodes.map((n) => n.name)]);
    if (newShape !== shape) {
      // First render (or the cluster changed): the whole map in one go.
      shape = newShape;
      const used = new Set();
      let html = '';
      for (const dom of d.domains || []) html += domainHTML(dom, htmls, used, d.levels || [], 0, ctx);
      const rest = [];
      for (let i = 0; i < nodes.length; i++) if (!used.has(i)) rest.push(i);
      if (rest.length) {
        html += `<section class="domain-rest" role="listitem" aria-label="${d.domains && d.domains.length ? 'Nodes outside the topology' : 'All nodes'}">
          <h2 class="dom-h">${d.domains && d.domains.length ? 'outside the topology' : 'all nodes'} <span class="muted">· ${rest.length} nodes</span></h2>
          <div class="nodes" role="list">${rest.map((i) => htmls[i]).join('')}</div></section>`;
      }
      if (!nodes.length) html = '<p class="empty">No nodes.</p>';
      map.innerHTML = html;
      nodeEls = new Array(nodes.length);
      for (const el of map.querySelectorAll('.node')) nodeEls[Number(el.dataset.i)] = el;
      const firstDev = map.querySelector('.dev');
      if (firstDev) firstDev.tabIndex = 0;
      if (focusNode) {
        const el = map.querySelector(`.node[data-node="${CSS.escape(focusNode)}"]`);
        if (el) { el.classList.add('flash'); el.scrollIntoView({ block: 'center' }); }
      }
    } else {
      // Update: replace only the nodes whose HTML changed, keeping the
      // focused device focused.
      const act = document.activeElement;
      const focusDev = act && act.classList && act.classList.contains('dev') && map.contains(act)
        ? [Number(act.closest('.node').dataset.i), act.dataset.device] : null;
      for (let i = 0; i < htmls.length; i++) {
        if (htmls[i] === nodeHtml[i]) continue;
        const tmp = document.createElement('div');
        tmp.innerHTML = htmls[i];
        const el = tmp.firstElementChild;
        nodeEls[i].replaceWith(el);
        nodeEls[i] = el;
      }
      if (focusDev) {
        const dev = nodeEls[focusDev[0]].querySelector(`.dev[data-device="${focusDev[1]}"]`);
        if (dev && dev !== act) { dev.tabIndex = 0; dev.focus({ preventScroll: true }); }
      }
      if (!map.querySelector('.dev[tabindex="0"]')) { const f = map.querySelector('.dev'); if (f) f.tabIndex = 0; }
    }
    nodeHtml = htmls;
    summary(d, ctx);
    // Wait for the select when its list is known small; the first time
    // (size unknown) it loads after the map, so a big list never holds it up.
    if (pendingP) await pendingP;
    else if (first) setTimeout(loadPending, 0);
    return d.cycle && d.cycle.number;
  }

  function summary(d, ctx) {
    let devs = 0, free = 0, outside = 0, notReady = 0;
    for (const n of d.nodes || []) {
      if (n.ready === false || n.cordoned) notReady++;
      for (const h of n.devices || []) {
        devs++;
        if (!h.length) free++;
        else if (h.some((x) => x[0] === -1)) outside++;
      }
    }
    root.querySelector('#gpu-summary').textContent =
      `${(d.nodes || []).length.toLocaleString()} nodes · ${devs.toLocaleString()} GPUs · ${free.toLocaleString()} free · ${outside} outside Trainyard · ${notReady} not ready/cordoned · ${(d.reservations || []).length} reservations · cycle ${d.cycle ? d.cycle.number : '?'}` +
      ((d.levels || []).length ? ` · levels ${(d.levels).join(' › ')}` : '');
    const fitEl = root.querySelector('#gpu-fit');
    if (d.fit) {
      let n = 0, k = 0;
      for (const v of Object.values(d.fit.nodes || {})) { n++; k += v.length; }
      fitEl.innerHTML = `<span class="fit-sw" aria-hidden="true"></span> <b>${esc(d.fit.job)}</b>: ${k} free devices on ${n} nodes could take one of its pods${d.fit.message ? ' · ' + esc(d.fit.message) : ''}`;
    } else fitEl.textContent = current ? `${current}: nothing to outline (not pending?)` : '';
  }

  return { refresh, destroy() { destroyed = true; } };
}

/** Lookups the node HTML needs: reservations and nominations by node, fit. */
function context(d) {
  const reserved = new Map();
  for (const r of d.reservations || []) for (const n of r.nodes || []) reserved.set(n, r);
  const nominated = new Map(); // node → device → job
  for (const m of d.nominations || []) {
    if (!nominated.has(m.node)) nominated.set(m.node, new Map());
    for (const g of m.gpus || []) nominated.get(m.node).set(g, m.job);
  }
  const fit = d.fit && d.fit.nodes ? d.fit.nodes : null;
  // Holder strings and colour classes per job index.
  const jobs = d.jobs || [];
  const cls = jobs.map((j) => 'c' + colorIndex(j || '?'));
  return { reserved, nominated, fit, jobs, cls };
}

/** A domain box: its level and name, nested domains, its nodes. */
function domainHTML(dom, htmls, used, levels, depth, ctx) {
  const kids = (dom.domains || []).map((c) => domainHTML(c, htmls, used, levels, depth + 1, ctx)).join('');
  const own = (dom.nodes || []).filter((i) => htmls[i] !== undefined);
  for (const i of own) used.add(i);
  const count = countNodes(dom);
  const leaf = !(dom.domains || []).length;
  return `<section class="domain d${depth}${leaf ? ' leafdom' : ''}" data-level="${esc(dom.level)}" data-domain="${esc(dom.name)}" role="listitem" aria-label="${esc(dom.level)} ${esc(dom.name)}, ${count} nodes">
    <h${Math.min(6, depth + 2)} class="dom-h"><span class="lvl">${esc(dom.level)}</span> ${esc(dom.name)} <span class="muted">· ${count} nodes</span></h${Math.min(6, depth + 2)}>
    ${kids ? `<div class="doms" role="list">${kids}</div>` : ''}
    ${own.length ? `<div class="nodes" role="list">${own.map((i) => htmls[i]).join('')}</div>` : ''}
  </section>`;
}

function countNodes(dom) {
  let n = (dom.nodes || []).length;
  for (const c of dom.domains || []) n += countNodes(c);
  return n;
}

/** One node: its name, flags, and a cell per device. */
function nodeHTML(n, i, d, ctx) {
  const res = ctx.reserved.get(n.name);
  const nom = ctx.nominated.get(n.name);
  const fit = ctx.fit && ctx.fit[n.name];
  const fitSet = fit ? new Set(fit) : null;
  let cells = '';
  let free = 0;
  const devs = n.devices || [];
  for (let k = 0; k < devs.length; k++) {
    const hs = devs[k];
    let cls = 'dev';
    let style = '';
    let holders = '';
    if (!hs.length) { cls += ' free'; free++; }
    else if (hs.length === 1 && hs[0][1] >= 1000) {
      // Held whole by one.
      const j = hs[0][0];
      if (j < 0) { cls += ' outside'; holders = 'outside:' + hs[0][1]; }
      else { cls += ' held ' + ctx.cls[j]; holders = ctx.jobs[j] + ':' + hs[0][1]; }
    } else {
      // Shared: proportional segments, the rest free.
      cls += ' held shared';
      let at = 0;
      const stops = [];
      const hh = [];
      for (const [j, m] of hs) {
        const c = j < 0 ? 'var(--outside)' : `var(--${ctx.cls[j]})`;
        const to = Math.min(100, at + m / 10);
        stops.push(`${c} ${at}% ${to}%`);
        at = to;
        hh.push((j < 0 ? 'outside' : ctx.jobs[j]) + ':' + m);
      }
      if (at < 100) stops.push(`transparent ${at}% 100%`);
      style = ` style="background:linear-gradient(to right,${stops.join(',')})"`;
      holders = hh.join(',');
    }
    let extra = '';
    const nomFor = nom && nom.get(k);
    if (nomFor) { cls += ' nom'; extra += ` data-nominated-for="${esc(nomFor)}"`; }
    if (fitSet && fitSet.has(k)) cls += ' fit';
    cells += `<i class="${cls}" data-device="${k}" data-holders="${esc(holders)}"${extra}${style} tabindex="-1"></i>`;
  }
  const flags = (n.ready === false ? ' notready' : '') + (n.cordoned ? ' cordoned' : '') + (res ? ' reserved' : '') + (fit ? ' fitnode' : '');
  const label = `${n.name}: ${devs.length} GPUs, ${free} free${n.ready === false ? ', not ready' : ''}${n.cordoned ? ', cordoned' : ''}${res ? ', reserved for ' + res.job : ''}`;
  const badge = (n.ready === false ? '<span class="nb nb-bad" title="not ready">✕</span>' : '') + (n.cordoned ? '<span class="nb nb-bad" title="cordoned">⊘</span>' : '') +
    (res ? `<span class="nb nb-res" title="reserved for ${esc(res.job)} from ${esc(clock(res.startMs))} (${esc(rel(res.startMs))})">R</span>` : '');
  return `<div class="node${flags}" data-node="${esc(n.name)}" data-i="${i}"${res ? ` data-reserved-for="${esc(res.job)}"` : ''} role="listitem" aria-label="${esc(label)}">` +
    `<div class="nname" title="${esc(label)}">${badge}${esc(n.name)}</div><div class="devs">${cells}</div></div>`;
}

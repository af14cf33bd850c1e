// Evictions (#/evictions?kind=K): recent reclaims, preemptions and
// consolidations, newest first: who took what from whom, and why.

import { api, esc, clock, rel, fullTime, jobLink, num } from '/ui/util.js';


export function mount(root, route, app) {
  const kind = route.params.get('kind') || '';
  root.innerHTML = `
    <div class="toolbar">
      <h1>Evictions</h1>
      <span id="evictions-summary" class="muted"></span>
      <div class="spacer"></div>
      <label>Kind <select id="eviction-kind">
        ${['', 'reclaim', 'preempt', 'consolidate'].map((k) => `<option value="${k}"${k === kind ? ' selected' : ''}>${k || 'any'}</option>`).join('')}
      </select></label>
    </div>
    <div class="card flush">
    <table id="evictions" class="grid">
      <caption class="sr-only">Evictions, newest first</caption>
      <thead><tr>
        <th scope="col">Time</th><th scope="col">Kind</th><th scope="col">Victim job</th><th scope="col">Its queue</th><th scope="col">Pod</th>
        <th scope="col">Node</th><th scope="col">Taken for</th><th scope="col">Its queue</th><th scope="col">Why</th>
      </tr></thead>
      <tbody></tbody>
    </table></div>`;
  const tbody = root.querySelector('#evictions tbody');
  const select = root.querySelector('#eviction-kind');
  let list = [];
  select.addEventListener('change', () => { app.setParams({ kind: select.value }); draw(); });

  function draw() {
    const k = select.value;
    const shown = k ? list.filter((e) => e.kind === k) : list;
    const counts = {};
    for (const e of list) counts[e.kind] = (counts[e.kind] || 0) + 1;
    root.querySelector('#evictions-summary').textContent = `${list.length} recent` +
      (list.length ? ' · ' + Object.entries(counts).map(([k2, n]) => `${num(n, 0)} ${k2}`).join(' · ') : '');
    if (!shown.length) { tbody.innerHTML = '<tr><td colspan="9" class="empty">No evictions.</td></tr>'; return; }
    tbody.innerHTML = shown.map((e) => `<tr data-eviction="${esc(e.cycle + ':' + e.pod)}">
      <td class="nowrap" title="${esc(fullTime(e.timeMs))} · cycle ${esc(e.cycle)}">${esc(clock(e.timeMs))} <span class="muted">${esc(rel(e.timeMs))}</span></td>
      <td data-field="kind" data-kind="${esc(e.kind)}"><span class="kind k-${esc(e.kind)}">${esc(e.kind)}</span></td>
      <td data-field="job">${jobLink(e.job)}</td>
      <td data-field="queue" class="muted">${esc(e.queue)}</td>
      <td data-field="pod" class="small">${esc(e.pod)}</td>
      <td data-field="node"><a href="#/gpus?node=${encodeURIComponent(e.node)}">${esc(e.node)}</a></td>
      <td data-field="preemptor"${e.preemptor ? '' : ' class="none"'}>${e.preemptor ? jobLink(e.preemptor) : ''}</td>
      <td data-field="preemptor-queue" class="muted">${esc(e.preemptorQueue)}</td>
      <td data-field="message" class="msg">${esc(e.message)}</td></tr>`).join('');
  }

  async function refresh() {
    const d = await api('evictions', { limit: 1000 });
    list = d.evictions || [];
    draw();
    // The endpoint has no cycle: the stream's latest, else the newest eviction's.
    return app.lastCycle || list.reduce((m, e) => Math.max(m, Number(e.cycle) || 0), 0);
  }

  return { refresh };
}

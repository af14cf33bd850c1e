// Evictions (#/evictions?kind=K): recent reclaims, preemptions and
// consolidations, newest first: who took what from whom, and why.
//
// Up to 1,000 rows of wrapped text: laying them out at once held a frame
// for 80–120 ms at 300 rows. The rows are drawn in chunks, one per frame
// (the first fills the screen), and an update whose list is the one drawn
// only refreshes the relative times.

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

  const FIRST_ROWS = 60;  // drawn at once: more than a screen
  const CHUNK_ROWS = 80;  // then this many per frame
  let drawn = '';         // what the table shows: the kind and the rows' ids
  let drawing = 0;        // the chunked draw under way (a newer one stops it)

  /** Draw the list; resolves when every row is in the table. */
  function draw() {
    const k = select.value;
    const shown = k ? list.filter((e) => e.kind === k) : list;
    const counts = {};
    for (const e of list) counts[e.kind] = (counts[e.kind] || 0) + 1;
    root.querySelector('#evictions-summary').textContent = `${list.length} recent` +
      (list.length ? ' · ' + Object.entries(counts).map(([k2, n]) => `${num(n, 0)} ${k2}`).join(' · ') : '');
    const sig = k + '|' + shown.map((e) => e.cycle + ':' + e.pod).join(',');
    if (sig === drawn) { updateTimes(); return Promise.resolve(); }
    drawn = sig;
    const token = ++drawing;
    if (!shown.length) { tbody.innerHTML = '<tr><td colspan="9" class="empty">No evictions.</td></tr>'; return Promise.resolve(); }
    tbody.innerHTML = shown.slice(0, FIRST_ROWS).map(rowHTML).join('');
    return new Promise((resolve) => {
      let i = FIRST_ROWS;
      const step = () => {
        if (token !== drawing || i >= shown.length) { resolve(); return; }
        tbody.insertAdjacentHTML('beforeend', shown.slice(i, i + CHUNK_ROWS).map(rowHTML).join(''));
        i += CHUNK_ROWS;
        requestAnimationFrame(step);
      };
      requestAnimationFrame(step);
    });
  }

  function timeHTML(ms) { return `${esc(clock(ms))} <span class="muted">${esc(rel(ms))}</span>`; }

  /** The relative times of the rows drawn, where they changed. */
  function updateTimes() {
    for (const td of tbody.querySelectorAll('td[data-time-ms]')) {
      const h = timeHTML(Number(td.dataset.timeMs));
      if (td.innerHTML !== h) td.innerHTML = h;
    }
  }

  function rowHTML(e) {
    return `<tr data-eviction="${esc(e.cycle + ':' + e.pod)}">
      <td class="nowrap" data-time-ms="${esc(e.timeMs)}" title="${esc(fullTime(e.timeMs))} · cycle ${esc(e.cycle)}">${timeHTML(e.timeMs)}</td>
      <td data-field="kind" data-kind="${esc(e.kind)}"><span class="kind k-${esc(e.kind)}">${esc(e.kind)}</span></td>
      <td data-field="job">${jobLink(e.job)}</td>
      <td data-field="queue" class="muted">${esc(e.queue)}</td>
      <td data-field="pod" class="small">${esc(e.pod)}</td>
      <td data-field="node"><a href="#/gpus?node=${encodeURIComponent(e.node)}">${esc(e.node)}</a></td>
      <td data-field="preemptor"${e.preemptor ? '' : ' class="none"'}>${e.preemptor ? jobLink(e.preemptor) : ''}</td>
      <td data-field="preemptor-queue" class="muted">${esc(e.preemptorQueue)}</td>
      <td data-field="message" class="msg">${esc(e.message)}</td></tr>`;
  }

  async function refresh() {
    const d = await api('evictions', { limit: 1000 });
    list = d.evictions || [];
    await draw();
    // The endpoint has no cycle: the stream's latest, else the newest eviction's.
    return app.lastCycle || list.reduce((m, e) => Math.max(m, Number(e.cycle) || 0), 0);
  }

  return { refresh };
}

// Job (#/job/NS/NAME): its fields, pods, explanation, start forecast, a
// what-if form, its events and evictions. Updates re-render every section
// but the what-if form and result (typed input is kept) and the forecast
// (fetched on load for pending jobs, then on demand).

import { api, esc, gpus, dur, rel, clock, fullTime, timeHTML, stateHTML, jobLink, setNow, now } from '/ui/util.js';

const CAUSES = {
  CAUSE_ROOM: 'No node has room',
  CAUSE_QUOTA: 'Queue limit or quota',
  CAUSE_FAIR_SHARE: 'Fair share',
  CAUSE_TOPOLOGY: 'Topology',
  CAUSE_GANG: 'Gang minimum',
  CAUSE_RESERVATION: 'Reservation (starts later)',
  CAUSE_PREEMPTION: 'Waiting for evicted pods',
  CAUSE_REQUEST: 'The request itself',
  CAUSE_UNSPECIFIED: '',
};

export function mount(root, route, app) {
  const [ns, name] = route.args;
  const id = `${ns}/${name}`;
  root.innerHTML = `
    <div id="job" data-job="${esc(id)}">
      <div class="toolbar">
        <a href="#/jobs" class="link back">← Jobs</a>
        <h1><span class="muted">${esc(ns)}/</span>${esc(name || '')}</h1>
        <span id="job-state"></span>
        <span id="job-sub" class="muted"></span>
      </div>
      <div class="job-grid">
        <section class="card fields-card" aria-labelledby="h-fields"><h2 id="h-fields">Job</h2><dl id="job-fields" class="fields"></dl></section>
        <section class="card explain-card" aria-labelledby="h-explain"><h2 id="h-explain">Why it waits</h2><div id="job-explain"></div></section>
        <div class="side">
        <section class="card" aria-labelledby="h-forecast"><h2 id="h-forecast">Start forecast
            <button type="button" id="forecast-run" class="small-btn">Forecast</button></h2>
          <div id="job-forecast" aria-live="polite"><p class="muted">Not asked yet.</p></div></section>
        <section class="card" aria-labelledby="h-whatif"><h2 id="h-whatif">What if…</h2>
          <form id="whatif-form" class="whatif">
            <label>Pods <input id="whatif-pods" type="number" min="1" step="1" inputmode="numeric"></label>
            <label>GPUs per pod <input id="whatif-gpus" type="number" min="0" step="1" inputmode="numeric"></label>
            <label>Min member <input id="whatif-min" type="number" min="1" step="1" inputmode="numeric"></label>
            <button type="submit" id="whatif-run" class="primary">Try</button>
          </form>
          <div id="whatif-result" aria-live="polite"></div></section>
        </div>
        <section class="card pods-card" aria-labelledby="h-pods"><h2 id="h-pods">Pods</h2>
          <table id="job-pods" class="grid compact"><thead><tr>
            <th scope="col">Pod</th><th scope="col">State</th><th scope="col">Node</th><th scope="col">GPUs</th><th scope="col">Started</th><th scope="col">Nominated</th>
          </tr></thead><tbody></tbody></table></section>
        <section class="card events-card" aria-labelledby="h-events"><h2 id="h-events">Events</h2><ol id="job-events" class="timeline"></ol></section>
        <section class="card evictions-card" aria-labelledby="h-evictions"><h2 id="h-evictions">Evictions</h2>
          <table id="job-evictions" class="grid compact"><thead><tr>
            <th scope="col">Time</th><th scope="col">Kind</th><th scope="col">Pod</th><th scope="col">Node</th><th scope="col">Victim / for</th><th scope="col">Message</th>
          </tr></thead><tbody></tbody></table></section>
      </div>
    </div>`;

  const $ = (s) => root.querySelector(s);
  let job = null;
  let formFilled = false;
  let forecastAsked = false;
  let destroyed = false;

  // ---- forecast

  async function forecast() {
    const el = $('#job-forecast');
    forecastAsked = true;
    el.setAttribute('aria-busy', 'true');
    el.innerHTML = '<p class="muted">Forecasting… (the simulator runs the cluster forward)</p>';
    try {
      const f = await api('forecast', { namespace: ns, name });
      if (destroyed) return;
      el.innerHTML = forecastHTML(f);
      el.dataset.starts = String(!!f.starts);
      if (f.starts) el.dataset.p50Ms = String(f.p50Ms); else delete el.dataset.p50Ms;
    } catch (e) {
      el.innerHTML = `<p class="error">${esc(e.message)}</p>`;
    }
    el.removeAttribute('aria-busy');
    $('#forecast-run').textContent = 'Forecast again';
  }
  $('#forecast-run').addEventListener('click', forecast);

  // ---- what-if

  $('#whatif-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const out = $('#whatif-result');
    const v = (s) => $(s).value.trim();
    const params = { namespace: ns, name, pods: v('#whatif-pods'), gpusPerPod: v('#whatif-gpus'), minMember: v('#whatif-min') };
    out.setAttribute('aria-busy', 'true');
    out.innerHTML = '<p class="muted">Asking the scheduler…</p>';
    $('#whatif-run').disabled = true;
    try {
      const r = await api('whatif', params);
      if (destroyed) return;
      const pods = Number(params.pods) || (job ? job.pods : 0);
      const per = params.gpusPerPod !== '' ? Number(params.gpusPerPod) : (job && job.pods ? job.gpuMilli / job.pods / 1000 : 0);
      out.innerHTML = whatifHTML(r, pods, per, params.minMember);
      out.dataset.fits = String(!!r.fits);
      const start = r.reservation && r.reservation.startMs;
      if (!r.fits && start) out.dataset.startMs = String(start); else delete out.dataset.startMs;
    } catch (e) {
      out.innerHTML = `<p class="error">${esc(e.message)}</p>`;
      delete out.dataset.fits;
    }
    out.removeAttribute('aria-busy');
    $('#whatif-run').disabled = false;
  });

  // ---- refresh

  async function refresh() {
    const d = await api('job', { namespace: ns, name });
    if (destroyed) return;
    setNow(d.cycle && d.cycle.timeMs);
    const prevState = job && job.state;
    job = d.job;
    $('#job-state').innerHTML = stateHTML(job.state);
    $('#job-state').dataset.state = job.state;
    $('#job-sub').textContent = `queue ${job.queue} · cycle ${d.cycle ? d.cycle.number : '?'}`;
    if (prevState && prevState !== job.state) app.announce(`${id} is now ${job.state.replace('JOB_STATE_', '').toLowerCase()}`);
    $('#job-fields').innerHTML = fieldsHTML(job);
    renderExplain(d.explain, job);
    $('#job-pods tbody').innerHTML = podsHTML(d.pods || []);
    $('#job-events').innerHTML = eventsHTML(d.events || []);
    $('#job-evictions tbody').innerHTML = evictionsHTML(d.evictions || [], id);
    if (!formFilled) {
      // The job's own sizes, once: later updates keep what was typed.
      formFilled = true;
      $('#whatif-pods').value = job.pods || '';
      $('#whatif-gpus').value = job.pods ? Math.round(job.gpuMilli / job.pods / 1000) : '';
      $('#whatif-min').value = job.minMember || '';
    }
    const pending = job.state === 'JOB_STATE_PENDING' || job.state === 'JOB_STATE_PARTIAL';
    if (!forecastAsked && pending) setTimeout(forecast, 0);
    if (!forecastAsked && !pending) $('#job-forecast').innerHTML = `<p class="muted">${job.state === 'JOB_STATE_RUNNING' ? 'Running: nothing to forecast.' : 'Nothing pending.'}</p>`;
    return d.cycle && d.cycle.number;
  }

  function renderExplain(x, job) {
    const el = $('#job-explain');
    if (!x) {
      el.innerHTML = `<p class="muted">Nothing pending${job.reason ? `: <b>${esc(job.reason)}</b> ${esc(job.message)}` : '.'}</p>`;
      el.dataset.cause = '';
      return;
    }
    el.dataset.cause = x.cause || '';
    const nr = x.nodeReasons || [];
    const fit = x.toFit || [];
    const res = x.reservation && x.reservation.startMs ? x.reservation : null;
    el.innerHTML = `
      ${x.cause && CAUSES[x.cause] ? `<p><span class="tag cause">${esc(CAUSES[x.cause])}</span></p>` : ''}
      ${x.summary ? `<p class="summary">${esc(x.summary)}</p>` : ''}
      <p><b>${esc(x.reason || job.reason)}</b> ${esc(x.message || job.message)}</p>
      ${x.nodesTotal ? `<p class="muted small">${esc(x.nodesFit)} of ${esc(x.nodesTotal)} nodes fit</p>` : ''}
      ${nr.length ? `<h3>Nodes refused</h3><ul id="job-node-reasons" class="reasons">${nr.map((r) =>
        `<li><span class="count">${esc(r.nodes)} node${r.nodes === 1 ? '' : 's'}</span>: ${esc(r.reason)}</li>`).join('')}</ul>` : '<ul id="job-node-reasons" hidden></ul>'}
      ${fit.length ? `<h3>What would have to change</h3><ul class="tofit">${fit.map((s) => `<li>${esc(s)}</li>`).join('')}</ul>` : ''}
      ${res ? `<h3>Reservation</h3><p>Room held from ${timeHTML(res.startMs)} on ${esc((res.nodes || []).join(', ') || '–')}${res.domain ? ` in ${esc(res.domain)}` : ''}${res.backfilled ? ` · ${esc(res.backfilled)} backfilled` : ''}</p>` : ''}`;
  }

  return { refresh, destroy() { destroyed = true; } };
}

function fieldsHTML(j) {
  const left = j.walltimeSeconds && j.startMs ? (j.startMs + j.walltimeSeconds * 1000 - now()) / 1000 : null;
  const nodes = (j.placement && j.placement.nodes) || [];
  const rows = [
    ['Queue', `<a href="#/jobs?queue=${encodeURIComponent(j.queue)}">${esc(j.queue)}</a>`],
    ['User', esc(j.user || '–')],
    ['Priority', esc(j.priority)],
    ['Pods', `${esc(j.podsBound)} bound of ${esc(j.pods)} · min ${esc(j.minMember)}`],
    ['GPUs', `${gpus(j.gpuMilliBound)} held of ${gpus(j.gpuMilli)} asked`],
    ['Submitted', `${timeHTML(j.submitTimeMs)} · age ${dur(j.ageSeconds)}`],
    ['Started', j.startMs ? timeHTML(j.startMs) : '<span class="muted">not started</span>'],
    ['Walltime', j.walltimeSeconds ? `${dur(j.walltimeSeconds)}${left === null ? '' : left >= 0 ? ` · ${dur(left)} left` : ' · overdue'}` : '<span class="muted">none set</span>'],
    ['Placement', nodes.length ? `${esc(nodes.join(', '))} <span class="muted">(${gpus(j.placement.gpuMilli || 0)} GPUs)</span>` : '<span class="muted">–</span>'],
    ['Reason', j.reason ? `<b>${esc(j.reason)}</b> ${esc(j.message)}` : '<span class="muted">–</span>'],
  ];
  return rows.map(([k, v]) => `<dt>${k}</dt><dd>${v}</dd>`).join('');
}

function podsHTML(pods) {
  if (!pods.length) return '<tr><td colspan="6" class="empty">No pods.</td></tr>';
  return pods.map((p) => `<tr data-pod="${esc(p.name)}">
    <td>${esc(p.name)}</td>
    <td><span class="pod-state ps-${esc((p.state || '').toLowerCase())}">${esc(p.state)}</span></td>
    <td data-field="node">${p.node ? `<a href="#/gpus?node=${encodeURIComponent(p.node)}">${esc(p.node)}</a>` : '<span class="muted">–</span>'}</td>
    <td data-field="gpus">${(p.gpus || []).length ? esc(p.gpus.join(', ')) : '<span class="muted">–</span>'}</td>
    <td>${p.startMs ? timeHTML(p.startMs) : '<span class="muted">–</span>'}</td>
    <td>${p.nominated ? esc(p.nominated) : ''}</td></tr>`).join('');
}

const EVENT_ICONS = { Pending: '○', Bound: '●', Evicted: '✕', 'Preempted-for': '⇢', Evicting: '⇢', Nominated: '◇', Reserved: '⏲' };

function eventsHTML(events) {
  if (!events.length) return '<li class="muted">No events.</li>';
  // Newest first reads best in a timeline.
  return events.slice().reverse().map((e) => `<li data-kind="${esc(e.kind)}" class="ev-${esc(e.kind.toLowerCase())}">
    <span class="ev-icon" aria-hidden="true">${EVENT_ICONS[e.kind] || '•'}</span>
    <span class="ev-time" title="${esc(fullTime(e.timeMs))}">${esc(clock(e.timeMs))} <span class="muted">${esc(rel(e.timeMs))} · cycle ${esc(e.cycle)}</span></span>
    <span class="ev-kind">${esc(e.kind)}</span> <span class="ev-msg">${esc(e.message)}</span></li>`).join('');
}

export function evictionsHTML(list, self) {
  if (!list.length) return '<tr><td colspan="6" class="empty">None.</td></tr>';
  return list.map((e) => {
    const victim = e.job === self;
    return `<tr data-eviction="${esc(e.cycle + ':' + e.pod)}">
      <td title="${esc(fullTime(e.timeMs))}">${esc(clock(e.timeMs))} <span class="muted">${esc(rel(e.timeMs))}</span></td>
      <td><span class="kind k-${esc(e.kind)}">${esc(e.kind)}</span></td>
      <td>${esc(e.pod)}</td>
      <td>${esc(e.node)}</td>
      <td>${victim ? `evicted for ${jobLink(e.preemptor)}` : `evicted ${jobLink(e.job)} for it`}</td>
      <td class="msg">${esc(e.message)}</td></tr>`;
  }).join('');
}

function forecastHTML(f) {
  if (f.running) return '<p>Running already: nothing to forecast.</p>';
  const waits = f.waitsFor || [];
  if (!f.starts) {
    return `<p class="fc-none"><span aria-hidden="true">∅</span> Not expected to start within the look-ahead${f.horizonMs ? ` (until ${esc(clock(f.horizonMs))})` : ''}${f.capped ? ', the run stopped at its cycle cap' : ''}.</p>
      ${f.reasonAtHorizon ? `<p class="muted">At the end of the look-ahead it still waits: ${esc(f.reasonAtHorizon)}</p>` : ''}`;
  }
  return `<p class="fc-start">Expected to start at <b>${esc(clock(f.expectedMs))}</b> <span class="muted">(${esc(rel(f.expectedMs))})</span>
      <span class="range">p50 ${esc(clock(f.p50Ms))} · p90 ${esc(clock(f.p90Ms))}</span></p>
    ${(f.nodes || []).length ? `<p class="small">on ${esc(f.nodes.join(', '))}</p>` : ''}
    ${waits.length ? `<h3>Waiting for</h3><ul class="waits">${waits.map((w) => `<li>${jobLink(w.job)} to end ${timeHTML(w.endsMs)}${(w.nodes || []).length ? ` <span class="muted">frees ${esc(w.nodes.join(', '))}</span>` : ''}</li>`).join('')}</ul>` : ''}
    <p class="muted small">${esc(f.runs || 0)} simulated runs, ${esc(f.cycles || 0)} cycles · cycle ${esc(f.cycle ? f.cycle.number : '?')}</p>`;
}

function whatifHTML(r, pods, perPod, min) {
  const total = pods * perPod;
  const lead = `With ${gpus(total * 1000)} GPUs <span class="muted">(${pods} pod${pods === 1 ? '' : 's'} × ${gpus(perPod * 1000)}${min ? `, min ${esc(min)}` : ''})</span> it would`;
  const place = [...(r.binds || []), ...(r.nominations || [])];
  const nodes = [...new Set(place.map((p) => p.node))];
  let head;
  if (r.fits) head = `<p class="wi-yes"><span aria-hidden="true">✓</span> ${lead} start now on ${esc(nodes.join(', ') || '–')}${(r.nominations || []).length ? ' (once its victims are gone)' : ''}.</p>`;
  else if (r.reservation && r.reservation.startMs) head = `<p class="wi-later"><span aria-hidden="true">⏲</span> ${lead} start at <b>${esc(clock(r.reservation.startMs))}</b> <span class="muted">(${esc(rel(r.reservation.startMs))})</span> (reservation on ${esc((r.reservation.nodes || []).join(', ') || '–')}).</p>`;
  else head = `<p class="wi-no"><span aria-hidden="true">✕</span> ${lead} not fit: <b>${esc(r.reason)}</b> ${esc(r.message)}</p>`;
  const ev = r.evictions || [];
  const evs = ev.length ? `<h3>It would evict ${ev.length} pod${ev.length === 1 ? '' : 's'}</h3>
    <table class="grid compact"><thead><tr><th scope="col">Job</th><th scope="col">Pod</th><th scope="col">Node</th><th scope="col">Kind</th><th scope="col">Why</th></tr></thead><tbody>
    ${ev.map((v) => `<tr><td>${jobLink(v.job)}</td><td>${esc(v.pod)}</td><td>${esc(v.node)}</td><td><span class="kind k-${esc(v.kind)}">${esc(v.kind)}</span></td><td class="msg">${esc(v.message)}</td></tr>`).join('')}
    </tbody></table>` : '';
  const disp = (r.displaced || []).length ? `<p class="small">Other jobs whose placement would change: ${r.displaced.map((j) => jobLink(j)).join(', ')}</p>` : '';
  return head + evs + disp;
}

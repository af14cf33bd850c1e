// A worker of the dashboard: fetches /ui/api/jobs and answers only
// `[[namespace/name, queue], ...]`, so tens of megabytes of JSON are
// parsed off the page's thread (the GPU view's pending-job select).
// A file of its own: the server's Content-Security-Policy allows
// scripts from 'self' only (no blob: workers).
onmessage = async (ev) => {
  const { url, headers } = ev.data;
  try {
    const res = await fetch(url, { headers, cache: 'no-store' });
    const body = await res.json().catch(() => null);
    if (!res.ok) {
      postMessage({ status: res.status, code: body && body.code, error: (body && body.error) || res.statusText });
      return;
    }
    postMessage({ ids: (body.jobs || []).map((j) => [j.namespace + '/' + j.name, j.queue]) });
  } catch (e) {
    postMessage({ status: 0, code: 'UNAVAILABLE', error: String(e) });
  }
};

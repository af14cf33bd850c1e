"""A DOM reader of the dashboard for tests and benchmarks (issue 48).

Usage: python3 tests/ui/driver.py BASE_URL [--width W --height H]
                                   [--ignore-https-errors]

Opens headless Chromium (the `trainyard-chromium` wrapper that
scripts/install-browser.sh writes) through Playwright and reads JSON
commands from stdin, one per line; answers each with one JSON line on
stdout: {"ok": VALUE} or {"error": "MESSAGE"}. The first line it prints
is {"ok": {"ready": true, "chromium": VERSION}} (or an error and exit 2
when Playwright or Chromium is missing: the caller skips or fails).

Commands (every wait has a timeout: "timeout" ms, default 20000):
  {"goto": "#/jobs?state=pending", "min_cycle": N}
      loads BASE_URL/ui + hash the first time, then sets location.hash;
      waits for main#view[data-view=V] to be rendered (data-cycle set, or
      an error shown, or the token form open) with data-cycle >= N.
      Answers {"view", "cycle", "live", "error", "token_form", "hash"}.
  {"reload": true}                      reloads the page (same answer as goto)
  {"wait": SEL, "attr": A, "value": V}  waits for SEL (with A == V);
      "min": N instead of "value" waits for the number in A >= N;
      "gone": true waits until SEL matches nothing; "visible": true.
  {"read": "queues" | "jobs" | "job" | "gpus" | "evictions" | "page"}
      what the view shows, from the DOM contract's attributes and texts.
  {"fill": SEL, "text": T}   {"select": SEL, "value": V}
  {"click": SEL}  {"press": KEY} (to the focused element)  {"type": TEXT}
  {"focused": true}   what has focus: {"tag", "id", "job", "text"}
  {"eval": JS}        the value of a JS expression (a function body is
                      not wrapped: pass "() => ..." for statements)
  {"screenshot": PATH, "full_page": false}
  {"timing": true}    window.__trainyard
  {"scroll": SEL, "top": PX}  sets the scroll position of SEL
  {"quit": true}
"""

import argparse
import json
import os
import shutil
import site
import sys
import time
import traceback

READ_JS = {
    # Rows of table#queues: per queue its fields and per resource its numbers.
    "queues": """() => {
      const rows = [...document.querySelectorAll('#queues tr[data-queue]')];
      return rows.map((tr) => {
        const f = (k) => { const e = tr.querySelector(`[data-field="${k}"]`); return e ? e.textContent.trim() : null; };
        const resources = {};
        for (const r of tr.querySelectorAll('[data-resource]')) {
          resources[r.dataset.resource] = {
            quota: r.dataset.quota, limit: r.dataset.limit, fairShare: r.dataset.fairShare,
            allocated: r.dataset.allocated, pendingDemand: r.dataset.pendingDemand,
            text: r.textContent.replace(/\\s+/g, ' ').trim(),
          };
        }
        return { name: tr.dataset.queue, invalid: tr.dataset.invalid === 'true', hidden: tr.hidden,
                 weight: f('weight'), running: f('running'), pending: f('pending'),
                 conditions: f('conditions'), resources };
      });
    }""",
    # The jobs table: the count and the rows in the DOM (virtualised).
    "jobs": """() => {
      const c = document.querySelector('#jobs-count');
      const val = (id) => { const e = document.querySelector(id); return e ? e.value : null; };
      const rows = [...document.querySelectorAll('tr[data-job]')].map((tr) => {
        const cell = (k) => tr.querySelector(`[data-field="${k}"]`);
        const t = (k) => { const e = cell(k); return e ? e.textContent.replace(/\\s+/g, ' ').trim() : null; };
        const a = (k, attr) => { const e = cell(k); return e ? e.getAttribute(attr) : null; };
        return { job: tr.dataset.job, state: a('state', 'data-state'), queue: t('queue'),
                 reason: t('reason'), forecast: t('forecast'), p50Ms: a('forecast', 'data-p50-ms'),
                 age: t('age'), ageSeconds: a('age', 'data-seconds'),
                 placement: a('placement', 'data-nodes'), pods: t('pods') };
      });
      return { count: c ? Number(c.dataset.count) : null, countText: c ? c.textContent.trim() : null,
               filters: { queue: val('#filter-queue'), namespace: val('#filter-namespace'),
                          user: val('#filter-user'), state: val('#filter-state') },
               rows };
    }""",
    # The job page.
    "job": """() => {
      const q = (s) => document.querySelector(s);
      const job = q('#job');
      if (!job) return null;
      const st = q('#job-state');
      const ex = q('#job-explain');
      const fc = q('#job-forecast');
      const wi = q('#whatif-result');
      const txt = (e) => e ? e.textContent.replace(/\\s+/g, ' ').trim() : null;
      return {
        job: job.dataset.job,
        state: st ? st.dataset.state || null : null,
        pods: [...document.querySelectorAll('#job-pods tr[data-pod]')].map((tr) => {
          const n = tr.querySelector('[data-field="node"]');
          return { pod: tr.dataset.pod, node: n ? n.textContent.trim().replace(/^–$/, '') : null };
        }),
        cause: ex ? (ex.dataset.cause ?? null) : null,
        explain: txt(ex),
        nodeReasons: [...document.querySelectorAll('#job-node-reasons li')].map(txt),
        forecast: fc ? { p50Ms: fc.dataset.p50Ms || null, starts: fc.dataset.starts || null, text: txt(fc) } : null,
        whatif: { pods: q('#whatif-pods') ? q('#whatif-pods').value : null,
                  gpus: q('#whatif-gpus') ? q('#whatif-gpus').value : null,
                  min: q('#whatif-min') ? q('#whatif-min').value : null,
                  fits: wi ? wi.dataset.fits || null : null, startMs: wi ? wi.dataset.startMs || null : null,
                  text: txt(wi) },
        events: [...document.querySelectorAll('#job-events li[data-kind]')].map((li) => ({ kind: li.dataset.kind, text: txt(li) })),
        evictions: [...document.querySelectorAll('#job-evictions tr[data-eviction]')].map((tr) => ({ id: tr.dataset.eviction, text: txt(tr) })),
      };
    }""",
    # The GPU map: domains, nodes and devices.
    "gpus": """() => {
      const map = document.querySelector('#gpu-map');
      if (!map) return null;
      const sel = document.querySelector('#gpu-job');
      return {
        legend: !!document.querySelector('#gpu-legend'),
        selected: sel ? sel.value : null,
        options: sel ? [...sel.options].map((o) => o.value).filter(Boolean) : [],
        domains: [...map.querySelectorAll('.domain[data-level][data-domain]')].map((d) => ({
          level: d.dataset.level, domain: d.dataset.domain,
          nodes: [...d.querySelectorAll(':scope > .nodes > .node[data-node]')].map((n) => n.dataset.node) })),
        nodes: [...map.querySelectorAll('.node[data-node]')].map((n) => ({
          node: n.dataset.node, reservedFor: n.dataset.reservedFor || '',
          notReady: n.classList.contains('notready'), cordoned: n.classList.contains('cordoned'),
          within: (() => { const out = []; let d = n.closest('.domain');
                           while (d) { out.push([d.dataset.level, d.dataset.domain]); d = d.parentElement.closest('.domain'); }
                           return out; })(),
          devices: [...n.querySelectorAll('.dev[data-device]')].map((d) => ({
            device: Number(d.dataset.device), holders: d.dataset.holders ?? null,
            nominatedFor: d.dataset.nominatedFor || '', fit: d.classList.contains('fit') })) })),
      };
    }""",
    "evictions": """() => {
      return [...document.querySelectorAll('#evictions tr[data-eviction]')].map((tr) => {
        const t = (k) => { const e = tr.querySelector(`[data-field="${k}"]`); return e ? e.textContent.replace(/\\s+/g, ' ').trim() : null; };
        return { id: tr.dataset.eviction, job: t('job'), preemptor: t('preemptor'), kind: t('kind'),
                 message: t('message'), node: t('node') };
      });
    }""",
    # What any page shows: view, cycle, errors, the token form.
    "page": """() => {
      const v = document.querySelector('main#view');
      const live = document.querySelector('#live');
      const err = document.querySelector('#view .error');
      const dlg = document.querySelector('#token-dialog');
      return { view: v ? v.dataset.view || null : null, cycle: v && v.dataset.cycle ? Number(v.dataset.cycle) : null,
               busy: v ? v.hasAttribute('aria-busy') : null,
               live: live ? Number(live.dataset.cycle) : null, liveState: live ? live.dataset.state : null,
               error: err ? err.textContent.replace(/\\s+/g, ' ').trim() : null,
               token_form: !!(dlg && !dlg.hidden), hash: location.hash,
               nav: [...document.querySelectorAll('nav a[data-view]')].map((a) => a.dataset.view),
               whoami: (document.querySelector('#whoami') || {}).textContent || '' };
    }""",
}


def chromium_path():
    """The wrapper install-browser.sh writes, on PATH or in the user bin."""
    found = shutil.which("trainyard-chromium")
    if found:
        return found
    candidate = os.path.join(site.getuserbase(), "bin", "trainyard-chromium")
    if os.access(candidate, os.X_OK):
        return candidate
    return None


def reply(value=None, error=None):
    line = json.dumps({"error": error} if error is not None else {"ok": value})
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class Driver:
    def __init__(self, page, base):
        self.page = page
        self.base = base.rstrip("/")
        self.loaded = False

    def page_state(self):
        return self.page.evaluate(READ_JS["page"])

    def wait_view(self, view, min_cycle, timeout):
        """Until main#view[data-view=view] is rendered at min_cycle or later
        (or shows an error, or the token form is open)."""
        self.page.wait_for_function(
            """([view, min]) => {
                 const v = document.querySelector('main#view');
                 const dlg = document.querySelector('#token-dialog');
                 if (dlg && !dlg.hidden) return true;
                 if (!v || (view && v.dataset.view !== view)) return false;
                 if (v.querySelector(':scope > .error')) return true;
                 // data-cycle is set when a refresh has drawn its data
                 // (aria-busy may stay while updates follow each other).
                 return v.dataset.cycle !== undefined && Number(v.dataset.cycle) >= min;
               }""",
            arg=[view, min_cycle],
            timeout=timeout,
        )
        return self.page_state()

    @staticmethod
    def view_of(hash_):
        h = hash_.lstrip("#").lstrip("/")
        name = h.split("?")[0].split("/")[0]
        return name or None

    def run(self, c):
        timeout = c.get("timeout", 20000)
        p = self.page
        if "goto" in c:
            h = c["goto"]
            if not h.startswith("#"):
                h = "#" + h
            if not self.loaded:
                p.goto(self.base + "/ui" + h, timeout=timeout)
                self.loaded = True
            else:
                p.evaluate("(h) => { location.hash = h; }", h)
            return self.wait_view(self.view_of(h), c.get("min_cycle", 0), timeout)
        if "reload" in c:
            p.reload(timeout=timeout)
            return self.wait_view(None, c.get("min_cycle", 0), timeout)
        if "wait_view" in c:
            return self.wait_view(c["wait_view"], c.get("min_cycle", 0), timeout)
        if "wait" in c:
            sel, attr = c["wait"], c.get("attr")
            if c.get("gone"):
                p.wait_for_function("(s) => !document.querySelector(s)", arg=sel, timeout=timeout)
                return True
            if attr is None:
                state = "visible" if c.get("visible") else "attached"
                p.wait_for_selector(sel, state=state, timeout=timeout)
                return True
            if "min" in c:
                p.wait_for_function(
                    "([s, a, m]) => { const e = document.querySelector(s); return !!e && Number(e.getAttribute(a)) >= m; }",
                    arg=[sel, attr, c["min"]], timeout=timeout)
            else:
                p.wait_for_function(
                    "([s, a, v]) => [...document.querySelectorAll(s)].some((e) => e.getAttribute(a) === v)",
                    arg=[sel, attr, c.get("value")], timeout=timeout)
            return p.evaluate("([s, a]) => { const e = document.querySelector(s); return e && e.getAttribute(a); }", [sel, attr])
        if "read" in c:
            what = c["read"]
            if what not in READ_JS:
                raise ValueError(f"read: unknown view {what!r}; expected one of {', '.join(READ_JS)}")
            out = {"page": self.page_state(), "data": p.evaluate(READ_JS[what])}
            return out
        if "fill" in c:
            p.fill(c["fill"], str(c["text"]), timeout=timeout)
            return True
        if "select" in c:
            return p.select_option(c["select"], value=c["value"], timeout=timeout)
        if "click" in c:
            p.click(c["click"], timeout=timeout)
            return True
        if "press" in c:
            p.keyboard.press(c["press"])
            return True
        if "type" in c:
            p.keyboard.type(c["type"])
            return True
        if "focused" in c:
            return p.evaluate("""() => { const e = document.activeElement;
                if (!e) return null;
                const tr = e.closest && e.closest('tr[data-job]');
                return { tag: e.tagName, id: e.id || '', job: tr ? tr.dataset.job : null,
                         text: (e.textContent || '').replace(/\\s+/g, ' ').trim().slice(0, 200) }; }""")
        if "eval" in c:
            return p.evaluate(c["eval"])
        if "scroll" in c:
            return p.evaluate("([s, t]) => { const e = document.querySelector(s); e.scrollTop = t; return e.scrollTop; }",
                              [c["scroll"], c.get("top", 0)])
        if "screenshot" in c:
            path = c["screenshot"]
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            # No caret, no transitions: the same page gives the same picture.
            p.screenshot(path=path, full_page=c.get("full_page", False), animations="disabled", caret="hide")
            return {"path": path, "bytes": os.path.getsize(path)}
        if "timing" in c:
            return p.evaluate("() => window.__trainyard || null")
        if "sleep" in c:
            time.sleep(c["sleep"] / 1000)
            return True
        raise ValueError(f"unknown command {json.dumps(c)}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("--width", type=int, default=1400)
    ap.add_argument("--height", type=int, default=900)
    ap.add_argument("--ignore-https-errors", action="store_true")
    args = ap.parse_args()
    try:
        from playwright.sync_api import sync_playwright
    except Exception as e:  # noqa: BLE001 - any import failure is "missing"
        reply(error=f"playwright cannot be imported ({e}): run scripts/install-browser.sh")
        sys.exit(2)
    exe = chromium_path()
    if exe is None:
        reply(error="trainyard-chromium not found on PATH or in the user bin: run scripts/install-browser.sh")
        sys.exit(2)
    with sync_playwright() as pw:
        try:
            browser = pw.chromium.launch(executable_path=exe)
        except Exception as e:  # noqa: BLE001
            reply(error=f"chromium ({exe}) does not start: {e}")
            sys.exit(2)
        ctx = browser.new_context(viewport={"width": args.width, "height": args.height},
                                  ignore_https_errors=args.ignore_https_errors,
                                  reduced_motion="reduce", locale="en-GB", timezone_id="UTC")
        page = ctx.new_page()
        console = []
        page.on("console", lambda m: console.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
        d = Driver(page, args.base)
        reply({"ready": True, "chromium": browser.version})
        for line in sys.stdin:
            line = line.strip()
            if not line:
                continue
            try:
                c = json.loads(line)
                if c.get("quit"):
                    reply(True)
                    break
                if c.get("console"):
                    reply(console[-50:])
                    continue
                reply(d.run(c))
            except Exception as e:  # noqa: BLE001 - every failure is an answer
                msg = str(e).splitlines()
                tail = console[-5:]
                reply(error=f"{type(e).__name__}: {' | '.join(msg[:6])}" + (f" (browser console: {tail})" if tail else ""))
                if os.environ.get("TRAINYARD_UI_DEBUG"):
                    traceback.print_exc(file=sys.stderr)
        browser.close()


if __name__ == "__main__":
    main()

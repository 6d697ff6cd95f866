"""The timeline page of `ortmem view`: one HTML document, inline CSS and JS, no network.

`__TITLE__` and `__DATA__` are filled by `refimpl.view.render_html`: the
data is the trace's events as JSON with `<` and `>` escaped, read with
JSON.parse. The page builds its model with `refimpl.view_page_js.MODEL_JS`
(the same rules as `refimpl.view_model`), from those events or from a file
picked in the page, and draws per authority: charge stacked by holder and
role, the ledger's own `used`, the limit, oversubscription bands, and the
markers. Wheel zooms, drag pans, double-click resets; hover shows the
stack at that event. Labels are inserted with textContent, never as markup.
The script exposes `window.ortmemTimeline` (the model, `parse`, `build`,
`load`, the view window) so a browser test can read what was drawn.
"""

from __future__ import annotations

from refimpl.view_page_js import MODEL_JS

__all__ = ["PAGE"]

_RENDER_JS = r"""
(function () {
  "use strict";
  const NS = "http://www.w3.org/2000/svg";
  const W = 1000, H = 240, L = 78, R = 12, T = 10, STRIP = 26;
  const PALETTE = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c",
                   "#ccb974", "#64b5cd", "#2f4b7c", "#a05195"];
  const CAT = {"device loss": "#c00000", "grant": "#17becf", "ticket": "#1f77b4", "pressure": "#ff7f0e",
               "transaction": "#2ca02c", "limit": "#8c564b", "boundary": "#555555", "rejected": "#b0b0b0"};
  const $ = (id) => document.getElementById(id);
  const tip = $("tip");
  const state = {model: null, lo: 0, hi: 1, name: ""};
  const el = (tag, attrs, parent) => {
    const e = document.createElementNS(NS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  };
  const html = (tag, text, parent, cls) => {
    const e = document.createElement(tag);
    if (text !== undefined) e.textContent = text;
    if (cls) e.className = cls;
    if (parent) parent.appendChild(e);
    return e;
  };
  function bytes(v) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let u = 0, x = Math.abs(v);
    while (x >= 1024 && u < units.length - 1) { x /= 1024; u++; }
    return (v < 0 ? "-" : "") + (u ? x.toFixed(x < 10 ? 2 : 1) : String(x)) + " " + units[u];
  }
  const at = (series, i) => {  // a step series' value at event i (binary search: series are in event order)
    let lo = 0, hi = series.length;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (series[mid][0] <= i) lo = mid + 1; else hi = mid; }
    return lo ? series[lo - 1][1] : 0;
  };
  const sample = (series, xs) => {  // values at sorted event indices, in one sweep
    const out = new Array(xs.length);
    let k = 0, v = 0;
    xs.forEach((i, n) => { while (k < series.length && series[k][0] <= i) v = series[k++][1]; out[n] = v; });
    return out;
  };
  const x = (i) => L + (W - L - R) * ((i - state.lo) / (state.hi - state.lo));
  const indexAt = (svg, clientX) => {
    const r = svg.getBoundingClientRect(), vx = (clientX - r.left) / r.width * W;
    return Math.max(0, Math.min(state.model.events - 1, Math.floor(state.lo + (vx - L) / (W - L - R) * (state.hi - state.lo))));
  };
  const showTip = (ev, text) => {
    tip.textContent = text; tip.style.display = "block";
    tip.style.left = Math.min(ev.clientX + 14, window.innerWidth - 470) + "px";
    tip.style.top = (ev.clientY + 14) + "px";
  };
  const hideTip = () => { tip.style.display = "none"; };
  function stackAt(aid, i) {
    const a = state.model.authorities.find((b) => b.id === aid), out = {};
    if (a) for (const k of Object.keys(a.series)) out[k] = at(a.series[k], i);
    return out;
  }
  function stepPath(points, y, close) {  // [[i, v]] over the window as a step line
    let d = "";
    points.forEach(([i, v], n) => {
      const nx = n + 1 < points.length ? points[n + 1][0] : state.hi;
      d += (n ? "L" : "M") + x(i).toFixed(1) + " " + y(v).toFixed(1) + "L" + x(nx).toFixed(1) + " " + y(v).toFixed(1);
    });
    return d;
  }
  function markerStrip(svg, markers, y) {
    for (const m of markers) {
      if (m.i < state.lo || m.i >= state.hi) continue;
      const c = el("rect", {x: x(m.i) - 1.5, y: y, width: 3, height: 14, fill: CAT[m.category] || "#000",
                            class: "marker", "data-category": m.category, "data-kind": m.kind}, svg);
      const t = "event " + m.i + ": " + m.kind + " (" + m.category + ")" + (m.holder ? ", holder " + m.holder : "") +
                "\n" + m.detail;
      c.addEventListener("mousemove", (ev) => { ev.stopPropagation(); showTip(ev, t); });
      c.addEventListener("mouseout", hideTip);
    }
  }
  function panel(a, colorOf, byEvent) {
    const m = state.model, box = html("div", undefined, $("panels"), "panel");
    box.setAttribute("data-authority", a.id);
    const first = a.limit[0][1], last = a.limit[a.limit.length - 1][1];
    const limits = a.limit.length === 1 ? bytes(first)
      : bytes(first) + " \u2192 " + bytes(last) + " (" + (a.limit.length - 1) + " changes)";
    html("h2", "authority " + a.id + ": " + a.pool + " (" + a.tier + "), limit " + limits +
         (a.over.length ? ", oversubscribed " + a.over.length + "\u00d7" : ""), box);
    const keys = Object.keys(a.series).sort();
    const pts = new Set([state.lo]);
    for (const k of keys) for (const [j] of a.series[k]) if (j > state.lo && j < state.hi) pts.add(j);
    for (const [j] of a.used) if (j > state.lo && j < state.hi) pts.add(j);
    for (const [j] of a.limit) if (j > state.lo && j < state.hi) pts.add(j);
    const xs = Array.from(pts).sort((p, q) => p - q);
    let top = 1;
    const usedAt = sample(a.used, xs), limitAt = sample(a.limit, xs);
    xs.forEach((i, n) => { top = Math.max(top, usedAt[n], limitAt[n]); });
    top *= 1.1;
    const y = (v) => T + (H - T - 20) * (1 - v / top);
    const svg = el("svg", {viewBox: "0 0 " + W + " " + (H + STRIP), width: "100%", role: "img",
                           "data-authority": a.id}, box);
    const step = 2 ** Math.ceil(Math.log2(Math.max(1, top / 1.1 / 4)));  // ticks at powers of two of bytes
    for (let v = 0; v <= top; v += step) {
      el("line", {x1: L, x2: W - R, y1: y(v), y2: y(v), stroke: "#eee"}, svg);
      el("text", {x: L - 6, y: y(v) + 4, "text-anchor": "end"}, svg).textContent = bytes(v);
    }
    for (let t = 0; t <= 5; t++) {
      const i = Math.round(state.lo + (state.hi - state.lo) * t / 5);
      el("text", {x: x(i), y: H - 4, "text-anchor": t === 0 ? "start" : t === 5 ? "end" : "middle"}, svg).textContent = "" + i;
    }
    for (const [s, e] of a.over) {
      if (e <= state.lo || s >= state.hi) continue;
      el("rect", {x: x(Math.max(s, state.lo)), y: T, width: Math.max(2, x(Math.min(e, state.hi)) - x(Math.max(s, state.lo))),
                  height: H - T - 20, fill: "#ff0000", "fill-opacity": 0.12, class: "over", "data-over": a.id}, svg);
    }
    const lower = xs.map(() => 0);
    keys.forEach((k) => {
      const values = sample(a.series[k], xs), upper = xs.map((i, n) => lower[n] + values[n]);
      if (upper.every((v, n) => v === lower[n])) return;
      let d = stepPath(xs.map((i, n) => [i, upper[n]]), y);
      for (let n = xs.length - 1; n >= 0; n--) {
        const nx = n + 1 < xs.length ? xs[n + 1] : state.hi;
        d += "L" + x(nx).toFixed(1) + " " + y(lower[n]).toFixed(1) + "L" + x(xs[n]).toFixed(1) + " " + y(lower[n]).toFixed(1);
      }
      el("path", {d: d + "Z", fill: colorOf(k), "fill-opacity": 0.85, stroke: "none",
                  "data-series": k, "data-authority": a.id}, svg);
      upper.forEach((v, n) => { lower[n] = v; });
    });
    const used = [[state.lo, at(a.used, state.lo)], ...a.used.filter(([j]) => j > state.lo && j < state.hi)];
    el("path", {d: stepPath(used, y), fill: "none", stroke: "#111", "stroke-width": 1, "data-used": a.id}, svg);
    const lim = [[Math.max(state.lo, a.limit[0][0]), at(a.limit, state.lo)], ...a.limit.filter(([j]) => j > state.lo && j < state.hi)];
    if (a.limit[0][0] > state.lo) lim[0][1] = a.limit[0][1];
    el("path", {d: stepPath(lim, y), fill: "none", stroke: "#c00", "stroke-dasharray": "6 4", "stroke-width": 1.5,
                "data-limit": a.id}, svg);
    el("text", {x: W - R - 4, y: y(at(a.limit, state.hi - 1)) - 4, "text-anchor": "end", fill: "#c00"}, svg).textContent = "limit";
    const cursor = el("line", {y1: T, y2: H - 20, stroke: "#333", "stroke-width": 0.7, visibility: "hidden"}, svg);
    svg.addEventListener("mousemove", (ev) => {
      if (drag) return;
      const i = indexAt(svg, ev.clientX), cx = x(i);
      cursor.setAttribute("x1", cx); cursor.setAttribute("x2", cx); cursor.setAttribute("visibility", "visible");
      const lines = ["event " + i + (byEvent[i] ? ": " + byEvent[i].kind + " (" + byEvent[i].category + ")" : ""),
                     "used " + bytes(at(a.used, i)) + " of limit " + bytes(at(a.limit, i))];
      for (const k of keys) { const v = at(a.series[k], i); if (v) lines.push("  " + k + ": " + bytes(v)); }
      if (byEvent[i] && byEvent[i].authority === a.id) lines.push(byEvent[i].detail);
      showTip(ev, lines.join("\n"));
    });
    svg.addEventListener("mouseleave", () => { cursor.setAttribute("visibility", "hidden"); hideTip(); });
    svg.addEventListener("wheel", (ev) => {
      ev.preventDefault();
      const r = svg.getBoundingClientRect(), f = Math.max(0, Math.min(1, ((ev.clientX - r.left) / r.width * W - L) / (W - L - R)));
      const span = state.hi - state.lo, next = Math.max(4, Math.min(m.events, span * (ev.deltaY < 0 ? 0.8 : 1.25)));
      const lo = state.lo + f * (span - next);
      setView(lo, lo + next);
    }, {passive: false});
    svg.addEventListener("mousedown", (ev) => { drag = {x: ev.clientX, lo: state.lo, hi: state.hi, w: svg.getBoundingClientRect().width}; ev.preventDefault(); });
    svg.addEventListener("dblclick", () => setView(0, m.events));
    markerStrip(svg, m.markers.filter((mk) => mk.authority === a.id), H + 6);
    const legend = html("div", undefined, box, "legend");
    for (const k of keys) {
      const s = html("span", undefined, legend); s.setAttribute("data-key", k);
      html("i", undefined, s).style.background = colorOf(k); s.appendChild(document.createTextNode(k));
    }
    const s = html("span", undefined, legend);
    html("i", undefined, s).style.background = "#111"; s.appendChild(document.createTextNode("ledger used (observed)"));
  }
  let drag = null;
  window.addEventListener("mousemove", (ev) => {
    if (!drag) return;
    const shift = (drag.x - ev.clientX) / drag.w * (drag.hi - drag.lo) * W / (W - L - R);
    setView(drag.lo + shift, drag.hi + shift);
  });
  window.addEventListener("mouseup", () => { drag = null; });
  function setView(lo, hi) {
    const n = state.model.events, span = Math.min(n, hi - lo);
    lo = Math.max(0, Math.min(n - span, lo));
    state.lo = lo; state.hi = lo + span;
    draw();
  }
  function draw() {
    const m = state.model;
    $("panels").textContent = ""; $("global").textContent = "";
    const byEvent = {};
    for (const mk of m.markers) byEvent[mk.i] = mk;
    const allKeys = Array.from(new Set(m.authorities.flatMap((a) => Object.keys(a.series)))).sort();
    const colorOf = (k) => (k === ortmemModel.unattributed ? "#cfcfcf" : PALETTE[allKeys.indexOf(k) % PALETTE.length]);
    $("window").textContent = state.lo > 0 || state.hi < m.events
      ? "showing events " + Math.floor(state.lo) + "\u2013" + Math.ceil(state.hi) + " of " + m.events : "";
    const global = m.markers.filter((mk) => mk.authority === null || !m.authorities.some((a) => a.id === mk.authority));
    if (global.length) {
      const box = html("div", undefined, $("global"), "panel");
      html("h2", "process-wide events", box);
      markerStrip(el("svg", {viewBox: "0 0 " + W + " " + STRIP, width: "100%"}, box), global, 6);
    }
    m.authorities.forEach((a) => panel(a, colorOf, byEvent));
  }
  function show(model, name) {
    state.model = model; state.name = name; state.lo = 0; state.hi = Math.max(1, model.events);
    $("message").textContent = ""; $("message").style.display = "none";
    const auths = model.authorities.length, holders = Object.keys(model.holders).length;
    $("summary").textContent = name + ": " + model.events + " events, " + auths + " authorities, " + holders +
      " holders. Charge stacked by holder / role against each authority's limit (red dashed); red bands: used over " +
      "the limit. Wheel zooms, drag pans, double-click resets; hover for the stack at an event.";
    const cats = $("categories"); cats.textContent = "";
    for (const c in CAT) {
      const s = html("span", undefined, cats); html("i", undefined, s).style.background = CAT[c];
      s.appendChild(document.createTextNode(c + " (" + model.markers.filter((mk) => mk.category === c).length + ")"));
    }
    if (!model.events) fail(name + ": the trace has no events: nothing to draw.");
    else if (!auths) fail(name + ": no authority is registered in this trace: nothing to draw.");
    draw();
  }
  function fail(text) {
    $("message").textContent = text; $("message").style.display = "block";
  }
  function load(text, name) {
    let model;
    try {
      model = ortmemModel.build(ortmemModel.parse(text));
    } catch (err) {
      if (!(err instanceof ortmemModel.TraceError)) throw err;
      state.model = null; $("panels").textContent = ""; $("global").textContent = ""; $("summary").textContent = "";
      fail(name + ": rejected trace: " + err.message);
      return false;
    }
    show(model, name);
    return true;
  }
  $("file").addEventListener("change", (ev) => {
    const f = ev.target.files[0];
    if (f) f.text().then((t) => { load(t, f.name); window.ortmemTimeline.loaded += 1; });
  });
  $("reset").addEventListener("click", () => { if (state.model) setView(0, state.model.events); });
  const events = JSON.parse($("data").textContent);
  show(ortmemModel.build(events), document.title);
  window.ortmemTimeline = {
    get model() { return state.model; }, get view() { return [state.lo, state.hi]; },
    parse: ortmemModel.parse, build: ortmemModel.build, load: load, setView: setView, stackAt: stackAt,
    bytes: bytes, rendered: true, loaded: 0,
  };
})();
"""

PAGE = r"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<title>__TITLE__</title>
<style>
body{font:13px/1.4 system-ui,sans-serif;margin:16px;color:#222;background:#fff}
h1{font-size:17px;margin:0 0 4px} h2{font-size:14px;margin:4px 0 2px}
.sub{color:#555;margin-bottom:6px} .panel{border:1px solid #ddd;border-radius:6px;padding:8px 10px;margin:10px 0}
.bar{display:flex;gap:14px;align-items:center;margin:6px 0} #window{color:#555}
#message{display:none;border:1px solid #c00;background:#fff3f3;color:#900;border-radius:6px;padding:10px;margin:10px 0}
.legend span{display:inline-block;margin:2px 12px 2px 0;white-space:nowrap}
.legend i{display:inline-block;width:11px;height:11px;margin-right:4px;vertical-align:-1px;border-radius:2px}
#tip{position:fixed;pointer-events:none;background:#fffbe6;border:1px solid #caa;border-radius:4px;padding:5px 7px;
 max-width:460px;font:12px/1.35 ui-monospace,monospace;white-space:pre-wrap;display:none;z-index:9}
svg{user-select:none;cursor:crosshair} svg text{font:11px system-ui,sans-serif;fill:#444} .marker{cursor:pointer}
</style></head><body>
<h1>__TITLE__</h1>
<div class="bar"><label>open a trace: <input type="file" id="file" accept=".jsonl,.json,.txt"></label>
<button id="reset" type="button">reset zoom</button><span id="window"></span></div>
<div class="sub" id="summary"></div>
<div id="message" role="alert"></div>
<div class="legend" id="categories"></div>
<div id="global"></div>
<div id="panels"></div>
<div id="tip"></div>
<script type="application/json" id="data">__DATA__</script>
<script>
__SCRIPT__
</script></body></html>
""".replace("__SCRIPT__", MODEL_JS + _RENDER_JS)

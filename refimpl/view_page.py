"""The timeline page of `ortmem view`: one HTML document, inline CSS and JS, no network.

`__TITLE__` and `__DATA__` are filled by `refimpl.view.render_html` (the data
is JSON with `<` and `>` escaped, read with JSON.parse; labels are inserted
with textContent). The script exposes `window.ortmemTimeline` (the data and
`stackAt(authority, event)`) so a browser test can read what was drawn.
"""

from __future__ import annotations

__all__ = ["PAGE"]

PAGE = r"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<title>__TITLE__</title>
<style>
body{font:13px/1.4 system-ui,sans-serif;margin:16px;color:#222;background:#fff}
h1{font-size:17px;margin:0 0 4px} h2{font-size:14px;margin:18px 0 2px}
.sub{color:#666;margin-bottom:8px} .panel{border:1px solid #ddd;border-radius:6px;padding:8px 10px;margin:10px 0}
.legend span{display:inline-block;margin:2px 12px 2px 0;white-space:nowrap}
.legend i{display:inline-block;width:11px;height:11px;margin-right:4px;vertical-align:-1px;border-radius:2px}
#tip{position:fixed;pointer-events:none;background:#fffbe6;border:1px solid #caa;border-radius:4px;padding:5px 7px;
 max-width:460px;font:12px/1.35 ui-monospace,monospace;white-space:pre-wrap;display:none;z-index:9}
svg text{font:11px system-ui,sans-serif;fill:#444} .marker{cursor:pointer}
</style></head><body>
<h1>__TITLE__</h1>
<div class="sub" id="summary"></div>
<div class="legend" id="categories"></div>
<div id="global"></div>
<div id="panels"></div>
<div id="tip"></div>
<script type="application/json" id="data">__DATA__</script>
<script>
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("data").textContent);
  const NS = "http://www.w3.org/2000/svg";
  const W = 1000, H = 240, L = 70, R = 12, T = 10, STRIP = 26;
  const PALETTE = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c",
                   "#ccb974", "#64b5cd"];
  const CAT = {"device loss": "#c00000", "ticket": "#1f77b4", "pressure": "#ff7f0e", "transaction": "#2ca02c",
               "limit": "#8c564b", "boundary": "#555555", "rejected": "#b0b0b0", "divergence": "#e6007e"};
  const N = Math.max(1, data.events);
  const tip = document.getElementById("tip");
  const el = (tag, attrs, parent) => {
    const e = document.createElementNS(NS, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  };
  const html = (tag, text, parent) => {
    const e = document.createElement(tag);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  };
  const x = (i) => L + (W - L - R) * (i / N);
  const showTip = (ev, text) => {
    tip.textContent = text; tip.style.display = "block";
    tip.style.left = Math.min(ev.clientX + 14, window.innerWidth - 470) + "px";
    tip.style.top = (ev.clientY + 14) + "px";
  };
  const hideTip = () => { tip.style.display = "none"; };
  // value of a step series [[event, value], ...] at event i
  const at = (steps, i) => {
    let v = 0;
    for (const [j, u] of steps) { if (j > i) break; v = u; }
    return v;
  };
  const byId = {};
  for (const a of data.authorities) byId[a.id] = a;
  function stackAt(aid, i) {
    const a = byId[aid], out = {};
    if (!a) return out;
    for (const key of Object.keys(a.series)) out[key] = at(a.series[key], i);
    return out;
  }
  function markerStrip(svg, markers, y) {
    for (const m of markers) {
      const c = el("rect", {x: x(m.i) - 2, y: y, width: 4, height: 14, fill: CAT[m.category] || "#000",
                            class: "marker", "data-category": m.category, "data-kind": m.kind}, svg);
      const text = "event " + m.i + ": " + m.kind + " (" + m.category + ")\n" + m.detail;
      c.addEventListener("mouseover", (ev) => showTip(ev, text));
      c.addEventListener("mousemove", (ev) => showTip(ev, text));
      c.addEventListener("mouseout", hideTip);
    }
  }
  function panel(a, colorOf) {
    const box = html("div", undefined, document.getElementById("panels"));
    box.className = "panel"; box.setAttribute("data-authority", a.id);
    html("h2", "authority " + a.id + ": " + a.pool + " (" + a.tier + "), limit " + a.capacity.toLocaleString() + " B", box);
    const keys = Object.keys(a.series).sort();
    const points = new Set([0, N - 1]);
    for (const k of keys) for (const [j] of a.series[k]) points.add(j);
    for (const [j] of a.used) points.add(j);
    const xs = Array.from(points).sort((p, q) => p - q);
    let top = a.capacity;
    for (const i of xs) {
      let s = 0; for (const k of keys) s += at(a.series[k], i);
      top = Math.max(top, s, at(a.used, i));
    }
    top = Math.max(1, top) * 1.1;
    const y = (v) => T + (H - T - 20) * (1 - v / top);
    const svg = el("svg", {viewBox: "0 0 " + W + " " + (H + STRIP), width: "100%", role: "img"}, box);
    for (let t = 0; t <= 4; t++) {
      const v = top / 1.1 * t / 4;
      el("line", {x1: L, x2: W - R, y1: y(v), y2: y(v), stroke: "#eee"}, svg);
      el("text", {x: L - 6, y: y(v) + 4, "text-anchor": "end"}, svg).textContent = Math.round(v).toLocaleString();
    }
    el("text", {x: W - R, y: H - 4, "text-anchor": "end"}, svg).textContent = "event (trace order)";
    const lower = xs.map(() => 0);
    keys.forEach((k) => {
      const upper = xs.map((i, n) => lower[n] + at(a.series[k], i));
      let d = "";
      xs.forEach((i, n) => {
        const nx = n + 1 < xs.length ? x(xs[n + 1]) : x(N);
        d += (n ? "L" : "M") + x(i) + " " + y(upper[n]) + "L" + nx + " " + y(upper[n]);
      });
      for (let n = xs.length - 1; n >= 0; n--) {
        const nx = n + 1 < xs.length ? x(xs[n + 1]) : x(N);
        d += "L" + nx + " " + y(lower[n]) + "L" + x(xs[n]) + " " + y(lower[n]);
      }
      const p = el("path", {d: d + "Z", fill: colorOf(k), "fill-opacity": 0.8, stroke: "none",
                            "data-series": k, "data-authority": a.id}, svg);
      p.addEventListener("mousemove", (ev) => {
        const i = Math.max(0, Math.min(N - 1, Math.floor((ev.offsetX / svg.clientWidth * W - L) / (W - L - R) * N)));
        showTip(ev, k + " at event " + i + ": " + at(a.series[k], i).toLocaleString() + " B");
      });
      p.addEventListener("mouseout", hideTip);
      upper.forEach((v, n) => { lower[n] = v; });
    });
    let u = "";
    a.used.forEach(([i, v], n) => {
      const nx = n + 1 < a.used.length ? x(a.used[n + 1][0]) : x(N);
      u += (n ? "L" : "M") + x(i) + " " + y(v) + "L" + nx + " " + y(v);
    });
    if (u) el("path", {d: u, fill: "none", stroke: "#111", "stroke-width": 1, "data-used": a.id}, svg);
    el("line", {x1: L, x2: W - R, y1: y(a.capacity), y2: y(a.capacity), stroke: "#c00", "stroke-dasharray": "6 4",
                "stroke-width": 1.5, "data-limit": a.id}, svg);
    el("text", {x: W - R - 4, y: y(a.capacity) - 4, "text-anchor": "end", fill: "#c00"}, svg).textContent = "limit";
    markerStrip(svg, data.markers.filter((m) => m.authority === a.id), H + 6);
    const legend = html("div", undefined, box); legend.className = "legend";
    for (const k of keys) {
      const s = html("span", undefined, legend); const i = html("i", undefined, s);
      i.style.background = colorOf(k); s.appendChild(document.createTextNode(k));
    }
    const s = html("span", undefined, legend); const i = html("i", undefined, s);
    i.style.background = "#111"; s.appendChild(document.createTextNode("ledger used (observed)"));
  }
  const allKeys = Array.from(new Set(data.authorities.flatMap((a) => Object.keys(a.series)))).sort();
  const colorOf = (k) => PALETTE[allKeys.indexOf(k) % PALETTE.length];
  document.getElementById("summary").textContent = data.events + " events, " + data.authorities.length +
    " authorities, " + Object.keys(data.holders).length + " holders; charge stacked by holder / role against " +
    "each authority's limit; markers below each chart (hover for details).";
  const cats = document.getElementById("categories");
  for (const c in CAT) {
    const n = data.markers.filter((m) => m.category === c).length;
    const s = html("span", undefined, cats); const i = html("i", undefined, s);
    i.style.background = CAT[c]; s.appendChild(document.createTextNode(c + " (" + n + ")"));
  }
  const global = data.markers.filter((m) => m.authority === null || !(m.authority in byId));
  if (global.length) {
    const box = html("div", undefined, document.getElementById("global")); box.className = "panel";
    html("h2", "process-wide events", box);
    const svg = el("svg", {viewBox: "0 0 " + W + " " + STRIP, width: "100%"}, box);
    markerStrip(svg, global, 6);
  }
  data.authorities.forEach((a) => panel(a, colorOf));
  window.ortmemTimeline = {data: data, stackAt: stackAt, rendered: true};
})();
</script></body></html>
"""

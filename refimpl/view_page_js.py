"""The page's trace reader and model, in JavaScript: `refimpl.view.read_events` and `refimpl.view_model.build_model`.

The page builds its model in the browser, from the events `ortmem view`
embedded or from a file the user picks, so one page opens any trace.
Every rule mirrors the Python modules line for line (categories and limits
come from them, as JSON); `tests/test_view_browser.py` compares the two
models on a trace of every kind. Change both together.
"""

from __future__ import annotations

import json

from invariants.trace_format import MAX_LINE_BYTES
from refimpl.view_model import CATEGORIES, MAX_EVENTS, UNATTRIBUTED

__all__ = ["MODEL_JS"]

_CONSTANTS = json.dumps({"categories": CATEGORIES, "unattributed": UNATTRIBUTED, "maxLine": MAX_LINE_BYTES,
                         "maxEvents": MAX_EVENTS})

MODEL_JS = r"""
const ortmemModel = (function () {
  "use strict";
  const C = __CONSTANTS__;
  const STATE_ROLE = {plan_tx: "state"};
  const PLACED = {submit: "ticket", press: "pressure"};
  const KIND = /^[a-z][a-z_]{0,63}$/, ID = /^[0-9]{1,20}$/;
  const isObj = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
  const obj = (v) => (isObj(v) ? v : {});
  const int = (v) => (typeof v === "number" && Number.isInteger(v) ? v : null);
  const cut = (s, n) => Array.from(s).slice(0, n).join("");
  const text = (v, n, dflt) => (typeof v === "string" ? cut(v, n) : dflt === undefined ? "" : dflt);
  class TraceError extends Error {}

  function parse(source) {  // read_events: the events of a JSONL text; TraceError naming the first bad line
    const lines = source.split("\n"), out = [], enc = new TextEncoder();
    for (let n = 1; n <= lines.length; n++) {
      const raw = lines[n - 1];
      if (n === lines.length && raw === "") break;
      if (enc.encode(raw).length + (n < lines.length ? 1 : 0) > C.maxLine)
        throw new TraceError("line " + n + ": longer than " + C.maxLine + " bytes");
      if (!raw.trim()) continue;
      if (out.length >= C.maxEvents) throw new TraceError("more than " + C.maxEvents + " events");
      let e;
      try { e = JSON.parse(raw); } catch (err) { throw new TraceError("line " + n + ": not JSON (" + err.message + ")"); }
      if (!isObj(e) || typeof e.kind !== "string" || !KIND.test(e.kind))
        throw new TraceError("line " + n + ": not a trace event (no valid 'kind')");
      for (const field of ["ids", "payload"])
        if (field in e && !isObj(e[field])) throw new TraceError("line " + n + ": '" + field + "' is not an object");
      out.push(e);
    }
    return out;
  }

  function steps(series, i, v) {
    const last = series[series.length - 1];
    if (last && last[0] === i) {
      last[1] = v;
      if (series.length > 1 && series[series.length - 2][1] === v) series.pop();
    } else if (!last || last[1] !== v) series.push([i, v]);
  }

  function apply(charge, series, subjects, d, i) {
    if (d > 0) {
      const k = subjects.length ? subjects[0] : C.unattributed;
      charge[k] = (charge[k] || 0) + d;
      if (!series[k]) series[k] = [];
      steps(series[k], i, charge[k]);
      return;
    }
    let rest = -d;
    const others = Object.keys(charge).filter((k) => !subjects.includes(k))
      .sort((a, b) => (charge[b] - charge[a]) || (a < b ? -1 : a > b ? 1 : 0));
    for (const k of [...subjects.filter((s) => s in charge), ...others]) {
      const take = Math.min(rest, charge[k]);
      if (take) { charge[k] -= take; rest -= take; steps(series[k], i, charge[k]); }
      if (!rest) break;
    }
  }

  function detail(ids, p) {
    const rest = {};
    for (const k of Object.keys(p)) if (!["used", "charges", "outcome", "error", "bundles"].includes(k)) rest[k] = p[k];
    const o = {ids: ids, outcome: p.outcome === undefined ? null : p.outcome,
               error: p.error === undefined ? null : p.error};
    return cut(JSON.stringify(Object.assign(o, rest)), 400);
  }

  function build(events) {  // build_model
    const names = new Map(), auths = new Map(), canon = new Map(), used = new Map(), charge = new Map();
    const owners = {allocation: new Map(), allowance: new Map(), ticket: new Map(), tx: new Map()};
    const where = {ticket: new Map(), pressure: new Map()};
    const markers = [], n = events.length;
    const key = (h, role) => (int(h) === null ? "?" : names.has(h) ? names.get(h) : String(h)) + " / " + role;
    const newAuthority = (aid, pool, tier, capacity, i) => {
      auths.set(aid, {id: aid, pool: text(pool, 64), tier: text(tier, 16), limit: [[i, int(capacity) || 0]],
                      used: [], series: {}, over: []});
      canon.set(aid, aid); used.set(aid, 0); charge.set(aid, {});
    };
    events.forEach((e, i) => {
      const kind = e.kind, rev = e.contract_revision, ids = obj(e.ids), p = obj(e.payload);
      const ok = p.outcome === "accepted";
      const result = int(p.result);
      const holder = ids.holder;
      const role = typeof p.role === "string" ? cut(p.role, 16) : (STATE_ROLE[kind] || "?");
      if (ok && kind === "register_holder" && result !== null) names.set(result, text(p.name, 64, String(result)));
      else if (ok && kind === "register_authority" && result !== null) newAuthority(result, p.pool, p.tier, p.capacity, i);
      else if (ok && kind === "register_alias" && result !== null && canon.has(int(ids.of))) canon.set(result, canon.get(ids.of));
      else if (ok && kind === "commit_limit" && auths.has(int(ids.authority))) {
        const limit = int(obj(p.result).limit);
        if (limit !== null) steps(auths.get(ids.authority).limit, i, limit);
      }
      const named = canon.has(int(ids.authority)) ? canon.get(ids.authority) : null;
      if (ok && result !== null && named !== null && kind in PLACED) where[PLACED[kind]].set(result, named);
      if (ok && result !== null) {
        if (kind === "reserve" || kind === "record_committed") owners.allocation.set(result, key(holder, role));
        else if (kind === "open_allowance") owners.allowance.set(result, key(holder, "allowance"));
        else if (kind === "submit") owners.ticket.set(result, key(holder, role));
        else if (kind in STATE_ROLE) owners.tx.set(result, key(holder, role));
        else if (kind === "claim" && owners.ticket.has(int(ids.ticket))) owners.allocation.set(result, owners.ticket.get(ids.ticket));
        else if (kind === "reserve_tx" && owners.tx.has(int(ids.tx))) owners.allocation.set(result, owners.tx.get(ids.tx));
      }
      const subjects = [];
      const add = (k) => { if (k !== undefined && !subjects.includes(k)) subjects.push(k); };
      for (const [field, book] of [["allocation", "allocation"], ["allowance", "allowance"], ["source", "allowance"],
                                   ["target", "allowance"], ["ticket", "ticket"], ["tx", "tx"]])
        add(owners[book].get(int(ids[field])));
      if (Array.isArray(p.victims)) for (const v of p.victims) add(owners["allocation"].get(int(v)));
      if (int(holder) !== null) add(key(holder, role));
      const figures = new Map();
      const part = obj(p.used);
      for (const s of Object.keys(part))
        if (ID.test(s) && auths.has(Number(s)) && int(part[s]) !== null) figures.set(Number(s), part[s]);
      const moved = [];
      for (const a of Array.from(figures.keys()).sort((x, y) => x - y)) {
        const u = figures.get(a), d = u - used.get(a);
        used.set(a, u);
        if (d) moved.push(a);
        if (d) { apply(charge.get(a), auths.get(a).series, subjects, d, i); steps(auths.get(a).used, i, u); }
      }
      for (const [a, rec] of auths) {
        const over = rec.over, limit = rec.limit[rec.limit.length - 1][1], open = over.length && over[over.length - 1][1] === null;
        if (used.get(a) > limit && !open) over.push([i, null]);
        else if (used.get(a) <= limit && open) over[over.length - 1][1] = i;
      }
      const category = p.outcome === "rejected" ? "rejected" : (Object.prototype.hasOwnProperty.call(C.categories, kind)
        ? C.categories[kind] : null);
      if (category !== null) {
        let a = named !== null ? named : where.ticket.has(int(ids.ticket)) ? where.ticket.get(ids.ticket)
          : where.pressure.has(int(ids.pressure)) ? where.pressure.get(ids.pressure) : null;
        if (a === null && moved.length === 1) a = moved[0];
        markers.push({i: i, category: category, kind: kind, authority: a,
                      holder: int(holder) !== null && names.has(holder) ? names.get(holder) : null, detail: detail(ids, p)});
      }
    });
    for (const rec of auths.values()) for (const iv of rec.over) if (iv[1] === null) iv[1] = n;
    const holders = {};
    for (const [k, v] of names) holders[String(k)] = v;
    return {events: n, holders: holders, authorities: Array.from(auths.values()), markers: markers};
  }
  return {parse: parse, build: build, TraceError: TraceError, categories: C.categories};
})();
""".replace("__CONSTANTS__", _CONSTANTS)

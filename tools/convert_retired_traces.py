"""Convert traces in a retired revision (`ortmem-pool/1`, `ortmem-manager/1`, `ortmem-ledger/1`) to the one
manager revision, `ortmem-manager/2`.

    python tools/convert_retired_traces.py IN.jsonl OUT.jsonl

Outside the package on purpose: those revisions and their readers are gone (issue #21), and this is the one
place that still knows their shape, so the upstream implementation's traces written in them
(`../shared/conformance/upstream/min-aging-*.jsonl`, single-pool; `min-limit-*.jsonl`, limits in
`ortmem-manager/1` with their ledger operations in `ortmem-ledger/1`; every other one, ledger operations in
`ortmem-ledger/1` only) can be replayed. Every line becomes an
`ortmem-manager/2` event of the same operation, outcome and result, in the same order, numbered 1, 2, 3, ...
per source again (grant events are inserted):

    pool_submit  -> submit (role "staging", the pool front end's)     pool_claim   -> claim
    pool_cancel  -> cancel_ticket       pool_timeout -> timeout_ticket     pool_release -> release
                                                                             (of the lease the claim returned)
    an `ortmem-ledger/1` event -> the same operation, its issued id the payload's `result`, its observed
        figures the payload's `used` and `charges`; a registration that names no device is on the device its
        pool names (what ledger/1 meant: each pool its own device, so a renamed pool is a second device, D3)
    an `ortmem-manager/1` configure, prepare_limit, commit_limit or boundary -> the same event (a limit event's
        `charges` empty: it charges no allocation and names none)

Figures filled in. `ortmem-ledger/1` required only the `used` an event moved; `/2` requires the `used` of every
authority the event touches (`invariants.manager_trace.touched`: the canonical authority of each authority,
alias, allocation or allowance it names that exists), moved or not, refused or not. ledger/1 required every
moved figure, so an unlisted one did not move: it is filled with the last `used` the recording observed for that
authority (0 since its accepted registration), the old moved-only reading made explicit in the trace. (A
recording that broke that rule, leaving out a figure that moved, is still rejected at that line: as a wrong
figure, where ledger/1's reading named a missing one.) Charges are converted as recorded. A pool event carries
no charge (a submit, a claim, a cancel, a timeout and a release name no allocation held after it, and create or
charge none); a grant's event carries the one it creates: its ticket's bytes (below), which is how its `used`
rose, stated.
A figure that is not a byte count by id stops the conversion with the line number.

Topology epochs. The retired revisions carried none; `/2` requires one on every event. The first event is in epoch
0, and each accepted event that changed the recording's topology (`invariants.manager_trace.topology_changed`: a
registration that issued a new id, an alias of a new view whatever id answered it (D12), a device lost while
active, a termination confirmed while lost, a removal) advances it by one for the events after it.

`ortmem-manager/1` had no grant event: its figures held the grants the step made. Only pool events are
converted where a ticket waits (below); another event then, whose figures may hold grants no line names,
stops the conversion.

Grants. A pool event observes the ledger's free bytes after the operation and its grants together; `used` =
limit - free, the limit being the capacity the trace registered (a pool trace has no limit change). So the
bytes an event granted are what `used` rose by past the operation's own effect: a submit's and a claim's
none, a release's the lease it credited, a cancel's or a timeout's its result (bytes credited). The converted
operation observes `used` without them, and a `grant` event per granted ticket follows it at once (the
design's instant), each `used` including its own bytes. Which tickets: the one set of the authority's pending
tickets whose bytes make exactly the granted bytes (a submit granted at once: its own ticket; the upstream
release: the four 1 B tickets, since the 7 B one does not fit the 4 B granted). They are written in ticket
order, which is the design's arbitration order among tickets of one priority (an earlier ticket has waited
as many rounds or more); granted tickets of different priorities would be ordered by ageing the pool trace
does not record. The allocation a grant names is the one its claim returns, else a fresh id past every
claimed one. Replay then judges each grant against the spec's arbitration order (I13). No set, more than
one, or a mixed priority stops the conversion with the line number rather than guess, as does a kind with
no conversion here (a pool press, answer, reconfigure, ...; an `ortmem-manager/1` submit, ...). Stdlib only;
`tests/conformance/test_converted_traces.py` re-runs it and compares with the committed output.
"""

from __future__ import annotations

import json
import sys
from itertools import combinations
from pathlib import Path
from typing import Any

POOL, MANAGER, MANAGER_1, LEDGER = "ortmem-pool/1", "ortmem-manager/2", "ortmem-manager/1", "ortmem-ledger/1"
#: `ortmem-manager/1` kinds converted as they are: none of them can grant where no ticket waits.
_SAME_1 = {"configure", "boundary", "prepare_limit", "commit_limit"}
_TICKET_KINDS = {"pool_claim": "claim", "pool_cancel": "cancel_ticket", "pool_timeout": "timeout_ticket"}


def _dump(ev: dict[str, Any]) -> str:
    return json.dumps(ev, separators=(",", ":"))


def _same(ev: dict[str, Any], n: int, waiting: bool, books: "_Books") -> dict[str, Any]:
    """An `ortmem-ledger/1` or `ortmem-manager/1` event in `ortmem-manager/2`'s shape (`waiting`: a ticket waits)."""
    rev, kind, ids, p = ev["contract_revision"], ev["kind"], dict(ev["ids"]), dict(ev["payload"])
    if waiting and kind not in ("configure", "boundary"):
        raise ValueError(f"line {n}: {rev} {kind} while a ticket waits: its figures may hold grants no line names")
    if rev == LEDGER and kind != "boundary":
        args = {k: v for k, v in p.items() if k not in ("outcome", "error", "observed")}
        if kind == "register_authority" and args.get("device") is None:
            args["device"] = p["pool"]  # ledger/1's meaning: each pool its own device
        used = books.fill(kind, ids, p["observed"]["used"], n)
        p = {**args, "outcome": p["outcome"], "error": p["error"], "result": ids.pop("result", None),
             "used": used, "charges": p["observed"]["charges"], "bundles": {}}
        books.after(kind, ids, p)
    elif rev not in (LEDGER, MANAGER_1) or kind not in _SAME_1:
        raise ValueError(f"line {n}: no conversion for {rev} {kind}")
    elif kind in ("prepare_limit", "commit_limit"):
        p = {**{k: v for k, v in p.items() if k != "bundles"}, "charges": {}, "bundles": p["bundles"]}
    return {"kind": kind, "ids": ids, "payload": p}


class _Books:
    """What the recording told of its ledgers, to fill the `used` an `ortmem-ledger/1` event leaves out.

    Per authority the last `used` the recording observed (0 from its accepted registration on); which authority
    each alias, allocation and allowance belongs to. An event touches (`invariants.manager_trace.touched`) the
    canonical authority of every authority, alias, allocation or allowance it names that exists."""

    def __init__(self) -> None:
        self.used: dict[int, int] = {}  # canonical authority -> last observed used
        self.canon: dict[int, int] = {}  # alias -> its authority
        self.owner: dict[str, dict[int, int]] = {"allocation": {}, "allowance": {}}  # record -> its authority
        self.context: dict[int, str] = {}  # canonical authority -> its context: active, lost or terminated
        self.views: set[tuple[int, str]] = set()  # (canonical authority, view) of every alias registered
        self.changed = False  # the last event changed the topology (`convert_lines` advances the epoch)

    def _named(self, ids: dict[str, Any]) -> set[int]:
        named = [ids.get(f) for f in ("authority", "of")]
        named += [self.owner["allocation"].get(ids.get("allocation"))]
        named += [self.owner["allowance"].get(ids.get(f)) for f in ("allowance", "source", "target")]
        return {self.canon.get(a, a) for a in named if type(a) is int and self.canon.get(a, a) in self.used}

    def fill(self, kind: str, ids: dict[str, Any], used: dict[str, int], n: int) -> dict[str, int]:
        """The event's `used`: as recorded, plus the last observed figure of each authority it touches and lists
        not (ledger/1 listed moved figures only); a listed figure is recorded as the latest."""
        for a, u in used.items():
            if not (a.isdigit() and type(u) is int):
                raise ValueError(f"line {n}: {kind}: observed used {{{a!r}: {u!r}}} is not a byte count by id")
        out = {int(a): u for a, u in used.items()}
        for a in self._named(ids) - set(out):
            out[a] = self.used[a]
        self.used |= {a: u for a, u in out.items() if a in self.used}
        return {str(a): u for a, u in sorted(out.items())}

    def after(self, kind: str, ids: dict[str, Any], p: dict[str, Any]) -> None:
        """Records what an accepted event issued: an authority (used 0), an alias, an allocation, an allowance; and
        whether it changed the topology (`changed`)."""
        r = p["result"]
        if p["outcome"] != "accepted":
            return
        a = self.canon.get(ids.get("authority"), ids.get("authority"))
        for event, was, now in (("lose_device", "active", "lost"), ("confirm_termination", "lost", "terminated")):
            if kind == event and self.context.get(a) == was:
                self.context[a], self.changed = now, True
        self.changed = self.changed or kind == "remove_authority"
        if type(r) is not int:
            return
        if kind == "register_authority":
            if r not in self.used:  # a new authority (an existing id answers a re-registration: nothing changes)
                self.context[r], self.changed, self.used[r] = "active", True, 0
        elif kind == "register_alias":
            view = (self.canon.get(ids["of"], ids["of"]), p["view"])  # a new view, whatever id answers it (D12)
            self.changed = self.changed or view not in self.views
            self.views.add(view)
            if r != ids["of"]:
                self.canon[r] = self.canon.get(ids["of"], ids["of"])
        elif kind in ("reserve", "record_committed", "open_allowance"):
            auth = self.canon.get(ids["authority"], ids["authority"])
            self.owner["allowance" if kind == "open_allowance" else "allocation"][r] = auth


def _granted(pending: dict[int, tuple[int, int]], nbytes: int, n: int) -> tuple[int, ...]:
    """The one set of `pending` tickets (id -> (bytes, priority)) whose bytes sum to `nbytes`, in ticket order."""
    sets = [s for k in range(len(pending) + 1) for s in combinations(sorted(pending), k)
            if sum(pending[t][0] for t in s) == nbytes]
    if len(sets) != 1 or len({pending[t][1] for t in sets[0]}) > 1:
        raise ValueError(f"line {n}: {nbytes} B granted: {len(sets)} set(s) of pending tickets make it"
                         + (", of different priorities" if len(sets) == 1 else ""))
    return sets[0]


def convert_lines(lines: list[str]) -> list[str]:
    """The converted trace, one JSON text per event; ValueError naming the line of an event it cannot convert."""
    events = [json.loads(raw) for raw in lines]
    claimed = {e["ids"]["ticket"]: e["payload"]["result"] for e in events
               if e["kind"] == "pool_claim" and e["payload"]["outcome"] == "accepted"}
    fresh = max(claimed.values(), default=0)
    limit: dict[int, int] = {}  # authority id -> the capacity its registration set
    used: dict[int, int] = {}  # authority id -> its used after the last event
    pending: dict[int, dict[int, tuple[int, int]]] = {}  # authority id -> pending ticket -> (bytes, priority)
    size: dict[int, int] = {}  # ticket -> its bytes
    seq: dict[str, int] = {}
    books = _Books()
    out = []
    epoch = 0

    def emit(source: str, conv: dict[str, Any]) -> None:
        nonlocal epoch
        seq[source] = seq.get(source, 0) + 1
        out.append(_dump({"contract_revision": MANAGER, "topology_epoch": epoch, "source": source,
                          "source_sequence": seq[source], **conv}))
        if books.changed:
            epoch, books.changed = epoch + 1, False

    for n, ev in enumerate(events, 1):
        if ev["contract_revision"] != POOL:
            if ev["kind"] == "register_authority" and ev["payload"].get("outcome") == "accepted":
                if ev["ids"]["result"] not in used:  # a new authority, not a re-registration
                    limit[ev["ids"]["result"]], used[ev["ids"]["result"]] = ev["payload"]["capacity"], 0
            conv = _same(ev, n, any(pending.values()), books)
            used |= {int(a): u for a, u in conv["payload"].get("used", {}).items() if int(a) in used}
            emit(ev["source"], conv)
            continue
        kind, ids, p = ev["kind"], ev["ids"], ev["payload"]
        aid = ids["authority"]
        if aid not in limit or p["observed"] is None:
            raise ValueError(f"line {n}: {kind} names authority {aid!r}, which the trace never registered")
        accepted = p["outcome"] == "accepted"
        outcome = {"outcome": p["outcome"], "error": p["error"]}
        credited = 0
        if kind == "pool_submit":
            conv = {"kind": "submit", "ids": {"holder": ids["holder"], "authority": aid},
                    "payload": {"nbytes": p["nbytes"], "priority": p["priority"], "role": "staging", **outcome,
                                "result": p["result"]}}
            if accepted:
                pending.setdefault(aid, {})[p["result"]] = (p["nbytes"], p["priority"])
                size[p["result"]] = p["nbytes"]
        elif kind in _TICKET_KINDS:
            conv = {"kind": _TICKET_KINDS[kind], "ids": {"holder": ids["holder"], "ticket": ids["ticket"]},
                    "payload": {**outcome, "result": p["result"]}}
            if accepted and kind != "pool_claim":
                credited = p["result"]
                pending.get(aid, {}).pop(ids["ticket"], None)
        elif kind == "pool_release" and ids["ticket"] in claimed:
            conv = {"kind": "release", "ids": {"holder": ids["holder"], "allocation": claimed[ids["ticket"]]},
                    "payload": {**outcome, "result": None, "charges": {}}}
            credited = size[ids["ticket"]] if accepted else 0
        else:
            raise ValueError(f"line {n}: no conversion for {kind} (ticket {ids.get('ticket')!r})")
        after = limit[aid] - p["observed"]["free"]
        used[aid] -= credited
        grants = _granted(pending.get(aid, {}), after - used[aid], n)
        conv["payload"] |= {"used": {str(aid): used[aid]}, "charges": {}, "bundles": {}}
        emit(ev["source"], conv)
        for t in grants:
            nbytes = pending[aid].pop(t)[0]
            used[aid] += nbytes
            if t not in claimed:
                fresh += 1
            alloc = claimed.get(t, fresh)
            emit(ev["source"], {"kind": "grant", "ids": {"ticket": t},
                                "payload": {"outcome": "accepted", "error": None, "result": alloc,
                                            "used": {str(aid): used[aid]}, "charges": {str(alloc): nbytes},
                                            "bundles": {}}})
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.split("\n\n", 2)[1], file=sys.stderr)
        return 2
    src, dst = (Path(a) for a in argv)
    dst.write_text("".join(line + "\n" for line in convert_lines(src.read_text().splitlines())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

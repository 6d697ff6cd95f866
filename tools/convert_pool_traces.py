"""Convert `ortmem-pool/1` traces (the retired single-pool revision) to the one composed revision.

    python tools/convert_pool_traces.py IN.jsonl OUT.jsonl

Outside the package on purpose: the pool revision and its reader are gone (issue #21), and this is the one
place that still knows its shape, so the upstream implementation's two pool traces
(`../shared/conformance/upstream/min-aging-*.jsonl`) can be replayed as `ortmem-manager/1`. Each pool event
becomes the composed event of the same operation, with the same sequence number, outcome and result:

    pool_submit  -> submit (role "staging", the pool front end's)     pool_claim   -> claim
    pool_cancel  -> cancel_ticket       pool_timeout -> timeout_ticket     pool_release -> ledger release
                                                                             (of the lease the claim returned)

The pool observed its ledger's free bytes; the composed event observes `used` = limit - free, the limit
being the capacity the trace registered (a pool trace has no limit change). Every other line is copied as
it is. A pool kind with no conversion here (press, answer, reconfigure, ...) stops the conversion with its
line number rather than guess. Stdlib only; `tests/conformance/test_converted_traces.py` re-runs it and
compares with the committed output.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

POOL, MANAGER, LEDGER = "ortmem-pool/1", "ortmem-manager/1", "ortmem-ledger/1"
_TICKET_KINDS = {"pool_claim": "claim", "pool_cancel": "cancel_ticket", "pool_timeout": "timeout_ticket"}


def _dump(ev: dict[str, Any]) -> str:
    return json.dumps(ev, separators=(",", ":"))


def convert_lines(lines: list[str]) -> list[str]:
    """The converted trace, one JSON text per event; ValueError naming the line of an event it cannot convert."""
    limit: dict[int, int] = {}  # authority id -> the capacity its registration set
    lease: dict[int, int] = {}  # ticket id -> the allocation its claim returned
    out = []
    for n, raw in enumerate(lines, 1):
        ev = json.loads(raw)
        if ev.get("contract_revision") != POOL:
            if ev.get("kind") == "register_authority" and ev["payload"].get("outcome") == "accepted":
                limit[ev["ids"]["result"]] = ev["payload"]["capacity"]
            out.append(_dump(ev))
            continue
        kind, ids, p = ev["kind"], ev["ids"], ev["payload"]
        aid = ids["authority"]
        if aid not in limit or p["observed"] is None:
            raise ValueError(f"line {n}: {kind} names authority {aid!r}, which the trace never registered")
        used = {str(aid): limit[aid] - p["observed"]["free"]}
        outcome = {"outcome": p["outcome"], "error": p["error"]}
        head = {"contract_revision": MANAGER, "source": ev["source"], "source_sequence": ev["source_sequence"]}
        if kind == "pool_submit":
            conv = {**head, "kind": "submit", "ids": {"holder": ids["holder"], "authority": aid},
                    "payload": {"nbytes": p["nbytes"], "priority": p["priority"], "role": "staging", **outcome,
                                "result": p["result"], "used": used, "bundles": {}}}
        elif kind in _TICKET_KINDS:
            conv = {**head, "kind": _TICKET_KINDS[kind], "ids": {"holder": ids["holder"], "ticket": ids["ticket"]},
                    "payload": {**outcome, "result": p["result"], "used": used, "bundles": {}}}
            if kind == "pool_claim" and p["outcome"] == "accepted":
                lease[ids["ticket"]] = p["result"]
        elif kind == "pool_release" and ids["ticket"] in lease:
            conv = {"contract_revision": LEDGER, "source": ev["source"], "source_sequence": ev["source_sequence"],
                    "kind": "release", "ids": {"holder": ids["holder"], "allocation": lease[ids["ticket"]]},
                    "payload": {**outcome, "observed": {"used": used, "charges": {}}}}
        else:
            raise ValueError(f"line {n}: no conversion for {kind} (ticket {ids.get('ticket')!r})")
        out.append(_dump(conv))
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

"""A seeded workload of the manager's focused transaction front end, for `ortmem trace --focused tx`.

`run_tx_workload` drives the focused transactions of `spec.transactions`
(`tx_*`): authorities, bundles, plans with retries, ordered and misordered
reservations, publish / execute / remap, commits, releases, aborts, a
mismatch, a device loss and its termination, and bad input. It ends settled
(nothing uncommitted), so the trace replays clean with no boundary.
Deterministic for a given seed.
"""

from __future__ import annotations

import random
from typing import Any

from spec.errors import GovernorError
from spec.tickets import PressureState, TicketState
from spec.transactions_lifecycle import TxPhase, ViewKind
from spec.types import Role, Tier

__all__ = ["run_tx_workload"]


def _try(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except GovernorError:
        return None  # a refusal is part of the workload: the trace records it


def run_tx_workload(pmm: Any, seed: int = 0, operations: int = 200) -> dict[str, int]:
    """Three authorities, one holder, state bundles; returns the attempts per operation."""
    rng = random.Random(seed)
    holder = pmm.register_holder("engine")
    auths = [pmm.register_authority(n, t, c) for n, c, t in (("hbm0", 64, Tier.DEVICE), ("host", 96, Tier.HOST),
                                                          ("hbm1", 48, Tier.DEVICE))]
    bundles = [pmm.open_bundle()]
    counts: dict[str, int] = {}
    intents: list[int] = []
    lost = False
    for i in range(operations):
        s = pmm.abstract_tx()
        txs = sorted(s.txs.values(), key=lambda t: t.id)
        by = {ph: [t for t in txs if t.phase is ph] for ph in TxPhase}
        op = rng.choice(("plan", "plan", "reserve", "reserve", "publish", "execute", "commit", "release",
                         "abort", "remap", "bundle", "mismatch", "bad")
                        + (("lose",) if not lost and i > operations * 2 // 3 else ()))
        counts[op] = counts.get(op, 0) + 1
        if op == "plan":
            live = [x for x in auths if x in s.authorities]
            if not live:
                continue
            chosen = rng.sample(live, rng.randint(1, min(2, len(live))))
            needs = tuple((x, rng.randint(1, 40)) for x in chosen)
            retry = intents.pop(0) if intents and rng.random() < 0.5 else None
            _try(pmm.tx_plan, holder, needs, rng.randint(0, 3), rng.choice(list(ViewKind)),
                 rng.choice(bundles + [None, None]), retry)
        elif op == "reserve" and (by[TxPhase.PLANNED] or by[TxPhase.RESERVING]):
            t = rng.choice(by[TxPhase.PLANNED] + by[TxPhase.RESERVING])
            todo = [x for x, _ in t.needs if x not in {y for y, _ in t.held}]
            aid = min(todo) if rng.random() < 0.85 else rng.choice(todo)  # now and then out of order: refused
            intent = _try(pmm.tx_reserve, t.id, aid)
            if intent is not None:
                intents.append(intent)  # a miss aborted it: its intent keeps its place for a retry
        elif op == "publish" and (by[TxPhase.RESERVED] or by[TxPhase.RESERVING]):
            _try(pmm.publish_view, rng.choice(by[TxPhase.RESERVED] + by[TxPhase.RESERVING]).id)
        elif op == "execute" and (by[TxPhase.PUBLISHED] or by[TxPhase.EXECUTING]):
            t = rng.choice(by[TxPhase.PUBLISHED] + by[TxPhase.EXECUTING])
            views = [v for v in s.views.values() if v.allocation == t.id]
            if views:
                v = rng.choice(views)
                _try(pmm.execute_view, t.id, v.id, v.generation if rng.random() < 0.85 else v.generation + 1)
        elif op == "commit" and by[TxPhase.EXECUTING]:
            _try(pmm.tx_commit, rng.choice(by[TxPhase.EXECUTING]).id)
        elif op == "release" and by[TxPhase.COMMITTED]:
            _try(pmm.tx_release, rng.choice(by[TxPhase.COMMITTED]).id)
        elif op == "abort" and txs:
            iid = _try(pmm.tx_abort, rng.choice(txs).id)  # a committed one is refused
            if iid is not None:
                intents.append(iid)
        elif op == "remap" and s.views:
            _try(pmm.remap_view, rng.choice(sorted(s.views)))
        elif op == "bundle":
            bundles.append(pmm.open_bundle())
        elif op == "mismatch" and rng.random() < 0.3:
            _try(pmm.report_mismatch, rng.choice(bundles))
        elif op == "lose":
            lost = True
            x = rng.choice(auths)
            _try(pmm.lose_device, x)
            _try(pmm.confirm_termination, x)
        elif op == "bad":
            _try(rng.choice((lambda: pmm.tx_plan(holder, (), 0, ViewKind.CONTIGUOUS),
                             lambda: pmm.tx_plan(10**6, ((auths[0], 4),), 0, ViewKind.CONTIGUOUS),
                             lambda: pmm.tx_reserve(10**6, auths[0]),
                             lambda: pmm.execute_view(10**6, 1, 1),
                             lambda: pmm.register_authority("", Tier.DEVICE, 4),
                             lambda: pmm.report_mismatch(10**6))))
    _settle_tx(pmm)
    pmm.tx_corrupt_ledger()  # the manager is poisoned: the next plan is refused (I5)
    _try(pmm.tx_plan, holder, ((auths[0], 4),), 0, ViewKind.CONTIGUOUS)
    return counts


def _settle_tx(pmm: Any) -> None:
    for t in sorted(pmm.abstract_tx().txs.values(), key=lambda t: t.id):
        if t.phase is not TxPhase.COMMITTED:
            _try(pmm.tx_abort, t.id)
    for t in sorted(pmm.abstract_tx().txs.values(), key=lambda t: t.id):
        _try(pmm.tx_release, t.id)

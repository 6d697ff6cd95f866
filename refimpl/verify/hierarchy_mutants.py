"""Named implementation mutants of the coordinator (mutation controls, with every guard on), in two forms.

`MUTANT_SCRIPTS` gives, for each hierarchy mutant of the verify registry `refimpl.verify.mutants` (source
patches), the script that must make one of its clauses fail; `ortmem verify` runs those. `MUTANTS` is the older
form the tests use against refinement: a subclass of `refimpl.hierarchy.core.Core` overriding one method with a
realistic bug, handed to the coordinator (`Config.core`, so no bug switch sits on the governor's own code paths),
with the script that must expose it (refinement against the intact spec, or a harm clause) when replayed by
`refimpl.verify.hierarchy_checker.replay_refimpl`.
"""

from __future__ import annotations

from typing import Any

from refimpl.hierarchy.core import EXITED, Core
from invariants.hierarchy_machine import Lose, SpawnHeld
from spec import hierarchy as H

__all__ = ["MUTANTS", "MUTANT_SCRIPTS"]


class ExitCreditedTwice(Core):
    """A re-observed exit (after a restart) credits the worker's quota again."""

    def exit_observed(self, wid: int) -> int:
        w = self._worker(wid)
        if w["state"] == EXITED:
            self.free += w["returned"]
            self._commit()
            return w["returned"]
        return super().exit_observed(wid)


class FenceRefunds(Core):
    """A missed heartbeat is taken for an exit: the quota comes back at fence time."""

    def fence(self, wid: int) -> None:
        super().fence(wid)
        w = self.workers[wid]
        self.free, w["quota"] = self.free + w["quota"], 0
        self._commit()


class GrantsLifo(Core):
    """Arbitration grants the newest intent first (LIFO), ignoring maturity and priority."""

    def arbitrate(self) -> list[tuple[int, int, int]]:
        for i in self.intents.values():
            i["age"] = min(i["age"] + 1, self.aging_cap)
        grants = []
        for i in sorted(self.intents.values(), key=lambda i: -i["seq"]):
            if i["nbytes"] <= self.free:
                self.free -= i["nbytes"]
                self.workers[i["worker"]]["quota"] += i["nbytes"]
                grants.append((i["seq"], i["worker"], i["nbytes"]))
                del self.intents[i["seq"]]
        self._commit()
        return grants


class DeferKeepsQuota(Core):
    """A deferring worker's uncommitted quota stays charged at the coordinator."""

    def _request(self, w: dict[str, Any], msg: dict[str, Any]) -> Any:
        return super()._request(w, {**msg, "keep": w["quota"]})


class GrantNotJournaled(Core):
    """A grant is answered before it is journaled: a restart forgets it."""

    def handle(self, msg: dict[str, Any], authentic: bool) -> Any:
        commit, self._commit = self._commit, lambda: None  # type: ignore[method-assign]
        try:
            return super().handle(msg, authentic)
        finally:
            self._commit = commit  # type: ignore[method-assign]


_UP = (H.Spawn(),)
MUTANTS: dict[str, tuple[type, tuple[Any, ...]]] = {
    "exit_credited_twice": (ExitCreditedTwice, _UP + (H.Request(1, 1, 1, 4), H.Kill(1), H.Restart())),
    "fence_refunds": (FenceRefunds, _UP + (H.Request(1, 1, 1, 6), H.MissHeartbeat(1))),
    "grants_lifo": (GrantsLifo, _UP + (H.Request(1, 1, 1, 8), H.Spawn(), H.Request(2, 1, 1, 5), H.Arbitrate(),
                                       H.Arbitrate(), H.Spawn(), H.Request(3, 1, 1, 3), H.Return(1, 1, 2, 1),
                                       H.Arbitrate())),
    "defer_keeps_quota": (DeferKeepsQuota, _UP + (H.Request(1, 1, 1, 6), H.Reserve(1, 2), H.Commit(1), H.Spawn(),
                                                  H.Request(2, 1, 1, 4), H.Request(1, 1, 2, 3))),
    "grant_not_journaled": (GrantNotJournaled, _UP + (H.Request(1, 1, 1, 4), H.Restart())),
}

#: Replayed by `refimpl.verify.hierarchy_checker.replay_predicates`, refinement off: only a clause can notice the bug.
MUTANT_SCRIPTS: dict[str, tuple[Any, ...]] = {
    "exit_credited_twice": MUTANTS["exit_credited_twice"][1],
    "fence_refunds": MUTANTS["fence_refunds"][1],
    "grants_lifo": MUTANTS["grants_lifo"][1],
    "defer_keeps_quota": MUTANTS["defer_keeps_quota"][1],
    "grant_not_journaled": _UP + (H.Request(1, 1, 1, 4), H.Reserve(1, 2), H.Restart()),
    # A return delayed past the worker's reconnect (epoch 1 -> 2) is one epoch behind.
    "stale_epoch_off_by_one": _UP + (H.Request(1, 1, 1, 6), H.Hello(1), H.Return(1, 1, 2, 4)),
    "exit_keeps_quota": _UP + (H.Request(1, 1, 1, 4), H.Kill(1)),
    "spawn_predelegates": (SpawnHeld(), H.Hello(1, authentic=False)),
    "return_skips_quota_check": _UP + (H.Request(1, 1, 1, 2), H.Stop(1), H.Return(1, 1, 2, 5), H.Cont(1)),
    "reclaim_outside_by_name": _UP + (H.Reclaim("db", 1),),
    "tight_pool_books_outsider": _UP + (H.Request(1, 1, 1, 6), H.Outside("db", 3)),
    "aging_unbounded": _UP + (H.Request(1, 1, 1, 8), H.Spawn(), H.Request(2, 1, 1, 5), H.Arbitrate(),
                              H.Arbitrate(), H.Arbitrate()),
    "grant_off_by_one": _UP + (H.Request(1, 1, 1, 6), H.Spawn(), H.Request(2, 1, 1, 5)),
    "ceiling_counts_slice": _UP + (H.Request(1, 1, 1, 8), H.Outside("db", 12), H.Reserve(1, 6)),
    "defer_keeps_reservations": _UP + (H.Request(1, 1, 1, 4), H.Reserve(1, 2), H.Spawn(), H.Request(2, 1, 1, 6),
                                       H.Request(1, 1, 2, 6)),
    # The fenced worker's key and its current epoch (2), on the network (not its own call: it knows epoch 1).
    "fenced_still_served": _UP + (H.Request(1, 1, 1, 3), H.MissHeartbeat(1), H.Request(1, 2, 2, 2)),
    # The reply to a deferral is lost: the worker must not keep units the coordinator took back.
    "lost_reply_trusts_old_slice": _UP + (H.Request(1, 1, 1, 6), H.Reserve(1, 2), H.Spawn(), H.Request(2, 1, 1, 4),
                                          Lose(H.Request(1, 1, 2, 3))),
}

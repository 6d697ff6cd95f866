"""Mutants of the composed manager where its parts meet on one ledger (a part of `refimpl.verify.mutants`):
rounds after a cancel, grants and transaction reservations booked on the ledger, matured waiters, bundles at
commit, and pressure answers.
"""

from __future__ import annotations

from invariants.mutation import Mutant
from refimpl.verify.mutants_paths import MARB, MPRE, MTX, R, S, STX

__all__ = ["MANAGER_MUTANTS"]

MANAGER_MUTANTS: tuple[Mutant, ...] = (
    Mutant("cancel_forgets_round", ("I13",), "manager", R, MARB,
           ("self._grant_pass(a)\n            return 0\n        if rec is None:",
            "self._retire(rec)\n        self._rounds()  # its charge"),
           ("pass\n            return 0\n        if rec is None:", "self._retire(rec)\n        pass  # its charge"),
           "cancelling or timing out a ticket runs no round, so a waiter that now fits stays parked"),
    Mutant("cancel_keeps_reservation", ("I1",), "manager", R, MARB, "        self._retire(rec)\n", "",
           "a cancelled grant reports its bytes credited but leaves its reservation charged (a leak)"),
    Mutant("grant_rounds_up", ("I1",), "manager", R, MARB,
           "t.nbytes, _O_GRANTED", "t.nbytes + (t.nbytes & 1), _O_GRANTED",
           "a round books odd requests rounded up to an even granule: the ticket holds more than it asked for"),
    Mutant("tx_reserve_rounds_up", ("I1",), "manager", R, MTX, "Role.STATE, n", "Role.STATE, n + (n & 1)",
           "a transaction's reservation is rounded up to an even granule: it holds more than its need"),
    Mutant("misfit_prebooked", ("I13",), "manager", R, MARB,
           "break  # a matured misfit ends the round",
           "if t.alloc is None and a.limit > a.used:  # hold what is free\n"
           "                    t.alloc = self._enter(t.holder, a, a.tier, t.role, a.limit - a.used, _O_GRANTED)\n"
           "                break  # a matured misfit ends the round",
           "a matured waiter that does not fit is pre-booked the free bytes while it still waits (hold and wait)"),
    Mutant("tx_adopts_grant", ("I1",), "manager", R, MTX,
           "rec = self._enter(t.holder, a, a.tier, Role.STATE, n, Origin.GRANTED)",
           "rec = next((k.alloc for k in self._tickets.values() if k.auth is a and k.alloc is not None\n"
           "                    and k.holder == t.holder and k.nbytes == n), None) or self._enter(t.holder, a, "
           "a.tier, Role.STATE, n,\n"
           "                                                                    Origin.GRANTED)",
           "a transaction adopts its holder's granted-but-unclaimed reservation of the same size instead of booking its own"),
    Mutant("composed_commit_skips_bundle", ("I10",), "manager", R, MTX,
           "        self._advance_bundle(t)  # BundlePoisoned before anything moves (I5); else one step with the leases (I10)\n",
           "", "a composed commit turns the reservations into leases but leaves the transaction's state bundle behind"),
    Mutant("poisoned_bundle_commits", ("I10",), "manager", S, STX,
           "        if b.poisoned:\n            raise BundlePoisoned(f\"bundle {b.id} is poisoned; abort and rebuild\")\n", "",
           "a transaction of a poisoned bundle still commits, advancing state the engine must rebuild"),
    Mutant("answer_takes_foreign_lease", ("I6",), "manager", R, MPRE,
           "            if rec.holder != holder:\n"
           '                raise ForeignHolder(f"allocation {v} is held by holder {rec.holder}, not {holder}")\n', "",
           "a pressure answer may name any lease on the authority: one holder gives back another's bytes"),
)

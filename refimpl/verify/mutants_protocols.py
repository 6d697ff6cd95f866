"""Mutants of arbitration and of capacity transactions (a part of the registry in `refimpl.verify.mutants`).

The pressure checker (the composed machine restricted to pressure, `invariants.manager_pressure`) and the
transaction checker run these: bugs in the manager's ticket, lease, transaction and bundle code
(`refimpl.manager`), and in the focused transaction spec (`spec.transactions`).
"""

from __future__ import annotations

from invariants.mutation import Mutant
from spec.guards import Layer

__all__ = ["PROTOCOL_MUTANTS"]

_R, _S = Layer.REFIMPL, Layer.SPEC
_GOV = "refimpl.manager.ledger"
_STX = "spec.transactions"
_MARB, _MPRE, _MTX = "refimpl.manager.arbitration", "refimpl.manager.pressure", "refimpl.manager.transactions"
_MDEV = "refimpl.manager.devices"
_MBUN = "refimpl.manager.bundles"

PROTOCOL_MUTANTS: tuple[Mutant, ...] = (
    # --- arbitration on the composed manager (refimpl.manager.arbitration, .pressure, .ledger) -----
    Mutant("grant_order_ascending_priority", ("I13",), "pressure", _R, _MARB,
           "    for priority in sorted(by_priority, reverse=True):\n", "    for priority in sorted(by_priority):\n",
           "refimpl's own grant order takes the lowest priority bucket first"),
    Mutant("cancel_after_grant_credits_twice", ("I1",), "pressure", _R, _MARB,
           "            credit = rec.charge\n            rec.part = None\n            self._retire(rec)\n",
           "            credit = rec.charge\n            rec.part = None\n            self._retire(rec)\n"
           "            a.used -= credit\n",
           "cancelling (or timing out) a granted ticket credits its bytes, and retiring its reservation credits "
           "them again"),
    Mutant("grant_charged_unbooked", ("I1",), "pressure", _R, _MARB,
           "            t.alloc = self._enter(t.holder, a, a.tier, t.role, t.nbytes, _O_GRANTED)\n            t.alloc.part = t\n",
           "            a.used += t.nbytes  # charged, but no reservation is booked for it\n",
           "a round charges a grant's bytes to the ledger's used figure but books no reservation (no grant id) "
           "for them: nothing names those bytes when the ticket is cancelled or claimed"),
    Mutant("retired_ticket_kept", ("I1",), "pressure", _R, _MARB,
           "        del self._tickets[t.id]\n        if t.event is not None:\n"
           "            self._wake.append(t.event)  # a retired ticket's waiter must not sleep on\n",
           "        t.state = TicketState.CANCELLED\n        if t.event is not None:\n"
           "            self._wake.append(t.event)  # a retired ticket's waiter must not sleep on\n",
           "a retired ticket is marked cancelled but kept in the ticket table"),
    Mutant("grant_id_not_advanced", ("I4a",), "pressure", _R, _GOV,
           "        if self._fresh:\n            aid = self._next_alloc\n            self._next_alloc += 1\n",
           "        if self._fresh:\n            aid = self._next_alloc\n",
           "a grant (a ledger reservation) reads the next allocation id but never advances it"),
    Mutant("press_reserves_target", ("C5", "I1"), "pressure", _R, _MPRE,
           "        self._pressures[r.id] = self._pressure_log[r.id] = r\n",
           "        self._pressures[r.id] = self._pressure_log[r.id] = r\n"
           "        a.used += max(0, min(target, a.limit - a.used))  # set aside for the answer\n",
           "opening a pressure ticket sets its target aside from free bytes at once"),
    Mutant("age_cap_below_bound", ("I13",), "pressure", _R, _MARB,
           "        for t in pend.values():\n            if t.age < bound:\n                t.age += 1\n",
           "        for t in pend.values():\n            if t.age < bound - 1:\n                t.age += 1\n",
           "the age cap is one below the aging bound, so no waiting ticket matures and overtaking is unbounded"),
    Mutant("matured_compare_strict", ("I13",), "pressure", _R, _MARB,
           "            elif t.age >= bound and self._aging:", "            elif t.age > bound and self._aging:",
           "a round stops only past the aging bound, which a capped age never reaches"),
    # --- capacity transactions (refimpl.manager: transactions, bundles, ledger; the focused tx checker) --------
    Mutant("loss_refunds_committed", ("C3",), "transactions", _R, _MDEV,
           "                if rec.state in _LOSABLE:\n                    rec.state = AllocState.DEVICE_LOST\n",
           "                if rec.state in _LOSABLE:\n                    rec.state = AllocState.DEVICE_LOST\n"
           "                    a.used -= rec.charge\n",
           "device loss strands a committed lease's charge and refunds it at once too"),
    Mutant("termination_keeps_stranded", ("C3",), "transactions", _R, _MDEV,
           "        for rec in [r for r in a.allocs.values() if r.state is AllocState.DEVICE_LOST]:\n"
           "            self._retire(rec)\n",
           "        for rec in [r for r in a.allocs.values() if r.state is AllocState.DEVICE_LOST]:\n"
           "            rec.auth.used -= rec.charge\n",
           "confirmed termination refunds the stranded charge but leaves it recorded as stranded"),
    Mutant("plan_on_lost_context", ("C3",), "transactions", _R, _MTX,
           "            self._live(a)\n        if b is not None and b.poisoned:\n",
           "        if b is not None and b.poisoned:\n",
           "planning does not check that the authorities' contexts are still active"),
    Mutant("reserve_charges_first_need", ("C4",), "transactions", _R, _MTX,
           "        n = t.need[a.id]\n", "        n = t.decl[0][1]\n",
           "a reservation charges the first declared need's bytes, whichever authority it takes"),
    Mutant("partial_reserve_stays_planned", ("C4",), "transactions", _R, _MTX,
           "        t.phase = _P.RESERVED if len(t.held) == len(t.needs) else _P.RESERVING\n",
           "        if len(t.held) == len(t.needs):\n            t.phase = _P.RESERVED\n",
           "a first partial reservation leaves the transaction marked planned"),
    Mutant("retry_keeps_intent", ("C4",), "transactions", _R, _MTX,
           "        if intent is not None:\n            del self._intents[intent]\n", "",
           "a retry takes its intent's identity but leaves the intent in place"),
    Mutant("commit_keeps_users", ("C6",), "transactions", _R, _MTX,
           "        self._unbind(t)\n        self._settle(t)\n",
           "        t.bound = {}\n        self._settle(t)\n",
           "commit ends the execution but leaves it listed as a user of its views"),
    Mutant("view_id_not_advanced", ("C6",), "transactions", _R, _MBUN,
           "        vid = self._next_mview\n        self._next_mview += 1\n", "        vid = self._next_mview\n",
           "publish reads the next view id but never advances it"),
    Mutant("committed_lease_not_a_pin", ("C3",), "transactions", _R, _MTX,
           "            if mine or (a.id in t.need and t.phase is not _P.COMMITTED):",
           "            if a.id in t.need and t.phase is not _P.COMMITTED:",
           "a committed lease set no longer pins its provider: only open transactions do"),
    Mutant("termination_forgets_refund", ("C3",), "transactions", _R, _MDEV,
           "        for rec in [r for r in a.allocs.values() if r.state is AllocState.DEVICE_LOST]:\n"
           "            self._retire(rec)\n",
           "        for rec in [r for r in a.allocs.values() if r.state is AllocState.DEVICE_LOST]:\n"
           "            rec.charge = 0\n            self._retire(rec)\n",
           "confirmed termination clears the stranded record without refunding the charge"),
    Mutant("abort_keeps_partial_step", ("I5", "I10"), "transactions", _R, _MTX,
           "        self._phase(t, _ABORTABLE, \"abort\")\n        before: dict[int, int] = {}\n",
           "        self._phase(t, _ABORTABLE, \"abort\")\n        if t.bundle is not None and t.phase is _P.EXECUTING:\n"
           "            self._bundles[t.bundle].versions = [x + 1 for x in self._bundles[t.bundle].versions]\n"
           "        before: dict[int, int] = {}\n",
           "an abort during execution keeps the bundle's partly written step"),
    Mutant("mismatch_poisons_all", ("I5",), "transactions", _R, _MBUN,
           "        b.poisoned = True\n", "        for b in self._bundles.values():\n            b.poisoned = True\n",
           "a post-commit mismatch poisons every bundle, not only the one that disagreed"),
    Mutant("one_bit_generation", ("I9",), "transactions", _R, _MBUN,
           "        v.generation += 1\n", "        v.generation = v.generation % 2 + 1\n",
           "the mapping generation is kept in one bit, so a second remap brings an old generation back"),
    # --- capacity transactions, spec layer (the invariants judge the spec's own states) ------
    Mutant("release_under_reader", ("C6",), "transactions", _S, _STX,
           "    for v in mine:\n        if v.users:\n            raise ViewInUse(",
           "    for v in mine:\n        if v.users and False:\n            raise ViewInUse(",
           "releasing a committed lease set unmaps its view while other executions still read through it"),
    Mutant("execute_on_provisional_view", ("C6",), "transactions", _S, _STX,
           "    if v.allocation != t.id and s.txs[v.allocation].phase is not TxPhase.COMMITTED:\n",
           "    if v.allocation not in s.txs:\n",
           "an execution may bind any live view, including another transaction's provisional (uncommitted) one"),
    Mutant("limit_commit_checks_old_limit", ("I2",), "manager", _R, "refimpl.manager.limits",
           "        committed = a.used <= ch.target or not",
           "        committed = a.used <= a.limit or not",
           "a limit change commits when used fits under the old limit, not the new one: a lowered limit "
           "leaves granted leases above it"),
    Mutant("limit_past_capacity", ("I2",), "manager", _R, "refimpl.manager.limits",
           "        if limit > a.capacity:\n            raise InvalidBytes(f\"authority {a.id}: a {limit} B limit exceeds",
           "        if limit > 2 * a.capacity:\n            raise InvalidBytes(f\"authority {a.id}: a {limit} B limit exceeds",
           "a limit change is checked against twice the pool's capacity (a units slip): the raised limit lets "
           "grants take bytes the device does not have"),
    Mutant("reserve_order_skips_lower_needs", ("C4",), "transactions", _R, _MTX,
           "        if a.id != lowest and self._guards.on(\"ordered_reservation\"):  # C4\n",
           "        if a.id < max(held, default=a.id) and self._guards.on(\"ordered_reservation\"):  # C4\n",
           "the order check only forbids reserving below what the transaction holds: it may skip a lower need and "
           "take a higher one first, so two transactions can each hold what the other needs (circular holding)"),
    Mutant("commit_publishes_first_part_only", ("I10",), "manager", _S, "spec.manager_tx",
           "    for (_, n), alloc in zip(x.needs, x.held):\n",
           "    for (_, n), alloc in zip(x.needs[:1], x.held[:1]):\n",
           "a composed commit turns only its first reservation into a lease yet advances the bundle: the engine's "
           "state claims a step whose bytes on the other authorities are still provisional"),
    Mutant("extents_span_to_last_end", ("I8",), "ort", _R, "refimpl.ort.extents",
           "        return sum(r.length for r in self.ranges)\n",
           "        return max((r.end for r in self.ranges), default=0)  # from the file's start to the last byte used\n",
           "the extents reader counts from the file's start to the end of the last referenced range: the dead space "
           "between and before the weights is charged, and grows with padding (#853's defect, in the reader)"),
    Mutant("report_hides_declined", ("I3",), "ort", _S, "spec.sessions",
           "        not_enforced=s.not_enforced,\n",
           "        not_enforced=frozenset(x for x in s.not_enforced if x.startswith(\"model:\")),\n",
           "the report lists only per-model not-enforced labels: a declined class (KV, the arena) is recorded as "
           "not enforced but the user reads the limit as binding on it"),
)

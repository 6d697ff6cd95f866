"""Mutants of arbitration (model "pressure") and of other parts: limits, a composed commit, the ORT extents reader
and report (a part of `refimpl.verify.mutants`).
"""

from __future__ import annotations

from invariants.mutation import Mutant
from refimpl.verify.mutants_paths import GOV, LIM, MARB, MPRE, R, S, SES, STX

__all__ = ["PROTOCOL_MUTANTS"]

PROTOCOL_MUTANTS: tuple[Mutant, ...] = (
    # --- arbitration on the composed manager (refimpl.manager.arbitration, .pressure, .ledger) -----
    Mutant("grant_order_ascending_priority", ("I13",), "pressure", R, MARB,
           "for priority in sorted(by_priority, reverse=True):", "for priority in sorted(by_priority):",
           "refimpl's own grant order takes the lowest priority bucket first"),
    Mutant("cancel_after_grant_credits_twice", ("I1",), "pressure", R, MARB,
           "self._retire(rec)", "self._retire(rec)\n        a.used -= credit",
           "cancelling (or timing out) a granted ticket credits its bytes, and retiring its reservation credits "
           "them again"),
    Mutant("grant_charged_unbooked", ("I1",), "pressure", R, MARB,
           "t.alloc = self._enter(t.holder, a, a.tier, t.role, t.nbytes, _O_GRANTED)\n            t.alloc.part = t",
           "a.used += t.nbytes  # charged, but no reservation is booked for it",
           "a round charges a grant's bytes to the ledger's used figure but books no reservation (no grant id) "
           "for them: nothing names those bytes when the ticket is cancelled or claimed"),
    Mutant("retired_ticket_kept", ("I1",), "pressure", R, MARB,
           "del self._tickets[t.id]\n        if t.event is not None:",
           "t.state = TicketState.CANCELLED\n        if t.event is not None:",
           "a retired ticket is marked cancelled but kept in the ticket table"),
    Mutant("grant_id_not_advanced", ("I4a",), "pressure", R, GOV, "            self._next_alloc += 1\n", "",
           "a grant (a ledger reservation) reads the next allocation id but never advances it"),
    Mutant("press_reserves_target", ("C5", "I1"), "pressure", R, MPRE,
           "self._pressures[r.id] = self._pressure_log[r.id] = r",
           "self._pressures[r.id] = self._pressure_log[r.id] = r\n"
           "        a.used += max(0, min(target, a.limit - a.used))  # set aside for the answer",
           "opening a pressure ticket sets its target aside from free bytes at once"),
    Mutant("age_cap_below_bound", ("I13",), "pressure", R, MARB,
           "for t in pend.values():\n            if t.age < bound:",
           "for t in pend.values():\n            if t.age < bound - 1:",
           "the age cap is one below the aging bound, so no waiting ticket matures and overtaking is unbounded"),
    Mutant("matured_compare_strict", ("I13",), "pressure", R, MARB,
           "elif t.age >= bound and self._aging:", "elif t.age > bound and self._aging:",
           "a round stops only past the aging bound, which a capped age never reaches"),
    Mutant("limit_commit_checks_old_limit", ("I2",), "manager", R, LIM,
           "committed = a.used <= ch.target or not", "committed = a.used <= a.limit or not",
           "a limit change commits when used fits under the old limit, not the new one: a lowered limit leaves "
           "granted leases above it"),
    Mutant("limit_past_capacity", ("I2",), "manager", R, LIM, "if limit > a.capacity:", "if limit > 2 * a.capacity:",
           "a limit change is checked against twice the pool's capacity (a units slip): the raised limit lets grants "
           "take bytes the device does not have"),
    Mutant("commit_publishes_first_part_only", ("I10",), "manager", S, STX,
           "zip(x.needs, x.held)", "zip(x.needs[:1], x.held[:1])",
           "a composed commit turns only its first reservation into a lease yet advances the bundle: the engine's "
           "state claims a step whose bytes on the other authorities are still provisional"),
    Mutant("extents_span_to_last_end", ("I8",), "ort", R, "refimpl.ort.extents",
           "return sum(r.length for r in self.ranges)",
           "return max((r.end for r in self.ranges), default=0)  # from the file's start to the last byte used",
           "the extents reader counts from the file's start to the end of the last referenced range: the dead space "
           "between and before the weights is charged, and grows with padding (#853's defect, in the reader)"),
    Mutant("report_hides_declined", ("I3",), "ort", S, SES,
           "not_enforced=s.not_enforced", 'not_enforced=frozenset(x for x in s.not_enforced if x.startswith("model:"))',
           "the report lists only per-model not-enforced labels: a declined class (KV, the arena) is recorded as "
           "not enforced but the user reads the limit as binding on it"),
)

"""Mutants of the composed manager's pressure part (a part of the registry in `refimpl.verify.mutants`).

The composed campaign (`ortmem verify`'s manager checker) runs these: bugs in
the deadlines, generations and use flags of holder pressure and in the
try-only allocator path, in refimpl (`refimpl.manager.pressure`,
`.arbitration`) and in the composed spec (`spec.manager_parts`), each caught
by the harm clause of its ID in `invariants.manager`.
"""

from __future__ import annotations

from invariants.mutation import Mutant
from spec.guards import Layer

__all__ = ["PRESSURE_MUTANTS"]

_R, _S = Layer.REFIMPL, Layer.SPEC
_MARB, _MPRE = "refimpl.manager.arbitration", "refimpl.manager.pressure"

PRESSURE_MUTANTS: tuple[Mutant, ...] = (
    Mutant("late_answer_credited", ("C5",), "manager", _R, _MPRE,
           "        if r.deadline is not None and now > r.deadline and self._guards.on(\"answer_open_only\"):",
           "        if False:",
           "an answer given after its pressure's deadline still releases the holder's leases: the requester has "
           "moved on, and the bytes are lost to the holder for nothing"),
    Mutant("spec_late_answer_credited", ("C5",), "manager", _S, "spec.manager_parts",
           "    if p.deadline is not None and now > p.deadline and guards.on(\"answer_open_only\"):\n",
           "    if False:\n",
           "the spec lets an answer after its pressure's deadline release the holder's leases"),
    Mutant("pinned_lease_reclaimed", ("I6",), "manager", _R, _MPRE,
           "            if (rec.pinned or rec.in_flight) and self._guards.on(\"victims_unpinned_idle\"):  # I6\n",
           "            if False:  # I6\n",
           "a pressure answer may give back a lease its holder pinned or has in flight: data in use is reclaimed"),
    Mutant("spec_pinned_lease_reclaimed", ("I6",), "manager", _S, "spec.manager_parts",
           "        if v in m.uses and guards.on(\"victims_unpinned_idle\"):\n", "        if False:\n",
           "the spec lets an answer give back a pinned or in-flight lease"),
    Mutant("try_reserve_overtakes_waiters", ("I13",), "manager", _R, _MARB,
           "        if (a.pending or nbytes > a.limit - a.used) and self._guards.on(\"try_only\"):",
           "        if nbytes > a.limit - a.used and self._guards.on(\"try_only\"):",
           "the allocator path takes free bytes while a ticket waits: the waiter is overtaken by every allocation"),
    Mutant("spec_try_reserve_overtakes_waiters", ("I13",), "manager", _S, "spec.manager_parts",
           "    if (waiting or nbytes > a.limit - a.used) and guards.on(\"try_only\"):",
           "    if nbytes > a.limit - a.used and guards.on(\"try_only\"):",
           "the spec lets the allocator path take free bytes while a ticket waits"),
    Mutant("stale_generation_answer_credited", ("C5",), "manager", _R, _MPRE,
           "        if r.generation != r.auth.generation and self._guards.on(\"answer_open_only\"):",
           "        if False:",
           "an answer to a pressure opened before a reconfigure still releases the holder's leases"),
    Mutant("spec_matured_compare_strict", ("I13",), "manager", _S, "spec.manager",
           "        elif t.age >= bound and guards.on(\"aging\"):\n",
           "        elif t.age > bound and guards.on(\"aging\"):\n",
           "the spec's round stops only past the aging bound, which a capped age never reaches: later, smaller "
           "tickets overtake a matured misfit round after round"),
    Mutant("composed_reconfigure_keeps_waiters", ("I13",), "manager", _R, _MARB,
           "        for t in list(a.pending.values()):  # an older pending ticket fails: it held nothing\n"
           "            del self._tickets[t.id]\n            if t.event is not None:\n"
           "                self._wake.append(t.event)\n        a.pending.clear()\n", "",
           "reconfigure bumps the generation but leaves the older pending tickets waiting under it"),
    Mutant("spec_reconfigure_keeps_waiters", ("I13",), "manager", _S, "spec.manager_parts",
           "            tickets = tickets.delete(t.id)  # an older pending ticket fails: it held nothing\n",
           "            pass\n",
           "the spec's reconfigure leaves the older pending tickets waiting under the new generation"),
)

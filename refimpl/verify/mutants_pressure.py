"""Mutants of holder pressure (model "pressure", `invariants.manager_pressure`; a part of `refimpl.verify.mutants`):
its deadlines, generations and use flags, the holder's answer, and the try-only allocator path.
"""

from __future__ import annotations

from invariants.mutation import Mutant
from refimpl.verify.mutants_paths import MARB, MPRE, R, S, SMAN, SPARTS

__all__ = ["PRESSURE_MUTANTS"]

PRESSURE_MUTANTS: tuple[Mutant, ...] = (
    Mutant("late_answer_credited", ("C5",), "pressure", R, MPRE,
           'r.deadline is not None and now > r.deadline and self._guards.on("answer_open_only")', "False",
           "an answer given after its pressure's deadline still releases the holder's leases: the requester has "
           "moved on, and the bytes are lost to the holder for nothing"),
    Mutant("spec_late_answer_credited", ("C5",), "pressure", S, SPARTS,
           'if p.deadline is not None and now is not None and now > p.deadline and guards.on("answer_open_only"):',
           "if False:",
           "the spec lets an answer after its pressure's deadline release the holder's leases"),
    Mutant("pinned_lease_reclaimed", ("I6",), "pressure", R, MPRE,
           '(rec.pinned or rec.in_flight) and self._guards.on("victims_unpinned_idle")', "False",
           "a pressure answer may give back a lease its holder pinned or has in flight: data in use is reclaimed"),
    Mutant("spec_pinned_lease_reclaimed", ("I6",), "pressure", S, SPARTS,
           'if v in m.uses and guards.on("victims_unpinned_idle"):', "if False:",
           "the spec lets an answer give back a pinned or in-flight lease"),
    Mutant("try_reserve_overtakes_waiters", ("I13",), "pressure", R, MARB,
           "(a.pending or nbytes > self._room(a))", "nbytes > self._room(a)",
           "the allocator path takes free bytes while a ticket waits: the waiter is overtaken by every allocation"),
    Mutant("spec_try_reserve_overtakes_waiters", ("I13",), "pressure", S, SPARTS,
           "(waiting or nbytes > free)", "nbytes > free",
           "the spec lets the allocator path take free bytes while a ticket waits"),
    Mutant("stale_generation_answer_credited", ("C5",), "pressure", R, MPRE,
           'if r.generation != r.auth.generation and self._guards.on("answer_open_only"):', "if False:",
           "an answer to a pressure opened before a reconfigure still releases the holder's leases"),
    Mutant("spec_matured_compare_strict", ("I13",), "pressure", S, "spec.grants",
           'if t.age >= bound and guards.on("aging"):', 'if t.age > bound and guards.on("aging"):',
           "the spec's round stops only past the aging bound, which a capped age never reaches: later, smaller "
           "tickets overtake a matured misfit round after round"),
    Mutant("composed_reconfigure_keeps_waiters", ("I13",), "pressure", R, MARB,
           "        for t in list(a.pending.values()):  # an older pending ticket fails: it held nothing\n"
           "            del self._tickets[t.id]\n            if t.event is not None:\n"
           "                self._wake.append(t.event)\n        a.pending.clear()\n", "",
           "reconfigure bumps the generation but leaves the older pending tickets waiting under it"),
    Mutant("spec_reconfigure_keeps_waiters", ("I13",), "pressure", S, SPARTS,
           "tickets = tickets.delete(t.id)  # an older pending ticket fails: it held nothing", "pass",
           "the spec's reconfigure leaves the older pending tickets waiting under the new generation"),
    Mutant("press_delivers_under_the_lock", ("I7",), "pressure", R, MPRE,
           'under_lock = not self._guards.on("unlock_before_callback")  # negative control: deliver under the lock',
           "under_lock = True  # 'the callback is quick': delivered while the ledger lock is held",
           "a press delivers the holder's callback while the ledger lock is held: a callback that answers or releases "
           "re-enters the governor, and every other thread waits on it"),
    Mutant("composed_reconfigure_fails_leases", ("I6",), "pressure", R, MARB,
           "a.generation += 1",
           "a.generation += 1\n"
           "        for rec in [r for r in a.allocs.values() if r.state is AllocState.LIVE and r.part is None]:\n"
           "            self._retire(rec)  # 'the old configuration's leases are void'",
           "reconfigure retires the authority's idle leases too, not only its waiters: holders lose bytes by no "
           "action of theirs"),
    # --- the holder's answer is its choice; a press takes nothing (C5, `invariants.manager_answers`) -----------
    Mutant("press_takes_a_lease", ("C5",), "pressure", R, MPRE,
           "return self._open(holder, a, target, False, priority, deadline)",
           "for rec in [x for x in a.allocs.values() if x.holder == holder and x.state is AllocState.LIVE\n"
           "                    and x.part is None and not (x.pinned or x.in_flight)][:1]:\n"
           "            self._retire(rec)  # 'pressure': the manager takes what it asks for\n"
           "        return self._open(holder, a, target, False, priority, deadline)",
           "opening a pressure ticket takes one of the holder's idle leases at once, before the holder chose"),
    Mutant("answer_takes_an_unnamed_lease", ("C5",), "pressure", R, MPRE,
           "self._retire(rec)",
           "self._retire(rec)\n"
           "        for rec in [x for x in r.auth.allocs.values() if picked and x.holder == holder and x.part is None\n"
           "                    and x.state is AllocState.LIVE and not (x.pinned or x.in_flight)][:1]:\n"
           "            self._retire(rec)  # 'the target was not met': one more of the holder's leases",
           "an answer also gives back one of the holder's idle leases it did not name (the target not met)"),
    Mutant("zero_answer_takes_a_lease", ("C5",), "pressure", R, MPRE,
           "for rec in picked:",
           "if not victims:  # 'take what you can', booked as nothing given back\n"
           "            for x in [x for x in r.auth.allocs.values() if x.holder == holder and x.part is None\n"
           "                      and x.state is AllocState.LIVE and not (x.pinned or x.in_flight)][:1]:\n"
           "                self._retire(x)\n        for rec in picked:",
           "a zero answer is read as 'take what you can': the holder's first idle lease is reclaimed"),
    Mutant("spec_aging_stops_short", ("I13",), "pressure", S, SMAN, "+ 1, bound", "+ 1, bound - 1",
           "the spec's round caps ages one below the aging bound: no waiting ticket matures, so later tickets "
           "overtake a misfit without end (step_I13_order.passed_over_ages: it is passed over and does not age)"),
)

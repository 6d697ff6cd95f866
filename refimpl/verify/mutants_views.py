"""Mutants of the composed manager's model views: publishing, executing, remapping and dropping a transaction's
view, and pinning the lease under it (a part of `refimpl.verify.mutants`).
"""

from __future__ import annotations

from invariants.mutation import Mutant
from refimpl.verify.mutants_paths import MBUN, MTX, R, S, SPARTS, SVIEW

__all__ = ["VIEW_MUTANTS"]

VIEW_MUTANTS: tuple[Mutant, ...] = (
    Mutant("view_before_every_need", ("C4",), "manager", R, MBUN,
           "(_P.RESERVED,)", "(_P.PLANNED, _P.RESERVING, _P.RESERVED)",
           "a transaction publishes its view while a need is still unreserved: an execution reads bytes no "
           "ledger charges"),
    Mutant("spec_view_before_every_need", ("C4",), "manager", S, SVIEW,
           'if len(x.held) != len(x.needs) and guards.on("publish_after_all_held"):', "if False:",
           "the spec publishes a view of a transaction that still misses a need"),
    Mutant("execute_stale_generation", ("C6",), "manager", R, MBUN,
           'generation != v.generation and self._guards.on("current_generation"):  # C6', "False:",
           "an execution binds a view by an old mapping generation: it reads the replaced mapping"),
    Mutant("spec_execute_stale_generation", ("C6",), "manager", S, SVIEW,
           'if act.generation != v.generation and guards.on("current_generation"):', "if False:",
           "the spec binds a view at a generation that is not its current one"),
    Mutant("remap_under_execution", ("I9",), "manager", R, MBUN,
           'if v.users and self._guards.on("remap_when_idle"):  # I9', "if False:",
           "a view is remapped while an execution binds it: that execution keeps reading the old mapping"),
    Mutant("spec_remap_under_execution", ("I9",), "manager", S, SVIEW,
           'if v.users and guards.on("remap_when_idle"):', "if False:", "the spec remaps a view under its executions"),
    Mutant("provisional_view_shared", ("C6",), "manager", R, MBUN,
           "if v.allocation != t.id and v.allocation in self._txs:", "if False:",
           "an execution binds another open transaction's provisional view, whose bytes that transaction may still "
           "abort"),
    Mutant("spec_provisional_view_shared", ("C6",), "manager", S, SVIEW,
           "if v.tx != x.id and v.tx in m.txs:", "if False:",
           "the spec lets an execution bind another open transaction's provisional view"),
    Mutant("drop_under_execution", ("I9",), "manager", R, MBUN,
           "if v.users:  # I9: no execution left reading a torn-down mapping", "if False:",
           "a committed view is dropped while a later execution binds it: that execution reads a torn-down mapping"),
    Mutant("spec_drop_under_execution", ("I9",), "manager", S, SVIEW,
           "if v.users:", "if False:", "the spec drops a view under its executions"),
    Mutant("lease_under_view_unpinned", ("C6",), "manager", R, MTX,
           "v.lease.part = v  # but the one under its view stays pinned until DropView (C6)", "pass",
           "a committed transaction's lease under its view is the holder's at once: released while the view is "
           "mapped, its readers read credited bytes"),
    Mutant("spec_lease_under_view_unpinned", ("C6",), "manager", S, SPARTS,
           '{v.allocation: f"view {v.id}" for v in m.views.values() if v.allocation is not None}', "{}",
           "the spec lets the lease under a mapped view be released, cancelled, quarantined or given up"),
)

"""Mutants of the composed manager's model views (a part of the registry in `refimpl.verify.mutants`).

The composed campaign (`ortmem verify`'s manager checker) runs these: bugs in
publishing, executing and remapping a transaction's view, in refimpl
(`refimpl.manager.bundles`) and in the composed spec (`spec.manager_views`),
each caught by the harm clause of its ID in `invariants.manager_views`.
"""

from __future__ import annotations

from invariants.mutation import Mutant
from spec.guards import Layer

__all__ = ["VIEW_MUTANTS"]

_R, _S = Layer.REFIMPL, Layer.SPEC
_MBUN, _SVIEW = "refimpl.manager.bundles", "spec.manager_views"

VIEW_MUTANTS: tuple[Mutant, ...] = (
    Mutant("view_before_every_need", ("C4",), "manager", _R, _MBUN,
           "            self._phase(t, (_P.RESERVED,), \"publish\")",
           "            self._phase(t, (_P.PLANNED, _P.RESERVING, _P.RESERVED), \"publish\")",
           "a transaction publishes its view while a need is still unreserved: an execution reads bytes no "
           "ledger charges"),
    Mutant("spec_view_before_every_need", ("C4",), "manager", _S, _SVIEW,
           "    if len(x.held) != len(x.needs) and guards.on(\"publish_after_all_held\"):\n",
           "    if False:\n",
           "the spec publishes a view of a transaction that still misses a need"),
    Mutant("execute_stale_generation", ("C6",), "manager", _R, _MBUN,
           "        if generation != v.generation and self._guards.on(\"current_generation\"):  # C6\n",
           "        if False:\n",
           "an execution binds a view by an old mapping generation: it reads the replaced mapping"),
    Mutant("spec_execute_stale_generation", ("C6",), "manager", _S, _SVIEW,
           "    if act.generation != v.generation and guards.on(\"current_generation\"):\n",
           "    if False:\n",
           "the spec binds a view at a generation that is not its current one"),
    Mutant("remap_under_execution", ("I9",), "manager", _R, _MBUN,
           "        if v.users and self._guards.on(\"remap_when_idle\"):  # I9\n",
           "        if False:\n",
           "a view is remapped while an execution binds it: that execution keeps reading the old mapping"),
    Mutant("spec_remap_under_execution", ("I9",), "manager", _S, _SVIEW,
           "    if v.users and guards.on(\"remap_when_idle\"):\n",
           "    if False:\n",
           "the spec remaps a view under its executions"),
    Mutant("provisional_view_shared", ("C6",), "manager", _R, _MBUN,
           "        if v.allocation != t.id and v.allocation in self._txs:",
           "        if False:",
           "an execution binds another open transaction's provisional view, whose bytes that transaction may "
           "still abort"),
    Mutant("spec_provisional_view_shared", ("C6",), "manager", _S, _SVIEW,
           "    if v.tx != x.id and v.tx in m.txs:\n",
           "    if False:\n",
           "the spec lets an execution bind another open transaction's provisional view"),
)

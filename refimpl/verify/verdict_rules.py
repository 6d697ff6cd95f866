"""What "verified" means, as code: the per-ID rules `ortmem verify` applies and prints.

An ID is "verified" only if all of these hold; otherwise it is "partial" and
every unmet rule is listed as a reason (an honest "partial" beats a
"verified" a reviewer can puncture):

  R1 coverage: every clause of the ID was evaluated on states or steps where
     its case occurred at least the profile's threshold of times;
  R2 negative controls: every guard protecting the ID, switched off in each
     layer, produced a harm: a violation of one of the ID's own clauses or,
     in refimpl, a divergence in state or result (a different error type
     alone, or nothing found, does not count);
  R3 falsifiable: every clause of the ID was made to fail by at least one
     control (a mutation control, or a negative control or explorer control
     of the ID);
  R4 deterministic: every guard protecting the ID has a control that does
     not depend on Hypothesis' search: the bounded-exhaustive explorer or,
     for a guard the spec cannot express (it lives in refimpl only), a fixed
     refimpl script that is clean with every guard on and harms with the
     guard off (`refimpl.verify.pressure_scripts`);
  R5 CrossHair confirmed the shared arithmetic (a missing or skipped
     CrossHair is not a pass).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from invariants.campaign import ControlResult
from invariants.clauses import Clause, Coverage, clauses_of
from invariants.explore import ExploreResult
from spec.catalog import CATALOG
from spec.guards import GUARDS, Layer

__all__ = ["THRESHOLDS", "RULES", "ClauseCoverage", "Judgement", "judge", "judged_clauses"]

#: Minimum evaluations-with-the-case-occurring per clause. Quick: 20 is enough to see the case in
#: many distinct examples of a 40-step campaign (one lucky example cannot meet it); thorough: ten
#: times that, so each clause meets its case across hundreds of independent scripts.
THRESHOLDS = {"quick": 20, "thorough": 200}

RULES = (
    "R1 coverage: every clause of the ID met its case (antecedent held) at least {threshold} times "
    "in the campaigns",
    "R2 negative controls: every guard of the ID, switched off in the spec and in refimpl, produced a harm "
    "(a violation of one of the ID's own clauses, or in refimpl a divergence in state or result; an error "
    "type alone does not count)",
    "R3 falsifiable: every clause of the ID was made to fail by at least one control (mutation, negative or "
    "explorer control)",
    "R4 deterministic: every guard of the ID has a control that does not depend on Hypothesis' search "
    "(the bounded-exhaustive explorer; for a guard the spec cannot express, a fixed refimpl script)",
    "R5 CrossHair confirmed the shared arithmetic (missing or skipped is not a pass)",
)


@attrs.frozen
class ClauseCoverage:
    predicate: str
    clause: str
    statement: str
    evaluated: int
    antecedent_held: int
    #: Controls that made this clause fail ("mutant:<name>", "guard:<name>/<layer>", "explorer:<name>").
    failed_by: tuple[str, ...]


@attrs.frozen
class Judgement:
    status: str  # "verified" | "partial"
    reasons: tuple[str, ...]
    coverage: tuple[ClauseCoverage, ...]
    checks: int  # clause evaluations in which the case occurred (the evaluations that mattered)
    evaluated: int


def _harm(c: ControlResult | Any) -> bool:
    return bool(getattr(c, "found", False))


def _kind(x: ExploreResult) -> str:
    """"script" for a fixed refimpl script's result (`refimpl.verify.pressure_scripts`), else "explorer"."""
    return "script" if x.model.endswith("-script") else "explorer"


def _nothing_found(c: ControlResult | Any) -> str:
    """Why a control found nothing, when it says more than that (e.g. the spec cannot express the guard)."""
    message = getattr(c, "message", "") or ""
    return "nothing found" if message in ("", "no counterexample found") else f"nothing found: {message}"


def judged_clauses(id: str) -> tuple[Clause, ...]:
    """The clauses of the predicates the catalog lists for `id`: what "every clause of the ID" means.

    A clause declared by a module the catalog no longer lists for the ID (the focused transactions model, still
    imported by refimpl's focused verbs until it is deleted, issue #21) checks no model the verdict runs."""
    listed = {p.rsplit(".", 1)[1] for e in CATALOG if e.id == id for p in e.predicates}
    return tuple(c for c in clauses_of(id) if c.predicate in listed)


def judge(id: str, profile: str, coverage: Coverage, guards: Iterable[str],
          controls: Iterable[ControlResult], mutants: Iterable[ControlResult],
          explorer_controls: Mapping[str, ExploreResult], crosshair_ok: bool, crosshair_why: str,
          no_campaign: bool = False) -> Judgement:
    """Apply R1-R5 to one ID."""
    threshold = THRESHOLDS[profile]
    clauses: tuple[Clause, ...] = judged_clauses(id)
    guards = tuple(guards)
    controls = [c for c in controls if id in c.ids]
    mutants = [m for m in mutants if id in m.ids]
    mine_explored = {g: x for g, x in explorer_controls.items() if g in guards}
    failed_by: dict[str, list[str]] = {c.key: [] for c in clauses}
    def credit(result: Any, label: str) -> None:
        for k in dict.fromkeys((result.clause, *getattr(result, "clauses", ()))):
            if k in failed_by:
                failed_by[k].append(label)

    for m in mutants:
        if _harm(m):
            credit(m, f"mutant:{m.guard}")
    for c in controls:
        if _harm(c):
            credit(c, f"guard:{c.guard}/{c.layer.value}")
    for g, x in mine_explored.items():
        if x.found:
            credit(x, f"{_kind(x)}:{g}")
    rows = []
    reasons: list[str] = []
    for c in clauses:
        e, h = coverage.of(c.key)
        rows.append(ClauseCoverage(c.predicate, c.name, c.statement, e, h, tuple(failed_by[c.key])))
        if h < threshold:
            reasons.append(f"R1: clause {c.key} met its case {h} times (< {threshold})")
        if not failed_by[c.key]:
            reasons.append(f"R3: no control made clause {c.key} fail")
    if not clauses:
        reasons.append("R1: the ID has no named clause")
    if no_campaign:
        reasons.append("R1: its campaign did not complete (violation)")
    for g in guards:
        for layer in Layer:
            found = [c for c in controls if c.guard == g and c.layer is layer]
            if not found:
                reasons.append(f"R2: guard {g} has no {layer.value} control")
            elif not all(_harm(c) for c in found):
                why = found[0].violated or _nothing_found(found[0])
                reasons.append(f"R2: guard {g} off in {layer.value} produced no harm ({why})")
        if g not in mine_explored:
            reasons.append(f"R4: guard {g} has no deterministic control")
        elif not mine_explored[g].found:
            reasons.append(f"R4: the {_kind(mine_explored[g]).replace('script', 'fixed script')} found nothing "
                           f"with guard {g} off")
    if not crosshair_ok:
        reasons.append(f"R5: {crosshair_why}")
    return Judgement("partial" if reasons else "verified", tuple(reasons), tuple(rows),
                     sum(r.antecedent_held for r in rows), sum(r.evaluated for r in rows))


def guards_of(id: str) -> tuple[str, ...]:
    return tuple(g.name for g in GUARDS if id in g.ids)

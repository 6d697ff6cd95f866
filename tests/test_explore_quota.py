"""The process quota in the explorer (`invariants.manager_scope.QUOTA_SCOPE`): a complete scope that sets, raises
and removes the device tier's quota, so the quota's reads are exercised. (I1 I13)

The scope reaches a quota holding a waiter its ledger has room for, a raise or removal granting it, and bytes
credited on one ledger granting a waiter on the other (counted, `invariants.manager_features`); the spec's twin of
mutant `quota_ignored` is found there by I1's quota clause; and each quota read the incremental checks declare
(`invariants.explore_checks`: `parts_of`, `order_step_of`, `quota_step_of`) is shown necessary: without it, the
incremental checks skip a harm the full checks flag, under a spec bug that the declared reads do catch.
"""

from __future__ import annotations

import attrs
import pytest

from invariants import manager as IM
from invariants.explore import explore
from invariants.explore_checks import READS
from invariants.manager_order import step_I13_order
from invariants.manager_quota import step_I1_quota
from invariants.manager_scope import COMPLETE_SCOPES, QUOTA_SCOPE, manager_model
from invariants.mutation import Mutant, applied
from refimpl.verify.mutants import MUTANTS
from spec import manager_actions as M
from spec.guards import ALL_ON, Layer
from spec.types import Tier

from test_explore_fast import _judge_scope
from test_explore_scopes import _exhaust

_QUOTA_FEATURES = ("process quota holds a waiter its ledger has room for", "quota raised or removed grants a waiter",
                   "quota room credited on another ledger grants a waiter")

#: Mutant `quota_ignored` in the spec (`spec.quota.headroom`, the same line as refimpl's `limits`, one indent less):
#: a grant's room is its ledger's free bytes alone. The explorer runs the spec, so this twin is what it can find.
_Q = MUTANTS["quota_ignored"]
SPEC_QUOTA_IGNORED = attrs.evolve(_Q, name="spec_quota_ignored", layer=Layer.SPEC, module="spec.quota",
                                  old=_Q.old.removeprefix("    "), new=_Q.new.removeprefix("    "))
#: A quota raised or removed runs no round (`spec.manager._quota_rounds`): the waiter it held keeps waiting.
QUOTA_CHANGE_NO_ROUND = Mutant("spec_quota_change_no_round", ("I13",), "manager", Layer.SPEC, "spec.manager",
                               "    if not (before.quotas or m.quotas):\n        return m\n", "    return m\n",
                               "a raised or removed quota (or room credited elsewhere in the tier) runs no round")
#: A round's grant pass scans newest first (`spec.grants._first`): a later ticket takes bytes an earlier one fits.
ROUND_NEWEST_FIRST = Mutant("spec_round_newest_first", ("I13",), "manager", Layer.SPEC, "spec.grants",
                            "    for t in ordered:\n", "    for t in reversed(ordered):\n",
                            "a round considers its waiters newest first")


def test_the_quota_scope_is_complete_in_both_profiles_and_reaches_the_quota_situations() -> None:
    assert COMPLETE_SCOPES["quick"]["manager_quota"] is QUOTA_SCOPE is COMPLETE_SCOPES["thorough"]["manager_quota"]
    r, counts = _exhaust(QUOTA_SCOPE, "manager_quota")
    print(f"manager_quota: {r.states} states, {r.transitions} transitions, {r.seconds:.1f} s;",
          {k: counts[k] for k in _QUOTA_FEATURES})
    assert r.complete and not r.found and not r.bound_hit
    assert (r.states, r.transitions) == (3572, 23810)
    assert all(counts[k] > 0 for k in _QUOTA_FEATURES), counts


def test_a_scope_without_quotas_counts_no_quota_situation() -> None:
    # Negative control of the quota situations: the same scope offering no SetProcessQuota counts none of them.
    r, counts = _exhaust(attrs.evolve(QUOTA_SCOPE, quotas=()), "no quota")
    assert r.complete and [counts[k] for k in _QUOTA_FEATURES] == [0, 0, 0]
    assert counts["ticket claimed on a shared authority"] > 0


def test_the_explorer_finds_a_grant_past_the_quota_when_the_spec_ignores_it() -> None:
    with applied(SPEC_QUOTA_IGNORED):
        r = explore(manager_model(ALL_ON, QUOTA_SCOPE, symmetry=True, name="manager_quota"), max_depth=10**6)
    assert r.found and r.clause == "step_I1_quota.tier_charge_within_quota", (r.clause, r.message)
    assert r.counterexample == (M.Submit(1, 1, 1), M.SetProcessQuota(Tier.DEVICE, 1), M.Submit(1, 1, 1))
    r = explore(manager_model(ALL_ON, QUOTA_SCOPE, symmetry=True, name="manager_quota"), max_depth=10**6)
    assert r.complete and not r.found  # restored


# Each declared quota read, left out: (what, predicate, its projection without the quotas, the spec bug whose harm
# only the quota shows, the scope and depth, the clause the full checks flag). The grant-order case needs three
# tickets and an aging bound of 4, so that the overtaken ticket has not matured (maturity's clause would come first).
_NO_QUOTA_READS = [
    ("parts_of without the quotas: I13's idle waiter", IM.state_I13_manager,
     lambda m: (m.ledger, m.tickets, m.txs, m.aging_bound), QUOTA_CHANGE_NO_ROUND, QUOTA_SCOPE, 4,
     "state_I13_manager.no_idle_fitting_waiter"),
    ("order_step_of without the quotas: I13's grant order", step_I13_order,
     lambda before, act, after, result=None: (act, before.tickets, before.next_ticket, after.tickets, after.ledger,
                                              after.aging_bound),
     ROUND_NEWEST_FIRST, attrs.evolve(QUOTA_SCOPE, tickets=3, aging_bound=4, txs=0, needs=(), grows=False), 6,
     "step_I13_order.grant_order"),
    ("quota_step_of without the quotas: I1's quota", step_I1_quota,
     lambda before, act, after, result=None: (act, before.ledger.authorities, after.ledger.authorities),
     SPEC_QUOTA_IGNORED, QUOTA_SCOPE, 4, "step_I1_quota.tier_charge_within_quota"),
]


@pytest.mark.parametrize(("what", "pred", "proj", "bug", "scope", "depth", "clause"), _NO_QUOTA_READS,
                         ids=[w[0].split(":")[0] for w in _NO_QUOTA_READS])
def test_a_projection_missing_the_quotas_is_caught(what, pred, proj, bug, scope, depth, clause) -> None:
    with applied(bug):
        full, inc, _ = _judge_scope(ALL_ON, depth, READS, scope)
        assert clause in {v for _, v in full}  # the bug's harm is in the walk
        assert inc == full  # the declared reads flag what the full checks flag
        _, wrong, _ = _judge_scope(ALL_ON, depth, {**READS, pred: proj}, scope)
    missed = [(where, v) for (where, v), (_, u) in zip(full, wrong) if u != v]
    assert missed and all(v == clause for _, v in missed), what

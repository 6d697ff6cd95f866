"""The transactions campaign as a test: the composed machine restricted to transactions (C3 C4 C6 I5 I9 I10).

`invariants.manager_tx_machine.TxMachine` drives the composed verbs (plan, reserve, commit, abort, retry
intents, model views, state bundles, device loss, poisoning); after every step, refinement of the one
manager against `spec.manager.step`, a rejection leaves the whole state unchanged, and the composed
predicates. (The focused transaction model's campaign went with it, issue #21.)
"""

from __future__ import annotations

from hypothesis import settings

from invariants import contracts
from invariants.campaign import campaign_settings, run_machine
from invariants.manager_tx_machine import TX_SITUATIONS, TxMachine
from refimpl.verify.manager_adapter import ManagerAdapter


class ComposedTransactionsRefineSpec(TxMachine):
    adapter_factory = ManagerAdapter


TestComposedTransactionsRefineSpec = ComposedTransactionsRefineSpec.TestCase
TestComposedTransactionsRefineSpec.settings = settings(max_examples=40, stateful_step_count=30, deadline=None)


def test_tx_campaign_reaches_views_and_bundles_and_rejects_bad_input() -> None:
    # Evidence only if transactions get deep (views bound, remapped, dropped; bundles committed) and every
    # refusal of the view and bundle verbs is produced.
    with contracts.contracts(True):
        stats = run_machine(TxMachine, ManagerAdapter, campaign_settings(60, 40))
    assert stats.accepted > 1000
    for action in ("PlanTx", "ReserveTx", "CommitTx", "AbortTx", "PublishView", "ExecuteView", "RemapView",
                   "DropView", "OpenBundle", "JoinBundle", "ReportMismatch", "LoseDevice", "ConfirmTermination"):
        assert stats.accepted_by_action.get(action, 0) > 0, f"campaign never accepted {action}: {stats.accepted_by_action}"
    # StaleGeneration: `own_view` names a remapped view by the generation it was published at (C6).
    for error in ("InvalidTransition", "UnknownTransaction", "UnknownView", "DeviceLost", "ViewInUse",
                  "BundlePoisoned", "ManagerPoisoned", "CapacityDenied", "StaleGeneration"):
        assert stats.rejected.get(error, 0) > 0, f"campaign never produced {error}: {stats.rejected}"
    unmet = [s for s in TX_SITUATIONS if not stats.events.get(s)]
    assert not unmet, f"campaign never reached {unmet}: {stats.events}"

# Bad input to the composed manager's operations (issue #10): a typed error, and the WHOLE
# `abstract_manager()` unchanged, with contracts off and on.

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from refimpl_manager_harness import lease, make

from invariants import contracts
from refimpl.manager import ProcessMemoryManager
from refimpl.verify.manager_adapter import commit_limit, prepare_limit, reserve_tx
from refimpl.verify.manager_hooks import abstract_manager
from spec.errors import (
    StaleAnswer,
    BundlePoisoned,
    CapacityDenied,
    DeviceLost,
    ForeignHolder,
    InvalidArgument,
    InvalidBytes,
    InvalidTransition,
    HolderInUse,
    PinnedVictim,
    StaleGeneration,
    ProviderPinned,
    UnknownAllocation,
    UnknownAuthority,
    UnknownBundle,
    UnknownHolder,
    UnknownTicket,
    UnknownTransaction,
    UnknownView,
    ViewInUse,
)
from spec.types import MAX_NAME, Role, Tier
from trace_harness import traced


def refused_unchanged(pmm: ProcessMemoryManager, w: Any, call: Callable, error: type, match: str, on: bool) -> None:
    """`call` raises exactly `error` (its message matching), contracts `on` or off, and the whole manager is
    unchanged."""
    before = abstract_manager(pmm)
    with contracts.contracts(on), pytest.raises(error, match=match) as exc:
        call(pmm, w)
    assert type(exc.value) is error
    assert abstract_manager(pmm) == before


@pytest.fixture
def world() -> tuple[ProcessMemoryManager, Any]:
    pmm, w = make()
    w.view = pmm.register_alias(w.a, "uvm")
    w.lost = pmm.register_authority("gpu1", Tier.DEVICE, 100)
    pmm.lose_device(w.lost)
    w.live = lease(pmm, w.h1, w.a, 10)
    w.other_live = lease(pmm, w.h1, w.b, 10, Tier.HOST)
    w.prov = pmm.reserve(w.h1, w.a, Tier.DEVICE, 5, Role.KV)
    gone = lease(pmm, w.h1, w.a, 1)
    pmm.release(w.h1, gone)
    w.gone = gone
    w.granted = pmm.submit(w.h1, w.a, 5)
    w.g_alloc = abstract_manager(pmm).tickets[w.granted].allocation
    w.retired = pmm.submit(w.h1, w.a, 5)
    pmm.cancel_ticket(w.h1, w.retired)
    w.blocker = lease(pmm, w.h2, w.b, 90, Tier.HOST)
    w.pending = pmm.submit(w.h1, w.b, 50)
    w.pr = pmm.open_pressure(w.h1, w.a, 5)
    w.pr_done = pmm.open_pressure(w.h1, w.a, 5)
    pmm.cancel_pressure(w.pr_done)
    w.pr_due = pmm.open_pressure(w.h1, w.a, 5, 2, 3)  # priority 2, due at 3 (C5)
    w.tx = pmm.plan_tx(w.h1, ((w.a, 5), (w.b, 5)))
    w.tx_done = pmm.plan_tx(w.h1, ((w.a, 5),))
    pmm.abort_tx(w.tx_done)
    w.tx_full = pmm.plan_tx(w.h2, ((w.a, 1),))
    pmm.reserve_all(w.tx_full)
    w.tx_big = pmm.plan_tx(w.h2, ((w.b, 50),))
    prepare_limit(pmm, w.b, 100)  # a change left pending: the checkers' step alone
    w.bundle = pmm.open_bundle()
    w.poisoned = pmm.open_bundle()
    pmm.report_mismatch(w.poisoned)
    w.tx_in_bundle = pmm.plan_tx(w.h2, ((w.a, 1),))
    pmm.join_bundle(w.tx_in_bundle, w.bundle)
    w.tx_poisoned = pmm.plan_tx(w.h2, ((w.a, 1),))
    pmm.reserve_all(w.tx_poisoned)
    pmm.join_bundle(w.tx_poisoned, w.bundle)
    pmm.report_mismatch(w.bundle)
    w.pinned = lease(pmm, w.h1, w.a, 2)
    pmm.set_use(w.h1, w.pinned, True, False)
    return pmm, w


BAD: list[tuple[str, Callable[[ProcessMemoryManager, Any], Any], type, str]] = [
    ("submit-zero", lambda p, w: p.submit(w.h1, w.a, 0), InvalidBytes, r"^nbytes must be in \[1, 2\*\*63-1\], got 0$"),
    ("submit-bool", lambda p, w: p.submit(w.h1, w.a, True), InvalidBytes, "int, got bool"),
    ("submit-float", lambda p, w: p.submit(w.h1, w.a, 1.5), InvalidBytes, "int, got float"),
    ("submit-priority", lambda p, w: p.submit(w.h1, w.a, 1, "high"), InvalidArgument, "priority"),
    ("submit-role", lambda p, w: p.submit(w.h1, w.a, 1, 0, "kv"), InvalidArgument, "role"),
    ("submit-holder", lambda p, w: p.submit(99, w.a, 1), UnknownHolder, "99"),
    ("submit-authority", lambda p, w: p.submit(w.h1, 99, 1), UnknownAuthority, "99"),
    ("submit-alias", lambda p, w: p.submit(w.h1, w.view, 1), InvalidArgument, "view of"),
    ("submit-lost", lambda p, w: p.submit(w.h1, w.lost, 1), DeviceLost, "lost"),
    ("submit-never-fits", lambda p, w: p.submit(w.h1, w.a, 101), CapacityDenied, "never fit"),
    ("submit-alignment-3", lambda p, w: p.submit(w.h1, w.a, 1, alignment=3), InvalidArgument,
     r"^alignment must be None or a power of two in \[1, 2\*\*62\], got 3$"),
    ("submit-alignment-0", lambda p, w: p.submit(w.h1, w.a, 1, alignment=0), InvalidArgument, "got 0$"),
    ("submit-alignment-neg", lambda p, w: p.submit(w.h1, w.a, 1, alignment=-4), InvalidArgument, "got -4$"),
    ("submit-alignment-2**63", lambda p, w: p.submit(w.h1, w.a, 1, alignment=1 << 63), InvalidArgument, "power of two"),
    ("submit-alignment-bool", lambda p, w: p.submit(w.h1, w.a, 1, alignment=True), InvalidArgument, "got True$"),
    ("submit-alignment-float", lambda p, w: p.submit(w.h1, w.a, 1, alignment=64.0), InvalidArgument, "got 64.0$"),
    ("acquire-alignment", lambda p, w: p.acquire(w.h1, w.a, 1, alignment=12), InvalidArgument, "got 12$"),
    ("claim-holder", lambda p, w: p.claim(99, w.granted), UnknownHolder, "99"),
    ("claim-bool-holder", lambda p, w: p.claim(True, w.granted), UnknownHolder, r"^holder True is not registered$"),
    ("claim-unknown", lambda p, w: p.claim(w.h1, 999), UnknownTicket, "never issued"),
    ("claim-retired", lambda p, w: p.claim(w.h1, w.retired), InvalidTransition, "already claimed"),
    ("claim-foreign", lambda p, w: p.claim(w.h2, w.granted), ForeignHolder, "not 2's"),
    ("claim-pending", lambda p, w: p.claim(w.h1, w.pending), InvalidTransition, "pending"),
    ("cancel-unknown", lambda p, w: p.cancel_ticket(w.h1, "1"), UnknownTicket, "never issued"),
    ("cancel-foreign", lambda p, w: p.cancel_ticket(w.h2, w.granted), ForeignHolder, "not 2's"),
    ("timeout-holder", lambda p, w: p.timeout_ticket(0, w.granted), UnknownHolder, "0"),
    ("acquire-timeout", lambda p, w: p.acquire(w.h1, w.a, 1, timeout=-1), InvalidArgument, "timeout"),
    ("press-holder", lambda p, w: p.press(99, w.a, 1), UnknownHolder, "99"),
    ("press-alias", lambda p, w: p.press(w.h1, w.view, 1), InvalidArgument, "view of"),
    ("press-lost", lambda p, w: p.press(w.h1, w.lost, 1), DeviceLost, "lost"),
    ("press-target", lambda p, w: p.press(w.h1, w.a, 0), InvalidBytes, "target"),
    ("press-target-type-first", lambda p, w: p.press(99, w.lost, "8"), InvalidBytes, "target must be an int"),
    ("answer-victims-first", lambda p, w: p.answer(99, 999, [1]), InvalidArgument, "victims must be"),
    ("answer-unknown", lambda p, w: p.answer(w.h1, 999, ()), UnknownTicket, "never issued"),
    ("answer-retired", lambda p, w: p.answer(w.h1, w.pr_done, ()), StaleAnswer, "closed"),
    ("answer-late", lambda p, w: p.answer(w.h1, w.pr_due, (w.live,), 4), StaleAnswer, "due at 3; answered at 4"),
    ("answer-due-without-time", lambda p, w: p.answer(w.h1, w.pr_due, ()), InvalidArgument, "say its time"),
    ("answer-now-negative", lambda p, w: p.answer(w.h1, w.pr, (), -1), InvalidArgument, "now must be"),
    ("press-priority", lambda p, w: p.press(w.h1, w.a, 1, "hi"), InvalidArgument, "priority must be an int"),
    ("press-deadline", lambda p, w: p.press(w.h1, w.a, 1, 0, -1), InvalidArgument, "deadline must be"),
    # Priorities and times are 64-bit, as bytes are: every accepted value is one a trace carries exactly.
    ("submit-priority-past-int64", lambda p, w: p.submit(w.h1, w.a, 1, 2**63), InvalidArgument,
     r"^priority must be an int in \[-2\*\*63, 2\*\*63-1\], got 9223372036854775808$"),
    ("try-priority-below-int64", lambda p, w: p.try_reserve(w.h1, w.a, 1, -(2**63) - 1), InvalidArgument,
     r"^priority must be an int in \[-2\*\*63, 2\*\*63-1\], got -9223372036854775809$"),
    ("press-priority-past-int64", lambda p, w: p.press(w.h1, w.a, 1, 2**70), InvalidArgument, "priority must be"),
    ("plan-priority-past-int64", lambda p, w: p.plan_tx(w.h1, ((w.a, 1),), 2**63), InvalidArgument,
     "priority must be"),
    ("press-deadline-past-int64", lambda p, w: p.press(w.h1, w.a, 1, 0, 2**63), InvalidArgument,
     r"^deadline must be None or an int in \[0, 2\*\*63-1\], got 9223372036854775808$"),
    ("answer-now-past-int64", lambda p, w: p.answer(w.h1, w.pr, (), 2**63), InvalidArgument, "now must be None or"),
    ("expire-now-past-int64", lambda p, w: p.expire_pressure(w.pr_due, 2**63), InvalidArgument,
     r"^now must be an int in \[0, 2\*\*63-1\], got 9223372036854775808$"),
    ("try-bytes", lambda p, w: p.try_reserve(w.h1, w.a, 0), InvalidBytes, "nbytes"),
    ("try-priority", lambda p, w: p.try_reserve(w.h1, w.a, 1, "hi"), InvalidArgument, "priority"),
    ("try-alias", lambda p, w: p.try_reserve(w.h1, w.view, 1), InvalidArgument, "view of"),
    ("try-lost", lambda p, w: p.try_reserve(w.h1, w.lost, 1), DeviceLost, "lost"),
    ("try-alignment", lambda p, w: p.try_reserve(w.h1, w.a, 1, alignment=6), InvalidArgument, "got 6$"),
    ("reserve-alignment", lambda p, w: p.reserve(w.h1, w.a, Tier.DEVICE, 1, Role.KV, 48), InvalidArgument,
     "got 48$"),
    ("try-behind-a-waiter", lambda p, w: p.try_reserve(w.h1, w.b, 1), CapacityDenied, "1 waiting"),
    ("use-flags", lambda p, w: p.set_use(w.h1, w.live, 1, False), InvalidArgument, "must be bools"),
    ("use-holder", lambda p, w: p.set_use(99, w.live, True, False), UnknownHolder, "99"),
    ("use-unknown", lambda p, w: p.set_use(w.h1, 999, True, False), UnknownAllocation, "never issued"),
    ("use-released", lambda p, w: p.set_use(w.h1, w.gone, True, False), InvalidTransition, "already released"),
    ("use-foreign", lambda p, w: p.set_use(w.h2, w.live, True, False), ForeignHolder, "holder 1"),
    ("use-provisional", lambda p, w: p.set_use(w.h1, w.prov, True, False), InvalidTransition, "provisional"),
    ("use-ticket-owned", lambda p, w: p.set_use(w.h1, w.g_alloc, True, False), InvalidTransition, "ticket"),
    ("reconfigure-unknown", lambda p, w: p.reconfigure(999), UnknownAuthority, "999"),
    ("reconfigure-alias", lambda p, w: p.reconfigure(w.view), InvalidArgument, "view of"),
    ("reconfigure-lost", lambda p, w: p.reconfigure(w.lost), DeviceLost, "lost"),
    ("expire-unknown", lambda p, w: p.expire_pressure(999, 9), UnknownTicket, "never issued"),
    ("expire-retired", lambda p, w: p.expire_pressure(w.pr_done, 9), InvalidTransition, "already"),
    ("expire-on-time", lambda p, w: p.expire_pressure(w.pr_due, 3), InvalidTransition, "not expired at 3"),
    ("expire-no-deadline", lambda p, w: p.expire_pressure(w.pr, 9), InvalidTransition, "due at None"),
    ("expire-now", lambda p, w: p.expire_pressure(w.pr_due, None), InvalidArgument, "now must be"),
    ("answer-foreign", lambda p, w: p.answer(w.h2, w.pr, ()), ForeignHolder, "not 2"),
    ("answer-list", lambda p, w: p.answer(w.h1, w.pr, [w.live]), InvalidArgument, "tuple"),
    ("answer-duplicate", lambda p, w: p.answer(w.h1, w.pr, (w.live, w.live)), InvalidArgument, "distinct"),
    ("answer-never-issued", lambda p, w: p.answer(w.h1, w.pr, (w.live, 999)), UnknownAllocation, "never issued"),
    ("answer-released", lambda p, w: p.answer(w.h1, w.pr, (w.gone,)), InvalidTransition, "already released"),
    ("answer-foreign-victim", lambda p, w: p.answer(w.h1, w.pr, (w.blocker,)), ForeignHolder, "holder 2"),
    ("answer-other-authority", lambda p, w: p.answer(w.h1, w.pr, (w.other_live,)), InvalidArgument, "not the pressed"),
    ("answer-provisional", lambda p, w: p.answer(w.h1, w.pr, (w.prov,)), InvalidTransition, "provisional"),
    ("answer-ticket-owned", lambda p, w: p.answer(w.h1, w.pr, (w.g_alloc,)), InvalidTransition, "ticket"),
    ("cancel-pressure-unknown", lambda p, w: p.cancel_pressure(None), UnknownTicket, "never issued"),
    ("cancel-pressure-retired", lambda p, w: p.cancel_pressure(w.pr_done), InvalidTransition, "already"),
    ("plan-holder", lambda p, w: p.plan_tx(99, ((w.a, 1),)), UnknownHolder, "99"),
    ("plan-empty", lambda p, w: p.plan_tx(w.h1, ()), InvalidArgument, "non-empty"),
    ("plan-list", lambda p, w: p.plan_tx(w.h1, [(w.a, 1)]), InvalidArgument, "non-empty tuple"),
    ("plan-triple", lambda p, w: p.plan_tx(w.h1, ((w.a, 1, 2),)), InvalidArgument, "pairs"),
    ("plan-duplicate", lambda p, w: p.plan_tx(w.h1, ((w.a, 1), (w.a, 2))), InvalidArgument, "distinct"),
    ("plan-unhashable", lambda p, w: p.plan_tx(w.h1, (([1], 1),)), InvalidArgument, "int authority.*\\[1\\]"),
    ("plan-bool-duplicate", lambda p, w: p.plan_tx(w.h1, ((1, 1), (True, 2))), InvalidArgument, "int authority"),
    ("plan-duplicate", lambda p, w: p.plan_tx(w.h1, ((w.a, 1), (w.a, 2))), InvalidArgument, "distinct"),
    # An ill-typed need is refused as such before any state is looked at (audit21: a lost device, 7.0 B).
    ("plan-float-on-lost", lambda p, w: p.plan_tx(99, ((w.lost, 7.0),)), InvalidArgument, "int nbytes"),
    ("plan-unknown", lambda p, w: p.plan_tx(w.h1, ((w.a, 1), (99, 1))), UnknownAuthority, "99"),
    ("plan-alias", lambda p, w: p.plan_tx(w.h1, ((w.view, 1),)), InvalidArgument, "view of"),
    ("plan-lost", lambda p, w: p.plan_tx(w.h1, ((w.a, 1), (w.lost, 1))), DeviceLost, "lost"),
    ("plan-bytes", lambda p, w: p.plan_tx(w.h1, ((w.a, 1), (w.b, -1))), InvalidBytes, "nbytes"),
    ("reserve-all-unknown", lambda p, w: p.reserve_all(999), UnknownTransaction, "never planned"),
    ("reserve-all-retired", lambda p, w: p.reserve_all(w.tx_done), InvalidTransition, "already committed or aborted"),
    # the single `ReserveTx` step the checkers take (`refimpl.verify.manager_adapter`)
    ("reserve-unknown", lambda p, w: reserve_tx(p, 999), UnknownTransaction, "never planned"),
    ("reserve-retired", lambda p, w: reserve_tx(p, w.tx_done), InvalidTransition, "already committed or aborted"),
    ("reserve-all-held", lambda p, w: reserve_tx(p, w.tx_full), InvalidTransition, "every need"),
    ("reserve-denied", lambda p, w: reserve_tx(p, w.tx_big), CapacityDenied, "try-only"),
    ("commit-tx-partial", lambda p, w: p.commit_tx(w.tx), InvalidTransition, "holds 0 of 2"),
    ("commit-tx-unknown", lambda p, w: p.commit_tx(True), UnknownTransaction, "never planned"),
    ("abort-retired", lambda p, w: p.abort_tx(w.tx_done), InvalidTransition, "already"),
    ("lower-unknown", lambda p, w: p.lower_limit(99, 1), UnknownAuthority, "99"),
    ("lower-alias", lambda p, w: p.lower_limit(w.view, 1), InvalidArgument, "view of"),
    ("lower-lost", lambda p, w: p.lower_limit(w.lost, 1), DeviceLost, "lost"),
    ("lower-float-on-lost", lambda p, w: p.lower_limit(w.lost, 1.0), InvalidBytes, "limit must be an int"),
    ("lower-negative", lambda p, w: p.lower_limit(w.a, -1), InvalidBytes, r"^limit must be in \[0, 2\*\*63-1\], got -1$"),
    ("lower-above-capacity", lambda p, w: p.lower_limit(w.a, 101), InvalidBytes, "capacity"),
    ("lower-pending", lambda p, w: p.lower_limit(w.b, 50), InvalidTransition, "already has"),
    # the single `PrepareLimit` / `CommitLimit` steps the checkers take (`refimpl.verify.manager_adapter`)
    ("prepare-pending", lambda p, w: prepare_limit(p, w.b, 50), InvalidTransition, "already has"),
    ("commit-limit-none", lambda p, w: commit_limit(p, w.a), InvalidTransition, "no limit change"),
    ("commit-limit-alias", lambda p, w: commit_limit(p, w.view), InvalidTransition, "no limit change"),
    ("commit-limit-unknown", lambda p, w: commit_limit(p, "a"), UnknownAuthority, "'a'"),
    ("release-granted-alloc", lambda p, w: p.release(w.h1, w.g_alloc), InvalidTransition, "that part settles"),
    ("callback-not-callable", lambda p, w: p.register_callback(w.h1, 3), InvalidArgument, "callable"),
    ("callback-holder", lambda p, w: p.register_callback(99, print), UnknownHolder, "99"),
    ("join-unknown-tx", lambda p, w: p.join_bundle(99, w.bundle), UnknownTransaction, "99"),
    ("join-retired-tx", lambda p, w: p.join_bundle(w.tx_done, w.bundle), InvalidTransition, "already"),
    ("join-unknown-bundle", lambda p, w: p.join_bundle(w.tx, 99), UnknownBundle, "bundle 99 is not known"),
    ("join-twice", lambda p, w: p.join_bundle(w.tx_in_bundle, w.bundle), InvalidTransition, "already in bundle"),
    ("join-poisoned", lambda p, w: p.join_bundle(w.tx, w.poisoned), BundlePoisoned, "poisoned"),
    ("commit-poisoned-bundle", lambda p, w: p.commit_tx(w.tx_poisoned), BundlePoisoned, "poisoned"),
    ("mismatch-unknown", lambda p, w: p.report_mismatch(99), UnknownBundle, "bundle 99"),
    ("remove-unknown", lambda p, w: p.remove_authority(99), UnknownAuthority, r"^authority 99 is not known"),
    ("remove-str", lambda p, w: p.remove_authority("1"), UnknownAuthority, r"^authority '1' is not known"),
    ("remove-pinned", lambda p, w: p.remove_authority(w.a), ProviderPinned, r"^authority 1 is pinned by transaction"),
    ("remove-pinned-host", lambda p, w: p.remove_authority(w.b), ProviderPinned, r"^authority 2 is pinned by"),
    ("unregister-unknown", lambda p, w: p.unregister_holder(99), UnknownHolder, r"^holder 99 is not registered$"),
    ("unregister-bool", lambda p, w: p.unregister_holder(True), UnknownHolder, r"^holder True is not registered$"),
    ("unregister-in-use", lambda p, w: p.unregister_holder(w.h1), HolderInUse, r"^holder 1 is named by allocation"),
    ("shrink-zero", lambda p, w: p.shrink_lease(w.h1, w.live, 0), InvalidBytes,
     r"^nbytes must be in \[1, 2\*\*63-1\], got 0$"),
    ("shrink-str", lambda p, w: p.shrink_lease(w.h1, w.live, "1"), InvalidBytes, r"^nbytes must be an int, got str$"),
    ("shrink-all", lambda p, w: p.shrink_lease(w.h1, w.live, 10), InvalidBytes, r"^allocation 1: giving back 10 B of "),
    ("shrink-more", lambda p, w: p.shrink_lease(w.h1, w.live, 11), InvalidBytes, r"leaves no lease; release it$"),
    ("shrink-unknown-holder", lambda p, w: p.shrink_lease(99, w.live, 1), UnknownHolder,
     r"^holder 99 is not registered$"),
    ("shrink-unknown", lambda p, w: p.shrink_lease(w.h1, 999, 1), UnknownAllocation, r"^allocation 999 was never"),
    ("shrink-retired", lambda p, w: p.shrink_lease(w.h1, w.gone, 1), InvalidTransition, r"already released"),
    ("shrink-foreign", lambda p, w: p.shrink_lease(w.h2, w.live, 1), ForeignHolder,
     r"^allocation 1 is held by holder 1"),
    ("shrink-provisional", lambda p, w: p.shrink_lease(w.h1, w.prov, 1), InvalidTransition, r"cannot shrink in state"),
    ("shrink-granted", lambda p, w: p.shrink_lease(w.h1, w.g_alloc, 1), InvalidTransition, r"that part settles it$"),
    ("shrink-pinned", lambda p, w: p.shrink_lease(w.h1, w.pinned, 1), PinnedVictim, r"is pinned; never shrunk$"),
    ("grow-zero", lambda p, w: p.grow_lease(w.h1, w.live, 0), InvalidBytes,
     r"^nbytes must be in \[1, 2\*\*63-1\], got 0$"),
    ("grow-str", lambda p, w: p.grow_lease(w.h1, w.live, "1"), InvalidBytes, r"^nbytes must be an int, got str$"),
    ("grow-unknown-holder", lambda p, w: p.grow_lease(99, w.live, 1), UnknownHolder, r"^holder 99 is not registered$"),
    ("grow-unknown", lambda p, w: p.grow_lease(w.h1, 999, 1), UnknownAllocation, r"^allocation 999 was never"),
    ("grow-retired", lambda p, w: p.grow_lease(w.h1, w.gone, 1), InvalidTransition, r"already released"),
    ("grow-foreign", lambda p, w: p.grow_lease(w.h2, w.live, 1), ForeignHolder, r"^allocation 1 is held by holder 1"),
    ("grow-provisional", lambda p, w: p.grow_lease(w.h1, w.prov, 1), InvalidTransition, r"cannot grow in state"),
    ("grow-granted", lambda p, w: p.grow_lease(w.h1, w.g_alloc, 1), InvalidTransition, r"that part settles it$"),
    # a grow is a charge, refused as a try-reserve of its bytes would be: past the headroom, behind a waiter (I13)
    ("grow-past-headroom", lambda p, w: p.grow_lease(w.h1, w.live, 10**9), CapacityDenied,
     r"^try-only: 1000000000 B more asked, \d+ B free, 0 waiting$"),
    ("grow-behind-waiter", lambda p, w: p.grow_lease(w.h1, w.other_live, 1), CapacityDenied, r", 1 waiting$"),
    # The ledger's own operations: refimpl's messages, whole (its hot paths re-run the full check on a miss).
    ("reserve-zero", lambda p, w: p.reserve(w.h1, w.a, Tier.DEVICE, 0, Role.KV), InvalidBytes,
     r"^nbytes must be in \[1, 2\*\*63-1\], got 0$"),
    ("reserve-float", lambda p, w: p.reserve(w.h1, w.a, Tier.DEVICE, 1.0, Role.KV), InvalidBytes,
     r"^nbytes must be an int, got float$"),
    ("commit-zero", lambda p, w: p.commit(w.h1, w.prov, 0), InvalidBytes, r"^nbytes must be in \[1, 2\*\*63-1\], got 0$"),
    ("commit-bool-holder", lambda p, w: p.commit(True, w.prov, 5), UnknownHolder, r"^holder True is not registered$"),
    ("cancel-bool-holder", lambda p, w: p.cancel(True, w.prov), UnknownHolder, r"^holder True is not registered$"),
    ("release-bool-holder", lambda p, w: p.release(True, w.live), UnknownHolder, r"^holder True is not registered$"),
    ("quarantine-negative", lambda p, w: p.quarantine(w.h1, w.live, -1), InvalidBytes,
     r"^released must be in \[0, 2\*\*63-1\], got -1$"),
    ("alias-empty-view", lambda p, w: p.register_alias(w.a, ""), InvalidArgument, r"^view must be a non-empty str, got ''$"),
    ("pool-empty", lambda p, w: p.register_authority("", Tier.DEVICE, 10), InvalidArgument,
     r"^pool must be a non-empty str, got ''$"),
    ("holder-empty", lambda p, w: p.register_holder(""), InvalidArgument, r"^holder name must be a non-empty str, got ''$"),
    ("holder-too-long", lambda p, w: p.register_holder("h" * (MAX_NAME + 1)), InvalidArgument,
     rf"^holder name must be at most {MAX_NAME} characters, got {MAX_NAME + 1}$"),
    ("reserve-unknown-holder", lambda p, w: p.reserve(99, w.a, Tier.DEVICE, 1, Role.KV), UnknownHolder,
     r"^holder 99 is not registered$"),
    ("reserve-bool-holder", lambda p, w: p.reserve(True, w.a, Tier.DEVICE, 1, Role.KV), UnknownHolder,
     r"^holder True is not registered$"),
]


@pytest.mark.parametrize("call, error, match", [pytest.param(c, e, m, id=i) for i, c, e, m in BAD])
@pytest.mark.parametrize("on", [False, True], ids=["contracts-off", "contracts-on"])
def test_invalid_composed_input_is_refused_unchanged(world: Any, call: Callable, error: type, match: str, on: bool) -> None:
    refused_unchanged(*world, call, error, match, on)


@pytest.fixture
def view_world() -> tuple[ProcessMemoryManager, Any]:
    """Model views in every state a view verb can meet (C4, C6, I9): bound, provisional, dropped, invalid."""
    pmm, w = make()

    def held(needs: tuple[tuple[int, int], ...]) -> int:
        tx = pmm.plan_tx(w.h1, needs)
        pmm.reserve_all(tx)
        return tx

    def committed(auth: int) -> tuple[int, int]:
        tx = held(((auth, 5),))
        view = pmm.publish_view(tx)
        pmm.execute_view(tx, view, 1)
        pmm.commit_tx(tx)
        return tx, view

    w.committed, w.shared = committed(w.a)
    assert pmm.remap_view(w.shared) == 2
    w.executing = held(((w.a, 5),))
    w.own = pmm.publish_view(w.executing)
    pmm.execute_view(w.executing, w.own, 1)
    pmm.execute_view(w.executing, w.shared, 2)
    w.published = held(((w.a, 5),))
    w.provisional = pmm.publish_view(w.published)
    w.reserving = pmm.plan_tx(w.h1, ((w.a, 5), (w.b, 5)))
    reserve_tx(pmm, w.reserving)  # one need of two held: the checkers' step alone
    _, w.dropped = committed(w.a)
    pmm.drop_view(w.dropped)
    lost = pmm.register_authority("gpu1", Tier.DEVICE, 100)
    _, w.lost_view = committed(lost)
    pmm.lose_device(lost)
    return pmm, w


VIEW_BAD: list[tuple[str, Callable[[ProcessMemoryManager, Any], Any], type, str]] = [
    ("publish-not-all-held", lambda p, w: p.publish_view(w.reserving), InvalidTransition, "publish"),
    ("publish-committed", lambda p, w: p.publish_view(w.committed), InvalidTransition, "already committed"),
    ("execute-stale-generation", lambda p, w: p.execute_view(w.published, w.shared, 1), StaleGeneration, "generation 2"),
    ("execute-future-generation", lambda p, w: p.execute_view(w.published, w.shared, 3), StaleGeneration,
     "generation 2"),
    ("execute-generation-zero", lambda p, w: p.execute_view(w.published, w.provisional, 0), InvalidArgument,
     "generation"),
    ("execute-lost-view", lambda p, w: p.execute_view(w.published, w.lost_view, 1), DeviceLost, "invalid"),
    ("execute-others-provisional", lambda p, w: p.execute_view(w.executing, w.provisional, 1), InvalidArgument,
     "provisional"),
    ("execute-twice", lambda p, w: p.execute_view(w.executing, w.own, 1), InvalidTransition, "already binds"),
    ("execute-dropped-view", lambda p, w: p.execute_view(w.published, w.dropped, 1), InvalidTransition, "dropped"),
    ("execute-unknown-view", lambda p, w: p.execute_view(w.published, 999, 1), UnknownView, "not known"),
    ("remap-in-use", lambda p, w: p.remap_view(w.shared), ViewInUse, r"execution\(s\)"),
    ("remap-lost-view", lambda p, w: p.remap_view(w.lost_view), DeviceLost, "invalid"),
    ("remap-bad-id", lambda p, w: p.remap_view("1"), InvalidArgument, "int id"),
    ("drop-in-use", lambda p, w: p.drop_view(w.shared), ViewInUse, r"execution\(s\)"),
    ("drop-provisional", lambda p, w: p.drop_view(w.provisional), InvalidTransition, "provisional"),
]


@pytest.mark.parametrize("call, error, match", [pytest.param(c, e, m, id=i) for i, c, e, m in VIEW_BAD])
@pytest.mark.parametrize("on", [False, True], ids=["contracts-off", "contracts-on"])
def test_invalid_view_input_is_refused_unchanged(view_world: Any, call: Callable, error: type, match: str,
                                                 on: bool) -> None:
    refused_unchanged(*view_world, call, error, match, on)


# --- the process quota per tier (I1, D6): refused input, and grants past the quota ------------------------------


@pytest.fixture
def quota_world() -> tuple[ProcessMemoryManager, Any]:
    """Two device ledgers (100 B and 50 B) under one 30 B device quota, 20 B of it charged; a host ledger has
    none."""
    pmm, w = make()
    w.c = pmm.register_authority("gpu1", Tier.DEVICE, 50, "cuda:1")
    pmm.set_process_quota(Tier.DEVICE, 30)
    w.live = lease(pmm, w.h1, w.a, 20)
    w.tx = pmm.plan_tx(w.h2, ((w.c, 11),))
    return pmm, w


QUOTA_BAD: list[tuple[str, Callable[[ProcessMemoryManager, Any], Any], type, str]] = [
    ("quota-tier-str", lambda p, w: p.set_process_quota("device", 40), InvalidArgument, r"^tier must be a Tier"),
    ("quota-negative", lambda p, w: p.set_process_quota(Tier.DEVICE, -1), InvalidBytes,
     r"^nbytes must be in \[0, 2\*\*63-1\], got -1$"),
    ("quota-float", lambda p, w: p.set_process_quota(Tier.DEVICE, 40.0), InvalidBytes, r"^nbytes must be an int"),
    ("quota-bool", lambda p, w: p.set_process_quota(Tier.DEVICE, True), InvalidBytes, r"^nbytes must be an int"),
    ("quota-below-charge", lambda p, w: p.set_process_quota(Tier.DEVICE, 19), CapacityDenied,
     r"^tier device: a 19 B process quota is below the 20 B it charges$"),
    # every grant path admits within the quota's room: 10 B left of 30 B, on either device ledger
    ("reserve-past-quota", lambda p, w: p.reserve(w.h1, w.c, Tier.DEVICE, 11, Role.KV), CapacityDenied,
     r"^tier device: 11 B asked, 10 B left of its 30 B process quota \(I1\)$"),
    ("submit-never-fits-quota", lambda p, w: p.submit(w.h1, w.c, 31), CapacityDenied,
     r"^tier device: 31 B can never fit its 30 B process quota \(I1\)$"),
    ("try-past-quota", lambda p, w: p.try_reserve(w.h1, w.c, 11), CapacityDenied, r"^try-only: 11 B asked, 10 B free"),
    ("grow-past-quota", lambda p, w: p.grow_lease(w.h1, w.live, 11), CapacityDenied,
     r"^try-only: 11 B more asked, 10 B free"),
    ("reserve-tx-past-quota", lambda p, w: reserve_tx(p, w.tx), CapacityDenied, r"^authority 3: 11 B asked, 10 B free"),
]


@pytest.mark.parametrize("call, error, match", [pytest.param(c, e, m, id=i) for i, c, e, m in QUOTA_BAD])
@pytest.mark.parametrize("on", [False, True], ids=["contracts-off", "contracts-on"])
def test_quota_input_and_grants_past_it_are_refused_unchanged(quota_world: Any, call: Callable, error: type, match: str,
                                                              on: bool) -> None:
    refused_unchanged(*quota_world, call, error, match, on)


def test_priorities_and_times_at_the_int64_bounds_are_accepted_and_their_trace_replays_clean() -> None:
    """The other side of the 64-bit cases above: the bounds themselves are legal, and a trace carries them."""
    from fuzz_harness import replayed

    pmm, buf = traced()
    a, h = pmm.register_authority("gpu0", Tier.DEVICE, 64), pmm.register_holder("kv")
    for p in (-(2**63), 2**63 - 1):
        pmm.claim(h, pmm.submit(h, a, 1, p))
    pmm.release(h, pmm.try_reserve(h, a, 1, 2**63 - 1))
    pmm.answer(h, pmm.press(h, a, 1, -(2**63), 2**63 - 1), (), 2**63 - 1)
    pmm.expire_pressure(pmm.press(h, a, 1, 2**63 - 1, 0), 2**63 - 1)
    report, lines = replayed(pmm, buf)
    assert report.ok, report
    assert b"9223372036854775807" in b"".join(lines) and b"-9223372036854775808" in b"".join(lines)

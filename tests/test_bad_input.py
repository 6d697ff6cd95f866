# Bad input to every public ProcessMemoryManager operation (STYLE 6, 8).
#
# Each case runs one action against a fixed world that holds one record in
# every interesting state (provisional, live, quarantined, retired, device-lost,
# terminated context, alias, open/closed allowances). The refimpl must raise
# the specific typed error, whose message names the problem, and leave the
# WHOLE abstract state exactly as it was; `spec.ledger.step` from the same
# abstract state must raise the same error type (the spec's validation order
# decides which check fires first, so a few cases combine two faults).

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import attrs
import pytest

from spec import ledger_actions as A
from spec.errors import (
    AllowanceExceeded,
    CapacityDenied,
    DeviceLost,
    ForeignHolder,
    GovernorError,
    IdentityMismatch,
    InvalidArgument,
    InvalidBytes,
    InvalidTransition,
    TierMismatch,
    UnknownAllocation,
    UnknownAllowance,
    UnknownAuthority,
    UnknownHolder,
)
from spec.ledger import step as spec_step
from spec.ledger_state import EMPTY
from spec.ledger_state import snapshot as spec_snapshot
from spec.types import MAX_BYTES, Role, Tier
from refimpl.verify.manager_adapter import method_name
from refimpl.manager import ProcessMemoryManager
from refimpl.verify.manager_hooks import abstract_ledger

DEV, HOST, KV = Tier.DEVICE, Tier.HOST, Role.KV

# --- the world ---------------------------------------------------------------------


def build_world(do: Callable[[Any], Any]) -> SimpleNamespace:
    """One record in each interesting state; `do` performs an action and returns its result."""
    w = SimpleNamespace()
    w.gpu = do(A.RegisterAuthority("gpu0", DEV, 1000))
    w.host = do(A.RegisterAuthority("host0", HOST, 1000))
    w.lost = do(A.RegisterAuthority("gpu1", DEV, 1000))
    w.term = do(A.RegisterAuthority("gpu2", DEV, 1000))
    w.uva = do(A.RegisterAlias(w.gpu, "uva"))
    w.lost_uva = do(A.RegisterAlias(w.lost, "uva"))
    w.h = do(A.RegisterHolder("alice"))
    w.g = do(A.RegisterHolder("bob"))
    w.prov = do(A.Reserve(w.h, w.gpu, DEV, 100, KV))
    w.live = do(A.Reserve(w.h, w.gpu, DEV, 200, Role.WEIGHTS))
    do(A.Commit(w.h, w.live, 150))
    w.quar = do(A.Reserve(w.h, w.gpu, DEV, 50, Role.STATE))
    do(A.Commit(w.h, w.quar, 50))
    do(A.Quarantine(w.h, w.quar, 20))  # 30 B stay charged
    w.retired = do(A.Reserve(w.h, w.gpu, DEV, 10, KV))
    do(A.Cancel(w.h, w.retired))
    w.lost_live = do(A.Reserve(w.h, w.lost, DEV, 100, KV))
    do(A.Commit(w.h, w.lost_live, 100))
    w.lost_prov = do(A.Reserve(w.h, w.lost, DEV, 10, KV))
    w.allow = do(A.OpenAllowance(w.h, w.gpu, 300))  # free 250, reserved 30, mapped 20
    do(A.ReserveGrowth(w.h, w.allow, 50))
    do(A.MapAllowance(w.h, w.allow, 20))
    w.allow_bob = do(A.OpenAllowance(w.g, w.gpu, 100))  # gpu0 promises 400 of 1000 B
    w.allow_host = do(A.OpenAllowance(w.h, w.host, 100))
    w.closed = do(A.OpenAllowance(w.h, w.host, 10))
    do(A.CloseAllowance(w.h, w.closed))
    w.allow_lost = do(A.OpenAllowance(w.h, w.lost, 100))
    do(A.ReserveGrowth(w.h, w.allow_lost, 20))
    do(A.LoseDevice(w.lost))
    do(A.LoseDevice(w.term))
    do(A.ConfirmTermination(w.term))
    return w  # gpu0: used 280 of 1000 (100 + 150 + 30)


def _refimpl_do(pmm: ProcessMemoryManager) -> Callable[[Any], Any]:
    def do(action: Any) -> Any:
        return getattr(pmm, method_name(action))(**attrs.asdict(action, recurse=False))
    return do


@pytest.fixture(scope="module")
def spec_world():
    state = EMPTY

    def do(action: Any) -> Any:
        nonlocal state
        state, result = spec_step(state, action)
        return result

    w = build_world(do)
    return w, state


@pytest.fixture
def world(spec_world):
    pmm = ProcessMemoryManager()
    w = build_world(_refimpl_do(pmm))
    assert w == spec_world[0]
    assert abstract_ledger(pmm) == spec_world[1]  # refimpl and spec start from the same state
    return pmm, w


# --- the cases -----------------------------------------------------------------------


@attrs.frozen
class Case:
    id: str
    make: Callable[[SimpleNamespace], Any]  # world -> spec action
    error: type[GovernorError]
    match: str


BAD_BYTES = [("zero", 0), ("negative", -1), ("huge", 2**63), ("bool", True), ("float", 8.0), ("str", "8")]


def bytes_cases(op: str, field: str, make: Callable[[SimpleNamespace, Any], Any], zero_ok: bool = False) -> list[Case]:
    return [Case(f"{op}-{field}-{label}", lambda w, v=v: make(w, v), InvalidBytes, rf"^{field} must be")
            for label, v in BAD_BYTES if not (zero_ok and v == 0)]


FOREIGN = r"holder \d+, not (?:holder )?\d+"  # refimpl: "not 2"; the spec names the kind: "not holder 2"
NOT_REGISTERED = "not registered"


def allocation_lookup_cases(op: str, make: Callable[[SimpleNamespace, Any, Any], Any]) -> list[Case]:
    """Holder / allocation lookups shared by commit, cancel, release, quarantine."""
    return [
        Case(f"{op}-unknown-holder", lambda w: make(w, 999, w.prov), UnknownHolder, NOT_REGISTERED),
        Case(f"{op}-holder-str", lambda w: make(w, str(w.h), w.prov), UnknownHolder, NOT_REGISTERED),
        Case(f"{op}-unknown-allocation", lambda w: make(w, w.h, 999), UnknownAllocation, "never issued"),
        Case(f"{op}-allocation-zero", lambda w: make(w, w.h, 0), UnknownAllocation, "never issued"),
        Case(f"{op}-allocation-bool", lambda w: make(w, w.h, True), UnknownAllocation, "never issued"),
        Case(f"{op}-retired-allocation", lambda w: make(w, w.h, w.retired), InvalidTransition, "already released"),
        Case(f"{op}-foreign-holder", lambda w: make(w, w.g, w.prov), ForeignHolder, FOREIGN),
        Case(f"{op}-foreign-before-lost", lambda w: make(w, w.g, w.lost_live), ForeignHolder, FOREIGN),  # I6 before C3
        Case(f"{op}-device-lost-live", lambda w: make(w, w.h, w.lost_live), DeviceLost, "lost device"),
        Case(f"{op}-device-lost-provisional", lambda w: make(w, w.h, w.lost_prov), DeviceLost, "lost device"),
    ]


def transition(event: str, state: str) -> str:
    return rf"{event}\W+in state\W+{state}"


def admission_cases(op: str, cls: type) -> list[Case]:
    """reserve and record_committed share shape, lookup, context and tier checks."""
    return bytes_cases(op, "nbytes", lambda w, v: cls(w.h, w.gpu, DEV, v, KV)) + [
        Case(f"{op}-tier-str", lambda w: cls(w.h, w.gpu, "device", 8, KV), InvalidArgument, "tier"),
        Case(f"{op}-tier-is-role", lambda w: cls(w.h, w.gpu, Role.KV, 8, KV), InvalidArgument, "tier"),
        Case(f"{op}-role-str", lambda w: cls(w.h, w.gpu, DEV, 8, "kv"), InvalidArgument, "role"),
        Case(f"{op}-role-is-tier", lambda w: cls(w.h, w.gpu, DEV, 8, Tier.DEVICE), InvalidArgument, "role"),
        Case(f"{op}-role-none", lambda w: cls(w.h, w.gpu, DEV, 8, None), InvalidArgument, "role"),
        Case(f"{op}-bytes-before-holder", lambda w: cls(999, w.gpu, DEV, 0, KV), InvalidBytes, "nbytes"),
        Case(f"{op}-unknown-holder", lambda w: cls(999, w.gpu, DEV, 8, KV), UnknownHolder, NOT_REGISTERED),
        Case(f"{op}-unknown-authority", lambda w: cls(w.h, 999, DEV, 8, KV), UnknownAuthority, NOT_REGISTERED),
        Case(f"{op}-authority-str", lambda w: cls(w.h, str(w.gpu), DEV, 8, KV), UnknownAuthority, NOT_REGISTERED),
        Case(f"{op}-authority-bool", lambda w: cls(w.h, True, DEV, 8, KV), UnknownAuthority, NOT_REGISTERED),
        Case(f"{op}-tier-mismatch", lambda w: cls(w.h, w.gpu, HOST, 8, KV), TierMismatch, r"\bhost\b"),
        Case(f"{op}-tier-mismatch-via-alias", lambda w: cls(w.h, w.uva, HOST, 8, KV), TierMismatch, r"\bhost\b"),
        Case(f"{op}-lost-device", lambda w: cls(w.h, w.lost, DEV, 8, KV), DeviceLost, r"\blost\b"),
        Case(f"{op}-lost-device-via-alias", lambda w: cls(w.h, w.lost_uva, DEV, 8, KV), DeviceLost, r"\blost\b"),
        Case(f"{op}-terminated-device", lambda w: cls(w.h, w.term, DEV, 8, KV), DeviceLost, "terminated"),
        Case(f"{op}-lost-before-tier", lambda w: cls(w.h, w.lost, HOST, 8, KV), DeviceLost, r"\blost\b"),
    ]


def allowance_lookup_cases(op: str, make: Callable[[SimpleNamespace, Any, Any], Any]) -> list[Case]:
    return [
        Case(f"{op}-unknown-holder", lambda w: make(w, 999, w.allow), UnknownHolder, NOT_REGISTERED),
        Case(f"{op}-unknown-allowance", lambda w: make(w, w.h, 999), UnknownAllowance, "never opened"),
        Case(f"{op}-allowance-str", lambda w: make(w, w.h, str(w.allow)), UnknownAllowance, "never opened"),
        Case(f"{op}-closed-allowance", lambda w: make(w, w.h, w.closed), InvalidTransition, "already closed"),
        Case(f"{op}-foreign-holder", lambda w: make(w, w.g, w.allow), ForeignHolder, FOREIGN),
    ]


CASES: dict[str, list[Case]] = {
    "register_authority": [
        Case("pool-empty", lambda w: A.RegisterAuthority("", DEV, 10), InvalidArgument, "pool"),
        Case("pool-none", lambda w: A.RegisterAuthority(None, DEV, 10), InvalidArgument, "pool"),
        Case("pool-int", lambda w: A.RegisterAuthority(5, DEV, 10), InvalidArgument, "pool"),
        Case("tier-str", lambda w: A.RegisterAuthority("p", "device", 10), InvalidArgument, "tier"),
        Case("tier-is-role", lambda w: A.RegisterAuthority("p", Role.KV, 10), InvalidArgument, "tier"),
        Case("tier-none", lambda w: A.RegisterAuthority("p", None, 10), InvalidArgument, "tier"),
        *bytes_cases("register_authority", "capacity", lambda w, v: A.RegisterAuthority("p", DEV, v)),
        Case("name-before-bytes", lambda w: A.RegisterAuthority("", DEV, 0), InvalidArgument, "pool"),
        Case("identity-mismatch-tier", lambda w: A.RegisterAuthority("gpu0", HOST, 1000), IdentityMismatch, "'gpu0'"),
        Case("identity-mismatch-capacity", lambda w: A.RegisterAuthority("gpu0", DEV, 999), IdentityMismatch, "'gpu0'"),
        Case("identity-mismatch-lost-pool", lambda w: A.RegisterAuthority("gpu1", DEV, 1), IdentityMismatch, "'gpu1'"),
    ],
    "register_alias": [
        Case("view-empty", lambda w: A.RegisterAlias(w.gpu, ""), InvalidArgument, "view"),
        Case("view-none", lambda w: A.RegisterAlias(w.gpu, None), InvalidArgument, "view"),
        Case("view-int", lambda w: A.RegisterAlias(w.gpu, 3), InvalidArgument, "view"),
        Case("of-missing-authority", lambda w: A.RegisterAlias(999, "uva"), UnknownAuthority, NOT_REGISTERED),
        Case("of-zero", lambda w: A.RegisterAlias(0, "uva"), UnknownAuthority, NOT_REGISTERED),
        Case("of-str", lambda w: A.RegisterAlias(str(w.gpu), "uva"), UnknownAuthority, NOT_REGISTERED),
        Case("of-bool", lambda w: A.RegisterAlias(True, "uva"), UnknownAuthority, NOT_REGISTERED),
        Case("view-before-authority", lambda w: A.RegisterAlias(999, ""), InvalidArgument, "view"),
    ],
    "register_holder": [
        Case("name-empty", lambda w: A.RegisterHolder(""), InvalidArgument, "holder name"),
        Case("name-none", lambda w: A.RegisterHolder(None), InvalidArgument, "holder name"),
        Case("name-bytes", lambda w: A.RegisterHolder(b"carol"), InvalidArgument, "holder name"),
    ],
    "reserve": [
        *admission_cases("reserve", A.Reserve),
        Case("over-limit", lambda w: A.Reserve(w.h, w.gpu, DEV, 721, KV), CapacityDenied, "available"),
        Case("over-limit-max-bytes", lambda w: A.Reserve(w.h, w.gpu, DEV, MAX_BYTES, KV), CapacityDenied, "available"),
        Case("over-limit-via-alias", lambda w: A.Reserve(w.h, w.uva, DEV, 721, KV), CapacityDenied, "available"),
        Case("tier-before-limit", lambda w: A.Reserve(w.h, w.gpu, HOST, 10**6, KV), TierMismatch, r"\bhost\b"),
        *[Case(f"alignment-{label}", lambda w, v=v: A.Reserve(w.h, w.gpu, DEV, 8, KV, v), InvalidArgument,
               rf"^alignment must be None or a power of two in \[1, 2\*\*62\], got {re.escape(repr(v))}$")
          for label, v in (("3", 3), ("zero", 0), ("negative", -4), ("2**63", 1 << 63), ("bool", True),
                           ("float", 8.0), ("str", "8"))],
        Case("alignment-before-limit", lambda w: A.Reserve(w.h, w.gpu, DEV, 721, KV, 12), InvalidArgument, "got 12"),
        Case("tier-before-alignment", lambda w: A.Reserve(w.h, w.gpu, HOST, 8, KV, 12), TierMismatch, r"\bhost\b"),
    ],
    "record_committed": admission_cases("record_committed", A.RecordCommitted),
    "commit": [
        *bytes_cases("commit", "nbytes", lambda w, v: A.Commit(w.h, w.prov, v)),
        *allocation_lookup_cases("commit", lambda w, h, a: A.Commit(h, a, 10)),
        Case("commit-live", lambda w: A.Commit(w.h, w.live, 150), InvalidTransition, transition("commit", "live")),
        Case("commit-quarantined", lambda w: A.Commit(w.h, w.quar, 10), InvalidTransition,
             transition("commit", "quarantined")),
        Case("beyond-reservation", lambda w: A.Commit(w.h, w.prov, 101), InvalidBytes, "reserved"),
        Case("beyond-reservation-max", lambda w: A.Commit(w.h, w.prov, MAX_BYTES), InvalidBytes, "reserved"),
        Case("lifecycle-before-bounds", lambda w: A.Commit(w.h, w.live, 10**6), InvalidTransition,
             transition("commit", "live")),
    ],
    "cancel": [
        *allocation_lookup_cases("cancel", lambda w, h, a: A.Cancel(h, a)),
        Case("cancel-live", lambda w: A.Cancel(w.h, w.live), InvalidTransition, transition("cancel", "live")),
        Case("cancel-quarantined", lambda w: A.Cancel(w.h, w.quar), InvalidTransition,
             transition("cancel", "quarantined")),
    ],
    "release": [
        *allocation_lookup_cases("release", lambda w, h, a: A.Release(h, a)),
        Case("release-provisional", lambda w: A.Release(w.h, w.prov), InvalidTransition,
             transition("release", "provisional")),
        Case("release-quarantined", lambda w: A.Release(w.h, w.quar), InvalidTransition,
             transition("release", "quarantined")),
    ],
    "quarantine": [
        *bytes_cases("quarantine", "released", lambda w, v: A.Quarantine(w.h, w.live, v), zero_ok=True),
        *allocation_lookup_cases("quarantine", lambda w, h, a: A.Quarantine(h, a, 0)),
        Case("quarantine-provisional", lambda w: A.Quarantine(w.h, w.prov, 0), InvalidTransition,
             transition("quarantine", "provisional")),
        Case("quarantine-quarantined", lambda w: A.Quarantine(w.h, w.quar, 0), InvalidTransition,
             transition("quarantine", "quarantined")),
        Case("released-beyond-charge", lambda w: A.Quarantine(w.h, w.live, 151), InvalidBytes, "charge"),
    ],
    "lose_device": [
        Case("unknown-authority", lambda w: A.LoseDevice(999), UnknownAuthority, NOT_REGISTERED),
        Case("authority-str", lambda w: A.LoseDevice(str(w.gpu)), UnknownAuthority, NOT_REGISTERED),
        Case("authority-none", lambda w: A.LoseDevice(None), UnknownAuthority, NOT_REGISTERED),
    ],
    "confirm_termination": [
        Case("unknown-authority", lambda w: A.ConfirmTermination(999), UnknownAuthority, NOT_REGISTERED),
        Case("authority-float", lambda w: A.ConfirmTermination(1.0), UnknownAuthority, NOT_REGISTERED),
        Case("active-context", lambda w: A.ConfirmTermination(w.gpu), InvalidTransition, "termination"),
        Case("active-context-via-alias", lambda w: A.ConfirmTermination(w.uva), InvalidTransition, "termination"),
    ],
    "open_allowance": [
        *bytes_cases("open_allowance", "limit", lambda w, v: A.OpenAllowance(w.h, w.gpu, v)),
        Case("unknown-holder", lambda w: A.OpenAllowance(999, w.gpu, 10), UnknownHolder, NOT_REGISTERED),
        Case("unknown-authority", lambda w: A.OpenAllowance(w.h, 999, 10), UnknownAuthority, NOT_REGISTERED),
        Case("lost-device", lambda w: A.OpenAllowance(w.h, w.lost, 10), DeviceLost, r"\blost\b"),
        Case("terminated-device", lambda w: A.OpenAllowance(w.h, w.term, 10), DeviceLost, "terminated"),
        Case("over-capacity", lambda w: A.OpenAllowance(w.h, w.gpu, 601), AllowanceExceeded, "promise"),
        Case("over-capacity-via-alias", lambda w: A.OpenAllowance(w.h, w.uva, 601), AllowanceExceeded, "promise"),
    ],
    "reserve_growth": [
        *bytes_cases("reserve_growth", "nbytes", lambda w, v: A.ReserveGrowth(w.h, w.allow, v)),
        *allowance_lookup_cases("reserve_growth", lambda w, h, a: A.ReserveGrowth(h, a, 1)),
        Case("beyond-limit", lambda w: A.ReserveGrowth(w.h, w.allow, 251), AllowanceExceeded, "free"),
    ],
    "map_allowance": [
        *bytes_cases("map_allowance", "nbytes", lambda w, v: A.MapAllowance(w.h, w.allow, v)),
        *allowance_lookup_cases("map_allowance", lambda w, h, a: A.MapAllowance(h, a, 1)),
        Case("beyond-reserved", lambda w: A.MapAllowance(w.h, w.allow, 31), AllowanceExceeded, "reserved"),
    ],
    "unmap_allowance": [
        *bytes_cases("unmap_allowance", "nbytes", lambda w, v: A.UnmapAllowance(w.h, w.allow, v)),
        *allowance_lookup_cases("unmap_allowance", lambda w, h, a: A.UnmapAllowance(h, a, 1)),
        Case("beyond-mapped", lambda w: A.UnmapAllowance(w.h, w.allow, 21), InvalidBytes, "mapped"),
    ],
    "transfer_allowance": [
        *bytes_cases("transfer_allowance", "nbytes", lambda w, v: A.TransferAllowance(w.h, w.allow, w.allow_bob, v)),
        *allowance_lookup_cases("transfer_allowance", lambda w, h, a: A.TransferAllowance(h, a, w.allow_bob, 1)),
        Case("unknown-target", lambda w: A.TransferAllowance(w.h, w.allow, 999, 1), UnknownAllowance, "never opened"),
        Case("closed-target", lambda w: A.TransferAllowance(w.h, w.allow, w.closed, 1), InvalidTransition,
             "already closed"),
        Case("same-allowance", lambda w: A.TransferAllowance(w.h, w.allow, w.allow, 1), InvalidArgument,
             "same allowance"),
        Case("other-authority", lambda w: A.TransferAllowance(w.h, w.allow, w.allow_host, 1), InvalidArgument,
             "same allowance or"),
        Case("beyond-free", lambda w: A.TransferAllowance(w.h, w.allow, w.allow_bob, 251), AllowanceExceeded, "free"),
    ],
    "close_allowance": [
        *allowance_lookup_cases("close_allowance", lambda w, h, a: A.CloseAllowance(h, a)),
        Case("still-mapped", lambda w: A.CloseAllowance(w.h, w.allow), InvalidTransition, "unmap"),
    ],
}

PARAMS = [pytest.param(op, c, id=f"{op}:{c.id.removeprefix(op + '-')}") for op, cases in CASES.items() for c in cases]


def test_cases_cover_every_public_operation():
    public = {n for n, _ in inspect.getmembers(ProcessMemoryManager, inspect.isfunction) if not n.startswith("_")}
    # The composed parts' operations (issue #10) have their bad-input cases in tests/test_manager_bad_input.py.
    composed = {"submit", "claim", "cancel_ticket", "timeout_ticket", "acquire", "press", "open_pressure", "answer",
                "cancel_pressure", "expire_pressure", "try_reserve", "set_use", "reconfigure", "register_callback", "plan_tx", "commit_tx", "abort_tx",
                "reserve_all", "lower_limit", "open_bundle", "join_bundle",
                "report_mismatch", "remove_authority", "unregister_holder", "shrink_lease", "grow_lease", "set_process_quota",
                # model views: tests/test_manager_bad_input.py::test_invalid_view_input_is_refused_unchanged
                "publish_view", "execute_view", "remap_view", "drop_view"}
    # The cancellation mailbox and waiting (refimpl.manager.mailbox): tests/test_mailbox.py.
    pool = {"wait", "drop", "drain"}
    # The reads: snapshot below; leases and allowances in tests/test_manager_surface.py.
    assert public - {"snapshot", "leases", "allowances"} - composed - pool == set(CASES)


@pytest.mark.parametrize("op, case", PARAMS)
def test_invalid_input_is_refused_unchanged(world, op, case):
    pmm, w = world
    action = case.make(w)
    assert method_name(action) == op
    before = abstract_ledger(pmm)
    with pytest.raises(case.error, match=case.match) as exc:
        _refimpl_do(pmm)(action)
    assert type(exc.value) is case.error  # the specific error, not a subclass of it
    assert isinstance(exc.value, GovernorError)
    assert abstract_ledger(pmm) == before


@pytest.mark.parametrize("op, case", PARAMS)
def test_invalid_input_spec_raises_same_error(spec_world, op, case):
    w, state = spec_world
    with pytest.raises(GovernorError, match=case.match) as exc:
        spec_step(state, case.make(w))
    assert type(exc.value) is case.error


@pytest.mark.parametrize("error", sorted({c.error for _, c in (p.values for p in PARAMS)}, key=lambda e: e.__name__),
                         ids=lambda e: e.__name__)
def test_every_bad_input_error_is_a_governor_error(error):
    assert issubclass(error, GovernorError)


@pytest.mark.parametrize("authority", [999, 0, "1", None], ids=repr)
def test_invalid_snapshot_rejects_unknown_authority(world, authority):
    pmm, _ = world
    before = abstract_ledger(pmm)
    with pytest.raises(UnknownAuthority, match=NOT_REGISTERED):
        pmm.snapshot(authority)
    assert abstract_ledger(pmm) == before


@pytest.mark.parametrize("which", [
    "gpu", "host", "lost", "term", "uva",
])
def test_snapshot_spec_and_refimpl_agree(world, spec_world, which):
    pmm, w = world
    aid = getattr(w, which)
    assert pmm.snapshot(aid) == spec_snapshot(spec_world[1], aid)


def test_invalid_spec_snapshot_rejects_unknown_authority(spec_world):
    with pytest.raises(UnknownAuthority, match=NOT_REGISTERED):
        spec_snapshot(spec_world[1], 999)


# --- allowance growth on a lost device ---------------------------------------------
# C3's executable reading: "after loss new work fails". Growing or mapping an
# allowance maps memory on the device, so both are refused once it is lost.


@pytest.mark.parametrize("make", [
    pytest.param(lambda w: A.ReserveGrowth(w.h, w.allow_lost, 10), id="reserve_growth"),
    pytest.param(lambda w: A.MapAllowance(w.h, w.allow_lost, 10), id="map_allowance"),
])
def test_allowance_growth_rejects_lost_device(world, make):
    pmm, w = world
    before = abstract_ledger(pmm)
    with pytest.raises(DeviceLost, match=r"\blost\b"):
        _refimpl_do(pmm)(make(w))
    assert abstract_ledger(pmm) == before

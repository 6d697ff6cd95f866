"""Every public operation of `ProcessMemoryManager` is traced (#10 item 6), and a new untraced one fails here.

The manager's public methods are classified exhaustively: each mutating one either emits an event of its
own name in a schema'd revision (ledger, composed), or is a composite of traced operations (its events are
those operations'), or changes no state any spec describes (and emits nothing), or is a focused transaction
operation, which no revision carries and a traced manager refuses. A method added
to the manager without a place here fails `test_every_public_method_is_classified`; one classified as
traced that emits nothing fails `test_every_traced_method_is_recorded_by_a_workload`.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

import jsonschema
import pytest

from invariants.manager_trace import CONFIGURE, GRANT, MANAGER_KINDS, MANAGER_REVISION
from invariants.trace_schema import json_schema
from refimpl.manager import ProcessMemoryManager
from refimpl.manager_workload import run_manager_workload
from refimpl.verify.manager_adapter import STEPS
from refimpl.verify.manager_hooks import abstract_ledger, abstract_manager
from spec.types import Role, Tier
from trace_harness import traced

#: Methods that emit one event of their own name: revision -> names. A checker-only step (issue #21 item 2) is
#: no method: a public composite emits its kind, and the checkers reach it in `refimpl.verify.manager_adapter`.
TRACED = {
    "ledger and composed": frozenset(MANAGER_KINDS) - {GRANT} - set(STEPS),  # a grant: traced by its operation
}
#: Composites: what they emit is the events of the traced operations they are made of.
COMPOSITE = {
    "acquire": {"submit", "grant", "claim"},
    "lower_limit": {"prepare_limit", "commit_limit"},
    "reserve_all": {"reserve_tx"},
    "open_pressure": {"press"},
    "drain": {"cancel_ticket"},  # applies the cancels `drop` posted, one composed event each
}
#: No state any spec describes changes: a read, waiting, callback registration, and `drop` (a lock-free post
#: whose effect is traced when it is applied: a `cancel_ticket` event). The checkers' and the recorder's hooks
#: (refinement mappings, the ledger lock, recorder wiring) are no public methods (`refimpl.verify.manager_hooks`).
UNTRACED = frozenset({"snapshot", "leases", "allowances", "wait", "register_callback", "drop"})


def _public() -> set[str]:
    return {n for n in dir(ProcessMemoryManager) if not n.startswith("_")}


def test_every_public_method_is_classified() -> None:
    traced = set().union(*TRACED.values())
    groups = [traced, set(COMPOSITE), set(UNTRACED)]
    assert sum(len(g) for g in groups) == len(set().union(*groups)), "a method is classified twice"
    unclassified = _public() - set().union(*groups)
    assert not unclassified, f"public methods with no trace classification (add an event kind): {unclassified}"
    assert not set().union(*groups) - _public(), "classified methods the manager does not have"


def test_every_checker_only_step_is_a_traced_kind_a_public_composite_emits() -> None:
    assert set(STEPS) <= set(MANAGER_KINDS) - {GRANT}, "a checker-only step that the trace does not carry"
    assert set(STEPS) <= set().union(*COMPOSITE.values()), "a checker-only step no public verb is made of"
    assert not set(STEPS) & _public(), "a checker-only step is still a public method"


def test_every_traced_kind_is_in_the_schema() -> None:
    defs = json_schema()["$defs"]
    for kind in MANAGER_KINDS:
        assert kind in defs["manager.kind"]["enum"], f"{MANAGER_REVISION} {kind} is not among its kinds"
        assert f"manager.{kind}" in defs, f"no schema entry for {MANAGER_REVISION} {kind}"


def _workload_kinds() -> set[tuple[str, str]]:
    pmm, buf = traced()
    run_manager_workload(pmm, seed=0)
    return {(json.loads(x)["contract_revision"], json.loads(x)["kind"]) for x in buf.getvalue().splitlines()}


def test_every_traced_method_is_recorded_by_a_workload() -> None:
    """The method really emits its event: the `ortmem trace` workloads record each one."""
    seen = {kind for _, kind in _workload_kinds()}
    traced = set().union(*TRACED.values(), STEPS)
    assert traced - seen == set(), f"traced methods no workload recorded: {sorted(traced - seen)}"


def _setup() -> tuple[ProcessMemoryManager, io.StringIO, int, int]:
    p, buf = traced()
    h = p.register_holder("h")
    a = p.register_authority("pool", Tier.DEVICE, 64)
    return p, buf, h, a


def _composite(name: str) -> tuple[ProcessMemoryManager, io.StringIO, Callable[[], Any]]:
    p, buf, h, a = _setup()
    t = p.plan_tx(h, ((a, 8),)) if name == "reserve_all" else None
    if name == "drain":
        p.submit(h, a, 8, 0)
        p.drop(h, p.submit(h, a, 60, 0))  # pending
    return p, buf, {"acquire": lambda: p.acquire(h, a, 8, 0, Role.KV, 1.0), "lower_limit": lambda: p.lower_limit(a, 32),
                    "reserve_all": lambda: p.reserve_all(t), "open_pressure": lambda: p.open_pressure(h, a, 8),
                    "drain": p.drain}[name]


@pytest.mark.parametrize("name", sorted(COMPOSITE))
def test_composite_emits_the_events_of_its_parts(name: str) -> None:
    p, buf, call = _composite(name)
    before = len(buf.getvalue().splitlines())
    call()
    new = [json.loads(x) for x in buf.getvalue().splitlines()[before:]]
    # A manager's first composed event is preceded by the trace's `configure` event (its aging bound).
    assert {e["kind"] for e in new} - {CONFIGURE} == COMPOSITE[name], new
    validator = jsonschema.Draft202012Validator(json_schema())
    for e in new:
        validator.validate(e)


@pytest.mark.parametrize("name", sorted(UNTRACED))
def test_untraced_method_changes_no_spec_state_and_emits_nothing(name: str) -> None:
    p, buf, h, a = _setup()
    t = p.submit(h, a, 8, 0)  # granted at once
    before, n = (abstract_manager(p), abstract_ledger(p)), len(buf.getvalue())
    calls: dict[str, Callable[[], Any]] = {
        "snapshot": lambda: p.snapshot(a),
        "leases": lambda: p.leases(h),
        "allowances": lambda: p.allowances(h),
        "wait": lambda: p.wait(t, 0.01),
        "register_callback": lambda: p.register_callback(h, lambda *_: None),
        "drop": lambda: p.drop(h, t),  # granted: posted; applied (and traced) by the next operation
    }
    calls[name]()
    assert (abstract_manager(p), abstract_ledger(p)) == before, f"{name} changed spec state"
    assert len(buf.getvalue()) == n, f"{name} emitted an event"

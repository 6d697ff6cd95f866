"""invariants/manager_replay.py judged exactly where its mutation run (issue #26 item 4) found it unjudged.

Written from the survivors of `benchmarks/mutation.py --modules invariants/manager_replay.py`.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from invariants import InvariantViolation
from invariants.manager_replay import _leftover, _live, _shape, manager_ids, replay_manager_lines
from invariants.replay import ReplayResult
from invariants.trace_format import MAX_TEXT
from spec import ledger_actions as A
from spec import manager_actions as M
from spec.manager import apply
from spec.types import Role, Tier
from trace_harness import epoched, lines_of, renumbered, replaced, traced
from refimpl_manager_harness import lease

KEYS = frozenset({"outcome", "error", "result", "used", "charges", "bundles"})  # every event's outcome keys


def test_a_kinds_shape_is_its_fields_id_keys_and_payload_keys() -> None:
    """Scalars are the fields neither a tuple (needs, victims) nor an enum (tier, role); the optional payload key
    (alignment) is left out of the required set only; every payload has its charges, a composed event's too."""
    assert _shape(A.Reserve) == (
        A.Reserve, (("holder", True), ("authority", True), ("tier", False), ("nbytes", True), ("role", False),
                    ("alignment", True)),
        frozenset({"holder", "authority"}), KEYS | {"tier", "nbytes", "role", "alignment"},
        KEYS | {"tier", "nbytes", "role"})
    assert _shape(M.PlanTx) == (
        M.PlanTx, (("holder", True), ("needs", False), ("priority", True), ("retry", True)),
        frozenset({"holder", "retry"}), KEYS | {"needs", "priority"}, KEYS | {"needs", "priority"})
    assert _shape(A.RegisterAuthority) == (
        A.RegisterAuthority, (("pool", True), ("tier", False), ("capacity", True), ("device", True)),
        frozenset(), KEYS | {"pool", "tier", "capacity", "device"},
        KEYS | {"pool", "tier", "capacity", "device"})  # the device required in /2


def busy() -> M.Manager:
    """1 authority, 2 holders, 1 allowance, 3 provisional allocations (a reserve, ticket 1's grant, transaction 1's
    reservation), tickets 1 (granted) and 2 (pending), transactions 1 (holding) and 2 (holding none), pressure 1,
    a limit change pending on authority 1, and bundle 1."""
    m = M.initial()
    for act in (A.RegisterAuthority("gpu0", Tier.DEVICE, 1000), A.RegisterHolder("a"), A.RegisterHolder("b"),
                A.OpenAllowance(1, 1, 10), A.Reserve(1, 1, Tier.DEVICE, 10, Role.KV), M.Submit(1, 1, 20),
                M.PlanTx(1, ((1, 30),)), M.ReserveTx(1), M.PlanTx(2, ((1, 5),)), M.Submit(2, 1, 950),
                M.Press(2, 1, 100), M.PrepareLimit(1, 900), M.OpenBundle()):
        m = apply(m, act)
    return m


def test_live_counts_every_record_check_all_reads() -> None:
    """3 allocations + 1 allowance + 1 authority + 2 holders + 2 tickets + 1 pressure + 2 transactions + 1 bundle."""
    assert _live(busy()) == 13
    assert _live(M.initial()) == 0


def test_the_id_map_asks_the_latest_state_which_ids_are_live() -> None:
    cur = {"m": M.initial()}
    ids = manager_ids(cur)
    kinds = ("authority", "holder", "allocation", "allowance", "ticket", "pressure", "tx", "bundle", "view")
    assert [ids.live(k, 1) for k in kinds] == [False] * 9
    cur["m"] = apply(busy(), M.PlanTx(1, ((1, 1),)))  # transaction 3: no ticket 3
    assert [ids.live(k, 1) for k in kinds] == [True] * 8 + [False]  # busy() publishes no view
    assert [ids.live(k, 2) for k in kinds] == [False, True, True, False, True, False, True, False, False]
    assert [ids.live(k, 3) for k in kinds] == [False, False, True, False, False, False, True, False, False]


def test_leftover_names_every_active_item_in_order_in_the_traces_numbering() -> None:
    """A granted ticket (not the pending one), a transaction holding a reservation (not the one holding none), an
    open pressure, a pending limit change, every provisional allocation and an allowance reserving growth, in that
    order, each by the id the trace bound to it (each kind its own, so a kind read through another's shows)."""
    m = apply(busy(), A.ReserveGrowth(1, 1, 4))
    ids = manager_ids({"m": m})
    for kind, spec, obs in (("ticket", 1, 51), ("tx", 1, 71), ("pressure", 1, 61), ("authority", 1, 11),
                            ("allocation", 1, 31), ("allocation", 2, 32), ("allocation", 3, 33), ("allowance", 1, 41)):
        ids.bind(kind, obs, spec)
    assert _leftover(m, ids) == ["ticket 51 granted and never claimed or cancelled",
                                 "transaction 71 still holds 1 reservation(s)", "pressure 61 still open",
                                 "limit change on authority 11 still pending", "allocation 31 still provisional",
                                 "allocation 32 still provisional", "allocation 33 still provisional",
                                 "allowance 41 still reserves 4 B of growth"]
    assert _leftover(M.initial(), ids) == []


# --- whole replay results on one pinned bundle trace -----------------------------------------------------------


def _kv_on_hbm() -> tuple[Any, io.StringIO, int, int]:
    """A traced manager with holder "kv" and a 64 B device authority "hbm": (manager, its trace, holder, authority)."""
    p, buf = traced()
    return p, buf, p.register_holder("kv"), p.register_authority("hbm", Tier.DEVICE, 64)


def configure_at(buf: io.StringIO, at: int | None) -> list[bytes]:
    """A refimpl trace with its configure event (written first) moved after its first `at` events (None: left
    out, for a ledger-only one), renumbered, in the topology epoch where it now stands: the layouts these tests pin."""
    lines = lines_of(buf)
    configure = json.loads(lines[0])
    del configure["topology_epoch"]
    moved = [*lines[1:at + 1], json.dumps(configure).encode() + b"\n", *lines[at + 1:]] if at is not None else lines[1:]
    return renumbered(epoched(moved))


def bundle_lines() -> list[bytes]:
    """register_holder, register_authority, configure, open_bundle, plan_tx, join_bundle, reserve_tx,
    commit_tx (line 8: the bundle advances to versions [1, 1, 1, 1]), report_mismatch (line 9: poisoned)."""
    p, buf, h, a = _kv_on_hbm()
    b = p.open_bundle()
    t = p.plan_tx(h, ((a, 8),))
    p.join_bundle(t, b)
    p.reserve_all(t)
    p.commit_tx(t)
    p.report_mismatch(b)
    return configure_at(buf, 2)


def edited(lines: list[bytes], line: int, edit: Any) -> list[bytes]:
    """`lines` with the event on 1-based `line` changed in place by `edit(event)`."""
    ev = json.loads(lines[line - 1])
    edit(ev)
    return replaced(lines, line - 1, ev)


def failed(events: int, failure: str, message: str, id: str | None = None) -> ReplayResult:
    return ReplayResult(False, events, events + 1, failure, id, message)


def put(where: str, key: str, value: Any) -> Any:
    """An edit setting `key` of the event itself (`where` "event"), or of its "ids" or "payload"."""
    def edit(ev: dict[str, Any]) -> None:
        (ev if where == "event" else ev[where])[key] = value
    return edit


def issued(new: int) -> Any:
    """An edit renumbering the allocation the event issues to `new`: its result, and its charge observed under it."""
    def edit(ev: dict[str, Any]) -> None:
        p = ev["payload"]
        if str(p["result"]) in p["charges"]:
            p["charges"] = {**{k: v for k, v in p["charges"].items() if k != str(p["result"])},
                            str(new): p["charges"][str(p["result"])]}
        p["result"] = new
    return edit


def test_the_pinned_bundle_trace_replays_clean() -> None:
    assert replay_manager_lines(bundle_lines()) == ReplayResult(True, 9, None, None, None, "no violation")


def test_a_bundle_figure_names_both_poisoned_flags() -> None:
    lines = bundle_lines()

    def poisoned(ev: dict[str, Any]) -> None:
        ev["payload"]["bundles"]["1"]["poisoned"] = True

    def versions(ev: dict[str, Any]) -> None:
        ev["payload"]["bundles"]["1"]["versions"] = [1, 1, 1, 0]

    assert replay_manager_lines(edited(lines, 8, poisoned)) == failed(7, "refinement", (
        "CommitTx(tx=1): the governor observed bundle 1 at versions [1, 1, 1, 1] (poisoned), "
        "the spec has [1, 1, 1, 1]"))
    assert replay_manager_lines(edited(lines, 9, versions)) == failed(8, "refinement", (
        "ReportMismatch(bundle=1): the governor observed bundle 1 at versions [1, 1, 1, 0] (poisoned), "
        "the spec has [1, 1, 1, 1] (poisoned)"))

    def healthy(ev: dict[str, Any]) -> None:
        ev["payload"]["bundles"]["1"]["poisoned"] = False

    assert replay_manager_lines(edited(lines, 9, healthy)) == failed(8, "refinement", (
        "ReportMismatch(bundle=1): the governor observed bundle 1 at versions [1, 1, 1, 1], "
        "the spec has [1, 1, 1, 1] (poisoned)"))
    assert replay_manager_lines(edited(lines, 8, versions)) == failed(7, "refinement", (
        "CommitTx(tx=1): the governor observed bundle 1 at versions [1, 1, 1, 0], the spec has [1, 1, 1, 1]"))


@pytest.mark.parametrize(("line", "act"), [(4, "OpenBundle()"), (8, "CommitTx(tx=1)"), (9, "ReportMismatch(bundle=1)")])
def test_an_event_that_changes_a_bundle_must_list_it(line: int, act: str) -> None:
    """The bundle an action opens, its transaction's, and the one it names are each looked at."""
    assert replay_manager_lines(edited(bundle_lines(), line, put("payload", "bundles", {}))) == failed(
        line - 1, "refinement", f"{act} changed bundle 1 but the event does not say so")


def renumbered_bundle_lines() -> list[bytes]:
    """bundle_lines() with the governor numbering the bundle 9 and the transaction 5 (the spec's 1 and 1)."""
    def renumber(ev: dict[str, Any]) -> None:
        ids, payload = ev["ids"], ev["payload"]
        for key, new in (("bundle", 9), ("tx", 5)):
            if ids.get(key) == 1:
                ids[key] = new
        if ev["kind"] in ("open_bundle", "plan_tx"):
            payload["result"] = 9 if ev["kind"] == "open_bundle" else 5
        if payload.get("bundles"):
            payload["bundles"] = {"9": payload["bundles"]["1"]}

    lines = bundle_lines()
    for n in range(4, 10):
        lines = edited(lines, n, renumber)
    return lines


def test_bundles_and_transactions_are_named_in_the_governors_numbering() -> None:
    """The governor numbers the bundle 9 and the transaction 5 (the spec's 1 and 1): a bundle the commit advanced
    left out, or observed at other versions, is named 9, as is the bundle a join names and does not observe, and the
    commit's transaction is looked up as the spec's."""
    lines = renumbered_bundle_lines()
    assert replay_manager_lines(lines) == ReplayResult(True, 9, None, None, None, "no violation")
    assert replay_manager_lines(edited(lines, 8, put("payload", "bundles", {}))) == failed(
        7, "refinement", "CommitTx(tx=5) changed bundle 9 but the event does not say so")
    assert replay_manager_lines(edited(lines, 6, put("payload", "bundles", {}))) == failed(
        5, "refinement", "JoinBundle(tx=5, bundle=9) names bundle 9 but the event does not observe it")

    def versions(ev: dict[str, Any]) -> None:
        ev["payload"]["bundles"]["9"]["versions"] = [1, 1, 1, 0]

    assert replay_manager_lines(edited(lines, 9, versions)) == failed(8, "refinement", (
        "ReportMismatch(bundle=9): the governor observed bundle 9 at versions [1, 1, 1, 0] (poisoned), "
        "the spec has [1, 1, 1, 1] (poisoned)"))


def test_a_second_report_of_a_poisoned_bundle_changes_nothing_but_must_still_list_it() -> None:
    """It names bundle 1 and changes nothing: as written (listing it) clean; left out, refused as named, not changed."""
    p, buf, _, _ = _kv_on_hbm()
    b = p.open_bundle()
    p.report_mismatch(b)
    p.report_mismatch(b)  # line 6
    lines = lines_of(buf)
    assert replay_manager_lines(lines) == ReplayResult(True, 6, None, None, None, "no violation")
    assert replay_manager_lines(edited(lines, 6, put("payload", "bundles", {}))) == failed(
        5, "refinement", "ReportMismatch(bundle=1) names bundle 1 but the event does not observe it")


# --- each malformed event, named in its whole message at its line -----------------------------------------------


def grant_lines() -> list[bytes]:
    """register_holder, register_authority, configure, submit (line 4: no alignment key), grant (line 5); no
    boundary, so a clean replay ends as leftover."""
    p, buf, h, a = _kv_on_hbm()
    p.submit(h, a, 8)
    return configure_at(buf, 2)


def drop(key: str) -> Any:
    def edit(ev: dict[str, Any]) -> None:
        del ev["payload"][key]
    return edit


def rejected(error: Any, result: Any = None) -> Any:
    def edit(ev: dict[str, Any]) -> None:
        ev["payload"].update(outcome="rejected", error=error, result=result)
    return edit


def boundary_with_payload(ev: dict[str, Any]) -> None:
    ev.update(kind="boundary", ids={})


ENVELOPE = ["contract_revision", "topology_epoch", "source", "source_sequence", "kind", "ids", "payload"]
TX_KEYS = ["bundles", "charges", "error", "outcome", "result", "used"]
GRANT = "a grant event records a grant the governor made: accepted"
READS = "replay reads 'ortmem-manager/2' only, "

# (label, trace, line, edit, failure, whole message)
REG_KEYS = ["bundles", "capacity", "charges", "device", "error", "outcome", "pool", "result", "tier", "used"]  # /2
MALFORMED = [
    ("envelope", bundle_lines, 7, put("event", "extra", 1), "malformed",
     f"envelope keys must be exactly {ENVELOPE}, got {sorted([*ENVELOPE, 'extra'])}"),
    ("revision", bundle_lines, 7, put("event", "contract_revision", "r" * 300), "unknown-revision",
     f"{READS}got {'r' * MAX_TEXT!r}"),
    ("revision-1", grant_lines, 5, put("event", "contract_revision", "ortmem-manager/1"), "unknown-revision",
     f"{READS}got 'ortmem-manager/1'"),  # retired: no grant event
    ("kind-int", bundle_lines, 7, put("event", "kind", 7), "malformed", "unknown event kind '7'"),
    ("kind-long", bundle_lines, 7, put("event", "kind", "k" * 300), "malformed",
     f"unknown event kind {'k' * MAX_TEXT!r}"),
    ("ids-list", bundle_lines, 7, put("event", "ids", []), "malformed", "ids and payload must be objects"),
    ("payload-list", bundle_lines, 7, put("event", "payload", []), "malformed", "ids and payload must be objects"),
    ("boundary-with-ids", bundle_lines, 7, put("event", "kind", "boundary"), "malformed",
     "a boundary event carries no ids and no payload"),
    ("boundary-with-payload", bundle_lines, 7, boundary_with_payload, "malformed",
     "a boundary event carries no ids and no payload"),
    ("configure", bundle_lines, 3, put("payload", "aging_bound", "x"), "malformed",
     "configure: aging_bound must be an integer in [1, 9223372036854775807], got 'x'"),
    ("ids-keys", bundle_lines, 7, put("ids", "bundle", 1), "malformed",
     "reserve_tx ids must be exactly ['tx'], got ['bundle', 'tx']"),
    ("payload-missing", bundle_lines, 7, drop("bundles"), "malformed",
     f"reserve_tx payload keys must be exactly {TX_KEYS}, got ['charges', 'error', 'outcome', 'result', 'used']"),
    ("charges-missing", bundle_lines, 7, drop("charges"), "malformed",  # a composed event observes charges too
     f"reserve_tx payload keys must be exactly {TX_KEYS}, got ['bundles', 'error', 'outcome', 'result', 'used']"),
    ("payload-extra", bundle_lines, 7, put("payload", "alignment", 8), "malformed",
     f"reserve_tx payload keys must be exactly {TX_KEYS}, got {['alignment', *TX_KEYS]}"),
    # a registration without its device is told why (C1); one missing another key is not
    ("device-missing", grant_lines, 2, drop("device"), "malformed",
     f"register_authority payload keys must be exactly {REG_KEYS}, got {[k for k in REG_KEYS if k != 'device']}; a "
     "registration names its physical device (C1)"),
    ("capacity-missing", grant_lines, 2, drop("capacity"), "malformed",
     f"register_authority payload keys must be exactly {REG_KEYS}, got {[k for k in REG_KEYS if k != 'capacity']}"),
    ("device-null", grant_lines, 2, put("payload", "device", None), "malformed",
     "accepted register_authority: payload.device must name the physical device the authority's bytes are on (C1: "
     "two books over one device are caught whatever their pools are called)"),
    ("field", bundle_lines, 5, put("payload", "needs", "x"), "malformed",
     "needs must be a list or an opaque marker"),
    ("enum-int", grant_lines, 4, put("payload", "role", 3), "malformed", "role 3 is not a Role"),
    ("result", bundle_lines, 7, put("payload", "result", "x"), "malformed",
     "result 'x' is not an id, a byte count, a list of ids or a limit outcome"),
    ("bundles", bundle_lines, 7, put("payload", "bundles", []), "malformed",
     "payload.bundles must be an object"),
    ("outcome", bundle_lines, 7, put("payload", "outcome", "maybe"), "malformed",
     "payload.outcome must be 'accepted' or 'rejected', got 'maybe'"),
    ("accepted-with-error", bundle_lines, 7, put("payload", "error", "CapacityDenied"), "malformed",
     "an accepted event carries no error"),
    ("rejected-without-error", bundle_lines, 7, rejected(None), "malformed",
     "a rejected event must name a spec error class, got None"),
    ("rejected-unknown-error", bundle_lines, 7, rejected("Nope"), "malformed",
     "a rejected event must name a spec error class, got 'Nope'"),
    ("rejected-category", bundle_lines, 7, rejected("CallerError"), "malformed",  # a base, never a refusal
     "a rejected event must name a spec error class, got 'CallerError'"),
    ("rejected-with-result", bundle_lines, 7, rejected("CapacityDenied", 1), "malformed",
     "a rejected event carries no result"),
    ("grant-rejected", grant_lines, 5, rejected("CapacityDenied"), "malformed", GRANT),
    ("used-list", bundle_lines, 7, put("payload", "used", []), "malformed", "payload.used must be an object"),
    ("used-5000", bundle_lines, 7, put("payload", "used", {str(i): 0 for i in range(5000)}), "unknown-id",
     "observed authority 0, which no event of this trace issued"),  # no count bound: judged by its ids
    ("used-key", bundle_lines, 7, put("payload", "used", {"x": 8}), "malformed",
     "payload.used keys must be integer ids"),
    ("used-value", bundle_lines, 7, put("payload", "used", {"1": "8"}), "malformed",
     "payload.used values must be integers"),
    ("charges-key", grant_lines, 2, put("payload", "charges", {"x": 8}), "malformed",  # a ledger operation's
     "payload.charges keys must be integer ids"),
]


def test_a_refused_registration_may_name_no_device() -> None:
    """Nothing was registered, so no device matters (C1): a registration the spec refuses too (capacity 0) with a
    null device replays clean, where an accepted one is malformed (MALFORMED's device-null)."""
    def refused(ev: dict[str, Any]) -> None:
        ev["payload"].update(outcome="rejected", error="InvalidBytes", result=None, device=None, capacity=0)

    assert replay_manager_lines(edited(grant_lines(), 2, refused)[:2]) == ReplayResult(
        True, 2, None, None, None, "no violation")


@pytest.mark.parametrize(("trace", "line", "edit", "failure", "message"), [c[1:] for c in MALFORMED],
                         ids=[c[0] for c in MALFORMED])
def test_a_malformed_event_fails_at_its_line_with_its_whole_message(trace: Any, line: int, edit: Any, failure: str,
                                                                    message: str) -> None:
    assert replay_manager_lines(edited(trace(), line, edit)) == failed(line - 1, failure, message)


def test_the_used_of_a_removed_authority_is_named_in_the_governors_numbering() -> None:
    """The spare authority issued as 7 (line 12) and removed (line 13): its used listed after is named 7."""
    lines = edited(edited(figures_lines(), 12, put("payload", "result", 7)), 13, put("ids", "authority", 7))
    assert replay_manager_lines(lines) == ReplayResult(True, 13, None, None, None, "no violation")
    assert replay_manager_lines(edited(lines, 13, put("payload", "used", {"7": 0}))) == failed(
        12, "unknown-id", "observed used of authority 7, which does not exist")


def test_used_figures_are_named_in_the_governors_numbering() -> None:
    """The authority issued as 4 (line 2): the grant's (line 5) wrong or missing used names authority 4."""
    lines = edited(edited(grant_lines(), 2, put("payload", "result", 4)), 4, put("ids", "authority", 4))
    lines = edited(edited(lines, 4, put("payload", "used", {"4": 0})), 5, put("payload", "used", {"4": 8}))
    assert replay_manager_lines(edited(lines, 5, put("payload", "used", {"4": 9}))) == failed(
        4, "refinement", "GrantTicket(ticket=1): the governor observed 9 B used on authority 4, the spec has 8 B")
    assert replay_manager_lines(edited(lines, 5, put("payload", "used", {}))) == failed(
        4, "refinement", "GrantTicket(ticket=1) changed used of authority 4 but the event does not say so")


def test_a_charge_is_named_in_the_governors_numbering() -> None:
    """The reserve (line 3) issues allocation 6 (the spec's 1), committed and released as 6 (line 5)."""
    lines = edited(edited(figures_lines(), 3, put("payload", "result", 6)), 3, observed("charges", {"6": 8}))
    lines = edited(edited(lines, 4, put("ids", "allocation", 6)), 4, observed("charges", {"6": 8}))
    lines = edited(lines, 5, put("ids", "allocation", 6))
    assert replay_manager_lines(lines) == ReplayResult(True, 13, None, None, None, "no violation")
    assert replay_manager_lines(edited(lines, 5, observed("charges", {"6": 0}))) == failed(
        4, "refinement", "Release(holder=1, allocation=6): the governor observed a charge of 0 B on allocation 6, the "
        "spec has no such allocation")


def test_a_wrong_charge_after_a_composed_event_names_the_specs_charge() -> None:
    """After a submit (no longer ledger-only, so no clause judges the figure first) the reserve (line 6) issues
    allocation 2 charged 16 B: a governor observing 15 B is told the spec's 16, not that the allocation is gone."""
    p, buf, h, a = _kv_on_hbm()
    p.submit(h, a, 8)
    p.reserve(h, a, Tier.DEVICE, 16, Role.KV)
    lines = configure_at(buf, 2)
    assert replay_manager_lines(edited(lines, 6, observed("charges", {"2": 15}))) == failed(
        5, "refinement", "Reserve(holder=1, authority=1, tier=Tier.DEVICE, nbytes=16, role=Role.KV): the governor "
        "observed a charge of 15 B on allocation 2, the spec has 16")


def test_a_whole_state_violation_is_named_with_its_id_at_the_whole_check_after_it(monkeypatch: Any) -> None:
    """check_all replaced by one that fails once a bundle exists: the bundle opens at line 4, and the whole-state
    check (once per as many events as the state holds records) next runs after line 6."""
    import invariants.manager_replay as replay

    def planted(m: M.Manager) -> None:
        if m.bundles:
            raise InvariantViolation("I10", "planted: a bundle's parts apart")

    monkeypatch.setattr(replay, "check_all", planted)
    assert replay_manager_lines(bundle_lines()) == failed(5, "violation", "I10: planted: a bundle's parts apart", "I10")


def test_a_violation_found_by_the_last_whole_check_is_named_in_the_traces_numbering(monkeypatch: Any) -> None:
    """check_all replaced by one that fails once the bundle is poisoned (line 9, the last event): only the whole-state
    check after the last event sees it, and names the bundle as the trace does (9), not as the spec does (1)."""
    import invariants.manager_replay as replay

    def planted(m: M.Manager) -> None:
        if any(b.poisoned for b in m.bundles.values()):
            raise InvariantViolation("I10", "planted: bundle 1 poisoned")

    monkeypatch.setattr(replay, "check_all", planted)
    assert replay_manager_lines(renumbered_bundle_lines()) == ReplayResult(
        False, 9, None, "violation", "I10", "I10: planted: bundle 9 poisoned")


def test_an_accepted_composed_event_states_its_result() -> None:
    assert replay_manager_lines(edited(grant_lines(), 4, put("payload", "result", None))) == failed(
        3, "refinement", "the governor issued ticket id None, not an integer")


def test_a_map_past_the_reserved_growth_is_the_spec_alternative_and_past_the_limit_is_refused() -> None:
    """D8: a governor may grow and map in one step (line 5 maps 15 B with 10 B reserved, within the 32 B limit)."""
    p, buf, h, a = _kv_on_hbm()
    w = p.open_allowance(h, a, 32)
    p.reserve_growth(h, w, 10)
    p.map_allowance(h, w, 10)
    lines = configure_at(buf, None)
    assert replay_manager_lines(edited(lines, 5, put("payload", "nbytes", 15))) == ReplayResult(
        True, 5, None, None, None, "no violation")
    assert replay_manager_lines(edited(lines, 5, put("payload", "nbytes", 40))) == failed(4, "violation", (
        "MapAllowance(holder=1, allowance=1, nbytes=40) was accepted but the spec refuses it: AllowanceExceeded: "
        "allowance 1: mapping 40 B, only 10 B reserved"), "I4b")


def test_a_transactions_commit_names_its_allocations_in_the_governors_numbering() -> None:
    """reserve_tx (line 7) issues allocation 5 in the governor's numbering (the spec's 1); commit_tx (line 8)
    returning [5] is the spec's (1,). An id the trace never issued is unbound: it names no spec object (the
    message shows both results in the trace's numbering)."""
    lines = edited(edited(bundle_lines(), 7, issued(5)), 8, put("payload", "charges", {"5": 8}))
    assert replay_manager_lines(edited(lines, 8, put("payload", "result", [5]))) == ReplayResult(
        True, 9, None, None, None, "no violation")
    assert replay_manager_lines(edited(lines, 8, put("payload", "result", [9]))) == failed(
        7, "refinement", "CommitTx(tx=1) returned (9,), the spec returns (5,)")


def test_a_limit_commit_returns_a_limit_outcome_naming_only_issued_pressures() -> None:
    lines = figures_lines()
    spec = "the spec returns LimitOutcome(committed=True, limit=40, completed=())"
    assert replay_manager_lines(edited(lines, 11, put("payload", "result", 5))) == failed(
        10, "refinement", f"CommitLimit(authority=1) returned 5, {spec}")
    outcome = {"committed": True, "limit": 40, "completed": [[9, 0]]}
    assert replay_manager_lines(edited(lines, 11, put("payload", "result", outcome))) == failed(
        10, "refinement", "CommitLimit(authority=1) returned LimitOutcome(committed=True, limit=40, "
        f"completed=((9, 0),)), {spec}")


def test_a_limit_commits_expected_outcome_is_named_in_the_governors_numbering() -> None:
    """The holder answers the limit's pressure by giving its lease back; the governor numbers that pressure 7 (the
    spec's 1): a wrong limit in the commit's outcome names both outcomes' pressures as the trace does."""
    p, buf, h, a = _kv_on_hbm()
    x = p.claim(h, p.submit(h, a, 48))
    p.register_callback(h, lambda m, pid, target: m.answer(h, pid, (x,)))
    p.lower_limit(a, 32)
    lines = edited(edited(lines_of(buf), 7, put("payload", "result", [7])), 8, put("ids", "pressure", 7))
    lines = edited(lines, 9, put("payload", "result", {"committed": True, "limit": 32, "completed": [[7, 48]]}))
    assert replay_manager_lines(lines) == ReplayResult(True, 9, None, None, None, "no violation")
    assert replay_manager_lines(edited(lines, 9, put("payload", "result", {"committed": True, "limit": 33,
                                                                         "completed": [[7, 48]]}))) == failed(
        8, "refinement", "CommitLimit(authority=1) returned LimitOutcome(committed=True, limit=33, completed=((7, 48),)), "
        "the spec returns LimitOutcome(committed=True, limit=32, completed=((7, 48),))")


def test_a_limit_preparations_wrong_pressure_count_is_counted_not_named_in_the_specs_ids() -> None:
    """The governor numbers ticket 1's allocation 5 (the spec's 1; lines 5-6) and prepare_limit (line 7) answers no
    pressure where the spec opens one: the spec's new pressure has no id in the trace's numbering, so the message
    counts it rather than showing the spec's own id."""
    p, buf, h, a = _kv_on_hbm()
    p.claim(h, p.submit(h, a, 48))
    p.lower_limit(a, 32)
    lines = edited(edited(lines_of(buf), 5, issued(5)), 6, put("payload", "result", 5))
    assert replay_manager_lines(edited(lines, 7, put("payload", "result", []))) == failed(
        6, "refinement", "PrepareLimit(authority=1, limit=32) returned 0 pressure id(s), the spec opens 1 (one per "
                         "holder it presses)")


def test_a_view_registration_may_answer_with_its_authoritys_id() -> None:
    """D12: the governor's register_alias (line 2) returns the canonical authority's id 1, not a new id 2."""
    p, buf = traced()
    p.register_alias(p.register_authority("hbm", Tier.DEVICE, 64), "um")
    lines = configure_at(buf, None)
    assert (json.loads(lines[1])["ids"], json.loads(lines[1])["payload"]["result"]) == ({"of": 1}, 2)
    assert replay_manager_lines(edited(lines, 2, put("payload", "result", 1))) == ReplayResult(
        True, 2, None, None, None, "no violation")


def test_an_opaque_id_excuses_any_caller_error_class() -> None:
    """The submit (line 4) refused with InvalidArgument: legal when its holder was written opaque (the trace cannot
    say what the governor saw), a refinement failure for a plain unknown id (the spec raises UnknownHolder)."""
    lines = grant_lines()[:4]

    def refused(holder: Any) -> Any:
        def edit(ev: dict[str, Any]) -> None:
            ev["ids"]["holder"] = holder
            ev["payload"].update(outcome="rejected", error="InvalidArgument", result=None)
        return edit

    assert replay_manager_lines(edited(lines, 4, refused({"opaque": "float"}))) == ReplayResult(
        True, 4, None, None, None, "no violation")
    assert replay_manager_lines(edited(lines, 4, refused(7))) == failed(3, "refinement", (
        "Submit(holder=7, authority=1, nbytes=8, priority=0, role=Role.STAGING) was rejected with InvalidArgument, "
        "the spec raises UnknownHolder: holder 7 is not registered"))


def test_an_optional_payload_key_may_be_present_or_absent() -> None:
    """The submit event (line 4) without its alignment key, or with it null, decodes alike (the trace then ends
    as leftover: no boundary after the grant)."""
    leftover = ReplayResult(False, 5, None, "leftover", None, "trace ended with active items and no declared "
                            "boundary: ticket 1 granted and never claimed or cancelled; allocation 1 still provisional")
    lines = grant_lines()
    assert "alignment" not in json.loads(lines[3])["payload"]
    assert replay_manager_lines(lines) == leftover
    assert replay_manager_lines(edited(lines, 4, put("payload", "alignment", None))) == leftover


# --- figures and results: each refinement named in its whole message ---------------------------------------------


def figures_lines() -> list[bytes]:
    """Ledger-format reserve (line 3), commit, release (line 5); configure; submit, grant (line 8: used 24),
    claim (line 9: allocation 2); prepare_limit (line 10), commit_limit (line 11: limit 40 with 24 B used);
    register_authority spare (2), remove_authority (line 13)."""
    p, buf, h, a = _kv_on_hbm()
    x = lease(p, h, a, 8)
    p.release(h, x)
    p.claim(h, p.submit(h, a, 24))
    p.lower_limit(a, 40)
    p.remove_authority(p.register_authority("spare", Tier.HOST, 64))
    return configure_at(buf, 5)  # configure written after the ledger-only prefix


def observed(key: str, value: Any) -> Any:
    def edit(ev: dict[str, Any]) -> None:
        ev["payload"][key] = value
    return edit


RESERVE = "Reserve(holder=1, authority=1, tier=Tier.DEVICE, nbytes=8, role=Role.KV)"
# (label, line, edit, failure, whole message, clause id)
FIGURES = [
    # Lines 1-5 are a ledger-only prefix (no composed event yet): every figure is observed, so a wrong one is named
    # by the clause the observed state breaks.
    ("used", 3, observed("used", {"1": 9}), "violation",
     f"I2: {RESERVE} was granted but charged 8 B (ledger moved 9 B): bytes granted without being charged", "I2"),
    ("charge", 3, observed("charges", {"1": 7}), "violation",
     f"I2: {RESERVE} was granted but charged 7 B (ledger moved 8 B): bytes granted without being charged", "I2"),
    ("charge-of-released", 5, observed("charges", {"1": 0}), "refinement",
     "Release(holder=1, allocation=1): the governor observed a charge of 0 B on allocation 1, the spec has no such "
     "allocation", None),
    ("used-missing", 8, put("payload", "used", {}), "refinement",
     "GrantTicket(ticket=1) changed used of authority 1 but the event does not say so", None),
    ("claim-result", 9, put("payload", "result", 3), "refinement",
     "the governor issued allocation id 3 for the object it already calls allocation 2: one object under two ids",
     None),
    ("prepare-result", 10, put("payload", "result", [5]), "refinement",
     "PrepareLimit(authority=1, limit=40) returned 1 pressure id(s), the spec opens 0 (one per holder it presses)",
     None),
    ("limit-below-use", 11, put("payload", "result", {"committed": True, "limit": 20, "completed": []}), "violation",
     "CommitLimit(authority=1): the governor committed limit 20 B with 24 B used: a lowered limit below use, with the "
     "old limit gone (C8)", "C8"),
    ("used-of-removed", 13, put("payload", "used", {"2": 0}), "unknown-id",
     "observed used of authority 2, which does not exist", None),
]


def test_the_figures_trace_replays_clean() -> None:
    assert replay_manager_lines(figures_lines()) == ReplayResult(True, 13, None, None, None, "no violation")


@pytest.mark.parametrize(("line", "edit", "failure", "message", "clause"), [c[1:] for c in FIGURES],
                         ids=[c[0] for c in FIGURES])
def test_a_wrong_figure_or_result_fails_at_its_line_with_its_whole_message(line: int, edit: Any, failure: str,
                                                                          message: str, clause: str | None) -> None:
    assert replay_manager_lines(edited(figures_lines(), line, edit)) == failed(line - 1, failure, message, clause)


# --- the trace as a whole: protocols, configure, the end ----------------------------------------------------------


def test_a_composed_trace_keeps_one_revision_and_one_configure_before_its_first_composed_event() -> None:
    lines = grant_lines()
    assert replay_manager_lines(renumbered([*lines[:3], lines[2], *lines[3:]])) == failed(
        3, "malformed", "a second configure event: a composed trace names its constants once")
    assert replay_manager_lines(renumbered([*lines[:2], *lines[3:]])) == failed(
        2, "unconfigured", "Submit(holder=1, authority=1, nbytes=8, priority=0, role=Role.STAGING) comes before any "
        "configure event: the trace does not say the manager's aging bound, so the spec cannot arbitrate it")


LEDGER_1 = {"contract_revision": "ortmem-ledger/1", "source": "g", "kind": "register_holder", "ids": {"result": 1},
            "payload": {"name": "kv", "outcome": "accepted", "error": None, "observed": {"used": {}, "charges": {}}}}


def test_an_event_of_the_retired_ledger_revision_is_refused_where_it_comes() -> None:
    """One revision for every manager event: an `ortmem-ledger/1` event is refused as unknown-revision, in an
    `ortmem-manager/2` trace at its line, and as a trace's first line."""
    lines = grant_lines()
    ledger = json.dumps({**LEDGER_1, "source": json.loads(lines[0])["source"], "source_sequence": 6}).encode()
    assert replay_manager_lines([*lines, ledger]) == failed(5, "unknown-revision", f"{READS}got 'ortmem-ledger/1'")
    assert replay_manager_lines([json.dumps({**LEDGER_1, "source_sequence": 1}).encode(), *lines]) == failed(
        0, "unknown-revision", f"{READS}got 'ortmem-ledger/1'")


def test_the_end_names_at_most_five_active_items_and_a_boundary_excuses_them() -> None:
    p, buf, h, a = _kv_on_hbm()
    for _ in range(3):
        p.submit(h, a, 8)  # each granted at once: three tickets and three provisional allocations left
    lines = lines_of(buf)
    granted = "; ".join(f"ticket {t} granted and never claimed or cancelled" for t in (1, 2, 3))
    assert replay_manager_lines(lines) == ReplayResult(False, 9, None, "leftover", None, (
        f"trace ended with active items and no declared boundary: {granted}; allocation 1 still provisional; "
        "allocation 2 still provisional"))
    last = json.loads(lines[-1])
    boundary = {**last, "source_sequence": last["source_sequence"] + 1, "kind": "boundary", "ids": {}, "payload": {}}
    assert replay_manager_lines([*lines, json.dumps(boundary).encode()]) == ReplayResult(
        True, 10, None, None, None, "no violation")


def test_the_whole_state_check_runs_once_per_as_many_events_as_the_state_holds_records(monkeypatch: Any) -> None:
    """Each whole check seen as (allocations, records): after an event once at least as many events passed since the
    last check as the state holds allocations and records (at least one), and once at the end."""
    import invariants.manager_replay as replay

    seen: list[tuple[int, int]] = []
    monkeypatch.setattr(replay, "check_all", lambda m: seen.append((len(m.ledger.allocations), _live(m))))
    assert replay_manager_lines(bundle_lines()).ok
    assert seen == [(0, 1), (0, 4), (1, 4)]
    seen.clear()
    assert replay_manager_lines(figures_lines()).ok
    assert seen == [(0, 1), (1, 3), (1, 3), (1, 3), (1, 3)]


def test_a_first_event_naming_an_allocation_no_event_issued_is_unknown() -> None:
    """The id map is asked whether allocation 1 is live before any state was recorded for it (no event yet)."""
    ev = {"contract_revision": "ortmem-manager/2", "topology_epoch": 0, "source": "g", "source_sequence": 1,
          "kind": "release", "ids": {"holder": "x", "allocation": 1},
          "payload": {"outcome": "accepted", "error": None, "result": None, "used": {}, "charges": {}, "bundles": {}}}
    assert replay_manager_lines([json.dumps(ev).encode()]) == failed(0, "unknown-id", (
        "Release(holder='x', allocation=1) was accepted but names allocation 1, which no event of this trace issued: "
        "an event is missing"))


def owed_lines(priority: int) -> list[bytes]:
    """A 64 B authority, 60 B reserved, ticket 1 (8 B) pending; the cancel (line 6) frees the room, so ticket 1's
    grant is owed; then a second submit of 8 B at `priority` (line 7) before ticket 1's grant (line 8), ticket 2's
    grant (line 9) and a boundary. Both fit: ticket 2 goes first only at a higher priority than ticket 1's 0."""
    p, buf, h, a = _kv_on_hbm()
    r = p.reserve(h, a, Tier.DEVICE, 60, Role.KV)
    p.submit(h, a, 8)
    p.cancel(h, r)
    p.submit(h, a, 8, priority=priority)
    events = [json.loads(line) for line in buf.getvalue().splitlines()]
    assert [ev["kind"] for ev in events[5:]] == ["cancel", "grant", "submit", "grant"]
    events[7]["payload"]["used"] = {str(a): 0}  # submitted before ticket 1's grant: the cancel left 0 B used
    events[5:8] = [events[5], events[7], events[6]]
    events.append({**events[-1], "kind": "boundary", "ids": {}, "payload": {}})
    return renumbered([json.dumps(ev).encode() + b"\n" for ev in events])


def test_a_grant_owed_after_an_event_may_come_later_but_no_newcomer_may_overtake_it() -> None:
    """Ticket 1's grant is owed from the cancel on; a later submit that leaves it first lets its grant come after
    (accepted), one that puts the newcomer ahead of it is refused at that submit, naming the submit."""
    assert replay_manager_lines(owed_lines(0)) == ReplayResult(True, 10, None, None, None, "no violation")
    assert replay_manager_lines(owed_lines(5)) == failed(6, "violation", (
        "Submit(holder=1, authority=1, nbytes=8, priority=5, role=Role.STAGING) put "
        "newcomer ticket 2 ahead of it: ticket 1 fit on authority 1 and was first in arbitration order, so its grant "
        "was owed before any newcomer or other reservation (I13)"), "I13")


def test_the_event_after_configure_asks_the_configured_state_which_ids_are_live() -> None:
    """A reserve right after the configure event (line 4) lists the charge of allocation 7, which no
    event issued: the id map asks the state the configure left whether 7 is live (no), so it is unknown."""
    p, buf, h, a = _kv_on_hbm()
    p.submit(h, a, 8)
    p.reserve(h, a, Tier.DEVICE, 4, Role.KV)
    events = [json.loads(line) for line in configure_at(buf, 2)]
    assert [ev["kind"] for ev in events] == ["register_holder", "register_authority", "configure", "submit", "grant",
                                             "reserve"]
    reserve = events[5]
    reserve["payload"].update(used={"1": 4}, charges={"2": 4, "7": 4}, result=2)
    lines = renumbered([json.dumps(ev).encode() + b"\n" for ev in [*events[:3], reserve]])
    assert replay_manager_lines(lines) == failed(3, "unknown-id", "observed allocation 7, which no event of this "
                                                                  "trace issued")


def test_an_id_reused_right_after_configure_is_judged_on_the_configured_state() -> None:
    """The configure event (line 3) stores its state for the id map: the next event's holder id 1, already holder
    kv's and live there, is refused as two objects on one id (not a crash on a state the map cannot read)."""
    p, buf, _, _ = _kv_on_hbm()
    p.register_holder("b")
    lines = configure_at(buf, 2)
    assert replay_manager_lines(lines) == ReplayResult(True, 4, None, None, None, "no violation")
    assert replay_manager_lines(edited(lines, 4, put("payload", "result", 1))) == failed(
        3, "refinement", "the governor issued holder id 1 for a new object, but 1 already names another holder (still "
        "live): two objects aliased onto one id")

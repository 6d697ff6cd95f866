"""Composed traces (#10 item 6): every part's events, replayed against `spec.manager`; lossy variants fail.

The workload (`refimpl.manager_workload`) drives the one `ProcessMemoryManager`
with a trace sink (every event in `ortmem-manager/2`); the replay (`invariants.manager_replay`) never
runs refimpl's code. A trace with one event removed, duplicated or reordered, or
with a figure changed, is rejected at the smallest bad prefix.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from invariants.manager_replay import replay_manager_lines
from invariants.manager_trace import CONFIGURE, LEDGER_ACTIONS, MANAGER_KINDS

from invariants.trace_schema import json_schema
from refimpl.cli import main
from refimpl.manager import ProcessMemoryManager
from refimpl.manager_workload import run_manager_workload
from invariants.contracts import contracts
from spec.errors import BundlePoisoned, InvalidArgument
from spec.guards import ALL_ON, GuardSet
from spec.types import Tier
from trace_harness import lines_of, renumbered as _renumbered, replaced, traced

SCHEMA = Path(__file__).resolve().parents[1] / "docs" / "trace-schema.json"


def _trace(seed: int = 0, operations: int = 300) -> list[bytes]:
    pmm, buf = traced()
    run_manager_workload(pmm, seed=seed, operations=operations)
    return lines_of(buf)


@pytest.fixture(scope="module")
def lines() -> list[bytes]:
    return _trace()


def _kinds(lines: list[bytes]) -> dict[str, int]:
    out: dict[str, int] = {}
    for raw in lines:
        k = json.loads(raw)["kind"]
        out[k] = out.get(k, 0) + 1
    return out


@pytest.fixture(scope="module")
def seeded() -> list[list[bytes]]:
    return [_trace(seed) for seed in range(4)]


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_composed_workload_replays_clean(seeded: list[list[bytes]], seed: int) -> None:
    lines = seeded[seed]
    r = replay_manager_lines(lines)
    assert r.ok, r.describe()
    assert r.events == len(lines)


# What the ledger-only workload (`ortmem trace --ledger`, gone with #21) drove, the one workload drives: each
# ledger and allowance verb refused for each cause a holder can give it (not only bad ids).
LEDGER_REFUSALS = [
    ("commit", "ForeignHolder"), ("commit", "InvalidBytes"), ("commit", "InvalidTransition"),
    ("cancel", "ForeignHolder"), ("cancel", "InvalidTransition"), ("release", "ForeignHolder"),
    ("release", "InvalidTransition"), ("quarantine", "ForeignHolder"), ("quarantine", "InvalidBytes"),
    ("quarantine", "InvalidTransition"), ("reserve", "TierMismatch"), ("reserve", "DeviceLost"),
    ("record_committed", "TierMismatch"), ("record_committed", "DeviceLost"), ("open_allowance", "AllowanceExceeded"),
    ("open_allowance", "DeviceLost"), ("map_allowance", "ForeignHolder"), ("map_allowance", "DeviceLost"),
    ("unmap_allowance", "ForeignHolder"), ("unmap_allowance", "InvalidBytes"), ("reserve_growth", "ForeignHolder"),
    ("reserve_growth", "DeviceLost"),
]


@pytest.mark.parametrize("kind, error", LEDGER_REFUSALS)
def test_the_workload_refuses_each_ledger_verb_for_each_cause(seeded: list[list[bytes]], kind: str,
                                                              error: str) -> None:
    said = [(ev["kind"], ev["payload"].get("error")) for lines in seeded for ev in map(json.loads, lines)]
    assert (kind, error) in said, f"no {kind} refused with {error} in the workload's seeds 0-3"


def test_the_workload_leases_through_the_alias_and_settles_allowances_a_loss_left_open(
        seeded: list[list[bytes]]) -> None:
    """Read from the traces alone: an accepted lease named through the alias (it charges the aliased ledger),
    and an allowance open when its device was lost, closed after the loss (by a holder or `settle`)."""
    through_alias = closed_after_loss = 0
    for lines in seeded:
        canon: dict[int, int] = {}
        lost: set[int] = set()
        open_on: dict[int, int] = {}
        at_loss: set[int] = set()
        for ev in map(json.loads, lines):
            kind, ids, p = ev["kind"], ev["ids"], ev["payload"]
            if kind == CONFIGURE or p["outcome"] != "accepted":
                continue
            a = canon.get(ids.get("authority"), ids.get("authority"))
            if kind == "register_alias":
                canon[p["result"]] = ids["of"]
            elif kind in ("reserve", "record_committed"):
                through_alias += ids["authority"] in canon
            elif kind == "open_allowance":
                open_on[p["result"]] = a
            elif kind == "lose_device" and a not in lost:
                lost.add(a)
                at_loss |= {w for w, on in open_on.items() if on == a}
            elif kind == "close_allowance":
                closed_after_loss += ids["allowance"] in at_loss
                open_on.pop(ids["allowance"], None)
    assert through_alias and closed_after_loss, (through_alias, closed_after_loss)


_PARTS = {
    "ledger": ("register_authority", "register_alias", "register_holder", "reserve", "commit", "cancel", "release",
               "quarantine", "record_committed"),
    "allowances": ("open_allowance", "reserve_growth", "map_allowance", "unmap_allowance", "transfer_allowance",
                   "close_allowance"),
    "tickets": ("submit", "grant", "claim", "cancel_ticket", "timeout_ticket", "try_reserve", "reconfigure"),
    "pressure": ("press", "answer", "cancel_pressure", "expire_pressure", "set_use", "shrink_lease", "grow_lease"),
    "transactions": ("plan_tx", "reserve_tx", "commit_tx", "abort_tx"),
    "bundles": ("open_bundle", "join_bundle", "report_mismatch"),
    "views": ("publish_view", "execute_view", "remap_view", "drop_view"),
    "device loss": ("lose_device", "confirm_termination", "remove_authority", "unregister_holder"),
    "limits": ("prepare_limit", "commit_limit", "set_process_quota"),
}


def test_parts_name_every_composed_kind() -> None:
    named = [k for ks in _PARTS.values() for k in ks]
    assert sorted(named) == sorted(MANAGER_KINDS) and len(set(named)) == len(named)


@pytest.fixture(scope="module")
def cli_trace(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    out = tmp_path_factory.mktemp("cli") / "t.jsonl"
    assert main(["trace", str(out)]) == 0
    return out.read_text().splitlines()


@pytest.mark.parametrize("part", sorted(_PARTS))
def test_composed_trace_names_every_part(cli_trace: list[str], part: str) -> None:
    """`ortmem trace` (defaults) records every event kind of every part, accepted at least once."""
    accepted: dict[str, int] = {}
    for line in cli_trace:
        ev = json.loads(line)
        assert ev["kind"] in MANAGER_KINDS or ev["kind"] == CONFIGURE
        if ev["kind"] != CONFIGURE and ev["payload"]["outcome"] == "accepted":
            accepted[ev["kind"]] = accepted.get(ev["kind"], 0) + 1
    missing = [k for k in _PARTS[part] if not accepted.get(k)]
    assert not missing, f"{part}: `ortmem trace` never recorded an accepted {missing}: {accepted}"


#: What the workload's random steps accept by luck (on main before its tour, each missed by some seed of 0-299 at 300
#: operations, or accepted only once): the tour accepts each whatever the seed, so the test above holds by construction.
TOURED = ("cancel", "quarantine", "record_committed", "transfer_allowance", "claim", "try_reserve", "reconfigure",
          "cancel_pressure", "expire_pressure", "set_use", "shrink_lease", "grow_lease", "report_mismatch")


def test_the_workload_accepts_with_no_random_step_what_random_steps_may_miss() -> None:
    pmm, buf = traced()
    run_manager_workload(pmm, operations=0)
    accepted = {ev["kind"] for ev in map(json.loads, lines_of(buf))
                if ev["kind"] != CONFIGURE and ev["payload"]["outcome"] == "accepted"}
    assert set(TOURED) - accepted == set()


def test_composed_events_match_the_schema(lines: list[bytes]) -> None:
    schema = json_schema()
    assert json.loads(SCHEMA.read_text()) == schema, "run `ortmem trace --write-schema`"
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for raw in lines:
        validator.validate(json.loads(raw))


def _accepted(lines: list[bytes], kind: str) -> int:
    """The index of the first accepted event of `kind` that some later event depends on."""
    for i, raw in enumerate(lines):
        ev = json.loads(raw)
        if ev["kind"] == kind and ev["payload"]["outcome"] == "accepted":
            return i
    raise AssertionError(f"no accepted {kind}")


@pytest.mark.parametrize("kind", ["submit", "reserve_tx", "prepare_limit", "press", "register_authority"])
def test_removed_event_is_rejected_at_the_next_line(lines: list[bytes], kind: str) -> None:
    i = _accepted(lines, kind)
    r = replay_manager_lines(lines[:i] + lines[i + 1:])
    assert not r.ok
    assert r.failure == "sequence-gap" and r.line == i + 1, r.describe()


def test_duplicated_event_is_rejected_where_it_repeats(lines: list[bytes]) -> None:
    i = _accepted(lines, "claim")
    r = replay_manager_lines(lines[:i + 1] + [lines[i]] + lines[i + 1:])
    assert not r.ok and r.failure == "duplicate-sequence" and r.line == i + 2, r.describe()


def test_reordered_events_are_rejected_at_the_first_out_of_order_line(lines: list[bytes]) -> None:
    i = _accepted(lines, "answer")
    swapped = lines[:i - 1] + [lines[i], lines[i - 1]] + lines[i + 1:]
    r = replay_manager_lines(swapped)
    assert not r.ok and r.line == i, r.describe()


def test_removed_event_renumbered_is_still_caught_by_the_spec(lines: list[bytes]) -> None:
    """An emitter that drops an event and renumbers: the spec itself notices what is missing."""
    i = _accepted(lines, "submit")
    r = replay_manager_lines(_renumbered(lines[:i] + lines[i + 1:]))
    assert not r.ok and r.failure in ("unknown-id", "refinement", "violation"), r.describe()
    assert r.line is not None and r.line > i


def test_changed_figure_is_refinement(lines: list[bytes]) -> None:
    """The first accepted composed event with a figure (a ledger-only prefix's wrong figure is named by the clause
    it breaks: tests/test_replay_harms.py)."""
    for i, raw in enumerate(lines):
        ev = json.loads(raw)
        if ev["contract_revision"] == "ortmem-manager/2" and ev["kind"] != CONFIGURE \
                and MANAGER_KINDS[ev["kind"]] not in LEDGER_ACTIONS \
                and ev["payload"]["outcome"] == "accepted" and ev["payload"]["used"]:
            aid = next(iter(ev["payload"]["used"]))
            ev["payload"]["used"][aid] += 1
            r = replay_manager_lines(replaced(lines, i, ev))
            assert not r.ok and r.failure == "refinement" and r.line == i + 1, r.describe()
            return
    raise AssertionError("no accepted event with a figure")


def test_changed_result_is_refinement(lines: list[bytes]) -> None:
    i = _accepted(lines, "cancel_ticket")
    ev = json.loads(lines[i])
    ev["payload"]["result"] = (ev["payload"]["result"] or 0) + 1
    r = replay_manager_lines(replaced(lines, i, ev))
    assert not r.ok and r.failure == "refinement" and r.line == i + 1, r.describe()


def test_truncated_trace_with_live_items_is_leftover(lines: list[bytes]) -> None:
    for i, raw in enumerate(lines):
        ev = json.loads(raw)
        if ev["kind"] == "reserve_tx" and ev["payload"]["outcome"] == "accepted":
            r = replay_manager_lines(lines[:i + 1])
            assert not r.ok and r.failure == "leftover", r.describe()
            return
    raise AssertionError("no accepted reserve_tx")


def test_cli_writes_and_replays_a_composed_trace(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    assert main(["trace", str(out), "--seed", "5"]) == 0
    revisions = {json.loads(line)["contract_revision"] for line in out.read_text().splitlines()}
    assert revisions == {"ortmem-manager/2"}  # one revision for every event, the ledger's operations included
    assert main(["replay", str(out)]) == 0
    text = out.read_text().splitlines()
    (tmp_path / "lossy.jsonl").write_text("\n".join(text[:3] + text[4:]) + "\n")
    assert main(["replay", str(tmp_path / "lossy.jsonl")]) == 1


def test_changed_ledger_figure_is_refinement(lines: list[bytes]) -> None:
    """Ledger operations are composed events too (`ortmem-manager/2`); their figures are checked."""
    for i, raw in enumerate(lines):
        ev = json.loads(raw)
        if ev["kind"] == "commit" and ev["payload"]["outcome"] == "accepted" and ev["payload"]["used"]:
            aid = next(iter(ev["payload"]["used"]))
            ev["payload"]["used"][aid] -= 1
            r = replay_manager_lines(replaced(lines, i, ev))
            assert not r.ok and r.failure == "refinement" and r.line == i + 1, r.describe()
            return
    raise AssertionError("no accepted commit with a figure")


def test_a_ledger_events_charge_in_a_composed_trace_is_judged_left_out_or_wrong(lines: list[bytes]) -> None:
    """`ortmem-manager/2` carries every operation's charges, a ledger operation's after composed events too (where no
    step of it grants): a reservation's new charge left out, or misreported, is refused at its line."""
    first = next(i for i, raw in enumerate(lines) if json.loads(raw)["kind"] in ("submit", "try_reserve"))
    for i, raw in enumerate(lines[first:], first):
        ev = json.loads(raw)
        if ev["kind"] == "reserve" and ev["payload"]["outcome"] == "accepted":
            rid = str(ev["payload"]["result"])
            assert ev["payload"]["charges"][rid] == ev["payload"]["nbytes"]
            ev["payload"]["charges"][rid] += 1
            r = replay_manager_lines(replaced(lines, i, ev))
            assert (r.ok, r.failure, r.line) == (False, "refinement", i + 1), r.describe()
            assert f"observed a charge of {ev['payload']['nbytes'] + 1} B on allocation {rid}" in r.message
            del ev["payload"]["charges"][rid]
            r = replay_manager_lines(replaced(lines, i, ev))
            assert (r.ok, r.failure, r.line) == (False, "refinement", i + 1), r.describe()
            assert f"charged allocation {rid} but the event does not say so" in r.message
            return
    raise AssertionError("no accepted reserve after the first composed event")


# --- state bundles (I5, I10) ---------------------------------------------------------------------------------


def _bundle_trace(guards: GuardSet = ALL_ON) -> list[bytes]:
    """Pinned: a bundle opened, joined, committed (advances), poisoned; a join and a commit it then refuses."""
    p, buf = traced(guards=guards)
    h, a = p.register_holder("kv"), p.register_authority("hbm", Tier.DEVICE, 64)
    b = p.open_bundle()
    t = p.plan_tx(h, ((a, 8),))
    p.join_bundle(t, b)
    p.reserve_all(t)
    p.commit_tx(t)  # line 8 (the configure event is line 1): the bundle's parts advance together
    t2 = p.plan_tx(h, ((a, 4),))
    p.join_bundle(t2, b)
    p.reserve_all(t2)
    p.report_mismatch(b)  # line 12: poisoned between join and commit
    with pytest.raises(BundlePoisoned):
        p.commit_tx(t2)
    p.abort_tx(t2)
    t3 = p.plan_tx(h, ((a, 4),))
    with pytest.raises(BundlePoisoned):
        p.join_bundle(t3, b)
    p.abort_tx(t3)
    return lines_of(buf)


def test_bundle_trace_replays_clean_and_reports_the_bundle() -> None:
    lines = _bundle_trace()
    r = replay_manager_lines(lines)
    assert r.ok and r.events == len(lines) == 17, r.describe()
    evs = [json.loads(x) for x in lines]
    assert [e["kind"] for e in evs][:9] == ["configure", "register_holder", "register_authority", "open_bundle",
                                            "plan_tx", "join_bundle", "reserve_tx", "commit_tx", "plan_tx"]
    assert evs[0]["payload"] == {"aging_bound": 4}
    assert evs[7]["payload"]["bundles"] == {"1": {"versions": [1, 1, 1, 1], "poisoned": False}}
    assert evs[11]["kind"] == "report_mismatch" and evs[11]["ids"] == {"bundle": 1}
    assert evs[12]["kind"] == "commit_tx" and evs[12]["payload"]["error"] == "BundlePoisoned"
    assert evs[15]["kind"] == "join_bundle" and evs[15]["payload"]["error"] == "BundlePoisoned"


def test_bundle_trace_events_match_the_schema() -> None:
    validator = jsonschema.Draft202012Validator(json_schema())
    for raw in _bundle_trace():
        validator.validate(json.loads(raw))


def _index(lines: list[bytes], kind: str, outcome: str = "accepted") -> int:
    return next(i for i, raw in enumerate(lines) if json.loads(raw)["kind"] == kind
                and json.loads(raw)["payload"]["outcome"] == outcome)


@pytest.mark.parametrize("kind", ["open_bundle", "join_bundle", "report_mismatch"])
def test_removed_bundle_event_is_rejected_at_the_next_line(kind: str) -> None:
    lines = _bundle_trace()
    i = _index(lines, kind)
    r = replay_manager_lines(lines[:i] + lines[i + 1:])
    assert not r.ok and r.failure == "sequence-gap" and r.line == i + 1, r.describe()


@pytest.mark.parametrize("kind,failure", [("open_bundle", "unknown-id"), ("join_bundle", "refinement"),
                                          ("report_mismatch", "refinement")])
def test_removed_bundle_event_renumbered_is_caught_by_the_spec(kind: str, failure: str) -> None:
    """An emitter that drops a bundle event and renumbers: the spec notices at the first event that depends on it."""
    lines = _bundle_trace()
    i = _index(lines, kind)
    r = replay_manager_lines(_renumbered(lines[:i] + lines[i + 1:]))
    assert not r.ok and r.failure == failure, r.describe()
    # open_bundle: the join the governor accepted names a bundle no event issued (line 5: the event was lost);
    # join_bundle: the commit advances no bundle in the spec, but the governor reports one (line 7);
    # report_mismatch: the spec commits what the governor refused (line 12).
    assert r.line == {"open_bundle": 5, "join_bundle": 7, "report_mismatch": 12}[kind], r.describe()


@pytest.mark.parametrize("kind", ["open_bundle", "join_bundle", "report_mismatch"])
def test_duplicated_bundle_event_is_rejected_where_it_repeats(kind: str) -> None:
    lines = _bundle_trace()
    i = _index(lines, kind)
    r = replay_manager_lines(lines[:i + 1] + [lines[i]] + lines[i + 1:])
    assert not r.ok and r.failure == "duplicate-sequence" and r.line == i + 2, r.describe()


@pytest.mark.parametrize("first,second", [("join_bundle", "reserve_tx"), ("reserve_tx", "commit_tx"),
                                          ("open_bundle", "plan_tx")])
def test_reordered_bundle_events_are_rejected_at_the_first_out_of_order_line(first: str, second: str) -> None:
    lines = _bundle_trace()
    i = _index(lines, first)
    assert json.loads(lines[i + 1])["kind"] == second
    r = replay_manager_lines(lines[:i] + [lines[i + 1], lines[i]] + lines[i + 2:])
    assert not r.ok and r.failure == "sequence-gap" and r.line == i + 1, r.describe()


def test_reordered_bundle_events_renumbered_are_caught_by_the_spec() -> None:
    """The mismatch moved before the commit it followed, renumbered: the moved event itself reports the bundle at
    the versions the commit gave it, which the spec has not reached: the first moved line is the bad prefix."""
    lines = _bundle_trace()
    i, j = _index(lines, "commit_tx"), _index(lines, "report_mismatch")
    moved = lines[:i] + [lines[j]] + lines[i:j] + lines[j + 1:]
    r = replay_manager_lines(_renumbered(moved))
    assert not r.ok and r.failure == "refinement" and r.line == i + 1, r.describe()


def test_changed_bundle_figure_is_refinement() -> None:
    lines = _bundle_trace()
    i = _index(lines, "commit_tx")
    ev = json.loads(lines[i])
    ev["payload"]["bundles"]["1"]["versions"][2] = 0
    r = replay_manager_lines(replaced(lines, i, ev))
    assert not r.ok and r.failure == "refinement" and r.line == i + 1, r.describe()
    ev["payload"]["bundles"] = {}  # the advance is not reported at all
    r = replay_manager_lines(replaced(lines, i, ev))
    assert not r.ok and r.failure == "refinement" and r.line == i + 1 and "does not say so" in r.message, \
        r.describe()


def test_rejected_event_the_spec_accepts_is_refinement(lines: list[bytes]) -> None:
    """A governor that refuses what the spec grants (a spurious CapacityDenied) fails at that event, not at the end."""
    i = next(i for i, raw in enumerate(lines)
             if (ev := json.loads(raw))["kind"] == "submit" and ev["payload"]["outcome"] == "accepted")
    ev = json.loads(lines[i])
    ev["payload"].update(outcome="rejected", error="CapacityDenied", result=None)
    r = replay_manager_lines(lines[:i] + [json.dumps(ev).encode() + b"\n"])
    assert not r.ok and r.failure == "refinement" and r.line == i + 1, r.describe()
    assert "rejected with CapacityDenied but the spec accepts it" in r.message


def test_governor_without_atomic_bundle_fails_replay_at_the_commit() -> None:
    """Negative control of I10 through the trace: only the KV part advances; replay finds it at the commit."""
    with contracts(on=False):  # the governor's own contracts would stop it first
        lines = _bundle_trace(GuardSet.without("atomic_bundle"))
    i = _index(lines, "commit_tx")
    r = replay_manager_lines(lines)
    assert not r.ok and r.failure == "refinement" and r.line == i + 1, r.describe()
    assert "[1, 0, 0, 0]" in r.message


@pytest.mark.parametrize("kind, field, value", [
    ("plan_tx", "needs", 5),  # a tuple field holding a bare int
    ("answer", "victims", 7),
    ("submit", "role", 1),  # an enum field holding an int
    ("submit", "role", None),  # an enum field holding null (the decoder takes a null scalar as itself)
    ("plan_tx", "needs", None),  # a tuple field holding null
    ("submit", "result", "1"),  # a result that is no id, byte count, list or limit outcome
    ("submit", "bundles", {"1": {"versions": [1]}}),  # a bundle record without its poisoned flag
    ("submit", "bundles", []),
])
def test_ill_typed_composed_field_is_malformed(lines: list[bytes], kind: str, field: str, value: object) -> None:
    """The decoder's shortcuts (an int scalar, a plain result, no bundles) never let an ill-typed value through."""
    i = _accepted(lines, kind)
    ev = json.loads(lines[i])
    ev["payload"][field] = value
    r = replay_manager_lines(replaced(lines, i, ev))
    assert not r.ok and r.failure == "malformed" and r.line == i + 1, r.describe()


def _two_ledger_loss() -> list[bytes]:
    """A transaction holding two ledgers, then the loss of the second (`lose_device` aborts it)."""
    pmm, buf = traced()
    a, b = pmm.register_authority("g0", Tier.DEVICE, 64), pmm.register_authority("g1", Tier.HOST, 32)
    pmm.reserve_all(pmm.plan_tx(pmm.register_holder("kv"), ((a, 8), (b, 4))))
    pmm.lose_device(b)
    pmm.confirm_termination(b)
    return buf.getvalue().encode().splitlines()


def test_a_loss_that_unwinds_a_two_ledger_transaction_lists_both_ledgers() -> None:
    """The loss of one ledger aborts a transaction holding another: the event observes both (issue #21)."""
    lines = _two_ledger_loss()
    loss = next(json.loads(x) for x in lines if json.loads(x)["kind"] == "lose_device")
    assert loss["payload"]["used"] == {"1": 0, "2": 4}
    r = replay_manager_lines(lines)
    assert r.ok, r.describe()


@pytest.mark.parametrize("used, says", [
    ({"1": 8, "2": 4}, "the governor observed 8 B used on authority 1"),  # the abort's credit on g0 misreported
    ({"2": 4}, "changed used of authority 1 but the event does not say so"),  # g0's credit left out
])
def test_a_loss_with_wrong_figures_is_rejected_at_its_line(used: dict, says: str) -> None:
    lines = _two_ledger_loss()
    i = _index(lines, "lose_device")
    ev = json.loads(lines[i])
    ev["payload"]["used"] = used
    r = replay_manager_lines([*lines[:i], json.dumps(ev).encode(), *lines[i + 1:]])
    assert not r.ok and r.failure == "refinement" and r.line == i + 1 and says in r.message, r.describe()


def _out_of_order(guards: GuardSet) -> list[bytes]:
    """A transaction declaring its needs highest authority first, reserved in full."""
    pmm, buf = traced(guards=guards)
    a1, a2 = pmm.register_authority("hbm", Tier.DEVICE, 64), pmm.register_authority("host", Tier.HOST, 64)
    tx = pmm.plan_tx(pmm.register_holder("engine"), ((a2, 8), (a1, 16)))
    pmm.reserve_all(tx)
    pmm.abort_tx(tx)
    return buf.getvalue().encode().splitlines()


def test_governor_without_ordered_reservation_fails_replay_at_the_first_reservation() -> None:
    """Negative control of C4 through the trace: the governor takes the declared order, not ascending ids."""
    assert replay_manager_lines(_out_of_order(ALL_ON)).ok
    with contracts(on=False):  # the governor's own contracts would stop it first
        lines = _out_of_order(GuardSet.without("ordered_reservation"))
    r = replay_manager_lines(lines)
    assert not r.ok and r.failure == "refinement" and r.line == _index(lines, "reserve_tx") + 1, r.describe()
    assert "0 B used on authority 1, the spec has 16 B" in r.message  # the lower id is the spec's first


#: An event of the focused transaction revision, retired with issue #21 (`ortmem-manager/2` carries transactions).
_RETIRED = {"contract_revision": "ortmem-tx/1", "source": "pmm-1", "kind": "tx_plan", "ids": {"holder": 1, "bundle": None,
            "retry": None}, "payload": {"needs": [[1, 8]], "priority": 0, "kind": "contiguous", "outcome": "accepted",
                                        "error": None, "result": 1, "observed": {"used": {"1": 0}}}}


@pytest.mark.parametrize("composed", [True, False])
def test_a_trace_in_the_retired_tx_revision_is_an_unknown_revision(tmp_path: Path, lines: list[bytes],
                                                                   composed: bool) -> None:
    """Read inside a composed trace or as the first line: refused where it appears, by name."""
    head = lines[:12] if composed else []
    assert any(json.loads(x)["contract_revision"] == "ortmem-manager/2" for x in head) is composed
    trace = [*head, json.dumps({**_RETIRED, "source_sequence": len(head) + 1}).encode() + b"\n"]
    r = replay_manager_lines(trace)
    assert not r.ok and (r.failure, r.line) == ("unknown-revision", len(head) + 1), r.describe()
    assert "'ortmem-tx/1'" in r.message
    (tmp_path / "t.jsonl").write_bytes(b"".join(trace))
    assert main(["replay", str(tmp_path / "t.jsonl"), "--json", str(tmp_path / "v.json")]) == 1
    v = json.loads((tmp_path / "v.json").read_text())
    assert (v["failure"], v["line"]) == ("unknown-revision", len(head) + 1)


def test_a_stated_alignment_is_judged_at_its_event() -> None:
    """D13: a request's alignment travels in its event; a bad one refused replays clean, accepted it is caught."""
    pmm, buf = traced()
    a, h = pmm.register_authority("g0", Tier.DEVICE, 64), pmm.register_holder("kv")
    t = pmm.submit(h, a, 8, alignment=64)
    leased = pmm.try_reserve(h, a, 8, alignment=256)
    for bad in (lambda: pmm.submit(h, a, 8, alignment=3), lambda: pmm.try_reserve(h, a, 8, alignment=6)):
        with pytest.raises(InvalidArgument, match="power of two"):
            bad()
    pmm.release(h, pmm.claim(h, t))
    pmm.release(h, leased)
    lines = buf.getvalue().encode().splitlines()
    stated = [json.loads(x)["payload"].get("alignment") for x in lines]
    # configure, the registers, the grant, the claim and the releases state none
    assert stated == [None, None, None, 64, None, 256, 3, 6, None, None, None], stated
    assert [json.loads(x)["payload"]["outcome"] for x in lines[6:8]] == ["rejected", "rejected"]
    r = replay_manager_lines(lines)
    assert r.ok, r.describe()
    i = 6
    ev = json.loads(lines[i])
    ev["payload"].update(outcome="accepted", error=None, result=2, used={"1": 16})
    r = replay_manager_lines([*lines[:i], json.dumps(ev).encode()])
    assert not r.ok and r.line == i + 1 and "InvalidArgument" in r.message, r.describe()

"""Observed figures required for every authority an event touches (issue #21 item 4).

In `ortmem-manager/2` an event lists the figures it touches (`invariants.manager_trace.touched`): `used` of every
authority it names or changes, the charge of the allocation it names and of every one it creates or charges, the
bundle it names, accepted or refused. Leaving one out is rejected at that line, naming it in the trace's own ids;
the same trace with it present replays clean. The upstream recordings were written in the retired `ortmem-ledger/1`
(figures that move only); their conversions list the rest (tests/conformance/converted/).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from trace_harness import ledger_event, replaced, replay_epoched, traced
from refimpl.manager_workload import run_manager_workload
from refimpl.tracing import boundary
from spec.errors import GovernorError
from spec.types import Role, Tier

CONVERTED = Path(__file__).resolve().parent / "conformance" / "converted"

# A 64 B pool, a 16 B lease, a pending 64 B submit and a refused 80 B reserve, then the release and the grant.
HAND = [
    json.dumps({"contract_revision": "ortmem-manager/2", "source": "g", "source_sequence": 1, "kind": "configure",
                "ids": {}, "payload": {"aging_bound": 4}}).encode() + b"\n",
    ledger_event(2, "register_authority", {"result": 7}, pool="p", tier="device", capacity=64, device="d"),
    ledger_event(3, "register_holder", {"result": 30}, name="kv"),
    ledger_event(4, "reserve", {"holder": 30, "authority": 7, "result": 500}, {"7": 16}, {"500": 16}, tier="device",
                 nbytes=16, role="kv"),
    ledger_event(5, "commit", {"holder": 30, "allocation": 500}, {"7": 16}, {"500": 16}, nbytes=16),
    ledger_event(6, "submit", {"holder": 30, "authority": 7, "result": 9}, {"7": 16}, nbytes=64, priority=0, role="kv"),
    ledger_event(7, "reserve", {"holder": 30, "authority": 7}, {"7": 16}, error="CapacityDenied", tier="device",
                 nbytes=80, role="kv"),
    ledger_event(8, "set_use", {"holder": 30, "allocation": 500}, {"7": 16}, {"500": 16}, pinned=False,
                 in_flight=False),
    ledger_event(9, "release", {"holder": 30, "allocation": 500}, {"7": 0}),
    ledger_event(10, "grant", {"ticket": 9, "result": 501}, {"7": 64}, {"501": 64}),
    ledger_event(11, "claim", {"holder": 30, "ticket": 9, "result": 501}, {"7": 64}),
    ledger_event(12, "release", {"holder": 30, "allocation": 501}, {"7": 0}),
]


def _drop(lines: list[bytes], i: int, figure: str, key: str) -> list[bytes]:
    ev = json.loads(lines[i])
    del ev["payload"][figure][key]
    return replaced(lines, i, ev)


def test_the_hand_trace_with_every_figure_replays_clean() -> None:
    r = replay_epoched(HAND)
    assert r.ok and r.events == len(HAND), r.describe()


@pytest.mark.parametrize(("i", "what"), [
    (5, "pending submit"),   # names authority 7, moves nothing
    (6, "refused reserve"),  # names authority 7; refused: observes no change (G4)
    (7, "set_use"),          # names allocation 500, whose authority is 7
    (10, "claim"),           # names ticket 9, whose authority is 7; the grant moved the bytes
])
def test_a_named_unmoved_authority_left_out_is_rejected_at_that_line(i: int, what: str) -> None:
    r = replay_epoched(_drop(HAND, i, "used", "7"))
    assert not r.ok and r.line == i + 1 and r.failure == "refinement", (what, r.describe())
    assert "names authority 7 but the event does not observe its used" in r.message, r.message


def test_a_named_allocations_charge_left_out_is_rejected() -> None:
    r = replay_epoched(_drop(HAND, 4, "charges", "500"))  # the commit names allocation 500: charge unmoved
    assert not r.ok and r.line == 5 and r.failure == "refinement", r.describe()
    assert "names allocation 500 but the event does not observe its charge" in r.message, r.message


def test_a_moved_figure_keeps_its_own_message() -> None:
    r = replay_epoched(_drop(HAND, 8, "used", "7"))  # the release moves 16 -> 0
    assert not r.ok and r.line == 9, r.describe()
    assert "changed used of authority 7 but the event does not say so" in r.message, r.message


def test_an_alias_registration_names_the_authority_it_aliases() -> None:
    alias = ledger_event(4, "register_alias", {"of": 7, "result": 8}, {"7": 0}, view="uma")
    assert replay_epoched([*HAND[:3], alias]).ok
    r = replay_epoched(_drop([*HAND[:3], alias], 3, "used", "7"))
    assert not r.ok and r.line == 4 and "names authority 7 but the event does not observe its used" in r.message, \
        r.describe()


def test_the_converted_alias_recording_states_the_figure_ledger_1_left_out() -> None:
    """min-alias.jsonl lists no `used` on its register_alias, which names authority 1; the conversion states the last
    observed one (0 since its registration), and without it the event is refused in the one revision."""
    lines = (CONVERTED / "min-alias.jsonl").read_bytes().splitlines(keepends=True)
    ev = json.loads(lines[1])
    assert ev["kind"] == "register_alias" and ev["ids"]["of"] == 1 and ev["payload"]["used"] == {"1": 0}
    assert replay_epoched(lines).ok
    ev["payload"]["used"] = {}
    r = replay_epoched([lines[0], json.dumps(ev).encode()])
    assert (r.ok, r.line, r.failure) == (False, 2, "refinement") and "does not observe its used" in r.message, r


# --- refimpl's own trace of a short composed run ------------------------------------------
# Each case below finds its event whatever the seed: the rare ones are the workload's tour's.


@pytest.fixture(scope="module")
def own() -> list[bytes]:
    pmm, buf = traced()
    run_manager_workload(pmm, seed=1, operations=600)
    lines = [x.encode() + b"\n" for x in buf.getvalue().splitlines()]
    r = replay_epoched(lines)
    assert r.ok, r.describe()
    return lines


def _authority(ev: dict[str, Any]) -> tuple[str, str] | None:
    a = ev["ids"].get("authority")  # the alias (4 in this run) owns no ledger: it names authority 1; 5 is the tour's
    return ("used", str(a)) if a != 4 and str(a) in ev["payload"]["used"] else None


def _allocation(ev: dict[str, Any]) -> tuple[str, str] | None:
    a = ev["ids"].get("allocation")
    return ("charges", str(a)) if str(a) in ev["payload"].get("charges", {}) else None


def _bundle(ev: dict[str, Any]) -> tuple[str, str] | None:
    b = ev["ids"].get("bundle")
    return ("bundles", str(b)) if str(b) in ev["payload"]["bundles"] else None


# (kind, outcome, the figure it names: which one to drop)
CASES: list[tuple[str, str, Callable[[dict[str, Any]], tuple[str, str] | None]]] = [
    ("submit", "accepted", _authority),
    ("reserve", "accepted", _authority),
    ("reserve", "rejected", _authority),
    ("try_reserve", "rejected", _authority),
    ("press", "accepted", _authority),
    ("prepare_limit", "accepted", _authority),
    ("reconfigure", "accepted", _authority),
    ("open_allowance", "accepted", _authority),
    ("commit", "accepted", _allocation),
    ("quarantine", "accepted", _allocation),
    ("set_use", "accepted", _allocation),  # a composed event names its allocation too
    ("join_bundle", "accepted", _bundle),
    ("report_mismatch", "accepted", _bundle),
]


@pytest.mark.parametrize(("kind", "outcome", "pick"), CASES, ids=[f"{k}-{o}" for k, o, _ in CASES])
def test_own_trace_with_a_named_figure_dropped_is_rejected_at_that_line(
        own: list[bytes], kind: str, outcome: str, pick: Callable[[dict[str, Any]], tuple[str, str] | None]) -> None:
    found = next(((i, f) for i, x in enumerate(own) if (ev := json.loads(x))["kind"] == kind
                  and ev["payload"].get("outcome") == outcome and (f := pick(ev)) is not None), None)
    assert found is not None, f"the run has no {outcome} {kind} listing the figure it names"
    i, (figure, key) = found
    r = replay_epoched(_drop(own, i, figure, key))
    assert not r.ok and r.line == i + 1 and r.failure == "refinement", r.describe()
    noun = {"used": "authority", "charges": "allocation", "bundles": "bundle"}[figure]
    assert f"{noun} {key} but the event does not" in r.message, r.message


#: Kinds whose accepted event creates an allocation (named by the id its result issues) or resizes the lease it
#: names: the charge it moved, which `touched` requires whether or not an argument names the allocation.
CREATES = ["grant", "reserve", "record_committed", "try_reserve", "reserve_tx"]
RESIZES = ["grow_lease", "shrink_lease"]


@pytest.mark.parametrize("kind", CREATES + RESIZES)
def test_own_trace_with_a_charge_the_event_moved_dropped_is_rejected(own: list[bytes], kind: str) -> None:
    """Issue #21 item 4: every allocation an event creates or charges is observed, a composed event's and a grant's
    too (before, only a ledger operation carried `charges`); left out, the event is refused at its line, naming the
    allocation in the trace's own ids."""
    def moved(ev: dict[str, Any]) -> str:
        return str(ev["payload"]["result"] if kind in CREATES else ev["ids"]["allocation"])

    found = next((i for i, x in enumerate(own) if (ev := json.loads(x))["kind"] == kind
                  and ev["payload"]["outcome"] == "accepted"), None)
    assert found is not None, f"the run has no accepted {kind}"
    ev = json.loads(own[found])
    key = moved(ev)
    assert key in ev["payload"]["charges"], f"refimpl's {kind} does not observe the charge it moved"
    r = replay_epoched(_drop(own, found, "charges", key))
    assert (r.ok, r.line, r.failure) == (False, found + 1, "refinement"), r.describe()
    assert f"charged allocation {key} but the event does not say so" in r.message, r.message


def _unmoved_named(lines: list[bytes]) -> dict[str, tuple[int, str]]:
    """Per event kind, the first event (line index, authority) that lists the `used` of an authority it names
    through a record (an allocation, victim, allowance, ticket, pressure, transaction or view) or a plan's needs, and
    did not move:
    read from the trace alone (which record is on which authority, and each authority's last observed `used`)."""
    canon: dict[int, int] = {}
    on: dict[str, dict[int, int]] = {"allocation": {}, "allowance": {}, "ticket": {}, "pressure": {}}
    needs: dict[int, list[int]] = {}
    views: dict[int, int] = {}
    last: dict[str, int] = {}
    out: dict[str, tuple[int, str]] = {}
    for i, raw in enumerate(lines):
        ev = json.loads(raw)
        kind, ids, p = ev["kind"], ev["ids"], ev["payload"]
        if kind in ("configure", "boundary"):
            continue
        res, ok = p["result"], p["outcome"] == "accepted"
        named: list[int] = []
        for f in ("allocation", "allowance", "ticket", "pressure"):
            if f in ids and ids[f] in on[f]:
                named.append(on[f][ids[f]])
        named += [on["allocation"][v] for v in p.get("victims") or () if v in on["allocation"]]
        if kind == "transfer_allowance":
            named += [on["allowance"][w] for w in (ids["source"], ids["target"]) if w in on["allowance"]]
        named += needs.get(ids.get("tx"), [])
        if kind == "plan_tx" and type(p["needs"]) is list:  # its needs name their authorities
            named += [n[0] for n in p["needs"] if type(n) is list and n]
        if p.get("view") in views:  # a model view is an argument, in the payload
            named.append(views[p["view"]])
        named = [canon.get(a, a) for a in named]
        hit = next((str(a) for a in named if str(a) in p["used"] and p["used"][str(a)] == last.get(str(a))), None)
        if hit is not None and kind not in out:
            out[kind] = (i, hit)
        last.update(p["used"])
        if not ok:
            continue
        a = canon.get(ids.get("authority"), ids.get("authority"))
        if kind == "register_alias":
            canon[res] = canon.get(ids["of"], ids["of"])
        elif kind in ("reserve", "try_reserve", "record_committed"):
            on["allocation"][res] = a
        elif kind == "submit":
            on["ticket"][res] = a
        elif kind == "grant":
            on["allocation"][res] = on["ticket"].get(ids["ticket"])
        elif kind == "open_allowance":
            on["allowance"][res] = a
        elif kind == "press":
            on["pressure"][res] = a
        elif kind == "prepare_limit":
            on["pressure"].update((pid, a) for pid in res)
        elif kind == "plan_tx":
            needs[res] = sorted({canon.get(x, x) for x, _ in p["needs"]})
        elif kind == "publish_view":
            views[res] = needs[ids["tx"]][0]  # over the transaction's lowest needed authority
    return out


THROUGH = ["plan_tx", "claim", "cancel_ticket", "timeout_ticket", "answer", "cancel_pressure", "expire_pressure",
           "commit", "quarantine", "set_use", "shrink_lease", "grow_lease", "map_allowance", "reserve_growth",
           "unmap_allowance", "close_allowance", "transfer_allowance", "reserve_tx", "commit_tx", "abort_tx",
           "join_bundle", "publish_view", "execute_view", "remap_view", "drop_view"]


@pytest.mark.parametrize("kind", THROUGH)
def test_own_trace_with_an_authority_named_through_a_record_or_a_need_dropped_is_rejected(own: list[bytes],
                                                                                          kind: str) -> None:
    found = _unmoved_named(own).get(kind)
    assert found is not None, f"the run has no {kind} naming an authority through a record it does not move"
    i, key = found
    r = replay_epoched(_drop(own, i, "used", key))
    assert not r.ok and r.line == i + 1 and r.failure == "refinement", r.describe()
    assert f"names authority {key} but the event does not observe its used" in r.message, r.message


def test_own_trace_with_a_transactions_bundle_dropped_is_rejected(own: list[bytes]) -> None:
    """An event naming a transaction that joined a bundle names that bundle: left out unmoved, refused."""
    joined: dict[int, str] = {}
    last: dict[str, Any] = {}
    for i, raw in enumerate(own):
        ev = json.loads(raw)
        b = joined.get(ev["ids"].get("tx"))
        bundles = ev["payload"].get("bundles", {})
        if ev["kind"] != "join_bundle" and b in bundles and bundles[b] == last.get(b):
            break
        last.update(bundles)
        if ev["kind"] == "join_bundle" and ev["payload"]["outcome"] == "accepted":
            joined[ev["ids"]["tx"]] = str(ev["ids"]["bundle"])
    else:
        raise AssertionError("the run has no event naming a joined transaction that leaves its bundle unmoved")
    r = replay_epoched(_drop(own, i, "bundles", b))
    assert not r.ok and r.line == i + 1 and r.failure == "refinement", r.describe()
    assert f"names bundle {b} but the event does not observe it" in r.message, r.message


def test_a_refused_answer_names_the_authority_of_its_victims() -> None:
    """A victim on another authority than the pressure's: the refused answer names both, and lists both."""
    p, buf = traced()
    h = p.register_holder("kv")
    a, b = p.register_authority("a", Tier.DEVICE, 64), p.register_authority("b", Tier.HOST, 64)
    lease = p.reserve(h, b, Tier.HOST, 8, Role.KV)
    p.commit(h, lease, 8)
    pid = p.press(h, a, 8)
    with pytest.raises(GovernorError):
        p.answer(h, pid, (lease,))
    boundary(p)  # the pressure stays open
    lines = [x.encode() + b"\n" for x in buf.getvalue().splitlines()]
    ev = json.loads(lines[-2])
    assert ev["kind"] == "answer" and ev["payload"]["outcome"] == "rejected" and str(b) in ev["payload"]["used"], ev
    assert replay_epoched(lines).ok
    r = replay_epoched(_drop(lines, len(lines) - 2, "used", str(b)))
    assert not r.ok and r.line == len(lines) - 1 and r.failure == "refinement", r.describe()
    assert f"names authority {b} but the event does not observe its used" in r.message, r.message

"""invariants/adapter.py pinned (its mutation run, benchmarks/mutation.py): the governor protocol, the renaming walk
over every id-bearing field kind (ids, maps, keys, pairs, components), `OwnIds`' binding of a foreign governor's ids
to the spec's, and the script a failure prints, whole."""

from __future__ import annotations

import enum
from typing import Any

import attrs
import immutables
import pytest

from invariants import adapter as AD
from invariants.adapter import RESULT_KINDS, OwnIds, SpecGovernor, Unmatched, rename, script
from invariants.manager_machine import ManagerSpecAdapter
from spec import ledger_actions as A
from spec import manager as MG
from spec import manager_actions as M
from spec import view_actions as V
from spec.errors import GovernorError
from spec.guards import ALL_ON, GuardSet
from spec.types import Role, Tier


@attrs.frozen
class Rec:
    id: int
    holder: int
    alias_of: int | None = None


@attrs.frozen
class Inner:
    holders: Any = immutables.Map()
    next_holder: int = 1


@attrs.frozen
class World:
    holders: Any = immutables.Map()
    uses: Any = immutables.Map()
    needs: Any = ()
    view: Any = None
    note: int = 0
    next_holder: int = 1
    inner: Inner = Inner()


def plus(k: str, x: Any) -> Any:
    return f"{k}:{x}"


def test_the_spec_as_a_governor_steps_with_its_guards() -> None:
    seen = []

    def step(s: int, a: int, g: Any) -> tuple[int, Any]:
        seen.append(g)
        return s + a, s
    g = SpecGovernor(step, 10, "guards")
    assert (g.execute(5), g.abstract(), g.execute(1), g.abstract(), seen) == (10, 15, 15, 16, ["guards", "guards"])


def test_rename_with_a_kind_renames_the_value_its_tuples_and_a_records_id() -> None:
    assert rename(7, plus, "holder") == "holder:7"
    assert rename((1, (2,)), plus, "tx") == ("tx:1", ("tx:2",))
    assert rename(None, plus, "tx") is None and rename(True, plus, "tx") is True and rename(False, plus, "tx") is False
    assert rename(Rec(1, 2, 3), plus, "allocation") == Rec("allocation:1", "holder:2", "authority:3")
    assert rename(Rec(1, 2, 3), plus) == Rec(1, "holder:2", "authority:3")  # no kind: the id is not renamed
    assert rename(5, plus) == 5  # no kind, not a record: as it is
    assert rename(Rec(1, 2, None), plus) == Rec(1, "holder:2", None)


def test_rename_walks_maps_keys_pairs_and_components() -> None:
    w = World(holders=immutables.Map({1: Rec(1, 2)}), uses={3: Rec(4, 5)}, needs=((6, 60), (7,), (), 8, [9]),
              view=11, note=12, next_holder=13, inner=Inner(immutables.Map({14: Rec(14, 15)}), 16))
    got = rename(w, plus)
    assert got == World(holders=immutables.Map({"holder:1": Rec("holder:1", "holder:2")}),
                        uses={"allocation:3": Rec(4, 5)},
                        needs=(("authority:6", 60), ("authority:7",), (), 8, [9]),
                        view="view:11", note=12, next_holder=13,
                        inner=Inner(immutables.Map({"holder:14": Rec("holder:14", "holder:15")}), 16))
    assert type(got.holders) is immutables.Map and type(got.uses) is dict
    odd = World(holders=None, uses=[1], needs=[(1, 2)], view=None, inner=None)  # not a map, a tuple, a record
    assert rename(odd, plus) is odd
    assert rename(World(), plus) == World()


def test_rename_returns_the_same_object_when_no_id_changes() -> None:
    bare = World(holders=None, uses=None, needs=None, view=3, inner=None)
    assert rename(bare, lambda k, x: x) is bare  # (a map or a pair tuple is rebuilt: a new object)
    r = Rec(1, 2)
    assert rename(r, lambda k, x: x, "allocation") is r and rename(r, lambda k, x: x) is r
    assert rename((1, 2), lambda k, x: x, "tx") == (1, 2)


def test_plans_are_read_from_the_field_names_once_per_class(monkeypatch: pytest.MonkeyPatch) -> None:
    plans: dict[type, Any] = {}
    monkeypatch.setattr(AD, "_PLANS", plans)
    rename(World(view=1), plus)
    assert plans == {World: (("holders", "map", "holder"), ("uses", "keys", "allocation"),
                             ("needs", "pairs", "authority"), ("view", "ids", "view"), ("inner", "record", None)),
                     Inner: (("holders", "map", "holder"),)}
    calls = []
    monkeypatch.setattr(AD, "_plan", lambda cls: calls.append(cls) or ())
    rename(World(view=2), plus)
    assert calls == []  # cached
    assert AD._PLANS[World][0] == ("holders", "map", "holder")


def test_the_plans_of_the_specs_records() -> None:
    assert AD._plan(int) == ()
    assert AD._plan(Rec) == (("id", "id", None), ("holder", "ids", "holder"), ("alias_of", "ids", "authority"))
    assert AD._plan(A.TransferAllowance) == (("holder", "ids", "holder"), ("source", "ids", "allowance"),
                                             ("target", "ids", "allowance"))
    assert AD._plan(A.RegisterAlias) == (("of", "ids", "authority"),)  # its `view` is a name
    assert AD._plan(M.Press) == (("holder", "ids", "holder"), ("authority", "ids", "authority"))
    assert AD._plan(M.Manager) == (
        ("ledger", "record", None), ("tickets", "map", "ticket"), ("pressures", "map", "pressure"),
        ("txs", "map", "tx"), ("changes", "map", "authority"), ("bundles", "map", "bundle"),
        ("uses", "keys", "allocation"), ("generations", "keys", "authority"), ("views", "map", "view"),
        ("intents", "map", "tx"))
    assert RESULT_KINDS[A.Reserve] == "allocation" and RESULT_KINDS[M.Submit] == "ticket"


def test_counters_come_from_the_specs_state_components_included() -> None:
    got = World(note=5, next_holder=2, inner=Inner(next_holder=3))
    want = World(note=6, next_holder=7, inner=Inner(next_holder=8))
    assert AD._counters(got, want) == World(note=5, next_holder=7, inner=Inner(next_holder=8))
    assert AD._counters(got, got) is got
    assert AD._counters(got, World(note=6, next_holder=2, inner=Inner(next_holder=3))) is got
    assert AD._counters(got, Inner()) is got and AD._counters(5, 6) == 5
    assert AD._counters(got, attrs.evolve(got, inner=Inner(next_holder=9))).inner == Inner(next_holder=9)
    assert AD._issued(World(next_holder=4, inner=Inner(next_holder=6))) == {"holder": 6}
    assert AD._issued(Inner(next_holder=4)) == {"holder": 4} and AD._issued(5) == {}
    assert AD._issued(attrs.evolve(World(), next_holder=None)) == {"holder": 1}


def test_pairings_try_every_binding_unless_there_are_too_many() -> None:
    assert AD._pairings(["a", "b"], [1, 2]) == [(("a", 1), ("b", 2)), (("b", 1), ("a", 2))]
    assert AD._pairings(["a"], [1, 2]) == [(("a", 1),)]
    assert AD._pairings(["a", "b", "c"], [1]) == [(("a", 1),), (("b", 1),), (("c", 1),)]
    assert AD._pairings([], [1]) == [()]
    six = list("abcdef")
    assert len(AD._pairings(six, list(range(6)))) == 720  # 6! == _MAX_TRIES: still every one
    seven = list("abcdefg")
    assert AD._pairings(seven, list(range(7))) == [tuple(zip(seven, range(7)))]
    assert len(AD._pairings(seven, [1])) == 7  # 7 ways, though 7! is past _MAX_TRIES: count the shorter side's
    assert AD._pairings(list("abcdefghij"), [1, 2, 3, 4]) == [(("a", 1), ("b", 2), ("c", 3), ("d", 4))]  # 5040
    assert len(AD._pairings(list("abcdefghij"), [1, 2])) == 90


def test_an_unmatched_id_names_itself() -> None:
    assert repr(Unmatched("ticket", 5)) == "<the governor's ticket 5: no ticket the spec issued>"
    assert repr(Unmatched("tx", "x")) == "<the governor's tx 'x': no tx the spec issued>"


# --- OwnIds against a governor with ids of its own ---------------------------------------------------------------


def own(kind: str, i: Any) -> Any:
    return 1000 - i if type(i) is int and i > 0 else i


def spec(kind: str, x: Any) -> Any:
    return 1000 - x if type(x) is int and 0 < x < 1000 else -x if type(x) is int else x


class Foreign:
    """The spec's manager behind the numbering `own` (a planted `skew`: one more on every holder id shown)."""

    def __init__(self, guards: GuardSet = ALL_ON) -> None:
        self.inner = ManagerSpecAdapter(guards)
        self.sent: list[Any] = []
        self.extra = "x"

    def execute(self, action: Any) -> Any:
        self.sent.append(action)
        return rename(self.inner.execute(rename(action, spec)), own, RESULT_KINDS.get(type(action)))

    def abstract(self) -> Any:
        return rename(self.inner.abstract(), own)

    def snapshot(self, authority: Any) -> Any:
        return Rec(authority, authority)


class Pair:
    """OwnIds over `gov`, stepped beside the spec as the machine steps it."""

    def __init__(self, gov: Any) -> None:
        self.spec = M.Manager()
        self.ids = OwnIds(gov, self.spec)

    def do(self, action: Any) -> tuple[Any, Any, Any]:
        try:
            want = MG.step(self.spec, action)
        except GovernorError:
            want = None
        try:
            raw = self.ids.execute(action)
        except GovernorError:
            raw = None
        out = self.ids.match(raw, action, *(want or (self.spec, None)))
        if want:
            self.spec = want[0]
        return raw, *out


def test_a_governor_with_the_specs_ids_keeps_the_identity_binding() -> None:
    p = Pair(ManagerSpecAdapter(ALL_ON))
    assert p.ids.want is p.spec and p.ids.identity and p.ids.gov_of == p.ids.spec_of == {}
    assert p.do(A.RegisterHolder("kv")) == (1, 1, p.spec)
    assert p.do(A.RegisterAuthority("hbm0", Tier.DEVICE, 8)) == (1, 1, p.spec)
    assert p.do(M.Submit(1, 1, 4, 0, Role.KV))[1] == 1
    assert p.ids.identity and p.ids.gov_of == p.ids.spec_of == {} and p.ids.want is p.spec
    assert p.ids.abstract() == p.spec
    assert p.do(A.Release(1, 9)) == (None, None, p.spec)  # refused, unchanged
    assert p.ids.identity


def test_a_foreign_governors_ids_are_bound_to_the_ones_the_spec_issued() -> None:
    g = Foreign()
    p = Pair(g)
    assert p.do(A.RegisterHolder("kv")) == (999, 1, p.spec)
    assert not p.ids.identity
    assert p.ids.spec_of == {"holder": {999: 1}, "authority": {}, "allocation": {}, "allowance": {}, "ticket": {},
                             "pressure": {}, "tx": {}, "bundle": {}, "view": {}}
    assert p.ids.gov_of["holder"] == {1: 999}
    assert p.do(A.RegisterAuthority("hbm0", Tier.DEVICE, 8)) == (999, 1, p.spec)
    raw, result, now = p.do(M.Submit(1, 1, 4, 0, Role.KV))
    assert (raw, result, now) == (999, 1, p.spec)
    assert g.sent[-1] == M.Submit(999, 999, 4, 0, Role.KV)  # the spec's ids, sent as the governor's
    assert p.ids.spec_of["ticket"] == {999: 1} and p.ids.spec_of["allocation"] == {999: 1}
    assert p.ids.abstract() == p.spec and p.ids.want is p.spec
    # the governor's own ids read back through its snapshot; other attributes pass through
    assert p.ids.snapshot(1) == Rec(999, 1)  # asked for the governor's authority 999, its holder named back
    assert p.ids.extra == "x"
    assert p.do(A.Release(1, 77)) == (None, None, p.spec)  # an allocation never issued: refused, unchanged


def test_a_snapshot_is_the_governors_own_while_its_ids_are_the_specs() -> None:
    class Same(ManagerSpecAdapter):
        def snapshot(self, authority: Any) -> Any:
            return ("snap", authority)
    ids = OwnIds(Same(ALL_ON), M.Manager())
    assert ids.snapshot(3) == ("snap", 3)


def test_an_id_the_spec_never_issued_goes_as_one_the_governor_never_issued() -> None:
    ids = OwnIds(Foreign(), M.Manager())
    ids.identity = False
    ids.spec_of = {"holder": {999: 1, 5: 2, -(10**18) - 5: 3}}
    ids.gov_of = {"holder": {1: 999, 2: 5}}
    assert ids.gov_id("holder", 1) == 999 and ids.gov_id("holder", 2) == 5
    assert ids.gov_id("holder", 7) == 7  # never issued by either
    assert ids.gov_id("holder", 999) == -(10**18) - 999  # the governor issued 999: another value
    assert ids.gov_id("tx", 5) == 5 and ids.gov_id("holder", "x") == "x"
    assert ids._spec_id("holder", 999) == 1 and ids._spec_id("holder", 4) == Unmatched("holder", 4)
    assert ids._spec_id("tx", 4) == Unmatched("tx", 4)


def test_a_collision_chain_is_walked_until_a_value_the_governor_never_issued() -> None:
    ids = OwnIds(Foreign(), M.Manager())
    ids.spec_of = {"holder": {7: 1, -(10**18) - 7: 2}}
    ids.gov_of = {"holder": {1: 7, 2: -(10**18) - 7}}
    assert ids.gov_id("holder", 3) == 3
    ids.spec_of["holder"][3] = 9
    assert ids.gov_id("holder", 3) == -(10**18) - 3
    ids.spec_of["holder"][-(10**18) - 3] = 10
    assert ids.gov_id("holder", 3) == -(10**18) - (10**18 + 3)


def test_a_foreign_id_handed_out_again_stays_unmatched() -> None:
    g = Foreign()
    p = Pair(g)
    p.do(A.RegisterHolder("kv"))
    g.execute = lambda a: 999  # the holder id it already gave holder 1
    g.abstract = lambda: rename(MG.step(p.spec, A.RegisterHolder("db"))[0],
                                lambda k, x: 999 if k == "holder" else own(k, x))
    raw, result, now = p.do(A.RegisterHolder("db"))
    assert raw == 999 and result == 1  # named as the spec's holder 1, not the new holder 2
    assert now != p.spec


def test_fresh_ids_are_listed_in_order_of_appearance_per_kind() -> None:
    ids = OwnIds(Foreign(), M.Manager())
    w = World(holders=immutables.Map({5: Rec(5, 6)}), view=7)
    assert ids._fresh(w, (8, 5), "holder", {}) == {"holder": [8, 5, 6], "view": [7]}
    assert ids._fresh(w, None, None, {"holder": {5: 1}}) == {"holder": [6], "view": [7]}


@attrs.frozen
class Sized:
    id: int
    holder: int
    size: int


class Fixed:
    """A governor whose records and result are fixed (a governor holds no id counters: its next_* are 0)."""

    def __init__(self, after: Any, raw: Any = None) -> None:
        self.after, self.raw = after, raw

    def execute(self, a: Any) -> Any:
        return self.raw

    def abstract(self) -> Any:
        return self.after


def _bind(gov_after: World, spec_after: World, raw: Any = None, want_result: Any = None) -> tuple[OwnIds, Any, Any]:
    ids = OwnIds(Fixed(gov_after, raw), World())
    ids.identity = False
    return ids, *ids.match(raw, Sized(0, 0, 0), spec_after, want_result)


GOV2 = World(holders={10: Sized(10, 10, 20), 20: Sized(20, 20, 10)}, next_holder=0)
SPEC2 = World(holders={1: Sized(1, 1, 10), 2: Sized(2, 2, 20)}, next_holder=3)


def test_the_binding_chosen_is_the_one_under_which_the_governor_agrees(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two holders shown in one step: the order of appearance binds them wrongly, the other binding agrees."""
    ids, result, now = _bind(GOV2, SPEC2)
    assert (result, now) == (None, SPEC2) and ids.spec_of == {"holder": {20: 1, 10: 2}}
    assert ids.abstract() == SPEC2  # out of the identity: renamed, with the spec's counters
    assert ids.gov_of == {"holder": {1: 20, 2: 10}}
    none_agrees = World(holders={1: Sized(1, 1, 30), 2: Sized(2, 2, 40)}, next_holder=3)
    ids, result, now = _bind(GOV2, none_agrees)  # the first, in order of appearance
    assert now == World(holders={1: Sized(1, 1, 20), 2: Sized(2, 2, 10)}, next_holder=3)
    assert ids.spec_of == {"holder": {10: 1, 20: 2}}
    sym_gov = World(holders={10: Sized(10, 10, 5), 20: Sized(20, 20, 5)}, next_holder=0)
    sym_spec = World(holders={1: Sized(1, 1, 5), 2: Sized(2, 2, 5)}, next_holder=3)
    ids, result, now = _bind(sym_gov, sym_spec)  # both agree: the first, in order of appearance
    assert now == sym_spec and ids.spec_of == {"holder": {10: 1, 20: 2}}
    monkeypatch.setattr(AD, "_MAX_TRIES", 2)
    assert _bind(GOV2, SPEC2)[0].spec_of == {"holder": {20: 1, 10: 2}}
    monkeypatch.setattr(AD, "_MAX_TRIES", 1)  # only the first binding is tried
    ids, result, now = _bind(GOV2, SPEC2)
    assert ids.spec_of == {"holder": {10: 1, 20: 2}} and now != SPEC2


def test_a_result_is_named_by_the_binding(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(AD.RESULT_KINDS, Sized, "holder")
    same = World(holders={10: Sized(10, 10, 10), 20: Sized(20, 20, 10)}, next_holder=0)
    spec = World(holders={1: Sized(1, 1, 10), 2: Sized(2, 2, 10)}, next_holder=3)
    assert _bind(same, spec, (20, 10), (1, 2))[1:] == ((1, 2), spec)
    ids, result, now = _bind(same, spec, (20, 10), (2, 1))  # the result decides: 20 is 2
    assert (result, now) == ((2, 1), spec) and ids.spec_of == {"holder": {20: 2, 10: 1}}
    ids, result, now = _bind(same, spec, (20, 10), (3, 3))  # none agrees: the first, in order of appearance
    assert result == (3, 1) and ids.spec_of == {"holder": {20: 3, 10: 1}}


def test_leaving_the_identity_binds_every_id_issued_before_to_itself() -> None:
    ids = OwnIds(Foreign(), M.Manager())
    ids._leave_identity(World(next_holder=3, inner=Inner(next_holder=4)))
    assert not ids.identity and ids.spec_of == {"holder": {1: 1, 2: 2, 3: 3}} and ids.gov_of == ids.spec_of
    assert ids.gov_of["holder"] is not ids.spec_of["holder"]


# --- the failure's script ------------------------------------------------------------------------------------------


class Color(enum.Enum):
    RED = 1


@attrs.frozen
class Other:
    x: Any


def test_the_script_runs_as_it_stands() -> None:
    got = script("MyMachine", [A.RegisterAuthority("hbm0", Tier.DEVICE, 8), M.Submit(1, 1, 4, 0, Role.KV),
                               Other((1,)), Other((1, Color.RED)), Other(())])
    assert got == (
        "The example's actions that changed the state, and the failing one, in the spec's ids (runs as it stands):\n"
        "from spec import ledger_actions as A, manager_actions as M\n"
        "from spec.types import Role, Tier\n"
        "state = MyMachine()\n"
        "state.act(A.RegisterAuthority(pool='hbm0', tier=Tier.DEVICE, capacity=8, device=None))\n"
        "state.act(M.Submit(holder=1, authority=1, nbytes=4, priority=0, role=Role.KV, alignment=None))\n"
        "state.act(Other(x=(1,)))\n"
        "state.act(Other(x=(1, Color.RED)))\n"
        "state.act(Other(x=()))")
    assert script("M", []).endswith("\nstate = M()")


def test_the_script_of_ledger_manager_and_view_actions_runs_as_printed() -> None:
    """A model view's action (spec.view_actions) and a lease's or holder's lifetime action (spec.lifetime_actions)
    are named through manager_actions, which re-exports them."""
    actions = [A.RegisterHolder("kv"), M.Press(1, 1, 10), V.DropView(3), V.PublishView(2), M.RemoveAuthority(1),
               M.UnregisterHolder(2), M.GrowLease(1, 1, 2), M.ShrinkLease(1, 1, 1)]
    ran: list[list[Any]] = []

    class Replay:
        def __init__(self) -> None:
            ran.append([])

        def act(self, a: Any) -> None:
            ran[-1].append(a)
    text = script("Replay", actions)
    assert {"state.act(M.DropView(view=3))", "state.act(M.RemoveAuthority(authority=1))"} <= set(text.splitlines())
    exec(text.split("\n", 1)[1], {"Replay": Replay})  # after the heading line
    assert ran == [actions]


@attrs.frozen
class Comp:
    inner: Any = Inner()
    view: Any = None


def test_a_field_skipped_does_not_end_the_walk() -> None:
    later = World(holders=None, uses=None, needs=None, view=5, inner=None)
    assert rename(later, plus) == attrs.evolve(later, view="view:5")
    assert rename(World(holders=None, uses=None, needs=[(1, 2)], view=5, inner=None), plus).view == "view:5"
    assert rename(World(holders=None, uses=[1], needs=None, view=5, inner=None), plus).view == "view:5"
    assert rename(Comp(None, 6), plus) == Comp(None, "view:6")


def test_governor_attribute_missing_before_init_is_named() -> None:
    with pytest.raises(AttributeError) as e:
        OwnIds.__new__(OwnIds).gov  # noqa: B018 - before __init__: no recursion through __getattr__
    assert e.value.args == ("gov",)


def test_the_identity_is_kept_while_records_and_result_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever the counters: a governor holds none."""
    monkeypatch.setitem(AD.RESULT_KINDS, Sized, "holder")
    want = World(holders={1: Sized(1, 1, 10)}, next_holder=2)
    ids = OwnIds(Fixed(attrs.evolve(want, next_holder=0), 1), World())
    assert ids.match(1, Sized(0, 0, 0), want, 1) == (1, want) and ids.identity is True
    assert ids.abstract() == want  # the counters are the spec's
    # the records agree but the result does not: the identity is left (ids bound, the result named by them)
    ids = OwnIds(Fixed(want, 5), World())
    result, now = ids.match(5, Sized(0, 0, 0), want, 1)
    assert ids.identity is False and result == 1
    # the result agrees but the records do not
    ids = OwnIds(Fixed(World(holders={7: Sized(7, 7, 10)}), 1), World())
    ids.match(1, Sized(0, 0, 0), want, 1)
    assert ids.identity is False


def test_a_kind_only_the_governor_shows_stays_unmatched() -> None:
    gov = World(holders={10: Sized(10, 10, 10)}, view=99, next_holder=0)
    spec = World(holders={1: Sized(1, 1, 10)}, next_holder=2)
    ids, result, now = _bind(gov, spec)
    assert now == attrs.evolve(spec, view=Unmatched("view", 99)) and ids.spec_of == {"holder": {10: 1}}
    ids, result, now = _bind(World(next_holder=0), attrs.evolve(spec, view=3))  # a kind only the spec shows
    assert now == World(next_holder=2) and ids.spec_of == {}


#: Two kinds, two ids each: four combinations, tried allocation-major; only the third agrees.
TWO_GOV = World(holders={10: Sized(10, 10, 10), 20: Sized(20, 20, 20)}, uses={30: 2, 40: 1}, next_holder=0)
TWO_SPEC = World(holders={1: Sized(1, 1, 10), 2: Sized(2, 2, 20)}, uses={1: 1, 2: 2}, next_holder=3)


def test_the_bindings_tried_are_bounded_across_kinds(monkeypatch: pytest.MonkeyPatch) -> None:
    ids, result, now = _bind(TWO_GOV, TWO_SPEC)
    assert now == TWO_SPEC and ids.spec_of == {"allocation": {40: 1, 30: 2}, "holder": {10: 1, 20: 2}}
    monkeypatch.setattr(AD, "_MAX_TRIES", 3)
    assert _bind(TWO_GOV, TWO_SPEC)[2] == TWO_SPEC
    monkeypatch.setattr(AD, "_MAX_TRIES", 2)  # the third is not tried: the first combination is kept
    ids, result, now = _bind(TWO_GOV, TWO_SPEC)
    assert now != TWO_SPEC and ids.spec_of == {"allocation": {30: 1, 40: 2}, "holder": {10: 1, 20: 2}}

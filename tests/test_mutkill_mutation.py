"""invariants/mutation.py pinned (its mutation run, benchmarks/mutation.py): the mutant applier on a scratch module
of its own; stale snippets with their whole messages; every rebinding made inside the block restored exactly."""

from __future__ import annotations

import collections
import importlib.util
import sys
import textwrap
from types import ModuleType

import pytest

from invariants.mutation import PROJECT_PACKAGES, Mutant, StaleMutant, _changed_definition, applied
from spec.guards import Layer

TARGET = "invariants._mutkill_target"

SOURCE = textwrap.dedent('''\
    """A scratch module for the mutant applier's tests."""

    LIMIT = 3


    def before(x):
        return x + 100


    def f(x):
        return x + 1


    def g(x):
        return f(x) * 2


    class Part:
        def who(self):
            return "part"


    class Other:
        pass


    TABLE = {"f": f}
    alias = f
    N: int = 5
    ''')


def load(tmp_path, monkeypatch, text: str) -> ModuleType:
    path = tmp_path / "_mutkill_target.py"
    path.write_text(text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(TARGET, path)
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, TARGET, mod)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def target(tmp_path, monkeypatch):
    return load(tmp_path, monkeypatch, SOURCE)


def mutant(old: str, new: str, module: str = TARGET) -> Mutant:
    return Mutant(name="m1", ids=("I1",), model="ledger", layer=Layer.SPEC, module=module, old=old, new=new,
                  description="a test mutant")


def user(monkeypatch, name: str, **attrs) -> ModuleType:
    m = ModuleType(name)
    m.__dict__.update(attrs)
    monkeypatch.setitem(sys.modules, name, m)
    return m


def test_the_project_packages():
    assert PROJECT_PACKAGES == ("spec", "invariants", "refimpl")


@pytest.mark.parametrize("old, new, expected", [
    ("return x + 1\n", "return x + 2\n", SOURCE.replace("return x + 1\n", "return x + 2\n")),
    # each edit patches its place in the source, not an earlier edit's text
    (("def g(x):", "f(x) * 2"), ("def g(x):  # was f(x) * 2", "f(x) * 3"),
     SOURCE.replace("f(x) * 2", "f(x) * 3").replace("def g(x):", "def g(x):  # was f(x) * 2")),
    # adjacent snippets are two edits
    (("def g(x):", "\n    return f(x) * 2"), ("def g(x, y=2):", "\n    return f(x) * y"),
     SOURCE.replace("def g(x):\n    return f(x) * 2", "def g(x, y=2):\n    return f(x) * y")),
])
def test_the_patched_source_replaces_each_snippet_at_its_place(target, old, new, expected):
    assert mutant(old, new).patched_source() == expected


@pytest.mark.parametrize("old, n", [("return x - 1", 0), ("return", 4), ("return x + 1", 2), ("(x):\n    return x", 2)])
def test_a_snippet_not_found_exactly_once_is_stale_with_its_message(target, old, n):
    assert SOURCE.count(old) == n
    with pytest.raises(StaleMutant) as e:
        mutant(old, "x").patched_source()
    assert str(e.value) == f"m1: snippet occurs {n} times in {TARGET} (expected once): {old!r}"
    assert isinstance(e.value, ValueError)
    with pytest.raises(StaleMutant), applied(mutant(old, "x")):
        pass


def test_several_snippets_patch_one_definition_in_order(target):
    m = mutant(("def g(x):", "f(x) * 2"), ("def g(x, y=3):", "f(x) * y"))
    assert m.patched_source() == SOURCE.replace("def g(x):", "def g(x, y=3):").replace("f(x) * 2", "f(x) * y")
    assert _changed_definition(SOURCE, m) == "g"
    with applied(m):
        assert target.g(1, 5) == 10 and target.f(1) == 2
    assert target.g(1) == 4


def test_a_later_snippet_not_found_once_is_stale_and_the_edits_pair_up(target):
    with pytest.raises(StaleMutant) as e:
        mutant(("def g(x):", "return x - 1"), ("def g(y):", "")).patched_source()
    assert str(e.value) == f"m1: snippet occurs 0 times in {TARGET} (expected once): 'return x - 1'"
    with pytest.raises(ValueError, match="zip"):
        mutant(("def g(x):", "f(x) * 2"), ("def g(y):",)).patched_source()


def test_overlapping_snippets_are_stale(target):
    old = ("def g(x):\n    return f(x)", "return f(x) * 2")
    assert all(SOURCE.count(o) == 1 for o in old)
    with pytest.raises(StaleMutant) as e:
        mutant(old, ("", "")).patched_source()
    assert str(e.value) == f"m1: snippets overlap in {TARGET}: 'return f(x) * 2'"


def test_a_module_without_a_source_file_is_stale(monkeypatch):
    m = user(monkeypatch, "invariants._mutkill_nofile")
    m.__file__ = None
    with pytest.raises(StaleMutant) as e:
        mutant("x", "y", module="invariants._mutkill_nofile").patched_source()
    assert str(e.value) == "m1: module invariants._mutkill_nofile has no source file"


@pytest.mark.parametrize("old, name", [
    ("LIMIT = 3", "LIMIT"),
    ("def before(x):\n    return x + 100", "before"),
    ("return x + 100", "before"),
    ("return x + 1\n", "f"),
    ("def f(x):", "f"),
    ("f(x) * 2", "g"),
    ('        return "part"', "Part"),
    ("class Other:\n    pass", "Other"),
    ('TABLE = {"f": f}', "TABLE"),
    ("alias = f", "alias"),
])
def test_the_patched_definition_is_the_one_the_snippet_lies_in(old, name):
    assert _changed_definition(SOURCE, mutant(old, "")) == name


@pytest.mark.parametrize("src, old", [(SOURCE, o) for o in (
    'f}\nalias', "N: int = 5", "return x + 1\n\n\ndef g", '"""A scratch module', "LIMIT = 3\n\n\ndef",
    ("return x + 100", "return x + 1\n"), ("return x + 1\n", "return x + 100"))  # two definitions
] + [("a = b = 1\nx.y = 2\n", o) for o in ("a = b = 1", "x.y = 2")])  # a multiple or attribute assignment
def test_a_snippet_outside_one_definition_is_stale_with_its_message(src, old):
    with pytest.raises(StaleMutant) as e:
        _changed_definition(src, mutant(old, ""))
    assert str(e.value) == f"m1: the snippet is not inside one top-level definition of {TARGET}"


def test_applied_patches_one_definition_and_restores_every_rebinding(target, monkeypatch):
    f, g, before = target.f, target.g, target.before
    table = {"f": f, "g": g, 7: f}
    dunder = {"f": f}
    ordered = collections.OrderedDict(f=f)
    inside = user(monkeypatch, "refimpl._mutkill_user", f=f, h=f, g=g, table=table, __reg__=dunder, ordered=ordered)
    outside = user(monkeypatch, "mutkill_outside.user", f=f, table={"f": f})
    assert (target.alias, target.TABLE["f"]) == (f, f)
    with applied(mutant("return x + 1\n", "return x + 2\n")):
        new = target.f
        assert new is not f and (new(1), target.g(1), target.before(1)) == (3, 6, 101)
        assert target.g is g and target.before is before  # the other definitions are the module's own
        assert new.__globals__ is not target.__dict__ and new.__globals__["g"] is g and new.__globals__["LIMIT"] == 3
        assert (inside.f, inside.h, inside.g) == (new, new, g)
        assert table == {"f": new, "g": g, 7: new}
        assert dunder == {"f": f} and ordered["f"] is f  # dunder names and non-plain dicts are not tables
        assert outside.f is f and outside.table["f"] is f  # not a project module
        assert target.TABLE["f"] is new and target.alias is f  # its own table re-pointed, not its other names
    assert (target.f, target.g, target.before) == (f, g, before)
    assert (inside.f, inside.h, inside.g) == (f, f, g)
    assert table == {"f": f, "g": g, 7: f} and dunder == {"f": f} and target.TABLE == {"f": f}
    assert (target.f(1), target.g(1)) == (2, 4)


def test_applied_restores_when_the_block_raises(target, monkeypatch):
    f = target.f
    table = {1: f}
    inside = user(monkeypatch, "spec._mutkill_user", f=f, table=table)
    with pytest.raises(KeyError), applied(mutant("return x + 1\n", "return x + 2\n")):
        assert inside.f(1) == 3 and table[1](1) == 3
        raise KeyError
    assert target.f is f and inside.f is f and table == {1: f}


def test_applied_rebases_composed_classes_and_restores_their_bases(target, monkeypatch):
    Part, Other = target.Part, target.Other

    class Composed(Other, Part):
        pass

    class Plain(Other):
        pass

    inside = user(monkeypatch, "invariants._mutkill_user", Part=Part)
    assert Composed().who() == "part"
    with applied(mutant('return "part"', 'return "mutant"')):
        assert target.Part is not Part and inside.Part is target.Part
        assert Composed.__bases__ == (Other, target.Part) and Composed().who() == "mutant"
        assert Plain.__bases__ == (Other,)
    assert Composed.__bases__ == (Other, Part) and Composed().who() == "part"
    assert target.Part is Part and inside.Part is Part and Plain.__bases__ == (Other,)


def test_the_source_is_read_as_utf8_whatever_the_locale(tmp_path, monkeypatch):
    """Under an ASCII locale (`open` without an encoding reads ASCII) a module with non-ASCII text still patches."""
    import builtins

    from invariants import mutation

    mod = load(tmp_path, monkeypatch, 'def f():\n    return "caf\u00e9"\n')
    monkeypatch.setattr(mutation, "open", lambda p, mode="r", encoding=None, **kw:
                        builtins.open(p, mode, encoding=encoding or "ascii", **kw), raising=False)
    m = mutant('"caf\u00e9"', '"tea"')
    assert m.patched_source() == 'def f():\n    return "tea"\n'
    with applied(m):
        assert mod.f() == "tea"
    assert mod.f() == "caf\u00e9"


def test_a_constant_is_patched_and_restored(target):
    with applied(mutant("LIMIT = 3", "LIMIT = 4")):
        assert target.LIMIT == 4 and target.N == 5
    assert target.LIMIT == 3

"""`evolve(record, **changes)`: attrs.evolve's result for the spec's frozen records, built without its generic loop.

`attrs.evolve` reads `attrs.fields(cls)` and every field by name on every
call; in the composed manager's step that is the largest single cost (two
calls a step, about 40% of `spec.manager.step` under cProfile over the
explorer's composed scope). This `evolve` builds, once per class and set of
changed field names, a function that calls the class's own `__init__`
positionally with each field's current value or its replacement (chosen when
it is built, not per call), so validators and converters run exactly as they
do under `attrs.evolve`, and the record is equal. A class whose `__init__`
only stores its arguments (slotted, no validator, converter or init hook:
every spec record) is built by its slots' own setters instead: the stores
`__init__` makes (attrs' cached hash reset too), without its by-name
`object.__setattr__` per field.

A class it cannot reproduce exactly (a field with `init=False`, a keyword-only
field, or an init alias that differs from the field name) and any call with
an unknown field name go to `attrs.evolve` itself, so its errors stay
its own. `tests/test_records.py` checks the two agree record by record, and
that every step of the explorer's scopes is the same with `attrs.evolve`.

Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import attrs

__all__ = ["evolve"]

_R = TypeVar("_R")

#: (class, the changed field names in call order) -> its builder (record, changes) -> record
_BUILDERS: dict[tuple, Callable[[Any, dict[str, Any]], Any]] = {}


def evolve(inst: _R, **changes: Any) -> _R:
    """A copy of frozen attrs record `inst` with `changes` applied (`attrs.evolve`'s value)."""
    key = (inst.__class__, *changes)
    build = _BUILDERS.get(key)
    if build is None:
        build = _BUILDERS[key] = _builder(inst.__class__, key[1:])
    return build(inst, changes)


def _slow(inst: Any, changes: dict[str, Any]) -> Any:
    return attrs.evolve(inst, **changes)


def _plain(cls: type, fields: Any) -> bool:
    """True iff `cls.__init__` only stores its arguments: a slotted attrs class with no validator, converter or
    pre/post-init hook, whose slots are its fields (and attrs' cached hash)."""
    slots = set(getattr(cls, "__slots__", ())) - {"__weakref__", "_attrs_cached_hash"}
    return (slots == {f.name for f in fields} and not any(f.validator or f.converter for f in fields)
            and not hasattr(cls, "__attrs_pre_init__") and not hasattr(cls, "__attrs_post_init__"))


def _builder(cls: type, changing: tuple[str, ...]) -> Callable[[Any, dict[str, Any]], Any]:
    fields = attrs.fields(cls)
    if any(not f.init or f.kw_only or getattr(f, "alias", f.name) != f.name for f in fields):
        return _slow
    names = [f.name for f in fields]
    if not all(n.isidentifier() for n in names) or not set(changing) <= set(names):
        return _slow  # an unknown name: attrs.evolve's own error
    # Per field, in field order, its replacement or its current value, decided once per set of changed names
    # (a call site always changes the same fields).
    values = [f"c[{n!r}]" if n in changing else f"inst.{n}" for n in names]
    scope: dict[str, Any] = {"cls": cls, "new": object.__new__}
    if _plain(cls, fields):
        # What the class's own __init__ does (each slot set in field order, a cached hash reset), without its
        # per-field `object.__setattr__` by name: each slot's own setter.
        slots = [*names, *(["_attrs_cached_hash"] if "_attrs_cached_hash" in cls.__slots__ else [])]
        scope.update({f"s{i}": getattr(cls, n).__set__ for i, n in enumerate(slots)})
        sets = "".join(f"    s{i}(r, {v})\n" for i, v in enumerate([*values, "None"][:len(slots)]))
        src = f"def build(inst, c):\n    r = new(cls)\n{sets}    return r\n"
    else:  # the class's own __init__ does the rest
        src = f"def build(inst, c):\n    return cls({', '.join(values)})\n"
    exec(compile(src, f"<spec.records.evolve {cls.__qualname__}>", "exec"), scope)  # noqa: S102 - fixed template
    return scope["build"]

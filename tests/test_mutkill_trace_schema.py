"""invariants/trace_schema.py's mutation run (benchmarks/mutation.py): the layout writer's boundaries and the names.

The schema itself is compared whole with docs/trace-schema.json by tests/test_trace_schema.py."""

from __future__ import annotations

from invariants import trace_schema as S


def test_a_value_that_fits_its_line_is_written_on_it() -> None:
    fits = ["x" * 114]  # json.dumps: 118 characters
    assert S._dump(fits, 2) == '["' + "x" * 114 + '"]'
    assert S._dump(fits, 0, 2) == '["' + "x" * 114 + '"]'
    assert S._dump(fits, 3) == '[\n     "' + "x" * 114 + '"\n   ]'
    assert S._dump(fits, 0, 3) == '[\n  "' + "x" * 114 + '"\n]'
    assert S._dump(fits, 1, 3, width=121) == '["' + "x" * 114 + '"]'
    top = ["x" * 116]  # 120 characters: at the top level (nothing before it on the line) it fits
    assert S._dump(top, 0) == '["' + "x" * 116 + '"]'


def test_a_long_object_is_one_entry_per_line_indented() -> None:
    v = {"a": ["y" * 60, "z" * 60], "b": 1}
    assert S._dump(v, 0) == '{\n  "a": [\n    "' + "y" * 60 + '",\n    "' + "z" * 60 + '"\n  ],\n  "b": 1\n}'
    long = '"j": "' + "q" * 120 + '"'
    # an entry's value starts after '  "k": ' (7 characters): a 113-character value fits, a 114-character one wraps
    assert S._dump({"k": ["w" * 109], "j": "q" * 120}, 0) == '{\n  "k": ["' + "w" * 109 + '"],\n  ' + long + "\n}"
    assert S._dump({"k": ["w" * 110], "j": "q" * 120}, 0) == ('{\n  "k": [\n    "' + "w" * 110 + '"\n  ],\n  ' + long
                                                             + "\n}")
    assert S._dump({}, 200) == "{}" and S._dump([], 200) == "[]" and S._dump("s", 200) == '"s"'


def test_names() -> None:
    assert S._short("ortmem-manager/2") == "manager" and S._short("ortmem-tx/1") == "tx"
    assert S._ref("x") == {"$ref": "#/$defs/x"}
    assert S.schema_text().endswith("}\n")

"""The rows of `ortmem simulate`: what each figure is, and whether the model reproduces it.

Theory of operation. A row says which of four things it is, and its shape
follows from that, checked when the row is made:

| kind       | model column | design column | ratio | meaning |
|---|---|---|---|---|
| reproduced | yes          | yes           | yes   | the model computes the same quantity as the design's figure, equal within the precision the design states it to (a model that drifts fails when the row is made) |
| model      | yes          | no            | no    | the model's own figure; the design has none for it |
| quoted     | no           | yes           | no    | the design's figure (an upstream measurement, or arithmetic on measurements); not modelled, and the note says what the model explains of it and why the rest is not modelled |
| input      | yes          | yes           | no    | a quoted measurement the model takes as an input (a ratio would be 1 by construction) |

So a ratio is shown only between a model figure and the design's figure of
the same quantity; a quoted measurement never sits in a column beside a
model figure of a different quantity. "The design's figure" is
DESIGN-FACTS (sections 8 and 9): upstream's measurements (issue numbers) or
the design's own arithmetic (named as such in `source`).
"""

from __future__ import annotations

import enum
from fractions import Fraction

import attrs

__all__ = ["Kind", "Figure", "Scenario", "FigureShapeError"]


class FigureShapeError(ValueError):
    """A row whose columns do not fit its kind, or a 'reproduced' row the model no longer reproduces."""


class Kind(enum.Enum):
    REPRODUCED = "reproduced"
    MODEL = "model"
    QUOTED = "quoted"
    INPUT = "input"

    def __repr__(self) -> str:
        return f"Kind.{self.name}"


Number = int | Fraction

# kind -> (model value present, design figure present)
_SHAPE = {Kind.REPRODUCED: (True, True), Kind.MODEL: (True, False), Kind.QUOTED: (False, True),
          Kind.INPUT: (True, True)}


@attrs.frozen
class Figure:
    name: str
    kind: Kind
    value: Number | None = None  # the model's figure
    design: Number | None = None  # the design's figure
    precision: Number = 0  # reproduced / input: |value - design| <= precision (the design's last quoted digit)
    stated: str = ""  # the design's figure as the design words it ("~50 MB"), shown instead of `design`
    unit: str = "B"
    source: str = ""  # upstream issue(s), or "section N (the design's arithmetic)"
    note: str = ""  # what it means; for quoted rows, what the model explains and why the rest is not modelled

    def __attrs_post_init__(self) -> None:
        has_value, has_design = _SHAPE[self.kind]
        if (self.value is not None) != has_value or (self.design is not None) != has_design:
            raise FigureShapeError(f"{self.name!r}: a {self.kind.value} row has "
                                   f"{'a' if has_value else 'no'} model figure and "
                                   f"{'a' if has_design else 'no'} design figure")
        if self.kind in (Kind.REPRODUCED, Kind.INPUT):
            off = abs(Fraction(self.value) - Fraction(self.design))
            if off > self.precision:
                raise FigureShapeError(f"{self.name!r}: the model gives {self.value}, the design {self.design} "
                                       f"(off by {float(off):g}, more than its precision {self.precision}): "
                                       f"not reproduced")
        if self.kind is Kind.QUOTED and not self.note:
            raise FigureShapeError(f"{self.name!r}: a quoted row says what the model explains of it")

    @property
    def ratio(self) -> Fraction | None:
        """model / design, for reproduced rows only (the same quantity on both sides)."""
        if self.kind is not Kind.REPRODUCED or not self.design:
            return None
        return Fraction(self.value) / Fraction(self.design)


@attrs.frozen
class Scenario:
    key: str
    title: str
    geometry: str  # the inputs, one line (printed above the table and on the plot)
    figures: tuple[Figure, ...]
    conclusions: tuple[str, ...]
    series: dict = attrs.field(factory=dict, eq=False)  # for the plots

    def figure(self, name: str) -> Figure:
        for f in self.figures:
            if f.name == name:
                return f
        raise KeyError(f"{self.key} has no figure {name!r}")

"""Shared helpers of the trace tests: lossy variants of a recorded JSONL trace."""

from __future__ import annotations

import json


def renumbered(lines: list[bytes]) -> list[bytes]:
    """The events renumbered 1, 2, 3, ... in line order: an emitter that lost, duplicated or moved an event and
    hid it from the sequence check, so only the spec can notice."""
    out = []
    for n, raw in enumerate(lines, 1):
        ev = json.loads(raw)
        ev["source_sequence"] = n
        out.append(json.dumps(ev).encode() + b"\n")
    return out

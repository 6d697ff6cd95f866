"""Fail-fast argument and path checks of the `ortmem` command: bounded integers, writable outputs.

Every output path is probed before any work starts (issue #14, finding 6), so a run never
computes for minutes and then fails to write; an unusable path is an `Unusable`, which
`refimpl.cli.main` reports in one line with exit code 2, never as a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from fractions import Fraction
from pathlib import Path
from typing import Any

__all__ = ["Unusable", "bounded", "probe_file", "probe_dir", "probe_json", "write", "write_json", "to_json"]


class Unusable(Exception):
    """An input or output path that cannot be used: reported in one line, exit 2."""


def bounded(low: int, high: int | None = None) -> Any:
    """An argparse type: an integer in low..high (high None: no upper bound)."""
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if n < low or (high is not None and n > high):
            raise argparse.ArgumentTypeError(f"{n} is outside {low}..{high if high is not None else ''}")
        return n
    return parse


def probe_file(path: str) -> None:
    """Fail now, before any work, if `path` cannot be written (without truncating an existing file)."""
    if os.path.isdir(path):
        raise Unusable(f"{path} is a directory, not a file")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise Unusable(f"cannot write {path}: directory {parent} does not exist")
    try:
        if os.path.exists(path):
            with open(path, "a"):
                pass
        else:
            with tempfile.NamedTemporaryFile(dir=parent, prefix=".ortmem-probe-"):
                pass
    except OSError as e:
        raise Unusable(f"cannot write {path}: {e.strerror or e}") from None


def probe_dir(path: str) -> None:
    """Fail now if the report folder cannot be created or written."""
    p = os.path.abspath(path)
    if os.path.exists(p) and not os.path.isdir(p):
        raise Unusable(f"{path} exists and is not a directory")
    existing = p
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise Unusable(f"cannot create {path}: {existing} is not a directory")
    try:
        with tempfile.NamedTemporaryFile(dir=existing, prefix=".ortmem-probe-"):
            pass
    except OSError as e:
        raise Unusable(f"cannot write into {existing}: {e.strerror or e}") from None


def write(path: Path, text: str) -> None:
    try:
        path.write_text(text)
    except OSError as e:
        raise Unusable(f"cannot write {path}: {e.strerror or e}") from None


def probe_json(args: argparse.Namespace) -> None:
    """Probe `--json PATH` before any work (`-`, stdout, needs no probe)."""
    path = getattr(args, "json", None)
    if path and path != "-":
        probe_file(path)


def to_json(value: Any) -> Any:
    """What `json.dumps` cannot write itself: exact fractions as floats, enums by value, the rest as text."""
    if isinstance(value, Fraction):
        return float(value)
    if hasattr(value, "value") and isinstance(getattr(value, "value"), (str, int)):
        return value.value
    return str(value)


def write_json(path: str, obj: Any) -> None:
    """`obj` as indented JSON into `path`, or onto stdout when `path` is `-`."""
    text = json.dumps(obj, indent=2, default=to_json) + "\n"
    if path == "-":
        sys.stdout.write(text)
    else:
        write(Path(path), text)

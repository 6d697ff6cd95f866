"""Survivors of invariants/changed.py's mutation run, killed (benchmarks/mutation.py)."""

from __future__ import annotations

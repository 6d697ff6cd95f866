"""Survivors of invariants/explore_symmetry.py's mutation run, killed (benchmarks/mutation.py)."""

from __future__ import annotations

"""Survivors of invariants/explore_checks.py's mutation run, killed (benchmarks/mutation.py)."""

from __future__ import annotations

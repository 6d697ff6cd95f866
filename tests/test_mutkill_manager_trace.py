"""Survivors of invariants/manager_trace.py's mutation run, killed (benchmarks/mutation.py)."""

from __future__ import annotations

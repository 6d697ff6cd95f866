"""Compatibility re-export: the governor now lives in `refimpl.manager` (one module per part)."""

from refimpl.manager import ProcessMemoryManager

__all__ = ["ProcessMemoryManager"]

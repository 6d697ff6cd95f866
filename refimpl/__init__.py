"""The reference governor: ProcessMemoryManager, its ORT adapters (refimpl.ort) and the CLI."""

from refimpl.governor import ProcessMemoryManager

__all__ = ["ProcessMemoryManager"]

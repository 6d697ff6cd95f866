"""The reference governor: ProcessMemoryManager, its ORT adapters (refimpl.ort) and the CLI."""

from typing import Any

__all__ = ["ProcessMemoryManager"]


def __getattr__(name: str) -> Any:
    # Imported on first use (PEP 562), so `import refimpl.cli_main`, the console script's launcher,
    # takes milliseconds and a Ctrl-C while the CLI loads is caught there (no traceback).
    if name == "ProcessMemoryManager":
        from refimpl.manager import ProcessMemoryManager

        return ProcessMemoryManager
    raise AttributeError(f"module 'refimpl' has no attribute {name!r}")

# Guard against two ONNX Runtime wheels installed side by side.
#
# Owns: the one check that runs before `import onnxruntime`. The CPU and GPU
# wheels both install the `onnxruntime/` package; pip resolves both without
# complaint and the last one installed silently wins the native library, and
# uninstalling either then deletes shared files (ORT-NOTES 1). So we refuse to
# import rather than run on whichever build happened to win.
# Must not touch: onnxruntime itself (this runs before it is importable safely).

from __future__ import annotations

from importlib import metadata

__all__ = ["ORT_DISTRIBUTIONS", "check_single_ort_wheel"]

# Distributions that provide the `onnxruntime` import package.
ORT_DISTRIBUTIONS = ("onnxruntime", "onnxruntime-gpu")


def _installed(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def check_single_ort_wheel() -> None:
    found = {name: v for name in ORT_DISTRIBUTIONS if (v := _installed(name)) is not None}
    if len(found) > 1:
        listed = " and ".join(f"{name} {v}" for name, v in found.items())
        raise ImportError(
            f"both {listed} are installed; they overwrite each other's `onnxruntime` package. "
            f"Fix: `pip uninstall -y {' '.join(found)}`, then reinstall exactly one extra: "
            "`pip install -e '.[cpu]'` or `pip install -e '.[gpu]'`."
        )

#!/usr/bin/env bash
# GPU check for the governed ORT runtime (issue #11 item 8), under 10 minutes on one NVIDIA GPU.
#
# Needs: the onnxruntime-gpu wheel (CUDA 13 / cuDNN 9 build, ORT-NOTES 1) with its CUDA libraries,
# and the project's Python deps (numpy, onnx, attrs, immutables, hypothesis, pytest), in $PYTHON's
# environment. Nothing is downloaded here. Fails loudly when the CUDA EP cannot run a session.
# Usage: PYTHON=/path/to/python benchmarks/gpu_check.sh [OUTDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
OUT="${1:-${OUT:-gpu-check-out}}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || echo "nvidia-smi: not available"; } \
  | tee "$OUT/gpu.txt"
timeout 60 "$PY" - <<'PY' | tee "$OUT/providers.txt"
import onnxruntime as ort
print("onnxruntime", ort.__version__, ort.get_device(), ort.get_available_providers())
assert "CUDAExecutionProvider" in ort.get_available_providers(), "not the onnxruntime-gpu build"
PY

# The CUDA tests must RUN here, not skip: -rs lists skips, and a skip fails the check.
timeout 300 "$PY" -m pytest -q -rs tests/ort/test_ort_cuda.py tests/ort/test_ort_binding.py \
  tests/ort/test_ort_run_failures.py 2>&1 | tee "$OUT/pytest.txt"
if grep -q "SKIPPED.*test_ort_cuda" "$OUT/pytest.txt"; then
  echo "FAIL: the CUDA tests skipped on a GPU machine" >&2
  exit 1
fi

timeout 240 "$PY" benchmarks/bench_decode.py --provider cuda --reps 3 2>&1 | tee "$OUT/bench_decode_cuda.txt"
timeout 120 "$PY" benchmarks/bench_decode.py --provider cpu --reps 3 2>&1 | tee "$OUT/bench_decode_cpu.txt"
echo "gpu_check: done; results in $OUT"

#!/usr/bin/env bash
# GPU check of the governed device path (issue #22 item 3), in at most 10 minutes on one NVIDIA GPU
# (timeouts: 30 + 240 + 150 + 120 s).
#
# Needs: the onnxruntime-gpu wheel (CUDA 13 / cuDNN 9 build, ORT-NOTES 1) with its CUDA libraries,
# NVIDIA's cuda-bindings, and the project's Python deps (numpy, onnx, attrs, immutables, hypothesis,
# pytest): `pip install -e '.[gpu,test]'` in $PYTHON's environment. Nothing is downloaded here. Run it on
# an otherwise idle GPU: the byte check reads the driver's device-wide figure.
# Writes into OUTDIR: gpu.txt, providers.txt, pytest.txt, gpu_device_check.json (the figures: identical
# outputs, driver bytes vs the ledger's charge per action, decode overhead), compute_apps.txt,
# bench_decode_cuda.txt. Exit non-zero if a CUDA test skips or fails, or a device check fails.
# Usage: PYTHON=/path/to/python benchmarks/gpu_check.sh [OUTDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
OUT="${1:-${OUT:-gpu-check-out}}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
START=$SECONDS

{ nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv || echo "nvidia-smi: not available"; } \
  | tee "$OUT/gpu.txt"
timeout 30 "$PY" - <<'PY' | tee "$OUT/providers.txt"
import onnxruntime as ort
print("onnxruntime", ort.__version__, ort.get_device(), ort.get_available_providers())
assert "CUDAExecutionProvider" in ort.get_available_providers(), "not the onnxruntime-gpu build"
from cuda.bindings import runtime as rt
err, n = rt.cudaGetDeviceCount()
print("cuda-bindings: devices", n, err)
assert n >= 1, "no CUDA device visible to cuda-bindings"
PY

# 1. The CUDA tests must RUN here, not skip (-rs lists skips; a skip fails the check), and the stand-in
#    and unit tests of the same path must pass on this machine too.
timeout 240 "$PY" -m pytest -q -rs -p no:cacheprovider tests/ort/test_ort_cuda.py tests/ort/test_ort_device_units.py \
  tests/ort/test_ort_device_standin.py 2>&1 | tee "$OUT/pytest.txt"
if grep -q "SKIPPED.*test_ort_cuda" "$OUT/pytest.txt"; then
  echo "FAIL: the CUDA tests skipped on a GPU machine" >&2
  exit 1
fi

# 2. The figures: identical to ungoverned, device bytes = the ledger's charge, decode overhead.
timeout 150 "$PY" benchmarks/gpu_device_check.py "$OUT/gpu_device_check.json" > "$OUT/gpu_device_check.txt" 2>&1 &
CHECK=$!
sleep 20  # while it runs: which processes hold device memory, as the driver sees them
{ nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv || true; } > "$OUT/compute_apps.txt"
wait $CHECK || { tail -40 "$OUT/gpu_device_check.txt"; echo "FAIL: gpu_device_check" >&2; exit 1; }
tail -3 "$OUT/gpu_device_check.txt"

# 3. The decode benchmark's device arm, short (wall clock: device time is not the thread's CPU time).
timeout 120 "$PY" benchmarks/bench_decode.py --provider cuda --clock wall --sizes 256,1024 --steps 64 --reps 3 \
  2>&1 | tee "$OUT/bench_decode_cuda.txt"
echo "gpu_check: done in $((SECONDS - START)) s; results in $OUT"

#!/usr/bin/env bash
# The device run of bench/gpu.py: versions, then the benchmark into $OUT (page, plot, json, log).
#   OUT=/some/dir bash bench/gpu_run.sh        (from the repository root; PYTHONPATH=. is set here)
# Writes $OUT/benchmarks_gpu.md, $OUT/benchmarks_gpu.png, $OUT/gpu_results.json, $OUT/gpu_run.log.
# Extra arguments go to bench/gpu.py (e.g. --budget 240). Hard stop after 420 s.
set -u
OUT="${OUT:-bench/results/gpu}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}."
{
  echo "== $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  nvidia-smi -L 2>&1 || echo "nvidia-smi not available"
  python3 - <<'PY'
import importlib
for name in ("numpy", "opt_einsum", "cupy", "torch", "jax", "cotengra", "matplotlib"):
    try:
        module = importlib.import_module(name)
        print(f"{name} {getattr(module, '__version__', '?')}")
    except Exception as exc:
        print(f"{name}: not importable ({type(exc).__name__}: {exc})")
try:
    import torch
    print("torch.cuda:", torch.cuda.is_available(), torch.version.cuda,
          torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
except Exception as exc:
    print("torch.cuda:", exc)
try:
    import jax
    print("jax devices:", jax.devices())
except Exception as exc:
    print("jax devices:", exc)
PY
  timeout 420 python3 bench/gpu.py --out "$OUT" "$@"
  echo "== exit $? at $(date -u '+%H:%M:%S UTC')"
} 2>&1 | tee "$OUT/gpu_run.log"

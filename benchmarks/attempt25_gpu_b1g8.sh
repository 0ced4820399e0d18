#!/usr/bin/env bash
# Attempts 25's and 26's levers at the other two large shapes, in one device call after
# benchmarks/attempt25_gpu.sh (docs/perf-notes.md, next step 0): every s25 variant at b1-l32768-h80 and at
# b2-l8192-h128-g8, and attempt 26's tail split at b1, against the shipped configs, so that the winners can be
# shipped per shape. About 4-5 minutes with the cubin pack.
# Run from the project root on the GPU machine, with carry [".gpu-bundle", ".cubin-cache/b1g8"]:
#
#     bash benchmarks/attempt25_gpu_b1g8.sh            # writes its logs under $OUT (default ./out)
set -u
# shellcheck disable=SC1091
source benchmarks/gpu_env.sh
status=()

B1="ship b1,s25 b1 rg2 occ2,s25 b1 rg2 occ2 nww8,s25 b1 rg4 occ1 nww8,s25 b1 rg4 occ2 nww8,s25 b1 rg2 occ3"
B1="$B1,s25 b1 cb early,s25 b1 f14,s25 b1 f22,s25 b1 f30"
B1="$B1,s26 b1 tail t64x64 occ3 tk128,s26 b1 tail t64x64 occ4 tk64,s26 b1 tail t64x32 occ4 tk64,s26 b1 tail same"
B1="$B1,s26 b1 cb occ2,s26 b1 cb occ4"
python3 benchmarks/probe.py --shapes b1-l32768-h80 --only "$B1" --out "$OUT/probe-b1" 2>&1 \
    | tee "$OUT/probe-b1.log"
status+=("probe_b1=${PIPESTATUS[0]}")

G8="ship g8,s25 g8 rg2 occ2,s25 g8 rg2 occ2 nww8,s25 g8 rg2 occ3,s25 g8 cb early,s25 g8 f10,s25 g8 f18"
G8="$G8,s25 g8 f26,s26 g8 cb occ2,s26 g8 cb occ4"
python3 benchmarks/probe.py --shapes b2-l8192-h128-g8 --only "$G8" --out "$OUT/probe-g8" 2>&1 \
    | tee "$OUT/probe-g8.log"
status+=("probe_g8=${PIPESTATUS[0]}")

if [ -n "${CUDA_TILE_CACHE_DIR:-}" ]; then
    python3 -m mamba2_tutorial.cubin_cache report "$CUDA_TILE_CACHE_DIR" | tee "$OUT/cubin-cache.json"
fi
echo "exit status: ${status[*]}" | tee "$OUT/status.txt"

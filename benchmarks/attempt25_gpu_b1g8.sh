#!/usr/bin/env bash
# Attempts 25's and 26's levers at the other two large shapes, in one device call after
# benchmarks/attempt25_gpu.sh (docs/perf-notes.md, next step 0): every s25 variant at b1-l32768-h80 and at
# b2-l8192-h128-g8, and attempt 26's tail split at b1, against the shipped configs, so that the winners can be
# shipped per shape; then the combinations of the faster ones (benchmarks/probe.py --combine). About 4-5
# minutes with the cubin pack.
# Run from the project root on the GPU machine, with carry [".gpu-bundle", ".cubin-cache/b1g8"] (built here:
# see benchmarks/attempt25_lists.sh):
#
#     bash benchmarks/attempt25_gpu_b1g8.sh            # writes its logs under $OUT (default ./out)
set -u
# shellcheck disable=SC1091
source benchmarks/gpu_env.sh
status=()

# shellcheck disable=SC1091
source benchmarks/attempt25_lists.sh
python3 benchmarks/probe.py --shapes b1-l32768-h80 --only "$A25_B1" --combine "ship b1" \
    --out "$OUT/probe-b1" 2>&1 \
    | tee "$OUT/probe-b1.log"
status+=("probe_b1=${PIPESTATUS[0]}")

python3 benchmarks/probe.py --shapes b2-l8192-h128-g8 --only "$A25_G8" --combine "ship g8" \
    --out "$OUT/probe-g8" 2>&1 \
    | tee "$OUT/probe-g8.log"
status+=("probe_g8=${PIPESTATUS[0]}")

if [ -n "${CUDA_TILE_CACHE_DIR:-}" ]; then
    python3 -m mamba2_tutorial.cubin_cache report "$CUDA_TILE_CACHE_DIR" | tee "$OUT/cubin-cache.json"
fi
echo "exit status: ${status[*]}" | tee "$OUT/status.txt"

#!/usr/bin/env bash
# Attempt 25's GPU measurements in one device call (docs/perf-notes.md, next step 0), about 6-8 minutes on a
# cold H200 machine without the cubin pack, less with it. Run from the project root on the GPU machine, with
# carry [".gpu-bundle", ".cubin-cache/a25"] (built here: see benchmarks/attempt25_lists.sh, which holds this
# script's probe variants and tests):
#
#     bash benchmarks/attempt25_gpu.sh            # writes its logs under $OUT (default ./out)
#
# 1. the stream and dt experiments, side by side (benchmarks/overlap_probe.py);
# 2. every attempt-25/26/27 lever at b8-l4096-h80 against the shipped config, then the combinations of
#    the faster ones, one per group of levers (benchmarks/probe.py --combine);
# 3. the GPU tests of the new code paths (config variants, CUDA-graph capture, silu at extreme z).
# A step that fails does not stop the next one; each step's exit status is printed at the end.
set -u
# the project at /tmp/mamba2-cutile, .gpu-bundle activated, the cubin packs that travelled unpacked
# (benchmarks/cubin_cache.sh built them: carry .cubin-cache/a25 to skip most of tileiras's minutes here)
# shellcheck disable=SC1091
source benchmarks/gpu_env.sh
status=()

python3 benchmarks/overlap_probe.py --out "$OUT" 2>&1 | tee "$OUT/overlap.log"
status+=("overlap_probe=${PIPESTATUS[0]}")

# shellcheck disable=SC1091
source benchmarks/attempt25_lists.sh
python3 benchmarks/probe.py --shapes b8-l4096-h80 --only "$A25_B8" --combine "ship b8" \
    --out "$OUT/probe-b8" 2>&1 \
    | tee "$OUT/probe-b8.log"
status+=("probe_b8=${PIPESTATUS[0]}")

timeout 240 python3 -m pytest -o addopts='' -p no:benchmark -q -m gpu -n 8 tests/test_kernel_configs.py \
    -k "${A25_TESTS//,/ or }" \
    2>&1 | tail -15 | tee "$OUT/gpu-tests.log"
status+=("gpu_config_tests=${PIPESTATUS[0]}")
timeout 120 python3 -m pytest -o addopts='' -p no:benchmark -q -m gpu tests/test_kernels_gpu.py -k silu \
    2>&1 | tail -5 | tee -a "$OUT/gpu-tests.log"
status+=("gpu_silu_test=${PIPESTATUS[0]}")

if [ -n "${CUDA_TILE_CACHE_DIR:-}" ]; then
    python3 -m mamba2_tutorial.cubin_cache report "$CUDA_TILE_CACHE_DIR" | tee "$OUT/cubin-cache.json"
fi
echo "exit status: ${status[*]}" | tee "$OUT/status.txt"

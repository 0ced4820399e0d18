#!/usr/bin/env bash
# The first device call of docs/perf-notes.md's plan (next step 0): every probe of attempts 25-27 at the three
# large shapes with their combinations, then the GPU tests of the new code paths, then the stream experiments,
# within one call's time limit. Run from the project root on the GPU machine, with carry [".gpu-bundle",
# ".cubin-cache/a25", ".cubin-cache/b1g8"] (built here: see benchmarks/attempt25_lists.sh):
#
#     bash benchmarks/probes_gpu.sh            # logs under $OUT (default ./out); BUDGET_S=570 by default
#
# The steps run most useful first, each under what is left of BUDGET_S seconds (a step that would get less
# than 30 s is skipped and says so), so the call ends by itself before the device's 600 s limit and the
# status line is always written. probe.py saves probe.json and best.json after every variant, so even a step
# cut short keeps what it measured. Then: `bash benchmarks/bench_gpu.sh` with the best.json files.
set -u
# shellcheck disable=SC1091
source benchmarks/gpu_env.sh
# shellcheck disable=SC1091
source benchmarks/attempt25_lists.sh
end=$((SECONDS + ${BUDGET_S:-570}))
status=()

step() {  # step NAME COMMAND...: run it under the time left, its output to the call and to $OUT/NAME.log
    local name=$1 left=$((end - SECONDS))
    shift
    if [ "$left" -lt 30 ]; then
        status+=("$name=skipped")
        echo "== $name skipped: ${left} s left" | tee -a "$OUT/status.log"
        return
    fi
    echo "== $name (${left} s left)" | tee -a "$OUT/status.log"
    timeout "$left" "$@" 2>&1 | tee "$OUT/$name.log"
    status+=("$name=${PIPESTATUS[0]}")
}

step probe-b8 python3 benchmarks/probe.py --shapes b8-l4096-h80 --only "$A25_B8" --combine "ship b8" \
    --out "$OUT/probe-b8"
step probe-b1 python3 benchmarks/probe.py --shapes b1-l32768-h80 --only "$A25_B1" --combine "ship b1" \
    --out "$OUT/probe-b1"
step probe-g8 python3 benchmarks/probe.py --shapes b2-l8192-h128-g8 --only "$A25_G8" --combine "ship g8" \
    --out "$OUT/probe-g8"
step gpu-tests python3 -m pytest -o addopts='' -p no:benchmark -q -m gpu -n 8 tests/test_kernel_configs.py \
    -k "${A25_TESTS//,/ or }"
step gpu-silu python3 -m pytest -o addopts='' -p no:benchmark -q -m gpu tests/test_kernels_gpu.py -k silu
step overlap python3 benchmarks/overlap_probe.py --out "$OUT"

if [ -n "${CUDA_TILE_CACHE_DIR:-}" ]; then
    python3 -m mamba2_tutorial.cubin_cache report "$CUDA_TILE_CACHE_DIR" > "$OUT/cubin-cache.json"
fi
echo "exit status: ${status[*]}" | tee "$OUT/status.txt"

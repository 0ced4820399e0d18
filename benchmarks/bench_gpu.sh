#!/usr/bin/env bash
# The benchmark side by side with the baselines, in one device call (about 5 minutes). With no argument it
# runs the shipped configs (ssd_config's): the run whose $OUT/h200.json is shipped as
# mamba2_tutorial/data/benchmarks/h200.json (tests/test_bench.py checks that its recorded configs are
# ssd_config's). With benchmarks/probe.py --combine's best.json files it runs those configs for their
# shapes instead: a trial of a probe's winners in the benchmark before they ship (the sweep and the overhead
# shape keep ssd_config's, so that file is not one to ship).
# Run from the project root on the GPU machine, with carry [".gpu-bundle", ".cubin-cache/bench",
# ".cubin-cache/a25", ".cubin-cache/b1g8"] (the shipped configs' cubins and the probes'):
#
#     bash benchmarks/bench_gpu.sh [BEST.json ...]
#
# Writes $OUT/h200.json, $OUT/h200.png and $OUT/bench.log (default ./out).
set -u
# shellcheck disable=SC1091
source benchmarks/gpu_env.sh
configs=()
for f in "$@"; do configs+=("$(cd "$(dirname "$f")" && pwd)/$(basename "$f")"); done
python3 -m mamba2_tutorial bench ${configs[@]+--configs "${configs[@]}"} --out "$OUT/h200.json" \
    --plot "$OUT/h200.png" --quiet 2>&1 | tee "$OUT/bench.log"
echo "exit status: bench=${PIPESTATUS[0]}" | tee "$OUT/status.txt"
if [ -n "${CUDA_TILE_CACHE_DIR:-}" ]; then
    python3 -m mamba2_tutorial.cubin_cache report "$CUDA_TILE_CACHE_DIR" > "$OUT/cubin-cache.json"
fi

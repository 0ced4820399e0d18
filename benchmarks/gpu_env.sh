# Source from the project root on the GPU machine, first thing in a device call:
#
#     source benchmarks/gpu_env.sh && <commands>
#
# 1. copies the project to /tmp/mamba2-cutile and moves there (the path the cubin packs were built at:
#    benchmarks/cubin_cache.sh), keeping $OUT where it was (./out when unset), exported as an absolute path;
# 2. activates .gpu-bundle (cuda.tile under /tmp/gpu-site, the 13.4 toolchain);
# 3. unpacks every cubin pack that travelled (.cubin-cache/*/cache.db.xz) into /tmp/cutile-cache and points
#    cuTile at it.
# After the run, `python3 -m mamba2_tutorial.cubin_cache report /tmp/cutile-cache` says what hit and what the
# GPU machine compiled itself.
_m2c_root=/tmp/mamba2-cutile
OUT=${OUT:-out}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd) && export OUT
if [ "$(pwd -P)" != "$_m2c_root" ]; then
    rm -rf "$_m2c_root" && mkdir -p "$_m2c_root" && cp -a . "$_m2c_root"/ && cd "$_m2c_root" || return 1
fi
# shellcheck disable=SC1091
source .gpu-bundle/activate.sh || return 1
_m2c_packs=$(ls .cubin-cache/*/cache.db.xz 2>/dev/null || true)
if [ -n "$_m2c_packs" ]; then
    export CUDA_TILE_CACHE_DIR=/tmp/cutile-cache
    # shellcheck disable=SC2086
    python3 -m mamba2_tutorial.cubin_cache unpack "$CUDA_TILE_CACHE_DIR" $_m2c_packs
fi

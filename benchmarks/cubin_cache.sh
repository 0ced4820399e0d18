#!/usr/bin/env bash
# Build the cubins a GPU run will need, here, without a GPU (mamba2_tutorial/cubin_cache.py), packed in
# .cubin-cache/NAME/cache.db.xz (ignored by git; name .cubin-cache/NAME in the device call's carry, next to
# .gpu-bundle: the two must stay under the 64 MiB a call carries):
#
#     bash benchmarks/cubin_cache.sh NAME [build options]    # e.g. bench --bench; a25 --tests --probe "..."
#
# Cache keys hash the kernels' Tile IR, which records the absolute paths of the source files, so the build
# runs where the GPU run will run: the project copied to /tmp/mamba2-cutile (the working tree: tracked and
# untracked files that git does not ignore) and cuda.tile installed under /tmp/gpu-site, the version this
# checkout's Python has (pip downloads the wheel once). On the GPU machine, benchmarks/gpu_env.sh sets up the
# same two paths. A pack is added to unless --fresh is given.
set -euo pipefail
if [ $# -lt 1 ] || [[ $1 == -* ]]; then
    echo "usage: bash benchmarks/cubin_cache.sh NAME [--bench] [--tests] [--probe V1,V2] [--fresh] ..." >&2
    exit 2
fi
NAME=$1
shift
ROOT=/tmp/mamba2-cutile
SITE=/tmp/gpu-site
PY=${PYTHON:-.venv/bin/python}
PY=$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")
here=$(pwd)

version=$("$PY" -c "import cuda.tile as ct; print(ct.__version__)")
if ! PYTHONPATH=$SITE "$PY" -c "
import sys, cuda.tile as ct
sys.exit(ct.__version__ != '$version' or not ct.__file__.startswith('$SITE/'))" 2>/dev/null; then
    rm -rf "$SITE"
    "$PY" -m pip install -q --no-deps --no-compile --target "$SITE" "cuda-tile==$version"
fi

rm -rf "$ROOT"
mkdir -p "$ROOT"
git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -C "$ROOT" -xf -
mkdir -p "$ROOT/.cubin-cache/$NAME"
if [ -f ".cubin-cache/$NAME/cache.db.xz" ]; then cp ".cubin-cache/$NAME/cache.db.xz" "$ROOT/.cubin-cache/$NAME/"; fi
(cd "$ROOT" && PYTHONPATH="$ROOT:$SITE" "$PY" -m mamba2_tutorial.cubin_cache build --out "$ROOT/.cubin-cache/$NAME" "$@")
mkdir -p "$here/.cubin-cache/$NAME"
cp "$ROOT/.cubin-cache/$NAME/cache.db.xz" "$here/.cubin-cache/$NAME/"
ls -la "$here/.cubin-cache/$NAME/cache.db.xz"
# what a device call carrying the bundle and every pack sends: the working tree, .gpu-bundle, .cubin-cache
total=$( (git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null;
          find .gpu-bundle .cubin-cache -type f -exec stat -c %s {} + 2>/dev/null) | awk '{s += $1} END {print s}')
limit=$((64 * 1024 * 1024))
echo "the working tree, .gpu-bundle and every pack: $((total / 1024)) KiB of the $((limit / 1024)) KiB a call carries"
if [ "$total" -gt "$limit" ]; then
    echo "too much for one call: carry only the packs that call needs (.cubin-cache/NAME)" >&2
fi

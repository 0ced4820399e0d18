#!/usr/bin/env bash
# Build the cubins a GPU run will need, here, without a GPU (mamba2_tutorial/cubin_cache.py), and leave them
# packed in .cubin-cache/cache.db.xz (ignored by git; name .cubin-cache in the device call's carry):
#
#     bash benchmarks/cubin_cache.sh --bench --probe "ship b8,s25 b8 cb early"   # options of `build`
#
# Cache keys hash the kernels' Tile IR, which records the absolute paths of the source files, so the build
# runs where the GPU run will run: the project copied to /tmp/mamba2-cutile (the working tree: tracked and
# untracked files that git does not ignore) and cuda.tile installed under /tmp/gpu-site, the version this
# checkout's Python has (pip downloads the wheel once). On the GPU machine, benchmarks/gpu_env.sh sets up the
# same two paths.
set -euo pipefail
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
mkdir -p "$ROOT/.cubin-cache"
if [ -f .cubin-cache/cache.db.xz ]; then cp .cubin-cache/cache.db.xz "$ROOT/.cubin-cache/"; fi
(cd "$ROOT" && PYTHONPATH="$ROOT:$SITE" "$PY" -m mamba2_tutorial.cubin_cache build --out "$ROOT/.cubin-cache" "$@")
mkdir -p "$here/.cubin-cache"
cp "$ROOT/.cubin-cache/cache.db.xz" "$here/.cubin-cache/"
ls -la "$here/.cubin-cache/cache.db.xz"

"""Hardware counters of every SSD kernel, ours and mamba_ssm's, under Nsight Compute (on the GPU machine).

    ncu --clock-control none --profile-from-start off --section SpeedOfLight --section Occupancy \\
        --section LaunchStats --section WarpStateStats -o $OUT/ssd python benchmarks/ncu_stages.py \\
        [--shape b8-l4096-h80] [--variants "scan shared HB2,fused 64x128"]
    ncu --import $OUT/ssd.ncu-rep --page details --csv > $OUT/ssd.csv

Each variant (``benchmarks/probe.py``'s names) and mamba_ssm's ``mamba_chunk_scan_combined`` run once to
compile and warm up, then once more inside ``cudaProfilerStart/Stop``: ncu profiles only that second call,
one launch per kernel. ncu's own per-kernel duration (``gpu__time_duration``, caches flushed before each
kernel) gives a per-kernel breakdown of mamba_ssm's five kernels next to ours, under the same conditions.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from probe import VARIANTS, _inputs  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="b8-l4096-h80")
    ap.add_argument("--variants", default="scan shared HB2,fused 64x128")
    ap.add_argument("--no-mamba", action="store_true")
    args = ap.parse_args(argv)

    from mamba2_tutorial.ssd import ssd_forward

    shape, inp = _inputs(args.shape)
    Q = shape.chunk_size
    runs = []
    for name in [v for v in args.variants.split(",") if v]:
        cfg = VARIANTS[name]
        runs.append((name, lambda cfg=cfg: ssd_forward(**inp, chunk_size=Q, backend="gpu", _config=cfg)))
    if not args.no_mamba:
        from mamba2_tutorial.bench import import_mamba_chunk_scan_combined

        try:
            mcsc = import_mamba_chunk_scan_combined()
            runs.append(("mamba_ssm", lambda: mcsc(inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"], Q)))
        except Exception as exc:  # noqa: BLE001 - reported; our kernels are still profiled
            print(f"mamba_ssm unavailable: {type(exc).__name__}: {exc}")
    for _name, fn in runs:                     # compile, autotune and warm up outside the profiled range
        fn()
        fn()
    torch.cuda.synchronize()
    for name, fn in runs:
        print(f"profiling {name}", flush=True)
        torch.cuda.cudart().cudaProfilerStart()
        fn()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Sweep of the SSD kernels' launch configurations on a GPU: check every variant, then time it.

``python -m mamba2_tutorial.tune [--budget-s 420] [--workers 8] [--out DIR]`` builds many
:class:`~mamba2_tutorial.kernels.configs.SSDConfig` variants (chunk_scan tiles, heads per block, occupancy;
chunk_state + state_passing fused or not, their tiles and hints), compiles them in parallel worker
processes (cuTile's disk cache then serves the main process), checks EACH variant against the float64
reference (``ssd_chunked`` on the GPU, float64) on the four benchmark shapes and on a ragged shape
with every option
(D, z, dt_bias, initial states, softplus; final states too): relative L2 error under 1e-2 for bf16 and no NaN,
else the variant is rejected. Then it times ``ssd_forward`` per variant and shape (median of CUDA events, cold
L2), combines the best chunk_scan and the best state stage per shape, and prints a compact table.

GPU only; a sweep, not a test: its results are recorded in ``docs/perf-notes.md`` and chosen as defaults in
``mamba2_tutorial/kernels/configs.py``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import torch

from .kernels.configs import DEFAULT, SSDConfig

SHAPE_NAMES = ("b8-l4096-h80", "b1-l32768-h80", "b4-l2048-h24", "b2-l8192-h128-g8")
GATE = 1e-2  # bf16 relative L2 error vs the float64 reference
#: a short A/B for a small device budget: the default, 2-D per-head mmas, the factored decay, the fused kernel
QUICK = ("base", "scan 2d HB1", "scan 2d HB2", "scan factored", "fused 64x64", "fused 64x32")


def scan_variants() -> list[tuple[str, SSDConfig]]:
    """chunk_scan variants (state stages at their defaults), most promising first."""
    v = [("base", DEFAULT)]
    for occ in (1, 2, 4):
        v.append((f"scan occ{occ}", SSDConfig(scan_hints=(occ, None))))
    for hb in (1, 2, 8):
        v.append((f"scan HB{hb}", SSDConfig(scan_heads=hb)))
    for tm, tk, tp, hb in ((128, 64, 64, 4), (128, 64, 64, 2), (128, 128, 64, 2), (64, 32, 64, 4),
                           (64, 64, 32, 8), (128, 64, 32, 4)):
        v.append((f"scan {tm}x{tk}x{tp} HB{hb}", SSDConfig(scan_tiles=(tm, tk, tp), scan_heads=hb)))
    for occ in (2, 4):
        v.append((f"scan 128x64x64 HB2 occ{occ}", SSDConfig(scan_tiles=(128, 64, 64), scan_heads=2,
                                                             scan_hints=(occ, None))))
    v.append(("scan HB8 occ2", SSDConfig(scan_heads=8, scan_hints=(2, None))))
    for lat in (3, 8):
        v.append((f"scan lat{lat}", SSDConfig(scan_latency=lat)))
    v.insert(1, ("scan factored", SSDConfig(scan_factored=True)))
    v.insert(2, ("scan factored 128x64x64 HB2", SSDConfig(scan_factored=True, scan_tiles=(128, 64, 64),
                                                            scan_heads=2)))
    v.insert(3, ("scan factored HB8", SSDConfig(scan_factored=True, scan_heads=8)))
    for hb in (1, 2, 4):
        v.insert(1, (f"scan 2d HB{hb}", SSDConfig(scan_2d=True, scan_heads=hb)))
    v.insert(4, ("scan factored occ2", SSDConfig(scan_factored=True, scan_hints=(2, None))))
    v.insert(5, ("scan factored HB8 occ2", SSDConfig(scan_factored=True, scan_heads=8, scan_hints=(2, None))))
    return v


def state_variants() -> list[tuple[str, SSDConfig]]:
    """chunk_state + state_passing variants (chunk_scan at its default)."""
    v = []
    for tp, tn in ((64, 128), (64, 64), (64, 32), (32, 64), (64, 16), (32, 32)):
        v.append((f"fused {tp}x{tn}", SSDConfig(fused=True, state_tiles=(tp, tn))))
    for occ in (2, 4):
        v.append((f"fused 64x32 occ{occ}",
                  SSDConfig(fused=True, state_tiles=(64, 32), state_hints=(occ, None))))
    for lat in (3, 8):
        v.append((f"fused 64x32 lat{lat}", SSDConfig(fused=True, state_tiles=(64, 32), state_latency=lat)))
    for occ in (2, 4):
        v.append((f"unfused cs occ{occ}", SSDConfig(state_hints=(occ, None))))
    return v


def _shapes():
    from .inputs import SHAPES, SSDShape

    shapes = {name: SHAPES[name] for name in SHAPE_NAMES}
    # ragged, every option, distinct sizes; one per chunk size used by the benchmark shapes
    for Q in (256, 128):
        shapes[f"ragged-q{Q}"] = SSDShape(2, 1000 + Q // 2 + 3, 8, 64, 2, 128, Q, f"ragged-q{Q}")
    return shapes


def _inputs(shape, seed=0):
    from .inputs import make_inputs

    full = shape.name.startswith("ragged")
    return make_inputs(shape, seed=seed, dtype=torch.bfloat16, device="cuda", D=full, z=full, dt_bias=full,
                       initial_states=full)


def _call(shape, inp, cfg, poison=False):
    from .ssd import ssd_forward

    # the ragged shapes' inputs carry dt_softplus=True (make_inputs with dt_bias)
    return ssd_forward(**inp, chunk_size=shape.chunk_size, return_final_states=True, backend="gpu",
                       _config=cfg, _poison=poison)


_WORKER_INPUTS: dict = {}


def _warm(task):
    """Worker: compile one variant for every shape (one launch each fills cuTile's disk cache)."""
    name, cfg = task
    t0 = time.perf_counter()
    try:
        for sname, shape in _shapes().items():
            if sname not in _WORKER_INPUTS:
                _WORKER_INPUTS[sname] = _inputs(shape)
            _call(shape, _WORKER_INPUTS[sname], cfg)
        torch.cuda.synchronize()
        return name, time.perf_counter() - t0, None
    except Exception as exc:  # noqa: BLE001 - a failed variant is reported, not fatal
        return name, time.perf_counter() - t0, f"{type(exc).__name__}: {str(exc)[:300]}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mamba2_tutorial.tune")
    ap.add_argument("--budget-s", type=float, default=420.0, help="stop starting new variants after this")
    ap.add_argument("--workers", type=int, default=8, help="parallel compile processes (0: none)")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--only", default="", help="comma-separated variant names (default: all)")
    ap.add_argument("--quick", action="store_true",
                    help=f"only the variants most likely to pay: {', '.join(QUICK)}")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    from .checks import relative_error
    from .reference import ssd_chunked
    from .timing import time_cuda

    variants = scan_variants() + state_variants()
    if args.only or args.quick:
        keep = set(args.only.split(",")) if args.only else set(QUICK)
        variants = [v for v in variants if v[0] in keep]
    log = open(os.path.join(args.out, "tune-log.txt"), "w")

    def say(*a):
        msg = " ".join(str(x) for x in a)
        print(msg, flush=True)
        log.write(msg + "\n")
        log.flush()

    say(f"device {torch.cuda.get_device_name()}  {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}  "
        f"{len(variants)} variants")

    # 1. compile everything in parallel (fills the disk cache). The default config first, alone: every variant
    # shares its kernels but one (measured 2026-12-02: with all variants started at once, 14 workers each
    # compiled the same shared kernels, 50-70 s per variant, and the sweep ran out of time before timing)
    failed: dict[str, str] = {}
    if args.workers > 0:
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        first = [v for v in variants if v[1] == DEFAULT][:1]
        rest = [v for v in variants if v not in first]
        for batch, workers in ((first, 1), (rest, max(1, min(args.workers, len(rest))))):
            with ctx.Pool(workers) as pool:
                for name, secs, err in pool.imap_unordered(_warm, batch):
                    say(f"  compiled {name:32s} {secs:6.1f} s" + (f"  FAILED {err}" if err else ""))
                    if err:
                        failed[name] = err
        say(f"compile phase {time.perf_counter() - t_start:.0f} s")

    # 2. references (float64 on the GPU), once per shape
    shapes = _shapes()
    inputs, refs = {}, {}
    for sname, shape in shapes.items():
        inputs[sname] = _inputs(shape, seed=1)
        inp64 = {k: v.double() if isinstance(v, torch.Tensor) else v for k, v in inputs[sname].items()}
        refs[sname] = ssd_chunked(**inp64, chunk_size=shape.chunk_size, return_final_states=True)
        del inp64
    torch.cuda.synchronize()
    say(f"references done {time.perf_counter() - t_start:.0f} s")

    # 3. check and time each variant
    results: dict[str, dict] = {}
    for name, cfg in variants:
        if name in failed:
            continue
        if time.perf_counter() - t_start > args.budget_s:
            say(f"budget reached: skipping {name}")
            continue
        rec = {"err": {}, "ms": {}}
        try:
            for sname, shape in shapes.items():
                y, fin = _call(shape, inputs[sname], cfg, poison=True)
                e = relative_error(y, refs[sname][0])
                ef = relative_error(fin, refs[sname][1])
                rec["err"][sname] = max(e, ef) if math.isfinite(e) and math.isfinite(ef) else float("nan")
            bad = {s: e for s, e in rec["err"].items() if not (e < GATE)}
            if bad:
                failed[name] = f"rejected: rel err {bad}"
                say(f"  REJECT {name}: {bad}")
                continue
            for sname in SHAPE_NAMES:
                shape, inp = shapes[sname], inputs[sname]
                fn = lambda shape=shape, inp=inp, cfg=cfg: _call(shape, inp, cfg)  # noqa: E731
                rec["ms"][sname] = time_cuda(fn, warmup_ms=10, rep_ms=30).median_ms
        except Exception as exc:  # noqa: BLE001
            failed[name] = f"{type(exc).__name__}: {str(exc)[:300]}"
            say(f"  FAIL {name}: {failed[name]}")
            continue
        results[name] = rec
        say(f"  {name:32s} " + " ".join(f"{rec['ms'][s]:7.3f}" for s in SHAPE_NAMES)
            + f"   max err {max(rec['err'].values()):.1e}")

    # 4. best chunk_scan x best state stage per shape, measured together
    scan_names = {n for n, _ in scan_variants()}
    cfgs = dict(variants)
    best = {}
    for sname in SHAPE_NAMES:
        def pick(names, sname=sname):
            cands = [(results[n]["ms"][sname], n) for n in names if n in results]
            return min(cands)[1] if cands else "base"
        bs = pick(scan_names)
        bt = pick([n for n in results if n not in scan_names] + ["base"])
        s_cfg, t_cfg = cfgs[bs], cfgs[bt]
        combo = SSDConfig(fused=t_cfg.fused, state_tiles=t_cfg.state_tiles, state_hints=t_cfg.state_hints,
                          passing_hints=t_cfg.passing_hints, scan_tiles=s_cfg.scan_tiles,
                          scan_heads=s_cfg.scan_heads, scan_hints=s_cfg.scan_hints,
                          scan_latency=s_cfg.scan_latency, state_latency=t_cfg.state_latency,
                          scan_factored=s_cfg.scan_factored, scan_2d=s_cfg.scan_2d)
        shape, inp = shapes[sname], inputs[sname]
        y, fin = _call(shape, inp, combo, poison=True)
        e = max(relative_error(y, refs[sname][0]), relative_error(fin, refs[sname][1]))
        rsh = f"ragged-q{shape.chunk_size}"
        y2, f2 = _call(shapes[rsh], inputs[rsh], combo, poison=True)
        e2 = max(relative_error(y2, refs[rsh][0]), relative_error(f2, refs[rsh][1]))
        ms = time_cuda(lambda s=shape, i=inp, c=combo: _call(s, i, c), warmup_ms=10, rep_ms=100).median_ms
        base_ms = time_cuda(lambda s=shape, i=inp: _call(s, i, DEFAULT), warmup_ms=10, rep_ms=100).median_ms
        ok = e < GATE and e2 < GATE
        best[sname] = {"scan": bs, "state": bt, "config": repr(combo), "ms": ms, "base_ms": base_ms,
                       "err": e, "ragged_err": e2, "ok": ok}

    with open(os.path.join(args.out, "tune.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d %H:%M UTC",
                   time.gmtime()), "results": results, "failed": failed, "best": best}, f, indent=1)

    say("\n== all variants: ms per shape (median, cold L2); max rel err over 4 shapes + 2 ragged ==")
    say(f"{'variant':32s} " + " ".join(f"{s[:12]:>12s}" for s in SHAPE_NAMES) + "   err")
    for name, rec in results.items():
        say(f"{name:32s} " + " ".join(f"{rec['ms'][s]:12.3f}" for s in SHAPE_NAMES)
            + f"   {max(rec['err'].values()):.1e}")
    for name, why in failed.items():
        say(f"{name:32s} FAILED {why[:150]}")
    say("\n== best combination per shape (measured together) ==")
    for sname, bst in best.items():
        say(f"{sname:18s} {bst['ms']:.3f} ms (default {bst['base_ms']:.3f})  err {bst['err']:.1e} "
            f"ragged {bst['ragged_err']:.1e} ok={bst['ok']}  scan=[{bst['scan']}] state=[{bst['state']}]")
        say(f"    {bst['config']}")
    say(f"total {time.perf_counter() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

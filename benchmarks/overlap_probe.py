"""Does running launches side by side on several CUDA streams shorten the forward? (attempt 25)

    python benchmarks/overlap_probe.py [--shapes b8-l4096-h80] [--out DIR]

The fused state stage at b8-l4096-h80 runs 640 blocks at two per SM: 2.4 waves, the last 42% full. C Bᵀ
(``chunk_cb_kernel``) does not depend on the state stage, and the batch's parts do not depend on each other,
so other work could fill the idle SMs of that last wave (``SSDConfig.scan_cb_early``, ``batch_streams``,
``batch_stagger``). Side by side: each stage alone, C Bᵀ alone, C Bᵀ first on one stream, ``ssd_forward``
with each stream lever, and the state stage reading dt stored head-major. Every forward is checked against
the float64 reference before it is timed; times are medians of CUDA events on the calling stream
(``timing.time_cuda``, L2 flushed), which waits for every side stream at the end of each call. A sweep, not a
test: results go to docs/perf-notes.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

from mamba2_tutorial.kernels.configs import FAST_16BIT_CB, SSDConfig


def _probe_shape(sname, rep_ms, say, cfg=FAST_16BIT_CB):
    """Every variant on one benchmark shape; one line per variant through ``say``."""
    from mamba2_tutorial.checks import relative_error
    from mamba2_tutorial.inputs import SHAPES, make_inputs
    from mamba2_tutorial.kernels.chunk_scan_cb import (
        chunk_scan_cb_plan,
        launch_chunk_cb,
        launch_chunk_scan_cb,
    )
    from mamba2_tutorial.kernels.chunk_state import launch_chunk_state_passing
    from mamba2_tutorial.reference import ssd_chunked
    from mamba2_tutorial.ssd import ssd_forward
    from mamba2_tutorial.timing import time_cuda

    shape = SHAPES[sname]
    inp = make_inputs(shape, seed=1, dtype=torch.bfloat16, device="cuda", D=False)
    Q = shape.chunk_size
    x, dt, A, B, C = (inp[k] for k in ("x", "dt", "A", "B", "C"))
    b, l, h, p = x.shape
    g, n = C.shape[2], C.shape[3]
    inp64 = {k: v.double() if isinstance(v, torch.Tensor) else v for k, v in inp.items()}
    y_ref = ssd_chunked(**inp64, chunk_size=Q)
    del inp64
    t = chunk_scan_cb_plan(b, l, h, p, g, n, Q, x.dtype, cfg.scan_heads, cfg.scan_tiles).tiles
    lim = (0.0, float("inf"))

    def cb():
        return launch_chunk_cb(C, B, Q, t["TM"], t["TK"], "gpu", cb_dtype=torch.bfloat16)

    # dt stored head-major, (b, h, l), seen as a (b, l, h) view: the stage's (Q,) dt loads become
    # contiguous instead of a gather with stride h
    dt_hmajor = dt.transpose(1, 2).contiguous().transpose(1, 2)

    def state(dt=dt):
        return launch_chunk_state_passing(x, dt, A, B, Q, None, False, lim, None, "gpu",
                                          tiles=cfg.state_tiles, hints=cfg.state_hints, key_log2=True,
                                          form=cfg.state_form)

    def scan(st, CB):
        dt_out, dA_cs, init, _ = st
        return launch_chunk_scan_cb(x, dt_out, dA_cs, C, B, init, None, None, "gpu",
                                    max_heads_per_block=cfg.scan_heads, tiles=cfg.scan_tiles,
                                    hints=cfg.scan_hints, factored=3, whole_chunk=True,
                                    cb_dtype=torch.bfloat16, kd_ready=True, CB=CB)

    def with_config(**levers):  # ssd_forward with the shipped config plus attempt 25's stream levers
        lever_cfg = SSDConfig(**(vars(cfg) | levers))
        return lambda: ssd_forward(x, dt, A, B, C, Q, backend="gpu", _config=lever_cfg)

    def shipped():
        return ssd_forward(x, dt, A, B, C, Q, backend="gpu", _config=cfg)

    def cb_first():
        CB = cb()
        return scan(state(), CB)

    def alone_cb():
        return cb()

    st_fixed = state()
    CB_fixed = cb()

    def alone_scan():
        return scan(st_fixed, CB_fixed)

    def alone_state():
        return state()

    def state_hmajor():
        return state(dt=dt_hmajor)

    def transpose_dt():
        return dt.transpose(1, 2).contiguous()

    def shipped_hmajor():
        return scan(state(dt=dt_hmajor), cb())

    variants = {
        "state, dt head-major": state_hmajor,
        "dt transpose alone": transpose_dt,
        "chain, dt head-major given": shipped_hmajor,
        "shipped (ssd_forward)": shipped,
        "state alone": alone_state,
        "C B^T alone": alone_cb,
        "scan alone (C B^T given)": alone_scan,
        "C B^T first, one stream": cb_first,
        "C B^T on a side stream": with_config(scan_cb_early=True),
        "batch halves on 2 streams": with_config(batch_streams=2),
        "batch halves staggered": with_config(batch_streams=2, batch_stagger=True),
        "batch quarters on 4 streams": with_config(batch_streams=4),
        "batch quarters staggered": with_config(batch_streams=4, batch_stagger=True),
        "halves staggered, C B^T early": with_config(batch_streams=2, batch_stagger=True, scan_cb_early=True),
    }
    for name, fn in variants.items():
        try:
            y = fn()
            torch.cuda.synchronize()
            err = relative_error(y, y_ref) if isinstance(y, torch.Tensor) and y.shape == y_ref.shape \
                else float("nan")
            ms = time_cuda(fn, warmup_ms=10, rep_ms=rep_ms).median_ms
        except Exception as exc:  # noqa: BLE001 - reported, not fatal
            say(f"{sname:16s} {name:30s} FAILED {type(exc).__name__}: {str(exc)[:300]}")
            continue
        say(f"{sname:16s} {name:30s} {ms:.3f} ms" + (f"  err {err:.1e}" if err == err else ""))
    del inp, y_ref
    torch.cuda.empty_cache()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="b8-l4096-h80")
    ap.add_argument("--rep-ms", type=float, default=80.0)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args(argv)

    lines = []

    def say(s):
        print(s, flush=True)
        lines.append(s)

    for sname in args.shapes.split(","):
        _probe_shape(sname, args.rep_ms, say)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "overlap.txt"), "w") as f:
        f.write(f"{torch.cuda.get_device_name()} {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")
        f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

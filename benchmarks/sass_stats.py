"""Static resource report of the SSD kernels' sm_90 cubins, on a machine WITHOUT a GPU.

For each kernel variant: registers, stack frame (local memory per thread), static shared memory, and counts of
a few SASS instructions: HGMMA (Hopper warpgroup mma), HMMA (the older mma.sync), MUFU (exp2 and friends),
LDL/STL (local-memory loads/stores: spills or arrays kept in local memory), UTMALDG (TMA loads). Counts are
static (instructions in the binary), not executed counts: read them as "which instructions does the code
use".

Needs cuobjdump and nvdisasm (pip packages nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm; pass their folders
in PATH), and tileiras as ``python -m mamba2_tutorial compile`` does::

    PATH=/path/to/nvdisasm/bin:$PATH python benchmarks/sass_stats.py --cuobjdump /path/to/cuobjdump
"""

from __future__ import annotations

import argparse
import collections
import re
import subprocess
import tempfile
from pathlib import Path

import torch

from mamba2_tutorial.compile import _export
from mamba2_tutorial.kernels import chunk_scan as sc
from mamba2_tutorial.kernels import chunk_scan_cb as scb
from mamba2_tutorial.kernels import chunk_state as cs
from mamba2_tutorial.kernels._host import hinted
from mamba2_tutorial.kernels.segments import SegmentCarry

OPS = ("HGMMA", "HMMA", "MUFU", "LDL", "STL", "UTMALDG", "BAR")


def stats(kernel, args, cuobjdump: str, arch: str = "sm_90") -> dict:
    cubin = _export(kernel, args, "cubin", gpu_code=arch)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.cubin"
        path.write_bytes(cubin)
        res = subprocess.run([cuobjdump, "-res-usage", str(path)], capture_output=True, text=True).stdout
        sass = subprocess.run([cuobjdump, "-sass", str(path)], capture_output=True, text=True).stdout
    ops = collections.Counter()
    for line in sass.splitlines():
        m = re.search(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", line)
        if m:
            ops[m.group(1).split(".")[0]] += 1
    out = {}
    for k in ("REG", "STACK", "SHARED"):
        m = re.search(rf"{k}:(\d+)", res)
        out[k] = int(m.group(1)) if m else None
    return out | {k: ops[k] for k in OPS}


def scan_args(TM=64, TK=64, TP=64, HB=4, lat=0, factored=False, Q=256, b=2, l=1024, h=8, p=64, g=1, n=128):
    dtype = torch.bfloat16
    x = torch.randn(b, l, h, p).to(dtype)
    C, B = torch.randn(b, l, g, n).to(dtype), torch.randn(b, l, g, n).to(dtype)
    nch = -(-l // Q)
    dt = torch.rand(b, h, nch, Q)
    S = torch.randn(b, nch, h, p, n).to(dtype)
    return (x, torch.zeros(1, 1, 1, 1, dtype=dtype), dt, -dt.cumsum(-1), C, B, S, torch.zeros(1),
            torch.empty_like(x), h // g, Q, TM, TK, TP, n, HB, 0, False, lat, factored)


def fused_args(TP, TN, TK, Q=256, b=2, l=1024, h=8, p=64, g=1, n=128, form=0):
    dtype = torch.bfloat16
    x, B = torch.randn(b, l, h, p).to(dtype), torch.randn(b, l, g, n).to(dtype)
    nch = -(-l // Q)
    return (x, B, torch.rand(b, l, h), -torch.rand(h), torch.zeros(1), torch.zeros(1, 1, 1, 1),
            torch.empty(b, h, nch, Q), torch.empty(b, h, nch, Q), torch.empty(b, nch, h, p, n, dtype=dtype),
            torch.empty(b, h, p, n), h // g, 0.0, float("inf"), Q, TK, TP, TN, False, False, False, 0, form)


def scan_cb_args(TM=64, TK=64, TP=64, HB=1, lat=0, factored=False, Q=256, b=2, l=1024, h=8, p=64, g=1, n=128):
    args = list(scan_args(TM, TK, TP, HB, lat, factored, Q, b, l, h, p, g, n))
    args[5] = torch.randn(b, -(-l // Q), g, Q, Q)   # CB (b, nchunks, g, Q, Q) float32 instead of B
    return tuple(args)


def scan_chunk_args(carry=False, cb_dtype=torch.bfloat16, unroll=False, head_loop=1, **kw):
    """chunk_scan_cb_chunk_kernel's arguments: scan_cb_args plus the segment carry (or placeholders)."""
    args = list(scan_cb_args(**kw))
    args[5] = args[5].to(cb_dtype)
    b, nch, h, p, n = args[6].shape
    seg = None
    if carry:
        seg = SegmentCarry(torch.randn(b, 2, h, p, n).to(args[0].dtype), -torch.rand(b, h, nch), -(-nch // 2))
    return scb.chunk_kernel_args(tuple(args), seg, "cpu", unroll, head_loop)


def variants(only: str = ""):
    if only:
        yield from (v for v in variants() if only in v[0])
        return
    k = sc.chunk_scan_kernel
    yield "chunk_scan base (64x64x64 HB4)", k, scan_args()
    yield "chunk_scan factored", k, scan_args(factored=True)
    for hb in (1, 2, 8):
        yield f"chunk_scan HB{hb}", k, scan_args(HB=hb)
    yield "chunk_scan 128x64x64 HB2", k, scan_args(TM=128, HB=2)
    yield "chunk_scan lat3", k, scan_args(lat=3)
    for hb in (1, 2, 4):
        yield f"chunk_scan_heads (2-D) HB{hb}", sc.chunk_scan_heads_kernel, scan_args(HB=hb)
    yield "chunk_scan occupancy 2", hinted(k, 2), scan_args()
    for tp, tn, tk in ((64, 128, 64), (64, 128, 128), (64, 128, 256), (64, 64, 64), (64, 64, 128),
                       (64, 32, 128), (32, 32, 64)):
        yield f"fused {tp}x{tn} TK{tk}", cs.chunk_state_passing_kernel, fused_args(tp, tn, tk)
    # attempt 24: the fused stage's FORM (chunk_state.STATE_KD 1, STATE_DT_ONCE 2, STATE_ACC 4), at the
    # compiler's occupancy with 256 rows per mma step and at occupancy 2 with 128 (configs.STATE_OCC2: form 7)
    for form in (0, 1, 2, 3, 4, 6, 7):
        yield (f"fused 64x128 TK256 form{form}", cs.chunk_state_passing_kernel,
               fused_args(64, 128, 256, form=form))
        yield (f"fused 64x128 TK128 occ2 form{form}", hinted(cs.chunk_state_passing_kernel, 2),
               fused_args(64, 128, 128, form=form))
    k = scb.chunk_scan_cb_kernel
    yield "chunk_scan_cb HB1", k, scan_cb_args()
    yield "chunk_scan_cb HB1 occ3", hinted(k, 3), scan_cb_args()
    yield "chunk_scan_cb HB1 occ4", hinted(k, 4), scan_cb_args()
    yield "chunk_scan_cb HB2", k, scan_cb_args(HB=2)
    yield "chunk_scan_cb HB2 occ2", hinted(k, 2), scan_cb_args(HB=2)
    yield "chunk_scan_cb HB4", k, scan_cb_args(HB=4)
    yield "chunk_scan_cb HB1 occ3 factored", hinted(k, 3), scan_cb_args(factored=True)
    yield "chunk_scan_cb HB2 occ2 factored", hinted(k, 2), scan_cb_args(HB=2, factored=True)
    yield "chunk_scan_cb 128x64x64 HB1 occ2", hinted(k, 2), scan_cb_args(TM=128)
    k = scb.chunk_scan_cb_chunk_kernel
    yield "chunk_scan_cb_chunk HB1 occ3", hinted(k, 3), scan_chunk_args(cb_dtype=torch.float32)
    yield "chunk_scan_cb_chunk HB1 occ2", hinted(k, 2), scan_chunk_args(cb_dtype=torch.float32)
    # attempts 15-16: bf16 C Bᵀ at occupancy 4, without and with the segment carry
    yield "chunk_scan_cb_chunk cb16 occ4", hinted(k, 4), scan_chunk_args()
    yield "chunk_scan_cb_chunk cb16 carry occ4", hinted(k, 4), scan_chunk_args(carry=True)
    yield "chunk_scan_cb_chunk cb16 carry occ3", hinted(k, 3), scan_chunk_args(carry=True)
    for occ in (5, 6, 8):  # more blocks per SM than the shipped 4 (smem-bound: 53 KB per block at 4)
        yield f"chunk_scan_cb_chunk cb16 occ{occ}", hinted(k, occ), scan_chunk_args()
    for occ in (2, 3, 4):  # attempt 19: full chunks as one unrolled body
        yield f"chunk_scan_cb_chunk cb16 unroll occ{occ}", hinted(k, occ), scan_chunk_args(unroll=True)
    # attempt 20: the factored decay (1) and the factored decay in bf16 (2), a loop over 2 head blocks
    for f in (1, 2, 3):  # 3: attempt 23, the key-log2 form
        yield f"chunk_scan_cb_chunk cb16 factored{f} occ4", hinted(k, 4), scan_chunk_args(factored=f)
    yield ("chunk_scan_cb_chunk cb16 factored1 hl2 occ4", hinted(k, 4),
           scan_chunk_args(factored=1, head_loop=2))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cuobjdump", default="cuobjdump")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--only", default="", help="only variants whose name contains this")
    args = ap.parse_args()
    print(f"{'variant':32s} " + " ".join(f"{c:>7s}" for c in ("REG", "STACK", "SHARED") + OPS))
    for name, kernel, kargs in variants(args.only):
        s = stats(kernel, kargs, args.cuobjdump, args.arch)
        cols = ("REG", "STACK", "SHARED") + OPS
        print(f"{name:32s} " + " ".join(f"{s[c]!s:>7s}" for c in cols), flush=True)


if __name__ == "__main__":
    main()

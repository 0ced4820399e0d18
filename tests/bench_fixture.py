"""A TEST FIXTURE for the benchmark code: the harness run on a CPU with stand-in implementations and FAKE
timings.

Nothing here is a measurement. The stand-ins compute the right function with the PyTorch reference (so the
correctness gate passes for real), and the "times" are made-up multiples of each shape's roofline floor, so
that tables and figures have something to draw. The fixture's ``device`` says so, and it is never shipped
under ``mamba2_tutorial/data/``. Regenerate it with::

    .venv/bin/python tests/bench_fixture.py          # writes tests/data/bench_results_fixture.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script
    sys.path.insert(0, str(ROOT))

from mamba2_tutorial import bench, reference, roofline  # noqa: E402
from mamba2_tutorial.inputs import SHAPES  # noqa: E402

FIXTURE_PATH = ROOT / "tests" / "data" / "bench_results_fixture.json"
FIXTURE_DEVICE = "TEST FIXTURE: CPU stand-ins with FAKE timings, not a measurement"
# fake time = factor x roofline floor (made up, only so that plots have something to show)
FAKE_FACTORS = {"cutile": 1.8, "mamba_ssm": 6.0, "fla": 5.0, "torch": 150.0}
FAKE_KERNEL_FACTORS = {"chunk_state": 1.5, "state_passing": 1.3, "chunk_state_passing": 1.4,
                       "chunk_scan": 1.6}
FIXTURE_SHAPES = ("tiny", "tiny-g3", "small", "small-pow2")
FIXTURE_SWEEP = (32, 64, 128, 256)


def simple_gla(q, k, v, g, scale=1.0):
    """fla's chunk_simple_gla as a quadratic form in float64: o_t = Σ_{s≤t} scale·(q_t·k_s)·exp(G_t − G_s)·v_s
    with G the cumsum of g over the sequence. q, k (b, l, h, n), v (b, l, h, p), g (b, l, h)."""
    q, k, v, g = (t.to(torch.float64) for t in (q, k, v, g))
    G = g.cumsum(dim=1)  # (b, l, h)
    scores = torch.einsum("bthn,bshn->bhts", q, k) * scale
    decay = G.permute(0, 2, 1)[..., :, None] - G.permute(0, 2, 1)[..., None, :]  # (b, h, t, s)
    l = q.shape[1]
    causal = torch.ones(l, l, dtype=torch.bool).tril()
    weights = torch.where(causal, scores * torch.exp(decay.clamp(max=0.0)), 0.0)
    return torch.einsum("bhts,bshp->bthp", weights, v)


def _reference_kernels(inp, Q):
    """The reference's chunked steps standing in for our three kernels (cumsum fused into the first)."""
    x, dt, A, B, C = (inp[k] for k in ("x", "dt", "A", "B", "C"))

    def stage1():
        dt_out, dA = reference.chunk_cumsum(dt.float(), A, Q)
        return dt_out, dA, reference.chunk_state(x, B, dt_out, dA)

    dt_out, dA, states = stage1()
    init, _ = reference.state_passing(states, dA)

    def chain():
        d, a, s = stage1()
        return reference.chunk_scan(x, d, a, C, B, reference.state_passing(s, a)[0])

    return {
        "chunk_state": stage1,
        "state_passing": lambda: reference.state_passing(states, dA),
        "chunk_scan": lambda: reference.chunk_scan(x, dt_out, dA, C, B, init),
        "chain": chain,
        "meta": {"state_bytes": states.element_size(), "init_state_bytes": init.element_size()},
    }


def stand_in_impls() -> dict[str, bench.Impl]:
    """Correct CPU stand-ins under the four implementation names (NOT the real implementations)."""

    def chunked(inp, Q):
        return lambda: reference.ssd_chunked(inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"], Q)

    def quadratic(inp, Q):
        return lambda: reference.ssd_quadratic(inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"])

    def gla(inp, Q):
        f = bench.fla_inputs(inp)
        return lambda: simple_gla(f["q"], f["k"], f["v"], f["g"]).to(inp["x"].dtype)

    return {
        "cutile": bench.Impl("cutile", chunked, kernels=_reference_kernels),
        "mamba_ssm": bench.Impl("mamba_ssm", quadratic),
        "fla": bench.Impl("fla", gla),
        "torch": bench.Impl("torch", chunked),
    }


def fake_timer(specs):
    """timer(fn, label) -> a made-up time: FAKE_FACTORS x the roofline floor of the shape in the label."""
    floors = {s.name: roofline.floor_ms(s.dims) for s in specs}
    kfloors = {s.name: roofline.kernel_floors_ms(s.dims) | roofline.kernel_floors_ms(s.dims, fused=True)
               for s in specs}
    calls = []

    def timer(fn, label=""):
        calls.append(label)
        parts = label.split("/")
        if len(parts) == 3 and parts[1] == "kernel":
            return FAKE_KERNEL_FACTORS[parts[2]] * kfloors[parts[0]][parts[2]]
        return FAKE_FACTORS[parts[1]] * floors[parts[0]]

    timer.calls = calls
    return timer


def make_fixture() -> dict:
    shapes = bench.default_shapes(FIXTURE_SHAPES)
    sweep = [
        bench.ShapeSpec(f"b2-l{l}-h8", roofline.dims_of(SHAPES["small"].replace(seqlen=l)))
        for l in FIXTURE_SWEEP
    ]
    results = bench.run_benchmark(
        shapes,
        impls=stand_in_impls(),
        dtype=torch.bfloat16,
        device="cpu",
        timer=fake_timer(shapes + sweep),
        ceilings=roofline.H200_CEILINGS,
        sweep=sweep,
        progress=False,
        device_name=FIXTURE_DEVICE,
        settings={"note": "test fixture: fake timings"},
    )
    results["date"] = "2000-01-01 (test fixture)"
    results["versions"] = {k: None for k in results["versions"]} | {"torch": "fixture"}
    results["overhead"] = {  # made-up numbers in the schema's shape
        "name": "fixture",
        "dims": {"b": 1, "l": 256, "h": 8, "p": 64, "g": 1, "n": 128, "Q": 64},
        "impls": {
            "cutile": {"event_ms": 0.02, "host_us": 40.0, "loop_us": 45.0, "graph_us": 21.0},
            "mamba_ssm": {"event_ms": 0.03, "host_us": 90.0, "loop_us": 95.0, "graph_us": 32.0},
        },
    }
    return results


def _rounded(obj):
    if isinstance(obj, float):
        return float(f"{obj:.6g}")
    if isinstance(obj, dict):
        return {k: _rounded(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_rounded(v) for v in obj]
    return obj


if __name__ == "__main__":
    FIXTURE_PATH.parent.mkdir(parents=True, exist_ok=True)
    FIXTURE_PATH.write_text(json.dumps(_rounded(make_fixture()), indent=1) + "\n")
    print(f"wrote {FIXTURE_PATH}")

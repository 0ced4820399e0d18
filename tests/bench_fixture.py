"""A TEST FIXTURE for the benchmark code: the harness run on a CPU with stand-in implementations and FAKE
timings.

Nothing here is a measurement. The stand-ins compute the right function with the PyTorch reference (so the
correctness gate passes for real), and the "times" are made-up multiples of each shape's roofline floor, so
that tables and figures have something to draw: one small shape ("tiny") is made host-bound (its end-to-end
time three times its kernels'), and the staged steps of ``bench --steps`` at the two real step shapes get
made-up multiples of each stage's floor (``make_steps``: the real steps, configs and ideas; fake times and
errors). The fixture's ``device`` says so, and it is never shipped under ``mamba2_tutorial/data/``.
Regenerate it with::

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

from mamba2_tutorial import reference  # noqa: E402
from mamba2_tutorial.lessons.inputs import SHAPES  # noqa: E402
from mamba2_tutorial.perf import bench, roofline  # noqa: E402
from mamba2_tutorial.perf.results import step_costs  # noqa: E402

FIXTURE_PATH = ROOT / "tests" / "data" / "bench_results_fixture.json"
FIXTURE_DEVICE = "TEST FIXTURE: CPU stand-ins with FAKE timings, not a measurement"
# made-up times, only so that tables and plots have something to show: each kernel a factor x its roofline
# floor; ours end to end FAKE_E2E_OVERHEAD x its kernels' sum; the others a factor x ours
FAKE_FACTORS = {"taught": 1.9, "mamba_ssm": 2.6, "fla": 2.2, "tilegym": 1.3, "torch": 60.0}
FAKE_E2E_OVERHEAD = 1.02
#: shapes whose fake end-to-end time is this many times more (the kernels' times stay): host-bound
FAKE_HOST_BOUND = {"tiny": 3.0}
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
    """Correct CPU stand-ins under the six implementation names (NOT the real implementations)."""

    def chunked(inp, Q):
        return lambda: reference.ssd_chunked(inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"], Q)

    def quadratic(inp, Q):
        return lambda: reference.ssd_quadratic(inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"])

    def gla(inp, Q):
        f = bench.fla_inputs(inp)
        return lambda: simple_gla(f["q"], f["k"], f["v"], f["g"]).to(inp["x"].dtype)

    def tilegym(inp, Q):  # TileGym's signature and semantics: its own dt dtype, A and D as float32 (h,)
        a = bench.tilegym_inputs(inp, Q)

        return lambda: reference.ssd_chunked(a["x"], a["dt"], a["a"], a["b"], a["c"], Q, D=a["d"],
                                             initial_states=a["init_state"], return_final_states=True)[0]

    return {
        "cutile": bench.Impl("cutile", chunked, kernels=_reference_kernels),
        "taught": bench.Impl("taught", chunked),
        "mamba_ssm": bench.Impl("mamba_ssm", quadratic),
        "fla": bench.Impl("fla", gla),
        "tilegym": bench.Impl("tilegym", tilegym),
        "torch": bench.Impl("torch", chunked),
    }


def fake_timer(specs):
    """timer(fn, label) -> a made-up time: a kernel FAKE_KERNEL_FACTORS x its roofline floor; ours end to end
    a little more than its kernels' sum (FAKE_HOST_BOUND times more where host-bound); the others
    FAKE_FACTORS x ours."""
    kfloors = {s.name: roofline.kernel_floors_ms(s.dims) | roofline.kernel_floors_ms(s.dims, fused=True)
               for s in specs}
    calls = []

    def timer(fn, label=""):
        calls.append(label)
        parts = label.split("/")
        if len(parts) == 3 and parts[1] == "kernel":
            return FAKE_KERNEL_FACTORS[parts[2]] * kfloors[parts[0]][parts[2]]
        # ours end to end: the stand-in's three kernels and a little launch overhead (more where host-bound)
        kf = kfloors[parts[0]]
        ours = FAKE_E2E_OVERHEAD * sum(FAKE_KERNEL_FACTORS[k] * kf[k] for k in roofline.KERNELS)
        if parts[1] == "cutile":
            return FAKE_HOST_BOUND.get(parts[0], 1.0) * ours
        return FAKE_FACTORS[parts[1]] * ours

    timer.calls = calls
    return timer


#: fake stage times of the staged steps, as multiples of each stage's floor (made up, in the spirit of a
#: real run: each step faster than the one before; the state stage of a long sequence slow until segmented)
FAKE_STEP_FACTORS = {
    "taught": {"chunk_state": 3.0, "state_passing": 2.6, "chunk_scan": 3.6},
    "fuse state passing": {"chunk_state_passing": 2.3, "chunk_scan": 3.6},
    "2-D scan, occupancy 3": {"chunk_state_passing": 2.3, "chunk_scan": 2.9},
    "C Bᵀ once, whole-chunk scan": {"chunk_state_passing": 2.3, "chunk_scan": 2.3},
    "C Bᵀ in bf16": {"chunk_state_passing": 2.3, "chunk_scan": 2.1},
    "key-log2 decay": {"chunk_state_passing": 2.3, "chunk_scan": 2.05},
    "state stage tuned": {"chunk_state_passing": 1.95, "chunk_scan": 2.05},
    "segmented state stage": {"chunk_state_passing": 2.0, "chunk_scan": 2.3},
}
FAKE_LONG_STATE = 2.1  # a long sequence's fused state stage before it is segmented: idle SMs
FAKE_STEP_OVERHEAD = 1.01  # end to end over the sum of the stages


def make_steps(names=bench.STEP_SHAPES, ceilings=roofline.H200_CEILINGS) -> list[dict]:
    """The "steps" section of a ``bench --steps`` run at ``names``, with the real steps (``steps_for``, the
    segmented one where the shape's class is long, as ``bench_steps`` picks them) and FAKE times."""
    import torch

    from mamba2_tutorial.fast.config import config_to_json
    from mamba2_tutorial.fast.steps import steps_for
    from mamba2_tutorial.fast.tuning import load_table, problem_class, segments_for

    table = load_table()
    out = []
    for spec in bench.default_shapes(names):
        d = spec.dims
        long = problem_class((d.b, d.l, d.h, d.p, d.n, d.Q), torch.bfloat16, table).split("/")[2] == "long"
        rec = {"name": spec.name, "dims": d.as_dict(), "dtype": "bfloat16", "steps": []}
        for st in steps_for(segmented=long, segments=segments_for(d.b, d.h, d.nchunks, table)):
            row = {"name": st.name, "idea": st.idea, "config": config_to_json(st.config)}
            floors = {k: c.floor_ms(ceilings) for k, c in step_costs(rec, row).items()}
            kms = {}
            segmented = row["config"]["state"]["kind"] == "segmented"
            for k, f in FAKE_STEP_FACTORS[st.name].items():
                slow = FAKE_LONG_STATE if long and k == "chunk_state_passing" and not segmented else 1.0
                kms[k] = f * slow * floors[k]
            bf16_cb = row["config"]["scan"].get("cb_dtype") == "bfloat16"
            row |= {"ms": FAKE_STEP_OVERHEAD * sum(kms.values()), "rel_err": 2.9e-3 if bf16_cb else 2.4e-3,
                    "kernels_ms": kms}
            rec["steps"].append(row)
        out.append(rec)
    return out


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
    results["steps"] = make_steps()
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

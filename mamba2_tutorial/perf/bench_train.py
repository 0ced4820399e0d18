"""The training benchmark: forward plus backward of the SSD, ours against mamba_ssm's Triton path and fla.

``python -m mamba2_tutorial bench-train [--shapes NAME ...] [--dtype bf16] [--out FILE.json]`` runs, for every
shape, in one process:

1. inputs from ``make_inputs`` (x, dt, A, B, C, as the forward benchmark) and a random output gradient dout;
2. a correctness gate for every implementation that imports, on a slice of the problem small enough for
   float64 autograd (the first batch element, at most 2048 positions, the same heads, head and state sizes):
   each gradient's relative L2 error against autograd through the float64 reference ``ssd_chunked``. An
   implementation that fails, or raises, is reported and not timed. fla's ``chunk_simple_gla`` computes the
   SSD in other variables (q = C, k = B, v = dt·x, g = dt·A, ``bench.fla_inputs``): it is checked through
   that change of variables (:func:`fla_ssd`), so its gradients of x, dt, A, B, C pass the same gate, and
   timed in its own variables (the gradients of q, k, v, g), the change of variables left out;
3. timings, median device time per call after warm-up with a cold L2 (``timing.time_cuda``), of the forward
   as training runs it (what the backward needs is kept) and of forward plus backward,
   ``torch.autograd.grad(out, inputs, dout)``: the gradients of every input, none accumulated; and the
   host's time to issue one such step (``timing.time_host``): where it is close to the step's time, the
   step is host-bound (Python and launch overhead), not GPU-bound.

Then a table, and with ``--out`` the JSON shipped as ``data/benchmarks/h200_train.json`` (an H200's run) or
``h100_train.json`` (an H100's; :data:`SHIPPED_TRAINING`). ``--stages`` adds
where the backward's time goes (:func:`backward_stages`): the taught and the fast stages side by side.

fla refuses its gated backward on Hopper GPUs with Triton 3.4 to 3.7.0 (a Triton miscompile of one of its
kernels; fla asks for Triton 3.7.1). ``--lift-fla-guard`` lifts that refusal, so that the gradient gate
decides on the shapes measured: wrong gradients are reported and not timed. The results say whether it was
lifted.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import torch

from ..lessons.checks import relative_error, ssd_gradients
from ..lessons.inputs import BENCHMARK_SHAPES, get_shape, make_inputs
from .bench import DTYPES, fla_inputs, import_mamba_chunk_scan_combined, tilegym_inputs, versions
from .sources import kernels_sha256
from .timing import time_cuda, time_host

TRAIN_IMPLS = ("cutile", "taught", "mamba_ssm", "fla", "tilegym")
GRADS = ("x", "dt", "A", "B", "C")
#: relative L2 error of a gradient above which an implementation is not timed. A is a sum over the whole
#: problem, with cancellation, and gets a wider gate.
GRAD_GATE = {torch.bfloat16: 2e-2, torch.float16: 1e-2, torch.float32: 1e-3}
SUMMED_GATE = 3.0
CHECK_LEN = 2048
#: back-to-back training steps timed on the host (``host_ms``: the host's time to issue one)
HOST_STEPS = 20
SCHEMA = 1


def _cutile(fast: bool, backend: str = "gpu"):
    from ..fast.forward import ssd_forward
    from ..kernels.forward import ssd_forward_taught

    fn = ssd_forward if fast else ssd_forward_taught
    return lambda x, dt, A, B, C, Q: fn(x, dt, A, B, C, Q, backend=backend)


def fla_ssd(x, dt, A, B, C, Q):
    """fla's ``chunk_simple_gla`` as an SSD ``f(x, dt, A, B, C, Q) -> out``: the change of variables of
    ``bench.fla_inputs`` in torch ops, so autograd carries fla's gradients back to x, dt, A, B, C. fla picks
    its own chunk size, so Q is not used."""
    from fla.ops.simple_gla import chunk_simple_gla

    f = fla_inputs({"x": x, "dt": dt, "A": A, "B": B, "C": C})
    return chunk_simple_gla(q=f["q"], k=f["k"], v=f["v"], g=f["g"], scale=1.0)[0]


class _TileGymSSD(torch.autograd.Function):
    """TileGym's cuTile Mamba-2 forward and backward (``tilegym.ops.cutile.mamba2``) as one autograd op on
    x, dt, A, B, C: its own API (a and d (h,) float32, d = 0, dt in x's dtype and already processed, a float32
    zero initial state; :func:`~mamba2_tutorial.perf.bench.tilegym_inputs`), its backward given a zero
    gradient for its final state. Its backward runs its forward's state pass again, as TileGym designs it."""

    @staticmethod
    def forward(ctx, x, dt, A, B, C, Q):
        from tilegym.ops.cutile.mamba2 import mamba2_chunk_forward

        a = tilegym_inputs({"x": x, "dt": dt, "A": A, "B": B, "C": C}, Q)
        ctx.save_for_backward(x, dt, A, B, C)
        ctx.Q = Q
        return _first(mamba2_chunk_forward(a["x"], a["a"], a["b"], a["c"], a["d"], a["dt"], a["init_state"],
                                           chunk_size=Q))

    @staticmethod
    def backward(ctx, dout):
        from tilegym.ops.cutile.mamba2 import mamba2_chunk_backward

        x, dt, A, B, C = ctx.saved_tensors
        a = tilegym_inputs({"x": x, "dt": dt, "A": A, "B": B, "C": C}, ctx.Q)
        dx, da, db, dc, _dd, ddt, _dinit = mamba2_chunk_backward(
            a["x"], a["a"], a["b"], a["c"], a["d"], a["dt"], a["init_state"], dout.contiguous(),
            torch.zeros_like(a["init_state"]), chunk_size=ctx.Q)
        return dx.to(x.dtype), ddt.to(dt.dtype), da.to(A.dtype), db.to(B.dtype), dc.to(C.dtype), None


def tilegym_ssd(x, dt, A, B, C, Q):
    """TileGym's SSD as ``f(x, dt, A, B, C, Q) -> out``, differentiable (:class:`_TileGymSSD`); its own tuner
    searches its launch settings on the first call of each shape (the first call is timed apart)."""
    return _TileGymSSD.apply(x, dt, A, B, C, Q)


def lift_fla_guard() -> bool:
    """Lift fla's refusal to run its gated backward on Hopper with Triton < 3.7.1 (``chunk_bwd_dqkwg``);
    True if there was one to lift. Whether its gradients are right is then up to the gradient gate."""
    from fla.ops.common import chunk_o

    if getattr(chunk_o, "TRITON_ABOVE_3_7_1", True):
        return False
    chunk_o.TRITON_ABOVE_3_7_1 = True
    return True


def load_train_impls(names: Sequence[str], backend: str = "gpu"
                     ) -> tuple[dict[str, Callable], dict[str, str]]:
    """``{name: f(x, dt, A, B, C, Q) -> out}`` for the SSD implementations that import, and why not for the
    others. fla's is :func:`fla_ssd`, and :func:`prepare` times it in its own variables. ``backend="cpu"``
    runs our kernels on the CPU executor (only to test the harness)."""
    impls, missing = {}, {}
    for name in names:
        try:
            if name in ("cutile", "taught"):
                impls[name] = _cutile(name == "cutile", backend)
            elif name == "mamba_ssm":
                impls[name] = import_mamba_chunk_scan_combined()
            elif name == "fla":
                from fla.ops.simple_gla import chunk_simple_gla  # noqa: F401  (imports, or is missing)

                impls[name] = fla_ssd
            elif name == "tilegym":
                from tilegym.ops.cutile.mamba2 import mamba2_chunk_backward  # noqa: F401  (or missing)

                impls[name] = tilegym_ssd
            else:
                raise ValueError(f"unknown implementation {name!r}; choose from {TRAIN_IMPLS}")
        except ImportError as exc:
            missing[name] = f"did not import: {exc}"
    return impls, missing


def prepare(name: str, fn, inp: Mapping[str, torch.Tensor], Q: int, own_variables: bool = True):
    """``(forward, leaves)``: ``forward()`` returns the output, computed from ``leaves`` (which require grad).
    For fla, with ``own_variables``, the leaves are its own variables q, k, v, g, made once from x, dt, A, B,
    C (what is timed); else x, dt, A, B, C, as for the others (what is checked)."""
    if name == "fla" and own_variables:
        from fla.ops.simple_gla import chunk_simple_gla

        leaves = {k: v.detach().requires_grad_() for k, v in fla_inputs(inp).items()}
        return (lambda: chunk_simple_gla(q=leaves["q"], k=leaves["k"], v=leaves["v"], g=leaves["g"],
                                         scale=1.0)[0]), leaves
    leaves = {k: inp[k].detach().clone().requires_grad_() for k in GRADS}
    return (lambda: _first(fn(leaves["x"], leaves["dt"], leaves["A"], leaves["B"], leaves["C"], Q))), leaves


def _first(out):
    return out[0] if isinstance(out, (tuple, list)) else out


class Reference:
    """What every implementation's gradients are checked against at one shape: a slice of the problem small
    enough for float64 autograd (the first batch element, at most :data:`CHECK_LEN` positions), its inputs in
    ``dtype``, a random output gradient, and the float64 output and gradients of ``ssd_chunked``. Built once
    per shape and shared by the implementations."""

    def __init__(self, shape, dtype, seed=0, device="cuda"):
        from ..reference import ssd_chunked

        self.dtype = dtype
        small = shape.scaled(batch=1, seqlen=min(shape.seqlen, CHECK_LEN))
        self.inp = make_inputs(small, seed=seed, dtype=dtype, device=device, D=False)
        self.Q = small.chunk_size
        gen = torch.Generator(device=device).manual_seed(seed + 1)
        self.dout = torch.randn(self.inp["x"].shape, generator=gen, device=device).to(dtype)
        self.out = ssd_chunked(**{k: v.double() for k, v in self.inp.items()}, chunk_size=self.Q)
        self.grads = ssd_gradients(ssd_chunked, self.inp, self.Q, self.dout, dtype=torch.float64)


def check(name, fn, shape, dtype, seed=0, device="cuda",
          reference: Reference | None = None) -> dict[str, float]:
    """Relative L2 errors against float64 autograd on a slice of ``shape`` (:class:`Reference`, built here
    unless given): the output and the gradients of x, dt, A, B, C. Raises AssertionError naming the first
    one over the gate. A given ``reference`` brings its own slice, dtype and seed."""
    ref = Reference(shape, dtype, seed, device) if reference is None else reference
    forward, leaves = prepare(name, fn, ref.inp, ref.Q, own_variables=False)
    out = forward()
    errors = {"out": relative_error(out, ref.out)}
    got = dict(zip(GRADS, torch.autograd.grad(out, list(leaves.values()), ref.dout)))
    errors |= {k: relative_error(got[k], ref.grads[k]) for k in GRADS}
    for k, err in errors.items():
        gate = GRAD_GATE[ref.dtype] * (SUMMED_GATE if k == "A" else 1.0)
        if not err <= gate:
            raise AssertionError(f"{name}: {'output' if k == 'out' else 'd' + k} relative error {err:.2e} > "
                                 f"{gate:.0e} against float64 autograd")
    return errors


def run(shape_names: Sequence[str], impl_names: Sequence[str], dtype, warmup_ms, rep_ms, seed=0,
        log=print, on_shape: Callable[[dict], None] | None = None, fla_guard: bool = True) -> dict:
    """Check and time every implementation at every shape. ``on_shape(results)`` is called after each shape
    with the results so far (``--out`` writes them, so a run stopped early keeps the shapes it finished).
    ``fla_guard=False`` lifts fla's refusal on Hopper (:func:`lift_fla_guard`)."""
    impls, missing = load_train_impls(impl_names)
    lifted = "fla" in impls and not fla_guard and lift_fla_guard()
    records = []
    results = {"schema_version": SCHEMA, "kind": "training", "device": torch.cuda.get_device_name(),
               "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
               "kernels_sha256": kernels_sha256(),  # which kernels this run measured (perf.sources)
               "dtype": str(dtype).replace("torch.", ""), "versions": versions(), "missing": missing,
               "settings": {"warmup_ms": warmup_ms, "rep_ms": rep_ms, "check_len": CHECK_LEN,
                            "timer": "CUDA events, median, L2 flushed before each call",
                            "fla_guard_lifted": lifted},
               "shapes": records}
    for sname in shape_names:
        shape = get_shape(sname)
        Q = shape.chunk_size
        inp = make_inputs(shape, seed=seed, dtype=dtype, device="cuda", D=False)
        gen = torch.Generator(device="cuda").manual_seed(seed + 1)
        rec = {"name": sname, "dims": shape.dims, "impls": {}}
        started = time.perf_counter()
        reference = Reference(shape, dtype, seed)
        log(f"{sname}: float64 reference gradients in {time.perf_counter() - started:.1f} s")
        for name, fn in impls.items():
            entry = {}
            started = time.perf_counter()
            try:
                entry["rel_err"] = check(name, fn, shape, dtype, seed, reference=reference)
            except Exception as exc:            # over the gate, or it raised (fla's refusal on Hopper, say)
                entry["error"] = _reason(name, exc)
                rec["impls"][name] = entry
                log(f"{sname} {name}: NOT TIMED: {entry['error']}")
                continue
            checked = time.perf_counter()
            forward, leaves = prepare(name, fn, inp, Q)
            params = list(leaves.values())
            try:
                first = time.perf_counter()  # the first step at this shape: compiles, TileGym's own tuning
                dout = torch.randn(forward().shape, generator=gen, device="cuda").to(dtype)

                def step(forward=forward, params=params, dout=dout):
                    return torch.autograd.grad(forward(), params, dout)

                step()
                torch.cuda.synchronize()
                entry["first_call_s"] = time.perf_counter() - first
                entry["fwd_ms"] = time_cuda(forward, warmup_ms=warmup_ms, rep_ms=rep_ms).median_ms
                entry["fwd_bwd_ms"] = time_cuda(step, warmup_ms=warmup_ms, rep_ms=rep_ms).median_ms
                # the host's time to issue one step: near fwd_bwd_ms, the step waits on Python, not the GPU
                entry["host_ms"] = time_host(step, n=HOST_STEPS, warmup=3).host_us / 1e3
            except Exception as exc:            # out of memory at the full shape, say
                entry = {"rel_err": entry["rel_err"], "error": _reason(name, exc)}
                rec["impls"][name] = entry
                log(f"{sname} {name}: NOT TIMED: {entry['error']}")
                continue
            rec["impls"][name] = entry
            log(f"{sname} {name}: forward {entry['fwd_ms']:.3f} ms, "
                f"forward+backward {entry['fwd_bwd_ms']:.3f} ms, host {entry['host_ms']:.3f} ms per step "
                f"(wall clock: check "
                f"{checked - started:.1f} s, timing {time.perf_counter() - checked:.1f} s)")
            del forward, leaves, params, step
            torch.cuda.empty_cache()
        records.append(rec)
        if on_shape is not None:
            on_shape(results)
    return results


def _reason(name: str, exc: Exception) -> str:
    if isinstance(exc, AssertionError):
        return str(exc)
    return f"{name}: raised {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def _median_timer(warmup_ms: float, rep_ms: float):
    """``fn -> median ms`` by :func:`time_cuda`."""
    return lambda fn: time_cuda(fn, warmup_ms=warmup_ms, rep_ms=rep_ms).median_ms


def backward_stages(shape, dtype, *, backend: str = "gpu", device: str = "cuda", warmup_ms: float = 25.0,
                    rep_ms: float = 100.0, seed: int = 0, timer=None, log=None) -> dict[str, float]:
    """Where the backward's time goes at one shape: ``{stage: median ms}`` for the training forward's
    kernels, the taught and the fast state-gradient stage (backward kernels 1-2), chunk stage (3-4) and whole
    backward (with the host steps), each timed alone on the intermediates of one training forward. Each chunk
    stage gets the dstates its own state stage makes (the taught one's float32, the fast one's in x's dtype
    where it runs the fused stage), as in the backward it belongs to.
    ``timer(fn) -> ms`` replaces ``time_cuda`` (a test runs this on the CPU executor with a trivial timer);
    ``log(line)``, when given, gets each time as it is measured."""
    from ..fast.backward import kernel_stages as fast_kernel_stages
    from ..fast.backward import ssd_backward_fast
    from ..fast.backward import state_grads_stage as fast_state_stage
    from ..fast.bwd_chunk import launch_chunk_bwd_heads
    from ..fast.forward import training_stages
    from ..fast.tuning import backward_config, ssd_config
    from ..kernels.backward import GradCall, ssd_backward_taught
    from ..kernels.bwd_chunk import launch_chunk_bwd
    from ..kernels.bwd_states import launch_state_grads
    from ..runtime.autograd import SSDInputs, SSDOptions

    timer = _median_timer(warmup_ms, rep_ms) if timer is None else timer
    inp = make_inputs(shape, seed=seed, dtype=dtype, device=device, D=False)
    x, dt, A, B, C = (inp[k] for k in GRADS)
    b, l, h, p = x.shape
    Q = shape.chunk_size
    cfg = ssd_config(b, l, h, p, B.shape[3], Q, dtype, x.device)
    bwd = backward_config(b, l, h, p, B.shape[3], Q, dtype, x.device)
    opts = SSDOptions(Q, False, (0.0, float("inf")), backend, training_stages(cfg))

    def forward():
        return opts.stages(SSDInputs(x, dt, A, B, C, None, None, None), opts)

    dt_out, dA_cs, init, _, _ = forward()
    gen = torch.Generator(device=device).manual_seed(seed + 2)
    dout = torch.randn(x.shape, generator=gen, device=device).to(dtype)
    state_args = (dout, C, dA_cs, init, None, backend)
    call = GradCall(dy=dout, x=x, dt_out=dt_out, dA_cumsum=dA_cs, C=C, B=B, chunk_init_states=init,
                    dfinal_states=None, D=None, backend=backend)
    dstates = {"taught": launch_state_grads(*state_args)[0], "fast": fast_state_stage(call, bwd.state)[0]}
    saved = (dout, x, dt, A, B, C, dt_out, dA_cs, init)
    stages = {
        "training forward (fast)": forward,
        "state grads, kernels 1-2 (taught)": lambda: launch_state_grads(*state_args),
        "state grads, kernels 1-2 (fast)": lambda: fast_state_stage(call, bwd.state),
        "chunk grads, kernels 3-4 (taught)": lambda: launch_chunk_bwd(
            x, dout, dt_out, dA_cs, C, B, init, dstates["taught"], None, backend),
        "chunk grads, kernels 3-4 (fast)": lambda: launch_chunk_bwd_heads(call, dstates["fast"]),
        "kernels 1-4 in order (fast)": lambda: fast_kernel_stages(
            call, dataclasses.replace(bwd, overlap=False)),
        "kernels 1-4, kernel 4 beside 1-2 (fast)": lambda: fast_kernel_stages(
            call, dataclasses.replace(bwd, overlap=True)),
        "backward (taught)": lambda: ssd_backward_taught(*saved, backend=backend),
        "backward (fast)": lambda: ssd_backward_fast(*saved, backend=backend),
    }
    return _timed(stages, timer, log)


def _timed(jobs: Mapping[str, Callable], timer, log=None) -> dict[str, float]:
    """``{label: timer(fn)}`` in order, each result passed to ``log`` as it comes (a run cut short keeps
    what it measured in its log)."""
    found = {}
    for label, fn in jobs.items():
        found[label] = timer(fn)
        if log is not None:
            log(f"  {label}: {found[label]:.3f} ms")
    return found


#: what ``--sweep`` tries: the fast chunk stage's heads per block and compiler hint, the fused state stage's
#: (TP, TN, TK) tiles and hint
SWEEP_HEADS = (1, 2, 4, 5, 8, 10, 16)
SWEEP_OCCUPANCY = (None, 2, 3)
SWEEP_STATE_TILES = ((64, 64, 64), (64, 128, 64), (32, 64, 64), (64, 64, 128), (64, 64, 256))


def backward_sweep(shape, dtype, *, backend: str = "gpu", device: str = "cuda", warmup_ms: float = 25.0,
                   rep_ms: float = 100.0, seed: int = 0, timer=None, log=None) -> dict[str, float]:
    """The fast backward's settings at one shape, each timed alone: ``{setting: median ms}`` for the chunk
    stage at every heads-per-block in :data:`SWEEP_HEADS` that divides the group size, times every hint in
    :data:`SWEEP_OCCUPANCY`, and the state stage at every tile in :data:`SWEEP_STATE_TILES` times the hints
    None and 2. What a tuning table's backward configs (``fast/config.py``'s ``BackwardConfig``) are chosen
    from."""
    from ..fast.bwd_chunk import launch_chunk_bwd_heads
    from ..fast.bwd_states import launch_state_grads_fused
    from ..fast.config import ChunkGrads, StateGrads
    from ..kernels.backward import GradCall
    from ..kernels.chunk_state import launch_chunk_state
    from ..kernels.state_passing import launch_state_passing

    timer = _median_timer(warmup_ms, rep_ms) if timer is None else timer
    inp = make_inputs(shape, seed=seed, dtype=dtype, device=device, D=False)
    x, dt, A, B, C = (inp[k] for k in GRADS)
    h, g = x.shape[2], B.shape[2]
    Q = shape.chunk_size
    dt_out, dA_cs, states = launch_chunk_state(x, dt, A, B, Q, None, False, (0.0, float("inf")), backend)
    init, _ = launch_state_passing(states, dA_cs, None, backend, out_dtype=dtype)
    gen = torch.Generator(device=device).manual_seed(seed + 2)
    dy = torch.randn(x.shape, generator=gen, device=device).to(dtype)
    call = GradCall(dy=dy, x=x, dt_out=dt_out, dA_cumsum=dA_cs, C=C, B=B, chunk_init_states=init,
                    dfinal_states=None, D=None, backend=backend)
    dstates = launch_state_grads_fused(call)[0]
    jobs = {}
    for hpb in (d for d in SWEEP_HEADS if (h // g) % d == 0):
        for occupancy in SWEEP_OCCUPANCY:
            jobs[f"chunk grads, {hpb} heads per block, occupancy {occupancy}"] = (
                lambda hpb=hpb, occupancy=occupancy: launch_chunk_bwd_heads(
                    call, dstates, ChunkGrads(occupancy=occupancy), hpb=hpb))
    for tiles in SWEEP_STATE_TILES:
        for occupancy in (None, 2):
            jobs[f"state grads, tiles {tiles}, occupancy {occupancy}"] = (
                lambda tiles=tiles, occupancy=occupancy: launch_state_grads_fused(
                    call, StateGrads(tiles, occupancy)))
    return _timed(jobs, timer, log)


def speedups(results: Mapping, over: str, metric: str = "fwd_bwd_ms") -> dict[str, float | None]:
    """``{shape: time of `over` / time of cutile}`` for one metric (None where either was not timed)."""
    out = {}
    for rec in results["shapes"]:
        ours, theirs = rec["impls"].get("cutile", {}).get(metric), rec["impls"].get(over, {}).get(metric)
        out[rec["name"]] = theirs / ours if ours and theirs else None
    return out


#: the training step's speed targets: how many times faster than each baseline ours should be
TARGETS = {"mamba_ssm": 1.5, "fla": 1.3}


def target_report(results: Mapping) -> str:
    """One line per baseline and shape: ours' speedup over that baseline (forward plus backward) and whether
    it meets :data:`TARGETS`; "not timed" where either was not timed."""
    lines = []
    for over, target in TARGETS.items():
        for shape, ratio in speedups(results, over).items():
            if ratio is None:
                verdict = "not timed"
            else:
                verdict = f"{ratio:.2f}x, {'meets' if ratio >= target else 'below'} the {target}x target"
            lines.append(f"vs {over:9s} {shape:18s} {verdict}")
    return "\n".join(lines)


def meets_targets(results: Mapping) -> bool:
    """Whether ours is at least :data:`TARGETS` faster than each baseline at every shape of ``results`` (a
    baseline or shape not timed is a miss)."""
    return all(ratio is not None and ratio >= target
               for over, target in TARGETS.items() for ratio in speedups(results, over).values())


def format_table(results: Mapping) -> str:
    names = [n for n in TRAIN_IMPLS if any(n in r["impls"] for r in results["shapes"])]
    head = (f"{'shape':22s}" + "".join(f"{n + ' fwd+bwd':>20s}" for n in names)
            + f"{'vs mamba_ssm':>14s}{'vs fla':>9s}")
    lines = [f"{results['device']}, {results['dtype']}, {results['date']}: forward + backward, median ms",
             head]
    sm, sf = speedups(results, "mamba_ssm"), speedups(results, "fla")
    for rec in results["shapes"]:
        cells = []
        for n in names:
            e = rec["impls"].get(n, {})
            cells.append(f"{e['fwd_bwd_ms']:20.3f}" if "fwd_bwd_ms" in e else f"{'-':>20s}")
        fmt = lambda s: f"{s:.2f}x" if s else "-"
        lines.append(f"{rec['name']:22s}" + "".join(cells)
                     + f"{fmt(sm[rec['name']]):>14s}{fmt(sf[rec['name']]):>9s}")
    return "\n".join(lines)


#: the shipped training runs (``data/benchmarks/<name>.json``), oldest first: an NVIDIA H200 run and an NVIDIA
#: H100 run, both of the current kernels, the H100's with the backward's stages timed (``--stages``). Each
#: records its device, date and versions; ``docs/perf-history.md`` says which commit each measured (8e8c188).
SHIPPED_TRAINING = ("h200_train", "h100_train")
#: the GPU the training targets (:data:`TARGETS`) are set for
TARGET_GPU = "H200"


def load_shipped_training(name: str = "h200_train") -> dict | None:
    """The shipped training results (``data/benchmarks/<name>.json``), or None where none were shipped."""
    from importlib import resources

    path = resources.files("mamba2_tutorial") / "data" / "benchmarks" / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def shipped_training_runs() -> list[dict]:
    """Every shipped training run of :data:`SHIPPED_TRAINING` that is present, oldest first."""
    runs = (load_shipped_training(name) for name in SHIPPED_TRAINING)
    return [r for r in runs if r is not None]


def target_run(runs: Sequence[Mapping]) -> Mapping | None:
    """Of ``runs`` (oldest first), the one the targets are judged on and the notebooks draw: the newest on the
    :data:`TARGET_GPU`, else the newest; None for no runs."""
    on_target = [r for r in runs if TARGET_GPU in r["device"]]
    return (on_target or list(runs) or [None])[-1]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mamba2_tutorial bench-train",
                                description=__doc__.split("\n")[0])
    p.add_argument("--shapes", nargs="+", default=list(BENCHMARK_SHAPES), metavar="NAME")
    p.add_argument("--impls", nargs="+", default=list(TRAIN_IMPLS), choices=TRAIN_IMPLS)
    p.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    p.add_argument("--warmup", type=float, default=25.0, help="warm-up budget per timing, ms of device time")
    p.add_argument("--rep", type=float, default=100.0, help="timed budget per timing, ms of device time")
    p.add_argument("--out", type=Path, help="write the results as JSON")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--stages", nargs="*", metavar="NAME", default=None,
                   help="also time the backward stage by stage at these shapes (default with the flag alone: "
                        "the first shape)")
    p.add_argument("--sweep", nargs="*", metavar="NAME", default=None,
                   help="also time the fast backward's settings (heads per block, tiles, compiler hints) at "
                        "these shapes (default with the flag alone: the first shape)")
    p.add_argument("--lift-fla-guard", action="store_true",
                   help="run fla's backward on Hopper with Triton < 3.7.1, which it refuses; the gradient "
                        "gate then decides whether it is timed")
    args = p.parse_args(list(argv) if argv is not None else None)
    if not torch.cuda.is_available():
        print("bench-train: needs a CUDA GPU; notebook 12 shows the shipped results", file=sys.stderr)
        return 2
    def save(results):
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(results, indent=1) + "\n")

    results = run(args.shapes, args.impls, DTYPES[args.dtype], args.warmup, args.rep, args.seed,
                  log=lambda s: print(s, file=sys.stderr, flush=True), on_shape=save,
                  fla_guard=not args.lift_fla_guard)
    print(format_table(results))
    extras = (("stages", args.stages, backward_stages, "the backward stage by stage, median ms", False),
              ("sweep", args.sweep, backward_sweep, "the fast backward's settings, median ms (fastest first)",
               True))
    for key, names, measure, title, fastest_first in extras:
        if names is None:
            continue
        results[key] = {}
        for name in names or args.shapes[:1]:
            print(f"{name}: {title}", file=sys.stderr)
            found = measure(get_shape(name), DTYPES[args.dtype], warmup_ms=args.warmup, rep_ms=args.rep,
                            seed=args.seed, log=lambda s: print(s, file=sys.stderr, flush=True))
            results[key][name] = found
            save(results)
            rows = sorted(found.items(), key=lambda kv: kv[1]) if fastest_first else found.items()
            print(f"\n{name}: {title}")
            print("\n".join(f"  {k:60s} {v:8.3f}" for k, v in rows))
    if args.out:
        save(results)
        print(f"wrote {args.out}")
    return 0

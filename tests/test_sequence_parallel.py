"""Sequence parallelism (``mamba2_tutorial.model.parallel``): one sequence split across processes.

The rank-level state passing and the entering state's contribution are checked on one process against
sequential oracles. The distributed SSD and block run in 2 and 3 CPU processes over gloo, with ragged slices
(none a multiple of the chunk size, one shorter than a chunk, one shorter than the conv's halo), and every
rank's output, the final state and every gradient are compared with one process running the whole sequence:
the float64 reference as the SSD for tight checks, and once the cuTile forward on the CPU tile executor.
"""

from __future__ import annotations

import datetime
import json
import os
import traceback
from functools import partial
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from mamba2_tutorial import ssd_forward
from mamba2_tutorial.lessons.checks import assert_close
from mamba2_tutorial.lessons.inputs import SSDShape, make_inputs
from mamba2_tutorial.model.block import Mamba2Block
from mamba2_tutorial.model.parallel import (
    main,
    rank_state_passing,
    sequence_parallel_block,
    sequence_parallel_ssd,
    slice_log_decay,
    state_contribution,
)
from mamba2_tutorial.reference import ssd_chunked, ssd_recurrent

F64 = torch.float64

# b, h, p, g, n, Q all distinct
DIMS = dict(b=2, h=6, p=5, g=3, n=7, Q=8)


def _shape(length: int, dims=DIMS) -> SSDShape:
    return SSDShape(dims["b"], length, dims["h"], dims["p"], dims["g"], dims["n"], dims["Q"])


def _bounds(lengths):
    starts = [sum(lengths[:r]) for r in range(len(lengths))]
    return [slice(s, s + length) for s, length in zip(starts, lengths)]


# -- one process: the pieces ------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rank_state_passing_matches_the_sequential_scan(seed):
    gen = torch.Generator().manual_seed(seed)
    R, b, h, p, n = 4, 2, 3, 5, 7
    log_decays = -3 * torch.rand(R, b, h, generator=gen, dtype=F64)
    log_decays[1, 0, 0] = -1e4  # a slice that wipes the state out: exp underflows to 0, never NaN
    states = torch.randn(R, b, h, p, n, generator=gen, dtype=F64)
    initial = torch.randn(b, h, p, n, generator=gen, dtype=F64)
    for init in (None, initial):
        entering, final = rank_state_passing(log_decays, states, init)
        state = torch.zeros(b, h, p, n, dtype=F64) if init is None else init
        for r in range(R):  # the oracle: the recurrence, one slice at a time
            assert_close(entering[r], state, name="states", hint=f"the state entering slice {r}")
            state = torch.exp(log_decays[r])[..., None, None] * state + states[r]
        assert_close(final, state, name="final_states")


@pytest.mark.parametrize("seed", [0, 1])
def test_slices_plus_state_passing_equal_the_whole_sequence(seed):
    """The whole scheme on one process: each slice from a zero state, the rank-level state passing, the
    linear correction; and the oracle that re-runs each slice from its true entering state."""
    lengths = [11, 3, 17]
    inputs = make_inputs(_shape(sum(lengths)), seed=seed, dtype=F64, z=True, dt_bias=True,
                         initial_states=True)
    y_whole, final_whole = ssd_recurrent(**inputs, return_final_states=True)
    opts = dict(dt_bias=inputs["dt_bias"], dt_softplus=True)
    parts, log_decays, states = [], [], []
    for r, sl in enumerate(_bounds(lengths)):
        init = inputs["initial_states"] if r == 0 else None
        y_loc, s_loc = ssd_chunked(inputs["x"][:, sl], inputs["dt"][:, sl], inputs["A"], inputs["B"][:, sl],
                                   inputs["C"][:, sl], DIMS["Q"], D=inputs["D"], initial_states=init,
                                   return_final_states=True, **opts)
        cum = slice_log_decay(inputs["dt"][:, sl], inputs["A"], **opts)
        parts.append((y_loc, cum))
        log_decays.append(cum[..., -1])
        states.append(s_loc)
    entering, final = rank_state_passing(torch.stack(log_decays), torch.stack(states))
    assert_close(final, final_whole, name="final_states")
    for r, sl in enumerate(_bounds(lengths)):
        y_loc, cum = parts[r]
        y = (y_loc + state_contribution(inputs["C"][:, sl], cum, entering[r])) * torch.nn.functional.silu(
            inputs["z"][:, sl])
        assert_close(y, y_whole[:, sl], name="y", hint=f"slice {r}, linear correction")
        init = entering[r] + (inputs["initial_states"] if r == 0 else 0)
        rerun = ssd_chunked(inputs["x"][:, sl], inputs["dt"][:, sl], inputs["A"], inputs["B"][:, sl],
                            inputs["C"][:, sl], DIMS["Q"], D=inputs["D"], z=inputs["z"][:, sl],
                            initial_states=init, **opts)
        assert_close(rerun, y_whole[:, sl], name="y", hint=f"slice {r}, re-run from the entering state")


def test_needs_an_initialised_process_group():
    x = torch.zeros(1, 4, 2, 3)
    with pytest.raises(RuntimeError, match="init_process_group"):
        sequence_parallel_ssd(x, torch.zeros(1, 4, 2), -torch.ones(2), torch.zeros(1, 4, 1, 5),
                              torch.zeros(1, 4, 1, 5), 4, ssd="chunked")


# -- several processes ------------------------------------------------------------------------------------
def _ssd_case(rank, world, group, *, lengths, seed, dtype=F64, ssd="chunked", dims=DIMS, tol=None):
    """One sequence, split by ``lengths``: this rank's y, the final state and every gradient against the whole
    sequence on one process (the float64 reference)."""
    shape = _shape(sum(lengths), dims)
    whole = make_inputs(shape, seed=seed, dtype=dtype, z=True, dt_bias=True, initial_states=True)
    grads = ("x", "dt", "A", "B", "C", "D", "z", "dt_bias", "initial_states")
    ref = {k: (v.detach().to(F64).requires_grad_(True) if k in grads else v) for k, v in whole.items()}
    gen = torch.Generator().manual_seed(seed + 100)
    w_y = torch.randn(shape.batch, shape.seqlen, shape.nheads, shape.headdim, generator=gen, dtype=F64)
    w_f = torch.randn(shape.batch, shape.nheads, shape.headdim, shape.dstate, generator=gen, dtype=F64)
    y_ref, f_ref = ssd_chunked(**ref, chunk_size=dims["Q"], return_final_states=True)
    ((y_ref * w_y).sum() + (f_ref * w_f).sum()).backward()

    sl = _bounds(lengths)[rank]
    mine = {k: whole[k][:, sl] for k in ("x", "dt", "B", "C", "z")}
    mine.update({k: whole[k] for k in ("A", "D", "dt_bias")})
    mine = {k: v.detach().clone().requires_grad_(True) for k, v in mine.items()}
    init = whole["initial_states"].detach().clone().requires_grad_(True) if rank == 0 else None
    y, final = sequence_parallel_ssd(**mine, chunk_size=dims["Q"], initial_states=init, dt_softplus=True,
                                     return_final_states=True, ssd=ssd, backend="cpu", group=group)
    assert y.dtype == dtype and y.shape == mine["x"].shape
    # the loss is the sum of the ranks' losses; the final state (on every rank) is weighted 1/R on each
    ((y.to(F64) * w_y[:, sl]).sum() + (final.to(F64) * w_f).sum() / world).backward()
    tol = tol or {}
    where = f"rank {rank} of {world}, slices {lengths}, seed {seed}, ssd {ssd}"
    assert_close(y, y_ref[:, sl], name="y", hint=where, **tol)
    assert_close(final, f_ref, name="final_states", hint=where, **tol)
    for k in ("x", "dt", "B", "C", "z"):
        assert_close(mine[k].grad, ref[k].grad[:, sl], name=f"d{k}", hint=where, **tol)
    for k in ("A", "D", "dt_bias"):  # shared parameters: each rank holds its part of the gradient
        dist.all_reduce(mine[k].grad, group=group)
        assert_close(mine[k].grad, ref[k].grad, name=f"d{k}", hint=where, **tol)
    if rank == 0:
        assert_close(init.grad, ref["initial_states"].grad, name="dinitial_states", hint=where, **tol)


def _block_case(rank, world, group, *, lengths, seed, rmsnorm):
    torch.manual_seed(seed)
    block = Mamba2Block(12, d_state=7, d_conv=4, expand=2, headdim=6, ngroups=2, chunk_size=8,
                        rmsnorm=rmsnorm, bias=True, ssd="chunked", dtype=F64)
    u = torch.randn(3, sum(lengths), 12, generator=torch.Generator().manual_seed(seed), dtype=F64)
    w = torch.randn(3, sum(lengths), 12, generator=torch.Generator().manual_seed(seed + 1), dtype=F64)
    u_ref = u.clone().requires_grad_(True)
    out_ref = block(u_ref)
    (out_ref * w).sum().backward()
    ref_grads = {name: p.grad.clone() for name, p in block.named_parameters()}
    block.zero_grad()
    sl = _bounds(lengths)[rank]
    u_mine = u[:, sl].clone().requires_grad_(True)
    out = sequence_parallel_block(block, u_mine, group=group)
    (out * w[:, sl]).sum().backward()
    where = f"rank {rank} of {world}, slices {lengths}, rmsnorm {rmsnorm}"
    # the gated RMSNorm computes in float32: rounding differences of 1e-16 upstream (the projections of a
    # shorter input) can flip a float32 rounding there
    tol = dict(rtol=1e-5, atol=1e-6) if rmsnorm else {}
    assert_close(out, out_ref[:, sl], name="out", hint=where, dims="b l d", **tol)
    assert_close(u_mine.grad, u_ref.grad[:, sl], name="du", hint=where, dims="b l d", **tol)
    for name, p in block.named_parameters():
        dist.all_reduce(p.grad, group=group)
        assert_close(p.grad, ref_grads[name], name=f"d{name}", hint=where, **tol)
    # the state after the whole sequence, on every rank, and a decoded token from it
    with torch.no_grad():
        out_s, state = sequence_parallel_block(block, u[:, sl], group=group, return_state=True)
        _, ref_state = block(u, return_state=True)
        assert_close(out_s, out_ref[:, sl], name="out (return_state)", hint=where, dims="b l d", **tol)
        assert_close(state.conv, ref_state.conv, name="state.conv", hint=where, **tol)
        assert_close(state.ssm, ref_state.ssm, name="state.ssm", hint=where, **tol)
        u_next = torch.randn(3, 12, generator=torch.Generator().manual_seed(seed + 2), dtype=F64)
        assert_close(block.step(u_next, state)[0], block.step(u_next, ref_state)[0], name="next token",
                     hint=where, **tol)


def _expect_error(match, fn):
    with pytest.raises(ValueError, match=match):
        fn()


def _error_cases(rank, world, group):
    inputs = make_inputs(_shape(9), seed=0, dtype=F64)
    Q = DIMS["Q"]

    def call(**changes):
        args = {**inputs, "chunk_size": Q, **changes}
        return sequence_parallel_ssd(**args, ssd="chunked", group=group)

    # rank 1's heads differ: every rank raises the same error, naming what disagrees
    other = make_inputs(_shape(9, {**DIMS, "h": 3}), seed=0, dtype=F64)
    _expect_error(r"disagree on the heads h \(rank 0: 6, rank 1: 3",
                  lambda: call(**(other if rank == 1 else {})))
    # n and g, dtypes
    other = make_inputs(_shape(9, {**DIMS, "n": 4}), seed=0, dtype=F64)
    _expect_error("disagree on the state size n", lambda: call(**(other if rank == 1 else {})))
    other = make_inputs(_shape(9), seed=0, dtype=torch.float32)
    _expect_error("disagree on the dtypes", lambda: call(**(other if rank == world - 1 else {})))
    _expect_error("disagree on chunk_size", lambda: call(chunk_size=Q if rank else 2 * Q))
    _expect_error("disagree on dt_limit", lambda: call(dt_limit=(0.0, 1.0) if rank == 1 else (0.0, 2.0)))
    _expect_error("disagree on D", lambda: call(D=None if rank == 1 else inputs["D"]))
    # a rank with an invalid call: every rank raises, naming that rank and its error
    _expect_error(r"rank 1 rejected its inputs: ValueError: dt must have shape",
                  lambda: call(dt=inputs["dt"][:, :4] if rank == 1 else inputs["dt"]))
    init = torch.zeros(DIMS["b"], DIMS["h"], DIMS["p"], DIMS["n"], dtype=F64)
    _expect_error("rank 1 rejected its inputs: ValueError: initial_states .* rank 0 only",
                  lambda: call(initial_states=init if rank == 1 else None))
    # the group is still usable afterwards
    y = call()
    assert y.shape == inputs["x"].shape


# Every multi-process check runs in one spawn of 3 processes (starting a process that imports torch costs
# seconds): 3-rank cases on the default group, 2-rank cases on the subgroup of ranks 0 and 1, which also tests
# ``group=``. Each rank records which cases passed; the tests below read those records.
def _three(case):
    return case


def _pair(case):
    case.pair = True  # run by ranks 0 and 1 on their subgroup; rank 2 sits it out
    return case


def _bench_case(rank, world, group):
    out = Path(os.environ["SP_TEST_DIR"], "bench.json")
    assert main(["--bench", "--tiny", "--warmup", "0", "--repeats", "1", "--out", str(out)]) == 0


pow2 = dict(b=2, h=4, p=8, g=2, n=16, Q=16)  # the cuTile kernels take powers of two inside
CASES = {
    "ssd 2 ranks seed 0 [21, 5]": _pair(partial(_ssd_case, lengths=[21, 5], seed=0)),
    "ssd 2 ranks seed 1 [5, 19]": _pair(partial(_ssd_case, lengths=[5, 19], seed=1)),
    "ssd 2 ranks seed 2 [13, 14]": _pair(partial(_ssd_case, lengths=[13, 14], seed=2)),
    "ssd 3 ranks seed 0 [11, 4, 19]": _three(partial(_ssd_case, lengths=[11, 4, 19], seed=0)),
    "ssd 3 ranks seed 1 [9, 17, 1]": _three(partial(_ssd_case, lengths=[9, 17, 1], seed=1)),
    "block 2 ranks rmsnorm [10, 13]": _pair(partial(_block_case, lengths=[10, 13], seed=0, rmsnorm=True)),
    "block 2 ranks gate in the ssd [2, 17]": _pair(partial(_block_case, lengths=[2, 17], seed=1,
                                                           rmsnorm=False)),
    "block 3 ranks [9, 2, 14]": _three(partial(_block_case, lengths=[9, 2, 14], seed=2, rmsnorm=True)),
    # the last slice shorter than the conv window: the decode state's window reaches into the rank before
    "block 3 ranks [9, 14, 2]": _three(partial(_block_case, lengths=[9, 14, 2], seed=3, rmsnorm=False)),
    "errors 2 ranks": _pair(_error_cases),
    "errors 3 ranks": _three(_error_cases),
    # the real path once: the cuTile forward and backward kernels on the CPU tile executor
    "cutile 2 ranks [21, 6]": _pair(partial(_ssd_case, lengths=[21, 6], seed=3, dtype=torch.float32,
                                            ssd="cutile", dims=pow2, tol=dict(rtol=1e-4, atol=1e-4))),
    # the benchmark's entry point, tiny and on gloo, on the 3 ranks
    "bench --tiny 3 ranks": _three(_bench_case),
}


def _worker(rank, world, init_file, out_dir):
    os.environ["MAMBA2_TUTORIAL_BACKEND"] = "cpu"
    os.environ["SP_TEST_DIR"] = out_dir
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    pair = dist.new_group([0, 1])  # every rank takes part in making a group, members or not
    record = Path(out_dir, f"rank-{rank}.json")
    done: dict = {}
    try:
        for name, case in CASES.items():
            if getattr(case, "pair", False) and rank == 2:
                done[name] = "idle"
                continue
            group = pair if getattr(case, "pair", False) else None
            try:
                case(rank, dist.get_world_size(group), group)
            except BaseException:
                done[name] = traceback.format_exc()
                raise
            done[name] = "ok"
        dist.barrier()
    finally:
        record.write_text(json.dumps(done))
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """{case: [rank 0's record, rank 1's, rank 2's]}: "ok", a traceback, or None (not reached)."""
    out = tmp_path_factory.mktemp("sequence_parallel")
    # what every child would otherwise do on its own, done once before the fork: compile the cuTile kernels
    # (forward and backward, on the CPU tile executor) at the shape of the cuTile case, and import what
    # autograd imports for a backward with a gradient tensor (the benchmark's)
    warm = make_inputs(_shape(6, pow2), seed=0, dtype=torch.float32, z=True, dt_bias=True)
    warm = {k: v.requires_grad_(True) if isinstance(v, torch.Tensor) else v for k, v in warm.items()}
    y = ssd_forward(**{**warm, "z": None}, chunk_size=pow2["Q"], backend="cpu")
    y.backward(torch.ones_like(y))
    try:
        # forked, not spawned: the children start with torch and the package already imported (a spawned
        # child takes seconds to import them on a busy machine)
        mp.start_processes(_worker, args=(3, str(out / "store"), str(out)), nprocs=3,
                           start_method="fork")
        crashed = None
    except Exception as e:  # a rank failed: the others were stopped; its record names the case
        crashed = str(e)
    records = [json.loads(p.read_text()) if p.exists() else {} for p in (out / f"rank-{r}.json"
                                                                         for r in range(3))]
    return {name: [rec.get(name) for rec in records] for name in CASES}, crashed, out


@pytest.mark.parametrize("case", list(CASES))
def test_ranks(ranks, case):
    results, crashed, _ = ranks
    failed = [f"rank {r}:\n{res}" for r, res in enumerate(results[case]) if res not in ("ok", "idle", None)]
    assert not failed, "\n".join(failed)
    expected = ["ok", "ok", "idle" if getattr(CASES[case], "pair", False) else "ok"]
    assert results[case] == expected, (
        f"{case} was not reached on every rank ({results[case]}); the spawn said: {crashed}")


def test_tiny_benchmark_writes_its_result(ranks):
    results, crashed, out = ranks
    assert results["bench --tiny 3 ranks"] == ["ok"] * 3, crashed
    result = json.loads((out / "bench.json").read_text())
    assert result["world_size"] == 3 and result["backend"] == "gloo" and len(result["devices"]) == 3
    assert result["date"] and [e["seqlen"] for e in result["shapes"]] == [96, 200]
    for entry in result["shapes"]:
        assert sum(entry["slices"]) == entry["seqlen"]
        for key in ("one_device", "sequence_parallel"):
            for what in ("forward_ms", "forward_backward_ms"):
                assert entry[key][what] > 0
        assert entry["exchange"]["forward_all_gather_ms"] > 0
        assert entry["exchange"]["backward_all_reduce_ms"] > 0
        assert entry["exchange"]["bytes_per_rank"] == 4 * entry["b"] * entry["h"] * (
            1 + entry["p"] * entry["n"])

"""The fast path (``mamba2_tutorial.fast``) against the taught path and the float64 reference.

Two paths, one truth: every config of every shipped tuning table, and every staged step of notebook 10, must
give the results of ``ssd_forward_taught`` (the three taught kernels) and of the float64 chunked reference,
on random problems with a distinct size in every dimension, ragged last chunks and several seeds, in every
dtype, with every output poisoned with NaN before the kernels run (an element no block wrote fails). On the
CPU the kernels run on the tile executor; the tests marked ``gpu`` run the same checks on a GPU.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from pathlib import Path

import pytest
import torch

from mamba2_tutorial import fast
from mamba2_tutorial import reference as ref
from mamba2_tutorial.fast.forward import ssd_forward
from mamba2_tutorial.fast.steps import STEPS, steps_for
from mamba2_tutorial.fast.tuning import segments_for, table_names
from mamba2_tutorial.kernels.forward import ssd_forward_taught
from mamba2_tutorial.lessons.checks import relative_error
from mamba2_tutorial.lessons.inputs import SSDShape, make_inputs

TOL = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 1e-2}  # relative L2 error vs float64
DTYPES = (torch.float32, torch.float16, torch.bfloat16)
TABLE = fast.load_table()
TABLE_FOLDER = Path(__file__).resolve().parents[1] / "mamba2_tutorial" / "data" / "configs"


def _with_segments(cfg: fast.FastConfig, segments: int = 3) -> fast.FastConfig:
    """A table config with its per-problem segment count fixed (a small problem has few chunks)."""
    if isinstance(cfg.state, fast.Segmented) and cfg.state.segments is None:
        return dataclasses.replace(cfg, state=dataclasses.replace(cfg.state, segments=segments))
    return cfg


#: every distinct config the shipped tables and the staged steps can run
CONFIGS = {name: _with_segments(cfg) for t in table_names()
           for name, cfg in fast.load_table(t).configs.items()}
CONFIGS |= {f"step: {s.name}": _with_segments(s.config) for s in steps_for(segmented=True, segments=3)}
CONFIGS["taught"] = fast.TAUGHT

#: random problems: (b, l, h, p, g, n, Q), every dimension distinct, ragged last chunks
PROBLEMS = [(2, 150, 4, 32, 2, 48, 64), (1, 211, 6, 24, 3, 40, 32), (3, 97, 2, 40, 1, 56, 64)]


def _inputs(dims, dtype, seed, device="cpu"):
    b, l, h, p, g, n, Q = dims
    inputs = make_inputs(SSDShape(b, l, h, p, g, n, Q), seed=seed, dtype=dtype, device=device, D=True, z=True,
                         dt_bias=True, initial_states=True)
    return inputs, Q


def _f64(inputs):
    return {k: v.double() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}


def _check(cfg, dims, dtype, seed, backend="cpu", device="cpu", dt_limit=None):
    inputs, Q = _inputs(dims, dtype, seed, device)
    if dt_limit is not None:
        inputs["dt_limit"] = dt_limit
    out, final = ssd_forward(**inputs, chunk_size=Q, return_final_states=True, backend=backend, config=cfg,
                             _poison=True)
    t_out, t_final = ssd_forward_taught(**inputs, chunk_size=Q, return_final_states=True, backend=backend,
                                        _poison=True)
    r_out, r_final = ref.ssd_chunked(**_f64(inputs), chunk_size=Q, return_final_states=True)
    assert out.dtype == dtype and out.shape == inputs["x"].shape and final.dtype == torch.float32
    assert not out.isnan().any() and not final.isnan().any(), "an output element was never written"
    for what, got, want in (("out", out, r_out), ("final_states", final, r_final),
                            ("taught out", t_out, r_out)):
        err = relative_error(got, want)
        assert err <= TOL[dtype], f"{cfg} {dims} {dtype}: {what} relative error {err:.2e} > {TOL[dtype]:.0e}"
    # the two paths agree with each other about as well as each agrees with float64
    assert relative_error(out, t_out) <= 2 * TOL[dtype]
    assert relative_error(final, t_final) <= (1e-5 if dtype == torch.float32 else 2 * TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).replace("torch.", ""))
@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_config_matches_the_taught_path_and_float64(name, dtype):
    seed = sorted(CONFIGS).index(name) % len(PROBLEMS)
    _check(CONFIGS[name], PROBLEMS[seed], dtype, seed=seed)


@pytest.mark.parametrize("seed", [5, 6])
def test_shipped_configs_on_random_shapes(seed):
    """ssd_forward with the config the table picks, on random ragged shapes of every class's dtype."""
    gen = torch.Generator().manual_seed(seed)
    draw = lambda lo, hi: int(torch.randint(lo, hi, (1,), generator=gen))
    g = draw(1, 3)
    dims = (draw(1, 3), draw(70, 260), 2 * g, 16 * draw(1, 4), g, draw(17, 80), 64)
    for dtype in (torch.bfloat16, torch.float16):
        _check(None, dims, dtype, seed)


def test_key_log2_falls_back_to_the_exact_decay_for_negative_dt():
    """A dt_limit whose lower bound is negative allows dt < 0, where log2(dt) is undefined: the key-log2
    configs must then run the exact decay (and still match the reference)."""
    cfg = CONFIGS["fused-occ2-acc-kd+chunk-bf16cb-kd"]
    assert cfg.scan.decay is fast.Decay.KEY_LOG2 and cfg.state.store_kd
    _check(cfg, PROBLEMS[0], torch.bfloat16, seed=3, dt_limit=(-0.01, 0.5))
    _check(cfg, PROBLEMS[1], torch.float32, seed=4, dt_limit=(0.002, 0.06))


def test_a_config_is_resolved_once_per_call():
    """``resolve`` derives what the stages launch with, in one place: key_log2 only where dt >= 0 is
    guaranteed, kd stored by the state stage only then and never under autograd, a segmented stage's count
    filled in from the table, and the scan told to store true states only for a segmented stage in
    training."""
    from mamba2_tutorial.fast.forward import resolve
    from mamba2_tutorial.fast.tuning import with_segments

    bf16 = torch.bfloat16
    kd = CONFIGS["fused-occ2-acc-kd+chunk-bf16cb-kd"]
    plan = resolve(kd, 2, 8, 16, bf16, "cpu", (0.0, float("inf")))
    assert plan.key_log2 and plan.store_kd and plan.state == kd.state and not plan.store_states
    assert kd.scan.cb_dtype == plan.cb_dtype == bf16
    assert resolve(kd, 2, 8, 16, torch.float32, "cpu", (0.0, float("inf"))).cb_dtype == torch.float32
    exact = resolve(kd, 2, 8, 16, bf16, "cpu", (-0.01, 0.5))
    assert not exact.key_log2 and not exact.store_kd and not exact.state.store_kd
    training = resolve(kd, 2, 8, 16, bf16, "cpu", (0.0, float("inf")), training=True)
    assert training.key_log2 and not training.store_kd and not training.state.store_kd
    segmented = fast.FastConfig(fast.Segmented(state_tile=(64, 128), store_kd=True),
                                fast.ChunkScan(decay=fast.Decay.KEY_LOG2))
    plan = resolve(segmented, 1, 8, 128, bf16, "cpu", (0.0, float("inf")), training=True)
    assert plan.state.segments == segments_for(1, 8, 128, TABLE) and plan.store_states and not plan.store_kd
    assert with_segments(segmented, 1, 8, 128, TABLE).state == dataclasses.replace(plan.state, store_kd=True)
    assert plan.cb_dtype == torch.float32  # ChunkScan's default
    taught = resolve(fast.TAUGHT, 1, 8, 128, bf16, "cpu", (0.0, float("inf")))
    assert taught == (fast.TAUGHT.state, fast.TAUGHT.scan, False, False, False, None)


def test_a_segmented_config_without_a_count_runs_with_the_tables():
    """``FastConfig(Segmented(), ChunkScan())`` (segments=None: the table's count for the problem) passed to
    ssd_forward runs, and gives the taught path's results."""
    _check(fast.FastConfig(fast.Segmented(), fast.ChunkScan()), PROBLEMS[1], torch.bfloat16, seed=7)


def test_float32_runs_the_taught_kernels():
    assert fast.ssd_config(2, 4096, 8, 64, 128, 256, torch.float32) == fast.TAUGHT


# ----------------------------------------------------------------------------------------------------
# the tuning table: data, checked
# ----------------------------------------------------------------------------------------------------
def test_benchmark_shapes_get_their_classes():
    expect = {
        (8, 4096, 80, 64, 1, 128, 256): "bfloat16/large/one-tile/q>=256",
        (1, 32768, 80, 64, 1, 128, 256): "bfloat16/large/long/q>=256",
        (4, 2048, 24, 64, 1, 128, 256): "bfloat16/small/one-tile/q>=256",
        (2, 8192, 128, 64, 8, 128, 128): "bfloat16/large/one-tile/q<=128",
        (4, 8192, 40, 128, 1, 128, 256): "bfloat16/large/wide/q>=256",
        (1, 8192, 40, 64, 1, 128, 64): "bfloat16/small/long/q<=128",
    }
    for (b, l, h, p, _g, n, Q), key in expect.items():
        assert fast.problem_class((b, l, h, p, n, Q), torch.bfloat16, TABLE) == key
    assert fast.problem_class((8, 4096, 80, 64, 128, 256), torch.float32, TABLE) is None
    cfg = fast.ssd_config(1, 32768, 80, 64, 128, 256, torch.bfloat16)
    assert isinstance(cfg.state, fast.Segmented) and cfg.state.segments == 8  # 640 blocks: >= 4 waves of 132
    assert segments_for(1, 80, 128, TABLE) == 8 and segments_for(1, 8, 24, TABLE) == 4  # >= 4 chunks each


def test_every_table_covers_every_class_with_valid_configs():
    for name in table_names():
        table = fast.load_table(name)
        assert table.gpu and table.sms > 0
        for key, cname in table.classes.items():
            cfg = table.config(key)
            assert cfg is table.configs[cname]
            assert fast.config_from_json(fast.config_to_json(cfg)) == cfg
            if key.startswith("float16"):  # fp16 keeps a float32 C Bᵀ: bf16 rounds 8x coarser than fp16
                assert not (isinstance(cfg.scan, fast.ChunkScan) and cfg.scan.cb_dtype == torch.bfloat16), key


def test_a_broken_table_is_refused(tmp_path, monkeypatch):
    from mamba2_tutorial.fast import tuning

    raw = json.loads((tuning.resources.files("mamba2_tutorial") / "data/configs/h200.json").read_text())
    del raw["classes"]["float16/small/wide/q<=128"]
    folder = tmp_path / "mamba2_tutorial" / "data" / "configs"
    folder.mkdir(parents=True)
    (folder / "h200.json").write_text(json.dumps(raw))
    monkeypatch.setattr(tuning.resources, "files", lambda _pkg: tmp_path / "mamba2_tutorial")
    tuning.load_table.cache_clear()
    try:
        with pytest.raises(ValueError, match="classes missing"):
            tuning.load_table("h200")
    finally:
        tuning.load_table.cache_clear()


def test_the_sm_count_has_one_source_the_gpus_description():
    """A table's SM count is its GPU's, from ``runtime/hardware.py``: a table that states its own, or names a
    GPU no GPUSpec describes, is refused; the CPU executor's count (the fast backward's head split) is the
    H200's, the GPU the shipped tables are tuned on."""
    from mamba2_tutorial.fast import backward as fast_backward
    from mamba2_tutorial.fast import bwd_chunk, tuning
    from mamba2_tutorial.runtime.hardware import H200, gpu_spec, sm_count

    raw = json.loads((tuning.resources.files("mamba2_tutorial") / "data/configs/h200.json").read_text())
    assert tuning.table_from_json("h200", raw).sms == gpu_spec(raw["gpu"]).sm_count == H200.sm_count
    with pytest.raises(ValueError, match="not the table's to say"):
        tuning.table_from_json("h200", {**raw, "sms": 132})
    with pytest.raises(ValueError, match="no GPUSpec for GPU 'NVIDIA B300'"):
        tuning.table_from_json("b300", {**raw, "gpu": "NVIDIA B300"})
    assert sm_count(torch.device("cpu")) == sm_count("cpu") == H200.sm_count
    # the fast backward's head split and state stage take no SM count of their own: they ask sm_count
    source = inspect.getsource(fast_backward) + inspect.getsource(bwd_chunk)
    assert "sm_count(x.device)" in source and "sm_count(dy.device)" in source
    assert "H200" not in source and "132" not in source


def test_the_classes_count_the_devices_sms(monkeypatch):
    """``problem_class`` and ``segments_for`` count the SMs of the device the problem runs on (``sm_count``,
    asked of the GPU), not those of the table's GPU: a GPU of 132 SMs, as the H100 and the H200 have, gets
    the CPU executor's classes; one of 64 SMs puts a long sequence of 80 heads in another class and cuts it
    into fewer segments."""
    from mamba2_tutorial.runtime import hardware
    from mamba2_tutorial.runtime.hardware import GPUS

    assert {spec.sm_count for spec in GPUS.values()} == {hardware.sm_count("cpu")} == {132}
    long_problem = ((1, 32768, 80, 64, 128, 256), torch.bfloat16)
    gpu = torch.device("cuda", 0)
    for sms, layout, segments in ((132, "long", 8), (64, "one-tile", 4)):
        monkeypatch.setattr(hardware, "_cuda_sm_count", lambda _index, sms=sms: sms)
        assert fast.problem_class(*long_problem, TABLE, gpu) == f"bfloat16/large/{layout}/q>=256"
        assert segments_for(1, 80, 128, TABLE, gpu) == segments
    assert fast.problem_class(*long_problem, TABLE) == "bfloat16/large/long/q>=256"  # the CPU: the H200's 132
    assert segments_for(1, 80, 128, TABLE) == 8


def test_a_broken_backward_section_is_refused():
    from mamba2_tutorial.fast import tuning

    raw = json.loads((tuning.resources.files("mamba2_tutorial") / "data/configs/h200.json").read_text())
    del raw["backward"]["classes"]["float32"]
    with pytest.raises(ValueError, match="backward classes missing \\['float32'\\]"):
        tuning.table_from_json("h200", raw)
    raw["backward"]["classes"]["float32"] = "no such config"
    with pytest.raises(ValueError, match="backward classes name configs it does not define \\['no such"):
        tuning.table_from_json("h200", raw)


# ----------------------------------------------------------------------------------------------------
# FastConfig: invalid combinations cannot be built
# ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("make, message", [
    (lambda: fast.FastConfig(fast.Segmented(), fast.SharedScan()), "needs ChunkScan"),
    (lambda: fast.FastConfig(fast.Fused(store_kd=True), fast.ChunkScan()), "store_kd"),
    (lambda: fast.FastConfig(fast.Fused(store_kd=True), fast.PlainScan()), "store_kd"),
    (lambda: fast.Fused(state_tile=(64, 100)), "power of two"),
    (lambda: fast.Fused(state_tile=(64,)), "state_tile must be"),
    (lambda: fast.Segmented(state_tile=(64, 128, 128)), r"state_tile must be \(TP, TN\).*mma_rows"),
    (lambda: fast.Fused(mma_rows=100), "mma_rows"),
    (lambda: fast.Segmented(mma_rows=8), "mma_rows"),
    (lambda: fast.Fused(form=fast.StateForm.KD), "store_kd"),
    (lambda: fast.Fused(form=6), "StateForm"),
    (lambda: fast.Segmented(segments=1), "segments"),
    (lambda: fast.Unfused(occupancy=0), "occupancy"),
    (lambda: fast.SharedScan(occupancy=2.0), "occupancy"),
    (lambda: fast.ChunkScan(cb_dtype=torch.float64), "cb_dtype must be torch.float32, torch.bfloat16 or"),
    (lambda: fast.ChunkScan(cb_dtype="bfloat16"), "cb_dtype must be torch.float32, torch.bfloat16 or"),
    (lambda: fast.ChunkScan(decay="key_log2"), "Decay"),
    (lambda: fast.FastConfig(fast.Unfused(), "chunk"), "scan must be"),
])
def test_invalid_configs_are_refused(make, message):
    with pytest.raises((ValueError, TypeError), match=message):
        make()


def test_segmented_is_its_own_stage():
    """Segmented is not a subclass of Fused: where both are meant, ``FUSED_WALKS`` says so."""
    from mamba2_tutorial.fast.config import FUSED_WALKS

    assert not issubclass(fast.Segmented, fast.Fused) and not isinstance(fast.Segmented(), fast.Fused)
    assert isinstance(fast.Segmented(), FUSED_WALKS) and isinstance(fast.Fused(), FUSED_WALKS)
    assert not isinstance(fast.Unfused(), FUSED_WALKS)


def test_config_json_round_trip_and_errors():
    for cfg in CONFIGS.values():
        assert fast.config_from_json(json.loads(json.dumps(fast.config_to_json(cfg)))) == cfg
    # the shipped tables read back to exactly what they say: tiles as one list, C Bᵀ's dtype by its name
    for name in table_names():
        raw = json.loads((TABLE_FOLDER / f"{name}.json").read_text())
        for cname, value in raw["configs"].items():
            assert fast.config_to_json(fast.config_from_json(value)) == value, (name, cname)
    fused = fast.config_from_json({"state": {"kind": "fused", "tiles": [32, 64, 128]},
                                   "scan": {"kind": "plain"}})
    assert fused.state == fast.Fused(state_tile=(32, 64), mma_rows=128)
    with pytest.raises(ValueError, match="no fields"):
        fast.config_from_json({"state": {"kind": "fused", "state_tile": [64, 128]},
                               "scan": {"kind": "plain"}})
    with pytest.raises(ValueError, match="tiles must be"):
        fast.config_from_json({"state": {"kind": "fused", "tiles": [64]}, "scan": {"kind": "plain"}})
    with pytest.raises(ValueError, match="cb_dtype must be one of"):
        fast.config_from_json({"state": {"kind": "unfused"},
                               "scan": {"kind": "chunk", "cb_dtype": "float64"}})
    with pytest.raises(ValueError, match="kind"):
        fast.config_from_json({"state": {"kind": "turbo"}, "scan": {"kind": "plain"}})
    with pytest.raises(ValueError, match="no fields"):
        fast.config_from_json({"state": {"kind": "unfused", "tiles": [64, 128]}, "scan": {"kind": "plain"}})
    with pytest.raises(ValueError, match="DT_ONCE"):
        fast.config_from_json({"state": {"kind": "fused", "form": ["KD"]}, "scan": {"kind": "plain"}})


def test_the_steps_end_at_the_shipped_configs():
    assert STEPS[0].config == fast.TAUGHT
    assert STEPS[-1].config == fast.ssd_config(8, 4096, 80, 64, 128, 256, torch.bfloat16)
    long = steps_for(segmented=True, segments=8)
    assert long[-1].config == fast.ssd_config(1, 32768, 80, 64, 128, 256, torch.bfloat16)
    assert len({s.name for s in long}) == len(long) and all(s.idea for s in long)


def test_compile_specs_cover_every_fast_kernel():
    from mamba2_tutorial.fast import chunk_cb, scan_chunk, scan_shared, segments, state_fused
    from mamba2_tutorial.fast.specs import shipped_specs

    launched = {spec.kernel._pyfunc.__name__ for spec in shipped_specs()}
    for module in (chunk_cb, scan_chunk, scan_shared, segments, state_fused):
        kernels = {n for n in dir(module) if n.endswith("_kernel") and hasattr(getattr(module, n), "_pyfunc")}
        assert kernels <= launched, f"{module.__name__}: {kernels - launched} launched by no shipped config"


# ----------------------------------------------------------------------------------------------------
# on a GPU
# ----------------------------------------------------------------------------------------------------
GPU_PROBLEMS = {64: (2, 700, 8, 64, 2, 128, 64), 128: (2, 1000, 8, 64, 2, 128, 128),
                256: (1, 1300, 8, 64, 1, 128, 256)}


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).replace("torch.", ""))
@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_config_on_the_gpu(name, dtype):
    Q = 128 if "unrolled" in name else 256
    _check(CONFIGS[name], GPU_PROBLEMS[Q], dtype, seed=1, backend="gpu", device="cuda")


@pytest.mark.parametrize("cb_dtype", [torch.float32, torch.bfloat16, torch.float16],
                         ids=lambda d: str(d).replace("torch.", ""))
def test_chunk_scan_stores_c_bt_in_its_dtype(cb_dtype, monkeypatch):
    """The chunk scan's C Bᵀ is stored in the config's ``cb_dtype`` for 16-bit inputs (float32 inputs keep
    float32), and float16 inputs with a float16 C Bᵀ stay as close to float64 as with a float32 one."""
    from mamba2_tutorial.fast import chunk_cb

    made = []
    real = chunk_cb.allocate

    def spy(shape, dtype, device, poison=False):
        made.append(dtype)
        return real(shape, dtype, device, poison)

    monkeypatch.setattr(chunk_cb, "allocate", spy)
    shape = SSDShape(2, 100, 4, 16, 2, 32, 32)
    cfg = fast.FastConfig(state=fast.Fused(), scan=fast.ChunkScan(cb_dtype=cb_dtype))
    for dtype in (torch.float16, torch.float32):
        inp = make_inputs(shape, seed=5, dtype=dtype)
        args = [inp[k] for k in ("x", "dt", "A", "B", "C")]
        made.clear()
        y = ssd_forward(*args, shape.chunk_size, config=cfg, backend="cpu")
        assert made == [cb_dtype if dtype == torch.float16 else torch.float32], (dtype, made)
        want = ref.ssd_chunked(*[a.double() for a in args], shape.chunk_size)
        bound = 2e-3 if cb_dtype == torch.bfloat16 else (1e-3 if dtype == torch.float16 else 1e-5)
        assert relative_error(y, want) < bound, (dtype, relative_error(y, want))

"""``python -m mamba2_tutorial tune`` without a GPU: the search space as data, the stages through a fake
tuner, the table it writes, and ``ssd_forward`` finding a user's table by the GPU's name."""

from __future__ import annotations

import json

import pytest
import torch

from mamba2_tutorial.fast import tuning
from mamba2_tutorial.fast.config import ChunkScan, Fused, Segmented, SharedScan, Unfused
from mamba2_tutorial.lessons.checks import relative_error
from mamba2_tutorial.perf import tune

FAKE_GPU = "NVIDIA H100 80GB HBM3"


@pytest.fixture
def user_tables(tmp_path, monkeypatch):
    """A user's table folder in tmp_path, and the table caches cleared around the test."""
    folder = tmp_path / "tables"
    monkeypatch.setenv(tuning.TABLES_ENV, str(folder))
    tuning.load_table.cache_clear()
    tuning.table_for_device.cache_clear()
    yield folder
    tuning.load_table.cache_clear()
    tuning.table_for_device.cache_clear()


def _raw_default() -> dict:
    return json.loads((tuning.resources.files("mamba2_tutorial") / "data/configs/h200.json").read_text())


# ----------------------------------------------------------------------------------------------------
# the space
# ----------------------------------------------------------------------------------------------------
def test_shipped_space_builds_and_counts():
    space = tune.load_space()
    one_tile = space.candidates("state", "bfloat16/large/one-tile/q>=256")
    long = space.candidates("state", "bfloat16/large/long/q>=256")
    assert len(one_tile) == 14 and len(long) == 22
    assert not any(isinstance(c, Segmented) for c in one_tile)
    assert {type(c) for c in long} == {Unfused, Fused, Segmented}
    assert len(space.candidates("scan", "float16/large/one-tile/q>=256")) == 8
    assert len(space.candidates("scan", "bfloat16/large/one-tile/q>=256")) == 12
    scans = space.candidates("scan", "bfloat16/large/one-tile/q<=128")
    assert len(scans) == 16 and any(isinstance(c, ChunkScan) and c.unroll for c in scans)
    assert all(c.cb_dtype == torch.float32 for c in space.candidates("scan", "float16/small/wide/q<=128")
               if isinstance(c, ChunkScan))
    quick = tune.load_space(quick=True)
    assert len(quick.candidates("state", "float16/small/one-tile/q<=128")) == 2
    assert len(quick.candidates("scan", "float16/small/one-tile/q<=128")) == 2


@pytest.mark.parametrize("entry, match", [
    ({"kind": "fused", "tiles": {"one_of": [[64, 128], [64, 100]]}},
     r'state\[0\] candidate .*64, 100.*power of two'),
    ({"kind": "fused", "occupancy": {"one_of": [2, 9]}}, r'state\[0\] candidate .*"occupancy": 9.*1\.\.8'),
    ({"kind": "fused", "store_kd": True}, r"state\[0\] .*store_kd is not searched"),
    ({"kind": "chunk"}, r"state\[0\] candidate .*'kind' of"),
    ({"kind": "fused", "only": {"colour": ["red"]}}, r"state\[0\]\.only"),
    ({"kind": "fused", "tiles": {"one_of": []}}, r"one_of must be a non-empty list"),
])
def test_bad_space_names_the_candidate(tmp_path, entry, match):
    path = tmp_path / "space.json"
    path.write_text(json.dumps({"state": [entry], "scan": [{"kind": "shared"}]}))
    with pytest.raises(ValueError, match=match) as info:
        tune.load_space(path)
    assert str(path) in str(info.value)


def test_representative_problems_are_of_their_class():
    table = tuning.load_table()
    for key in tuning._all_classes():
        b, l, h, p, g, n, Q = tune.representative_dims(key)
        assert tuning.problem_class((b, l, h, p, n, Q), getattr(torch, key.split("/")[0]), table) == key
    assert tune.representative_dims("bfloat16/large/one-tile/q>=256") == (8, 4096, 80, 64, 1, 128, 256)
    with pytest.raises(ValueError, match="unknown problem class"):
        tune.representative_dims("bfloat16/huge/one-tile/q>=256")


# ----------------------------------------------------------------------------------------------------
# the tuner, faked
# ----------------------------------------------------------------------------------------------------
class FakeSearch:
    """``exhaustive_search`` with a deterministic ranking: the candidate tried last is the fastest. It asks
    for every candidate's grid, kernel, arguments and hints as the tuner does, and checks them."""

    def __init__(self):
        self.calls = []

    def __call__(self, space, stream, grid_fn, kernel, args_fn, hints_fn=None, *, quiet=False,
                 single_run_timeout_sec=None, flush_l2=True):
        from cuda.tile.tune import Measurement, TuningResult

        assert stream is None and len(set(space)) == len(space)
        found = []
        for i, cfg in enumerate(space):
            k, grid, args, hints = kernel(cfg), grid_fn(cfg), args_fn(cfg), hints_fn(cfg)
            code = k._pyfunc.__code__
            assert len(args) == code.co_argcount, (cfg, k._pyfunc.__name__)
            assert all(isinstance(d, int) and d > 0 for d in grid)
            assert hints in ({}, {"occupancy": k._compiler_options.occupancy})
            found.append(Measurement(config=cfg, mean_us=1000.0 - 10 * i, num_samples=5, error_margin_us=0.1))
        self.calls.append((list(space), [kernel(c)._pyfunc.__name__ for c in space]))
        return TuningResult(best=min(found, key=lambda m: m.mean_us), successes=tuple(found), failures=())


def _timer(fn):
    return 1.0


def test_tune_class_picks_the_fastest_stages():
    space = tune.load_space()
    search = FakeSearch()
    r = tune.tune_class("bfloat16/small/long/q<=128", space, device="cpu", search=search, timer=_timer)
    (states, state_kernels), (scans, scan_kernels) = search.calls
    assert len(states) == 22 and len(scans) == 12                  # 16 less plain and shared
    assert set(state_kernels) == {"chunk_state_kernel", "chunk_state_passing_kernel",
                                  "chunk_state_segments_kernel"}
    assert set(scan_kernels) == {"chunk_scan_chunk_kernel"}      # a segmented state stage: chunk scans only
    # the last candidate wins: the last segmented one, then the last chunk scan; kd stored since it reads kd
    assert isinstance(r.state.best, Segmented) and r.state.best_label == states[-1]
    assert r.scan.best_label == scans[-1] and r.scan.best.unroll
    assert r.config.state.store_kd and r.config.scan == r.scan.best
    # every candidate's stage time is its main kernel's plus one timing of its other launches
    assert r.scan.stage_us[scans[-1]] == pytest.approx(1000.0 - 110 + 1.0)
    assert r.state.rest_us[states[0]] == 1.0                     # unfused: state_passing_kernel
    assert "succeeded" in tune._report(r)


def test_a_winner_slower_than_the_default_config_stays_out_of_the_table():
    """The stages' winners run the whole forward slower than the default table's config (a small space,
    as --quick's): the class keeps the default's config, and the report says so."""
    from mamba2_tutorial.fast.config import FastConfig

    forwards = []

    def timer(fn):  # the two whole-forward timings (tuned first, then the default's) pass their config
        cfg = (fn.__defaults__ or (None,))[0]
        if not isinstance(cfg, FastConfig):
            return 1.0
        forwards.append(cfg)
        return 2.0 if len(forwards) == 1 else 1.0

    key = "bfloat16/small/long/q<=128"
    r = tune.tune_class(key, tune.load_space(quick=True), device="cpu", search=FakeSearch(), timer=timer)
    assert len(forwards) == 2 and r.kept_default and (r.tuned_us, r.default_us) == (2.0, 1.0)
    assert r.config == tuning.load_table().config(key)
    assert "the table keeps it for this class" in tune._report(r)
    raw = tune.build_table(FAKE_GPU, [r])
    assert tuning.table_from_json("t", raw).config(key) == tuning.load_table().config(key)


def test_written_table_loads_and_runs_the_taught_results(user_tables, monkeypatch):
    from mamba2_tutorial.fast.forward import ssd_forward
    from mamba2_tutorial.kernels.forward import ssd_forward_taught

    keys = ["float16/small/one-tile/q<=128", "bfloat16/small/wide/q>=256"]
    results = [tune.tune_class(k, tune.load_space(quick=True), device="cpu", search=FakeSearch(),
                               timer=_timer) for k in keys]
    # the last quick candidates win; the fused stage stores kd, which the chunk scan reads
    assert results[0].config.state == Fused(occupancy=2, store_kd=True)
    assert results[0].config.scan.decay.value == "key_log2"
    raw = tune.build_table(FAKE_GPU, results)
    path = tune.write_table(raw, user_tables / f"{tuning.table_slug(FAKE_GPU)}.json")
    assert path.name == "nvidia-h100-80gb-hbm3.json"
    table = tuning.load_table(path)
    assert table.gpu == FAKE_GPU and table.backward_classes == tuning.load_table().backward_classes
    default = tuning.load_table()
    for key in tuning._all_classes():
        tuned = next((r.config for r in results if r.key == key), None)
        assert table.config(key) == (tuned or default.config(key))

    # ssd_forward finds it by the device's name, and its configs give the taught forward's results
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: FAKE_GPU)
    assert tuning.table_for_device(torch.device("cuda")) is table
    for key in keys:
        inp = tune.representative(key)
        b, l, h = inp["x"].shape[:3]
        cfg = tuning.with_segments(table.config(key), b, h, -(-l // inp["chunk_size"]), table)
        got, got_final = ssd_forward(**inp, backend="cpu", config=cfg, return_final_states=True, _poison=True)
        want, want_final = ssd_forward_taught(**inp, backend="cpu", return_final_states=True)
        assert not got.isnan().any()
        # as the shipped configs do (tests/test_fast_path.py): the relative error of the 16-bit output
        assert relative_error(got, want) <= 2e-2 and relative_error(got_final, want_final) <= 2e-2


# ----------------------------------------------------------------------------------------------------
# the lookup
# ----------------------------------------------------------------------------------------------------
def _table_with(gpu: str, **changes) -> dict:
    return {**_raw_default(), "gpu": gpu, **changes}


def test_user_table_preferred_by_gpu_name(user_tables, monkeypatch):
    user_tables.mkdir()
    raw = _table_with("NVIDIA H200")
    raw["configs"]["fused+shared"]["scan"]["occupancy"] = 1
    (user_tables / "mine.json").write_text(json.dumps(raw))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H200")
    table = tuning.table_for_device(torch.device("cuda"))
    assert table.name == "mine" and table.config("bfloat16/small/one-tile/q>=256").scan == SharedScan(1)
    # no user table for another GPU: the shipped default; the CPU: the shipped default
    tuning.table_for_device.cache_clear()
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: FAKE_GPU)
    assert tuning.table_for_device(torch.device("cuda")).name == "h200"
    assert tuning.table_for_device(torch.device("cpu")).name == "h200"


def test_user_table_folder(monkeypatch, tmp_path):
    monkeypatch.delenv(tuning.TABLES_ENV, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert tuning.user_table_dir() == tmp_path / ".cache" / "mamba2_tutorial" / "configs"
    assert tuning.user_table_paths() == []
    monkeypatch.setenv(tuning.TABLES_ENV, str(tmp_path / "t"))
    assert tuning.user_table_dir() == tmp_path / "t"
    assert tuning.table_slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    with pytest.raises(ValueError, match="no letter or digit"):
        tuning.table_slug("  ")


@pytest.mark.parametrize("change, match", [
    (lambda raw: raw["classes"].pop("float16/small/wide/q<=128"), r"classes missing \['float16/small/wide"),
    (lambda raw: raw["classes"].update({"float16/small/wide/q<=128": "nope"}), r"define \['nope'\]"),
    (lambda raw: raw["configs"].update({"spare": raw["configs"]["fused+shared"]}), r"uses \['spare'\]"),
    (lambda raw: raw.pop("rules"), "missing entry 'rules'"),
])
def test_bad_user_table_names_its_file(user_tables, monkeypatch, change, match):
    user_tables.mkdir()
    raw = _table_with(FAKE_GPU)
    change(raw)
    path = user_tables / "bad.json"
    path.write_text(json.dumps(raw))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: FAKE_GPU)
    with pytest.raises(ValueError, match=match) as info:
        tuning.table_for_device(torch.device("cuda"))
    assert str(path) in str(info.value)
    (user_tables / "broken.json").write_text("{")
    with pytest.raises(ValueError, match="broken.json: not valid JSON"):
        tuning.load_table(user_tables / "broken.json")


def test_command_without_gpu(monkeypatch, capsys):
    from mamba2_tutorial.__main__ import main

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["tune", "--quick", "--classes", "bfloat16/small/long/q<=128"]) == 2
    assert "no CUDA GPU" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["tune", "--classes", "bfloat16/huge"])

"""The benchmark's arithmetic and plumbing, on a CPU: roofline counts, the results schema (with the staged
steps), the printed tables, the host-bound flag, the harness's correctness gate (wrong implementations and
wrong steps are rejected, never timed), our forward, the taught forward and the staged steps wired into the
harness on the CPU executor, the fla mapping, the mamba_ssm import fallback. No timing happens here:
performance is measured only by ``python -m mamba2_tutorial bench``. The one GPU test runs the harness at a
tiny shape and checks correctness and the schema, not speed. The figures: ``test_perf_plots.py``.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import re
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from bench_fixture import FIXTURE_DEVICE, FIXTURE_PATH, fake_timer, make_fixture, simple_gla, stand_in_impls

from mamba2_tutorial.fast.config import (
    ChunkScan,
    Decay,
    FastConfig,
    Fused,
    SharedScan,
    Unfused,
    config_from_json,
    config_to_json,
)
from mamba2_tutorial.fast.steps import STEPS, steps_for
from mamba2_tutorial.fast.tuning import ssd_config
from mamba2_tutorial.lessons import costs
from mamba2_tutorial.lessons.inputs import SHAPES, make_inputs
from mamba2_tutorial.perf import bench, roofline
from mamba2_tutorial.perf import results as res
from mamba2_tutorial.perf.results import IMPLS, ResultsError, validate_results
from mamba2_tutorial.perf.sources import kernels_sha256
from mamba2_tutorial.reference import ssd_chunked

HEX64 = re.compile(r"[0-9a-f]{64}")


@pytest.fixture(scope="module")
def fixture_results():
    return res.load_results(FIXTURE_PATH)


# ----------------------------------------------------------------------------------------------------
# roofline arithmetic, against numbers worked out by hand


SMALL = roofline.Dims(b=2, l=10, h=4, p=3, g=2, n=5, Q=4)  # chunks of 4, 4 and a ragged 2


def test_causal_pairs_by_hand():
    # chunks 4, 4, 2: 10 + 10 + 3 causal pairs; every row sees its whole chunk when not causal: 10 * 4
    assert roofline.causal_pairs(10, 4) == 23
    assert roofline.causal_pairs(10, 4, causal=False) == 40
    assert roofline.causal_pairs(8, 4) == 20
    assert roofline.causal_pairs(3, 4) == 6


def test_forward_flops_by_hand():
    f = roofline.matmul_flops(SMALL)
    assert f == {
        "chunk state (x ⊗ B)": 2 * 2 * 10 * 4 * 3 * 5,  # 2400
        "CBᵀ": 2 * 2 * 2 * 23 * 5,  # 920: per group, causal pairs only
        "intra-chunk (scores @ x)": 2 * 2 * 4 * 23 * 3,  # 1104
        "inter-chunk (C @ state)": 2400,
    }
    assert roofline.forward_cost(SMALL).flops == 6824


def test_forward_bytes_by_hand():
    c = roofline.forward_cost(SMALL, io_bytes=2)
    # x 2*10*4*3*2 = 480, dt 2*10*4*2 = 160, A 4*4 = 16, B and C 2*10*2*5*2 = 400 each, y 480
    assert c.byte_terms == {"x": 480, "dt": 160, "A": 16, "B": 400, "C": 400, "y": 480}
    assert c.bytes == 1936
    c4 = roofline.forward_cost(SMALL, io_bytes=2, dt_bytes=4, has_D=True, has_z=True, final_states=True)
    assert c4.bytes == 1936 + 160 + 16 + 480 + 2 * 4 * 3 * 5 * 4


def test_floor_is_the_larger_of_the_two_times():
    c = roofline.Ceilings(mma_flops_per_s=1e12, copy_bytes_per_s=1e11)
    cost = roofline.forward_cost(SMALL)
    assert cost.compute_ms(c) == pytest.approx(6824 / 1e12 * 1e3)
    assert cost.memory_ms(c) == pytest.approx(1936 / 1e11 * 1e3)
    assert cost.floor_ms(c) == cost.memory_ms(c) and cost.bound(c) == "memory"
    fast_memory = roofline.Ceilings(1e12, 1e15)
    assert cost.floor_ms(fast_memory) == cost.compute_ms(fast_memory) and cost.bound(fast_memory) == "compute"
    assert c.ridge == pytest.approx(10.0)


@pytest.mark.parametrize(
    "name, floor",
    [("b8-l4096-h80", 0.220), ("b1-l32768-h80", 0.220), ("b4-l2048-h24", 0.017), ("b2-l8192-h128-g8", 0.142)],
)
def test_the_looser_full_square_floors(name, floor):
    """Floors that count the full Q x Q blocks and dt in fp32 (at 790 TFLOP/s, 4.3 TB/s), a looser count."""
    d = roofline.dims_of(SHAPES[name])
    assert round(roofline.floor_ms(d, causal=False, dt_bytes=4), 3) == floor
    # counting only the causal half can only lower the floor
    assert roofline.floor_ms(d) <= roofline.floor_ms(d, causal=False, dt_bytes=4)


def test_b8_floor_with_causal_counting():
    d = roofline.dims_of(SHAPES["b8-l4096-h80"])
    cost = roofline.forward_cost(d)
    # 4·b·l·h·p·n + (Q+1)·b·l·(g·n + h·p) for Q | l
    expected = 4 * 8 * 4096 * 80 * 64 * 128 + 257 * 8 * 4096 * (128 + 80 * 64)
    assert cost.flops == expected
    assert cost.floor_ms() == pytest.approx(expected / 790e12 * 1e3)
    assert cost.bound() == "compute"


def test_kernel_costs_add_up_and_count_the_state_traffic():
    d = roofline.dims_of(SHAPES["b8-l4096-h80"])
    kc = roofline.kernel_costs(d)
    assert list(kc) == ["chunk_state", "state_passing", "chunk_scan"]
    assert sum(c.flops for c in kc.values()) == roofline.forward_cost(d).flops
    states = 8 * 16 * 80 * 64 * 128 * 4  # (b, c, h, p, n) fp32: 335,544,320 bytes
    assert kc["chunk_state"].byte_terms["chunk states (write)"] == states == 335_544_320
    assert kc["state_passing"].byte_terms["chunk states (read)"] == states
    assert kc["chunk_scan"].byte_terms["states entering chunks (read)"] == states
    assert kc["state_passing"].flops == 0 and kc["state_passing"].vector_flops == 2 * states / 4
    assert kc["state_passing"].bound() == "memory"
    # the three-kernel design moves strictly more bytes than the whole forward must
    assert sum(c.bytes for c in kc.values()) > roofline.forward_cost(d).bytes + 4 * states - 1
    bf16_states = roofline.kernel_costs(d, init_state_bytes=2)
    assert bf16_states["chunk_scan"].byte_terms["states entering chunks (read)"] == states // 2
    floors = roofline.kernel_floors_ms(d)
    assert floors == {k: c.floor_ms() for k, c in kc.items()}


def test_design_floors():
    d = roofline.dims_of(SHAPES["b8-l4096-h80"])
    f = roofline.design_floors_ms(d)
    values = list(f.values())
    assert values == sorted(values, reverse=True)  # each design moves fewer bytes than the one before
    assert f["3 kernels, fp32 states"] == pytest.approx(sum(roofline.kernel_floors_ms(d).values()))
    assert f["1 fused kernel"] == roofline.floor_ms(d)
    # fused: chunk state + state passing minus the chunk states' write and read (2 x 335,544,320 bytes)
    kc = roofline.kernel_costs(d)
    first_bytes = kc["chunk_state"].bytes + kc["state_passing"].bytes - 2 * 335_544_320
    want = max(first_bytes / 4.3e12, kc["chunk_state"].flops / 790e12) * 1e3 + kc["chunk_scan"].floor_ms()
    assert f["state passing fused into chunk state, fp32"] == pytest.approx(want)


def test_bytes_agree_with_costs_io_bytes():
    """costs.io_bytes (notebook 03) counts dt and A as float32: the same as forward_cost with dt_bytes=4."""
    for name in ("b2-l8192-h128-g8", "tiny-g3"):
        s = SHAPES[name]
        want = costs.io_bytes(
            batch=s.batch,
            seqlen=s.seqlen,
            nheads=s.nheads,
            headdim=s.headdim,
            dstate=s.dstate,
            ngroups=s.ngroups,
            bytes_per_element=2,
        )
        assert roofline.forward_cost(s, io_bytes=2, dt_bytes=4).bytes == want


def test_dims_validation_and_conversion():
    assert roofline.dims_of(SHAPES["tiny"]) == roofline.Dims(2, 37, 6, 5, 2, 7, 16)
    assert roofline.dims_of(SHAPES["tiny"].dims) == roofline.Dims(2, 37, 6, 5, 2, 7, 16)
    assert SMALL.nchunks == 3 and SMALL.as_dict()["Q"] == 4
    with pytest.raises(ValueError, match="multiple of ngroups"):
        roofline.Dims(1, 8, 6, 4, 4, 8, 4)
    with pytest.raises(ValueError, match="l must be a positive int"):
        roofline.Dims(1, 0, 4, 4, 1, 8, 4)
    with pytest.raises(ValueError, match="lacks keys"):
        roofline.dims_of({"b": 1})
    with pytest.raises(TypeError, match="expected Dims"):
        roofline.dims_of(3)

# ----------------------------------------------------------------------------------------------------
# the results schema and the shipped results


def test_fixture_is_schema_valid_and_labelled(fixture_results):
    validate_results(fixture_results)
    assert fixture_results["device"] == FIXTURE_DEVICE  # a fixture can never pass for a measurement
    assert "h200" not in str(FIXTURE_PATH).lower() and "data/benchmarks" not in str(FIXTURE_PATH)
    assert fixture_results["steps"] and all(r["ms"].get("taught") for r in fixture_results["shapes"])


def test_fixture_is_what_the_generator_makes(fixture_results):
    """The committed fixture matches a fresh fake run (same records, same fake times; errors to rounding)."""
    fresh = make_fixture()
    validate_results(fresh)
    for key in ("shapes", "sweep"):
        assert [r["name"] for r in fresh[key]] == [r["name"] for r in fixture_results[key]]
        for a, b in zip(fresh[key], fixture_results[key]):
            assert a["dims"] == b["dims"]
            for impl in IMPLS:
                if b["ms"][impl] is None:  # not run here (e.g. TileGym on a ragged length): the same reason
                    assert a["ms"][impl] is None and a["errors"][impl] == b["errors"][impl]
                    continue
                assert a["ms"][impl] == pytest.approx(b["ms"][impl], rel=1e-5)
                assert a["rel_err"][impl] == pytest.approx(b["rel_err"][impl], rel=0.05)
    assert [r["name"] for r in fresh["steps"]] == [r["name"] for r in fixture_results["steps"]]
    for a, b in zip(fresh["steps"], fixture_results["steps"]):
        assert [s["config"] for s in a["steps"]] == [s["config"] for s in b["steps"]]
        assert [s["ms"] for s in a["steps"]] == pytest.approx([s["ms"] for s in b["steps"]], rel=1e-5)


def _mutate(results, path, value):
    r = copy.deepcopy(results)
    target = r
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return r


@pytest.mark.parametrize(
    "path, value, message",
    [
        (("schema_version",), 2, "schema_version"),
        (("kernels_sha256",), "f271671", "results.kernels_sha256"),
        (("kernels_sha256",), "A" * 64, "results.kernels_sha256"),
        (("kernels_commit",), "", "results.kernels_commit"),
        (("device",), "", "results.device"),
        (("versions", "fla"), KeyError, "missing key 'fla'"),
        (("versions", "torch"), 2.11, "versions.torch"),
        (("ceilings", "copy_tbps"), -1.0, "copy_tbps"),
        (("shapes",), [], "non-empty list"),
        (("shapes", 0, "ms", "fla"), KeyError, "keys must be"),
        (("shapes", 0, "ms", "triton"), 1.0, "optionally with 'taught'"),
        (("shapes", 0, "ms", "cutile"), -0.5, "ms.cutile"),
        (("shapes", 0, "ms", "cutile"), float("nan"), "ms.cutile"),
        (("shapes", 0, "rel_err", "cutile"), None, "needs a finite relative error"),
        (("shapes", 0, "rel_err", "taught"), None, "needs a finite relative error"),
        (("shapes", 0, "ms", "fla"), None, "a null time needs a reason"),
        (("shapes", 0, "floor_ms"), 0.0, "floor_ms"),
        (("shapes", 0, "dims", "Q"), 0, "dims.Q"),
        (("shapes", 0, "dims", "g"), 4, "multiple of g"),
        (("shapes", 0, "cutile_kernels_ms", "chunk_scan"), KeyError, "cutile_kernels_ms"),
        (("shapes", 1, "name"), "tiny", "unique"),
        (("sweep", 0, "dtype"), 16, "dtype"),
        (("overhead", "impls", "triton"), {}, "unknown implementation"),
        (("overhead", "impls", "cutile", "graph_us"), 0, "graph_us"),
        # the staged steps
        (("steps",), {}, "results.steps: must be a list"),
        (("steps", 1, "name"), "b8-l4096-h80", "results.steps: names must be unique"),
        (("steps", 0, "dims", "h"), 0, r"steps\[0\]\[b8-l4096-h80\].dims.h"),
        (("steps", 0, "steps"), [], "non-empty list"),
        (("steps", 0, "steps", 2, "name"), "taught", "names must be unique"),
        (("steps", 0, "steps", 1, "idea"), KeyError, "missing key 'idea'"),
        (("steps", 0, "steps", 1, "ms"), None, r"\[fuse state passing\].error: a step with a null time"),
        (("steps", 0, "steps", 1, "ms"), 0.0, "must be a positive number or null"),
        (("steps", 0, "steps", 1, "rel_err"), None, "a timed step needs a finite relative error"),
        (("steps", 0, "steps", 1, "rel_err"), float("inf"), "a timed step needs a finite relative error"),
        (("steps", 0, "steps", 1, "error"), "", "non-empty string"),
        (("steps", 0, "steps", 1, "config"), {"state": {"kind": "fused"}}, "exactly"),
        (("steps", 0, "steps", 1, "config", "scan", "kind"), "turbo", r"config.scan: must be an object with"),
        (("steps", 0, "steps", 1, "kernels_ms", "chunk_scan"), -1.0, "kernels_ms.chunk_scan"),
        (("steps", 0, "steps", 0, "kernels_ms"), {"chunk_state_passing": 1.0, "chunk_scan": 1.0},
         "the unfused state stage's stages are"),
    ],
)
def test_validator_names_the_broken_field(fixture_results, path, value, message):
    with pytest.raises(ResultsError, match=message):
        validate_results(_mutate(fixture_results, path, value))


def test_what_the_schema_allows(fixture_results):
    r = _mutate(fixture_results, ("shapes", 0, "ms", "fla"), None)
    r["shapes"][0]["errors"]["fla"] = "did not import: ModuleNotFoundError"
    validate_results(r)
    # results measured before the taught forward was benchmarked, or without --steps
    old = copy.deepcopy(fixture_results)
    del old["steps"]
    for rec in old["shapes"] + old["sweep"]:
        del rec["ms"]["taught"], rec["rel_err"]["taught"]
    validate_results(old)
    # a step that failed: no time, its reason; its relative error where the check measured one
    step = fixture_results["steps"][0]["steps"][3]
    failed = dict(step, ms=None, rel_err=0.3, kernels_ms=None, error="failed the correctness check: ...")
    validate_results(_mutate(fixture_results, ("steps", 0, "steps", 3), failed))
    # a step timed end to end whose stages could not be timed keeps its time and says why
    partial = dict(step, kernels_ms=None, error="RuntimeError: out of memory")
    validate_results(_mutate(fixture_results, ("steps", 0, "steps", 3), partial))


def test_load_shipped_results_errors(tmp_path, monkeypatch, fixture_results):
    missing = tmp_path / "h200.json"
    monkeypatch.setattr(res, "shipped_results_path", lambda: missing)
    with pytest.raises(FileNotFoundError, match="python -m mamba2_tutorial bench"):
        res.load_shipped_results()
    missing.write_text("{not json")
    with pytest.raises(ResultsError, match="not valid JSON"):
        res.load_shipped_results()
    missing.write_text(json.dumps(_mutate(fixture_results, ("ceilings",), None)))
    with pytest.raises(ResultsError, match="results.ceilings"):
        res.load_shipped_results()
    missing.write_text(json.dumps(fixture_results))
    assert res.load_shipped_results() == fixture_results


def test_the_shipped_results():
    """The newest shipped forward run: a real, complete GPU measurement of the shipped code, whose recorded
    configs are what the tuning table picks now; its ceilings measured, below the datasheet's; its staged
    steps (where the run has them) end at the shipped config of their shape."""
    path = res.shipped_results_path()
    assert path.parts[-3:-1] == ("data", "benchmarks") and path.stem in res.SHIPPED_FORWARD
    r = res.load_shipped_results()
    assert HEX64.fullmatch(r["kernels_sha256"])  # which kernels it measured (perf.sources)
    # what notebooks 09 and 10 teach from it beyond the baselines: the taught forward beside ours, the staged
    # steps. Where the run has them they are complete; where it lacks them, the notebook prints what is
    # missing, from which run, and the command that measures it, in place of that part
    for what, notebook in (("taught", "09_performance"), ("steps", "10_making_it_fast")):
        msg = res.missing(r, what)
        nb = Path(__file__).parents[1] / "notebooks" / f"{notebook}.ipynb"
        cells = json.loads(nb.read_text())["cells"]
        assert any(f'res.missing(results, "{what}")' in "".join(c["source"]) for c in cells), notebook
        if msg is not None:
            assert r["device"] in msg and r["date"] in msg and repr(what) in msg, msg
            assert "`python -m mamba2_tutorial bench --out FILE.json` on a GPU" in msg, msg
    assert any(gpu in r["device"] for gpu in ("H100", "H200")) and "FIXTURE" not in r["device"].upper()
    assert [s["name"] for s in r["shapes"]] == list(bench.DEFAULT_SHAPES)
    for s in r["shapes"]:
        assert s["ms"]["cutile"] is not None and s["cutile_kernels_ms"], s["name"]
    assert bench.config_mismatches(r) == []
    assert r["sweep"], "the shipped results need the seqlen sweep for notebook 09"
    c, sheet = res.ceilings_of(r), roofline.H200_DATASHEET
    assert "measured" in c.source
    assert c.mma_flops_per_s < sheet.mma_flops_per_s and c.copy_bytes_per_s < sheet.copy_bytes_per_s
    for rec in r.get("steps", []):
        d = rec["dims"]
        dtype = getattr(torch, rec["dtype"])
        shipped = ssd_config(d["b"], d["l"], d["h"], d["p"], d["n"], d["Q"], dtype)
        assert config_from_json(rec["steps"][-1]["config"]) == shipped, rec["name"]
        assert rec["steps"][0]["config"] == config_to_json(FastConfig()), rec["name"]


def test_the_shipped_forward_runs_are_oldest_first_and_the_newest_is_read():
    paths = res.shipped_forward_paths()
    assert [p.stem for p in paths] == list(res.SHIPPED_FORWARD)  # every listed run is shipped
    dates = [json.loads(p.read_text())["date"] for p in paths]
    assert dates == sorted(dates)
    assert res.shipped_results_path() == paths[-1]


def test_the_newest_shipped_run_is_picked_by_date(tmp_path, monkeypatch, fixture_results):
    monkeypatch.setattr(res, "shipped_dir", lambda: tmp_path)
    monkeypatch.setattr(res, "SHIPPED_FORWARD", ("a", "b", "c"))
    with pytest.raises(FileNotFoundError, match="a.json, b.json, c.json"):
        res.shipped_results_path()
    dates = {"a": "2026-12-04 19:46 UTC", "c": "2026-12-09 08:00 UTC", "b": "2026-12-10 01:00 UTC"}
    for name, date in dates.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(dict(fixture_results, date=date)))
    assert res.shipped_results_path().name == "b.json"   # the latest date, not the last name
    assert res.load_shipped_results()["date"] == "2026-12-10 01:00 UTC"
    (tmp_path / "c.json").write_text("{oops")
    with pytest.raises(ResultsError, match="c.json: not a results object"):
        res.shipped_results_path()


def test_a_missing_section_is_an_error_not_an_empty_figure(fixture_results):
    assert res.require_section(fixture_results, "steps", "notebook 10") == fixture_results["steps"]
    with pytest.raises(ResultsError, match="no 'steps': notebook 10 needs them.*bench --steps"):
        res.require_section(_mutate(fixture_results, ("steps",), KeyError), "steps", "notebook 10")
    with pytest.raises(ResultsError, match="no 'sweep'"):
        res.require_section(_mutate(fixture_results, ("sweep",), []), "sweep", "the sweep figure")
    res.require_impl(fixture_results, "taught")
    old = copy.deepcopy(fixture_results)
    del old["shapes"][1]["ms"]["taught"], old["shapes"][1]["rel_err"]["taught"]
    with pytest.raises(ResultsError, match="did not run 'taught' at \\['tiny-g3'\\]"):
        res.require_impl(old, "taught")

    # what the notebooks print in place of a part the run did not measure; present but incomplete is an error
    assert res.missing(fixture_results, "taught") is None and res.missing(fixture_results, "steps") is None
    with pytest.raises(ResultsError, match="did not run 'taught' at \\['tiny-g3'\\]"):
        res.missing(old, "taught")
    for rec in old["shapes"]:  # a run made before the taught forward and the steps were measured
        for key in ("ms", "rel_err"):
            rec[key].pop("taught", None)
    del old["steps"]
    msg = res.missing(old, "taught")
    assert msg.startswith(f"Not measured: the results of {old['device']} ({old['date']}) have no times "
                          "of the taught kernels ('taught'")
    assert "`python -m mamba2_tutorial bench --out FILE.json` on a GPU" in msg
    assert "have no staged steps ('steps'" in res.missing(old, "steps")
    with pytest.raises(ResultsError, match="no 'steps'"):
        res.missing(_mutate(old, ("steps",), []), "steps")


# ----------------------------------------------------------------------------------------------------
# the tables and the host-bound flag


def _record(name, ms, floor=0.25, dims=None):
    return {
        "name": name,
        "dims": dims or {"b": 1, "l": 64, "h": 2, "p": 4, "g": 1, "n": 8, "Q": 16},
        "dtype": "bfloat16",
        "ms": ms,
        "rel_err": {k: (None if v is None else 3e-3) for k, v in ms.items()},
        "errors": {k: "did not import: ModuleNotFoundError: fla" for k, v in ms.items() if v is None},
        "floor_ms": floor,
    }


def _results(records):
    return {
        "schema_version": 1,
        "device": "NVIDIA H200 (hand-made test data)",
        "date": "2026-12-02",
        "versions": dict.fromkeys(res.VERSION_KEYS),
        "shapes": records,
        "sweep": [],
        "ceilings": {"mma_tflops": 790.0, "copy_tbps": 4.3},
        "overhead": None,
    }


def test_format_table_shows_times_floors_speedups_and_reasons():
    r = _results(
        [
            _record("a", {"cutile": 0.5, "mamba_ssm": 1.25, "fla": None, "torch": 40.0}),
            _record("b", {"cutile": 1.0, "mamba_ssm": 8.0, "fla": None, "torch": 50.0}, floor=0.5),
        ]
    )
    validate_results(r)
    text = res.format_table(r)
    lines = text.splitlines()
    row_a = next(line for line in lines if line.startswith("a "))
    assert "0.500 (2.0x)" in row_a and "1.250 (5.0x)" in row_a and "2.50x" in row_a and "80.00x" in row_a
    row_b = next(line for line in lines if line.startswith("b "))
    assert "1.000 (2.0x)" in row_b and "8.00x" in row_b
    geo = next(line for line in lines if line.startswith("geomean"))
    assert f"{math.sqrt(2.5 * 8.0):.2f}x" in geo  # 4.47x
    assert "fla ms" not in text and "taught" not in text  # a column nobody has is left out
    assert "b fla: did not import: ModuleNotFoundError: fla" in text
    assert "relative L2 error" in text and "3.0e-03" in text


def test_format_table_shows_the_taught_forward_beside_ours():
    """What the tuning bought: the taught kernels' time, and ours against it."""
    r = _results([_record("a", {"cutile": 0.5, "taught": 1.5, "mamba_ssm": 1.25, "fla": 1.0, "torch": 40.0})])
    validate_results(r)
    text = res.format_table(r)
    head = next(line for line in text.splitlines() if line.startswith("shape "))
    assert head.index("cutile ms") < head.index("taught ms") < head.index("mamba_ssm ms")
    assert "vs taught" in head
    row = next(line for line in text.splitlines() if line.startswith("a "))
    assert "1.500 (6.0x)" in row and "3.00x" in row


def test_format_table_kernel_breakdown():
    rec = _record("a", {"cutile": 0.5, "mamba_ssm": 1.25, "fla": 1.0, "torch": 40.0})
    rec["cutile_kernels_ms"] = {"chunk_state": 0.1, "state_passing": 0.05, "chunk_scan": 0.3}
    rec["kernel_floor_ms"] = {"chunk_state": 0.05, "state_passing": 0.05, "chunk_scan": 0.1}
    text = res.format_table(_results([rec]))
    row = [line for line in text.splitlines() if line.startswith("a ")][-1]
    assert "0.100 (2.0x)" in row and "0.050 (1.0x)" in row and "0.300 (3.0x)" in row and "0.450" in row
    assert row.endswith("no") and "host-bound" not in text.split("our kernels")[1].split("\n", 3)[-1]


def test_host_bound_is_flagged_with_its_device_time():
    """End to end far above the kernels' device time: the host's work per call sets it. The flag needs the
    kernels' times; the tables say so and show the device time."""
    fast = _record("big", {"cutile": 0.66, "mamba_ssm": 1.3, "fla": 1.2, "torch": 27.0})
    fast["cutile_kernels_ms"] = {"chunk_state_passing": 0.25, "chunk_scan": 0.41}  # 0.66: on the device
    slow = _record("small", {"cutile": 0.169, "mamba_ssm": 1.06, "fla": 0.62, "torch": 2.3})
    slow["cutile_kernels_ms"] = {"chunk_state_passing": 0.032, "chunk_scan": 0.054}  # 0.086: host-bound
    edge = _record("edge", {"cutile": 0.15, "mamba_ssm": 1.0, "fla": 1.0, "torch": 2.0})
    edge["cutile_kernels_ms"] = {"chunk_state_passing": 0.04, "chunk_scan": 0.06}  # exactly 1.5x: not
    bare = _record("bare", {"cutile": 0.169, "mamba_ssm": 1.06, "fla": 0.62, "torch": 2.3})  # no breakdown
    r = _results([fast, slow, edge, bare])
    validate_results(r)
    assert [res.host_bound(x) for x in r["shapes"]] == [False, True, False, False]
    assert res.device_ms(slow) == pytest.approx(0.086) and res.device_ms(bare) is None
    assert res.host_bound_notes(r) == [
        "small: 0.169 ms end to end, its kernels 0.086 ms of device time (2.0x): host-bound"]
    text = res.format_table(r)
    table = text.split("our kernels, each timed alone")[1].split("\n\n")[0].splitlines()[3:]
    rows = {line.split()[0]: line for line in table}
    assert list(rows) == ["big", "small", "edge"]
    assert rows["small"].endswith("yes") and rows["big"].endswith("no") and rows["edge"].endswith("no")
    assert "0.086" in rows["small"] and "0.169" in rows["small"]
    assert "  small: 0.169 ms end to end, its kernels 0.086 ms of device time (2.0x): host-bound" in text
    assert "big:" not in text


def test_the_fixture_flags_its_host_bound_shape(fixture_results):
    assert [r["name"] for r in fixture_results["shapes"] if res.host_bound(r)] == ["tiny"]


def test_a_fused_breakdown_is_tabled_and_validated():
    """Where ssd_forward fuses kernels 1 and 2, the breakdown has two kernels; next to a three-kernel record
    the table shows '-' for the kernels a record does not have, and floors must have the same keys."""
    three = _record("a", {"cutile": 0.5, "mamba_ssm": 1.25, "fla": 1.0, "torch": 40.0})
    three["cutile_kernels_ms"] = {"chunk_state": 0.1, "state_passing": 0.05, "chunk_scan": 0.3}
    three["kernel_floor_ms"] = {"chunk_state": 0.05, "state_passing": 0.05, "chunk_scan": 0.1}
    fused = _record("f", {"cutile": 0.4, "mamba_ssm": 1.25, "fla": 1.0, "torch": 40.0})
    fused["cutile_kernels_ms"] = {"chunk_state_passing": 0.12, "chunk_scan": 0.25}
    fused["kernel_floor_ms"] = {"chunk_state_passing": 0.06, "chunk_scan": 0.1}
    results = _results([three, fused])
    validate_results(results)
    text = res.format_table(results)
    head = [line for line in text.splitlines() if "chunk_state_passing ms" in line]
    assert head and head[0].index("state_passing ms") < head[0].index("chunk_state_passing ms")
    row = [line for line in text.splitlines() if line.startswith("f ")][-1]
    assert "0.120 (2.0x)" in row and "0.250 (2.5x)" in row and " - " in row and "0.370" in row

    bad = copy.deepcopy(fused)
    bad["kernel_floor_ms"] = dict(three["kernel_floor_ms"])
    with pytest.raises(ResultsError, match="kernel_floor_ms"):
        validate_results(_results([bad]))
    bad["cutile_kernels_ms"] = {"chunk_state_passing": 0.12}
    with pytest.raises(ResultsError, match="cutile_kernels_ms"):
        validate_results(_results([bad]))


def test_fused_kernel_floors_drop_the_chunk_states():
    d = roofline.dims_of(SHAPES["small"])
    three, two = roofline.kernel_costs(d), roofline.kernel_costs(d, fused=True)
    assert tuple(two) == res.FUSED_KERNELS
    states = three["chunk_state"].byte_terms["chunk states (write)"]
    moved = three["chunk_state"].bytes + three["state_passing"].bytes - two["chunk_state_passing"].bytes
    assert moved == pytest.approx(2 * states) and states > 0
    flops = three["chunk_state"].flops + three["state_passing"].flops
    assert two["chunk_state_passing"].flops == pytest.approx(flops)


def test_format_overhead_lists_what_failed(fixture_results):
    r = copy.deepcopy(fixture_results)
    r["overhead"]["impls"]["torch"] = {
        "event_ms": 0.5,
        "host_us": 900.0,
        "loop_us": 950.0,
        "graph_us": None,
        "graph_error": "RuntimeError: operation not permitted when capturing",
    }
    validate_results(r)
    text = res.format_overhead(r)
    assert "torch: graph_error RuntimeError: operation not permitted" in text and "950.0" in text
    assert res.format_overhead(dict(r, overhead=None)) == "launch overhead: not measured"


# ----------------------------------------------------------------------------------------------------
# the staged steps: costs, floors, the table


def test_step_costs_follow_the_config(fixture_results):
    """A step's design: the three taught kernels (the float32 chunk states cross memory twice) or the fused
    state stage and the scan; its floor is the sum of its stages', above the whole forward's."""
    rec = res.steps_record(fixture_results, "b8-l4096-h80")
    ceil = res.ceilings_of(fixture_results)
    taught, fused = rec["steps"][0], rec["steps"][1]
    assert not res.step_is_fused(taught) and res.step_is_fused(fused)
    d = roofline.dims_of(rec["dims"])
    assert res.step_costs(rec, taught) == roofline.kernel_costs(d, io_bytes=2, dt_bytes=2, init_state_bytes=2)
    assert list(res.step_costs(rec, fused)) == list(roofline.FUSED_KERNELS)
    states = d.b * d.nchunks * d.h * d.p * d.n * 4  # float32 chunk states: written once, read once
    moved = sum(c.bytes for c in res.step_costs(rec, taught).values()) - sum(
        c.bytes for c in res.step_costs(rec, fused).values())
    assert moved == 2 * states
    whole = roofline.floor_ms(d, ceil, io_bytes=2, dt_bytes=2)
    assert whole < res.step_floor_ms(rec, fused, ceil) < res.step_floor_ms(rec, taught, ceil)
    segmented = res.steps_record(fixture_results, "b1-l32768-h80")["steps"][-1]
    assert segmented["config"]["state"]["kind"] == "segmented" and res.step_is_fused(segmented)
    with pytest.raises(KeyError, match=r"measured at \['b8-l4096-h80', 'b1-l32768-h80'\]"):
        res.steps_record(fixture_results, "b4-l2048-h24")
    with pytest.raises(KeyError, match="--steps"):
        res.steps_record(dict(fixture_results, steps=[]))


def test_format_steps(fixture_results):
    text = res.format_steps(fixture_results)
    rec = res.steps_record(fixture_results, "b8-l4096-h80")
    block = text.split("b8-l4096-h80 (")[1].split("b1-l32768-h80 (")[0]
    lines = block.splitlines()
    assert "b8 l4096 h80 p64 g1 n128 Q256, bfloat16" in lines[0]
    head = lines[1]
    for col in ("step", "bought", "vs taught", "chunk_state ms", "chunk_state_passing ms", "chunk_scan ms",
                "design floor", "rel err"):
        assert col in head, col
    ceil = res.ceilings_of(fixture_results)
    for i, st in enumerate(rec["steps"]):
        row = next(line for line in lines[3:] if line.startswith(f"{i}  {st['name']} "))
        assert f"{st['ms']:.3f}" in row and f"{rec['steps'][0]['ms'] / st['ms']:.2f}x" in row
        assert f"{res.step_floor_ms(rec, st, ceil):.3f}" in row and f"{st['rel_err']:.1e}" in row
        if i:
            assert f"{rec['steps'][i - 1]['ms'] / st['ms']:.2f}x" in row
        assert f"  {i} {st['name']}: {st['idea']}" in lines
    taught_row = next(line for line in lines if line.startswith("0  taught"))
    k = rec["steps"][0]["kernels_ms"]["state_passing"]
    floor = res.step_costs(rec, rec["steps"][0])["state_passing"].floor_ms(ceil)
    assert f"{k:.3f} ({k / floor:.1f}x)" in taught_row
    assert "not timed" not in text and "host-bound" not in text
    assert res.format_steps(dict(fixture_results, steps=[])).startswith("staged steps: not measured")


def test_format_steps_says_why_a_step_has_no_time_and_flags_host_bound(fixture_results):
    r = copy.deepcopy(fixture_results)
    steps = r["steps"][0]["steps"]
    steps[2] |= {"ms": None, "rel_err": 0.25, "kernels_ms": None,
                 "error": "failed the correctness check: relative L2 error 2.5e-01"}
    steps[3]["ms"] = 2 * sum(steps[3]["kernels_ms"].values())
    validate_results(r)
    text = res.format_steps(r)
    assert "  not timed: 2-D scan, occupancy 3: failed the correctness check: relative L2 error 2.5e-01" \
        in text
    row2 = next(line for line in text.splitlines() if line.startswith("2  2-D scan"))
    assert " - " in row2 and "2.5e-01" in row2
    row3 = next(line for line in text.splitlines() if line.startswith("3  C Bᵀ once"))
    assert "[host-bound]" in row3
    # "bought" compares with the last step that has a time
    assert f"{steps[1]['ms'] / steps[3]['ms']:.2f}x" in row3
    assert res.step_host_bound(steps[3]) and not res.step_host_bound(steps[4])


# ----------------------------------------------------------------------------------------------------
# the harness: the correctness gate before any timing


def _spec(name="tiny-g3"):
    return bench.ShapeSpec(name, roofline.dims_of(SHAPES[name]))


def _run_one(impls, *, dtype=torch.bfloat16, name="tiny-g3", seed=3):
    spec = _spec(name)
    timer = fake_timer([spec])
    rec = bench.bench_shape(
        spec, impls, dtype=dtype, device="cpu", timer=timer, ceilings=roofline.H200_CEILINGS, seed=seed
    )
    return rec, timer.calls


def test_gate_rejects_wrong_outputs_and_never_times_them():
    good = stand_in_impls()

    def off_by_ten_percent(inp, Q):
        return lambda: ssd_chunked(inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"], Q) * 1.1

    def forgets_the_past(inp, Q):  # chunk size = the whole sequence would be right; chunk-local only is wrong
        def fwd():
            x, dt, A, B, C = (inp[k] for k in ("x", "dt", "A", "B", "C"))
            ys = [
                ssd_chunked(x[:, s : s + Q], dt[:, s : s + Q], A, B[:, s : s + Q], C[:, s : s + Q], Q)
                for s in range(0, x.shape[1], Q)
            ]
            return torch.cat(ys, dim=1)

        return fwd

    def nan_output(inp, Q):
        return lambda: torch.full_like(inp["x"], float("nan"))

    def crashes(inp, Q):
        def fwd():
            raise RuntimeError("CUDA error: an illegal memory access")

        return fwd

    impls = {
        "cutile": bench.Impl("cutile", forgets_the_past),
        "mamba_ssm": bench.Impl("mamba_ssm", nan_output),
        "fla": bench.Impl("fla", crashes),
        "torch": bench.Impl("torch", off_by_ten_percent),
    }
    rec, calls = _run_one(impls)
    assert calls == []  # nothing wrong is ever timed
    assert all(rec["ms"][k] is None for k in IMPLS)
    assert "failed the correctness check" in rec["errors"]["cutile"] and rec["rel_err"]["cutile"] > 2e-2
    assert rec["rel_err"]["torch"] == pytest.approx(0.1, rel=0.1)
    assert rec["rel_err"]["mamba_ssm"] is None and "nan" in rec["errors"]["mamba_ssm"]
    assert "illegal memory access" in rec["errors"]["fla"]
    validate_results(_results([rec]))

    rec, calls = _run_one({"cutile": good["cutile"], "torch": impls["torch"]})
    assert rec["ms"]["cutile"] is not None and rec["ms"]["torch"] is None
    assert calls == [
        "tiny-g3/cutile",
        "tiny-g3/kernel/chunk_state",
        "tiny-g3/kernel/state_passing",
        "tiny-g3/kernel/chunk_scan",
    ]
    assert rec["errors"]["mamba_ssm"] == "not selected"
    assert set(rec["cutile_kernels_ms"]) == set(res.KERNELS)


def test_a_shape_that_fails_outside_the_implementations_is_recorded(monkeypatch):
    def out_of_memory(*args, **kwargs):
        raise RuntimeError("CUDA out of memory. Tried to allocate 20.00 GiB")

    monkeypatch.setattr(bench, "_reference", out_of_memory)
    specs = [_spec("tiny-g3")]
    results = bench.run_benchmark(
        specs,
        impls=stand_in_impls(),
        device="cpu",
        timer=fake_timer(specs),
        progress=False,
        device_name="cpu test",
    )
    validate_results(results)
    rec = results["shapes"][0]
    assert all(v is None for v in rec["ms"].values()) and "out of memory" in rec["errors"]["cutile"]


def test_a_run_killed_after_the_first_shape_leaves_a_valid_partial_file(tmp_path, monkeypatch):
    """The --out file is rewritten after every shape: a run stopped while timing the second shape (a time
    limit, Ctrl-C) leaves the first shape's measurements, schema-valid and marked incomplete."""
    specs = [_spec("tiny-g3"), _spec("tiny")]
    timer = fake_timer(specs)

    def killed_on_the_second_shape(fn, label=""):
        if label.startswith("tiny/"):
            raise KeyboardInterrupt  # not an Exception: nothing in the harness may swallow it
        return timer(fn, label=label)

    out = tmp_path / "run" / "results.json"
    with pytest.raises(KeyboardInterrupt):
        bench.run_benchmark(
            specs,
            impls=stand_in_impls(),
            device="cpu",
            timer=killed_on_the_second_shape,
            progress=False,
            device_name="cpu test",
            sweep=[_spec("small")],
            checkpoint=bench.results_writer(out),
        )
    with pytest.raises(ResultsError, match="complete is false"):
        res.load_results(out)
    partial = res.load_results(out, allow_partial=True)
    assert partial["complete"] is False and not res.is_complete(partial)
    assert [r["name"] for r in partial["shapes"]] == ["tiny-g3"] and partial["sweep"] == []
    assert partial["shapes"][0]["ms"]["cutile"] is not None
    assert partial["shapes"][0]["ms"]["cutile"] == pytest.approx(timer(None, label="tiny-g3/cutile"))
    assert not list(out.parent.glob("*.tmp"))
    monkeypatch.setattr(res, "shipped_results_path", lambda: out)
    with pytest.raises(ResultsError, match="allow_partial"):
        res.load_shipped_results()
    assert res.load_shipped_results(allow_partial=True) == partial

    # the same run, not interrupted: checkpoints grow one shape at a time; the last write says complete
    seen = []
    results = bench.run_benchmark(
        specs,
        impls=stand_in_impls(),
        device="cpu",
        timer=fake_timer(specs),
        progress=False,
        device_name="cpu test",
        checkpoint=lambda r: (validate_results(r), seen.append([x["name"] for x in r["shapes"]])),
    )
    assert seen == [["tiny-g3"], ["tiny-g3", "tiny"]]
    assert results["complete"] is True
    bench.write_results(results, out)
    assert res.load_results(out)["shapes"] == results["shapes"]


def test_the_partial_marker_is_validated(fixture_results):
    with pytest.raises(ResultsError, match="results.complete"):
        validate_results(_mutate(fixture_results, ("complete",), "no"))
    validate_results(_mutate(fixture_results, ("shapes",), []) | {"complete": False})


def test_gate_checks_the_kernel_chain_too():
    impls = stand_in_impls()
    good_kernels = impls["cutile"].kernels

    def broken_chain(inp, Q):
        fns = good_kernels(inp, Q)
        fns["chain"] = lambda: torch.zeros_like(inp["x"])
        return fns

    impls = {"cutile": bench.Impl("cutile", impls["cutile"].prepare, kernels=broken_chain)}
    rec, calls = _run_one(impls)
    assert rec["ms"]["cutile"] is not None and "cutile_kernels_ms" not in rec
    assert (
        "failed" not in rec["errors"].get("cutile", "")
        and "relative L2 error" in rec["errors"]["cutile_kernels"]
    )
    assert calls == ["tiny-g3/cutile"]


def test_our_kernels_wired_into_the_harness_on_the_cpu_executor():
    """The harness calls ssd_forward and its stages with the right arguments (CPU executor), and records the
    config it ran."""
    rec, calls = _run_one({"cutile": bench._make_cutile(backend="cpu")}, name="tiny", seed=4)
    assert rec["ms"]["cutile"] is not None, rec["errors"]
    assert rec["rel_err"]["cutile"] < 1e-2 and "cutile_kernels" not in rec["errors"]
    d = rec["dims"]
    cfg = ssd_config(d["b"], d["l"], d["h"], d["p"], d["n"], d["Q"], torch.bfloat16)
    stages = res.FUSED_KERNELS if isinstance(cfg.state, Fused) else res.KERNELS
    assert calls == ["tiny/cutile"] + [f"tiny/kernel/{k}" for k in stages]
    assert set(rec["cutile_kernels_ms"]) == set(rec["kernel_floor_ms"]) == set(stages)
    assert rec["cutile_config"] == config_to_json(cfg)
    res.validate_record(rec)


def test_the_taught_forward_wired_into_the_harness_on_the_cpu_executor():
    """"taught" (ssd_forward_taught, three launches) is timed beside ours: what the tuning bought."""
    impls = {"cutile": bench._make_cutile(backend="cpu"), "taught": bench._make_taught(backend="cpu")}
    rec, calls = _run_one(impls, name="tiny-g3", seed=2)
    assert rec["ms"]["taught"] is not None and rec["rel_err"]["taught"] < 1e-2, rec["errors"]
    d = rec["dims"]
    cfg = ssd_config(d["b"], d["l"], d["h"], d["p"], d["n"], d["Q"], torch.bfloat16)
    stages = res.FUSED_KERNELS if isinstance(cfg.state, Fused) else res.KERNELS
    assert calls == ["tiny-g3/cutile", "tiny-g3/taught"] + [f"tiny-g3/kernel/{k}" for k in stages]
    validate_results(_results([rec]))
    assert "vs taught" in res.format_table(_results([rec]))


def test_configs_replace_what_ssd_config_picks_and_are_recorded_cpu():
    """``--configs`` (a candidate config): the harness runs our forward and its stages with the given config
    for that size, and records it; other sizes keep ssd_config's."""
    spec = _spec("tiny")
    d = spec.dims
    picked = ssd_config(d.b, d.l, d.h, d.p, d.n, d.Q, torch.bfloat16)
    assert isinstance(picked.state, Fused)  # so an unfused override shows in the stages that are timed
    unfused = FastConfig(Unfused(occupancy=2), SharedScan(occupancy=3))
    impl = bench._make_cutile(backend="cpu", configs={(d.b, d.l, d.h, d.p, d.g, d.n, d.Q): unfused})
    rec, calls = _run_one({"cutile": impl}, name="tiny", seed=4)
    assert rec["rel_err"]["cutile"] < 1e-2 and "cutile_kernels" not in rec["errors"]
    assert calls == ["tiny/cutile"] + [f"tiny/kernel/{k}" for k in res.KERNELS]
    assert config_from_json(json.loads(json.dumps(rec["cutile_config"]))) == unfused
    res.validate_record(rec)
    rec, _ = _run_one({"cutile": impl}, name="tiny-g3", seed=4)  # another size: ssd_config's pick
    e = rec["dims"]
    assert rec["cutile_config"] == config_to_json(
        ssd_config(e["b"], e["l"], e["h"], e["p"], e["n"], e["Q"], torch.bfloat16))


def test_config_mismatches_name_results_measured_with_other_configs():
    rec = _record("b8-l4096-h80", dict.fromkeys(IMPLS, 1.0),
                  dims={"b": 8, "l": 4096, "h": 80, "p": 64, "g": 1, "n": 128, "Q": 256})
    results = dict(_results([rec]), device="NVIDIA H200")  # the GPU of the h200 tuning table
    assert bench.config_mismatches(results) == []  # nothing recorded, nothing to compare
    shipped = ssd_config(8, 4096, 80, 64, 128, 256, torch.bfloat16)
    rec["cutile_config"] = config_to_json(shipped)
    assert bench.config_mismatches(results) == []
    rec["cutile_config"] = config_to_json(STEPS[-2].config)  # the step before the state stage was tuned
    (problem,) = bench.config_mismatches(results)
    assert problem.startswith("b8-l4096-h80: measured with ") and "bfloat16/large/one-tile/q>=256" in problem
    # a segmented stage recorded with its segment count matches the table's rule (segments None)
    long = _record("b1-l32768-h80", dict.fromkeys(IMPLS, 1.0),
                   dims={"b": 1, "l": 32768, "h": 80, "p": 64, "g": 1, "n": 128, "Q": 256})
    long["cutile_config"] = config_to_json(ssd_config(1, 32768, 80, 64, 128, 256, torch.bfloat16))
    assert long["cutile_config"]["state"]["segments"] == 8
    assert bench.config_mismatches(dict(results, shapes=[long])) == []
    # a GPU without its own table runs the default table's configs, as ssd_config picks them there
    assert bench.config_mismatches(dict(results, shapes=[long], device="NVIDIA B200")) == []
    rec["cutile_config"] = config_to_json(STEPS[-2].config)
    assert len(bench.config_mismatches(dict(results, device="NVIDIA B200"))) == 1


def test_read_configs_maps_shape_names_to_sizes(tmp_path):
    path = tmp_path / "best.json"
    cfg = FastConfig(Fused(state_tile=(64, 128), occupancy=2),
                     ChunkScan(torch.bfloat16, Decay.KEY_LOG2, occupancy=3))
    path.write_text(json.dumps({"b8-l4096-h80": config_to_json(cfg)}))
    assert bench.read_configs(path) == {(8, 4096, 80, 64, 1, 128, 256): cfg}
    path.write_text(json.dumps({"b9-nonsense": {}}))
    with pytest.raises(ValueError, match="unknown shape 'b9-nonsense'"):
        bench.read_configs(path)
    path.write_text(json.dumps({"b8-l4096-h80": {"state": {"kind": "fused", "warp_drive": 1},
                                                 "scan": {"kind": "plain"}}}))
    with pytest.raises(ValueError, match=r"b8-l4096-h80: state: Fused has no fields \['warp_drive'\]"):
        bench.read_configs(path)
    path.write_text(json.dumps({"b8-l4096-h80": {"state": {"kind": "unfused", "occupancy": 0},
                                                 "scan": {"kind": "plain"}}}))
    with pytest.raises(ValueError, match="occupancy"):
        bench.read_configs(path)


# the staged steps, run by the harness on the CPU executor: a long sequence, so the segmented step is there
LONG = bench.ShapeSpec("cpu-long", roofline.Dims(b=1, l=500, h=2, p=16, g=1, n=16, Q=16))  # 32 chunks, ragged


def test_bench_steps_on_the_cpu_executor():
    """Every staged step checked against float64, then timed end to end and stage by stage; the record is
    schema-valid and ends at the config ssd_forward ships for the shape's class."""
    timer_calls = []

    def fake(fn, label=""):
        timer_calls.append(label)
        return 1.0 + len(timer_calls) / 100

    rec = bench.bench_steps(LONG, dtype=torch.bfloat16, device="cpu", timer=fake, seed=1)
    steps = steps_for(segmented=True, segments=8)
    assert [s["name"] for s in rec["steps"]] == [s.name for s in steps]
    assert [config_from_json(s["config"]) for s in rec["steps"]] == [s.config for s in steps]
    assert all("error" not in s for s in rec["steps"]), [s.get("error") for s in rec["steps"]]
    assert all(s["rel_err"] < bench.rel_err_gate(torch.bfloat16) for s in rec["steps"])
    assert set(rec["steps"][0]["kernels_ms"]) == set(res.KERNELS)
    assert all(set(s["kernels_ms"]) == set(res.FUSED_KERNELS) for s in rec["steps"][1:])
    assert rec["steps"][-1]["config"]["state"]["segments"] == 8  # segments_for(b1, h2, 32 chunks)
    # each step: its forward, then its stages in launch order
    want = []
    for s in rec["steps"]:
        want += [f"cpu-long/step/{s['name']}"] + [f"cpu-long/step/{s['name']}/{k}" for k in s["kernels_ms"]]
    assert timer_calls == want
    results = _results([_record("a", dict.fromkeys(res.REQUIRED_IMPLS, 1.0))]) | {"steps": [rec]}
    validate_results(results)
    assert "cpu-long (b1 l500 h2 p16 g1 n16 Q16, bfloat16)" in res.format_steps(results)


def test_bench_steps_rejects_a_wrong_step_and_never_times_it(monkeypatch):
    """A step whose output is wrong is recorded with its error and its relative error, never timed; a shape
    that fails before any step (out of memory) gives every step the reason."""
    from mamba2_tutorial.fast import forward

    real = forward.ssd_forward

    def wrong_for_bf16_cb(*args, config=None, **kw):
        y = real(*args, config=config, **kw)
        return y * 1.5 if getattr(config.scan, "cb_dtype", None) == torch.bfloat16 else y

    monkeypatch.setattr(forward, "ssd_forward", wrong_for_bf16_cb)
    calls = []
    spec = bench.ShapeSpec("cpu-tiny", roofline.Dims(b=1, l=40, h=2, p=8, g=1, n=8, Q=16))
    rec = bench.bench_steps(spec, dtype=torch.bfloat16, device="cpu",
                            timer=lambda fn, label="": calls.append(label) or 1.0)
    bad = [s for s in rec["steps"] if s["config"]["scan"].get("cb_dtype") == "bfloat16"]
    assert bad and all(s["ms"] is None and "failed the correctness check" in s["error"] for s in bad)
    assert all(s["rel_err"] == pytest.approx(0.5, rel=0.05) for s in bad)
    assert not any(label.startswith(f"cpu-tiny/step/{s['name']}") for s in bad for label in calls)
    assert len(rec["steps"]) == len(STEPS)  # not a long sequence: no segmented step
    validate_results(_results([_record("a", dict.fromkeys(res.REQUIRED_IMPLS, 1.0))]) | {"steps": [rec]})

    def out_of_memory(*args, **kwargs):
        raise RuntimeError("CUDA out of memory. Tried to allocate 20.00 GiB")

    monkeypatch.setattr(bench, "_reference", out_of_memory)
    rec = bench.bench_steps(spec, dtype=torch.bfloat16, device="cpu", timer=lambda fn, label="": 1.0)
    assert all(s["ms"] is None and "out of memory" in s["error"] for s in rec["steps"])


def test_run_benchmark_writes_the_steps_section(monkeypatch):
    """``steps=`` adds the "steps" section (checkpointed like the rest); without it there is none."""
    seen = []
    monkeypatch.setattr(bench, "bench_steps", lambda spec, **kw: seen.append((spec.name, kw["device"])) or {
        "name": spec.name, "dims": spec.dims.as_dict(), "dtype": "bfloat16",
        "steps": [{"name": "taught", "idea": "", "config": config_to_json(FastConfig()), "ms": None,
                   "rel_err": None, "kernels_ms": None, "error": "not run in this test"}]})
    specs = [_spec("tiny-g3")]
    common = dict(impls={"torch": stand_in_impls()["torch"]}, device="cpu", timer=fake_timer(specs),
                  progress=False, device_name="cpu test")
    checkpoints = []
    results = bench.run_benchmark(specs, steps=[_spec("tiny")], checkpoint=checkpoints.append, **common)
    validate_results(results)
    assert [r["name"] for r in results["steps"]] == ["tiny"] and seen == [("tiny", "cpu")]
    assert results["kernels_sha256"] == kernels_sha256()  # the run records which kernels it measured
    assert "steps" in checkpoints[-1] and all(c["complete"] is False for c in checkpoints)
    assert "steps" not in bench.run_benchmark(specs, **common)


def test_check_output_shape_and_gate():
    # seeded and large enough that the noise's relative norm is 0.01 to within a few percent (with 120
    # unseeded elements it drifted past the 20% tolerance whenever the tests before it moved the global RNG)
    gen = torch.Generator().manual_seed(0)
    y = torch.randn(2, 50, 3, 4, dtype=torch.float64, generator=gen)
    assert bench.check_output("ok", y, y, gate=1e-3) == 0.0
    with pytest.raises(bench.IncorrectOutput, match=r"output shape \(2, 50, 3\)"):
        bench.check_output("short", y[..., 0], y, gate=1e-3)
    with pytest.raises(bench.IncorrectOutput, match="returned tuple"):
        bench.check_output("tuple", (y,), y, gate=1e-3)
    noise = 0.01 * torch.randn(y.shape, dtype=y.dtype, generator=gen)
    with pytest.raises(bench.IncorrectOutput, match="exceeds") as info:
        bench.check_output("noisy", y + noise, y, gate=1e-3)
    assert info.value.rel_err == pytest.approx(0.01, rel=0.1)
    assert bench.rel_err_gate(torch.bfloat16) == 2e-2
    with pytest.raises(ValueError, match="no relative-error gate"):
        bench.rel_err_gate(torch.int32)


@pytest.mark.parametrize("name, seed", [("tiny-g3", 0), ("tiny", 5), ("tiny-g1", 11)])
def test_fla_mapping_computes_the_ssd(name, seed):
    """q = C, k = B (groups expanded to heads), v = dt·x, g = dt·A, scale 1: simple GLA equals the SSD."""
    shape = SHAPES[name]
    inp = make_inputs(shape, seed=seed, dtype=torch.float64, D=False)
    f = bench.fla_inputs(inp)
    b, l, h, p = inp["x"].shape
    assert f["q"].shape == f["k"].shape == (b, l, h, shape.dstate) and f["v"].shape == (b, l, h, p)
    assert f["g"].shape == (b, l, h) and f["g"].dtype == torch.float32 and (f["g"] < 0).all()
    y = simple_gla(f["q"], f["k"], f["v"], f["g"].double())
    y_ref = ssd_chunked(inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"], shape.chunk_size)
    from mamba2_tutorial.lessons.checks import relative_error

    assert relative_error(y, y_ref) < 1e-6  # g is float32


def test_fla_mapping_uses_mamba_group_order():
    """Head i reads group i // (h/g): swapping the group order must change the answer."""
    inp = make_inputs(SHAPES["tiny-g3"], seed=2, dtype=torch.float64, D=False)
    f = bench.fla_inputs(inp)
    rep = inp["x"].shape[2] // inp["B"].shape[2]
    for i in range(inp["x"].shape[2]):
        assert torch.equal(f["k"][:, :, i], inp["B"][:, :, i // rep])
        assert torch.equal(f["q"][:, :, i], inp["C"][:, :, i // rep])


def test_tilegym_mapping_follows_its_api():
    """TileGym's forward takes a and d as (h,) float32, dt (b, l, h) in x's dtype (already through softplus)
    and a float32 initial state; a length that is not a multiple of the chunk size is refused by name."""
    inp = make_inputs(SHAPES["tiny-g3"], seed=3, dtype=torch.bfloat16, D=False)
    b, l, h, p = inp["x"].shape
    n = inp["B"].shape[-1]
    Q = 8
    even = {k: (v[:, : l - l % Q] if v.dim() > 1 else v) for k, v in inp.items()}
    a = bench.tilegym_inputs(even, Q)
    assert a["a"].dtype == a["d"].dtype == a["init_state"].dtype == torch.float32
    assert a["a"].shape == a["d"].shape == (h,) and not a["d"].any()
    assert a["dt"].dtype == torch.bfloat16 and a["dt"].shape == (b, l - l % Q, h)
    assert a["init_state"].shape == (b, h, p, n) and not a["init_state"].any()
    assert torch.equal(a["b"], even["B"]) and torch.equal(a["c"], even["C"])
    with pytest.raises(ValueError, match=f"multiple of the chunk size: l = {l}, chunk_size = {Q}"):
        bench.tilegym_inputs(inp, Q)


def test_mamba_import_falls_back_to_the_triton_files(tmp_path, monkeypatch):
    """A mamba_ssm whose package __init__ fails (no CUDA extension) still yields mamba_chunk_scan_combined."""
    pkg = tmp_path / "mamba_ssm"
    (pkg / "ops" / "triton").mkdir(parents=True)
    (pkg / "__init__.py").write_text('__version__ = "9.9.9"\nimport selective_scan_cuda_that_is_not_built\n')
    (pkg / "ops" / "__init__.py").write_text("")
    (pkg / "ops" / "triton" / "__init__.py").write_text("")
    (pkg / "ops" / "triton" / "ssd_combined.py").write_text(
        textwrap.dedent("""
        def mamba_chunk_scan_combined(x, dt, A, B, C, chunk_size, **kw):
            return "fake mamba"
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    saved = {k: v for k, v in sys.modules.items() if k.startswith("mamba_ssm") or k == "selective_scan_cuda"}
    try:
        for k in saved:
            del sys.modules[k]
        fn = bench.import_mamba_chunk_scan_combined()
        assert fn(None, None, None, None, None, 4) == "fake mamba"
        assert bench.versions()["mamba_ssm"] == "9.9.9"
    finally:
        for k in [k for k in sys.modules if k.startswith("mamba_ssm") or k == "selective_scan_cuda"]:
            del sys.modules[k]
        sys.modules.update(saved)


def test_load_implementations_reports_what_does_not_import(monkeypatch):
    def boom():
        raise ModuleNotFoundError("No module named 'fla'")

    monkeypatch.setitem(bench.FACTORIES, "fla", boom)
    impls, missing = bench.load_implementations(["torch", "fla"])
    assert list(impls) == ["torch"] and "No module named 'fla'" in missing["fla"]
    with pytest.raises(ValueError, match="unknown implementation"):
        bench.load_implementations(["jax"])

# ----------------------------------------------------------------------------------------------------
# command line, timing


def test_cli_parser_and_cpu_refusal(capsys):
    args = bench.build_parser().parse_args([])
    assert args.shapes == list(bench.DEFAULT_SHAPES) and args.dtype == "bf16" and args.sweep
    assert args.impls == list(IMPLS) and "taught" in args.impls and args.steps == list(bench.STEP_SHAPES)
    args = bench.build_parser().parse_args(["--shapes", "b4-l2048-h24", "--sweep", "--steps", "--rep", "50"])
    assert args.shapes == ["b4-l2048-h24"] and args.sweep == [] and args.steps == [] and args.rep == 50.0
    assert args.configs is None
    args = bench.build_parser().parse_args(["--configs", "b8/best.json", "b1/best.json"])
    assert [str(p) for p in args.configs] == ["b8/best.json", "b1/best.json"]
    if not torch.cuda.is_available():
        assert bench.main(["--shapes", "b4-l2048-h24"]) == 2
        assert "needs a CUDA GPU" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench.default_shapes(["no-such-shape"])
    assert [s.name for s in bench.sweep_shapes((512, 1024))] == ["b4-l512-h24", "b4-l1024-h24"]


def test_summarize_median_and_quantiles():
    from mamba2_tutorial.perf.timing import summarize

    t = summarize([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (t.median_ms, t.p20_ms, t.p80_ms, t.n) == (3.0, 2.0, 4.0, 5)
    with pytest.raises(ValueError):
        summarize([])


def test_time_cuda_plumbing_with_a_fake_clock(monkeypatch):
    """The event loop's bookkeeping (warm-up and repetition counts, flush outside the events, the median),
    checked against a fake device clock: fn takes 2 ms, the L2 flush 0.5 ms. No real timing."""
    import types

    from mamba2_tutorial.perf import timing

    clock = {"t": 0.0, "calls": 0}

    class Event:
        def __init__(self, enable_timing=False):
            self.t = None

        def record(self):
            self.t = clock["t"]

        def elapsed_time(self, end):
            return end.t - self.t

    class Flush:
        def zero_(self):
            clock["t"] += 0.5

    def fn():
        clock["t"] += 2.0
        clock["calls"] += 1

    cuda = types.SimpleNamespace(is_available=lambda: True, synchronize=lambda: None, Event=Event)
    fake_torch = types.SimpleNamespace(cuda=cuda, int8="int8", empty=lambda *a, **k: Flush())
    monkeypatch.setattr(timing, "torch", fake_torch)
    t = timing.time_cuda(fn, warmup_ms=10.0, rep_ms=40.0)
    # estimate 2.5 ms per call (5 calls with flush) -> 4 warm-up calls, 16 timed calls (>= min_reps 10)
    assert (t.median_ms, t.n) == (2.0, 16)
    assert clock["calls"] == 1 + 5 + 4 + 16
    t = timing.time_cuda(fn, warmup_ms=1.0, rep_ms=1.0, flush_l2=False)
    assert t.n == 10 and t.median_ms == 2.0  # at least min_reps


# ----------------------------------------------------------------------------------------------------
# GPU: the real harness at a tiny shape (correctness and schema only; no performance claims)


@pytest.mark.gpu
def test_tiny_real_benchmark_run_on_gpu():
    spec = bench.ShapeSpec("gpu-tiny", roofline.Dims(b=2, l=300, h=8, p=64, g=2, n=128, Q=64))  # ragged
    results = bench.run_benchmark(
        [spec],
        impl_names=("cutile", "taught", "mamba_ssm", "fla", "torch"),
        timer=bench.cuda_timer(5.0, 20.0),
        sweep=[bench.ShapeSpec("gpu-sweep", roofline.Dims(1, 256, 8, 64, 1, 128, 64))],
        overhead=bench.ShapeSpec("gpu-ov", roofline.Dims(1, 128, 4, 64, 1, 128, 64)),
        steps=[bench.ShapeSpec("gpu-steps", roofline.Dims(1, 2048, 4, 64, 1, 128, 64))],  # long: segmented
        progress=False,
    )
    validate_results(results)
    rec = results["shapes"][0]
    assert rec["ms"]["cutile"] is not None, rec["errors"]
    assert rec["ms"]["taught"] is not None, rec["errors"]
    assert rec["ms"]["torch"] is not None, rec["errors"]
    assert rec["rel_err"]["cutile"] < 2e-2 and rec["cutile_kernels_ms"], rec["errors"]
    assert results["overhead"]["impls"]["cutile"]["event_ms"] is not None
    steps = results["steps"][0]["steps"]
    assert steps[-1]["name"] == "segmented state stage"
    assert all(s["ms"] is not None and s["kernels_ms"] for s in steps), [s.get("error") for s in steps]
    print(res.format_table(results))
    print(res.format_steps(results))


def test_packed_seq_idx_draws_lengths_in_range_from_its_seed():
    seq_idx = bench.packed_seq_idx(2, 3000, seed=4, lengths=(100, 400))
    assert seq_idx.shape == (2, 3000) and seq_idx.dtype == torch.int32
    assert torch.equal(seq_idx, bench.packed_seq_idx(2, 3000, seed=4, lengths=(100, 400)))
    assert not torch.equal(seq_idx, bench.packed_seq_idx(2, 3000, seed=5, lengths=(100, 400)))
    for row in seq_idx:
        assert int(row[0]) == 0 and bool((row[1:] - row[:-1] >= 0).all())
        lengths = torch.bincount(row)
        assert bool((lengths[:-1] >= 100).all()) and bool((lengths[:-1] <= 400).all()) and lengths[-1] <= 400
    with pytest.raises(ValueError, match="1 <= low <= high"):
        bench.packed_seq_idx(1, 10, seed=0, lengths=(5, 4))


def test_bench_packed_on_the_cpu_executor(monkeypatch):
    """``bench --packed``'s wiring: every run checked against float64 (the packed ones against each sequence
    alone), then timed; a stand-in for mamba_ssm that ignores seq_idx fails the packed check and is never
    timed; the table names every run."""
    calls = []
    spec = bench.ShapeSpec("cpu-packed", roofline.Dims(b=2, l=200, h=2, p=16, g=1, n=16, Q=32))

    def unpacked_only(x, dt, A, B, C, chunk_size, seq_idx=None):
        return ssd_chunked(x, dt, A, B, C, chunk_size=chunk_size)

    rec = bench.bench_packed(spec, dtype=torch.bfloat16, device="cpu", seed=2, lengths=(10, 60),
                             timer=lambda fn, label="": calls.append(label) or 2.0, mamba=unpacked_only)
    ours = ("cutile unpacked", "cutile packed", "cutile each sequence")
    trained = ("cutile unpacked fwd+bwd", "cutile packed fwd+bwd", "mamba_ssm unpacked fwd+bwd")
    assert set(rec["ms"]) == {*ours, "mamba_ssm unpacked", *trained}, rec["errors"]
    assert all(rec["rel_err"][k] < bench.rel_err_gate(torch.bfloat16) for k in rec["rel_err"]
               if k != "mamba_ssm packed")
    assert "failed the correctness check" in rec["errors"]["mamba_ssm packed"]
    # a forward that failed its check is not trained either, so no gradients are compared with it
    assert "not run" in rec["errors"]["mamba_ssm packed fwd+bwd"] and "grad_rel_err" not in rec
    assert calls == [f"cpu-packed/packed/{k}" for k in (*ours, "mamba_ssm unpacked", *trained)]
    assert rec["packed_over_unpacked"] == 1.0 and rec["packed_over_unpacked_fwd_bwd"] == 1.0
    assert all(n >= 4 for n in rec["sequences"])
    table = bench.format_packed([rec])
    assert "cpu-packed (b2 l200 h2" in table and "cutile packed / unpacked, forward: 1.000" in table
    assert "cutile packed / unpacked, fwd+bwd: 1.000 (within the goal of 1.10x)" in table
    assert "mamba_ssm packed" in table and json.loads(json.dumps(rec)) == rec


def test_packed_verdict_against_the_goal():
    assert bench.packed_verdict(1.05).startswith("within the goal")
    assert bench.packed_verdict(1.4).startswith("short of the goal")
    assert bench.packed_verdict(12.8).startswith("far from the goal")


def test_bench_packed_compares_gradients_with_mamba_ssm(monkeypatch):
    """With a packed-aware stand-in for mamba_ssm (the float64-exact reference run on each sequence alone),
    our packed gradients agree with its gradients to bfloat16 precision; one that resets nowhere does not
    even reach the gradient comparison."""
    from mamba2_tutorial.reference import ssd_each_sequence

    spec = bench.ShapeSpec("cpu-packed", roofline.Dims(b=1, l=150, h=2, p=16, g=1, n=16, Q=32))

    def packed_reference(x, dt, A, B, C, chunk_size, seq_idx=None):
        f = functools.partial(ssd_chunked, chunk_size=chunk_size)
        if seq_idx is None:
            return f(x, dt, A, B, C)
        return ssd_each_sequence(f, x, dt, A, B, C, seq_idx)

    rec = bench.bench_packed(spec, dtype=torch.bfloat16, device="cpu", seed=3, lengths=(20, 70),
                             timer=lambda fn, label="": 1.0, mamba=packed_reference)
    assert set(rec["grad_rel_err"]) == set(bench.PACKED_GRADS), rec["errors"]
    assert all(err < 2e-2 for err in rec["grad_rel_err"].values()), rec["grad_rel_err"]
    assert "our packed gradients against mamba_ssm's" in bench.format_packed([rec])


def test_chunk_size_runs_the_presets_at_another_chunk_size():
    """``bench --chunk-size Q``: each preset at Q, named apart where Q is not its own; a bad Q is refused."""
    specs = bench.default_shapes(["b8-l4096-h80", "b2-l8192-h128-g8"], 128)
    assert [s.name for s in specs] == ["b8-l4096-h80-Q128", "b2-l8192-h128-g8"]
    assert [s.dims.Q for s in specs] == [128, 128] and specs[0].dims.l == 4096
    assert bench.build_parser().parse_args(["--chunk-size", "128"]).chunk_size == 128
    for bad in (96, 8):
        with pytest.raises(SystemExit, match="power of two of at least 16"):
            bench.default_shapes(["b8-l4096-h80"], bad)

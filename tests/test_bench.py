"""The benchmark's arithmetic and plumbing, on a CPU: roofline counts, the results schema, the table, the
targets, the harness's correctness gate (wrong implementations are rejected, never timed), the fla mapping,
the mamba_ssm import fallback, the figures. No timing happens here: performance is measured only by ``python
-m mamba2_tutorial bench``. The one GPU test runs the harness at a tiny shape and checks correctness and the
schema, not speed.
"""

from __future__ import annotations

import copy
import json
import math
import sys
import textwrap

import pytest
import torch
from bench_fixture import FIXTURE_DEVICE, FIXTURE_PATH, fake_timer, make_fixture, simple_gla, stand_in_impls

from mamba2_tutorial import bench, bench_results, costs, roofline
from mamba2_tutorial.bench_results import IMPLS, ResultsError, validate_results
from mamba2_tutorial.inputs import SHAPES, make_inputs
from mamba2_tutorial.kernels import configs as config_module
from mamba2_tutorial.kernels.configs import SSDConfig, config_from_json, config_to_json, ssd_config
from mamba2_tutorial.reference import ssd_chunked


@pytest.fixture(scope="module")
def fixture_results():
    return bench_results.load_results(FIXTURE_PATH)


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
def test_reproduces_the_background_floors(name, floor):
    """The background notes' floors (790 TFLOP/s, 4.3 TB/s) counted the full Q x Q blocks and dt in fp32."""
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


def test_fixture_is_what_the_generator_makes(fixture_results):
    """The committed fixture matches a fresh fake run (same records, same fake times; errors to rounding)."""
    fresh = make_fixture()
    validate_results(fresh)
    for key in ("shapes", "sweep"):
        assert [r["name"] for r in fresh[key]] == [r["name"] for r in fixture_results[key]]
        for a, b in zip(fresh[key], fixture_results[key]):
            assert a["dims"] == b["dims"]
            for impl in IMPLS:
                assert a["ms"][impl] == pytest.approx(b["ms"][impl], rel=1e-5)
                assert a["rel_err"][impl] == pytest.approx(b["rel_err"][impl], rel=0.05)


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
        (("device",), "", "results.device"),
        (("versions", "fla"), KeyError, "missing key 'fla'"),
        (("versions", "torch"), 2.11, "versions.torch"),
        (("ceilings", "copy_tbps"), -1.0, "copy_tbps"),
        (("shapes",), [], "non-empty list"),
        (("shapes", 0, "ms", "fla"), KeyError, "keys must be exactly"),
        (("shapes", 0, "ms", "cutile"), -0.5, "ms.cutile"),
        (("shapes", 0, "ms", "cutile"), float("nan"), "ms.cutile"),
        (("shapes", 0, "rel_err", "cutile"), None, "needs a finite relative error"),
        (("shapes", 0, "ms", "fla"), None, "a null time needs a reason"),
        (("shapes", 0, "floor_ms"), 0.0, "floor_ms"),
        (("shapes", 0, "dims", "Q"), 0, "dims.Q"),
        (("shapes", 0, "dims", "g"), 4, "multiple of g"),
        (("shapes", 0, "cutile_kernels_ms", "chunk_scan"), KeyError, "cutile_kernels_ms"),
        (("shapes", 1, "name"), "tiny", "unique"),
        (("sweep", 0, "dtype"), 16, "dtype"),
        (("overhead", "impls", "triton"), {}, "unknown implementation"),
        (("overhead", "impls", "cutile", "graph_us"), 0, "graph_us"),
    ],
)
def test_validator_names_the_broken_field(fixture_results, path, value, message):
    with pytest.raises(ResultsError, match=message):
        validate_results(_mutate(fixture_results, path, value))


def test_a_null_time_with_a_reason_is_valid(fixture_results):
    r = _mutate(fixture_results, ("shapes", 0, "ms", "fla"), None)
    r["shapes"][0]["errors"]["fla"] = "did not import: ModuleNotFoundError"
    validate_results(r)


def test_load_shipped_results_errors(tmp_path, monkeypatch, fixture_results):
    missing = tmp_path / "h200.json"
    monkeypatch.setattr(bench_results, "shipped_results_path", lambda: missing)
    with pytest.raises(FileNotFoundError, match="python -m mamba2_tutorial bench"):
        bench_results.load_shipped_results()
    missing.write_text("{not json")
    with pytest.raises(ResultsError, match="not valid JSON"):
        bench_results.load_shipped_results()
    missing.write_text(json.dumps(_mutate(fixture_results, ("ceilings",), None)))
    with pytest.raises(ResultsError, match="results.ceilings"):
        bench_results.load_shipped_results()
    missing.write_text(json.dumps(fixture_results))
    assert bench_results.load_shipped_results() == fixture_results


def test_shipped_results_when_present():
    """Once the lead ships the H200 run, it must be a real, complete GPU measurement; until then, a clear
    error."""
    path = bench_results.shipped_results_path()
    assert path.parts[-3:] == ("data", "benchmarks", "h200.json")
    if not path.exists():
        with pytest.raises(FileNotFoundError):
            bench_results.load_shipped_results()
        return
    r = bench_results.load_shipped_results()
    assert "H200" in r["device"] and "FIXTURE" not in r["device"].upper()
    assert [s["name"] for s in r["shapes"]] == list(bench.DEFAULT_SHAPES)
    for s in r["shapes"]:
        assert s["ms"]["cutile"] is not None and s["cutile_kernels_ms"], s["name"]
    # configs recorded since stop 22: the shipped numbers must be the shipped configs' (re-run the benchmark,
    # or ship the measured config in kernels/configs.py)
    assert bench.config_mismatches(r) == []
    assert r["sweep"], "the shipped results need the seqlen sweep for notebook 09"


# ----------------------------------------------------------------------------------------------------
# the table and the targets


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
        "versions": dict.fromkeys(bench_results.VERSION_KEYS),
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
    text = bench_results.format_table(r)
    lines = text.splitlines()
    row_a = next(line for line in lines if line.startswith("a "))
    assert "0.500 (2.0x)" in row_a and "1.250 (5.0x)" in row_a and "2.50x" in row_a and "80.00x" in row_a
    row_b = next(line for line in lines if line.startswith("b "))
    assert "1.000 (2.0x)" in row_b and "8.00x" in row_b
    geo = next(line for line in lines if line.startswith("geomean"))
    assert f"{math.sqrt(2.5 * 8.0):.2f}x" in geo  # 4.47x
    assert "fla ms" not in text  # a column nobody has is left out
    assert "b fla: did not import: ModuleNotFoundError: fla" in text
    assert "relative L2 error" in text and "3.0e-03" in text


def test_format_table_kernel_breakdown():
    rec = _record("a", {"cutile": 0.5, "mamba_ssm": 1.25, "fla": 1.0, "torch": 40.0})
    rec["cutile_kernels_ms"] = {"chunk_state": 0.1, "state_passing": 0.05, "chunk_scan": 0.3}
    rec["kernel_floor_ms"] = {"chunk_state": 0.05, "state_passing": 0.05, "chunk_scan": 0.1}
    text = bench_results.format_table(_results([rec]))
    row = [line for line in text.splitlines() if line.startswith("a ")][-1]
    assert "0.100 (2.0x)" in row and "0.050 (1.0x)" in row and "0.300 (3.0x)" in row and "0.450" in row


def test_a_fused_breakdown_is_tabled_plotted_and_validated():
    """Where ssd_forward fuses kernels 1 and 2, the breakdown has two kernels; next to a three-kernel record
    the table shows '-' for the kernels a record does not have, and floors must have the same keys."""
    from mamba2_tutorial import perf_plots

    three = _record("a", {"cutile": 0.5, "mamba_ssm": 1.25, "fla": 1.0, "torch": 40.0})
    three["cutile_kernels_ms"] = {"chunk_state": 0.1, "state_passing": 0.05, "chunk_scan": 0.3}
    three["kernel_floor_ms"] = {"chunk_state": 0.05, "state_passing": 0.05, "chunk_scan": 0.1}
    fused = _record("f", {"cutile": 0.4, "mamba_ssm": 1.25, "fla": 1.0, "torch": 40.0})
    fused["cutile_kernels_ms"] = {"chunk_state_passing": 0.12, "chunk_scan": 0.25}
    fused["kernel_floor_ms"] = {"chunk_state_passing": 0.06, "chunk_scan": 0.1}
    results = _results([three, fused])
    validate_results(results)
    text = bench_results.format_table(results)
    head = [line for line in text.splitlines() if "chunk_state_passing ms" in line]
    assert head and head[0].index("state_passing ms") < head[0].index("chunk_state_passing ms")
    row = [line for line in text.splitlines() if line.startswith("f ")][-1]
    assert "0.120 (2.0x)" in row and "0.250 (2.5x)" in row and " - " in row and "0.370" in row
    fig = perf_plots.plot_kernel_breakdown(results)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels.count("chunk_scan") == 1 and "chunk_state_passing" in labels and "chunk_state" in labels

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
    assert tuple(two) == bench_results.FUSED_KERNELS
    states = three["chunk_state"].byte_terms["chunk states (write)"]
    moved = three["chunk_state"].bytes + three["state_passing"].bytes - two["chunk_state_passing"].bytes
    assert moved == pytest.approx(2 * states) and states > 0
    flops = three["chunk_state"].flops + three["state_passing"].flops
    assert two["chunk_state_passing"].flops == pytest.approx(flops)


def _target_results(b8=0.5, vs_mamba=2.5, vs_fla=1.4):
    recs = []
    for name in bench.DEFAULT_SHAPES:
        ours = b8 if name == "b8-l4096-h80" else 1.0
        recs.append(
            _record(name, {"cutile": ours, "mamba_ssm": ours * vs_mamba, "fla": ours * vs_fla, "torch": 40.0})
        )
    return _results(recs)


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
    text = bench_results.format_overhead(r)
    assert "torch: graph_error RuntimeError: operation not permitted" in text and "950.0" in text
    assert bench_results.format_overhead(dict(r, overhead=None)) == "launch overhead: not measured"


def test_targets_met_and_missed():
    rows = bench_results.check_targets(_target_results())
    assert len(rows) == 8 and all(ok for _, _, ok in rows)
    rows = bench_results.check_targets(_target_results(b8=0.7, vs_mamba=1.8, vs_fla=1.2))
    failed = [d for d, _, ok in rows if not ok]
    assert any(d.startswith("geomean") for d in failed)  # 1.8 < 2.0
    assert sum("vs fla" in d for d in failed) == 3  # 1.2 < 1.3 on the three large shapes
    assert not any("vs mamba_ssm >= 1.5" in d for d in failed)  # 1.8 >= 1.5
    assert any("<= 0.6 ms" in d for d in failed)
    assert "[FAIL]" in bench_results.format_targets(_target_results(b8=0.7))


def test_targets_missing_measurement_is_not_met():
    r = _target_results()
    r["shapes"][0]["ms"]["fla"] = None
    r["shapes"][0]["errors"] = {"fla": "did not import"}
    rows = {d: ok for d, _, ok in bench_results.check_targets(r)}
    assert rows["b8-l4096-h80: speedup vs fla >= 1.3x"] is False


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
    assert set(rec["cutile_kernels_ms"]) == set(bench_results.KERNELS)


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
        bench_results.load_results(out)
    partial = bench_results.load_results(out, allow_partial=True)
    assert partial["complete"] is False and not bench_results.is_complete(partial)
    assert [r["name"] for r in partial["shapes"]] == ["tiny-g3"] and partial["sweep"] == []
    assert partial["shapes"][0]["ms"]["cutile"] is not None
    assert partial["shapes"][0]["ms"]["cutile"] == pytest.approx(timer(None, label="tiny-g3/cutile"))
    assert not list(out.parent.glob("*.tmp"))
    monkeypatch.setattr(bench_results, "shipped_results_path", lambda: out)
    with pytest.raises(ResultsError, match="allow_partial"):
        bench_results.load_shipped_results()
    assert bench_results.load_shipped_results(allow_partial=True) == partial

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
    assert bench_results.load_results(out)["shapes"] == results["shapes"]


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
    """The harness calls ssd_forward and the three kernel wrappers with the right arguments (CPU)."""
    rec, calls = _run_one({"cutile": bench._make_cutile(backend="cpu")}, name="tiny", seed=4)
    assert rec["ms"]["cutile"] is not None, rec["errors"]
    assert rec["rel_err"]["cutile"] < 1e-2 and "cutile_kernels" not in rec["errors"]
    # the kernels ssd_forward launches at this size: bf16 takes the fused config (kernels 1 and 2 as one)
    d = rec["dims"]
    fused = ssd_config(d["b"], d["l"], d["h"], d["p"], d["g"], d["n"], d["Q"], torch.bfloat16).fused
    stages = bench_results.FUSED_KERNELS if fused else bench_results.KERNELS
    assert calls == ["tiny/cutile"] + [f"tiny/kernel/{k}" for k in stages]
    assert set(rec["cutile_kernels_ms"]) == set(rec["kernel_floor_ms"]) == set(stages)
    bench_results.validate_record(rec)


def test_configs_replace_what_ssd_config_picks_and_are_recorded_cpu():
    """``--configs`` (a probe's winners): the harness runs our forward and its stages with the given config
    for that size, and records it; other sizes keep ssd_config's."""
    spec = _spec("tiny")
    d = spec.dims
    picked = ssd_config(d.b, d.l, d.h, d.p, d.g, d.n, d.Q, torch.bfloat16)
    assert picked.fused  # so an unfused override shows in the stages that are timed
    unfused = SSDConfig(scan_heads=2)
    impl = bench._make_cutile(backend="cpu", configs={(d.b, d.l, d.h, d.p, d.g, d.n, d.Q): unfused})
    rec, calls = _run_one({"cutile": impl}, name="tiny", seed=4)
    assert rec["rel_err"]["cutile"] < 1e-2 and "cutile_kernels" not in rec["errors"]
    assert calls == ["tiny/cutile"] + [f"tiny/kernel/{k}" for k in bench_results.KERNELS]
    assert config_from_json(json.loads(json.dumps(rec["cutile_config"]))) == unfused
    bench_results.validate_record(rec)
    rec, _ = _run_one({"cutile": impl}, name="tiny-g3", seed=4)  # another size: ssd_config's pick
    e = rec["dims"]
    assert rec["cutile_config"] == config_to_json(
        ssd_config(e["b"], e["l"], e["h"], e["p"], e["g"], e["n"], e["Q"], torch.bfloat16))


def test_config_mismatches_name_results_measured_with_other_configs():
    rec = _record("b8-l4096-h80", dict.fromkeys(IMPLS, 1.0),
                  dims={"b": 8, "l": 4096, "h": 80, "p": 64, "g": 1, "n": 128, "Q": 256})
    results = _results([rec])
    assert bench.config_mismatches(results) == []  # nothing recorded, nothing to compare
    rec["cutile_config"] = config_to_json(ssd_config(8, 4096, 80, 64, 1, 128, 256, torch.bfloat16))
    assert bench.config_mismatches(results) == []
    rec["cutile_config"] = config_to_json(SSDConfig(**(vars(config_module.FAST_16BIT_CB)
                                                       | dict(scan_row_group=2, scan_hints=(2, None)))))
    assert bench.config_mismatches(results) == [
        "b8-l4096-h80: measured with another config than ssd_config picks now (fields ['scan_hints', "
        "'scan_row_group'])"]


def test_read_configs_maps_shape_names_to_sizes(tmp_path):
    path = tmp_path / "best.json"
    cfg = config_module.FAST_16BIT_CB
    path.write_text(json.dumps({"b8-l4096-h80": config_to_json(cfg)}))
    assert bench.read_configs(path) == {(8, 4096, 80, 64, 1, 128, 256): cfg}
    path.write_text(json.dumps({"b9-nonsense": {}}))
    with pytest.raises(ValueError, match="unknown shape 'b9-nonsense'"):
        bench.read_configs(path)
    path.write_text(json.dumps({"b8-l4096-h80": {"scan_warp_drive": 1}}))
    with pytest.raises(ValueError, match=r"b8-l4096-h80: unknown SSDConfig fields \['scan_warp_drive'\]"):
        bench.read_configs(path)
    path.write_text(json.dumps({"b8-l4096-h80": {"segments": 0}}))
    with pytest.raises(ValueError, match="segments must be an int >= 1"):
        bench.read_configs(path)


def test_every_named_config_survives_a_json_round_trip():
    tail = SSDConfig(**(vars(config_module.FAST_16BIT_CB) | dict(
        state_tail=((64, 64, 128), (3, None), 20), state_tail_segments=2)))
    for cfg in [getattr(config_module, name) for name in config_module.__all__
                if isinstance(getattr(config_module, name), SSDConfig)] + [tail]:
        assert config_from_json(json.loads(json.dumps(config_to_json(cfg)))) == cfg
    with pytest.raises(TypeError, match="object of fields"):
        config_from_json([("fused", True)])


def test_config_source_is_python_for_the_same_config():
    # what probe.py prints for a winner, to paste into kernels/configs.py: it evaluates back to the config
    namespace = vars(config_module)
    assert config_module.config_source(config_module.LONG_BF16) == "LONG_BF16"
    winner = SSDConfig(**(vars(config_module.FAST_16BIT_CB) | dict(
        scan_row_group=2, scan_hints=(2, None, 8), state_tail=((64, 128, 128), (2, None)),
        state_tail_segments=2)))
    source = config_module.config_source(winner)
    assert source.startswith("SSDConfig(**(vars(FAST_16BIT_CB) | dict(") and "scan_row_group=2" in source
    assert eval(source, dict(namespace)) == winner  # noqa: S307 - our own generated source


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
    from mamba2_tutorial.checks import relative_error

    assert relative_error(y, y_ref) < 1e-6  # g is float32


def test_fla_mapping_uses_mamba_group_order():
    """Head i reads group i // (h/g): swapping the group order must change the answer."""
    inp = make_inputs(SHAPES["tiny-g3"], seed=2, dtype=torch.float64, D=False)
    f = bench.fla_inputs(inp)
    rep = inp["x"].shape[2] // inp["B"].shape[2]
    for i in range(inp["x"].shape[2]):
        assert torch.equal(f["k"][:, :, i], inp["B"][:, :, i // rep])
        assert torch.equal(f["q"][:, :, i], inp["C"][:, :, i // rep])


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
# command line, timing summary, figures


def test_cli_parser_and_cpu_refusal(capsys):
    args = bench.build_parser().parse_args([])
    assert args.shapes == list(bench.DEFAULT_SHAPES) and args.dtype == "bf16" and args.sweep
    args = bench.build_parser().parse_args(["--shapes", "b4-l2048-h24", "--sweep", "--rep", "50"])
    assert args.shapes == ["b4-l2048-h24"] and args.sweep == [] and args.rep == 50.0 and args.configs is None
    args = bench.build_parser().parse_args(["--configs", "b8/best.json", "b1/best.json"])
    assert [str(p) for p in args.configs] == ["b8/best.json", "b1/best.json"]
    if not torch.cuda.is_available():
        assert bench.main(["--shapes", "b4-l2048-h24"]) == 2
        assert "needs a CUDA GPU" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench.default_shapes(["no-such-shape"])
    assert [s.name for s in bench.sweep_shapes((512, 1024))] == ["b4-l512-h24", "b4-l1024-h24"]


def test_summarize_median_and_quantiles():
    from mamba2_tutorial.timing import summarize

    t = summarize([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (t.median_ms, t.p20_ms, t.p80_ms, t.n) == (3.0, 2.0, 4.0, 5)
    with pytest.raises(ValueError):
        summarize([])


def test_time_cuda_plumbing_with_a_fake_clock(monkeypatch):
    """The event loop's bookkeeping (warm-up and repetition counts, flush outside the events, the median),
    checked against a fake device clock: fn takes 2 ms, the L2 flush 0.5 ms. No real timing."""
    import types

    from mamba2_tutorial import timing

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


def test_figures_from_the_fixture(fixture_results, tmp_path):
    from matplotlib.figure import Figure

    from mamba2_tutorial import perf_plots

    for fn in (
        perf_plots.plot_time_vs_seqlen,
        perf_plots.plot_speedup_vs_seqlen,
        perf_plots.plot_kernel_breakdown,
        perf_plots.plot_roofline,
    ):
        fig = fn(fixture_results)
        assert isinstance(fig, Figure)
        ax = fig.axes[0]
        assert ax.get_xlabel() and ax.get_ylabel() and FIXTURE_DEVICE in ax.get_title()
        assert ax.get_legend() is not None
    fig = perf_plots.summary_figure(fixture_results)
    assert len(fig.axes) == 4
    fig.savefig(tmp_path / "summary.png")  # what `bench --plot FILE.png` writes
    assert (tmp_path / "summary.png").stat().st_size > 10_000
    labels = lambda f: [t.get_text() for t in f.axes[0].get_legend().get_texts()]
    assert not any("PyTorch" in t for t in labels(perf_plots.plot_speedup_vs_seqlen(fixture_results)))
    assert any(
        "PyTorch" in t for t in labels(perf_plots.plot_speedup_vs_seqlen(fixture_results, include_torch=True))
    )
    no_sweep = dict(fixture_results, sweep=[])
    with pytest.raises(ValueError, match="sweep"):
        perf_plots.plot_time_vs_seqlen(no_sweep)
    fig = perf_plots.summary_figure(no_sweep)  # a missing panel says why instead of failing
    assert any("sweep" in t.get_text() for ax in fig.axes for t in ax.texts)


# ----------------------------------------------------------------------------------------------------
# GPU: the real harness at a tiny shape (correctness and schema only; no performance claims)


@pytest.mark.gpu
def test_tiny_real_benchmark_run_on_gpu():
    spec = bench.ShapeSpec("gpu-tiny", roofline.Dims(b=2, l=300, h=8, p=64, g=2, n=128, Q=64))  # ragged
    results = bench.run_benchmark(
        [spec],
        impl_names=("cutile", "mamba_ssm", "fla", "torch"),
        timer=bench.cuda_timer(5.0, 20.0),
        sweep=[bench.ShapeSpec("gpu-sweep", roofline.Dims(1, 256, 8, 64, 1, 128, 64))],
        overhead=bench.ShapeSpec("gpu-ov", roofline.Dims(1, 128, 4, 64, 1, 128, 64)),
        progress=False,
    )
    validate_results(results)
    rec = results["shapes"][0]
    assert rec["ms"]["cutile"] is not None, rec["errors"]
    assert rec["ms"]["torch"] is not None, rec["errors"]
    assert rec["rel_err"]["cutile"] < 2e-2 and rec["cutile_kernels_ms"], rec["errors"]
    assert results["overhead"]["impls"]["cutile"]["event_ms"] is not None
    print(bench_results.format_table(results))


# ----------------------------------------------------------------------------------------------------
# the optimization log


NOTES = """
# notes

## The two numbers
| a | b |

### Attempt 1: bf16 states
- Kernel: state_passing
- Change: store the entering states in bf16
- Prediction: 0.08 ms less,
  because 336 MB less traffic
- Shape: b8-l4096-h80
- Before (ms): 1.20
- After (ms): 0.96 ms
- Why they differ: the kernel was latency-bound

### Attempt 2: fuse
- Kernel: chunk_state
- Change: fuse
- Prediction: less
- Shape: b8-l4096-h80
- Before (ms): to measure
- After (ms): -
- Why they differ: to measure

## Later section
- Kernel: not an attempt
"""


def test_parse_perf_notes():
    from mamba2_tutorial.perf_notes import parse_perf_notes

    a1, a2 = parse_perf_notes(NOTES)
    assert (a1["number"], a1["title"]) == (1, "bf16 states")
    assert a1["Prediction"] == "0.08 ms less, because 336 MB less traffic"  # continuation line joined
    assert (a1["before_ms"], a1["after_ms"]) == (1.2, 0.96) and a1["speedup"] == pytest.approx(1.25)
    assert a2["before_ms"] is None and a2["after_ms"] is None and a2["speedup"] is None
    with pytest.raises(ValueError, match="attempt 2 .fuse. lacks fields .'Shape'."):
        parse_perf_notes(
            NOTES.replace("- Shape: b8-l4096-h80\n- Before (ms): to measure", "- Before (ms): x")
        )
    with pytest.raises(ValueError, match="appears twice"):
        parse_perf_notes(NOTES.replace("Attempt 2", "Attempt 1"))


def test_the_repository_perf_notes_parse():
    from mamba2_tutorial.perf_notes import read_perf_notes

    attempts = read_perf_notes()
    assert len(attempts) >= 5 and [a["number"] for a in attempts] == sorted(a["number"] for a in attempts)
    for a in attempts:  # a number is either a real measurement or absent; never a placeholder that parses
        assert a["after_ms"] is None or a["after_ms"] > 0

"""The benchmark figures (``mamba2_tutorial.perf.plots``), drawn from the test fixture (FAKE timings): each
returns a labelled Figure with the device in its title, and draws the numbers of the results it is given:
the staged steps' waterfall and roofline, the host-bound flag, the taught forward beside ours."""

from __future__ import annotations

import copy

import matplotlib
import pytest
from bench_fixture import FIXTURE_DEVICE, FIXTURE_PATH
from matplotlib.figure import Figure

from mamba2_tutorial.perf import plots, roofline
from mamba2_tutorial.perf import results as res

matplotlib.use("Agg")  # headless (the helpers never touch pyplot anyway)


@pytest.fixture(scope="module")
def fixture_results():
    return res.load_results(FIXTURE_PATH)


def _legend(fig: Figure, i: int = 0) -> list[str]:
    return [t.get_text() for t in fig.axes[i].get_legend().get_texts()]


def _texts(ax) -> list[str]:
    return [t.get_text() for t in ax.texts]


def test_figures_from_the_fixture(fixture_results, tmp_path):
    for fn in (
        plots.plot_time_vs_seqlen,
        plots.plot_speedup_vs_seqlen,
        plots.plot_kernel_breakdown,
        plots.plot_roofline,
        plots.plot_steps_waterfall,
        plots.plot_steps_roofline,
    ):
        fig = fn(fixture_results)
        assert isinstance(fig, Figure)
        ax = fig.axes[0]
        assert ax.get_xlabel() and ax.get_ylabel() and FIXTURE_DEVICE in ax.get_title()
        assert ax.get_legend() is not None
    fig = plots.summary_figure(fixture_results)
    assert len(fig.axes) == 4
    fig.savefig(tmp_path / "summary.png")  # what `bench --plot FILE.png` writes
    assert (tmp_path / "summary.png").stat().st_size > 10_000
    assert not any("PyTorch" in t for t in _legend(plots.plot_speedup_vs_seqlen(fixture_results)))
    with_torch = plots.plot_speedup_vs_seqlen(fixture_results, include_torch=True)
    assert any("PyTorch" in t for t in _legend(with_torch))
    no_sweep = dict(fixture_results, sweep=[])
    with pytest.raises(ValueError, match="sweep"):
        plots.plot_time_vs_seqlen(no_sweep)
    fig = plots.summary_figure(no_sweep)  # a missing panel says why instead of failing
    assert any("sweep" in t.get_text() for ax in fig.axes for t in ax.texts)


def test_the_taught_forward_is_drawn_beside_ours(fixture_results):
    label = res.IMPL_LABELS["taught"]
    for fn in (plots.plot_time_vs_seqlen, plots.plot_roofline):
        assert label in _legend(fn(fixture_results))
    assert f"vs {label}" in _legend(plots.plot_speedup_vs_seqlen(fixture_results))
    fig = plots.plot_time_vs_seqlen(fixture_results)
    line = next(ln for ln in fig.axes[0].lines if ln.get_label() == label)
    sweep = sorted(fixture_results["sweep"], key=lambda r: r["dims"]["l"])
    assert list(line.get_ydata()) == [r["ms"]["taught"] for r in sweep]


def test_a_fused_breakdown_is_plotted(fixture_results):
    three = copy.deepcopy(fixture_results["shapes"][1])
    fused = copy.deepcopy(fixture_results["shapes"][2])
    fused["cutile_kernels_ms"] = {"chunk_state_passing": 0.12, "chunk_scan": 0.25}
    fused["kernel_floor_ms"] = {"chunk_state_passing": 0.06, "chunk_scan": 0.1}
    results = dict(fixture_results, shapes=[three, fused])
    res.validate_results(results)
    labels = _legend(plots.plot_kernel_breakdown(results))
    assert labels.count("chunk_scan") == 1 and "chunk_state_passing" in labels and "chunk_state" in labels


def test_host_bound_shapes_are_flagged_with_their_device_time(fixture_results):
    (rec,) = [r for r in fixture_results["shapes"] if res.host_bound(r)]
    fig = plots.plot_kernel_breakdown(fixture_results)
    notes = [t for t in _texts(fig.axes[0]) if t.startswith("host-bound")]
    e2e = rec["ms"]["cutile"]
    assert notes == [f"host-bound:\ndevice {res.device_ms(rec):.3g} ms\nof {e2e:.3g} end to end"]

    fig = plots.plot_roofline(fixture_results)
    ax = fig.axes[0]
    assert "cuTile, device time of a host-bound shape" in _legend(fig)
    hollow = next(c for c in ax.collections if c.get_label() == "cuTile, device time of a host-bound shape")
    (x, y), = hollow.get_offsets()
    assert x == pytest.approx(rec["flops"] / rec["bytes"])
    assert y == pytest.approx(rec["flops"] / (res.device_ms(rec) * 1e-3) / 1e12)
    # with no host-bound shape, no flag
    calm = copy.deepcopy(fixture_results)
    for r in calm["shapes"]:
        r["ms"]["cutile"] = res.device_ms(r)
    assert not any(t.startswith("host-bound") for t in _texts(plots.plot_kernel_breakdown(calm).axes[0]))
    assert "cuTile, device time of a host-bound shape" not in _legend(plots.plot_roofline(calm))


@pytest.mark.parametrize("name", ["b8-l4096-h80", "b1-l32768-h80"])
def test_the_waterfall_draws_each_step_its_stages_and_what_it_bought(fixture_results, name):
    rec = res.steps_record(fixture_results, name)
    steps = rec["steps"]
    fig = plots.plot_steps_waterfall(fixture_results, name)
    ax = fig.axes[0]
    assert name in ax.get_title()
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert len(ticks) == len(steps) and ticks[0] == "0. taught"
    assert ticks[-1].startswith(f"{len(steps) - 1}. ")
    # the stacked bars: every stage of every step, bottom to top in launch order
    bars = [(round(p.get_x() + p.get_width() / 2), p.get_y(), p.get_height()) for p in ax.patches]
    want = []
    for i, st in enumerate(steps):
        bottom = 0.0
        for k in res.stages_of(st["kernels_ms"]):
            want.append((i, bottom, st["kernels_ms"][k]))
            bottom += st["kernels_ms"][k]
    assert [(i, pytest.approx(b), pytest.approx(h)) for i, b, h in want] == bars
    # a tick at each end-to-end time, the floor of each step's design, and the whole forward's floor
    ys = {tuple(line.get_ydata()) for line in ax.lines}
    ceil = res.ceilings_of(fixture_results)
    for st in steps:
        assert (st["ms"], st["ms"]) in ys
        floor = res.step_floor_ms(rec, st, ceil)
        assert any(a == pytest.approx(floor) and b == pytest.approx(floor) for a, b in ys)
    whole = roofline.floor_ms(rec["dims"], ceil, io_bytes=2, dt_bytes=2)
    assert any(line.get_ydata()[0] == pytest.approx(whole) for line in ax.lines)
    # what each step bought over the one before, written above it
    deltas = [t for t in _texts(ax) if t.endswith("x)")]
    assert deltas == [f"{b['ms'] - a['ms']:+.3f} ms\n({a['ms'] / b['ms']:.2f}x)"
                      for a, b in zip(steps, steps[1:])]
    labels = _legend(fig)
    assert {"end to end", "floor of the step's design", "floor of the whole forward"} <= set(labels)
    assert {"chunk_state", "state_passing", "chunk_state_passing", "chunk_scan"} <= set(labels)


def test_the_waterfall_shows_a_step_without_a_time(fixture_results):
    r = copy.deepcopy(fixture_results)
    steps = r["steps"][0]["steps"]
    steps[2] |= {"ms": None, "rel_err": None, "kernels_ms": None, "error": "RuntimeError: launch failed"}
    del steps[4]["kernels_ms"]
    res.validate_results(r)
    ax = plots.plot_steps_waterfall(r).axes[0]
    assert "not timed" in _texts(ax)
    # the step after compares with the last step that has a time; one without stage times is a plain bar
    a, b = steps[1]["ms"], steps[3]["ms"]
    assert f"{b - a:+.3f} ms\n({a / b:.2f}x)" in _texts(ax)
    assert "no stage times" in [t.get_text() for t in ax.get_legend().get_texts()]
    with pytest.raises(KeyError, match="--steps"):
        plots.plot_steps_waterfall(dict(r, steps=[]))


def test_the_steps_on_the_roofline(fixture_results):
    """Each step at its design's intensity (the forward's counted FLOPs over the bytes its stages move) and
    its achieved rate: fusing state passing moves the point right, the later steps move it up."""
    rec = res.steps_record(fixture_results)
    fig = plots.plot_steps_roofline(fixture_results)
    ax = fig.axes[0]
    taught = next(c for c in ax.collections if c.get_label() == "taught state stage (two)")
    fused = next(c for c in ax.collections if c.get_label() == "fused state stage (one launch)")
    assert len(taught.get_offsets()) == 1 and len(fused.get_offsets()) == len(rec["steps"]) - 1
    points = [tuple(p) for p in taught.get_offsets()] + [tuple(p) for p in fused.get_offsets()]
    for (x, y), st in zip(points, rec["steps"]):
        costs = res.step_costs(rec, st).values()
        flops, nbytes = sum(c.flops for c in costs), sum(c.bytes for c in costs)
        assert x == pytest.approx(flops / nbytes)
        assert y == pytest.approx(flops / (st["ms"] * 1e-3) / 1e12)
    assert points[1][0] > points[0][0]  # fewer bytes: further right
    assert all(a[0] == pytest.approx(b[0]) for a, b in zip(points[1:], points[2:]))  # the same bytes after
    whole = roofline.forward_cost(rec["dims"], io_bytes=2, dt_bytes=2)
    assert any(line.get_xdata()[0] == pytest.approx(whole.intensity) for line in ax.lines)
    assert [t.get_text() for t in ax.texts] == [str(i) for i in range(len(rec["steps"]))]
    r = copy.deepcopy(fixture_results)
    for st in r["steps"][0]["steps"]:
        st |= {"ms": None, "error": "not run"}
    with pytest.raises(ValueError, match="no step at b8-l4096-h80 was timed"):
        plots.plot_steps_roofline(r)


# ----------------------------------------------------------------------------------------------------
# notebook 10's lesson: steps merged where they bought nothing, each step's report, the source diffs


def _with_times(rec, times):
    r = copy.deepcopy(rec)
    for st, ms in zip(r["steps"], times):
        st["ms"] = ms
    return r


def test_steps_that_bought_nothing_are_merged_into_the_next(fixture_results):
    rec = res.steps_record(fixture_results, "b8-l4096-h80")
    names = [s["name"] for s in rec["steps"]]
    # steps 2 and 5 within 1% of the step before: each merged into the step after it
    r = _with_times(rec, [1.5, 1.0, 0.995, 0.8, 0.7, 0.699, 0.6])
    shown = res.presented_steps(r)
    assert [s["merged"] for s in shown] == [[names[0]], [names[1]], names[2:4], [names[4]], names[5:7]]
    assert shown[2]["name"] == f"{names[2]} + {names[3]}" and shown[2]["ms"] == 0.8
    assert shown[2]["config"] == r["steps"][3]["config"]  # the later step's numbers and config
    # the last step bought nothing: merged into the one before
    shown = res.presented_steps(_with_times(rec, [1.5, 1.0, 0.9, 0.8, 0.7, 0.6, 0.599]))
    assert shown[-1]["merged"] == names[5:7] and shown[-1]["ms"] == 0.599 and len(shown) == 6
    # the step right after the taught one bought nothing: merged forward; the taught step stays alone
    shown = res.presented_steps(_with_times(rec, [1.0, 0.999, 0.9, 0.8, 0.7, 0.6, 0.5]))
    assert [s["merged"] for s in shown][:2] == [[names[0]], names[1:3]] and len(shown) == 6
    # every step bought something: nothing merged
    assert len(res.presented_steps(_with_times(rec, [1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4]))) == 7
    fig = plots.plot_steps_waterfall({**fixture_results, "steps": [r]}, "b8-l4096-h80", min_gain=0.02)
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert len(labels) == 5 and any(names[3].split(",")[0] in lab for lab in labels)


def test_a_waterfall_with_no_timed_step_is_an_error(fixture_results):
    rec = res.steps_record(fixture_results, "b8-l4096-h80")
    r = _with_times(rec, [None] * len(rec["steps"]))
    for st in r["steps"]:
        st["error"] = "not run"
    with pytest.raises(ValueError, match="no step at b8-l4096-h80 was timed"):
        plots.plot_steps_waterfall({**fixture_results, "steps": [r]}, "b8-l4096-h80")


def test_config_changes_and_the_step_report(fixture_results):
    rec = res.steps_record(fixture_results, "b8-l4096-h80")
    cfg = [s["config"] for s in rec["steps"]]
    assert res.config_changes(cfg[1], cfg[2]) == ["scan: plain -> shared", "scan.occupancy: - -> 3"]
    assert res.config_changes(cfg[4], cfg[5]) == ["scan.decay: exact -> key_log2"]
    assert res.config_changes(cfg[3], cfg[3]) == []
    report = res.step_report(fixture_results, rec, 2)
    st, before = rec["steps"][2], rec["steps"][1]
    assert f"{st['ms']:.3f} ms, {before['ms'] / st['ms']:.2f}x the step before" in report
    intensity, tflops = res.step_point(rec, st, res.ceilings_of(fixture_results))
    assert f"{intensity:.0f} FLOP/byte, {tflops:.0f} TFLOP/s" in report
    assert "chunk_scan" in report and "its floor" in report
    failed = dict(st, ms=None, error="failed the check")
    assert "not timed (failed the check)" in res.step_report(
        fixture_results, dict(rec, steps=rec["steps"][:2] + [failed]), 2)
    with pytest.raises(ValueError, match="was not timed"):
        res.step_point(rec, failed, res.ceilings_of(fixture_results))


def _before(a, b):
    """Sample function for the diffs: the old way."""
    total = a + b
    return total * 2


def _after(a, b):
    """Sample function for the diffs: the new way."""
    total = a + b
    scaled = total << 1
    return scaled


def test_the_datasheet_is_the_runs_gpus():
    assert roofline.datasheet_for("NVIDIA H200") is roofline.H200_DATASHEET
    assert roofline.datasheet_for("NVIDIA H100 80GB HBM3") is roofline.H100_DATASHEET
    assert roofline.datasheet_for("NVIDIA A100-SXM4-80GB") is None


def test_show_diff_is_computed_from_the_sources():
    from mamba2_tutorial.lessons.callouts import show_diff, source_region

    d = show_diff(_before, _after)
    assert d.removed == ["def _before(a, b):", '"""Sample function for the diffs: the old way."""',
                         "return total * 2"]
    assert "scaled = total << 1" in d.added and "def _after(a, b):" in d.added
    assert " total = a + b" not in d.added  # unchanged lines are context, not changes
    assert "-    return total * 2" in str(d) and "<span" in d._repr_html_()
    d = show_diff(_before, _after, before_lines=("total = a + b", "return total * 2"),
                  after_lines=("total = a + b", "return scaled"))
    assert d.removed == ["return total * 2"] and d.added == ["scaled = total << 1", "return scaled"]
    assert source_region(_after, ("scaled =", "return scaled"))[0] == "scaled = total << 1\nreturn scaled\n"
    with pytest.raises(ValueError, match="is on no line"):
        show_diff(_before, _after, before_lines=("no such text", "return"))
    with pytest.raises(ValueError, match="lines .* it must name exactly one line"):
        show_diff(_before, _after, before_lines=("total", "return"))
    with pytest.raises(ValueError, match="ends .* before it starts"):
        show_diff(_before, _after, before_lines=("return total", "total = a + b"))
    with pytest.raises(ValueError, match="the same: there is no change"):
        show_diff(_before, _before)


def _packed_results(device="FAKE GPU (test fixture)"):
    """A ``bench --packed`` results object with FAKE timings: two shapes, one run that failed."""
    def record(name, scale):
        ms = {"cutile unpacked": 1.0 * scale, "cutile packed": 1.05 * scale, "mamba_ssm packed": 2.9 * scale,
              "cutile unpacked fwd+bwd": 3.1 * scale, "cutile packed fwd+bwd": 3.3 * scale}
        return {"name": name, "ms": ms, "errors": {"mamba_ssm packed fwd+bwd": "RuntimeError: fake"}}
    return {"device": device, "date": "2026-12-07 12:00 UTC", "packed": [record("b1-l32768-h80", 1.0),
                                                                          record("b8-l4096-h80", 0.8)]}


def test_the_packed_figure_draws_every_timed_run_and_leaves_out_the_failed_one():
    fig = plots.plot_packed(_packed_results())
    ax = fig.axes[0]
    assert "FAKE GPU" in ax.get_title()
    heights = sorted(round(p.get_height(), 6) for p in ax.patches)
    want = sorted(round(v, 6) for s in (1.0, 0.8) for v in (1.0 * s, 1.05 * s, 2.9 * s, 3.1 * s, 3.3 * s))
    assert heights == want   # 5 bars per shape: the failed mamba_ssm fwd+bwd has none
    assert [t.get_text() for t in ax.get_xticklabels()][1] == "b1-l32768-h80\nfwd + bwd"
    with pytest.raises(ValueError, match="no 'packed' records"):
        plots.plot_packed({"device": "x", "packed": []})


def test_the_shipped_packed_run_is_the_newest_and_checked(tmp_path, monkeypatch):
    import json

    monkeypatch.setattr(res, "shipped_dir", lambda: tmp_path)
    assert res.load_shipped_packed() is None             # nothing shipped: notebook 13 says so
    old, new = _packed_results("OLD GPU"), _packed_results("NEW GPU")
    old["date"] = "2026-01-01 00:00 UTC"
    (tmp_path / "h200_packed.json").write_text(json.dumps(old))
    (tmp_path / "h100_packed.json").write_text(json.dumps(new))
    assert res.load_shipped_packed()["device"] == "NEW GPU"
    new["packed"] = [{"name": "b1", "ms": None}]
    (tmp_path / "h100_packed.json").write_text(json.dumps(new))
    with pytest.raises(res.ResultsError, match=r"h100_packed.json: results.packed\[0\]"):
        res.load_shipped_packed()

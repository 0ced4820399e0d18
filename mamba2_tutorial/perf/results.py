"""Benchmark results: the JSON schema, its validator, the shipped runs, the printed tables.

This module is pure Python (no torch, no GPU): notebooks 09 and 10 use it on a CPU to show the forward runs
shipped in the package (``mamba2_tutorial/data/benchmarks/<name>.json`` for each name of
:data:`SHIPPED_FORWARD`, each written only by a real GPU run of ``python -m mamba2_tutorial bench --out
...``). :func:`load_shipped_results` returns the newest of them.

Schema (``SCHEMA_VERSION`` 1)::

    {"schema_version": 1, "device": str, "date": "YYYY-MM-DD...",
     "kernels_sha256": str,   # the kernel sources the run measured (perf.sources); absent in old runs
     "kernels_commit": str,   # optional: the commit whose sources those were, where known
     "versions": {"torch", "cuda_tile", "triton", "mamba_ssm", "fla": str or null},
     "ceilings": {"mma_tflops": float, "copy_tbps": float, "source": str},   # the run measures them
     "settings": {...free-form: dtype, warmup_ms, rep_ms, timer, command...},
     "shapes": [record, ...], "sweep": [record, ...],
     "overhead": null or {"name", "dims", "impls": {impl: {"event_ms", "host_us", "loop_us", "graph_us"}}},
     "steps": [steps record, ...],   # optional: ``bench --steps`` (the staged steps of notebook 10)
     "complete": bool}   # optional; false in the checkpoint a run writes as it goes (measured so far)

    record = {"name": str, "dims": {"b", "l", "h", "p", "g", "n", "Q": int}, "dtype": str,
              "ms": {impl: float or null}, "rel_err": {impl: float or null},  # every impl of REQUIRED_IMPLS;
                                                                              # "taught" where it was run
              "errors": {impl: str},   # why an implementation has no time (did not import, failed check)
              "floor_ms": float,       # roofline floor of the whole forward (counted FLOPs and bytes)
              # optional:
              "cutile_kernels_ms": {"chunk_state", "state_passing", "chunk_scan": float}
                                   or {"chunk_state_passing", "chunk_scan": float} when ssd_forward fuses
                                   kernels 1 and 2,
              "kernel_floor_ms": {the same keys: float},
              "flops": float, "bytes": float,
              "first_call_s": {impl: float},   # wall time of each implementation's first call, apart from
                                               # the timed runs: compiles, and TileGym's own tuning
              "cutile_config": {"state": {...}, "scan": {...}}}   # the FastConfig our forward ran with
                                                                  # (fast.config.config_to_json)

    steps record = {"name": str, "dims": {... as above}, "dtype": str,
                    "steps": [{"name": str, "idea": str,
                               "config": {"state": {"kind": ...}, "scan": {"kind": ...}},  # config_to_json
                               "ms": float or null,        # end to end, ssd_forward with this config
                               "rel_err": float or null,   # against the float64 reference
                               "kernels_ms": null or {stage: float},  # keys as cutile_kernels_ms
                               "error": str}, ...]}        # "error" only where something failed

A null time always comes with a reason in ``errors`` (for a step: its ``error``); a time always comes with a
finite relative error (every implementation and every step is checked against the float64 reference before
it is timed).

A run writes its ``--out`` file after every shape, so a run killed part-way keeps what it measured: such a
file has ``"complete": false`` (and may have no shapes yet). ``load_results`` and ``load_shipped_results``
refuse it unless called with ``allow_partial=True``.

**Host-bound.** A shape whose end-to-end time is more than :data:`HOST_BOUND_RATIO` times the sum of its
kernels' device times (each timed alone) is bound by the host's work per call, not by the GPU:
:func:`host_bound` flags it, and the tables and figures show its device time beside its end-to-end time.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path

from . import roofline
from .roofline import FUSED_KERNELS, KERNELS  # the three kernels; the two when kernels 1 and 2 are fused

SCHEMA_VERSION = 1
IMPLS = ("cutile", "taught", "mamba_ssm", "fla", "tilegym", "torch")
#: the implementations every record has (results measured before the taught forward was benchmarked lack it)
REQUIRED_IMPLS = ("cutile", "mamba_ssm", "fla", "torch")
IMPL_LABELS = {
    "cutile": "cuTile (ours)",
    "taught": "cuTile, taught kernels",
    "mamba_ssm": "mamba_ssm Triton",
    "fla": "fla chunk_simple_gla",
    "tilegym": "TileGym cuTile",
    "torch": "PyTorch chunked (fp32)",
}
STAGE_ORDER = ("chunk_state", "state_passing", "chunk_state_passing", "chunk_scan")  # launch order
DIM_KEYS = ("b", "l", "h", "p", "g", "n", "Q")
VERSION_KEYS = ("torch", "cuda_tile", "triton", "mamba_ssm", "fla")
#: the shipped forward runs (``data/benchmarks/<name>.json``), oldest first; :func:`load_shipped_results`
#: reads the newest. A new run is shipped by adding its file and its name here.
SHIPPED_FORWARD = ("h200", "h100")
SHIPPED_DIR = ("data", "benchmarks")
#: end-to-end time over the sum of the kernels' device times above which a shape is host-bound
HOST_BOUND_RATIO = 1.5
#: the kinds of a FastConfig's two stages as JSON (``fast.config.config_to_json``)
CONFIG_KINDS = {"state": ("unfused", "fused", "segmented"), "scan": ("plain", "shared", "chunk")}
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "float64": 8}



class ResultsError(ValueError):
    """The results do not follow the schema; the message names the offending field."""


def stages_of(breakdown: Mapping) -> list[str]:
    """The kernel names of a per-kernel breakdown in launch order."""
    return [k for k in STAGE_ORDER if k in breakdown]


def _num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _require(cond: bool, where: str, what: str) -> None:
    if not cond:
        raise ResultsError(f"{where}: {what}")


def _validate_dims(dims, where: str) -> None:
    _require(isinstance(dims, Mapping), f"{where}.dims", "must be an object")
    for k in DIM_KEYS:
        v = dims.get(k)
        _require(
            isinstance(v, int) and not isinstance(v, bool) and v > 0,
            f"{where}.dims.{k}",
            f"must be a positive int, got {v!r}",
        )
    _require(dims["h"] % dims["g"] == 0, f"{where}.dims", "h must be a multiple of g")


def _validate_breakdown(d, where: str) -> None:
    _require(
        isinstance(d, Mapping) and set(d) in (set(KERNELS), set(FUSED_KERNELS)),
        where,
        f"keys must be exactly {list(KERNELS)} or {list(FUSED_KERNELS)}",
    )
    for k, v in d.items():
        _require(_num(v) and v > 0, f"{where}.{k}", f"must be a positive number, got {v!r}")


def validate_record(rec, where: str = "record") -> None:
    """Check one shape (or sweep) record; raise ResultsError naming the field."""
    _require(isinstance(rec, Mapping), where, f"must be an object, got {type(rec).__name__}")
    for key in ("name", "dims", "dtype", "ms", "rel_err", "floor_ms"):
        _require(key in rec, where, f"missing key {key!r}")
    _require(isinstance(rec["name"], str) and rec["name"], f"{where}.name", "must be a non-empty string")
    where = f"{where}[{rec['name']}]"
    _validate_dims(rec["dims"], where)
    _require(isinstance(rec["dtype"], str), f"{where}.dtype", "must be a string")
    _require(_num(rec["floor_ms"]) and rec["floor_ms"] > 0, f"{where}.floor_ms", "must be a positive number")
    errors = rec.get("errors", {})
    _require(isinstance(errors, Mapping), f"{where}.errors", "must be an object")
    for key in ("ms", "rel_err"):
        d = rec[key]
        _require(isinstance(d, Mapping), f"{where}.{key}", "must be an object")
        _require(
            set(REQUIRED_IMPLS) <= set(d) <= set(IMPLS), f"{where}.{key}",
            f"keys must be {list(REQUIRED_IMPLS)}, optionally with 'taught'; got {sorted(d)}"
        )
    for impl in [i for i in IMPLS if i in rec["ms"]]:
        ms, err = rec["ms"][impl], rec["rel_err"][impl]
        if ms is None:
            _require(
                isinstance(errors.get(impl), str) and errors[impl],
                f"{where}.errors.{impl}",
                "a null time needs a reason",
            )
        else:
            _require(
                _num(ms) and ms > 0, f"{where}.ms.{impl}", f"must be a positive number or null, got {ms!r}"
            )
            _require(
                _num(err) and err >= 0,
                f"{where}.rel_err.{impl}",
                f"a timed implementation needs a finite relative error, got {err!r}",
            )
        if err is not None:
            _require(_num(err) and err >= 0, f"{where}.rel_err.{impl}", f"must be >= 0 or null, got {err!r}")
    for key in ("cutile_kernels_ms", "kernel_floor_ms"):
        if rec.get(key) is not None:
            _validate_breakdown(rec[key], f"{where}.{key}")
    if rec.get("cutile_kernels_ms") is not None and rec.get("kernel_floor_ms") is not None:
        _require(
            set(rec["cutile_kernels_ms"]) == set(rec["kernel_floor_ms"]),
            f"{where}.kernel_floor_ms",
            f"must have the keys of cutile_kernels_ms {sorted(rec['cutile_kernels_ms'])}",
        )
    if "cutile_config" in rec:
        cfg = rec["cutile_config"]
        _require(isinstance(cfg, Mapping) and all(isinstance(k, str) for k in cfg), f"{where}.cutile_config",
                 "must be a FastConfig as JSON")
    for key in ("flops", "bytes"):
        if key in rec:
            _require(_num(rec[key]) and rec[key] > 0, f"{where}.{key}", "must be a positive number")


def _validate_config(cfg, where: str) -> None:
    _require(isinstance(cfg, Mapping) and set(cfg) == set(CONFIG_KINDS), where,
             f"must be a FastConfig as JSON, an object with exactly {list(CONFIG_KINDS)}")
    for stage, kinds in CONFIG_KINDS.items():
        _require(isinstance(cfg[stage], Mapping) and cfg[stage].get("kind") in kinds, f"{where}.{stage}",
                 f"must be an object with a 'kind' of {list(kinds)}, got {cfg[stage]!r}")


def validate_step(step, where: str = "step") -> None:
    """Check one staged step (see the module docstring); raise ResultsError naming the field."""
    _require(isinstance(step, Mapping), where, f"must be an object, got {type(step).__name__}")
    for key in ("name", "idea", "config", "ms", "rel_err"):
        _require(key in step, where, f"missing key {key!r}")
    _require(isinstance(step["name"], str) and step["name"], f"{where}.name", "must be a non-empty string")
    where = f"{where}[{step['name']}]"
    _require(isinstance(step["idea"], str), f"{where}.idea", "must be a string")
    _validate_config(step["config"], f"{where}.config")
    ms, err, error = step["ms"], step["rel_err"], step.get("error")
    _require(error is None or (isinstance(error, str) and error), f"{where}.error",
             "must be a non-empty string where present")
    if ms is None:
        _require(error is not None, f"{where}.error", "a step with a null time needs a reason")
    else:
        _require(_num(ms) and ms > 0, f"{where}.ms", f"must be a positive number or null, got {ms!r}")
        _require(_num(err) and err >= 0, f"{where}.rel_err",
                 f"a timed step needs a finite relative error, got {err!r}")
    _require(err is None or (_num(err) and err >= 0), f"{where}.rel_err",
             f"must be >= 0 or null, got {err!r}")
    km = step.get("kernels_ms")
    if km is not None:
        _validate_breakdown(km, f"{where}.kernels_ms")
        kind = step["config"]["state"]["kind"]
        want = KERNELS if kind == "unfused" else FUSED_KERNELS
        _require(set(km) == set(want), f"{where}.kernels_ms",
                 f"the {kind} state stage's stages are {list(want)}, got {sorted(km)}")


def validate_steps_record(rec, where: str = "steps record") -> None:
    """Check one shape's staged steps (see the module docstring); raise ResultsError naming the field."""
    _require(isinstance(rec, Mapping), where, f"must be an object, got {type(rec).__name__}")
    for key in ("name", "dims", "dtype", "steps"):
        _require(key in rec, where, f"missing key {key!r}")
    _require(isinstance(rec["name"], str) and rec["name"], f"{where}.name", "must be a non-empty string")
    where = f"{where}[{rec['name']}]"
    _validate_dims(rec["dims"], where)
    _require(isinstance(rec["dtype"], str), f"{where}.dtype", "must be a string")
    steps = rec["steps"]
    _require(isinstance(steps, list) and steps, f"{where}.steps", "must be a non-empty list")
    for j, step in enumerate(steps):
        validate_step(step, f"{where}.steps[{j}]")
    names = [st["name"] for st in steps]
    _require(len(set(names)) == len(names), f"{where}.steps", f"names must be unique, got {names}")


def validate_results(results) -> None:
    """Check a whole results object against the schema (see the module docstring); raise ResultsError."""
    _require(isinstance(results, Mapping), "results", f"must be an object, got {type(results).__name__}")
    _require(
        results.get("schema_version") == SCHEMA_VERSION,
        "results.schema_version",
        f"must be {SCHEMA_VERSION}, got {results.get('schema_version')!r}",
    )
    for key in ("device", "date"):
        _require(
            isinstance(results.get(key), str) and results[key], f"results.{key}", "must be a non-empty string"
        )
    sha = results.get("kernels_sha256")
    _require(sha is None or (isinstance(sha, str) and len(sha) == 64
                             and all(ch in "0123456789abcdef" for ch in sha)),
             "results.kernels_sha256", f"must be a sha256 in lowercase hex (perf.sources), got {sha!r}")
    commit = results.get("kernels_commit")
    _require(commit is None or (isinstance(commit, str) and commit), "results.kernels_commit",
             "must be a non-empty string where present")
    versions = results.get("versions")
    _require(isinstance(versions, Mapping), "results.versions", "must be an object")
    for k in VERSION_KEYS:
        _require(k in versions, "results.versions", f"missing key {k!r}")
        _require(
            versions[k] is None or isinstance(versions[k], str),
            f"results.versions.{k}",
            "must be a string or null",
        )
    ceil = results.get("ceilings")
    _require(isinstance(ceil, Mapping), "results.ceilings", "must be an object")
    for k in ("mma_tflops", "copy_tbps"):
        _require(_num(ceil.get(k)) and ceil[k] > 0, f"results.ceilings.{k}", "must be a positive number")
    complete = results.get("complete", True)
    _require(isinstance(complete, bool), "results.complete", f"must be true or false, got {complete!r}")
    shapes = results.get("shapes")
    _require(isinstance(shapes, list), "results.shapes", "must be a non-empty list")
    _require(bool(shapes) or not complete, "results.shapes", "must be a non-empty list")
    for i, rec in enumerate(shapes):
        validate_record(rec, f"results.shapes[{i}]")
    names = [r["name"] for r in shapes]
    _require(len(set(names)) == len(names), "results.shapes", f"names must be unique, got {names}")
    sweep = results.get("sweep", [])
    _require(isinstance(sweep, list), "results.sweep", "must be a list")
    for i, rec in enumerate(sweep):
        validate_record(rec, f"results.sweep[{i}]")
    steps = results.get("steps")
    if steps is not None:
        _require(isinstance(steps, list), "results.steps", "must be a list")
        for i, rec in enumerate(steps):
            validate_steps_record(rec, f"results.steps[{i}]")
        names = [r["name"] for r in steps]
        _require(len(set(names)) == len(names), "results.steps", f"names must be unique, got {names}")
    overhead = results.get("overhead")
    if overhead is not None:
        _require(
            isinstance(overhead, Mapping) and isinstance(overhead.get("impls"), Mapping),
            "results.overhead",
            "must be null or an object with 'impls'",
        )
        for impl, row in overhead["impls"].items():
            _require(
                impl in IMPLS, f"results.overhead.impls.{impl}", f"unknown implementation; use {list(IMPLS)}"
            )
            _require(isinstance(row, Mapping), f"results.overhead.impls.{impl}", "must be an object")
            for k in ("event_ms", "host_us", "loop_us", "graph_us"):
                v = row.get(k)
                _require(
                    v is None or (_num(v) and v > 0),
                    f"results.overhead.impls.{impl}.{k}",
                    f"must be a positive number or null, got {v!r}",
                )


def is_complete(results: Mapping) -> bool:
    """False for the checkpoint of a run that has not finished (or was killed part-way)."""
    return results.get("complete", True) is not False


def load_results(path, *, allow_partial: bool = False) -> dict:
    """Read and validate a results JSON file; a partial one (``"complete": false``) only if
    ``allow_partial``."""
    path = Path(path)
    try:
        results = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{path}: not valid JSON ({exc})") from exc
    validate_results(results)
    if not allow_partial and not is_complete(results):
        raise ResultsError(
            f"{path}: results.complete is false: a run that did not finish "
            f"({len(results['shapes'])} shape(s) measured); pass allow_partial=True to read it anyway"
        )
    return results


def shipped_dir() -> Path:
    """Where the package keeps its shipped results (``mamba2_tutorial/data/benchmarks``)."""
    return Path(__file__).resolve().parents[1].joinpath(*SHIPPED_DIR)  # the package, not perf/


def shipped_forward_paths() -> list[Path]:
    """The files of :data:`SHIPPED_FORWARD` that the package has, oldest first."""
    return [p for p in (shipped_dir() / f"{name}.json" for name in SHIPPED_FORWARD) if p.is_file()]


def _date_of(path: Path) -> str:
    try:
        date = json.loads(path.read_text()).get("date")
    except (json.JSONDecodeError, AttributeError) as exc:
        raise ResultsError(f"{path}: not a results object ({exc})") from exc
    if not isinstance(date, str):
        raise ResultsError(f"{path}: results.date must be a string, got {date!r}")
    return date


def shipped_results_path() -> Path:
    """The newest shipped forward run: of the files of :data:`SHIPPED_FORWARD`, the one with the latest
    ``date`` (the later name on a tie). FileNotFoundError where the package has none."""
    paths = shipped_forward_paths()
    if not paths:
        names = ", ".join(f"{n}.json" for n in SHIPPED_FORWARD)
        raise FileNotFoundError(
            f"no shipped benchmark results ({names} under mamba2_tutorial/{'/'.join(SHIPPED_DIR)}): they are "
            "written by a GPU run of `python -m mamba2_tutorial bench --out FILE.json`"
        )
    return max(enumerate(paths), key=lambda ip: (_date_of(ip[1]), ip[0]))[1]


def load_shipped_results(*, allow_partial: bool = False) -> dict:
    """The newest forward run shipped with the package (:func:`shipped_results_path`), validated.

    Raises FileNotFoundError if the package has none, ResultsError if the file breaks the schema or is the
    checkpoint of an unfinished run (unless ``allow_partial``). The run's ``device`` says which GPU measured
    it, and :func:`~mamba2_tutorial.perf.sources.staleness_note` whether the kernels have changed since.
    """
    path = shipped_results_path()
    if not path.is_file():
        raise FileNotFoundError(f"no shipped benchmark results at {path}: they are written by a GPU run of "
                                "`python -m mamba2_tutorial bench --out FILE.json`")
    return load_results(path, allow_partial=allow_partial)


def load_shipped_packed() -> dict | None:
    """The newest ``bench --packed`` run shipped with the package (``<gpu>_packed.json`` for the GPUs of
    :data:`SHIPPED_FORWARD`, the latest ``date`` first), or None where the package has none. Checked for what
    notebook 13 reads: ``device``, ``date`` and a non-empty list ``packed`` of records, each with ``name`` and
    ``ms`` (run name -> milliseconds); ResultsError otherwise."""
    paths = [p for p in (shipped_dir() / f"{name}_packed.json" for name in SHIPPED_FORWARD) if p.is_file()]
    if not paths:
        return None
    path = max(enumerate(paths), key=lambda ip: (_date_of(ip[1]), ip[0]))[1]
    results = json.loads(path.read_text())
    _require(isinstance(results.get("device"), str), f"{path.name}: results.device", "must be a string")
    records = results.get("packed")
    _require(isinstance(records, list) and len(records) > 0, f"{path.name}: results.packed",
             "must be a non-empty list of `bench --packed` records")
    for i, rec in enumerate(records):
        _require(isinstance(rec, Mapping) and isinstance(rec.get("name"), str)
                 and isinstance(rec.get("ms"), Mapping), f"{path.name}: results.packed[{i}]",
                 "must be an object with 'name' and 'ms'")
    return results


def require_section(results: Mapping, key: str, what: str) -> list:
    """``results[key]``, non-empty, or ResultsError saying what is missing and how to measure it: a notebook
    that teaches a section of the results fails without it rather than drawing an empty figure."""
    section = results.get(key)
    if not section:
        flag = {"steps": " --steps", "sweep": " --sweep"}.get(key, "")
        raise ResultsError(
            f"the results of {results.get('device', '?')} ({results.get('date', '?')}) have no {key!r}: "
            f"{what} needs them; ship a run of `python -m mamba2_tutorial bench{flag}` that measured them "
            f"(perf.results.SHIPPED_FORWARD)")
    return section


def require_impl(results: Mapping, impl: str, records: str = "shapes") -> None:
    """ResultsError unless every record of ``results[records]`` timed ``impl`` (or says why not)."""
    recs = results.get(records) or []
    missing = [r["name"] for r in recs if impl not in r["ms"]]
    if not recs or missing:
        raise ResultsError(
            f"the results of {results.get('device', '?')} ({results.get('date', '?')}) did not run {impl!r} "
            f"at {missing or 'any shape'}: ship a run of `python -m mamba2_tutorial bench` that measured it "
            f"(perf.results.SHIPPED_FORWARD)")


#: what :func:`missing` says a run lacks, by implementation or section
_LACKS = {"taught": "times of the taught kernels ('taught', ssd_forward_taught)",
          "steps": "staged steps ('steps': every step from the taught kernels to the shipped config, timed)"}


def missing(results: Mapping, what: str) -> str | None:
    """None where the results have ``what``: an implementation of :data:`IMPLS` timed at every shape, or a
    non-empty section (``"steps"``, ``"sweep"``). Where the run has none of it (a run made before the
    benchmark measured it), one paragraph to print in place of what it would show: what is missing, from
    which run, and the command that measures it. Present but incomplete (an implementation at some shapes
    only, an empty section) is a ResultsError, as in :func:`require_impl` and :func:`require_section`."""
    if what in IMPLS:
        if any(what in r["ms"] for r in results.get("shapes") or []):
            require_impl(results, what)
            return None
    elif results.get(what) is not None:
        require_section(results, what, f"the {what!r} section")
        return None
    return (
        f"Not measured: the results of {results.get('device', '?')} ({results.get('date', '?')}) have no "
        f"{_LACKS.get(what, repr(what))}, so what they would show here is skipped. A run of "
        "`python -m mamba2_tutorial bench --out FILE.json` on a GPU measures them (shipped by adding the "
        "file under mamba2_tutorial/data/benchmarks and its name to perf.results.SHIPPED_FORWARD).")


# ----------------------------------------------------------------------------------------------------
# derived numbers


def speedup(rec: Mapping, other: str, ours: str = "cutile") -> float | None:
    """How many times faster ``ours`` is than ``other`` on one record (None if either has no time)."""
    a, b = rec["ms"].get(ours), rec["ms"].get(other)
    if a is None or b is None:
        return None
    return b / a


def geomean(values) -> float | None:
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def ceilings_of(results: Mapping) -> roofline.Ceilings:
    """The ceilings the run measured (matrix rate and copy bandwidth), as :class:`roofline.Ceilings`: every
    floor of a results file is computed with these, never with a datasheet's."""
    c = results["ceilings"]
    return roofline.Ceilings(c["mma_tflops"] * 1e12, c["copy_tbps"] * 1e12, c.get("source", ""))


def device_ms(rec: Mapping) -> float | None:
    """The sum of our kernels' device times (each timed alone) of one record, or None without a breakdown."""
    km = rec.get("cutile_kernels_ms")
    return sum(km.values()) if km else None


def host_bound(rec: Mapping) -> bool:
    """Whether our forward's end-to-end time on this record is more than :data:`HOST_BOUND_RATIO` times its
    kernels' device time: the host's work per call (checks, allocations, launches), not the GPU, sets it."""
    e2e, dev = rec["ms"].get("cutile"), device_ms(rec)
    return e2e is not None and dev is not None and e2e > HOST_BOUND_RATIO * dev


def host_bound_notes(results: Mapping, records: str = "shapes") -> list[str]:
    """One line per host-bound record: its end-to-end time and its device time."""
    return [f"{r['name']}: {_fmt_ms(r['ms']['cutile'])} ms end to end, its kernels "
            f"{_fmt_ms(device_ms(r))} ms of device time ({r['ms']['cutile'] / device_ms(r):.1f}x): host-bound"
            for r in results.get(records, []) if host_bound(r)]


# ----------------------------------------------------------------------------------------------------
# the staged steps (notebook 10)


def steps_record(results: Mapping, name: str | None = None) -> Mapping:
    """The staged steps measured at shape ``name`` (default: the first); KeyError names the ones there are."""
    recs = results.get("steps") or []
    if not recs:
        raise KeyError("results have no 'steps' (run the benchmark with --steps NAME ...)")
    if name is None:
        return recs[0]
    for r in recs:
        if r["name"] == name:
            return r
    raise KeyError(f"no staged steps at {name!r}; measured at {[r['name'] for r in recs]}")


def step_is_fused(step: Mapping) -> bool:
    """Whether the step's state stage is one launch (fused or segmented): the chunk states never cross
    memory."""
    return step["config"]["state"]["kind"] != "unfused"


def step_costs(rec: Mapping, step: Mapping) -> dict[str, roofline.Cost]:
    """Counted FLOPs and bytes of each stage the step's config launches (``roofline.kernel_costs``): the three
    taught kernels, or the fused state stage and the scan. Inputs, outputs and the states entering each chunk
    are in the record's dtype (as ``ssd_forward`` stores them), the chunk states float32."""
    nbytes = DTYPE_BYTES.get(rec["dtype"], 2)
    return roofline.kernel_costs(rec["dims"], io_bytes=nbytes, dt_bytes=nbytes, init_state_bytes=nbytes,
                                 fused=step_is_fused(step))


def step_floor_ms(rec: Mapping, step: Mapping, ceilings: roofline.Ceilings) -> float:
    """The floor of the step's design: the sum of its stages' roofline floors."""
    return sum(c.floor_ms(ceilings) for c in step_costs(rec, step).values())


def step_host_bound(step: Mapping) -> bool:
    """Whether the step's end-to-end time is more than :data:`HOST_BOUND_RATIO` times its stages' time."""
    km = step.get("kernels_ms")
    return step["ms"] is not None and bool(km) and step["ms"] > HOST_BOUND_RATIO * sum(km.values())


# ----------------------------------------------------------------------------------------------------
# the printed table


def _fmt_ms(ms, floor=None) -> str:
    if ms is None:
        return "-"
    s = f"{ms:.1f}" if ms >= 100 else f"{ms:.3f}" if ms >= 0.01 else f"{ms:.2g}"
    if floor:
        s += f" ({ms / floor:.1f}x)"
    return s


def _fmt_x(v) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _table(header: list[str], rows: list[list[str]], left: int = 1) -> str:
    """A text table, its first ``left`` columns left-aligned, the others right-aligned."""
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    line = lambda r: "  ".join(
        c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))
    )
    return "\n".join([line(header), "  ".join("-" * w for w in widths)] + [line(r) for r in rows])


def format_table(results: Mapping, *, records: str = "shapes") -> str:
    """The benchmark as text: times in ms (and as multiples of the roofline floor), our speedups, our kernels.

    ``records`` is "shapes" or "sweep".
    """
    recs = results[records]
    impls = [i for i in IMPLS if any(r["ms"].get(i) is not None for r in recs)] or ["cutile"]
    others = [i for i in impls if i != "cutile"]
    header = ["shape", "floor ms"] + [f"{i} ms (x floor)" for i in impls] + [f"vs {o}" for o in others]
    rows = []
    for r in recs:
        rows.append(
            [r["name"], _fmt_ms(r["floor_ms"])]
            + [_fmt_ms(r["ms"].get(i), r["floor_ms"]) for i in impls]
            + [_fmt_x(speedup(r, o)) for o in others]
        )
    if len(recs) > 1 and others:
        rows.append(
            ["geomean", ""]
            + [""] * len(impls)
            + [_fmt_x(geomean(speedup(r, o) for r in recs)) for o in others]
        )
    parts = [
        f"{results['device']}  ({results['date']})   ms = median time per forward, end to end; "
        "(Nx) = time / roofline floor; vs X = X's time / ours",
        _table(header, rows),
    ]

    err_rows = [
        [r["name"]] + [("-" if r["rel_err"].get(i) is None else f"{r['rel_err'][i]:.1e}") for i in impls]
        for r in recs
    ]
    parts += ["", "relative L2 error vs the float64 reference", _table(["shape"] + impls, err_rows)]

    krecs = [r for r in recs if r.get("cutile_kernels_ms")]
    if krecs:
        cols = stages_of({k: 1 for r in krecs for k in r["cutile_kernels_ms"]})
        kh = ["shape"] + [f"{k} ms (x floor)" for k in cols] + ["device (sum)", "end-to-end", "host-bound"]
        krows = []
        for r in krecs:
            kf = r.get("kernel_floor_ms") or {}
            km = r["cutile_kernels_ms"]
            krows.append(
                [r["name"]]
                + [_fmt_ms(km[k], kf.get(k)) if k in km else "-" for k in cols]
                + [_fmt_ms(device_ms(r)), _fmt_ms(r["ms"].get("cutile")), "yes" if host_bound(r) else "no"]
            )
        parts += ["", "our kernels, each timed alone", _table(kh, krows)]
        notes = host_bound_notes({records: krecs}, records)
        if notes:
            parts += ["", f"host-bound (end to end > {HOST_BOUND_RATIO}x the kernels' device time; the "
                          "device time is what the GPU needs):"] + [f"  {line}" for line in notes]

    problems = [
        f"  {r['name']} {impl}: {msg}" for r in recs for impl, msg in sorted(r.get("errors", {}).items())
    ]
    if problems:
        parts += ["", "not timed:"] + problems
    return "\n".join(parts)


def format_overhead(results: Mapping) -> str:
    ov = results.get("overhead")
    if not ov:
        return "launch overhead: not measured"
    header = ["impl", "device ms", "host us/call", "loop us/call", "graph us/call"]
    rows = []
    for impl, row in ov["impls"].items():
        f = lambda v, fmt: "-" if v is None else format(v, fmt)
        rows.append(
            [
                impl,
                f(row.get("event_ms"), ".4f"),
                f(row.get("host_us"), ".1f"),
                f(row.get("loop_us"), ".1f"),
                f(row.get("graph_us"), ".1f"),
            ]
        )
    d = ov.get("dims", {})
    title = (
        f"launch and host overhead at {ov.get('name')} {d}: device = median event time (cold L2); "
        "host = time to issue one call; loop = back-to-back calls incl. sync; graph = CUDA-graph replay"
    )
    notes = [
        f"  {impl}: {k} {row[k]}"
        for impl, row in ov["impls"].items()
        for k in ("error", "graph_error")
        if row.get(k)
    ]
    return "\n".join([title, _table(header, rows)] + (["not measured:"] + notes if notes else []))


def format_steps(results: Mapping) -> str:
    """The staged steps as text, one table per shape: each step's end-to-end time, what it bought over the
    step before, its speedup over the taught kernels, its stages (each timed alone, as a multiple of its
    roofline floor), its design's floor and its relative error; then each step's idea."""
    recs = results.get("steps") or []
    if not recs:
        return "staged steps: not measured (python -m mamba2_tutorial bench --steps NAME ...)"
    ceilings = ceilings_of(results)
    parts = [f"staged steps from the taught kernels to the shipped config, {results['device']} "
             f"({results['date']}): ms = median time per forward; bought = the step before's time / this "
             "step's; stages timed alone (Nx) = time / the stage's roofline floor"]
    for rec in recs:
        steps = rec["steps"]
        cols = stages_of({k: 1 for st in steps for k in (st.get("kernels_ms") or {})})
        header = (["#", "step", "ms", "bought", "vs taught"] + [f"{k} ms (x floor)" for k in cols]
                  + ["design floor", "rel err"])
        rows, prev = [], None
        taught = steps[0]["ms"]
        for i, st in enumerate(steps):
            ms, km = st["ms"], st.get("kernels_ms") or {}
            floors = {k: c.floor_ms(ceilings) for k, c in step_costs(rec, st).items()}
            rows.append(
                [str(i), st["name"] + (" [host-bound]" if step_host_bound(st) else ""), _fmt_ms(ms),
                 _fmt_x(None if ms is None or prev is None else prev / ms),
                 _fmt_x(None if ms is None or taught is None else taught / ms)]
                + [_fmt_ms(km[k], floors.get(k)) if k in km else "-" for k in cols]
                + [_fmt_ms(sum(floors.values())), "-" if st["rel_err"] is None else f"{st['rel_err']:.1e}"])
            prev = ms if ms is not None else prev
        d = rec["dims"]
        dims = " ".join(f"{k}{d[k]}" for k in DIM_KEYS)
        floor = roofline.floor_ms(d, ceilings, io_bytes=DTYPE_BYTES.get(rec["dtype"], 2),
                                  dt_bytes=DTYPE_BYTES.get(rec["dtype"], 2))
        parts += ["", f"{rec['name']} ({dims}, {rec['dtype']}): the whole forward's floor "
                      f"{_fmt_ms(floor)} ms", _table(header, rows, left=2)]
        parts += [f"  {i} {st['name']}: {st['idea']}" for i, st in enumerate(steps)]
        parts += [f"  not timed: {st['name']}: {st['error']}" for st in steps if st.get("error")]
    return "\n".join(parts)


# ----------------------------------------------------------------------------------------------------
# the staged steps as notebook 10 presents them

#: a step that bought less than this fraction over the step before changed nothing measurable: notebook 10's
#: waterfall merges it into the step after it (the full table keeps every step)
MIN_STEP_GAIN = 0.02


def _fmt_field(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, list):
        return "(" + ", ".join(map(str, v)) + ")" if v else "()"
    return str(v)


def config_changes(before: Mapping, after: Mapping) -> list[str]:
    """What one config (as JSON, ``fast.config.config_to_json``) changes from another, one line per field:
    ``"scan: plain -> shared"``, ``"scan.occupancy: - -> 3"``."""
    out = []
    for stage in CONFIG_KINDS:
        a, b = before[stage], after[stage]
        if a.get("kind") != b.get("kind"):
            out.append(f"{stage}: {a.get('kind')} -> {b.get('kind')}")
        for key in [k for k in b if k != "kind"] + [k for k in a if k != "kind" and k not in b]:
            va, vb = a.get(key), b.get(key)
            if va != vb:
                out.append(f"{stage}.{key}: {_fmt_field(va)} -> {_fmt_field(vb)}")
    return out


def presented_steps(rec: Mapping, min_gain: float = MIN_STEP_GAIN) -> list[dict]:
    """The staged steps of one record as the waterfall shows them: a step whose time is within ``min_gain``
    of the step before's (it changed nothing measurable) is merged into the step after it (or, as the last
    step, into the one before), the merged entry named ``"a + b"`` with the later step's time, stages and
    config, and ``merged`` listing the steps it holds. The taught step (the first) and untimed steps are
    never merged."""
    steps = rec["steps"]
    out: list[dict] = []
    pending: list[str] = []
    prev_ms = None
    for i, st in enumerate(steps):
        ms = st["ms"]
        small = (i > 0 and ms is not None and prev_ms is not None and prev_ms / ms - 1 < min_gain)
        if small and i < len(steps) - 1:
            pending.append(st["name"])
        else:
            names = pending + [st["name"]]
            if small and len(out) > 1:  # the last step bought nothing: merge it into the one before
                names = out.pop()["merged"] + names
            out.append(dict(st, name=" + ".join(names), merged=names))
            pending = []
        if ms is not None:
            prev_ms = ms
    return out


def step_point(rec: Mapping, step: Mapping, ceilings: roofline.Ceilings) -> tuple[float, float]:
    """A step's point on the roofline: the arithmetic intensity of its design (the forward's FLOPs over the
    bytes its stages move) and its achieved rate in TFLOP/s (those FLOPs over its end-to-end time)."""
    if step["ms"] is None:
        raise ValueError(f"step {step['name']!r} was not timed: {step.get('error')}")
    costs = step_costs(rec, step).values()
    flops, nbytes = sum(c.flops for c in costs), sum(c.bytes for c in costs)
    return flops / nbytes, flops / (step["ms"] * 1e-3) / 1e12


def step_report(results: Mapping, rec: Mapping, index: int) -> str:
    """One step's measurement in a line or three: its time and what it bought over the step before, each
    stage timed alone against its floor, and its point on the roofline."""
    ceilings = ceilings_of(results)
    steps = rec["steps"]
    st = steps[index]
    if st["ms"] is None:
        return f"{rec['name']}, step {index} {st['name']}: not timed ({st.get('error')})"
    before = next((s for s in reversed(steps[:index]) if s["ms"] is not None), None)
    bought = "" if before is None else (f", {before['ms'] / st['ms']:.2f}x the step before "
                                        f"({st['ms'] - before['ms']:+.3f} ms)")
    floors = {k: c.floor_ms(ceilings) for k, c in step_costs(rec, st).items()}
    km = st.get("kernels_ms") or {}
    stages = ", ".join(f"{k} {_fmt_ms(km[k])} ms ({km[k] / floors[k]:.1f}x its floor)"
                       for k in stages_of(km))
    intensity, tflops = step_point(rec, st, ceilings)
    return (f"{rec['name']}, step {index} {st['name']}: {_fmt_ms(st['ms'])} ms{bought}; "
            f"{steps[0]['ms'] / st['ms']:.2f}x the taught kernels\n"
            f"  stages, each timed alone: {stages or 'not timed'}\n"
            f"  on the roofline: {intensity:.0f} FLOP/byte, {tflops:.0f} TFLOP/s "
            f"({tflops * 1e12 / ceilings.mma_flops_per_s:.0%} of the measured matrix rate)")

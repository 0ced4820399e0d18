"""A tuned table for the GPU at hand, with cuTile's own tuner (``cuda.tile.tune.exhaustive_search``).

``python -m mamba2_tutorial tune [--classes KEY ...] [--out FILE] [--quick] [--space FILE]`` runs, for every
problem class (or those given):

1. a representative problem of the class (:func:`representative_dims`): the compile specs' small problem of
   its layout for the small classes (``fast/specs.py``), the benchmark shapes for the large ones (the wide
   ones: b8-l4096-h80's work as 40 heads of 128);
2. the **state stage**: every state candidate of the search space (``data/tune/space.json``,
   :func:`load_space`) is run through the launch recorder (``runtime.launch.recording``), and the tuner times
   its main kernel (``chunk_state_kernel``, ``chunk_state_passing_kernel`` or ``chunk_state_segments_kernel``)
   with the recorded grid, arguments and occupancy hint, the L2 flushed before every run;
3. the **scan stage**: the winning state stage runs once, then every scan candidate the same way, its main
   kernel being ``chunk_scan_chunk_kernel``, ``chunk_scan_shared_kernel`` or ``chunk_scan_kernel``;
4. the winners' config against the default table's config of the class, the whole forward timed; the
   faster of the two goes into the table (a small space, such as ``--quick``'s, may hold no config that
   beats the default).

What is timed: the tuner times ONE kernel per launch (it takes a tile kernel, not a function of several
launches), so a stage's other launches (the unfused stage's ``state_passing_kernel``, the segmented stage's
state passing across segments, the chunk scan's C Bᵀ and kd kernels) run once before the tuner, to make the
main kernel's inputs, and are then timed together once per distinct set of them (CUDA events, L2 flushed);
a candidate's stage time, by which the winner is chosen, is the tuner's mean plus that time. Host time is
not counted (the small classes are host-bound: one launch fewer there counts more than this shows). The
state stage is timed without storing kd: the table stores it wherever the chosen scan reads it.

The default space has 14 state candidates (22 for the long layout) and 8 to 16 scan candidates per class
(``--quick``: 2 or 3, and 2): every candidate compiles once, so a class takes a few minutes on one GPU, the
24 classes an hour or two. The table (``h200.json``'s schema: configs by name, the class of every problem
mapped to one, the rules and the backward section copied from the default table) is written to ``--out``,
else to the user's folder that ``ssd_forward`` reads (:func:`mamba2_tutorial.fast.tuning.user_table_dir`),
named by the GPU; classes not tuned keep the config of the table already there, else the default table's.

Everything up to the timing runs without a GPU: the tests give :func:`tune_class` a fake timer in place of
``exhaustive_search`` and check that the table it writes loads and runs the taught forward's results.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import itertools
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import torch

from ..fast.config import (
    FUSED_WALKS,
    ChunkScan,
    Decay,
    FastConfig,
    Segmented,
    config_from_json,
    config_to_json,
)
from ..fast.plan import ScanCall, StateCall, resolve
from ..fast.stages import run_scan, run_state
from ..fast.tuning import (
    DEFAULT_TABLE,
    _all_classes,
    load_table,
    table_from_json,
    table_slug,
    user_table_dir,
    with_segments,
)
from ..runtime.launch import recording

__all__ = ["MAIN_KERNELS", "ClassResult", "Space", "StageResult", "build_table", "exhaustive_search",
           "load_space", "main", "representative", "representative_dims", "tune_class", "write_table"]

_NO_LIMIT = (0.0, float("inf"))
#: the launch of each stage that the tuner times (the one that dominates it), by kernel function name
MAIN_KERNELS = {
    "state": ("chunk_state_kernel", "chunk_state_passing_kernel", "chunk_state_segments_kernel"),
    "scan": ("chunk_scan_chunk_kernel", "chunk_scan_shared_kernel", "chunk_scan_kernel"),
}
#: the stage a candidate of the other stage is paired with, so that it builds as a FastConfig
_COMPANIONS = {"state": {"kind": "chunk", "decay": "key_log2"}, "scan": {"kind": "unfused"}}
_WORDS = ("dtype", "size", "layout", "q")


def exhaustive_search(*args, **kwargs):
    """``cuda.tile.tune.exhaustive_search``, imported when first called (the tests put a fake timer here)."""
    from cuda.tile.tune import exhaustive_search as search

    return search(*args, **kwargs)


# ----------------------------------------------------------------------------------------------------
# the search space, as data
# ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Space:
    """The candidates of both stages, each a stage JSON with the problem-class words it is limited to."""

    source: str
    state: tuple       # ((stage json, only), ...)
    scan: tuple

    def candidates(self, stage: str, key: str) -> list:
        """The stage objects (``Fused(...)``, ``ChunkScan(...)``, ...) of ``stage`` tried for ``key``."""
        words = dict(zip(_WORDS, key.split("/")))
        out = []
        for value, only in getattr(self, stage):
            if all(words[w] in allowed for w, allowed in only.items()):
                cand = _stage_of(stage, value)
                if cand not in out:
                    out.append(cand)
        return out


def _stage_of(stage: str, value: dict):
    other = _COMPANIONS[stage]
    cfg = config_from_json({"state": value, "scan": other} if stage == "state" else
                           {"state": other, "scan": value})
    return getattr(cfg, stage)


def _expand(where: str, entry) -> tuple[list, dict]:
    """The stage JSONs an entry stands for (each ``{"one_of": [...]}`` field taken at each of its values),
    and its ``only`` (problem-class word -> allowed values)."""
    if not isinstance(entry, Mapping):
        raise ValueError(f"{where} must be an object (a stage in the tables' JSON), got {entry!r}")
    entry = dict(entry)
    only = entry.pop("only", {})
    if not isinstance(only, Mapping) or any(w not in _WORDS or not isinstance(v, list)
                                            for w, v in only.items()):
        raise ValueError(f"{where}.only must map some of {list(_WORDS)} to lists of their values, got "
                         f"{only!r}")
    names, choices = [], []
    for name, value in entry.items():
        if isinstance(value, Mapping) and set(value) == {"one_of"}:
            if not isinstance(value["one_of"], list) or not value["one_of"]:
                raise ValueError(f"{where}.{name}: one_of must be a non-empty list, got {value['one_of']!r}")
            names.append(name)
            choices.append(value["one_of"])
    values = []
    for combo in itertools.product(*choices):
        values.append(entry | dict(zip(names, combo)))
    return values, dict(only)


def load_space(path: str | Path | None = None, *, quick: bool = False) -> Space:
    """Read and check the search space (default: the shipped ``data/tune/space.json``; ``quick``: its
    ``quick`` subset): every candidate must build with the config model; a bad one is an error naming the
    file and the candidate."""
    if path is None:
        source = resources.files("mamba2_tutorial") / "data" / "tune" / "space.json"
        where_file = "data/tune/space.json"
    else:
        source = Path(path)
        where_file = str(path)
    try:
        raw = json.loads(source.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"search space {where_file}: {e}") from None
    if quick:
        raw = raw.get("quick")
        if not isinstance(raw, Mapping):
            raise ValueError(f"search space {where_file}: no 'quick' subset (an object with 'state' and "
                             "'scan')")
    stages = {}
    for stage in ("state", "scan"):
        entries = raw.get(stage)
        if not isinstance(entries, list) or not entries:
            raise ValueError(f"search space {where_file}: needs a non-empty list {stage!r} of candidates")
        found = []
        for i, entry in enumerate(entries):
            where = f"{stage}[{i}]"
            values, only = _expand(f"search space {where_file}: {where}", entry)
            for value in values:
                if stage == "state" and value.get("store_kd"):
                    raise ValueError(f"search space {where_file}: {where} candidate {json.dumps(value)}: "
                                     "store_kd is not searched (the table stores kd wherever the scan "
                                     "reads it)")
                try:
                    _stage_of(stage, value)
                except (TypeError, ValueError) as e:
                    raise ValueError(f"search space {where_file}: {where} candidate {json.dumps(value)}: "
                                     f"{e}") from None
                found.append((value, only))
        stages[stage] = tuple(found)
    return Space(where_file, stages["state"], stages["scan"])


# ----------------------------------------------------------------------------------------------------
# the representative problem of a class
# ----------------------------------------------------------------------------------------------------
_LARGE = {  # (layout, q) -> (b, l, h, p, g, n, Q): the benchmark shapes
    ("one-tile", "q>=256"): (8, 4096, 80, 64, 1, 128, 256),      # b8-l4096-h80
    ("one-tile", "q<=128"): (2, 8192, 128, 64, 8, 128, 128),     # b2-l8192-h128-g8
    ("long", "q>=256"): (1, 32768, 80, 64, 1, 128, 256),         # b1-l32768-h80
    ("long", "q<=128"): (1, 32768, 80, 64, 1, 128, 128),         # b1-l32768-h80 at chunk size 128
    ("wide", "q>=256"): (8, 4096, 40, 128, 1, 128, 256),         # b8-l4096-h80's work as 40 heads of 128
    ("wide", "q<=128"): (8, 4096, 40, 128, 1, 128, 128),
}


def representative_dims(key: str) -> tuple:
    """``(b, l, h, p, g, n, Q)`` of the problem class ``key`` is tuned at: the benchmark shapes for the large
    classes, the compile specs' small problems (``fast/specs.py``) for the small ones."""
    if key not in _all_classes():
        raise ValueError(f"unknown problem class {key!r}; the classes are {_all_classes()}")
    _dtype, size, layout, q = key.split("/")
    if size == "large":
        return _LARGE[(layout, q)]
    Q = 128 if q == "q<=128" else 256
    b, h, p, n = (1, 8, 64, 128) if layout == "long" else (2, 8, 128 if layout == "wide" else 64, 128)
    nchunks = 32 if layout == "long" else 3
    return b, nchunks * Q - Q // 2, h, p, 1, n, Q


def representative(key: str, device="cpu") -> dict:
    """The inputs of ``key``'s representative problem on ``device``, with every optional input a Mamba-2 layer
    passes (D, z, dt_bias with softplus), as keyword arguments of ``ssd_forward``."""
    b, l, h, p, g, n, Q = representative_dims(key)
    dtype = getattr(torch, key.split("/")[0])
    gen = torch.Generator(device=device).manual_seed(0)

    def randn(*shape, dt=dtype):
        return torch.randn(*shape, generator=gen, device=device).to(dt)
    return dict(x=randn(b, l, h, p), dt=torch.rand(b, l, h, generator=gen, device=device),
                A=-torch.rand(h, generator=gen, device=device), B=randn(b, l, g, n), C=randn(b, l, g, n),
                chunk_size=Q, D=randn(h, dt=torch.float32), z=randn(b, l, h, p),
                dt_bias=randn(h, dt=torch.float32), dt_softplus=True)


# ----------------------------------------------------------------------------------------------------
# one stage through the tuner
# ----------------------------------------------------------------------------------------------------
@dataclass
class _Launches:
    """One candidate's recorded launches of one stage, split around the one the tuner times."""

    before: list       # [(kernel, grid, args)] that make the main kernel's inputs
    main: tuple
    after: list

    def rest_key(self) -> tuple:
        return tuple((k._pyfunc.__name__, repr(k._compiler_options), g)
                     for k, g, _ in self.before + self.after)


def _record(run) -> tuple[list, object]:
    seen: list = []
    with recording(lambda kernel, grid, args: seen.append((kernel, grid, args))):
        out = run()
    return seen, out


def _split(stage: str, label: str, launches: list) -> _Launches:
    mains = [i for i, (k, _, _) in enumerate(launches) if k._pyfunc.__name__ in MAIN_KERNELS[stage]]
    if len(mains) != 1:
        names = [k._pyfunc.__name__ for k, _, _ in launches]
        raise RuntimeError(f"{stage} candidate {label}: expected one main kernel of {MAIN_KERNELS[stage]} "
                           f"among its launches {names}")
    i = mains[0]
    return _Launches(launches[:i], launches[i], launches[i + 1:])


def _gpu_launch(kernel, grid, args) -> None:
    import cuda.tile as ct

    ct.launch(torch.cuda.current_stream(), grid, kernel, args)


@dataclass(frozen=True)
class StageResult:
    """One stage of one class: the tuner's result, each candidate's stage time, the winner."""

    stage: str
    tuning: object                 # cuda.tile.tune.TuningResult (labels as configs)
    rest_us: dict                  # label -> time of the stage's other launches (us)
    stage_us: dict                 # label -> tuner mean + rest
    best: object                   # the winning stage object
    best_label: str


def _stage_label(stage: str, cand) -> str:
    value = config_to_json(FastConfig(cand, ChunkScan(decay=Decay.KEY_LOG2)) if stage == "state" else
                           FastConfig(scan=cand))[stage]
    return _name_of(value)


def _name_of(value: dict) -> str:
    parts = [value["kind"]]
    for field, v in value.items():
        if field == "kind" or v is None or v is False or v == []:
            continue
        if field == "tiles":
            parts.append("x".join(map(str, v)))
        elif field == "occupancy":
            parts.append(f"occ{v}")
        elif field == "form":
            parts.append("-".join(m.lower() for m in v))
        elif field == "cb_dtype":
            parts.append({"float32": "f32cb", "bfloat16": "bf16cb"}[v])
        elif field == "decay":
            parts.append("kd" if v == "key_log2" else "exact")
        elif v is True:
            parts.append({"store_kd": "kd", "unroll": "unrolled"}.get(field, field))
        else:
            parts.append(f"{field}{v}")
    return "-".join(parts)


def _tune_stage(stage: str, cands: list, launches_of: Callable, *, gpu: bool, search, rest_timer,
                quiet: bool, timeout_s: float | None) -> StageResult:
    """Time every candidate's main kernel with ``search`` (``exhaustive_search``'s signature), add the time
    of its other launches (``rest_timer(fn) -> us``, once per distinct set), and pick the fastest stage."""
    labelled = {_stage_label(stage, c): c for c in cands}
    recorded: dict = {}
    prepared: set = set()

    def launches(label):
        if label not in recorded:
            recorded[label] = _split(stage, label, launches_of(labelled[label]))
        found = recorded[label]
        if gpu and label not in prepared:       # the launches that make the main kernel's inputs, once
            for k, g, a in found.before:
                _gpu_launch(k, g, a)
            prepared.add(label)
        return found

    def hints(label):
        occupancy = launches(label).main[0]._compiler_options.occupancy
        return {} if occupancy is None else {"occupancy": occupancy}

    result = search(list(labelled), torch.cuda.current_stream() if gpu else None,
                    lambda label: launches(label).main[1], lambda label: launches(label).main[0],
                    lambda label: launches(label).main[2], hints, quiet=quiet,
                    single_run_timeout_sec=timeout_s)
    rest_by_key: dict = {}
    rest_us, stage_us = {}, {}
    for m in result.successes:
        found = launches(m.config)
        key = found.rest_key()
        if key not in rest_by_key:
            others = found.before + found.after

            def run(others=others):
                for k, g, a in others:
                    _gpu_launch(k, g, a)
            rest_by_key[key] = rest_timer(run) if others else 0.0
        rest_us[m.config] = rest_by_key[key]
        stage_us[m.config] = m.mean_us + rest_us[m.config]
    best_label = min(stage_us, key=stage_us.get)
    return StageResult(stage, result, rest_us, stage_us, labelled[best_label], best_label)


@dataclass(frozen=True)
class ClassResult:
    """One class tuned: its stages, the config they make, its time and the default table's (us), seconds."""

    key: str
    state: StageResult
    scan: StageResult
    config: FastConfig
    tuned_us: float
    default_us: float
    seconds: float
    #: the stages' winners ran the forward slower than the default table's config, which ``config`` is then
    kept_default: bool = False


def _assemble(state, scan) -> FastConfig:
    """The winners as one config: kd stored by a walking state stage wherever the scan reads it."""
    if isinstance(state, FUSED_WALKS):
        reads_kd = isinstance(scan, ChunkScan) and scan.decay is Decay.KEY_LOG2
        state = dataclasses.replace(state, store_kd=reads_kd)
    return FastConfig(state, scan)


def _cuda_us(fn) -> float:
    from .timing import time_cuda

    return time_cuda(fn).median_ms * 1e3


def tune_class(key: str, space: Space, *, device="cuda", search=None, timer=None, quiet: bool = False,
               timeout_s: float | None = None) -> ClassResult:
    """Tune class ``key`` over ``space`` (see the module docstring). ``search``: ``exhaustive_search``'s
    signature (default: it); ``timer(fn) -> us`` times a stage's other launches and the whole forward
    (default: CUDA events). On the CPU (``device="cpu"``) nothing runs but the recording: ``search`` and
    ``timer`` must then be given, and stand in for the GPU."""
    started = time.perf_counter()
    search = exhaustive_search if search is None else search
    timer = _cuda_us if timer is None else timer
    device = torch.device(device)
    gpu = device.type == "cuda"
    backend = "gpu" if gpu else "cpu"
    inp = representative(key, device)
    x, Q = inp["x"], inp["chunk_size"]
    b, l, h = x.shape[:3]
    nchunks = -(-l // Q)
    call = StateCall(x, inp["dt"], inp["A"], inp["B"], Q, inp["dt_bias"], True, _NO_LIMIT, None, backend)

    def plan_of(cfg):
        return resolve(cfg, b, h, nchunks, x.dtype, device, _NO_LIMIT)

    def state_launches(cand):
        return _record(lambda: run_state(plan_of(FastConfig(cand, ChunkScan())), call))[0]

    state = _tune_stage("state", space.candidates("state", key), state_launches, gpu=gpu, search=search,
                        rest_timer=timer, quiet=quiet, timeout_s=timeout_s)

    state_cfg = FastConfig(state.best, ChunkScan())      # stores dt: a kd scan computes kd in its stage
    state_plan = plan_of(state_cfg)
    if gpu:
        outputs = run_state(state_plan, call)
    else:
        outputs = _record(lambda: run_state(state_plan, call))[1]
    dt_out, dA_cumsum, init, _final, carry = outputs
    scan_call = ScanCall(x, dt_out, dA_cumsum, inp["C"], inp["B"], init, inp["D"], inp["z"], backend,
                         False, carry)
    scans = [c for c in space.candidates("scan", key)
             if not isinstance(state.best, Segmented) or isinstance(c, ChunkScan)]
    if not scans:
        raise ValueError(f"{key}: the state stage {state.best_label} (segmented) needs a chunk scan, and the "
                         f"search space has none for this class")

    def scan_launches(cand):
        return _record(lambda: run_scan(plan_of(FastConfig(state.best, cand)), scan_call))[0]

    scan = _tune_stage("scan", scans, scan_launches, gpu=gpu, search=search, rest_timer=timer, quiet=quiet,
                       timeout_s=timeout_s)

    config = _assemble(state.best, scan.best)
    default = load_table(DEFAULT_TABLE).config(key)
    timed = {}
    for name, cfg in (("tuned", config), ("default", default)):
        from ..fast.forward import ssd_forward

        cfg = with_segments(cfg, b, h, nchunks, load_table(DEFAULT_TABLE))
        timed[name] = timer(lambda cfg=cfg: ssd_forward(**inp, backend=backend, config=cfg))
    # a winner of the stages that runs the whole forward slower than the default table's config (a small
    # search space, or stage times that do not add up to the forward's) does not go into the table
    kept_default = timed["default"] < timed["tuned"]
    return ClassResult(key, state, scan, default if kept_default else config, timed["tuned"],
                       timed["default"], time.perf_counter() - started, kept_default)


# ----------------------------------------------------------------------------------------------------
# the table
# ----------------------------------------------------------------------------------------------------
def _default_raw() -> dict:
    path = resources.files("mamba2_tutorial") / "data" / "configs" / f"{DEFAULT_TABLE}.json"
    return json.loads(path.read_text())


def build_table(gpu: str, results: Sequence[ClassResult], base: Mapping | None = None) -> dict:
    """The table JSON for ``gpu``: the tuned classes' configs, every other class's from ``base`` (a table's
    JSON: the one already written for this GPU, else the default table's), the default table's rules and
    backward section unless ``base`` has its own. Checked as :func:`load_table` checks a table."""
    default = _default_raw()
    base = default if base is None else base
    by_class = {key: base["configs"][name] for key, name in base["classes"].items()}
    for r in results:
        by_class[r.key] = config_to_json(r.config)
    configs: dict = {}
    classes: dict = {}
    for key in _all_classes():
        value = by_class[key]
        name = "+".join(_name_of(value[stage]) for stage in ("state", "scan"))
        configs.setdefault(name, value)
        classes[key] = name
    raw = {"schema_version": 1, "gpu": gpu,
           "measured": f"tuned by python -m mamba2_tutorial tune on {gpu}, {_dt.date.today().isoformat()}: "
                       f"{', '.join(r.key for r in results) or 'no class'} (cuda.tile.tune.exhaustive_search "
                       "per stage); other classes as before",
           "rules": dict(base.get("rules", default["rules"])), "configs": configs, "classes": classes,
           "backward": base.get("backward", default["backward"])}
    table_from_json(table_slug(gpu), raw)
    return raw


def write_table(raw: dict, path: str | Path) -> Path:
    """Write the table JSON ``raw`` to ``path`` (its folder made if needed) and check that it loads."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(raw, indent=1) + "\n")
    load_table.cache_clear()
    load_table(path)
    return path


# ----------------------------------------------------------------------------------------------------
# the command
# ----------------------------------------------------------------------------------------------------
def _report(r: ClassResult) -> str:
    lines = [f"== {r.key}"]
    for s in (r.state, r.scan):
        lines.append(f"-- {s.stage} stage, the tuner's times of the main kernel:")
        lines.append(s.tuning.summary())
        lines.append(f"   winner {s.best_label}: {s.stage_us[s.best_label]:.1f} us with the stage's other "
                     f"launches ({s.rest_us[s.best_label]:.1f} us)")
    speedup = r.default_us / r.tuned_us if r.tuned_us > 0 else float("nan")
    lines.append(f"   forward: tuned {r.tuned_us:.1f} us, default table's config {r.default_us:.1f} us "
                 f"({speedup:.2f}x); tuned in {r.seconds:.0f} s")
    if r.kept_default:
        lines.append("   the default table's config is faster: the table keeps it for this class")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mamba2_tutorial tune",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--classes", nargs="+", metavar="KEY", help="problem classes to tune, e.g. "
                        "'bfloat16/large/one-tile/q>=256' (default: all 24)")
    parser.add_argument("--out", type=Path, help="the table file (default: <user tables>/<gpu>.json, where "
                        "ssd_forward finds it)")
    parser.add_argument("--quick", action="store_true", help="the space's small 'quick' subset (a smoke run)")
    parser.add_argument("--space", type=Path, help="a search space JSON in place of data/tune/space.json")
    parser.add_argument("--timeout", type=float, default=None, help="seconds one kernel run may take")
    args = parser.parse_args(argv)
    keys = args.classes or _all_classes()
    unknown = [k for k in keys if k not in _all_classes()]
    if unknown:
        parser.error(f"unknown classes {unknown}; the classes are {_all_classes()}")
    space = load_space(args.space, quick=args.quick)
    if not torch.cuda.is_available():
        print("tune: no CUDA GPU here (torch.cuda.is_available() is False): the tuner times kernels on the "
              "GPU it makes the table for; run this command on that GPU", file=sys.stderr)
        return 2
    gpu = torch.cuda.get_device_name()
    try:
        table_from_json(table_slug(gpu), {**_default_raw(), "gpu": gpu})
    except ValueError as e:
        print(f"tune: a table for {gpu!r} would not load: {e}", file=sys.stderr)
        return 2
    out = args.out or user_table_dir() / f"{table_slug(gpu)}.json"
    base = json.loads(out.read_text()) if out.is_file() else None
    print(f"tuning {len(keys)} classes on {gpu} ({'quick' if args.quick else 'full'} space {space.source})")
    started = time.perf_counter()
    results = []
    for key in keys:
        results.append(tune_class(key, space, device="cuda", timeout_s=args.timeout))
        print(_report(results[-1]), flush=True)
        write_table(build_table(gpu, results, base), out)     # after every class: a run cut short keeps it
    print(f"tuned {len(keys)} classes in {time.perf_counter() - started:.0f} s; table written to {out}")
    if out.parent.resolve() != user_table_dir().resolve():
        print(f"ssd_forward reads tables from {user_table_dir()} (set MAMBA2_TUTORIAL_TABLES to choose the "
              "folder): copy it there to use it")
    return 0


if __name__ == "__main__":
    sys.exit(main())

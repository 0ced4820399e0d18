"""The shipped tuning tables: which :class:`~mamba2_tutorial.fast.config.FastConfig` runs for which GPU and
problem size.

A table is a JSON file in ``mamba2_tutorial/data/configs/`` (``h200.json``: measured on an NVIDIA H200). It
names a few configs and maps every **problem class** to one of them. A problem's class is four words:

- dtype: ``bfloat16`` or ``float16`` (float32 runs the taught kernels: no float32 config has been tuned);
- size: ``large`` when b·l·h >= ``rules.large_work``, else ``small`` (small problems are host-bound: one
  launch fewer matters more than the arithmetic);
- layout: ``wide`` when the state is more than one 64 x 128 tile (p > 64 or n > 128); ``long`` when there are
  fewer (batch, head) pairs than the device's SMs and at least ``rules.long_loop_chunks`` chunks (a state
  stage of one block per pair would leave SMs idle through a long sequential loop); else ``one-tile``;
- chunk size: ``q<=128`` or ``q>=256``.

A :class:`~mamba2_tutorial.fast.config.Segmented` stage with ``segments`` None gets
:func:`segments_for`'s count: the smallest power of two giving ``rules.segment_waves`` blocks per SM, with at
least ``rules.min_segment_chunks`` chunks per segment.

Both count the SMs of the device the problem runs on, as every tuned launch does
(:func:`mamba2_tutorial.runtime.hardware.sm_count`: the GPU's own count; on the CPU executor the H200's, the
GPU the shipped tables were measured on). A table's ``sms`` is its GPU's, for reading the table.

The table's ``backward`` section does the same for the fast backward: named
:class:`~mamba2_tutorial.fast.config.BackwardConfig` s, and the name of one for every problem class and for
``float32`` (which the forward leaves to the taught kernels, while its backward runs the fast kernels too):
:func:`backward_config`.

On a GPU the table whose ``gpu`` is the device's name is used: first a user's table, one of the
``*.json`` in :func:`user_table_dir` (``$MAMBA2_TUTORIAL_TABLES``, else ``~/.cache/mamba2_tutorial/configs``;
``python -m mamba2_tutorial tune`` writes one for the GPU it runs on), then a shipped one; where none matches
(and on the CPU executor) the H200's, the only GPU the shipped configs were measured on. A user's table is
checked as a shipped one is. Configs change speed, never results.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import torch

from ..runtime.hardware import gpu_spec, sm_count
from .config import BackwardConfig, FastConfig, Segmented, backward_config_from_json, config_from_json

__all__ = ["DEFAULT_TABLE", "TABLES_ENV", "TuningTable", "backward_config", "load_table", "problem_class",
           "segments_for", "ssd_config", "table_for_device", "table_from_json", "table_names", "table_slug",
           "user_table_dir", "user_table_paths", "with_segments"]

#: the table used where no table names the GPU (and on the CPU executor)
DEFAULT_TABLE = "h200"
#: the environment variable naming the folder of a user's tables (:func:`user_table_dir`)
TABLES_ENV = "MAMBA2_TUTORIAL_TABLES"
_DTYPES = {torch.bfloat16: "bfloat16", torch.float16: "float16"}


@dataclass(frozen=True)
class TuningTable:
    """One GPU's table: its name, SM count, the class rules and the config of every problem class."""

    name: str                         # file stem, e.g. "h200"
    gpu: str                          # torch.cuda.get_device_name() of the GPU it was measured on
    sms: int                          # its GPU's SM count (runtime.hardware); the classes use the device's
    large_work: int
    long_loop_chunks: int
    segment_waves: int
    min_segment_chunks: int
    configs: dict                     # config name -> FastConfig
    classes: dict                     # problem class -> config name
    backward_configs: dict            # backward config name -> BackwardConfig
    backward_classes: dict            # problem class (and "float32") -> backward config name

    def config(self, key: str) -> FastConfig:
        return self.configs[self.classes[key]]

    def backward_config(self, key: str) -> BackwardConfig:
        return self.backward_configs[self.backward_classes[key]]


def table_names() -> list[str]:
    """The stems of the shipped tables (``data/configs/*.json``)."""
    folder = resources.files("mamba2_tutorial") / "data" / "configs"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".json"))


def user_table_dir() -> Path:
    """The folder of a user's tables: ``$MAMBA2_TUTORIAL_TABLES`` if set, else
    ``~/.cache/mamba2_tutorial/configs``. It need not exist."""
    env = os.environ.get(TABLES_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "mamba2_tutorial" / "configs"


def user_table_paths() -> list[Path]:
    """The user's tables, ``*.json`` in :func:`user_table_dir`, sorted by name (none if it does not exist)."""
    folder = user_table_dir()
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


def table_slug(gpu: str) -> str:
    """The file stem of a user's table for GPU ``gpu``: "NVIDIA H100 80GB HBM3" -> "nvidia-h100-80gb-hbm3"."""
    slug = re.sub(r"[^a-z0-9]+", "-", gpu.lower()).strip("-")
    if not slug:
        raise ValueError(f"GPU name {gpu!r} has no letter or digit to name a table file by")
    return slug


def _all_classes() -> list[str]:
    return [f"{d}/{s}/{lay}/{q}" for d in _DTYPES.values() for s in ("large", "small")
            for lay in ("one-tile", "long", "wide") for q in ("q<=128", "q>=256")]


@functools.lru_cache(maxsize=8)
def load_table(name: str | os.PathLike = DEFAULT_TABLE) -> TuningTable:
    """Read and check a table: a shipped one by its stem (``data/configs/<name>.json``), or any table file by
    its path (a :class:`~pathlib.Path`, or a string ending in ``.json``), a user's table for one: every config
    valid, every problem class mapped to a named config, every named config used. Errors name the file."""
    if isinstance(name, os.PathLike) or str(name).endswith(".json"):
        path = Path(name)
        if not path.is_file():
            raise ValueError(f"no tuning table file {str(path)!r}")
        try:
            raw = json.loads(path.read_text())
        except json.JSONDecodeError as e:
            raise ValueError(f"tuning table {path}: not valid JSON: {e}") from None
        if not isinstance(raw, dict):
            raise ValueError(f"tuning table {path}: must be a JSON object, got {type(raw).__name__}")
        try:
            return table_from_json(path.stem, raw)
        except (KeyError, TypeError, ValueError) as e:
            what = f"missing entry {e}" if isinstance(e, KeyError) else str(e)
            raise ValueError(f"{path}: {what}") from None
    path = resources.files("mamba2_tutorial") / "data" / "configs" / f"{name}.json"
    if not path.is_file():
        raise ValueError(f"no tuning table {name!r}; the shipped ones are {table_names()}")
    return table_from_json(name, json.loads(path.read_text()))


def table_from_json(name: str, raw: dict) -> TuningTable:
    """A table from its JSON (``raw``), checked as :func:`load_table` describes; ``name`` names it in errors.
    The SM count is the table's GPU's (:func:`mamba2_tutorial.runtime.hardware.gpu_spec`)."""
    where = f"tuning table {name}.json"
    configs, classes = _section(where, "", raw, config_from_json, _all_classes())
    rules = raw["rules"]
    if "sms" in raw:
        raise ValueError(f"{where}: the SM count is not the table's to say: it is the GPU's "
                         "(mamba2_tutorial.runtime.hardware), found by the table's 'gpu'")
    try:
        sms = gpu_spec(raw["gpu"]).sm_count
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
    return TuningTable(name, raw["gpu"], sms, int(rules["large_work"]),
                       int(rules["long_loop_chunks"]), int(rules["segment_waves"]),
                       int(rules["min_segment_chunks"]), configs, classes, *_backward_from_json(where, raw))


@functools.lru_cache(maxsize=8)
def table_for_device(device: torch.device) -> TuningTable:
    """The table measured on this GPU (by its name): a user's table first (:func:`user_table_paths`), then a
    shipped one; else :data:`DEFAULT_TABLE`'s. A user's table that does not load is an error naming its
    file."""
    if device.type == "cuda":
        gpu = torch.cuda.get_device_name(device)
        for path in user_table_paths():
            if load_table(path).gpu == gpu:
                return load_table(path)
        for name in table_names():
            if load_table(name).gpu == gpu:
                return load_table(name)
    return load_table(DEFAULT_TABLE)


def problem_class(dims: tuple, dtype: torch.dtype, table: TuningTable,
                  device: torch.device | str = "cpu") -> str | None:
    """The class on ``device`` of a problem of ``dims`` = (b, l, h, p, n, Q) in ``dtype`` (see the module
    docstring), or None for a dtype no table covers (float32)."""
    b, l, h, p, n, Q = dims
    if dtype not in _DTYPES:
        return None
    size = "large" if b * l * h >= table.large_work else "small"
    nchunks = -(-l // Q)
    if p > 64 or n > 128:
        layout = "wide"
    elif b * h < sm_count(torch.device(device)) and nchunks >= table.long_loop_chunks:
        layout = "long"
    else:
        layout = "one-tile"
    return f"{_DTYPES[dtype]}/{size}/{layout}/{'q<=128' if Q <= 128 else 'q>=256'}"


def segments_for(b: int, h: int, nchunks: int, table: TuningTable, device: torch.device | str = "cpu") -> int:
    """Segments of a segmented state stage on ``device``: the smallest power of two with b·h·segments >=
    segment_waves·SMs blocks, keeping at least min_segment_chunks chunks per segment (at least 2)."""
    sms = sm_count(torch.device(device))
    segments = 2
    while (b * h * segments < table.segment_waves * sms
           and nchunks // (2 * segments) >= table.min_segment_chunks):
        segments *= 2
    return segments


def with_segments(cfg: FastConfig, b: int, h: int, nchunks: int, table: TuningTable,
                  device: torch.device | str = "cpu") -> FastConfig:
    """``cfg`` with a segmented stage's ``segments=None`` ("the table's count for the problem") filled in by
    :func:`segments_for`; any other config as it is. The one place the count is filled in."""
    if isinstance(cfg.state, Segmented) and cfg.state.segments is None:
        state = dataclasses.replace(cfg.state, segments=segments_for(b, h, nchunks, table, device))
        return dataclasses.replace(cfg, state=state)
    return cfg


def ssd_config(b: int, l: int, h: int, p: int, n: int, Q: int, dtype: torch.dtype,
               device: torch.device | str = "cpu") -> FastConfig:
    """The config ``ssd_forward`` runs for this problem on ``device``: the table's config of its class, with a
    segmented stage's segment count filled in; :data:`~mamba2_tutorial.fast.config.TAUGHT` for float32."""
    table = table_for_device(torch.device(device))
    key = problem_class((b, l, h, p, n, Q), dtype, table, device)
    if key is None:
        return FastConfig()
    return with_segments(table.config(key), b, h, -(-l // Q), table, device)


# ----------------------------------------------------------------------------------------------------
# The backward's section of a table
# ----------------------------------------------------------------------------------------------------
def _backward_classes() -> list[str]:
    return [*_all_classes(), "float32"]


def _backward_from_json(where: str, raw: dict) -> tuple[dict, dict]:
    """``(backward configs by name, problem class -> name)`` of a table's ``backward`` section, checked as
    the forward's sections are: every config valid, every class (and float32) mapped to a defined config,
    every config used."""
    section = raw.get("backward")
    if not isinstance(section, dict) or set(section) != {"configs", "classes"}:
        raise ValueError(f"{where}: needs a 'backward' section with exactly 'configs' and 'classes' (the "
                         f"fast backward's settings per problem class), got {section!r}")
    return _section(where, "backward ", section, backward_config_from_json, _backward_classes())


def _section(where: str, what: str, section: dict, parse, all_classes: list[str]) -> tuple[dict, dict]:
    """``(configs by name, problem class -> name)`` of one section of a table (``what`` names it in errors),
    checked: every config valid (``parse``), every class of ``all_classes`` mapped to a defined config, every
    config used."""
    configs = {}
    for cname, value in section["configs"].items():
        try:
            configs[cname] = parse(value)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{where}: {what}config {cname!r}: {e}") from None
    classes = dict(section["classes"])
    missing = sorted(set(all_classes) - set(classes))
    unknown = sorted(set(classes) - set(all_classes))
    if missing or unknown:
        raise ValueError(f"{where}: {what}classes missing {missing}, unknown {unknown}")
    dangling = sorted({v for v in classes.values() if v not in configs})
    unused = sorted(set(configs) - set(classes.values()))
    if dangling or unused:
        raise ValueError(f"{where}: {what}classes name configs it does not define {dangling}; {what}configs "
                         f"no class uses {unused}")
    return configs, classes


def backward_config(b: int, l: int, h: int, p: int, n: int, Q: int, dtype: torch.dtype,
                    device: torch.device | str = "cpu") -> BackwardConfig:
    """The :class:`~mamba2_tutorial.fast.config.BackwardConfig` the fast backward runs for this problem on
    ``device``: its table's config of the problem's class (``float32``'s for float32)."""
    table = table_for_device(torch.device(device))
    key = problem_class((b, l, h, p, n, Q), dtype, table, device)
    return table.backward_config("float32" if key is None else key)

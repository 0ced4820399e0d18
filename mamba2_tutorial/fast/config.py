"""What the fast path runs for one problem: a state stage and a scan stage, each a small named type.

A :class:`FastConfig` is two choices. The **state stage** computes dt, its in-chunk cumsum and the state
entering every chunk:

- :class:`Unfused`: the taught kernels 1 and 2 (``chunk_state_kernel``, then ``state_passing_kernel``).
- :class:`Fused`: both in one launch (``fast/state_fused.py``): one block per (state tile, batch, head) walks
  the chunks in order, and the float32 chunk states never reach global memory.
- :class:`Segmented`: the fused stage cut into segments of the sequence that run side by side, for
  problems with fewer (batch, head) pairs than the GPU has SMs (``fast/segments.py``).

The **scan stage** computes each chunk's output:

- :class:`PlainScan`: the taught ``chunk_scan_kernel``.
- :class:`SharedScan`: C Bᵀ computed inside the block, 2-D mmas only (``fast/scan_shared.py``): small
  problems, where one launch fewer matters more than the arithmetic.
- :class:`ChunkScan`: C Bᵀ once per (chunk, group) by its own kernel, then one block per (head, chunk)
  walking all the chunk's row tiles (``fast/chunk_cb.py``, ``fast/scan_chunk.py``).

Combinations that cannot run are refused when the config is built (a segmented state stage needs the chunk
scan, which adds the segments' carry; storing the key-log2 form needs a scan that reads it). A config only
changes speed, never results (up to float32 rounding): ``tests/test_fast_path.py`` checks every shipped
config against the taught forward and the float64 reference. The configs that ship, per GPU and problem
size, are data: ``mamba2_tutorial/data/configs/*.json`` (:mod:`mamba2_tutorial.fast.tuning`).

The backward has its own config, :class:`BackwardConfig` (at the end of this module): the state-gradient
stage's and the chunk-gradient stage's settings, shipped in the same tables.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass

import torch

__all__ = ["CB_DTYPES", "FUSED_WALKS", "BackwardConfig", "ChunkGrads", "ChunkScan", "Decay", "FastConfig",
           "Fused", "PlainScan", "Segmented", "SharedScan", "StateForm", "StateGrads", "TAUGHT", "Unfused",
           "backward_config_from_json", "backward_config_to_json", "config_from_json", "config_to_json"]

#: the dtypes C Bᵀ may be stored in (:class:`ChunkScan`), by the names the JSON tables give them
CB_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class StateForm(enum.IntFlag):
    """How the fused and segmented state stages write each chunk's work (the kernels' ``FORM`` bits). Every
    form gives the same results up to float32 rounding; they differ in the code the compiler makes."""

    #: dt_out receives the key-log2 form kd = dA_cs·log2(e) − log2(dt) instead of dt (set from ``store_kd``)
    KD = 1
    #: the chunk's dt vector computed once, behind a layout anchor, not re-derived in the layout of the x·w
    #: product (which made the compiler redo the dt preprocessing on 64 elements per thread)
    DT_ONCE = 2
    #: the chunk's mma accumulates straight into the decayed running state, not into a zeroed tile
    ACC = 4


class Decay(enum.Enum):
    """How the chunk scan forms decay · dt for each (row m, key k) of a chunk."""

    #: exp(dA_cs_m − dA_cs_k) · dt_k, as the taught kernel does
    EXACT = "exact"
    #: exp2(a_m − kd_k) with kd_k = dA_cs_k·log2(e) − log2(dt_k): one subtraction and one exponential per
    #: element, no dt multiply, no clamp. Only valid when dt >= 0 (dt_limit's lower bound >= 0, the default);
    #: for other dt limits the forward falls back to EXACT
    KEY_LOG2 = "key_log2"


def _check_occupancy(owner: str, occupancy) -> None:
    if occupancy is not None and (type(occupancy) is not int or not 1 <= occupancy <= 8):
        raise ValueError(f"{owner}.occupancy must be None (the compiler's choice) or an int in 1..8 (blocks "
                         f"per SM the compiler budgets registers and shared memory for), got {occupancy!r}")


def _check_power_of_two(owner: str, what: str, value, low: int) -> None:
    if type(value) is not int or value < low or value & (value - 1):
        raise ValueError(f"{owner}: {what} must be a power of two >= {low}, got {value!r}")


@dataclass(frozen=True)
class Unfused:
    """Kernels 1 and 2 as taught: ``chunk_state_kernel`` (at ``occupancy``), then ``state_passing_kernel``."""

    occupancy: int | None = None

    def __post_init__(self):
        _check_occupancy("Unfused", self.occupancy)


def _check_walk(stage) -> None:
    """The fields :class:`Fused` and :class:`Segmented` share (one walk over the chunks per block)."""
    name = type(stage).__name__
    _check_occupancy(name, stage.occupancy)
    if not isinstance(stage.state_tile, tuple) or len(stage.state_tile) != 2:
        raise ValueError(f"{name}.state_tile must be (TP, TN), the state tile of one block (the chunk rows "
                         f"per mma step are mma_rows), got {stage.state_tile!r}")
    for what, value in zip(("TP", "TN"), stage.state_tile):
        _check_power_of_two(f"{name}.state_tile", what, value, 16)
    if stage.mma_rows is not None:
        _check_power_of_two(name, "mma_rows (None: the default)", stage.mma_rows, 16)
    if not isinstance(stage.form, StateForm) or StateForm.KD in stage.form:
        raise ValueError(f"{name}.form must be a StateForm of DT_ONCE and ACC (kd is asked for with "
                         f"store_kd), got {stage.form!r}")
    if type(stage.store_kd) is not bool:
        raise ValueError(f"{name}.store_kd must be a bool, got {stage.store_kd!r}")


@dataclass(frozen=True)
class Fused:
    """Kernels 1 and 2 in one launch. ``state_tile`` = (TP, TN), the state tile of one block; ``mma_rows``
    (TK): the chunk rows per mma step (None: the whole chunk, up to 256, for 16-bit inputs; float32 takes
    chunk_state's 64); ``form``: a :class:`StateForm` of DT_ONCE and ACC; ``store_kd``: the stage stores the
    key-log2 form kd in place of dt, for a :class:`ChunkScan` with :attr:`Decay.KEY_LOG2` (no separate kd
    launch)."""

    state_tile: tuple = (64, 128)
    mma_rows: int | None = None
    occupancy: int | None = None
    form: StateForm = StateForm(0)
    store_kd: bool = False

    def __post_init__(self):
        _check_walk(self)


@dataclass(frozen=True)
class Segmented:
    """The fused stage by segments of the sequence: b·h·segments blocks each walk cdiv(nchunks, segments)
    chunks, state passing carries the state across the segments, and the chunk scan adds each segment's
    carry. ``state_tile``, ``mma_rows``, ``occupancy``, ``form`` and ``store_kd`` as :class:`Fused`'s (not a
    subclass of it: where both are meant, :data:`FUSED_WALKS` says so). ``segments`` None: the tuning table's
    rule picks it per problem size."""

    state_tile: tuple = (64, 128)
    mma_rows: int | None = None
    occupancy: int | None = None
    form: StateForm = StateForm(0)
    store_kd: bool = False
    segments: int | None = None

    def __post_init__(self):
        _check_walk(self)
        if self.segments is not None and (type(self.segments) is not int or self.segments < 2):
            raise ValueError(f"Segmented.segments must be None (chosen per problem size) or an int >= 2, "
                             f"got {self.segments!r}")


#: the state stages that walk the chunks in one launch, the float32 chunk states kept on chip (``state_tile``,
#: ``mma_rows``, ``form``, ``store_kd``): ``isinstance(stage, FUSED_WALKS)`` where both are meant
FUSED_WALKS = (Fused, Segmented)


@dataclass(frozen=True)
class PlainScan:
    """The taught ``chunk_scan_kernel``: one block per (row tile, chunk, head), C Bᵀ computed in the block."""


@dataclass(frozen=True)
class SharedScan:
    """``chunk_scan_shared_kernel``: C Bᵀ computed in the block, 2-D mmas (wgmma on sm_90), one head per
    block, at ``occupancy``."""

    occupancy: int | None = None

    def __post_init__(self):
        _check_occupancy("SharedScan", self.occupancy)


@dataclass(frozen=True)
class ChunkScan:
    """C Bᵀ by its own kernel, stored in ``cb_dtype`` (``torch.bfloat16`` or ``torch.float16`` halves the
    scan's largest reads; for 16-bit inputs only: float32 inputs keep a float32 C Bᵀ; the JSON tables write
    "float32", "bfloat16" or "float16"; float16 keeps 3 more bits than bfloat16 but overflows where an
    element |C_m · B_k| exceeds 65504), then one block per (head, chunk) walking every row tile of the chunk
    at ``occupancy``; ``decay``: see :class:`Decay`; ``unroll``: a full chunk's row and key tiles as one
    unrolled body, no loops (pays at chunk size 128)."""

    cb_dtype: torch.dtype = torch.float32
    decay: Decay = Decay.EXACT
    unroll: bool = False
    occupancy: int | None = None

    def __post_init__(self):
        _check_occupancy("ChunkScan", self.occupancy)
        if not isinstance(self.cb_dtype, torch.dtype) or self.cb_dtype not in CB_DTYPES.values():
            raise ValueError(f"ChunkScan.cb_dtype must be torch.float32, torch.bfloat16 or torch.float16 (in "
                             f"JSON 'float32', 'bfloat16' or 'float16'), got {self.cb_dtype!r}")
        if not isinstance(self.decay, Decay):
            raise ValueError(f"ChunkScan.decay must be a Decay, got {self.decay!r}")
        if type(self.unroll) is not bool:
            raise ValueError(f"ChunkScan.unroll must be a bool, got {self.unroll!r}")


StateStage = Unfused | Fused | Segmented
ScanStage = PlainScan | SharedScan | ChunkScan


@dataclass(frozen=True)
class FastConfig:
    """One state stage and one scan stage (see the module docstring). ``FastConfig()`` is :data:`TAUGHT`."""

    state: StateStage = Unfused()
    scan: ScanStage = PlainScan()

    def __post_init__(self):
        if not isinstance(self.state, (Unfused, *FUSED_WALKS)):
            raise TypeError(f"FastConfig.state must be Unfused, Fused or Segmented, got {self.state!r}")
        if not isinstance(self.scan, (PlainScan, SharedScan, ChunkScan)):
            raise TypeError(f"FastConfig.scan must be PlainScan, SharedScan or ChunkScan, got {self.scan!r}")
        if isinstance(self.state, Segmented) and not isinstance(self.scan, ChunkScan):
            raise ValueError("a Segmented state stage needs ChunkScan, the scan that adds each segment's "
                             f"carry; got {self.scan!r}")
        if isinstance(self.state, FUSED_WALKS) and self.state.store_kd and not (
                isinstance(self.scan, ChunkScan) and self.scan.decay is Decay.KEY_LOG2):
            raise ValueError("store_kd (the state stage stores the key-log2 form) needs "
                             f"ChunkScan(decay=Decay.KEY_LOG2), the scan that reads it; got {self.scan!r}")


#: the taught path: kernels 1, 2 and 3 exactly as notebooks 05-07 teach them
TAUGHT = FastConfig()

_STATES = {"unfused": Unfused, "fused": Fused, "segmented": Segmented}
_SCANS = {"plain": PlainScan, "shared": SharedScan, "chunk": ChunkScan}


def _json_fields(cls) -> list[str]:
    """The JSON names of a stage's fields: a walk's ``state_tile`` and ``mma_rows`` are one list ``tiles``,
    [TP, TN] or [TP, TN, TK], as the shipped tables write them."""
    names = [f.name for f in dataclasses.fields(cls)]
    if cls in FUSED_WALKS:
        names[names.index("state_tile")] = "tiles"
        names.remove("mma_rows")
    return names


def _stage_to_json(kinds: dict, stage) -> dict:
    kind = next(k for k, cls in kinds.items() if type(stage) is cls)
    out = {"kind": kind}
    for name in _json_fields(type(stage)):
        if name == "tiles":
            value = [*stage.state_tile] + ([] if stage.mma_rows is None else [stage.mma_rows])
        else:
            value = getattr(stage, name)
        if isinstance(value, StateForm):
            value = sorted(m.name for m in StateForm if m in value)
        elif isinstance(value, Decay):
            value = value.value
        elif isinstance(value, torch.dtype):
            value = next(k for k, v in CB_DTYPES.items() if v == value)
        out[name] = value
    return out


def config_to_json(cfg: FastConfig) -> dict:
    """``cfg`` as plain JSON values: ``{"state": {"kind": ..., fields}, "scan": {"kind": ..., fields}}``."""
    return {"state": _stage_to_json(_STATES, cfg.state), "scan": _stage_to_json(_SCANS, cfg.scan)}


def _stage_from_json(kinds: dict, where: str, value) -> object:
    if not isinstance(value, Mapping) or value.get("kind") not in kinds:
        raise ValueError(f"{where} must be an object with a 'kind' of {sorted(kinds)}, got {value!r}")
    cls = kinds[value["kind"]]
    fields = set(_json_fields(cls))
    unknown = sorted(set(value) - fields - {"kind"})
    if unknown:
        raise ValueError(f"{where}: {cls.__name__} has no fields {unknown}; its fields are {sorted(fields)}")
    kw = dict(value)
    del kw["kind"]
    if "form" in kw:
        names = kw["form"]
        if not isinstance(names, list) or any(n not in StateForm.__members__ or n == "KD" for n in names):
            raise ValueError(f"{where}.form must be a list of 'DT_ONCE' and 'ACC', got {names!r}")
        form = StateForm(0)
        for n in names:
            form |= StateForm[n]
        kw["form"] = form
    if "decay" in kw:
        kw["decay"] = Decay(kw["decay"])
    if "cb_dtype" in kw:
        if kw["cb_dtype"] not in CB_DTYPES:
            raise ValueError(f"{where}.cb_dtype must be one of {sorted(CB_DTYPES)}, got {kw['cb_dtype']!r}")
        kw["cb_dtype"] = CB_DTYPES[kw["cb_dtype"]]
    if "tiles" in kw:
        tiles = kw.pop("tiles")
        if not isinstance(tiles, list) or len(tiles) not in (2, 3):
            raise ValueError(f"{where}.tiles must be [TP, TN] or [TP, TN, TK], got {tiles!r}")
        kw["state_tile"] = tuple(tiles[:2])
        kw["mma_rows"] = tiles[2] if len(tiles) == 3 else None
    return cls(**kw)


def config_from_json(value: Mapping) -> FastConfig:
    """The :class:`FastConfig` of :func:`config_to_json`'s dict; an unknown kind or field is an error."""
    if not isinstance(value, Mapping) or set(value) != {"state", "scan"}:
        raise ValueError(f"a FastConfig is an object with exactly 'state' and 'scan', got {value!r}")
    return FastConfig(_stage_from_json(_STATES, "state", value["state"]),
                      _stage_from_json(_SCANS, "scan", value["scan"]))


# ----------------------------------------------------------------------------------------------------
# The backward: what ``ssd_backward_fast`` (``fast/backward.py``) runs for one problem
# ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StateGrads:
    """Backward kernels 1 and 2. Fused in one launch (``fast/bwd_states.py``) where that launch has at least
    ``min_fused_blocks_per_sm`` blocks per SM (0: always), else the taught kernels 1 and 2, which are
    parallel over the chunks where the fused blocks each walk all of them. ``tiles`` = (TP, TN, TK): a fused
    block's state tile and the rows of dy and C per mma step; ``occupancy``: the fused kernel's hint."""

    tiles: tuple = (64, 64, 64)
    occupancy: int | None = 2
    min_fused_blocks_per_sm: int = 1

    def __post_init__(self):
        _check_occupancy("StateGrads", self.occupancy)
        if not isinstance(self.tiles, tuple) or len(self.tiles) != 3:
            raise ValueError(f"StateGrads.tiles must be (TP, TN, TK), got {self.tiles!r}")
        for what, value in zip(("TP", "TN", "TK"), self.tiles):
            _check_power_of_two("StateGrads.tiles", what, value, 16)
        if type(self.min_fused_blocks_per_sm) is not int or self.min_fused_blocks_per_sm < 0:
            raise ValueError("StateGrads.min_fused_blocks_per_sm must be an int >= 0 (0: the fused stage "
                             f"always), got {self.min_fused_blocks_per_sm!r}")


@dataclass(frozen=True)
class ChunkGrads:
    """Backward kernels 3 and 4 (``fast/bwd_chunk.py``), each block walking several heads of one group: at
    most ``max_heads_per_block``, and fewer where the grid would make fewer than ``min_waves`` waves of
    blocks (SMs × ``occupancy`` each); ``occupancy``: the hint of both kernels."""

    occupancy: int | None = 2
    max_heads_per_block: int = 16
    min_waves: int = 2

    def __post_init__(self):
        _check_occupancy("ChunkGrads", self.occupancy)
        if type(self.max_heads_per_block) is not int or self.max_heads_per_block < 1:
            raise ValueError(f"ChunkGrads.max_heads_per_block must be an int >= 1, got "
                             f"{self.max_heads_per_block!r}")
        if type(self.min_waves) is not int or self.min_waves < 0:
            raise ValueError(f"ChunkGrads.min_waves must be an int >= 0 (0: no wave rule), got "
                             f"{self.min_waves!r}")


@dataclass(frozen=True)
class BackwardConfig:
    """The fast backward of one problem: its state stage, its chunk stage, and ``overlap``: on a GPU, C Bᵀ
    and kernel 4 (which need no state gradient) run on a second stream beside the state stage. A config
    changes speed, never results (``tests/test_fast_backward.py`` checks the overlap bit for bit)."""

    state: StateGrads = StateGrads()
    chunk: ChunkGrads = ChunkGrads()
    overlap: bool = True

    def __post_init__(self):
        if not isinstance(self.state, StateGrads):
            raise TypeError(f"BackwardConfig.state must be a StateGrads, got {self.state!r}")
        if not isinstance(self.chunk, ChunkGrads):
            raise TypeError(f"BackwardConfig.chunk must be a ChunkGrads, got {self.chunk!r}")
        if type(self.overlap) is not bool:
            raise ValueError(f"BackwardConfig.overlap must be a bool, got {self.overlap!r}")


def backward_config_to_json(cfg: BackwardConfig) -> dict:
    """``cfg`` as plain JSON values: ``{"state": {fields}, "chunk": {fields}, "overlap": bool}``."""
    def fields(stage) -> dict:
        return {f.name: list(v) if isinstance(v := getattr(stage, f.name), tuple) else v
                for f in dataclasses.fields(stage)}
    return {"state": fields(cfg.state), "chunk": fields(cfg.chunk), "overlap": cfg.overlap}


def backward_config_from_json(value: Mapping) -> BackwardConfig:
    """The :class:`BackwardConfig` of :func:`backward_config_to_json`'s dict; a missing or unknown field is
    an error."""
    if not isinstance(value, Mapping) or set(value) != {"state", "chunk", "overlap"}:
        raise ValueError(f"a BackwardConfig is an object with exactly 'state', 'chunk' and 'overlap', got "
                         f"{value!r}")
    stages = {}
    for key, cls in (("state", StateGrads), ("chunk", ChunkGrads)):
        names = {f.name for f in dataclasses.fields(cls)}
        raw = value[key]
        if not isinstance(raw, Mapping) or set(raw) != names:
            raise ValueError(f"backward {key} must be an object with exactly the fields {sorted(names)} of "
                             f"{cls.__name__}, got {raw!r}")
        kw = dict(raw)
        if isinstance(kw.get("tiles"), list):
            kw["tiles"] = tuple(kw["tiles"])
        stages[key] = cls(**kw)
    return BackwardConfig(stages["state"], stages["chunk"], value["overlap"])

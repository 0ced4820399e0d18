"""``ssd_forward``: the Mamba-2 SSD forward pass as three cuTile kernels.

The same function as ``mamba_ssm.ops.triton.ssd_combined.mamba_chunk_scan_combined`` (forward), with the same
arguments, semantics and return convention, so one can replace the other::

    dt_out, dA_cumsum, states = chunk_state_fwd(...)      kernel 1   per (chunk, head): parallel
    chunk_init_states, final  = state_passing_fwd(...)    kernel 2   per (batch, head): sequential over chunks
    out                       = chunk_scan_fwd(...)       kernel 3   per (chunk, head): parallel

Shapes: x (b, l, h, p), dt (b, l, h), A (h,), B and C (b, l, g, n), D (h,) or (h, p), z (b, l, h, p),
dt_bias (h,), initial_states (b, h, p, n). Intermediates: dt_out and dA_cumsum (b, h, nchunks, Q) float32,
states (b, nchunks, h, p, n) float32, chunk_init_states (b, nchunks, h, p, n) in x's dtype (the dtype kernel 3
rounds the state to before its mma, so storing it narrower costs no accuracy and halves its traffic).

``backend="auto"`` runs on the GPU when one is usable and on the CPU tile executor otherwise
(:func:`mamba2_tutorial.backends.select_backend`); ``"gpu"`` or ``"cpu"`` force one.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import torch

from .kernels._host import (
    LaunchPlan,
    allocate,
    cdiv,
    check_chunk_size,
    check_kernel_dtype,
    resolve_backend,
    strided_ok,
)
from .kernels.chunk_scan import chunk_scan_fwd, chunk_scan_plan, launch_chunk_scan
from .kernels.chunk_scan_cb import chunk_scan_cb_plan, launch_chunk_cb
from .kernels.chunk_state import (
    chunk_state_fwd,
    chunk_state_plan,
    launch_chunk_state,
    launch_chunk_state_passing,
)
from .kernels.configs import SSDConfig, ssd_config
from .kernels.segments import launch_chunk_state_segments
from .kernels.state_passing import launch_state_passing, state_passing_fwd, state_passing_plan

__all__ = ["chunk_scan_fwd", "chunk_state_fwd", "ssd_forward", "ssd_plan", "ssd_stages", "state_passing_fwd"]

_INT32_MAX = 2**31 - 1


#: argument metadata (types, shapes, dtypes, devices, chunk_size, dt_limit) of calls that passed validation
_VALIDATED: dict = {}


def _metadata(tensors, chunk_size, dt_limit):
    """A hashable description of everything validation looks at, or None if some argument is not a tensor."""
    key = [chunk_size if type(chunk_size) is int else None,
           tuple(dt_limit) if type(dt_limit) is tuple else None]
    for t in tensors:
        if t is None:
            key.append(None)
        elif isinstance(t, torch.Tensor):
            key.append((t.shape, t.dtype, t.device))
        else:
            return None
    return None if None in key[:2] else tuple(key)


def _validate(x, dt, A, B, C, chunk_size, D, z, dt_bias, initial_states, dt_limit):
    """validate_ssd_inputs plus the kernels' own limits; a repeat of an already validated argument set (same
    shapes, dtypes, devices, chunk_size, dt_limit) is recognized from its metadata and not checked again."""
    key = _metadata((x, dt, A, B, C, D, z, dt_bias, initial_states), chunk_size, dt_limit)
    if key is not None and key in _VALIDATED:
        return _VALIDATED[key]
    from .validation import validate_ssd_inputs

    dims = validate_ssd_inputs(
        x, dt, A, B, C, chunk_size=chunk_size, D=D, z=z, dt_bias=dt_bias, initial_states=initial_states,
        dt_limit=dt_limit,
    )
    check_kernel_dtype("x", x)
    check_chunk_size(chunk_size)
    for name, t in (("x", x), ("z", z), ("B", B), ("C", C)):
        if t is not None and t.numel() > _INT32_MAX:
            raise ValueError(f"{name} has {t.numel()} elements; the kernels index with int32 (< 2**31)")
    if key is not None:
        if len(_VALIDATED) > 1024:
            _VALIDATED.clear()
        _VALIDATED[key] = dims
    return dims


@functools.lru_cache(maxsize=8)
def _side_stream(device: torch.device):
    """One side CUDA stream per device, reused by every call (creating a stream costs host time)."""
    return torch.cuda.Stream(device)


def _cb_early(x, C, B, chunk_size, cfg, where, poison):
    """C Bᵀ launched before the state stage (``SSDConfig.scan_cb_early``): ``(CB, side stream or None)``.

    On the GPU it runs on a side stream forked from the current one, so that its blocks can fill the SMs the
    state stage leaves idle; the caller makes the current stream wait for the side stream before the scan.
    On the CPU executor the launches run one after another anyway: it is simply launched first."""
    b, l, h, p = x.shape
    g, n = C.shape[2], C.shape[3]
    t = chunk_scan_cb_plan(b, l, h, p, g, n, chunk_size, x.dtype, cfg.scan_heads, cfg.scan_tiles).tiles
    cb_dtype = torch.bfloat16 if cfg.scan_cb_bf16 and x.dtype != torch.float32 else torch.float32
    if where != "gpu":
        return launch_chunk_cb(C, B, chunk_size, t["TM"], t["TK"], where, poison, cfg.scan_cb_hints,
                               cb_dtype=cb_dtype), None
    main = torch.cuda.current_stream(x.device)
    side = _side_stream(x.device)
    side.wait_stream(main)  # C and B are ready on the main stream
    with torch.cuda.stream(side):
        CB = launch_chunk_cb(C, B, chunk_size, t["TM"], t["TK"], where, poison, cfg.scan_cb_hints,
                             cb_dtype=cb_dtype)
    CB.record_stream(main)  # the allocator must not hand CB's memory out again before the scan has read it
    return CB, side


@functools.lru_cache(maxsize=8)
def _sm_count(device: torch.device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


def tail_heads(b, h, g, tiles_per_head, cfg, device, dt_itemsize) -> int | None:
    """``SSDConfig.state_tail``: the first head whose fused-stage blocks would run in the last, partial wave
    (blocks are dispatched state tile first, then batch (and segment), then head; ``tiles_per_head`` counts
    a head's blocks per batch row), or None when the blocks fill whole waves, or fewer than one wave.
    Slots: ``state_tail[2]``, else the GPU's SMs (132, an H200's, on the CPU) times the fused stage's
    occupancy hint. The split is rounded down to a multiple of 16 bytes of dt (so that the tail's views keep
    dt's alignment) and, with several groups, of the heads per group."""
    from .kernels.configs import SMS

    tail = cfg.state_tail
    if len(tail) > 2:
        slots = tail[2]
    else:
        sms = _sm_count(device) if device.type == "cuda" else SMS
        slots = sms * (cfg.state_hints[0] or 1)
    per_head = b * tiles_per_head
    full = (h * per_head) // slots * slots
    if full == 0 or full == h * per_head:
        return None
    step = 16 // dt_itemsize
    if g > 1:
        step = step * (h // g) // math.gcd(step, h // g)
    h0 = full // per_head // step * step
    return h0 if 0 < h0 < h else None


def _segments_tail(x, B, dt, chunk_size, cfg):
    """``SSDConfig.state_tail`` for the segmented stage: ``(h0, tiles, hints)`` for
    ``launch_chunk_state_segments``, or None (no tail config, or no partial last wave)."""
    if cfg.state_tail is None:
        return None
    from .kernels.segments import segments_plan

    b, l, h, p = x.shape
    g, n = B.shape[2], B.shape[3]
    plan = segments_plan(b, l, h, p, n, chunk_size, x.dtype, cfg.segments, cfg.state_tiles)
    h0 = tail_heads(b, h, g, plan.grid[0] * plan.tiles["nseg"], cfg, x.device, dt.element_size())
    return None if h0 is None else (h0, *cfg.state_tail[:2])


def _fused_with_tail(x, dt, A, B, chunk_size, dt_bias, dt_softplus, dt_limit, initial_states, where, poison,
                     cfg, key_log2):
    """The fused state stage in two launches (``SSDConfig.state_tail``): the heads that fill whole waves
    with the configured tiles and hints, the rest with the tail's, both writing into views of the same
    outputs. One launch when :func:`tail_heads` finds no partial wave."""
    from .kernels.chunk_state import chunk_state_passing_plan

    b, l, h, p = x.shape
    g, n = B.shape[2], B.shape[3]
    Q = chunk_size
    common = dict(latency=cfg.state_latency, key_log2=key_log2, form=cfg.state_form)
    tiles_per_head = chunk_state_passing_plan(b, l, h, p, n, Q, x.dtype, cfg.state_tiles).grid[0]
    h0 = tail_heads(b, h, g, tiles_per_head, cfg, x.device, dt.element_size())
    if h0 is None:
        return launch_chunk_state_passing(x, dt, A, B, Q, dt_bias, dt_softplus, dt_limit, initial_states,
                                          where, poison, tiles=cfg.state_tiles, hints=cfg.state_hints,
                                          **common)
    nchunks = cdiv(l, Q)
    outs = (allocate((b, h, nchunks, Q), torch.float32, x.device, poison),
            allocate((b, h, nchunks, Q), torch.float32, x.device, poison),
            allocate((b, nchunks, h, p, n), x.dtype, x.device, poison),
            allocate((b, h, p, n), torch.float32, x.device, poison))
    hpg = h // g
    for lo, hi, tiles, hints in ((0, h0, cfg.state_tiles, cfg.state_hints),
                                 (h0, h, cfg.state_tail[0], cfg.state_tail[1])):
        heads = slice(lo, hi)
        views = (x[:, :, heads], dt[:, :, heads], A[heads], B if g == 1 else B[:, :, lo // hpg:hi // hpg], Q,
                 None if dt_bias is None else dt_bias[heads], dt_softplus, dt_limit,
                 None if initial_states is None else initial_states[:, heads], where)
        part = (outs[0][:, heads], outs[1][:, heads], outs[2][:, :, heads], outs[3][:, heads])
        if lo and cfg.state_tail_segments > 1:  # the tail's chains by segments, then fixed up in place
            launch_chunk_state_segments(*views, cfg.state_tail_segments, poison, tiles=tiles, hints=hints,
                                        fixup=True, outs=part, **common)
        else:
            launch_chunk_state_passing(*views, poison, tiles=tiles, hints=hints, outs=part, **common)
    return outs


@functools.lru_cache(maxsize=8)
def _part_streams(device: torch.device, k: int):
    """k side CUDA streams per device for the batch parts (``SSDConfig.batch_streams``), reused."""
    return tuple(torch.cuda.Stream(device) for _ in range(k))


def _by_batch_parts(x, dt, A, B, C, chunk_size, where, cfg, return_final_states, _poison, **options):
    """``SSDConfig.batch_streams``: the batch cut into k parts, each part's forward (``ssd_forward`` with one
    part) on its own side CUDA stream, forked from the current stream and joined back, so that one part's
    scan can run on the SMs another part's state stage leaves idle. With ``batch_stagger`` each part's state
    stage waits for the previous part's. On the CPU executor the parts run one after another. Same results
    as one part: every kernel treats batch elements independently. ``options``: D, z, dt_bias,
    initial_states, dt_softplus, dt_limit."""
    b, l, h, p = x.shape
    n = B.shape[3]
    k = min(cfg.batch_streams, b)
    parts = [(i * b // k, (i + 1) * b // k) for i in range(k)]
    one = dataclasses.replace(cfg, batch_streams=1, batch_stagger=False)
    out = allocate((b, l, h, p), x.dtype, x.device, _poison)
    final_states = allocate((b, h, p, n), torch.float32, x.device, _poison) if return_final_states else None
    per_batch = ("z", "initial_states")  # the optional inputs with a batch dimension

    def part(lo, hi, after_state=None):
        opts = {key: (v[lo:hi] if key in per_batch and v is not None else v) for key, v in options.items()}
        res = ssd_forward(x[lo:hi], dt[lo:hi], A, B[lo:hi], C[lo:hi], chunk_size, **opts, backend=where,
                          return_final_states=return_final_states, _poison=_poison, _config=one,
                          _out=out[lo:hi], _after_state=after_state)
        if return_final_states:
            final_states[lo:hi].copy_(res[1])

    if where != "gpu":
        for lo, hi in parts:
            part(lo, hi)
    else:
        main = torch.cuda.current_stream(x.device)
        streams = _part_streams(x.device, k)
        for s in streams:
            s.wait_stream(main)  # the inputs are ready on the current stream
        done = None  # the previous part's state stage (batch_stagger)
        for (lo, hi), s in zip(parts, streams):
            with torch.cuda.stream(s):
                if cfg.batch_stagger and done is not None:
                    s.wait_event(done)
                mark = torch.cuda.Event() if cfg.batch_stagger else None
                part(lo, hi, None if mark is None else (lambda m=mark, st=s: m.record(st)))
                done = mark
        for s in streams:
            main.wait_stream(s)  # out and final_states are complete on the current stream
    return (out, final_states) if return_final_states else out


def ssd_forward(x, dt, A, B, C, chunk_size, *, D=None, z=None, dt_bias=None, initial_states=None,
                dt_softplus=False, dt_limit=(0.0, float("inf")), return_final_states=False, backend="auto",
                _poison=False, _config=None, _out=None, _after_state=None):
    """Mamba-2 SSD forward with the three cuTile kernels: ``out`` or ``(out, final_states)``.

    Arguments and results as ``mamba_chunk_scan_combined``: out (b, l, h, p) in x's dtype; final_states
    (b, h, p, n) float32. x, B, C (and z) must share one dtype: float32, float16 or bfloat16 (mma operands;
    every product accumulates in float32). ``chunk_size`` (Q) must be a power of two; the sequence length l is
    arbitrary (the last chunk may be ragged). All arguments are checked before any kernel runs.

    ``_poison`` (tests only) fills every intermediate and output with NaN before the kernels run, so that an
    element no block wrote shows up in the result. ``_config`` (tuning) overrides the
    :func:`~mamba2_tutorial.kernels.configs.ssd_config` chosen for this size: tiles, hints, and whether
    kernels 1 and 2 run fused as one. ``_out`` and ``_after_state`` serve the batch parts
    (``SSDConfig.batch_streams``): the output buffer to write, and a call made right after the state stage.
    """
    b, l, h, p, g, n = _validate(x, dt, A, B, C, chunk_size, D, z, dt_bias, initial_states, dt_limit)
    where = resolve_backend(backend, x)
    cfg = _config if _config is not None else ssd_config(b, l, h, p, g, n, chunk_size, x.dtype)
    if min(cfg.batch_streams, b) > 1:  # the batch in parts, each on its own CUDA stream
        return _by_batch_parts(x, dt, A, B, C, chunk_size, where, cfg, return_final_states, _poison, D=D, z=z,
                               dt_bias=dt_bias, initial_states=initial_states, dt_softplus=dt_softplus,
                               dt_limit=dt_limit)

    x, dt, A, B, C, D, z, dt_bias, initial_states = (
        strided_ok(t) for t in (x, dt, A, B, C, D, z, dt_bias, initial_states))

    # the states entering each chunk are stored in x's dtype: kernel 3 rounds them to it for its mma anyway
    carry = None
    # the scan's decay form; the factored forms need dt >= 0 (a monotone cumsum), which dt_limit guarantees
    form = cfg.scan_factored if min(dt_limit) >= 0 else 0
    # the key-log2 form: kd = dA_cs·log2(e) - log2(dt), stored by the state stage in place of dt_out, or
    # computed by the scan's own small kernel
    key_log2 = form == 3 and cfg.state_key_log2
    CB = side = None
    if cfg.scan_cb_early:  # C Bᵀ first (on the GPU on a side stream, overlapping the state stage)
        CB, side = _cb_early(x, C, B, chunk_size, cfg, where, _poison)
    if cfg.segments > 1:  # kernels 1 and 2 fused, by segments; the scan adds each segment's carry
        dt_out, dA_cumsum, chunk_init_states, final_states, carry = launch_chunk_state_segments(
            x, dt, A, B, chunk_size, dt_bias, dt_softplus, dt_limit, initial_states, where, cfg.segments,
            _poison, tiles=cfg.state_tiles, hints=cfg.state_hints, latency=cfg.state_latency,
            key_log2=key_log2, form=cfg.state_form, tail=_segments_tail(x, B, dt, chunk_size, cfg),
            fixup=cfg.segment_fixup)
    elif cfg.fused and cfg.state_tail is not None:  # the fused stage as whole waves, then its tail
        dt_out, dA_cumsum, chunk_init_states, final_states = _fused_with_tail(
            x, dt, A, B, chunk_size, dt_bias, dt_softplus, dt_limit, initial_states, where, _poison, cfg,
            key_log2)
    elif cfg.fused:  # kernels 1 and 2 as one launch: the float32 chunk states stay on chip
        dt_out, dA_cumsum, chunk_init_states, final_states = launch_chunk_state_passing(
            x, dt, A, B, chunk_size, dt_bias, dt_softplus, dt_limit, initial_states, where, _poison,
            tiles=cfg.state_tiles, hints=cfg.state_hints, latency=cfg.state_latency, heads=cfg.state_heads,
            key_log2=key_log2, form=cfg.state_form)
    else:
        dt_out, dA_cumsum, states = launch_chunk_state(
            x, dt, A, B, chunk_size, dt_bias, dt_softplus, dt_limit, where, _poison, hints=cfg.state_hints)
        chunk_init_states, final_states = launch_state_passing(
            states, dA_cumsum, initial_states, where, _poison, out_dtype=x.dtype, tiles=cfg.state_tiles,
            hints=cfg.passing_hints)
    if _after_state is not None:
        _after_state()
    if side is not None:
        torch.cuda.current_stream(x.device).wait_stream(side)
    out = launch_chunk_scan(x, dt_out, dA_cumsum, C, B, chunk_init_states, D, z, where, out=_out,
                            poison=_poison, max_heads_per_block=cfg.scan_heads, tiles=cfg.scan_tiles,
                            hints=cfg.scan_hints, latency=cfg.scan_latency, factored=form,
                            heads_2d=cfg.scan_2d, shared=cfg.scan_shared, cb=cfg.scan_cb,
                            whole_chunk=cfg.scan_chunk,
                            cb_bf16=cfg.scan_cb_bf16 and x.dtype != torch.float32, carry=carry,
                            unroll=cfg.scan_unroll, head_loop=cfg.scan_head_loop, kd_ready=key_log2,
                            row_group=cfg.scan_row_group if form == 3 else 1, CB=CB,
                            cb_hints=cfg.scan_cb_hints)
    return (out, final_states) if return_final_states else out


def ssd_stages(x, dt, A, B, C, chunk_size, *, backend="gpu", config: SSDConfig | None = None) -> dict:
    """The launches of ``ssd_forward`` (no D, z, dt_bias, initial states) as separately callable stages.

    Returns ``{stage name: callable}`` in the order ``ssd_forward`` runs them: ``"chunk_state"`` and
    ``"state_passing"``, or ``"chunk_state_passing"`` when the config fuses them (by segments: that stage is
    its two launches, the segments then state passing over them), then ``"chunk_scan"``.
    Each stage's inputs are made once, here, by running the stages before it, so each callable times one
    kernel alone (the benchmark's per-kernel breakdown; with ``scan_cb`` the ``"chunk_scan"`` stage is its
    two launches, C Bᵀ then the scan). Also ``"chain"`` (all stages, returns y) and
    ``"meta"`` (element sizes of the chunk states and the entering states; ``"fused"``: True when the config
    fuses the first two kernels), the keyword arguments of ``roofline.kernel_costs`` for these stages.
    The stream levers (``scan_cb_early``, ``batch_streams``) act in ``"chain"`` only: each stage is timed
    alone, on one stream, for the whole batch.
    """
    b, l, h, p, g, n = _validate(x, dt, A, B, C, chunk_size, None, None, None, None, (0.0, float("inf")))
    where = resolve_backend(backend, x)
    cfg = config if config is not None else ssd_config(b, l, h, p, g, n, chunk_size, x.dtype)
    x, dt, A, B, C = (strided_ok(t) for t in (x, dt, A, B, C))
    lim = (0.0, float("inf"))
    stages: dict = {}
    carry = None
    if cfg.segments > 1:
        def fused():  # the segmented stage's two launches: the segments, then state passing over them
            return launch_chunk_state_segments(x, dt, A, B, chunk_size, None, False, lim, None, where,
                                               cfg.segments, tiles=cfg.state_tiles, hints=cfg.state_hints,
                                               latency=cfg.state_latency, key_log2=cfg.state_key_log2,
                                               form=cfg.state_form,
                                               tail=_segments_tail(x, B, dt, chunk_size, cfg),
                                               fixup=cfg.segment_fixup)
        dt_out, dA_cumsum, init, _, carry = fused()
        stages["chunk_state_passing"] = fused
        meta = {"state_bytes": 0, "init_state_bytes": init.element_size(), "fused": True}
    elif cfg.fused:
        def fused():
            if cfg.state_tail is not None:  # whole waves, then the last wave's heads (state_tail)
                return _fused_with_tail(x, dt, A, B, chunk_size, None, False, lim, None, where, False, cfg,
                                        cfg.state_key_log2)
            return launch_chunk_state_passing(x, dt, A, B, chunk_size, None, False, lim, None, where,
                                              tiles=cfg.state_tiles, hints=cfg.state_hints,
                                              latency=cfg.state_latency, heads=cfg.state_heads,
                                              key_log2=cfg.state_key_log2, form=cfg.state_form)
        dt_out, dA_cumsum, init, _ = fused()
        stages["chunk_state_passing"] = fused
        meta = {"state_bytes": 0, "init_state_bytes": init.element_size(), "fused": True}
    else:
        def stage1():
            return launch_chunk_state(x, dt, A, B, chunk_size, None, False, lim, where, hints=cfg.state_hints)
        dt_out, dA_cumsum, states = stage1()

        def stage2():
            return launch_state_passing(states, dA_cumsum, None, where, out_dtype=x.dtype,
                                        tiles=cfg.state_tiles, hints=cfg.passing_hints)
        init, _ = stage2()
        stages |= {"chunk_state": stage1, "state_passing": stage2}
        meta = {"state_bytes": states.element_size(), "init_state_bytes": init.element_size()}

    def stage3():
        return launch_chunk_scan(x, dt_out, dA_cumsum, C, B, init, None, None, where,
                                 max_heads_per_block=cfg.scan_heads, tiles=cfg.scan_tiles,
                                 hints=cfg.scan_hints, latency=cfg.scan_latency,
                                 factored=cfg.scan_factored, heads_2d=cfg.scan_2d,
                                 shared=cfg.scan_shared, cb=cfg.scan_cb, whole_chunk=cfg.scan_chunk,
                                 cb_bf16=cfg.scan_cb_bf16 and x.dtype != torch.float32, carry=carry,
                                 unroll=cfg.scan_unroll, head_loop=cfg.scan_head_loop,
                                 kd_ready=cfg.state_key_log2, row_group=cfg.scan_row_group,
                                 cb_hints=cfg.scan_cb_hints)
    stages["chunk_scan"] = stage3

    def chain():
        return ssd_forward(x, dt, A, B, C, chunk_size, backend=where, _config=cfg)

    return stages | {"chain": chain, "meta": meta}


def ssd_plan(b: int, l: int, h: int, p: int, g: int, n: int, Q: int,
             dtype: torch.dtype = torch.bfloat16) -> dict[str, LaunchPlan]:
    """How ``ssd_forward`` launches its three kernels for a problem of this size: grid and tiles of each.

    The same plans the launches use, e.g. for figures of the tiles over the tensors::

        ssd_plan(8, 4096, 80, 64, 1, 128, 256)["chunk_scan"].grid   # (4, 128, 20): 4 heads per block
    """
    if h % g:
        raise ValueError(f"nheads h = {h} must be divisible by ngroups g = {g}")
    return {
        "chunk_state": chunk_state_plan(b, l, h, p, n, Q, dtype),
        "state_passing": state_passing_plan(b, cdiv(l, Q), h, p, n, Q),
        "chunk_scan": chunk_scan_plan(b, l, h, p, g, n, Q, dtype),
    }

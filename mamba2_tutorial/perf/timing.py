"""Timing GPU work properly: CUDA events, warm-up, many repetitions, the median, a cold L2 cache.

Device work is asynchronous, so a host clock around a call measures the launch, not the work. ``time_cuda``
brackets each call with CUDA events, warms up first (compilation, autotuning and handle creation stay out of
the numbers), repeats until ``rep_ms`` of device time has passed and returns the median. Before every timed
call it overwrites a buffer larger than the L2 cache (H200: 60 MB), so a small problem is not timed out of the
cache; this is what ``triton.testing.do_bench`` does too. The flush runs outside the events.

What the events see: the start event fires when the flush ends; the call's kernels start once the host has
issued them. So host work per call is hidden up to the flush's duration (about 0.1 ms for 256 MB) and counted
beyond it: a call with heavy Python overhead is charged for it, as a user would be.

``time_host`` measures the other thing a small problem is bound by: how long the host takes to issue one call
(Python, argument handling, launches), and how long back-to-back calls take end to end.

Performance is measured only here and in the benchmark script (``python -m mamba2_tutorial bench``), never in
tests.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

L2_FLUSH_BYTES = 256 * 1024 * 1024  # > 4x the H200's 60 MB L2


@dataclass(frozen=True)
class Timing:
    """Per-call device times in milliseconds: the median and the 20th/80th percentiles over ``n`` timed
    calls."""

    median_ms: float
    p20_ms: float
    p80_ms: float
    n: int


def _quantile(sorted_values: list[float], q: float) -> float:
    i = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[i]


def summarize(times_ms: list[float]) -> Timing:
    """Median and 20th/80th percentiles of per-call times (ms)."""
    if not times_ms:
        raise ValueError("summarize: times_ms is empty")
    s = sorted(times_ms)
    return Timing(statistics.median(s), _quantile(s, 0.2), _quantile(s, 0.8), len(s))


def time_cuda(
    fn: Callable[[], object],
    *,
    warmup_ms: float = 25.0,
    rep_ms: float = 100.0,
    flush_l2: bool = True,
    min_reps: int = 10,
    max_reps: int = 2000,
) -> Timing:
    """Median device time of ``fn()`` on the current CUDA stream, in ms.

    ``warmup_ms`` and ``rep_ms`` are budgets of device time (as in ``triton.testing.do_bench``): the number of
    warm-up and timed calls is chosen from a first estimate of one call's time.
    """
    if not torch.cuda.is_available():
        raise RuntimeError("time_cuda needs a CUDA GPU (torch.cuda.is_available() is False)")
    fn()
    torch.cuda.synchronize()
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device="cuda") if flush_l2 else None

    # estimate one call's time from 5 calls
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        if flush is not None:
            flush.zero_()
        fn()
    end.record()
    torch.cuda.synchronize()
    estimate = max(start.elapsed_time(end) / 5, 1e-3)
    n_warmup = max(1, int(warmup_ms / estimate))
    n_rep = min(max_reps, max(min_reps, int(rep_ms / estimate)))

    for _ in range(n_warmup):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_rep)]
    for i in range(n_rep):
        if flush is not None:
            flush.zero_()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return summarize([s.elapsed_time(e) for s, e in zip(starts, ends)])


@dataclass(frozen=True)
class HostTiming:
    """Per-call costs of back-to-back calls with no cache flush, in microseconds.

    host_us: host time to issue one call (no synchronization inside the loop);
    loop_us: wall time per call of the whole loop including the final synchronization: about
        max(host_us, device time per call) once the loop is long.
    """

    host_us: float
    loop_us: float
    n: int


def time_host(fn: Callable[[], object], *, n: int = 200, warmup: int = 10) -> HostTiming:
    """Host cost per call and end-to-end cost per call of ``n`` back-to-back calls of ``fn``."""
    if not torch.cuda.is_available():
        raise RuntimeError("time_host needs a CUDA GPU (torch.cuda.is_available() is False)")
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    return HostTiming(host_us=(t1 - t0) / n * 1e6, loop_us=(t2 - t0) / n * 1e6, n=n)


def capture_graph(fn: Callable[[], object], *, warmup: int = 3) -> Callable[[], None]:
    """Capture one call of ``fn`` into a CUDA graph; returns a function that replays it.

    Warm-up runs on a side stream first (autotuning and compilation must not happen during capture). Raises
    whatever the capture raises (not every launch path can be captured).
    """
    if not torch.cuda.is_available():
        raise RuntimeError("capture_graph needs a CUDA GPU (torch.cuda.is_available() is False)")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    torch.cuda.synchronize()
    return graph.replay

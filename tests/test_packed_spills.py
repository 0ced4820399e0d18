"""Packed rows cost the unpacked row's registers: no kernel that takes ``seq_idx`` spills more than it does
without it (``fast/resets.py``).

A packed row runs the unpacked row's launches, so any extra time is inside the kernels. The first packed
kernels masked the state walk's whole-chunk weights and the scan's P with ``ct.where``: compiled for sm_90,
the segmented state stage kept an 8 KB stack frame per thread (registers spilled to local memory) and the
chunk scan spilled too (those kernels ran a packed b1-l32768-h80 row 12.8x slower than the same row
unpacked, on an H100). This test compiles, ahead of time on the CPU with the real ``tileiras``, every kernel
the forward and the training step launch for the long-row and one-tile configs of the shipped table, packed
and unpacked, and reads each cubin's stack frame (``runtime.cubin_info``).
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from mamba2_tutorial import fast
from mamba2_tutorial.fast.forward import ssd_forward
from mamba2_tutorial.perf.bench import packed_seq_idx
from mamba2_tutorial.runtime.compile import launch_resources

#: (config name in the shipped table, chunk size): the classes a long packed row and a packed one-tile batch
#: meet, the unrolled scan of the small chunk sizes, and a walk over the whole chunk in one step (no
#: occupancy hint)
CONFIGS = [("segmented-occ2-acc-kd+chunk-bf16cb-kd", 256), ("fused-occ2-acc-kd+chunk-bf16cb-kd", 256),
           ("fused-occ2-kd+chunk-bf16cb-kd-unrolled", 128), ("fused+shared", 256)]


def _frames(cfg, Q: int, seq_idx, training: bool) -> dict[str, int]:
    """{kernel name: stack frame bytes} of every launch of one forward (and backward, with ``training``)."""
    g = torch.Generator().manual_seed(0)
    b, l, h, p, n = 1, 1024, 8, 64, 128
    x = torch.randn(b, l, h, p, generator=g).bfloat16()
    dt = torch.rand(b, l, h, generator=g) * 0.1
    A = -torch.rand(h, generator=g)
    B = torch.randn(b, l, 1, n, generator=g).bfloat16()
    C = torch.randn(b, l, 1, n, generator=g).bfloat16()
    if training:
        for t in (x, dt, A, B, C):
            t.requires_grad_()

    def run():
        y = ssd_forward(x, dt, A, B, C, Q, config=cfg, backend="cpu", seq_idx=seq_idx)
        if training:
            y.float().sum().backward()

    return {name: r["frame_bytes"] for name, r in launch_resources(run, "sm_90").items()}


#: stack frame bytes a packed row may add to a backward chunk kernel that spills a few words without packing
#: (the dx kernel's block-diagonal mask: 160 -> 184 bytes at these sizes); the forward's kernels may add none
BACKWARD_SLACK = 64


def _config(name):
    cfg = fast.load_table().configs[name]
    if isinstance(cfg.state, fast.Segmented):
        cfg = dataclasses.replace(cfg, state=dataclasses.replace(cfg.state, segments=2))
    return cfg


@pytest.mark.parametrize(("name", "Q"), CONFIGS, ids=[name for name, _ in CONFIGS])
def test_the_packed_forward_spills_no_more_than_the_unpacked_one(name, Q):
    cfg = _config(name)
    seq_idx = packed_seq_idx(1, 1024, seed=0, lengths=(100, 400))
    unpacked, packed = _frames(cfg, Q, None, False), _frames(cfg, Q, seq_idx, False)
    assert set(packed) == set(unpacked)  # the same kernels: a packed row takes the unpacked row's launches
    worse = {k: (unpacked[k], packed[k]) for k in packed if packed[k] > unpacked[k]}
    assert not worse, f"stack frame bytes (unpacked, packed) of the kernels a packed row makes spill: {worse}"


@pytest.mark.parametrize(("name", "Q"), CONFIGS[:1], ids=[name for name, _ in CONFIGS[:1]])
def test_the_packed_training_step_spills_at_most_a_few_words_more(name, Q):
    cfg = _config(name)
    seq_idx = packed_seq_idx(1, 1024, seed=0, lengths=(100, 400))
    unpacked, packed = _frames(cfg, Q, None, True), _frames(cfg, Q, seq_idx, True)
    worse = {k: (unpacked.get(k, 0), packed[k]) for k in packed
             if packed[k] > unpacked.get(k, 0) + BACKWARD_SLACK}
    assert not worse, f"stack frame bytes (unpacked, packed) of the kernels a packed row makes spill: {worse}"

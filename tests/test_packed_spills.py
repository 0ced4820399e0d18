"""Packed rows cost the unpacked row's registers: no kernel that takes ``seq_idx`` spills more than it does
without it (``fast/resets.py``).

A packed row runs the unpacked row's launches, so any extra time is inside the kernels. The first packed
kernels masked the state walk's whole-chunk weights and the scan's P with ``ct.where``: compiled for sm_90,
the segmented state stage kept an 8 KB stack frame per thread (registers spilled to local memory) and the
chunk scan spilled too (those kernels ran a packed b1-l32768-h80 row 12.8x slower than the same row
unpacked, on an H100). This test compiles, ahead of time on the CPU with the real ``tileiras``, every kernel
the forward and the training step launch for the long-row and one-tile configs of the shipped table, packed
and unpacked, and reads each cubin's stack frame (``perf.registers.packed_costs``).
"""

from __future__ import annotations

import pytest

from mamba2_tutorial.perf.registers import packed_costs, table_config

#: (config name in the shipped table, chunk size): the classes a long packed row and a packed one-tile batch
#: meet, the unrolled scan of the small chunk sizes, and a walk over the whole chunk in one step (no
#: occupancy hint)
CONFIGS = [("segmented-occ2-acc-kd+chunk-bf16cb-kd", 256), ("fused-occ2-acc-kd+chunk-bf16cb-kd", 256),
           ("fused-occ2-kd+chunk-bf16cb-kd-unrolled", 128), ("fused+shared", 256)]


def _frames(name: str, Q: int, training: bool) -> tuple[dict[str, int], dict[str, int]]:
    """({kernel: stack frame bytes} unpacked, the same packed) of one forward (and backward, ``training``)."""
    costs = packed_costs(table_config(name), Q, training=training)
    return tuple({k: r["frame_bytes"] for k, r in costs[way].items()} for way in ("unpacked", "packed"))


#: stack frame bytes a packed row may add to a backward chunk kernel that spills a few words without packing
#: (the dx kernel's block-diagonal mask: 160 -> 184 bytes at these sizes); the forward's kernels may add none
BACKWARD_SLACK = 64


@pytest.mark.parametrize(("name", "Q"), CONFIGS, ids=[name for name, _ in CONFIGS])
def test_the_packed_forward_spills_no_more_than_the_unpacked_one(name, Q):
    unpacked, packed = _frames(name, Q, training=False)
    assert set(packed) == set(unpacked)  # the same kernels: a packed row takes the unpacked row's launches
    worse = {k: (unpacked[k], packed[k]) for k in packed if packed[k] > unpacked[k]}
    assert not worse, f"stack frame bytes (unpacked, packed) of the kernels a packed row makes spill: {worse}"


@pytest.mark.parametrize(("name", "Q"), CONFIGS[:1], ids=[name for name, _ in CONFIGS[:1]])
def test_the_packed_training_step_spills_at_most_a_few_words_more(name, Q):
    unpacked, packed = _frames(name, Q, training=True)
    worse = {k: (unpacked.get(k, 0), packed[k]) for k in packed
             if packed[k] > unpacked.get(k, 0) + BACKWARD_SLACK}
    assert not worse, f"stack frame bytes (unpacked, packed) of the kernels a packed row makes spill: {worse}"

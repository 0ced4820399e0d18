"""The fourth set of planted mistakes (``planted_fourth_set.py``): each kernel fails its exercise's check
with a hint that names its own cause, the other hints of the set do not appear, and the sanity variants (a
mistake's alternative code path with the slip corrected) pass. The set was measured on the checks before any
of these hints existed (docs/instructors.md); it stays here so that they keep working."""

from __future__ import annotations

import re

import pytest
from planted_fourth_set import KERNELS, SANITY, SLIPS

import mamba2_tutorial.exercises as exercises
import mamba2_tutorial.exercises._harness as harness
from mamba2_tutorial.exercises import ExerciseFailed

CHECKS = {"ex04": ("check_chunk_cumsum_kernel", "chunk_cumsum"),
          "ex05": ("check_chunk_state_kernel", "chunk_state"),
          "ex06": ("check_state_passing_kernel", "state_passing"),
          "ex07": ("check_chunk_scan_kernel", "chunk_scan"),
          "ex08": ("check_state_passing_bwd_kernel", "state_passing_bwd")}

#: (exercise, M) -> what the hint must say
HINTS = {
    ("ex04", 1): r"a mask or a bound cuts it at 16",
    ("ex04", 2): r"each position's own step is counted s \+ 1 times",
    ("ex04", 3): r"your kernel reads dt of another head",
    ("ex04", 4): r"Your dt_out holds dt \* A\[hi\]",
    ("ex04", 5): r"your kernel clamps each step \(ct\.maximum\(dt \* A, -20\)",
    ("ex04", 6): r"no block stores at index 1 of axis 0, a grid axis, and every value your kernel did write "
                 r"is right.*a block index decoded as another kernel's grid would need it",
    ("ex04", 7): r"a mask that picks positions 0\.\.s works in chunk 0 only",
    ("ex04", 8): r"the skeleton's placeholder \(ct\.zeros\(\.\.\.\)\) is still stored",
    ("ex05", 1): r"leaves out \(or gets wrong\) the sequence's last step",
    ("ex05", 2): r"your kernel reads B of the wrong group",
    ("ex05", 3): r"exactly 2 times the right weights, at every position: the state is summed 2 times",
    ("ex05", 4): r"your kernel applies a nonlinearity to x",
    ("ex05", 5): r"TypeCheckingError.*ct\.mma's two operands must share one dtype",
    ("ex05", 6): r"the weights w_k go wrong only when they differ from position to position",
    ("ex05", 7): r"your state's rows follow the chunk's positions k, not x's elements",
    ("ex05", 8): r"your kernel takes a running sum of dA_cumsum, which already is the running sum",
    ("ex06", 1): r"the chunk and the head are exchanged",
    ("ex06", 2): r"the carried tile is added once more, undecayed",
    ("ex06", 3): r"your kernel clips it to \[-3, 3\]",
    ("ex06", 4): r"your kernel never adds states\[:, 2\]",
    ("ex06", 5): r"axis 1 is walked by the loop inside each block, and index 2 is never stored",
    ("ex06", 6): r"reads or writes another batch entry than its own",
    ("ex06", 7): r"it is not carried from one chunk to the next",
    ("ex06", 8): r"your final_states is exactly the right one transposed",
    ("ex07", 1): r"your kernel scales C's rows, the TARGET positions s, by dt",
    ("ex07", 2): r"your kernel computes 2\*\*v where the decay is exp\(v\)",
    ("ex07", 3): r"your kernel adds to the output array's old contents",
    ("ex07", 4): r"your P is \(Cᵀ B\)\[s, k\]",
    ("ex07", 5): r"exp\(dA_cs\[s\] - dA_cs\[0\]\): the decay from position 0",
    ("ex07", 6): r"your kernel applies a nonlinearity to C or to C Bᵀ",
    ("ex07", 7): r"rounds to a low-precision dtype",
    ("ex07", 8): r"your y is right at position\(s\) 0 of every chunk and 0 at the others",
    ("ex08", 1): r"your dstates is exactly the right one transposed",
    ("ex08", 2): r"your dinitial_states is the right one plus dfinal_states, undecayed",
    ("ex08", 3): r"your kernel takes the LAST chunk's decay as 1",
    ("ex08", 4): r"rounds to a low-precision dtype",
    ("ex08", 5): r"Your dinitial_states is never stored.*your dstates at index 0 of axis 1 holds the right "
                 r"dinitial_states",
    ("ex08", 6): r"a sigmoid takes the place of the exp",
    ("ex08", 7): r"loads without padding_mode=ZERO",
    ("ex08", 8): r"the carried tile is not decayed at all",
}


def run_planted(monkeypatch, exercise: str, mistake: int) -> None:
    """Run the exercise's check on the set's kernel with ``mistake`` appended to every launch."""
    check_name, module = CHECKS[exercise]

    def launch_with(check, kern, grid, args, case, hint, backend):
        return harness.run_kernel(check, kern, grid, (*args, mistake), case, hint, backend)

    monkeypatch.setattr(f"mamba2_tutorial.exercises.{module}.run_kernel", launch_with)
    getattr(exercises, check_name)(KERNELS[exercise])


def test_every_slip_of_the_set_has_its_hint():
    assert set(HINTS) == {(ex, m) for ex, table in SLIPS.items() for m in table}


@pytest.mark.parametrize(("exercise", "mistake"), sorted(HINTS), ids=[f"{e}-{m}" for e, m in sorted(HINTS)])
def test_each_slip_gets_the_hint_of_its_own_cause(monkeypatch, exercise, mistake):
    with pytest.raises(ExerciseFailed) as info:
        run_planted(monkeypatch, exercise, mistake)
    text = str(info.value)
    assert re.search(HINTS[exercise, mistake], text, re.S), (SLIPS[exercise][mistake], text)
    hint = text[text.index("Hint:"):]
    own = HINTS[exercise, mistake]
    others = [p for (e, m), p in HINTS.items()
              if e == exercise and m != mistake and p != own and re.search(p, hint, re.S)]
    assert not others, (others, text)


@pytest.mark.parametrize("exercise", sorted(KERNELS))
def test_the_kernels_are_right_without_a_mistake(monkeypatch, capsys, exercise):
    for m in (0, *SANITY.get(exercise, [])):
        run_planted(monkeypatch, exercise, m)
        assert "passed on the cpu backend" in capsys.readouterr().out, (exercise, m)

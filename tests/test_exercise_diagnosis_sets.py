"""The fourth to eighth sets of planted mistakes (``planted_{fourth,...,eighth}_set.py``): 200
slips written from the exercises' contracts without reading the diagnosis code and measured on the checks
before any fix (docs/instructors.md). Every slip fails its exercise's check and keeps the hint listed for it
(no other hint of its exercise appears); the sanity variants pass. The guide's table says which hints name the
slip's cause and which only say where the wrong elements are or which term is wrong."""

from __future__ import annotations

import re

import planted_eighth_set
import planted_fifth_set
import planted_fourth_set
import planted_seventh_set
import planted_sixth_set
import pytest

import mamba2_tutorial.exercises as exercises
import mamba2_tutorial.exercises._harness as harness
from mamba2_tutorial.exercises import ExerciseFailed

CHECKS = {"ex04": ("check_chunk_cumsum_kernel", "chunk_cumsum"),
          "ex05": ("check_chunk_state_kernel", "chunk_state"),
          "ex06": ("check_state_passing_kernel", "state_passing"),
          "ex07": ("check_chunk_scan_kernel", "chunk_scan"),
          "ex08": ("check_state_passing_bwd_kernel", "state_passing_bwd")}
SETS = {"fourth": planted_fourth_set, "fifth": planted_fifth_set, "sixth": planted_sixth_set,
        "seventh": planted_seventh_set, "eighth": planted_eighth_set}
INDEX = r"raised IndexError"

#: (set, exercise, M) -> what the hint must say
HINTS = {
    ("fourth", "ex04", 1): r"a mask or a bound cuts it at 16",
    ("fourth", "ex04", 2): r"each position's own step is counted s \+ 1 times",
    ("fourth", "ex04", 3): r"your kernel reads dt of another head",
    ("fourth", "ex04", 4): r"Your dt_out holds dt \* A\[hi\]",
    ("fourth", "ex04", 5): r"your kernel clamps each step \(ct\.maximum\(dt \* A, -20\)",
    ("fourth", "ex04", 6): r"no block stores at index 1 of axis 0, a grid axis, and every value your kernel "
                           r"did write is right.*a block index decoded as another kernel's grid",
    ("fourth", "ex04", 7): r"a mask that picks positions 0\.\.s works in chunk 0 only",
    ("fourth", "ex04", 8): r"the skeleton's placeholder \(ct\.zeros\(\.\.\.\)\) is still stored",
    ("fourth", "ex05", 1): r"leaves out \(or gets wrong\) the sequence's last step",
    ("fourth", "ex05", 2): r"your kernel reads B of the wrong group",
    ("fourth", "ex05", 3): r"exactly 2 times the right weights, at every position: the state is summed 2 "
                           r"times",
    ("fourth", "ex05", 4): r"your kernel applies a nonlinearity to x",
    ("fourth", "ex05", 5): r"TypeCheckingError.*ct\.mma's two operands must share one dtype",
    ("fourth", "ex05", 6): r"the weights w_k go wrong only when they differ from position to position",
    ("fourth", "ex05", 7): r"turns x's tile around with a reshape where a transpose belongs",
    ("fourth", "ex05", 8): r"your kernel takes a running sum of dA_cumsum, which already is the running sum",
    ("fourth", "ex06", 1): r"the chunk and the head are exchanged",
    ("fourth", "ex06", 2): r"the carried tile is added once more, undecayed",
    ("fourth", "ex06", 3): r"your kernel clips it to \[-3, 3\]",
    ("fourth", "ex06", 4): r"your kernel never adds states\[:, 2\]",
    ("fourth", "ex06", 5): r"axis 1 is walked by the loop inside each block, and index 2 is never stored",
    ("fourth", "ex06", 6): r"reads or writes another batch entry than its own",
    ("fourth", "ex06", 7): r"it is not carried from one chunk to the next",
    ("fourth", "ex06", 8): r"your final_states is exactly the right one transposed",
    ("fourth", "ex07", 1): r"your kernel scales C's rows, the TARGET positions s, by dt",
    ("fourth", "ex07", 2): r"your kernel computes 2\*\*v where the decay is exp\(v\)",
    ("fourth", "ex07", 3): r"your kernel adds to the output array's old contents",
    ("fourth", "ex07", 4): r"your P is \(Cᵀ B\)\[s, k\]",
    ("fourth", "ex07", 5): r"exp\(dA_cs\[s\] - dA_cs\[0\]\): the decay from position 0",
    ("fourth", "ex07", 6): r"your kernel applies a nonlinearity to C or to C Bᵀ",
    ("fourth", "ex07", 7): r"rounds to a low-precision dtype",
    ("fourth", "ex07", 8): r"your y is right at position\(s\) 0 of every chunk and 0 at the others",
    ("fourth", "ex08", 1): r"your dstates is exactly the right one transposed",
    ("fourth", "ex08", 2): r"your dinitial_states is the right one plus dfinal_states, undecayed",
    ("fourth", "ex08", 3): r"your kernel takes the LAST chunk's decay as 1",
    ("fourth", "ex08", 4): r"rounds to a low-precision dtype",
    ("fourth", "ex08", 5): r"Your dinitial_states is never stored.*your dstates at index 0 of axis 1 holds "
                           r"the right dinitial_states",
    ("fourth", "ex08", 6): r"a sigmoid takes the place of the exp",
    ("fourth", "ex08", 7): r"loads without padding_mode=ZERO",
    ("fourth", "ex08", 8): r"the carried tile is not decayed at all",
    ("fifth", "ex04", 1): INDEX,
    ("fifth", "ex04", 2): r"your kernel adds to the output array's old contents",
    ("fifth", "ex04", 3): r"the running sum stops at position",
    ("fifth", "ex04", 4): r"every position holds the same sum",
    ("fifth", "ex04", 5): r"loads without padding_mode=ZERO",
    ("fifth", "ex04", 6): r"the running sum stops at position",
    ("fifth", "ex04", 7): r"rounds to a low-precision dtype",
    ("fifth", "ex04", 8): r"the blocks meant for index 1 of axis 0 store at index 0",
    ("fifth", "ex05", 1): INDEX,
    ("fifth", "ex05", 2): r"your decay starts one position early",
    ("fifth", "ex05", 3): INDEX,
    ("fifth", "ex05", 4): r"a reshape where a transpose belongs",
    ("fifth", "ex05", 5): r"only the first part of the chunk reaches the state",
    ("fifth", "ex05", 6): r"LOG2E divides the exponent where it multiplies it",
    ("fifth", "ex05", 7): r"only the last part of the chunk reaches the state",
    ("fifth", "ex05", 8): r"your kernel reads x of another head",
    ("fifth", "ex06", 1): INDEX,
    ("fifth", "ex06", 2): INDEX,
    ("fifth", "ex06", 3): INDEX,
    ("fifth", "ex06", 4): r"the last chunk's update applied once more",
    ("fifth", "ex06", 5): r"two of the store's block indices are the same number",
    ("fifth", "ex06", 6): r"your kernel decays the chunk's own state too",
    ("fifth", "ex06", 7): INDEX,
    ("fifth", "ex06", 8): r"axis 4 lies inside the tile each store writes",
    ("fifth", "ex07", 1): r"ct\.mma's two operands must share one dtype",
    ("fifth", "ex07", 2): r"loads without padding_mode=ZERO",
    ("fifth", "ex07", 3): r"reads or writes another batch entry than its own",
    ("fifth", "ex07", 4): r"a function of dt that is not 0 at 0",
    ("fifth", "ex07", 5): r"exp\(dA_cs\[s-1\]\)",
    ("fifth", "ex07", 6): INDEX + r".*puts the Q positions on the head axis",
    ("fifth", "ex07", 7): r"the state term reads the entering state of another chunk",
    ("fifth", "ex07", 8): r"no block stores at index 4, 5, 6, 7",
    ("fifth", "ex08", 1): r"your ddA_last pairs S_c with",
    ("fifth", "ex08", 2): r"the chunks come in reverse order",
    ("fifth", "ex08", 3): INDEX,
    ("fifth", "ex08", 4): r"so the decay is wrong",
    ("fifth", "ex08", 5): r"reads or writes another batch entry than its own",
    ("fifth", "ex08", 6): INDEX,
    ("fifth", "ex08", 7): r"rounds to a low-precision dtype",
    ("fifth", "ex08", 8): r"your kernel clamps at -1",
    ("sixth", "ex04", 1): INDEX,
    ("sixth", "ex04", 2): r"the running sum stops at position",
    ("sixth", "ex04", 3): INDEX,
    ("sixth", "ex04", 4): r"your dt_out holds it at head 2, chunk 2",
    ("sixth", "ex04", 5): r"a tile rebuilt at every step",
    ("sixth", "ex04", 6): INDEX,
    ("sixth", "ex04", 7): INDEX,
    ("sixth", "ex04", 8): r"one entry per axis of the array",
    ("sixth", "ex05", 1): INDEX,
    ("sixth", "ex05", 2): r"so the decay is wrong",
    ("sixth", "ex05", 3): r"rounds to a low-precision dtype",
    ("sixth", "ex05", 4): INDEX,
    ("sixth", "ex05", 5): r"only the first part of the chunk reaches the state",
    ("sixth", "ex05", 6): r"only the last part of the chunk reaches the state",
    ("sixth", "ex05", 7): INDEX,
    ("sixth", "ex05", 8): r"reads B with its group \(axis 2\) and state \(n\) \(axis 3\) axes exchanged",
    ("sixth", "ex06", 1): r"one entry per axis of the array",
    ("sixth", "ex06", 2): r"reads dA_cumsum with its head \(axis 1\) and chunk \(axis 2\) axes exchanged",
    ("sixth", "ex06", 3): r"or the starting tile loaded again inside the loop",
    ("sixth", "ex06", 4): r"each result is stored one index early",
    ("sixth", "ex06", 5): r"Only cuTile's own functions run on tiles inside a kernel",
    ("sixth", "ex06", 6): r"your kernel adds chunk 0's local state in every chunk",
    ("sixth", "ex06", 7): r"the term of the chunk's own state is wrong",
    ("sixth", "ex06", 8): r"reads the decay from another position than the chunk's last",
    ("sixth", "ex07", 1): r"your kernel leaves out the chunk's last source positions",
    ("sixth", "ex07", 2): INDEX + r".*the tile's shape",
    ("sixth", "ex07", 3): r"a mask or a bound cuts it at 4 \(4 is h \(x\.shape\[2\]\)",
    ("sixth", "ex07", 4): r"the store's index lacks the chunk offset",
    ("sixth", "ex07", 5): INDEX + r".*the tile's shape",
    ("sixth", "ex07", 6): r"so the factor dt is wrong",
    ("sixth", "ex07", 7): r"ct\.mma's two operands must share one dtype",
    ("sixth", "ex07", 8): r"the diagonal k = s is what goes wrong",
    ("sixth", "ex08", 1): r"the path of d final_states is wrong",
    ("sixth", "ex08", 2): r"your ddA_last pairs S_c with",
    ("sixth", "ex08", 3): r"the path of d final_states is wrong",
    ("sixth", "ex08", 4): r"the reduction in ddA_last mixes elements",
    ("sixth", "ex08", 5): r"reads chunk_init_states with its chunk \(axis 1\) and head \(axis 2\) axes "
                          r"exchanged",
    ("sixth", "ex08", 6): r"the path of d final_states is wrong",
    ("sixth", "ex08", 7): r"axis 2 is walked by the loop inside each block",
    ("sixth", "ex08", 8): INDEX,
    ("seventh", "ex04", 1): r"loads without padding_mode=ZERO",
    ("seventh", "ex04", 2): r"a function of dt that is not 0 at 0 \(softplus",
    ("seventh", "ex04", 3): r"so position s is left out of its own sum",
    ("seventh", "ex04", 4): r"no running sum is taken along the chunk's positions",
    ("seventh", "ex04", 5): r"your kernel flips A's sign",
    ("seventh", "ex04", 6): r"your running sum is scaled by 1\.443 = LOG2E",
    ("seventh", "ex04", 7): r"an index in elements \(c \* 8\) where the index in tiles \(c\) belongs",
    ("seventh", "ex04", 8): r"Your dt_out holds dt \* A\[hi\]",
    ("seventh", "ex05", 1): r"your state's rows follow the chunk's positions k, not x's elements",
    ("seventh", "ex05", 2): r"the decay's exponent has its sign flipped",
    ("seventh", "ex05", 3): r"axis 2 \(group\).*a head's group is hi // HEADS_PER_GROUP",
    ("seventh", "ex05", 4): r"without dt_k: the factor dt is missing",
    ("seventh", "ex05", 5): r"ct\.mma's two operands must share one dtype",
    ("seventh", "ex05", 6): r"loads without padding_mode=ZERO",
    ("seventh", "ex05", 7): r"dt_k²: dt applied twice",
    ("seventh", "ex05", 8): r"your kernel computes 2\*\*v where the decay is exp\(v\)",
    ("seventh", "ex06", 1): r"so you store the state after the update",
    ("seventh", "ex06", 2): r"the carried tile is not decayed at all",
    ("seventh", "ex06", 3): r"reads the decay from another position than the chunk's last",
    ("seventh", "ex06", 4): r"axis 1 is walked by the loop inside each block, and index 2 is never stored",
    ("seventh", "ex06", 5): r"your kernel decays the chunk's own state too",
    ("seventh", "ex06", 6): r"reads dA_cumsum with its head \(axis 1\) and chunk \(axis 2\) axes exchanged",
    ("seventh", "ex06", 7): r"A tile carried through a loop keeps one shape and dtype",
    ("seventh", "ex06", 8): r"the decay's exponent has its sign flipped",
    ("seventh", "ex07", 1): r"the diagonal k = s is what goes wrong",
    ("seventh", "ex07", 2): r"your kernel computes B Cᵀ",
    ("seventh", "ex07", 3): r"dt reaches the wrong elements",
    ("seventh", "ex07", 4): r"the state term is not decayed",
    ("seventh", "ex07", 5): r"the decay's exponent has its sign flipped",
    ("seventh", "ex07", 6): r"your kernel multiplies C by the state untransposed",
    ("seventh", "ex07", 7): r"your y is exp\(dA_cs\[Q-1\]\) at every position",
    ("seventh", "ex07", 8): r"loads without padding_mode=ZERO",
    ("seventh", "ex08", 1): r"so you store dS after the update",
    ("seventh", "ex08", 2): r"your kernel walks the chunks from the first to the last",
    ("seventh", "ex08", 3): r"ddA_last is the right value times 1 / g_c \(no g_c in all\)",
    ("seventh", "ex08", 4): r"the reduction in ddA_last mixes elements",
    ("seventh", "ex08", 5): r"the decay's exponent has its sign flipped",
    ("seventh", "ex08", 6): r"loads without padding_mode=ZERO",
    ("seventh", "ex08", 7): r"ddA_last is the right value times g_c once more",
    ("seventh", "ex08", 8): r"axis 1 is walked by the loop inside each block, and index 0 is never stored",
    ("eighth", "ex04", 1): r"an index in elements \(c \* 8\) where the index in tiles \(c\) belongs",
    ("eighth", "ex04", 2): r"loads without padding_mode=ZERO.*A mask of your own in place of the padding",
    ("eighth", "ex04", 3): r"so position s is left out of its own sum",
    ("eighth", "ex04", 4): r"your kernel flips A's sign",
    ("eighth", "ex04", 5): r"loads without padding_mode=ZERO.*A mask of your own in place of the padding",
    ("eighth", "ex04", 6): r"loads without padding_mode=ZERO.*A mask of your own in place of the padding",
    ("eighth", "ex04", 7): r"the sum runs backwards",
    ("eighth", "ex04", 8): r"a mask or a bound cuts it at 3 \(3 is h",
    ("eighth", "ex05", 1): r"the decay's exponent has its sign flipped",
    ("eighth", "ex05", 2): r"the chunk's dA_cumsum summed, where its last element",
    ("eighth", "ex05", 3): r"without dt_k: the factor dt is missing",
    ("eighth", "ex05", 4): r"your kernel reads B of the wrong group",
    ("eighth", "ex05", 5): r"your state's rows follow the chunk's positions k, not x's elements",
    ("eighth", "ex05", 6): r"ct\.mma's two operands must share one dtype",
    ("eighth", "ex05", 7): r"your kernel reads x and B of chunk 0 in every chunk",
    ("eighth", "ex05", 8): r"the state of chunk c takes in positions of other chunks",
    ("eighth", "ex06", 1): r"so you store the state after the update",
    ("eighth", "ex06", 2): r"your kernel decays the chunk's own state too",
    ("eighth", "ex06", 3): r"your kernel computes 2\*\*v where the decay is exp\(v\)",
    ("eighth", "ex06", 4): r"your kernel leaves the initial state out",
    ("eighth", "ex06", 5): r"your kernel takes chunk 0's decay as 1",
    ("eighth", "ex06", 6): r"A tile carried through a loop keeps one shape and dtype",
    ("eighth", "ex06", 7): r"the chunk and the head are exchanged",
    ("eighth", "ex06", 8): r"axis 1 is walked by the loop inside each block, and index 2 is never stored",
    ("eighth", "ex07", 1): r"your P is transposed \(Pᵀ @ x\) or its mask keeps k >= s",
    ("eighth", "ex07", 2): r"inf \* 0 = NaN\): clamp it",
    ("eighth", "ex07", 3): r"the decay's exponent has its sign flipped",
    ("eighth", "ex07", 4): r"the state term is not decayed",
    ("eighth", "ex07", 5): r"your kernel multiplies C by the state untransposed",
    ("eighth", "ex07", 6): r"dt reaches the wrong elements",
    ("eighth", "ex07", 7): r"A store takes a tile of the array's own dtype",
    ("eighth", "ex07", 8): r"your kernel reads x and B of chunk 0 in every chunk",
    ("eighth", "ex08", 1): r"so you store dS after the update",
    ("eighth", "ex08", 2): r"ddA_last is the right value times 1 / g_c \(no g_c in all\)",
    ("eighth", "ex08", 3): r"loads without padding_mode=ZERO",
    ("eighth", "ex08", 4): r"your kernel walks the chunks from the first to the last",
    ("eighth", "ex08", 5): r"your kernel decays chunk c's own dS_out too",
    ("eighth", "ex08", 6): r"your dinitial_states is the right one minus chunk 0's dS_out: that term is "
                           r"missing",
    ("eighth", "ex08", 7): r"the head and the chunk are exchanged",
    ("eighth", "ex08", 8): r"ddA_last pairs S_c with dS after chunk c's update",

}
#: slips whose hint does not name their cause yet
def run_planted(monkeypatch, which: str, exercise: str, mistake: int) -> None:
    """Run the exercise's check on the set's kernel with ``mistake`` appended to every launch."""
    check_name, module = CHECKS[exercise]

    def launch_with(check, kern, grid, args, case, hint, backend):
        return harness.run_kernel(check, kern, grid, (*args, mistake), case, hint, backend)

    monkeypatch.setattr(f"mamba2_tutorial.exercises.{module}.run_kernel", launch_with)
    getattr(exercises, check_name)(SETS[which].KERNELS[exercise])


def test_every_slip_has_the_hint_of_its_cause_listed():
    slips = {(w, ex, m) for w, mod in SETS.items() for ex, table in mod.SLIPS.items() for m in table}
    assert set(HINTS) == slips


@pytest.mark.parametrize("key", sorted(HINTS), ids=["-".join(map(str, k)) for k in sorted(HINTS)])
def test_each_named_slip_gets_the_hint_of_its_own_cause(monkeypatch, key):
    which, exercise, mistake = key
    with pytest.raises(ExerciseFailed) as info:
        run_planted(monkeypatch, which, exercise, mistake)
    text = str(info.value)
    assert re.search(HINTS[key], text, re.S), (SETS[which].SLIPS[exercise][mistake], text)
    hint = text[text.index("Hint:"):]
    others = [p for (w, e, m), p in HINTS.items()
              if (w, e) == (which, exercise) and m != mistake and p != HINTS[key] and not p.startswith(INDEX)
              and re.search(p, hint, re.S)]
    assert not others, (others, text)


@pytest.mark.parametrize("which", sorted(SETS))
def test_the_kernels_are_right_without_a_mistake(monkeypatch, capsys, which):
    for exercise in sorted(CHECKS):
        for m in (0, *SETS[which].SANITY.get(exercise, [])):
            run_planted(monkeypatch, which, exercise, m)
            assert "passed on the cpu backend" in capsys.readouterr().out, (which, exercise, m)

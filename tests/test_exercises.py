"""Workshop exercises: each check rejects stubs and typical mistakes (naming them) and accepts right answers.

* Each exercise notebook, as shipped, is executed (nbclient); every cell tagged ``check`` must raise
  ``ExerciseFailed`` and no other cell may fail: a check that passes a stub is a defect.
* Exercise and solution notebooks pair up (same file names, same check cells); the solutions themselves run
  under nbval (``pytest notebooks/solutions``).
* Each ``check_*`` is run against deliberately wrong implementations of the usual mistakes (several per
  exercise, written independently here, including wrong cuTile kernels) and must name each mistake's own cause
  in its hint; right implementations (the reference, or a correct kernel) pass.
* Hints are diagnosed: a wrong answer whose cause no check confirms gets no named cause (in particular no
  padding hint when the padding is right), and the tiered help (``hint(1)``, ``hint(2)``, ``show_solution``)
  prints the right tier.
"""

from __future__ import annotations

import re
from pathlib import Path

import cuda.tile as ct
import pytest
import torch

from mamba2_tutorial import reference as ref
from mamba2_tutorial.exercises import (
    ExerciseFailed,
    check_chunk_cumsum_kernel,
    check_chunk_scan_kernel,
    check_chunk_state,
    check_chunk_state_kernel,
    check_recurrence_step,
    check_segsum,
    check_state_passing_bwd_kernel,
    check_state_passing_kernel,
    show_solution,
)
from mamba2_tutorial.exercises import hint as exercise_hint

ROOT = Path(__file__).resolve().parents[1]
EXERCISES = sorted((ROOT / "notebooks" / "exercises").glob("*.ipynb"))
#: the open tier of the cuTile exercises: the contract only, the same check and solution as the guided tier
OPEN = sorted((ROOT / "notebooks" / "exercises" / "open").glob("*.ipynb"))
SOLUTIONS = ROOT / "notebooks" / "solutions"
EXPECTED = {
    "ex01_recurrence_step",
    "ex02_segsum",
    "ex03_chunk_state_torch",
    "ex04_cutile_chunk_cumsum",
    "ex05_cutile_chunk_state",
    "ex06_cutile_state_passing",
    "ex07_cutile_chunk_scan",
    "ex08_cutile_state_passing_bwd",
}


def _hint_of(exc: ExerciseFailed) -> str:
    """The hint part of a failure message (from 'Hint:' to 'More help:')."""
    text = str(exc)
    return text[text.index("Hint:"):text.index("More help:")]


def _solution_of(path: Path) -> Path:
    """The solution notebook of an exercise notebook of either tier."""
    return SOLUTIONS / path.name.replace("_open.ipynb", ".ipynb")


def _tagged(nb, tag):
    return [c for c in nb.cells if c.cell_type == "code" and tag in c.metadata.get("tags", [])]


# --------------------------------------------------------------------------------------------- notebooks


def test_all_exercises_are_shipped_with_solutions():
    names = {p.stem for p in EXERCISES}
    assert EXPECTED <= names, f"missing exercise notebooks: {sorted(EXPECTED - names)}"
    assert names == {p.stem for p in SOLUTIONS.glob("*.ipynb")}, "exercises/ and solutions/ must pair up"
    kernel_exercises = {n for n in EXPECTED if "_cutile_" in n}
    two_tiers = {f"{n}_open" for n in kernel_exercises}
    assert {p.stem for p in OPEN} == two_tiers, "every cuTile exercise has two tiers"


@pytest.mark.parametrize("path", EXERCISES + OPEN, ids=lambda p: p.stem)
def test_exercise_and_solution_have_the_same_checks(path):
    import nbformat

    ex = nbformat.read(path, as_version=4)
    sol = nbformat.read(_solution_of(path), as_version=4)
    ex_checks = [c.source for c in _tagged(ex, "check")]
    assert ex_checks, f"{path.name}: no cell tagged 'check'"
    assert all(re.search(r"\bcheck_\w+\(", s) for s in ex_checks), ex_checks
    assert ex_checks == [c.source for c in _tagged(sol, "check")], "solution must run the same checks"
    todo = _tagged(ex, "exercise")
    assert todo, f"{path.name}: no cell tagged 'exercise'"
    assert all("TODO" in c.source for c in todo), f"{path.name}: exercise cells must say what to do (# TODO)"
    assert _tagged(sol, "solution"), f"{path.name}: the solution has no cell tagged 'solution'"
    for c in _tagged(sol, "solution"):
        assert "NotImplementedError" not in c.source and "placeholder" not in c.source


@pytest.fixture(scope="module")
def shipped_exercises():
    """Every exercise notebook executed as a learner gets it (kernels run concurrently): {path: notebook}."""
    import asyncio

    import nbformat
    from nbclient import NotebookClient

    notebooks = {p: nbformat.read(p, as_version=4) for p in EXERCISES + OPEN}

    async def run_all():
        clients = [
            NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                           resources={"metadata": {"path": str(p.parent)}})
            for p, nb in notebooks.items()
        ]  # fmt: skip
        await asyncio.gather(*(c.async_execute() for c in clients))

    asyncio.run(run_all())
    return notebooks


@pytest.mark.parametrize("path", EXERCISES + OPEN, ids=lambda p: p.stem)
def test_exercise_notebook_fails_its_checks_as_shipped(path, shipped_exercises):
    """Run the notebook as a learner gets it: the checks must fail, everything else must run."""
    nb = shipped_exercises[path]
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        errors = [o for o in cell.outputs if o.output_type == "error"]
        if "check" in cell.metadata.get("tags", []):
            assert errors, f"{path.name} cell {i}: the check PASSED the shipped stub:\n{cell.source}"
            assert errors[0].ename == "ExerciseFailed", (
                f"{path.name} cell {i}: {errors[0].ename}: {errors[0].evalue}"
            )
            assert "Hint:" in errors[0].evalue, errors[0].evalue
        else:
            assert not errors, f"{path.name} cell {i} raised {errors[0].ename}: {errors[0].evalue}"


#: call-level detail that the guided tier dictates and the open tier leaves to the learner (it is in hint(2))
CALL_LEVEL = [r"ct\.load\(\w+, \(", r"padding_mode=", r"\.reshape\(\(", r"ct\.mma\(", r"pos\[:, None\]",
              r"ct\.store\(\w+, \(", r"shape=\(1, ", r"ct\.zeros\(\("]


@pytest.mark.parametrize("path", OPEN, ids=lambda p: p.stem)
def test_the_open_tier_states_the_contract_only(path):
    """The open tier names the arguments, the grid, what a block computes and what must hold, and leaves the
    loads, masks and products to the learner: no call-level detail in its text or its skeleton, while the
    guided tier and the recipe (hint(2)) have it."""
    import nbformat

    from mamba2_tutorial.exercises._harness import _EXERCISES

    nb = nbformat.read(path, as_version=4)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown" or "exercise" in c.metadata.get(
        "tags", []))
    found = [p for p in CALL_LEVEL if re.search(p, text)]
    assert not found, (path.name, found)
    assert "## The contract" in text and "grid" in text and "What must hold" in text
    assert re.search(r"\*\*time:\*\* about \d+ minutes", nb.cells[0].source), nb.cells[0].source[:300]
    guided = nbformat.read(path.parent.parent / path.name.replace("_open", ""), as_version=4)
    assert "guided" in guided.cells[0].source and f"open/{path.name}" in guided.cells[0].source
    recipe = next(r for ex, r in _EXERCISES.values() if ex == path.name[:4])
    assert re.search(r"ct\.load|ct\.mma|ct\.store|store", recipe), recipe


# ---------------------------------------------------------------------- exercise 1: the recurrence step


def _heads(BC, h, modulo=False):
    g = BC.shape[1]
    idx = torch.arange(h) % g if modulo else torch.arange(h) // (h // g)
    return BC[:, idx]


def _step(
    state, x, dt, A, B, C, *, decay=None, dt_in=True, after=False, modulo=False, y_old=False, y_B=False
):
    h = x.shape[1]
    Bh, Ch = _heads(B, h, modulo), _heads(C, h, modulo)
    d = (torch.exp(dt * A) if decay is None else decay(dt, A))[:, :, None, None]
    u = (dt[:, :, None] * x if dt_in else x)[..., None] * Bh[:, :, None, :]
    new = d * (state + u) if after else d * state + u
    y = torch.einsum("bhpn,bhn->bhp", state if y_old else new, Bh if y_B else Ch)
    return y, new


def test_recurrence_accepts_right_answers(capsys):
    check_recurrence_step(ref.ssd_decode_step)
    check_recurrence_step(_step)
    assert "✅ check_recurrence_step passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (lambda *a: _step(*a, decay=lambda dt, A: torch.exp(A).expand_as(dt)), r"exp\(A\) where the decay"),
        (lambda *a: _step(*a, decay=lambda dt, A: dt * torch.exp(A)), r"dt \* exp\(A\)"),
        (lambda *a: _step(*a, decay=lambda dt, A: torch.exp(-dt * A)), r"growing state"),
        (lambda *a: _step(*a, dt_in=False), r"input term without dt"),
        (lambda *a: _step(*a, after=True), r"decay applied after the update"),
        (lambda *a: _step(*a, modulo=True), r"group mapping \(h % g\)"),
        (lambda *a: _step(*a, y_old=True), r"y computed from the old state"),
        (lambda *a: _step(*a, y_B=True), r"y computed with B instead of C"),
    ],
    ids=["exp_A", "dt_exp_A", "negated", "no_dt_input", "decay_after", "h_mod_g", "y_old_state", "y_with_B"],
)
def test_recurrence_names_the_mistake(wrong, hint):
    with pytest.raises(ExerciseFailed, match=re.compile(hint, re.S)):
        check_recurrence_step(wrong)


def test_recurrence_rejects_stub_and_bad_returns():
    def stub(*args):
        raise NotImplementedError

    with pytest.raises(ExerciseFailed, match="not implemented yet"):
        check_recurrence_step(stub)
    with pytest.raises(ExerciseFailed, match=r"return a pair"):
        check_recurrence_step(lambda *a: _step(*a)[1])
    with pytest.raises(ExerciseFailed, match=r"shape \(.*\), expected"):
        check_recurrence_step(lambda *a: (_step(*a)[0], _step(*a)[1].transpose(-1, -2)))

    def crashes(state, x, dt, A, B, C):  # forgets the group -> head mapping: breaks when g > 1
        return _step(
            state, x, dt, A, B[:, :1].expand(-1, x.shape[1], -1), C[:, :1].expand(-1, x.shape[1], -1)
        )

    with pytest.raises(ExerciseFailed):
        check_recurrence_step(crashes)


def test_recurrence_catches_float16_accumulation():
    def half(state, x, dt, A, B, C):
        y, s = _step(*(t.half() for t in (state, x, dt, A, B, C)))
        return y.to(x.dtype), s.to(x.dtype)

    with pytest.raises(ExerciseFailed, match="is wrong"):
        check_recurrence_step(half)


# ------------------------------------------------------------------------------- exercise 2: segsum


def _mask(S, T, diagonal=0):
    return S.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(diagonal), float("-inf"))


def seg_naive(x):
    T = x.shape[-1]
    cs = x.cumsum(-1)
    return _mask(cs[..., :, None] - cs[..., None, :], T)


def seg_cumprod(x):
    T = x.shape[-1]
    cp = torch.exp(x).cumprod(-1)
    return _mask(torch.log(cp[..., :, None] / cp[..., None, :]), T)


def seg_stable(x, diag=-1):
    T = x.shape[-1]
    terms = x[..., :, None].expand(*x.shape, T).masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(diag), 0)
    return _mask(terms.cumsum(-2), T)


def test_segsum_accepts_right_answers(capsys):
    check_segsum(ref.segsum)
    check_segsum(seg_stable)
    assert "✅ check_segsum passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (seg_naive, r"naive segsum .*stable form"),
        (ref.segsum_naive, r"naive segsum"),
        (seg_cumprod, r"-inf.*ratio of cumprods.*underflows to 0"),
        (lambda x: seg_stable(x, diag=0), r"off-by-one on the diagonal|S\[i, i\] = 0"),
        (lambda x: torch.nan_to_num(seg_stable(x), neginf=0.0), r"must be -inf"),
        (lambda x: seg_stable(x).transpose(-1, -2), r"must be -inf"),
        (lambda x: torch.exp(seg_stable(x)), r"exp\(segsum\) instead of segsum"),
        (
            lambda x: _mask(seg_stable(x).nan_to_num(neginf=0.0), x.shape[-1], diagonal=-1),
            r"diagonal S\[i, i\]",
        ),
    ],
    ids=[
        "naive",
        "reference_naive",
        "cumprod_ratio",
        "off_by_one",
        "zeros_above",
        "transposed",
        "exp",
        "diag_inf",
    ],
)
def test_segsum_names_the_mistake(wrong, hint):
    with pytest.raises(ExerciseFailed, match=re.compile(hint, re.S)):
        check_segsum(wrong)


def test_segsum_naive_fails_only_on_the_extreme_case():
    with pytest.raises(ExerciseFailed, match=r"extreme decay") as info:
        check_segsum(seg_naive)
    assert "first mismatch" in str(info.value)


# ------------------------------------------------------------------- exercise 3: chunk state in PyTorch


def cs_torch(x, B, dt, dA, *, decay="right", dt_in=True, modulo=False, acc=torch.float32, pad=True):
    b, l, h, p = x.shape
    g, n = B.shape[2:]
    nc, Q = dt.shape[2:]
    if pad:
        x = torch.nn.functional.pad(x, (0, 0, 0, 0, 0, nc * Q - l))
        B = torch.nn.functional.pad(B, (0, 0, 0, 0, 0, nc * Q - l))
    x = x.to(acc).reshape(b, nc, Q, h, p)
    idx = torch.arange(h) % g if modulo else torch.arange(h) // (h // g)
    B = B.to(acc).reshape(b, nc, Q, g, n)[:, :, :, idx]
    last = dA[..., -1:]
    w = {
        "right": torch.exp(last - dA),
        "flipped": torch.exp(dA - last),
        "start": torch.exp(dA),
        "ratio": torch.exp(last) / torch.exp(dA),
        # the decay from k measured with an exclusive cumsum (the steps before k): k's own step included
        "exclusive": torch.exp(last - (dA - torch.diff(dA, dim=-1, prepend=torch.zeros_like(dA[..., :1])))),
        "double": 2 * torch.exp(last - dA),  # a mistake no detector knows
    }[decay]
    if dt_in:
        w = w * dt
    return torch.einsum("bhck,bckhp,bckhn->bchpn", w.to(acc), x, B).float()


def test_chunk_state_accepts_right_answers(capsys):
    check_chunk_state(ref.chunk_state)
    check_chunk_state(cs_torch)
    assert "✅ check_chunk_state passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (lambda *a: cs_torch(*a, decay="flipped"), r"decay exponent flipped"),
        (lambda *a: cs_torch(*a, decay="start"), r"decay from the chunk START"),
        (lambda *a: cs_torch(*a, decay="ratio"), r"Subtract inside the exp"),
        (lambda *a: cs_torch(*a, dt_in=False), r"input term without dt"),
        (lambda *a: cs_torch(*a, modulo=True), r"group mapping \(h % g\)"),
        (lambda *a: cs_torch(*a, acc=a[0].dtype), r"bfloat16 .* ACCUMULATED in float32"),
        (lambda *a: cs_torch(*a).to(a[0].dtype), r"dtype torch.bfloat16, expected torch.float32"),
        (lambda *a: cs_torch(*a, pad=False), r"ragged last chunk.*pad x and B along l with zeros"),
        (lambda *a: cs_torch(*a, decay="exclusive"), r"exclusive cumsum.*INCLUSIVE cumsum"),
    ],
    ids=[
        "flipped",
        "from_start",
        "ratio_nan",
        "no_dt",
        "h_mod_g",
        "bf16_accumulation",
        "bf16_output",
        "no_pad",
        "exclusive_cumsum",
    ],
)
def test_chunk_state_names_the_mistake(wrong, hint):
    with pytest.raises(ExerciseFailed, match=re.compile(hint, re.S)):
        check_chunk_state(wrong)


def test_chunk_state_hints_name_no_unconfirmed_cause():
    """The first hidden case is ragged: a wrong answer with right padding must not be told to pad."""
    for wrong in (lambda *a: cs_torch(*a, decay="exclusive"), lambda *a: cs_torch(*a, decay="double")):
        with pytest.raises(ExerciseFailed, match=r"ragged") as info:
            check_chunk_state(wrong)
        assert "pad" not in _hint_of(info.value), _hint_of(info.value)
    with pytest.raises(ExerciseFailed) as info:
        check_chunk_state(lambda *a: cs_torch(*a, decay="double"))
    assert "every chunk (5)" in _hint_of(info.value)  # where, not a guessed why


# --------------------------------------------------------------------- exercise 4: the chunk cumsum kernel

ZERO = ct.PaddingMode.ZERO


@ct.kernel
def cumsum_right(dt, A, dt_out, dA_cumsum, Q: ct.Constant[int]):
    bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)
    dt_c = ct.load(dt, (bi, c, hi), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,))
    dA_cs = ct.cumsum(dt_c * ct.load(A, (hi,), shape=()), axis=0)
    ct.store(dt_out, (bi, hi, c, 0), dt_c.reshape((1, 1, 1, Q)))
    ct.store(dA_cumsum, (bi, hi, c, 0), dA_cs.reshape((1, 1, 1, Q)))


@ct.kernel
def cumsum_stub(dt, A, dt_out, dA_cumsum, Q: ct.Constant[int]):
    bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)
    dt_c = ct.zeros((Q,), dtype=ct.float32)
    dA_cs = ct.zeros((Q,), dtype=ct.float32)
    ct.store(dt_out, (bi, hi, c, 0), dt_c.reshape((1, 1, 1, Q)))
    ct.store(dA_cumsum, (bi, hi, c, 0), dA_cs.reshape((1, 1, 1, Q)))


@ct.kernel
def cumsum_no_store(dt, A, dt_out, dA_cumsum, Q: ct.Constant[int]):
    ct.load(dt, (ct.bid(0), ct.bid(1), ct.bid(2)), shape=(1, Q, 1))


@ct.kernel
def cumsum_unpadded(dt, A, dt_out, dA_cumsum, Q: ct.Constant[int]):
    bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)
    dt_c = ct.load(dt, (bi, c, hi), shape=(1, Q, 1)).reshape((Q,))
    dA_cs = ct.cumsum(dt_c * ct.load(A, (hi,), shape=()), axis=0)
    ct.store(dt_out, (bi, hi, c, 0), dt_c.reshape((1, 1, 1, Q)))
    ct.store(dA_cumsum, (bi, hi, c, 0), dA_cs.reshape((1, 1, 1, Q)))


@ct.kernel
def cumsum_without_A(dt, A, dt_out, dA_cumsum, Q: ct.Constant[int]):
    bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)
    dt_c = ct.load(dt, (bi, c, hi), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,))
    ct.store(dt_out, (bi, hi, c, 0), dt_c.reshape((1, 1, 1, Q)))
    ct.store(dA_cumsum, (bi, hi, c, 0), ct.cumsum(dt_c, axis=0).reshape((1, 1, 1, Q)))


@ct.kernel
def cumsum_reversed(dt, A, dt_out, dA_cumsum, Q: ct.Constant[int]):
    bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)
    dt_c = ct.load(dt, (bi, c, hi), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,))
    dA_cs = ct.cumsum(dt_c * ct.load(A, (hi,), shape=()), axis=0, reverse=True)
    ct.store(dt_out, (bi, hi, c, 0), dt_c.reshape((1, 1, 1, Q)))
    ct.store(dA_cumsum, (bi, hi, c, 0), dA_cs.reshape((1, 1, 1, Q)))


@ct.kernel
def cumsum_exclusive(dt, A, dt_out, dA_cumsum, Q: ct.Constant[int]):
    bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)
    dt_c = ct.load(dt, (bi, c, hi), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,))
    dA = dt_c * ct.load(A, (hi,), shape=())
    ct.store(dt_out, (bi, hi, c, 0), dt_c.reshape((1, 1, 1, Q)))
    ct.store(dA_cumsum, (bi, hi, c, 0), (ct.cumsum(dA, axis=0) - dA).reshape((1, 1, 1, Q)))


@ct.kernel
def cumsum_doubled(dt, A, dt_out, dA_cumsum, Q: ct.Constant[int]):
    bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)
    dt_c = ct.load(dt, (bi, c, hi), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,))
    dA_cs = ct.cumsum(dt_c * ct.load(A, (hi,), shape=()), axis=0) * 2.0  # a scaled running sum
    ct.store(dt_out, (bi, hi, c, 0), dt_c.reshape((1, 1, 1, Q)))
    ct.store(dA_cumsum, (bi, hi, c, 0), dA_cs.reshape((1, 1, 1, Q)))


@ct.kernel
def cumsum_bad_shape(dt, A, dt_out, dA_cumsum, Q: ct.Constant[int]):
    bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)
    dt_c = ct.load(dt, (bi, c, hi), shape=(1, Q + 1, 1), padding_mode=ZERO)  # not a power of two
    ct.store(dt_out, (bi, hi, c, 0), dt_c.reshape((1, 1, 1, Q + 1)))


def test_chunk_cumsum_kernel_accepts_a_right_kernel(capsys):
    check_chunk_cumsum_kernel(cumsum_right)
    out = capsys.readouterr().out
    assert "✅ check_chunk_cumsum_kernel passed on the cpu backend" in out
    assert "running on the cpu backend" in out


@pytest.mark.parametrize(
    "kernel, hint",
    [
        (cumsum_stub, r"stored only zeros"),
        (cumsum_no_store, r"stored nothing"),
        (cumsum_unpadded, r"with dt zero-padded in memory .* padding_mode=ct.PaddingMode.ZERO"),
        (cumsum_without_A, r"With A = 1 for every head, your output is right"),
        (cumsum_reversed, r"the sum runs backwards"),
        (cumsum_bad_shape, r"\(TypeCheckingError\):\n.*not a power of two.*\nHint: cuTile type-checks.*"
                           r"powers of two"),
        (cumsum_exclusive, r"starts one position late"),
    ],
    ids=["stub", "no_store", "no_padding", "without_A", "reversed", "compile_error", "exclusive"],
)
def test_chunk_cumsum_kernel_names_the_mistake(kernel, hint):
    with pytest.raises(ExerciseFailed, match=re.compile(hint, re.S)):
        check_chunk_cumsum_kernel(kernel)


def test_chunk_cumsum_kernel_hints_name_no_unconfirmed_cause():
    """Right padding, wrong cumsum, on a ragged case: the hint must not talk about padding."""
    for kernel in (cumsum_exclusive, cumsum_doubled):
        with pytest.raises(ExerciseFailed, match=r"ragged") as info:
            check_chunk_cumsum_kernel(kernel)
        assert "padding" not in _hint_of(info.value), _hint_of(info.value)
    with pytest.raises(ExerciseFailed) as info:  # the impulse reads the factor off
        check_chunk_cumsum_kernel(cumsum_doubled)
    assert "your running sum is scaled by 2" in _hint_of(info.value)


# ---------------------------------------------------------------------- exercise 5: the chunk state kernel


LOG2E = 1.4426950408889634


@ct.kernel
def state_kernel(x, B, dt_out, dA_cumsum, states, Q: ct.Constant[int], TP: ct.Constant[int],
                 TN: ct.Constant[int], HEADS_PER_GROUP: ct.Constant[int], PAD: ct.Constant[bool],
                 MODULO: ct.Constant[bool], FLIP: ct.Constant[bool], EXP2: ct.Constant[int]):  # fmt: skip
    """A right kernel (bf16 operands, float32 accumulator) when PAD and not MODULO, FLIP, EXP2; each flag
    reproduces one typical mistake. EXP2 1 computes the decay as exp2(v * LOG2E) (right), 2 as exp2(v)."""
    bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)
    g = hi % B.shape[2] if MODULO else hi // HEADS_PER_GROUP
    if PAD:
        x_c = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((Q, TP))
        B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    else:
        x_c = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP)).reshape((Q, TP))
        B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN)).reshape((Q, TN))
    dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    dA_cs = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    dA_last = ct.extract(dA_cs, (Q - 1,), shape=(1,))
    if FLIP:
        w = ct.exp(dA_cs - dA_last) * dt_c
    elif EXP2 == 1:
        w = ct.exp2((dA_last - dA_cs) * LOG2E) * dt_c
    elif EXP2 == 2:
        w = ct.exp2(dA_last - dA_cs) * dt_c  # forgot LOG2E
    else:
        w = ct.exp(dA_last - dA_cs) * dt_c
    xw = (x_c.astype(ct.float32) * w[:, None]).astype(x.dtype)
    state = ct.mma(ct.transpose(xw), B_c, ct.zeros((TP, TN), dtype=ct.float32))
    ct.store(states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))


def _check_variant(monkeypatch, pad=True, modulo=False, flip=False, exp2=0):
    """Run check_chunk_state_kernel on ``state_kernel`` with its mistake flags appended to the launch args."""
    import mamba2_tutorial.exercises._harness as harness

    def run_with_flags(check, kernel, grid, args, case, hint, backend):
        return harness.run_kernel(check, kernel, grid, (*args, pad, modulo, flip, exp2), case, hint, backend)

    monkeypatch.setattr("mamba2_tutorial.exercises.chunk_state.run_kernel", run_with_flags)
    check_chunk_state_kernel(state_kernel)


@ct.kernel
def state_stub(x, B, dt_out, dA_cumsum, states, Q: ct.Constant[int], TP: ct.Constant[int],
               TN: ct.Constant[int], HEADS_PER_GROUP: ct.Constant[int]):  # fmt: skip
    bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)
    state = ct.zeros((TP, TN), dtype=ct.float32)
    ct.store(states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))


@ct.kernel
def state_no_decay(x, B, dt_out, dA_cumsum, states, Q: ct.Constant[int], TP: ct.Constant[int],
                   TN: ct.Constant[int], HEADS_PER_GROUP: ct.Constant[int]):  # fmt: skip
    bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)
    x_c = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((Q, TP))
    B_c = ct.load(B, (bi, c, hi // HEADS_PER_GROUP, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape(
        (Q, TN)
    )
    dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    xw = x_c.astype(ct.float32) * dt_c[:, None]  # forgot the decay exp(dA_last - dA_cs)
    state = ct.mma(ct.transpose(xw), B_c.astype(ct.float32), ct.zeros((TP, TN), dtype=ct.float32))
    ct.store(states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))


@ct.kernel
def state_mixed_mma(x, B, dt_out, dA_cumsum, states, Q: ct.Constant[int], TP: ct.Constant[int],
                    TN: ct.Constant[int], HEADS_PER_GROUP: ct.Constant[int]):  # fmt: skip
    """Right, except that B is not cast: fine for float32 inputs, a compile error for bfloat16 ones."""
    bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)
    x_c = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((Q, TP))
    B_c = ct.load(B, (bi, c, hi // HEADS_PER_GROUP, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape(
        (Q, TN)
    )
    dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    dA_cs = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    w = ct.exp(ct.extract(dA_cs, (Q - 1,), shape=(1,)) - dA_cs) * dt_c
    xw = x_c.astype(ct.float32) * w[:, None]
    state = ct.mma(ct.transpose(xw), B_c, ct.zeros((TP, TN), dtype=ct.float32))
    ct.store(states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))


def test_chunk_state_kernel_accepts_a_right_kernel(monkeypatch, capsys):
    _check_variant(monkeypatch)
    _check_variant(monkeypatch, exp2=1)  # exp2 with LOG2E is exp
    assert capsys.readouterr().out.count("✅ check_chunk_state_kernel passed on the cpu backend") == 2


def test_chunk_state_kernel_hints_name_no_unconfirmed_cause(monkeypatch):
    """Right padding, decay in exp2 without LOG2E, on a ragged case: named, and not a padding hint."""
    with pytest.raises(ExerciseFailed, match=r"ragged") as info:
        _check_variant(monkeypatch, exp2=2)
    assert "padding" not in _hint_of(info.value) and "2**v" in _hint_of(info.value), _hint_of(info.value)
    with pytest.raises(ExerciseFailed) as info:  # and the padding hint comes with its confirmation
        _check_variant(monkeypatch, pad=False)
    assert "with the same inputs zero-padded in memory (no load past an end) your kernel is right" in str(
        info.value)


def test_chunk_state_kernel_rejects_stub_and_wrong_math():
    with pytest.raises(ExerciseFailed, match="stored only zeros"):
        check_chunk_state_kernel(state_stub)
    with pytest.raises(ExerciseFailed, match=r"(With dA_cumsum = 0 \(every decay 1\), your output is right|"
                       r"dt_k alone: the decay is missing)"):
        check_chunk_state_kernel(state_no_decay)
    mixed = re.compile(r"bfloat16 inputs.*\(TypeCheckingError\):\n.*\nHint: cuTile type-checks.*"
                       r"share one dtype", re.S)
    with pytest.raises(ExerciseFailed, match=mixed):
        check_chunk_state_kernel(state_mixed_mma)


# ------------------------------------------------------------------- exercise 6: the state passing kernel


@ct.kernel
def passing_kernel(states, dA_cumsum, initial_states, chunk_init_states, final_states,
                   Q: ct.Constant[int], TP: ct.Constant[int], TN: ct.Constant[int],
                   ORDER: ct.Constant[int], FIRST: ct.Constant[bool],
                   USE_INIT: ct.Constant[bool], PAD: ct.Constant[bool]):  # fmt: skip
    """Right with ORDER=0, FIRST=False, USE_INIT=True, PAD=True; ORDER 1 stores after the update, ORDER 2
    decays after adding, ORDER 3 doubles the local state, ORDER 4 stores 1.5 times the final state (no
    experiment isolates it);
    FIRST uses the decay of the chunk's first position; USE_INIT=False starts from zeros; PAD=False loads the
    local states unpadded."""
    bi, hi = ct.bid(0), ct.bid(1)
    state = ct.load(initial_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO).reshape((TP, TN))
    if not USE_INIT:
        state = ct.zeros((TP, TN), dtype=ct.float32)
    for c in range(states.shape[1]):
        if ORDER != 1:
            ct.store(chunk_init_states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))
        k = 0 if FIRST else Q - 1
        decay = ct.exp(ct.load(dA_cumsum, (bi, hi, c, k), shape=()))
        if PAD:
            local = ct.load(states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        else:
            local = ct.load(states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN))
        local = local.reshape((TP, TN))
        if ORDER == 2:
            state = decay * (state + local)
        elif ORDER == 3:
            state = decay * state + 2.0 * local
        else:
            state = decay * state + local
        if ORDER == 1:
            ct.store(chunk_init_states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))
    ct.store(final_states, (bi, hi, 0, 0), (1.5 * state if ORDER == 4 else state).reshape((1, 1, TP, TN)))


@ct.kernel
def passing_loop_type_change(states, dA_cumsum, initial_states, chunk_init_states, final_states,
                             Q: ct.Constant[int], TP: ct.Constant[int], TN: ct.Constant[int]):  # fmt: skip
    """Starts the carried state as a float64 tile: its type changes in the loop, a cuTile compile error."""
    bi, hi = ct.bid(0), ct.bid(1)
    state = ct.zeros((TP, TN), dtype=ct.float64)
    for c in range(states.shape[1]):
        local = ct.load(states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        local = local.reshape((TP, TN))
        state = state.astype(ct.float32) + local
    ct.store(final_states, (bi, hi, 0, 0), state.reshape((1, 1, TP, TN)))


def _check_passing(monkeypatch, order=0, first=False, use_init=True, pad=True):
    import mamba2_tutorial.exercises._harness as harness

    def run_with_flags(check, kernel, grid, args, case, hint, backend):
        flags = (order, first, use_init, pad)
        return harness.run_kernel(check, kernel, grid, (*args, *flags), case, hint, backend)

    monkeypatch.setattr("mamba2_tutorial.exercises.state_passing.run_kernel", run_with_flags)
    check_state_passing_kernel(passing_kernel)


def test_state_passing_kernel_accepts_a_right_kernel(monkeypatch, capsys):
    _check_passing(monkeypatch)
    # loads without padding are right here: the state update is elementwise, so the (NaN) padding past p and
    # n never mixes into a stored element (unlike an mma's sum over its padded axis, exercises 5 and 7)
    _check_passing(monkeypatch, pad=False)
    assert capsys.readouterr().out.count("✅ check_state_passing_kernel passed on the cpu backend") == 2


def test_state_passing_kernel_hints_name_no_unconfirmed_cause(monkeypatch):
    """Every hidden case has p or n below its tile size; a mistake that is not padding gets no padding
    hint."""
    with pytest.raises(ExerciseFailed, match=r"p=5, n=7") as info:
        _check_passing(monkeypatch, order=4)
    assert "padding" not in _hint_of(info.value) and "The wrong elements are in" in _hint_of(info.value)
    assert "your output is right" not in _hint_of(info.value)  # no experiment confirmed a cause
    with pytest.raises(ExerciseFailed) as info:  # twice the local state: the experiment names its term
        _check_passing(monkeypatch, order=3)
    assert "with states doubled: your kernel counts the chunk's own local state twice" in _hint_of(info.value)


def test_state_passing_kernel_rejects_a_loop_carried_type_change():
    loop = re.compile(r"\(TypeCheckingError\):\n\s*Type of `state` depends on path.*\nHint: cuTile "
                      r"type-checks.*loop keeps one shape and dtype", re.S)
    with pytest.raises(ExerciseFailed, match=loop):
        check_state_passing_kernel(passing_loop_type_change)


# --------------------------------------------------------------------- exercise 7: the chunk scan kernel


@ct.kernel
def scan_kernel(x, dt_out, dA_cumsum, C, B, chunk_init_states, y, Q: ct.Constant[int],
                TP: ct.Constant[int], TN: ct.Constant[int], HEADS_PER_GROUP: ct.Constant[int],
                MISTAKE: ct.Constant[int]):  # fmt: skip
    """A right chunk scan (bf16 operands, float32 accumulators) for MISTAKE 0; each other value reproduces one
    mistake: 1 no causal mask, 2 flipped decay, 3 exp2 without LOG2E, 4 no dt, 5 no state term, 6 state term
    without its decay, 7 B Cᵀ for C Bᵀ, 8 group h % g, 9 no padding on the loads, 10 P times 3 (unknown),
    11 P left in float32 for the mma (right for float32 inputs, a compile error for bfloat16 ones), 12 scales
    y by 1.5 (no experiment isolates it)."""
    bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)
    g = hi % C.shape[2] if MISTAKE == 8 else hi // HEADS_PER_GROUP
    if MISTAKE == 9:
        x_c = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP)).reshape((Q, TP))
        C_c = ct.load(C, (bi, c, g, 0), shape=(1, Q, 1, TN)).reshape((Q, TN))
        B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN)).reshape((Q, TN))
    else:
        x_c = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((Q, TP))
        C_c = ct.load(C, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
        B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    state = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
    state = state.reshape((TP, TN))
    dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    dA_cs = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    if MISTAKE == 7:
        CB = ct.mma(B_c, ct.transpose(C_c), ct.zeros((Q, Q), dtype=ct.float32))
    else:
        CB = ct.mma(C_c, ct.transpose(B_c), ct.zeros((Q, Q), dtype=ct.float32))
    pos = ct.arange(Q, dtype=ct.int32)
    causal = pos[:, None] >= pos[None, :]
    seg = dA_cs[:, None] - dA_cs[None, :]
    if MISTAKE == 2:
        decay = ct.exp(dA_cs[None, :] - dA_cs[:, None])
    elif MISTAKE == 3:
        decay = ct.exp2(ct.minimum(seg, 0.0))
    else:
        decay = ct.exp(ct.minimum(seg, 0.0))
    dt_k = ct.ones((Q,), dtype=ct.float32) if MISTAKE == 4 else dt_c
    if MISTAKE == 1:
        P = CB * decay * dt_k[None, :]
    else:
        P = ct.where(causal, CB * decay * dt_k[None, :], 0.0)
    if MISTAKE == 10:
        P = P * 3.0
    if MISTAKE == 11:
        y_c = ct.mma(P, x_c, ct.zeros((Q, TP), dtype=ct.float32))
    else:
        y_c = ct.mma(P.astype(x.dtype), x_c, ct.zeros((Q, TP), dtype=ct.float32))
    past = ct.mma(C_c, ct.transpose(state.astype(C.dtype)), ct.zeros((Q, TP), dtype=ct.float32))
    if MISTAKE == 6:
        y_c = y_c + past
    elif MISTAKE != 5:
        y_c = y_c + past * ct.exp(dA_cs)[:, None]
    if MISTAKE == 12:
        y_c = y_c * 1.5
    ct.store(y, (bi, c, hi, 0), y_c.astype(y.dtype).reshape((1, Q, 1, TP)))


@ct.kernel
def scan_stub(x, dt_out, dA_cumsum, C, B, chunk_init_states, y, Q: ct.Constant[int], TP: ct.Constant[int],
              TN: ct.Constant[int], HEADS_PER_GROUP: ct.Constant[int]):  # fmt: skip
    bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)
    ct.store(y, (bi, c, hi, 0), ct.zeros((1, Q, 1, TP), dtype=ct.float32).astype(y.dtype))


def _check_scan(monkeypatch, mistake=0):
    import mamba2_tutorial.exercises._harness as harness

    def run_with_flag(check, kernel, grid, args, case, hint, backend):
        return harness.run_kernel(check, kernel, grid, (*args, mistake), case, hint, backend)

    monkeypatch.setattr("mamba2_tutorial.exercises.chunk_scan.run_kernel", run_with_flag)
    check_chunk_scan_kernel(scan_kernel)


def test_chunk_scan_kernel_accepts_a_right_kernel(monkeypatch, capsys):
    _check_scan(monkeypatch)
    assert "✅ check_chunk_scan_kernel passed on the cpu backend: 5 hidden cases" in capsys.readouterr().out


def test_chunk_scan_kernel_rejects_stub_unknown_mistake_and_mixed_mma(monkeypatch):
    with pytest.raises(ExerciseFailed, match="stored only zeros"):
        check_chunk_scan_kernel(scan_stub)
    with pytest.raises(ExerciseFailed, match=r"ragged") as info:  # P times 3: one source reads the factor
        _check_scan(monkeypatch, 10)
    found = _hint_of(info.value)
    assert "with the value 3 where it is 1: every entry of your P is scaled by that factor" in found
    assert "padding" not in found
    with pytest.raises(ExerciseFailed, match=r"ragged") as info:  # y * 1.5: no experiment isolates it
        _check_scan(monkeypatch, 12)
    found = _hint_of(info.value)
    assert "The wrong elements are in every" in found and "your output" not in found
    mixed = re.compile(r"bfloat16 inputs.*\(TypeCheckingError\):.*\nHint: cuTile type-checks.*"
                       r"share one dtype", re.S)
    with pytest.raises(ExerciseFailed, match=mixed):
        _check_scan(monkeypatch, 11)


# ------------------------------------------------------- exercise 8: the state gradient, carried backwards


@ct.kernel
def passing_bwd_kernel(dS_out, dA_cumsum, chunk_init_states, dfinal_states,
                       dstates, ddA_last, dinitial_states,
                       Q: ct.Constant[int], TP: ct.Constant[int], TN: ct.Constant[int],
                       MISTAKE: ct.Constant[int]):  # fmt: skip
    """Right for MISTAKE 0; otherwise: 1 walks the chunks first to last, 2 stores dstates after the update,
    3 decays by the chunk's first position, 4 leaves the decay out of ddA_last, 5 takes ddA_last from the
    updated gradient, 6 starts from zeros, 7 doubles dS_out, 8 scales ddA_last by 1 + c/4 (no experiment
    isolates it)."""
    bi, hi = ct.bid(0), ct.bid(1)
    dS = ct.load(dfinal_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO).reshape((TP, TN))
    if MISTAKE == 6:
        dS = ct.zeros((TP, TN), dtype=ct.float32)
    nchunks = dS_out.shape[1]
    for i in range(nchunks):
        c = i if MISTAKE == 1 else nchunks - 1 - i
        if MISTAKE != 2:
            ct.store(dstates, (bi, c, hi, 0, 0), dS.reshape((1, 1, 1, TP, TN)))
        g = ct.exp(ct.load(dA_cumsum, (bi, hi, c, 0 if MISTAKE == 3 else Q - 1), shape=()))
        S = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        S = S.reshape((TP, TN))
        own = ct.load(dS_out, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO).reshape((TP, TN))
        new = g * dS + (2.0 * own if MISTAKE == 7 else own)
        part = ct.sum((new if MISTAKE == 5 else dS) * S)
        part = part * (1.0 + 0.25 * c) if MISTAKE == 8 else part  # a factor that grows by chunk: unknown
        ct.store(ddA_last, (bi, hi, c), (part if MISTAKE == 4 else g * part).reshape((1, 1, 1)))
        dS = new
        if MISTAKE == 2:
            ct.store(dstates, (bi, c, hi, 0, 0), dS.reshape((1, 1, 1, TP, TN)))
    ct.store(dinitial_states, (bi, hi, 0, 0), dS.reshape((1, 1, TP, TN)))


def _check_passing_bwd(monkeypatch, mistake=0):
    import mamba2_tutorial.exercises._harness as harness

    def run_with_mistake(check, kernel, grid, args, case, hint, backend):
        return harness.run_kernel(check, kernel, grid, (*args, mistake), case, hint, backend)

    monkeypatch.setattr("mamba2_tutorial.exercises.state_passing_bwd.run_kernel", run_with_mistake)
    check_state_passing_bwd_kernel(passing_bwd_kernel)


def test_state_passing_bwd_kernel_accepts_a_right_kernel(monkeypatch, capsys):
    _check_passing_bwd(monkeypatch)
    assert "✅ check_state_passing_bwd_kernel passed on the cpu backend" in capsys.readouterr().out


def test_state_passing_bwd_kernel_hints_name_no_unconfirmed_cause(monkeypatch):
    with pytest.raises(ExerciseFailed, match=r"p=5, n=7") as info:
        _check_passing_bwd(monkeypatch, 8)
    hint = _hint_of(info.value)
    assert "padding" not in hint  # the output that is wrong, confirmed, and no cause within it
    assert hint.startswith("Hint: With chunk_init_states = 0 (so ddA_last must be 0), your output is right, "
                           "so ddA_last is what goes wrong"), hint


def test_state_passing_bwd_reference_is_autograd_of_the_forward():
    """The check's float64 reference is the gradient of the forward recurrence (reference.state_passing)."""
    from mamba2_tutorial.exercises.state_passing_bwd import state_passing_backward

    gen = torch.Generator().manual_seed(0)
    b, nc, h, p, n, Q = 2, 4, 3, 5, 6, 8
    states = torch.randn(b, nc, h, p, n, generator=gen, dtype=torch.float64, requires_grad=True)
    dA = (-torch.rand(b, h, nc, Q, generator=gen, dtype=torch.float64).cumsum(-1)).requires_grad_()
    init = torch.randn(b, h, p, n, generator=gen, dtype=torch.float64, requires_grad=True)
    entering, final = ref.state_passing(states, dA, init)
    d_entering = torch.randn(entering.shape, generator=gen, dtype=torch.float64)
    d_final = torch.randn(final.shape, generator=gen, dtype=torch.float64)
    d_states, d_dA, d_init = torch.autograd.grad((entering * d_entering).sum() + (final * d_final).sum(),
                                                 (states, dA, init))
    dstates, ddA_last, dinit = state_passing_backward(d_entering, dA, entering.detach(), d_final)
    assert torch.allclose(dstates, d_states) and torch.allclose(dinit, d_init)
    assert torch.allclose(ddA_last, d_dA[..., -1]) and not d_dA[..., :-1].any()


# ------------------------------------------------------------------------------------ tiered help


def test_hint_tiers_follow_the_last_failure(capsys):
    with pytest.raises(ExerciseFailed) as info:
        check_chunk_cumsum_kernel(cumsum_exclusive)
    message = str(info.value)
    assert "hint(2)" in message and "show_solution('ex04')" in message
    capsys.readouterr()
    exercise_hint()
    first = capsys.readouterr().out
    assert "check_chunk_cumsum_kernel" in first and "one position late" in first and "hint(2)" in first
    exercise_hint(2)
    recipe = capsys.readouterr().out
    assert "Recipe:" in recipe and "ct.cumsum" in recipe and "show_solution('ex04')" in recipe
    assert "def chunk_cumsum_kernel" not in first + recipe  # the answer itself only on request
    exercise_hint(3)
    assert "ask for it explicitly" in capsys.readouterr().out
    with pytest.raises(ValueError, match="level"):
        exercise_hint(0)


def test_show_solution_prints_the_worked_answer(capsys):
    text = show_solution("ex07")
    assert text.startswith("# ex07_cutile_chunk_scan.ipynb") and "def chunk_scan_kernel" in text
    assert "ct.where(causal" in text and "placeholder" not in text
    assert "def chunk_scan_kernel" in capsys.readouterr().out
    for exercise in sorted(EXPECTED):
        assert "def " in show_solution(exercise[:4])
    with pytest.raises(ValueError, match="no single solution notebook"):
        show_solution("ex99")


# ------------------------------------------------------------------------------ on a GPU (run on the H200)


@pytest.mark.gpu
def test_kernel_checks_run_on_the_gpu_and_the_cpu_executor(monkeypatch, capsys):
    check_chunk_cumsum_kernel(cumsum_right)
    _check_variant(monkeypatch)
    _check_passing(monkeypatch)
    out = capsys.readouterr().out
    assert out.count("running on the gpu backend") == 3, out
    assert "✅ check_state_passing_kernel passed on the gpu and the cpu backend" in out
    assert "✅ check_chunk_cumsum_kernel passed on the gpu and the cpu backend" in out
    assert "✅ check_chunk_state_kernel passed on the gpu and the cpu backend" in out


@pytest.mark.gpu
def test_kernel_checks_reject_mistakes_on_a_gpu_machine(monkeypatch):
    """A GPU may happen to read zeros past the end of an array; the check still fails a kernel without
    padding_mode=ZERO (the CPU executor pass poisons the padding), and the other mistakes fail on the GPU."""
    with pytest.raises(ExerciseFailed, match=r"padding_mode"):
        check_chunk_cumsum_kernel(cumsum_unpadded)
    with pytest.raises(ExerciseFailed, match=r"gpu backend.*\n(.*\n)*.*the sum runs backwards"):
        check_chunk_cumsum_kernel(cumsum_reversed)
    with pytest.raises(ExerciseFailed, match=r"padding_mode"):
        _check_variant(monkeypatch, pad=False)
    with pytest.raises(ExerciseFailed, match=r"gpu backend.*\n(.*\n)*.*wrong group"):
        _check_variant(monkeypatch, modulo=True)
    with pytest.raises(ExerciseFailed, match=r"gpu backend.*\n(.*\n)*.*store the state after the update"):
        _check_passing(monkeypatch, order=1)

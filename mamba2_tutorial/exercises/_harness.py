"""The machinery shared by every exercise check.

A check runs the learner's function on hidden cases (distinct sizes in every dimension, ragged lengths,
several seeds, extreme decay, low precision) and compares with :mod:`mamba2_tutorial.reference` through
:func:`mamba2_tutorial.lessons.checks.assert_close`. On a wrong answer it raises :class:`ExerciseFailed`
naming the case, the error, the first wrong element, where the wrong elements are, and a hint.

A hint names a cause only once a check has confirmed it:

1. *mistake detectors* (:class:`Mistake`) recompute the output the way a typical wrong solution would (e.g.
   ``exp(A)`` instead of ``exp(dt * A)``); if the learner's output matches one, the hint names that mistake;
2. *probes* (:class:`Probe`) re-run the learner's code on a counterfactual input, e.g. the same case with the
   arrays padded in memory so that no load runs past an end: if the learner's code is right there, padding is
   the cause and the hint says so;
3. otherwise the hint names no cause: it says where the wrong elements are and gives the exercise's nudge.

Help comes in tiers: the failure message carries the first hint; :func:`hint` repeats it (``hint(1)``) or
prints a step-by-step recipe for the same failure (``hint(2)``); :func:`show_solution` prints the worked
answer, only when asked.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

#: check name -> (exercise id, level-2 recipe), filled by each exercise module with :func:`register`
_EXERCISES: dict[str, tuple[str, str]] = {}
#: the last failure of any check: what :func:`hint` reads
_LAST: dict = {}


def register(check: str, exercise: str, recipe: str) -> None:
    """Declare that ``check`` grades exercise ``exercise`` (e.g. "ex05") and give its step-by-step recipe."""
    _EXERCISES[check] = (exercise, recipe)


class ExerciseFailed(AssertionError):
    """A learner's answer is wrong. The message says on which case, where, by how much and what to try."""

    def _render_traceback_(self) -> list[str]:
        """What IPython/Jupyter shows: the message, without the check's own frames.

        If the learner's code raised, its traceback comes first (that is where the bug is).
        """
        lines: list[str] = []
        cause = self.__cause__
        # (a cuTile compile error already names the kernel line in its message: no traceback needed)
        if cause is not None and not isinstance(cause, ExerciseFailed) and not _is_tile_error(cause):
            tb = cause.__traceback__
            while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
                tb = tb.tb_next  # start at the learner's code, not at the check calling it
            lines += "".join(traceback.format_exception(type(cause), cause, tb)).splitlines()
            lines += ["", "Your code raised the error above; the check's report:", ""]
        lines.append(f"\x1b[0;31mExerciseFailed\x1b[0m: {self}")
        return "\n".join(lines).splitlines()


@dataclass
class Case:
    """One hidden test case: a name, the seed and the tensors given to the learner (for the diagnostic)."""

    name: str
    seed: int
    inputs: dict = field(default_factory=dict)

    def describe(self) -> str:
        parts = []
        for key, value in self.inputs.items():
            if isinstance(value, torch.Tensor):
                dtype = str(value.dtype).replace("torch.", "")
                parts.append(f"{key}: {tuple(value.shape)} {dtype}")
            else:
                parts.append(f"{key}={value!r}")
        return f"case '{self.name}' (seed {self.seed}; " + ", ".join(parts) + ")"


@dataclass
class Mistake:
    """A typical wrong solution: ``compute(case)`` returns what it would output, ``hint`` explains the fix
    (the first-tier hint), ``recipe`` (optional) how to write the fix step by step (the second tier)."""

    label: str
    compute: Callable[[Case], torch.Tensor]
    hint: str
    recipe: str | None = None


@dataclass
class Probe:
    """A counterfactual re-run that confirms a cause: ``confirms()`` runs the learner's code again on a
    changed input (e.g. padded in memory) and returns True when the learner's answer is right there. Only then
    does the hint name the cause ``label``."""

    label: str
    confirms: Callable[[], bool]
    hint: str
    recipe: str | None = None


def fail(check: str, case: Case | None, what: str, hint: str | None = None,
         recipe: str | None = None) -> ExerciseFailed:
    """Build (not raise) an ExerciseFailed with a uniform layout, and remember it for :func:`hint`.

    ``hint`` is the first tier (shown in the message); ``recipe`` the second (``hint(2)``), by default the
    exercise's recipe.
    """
    head = f"{check} failed on {case.describe()}:" if case is not None else f"{check} failed:"
    lines = [head, "  " + what.replace("\n", "\n  ")]
    exercise, default_recipe = _EXERCISES.get(check, ("", ""))
    if hint:
        lines.append(f"Hint: {hint}")
    more = "More help: hint(2) prints a step-by-step recipe for this failure"
    if exercise:
        more += f"; show_solution({exercise!r}) prints the worked answer"
    lines.append(more + " (both from mamba2_tutorial.exercises).")
    _LAST.clear()
    _LAST.update(check=check, exercise=exercise, case=case.describe() if case is not None else "", what=what,
                 hint=hint or "", recipe=recipe or default_recipe)
    return ExerciseFailed("\n".join(lines))


def call_learner(check: str, fn: Callable, case: Case, args: Sequence, hint: str | None = None,
                 probes: Iterable[Probe] = ()):
    """Call the learner's function; a NotImplementedError or any other exception becomes an ExerciseFailed.

    When the learner's code raises, ``probes`` may confirm a cause (e.g. the same call with inputs padded by
    hand succeeds and is right); the hint then names it, else it is ``hint``.
    """
    __tracebackhide__ = True
    try:
        return fn(*args)
    except NotImplementedError:
        raise fail(
            check,
            None,
            "the exercise is not implemented yet (it raised NotImplementedError).",
            "replace the `raise NotImplementedError` line with your code, re-run the cell, "
            "then re-run this check.",
        ) from None
    except Exception as exc:  # noqa: BLE001 - we re-raise with context
        probe = _probe(probes)
        nudge, recipe = (f"{probe.label}.\n      {probe.hint}", probe.recipe) if probe else (hint, None)
        raise fail(check, case, f"your code raised {type(exc).__name__}: {exc}", nudge, recipe) from exc


def _fmt(v: float) -> str:
    return f"{v:.6g}"


def _detect(actual: torch.Tensor, case: Case, mistakes: Iterable[Mistake], rtol: float, atol: float):
    """The first typical mistake whose output the learner's output reproduces (within 10x the tolerance)."""
    a = actual.detach().to(torch.float64).cpu()
    for mistake in mistakes:
        try:
            wrong = mistake.compute(case)
        except Exception:  # noqa: BLE001 - a detector that cannot run simply does not match
            continue
        if not isinstance(wrong, torch.Tensor) or wrong.shape != a.shape:
            continue
        w = wrong.detach().to(torch.float64).cpu()
        if bool(torch.isclose(a, w, rtol=10 * rtol, atol=10 * atol, equal_nan=True).all()):
            return mistake
    return None


def _probe(probes: Iterable[Probe]) -> Probe | None:
    """The first probe whose counterfactual run of the learner's code comes out right."""
    for probe in probes:
        try:
            if probe.confirms():
                return probe
        except Exception:  # noqa: BLE001 - a probe that cannot run confirms nothing
            continue
    return None


def locate(wrong: torch.Tensor, axes: Sequence[str] | None) -> str:
    """Where the wrong elements are, per named axis of the output: 'in every chunk (3)' or 'only in chunk
    2 of 3'. ``axes`` names each dimension of ``wrong`` (None or "" for an axis not worth naming)."""
    if not axes or not bool(wrong.any()):
        return ""
    parts = []
    for dim, name in enumerate(axes):
        if not name:
            continue
        size = wrong.shape[dim]
        hit = wrong.movedim(dim, 0).reshape(size, -1).any(dim=1).nonzero().flatten().tolist()
        if size == 1:
            continue
        if len(hit) == size:
            parts.append(f"every {name} ({size})")
        else:
            listed = ", ".join(str(i) for i in hit[:6]) + (", ..." if len(hit) > 6 else "")
            parts.append(f"only {name} {listed} of 0..{size - 1}")
    if not parts:
        return ""
    listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"The wrong elements are in {listed}."


def compare(
    check: str,
    actual,
    expected: torch.Tensor,
    case: Case,
    *,
    name: str = "output",
    rtol: float,
    atol: float,
    hint: str,
    mistakes: Iterable[Mistake] = (),
    probes: Iterable[Probe] = (),
    axes: Sequence[str] | None = None,
    dtype_hint: str | None = None,
    extra: Callable[[torch.Tensor, torch.Tensor], tuple[str, str] | None] | None = None,
    diagnose: Callable[[], tuple[str, str | None] | None] | None = None,
) -> None:
    """Raise ExerciseFailed unless ``actual`` matches ``expected`` (via ``checks.assert_close``).

    Order of diagnosis: type, shape, dtype, an exercise-specific structural test ``extra(actual, expected)``
    returning (what, hint) or None, non-finite values, then the numeric comparison. On a wrong value the hint
    is, in this order: the mistake detector the learner's output matches, the probe that confirms its cause,
    the finding of ``diagnose()`` (the kernel exercises' experiments, :mod:`._experiments`), or (no cause
    confirmed) the exercise's nudge ``hint``, after where the wrong elements are (``axes`` names the output's
    dimensions).
    """
    __tracebackhide__ = True
    from mamba2_tutorial.lessons.checks import assert_close

    if not isinstance(actual, torch.Tensor):
        raise fail(
            check,
            case,
            f"{name} should be a torch.Tensor of shape {tuple(expected.shape)}, got {type(actual).__name__}.",
            hint,
        )
    if tuple(actual.shape) != tuple(expected.shape):
        msg = f"{name} has shape {tuple(actual.shape)}, expected {tuple(expected.shape)}."
        shape_hint = hint
        if sorted(actual.shape) == sorted(expected.shape):
            shape_hint = (
                "same sizes in a different order: check the order of the output axes "
                "(the docstring of the exercise lists them)."
            )
        raise fail(check, case, msg, shape_hint)
    if actual.dtype != expected.dtype:
        raise fail(
            check,
            case,
            f"{name} has dtype {actual.dtype}, expected {expected.dtype}.",
            dtype_hint or f"return a {expected.dtype} tensor (e.g. `.to({expected.dtype})`).",
        )
    if extra is not None:
        found = extra(actual, expected)
        if found is not None:
            raise fail(check, case, found[0], found[1])

    def diagnosis(wrong: torch.Tensor) -> tuple[str, str | None]:
        mistake = _detect(actual, case, mistakes, rtol, atol)
        if mistake is not None:
            return _hint(mistake, hint), mistake.recipe
        probe = _probe(probes)
        if probe is not None:
            return f"{probe.label}.\n      {probe.hint}", probe.recipe
        found = diagnose() if diagnose is not None else None
        if found is not None:
            return found
        where = locate(wrong.cpu(), axes)
        return (f"{where}\n      {hint}" if where else hint), None

    a_nonfinite = ~torch.isfinite(actual)
    e_nonfinite = ~torch.isfinite(expected)
    stray = a_nonfinite & ~e_nonfinite
    if stray.any():
        idx = tuple(int(i) for i in stray.nonzero()[0])
        n = int(stray.sum())
        nudge, recipe = diagnosis(stray)
        raise fail(
            check,
            case,
            f"{name} has {n} NaN/inf value(s) where the reference is finite; first at index {idx}: "
            f"yours {actual[idx].item()}, expected {_fmt(expected[idx].item())}.",
            nudge,
            recipe,
        )
    try:  # (infinities in the same places with the same sign, e.g. segsum's -inf mask, count as equal)
        assert_close(actual, expected, rtol=rtol, atol=atol, name=name)
    except AssertionError as exc:
        # assert_close's report: mismatch count, max abs/rel error and where, the first mismatch, L2 error
        a64, e64 = actual.detach().double().cpu(), expected.detach().double().cpu()
        wrong = ~torch.isclose(a64, e64, rtol=rtol, atol=atol, equal_nan=True)
        nudge, recipe = diagnosis(wrong)
        detail = str(exc).strip().replace("\n  ", "\n")
        raise fail(
            check,
            case,
            f'{name} is wrong ("actual" is yours, "expected" the reference).\n{detail}',
            nudge,
            recipe,
        ) from None


def _hint(mistake: Mistake | None, hint: str) -> str:
    if mistake is None:
        return hint
    return f"your output matches a common mistake, {mistake.label}.\n      {mistake.hint}"


def congratulate(check: str, cases: Sequence[Case], tested: str, backend: str | None = None) -> None:
    """Print the success message: how many hidden cases, and what they covered."""
    where = f" on the {backend} backend" if backend else ""
    print(f"✅ {check} passed{where}: {len(cases)} hidden cases ({tested}).")


def describe_cases(cases: Sequence[Case]) -> str:
    return ", ".join(sorted({c.name for c in cases}))


#: what kernel outputs are filled with before the launch: finite, exact in bf16, float16 and float32, and a
#: value no right kernel produces, so that "never written" is told apart from "written with NaN" (e.g. NaN
#: padding); small enough that a kernel that adds to the output's old contents shows it (right + UNWRITTEN)
UNWRITTEN = -(2.0**13)


def prefilled(shape, *, dtype=torch.float32, device="cpu") -> torch.Tensor:
    """A kernel output buffer filled with :data:`UNWRITTEN`."""
    return torch.full(tuple(shape), UNWRITTEN, dtype=dtype, device=device)


def _written_diagonal(written: torch.Tensor):
    """``(axis1, axis2)`` when exactly the elements whose indices on those two axes are equal were written
    (both axes longer than 1), else None."""
    for d1 in range(written.dim()):
        for d2 in range(d1 + 1, written.dim()):
            if written.shape[d1] < 2 or written.shape[d2] < 2:
                continue
            i1 = torch.arange(written.shape[d1]).reshape([-1 if d == d1 else 1 for d in range(written.dim())])
            i2 = torch.arange(written.shape[d2]).reshape([-1 if d == d2 else 1 for d in range(written.dim())])
            if bool(((i1 == i2).expand_as(written) == written).all()):
                return d1, d2
    return None


def _unwritten_slices(never: torch.Tensor):
    """``(axis, index)`` as text when the unwritten elements are exactly whole slices of one axis (e.g. every
    element of chunk 0), else None."""
    for dim in range(never.dim()):
        if never.shape[dim] < 2:
            continue
        full = never.movedim(dim, 0).reshape(never.shape[dim], -1).all(dim=1)
        if bool(full.any()) and not bool(full.all()):
            mask = torch.zeros_like(never)
            mask.movedim(dim, 0)[full] = True
            if bool((mask == never).all()):
                listed = full.nonzero().flatten().tolist()
                return dim, ", ".join(str(i) for i in listed[:6]) + (", ..." if len(listed) > 6 else "")
    return None


def unwritten(actual: torch.Tensor, expected: torch.Tensor, what: str = "your kernel",
              grid_axes: tuple | None = None, loop_axes: tuple = ()):
    """For kernel outputs pre-filled with :data:`UNWRITTEN`: (what, hint) when nothing or only part of the
    output was stored, or when only zeros were stored where the answer is not zero; else None.
    ``grid_axes``: the output's axes whose index comes from the launch grid, ``loop_axes`` those a loop inside
    the block walks (the rest lie inside one stored tile): they tell apart the ways an index can go unwritten
    when every written value is right."""
    if actual.numel() and bool((actual == 0).all()) and bool((expected != 0).any()):
        return (
            f"{what} stored only zeros.",
            "either the skeleton's placeholder (ct.zeros(...)) is still stored, or a mask keeps nothing: a "
            "ct.where whose condition is the wrong way round (>= where < is meant: the positions inside the "
            "sequence are those with index < its length), or a factor that is always 0, or a sum built in "
            "parts that keeps only its last part (acc = part where acc = acc + part belongs, the last part "
            "being zero padding).",
        )
    never = actual == UNWRITTEN
    eps = torch.finfo(actual.dtype).eps if actual.dtype.is_floating_point else 0.0
    if actual.shape == expected.shape and bool(torch.isclose(
            actual.double().cpu() - UNWRITTEN, expected.double().cpu(), rtol=1e-3,
            atol=8 * eps * abs(UNWRITTEN)).all()) and bool((expected != 0).any()):
        return (
            f"{what} stored the right answer plus {UNWRITTEN:g}, the value the check filled the output with "
            f"before the launch.",
            "your kernel adds to the output array's old contents (an accumulator loaded from the output, or "
            "an output += ...): start the accumulator from ct.zeros(..., dtype=ct.float32) and store the "
            "result once.",
        )
    if bool(never.all()):
        return (
            f"{what} left every output element holding the value the check filled it with "
            f"({UNWRITTEN:.4g}): it stored nothing there, or stored what it loaded from that same output "
            f"array (a load from an output where an input belongs).",
            "finish the TODOs: every output needs its ct.store(...) of the result tile, computed from the "
            "inputs (an output is never loaded).",
        )
    if bool(never.any()):
        idx = tuple(int(i) for i in never.nonzero()[0])
        diagonal = _written_diagonal(~never)
        if diagonal is not None:
            d1, d2 = diagonal
            return (
                f"{what} left {int(never.sum())} of {never.numel()} output elements unwritten (still "
                f"{UNWRITTEN:.4g}): exactly the elements whose index on axis {d1} equals their index on axis "
                f"{d2} were written (the output's shape is {tuple(never.shape)}).",
                "two of the store's block indices are the same number: both come from one grid axis (a "
                "ct.bid(k) copied and not changed?). Each index of the store takes its own ct.bid, in the "
                "order of the grid's axes.",
            )
        slices = _unwritten_slices(never)
        if slices is not None:
            dim, which = slices
            written_right = actual.shape == expected.shape and bool(torch.isclose(
                actual.double().cpu()[~never.cpu()], expected.double().cpu()[~never.cpu()], rtol=1e-3,
                atol=1e-4 * max(1.0, float(expected.abs().max()))).all())
            shifted = _stored_shifted(actual, expected, never, dim)
            if shifted is not None:
                step, written = shifted
                early = "early" if step > 0 else "late"
                return (
                    f"{what} left index {which} of axis {dim} unwritten (still {UNWRITTEN:.4g}), and at "
                    f"every index it did write on that axis ({written}) it holds the right values of index "
                    f"i {'+' if step > 0 else '-'} 1: each result is stored one index {early}.",
                    f"the store's index on axis {dim} is off by one: i {'-' if step > 0 else '+'} 1 where "
                    f"i belongs (a loop that starts at 1 after a first step taken apart, with the store's "
                    f"index shifted to match, or a counter moved before the store). Store each result at the "
                    f"index it belongs to, and check which index the first and the last store reach.",
                )
            if grid_axes is not None and dim not in grid_axes and dim not in loop_axes:
                return (
                    f"{what} left {int(never.sum())} of {never.numel()} output elements unwritten (still "
                    f"{UNWRITTEN:.4g}): exactly the elements at index {which} of axis {dim} (of size "
                    f"{never.shape[dim]}; the output's shape is {tuple(never.shape)}).",
                    f"axis {dim} lies inside the tile of one block, and the stores do not cover index "
                    f"{which} of it: a loop over pieces of that axis that stops short (range(n - 1) where "
                    f"range(n) belongs), a store of a tile whose shape does not match the array's axes (a "
                    f"reshape to another shape, or TP and TN exchanged: the shape lists one size per axis of "
                    f"the array, in its order), or a mask that keeps those elements out.",
                )
            if written_right and dim in loop_axes:
                return (
                    f"{what} left {int(never.sum())} of {never.numel()} output elements unwritten (still "
                    f"{UNWRITTEN:.4g}): exactly the elements at index {which} of axis {dim} (of size "
                    f"{never.shape[dim]}; the output's shape is {tuple(never.shape)}), and every element it "
                    f"did write is right.",
                    f"axis {dim} is walked by the loop inside each block, and index {which} is never stored: "
                    f"the loop's range stops short of it or starts after it (a bound from another axis, "
                    f"a // that drops a remainder, a range(1, n)), or an if skips its store.",
                )
            if grid_axes is not None and dim in grid_axes and actual.shape == expected.shape:
                a, e = actual.double().cpu(), expected.double().cpu()
                tol = 1e-4 * max(1.0, float(e.abs().max()))
                single = int(which) if str(which).isdigit() else None
                moved = e.select(dim, single) if single is not None else None
                for j in range(never.shape[dim]):
                    if moved is None or j == single or bool(never.select(dim, j).any()):
                        continue
                    here, own = a.select(dim, j), e.select(dim, j)
                    theirs = (here - moved).abs() <= tol
                    if bool(theirs.any()) and not bool(((here - own).abs() <= tol).all()) and bool(
                            (theirs | ((here - own).abs() <= tol)).all()):
                        return (
                            f"{what} left index {which} of axis {dim} unwritten (still {UNWRITTEN:.4g}), "
                            f"and index {j} holds values that belong at index {which} (mixed with its own).",
                            f"the blocks meant for index {which} of axis {dim} store at index {j}: the "
                            f"store's index on that axis is a fixed number or taken from the wrong place. "
                            f"Each block stores at its own index, from ct.bid of that grid axis.",
                        )
            if written_right and grid_axes is not None and never.shape[dim] > 1:
                return (
                    f"{what} left {int(never.sum())} of {never.numel()} output elements unwritten (still "
                    f"{UNWRITTEN:.4g}): exactly the elements at index {which} of axis {dim} (of size "
                    f"{never.shape[dim]}; the output's shape is {tuple(never.shape)}), and every element it "
                    f"did write is right.",
                    f"no block stores at index {which} of axis {dim}, a grid axis, and every value your "
                    f"kernel did write is right. Either the blocks of that index wrote another index's tile "
                    f"(their index taken from the wrong place: a ct.bid of another grid axis, or a block "
                    f"index decoded as another kernel's grid would need it, so that two blocks compute and "
                    f"store the same tile), or an `if` skips their store (e.g. one that leaves out the first "
                    f"or the last chunk). Each index comes from ct.bid of its own grid axis, in the order of "
                    f"the launch's grid.",
                )
            return (
                f"{what} left {int(never.sum())} of {never.numel()} output elements unwritten (still "
                f"{UNWRITTEN:.4g}): exactly the elements at index {which} of axis {dim} (of size "
                f"{never.shape[dim]}; the output's shape is {tuple(never.shape)}), and every other element "
                f"was written.",
                f"no block stores at index {which} of axis {dim}: a store skipped there (an `if` around the "
                f"store, e.g. one that leaves out the first or the last chunk), a loop whose range starts "
                f"late or ends early, or a grid or index that never reaches {which}.",
            )
        return (
            f"{what} left {int(never.sum())} of {never.numel()} output elements unwritten (still "
            f"{UNWRITTEN:.4g}), first at index {idx}.",
            "the stores do not cover the whole output: check each store's index (in TILE units), the grid, "
            "and the range of any loop over chunks, so that the blocks' tiles reach every element. (Or "
            "those elements were computed from an output array your kernel reads before writing it, which "
            "holds the fill value: read inputs only.)",
        )
    return None


def _stored_shifted(actual: torch.Tensor, expected: torch.Tensor, never: torch.Tensor, dim: int):
    """(step, written indices) when every index written on axis ``dim`` (two at least) holds the right values
    of the index ``step`` = +1 or -1 away (and not its own): the store's index is off by one; else None."""
    n = never.shape[dim]
    if actual.shape != expected.shape or n < 2:
        return None
    a, e = actual.double().cpu(), expected.double().cpu()
    tol = 1e-4 * max(1.0, float(e.abs().max()))
    written = [j for j in range(n) if not bool(never.select(dim, j).any())]
    if len(written) < 2:
        return None  # one written index: a shift and a fixed index look the same
    for step in (1, -1):
        if any(not 0 <= j + step < n for j in written):
            continue
        if all(bool(((a.select(dim, j) - e.select(dim, j + step)).abs() <= 1e-3 * tol + tol).all())
               for j in written) and not all(
                bool(((a.select(dim, j) - e.select(dim, j)).abs() <= tol).all()) for j in written):
            return step, ", ".join(str(j) for j in written)
    return None


def _is_tile_error(exc: BaseException) -> bool:
    """A cuTile compile-time error (TileError: type checking, syntax, ...) rather than a runtime failure."""
    try:
        from cuda.tile._exception import TileError
    except ImportError:  # pragma: no cover - private module moved: fall back to the name
        return type(exc).__name__.startswith(("Tile", "TypeChecking"))
    return isinstance(exc, TileError)


def kernel_backends() -> list[tuple[str, str, str]]:
    """[(backend, device, reason)] a kernel check runs on: the backend ``select_backend("auto")`` picks here
    (the GPU when usable), and on a GPU machine also the CPU tile executor.

    The executor fills UNDETERMINED padding with NaN, so a kernel that relies on whatever a GPU happens to
    read past the end of an array (often zeros) fails on every machine, not only on laptops.
    """
    from mamba2_tutorial.runtime.backends import select_backend

    choice = select_backend("auto")
    if choice.name != "gpu":
        return [("cpu", "cpu", choice.reason)]
    return [
        ("gpu", "cuda", choice.reason),
        ("cpu", "cpu", "also the CPU tile executor: it fills undetermined padding with NaN"),
    ]


def check_kernel_on_backends(check: str, run_cases: Callable[[str, str], list[Case]], tested: str) -> None:
    """Run a kernel check's ``run_cases(backend, device)`` on every backend of :func:`kernel_backends`
    (the GPU when usable, and always the CPU tile executor), then print the success message."""
    __tracebackhide__ = True
    backends = kernel_backends()
    for backend, device, reason in backends:
        print(f"running on the {backend} backend ({reason})")
        cases = run_cases(backend, device)
    congratulate(check, cases, tested, backend=" and the ".join(b for b, _, _ in backends))


def _parameter_names(kernel) -> list[str]:
    """The kernel function's parameter names, in order ([] when they cannot be read)."""
    import inspect

    fn = getattr(getattr(kernel, "_annotated_function", None), "pyfunc", None) or kernel
    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return []


#: the axes of every array the kernel exercises pass, by parameter name (one notation for all of them)
AXES = {
    "x": ("batch", "position", "head", "head dim p"), "y": ("batch", "position", "head", "head dim p"),
    "dt": ("batch", "position", "head"), "B": ("batch", "position", "group", "state dim n"),
    "C": ("batch", "position", "group", "state dim n"), "A": ("head",),
    "dt_out": ("batch", "head", "chunk", "position in the chunk"),
    "dA_cumsum": ("batch", "head", "chunk", "position in the chunk"),
    "states": ("batch", "chunk", "head", "p", "n"), "chunk_init_states": ("batch", "chunk", "head", "p", "n"),
    "dS_out": ("batch", "chunk", "head", "p", "n"), "dstates": ("batch", "chunk", "head", "p", "n"),
    "initial_states": ("batch", "head", "p", "n"), "final_states": ("batch", "head", "p", "n"),
    "dinitial_states": ("batch", "head", "p", "n"), "dfinal_states": ("batch", "head", "p", "n"),
    "ddA_last": ("batch", "head", "chunk"),
}


def _outside(message: str, kernel, args: tuple, grid: tuple = (), outputs: set | None = None) -> str:
    """From the executor's IndexError (a tile at element offsets (...) with shape (...) outside an array of
    shape (...)): which array, which axis, and the index the kernel gave there; '' when it cannot tell."""
    import re

    neg = re.search(r"(load|store)\b.*?negative tile index in dimension (\d+) \(element offset (-\d+)\)",
                    message)
    if neg:
        return (f"Your kernel's {neg.group(1)} has a negative index on axis {neg.group(2)} (element offset "
                f"{neg.group(3)}): indices in cuTile do not wrap around (no Python negative indexing): -1 is "
                f"not the last element but one before the first. A backward walk is c = n - 1 - i with i in "
                f"range(n); an index c - 1 needs c >= 1.\n      In general, ")
    m = re.search(r"(load|store)\b.*?offsets \(([-\d, ]*)\).*?shape \(([\d, ]*)\).*?array of shape "
                  r"\(([\d, ]*)\)", message)
    if not m:
        return ""
    op = m.group(1)
    nums = [[int(v) for v in g.replace(" ", "").split(",") if v] for g in m.groups()[1:]]
    offsets, tile, shape = nums
    if not (len(offsets) == len(tile) == len(shape)):
        return ""
    names = [n for n, a in zip(_parameter_names(kernel), args)
             if isinstance(a, torch.Tensor) and tuple(a.shape) == tuple(shape)
             and (op != "store" or bool((a == UNWRITTEN).any()) or outputs is None or n in outputs)]
    name = " or ".join(names) if names else None
    layouts = {AXES.get(n, ()) for n in names}
    axes = layouts.pop() if len(layouts) == 1 else ()  # arrays of one shape and one layout share their names
    said = []
    for d, (o, t, n) in enumerate(zip(offsets, tile, shape)):
        if 0 <= o < n:
            continue
        index = o // t if t else o
        axis = f"axis {d}" + (f" ({axes[d]})" if d < len(axes) else "")
        part = (f"{op} of {name or 'an array'} (shape {tuple(shape)}) has index {index} on {axis}, in "
                f"tiles of {t}: elements {o}..{o + t - 1}, where the axis has {n} (0..{n - 1})")
        if o < 0:
            part += ("; indices in cuTile do not wrap around (no Python negative indexing): -1 is not the "
                     "last element but one before the first (a backward walk c = n - 1 - i with i in "
                     "range(n) never goes below 0)")
        elif t > n and t > 1:
            part += (f"; the tile spans {t} elements along this axis, which has {n}: the tile shape's "
                     f"entries follow the array's axes in order" + (f" ({', '.join(axes)})" if axes else "")
                     + ", so a size meant for another axis sits on this one")
        elif d < len(axes) and axes[d] == "group":
            part += ("; a head's group is hi // HEADS_PER_GROUP, always below g (hi itself, or hi % "
                     "HEADS_PER_GROUP, is not the group)")
        elif t == 1 and index == n and n > 1:
            others = [k for k, size in enumerate(grid) if index < size]
            bids = " or ".join(f"ct.bid({k}) runs to {grid[k] - 1}" for k in others)
            too_large = "c + 1 where c belongs, a backward walk c = n - i where c = n - 1 - i belongs"
            part += (f"; {index} is one past the last index {n - 1}: "
                     + (f"{bids}: is that block index used on this axis (the grid's axes in another order), "
                        f"or is the index one too large ({too_large})?" if others else
                        f"an index one too large: {too_large}"))
        elif t > 1 and index % t == 0 and index // t < -(-n // t):
            part += (f"; {index} = {index // t} * {t}: an index in elements (c * {t}) where the index in "
                     f"tiles (c) belongs")
        if t == 1 and grid and 0 <= index != n:
            others = [k for k, size in enumerate(grid) if index < size and size > n]
            if others:
                part += ("; " + " or ".join(f"ct.bid({k}) runs to {grid[k] - 1}" for k in others) + ": is "
                         "that block index used on this axis (the grid's axes in another order), or a loop's "
                         "bound taken from another axis?")
        said.append(part)
    if not said:
        return ""
    text = "Your kernel's " + "; and its ".join(said)
    return text + ("" if text.endswith("?") else ".") + "\n      In general, "


def run_kernel(check: str, kernel, grid: tuple, args: tuple, case: Case, hint: str, backend: str) -> None:
    """Launch the learner's kernel with :func:`mamba2_tutorial.launch` on ``backend`` ('cpu' or 'gpu').

    A compile or runtime error becomes an ExerciseFailed naming the case and the backend.
    """
    __tracebackhide__ = True
    from mamba2_tutorial.runtime.backends import launch

    # the inputs as they were: outputs arrive filled with UNWRITTEN, inputs do not
    inputs = {i: a.clone() for i, a in enumerate(args)
              if isinstance(a, torch.Tensor) and a.numel() and not bool((a == UNWRITTEN).all())}
    try:
        launch(kernel, grid, args, backend=backend)
        if backend == "gpu":
            torch.cuda.synchronize()
        written = [i for i, before in inputs.items() if not torch.equal(args[i], before)]
        if written:
            names = _parameter_names(kernel)
            which = ", ".join(names[i] if i < len(names) else f"argument {i}" for i in written)
            raise fail(check, case, f"your kernel wrote into {which}, an input: its values changed during "
                       f"the launch.", "a ct.store goes to an input array: check the array each store names "
                       "(a copied store line whose array was not changed, or two similar names); a kernel "
                       "writes only its outputs.")
    except ExerciseFailed:
        raise
    except NotImplementedError:
        raise fail(
            check,
            None,
            "the kernel is not implemented yet (it raised NotImplementedError).",
            "replace the TODOs with cuTile code, re-run the cell, then re-run this check.",
        ) from None
    except Exception as exc:  # noqa: BLE001 - re-raised with the case and a hint
        kind = type(exc).__name__
        if _is_tile_error(exc):  # cuTile's own message first, then what its rules say about it
            raise fail(check, case, f"cuTile rejected your kernel on the {backend} backend ({kind}):\n{exc}",
                       tile_error_hint(str(exc))) from exc
        if isinstance(exc, IndexError):  # the executor names the offsets a load or store reached
            hint = ("a load or store reached outside its array, so an index is off: its unit, or its place "
                    "in the index tuple (each array's axes are in the order its shape lists them), or the "
                    "block index it uses (ct.bid(0), ct.bid(1), ct.bid(2) follow the grid's axes in order). "
                    "Loads and stores take the index in TILE units: along an axis tiled by Q, tile c starts "
                    "at element c*Q, so the index is c, not c*Q. The message gives the element offsets your "
                    "index reached, and the tile's shape: the shape lists one size per axis of the array, in "
                    "its order, so a tile of (1, 1, Q, TP) stored at (bi, c, hi, 0) of a (b, l, h, p) array "
                    "puts the Q positions on the head axis (reshape to (1, Q, 1, TP)).")
            hint += (" A loop that runs past an axis's end may take its bound from another axis of a shape "
                     "(check which axis of which array the range reads: dA_cumsum is (b, h, nchunks, Q), the "
                     "states (b, nchunks, h, p, n)).")
            written_to = {n for i, n in enumerate(_parameter_names(kernel))
                          if i < len(args) and i not in inputs and isinstance(args[i], torch.Tensor)}
            where = _outside(str(exc), kernel, args, tuple(grid), written_to)
            if where:
                hint = where + hint
            if "negative" in str(exc).lower() and "-1" in str(exc):
                hint += (" Index -1 is where a loop runs one step too many: a backward walk c = n - 1 - i "
                         "with i in range(n + 1) reaches c = -1, as does an index c - 1 at c = 0: check the "
                         "loop's range and any c - 1.")
        raise fail(
            check, case, f"launching your kernel on the {backend} backend raised {kind}: {exc}", hint
        ) from exc


def tile_error_hint(message: str) -> str:
    """The hint for a cuTile compile error: the rule its message points at, then where to look."""
    lines = message.splitlines()
    # the message proper; cuTile quotes the kernel's line after it (from a line naming the file): the rule is
    # read from the message, the quoted code only tells which operation a dtype mismatch is in
    at = next((i for i, line in enumerate(lines) if line.lstrip().startswith('"') and ", line " in line),
              len(lines))
    low, code = "\n".join(lines[:at]).lower(), "\n".join(lines[at + 1:]).lower()
    if "dtype" in low and "mma" not in low and "store" not in low:
        low += " (in ct.mma)" if "ct.mma(" in code or "ct.matmul(" in code else ""
        low += " (in a store)" if "ct.store(" in code and "mma" not in low else ""
    rules = []
    broadcast = "broadcast" in low
    if broadcast:
        rules.append("two tiles whose shapes neither match nor broadcast meet (the message names both "
                     "shapes): one of them is built with the wrong size, e.g. ct.arange(TP) where "
                     "ct.arange(Q) belongs, a load's tile shape, or a reshape")
    if "has no attribute" in low:
        rules.append("cuTile has no function of that name: build it from the ones it has (ct.exp, ct.log, "
                     "ct.maximum, ct.where, ...), e.g. silu(v) = v / (1.0 + ct.exp(-v))")
    if "power of two" in low or "power of 2" in low:
        rules.append("tile shapes must be compile-time powers of two: build them from ct.Constant[int] "
                     "parameters (Q, TP, TN), never from an array's size")
    if "depends on path" in low or "loop" in low:
        rules.append("a tile carried through a loop keeps one shape and dtype: start it with the dtype and "
                     "shape it has inside the loop (e.g. ct.zeros((TP, TN), dtype=ct.float32))")
    if "stored tile" in low or ("store" in low and ("dtype" in low or "cast" in low)):
        rules.append("a store takes a tile of the array's own dtype: cast it first, "
                     "tile.astype(array.dtype)")
    elif "mma" in low or "matmul" in low:
        rules.append("ct.mma's two operands must share one dtype (cast with .astype(x.dtype)), and its "
                     "accumulator is a float32 tile")
    elif ("dtype" in low or "cast" in low) and not broadcast:
        rules.append("two tiles of different dtypes meet: cast one of them with .astype(...)")
    if "rank" in low and ("stored" in low or "index size" in low or "array" in low):
        rules.append("a load's or a store's index tuple and tile shape have one entry per axis of the array, "
                     "in the order its shape lists them (a 4-d array takes a 4-entry index and a 4-d tile: "
                     "reshape the tile to (1, 1, 1, Q), say, before storing it); an index or a shape copied "
                     "from another array's line keeps that array's rank")
    if "not supported in device code" in low:
        rules.append("only cuTile's own functions run on tiles inside a kernel: Python's math module "
                     "(math.exp, math.log) and torch do not; use ct.exp, ct.log, ct.maximum, ...")
    if "out of bounds" in low and "index -" in low:
        rules.append("indices in cuTile do not wrap around: there is no Python negative indexing (-1 is not "
                     "the last element); write the last index out, Q - 1 or n - 1")
    elif "out of bounds" in low:
        rules.append("an index of ct.extract (or of a constant tile index) lies outside the tile: each entry "
                     "counts in tile units along its axis, from 0 to that axis's number of tiles - 1")
    if "axis" in low and "out of range for rank" in low:
        rules.append("a reduction or a scan takes an axis the tile has: a tile of rank r has axes 0..r-1 "
                     "(a (Q,) tile only axis 0; a (1, Q, 1) tile has the chunk's positions on axis 1: "
                     "reshape it to (Q,) first, or name that axis)")
    if "step must be positive" in low:
        rules.append("a range in a kernel steps forward only (no negative step): walk backwards with "
                     "for i in range(n): c = n - 1 - i")
    if "shape" in low and not rules:
        rules.append("the shapes of the operands do not fit: check each tile's shape (the message names "
                     "them), the inner sizes of an mma and the reshapes before each store")
    rule = "; ".join(rules) if rules else "read the message above: it names the rule and the line"
    rule = rule if rule.startswith("ct.") else rule[0].upper() + rule[1:]
    return (f"cuTile type-checks the kernel before running it, and the message above gives the line. "
            f"{rule}. Loads and stores take the index in TILE units.")


# ------------------------------------------------------------------------------------------ tiered help


def hint(level: int = 1) -> None:
    """Help with the last failed check, in tiers: ``hint(1)`` repeats the first hint (the cause the check
    found, or where the wrong elements are), ``hint(2)`` prints a step-by-step recipe for the same failure.
    The worked answer is a separate, explicit request: :func:`show_solution`."""
    if level not in (1, 2, 3):
        raise ValueError(f"level must be 1 (the hint) or 2 (the recipe), got {level!r}")
    if not _LAST:
        print("No check has failed yet: run the check cell first.")
        return
    head = f"{_LAST['check']}"
    if _LAST["case"]:
        head += f", {_LAST['case']}"
    print(head)
    if level == 1:
        print(f"Hint: {_LAST['hint'] or _LAST['recipe']}")
        print("Still stuck? hint(2) gives a step-by-step recipe.")
    elif level == 2:
        print(f"Recipe: {_LAST['recipe'] or _LAST['hint']}")
        if _LAST["exercise"]:
            print(f"The worked answer, if you want it: show_solution({_LAST['exercise']!r}).")
    else:
        target = repr(_LAST["exercise"]) if _LAST["exercise"] else "'exNN'"
        print(f"hint() has two levels. The worked answer is show_solution({target}): ask for it explicitly.")


def solutions_dir() -> Path:
    """The folder of the worked solution notebooks (``notebooks/solutions`` of this repository)."""
    return Path(__file__).resolve().parents[2] / "notebooks" / "solutions"


def show_solution(exercise: str) -> str:
    """Print (and return) the worked answer of ``exercise`` ("ex05" or "ex05_cutile_chunk_state"): the cells
    tagged ``solution`` of its notebook in ``notebooks/solutions/``."""
    import json

    folder = solutions_dir()
    matches = sorted(folder.glob(f"{exercise}*.ipynb")) if folder.is_dir() else []
    if len(matches) != 1:
        known = sorted(p.stem for p in folder.glob("ex*.ipynb")) if folder.is_dir() else []
        raise ValueError(f"no single solution notebook for {exercise!r} in {folder}; known: {known}")
    nb = json.loads(matches[0].read_text())
    cells = ["".join(c["source"]) for c in nb["cells"]
             if c["cell_type"] == "code" and "solution" in c.get("metadata", {}).get("tags", [])]
    text = f"# {matches[0].name}\n" + "\n\n".join(cells)
    print(text)
    return text

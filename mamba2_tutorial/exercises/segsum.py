"""Exercise 2: the stable segment sum.

``segsum(x)`` takes x (..., T) and returns S (..., T, T) with

    S[..., i, j] = x[..., j+1] + ... + x[..., i]   for j <= i   (so the diagonal is 0)
    S[..., i, j] = -inf                            for j >  i

so that ``exp(S)`` is the lower-triangular decay matrix L of the SSD quadratic form. The stable way fills x
into a (T, T) matrix, masks it, and takes the cumsum down the rows; the naive ``cumsum[i] - cumsum[j]`` loses
the small terms next to a huge one (catastrophic cancellation) and the ratio of cumprods gives 0/0.
"""

from __future__ import annotations

import torch

from ._harness import Case, Mistake, call_learner, compare, congratulate, fail, register

CHECK = "check_segsum"

_NUDGE = (
    "check one entry by hand for the failing case: S[..., i, j] is the sum of x[..., j+1] .. x[..., i], "
    "0 on the diagonal and -inf above it."
)
_HINT = (  # the recipe (hint(2))
    "S[..., i, j] is the sum of x[..., j+1 .. i] (inclusive of i, exclusive of j) below the diagonal, 0 on "
    "it and -inf above it. Build x[..., None, :] repeated to (T, T), mask with tril(diagonal=-1), cumsum "
    "over dim -2, then set the upper triangle to -inf."
)


register(CHECK, "ex02", _HINT)

_STABLE = (
    "Use the stable form: repeat x to (T, T), mask with tril(diagonal=-1), cumsum over dim -2: each entry "
    "then sums only its own segment."
)


def _cases() -> list[Case]:
    cases = []
    specs = [
        # name, batch shape, T, dtype, scale
        ("T=1 (one position)", (3,), 1, torch.float32, 1.0),
        ("small ragged batch", (2, 3), 7, torch.float32, 1.0),
        ("chunk-sized", (5,), 16, torch.float32, 1.0),
        ("float64", (2, 1, 4), 11, torch.float64, 1.0),
        ("no batch dims", (), 9, torch.float32, 1.0),
    ]
    for seed, (name, batch, T, dtype, scale) in enumerate(specs):
        g = torch.Generator().manual_seed(1000 + seed)
        x = -torch.rand(*batch, T, generator=g, dtype=torch.float64) * scale  # dt*A < 0: decays
        cases.append(Case(name, 1000 + seed, {"x": x.to(dtype)}))
    # A long sequence of ordinary steps (notebook 02's overflow demo): exp(cumsum) underflows to 0 after
    # ~100 steps in float32, so a ratio of cumprods gives 0/0 = NaN and its log -inf.
    g = torch.Generator().manual_seed(6)
    x = -1.0 - 0.1 * torch.rand(2, 200, generator=g)
    cases.append(Case("200 ordinary steps (dt*A about -1)", 6, {"x": x}))
    # Extreme decay: one huge dt*A (a state reset) among tiny steps. cumsum[i] - cumsum[j] then cancels
    # catastrophically in float32 and exp(cumsum) underflows to 0 (0/0 = NaN in the ratio form).
    g = torch.Generator().manual_seed(7)
    x = -torch.rand(2, 3, 32, generator=g) * 1e-3
    x[..., 3] = -2.0e4
    x[1, :, 20] = -5.0e3
    cases.append(Case("extreme decay (one dt*A = -2e4 among -1e-3 steps)", 7, {"x": x}))
    return cases


def _ref(x: torch.Tensor) -> torch.Tensor:
    from mamba2_tutorial.reference import segsum

    return segsum(x)


def _mistakes() -> list[Mistake]:
    def off_by_one(case):  # includes x[j]: sum over j..i
        x = case.inputs["x"]
        T = x.shape[-1]
        cs = torch.cumsum(x[..., None, :].expand(*x.shape, T).transpose(-1, -2).tril(0), dim=-2)
        return cs.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))

    def zeros_above(case):
        s = _ref(case.inputs["x"])
        return torch.where(torch.isinf(s), torch.zeros_like(s), s)

    def transposed(case):
        return _ref(case.inputs["x"]).transpose(-1, -2)

    def exponentiated(case):
        return torch.exp(_ref(case.inputs["x"]))

    def naive(case):
        from mamba2_tutorial.reference import segsum_naive

        return segsum_naive(case.inputs["x"])

    def naive_manual(case):
        x = case.inputs["x"]
        T = x.shape[-1]
        cs = torch.cumsum(x, dim=-1)
        s = cs[..., :, None] - cs[..., None, :]
        return s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))

    def cumprod_ratio(case):
        x = case.inputs["x"]
        T = x.shape[-1]
        cp = torch.cumprod(torch.exp(x), dim=-1)
        s = torch.log(cp[..., :, None] / cp[..., None, :])
        return s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))

    naive_hint = (
        "the difference of cumsums cs[i] - cs[j] cancels catastrophically next to a huge step "
        "(and the ratio of cumprods gives 0/0 = NaN). " + _STABLE
    )
    return [
        Mistake(
            "an off-by-one on the diagonal (the segment includes x[j])",
            off_by_one,
            "S[i, j] sums x[j+1..i], so S[i, i] = 0. Mask with tril(diagonal=-1) BEFORE the cumsum, "
            "then tril(diagonal=0) for the -inf mask.",
        ),
        Mistake(
            "zeros above the diagonal instead of -inf",
            zeros_above,
            "exp(S) must be 0 above the diagonal (no influence from the future), so S must be -inf there.",
        ),
        Mistake(
            "the transpose (S[j, i] instead of S[i, j])",
            transposed,
            "rows are the output position i, columns the source position j <= i: lower triangular.",
        ),
        Mistake(
            "exp(segsum) instead of segsum",
            exponentiated,
            "return the log-space segment sums; the caller takes exp() itself.",
        ),
        Mistake("the naive segsum (difference of cumsums)", naive, naive_hint),
        Mistake("the naive segsum (difference of cumsums)", naive_manual, naive_hint),
        Mistake(
            "the ratio of cumprods",
            cumprod_ratio,
            "exp(cumsum) underflows to 0 after about 100 ordinary float32 steps, so cumprod[i] / cumprod[j] "
            "is 0/0 = NaN and its log -inf. Never exponentiate before subtracting. " + _STABLE,
        ),
    ]


def _structure(actual: torch.Tensor, expected: torch.Tensor):
    upper = torch.isneginf(expected)
    if not torch.isneginf(actual[upper]).all():
        bad = (upper & ~torch.isneginf(actual)).nonzero()[0]
        idx = tuple(int(i) for i in bad)
        return (
            f"S{list(idx)} is {actual[idx].item()} but entries above the diagonal (j > i) must be -inf.",
            "fill the upper triangle with float('-inf') (e.g. masked_fill with "
            "~tril(ones(T, T, dtype=bool))) so that exp(S) is 0 there.",
        )
    diagonal = torch.eye(actual.shape[-1], dtype=torch.bool).expand_as(actual)
    if torch.isneginf(actual[diagonal]).any():
        idx = tuple(int(i) for i in (diagonal & torch.isneginf(actual)).nonzero()[0])
        return (
            f"S{list(idx)} is -inf but the diagonal must be 0.",
            "the diagonal S[i, i] is an empty sum = 0: the -inf mask is tril(diagonal=0), the mask "
            "before the cumsum is tril(diagonal=-1).",
        )
    return None  # other -inf entries below the diagonal: the mistake detectors name their cause


def check_segsum(segsum_fn) -> None:
    """Check a learner's ``segsum(x: (..., T)) -> (..., T, T)`` on hidden cases; raises ExerciseFailed."""
    __tracebackhide__ = True
    cases = _cases()
    mistakes = _mistakes()
    for case in cases:
        x = case.inputs["x"]
        expected = _ref(x.clone())
        actual = call_learner(CHECK, segsum_fn, case, (x.clone(),), _NUDGE)
        if not isinstance(actual, torch.Tensor):
            raise fail(
                CHECK, case, f"segsum returned {type(actual).__name__}, expected a torch.Tensor.", _NUDGE
            )
        tol = 1e-10 if x.dtype == torch.float64 else 1e-5
        compare(
            CHECK,
            actual,
            expected,
            case,
            name="S",
            rtol=tol,
            atol=tol,
            hint=_NUDGE,
            mistakes=mistakes,
            extra=_structure,
        )
    congratulate(
        CHECK,
        cases,
        "T from 1 to 200, 0 to 3 batch dims, float32 and float64, -inf above the "
        "diagonal, an extreme decay of -2e4 among tiny steps",
    )

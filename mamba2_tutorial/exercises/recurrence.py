"""Exercise 1: one step of the SSD recurrence.

``ssd_step(state, x_t, dt_t, A, B_t, C_t) -> (y_t, new_state)`` with

    state (b, h, p, n), x_t (b, h, p), dt_t (b, h) (already positive), A (h,), B_t and C_t (b, g, n)

    new_state = exp(dt_t · A) · state + dt_t · x_t ⊗ B_t[group of h]      (b, h, p, n)
    y_t       = new_state · C_t[group of h]                               (b, h, p)

where head i reads group ``i // (h // g)``. The check compares one step with
:func:`mamba2_tutorial.reference.ssd_decode_step`, then runs your step over whole sequences and compares with
:func:`mamba2_tutorial.reference.ssd_recurrent` (errors that are small in one step compound over a sequence).
"""

from __future__ import annotations

import torch

from ._harness import Case, Mistake, Probe, call_learner, compare, congratulate, fail, register

CHECK = "check_recurrence_step"

_NUDGE = (
    "rebuild the failing case (its sizes and seed are above) and follow one head by hand: first the new "
    "state from the old one (what decays, what is added), then y_t from it."
)
_DRIFT = (
    "each step passed on its own, but over a whole sequence the result drifts away from the reference: "
    "compare your state after each step with ssd_decode_step's to find the first step that differs."
)
_HINT = (  # the recipe (hint(2))
    "new_state = exp(dt_t * A) * state + dt_t * x_t (outer) B_t, then y_t = new_state contracted with C_t "
    "over n. Broadcast dt_t (b, h) and A (h,) to (b, h, 1, 1); map group to head with "
    "B_t.repeat_interleave(h // g, dim=1)."
)

register(CHECK, "ex01", _HINT)

# (name, b, h, p, n, g, dtype, dt scale, A scale)
_SPECS = [
    ("g=1", 3, 4, 5, 7, 1, torch.float32, 1.0, 1.0),
    ("g=2, h=6", 2, 6, 3, 8, 2, torch.float32, 1.0, 1.0),
    ("g=3, h=6", 1, 6, 4, 5, 3, torch.float32, 0.5, 2.0),
    ("float64", 2, 4, 3, 6, 2, torch.float64, 1.0, 1.0),
    ("extreme decay (dt*A down to -500)", 2, 6, 5, 4, 3, torch.float32, 10.0, 50.0),
]


def _make(name, b, h, p, n, g, dtype, dt_scale, a_scale, seed, seqlen=None) -> Case:
    gen = torch.Generator().manual_seed(seed)
    L = () if seqlen is None else (seqlen,)

    def randn(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64)

    dt = torch.nn.functional.softplus(randn(b, *L, h) - 1.0) * dt_scale
    A = -torch.exp(torch.rand(h, generator=gen, dtype=torch.float64)) * a_scale  # distinct, negative
    inputs = {
        "x": randn(b, *L, h, p).to(dtype),
        "dt": dt.to(dtype),
        "A": A.to(dtype),
        "B": randn(b, *L, g, n).to(dtype),
        "C": randn(b, *L, g, n).to(dtype),
    }
    if seqlen is None:
        inputs = {"state": randn(b, h, p, n).to(dtype), **inputs}
    return Case(name, seed, inputs)


def _step_cases() -> list[Case]:
    return [_make(*spec, seed=100 + i) for i, spec in enumerate(_SPECS)]


def _rollout_cases() -> list[Case]:
    return [
        _make("sequence, l=13, g=2", 2, 6, 3, 5, 2, torch.float32, 1.0, 1.0, seed=200, seqlen=13),
        _make("sequence, l=9, extreme decay", 1, 4, 2, 3, 1, torch.float32, 10.0, 50.0, seed=201, seqlen=9),
    ]


def _args(case: Case):
    i = case.inputs
    return i["state"].clone(), i["x"].clone(), i["dt"].clone(), i["A"].clone(), i["B"].clone(), i["C"].clone()


def _variant(
    case: Case,
    *,
    decay="right",
    dt_in=True,
    order="decay_then_add",
    mapping="interleave",
    y_from="new",
    out_mat="C",
):
    """A (possibly wrong) step, written independently of the reference, for the mistake detectors."""
    state, x, dt, A, B, C = (t.to(torch.float64) for t in _args(case))
    h, g = x.shape[1], B.shape[1]
    if mapping == "interleave":
        heads = torch.arange(h) // (h // g)
    else:
        heads = torch.arange(h) % g
    Bh, Ch = B[:, heads], C[:, heads]
    if out_mat == "B":
        Ch = Bh
    d = {
        "right": torch.exp(dt * A),
        "exp_A": torch.exp(A).expand_as(dt),
        "dt_expA": dt * torch.exp(A),
        "no_neg": torch.exp(-dt * A),
    }[decay][:, :, None, None]
    inj = (dt[:, :, None] * x if dt_in else x)[..., None] * Bh[:, :, None, :]
    new = d * state + inj if order == "decay_then_add" else d * (state + inj)
    src = new if y_from == "new" else state
    y = torch.einsum("bhpn,bhn->bhp", src, Ch)
    return y, new


def _mistakes(which: int) -> list[Mistake]:
    """Detectors for y (which=0) or the new state (which=1)."""

    def m(**kw):
        return lambda case: _variant(case, **kw)[which]

    out = [
        Mistake(
            "exp(A) where the decay is exp(dt * A)",
            m(decay="exp_A"),
            "the discrete decay of one step is exp(dt_t * A): the step size scales A inside the exp.",
        ),
        Mistake(
            "dt * exp(A) where the decay is exp(dt * A)",
            m(decay="dt_expA"),
            "dt multiplies A inside the exponential: exp(dt_t * A), not dt_t * exp(A).",
        ),
        Mistake(
            "exp(-dt * A): a growing state",
            m(decay="no_neg"),
            "A is already negative, so exp(dt_t * A) is in (0, 1]; do not negate it.",
        ),
        Mistake(
            "the input term without dt",
            m(dt_in=False),
            "the input enters as dt_t * x_t (outer) B_t: dt scales the injection as well as the decay.",
        ),
        Mistake(
            "the decay applied after the update",
            m(order="add_then_decay"),
            "decay the OLD state, then add the new input: exp(dt*A) * state + dt * x (outer) B. "
            "Decaying after the addition also shrinks the current token's contribution.",
        ),
        Mistake(
            "the wrong group mapping (h % g)",
            m(mapping="modulo"),
            "head i uses group i // (h // g) (consecutive heads share a group, like repeat_interleave), "
            "not i % g.",
        ),
    ]
    if which == 0:
        out += [
            Mistake(
                "y computed from the old state",
                m(y_from="old"),
                "y_t reads the state AFTER this token's update: y_t = new_state . C_t.",
            ),
            Mistake(
                "y computed with B instead of C",
                m(out_mat="B"),
                "B writes into the state, C reads it out: y_t = new_state . C_t.",
            ),
        ]
    return out


def _tol(dtype):
    return (1e-10, 1e-10) if dtype == torch.float64 else (2e-5, 2e-5)


def _rollout(ssd_step, case: Case, i: dict):
    """Run the learner's step over a whole sequence from a zero state: (final state, y (b, l, h, p))."""
    x, dt, A, B, C = i["x"], i["dt"], i["A"], i["B"], i["C"]
    b, l, h, p = x.shape
    state = torch.zeros(b, h, p, B.shape[-1], dtype=x.dtype)
    ys = []
    for t in range(l):
        step = Case(f"{case.name}, step t={t}", case.seed, {"state": state, "x": x[:, t]})
        args = (state.clone(), x[:, t].clone(), dt[:, t].clone(), A.clone(), B[:, t].clone(), C[:, t].clone())
        y_t, state = call_learner(CHECK, ssd_step, step, args, _NUDGE)
        ys.append(y_t)
    return state, torch.stack(ys, dim=1)


def _precision_probe(ssd_step, case: Case, y_exp, s_exp, rtol: float, atol: float) -> Probe:
    """Confirms rounding as the cause when the same sequence with float64 inputs comes out right."""

    def confirms() -> bool:
        s64, y64 = _rollout(ssd_step, case, {k: v.double() for k, v in case.inputs.items()})
        return bool(torch.allclose(s64, s_exp.double(), rtol=rtol, atol=atol)
                    and torch.allclose(y64, y_exp.double(), rtol=rtol, atol=atol))

    return Probe(
        "rounding: with the same inputs in float64 your steps give the right sequence",
        confirms,
        "errors below the single-step tolerance add up over a sequence: keep the step's arithmetic in "
        "the inputs' precision (no float16 or bfloat16 intermediates).",
    )


def check_recurrence_step(ssd_step) -> None:
    """Check ``ssd_step(state, x_t, dt_t, A, B_t, C_t) -> (y_t, new_state)`` on hidden cases."""
    __tracebackhide__ = True
    from mamba2_tutorial.reference import ssd_decode_step, ssd_recurrent

    steps = _step_cases()
    for case in steps:
        y_exp, s_exp = ssd_decode_step(*_args(case))
        out = call_learner(CHECK, ssd_step, case, _args(case), _NUDGE)
        if not (isinstance(out, tuple | list) and len(out) == 2):
            raise fail(
                CHECK,
                case,
                f"ssd_step should return a pair (y_t, new_state), got {type(out).__name__}.",
                "end with `return y_t, new_state`.",
            )
        y, s = out
        rtol, atol = _tol(case.inputs["x"].dtype)
        compare(CHECK, s, s_exp, case, name="new_state", rtol=rtol, atol=atol, hint=_NUDGE,
                mistakes=_mistakes(1), axes=("batch entry", "head", "", ""))  # fmt: skip
        compare(CHECK, y, y_exp, case, name="y_t", rtol=rtol, atol=atol, hint=_NUDGE, mistakes=_mistakes(0),
                axes=("batch entry", "head", ""))  # fmt: skip

    rollouts = _rollout_cases()
    for case in rollouts:
        i = case.inputs
        y_exp, s_exp = ssd_recurrent(i["x"], i["dt"], i["A"], i["B"], i["C"], return_final_states=True)
        state, ys = _rollout(ssd_step, case, i)
        rtol, atol = 1e-4, 1e-4

        precision = _precision_probe(ssd_step, case, y_exp, s_exp, rtol, atol)
        for name, actual, expected in (("final state after the sequence", state, s_exp),
                                       ("y over the sequence", ys, y_exp)):
            compare(CHECK, actual, expected, case, name=name, rtol=rtol, atol=atol, hint=_DRIFT,
                    probes=[precision])  # fmt: skip
    congratulate(
        CHECK,
        steps + rollouts,
        "single steps with g in {1, 2, 3}, distinct b/h/p/n, float32 and float64, "
        "dt*A down to -500; two whole sequences against ssd_recurrent",
    )

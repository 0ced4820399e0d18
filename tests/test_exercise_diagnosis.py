"""The kernel checks diagnose by experiment: planted mistakes in exercises 4-8, each named by its own cause.

Each exercise's planted kernel is right for ``M = 0``; every other ``M`` plants one realistic mistake, from
these classes: an operand transposed (on square tiles, where it compiles), a mask off by one, a scaling on the
wrong axis, a wrong chunk or decay index, a reduction over the wrong set, a term left out, an extra
nonlinearity. The check must fail it with the hint of its own cause: the experiment that confirmed it (a probe
input that switched one term off, undid the mistake, or an impulse whose answer is easy to read). A regex per
mistake names the cause; the other causes' phrases must be absent (no wrong cause). A cuTile type error is
shown first, the hint after it.
"""

from __future__ import annotations

import re

import cuda.tile as ct
import pytest

import mamba2_tutorial.exercises._harness as harness
from mamba2_tutorial.exercises import (
    ExerciseFailed,
    check_chunk_cumsum_kernel,
    check_chunk_scan_kernel,
    check_chunk_state_kernel,
    check_state_passing_bwd_kernel,
    check_state_passing_kernel,
)

ZERO = ct.PaddingMode.ZERO


@ct.kernel
def cumsum_planted(dt, A, dt_out, dA_cumsum, Q: ct.Constant[int], M: ct.Constant[int]):
    """Exercise 4, right for M = 0; each other M plants one mistake (see CUMSUM below)."""
    bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)
    if M == 7:
        dt_c = ct.load(dt, (bi, c * Q, hi), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,))
    else:
        dt_c = ct.load(dt, (bi, c, hi), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,))
    if M == 1:
        dt_c = ct.log(1.0 + ct.exp(dt_c))
    a = ct.load(A, (bi if M == 5 else hi,), shape=())
    if M == 8:
        a = -a
    v = dt_c if M == 3 else dt_c * a
    if M == 4:
        cs = ct.cumsum((dt_c * a).reshape((1, Q, 1)), axis=0).reshape((Q,))
    else:
        cs = ct.cumsum(v, axis=0, reverse=(M == 6))
    if M == 2:
        cs = cs - v
    ct.store(dt_out, (bi, hi, c, 0), dt_c.reshape((1, 1, 1, Q)))
    ct.store(dA_cumsum, (bi, hi, c, 0), cs.reshape((1, 1, 1, Q)))



@ct.kernel
def state_planted(x, B, dt_out, dA_cumsum, states, Q: ct.Constant[int], TP: ct.Constant[int],
                  TN: ct.Constant[int],
      HEADS_PER_GROUP: ct.Constant[int], M: ct.Constant[int]):
    """Exercise 5, right for M = 0; each other M plants one mistake (see STATE below)."""
    bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)
    g = hi % B.shape[2] if M == 1 else hi // HEADS_PER_GROUP
    x_c = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((Q, TP))
    B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    dA_cs = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    dA_last = ct.extract(dA_cs, (0 if M == 2 else Q - 1,), shape=(1,))
    if M == 3:
        w = ct.exp(dA_cs - dA_last) * dt_c
    elif M == 4:
        w = ct.exp2(dA_last - dA_cs) * dt_c
    elif M == 5:
        w = ct.exp(dA_last - dA_cs)
    elif M == 6:
        w = ct.exp(dA_last - dA_cs) * ct.log(1.0 + ct.exp(dt_c))
    elif M == 9:
        w = ct.exp(dA_cs) * dt_c
    elif M == 10:
        w = dt_c
    else:
        w = ct.exp(dA_last - dA_cs) * dt_c
    if M == 7:
        xw = (x_c.astype(ct.float32) * w[None, :]).astype(x.dtype)
    else:
        xw = (x_c.astype(ct.float32) * w[:, None]).astype(x.dtype)
    if M == 8:
        state = ct.mma(ct.transpose(B_c), xw, ct.zeros((TN, TP), dtype=ct.float32))
        ct.store(states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))
    else:
        state = ct.mma(ct.transpose(xw), B_c, ct.zeros((TP, TN), dtype=ct.float32))
        ct.store(states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))


@ct.kernel
def passing_planted(states, dA_cumsum, initial_states, chunk_init_states, final_states, Q: ct.Constant[int],
      TP: ct.Constant[int], TN: ct.Constant[int], M: ct.Constant[int]):
    """Exercise 6, right for M = 0; each other M plants one mistake (see PASSING below)."""
    bi, hi = ct.bid(0), ct.bid(1)
    state = ct.load(initial_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO).reshape((TP, TN))
    if M == 4:
        state = ct.zeros((TP, TN), dtype=ct.float32)
    nc = states.shape[1]
    for i in range(nc):
        c = nc - 1 - i if M == 9 else i
        if M != 1:
            ct.store(chunk_init_states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))
        if M == 3:
            a = ct.load(dA_cumsum, (bi, hi, c, 0), shape=())
        elif M == 5:
            a = ct.sum(ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)))
        elif M == 6:
            a = ct.load(dA_cumsum, (bi, c, hi, Q - 1), shape=())
        else:
            a = ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=())
        decay = ct.exp(a)
        if M == 7:
            decay = decay * decay
        local = ct.load(states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        local = local.reshape((TP, TN))
        if M == 2:
            state = decay * (state + local)
        elif M == 8:
            state = decay * state
        else:
            state = decay * state + local
        if M == 1:
            ct.store(chunk_init_states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))
    ct.store(final_states, (bi, hi, 0, 0), state.reshape((1, 1, TP, TN)))


@ct.kernel
def scan_planted(x, dt_out, dA_cumsum, C, B, chunk_init_states, y, Q: ct.Constant[int], TP: ct.Constant[int],
      TN: ct.Constant[int], HEADS_PER_GROUP: ct.Constant[int], M: ct.Constant[int]):
    """Exercise 7, right for M = 0; each other M plants one mistake (see SCAN below)."""
    bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)
    g = hi % C.shape[2] if M == 8 else hi // HEADS_PER_GROUP
    x_c = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((Q, TP))
    C_c = ct.load(C, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    state = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
    state = state.reshape((TP, TN))
    dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    dA_cs = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    if M == 1:
        CB = ct.mma(B_c, ct.transpose(C_c), ct.zeros((Q, Q), dtype=ct.float32))
    else:
        CB = ct.mma(C_c, ct.transpose(B_c), ct.zeros((Q, Q), dtype=ct.float32))
    pos = ct.arange(Q, dtype=ct.int32)
    causal = pos[:, None] > pos[None, :] if M == 3 else pos[:, None] >= pos[None, :]
    if M == 9:
        decay = ct.exp(ct.minimum(dA_cs[None, :] - dA_cs[:, None], 0.0))
    else:
        decay = ct.exp(ct.minimum(dA_cs[:, None] - dA_cs[None, :], 0.0))
    if M == 4:
        W = ct.where(causal, CB * decay * dt_c[:, None], 0.0)
    elif M == 7:
        W = ct.where(causal, CB * decay * ct.log(1.0 + ct.exp(dt_c))[None, :], 0.0)
    elif M == 10:
        W = CB * decay * dt_c[None, :]
    else:
        W = ct.where(causal, CB * decay * dt_c[None, :], 0.0)
    y_c = ct.mma(W.astype(x.dtype), x_c, ct.zeros((Q, TP), dtype=ct.float32))
    if M == 2:
        past = ct.mma(C_c, state.astype(C.dtype), ct.zeros((Q, TP), dtype=ct.float32))
    else:
        past = ct.mma(C_c, ct.transpose(state.astype(C.dtype)), ct.zeros((Q, TP), dtype=ct.float32))
    if M == 5:
        pass
    elif M == 6:
        y_c = y_c + past
    else:
        y_c = y_c + past * ct.exp(dA_cs)[:, None]
    if M == 11:
        y_c = y_c / (1.0 + ct.exp(-y_c))
    ct.store(y, (bi, c, hi, 0), y_c.astype(y.dtype).reshape((1, Q, 1, TP)))


@ct.kernel
def passing_bwd_planted(dS_out, dA_cumsum, chunk_init_states, dfinal_states, dstates, ddA_last,
                        dinitial_states,
      Q: ct.Constant[int], TP: ct.Constant[int], TN: ct.Constant[int], M: ct.Constant[int]):
    """Exercise 8, right for M = 0; each other M plants one mistake (see PASSING_BWD below)."""
    bi, hi = ct.bid(0), ct.bid(1)
    dS = ct.load(dfinal_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO).reshape((TP, TN))
    if M == 6:
        dS = ct.zeros((TP, TN), dtype=ct.float32)
    nchunks = dS_out.shape[1]
    for i in range(nchunks):
        c = i if M == 1 else nchunks - 1 - i
        if M != 2:
            ct.store(dstates, (bi, c, hi, 0, 0), dS.reshape((1, 1, 1, TP, TN)))
        g = ct.exp(ct.load(dA_cumsum, (bi, hi, c, 0 if M == 3 else Q - 1), shape=()))
        if M == 10:
            S = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN)).reshape((TP, TN))
        else:
            S = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
            S = S.reshape((TP, TN))
        own = ct.load(dS_out, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO).reshape((TP, TN))
        if M == 7:
            new = g * dS
        elif M == 8:
            new = g * (dS + own)
        else:
            new = g * dS + own
        if M == 9:
            part = ct.sum(dS) * ct.sum(S)
        else:
            part = ct.sum((new if M == 5 else dS) * S)
        ct.store(ddA_last, (bi, hi, c), (part if M == 4 else g * part).reshape((1, 1, 1)))
        dS = new
        if M == 2:
            ct.store(dstates, (bi, c, hi, 0, 0), dS.reshape((1, 1, 1, TP, TN)))
    ct.store(dinitial_states, (bi, hi, 0, 0), dS.reshape((1, 1, TP, TN)))


#: M -> (class, the cause the hint must name)
CUMSUM = {
    1: ("extra nonlinearity: softplus(dt)", r"With dt (= 0 your outputs are not 0|"
        r"doubled.*a nonlinearity to dt)"),
    2: ("off by one: an exclusive cumsum", r"starts one position late"),
    3: ("term left out: no A", r"With A = 1 for every head, your output is right"),
    4: ("reduction over the wrong set: cumsum over a size-1 axis", r"no running sum"),
    5: ("wrong index: A[bi]", r"A is read at the wrong index"),
    6: ("wrong direction: reverse cumsum", r"the sum runs backwards"),
    7: ("wrong chunk index: in elements", r"raised IndexError.*outside.*TILE units"),
    8: ("sign: -A", r"your kernel flips A's sign"),
}
STATE = {
    1: ("wrong index: group h % g", r"reads B of the wrong group"),
    2: ("wrong decay index: the chunk's first position", r"end from position 0 instead of Q-1"),
    3: ("decay exponent flipped", r"sign flipped"),
    4: ("exp2 without LOG2E", r"computes 2\*\*v where the decay is exp\(v\)"),
    5: ("term left out: no dt", r"With dt = 1 at every position, your output is right"),
    6: ("extra nonlinearity: softplus(dt)", r"With dt (= 0 your outputs are not 0|"
        r"doubled.*a nonlinearity to dt)"),
    7: ("scaling on the wrong axis: w[None, :] (Q == TP)", r"weights w_k reach the wrong elements"),
    8: ("operand transposed: Bᵀ (x w) on square tiles", r"your state is transposed"),
    9: ("decay from the chunk start", r"decay from the chunk's START"),
    10: ("term left out: no decay", r"With dA_cumsum = 0 \(every decay 1\), your output is right, so the "
         r"decay"),
}
PASSING = {
    1: ("off by one: the state stored after the update", r"you store the state after the update"),
    2: ("the decay applied after adding the local state", r"term of the chunk's own state is wrong"),
    3: ("wrong decay index: the chunk's first position", r"another position than the chunk's last"),
    4: ("term left out: initial_states", r"initial state's path is wrong"),
    5: ("reduction over the wrong set: the decay from a sum over the chunk", r"a sum over the chunk"),
    6: ("wrong chunk index: dA_cumsum indexed like states", r"decay of another chunk, head or batch entry"),
    7: ("extra nonlinearity: the decay squared", r"With dA_cumsum = 0 \(every decay 1\).*so the decay is "
        r"wrong"),
    8: ("term left out: the local state", r"term of the chunk's own state is wrong"),
    9: ("the chunks walked backwards", r"walks the chunks from the last to the first"),
}
SCAN = {
    1: ("operand transposed: B Cᵀ", r"your kernel computes B Cᵀ"),
    2: ("operand transposed: the state untransposed (TP == TN)", r"multiplies C by the state untransposed"),
    3: ("mask off by one: strict k < s", r"the diagonal k = s is what goes wrong"),
    4: ("scaling on the wrong axis: dt[:, None]", r"dt reaches the wrong elements"),
    5: ("term left out: the state term", r"With the entering state set to zero, your output is right, so the "
        r"state term is wrong"),
    6: ("term left out: the state term's decay", r"decay of the state term is wrong"),
    7: ("extra nonlinearity: softplus(dt)", r"the entering state = 0 and dt (= 0 your outputs are not 0|"
        r"doubled.*nonlinearity to dt)"),
    8: ("wrong index: group h % g", r"C and B of the wrong group"),
    9: ("decay exponent flipped", r"sign flipped"),
    10: ("mask left out", r"later positions leak into earlier outputs"),
    11: ("extra nonlinearity: silu(y)", r"x and the entering state (= 0 your "
         r"outputs are not 0|doubled.*a nonlinearity)"),
}
PASSING_BWD = {
    1: ("the chunks walked first to last", r"walks the chunks from the first to the last"),
    2: ("off by one: dstates stored after the update", r"you store dS after the update"),
    3: ("wrong decay index: the chunk's first position", r"another position than the chunk's last"),
    4: ("term left out: g in ddA_last", r"factor g in ddA_last is wrong"),
    5: ("ddA_last from the updated dS", r"pairs S_c with dS after chunk c's update"),
    6: ("term left out: dfinal_states", r"path of d final_states is wrong"),
    7: ("term left out: dS_out (a dropped gradient term)", r"term of chunk c's own dS_out is wrong"),
    8: ("dS_out decayed with the carried gradient", r"term of chunk c's own dS_out is wrong"),
    9: ("reduction over the wrong set: sum(dS) * sum(S)", r"reduction in ddA_last mixes elements"),
    10: ("no padding on the state's load", r"loads without padding_mode=ZERO"),
}

EXERCISES = {
    "ex04": (check_chunk_cumsum_kernel, "chunk_cumsum", cumsum_planted, CUMSUM),
    "ex05": (check_chunk_state_kernel, "chunk_state", state_planted, STATE),
    "ex06": (check_state_passing_kernel, "state_passing", passing_planted, PASSING),
    "ex07": (check_chunk_scan_kernel, "chunk_scan", scan_planted, SCAN),
    "ex08": (check_state_passing_bwd_kernel, "state_passing_bwd", passing_bwd_planted, PASSING_BWD),
}
CASES = [(ex, m) for ex, (*_, table) in EXERCISES.items() for m in table]


def run_planted(monkeypatch, exercise: str, mistake: int) -> None:
    """Run the exercise's check on its planted kernel with ``mistake`` appended to every launch."""
    check, module, kernel, _ = EXERCISES[exercise]

    def launch_with(check_name, kern, grid, args, case, hint, backend):
        return harness.run_kernel(check_name, kern, grid, (*args, mistake), case, hint, backend)

    monkeypatch.setattr(f"mamba2_tutorial.exercises.{module}.run_kernel", launch_with)
    check(kernel)


def hint_of(exc: ExerciseFailed) -> str:
    text = str(exc)
    return text[text.index("Hint:"):text.index("More help:")]


@pytest.mark.parametrize("exercise", sorted(EXERCISES))
def test_the_planted_kernel_is_right_without_a_mistake(monkeypatch, capsys, exercise):
    run_planted(monkeypatch, exercise, 0)
    assert "passed on the cpu backend" in capsys.readouterr().out


@pytest.mark.parametrize(("exercise", "mistake"), CASES, ids=[f"{e}-{m}" for e, m in CASES])
def test_each_planted_mistake_gets_the_hint_of_its_own_cause(monkeypatch, exercise, mistake):
    table = EXERCISES[exercise][3]
    with pytest.raises(ExerciseFailed) as info:
        run_planted(monkeypatch, exercise, mistake)
    text = str(info.value)
    assert re.search(table[mistake][1], text, re.S), text
    others = {pattern for m, (_, pattern) in table.items() if m != mistake and pattern != table[mistake][1]}
    wrong = [p for p in others if re.search(p, hint_of(info.value), re.S)]
    assert not wrong, (wrong, text)  # no other cause named
    if "IndexError" not in text:
        assert "The wrong elements are in" not in hint_of(info.value), text  # a cause, not only where


def test_every_exercise_plants_six_mistakes_over_several_classes():
    for exercise, (*_, table) in EXERCISES.items():
        assert len(table) >= 6, exercise

"""The kernel checks diagnose by experiment: planted mistakes in exercises 4-8, each named by its own cause.

Each exercise has two planted kernels (the second for ``M >= 21``), right for ``M = 0``; every other ``M``
plants one realistic mistake, from these classes: an operand transposed (on square tiles, where it compiles),
a mask off by one, a scaling on the wrong axis, a wrong chunk or decay index, a reduction over the wrong set,
a term left out, an extra nonlinearity, a wrong dtype or cast, a wrong store index. The check must fail it
with the hint of its own cause: the experiment that confirmed it (a probe input that switched one term off,
undid the mistake, or an impulse whose answer is easy to read). A regex per mistake names the cause; the
other causes' phrases must be absent (no wrong cause). A cuTile type error is shown first, the hint after it.
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
        P = ct.where(causal, CB * decay * dt_c[:, None], 0.0)
    elif M == 7:
        P = ct.where(causal, CB * decay * ct.log(1.0 + ct.exp(dt_c))[None, :], 0.0)
    elif M == 10:
        P = CB * decay * dt_c[None, :]
    else:
        P = ct.where(causal, CB * decay * dt_c[None, :], 0.0)
    y_c = ct.mma(P.astype(x.dtype), x_c, ct.zeros((Q, TP), dtype=ct.float32))
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


@ct.kernel
def cumsum_planted_more(dt, A, dt_out, dA_cumsum, Q: ct.Constant[int], M: ct.Constant[int]):
    """Exercise 4, right for M = 0; each M >= 21 plants one more mistake (see CUMSUM)."""
    if M == 25:
        bi, hi, c = ct.bid(0), ct.bid(1), ct.bid(2)
    else:
        bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)
    if M == 28:
        dt_c = ct.load(dt, (bi, hi, c), shape=(1, 1, Q), padding_mode=ZERO).reshape((Q,))
    elif M == 54:
        dt_c = ct.load(dt, (bi, 0, hi), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,))
    elif M == 57:  # the step sizes loaded from dt_out, the output, which holds the check's fill value
        dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    else:
        dt_c = ct.load(dt, (bi, c, hi), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,))
    pos = ct.arange(Q, dtype=ct.int32)
    if M == 21:
        dt_c = ct.where(c * Q + pos < dt.shape[1] - 1, dt_c, 0.0)
    if M == 53:
        dt_c = ct.where(c * Q + pos >= dt.shape[1], dt_c, 0.0)
    if M == 61:  # the steps past the ragged end filled with 1
        dt_c = ct.where(c * Q + pos < dt.shape[1], dt_c, 1.0)
    if M == 22:
        a = ct.load(A, (0,), shape=(Q,), padding_mode=ZERO)
    else:
        a = ct.load(A, (hi,), shape=())
    src = dt_c
    if M == 42:
        src = ct.load(dt, (bi, c, 0), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,))
    if M == 23:
        cs = ct.sum(dt_c * a) + ct.zeros((Q,), dtype=ct.float32)
    elif M == 24:
        cs = ct.cumsum((dt_c * a).astype(ct.bfloat16), axis=0).astype(ct.float32)
    elif M == 56:  # a mask in the sequence's positions compared with the chunk's: only chunk 0 sums anything
        cs = ct.cumsum(ct.where(c * Q + pos < Q, dt_c * a, 0.0), axis=0)
    elif M == 55:  # a (Q, Q) masked sum whose mask takes k <= s + 1
        v = dt_c * a
        cs = ct.sum(ct.where(pos[None, :] <= pos[:, None] + 1, v[None, :], 0.0), axis=1)
    elif M == 70:  # a running sum from the chunk's end (total - cumsum + v)
        v = dt_c * a
        cs = ct.sum(v) - ct.cumsum(v, axis=0) + v
    elif M == 60:  # a scan in two halves whose second half adds the first half's total twice
        v = dt_c * a
        first = pos < Q // 2
        total = ct.sum(ct.where(first, v, 0.0))
        cs = ct.where(first, ct.cumsum(ct.where(first, v, 0.0), axis=0),
                      ct.cumsum(ct.where(first, 0.0, v), axis=0) + total + total)
    else:
        cs = ct.cumsum(src * a, axis=0)
    if M == 41:
        cs = cs + dt_c * a
    if M == 26:
        cs = ct.exp(cs)
    if M == 31:
        cs = cs - ct.extract(dt_c * a, (0,), shape=(1,))
    if M == 51:
        cs = cs / (pos + 1).astype(ct.float32)
    if M == 52:
        cs = ct.maximum(cs, -20.0)
    if M == 72:
        ct.store(dt_out, (bi, hi, c, 0), (dt_c * a).reshape((1, 1, 1, Q)))
    elif M != 27:
        ct.store(dt_out, (bi, hi, c, 0), dt_c.reshape((1, 1, 1, Q)))
    ct.store(dA_cumsum, (bi, hi, c, 0), cs.reshape((1, 1, 1, Q)))


@ct.kernel
def state_planted_more(x, B, dt_out, dA_cumsum, states, Q: ct.Constant[int], TP: ct.Constant[int],
                       TN: ct.Constant[int], HEADS_PER_GROUP: ct.Constant[int], M: ct.Constant[int]):
    """Exercise 5, right for M = 0; each M >= 21 plants one more mistake (see STATE)."""
    bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)
    g = hi // HEADS_PER_GROUP
    if M == 59:  # a loop over the chunk's two halves, acc added to an mma that already adds it
        half = Q // 2
        dA_end = ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=())
        acc = ct.zeros((TP, TN), dtype=ct.float32)
        for kk in range(2):
            x_k = ct.load(x, (bi, 2 * c + kk, hi, 0), shape=(1, half, 1, TP), padding_mode=ZERO)
            B_k = ct.load(B, (bi, 2 * c + kk, g, 0), shape=(1, half, 1, TN), padding_mode=ZERO)
            dt_k = ct.load(dt_out, (bi, hi, c, kk), shape=(1, 1, 1, half)).reshape((half,))
            dA_k = ct.load(dA_cumsum, (bi, hi, c, kk), shape=(1, 1, 1, half)).reshape((half,))
            w_k = ct.exp(dA_end - dA_k) * dt_k
            xw_k = (x_k.reshape((half, TP)).astype(ct.float32) * w_k[:, None]).astype(x.dtype)
            acc = acc + ct.mma(ct.transpose(xw_k), B_k.reshape((half, TN)), acc)
        ct.store(states, (bi, c, hi, 0, 0), acc.reshape((1, 1, 1, TP, TN)))
    else:
        acc = ct.ones((TP, TN), dtype=ct.float32) if M == 51 else ct.zeros((TP, TN), dtype=ct.float32)
        first = 0 if M == 25 else c
        for cc in range(first, c + 1):
            x_c = ct.load(x, (bi, ct.maximum(cc - 1, 0) if M == 90 else cc, g if M == 42 else hi, 0),
                          shape=(1, Q, 1, TP), padding_mode=ZERO)
            x_c = x_c.reshape((Q, TP))
            if M == 27:
                xf = x_c.astype(ct.float32)
                x_c = (xf / (1.0 + ct.exp(-xf))).astype(x.dtype)
            B_c = ct.load(B, (bi, cc + 1 if M == 70 else cc, g, 0), shape=(1, Q, 1, TN),
                          padding_mode=ZERO).reshape((Q, TN))
            dt_c = ct.load(dt_out, (bi, g if M == 41 else hi, cc, 0), shape=(1, 1, 1, Q)).reshape((Q,))
            dA_cs = ct.load(dA_cumsum, (bi, g if M == 24 else hi, cc, 0), shape=(1, 1, 1, Q)).reshape((Q,))
            if M == 60:
                dA_cs = dA_cs.astype(ct.bfloat16).astype(ct.float32)
            dA_last = ct.extract(dt_c if M == 57 else dA_cs, (Q - 1,), shape=(1,))
            if M == 26:
                w = (dA_last - dA_cs) * dt_c
            elif M == 52:
                w = ct.exp2(dA_last - dA_cs) * 1.4426950408889634 * dt_c
            elif M == 71:
                w = ct.exp(dA_cs - ct.extract(dA_cs, (0,), shape=(1,))) * dt_c
            else:
                w = ct.exp(dA_last - dA_cs) * dt_c
            if M == 61:  # the decay applied once more
                w = w * ct.exp(dA_last - dA_cs)
            if M == 80:
                w = ct.exp(dA_last - dA_cs) * ct.extract(dt_c, (Q - 1,), shape=(1,))
            if M == 22:
                pos = ct.arange(Q, dtype=ct.int32)
                w = ct.where(pos < Q - 1, w, 0.0)
            if M == 31:
                w = ct.minimum(w, 1.0)
            if M == 23:
                xw = x_c
            else:
                xw = (x_c.astype(ct.float32) * w[:, None]).astype(x.dtype)
            Bm = B_c
            if M == 28:
                xw, Bm = xw.astype(ct.bfloat16), B_c.astype(ct.bfloat16)
            if M == 21:
                xt = xw.reshape((TP, Q))
            else:
                xt = ct.transpose(xw)
            part = ct.mma(xt, Bm, ct.zeros((TP, TN), dtype=ct.float32))
            if M == 58:
                last = ct.extract(xw.astype(ct.float32), (Q - 1, 0), shape=(1, TP)).reshape((TP,))
                b_last = ct.extract(B_c.astype(ct.float32), (Q - 1, 0), shape=(1, TN)).reshape((TN,))
                part = part + last[:, None] * b_last[None, :]
            if M == 53:
                sx = ct.sum(xw.astype(ct.float32), axis=0)
                sB = ct.sum(B_c.astype(ct.float32), axis=0)
                part = sx[:, None] * sB[None, :]
            if M == 23:
                part = part * w[:, None]
            acc = acc + part
        if M == 29:
            ct.store(states, (bi, hi, c, 0, 0), acc.reshape((1, 1, 1, TP, TN)))
        else:
            ct.store(states, (bi, c, hi, 0, 0), acc.reshape((1, 1, 1, TP, TN)))


@ct.kernel
def passing_planted_more(states, dA_cumsum, initial_states, chunk_init_states, final_states,
                         Q: ct.Constant[int], TP: ct.Constant[int], TN: ct.Constant[int],
                         M: ct.Constant[int]):
    """Exercise 6, right for M = 0; each M >= 21 plants one more mistake (see PASSING)."""
    bi, hi = ct.bid(0), ct.bid(1)
    state = ct.load(initial_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO).reshape((TP, TN))
    if M == 58:
        state = ct.transpose(state)
    init = state
    nc = states.shape[1]
    for c in range(nc):
        if M == 81 and c == 0:
            state = ct.exp(ct.load(dA_cumsum, (bi, hi, 0, Q - 1), shape=())) * state
        out = state
        if M == 27:
            out = state.astype(ct.bfloat16).astype(ct.float32)
        if M == 28:
            if c + 1 < nc:
                ct.store(chunk_init_states, (bi, c + 1, hi, 0, 0), out.reshape((1, 1, 1, TP, TN)))
        elif M == 52:
            if c > 0:
                ct.store(chunk_init_states, (bi, c, hi, 0, 0), out.reshape((1, 1, 1, TP, TN)))
        else:
            ct.store(chunk_init_states, (bi, c, hi, 0, 0), out.reshape((1, 1, 1, TP, TN)))
        if M == 23:
            a = ct.load(dA_cumsum, (bi, hi, c - 1 if c > 0 else 0, Q - 1), shape=())
        elif M == 24:
            a = ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=())
            a = a - ct.load(dA_cumsum, (bi, hi, c, 0), shape=())
        else:
            a = ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=())
        if M == 31:
            a = ct.maximum(a, -10.0)
        if M == 26:
            decay = 1.0 / (1.0 + ct.exp(-a))
        else:
            decay = ct.exp(a)
        if M == 59:  # the initial state's load line copied for the chunk's own state
            local = ct.load(initial_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO)
        else:
            local = ct.load(states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        local = local.reshape((TP, TN))
        if M == 21:
            local = ct.transpose(local)
        if M == 22:
            row = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
            state = ct.exp(row)[:, None] * state + local
        elif M == 25:
            state = state + local
        elif M == 41:
            state = local
        elif M == 55:
            state = decay * state * local
        elif M == 57:
            state = decay * init + local
        elif M == 56:
            state = decay * state + local if c > 0 else decay * state
        elif M == 42:
            ct.store(final_states, (bi, hi, 0, 0), state.reshape((1, 1, TP, TN)))
            state = decay * state + local
        elif M == 60:  # the carried state transposed at every update (square tiles)
            state = decay * ct.transpose(state) + local
        elif M == 61:  # the chunk's own state added twice
            state = decay * state + local + local
        else:
            state = decay * state + local
    if M == 51:
        last = ct.load(states, (bi, nc - 1, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        state = state + last.reshape((TP, TN))
    if M == 54:
        state = state + init
    if M == 53:
        ct.store(final_states, (bi, hi, 0, 0), init.reshape((1, 1, TP, TN)))
    elif M != 42:
        ct.store(final_states, (bi, hi, 0, 0), state.reshape((1, 1, TP, TN)))


@ct.kernel
def scan_planted_more(x, dt_out, dA_cumsum, C, B, chunk_init_states, y, Q: ct.Constant[int],
                      TP: ct.Constant[int], TN: ct.Constant[int], HEADS_PER_GROUP: ct.Constant[int],
                      M: ct.Constant[int]):
    """Exercise 7, right for M = 0; each M >= 21 plants one more mistake (see SCAN)."""
    bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)
    g = hi // HEADS_PER_GROUP
    x_c = ct.load(x, (bi, ct.maximum(c - 1, 0) if M == 91 else c, g if M == 51 else hi, 0),
                  shape=(1, Q, 1, TP), padding_mode=ZERO)
    x_c = x_c.reshape((Q, TP))
    if M == 57:  # silu on x as it is loaded
        xf = x_c.astype(ct.float32)
        x_c = (xf / (1.0 + ct.exp(-xf))).astype(x.dtype)
    C_c = ct.load(C, (bi, 0 if M == 41 else c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    if M == 59:  # a ReLU on C as it is loaded (a linear-attention habit)
        C_c = ct.maximum(C_c, 0.0)
    B_c = ct.load(C if M == 45 else B, (bi, 0 if M == 41 else c, g, 0), shape=(1, Q, 1, TN),
                  padding_mode=ZERO).reshape((Q, TN))
    state = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
    state = state.reshape((TP, TN))
    dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    dA_cs = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    if M == 25:
        cb = ct.sum(C_c.astype(ct.float32) * B_c.astype(ct.float32), axis=1)
        CB = cb[:, None] + ct.zeros((Q, Q), dtype=ct.float32)
    elif M == 26:
        CB = ct.ones((Q, Q), dtype=ct.float32)
    else:
        CB = ct.mma(C_c, ct.transpose(B_c), ct.zeros((Q, Q), dtype=ct.float32))
    pos = ct.arange(Q, dtype=ct.int32)
    causal = pos[:, None] + 1 >= pos[None, :] if M == 22 else pos[:, None] >= pos[None, :]
    if M == 94:
        causal = (c * Q + pos)[:, None] >= pos[None, :]
    decay = ct.exp(ct.minimum(dA_cs[:, None] - dA_cs[None, :], 0.0))
    if M == 60:  # the decay line repeated
        decay = decay * ct.exp(ct.minimum(dA_cs[:, None] - dA_cs[None, :], 0.0))
    if M == 23:
        P = ct.where(causal, CB * decay, 0.0)
        xs = (x_c.astype(ct.float32) * dt_c[None, :]).astype(x.dtype)
    elif M == 52:
        P = ct.where(causal, 0.0, CB * decay * dt_c[None, :])
        xs = x_c
    else:
        P = ct.where(causal, CB * decay * dt_c[None, :], -float("inf") if M == 42 else 0.0)
        xs = x_c
    if M == 27:
        P = P / ct.sum(P, axis=1, keepdims=True)
    if M == 21:
        P = ct.transpose(P)
    if M == 28:
        y_c = ct.mma(P.astype(ct.bfloat16), xs.astype(ct.bfloat16), ct.zeros((Q, TP), dtype=ct.float32))
    else:
        y_c = ct.mma(P.astype(x.dtype), xs, ct.zeros((Q, TP), dtype=ct.float32))
    past = ct.mma(C_c, ct.transpose(state.astype(C.dtype)), ct.zeros((Q, TP), dtype=ct.float32))
    if M == 24:
        d0 = ct.extract(dA_cs, (0,), shape=(1,))
        y_c = y_c + past * ct.exp(dA_cs - d0)[:, None]
    elif M == 43:
        y_c = y_c + past * ct.exp(ct.extract(dA_cs, (Q - 1,), shape=(1,)))
    elif M == 81:
        y_c = y_c + past * ct.exp(dA_cs - ct.extract(dA_cs, (0,), shape=(1,)))[:, None]
    elif M == 44:
        y_c = y_c + past * (ct.exp(dA_cs) * dt_c)[:, None]
    elif M == 53:
        y_c = (y_c + past) * ct.exp(dA_cs)[:, None]
    elif M == 55:
        y_c = y_c + past * ct.exp(dA_cs)[:, None]
        y_c = y_c + past * ct.exp(dA_cs)[:, None]
    elif M == 58:  # the state term's mma started from P @ x's tile, then added to it
        past = ct.mma(C_c, ct.transpose(state.astype(C.dtype)), y_c)
        y_c = y_c + past * ct.exp(dA_cs)[:, None]
    elif M == 56:  # added once per key half, as inside a loop over two key blocks: twice for the later rows
        rows = ct.arange(Q, dtype=ct.int32)
        y_c = y_c + past * (ct.exp(dA_cs) * ct.where(rows >= Q // 2, 2.0, 1.0))[:, None]
    elif M == 54:
        own = ct.sum(C_c.astype(ct.float32) * B_c.astype(ct.float32), axis=1) * dt_c
        y_c = y_c + past * ct.exp(dA_cs)[:, None] + own[:, None] * x_c.astype(ct.float32)
    else:
        y_c = y_c + past * ct.exp(dA_cs)[:, None]
    if M == 72:
        y_c = y_c * dt_c[:, None]
    if M == 61:  # a mask of the ragged end one short: the sequence's last position zeroed
        y_c = ct.where((c * Q + pos < x.shape[1] - 1)[:, None], y_c, 0.0)
    ct.store(y, (bi, c, g if M == 29 else hi, 0), y_c.astype(y.dtype).reshape((1, Q, 1, TP)))


@ct.kernel
def passing_bwd_planted_more(dS_out, dA_cumsum, chunk_init_states, dfinal_states, dstates, ddA_last,
                             dinitial_states, Q: ct.Constant[int], TP: ct.Constant[int],
                             TN: ct.Constant[int], M: ct.Constant[int]):
    """Exercise 8, right for M = 0; each M >= 21 plants one more mistake (see PASSING_BWD)."""
    bi, hi = ct.bid(0), ct.bid(1)
    dS = ct.load(dfinal_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO).reshape((TP, TN))
    dfin = dS
    if M == 92:
        dS = ct.zeros((TP, TN), dtype=ct.float32)
    nchunks = dS_out.shape[1]
    total = ct.zeros((), dtype=ct.float32)
    for i in range(nchunks + 1 if M == 52 else nchunks):
        c = nchunks - i if M == 22 else nchunks - 1 - i
        ct.store(dstates, (bi, c, hi, 0, 0), dS.reshape((1, 1, 1, TP, TN)))
        a = ct.load(dA_cumsum, (bi, hi, nchunks - 1 if M == 24 else c, Q - 1), shape=())
        g = ct.log(1.0 + ct.exp(a)) if M == 27 else ct.exp(a)
        S = ct.load(dS_out if M == 43 else chunk_init_states, (bi, c, 0 if M == 54 else hi, 0, 0),
                    shape=(1, 1, 1, TP, TN), padding_mode=ZERO).reshape((TP, TN))
        if M == 21:
            S = ct.transpose(S)
        if M == 28:
            part = ct.sum((dS * S).astype(ct.bfloat16)).astype(ct.float32)
        elif M == 41 or M == 42:
            own_c = ct.load(dS_out, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
            own_c = own_c.reshape((TP, TN))
            part = ct.sum((own_c if M == 41 else dS + own_c) * S)
        else:
            part = ct.sum(dS * S)
        val = g * part
        if M == 31:
            val = a * val
        if M == 51:
            val = ct.where(c == nchunks - 1, 0.0, val)
        if M == 25:
            total = total + val
            val = total
        if M == 29:
            ct.store(ddA_last, (bi, c, hi), val.reshape((1, 1, 1)))
        else:
            ct.store(ddA_last, (bi, hi, c), val.reshape((1, 1, 1)))
        own = ct.load(dS_out, (bi, c + 1 if M == 71 else c, 0 if M == 91 else hi, 0, 0),
                      shape=(1, 1, 1, TP, TN), padding_mode=ZERO).reshape((TP, TN))
        if M == 44:
            ct.store(dinitial_states, (bi, hi, 0, 0), dS.reshape((1, 1, TP, TN)))
        if M == 23:
            dS = dS + g * own
        elif M == 26:
            dS = dS + own
        elif M == 60:  # the carried gradient transposed at every step (square tiles)
            dS = g * ct.transpose(dS) + own
        elif M == 62:  # the decay applied twice to the carried gradient
            dS = g * g * dS + own
        else:
            dS = g * dS + own
        if M == 55:  # the carried gradient normalized after each update
            dS = dS / ct.sqrt(ct.sum(dS * dS))
    if M == 72:
        dS = ct.exp(ct.load(dA_cumsum, (bi, hi, 0, Q - 1), shape=())) * dS
    if M == 92:
        dS = dS + dfin
    if M == 61:  # chunk 0's own gradient added once more after the loop
        first = ct.load(dS_out, (bi, 0, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        dS = dS + first.reshape((TP, TN))
    if M != 44:
        ct.store(dfinal_states if M == 53 else dinitial_states, (bi, hi, 0, 0), dS.reshape((1, 1, TP, TN)))


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
    21: ("mask off by one: a hand mask drops the sequence's last step", r"leaves out \(or gets wrong\) the "
         r"sequence's last step"),
    22: ("scaling on the wrong axis: A loaded as a (Q,) tile, position s scaled by A[s]",
         r"reads A by position, not by head"),
    23: ("reduction over the wrong set: ct.sum for ct.cumsum", r"a sum, not a running sum"),
    24: ("wrong dtype: the cumsum taken in bfloat16", r"rounds to a low-precision dtype"),
    25: ("wrong block indices: the grid read as (b, h, nchunks)", r"raised IndexError.*outside.*TILE units"),
    26: ("extra nonlinearity: exp(cumsum) stored", r"With dt (= 0 your outputs are not 0|"
         r"doubled.*a nonlinearity to dt)"),
    27: ("term left out: dt_out never stored", r"into dt_out, left every output element holding the "
         r"value the check filled it with .*: it stored nothing there"),
    28: ("operand transposed: dt read as (b, h, l)", r"raised IndexError.*outside.*TILE units"),
    41: ("off by one: the own step counted twice (cumsum + v)", r"counts its own step twice"),
    42: ("wrong index: the running sum from dt of head 0", r"reads dt of another head"),
    31: ("term left out: the chunk's first step subtracted", r"first position wrong: leaves it out"),
    51: ("wrong reduction: a running mean", r"a running mean, not a running sum"),
    52: ("extra nonlinearity: dA_cumsum clamped at -20", r"clamps at -20"),
    54: ("wrong chunk index: dt loaded from chunk 0 for every chunk", r"reads one fixed chunk"),
    53: ("mask inverted: where(c*Q + pos >= l) keeps nothing", r"a mask keeps nothing"),
    55: ("mask off by one: a masked sum over k <= s + 1", r"starts one position early"),
    57: ("wrong array: dt loaded from dt_out, an output", r"or stored what it loaded from that same output"),
    56: ("wrong positions: a mask in the sequence's positions keeps chunk 0 only",
         r"0 in every later chunk: the block of chunk c >= 1 sums nothing"),
    60: ("term counted twice: a scan in two halves adding the first half's total twice",
         r"added more than once from position \d+ on"),
    61: ("wrong fill: the steps past the sequence's end set to 1", r"positions past its end .*a value other "
         r"than 0"),
    70: ("wrong direction: a running sum from the chunk's end", r"the sum runs backwards"),
    72: ("wrong output: dt_out stores dt * A", r"Your dt_out holds dt \* A\[hi\]"),
}
STATE = {
    1: ("wrong index: group h % g", r"reads B of the wrong group"),
    2: ("wrong decay index: the chunk's first position", r"end from position 0 instead of Q-1"),
    3: ("decay exponent flipped", r"sign flipped"),
    4: ("exp2 without LOG2E", r"computes 2\*\*v where the decay is exp\(v\)"),
    5: ("term left out: no dt", r"(With dt = 1 at every position, your output is right|the factor dt is "
        r"missing)"),
    6: ("extra nonlinearity: softplus(dt)", r"(With dt (= 0 your outputs are not 0|"
        r"doubled.*a nonlinearity to dt)|dt is already through its softplus)"),
    7: ("scaling on the wrong axis: w[None, :] (Q == TP)", r"weights w_k go wrong only when they differ from "
        r"position to position"),
    8: ("operand transposed: Bᵀ (x w) on square tiles", r"your state is transposed"),
    9: ("decay from the chunk start", r"decay from the chunk's START"),
    10: ("term left out: no decay", r"(With dA_cumsum = 0 \(every decay 1\), your output is right, so the "
         r"decay|dt_k alone: the decay is missing)"),
    21: ("operand transposed: a reshape used as the transpose", r"rows follow the chunk's positions k"),
    22: ("mask off by one: each chunk's last position masked out", r"leaves out \(or gets wrong\) each "
         r"chunk's last position"),
    23: ("scaling on the wrong axis: the weights applied to the state's rows after the mma (TP == Q)",
         r"weights w_k go wrong only when they differ from position to position"),
    24: ("wrong decay index: dA_cumsum of the group", r"reads dA_cumsum at the group index hi //"),
    25: ("reduction over the wrong set: the state summed over chunks 0..c", r"takes in positions of other "
         r"chunks"),
    26: ("term left out: the decay's exp", r"your decay is dA_cs\[Q-1\] - dA_cs\[k\] itself"),
    27: ("extra nonlinearity: silu(x)", r"With x (= 0 your outputs are not 0|doubled.*a nonlinearity to x)"),
    28: ("wrong dtype: the mma operands cast to bfloat16 on float32 inputs",
         r"rounds to a low-precision dtype"),
    29: ("wrong store index: (bi, hi, c), dt_out's axis order", r"raised IndexError.*outside.*TILE units"),
    41: ("wrong index: dt_out of the group", r"reads dt_out at the group index hi //"),
    42: ("wrong index: x of the group", r"reads x at the group index hi //"),
    31: ("extra nonlinearity: the weights clamped to at most 1", r"(With dt (= 0 your outputs are not 0|"
         r"doubled.*a nonlinearity to dt)|dt is already through its softplus)"),
    51: ("wrong accumulator start: ct.ones", r"plus the same constant \+1"),
    52: ("misplaced constant: exp2(v) * log2(e)", r"log2\(e\) multiplies the 2\*\*v"),
    53: ("wrong reduction: the outer product of two sums", r"an outer product of two vectors"),
    57: ("wrong array: the decay's end value taken from the dt row", r"last element of the dt row"),
    58: ("term counted twice: the last position added again after the mma",
         r"last position is counted twice"),
    60: ("wrong dtype: dA_cumsum rounded to bfloat16 on load", r"rounds dA_cumsum to a low-precision dtype"),
    59: ("accumulator counted twice: acc + ct.mma(.., acc) over the chunk's two halves",
         r"twice the right weight at positions 0\.\.\d+ of the chunk: those positions are counted twice"),
    61: ("extra factor: the decay applied twice", r"your decay is squared"),
    70: ("wrong chunk index: B of chunk c + 1", r"raised IndexError.*outside"),
    71: ("wrong decay: from the chunk's start to k", r"your decay runs from the chunk's START \(position 0\) "
         r"to k"),
    80: ("scaling on the wrong axis: dt of the chunk's last position for every position", r"the step of "
         r"position \d+ for every position"),
    90: ("wrong chunk index: x of the previous chunk", r"takes in positions of other chunks"),
}
PASSING = {
    1: ("off by one: the state stored after the update", r"you store the state after the update"),
    2: ("the decay applied after adding the local state", r"your kernel decays the chunk's own state too"),
    3: ("wrong decay index: the chunk's first position", r"another position than the chunk's last"),
    4: ("term left out: initial_states", r"your kernel leaves the initial state out"),
    5: ("reduction over the wrong set: the decay from a sum over the chunk", r"a sum over the chunk"),
    6: ("wrong chunk index: dA_cumsum indexed like states", r"reads dA_cumsum with its head \(axis 1\) and "
        r"chunk \(axis 2\) axes exchanged"),
    7: ("extra nonlinearity: the decay squared", r"(With dA_cumsum = 0 \(every decay 1\).*so the decay is "
        r"wrong|exp\(v\)\*\*2 for v = -0.5, so the decay is applied twice)"),
    8: ("term left out: the local state", r"with states = 0: your kernel leaves the chunk's own local state "
        r"out"),
    9: ("the chunks walked backwards", r"walks the chunks from the last to the first"),
    21: ("operand transposed: the local state added transposed (square tiles)", r"your kernel transposes the "
         r"chunk's local state"),
    22: ("scaling on the wrong axis: the chunk's dA row as a per-row decay (TP == Q)",
         r"another position than the chunk's last"),
    23: ("wrong chunk index: the decay of chunk c - 1", r"reads the decay of another chunk than its own"),
    24: ("reduction over the wrong set: the decay as dA[Q-1] - dA[0]",
         r"takes the decay across chunk c as exp\(dA_cs\[Q-1\] - dA_cs\[0\]\)"),
    25: ("term left out: no decay", r"(With dA_cumsum = 0 \(every decay 1\).*so the decay is wrong|"
         r"the carried tile is not decayed at all)"),
    26: ("extra nonlinearity: a sigmoid gate as the decay", r"a sigmoid takes the place of the exp"),
    27: ("wrong dtype: the stored state rounded to bfloat16", r"rounds to a low-precision dtype"),
    28: ("wrong store index: chunk_init_states stored at c + 1",
         r"into chunk_init_states, left .* unwritten"),
    31: ("extra nonlinearity: the exponent clamped at -10", r"breaks only where the decay is strong"),
    41: ("term left out: no carry, the state restarts each chunk", r"not carried from one chunk to the next"),
    42: ("off by one: final_states stored inside the loop, before the update",
         r"final_states equals the right chunk_init_states of chunk \d+: it is stored before the last "
         r"chunk's update"),
    51: ("term counted twice: the last local state added after the loop",
         r"plus the last chunk's own local state"),
    52: ("wrong guard: chunk 0's entering state never stored", r"exactly the elements at index 0 of axis 1"),
    53: ("wrong variable: final_states stored from the initial state's variable",
         r"the value the loop starts from"),
    54: ("term counted twice: the initial state added to final_states after the loop",
         r"plus the initial state"),
    55: ("wrong operator: the local state multiplied where it is added", r"grow as a power of the states"),
    56: ("wrong guard: chunk 0's local state never added", r"never adds states\[:, 0\]"),
    57: ("wrong variable: the update decays the initial state, not the carried one", r"INITIAL state"),
    58: ("operand transposed: the initial state loaded transposed (square tiles)", r"your kernel transposes "
         r"the initial state"),
    59: ("wrong array: initial_states read where the chunk's own state belongs",
         r"adds initial_states where the chunk's own state belongs"),
    60: ("operand transposed: the carried state transposed at every update (square tiles)",
         r"the carried state is transposed at every step of your walk"),
    61: ("term counted twice: the chunk's own state added twice", r"your kernel counts the chunk's own "
         r"local state twice"),
    81: ("extra factor: the initial state decayed before chunk 0", r"your kernel decays the initial state "
         r"once before chunk 0"),
}
SCAN = {
    1: ("operand transposed: B Cᵀ", r"your kernel computes B Cᵀ"),
    2: ("operand transposed: the state untransposed (TP == TN)", r"multiplies C by the state untransposed"),
    3: ("mask off by one: strict k < s", r"the diagonal k = s is what goes wrong"),
    4: ("scaling on the wrong axis: dt[:, None]", r"dt reaches the wrong elements"),
    5: ("term left out: the state term", r"with chunk_init_states = 0: your kernel leaves the state term "
        r"out"),
    6: ("term left out: the state term's decay", r"the state term is not decayed"),
    7: ("extra nonlinearity: softplus(dt)", r"the entering state = 0 and dt (= 0 your outputs are not 0|"
        r"doubled.*nonlinearity to dt)"),
    8: ("wrong index: group h % g", r"C and B of the wrong group"),
    9: ("decay exponent flipped", r"sign flipped"),
    10: ("mask left out", r"later positions leak into earlier outputs"),
    11: ("extra nonlinearity: silu(y)", r"x and the entering state (= 0 your "
         r"outputs are not 0|doubled.*a nonlinearity)"),
    21: ("operand transposed: Pᵀ @ x", r"your P is transposed \(Pᵀ @ x\)"),
    22: ("mask off by one: one future position kept", r"later positions leak into earlier outputs"),
    23: ("scaling on the wrong axis: dt on x's columns (TP == Q)", r"dt reaches the wrong elements"),
    24: ("wrong decay index: the state term decayed from position 0", r"the decay from position 0, which "
         r"leaves out position 0's own step"),
    25: ("reduction over the wrong set: a row-wise dot C_s . B_s", r"your P is C_s \. B_s for every k <= s, "
         r"each row's own product"),
    26: ("term left out: C Bᵀ", r"(factor C_s \. B_k of P is what goes wrong|C = 0 your outputs are not 0 "
         r"\(every output is linear in C\))"),
    27: ("extra nonlinearity: P's rows normalized", r"(something rescales P's entries|divides by something "
         r"that is 0 there \(a norm)"),
    28: ("wrong dtype: P and x cast to bfloat16 on float32 inputs", r"rounds to a low-precision dtype"),
    29: ("wrong store index: y stored at the group's head", r"y is stored at the group index"),
    41: ("wrong chunk index: C and B of chunk 0", r"reads C and B of another chunk"),
    42: ("mask: -inf above the diagonal, not 0", r"your output holds NaN or inf, where it is 0"),
    43: ("wrong decay index: the chunk's last decay for every position of the state term",
         r"exp\(dA_cs\[Q-1\]\) at every position: the decay across the whole chunk"),
    44: ("extra factor: dt on the state term", r"dt multiplies the state term"),
    45: ("wrong operand: C loaded in B's place (C Cᵀ)", r"never reads B, it reads C in its place"),
    51: ("wrong index: x loaded at the group index", r"reads x of another head"),
    52: ("mask inverted: ct.where's branches swapped", r"the mask is inverted"),
    53: ("scaling on the wrong term: (P @ x + past) * exp(dA_cs)", r"multiplied by exp\(dA_cs\[s\]\)"),
    54: ("term counted twice: the current position added beside P @ x",
         r"the diagonal k = s is what goes wrong"),
    55: ("term counted twice: the state term's line repeated", r"(the state term is added twice|your kernel "
         r"counts the state term twice)"),
    57: ("extra nonlinearity: silu(x) as it is loaded", r"applies a nonlinearity to x"),
    59: ("extra nonlinearity: ReLU on C as it is loaded", r"applies a nonlinearity to C as it is loaded"),
    58: ("accumulator reused: the state term's mma started from P @ x's tile",
         r"multiplied by 1 \+ exp\(dA_cs\[s\]\): P @ x is added twice"),
    56: ("term counted twice: the state term added once per key block (the later rows twice)",
         r"twice that at positions \d+\.\.\d+: those rows get the state term twice"),
    60: ("extra factor: P's decay squared", r"your decay is squared"),
    61: ("mask off by one: y zeroed at the sequence's last position", r"right everywhere except at "
         r"position \d+ \(the last of"),
    72: ("extra factor: y scaled by dt of its own row", r"every row s \(target position\) multiplied by "
         r"dt_s, the state term and P @ x alike"),
    81: ("wrong decay: the state term decayed from position 0", r"the decay from position 0, which leaves "
         r"out position 0's own step"),
    91: ("wrong chunk index: x of the previous chunk", r"your kernel reads x of another chunk"),
    94: ("mask off: the causal mask compares sequence positions with chunk positions", r"later positions "
         r"leak into earlier outputs"),
}
PASSING_BWD = {
    1: ("the chunks walked first to last", r"walks the chunks from the first to the last"),
    2: ("off by one: dstates stored after the update", r"you store dS after the update"),
    3: ("wrong decay index: the chunk's first position", r"another position than the chunk's last"),
    4: ("term left out: g in ddA_last", r"ddA_last is the right value times 1 / g_c \(no g_c in all\)"),
    5: ("ddA_last from the updated dS", r"pairs S_c with dS after chunk c's update"),
    6: ("term left out: dfinal_states", r"your kernel leaves d final_states out"),
    7: ("term left out: dS_out (a dropped gradient term)", r"with dS_out = 0: your kernel leaves chunk c's "
        r"own dS_out out"),
    8: ("dS_out decayed with the carried gradient", r"your kernel decays chunk c's own dS_out too"),
    9: ("reduction over the wrong set: sum(dS) * sum(S)", r"reduction in ddA_last mixes elements"),
    10: ("no padding on the state's load", r"loads without padding_mode=ZERO"),
    21: ("operand transposed: sum(dS * Sᵀ) (square tiles)", r"pairs dS with a transposed state"),
    22: ("off by one: c = nchunks - i", r"raised IndexError.*outside.*TILE units"),
    23: ("scaling on the wrong term: g on dS_out, not on the carried dS", r"(With dA_cumsum = 0 \(every "
         r"decay 1\), your output is right, so the decay is wrong|the carried tile is not decayed at all)"),
    24: ("wrong decay index: the last chunk's decay for every chunk",
         r"reads the LAST chunk's decay in every chunk"),
    25: ("reduction over the wrong set: ddA_last a running sum over the chunks", r"takes in the states of "
         r"other chunks"),
    26: ("term left out: the carried gradient's decay", r"(With dA_cumsum = 0 \(every decay 1\), your "
         r"output is right, so the decay is wrong|the carried tile is not decayed at all)"),
    27: ("extra nonlinearity: softplus as the decay", r"a softplus takes the place of the exp"),
    28: ("wrong dtype: the ddA products rounded to bfloat16", r"rounds to a low-precision dtype"),
    29: ("wrong store index: ddA_last at (bi, c, hi)", r"holds the right values at the wrong places \(what "
         r"belongs at head i, chunk j"),
    31: ("extra factor: ddA_last times the exponent a", r"right value times a = dA_cumsum"),
    41: ("wrong operand: ddA_last pairs S with dS_out", r"pairs S_c with a gradient that includes chunk c's "
         r"own dS_out"),
    42: ("ddA_last pairs S with dS + dS_out", r"pairs S_c with a gradient that includes chunk c's own "
         r"dS_out"),
    43: ("wrong operand: S loaded from dS_out",
         r"never reads chunk_init_states, it reads dS_out in its place"),
    44: ("off by one: dinitial_states stored inside the loop, before the update",
         r"dinitial_states equals the right dstates of chunk 0: it is stored before chunk 0's update"),
    51: ("wrong guard: ddA_last set to 0 for the last chunk", r"except at chunk \d+ \(the last"),
    52: ("loop bound: range(nchunks + 1)", r"a loop runs one step too many"),
    53: ("wrong array: dinitial_states stored into dfinal_states", r"wrote into dfinal_states, an input"),
    54: ("wrong head index: S_c of head 0 for every head", r"pairs dS with the state of another head"),
    55: ("extra nonlinearity: the carried gradient normalized", r"divides by something that is 0 there"),
    60: ("operand transposed: the carried gradient transposed at every step (square tiles)",
         r"the carried gradient dS is transposed at every step of your walk"),
    61: ("term counted twice: chunk 0's dS_out added again after the loop", r"(counts chunk c's own "
         r"dS_out twice in the first chunk \(chunk 0\) only|the right one plus chunk 0's dS_out, undecayed: "
         r"it is added once more after the loop)"),
    62: ("extra factor: the decay applied twice to the carried gradient", r"(your decay is squared|so the "
         r"decay is applied twice)"),
    71: ("wrong chunk index: dS_out of chunk c + 1", r"raised IndexError.*outside"),
    72: ("extra factor: dinitial_states decayed once more after the loop", r"your dinitial_states is the "
         r"right one times g_0"),
    91: ("wrong head index: dS_out of head 0", r"reads dS_out of another head than its own"),
    92: ("term in the wrong place: dfinal_states added after the loop, not carried", r"it is added after the "
         r"loop instead of starting the carry"),
}

#: exercise -> (check, module, planted kernel for M < 20, planted kernel for M >= 21, table)
EXERCISES = {
    "ex04": (check_chunk_cumsum_kernel, "chunk_cumsum", cumsum_planted, cumsum_planted_more, CUMSUM),
    "ex05": (check_chunk_state_kernel, "chunk_state", state_planted, state_planted_more, STATE),
    "ex06": (check_state_passing_kernel, "state_passing", passing_planted, passing_planted_more, PASSING),
    "ex07": (check_chunk_scan_kernel, "chunk_scan", scan_planted, scan_planted_more, SCAN),
    "ex08": (check_state_passing_bwd_kernel, "state_passing_bwd", passing_bwd_planted,
             passing_bwd_planted_more, PASSING_BWD),
}
CASES = [(ex, m) for ex, (*_, table) in EXERCISES.items() for m in table]


def run_planted(monkeypatch, exercise: str, mistake: int, more: bool = False) -> None:
    """Run the exercise's check on its planted kernel with ``mistake`` appended to every launch (the second
    planted kernel for ``mistake`` >= 21, or with ``more``)."""
    check, module, first, second, _ = EXERCISES[exercise]
    kernel = second if more or mistake >= 21 else first

    def launch_with(check_name, kern, grid, args, case, hint, backend):
        return harness.run_kernel(check_name, kern, grid, (*args, mistake), case, hint, backend)

    monkeypatch.setattr(f"mamba2_tutorial.exercises.{module}.run_kernel", launch_with)
    check(kernel)


def hint_of(exc: ExerciseFailed) -> str:
    text = str(exc)
    return text[text.index("Hint:"):text.index("More help:")]


@pytest.mark.parametrize("more", [False, True], ids=["first", "more"])
@pytest.mark.parametrize("exercise", sorted(EXERCISES))
def test_the_planted_kernel_is_right_without_a_mistake(monkeypatch, capsys, exercise, more):
    run_planted(monkeypatch, exercise, 0, more)
    assert "passed on the cpu backend" in capsys.readouterr().out


@pytest.mark.parametrize(("exercise", "mistake"), CASES, ids=[f"{e}-{m}" for e, m in CASES])
def test_each_planted_mistake_gets_the_hint_of_its_own_cause(monkeypatch, exercise, mistake):
    table = EXERCISES[exercise][-1]
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

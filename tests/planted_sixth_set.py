"""The sixth set of planted mistakes for the cuTile exercises 4-8 (docs/instructors.md): 40 slips written
from the exercises' contracts without reading the diagnosis code, measured on the checks before any fix, and
kept here as tested mistakes (``tests/test_exercise_diagnosis_sets.py`` says what each named hint must say).

Each kernel is right for M = 0 and plants mistake M for M = 1..8; M above 10 (``SANITY``) runs a mistake's
alternative code path with the slip corrected, and must pass.
"""

from __future__ import annotations

import math

import cuda.tile as ct

ZERO = ct.PaddingMode.ZERO
LOG2E = 1.4426950408889634


@ct.kernel
def cumsum_t(dt, A, dt_out, dA_cumsum, Q: ct.Constant[int], M: ct.Constant[int]):
    if M == 6:
        c, bi = ct.bid(0), ct.bid(1)  # batch and chunk read from each other's block id
    else:
        bi, c = ct.bid(0), ct.bid(1)
    hi = ct.bid(2)
    pos = ct.arange(Q, dtype=ct.int32)
    a = ct.load(A, (hi,), shape=())
    if M == 2 or M == 4 or M == 12:
        # a blocked scan: the chunk in two halves of H = Q/2, loaded separately, the first half's total
        # carried
        H = Q // 2
        d1 = ct.load(dt, (bi, 2 * c, hi), shape=(1, H, 1), padding_mode=ZERO).reshape((H,))
        if M == 4:
            i2 = c + 1  # the second half's tile index: c + 1
        else:
            i2 = 2 * c + 1
        if i2 * H < dt.shape[1]:  # a half entirely past the sequence end is not loaded (zeros)
            d2 = ct.load(dt, (bi, i2, hi), shape=(1, H, 1), padding_mode=ZERO).reshape((H,))
        else:
            d2 = ct.zeros((H,), dtype=ct.float32)
        v1 = d1 * a
        v2 = d2 * a
        cs1 = ct.cumsum(v1, axis=0)
        if M == 2:
            off = ct.extract(v1, (H - 1,), shape=(1,))  # the first half's last STEP, not its running total
        else:
            off = ct.extract(cs1, (H - 1,), shape=(1,))
        cs2 = ct.cumsum(v2, axis=0) + off
        ct.store(dt_out, (bi, hi, c, 0), d1.reshape((1, 1, 1, H)))
        ct.store(dt_out, (bi, hi, c, 1), d2.reshape((1, 1, 1, H)))
        ct.store(dA_cumsum, (bi, hi, c, 0), cs1.reshape((1, 1, 1, H)))
        ct.store(dA_cumsum, (bi, hi, c, 1), cs2.reshape((1, 1, 1, H)))
    else:
        if M == 1:
            # dt read as if it were (b, h, l): the chunk's Q steps taken along the last axis
            dt_c = ct.load(dt, (bi, hi, c), shape=(1, 1, Q), padding_mode=ZERO).reshape((Q,))
        else:
            dt_c = ct.load(dt, (bi, c, hi), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,))
        v = dt_c * a
        ct.store(dt_out, (bi, hi, c, 0), dt_c.reshape((1, 1, 1, Q)))
        if M == 3 or M == 13 or M == 5 or M == 14:
            # a hand running sum: the running value `run` and the tile cs built position by position
            cs = ct.zeros((Q,), dtype=ct.float32)
            run = ct.sum(cs)
            for k in range(Q):
                v_k = ct.sum(ct.where(pos == k, v, 0.0))
                run = run + v_k
                if M == 3:
                    # each running value stored as a one-element tile, its index the ELEMENT offset c*Q + k
                    ct.store(dA_cumsum, (bi, hi, c, c * Q + k), run.reshape((1, 1, 1, 1)))
                elif M == 13:
                    ct.store(dA_cumsum, (bi, hi, c, k), run.reshape((1, 1, 1, 1)))
                elif M == 5:
                    cs = ct.where(pos == k, run, 0.0)  # the tile rebuilt (else-branch 0), not updated
                else:
                    cs = ct.where(pos == k, run, cs)
            if M == 5 or M == 14:
                ct.store(dA_cumsum, (bi, hi, c, 0), cs.reshape((1, 1, 1, Q)))
        else:
            cs = ct.cumsum(v, axis=0)
            if M == 7:
                ct.store(dA_cumsum, (bi, hi, 0, c), cs.reshape((1, 1, 1, Q)))  # chunk index on the last axis
            elif M == 8:
                ct.store(dA_cumsum, (bi, hi, c, 0), cs.reshape((1, 1, Q)))  # a rank-3 tile
            else:
                ct.store(dA_cumsum, (bi, hi, c, 0), cs.reshape((1, 1, 1, Q)))


@ct.kernel
def state_t(x, B, dt_out, dA_cumsum, states, Q: ct.Constant[int], TP: ct.Constant[int], TN: ct.Constant[int],
            HEADS_PER_GROUP: ct.Constant[int], M: ct.Constant[int]):
    bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)
    g = hi // HEADS_PER_GROUP
    dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    dA_cs = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    if M == 7:
        dA_last = ct.load(dA_cumsum, (bi, hi, c, Q), shape=())  # the slice-end habit: Q for the last position
    else:
        dA_last = ct.extract(dA_cs, (Q - 1,), shape=(1,))
    if M == 2:
        w = ct.exp2(dA_last * LOG2E - dA_cs) * dt_c  # LOG2E on the first term only
    elif M == 12:
        w = ct.exp2((dA_last - dA_cs) * LOG2E) * dt_c
    else:
        w = ct.exp(dA_last - dA_cs) * dt_c
    zeros = ct.zeros((TP, TN), dtype=ct.float32)
    if M == 4 or M == 5 or M == 11:
        # a K-loop in two steps of TK = Q/2 rows (the taught kernel's loop), the steps past the end skipped
        TK = Q // 2
        l = x.shape[1]
        n_steps = min(Q // TK, ct.cdiv(l - c * Q, TK))
        state = zeros
        for kt in range(n_steps):
            x_k = ct.load(x, (bi, c * (Q // TK) + kt, hi, 0), shape=(1, TK, 1, TP), padding_mode=ZERO)
            B_k = ct.load(B, (bi, c * (Q // TK) + kt, g, 0), shape=(1, TK, 1, TN), padding_mode=ZERO)
            x_k = x_k.reshape((TK, TP))
            B_k = B_k.reshape((TK, TN))
            if M == 4:
                w_k = ct.extract(w, (kt * TK,), shape=(TK,))  # the element offset as the tile index
            else:
                w_k = ct.extract(w, (kt,), shape=(TK,))
            xw_k = (x_k.astype(ct.float32) * w_k[:, None]).astype(x.dtype)
            if M == 5:
                # inside, before the mma
                ct.store(states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))
            state = ct.mma(ct.transpose(xw_k), B_k, state)
        if M != 5:
            ct.store(states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))
    else:
        if M == 1:
            # (b,h,nc)
            x_c = ct.load(x, (bi, hi, c, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((Q, TP))
        else:
            x_c = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((Q, TP))
        if M == 8:
            # B read as if it were (b, l, n, g)
            B_c = ct.load(B, (bi, c, 0, g), shape=(1, Q, TN, 1), padding_mode=ZERO).reshape((Q, TN))
        else:
            B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
        if M == 6 or M == 13:
            # a hand loop of outer products over the positions
            xwf = x_c.astype(ct.float32) * w[:, None]
            state = zeros
            for k in range(Q):
                x_k = ct.extract(xwf, (k, 0), shape=(1, TP)).reshape((TP, 1))
                B_k = ct.extract(B_c, (k, 0), shape=(1, TN)).astype(ct.float32)
                if M == 6:
                    state = x_k * B_k  # assigned: the accumulator overwritten
                else:
                    state = state + x_k * B_k
        else:
            xw = (x_c.astype(ct.float32) * w[:, None]).astype(x.dtype)
            state = ct.mma(ct.transpose(xw), B_c, zeros)
        if M == 3:
            ct.store(states, (bi, c, hi, 0, 0), state.astype(ct.float16).reshape((1, 1, 1, TP, TN)))
        else:
            ct.store(states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))


@ct.kernel
def passing_t(states, dA_cumsum, initial_states, chunk_init_states, final_states, Q: ct.Constant[int],
              TP: ct.Constant[int], TN: ct.Constant[int], M: ct.Constant[int]):
    bi, hi = ct.bid(0), ct.bid(1)
    if M == 1:
        # initial_states indexed like states (the states load line copied)
        state = ct.load(initial_states, (bi, 0, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
    else:
        state = ct.load(initial_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO)
    state = state.reshape((TP, TN))
    nc = states.shape[1]
    if M == 4 or M == 11:
        # chunk 0 peeled off before the loop
        ct.store(chunk_init_states, (bi, 0, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))
        a0 = ct.load(dA_cumsum, (bi, hi, 0, Q - 1), shape=())
        l0 = ct.load(states, (bi, 0, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO).reshape((TP, TN))
        state = ct.exp(a0) * state + l0
        for c in range(1, nc):
            if M == 4:
                ct.store(chunk_init_states, (bi, c - 1, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))  # c - 1
            else:
                ct.store(chunk_init_states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))
            a = ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=())
            local = ct.load(states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
            state = ct.exp(a) * state + local.reshape((TP, TN))
    elif M == 7 or M == 12:
        # the chunk loop unrolled by two
        for i in range(ct.cdiv(nc, 2)):
            c0 = 2 * i
            c1 = 2 * i + 1
            ct.store(chunk_init_states, (bi, c0, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))
            a0 = ct.load(dA_cumsum, (bi, hi, c0, Q - 1), shape=())
            l0 = ct.load(states, (bi, c0, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
            l0 = l0.reshape((TP, TN))
            if c1 < nc:
                a1 = ct.load(dA_cumsum, (bi, hi, c1, Q - 1), shape=())
                l1 = ct.load(states, (bi, c1, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
                l1 = l1.reshape((TP, TN))
                ct.store(chunk_init_states, (bi, c1, hi, 0, 0),
                         (ct.exp(a0) * state + l0).reshape((1, 1, 1, TP, TN)))
                if M == 7:
                    state = ct.exp(a0) * ct.exp(a1) * state + l0 + l1  # l0 not decayed across chunk c1
                else:
                    state = ct.exp(a0) * ct.exp(a1) * state + ct.exp(a1) * l0 + l1
            else:
                state = ct.exp(a0) * state + l0
    else:
        if M == 6:
            # the chunk's own state loaded once, before the loop (hoisted)
            local = ct.load(states, (bi, 0, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
            local = local.reshape((TP, TN))
        for c in range(nc):
            if M == 3:
                # the initial-state load line inside the loop: the carry restarts every chunk
                state = ct.load(initial_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO)
                state = state.reshape((TP, TN))
            ct.store(chunk_init_states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))
            if M == 2:
                a = ct.load(dA_cumsum, (bi, c, hi, Q - 1), shape=())  # states' axis order
            elif M == 8:
                # the chunk axis's length
                a = ct.load(dA_cumsum, (bi, hi, c, dA_cumsum.shape[2] - 1), shape=())
            else:
                a = ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=())
            if M == 5:
                decay = math.exp(a)  # Python's math.exp on a tile value
            else:
                decay = ct.exp(a)
            if M != 6:
                local = ct.load(states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
                local = local.reshape((TP, TN))
            state = decay * state + local
    ct.store(final_states, (bi, hi, 0, 0), state.reshape((1, 1, TP, TN)))


@ct.kernel
def scan_t(x, dt_out, dA_cumsum, C, B, chunk_init_states, y, Q: ct.Constant[int], TP: ct.Constant[int],
           TN: ct.Constant[int], HEADS_PER_GROUP: ct.Constant[int], M: ct.Constant[int]):
    bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)
    g = hi // HEADS_PER_GROUP
    x_c = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((Q, TP))
    C_c = ct.load(C, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    state = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
    state = state.reshape((TP, TN))
    if M == 5:
        dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, Q, 1)).reshape((Q,))  # Q on the chunk axis
    else:
        dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    dA_cs = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    pos = ct.arange(Q, dtype=ct.int32)
    causal = pos[:, None] >= pos[None, :]
    decay = ct.exp(ct.minimum(dA_cs[:, None] - dA_cs[None, :], 0.0))
    CB = ct.mma(C_c, ct.transpose(B_c), ct.zeros((Q, Q), dtype=ct.float32))
    if M == 6:
        W = CB * decay * dt_c[None, :] * dt_c[:, None]  # dt of the source AND of the target
    else:
        W = CB * decay * dt_c[None, :]
    P = ct.where(causal, W, 0.0)
    if M == 8:
        P = ct.where(pos[:, None] == pos[None, :], 0.5 * P, P)  # the diagonal halved (a trapezoid habit)
    if M == 7:
        # C upcast for the state term, the state cast to C's dtype
        past = ct.mma(C_c.astype(ct.float32), ct.transpose(state.astype(C.dtype)),
                      ct.zeros((Q, TP), dtype=ct.float32))
    else:
        past = ct.mma(C_c, ct.transpose(state.astype(C.dtype)), ct.zeros((Q, TP), dtype=ct.float32))
    past = past * ct.exp(dA_cs)[:, None]
    if M == 1 or M == 11:
        # the sources in two blocks of H = Q/2, accumulated in a loop, the store written inside it
        H = Q // 2
        Px = P.astype(x.dtype)
        acc = past
        for kb in range(2):
            P_kb = ct.extract(Px, (0, kb), shape=(Q, H))
            x_kb = ct.extract(x_c, (kb, 0), shape=(H, TP))
            if M == 1:
                ct.store(y, (bi, c, hi, 0), acc.astype(y.dtype).reshape((1, Q, 1, TP)))  # before the add
            acc = ct.mma(P_kb, x_kb, acc)
        if M == 11:
            ct.store(y, (bi, c, hi, 0), acc.astype(y.dtype).reshape((1, Q, 1, TP)))
    else:
        y_c = ct.mma(P.astype(x.dtype), x_c, ct.zeros((Q, TP), dtype=ct.float32)) + past
        if M == 3:
            l = x.shape[2]  # the sequence length read from x's head axis
            y_c = ct.where((c * Q + pos < l)[:, None], y_c, 0.0)
        if M == 4 or M == 12:
            # the rows stored one by one
            for s in range(Q):
                row = ct.extract(y_c, (s, 0), shape=(1, TP)).astype(y.dtype)
                if c * Q + s < x.shape[1]:  # rows past the sequence end are not stored
                    if M == 4:
                        ct.store(y, (bi, s, hi, 0), row.reshape((1, 1, 1, TP)))  # chunk-local s, no c*Q
                    else:
                        ct.store(y, (bi, c * Q + s, hi, 0), row.reshape((1, 1, 1, TP)))
        elif M == 2:
            ct.store(y, (bi, c, hi, 0), y_c.astype(y.dtype).reshape((1, Q, TP, 1)))  # (b, l, p, h) order
        else:
            ct.store(y, (bi, c, hi, 0), y_c.astype(y.dtype).reshape((1, Q, 1, TP)))


@ct.kernel
def passing_bwd_t(dS_out, dA_cumsum, chunk_init_states, dfinal_states, dstates, ddA_last, dinitial_states,
                  Q: ct.Constant[int], TP: ct.Constant[int], TN: ct.Constant[int], M: ct.Constant[int]):
    bi, hi = ct.bid(0), ct.bid(1)
    if M == 6:
        dF = ct.load(dfinal_states, (bi, hi, 0, 0), shape=(1, 1, TN, TP), padding_mode=ZERO)  # (n, p) tile
    else:
        dF = ct.load(dfinal_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO)
    dF = dF.reshape((TP, TN))
    nchunks = dS_out.shape[1]
    if M == 1:
        a_last = ct.load(dA_cumsum, (bi, hi, nchunks - 1, Q - 1), shape=())
        dS = ct.exp(a_last) * dF  # the start decayed across the last chunk
    elif M == 3:
        dS = ct.zeros((TP, TN), dtype=ct.float32)  # dfinal only into dstates[last], below
    else:
        dS = dF
    start = 0
    if M == 7 or M == 11:
        # the last chunk peeled off before the loop
        c = nchunks - 1
        ct.store(dstates, (bi, c, hi, 0, 0), dS.reshape((1, 1, 1, TP, TN)))
        g = ct.exp(ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()))
        S = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        S = S.reshape((TP, TN))
        if M == 11:
            ct.store(ddA_last, (bi, hi, c), (g * ct.sum(dS * S)).reshape((1, 1, 1)))
        own = ct.load(dS_out, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO).reshape((TP, TN))
        dS = g * dS + own
        start = 1
    for i in range(start, nchunks):
        if M == 8:
            c = -1 - i  # Python's negative indexing for the reverse walk
        else:
            c = nchunks - 1 - i
        if M == 3:
            if c == nchunks - 1:
                out = dS + dF
            else:
                out = dS
            ct.store(dstates, (bi, c, hi, 0, 0), out.reshape((1, 1, 1, TP, TN)))
        else:
            ct.store(dstates, (bi, c, hi, 0, 0), dS.reshape((1, 1, 1, TP, TN)))
        g = ct.exp(ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()))
        if M == 5:
            S = ct.load(chunk_init_states, (bi, hi, c, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        else:
            S = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        S = S.reshape((TP, TN))
        own = ct.load(dS_out, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO).reshape((TP, TN))
        if M == 2:
            dd = g * ct.sum((dS + own) * S)  # the own gradient paired with S as well
        elif M == 4:
            dd = g * ct.extract(ct.sum(dS * S, axis=1), (0,), shape=(1,))  # reduced over n, row 0 kept
        else:
            dd = g * ct.sum(dS * S)
        ct.store(ddA_last, (bi, hi, c), dd.reshape((1, 1, 1)))
        dS = g * dS + own
    ct.store(dinitial_states, (bi, hi, 0, 0), dS.reshape((1, 1, TP, TN)))


#: exercise -> {M: the slip planted}
SLIPS = {
    "ex04": {
        1: ('layout misread (dt taken as (b, h, l)): dt loaded at (bi, hi, c) with shape (1, 1, Q):'
            " the chunk's steps taken along the last axis, as if dt were (b, h, l)"),
        2: ('accumulator mishandled (blocked scan carries the last step, not the running total): '
            "the chunk in two halves (loaded separately); the second half's offset is extract(v1, "
            "H-1), the first half's LAST STEP dt*A, instead of extract(cs1, H-1), its running total"),
        3: ('wrong store index (element offset as tile index, store inside a hand loop): hand '
            'running sum; each running value stored in the loop as a one-element tile at tile index'
            ' (bi, hi, c, c*Q + k) (the element offset in the sequence) instead of (bi, hi, c, k)'),
        4: ('wrong load index (tile units: half-tile index c + 1 for 2c + 1): blocked scan in two '
            'halves of H = Q/2: the second half of dt loaded at tile index (bi, c + 1, hi) instead '
            'of (bi, 2c + 1, hi)'),
        5: ("accumulator overwritten (where's else-branch 0 in a hand loop): hand running sum "
            'building the tile with cs = where(pos == k, run, 0.0) instead of where(pos == k, run, '
            'cs)'),
        6: ('block ids swapped (batch and chunk): c, bi = ct.bid(0), ct.bid(1): the batch entry '
            "read from the chunk's block id and the chunk from the batch's"),
        7: ('wrong store index (chunk index on the position axis): dA_cumsum stored at (bi, hi, 0, '
            'c) instead of (bi, hi, c, 0)'),
        8: ('wrong tile rank in a store (compile time): dA_cumsum stored as cs.reshape((1, 1, Q)), '
            'a rank-3 tile, into the 4-d array'),
    },
    "ex05": {
        1: ('wrong load index (x at (bi, hi, c): chunk and head swapped): x loaded at (bi, hi, c, '
            "0) (dt_out's index order) instead of (bi, c, hi, 0)"),
        2: ('misplaced constant (LOG2E on one term of the exp2 exponent): w = exp2(dA_last * LOG2E '
            '- dA_cs) * dt instead of exp2((dA_last - dA_cs) * LOG2E) * dt'),
        3: ('wrong dtype (the state stored through float16): state.astype(ct.float16) before the '
            'store into the float32 states'),
        4: ('index in the wrong units (K-loop extract at the element offset): K-loop of two steps '
            "of TK = Q/2: the step's weights taken as ct.extract(w, (kt * TK,), shape=(TK,)) "
            '(element offset) instead of (kt,) (tile index)'),
        5: ('store at the wrong time (inside the K-loop, before the mma): K-loop of two halves with'
            ' the states store inside the loop body, before state = mma(...)'),
        6: ('accumulator overwritten (hand loop of outer products): hand loop over the positions: '
            'state = x_k ⊗ B_k * w_k (assigned) instead of state = state + ...'),
        7: ('off by one (the last position read at index Q: the slice-end habit): dA_last = '
            'ct.load(dA_cumsum, (bi, hi, c, Q), shape=()) instead of position Q - 1'),
        8: ('layout misread (B taken as (b, l, n, g)): B loaded at (bi, c, 0, g) with shape (1, Q, '
            'TN, 1), as if B were (b, l, n, g)'),
    },
    "ex06": {
        1: ('wrong index rank (initial_states indexed like states): initial_states loaded with the '
            'states load line: index (bi, 0, hi, 0, 0), shape (1, 1, 1, TP, TN)'),
        2: ("wrong load index (decay at (bi, c, hi): states' axis order): the decay read at "
            'dA_cumsum[bi, c, hi, Q-1] instead of [bi, hi, c, Q-1]'),
        3: ('load placed inside the loop (carry restarted each chunk): the initial_states load line'
            ' inside the chunk loop: state reloaded at the top of every iteration'),
        4: ('store index off by one (peeled first chunk, then c - 1): chunk 0 peeled before the '
            'loop; in the loop `for c in range(1, nc)` the entering state stored at c - 1'),
        5: ("Python math on a tile (compile time): decay = math.exp(a) (Python's math module) "
            'instead of ct.exp(a)'),
        6: ("load hoisted out of the loop (the local state of chunk 0 for every chunk): the chunk's"
            ' own state loaded once before the loop, from chunk 0, and added at every chunk'),
        7: ("scaling left out in a hand-unrolled loop (pair's first local state undecayed): loop "
            "unrolled by two: state = g0 * g1 * state + l0 + l1, chunk c0's own state not decayed "
            'across chunk c1'),
        8: ("wrong constant (the last position from the chunk axis's length): the decay read at "
            'position dA_cumsum.shape[2] - 1 (nchunks - 1) instead of Q - 1'),
    },
    "ex07": {
        1: ('store at the wrong time (inside the source-block loop, before the add): the sources in'
            ' two blocks of Q/2 accumulated in a loop onto the state term; the y store written '
            'inside the loop, before acc = mma(P_kb, x_kb, acc)'),
        2: ('layout misread in the store (y as (b, l, p, h)): y stored as y_c.reshape((1, Q, TP, '
            '1)) at (bi, c, hi, 0), as if y were (b, l, p, h)'),
        3: ('wrong index (shape axis: l read from x.shape[2]): outputs zeroed past the sequence end'
            ' with a hand mask c*Q + pos < l where l = x.shape[2] (h)'),
        4: ('wrong store index (per-row stores without the chunk offset): y stored row by row in a '
            'loop at (bi, s, hi, 0) (chunk-local s) instead of (bi, c*Q + s, hi, 0)'),
        5: ('layout misread in a load (dt_out with Q on the chunk axis): dt_out loaded with shape '
            '(1, 1, Q, 1) at (bi, hi, c, 0) instead of (1, 1, 1, Q)'),
        6: ('term counted twice (dt of the target as well as the source): P = CB * decay * dt[None,'
            ' :] * dt[:, None]'),
        7: ('wrong dtype (the cast on the wrong operand of the state term): state term '
            'ct.mma(C.astype(float32), transpose(state.astype(C.dtype))): C upcast while the state '
            "is cast to C's dtype"),
        8: ("wrong constant (P's diagonal halved): P's diagonal multiplied by 0.5 (a trapezoid-rule"
            ' habit)'),
    },
    "ex08": {
        1: ('operation applied once too often (the start decayed): dS = exp(dA_cumsum[bi, hi, last,'
            ' Q-1]) * dfinal_states before the loop'),
        2: ('term added to the wrong factor (own gradient in ddA_last): ddA_last = g * <dS + '
            'dS_out[c], S> instead of g * <dS, S>'),
        3: ('term at the wrong place (d final_states only into dstates[last]): the carry started at'
            ' zeros and dfinal_states added only to the value stored into dstates[last]'),
        4: ('reduction over the wrong set (inner product over n only, row 0 kept): ddA_last = g * '
            'extract(sum(dS * S, axis=1), 0): the inner product reduced over n and only row p = 0 '
            'kept'),
        5: ("wrong load index (S at (bi, hi, c): dA_cumsum's axis order): chunk_init_states loaded "
            'at (bi, hi, c, 0, 0) instead of (bi, c, hi, 0, 0)'),
        6: ('layout misread in a load (dfinal_states as an (n, p) tile): dfinal_states loaded with '
            'shape (1, 1, TN, TP), then reshaped to (TP, TN)'),
        7: ('store left out in a peeled iteration (ddA_last of the last chunk): the last chunk '
            'peeled off before the loop with its ddA_last store forgotten'),
        8: ('wrong index (Python negative indexing for the reverse walk): c = -1 - i (the Python '
            'habit x[-1 - i]) instead of c = nchunks - 1 - i'),
    },
}

KERNELS = {"ex04": cumsum_t, "ex05": state_t, "ex06": passing_t, "ex07": scan_t, "ex08": passing_bwd_t}

#: exercise -> M values that run a mistake's code path with the slip corrected (must pass)
SANITY = {"ex04": [12, 13, 14], "ex05": [11, 12, 13], "ex06": [11, 12], "ex07": [11, 12], "ex08": [11]}

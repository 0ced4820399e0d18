"""The thirteenth set of planted mistakes for the cuTile exercises 4-8 (docs/instructors.md): 40 slips written
from the exercises' contracts without reading the diagnosis code, as a mixed workshop room would slip:
learners of the guided tier, of the open tier, and learners who bring the habits of attention kernels,
measured on the checks before any fix, and kept here as tested mistakes
(``tests/test_exercise_diagnosis_sets.py`` says what hint each gets).

Each kernel is right for M = 0 and plants mistake M for M = 1..8; M above 10 (``SANITY``) runs a mistake's
alternative code path with the slip corrected, and must pass.
"""

from __future__ import annotations

import cuda.tile as ct

ZERO = ct.PaddingMode.ZERO


# ------------------------------------------------------------------------------------------------------------
# ex04: chunk cumsum
# ------------------------------------------------------------------------------------------------------------
@ct.kernel
def chunk_cumsum_kernel(dt, A, dt_out, dA_cumsum, Q: ct.Constant[int], M: ct.Constant[int]):
    bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)

    if M == 1:
        # slip 1: padding_mode left at its default (undetermined)
        dt_c = ct.load(dt, (bi, c, hi), shape=(1, Q, 1)).reshape((Q,))
    elif M == 5 or M == 15:
        # open tier: mask the ragged tail by hand instead of padding
        dt_raw = ct.load(dt, (bi, c, hi), shape=(1, Q, 1)).reshape((Q,))
        pos = ct.arange(Q, dtype=ct.int32)
        left = dt.shape[1] - c * Q  # positions of the sequence left in this chunk
        if M == 5:
            dt_c = ct.where(pos <= left, dt_raw, 0.0)  # slip 5: <= keeps one position past the end
        else:
            dt_c = ct.where(pos < left, dt_raw, 0.0)
    else:
        dt_c = ct.load(dt, (bi, c, hi), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,))

    A_h = ct.load(A, (hi,), shape=())
    dA = dt_c * A_h

    if M == 7:
        # slip 7: softmax habit, subtract the max "for stability"
        dA = dA - ct.max(dA)

    if M == 2:
        # slip 2: exclusive cumsum
        dA_cs = ct.cumsum(dA, axis=0) - dA
    elif M == 4 or M == 14:
        # open tier: two halves, each scanned, then joined
        H = Q // 2
        cs_lo = ct.cumsum(ct.extract(dA, (0,), shape=(H,)), axis=0)
        cs_hi = ct.cumsum(ct.extract(dA, (1,), shape=(H,)), axis=0)
        if M == 14:
            cs_hi = cs_hi + ct.extract(cs_lo, (H - 1,), shape=(1,))  # slip 4 omits this carry
        dA_cs = ct.cat((cs_lo, cs_hi), 0)
    elif M == 6 or M == 16:
        # open tier: hand loop over source positions k, adding dA[k] to every position s >= k
        pos = ct.arange(Q, dtype=ct.int32)
        acc = ct.zeros((Q,), dtype=ct.float32)
        if M == 6:
            for k in range(Q - 1):  # slip 6: stops one short, position Q-1 never adds its own term
                dA_k = ct.sum(ct.where(pos == k, dA, 0.0))
                acc = acc + ct.where(pos >= k, dA_k, 0.0)
        else:
            for k in range(Q):
                dA_k = ct.sum(ct.where(pos == k, dA, 0.0))
                acc = acc + ct.where(pos >= k, dA_k, 0.0)
        dA_cs = acc
    elif M == 8 or M == 18:
        # attention habit: a causal (Q, Q) matrix, s the query row, k the key column
        pos = ct.arange(Q, dtype=ct.int32)
        causal = pos[:, None] >= pos[None, :]
        if M == 8:
            dA_cs = ct.sum(ct.where(causal, dA[None, :], 0.0), axis=0)  # slip 8: reduces over the query rows
        else:
            dA_cs = ct.sum(ct.where(causal, dA[None, :], 0.0), axis=1)
    else:
        dA_cs = ct.cumsum(dA, axis=0)

    if M == 3:
        # slip 3: stores the scaled step sizes dt*A into dt_out
        ct.store(dt_out, (bi, hi, c, 0), dA.reshape((1, 1, 1, Q)))
    else:
        ct.store(dt_out, (bi, hi, c, 0), dt_c.reshape((1, 1, 1, Q)))
    ct.store(dA_cumsum, (bi, hi, c, 0), dA_cs.reshape((1, 1, 1, Q)))


# ------------------------------------------------------------------------------------------------------------
# ex05: chunk state
# ------------------------------------------------------------------------------------------------------------
@ct.kernel
def chunk_state_kernel(
    x,
    B,
    dt_out,
    dA_cumsum,
    states,
    Q: ct.Constant[int],
    TP: ct.Constant[int],
    TN: ct.Constant[int],
    HEADS_PER_GROUP: ct.Constant[int],
    M: ct.Constant[int],
):
    bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)
    if M == 1:
        g = hi % HEADS_PER_GROUP  # slip 1: modulo instead of floor division
    else:
        g = hi // HEADS_PER_GROUP

    if M == 5 or M == 15:
        # open tier: mask the ragged rows by hand instead of zero padding
        x_raw = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP)).reshape((Q, TP))
        B_raw = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN)).reshape((Q, TN))
        pos = ct.arange(Q, dtype=ct.int32)
        rows = (pos < x.shape[1] - c * Q)[:, None]
        x_c = ct.where(rows, x_raw, 0.0)
        if M == 5:
            B_c = B_raw  # slip 5: only x is masked; B keeps its undetermined padding
        else:
            B_c = ct.where(rows, B_raw, 0.0)
    else:
        x_c = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((Q, TP))
        B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    dA_cs = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))

    dA_last = ct.extract(dA_cs, (Q - 1,), shape=(1,))
    if M == 2:
        w = ct.exp(dA_cs - dA_last) * dt_c  # slip 2: exponent sign flipped
    elif M == 3:
        w = ct.exp(dA_last - dA_cs)  # slip 3: dt factor left out
    elif M == 8:
        w = ct.exp(dA_last) * ct.exp(-dA_cs) * dt_c  # slip 8: exponent split into two factors
    else:
        w = ct.exp(dA_last - dA_cs) * dt_c

    if M == 4 or M == 14:
        # open tier: two half-chunk products, each decayed to its own end, then combined
        H = Q // 2
        dA_mid = ct.extract(dA_cs, (H - 1,), shape=(1,))
        xf = x_c.astype(ct.float32)
        w_lo = ct.exp(dA_mid - ct.extract(dA_cs, (0,), shape=(H,))) * ct.extract(dt_c, (0,), shape=(H,))
        w_hi = ct.exp(dA_last - ct.extract(dA_cs, (1,), shape=(H,))) * ct.extract(dt_c, (1,), shape=(H,))
        xw_lo = (ct.extract(xf, (0, 0), shape=(H, TP)) * w_lo[:, None]).astype(x.dtype)
        xw_hi = (ct.extract(xf, (1, 0), shape=(H, TP)) * w_hi[:, None]).astype(x.dtype)
        s_lo = ct.mma(
            ct.transpose(xw_lo), ct.extract(B_c, (0, 0), shape=(H, TN)), ct.zeros((TP, TN), dtype=ct.float32)
        )
        s_hi = ct.mma(
            ct.transpose(xw_hi), ct.extract(B_c, (1, 0), shape=(H, TN)), ct.zeros((TP, TN), dtype=ct.float32)
        )
        if M == 14:
            s_lo = s_lo * ct.exp(dA_last - dA_mid)  # slip 4 omits this decay across the second half
        state = s_lo + s_hi
    else:
        xw = (x_c.astype(ct.float32) * w[:, None]).astype(x.dtype)
        if M == 6 or M == 16:
            # open tier: computes the transposed state Bᵀ (x w), (TN, TP)
            stateT = ct.mma(ct.transpose(B_c), xw, ct.zeros((TN, TP), dtype=ct.float32))
            if M == 6:
                state = stateT.reshape((TP, TN))  # slip 6: reshape where a transpose is needed
            else:
                state = ct.transpose(stateT)
        else:
            state = ct.mma(ct.transpose(xw), B_c, ct.zeros((TP, TN), dtype=ct.float32))

    if M == 7:
        state = state * TN**-0.5  # slip 7: attention's 1/sqrt(d) scale

    ct.store(states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))


# ------------------------------------------------------------------------------------------------------------
# ex06: state passing
# ------------------------------------------------------------------------------------------------------------
@ct.kernel
def state_passing_kernel(
    states,
    dA_cumsum,
    initial_states,
    chunk_init_states,
    final_states,
    Q: ct.Constant[int],
    TP: ct.Constant[int],
    TN: ct.Constant[int],
    M: ct.Constant[int],
):
    bi, hi = ct.bid(0), ct.bid(1)

    if M == 3:
        state = ct.zeros((TP, TN), dtype=ct.float32)  # slip 3: initial_states never loaded
    else:
        state = ct.load(initial_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO).reshape(
            (TP, TN)
        )

    nchunks = states.shape[1]
    if M == 4 or M == 14:
        # open tier: chunk 0's entering state stored up front, then each update stored into the next chunk
        ct.store(chunk_init_states, (bi, 0, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))
        for c in range(nchunks - 1):
            decay = ct.exp(ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()))
            local = ct.load(states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
            state = decay * state + local.reshape((TP, TN))
            ct.store(chunk_init_states, (bi, c + 1, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))
        if M == 14:  # slip 4 omits the carry across the last chunk
            cl = nchunks - 1
            decay = ct.exp(ct.load(dA_cumsum, (bi, hi, cl, Q - 1), shape=()))
            local = ct.load(states, (bi, cl, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
            state = decay * state + local.reshape((TP, TN))
    elif M == 7:
        # slip 7: online-softmax rescaling, exp(a_c - a_prev) with a_prev the previous chunk's last cumsum
        prev = ct.zeros((), dtype=ct.float32)
        for c in range(nchunks):
            ct.store(chunk_init_states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))
            a = ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=())
            decay = ct.exp(a - prev)
            prev = a
            local = ct.load(states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
            state = decay * state + local.reshape((TP, TN))
    elif M == 8:
        # slip 8: FlashAttention's running normaliser l, the final state divided by it like O / l
        norm = ct.ones((), dtype=ct.float32)
        for c in range(nchunks):
            ct.store(chunk_init_states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))
            decay = ct.exp(ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()))
            local = ct.load(states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
            state = decay * state + local.reshape((TP, TN))
            norm = decay * norm + 1.0
        state = state / norm
    else:
        for c in range(nchunks):
            if M != 1:
                ct.store(chunk_init_states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))
            if M == 5:
                # slip 5: sums the chunk's cumsum tile instead of taking its last element
                a_tile = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q))
                decay = ct.exp(ct.sum(a_tile))
            elif M == 6:
                decay = ct.exp2(ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()))  # slip 6: exp2 for exp
            else:
                decay = ct.exp(ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()))
            local = ct.load(states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
            if M == 2:
                state = decay * (state + local.reshape((TP, TN)))  # slip 2: decays the chunk's own state too
            else:
                state = decay * state + local.reshape((TP, TN))
            if M == 1:
                # slip 1: stores after the update: the state LEAVING chunk c
                ct.store(chunk_init_states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))

    ct.store(final_states, (bi, hi, 0, 0), state.reshape((1, 1, TP, TN)))


# ------------------------------------------------------------------------------------------------------------
# ex07: chunk scan
# ------------------------------------------------------------------------------------------------------------
@ct.kernel
def chunk_scan_kernel(
    x,
    dt_out,
    dA_cumsum,
    C,
    B,
    chunk_init_states,
    y,
    Q: ct.Constant[int],
    TP: ct.Constant[int],
    TN: ct.Constant[int],
    HEADS_PER_GROUP: ct.Constant[int],
    M: ct.Constant[int],
):
    bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)
    g = hi // HEADS_PER_GROUP

    if M == 5 or M == 15:
        # open tier: masks instead of zero padding
        x_raw = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP)).reshape((Q, TP))
        C_raw = ct.load(C, (bi, c, g, 0), shape=(1, Q, 1, TN)).reshape((Q, TN))
        B_raw = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN)).reshape((Q, TN))
        pos = ct.arange(Q, dtype=ct.int32)
        rows = (pos < x.shape[1] - c * Q)[:, None]
        x_c = ct.where(rows, x_raw, 0.0)
        if M == 5:
            # slip 5: masks the ragged rows only; the columns past n keep undetermined padding
            C_c = ct.where(rows, C_raw, 0.0)
            B_c = ct.where(rows, B_raw, 0.0)
        else:
            cols = (ct.arange(TN, dtype=ct.int32) < C.shape[3])[None, :]
            C_c = ct.where(rows & cols, C_raw, 0.0)
            B_c = ct.where(rows & cols, B_raw, 0.0)
    else:
        x_c = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((Q, TP))
        C_c = ct.load(C, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
        B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    state = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
    state = state.reshape((TP, TN))
    dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    dA_cs = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))

    if M == 7:
        CB = ct.mma(B_c, ct.transpose(C_c), ct.zeros((Q, Q), dtype=ct.float32))  # slip 7: B rows, C columns
    else:
        CB = ct.mma(C_c, ct.transpose(B_c), ct.zeros((Q, Q), dtype=ct.float32))
    pos = ct.arange(Q, dtype=ct.int32)
    if M == 1:
        causal = pos[:, None] <= pos[None, :]  # slip 1: mask the wrong way round (k >= s)
    elif M == 6:
        causal = pos[:, None] > pos[None, :]  # slip 6: strict mask, the diagonal k = s dropped
    else:
        causal = pos[:, None] >= pos[None, :]

    if M == 4 or M == 14:
        # open tier: multiplies by a 0/1 mask instead of ct.where
        if M == 4:
            # slip 4: no clamp; inf * 0 = NaN above the diagonal
            decay = ct.exp(dA_cs[:, None] - dA_cs[None, :])
        else:
            decay = ct.exp(ct.minimum(dA_cs[:, None] - dA_cs[None, :], 0.0))
        P = CB * decay * dt_c[None, :] * causal.astype(ct.float32)
    else:
        decay = ct.exp(ct.minimum(dA_cs[:, None] - dA_cs[None, :], 0.0))
        if M == 2:
            P = ct.where(causal, CB * decay * dt_c[:, None], 0.0)  # slip 2: dt scales the rows (dt_s)
        elif M == 8:
            P = ct.where(causal, CB * decay * dt_c[None, :], -float("inf"))  # slip 8: -inf above the diagonal
        else:
            P = ct.where(causal, CB * decay * dt_c[None, :], 0.0)
    y_c = ct.mma(P.astype(x.dtype), x_c, ct.zeros((Q, TP), dtype=ct.float32))

    past = ct.mma(C_c, ct.transpose(state.astype(C.dtype)), ct.zeros((Q, TP), dtype=ct.float32))
    if M == 3:
        y_c = y_c + past * ct.exp(ct.extract(dA_cs, (Q - 1,), shape=(1,)))  # slip 3: whole-chunk decay
    else:
        y_c = y_c + past * ct.exp(dA_cs)[:, None]

    ct.store(y, (bi, c, hi, 0), y_c.astype(y.dtype).reshape((1, Q, 1, TP)))


# ------------------------------------------------------------------------------------------------------------
# ex08: state passing backward
# ------------------------------------------------------------------------------------------------------------
@ct.kernel
def state_passing_bwd_kernel(
    dS_out,
    dA_cumsum,
    chunk_init_states,
    dfinal_states,
    dstates,
    ddA_last,
    dinitial_states,
    Q: ct.Constant[int],
    TP: ct.Constant[int],
    TN: ct.Constant[int],
    M: ct.Constant[int],
):
    bi, hi = ct.bid(0), ct.bid(1)
    dS = ct.load(dfinal_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO).reshape((TP, TN))

    nchunks = dS_out.shape[1]
    if M == 5 or M == 15:
        # open tier: the loop walks the last nchunks-1 chunks; chunk 0 is peeled after it
        for i in range(nchunks - 1):
            c = nchunks - 1 - i
            ct.store(dstates, (bi, c, hi, 0, 0), dS.reshape((1, 1, 1, TP, TN)))
            g = ct.exp(ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()))
            S = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
            ct.store(ddA_last, (bi, hi, c), (g * ct.sum(dS * S.reshape((TP, TN)))).reshape((1, 1, 1)))
            own = ct.load(dS_out, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
            dS = g * dS + own.reshape((TP, TN))
        ct.store(dstates, (bi, 0, hi, 0, 0), dS.reshape((1, 1, 1, TP, TN)))
        g0 = ct.exp(ct.load(dA_cumsum, (bi, hi, 0, Q - 1), shape=()))
        S0 = ct.load(chunk_init_states, (bi, 0, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        ct.store(ddA_last, (bi, hi, 0), (g0 * ct.sum(dS * S0.reshape((TP, TN)))).reshape((1, 1, 1)))
        if M == 5:
            dS = g0 * dS  # slip 5: chunk 0's own dS_out term left out
        else:
            own0 = ct.load(dS_out, (bi, 0, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
            dS = g0 * dS + own0.reshape((TP, TN))
    else:
        for i in range(nchunks):
            if M == 1:
                c = i  # slip 1: walks the chunks forwards
            else:
                c = nchunks - 1 - i
            if M != 3:
                ct.store(dstates, (bi, c, hi, 0, 0), dS.reshape((1, 1, 1, TP, TN)))
            a = ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=())
            g = ct.exp(a)
            if M == 6:
                # slip 6: S loaded with the default padding, trusting dS's zero padding to cancel it
                S = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN))
            else:
                S = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
            own = ct.load(dS_out, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
            if M == 4:
                # slip 4: dS updated first, the ddA_last reduction then uses the updated dS
                dS = g * dS + own.reshape((TP, TN))
                ct.store(ddA_last, (bi, hi, c), (g * ct.sum(dS * S.reshape((TP, TN)))).reshape((1, 1, 1)))
            else:
                if M == 2:
                    dda = ct.sum(dS * S.reshape((TP, TN)))  # slip 2: d/dg, the factor g missing
                elif M == 8:
                    # slip 8: softmax derivative p(1-p)
                    dda = g * (1.0 - g) * ct.sum(dS * S.reshape((TP, TN)))
                else:
                    dda = g * ct.sum(dS * S.reshape((TP, TN)))
                ct.store(ddA_last, (bi, hi, c), dda.reshape((1, 1, 1)))
                if M == 7:
                    dS = ct.exp(-a) * dS + own.reshape((TP, TN))  # slip 7: undoes the decay, 1/g
                else:
                    dS = g * dS + own.reshape((TP, TN))
            if M == 3:
                # slip 3: stores after the update: the gradient of the state ENTERING chunk c
                ct.store(dstates, (bi, c, hi, 0, 0), dS.reshape((1, 1, 1, TP, TN)))

    ct.store(dinitial_states, (bi, hi, 0, 0), dS.reshape((1, 1, TP, TN)))


KERNELS = {
    "ex04": chunk_cumsum_kernel,
    "ex05": chunk_state_kernel,
    "ex06": state_passing_kernel,
    "ex07": chunk_scan_kernel,
    "ex08": state_passing_bwd_kernel,
}

SLIPS = {
    "ex04": {
        1: ("padding (default mode): loads the dt tile without padding_mode=ZERO, so the positions past "
            "the end of the sequence in the last chunk hold the undetermined padding (NaN on the CPU "
            "executor) and poison dt_out and the whole cumsum from there on"),
        2: ("exclusive scan: computes dA_cs = cumsum(dt*A) - dt*A, the exclusive cumsum, so every position"
            " misses its own term dt[k]*A (position 0 is 0)"),
        3: ("wrong output content: stores the scaled step sizes dt*A into dt_out instead of the raw step "
            "sizes dt (dA_cumsum is right)"),
        4: ("two-part scan without carry: scans the two halves of the chunk separately and concatenates "
            "them but never adds the first half's total to the second half, so positions Q/2..Q-1 restart "
            "from 0"),
        5: ("hand mask off by one: loads dt without padding and masks with where(pos <= l - c*Q, ...), "
            "which keeps the first position past the end of the sequence (its undetermined value, NaN on "
            "the CPU) in the last chunk"),
        6: ("loop bound off by one: a hand loop over source positions k in range(Q - 1) adds dA[k] to "
            "every s >= k, so the last position's own term dt[Q-1]*A is never added to dA_cs[Q-1]"),
        7: ("softmax max subtraction: subtracts max(dt*A) over the chunk from every dt*A before the cumsum"
            " (a 'stability' shift), so every cumsum value is off by (k+1)*max"),
        8: ("query/key axes swapped: builds the causal (s, k) matrix where(k <= s, dA[k], 0) but sums over"
            " axis 0 (the query rows) instead of axis 1, giving (Q-k)*dA[k] at position k instead of the "
            "prefix sum"),
    },
    "ex05": {
        1: ("group mapping: takes the head's group as g = hi % HEADS_PER_GROUP instead of hi // "
            "HEADS_PER_GROUP, so heads read another group's B"),
        2: ("decay sign: uses w = exp(dA_cs[k] - dA_cs[Q-1]) * dt (the exponent reversed), a growth "
            "instead of the decay from k to the chunk end"),
        3: "missing dt: weight w = exp(dA_cs[Q-1] - dA_cs[k]) without the dt_k factor",
        4: ("two-part without cross decay: sums two half-chunk mma's, each half decayed only to its own "
            "end; the first half's partial state is never decayed across the second half (factor "
            "exp(a[Q-1] - a[Q/2-1]) missing)"),
        5: ("hand mask on one operand: loads x and B without padding, masks x's rows past the end of the "
            "sequence but not B's, so B's undetermined padding rows (NaN on CPU) enter the mma (0*NaN = "
            "NaN) in ragged chunks"),
        6: ("reshape for transpose: computes the transposed state B^T (x w), shape (TN, TP), and reshapes "
            "it to (TP, TN) instead of transposing it, scrambling the state's elements"),
        7: ("attention 1/sqrt(d) scale: multiplies the state by TN ** -0.5 as in scaled dot-product "
            "attention"),
        8: ("split exponent overflows: computes w = exp(dA_cs[Q-1]) * exp(-dA_cs[k]) * dt (factoring the "
            "decay as FlashAttention factors exp(m)); with large decays exp(-dA_cs) overflows to inf and "
            "exp(dA_last) to 0, giving inf/NaN"),
    },
    "ex06": {
        1: ("store order: stores into chunk_init_states after the update, i.e. the state LEAVING chunk c "
            "instead of the state entering it (chunk 0 never gets initial_states)"),
        2: ("decay placement: state = exp(a_last) * (state + states[c]), decaying the chunk's own local "
            "state too"),
        3: "initial state dropped: starts the carried state from zeros instead of loading initial_states",
        4: ("peeled loop misses last carry: stores initial_states into chunk 0, loops c over range(nchunks"
            " - 1) storing each updated state into chunk c+1, then stores final_states without carrying "
            "across the last chunk (final = state entering the last chunk)"),
        5: ("wrong reduction for the chunk decay: uses exp(sum over the chunk's dA_cumsum tile) instead of"
            " exp(dA_cumsum[..., Q-1]) (sums the cumsum rather than taking its last element)"),
        6: ("wrong exponential base: uses ct.exp2(dA_cumsum[..., Q-1]) (copied from the lesson's exp2 "
            "kernel without the log2(e) factor) instead of ct.exp"),
        7: ("online-softmax rescaling: decays by exp(a_last[c] - a_last[c-1]) (difference with the "
            "previous chunk's last cumsum, like exp(m_old - m_new)), treating the per-chunk cumsum as a "
            "running global one"),
        8: ("FlashAttention normaliser: carries l = decay*l + 1 (l0 = 1) beside the state and divides the "
            "final state by l, like O / l; chunk_init_states are right, final_states are scaled down"),
    },
    "ex07": {
        1: ("mask direction: causal mask built as pos[:, None] <= pos[None, :] (k >= s), so y_s sums over "
            "the later positions instead of the earlier ones"),
        2: ("broadcast axis: scales P by dt_c[:, None] (dt of the output row s) instead of dt_c[None, :] "
            "(dt of the input column k)"),
        3: ("past-term decay: multiplies the C·state term by exp(dA_cs[Q-1]) (the whole chunk's decay) "
            "instead of exp(dA_cs[s]) per position"),
        4: ("mask by multiplication, no clamp: builds P = CB * exp(a_s - a_k) * dt * causal(0/1) without "
            "the ct.minimum clamp; above the diagonal exp overflows to inf for large decays and inf*0 = "
            "NaN"),
        5: ("hand mask, rows only: loads x, C, B without padding and masks the rows past the end of the "
            "sequence, but not C's and B's columns past n, so their undetermined padding (NaN on CPU) "
            "enters C B^T and C state^T"),
        6: ("strict causal mask: uses pos[:, None] > pos[None, :], dropping the diagonal term k = s from "
            "the chunk's own contribution"),
        7: ("query/key swapped: computes CB = B C^T (rows indexed by B's positions, columns by C's) "
            "instead of C B^T, i.e. uses C_k·B_s for P[s, k]"),
        8: ("attention -inf mask: fills P above the diagonal with -inf instead of 0 (the attention score "
            "mask) but P is never exponentiated, so -inf goes into the P @ x mma"),
    },
    "ex08": {
        1: "loop direction: walks the chunks forwards (c = i) instead of from the last to the first",
        2: ("missing chain factor: stores ddA_last = <dS, S_c> (the gradient of g) without the factor g = "
            "exp(a_last) that d g / d a_last brings"),
        3: ("store order: stores dstates[c] after updating dS, i.e. the gradient of the state entering "
            "chunk c instead of the gradient arriving from the chunks after it"),
        4: ("statement order: updates dS = g*dS + dS_out[c] first and then computes ddA_last[c] = g*<dS, "
            "S_c> with the updated dS"),
        5: ("peeled chunk incomplete: loops over chunks nchunks-1..1 and handles chunk 0 after the loop, "
            "but there sets dinitial = g0 * dS without adding dS_out[0]"),
        6: ("padding relied on: loads chunk_init_states without padding_mode=ZERO, assuming dS's zero "
            "padding cancels it in sum(dS * S); 0 * NaN = NaN on the CPU executor (garbage on a GPU) when "
            "p < TP or n < TN"),
        7: ("inverse decay: propagates dS = exp(-a_last) * dS + dS_out (divides by g, 'undoing' the "
            "forward decay) instead of multiplying by g"),
        8: ("softmax-gradient habit: ddA_last = g*(1-g)*<dS, S_c> (the p(1-p) softmax/sigmoid derivative) "
            "instead of g*<dS, S_c>"),
    },
}

SANITY = {
    "ex04": [14, 15, 16, 18],
    "ex05": [14, 15, 16],
    "ex06": [14],
    "ex07": [14, 15],
    "ex08": [15],
}

# the room: which learner made each slip (guided / open / attention)
TIERS = {
    ex: {
        1: "guided",
        2: "guided",
        3: "guided",
        4: "open",
        5: "open",
        6: "open",
        7: "attention",
        8: "attention",
    }
    for ex in KERNELS
}

"""The ninth set of planted mistakes for the cuTile exercises 4-8 (docs/instructors.md): 40 slips written from
the exercises' contracts without reading the diagnosis code, half as a learner of the guided tier would slip,
half as one of the open tier, measured on the checks before any fix, and kept here as tested mistakes
(``tests/test_exercise_diagnosis_sets.py`` says what hint each gets).

Each kernel is right for M = 0 and plants mistake M for M = 1..8; M above 10 (``SANITY``) runs a mistake's
alternative code path with the slip corrected, and must pass.
"""

from __future__ import annotations

import cuda.tile as ct

ZERO = ct.PaddingMode.ZERO


# --------------------------------------------------------------------------------------------------------
# ex04: chunk cumsum
# --------------------------------------------------------------------------------------------------------
@ct.kernel
def chunk_cumsum_kernel(dt, A, dt_out, dA_cumsum, Q: ct.Constant[int], M: ct.Constant[int]):
    bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)

    if M == 1:
        # guided: left out padding_mode (the default, UNDETERMINED, is NaN past the end on the CPU)
        dt_t = ct.load(dt, (bi, c, hi), shape=(1, Q, 1))
        dt_c = dt_t.reshape((Q,))
    elif M == 5 or M == 15:
        # open: mask the ragged end by hand with absolute positions instead of using ZERO padding
        l = dt.shape[1]
        t = c * Q + ct.arange(Q, dtype=ct.int32)
        dt_t = ct.load(dt, (bi, c, hi), shape=(1, Q, 1))
        if M == 5:
            dt_c = ct.where(t <= l, dt_t.reshape((Q,)), 0.0)  # slip: <= keeps position t == l
        else:
            dt_c = ct.where(t < l, dt_t.reshape((Q,)), 0.0)
    else:
        dt_t = ct.load(dt, (bi, c, hi), shape=(1, Q, 1), padding_mode=ZERO)
        dt_c = dt_t.reshape((Q,))

    A_h = ct.load(A, (hi,), shape=())

    if M == 2:
        dtA = dt_c * A_h
        dA_cs = ct.cumsum(dtA, axis=0) - dtA  # slip: exclusive cumsum
    elif M == 3:
        dt_c = dt_c * A_h  # slip: overwrites dt_c with dt*A, which then goes into dt_out
        dA_cs = ct.cumsum(dt_c, axis=0)
    elif M == 4:
        dA_cs = ct.cumsum(dt_t * A_h, axis=0).reshape((Q,))  # slip: cumsum along the size-1 batch axis
    elif M == 6 or M == 16:
        # open: the inclusive cumsum as a lower-triangular masked sum
        dtA = dt_c * A_h
        pos = ct.arange(Q, dtype=ct.int32)
        tri = pos[:, None] >= pos[None, :]  # [s, k]: k <= s
        contrib = ct.where(tri, dtA[None, :], 0.0)  # (Q, Q): dtA[k] where k <= s
        if M == 6:
            dA_cs = ct.sum(contrib, axis=0)  # slip: sums over s instead of k
        else:
            dA_cs = ct.sum(contrib, axis=1)
    elif M == 7:
        # open: running sum from the start of the SEQUENCE (adds every earlier chunk's total)
        prefix = ct.full((1,), 0.0, dtype=ct.float32)
        for cc in range(c):
            prev = ct.load(dt, (bi, cc, hi), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,))
            prefix = prefix + ct.sum(prev * A_h, axis=0, keepdims=True)
        dA_cs = prefix + ct.cumsum(dt_c * A_h, axis=0)
    elif M == 8:
        # open: cumulative decay as a running product of exp(dt*A), then log back
        decay = ct.cumprod(ct.exp(dt_c * A_h), axis=0)
        dA_cs = ct.log(decay)
    else:
        dA_cs = ct.cumsum(dt_c * A_h, axis=0)

    ct.store(dt_out, (bi, hi, c, 0), dt_c.reshape((1, 1, 1, Q)))
    ct.store(dA_cumsum, (bi, hi, c, 0), dA_cs.reshape((1, 1, 1, Q)))


# --------------------------------------------------------------------------------------------------------
# ex05: chunk state
# --------------------------------------------------------------------------------------------------------
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
        g = hi % B.shape[2]  # slip: heads assigned to groups round-robin
    else:
        g = hi // HEADS_PER_GROUP

    x_c = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((Q, TP))
    B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    if M == 3:
        dt_c = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))  # slip: copy-paste
    else:
        dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    dA_cs = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))

    dA_last = ct.extract(dA_cs, (Q - 1,), shape=(1,))
    if M == 2:
        w = ct.exp(dA_cs - dA_last) * dt_c  # slip: exponent reversed
    elif M == 6:
        w = ct.exp2(dA_last - dA_cs) * dt_c  # slip: exp2 without the log2(e) factor
    elif M == 8:
        dt_sp = ct.log(1.0 + ct.exp(dt_c))  # slip: softplus applied again to the already-positive dt
        w = ct.exp(dA_last - dA_cs) * dt_sp
    else:
        w = ct.exp(dA_last - dA_cs) * dt_c

    if M == 4:
        xw = x_c.astype(ct.float32) * w[:, None]  # slip: not cast back to x.dtype (type error for bf16)
    else:
        xw = (x_c.astype(ct.float32) * w[:, None]).astype(x.dtype)

    if M == 5 or M == 15:
        # open: contraction in two halves of the chunk, GEMM-main-loop style
        TK = Q // 2
        state = ct.zeros((TP, TN), dtype=ct.float32)
        for kt in range(2):
            xk = ct.extract(xw, (kt, 0), shape=(TK, TP))
            bk = ct.extract(B_c, (kt, 0), shape=(TK, TN))
            if M == 5:
                state = ct.mma(ct.transpose(xk), bk, ct.zeros((TP, TN), dtype=ct.float32))  # slip: reset
            else:
                state = ct.mma(ct.transpose(xk), bk, state)
    elif M == 7 or M == 17:
        # open: computes the product as Bᵀ (x·w), a (TN, TP) tile
        stateT = ct.mma(ct.transpose(B_c), xw, ct.zeros((TN, TP), dtype=ct.float32))
        if M == 7:
            state = stateT.reshape((TP, TN))  # slip: reshape where a transpose belongs
        else:
            state = ct.transpose(stateT)
    else:
        state = ct.mma(ct.transpose(xw), B_c, ct.zeros((TP, TN), dtype=ct.float32))

    ct.store(states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))


# --------------------------------------------------------------------------------------------------------
# ex06: state passing
# --------------------------------------------------------------------------------------------------------
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

    if M == 4:
        state = ct.zeros((TP, TN), dtype=ct.float32)  # slip: TODO 1's placeholder left in place
    else:
        state = ct.load(initial_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO).reshape(
            (TP, TN)
        )

    nch = states.shape[1]
    if M == 5 or M == 15:
        # open: entering state of chunk c built from chunk c-1 at the top of the loop; last chunk peeled
        ct.store(chunk_init_states, (bi, 0, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))
        for c in range(1, nch):
            decay = ct.exp(ct.load(dA_cumsum, (bi, hi, c - 1, Q - 1), shape=()))
            local = ct.load(states, (bi, c - 1, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
            state = decay * state + local.reshape((TP, TN))
            ct.store(chunk_init_states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))
        last = nch - 1
        local = ct.load(states, (bi, last, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        if M == 5:
            state = state + local.reshape((TP, TN))  # slip: the peeled last step has no decay
        else:
            decay = ct.exp(ct.load(dA_cumsum, (bi, hi, last, Q - 1), shape=()))
            state = decay * state + local.reshape((TP, TN))
    else:
        n_iter = nch
        if M == 6:
            n_iter = nch - 1  # slip: "no chunk after the last one", so the loop stops one early
        for c in range(n_iter):
            if M != 1:
                ct.store(chunk_init_states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))
            if M == 3:
                a = ct.load(dA_cumsum, (bi, hi, c, 0), shape=())  # slip: first element, not Q-1
            elif M == 7:
                a = ct.sum(ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)))  # slip: sum of cumsum
            else:
                a = ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=())
            decay = ct.exp(a)
            if M == 8:
                local = ct.load(
                    chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO
                )  # slip: reads chunk_init_states, not states
            else:
                local = ct.load(states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
            if M == 2:
                state = decay * (state + local.reshape((TP, TN)))  # slip: decays the chunk's own state
            else:
                state = decay * state + local.reshape((TP, TN))
            if M == 1:
                ct.store(chunk_init_states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))  # slip

    ct.store(final_states, (bi, hi, 0, 0), state.reshape((1, 1, TP, TN)))


# --------------------------------------------------------------------------------------------------------
# ex07: chunk scan
# --------------------------------------------------------------------------------------------------------
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

    x_c = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((Q, TP))
    C_c = ct.load(C, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    state = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
    state = state.reshape((TP, TN))
    dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    dA_cs = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))

    if M == 6:
        CB = ct.mma(B_c, ct.transpose(C_c), ct.zeros((Q, Q), dtype=ct.float32))  # slip: B Cᵀ
    else:
        CB = ct.mma(C_c, ct.transpose(B_c), ct.zeros((Q, Q), dtype=ct.float32))

    pos = ct.arange(Q, dtype=ct.int32)
    if M == 1:
        causal = pos[:, None] <= pos[None, :]  # slip: upper triangle
    elif M == 7:
        causal = pos[:, None] > pos[None, :]  # slip: strict, drops the diagonal
    else:
        causal = pos[:, None] >= pos[None, :]

    if M == 4:
        diff = dA_cs[None, :] - dA_cs[:, None]  # slip: a_k - a_s
    else:
        diff = dA_cs[:, None] - dA_cs[None, :]

    if M == 5 or M == 15:
        # open: mask applied by multiplying with a 0/1 tile
        if M == 5:
            decay = ct.exp(diff)  # slip: no clamp; exp overflows to inf above the diagonal, inf * 0 = NaN
        else:
            decay = ct.exp(ct.minimum(diff, 0.0))
        P = CB * decay * dt_c[None, :] * causal.astype(ct.float32)
    else:
        decay = ct.exp(ct.minimum(diff, 0.0))
        if M == 2:
            P = ct.where(causal, CB * decay * dt_c[:, None], 0.0)  # slip: dt scales rows (s), not columns
        else:
            P = ct.where(causal, CB * decay * dt_c[None, :], 0.0)

    y_c = ct.mma(P.astype(x.dtype), x_c, ct.zeros((Q, TP), dtype=ct.float32))
    stT = ct.transpose(state.astype(C.dtype))
    if M == 3:
        # slip: the first product used as the accumulator of the second, then the sum is decayed
        y_c = ct.mma(C_c, stT, y_c) * ct.exp(dA_cs)[:, None]
    else:
        past = ct.mma(C_c, stT, ct.zeros((Q, TP), dtype=ct.float32))
        y_c = y_c + past * ct.exp(dA_cs)[:, None]

    if M == 8:
        ct.store(y, (bi, c, g, 0), y_c.astype(y.dtype).reshape((1, Q, 1, TP)))  # slip: group index
    else:
        ct.store(y, (bi, c, hi, 0), y_c.astype(y.dtype).reshape((1, Q, 1, TP)))


# --------------------------------------------------------------------------------------------------------
# ex08: state passing backward
# --------------------------------------------------------------------------------------------------------
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

    if M == 7 or M == 17:
        # open: chunks nchunks-1 .. 1 in the loop, chunk 0 peeled after it
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
        if M == 7:
            dS = g0 * dS  # slip: the peeled chunk 0 forgets its own dS_out
        else:
            own0 = ct.load(dS_out, (bi, 0, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
            dS = g0 * dS + own0.reshape((TP, TN))
    else:
        for i in range(nchunks):
            if M == 4:
                c = i  # slip: walks the chunks forwards
            else:
                c = nchunks - 1 - i
            if M != 1:
                ct.store(dstates, (bi, c, hi, 0, 0), dS.reshape((1, 1, 1, TP, TN)))
            g = ct.exp(ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()))
            if M == 6:
                S = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN))  # slip: no padding
            else:
                S = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
            S = S.reshape((TP, TN))
            own = ct.load(dS_out, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
            own = own.reshape((TP, TN))
            if M == 5:
                dS = g * dS + own  # slip: carried gradient updated BEFORE ddA_last uses it
            if M == 2:
                dA = ct.sum(dS * S)  # slip: missing the factor g = exp(a_last)
            elif M == 8:
                dA = g * ct.sum(own * S)  # slip: dS_out where the carried dS belongs
            else:
                dA = g * ct.sum(dS * S)
            ct.store(ddA_last, (bi, hi, c), dA.reshape((1, 1, 1)))
            if M == 3:
                dS = g * (dS + own)  # slip: decays the chunk's own dS_out too
            elif M != 5:
                dS = g * dS + own
            if M == 1:
                ct.store(dstates, (bi, c, hi, 0, 0), dS.reshape((1, 1, 1, TP, TN)))  # slip: stored after

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
        1: ("padding (guided): the dt load omits padding_mode=ZERO, so positions past the end of the "
            "sequence hold the UNDETERMINED padding (NaN on the CPU) in dt_out and in every later "
            "dA_cumsum element"),
        2: ("exclusive cumsum (guided): dA_cumsum = cumsum(dt*A) - dt*A, i.e. the sum over s' < s instead "
            "of s' <= s"),
        3: ("variable overwritten / wrong array stored (guided): writes dt_c = dt_c * A[hi] before the "
            "cumsum, so dt_out receives dt*A instead of dt (dA_cumsum is right)"),
        4: ("cumsum on the wrong axis (guided): takes ct.cumsum(axis=0) on the (1, Q, 1) tile before "
            "reshaping, i.e. along the size-1 batch axis, so dA_cumsum = dt*A with no running sum"),
        5: ("mask off by one (open): loads dt without ZERO padding and zeroes the tail by hand with "
            "where(c*Q + s <= l, ...): position t == l keeps the NaN padding"),
        6: ("reduction over the wrong axis (open): builds the cumsum as a lower-triangular masked (Q, Q) "
            "tile W[s, k] = dt_k*A (k <= s) but sums over axis 0 (s) instead of axis 1 (k), giving (Q - "
            "k)*dt_k*A"),
        7: ("running sum over the wrong set (open): adds the totals of all earlier chunks, so dA_cumsum is"
            " the cumsum from the start of the sequence instead of from the start of the chunk"),
        8: ("numerical underflow (open): computes log(cumprod(exp(dt*A))) instead of cumsum(dt*A); exp "
            "underflows to 0 for strong decay and dA_cumsum becomes -inf"),
    },
    "ex05": {
        1: ("wrong group mapping (guided): g = hi % ngroups (heads round-robin over groups) instead of hi "
            "// HEADS_PER_GROUP (consecutive heads share a group)"),
        2: ("decay exponent reversed (guided): w = exp(dA_cs[k] - dA_cs[Q-1]) * dt instead of "
            "exp(dA_cs[Q-1] - dA_cs[k]) * dt (grows instead of decays, overflows for strong decay)"),
        3: ("wrong array read (guided, copy-paste): dt is loaded from dA_cumsum instead of dt_out, so w = "
            "exp(dA_last - dA_cs) * dA_cs"),
        4: ("dtype/type error (guided): x * w is computed in float32 but not cast back to x.dtype, so with"
            " bfloat16 inputs the mma gets float32 and bfloat16 operands (TileTypeError); float32 inputs "
            "are right"),
        5: ("accumulator reset inside the loop (open): contracts the chunk in two halves of Q/2 rows but "
            "passes a fresh ct.zeros accumulator to each mma, so the state holds only the second half's "
            "positions"),
        6: "exp vs exp2 (open): w = exp2(dA_last - dA_cs) * dt without the log2(e) factor",
        7: ("layout: reshape instead of transpose (open): computes Bᵀ(x·w) as a (TN, TP) tile and reshapes"
            " it to (TP, TN) instead of transposing it"),
        8: ("extra nonlinearity (open): applies softplus to dt_out again (log(1 + exp(dt))) before "
            "weighting, although dt_out is already the processed step size"),
    },
    "ex06": {
        1: ("store order (guided): chunk_init_states[c] is stored AFTER the carry, i.e. it holds the state"
            " leaving chunk c instead of the one entering it"),
        2: ("decay on the sum (guided): state = exp(a_last,c) * (state + states[c]), decaying the chunk's "
            "own local state as well"),
        3: ("wrong decay index (guided): loads dA_cumsum[bi, hi, c, 0] (the first step's decay) instead of"
            " element Q-1 (the decay across the whole chunk)"),
        4: ("initial state ignored (guided): TODO 1's placeholder ct.zeros was left in place, so the walk "
            "starts from zero instead of initial_states"),
        5: ("peeled last chunk wrong (open): the loop builds the entering state of chunk c from chunk c-1 "
            "and the last chunk is peeled after it for final_states, but that peeled step adds "
            "states[last] without the decay exp(a_last) of the carried state"),
        6: ("loop bound off by one (open): loops over range(nchunks - 1), so chunk_init_states of the last"
            " chunk is never written and final_states misses the last chunk's carry"),
        7: ("reduction over the wrong set (open): the chunk decay is exp(sum over the chunk of dA_cumsum) "
            "instead of exp(dA_cumsum[..., Q-1]) (sums the cumsum as if it were the per-step dt*A)"),
        8: ("wrong array read (open): the local state added is loaded from chunk_init_states[bi, c, hi] "
            "(the output just stored, i.e. the carried state itself) instead of states[bi, c, hi]"),
    },
    "ex07": {
        1: ("causal mask transposed (guided): pos[:, None] <= pos[None, :] keeps k >= s (the future) "
            "instead of k <= s"),
        2: ("broadcast on the wrong side (guided): dt scales the rows, dt_c[:, None] (dt_s), instead of "
            "the columns dt_c[None, :] (dt_k)"),
        3: ("accumulator misuse (guided): passes P@x as the accumulator of the C@stateᵀ mma and then "
            "multiplies the sum by exp(dA_cs)[:, None], so the chunk's own term is decayed too"),
        4: ("decay difference in the wrong order inside the matrix (guided): dA_cs[None, :] - dA_cs[:, "
            "None] (a_k - a_s); after ct.minimum(.., 0) every causal decay is 1"),
        5: ("unguarded exp with a multiplicative mask (open): P = CB * exp(a_s - a_k) * dt_k * "
            "causal.astype(f32) without ct.minimum; above the diagonal exp overflows to inf and inf * 0 "
            "gives NaN"),
        6: "operands swapped/transposed (open): CB = B @ Cᵀ instead of C @ Bᵀ, so P[s, k] uses B_s . C_k",
        7: ("mask off by one (open): strict causal mask pos[:, None] > pos[None, :] drops the diagonal k ="
            " s"),
        8: ("store index (open): y is stored at (bi, c, g, 0) with the group index g instead of the head "
            "index hi"),
    },
    "ex08": {
        1: ("store order (guided): dstates[c] is stored AFTER dS = g*dS + dS_out[c], i.e. the gradient of "
            "the state entering chunk c instead of the one leaving it"),
        2: "chain-rule factor left out (guided): ddA_last = <dS, S_c> without the factor g = exp(a_last)",
        3: "decay on the sum (guided): dS = g * (dS + dS_out[c]), decaying chunk c's own dS_out as well",
        4: "loop direction (guided): c = i walks the chunks first to last instead of last to first",
        5: ("update order (open): dS = g*dS + dS_out[c] is done before ddA_last, so ddA_last uses the "
            "gradient of the entering state instead of the leaving one"),
        6: ("padding (open): chunk_init_states is loaded without ZERO padding, so NaN past p or n reaches "
            "the ct.sum of ddA_last (0 * NaN = NaN)"),
        7: ("peeled first chunk wrong (open): chunks nchunks-1..1 in the loop, chunk 0 peeled after it; "
            "the peeled step computes dinitial_states = g_0 * dS and forgets dS_out[0]"),
        8: ("wrong array read (open): ddA_last = g * <dS_out[c], S_c> uses chunk c's own dS_out instead of"
            " the carried gradient dS"),
    },
}

SANITY = {
    "ex04": [15, 16],
    "ex05": [15, 17],
    "ex06": [15],
    "ex07": [15],
    "ex08": [17],
}

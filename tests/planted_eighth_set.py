"""The eighth set of planted mistakes for the cuTile exercises 4-8 (docs/instructors.md): 40 slips written
from the exercises' contracts without reading the diagnosis code, as a learner of the open tier would slip,
each kernel in that learner's own structure, measured on the checks before any fix, and kept here as tested
mistakes (``tests/test_exercise_diagnosis_sets.py`` says what each named hint must say).

Each kernel is right for M = 0 and plants mistake M for M = 1..8; M above 10 (``SANITY``) runs a mistake's
alternative code path with the slip corrected, and must pass.
"""

from __future__ import annotations

import cuda.tile as ct

ZERO = ct.PaddingMode.ZERO
F32 = ct.float32


# ------------------------------------------------------------------------------------------------------------
# ex04: chunk cumsum.  Grid (b, nchunks, h).
# ------------------------------------------------------------------------------------------------------------
@ct.kernel
def chunk_cumsum_v(dt, A, dt_out, dA_cumsum, Q: ct.Constant[int], M: ct.Constant[int]):
    bi = ct.bid(0)
    c = ct.bid(1)
    hi = ct.bid(2)

    a = ct.load(A, (hi,), shape=(1,))  # (1,): this head's rate

    if M == 1:
        # index written in element units along l (the chunk's first position) instead of tile units
        d = ct.load(dt, (bi, c * Q, hi), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,))
    elif M == 2:
        # no padding mode: relies on the load giving zeros past the end of the sequence
        d = ct.load(dt, (bi, c, hi), shape=(1, Q, 1)).reshape((Q,))
    elif M == 5 or M == 6 or M == 8 or M == 11:
        # masked-load path: load, then zero the positions past the end by hand
        raw = ct.load(dt, (bi, c, hi), shape=(1, Q, 1)).reshape((Q,))
        if M == 8:
            seqlen = dt.shape[2]
        else:
            seqlen = dt.shape[1]
        if M == 6:
            t = ct.arange(Q, dtype=ct.int32)
        else:
            t = c * Q + ct.arange(Q, dtype=ct.int32)
        if M == 5:
            valid = t <= seqlen
        else:
            valid = t < seqlen
        d = ct.where(valid, raw, 0.0)
    else:
        d = ct.load(dt, (bi, c, hi), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,))

    if M == 4:
        dA = d * (-a)  # "A is a decay rate, make it negative" (A is already negative)
    else:
        dA = d * a

    if M == 7 or M == 12:
        # triangle-matrix path: dA_cs[s] = sum over s' <= s of dA[s'], as a masked row sum
        pos = ct.arange(Q, dtype=ct.int32)
        if M == 7:
            tri = pos[:, None] <= pos[None, :]
        else:
            tri = pos[:, None] >= pos[None, :]
        dA_cs = ct.sum(ct.where(tri, dA[None, :], 0.0), axis=1)
    else:
        dA_cs = ct.cumsum(dA, axis=0)
        if M == 3:
            dA_cs = dA_cs - dA  # "sum over the positions before s"

    ct.store(dt_out, (bi, hi, c, 0), d.reshape((1, 1, 1, Q)))
    ct.store(dA_cumsum, (bi, hi, c, 0), dA_cs.reshape((1, 1, 1, Q)))


# ------------------------------------------------------------------------------------------------------------
# ex05: chunk state.  Grid (b, nchunks, h).
# ------------------------------------------------------------------------------------------------------------
@ct.kernel
def chunk_state_v(
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
    bi = ct.bid(0)
    c = ct.bid(1)
    hi = ct.bid(2)
    if M == 4:
        g = hi % B.shape[2]  # heads dealt out to the groups round-robin
    else:
        g = hi // HEADS_PER_GROUP

    a_row = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    dt_row = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    if M == 2:
        a_end = ct.sum(a_row)  # "total decay of the chunk" summed over the running sums
    else:
        a_end = ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=())  # 0-d: the running sum at the chunk end

    if M == 7 or M == 11:
        # hand loop over the chunk's real positions: rank-1 updates
        acc = ct.zeros((TP, TN), dtype=F32)
        kmax = ct.minimum(x.shape[1] - c * Q, Q)
        for k in range(kmax):
            if M == 7:
                t = k
            else:
                t = c * Q + k
            xk = ct.load(x, (bi, t, hi, 0), shape=(1, 1, 1, TP), padding_mode=ZERO).reshape((TP,))
            bk = ct.load(B, (bi, t, g, 0), shape=(1, 1, 1, TN), padding_mode=ZERO).reshape((TN,))
            ak = ct.load(dA_cumsum, (bi, hi, c, k), shape=())
            dk = ct.load(dt_out, (bi, hi, c, k), shape=())
            wk = ct.exp(a_end - ak) * dk
            acc = acc + (xk.astype(F32) * wk)[:, None] * bk.astype(F32)[None, :]
        state = acc
    elif M == 8 or M == 12:
        # two halves of the chunk, each one mma into the same accumulator
        H = Q // 2
        acc = ct.zeros((TP, TN), dtype=F32)
        valid = ct.minimum(x.shape[1] - c * Q, Q)
        nparts = (valid + H - 1) // H
        for j in range(nparts):
            if M == 8:
                blk = c + j
            else:
                blk = 2 * c + j
            xh = ct.load(x, (bi, blk, hi, 0), shape=(1, H, 1, TP), padding_mode=ZERO).reshape((H, TP))
            bh = ct.load(B, (bi, blk, g, 0), shape=(1, H, 1, TN), padding_mode=ZERO).reshape((H, TN))
            ah = ct.load(dA_cumsum, (bi, hi, c, j), shape=(1, 1, 1, H)).reshape((H,))
            dth = ct.load(dt_out, (bi, hi, c, j), shape=(1, 1, 1, H)).reshape((H,))
            wh = ct.exp(a_end - ah) * dth
            xwh = (xh.astype(F32) * wh[:, None]).astype(x.dtype)
            acc = ct.mma(ct.transpose(xwh), bh, acc)
        state = acc
    else:
        xc = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((Q, TP))
        bc = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
        if M == 1:
            w = ct.exp(a_row - a_end) * dt_row
        elif M == 3:
            w = ct.exp(a_end - a_row)
        else:
            w = ct.exp(a_end - a_row) * dt_row
        if M == 6:
            xw = xc * w[:, None]  # no cast back to the inputs' dtype
        else:
            xw = (xc.astype(F32) * w[:, None]).astype(x.dtype)
        if M == 5:
            xwT = xw.reshape((TP, Q))
        else:
            xwT = ct.transpose(xw)
        state = ct.mma(xwT, bc, ct.zeros((TP, TN), dtype=F32))

    ct.store(states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))


# ------------------------------------------------------------------------------------------------------------
# ex06: state passing.  Grid (b, h).
# ------------------------------------------------------------------------------------------------------------
@ct.kernel
def state_passing_v(
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
    bi = ct.bid(0)
    hi = ct.bid(1)
    nc = states.shape[1]

    if M == 4:
        S = ct.zeros((TP, TN), dtype=F32)
    else:
        S = ct.load(initial_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO).reshape((TP, TN))

    start = 0
    if M == 5 or M == 11:
        # peeled first chunk
        ct.store(chunk_init_states, (bi, 0, hi, 0, 0), S.reshape((1, 1, 1, TP, TN)))
        s0 = ct.load(states, (bi, 0, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO).reshape((TP, TN))
        if M == 5:
            S = S + s0
        else:
            S = ct.exp(ct.load(dA_cumsum, (bi, hi, 0, Q - 1), shape=())) * S + s0
        start = 1

    if M == 8:
        stop = nc - 1
    else:
        stop = nc
    for c in range(start, stop):
        if M == 7:
            ct.store(chunk_init_states, (bi, hi, c, 0, 0), S.reshape((1, 1, 1, TP, TN)))
        elif M != 1:
            ct.store(chunk_init_states, (bi, c, hi, 0, 0), S.reshape((1, 1, 1, TP, TN)))
        a_last = ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=())
        if M == 3:
            decay = ct.exp2(a_last)
        else:
            decay = ct.exp(a_last)
        if M == 6:
            loc = ct.load(states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        else:
            loc = ct.load(states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO).reshape(
                (TP, TN)
            )
        if M == 2:
            S = decay * (S + loc)
        else:
            S = decay * S + loc
        if M == 1:
            ct.store(chunk_init_states, (bi, c, hi, 0, 0), S.reshape((1, 1, 1, TP, TN)))

    ct.store(final_states, (bi, hi, 0, 0), S.reshape((1, 1, TP, TN)))


# ------------------------------------------------------------------------------------------------------------
# ex07: chunk scan.  Grid (b, nchunks, h).
# ------------------------------------------------------------------------------------------------------------
@ct.kernel
def chunk_scan_v(
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
    bi = ct.bid(0)
    c = ct.bid(1)
    hi = ct.bid(2)
    g = hi // HEADS_PER_GROUP

    cc = ct.load(C, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    S = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
    S = S.reshape((TP, TN))
    a = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    dtc = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    pos = ct.arange(Q, dtype=ct.int32)

    if M == 8 or M == 11:
        # hand loop over the source positions k: column k of the decay matrix times x_k
        acc = ct.zeros((Q, TP), dtype=F32)
        kmax = ct.minimum(x.shape[1] - c * Q, Q)
        ccf = cc.astype(F32)
        for k in range(kmax):
            if M == 8:
                t = k
            else:
                t = c * Q + k
            xk = ct.load(x, (bi, t, hi, 0), shape=(1, 1, 1, TP), padding_mode=ZERO).reshape((TP,)).astype(F32)
            bk = ct.load(B, (bi, t, g, 0), shape=(1, 1, 1, TN), padding_mode=ZERO).reshape((TN,)).astype(F32)
            ak = ct.load(dA_cumsum, (bi, hi, c, k), shape=())
            dk = ct.load(dt_out, (bi, hi, c, k), shape=())
            cb = ct.sum(ccf * bk[None, :], axis=1)  # (Q,): C_s . B_k
            col = ct.where(pos >= k, cb * ct.exp(ct.minimum(a - ak, 0.0)) * dk, 0.0)
            acc = acc + col[:, None] * xk[None, :]
        intra = acc
    else:
        xc = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((Q, TP))
        bc = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
        CB = ct.mma(cc, ct.transpose(bc), ct.zeros((Q, Q), dtype=F32))
        if M == 1:
            causal = pos[:, None] <= pos[None, :]
        else:
            causal = pos[:, None] >= pos[None, :]
        if M == 2:
            L = ct.exp(a[:, None] - a[None, :])
            P = CB * L * dtc[None, :] * causal.astype(F32)
        else:
            if M == 3:
                L = ct.exp(ct.minimum(a[None, :] - a[:, None], 0.0))
            else:
                L = ct.exp(ct.minimum(a[:, None] - a[None, :], 0.0))
            if M == 6:
                P = ct.where(causal, CB * L * dtc[:, None], 0.0)
            else:
                P = ct.where(causal, CB * L * dtc[None, :], 0.0)
        intra = ct.mma(P.astype(x.dtype), xc, ct.zeros((Q, TP), dtype=F32))

    if M == 5:
        St = S.reshape((TN, TP))
    else:
        St = ct.transpose(S)
    past = ct.mma(cc, St.astype(C.dtype), ct.zeros((Q, TP), dtype=F32))
    if M == 4:
        yc = intra + past
    else:
        yc = intra + past * ct.exp(a)[:, None]

    if M == 7:
        ct.store(y, (bi, c, hi, 0), yc.reshape((1, Q, 1, TP)))
    else:
        ct.store(y, (bi, c, hi, 0), yc.astype(y.dtype).reshape((1, Q, 1, TP)))


# ------------------------------------------------------------------------------------------------------------
# ex08: state passing backward.  Grid (b, h).
# ------------------------------------------------------------------------------------------------------------
@ct.kernel
def state_passing_bwd_v(
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
    bi = ct.bid(0)
    hi = ct.bid(1)
    nc = dS_out.shape[1]

    # dL/d(state leaving the current chunk)
    dS = ct.load(dfinal_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO).reshape((TP, TN))

    if M == 6 or M == 11:
        nloop = nc - 1  # chunk 0 peeled after the loop
    else:
        nloop = nc
    for i in range(nloop):
        if M == 4:
            c = i
        else:
            c = nc - 1 - i
        if M != 1:
            ct.store(dstates, (bi, c, hi, 0, 0), dS.reshape((1, 1, 1, TP, TN)))
        gc = ct.exp(ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()))
        if M == 3:
            Sc = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN)).reshape((TP, TN))
        else:
            Sc = ct.load(
                chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO
            ).reshape((TP, TN))
        own = ct.load(dS_out, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO).reshape((TP, TN))
        if M == 2:
            dd = ct.sum(dS * Sc)
        else:
            dd = gc * ct.sum(dS * Sc)
        if M == 7:
            ct.store(ddA_last, (bi, c, hi), dd.reshape((1, 1, 1)))
        elif M != 8:
            ct.store(ddA_last, (bi, hi, c), dd.reshape((1, 1, 1)))
        if M == 5:
            dS = gc * (dS + own)
        else:
            dS = gc * dS + own
        if M == 1:
            ct.store(dstates, (bi, c, hi, 0, 0), dS.reshape((1, 1, 1, TP, TN)))
        if M == 8:
            ct.store(ddA_last, (bi, hi, c), (gc * ct.sum(dS * Sc)).reshape((1, 1, 1)))

    if M == 6 or M == 11:
        # peeled chunk 0
        ct.store(dstates, (bi, 0, hi, 0, 0), dS.reshape((1, 1, 1, TP, TN)))
        g0 = ct.exp(ct.load(dA_cumsum, (bi, hi, 0, Q - 1), shape=()))
        S0 = ct.load(
            chunk_init_states, (bi, 0, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO
        ).reshape((TP, TN))
        ct.store(ddA_last, (bi, hi, 0), (g0 * ct.sum(dS * S0)).reshape((1, 1, 1)))
        if M == 6:
            dS = g0 * dS
        else:
            own0 = ct.load(dS_out, (bi, 0, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO).reshape(
                (TP, TN)
            )
            dS = g0 * dS + own0

    ct.store(dinitial_states, (bi, hi, 0, 0), dS.reshape((1, 1, TP, TN)))


KERNELS = {
    "ex04": chunk_cumsum_v,
    "ex05": chunk_state_v,
    "ex06": state_passing_v,
    "ex07": chunk_scan_v,
    "ex08": state_passing_bwd_v,
}

SLIPS = {
    "ex04": {
        1: ("tile index in element units: dt loaded at index (bi, c*Q, hi) with shape (1, Q, 1), so chunk "
            "c>0 reads the tile starting at position c*Q*Q (past the end for most chunks) instead of c*Q"),
        2: ("padding assumption: dt loaded with no padding_mode (UNDETERMINED), assuming zeros past the "
            "end of the sequence; the ragged last chunk gets NaN/garbage in dt_out and dA_cumsum"),
        3: ("off-by-one (exclusive scan): dA_cumsum = cumsum(dt*A) - dt*A, the sum over s' < s instead of "
            "s' <= s"),
        4: ("sign: multiplies dt by -A (negates A as if it were a positive rate), so dA_cumsum has the "
            "wrong sign; dt_out is right"),
        5: ("off-by-one mask (masked-load path): positions kept where c*Q + s <= l instead of < l, so "
            "position l (read past the end, NaN on the CPU) reaches both outputs"),
        6: ("missing chunk offset (masked-load path): the position tested against l is arange(Q), not c*Q "
            "+ arange(Q), so the ragged last chunk (c>0) is never masked and its past-the-end garbage is "
            "kept"),
        7: ("transposed triangle (triangle-matrix path): mask pos[:,None] <= pos[None,:] summed over axis "
            "1 gives the reverse cumsum (sum over s' >= s) instead of s' <= s"),
        8: ("wrong shape axis (masked-load path): sequence length taken as dt.shape[2] (h) instead of "
            "dt.shape[1] (l), so the mask cuts the chunk at position h"),
    },
    "ex05": {
        1: ("sign of the decay exponent: weight exp(a_k - a_{Q-1}) instead of exp(a_{Q-1} - a_k) (grows "
            "instead of decays; overflows to inf with dt*A down to -1000)"),
        2: ("decay from the wrong place: the chunk-end value a_{Q-1} computed as ct.sum(dA_cumsum row) "
            "(the sum of the running sums) instead of the row's last element"),
        3: "term left out: the weight is exp(a_{Q-1} - a_k) without the dt_k factor",
        4: "group mapping: group = hi % g (heads dealt round-robin) instead of hi // HEADS_PER_GROUP",
        5: ("reshape used as transpose: the (Q, TP) weighted x tile is .reshape((TP, Q)) instead of "
            "ct.transpose before the mma with B (Q, TN)"),
        6: ("dtype (intended type error on bf16): x (bf16) times the float32 weights promotes to float32 "
            "and is not cast back, so ct.mma gets a float32 and a bf16 operand (compile error for bf16; "
            "float32 right)"),
        7: ("missing chunk offset (hand-loop path): position t = k instead of c*Q + k when loading x_k and"
            " B_k, so every chunk uses chunk 0's x and B (with its own dt and decays)"),
        8: ("tile-unit index (two-halves path): half j of chunk c loaded at tile index c + j in units of "
            "Q/2 instead of 2c + j, so chunks c>0 read the wrong positions of x and B"),
    },
    "ex06": {
        1: ("off-by-one store order: chunk_init_states[c] stored after the update, i.e. the state LEAVING "
            "chunk c (S_{c+1}) instead of the one entering it"),
        2: ("decay on the wrong term: S_{c+1} = g_c * (S_c + states[c]), decaying the chunk's own local "
            "state too"),
        3: "exp/exp2 confusion: chunk decay computed as exp2(a_last) instead of exp(a_last)",
        4: "term left out: the walk starts from a zero state, ignoring initial_states",
        5: ("peeled first chunk forgets the decay: S_1 = S_0 + states[0] instead of g_0 * S_0 + states[0] "
            "(chunks 1.. are right)"),
        6: ("shape (intended type error): the chunk's local state is loaded as a (1,1,1,TP,TN) tile "
            "without reshape, so the carried state changes shape to 5-d inside the loop (compile error)"),
        7: ("layout: chunk_init_states stored at index (bi, hi, c, 0, 0), as if it were (b, h, nchunks, p,"
            " n) like initial_states, instead of (bi, c, hi, 0, 0)"),
        8: ("off-by-one loop bound: range(nchunks - 1), so the last chunk's entering state is never stored"
            " and final_states is the state entering the last chunk"),
    },
    "ex07": {
        1: "transposed causal mask: keeps k >= s (pos[:,None] <= pos[None,:]) instead of k <= s",
        2: ("mask applied by multiplying with a 0/1 tile and the exponent a_s - a_k not clamped: above the"
            " diagonal exp overflows to inf and inf*0 = NaN"),
        3: ("decay sign: exp(min(a_k - a_s, 0)) instead of exp(min(a_s - a_k, 0)) (decay of the pair "
            "inverted, clamped to 1 below the diagonal)"),
        4: "term left out: the entering state's contribution C_s S^T is not decayed by exp(a_s)",
        5: ("reshape used as transpose: the (TP, TN) state is .reshape((TN, TP)) instead of ct.transpose "
            "before C (Q, TN) @ S^T"),
        6: ("dt from the wrong side: the decay matrix is scaled by dt_s (rows, dtc[:, None]) instead of "
            "dt_k (columns)"),
        7: ("dtype (intended type error on bf16): the float32 result stored into y without "
            ".astype(y.dtype) (compile error for bf16 y; float32 right)"),
        8: ("missing chunk offset (hand-loop path): x_k and B_k loaded at position k instead of c*Q + k, "
            "so every chunk's intra-chunk part uses chunk 0's x and B"),
    },
    "ex08": {
        1: ("off-by-one store order: dstates[c] stored after the update, i.e. the gradient of the state "
            "entering chunk c (g_c dS_{c+1} + dS_out[c]) instead of dS_{c+1}"),
        2: "chain rule through exp forgotten: ddA_last[c] = <dS_{c+1}, S_c> without the factor g_c",
        3: ("padding: chunk_init_states loaded with no padding_mode (UNDETERMINED), so NaN past p/n "
            "reaches the ct.sum of ddA_last"),
        4: "direction: the loop walks the chunks forward (c = i) instead of from the last chunk back",
        5: ("decay on the wrong term: dS_c = g_c * (dS_{c+1} + dS_out[c]), decaying the chunk's own output"
            " gradient too"),
        6: "peeled chunk 0 leaves a term out: dinitial_states = g_0 * dS_1 without + dS_out[0]",
        7: ("layout: ddA_last stored at index (bi, c, hi), as if it were (b, nchunks, h), instead of (bi, "
            "hi, c)"),
        8: ("wrong gradient in ddA_last: computed after the update, with the gradient entering chunk c "
            "(g_c dS_{c+1} + dS_out[c]) instead of dS_{c+1}"),
    },
}

SANITY = {
    "ex04": [11, 12],
    "ex05": [11, 12],
    "ex06": [11],
    "ex07": [11],
    "ex08": [11],
}

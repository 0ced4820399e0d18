"""The twentieth set of planted mistakes for the cuTile exercises 4-8 (docs/instructors.md): 40 slips written
from the exercises' contracts without reading the diagnosis code, as the carry-over of a workshop afternoon:
learners who reuse the code and the ideas of the exercise they have just finished (a cumsum, a per-position
weight, a causal mask, a loop over the chunks, a decay placement) and adapt them imperfectly to the next one.
The slips are spread over seven classes: an operand transposed or swapped, a mask off by one, a scaling on
the wrong axis or operand, a wrong chunk or decay index, a reduction over the wrong set, a term left out, and
an extra nonlinearity.

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

    if M == 5:
        # dt_out's (b, h, nchunks) index order used for dt, which is (b, l, h)
        dt_c = ct.load(dt, (bi, hi, c), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,))
    else:
        dt_c = ct.load(dt, (bi, c, hi), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,))

    A_h = ct.load(A, (hi,), shape=())
    if M == 7:
        A_h = -ct.exp(A_h)  # treats A as the model's A_log: A = -exp(A_log)

    if M == 6:
        dA = dt_c  # the A factor left out
    else:
        dA = dt_c * A_h

    pos = ct.arange(Q, dtype=ct.int32)
    if M == 1:
        # the causal mask of the chunk scan with the orientation flipped: k >= s, a suffix sum
        tri = pos[:, None] <= pos[None, :]
        dA_cs = ct.sum(ct.where(tri, ct.broadcast_to(dA[None, :], (Q, Q)), 0.0), axis=1)
    elif M == 2:
        # strict mask k < s: the diagonal (each position's own dt*A) dropped
        tri = pos[:, None] > pos[None, :]
        dA_cs = ct.sum(ct.where(tri, ct.broadcast_to(dA[None, :], (Q, Q)), 0.0), axis=1)
    elif M == 3:
        # dA broadcast along the columns (dA[s] in row s) instead of the rows (dA[k] in column k)
        tri = pos[:, None] >= pos[None, :]
        dA_cs = ct.sum(ct.where(tri, ct.broadcast_to(dA[:, None], (Q, Q)), 0.0), axis=1)
    elif M == 4:
        # right mask and operand, but summed over the rows s (axis 0) instead of the columns k (axis 1)
        tri = pos[:, None] >= pos[None, :]
        dA_cs = ct.sum(ct.where(tri, ct.broadcast_to(dA[None, :], (Q, Q)), 0.0), axis=0)
    elif M == 11:
        # the masked-sum formulation done right
        tri = pos[:, None] >= pos[None, :]
        dA_cs = ct.sum(ct.where(tri, ct.broadcast_to(dA[None, :], (Q, Q)), 0.0), axis=1)
    elif M == 8:
        # the decay exponent from k to the chunk end (the chunk-state weight) instead of the prefix sum
        cs = ct.cumsum(dA, axis=0)
        dA_cs = ct.extract(cs, (Q - 1,), shape=(1,)) - cs
    else:
        dA_cs = ct.cumsum(dA, axis=0)

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
    g = hi // HEADS_PER_GROUP

    x_c = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((Q, TP))
    B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    dA_cs = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))

    if M == 6:
        dt_c = ct.log(1.0 + ct.exp(dt_c))  # softplus applied again to the already-positive dt

    if M == 8:
        dA_last = ct.extract(dA_cs, (0,), shape=(1,))  # chunk START (index 0) instead of its last element
    else:
        dA_last = ct.extract(dA_cs, (Q - 1,), shape=(1,))

    if M == 3:
        # ex04's scan reused: reverse cumsum of the (already cumulative) dA_cumsum as the "decay to the end"
        w = ct.exp(ct.cumsum(dA_cs, axis=0, reverse=True) - dA_cs) * dt_c
    elif M == 5:
        w = dt_c  # the decay factor left out
    else:
        w = ct.exp(dA_last - dA_cs) * dt_c

    if M == 2:
        # "only the positions before the chunk end": strict mask, the last position k = Q-1 dropped
        pos = ct.arange(Q, dtype=ct.int32)
        w = ct.where(pos < Q - 1, w, 0.0)

    acc = ct.zeros((TP, TN), dtype=ct.float32)
    if M == 7:
        # x transposed first, then the weights broadcast along its rows (the p axis) instead of along k
        xT = ct.transpose(x_c).astype(ct.float32)
        xwT = (xT * w[:, None]).astype(x.dtype)
        state = ct.mma(xwT, B_c, acc)
    elif M == 1:
        # operands swapped: Bᵀ @ (x*w) is the (TN, TP) transpose of the state, reshaped as (TP, TN)
        xw = (x_c.astype(ct.float32) * w[:, None]).astype(x.dtype)
        state = ct.mma(ct.transpose(B_c), xw, ct.zeros((TN, TP), dtype=ct.float32))
    else:
        xw = (x_c.astype(ct.float32) * w[:, None]).astype(x.dtype)
        state = ct.mma(ct.transpose(xw), B_c, acc)

    if M == 4:
        # dt_out's (b, h, nchunks) index order used for states, which is (b, nchunks, h, p, n)
        ct.store(states, (bi, hi, c, 0, 0), state.reshape((1, 1, 1, TP, TN)))
    else:
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
    init = ct.load(initial_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO).reshape((TP, TN))
    if M == 5:
        state = ct.zeros((TP, TN), dtype=ct.float32)  # initial_states never used: starts from zero
    else:
        state = init
    total = ct.zeros((), dtype=ct.float32)

    for c in range(states.shape[1]):
        if M == 8:
            # final_states written inside the loop, next to the entering-state store: the state entering
            # the LAST chunk, not the one leaving it
            ct.store(final_states, (bi, hi, 0, 0), state.reshape((1, 1, TP, TN)))
        if M == 1:
            # ex05's per-position weight exp(a[Q-1] - a[k]) at k = 0: the first position's decay is lost
            a_last = ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=())
            a_first = ct.load(dA_cumsum, (bi, hi, c, 0), shape=())
            decay = ct.exp(a_last - a_first)
        elif M == 4:
            # ex04's cumsum habit: the log-decays accumulated over the chunks so far, from the sequence start
            total = total + ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=())
            decay = ct.exp(total)
        else:
            decay = ct.exp(ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()))
        if M == 7:
            state = decay * state  # decayed by chunk c BEFORE being stored as the state entering chunk c
        ct.store(chunk_init_states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))
        local = ct.load(states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        local = local.reshape((TP, TN))
        if M == 2:
            state = state + decay * local  # the decay scales the chunk's own state, not the carried one
        elif M == 3:
            state = decay * state + (1.0 - decay) * local  # EMA-style gate (1 - decay) on the chunk's state
        elif M == 6:
            state = decay * state + local + init  # the initial state added again in every chunk
        elif M == 7:
            state = state + local
        else:
            state = decay * state + local

    if M != 8:
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

    x_c = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((Q, TP))
    C_c = ct.load(C, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    state = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
    state = state.reshape((TP, TN))
    dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    dA_cs = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))

    if M == 5:
        # "C_s . B_s" as an elementwise product summed over n: only the diagonal s == k, used for every k
        CB = ct.broadcast_to(ct.sum(C_c * B_c, axis=1)[:, None], (Q, Q))
    else:
        CB = ct.mma(C_c, ct.transpose(B_c), ct.zeros((Q, Q), dtype=ct.float32))
    if M == 7:
        CB = ct.exp(CB)  # attention habit: exp of the scores

    if M == 2:
        rows = ct.arange(Q, dtype=ct.int32, start=1)  # 1-based rows against 0-based columns
        cols = ct.arange(Q, dtype=ct.int32)
        causal = rows[:, None] >= cols[None, :]  # keeps k = s + 1 as well
    else:
        pos = ct.arange(Q, dtype=ct.int32)
        causal = pos[:, None] >= pos[None, :]

    if M == 3:
        # factorised decay exp(a_s) * exp(-a_k) with the two factors on swapped axes: exp(a_k - a_s)
        decay = ct.exp(dA_cs)[None, :] * ct.exp(-dA_cs)[:, None]
    elif M == 4:
        # ex05's weight reused: decay from k to the chunk END, exp(a[Q-1] - a[k]), instead of to s
        dA_last = ct.extract(dA_cs, (Q - 1,), shape=(1,))
        decay = ct.broadcast_to(ct.exp(dA_last - dA_cs)[None, :], (Q, Q))
    elif M == 6:
        decay = ct.ones((Q, Q), dtype=ct.float32)  # the intra-chunk decay left out
    else:
        decay = ct.exp(ct.minimum(dA_cs[:, None] - dA_cs[None, :], 0.0))
    P = ct.where(causal, CB * decay * dt_c[None, :], 0.0)

    if M == 1:
        # ex05's transpose(xw) habit: P transposed before the mma, P[k, s] used for y_s
        y_c = ct.mma(ct.transpose(P).astype(x.dtype), x_c, ct.zeros((Q, TP), dtype=ct.float32))
    else:
        y_c = ct.mma(P.astype(x.dtype), x_c, ct.zeros((Q, TP), dtype=ct.float32))

    if M == 8:
        # ex05's state formula: B read the state out instead of C
        past = ct.mma(B_c, ct.transpose(state.astype(B.dtype)), ct.zeros((Q, TP), dtype=ct.float32))
    else:
        past = ct.mma(C_c, ct.transpose(state.astype(C.dtype)), ct.zeros((Q, TP), dtype=ct.float32))
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
    if M == 6:
        dS = ct.zeros((TP, TN), dtype=ct.float32)  # dfinal_states left out: the carried gradient starts at 0
    else:
        dS = ct.load(dfinal_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO)
        dS = dS.reshape((TP, TN))
    run = ct.zeros((), dtype=ct.float32)

    nchunks = dS_out.shape[1]
    if M == 2:
        nloop = nchunks - 1  # "c runs down from nchunks - 1": one step too few, chunk 0 never processed
    else:
        nloop = nchunks
    for i in range(nloop):
        c = nchunks - 1 - i
        if M == 4:
            # the decay of the chunk the gradient comes FROM (c + 1) instead of chunk c's own decay
            g = ct.exp(ct.load(dA_cumsum, (bi, hi, c + 1, Q - 1), shape=(), padding_mode=ZERO))
        else:
            g = ct.exp(ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()))
        S = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        S = S.reshape((TP, TN))
        if M == 1:
            # ex06's store of the entering state kept: dstates[c] receives the forward state S_c
            ct.store(dstates, (bi, c, hi, 0, 0), S.reshape((1, 1, 1, TP, TN)))
        elif M == 8:
            # ex06's decay placement: the gradient decayed by g before it is stored
            ct.store(dstates, (bi, c, hi, 0, 0), (g * dS).reshape((1, 1, 1, TP, TN)))
        else:
            ct.store(dstates, (bi, c, hi, 0, 0), dS.reshape((1, 1, 1, TP, TN)))

        if M == 5:
            # the cumsum's transpose habit: ddA accumulated over the chunks processed so far
            run = run + g * ct.sum(dS * S)
            ct.store(ddA_last, (bi, hi, c), run.reshape((1, 1, 1)))
        elif M == 7:
            decayed = g * dS
            ct.store(ddA_last, (bi, hi, c), (g * ct.sum(decayed * S)).reshape((1, 1, 1)))  # g applied twice
        else:
            ct.store(ddA_last, (bi, hi, c), (g * ct.sum(dS * S)).reshape((1, 1, 1)))

        own = ct.load(dS_out, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        if M == 3:
            dS = dS + g * own.reshape((TP, TN))  # the decay on the chunk's own gradient, not the carried one
        else:
            dS = g * dS + own.reshape((TP, TN))

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
        1: ("mask orientation (operand transposed): computes the cumsum as a masked row sum with the chunk "
            "scan's causal mask flipped, pos[:, None] <= pos[None, :] (k >= s), so dA_cumsum[s] is the "
            "suffix sum of dt*A from s to the chunk end instead of the prefix sum from the chunk start"),
        2: ("mask off by one: the masked row sum uses the strict mask pos[:, None] > pos[None, :] (k < s), "
            "dropping the diagonal, so dA_cumsum[s] leaves out position s's own dt*A (exclusive cumsum)"),
        3: ("scaling on the wrong axis: in the masked row sum dt*A is broadcast as dA[:, None] (the row's "
            "own dA[s] in every column) instead of dA[None, :] (dA[k] in column k), giving (s+1)*dA[s]"),
        4: ("reduction over the wrong set: right mask k <= s and right operand dA[None, :], but summed over "
            "axis 0 (the rows s) instead of axis 1 (the columns k), giving (Q-k)*dA[k]"),
        5: ("wrong chunk index: loads dt at (bi, hi, c) (dt_out's (b, h, nchunks) order) instead of "
            "(bi, c, hi) for dt of shape (b, l, h), so the tile index along l is the head"),
        6: ("term left out: dA_cumsum = cumsum(dt) without the factor A[hi] (dt_out is right)"),
        7: ("extra nonlinearity: treats A as the model's A_log and uses -exp(A[hi]) instead of A[hi] itself"),
        8: ("wrong decay index: stores cumsum[Q-1] - cumsum[k] (the log-decay from k to the chunk end, the "
            "chunk-state weight) instead of the inclusive prefix sum cumsum[k]"),
    },
    "ex05": {
        1: ("operand transposed: state = mma(Bᵀ, x*w), a (TN, TP) tile, i.e. the transpose of the state, "
            "reshaped and stored as (TP, TN), instead of mma((x*w)ᵀ, B)"),
        2: ("mask off by one: masks the weights with pos < Q - 1 ('positions before the chunk end'), so the "
            "last position k = Q-1 of every chunk contributes nothing; every k <= Q-1 belongs"),
        3: ("reduction over the wrong set: reuses ex04's scan, w = exp(cumsum(dA_cs, reverse=True) - dA_cs)"
            " * dt, a suffix sum of the already-cumulative dA_cumsum, instead of exp(dA_cs[Q-1] - dA_cs[k])"
            " * dt"),
        4: ("wrong chunk index: stores states at (bi, hi, c, 0, 0) (dt_out's (b, h, nchunks) order) instead "
            "of (bi, c, hi, 0, 0) for states of shape (b, nchunks, h, p, n)"),
        5: "term left out: w = dt without the decay factor exp(dA_cs[Q-1] - dA_cs[k])",
        6: ("extra nonlinearity: applies softplus again to dt_out (dt = log(1 + exp(dt))), which is already "
            "the positive step size, before weighting"),
        7: ("scaling on the wrong axis: transposes x first, (TP, Q), and multiplies by w[:, None], scaling "
            "the p axis instead of the positions k: runs (wrong) where TP == Q, a broadcast shape error "
            "where TP != Q"),
        8: ("wrong decay index: dA_last = extract(dA_cs, (0,)), the chunk's FIRST position, instead of its "
            "last, (Q-1,), so w = exp(dA_cs[0] - dA_cs[k]) * dt"),
    },
    "ex06": {
        1: ("mask/range off by one: ex05's per-position weight at k = 0, decay = exp(dA[c, Q-1] - dA[c, 0]),"
            " which leaves out the first position's dt*A, instead of exp(dA[c, Q-1])"),
        2: ("scaling on the wrong operand: state = state + decay * states[c], decaying the chunk's own state"
            " instead of the carried state (decay * state + states[c])"),
        3: ("extra nonlinearity: EMA-style gate, state = decay * state + (1 - decay) * states[c], instead of"
            " adding states[c] unscaled"),
        4: ("reduction over the wrong set: accumulates the chunks' log-decays (total += dA[c, Q-1]) and "
            "decays by exp(total), the decay from the sequence start, instead of chunk c's own "
            "exp(dA[c, Q-1])"),
        5: "term left out: initial_states never used, the carried state starts at zero",
        6: ("extra term: adds initial_states in every chunk, state = decay * state + states[c] + init, "
            "instead of only starting from it"),
        7: ("wrong decay index: decays the carried state by chunk c's decay before storing it, so "
            "chunk_init_states[c] = exp(dA[c, Q-1]) * (state entering c); the decay belongs after the store"),
        8: ("wrong chunk index: stores final_states inside the loop next to the entering-state store, so it "
            "holds the state entering the last chunk instead of the state leaving it"),
    },
    "ex07": {
        1: ("operand transposed: y = mma(Pᵀ, x) (ex05's transpose(xw) habit) instead of mma(P, x), so y_s "
            "sums P[k, s] x_k: the anti-causal terms"),
        2: ("mask off by one: 1-based rows ct.arange(Q, start=1) against 0-based columns, so the causal mask "
            "rows >= cols also keeps k = s + 1"),
        3: ("scaling on the wrong axis: factorises the decay as exp(dA_cs)[None, :] * exp(-dA_cs)[:, None], "
            "i.e. exp(a_k - a_s), the two factors on swapped axes, instead of exp(a_s - a_k)"),
        4: ("wrong decay index: reuses ex05's weight, P[s, k] uses exp(dA_cs[Q-1] - dA_cs[k]) (decay from k "
            "to the chunk end) instead of exp(dA_cs[s] - dA_cs[k]) (decay from k to s)"),
        5: ("reduction over the wrong set: CB = sum(C * B, axis=1), the diagonal C_s . B_s, broadcast to "
            "every column, instead of the matrix product C Bᵀ (C_s . B_k)"),
        6: "term left out: the intra-chunk decay exp(dA_cs[s] - dA_cs[k]) left out of P",
        7: ("extra nonlinearity: exp applied to the scores, P uses exp(C Bᵀ) (attention habit) instead of "
            "C Bᵀ"),
        8: ("operand swapped: the state term is read out with B, mma(B, stateᵀ), instead of C, "
            "mma(C, stateᵀ)"),
    },
    "ex08": {
        1: ("operand swapped: keeps ex06's store of the entering state, dstates[c] = chunk_init_states[c] "
            "(the forward state S_c), instead of the carried gradient dS"),
        2: ("loop range off by one: for i in range(nchunks - 1) with c = nchunks - 1 - i, so the reversed "
            "walk stops before chunk 0: dstates[0] and ddA_last[0] are never written and dinitial_states "
            "misses chunk 0's step (range(nchunks) belongs)"),
        3: ("scaling on the wrong operand: dS = dS + g * dS_out[c] (the decay on the chunk's own gradient) "
            "instead of g * dS + dS_out[c]"),
        4: ("wrong chunk index: g = exp(dA_cumsum[c + 1, Q-1]), the decay of the chunk the gradient comes "
            "from, instead of chunk c's own decay (zero-padded past the last chunk)"),
        5: ("reduction over the wrong set: ddA_last[c] is the running sum of g * <dS, S> over all chunks "
            "processed so far (c..nchunks-1) instead of chunk c's own term"),
        6: "term left out: dfinal_states ignored, the carried gradient dS starts at zero",
        7: ("extra factor: ddA_last = g * <g * dS, S_c> (the decayed gradient reused), g applied twice, "
            "instead of g * <dS, S_c>"),
        8: ("wrong decay placement: stores dstates[c] = g * dS (ex06's decay-then-store) instead of the "
            "undecayed carried gradient dS"),
    },
}

SANITY: dict[str, list[int]] = {"ex04": [11]}

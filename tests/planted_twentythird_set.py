"""The twenty-third set of planted mistakes for the cuTile exercises 4-8 (docs/instructors.md): 40 slips
written from the exercises' contracts without reading the diagnosis code, as the attempts of a room of
learners in the second half of a workshop. They mix the seven classes (operand transposed, mask off by one,
scaling on the wrong axis, wrong chunk or decay index, a reduction over the wrong set, a term left out, an
extra nonlinearity) with mistakes about what the math means: the state entering a chunk taken for the state
leaving it, the decay of a position for the decay of a chunk, the source position k for the target s, a
per-head quantity for a per-group one, the forward quantity for its gradient, dt for dA = dt*A, a log-decay
for a decay, the carried state for the chunk's local one, the first chunk for the last. Most are written in
the guided tier's structure, a few in an own structure. Measured on the checks before any fix, and kept here
as tested mistakes (``tests/test_exercise_diagnosis_sets.py`` says what hint each gets).

Each kernel is right for M = 0 and plants mistake M for M = 1..8; M above 10 (``SANITY``) would run a
mistake's alternative code path with the slip corrected, and must pass (none is needed here).
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

    if M == 6:
        # dt read as if it were (b, h, l), the layout of the outputs
        dt_c = ct.load(dt, (bi, hi, c), shape=(1, 1, Q), padding_mode=ZERO).reshape((Q,))
    else:
        dt_c = ct.load(dt, (bi, c, hi), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,))
    if M == 2:
        dt_c = ct.log(1.0 + ct.exp(dt_c))  # "Mamba's dt goes through softplus": applied once more

    if M == 3:
        A_h = -ct.exp(ct.load(A, (hi,), shape=()))  # A taken for A_log: A = -exp(A_log)
    else:
        A_h = ct.load(A, (hi,), shape=())

    if M == 1:
        dA_cs = ct.cumsum(dt_c, axis=0)  # the cumsum of dt, A forgotten
    elif M == 4:
        # the chunk's total dt*A for every position instead of the running sum
        dA_cs = ct.sum(dt_c * A_h) + ct.zeros((Q,), dtype=ct.float32)
    elif M == 5:
        # "the log-decay at the chunk start is 0": subtracts position 0, so the sum starts at position 1
        dA_cs = ct.cumsum(dt_c * A_h, axis=0)
        dA_cs = dA_cs - ct.extract(dA_cs, (0,), shape=(1,))
    elif M == 7:
        # own structure: the running sum from the sequence start (carried over the earlier chunks)
        dA_cs = ct.cumsum(dt_c * A_h, axis=0)
        for j in range(c):
            dt_j = ct.load(dt, (bi, j, hi), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,))
            dA_cs = dA_cs + ct.sum(dt_j * A_h)
    elif M == 8:
        dA = dt_c * A_h
        dA_cs = ct.cumsum(dA * dt_c, axis=0)  # dA scaled by dt once more: dt*dt*A
    else:
        dA_cs = ct.cumsum(dt_c * A_h, axis=0)

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
    if M == 3:
        # dt and the decay read per group, like B, instead of per head
        dt_c = ct.load(dt_out, (bi, g, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
        dA_cs = ct.load(dA_cumsum, (bi, g, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    else:
        dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
        dA_cs = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))

    if M == 4:
        dA_last = ct.extract(dA_cs, (Q - 2,), shape=(1,))  # one before the chunk's last position
    else:
        dA_last = ct.extract(dA_cs, (Q - 1,), shape=(1,))

    if M == 2:
        w = ct.exp(dA_cs - dA_last) * dt_c  # exponent reversed: from the chunk end back to k
    elif M == 6:
        w = dt_c  # the decay to the chunk end left out
    elif M == 7:
        w = ct.exp((dA_last - dA_cs) * dt_c)  # dt put inside the exp, as if dA_cumsum were A
    else:
        w = ct.exp(dA_last - dA_cs) * dt_c

    if M == 5:
        xw = (x_c.astype(ct.float32) * w[None, :]).astype(x.dtype)  # weights along p, not along the positions
    else:
        xw = (x_c.astype(ct.float32) * w[:, None]).astype(x.dtype)
    acc = ct.zeros((TP, TN), dtype=ct.float32)
    if M == 1:
        state = ct.mma(ct.transpose(B_c), xw, ct.zeros((TN, TP), dtype=ct.float32))  # Bᵀ x: (n, p)
    elif M == 8:
        # own structure: (sum_k w_k x_k) (sum_k B_k)ᵀ, the product of the sums
        xs = ct.sum(xw.astype(ct.float32), axis=0)
        bs = ct.sum(B_c.astype(ct.float32), axis=0)
        state = xs[:, None] * bs[None, :]
    else:
        state = ct.mma(ct.transpose(xw), B_c, acc)

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
    if M == 2:
        state = ct.zeros((TP, TN), dtype=ct.float32)  # initial_states never read
    else:
        state = ct.load(initial_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO)
        state = state.reshape((TP, TN))

    if M == 5:
        first = 1  # "chunk 0 starts from the initial state": the loop skips it
    else:
        first = 0

    for c in range(first, states.shape[1]):
        local = ct.load(states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        local = local.reshape((TP, TN))
        if M == 6:
            # the local state read as (n, p) and transposed back
            local_np = ct.load(states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TN, TP), padding_mode=ZERO)
            local = ct.transpose(local_np.reshape((TN, TP)))
        if M == 8:
            # the chunk's local state stored as the entering one
            ct.store(chunk_init_states, (bi, c, hi, 0, 0), local.reshape((1, 1, 1, TP, TN)))
        else:
            ct.store(chunk_init_states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))
        if M == 3:
            # final_states written in the loop before the update: the state ENTERING the last chunk
            ct.store(final_states, (bi, hi, 0, 0), state.reshape((1, 1, TP, TN)))

        if M == 4:
            # the chunk's decay as the sum of its cumsum row
            row = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
            decay = ct.exp(ct.sum(row))
        elif M == 7:
            a_last = ct.exp(ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()))
            decay = ct.exp(a_last)  # exp taken twice
        else:
            decay = ct.exp(ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()))

        if M == 1:
            state = state + decay * local  # the decay on the chunk's local state instead of the carried one
        else:
            state = decay * state + local

    if M != 3:
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
    if M == 8:
        # the entering state read at the group index, like C and B
        state = ct.load(chunk_init_states, (bi, c, g, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
    else:
        state = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
    state = state.reshape((TP, TN))
    dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    dA_cs = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))

    if M == 3:
        # own structure: dt folded into C, the rows of the target s, instead of into the sources k
        Cdt = (C_c.astype(ct.float32) * dt_c[:, None]).astype(C.dtype)
        CB = ct.mma(Cdt, ct.transpose(B_c), ct.zeros((Q, Q), dtype=ct.float32))
    else:
        CB = ct.mma(C_c, ct.transpose(B_c), ct.zeros((Q, Q), dtype=ct.float32))
    if M == 7:
        CB = ct.exp(CB)  # scores through exp, the attention habit

    if M == 2:
        rows = ct.arange(Q, dtype=ct.int32) + 1  # 1-based target positions against 0-based sources
        cols = ct.arange(Q, dtype=ct.int32)
        causal = rows[:, None] >= cols[None, :]
    else:
        pos = ct.arange(Q, dtype=ct.int32)
        causal = pos[:, None] >= pos[None, :]
    decay = ct.exp(ct.minimum(dA_cs[:, None] - dA_cs[None, :], 0.0))
    if M == 3:
        dtk = ct.ones((Q,), dtype=ct.float32)
    else:
        dtk = dt_c
    if M == 6:
        P = CB * decay * dtk[None, :]  # no causal mask: every k of the chunk, the future ones too
    else:
        P = ct.where(causal, CB * decay * dtk[None, :], 0.0)
    if M == 1:
        y_c = ct.mma(ct.transpose(P).astype(x.dtype), x_c, ct.zeros((Q, TP), dtype=ct.float32))  # Pᵀ x
    else:
        y_c = ct.mma(P.astype(x.dtype), x_c, ct.zeros((Q, TP), dtype=ct.float32))

    past = ct.mma(C_c, ct.transpose(state.astype(C.dtype)), ct.zeros((Q, TP), dtype=ct.float32))
    if M == 4:
        dA_last = ct.extract(dA_cs, (Q - 1,), shape=(1,))
        y_c = y_c + past * ct.exp(dA_last - dA_cs)[:, None]  # decay from s to the chunk END
    elif M == 5:
        y_c = y_c + past  # the decay of the entering state left out
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
    dda_run = ct.zeros((), dtype=ct.float32)

    nchunks = dS_out.shape[1]
    for i in range(nchunks):
        c = nchunks - 1 - i
        a_last = ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=())
        if M == 7:
            a_last = a_last - ct.load(dA_cumsum, (bi, hi, c, 0), shape=())  # "from the first to the last"
        g = ct.exp(a_last)
        if M == 8:
            ct.store(dstates, (bi, c, hi, 0, 0), (g * dS).reshape((1, 1, 1, TP, TN)))  # decayed first
        else:
            ct.store(dstates, (bi, c, hi, 0, 0), dS.reshape((1, 1, 1, TP, TN)))
        if M == 4:
            # dinitial_states written before the update: the gradient of the state LEAVING chunk 0
            ct.store(dinitial_states, (bi, hi, 0, 0), dS.reshape((1, 1, TP, TN)))
        S = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        S = S.reshape((TP, TN))
        if M == 2:
            dda = a_last * ct.sum(dS * S)  # the log-decay a instead of the decay g = exp(a)
        elif M == 5:
            dda_run = dda_run + g * ct.sum(dS * S)  # own structure: a running total over the chunks
            dda = dda_run
        elif M == 6:
            dda = g * ct.sum(ct.mma(ct.transpose(dS), S, ct.zeros((TN, TN), dtype=ct.float32)))  # sum(dSᵀS)
        else:
            dda = g * ct.sum(dS * S)
        ct.store(ddA_last, (bi, hi, c), dda.reshape((1, 1, 1)))
        own = ct.load(dS_out, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        if M == 1:
            dS = g * dS + S  # the forward state S_c added instead of its gradient dS_out[c]
        elif M == 3:
            dS = g * dS  # dS_out[c] never added
        else:
            dS = g * dS + own.reshape((TP, TN))

    if M != 4:
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
        1: ("term left out (dt vs dA): dA_cumsum = cumsum(dt), A[hi] never multiplied in, instead of "
            "cumsum(dt*A)"),
        2: ("extra nonlinearity: passes dt through softplus, log(1 + exp(dt)), before storing it in dt_out "
            "and using it in the cumsum, instead of using dt as given"),
        3: ("extra nonlinearity (A taken for A_log): uses -exp(A[hi]) as the per-head rate instead of A[hi] "
            "itself"),
        4: ("reduction over the wrong set: stores the chunk's total sum(dt*A) at every position instead of "
            "the running (prefix) sum cumsum(dt*A)"),
        5: ("off by one: subtracts position 0's value from the cumsum, so dA_cumsum[k] = sum over 1 <= j <= "
            "k of dt*A, the first position's own term dropped everywhere"),
        6: ("operand transposed (layout): loads dt at (bi, hi, c) with shape (1, 1, Q), as if dt were "
            "(b, h, l) like the outputs, instead of (bi, c, hi) with shape (1, Q, 1) of the (b, l, h) array"),
        7: ("wrong chunk (carried vs local, own structure): adds the totals of chunks 0..c-1, so dA_cumsum "
            "runs from the sequence start instead of restarting at 0 in every chunk"),
        8: ("scaling (dt vs dA): cumsum(dA * dt) with dA = dt*A, dt applied twice, instead of cumsum(dt*A)"),
    },
    "ex05": {
        1: ("operand transposed: mma(Bᵀ, xw) gives the (TN, TP) product Bᵀx, which the store's reshape "
            "reinterprets as (TP, TN), instead of mma(xwᵀ, B) (p, n)"),
        2: ("wrong decay (k vs chunk end reversed): w = exp(dA_cs[k] - dA_cs[Q-1]) * dt, the inverse decay, "
            "instead of exp(dA_cs[Q-1] - dA_cs[k]) * dt"),
        3: ("per-head vs per-group: loads dt_out and dA_cumsum at the group index g = hi // HEADS_PER_GROUP "
            "instead of the head hi (only B is shared per group)"),
        4: ("off by one: the chunk's total log-decay taken at position Q-2 instead of Q-1, so every weight "
            "misses the last position's decay exp(dt*A)"),
        5: ("scaling on the wrong axis: x_c * w[None, :] scales the (Q, TP) tile's columns (p) by w instead "
            "of its rows (positions) with w[:, None]; a shape error when TP != Q"),
        6: "term left out: w = dt, the decay exp(dA_cs[Q-1] - dA_cs[k]) to the chunk end forgotten",
        7: ("extra nonlinearity (dt vs dA): w = exp((dA_cs[Q-1] - dA_cs[k]) * dt), dt put inside the exp, "
            "instead of exp(dA_cs[Q-1] - dA_cs[k]) * dt"),
        8: ("reduction over the wrong set (own structure): the outer product of the sums over positions, "
            "(sum_k w_k x_k)(sum_k B_k)ᵀ, instead of the sum of the outer products sum_k w_k x_k B_kᵀ"),
    },
    "ex06": {
        1: ("scaling on the wrong term (carried vs local): state = state + decay * states[c], decaying the "
            "chunk's local state instead of the carried one (decay * state + states[c])"),
        2: "term left out: starts from a zero state, initial_states never read",
        3: ("wrong chunk (entering vs leaving): stores final_states inside the loop before the update, so it "
            "holds the state ENTERING the last chunk instead of the state leaving it"),
        4: ("reduction over the wrong set: the decay is exp(sum of the chunk's dA_cumsum row) instead of "
            "exp(dA_cumsum[c, Q-1]), the last element (the cumsum is already the running total)"),
        5: ("off by one (first chunk): the loop runs from chunk 1, so chunk 0's entering state is never "
            "stored and chunk 0's local state never added"),
        6: ("operand transposed: loads the local state as a (TN, TP) tile, as if states were (.., n, p), "
            "and transposes it, instead of the (TP, TN) tile of the (b, nchunks, h, p, n) array"),
        7: ("extra nonlinearity: exp taken twice, decay = exp(exp(dA_cumsum[c, Q-1])) instead of "
            "exp(dA_cumsum[c, Q-1])"),
        8: ("carried vs local: stores the chunk's own local state states[c] into chunk_init_states instead "
            "of the carried state entering chunk c"),
    },
    "ex07": {
        1: "operand transposed (k vs s): y = Pᵀ x instead of P x, so output s sums P[k, s] x_k",
        2: ("mask off by one: 1-based row positions, (s + 1) >= k, let the source k = s + 1 (one future "
            "position) into output s; the mask should be k <= s"),
        3: ("scaling on the wrong axis (own structure): dt folded into C, i.e. dt of the target s, instead "
            "of dt_k of the source k (the columns of P)"),
        4: ("wrong decay (position vs chunk end): the past term decays by exp(dA_cs[Q-1] - dA_cs[s]) (from s "
            "to the chunk end) instead of exp(dA_cs[s]) (from the chunk start to s)"),
        5: ("term left out: the entering state's contribution C_s·state is added without its decay "
            "exp(dA_cs[s])"),
        6: ("reduction over the wrong set: no causal mask, so output s sums over every k of the chunk "
            "(future ones included) instead of k <= s"),
        7: ("extra nonlinearity: CB goes through exp (attention-score habit), P = exp(C·B)·decay·dt "
            "instead of (C·B)·decay·dt"),
        8: ("per-head vs per-group: loads the entering state at the group index g instead of the head hi "
            "(chunk_init_states is per head)"),
    },
    "ex08": {
        1: ("forward vs gradient: dS = g*dS + chunk_init_states[c] (the forward state S_c) instead of "
            "g*dS + dS_out[c]"),
        2: ("log-decay vs decay: ddA_last = a_last * <dS, S_c> with the log-decay a_last = dA_cumsum[c, Q-1]"
            " instead of g = exp(a_last)"),
        3: "term left out: dS = g * dS, the chunk's own dS_out[c] never added into the carried gradient",
        4: ("wrong chunk (entering vs leaving): dinitial_states stored in the loop before the update, so it "
            "gets dstates[0] (the gradient of the state leaving chunk 0) instead of g_0*dS + dS_out[0]"),
        5: ("reduction over the wrong set (own structure): ddA_last[c] is a running total of g*<dS, S> over "
            "chunks c..nchunks-1 instead of chunk c's own term"),
        6: ("operand transposed: <dS, S> computed as the sum of all entries of the matrix product dSᵀ S "
            "instead of the elementwise sum(dS * S) (the trace of dSᵀ S)"),
        7: ("off by one: the decay taken as exp(dA_cumsum[c, Q-1] - dA_cumsum[c, 0]), leaving out the first "
            "position's dt*A, instead of exp(dA_cumsum[c, Q-1])"),
        8: ("scaling on the wrong term: stores g*dS into dstates[c] (the decayed gradient) instead of dS, "
            "the gradient of the state leaving chunk c"),
    },
}

#: no slip needs an alternative code path
SANITY: dict[str, list[int]] = {}

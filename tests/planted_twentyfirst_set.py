"""The twenty-first set of planted mistakes for the cuTile exercises 4-8 (docs/instructors.md): 40 slips
written from the guided notebooks' skeletons without reading the diagnosis code, as the typos and near-misses
of a careful but tired guided-tier learner: the structure follows the skeleton, and one token is wrong the way
tired fingers get it wrong (a neighbouring variable name, a wrong constant, a sign, a swapped pair of
arguments, a misplaced parenthesis, a duplicated or deleted line). Measured on the checks before any fix, and
kept here as tested mistakes (``tests/test_exercise_diagnosis_sets.py`` says what hint each gets).

Each kernel is right for M = 0 and plants mistake M for M = 1..8; no mistake needs an alternative code path,
so ``SANITY`` is empty.
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

    dt_c = ct.load(dt, (bi, c, hi), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,))
    if M == 1:
        A_h = ct.load(A, (bi,), shape=())  # bi where hi
    else:
        A_h = ct.load(A, (hi,), shape=())

    if M == 2:
        dA_cs = ct.cumsum(dt_c + A_h, axis=0)  # + where *
    elif M == 4:
        dA_cs = ct.cumsum(dt_c * A_h, axis=0)
        dA_cs = ct.cumsum(dA_cs, axis=0)  # the cumsum line duplicated (applied twice)
    elif M == 5:
        dA_cs = ct.cumsum(ct.exp(dt_c * A_h), axis=0)  # exp inside the cumsum
    elif M == 6:
        dA_cs = ct.cumsum(dt_c * A_h, axis=1)  # axis=1 on a 1-D tile
    elif M == 7:
        dA_cs = ct.cumsum(dt_c * -A_h, axis=0)  # extra minus: A is already negative
    elif M == 8:
        dA_cs = ct.cumsum(dt_c, axis=0)  # "* A_h" deleted
    else:
        dA_cs = ct.cumsum(dt_c * A_h, axis=0)

    if M == 3:
        ct.store(dt_out, (bi, hi, c, 0), dA_cs.reshape((1, 1, 1, Q)))  # dA_cs where dt_c
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
    g = hi // HEADS_PER_GROUP

    if M == 8:
        x_c = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))  # TN for TP
    elif M == 1:
        x_c = ct.load(x, (bi, c, g, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((Q, TP))  # g for hi
    else:
        x_c = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((Q, TP))
    B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    if M == 6:
        dt_c = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))  # dA_cumsum for dt_out
    else:
        dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    dA_cs = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))

    if M == 2:
        dA_last = ct.extract(dA_cs, (Q - 2,), shape=(1,))  # Q - 2 where Q - 1
    else:
        dA_last = ct.extract(dA_cs, (Q - 1,), shape=(1,))

    if M == 3:
        w = ct.exp(dA_cs - dA_last) * dt_c  # operands of the difference swapped
    elif M == 4:
        w = ct.exp(dA_last) - dA_cs * dt_c  # closing parenthesis one operand early
    else:
        w = ct.exp(dA_last - dA_cs) * dt_c

    xw = (x_c.astype(ct.float32) * w[:, None]).astype(x.dtype)
    if M == 7:
        xw = (xw.astype(ct.float32) * w[:, None]).astype(x.dtype)  # the weighting line duplicated
    acc = ct.zeros((TP, TN), dtype=ct.float32)
    if M == 5:
        state = ct.mma(ct.transpose(x_c), B_c, acc)  # x_c where xw
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
    if M == 1:
        state = ct.load(initial_states, (bi, bi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO)  # bi for hi
    else:
        state = ct.load(initial_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO)
    state = state.reshape((TP, TN))

    for c in range(states.shape[1]):
        if M == 4:
            ct.store(states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))  # states for chunk_init
        else:
            ct.store(chunk_init_states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))
        if M == 2:
            decay = ct.exp(ct.load(dA_cumsum, (bi, hi, c, Q - 2), shape=()))  # Q - 2 where Q - 1
        elif M == 5:
            decay = ct.exp(ct.load(dA_cumsum, (bi, hi, 0, Q - 1), shape=()))  # 0 where c
        elif M == 7:
            decay = ct.exp(-ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()))  # exp(-v)
        else:
            decay = ct.exp(ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()))
        local = ct.load(states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        if M == 3:
            state = decay * state - local.reshape((TP, TN))  # - where +
        elif M == 8:
            state = state + decay * local.reshape((TP, TN))  # decay on the chunk's own state, not the old
        else:
            state = decay * state + local.reshape((TP, TN))
        if M == 6:
            state = decay * state + local.reshape((TP, TN))  # the update line duplicated

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

    if M == 1:
        CB = ct.mma(C_c, ct.transpose(C_c), ct.zeros((Q, Q), dtype=ct.float32))  # C where B
    else:
        CB = ct.mma(C_c, ct.transpose(B_c), ct.zeros((Q, Q), dtype=ct.float32))
    pos = ct.arange(Q, dtype=ct.int32)
    if M == 2:
        causal = pos[:, None] == pos[None, :]  # == where >=
    else:
        causal = pos[:, None] >= pos[None, :]
    if M == 3:
        decay = ct.exp(ct.minimum(dA_cs[:, None] + dA_cs[None, :], 0.0))  # + where -
    elif M == 8:
        # exp and minimum nested the wrong way round
        decay = ct.minimum(ct.exp(dA_cs[:, None] - dA_cs[None, :]), 0.0)
    else:
        decay = ct.exp(ct.minimum(dA_cs[:, None] - dA_cs[None, :], 0.0))
    if M == 4:
        P = ct.where(causal, CB * decay * dA_cs[None, :], 0.0)  # dA_cs where dt_c
    elif M == 5:
        P = ct.where(causal, 0.0, CB * decay * dt_c[None, :])  # the where branches swapped
    else:
        P = ct.where(causal, CB * decay * dt_c[None, :], 0.0)
    y_c = ct.mma(P.astype(x.dtype), x_c, ct.zeros((Q, TP), dtype=ct.float32))

    if M == 7:
        # B where C
        past = ct.mma(B_c, ct.transpose(state.astype(C.dtype)), ct.zeros((Q, TP), dtype=ct.float32))
    else:
        past = ct.mma(C_c, ct.transpose(state.astype(C.dtype)), ct.zeros((Q, TP), dtype=ct.float32))
    if M == 6:
        y_c = past * ct.exp(dA_cs)[:, None]  # "y_c +" deleted: the chunk's own term dropped
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
    for i in range(nchunks):
        c = nchunks - 1 - i
        if M != 8:  # M == 8: the dstates store line deleted
            ct.store(dstates, (bi, c, hi, 0, 0), dS.reshape((1, 1, 1, TP, TN)))
        if M == 1:
            g = ct.exp(ct.load(dA_cumsum, (bi, hi, i, Q - 1), shape=()))  # i where c
        elif M == 5:
            g = ct.exp(-ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()))  # exp(-v)
        else:
            g = ct.exp(ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()))
        S = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        if M == 2:
            ct.store(ddA_last, (bi, hi, c), (g * ct.sum(dS * dS)).reshape((1, 1, 1)))  # dS where S
        elif M == 6:
            ct.store(ddA_last, (bi, hi, c), (ct.exp(g) * ct.sum(dS * S.reshape((TP, TN)))).reshape((1, 1, 1)))
        elif M == 7:
            # (c, hi) where (hi, c)
            ct.store(ddA_last, (bi, c, hi), (g * ct.sum(dS * S.reshape((TP, TN)))).reshape((1, 1, 1)))
        else:
            ct.store(ddA_last, (bi, hi, c), (g * ct.sum(dS * S.reshape((TP, TN)))).reshape((1, 1, 1)))
        own = ct.load(dS_out, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        if M == 3:
            dS = g * dS  # "+ own" deleted
        else:
            dS = g * dS + own.reshape((TP, TN))

    if M == 4:
        # dfinal_states where dinitial_states
        ct.store(dfinal_states, (bi, hi, 0, 0), dS.reshape((1, 1, TP, TN)))
    else:
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
        1: ("wrong index (neighbouring variable): loads A at the batch index, A[bi], instead of the head's "
            "A[hi] (every head of batch entry bi gets the same A)"),
        2: ("wrong operator: ct.cumsum(dt_c + A_h) adds A to each step size instead of multiplying, so "
            "dA_cumsum = cumsum(dt + A) instead of cumsum(dt * A)"),
        3: ("neighbouring variable in a store: stores dA_cs (the cumsum) into dt_out instead of dt_c, so "
            "dt_out holds cumsum(dt*A) rather than dt (dA_cumsum itself is right)"),
        4: ("duplicated line: the cumsum line is repeated as dA_cs = ct.cumsum(dA_cs, axis=0), so "
            "dA_cumsum is the cumsum of the cumsum (a double prefix sum) instead of cumsum(dt*A)"),
        5: ("extra nonlinearity: ct.cumsum(ct.exp(dt_c * A_h)), the cumsum of the per-step decays "
            "exp(dt*A), instead of the cumsum of the log-decays dt*A"),
        6: ("axis (intended compile error): ct.cumsum(dt_c * A_h, axis=1) on the 1-D (Q,) tile, which has "
            "only axis 0"),
        7: ("sign: ct.cumsum(dt_c * -A_h), an extra minus (A is already negative), so dA_cumsum is the "
            "negated log-decay, growing instead of decaying"),
        8: ("term left out (deleted token): dA_cumsum = ct.cumsum(dt_c) with '* A_h' deleted, the cumsum of"
            " the step sizes instead of the cumsum of dt * A[hi]"),
    },
    "ex05": {
        1: ("group vs head (neighbouring variable): loads x at the group index g = hi // HEADS_PER_GROUP "
            "instead of the head hi, so every head of a group weights the first head's x"),
        2: ("wrong constant: dA_last = ct.extract(dA_cs, (Q - 2,), ...), the second-to-last cumsum entry, "
            "instead of (Q - 1,), so the decay to the chunk end misses the last step"),
        3: ("sign / swapped operands: w = exp(dA_cs[k] - dA_cs[Q-1]) * dt, the inverse of the decay from "
            "k to the chunk end, instead of exp(dA_cs[Q-1] - dA_cs[k]) * dt"),
        4: ("misplaced parenthesis: w = ct.exp(dA_last) - dA_cs * dt, closing the exp one operand early, "
            "instead of ct.exp(dA_last - dA_cs) * dt"),
        5: ("term left out (neighbouring variable): the mma takes x_c instead of the weighted xw, so the "
            "state is xᵀB with no decay and no dt weights"),
        6: ("similar arrays (copied line): loads dt from dA_cumsum instead of dt_out, so w = "
            "exp(dA_cs[Q-1] - dA_cs) * dA_cs instead of ... * dt"),
        7: ("duplicated line: the weighting line is repeated on xw, so x is multiplied by w twice "
            "(x * w²) before the mma"),
        8: ("TN where TP (intended compile error): loads x as a (1, Q, 1, TN) tile reshaped to (Q, TN), so "
            "the mma gives a (TN, TN) state that cannot be reshaped to (1, 1, 1, TP, TN) when TP != TN"),
    },
    "ex06": {
        1: ("neighbouring variable: loads initial_states at (bi, bi, 0, 0) instead of (bi, hi, 0, 0), so "
            "every head of batch entry bi starts from head bi's initial state"),
        2: ("wrong constant: the decay is exp(dA_cumsum[bi, hi, c, Q - 2]) instead of [.., Q - 1], "
            "missing the last step of the chunk"),
        3: "sign: state = decay * state - states[c] instead of + states[c]",
        4: ("neighbouring array name: stores the entering state into states (the input) instead of "
            "chunk_init_states, which is never written; the next load of states[c] then reads it back"),
        5: ("wrong chunk index (0 where c): every chunk is decayed by exp(dA_cumsum[bi, hi, 0, Q-1]), the "
            "decay across chunk 0, instead of its own exp(dA_cumsum[bi, hi, c, Q-1])"),
        6: ("duplicated line: the update state = decay * state + states[c] runs twice per chunk, "
            "decaying twice and adding the chunk's own state twice"),
        7: ("sign in the exponent: decay = exp(-dA_cumsum[c, Q-1]), a growth factor, instead of "
            "exp(dA_cumsum[c, Q-1])"),
        8: ("scaling on the wrong term: state = state + decay * states[c], decaying the chunk's own state "
            "instead of the carried one (decay * state + states[c])"),
    },
    "ex07": {
        1: ("C where B (neighbouring variable): CB = C Cᵀ instead of C Bᵀ, so P[s, k] uses C_s · C_k"),
        2: ("wrong comparison: causal = pos[:, None] == pos[None, :] keeps only the diagonal k == s "
            "instead of every k <= s"),
        3: ("sign: the decay exponent is dA_cs[s] + dA_cs[k] instead of dA_cs[s] - dA_cs[k]"),
        4: ("neighbouring variable: P scales the columns by dA_cs[None, :] instead of dt_c[None, :]"),
        5: ("swapped pair of arguments: ct.where(causal, 0.0, CB * decay * dt) keeps the strict upper "
            "triangle (k > s) and zeroes the causal part, instead of ct.where(causal, values, 0.0)"),
        6: ("term left out (deleted token): y = exp(dA_cs)[:, None] * (C stateᵀ) with 'y_c +' deleted, "
            "so the chunk's own intra-chunk term P x is dropped"),
        7: ("B where C (neighbouring variable): the past term reads the state with B_c, B stateᵀ, instead "
            "of C stateᵀ"),
        8: ("misplaced parenthesis / extra nonlinearity: decay = ct.minimum(ct.exp(dA[s] - dA[k]), 0.0) "
            "instead of ct.exp(ct.minimum(dA[s] - dA[k], 0.0)): the exp is positive, so every decay is "
            "0 and only the past term is left"),
    },
    "ex08": {
        1: ("wrong chunk index (neighbouring variable): the decay is loaded at dA_cumsum[bi, hi, i, Q-1] "
            "(the loop counter) instead of [bi, hi, c, Q-1] with c = nchunks - 1 - i, so chunk c gets the "
            "decay of chunk nchunks - 1 - c"),
        2: ("reduction over the wrong product (neighbouring variable): ddA_last = g * sum(dS * dS) "
            "instead of g * sum(dS * S_c)"),
        3: ("term left out (deleted token): dS = g * dS with '+ dS_out[c]' deleted, so no chunk's own "
            "gradient is ever added"),
        4: ("neighbouring array name: stores the final dS into dfinal_states (the input) instead of "
            "dinitial_states, which is never written"),
        5: ("sign in the exponent: g = exp(-dA_cumsum[c, Q-1]) instead of exp(dA_cumsum[c, Q-1])"),
        6: ("extra nonlinearity: ddA_last = exp(g) * <dS, S_c>, exponentiating the already exponentiated "
            "decay g, instead of g * <dS, S_c>"),
        7: ("swapped pair of indices: stores ddA_last at (bi, c, hi) instead of (bi, hi, c), the "
            "(b, nchunks, h) order for the (b, h, nchunks) array"),
        8: ("deleted line: the store of dS into dstates[c] at the top of the loop is missing, so dstates "
            "is never written (ddA_last and dinitial_states are right)"),
    },
}

#: no slip needs an alternative code path
SANITY: dict[str, list[int]] = {}

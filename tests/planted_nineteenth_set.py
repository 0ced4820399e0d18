"""The nineteenth set of planted mistakes for the cuTile exercises 4-8 (docs/instructors.md): 40 slips written
from the open tier's contracts without reading the diagnosis code, as the attempts of two learners pairing on
the open tier who structure their kernels unlike the worked answer. One writes "scalar-minded" code (loops
over single positions with ct.extract, explicit running variables, if-statements on the loop counter); the
other writes "whole-tile" code (full (Q, Q) masks and products built with ct.arange / ct.where, a chunk's
last value taken as a masked ct.sum). Each slip is one the structure invites, measured on the checks before
any fix, and kept here as a tested mistake (``tests/test_exercise_diagnosis_sets.py`` says what hint each
gets).

Each kernel is right for M = 0 and plants mistake M for M = 1..8; no slip needs an alternative code path.
"""

from __future__ import annotations

import cuda.tile as ct

ZERO = ct.PaddingMode.ZERO


# ------------------------------------------------------------------------------------------------------------
# ex04: chunk cumsum (whole-tile: the cumsum as a (Q, Q) lower-triangular mask summed along its rows)
# ------------------------------------------------------------------------------------------------------------
@ct.kernel
def chunk_cumsum_kernel(dt, A, dt_out, dA_cumsum, Q: ct.Constant[int], M: ct.Constant[int]):
    bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)

    dt_c = ct.load(dt, (bi, c, hi), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,))
    if M == 7:
        dt_c = ct.log(1.0 + ct.exp(dt_c))  # softplus applied to dt, which is already positive
    if M == 5:
        A_h = ct.load(A, (bi,), shape=())  # batch index for the head's A
    else:
        A_h = ct.load(A, (hi,), shape=())
    dA = dt_c * A_h

    pos = ct.arange(Q, dtype=ct.int32)
    if M == 8:
        row = c * Q + pos  # global positions of the rows, compared with local positions below
    else:
        row = pos
    if M == 1:
        lower = ct.where(row[:, None] > pos[None, :], 1.0, 0.0)  # strict: the diagonal dropped
    elif M == 2:
        lower = ct.transpose(ct.where(row[:, None] >= pos[None, :], 1.0, 0.0))  # upper triangle
    else:
        lower = ct.where(row[:, None] >= pos[None, :], 1.0, 0.0)  # lower[s, k] = 1 for k <= s

    if M == 3:
        dA_cs = ct.sum(lower * dA[:, None], axis=1)  # dA along the rows s instead of the columns k
    elif M == 4:
        dA_cs = ct.sum(lower * dA[None, :], axis=0)  # summed over s instead of k
    elif M == 6:
        dA_cs = ct.sum(lower * dt_c[None, :], axis=1)  # dt summed, the A factor left out
    else:
        dA_cs = ct.sum(lower * dA[None, :], axis=1)

    ct.store(dt_out, (bi, hi, c, 0), dt_c.reshape((1, 1, 1, Q)))
    ct.store(dA_cumsum, (bi, hi, c, 0), dA_cs.reshape((1, 1, 1, Q)))


# ------------------------------------------------------------------------------------------------------------
# ex05: chunk state (scalar-minded: a loop over the chunk's positions, one rank-1 mma per position)
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
    if M == 7:
        B_c = ct.load(B, (bi, c, hi, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))  # head
    else:
        B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    a = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    if M == 3:
        a_end = ct.extract(a, (0,), shape=(1,))  # the chunk's first position, not its last
    else:
        a_end = ct.extract(a, (Q - 1,), shape=(1,))

    if M == 1:
        npos = Q - 1  # one position too few
    else:
        npos = Q
    acc = ct.zeros((TP, TN), dtype=ct.float32)
    for k in range(npos):
        x_k = ct.extract(x_c, (k, 0), shape=(1, TP))  # (1, TP): position k's row
        B_k = ct.extract(B_c, (k, 0), shape=(1, TN))  # (1, TN)
        a_k = ct.extract(a, (k,), shape=(1,))
        dt_k = ct.extract(dt_c, (k,), shape=(1,))
        if M == 5:
            dt_k = ct.log(1.0 + ct.exp(dt_k))  # softplus on dt_out, which is already the processed dt
        if M == 2:
            w_k = ct.exp(a_k - a_end) * dt_k  # exponent reversed
        elif M == 4:
            w_k = ct.exp(a_end - a_k)  # dt factor forgotten
        else:
            w_k = ct.exp(a_end - a_k) * dt_k
        xw_k = (x_k.astype(ct.float32) * w_k).astype(x.dtype)  # (1, TP)
        if M == 6:
            acc = ct.mma(ct.transpose(xw_k), B_k, ct.zeros((TP, TN), dtype=ct.float32))  # acc restarted
        elif M == 8:
            acc = ct.mma(ct.transpose(B_k), xw_k, acc)  # B_k ⊗ x_k instead of x_k ⊗ B_k
        else:
            acc = ct.mma(ct.transpose(xw_k), B_k, acc)  # (TP, 1) @ (1, TN): x_k ⊗ B_k, weighted

    ct.store(states, (bi, c, hi, 0, 0), acc.reshape((1, 1, 1, TP, TN)))


# ------------------------------------------------------------------------------------------------------------
# ex06: state passing (scalar-minded: the loop produces the state entering chunk c from chunk c - 1, with an
# if on the loop counter; the chunk's decay is the whole-tile partner's masked ct.sum of the exp'd row)
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
    nchunks = states.shape[1]
    pos = ct.arange(Q, dtype=ct.int32)
    if M == 2:
        is_last = pos == Q  # one past the last position: selects nothing
    else:
        is_last = pos == Q - 1

    if M == 6:
        state = ct.zeros((TP, TN), dtype=ct.float32)  # initial_states never read
    else:
        state = ct.load(initial_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO)
        state = state.reshape((TP, TN))
    ct.store(chunk_init_states, (bi, 0, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))

    for c in range(1, nchunks + 1):
        prev = c - 1  # the chunk just left
        if M == 4:
            a_row = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))  # next chunk's
        else:
            a_row = ct.load(dA_cumsum, (bi, hi, prev, 0), shape=(1, 1, 1, Q)).reshape((Q,))
        if M == 3:
            decay = ct.sum(ct.exp(a_row))  # every position's decay summed, no mask
        elif M == 7:
            decay = ct.exp(ct.sum(ct.where(is_last, ct.exp(a_row), 0.0)))  # exp applied twice
        else:
            decay = ct.sum(ct.where(is_last, ct.exp(a_row), 0.0))  # exp(a[Q-1]) as a masked sum
        if M == 5:
            local = ct.load(states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        else:
            local = ct.load(states, (bi, prev, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        if M == 8:
            state = state + decay * local.reshape((TP, TN))  # decays the chunk's own state, not the carry
        else:
            state = decay * state + local.reshape((TP, TN))
        if M == 1:
            if c < nchunks - 1:  # off by one: the last chunk's entering state is never stored
                ct.store(chunk_init_states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))
        else:
            if c < nchunks:
                ct.store(chunk_init_states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))

    ct.store(final_states, (bi, hi, 0, 0), state.reshape((1, 1, TP, TN)))


# ------------------------------------------------------------------------------------------------------------
# ex07: chunk scan (whole-tile: the decay as exp of a -inf-masked (Q, Q) matrix, dt folded into B, the decay
# of the past folded into C, both products accumulated into one tile)
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
    if M == 7:
        # the state of the previous chunk
        S = ct.load(chunk_init_states, (bi, c - 1, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
    else:
        S = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
    S = S.reshape((TP, TN))
    dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    a = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))

    pos = ct.arange(Q, dtype=ct.int32)
    s_i = pos[:, None]  # rows: the output position s
    k_i = pos[None, :]  # columns: the input position k
    if M == 1:
        causal = s_i > k_i  # strict: k == s dropped
    else:
        causal = s_i >= k_i
    if M == 4:
        seg = ct.where(causal, a[None, :] - a[:, None], float("-inf"))  # a[k] - a[s]
    elif M == 6:
        seg = ct.where(causal, a[:, None] - a[None, :], 0.0)  # masked with 0: exp(0) = 1 above the diagonal
    else:
        seg = ct.where(causal, a[:, None] - a[None, :], float("-inf"))
    L = ct.exp(seg)  # (Q, Q): exp(a[s] - a[k]) for k <= s, 0 above the diagonal

    if M == 3:
        # dt scales C's rows (dt_s) instead of B's rows (dt_k)
        Cdt = (C_c.astype(ct.float32) * dt_c[:, None]).astype(C.dtype)
        CB = ct.mma(Cdt, ct.transpose(B_c), ct.zeros((Q, Q), dtype=ct.float32))
    else:
        Bdt = (B_c.astype(ct.float32) * dt_c[:, None]).astype(B.dtype)  # dt_k on the rows of B
        if M == 2:
            CB = ct.mma(Bdt, ct.transpose(C_c), ct.zeros((Q, Q), dtype=ct.float32))  # B Cᵀ
        else:
            CB = ct.mma(C_c, ct.transpose(Bdt), ct.zeros((Q, Q), dtype=ct.float32))  # CB[s, k] = C_s·B_k dt_k
    if M == 8:
        P = ct.exp(CB) * L  # C·Bᵀ exponentiated like attention logits
    else:
        P = CB * L

    if M == 5:
        acc = ct.zeros((Q, TP), dtype=ct.float32)  # the entering state left out
    else:
        Ca = (C_c.astype(ct.float32) * ct.exp(a)[:, None]).astype(C.dtype)  # C_s decayed by exp(a[s])
        acc = ct.mma(Ca, ct.transpose(S.astype(C.dtype)), ct.zeros((Q, TP), dtype=ct.float32))
    acc = ct.mma(P.astype(x.dtype), x_c, acc)

    ct.store(y, (bi, c, hi, 0), acc.astype(y.dtype).reshape((1, Q, 1, TP)))


# ------------------------------------------------------------------------------------------------------------
# ex08: state passing backward (scalar-minded loop with a running gradient; the chunk's last log-decay as the
# whole-tile partner's masked ct.sum)
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
    nchunks = dS_out.shape[1]
    pos = ct.arange(Q, dtype=ct.int32)
    if M == 7:
        is_last = pos == 0  # the chunk's first position
    else:
        is_last = pos == Q - 1

    # carry: dL/dS_{c+1}, the gradient of the state leaving the chunk being visited
    carry = ct.load(dfinal_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO).reshape((TP, TN))
    if M == 1:
        nsteps = nchunks - 1  # one step too few
    else:
        nsteps = nchunks
    for j in range(nsteps):
        c = nchunks - 1 - j
        a_row = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
        if M == 6:
            g = ct.exp(ct.sum(ct.where(is_last, ct.exp(a_row), 0.0)))  # exp applied twice
        else:
            g = ct.exp(ct.sum(ct.where(is_last, a_row, 0.0)))  # 0-d: exp(a[c, Q-1])
        if M == 2:
            # the state leaving chunk c
            S_c = ct.load(chunk_init_states, (bi, c + 1, hi, 0, 0), shape=(1, 1, 1, TP, TN),
                          padding_mode=ZERO)
        else:
            S_c = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        S_c = S_c.reshape((TP, TN))
        own = ct.load(dS_out, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO).reshape((TP, TN))

        ct.store(dstates, (bi, c, hi, 0, 0), carry.reshape((1, 1, 1, TP, TN)))
        if M == 3:
            carry = g * carry + own  # updated before the reduction below
        if M == 8:
            ct.store(ddA_last, (bi, c, hi), (g * ct.sum(carry * S_c)).reshape((1, 1, 1)))  # (b, nchunks, h)
        else:
            ct.store(ddA_last, (bi, hi, c), (g * ct.sum(carry * S_c)).reshape((1, 1, 1)))
        if M == 4:
            carry = g * carry  # dS_out[c] left out
        elif M == 5:
            carry = carry + g * own  # the decay on dS_out[c] instead of the carried gradient
        elif M != 3:
            carry = g * carry + own

    ct.store(dinitial_states, (bi, hi, 0, 0), carry.reshape((1, 1, TP, TN)))


KERNELS = {
    "ex04": chunk_cumsum_kernel,
    "ex05": chunk_state_kernel,
    "ex06": state_passing_kernel,
    "ex07": chunk_scan_kernel,
    "ex08": state_passing_bwd_kernel,
}

SLIPS = {
    "ex04": {
        1: ("mask off by one: the triangular mask is row > col (strict), so dA_cumsum[s] sums dt*A over "
            "k < s, leaving out position s itself (an exclusive cumsum)"),
        2: ("operand transposed: the (Q, Q) mask is transposed (upper triangle), so the row sum gives the "
            "suffix sum over k >= s instead of the prefix sum over k <= s"),
        3: ("scaling on the wrong axis: dt*A broadcast as dA[:, None] (along the rows s) instead of "
            "dA[None, :] (along the columns k), so dA_cumsum[s] = (s+1) * dt[s]*A"),
        4: ("reduction over the wrong set: the masked (Q, Q) product is summed over axis 0 (the rows s) "
            "instead of axis 1 (the columns k), giving (Q-k) * dt[k]*A"),
        5: "wrong index: A is loaded at the batch index, A[bi], instead of the head's A[hi]",
        6: ("term left out: the masked sum runs over dt instead of dt*A, so dA_cumsum is the cumsum of dt "
            "without the factor A[hi]"),
        7: ("extra nonlinearity: applies softplus, log(1 + exp(dt)), to dt, which is already positive, so "
            "dt_out and dA_cumsum use softplus(dt) (and positions past the end get log 2 instead of 0)"),
        8: ("wrong chunk index: the mask compares the rows' global positions c*Q + s with the local column "
            "positions k, so for chunks c >= 1 every row sums the whole chunk"),
    },
    "ex05": {
        1: ("mask off by one: the loop over positions runs range(Q - 1), so the chunk's last position "
            "k = Q-1 never adds its x ⊗ B term"),
        2: ("exponent reversed: w_k = exp(a[k] - a[Q-1]) * dt_k instead of exp(a[Q-1] - a[k]) * dt_k "
            "(growth instead of decay; overflows to inf for strong decay)"),
        3: ("wrong decay index: the end value is extracted at position 0 instead of Q-1, so w_k = "
            "exp(a[0] - a[k]) * dt_k"),
        4: "term left out: w_k = exp(a[Q-1] - a[k]) without the dt_k factor",
        5: ("extra nonlinearity: applies softplus, log(1 + exp(dt_k)), to dt_out's values, which are "
            "already the processed step sizes"),
        6: ("reduction over the wrong set: each position's mma starts from a fresh zero accumulator "
            "instead of acc, so the state holds only the last position's term instead of the sum over k"),
        7: ("wrong index: B is loaded at the head index hi instead of the group g = hi // HEADS_PER_GROUP "
            "(zeros, or another group's B)"),
        8: ("operand transposed: the rank-1 update is mma(B_kᵀ, x_k) = B_k ⊗ x_k, a (TN, TP) tile, instead "
            "of mma(x_kᵀ, B_k) (a compile error when TP != TN, the transposed state when TP == TN)"),
    },
    "ex06": {
        1: ("off by one: the if on the loop counter stores the entering state only for c < nchunks - 1 "
            "instead of c < nchunks, so the last chunk's chunk_init_states is never written"),
        2: ("mask off by one: the last-position mask is pos == Q instead of pos == Q-1, so the masked sum "
            "selects nothing and the decay is 0 (each entering state is only the previous chunk's local "
            "state)"),
        3: ("reduction over the wrong set: the decay is the sum of exp(dA_cumsum) over the whole chunk row "
            "instead of the masked sum that picks exp(dA_cumsum[Q-1])"),
        4: ("wrong decay index: the decay is read from chunk c (the chunk being entered) instead of prev = "
            "c - 1 (the chunk just left); for the last step that chunk is past the end"),
        5: ("wrong chunk index: the local state added is states[c] instead of states[prev] (c - 1), one "
            "chunk ahead (zero past the end)"),
        6: ("term left out: the carried state starts from zeros instead of initial_states, so "
            "initial_states never reaches any output"),
        7: ("extra nonlinearity: exp applied again to the masked sum of exp(dA_cumsum), i.e. the decay is "
            "exp(exp(a[Q-1])) instead of exp(a[Q-1])"),
        8: ("scaling on the wrong term: state = state + decay * states[prev], decaying the chunk's own "
            "local state instead of the carried state"),
    },
    "ex07": {
        1: "mask off by one: the causal mask is s > k (strict), dropping the diagonal k == s",
        2: ("operand transposed: CB = (B dt) Cᵀ instead of C (B dt)ᵀ, so P[s, k] uses B_s·C_k dt_s (the "
            "transposed Gram matrix)"),
        3: ("scaling on the wrong axis: dt scales the rows of C (dt_s, the output position) instead of the "
            "rows of B (dt_k, the input position)"),
        4: ("wrong decay index: the segment matrix is a[k] - a[s] instead of a[s] - a[k] (growth instead "
            "of decay below the diagonal; overflows for strong decay)"),
        5: ("term left out: the entering state's contribution exp(a[s]) C_s·S is left out (the "
            "accumulator starts from zeros)"),
        6: ("mask: the segment matrix is masked with 0 instead of -inf before the exp, so above the "
            "diagonal the decay is exp(0) = 1 and later positions k > s leak into y_s"),
        7: ("wrong chunk index: reads chunk_init_states[c - 1], the state entering the previous chunk, "
            "instead of chunk_init_states[c]"),
        8: ("extra nonlinearity: P = exp(C·(B dt)ᵀ) * decay, exponentiating the C·B scores like attention "
            "logits instead of using them directly"),
    },
    "ex08": {
        1: ("off by one: the backward loop runs nchunks - 1 steps, so chunk 0 is never visited (its dstates "
            "and ddA_last never written, dinitial_states one step short)"),
        2: ("wrong chunk index: ddA_last uses chunk_init_states[c + 1], the state leaving chunk c, instead "
            "of S_c = chunk_init_states[c]"),
        3: ("reduction with the wrong gradient: the carry is updated (g*dS + dS_out[c]) before ddA_last is "
            "computed, so ddA_last = g <dL/dS_c, S_c> instead of g <dL/dS_{c+1}, S_c>"),
        4: "term left out: the carry update drops dS_out[c]: dS = g * dS instead of g * dS + dS_out[c]",
        5: ("scaling on the wrong term: dS = dS + g * dS_out[c], decaying the chunk's own gradient instead "
            "of the carried one"),
        6: ("extra nonlinearity: the masked sum is taken over exp(dA_cumsum) and exp applied again, so "
            "g = exp(exp(a[Q-1])) instead of exp(a[Q-1])"),
        7: ("wrong decay index: the mask picks position 0 of the chunk (pos == 0) instead of Q-1, so "
            "g = exp(dA_cumsum[c, 0])"),
        8: ("wrong index order: ddA_last stored at (bi, c, hi), the (b, nchunks, h) order of the state "
            "arrays, instead of (bi, hi, c) for ddA_last (b, h, nchunks)"),
    },
}

#: no slip needs an alternative code path
SANITY: dict[str, list[int]] = {}

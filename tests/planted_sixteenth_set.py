"""The sixteenth set of planted mistakes for the cuTile exercises 4-8 (docs/instructors.md): 40 slips written
from the exercises' contracts without reading the diagnosis code, as the first attempts of one guided-tier
learner who already writes Triton kernels and carries Triton habits into cuTile (element offsets and
``pid * BLOCK`` arithmetic, masks built from ``ct.arange`` comparisons, ``exp2`` with a ``log2(e)`` scale,
broadcast-multiply-and-sum instead of ``mma``, transposes done with ``reshape``, swapped program-id axes, a
reversed ``range`` that stops one short), measured on the checks before any fix, and kept here as tested
mistakes (``tests/test_exercise_diagnosis_sets.py`` says what hint each gets).

Each kernel is right for M = 0 and plants mistake M for M = 1..8; M above 10 (``SANITY``) runs a mistake's
alternative code path (the Triton-style form: a gather, a ``ct.where`` mask, a masked sum, exp2, a
broadcast-sum) with the slip corrected, and must pass.
"""

from __future__ import annotations

import cuda.tile as ct

ZERO = ct.PaddingMode.ZERO
LOG2E = 1.4426950408889634  # exp(u) = exp2(u * log2(e))


# ------------------------------------------------------------------------------------------------------------
# ex04: chunk cumsum
# ------------------------------------------------------------------------------------------------------------
@ct.kernel
def chunk_cumsum_kernel(dt, A, dt_out, dA_cumsum, Q: ct.Constant[int], M: ct.Constant[int]):
    if M == 1:
        # Triton grid habit (batch, head, chunk): the program ids read in the wrong order for grid (b,
        # nchunks, h)
        bi, hi, c = ct.bid(0), ct.bid(1), ct.bid(2)
    else:
        bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)
    pos = ct.arange(Q, dtype=ct.int32)

    if M == 2 or M == 12:
        # Triton habit: no padding, a mask from the valid length instead
        dt_c = ct.load(dt, (bi, c, hi), shape=(1, Q, 1)).reshape((Q,))
        if M == 2:
            valid = pos <= dt.shape[1] - c * Q  # off by one: keeps the first position past the end
        else:
            valid = pos < dt.shape[1] - c * Q
        dt_c = ct.where(valid, dt_c, 0.0)
    elif M == 6 or M == 11:
        # Triton habit: element offsets pid * BLOCK + arange, read with a gather
        offs = c * Q + pos
        if M == 6:
            dt_c = ct.gather(dt, (bi, hi, offs))  # offsets put on the head axis: dt is (b, l, h)
        else:
            dt_c = ct.gather(dt, (bi, offs, hi))
    else:
        dt_c = ct.load(dt, (bi, c, hi), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,))

    if M == 3:
        dt_c = ct.log(1.0 + ct.exp(dt_c))  # softplus, as in mamba_ssm's Triton chunk-cumsum kernel

    if M == 8:
        A_h = -ct.exp(ct.load(A, (hi,), shape=()))  # treats A as A_log: A = -exp(A_log)
    else:
        A_h = ct.load(A, (hi,), shape=())

    if M == 4 or M == 13:
        # Triton habit: the cumsum as a masked sum over a lower-triangular (Q, Q) tile
        dA = dt_c * A_h
        tri = pos[:, None] >= pos[None, :]  # [s, k]: k <= s
        if M == 4:
            dA_cs = ct.sum(ct.where(tri, dA[None, :], 0.0), axis=0)  # sums over s (rows) instead of k
        else:
            dA_cs = ct.sum(ct.where(tri, dA[None, :], 0.0), axis=1)
    elif M == 5:
        dA_cs = ct.cumsum(dt_c, axis=0)  # the factor A left out
    elif M == 7:
        dA_cs = ct.cumsum(dt_c * A_h, axis=0) * LOG2E  # stored in log2 units, ready for exp2
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
    if M == 6:
        # the group index used for the per-head dt and dA_cumsum too
        dt_c = ct.load(dt_out, (bi, g, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
        dA_cs = ct.load(dA_cumsum, (bi, g, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    else:
        dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
        dA_cs = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))

    pos = ct.arange(Q, dtype=ct.int32)
    if M == 2:
        # Triton last-element idiom, off by one: selects nothing
        dA_last = ct.sum(ct.where(pos == Q, dA_cs, 0.0))
    elif M == 11:
        dA_last = ct.sum(ct.where(pos == Q - 1, dA_cs, 0.0))
    elif M == 4:
        dA_last = ct.max(dA_cs)  # "the cumsum is largest at the end": with A < 0 it is largest at the start
    else:
        dA_last = ct.extract(dA_cs, (Q - 1,), shape=(1,))

    if M == 1 or M == 12:
        a = dA_cs * LOG2E  # log2 units
        a_last = ct.extract(a, (Q - 1,), shape=(1,))
        if M == 1:
            w = ct.exp2((a_last - a) * LOG2E) * dt_c  # log2(e) applied a second time
        else:
            w = ct.exp2(a_last - a) * dt_c
    elif M == 7:
        w = ct.exp(ct.maximum(dA_last - dA_cs, 0.0)) * dt_c  # clamp with maximum: every decay becomes 1
    else:
        w = ct.exp(dA_last - dA_cs) * dt_c

    if M == 5:
        xw = x_c  # the weights w (decay and dt) never applied
    else:
        xw = (x_c.astype(ct.float32) * w[:, None]).astype(x.dtype)
    acc = ct.zeros((TP, TN), dtype=ct.float32)
    if M == 3:
        state = ct.mma(xw.reshape((TP, Q)), B_c, acc)  # reshape used as a transpose
    else:
        state = ct.mma(ct.transpose(xw), B_c, acc)

    if M == 8:
        # stored in the (b, h, nchunks) order of dt_out / dA_cumsum; states is (b, nchunks, h, p, n)
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
    if M == 3:
        hi, bi = ct.bid(0), ct.bid(1)  # Triton grid habit (head, batch) for grid (b, h)
    else:
        bi, hi = ct.bid(0), ct.bid(1)

    rows = ct.arange(TP, dtype=ct.int32)
    cols = ct.arange(TN, dtype=ct.int32)
    p = states.shape[3]
    n = states.shape[4]
    if M == 6:
        mask = (rows[:, None] < n) & (cols[None, :] < p)  # built on the wrong axes: p and n swapped
    else:
        mask = (rows[:, None] < p) & (cols[None, :] < n)

    if M == 4:
        state = ct.zeros((TP, TN), dtype=ct.float32)  # Triton acc = zeros habit: initial_states left out
    elif M == 6 or M == 11:
        state = ct.load(initial_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN)).reshape((TP, TN))
        state = ct.where(mask, state, 0.0)
    else:
        state = ct.load(initial_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO)
        state = state.reshape((TP, TN))

    total = ct.zeros((), dtype=ct.float32)
    nchunks = states.shape[1]
    if M == 2:
        start = 1  # starts at 1: "chunk 0 is the initial state"
    else:
        start = 0
    for c in range(start, nchunks):
        ct.store(chunk_init_states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))
        if M == 8:
            # Triton habit of writing the output inside the loop, before the update: final = entering last
            # chunk
            ct.store(final_states, (bi, hi, 0, 0), state.reshape((1, 1, TP, TN)))
        dA_last = ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=())
        if M == 1:
            decay = ct.exp2(dA_last / LOG2E)  # divides by log2(e) instead of multiplying
        elif M == 12:
            decay = ct.exp2(dA_last * LOG2E)
        elif M == 7:
            total = total + dA_last
            decay = ct.exp(total)  # decay from the sequence start, not across chunk c
        else:
            decay = ct.exp(dA_last)
        if M == 5:
            # reads the local state as (n, p) and "transposes" it with a reshape
            local = ct.load(states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TN, TP), padding_mode=ZERO)
        elif M == 6 or M == 11:
            local = ct.load(states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN)).reshape((TP, TN))
            local = ct.where(mask, local, 0.0)
        else:
            local = ct.load(states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        state = decay * state + local.reshape((TP, TN))

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

    if M == 4:
        # dt folded into C (rows s) instead of B (rows k), and then left out of P
        Cd = (C_c.astype(ct.float32) * dt_c[:, None]).astype(C.dtype)
        CB = ct.mma(Cd, ct.transpose(B_c), ct.zeros((Q, Q), dtype=ct.float32))
    elif M == 5:
        CB = ct.mma(C_c, B_c.reshape((TN, Q)), ct.zeros((Q, Q), dtype=ct.float32))  # reshape as a transpose
    else:
        CB = ct.mma(C_c, ct.transpose(B_c), ct.zeros((Q, Q), dtype=ct.float32))
    pos = ct.arange(Q, dtype=ct.int32)
    if M == 1:
        causal = pos[:, None] >= pos[None, :] - 1  # off by one: keeps the superdiagonal k = s + 1
    else:
        causal = pos[:, None] >= pos[None, :]

    if M == 2:
        # flash-attention habit: subtract the row max instead of clamping the exponent at 0
        seg = dA_cs[:, None] - dA_cs[None, :]
        decay = ct.exp(seg - ct.max(seg, axis=1, keepdims=True))
    elif M == 3 or M == 11:
        a = dA_cs * LOG2E  # log2 units for exp2
        decay = ct.exp2(ct.minimum(a[:, None] - a[None, :], 0.0))
    else:
        decay = ct.exp(ct.minimum(dA_cs[:, None] - dA_cs[None, :], 0.0))

    if M == 4:
        P = ct.where(causal, CB * decay, 0.0)
    else:
        P = ct.where(causal, CB * decay * dt_c[None, :], 0.0)

    if M == 8 or M == 12:
        # Triton small-tile habit: broadcast-multiply-and-sum instead of a dot
        prod = P[:, :, None] * x_c.astype(ct.float32)[None, :, :]  # (s, k, p)
        if M == 8:
            y_c = ct.sum(prod, axis=0)  # sums over s instead of k
        else:
            y_c = ct.sum(prod, axis=1)
    else:
        y_c = ct.mma(P.astype(x.dtype), x_c, ct.zeros((Q, TP), dtype=ct.float32))

    past = ct.mma(C_c, ct.transpose(state.astype(C.dtype)), ct.zeros((Q, TP), dtype=ct.float32))
    if M == 3:
        y_c = y_c + past * ct.exp(a)[:, None]  # natural exp of the log2-scaled cumsum
    elif M == 11:
        y_c = y_c + past * ct.exp2(a)[:, None]
    elif M == 6:
        y_c = y_c  # the past term (entering state) left out
    else:
        y_c = y_c + past * ct.exp(dA_cs)[:, None]

    if M == 7:
        # stored at the group, not the head
        ct.store(y, (bi, c, g, 0), y_c.astype(y.dtype).reshape((1, Q, 1, TP)))
    else:
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

    rows = ct.arange(TP, dtype=ct.int32)
    cols = ct.arange(TN, dtype=ct.int32)
    p = chunk_init_states.shape[3]
    n = chunk_init_states.shape[4]
    if M == 1:
        mask = (rows[:, None] <= p) & (cols[None, :] < n)  # off by one: keeps row p
    else:
        mask = (rows[:, None] < p) & (cols[None, :] < n)

    nchunks = dS_out.shape[1]
    if M == 5:
        # Python reverse range that stops one short: chunk 0 is never processed
        for c in range(nchunks - 1, 0, -1):
            ct.store(dstates, (bi, c, hi, 0, 0), dS.reshape((1, 1, 1, TP, TN)))
            g = ct.exp(ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()))
            S = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
            ct.store(ddA_last, (bi, hi, c), (g * ct.sum(dS * S.reshape((TP, TN)))).reshape((1, 1, 1)))
            own = ct.load(dS_out, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
            dS = g * dS + own.reshape((TP, TN))
    else:
        for i in range(nchunks):
            c = nchunks - 1 - i
            ct.store(dstates, (bi, c, hi, 0, 0), dS.reshape((1, 1, 1, TP, TN)))
            if M == 7:
                g = ct.exp(ct.load(dA_cumsum, (bi, hi, i, Q - 1), shape=()))  # loop counter i instead of c
            else:
                g = ct.exp(ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()))
            if M == 1 or M == 11:
                S = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN)).reshape((TP, TN))
                S = ct.where(mask, S, 0.0)
            else:
                S = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
                S = S.reshape((TP, TN))
            if M == 2:
                # sum of dS Sᵀ (all pairs of rows) instead of the elementwise inner product <dS, S>
                inner = ct.sum(ct.mma(dS, ct.transpose(S), ct.zeros((TP, TP), dtype=ct.float32)))
            else:
                inner = ct.sum(dS * S)
            if M == 3:
                dda = g * LOG2E * inner  # chain rule through exp2(a * log2(e)): an extra log2(e)
            else:
                dda = g * inner
            if M == 8:
                ct.store(ddA_last, (bi, hi, i), dda.reshape((1, 1, 1)))  # loop counter i instead of c
            else:
                ct.store(ddA_last, (bi, hi, c), dda.reshape((1, 1, 1)))
            own = ct.load(dS_out, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
            if M == 4:
                dS = g * dS  # dS_out[c] left out
            elif M == 6:
                dS = dS + g * own.reshape((TP, TN))  # g scales the chunk's own term instead of the carried dS
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
        1: ("program-id axes swapped (Triton grid (b, h, nchunks) habit): bi, hi, c = bid(0), bid(1), bid(2) "
            "for the grid (b, nchunks, h), so the chunk is read from axis 2 and the head from axis 1"),
        2: ("mask off by one: loads dt without padding and masks with pos <= l - c*Q instead of "
            "pos < l - c*Q, so the first position past the end of a ragged last chunk keeps its "
            "undetermined value in dt_out and the cumsum"),
        3: ("extra nonlinearity: applies softplus, dt = log(1 + exp(dt)), to the step sizes (as mamba_ssm's "
            "Triton kernel does to the raw dt) before storing dt_out and the cumsum"),
        4: ("reduction over the wrong axis: builds the cumsum as a masked sum over the lower-triangular "
            "(s, k) tile but sums over axis 0 (s) instead of axis 1 (k), giving (Q - k)·dA[k] instead of "
            "sum_{j<=k} dA[j]"),
        5: "term left out: dA_cumsum = cumsum(dt) without the factor A[hi]",
        6: ("element offsets on the wrong axis: gathers dt at (bi, hi, c*Q + arange(Q)), putting the "
            "sequence offsets on the head axis of the (b, l, h) array instead of (bi, c*Q + arange(Q), hi)"),
        7: ("exp2 scale: stores cumsum(dt*A) * log2(e) (log2 units, ready for exp2) instead of the "
            "natural-log cumsum the contract asks for"),
        8: ("extra nonlinearity: treats A as A_log and uses -exp(A[hi]) instead of A[hi] itself"),
    },
    "ex05": {
        1: ("exp2 scale applied twice: scales dA_cs by log2(e) and then multiplies the exponent by log2(e) "
            "again, w = exp2((a_last - a) * log2(e)) * dt with a = dA_cs * log2(e)"),
        2: ("mask off by one: takes the last element with the Triton idiom sum(where(pos == Q, dA_cs, 0)) "
            "instead of pos == Q - 1, which selects nothing, so dA_last = 0 and w = exp(-dA_cs[k]) * dt"),
        3: ("operand transposed with reshape: mma(xw.reshape((TP, Q)), B) instead of mma(transpose(xw), B)"
            " (a reshape reorders nothing, it reinterprets the (Q, TP) elements row by row)"),
        4: ("reduction over the wrong set: dA_last = max(dA_cs) (assuming the cumsum grows), but with A < 0 "
            "the cumsum decreases, so this is dA_cs[0], not the last element dA_cs[Q-1]"),
        5: "term left out: x is never weighted by w (neither decay nor dt): state = xᵀ B",
        6: ("wrong decay index: loads dt_out and dA_cumsum at the group index g = hi // HEADS_PER_GROUP "
            "instead of the head hi (they are per head)"),
        7: ("extra nonlinearity: clamps the exponent with ct.maximum(dA_last - dA_cs, 0) (the exponent is "
            "<= 0, so every decay becomes exp(0) = 1) instead of using it as is"),
        8: ("stores to the wrong index: stores the state at states[bi, hi, c] (the (b, h, nchunks) order of "
            "dt_out) instead of states[bi, c, hi] for the (b, nchunks, h, p, n) array"),
    },
    "ex06": {
        1: ("exp2 scale inverted: decay = exp2(dA_last / log2(e)) instead of exp2(dA_last * log2(e)) (= "
            "exp(dA_last))"),
        2: ("loop bound: for c in range(1, nchunks), starting at 1: chunk 0's entering state is never stored"
            " and its local state never added"),
        3: ("program-id axes swapped: hi, bi = bid(0), bid(1) for the grid (b, h) (Triton (head, batch) "
            "habit), so the batch entry is read from axis 1 and the head from axis 0"),
        4: ("term left out: the carried state starts from zeros (Triton acc = zeros habit) instead of "
            "initial_states"),
        5: ("operand transposed with reshape: loads the chunk's local state as a (TN, TP) tile and reshapes "
            "it to (TP, TN) instead of loading the (TP, TN) tile (a reshape is not a transpose)"),
        6: ("mask on the wrong axes: loads without padding and masks with rows < n, cols < p (p and n "
            "swapped) instead of rows < p, cols < n, zeroing valid rows or columns of the states when "
            "p != n"),
        7: ("wrong decay: multiplies the state by exp of the running sum of the chunk decays "
            "(the decay from the sequence start) instead of exp(dA_cumsum[c, Q-1]), the decay across "
            "chunk c"),
        8: ("store at the wrong place: stores final_states inside the loop before the update, so it holds "
            "the state entering the last chunk instead of the state after it"),
    },
    "ex07": {
        1: ("causal mask off by one: pos[:, None] >= pos[None, :] - 1 also keeps the superdiagonal k = s + 1 "
            "(a future input) instead of k <= s"),
        2: ("extra nonlinearity (flash-attention habit): decay = exp(seg - rowmax(seg)) with seg = dA_cs[s] "
            "- dA_cs[k] over all k, instead of exp(min(seg, 0)): each row is rescaled by exp(-(dA_cs[s] - "
            "dA_cs[Q-1]))"),
        3: ("exp2 scale mismatch: with a = dA_cs * log2(e), the intra-chunk decay uses exp2 correctly but the"
            " past term uses exp(a) (natural exp of log2 units) instead of exp2(a)"),
        4: ("scaling on the wrong axis: folds dt into C (rows s) instead of B / the columns k, so P[s, k] "
            "carries dt_s instead of dt_k"),
        5: ("operand transposed with reshape: CB = mma(C, B.reshape((TN, Q))) instead of mma(C, "
            "transpose(B))"),
        6: "term left out: y has no past term exp(dA_cs[s]) · C_s · state (the entering state is ignored)",
        7: ("stores to the wrong index: stores y at the group g = hi // HEADS_PER_GROUP instead of the head "
            "hi"),
        8: ("reduction over the wrong axis: computes P x as a broadcast-multiply-and-sum over (s, k, p) and "
            "sums over axis 0 (s) instead of axis 1 (k)"),
    },
    "ex08": {
        1: ("mask off by one: loads S without padding and masks rows <= p instead of rows < p, so the padded "
            "row p (undetermined) enters the sum for ddA_last"),
        2: ("reduction over the wrong set: ddA_last = g * sum(dS @ Sᵀ) (sum over all pairs of rows) instead "
            "of g * sum(dS * S), the elementwise inner product"),
        3: ("exp2 scale in the chain rule: ddA_last = g * log2(e) * <dS, S> (differentiating exp2(a * "
            "log2(e)) with an extra log2(e)) instead of g * <dS, S>"),
        4: "term left out: dS = g * dS without adding dS_out[c]",
        5: ("loop bound: for c in range(nchunks - 1, 0, -1) stops one short, so chunk 0 is never processed "
            "(its dstates, ddA_last and its step into dinitial_states are missing)"),
        6: ("scaling on the wrong term: dS = dS + g * dS_out[c] instead of g * dS + dS_out[c]"),
        7: ("wrong decay index: loads the decay at dA_cumsum[bi, hi, i, Q-1] with the loop counter i instead "
            "of the chunk c = nchunks - 1 - i"),
        8: ("stores to the wrong index: stores ddA_last at (bi, hi, i) with the loop counter i instead of the"
            " chunk c = nchunks - 1 - i"),
    },
}

#: the Triton-style alternative code paths (a gather, a ct.where mask, a masked sum, exp2, a broadcast-sum)
#: with the slip corrected
SANITY: dict[str, list[int]] = {
    "ex04": [11, 12, 13],
    "ex05": [11, 12],
    "ex06": [11, 12],
    "ex07": [11, 12],
    "ex08": [11],
}

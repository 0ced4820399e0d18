"""The fifteenth set of planted mistakes for the cuTile exercises 4-8 (docs/instructors.md): 40 slips written
from the exercises' contracts without reading the diagnosis code, as the first attempts of one guided-tier
learner who is new to tiles, measured on the checks before any fix, and kept here as tested mistakes
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
        # element offset c*Q passed where the load wants a tile index
        dt_c = ct.load(dt, (bi, c * Q, hi), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,))
    elif M == 2:
        # no padding_mode: the ragged last chunk reads undetermined values
        dt_c = ct.load(dt, (bi, c, hi), shape=(1, Q, 1)).reshape((Q,))
    elif M == 6:
        # keeps the (1, Q, 1) tile (no reshape)
        dt_c = ct.load(dt, (bi, c, hi), shape=(1, Q, 1), padding_mode=ZERO)
    else:
        dt_c = ct.load(dt, (bi, c, hi), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,))

    if M == 8:
        # A indexed by the chunk instead of the head
        A_h = ct.load(A, (c,), shape=())
    else:
        A_h = ct.load(A, (hi,), shape=())

    if M == 3:
        # overwrites dt_c with dt*A, so dt_out receives dt*A
        dt_c = dt_c * A_h
        dA_cs = ct.cumsum(dt_c, axis=0)
    elif M == 4:
        # exclusive cumsum
        dA = dt_c * A_h
        dA_cs = ct.cumsum(dA, axis=0) - dA
    elif M == 5:
        # reverse (suffix) cumsum
        dA_cs = ct.cumsum(dt_c * A_h, axis=0, reverse=True)
    elif M == 6:
        # ct.cumsum's default axis 0 is the size-1 batch axis of the (1, Q, 1) tile
        dA_cs = ct.cumsum(dt_c * A_h)
    elif M == 7:
        # stores the decay exp(cumsum) instead of the log-decay cumsum
        dA_cs = ct.exp(ct.cumsum(dt_c * A_h, axis=0))
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
    if M == 1:
        g = hi % HEADS_PER_GROUP  # interleaved instead of consecutive heads per group
    else:
        g = hi // HEADS_PER_GROUP

    x_c = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((Q, TP))
    if M == 7:
        B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN)).reshape((Q, TN))  # no ZERO padding
    else:
        B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    if M == 6:
        # states' axis order (b, nchunks, h) used for dt_out / dA_cumsum, which are (b, h, nchunks, Q)
        dt_c = ct.load(dt_out, (bi, c, hi, 0), shape=(1, 1, 1, Q)).reshape((Q,))
        dA_cs = ct.load(dA_cumsum, (bi, c, hi, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    else:
        dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
        dA_cs = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))

    if M == 3:
        dA_last = ct.sum(dA_cs)  # sums the cumsum instead of taking its last element
    else:
        dA_last = ct.extract(dA_cs, (Q - 1,), shape=(1,))

    if M == 2:
        w = ct.exp(dA_cs) * dt_c  # decay from the chunk start to k
    elif M == 4:
        w = ct.exp(dA_last - dA_cs)  # dt factor forgotten
    elif M == 8:
        w = ct.exp(dA_last) * dt_c  # decay across the whole chunk for every position
    else:
        w = ct.exp(dA_last - dA_cs) * dt_c

    if M == 5:
        xw = x_c.astype(ct.float32) * w[:, None]  # no cast back to x.dtype: mma operands f32 vs x.dtype
    else:
        xw = (x_c.astype(ct.float32) * w[:, None]).astype(x.dtype)
    acc = ct.zeros((TP, TN), dtype=ct.float32)
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
    state = ct.load(initial_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO).reshape((TP, TN))

    if M == 7:
        nloop = states.shape[1] - 1  # one chunk too few
    else:
        nloop = states.shape[1]

    for c in range(nloop):
        if M != 1:
            ct.store(chunk_init_states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))
        if M == 3:
            decay = ct.exp(ct.load(dA_cumsum, (bi, hi, c, 0), shape=()))  # first position, not the last
        elif M == 4:
            decay = ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=())  # log-decay used without exp
        elif M == 6:
            decay = ct.exp2(ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()))  # exp2 instead of exp
        else:
            decay = ct.exp(ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()))
        if M == 5:
            # dA_cumsum's axis order (b, h, nchunks) used for states (b, nchunks, h)
            local = ct.load(states, (bi, hi, c, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        elif M == 8:
            # reads chunk_init_states (the output just stored) instead of states
            local = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        else:
            local = ct.load(states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        if M == 2:
            state = decay * (state + local.reshape((TP, TN)))  # decays the chunk's own state too
        else:
            state = decay * state + local.reshape((TP, TN))
        if M == 1:
            # stores after the update: the state LEAVING chunk c
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

    if M == 8:
        # group for x
        x_c = ct.load(x, (bi, c, g, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((Q, TP))
    else:
        x_c = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((Q, TP))
    C_c = ct.load(C, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    state = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
    state = state.reshape((TP, TN))
    dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    dA_cs = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))

    if M == 6:
        CB = ct.mma(B_c, ct.transpose(C_c), ct.zeros((Q, Q), dtype=ct.float32))  # B Cᵀ instead of C Bᵀ
    else:
        CB = ct.mma(C_c, ct.transpose(B_c), ct.zeros((Q, Q), dtype=ct.float32))
    pos = ct.arange(Q, dtype=ct.int32)
    if M == 1:
        causal = pos[:, None] <= pos[None, :]  # anti-causal (upper triangle)
    elif M == 2:
        causal = pos[:, None] > pos[None, :]  # strict: the diagonal k == s dropped
    else:
        causal = pos[:, None] >= pos[None, :]
    if M == 4:
        decay = ct.exp(ct.minimum(dA_cs[None, :] - dA_cs[:, None], 0.0))  # exponent reversed: dA[k] - dA[s]
    else:
        decay = ct.exp(ct.minimum(dA_cs[:, None] - dA_cs[None, :], 0.0))
    if M == 3:
        P = ct.where(causal, CB * decay * dt_c[:, None], 0.0)  # dt scales the rows (s) instead of columns (k)
    else:
        P = ct.where(causal, CB * decay * dt_c[None, :], 0.0)
    y_c = ct.mma(P.astype(x.dtype), x_c, ct.zeros((Q, TP), dtype=ct.float32))

    if M == 7:
        past = ct.mma(C_c, state.astype(C.dtype), ct.zeros((Q, TP), dtype=ct.float32))  # state not transposed
    else:
        past = ct.mma(C_c, ct.transpose(state.astype(C.dtype)), ct.zeros((Q, TP), dtype=ct.float32))
    if M == 5:
        dA_last = ct.extract(dA_cs, (Q - 1,), shape=(1,))
        y_c = y_c + past * ct.exp(dA_last)  # whole-chunk decay instead of the decay to position s
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
        if M == 1:
            c = i  # forward order
        elif M == 8:
            c = nchunks - i  # off by one: starts one past the last chunk
        else:
            c = nchunks - 1 - i
        if M != 2:
            ct.store(dstates, (bi, c, hi, 0, 0), dS.reshape((1, 1, 1, TP, TN)))
        if M == 6:
            # (b, nchunks, h) order for dA_cumsum
            g = ct.exp(ct.load(dA_cumsum, (bi, c, hi, Q - 1), shape=()))
        else:
            g = ct.exp(ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()))
        if M == 5:
            S = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN))  # no ZERO padding
        else:
            S = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        own = ct.load(dS_out, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        if M == 3:
            # no g factor
            ct.store(ddA_last, (bi, hi, c), ct.sum(dS * S.reshape((TP, TN))).reshape((1, 1, 1)))
        elif M == 4:
            ct.store(
                ddA_last,
                (bi, hi, c),
                (g * ct.sum(own.reshape((TP, TN)) * S.reshape((TP, TN)))).reshape((1, 1, 1)),
            )
        else:
            ct.store(ddA_last, (bi, hi, c), (g * ct.sum(dS * S.reshape((TP, TN)))).reshape((1, 1, 1)))
        if M == 7:
            dS = dS / g + own.reshape((TP, TN))  # "undoes" the forward decay
        else:
            dS = g * dS + own.reshape((TP, TN))
        if M == 2:
            ct.store(dstates, (bi, c, hi, 0, 0), dS.reshape((1, 1, 1, TP, TN)))  # stored after the update

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
        1: ("tile vs element index: loads dt at index (bi, c*Q, hi), passing the element offset c*Q where "
            "ct.load wants the tile index c (reads the wrong, for c >= 1 out-of-range, tile)"),
        2: ("padding: loads dt without padding_mode=ZERO, so the positions of the ragged last chunk past l"
            " hold undetermined values (NaN on the CPU executor) in dt_out and the cumsum"),
        3: ("dt vs dA confusion: overwrites dt_c with dt_c * A[hi] before the cumsum, so dt_out stores "
            "dt*A instead of dt (dA_cumsum itself is right)"),
        4: "exclusive cumsum: dA_cumsum = cumsum(dt*A) - dt*A, leaving out each position's own term",
        5: ("wrong scan direction: ct.cumsum(..., reverse=True), a suffix sum (towards the chunk end) "
            "instead of the prefix sum from the chunk start"),
        6: ("ct.cumsum axis: keeps dt as the (1, Q, 1) tile (no reshape) and calls ct.cumsum with its "
            "default axis 0, the size-1 batch axis, so dA_cumsum = dt*A with no accumulation"),
        7: "log-decay vs decay: stores exp(cumsum(dt*A)) into dA_cumsum instead of the cumsum itself",
        8: "chunk vs head index: loads A at the chunk index, A[c], instead of A[hi]",
    },
    "ex05": {
        1: ("head vs group: g = hi % HEADS_PER_GROUP (interleaved) instead of hi // HEADS_PER_GROUP, so B "
            "is read from the wrong group"),
        2: ("decay from the chunk start: w = exp(dA_cs[k]) * dt instead of exp(dA_cs[Q-1] - dA_cs[k]) * dt"
            " (the decay from position k to the chunk end)"),
        3: ("total decay as a reduction: dA_last = ct.sum(dA_cs), the sum of the cumsum, instead of its "
            "last element ct.extract(dA_cs, (Q-1,), shape=(1,))"),
        4: "missing factor: w = exp(dA_cs[Q-1] - dA_cs) without the dt factor",
        5: ("dtype (intended type error): weights x in float32 but does not cast xw back to x.dtype, so "
            "with bf16 inputs ct.mma gets float32 and bfloat16 operands (compile error; float32 inputs are"
            " fine)"),
        6: ("axis order: loads dt_out and dA_cumsum at (bi, c, hi, 0), the (b, nchunks, h) order of "
            "states, instead of (bi, hi, c, 0) for these (b, h, nchunks, Q) arrays"),
        7: ("padding: loads B without padding_mode=ZERO, so the ragged last chunk's rows past l and the "
            "columns past n are undetermined (NaN on CPU) and poison the mma"),
        8: ("decay across the whole chunk: w = exp(dA_cs[Q-1]) * dt for every position instead of "
            "exp(dA_cs[Q-1] - dA_cs[k]) * dt"),
    },
    "ex06": {
        1: ("store order: stores chunk_init_states[c] after the update, i.e. the state LEAVING chunk c "
            "instead of the state entering it (chunk 0 never gets initial_states)"),
        2: ("decay placement: state = exp(dA_last) * (state + states[c]), decaying the chunk's own state "
            "too instead of decay * state + states[c]"),
        3: ("decay from the wrong position: loads dA_cumsum[bi, hi, c, 0] (first position) instead of [bi,"
            " hi, c, Q-1], the decay across the whole chunk"),
        4: "log vs linear: multiplies the state by dA_cumsum[c, Q-1] itself, forgetting the exp",
        5: ("axis order: loads states at (bi, hi, c, 0, 0), the (b, h, nchunks) order of dA_cumsum, "
            "instead of (bi, c, hi, 0, 0) for states (b, nchunks, h, p, n)"),
        6: "ct API: uses ct.exp2 instead of ct.exp on the natural-log decay dA_cumsum[c, Q-1]",
        7: ("loop bound: for c in range(nchunks - 1), one chunk too few: the last chunk's entering state "
            "is never stored and its local state never added into final_states"),
        8: ("similar arrays: loads the chunk's local state from chunk_init_states (which it has just "
            "written) instead of states, so state = decay * state + state"),
    },
    "ex07": {
        1: ("causal mask direction: pos[:, None] <= pos[None, :] keeps k >= s (upper triangle) instead of "
            "k <= s"),
        2: ("exclusive mask: pos[:, None] > pos[None, :] drops the diagonal k == s (each position's own "
            "input)"),
        3: ("broadcasting: dt scales the rows, dt_c[:, None] (dt_s), instead of the columns dt_c[None, :] "
            "(dt_k)"),
        4: ("decay exponent reversed: exp(min(dA_cs[k] - dA_cs[s], 0)), which is clamped to 0 below the "
            "diagonal, so the intra-chunk terms get no decay at all"),
        5: ("decay of the past term: multiplies C·stateᵀ by exp(dA_cs[Q-1]) (across the whole chunk) for "
            "every row instead of exp(dA_cs[s]) (from the chunk start to position s)"),
        6: "C vs B: CB = B @ Cᵀ instead of C @ Bᵀ, so P[s, k] uses B_s·C_k",
        7: ("shape (intended type error): past = mma(C, state) without transposing the (TP, TN) state: a "
            "shape error when TP != TN, and C·state rows contracted against the wrong axis when TP == TN"),
        8: "head vs group: loads x at the group index g instead of the head hi",
    },
    "ex08": {
        1: "direction: walks the chunks forwards, c = i, instead of from the last to the first",
        2: "store order: stores dstates[c] after the update dS = g*dS + dS_out[c] instead of before it",
        3: "chain rule: ddA_last = <dS, S_c> without the factor g = exp(dA_cumsum[c, Q-1])",
        4: ("similar arrays: ddA_last = g * <dS_out[c], S_c> uses the chunk's own dS_out instead of the "
            "carried dS"),
        5: ("padding: loads chunk_init_states without padding_mode=ZERO, so the padded part of S past p, n"
            " is undetermined (NaN on CPU) and poisons the sum for ddA_last"),
        6: ("axis order: loads the decay at dA_cumsum[bi, c, hi, Q-1] (the (b, nchunks, h) order) instead "
            "of [bi, hi, c, Q-1]"),
        7: ("forward vs backward: dS = dS / g + dS_out[c], dividing by the decay to 'undo' it instead of "
            "multiplying by g (the transpose of the forward step)"),
        8: ("off-by-one reverse index: c = nchunks - i instead of nchunks - 1 - i (first step one past the"
            " last chunk, chunk 0 never processed)"),
    },
}

#: no slip needs an alternative code path
SANITY: dict[str, list[int]] = {}

"""The seventh set of planted mistakes for the cuTile exercises 4-8 (docs/instructors.md): 40 slips written
from the exercises' contracts without reading the diagnosis code, as a learner of the guided tier would slip,
measured on the checks before any fix, and kept here as tested mistakes
(``tests/test_exercise_diagnosis_sets.py`` says what each named hint must say).

Each kernel is right for M = 0 and plants mistake M for M = 1..8; M above 10 (``SANITY``) runs a mistake's
alternative code path with the slip corrected, and must pass.
"""

from __future__ import annotations

import cuda.tile as ct

ZERO = ct.PaddingMode.ZERO
LOG2E = 1.4426950408889634


# ------------------------------------------------------------------------------------------------------------
# ex04: chunk cumsum
# ------------------------------------------------------------------------------------------------------------
@ct.kernel
def chunk_cumsum_kernel(dt, A, dt_out, dA_cumsum, Q: ct.Constant[int], M: ct.Constant[int]):
    bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)

    if M == 1:
        # slip: no padding_mode (default UNDETERMINED) on the ragged last chunk
        dt_c = ct.load(dt, (bi, c, hi), shape=(1, Q, 1)).reshape((Q,))
    elif M == 4:
        # slip: the (1, Q, 1) tile is never reshaped to (Q,): cumsum(axis=0) then scans the size-1 batch axis
        dt_c = ct.load(dt, (bi, c, hi), shape=(1, Q, 1), padding_mode=ZERO)
    elif M == 7:
        # slip: the chunk start given in elements (c*Q) instead of in tile units (c)
        dt_c = ct.load(dt, (bi, c * Q, hi), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,))
    else:
        dt_c = ct.load(dt, (bi, c, hi), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,))

    if M == 2:
        # slip: softplus applied to dt again (as in Mamba's dt = softplus(dt + dt_bias)); dt is already the
        # step size
        dt_c = ct.log(1.0 + ct.exp(dt_c))

    A_h = ct.load(A, (hi,), shape=())

    if M == 3:
        # slip: exclusive cumsum (the current position's own dt*A subtracted)
        dtA = dt_c * A_h
        dA_cs = ct.cumsum(dtA, axis=0) - dtA
    elif M == 5:
        # slip: sign error: -A used (as if A were the positive decay rate), the exponents grow instead of
        # shrink
        dA_cs = ct.cumsum(dt_c * (-A_h), axis=0)
    elif M == 6:
        # slip: exponents pre-scaled by log2(e) as in the shipped exp2 kernels; the contract is natural-log
        # units
        dA_cs = ct.cumsum(dt_c * A_h * LOG2E, axis=0)
    elif M == 8:
        # slip: dt_c overwritten with dt*A before the cumsum, so dt_out receives dt*A instead of dt
        dt_c = dt_c * A_h
        dA_cs = ct.cumsum(dt_c, axis=0)
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
    if M == 3:
        # slip: the group taken as hi % HEADS_PER_GROUP (the head's index inside its group) instead of hi //
        # HEADS_PER_GROUP
        g = hi % HEADS_PER_GROUP
    else:
        g = hi // HEADS_PER_GROUP

    x_c = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((Q, TP))
    if M == 6:
        # slip: B loaded without padding_mode (NaN past the end of the ragged last chunk)
        B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN)).reshape((Q, TN))
    else:
        B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    dA_cs = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))

    dA_last = ct.extract(dA_cs, (Q - 1,), shape=(1,))
    if M == 2:
        # slip: sign error in the exponent: exp(dA_cs[k] - dA_cs[Q-1]) instead of exp(dA_cs[Q-1] - dA_cs[k])
        w = ct.exp(dA_cs - dA_last) * dt_c
    elif M == 4:
        # slip: dt left out of the weight: w = exp(dA_cs[Q-1] - dA_cs) only
        w = ct.exp(dA_last - dA_cs)
    elif M == 8:
        # slip: exp2 instead of exp for the decay (dA_cumsum is in natural-log units)
        w = ct.exp2(dA_last - dA_cs) * dt_c
    else:
        w = ct.exp(dA_last - dA_cs) * dt_c

    if M == 5:
        # slip (compile failure on bf16): the weighted x is left in float32, not cast back to x.dtype, so the
        # mma
        # operands are float32 and bfloat16
        xw = x_c.astype(ct.float32) * w[:, None]
    elif M == 7:
        # slip: dt counted twice: x multiplied by dt on top of w, which already contains dt
        xw = (x_c.astype(ct.float32) * dt_c[:, None] * w[:, None]).astype(x.dtype)
    else:
        xw = (x_c.astype(ct.float32) * w[:, None]).astype(x.dtype)

    acc = ct.zeros((TP, TN), dtype=ct.float32)
    if M == 1:
        # slip: transposed via reshape: xw.reshape((TP, Q)) instead of ct.transpose(xw)
        state = ct.mma(xw.reshape((TP, Q)), B_c, acc)
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

    state = ct.load(initial_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO).reshape((TP, TN))

    nch = states.shape[1]
    if M == 4:
        # slip: loop bound off by one: range(nchunks - 1), the last chunk is never visited
        nch = states.shape[1] - 1

    for c in range(nch):
        if M != 1:
            ct.store(chunk_init_states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))

        if M == 3:
            # slip: decay read from the chunk's FIRST cumsum element dA_cumsum[bi, hi, c, 0] instead of Q-1
            a_last = ct.load(dA_cumsum, (bi, hi, c, 0), shape=())
        elif M == 6:
            # slip: layout misread: dA_cumsum indexed as (b, nchunks, h, Q), i.e. (bi, c, hi, Q-1)
            a_last = ct.load(dA_cumsum, (bi, c, hi, Q - 1), shape=())
        else:
            a_last = ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=())

        if M == 8:
            # slip: sign error: decay exp(-dA_cumsum[..., Q-1]) (as if the cumsum held -dt*A)
            decay = ct.exp(-a_last)
        else:
            decay = ct.exp(a_last)

        local = ct.load(states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        if M == 2:
            # slip: decay left out: state = state + states[c]
            state = state + local.reshape((TP, TN))
        elif M == 5:
            # slip: the decay applied to the sum: state = decay * (state + states[c]) (the chunk's own state
            # decayed)
            state = decay * (state + local.reshape((TP, TN)))
        elif M == 7:
            # slip (compile failure): the loaded local state is not reshaped, so the loop-carried tile changes
            # shape
            # from (TP, TN) to (1, 1, 1, TP, TN)
            state = decay * state + local
        else:
            state = decay * state + local.reshape((TP, TN))

        if M == 1:
            # slip: stored AFTER the update: chunk_init_states[c] gets the state leaving chunk c, not entering
            # it
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
        # slip: x loaded without padding_mode (NaN past the end of the ragged last chunk)
        x_c = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP)).reshape((Q, TP))
    else:
        x_c = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((Q, TP))
    C_c = ct.load(C, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    state = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
    state = state.reshape((TP, TN))
    dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    dA_cs = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))

    if M == 2:
        # slip: operands swapped: CB = B @ C^T (that is (C B^T)^T: CB[s, k] = B_s . C_k)
        CB = ct.mma(B_c, ct.transpose(C_c), ct.zeros((Q, Q), dtype=ct.float32))
    else:
        CB = ct.mma(C_c, ct.transpose(B_c), ct.zeros((Q, Q), dtype=ct.float32))

    pos = ct.arange(Q, dtype=ct.int32)
    if M == 1:
        # slip: strict causal mask s > k: the diagonal (k == s) is dropped
        causal = pos[:, None] > pos[None, :]
    else:
        causal = pos[:, None] >= pos[None, :]

    if M == 5:
        # slip: sign error in the segment sum: dA_cs[k] - dA_cs[s] instead of dA_cs[s] - dA_cs[k]
        decay = ct.exp(ct.minimum(dA_cs[None, :] - dA_cs[:, None], 0.0))
    else:
        decay = ct.exp(ct.minimum(dA_cs[:, None] - dA_cs[None, :], 0.0))

    if M == 3:
        # slip: dt scales the rows (dt[s]) instead of the columns (dt[k])
        P = ct.where(causal, CB * decay * dt_c[:, None], 0.0)
    else:
        P = ct.where(causal, CB * decay * dt_c[None, :], 0.0)
    y_c = ct.mma(P.astype(x.dtype), x_c, ct.zeros((Q, TP), dtype=ct.float32))

    if M == 6:
        # slip: transposed via reshape: state.reshape((TN, TP)) instead of ct.transpose(state)
        st = state.astype(C.dtype).reshape((TN, TP))
    else:
        st = ct.transpose(state.astype(C.dtype))
    past = ct.mma(C_c, st, ct.zeros((Q, TP), dtype=ct.float32))

    if M == 4:
        # slip: the past term's decay left out: y += C @ state^T without exp(dA_cs[s])
        y_c = y_c + past
    elif M == 7:
        # slip: wrong decay index: every row decayed by the whole-chunk decay exp(dA_cs[Q-1]) instead of
        # exp(dA_cs[s])
        y_c = y_c + past * ct.exp(ct.extract(dA_cs, (Q - 1,), shape=(1,)))
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
    n_iter = nchunks
    if M == 8:
        # slip: loop bound off by one: range(nchunks - 1), chunk 0 is never visited
        n_iter = nchunks - 1
    for i in range(n_iter):
        if M == 2:
            # slip: chunks walked forwards (c = i) instead of from the last to the first
            c = i
        else:
            c = nchunks - 1 - i

        if M != 1:
            ct.store(dstates, (bi, c, hi, 0, 0), dS.reshape((1, 1, 1, TP, TN)))

        if M == 5:
            # slip: sign error: g = exp(-dA_cumsum[..., Q-1])
            g = ct.exp(-ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()))
        else:
            g = ct.exp(ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()))

        if M == 6:
            # slip: chunk_init_states loaded without padding_mode (NaN past p and n poisons the sum)
            S = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN))
        else:
            S = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        S = S.reshape((TP, TN))

        if M == 3:
            # slip: the chain rule through g = exp(a_last) left out: ddA_last = <dS, S> without the factor g
            dda = ct.sum(dS * S)
        elif M == 4:
            # slip: reduction over the wrong set: sum(dS) * sum(S) instead of sum(dS * S)
            dda = g * (ct.sum(dS) * ct.sum(S))
        elif M == 7:
            # slip: g counted twice: g * <g * dS, S>
            dda = g * ct.sum(g * dS * S)
        else:
            dda = g * ct.sum(dS * S)
        ct.store(ddA_last, (bi, hi, c), dda.reshape((1, 1, 1)))

        own = ct.load(dS_out, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        dS = g * dS + own.reshape((TP, TN))

        if M == 1:
            # slip: dstates stored AFTER the update: dstates[c] gets the gradient of the state entering chunk
            # c
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
        1: ("missing padding: dt loaded without padding_mode=ZERO, so the ragged last chunk reads "
            "UNDETERMINED (NaN) past the end into dt_out and the cumsum"),
        2: ("extra nonlinearity: softplus applied to dt (dt_c = log(1 + exp(dt_c))) although dt is already"
            " the step size; also makes the padded positions log 2 instead of 0"),
        3: ("mask off by one (exclusive scan): dA_cs = cumsum(dt*A) - dt*A, each position leaves out its "
            "own term"),
        4: ("reduction over the wrong axis: the (1, Q, 1) dt tile is not reshaped to (Q,), so "
            "cumsum(axis=0) scans the size-1 batch axis and dA_cumsum receives dt*A with no running sum"),
        5: ("sign error: cumsum of dt * (-A), treating A as a positive rate; the exponents grow instead of"
            " decaying"),
        6: ("exp vs exp2 confusion / wrong constant: dt*A multiplied by log2(e) before the cumsum (the "
            "shipped exp2 convention), while the contract is natural-log units"),
        7: ("wrong chunk index: dt loaded at tile index (bi, c*Q, hi) (an element offset) instead of (bi, "
            "c, hi); chunk 0 is right, later chunks read far past their position or out of bounds"),
        8: ("term stored wrong: dt_c overwritten with dt*A before the cumsum, so dt_out receives dt*A "
            "instead of dt (dA_cumsum is right)"),
    },
    "ex05": {
        1: ("operand transposed via reshape: xw.reshape((TP, Q)) instead of ct.transpose(xw) as the mma's "
            "first operand"),
        2: "sign error: w = exp(dA_cs[k] - dA_cs[Q-1]) * dt instead of exp(dA_cs[Q-1] - dA_cs[k]) * dt",
        3: "wrong group index: g = hi % HEADS_PER_GROUP instead of hi // HEADS_PER_GROUP for B",
        4: "term left out: dt missing from the weight, w = exp(dA_cs[Q-1] - dA_cs) only",
        5: ("wrong dtype (compile failure on bf16): x*w kept in float32, not cast back to x.dtype, so mma "
            "gets float32 and bfloat16 operands"),
        6: ("missing padding: B loaded without padding_mode=ZERO, NaN rows past the end of the ragged last"
            " chunk reach the mma"),
        7: ("term counted twice: x multiplied by dt[:, None] as well as by w, which already contains dt "
            "(dt squared)"),
        8: "exp vs exp2: w = exp2(dA_cs[Q-1] - dA_cs) * dt instead of exp(...)",
    },
    "ex06": {
        1: ("store at the wrong index (off by one chunk): chunk_init_states[c] stored after the update, so"
            " it holds the state leaving chunk c instead of the state entering it"),
        2: "term left out: no decay, state = state + states[c]",
        3: ("wrong decay index: the decay read from dA_cumsum[bi, hi, c, 0] (first element) instead of "
            "[.., Q-1]"),
        4: ("loop bound off by one: range(nchunks - 1), the last chunk is never stored nor added into "
            "final_states"),
        5: ("scaling on the wrong term: state = decay * (state + states[c]), the chunk's own state decayed"
            " too"),
        6: ("layout misread: dA_cumsum indexed as (b, nchunks, h, Q), i.e. load at (bi, c, hi, Q-1) "
            "instead of (bi, hi, c, Q-1)"),
        7: ("shape error (compile failure): the local state loaded as (1, 1, 1, TP, TN) is added without "
            "reshape, so the loop-carried state changes shape"),
        8: "sign error: decay = exp(-dA_cumsum[bi, hi, c, Q-1]) instead of exp(+...)",
    },
    "ex07": {
        1: ("mask off by one: causal mask pos[:, None] > pos[None, :] (strict), the diagonal k == s is "
            "dropped"),
        2: "operand transposed: CB = B @ C^T instead of C @ B^T (CB[s, k] = B_s . C_k)",
        3: ("scaling on the wrong axis: dt scales the rows (dt_c[:, None], dt[s]) instead of the columns "
            "(dt[k])"),
        4: ("term left out: the past term added without its decay, y += C @ state^T instead of "
            "exp(dA_cs)[:, None] * (C @ state^T)"),
        5: ("sign error: decay exponent dA_cs[k] - dA_cs[s] instead of dA_cs[s] - dA_cs[k] (clamped by "
            "minimum to 0, so every causal decay becomes 1)"),
        6: ("operand transposed via reshape: state.reshape((TN, TP)) instead of ct.transpose(state) in C @"
            " state^T"),
        7: ("wrong decay index: the past term decayed by the whole-chunk exp(dA_cs[Q-1]) for every row "
            "instead of exp(dA_cs[s]) per row"),
        8: ("missing padding: x loaded without padding_mode=ZERO, NaN past the end of the ragged last "
            "chunk reaches P @ x"),
    },
    "ex08": {
        1: ("store at the wrong index (off by one chunk): dstates[c] stored after the update dS = g*dS + "
            "dS_out[c], so it holds the gradient entering chunk c instead of the one arriving from the "
            "chunks after it"),
        2: "wrong loop order / chunk index: c = i (chunks walked forwards) instead of c = nchunks - 1 - i",
        3: "term left out: ddA_last = <dS, S> without the factor g (the chain rule through exp)",
        4: "reduction over the wrong set: ddA_last = g * sum(dS) * sum(S) instead of g * sum(dS * S)",
        5: "sign error: g = exp(-dA_cumsum[bi, hi, c, Q-1]) instead of exp(+...)",
        6: ("missing padding: chunk_init_states loaded without padding_mode=ZERO, the NaN past p and n "
            "enters sum(dS * S)"),
        7: "term counted twice: ddA_last = g * sum(g * dS * S), the decay g applied twice",
        8: ("loop bound off by one: range(nchunks - 1), chunk 0 is never visited (no dstates/ddA_last for "
            "it, dinitial_states missing its last step)"),
    },
}

SANITY: dict[str, list[int]] = {}

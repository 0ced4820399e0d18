"""The seventeenth set of planted mistakes for the cuTile exercises 4-8 (docs/instructors.md): 40 slips
written from the exercises' contracts without reading the diagnosis code, as the first attempts of one learner
who thinks in NumPy / JAX and carries those habits into tiles: einsum-style index bookkeeping (which index is
summed), ``[:, None]`` vs ``[None, :]``, ``axis=-1``, ``a[-1]`` and ``a[-1] - a[0]``, ``.mean()``, a walk over
flipped arrays, the (b, h, ...) vs (b, nchunks, h, ...) layouts, dt applied twice, and the nonlinearities of
the rest of the Mamba2 block (softplus, silu) or of RNNs and attention (tanh, exp of the scores). Measured on
the checks before any fix, and kept here as tested mistakes.

Each kernel is right for M = 0 and plants mistake M for M = 1..8; no slip needs an alternative code path
(``SANITY`` is empty).
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
        # dt read as if it were laid out (b, h, l) like the outputs: a (1, 1, Q) tile at (bi, hi, c)
        dt_c = ct.load(dt, (bi, hi, c), shape=(1, 1, Q), padding_mode=ZERO).reshape((Q,))
    elif M == 8:
        # keeps the (1, Q, 1) tile and scans along axis=-1 ("time is the last axis")
        dt_t = ct.load(dt, (bi, c, hi), shape=(1, Q, 1), padding_mode=ZERO)
        dt_c = dt_t.reshape((Q,))
    else:
        dt_c = ct.load(dt, (bi, c, hi), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,))

    if M == 7:
        # softplus on dt, as in the Mamba2 block's dt preprocessing (dt here is already processed)
        dt_c = ct.log(1.0 + ct.exp(dt_c))

    if M == 3:
        # A loaded with dt's (Q,) shape so that it "broadcasts": A[hi*Q + k] multiplies dt[k]
        A_h = ct.load(A, (hi,), shape=(Q,), padding_mode=ZERO)
    else:
        A_h = ct.load(A, (hi,), shape=())

    if M == 5:
        # decays compose by products: cumprod of the log-decays dt*A instead of their cumsum
        dA_cs = ct.cumprod(dt_c * A_h, axis=0)
    elif M == 6:
        # A left out: cumsum of dt alone
        dA_cs = ct.cumsum(dt_c, axis=0)
    elif M == 8:
        dA_cs = ct.cumsum(dt_t * A_h, axis=-1)  # axis -1 is the size-1 head axis: no accumulation
    else:
        dA_cs = ct.cumsum(dt_c * A_h, axis=0)

    if M == 2:
        # "relative to the chunk start": subtracts the first element, so dA_cs[k] = sum_{1 <= j <= k}
        dA_cs = dA_cs - ct.extract(dA_cs, (0,), shape=(1,))

    if M == 4:
        # outputs stored in the (b, nchunks, h) order of the grid instead of (b, h, nchunks)
        ct.store(dt_out, (bi, c, hi, 0), dt_c.reshape((1, 1, 1, Q)))
        ct.store(dA_cumsum, (bi, c, hi, 0), dA_cs.reshape((1, 1, 1, Q)))
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

    x_c = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((Q, TP))
    B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    dA_cs = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))

    if M == 4:
        # dA_cumsum[bi, hi, -1, -1]: the last chunk of the sequence instead of this chunk's last position
        dA_last = ct.load(dA_cumsum, (bi, hi, dA_cumsum.shape[2] - 1, Q - 1), shape=())
    elif M == 5:
        # "the total is the extreme of the cumsum": max, which is dA_cs[0] for a decreasing cumsum
        dA_last = ct.max(dA_cs)
    else:
        dA_last = ct.extract(dA_cs, (Q - 1,), shape=(1,))

    if M == 6:
        w = dt_c  # decay left out
    elif M == 7:
        w = ct.exp(dt_c * (dA_last - dA_cs)) * dt_c  # dt applied twice: already inside dA_cumsum
    else:
        w = ct.exp(dA_last - dA_cs) * dt_c

    if M == 2:
        # "decay to the end, exclusive": masks out the last position, pos < Q - 1
        pos = ct.arange(Q, dtype=ct.int32)
        w = ct.where(pos < Q - 1, w, 0.0)

    xf = x_c.astype(ct.float32)
    if M == 8:
        xf = xf / (1.0 + ct.exp(-xf))  # silu on x, as in the Mamba2 block (x is already activated)

    if M == 3:
        # weights broadcast along the wrong side, w[None, :]: (Q, TP) * (1, Q)
        xw = (xf * w[None, :]).astype(x.dtype)
    else:
        xw = (xf * w[:, None]).astype(x.dtype)

    if M == 1:
        # einsum 'kn,kp->np': Bᵀ @ xw gives (TN, TP), then reshaped (not transposed) into (TP, TN)
        st = ct.mma(ct.transpose(B_c), xw, ct.zeros((TN, TP), dtype=ct.float32))
        state = st.reshape((TP, TN))
    else:
        state = ct.mma(ct.transpose(xw), B_c, ct.zeros((TP, TN), dtype=ct.float32))

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
    if M == 6:
        state = ct.zeros((TP, TN), dtype=ct.float32)  # np.zeros start: initial_states left out
    else:
        state = ct.load(initial_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO)
        state = state.reshape((TP, TN))
    final = state

    for c in range(states.shape[1]):
        if M == 3:
            # stored in the (b, h, nchunks) order of dA_cumsum instead of (b, nchunks, h)
            ct.store(chunk_init_states, (bi, hi, c, 0, 0), state.reshape((1, 1, 1, TP, TN)))
        else:
            ct.store(chunk_init_states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))
        if M == 2:
            final = state  # final_states = chunk_init_states[-1]: the state ENTERING the last chunk

        if M == 4:
            # total decay as a[-1] - a[0]: drops the chunk's first step
            a_first = ct.load(dA_cumsum, (bi, hi, c, 0), shape=())
            decay = ct.exp(ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()) - a_first)
        elif M == 8:
            decay = ct.exp(ct.load(dA_cumsum, (bi, hi, c, -1), shape=()))  # NumPy's a[-1] as an index
        else:
            decay = ct.exp(ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()))

        if M == 1:
            # states taken as (..., n, p) (einsum 'kn,kp->np') and transposed back
            lt = ct.load(states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TN, TP), padding_mode=ZERO)
            local = ct.transpose(lt.reshape((TN, TP)))
        else:
            local = ct.load(states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
            local = local.reshape((TP, TN))

        if M == 5:
            state = state + decay * local  # the decay scales the chunk's own state, not the carried one
        elif M == 7:
            state = ct.tanh(decay * state + local)  # RNN-cell habit: tanh on the new state
        else:
            state = decay * state + local

    if M == 2:
        ct.store(final_states, (bi, hi, 0, 0), final.reshape((1, 1, TP, TN)))
    else:
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
        # einsum 'sn,sn->s' instead of 'sn,kn->sk': only C_s . B_s, broadcast along k by [:, None]
        CB = ct.sum(C_c.astype(ct.float32) * B_c.astype(ct.float32), axis=1)[:, None]
    else:
        CB = ct.mma(C_c, ct.transpose(B_c), ct.zeros((Q, Q), dtype=ct.float32))
    if M == 7:
        CB = ct.exp(CB)  # softmax-attention habit: exponentiated scores
    pos = ct.arange(Q, dtype=ct.int32)
    causal = pos[:, None] >= pos[None, :]
    if M == 3:
        # exp(a) / exp(b) with both operands expanded on the same side: a (Q, 1) tile of ones
        decay = ct.exp(dA_cs)[:, None] / ct.exp(dA_cs)[:, None]
    else:
        decay = ct.exp(ct.minimum(dA_cs[:, None] - dA_cs[None, :], 0.0))
    if M == 2:
        P = CB * decay * dt_c[None, :]  # no causal mask: relies on the clamp at 0 to hide k > s
    else:
        P = ct.where(causal, CB * decay * dt_c[None, :], 0.0)

    if M == 8:
        # x pre-scaled by dt as well, while P already carries dt_k: dt applied twice
        xs = (x_c.astype(ct.float32) * dt_c[:, None]).astype(x.dtype)
        y_c = ct.mma(P.astype(x.dtype), xs, ct.zeros((Q, TP), dtype=ct.float32))
    elif M == 1:
        # einsum 'ks,kp->sp': Pᵀ @ x instead of P @ x
        y_c = ct.mma(ct.transpose(P).astype(x.dtype), x_c, ct.zeros((Q, TP), dtype=ct.float32))
    else:
        y_c = ct.mma(P.astype(x.dtype), x_c, ct.zeros((Q, TP), dtype=ct.float32))

    past = ct.mma(C_c, ct.transpose(state.astype(C.dtype)), ct.zeros((Q, TP), dtype=ct.float32))
    if M == 6:
        y_c = y_c + past  # the decay exp(dA_cs[s]) of the past term left out
    else:
        y_c = y_c + past * ct.exp(dA_cs)[:, None]

    if M == 4:
        # y taken as (b, h, l, p): a (1, 1, Q, TP) tile at (bi, hi, c, 0)
        ct.store(y, (bi, hi, c, 0), y_c.astype(y.dtype).reshape((1, 1, Q, TP)))
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
    if M == 6:
        dS = ct.zeros((TP, TN), dtype=ct.float32)  # dfinal_states left out
    else:
        dS = ct.load(dfinal_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO)
        dS = dS.reshape((TP, TN))

    nchunks = dS_out.shape[1]
    for i in range(nchunks):
        c = nchunks - 1 - i
        if M == 4:
            # flipped walk: reads chunk c = nchunks-1-i but stores dstates at the loop counter i
            ct.store(dstates, (bi, i, hi, 0, 0), dS.reshape((1, 1, 1, TP, TN)))
        else:
            ct.store(dstates, (bi, c, hi, 0, 0), dS.reshape((1, 1, 1, TP, TN)))
        g = ct.exp(ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()))
        if M == 2:
            # the state LEAVING chunk c, chunk_init_states[c + 1], paired with dS (zero for the last chunk)
            S = ct.load(chunk_init_states, (bi, c + 1, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        else:
            S = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        S = S.reshape((TP, TN))

        if M == 1:
            inner = ct.sum(dS @ ct.transpose(S))  # einsum 'pn,qn->' (all p, q pairs) instead of 'pn,pn->'
        elif M == 5:
            inner = ct.sum(dS * S) / (TP * TN)  # .mean() where the sum belongs
        else:
            inner = ct.sum(dS * S)
        if M == 7:
            dda = ct.exp(g) * inner  # exp applied again to g, which is already the decay exp(a_last)
        else:
            dda = g * inner
        if M == 8:
            # stored in the (b, nchunks, h) order of dstates instead of ddA_last's (b, h, nchunks)
            ct.store(ddA_last, (bi, c, hi), dda.reshape((1, 1, 1)))
        else:
            ct.store(ddA_last, (bi, hi, c), dda.reshape((1, 1, 1)))

        own = ct.load(dS_out, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        if M == 3:
            dS = dS + g * own.reshape((TP, TN))  # the decay scales dS_out[c] instead of the carried dS
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
        1: ("operand transposed (layout): reads dt as if it were (b, h, l) like the outputs, a (1, 1, Q) tile"
            " at (bi, hi, c), instead of the (1, Q, 1) tile at (bi, c, hi) of dt (b, l, h)"),
        2: ("off by one: subtracts the first element so the cumsum starts at 0, dA_cs[k] = sum_{1<=j<=k} "
            "dt[j]*A instead of the inclusive sum_{0<=j<=k} (dt_out is right)"),
        3: ("scaling on the wrong axis: loads A with dt's (Q,) shape at tile index hi, so dt[k] is scaled by "
            "A[hi*Q + k] (zero past h) instead of the head's scalar A[hi]"),
        4: ("layout: stores dt_out and dA_cumsum at (bi, c, hi, 0), the grid's (b, nchunks, h) order, instead"
            " of (bi, hi, c, 0) for these (b, h, nchunks, Q) arrays"),
        5: "wrong reduction: ct.cumprod(dt*A) (decays multiply) instead of ct.cumsum of the log-decays dt*A",
        6: "term left out: dA_cumsum = cumsum(dt) without the factor A[hi]",
        7: ("extra nonlinearity: applies softplus, log(1 + exp(dt)), to dt before storing it and taking the "
            "cumsum (dt is already processed)"),
        8: ("axis convention: keeps the (1, Q, 1) tile and takes ct.cumsum(..., axis=-1), over the size-1"
            " head axis, so dA_cumsum = dt*A with no accumulation along the chunk"),
    },
    "ex05": {
        1: ("operand transposed: computes Bᵀ @ xw, a (TN, TP) tile (einsum 'kn,kp->np'), and reshapes it "
            "into (TP, TN) instead of xwᵀ @ B (a reshape is not a transpose)"),
        2: ("mask off by one: zeroes the weight of the chunk's last position (pos < Q - 1), dropping "
            "x[Q-1]*dt[Q-1]*B[Q-1] from the state"),
        3: ("scaling on the wrong axis: x_c * w[None, :] ((Q, TP) * (1, Q)) instead of w[:, None] (a shape "
            "error unless TP == Q, the p columns scaled by w otherwise)"),
        4: ("wrong chunk index: the total decay read as dA_cumsum[bi, hi, nchunks-1, Q-1] (a[-1, -1]: the "
            "sequence's last chunk) instead of this chunk's dA_cs[Q-1]"),
        5: ("wrong reduction: dA_last = ct.max(dA_cs), which is dA_cs[0] for the decreasing cumsum, instead "
            "of its last element"),
        6: "term left out: w = dt without the decay exp(dA_cs[Q-1] - dA_cs[k])",
        7: ("dt applied twice: w = exp(dt*(dA_cs[Q-1] - dA_cs)) * dt, multiplying the exponent by dt although"
            " dA_cumsum already contains dt"),
        8: ("extra nonlinearity: applies silu, x*sigmoid(x), to x before weighting it (x is already the "
            "activated input)"),
    },
    "ex06": {
        1: ("operand transposed: loads states' chunk as a (TN, TP) tile (taking states as (..., n, p)) and "
            "transposes it, so local[a, b] = states[..., b, a] instead of the (TP, TN) tile as stored"),
        2: ("exclusive vs inclusive: final_states gets the state ENTERING the last chunk (the last "
            "chunk_init_states) instead of the state after its update"),
        3: ("layout: stores chunk_init_states at (bi, hi, c, 0, 0), the (b, h, nchunks) order of dA_cumsum, "
            "instead of (bi, c, hi, 0, 0)"),
        4: ("off by one: total decay exp(dA_cumsum[c, Q-1] - dA_cumsum[c, 0]) (a[-1] - a[0]), which drops the"
            " chunk's first step, instead of exp(dA_cumsum[c, Q-1])"),
        5: ("scaling on the wrong term: state = state + decay * states[c] instead of decay * state + "
            "states[c]"),
        6: "term left out: starts from zeros instead of loading initial_states",
        7: "extra nonlinearity: state = tanh(decay * state + states[c]) (an RNN cell's tanh)",
        8: ("NumPy negative index: loads the decay at dA_cumsum[bi, hi, c, -1], which cuTile does not wrap "
            "to Q-1, instead of [bi, hi, c, Q-1]"),
    },
    "ex07": {
        1: "operand transposed: y_intra = Pᵀ @ x (einsum 'ks,kp->sp') instead of P @ x",
        2: ("mask left out: P = CB * decay * dt with no causal where(), relying on the clamp min(., 0), "
            "which gives decay 1 (not 0) for k > s"),
        3: ("broadcasting: decay = exp(dA)[:, None] / exp(dA)[:, None], both on the same side (a (Q, 1) tile "
            "of ones) instead of exp(dA_cs[s] - dA_cs[k]) over (s, k)"),
        4: ("layout: stores y as if it were (b, h, l, p), a (1, 1, Q, TP) tile at (bi, hi, c, 0), instead of "
            "the (1, Q, 1, TP) tile at (bi, c, hi, 0)"),
        5: ("wrong reduction: CB = sum_n C[s, n] * B[s, n] (einsum 'sn,sn->s') broadcast along k by"
            " [:, None], instead of the (Q, Q) matrix C @ Bᵀ"),
        6: "term left out: adds C·stateᵀ without its decay exp(dA_cs[s])",
        7: "extra nonlinearity: exponentiates the scores, exp(C @ Bᵀ), as in softmax attention",
        8: "dt applied twice: x is pre-scaled by dt while P already carries dt_k",
    },
    "ex08": {
        1: ("operand transposed: <dS, S> as sum(dS @ Sᵀ) (einsum 'pn,qn->', all p, q pairs) instead of "
            "sum(dS * S)"),
        2: ("off by one: ddA_last pairs dS with chunk_init_states[c + 1] (the state leaving chunk c) instead "
            "of S_c = chunk_init_states[c]"),
        3: "scaling on the wrong term: dS = dS + g * dS_out[c] instead of g * dS + dS_out[c]",
        4: ("flipped index: walks c backwards but stores dstates at the loop counter i instead of c, so "
            "dstates comes out in reversed chunk order"),
        5: "mean instead of sum: ddA_last = g * sum(dS * S) / (TP * TN)",
        6: "term left out: starts dS from zeros instead of loading dfinal_states",
        7: "extra nonlinearity: ddA_last = exp(g) * <dS, S>, exponentiating g = exp(a_last) a second time",
        8: ("layout: stores ddA_last at (bi, c, hi), the (b, nchunks, h) order, instead of (bi, hi, c) for "
            "ddA_last (b, h, nchunks)"),
    },
}

#: no slip needs an alternative code path
SANITY: dict[str, list[int]] = {}

"""The twenty-second set of planted mistakes for the cuTile exercises 4-8 (docs/instructors.md): 40 slips
written from the exercises' contracts without reading the diagnosis code, as the first attempts of a learner
who comes from CUDA C / C++ and thinks per thread and per element: element loops with a running total in a
register, manual index arithmetic with ``ct.gather`` / ``ct.scatter`` (global positions ``c*Q + s``, flat
thread ids decoded with ``//`` and ``%``), bounds guards as masks, a "thread" per row or column of the state,
split-K partial products, hand-written reductions. The correct kernels (M = 0) are written in that style; the
slips are what that style invites (a flat offset with the wrong stride, a guard with the wrong bound, partials
combined wrongly, an accumulator that is not reset, a loop over the wrong dimension, block indices decoded in
the wrong order) plus the usual classes (an operand transposed, a mask off by one, scaling on the wrong axis,
the wrong chunk or decay index, a reduction over the wrong set, a term left out, an extra nonlinearity),
measured on the checks before any fix.

Each kernel is right for M = 0 and plants mistake M for M = 1..8; no slip needs an alternative code path
(``SANITY`` is empty).
"""

from __future__ import annotations

import cuda.tile as ct

ZERO = ct.PaddingMode.ZERO


# ------------------------------------------------------------------------------------------------------------
# ex04: chunk cumsum, one "thread" walks its chunk and keeps the running sum in a register
# ------------------------------------------------------------------------------------------------------------
@ct.kernel
def chunk_cumsum_kernel(dt, A, dt_out, dA_cumsum, Q: ct.Constant[int], M: ct.Constant[int]):
    if M == 5:
        bi, hi, c = ct.bid(0), ct.bid(1), ct.bid(2)  # grid taken as (b, h, nchunks), the outputs' order
    else:
        bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)
    L = dt.shape[1]
    a = ct.gather(A, hi)  # A[hi], one element

    if M == 7:
        # running sum started from the chunk's first element, which the loop then adds again
        acc = ct.gather(dt, (bi, c * Q, hi)) * a
    else:
        acc = ct.zeros((), dtype=ct.float32)  # the register that carries the running sum

    if M == 2:
        nsteps = dt_out.shape[2]  # axis 2 of (b, h, nchunks, Q): the number of chunks
    else:
        nsteps = Q
    for s in range(nsteps):
        if M == 6:
            t = c + s * dt_out.shape[2]  # grid-stride: chunk c takes every nchunks-th position
        else:
            t = c * Q + s  # global time index, like blockIdx.x * blockDim.x + threadIdx.x
        if M == 1:
            in_seq = t < L - c * Q  # global t against the chunk-local bound
        else:
            in_seq = t < L
        d = ct.gather(dt, (bi, t, hi), mask=in_seq, padding_value=0.0)  # guarded read, 0 past the end
        if M == 4:
            d = ct.log(1.0 + ct.exp(d))  # softplus on dt, which is already the step size
        if M == 3:
            ct.scatter(dA_cumsum, (bi, hi, c, s), acc)  # stored before this position's term is added
            acc = acc + d * a
        else:
            acc = acc + d * a
            if M == 8:
                ct.scatter(dA_cumsum, (bi, c, hi, s), acc)  # dt's (b, l, h)-like order
            else:
                ct.scatter(dA_cumsum, (bi, hi, c, s), acc)
        if M == 8:
            ct.scatter(dt_out, (bi, c, hi, s), d)
        else:
            ct.scatter(dt_out, (bi, hi, c, s), d)


# ------------------------------------------------------------------------------------------------------------
# ex05: chunk state, flat thread ids for the loads, split-K over the two halves of the chunk
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
    L = x.shape[1]
    P = x.shape[3]
    N = B.shape[3]
    if M == 6:
        g = hi % B.shape[2]  # heads dealt round-robin over the groups
    else:
        g = hi // HEADS_PER_GROUP  # consecutive heads share a group

    # one "thread" per element of the (Q, TP) x tile: flat id e -> row k, column p (row-major)
    e = ct.arange(Q * TP, dtype=ct.int32)
    if M == 7:
        kx = e % Q  # column-major decode, then reshaped row-major
        px = e // Q
    else:
        kx = e // TP
        px = e % TP
    tx = c * Q + kx
    x_c = ct.gather(x, (bi, tx, hi, px), mask=(tx < L) & (px < P), padding_value=0).reshape((Q, TP))

    f = ct.arange(Q * TN, dtype=ct.int32)
    if M == 1:
        kb = f // TP  # x's row stride reused for B
        nb = f % TP
    else:
        kb = f // TN
        nb = f % TN
    tb = c * Q + kb
    if M == 8:
        in_b = (tb < L) & (nb < P)  # B's columns guarded by x's width p
    else:
        in_b = (tb < L) & (nb < N)
    B_c = ct.gather(B, (bi, tb, g, nb), mask=in_b, padding_value=0).reshape((Q, TN))

    dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    dA_cs = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    dA_last = ct.extract(dA_cs, (Q - 1,), shape=(1,))

    HALF = Q // 2
    if M == 5:
        acc = ct.zeros((TN, TP), dtype=ct.float32)
    else:
        acc = ct.zeros((TP, TN), dtype=ct.float32)
    for hf in range(2):  # split-K: two "warps", each over half of the chunk, partial products summed in acc
        dts = ct.extract(dt_c, (hf,), shape=(HALF,))
        dAs = ct.extract(dA_cs, (hf,), shape=(HALF,))
        if M == 3:
            dA_end = ct.extract(dAs, (HALF - 1,), shape=(1,))
            w = ct.exp(dA_end - dAs) * dts  # decay to the end of this half, not of the chunk
        elif M == 4:
            w = ct.exp(dA_last - dAs)  # dt factor left out
        else:
            w = ct.exp(dA_last - dAs) * dts
        xs = ct.extract(x_c, (hf, 0), shape=(HALF, TP))
        bs = ct.extract(B_c, (hf, 0), shape=(HALF, TN))
        xw = (xs.astype(ct.float32) * w[:, None]).astype(x.dtype)
        if M == 2:
            acc = ct.mma(ct.transpose(xw), bs, ct.zeros((TP, TN), dtype=ct.float32))  # fresh acc each half
        elif M == 5:
            acc = ct.mma(ct.transpose(bs), xw, acc)  # B^T (x w): the (TN, TP) transpose of the state
        else:
            acc = ct.mma(ct.transpose(xw), bs, acc)

    ct.store(states, (bi, c, hi, 0, 0), acc.reshape((1, 1, 1, TP, TN)))


# ------------------------------------------------------------------------------------------------------------
# ex06: state passing, one "thread" per row of the state, the chunks walked inside
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
    if M == 5:
        hi, bi = ct.bid(0), ct.bid(1)  # blockIdx.x taken as the head
    else:
        bi, hi = ct.bid(0), ct.bid(1)
    if M == 4:
        NC = dA_cumsum.shape[1]  # axis 1 of (b, h, nchunks, Q) is h
    else:
        NC = states.shape[1]
    P = states.shape[3]
    N = states.shape[4]
    j = ct.arange(TN, dtype=ct.int32)  # the columns, one lane each
    in_n = j < N

    if M == 1:
        row = ct.zeros((TN,), dtype=ct.float32)  # cleared once, before the row loop
    for i in range(P):  # one "thread" per row of the (p, n) state
        if M != 1:
            row = ct.zeros((TN,), dtype=ct.float32)  # this thread's registers, cleared
        if M != 6:
            row = row + ct.gather(initial_states, (bi, hi, i, j), mask=in_n, padding_value=0.0)
        for c in range(NC):
            if M != 2:
                ct.scatter(chunk_init_states, (bi, c, hi, i, j), row, mask=in_n)  # the state ENTERING c
            if M == 3:
                a_last = ct.gather(dA_cumsum, (bi, hi, 0, c * Q + Q - 1))  # flat offset along the last axis
            else:
                a_last = ct.gather(dA_cumsum, (bi, hi, c, Q - 1))
            if M == 7:
                local = ct.gather(states, (bi, c, hi, j, i), mask=in_n, padding_value=0.0)  # column i
            else:
                local = ct.gather(states, (bi, c, hi, i, j), mask=in_n, padding_value=0.0)
            if M == 8:
                row = a_last * row + local  # the log-decay used as the decay
            else:
                row = ct.exp(a_last) * row + local
            if M == 2:
                ct.scatter(chunk_init_states, (bi, c, hi, i, j), row, mask=in_n)  # written after the update
        ct.scatter(final_states, (bi, hi, i, j), row, mask=in_n)


# ------------------------------------------------------------------------------------------------------------
# ex07: chunk scan, explicit positions, the earlier positions and each thread's own term added separately
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
    L = x.shape[1]
    P = x.shape[3]
    N = C.shape[3]
    s = ct.arange(Q, dtype=ct.int32)  # "threadIdx.x": one position of the chunk per thread
    t = c * Q + s  # global positions
    pc = ct.arange(TP, dtype=ct.int32)
    nc = ct.arange(TN, dtype=ct.int32)
    in_x = (t[:, None] < L) & (pc[None, :] < P)
    in_cb = (t[:, None] < L) & (nc[None, :] < N)

    x_c = ct.gather(x, (bi, t[:, None], hi, pc[None, :]), mask=in_x, padding_value=0)
    C_c = ct.gather(C, (bi, t[:, None], g, nc[None, :]), mask=in_cb, padding_value=0)
    B_c = ct.gather(B, (bi, t[:, None], g, nc[None, :]), mask=in_cb, padding_value=0)
    state = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
    state = state.reshape((TP, TN))
    dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    dA_cs = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))

    # the earlier positions k < s of the chunk (row s, column k)
    CB = ct.mma(C_c, ct.transpose(B_c), ct.zeros((Q, Q), dtype=ct.float32))
    if M == 1:
        earlier = s[None, :] <= s[:, None]  # the diagonal included, and the own term below added too
    elif M == 8:
        earlier = s[None, :] < t[:, None]  # in-chunk k compared with the global position c*Q + s
    else:
        earlier = s[None, :] < s[:, None]
    decay = ct.exp(ct.minimum(dA_cs[:, None] - dA_cs[None, :], 0.0))
    if M == 3:
        Pm = ct.where(earlier, CB * decay * dt_c[:, None], 0.0)  # dt of the row s
    elif M == 7:
        Pm = ct.where(earlier, CB * ct.exp(decay) * dt_c[None, :], 0.0)  # the decay exponentiated again
    else:
        Pm = ct.where(earlier, CB * decay * dt_c[None, :], 0.0)
    if M == 5:
        y_c = ct.mma(ct.transpose(Pm).astype(x.dtype), x_c, ct.zeros((Q, TP), dtype=ct.float32))
    else:
        y_c = ct.mma(Pm.astype(x.dtype), x_c, ct.zeros((Q, TP), dtype=ct.float32))

    # each thread's own position k == s: decay 1, (C_s . B_s) dt_s x_s
    if M == 2:
        own = ct.sum(CB, axis=1) * dt_c  # row sum of C B^T: C_s . (sum over every k of B_k)
    else:
        own = ct.sum(C_c.astype(ct.float32) * B_c.astype(ct.float32), axis=1) * dt_c
    if M != 6:
        y_c = y_c + own[:, None] * x_c.astype(ct.float32)

    # the state entering the chunk, read out by C_s and decayed from the chunk start to s
    past = ct.mma(C_c, ct.transpose(state.astype(C.dtype)), ct.zeros((Q, TP), dtype=ct.float32))
    if M == 4:
        dA_last = ct.extract(dA_cs, (Q - 1,), shape=(1,))
        y_c = y_c + past * ct.exp(dA_last - dA_cs)[:, None]  # decay from s to the chunk end
    else:
        y_c = y_c + past * ct.exp(dA_cs)[:, None]

    ct.scatter(y, (bi, t[:, None], hi, pc[None, :]), y_c.astype(y.dtype), mask=in_x)


# ------------------------------------------------------------------------------------------------------------
# ex08: state passing backward, the inner product for ddA_last reduced by hand, one column per "thread"
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

    if M == 4:
        ncols = TP  # the row count used as the column loop's bound
    else:
        ncols = TN
    if M == 1:
        dot = ct.zeros((), dtype=ct.float32)  # cleared once, before the chunk loop
    nchunks = dS_out.shape[1]
    for i in range(nchunks):
        if M == 2:
            c = i  # the chunks in memory order
        else:
            c = nchunks - 1 - i  # backwards: the last chunk first
        ct.store(dstates, (bi, c, hi, 0, 0), dS.reshape((1, 1, 1, TP, TN)))
        if M == 5:
            a = ct.load(dA_cumsum, (bi, hi, i, Q - 1), shape=())  # the loop counter i, not the chunk c
        else:
            a = ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=())
        g = ct.exp(a)
        S = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        S = S.reshape((TP, TN))
        own = ct.load(dS_out, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        own = own.reshape((TP, TN))

        if M == 7:
            dS = g * dS + own  # updated before the inner product below
        prod = dS * S
        if M != 1:
            dot = ct.zeros((), dtype=ct.float32)  # the reduction's register, cleared for this chunk
        for jj in range(ncols):  # one "thread" per column: its partial sum, then added up
            part = ct.sum(ct.extract(prod, (0, jj), shape=(TP, 1)))
            if M == 3:
                dot = part  # '=' for '+=': only the last column's partial survives
            else:
                dot = dot + part
        ct.scatter(ddA_last, (bi, hi, c), g * dot)

        if M == 6:
            dS = g * dS  # the chunk's own dS_out never added
        elif M == 8:
            dS = dS + g * own  # the decay on the chunk's own gradient instead of the carried one
        elif M != 7:
            dS = g * dS + own

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
        1: ("guard with the wrong bound: masks the read with t < l - c*Q, the chunk-local remaining length, "
            "against the global position t = c*Q + s, instead of t < l: from chunk 1 on, real positions "
            "read as dt = 0"),
        2: ("loop over the wrong dimension: the element loop runs range(dt_out.shape[2]) (nchunks, axis 2) "
            "instead of range(Q) (axis 3), so the positions from nchunks on are never written"),
        3: ("off by one (exclusive scan): scatters the running sum into dA_cumsum before adding the current "
            "position's dt*A, so dA_cumsum[s] = sum over s' < s instead of s' <= s"),
        4: ("extra nonlinearity: applies softplus, log(1 + exp(dt)), to the loaded dt, which is already the "
            "step size (and turns the zero padding into log 2)"),
        5: ("block index order: decodes bi, hi, c = bid(0), bid(1), bid(2), as if the grid were (b, h, "
            "nchunks) like the outputs, instead of bi, c, hi for the grid (b, nchunks, h)"),
        6: ("flat offset with the wrong stride: grid-stride indexing t = c + s*nchunks (chunk c takes every "
            "nchunks-th position) instead of the contiguous t = c*Q + s"),
        7: ("accumulator initialised with a term: the running sum starts at dt[c*Q]*A instead of 0 and the "
            "loop adds position 0 again, so every dA_cumsum of the chunk is off by the first term"),
        8: ("output index order: scatters dt_out and dA_cumsum at (bi, c, hi, s), the (b, l, h) order of dt, "
            "instead of (bi, hi, c, s) for the (b, h, nchunks, Q) outputs"),
    },
    "ex05": {
        1: ("flat offset with the wrong stride: decodes B's flat thread id with x's width, k = f // TP, "
            "n = f % TP, instead of f // TN, f % TN (B's rows and columns scrambled when TP != TN)"),
        2: ("split-K partials combined wrongly: each half's mma gets a fresh zero accumulator, "
            "acc = mma(..., zeros), so the first half's partial state is overwritten instead of summed"),
        3: ("wrong decay index: each half weights x by exp(dA_cs[end of the half] - dA_cs[k]) * dt, the "
            "decay to the end of its own half, instead of to the end of the chunk (dA_cs[Q-1])"),
        4: "term left out: w = exp(dA_cs[Q-1] - dA_cs[k]) without the dt_k factor",
        5: ("operand transposed: accumulates B^T (x w), the (TN, TP) transpose of the state, and reshapes it "
            "to (TP, TN) for the store instead of computing (x w)^T B"),
        6: ("group index decoded in the wrong order: g = hi % ngroups (heads dealt round-robin) instead of "
            "hi // HEADS_PER_GROUP (consecutive heads share a group)"),
        7: ("flat index decoded column-major: x's thread id e -> k = e % Q, p = e // Q, but the gathered "
            "values are reshaped row-major to (Q, TP), so x is scrambled instead of k = e // TP, p = e % TP"),
        8: ("guard with the wrong bound: masks B's columns with n < p (x's width) instead of n < N, so when "
            "p < n the columns p..n-1 of B read as 0"),
    },
    "ex06": {
        1: ("accumulator not reset: the row register is cleared once before the row loop, so row i starts "
            "from row i-1's final state plus its own initial_states row instead of from initial_states only"),
        2: ("store order: scatters chunk_init_states[c] after the update, the state LEAVING chunk c, instead "
            "of before it (the state entering chunk c; chunk 0 never gets initial_states)"),
        3: ("flat offset with the wrong stride: reads the decay at dA_cumsum[bi, hi, 0, c*Q + Q-1], as if "
            "(nchunks, Q) were one flattened axis, instead of [bi, hi, c, Q-1] (from chunk 1 on the index "
            "runs past the row and reads 0: no decay)"),
        4: ("loop over the wrong dimension: the chunk loop runs range(dA_cumsum.shape[1]), the number of "
            "heads, instead of the number of chunks states.shape[1]"),
        5: ("block index order: hi, bi = bid(0), bid(1) (blockIdx.x taken as the head) instead of bi, hi = "
            "bid(0), bid(1) for the grid (b, h)"),
        6: ("term left out: each row starts from zero and never adds initial_states, instead of starting "
            "from initial_states[bi, hi, i, :]"),
        7: ("operand transposed: reads the chunk's local state at (bi, c, hi, j, i), column i of states[c], "
            "as row i instead of (bi, c, hi, i, j)"),
        8: ("nonlinearity left out: multiplies the carried row by dA_cumsum[c, Q-1] itself instead of by "
            "exp(dA_cumsum[c, Q-1])"),
    },
    "ex07": {
        1: ("mask off by one, partials double counted: the earlier-positions mask is k <= s instead of "
            "k < s, while the own term (k == s) is still added separately, so the diagonal counts twice"),
        2: ("reduction over the wrong set: the own term uses sum over all k of (C B^T)[s, k], the row sum "
            "C_s . sum_k B_k, instead of the diagonal C_s . B_s"),
        3: ("scaling on the wrong axis: the earlier-positions matrix is scaled by dt_c[:, None] (dt_s, the "
            "row) instead of dt_c[None, :] (dt_k, the column)"),
        4: ("wrong decay index: the past term is decayed by exp(dA_cs[Q-1] - dA_cs[s]) (from s to the chunk "
            "end, as in the chunk state) instead of exp(dA_cs[s]) (from the chunk start to s)"),
        5: ("operand transposed: y = P^T x instead of P x (P[s, k] with row s the output position)"),
        6: "term left out: each position's own term (C_s . B_s) dt_s x_s (k == s) is never added",
        7: ("extra nonlinearity: P = CB * exp(decay) * dt with decay already exp(dA_cs[s] - dA_cs[k]), i.e. "
            "the decay exponentiated twice"),
        8: ("mask with the wrong bound: compares the in-chunk index k with the global position c*Q + s, so "
            "from chunk 1 on every k of the chunk (also k > s) counts as earlier"),
    },
    "ex08": {
        1: ("accumulator not reset: the reduction register for <dS, S_c> is cleared once before the chunk "
            "loop, so ddA_last[c] also holds the inner products of the chunks handled before it"),
        2: ("walks in memory order: c = i, the chunks forwards, instead of c = nchunks-1-i (the gradient "
            "flows from the last chunk to the first)"),
        3: ("partials combined wrongly: dot = part ('=' for '+='), so only the last column's partial sum "
            "reaches ddA_last instead of the sum over all columns"),
        4: ("loop over the wrong dimension: the column loop of the reduction runs range(TP) instead of "
            "range(TN), so when TP < TN the columns TP..n-1 are left out of <dS, S_c>"),
        5: ("wrong chunk index: loads the decay at dA_cumsum[bi, hi, i, Q-1] with the loop counter i "
            "instead of the chunk c = nchunks-1-i"),
        6: "term left out: dS = g*dS without adding the chunk's own dS_out[c]",
        7: ("wrong state in the chain rule: computes ddA_last from dS after the update dS = g*dS + "
            "dS_out[c] (the gradient entering chunk c) instead of the dS leaving it"),
        8: ("scaling on the wrong term: dS = dS + g*dS_out[c] instead of g*dS + dS_out[c] (the decay belongs "
            "to the carried gradient)"),
    },
}

#: no slip needs an alternative code path
SANITY: dict[str, list[int]] = {}

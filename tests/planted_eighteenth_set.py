"""The eighteenth set of planted mistakes for the cuTile exercises 4-8 (docs/instructors.md): 40 slips written
from the exercises' contracts without reading the diagnosis code, as the attempts of learners working from the
OPEN tier, who read only the contract and write each kernel their own way: loops over sub-tiles of a chunk,
a whole chunk loaded once and sliced with ``ct.extract``, causal masks and decay matrices they build
themselves, ``ct.mma`` accumulated over key sub-tiles, chunks walked with their own index arithmetic. The
slips are the ones such structures invite (a loop bound or mask off by one, an extract at the wrong offset,
an accumulator reset in the wrong place, a decay built the wrong way round, a term left out, an extra
nonlinearity), measured on the checks before any fix and kept here as tested mistakes.

Each kernel is right for M = 0 and plants mistake M for M = 1..8; M above 10 (``SANITY``) would run a
mistake's alternative code path with the slip corrected, and must pass (none is needed here).
"""

from __future__ import annotations

import cuda.tile as ct

ZERO = ct.PaddingMode.ZERO
NEG_INF = float("-inf")


# ------------------------------------------------------------------------------------------------------------
# ex04: chunk cumsum -- the chunk loaded once, scanned in sub-tiles of 4 with a triangular mask and a carry
# ------------------------------------------------------------------------------------------------------------
@ct.kernel
def chunk_cumsum_kernel(dt, A, dt_out, dA_cumsum, Q: ct.Constant[int], M: ct.Constant[int]):
    bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)
    NSUB = Q // 4  # sub-tiles of 4 positions per chunk

    dt_c = ct.load(dt, (bi, c, hi), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,))
    if M == 8:
        a = -ct.exp(ct.load(A, (hi,), shape=()))  # treats A as Mamba's A_log: A = -exp(A_log)
    else:
        a = ct.load(A, (hi,), shape=())

    pos = ct.arange(4, dtype=ct.int32)
    if M == 1:
        tri = pos[None, :] < pos[:, None]  # strict: s' < s, the position's own term dropped
    else:
        tri = pos[None, :] <= pos[:, None]  # tri[s, s'] = s' <= s

    if M == 7:
        nsub = NSUB - 1  # one sub-tile too few
    else:
        nsub = NSUB
    carry = ct.zeros((1,), dtype=ct.float32)  # the sum of dt*A over the sub-tiles before this one
    for j in range(nsub):
        dt_j = ct.extract(dt_c, (j,), shape=(4,))
        dA_j = dt_j * a
        if M == 2:
            terms = ct.where(tri, dA_j[:, None], 0.0)  # dA along the rows: tri[s, s'] * dA[s]
        else:
            terms = ct.where(tri, dA_j[None, :], 0.0)  # tri[s, s'] * dA[s']
        if M == 6:
            part = ct.sum(terms, axis=0)  # sums over s (the rows) instead of s'
        else:
            part = ct.sum(terms, axis=1)
        if M == 5:
            cs_j = part  # the carry from the earlier sub-tiles never added
        else:
            cs_j = part + carry
        if M == 3:
            k = c * NSUB + j  # the chunk's sub-tile offset added to an index that is already per chunk
        else:
            k = j
        ct.store(dt_out, (bi, hi, c, k), dt_j.reshape((1, 1, 1, 4)))
        ct.store(dA_cumsum, (bi, hi, c, k), cs_j.reshape((1, 1, 1, 4)))
        if M == 4:
            carry = ct.extract(cs_j, (0,), shape=(1,))  # the sub-tile's first running sum, not its last
        else:
            carry = ct.extract(cs_j, (3,), shape=(1,))


# ------------------------------------------------------------------------------------------------------------
# ex05: chunk state -- the chunk in two halves, one ct.mma per half into a float32 accumulator
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
    H = Q // 2  # half a chunk

    x_all = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((Q, TP))
    B_all = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    dt_all = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    a_all = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    a_end = ct.extract(a_all, (Q - 1,), shape=(1,))  # the running sum at the chunk's last position

    if M == 2:
        nhalf = 1  # loop bound off by one: the second half never accumulated
    else:
        nhalf = 2
    acc = ct.zeros((TP, TN), dtype=ct.float32)
    for j in range(nhalf):
        if M == 5:
            acc = ct.zeros((TP, TN), dtype=ct.float32)  # accumulator reset for every half
        x_j = ct.extract(x_all, (j, 0), shape=(H, TP))
        B_j = ct.extract(B_all, (j, 0), shape=(H, TN))
        dt_j = ct.extract(dt_all, (j,), shape=(H,))
        a_j = ct.extract(a_all, (j,), shape=(H,))
        if M == 7:
            dt_j = ct.log(1.0 + ct.exp(dt_j))  # softplus applied again to the already processed dt
        if M == 1:
            w = ct.exp(a_j - a_end) * dt_j  # exponent the wrong way round: a_k - a_end
        elif M == 4:
            w = ct.exp(ct.extract(a_j, (H - 1,), shape=(1,)) - a_j) * dt_j  # decay to the end of the half
        elif M == 6:
            w = ct.exp(a_end - a_j)  # dt factor left out
        else:
            w = ct.exp(a_end - a_j) * dt_j  # (H,): decay from k to the chunk end, times dt_k
        if M == 3:
            xT = ct.transpose(x_j).astype(ct.float32) * w[:, None]  # w along the rows (p) of the (TP, H) tile
        else:
            xT = ct.transpose(x_j).astype(ct.float32) * w[None, :]  # (TP, H): column k scaled by w_k
        if M == 8:
            Bw = (B_j.astype(ct.float32) * w[:, None]).astype(B.dtype)  # the weight applied to B as well
            acc = ct.mma(xT.astype(x.dtype), Bw, acc)
        else:
            acc = ct.mma(xT.astype(x.dtype), B_j, acc)

    ct.store(states, (bi, c, hi, 0, 0), acc.reshape((1, 1, 1, TP, TN)))


# ------------------------------------------------------------------------------------------------------------
# ex06: state passing -- chunk 0's entering state stored first, then S_c built from chunk c - 1
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
    nch = states.shape[1]

    state = ct.load(initial_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO).reshape((TP, TN))
    ct.store(chunk_init_states, (bi, 0, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))

    if M == 3:
        stop = nch - 1  # one chunk too few
    else:
        stop = nch
    for c in range(1, stop):
        if M == 1:
            a_row = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))  # chunk c, not c-1
        else:
            a_row = ct.load(dA_cumsum, (bi, hi, c - 1, 0), shape=(1, 1, 1, Q)).reshape((Q,))
        if M == 5:
            g = ct.exp(ct.sum(a_row, axis=0, keepdims=True))  # sums all Q running sums
        elif M == 6:
            g = ct.exp(ct.extract(a_row, (Q - 1,), shape=(1,)) - ct.extract(a_row, (0,), shape=(1,)))
        elif M == 8:
            dec = ct.exp(a_row)  # decays of every position ...
            g = ct.exp(ct.extract(dec, (Q - 1,), shape=(1,)))  # ... exponentiated a second time
        else:
            g = ct.exp(ct.extract(a_row, (Q - 1,), shape=(1,)))  # (1,): the decay across chunk c-1
        if M == 2:
            s_prev = ct.load(states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        else:
            s_prev = ct.load(states, (bi, c - 1, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        if M == 7:
            state = g * s_prev.reshape((TP, TN)) + state  # decays the chunk's own state, not the carried one
        else:
            state = g * state + s_prev.reshape((TP, TN))
        ct.store(chunk_init_states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))

    # the state leaving the last chunk
    if M != 4:
        a_row = ct.load(dA_cumsum, (bi, hi, nch - 1, 0), shape=(1, 1, 1, Q)).reshape((Q,))
        if M == 5:
            g = ct.exp(ct.sum(a_row, axis=0, keepdims=True))
        elif M == 6:
            g = ct.exp(ct.extract(a_row, (Q - 1,), shape=(1,)) - ct.extract(a_row, (0,), shape=(1,)))
        elif M == 8:
            dec = ct.exp(a_row)
            g = ct.exp(ct.extract(dec, (Q - 1,), shape=(1,)))
        else:
            g = ct.exp(ct.extract(a_row, (Q - 1,), shape=(1,)))
        s_last = ct.load(states, (bi, nch - 1, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        if M == 7:
            state = g * s_last.reshape((TP, TN)) + state
        else:
            state = g * state + s_last.reshape((TP, TN))
    ct.store(final_states, (bi, hi, 0, 0), state.reshape((1, 1, TP, TN)))


# ------------------------------------------------------------------------------------------------------------
# ex07: chunk scan -- the past term, then ct.mma over key sub-tiles of 4 with an explicit masked decay matrix
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
    NSUB = Q // 4  # key sub-tiles of 4 positions

    x_c = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((Q, TP))
    C_c = ct.load(C, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    S0 = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
    S0 = S0.reshape((TP, TN))
    dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    if M == 8:
        a_c = ct.exp(ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,)))  # exp at the load
    else:
        a_c = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))

    s_pos = ct.arange(Q, dtype=ct.int32)
    intra = ct.zeros((Q, TP), dtype=ct.float32)
    for j in range(NSUB):
        if M == 6:
            intra = ct.zeros((Q, TP), dtype=ct.float32)  # accumulator reset for every key sub-tile
        x_j = ct.extract(x_c, (j, 0), shape=(4, TP))
        B_j = ct.extract(B_c, (j, 0), shape=(4, TN))
        dt_j = ct.extract(dt_c, (j,), shape=(4,))
        if M == 5:
            a_j = ct.extract(a_c, (0,), shape=(4,))  # always the first key sub-tile's running sums
        else:
            a_j = ct.extract(a_c, (j,), shape=(4,))
        if M == 3:
            k_pos = ct.arange(4, dtype=ct.int32)  # the sub-tile's own positions, without its offset j*4
        else:
            k_pos = j * 4 + ct.arange(4, dtype=ct.int32)
        if M == 2:
            causal = k_pos[None, :] < s_pos[:, None]  # strict: k < s
        else:
            causal = k_pos[None, :] <= s_pos[:, None]  # (Q, 4): k <= s
        if M == 1:
            seg = ct.where(causal, a_j[None, :] - a_c[:, None], NEG_INF)  # a_k - a_s
        else:
            seg = ct.where(causal, a_c[:, None] - a_j[None, :], NEG_INF)  # a_s - a_k, -inf above
        L = ct.exp(seg)  # (Q, 4) decay matrix, 0 where k > s
        CB = ct.mma(C_c, ct.transpose(B_j), ct.zeros((Q, 4), dtype=ct.float32))  # (Q, 4): C_s . B_k
        if M == 4:
            P = CB * L * dt_c[:, None]  # dt of the output row s
        else:
            P = CB * L * dt_j[None, :]  # dt of the key k
        intra = ct.mma(P.astype(x.dtype), x_j, intra)

    past = ct.mma(C_c, ct.transpose(S0.astype(C.dtype)), ct.zeros((Q, TP), dtype=ct.float32))  # (Q, TP)
    if M == 7:
        y_c = intra + past  # the decay e^{a_s} of the entering state left out
    else:
        y_c = intra + past * ct.exp(a_c)[:, None]

    ct.store(y, (bi, c, hi, 0), y_c.astype(y.dtype).reshape((1, Q, 1, TP)))


# ------------------------------------------------------------------------------------------------------------
# ex08: state passing backward -- chunks walked from the last with c = nch - 1 - i, <dS, S_c> accumulated
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
    nch = dS_out.shape[1]
    dS = ct.load(dfinal_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO).reshape((TP, TN))

    if M == 2:
        steps = nch - 1  # one chunk too few: chunk 0 never processed
    else:
        steps = nch
    if M == 5:
        tot = ct.zeros((1, 1), dtype=ct.float32)  # created once: the sum runs on over all later chunks
    for i in range(steps):
        c = nch - 1 - i
        a_row = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
        if M == 4:
            gd = ct.exp(ct.extract(a_row, (0,), shape=(1,)))  # the first running sum, not the last
        else:
            gd = ct.exp(ct.extract(a_row, (Q - 1,), shape=(1,)))  # (1,): the decay across chunk c
        if M == 3:
            ct.store(dstates, (bi, c, hi, 0, 0), (gd * dS).reshape((1, 1, 1, TP, TN)))  # scaled by g
        else:
            ct.store(dstates, (bi, c, hi, 0, 0), dS.reshape((1, 1, 1, TP, TN)))
        if M == 8:
            S_c = ct.load(chunk_init_states, (bi, i, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        else:
            S_c = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        if M != 5:
            tot = ct.zeros((1, 1), dtype=ct.float32)
        tot = tot + ct.sum(dS * S_c.reshape((TP, TN)), axis=(0, 1), keepdims=True)  # <dS, S_c>
        if M == 7:
            dda = ct.exp(gd) * tot  # exp applied to g = exp(a) again
        else:
            dda = gd * tot  # d a_c = g_c <dS, S_c>
        ct.store(ddA_last, (bi, hi, c), dda.reshape((1, 1, 1)))
        own = ct.load(dS_out, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO).reshape((TP, TN))
        if M == 1:
            dS = gd * own + dS  # the chunk's own gradient decayed, the carried one not
        elif M == 6:
            dS = gd * dS  # dS_out[c] never added
        else:
            dS = gd * dS + own  # the gradient of S_c

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
        1: ("mask off by one: the sub-tile's triangular mask is strict, pos[None, :] < pos[:, None] "
            "(s' < s), so each running sum leaves out the position's own dt*A (an exclusive scan)"),
        2: ("operand transposed: ct.where(tri, dA_j[:, None], 0.0) broadcasts dA along the rows, so the row "
            "sum is (s+1)*dA[s] instead of the sum of dA[s'] over s' <= s (dA_j[None, :])"),
        3: ("wrong chunk index: stores the sub-tile at (bi, hi, c, c*NSUB + j), adding the chunk's sub-tile "
            "offset to an index that is already within the chunk; for c >= 1 the stores fall past the end "
            "and are dropped, so those chunks' outputs are never written"),
        4: ("extract at the wrong offset: the carry to the next sub-tile is ct.extract(cs_j, (0,), ...), the "
            "sub-tile's first running sum, instead of its last, ct.extract(cs_j, (3,), ...)"),
        5: ("term left out: each sub-tile's running sum is its own masked row sum without + carry, so the "
            "scan restarts at every sub-tile of 4 positions instead of running over the whole chunk"),
        6: ("reduction over the wrong set: ct.sum(terms, axis=0) sums the masked tile over the rows s "
            "(giving (4 - s') * dA[s']) instead of over the columns s' (axis=1)"),
        7: ("loop bound off by one: for j in range(NSUB - 1), so the chunk's last sub-tile of 4 positions is "
            "never scanned or stored (both outputs keep the check's fill value there)"),
        8: ("extra nonlinearity: A = -exp(A[hi]), treating A as Mamba's A_log, instead of using A[hi] as "
            "given (already the negative decay rate)"),
    },
    "ex05": {
        1: ("operands swapped in the decay: w = exp(a_k - a_end) * dt (the exponent the wrong way round, "
            "growing and overflowing on strong decay) instead of exp(a_end - a_k) * dt"),
        2: ("loop bound off by one: for j in range(1) over the two halves of the chunk, so the second half's "
            "positions never reach the state"),
        3: ("scaling on the wrong axis (intended type error): the transposed (TP, H) x tile is scaled by "
            "w[:, None], along p, instead of w[None, :], along the chunk positions k: a broadcast error "
            "unless TP == H = Q/2, and then row p scaled by w_p"),
        4: ("wrong decay index: the decay runs to the end of the half, exp(a_j[H-1] - a_j), instead of to "
            "the chunk's last position a[Q-1] (extract from the half, not from the whole row)"),
        5: ("accumulator reset inside the loop: acc = ct.zeros(...) at the start of each half, so the state "
            "sums only the second half's positions instead of the whole chunk"),
        6: "term left out: w = exp(a_end - a_k) without the dt_k factor",
        7: ("extra nonlinearity: applies softplus, log(1 + exp(dt)), to dt_out, which is already the "
            "processed (positive) step size"),
        8: ("weight applied twice: scales both the x operand and the B operand by w, so each position "
            "counts with w_k^2 instead of w_k"),
    },
    "ex06": {
        1: ("wrong chunk index: building S_c (c >= 1) takes the decay from dA_cumsum[bi, hi, c] (the chunk "
            "being entered) instead of chunk c - 1, the chunk the state has just crossed"),
        2: ("wrong chunk index: building S_c (c >= 1) adds states[bi, c] (the entered chunk's own local "
            "state) instead of states[bi, c - 1]"),
        3: ("loop bound off by one: for c in range(1, nchunks - 1), so the last chunk's entering state is "
            "never stored (and final_states is built from S_{n-2})"),
        4: ("term left out: final_states = the state ENTERING the last chunk; the last step, g * S + "
            "states[last], is never applied"),
        5: ("reduction over the wrong set: the decay is exp(sum of all Q running sums of the chunk) "
            "instead of exp of the last one, a[Q-1]"),
        6: ("wrong decay index: the decay across a chunk is exp(a[Q-1] - a[0]), leaving out the first "
            "position's dt*A (a is already a running sum from the chunk start)"),
        7: ("operands swapped: state = g * states[c-1] + state, decaying the chunk's local state instead "
            "of the carried one (g * S + states[c-1])"),
        8: ("extra nonlinearity: exponentiates the whole dA_cumsum row (the decays) and then takes exp "
            "again of its last element, g = exp(exp(a[Q-1])) instead of exp(a[Q-1])"),
    },
    "ex07": {
        1: ("decay matrix transposed: ct.where(causal, a_k - a_s, -inf), exp of a_k - a_s (>= 0, "
            "overflowing on strong decay) instead of a_s - a_k"),
        2: ("mask off by one: causal = k_pos < s_pos (strict), dropping the diagonal k == s, each output's "
            "own input"),
        3: ("mask built on the wrong sub-tile positions: k_pos = ct.arange(4) without the sub-tile offset "
            "j*4, so for j >= 1 the mask lets later keys k > s in and drops earlier ones"),
        4: ("scaling on the wrong axis: P = CB * L * dt_c[:, None], dt of the output row s, instead of "
            "dt_j[None, :], dt of the key k"),
        5: ("extract at the wrong offset: the keys' running sums are ct.extract(a_c, (0,), ...) for every "
            "sub-tile, the first sub-tile's, instead of ct.extract(a_c, (j,), ...)"),
        6: ("accumulator reset inside the loop: intra = ct.zeros(...) at the start of each key sub-tile, "
            "so only the last sub-tile's keys are summed"),
        7: ("term left out: the past term C_s S^T is added without its decay e^{a_s} from the chunk start "
            "to s"),
        8: ("extra nonlinearity: applies exp to dA_cumsum at the load, so the decay matrix is "
            "exp(e^{a_s} - e^{a_k}) and the past is decayed by exp(e^{a_s})"),
    },
    "ex08": {
        1: ("operands swapped: dS = g * dS_out[c] + dS, decaying the chunk's own gradient instead of the "
            "carried one (g * dS + dS_out[c])"),
        2: ("loop bound off by one: for i in range(nchunks - 1), so chunk 0 is never processed (its dstates "
            "and ddA_last are not written, and dinitial_states misses its step)"),
        3: ("scaling: stores dstates[c] = g_c * dS instead of dS; the local state s_c enters S_{c+1} "
            "without the decay"),
        4: ("extract at the wrong offset: g = exp(a[0]), the chunk's first running sum, instead of "
            "exp(a[Q-1]), its last"),
        5: ("reduction over the wrong set: the accumulator for <dS, S_c> is created once before the loop "
            "and never reset, so ddA_last[c] = g_c * (sum over chunks c..n-1 of <dS, S>)"),
        6: "term left out: dS = g * dS without + dS_out[c], the chunk's own gradient",
        7: ("extra nonlinearity: ddA_last = exp(g) * <dS, S_c>, exponentiating g = exp(a) again, instead "
            "of g * <dS, S_c>"),
        8: ("wrong chunk index: loads S from chunk_init_states at the loop counter i (the forward order) "
            "instead of the chunk c = nchunks - 1 - i"),
    },
}

#: no slip needs an alternative code path
SANITY: dict[str, list[int]] = {}

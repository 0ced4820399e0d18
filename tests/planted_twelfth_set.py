"""The twelfth set of planted mistakes for the cuTile exercises 4-8 (docs/instructors.md): 40 slips written
from the exercises' contracts without reading the diagnosis code, covering in every exercise the seven classes
the diagnosis is asked to name, measured on the checks before any fix, and kept here as tested mistakes
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
        # slip: dt read as if it were laid out (b, h, l) like the outputs: index (bi, hi, c), tile (1, 1, Q)
        dt_c = ct.load(dt, (bi, hi, c), shape=(1, 1, Q), padding_mode=ZERO).reshape((Q,))
    elif M == 4:
        # slip: the chunk start given in elements (c*Q) where load wants a tile index (c)
        dt_c = ct.load(dt, (bi, c * Q, hi), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,))
    elif M == 2 or M == 8 or M == 12:
        # no padding_mode: the positions past the end are UNDETERMINED (NaN on the CPU executor)
        dt_c = ct.load(dt, (bi, c, hi), shape=(1, Q, 1)).reshape((Q,))
    else:
        dt_c = ct.load(dt, (bi, c, hi), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,))

    if M == 2:
        # slip: manual end-of-sequence mask off by one: drops the last real token (pos == l-1)
        pos = c * Q + ct.arange(Q, dtype=ct.int32)
        dt_c = ct.where(pos < dt.shape[1] - 1, dt_c, 0.0)
    if M == 12:
        pos = c * Q + ct.arange(Q, dtype=ct.int32)
        dt_c = ct.where(pos < dt.shape[1], dt_c, 0.0)

    if M == 7:
        # slip: softplus applied to dt (as mamba_ssm's dt_softplus does) although dt is already the step size
        dt_c = ct.log(1.0 + ct.exp(dt_c))

    if M == 3:
        # slip: A loaded as a (Q,) tile: position k scaled by A[k] instead of every position by A[hi]
        A_h = ct.load(A, (0,), shape=(Q,), padding_mode=ZERO)
    else:
        A_h = ct.load(A, (hi,), shape=())

    if M == 5:
        # slip: cumsum taken on the (1, Q, 1) tile before the reshape, default axis 0 (size 1): no
        # accumulation
        dt3 = ct.load(dt, (bi, c, hi), shape=(1, Q, 1), padding_mode=ZERO)
        dA_cs = ct.cumsum(dt3 * A_h).reshape((Q,))
    elif M == 15:
        dt3 = ct.load(dt, (bi, c, hi), shape=(1, Q, 1), padding_mode=ZERO)
        dA_cs = ct.cumsum(dt3 * A_h, axis=1).reshape((Q,))
    elif M == 6:
        # slip: A left out of the cumsum: dA_cumsum = cumsum(dt)
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
    if M == 8:
        # slip: heads assigned to groups round-robin (hi mod ngroups) instead of in consecutive runs
        g = hi % B.shape[2]
    else:
        g = hi // HEADS_PER_GROUP

    if M == 2 or M == 12:
        # manual masking of the ragged chunk instead of ZERO padding
        x_c = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP)).reshape((Q, TP))
        pos = ct.arange(Q, dtype=ct.int32)
        n_valid = x.shape[1] - c * Q
        if M == 2:
            # slip: <= keeps one position past the end of the sequence (its x is the NaN padding)
            x_c = ct.where((pos <= n_valid)[:, None], x_c, 0.0)
        else:
            x_c = ct.where((pos < n_valid)[:, None], x_c, 0.0)
    else:
        x_c = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((Q, TP))
    if M == 7:
        # slip: SiLU applied to x (the Mamba block's activation) inside the chunk-state kernel
        xf = x_c.astype(ct.float32)
        x_c = (xf / (1.0 + ct.exp(-xf))).astype(x.dtype)
    B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    dA_cs = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))

    dA_last = ct.extract(dA_cs, (Q - 1,), shape=(1,))
    if M == 4:
        # slip: decay measured from the chunk START to k (chunk-scan's exp(dA_cs[k] - dA_cs[0])) instead of
        # from k to the chunk end
        dA_first = ct.extract(dA_cs, (0,), shape=(1,))
        w = ct.exp(dA_cs - dA_first) * dt_c
    elif M == 5:
        # slip: "sum of dA after k" taken as a reverse cumsum of dA_cs (already cumulative), minus dA_cs[k]
        w = ct.exp(ct.cumsum(dA_cs, axis=0, reverse=True) - dA_cs) * dt_c
    elif M == 6:
        # slip: dt left out of the weight
        w = ct.exp(dA_last - dA_cs)
    else:
        w = ct.exp(dA_last - dA_cs) * dt_c

    if M == 3:
        # slip: w broadcast without [:, None]: lines up with the p axis (shape error unless TP == Q)
        xw = (x_c.astype(ct.float32) * w).astype(x.dtype)
    else:
        xw = (x_c.astype(ct.float32) * w[:, None]).astype(x.dtype)

    if M == 1:
        # slip: mma operands swapped (B^T @ xw = state^T, (TN, TP)), then reshaped, not transposed, to (TP,
        # TN)
        state = ct.mma(ct.transpose(B_c), xw, ct.zeros((TN, TP), dtype=ct.float32))
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
        # slip: initial_states left out: the carried state starts from zeros
        state = ct.zeros((TP, TN), dtype=ct.float32)
    else:
        state = ct.load(initial_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO).reshape(
            (TP, TN)
        )

    nc = states.shape[1]
    if M == 2:
        # slip: loop bound off by one: the last chunk is never visited
        nc = states.shape[1] - 1
    for c in range(nc):
        if M == 1:
            # slip: entering state stored with dA_cumsum's (b, h, nchunks) index order: head and chunk swapped
            ct.store(chunk_init_states, (bi, hi, c, 0, 0), state.reshape((1, 1, 1, TP, TN)))
        elif M != 4:
            ct.store(chunk_init_states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))

        if M == 5:
            # slip: chunk total taken as the SUM of the chunk's dA_cumsum row (already cumulative)
            row = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
            decay = ct.exp(ct.sum(row))
        elif M == 8:
            # slip: the decay read as a (1, 1, 1, 1) tile, not 0-d: the carried state turns (1, 1, TP, TN)
            decay = ct.exp(ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=(1, 1, 1, 1)))
        else:
            decay = ct.exp(ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()))
        local = ct.load(states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO).reshape(
            (TP, TN)
        )

        if M == 3:
            # slip: decay applied to the chunk's own state as well: decay * (state + local)
            state = decay * (state + local)
        elif M == 7:
            # slip: exp applied a second time to the already exponentiated decay
            state = ct.exp(decay) * state + local
        else:
            state = decay * state + local

        if M == 4:
            # slip: store AFTER the update: chunk_init_states[c] gets the state leaving chunk c (entering c+1)
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

    x_c = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((Q, TP))
    C_c = ct.load(C, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    if M == 4:
        # slip: chunk_init_states[c] taken as the state LEAVING chunk c, so chunk c reads slot c-1 (zeros for
        # c=0)
        if c == 0:
            state = ct.zeros((TP, TN), dtype=ct.float32)
        else:
            state = ct.load(
                chunk_init_states, (bi, c - 1, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO
            ).reshape((TP, TN))
    else:
        state = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        state = state.reshape((TP, TN))
    dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    dA_cs = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))

    if M == 1:
        # slip: mma operands in the wrong order: B @ C^T (= (C B^T)^T) instead of C @ B^T
        CB = ct.mma(B_c, ct.transpose(C_c), ct.zeros((Q, Q), dtype=ct.float32))
    else:
        CB = ct.mma(C_c, ct.transpose(B_c), ct.zeros((Q, Q), dtype=ct.float32))
    if M == 7:
        # slip: exp applied to the scores C_s . B_k, attention-style
        CB = ct.exp(CB)
    pos = ct.arange(Q, dtype=ct.int32)
    if M == 2:
        # slip: strict causal mask (k < s): the diagonal k == s is dropped
        causal = pos[:, None] > pos[None, :]
    elif M == 5:
        # slip: mask the wrong way round (k >= s): sums over the FUTURE positions of the chunk
        causal = pos[:, None] <= pos[None, :]
    else:
        causal = pos[:, None] >= pos[None, :]
    if M == 8:
        # slip: decay difference written dA_cs[k] - dA_cs[s] (broadcast axes swapped); the clamp turns it into
        # 1
        decay = ct.exp(ct.minimum(dA_cs[None, :] - dA_cs[:, None], 0.0))
    else:
        decay = ct.exp(ct.minimum(dA_cs[:, None] - dA_cs[None, :], 0.0))
    if M == 3:
        # slip: dt scales the rows (dt_s) instead of the columns (dt_k)
        P = ct.where(causal, CB * decay * dt_c[:, None], 0.0)
    else:
        P = ct.where(causal, CB * decay * dt_c[None, :], 0.0)
    y_c = ct.mma(P.astype(x.dtype), x_c, ct.zeros((Q, TP), dtype=ct.float32))

    past = ct.mma(C_c, ct.transpose(state.astype(C.dtype)), ct.zeros((Q, TP), dtype=ct.float32))
    if M == 6:
        # slip: the past term skipped for the first chunk ("chunk 0 has no past"), ignoring initial_states
        if c > 0:
            y_c = y_c + past * ct.exp(dA_cs)[:, None]
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
    start = 0
    if M == 2:
        start = 1
    for i in range(start, nchunks):
        if M == 2:
            # slip: c = nchunks - i with the loop started at 1: chunks nchunks-1 .. 1, chunk 0 never visited
            c = nchunks - i
        elif M == 8:
            # slip: chunks walked FORWARDS (the forward kernel's loop copied): c = i
            c = i
        else:
            c = nchunks - 1 - i
        ct.store(dstates, (bi, c, hi, 0, 0), dS.reshape((1, 1, 1, TP, TN)))
        if M == 4:
            # slip: chunk decay read at position 0 of the chunk instead of its last position Q-1
            g = ct.exp(ct.load(dA_cumsum, (bi, hi, c, 0), shape=()))
        else:
            g = ct.exp(ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()))
        S = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        S = S.reshape((TP, TN))
        if M == 5:
            # slip: <dS, S> as the sum of ALL entries of dS @ S^T (every p x p pair, not just matching rows)
            inner = ct.sum(ct.mma(dS, ct.transpose(S), ct.zeros((TP, TP), dtype=ct.float32)))
        else:
            inner = ct.sum(dS * S)
        if M == 6:
            # slip: the factor g from d exp(a)/da left out: ddA_last = <dS, S>
            dd = inner
        elif M == 7:
            # slip: sigmoid-gate derivative g * (1 - g) used for the decay instead of exp's derivative g
            dd = g * (1.0 - g) * inner
        else:
            dd = g * inner
        ct.store(ddA_last, (bi, hi, c), dd.reshape((1, 1, 1)))
        if M == 1:
            # slip: dS_out loaded with dA_cumsum's (b, h, nchunks) index order: head and chunk swapped
            own = ct.load(dS_out, (bi, hi, c, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        else:
            own = ct.load(dS_out, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        if M == 3:
            # slip: decay applied to the chunk's own gradient instead of the carried one: dS + g * own
            dS = dS + g * own.reshape((TP, TN))
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
        1: ("operand transposed (load index order): dt loaded as if laid out (b, h, l) like the outputs, "
            "index (bi, hi, c) with a (1, 1, Q) tile, so the tile runs along the head axis of dt"),
        2: ("mask off by one: manual end-of-sequence mask pos < l - 1 (instead of pos < l) on an unpadded "
            "load zeroes dt of the last real token of the sequence"),
        3: ("scaling on the wrong axis: A loaded as a (Q,) tile from index 0, so position k of the chunk "
            "is scaled by A[k] instead of every position by A[hi]"),
        4: ("wrong chunk index: dt tile loaded at element index c*Q along l instead of tile index c, so "
            "chunk c reads chunk c*Q (past the end for c >= 1)"),
        5: ("reduction over the wrong set: ct.cumsum taken on the (1, Q, 1) tile before the reshape with "
            "the default axis 0 (size 1), so nothing is accumulated: dA_cumsum = dt*A per position"),
        6: "term left out: A dropped from the cumsum, dA_cumsum = cumsum(dt)",
        7: ("extra nonlinearity: softplus log(1 + exp(dt)) applied to dt (stored in dt_out and used in the"
            " cumsum) although dt is already the step size"),
        8: ("padding forgotten: dt loaded without padding_mode=ZERO, so positions past the end of the "
            "sequence (ragged last chunk) are NaN in dt_out and dA_cumsum"),
    },
    "ex05": {
        1: ("operand transposed (swapped mma + reshape): state computed as B^T @ (x*w), a (TN, TP) "
            "state^T, then reshaped (not transposed) into the (TP, TN) output"),
        2: ("mask off by one: x loaded without ZERO padding and the ragged chunk masked with pos <= l - "
            "c*Q (instead of <), keeping the first position past the end whose x is the NaN padding"),
        3: ("scaling on the wrong axis (shape error): x * w without [:, None], so the (Q,) weight "
            "broadcasts along the p axis of the (Q, TP) tile (compile error unless TP == Q)"),
        4: ("wrong decay position: weight uses the decay from the chunk START to k, exp(dA_cs[k] - "
            "dA_cs[0]), instead of from k to the chunk end, exp(dA_cs[Q-1] - dA_cs[k])"),
        5: ("reduction over the wrong set: the exponent 'sum of dA after k' computed as a reverse cumsum "
            "of dA_cs (already cumulative) minus dA_cs[k], i.e. sum_{j>k} dA_cs[j] instead of dA_cs[Q-1] -"
            " dA_cs[k]"),
        6: "term left out: dt dropped from the weight, w = exp(dA_cs[Q-1] - dA_cs[k])",
        7: "extra nonlinearity: SiLU x*sigmoid(x) applied to the x tile before weighting",
        8: ("wrong group index: g = hi % ngroups (heads round-robin over groups) instead of hi // "
            "HEADS_PER_GROUP (consecutive heads share a group), so B is read from the wrong group"),
    },
    "ex06": {
        1: ("operand transposed (store index order): chunk_init_states stored at (bi, hi, c, ...) using "
            "dA_cumsum's (b, h, nchunks) order, head and chunk axes swapped"),
        2: ("off by one in the loop bound: range(nchunks - 1), the last chunk is never visited (its "
            "entering state not stored, final_states misses its decay and local state)"),
        3: ("scaling the wrong term: the chunk decay applied to the chunk's own state too: state = decay *"
            " (state + local)"),
        4: ("wrong chunk index (c+1): the store placed after the update, so chunk_init_states[c] holds the"
            " state leaving chunk c (entering c+1) and chunk 0 never gets initial_states"),
        5: ("reduction over the wrong set: the chunk's total decay taken as exp(sum over the chunk's "
            "dA_cumsum row) instead of exp of its last element dA_cumsum[c, Q-1]"),
        6: "term left out: initial_states ignored, the carried state starts from zeros",
        7: ("extra nonlinearity: exp applied twice, state = exp(decay) * state + local with decay already "
            "exp(dA_cumsum[c, Q-1])"),
        8: ("shape error (intended compile failure): the decay loaded as a (1, 1, 1, 1) tile instead of "
            "0-d (shape=()), so decay * state broadcasts to (1, 1, TP, TN) and the loop-carried state "
            "changes shape"),
    },
    "ex07": {
        1: ("operand transposed (mma operand order): CB = B @ C^T, the transpose of C @ B^T, so P[s, k] "
            "uses C_k . B_s"),
        2: ("mask off by one: strict causal mask pos[:, None] > pos[None, :], the diagonal k == s is "
            "dropped"),
        3: ("scaling on the wrong axis: dt broadcast as dt_c[:, None], scaling the rows (dt_s) instead of "
            "the columns (dt_k) of P"),
        4: ("wrong chunk index (neighbour c-1): chunk_init_states[c] taken as the state leaving chunk c, "
            "so chunk c reads slot c-1 and chunk 0 uses a zero state"),
        5: ("reduction over the wrong set: causal mask written pos[:, None] <= pos[None, :], so y_s sums "
            "over the future positions k >= s of the chunk (the clamp then makes their decay 1)"),
        6: ("term left out (branch): the past term C_s . state * exp(dA_cs[s]) skipped for chunk 0 (if c >"
            " 0), ignoring a nonzero initial state"),
        7: ("extra nonlinearity: exp applied to CB = C B^T (attention-style scores) before the decay and "
            "dt"),
        8: ("wrong decay index orientation: decay = exp(min(dA_cs[k] - dA_cs[s], 0)) (broadcast axes "
            "swapped), which the clamp turns into 1 on and below the diagonal: no intra-chunk decay"),
    },
    "ex08": {
        1: ("operand transposed (load index order): dS_out loaded at (bi, hi, c, ...) using dA_cumsum's "
            "(b, h, nchunks) order, head and chunk axes swapped"),
        2: ("off by one in the reverse loop: c = nchunks - i with i from 1, so chunks nchunks-1 .. 1 are "
            "visited and chunk 0 never is (its dstates, ddA_last unset, dinitial misses its step)"),
        3: ("scaling the wrong term: decay applied to the chunk's own gradient instead of the carried one:"
            " dS = dS + g * dS_out[c]"),
        4: ("wrong decay position: g = exp(dA_cumsum[c, 0]) (first position of the chunk) instead of "
            "exp(dA_cumsum[c, Q-1])"),
        5: ("reduction over the wrong set: <dS, S> computed as the sum of all entries of dS @ S^T (all p x"
            " p row pairs) instead of the elementwise sum(dS * S)"),
        6: "term left out: the factor g of d exp(a)/da dropped, ddA_last = <dS, S_c>",
        7: "extra nonlinearity: sigmoid-gate derivative g * (1 - g) * <dS, S_c> instead of g * <dS, S_c>",
        8: ("wrong chunk order: chunks walked forwards (c = i, the forward loop copied) instead of from "
            "the last to the first"),
    },
}

# M = 10 + k: slip k's alternative code path with the slip corrected; must pass
SANITY = {
    "ex04": [12, 15],  # 12: unpadded load + correct mask pos < l; 15: cumsum on the 3-D tile along axis 1
    "ex05": [12],  # 12: unpadded load + correct mask pos < l - c*Q
}

"""The fourteenth set of planted mistakes for the cuTile exercises 4-8 (docs/instructors.md): 40 slips written
from the exercises' contracts without reading the diagnosis code, covering in every exercise the seven classes
the diagnosis is asked to name, each in a less obvious form, measured on the checks before any fix, and kept
here as tested mistakes (``tests/test_exercise_diagnosis_sets.py`` says what hint each gets).

Each kernel is right for M = 0 and plants mistake M for M = 1..8; M above 10 (``SANITY``) runs a mistake's
alternative code path with the slip corrected, and must pass.
"""

from __future__ import annotations

import cuda.tile as ct

ZERO = ct.PaddingMode.ZERO


# --------------------------------------------------------------------------------------------- ex04
@ct.kernel
def chunk_cumsum_kernel(dt, A, dt_out, dA_cumsum, Q: ct.Constant[int], M: ct.Constant[int]):
    bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)

    dt_c = ct.load(dt, (bi, c, hi), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,))
    if M == 2 or M == 12:
        # explicit ragged-end mask: positions of this chunk that lie inside the sequence
        pos = ct.arange(Q, dtype=ct.int32)
        n_valid = dt.shape[1] - c * Q
        if M == 2:
            dt_c = ct.where(pos < n_valid - 1, dt_c, 0.0)
        else:
            dt_c = ct.where(pos < n_valid, dt_c, 0.0)

    A_h = ct.load(A, (hi,), shape=())
    if M == 4:
        A_h = ct.load(A, (c,), shape=())
    if M == 7:
        A_h = -ct.exp(A_h)  # the A_log convention: A = -exp(A_log)

    dA = dt_c * A_h
    if M == 3:
        dA = dt_c * ct.load(A, (0,), shape=(Q,), padding_mode=ZERO)

    dA_cs = ct.cumsum(dA, axis=0)
    if M == 5:
        dA_cs = ct.cumsum(dA, axis=0, reverse=True)
    if M == 6:
        dA_cs = dA_cs - ct.extract(dA, (0,), shape=(1,))  # "the cumsum starts at 0 at the chunk start"

    ct.store(dt_out, (bi, hi, c, 0), dt_c.reshape((1, 1, 1, Q)))
    if M == 1:
        ct.store(dA_cumsum, (bi, hi, c, 0), dA_cs.reshape((1, 1, Q, 1)))
    elif M == 8:
        ct.store(dA_cumsum, (bi, c, hi, 0), dA_cs.reshape((1, 1, 1, Q)))
    else:
        ct.store(dA_cumsum, (bi, hi, c, 0), dA_cs.reshape((1, 1, 1, Q)))


# --------------------------------------------------------------------------------------------- ex05
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
    if M == 5:
        B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN)).reshape((Q, TN))
    else:
        B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    if M == 4:
        dA_cs = ct.load(dA_cumsum, (bi, g, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    else:
        dA_cs = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))

    dA_last = ct.extract(dA_cs, (Q - 1,), shape=(1,))
    decay = ct.exp(dA_last - dA_cs)
    if M == 6:
        if c == ct.num_blocks(1) - 1:  # "the last chunk has no later chunk to decay towards"
            decay = ct.ones((Q,), dtype=ct.float32)
    w = decay * dt_c
    if M == 3:
        w = dt_c  # the decay goes on after the mma
    if M == 7:
        w = ct.exp((dA_last - dA_cs) * dt_c)
    if M == 2 or M == 12:
        pos = ct.arange(Q, dtype=ct.int32)
        last = x.shape[1] - 1 - c * Q  # index (in this chunk) of the sequence's last position
        if M == 2:
            w = ct.where(pos < last, w, 0.0)
        else:
            w = ct.where(pos <= last, w, 0.0)

    if M == 8:
        xw = x_c.astype(ct.float32) * w[:, None]
    else:
        xw = (x_c.astype(ct.float32) * w[:, None]).astype(x.dtype)

    if M == 1:
        state = ct.mma(ct.transpose(B_c), xw, ct.zeros((TN, TP), dtype=ct.float32))
    else:
        state = ct.mma(ct.transpose(xw), B_c, ct.zeros((TP, TN), dtype=ct.float32))
    if M == 3:
        state = state * ct.exp(dA_last)

    ct.store(states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))


# --------------------------------------------------------------------------------------------- ex06
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
    nchunks = states.shape[1]

    if M == 4 or M == 14:
        # "chunk 0 gets the initial state; every later chunk gets the previous chunk's update"
        ct.store(chunk_init_states, (bi, 0, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))
        for c in range(1, nchunks):
            if M == 4:
                decay = ct.exp(ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()))
            else:
                decay = ct.exp(ct.load(dA_cumsum, (bi, hi, c - 1, Q - 1), shape=()))
            local = ct.load(states, (bi, c - 1, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
            state = decay * state + local.reshape((TP, TN))
            ct.store(chunk_init_states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))
        decay = ct.exp(ct.load(dA_cumsum, (bi, hi, nchunks - 1, Q - 1), shape=()))
        local = ct.load(states, (bi, nchunks - 1, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        state = decay * state + local.reshape((TP, TN))
    else:
        n_loop = nchunks
        if M == 2:
            n_loop = nchunks - 1
        for c in range(n_loop):
            ct.store(chunk_init_states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))
            if M == 5:
                dA_c = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q))
                decay = ct.exp(ct.sum(dA_c))
            else:
                decay = ct.exp(ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()))
            if M == 1:
                local = ct.load(states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TN, TP), padding_mode=ZERO)
            else:
                local = ct.load(states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
            if M == 3:
                state = decay * (state + local.reshape((TP, TN)))
            elif M == 6:
                if c == 0:  # "the initial state sits at the chunk start: nothing to decay yet"
                    state = state + local.reshape((TP, TN))
                else:
                    state = decay * state + local.reshape((TP, TN))
            elif M == 7:
                state = ct.exp(decay) * state + local.reshape((TP, TN))
            elif M == 8:
                state = decay * state + local
            else:
                state = decay * state + local.reshape((TP, TN))

    ct.store(final_states, (bi, hi, 0, 0), state.reshape((1, 1, TP, TN)))


# --------------------------------------------------------------------------------------------- ex07
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
    if M == 8:
        g = hi % HEADS_PER_GROUP
    else:
        g = hi // HEADS_PER_GROUP

    if M == 5:
        x_c = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP)).reshape((Q, TP))
    else:
        x_c = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((Q, TP))
    C_c = ct.load(C, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    state = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
    state = state.reshape((TP, TN))
    dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    dA_cs = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    if M == 7:
        dt_c = ct.log(1.0 + ct.exp(dt_c))  # dt_softplus, as in mamba_ssm

    CB = ct.mma(C_c, ct.transpose(B_c), ct.zeros((Q, Q), dtype=ct.float32))
    pos = ct.arange(Q, dtype=ct.int32)
    causal = pos[:, None] >= pos[None, :]
    seg = dA_cs[:, None] - dA_cs[None, :]
    if M == 2:
        causal = seg < 0.0  # "exp(segsum) only where the segment sum is negative"
    if M == 12:
        causal = seg <= 0.0
    decay = ct.exp(ct.minimum(seg, 0.0))
    if M == 3:
        P = ct.where(causal, CB * decay, 0.0)
    else:
        P = ct.where(causal, CB * decay * dt_c[None, :], 0.0)
    y_c = ct.mma(P.astype(x.dtype), x_c, ct.zeros((Q, TP), dtype=ct.float32))
    if M == 3:
        y_c = y_c * dt_c[:, None]

    if M == 1:
        state_t = state.reshape((TN, TP))
    else:
        state_t = ct.transpose(state)
    past = ct.mma(C_c, state_t.astype(C.dtype), ct.zeros((Q, TP), dtype=ct.float32))
    if M == 4:
        past_decay = ct.exp(ct.extract(dA_cs, (Q - 1,), shape=(1,)) - dA_cs)
    else:
        past_decay = ct.exp(dA_cs)
    if M == 6:
        if c > 0:  # "chunk 0 has no past"
            y_c = y_c + past * past_decay[:, None]
    else:
        y_c = y_c + past * past_decay[:, None]

    ct.store(y, (bi, c, hi, 0), y_c.astype(y.dtype).reshape((1, Q, 1, TP)))


# --------------------------------------------------------------------------------------------- ex08
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

    if M == 1:
        dS = ct.load(dfinal_states, (bi, hi, 0, 0), shape=(1, 1, TN, TP), padding_mode=ZERO).reshape((TP, TN))
    else:
        dS = ct.load(dfinal_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO).reshape((TP, TN))

    nchunks = dS_out.shape[1]
    # loop bounds: for i in range(i0, i1): c = nchunks - shift - i
    if M == 2:
        i0, i1, shift = 1, nchunks, 0
    elif M == 12:
        i0, i1, shift = 1, nchunks + 1, 0
    else:
        i0, i1, shift = 0, nchunks, 1
    for i in range(i0, i1):
        c = nchunks - shift - i
        ct.store(dstates, (bi, c, hi, 0, 0), dS.reshape((1, 1, 1, TP, TN)))
        if M == 4:
            g = ct.exp(ct.load(dA_cumsum, (bi, hi, i, Q - 1), shape=()))
        else:
            g = ct.exp(ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()))
        S = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        S = S.reshape((TP, TN))
        if M == 5:
            inner = ct.sum(ct.mma(ct.transpose(dS), S, ct.zeros((TN, TN), dtype=ct.float32)))
        elif M == 15:
            eye = ct.arange(TN, dtype=ct.int32)[:, None] == ct.arange(TN, dtype=ct.int32)[None, :]
            inner = ct.sum(
                ct.mma(ct.transpose(dS), S, ct.zeros((TN, TN), dtype=ct.float32)) * eye.astype(ct.float32)
            )
        else:
            inner = ct.sum(dS * S)
        if M == 7:
            dda = g * (1.0 - g) * inner
        else:
            dda = g * inner
        if M != 8:
            ct.store(ddA_last, (bi, hi, c), dda.reshape((1, 1, 1)))
        own = ct.load(dS_out, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        if M == 3:
            dS = dS + g * own.reshape((TP, TN))
        elif M == 6:
            if c > 0:  # "nothing before chunk 0 needs the carried gradient"
                dS = g * dS + own.reshape((TP, TN))
        else:
            dS = g * dS + own.reshape((TP, TN))
        if M == 8:
            ct.store(ddA_last, (bi, hi, c), (g * ct.sum(dS * S)).reshape((1, 1, 1)))

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
        1: ("operand transposed (reshape): dA_cumsum stored as a (1, 1, Q, 1) tile, so the chunk's Q "
            "values run along the nchunks axis (tile index c along that axis means element c*Q) instead of"
            " along Q"),
        2: ("mask off by one (explicit ragged-end where): dt is zeroed where pos < (l - c*Q) - 1, i.e. the"
            " last real position of the sequence is masked out as well as the padding"),
        3: ("scaling on the wrong axis: A is loaded as a (Q,) tile A[0:Q] and multiplied elementwise, so "
            "position k is scaled by A[k] instead of every position by the head's A[hi]"),
        4: ("wrong decay index: the decay rate is read as A[c] (the chunk index) instead of A[hi] (the "
            "head)"),
        5: ("reduction over the wrong set: ct.cumsum(..., reverse=True) gives suffix sums sum_{j >= k} "
            "dt_j A instead of the inclusive prefix sums sum_{j <= k}"),
        6: ("term left out: the first position's dt_0 * A is subtracted from every prefix sum (the learner"
            " made the cumsum start at 0 at the chunk start), so dA_cumsum[k] = sum_{1 <= j <= k}"),
        7: ("extra nonlinearity on an input: A is replaced by -exp(A) (Mamba's A_log convention) before "
            "multiplying by dt; dt_out is unaffected"),
        8: ("wrong index order on one output: dA_cumsum is stored at tile index (bi, c, hi, 0), the "
            "input's (batch, chunk, head) order, instead of (bi, hi, c, 0) for the (b, h, nchunks, Q) "
            "layout"),
    },
    "ex05": {
        1: ("operand transposed (hidden in a reshape): the mma computes B^T (x w) as a (TN, TP) tile and "
            "the store's reshape to (1, 1, 1, TP, TN) reinterprets it row-major instead of transposing"),
        2: ("mask off by one (where on the sequence position): weights are kept only where pos < l - 1 - "
            "c*Q, so the sequence's last real position gets weight 0 (should be pos <= l - 1 - c*Q)"),
        3: ("scaling applied after the reduction: x is weighted by dt only and the decay is applied after "
            "the mma as the chunk-wide factor exp(dA_cs[Q-1]) instead of per position exp(dA_cs[Q-1] - "
            "dA_cs[k]) before the sum over k"),
        4: ("decay index off in the head: dA_cumsum is loaded at (bi, g, c, 0), the group index g = hi // "
            "HEADS_PER_GROUP reused from B's load, instead of the head hi (dt_out is read correctly)"),
        5: ("reduction over a set that includes padding: B is loaded without ZERO padding, so on a ragged "
            "last chunk the sum over positions takes in B's padding rows (garbage/NaN, not cancelled by "
            "x's zeros)"),
        6: ("term left out on the last chunk: on the block with c == nchunks - 1 the decay factor "
            "exp(dA_cs[Q-1] - dA_cs[k]) is dropped (w = dt only)"),
        7: ("extra nonlinearity on an intermediate: w = exp((dA_cs[Q-1] - dA_cs[k]) * dt_k), i.e. dt moved"
            " inside the exponential (the exp(dt*A) discretisation) instead of multiplying it"),
        8: ("type error: the weighted x is left in float32 (no .astype(x.dtype)), so with bf16 inputs the "
            "mma's two operands differ in dtype (compile error); float32 inputs are unaffected"),
    },
    "ex06": {
        1: ("operand transposed (hidden in a load's tile shape): each chunk's local state is loaded as a "
            "(1, 1, 1, TN, TP) tile and reshaped to (TP, TN), i.e. the wrong window reinterpreted "
            "row-major"),
        2: ("off by one in the loop bound: for c in range(nchunks - 1), so the last chunk's entering state"
            " is never stored and final_states misses the last chunk's decay and local state"),
        3: ("scaling applied after the sum: state = decay * (state + local), decaying the chunk's own "
            "local state too instead of only the carried one"),
        4: ("wrong chunk in the decay index: in a loop restructured to store chunk 0 first and update with"
            " chunk c-1's local state, the decay is read from chunk c (dA_cumsum[c, Q-1]) instead of chunk"
            " c-1"),
        5: ("reduction over the wrong set: the decay is exp(sum of all Q entries of the chunk's dA_cumsum)"
            " instead of exp of its last entry dA_cumsum[c, Q-1]"),
        6: ("term left out on the first chunk: for c == 0 the update is state = state + local (the initial"
            " state is not decayed across chunk 0); later chunks are right"),
        7: ("extra nonlinearity on an intermediate: the update uses exp(decay) * state where decay is "
            "already exp(dA_cumsum[c, Q-1]) (exponentiated twice)"),
        8: ("shape error: the local state is not reshaped, so decay * state + local becomes (1, 1, 1, TP, "
            "TN) and the loop-carried state changes shape (compile error)"),
    },
    "ex07": {
        1: ("operand transposed (reshape instead of transpose): the entering state is turned into (TN, TP)"
            " with state.reshape((TN, TP)) instead of ct.transpose(state) before C @ state^T"),
        2: ("mask off by one (where on a different variable): the causal mask is built from the segment "
            "sum, seg = dA_cs[s] - dA_cs[k] < 0, which excludes the diagonal k == s (should be k <= s)"),
        3: ("scaling applied after the reduction on the wrong axis: P is built without dt and the mma "
            "output is multiplied by dt[:, None] (dt_s per output row) instead of dt_k on P's columns "
            "before the sum over k"),
        4: ("wrong decay index for the past term: the entering state's contribution is decayed by "
            "exp(dA_cs[Q-1] - dA_cs[s]) (exercise 5's decay to the chunk end) instead of exp(dA_cs[s])"),
        5: ("reduction over a set that includes padding: x is loaded without ZERO padding, so on a ragged "
            "last chunk P @ x sums over x's padding rows (garbage/NaN; P's causal zeros do not cancel NaN)"),
        6: ("term left out on the first chunk: the past term C state^T exp(dA_cs) is added only when c > 0"
            " (the learner assumed the state entering chunk 0 is zero; initial states are not)"),
        7: ("extra nonlinearity on an input: softplus is applied to dt_out (dt = log(1 + exp(dt))) before "
            "it scales P's columns"),
        8: ("wrong group index: g = hi % HEADS_PER_GROUP (interleaved heads) instead of hi // "
            "HEADS_PER_GROUP (consecutive heads share a group); wrong C and B when HEADS_PER_GROUP > 1"),
    },
    "ex08": {
        1: ("operand transposed (hidden in a load's tile shape): dfinal_states is loaded as a (1, 1, TN, "
            "TP) tile and reshaped to (TP, TN), the wrong window reinterpreted row-major"),
        2: ("off by one in the reverse loop bound: for i in range(1, nchunks) with c = nchunks - i, so "
            "chunk 0 is never processed (dstates[0], ddA_last[0] unwritten; dinitial_states = gradient "
            "leaving chunk 0)"),
        3: ("scaling on the wrong operand: dS = dS + g * dS_out[c], the decay scales the chunk's own "
            "gradient instead of the carried one"),
        4: ("wrong chunk in the decay index: the decay is loaded at chunk i (the forward loop counter) "
            "instead of the reversed chunk c = nchunks - 1 - i"),
        5: ("reduction over the wrong set: <dS, S> is computed as the sum of ALL entries of dS^T @ S "
            "(cross terms included) instead of its trace (the elementwise sum of dS * S)"),
        6: ("term left out on the first chunk: the carried update dS = g dS + dS_out[c] is skipped when c "
            "== 0, so dinitial_states misses chunk 0's decay and own gradient"),
        7: ("extra nonlinearity: ddA_last = g * (1 - g) * <dS, S> (a sigmoid-style derivative) instead of "
            "g * <dS, S>"),
        8: ("wrong order: ddA_last is computed after the carried update, with the gradient of the state "
            "ENTERING chunk c instead of the one leaving it"),
    },
}

SANITY = {
    "ex04": [12],
    "ex05": [12],
    "ex06": [14],
    "ex07": [12],
    "ex08": [12, 15],
}

"""The tenth set of planted mistakes for the cuTile exercises 4-8 (docs/instructors.md): 40 slips written from
the exercises' contracts without reading the diagnosis code, as a workshop instructor expects them on the
room's screens, measured on the checks before any fix, and kept here as tested mistakes
(``tests/test_exercise_diagnosis_sets.py`` says what hint each gets).

Each kernel is right for M = 0 and plants mistake M for M = 1..8; M above 10 (``SANITY``) runs a mistake's
alternative code path with the slip corrected, and must pass.
"""

from __future__ import annotations

import cuda.tile as ct

ZERO = ct.PaddingMode.ZERO


# --------------------------------------------------------------------------------------------- ex04
@ct.kernel
def chunk_cumsum_kernel(dt, A, dt_out, dA_cumsum, Q: ct.Constant[int], M: ct.Constant[int]):
    if M == 3:
        bi, hi, c = ct.bid(0), ct.bid(1), ct.bid(2)  # SLIP 3: grid read as (b, h, nchunks)
    else:
        bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)

    if M == 1:
        dt_c = ct.load(dt, (bi, c * Q, hi), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,))  # SLIP 1
    elif M == 2:
        dt_c = ct.load(dt, (bi, c, hi), shape=(1, Q, 1)).reshape((Q,))  # SLIP 2: no padding_mode
    elif M == 8:
        dt_c = ct.load(dt, (bi, c, hi), shape=(Q,), padding_mode=ZERO)  # SLIP 8: 1-D shape for a 3-D array
    else:
        dt_c = ct.load(dt, (bi, c, hi), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,))

    A_h = ct.load(A, (hi,), shape=())
    if M == 6:
        A_h = -ct.exp(A_h)  # SLIP 6: treats A as mamba_ssm's A_log

    if M == 4:
        # SLIP 4: cumsum of the un-reshaped (1, Q, 1) tile with the default axis 0 (the size-1 axis)
        dt3 = ct.load(dt, (bi, c, hi), shape=(1, Q, 1), padding_mode=ZERO)
        dA_cs = ct.cumsum(dt3 * A_h).reshape((Q,))
    elif M == 14:
        # SANITY for 4: the same path with the right axis
        dt3 = ct.load(dt, (bi, c, hi), shape=(1, Q, 1), padding_mode=ZERO)
        dA_cs = ct.cumsum(dt3 * A_h, axis=1).reshape((Q,))
    elif M == 7:
        dA = dt_c * A_h
        dA_cs = ct.cumsum(dA, axis=0) - dA  # SLIP 7: exclusive cumsum
    else:
        dA_cs = ct.cumsum(dt_c * A_h, axis=0)

    if M == 5:
        ct.store(dt_out, (bi, hi, c, 0), (dt_c * A_h).reshape((1, 1, 1, Q)))  # SLIP 5: stores dt*A as dt_out
    else:
        ct.store(dt_out, (bi, hi, c, 0), dt_c.reshape((1, 1, 1, Q)))
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
    if M == 1:
        g = hi % B.shape[2]  # SLIP 1: interleaved head->group map (repeat instead of repeat_interleave)
    else:
        g = hi // HEADS_PER_GROUP

    if M == 2:
        x_c = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP)).reshape((Q, TP))  # SLIP 2: no padding
        B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN)).reshape((Q, TN))
    else:
        x_c = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((Q, TP))
        B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))

    if M == 7:
        # SLIP 7: dt_out / dA_cumsum indexed in x's axis order (bi, c, hi) instead of (bi, hi, c)
        dt_c = ct.load(dt_out, (bi, c, hi, 0), shape=(1, 1, 1, Q)).reshape((Q,))
        dA_cs = ct.load(dA_cumsum, (bi, c, hi, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    else:
        dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
        dA_cs = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))

    dA_last = ct.extract(dA_cs, (Q - 1,), shape=(1,))
    if M == 3:
        w = ct.exp(dA_cs - dA_last) * dt_c  # SLIP 3: decay exponent with the sign flipped
    elif M == 4:
        w = ct.exp(dA_last - dA_cs)  # SLIP 4: the dt factor left out
    elif M == 5:
        w = ct.exp(dA_last) * ct.exp(-dA_cs) * dt_c  # SLIP 5: exp split in two: 0 * inf at extreme decay
    else:
        w = ct.exp(dA_last - dA_cs) * dt_c

    if M == 8:
        xw = x_c.astype(ct.float32) * w[:, None]  # SLIP 8: not cast back to x.dtype before the mma
    else:
        xw = (x_c.astype(ct.float32) * w[:, None]).astype(x.dtype)
    acc = ct.zeros((TP, TN), dtype=ct.float32)
    if M == 6:
        state = ct.mma(xw.reshape((TP, Q)), B_c, acc)  # SLIP 6: reshape used as a transpose
    else:
        state = ct.mma(ct.transpose(xw), B_c, acc)

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

    if M == 5:
        state = ct.zeros((TP, TN), dtype=ct.float32)  # SLIP 5: initial_states never loaded
    else:
        state = ct.load(initial_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO).reshape(
            (TP, TN)
        )

    if M == 7:
        nch = states.shape[2]  # SLIP 7: loop bound from the head axis instead of the chunk axis
    else:
        nch = states.shape[1]

    for c in range(nch):
        if M != 1:
            ct.store(chunk_init_states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))
        if M == 4:
            # SLIP 4: sums the (already cumulative) dA_cumsum row as the chunk's total decay
            row = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
            decay = ct.exp(ct.sum(row))
        elif M == 14:
            # SANITY for 4: the same row-load path, taking its last element
            row = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
            decay = ct.exp(ct.extract(row, (Q - 1,), shape=()))
        elif M == 3:
            decay = ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=())  # SLIP 3: exp missing
        else:
            decay = ct.exp(ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()))
        local = ct.load(states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        if M == 2:
            state = decay * (state + local.reshape((TP, TN)))  # SLIP 2: decays the chunk's own state too
        elif M == 6:
            state = decay * state + local  # SLIP 6: (1,1,1,TP,TN) not reshaped: carried tile changes shape
        elif M == 8:
            state = state + decay * local.reshape((TP, TN))  # SLIP 8: decays the local state, not the old one
        else:
            state = decay * state + local.reshape((TP, TN))
        if M == 1:
            # SLIP 1: stores AFTER the update: the state leaving chunk c
            ct.store(chunk_init_states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))

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
    g = hi // HEADS_PER_GROUP

    x_c = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((Q, TP))
    C_c = ct.load(C, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    state = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
    state = state.reshape((TP, TN))
    dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    dA_cs = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))

    if M == 6:
        CB = ct.mma(B_c, ct.transpose(C_c), ct.zeros((Q, Q), dtype=ct.float32))  # SLIP 6: B Cᵀ, not C Bᵀ
    else:
        CB = ct.mma(C_c, ct.transpose(B_c), ct.zeros((Q, Q), dtype=ct.float32))
    pos = ct.arange(Q, dtype=ct.int32)
    if M == 1:
        causal = pos[:, None] <= pos[None, :]  # SLIP 1: mask keeps k >= s (upper triangle)
    elif M == 8:
        causal = pos[:, None] > pos[None, :]  # SLIP 8: strict mask, drops the diagonal k == s
    else:
        causal = pos[:, None] >= pos[None, :]

    if M == 2:
        # SLIP 2: masks by multiplying (PyTorch habit) with the unclamped exponent: inf * 0 = NaN above the
        # diagonal
        decay = ct.exp(dA_cs[:, None] - dA_cs[None, :]) * causal.astype(ct.float32)
        P = CB * decay * dt_c[None, :]
    elif M == 12:
        # SANITY for 2: the multiply-by-mask path with the exponent clamped
        decay = ct.exp(ct.minimum(dA_cs[:, None] - dA_cs[None, :], 0.0)) * causal.astype(ct.float32)
        P = CB * decay * dt_c[None, :]
    elif M == 4:
        decay = ct.exp(ct.minimum(dA_cs[:, None] - dA_cs[None, :], 0.0))
        # SLIP 4: dt scales the rows (dt_s), not columns
        P = ct.where(causal, CB * decay * dt_c[:, None], 0.0)
    elif M == 5:
        decay = ct.exp(ct.minimum(dA_cs[None, :] - dA_cs[:, None], 0.0))  # SLIP 5: exponent a_k - a_s
        P = ct.where(causal, CB * decay * dt_c[None, :], 0.0)
    else:
        decay = ct.exp(ct.minimum(dA_cs[:, None] - dA_cs[None, :], 0.0))
        P = ct.where(causal, CB * decay * dt_c[None, :], 0.0)
    y_c = ct.mma(P.astype(x.dtype), x_c, ct.zeros((Q, TP), dtype=ct.float32))

    if M == 7:
        # SLIP 7: the float32 state handed to the mma without the cast to C.dtype (bf16 cases: dtype mismatch)
        past = ct.mma(C_c, ct.transpose(state), ct.zeros((Q, TP), dtype=ct.float32))
    else:
        past = ct.mma(C_c, ct.transpose(state.astype(C.dtype)), ct.zeros((Q, TP), dtype=ct.float32))
    if M == 3:
        y_c = y_c + past  # SLIP 3: the entering state is not decayed to position s
    else:
        y_c = y_c + past * ct.exp(dA_cs)[:, None]

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

    dS = ct.load(dfinal_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO).reshape((TP, TN))

    nchunks = dS_out.shape[1]
    for i in range(nchunks):
        if M == 1:
            c = i  # SLIP 1: walks the chunks forwards
        else:
            c = nchunks - 1 - i
        if M != 2:
            ct.store(dstates, (bi, c, hi, 0, 0), dS.reshape((1, 1, 1, TP, TN)))
        g = ct.exp(ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()))
        if M == 7:
            S = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN))  # SLIP 7: no padding
        else:
            S = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        if M == 3:
            # SLIP 3: no g
            ct.store(ddA_last, (bi, hi, c), ct.sum(dS * S.reshape((TP, TN))).reshape((1, 1, 1)))
        elif M == 6:
            # SLIP 6: sum over one axis only (torch .sum(dim=0) habit): a (TN,) tile cannot reshape to (1, 1,
            # 1)
            ct.store(ddA_last, (bi, hi, c), (g * ct.sum(dS * S.reshape((TP, TN)), axis=0)).reshape((1, 1, 1)))
        elif M != 4:
            ct.store(ddA_last, (bi, hi, c), (g * ct.sum(dS * S.reshape((TP, TN)))).reshape((1, 1, 1)))
        own = ct.load(dS_out, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        if M == 5:
            dS = g * (dS + own.reshape((TP, TN)))  # SLIP 5: decays the chunk's own dS_out too
        elif M == 8:
            dS = dS / g + own.reshape((TP, TN))  # SLIP 8: "undoes" the decay going backwards: divides by g
        else:
            dS = g * dS + own.reshape((TP, TN))
        if M == 2:
            # SLIP 2: stores dstates AFTER the update (the gradient of the state entering chunk c)
            ct.store(dstates, (bi, c, hi, 0, 0), dS.reshape((1, 1, 1, TP, TN)))
        if M == 4:
            # SLIP 4: ddA_last computed after the update, with the gradient of S_c instead of S_{c+1}
            ct.store(ddA_last, (bi, hi, c), (g * ct.sum(dS * S.reshape((TP, TN)))).reshape((1, 1, 1)))

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
        1: ("tile units: loads dt at index (bi, c*Q, hi), an element offset used as a tile index along l "
            "(chunk c>0 reads tile c*Q, i.e. positions c*Q*Q.., mostly past the end)"),
        2: ("padding: the dt load has no padding_mode (UNDETERMINED), so positions past the end of the "
            "sequence in the ragged last chunk are garbage/NaN instead of dt = 0"),
        3: ("grid/bid order: reads the block index as bi, hi, c = bid(0), bid(1), bid(2) (the output "
            "layout (b, h, nchunks) order) though the grid is (b, nchunks, h): chunk and head swapped"),
        4: ("scan axis: takes ct.cumsum of the un-reshaped (1, Q, 1) tile with the default axis=0 (the "
            "size-1 axis), so dA_cumsum holds dt*A elementwise, not its running sum"),
        5: "wrong output: stores dt*A (the discretized step) into dt_out instead of the raw step sizes dt",
        6: "math/parametrization: treats A as mamba_ssm's A_log and uses -exp(A[hi]) as the decay rate",
        7: ("exclusive scan: dA_cumsum = cumsum(dt*A) - dt*A (sum over j < k), so position k omits its own"
            " dt*A"),
        8: ("shape/type (compile error): loads the 3-D dt with shape=(Q,) (one entry, not one per array "
            "axis)"),
    },
    "ex05": {
        1: ("group mapping: g = hi % B.shape[2] (interleaved, torch repeat) instead of hi // "
            "HEADS_PER_GROUP (consecutive heads share a group, repeat_interleave)"),
        2: ("padding: x and B loaded without padding_mode=ZERO, so the ragged last chunk's positions past "
            "l (UNDETERMINED = NaN) poison the state"),
        3: ("decay direction: w = exp(dA_cs - dA_last) * dt (exponent sign flipped: grows instead of "
            "decays, overflows at extreme decay)"),
        4: "missing term: w = exp(dA_last - dA_cs), the dt_k factor left out of the weight",
        5: ("numerics: w = exp(dA_last) * exp(-dA_cs) * dt, the exponent split in two factors, which "
            "underflow to 0 and overflow to inf at dt*A ~ -1000 (0*inf = NaN)"),
        6: ("reshape vs transpose: the mma's left operand is xw.reshape((TP, Q)) instead of "
            "ct.transpose(xw) (reshape reorders row-major, it does not transpose)"),
        7: ("layout: dt_out and dA_cumsum loaded at (bi, c, hi, 0), x's axis order, though they are (b, h,"
            " nchunks, Q): chunk and head swapped"),
        8: ("dtype (compile error on bf16): the weighted x (float32 after * w) is not cast back to "
            "x.dtype, so ct.mma gets float32 and bfloat16 operands"),
    },
    "ex06": {
        1: ("store order: chunk_init_states[c] stored after the update, i.e. the state LEAVING chunk c "
            "(chunk 0 never gets initial_states)"),
        2: "decay placement: state = decay * (state + local): the chunk's own local state is decayed too",
        3: ("missing exp: multiplies the state by dA_cumsum[.., Q-1] itself (the log decay) instead of its"
            " exp"),
        4: ("cumsum confusion: the chunk decay is exp(sum of the dA_cumsum row) instead of exp of its last"
            " element (the row is already cumulative)"),
        5: "forgotten input: the carried state starts at zeros; initial_states is never loaded",
        6: ("loop-carried shape (compile error): adds the (1, 1, 1, TP, TN) local tile without reshaping, "
            "so the carried (TP, TN) state changes shape inside the loop"),
        7: "loop bound: iterates range(states.shape[2]) (the head count) instead of shape[1] (nchunks)",
        8: ("decay placement: state = state + decay * local, decays the chunk's own state instead of the "
            "old carried state"),
    },
    "ex07": {
        1: "causal mask inverted: pos[:, None] <= pos[None, :] keeps k >= s (the future), upper triangle",
        2: ("masking by multiplication with no clamp: decay = exp(a_s - a_k) * mask, P = CB*decay*dt; "
            "above the diagonal exp overflows to inf and inf*0 = NaN"),
        3: "missing decay on the past: y += C·stateᵀ without the exp(dA_cs[s]) factor",
        4: "broadcast axis: dt_c[:, None] scales P's rows by dt_s instead of its columns by dt_k",
        5: ("decay direction: exponent a_k - a_s (clamped to <= 0), so the intra-chunk decay is 1 for "
            "every k <= s"),
        6: "operand order: CB = B @ Cᵀ instead of C @ Bᵀ, so P[s, k] uses B_s·C_k (the transpose)",
        7: ("dtype (compile error on bf16): the float32 entering state goes into ct.mma with bf16 C "
            "(missing .astype(C.dtype))"),
        8: "inclusive diagonal: strict mask pos[:, None] > pos[None, :] drops the k == s term",
    },
    "ex08": {
        1: "direction: walks the chunks forwards (c = i) instead of last to first",
        2: ("store order: dstates[c] stored after the update, i.e. the gradient of S_c (entering) instead "
            "of dL/dS_{c+1} (the gradient arriving from the later chunks)"),
        3: "chain rule: ddA_last = <dS, S_c> without the factor g = exp(a_last) from d exp(a)/da",
        4: "ordering: ddA_last computed after dS is updated, so it uses dL/dS_c instead of dL/dS_{c+1}",
        5: "decay placement: dS = g * (dS + dS_out[c]): the chunk's own output gradient is decayed too",
        6: ("reduction axis (compile error): ct.sum(dS * S, axis=0) gives a (TN,) tile, not a scalar, "
            "which cannot reshape to the (1, 1, 1) ddA_last tile"),
        7: ("padding: chunk_init_states loaded without padding_mode=ZERO: NaN past p, n enters the "
            "ddA_last sum"),
        8: ("decay inverted: dS = dS / g + dS_out[c], 'undoing' the forward decay going backwards instead "
            "of multiplying by g"),
    },
}

SANITY = {
    "ex04": [14],
    "ex06": [14],
    "ex07": [12],
}

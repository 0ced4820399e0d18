"""The eleventh set of planted mistakes for the cuTile exercises 4-8 (docs/instructors.md): 40 slips written
from the exercises' contracts without reading the diagnosis code, half as a learner in a hurry would slip,
half as one porting the math from PyTorch, measured on the checks before any fix, and kept here as tested
mistakes (``tests/test_exercise_diagnosis_sets.py`` says what hint each gets).

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
    if M == 3:
        bi, c, hi = ct.bid(0), ct.bid(2), ct.bid(1)  # slip 3: chunk and head bids swapped
    else:
        bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)

    if M == 5:
        dt_t = ct.load(dt, (bi, c * Q, hi), shape=(1, Q, 1), padding_mode=ZERO)  # slip 5: element offset c*Q
    else:
        dt_t = ct.load(dt, (bi, c, hi), shape=(1, Q, 1), padding_mode=ZERO)
    dt_c = dt_t.reshape((Q,))

    if M == 2:
        A_h = ct.load(A, (bi,), shape=())  # slip 2: indexed A with bi (copied from the dt index)
    else:
        A_h = ct.load(A, (hi,), shape=())
    if M == 8:
        A_h = -ct.exp(A_h)  # slip 8: treats A as A_log (A = -exp(A_log)), as in the Mamba2 module

    if M == 6:
        dA_cs = ct.cumsum(dt_t * A_h).reshape((Q,))  # slip 6: default axis 0 of the (1, Q, 1) tile
    elif M == 16:
        dA_cs = ct.cumsum(dt_t * A_h, axis=1).reshape((Q,))  # sanity: same path, the chunk axis
    elif M == 4:
        dt_c = dt_c * A_h  # slip 4: dt_c overwritten by dt*A, then stored into dt_out below
        dA_cs = ct.cumsum(dt_c, axis=0)
    elif M == 7:
        dA = dt_c * A_h
        dA_cs = ct.cumsum(dA, axis=0) - dA  # slip 7: exclusive cumsum
    else:
        dA_cs = ct.cumsum(dt_c * A_h, axis=0)

    ct.store(dt_out, (bi, hi, c, 0), dt_c.reshape((1, 1, 1, Q)))
    if M == 1:
        ct.store(dA_cumsum, (bi, hi, c, 0), dt_c.reshape((1, 1, 1, Q)))  # slip 1: copy-pasted store
    else:
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
    if M == 4:
        bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(1)  # slip 4: typo, head read from bid(1)
    else:
        bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)
    g = hi // HEADS_PER_GROUP

    x_t = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP), padding_mode=ZERO)
    x_c = x_t.reshape((Q, TP))
    B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    if M == 1:
        dt_c = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))  # slip 1: wrong array
    else:
        dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    dA_cs = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))

    if M == 5:
        dA_last = ct.extract(dA_cs, (-1,), shape=(1,))  # slip 5: negative index, as dA_cs[-1] in torch
    else:
        dA_last = ct.extract(dA_cs, (Q - 1,), shape=(1,))

    if M == 2:
        w = ct.exp(dA_last - dA_cs)  # slip 2: the dt factor left out
    elif M == 6:
        w = ct.exp(dA_cs - dA_last) * dt_c  # slip 6: exponent with the wrong sign
    elif M == 7:
        w = ct.exp(dA_last) / ct.exp(dA_cs) * dt_c  # slip 7: exp of a difference as a ratio of exps
    else:
        w = ct.exp(dA_last - dA_cs) * dt_c

    acc = ct.zeros((TP, TN), dtype=ct.float32)
    if M == 8:
        xT = x_t.reshape((TP, Q))  # slip 8: reshape used as if it were a transpose
        xTw = (xT.astype(ct.float32) * w[None, :]).astype(x.dtype)
        state = ct.mma(xTw, B_c, acc)
    elif M == 18:
        xT = ct.transpose(x_c)  # sanity: same path with a real transpose
        xTw = (xT.astype(ct.float32) * w[None, :]).astype(x.dtype)
        state = ct.mma(xTw, B_c, acc)
    else:
        xw = (x_c.astype(ct.float32) * w[:, None]).astype(x.dtype)
        state = ct.mma(ct.transpose(xw), B_c, acc)

    if M == 3:
        ct.store(states, (bi, hi, c, 0, 0), state.reshape((1, 1, 1, TP, TN)))  # slip 3: dt_out's index order
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
    bi, hi = ct.bid(0), ct.bid(1)
    state = ct.load(initial_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO).reshape((TP, TN))

    if M == 2:
        nloop = states.shape[1] - 1  # slip 2: off-by-one loop bound
    else:
        nloop = states.shape[1]
    for c in range(nloop):
        ct.store(chunk_init_states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))
        if M == 1:
            a = ct.load(dA_cumsum, (bi, hi, c, 0), shape=())  # slip 1: element 0 instead of Q-1
        elif M == 5:
            row = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
            a = ct.sum(row)  # slip 5: sum of the cumsum row, as if it held the per-step dA
        elif M == 15:
            row = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
            a = ct.extract(row, (Q - 1,), shape=(1,)).reshape(())  # sanity: same path, last element
        elif M == 6:
            a = ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()) - ct.load(
                dA_cumsum, (bi, hi, c, 0), shape=()
            )  # slip 6: segsum last - first
        elif M == 8:
            a = ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=(1, 1, 1, 1))  # slip 8: keepdim-style 4-D tile
        elif M == 18:
            a = ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=(1, 1, 1, 1)).reshape(())  # sanity
        else:
            a = ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=())
        if M == 4:
            decay = a  # slip 4: ct.exp forgotten
        else:
            decay = ct.exp(a)
        local = ct.load(states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO).reshape(
            (TP, TN)
        )
        if M == 3:
            state = state + decay * local  # slip 3: decay on the chunk's own state, not the carried one
        elif M == 7:
            state = decay * (state + local)  # slip 7: decays the chunk's own (already end-decayed) state too
        else:
            state = decay * state + local

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
    if M == 1:
        B_c = ct.load(C, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))  # slip 1
    else:
        B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    if M == 4:
        state = ct.load(
            chunk_init_states, (bi, c + 1, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO
        )  # slip 4: the state leaving the chunk (c + 1)
    else:
        state = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
    state = state.reshape((TP, TN))
    dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    dA_cs = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    if M == 3:
        dA_cs = ct.exp(dA_cs)  # slip 3: overwritten with exp(dA_cs) (meant for the past term) too early

    CB = ct.mma(C_c, ct.transpose(B_c), ct.zeros((Q, Q), dtype=ct.float32))
    pos = ct.arange(Q, dtype=ct.int32)
    if M == 2:
        causal = pos[:, None] >= pos[:, None]  # slip 2: copy-pasted broadcast, always True
    else:
        causal = pos[:, None] >= pos[None, :]
    if M == 6:
        diff = dA_cs[None, :] - dA_cs[:, None]  # slip 6: segsum difference in the wrong order
    else:
        diff = dA_cs[:, None] - dA_cs[None, :]

    if M == 7:
        L = ct.exp(diff) * causal.astype(ct.float32)  # slip 7: torch.tril-style multiply, exp unclamped
        P = CB * L * dt_c[None, :]
    elif M == 17:
        L = ct.exp(ct.minimum(diff, 0.0)) * causal.astype(ct.float32)  # sanity: same path, clamped
        P = CB * L * dt_c[None, :]
    elif M == 5:
        decay = ct.exp(ct.minimum(diff, 0.0))
        P = ct.where(causal, CB * decay * dt_c[:, None], 0.0)  # slip 5: dt broadcast along rows (dt_s)
    else:
        decay = ct.exp(ct.minimum(diff, 0.0))
        P = ct.where(causal, CB * decay * dt_c[None, :], 0.0)
    y_c = ct.mma(P.astype(x.dtype), x_c, ct.zeros((Q, TP), dtype=ct.float32))

    past = ct.mma(C_c, ct.transpose(state.astype(C.dtype)), ct.zeros((Q, TP), dtype=ct.float32))
    if M == 3:
        y_c = y_c + past * dA_cs[:, None]  # (slip 3 continued: dA_cs already holds exp(dA_cs))
    else:
        y_c = y_c + past * ct.exp(dA_cs)[:, None]

    if M == 8:
        ct.store(y, (bi, c, hi, 0), y_c.reshape((1, Q, 1, TP)))  # slip 8: no cast to y.dtype
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

    nchunks = dS_out.shape[1]
    if M == 5:
        for c in range(nchunks - 1, -1, -1):  # slip 5: Python's reversed range (negative step)
            ct.store(dstates, (bi, c, hi, 0, 0), dS.reshape((1, 1, 1, TP, TN)))
            g = ct.exp(ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()))
            S = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
            ct.store(ddA_last, (bi, hi, c), (g * ct.sum(dS * S.reshape((TP, TN)))).reshape((1, 1, 1)))
            own = ct.load(dS_out, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
            dS = g * dS + own.reshape((TP, TN))
    else:
        for i in range(nchunks):
            if M == 1:
                c = i  # slip 1: the reversal left out, chunks walked forwards
            elif M == 4:
                c = nchunks - i  # slip 4: off by one
            elif M == 6:
                c = -1 - i  # slip 6: torch-style negative index from the end
            else:
                c = nchunks - 1 - i
            ct.store(dstates, (bi, c, hi, 0, 0), dS.reshape((1, 1, 1, TP, TN)))
            g = ct.exp(ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=()))
            if M == 3:
                S = ct.load(dS_out, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)  # slip 3
            else:
                S = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
            S = S.reshape((TP, TN))
            if M == 2:
                dA_last = ct.sum(dS * S)  # slip 2: d g instead of d a_last (the factor g left out)
            elif M == 7:
                # slip 7
                dA_last = g * ct.sum(ct.mma(dS, ct.transpose(S), ct.zeros((TP, TP), dtype=ct.float32)))
            elif M == 17:
                eye = ct.arange(TP, dtype=ct.int32)[:, None] == ct.arange(TP, dtype=ct.int32)[None, :]
                prod = ct.mma(dS, ct.transpose(S), ct.zeros((TP, TP), dtype=ct.float32))
                dA_last = g * ct.sum(ct.where(eye, prod, 0.0))  # sanity: same path, the trace
            else:
                dA_last = g * ct.sum(dS * S)
            if M == 8:
                ct.store(ddA_last, (bi, c, hi), dA_last.reshape((1, 1, 1)))  # slip 8: 5-D arrays' index order
            else:
                ct.store(ddA_last, (bi, hi, c), dA_last.reshape((1, 1, 1)))
            own = ct.load(dS_out, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
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
        1: ("copy-paste (hurry): the second store was copied from the first and still writes dt_c, so "
            "dA_cumsum receives the raw step sizes dt instead of cumsum(dt*A)"),
        2: ("wrong index (hurry): A is loaded at (bi,) instead of (hi,) (index copied from the dt load), "
            "so each block uses the A of the head whose number equals its batch entry"),
        3: ("wrong ct.bid (hurry): c = ct.bid(2) and hi = ct.bid(1) are swapped, so the block reads and "
            "writes chunk hi of head c (grid is (b, nchunks, h))"),
        4: ("variable reused after overwrite (hurry): dt_c = dt_c * A is computed in place before the "
            "cumsum, so dt_out receives dt*A instead of dt (dA_cumsum is right)"),
        5: ("tile index as element offset (torch port): dt is loaded at index (bi, c*Q, hi) as if it were "
            "dt[bi, c*Q:(c+1)*Q, hi]; the index is in tile units, so chunk c>0 reads tile c*Q (far out of "
            "range)"),
        6: ("cumsum axis default (torch port): ct.cumsum is applied to the unreshaped (1, Q, 1) tile "
            "without axis; the default axis 0 has size 1, so no sum happens and dA_cumsum = dt*A "
            "elementwise"),
        7: ("exclusive instead of inclusive cumsum (torch port, segsum/pad convention): dA_cumsum = "
            "cumsum(dt*A) - dt*A, so position k misses its own step (position 0 is 0)"),
        8: ("A treated as A_log (torch port from the Mamba2 module): A is replaced by -exp(A) before the "
            "multiplication, though the kernel's A is already the (negative) decay rate"),
    },
    "ex05": {
        1: ("copy-paste (hurry): dt_c is loaded from dA_cumsum (array name not changed from the copied "
            "line), so the weight uses the cumsum instead of dt"),
        2: "TODO half done (hurry): w = exp(dA_last - dA_cs) without the factor dt_k",
        3: ("index order copied (hurry): the state is stored at (bi, hi, c, 0, 0), the (b, h, nchunks) "
            "order of dt_out/dA_cumsum, instead of states' (b, nchunks, h) order (bi, c, hi, 0, 0)"),
        4: ("wrong ct.bid (hurry): typo hi = ct.bid(1) (the chunk's bid), so every block uses head number "
            "c and its group; real head indices are ignored"),
        5: ("negative index (torch port): dA_last = ct.extract(dA_cs, (-1,), shape=(1,)) as dA_cs[-1] in "
            "torch; cuTile does not wrap negative indices, compile-time out-of-bounds error (intended type"
            " error)"),
        6: ("decay exponent sign flipped (torch port, segsum order): w = exp(dA_cs[k] - dA_cs[Q-1]) * dt, "
            "growth instead of decay from position k to the chunk end"),
        7: ("exp of a difference written as a ratio of exps (torch port): w = exp(dA_last) / exp(dA_cs) * "
            "dt; mathematically equal but both exps underflow to 0 for strong decay, giving 0/0 = NaN (or "
            "inf)"),
        8: ("reshape used as a transpose (torch port, view habit): the (1, Q, 1, TP) x tile is reshaped to"
            " (TP, Q) and used as x^T; reshape keeps row-major order, so it scrambles positions and "
            "p-columns"),
    },
    "ex06": {
        1: ("wrong element (hurry): the chunk decay is loaded at (bi, hi, c, 0), the index pattern of the "
            "tile loads, i.e. exp(dA_cumsum[c, 0]) (the first step's decay) instead of element Q-1"),
        2: ("off-by-one loop bound (hurry): for c in range(nchunks - 1), so the last chunk is never stored"
            " into chunk_init_states nor added, and final_states is the state entering the last chunk"),
        3: ("decay on the wrong term (hurry): state = state + decay * local, decaying the chunk's own "
            "state instead of the carried state"),
        4: ("forgotten ct.exp (hurry): decay = dA_cumsum[c, Q-1] itself (the log-decay) multiplies the "
            "state"),
        5: ("reduction instead of last element (torch port, sum over dim=-1): decay = exp(sum of the "
            "chunk's dA_cumsum row), treating the cumsum row as per-step dA"),
        6: ("segsum bound (torch port): decay across the chunk = exp(dA_cs[Q-1] - dA_cs[0]), the segsum "
            "between first and last position; the cumsum is inclusive, so the first step's decay is "
            "dropped"),
        7: ("recurrence form (torch port of h = a*(h + b)): state = decay * (state + local), which decays "
            "the chunk's own state again though it is already taken to the chunk end"),
        8: ("keepdim-style load (torch port, A_cumsum[..., -1:]): the decay is loaded as a (1, 1, 1, 1) "
            "tile, so the carried state becomes 4-D and changes type in the loop (intended type error)"),
    },
    "ex07": {
        1: "copy-paste (hurry): B_c is loaded from C (array name not changed), so CB = C C^T",
        2: ("copy-paste broadcast (hurry): causal = pos[:, None] >= pos[:, None] (the second index not "
            "changed), always True, so nothing above the diagonal is masked (decay clamps to 1 there)"),
        3: ("variable overwritten (hurry): dA_cs = exp(dA_cs) is computed early for the past term and then"
            " used in the decay matrix exp(min(dA_cs[s] - dA_cs[k], 0)), which now differences the exps"),
        4: ("off-by-one chunk (hurry): the entering state is read at chunk c + 1 (the state leaving chunk "
            "c); the last chunk's load is entirely out of range"),
        5: ("broadcast the wrong way (torch port): dt_c[:, None] scales row s by dt_s instead of column k "
            "by dt_k"),
        6: ("segsum order reversed (torch port): decay uses dA_cs[k] - dA_cs[s] instead of dA_cs[s] - "
            "dA_cs[k]; after the clamp it is 1 below the diagonal"),
        7: ("torch.tril-style mask (torch port): L = exp(dA_cs[s] - dA_cs[k]) * causal multiplied instead "
            "of ct.where, without the clamp: above the diagonal exp overflows to inf and inf * 0 = NaN"),
        8: ("no cast on store (torch port, copy_ casts implicitly): y_c (float32) stored without "
            ".astype(y.dtype); a compile error for bfloat16 y (intended type error)"),
    },
    "ex08": {
        1: "TODO half done (hurry): c = i, the chunks are walked first to last instead of last to first",
        2: ("gradient of g instead of a_last (torch port, chain rule through exp missed): ddA_last = <dS, "
            "S_c> without the factor g = exp(a_last)"),
        3: ("copy-paste (hurry): S is loaded from dS_out instead of chunk_init_states, so ddA_last = g "
            "<dS, dS_out_c>"),
        4: ("off-by-one (hurry): c = nchunks - i, so the first step addresses chunk nchunks (out of range)"
            " and every chunk is shifted by one"),
        5: ("Python reversed range (torch port): for c in range(nchunks - 1, -1, -1); cuTile ranges need a"
            " positive step (intended compile error)"),
        6: ("negative index (torch port): c = -1 - i as states[:, -1 - i] in torch; cuTile indices do not "
            "wrap"),
        7: ("inner product as a matmul (torch port, einsum 'pn,pn->' read as a matrix product): ddA_last ="
            " g * sum(dS @ S^T), which sums all cross terms instead of only the trace"),
        8: ("index order copied (hurry): ddA_last is stored at (bi, c, hi), the (b, nchunks, h) order of "
            "the 5-D arrays, instead of ddA_last's (b, h, nchunks) order (bi, hi, c)"),
    },
}

SANITY = {
    "ex04": [16],
    "ex05": [18],
    "ex06": [15, 18],
    "ex07": [17],
    "ex08": [17],
}

"""The fifth set of planted mistakes for the cuTile exercises 4-8 (docs/instructors.md): 40 slips written
from the exercises' contracts without reading the diagnosis code, measured on the checks before any fix, and
kept here as tested mistakes (``tests/test_exercise_diagnosis_sets.py`` says what each named hint must say).

Each kernel is right for M = 0 and plants mistake M for M = 1..8; M above 10 (``SANITY``) runs a mistake's
alternative code path with the slip corrected, and must pass.
"""

from __future__ import annotations

import cuda.tile as ct

ZERO = ct.PaddingMode.ZERO
LOG2E = 1.4426950408889634


@ct.kernel
def cumsum_s(dt, A, dt_out, dA_cumsum, Q: ct.Constant[int], M: ct.Constant[int]):
    bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)
    pos = ct.arange(Q, dtype=ct.int32)
    if M == 5:
        dt_c = ct.load(dt, (bi, c, hi), shape=(1, Q, 1)).reshape((Q,))  # padding_mode forgotten
    else:
        dt_c = ct.load(dt, (bi, c, hi), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,))
    a = ct.load(A, (hi,), shape=())
    v = dt_c * a
    if M == 3 or M == 4 or M == 6 or M == 13:
        # a Hillis-Steele (doubling) scan: cs[s] += cs[s - d] for d = 1, 2, 4, ...
        cs = v
        d = 1
        if M == 3:
            lim = Q // 2  # one doubling too few
        else:
            lim = Q
        while d < lim:
            if M == 4:
                src = (pos[:, None] - d + Q) % Q  # torch.roll: the shift wraps around
                sel = src == pos[None, :]
            else:
                sel = (pos[:, None] - d) == pos[None, :]
            if M == 6:
                # the input shifted, not the partial sums
                shifted = ct.sum(ct.where(sel, v[None, :], 0.0), axis=1)
            else:
                shifted = ct.sum(ct.where(sel, cs[None, :], 0.0), axis=1)
            cs = cs + shifted
            d = d * 2
    elif M == 7 or M == 17:
        # the running sum as a matrix product with the lower-triangular ones matrix
        tri = ct.where(pos[:, None] >= pos[None, :], 1.0, 0.0)
        vcol = v.reshape((Q, 1))
        if M == 7:
            cs2 = ct.mma(tri.astype(ct.bfloat16), vcol.astype(ct.bfloat16),
                         ct.zeros((Q, 1), dtype=ct.float32))  # "mma wants half-precision operands"
        else:
            cs2 = ct.mma(tri, vcol, ct.zeros((Q, 1), dtype=ct.float32))
        cs = cs2.reshape((Q,))
    else:
        cs = ct.cumsum(v, axis=0)
    if M == 2:
        # the output used as the accumulator (the `dA_cumsum +=` habit)
        prev = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q), padding_mode=ZERO).reshape((Q,))
        cs = prev + cs
    if M == 8:
        # batch 0 (a single-batch test's leftover)
        ct.store(dt_out, (0, hi, c, 0), dt_c.reshape((1, 1, 1, Q)))
    else:
        ct.store(dt_out, (bi, hi, c, 0), dt_c.reshape((1, 1, 1, Q)))
    if M == 1:
        ct.store(dA_cumsum, (bi, hi, c * Q, 0), cs.reshape((1, 1, 1, Q)))  # element offset for a tile index
    else:
        ct.store(dA_cumsum, (bi, hi, c, 0), cs.reshape((1, 1, 1, Q)))


@ct.kernel
def state_s(x, B, dt_out, dA_cumsum, states, Q: ct.Constant[int], TP: ct.Constant[int], TN: ct.Constant[int],
            HEADS_PER_GROUP: ct.Constant[int], M: ct.Constant[int]):
    bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)
    if M == 3:
        g = hi // B.shape[2]  # divided by the number of groups
    else:
        g = hi // HEADS_PER_GROUP
    if M == 8:
        hx = (hi // HEADS_PER_GROUP) * HEADS_PER_GROUP  # the group's first head
    else:
        hx = hi
    dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    dA_cs = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    dA_last = ct.extract(dA_cs, (Q - 1,), shape=(1,))
    pos = ct.arange(Q, dtype=ct.int32)
    if M == 2:
        # "the input at k also decays through its own step": the decay from dA_cs[k-1] (0 before position 0)
        dA_prev = ct.sum(ct.where((pos[:, None] - 1) == pos[None, :], dA_cs[None, :], 0.0), axis=1)
        decay = ct.exp(dA_last - dA_prev)
    elif M == 6:
        decay = ct.exp2((dA_last - dA_cs) / LOG2E)  # LOG2E divided where it multiplies
    else:
        decay = ct.exp(dA_last - dA_cs)
    w = decay * dt_c
    zeros = ct.zeros((TP, TN), dtype=ct.float32)
    if M == 1 or M == 5 or M == 11:
        # the taught kernel's K-loop: two steps of TK = Q/2 rows
        TK = Q // 2
        state = zeros
        for kt in range(Q // TK):
            x_k = ct.load(x, (bi, c * (Q // TK) + kt, hx, 0), shape=(1, TK, 1, TP), padding_mode=ZERO)
            B_k = ct.load(B, (bi, c * (Q // TK) + kt, g, 0), shape=(1, TK, 1, TN), padding_mode=ZERO)
            x_k = x_k.reshape((TK, TP))
            B_k = B_k.reshape((TK, TN))
            if M == 1:
                w_k = ct.extract(w, (kt * TK,), shape=(TK,))  # the index in elements, not in tiles
            else:
                w_k = ct.extract(w, (kt,), shape=(TK,))
            if M == 5:
                # stored at the top of each step, before the step's product is added
                ct.store(states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))
            xw_k = (x_k.astype(ct.float32) * w_k[:, None]).astype(x.dtype)
            state = ct.mma(ct.transpose(xw_k), B_k, state)
        if M != 5:
            ct.store(states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))
    else:
        x_c = ct.load(x, (bi, c, hx, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((Q, TP))
        xw = (x_c.astype(ct.float32) * w[:, None]).astype(x.dtype)
        if M == 4:
            # B "transposed" by a reshape to (TN, Q), then transposed back for the mma
            Bt = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((TN, Q))
            B_c = ct.transpose(Bt)
        else:
            B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
        if M == 7 or M == 17:
            # a hand loop of rank-one updates over the chunk's positions
            xwf = xw.astype(ct.float32)
            Bf = B_c.astype(ct.float32)
            state = zeros
            for k in range(Q):
                x_k = ct.extract(xwf, (k, 0), shape=(1, TP)).reshape((TP,))
                B_k = ct.extract(Bf, (k, 0), shape=(1, TN)).reshape((TN,))
                if M == 7:
                    state = x_k[:, None] * B_k[None, :]  # assigned where it accumulates
                else:
                    state = state + x_k[:, None] * B_k[None, :]
        else:
            state = ct.mma(ct.transpose(xw), B_c, zeros)
        ct.store(states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))


@ct.kernel
def passing_s(states, dA_cumsum, initial_states, chunk_init_states, final_states, Q: ct.Constant[int],
              TP: ct.Constant[int], TN: ct.Constant[int], M: ct.Constant[int]):
    if M == 5:
        bi, hi = ct.bid(0), ct.bid(0)  # the first line's ct.bid(0) copied
    else:
        bi, hi = ct.bid(0), ct.bid(1)
    if M == 7:
        nh = states.shape[2]
        # the flattened (b * h) row index of a 2-D view, used on the 4-D array
        state = ct.load(initial_states, (bi * nh + hi, 0, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO)
    else:
        state = ct.load(initial_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO)
    state = state.reshape((TP, TN))
    nc = states.shape[1]
    if M == 1:
        n_iter = nc + 1  # "one more step for the final state"
    else:
        n_iter = nc
    for c in range(n_iter):
        if M == 8:
            ct.store(chunk_init_states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TN, TP)))  # (TN, TP) order
        else:
            ct.store(chunk_init_states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))
        if M == 3:
            a = ct.load(dA_cumsum, (bi, hi, c, Q), shape=())  # the - 1 forgotten
        else:
            a = ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=())
        decay = ct.exp(a)
        local = ct.load(states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        local = local.reshape((TP, TN))
        if M == 6:
            state = decay * (state + local)  # the chunk's own state decayed as well
        else:
            state = decay * state + local
    if M == 4:
        # "the state after the last chunk": the last update written out again after the loop
        a_last = ct.load(dA_cumsum, (bi, hi, nc - 1, Q - 1), shape=())
        local_last = ct.load(states, (bi, nc - 1, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        state = ct.exp(a_last) * state + local_last.reshape((TP, TN))
    if M == 2:
        ct.store(final_states, (hi, bi, 0, 0), state.reshape((1, 1, TP, TN)))  # batch and head swapped
    else:
        ct.store(final_states, (bi, hi, 0, 0), state.reshape((1, 1, TP, TN)))


@ct.kernel
def scan_s(x, dt_out, dA_cumsum, C, B, chunk_init_states, y, Q: ct.Constant[int], TP: ct.Constant[int],
           TN: ct.Constant[int], HEADS_PER_GROUP: ct.Constant[int], M: ct.Constant[int]):
    bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)
    g = hi // HEADS_PER_GROUP
    x_c = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((Q, TP))
    if M == 2:
        C_c = ct.load(C, (bi, c, g, 0), shape=(1, Q, 1, TN)).reshape((Q, TN))  # padding_mode forgotten
    else:
        C_c = ct.load(C, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    if M == 7:
        cs_idx = 0  # "the entering state is the initial state"
    else:
        cs_idx = c
    state = ct.load(chunk_init_states, (bi, cs_idx, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
    state = state.reshape((TP, TN))
    dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    if M == 4:
        dt_c = ct.log(1.0 + ct.exp(dt_c))  # softplus: dt taken to arrive raw
    if M == 3:
        dA_cs = ct.load(dA_cumsum, (0, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))  # batch 0
    else:
        dA_cs = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    pos = ct.arange(Q, dtype=ct.int32)
    causal = pos[:, None] >= pos[None, :]
    decay = ct.exp(ct.minimum(dA_cs[:, None] - dA_cs[None, :], 0.0))
    if M == 5:
        # the state term decayed up to the step BEFORE s (0 at s = 0)
        dA_prev = ct.sum(ct.where((pos[:, None] - 1) == pos[None, :], dA_cs[None, :], 0.0), axis=1)
        sdecay = ct.exp(dA_prev)
    else:
        sdecay = ct.exp(dA_cs)
    CB = ct.mma(C_c, ct.transpose(B_c), ct.zeros((Q, Q), dtype=ct.float32))
    P = ct.where(causal, CB * decay * dt_c[None, :], 0.0)
    if M == 1:
        st = ct.transpose(state)  # the cast to C.dtype forgotten
    else:
        st = ct.transpose(state.astype(C.dtype))
    past = ct.mma(C_c, st, ct.zeros((Q, TP), dtype=ct.float32))
    past = past * sdecay[:, None]
    if M == 8 or M == 18:
        # the outputs in two row blocks of BS = Q/2 rows
        BS = Q // 2
        if M == 8:
            n_blocks = Q // BS - 1
        else:
            n_blocks = Q // BS
        for rb in range(n_blocks):
            P_r = ct.extract(P, (rb, 0), shape=(BS, Q))
            past_r = ct.extract(past, (rb, 0), shape=(BS, TP))
            y_r = ct.mma(P_r.astype(x.dtype), x_c, ct.zeros((BS, TP), dtype=ct.float32)) + past_r
            ct.store(y, (bi, c * (Q // BS) + rb, hi, 0), y_r.astype(y.dtype).reshape((1, BS, 1, TP)))
    else:
        y_c = ct.mma(P.astype(x.dtype), x_c, ct.zeros((Q, TP), dtype=ct.float32)) + past
        if M == 6:
            # (1, 1, Q, TP) for (1, Q, 1, TP)
            ct.store(y, (bi, c, hi, 0), y_c.astype(y.dtype).reshape((1, 1, Q, TP)))
        else:
            ct.store(y, (bi, c, hi, 0), y_c.astype(y.dtype).reshape((1, Q, 1, TP)))


@ct.kernel
def passing_bwd_s(dS_out, dA_cumsum, chunk_init_states, dfinal_states, dstates, ddA_last, dinitial_states,
                  Q: ct.Constant[int], TP: ct.Constant[int], TN: ct.Constant[int], M: ct.Constant[int]):
    bi, hi = ct.bid(0), ct.bid(1)
    dS = ct.load(dfinal_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO).reshape((TP, TN))
    nchunks = dS_out.shape[1]
    for i in range(nchunks):
        c = nchunks - 1 - i
        if M == 7:
            # "dstates in half precision"
            ct.store(dstates, (bi, c, hi, 0, 0), dS.astype(ct.float16).reshape((1, 1, 1, TP, TN)))
        else:
            ct.store(dstates, (bi, c, hi, 0, 0), dS.reshape((1, 1, 1, TP, TN)))
        if M == 6:
            a = ct.load(dA_cumsum, (bi, hi, c - 1, Q - 1), shape=())  # "the decay before chunk c"
        else:
            a = ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=())
        g = ct.exp(a)
        if M == 5:
            # batch 0
            S = ct.load(chunk_init_states, (0, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        elif M == 3:
            # the state LEAVING chunk c ("the state the decay produced")
            S = ct.load(chunk_init_states, (bi, c + 1, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        else:
            S = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        S = S.reshape((TP, TN))
        own = ct.load(dS_out, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO).reshape((TP, TN))
        if M == 1:
            dd = g * ct.sum((dS + own) * S)  # chunk c's own gradient paired with S as well
        else:
            dd = g * ct.sum(dS * S)
        if M == 8:
            dd = ct.minimum(ct.maximum(dd, -1.0), 1.0)  # "clip the gradient"
        if M == 2:
            ct.store(ddA_last, (bi, hi, i), dd.reshape((1, 1, 1)))  # the loop counter for the chunk
        else:
            ct.store(ddA_last, (bi, hi, c), dd.reshape((1, 1, 1)))
        if M == 4 or M == 14:
            if c == 0:
                if M == 4:
                    dS = dS + own  # "chunk 0's decay acts before the initial state: not on its gradient"
                else:
                    dS = g * dS + own
            else:
                dS = g * dS + own
        else:
            dS = g * dS + own
    ct.store(dinitial_states, (bi, hi, 0, 0), dS.reshape((1, 1, TP, TN)))


#: exercise -> {M: the slip planted}
SLIPS = {
    "ex04": {
        1: ('store at the wrong place (element offset for a tile index, dA_cumsum store): dA_cumsum'
            " stored at tile index (bi, hi, c * Q, 0): the chunk's first element offset given where"
            ' the tile index c belongs (dt_out right)'),
        2: ('term counted twice / extra term (the output as the accumulator: dA_cumsum +=): the '
            'cumsum added to the tile loaded from dA_cumsum (the output, prefilled) before the '
            'store'),
        3: ('wrong loop bound (a doubling scan stopped one doubling early): a Hillis-Steele scan '
            'cs[s] += cs[s - d] for d = 1, 2, 4, ... with `while d < Q // 2` instead of d < Q'),
        4: ('reduction over the wrong set (circular shift in a doubling scan: the torch.roll '
            'habit): the Hillis-Steele shift cs[s - d] taken circularly, (s - d) mod Q (as '
            'torch.roll does), instead of 0 for s < d'),
        5: ('term left out (the zero padding of dt): dt loaded without padding_mode (default '
            'UNDETERMINED)'),
        6: ('wrong variable in a doubling scan (the input shifted, not the partial sums): Hillis-'
            'Steele scan with the shift applied to v (the per-step dt*A) in every doubling instead '
            'of to the running partial sums cs'),
        7: ('wrong dtype (the cumsum as a triangular matmul in bfloat16): the running sum as '
            'ct.mma(tril, dt*A) with both operands cast to bfloat16 ("mma wants half precision")'),
        8: ('wrong batch index (the dt_out store at batch 0): dt_out stored at (0, hi, c, 0) (a '
            "single-batch test's leftover); dA_cumsum stored at bi"),
    },
    "ex05": {
        1: ('wrong index units (ct.extract at an element offset in the K-loop): taught K-loop of '
            'two steps of TK = Q/2 rows with w_k = ct.extract(w, (kt * TK,), shape=(TK,)): the '
            'element offset where extract takes the TILE index kt'),
        2: ('wrong decay index (exclusive decay: from dA_cs[k-1]): w_k = exp(dA_last - dA_cs[k-1]) '
            '* dt_k with dA_cs[-1] = 0 ("the input at k also decays through its own step"), built '
            'by a masked shift'),
        3: ('wrong group index (divided by the number of groups): g = hi // ngroups (B.shape[2]) '
            'instead of hi // HEADS_PER_GROUP'),
        4: ('operand transposed by a reshape (B as (TN, Q), then ct.transpose): B loaded and '
            'reshaped straight to (TN, Q) "as Bᵀ", then ct.transpose\'d back to (Q, TN) for the mma'),
        5: ('store at the wrong place in the loop (states stored at the top of each K-step): taught'
            " K-loop: ct.store(states, ...) placed at the top of the loop body, before the step's "
            'mma'),
        6: ('wrong constant (exp2 with LOG2E divided): decay = ct.exp2((dA_last - dA_cs) / LOG2E) '
            'instead of * LOG2E'),
        7: ('assignment for accumulation (a hand loop of rank-one updates): state built by a loop '
            'over the positions k of outer products xw_k ⊗ B_k with `state = ...` instead of `state'
            ' = state + ...`'),
        8: ("wrong head index (x read at the group's first head): x loaded at head (hi // "
            "HEADS_PER_GROUP) * HEADS_PER_GROUP, the first head of hi's group (B's group mapping "
            "carried into x's index)"),
    },
    "ex06": {
        1: ('wrong loop bound (one step too many: range(nc + 1)): the chunk loop runs `for c in '
            'range(nc + 1)` ("one more step for the final state")'),
        2: ('store at the wrong place (final_states at (hi, bi)): final_states stored at (hi, bi, '
            '0, 0): batch and head swapped in the final store only'),
        3: ('mask / index off by one (decay read at position Q: the - 1 forgotten): the decay read '
            'at dA_cumsum[bi, hi, c, Q] instead of Q - 1'),
        4: ('term counted twice (the last update written out again after the loop): after the loop,'
            ' state = exp(a_{nc-1}) * state + states[nc-1] once more before final_states is stored'),
        5: ('wrong head index (hi = ct.bid(0): copy-paste): bi, hi = ct.bid(0), ct.bid(0) (the '
            'first id copied)'),
        6: ("scaling on the wrong term (the chunk's own state decayed too: decay * (state + "
            'local)): state = decay * (state + local)'),
        7: ('wrong batch/head index (a flattened (b * h) row index on the 4-D initial_states): '
            'initial_states loaded at (bi * h + hi, 0, 0, 0)'),
        8: ('store layout wrong (the entering state reshaped to (TN, TP)): chunk_init_states stored'
            ' as state.reshape((1, 1, 1, TN, TP))'),
    },
    "ex07": {
        1: ("wrong dtype (the state term's mma operand cast forgotten): past = ct.mma(C, "
            'ct.transpose(state), ...) without state.astype(C.dtype)'),
        2: ('term left out (the zero padding of C): C loaded without padding_mode (x and B keep '
            'ZERO)'),
        3: ('wrong batch index (dA_cumsum at batch 0): dA_cumsum loaded at (0, hi, c, 0)'),
        4: ('extra nonlinearity (softplus on dt_out): dt passed through softplus log(1 + exp(dt)) '
            'after loading ("dt arrives raw")'),
        5: ('wrong decay index (the state term decayed to the step before s: exclusive): the state '
            'term decayed by exp(dA_cs[s-1]) (1 at s = 0), built by a masked shift'),
        6: ('store layout wrong (y stored as a (1, 1, Q, TP) tile): y stored with y_c.reshape((1, '
            '1, Q, TP)) at (bi, c, hi, 0) instead of (1, Q, 1, TP)'),
        7: ('wrong chunk index (the entering state of chunk 0 for every chunk): the state loaded at'
            ' chunk_init_states[bi, 0, hi] ("the entering state is the initial state")'),
        8: ('wrong loop bound (row blocks: range(Q // BS - 1)): y computed in two row blocks of BS '
            '= Q/2 rows with `for rb in range(Q // BS - 1)`'),
    },
    "ex08": {
        1: ('term counted twice / extra term (own gradient paired with S in ddA_last): ddA_last = g'
            ' * sum((dS + dS_out[c]) * S)'),
        2: ('store at the wrong place (ddA_last at the loop counter): ddA_last stored at (bi, hi, '
            'i) instead of (bi, hi, c = nchunks - 1 - i)'),
        3: ('wrong chunk index (S of chunk c + 1: the state leaving chunk c): S loaded at '
            'chunk_init_states[bi, c + 1, hi] in ddA_last'),
        4: ("mask off by one (chunk 0's decay left out of the carry): for c == 0, dS = dS + "
            'dS_out[0] ("chunk 0\'s decay acts before the initial state")'),
        5: ('wrong batch index (S at batch 0): chunk_init_states loaded at (0, c, hi) for ddA_last'),
        6: ('wrong decay index (g of chunk c - 1): g read at dA_cumsum[bi, hi, c - 1, Q - 1] ("the '
            'decay before chunk c")'),
        7: ('wrong dtype (dstates stored through float16): dstates stored as dS.astype(ct.float16) '
            '("gradients in half precision")'),
        8: ('extra nonlinearity (ddA_last clipped to [-1, 1]): ddA_last clamped with min(max(g * '
            '<dS, S>, -1), 1) ("clip the gradient")'),
    },
}

KERNELS = {"ex04": cumsum_s, "ex05": state_s, "ex06": passing_s, "ex07": scan_s, "ex08": passing_bwd_s}

#: exercise -> M values that run a mistake's code path with the slip corrected (must pass)
SANITY = {"ex04": [13, 17], "ex05": [11, 17], "ex07": [18], "ex08": [14]}

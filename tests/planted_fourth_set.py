"""The fourth set of planted mistakes for the cuTile exercises 4-8 (docs/instructors.md): 40 slips written
from the exercises' contracts without reading the diagnosis code, measured on the checks before any fix, and
kept here as tested mistakes (``tests/test_exercise_diagnosis_sets.py`` says what each hint must name).

Each kernel is right for M = 0 and plants mistake M for M = 1..8; M above 10 (``SANITY``) runs a mistake's
alternative code path with the slip corrected, and must pass.
"""

from __future__ import annotations

import cuda.tile as ct

ZERO = ct.PaddingMode.ZERO
LOG2E = 1.4426950408889634


@ct.kernel
def cumsum_r(dt, A, dt_out, dA_cumsum, Q: ct.Constant[int], M: ct.Constant[int]):
    if M == 6:
        # the taught chunk_state kernel's decode of a fused (batch * nchunks + chunk) block id, copied onto
        # the exercise's (b, nchunks, h) grid, where ct.bid(1) is the chunk alone
        nchunks = dt_out.shape[2]
        pid_bc = ct.bid(1)
        bi = pid_bc // nchunks
        c = pid_bc % nchunks
        hi = ct.bid(2)
    else:
        bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)
    pos = ct.arange(Q, dtype=ct.int32)
    l = dt.shape[1]
    if M == 3:
        dt_c = ct.load(dt, (bi, c, 0), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,))  # head 0
    else:
        dt_c = ct.load(dt, (bi, c, hi), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,))
    if M == 1 or M == 11:
        # a hand mask of the ragged last chunk's tail
        nc1 = dt_out.shape[2]
        if c == nc1 - 1:
            if M == 1:
                dt_c = ct.where(pos < l % Q, dt_c, 0.0)  # "the last chunk holds l % Q positions"
            else:
                dt_c = ct.where(pos < l - c * Q, dt_c, 0.0)
    a = ct.load(A, (hi,), shape=())
    if M == 4:
        dt_c = dt_c * a  # TODO 2 started with `dt_c = dt_c * A` (the in-place habit) ...
    v = dt_c * a  # ... and then the product of the recipe
    if M == 5:
        v = ct.maximum(v, -20.0)  # "so that exp never underflows"
    if M == 2 or M == 12:
        # a hand running sum: every step k added to the positions s >= k
        cs = ct.zeros((Q,), dtype=ct.float32)
        for k in range(Q):
            if M == 2:
                cs = cs + ct.where(pos >= k, v, 0.0)  # the tile v where its element v_k belongs
            else:
                v_k = ct.sum(ct.where(pos == k, v, 0.0))
                cs = cs + ct.where(pos >= k, v_k, 0.0)
    elif M == 7 or M == 13:
        # the running sum as a masked (Q, Q) sum over the sources k <= s
        if M == 7:
            t = c * Q + pos  # target positions absolute (in the sequence), sources chunk-local
        else:
            t = pos
        tri = t[:, None] >= pos[None, :]
        cs = ct.sum(ct.where(tri, v[None, :], 0.0), axis=1)
    else:
        cs = ct.cumsum(v, axis=0)
    if M == 8:
        # the skeleton's placeholder line left below the learner's cumsum
        cs = ct.zeros((Q,), dtype=ct.float32)
    ct.store(dt_out, (bi, hi, c, 0), dt_c.reshape((1, 1, 1, Q)))
    ct.store(dA_cumsum, (bi, hi, c, 0), cs.reshape((1, 1, 1, Q)))


@ct.kernel
def state_r(x, B, dt_out, dA_cumsum, states, Q: ct.Constant[int], TP: ct.Constant[int], TN: ct.Constant[int],
            HEADS_PER_GROUP: ct.Constant[int], M: ct.Constant[int]):
    bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)
    if M == 2:
        g = hi % B.shape[2]  # heads dealt out to the groups in turn (interleaved)
    else:
        g = hi // HEADS_PER_GROUP
    dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    dA_cs = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    if M == 8:
        dA_cs = ct.cumsum(dA_cs, axis=0)  # dA_cumsum taken for the per-step dt*A and summed again
    dA_last = ct.extract(dA_cs, (Q - 1,), shape=(1,))
    decay = ct.exp(dA_last - dA_cs)
    w = decay * dt_c
    zeros = ct.zeros((TP, TN), dtype=ct.float32)
    if M == 1 or M == 11:
        # the taught kernel's K-loop: two steps of TK = Q/2 rows, the steps past the sequence end skipped
        TK = Q // 2
        l = x.shape[1]
        if M == 1:
            n_steps = min(Q // TK, (l - c * Q) // TK)  # floor: a partial last step dropped
        else:
            n_steps = min(Q // TK, ct.cdiv(l - c * Q, TK))
        state = zeros
        for kt in range(n_steps):
            x_k = ct.load(x, (bi, c * (Q // TK) + kt, hi, 0), shape=(1, TK, 1, TP), padding_mode=ZERO)
            B_k = ct.load(B, (bi, c * (Q // TK) + kt, g, 0), shape=(1, TK, 1, TN), padding_mode=ZERO)
            x_k = x_k.reshape((TK, TP))
            B_k = B_k.reshape((TK, TN))
            w_k = ct.extract(w, (kt,), shape=(TK,))
            xw_k = (x_k.astype(ct.float32) * w_k[:, None]).astype(x.dtype)
            state = ct.mma(ct.transpose(xw_k), B_k, state)
    else:
        x_c = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((Q, TP))
        B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
        if M == 4:
            xf = x_c.astype(ct.float32)
            x_c = (xf / (1.0 + ct.exp(-xf))).astype(x.dtype)  # silu: the conv's activation applied again
        if M == 6 or M == 13:
            # the weights split over the two operands: the decay on x's rows, dt on B
            xd = (x_c.astype(ct.float32) * decay[:, None]).astype(x.dtype)
            if M == 6:
                Bd = (B_c.astype(ct.float32) * dt_c[None, :]).astype(B.dtype)  # compiles only where TN == Q
            else:
                Bd = (B_c.astype(ct.float32) * dt_c[:, None]).astype(B.dtype)
            state = ct.mma(ct.transpose(xd), Bd, zeros)
        elif M == 7 or M == 12:
            # x taken as (TP, Q) directly, weighted along its columns
            if M == 7:
                xT = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((TP, Q))
            else:
                xT = ct.transpose(x_c)
            xTw = (xT.astype(ct.float32) * w[None, :]).astype(x.dtype)
            state = ct.mma(xTw, B_c, zeros)
        elif M == 5:
            xw = x_c.astype(ct.float32) * w[:, None]  # the cast back to x.dtype forgotten
            state = ct.mma(ct.transpose(xw), B_c, zeros)
        else:
            xw = (x_c.astype(ct.float32) * w[:, None]).astype(x.dtype)
            state = ct.mma(ct.transpose(xw), B_c, zeros)
            if M == 3:
                state = ct.mma(ct.transpose(xw), B_c, state)  # the mma line duplicated
    ct.store(states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))


@ct.kernel
def passing_r(states, dA_cumsum, initial_states, chunk_init_states, final_states, Q: ct.Constant[int],
              TP: ct.Constant[int], TN: ct.Constant[int], M: ct.Constant[int]):
    bi, hi = ct.bid(0), ct.bid(1)
    state = ct.load(initial_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO).reshape((TP, TN))
    nc = states.shape[1]
    if M == 5 or M == 11:
        # the chunk loop unrolled by two
        if M == 5:
            n_pairs = nc // 2
        else:
            n_pairs = ct.cdiv(nc, 2)
        for i in range(n_pairs):
            for j in range(2):
                c = 2 * i + j
                if c < nc:
                    ct.store(chunk_init_states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))
                    a = ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=())
                    local = ct.load(states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
                    state = ct.exp(a) * state + local.reshape((TP, TN))
    else:
        for c in range(nc):
            if M == 1:
                # (b, h, nc) order
                ct.store(chunk_init_states, (bi, hi, c, 0, 0), state.reshape((1, 1, 1, TP, TN)))
            else:
                ct.store(chunk_init_states, (bi, c, hi, 0, 0), state.reshape((1, 1, 1, TP, TN)))
            if M == 6:
                a = ct.load(dA_cumsum, (0, hi, c, Q - 1), shape=())  # batch 0
            else:
                a = ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=())
            decay = ct.exp(a)
            if M == 7:
                # the chunk's own state loaded into a variable named `state` (the array is `states`)
                state = ct.load(states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
                state = state.reshape((TP, TN))
                state = decay * state + state
            else:
                local = ct.load(states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
                local = local.reshape((TP, TN))
                if M == 2:
                    state = state + decay * state + local  # `state += decay * state + local`
                elif M == 4:
                    state = decay * state
                    if c < nc - 1:  # "the last chunk's own state is not passed on"
                        state = state + local
                else:
                    state = decay * state + local
                if M == 3:
                    state = ct.minimum(ct.maximum(state, -3.0), 3.0)  # "keep the carried state bounded"
    if M == 8:
        ct.store(final_states, (bi, hi, 0, 0), ct.transpose(state).reshape((1, 1, TP, TN)))  # TP == TN only
    else:
        ct.store(final_states, (bi, hi, 0, 0), state.reshape((1, 1, TP, TN)))


@ct.kernel
def scan_r(x, dt_out, dA_cumsum, C, B, chunk_init_states, y, Q: ct.Constant[int], TP: ct.Constant[int],
           TN: ct.Constant[int], HEADS_PER_GROUP: ct.Constant[int], M: ct.Constant[int]):
    bi, c, hi = ct.bid(0), ct.bid(1), ct.bid(2)
    g = hi // HEADS_PER_GROUP
    x_c = ct.load(x, (bi, c, hi, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((Q, TP))
    C_c = ct.load(C, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    B_c = ct.load(B, (bi, c, g, 0), shape=(1, Q, 1, TN), padding_mode=ZERO).reshape((Q, TN))
    state = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
    state = state.reshape((TP, TN))
    dt_c = ct.load(dt_out, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    dA_cs = ct.load(dA_cumsum, (bi, hi, c, 0), shape=(1, 1, 1, Q)).reshape((Q,))
    if M == 21:  # the first M=7, which passed the check (kept, not run)
        dA_cs = dA_cs.astype(x.dtype).astype(ct.float32)  # "computed in the inputs' dtype"
    pos = ct.arange(Q, dtype=ct.int32)
    causal = pos[:, None] >= pos[None, :]
    if M == 2 or M == 12:
        # the shipped kernel's exp2
        if M == 2:
            decay = ct.exp2(ct.minimum(dA_cs[:, None] - dA_cs[None, :], 0.0))  # LOG2E forgotten
            sdecay = ct.exp2(dA_cs)
        else:
            decay = ct.exp2(ct.minimum(dA_cs[:, None] - dA_cs[None, :], 0.0) * LOG2E)
            sdecay = ct.exp2(dA_cs * LOG2E)
    else:
        decay = ct.exp(ct.minimum(dA_cs[:, None] - dA_cs[None, :], 0.0))
        if M == 5:
            sdecay = ct.exp(dA_cs - ct.extract(dA_cs, (0,), shape=(1,)))  # "the state enters at position 0"
        else:
            sdecay = ct.exp(dA_cs)
    if M == 1 or M == 11:
        # dt folded into an operand of C Bᵀ (B̄ = dt B), P without dt
        if M == 1:
            C_c = (C_c.astype(ct.float32) * dt_c[:, None]).astype(C.dtype)  # C's rows (the targets s)
        else:
            B_c = (B_c.astype(ct.float32) * dt_c[:, None]).astype(B.dtype)
    if M == 4:
        CB = ct.mma(ct.transpose(C_c), B_c, ct.zeros((Q, Q), dtype=ct.float32))  # compiles only where TN == Q
    else:
        CB = ct.mma(C_c, ct.transpose(B_c), ct.zeros((Q, Q), dtype=ct.float32))
    if M == 6:
        CB = 30.0 * ct.tanh(CB / 30.0)  # logit soft-capping
    if M == 1 or M == 11:
        W = CB * decay
    else:
        W = CB * decay * dt_c[None, :]
    P = ct.where(causal, W, 0.0)
    if M == 3:
        # the output buffer used as the accumulator (the `y +=` habit)
        acc = ct.load(y, (bi, c, hi, 0), shape=(1, Q, 1, TP), padding_mode=ZERO).reshape((Q, TP))
        acc = acc.astype(ct.float32)
    else:
        acc = ct.zeros((Q, TP), dtype=ct.float32)
    y_c = ct.mma(P.astype(x.dtype), x_c, acc)
    past = ct.mma(C_c, ct.transpose(state.astype(C.dtype)), ct.zeros((Q, TP), dtype=ct.float32))
    past = past * sdecay[:, None]
    if M == 8:
        past = ct.where((pos == 0)[:, None], past, 0.0)  # "the state enters at position 0; P carries it on"
    y_c = y_c + past
    if M == 7:
        ct.store(y, (bi, c, hi, 0), y_c.astype(ct.bfloat16).reshape((1, Q, 1, TP)))  # bfloat16 hard-coded
    else:
        ct.store(y, (bi, c, hi, 0), y_c.astype(y.dtype).reshape((1, Q, 1, TP)))


@ct.kernel
def passing_bwd_r(dS_out, dA_cumsum, chunk_init_states, dfinal_states, dstates, ddA_last, dinitial_states,
                  Q: ct.Constant[int], TP: ct.Constant[int], TN: ct.Constant[int], M: ct.Constant[int]):
    bi, hi = ct.bid(0), ct.bid(1)
    if M == 7:
        dF = ct.load(dfinal_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN))  # padding_mode forgotten
    else:
        dF = ct.load(dfinal_states, (bi, hi, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO)
    dF = dF.reshape((TP, TN))
    dS = dF
    nchunks = dS_out.shape[1]
    for i in range(nchunks):
        c = nchunks - 1 - i
        if M == 1:
            ct.store(dstates, (bi, c, hi, 0, 0), ct.transpose(dS).reshape((1, 1, 1, TP, TN)))  # TP == TN only
        else:
            ct.store(dstates, (bi, c, hi, 0, 0), dS.reshape((1, 1, 1, TP, TN)))
        a = ct.load(dA_cumsum, (bi, hi, c, Q - 1), shape=())
        if M == 6:
            g = 1.0 / (1.0 + ct.exp(-a))  # sigmoid(a), the gate habit
        else:
            g = ct.exp(a)
        if M == 3 or M == 11:
            if c == nchunks - 1:
                if M == 3:
                    g = ct.full((), 1.0, dtype=ct.float32)  # "nothing after the last chunk to decay into"
                else:
                    g = ct.exp(a)
        S = ct.load(chunk_init_states, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO)
        S = S.reshape((TP, TN))
        ct.store(ddA_last, (bi, hi, c), (g * ct.sum(dS * S)).reshape((1, 1, 1)))
        own = ct.load(dS_out, (bi, c, hi, 0, 0), shape=(1, 1, 1, TP, TN), padding_mode=ZERO).reshape((TP, TN))
        if M == 8:
            dS = dS + own  # the decay left out of the carry
        else:
            dS = g * dS + own
        if M == 4:
            dS = dS.astype(ct.bfloat16).astype(ct.float32)  # "gradients in bf16"
    if M == 2:
        dS = dS + dF  # "the final state's gradient also reaches the initial state directly"
    if M == 5:
        ct.store(dstates, (bi, 0, hi, 0, 0), dS.reshape((1, 1, 1, TP, TN)))  # "the gradient entering chunk 0"
    else:
        ct.store(dinitial_states, (bi, hi, 0, 0), dS.reshape((1, 1, TP, TN)))


#: exercise -> {M: the slip planted}
SLIPS = {
    "ex04": {
        1: ('mask off by one (the ragged tail as l % Q, 0 when Q divides l): in the last chunk '
            'only, dt masked with where(pos < l % Q, dt, 0) ("the last chunk holds l % Q '
            'positions")'),
        2: ('term counted many times (the tile for its element in a hand running sum): hand running'
            ' sum `for k in range(Q): cs = cs + where(pos >= k, v, 0)`: the tile v where v_k '
            'belongs'),
        3: ("wrong head index (dt at head 0): dt loaded at (bi, c, 0) (a single-head test's "
            'leftover)'),
        4: ('term counted twice (A multiplied in place, then again): dt_c = dt_c * A (in place), '
            'then cumsum(dt_c * A); dt_out stored from dt_c'),
        5: ("extra nonlinearity (each step's exponent clamped at -20): v = maximum(dt * A, -20) "
            'before the cumsum ("so that exp never underflows")'),
        6: ("wrong batch index (the taught kernel's fused block id decoded on this grid): bi = "
            "ct.bid(1) // nchunks, c = ct.bid(1) % nchunks (the taught chunk_state kernel's decode "
            'of pid_bc = b * nchunks + c), while this grid is (b, nchunks, h) and ct.bid(1) is the '
            'chunk'),
        7: ('mask wrong (mixed coordinates in a masked running sum): the running sum as a masked '
            '(Q, Q) sum over axis 1 with the mask (c*Q + s) >= k: target position absolute, source '
            'chunk-local'),
        8: ("term left out (the skeleton's placeholder kept): the cumsum written above the "
            "skeleton's `dA_cs = ct.zeros((Q,), ...)  # placeholder: replace`, which was left in "
            'place'),
    },
    "ex05": {
        1: ("wrong loop bound (K-loop step count rounded down): taught kernel's K-loop in two steps"
            ' of TK = Q/2 rows with n_steps = min(2, (l - c*Q) // TK) (floor) instead of cdiv'),
        2: ('wrong group index (heads dealt to groups in turn): g = hi % ngroups (B.shape[2]) '
            'instead of hi // HEADS_PER_GROUP'),
        3: ('term counted twice (the mma line duplicated): state = mma(xwᵀ, B, zeros) followed by '
            'state = mma(xwᵀ, B, state)'),
        4: ("extra nonlinearity (silu on x): x passed through silu after loading (the conv's "
            'activation applied again)'),
        5: ('wrong dtype (the weighted x left in float32): xw = x.astype(float32) * w[:, None], '
            'without the cast back to x.dtype, given to the mma with B'),
        6: ("scaling on the wrong axis (dt on B's columns): the weights split over the operands: x "
            '* decay[:, None] and B * dt[None, :] (compiles only where TN == Q)'),
        7: ('operand transposed by a reshape (x as (TP, Q)): x loaded and reshaped straight to (TP,'
            ' Q) as if that were xᵀ, weighted along its columns (* w[None, :]), then mma(xTw, B)'),
        8: ('reduction over the wrong set (the running sum summed again): dA_cs = cumsum(dA_cumsum '
            'row) before dA_last and the decays (dA_cumsum taken for the per-step dt*A)'),
    },
    "ex06": {
        1: ('store at the wrong place (entering state at (bi, hi, c)): chunk_init_states stored at '
            "(bi, hi, c, 0, 0), dA_cumsum's axis order, instead of (bi, c, hi, 0, 0)"),
        2: ('term counted twice (the carry kept and added decayed: +=): state = state + decay * '
            'state + local (written as `state += decay * state + local`)'),
        3: ('extra nonlinearity (the carry clipped to [-3, 3]): state = clamp(decay * state + '
            'local, -3, 3) after each update ("keep the carried state bounded")'),
        4: ("mask off by one (the last chunk's own state skipped): the local state added only for c"
            ' < nc - 1 ("the last chunk\'s own state is not passed on")'),
        5: ('wrong loop bound (loop unrolled by two, nc // 2 pairs): the chunk loop unrolled by '
            'two: for i in range(nc // 2), chunks 2i and 2i+1 (a guard c < nc inside)'),
        6: ('wrong batch index (decay at batch 0): the decay read at dA_cumsum[0, hi, c, Q-1]'),
        7: ("term left out (carry overwritten: the local state loaded into `state`): the chunk's "
            'own state loaded into a variable named `state` (the array is `states`), then state = '
            'decay * state + state'),
        8: ('operand transposed (final_states stored transposed): final_states stored as '
            'ct.transpose(state) (compiles only where TP == TN)'),
    },
    "ex07": {
        1: ('scaling on the wrong operand (dt folded into C instead of B): dt folded into an '
            'operand of C Bᵀ: C scaled by dt[:, None] (its rows, the targets s), P without dt; the '
            'scaled C also used in the state term'),
        2: ('wrong constant (exp2 without LOG2E, both decays): decay = exp2(min(dA_s - dA_k, 0)) '
            "and the state term's exp2(dA_s): the shipped kernel's exp2 without the LOG2E factor"),
        3: ('extra term (the output buffer as the accumulator: y +=): P @ x accumulated onto the '
            'tile loaded from y (the output, prefilled with -8192) instead of zeros'),
        4: ("operand transposed (Cᵀ B for C Bᵀ): CB = ct.mma(ct.transpose(C), B) (chunk_state's xwᵀ"
            ' B pattern copied; compiles only where TN == Q)'),
        5: ('wrong decay index (state term relative to position 0): the state term decayed by '
            'exp(dA_cs[s] - dA_cs[0]) ("the state enters at position 0")'),
        6: ('extra nonlinearity (the scores soft-capped): CB = 30 * tanh(CB / 30) (attention logit '
            'soft-capping)'),
        7: ('wrong dtype (the output cast to a hard-coded bfloat16): y cast with '
            'y_c.astype(ct.bfloat16) before the store (bfloat16 hard-coded where y.dtype belongs); '
            "the store converts it back to y's dtype"),
        8: ('mask wrong (the state term only at position 0): the state term zeroed for every '
            'position but 0 ("the state enters at position 0; P carries it on")'),
    },
    "ex08": {
        1: ('operand transposed (dstates stored transposed): dstates[c] stored as ct.transpose(dS) '
            '(compiles only where TP == TN)'),
        2: ('term counted twice (d final_states added again at the end): after the loop, '
            'dinitial_states = dS + dfinal_states'),
        3: ("mask off by one (the last chunk's decay taken as 1): g = 1 for c = nchunks - 1 "
            '("nothing after the last chunk to decay into")'),
        4: ('wrong dtype (carried gradient rounded to bfloat16): dS rounded through bfloat16 after '
            'each update ("gradients in bf16")'),
        5: ('store at the wrong place (dinitial_states into dstates[0]): the final carry stored '
            'into dstates[bi, 0, hi] ("the gradient entering chunk 0"); dinitial_states never '
            'written'),
        6: ('extra nonlinearity (sigmoid for exp: the gate habit): g = 1 / (1 + exp(-a)) instead of'
            ' exp(a)'),
        7: ('term left out (the zero padding of dfinal_states): dfinal_states loaded without '
            'padding_mode (S and dS_out keep ZERO)'),
        8: ('term left out (the decay in the carry): dS = dS + dS_out[c] (g kept in ddA_last only)'),
    },
}

KERNELS = {"ex04": cumsum_r, "ex05": state_r, "ex06": passing_r, "ex07": scan_r, "ex08": passing_bwd_r}

#: exercise -> M values that run a mistake's code path with the slip corrected (must pass)
SANITY = {"ex04": [11, 12, 13], "ex05": [11, 12, 13], "ex06": [11], "ex07": [11, 12], "ex08": [11]}

"""nn.GRUCell's math over whole sequences, with a hand-written backward: the learner's hot loop.

Run step by step under autograd, a GRUCell records about twenty operations per step, and its
backward replays them one step at a time, weight gradients included: T small matmuls each for
dW_ih and dW_hh. Here only the recurrence itself goes step by step:

  forward, per chunk of steps   the input projections W_ih x + b_ih of the chunk's steps in one
                                matmul; then per step one small matmul (W_hh h + b_hh) and a few
                                elementwise operations; while those are in cache, the training pass
                                also writes the factors F the backward needs (_step_factors)
  backward, per chunk, from     per step a few multiplies turn F into the gate gradients G, and one
  the last                      small matmul carries the gradient to the previous step; then the
                                chunk's dW_ih, dW_hh, biases and gradient of x in three big matmuls

The math is the GRUCell's, in PyTorch's gate order r, z, n:
    r  = sigmoid(W_ir x + b_ir + W_hr h + b_hr)
    z  = sigmoid(W_iz x + b_iz + W_hz h + b_hz)
    n  = tanh(a),  a = W_in x + b_in + r * hn,  hn = W_hn h + b_hn
    h' = (1 - z) * n + z * h = n + z * (h - n)
tanh(a) is computed as 2 * sigmoid(2a) - 1: sigmoid is several times faster than tanh on CPU, and
doubling W_in and b_in gives 2a exactly (scaling by 2 rounds nothing).

Given dh' (the gradient of h'), with s_r = r(1 - r), s_z = z(1 - z) and q = 1 - n^2:
    da = dh' (1 - z) q      the gradient of a, so of W_in x + b_in; r da is that of hn
    dr = da hn,  dz = dh' (h - n),  and the gradient of h is dh' z + [dr s_r, dz s_z, r da] @ W_hh
so dh' times F = [(1 - z) q r, (1 - z) q hn s_r, (h - n) s_z, (1 - z) q, z] (blocks hn, r, z, a, h)
gives, side by side, G = the gradients of the pre-activations hn, r, z (h's projections: blocks
0-2) and r, z, a (x's projections: blocks 1-3), then dh' z. This block order makes both matrices of
pre-activation gradients column ranges of one buffer.

With a matmul dtype of bfloat16 the matmuls (and their bias additions) run in bfloat16; the memory,
the gates and all elementwise math stay in the parameters' dtype (float32): this torch's bfloat16
elementwise kernels are slower than its float32 ones, and the recurrence keeps its precision.

gru_sequence_pair steps a second GRU without gradients (the target network) in the same loop: the
memories of both are stacked [2, rows, hidden], so one batched matmul and one set of elementwise
operations per step serve both. Each operation on [rows, ...] costs a few microseconds beyond its
arithmetic; the pair saves 3-5% of a bfloat16 training step on 2 cores.
"""
import torch as th
import torch.nn as nn
from torch.autograd.function import once_differentiable

# Steps x sequences per chunk: enough rows for efficient matmuls, while a chunk's gate and factor buffers
# (9 MB per GRU and 16 MB in float32; the gates half that in bfloat16) stay near a 32 MB L3 cache; the
# step time hardly changed from 6k to 25k rows.
CHUNK_ROWS = 12288
N_FACTORS = 5  # blocks of F: hn, r, z, a, h (see the module docstring)
ONE, MINUS_ONE = th.tensor(1.0), th.tensor(-1.0)  # 0-dim: x + alpha * y and friends in one operation


def gru_sequence(cell: nn.GRUCell, x: th.Tensor, h0: th.Tensor | None = None,
                 dtype: th.dtype | None = None) -> th.Tensor:
    """x [T, rows, input], h0 [rows, hidden] (None = zeros) -> the memory after each step
    [T, rows, hidden] in the cell's dtype: what T calls of ``cell`` give, with the matmuls in
    ``dtype`` (None = the cell's); autocast does not apply inside.

    With gradients enabled it is differentiable (once) in x, h0 and the cell's parameters;
    without, nothing is kept for a backward pass."""
    return gru_sequence_pair(cell, x, h0, dtype)[0]


def gru_sequence_pair(cell: nn.GRUCell, x: th.Tensor, h0: th.Tensor | None = None, dtype: th.dtype | None = None,
                      other: tuple[nn.GRUCell, th.Tensor] | None = None) -> tuple[th.Tensor, th.Tensor | None]:
    """gru_sequence of ``cell`` and, given ``other`` = (cell, x) of the same sizes, of a second GRU
    from zero memory, without gradients, stepped in the same loop: per step one batched matmul and
    one set of elementwise operations serve both (the learner's online and target networks; each
    operation has a fixed cost that two small ones pay twice). Returns (memory of cell, memory of
    the other or None), each [T, rows, hidden]."""
    cells = [cell] + ([other[0]] if other is not None else [])
    if any(c.bias_ih is None for c in cells):
        raise ValueError("gru_sequence needs a GRUCell with biases")
    weights = (cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)
    if h0 is None:
        h0 = x.new_zeros(x.shape[1], cell.hidden_size, dtype=cell.weight_hh.dtype)  # [rows, hidden]
    dtype = dtype or cell.weight_hh.dtype
    with th.autocast(device_type=x.device.type, enabled=False):
        other_inputs = None
        if other is not None:
            with th.no_grad():
                other_inputs = (other[1], _compute_weights(other[0].weight_ih, other[0].weight_hh,
                                                           other[0].bias_ih, other[0].bias_hh, dtype))
        if th.is_grad_enabled() and any(t.requires_grad for t in (x, h0, *weights)):
            outputs, other_outputs = _GRUSequence.apply(x, h0, *weights, dtype, other_inputs)
            return outputs, other_outputs
        with th.no_grad():
            memory, _ = _run(x, h0, _compute_weights(*weights, dtype), with_factors=False, other=other_inputs)
            return memory[0, 1:], memory[1, 1:] if other is not None else None


def _compute_weights(w_ih: th.Tensor, w_hh: th.Tensor, b_ih: th.Tensor, b_hh: th.Tensor,
                     dtype: th.dtype) -> tuple:
    """(W_ih^T [input, 3*hidden], b_ih) with the n part doubled (for tanh(a) = 2 sigmoid(2a) - 1),
    W_hh^T [hidden, 3*hidden], b_hh; all in dtype."""
    hidden = w_hh.shape[1]
    scale = w_ih.new_ones(3 * hidden)  # [3*hidden]
    scale[2 * hidden:] = 2
    return (w_ih.t() * scale).to(dtype), (b_ih * scale).to(dtype), w_hh.t().to(dtype), b_hh.to(dtype)


def _chunks(steps: int, rows: int) -> list:
    """(start, stop) step ranges of about CHUNK_ROWS rows each."""
    size = max(1, CHUNK_ROWS // rows)
    return [(start, min(start + size, steps)) for start in range(0, steps, size)]


def _run(x: th.Tensor, h0: th.Tensor, weights: tuple, with_factors: bool, other: tuple | None = None) -> tuple:
    """The forward loop over G = 1 or 2 GRUs (the second, `other` = (x, weights), from zero memory):
    (memory before and after each step [G, T + 1, rows, hidden] (h0 first), and with_factors the
    factors F of the first GRU for each chunk [steps, rows, 5*hidden], else None)."""
    xs, all_weights = [x], [weights]
    if other is not None:
        xs.append(other[0])
        all_weights.append(other[1])
    w_ih2_t, b_ih2, w_hh_t, b_hh = (th.stack(parts) for parts in zip(*all_weights))  # each [G, ...]
    b_hh = b_hh.unsqueeze(1)  # [G, 1, 3*hidden]
    groups = len(xs)
    steps, rows, _ = x.shape
    hidden = h0.shape[1]
    memory = h0.new_empty(groups, steps + 1, rows, hidden)  # [G, T + 1, rows, hidden]
    memory[0, 0] = h0
    memory[1:, 0] = 0
    factors = []
    for start, stop in _chunks(steps, rows):
        gi = memory.new_empty(groups, (stop - start) * rows, 3 * hidden, dtype=w_ih2_t.dtype)  # [G, k*rows, 3*hidden]
        for group, x_group in enumerate(xs):
            x_chunk = x_group[start:stop].reshape(-1, x_group.shape[2])  # [k*rows, input]
            th.addmm(b_ih2[group], x_chunk.to(w_ih2_t.dtype), w_ih2_t[group], out=gi[group])
        gi = gi.view(groups, stop - start, rows, -1)  # [G, k, rows, 3*hidden]
        chunk_factors = memory.new_empty(stop - start, rows, N_FACTORS * hidden) if with_factors else None
        for k in range(stop - start):
            h = memory[:, start + k]  # [G, rows, hidden]
            gh = th.baddbmm(b_hh, h.to(w_hh_t.dtype), w_hh_t).to(h.dtype)  # [G, rows, 3*hidden]
            _step(gi[:, k].to(h.dtype), gh, h, memory[:, start + k + 1],
                  None if chunk_factors is None else chunk_factors[k])
        factors.append(chunk_factors)
    return memory, factors if with_factors else None


def _step(gi: th.Tensor, gh: th.Tensor, h: th.Tensor, h_out: th.Tensor, factors: th.Tensor | None) -> None:
    """One GRU step of each of G GRUs from the projections gi (n part doubled) and gh
    [G, rows, 3*hidden] of x and h: writes the new memory into h_out [G, rows, hidden], and the
    first GRU's F into ``factors`` [rows, 5*hidden] if given."""
    hidden = h.shape[-1]
    rz = th.add(gi[..., :2 * hidden], gh[..., :2 * hidden]).sigmoid_()  # [G, rows, 2*hidden]: r, z
    r, z = rz[..., :hidden], rz[..., hidden:]
    hn = gh[..., 2 * hidden:]  # [G, rows, hidden]
    s = th.addcmul(gi[..., 2 * hidden:], r, hn, value=2).sigmoid_()  # sigmoid(2a)
    n = th.add(MINUS_ONE, s, alpha=2)  # tanh(a)
    h_minus_n = h - n
    th.addcmul(n, z, h_minus_n, out=h_out)  # n + z (h - n)
    if factors is not None:
        _step_factors(rz[0], r[0], z[0], n[0], hn[0], h_minus_n[0], factors)


def _step_factors(rz: th.Tensor, r: th.Tensor, z: th.Tensor, n: th.Tensor, hn: th.Tensor, h_minus_n: th.Tensor,
                  factors: th.Tensor) -> None:
    """F = [(1 - z) q r, (1 - z) q hn s_r, (h - n) s_z, (1 - z) q, z] into factors [rows, 5*hidden];
    r and z are the halves of rz."""
    hidden = n.shape[1]
    f_hn, f_r, f_z, f_a, f_h = factors.split(hidden, dim=1)  # [rows, hidden] views each
    s_rz = th.addcmul(rz, rz, rz, value=-1)  # [rows, 2*hidden]: s_r, s_z
    q = th.addcmul(ONE, n, n, value=-1)  # 1 - n^2
    th.addcmul(q, z, q, value=-1, out=f_a)  # (1 - z) q
    th.mul(f_a, r, out=f_hn)
    th.mul(f_a, hn, out=f_r).mul_(s_rz[:, :hidden])
    th.mul(h_minus_n, s_rz[:, hidden:], out=f_z)
    f_h.copy_(z)


class _GRUSequence(th.autograd.Function):
    """gru_sequence with gradients; see the module docstring for the math. The backward turns the
    factor buffers into the gradients in place (a second buffer of their size measured slower), so
    it runs once per forward: a second backward through the same graph raises."""

    @staticmethod
    def forward(ctx, x, h0, w_ih, w_hh, b_ih, b_hh, dtype, other):
        weights = _compute_weights(w_ih, w_hh, b_ih, b_hh, dtype)
        memory, factors = _run(x, h0, weights, with_factors=True, other=other)
        ctx.save_for_backward(x, memory[0], w_ih, w_hh)
        ctx.dtype = dtype
        ctx.factors = factors
        if other is None:
            return memory[0, 1:], None
        other_outputs = memory[1, 1:]
        ctx.mark_non_differentiable(other_outputs)
        return memory[0, 1:], other_outputs

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_outputs, _):
        if ctx.factors is None:
            raise RuntimeError("gru_sequence's backward runs once per forward (it turns its buffers into gradients)")
        x, memory, w_ih, w_hh = ctx.saved_tensors
        factors, ctx.factors = ctx.factors, None
        grads = _Grads(x, memory, w_ih.to(ctx.dtype), w_hh.to(ctx.dtype))
        dh = memory.new_zeros(memory.shape[1:])  # [rows, hidden]: dL/dh carried back in time
        chunks = _chunks(x.shape[0], x.shape[1])
        for (start, stop), chunk_factors in zip(reversed(chunks), reversed(factors)):
            matmul_grads = grads.matmul_buffer(chunk_factors)  # [k, rows, 4*hidden]
            dh = _backward_steps(chunk_factors, grad_outputs[start:stop], dh, grads.w_hh_by_block, matmul_grads)
            grads.add_chunk(matmul_grads, x[start:stop], memory[start:stop], start, stop)
        return (grads.dx.to(x.dtype), dh, *grads.parameter_grads(), None, None)


def _backward_steps(factors: th.Tensor, grad_outputs: th.Tensor, dh: th.Tensor, w_hh_by_block: th.Tensor,
                    matmul_grads: th.Tensor) -> th.Tensor:
    """From a chunk's last step to its first: turns its factors [k, rows, 5*hidden] into G and dh' z
    (in place) and writes G into matmul_grads [k, rows, 4*hidden] (in the matmul dtype; a view of the
    factors when that is theirs). dh [rows, hidden] is dL/dh after the chunk's last step,
    w_hh_by_block [3*hidden, hidden] W_hh's rows in block order hn, r, z; returns dL/dh before its
    first step."""
    rows, hidden = dh.shape
    separate = matmul_grads.data_ptr() != factors.data_ptr()  # G goes to its own buffer (bfloat16 matmuls)
    for k in range(factors.shape[0] - 1, -1, -1):
        dh.add_(grad_outputs[k])  # the gradient of this step's output h' (dh is always a fresh buffer)
        grads = factors[k]  # [rows, 5*hidden]
        for block in grads.view(rows, N_FACTORS, hidden).unbind(1):  # faster than one broadcast multiply
            block.mul_(dh)
        if separate:
            matmul_grads[k].copy_(grads[:, :4 * hidden])
        dh = _addmm(grads[:, 4 * hidden:], matmul_grads[k, :, :3 * hidden], w_hh_by_block)  # [rows, hidden]
    return dh


def _addmm(base: th.Tensor, a: th.Tensor, w: th.Tensor) -> th.Tensor:
    """base + a @ w, the matmul in a's and w's dtype, the sum in base's."""
    if w.dtype == base.dtype:
        return th.addmm(base, a, w)
    return th.mm(a, w).to(base.dtype).add_(base)


class _Grads:
    """The gradients of x and of the cell's parameters, added up chunk by chunk."""

    def __init__(self, x: th.Tensor, memory: th.Tensor, w_ih: th.Tensor, w_hh: th.Tensor):
        """w_ih [3*hidden, input] and w_hh [3*hidden, hidden]: the cell's weights in the matmul dtype."""
        hidden = memory.shape[2]
        self.dtype = w_ih.dtype
        self.w_ih = memory.new_zeros(3 * hidden, x.shape[2])  # [3*hidden, input], rows r, z, n
        self.w_hh_blocks = memory.new_zeros(3 * hidden, hidden)  # [3*hidden, hidden], rows hn, r, z
        self.bias_sums = memory.new_zeros(4 * hidden)  # G summed over steps and rows: hn, r, z, a
        self.dx = x.new_empty(x.shape, dtype=self.dtype)  # [T, rows, input]
        self.w_ih_matrix = w_ih  # [3*hidden, input], rows r, z, n
        self.w_hh_by_block = _gate_rows_to_blocks(w_hh)  # [3*hidden, hidden], rows hn, r, z

    def matmul_buffer(self, factors: th.Tensor) -> th.Tensor:
        """Where _backward_steps writes a chunk's G [k, rows, 4*hidden]: the factors' first blocks
        when the matmuls run in their dtype, else a buffer in the matmul dtype."""
        hidden = self.w_hh_blocks.shape[1]
        if factors.dtype == self.dtype:
            return factors[..., :4 * hidden]
        return factors.new_empty(*factors.shape[:2], 4 * hidden, dtype=self.dtype)

    def add_chunk(self, grads: th.Tensor, x: th.Tensor, memory_before: th.Tensor, start: int, stop: int) -> None:
        """Adds steps [start, stop): grads [k, rows, 4*hidden] (G, in the matmul dtype), x [k, rows, input],
        memory_before [k, rows, hidden] (the memory each step started from)."""
        hidden = memory_before.shape[2]
        grads = grads.reshape(-1, grads.shape[2])  # [k*rows, 4*hidden]
        of_h, of_x = grads[:, :3 * hidden], grads[:, hidden:]  # [k*rows, 3*hidden] each: hn, r, z and r, z, a
        x = x.reshape(-1, x.shape[2]).to(self.dtype)  # [k*rows, input]
        h = memory_before.reshape(-1, hidden).to(self.dtype)  # [k*rows, hidden]
        self.bias_sums += th.mm(grads.new_ones(1, grads.shape[0]), grads)[0]  # faster than grads.sum(0)
        self.w_hh_blocks += th.mm(of_h.t(), h)
        self.w_ih += th.mm(of_x.t(), x)
        th.mm(of_x, self.w_ih_matrix, out=self.dx[start:stop].view(-1, x.shape[1]))

    def parameter_grads(self) -> tuple:
        """(dW_ih, dW_hh, db_ih, db_hh) in the GRUCell's row order r, z, n."""
        hidden = self.w_hh_blocks.shape[1]
        return (self.w_ih, _block_rows_to_gates(self.w_hh_blocks), self.bias_sums[hidden:],
                _block_rows_to_gates(self.bias_sums[:3 * hidden]))


def _gate_rows_to_blocks(rows: th.Tensor) -> th.Tensor:
    """Rows in gate order r, z, n -> block order hn, r, z (3*hidden rows)."""
    hidden = rows.shape[0] // 3
    return th.cat([rows[2 * hidden:], rows[:2 * hidden]])


def _block_rows_to_gates(rows: th.Tensor) -> th.Tensor:
    """Rows in block order hn, r, z -> gate order r, z, n (3*hidden rows)."""
    hidden = rows.shape[0] // 3
    return th.cat([rows[hidden:], rows[:hidden]])


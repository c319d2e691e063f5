"""gru_sequence, the GRU over whole sequences with a hand-written backward: its values and gradients
against nn.GRUCell run step by step under autograd (and against finite differences), in float64 and
float32, from zero or given memory, over one or several chunks; its no-grad and bfloat16 paths;
the pair of GRUs stepped in one loop."""
import pytest
import torch as th

import modules.agents.gru_sequence as gru_module
from modules.agents.gru_sequence import gru_sequence, gru_sequence_pair
from modules.agents.n_rnn_agent import NRNNAgent
from test_controllers import make_args

th.set_num_threads(1)

T, ROWS, INPUT, HIDDEN = 7, 5, 6, 4
TOLERANCE = {th.float64: 1e-10, th.float32: 1e-5}


@pytest.fixture(params=[None, 2 * ROWS], ids=["one_chunk", "chunks_of_2_steps"])
def chunk_rows(request, monkeypatch):
    """Runs a test with all steps in one chunk, and with chunks of 2 steps (the last one of 1)."""
    if request.param is not None:
        monkeypatch.setattr(gru_module, "CHUNK_ROWS", request.param)
    return request.param


def make_problem(dtype: th.dtype, with_h0: bool, seed: int = 0):
    """(cell, x [T, ROWS, INPUT], h0 [ROWS, HIDDEN] or None, output weights [T, ROWS, HIDDEN])."""
    th.manual_seed(seed)
    cell = th.nn.GRUCell(INPUT, HIDDEN).to(dtype)
    x = th.randn(T, ROWS, INPUT, dtype=dtype, requires_grad=True)
    h0 = th.randn(ROWS, HIDDEN, dtype=dtype, requires_grad=True) if with_h0 else None
    return cell, x, h0, th.randn(T, ROWS, HIDDEN, dtype=dtype)


def grucell_steps(cell: th.nn.GRUCell, x: th.Tensor, h0: th.Tensor | None) -> th.Tensor:
    """The reference: the cell once per step, [T, rows, hidden]."""
    outputs, h = [], h0
    for x_t in x.unbind(0):
        h = cell(x_t, h)
        outputs.append(h)
    return th.stack(outputs)


def values_and_grads(run, cell, x, h0, weights) -> list:
    """[outputs, dL/dx, dL/dh0 (if given), dL/d each cell parameter] for L = sum(weights * outputs)."""
    inputs = [x] + ([h0] if h0 is not None else []) + list(cell.parameters())
    outputs = run(cell, x, h0)
    return [outputs.detach()] + list(th.autograd.grad((outputs * weights).sum(), inputs))


@pytest.mark.parametrize("dtype", [th.float64, th.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("with_h0", [False, True], ids=["zero_memory", "given_memory"])
def test_values_and_gradients_match_grucell_autograd(dtype, with_h0, chunk_rows):
    problem = make_problem(dtype, with_h0)
    ours = values_and_grads(gru_sequence, *problem)
    reference = values_and_grads(grucell_steps, *problem)
    for got, expected in zip(ours, reference, strict=True):
        assert th.allclose(got, expected, rtol=0, atol=TOLERANCE[dtype])


def test_gradients_match_finite_differences(chunk_rows):
    # gradcheck itself runs the backward twice on one forward, which gru_sequence refuses.
    cell, x, h0, weights = make_problem(th.float64, with_h0=True)
    inputs = [x, h0] + list(cell.parameters())
    analytical = values_and_grads(gru_sequence, cell, x, h0, weights)[1:]
    step = 1e-6
    with th.no_grad():
        for tensor, grad in zip(inputs, analytical, strict=True):
            for i in range(tensor.numel()):
                original = tensor.view(-1)[i].item()
                losses = []
                for shift in (step, -step):
                    tensor.view(-1)[i] = original + shift
                    losses.append((gru_sequence(cell, x, h0) * weights).sum().item())
                tensor.view(-1)[i] = original
                assert (losses[0] - losses[1]) / (2 * step) == pytest.approx(grad.view(-1)[i].item(), abs=1e-7)


@pytest.mark.parametrize("with_h0", [False, True], ids=["zero_memory", "given_memory"])
def test_agent_with_layer_norm_matches_step_by_step_gradients(with_h0):
    th.manual_seed(1)
    agent = NRNNAgent(INPUT, make_args(rnn_hidden_dim=HIDDEN, use_layer_norm=True)).double()
    inputs = th.randn(2, T, 3, INPUT, dtype=th.float64)  # [bs, T, n_agents, input]
    hidden = th.randn(2, 3, HIDDEN, dtype=th.float64) if with_h0 else None

    fused = agent.forward_sequence(inputs, hidden)  # [bs, T, n_agents, n_actions]
    fused_grads = th.autograd.grad(fused.square().sum(), list(agent.parameters()))
    steps, h = [], hidden
    for t in range(T):
        q, h = agent(inputs[:, t], h)
        steps.append(q)
    stepwise = th.stack(steps, dim=1)  # [bs, T, n_agents, n_actions]
    stepwise_grads = th.autograd.grad(stepwise.square().sum(), list(agent.parameters()))

    assert th.allclose(fused, stepwise, rtol=0, atol=1e-12)
    for got, expected in zip(fused_grads, stepwise_grads, strict=True):
        assert th.allclose(got, expected, rtol=0, atol=1e-10)


def test_without_gradients_nothing_is_kept_and_the_values_are_the_same(chunk_rows):
    cell, x, h0, _ = make_problem(th.float32, with_h0=True)
    with_grad = gru_sequence(cell, x, h0)
    with th.no_grad():
        without = gru_sequence(cell, x, h0)
    assert with_grad.grad_fn is not None and without.grad_fn is None
    assert th.equal(with_grad.detach(), without)


def test_bfloat16_matmuls_stay_close_to_float32(chunk_rows):
    cell, x, h0, weights = make_problem(th.float32, with_h0=True)
    reference = values_and_grads(gru_sequence, cell, x, h0, weights)
    ours = values_and_grads(lambda *args: gru_sequence(*args, dtype=th.bfloat16), cell, x, h0, weights)
    assert ours[0].dtype == th.float32  # the memory stays float32
    for got, expected in zip(ours, reference, strict=True):
        assert not th.equal(got, expected)  # bfloat16 did run
        assert (got - expected).norm() <= 0.02 * expected.norm()


def test_autocast_does_not_reach_inside():
    cell, x, h0, _ = make_problem(th.float32, with_h0=True)
    with th.autocast(device_type="cpu", dtype=th.bfloat16):
        under_autocast = gru_sequence(cell, x, h0)
    assert th.equal(under_autocast, gru_sequence(cell, x, h0))


def test_a_second_backward_is_refused():
    cell, x, h0, weights = make_problem(th.float32, with_h0=True)
    loss = (gru_sequence(cell, x, h0) * weights).sum()
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="runs once per forward"):
        loss.backward()


def test_a_cell_without_biases_is_rejected():
    with pytest.raises(ValueError, match="needs a GRUCell with biases"):
        gru_sequence(th.nn.GRUCell(INPUT, HIDDEN, bias=False), th.randn(T, ROWS, INPUT))


@pytest.mark.parametrize("dtype", [th.float64, th.float32, th.bfloat16], ids=["float64", "float32", "bfloat16"])
def test_a_pair_gives_what_each_gives_alone(dtype, chunk_rows):
    """The second GRU (zero memory, no gradients) beside the first changes neither's values nor
    the first one's gradients; bfloat16 = matmul dtype, the cells and memory in float32."""
    cell_dtype = th.float32 if dtype == th.bfloat16 else dtype
    cell, x, h0, weights = make_problem(cell_dtype, with_h0=True)
    other, other_x, _, _ = make_problem(cell_dtype, with_h0=False, seed=1)
    alone = values_and_grads(lambda *args: gru_sequence(*args, dtype=dtype), cell, x, h0, weights)
    with th.no_grad():
        other_alone = gru_sequence(other, other_x, dtype=dtype)

    outputs = {}

    def paired(*args):
        outputs["first"], outputs["other"] = gru_sequence_pair(*args, dtype=dtype, other=(other, other_x))
        return outputs["first"]

    together = values_and_grads(paired, cell, x, h0, weights)
    tolerance = {th.float64: 1e-12, th.float32: 1e-6, th.bfloat16: 1e-6}[dtype]
    for got, expected in zip(together, alone, strict=True):
        assert th.allclose(got, expected, rtol=0, atol=tolerance)
    assert th.allclose(outputs["other"], other_alone, rtol=0, atol=tolerance)
    assert not outputs["other"].requires_grad and all(p.grad is None for p in other.parameters())


def test_a_pair_without_gradients_gives_the_same_values(chunk_rows):
    cell, x, _, _ = make_problem(th.float32, with_h0=False)
    other, other_x, _, _ = make_problem(th.float32, with_h0=False, seed=1)
    with_grad = gru_sequence_pair(cell, x, other=(other, other_x))
    with th.no_grad():
        without = gru_sequence_pair(cell, x, other=(other, other_x))
    assert with_grad[0].grad_fn is not None and without[0].grad_fn is None
    for got, expected in zip(without, with_grad, strict=True):
        assert th.equal(got, expected.detach())

"""Mixers: QMIX monotonicity (dQ_tot/dQ_a >= 0), output shapes, VDN = sum."""
from types import SimpleNamespace

import pytest
import torch as th

from modules.mixers import REGISTRY as mixer_REGISTRY

th.set_num_threads(1)

N_AGENTS = 3
STATE_DIM = 7


def mixer_args(**overrides) -> SimpleNamespace:
    args = dict(n_agents=N_AGENTS, state_shape=STATE_DIM, mixing_embed_dim=8, hypernet_embed=16)
    args.update(overrides)
    return SimpleNamespace(**args)


def qmix_input_grads(mixer, seed: int) -> th.Tensor:
    """dQ_tot/dQ_a for every (batch, time, agent) of random inputs: [4, 5, n_agents]."""
    gen = th.Generator().manual_seed(seed)
    qvals = (10 * th.randn(4, 5, N_AGENTS, generator=gen)).requires_grad_(True)
    states = 3 * th.randn(4, 5, STATE_DIM, generator=gen)
    # Each Q_tot depends only on its own (batch, time) inputs, so the gradient of the sum
    # holds every per-sample derivative.
    mixer(qvals, states).sum().backward()
    return qvals.grad


@pytest.mark.parametrize("pos_func", ["abs", "softplus", "quadratic"])
def test_qmix_is_monotonic_in_every_agent_q(pos_func):
    th.manual_seed(0)
    mixer = mixer_REGISTRY["qmix"](mixer_args(qmix_pos_func=pos_func, qmix_pos_func_beta=1.0))
    for seed in range(5):
        grads = qmix_input_grads(mixer, seed)
        assert (grads >= 0).all()
        assert (grads > 0).any()


def test_qmix_without_abs_would_not_be_monotonic():
    # Guards the test above: the same hypernetworks without the non-negativity map do
    # produce negative derivatives, so the assertion there can fail.
    th.manual_seed(0)
    mixer = mixer_REGISTRY["qmix"](mixer_args())
    mixer.pos_func = lambda x: x
    grads = th.cat([qmix_input_grads(mixer, seed) for seed in range(5)])
    assert (grads < 0).any()


def test_qmix_output_shape_and_state_dependent_bias():
    th.manual_seed(0)
    mixer = mixer_REGISTRY["qmix"](mixer_args())
    qvals = th.zeros(2, 6, N_AGENTS)
    states = th.randn(2, 6, STATE_DIM)
    out = mixer(qvals, states)
    assert out.shape == (2, 6, 1)
    # With all agent Qs at 0 the output is V(s) plus a state-dependent hidden term; it must
    # differ between states.
    assert not th.allclose(out[0, 0], out[1, 0])


def test_qmix_orthogonal_init_zeroes_biases():
    mixer = mixer_REGISTRY["qmix"](mixer_args(use_orthogonal=True))
    weight = mixer.hyper_w1[0].weight  # [hypernet_embed, state_dim], 16 x 7: orthonormal columns
    assert th.allclose(weight.t() @ weight, th.eye(STATE_DIM), atol=1e-5)
    assert th.count_nonzero(mixer.hyper_b2[2].bias) == 0


def test_qmix_unknown_pos_func_is_rejected():
    with pytest.raises(ValueError, match="unknown qmix_pos_func 'relu'"):
        mixer_REGISTRY["qmix"](mixer_args(qmix_pos_func="relu"))


def test_vdn_is_the_sum_of_agent_qs():
    mixer = mixer_REGISTRY["vdn"](mixer_args())
    qvals = th.tensor([[[1.0, 2.0, 3.5], [-1.0, 0.5, 0.0]]])  # [1, 2, 3]
    out = mixer(qvals, th.randn(1, 2, STATE_DIM))
    assert out.shape == (1, 2, 1)
    assert th.equal(out, th.tensor([[[6.5], [-0.5]]]))
    assert list(mixer.parameters()) == []


def pymarl2_qmix(mixer, qvals: th.Tensor, states: th.Tensor) -> th.Tensor:
    """PyMARL2's nmix.py forward, layer by layer with bmm: the reference for the fused forward."""
    b, t, _ = qvals.size()
    qvals = qvals.reshape(b * t, 1, N_AGENTS)
    states = states.reshape(b * t, STATE_DIM)
    w1 = mixer.pos_func(mixer.hyper_w1(states)).view(-1, N_AGENTS, mixer.embed_dim)
    b1 = mixer.hyper_b1(states).view(-1, 1, mixer.embed_dim)
    w2 = mixer.pos_func(mixer.hyper_w2(states)).view(-1, mixer.embed_dim, 1)
    v = mixer.hyper_b2(states).view(-1, 1, 1)
    hidden = th.nn.functional.elu(th.bmm(qvals, w1) + b1)
    return (th.bmm(hidden, w2) + v).view(b, t, 1)


@pytest.mark.parametrize("pos_func", ["abs", "softplus", "quadratic"])
def test_qmix_computes_pymarl2s_mixing(pos_func):
    th.manual_seed(0)
    mixer = mixer_REGISTRY["qmix"](mixer_args(qmix_pos_func=pos_func, qmix_pos_func_beta=1.0)).double()
    qvals = th.randn(4, 5, N_AGENTS, dtype=th.float64, requires_grad=True)
    states = th.randn(4, 5, STATE_DIM, dtype=th.float64)
    ours = mixer(qvals, states)
    ours_grads = th.autograd.grad(ours.square().sum(), [qvals, *mixer.parameters()])
    reference = pymarl2_qmix(mixer, qvals, states)
    reference_grads = th.autograd.grad(reference.square().sum(), [qvals, *mixer.parameters()])
    assert th.allclose(ours, reference, rtol=0, atol=1e-12)
    for got, expected in zip(ours_grads, reference_grads, strict=True):
        assert th.allclose(got, expected, rtol=0, atol=1e-12)


def test_qmix_under_bfloat16_autocast_mixes_in_float32():
    th.manual_seed(0)
    mixer = mixer_REGISTRY["qmix"](mixer_args())
    qvals, states = th.randn(4, 5, N_AGENTS), th.randn(4, 5, STATE_DIM)
    with th.autocast(device_type="cpu", dtype=th.bfloat16):
        mixed = mixer(qvals, states)
    assert mixed.dtype == th.float32
    assert th.allclose(mixed, mixer(qvals, states), rtol=0.02, atol=0.02)


# --- PyMARL's original QMixer (q_learner's "qmix") ------------------------------------------------

@pytest.mark.parametrize("layers", [1, 2])
def test_original_qmix_is_monotonic_and_without_abs_is_not(layers):
    th.manual_seed(0)
    mixer = mixer_REGISTRY["qmix_original"](mixer_args(hypernet_layers=layers))
    grads = th.cat([qmix_input_grads(mixer, seed) for seed in range(5)])
    assert (grads >= 0).all() and (grads > 0).any()
    th.manual_seed(0)
    free = mixer_REGISTRY["qmix_original"](mixer_args(hypernet_layers=layers, abs=False))
    assert (th.cat([qmix_input_grads(free, seed) for seed in range(5)]) < 0).any()


@pytest.mark.parametrize("n_agents", [1, 2, 5, 27])
def test_original_qmix_shapes_and_pymarl_parameter_names(n_agents):
    mixer = mixer_REGISTRY["qmix_original"](mixer_args(n_agents=n_agents))
    assert mixer(th.randn(4, 6, n_agents), th.randn(4, 6, STATE_DIM)).shape == (4, 6, 1)
    assert sorted(mixer.state_dict()) == ["V.0.bias", "V.0.weight", "V.2.bias", "V.2.weight", "hyper_b_1.bias",
                                          "hyper_b_1.weight", "hyper_w_1.bias", "hyper_w_1.weight",
                                          "hyper_w_final.bias", "hyper_w_final.weight"]
    assert mixer.hyper_w_1.weight.shape == (8 * n_agents, STATE_DIM)  # one layer: W1 = |A s + a|


def test_original_qmix_computes_pymarls_mixing_by_hand():
    """Q_tot = |w_final(s)| . elu(q . |W1(s)| + b1(s)) + V(s), for one sample of 2 agents and embed 2."""
    mixer = mixer_REGISTRY["qmix_original"](mixer_args(n_agents=2, state_shape=1, mixing_embed_dim=2))
    with th.no_grad():
        mixer.hyper_w_1.weight.copy_(th.tensor([[1.0], [-2.0], [0.5], [3.0]]))  # W1(s) = s * [[1, -2], [0.5, 3]]
        mixer.hyper_w_1.bias.zero_()
        mixer.hyper_b_1.weight.zero_()
        mixer.hyper_b_1.bias.copy_(th.tensor([0.5, -10.0]))
        mixer.hyper_w_final.weight.copy_(th.tensor([[-1.0], [2.0]]))
        mixer.hyper_w_final.bias.zero_()
        for layer in (mixer.V[0], mixer.V[2]):
            layer.weight.zero_()
            layer.bias.fill_(0.25)
    q = th.tensor([[[1.0, 2.0]]])
    # s = 1: hidden = elu([1*1 + 2*0.5 + 0.5, 1*2 + 2*3 - 10]) = [2.5, elu(-2)]; w_final = [1, 2]; V = 0.25
    expected = 2.5 + 2 * (th.exp(th.tensor(-2.0)) - 1) + 0.25
    assert mixer(q, th.ones(1, 1, 1)).item() == pytest.approx(expected.item())


def test_original_qmix_rejects_three_hypernet_layers():
    with pytest.raises(ValueError, match="hypernet_layers=3 is not supported"):
        mixer_REGISTRY["qmix_original"](mixer_args(hypernet_layers=3))

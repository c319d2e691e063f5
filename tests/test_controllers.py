"""Multi-agent controllers and the RNN agents: input construction, action choice, memory, and
the fused sequence pass against the step-by-step one."""
import copy
from types import SimpleNamespace

import pytest
import torch as th

from components.episode_buffer import EpisodeBatch
from controllers import REGISTRY as mac_REGISTRY
from controllers.basic_controller import BasicMAC
from controllers.n_controller import NMAC
from learners.q_learner import unroll_stepwise
from modules.agents import REGISTRY as agent_REGISTRY
from modules.agents.n_rnn_agent import NRNNAgent
from run.run import build_scheme

th.set_num_threads(1)

N_AGENTS, N_ACTIONS, OBS, T, BS, HIDDEN = 3, 5, 4, 6, 2, 16


def make_args(**overrides) -> SimpleNamespace:
    args = dict(n_agents=N_AGENTS, n_actions=N_ACTIONS, rnn_hidden_dim=HIDDEN, agent="n_rnn",
                obs_last_action=True, obs_agent_id=True, agent_output_type="q",
                action_selector="epsilon_greedy", epsilon_start=1.0, epsilon_finish=0.05,
                epsilon_anneal_time=1000, use_layer_norm=False, use_orthogonal=False, gain=0.01)
    args.update(overrides)
    return SimpleNamespace(**args)


def make_batch(lengths: tuple = (T - 1,) * BS) -> EpisodeBatch:
    """A runner-like batch in run.build_scheme's compact dtypes (uint8 actions, bool availability)
    with random obs, actions and availability; episode i fills lengths[i] + 1 steps, zeros after."""
    env_info = {"state_shape": 3, "obs_shape": OBS, "n_actions": N_ACTIONS, "n_agents": N_AGENTS}
    scheme, groups, preprocess = build_scheme(env_info)
    batch = EpisodeBatch(scheme, groups, len(lengths), T, preprocess=preprocess)
    for episode, length in enumerate(lengths):
        steps = slice(0, length + 1)
        avail = th.rand(length + 1, N_AGENTS, N_ACTIONS) < 0.5  # [steps, n_agents, n_actions]
        avail[..., 0] = True  # no-op always available
        batch.update({"obs": th.randn(length + 1, N_AGENTS, OBS),
                      "actions": th.randint(0, N_ACTIONS, (length + 1, N_AGENTS, 1)),
                      "avail_actions": avail}, bs=episode, ts=steps)
    return batch


@pytest.fixture(autouse=True)
def seed():
    th.manual_seed(0)


def test_registries():
    assert mac_REGISTRY["basic_mac"] is BasicMAC and mac_REGISTRY["n_mac"] is NMAC
    assert issubclass(NMAC, BasicMAC)
    assert set(agent_REGISTRY) >= {"rnn", "n_rnn"}


@pytest.mark.parametrize("t", [0, 3])
def test_inputs_are_obs_last_action_and_agent_id(t):
    batch = make_batch()
    mac = NMAC(batch.scheme, batch.groups, make_args())
    inputs = mac._build_inputs(batch, t)
    assert inputs.shape == (BS, N_AGENTS, OBS + N_ACTIONS + N_AGENTS)
    assert mac.agent.fc1.in_features == OBS + N_ACTIONS + N_AGENTS

    assert th.equal(inputs[..., :OBS], batch["obs"][:, t])
    last_action = inputs[..., OBS:OBS + N_ACTIONS]
    if t == 0:
        assert last_action.abs().sum() == 0  # no previous action at the first step
    else:
        expected = th.nn.functional.one_hot(batch["actions"][:, t - 1, :, 0].long(), N_ACTIONS).float()
        assert th.equal(last_action, expected)
    agent_id = inputs[..., OBS + N_ACTIONS:]
    assert th.equal(agent_id, th.eye(N_AGENTS).expand(BS, -1, -1))


def test_inputs_without_optional_parts_are_just_obs():
    batch = make_batch()
    mac = BasicMAC(batch.scheme, batch.groups, make_args(obs_last_action=False, obs_agent_id=False))
    assert th.equal(mac._build_inputs(batch, 2), batch["obs"][:, 2])
    assert mac.agent.fc1.in_features == OBS


def test_hidden_state_shapes_and_memory():
    batch = make_batch()
    mac = NMAC(batch.scheme, batch.groups, make_args())
    mac.init_hidden(BS)
    assert mac.hidden_states.shape == (BS, N_AGENTS, HIDDEN) and mac.hidden_states.abs().sum() == 0
    q0 = mac.forward(batch, t=0)
    assert q0.shape == (BS, N_AGENTS, N_ACTIONS)
    assert mac.hidden_states.shape == (BS, N_AGENTS, HIDDEN) and mac.hidden_states.abs().sum() > 0
    q1_with_memory = mac.forward(batch, t=1)
    mac.init_hidden(BS)
    q1_fresh = mac.forward(batch, t=1)
    assert not th.allclose(q1_with_memory, q1_fresh)  # the memory from step 0 matters


def test_select_actions_respects_avail_actions_and_bs():
    batch = make_batch()
    for t_env in (0, 10**6):  # fully random, then mostly greedy
        mac = NMAC(batch.scheme, batch.groups, make_args(epsilon_finish=0.0))
        for _ in range(20):
            mac.init_hidden(BS)
            for t in range(T):
                actions = mac.select_actions(batch, t_ep=t, t_env=t_env)
                assert actions.shape == (BS, N_AGENTS)
                avail = batch["avail_actions"][:, t]
                assert avail.gather(-1, actions.unsqueeze(-1)).all()

    mac.init_hidden(BS)
    actions = mac.select_actions(batch, t_ep=0, t_env=0, bs=[1], test_mode=True)
    assert actions.shape == (1, N_AGENTS)
    mac.init_hidden(BS)
    qs = mac.forward(batch, t=0)[1].masked_fill(batch["avail_actions"][1, 0] == 0, -float("inf"))
    assert th.equal(actions[0], qs.argmax(-1))  # test mode is greedy over available actions


def test_n_mac_outputs_raw_q_and_basic_mac_can_output_masked_policies():
    batch = make_batch()
    args = make_args(agent="rnn", agent_output_type="pi_logits")
    n_mac = NMAC(batch.scheme, batch.groups, args)
    basic_mac = BasicMAC(batch.scheme, batch.groups, args)
    basic_mac.load_state(n_mac)
    n_mac.init_hidden(BS)
    basic_mac.init_hidden(BS)
    q = n_mac.forward(batch, t=2)
    pi = basic_mac.forward(batch, t=2)
    avail = batch["avail_actions"][:, 2]
    assert th.allclose(pi.sum(-1), th.ones(BS, N_AGENTS))
    assert (pi[avail == 0] < 1e-6).all()
    expected = th.softmax(q.masked_fill(avail == 0, -1e5), dim=-1)
    assert th.allclose(pi, expected)


def test_n_rnn_with_layer_norm_and_orthogonal_init():
    batch = make_batch()
    mac = NMAC(batch.scheme, batch.groups, make_args(use_layer_norm=True, use_orthogonal=True, gain=0.01))
    agent = mac.agent
    assert isinstance(agent, NRNNAgent) and isinstance(agent.layer_norm, th.nn.LayerNorm)
    # fc2 rows are orthonormal scaled by gain; fc1 columns orthonormal (gain 1); biases zero.
    w2 = agent.fc2.weight
    assert th.allclose(w2 @ w2.T, 0.01 ** 2 * th.eye(N_ACTIONS), atol=1e-7)
    w1 = agent.fc1.weight  # [HIDDEN, input], HIDDEN > input
    assert th.allclose(w1.T @ w1, th.eye(w1.shape[1]), atol=1e-5)
    assert agent.fc1.bias.abs().sum() == 0 and agent.fc2.bias.abs().sum() == 0

    mac.init_hidden(BS)
    qs = th.stack([mac.forward(batch, t) for t in range(T)], dim=1)  # [BS, T, n_agents, n_actions]
    assert qs.shape == (BS, T, N_AGENTS, N_ACTIONS) and th.isfinite(qs).all()
    # LayerNorm output has unit scale per row, so |q| <= gain * ||ln(h)|| = 0.01 * sqrt(HIDDEN).
    assert qs.abs().max() <= 0.01 * HIDDEN ** 0.5 + 1e-6
    qs.sum().backward()
    assert agent.layer_norm.weight.grad is not None and agent.rnn.weight_ih.grad.abs().sum() > 0


def test_layer_norm_changes_outputs_and_rnn_agent_ignores_n_rnn_options():
    args = make_args(use_layer_norm=True, use_orthogonal=True)
    th.manual_seed(5)
    plain = agent_REGISTRY["rnn"](10, args)
    th.manual_seed(5)
    normed = agent_REGISTRY["n_rnn"](10, make_args(use_layer_norm=True))
    assert not hasattr(plain, "layer_norm") or plain.layer_norm is None
    inputs = th.randn(BS, N_AGENTS, 10)
    hidden = plain.init_hidden().expand(BS * N_AGENTS, -1)
    q_plain, h_plain = plain(inputs, hidden)
    q_normed, h_normed = normed(inputs, hidden)
    assert th.allclose(h_plain, h_normed)  # same weights, same memory
    assert th.allclose(q_normed, normed.fc2(normed.layer_norm(h_normed)))
    assert not th.allclose(q_plain, q_normed)
    # Flat [bs*n_agents, input] inputs work too and give the same answer.
    q_flat, h_flat = plain(inputs.reshape(-1, 10), None)
    assert q_flat.shape == (BS * N_AGENTS, N_ACTIONS) and th.allclose(q_flat.view_as(q_plain), q_plain)


def test_save_load_and_load_state(tmp_path):
    batch = make_batch()
    mac = NMAC(batch.scheme, batch.groups, make_args())
    other = NMAC(batch.scheme, batch.groups, make_args())
    assert not th.equal(mac.agent.fc1.weight, other.agent.fc1.weight)
    mac.save_models(str(tmp_path))
    assert (tmp_path / "agent.th").exists()
    other.load_models(str(tmp_path))
    for p, q in zip(mac.parameters(), other.parameters()):
        assert th.equal(p, q)

    target = NMAC(batch.scheme, batch.groups, make_args())
    target.load_state(mac)
    mac.init_hidden(BS)
    target.init_hidden(BS)
    assert th.equal(mac.forward(batch, 1), target.forward(batch, 1))


def test_bad_config_raises_clear_errors():
    batch = make_batch()
    with pytest.raises(ValueError, match="unknown agent 'lstm'"):
        NMAC(batch.scheme, batch.groups, make_args(agent="lstm"))
    with pytest.raises(ValueError, match="unknown action_selector 'boltzmann'"):
        NMAC(batch.scheme, batch.groups, make_args(action_selector="boltzmann"))
    with pytest.raises(ValueError, match="unknown agent_output_type"):
        BasicMAC(batch.scheme, batch.groups, make_args(agent_output_type="probs"))
    scheme = {"obs": {"vshape": OBS, "group": "agents"}}
    with pytest.raises(ValueError, match="obs_last_action needs 'actions'"):
        NMAC(scheme, batch.groups, make_args())


# --- fused sequence pass ----------------------------------------------------------------------

@pytest.mark.parametrize("overrides", [
    {},
    {"use_layer_norm": True},
    {"use_orthogonal": True, "gain": 1.0},
    {"use_layer_norm": True, "use_orthogonal": True, "gain": 1.0},
    {"agent": "rnn"},
    {"obs_last_action": False},
    {"obs_agent_id": False},
    {"obs_last_action": False, "obs_agent_id": False},
    {"agent": "rnn", "use_rnn": False},
], ids=["plain", "layer_norm", "orthogonal", "layer_norm-orthogonal", "rnn", "no_last_action", "no_agent_id",
        "obs_only", "rnn-feed_forward"])
def test_forward_sequence_matches_stepwise_forward(overrides):
    batch = make_batch(lengths=(T - 1, 2, 4))  # episodes of different lengths, zero padding after
    mac = NMAC(batch.scheme, batch.groups, make_args(**overrides))
    fused = mac.forward_sequence(batch)
    assert fused.shape == (3, T, N_AGENTS, N_ACTIONS)
    assert th.allclose(fused, unroll_stepwise(mac, batch), rtol=0, atol=1e-5)
    assert th.equal(mac.build_sequence_inputs(batch)[:, 3], mac._build_inputs(batch, 3))


@pytest.mark.parametrize("overrides", [{}, {"use_layer_norm": True}, {"agent": "rnn", "obs_agent_id": False},
                                       {"agent": "rnn", "use_rnn": False}],
                         ids=["plain", "layer_norm", "rnn-no_agent_id", "rnn-feed_forward"])
def test_forward_sequence_pair_gives_both_controllers_outputs(overrides):
    batch = make_batch(lengths=(T - 1, 2, 4))
    mac = NMAC(batch.scheme, batch.groups, make_args(**overrides))
    other = copy.deepcopy(mac)
    with th.no_grad():
        for parameter in other.parameters():
            parameter.add_(0.1 * th.randn_like(parameter))  # a target network some updates behind
    outputs, other_outputs = mac.forward_sequence_pair(other, batch)
    assert th.allclose(outputs, mac.forward_sequence(batch), rtol=0, atol=1e-6)
    assert th.allclose(other_outputs, other.forward_sequence(batch), rtol=0, atol=1e-6)
    assert outputs.requires_grad and not other_outputs.requires_grad


def test_sequence_inputs_are_time_major_and_in_the_autocast_dtype():
    batch = make_batch()
    mac = NMAC(batch.scheme, batch.groups, make_args())
    inputs = mac.build_sequence_inputs(batch)  # [BS, T, n_agents, input]
    assert inputs.shape[:3] == (BS, T, N_AGENTS) and inputs.transpose(0, 1).is_contiguous()
    with th.autocast(device_type="cpu", dtype=th.bfloat16):
        inputs_bf16 = mac.build_sequence_inputs(batch)
    assert inputs_bf16.dtype == th.bfloat16 and th.equal(inputs_bf16, inputs.to(th.bfloat16))


def test_forward_sequence_gives_policies_like_forward():
    batch = make_batch()
    mac = BasicMAC(batch.scheme, batch.groups, make_args(agent="rnn", agent_output_type="pi_logits"))
    policies = mac.forward_sequence(batch)  # [BS, T, n_agents, n_actions]
    assert th.allclose(policies, unroll_stepwise(mac, batch), rtol=0, atol=1e-6)
    assert (policies[batch["avail_actions"] == 0] < 1e-6).all()


def test_agent_forward_sequence_continues_from_memory_with_the_same_gradients():
    th.manual_seed(3)
    agent = NRNNAgent(7, make_args(use_layer_norm=True))
    inputs = th.randn(BS, T, N_AGENTS, 7)
    hidden = th.randn(BS, N_AGENTS, HIDDEN)

    fused = agent.forward_sequence(inputs, hidden)  # [BS, T, n_agents, n_actions]
    fused.square().sum().backward()
    fused_grads = [p.grad.clone() for p in agent.parameters()]
    agent.zero_grad()
    steps, h = [], hidden
    for t in range(T):
        q, h = agent(inputs[:, t], h)
        steps.append(q)
    stepwise = th.stack(steps, dim=1)  # [BS, T, n_agents, n_actions]
    stepwise.square().sum().backward()

    assert th.allclose(fused, stepwise, rtol=0, atol=1e-5)
    for fused_grad, param in zip(fused_grads, agent.parameters()):
        assert th.allclose(fused_grad, param.grad, rtol=1e-4, atol=1e-5)


def test_agent_checkpoint_keys_stay_pymarl2s():
    agent = NRNNAgent(7, make_args(use_layer_norm=True))
    assert list(agent.state_dict()) == ["fc1.weight", "fc1.bias", "rnn.weight_ih", "rnn.weight_hh", "rnn.bias_ih",
                                        "rnn.bias_hh", "fc2.weight", "fc2.bias", "layer_norm.weight",
                                        "layer_norm.bias"]


def test_a_feed_forward_agent_forgets_the_past():
    """use_rnn=False (EPyMARL's): the same inputs give the same outputs whatever came before."""
    batch = make_batch(lengths=(T - 1, T - 1, T - 1))
    mac = NMAC(batch.scheme, batch.groups, make_args(agent="rnn", use_rnn=False, obs_last_action=False))
    assert isinstance(mac.agent.rnn, th.nn.Linear)
    inputs = mac.build_sequence_inputs(batch)  # [bs, T, n_agents, input]
    fresh = mac.agent(inputs[:, 3])[0]
    assert th.allclose(mac.forward_sequence(batch)[:, 3], fresh, rtol=0, atol=1e-6)

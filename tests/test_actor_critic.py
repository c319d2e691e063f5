"""EPyMARL's actor-critic learners (IA2C, MAA2C, MAPPO, IPPO) on hand-built tensors, their critics'
inputs, the non-shared (_ns) agents and critics, the soft_policies selector, and every config from the
command line."""
import numpy as np
import pytest
import torch as th
from types import SimpleNamespace

from components.action_selectors import SoftPoliciesActionSelector
from learners.actor_critic_learner import clipped_policy_loss, nstep_returns, policy_gradient_loss
from main_runs import train_on_spread
from modules.agents.rnn_ns_agent import AgentLinear, RNNNSAgent
from modules.critics.state_value import ACCritic, ACCriticNS, CentralVCritic, CentralVCriticNS
from utils.running_stats import RunningMeanStd


def nstep_by_hand(rewards, mask, values, n, gamma, add_value_last_step):
    """The n-step return of every (episode, step, agent) from its definition, one number at a time."""
    bs, transitions, agents = rewards.shape
    out = np.zeros((bs, transitions, agents))
    for b in range(bs):
        for start in range(transitions):
            for i in range(agents):
                total = 0.0
                for k in range(n + 1):
                    t = start + k
                    if t >= transitions:
                        break
                    if k == n:
                        total += gamma ** k * values[b, t, i] * mask[b, t, i]
                    else:
                        total += gamma ** k * rewards[b, t, i] * mask[b, t, i]
                        if t == transitions - 1 and add_value_last_step:
                            total += gamma ** (k + 1) * values[b, t + 1, i]
                out[b, start, i] = total
    return out


@pytest.mark.parametrize("n, add_value_last_step", [(1, True), (3, True), (5, False), (8, True)])
def test_nstep_returns_follow_their_definition(n, add_value_last_step):
    gen = th.Generator().manual_seed(n)
    rewards = th.randn(3, 6, 2, generator=gen, dtype=th.float64)
    values = th.randn(3, 7, 2, generator=gen, dtype=th.float64)
    mask = th.ones(3, 6, 2, dtype=th.float64)
    mask[1, 4:] = 0  # an episode that ended after 4 transitions
    returns = nstep_returns(rewards, mask, values, n, 0.9, add_value_last_step)
    expected = nstep_by_hand(rewards.numpy(), mask.numpy(), values.numpy(), n, 0.9, add_value_last_step)
    np.testing.assert_allclose(returns.numpy(), expected, rtol=1e-12)


def test_a_one_step_return_is_reward_plus_discounted_next_value():
    rewards = th.tensor([[[1.0], [2.0], [3.0]]])  # [1, T-1=3, 1]
    values = th.tensor([[[10.0], [20.0], [30.0], [40.0]]])  # [1, T=4, 1]
    returns = nstep_returns(rewards, th.ones_like(rewards), values, 1, 0.5, True)
    assert returns[0, :, 0].tolist() == [1 + 0.5 * 20, 2 + 0.5 * 30, 3 + 0.5 * 40]


def test_running_statistics_match_numpy_over_all_batches():
    gen = np.random.default_rng(0)
    batches = [gen.normal(3.0, 2.0, size=(n, 2)) for n in (5, 40, 17)]
    stats = RunningMeanStd((2,), epsilon=0.0)
    for batch in batches:
        stats.update(th.tensor(batch, dtype=th.float64))
    everything = np.concatenate(batches)
    np.testing.assert_allclose(stats.mean.numpy(), everything.mean(0), rtol=1e-10)
    # Merged from each batch's unbiased variance, as EPyMARL's does: close to, not equal to, the whole's.
    np.testing.assert_allclose(stats.var.numpy(), everything.var(0), rtol=0.05)
    restored = RunningMeanStd((2,))
    restored.load_state_dict(stats.state_dict())
    assert restored.count == stats.count and th.equal(restored.mean, stats.mean)


def test_policy_gradient_loss_on_hand_built_policies():
    policies = th.tensor([[[[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]]], [[[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]]])  # [2, 1, 2, 3]
    actions = th.tensor([[[[0], [2]]], [[[0], [0]]]])  # [2, 1, 2, 1]
    advantages = th.tensor([[[2.0, -1.0]], [[5.0, 5.0]]])  # [2, 1, 2]
    mask = th.tensor([[[1.0, 1.0]], [[0.0, 0.0]]])  # the second episode is padding
    loss, filled = policy_gradient_loss(policies, advantages, actions, mask, entropy_coef=0.1)
    eps = 1e-10
    entropy_0 = -2 * 0.5 * np.log(0.5 + eps) - 0.0 * np.log(eps)
    entropy_1 = -sum(p * np.log(p + eps) for p in (0.2, 0.3, 0.5))
    expected = -((2.0 * np.log(0.5 + eps) + 0.1 * entropy_0) + (-1.0 * np.log(0.5 + eps) + 0.1 * entropy_1)) / 2
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    assert filled[1].eq(1.0).all()  # padded steps: log(1) = 0, entropy 0


def test_the_clipped_surrogate_on_hand_built_policies():
    """Agent 0: ratio 0.6 / 0.4 = 1.5 with advantage 2, clipped to 1.2 (the smaller surrogate). Agent 1:
    ratio 0.1 / 0.5 = 0.2 with advantage -1: min(0.2 * -1, 0.8 * -1) takes the clipped -0.8."""
    policies = th.tensor([[[[0.6, 0.4], [0.1, 0.9]]]])  # [1, 1, 2, 2]
    actions = th.tensor([[[[0], [0]]]])
    old_log_pi = th.log(th.tensor([[[0.4, 0.5]]]) + 1e-10)
    advantages = th.tensor([[[2.0, -1.0]]])
    mask = th.ones(1, 1, 2)
    loss, _ = clipped_policy_loss(policies, old_log_pi, advantages, actions, mask, eps_clip=0.2, entropy_coef=0.0)
    expected = -(min(1.5 * 2.0, 1.2 * 2.0) + min(0.2 * -1.0, 0.8 * -1.0)) / 2
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    with_entropy, _ = clipped_policy_loss(policies, old_log_pi, advantages, actions, mask, 0.2, entropy_coef=0.5)
    entropies = [-sum(p * np.log(p + 1e-10) for p in row) for row in ((0.6, 0.4), (0.1, 0.9))]
    assert with_entropy.item() == pytest.approx(expected - 0.5 * sum(entropies) / 2, rel=1e-5)


def critic_args(**overrides):
    args = dict(n_agents=3, n_actions=4, hidden_dim=8, obs_individual_obs=False, obs_last_action=False)
    return SimpleNamespace(**{**args, **overrides})


class Batch(dict):
    """The parts of an EpisodeBatch the critics read."""

    def __init__(self, bs=2, steps=5, n=3, obs=6, state=10, n_actions=4):
        gen = th.Generator().manual_seed(0)
        filled = th.ones(bs, steps, 1, dtype=th.long)
        filled[-1, -2:] = 0  # the last episode stored two steps fewer
        super().__init__(obs=th.randn(bs, steps, n, obs, generator=gen), state=th.randn(bs, steps, state, generator=gen),
                         actions=th.randint(0, n_actions, (bs, steps, n, 1), generator=gen), filled=filled)
        self.batch_size, self.max_seq_length, self.device = bs, steps, th.device("cpu")


SCHEME = {"obs": {"vshape": 6}, "state": {"vshape": 10}}


def test_the_independent_critic_sees_each_agents_observation_and_id():
    batch = Batch()
    inputs = ACCritic(SCHEME, critic_args()).build_inputs(batch)
    assert inputs.shape == (2, 5, 3, 6 + 3)
    assert th.equal(inputs[..., :6], batch["obs"]) and th.equal(inputs[0, 0, :, 6:], th.eye(3))


@pytest.mark.parametrize("individual, last_action, size", [(False, False, 10 + 3), (True, False, 10 + 18 + 3),
                                                           (True, True, 10 + 18 + 12 + 3)])
def test_the_central_critic_sees_the_state_and_what_its_settings_add(individual, last_action, size):
    batch = Batch()
    critic = CentralVCritic(SCHEME, critic_args(obs_individual_obs=individual, obs_last_action=last_action))
    inputs = critic.build_inputs(batch)  # [bs, T, n, input]
    assert inputs.shape == (2, 5, 3, size) and critic(inputs).shape == (2, 5, 3, 1)
    assert th.equal(inputs[:, :, 1, :10], batch["state"])  # every agent sees the state
    if last_action:
        previous = inputs[..., 28:40]
        assert previous[:, 0].eq(0).all()  # no previous action at t = 0
        one_hot = th.nn.functional.one_hot(batch["actions"][:, 2, :, 0], 4).float().reshape(2, 12)
        assert th.equal(previous[0, 3, 0], one_hot[0])  # step 3 sees step 2's joint action
        assert previous[1, 4:].eq(0).all()  # no action past the last episode's last stored step (step 2)


def test_agent_linear_is_one_linear_layer_per_agent():
    th.manual_seed(0)
    layer = AgentLinear(3, 4, 5)
    x = th.randn(2, 7, 3, 4)  # [bs, T, n_agents, in]
    out = layer(x)
    for agent_id in range(3):
        linear = th.nn.Linear(4, 5)
        with th.no_grad():
            linear.weight.copy_(layer.weight[agent_id].T)
            linear.bias.copy_(layer.bias[agent_id])
        assert th.allclose(out[..., agent_id, :], linear(x[..., agent_id, :]), atol=1e-6)
    assert not th.equal(layer.weight[0], layer.weight[1])  # initialised apart


@pytest.mark.parametrize("n_agents", [2, 3, 5])
@pytest.mark.parametrize("use_rnn", [True, False])
def test_non_shared_agents_are_independent_and_their_fused_pass_matches_the_steps(n_agents, use_rnn):
    th.manual_seed(n_agents)
    args = SimpleNamespace(n_agents=n_agents, rnn_hidden_dim=8, n_actions=4, use_rnn=use_rnn)
    agent = RNNNSAgent(6, args)
    inputs = th.randn(2, 5, n_agents, 6)  # [bs, T, n_agents, input]
    fused = agent.forward_sequence(inputs)
    assert fused.shape == (2, 5, n_agents, 4)
    hidden, steps = None, []
    for t in range(5):
        q, hidden = agent(inputs[:, t], hidden)
        steps.append(q)
    assert th.allclose(fused, th.stack(steps, dim=1), atol=1e-6)
    with th.no_grad():
        agent.fc2.weight[n_agents - 1].add_(1.0)  # change the last agent's network only
    changed = agent.forward_sequence(inputs)
    assert th.equal(changed[..., :-1, :], fused[..., :-1, :]) and not th.equal(changed[..., -1, :], fused[..., -1, :])
    if not use_rnn:  # feed-forward: each step from its own inputs
        assert th.allclose(agent(inputs[:, 3])[0], changed[:, 3], atol=1e-6)


def test_non_shared_critics_see_no_agent_id_and_have_a_network_per_agent():
    batch = Batch()
    for critic_type, size in ((ACCriticNS, 6), (CentralVCriticNS, 10)):
        critic = critic_type(SCHEME, critic_args())
        inputs = critic.build_inputs(batch)
        assert inputs.shape == (2, 5, 3, size) and critic(inputs).shape == (2, 5, 3, 1)
        assert critic.fc1.weight.shape == (3, size, 8)


def test_soft_policies_sample_the_policy_in_test_episodes_too():
    th.manual_seed(0)
    selector = SoftPoliciesActionSelector(SimpleNamespace())
    policies = th.tensor([[[0.25, 0.75, 0.0]]]).expand(4000, 1, 3)
    for test_mode in (False, True):
        actions = selector.select_action(policies, th.ones_like(policies), 0, test_mode=test_mode)
        counts = th.bincount(actions.flatten(), minlength=3).float() / 4000
        assert counts[2] == 0 and abs(counts[1].item() - 0.75) < 0.03


@pytest.mark.parametrize("config, critic_type, resume", [
    ("ia2c", "ac_critic", True), ("maa2c", "cv_critic", False), ("mappo", "cv_critic", False),
    ("ippo_epymarl", "ac_critic", False), ("ia2c_ns", "ac_critic_ns", False), ("maa2c_ns", "cv_critic_ns", False),
    ("mappo_ns", "cv_critic_ns", True), ("ippo_ns", "ac_critic_ns", False)])
def test_epymarl_actor_critic_configs_train_save_and_resume(tmp_path, config, critic_type, resume):
    """Each config trains from the command line (its envs stepped in the main process: the workers are
    tested elsewhere); one of each learner resumes (ia2c: actor_critic_learner, mappo_ns: PPO, _ns)."""
    config_json, info = train_on_spread(tmp_path, config, config, resume, "batch_size_run=2", "env_processes=main",
                                        "buffer_size=2", "batch_size=2")
    assert config_json["critic_type"] == critic_type and config_json["action_selector"] == "soft_policies"
    assert config_json["hidden_dim"] == config_json["rnn_hidden_dim"] == 16  # EPyMARL's one width
    for key in ("critic_loss", "td_error_abs", "advantage_mean", "pg_loss", "pi_max", "agent_grad_norm"):
        assert np.all(np.isfinite(info[key])), key
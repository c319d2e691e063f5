"""EPyMARL's PAC-DCG (pac_dcg_learner; critics pac_dcg_critic_ns / pac_dcg_critic; configs pac_dcg_ns and
marlkit's shared pac_dcg): the graphs, the value of a joint action, the greedy joint action against a brute
force (exact on trees; on a full graph within the best and mostly the best), the best responses,
the losses and advantages recomputed by hand, shapes for 2, 3 and 5 agents, bad settings, and both configs
from the command line."""
import copy
import itertools
from types import SimpleNamespace

import numpy as np
import pytest
import torch as th

from main_runs import run_main, train_on_spread
from modules.critics.dcg import DCGCritic, graph_edges
from run.run import build_scheme
from test_learner import N_ACTIONS, N_AGENTS
from test_pac import make_learner as make_pac_learner
from test_pac import train_once_with_copies

th.set_num_threads(1)

GRAPH_SETTINGS = dict(cg_edges="full", cg_utilities_hidden_dim=None, cg_payoffs_hidden_dim=None,
                      cg_payoff_rank=None, msg_anytime=True, msg_iterations=8, msg_normalized=True, seed=0)


def make_critic(n_agents: int = N_AGENTS, n_actions: int = N_ACTIONS, per_agent: bool = True, state_dim: int = 6,
                **overrides) -> DCGCritic:
    scheme, _, _ = build_scheme({"n_agents": n_agents, "n_actions": n_actions, "state_shape": state_dim,
                                 "obs_shape": 3})
    args = SimpleNamespace(**{**GRAPH_SETTINGS, "n_agents": n_agents, "n_actions": n_actions, "hidden_dim": 8,
                              **overrides})
    return DCGCritic(scheme, args, per_agent=per_agent)


def make_learner(seed: int = 0, per_agent: bool = True, **overrides):
    return make_pac_learner(seed, per_agent, learner="pac_dcg_learner", critic="pac_dcg_critic",
                            **{"initial_entropy_coef": 30.0, **GRAPH_SETTINGS, **overrides})


def joint_actions(n_agents: int, n_actions: int) -> th.Tensor:
    """Every joint action, [n_actions ** n_agents, n_agents] (long)."""
    return th.tensor(list(itertools.product(range(n_actions), repeat=n_agents)))


def test_the_graphs_have_their_edges_and_bad_ones_are_refused():
    assert graph_edges("full", 4, 0) == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    assert graph_edges("line", 3, 0) == [(0, 1), (1, 2)]
    assert graph_edges("cycle", 3, 0) == [(0, 1), (1, 2), (2, 0)]
    assert graph_edges("cycle", 2, 0) == [(0, 1), (1, 0)]  # EPyMARL's cycle of two agents: both ways
    assert graph_edges("star", 4, 0) == [(0, 1), (0, 2), (0, 3)]
    assert graph_edges("vdn", 4, 0) == []
    assert graph_edges([[2, 0]], 3, 0) == [(2, 0)]
    random_edges = graph_edges(4, 5, seed=3)
    assert len(set(random_edges)) == 4 and random_edges == graph_edges(4, 5, seed=3)
    for bad in ("ring", 7, [[0, 0]], [[0, 3]], [[0, 1, 2]], True):
        with pytest.raises(ValueError, match="cg_edges="):
            graph_edges(bad, 3, 0)


@pytest.mark.parametrize("per_agent", [True, False])
@pytest.mark.parametrize("rank", [None, 2])
def test_a_joint_actions_value_is_the_mean_utility_plus_the_mean_payoff(per_agent, rank):
    th.manual_seed(0)
    critic = make_critic(per_agent=per_agent, cg_payoff_rank=rank, cg_utilities_hidden_dim=[5],
                         cg_payoffs_hidden_dim=4)
    utilities, payoffs = critic(th.randn(2, 3, N_AGENTS, critic.fc1.weight.shape[-2 if per_agent else -1]))
    assert utilities.shape == (2, 3, N_AGENTS, N_ACTIONS) and payoffs.shape == (2, 3, 3, N_ACTIONS, N_ACTIONS)
    actions = th.randint(0, N_ACTIONS, (2, 3, 4, N_AGENTS))  # 4 joint actions at each step
    values = critic.q_values(utilities, payoffs, actions)  # [2, 3, 4]
    for b, t, k in itertools.product(range(2), range(3), range(4)):
        u = actions[b, t, k].tolist()
        expected = np.mean([utilities[b, t, i, u[i]].item() for i in range(N_AGENTS)]) + np.mean(
            [payoffs[b, t, e, u[i], u[j]].item() for e, (i, j) in enumerate([(0, 1), (0, 2), (1, 2)])])
        assert values[b, t, k].item() == pytest.approx(expected, abs=1e-6)


def test_a_payoff_is_the_mean_of_both_directions_of_its_edge():
    th.manual_seed(1)
    critic = make_critic(per_agent=False, cg_edges="line")
    memories = th.randn(1, 1, N_AGENTS, 8)
    payoffs = critic._payoffs(memories)  # [1, 1, E, A, A]
    forward = critic.payoff(th.cat([memories[..., 0, :], memories[..., 1, :]], dim=-1)).view(N_ACTIONS, N_ACTIONS)
    backward = critic.payoff(th.cat([memories[..., 1, :], memories[..., 0, :]], dim=-1)).view(N_ACTIONS, N_ACTIONS)
    assert th.allclose(payoffs[0, 0, 0], (forward + backward.T) / 2, atol=1e-6)


def brute_force_best(critic: DCGCritic, utilities: th.Tensor, payoffs: th.Tensor, available: th.Tensor) -> th.Tensor:
    """The highest value over every available joint action: utilities [B, n, A] ... -> [B]."""
    every = joint_actions(critic.n_agents, critic.n_actions)  # [J, n]
    values = critic.q_values(utilities, payoffs, every.expand(utilities.shape[0], -1, -1))  # [B, J]
    allowed = available.gather(-1, every.T.expand(utilities.shape[0], -1, -1)).all(dim=1)  # [B, n, J] -> [B, J]
    return values.masked_fill(~allowed, -float("inf")).max(dim=-1)[0]


@pytest.mark.parametrize("edges, n_agents", [("line", 3), ("star", 4), ("line", 5)])
def test_message_passing_finds_the_best_joint_action_on_a_tree(edges, n_agents):
    th.manual_seed(2)
    critic = make_critic(n_agents=n_agents, cg_edges=edges)
    utilities = th.randn(64, n_agents, N_ACTIONS)
    payoffs = th.randn(64, len(critic.edges_from), N_ACTIONS, N_ACTIONS)
    available = th.rand(64, n_agents, N_ACTIONS) < 0.7
    available[..., 0] = True
    greedy = critic.greedy(utilities, payoffs, available)  # [64, n]
    assert available.gather(-1, greedy.unsqueeze(-1)).all()
    values = critic.q_values(utilities, payoffs, greedy.unsqueeze(-2)).squeeze(-1)
    assert th.allclose(values, brute_force_best(critic, utilities, payoffs, available), atol=1e-5)


def test_on_a_full_graph_the_greedy_action_is_within_the_best_and_mostly_the_best():
    """Max-sum is not exact on a graph with cycles; the anytime joint action is checked against the brute
    force: available, within the best value, and better than a random joint action on average."""
    th.manual_seed(3)
    critic = make_critic(n_agents=4, cg_edges="full")
    utilities, payoffs = th.randn(256, 4, N_ACTIONS), th.randn(256, 6, N_ACTIONS, N_ACTIONS)
    available = th.ones(256, 4, N_ACTIONS, dtype=th.bool)
    greedy = critic.greedy(utilities, payoffs, available)
    values = critic.q_values(utilities, payoffs, greedy.unsqueeze(-2)).squeeze(-1)
    best = brute_force_best(critic, utilities, payoffs, available)
    every = critic.q_values(utilities, payoffs, joint_actions(4, N_ACTIONS).expand(256, -1, -1))  # [256, J]
    assert (values <= best + 1e-6).all() and (values == best).float().mean() > 0.8
    assert values.mean() > every.mean(dim=-1).mean() + 0.5


def test_without_edges_or_passes_the_greedy_action_is_each_agents_best_utility():
    th.manual_seed(4)
    utilities = th.randn(8, N_AGENTS, N_ACTIONS)
    available = th.ones(8, N_AGENTS, N_ACTIONS, dtype=th.bool)
    available[:, 0, utilities[:, 0].argmax(-1)[0]] = False
    expected = utilities.masked_fill(~available, -float("inf")).argmax(-1)
    for settings in (dict(cg_edges="vdn"), dict(msg_iterations=0)):
        critic = make_critic(**settings)
        payoffs = th.randn(8, len(critic.edges_from), N_ACTIONS, N_ACTIONS)
        assert th.equal(critic.greedy(utilities, payoffs, available), expected)


def test_a_step_with_no_available_action_is_played_as_if_every_action_were():
    """A padded step: no -inf utilities, so no NaN messages (EPyMARL's greedy action there is arbitrary)."""
    critic = make_critic()
    utilities, payoffs = th.randn(2, N_AGENTS, N_ACTIONS), th.randn(2, 3, N_ACTIONS, N_ACTIONS)
    assert th.equal(critic.greedy(utilities, payoffs, th.zeros(2, N_AGENTS, N_ACTIONS)),
                    critic.greedy(utilities, payoffs, th.ones(2, N_AGENTS, N_ACTIONS)))


def test_bad_widths_are_refused_and_the_edges_are_saved_with_the_weights():
    for key in ("cg_utilities_hidden_dim", "cg_payoffs_hidden_dim"):
        with pytest.raises(ValueError, match=f"{key}=\\[0\\]: give a positive width"):
            make_critic(**{key: [0]})
    saved = make_critic(cg_edges=2, seed=1).state_dict()
    critic = make_critic(cg_edges=2, seed=5)
    critic.load_state_dict(saved)  # a checkpoint's random edges come back with it
    assert critic.edges_from.tolist() == saved["edges_from"].tolist()
    assert critic.edges_to.tolist() == saved["edges_to"].tolist()


def test_each_agents_best_response_puts_its_own_action_into_the_greedy_joint_action():
    th.manual_seed(5)
    critic = make_critic()
    utilities, payoffs = th.randn(6, N_AGENTS, N_ACTIONS), th.randn(6, 3, N_ACTIONS, N_ACTIONS)
    available = th.ones(6, N_AGENTS, N_ACTIONS)
    actions = th.randint(0, N_ACTIONS, (6, N_AGENTS))
    best = critic.best_responses(utilities, payoffs, available, actions)  # [6, n]
    greedy = critic.greedy(utilities, payoffs, available)
    for i in range(N_AGENTS):
        joint = greedy.clone()
        joint[:, i] = actions[:, i]
        assert th.allclose(best[:, i], critic.q_values(utilities, payoffs, joint.unsqueeze(-2)).squeeze(-1))


@pytest.mark.parametrize("n_agents", [2, 3, 5])
def test_non_shared_critic_shapes_and_one_network_per_agent_and_edge(n_agents):
    th.manual_seed(6)
    critic = make_critic(n_agents=n_agents)
    n_edges = n_agents * (n_agents - 1) // 2
    assert critic.fc1.weight.shape == (n_agents, 6, 8) and critic.payoff[0].weight.shape == (n_edges, 16, 16)
    inputs = th.randn(2, 4, n_agents, 6)
    utilities, payoffs = critic(inputs)
    assert utilities.shape == (2, 4, n_agents, N_ACTIONS) and payoffs.shape == (2, 4, n_edges, N_ACTIONS, N_ACTIONS)
    with th.no_grad():  # agent 0's encoder changes agent 0's utilities and its edges' payoffs only
        critic.fc1.weight[0] += 1.0
        changed_utilities, changed_payoffs = critic(inputs)
    touches_0 = (critic.edges_from == 0) | (critic.edges_to == 0)
    assert not th.allclose(changed_utilities[..., 0, :], utilities[..., 0, :])
    assert th.equal(changed_utilities[..., 1:, :], utilities[..., 1:, :])
    assert th.equal(changed_payoffs[..., ~touches_0, :, :], payoffs[..., ~touches_0, :, :])
    assert not th.allclose(changed_payoffs[..., touches_0, :, :], payoffs[..., touches_0, :, :])


def test_the_critic_losses_and_advantages_are_those_of_their_definitions():
    """From copies taken before the call: 2-step returns of the target critic's value of the greedy joint
    action with each agent's own action put in, the critic loss summed over agents, the state value's loss
    against its own 2-step returns, A = Q(greedy_-i, u_i) - V; the critic and state value step apart."""
    learner, logger = make_learner(q_nstep=2)
    batch, (critic, target_critic, state_value), mask, rewards = train_once_with_copies(learner)
    gamma = learner.args.gamma
    actions = batch["actions"][:, :-1, :, 0].long()  # [bs, T-1, n]
    available = batch["avail_actions"][:, :-1]

    def two_step_returns(values):
        returns = th.zeros_like(rewards)
        for t in range(rewards.shape[1]):
            for k in range(3):
                if t + k >= rewards.shape[1]:
                    break
                term = values[:, t + k] if k == 2 else rewards[:, t + k]
                returns[:, t] += gamma ** k * term * mask[:, t + k]
        return returns

    with th.no_grad():
        inputs = critic.build_inputs(batch)[:, :-1]
        returns = two_step_returns(target_critic.best_responses(*target_critic(inputs), available, actions))
        utilities, payoffs = critic(inputs)
        q_taken = critic.q_values(utilities, payoffs, actions.unsqueeze(-2))  # [bs, T-1, 1]
        values = state_value(state_value.build_inputs(batch))[:, :-1, :, 0]  # [bs, T-1, n]
        expected_loss = (((returns - q_taken) * mask) ** 2).sum() / mask[..., 0].sum()
        value_loss = (((two_step_returns(values) - values) * mask) ** 2).sum() / mask.sum()
        advantages = critic.best_responses(utilities, payoffs, available, actions) - values
        expected_advantage = (advantages * mask).sum() / mask.sum()
    assert logger.stats["critic_loss"][0][1] == pytest.approx(expected_loss.item(), rel=1e-5)
    assert logger.stats["advantage_mean"][0][1] == pytest.approx(expected_advantage.item(), rel=1e-5, abs=1e-6)
    assert logger.stats["entropy_coef"][0][1] == pytest.approx(0.875 * 30.0 + 0.125 * 0.01)
    # the state value took one Adam step (its own optimiser) on its own loss: a first Adam step is lr times the
    # sign of the gradient
    value_loss_graph = copy.deepcopy(state_value)
    loss = (((two_step_returns(value_loss_graph(value_loss_graph.build_inputs(batch))[:, :-1, :, 0].detach())
              - value_loss_graph(value_loss_graph.build_inputs(batch))[:, :-1, :, 0]) * mask) ** 2).sum() / mask.sum()
    assert loss.item() == pytest.approx(value_loss.item(), rel=1e-6) and "state_value_opt.th" in learner.optimisers
    loss.backward()
    for before, after, param in zip(state_value.parameters(), learner.state_value.parameters(),
                                    value_loss_graph.parameters()):
        moved = (after - before).detach()
        assert th.allclose(moved, -learner.args.lr * th.sign(param.grad) * (param.grad != 0), atol=1e-4)


def test_standardised_returns_and_per_agent_rewards_are_refused():
    with pytest.raises(ValueError, match="standardise_returns=True is not offered"):
        make_learner(standardise_returns=True)
    proc = run_main("--config=pac_dcg_ns", "--env-config=gymma", "with",
                    "env_args.key=lbforaging:Foraging-8x8-2p-3f-v3", "common_reward=False", "t_max=10")
    assert proc.returncode != 0
    assert "common_reward=False (a reward per agent): pac_dcg_learner trains on one team reward" in proc.stderr


@pytest.mark.parametrize("config, name, resume", [("pac_dcg_ns", "pac_sarsa_dcg_ns", True),
                                                  ("pac_dcg", "pac_sarsa_dcg", False)])
def test_pac_dcg_configs_train_save_and_resume_from_the_command_line(tmp_path, config, name, resume):
    _, info = train_on_spread(tmp_path, config, name, resume, "batch_size_run=2", "env_processes=main",
                              "buffer_size=2", "batch_size=2")
    for key in ("critic_loss", "td_error_abs", "advantage_mean", "pg_loss", "pi_max", "entropy_coef"):
        assert np.all(np.isfinite(info[key])), key

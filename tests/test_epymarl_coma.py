"""EPyMARL's COMA (epymarl_coma_learner; critics coma_critic / coma_critic_ns; configs coma_epymarl and coma_ns):
the critic's inputs, the losses and counterfactual advantages recomputed by hand, the non-shared shapes, and
both configs from the command line. PyMARL2's COMA (`coma`) is checked in test_policy_algorithms.py."""
import copy

import numpy as np
import pytest
import torch as th

from learners.q_learner import valid_step_mask
from main_runs import run_main, train_on_spread
from modules.critics.state_value import EPyMARLCOMACritic, EPyMARLCOMACriticNS
from test_actor_critic import SCHEME, Batch, critic_args
from test_learner import N_AGENTS, build_learner, make_args, make_batch

th.set_num_threads(1)


@pytest.mark.parametrize("individual, last_action, size", [(False, False, 10 + 12 + 3), (True, True, 10 + 6 + 24 + 3)])
def test_each_agent_sees_the_state_the_others_actions_and_what_its_settings_add(individual, last_action, size):
    batch = Batch()
    critic = EPyMARLCOMACritic(SCHEME, critic_args(obs_individual_obs=individual, obs_last_action=last_action,
                                                   obs_agent_id=True))
    inputs = critic.build_inputs(batch)  # [bs, T, n, input]
    assert inputs.shape == (2, 5, 3, size) and critic(inputs).shape == (2, 5, 3, 4)
    joint = th.nn.functional.one_hot(batch["actions"][..., 0], 4).float()  # [bs, T, n, 4]
    start = 10 + 6 * individual
    for agent in range(3):
        seen = inputs[0, 1, agent, start:start + 12].reshape(3, 4)
        for other in range(3):
            expected = th.zeros(4) if other == agent else joint[0, 1, other]
            assert th.equal(seen[other], expected)
    assert inputs[1, 3:, :, start:start + 12].eq(0).all()  # no actions past the last stored step
    assert th.equal(inputs[0, 0, :, -3:], th.eye(3))  # the ids last


@pytest.mark.parametrize("n_agents", [2, 3, 5])
def test_the_non_shared_critic_is_one_network_per_agent_without_ids(n_agents):
    batch = Batch(n=n_agents)
    critic = EPyMARLCOMACriticNS(SCHEME, critic_args(n_agents=n_agents, obs_agent_id=True))
    inputs = critic.build_inputs(batch)
    assert inputs.shape == (2, 5, n_agents, 10 + n_agents * 4) and critic.fc1.weight.shape[0] == n_agents
    assert critic(inputs).shape == (2, 5, n_agents, 4)


def make_learner(per_agent: bool = False, **overrides):
    th.manual_seed(0)
    settings = dict(agent="rnn_ns" if per_agent else "rnn", mac="non_shared_mac" if per_agent else "basic_mac",
                    use_rnn=not per_agent, obs_agent_id=True, obs_last_action=False, obs_individual_obs=False,
                    learner="epymarl_coma_learner", agent_output_type="pi_logits", action_selector="soft_policies",
                    critic_type="coma_critic_ns" if per_agent else "coma_critic", hidden_dim=16, common_reward=True,
                    standardise_rewards=False, standardise_returns=False, target_update_interval_or_tau=200,
                    q_nstep=3, add_value_last_step=True, entropy_coef=0.01, train_unroll="fused", lr=0.01)
    return build_learner("epymarl_coma_learner", make_args(**{**settings, **overrides}))


@pytest.mark.parametrize("per_agent", [False, True])
def test_the_critic_loss_and_the_counterfactual_advantages_are_those_of_their_definitions(per_agent):
    """From copies taken before the call: 3-step returns of the target critic's Q of the actions taken (the
    last transition adds gamma times the Q of the last stored step), the loss summed over agents and divided
    by the valid steps, and A_i = Q_i(u) - sum_a pi_i(a) Q_i(u_-i, a)."""
    learner, logger = make_learner(per_agent)
    batch = make_batch(seed=5)
    critic, target_critic, mac = copy.deepcopy(learner.critic), copy.deepcopy(learner.target_critic), \
        copy.deepcopy(learner.mac)
    learner.train(batch, t_env=100, episode_num=1)

    gamma, transitions = learner.args.gamma, batch.max_seq_length - 1
    actions = batch["actions"].long()  # [bs, T, n, 1]
    mask = valid_step_mask(batch, batch["terminated"][:, :-1].float()).expand(-1, -1, N_AGENTS)  # [bs, T-1, n]
    rewards = batch["reward"][:, :-1].expand(-1, -1, N_AGENTS)
    with th.no_grad():
        inputs = critic.build_inputs(batch)
        target = target_critic(inputs).gather(-1, actions).squeeze(-1)  # [bs, T, n]
        returns = th.zeros_like(rewards)
        for t in range(transitions):
            for k in range(4):
                step = t + k
                if step >= transitions:
                    break
                if k == 3:
                    returns[:, t] += gamma ** k * target[:, step] * mask[:, step]
                elif step == transitions - 1:
                    returns[:, t] += gamma ** k * rewards[:, step] * mask[:, step] + gamma ** (k + 1) * target[:, step + 1]
                else:
                    returns[:, t] += gamma ** k * rewards[:, step] * mask[:, step]
        q = critic(inputs)[:, :-1]  # [bs, T-1, n, A]
        q_taken = q.gather(-1, actions[:, :-1]).squeeze(-1)
        expected_loss = (((returns - q_taken) * mask) ** 2).sum() / mask[..., 0].sum()
        mac.init_hidden(batch.batch_size)
        policies = th.stack([mac.forward(batch, t) for t in range(transitions)], dim=1)  # [bs, T-1, n, A]
        advantages = q_taken - (policies * q).sum(-1)
        expected_advantage = (advantages * mask).sum() / mask.sum()
    assert logger.stats["critic_loss"][0][1] == pytest.approx(expected_loss.item(), rel=1e-5)
    assert logger.stats["advantage_mean"][0][1] == pytest.approx(expected_advantage.item(), rel=1e-4, abs=1e-6)
    assert "coma_loss" in logger.stats and "pg_loss" not in logger.stats


@pytest.mark.parametrize("config, resume", [("coma_epymarl", True), ("coma_ns", False)])
def test_epymarls_coma_configs_train_save_and_resume_from_the_command_line(tmp_path, config, resume):
    _, info = train_on_spread(tmp_path, config, config, resume, "batch_size_run=2", "env_processes=main",
                              "buffer_size=2", "batch_size=2")
    for key in ("critic_loss", "td_error_abs", "advantage_mean", "coma_loss", "pi_max"):
        assert np.all(np.isfinite(info[key])), key


def test_a_reward_per_agent_is_refused():
    proc = run_main("--config=coma_epymarl", "--env-config=gymma", "with",
                    "env_args.key=lbforaging:Foraging-8x8-2p-3f-v3", "common_reward=False", "t_max=10")
    assert proc.returncode != 0
    assert "common_reward=False (a reward per agent): epymarl_coma_learner trains on one team reward" in proc.stderr

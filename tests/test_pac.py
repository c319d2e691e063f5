"""EPyMARL's Pareto Actor-Critic (pac_learner; critics pac_critic / pac_critic_ns; configs pac_ns and marlkit's
shared pac): the others' actions each critic sees, the maximum over the others' joint actions against a brute
force, the critic's targets and the advantages recomputed by hand, the entropy schedule, and both configs
from the command line."""
import copy
import itertools

import numpy as np
import pytest
import torch as th

from learners.q_learner import valid_step_mask
from main_runs import read_json, run_dir, run_main, train_on_spread
from modules.critics.pac import all_joint_actions, other_agents_actions, taken_others
from run.run import build_scheme
from test_learner import N_ACTIONS, N_AGENTS, build_learner, make_args, make_batch

th.set_num_threads(1)


def make_learner(init_seed: int = 0, per_agent: bool = True, learner: str = "pac_learner", critic: str = "pac_critic",
                 **overrides):
    """`learner` (PAC's, or PAC-DCG's with critic pac_dcg_critic) on the test env's fields, small and seeded;
    per_agent: non-shared actors and critics (the _ns critic types)."""
    th.manual_seed(init_seed)
    settings = dict(agent="rnn_ns" if per_agent else "rnn", mac="non_shared_mac", use_rnn=False,
                    obs_agent_id=not per_agent, obs_last_action=False, obs_individual_obs=False,
                    learner=learner, agent_output_type="pi_logits", action_selector="soft_policies",
                    critic_type=f"{critic}_ns" if per_agent else critic,
                    state_value_type="cv_critic_ns" if per_agent else "cv_critic", hidden_dim=16,
                    common_reward=True, standardise_rewards=False, standardise_returns=False,
                    target_update_interval_or_tau=0.01, q_nstep=2, initial_entropy_coef=20.0,
                    final_entropy_coef=0.01, entropy_end_ratio=0.8, t_max=1000, train_unroll="fused", lr=0.01)
    return build_learner(learner, make_args(**{**settings, **overrides}))


def test_each_agent_sees_the_others_actions_in_agent_order():
    actions = th.eye(4)[th.tensor([[2, 0, 3]])]  # [1, 3 agents, 4 actions]
    others = other_agents_actions(actions)  # [1, 3, 8]
    assert others[0, 0].tolist() == th.cat([th.eye(4)[0], th.eye(4)[3]]).tolist()
    assert others[0, 1].tolist() == th.cat([th.eye(4)[2], th.eye(4)[3]]).tolist()
    assert others[0, 2].tolist() == th.cat([th.eye(4)[2], th.eye(4)[0]]).tolist()
    joint = all_joint_actions(2, 3)  # itertools.product order: the last agent fastest
    assert joint.shape == (9, 6) and joint[1].tolist() == [1, 0, 0, 0, 1, 0]


@pytest.mark.parametrize("per_agent", [True, False])
def test_the_maximum_over_the_others_joint_actions_is_a_brute_force_maximum(per_agent):
    learner, _ = make_learner(per_agent=per_agent)
    inputs = learner.critic.build_inputs(make_batch())  # [bs, T, n, input]
    best = learner.critic.max_over_others(inputs)  # [bs, T, n, n_actions]
    eye = th.eye(N_ACTIONS)
    brute = th.full_like(best, -float("inf"))
    for combo in itertools.product(range(N_ACTIONS), repeat=N_AGENTS - 1):
        others = th.cat([eye[a] for a in combo]).expand(*inputs.shape[:3], -1)
        brute = th.maximum(brute, learner.critic(inputs, others))
    assert th.allclose(best, brute, atol=1e-6)


def train_once_with_copies(learner) -> tuple:
    """One train call on a test batch: (the batch, copies of critic, target critic and state value taken before
    it, the valid-step mask [bs, T-1, n], every agent's team reward [bs, T-1, n])."""
    batch = make_batch(seed=5)
    copies = tuple(copy.deepcopy(net) for net in (learner.critic, learner.target_critic, learner.state_value))
    learner.train(batch, t_env=100, episode_num=1)
    mask = valid_step_mask(batch, batch["terminated"][:, :-1].float()).expand(-1, -1, N_AGENTS)  # [bs, T-1, n]
    return batch, copies, mask, batch["reward"][:, :-1].expand(-1, -1, N_AGENTS)


def test_the_critic_loss_and_advantages_are_those_of_their_definitions():
    """From copies taken before the call: 2-step returns of the target critic's best value of the action
    taken (no value after the last transition), both squared errors, and A = max Q - V."""
    learner, logger = make_learner(q_nstep=2)
    batch, (critic, target_critic, state_value), mask, rewards = train_once_with_copies(learner)
    gamma = learner.args.gamma
    actions = batch["actions"][:, :-1].long()
    with th.no_grad():
        inputs = critic.build_inputs(batch)[:, :-1]
        target_best = target_critic.max_over_others(inputs).gather(-1, actions).squeeze(-1)  # [bs, T-1, n]
        transitions = rewards.shape[1]
        returns = th.zeros_like(rewards)
        for t in range(transitions):
            for k in range(3):
                if t + k >= transitions:
                    break
                term = target_best[:, t + k] if k == 2 else rewards[:, t + k]
                returns[:, t] += gamma ** k * term * mask[:, t + k]
        q_taken = critic(inputs, taken_others(batch, N_ACTIONS)[:, :-1]).gather(-1, actions).squeeze(-1)
        values = state_value(state_value.build_inputs(batch))[:, :-1, :, 0]
        expected_loss = (((returns - q_taken) ** 2 + (returns - values) ** 2) * mask).sum() / mask.sum()
        advantages = critic.max_over_others(inputs).gather(-1, actions).squeeze(-1) - values
        expected_advantage = (advantages * mask).sum() / mask.sum()
    assert logger.stats["critic_loss"][0][1] == pytest.approx(expected_loss.item(), rel=1e-5)
    assert logger.stats["advantage_mean"][0][1] == pytest.approx(expected_advantage.item(), rel=1e-5, abs=1e-6)
    assert logger.stats["entropy_coef"][0][1] == pytest.approx(0.875 * 20.0 + 0.125 * 0.01)


def test_the_entropy_coefficient_anneals_over_the_given_share_of_t_max():
    learner, _ = make_learner(t_max=1000, entropy_end_ratio=0.5, initial_entropy_coef=10.0, final_entropy_coef=1.0)
    assert [learner._entropy_coef(t) for t in (0, 250, 500, 900)] == [10.0, 5.5, 1.0, 1.0]


def test_too_many_joint_actions_of_the_others_are_refused():
    with pytest.raises(ValueError, match=r"enumerates the other agents' joint actions: 20\^3 of them"):
        scheme, groups, _ = build_scheme({"n_agents": 4, "n_actions": 20, "state_shape": 5, "obs_shape": 3})
        from modules.critics.pac import PACCriticNS
        PACCriticNS(scheme, make_args(n_agents=4, n_actions=20, hidden_dim=8, obs_individual_obs=False,
                                      obs_last_action=False))


@pytest.mark.parametrize("config, name, resume", [("pac_ns", "pac_sarsa_ns", True), ("pac", "pac_sarsa", False)])
def test_pac_configs_train_save_and_resume_from_the_command_line(tmp_path, config, name, resume):
    _, info = train_on_spread(tmp_path, config, name, resume, "batch_size_run=2", "env_processes=main",
                              "buffer_size=2", "batch_size=2")
    for key in ("critic_loss", "td_error_abs", "advantage_mean", "pg_loss", "pi_max", "entropy_coef"):
        assert np.all(np.isfinite(info[key])), key


def test_pac_trains_each_agent_on_its_own_reward(tmp_path):
    proc = run_main("--config=pac_ns", "--env-config=gymma", "with", "env_args.key=lbforaging:Foraging-8x8-2p-3f-v3",
                    "env_args.time_limit=20", "common_reward=False", "batch_size_run=2", "env_processes=main",
                    "buffer_size=2", "batch_size=2", "test_nepisode=2", "test_interval=60", "log_interval=60",
                    "runner_log_interval=60", "hidden_dim=16", f"local_results_path={tmp_path}", "t_max=100")
    assert proc.returncode == 0, proc.stderr[-3000:]
    info = read_json(run_dir(str(tmp_path), "Foraging-8x8-2p-3f-v3", "pac_sarsa_ns", 1), "info.json")
    assert info["agent_1_return_mean"] and np.all(np.isfinite(info["critic_loss"]))

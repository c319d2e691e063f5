"""EPyMARL's MADDPG (maddpg_learner, maddpg_critic / maddpg_critic_ns; configs maddpg, maddpg_ns): the joint
actions each agent's critic sees, the critic's targets and the actor's Gumbel-softmax loss recomputed by hand
on a hand-built batch, the target schedules, and both configs from the command line."""
import copy

import numpy as np
import pytest
import torch as th

from components.action_selectors import gumbel_softmax
from learners.maddpg_learner import joint_actions, own_gradient_joint_actions
from learners.q_learner import valid_step_mask
from utils.th_utils import one_hot
from main_runs import read_json, run_dir, run_main, train_on_spread
from test_learner import N_ACTIONS, N_AGENTS, STATE_DIM, build_learner, make_args, make_batch

th.set_num_threads(1)


def make_learner(seed: int = 0, **overrides):
    th.manual_seed(seed)
    settings = dict(agent="rnn", mac="maddpg_mac", use_rnn=True, obs_last_action=False, learner="maddpg_learner",
                    agent_output_type="pi_logits", action_selector="soft_policies", critic_type="maddpg_critic",
                    hidden_dim=16, obs_individual_obs=False, common_reward=True, reg=0.001,
                    standardise_rewards=False, standardise_returns=False, target_update_interval_or_tau=200,
                    train_unroll="fused", lr=0.01)
    return build_learner("maddpg_learner", make_args(**{**settings, **overrides}))


def test_each_critic_sees_the_joint_action_with_only_its_own_agents_gradient():
    samples = th.rand(2, 3, N_AGENTS, N_ACTIONS, requires_grad=True)
    joint = own_gradient_joint_actions(samples)  # [2, 3, n, n * A]
    assert th.equal(joint, joint_actions(samples.detach()))
    for i in range(N_AGENTS):
        (grad,) = th.autograd.grad(joint[:, :, i].sum(), samples, retain_graph=True)
        assert grad[:, :, i].abs().sum() > 0
        assert grad[:, :, [j for j in range(N_AGENTS) if j != i]].abs().sum() == 0


@pytest.mark.parametrize("critic_type, agent_id, width", [("maddpg_critic", True, STATE_DIM + N_AGENTS),
                                                           ("maddpg_critic", False, STATE_DIM),
                                                           ("maddpg_critic_ns", False, STATE_DIM)])
def test_the_critics_inputs_are_state_id_and_joint_action(critic_type, agent_id, width):
    """The id goes in with obs_agent_id (EPyMARL's shared critic), never into the per-agent critics."""
    learner, _ = make_learner(critic_type=critic_type, obs_agent_id=agent_id,
                              agent="rnn_ns" if critic_type.endswith("_ns") else "rnn")
    batch = make_batch()
    inputs = learner.critic.build_inputs(batch)  # [bs, T, n, state (+ id)]
    assert inputs.shape[-1] == width
    assert th.equal(inputs[..., :STATE_DIM], batch["state"].unsqueeze(2).expand(-1, -1, N_AGENTS, -1))
    joint = joint_actions(one_hot(batch["actions"], N_ACTIONS))
    assert learner.critic(inputs, joint).shape == (*inputs.shape[:3], 1)


def test_the_critic_and_actor_losses_are_those_of_their_definitions():
    """The logged losses against a recomputation from copies of the networks taken before the call:
    one-step targets of the target actors' greedy actions on the valid steps (episode 0's terminal
    transition included, the padding after it not), and the actor's loss through the updated critic."""
    learner, logger = make_learner()
    batch = make_batch(seed=2)
    mac, target_mac, target_critic = copy.deepcopy(learner.mac), copy.deepcopy(learner.target_mac), \
        copy.deepcopy(learner.target_critic)
    critic = copy.deepcopy(learner.critic)
    th.manual_seed(7)
    learner.train(batch, t_env=1, episode_num=1)

    gamma, n, avail = learner.args.gamma, N_AGENTS, batch["avail_actions"]
    terminated = batch["terminated"][:, :-1].float()
    mask = valid_step_mask(batch, terminated).expand(-1, -1, n)  # [bs, T-1, n]
    assert mask[0].sum() == 2 * n  # episode 0: two transitions, the second terminal
    inputs = critic.build_inputs(batch)
    with th.no_grad():
        target_logits = target_mac.agent.forward_sequence(target_mac.build_sequence_inputs(batch))
        target_logits = target_logits.masked_fill(avail == 0, -1e10)
        greedy = one_hot(target_logits[:, 1:].argmax(-1, keepdim=True), N_ACTIONS)
        targets = batch["reward"][:, :-1] + gamma * (1 - terminated) * target_critic(inputs[:, 1:],
                                                                                   joint_actions(greedy))[..., 0]
        q_taken = critic(inputs[:, :-1], joint_actions(one_hot(batch["actions"][:, :-1], N_ACTIONS)))[..., 0]
        expected_critic_loss = ((q_taken - targets).pow(2) * mask).sum() / mask.sum()

        logits = mac.agent.forward_sequence(mac.build_sequence_inputs(batch))[:, :-1]
        logits = logits.masked_fill(avail[:, :-1] == 0, -1e10)
        th.manual_seed(7)
        samples = gumbel_softmax(logits, hard=True)
        q = learner.critic(inputs[:, :-1], joint_actions(samples))[..., 0]  # the critic after its step
        penalty = logits.masked_fill(avail[:, :-1] == 0, 0).pow(2).mean(-1)
        expected_pg_loss = -(q * mask).sum() / mask.sum() + 0.001 * (penalty * mask).sum() / mask.sum()
    assert logger.stats["critic_loss"][0][1] == pytest.approx(expected_critic_loss.item(), rel=1e-5)
    assert logger.stats["pg_loss"][0][1] == pytest.approx(expected_pg_loss.item(), rel=1e-5)
    assert not th.equal(next(iter(learner.mac.parameters())), next(iter(mac.parameters())))


def test_targets_are_copied_every_interval_of_episodes_or_follow_softly():
    learner, _ = make_learner(target_update_interval_or_tau=10)
    batch = make_batch()
    same = []
    for episode in (4, 8, 12, 16, 24):
        learner.train(batch, t_env=episode, episode_num=episode)
        same.append(all(th.equal(a, b) for a, b in zip(learner.target_critic.parameters(),
                                                       learner.critic.parameters())))
    assert same == [False, False, True, False, True]
    soft, _ = make_learner(target_update_interval_or_tau=0.5)
    before = [p.detach().clone() for p in soft.target_mac.parameters()]
    soft.train(batch, t_env=1, episode_num=1)
    for old, target, online in zip(before, soft.target_mac.parameters(), soft.mac.parameters()):
        assert th.allclose(target, 0.5 * old + 0.5 * online)


@pytest.mark.parametrize("config, critic_type, resume", [("maddpg", "maddpg_critic", True),
                                                         ("maddpg_ns", "maddpg_critic_ns", False)])
def test_maddpg_configs_train_save_and_resume_from_the_command_line(tmp_path, config, critic_type, resume):
    config_json, info = train_on_spread(tmp_path, config, config, resume, "buffer_size=4", "batch_size=2")
    assert config_json["critic_type"] == critic_type and config_json["rnn_hidden_dim"] == 16
    for key in ("critic_loss", "critic_grad_norm", "td_error_abs", "q_taken_mean", "target_mean", "pg_loss",
                "agent_grad_norm", "test_return_mean"):
        assert np.all(np.isfinite(info[key])), key


def test_maddpg_trains_each_agents_critic_on_its_own_reward(tmp_path):
    proc = run_main("--config=maddpg", "--env-config=gymma", "with", "env_args.key=lbforaging:Foraging-8x8-2p-3f-v3",
                    "env_args.time_limit=20", "common_reward=False", "buffer_size=4", "batch_size=2",
                    "test_nepisode=2", "test_interval=60", "log_interval=60", "runner_log_interval=60",
                    "hidden_dim=16", f"local_results_path={tmp_path}", "t_max=100")
    assert proc.returncode == 0, proc.stderr[-3000:]
    info = read_json(run_dir(str(tmp_path), "Foraging-8x8-2p-3f-v3", "maddpg", 1), "info.json")
    assert info["agent_1_return_mean"] and np.all(np.isfinite(info["critic_loss"]))

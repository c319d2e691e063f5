"""Prioritized replay (use_per), as PyMARL2's per_run: proportional stratified sampling, importance
weights with annealed beta, new episodes at the highest priority, the learner's priorities, and runs
that train, save and resume with it."""
import math
import os
import random

import numpy as np
import pytest
import torch as th

from components.episode_buffer import EpisodeBatch, PrioritizedReplayBuffer
from main_runs import read_json, run_dir, run_main
from run import checkpoint
from run.run import build_scheme
from test_learner import make_batch, make_learner
from test_resume import make_args, make_loop, resumed_loop, tensors_equal

ENV_INFO = {"n_agents": 2, "n_actions": 3, "state_shape": 2, "obs_shape": 2}


def episodes(rewards: list) -> EpisodeBatch:
    """One single-step episode per reward (reward r, state [r, r])."""
    scheme, groups, preprocess = build_scheme(ENV_INFO)
    batch = EpisodeBatch(scheme, groups, len(rewards), 2, preprocess=preprocess)
    for row, reward in enumerate(rewards):
        batch.update({"state": [[reward, reward], [0.0, 0.0]]}, bs=row, ts=slice(0, 2))
        batch.update({"reward": [(reward,)], "terminated": [(True,)]}, bs=row, ts=0)
    return batch


def buffer(size: int = 8, alpha: float = 1.0, beta: float = 0.5, t_max: int = 100) -> PrioritizedReplayBuffer:
    scheme, groups, preprocess = build_scheme(ENV_INFO)
    return PrioritizedReplayBuffer(scheme, groups, size, 2, alpha, beta, t_max, preprocess=preprocess)


def test_sampling_is_stratified_by_priority_as_in_pymarl2():
    per = buffer(alpha=0.5)
    per.insert_episode_batch(episodes([0.0, 1.0, 2.0, 3.0]))
    per.update_priorities(np.array([0, 1, 2, 3]), np.array([1.0, 4.0, 9.0, 16.0]))  # p^0.5 = 1, 2, 3, 4
    random.seed(5)
    draws = [random.random() for _ in range(4)]
    random.seed(5)
    batch, slots, weights = per.sample(4, t_env=50)
    # Total mass 10 in 4 slices of 2.5: one point per slice, the slot whose cumulative mass (1, 3, 6, 10) passes it.
    cumulative = np.array([1.0, 3.0, 6.0, 10.0])
    expected = [int(np.searchsorted(cumulative, (u + i) * 2.5, side="right")) for i, u in enumerate(draws)]
    assert slots.tolist() == expected
    assert batch["reward"][:, 0, 0].tolist() == [float(slot) for slot in expected]  # the episodes of those slots
    # beta = 0.5 + 50 * (1 - 0.5) / 100 = 0.75; w_i = (N P_i)^-beta / max_j (N P_j)^-beta = (P_i / P_min)^-beta.
    assert per.beta == pytest.approx(0.75)
    probabilities = np.array([1.0, 2.0, 3.0, 4.0]) / 10
    assert weights == pytest.approx((probabilities[slots] / probabilities.min()) ** -0.75)


def test_draws_follow_the_priorities_and_reach_every_stored_episode():
    """PyMARL2's segment-tree sum stops one slot short, so it never draws the episode in the last filled
    slot; here every stored episode can be drawn, in proportion to its priority."""
    per = buffer(size=4, alpha=1.0)
    per.insert_episode_batch(episodes([0.0, 1.0, 2.0, 3.0]))
    per.update_priorities(np.arange(4), np.array([1.0, 2.0, 3.0, 4.0]))
    random.seed(0)
    counts = np.bincount(np.concatenate([per.sample(4, t_env=0)[1] for _ in range(5000)]), minlength=4)
    assert counts / counts.sum() == pytest.approx([0.1, 0.2, 0.3, 0.4], abs=0.01)


def test_new_episodes_get_the_highest_priority_seen():
    per = buffer(alpha=0.5)
    per.insert_episode_batch(episodes([0.0, 1.0]))
    assert per.weighted_priorities[:2].tolist() == [1.0, 1.0]  # max_priority starts at 1
    per.update_priorities(np.array([0, 1]), np.array([0.25, 9.0]))
    per.insert_episode_batch(episodes([2.0]))
    assert per.weighted_priorities[:3].tolist() == [0.5, 3.0, 3.0]
    with pytest.raises(ValueError, match="one positive priority per slot"):
        per.update_priorities(np.array([0]), np.array([0.0]))


def test_priorities_survive_a_checkpoint():
    per = buffer()
    per.insert_episode_batch(episodes([0.0, 1.0, 2.0]))
    per.update_priorities(np.array([0, 2]), np.array([0.5, 7.0]))
    restored = buffer()
    restored.load_state_dict(per.state_dict())
    assert restored.weighted_priorities.tolist() == per.weighted_priorities.tolist()
    assert restored.max_priority == 7.0 and restored.episodes_in_buffer == 3


def test_weights_scale_each_episodes_squared_errors():
    """The loss is linear in the weights: weights (1, 0) and (0, 1) split the uniform loss between the
    episodes, and weights of 1 give it whole."""
    batch = make_batch()
    losses = {}
    for weights in (None, (1.0, 1.0), (1.0, 0.0), (0.0, 1.0)):
        learner, logger = make_learner(mixer="qmix")
        info = learner.train(batch, t_env=0, episode_num=0, per_weight=None if weights is None else th.tensor(weights))
        assert info.keys() == (set() if weights is None else {"td_errors_abs"})
        losses[weights] = logger.stats["loss_td"][0][1]
    assert losses[(1.0, 1.0)] == pytest.approx(losses[None])
    assert losses[(1.0, 0.0)] + losses[(0.0, 1.0)] == pytest.approx(losses[None])
    assert 0 < losses[(1.0, 0.0)] < losses[None]


def test_td_error_priorities_are_summed_errors_over_the_root_of_valid_steps():
    learner, _ = make_learner()
    masked_td_error = th.tensor([[[1.0], [-2.0], [0.0]], [[3.0], [0.5], [-0.5]]])  # [bs, T-1, 1]
    mask = th.tensor([[[1.0], [1.0], [0.0]], [[1.0], [1.0], [1.0]]])
    priorities = learner._priorities(th.zeros(2, 3, 1), masked_td_error, mask)
    assert priorities.tolist() == pytest.approx([3 / math.sqrt(2), 4 / math.sqrt(3)])


def test_return_priorities_are_returns_mapped_to_the_range_seen():
    learner, _ = make_learner(return_priority=True)
    batch = make_batch()
    returns = batch["reward"].sum(dim=(1, 2))
    first = learner.train(batch, t_env=0, episode_num=0, per_weight=th.ones(2))["td_errors_abs"]
    low, high = returns.min().item(), returns.max().item()
    assert first.tolist() == pytest.approx(((returns - low) / (high - low + 1e-5)).tolist())
    assert (learner.priority_min, learner.priority_max) == (pytest.approx(low), pytest.approx(high))
    assert learner.state_dict()["priority_max"] == pytest.approx(high)


@pytest.mark.parametrize("extra", [[], ["return_priority=True"]], ids=["td-error", "return"])
def test_training_with_prioritized_replay_runs_and_resumes(tmp_path, extra):
    common = ["--config=qmix", "--env-config=one_step_matrix_game", "with", "seed=1", f"local_results_path={tmp_path}",
              "use_per=True", "use_cuda=False", "rnn_hidden_dim=8", "mixing_embed_dim=8", "hypernet_embed=8",
              "buffer_size=16", "batch_size=4", "batch_size_run=2", "test_interval=20", "test_nepisode=2",
              "log_interval=20", "runner_log_interval=20", "learner_log_interval=20", "save_model=True",
              "save_model_interval=20", "save_buffer=True", *extra]
    first = run_main(*common, "t_max=40")
    assert first.returncode == 0, first.stderr[-3000:]
    info = read_json(run_dir(str(tmp_path), "one_step_matrix_game", "qmix_env=8_adam_td_lambda", 1), "info.json")
    assert all(math.isfinite(loss) for loss in info["loss_td"]) and len(info["loss_td"]) >= 2
    (token,) = os.listdir(tmp_path / "models")
    second = run_main(*common, "t_max=60", f"checkpoint_path={tmp_path / 'models' / token}", "resume=True")
    assert second.returncode == 0, second.stderr[-3000:]
    assert "16 episodes in the replay buffer" in second.stderr


def test_a_prioritized_run_resumes_exactly(tmp_path):
    """Priorities, the return range and the sampling state come back: the next step is the same (for the
    same t_max, over which beta anneals)."""
    th.manual_seed(5)
    a = make_loop(make_args(str(tmp_path), use_per=True, t_max=60))
    try:
        while a.runner.t_env <= 30:  # stopped after the checkpoint of t_env 31, as the resumed run's t_max is 60
            a.iterate()
        rngs_at_stop = checkpoint.rng_states()
        b, _ = resumed_loop(a, use_per=True)
        try:
            assert b.buffer.weighted_priorities.tolist() == a.buffer.weighted_priorities.tolist()
            assert b.buffer.max_priority == a.buffer.max_priority > 0
            assert b.learner.state_dict() == a.learner.state_dict()
            b.learn()
            checkpoint.set_rng_states(rngs_at_stop)
            a.learn()
            assert tensors_equal(b.learner.mac.agent.state_dict(), a.learner.mac.agent.state_dict())
            assert b.buffer.weighted_priorities.tolist() == a.buffer.weighted_priorities.tolist()
        finally:
            b.runner.close_env()
    finally:
        a.runner.close_env()

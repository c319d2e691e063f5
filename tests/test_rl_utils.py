"""TD(lambda) and Q(lambda) targets against values worked out by hand.

Batch of 2 episodes, T = 4 stored steps (3 transitions), gamma = 0.5, lambda = 0.5, so
lambda * gamma = 0.25 and (1 - lambda) * gamma = 0.25.

Episode A terminates: transitions t=0,1 with terminated at t=1; the learner's mask then is
[1, 1, 0] (step 2 follows termination). Target Qs after the end are junk that must not leak.
Episode B is truncated by the time limit: all 3 transitions filled, never terminated, so it
bootstraps from Q at the last stored step (t=3).
"""
import pytest
import torch as th

from utils.rl_utils import build_q_lambda_targets, build_td_lambda_targets

th.set_num_threads(1)

GAMMA = 0.5
LAMBDA = 0.5


def column(values):
    """[batch][time] nested list -> [batch, time, 1] float tensor."""
    return th.tensor(values, dtype=th.float32).unsqueeze(-1)


REWARDS = column([[1.0, 2.0, 0.0], [1.0, 1.0, 1.0]])      # [2, 3, 1]
TERMINATED = column([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])   # [2, 3, 1]
MASK = column([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])         # [2, 3, 1]
TARGET_QS = column([[10.0, 20.0, 30.0, 40.0], [4.0, 8.0, 12.0, 16.0]])  # [2, 4, 1]


def test_td_lambda_targets_by_hand():
    targets = build_td_lambda_targets(REWARDS, TERMINATED, MASK, TARGET_QS, 1, GAMMA, LAMBDA)
    # A: G3 = 40 * (1 - 1) = 0 (terminated episode: no bootstrap)
    #    G2 = 0.25 * 0 + 0 * (...)                     = 0     (masked, after termination)
    #    G1 = 0.25 * 0 + 1 * (2 + 0.25 * 30 * (1 - 1)) = 2
    #    G0 = 0.25 * 2 + 1 * (1 + 0.25 * 20)           = 6.5
    #    (check: 1 + 0.5 * (0.5 * 20 + 0.5 * 2) = 6.5)
    # B: G3 = 16 (truncated: bootstrap from the last stored step)
    #    G2 = 0.25 * 16   + (1 + 0.25 * 16) = 9        (= 1 + 0.5 * 16, one-step)
    #    G1 = 0.25 * 9    + (1 + 0.25 * 12) = 6.25
    #    G0 = 0.25 * 6.25 + (1 + 0.25 * 8)  = 4.5625
    expected = column([[6.5, 2.0, 0.0], [4.5625, 6.25, 9.0]])
    assert targets.shape == (2, 3, 1)
    assert th.allclose(targets, expected)


def test_td_lambda_zero_is_one_step_td():
    targets = build_td_lambda_targets(REWARDS, TERMINATED, MASK, TARGET_QS, 1, GAMMA, 0.0)
    # G_t = m_t * (r_t + 0.5 * (1 - d_t) * Q_{t+1})
    # A: [1 + 0.5 * 20, 2 + 0, 0] = [11, 2, 0]
    # B: [1 + 0.5 * 8, 1 + 0.5 * 12, 1 + 0.5 * 16] = [5, 7, 9]
    expected = column([[11.0, 2.0, 0.0], [5.0, 7.0, 9.0]])
    assert th.allclose(targets, expected)


def test_q_lambda_targets_by_hand():
    taken_qs = column([[9.0, 20.0, 27.0, 0.0], [4.0, 6.0, 12.0, 0.0]])  # [2, 4, 1]
    targets = build_q_lambda_targets(REWARDS, TERMINATED, MASK, TARGET_QS, taken_qs, GAMMA, LAMBDA)
    # corrected reward r'_t = r_t + E_t - Q_t
    # A: r' = [1 + 10 - 9, 2 + 20 - 20, 0 + 30 - 27] = [2, 2, 3]
    #    G3 = 0; G2 = 0 (masked); G1 = 0 + (2 + 0) = 2; G0 = 0.25 * 2 + (2 + 0.25 * 20) = 7.5
    # B: r' = [1 + 4 - 4, 1 + 8 - 6, 1 + 12 - 12] = [1, 3, 1]
    #    G3 = 16; G2 = 4 + (1 + 4) = 9; G1 = 0.25 * 9 + (3 + 0.25 * 12) = 8.25
    #    G0 = 0.25 * 8.25 + (1 + 0.25 * 8) = 5.0625
    expected = column([[7.5, 2.0, 0.0], [5.0625, 8.25, 9.0]])
    assert th.allclose(targets, expected)


def test_q_lambda_equals_td_lambda_when_actions_are_greedy():
    td = build_td_lambda_targets(REWARDS, TERMINATED, MASK, TARGET_QS, 1, GAMMA, LAMBDA)
    q = build_q_lambda_targets(REWARDS, TERMINATED, MASK, TARGET_QS, TARGET_QS, GAMMA, LAMBDA)
    assert th.allclose(td, q)


def test_per_agent_targets_broadcast_team_reward():
    # Independent learners: target_qs [2, 4, n_agents]; each agent's column gets the same
    # recursion as a single-column call with that agent's Qs.
    per_agent_qs = th.cat([TARGET_QS, 3.0 * TARGET_QS], dim=2)  # [2, 4, 2]
    targets = build_td_lambda_targets(REWARDS, TERMINATED, MASK, per_agent_qs, 2, GAMMA, LAMBDA)
    assert targets.shape == (2, 3, 2)
    for agent in range(2):
        single = build_td_lambda_targets(REWARDS, TERMINATED, MASK, per_agent_qs[:, :, agent:agent + 1],
                                         1, GAMMA, LAMBDA)
        assert th.allclose(targets[:, :, agent:agent + 1], single)
    # Agent 1, episode B, last step: 1 + 0.5 * (3 * 16) = 25
    assert targets[1, 2, 1].item() == 25.0


def recursive_lambda_returns(rewards, terminated, mask, values, gamma, td_lambda):
    """PyMARL2's backward loop over time, the reference for the matrix form."""
    returns = values.new_zeros(*values.shape)
    returns[:, -1] = values[:, -1] * (1 - th.sum(terminated, dim=1))
    for t in range(returns.shape[1] - 2, -1, -1):
        one_step = rewards[:, t] + (1 - td_lambda) * gamma * values[:, t + 1] * (1 - terminated[:, t])
        returns[:, t] = td_lambda * gamma * returns[:, t + 1] + mask[:, t] * one_step
    return returns[:, :-1]


@pytest.mark.parametrize("k", [1, 3], ids=["mixed", "per_agent"])
@pytest.mark.parametrize("td_lambda", [0.0, 0.6, 1.0])
def test_td_lambda_targets_match_pymarl2s_recursion_on_random_episodes(k, td_lambda):
    gen = th.Generator().manual_seed(k)
    batch, steps = 6, 40
    lengths = th.randint(1, steps, (batch,), generator=gen)  # transitions per episode
    filled = (th.arange(steps - 1)[None] < lengths[:, None]).float().unsqueeze(-1)  # [batch, T-1, 1]
    terminated = th.zeros(batch, steps - 1, 1)
    ended = lengths < steps - 1  # the others are cut by the time limit
    terminated[ended, lengths[ended] - 1] = 1
    rewards = th.randn(batch, steps - 1, 1, generator=gen) * filled
    values = th.randn(batch, steps, k, generator=gen)
    targets = build_td_lambda_targets(rewards, terminated, filled, values, k, 0.99, td_lambda)
    expected = recursive_lambda_returns(rewards, terminated, filled, values, 0.99, td_lambda)
    assert targets.shape == (batch, steps - 1, k)
    assert th.allclose(targets, expected, rtol=1e-5, atol=1e-5)

"""Multi-step targets for value-based MARL (PyMARL2's ``utils/rl_utils.py`` semantics).

Both builders take tensors laid out ``[batch, time, ...]`` where the per-step quantities
(rewards, terminated, mask) cover the ``T - 1`` transitions of an episode batch and the
value estimates cover all ``T`` stored steps (the last one is the bootstrap step).
"""
import torch as th


def _lambda_returns(step_rewards: th.Tensor, terminated: th.Tensor, mask: th.Tensor,
                    values: th.Tensor, gamma: float, td_lambda: float) -> th.Tensor:
    """Backward recursion shared by TD(lambda) and Q(lambda); see build_td_lambda_targets."""
    returns = values.new_zeros(*values.shape)  # [batch, T, k]
    episode_terminated = th.sum(terminated, dim=1)  # [batch, 1]
    returns[:, -1] = values[:, -1] * (1 - episode_terminated)
    for t in range(returns.shape[1] - 2, -1, -1):
        one_step = step_rewards[:, t] + (1 - td_lambda) * gamma * values[:, t + 1] * (1 - terminated[:, t])
        returns[:, t] = td_lambda * gamma * returns[:, t + 1] + mask[:, t] * one_step
    return returns[:, :-1]  # [batch, T-1, k]


def build_td_lambda_targets(rewards: th.Tensor, terminated: th.Tensor, mask: th.Tensor,
                            target_qs: th.Tensor, n_agents: int, gamma: float,
                            td_lambda: float) -> th.Tensor:
    """TD(lambda) returns G_t for t = 0 .. T-2, computed backwards in time.

    With r_t = rewards, d_t = terminated, m_t = mask and Q_t = target_qs:

        G_{T-1} = Q_{T-1} * (1 - sum_t d_t)
        G_t     = lambda * gamma * G_{t+1}
                  + m_t * (r_t + (1 - lambda) * gamma * (1 - d_t) * Q_{t+1})

    An episode that terminated inside the batch gets no bootstrap value at the end; an
    episode cut by the time limit (no d_t = 1) bootstraps from Q at the last stored step.
    Steps after termination have m_t = 0, so they only pass on lambda * gamma * G_{t+1},
    which is 0 once the episode has ended. ``n_agents`` is unused; it is kept so the
    signature matches PyMARL2's.

    Shapes: rewards, terminated, mask [batch, T-1, 1]; target_qs [batch, T, k] with k = 1
    (mixed Q_tot) or k = n_agents (independent learners; the other inputs broadcast).
    Returns [batch, T-1, k].
    """
    return _lambda_returns(rewards, terminated, mask, target_qs, gamma, td_lambda)


def build_q_lambda_targets(rewards: th.Tensor, terminated: th.Tensor, mask: th.Tensor,
                           exp_qvals: th.Tensor, qvals: th.Tensor, gamma: float,
                           td_lambda: float) -> th.Tensor:
    """Peng's Q(lambda) returns: TD(lambda) on E with an off-policy correction per reward.

    With E_t = exp_qvals (target value of the greedy action) and Q_t = qvals (target value
    of the action actually taken), the reward at step t becomes r'_t = r_t + E_t - Q_t and
    the TD(lambda) recursion of build_td_lambda_targets runs with r' and E:

        G_{T-1} = E_{T-1} * (1 - sum_t d_t)
        G_t     = lambda * gamma * G_{t+1}
                  + m_t * (r'_t + (1 - lambda) * gamma * (1 - d_t) * E_{t+1})

    Shapes: rewards, terminated, mask [batch, T-1, 1]; exp_qvals, qvals [batch, T, k].
    Returns [batch, T-1, k].
    """
    corrected_rewards = rewards + exp_qvals[:, :-1] - qvals[:, :-1]  # [batch, T-1, k]
    return _lambda_returns(corrected_rewards, terminated, mask, exp_qvals, gamma, td_lambda)

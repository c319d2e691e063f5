"""Multi-step targets for value-based MARL (PyMARL2's ``utils/rl_utils.py`` semantics).

Both builders take tensors laid out ``[batch, time, ...]`` where the per-step quantities
(rewards, terminated, mask) cover the ``T - 1`` transitions of an episode batch and the
value estimates cover all ``T`` stored steps (the last one is the bootstrap step).
"""
import functools

import torch as th


def _lambda_returns(step_rewards: th.Tensor, terminated: th.Tensor, mask: th.Tensor,
                    values: th.Tensor, gamma: float, td_lambda: float) -> th.Tensor:
    """The recursion of build_td_lambda_targets, unrolled: G_t = sum_{s >= t} (lambda gamma)^(s - t) y_s
    with y_s = m_s * (one-step return) for s < T-1 and y_{T-1} = G_{T-1}; one [T-1, T] matrix product
    instead of T small steps (the same sums, added in another order)."""
    episode_terminated = th.sum(terminated, dim=1, keepdim=True)  # [batch, 1, 1]
    one_step = step_rewards + (1 - td_lambda) * gamma * values[:, 1:] * (1 - terminated)  # [batch, T-1, k]
    last = values[:, -1:] * (1 - episode_terminated)  # [batch, 1, k]
    y = th.cat([mask * one_step, last], dim=1)  # [batch, T, k]
    return th.matmul(_discounts(values.shape[1], td_lambda * gamma, y.dtype, y.device), y)  # [batch, T-1, k]


@functools.lru_cache(maxsize=8)
def _discounts(steps: int, decay: float, dtype: th.dtype, device: th.device) -> th.Tensor:
    """[steps - 1, steps]: decay^(s - t) at row t, column s >= t; 0 below the diagonal."""
    offsets = th.arange(steps, device=device) - th.arange(steps - 1, device=device)[:, None]  # s - t
    return th.where(offsets >= 0, decay ** offsets.clamp(min=0).to(th.float64), 0.0).to(dtype)


def build_td_lambda_targets(rewards: th.Tensor, terminated: th.Tensor, mask: th.Tensor,
                            target_qs: th.Tensor, n_agents: int, gamma: float,
                            td_lambda: float) -> th.Tensor:
    """TD(lambda) returns G_t for t = 0 .. T-2, defined backwards in time (and computed in one matrix
    product, see _lambda_returns).

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


def build_gae_targets(rewards: th.Tensor, terminated: th.Tensor, mask: th.Tensor, values: th.Tensor,
                      gamma: float, gae_lambda: float) -> tuple[th.Tensor, th.Tensor]:
    """Generalised advantage estimates and the value targets they imply (PyMARL2's build_gae_targets,
    used by its ppo_learner), with termination handled as GAE defines it.

    With r_t = rewards, d_t = terminated, m_t = mask and V_t = values:

        delta_t = m_t * (r_t + gamma * (1 - d_t) * V_{t+1} - V_t)
        A_t     = sum_{s >= t} (gamma * lambda)^(s - t) * delta_s
        targets = V_t + A_t   (for t = 0 .. T-2)

    Steps after an episode's end have m_t = 0, so the sum stops there. PyMARL2 bootstraps with
    m_t instead of 1 - d_t, which values the state after the last transition (the final
    observation, never trained) as if the episode went on, and leaves -V_t as the advantage of
    padded steps; here a terminal transition gets no bootstrap and padded steps get 0.

    Shapes: rewards, terminated, mask [batch, T-1, 1] or [batch, T-1, k, 1] (broadcast against the
    values); values [batch, T, ...]. Returns (advantages, targets), each [batch, T-1, ...].
    """
    deltas = mask * (rewards + gamma * (1 - terminated) * values[:, 1:] - values[:, :-1])  # [batch, T-1, ...]
    steps = deltas.shape[1]
    discounts = _discounts(steps + 1, gamma * gae_lambda, deltas.dtype, deltas.device)[:, :-1]  # [T-1, T-1]
    flat = deltas.reshape(deltas.shape[0], steps, -1)  # [batch, T-1, rest]
    advantages = th.matmul(discounts, flat).view(deltas.shape)  # [batch, T-1, ...]
    return advantages, values[:, :-1] + advantages


def build_tree_backup_targets(rewards: th.Tensor, terminated: th.Tensor, mask: th.Tensor, q_taken: th.Tensor,
                              expected_q: th.Tensor, pi_taken: th.Tensor, gamma: float, tb_lambda: float,
                              steps: int) -> th.Tensor:
    """DOP's off-policy critic targets (PyMARL2's build_target_q with the TD errors its offpg_learner forms):
    n-step tree backup of the joint value, each later TD error weighted by the current policy's probability
    of the actions taken on the way (no importance ratios, so off-policy data needs no correction).

    With Q_t = q_taken (target Q_tot of the actions taken), E_t = expected_q (target Q_tot of the current
    policy's expected agent values), c_t = pi_taken (the joint probability of the actions taken under the
    current policy), both Q and E zeroed on invalid steps (and at the last stored step if the episode
    terminated):

        delta_t = m_t * (r_t + gamma * E_{t+1} - Q_t)
        G_t     = Q_t + sum_{k=0}^{steps-1} (gamma * tb_lambda)^k * (c_{t+1} ... c_{t+k}) * delta_{t+k}

    with delta and c taken as 0 beyond the batch's last transition. Shapes: rewards, terminated, mask
    [batch, T-1, 1]; q_taken, expected_q, pi_taken [batch, T, 1]. Returns [batch, T-1, 1].
    """
    not_ended = 1 - terminated.sum(dim=1, keepdim=True)  # [batch, 1, 1]: the last stored step bootstraps
    q_taken = th.cat([q_taken[:, :-1] * mask, q_taken[:, -1:] * not_ended], dim=1)  # [batch, T, 1]
    expected_q = th.cat([expected_q[:, :-1] * mask, expected_q[:, -1:] * not_ended], dim=1)
    deltas = mask * (rewards + gamma * expected_q[:, 1:] - q_taken[:, :-1])  # [batch, T-1, 1]
    traces = pi_taken[:, :-1]  # [batch, T-1, 1]
    backup, term, weight = th.zeros_like(deltas), deltas, 1.0
    for _ in range(steps):
        backup = backup + weight * term
        # term_t <- c_{t+1} term_{t+1}: the next step's term, 0 after the last transition
        term = th.cat([(term * traces)[:, 1:], th.zeros_like(term[:, :1])], dim=1)
        weight *= gamma * tb_lambda
    return q_taken[:, :-1] + backup

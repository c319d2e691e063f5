"""The one-step matrix game's learned payoffs as text, as PyMARL2's print_matrix_status prints them while a
value-based learner trains on it (QLearner._log_matrix)."""
from typing import Callable

import numpy as np
import torch as th


def joint_action_table(mac_out: th.Tensor, states: th.Tensor,
                       mix: Callable[[th.Tensor, th.Tensor, th.Tensor], th.Tensor] | None) -> str:
    """What PyMARL2's print_matrix_status prints while learning the game, as text: the learned value
    of every joint action, mix(Q_0(a_0), Q_1(a_1), state, (a_0, a_1)) at the first step averaged over
    the batch (rows: agent 0's action, columns: agent 1's), and each agent's Q-values averaged over the
    batch's steps. mac_out [bs, T, 2, n_actions], states [bs, T, state]; without a mixer only the
    agents' Q-values."""
    bs, _, _, n_actions = mac_out.shape
    per_agent = mac_out.mean(dim=(0, 1)).cpu().numpy()  # [n_agents, n_actions]
    lines = [f"Agents' Q-values (rows: agents), mean over the batch:\n{_matrix_text(per_agent)}"]
    if mix is not None:
        first = mac_out[:, 0]  # [bs, 2, n_actions]
        rows = first[:, 0, :, None].expand(bs, n_actions, n_actions)  # agent 0's Q of the row action
        columns = first[:, 1, None, :].expand(bs, n_actions, n_actions)  # agent 1's Q of the column action
        joint = th.stack([rows, columns], dim=-1).reshape(bs, n_actions * n_actions, 2)  # [bs, n*n, 2]
        first_states = states[:, :1].expand(bs, n_actions * n_actions, *states.shape[2:])  # [bs, n*n, state]
        grid = th.arange(n_actions, device=mac_out.device)
        actions = th.stack(th.meshgrid(grid, grid, indexing="ij"), dim=-1).reshape(1, -1, 2, 1)  # [1, n*n, 2, 1]
        actions = actions.expand(bs, -1, -1, -1)  # [bs, n*n, 2, 1]
        q_tot = mix(joint, first_states, actions).mean(dim=0).view(n_actions, n_actions)  # [n_actions, n_actions]
        lines.insert(0, f"Joint-action Q_tot (rows: agent 0's action, columns: agent 1's):\n"
                        f"{_matrix_text(q_tot.float().cpu().numpy())}")
    return "\n".join(lines)


def _matrix_text(matrix: np.ndarray) -> str:
    return np.array2string(matrix, precision=1, suppress_small=True, floatmode="fixed")

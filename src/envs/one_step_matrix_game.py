"""PyMARL2's one-step matrix game: two agents pick one action each and get payoff[a0][a1].

The default payoff is PyMARL2's non-monotonic matrix, whose optimum (0, 0) QMIX's monotonic
mixing cannot represent exactly; the "monotonic" preset has a unique optimum it can represent,
which makes it a clean check that a value-factorisation learner finds the best joint action.
"""
import numpy as np

from .multiagentenv import MultiAgentEnv

PAYOFF_PRESETS: dict[str, list[list[float]]] = {
    "nonmonotonic": [[12.0, -0.1, -0.1],
                     [-0.1, 0.0, 0.0],
                     [-0.1, 0.0, 0.0]],
    # Product of (2, 1, 0) x (2, 1, 0) scaled by 3: non-decreasing in both agents' action value.
    "monotonic": [[12.0, 6.0, 0.0],
                  [6.0, 3.0, 0.0],
                  [0.0, 0.0, 0.0]],
}
DEFAULT_PRESET = "nonmonotonic"


def _payoff_array(payoff) -> np.ndarray:
    """Validate a user payoff (nested list) into a square float array [n_actions, n_actions]."""
    try:
        matrix = np.asarray(payoff, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"payoff must be a square nested list of numbers, got {payoff!r}") from None
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or matrix.shape[0] < 1:
        raise ValueError(f"payoff must be square [n_actions][n_actions] (both agents share the "
                         f"action set), got shape {list(matrix.shape)}")
    return matrix


class OneStepMatrixGame(MultiAgentEnv):
    """Two agents, one step; observation and state are the one-hot step counter, as in PyMARL2."""

    def __init__(self, *, map_name: str = "one_step_matrix_game", matrix: str | None = None,
                 payoff: list[list[float]] | None = None, seed: int | None = None):
        if matrix is not None and payoff is not None:
            raise ValueError("give env_args either 'matrix' (a preset name) or 'payoff' (a nested list), not both")
        if payoff is None:
            matrix = DEFAULT_PRESET if matrix is None else matrix
            if matrix not in PAYOFF_PRESETS:
                raise ValueError(f"unknown matrix '{matrix}'; known matrices: {', '.join(sorted(PAYOFF_PRESETS))}")
            payoff = PAYOFF_PRESETS[matrix]
        self.payoff = _payoff_array(payoff)  # [n_actions (agent 0), n_actions (agent 1)]
        self.map_name = map_name
        self.n_agents = 2
        self.n_actions = self.payoff.shape[0]
        self.episode_limit = 1
        self._seed = seed
        self._steps = 0

    def reset(self) -> tuple[list[np.ndarray], np.ndarray]:
        self._steps = 0
        return self.get_obs(), self.get_state()

    def step(self, actions) -> tuple[float, bool, dict]:
        if self._steps >= self.episode_limit:
            raise RuntimeError("the matrix game is over after one step; call reset() first")
        first, second = self._checked_actions(actions)
        self._steps = 1
        # The game ends by its own rule, not by a time-limit cut: no "episode_limit" in info.
        return float(self.payoff[first, second]), True, {}

    def get_obs_agent(self, agent_id: int) -> np.ndarray:
        return self.get_state()

    def get_obs_size(self) -> int:
        return self.episode_limit + 1

    def get_state(self) -> np.ndarray:
        step_one_hot = np.zeros(self.episode_limit + 1, dtype=np.float32)
        step_one_hot[self._steps] = 1.0
        return step_one_hot

    def get_state_size(self) -> int:
        return self.episode_limit + 1

    def get_avail_agent_actions(self, agent_id: int) -> np.ndarray:
        return np.ones(self.n_actions, dtype=np.int64)

    def seed(self) -> int | None:
        return self._seed

"""A zero-cost environment with the shapes of a SMAC map, for measuring the framework alone.

Observations and states are cycled from a few arrays drawn once at construction, every action
is always available, every episode lasts exactly `episode_length` steps and ends as a terminal
step whose battle_won is drawn at random. Stepping costs a few array look-ups, so a benchmark on
it measures the runner, buffer and learner rather than the game (issue 7's workload).
"""
import numpy as np

from .multiagentenv import MultiAgentEnv

# Shapes of the SMAC maps (n_agents, n_actions, obs_shape, state_shape, episode_limit) and a
# typical episode length on each.
PRESETS: dict[str, dict[str, int]] = {
    "corridor": {"n_agents": 6, "n_actions": 30, "obs_shape": 156, "state_shape": 282,
                 "episode_limit": 400, "episode_length": 100},
    "3m": {"n_agents": 3, "n_actions": 9, "obs_shape": 30, "state_shape": 48,
           "episode_limit": 60, "episode_length": 25},
}
N_FRAMES = 4  # precomputed observation/state arrays the episode cycles through


class NullEnv(MultiAgentEnv):
    """The shapes of `map_name` (a key of PRESETS); any shape can also be overridden by name."""

    def __init__(self, *, map_name: str = "corridor", seed: int | None = None, win_prob: float = 0.5,
                 **shape_overrides: int):
        if map_name not in PRESETS:
            raise ValueError(f"unknown null env map '{map_name}'; known: {', '.join(sorted(PRESETS))}")
        unknown = set(shape_overrides) - set(PRESETS[map_name])
        if unknown:
            raise ValueError(f"unknown null env argument(s) {', '.join(sorted(unknown))}; "
                             f"known: map_name, seed, win_prob, {', '.join(PRESETS[map_name])}")
        shapes = {**PRESETS[map_name], **shape_overrides}
        if not 1 <= shapes["episode_length"] <= shapes["episode_limit"]:
            raise ValueError(f"episode_length must be within 1..episode_limit ({shapes['episode_limit']}), "
                             f"got {shapes['episode_length']}")
        self.map_name = map_name
        self.n_agents = shapes["n_agents"]
        self.n_actions = shapes["n_actions"]
        self.episode_limit = shapes["episode_limit"]
        self.episode_length = shapes["episode_length"]
        self.win_prob = win_prob
        self._seed = seed
        self._rng = np.random.default_rng(seed)
        self._obs = self._rng.standard_normal(
            (N_FRAMES, self.n_agents, shapes["obs_shape"])).astype(np.float32)  # [frames, agents, obs]
        self._state = self._rng.standard_normal((N_FRAMES, shapes["state_shape"])).astype(np.float32)
        self._avail = np.ones((self.n_agents, self.n_actions), dtype=np.int64)  # [agents, actions]
        self._t = 0
        self.battles_won = 0
        self.battles_game = 0

    def reset(self) -> tuple[np.ndarray, np.ndarray]:
        self._t = 0
        return self.get_obs(), self.get_state()

    def step(self, actions) -> tuple[float, bool, dict]:
        actions = np.asarray(actions)
        if actions.shape != (self.n_agents,):
            raise ValueError(f"step() got {actions.size} actions; expected one per agent ({self.n_agents})")
        bad = (actions < 0) | (actions >= self.n_actions)  # [n_agents]
        if bad.any():
            agent_id = int(np.argmax(bad))
            raise ValueError(f"agent {agent_id} cannot take action {actions[agent_id]} now; "
                             f"available: 0..{self.n_actions - 1}")
        if self._t >= self.episode_length:
            raise RuntimeError("the episode is over; call reset() first")
        self._t += 1
        if self._t < self.episode_length:
            return 0.0, False, {}
        won = bool(self._rng.random() < self.win_prob)
        self.battles_game += 1
        self.battles_won += won
        return float(won), True, {"battle_won": won}

    def get_obs(self) -> np.ndarray:
        """All agents' observations as one array [n_agents, obs_shape]."""
        return self._obs[self._t % N_FRAMES]

    def get_obs_agent(self, agent_id: int) -> np.ndarray:
        return self.get_obs()[agent_id]

    def get_obs_size(self) -> int:
        return self._obs.shape[2]

    def get_state(self) -> np.ndarray:
        return self._state[self._t % N_FRAMES]

    def get_state_size(self) -> int:
        return self._state.shape[1]

    def get_avail_actions(self) -> np.ndarray:
        """Every action of every agent: ones [n_agents, n_actions]."""
        return self._avail

    def get_avail_agent_actions(self, agent_id: int) -> np.ndarray:
        return self._avail[agent_id]

    def get_stats(self) -> dict:
        return {"battles_won": self.battles_won, "battles_game": self.battles_game,
                "win_rate": self.battles_won / max(1, self.battles_game)}

    def seed(self) -> int | None:
        return self._seed

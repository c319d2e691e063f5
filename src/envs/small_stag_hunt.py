"""marlkit's small stag hunt gridworld: a partially observable task that pays off only with coordination.

This is NOT PyMARL2's stag hunt (that one is `stag_hunt`, envs/stag_hunt.py: 8 agents and 8 stags
on 10x10); it is marlkit's own quick task, small enough for learning checks that take a minute.

Rules (one step):
1. Catches resolve first, on the current positions: a stag is caught when at least
   `stag_catchers` agents next to it (4-neighbourhood) take "catch" together; a hare needs one.
   A catch applies to every prey next to the agent. Caught prey leave the grid.
2. Moving agents then move one cell in agent order; a move into an occupied cell is blocked.
3. Each remaining prey then steps to a random free neighbouring cell with prob. `prey_move_prob`.
4. The episode ends when every prey is caught, or is cut at `episode_limit` steps.
Agents see a (2*agent_obs+1)^2 window around themselves plus their own position; the state is
the whole grid. Inspired by PyMARL2's stag_hunt (after Boehmer et al.'s DCG), in a simpler form.
"""
import numpy as np

from .multiagentenv import MultiAgentEnv
from .stag_hunt import grid_picture

NOOP, UP, DOWN, LEFT, RIGHT, CATCH = range(6)
ACTION_NAMES = ("noop", "up", "down", "left", "right", "catch")
# (row, col) offset of each action; rows grow downwards.
MOVES = np.array([[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1], [0, 0]], dtype=np.int64)
NEIGHBOUR_OFFSETS = MOVES[UP:RIGHT + 1]  # [4, 2]
STAG, HARE = 0, 1
# Observation window channels: other agents, stags, hares, cells outside the grid.
N_OBS_CHANNELS = 4


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"small_stag_hunt env_arg '{name}' must be a positive int, got {value!r}")
    return int(value)


class SmallStagHunt(MultiAgentEnv):
    """Stag hunt on a `world_shape` grid; see the module docstring for the rules."""

    def __init__(self, *, map_name: str = "small_stag_hunt", world_shape: tuple[int, int] = (5, 5),
                 n_agents: int = 2, n_stags: int = 1, n_hares: int = 2, agent_obs: int = 1,
                 episode_limit: int = 25, stag_catchers: int = 2, reward_stag: float = 10.0,
                 reward_hare: float = 1.0, reward_time: float = 0.0, prey_move_prob: float = 0.1,
                 seed: int | None = None):
        if not isinstance(world_shape, (list, tuple)) or len(world_shape) != 2:
            raise ValueError(f"small_stag_hunt env_arg 'world_shape' must be [height, width], got {world_shape!r}")
        self.height = _positive_int("world_shape[0]", world_shape[0])
        self.width = _positive_int("world_shape[1]", world_shape[1])
        self.n_agents = _positive_int("n_agents", n_agents)
        self.n_stags = int(n_stags)
        self.n_hares = int(n_hares)
        if self.n_stags < 0 or self.n_hares < 0 or self.n_stags + self.n_hares < 1:
            raise ValueError(f"small_stag_hunt needs at least one prey, got n_stags={n_stags}, n_hares={n_hares}")
        if self.n_agents + self.n_stags + self.n_hares > self.height * self.width:
            raise ValueError(f"{self.n_agents + self.n_stags + self.n_hares} agents and prey do not fit "
                             f"on a {self.height}x{self.width} grid; enlarge world_shape")
        self.stag_catchers = _positive_int("stag_catchers", stag_catchers)
        if self.stag_catchers > self.n_agents:
            raise ValueError(f"stag_catchers={stag_catchers} exceeds n_agents={n_agents}: no stag could be caught")
        if not 0.0 <= prey_move_prob <= 1.0:
            raise ValueError(f"small_stag_hunt env_arg 'prey_move_prob' must lie in [0, 1], got {prey_move_prob!r}")
        self.agent_obs = int(agent_obs)
        if self.agent_obs < 0:
            raise ValueError(f"small_stag_hunt env_arg 'agent_obs' (view radius) must be >= 0, got {agent_obs!r}")
        self.map_name = map_name
        self.n_actions = len(ACTION_NAMES)
        self.episode_limit = _positive_int("episode_limit", episode_limit)
        self.reward_stag = float(reward_stag)
        self.reward_hare = float(reward_hare)
        self.reward_time = float(reward_time)
        self.prey_move_prob = float(prey_move_prob)
        self._seed = seed
        self._rng = np.random.default_rng(seed)

        n_prey = self.n_stags + self.n_hares
        self.prey_kind = np.array([STAG] * self.n_stags + [HARE] * self.n_hares, dtype=np.int64)  # [n_prey]
        self.agent_pos = np.zeros((self.n_agents, 2), dtype=np.int64)  # [n_agents, (row, col)]
        self.prey_pos = np.zeros((n_prey, 2), dtype=np.int64)          # [n_prey, (row, col)]
        self.prey_alive = np.zeros(n_prey, dtype=bool)                 # [n_prey]
        self._t = 0
        self._caught = np.zeros(2, dtype=np.int64)                     # [(stags, hares)] this episode
        self._totals = {"episodes": 0, "stags_caught": 0, "hares_caught": 0}
        self.reset()

    # ---- episode control -------------------------------------------------------------------
    def reset(self) -> tuple[list[np.ndarray], np.ndarray]:
        n_entities = self.n_agents + len(self.prey_kind)
        cells = self._rng.choice(self.height * self.width, size=n_entities, replace=False)
        positions = np.stack(np.divmod(cells, self.width), axis=1)  # [n_entities, (row, col)]
        self.agent_pos = positions[:self.n_agents].copy()
        self.prey_pos = positions[self.n_agents:].copy()
        self.prey_alive[:] = True
        self._t = 0
        self._caught[:] = 0
        return self.get_obs(), self.get_state()

    def step(self, actions) -> tuple[float, bool, dict]:
        if self._t >= self.episode_limit or not self.prey_alive.any():
            raise RuntimeError("the small stag hunt episode is over; call reset() first")
        actions = np.array(self._checked_actions(actions), dtype=np.int64)  # [n_agents]
        reward = self.reward_time + self._resolve_catches(actions == CATCH)
        self._move_agents(actions)
        self._move_prey()
        self._t += 1

        all_caught = not self.prey_alive.any()
        cut_by_limit = self._t >= self.episode_limit and not all_caught
        info = {"stags_caught": int(self._caught[STAG]), "hares_caught": int(self._caught[HARE])}
        if cut_by_limit:
            info["episode_limit"] = True
        if all_caught or cut_by_limit:
            self._record_episode()
        return reward, all_caught or cut_by_limit, info

    def _resolve_catches(self, catching: np.ndarray) -> float:
        """Remove every prey with enough adjacent catching agents; returns the reward earned."""
        reward = 0.0
        for prey in np.flatnonzero(self.prey_alive):
            distance = np.abs(self.agent_pos - self.prey_pos[prey]).sum(axis=1)  # [n_agents]
            n_catchers = int(np.sum(catching & (distance == 1)))
            kind = self.prey_kind[prey]
            if n_catchers >= (self.stag_catchers if kind == STAG else 1):
                self.prey_alive[prey] = False
                self._caught[kind] += 1
                reward += self.reward_stag if kind == STAG else self.reward_hare
        return reward

    def _move_agents(self, actions: np.ndarray) -> None:
        for agent in range(self.n_agents):
            target = self.agent_pos[agent] + MOVES[actions[agent]]
            if actions[agent] not in (NOOP, CATCH) and self._is_free(target):
                self.agent_pos[agent] = target

    def _move_prey(self) -> None:
        for prey in np.flatnonzero(self.prey_alive):
            if self._rng.random() >= self.prey_move_prob:
                continue
            targets = [cell for cell in self.prey_pos[prey] + NEIGHBOUR_OFFSETS if self._is_free(cell)]
            if targets:
                self.prey_pos[prey] = targets[self._rng.integers(len(targets))]

    def _in_grid(self, cell: np.ndarray) -> bool:
        return 0 <= cell[0] < self.height and 0 <= cell[1] < self.width

    def _is_free(self, cell: np.ndarray) -> bool:
        """Inside the grid and not occupied by an agent or a prey that is still alive."""
        if not self._in_grid(cell):
            return False
        occupied = np.concatenate([self.agent_pos, self.prey_pos[self.prey_alive]])  # [n_occupied, 2]
        return not np.any(np.all(occupied == cell, axis=1))

    def _record_episode(self) -> None:
        self._totals["episodes"] += 1
        self._totals["stags_caught"] += int(self._caught[STAG])
        self._totals["hares_caught"] += int(self._caught[HARE])

    # ---- observations and state --------------------------------------------------------------
    def _entity_grid(self) -> np.ndarray:
        """Presence grid [height, width, (agents, stags, hares)] of everything on the board."""
        grid = np.zeros((self.height, self.width, 3), dtype=np.float32)
        grid[self.agent_pos[:, 0], self.agent_pos[:, 1], 0] = 1.0
        for kind in (STAG, HARE):
            alive = self.prey_pos[self.prey_alive & (self.prey_kind == kind)]  # [n_alive_of_kind, 2]
            grid[alive[:, 0], alive[:, 1], 1 + kind] = 1.0
        return grid

    def get_obs_agent(self, agent_id: int) -> np.ndarray:
        """Flattened window [2r+1, 2r+1, (other agents, stags, hares, outside)] + own (row, col) in [0, 1]."""
        r = self.agent_obs
        padded = np.zeros((self.height + 2 * r, self.width + 2 * r, N_OBS_CHANNELS), dtype=np.float32)
        padded[..., 3] = 1.0
        padded[r:r + self.height, r:r + self.width, :3] = self._entity_grid()
        padded[r:r + self.height, r:r + self.width, 3] = 0.0
        row, col = self.agent_pos[agent_id]
        window = padded[row:row + 2 * r + 1, col:col + 2 * r + 1].copy()  # [2r+1, 2r+1, channels]
        window[r, r, 0] = 0.0  # the agent itself is not an "other agent"
        own_position = np.array([row / max(self.height - 1, 1), col / max(self.width - 1, 1)], dtype=np.float32)
        return np.concatenate([window.reshape(-1), own_position])

    def get_obs_size(self) -> int:
        return (2 * self.agent_obs + 1) ** 2 * N_OBS_CHANNELS + 2

    def get_state(self) -> np.ndarray:
        """Flattened grid [height, width, (agent 0 .. agent n-1, stags, hares)]: who is where."""
        state = np.zeros((self.height, self.width, self.n_agents + 2), dtype=np.float32)
        state[self.agent_pos[:, 0], self.agent_pos[:, 1], np.arange(self.n_agents)] = 1.0
        state[..., self.n_agents:] = self._entity_grid()[..., 1:]
        return state.reshape(-1)

    def get_state_size(self) -> int:
        return self.height * self.width * (self.n_agents + 2)

    # ---- actions -----------------------------------------------------------------------------
    def get_avail_agent_actions(self, agent_id: int) -> np.ndarray:
        """noop always; a move when it stays inside the grid; catch when next to a live prey."""
        avail = np.zeros(self.n_actions, dtype=np.int64)
        avail[NOOP] = 1
        position = self.agent_pos[agent_id]
        for action in (UP, DOWN, LEFT, RIGHT):
            avail[action] = int(self._in_grid(position + MOVES[action]))
        distance = np.abs(self.prey_pos[self.prey_alive] - position).sum(axis=1)  # [n_alive_prey]
        avail[CATCH] = int(np.any(distance == 1))
        return avail

    # ---- bookkeeping -------------------------------------------------------------------------
    def get_stats(self) -> dict:
        return dict(self._totals)

    def seed(self) -> int | None:
        return self._seed

    def render(self) -> str:
        """Text picture of the grid: digits are agents, S stags, h hares, '.' empty."""
        marks = [(pos, "S" if self.prey_kind[prey] == STAG else "h")
                 for prey, pos in enumerate(self.prey_pos) if self.prey_alive[prey]]
        marks += [(pos, str(agent % 10)) for agent, pos in enumerate(self.agent_pos)]
        return grid_picture(self.height, self.width, marks)

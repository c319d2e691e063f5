"""PyMARL2's stag hunt: predators on a grid catch stags (and hares) that only pay when hunted together.

The predator-prey task of PyMARL2 (src/envs/stag_hunt/stag_hunt.py), which took it from Boehmer
et al.'s deep coordination graphs (DCG) code. With PyMARL2's stag_hunt.yaml, 8 agents hunt 8 stags
on a bounded 10x10 grid for 200 steps: a stag is caught when 2 agents next to it take "catch" in
the same step (+10; both catchers freeze and leave the grid), a lone "catch" costs nothing, and
each agent sees the 5x5 window around itself.

One step, in PyMARL2's order:
1. The agents that are not frozen act one by one in a random permutation. "right", "down",
   "left" and "up" move one cell unless the target cell holds an entity of `agent_move_block`
   (0 agents, 1 stags, 2 hares); "stay", "catch" and "look-*" aim at the agent's own cell, so
   they count as a collision (reward_collision) whenever agents block agents. With probability
   `mountain_slope` an "up" is not carried out.
2. The living prey then act one by one in a random permutation:
   - with `capture_action`, a prey is caught when at least capture_action_conditions[type]
     agents next to it (4-neighbourhood, never across a toroidal edge) take "catch"; fewer
     catchers cost miscapture_punishment. Without it, a prey is caught when at most
     capture_conditions[type] of its neighbouring cells are free.
   - with `prevent_cannibalism`, only a prey next to an agent can be caught.
   - a caught prey leaves the grid and pays reward_stag or reward_hare (times random_ghosts_mul
     while the prey are ghosts). With `capture_freezes` the agents next to it (with
     `capture_action`, those that took "catch") freeze: they can only "stay" from then on, other
     agents no longer see them, and with `remove_frozen` they leave the grid and observe zeros.
     `capture_terminal` ends the episode at the first capture.
   - a prey that is not caught rests with probability p_stags_rest / p_hare_rest (never while
     an agent stands on its cell), else steps to a random free neighbouring cell; with
     probability `mountain_slope` a stag's step down or a hare's step up is not carried out.
3. The episode ends when every prey is caught or every agent is frozen, and is cut after
   `episode_limit` steps (info["episode_limit"] = truncate_episodes on that step). Every step
   pays reward_time. Rewards are summed in float32, as in PyMARL2.

Grids are [row, col, feature], rows growing downwards. Features: agents, stags, hares; then walls
and unknown cells with observe_one_hot (without it, walls read -1 in the agent feature); then the
ghost indicator with random_ghosts. The state is the whole grid. An observation is the
(2*agent_obs[0]+1) x (2*agent_obs[1]+1) window centred on the agent (cells outside the grid read 0,
or walls with observe_walls); with directed_observations the cone the agent faces (cells outside
it read -1); with observe_state the state plus a feature marking the agent's own cell.

Differences from PyMARL2 (none changes what a configuration PyMARL2 runs correctly does; with the
same seed and actions, states, observations, masks, rewards and ends match PyMARL2's step for step):
- Randomness comes from one np.random.RandomState(seed) per env, not numpy's and Python's global
  generators, with draws of the same kinds in the same order. PyMARL2 draws the orientations with
  np.random.random_integers(0, 3), which NumPy 2 removed (PyMARL2's stag hunt fails on today's
  NumPy); randint(0, 4) here is the same uniform draw of 0..3 from the same stream.
- Only the non-batch mode (batch_size=None, what the runners use); state_as_graph is refused.
- step() checks the actions against the masks and refuses to go on after the episode's end;
  get_stats() counts episodes and caught prey; close() prints nothing; render() returns text.
- Configurations where PyMARL2 breaks: with agent_obs[0] != agent_obs[1] it draws every entity on
  two wrong cells of the observation (or fails with an IndexError); here each is on its own cell.
  In non-square worlds, mountain_spawn puts hares in the bottom row and the ghost indicator goes to
  the grid's corners (PyMARL2 swaps height and width there). With intersection_global_view,
  get_obs_size() is the size of what get_obs() returns. Placements that could never finish (more
  entities than cells or than a spawn row holds) raise instead of looping forever.
"""
import numpy as np

from .multiagentenv import MultiAgentEnv

RIGHT, DOWN, LEFT, UP, STAY, CATCH, LOOK_RIGHT = range(7)  # LOOK_RIGHT + orientation is a look action
ACTION_NAMES = ("right", "down", "left", "up", "stay", "catch", "look-right", "look-down", "look-left", "look-up")
# (row, col) offset of every action: only the four moves leave the agent's cell.
OFFSETS = np.array([[0, 1], [1, 0], [0, -1], [-1, 0]] + [[0, 0]] * 6, dtype=np.int64)  # [10, 2]
N_MOVES = 4
AGENT, STAG, HARE = 0, 1, 2  # grid features, and the entity codes of agent_move_block
ENTITY_NAMES = {AGENT: "agent", STAG: "stag", HARE: "hare"}


def grid_picture(height: int, width: int, marks: list) -> str:
    """Lines of '.' with each (row, col), character of `marks` drawn in order (later ones on top)."""
    rows = [["."] * width for _ in range(height)]
    for (row, col), character in marks:
        rows[row][col] = character
    return "\n".join("".join(line) for line in rows)


def _int_pair(name: str, value, minimum: int) -> tuple[int, int]:
    """[a, b] of ints >= minimum (world_shape, agent_obs and the per-prey-type conditions)."""
    if (not isinstance(value, (list, tuple)) or len(value) != 2
            or any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < minimum for v in value)):
        raise ValueError(f"stag_hunt env_arg '{name}' must be a pair of ints >= {minimum}, got {value!r}")
    return int(value[0]), int(value[1])


def _count(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"stag_hunt env_arg '{name}' must be an int >= {minimum}, got {value!r}")
    return int(value)


def _cone_cells(window: tuple[int, int], agent_obs: tuple[int, int], narrow: bool) -> list[tuple]:
    """Per orientation (right, down, left, up): flat cell indices (cone, window) that pair each
    visible window cell with its place in the cone observation.

    Ring j (0 = farthest) of the cone is row/column j from the side the agent faces; a narrow cone
    drops the diagonals, so the cone observation is the window less one cell on every side.
    """
    shrink = 1 if narrow else 0
    rows, cols = window
    cone = np.arange((rows - 2 * shrink) * (cols - 2 * shrink)).reshape(rows - 2 * shrink, cols - 2 * shrink)
    seen = np.arange(rows * cols).reshape(rows, cols)
    pairs = []
    for orientation in (RIGHT, DOWN, LEFT, UP):
        cone_cells, window_cells = [], []
        for j in range(agent_obs[0] + 1 - shrink):
            if orientation in (UP, DOWN):
                line = j if orientation == UP else -j - 1
                cone_cells.append(cone[line, j:cone.shape[1] - j])
                window_cells.append(seen[line, j + shrink:cols - j - shrink])
            else:
                line = j if orientation == LEFT else -j - 1
                cone_cells.append(cone[j:cone.shape[0] - j, line])
                window_cells.append(seen[j + shrink:rows - j - shrink, line])
        pairs.append((np.concatenate(cone_cells), np.concatenate(window_cells)))
    return pairs


class StagHunt(MultiAgentEnv):
    """PyMARL2's stag hunt / predator-prey gridworld; see the module docstring for the rules.

    The keyword defaults are those of PyMARL2's class (which src/config/envs/stag_hunt.yaml
    overrides in part); the options PyMARL2 requires take the YAML's values.
    """

    def __init__(self, *, map_name: str = "stag_hunt", n_agents: int = 8, n_stags: int = 8, n_hare: int = 0,
                 world_shape: tuple[int, int] = (10, 10), agent_obs: tuple[int, int] = (2, 2),
                 episode_limit: int = 200, truncate_episodes: bool = True, toroidal: bool = False,
                 agent_move_block: tuple[int, ...] = (0,), capture_action: bool = False,
                 capture_action_conditions: tuple[int, int] = (2, 1), capture_conditions: tuple[int, int] = (0, 1),
                 capture_freezes: bool = True, capture_terminal: bool = True, remove_frozen: bool = False,
                 prevent_cannibalism: bool = True, p_stags_rest: float = 0.0, p_hare_rest: float = 0.0,
                 reward_time: float = -0.1, reward_collision: float = 0.0, reward_stag: float = 2.0,
                 reward_hare: float = 1.0, miscapture_punishment: float | None = None,
                 mountain_slope: float = 0.0, mountain_spawn: bool = False, mountain_agent_row: int = -1,
                 observe_state: bool = False, observe_walls: bool = True, observe_ids: bool = False,
                 observe_one_hot: bool = False, directed_observations: bool = False,
                 directed_cone_narrow: bool = True, directed_exta_actions: bool = True,
                 intersection_global_view: bool = False, intersection_unknown: bool = False,
                 random_ghosts: bool = False, random_ghosts_prob: float = 0.5, random_ghosts_mul: float = -1.0,
                 random_ghosts_indicator: bool = False, state_as_graph: bool = False,
                 print_caught_prey: bool = False, print_frozen_agents: bool = False,
                 seed: int | None = None, batch_size: int | None = None):
        if batch_size is not None:
            raise ValueError(f"stag_hunt supports only PyMARL2's non-batch mode (batch_size=None), "
                             f"got batch_size={batch_size!r}; the runners step one env per batch row")
        if state_as_graph:
            raise ValueError("stag_hunt env_arg state_as_graph=True is not supported (PyMARL2 raises on it "
                             "too); use the grid state (state_as_graph: False)")
        self.map_name = map_name
        self.height, self.width = _int_pair("world_shape", world_shape, 1)
        self.agent_obs = _int_pair("agent_obs", agent_obs, 0)
        self.n_agents = _count("n_agents", n_agents, 1)
        self.n_stags = _count("n_stags", n_stags, 0)
        self.n_hare = _count("n_hare", n_hare, 0)
        self.n_prey = self.n_stags + self.n_hare
        self.episode_limit = _count("episode_limit", episode_limit, 1)
        self.truncate_episodes = bool(truncate_episodes)
        self.toroidal = bool(toroidal)
        if not set(agent_move_block) <= {AGENT, STAG, HARE}:
            raise ValueError(f"stag_hunt env_arg 'agent_move_block' lists entities 0 (agents), 1 (stags) and "
                             f"2 (hares), got {agent_move_block!r}")
        self.agent_move_block = np.array(sorted(set(agent_move_block)), dtype=np.int64)
        self.capture_action = bool(capture_action)
        # Indexed by prey type - 1: [stag, hare].
        self.capture_action_conditions = _int_pair("capture_action_conditions", capture_action_conditions, 0)
        self.capture_conditions = _int_pair("capture_conditions", capture_conditions, 0)
        self.capture_freezes = bool(capture_freezes)
        self.capture_terminal = bool(capture_terminal)
        self.remove_frozen = bool(remove_frozen)
        self.prevent_cannibalism = bool(prevent_cannibalism)
        self.p_stags_rest = float(p_stags_rest)
        self.p_hare_rest = float(p_hare_rest)
        self.reward_time = float(reward_time)
        self.reward_collision = float(reward_collision)
        self.reward_stag = float(reward_stag)
        self.reward_hare = float(reward_hare)
        self.miscapture_punishment = float(-self.reward_stag if miscapture_punishment is None
                                           else miscapture_punishment)
        self.mountain_slope = float(mountain_slope)
        self.mountain_spawn = bool(mountain_spawn)
        self.mountain_agent_row = int(mountain_agent_row)
        self.observe_state = bool(observe_state)
        self.observe_walls = bool(observe_walls)
        self.observe_ids = bool(observe_ids)
        self.observe_one_hot = bool(observe_one_hot)
        self.directed_observations = bool(directed_observations)
        self.directed_cone_narrow = bool(directed_cone_narrow)
        self.directed_exta_actions = bool(directed_exta_actions)
        self.intersection_global_view = bool(intersection_global_view)
        self.intersection_unknown = bool(intersection_unknown)
        self.random_ghosts = bool(random_ghosts)
        self.random_ghosts_prob = float(random_ghosts_prob)
        self.random_ghosts_mul = float(random_ghosts_mul)
        self.random_ghosts_indicator = bool(random_ghosts_indicator)
        self.print_caught_prey = bool(print_caught_prey)
        self.print_frozen_agents = bool(print_frozen_agents)
        self._check_fit()

        self.n_actions = (len(ACTION_NAMES) if self.directed_observations and self.directed_exta_actions
                          else CATCH + 1 if self.capture_action else STAY + 1)
        self.n_feats = (5 if self.observe_one_hot else 3) + (1 if self.random_ghosts else 0)
        self._wall_feature, self._wall_value = (3, 1.0) if self.observe_one_hot else (AGENT, -1.0)
        self._unknown_feature, self._unknown_value = (4, 1.0) if self.observe_one_hot else (STAG, -1.0)
        self.state_size = self.height * self.width * self.n_feats
        self._window_shape = (2 * self.agent_obs[0] + 1, 2 * self.agent_obs[1] + 1)
        self._cones = self._directed_cones() if self.directed_observations else None
        self.obs_size = self._observation_size()

        self._shape = np.array([self.height, self.width], dtype=np.int64)
        self._neighbours = self._neighbour_table()  # [height, width, 4 moves, 2]
        self._action_table = self._actions_on_grid()  # [height, width, n_actions]
        self._blank_canvas = self._walled_canvas()  # [height + 2 * obs rows, width + 2 * obs cols, n_feats]
        # An agent that freezes next to a prey: one of the moves leads onto the prey, or, when the
        # action set has a 'catch' (n_actions > 5), it stands on the prey's cell itself.
        self._freeze_distances = (1, 0) if self.n_actions > STAY + 1 else (1,)
        self._seed = seed
        self._rng = np.random.RandomState(seed)

        self.prey_type = np.array([STAG] * self.n_stags + [HARE] * self.n_hare, dtype=np.int64)  # [n_prey]
        # What observations show for an entity: 1, or with observe_ids its number within its kind.
        if self.observe_ids:
            self._agent_markers = np.arange(1, self.n_agents + 1, dtype=np.float32)  # [n_agents]
            self._prey_markers = np.concatenate([np.arange(1, self.n_stags + 1),
                                                 np.arange(1, self.n_hare + 1)]).astype(np.float32)  # [n_prey]
        else:
            self._agent_markers = np.ones(self.n_agents, dtype=np.float32)
            self._prey_markers = np.ones(self.n_prey, dtype=np.float32)
        self.grid = np.zeros((self.height, self.width, self.n_feats), dtype=np.float32)  # the state
        self.agent_pos = np.zeros((self.n_agents, 2), dtype=np.int64)  # [n_agents, (row, col)]
        self.prey_pos = np.zeros((self.n_prey, 2), dtype=np.int64)     # [n_prey, (row, col)]
        self.prey_alive = np.zeros(self.n_prey, dtype=bool)            # [n_prey]
        self.frozen = np.zeros(self.n_agents, dtype=bool)              # [n_agents]
        self.orientation = np.zeros(self.n_agents, dtype=np.int64)     # [n_agents], a move action 0..3
        # As in PyMARL2, whether the prey are ghosts carries over from one episode to the next.
        self.ghost = False
        self.ghost_cell = (0, 0)
        self._ghost_corners = [(0, 0), (0, self.width - 1), (self.height - 1, 0), (self.height - 1, self.width - 1)]
        self.steps = 0
        self._step_reward = np.float32(0.0)
        self._episode_return = 0.0
        self._episode_over = False
        self._totals = {"episodes": 0, "stags_caught": 0, "hares_caught": 0}
        self.reset()

    # ---- construction helpers ----------------------------------------------------------------
    def _check_fit(self) -> None:
        """Refuse worlds where placing the entities could never finish (PyMARL2 loops forever)."""
        if self.n_prey < 1:
            raise ValueError("stag_hunt needs at least one prey (n_stags + n_hare >= 1)")
        if self.n_agents + self.n_prey > self.height * self.width:
            raise ValueError(f"{self.n_agents} agents and {self.n_prey} prey do not fit on a "
                             f"{self.height}x{self.width} grid; enlarge world_shape")
        row_load = {}
        if self.mountain_agent_row >= 0:
            if self.mountain_agent_row >= self.height:
                raise ValueError(f"mountain_agent_row={self.mountain_agent_row} is outside the "
                                 f"{self.height}-row grid")
            row_load[self.mountain_agent_row] = self.n_agents
        if self.mountain_spawn:
            row_load[0] = row_load.get(0, 0) + self.n_stags
            row_load[self.height - 1] = row_load.get(self.height - 1, 0) + self.n_hare
        for row, load in row_load.items():
            if load > self.width:
                raise ValueError(f"{load} entities must start in row {row} (mountain_agent_row/mountain_spawn), "
                                 f"which has only {self.width} cells")
        if self.directed_observations and self.intersection_global_view:
            raise ValueError("directed_observations cannot be combined with intersection_global_view "
                             "(PyMARL2 fails on it too)")
        if self.directed_observations and self.directed_cone_narrow and min(self.agent_obs) < 1:
            raise ValueError(f"a narrow observation cone (directed_cone_narrow) needs agent_obs >= [1, 1], "
                             f"got {list(self.agent_obs)}")

    def _directed_cones(self) -> list[tuple]:
        try:
            return _cone_cells(self._window_shape, self.agent_obs, self.directed_cone_narrow)
        except IndexError:
            raise ValueError(f"directed observations do not fit agent_obs={list(self.agent_obs)}: the cone's "
                             f"depth agent_obs[0] must fit within agent_obs[1]") from None

    def _observation_size(self) -> int:
        if self.observe_state:
            return self.state_size + self.height * self.width  # plus the agent's own-cell feature
        if self.intersection_global_view:
            return self.state_size
        if self.directed_observations and self.directed_cone_narrow:
            return self.n_feats * (self._window_shape[0] - 2) * (self._window_shape[1] - 2)
        return self.n_feats * self._window_shape[0] * self._window_shape[1]

    def _neighbour_table(self) -> np.ndarray:
        """Where each of the 4 moves leads from every cell: wrapped around a toroidal world, held
        at the edge of a bounded one (so a move into the wall "finds" the mover's own cell)."""
        cells = np.stack(np.indices((self.height, self.width)), axis=-1)  # [height, width, 2]
        targets = cells[:, :, None, :] + OFFSETS[:N_MOVES]  # [height, width, 4, 2]
        if self.toroidal:
            return targets % self._shape
        return np.clip(targets, 0, self._shape - 1)

    def _actions_on_grid(self) -> np.ndarray:
        """0/1 per cell and action: 0 for the moves that leave a bounded grid (a torus has none)."""
        cells = np.stack(np.indices((self.height, self.width)), axis=-1)  # [height, width, 2]
        targets = cells[:, :, None, :] + OFFSETS[:self.n_actions]  # [height, width, n_actions, 2]
        if self.toroidal:
            return np.ones(targets.shape[:3], dtype=np.int64)
        return ((targets >= 0) & (targets < self._shape)).all(axis=-1).astype(np.int64)

    def _walled_canvas(self) -> np.ndarray:
        """The empty padded picture observations are cut from: the grid with agent_obs cells
        around it, which are walls when observe_walls."""
        pad_rows, pad_cols = self.agent_obs
        canvas = np.zeros((self.height + 2 * pad_rows, self.width + 2 * pad_cols, self.n_feats), dtype=np.float32)
        if self.observe_walls:
            inside = np.zeros(canvas.shape[:2], dtype=bool)
            inside[pad_rows:pad_rows + self.height, pad_cols:pad_cols + self.width] = True
            canvas[~inside, self._wall_feature] = self._wall_value
        return canvas

    # ---- episode control ---------------------------------------------------------------------
    def reset(self) -> tuple[list[np.ndarray], np.ndarray]:
        self.prey_alive[:] = True
        self.frozen[:] = False
        self.steps = 0
        self._episode_return = 0.0
        self._episode_over = False
        self.grid.fill(0.0)
        self._place(self.agent_pos, AGENT, self.mountain_agent_row if self.mountain_agent_row >= 0 else None)
        self._place(self.prey_pos[:self.n_stags], STAG, 0 if self.mountain_spawn else None)
        self._place(self.prey_pos[self.n_stags:], HARE, self.height - 1 if self.mountain_spawn else None)
        self.orientation = self._rng.randint(0, N_MOVES, size=self.n_agents)
        if self.random_ghosts and self.random_ghosts_indicator:
            self.ghost_cell = self._ghost_corners[self._rng.randint(len(self._ghost_corners))]
        return self.get_obs(), self.get_state()

    def _place(self, positions: np.ndarray, feature: int, row: int | None) -> None:
        """Put each entity on a random empty cell (of `row` when given), one after the other."""
        for entity in range(len(positions)):
            if row is not None and self.grid[row].any(axis=-1).all():
                raise RuntimeError(f"no empty cell left in row {row} for the {ENTITY_NAMES[feature]}s "
                                   f"(mountain_agent_row/mountain_spawn); use a wider world_shape")
            while True:
                r = self._rng.randint(self.height) if row is None else row
                c = self._rng.randint(self.width)
                if not self.grid[r, c].any():
                    break
            self.grid[r, c, feature] = 1.0
            positions[entity] = (r, c)

    def step(self, actions) -> tuple[float, bool, dict]:
        if self._episode_over:
            raise RuntimeError("the stag hunt episode is over; call reset() first")
        actions = np.array(self._checked_actions(actions), dtype=np.int64)  # [n_agents]
        self._step_reward = np.float32(self.reward_time)
        self._move_agents(actions)
        terminated = self._prey_turns(actions == CATCH)
        terminated = terminated or not self.prey_alive.any() or bool(self.frozen.all())
        if self.random_ghosts:
            # PyMARL2's rule: the prey are ghosts in the next step with probability 1 - random_ghosts_prob.
            self.ghost = self._rng.rand() >= self.random_ghosts_prob
        self.steps += 1
        info = {"episode_limit": False}
        if self.steps >= self.episode_limit:
            terminated = True
            info["episode_limit"] = self.truncate_episodes
        reward = float(self._step_reward)
        self._episode_return += reward
        if terminated:
            self._episode_over = True
            self._totals["episodes"] += 1
            if self.print_caught_prey:
                print(f"stag_hunt: episode ended after {self.steps} steps with return {self._episode_return:g}")
        return reward, terminated, info

    def _earn(self, amount: float) -> None:
        """Add to this step's reward in float32, as PyMARL2's float32 reward array does."""
        self._step_reward = np.float32(self._step_reward + np.float32(amount))

    def _move_agents(self, actions: np.ndarray) -> None:
        for agent in self._rng.permutation(self.n_agents):
            if self.frozen[agent]:
                continue
            action = actions[agent]
            slipped = self._rng.rand() < self.mountain_slope and action == UP
            if not slipped and self._move_agent(agent, action):
                self._earn(self.reward_collision)
            if self.directed_observations:
                self._turn(agent, action)

    def _move_agent(self, agent: int, action: int) -> bool:
        """Carry out one agent's action; True when a blocked cell (maybe its own) stopped it."""
        row, col = self.agent_pos[agent]
        target = self._neighbours[row, col, action] if action < N_MOVES else self.agent_pos[agent]
        if self.grid[target[0], target[1], self.agent_move_block].any():
            return True
        self.grid[row, col, AGENT] = 0.0
        self.grid[target[0], target[1], AGENT] = 1.0
        self.agent_pos[agent] = target
        return False

    def _turn(self, agent: int, action: int) -> None:
        """Directed observations: the look actions turn the agent, or without them its moves do."""
        if self.directed_exta_actions:
            if action >= LOOK_RIGHT:
                self.orientation[agent] = action - LOOK_RIGHT
        elif action < N_MOVES:
            self.orientation[agent] = action

    def _prey_turns(self, catching: np.ndarray) -> bool:
        """Each living prey in a random order is caught, rests or moves; True when a capture ends
        the episode (capture_terminal). catching: [n_agents] whether each agent took 'catch'."""
        terminated = False
        # The agents stand still from here on: (agent, row, col) of each that took 'catch'.
        catchers = [(agent, *self.agent_pos[agent].tolist()) for agent in np.flatnonzero(catching)]
        for prey in self._rng.permutation(self.n_prey):
            if not self.prey_alive[prey]:
                continue
            row, col = self.prey_pos[prey]
            cells = self._neighbours[row, col]  # [4, 2]
            around = self.grid[cells[:, 0], cells[:, 1]]  # [4, n_feats]
            free_moves = np.flatnonzero(~around[:, :HARE + 1].any(axis=1))  # [n_free]
            if self._is_caught(prey, catchers, len(free_moves), bool(around[:, AGENT].any())):
                self._capture(prey, catching)
                terminated = terminated or self.capture_terminal
            else:
                self._prey_move(prey, free_moves)
        return terminated

    def _is_caught(self, prey: int, catchers: list[tuple[int, int, int]], n_free: int, next_to_agent: bool) -> bool:
        kind = self.prey_type[prey] - 1  # index of the per-type conditions: 0 stag, 1 hare
        if self.capture_action:
            row, col = self.prey_pos[prey].tolist()
            n_catchers = sum(abs(r - row) + abs(c - col) == 1 and not self.frozen[agent]  # no wrapping
                             for agent, r, c in catchers)
            caught = n_catchers >= self.capture_action_conditions[kind]
            if n_catchers > 0 and not caught:
                self._earn(self.miscapture_punishment)
        else:
            caught = n_free <= self.capture_conditions[kind]
        return caught and (next_to_agent or not self.prevent_cannibalism)

    def _capture(self, prey: int, catching: np.ndarray) -> None:
        kind = self.prey_type[prey]
        row, col = self.prey_pos[prey]
        self.prey_alive[prey] = False
        self.grid[row, col, kind] = 0.0
        self._totals["stags_caught" if kind == STAG else "hares_caught"] += 1
        amount = self.reward_stag if kind == STAG else self.reward_hare
        if self.random_ghosts and self.ghost:
            amount *= self.random_ghosts_mul
        self._earn(amount)
        if self.capture_freezes:
            self._freeze_around(prey, catching)
        if self.print_caught_prey:
            print(f"stag_hunt: {ENTITY_NAMES[kind]} caught at step {self.steps}, row {row}, col {col}; "
                  f"agents frozen: {self.frozen.astype(int).tolist()}; step reward so far {float(self._step_reward):g}")

    def _freeze_around(self, prey: int, catching: np.ndarray) -> None:
        """Freeze the agents next to a just-caught prey (only those that took 'catch', if agents must)."""
        distance = np.abs(self.agent_pos - self.prey_pos[prey]).sum(axis=1)  # [n_agents], no wrapping
        freezing = np.isin(distance, self._freeze_distances) & ~self.frozen
        if self.capture_action:
            freezing &= catching
        for agent in np.flatnonzero(freezing):
            self.frozen[agent] = True
            if self.remove_frozen:
                self.grid[self.agent_pos[agent, 0], self.agent_pos[agent, 1], AGENT] = 0.0
            if self.print_frozen_agents:
                print(f"stag_hunt: agent {agent} frozen at row {self.agent_pos[agent, 0]}, "
                      f"col {self.agent_pos[agent, 1]}; agents frozen: {self.frozen.astype(int).tolist()}")

    def _prey_move(self, prey: int, free_moves: np.ndarray) -> None:
        """A prey that was not caught rests or steps to a random free neighbouring cell. An agent on
        its cell scares it into moving; the draws are those of PyMARL2, skipped where it skips them."""
        kind = self.prey_type[prey]
        row, col = self.prey_pos[prey]
        agent_here = self.grid[row, col, AGENT] != 0
        rest_prob = self.p_stags_rest if kind == STAG else self.p_hare_rest
        rests = (not agent_here and self._rng.rand() < rest_prob) or len(free_moves) == 0
        if rests:
            return
        move = free_moves[self._rng.randint(len(free_moves))]
        leaves_habitat = move == (DOWN if kind == STAG else UP)  # stags live up the mountain, hares down
        if self._rng.rand() < self.mountain_slope and not agent_here and leaves_habitat:
            return
        target = self._neighbours[row, col, move]
        self.grid[row, col, kind] = 0.0
        self.grid[target[0], target[1], kind] = 1.0
        self.prey_pos[prey] = target

    # ---- observations and state --------------------------------------------------------------
    def get_obs(self) -> list[np.ndarray]:
        canvas = self._canvas()
        return [self._observe(agent, canvas) for agent in range(self.n_agents)]

    def get_obs_agent(self, agent_id: int) -> np.ndarray:
        return self._observe(agent_id, self._canvas())

    def get_obs_size(self) -> int:
        return self.obs_size

    def get_state(self) -> np.ndarray:
        """The grid [height, width, n_feats] flattened: frozen agents stay in it unless removed."""
        return self.grid.reshape(-1).copy()

    def get_state_size(self) -> int:
        return self.state_size

    def _observe(self, agent: int, canvas: np.ndarray) -> np.ndarray:
        if self.capture_freezes and self.remove_frozen and self.frozen[agent]:
            return np.zeros(self.obs_size, dtype=np.float32)
        if self.observe_state:
            return self._state_with_position(agent)
        if self.intersection_global_view:
            return self._global_view(agent)
        row, col = self.agent_pos[agent]
        window = canvas[row:row + self._window_shape[0], col:col + self._window_shape[1]]  # [rows, cols, n_feats]
        if self.directed_observations:
            return self._cone(window, self.orientation[agent])
        return window.reshape(-1)  # a copy: the window is not contiguous in the canvas

    def _canvas(self, viewer: int | None = None) -> np.ndarray:
        """Padded picture [height + 2 * obs rows, width + 2 * obs cols, n_feats] of what agents see:
        the agents that are not frozen, the living prey, walls and the ghost indicator. Every agent's
        window is cut from one canvas; `viewer` draws only what that agent can see (global view)."""
        canvas = self._blank_canvas.copy()
        pad_rows, pad_cols = self.agent_obs
        if self.random_ghosts:
            canvas[self.ghost_cell[0] + pad_rows, self.ghost_cell[1] + pad_cols, -1] = -1.0 if self.ghost else 1.0
        drawn = ((self.agent_pos, ~self.frozen, np.full(self.n_agents, AGENT), self._agent_markers),
                 (self.prey_pos, self.prey_alive, self.prey_type, self._prey_markers))
        for positions, present, features, markers in drawn:
            if viewer is not None:
                present = present & self._visible(viewer, positions)
            for entity in np.flatnonzero(present):  # one by one: on a shared cell the last one shows
                row, col = positions[entity]
                canvas[row + pad_rows, col + pad_cols, features[entity]] = markers[entity]
        return canvas

    def _visible(self, agent: int, positions: np.ndarray) -> np.ndarray:
        """[n] whether each position lies within agent_obs of the agent (across the edges of a torus)."""
        distance = np.abs(positions - self.agent_pos[agent])  # [n, 2]
        if self.toroidal:
            distance = np.minimum(distance, self._shape - distance)
        return (distance <= self.agent_obs).all(axis=1)

    def _global_view(self, agent: int) -> np.ndarray:
        """intersection_global_view: a state-sized picture holding only what the agent sees; with
        intersection_unknown, the cells outside its window are marked unknown."""
        canvas = self._canvas(viewer=agent)
        if self.intersection_unknown:
            row, col = self.agent_pos[agent]
            outside = np.ones(canvas.shape[:2], dtype=bool)
            outside[row:row + self._window_shape[0], col:col + self._window_shape[1]] = False
            canvas[outside] = 0.0
            canvas[outside, self._unknown_feature] = self._unknown_value
        pad_rows, pad_cols = self.agent_obs
        return canvas[pad_rows:pad_rows + self.height, pad_cols:pad_cols + self.width].reshape(-1)

    def _cone(self, window: np.ndarray, orientation: int) -> np.ndarray:
        """The cells of the window the agent faces; every other cell reads -1 in all features."""
        cone_cells, window_cells = self._cones[orientation]
        shrink = 2 if self.directed_cone_narrow else 0
        cone = np.full(((self._window_shape[0] - shrink) * (self._window_shape[1] - shrink), self.n_feats),
                       -1.0, dtype=np.float32)
        cone[cone_cells] = window.reshape(-1, self.n_feats)[window_cells]
        return cone.reshape(-1)

    def _state_with_position(self, agent: int) -> np.ndarray:
        """observe_state: the state grid plus a feature that is 1 on the agent's own cell."""
        obs = np.zeros((self.height, self.width, self.n_feats + 1), dtype=np.float32)
        obs[:, :, :-1] = self.grid
        obs[self.agent_pos[agent, 0], self.agent_pos[agent, 1], -1] = 1.0
        return obs.reshape(-1)

    # ---- actions -----------------------------------------------------------------------------
    def get_avail_agent_actions(self, agent_id: int) -> np.ndarray:
        """Frozen agents may only 'stay'. Otherwise every action, less the moves off a bounded grid;
        'catch' (with capture_action) only next to a prey (with directed observations: the one faced)."""
        if self.frozen[agent_id]:
            avail = np.zeros(self.n_actions, dtype=np.int64)
            avail[STAY] = 1
            return avail
        row, col = self.agent_pos[agent_id]
        avail = self._action_table[row, col].copy()
        if self.capture_action:
            directions = [self.orientation[agent_id]] if self.directed_observations else slice(None)
            cells = self._neighbours[row, col, directions]  # [n_directions, 2]
            avail[CATCH] = self.grid[cells[:, 0], cells[:, 1], STAG:HARE + 1].any()
        return avail

    # ---- bookkeeping -------------------------------------------------------------------------
    def get_stats(self) -> dict:
        """Finished episodes and prey caught since the env was built."""
        return dict(self._totals)

    def seed(self) -> int | None:
        return self._seed

    def render(self) -> str:
        """Text picture of the grid: agent digits (f when frozen), S stags, h hares, '.' empty."""
        marks = [(pos, "S" if self.prey_type[prey] == STAG else "h")
                 for prey, pos in enumerate(self.prey_pos) if self.prey_alive[prey]]
        marks += [(pos, "f" if self.frozen[agent] else str(agent % 10))
                  for agent, pos in enumerate(self.agent_pos) if not (self.frozen[agent] and self.remove_frozen)]
        return grid_picture(self.height, self.width, marks)

"""SMAC's StarCraft2Env game logic on top of an exchangeable combat engine.

The logic reproduces SMAC's interface and semantics (observations, state, available actions,
reward, termination, statistics) exactly; the engine only moves units and resolves attacks
(contract in the marlkit spec). Everything is computed for all units at once with numpy: one
pairwise geometry array per step feeds the available actions, the observations and the
visibility matrix; observations and state are then one flat gather each (`_GatherPlan`). Per-step
results are cached until the next step() or reset().

Unit tables are kept in "logic order": agents 0..n_agents-1 (allies sorted by unit type, x, y at
every reset, as SMAC does), then enemies 0..n_enemies-1 in engine order. `_order` maps a logic
slot to its row in the engine's table; orders go back to the engine in its own ally order.
"""
import enum
import logging
import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ...multiagentenv import MultiAgentEnv
from ..game import unit_ids
from ..game.engine import GameRestarted
from ..game.maps import MapParams, get_map_params
from .backend import make_engine, select_backend

N_ACTIONS_NO_ATTACK = 6
N_ACTIONS_MOVE = 4
N_OBS_PATHING = 8
N_OBS_HEIGHT = 9
SHOOT_RANGE = 6
SIGHT_RANGE = 9
# Map types whose Medivacs heal: their attack actions target allies.
HEALING_MAP_TYPES = ("MMM", "terran_gen")

logger = logging.getLogger(__name__)

# Engine order kinds (engine contract).
ORDER_NONE, ORDER_STOP, ORDER_MOVE, ORDER_ATTACK, ORDER_HEAL = 0, 1, 2, 3, 4

# Unit vectors of the move actions north, south, east, west (actions 2..5).
_MOVE_DIRS = np.array([[0.0, 1.0], [0.0, -1.0], [1.0, 0.0], [-1.0, 0.0]])
# Offsets (in units of move_amount) of SMAC's 8 surrounding pathing/height probes, then the centre.
_SURROUNDING = np.array([[0, 2], [0, -2], [2, 0], [-2, 0], [1, 1], [-1, -1], [1, -1], [-1, 1], [0, 0]])


class Direction(enum.IntEnum):
    """Move directions in SMAC's order (actions 2..5)."""

    NORTH = 0
    SOUTH = 1
    EAST = 2
    WEST = 3


@dataclass(frozen=True)
class Point:
    """World position, read as `unit.pos.x` / `unit.pos.y` like a raw SC2 unit."""

    x: float
    y: float


@dataclass(frozen=True)
class UnitView:
    """A snapshot of one unit with the raw-unit fields SMAC code reads (`tag` = engine row)."""

    tag: int
    unit_type: int
    pos: Point
    health: float
    health_max: float
    shield: float
    shield_max: float
    energy: float
    weapon_cooldown: float


class _GatherPlan:
    """A flat gather: out[r, c] = values[value_idx[r, c]] if mask[mask_idx[r, c]] else 0.

    Observations and the state are assembled from a few per-step vectors (availability, pairwise
    geometry, unit fractions, ...) laid end to end in the order of the `values`/`masks` segment
    sizes. The plan, built once per env, names the entry feeding each output slot and the
    visible/alive flag gating it, so a step costs a handful of numpy calls for any army size.
    """

    def __init__(self, values: dict[str, int], masks: dict[str, int]):
        self._value_offset = _segment_offsets(values)
        self._mask_offset = _segment_offsets(masks)
        self._blocks: list[tuple[np.ndarray, np.ndarray]] = []
        self.value_idx = self.mask_idx = np.zeros((0, 0), dtype=np.int64)

    def value(self, segment: str) -> int:
        return self._value_offset[segment]

    def mask(self, segment: str) -> int:
        return self._mask_offset[segment]

    def add(self, value_idx: np.ndarray, mask_idx: np.ndarray) -> None:
        """Append output columns: both index arrays broadcast to [rows, ...] and flatten per row."""
        value_idx, mask_idx = np.broadcast_arrays(value_idx, mask_idx)
        rows = value_idx.shape[0]
        self._blocks.append((value_idx.reshape(rows, -1), mask_idx.reshape(rows, -1)))

    def freeze(self) -> "_GatherPlan":
        self.value_idx = np.concatenate([v for v, _ in self._blocks], axis=1)
        self.mask_idx = np.concatenate([m for _, m in self._blocks], axis=1)
        return self

    def apply(self, values: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return np.where(mask.take(self.mask_idx), values.take(self.value_idx), 0.0)


def _segment_offsets(sizes: dict[str, int]) -> dict[str, int]:
    """Start of each named segment when the segments are laid end to end in dict order."""
    starts = np.cumsum([0] + list(sizes.values()))[:-1]
    return dict(zip(sizes, starts.tolist()))


class StarCraft2Env(MultiAgentEnv):
    """SMAC's decentralised micromanagement environment (same arguments, methods, semantics).

    Beyond SMAC's arguments: `backend` picks the engine (auto | sc2 | builtin, see
    envs/starcraft/interface/backend.py), `record_replay` keeps the built-in simulator's last episodes for
    save_replay(), and `engine` injects any object of the engine contract (tests, new engines).
    """

    def __init__(
        self,
        map_name: str = "8m",
        step_mul: int = 8,
        move_amount: float = 2,
        difficulty: str = "7",
        game_version: str | None = None,
        seed: int | None = None,
        continuing_episode: bool = False,
        obs_all_health: bool = True,
        obs_own_health: bool = True,
        obs_last_action: bool = False,
        obs_pathing_grid: bool = False,
        obs_terrain_height: bool = False,
        obs_instead_of_state: bool = False,
        obs_timestep_number: bool = False,
        state_last_action: bool = True,
        state_timestep_number: bool = False,
        reward_sparse: bool = False,
        reward_only_positive: bool = True,
        reward_death_value: float = 10,
        reward_win: float = 200,
        reward_defeat: float = 0,
        reward_negative_scale: float = 0.5,
        reward_scale: bool = True,
        reward_scale_rate: float = 20,
        replay_dir: str = "",
        replay_prefix: str = "",
        window_size_x: int = 1920,
        window_size_y: int = 1200,
        heuristic_ai: bool = False,
        heuristic_rest: bool = False,
        debug: bool = False,
        backend: str = "auto",
        record_replay: bool = False,
        engine: Any = None,
    ):
        self.map_name = map_name
        map_params, self._engine_map = self._scenario(map_name)
        self.n_agents = map_params.n_agents
        self.n_enemies = map_params.n_enemies
        self.episode_limit = map_params.limit
        self._move_amount = move_amount
        self._step_mul = step_mul
        self.difficulty = difficulty

        self.obs_own_health = obs_own_health or obs_all_health
        self.obs_all_health = obs_all_health
        self.obs_instead_of_state = obs_instead_of_state
        self.obs_last_action = obs_last_action
        self.obs_pathing_grid = obs_pathing_grid
        self.obs_terrain_height = obs_terrain_height
        self.obs_timestep_number = obs_timestep_number
        self.state_last_action = state_last_action
        self.state_timestep_number = state_timestep_number
        self.n_obs_pathing = N_OBS_PATHING
        self.n_obs_height = N_OBS_HEIGHT

        self.reward_sparse = reward_sparse
        self.reward_only_positive = reward_only_positive
        self.reward_negative_scale = reward_negative_scale
        self.reward_death_value = reward_death_value
        self.reward_win = reward_win
        self.reward_defeat = reward_defeat
        self.reward_scale = reward_scale
        self.reward_scale_rate = reward_scale_rate

        self.game_version = game_version
        self.continuing_episode = continuing_episode
        self._seed = seed
        self.heuristic_ai = heuristic_ai
        self.heuristic_rest = heuristic_rest
        self.debug = debug
        self.window_size = (window_size_x, window_size_y)
        self.replay_dir = replay_dir
        self.replay_prefix = replay_prefix

        self.n_actions_move = N_ACTIONS_MOVE
        self.n_actions_no_attack, self.n_actions = self._action_layout()

        self._agent_race = map_params.a_race
        self._bot_race = map_params.b_race
        self.shield_bits_ally = 1 if self._agent_race == "P" else 0
        self.shield_bits_enemy = 1 if self._bot_race == "P" else 0
        self.unit_type_bits = map_params.unit_type_bits
        self.map_type = map_params.map_type
        self._unit_types: list[int] | None = None
        self.max_reward = self.n_enemies * self.reward_death_value + self.reward_win
        self.ally_state_attr_names, self.enemy_state_attr_names = self._state_attr_names()

        # "auto" resolves now, so the choice is known (and logged) before the first reset.
        self.backend = backend if engine is not None else select_backend(backend, self._engine_map)
        self._record_replay = record_replay
        self._engine = engine
        self._engine_given = engine is not None
        self._launched = False
        self._episode_over: bool | None = None  # None before the first reset(), then whether its episode has ended
        self._episode_count = 0
        self._episode_steps = 0
        self._total_steps = 0
        self.battles_won = 0
        self.battles_game = 0
        self.timeouts = 0
        self._reset_death_trackers()
        self.win_counted = False
        self.defeat_counted = False
        self.last_action = np.zeros((self.n_agents, self.n_actions))
        self.heuristic_targets: list[int | None] = [None] * self.n_agents
        self.reward = 0.0
        self._min_unit_type = 0
        self._ally_types_known = False  # set at the first reset, as SMAC does in its first episode
        self.marine_id = self.marauder_id = self.medivac_id = 0
        self.hydralisk_id = self.zergling_id = self.baneling_id = 0
        self.stalker_id = self.colossus_id = self.zealot_id = 0
        self.max_distance_x = self.max_distance_y = 0
        self.map_x = self.map_y = 0
        self.pathing_grid: np.ndarray | None = None
        self.terrain_height: np.ndarray | None = None
        self._cache: dict[str, Any] = {}
        self._build_index_tables()

    # ---- construction helpers ----------------------------------------------------------------
    def _scenario(self, map_name: str) -> tuple[MapParams, str]:
        """The map's parameters (army sizes, limit, races, type bits) and the map the engine loads."""
        return get_map_params(map_name), map_name

    def _action_layout(self) -> tuple[int, int]:
        """(actions before the first attack action, all actions): no-op, stop, 4 moves, then one per enemy."""
        return N_ACTIONS_NO_ATTACK, N_ACTIONS_NO_ATTACK + self.n_enemies

    def _state_attr_names(self) -> tuple[list[str], list[str]]:
        """Feature names of a state row (upstream SMAC's env_info agent/enemy_features)."""
        ally = ["health", "energy/cooldown", "rel_x", "rel_y"]
        enemy = ["health", "rel_x", "rel_y"]
        if self.shield_bits_ally:
            ally.append("shield")
        if self.shield_bits_enemy:
            enemy.append("shield")
        type_names = [f"type_{bit}" for bit in range(self.unit_type_bits)]
        return ally + type_names, enemy + type_names

    def _build_index_tables(self) -> None:
        """Index arrays and gather plans that depend only on the map and the flags."""
        self._build_action_tables()
        # Columns of the unit table [health, shield, type one-hot] used by each observed feature group.
        type_cols = list(range(2, 2 + self.unit_type_bits))
        health_en = [0] + [1] * self.shield_bits_enemy if self.obs_all_health else []
        health_al = [0] + [1] * self.shield_bits_ally if self.obs_all_health else []
        health_own = [0] + [1] * self.shield_bits_ally if self.obs_own_health else []
        self._en_cols = np.array(health_en + type_cols, dtype=np.int64)
        self._al_cols = np.array(health_al + type_cols, dtype=np.int64)
        self._own_cols = np.array(health_own + type_cols, dtype=np.int64)
        self._obs_gather = self._obs_plan()
        self._state_gather = self._state_plan()

    def _build_action_tables(self) -> None:
        """Per action: the engine order kind and move offset; the agents' index tables."""
        n_ag = self.n_agents
        # [n_agents, n_agents-1]: row i lists the other agents in increasing id.
        self._other_j = np.array([[j for j in range(n_ag) if j != i] for i in range(n_ag)], dtype=np.int64)
        self._n_surround = N_OBS_PATHING * self.obs_pathing_grid + N_OBS_HEIGHT * self.obs_terrain_height
        self._move_probe = (self._move_amount / 2) * _MOVE_DIRS.T[:, None, :]  # [2, 1, 4] cell probes
        self._eye = np.eye(self.n_actions)
        # Per action: engine order kind (actions between the moves and the attacks, SMACv2's field-of-view
        # turns, give the engine no order) and move target offset (non-move actions: 0).
        kinds = [ORDER_STOP] + [ORDER_MOVE] * N_ACTIONS_MOVE
        self._action_kind = np.full(self.n_actions, ORDER_NONE, dtype=np.int8)
        self._action_kind[1:2 + N_ACTIONS_MOVE] = kinds
        self._action_kind[self.n_actions_no_attack:] = ORDER_ATTACK
        self._action_step = np.zeros((self.n_actions, 2))  # [n_actions, 2] move target offset
        self._action_step[2:6] = _MOVE_DIRS * self._move_amount
        self._agent_range = np.arange(n_ag)

    # ---- episode control ---------------------------------------------------------------------
    def _launch(self) -> None:
        """Create the engine (if none was given) and read the map geometry from it."""
        if self._engine is None:
            self._engine = make_engine(self.backend, self._engine_map, self._seed, self._step_mul,
                                       record_replay=self._record_replay, difficulty=self.difficulty,
                                       game_version=self.game_version, window_size=self.window_size)
        engine = self._engine
        self.map_x, self.map_y = int(engine.map_x), int(engine.map_y)
        self.max_distance_x, self.max_distance_y = engine.max_distance_x, engine.max_distance_y
        self.pathing_grid = np.asarray(engine.pathing_grid, dtype=bool)
        self.terrain_height = np.asarray(engine.terrain_height, dtype=np.float64)
        self._map_centre = np.array([[self.map_x / 2], [self.map_y / 2]])  # [2, 1]
        self._max_distance = np.array([[self.max_distance_x], [self.max_distance_y]])
        self._launched = True

    def reset(self) -> tuple[list[np.ndarray], np.ndarray]:
        """Start a new episode; returns (observations, state) like SMAC."""
        self._episode_steps = 0
        if not self._launched:
            self._launch()
        return self._start_episode(self._engine.reset())

    def _start_episode(self, units: Any) -> tuple[list[np.ndarray], np.ndarray]:
        """Adopt the engine's fresh armies and clear the episode's trackers; (observations, state)."""
        self._episode_over = False
        self._reset_death_trackers()
        self.win_counted = False
        self.defeat_counted = False
        self.last_action = np.zeros((self.n_agents, self.n_actions))
        self.heuristic_targets = [None] * self.n_agents
        self.init_units(units)
        return self.get_obs(), self.get_state()

    def _reset_death_trackers(self) -> None:
        """Units already counted dead this episode; SMAC's two trackers are views of one array."""
        self._death_tracker = np.zeros(self.n_agents + self.n_enemies, dtype=bool)
        self.death_tracker_ally = self._death_tracker[: self.n_agents]
        self.death_tracker_enemy = self._death_tracker[self.n_agents :]

    def step(self, actions: Sequence[int]) -> tuple[float, bool, dict]:
        """Apply one action per agent, advance the engine; returns (reward, terminated, info)."""
        acts = self._action_array(actions)
        self.last_action = self._eye[acts]  # [n_agents, n_actions]
        if self.heuristic_ai:
            acts = self._heuristic_actions()
            for a_id, action in enumerate(acts.tolist()):
                actions[a_id] = action
        else:
            self._check_available(acts)
        try:
            units = self._engine.step(*self._engine_orders(acts))
        except GameRestarted:
            self._episode_over = True
            return 0, True, {}  # SMAC ends the lost episode this way after a full restart

        self._total_steps += 1
        self._episode_steps += 1
        game_end_code = self.update_units(units)
        reward = self.reward_battle()
        terminated = False
        info = {
            "battle_won": False,
            "dead_allies": self.n_agents - self._n_alive[0],
            "dead_enemies": self.n_enemies - self._n_alive[1],
        }
        if game_end_code is not None:
            terminated = True
            self.battles_game += 1
            if game_end_code == 1 and not self.win_counted:
                self.battles_won += 1
                self.win_counted = True
                info["battle_won"] = True
                reward = 1 if self.reward_sparse else reward + self.reward_win
            elif game_end_code == -1 and not self.defeat_counted:
                self.defeat_counted = True
                reward = -1 if self.reward_sparse else reward + self.reward_defeat
        elif self._episode_steps >= self.episode_limit:
            terminated = True
            if self.continuing_episode:
                info["episode_limit"] = True
            self.battles_game += 1
            self.timeouts += 1
        if terminated:
            self._episode_count += 1
            self._episode_over = True
        if self.reward_scale:
            reward /= self.max_reward / self.reward_scale_rate
        if self.debug:
            logger.debug("step %d: actions %s reward %s info %s",
                         self._episode_steps, acts.tolist(), reward, info)
        self.reward = reward
        return reward, terminated, info

    def _action_array(self, actions: Sequence[int]) -> np.ndarray:
        """The actions of a step of the running episode (list, numpy or torch, one whole number per agent) as
        int64 [n_agents]; RuntimeError outside an episode, ValueError for actions of another shape or kind,
        or out of range."""
        self._require_episode("step()", running=True)
        values = np.asarray(actions.tolist() if hasattr(actions, "tolist") else actions)
        if values.ndim != 1:
            raise ValueError(f"step() takes a flat sequence of one action per agent ({self.n_agents} on "
                             f"{self.map_name}); got an array of shape {values.shape}")
        if len(values) != self.n_agents:
            raise ValueError(
                f"step() got {len(values)} actions; {self.map_name} needs one per agent ({self.n_agents})")
        if values.dtype.kind not in "iuf" or (values.dtype.kind == "f" and not np.array_equal(values, values.round())):
            raise ValueError(f"step() takes whole-number actions; got {values.tolist()}")
        if values.min() < 0 or values.max() >= self.n_actions:
            raise ValueError(f"actions {values.tolist()} out of range; valid actions are 0..{self.n_actions - 1}")
        return values.astype(np.int64)

    def _require_episode(self, call: str, running: bool = False) -> None:
        """RuntimeError naming `call` before the first reset(), or with `running` once the episode has ended."""
        if self._episode_over is None:
            raise RuntimeError(f"{call} before reset(): call reset() to start an episode first")
        if running and self._episode_over:
            raise RuntimeError(f"{call} after the episode ended (after {self._episode_steps} steps): call reset() "
                               f"to start the next one")

    def _check_available(self, acts: np.ndarray) -> None:
        """SMAC asserts every chosen action is available in the state before the step."""
        avail = self._avail_matrix()
        ok = avail[self._agent_range, acts]
        if np.count_nonzero(ok) < self.n_agents:
            a_id = int(np.argmin(ok))
            raise AssertionError(
                f"Agent {a_id} cannot perform action {int(acts[a_id])}; available: "
                f"{np.flatnonzero(avail[a_id]).tolist()}"
            )

    def _engine_orders(self, acts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Translate agent actions [n_agents] into the engine's (kind, tx, ty, target), in its ally order."""
        inv = self._inv_perm
        acts_engine = acts[inv]  # [n_allies] action of the agent in each engine row
        rows = self._agent_range
        kind = self._order_kind[rows, acts_engine] * self._alive[inv]  # dead units get no order
        target_xy = self._xy[:, inv] + self._action_step[acts_engine].T  # [2, n_allies]
        return kind, target_xy[0], target_xy[1], self._order_target[rows, acts_engine]

    def _build_order_tables(self) -> None:
        """Per engine ally row and action: order kind and target row (attack: enemy, heal: ally)."""
        n_ag, n_en, first = self.n_agents, self.n_enemies, self.n_actions_no_attack
        self._inv_perm = np.empty(n_ag, dtype=np.int64)
        self._inv_perm[self._perm] = np.arange(n_ag)
        kind = np.tile(self._action_kind, (n_ag, 1))  # [n_allies, n_actions]
        target = np.full((n_ag, self.n_actions), -1, dtype=np.int64)
        target[:, first:first + n_en] = n_ag + np.arange(n_en)
        healers = self._is_heal_unit[self._inv_perm]
        if healers.any():  # Medivacs: their target slots are allies (n_actions leaves room for them)
            kind[healers, first:] = ORDER_HEAL
            target[healers, first:] = -1
            # Ally slot j -> the engine row of agent j.
            target[healers, first:first + n_ag] = self._perm
        self._order_kind, self._order_target = kind, target

    # ---- unit bookkeeping --------------------------------------------------------------------
    def init_units(self, units: Any) -> None:
        """Adopt the engine's fresh armies: sort the agents, build the per-episode unit tables."""
        n_al, n_en = int(units.n_allies), int(units.n_enemies)
        if (n_al, n_en) != (self.n_agents, self.n_enemies):
            raise RuntimeError(
                f"engine spawned {n_al} allies and {n_en} enemies; map {self.map_name} needs "
                f"{self.n_agents} and {self.n_enemies}"
            )
        types = np.asarray(units.unit_type, dtype=np.int64)
        self._perm = np.lexsort((units.y[:n_al], units.x[:n_al], types[:n_al]))
        self._order = np.concatenate([self._perm, n_al + np.arange(n_en)])
        self._types = types[self._order]
        self._unit_types = self._types.tolist()
        if not self._ally_types_known:
            self._ally_types_known = True
            self.max_reward += float(np.sum(units.health_max[n_al:] + units.shield_max[n_al:]))
            self._init_ally_unit_types(int(self._types[:n_al].min()))
        self._build_unit_tables(units)
        self._read_units(units)
        self._prev_health_shield = self._health + self._shield

    def _init_ally_unit_types(self, min_unit_type: int) -> None:
        """Allied RL unit ids are consecutive per map type; SMAC derives them from the smallest."""
        self._min_unit_type = min_unit_type
        offsets = {
            "marines": {"marine_id": 0},
            "stalkers_and_zealots": {"stalker_id": 0, "zealot_id": 1},
            "colossi_stalkers_zealots": {"colossus_id": 0, "stalker_id": 1, "zealot_id": 2},
            "MMM": {"marauder_id": 0, "marine_id": 1, "medivac_id": 2},
            "zealots": {"zealot_id": 0},
            "hydralisks": {"hydralisk_id": 0},
            "stalkers": {"stalker_id": 0},
            "colossus": {"colossus_id": 0},
            "bane": {"baneling_id": 0, "zergling_id": 1},
        }
        for name, offset in offsets.get(self.map_type, {}).items():
            setattr(self, name, min_unit_type + offset)

    def _build_unit_tables(self, units: Any) -> None:
        """Per-episode constants in logic order: maxima, type one-hots, Medivac masks."""
        order, n_ag = self._order, self.n_agents
        self._health_max = np.asarray(units.health_max, dtype=np.float64)[order]
        self._shield_max_raw = np.asarray(units.shield_max, dtype=np.float64)[order]
        types = self._types.tolist()
        self._max_shield = np.ones(n_ag + self.n_enemies)
        if self.shield_bits_ally:
            self._max_shield[:n_ag] = [self._max_shield_of_type(t) for t in types[:n_ag]]
        if self.shield_bits_enemy:
            self._max_shield[n_ag:] = [self._max_shield_of_type(t) for t in types[n_ag:]]
        self._type_onehot = np.zeros((n_ag + self.n_enemies, self.unit_type_bits))
        if self.unit_type_bits:
            type_idx = [self._type_index(t, ally=i < n_ag) for i, t in enumerate(types)]
            self._type_onehot[np.arange(len(types)), type_idx] = 1.0
        self._max_cd = np.array([self._max_cooldown_of_type(t) for t in types[:n_ag]], dtype=np.float64)
        self._is_heal_unit = (self._types[:n_ag] == self.medivac_id) & (self.map_type in HEALING_MAP_TYPES)
        self._healable = self._types[:n_ag] != self.medivac_id
        self._medivac_agents = np.flatnonzero(self._is_heal_unit)
        self._build_order_tables()

    def _read_units(self, units: Any) -> None:
        """Copy the per-step unit fields into logic order and drop every per-step cache."""
        order, n_ag = self._order, self.n_agents
        self._xy = np.array((units.x, units.y), dtype=np.float64)[:, order]  # [2, n_units]
        self._x, self._y = self._xy
        self._alive = np.asarray(units.alive, dtype=bool)[order]
        # The contract zeroes health and shield of dead units, as the reward expects.
        self._health = np.asarray(units.health, dtype=np.float64)[order]
        self._shield = np.asarray(units.shield, dtype=np.float64)[order]
        self._n_alive = (np.count_nonzero(self._alive[:n_ag]), np.count_nonzero(self._alive[n_ag:]))
        self._cooldown = np.asarray(units.weapon_cooldown, dtype=np.float64)[order[:n_ag]]
        self._energy = np.asarray(units.energy, dtype=np.float64)[order[:n_ag]]
        self._cache = {}

    def update_units(self, units: Any) -> int | None:
        """Read the units after a step; returns SMAC's game-end code (1 won, -1 lost, 0 draw, None)."""
        self._prev_health_shield = self._health + self._shield
        previous_xy = self._xy
        self._read_units(units)
        # SMAC keeps the last position at which it saw a unit alive (a dead unit is not observed).
        self._xy = np.where(self._alive, self._xy, previous_xy)
        self._x, self._y = self._xy
        n_ally_alive, n_enemy_alive = self._n_alive
        if (n_ally_alive == 0 and n_enemy_alive > 0) or self.only_medivac_left(ally=True):
            return -1
        if (n_ally_alive > 0 and n_enemy_alive == 0) or self.only_medivac_left(ally=False):
            return 1
        if n_ally_alive == 0 and n_enemy_alive == 0:
            return 0
        return None

    def only_medivac_left(self, ally: bool) -> bool:
        """MMM maps end when a side has nothing but Medivacs (enemy side: exactly one Medivac)."""
        if self.map_type != "MMM":
            return False
        n_ag = self.n_agents
        if ally:
            return not np.any(self._alive[:n_ag] & (self._types[:n_ag] != self.medivac_id))
        # SMAC compares enemy types with the *allied* Medivac id here, so no enemy is excluded.
        remaining = self._types[n_ag:][self._alive[n_ag:] & (self._types[n_ag:] != self.medivac_id)]
        return remaining.shape[0] == 1 and int(remaining[0]) == unit_ids.MEDIVAC

    def reward_battle(self) -> float:
        """Dense reward of the last step (0 if sparse): damage and kills dealt, minus own losses
        unless reward_only_positive."""
        if self.reward_sparse:
            return 0
        n_ag = self.n_agents
        tracked = ~self._death_tracker  # [n_units] not dead before this step
        # A unit that died now has health = shield = 0, so its loss is its whole previous value.
        loss = (self._prev_health_shield - self._health - self._shield) * tracked
        died = tracked & ~self._alive
        neg_scale = self.reward_negative_scale
        delta_enemy = float(np.add.reduce(loss[n_ag:]))
        delta_ally = neg_scale * float(np.add.reduce(loss[:n_ag]))
        delta_deaths = self.reward_death_value * np.count_nonzero(died[n_ag:])
        if not self.reward_only_positive:
            delta_deaths -= self.reward_death_value * neg_scale * np.count_nonzero(died[:n_ag])
        self._death_tracker |= died
        if self.reward_only_positive:
            return self._only_positive(delta_enemy + delta_deaths)
        return delta_enemy + delta_deaths - delta_ally

    @staticmethod
    def _only_positive(reward: float) -> float:
        """SMAC's reward_only_positive: the absolute value (enemies that regenerate or heal more than they
        lose in a step pay out too)."""
        return abs(reward)

    # ---- unit-type helpers (SMAC's) -------------------------------------------------------------
    def _max_shield_of_type(self, unit_type: int) -> float:
        if unit_type in (unit_ids.STALKER, self.stalker_id):
            return 80.0
        if unit_type in (unit_ids.ZEALOT, self.zealot_id):
            return 50.0
        if unit_type in (unit_ids.COLOSSUS, self.colossus_id):
            return 150.0
        raise ValueError(
            f"unit type {unit_type} has no SMAC max shield; only Stalker, Zealot and Colossus have one")

    def _max_cooldown_of_type(self, unit_type: int) -> float:
        # Built in SMAC's order: ids that were never set are all 0 and the last entry wins.
        switcher = {
            self.marine_id: 15, self.marauder_id: 25, self.medivac_id: 200, self.stalker_id: 35,
            self.zealot_id: 22, self.colossus_id: 24, self.hydralisk_id: 10, self.zergling_id: 11,
            self.baneling_id: 1,
        }
        return float(switcher.get(unit_type, 15))

    def _type_index(self, unit_type: int, ally: bool) -> int:
        """Index of the unit-type one-hot; enemies use stock ids (Zealot/Stalker reversed vs allies)."""
        if ally:
            return unit_type - self._min_unit_type
        if self.map_type == "stalkers_and_zealots":
            return unit_type - unit_ids.ZEALOT
        first = {
            "colossi_stalkers_zealots": (unit_ids.COLOSSUS, unit_ids.STALKER),
            "bane": (unit_ids.BANELING,),
            "MMM": (unit_ids.MARAUDER, unit_ids.MARINE),
        }[self.map_type]
        return first.index(unit_type) if unit_type in first else len(first)

    def unit_max_shield(self, unit: UnitView) -> float:
        return self._max_shield_of_type(unit.unit_type)

    def unit_max_cooldown(self, unit: UnitView) -> float:
        return self._max_cooldown_of_type(unit.unit_type)

    def get_unit_type_id(self, unit: UnitView, ally: bool) -> int:
        return self._type_index(unit.unit_type, ally)

    def unit_shoot_range(self, agent_id: int) -> int:
        return SHOOT_RANGE

    def unit_sight_range(self, agent_id: int) -> int:
        return SIGHT_RANGE

    @staticmethod
    def distance(x1: float, y1: float, x2: float, y2: float) -> float:
        return math.hypot(x2 - x1, y2 - y1)

    def check_bounds(self, x: int, y: int) -> bool:
        return 0 <= x < self.map_x and 0 <= y < self.map_y

    # ---- raw-unit views (SMAC's agents / enemies dicts, built on access) -----------------------
    def _unit_view(self, slot: int) -> UnitView:
        agent = slot < self.n_agents
        return UnitView(
            tag=int(self._order[slot]), unit_type=int(self._types[slot]),
            pos=Point(float(self._x[slot]), float(self._y[slot])),
            health=float(self._health[slot]), health_max=float(self._health_max[slot]),
            shield=float(self._shield[slot]), shield_max=float(self._shield_max_raw[slot]),
            energy=float(self._energy[slot]) if agent else 0.0,
            weapon_cooldown=float(self._cooldown[slot]) if agent else 0.0,
        )

    @property
    def agents(self) -> dict[int, UnitView]:
        """SMAC's agent id -> raw unit dict (snapshots of this step, built on first access)."""
        if "agents" not in self._cache:
            self._cache["agents"] = {a_id: self._unit_view(a_id) for a_id in range(self.n_agents)}
        return self._cache["agents"]

    @property
    def enemies(self) -> dict[int, UnitView]:
        """SMAC's enemy id -> raw unit dict (snapshots of this step, built on first access)."""
        if "enemies" not in self._cache:
            n_ag = self.n_agents
            self._cache["enemies"] = {e_id: self._unit_view(n_ag + e_id) for e_id in range(self.n_enemies)}
        return self._cache["enemies"]

    def get_unit_by_id(self, a_id: int) -> UnitView:
        return self._unit_view(a_id)

    def get_unit_types(self) -> list[int] | None:
        """Raw type ids: agents in agent order, then enemies (None before the first reset)."""
        return self._unit_types

    # ---- per-step geometry and available actions -----------------------------------------------
    def _geometry(self) -> np.ndarray:
        """[3, n_agents, n_units]: distance, dx, dy from agent i to unit j (dx = x_j - x_i)."""
        geo = self._cache.get("geo")
        if geo is None:
            n_ag = self.n_agents
            geo = np.empty((3, n_ag, self.n_agents + self.n_enemies))
            np.subtract(self._xy[:, None, :], self._xy[:, :n_ag, None], out=geo[1:])
            np.hypot(geo[1], geo[2], out=geo[0])
            self._cache["geo"] = geo
        return geo

    def _grid_lookup(self, grid: np.ndarray, cx: np.ndarray, cy: np.ndarray, outside: float) -> np.ndarray:
        """grid[cx, cy] where inside the map, `outside` elsewhere (int64 cx, cy of any shape)."""
        # Viewed as unsigned, negative cells become huge, so one comparison per axis checks both bounds.
        inside = (cx.view(np.uint64) < self.map_x) & (cy.view(np.uint64) < self.map_y)
        return np.where(inside, grid[cx * inside, cy * inside], outside)

    def _can_move_all(self) -> np.ndarray:
        """[n_agents, 4] bool: SMAC's can_move for N, S, E, W (one grid cell move_amount/2 away)."""
        probes = self._xy[:, :self.n_agents, None] + self._move_probe  # [2, n_agents, 4]
        cells = probes.astype(np.int64)  # truncation towards zero, like int()
        return self._grid_lookup(self.pathing_grid, cells[0], cells[1], outside=False)

    def _avail_matrix(self) -> np.ndarray:
        """[n_agents, n_actions] int8 availability (SMAC's get_avail_agent_actions for everyone)."""
        avail = self._cache.get("avail")
        if avail is not None:
            return avail
        n_ag = self.n_agents
        alive_a = self._alive[:n_ag]
        # [n_agents, n_units]: both alive and within shooting range (inclusive).
        in_range = (self._geometry()[0] <= SHOOT_RANGE) & self._alive & alive_a[:, None]
        avail = np.empty((n_ag, self.n_actions), dtype=np.int8)
        avail[:, 0] = ~alive_a
        avail[:, 1] = alive_a
        avail[:, 2:6] = self._can_move_all() & alive_a[:, None]
        avail[:, N_ACTIONS_NO_ATTACK:] = in_range[:, n_ag:]
        self._medivac_targets(avail, in_range)
        self._cache["avail"] = avail
        return avail

    def _medivac_targets(self, avail: np.ndarray, in_range: np.ndarray) -> None:
        """A Medivac's target slots refer to allies: alive non-Medivacs within range (in place on
        avail [n_agents, n_actions]; in_range [n_agents, n_units])."""
        medivacs = self._medivac_agents
        if medivacs.size:
            first, n_ag = self.n_actions_no_attack, self.n_agents
            avail[medivacs, first:] = 0
            heal = in_range[medivacs, :n_ag] & self._healable
            avail[medivacs, first:first + n_ag] = heal

    def get_avail_agent_actions(self, agent_id: int) -> list[int]:
        self._require_episode("get_avail_agent_actions()")
        return self._avail_matrix()[agent_id].tolist()

    def get_avail_actions(self) -> list[list[int]]:
        self._require_episode("get_avail_actions()")
        return self._avail_matrix().tolist()

    def can_move(self, unit: UnitView, direction: Direction) -> bool:
        m = self._move_amount / 2
        dx, dy = _MOVE_DIRS[int(direction)]
        x, y = int(unit.pos.x + m * dx), int(unit.pos.y + m * dy)
        return bool(self.check_bounds(x, y) and self.pathing_grid[x, y])

    def get_visibility_matrix(self) -> np.ndarray:
        """bool [n_agents, n_agents+n_enemies]: both alive and closer than the sight range."""
        visible = self._visible().copy()
        visible[np.arange(self.n_agents), np.arange(self.n_agents)] = False
        return visible

    def _visible(self) -> np.ndarray:
        """[n_agents, n_units] bool: observer alive, unit alive and strictly within sight range."""
        visible = self._cache.get("visible")
        if visible is None:
            alive_a = self._alive[: self.n_agents]
            visible = (self._geometry()[0] < SIGHT_RANGE) & self._alive & alive_a[:, None]
            self._cache["visible"] = visible
        return visible

    # ---- observations and state (flat gather plans, see _GatherPlan) ---------------------------
    def _fractions(self) -> tuple[np.ndarray, np.ndarray]:
        """Health / health_max and shield / SMAC max shield of every unit [n_units] (dead: 0)."""
        fractions = self._cache.get("fractions")
        if fractions is None:
            fractions = (self._health / self._health_max, self._shield / self._max_shield)
            self._cache["fractions"] = fractions
        return fractions

    def _obs_plan(self) -> "_GatherPlan":
        """Where every observation entry comes from (built once: depends on the map and flags)."""
        n_ag, n_en, n_act, utb = self.n_agents, self.n_enemies, self.n_actions, self.unit_type_bits
        n_units = n_ag + n_en
        plan = _GatherPlan(
            values={"avail": n_ag * n_act, "rel": 3 * n_ag * n_units, "health": n_units, "shield": n_units,
                    "type": n_units * utb, "last": n_ag * n_act * self.obs_last_action,
                    "surround": n_ag * self._n_surround, "const": 3},
            masks={"visible": n_ag * n_units, "alive": n_ag, "one": 1})
        agent = np.arange(n_ag)[:, None]  # [n_agents, 1]
        alive = plan.mask("alive") + agent
        # Move features: available moves, then the pathing/height probes.
        plan.add(plan.value("avail") + agent * n_act + 2 + np.arange(N_ACTIONS_MOVE), alive)
        plan.add(plan.value("surround") + agent * self._n_surround + np.arange(self._n_surround), alive)
        # Enemy rows start with "attackable" (the observer's attack availability), ally rows with 1.
        enemies = np.broadcast_to(n_ag + np.arange(n_en), (n_ag, n_en))
        attackable = plan.value("avail") + agent * n_act + N_ACTIONS_NO_ATTACK + np.arange(n_en)
        self._add_unit_rows(plan, enemies, attackable, self._en_cols, with_last_action=False)
        ones = np.full(self._other_j.shape, plan.value("const") + 1)
        self._add_unit_rows(plan, self._other_j, ones, self._al_cols, self.obs_last_action)
        plan.add(self._unit_columns(plan, agent[:, 0], self._own_cols), alive)
        if self.obs_timestep_number:
            # SMAC counts the timestep in own_feats and appends it again: a zero slot, then the value.
            plan.add(plan.value("const") + np.array([[0, 2]] * n_ag), np.full((n_ag, 2), plan.mask("one")))
        return plan.freeze()

    def _add_unit_rows(self, plan: "_GatherPlan", units: np.ndarray, first: np.ndarray, cols: np.ndarray,
                       with_last_action: bool) -> None:
        """Obs rows [first, dist, dx, dy, unit columns, (last action)] for units [n_agents, k];
        every entry of a row reads 0 unless the observer sees the unit."""
        n_ag, n_act = self.n_agents, self.n_actions
        n_units = n_ag + self.n_enemies
        pair = np.arange(n_ag)[:, None] * n_units + units  # [n_agents, k] flat (observer, unit) index
        rel = plan.value("rel") + np.arange(3) * n_ag * n_units + pair[..., None]  # [n_agents, k, 3]
        parts = [first[..., None], rel, self._unit_columns(plan, units, cols)]
        if with_last_action:
            parts.append(plan.value("last") + units[..., None] * n_act + np.arange(n_act))
        plan.add(np.concatenate(parts, axis=-1), (plan.mask("visible") + pair)[..., None])

    def _unit_columns(self, plan: "_GatherPlan", units: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Value indices [..., len(cols)] of unit-table columns (0 health, 1 shield, 2+ type bit)."""
        utb = self.unit_type_bits
        base = np.array([plan.value("health"), plan.value("shield")]
                        + [plan.value("type") + t for t in range(utb)])
        stride = np.array([1, 1] + [utb] * utb)
        return base[cols] + units[..., None] * stride[cols]

    def _surroundings(self) -> np.ndarray:
        """[n_agents, 8 pathing + 9 height values, as enabled]: SMAC's probes around (int(x), int(y));
        points outside the map read 1."""
        n_ag = self.n_agents
        offsets = _SURROUNDING * self._move_amount
        cx = (self._x[:n_ag].astype(np.int64)[:, None] + offsets[:, 0]).astype(np.int64)  # [n_agents, 9]
        cy = (self._y[:n_ag].astype(np.int64)[:, None] + offsets[:, 1]).astype(np.int64)
        parts = []
        if self.obs_pathing_grid:
            n_path = N_OBS_PATHING
            parts.append(self._grid_lookup(self.pathing_grid, cx[:, :n_path], cy[:, :n_path], 1.0))
        if self.obs_terrain_height:
            parts.append(self._grid_lookup(self.terrain_height, cx, cy, 1.0))
        return np.concatenate(parts, axis=1).astype(np.float64)

    def _obs_matrix(self) -> np.ndarray:
        """[n_agents, obs_len] float32; obs_len = get_obs_size() (+1 with obs_timestep_number)."""
        obs = self._cache.get("obs")
        if obs is None:
            n_ag = self.n_agents
            health, shield = self._fractions()
            values = [self._avail_matrix().ravel(), (self._geometry() / SIGHT_RANGE).ravel(), health, shield,
                      self._type_onehot.ravel()]
            if self.obs_last_action:
                values.append(self.last_action.ravel())
            if self._n_surround:
                values.append(self._surroundings().ravel())
            values.append([0.0, 1.0, self._episode_steps / self.episode_limit])
            masks = (self._visible().ravel(), self._alive[:n_ag], [True])
            obs = self._obs_gather.apply(np.concatenate(values), np.concatenate(masks)).astype(np.float32)
            self._cache["obs"] = obs
        return obs

    def get_obs_agent(self, agent_id: int) -> np.ndarray:
        self._require_episode("get_obs_agent()")
        return self._obs_matrix()[agent_id].copy()

    def get_obs(self) -> list[np.ndarray]:
        self._require_episode("get_obs()")
        return list(self._obs_matrix().copy())

    def _state_plan(self) -> "_GatherPlan":
        """Where every state entry comes from (the non-obs_instead_of_state layout of §5)."""
        n_ag, n_en, n_act, utb = self.n_agents, self.n_enemies, self.n_actions, self.unit_type_bits
        n_units = n_ag + n_en
        plan = _GatherPlan(
            values={"health": n_units, "shield": n_units, "cd": n_ag, "rel_x": n_units, "rel_y": n_units,
                    "type": n_units * utb, "last": n_ag * n_act, "const": 3},
            masks={"alive": n_units, "one": 1})
        sides = ((np.arange(n_ag), True, self.shield_bits_ally),
                 (n_ag + np.arange(n_en), False, self.shield_bits_enemy))
        for units, ally, shield_bits in sides:
            cols = [plan.value("health") + units]
            if ally:
                cols.append(plan.value("cd") + units)
            cols += [plan.value("rel_x") + units, plan.value("rel_y") + units]
            if shield_bits:
                cols.append(plan.value("shield") + units)
            cols += [plan.value("type") + units * utb + t for t in range(utb)]
            rows = np.stack(cols, axis=-1)  # [units, features] -> one flat row of the state
            plan.add(rows.reshape(1, -1), np.repeat(plan.mask("alive") + units, len(cols))[None])
        if self.state_last_action:
            last = plan.value("last") + np.arange(n_ag * n_act)[None]
            plan.add(last, np.full(last.shape, plan.mask("one")))
        if self.state_timestep_number:
            plan.add(np.array([[plan.value("const") + 2]]), np.array([[plan.mask("one")]]))
        return plan.freeze()

    def _state_vector(self) -> np.ndarray:
        """The state as float64 [state_size] (before SMAC's float32 cast)."""
        health, shield = self._fractions()
        cd_source = np.where(self._is_heal_unit, self._energy, self._cooldown)
        rel_xy = (self._xy - self._map_centre) / self._max_distance  # [2, n_units]
        values = (health, shield, cd_source / self._max_cd, rel_xy.ravel(), self._type_onehot.ravel(),
                  self.last_action.ravel(), [0.0, 1.0, self._episode_steps / self.episode_limit])
        masks = (self._alive, [True])
        return self._state_gather.apply(np.concatenate(values), np.concatenate(masks))[0]

    def get_state_dict(self) -> dict[str, Any]:
        """State parts: allies [n_agents, nf_al], enemies [n_enemies, nf_en], last_action, timestep."""
        self._require_episode("get_state_dict()")
        n_ag, n_en = self.n_agents, self.n_enemies
        nf_al, nf_en = self.get_ally_num_attributes(), self.get_enemy_num_attributes()
        state = self._state_vector()
        parts = {
            "allies": state[: n_ag * nf_al].reshape(n_ag, nf_al),
            "enemies": state[n_ag * nf_al: n_ag * nf_al + n_en * nf_en].reshape(n_en, nf_en),
        }
        if self.state_last_action:
            parts["last_action"] = self.last_action
        if self.state_timestep_number:
            parts["timestep"] = self._episode_steps / self.episode_limit
        return parts

    def get_state(self) -> np.ndarray:
        self._require_episode("get_state()")
        if self.obs_instead_of_state:
            return self._obs_matrix().reshape(-1).copy()
        return self._state_vector().astype(np.float32)

    # ---- sizes -------------------------------------------------------------------------------
    def get_obs_move_feats_size(self) -> int:
        size = N_ACTIONS_MOVE
        if self.obs_pathing_grid:
            size += N_OBS_PATHING
        if self.obs_terrain_height:
            size += N_OBS_HEIGHT
        return size

    def get_obs_enemy_feats_size(self) -> tuple[int, int]:
        nf_en = 4 + self.unit_type_bits
        if self.obs_all_health:
            nf_en += 1 + self.shield_bits_enemy
        return self.n_enemies, nf_en

    def get_obs_ally_feats_size(self) -> tuple[int, int]:
        nf_al = 4 + self.unit_type_bits
        if self.obs_all_health:
            nf_al += 1 + self.shield_bits_ally
        if self.obs_last_action:
            nf_al += self.n_actions
        return self.n_agents - 1, nf_al

    def get_obs_own_feats_size(self) -> int:
        size = self.unit_type_bits
        if self.obs_own_health:
            size += 1 + self.shield_bits_ally
        if self.obs_timestep_number:
            size += 1
        return size

    def get_obs_size(self) -> int:
        n_en, nf_en = self.get_obs_enemy_feats_size()
        n_al, nf_al = self.get_obs_ally_feats_size()
        return self.get_obs_move_feats_size() + n_en * nf_en + n_al * nf_al + self.get_obs_own_feats_size()

    def get_state_size(self) -> int:
        if self.obs_instead_of_state:
            return self.get_obs_size() * self.n_agents
        size = (self.n_agents * self.get_ally_num_attributes()
                + self.n_enemies * self.get_enemy_num_attributes())
        if self.state_last_action:
            size += self.n_agents * self.n_actions
        if self.state_timestep_number:
            size += 1
        return size

    def get_ally_num_attributes(self) -> int:
        return len(self.ally_state_attr_names)

    def get_enemy_num_attributes(self) -> int:
        return len(self.enemy_state_attr_names)

    def get_total_actions(self) -> int:
        return self.n_actions

    # ---- heuristic AI ------------------------------------------------------------------------
    def _heuristic_actions(self) -> np.ndarray:
        """SMAC's scripted focus fire: every agent's action number (sticky nearest target)."""
        return np.array([self._heuristic_agent_action(a_id) for a_id in range(self.n_agents)], dtype=np.int64)

    def _heuristic_agent_action(self, a_id: int) -> int:
        n_ag = self.n_agents
        dist = self._geometry()[0][a_id]
        medivac = self._types[a_id] == self.medivac_id
        target = self.heuristic_targets[a_id]
        if medivac:
            slots = np.arange(n_ag)
            damaged = self._health[:n_ag] != self._health_max[:n_ag]
            keep = target is not None and self._alive[target] and damaged[target]
            candidates = self._healable & self._alive[:n_ag] & damaged
        else:
            slots = n_ag + np.arange(self.n_enemies)
            keep = target is not None and self._alive[n_ag + target]
            candidates = self._alive[n_ag:].copy()
            if self._types[a_id] == self.marauder_id:
                # SMAC compares with the allied Medivac id, which no enemy has.
                candidates &= self._types[n_ag:] != self.medivac_id
        if not keep:
            target = self._nearest(dist[slots], candidates)
            self.heuristic_targets[a_id] = target
            if target is None:
                return 0
        action = self.n_actions_no_attack + target
        if self.heuristic_rest and self._avail_matrix()[a_id, action] == 0:
            return self._move_towards(a_id, int(slots[target]))
        return action

    def _nearest(self, dist: np.ndarray, candidates: np.ndarray) -> int | None:
        """Index of the nearest candidate strictly closer than the map diagonal, else None."""
        limit = math.hypot(self.max_distance_x, self.max_distance_y)
        masked = np.where(candidates & (dist < limit), dist, np.inf)
        best = int(np.argmin(masked))
        return best if np.isfinite(masked[best]) else None

    def _move_towards(self, a_id: int, slot: int) -> int:
        """Move action towards unit `slot` along the dominant axis (E/W if |dx| > |dy|, else N/S)."""
        delta_x = self._x[slot] - self._x[a_id]
        delta_y = self._y[slot] - self._y[a_id]
        if abs(delta_x) > abs(delta_y):
            return 4 if delta_x > 0 else 5
        return 2 if delta_y > 0 else 3

    # ---- misc --------------------------------------------------------------------------------
    def get_env_info(self) -> dict[str, Any]:
        env_info = super().get_env_info()
        env_info["agent_features"] = self.ally_state_attr_names
        env_info["enemy_features"] = self.enemy_state_attr_names
        return env_info

    def get_stats(self) -> dict[str, float]:
        if self.battles_game == 0:
            raise ZeroDivisionError("win_rate is undefined before the first finished episode (as in SMAC)")
        return {
            "battles_won": self.battles_won,
            "battles_game": self.battles_game,
            "battles_draw": self.timeouts,
            "win_rate": self.battles_won / self.battles_game,
            "timeouts": self.timeouts,
            "restarts": self.force_restarts,
        }

    @property
    def force_restarts(self) -> int:
        """Game relaunches after a crash; counted by engines that can crash (real SC2)."""
        return int(getattr(self._engine, "restarts", 0))

    def seed(self) -> int | None:
        return self._seed

    def full_restart(self) -> None:
        """SMAC's: close the game and launch it again (here: a new engine, seeded with the env's _seed, which
        SMAC's PettingZoo wrapper sets before calling this); the next reset() starts its first episode."""
        if self._engine is not None:
            self._engine.close()
        self._engine = None
        self._launch()

    def render(self, mode: str = "human") -> None:
        """No on-screen rendering (PyMARL2's behaviour); replays come from save_replay()."""

    def save_replay(self) -> str | None:
        """Let the engine write a replay if it can (prefix: replay_prefix or the map name); its path."""
        if self._engine is None or not hasattr(self._engine, "save_replay"):
            logger.warning("no replay saved: this engine records none (the built-in simulator needs "
                           "record_replay=True, which save_replay=True sets)")
            return None
        return self._engine.save_replay(self.replay_dir, self.replay_prefix or self.map_name)

    def close(self) -> None:
        """Close the game. The env is then as before its first reset(), whose call launches a new game (an
        engine handed to the constructor is kept and reset again)."""
        if self._engine is not None:
            self._engine.close()
        if not self._engine_given:
            self._engine = None
        self._launched = False
        self._episode_over = None

"""SMACv2's environment (oxwhirl/smacv2) on marlkit's engines: StarCraft2EnvV2 and its capability wrapper.

SMACv2 keeps SMAC's game logic (rewards, termination, unit bookkeeping: inherited from
StarCraft2Env) and changes what an agent sees and can do:
- every reset creates new armies: unit types and start positions drawn by the capability
  distributions (envs/starcraft/interface/distributions.py) of `capability_config`;
- sight and attack ranges per unit type (`use_unit_ranges`, attack range at least
  `min_attack_range`), observations scaled by the observer's own sight range;
- an enemy is seen only if it is in sight *and* the agent may observe it: the first agent to see an
  enemy "tags" it, each other agent may then observe it with probability `prob_obs_enemy`, until the
  tagger or the enemy dies;
- EPO's conic field of view (`conic_fov`): `num_fov_actions` extra actions turn the agent's cone;
- `action_mask=False` offers every living target; an attack out of range then does nothing;
- own position, unit type and (optionally) attack probabilities as observed capabilities.

The layout of observations and state, the feature names and every quirk of SMACv2's own code are
kept as SMACv2 has them, so that numbers are comparable with published SMACv2 results; each quirk is
named where it is reproduced, and docs/smacv2.md lists them. Everything is computed for all agents at
once per step and cached until the next step or reset, as in StarCraft2Env.
"""
from dataclasses import replace
from typing import Any, Sequence

import numpy as np

from ..game import unit_ids
from ..game.maps import GEN_MAP_REGISTRY, MapParams, gen_map_of
from ..game.teams import GEN_UNIT_NAMES, RACE_UNITS, Team
from .distributions import check_capability_config, check_prob_obs_enemy, draw_episode_config, make_distributions
from .starcraft2 import HEALING_MAP_TYPES, N_ACTIONS_MOVE, N_OBS_HEIGHT, N_OBS_PATHING, StarCraft2Env

# SMACv2's guard against dividing by zero in its cone test (is_position_in_cone).
EPS = 1e-7
# Attack and sight ranges SMACv2 gives each unit type with use_unit_ranges (unit_shoot_range,
# unit_sight_range); without it every unit shoots at 6 and sees at 9, as in SMAC.
UNIT_SHOOT_RANGE = {"stalker": 6, "zealot": 0.1, "colossus": 7, "zergling": 0.1, "baneling": 0.25,
                    "hydralisk": 5, "marine": 5, "marauder": 6, "medivac": 4}
UNIT_SIGHT_RANGE = {"stalker": 10, "zealot": 9, "colossus": 10, "zergling": 8, "baneling": 8,
                    "hydralisk": 9, "marine": 9, "marauder": 10, "medivac": 11}
DEFAULT_SHOOT_RANGE, DEFAULT_SIGHT_RANGE = 6.0, 9.0
# Where SMACv2 creates the armies when capability_config has no start_positions.
FIXED_ALLY_POINT, FIXED_ENEMY_POINT = (8.0, 16.0), (24.0, 16.0)
RACE_OF_MAP_TYPE = {"protoss_gen": "protoss", "terran_gen": "terran", "zerg_gen": "zerg"}


class StarCraft2EnvV2(StarCraft2Env):
    """SMACv2's StarCraft2Env: same arguments, defaults, methods and semantics.

    reset(episode_config) takes the episode's draw in SMACv2's format (what the capability
    distributions generate); StarCraftCapabilityEnvWrapper draws it itself. Beyond SMACv2's
    arguments: `backend`, `record_replay` and `engine`, as for StarCraft2Env, and
    `hide_only_unobserved_enemies` (see _enemy_features).
    """

    def __init__(
        self,
        map_name: str = "10gen_protoss",
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
        obs_own_pos: bool = False,
        obs_starcraft: bool = True,
        conic_fov: bool = False,
        num_fov_actions: int = 12,
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
        use_unit_ranges: bool = False,
        min_attack_range: float = 2,
        kill_unit_step_mul: int = 2,
        fully_observable: bool = False,
        capability_config: dict | None = None,
        replay_dir: str = "",
        replay_prefix: str = "",
        window_size_x: int = 1920,
        window_size_y: int = 1200,
        heuristic_ai: bool = False,
        heuristic_rest: bool = False,
        debug: bool = False,
        prob_obs_enemy: float = 1.0,
        action_mask: bool = True,
        hide_only_unobserved_enemies: bool = False,
        backend: str = "auto",
        record_replay: bool = False,
        engine: Any = None,
    ):
        cap = dict(capability_config or {})
        check_capability_config(cap, map_name)
        check_prob_obs_enemy(prob_obs_enemy)
        self.capability_config = cap
        self.stochastic_attack = "attack" in cap
        self.replace_teammates = "team_gen" in cap
        self.mask_enemies = "enemy_mask" in cap
        self.random_start = "start_positions" in cap
        self.observe_attack_probs = bool(cap.get("attack", {}).get("observe", False))
        self.zero_pad_stochastic_attack = self.stochastic_attack and not self.observe_attack_probs
        self.observe_teammate_types = bool(cap.get("team_gen", {}).get("observe", True))
        self.zero_pad_unit_types = self.replace_teammates and not self.observe_teammate_types
        self.conic_fov = conic_fov
        self.n_fov_actions = num_fov_actions if conic_fov else 0
        self.conic_fov_angle = 2 * np.pi / self.n_fov_actions if conic_fov else 0.0
        self.obs_own_pos = obs_own_pos
        self.obs_starcraft = obs_starcraft
        self.use_unit_ranges = use_unit_ranges
        self.min_attack_range = min_attack_range
        self._kill_unit_step_mul = kill_unit_step_mul  # (SMACv2 uses it only with capability health, refused)
        self.fully_observable = fully_observable
        self.prob_obs_enemy = prob_obs_enemy
        self.action_mask = action_mask
        self.hide_only_unobserved_enemies = hide_only_unobserved_enemies
        super().__init__(
            map_name=map_name, step_mul=step_mul, move_amount=move_amount, difficulty=difficulty,
            game_version=game_version, seed=seed, continuing_episode=continuing_episode,
            obs_all_health=obs_all_health, obs_own_health=obs_own_health, obs_last_action=obs_last_action,
            obs_pathing_grid=obs_pathing_grid, obs_terrain_height=obs_terrain_height,
            obs_instead_of_state=obs_instead_of_state, obs_timestep_number=obs_timestep_number,
            state_last_action=state_last_action, state_timestep_number=state_timestep_number,
            reward_sparse=reward_sparse, reward_only_positive=reward_only_positive,
            reward_death_value=reward_death_value, reward_win=reward_win, reward_defeat=reward_defeat,
            reward_negative_scale=reward_negative_scale, reward_scale=reward_scale,
            reward_scale_rate=reward_scale_rate, replay_dir=replay_dir, replay_prefix=replay_prefix,
            window_size_x=window_size_x, window_size_y=window_size_y, heuristic_ai=heuristic_ai,
            heuristic_rest=heuristic_rest, debug=debug, backend=backend, record_replay=record_replay,
            engine=engine)
        # SMACv2 draws its observation lottery and shuffles the agents with unseeded generators; here
        # they come from the env's seed, so that a run repeats.
        self._obs_rng = np.random.default_rng(None if seed is None else [int(seed), 3])
        self._reset_episode_draws({})

    # ---- construction (hooks of StarCraft2Env) -----------------------------------------------------
    def _scenario(self, map_name: str) -> tuple[MapParams, str]:
        gen_map = gen_map_of(map_name)
        params = GEN_MAP_REGISTRY[gen_map]
        cap = self.capability_config
        return replace(params, n_agents=int(cap["n_units"]), n_enemies=int(cap["n_enemies"])), gen_map

    def _action_layout(self) -> tuple[int, int]:
        """No-op, stop, 4 moves, the field-of-view turns, then the targets: one per enemy, or one per
        agent on Terran maps with more agents than enemies (Medivacs heal allies)."""
        no_attack = 2 + N_ACTIONS_MOVE + self.n_fov_actions
        map_type = GEN_MAP_REGISTRY[gen_map_of(self.map_name)].map_type
        if map_type in HEALING_MAP_TYPES and self.n_agents > self.n_enemies:
            return no_attack, no_attack + self.n_agents
        return no_attack, no_attack + self.n_enemies

    def _state_attr_names(self) -> tuple[list[str], list[str]]:
        """SMACv2's env_info feature names: ally, enemy, and (attribute) capability names."""
        ally = ["health", "energy/cooldown", "rel_x", "rel_y"] + ["shield"] * self.shield_bits_ally
        enemy = ["health", "rel_x", "rel_y"] + ["shield"] * self.shield_bits_enemy
        if self.conic_fov:
            ally += ["fov_x", "fov_y"]
        type_names = [f"type_{bit}" for bit in range(self.unit_type_bits)]
        self.capability_attr_names = ["attack_probability"] * self.stochastic_attack + type_names
        return ally, enemy + type_names

    def _build_index_tables(self) -> None:
        self._build_action_tables()
        self.fov_directions = np.tile([1.0, 0.0], (self.n_agents, 1))  # [n_agents, 2]
        turns = 2 * np.pi * np.arange(self.n_fov_actions) / max(self.n_fov_actions, 1)
        self.canonical_fov_directions = np.stack([np.cos(turns), np.sin(turns)], axis=1)  # [n_fov, 2]
        self.state_feature_names = self._build_state_feature_names()
        self.obs_feature_names = self._build_obs_feature_names()

    # ---- feature names -------------------------------------------------------------------------------
    def _ally_capability_names(self, al_id: int) -> list[str]:
        """The capability features an agent observes of ally al_id (values or zero padding)."""
        names = [f"ally_attack_prob_{al_id}"] * self.stochastic_attack
        names += [f"ally_unit_type_{al_id}_bit_{bit}" for bit in range(self.unit_type_bits)]
        return names

    def _build_obs_feature_names(self) -> list[str]:
        """SMACv2's observation names, ally entries as agent 0 sees them (allies 1..n-1)."""
        names = ["move_action_north", "move_action_south", "move_action_east", "move_action_west"]
        names += [f"pathing_grid_{n}" for n in range(N_OBS_PATHING)] * self.obs_pathing_grid
        names += [f"terrain_height_{n}" for n in range(N_OBS_HEIGHT)] * self.obs_terrain_height
        for e_id in range(self.n_enemies):
            names += [f"enemy_shootable_{e_id}", f"enemy_distance_{e_id}", f"enemy_relative_x_{e_id}",
                      f"enemy_relative_y_{e_id}"]
            names += [f"enemy_health_{e_id}"] * self.obs_all_health
            names += [f"enemy_shield_{e_id}"] * (self.obs_all_health and self.shield_bits_enemy)
            names += [f"enemy_unit_type_{e_id}_bit_{bit}" for bit in range(self.unit_type_bits)]
        for al_id in range(1, self.n_agents):
            names += [f"ally_visible_{al_id}", f"ally_distance_{al_id}", f"ally_relative_x_{al_id}",
                      f"ally_relative_y_{al_id}"]
            names += [f"ally_health_{al_id}"] * self.obs_all_health
            names += [f"ally_shield_{al_id}"] * (self.obs_all_health and self.shield_bits_ally)
            names += self._ally_capability_names(al_id)
            names += [f"ally_last_action_{al_id}_action_{a}" for a in range(self.n_actions)] * self.obs_last_action
        names += ["own_health"] * self.obs_own_health + ["own_shield"] * (self.obs_own_health and self.shield_bits_ally)
        names += ["own_attack_prob"] * self.stochastic_attack
        names += ["own_pos_x", "own_pos_y"] * self.obs_own_pos + ["own_fov_x", "own_fov_y"] * self.conic_fov
        names += [f"own_unit_type_bit_{bit}" for bit in range(self.unit_type_bits)]
        if not self.obs_starcraft:
            names = []
        return names + ["timestep"] * self.obs_timestep_number

    def _build_state_feature_names(self) -> list[str]:
        """SMACv2's state names (with obs_instead_of_state, which SMACv2 refuses: each agent's obs names)."""
        if self.obs_instead_of_state:
            return [f"agent_{a_id}_{name}" for a_id in range(self.n_agents) for name in self.obs_feature_names]
        names = []
        for al_id in range(self.n_agents):
            names += [f"ally_health_{al_id}", f"ally_cooldown_{al_id}", f"ally_relative_x_{al_id}",
                      f"ally_relative_y_{al_id}"]
            names += [f"ally_shield_{al_id}"] * self.shield_bits_ally
            names += [f"ally_attack_prob_{al_id}"] * self.stochastic_attack
            names += [f"ally_fov_x_{al_id}", f"ally_fov_y_{al_id}"] * self.conic_fov
            names += [f"ally_unit_type_{al_id}_bit_{bit}" for bit in range(self.unit_type_bits)]
        for e_id in range(self.n_enemies):
            names += [f"enemy_health_{e_id}", f"enemy_relative_x_{e_id}", f"enemy_relative_y_{e_id}"]
            names += [f"enemy_shield_{e_id}"] * self.shield_bits_enemy
            names += [f"enemy_unit_type_{e_id}_bit_{bit}" for bit in range(self.unit_type_bits)]
        names += [f"ally_last_action_{al_id}_action_{a}" for al_id in range(self.n_agents)
                  for a in range(self.n_actions)] * self.state_last_action
        return names + ["timestep"] * self.state_timestep_number

    def get_obs_feature_names(self) -> list[str]:
        return self.obs_feature_names

    def get_state_feature_names(self) -> list[str]:
        return self.state_feature_names

    # ---- episode control -------------------------------------------------------------------------------
    def reset(self, episode_config: dict | None = None) -> tuple[list[np.ndarray], np.ndarray]:
        """Create the armies of `episode_config` (SMACv2's draw: team_gen, start positions, masks,
        attack probabilities) and start an episode; returns (observations, state)."""
        episode_config = episode_config or {}
        self._episode_steps = 0
        if not self._launched:
            self._launch()
        self._reset_episode_draws(episode_config)
        return self._start_episode(self._engine.reset(self._team(episode_config)))

    def _reset_episode_draws(self, episode_config: dict) -> None:
        """The per-episode capability draws and SMACv2's observation bookkeeping."""
        n_ag, n_en = self.n_agents, self.n_enemies
        self.agent_attack_probabilities = episode_config.get("attack", {}).get("item")
        mask = episode_config.get("enemy_mask", {}).get("item")
        self.enemy_mask = None if mask is None else np.asarray(mask, dtype=bool)  # [n_agents, n_enemies]
        # SMACv2 switches the enemy mask on when the draw carries one.
        self.mask_enemies = self.enemy_mask is not None
        self.obs_enemies = np.zeros((n_en, n_ag))  # [enemies, agents] 1 = the agent may observe it
        self.enemy_tags = np.full(n_en, -1, dtype=np.int64)  # the agent that first saw each enemy, -1 none
        self.fov_directions = np.tile([1.0, 0.0], (n_ag, 1))

    def _team(self, episode_config: dict) -> Team:
        """The armies of the episode: unit names from team_gen, points from the start positions
        (SMACv2's fixed points without them)."""
        team = episode_config.get("team_gen", {})
        if "ally_team" not in team or "enemy_team" not in team:
            raise ValueError("reset() on a SMACv2 map needs episode_config['team_gen'] with ally_team and enemy_team "
                             "(StarCraftCapabilityEnvWrapper draws it from capability_config)")
        allies, enemies = tuple(team["ally_team"]), tuple(team["enemy_team"])
        if self.random_start:
            ally_xy = np.asarray(episode_config["ally_start_positions"]["item"], dtype=np.float64)
            enemy_xy = np.asarray(episode_config["enemy_start_positions"]["item"], dtype=np.float64)
        else:
            ally_xy = np.tile(FIXED_ALLY_POINT, (len(allies), 1))
            enemy_xy = np.tile(FIXED_ENEMY_POINT, (len(enemies), 1))
        return Team(allies, tuple(map(tuple, ally_xy.tolist())), enemies, tuple(map(tuple, enemy_xy.tolist())))

    def step(self, actions: Sequence[int]) -> tuple[float, bool, dict]:
        """SMAC's step, plus SMACv2's field-of-view turns and the observation tags of the dead."""
        if self.conic_fov and not self.heuristic_ai:
            acts = self._action_array(actions)
            first_fov = 2 + N_ACTIONS_MOVE
            turning = (acts >= first_fov) & (acts < first_fov + self.n_fov_actions)
            self.fov_directions[turning] = self.canonical_fov_directions[acts[turning] - first_fov]
        reward, terminated, info = super().step(actions)
        if info:  # (an episode lost to a game restart returns no info and no units to read)
            self._forget_dead_tags()
        return reward, terminated, info

    def _forget_dead_tags(self) -> None:
        """SMACv2 forgets the tags of dead enemies and of enemies tagged by dead agents (and what those
        agents may observe)."""
        n_ag = self.n_agents
        dead_enemies = ~self._alive[n_ag:]
        self.enemy_tags[dead_enemies] = -1
        self.obs_enemies[dead_enemies] = 0
        tags = self.enemy_tags
        by_dead_agent = (tags >= 0) & ~self._alive[:n_ag][np.maximum(tags, 0)]  # [n_enemies]
        if by_dead_agent.any():
            self.obs_enemies[:, np.unique(tags[by_dead_agent])] = 0
            self.obs_enemies[by_dead_agent] = 0
            tags[by_dead_agent] = -1

    def _engine_orders(self, acts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """SMAC's orders, except that an attack (or heal) the agent cannot make now gives no order:
        a target out of range (possible with action_mask=False) or a failed attack roll."""
        kind, tx, ty, target = super()._engine_orders(acts)
        if self.heuristic_ai:
            return kind, tx, ty, target
        attacks = acts >= self.n_actions_no_attack  # [n_agents]
        dropped = attacks & (self._true_avail_matrix()[self._agent_range, acts] == 0)
        if self.stochastic_attack:
            probabilities = np.asarray(self.agent_attack_probabilities, dtype=np.float64).reshape(-1)
            dropped |= attacks & (self._obs_rng.uniform(size=self.n_agents) > probabilities)
        kind[dropped[self._inv_perm]] = 0
        return kind, tx, ty, target

    # ---- unit types -------------------------------------------------------------------------------------
    def _init_ally_unit_types(self, min_unit_type: int) -> None:
        """The nine RL ids of SMACv2's map, as the engine numbers them; the unit-type bit of each id."""
        ids = self._engine.ally_unit_ids
        for name in GEN_UNIT_NAMES:
            setattr(self, f"{name}_id", ids[name])
        self._min_unit_type = min(ids.values())
        race = RACE_OF_MAP_TYPE[self.map_type]
        self._bit_of_type = {}
        for bit, name in enumerate(RACE_UNITS[race]):
            self._bit_of_type[ids[name]] = self._bit_of_type[unit_ids.STOCK_ID_OF_NAME[name]] = bit
        self._name_of_ally_type = {ids[name]: name for name in GEN_UNIT_NAMES}

    def _type_index(self, unit_type: int, ally: bool) -> int:
        if unit_type not in self._bit_of_type:
            raise ValueError(f"unit type {unit_type} is not one of the {self.map_type} unit types "
                             f"{RACE_UNITS[RACE_OF_MAP_TYPE[self.map_type]]}")
        return self._bit_of_type[unit_type]

    def _build_unit_tables(self, units: Any) -> None:
        super()._build_unit_tables(units)
        names = [self._name_of_ally_type[t] for t in self._types[:self.n_agents].tolist()]
        if self.use_unit_ranges:
            shoot = [max(UNIT_SHOOT_RANGE[n], self.min_attack_range) for n in names]
            sight = [UNIT_SIGHT_RANGE[n] for n in names]
        else:
            shoot, sight = [DEFAULT_SHOOT_RANGE] * len(names), [DEFAULT_SIGHT_RANGE] * len(names)
        self._shoot_range = np.array(shoot, dtype=np.float64)  # [n_agents]
        self._sight_range = np.array(sight, dtype=np.float64)  # [n_agents]

    def unit_shoot_range(self, agent_id: int) -> float:
        return float(self._shoot_range[agent_id])

    def unit_sight_range(self, agent_id: int) -> float:
        return float(self._sight_range[agent_id])

    @staticmethod
    def _only_positive(reward: float) -> float:
        """SMACv2's reward_only_positive clips at 0 (SMAC's takes the absolute value), so that enemies
        regenerating shields or health, or healed, pay nothing."""
        return max(reward, 0)

    def only_medivac_left(self, ally: bool) -> bool:
        """Terran maps end when a side has nothing but Medivacs (SMACv2 compares enemies with the
        stock Medivac id)."""
        if self.map_type not in HEALING_MAP_TYPES:
            return False
        n_ag = self.n_agents
        if ally:
            return not np.any(self._alive[:n_ag] & (self._types[:n_ag] != self.medivac_id))
        return not np.any(self._alive[n_ag:] & (self._types[n_ag:] != unit_ids.MEDIVAC))

    # ---- geometry, visibility and available actions -----------------------------------------------------
    def _in_cone(self, reach: np.ndarray) -> np.ndarray:
        """SMACv2's is_position_in_cone for every (agent, unit) -> bool [n_agents, n_units].

        Within `reach` [n_agents] (inclusive) and at an angle from the agent's field-of-view direction
        below half the cone. SMACv2 compares arctan(dy / dx) angles, which cannot tell a direction from
        its opposite, and gives the direction's x the sign of the unit's dx: so the cone also looks
        backwards. Kept as SMACv2 has it."""
        dist, dx, dy = self._geometry()
        x_diff = np.where(dx > 0, np.maximum(dx, EPS), np.minimum(dx, -EPS))
        unit_angle = np.arctan(dy / x_diff)
        fov_x, fov_y = self.fov_directions[:, 0:1], self.fov_directions[:, 1:2]  # [n_agents, 1]
        fov_x = np.where(dx > 0, np.maximum(fov_x, EPS), np.minimum(fov_x, -EPS))
        fov_angle = np.arctan(fov_y / fov_x)
        return (dist <= reach[:, None]) & (np.abs(unit_angle - fov_angle) < self.conic_fov_angle / 2)

    def _sees(self) -> np.ndarray:
        """Where each agent's sight reaches, alive or not: in its cone, or strictly within its sight
        range -> bool [n_agents, n_units]."""
        sees = self._cache.get("sees")
        if sees is None:
            if self.conic_fov:
                sees = self._in_cone(self._sight_range)
            else:
                sees = self._geometry()[0] < self._sight_range[:, None]
            self._cache["sees"] = sees
        return sees

    def _can_shoot(self) -> np.ndarray:
        """Targets within each agent's attack range (in its cone with conic_fov) -> bool [n_agents, n_units]."""
        if self.conic_fov:
            return self._in_cone(self._shoot_range)
        return self._geometry()[0] <= self._shoot_range[:, None]

    def _avail_matrix(self) -> np.ndarray:
        """[n_agents, n_actions] int8: what get_avail_agent_actions offers (all living targets
        without action_mask)."""
        avail = self._cache.get("avail")
        if avail is None:
            avail = self._availability(masked=self.action_mask)
            self._cache["avail"] = avail
        return avail

    def _true_avail_matrix(self) -> np.ndarray:
        """[n_agents, n_actions] int8: SMACv2's get_true_avail_agent_actions (targets in range)."""
        if not self.action_mask:
            avail = self._cache.get("true_avail")
            if avail is None:
                avail = self._cache["true_avail"] = self._availability(masked=True)
            return avail
        return self._avail_matrix()

    def _availability(self, masked: bool) -> np.ndarray:
        n_ag, first = self.n_agents, self.n_actions_no_attack
        alive_a = self._alive[:n_ag]
        targets = self._alive & alive_a[:, None]  # [n_agents, n_units] both alive
        if masked:
            targets = targets & self._can_shoot()
        avail = np.zeros((n_ag, self.n_actions), dtype=np.int8)
        avail[:, 0] = ~alive_a
        avail[:, 1] = alive_a
        avail[:, 2:6] = self._can_move_all() & alive_a[:, None]
        avail[:, 6:first] = alive_a[:, None]  # field-of-view turns
        avail[:, first:first + self.n_enemies] = targets[:, n_ag:]
        self._medivac_targets(avail, targets)
        return avail

    def get_visibility_matrix(self) -> np.ndarray:
        """bool [n_agents, n_agents + n_enemies]: SMACv2's, by sight range (no cone); a pair of agents
        sees each other when the lower-numbered one's sight range reaches (SMACv2 fills it symmetrically)."""
        n_ag = self.n_agents
        dist = self._geometry()[0]
        alive_a = self._alive[:n_ag]
        within = (dist < self._sight_range[:, None]) & self._alive & alive_a[:, None]
        upper = np.triu(within[:, :n_ag], k=1)
        visible = within.copy()
        visible[:, :n_ag] = upper | upper.T
        return visible

    # ---- observations ------------------------------------------------------------------------------------
    def _tag_enemies(self) -> np.ndarray:
        """SMACv2's observation lottery, agents in random order: an enemy in an agent's sight that no
        agent has tagged yet is tagged by it; each other agent may then observe it with probability
        prob_obs_enemy (drawn once, kept until the tagger or the enemy dies).

        SMACv2 builds each agent's observation at its turn, so an agent sees the lottery as it stands
        after its own tags, without the draws of agents after it in this step's order -> which
        enemies each agent may observe in this step's observation, bool [n_agents, n_enemies]."""
        n_ag = self.n_agents
        # [n_agents, n_enemies] (positions of dead enemies: last seen), living agents only
        sees = self._sees()[:, n_ag:] & self._alive[:n_ag, None]
        may_observe = np.empty((n_ag, self.n_enemies), dtype=bool)
        for agent in self._obs_rng.permutation(n_ag):
            for e_id in np.flatnonzero(sees[agent] & (self.enemy_tags < 0)):
                self.enemy_tags[e_id] = agent
                draws = self._obs_rng.random(n_ag) < self.prob_obs_enemy  # [n_agents]
                draws[agent] = True
                self.obs_enemies[e_id] = np.maximum(self.obs_enemies[e_id], draws)
            may_observe[agent] = self.obs_enemies[:, agent] > 0
        return may_observe

    def _enemy_features(self, true_avail: np.ndarray, may_observe: np.ndarray) -> np.ndarray:
        """[n_agents, n_enemies, nf_en] as SMACv2 builds them, including its quirk (oxwhirl/smacv2 issue
        50): an enemy the agent may not observe wipes the features of every enemy before it (SMACv2
        re-zeroes the whole block); hide_only_unobserved_enemies=True (marlkit's, off by default) hides
        only that enemy. may_observe: [n_agents, n_enemies], the lottery as each agent's turn saw it."""
        n_ag, n_en, first = self.n_agents, self.n_enemies, self.n_actions_no_attack
        dist, dx, dy = self._geometry()[:, :, n_ag:]  # each [n_agents, n_enemies]
        sight = self._sight_range[:, None]
        alive_e = self._alive[n_ag:][None, :]
        shown = alive_e & (self.fully_observable | (self._sees()[:, n_ag:] & may_observe))
        if not self.hide_only_unobserved_enemies:
            last_hidden = np.where(~may_observe, np.arange(n_en), -1).max(axis=1, initial=-1)  # [n_agents]
            shown &= np.arange(n_en)[None, :] > last_hidden[:, None]
        details = ~self.enemy_mask if self.mask_enemies else np.ones((n_ag, n_en), dtype=bool)
        columns = [true_avail[:, first:first + n_en], dist / sight, dx / sight, dy / sight]
        health, shield = self._fractions()
        if self.obs_all_health:
            columns.append(np.broadcast_to(health[n_ag:], (n_ag, n_en)) * details)
            if self.shield_bits_enemy:
                columns.append(np.broadcast_to(shield[n_ag:], (n_ag, n_en)) * details)
        feats = np.stack(columns, axis=-1)  # [n_agents, n_enemies, features before the type bits]
        types = self._type_onehot[n_ag:][None, :, :] * details[..., None]  # [n_agents, n_enemies, bits]
        feats = np.concatenate([feats, types], axis=-1)
        return feats * shown[..., None]

    def _ally_features(self) -> np.ndarray:
        """[n_agents, n_agents - 1, nf_al]: the other agents in increasing id, as SMACv2 builds them."""
        n_ag, others = self.n_agents, self._other_j
        rows = np.arange(n_ag)[:, None]
        dist, dx, dy = (g[rows, others] for g in self._geometry())  # each [n_agents, n_agents - 1]
        sight = self._sight_range[:, None]
        alive_other = self._alive[others]
        shown = alive_other & (self.fully_observable | self._sees()[rows, others])
        columns = [np.ones_like(dist), dist / sight, dx / sight, dy / sight]
        health, shield = self._fractions()
        if self.obs_all_health:
            columns.append(health[others])
            if self.shield_bits_ally:
                columns.append(shield[others])
        if self.stochastic_attack:
            probabilities = np.asarray(self.agent_attack_probabilities, dtype=np.float64).reshape(-1)
            columns.append(probabilities[others] * self.observe_attack_probs)
        feats = [np.stack(columns, axis=-1)]
        types = self._type_onehot[others]  # [n_agents, n_agents - 1, bits]
        feats.append(types * (not self.replace_teammates or self.observe_teammate_types))
        if self.obs_last_action:
            feats.append(self.last_action[others])
        return np.concatenate(feats, axis=-1) * shown[..., None]

    def _own_features(self) -> np.ndarray:
        """[n_agents, own features]: health, shield, attack probability, position, field of view, type."""
        n_ag = self.n_agents
        health, shield = self._fractions()
        columns = []
        if self.obs_own_health:
            columns.append(health[:n_ag, None])
            if self.shield_bits_ally:
                columns.append(shield[:n_ag, None])
        if self.stochastic_attack:
            columns.append(np.asarray(self.agent_attack_probabilities, dtype=np.float64).reshape(n_ag, 1))
        if self.obs_own_pos:
            columns.append(np.stack([self._x[:n_ag] / self.map_x, self._y[:n_ag] / self.map_y], axis=1))
        if self.conic_fov:
            columns.append(self.fov_directions)
        columns.append(self._type_onehot[:n_ag])
        return np.concatenate(columns, axis=1)

    def _obs_matrix(self) -> np.ndarray:
        """[n_agents, obs_size] float32; a dead agent sees zeros (but the timestep)."""
        obs = self._cache.get("obs")
        if obs is not None:
            return obs
        n_ag = self.n_agents
        parts = []
        if self.obs_starcraft:
            may_observe = self._tag_enemies()  # [n_agents, n_enemies]
            avail = self._avail_matrix()
            parts.append(avail[:, 2:2 + N_ACTIONS_MOVE].astype(np.float64))
            if self._n_surround:
                parts.append(self._surroundings())
            parts.append(self._enemy_features(self._true_avail_matrix(), may_observe).reshape(n_ag, -1))
            parts.append(self._ally_features().reshape(n_ag, -1))
            parts.append(self._own_features())
            parts = [np.concatenate(parts, axis=1) * self._alive[:n_ag, None]]
        if self.obs_timestep_number:
            parts.append(np.full((n_ag, 1), self._episode_steps / self.episode_limit))
        obs = np.concatenate(parts, axis=1) if parts else np.zeros((n_ag, 0))
        obs = self._cache["obs"] = obs.astype(np.float32)
        return obs

    # ---- state and capabilities ----------------------------------------------------------------------------
    def _state_vector(self) -> np.ndarray:
        parts = self.get_state_dict()
        pieces = [parts["allies"].ravel(), parts["enemies"].ravel()]
        if "last_action" in parts:
            pieces.append(parts["last_action"].ravel())
        if "timestep" in parts:
            pieces.append([parts["timestep"]])
        return np.concatenate(pieces)

    def get_state_dict(self) -> dict[str, Any]:
        """State parts as SMACv2 lays them out: allies [n_agents, nf_al] (health, cooldown or Medivac
        energy, position from the centre, shield, attack probability, field of view, type bits last),
        enemies [n_enemies, nf_en], last_action, timestep."""
        self._require_episode("get_state_dict()")
        n_ag = self.n_agents
        health, shield = self._fractions()
        rel_xy = ((self._xy - self._map_centre) / self._max_distance).T  # [n_units, 2]
        cd_source = np.where(self._is_heal_unit, self._energy, self._cooldown)
        ally = [health[:n_ag, None], (cd_source / self._max_cd)[:, None], rel_xy[:n_ag]]
        if self.shield_bits_ally:
            ally.append(shield[:n_ag, None])
        if self.stochastic_attack:
            ally.append(np.asarray(self.agent_attack_probabilities, dtype=np.float64).reshape(n_ag, 1))
        if self.conic_fov:
            ally.append(self.fov_directions)
        ally.append(self._type_onehot[:n_ag])
        enemy = [health[n_ag:, None], rel_xy[n_ag:]]
        if self.shield_bits_enemy:
            enemy.append(shield[n_ag:, None])
        enemy.append(self._type_onehot[n_ag:])
        parts = {"allies": np.concatenate(ally, axis=1) * self._alive[:n_ag, None],
                 "enemies": np.concatenate(enemy, axis=1) * self._alive[n_ag:, None]}
        if self.state_last_action:
            parts["last_action"] = self.last_action
        if self.state_timestep_number:
            parts["timestep"] = self._episode_steps / self.episode_limit
        return parts

    def get_capabilities_agent(self, agent_id: int) -> np.ndarray:
        """[cap_size] float32: attack probability (if drawn), then the unit-type bits."""
        return self.get_capabilities().reshape(self.n_agents, -1)[agent_id].copy()

    def get_capabilities(self) -> np.ndarray:
        """Every agent's capabilities, concatenated -> [n_agents * cap_size] float32."""
        columns = []
        if self.stochastic_attack:
            columns.append(np.asarray(self.agent_attack_probabilities, dtype=np.float64).reshape(self.n_agents, 1))
        columns.append(self._type_onehot[:self.n_agents])
        return np.concatenate(columns, axis=1).reshape(-1).astype(np.float32)

    # ---- sizes ---------------------------------------------------------------------------------------------
    def get_cap_size(self) -> int:
        return int(self.stochastic_attack) + self.unit_type_bits

    def get_obs_ally_capability_size(self) -> int:
        return self.get_cap_size()

    def get_obs_move_feats_size(self) -> int:
        return N_ACTIONS_MOVE + N_OBS_PATHING * self.obs_pathing_grid + N_OBS_HEIGHT * self.obs_terrain_height

    def get_obs_ally_feats_size(self) -> tuple[int, int]:
        nf_al = 4 + self.get_obs_ally_capability_size()
        if self.obs_all_health:
            nf_al += 1 + self.shield_bits_ally
        if self.obs_last_action:
            nf_al += self.n_actions
        return self.n_agents - 1, nf_al

    def get_obs_own_feats_size(self) -> int:
        size = self.get_cap_size()
        if self.obs_starcraft:
            size += (1 + self.shield_bits_ally) * self.obs_own_health + 2 * self.conic_fov + 2 * self.obs_own_pos
        return size

    def get_obs_size(self) -> int:
        if not self.obs_starcraft:
            return int(self.obs_timestep_number)
        n_en, nf_en = self.get_obs_enemy_feats_size()
        n_al, nf_al = self.get_obs_ally_feats_size()
        return (int(self.obs_timestep_number) + self.get_obs_move_feats_size() + n_en * nf_en + n_al * nf_al
                + self.get_obs_own_feats_size())

    def get_ally_num_attributes(self) -> int:
        return len(self.ally_state_attr_names) + len(self.capability_attr_names)

    # ---- misc ------------------------------------------------------------------------------------------------
    def get_env_info(self) -> dict[str, Any]:
        env_info = super().get_env_info()
        env_info["cap_shape"] = self.get_cap_size()
        env_info["agent_features"] = self.ally_state_attr_names + self.capability_attr_names
        return env_info

    def save_replay(self) -> str | None:
        """As StarCraft2Env; SMACv2 appends prob_obs_enemy to the replay's prefix."""
        prefix = self.replay_prefix
        self.replay_prefix = f"{prefix or self.map_name}_{self.prob_obs_enemy}"
        try:
            return super().save_replay()
        finally:
            self.replay_prefix = prefix


class StarCraftCapabilityEnvWrapper(StarCraft2EnvV2):
    """SMACv2's StarCraftCapabilityEnvWrapper: reset() draws the episode's teams and start
    positions from `capability_config` and plays them. `env` is the wrapped environment, as in
    SMACv2 (here the wrapper itself: one object, no delegation layer)."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        seed = kwargs.get("seed")
        self._distributions = make_distributions(
            self.capability_config, np.random.default_rng(None if seed is None else [int(seed), 2]))

    @property
    def env(self) -> "StarCraftCapabilityEnvWrapper":
        return self

    def reset(self, episode_config: dict | None = None) -> tuple[list[np.ndarray], np.ndarray]:
        """A new episode from a fresh draw (or from `episode_config`, SMACv2's format, if given)."""
        return super().reset(episode_config if episode_config is not None
                             else draw_episode_config(self._distributions))

"""SMACv2's game logic (envs/starcraft/interface/starcraft2_v2.py) against SMACv2's published definitions.

The expected layouts are derived here from SMACv2's definitions (oxwhirl/smacv2 starcraft2.py:
get_obs_size and its parts, get_state_size, build_obs_feature_names, build_state_feature_names),
written in our words: an enemy row is (shootable, distance, dx, dy, health, shield if Protoss, three
type bits); an ally row is (visible, distance, dx, dy, health, shield if Protoss, three type bits);
own features are (health, shield if Protoss, position x and y, type bits); the state has (health,
cooldown, x, y, shield if Protoss, type bits) per ally, (health, x, y, shield if Protoss, type bits)
per enemy and every agent's last action. Behaviour is checked on a scripted engine (smac_fakes).
"""
import numpy as np
import pytest

from envs.starcraft.interface.starcraft2_v2 import StarCraft2EnvV2, StarCraftCapabilityEnvWrapper
from envs.starcraft.game.teams import RACE_UNITS
from envs.starcraft.game.unit_ids import MEDIVAC, STOCK_ID_OF_NAME
from smac_fakes import GenFakeEngine

RACES = ("protoss", "terran", "zerg")
SIZES = ((5, 5), (10, 10), (20, 20), (10, 11), (20, 23))
# What SMACv2's sc2_gen_<race>.yaml and sc2_gen_<race>_epo.yaml set beyond the constructor's defaults.
PLAIN = {"use_unit_ranges": True, "min_attack_range": 2, "obs_own_pos": True, "conic_fov": False,
         "num_fov_actions": 12, "prob_obs_enemy": 1.0, "action_mask": True}
EPO = {**PLAIN, "prob_obs_enemy": 0.0, "action_mask": False}


def capability(race: str, n_units: int, n_enemies: int, start: dict | None = None) -> dict:
    weights = [0.45, 0.45, 0.1] if race != "zerg" else [0.45, 0.45, 0.1]
    config = {"n_units": n_units, "n_enemies": n_enemies,
              "team_gen": {"dist_type": "weighted_teams", "unit_types": list(RACE_UNITS[race]),
                           "weights": weights, "observe": True},
              "start_positions": start or {"dist_type": "surrounded_and_reflect", "p": 0.5,
                                           "map_x": 32, "map_y": 32}}
    if race == "zerg":
        config["team_gen"]["exception_unit_types"] = ["baneling"]
    return config


def expected_layout(race: str, n_units: int, n_enemies: int) -> tuple[int, int, int, list[str], list[str]]:
    """(obs size, state size, actions, obs names, state names) by SMACv2's definitions."""
    shield = race == "protoss"
    n_actions = 6 + n_enemies
    if race == "terran" and n_units > n_enemies:
        n_actions = 6 + n_units  # Medivacs address allies
    bits = ["bit_0", "bit_1", "bit_2"]
    obs = ["move_action_north", "move_action_south", "move_action_east", "move_action_west"]
    for e in range(n_enemies):
        obs += [f"enemy_{f}_{e}" for f in ("shootable", "distance", "relative_x", "relative_y", "health")]
        obs += [f"enemy_shield_{e}"] * shield + [f"enemy_unit_type_{e}_{b}" for b in bits]
    for a in range(1, n_units):
        obs += [f"ally_{f}_{a}" for f in ("visible", "distance", "relative_x", "relative_y", "health")]
        obs += [f"ally_shield_{a}"] * shield + [f"ally_unit_type_{a}_{b}" for b in bits]
    obs += ["own_health"] + ["own_shield"] * shield + ["own_pos_x", "own_pos_y"] + [f"own_unit_type_{b}" for b in bits]
    state = []
    for a in range(n_units):
        state += [f"ally_{f}_{a}" for f in ("health", "cooldown", "relative_x", "relative_y")]
        state += [f"ally_shield_{a}"] * shield + [f"ally_unit_type_{a}_{b}" for b in bits]
    for e in range(n_enemies):
        state += [f"enemy_{f}_{e}" for f in ("health", "relative_x", "relative_y")]
        state += [f"enemy_shield_{e}"] * shield + [f"enemy_unit_type_{e}_{b}" for b in bits]
    state += [f"ally_last_action_{a}_action_{k}" for a in range(n_units) for k in range(n_actions)]
    return len(obs), len(state), n_actions, obs, state


def make_env(race="protoss", n_units=5, n_enemies=5, settings=PLAIN, script=None, start=None, **extra):
    engine = GenFakeEngine(script)
    env = StarCraftCapabilityEnvWrapper(map_name=f"10gen_{race}", capability_config=capability(race, n_units, n_enemies, start),
                                        seed=3, engine=engine, **{**settings, **extra})
    return env, engine


@pytest.mark.parametrize("race", RACES)
@pytest.mark.parametrize("n_units,n_enemies", SIZES)
@pytest.mark.parametrize("settings", (PLAIN, EPO), ids=("plain", "epo"))
def test_sizes_and_feature_names_equal_smacv2s(race, n_units, n_enemies, settings):
    env, _ = make_env(race, n_units, n_enemies, settings)
    obs_size, state_size, n_actions, obs_names, state_names = expected_layout(race, n_units, n_enemies)
    info = env.get_env_info()
    assert (info["obs_shape"], info["state_shape"], info["n_actions"]) == (obs_size, state_size, n_actions)
    assert (info["n_agents"], info["episode_limit"], info["cap_shape"]) == (n_units, 200, 3)
    assert env.get_obs_feature_names() == obs_names
    assert env.get_state_feature_names() == state_names
    obs, state = env.reset()
    assert len(obs) == n_units and all(o.shape == (obs_size,) and o.dtype == np.float32 for o in obs)
    assert state.shape == (state_size,) and state.dtype == np.float32
    assert np.asarray(env.get_avail_actions()).shape == (n_units, n_actions)


def test_scenario_names_play_their_races_map():
    env = StarCraftCapabilityEnvWrapper(map_name="zerg_10_vs_11", capability_config=capability("zerg", 10, 11),
                                        engine=GenFakeEngine(), **PLAIN)
    assert env.map_type == "zerg_gen" and env.n_agents == 10 and env.n_enemies == 11


def test_conic_fov_adds_turn_actions_and_direction_features():
    env, _ = make_env("protoss", 5, 5, {**PLAIN, "conic_fov": True, "num_fov_actions": 8})
    assert env.n_actions == 6 + 8 + 5
    obs_size, state_size, _, _, _ = expected_layout("protoss", 5, 5)
    assert env.get_obs_size() == obs_size + 2  # own_fov_x, own_fov_y
    assert env.get_state_size() == state_size + 5 * 2 + 5 * 8  # fov per ally, larger last actions
    assert "own_fov_x" in env.get_obs_feature_names() and "ally_fov_y_4" in env.get_state_feature_names()


def scripted(race: str, allies: list[tuple[str, float, float]], enemies: list[tuple[str, float, float]], **settings):
    """An env whose reset creates exactly these units (name, x, y)."""
    env, engine = make_env(race, len(allies), len(enemies), {**PLAIN, **settings})
    config = {"team_gen": {"ally_team": [u[0] for u in allies], "enemy_team": [u[0] for u in enemies]},
              "ally_start_positions": {"item": np.array([u[1:] for u in allies])},
              "enemy_start_positions": {"item": np.array([u[1:] for u in enemies])}}
    env.reset(config)
    return env, engine


def enemy_block(env, agent: int) -> np.ndarray:
    """[n_enemies, nf_en] of an agent's observation."""
    n_en, nf = env.get_obs_enemy_feats_size()
    return env.get_obs_agent(agent)[4:4 + n_en * nf].reshape(n_en, nf)


def test_ranges_follow_the_unit_type_and_scale_the_observation():
    # Agents sort by type id: colossus (sight 10, range 7), stalker (10, 6), zealot (9, 2: min_attack_range).
    # (Each agent sees one enemy first; hide_only_unobserved_enemies keeps the lottery's order out of it.)
    env, _ = scripted("protoss", [("zealot", 10, 10), ("stalker", 10, 20), ("colossus", 10, 30)],
                      [("zealot", 16.5, 30), ("zealot", 19, 20), ("stalker", 11.9, 10)],
                      hide_only_unobserved_enemies=True)
    assert [env.unit_shoot_range(a) for a in range(3)] == [7, 6, 2]
    assert [env.unit_sight_range(a) for a in range(3)] == [10, 10, 9]
    colossus, stalker, zealot = (enemy_block(env, a) for a in range(3))
    # The colossus sees enemy 0 at 6.5 (shootable within 7); the stalker sees enemy 1 at 9 < 10, not
    # shootable; the zealot sees enemy 2 at 1.9, shootable within its raised range 2.
    assert colossus[0, :4] == pytest.approx([1, 0.65, 0.65, 0])
    assert stalker[1, :4] == pytest.approx([0, 0.9, 0.9, 0])
    assert zealot[2, :4] == pytest.approx([1, 1.9 / 9, 1.9 / 9, 0])
    avail = np.asarray(env.get_avail_actions())
    assert avail[:, 6:].tolist() == [[1, 0, 0], [0, 0, 0], [0, 0, 1]]


def test_type_bits_use_smacv2s_race_order():
    env, _ = scripted("zerg", [("baneling", 5, 5), ("zergling", 5, 8), ("hydralisk", 5, 11)],
                      [("hydralisk", 25, 5), ("baneling", 25, 8), ("zergling", 25, 11)])
    own = env.get_obs_agent(0)[-3:]
    names = ["zergling", "hydralisk", "baneling"]
    # Agents sort by RL id, i.e. alphabetically: baneling, hydralisk, zergling.
    assert [names[int(np.argmax(env.get_obs_agent(a)[-3:]))] for a in range(3)] == ["baneling", "hydralisk", "zergling"]
    assert own.tolist() == [0, 0, 1]
    enemy_state = env.get_state_dict()["enemies"]
    assert enemy_state[:, -3:].argmax(axis=1).tolist() == [1, 2, 0]  # stock hydralisk, baneling, zergling


def test_first_sighting_tags_and_prob_zero_hides_the_enemy_from_everyone_else():
    # Both agents are within sight of the enemy; with prob_obs_enemy=0 only the one that tags it sees it.
    env, _ = scripted("terran", [("marine", 10, 10), ("marine", 10, 12)], [("marine", 14, 11)],
                      prob_obs_enemy=0.0)
    seen = [enemy_block(env, a)[0, 1] > 0 for a in range(2)]
    assert sorted(seen) == [False, True]
    tagger = int(env.enemy_tags[0])
    assert seen[tagger]
    env2, _ = scripted("terran", [("marine", 10, 10), ("marine", 10, 12)], [("marine", 14, 11)], prob_obs_enemy=1.0)
    assert all(enemy_block(env2, a)[0, 1] > 0 for a in range(2))


def test_an_unobserved_enemy_wipes_the_features_of_the_enemies_before_it():
    # Enemy 0 is near; enemy 1 is out of everyone's sight, so nobody may observe it (SMACv2 issue 50).
    units = ([("marine", 10, 10)], [("marine", 14, 10), ("marine", 30, 30)])
    env, _ = scripted("terran", *units)
    assert not enemy_block(env, 0).any()
    fixed, _ = scripted("terran", *units, hide_only_unobserved_enemies=True)
    assert enemy_block(fixed, 0)[0, 1] == pytest.approx(4 / 9)
    # With the far enemy first, the near one after it stays visible even in SMACv2's way.
    env, _ = scripted("terran", [("marine", 10, 10)], [("marine", 30, 30), ("marine", 14, 10)])
    assert enemy_block(env, 0)[1, 1] == pytest.approx(4 / 9)


def test_without_action_mask_every_living_enemy_is_offered_and_an_attack_out_of_range_gives_no_order():
    env, engine = scripted("terran", [("marine", 10, 10)], [("marine", 14, 10), ("marine", 30, 30)], action_mask=False)
    assert env.get_avail_agent_actions(0)[6:] == [1, 1]
    assert enemy_block(env, 0)[:, 0].tolist() == [0, 0]  # "shootable" stays the true range test (wiped row 0 too)
    env.step([7])  # attack the far enemy: out of range, no order
    env.step([6])  # the near one, in range: an attack order
    kinds = [int(orders[0][0]) for orders in engine.orders]
    assert kinds == [0, 3]


def test_own_position_and_state_rows():
    env, _ = scripted("protoss", [("stalker", 8, 24)], [("zealot", 20, 4)])
    obs = env.get_obs_agent(0)
    names = env.get_obs_feature_names()
    assert obs[names.index("own_pos_x")] == pytest.approx(8 / 32)
    assert obs[names.index("own_pos_y")] == pytest.approx(24 / 32)
    state = dict(zip(env.get_state_feature_names(), env.get_state()))
    assert state["ally_relative_x_0"] == pytest.approx((8 - 16) / env.max_distance_x)
    assert state["ally_shield_0"] == 1.0 and state["ally_unit_type_0_bit_0"] == 1.0
    assert state["enemy_unit_type_0_bit_1"] == 1.0


def test_medivacs_heal_allies_and_a_side_of_medivacs_only_has_lost():
    allies = [("marine", 10, 10), ("marine", 10, 12), ("medivac", 11, 11)]
    env, engine = scripted("terran", allies, [("marine", 25, 10), ("marine", 25, 12)])
    assert env.n_actions == 6 + 3  # more agents than enemies: target slots for every agent
    medivac = 2  # sorted by RL id: marine, marine, medivac
    engine.units.health[0] = 20.0
    assert env.get_avail_agent_actions(medivac)[6:] == [1, 1, 0]
    engine.script = lambda n, units: _kill_rows(units, [0, 1])
    _, terminated, info = env.step([1, 1, 1])
    assert terminated and not info["battle_won"]
    assert env.only_medivac_left(ally=True)


def _kill_rows(units, rows):
    for row in rows:
        units.kill(row)
    return units


def test_max_reward_counts_the_first_episodes_enemies():
    env, _ = scripted("protoss", [("stalker", 10, 10)], [("colossus", 20, 10)])
    assert env.max_reward == 1 * 10 + 200 + 200 + 150


def test_enemy_medivac_id_ends_the_battle_when_only_medivacs_remain():
    env, engine = scripted("terran", [("marine", 10, 10)], [("marine", 25, 10), ("medivac", 25, 12)])
    assert int(engine.units.unit_type[2]) == MEDIVAC
    engine.script = lambda n, units: _kill_rows(units, [1])
    _, terminated, info = env.step([1])
    assert terminated and info["battle_won"]


def test_the_wrapper_draws_teams_of_the_race_and_repeats_with_the_seed():
    def episodes(seed):
        env, engine = make_env("zerg", 5, 5, PLAIN)
        env._distributions = type(env)(map_name="10gen_zerg", capability_config=capability("zerg", 5, 5), seed=seed,
                                       engine=GenFakeEngine(), **PLAIN)._distributions
        for _ in range(6):
            env.reset()
        return [(t.ally_units, t.enemy_units, t.ally_xy) for t in engine.teams]

    first, again, other = episodes(1), episodes(1), episodes(2)
    assert first == again and first != other
    assert all(set(allies) <= set(RACE_UNITS["zerg"]) and set(allies) != {"baneling"} for allies, _, _ in first)
    assert all(enemies[:5] == allies for allies, enemies, _ in first)  # n_enemies == n_units: the same team


def test_fixed_points_without_start_positions_and_plain_env_needs_a_team():
    env = StarCraftCapabilityEnvWrapper(map_name="10gen_protoss", engine=GenFakeEngine(),
                                        capability_config={k: v for k, v in capability("protoss", 2, 2).items()
                                                           if k != "start_positions"}, **PLAIN)
    env.reset()
    team = env._engine.teams[-1]
    assert team.ally_xy == ((8.0, 16.0),) * 2 and team.enemy_xy == ((24.0, 16.0),) * 2
    bare = StarCraft2EnvV2(map_name="10gen_protoss", engine=GenFakeEngine(), capability_config=capability("protoss", 2, 2))
    with pytest.raises(ValueError, match="team_gen"):
        bare.reset()


def test_smacv2_maps_and_keys_are_refused_where_they_do_not_belong():
    from envs.starcraft.interface.starcraft2 import StarCraft2Env

    with pytest.raises(ValueError, match="SMACv2 map"):
        StarCraft2Env(map_name="protoss_5_vs_5", backend="builtin")
    with pytest.raises(ValueError, match="not a SMACv2 map"):
        StarCraftCapabilityEnvWrapper(map_name="3m", capability_config=capability("protoss", 5, 5), **PLAIN)


def test_stock_ids_of_enemies_and_rl_ids_of_allies():
    env, engine = scripted("protoss", [("stalker", 10, 10)], [("stalker", 20, 10)])
    types = env.get_unit_types()
    assert types == [engine.ally_unit_ids["stalker"], STOCK_ID_OF_NAME["stalker"]]


def visible_enemies(env, agent: int = 0) -> list[int]:
    return np.flatnonzero(enemy_block(env, agent)[:, 1] > 0).tolist()


def test_conic_field_of_view_turns_with_its_actions_and_looks_backwards_as_smacv2s():
    # Enemies north (0), west (1) and east (2) of the agent, 5 away; the cone starts facing east.
    env, _ = scripted("terran", [("marine", 10, 10)], [("marine", 10, 15), ("marine", 5, 10), ("marine", 15, 10)],
                      conic_fov=True)
    # SMACv2's arctan test cannot tell east from west: both are in the cone; north is not.
    assert visible_enemies(env) == [1, 2]
    assert env.get_avail_agent_actions(0)[6:18] == [1] * 12
    env.step([6 + 3])  # turn to direction 3 of 12: north
    assert env.fov_directions[0] == pytest.approx([0, 1])
    assert visible_enemies(env) == [0]
    state = dict(zip(env.get_state_feature_names(), env.get_state()))
    assert (state["ally_fov_x_0"], state["ally_fov_y_0"]) == pytest.approx((0, 1))


@pytest.mark.parametrize("probability,orders", [(0.0, 0), (1.0, 3)])
def test_attack_probabilities_decide_whether_an_attack_is_made(probability, orders):
    engine = GenFakeEngine()
    config = capability("terran", 1, 1)
    config["attack"] = {"dist_type": "per_agent_uniform", "lower_bound": [probability], "upper_bound": [probability],
                        "observe": True}
    env = StarCraftCapabilityEnvWrapper(map_name="10gen_terran", capability_config=config, seed=0, engine=engine, **PLAIN)
    env.reset({"team_gen": {"ally_team": ["marine"], "enemy_team": ["marine"]},
               "ally_start_positions": {"item": np.array([[10.0, 10.0]])},
               "enemy_start_positions": {"item": np.array([[13.0, 10.0]])},
               "attack": {"item": np.array([[probability]])}})
    assert env.get_obs_agent(0)[env.get_obs_feature_names().index("own_attack_prob")] == probability
    assert env.get_capabilities().tolist() == [probability, 1, 0, 0]
    for _ in range(3):
        env.step([6])
    assert sum(int(kind[0]) == 3 for kind, *_ in engine.orders) == orders


class _FixedOrder:
    """Stands in for the env's observation generator: agents in a given order, every draw 0 (a
    prob_obs_enemy of 1 then grants every draw)."""

    def __init__(self, order):
        self.order = np.array(order)

    def permutation(self, n):
        return self.order.copy()

    def random(self, size):
        return np.zeros(size)


@pytest.mark.parametrize("order,first_sees", [([0, 1], []), ([1, 0], [0])])
def test_an_agent_sees_the_lottery_as_it_stood_at_its_turn(order, first_sees):
    # Agent 0 sees enemy 0; agent 1 sees both. Both enemies are untagged at the reset.
    env, _ = scripted("terran", [("marine", 10, 10), ("marine", 20, 10)], [("marine", 12, 10), ("marine", 22, 10)],
                      use_unit_ranges=False)
    env._cache.clear()
    env._reset_episode_draws({})
    env._obs_rng = _FixedOrder(order)
    # Agent 0 first: it tags enemy 0, but enemy 1 is not tagged yet, so SMACv2 wipes its enemy block;
    # agent 1 first: it tags both, agent 0 is granted both and sees enemy 0.
    assert visible_enemies(env, 0) == first_sees
    assert visible_enemies(env, 1) == [0, 1]


def test_enemies_regenerating_pay_nothing_with_reward_only_positive():
    env, engine = scripted("protoss", [("stalker", 10, 10)], [("stalker", 25, 10)])
    engine.units.shield[1] = 70.0
    env.init_units(engine.units)  # the enemy starts the step with 70 shield

    def regenerate(n, units):
        units.shield[1] = 71.0
        return units
    engine.script = regenerate
    reward, _, _ = env.step([1])
    assert reward == 0  # SMACv2 clips at 0; SMAC's absolute value would pay 1 / (max_reward / 20)

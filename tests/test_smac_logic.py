"""SMAC game logic (envs/starcraft/interface/starcraft2.py) driven by scripted fake engines.

Expected numbers come from the SMAC facts sheet (§8 size table, §13 golden vectors) or are
recomputed here from SMAC's formulas, independently of the implementation.
"""
import itertools

import numpy as np
import pytest

from envs.starcraft.game import unit_ids as ids
from envs.starcraft.game.maps import MAP_REGISTRY, get_map_params
from envs.starcraft.interface.starcraft2 import (ORDER_ATTACK, ORDER_HEAL, ORDER_MOVE, ORDER_NONE, ORDER_STOP,
                                       StarCraft2Env)
from smac_fakes import FakeEngine, make_units, spawn_army

# Facts sheet §8: map -> (n_actions, obs_shape, state_shape) with PyMARL2's sc2.yaml defaults.
SIZE_TABLE = {
    "3m": (9, 30, 48), "8m": (14, 80, 168), "25m": (31, 250, 950), "5m_vs_6m": (12, 55, 98),
    "8m_vs_9m": (15, 85, 179), "10m_vs_11m": (17, 105, 243), "27m_vs_30m": (36, 285, 1170),
    "MMM": (16, 160, 290), "MMM2": (18, 176, 322), "2s3z": (11, 80, 120), "3s5z": (14, 128, 216),
    "3s5z_vs_3s6z": (15, 136, 230), "3s_vs_3z": (9, 36, 54), "3s_vs_4z": (10, 42, 61),
    "3s_vs_5z": (11, 48, 68), "1c3s5z": (15, 162, 270), "2m_vs_1z": (7, 16, 26),
    "corridor": (30, 156, 282), "6h_vs_8z": (14, 78, 140), "2s_vs_1sc": (7, 17, 27),
    "so_many_baneling": (38, 202, 397), "bane_vs_bane": (30, 336, 984), "2c_vs_64zg": (70, 332, 342),
}
FLAGS = ("obs_all_health", "obs_own_health", "obs_last_action", "obs_pathing_grid", "obs_terrain_height",
         "obs_instead_of_state", "obs_timestep_number", "state_last_action", "state_timestep_number")


def formula_sizes(map_name: str, flags: dict) -> tuple[int, int]:
    """SMAC's obs/state size formulas (facts §4/§5), written out independently."""
    p = get_map_params(map_name)
    utb, n_actions = p.unit_type_bits, 6 + p.n_enemies
    sa, se = int(p.a_race == "P"), int(p.b_race == "P")
    own_health = flags["obs_own_health"] or flags["obs_all_health"]
    move = 4 + 8 * flags["obs_pathing_grid"] + 9 * flags["obs_terrain_height"]
    nf_en = 4 + utb + (1 + se) * flags["obs_all_health"]
    nf_al = 4 + utb + (1 + sa) * flags["obs_all_health"] + n_actions * flags["obs_last_action"]
    own = utb + (1 + sa) * own_health + flags["obs_timestep_number"]
    obs = move + p.n_enemies * nf_en + (p.n_agents - 1) * nf_al + own
    if flags["obs_instead_of_state"]:
        return obs, obs * p.n_agents
    state = p.n_agents * (4 + sa + utb) + p.n_enemies * (3 + se + utb)
    state += p.n_agents * n_actions * flags["state_last_action"] + flags["state_timestep_number"]
    return obs, state


def all_flag_combos():
    return [dict(zip(FLAGS, values)) for values in itertools.product([False, True], repeat=len(FLAGS))]


# ---- (1) sizes ----------------------------------------------------------------------------------
def test_registry_has_smac_23_maps():
    assert sorted(MAP_REGISTRY) == sorted(SIZE_TABLE)


@pytest.mark.parametrize("map_name", sorted(SIZE_TABLE))
def test_default_sizes_match_facts_table(map_name):
    env = StarCraft2Env(map_name=map_name, engine=object())
    info = env.get_env_info()
    assert (info["n_actions"], info["obs_shape"], info["state_shape"]) == SIZE_TABLE[map_name]
    assert info["n_agents"] == MAP_REGISTRY[map_name].n_agents
    assert info["episode_limit"] == MAP_REGISTRY[map_name].limit
    assert len(info["agent_features"]) * info["n_agents"] + len(info["enemy_features"]) * env.n_enemies \
        + info["n_agents"] * info["n_actions"] == info["state_shape"]


@pytest.mark.parametrize("map_name", ["3m", "2s3z", "MMM", "2m_vs_1z", "6h_vs_8z", "bane_vs_bane", "1c3s5z"])
def test_sizes_follow_formulas_for_all_flag_combinations(map_name):
    for flags in all_flag_combos():
        env = StarCraft2Env(map_name=map_name, engine=object(), **flags)
        assert (env.get_obs_size(), env.get_state_size()) == formula_sizes(map_name, flags), flags
        assert env.get_total_actions() == env.n_actions == 6 + env.n_enemies


def test_sizes_follow_formulas_on_every_map_for_a_flag_sample():
    rng = np.random.default_rng(0)
    combos = all_flag_combos()
    for map_name in SIZE_TABLE:
        for k in rng.choice(len(combos), size=12, replace=False):
            env = StarCraft2Env(map_name=map_name, engine=object(), **combos[k])
            assert (env.get_obs_size(), env.get_state_size()) == formula_sizes(map_name, combos[k])


@pytest.mark.parametrize("map_name", ["3m", "2s3z", "MMM", "2m_vs_1z"])
def test_produced_arrays_have_the_reported_sizes(map_name):
    rng = np.random.default_rng(1)
    combos = all_flag_combos()
    for k in rng.choice(len(combos), size=24, replace=False):
        flags = combos[k]
        env = StarCraft2Env(map_name=map_name, engine=FakeEngine(spawn_army(map_name)), **flags)
        obs, state = env.reset()
        # obs_timestep_number: SMAC's real obs is one longer than get_obs_size() (facts §4 quirk).
        extra = int(flags["obs_timestep_number"])
        assert all(o.shape == (env.get_obs_size() + extra,) and o.dtype == np.float32 for o in obs)
        state_extra = extra * env.n_agents if flags["obs_instead_of_state"] else 0
        assert state.shape == (env.get_state_size() + state_extra,) and state.dtype == np.float32


# ---- (2) golden vectors (facts §13) -----------------------------------------------------------------
STALKER_RL, ZEALOT_RL = 1000, 1001


def golden_2s3z_units(start: bool):
    """The §13 hand-made 2s3z units; `start` = the state before one step that leads to them.

    Engine ally order is shuffled (engine rows hold agents 4, 2, 0, 3, 1) to exercise sorting.
    """
    agents = [
        {"type": STALKER_RL, "x": 9, "y": 16, "hp": 80, "sh": 40, "cd": 10},
        {"type": STALKER_RL, "x": 9, "y": 22.5, "hp": 60, "sh": 0},
        {"type": ZEALOT_RL, "x": 10, "y": 15, "hp": 100, "sh": 50},
        {"type": ZEALOT_RL, "x": 11, "y": 16, "dead": True},
        {"type": ZEALOT_RL, "x": 12, "y": 16, "hp": 50, "sh": 25, "cd": 5.5},
    ]
    enemies = [
        {"type": ids.STALKER, "x": 14, "y": 16},
        {"type": ids.STALKER, "x": 14.5 if start else 17.5, "y": 16, "hp": 40, "sh": 0},
        {"type": ids.ZEALOT, "x": 15, "y": 20},
        {"type": ids.ZEALOT, "x": 18.5, "y": 16},
        {"type": ids.ZEALOT, "x": 20, "y": 16, "dead": not start},
    ]
    return make_units([agents[i] for i in (4, 2, 0, 3, 1)], enemies)


@pytest.fixture
def golden_env():
    end = golden_2s3z_units(start=False)
    engine = FakeEngine(golden_2s3z_units(start=True), script=lambda n, units: end.copy())
    env = StarCraft2Env(map_name="2s3z", engine=engine)
    env.reset()
    env.step([7, 1, 2, 0, 6])
    return env, engine


def test_golden_sizes_and_avail(golden_env):
    env, _ = golden_env
    assert (env.get_obs_size(), env.get_state_size(), env.n_actions) == (80, 120, 11)
    assert env.get_avail_actions() == [
        [0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0], [0, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0],
        [0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        [0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0],
    ]


def test_golden_orders_reach_the_engine_in_its_ally_order(golden_env):
    _, engine = golden_env
    kind, tx, ty, target = engine.orders[0]
    # Engine rows hold agents 4, 2, 0, 3, 1 with actions 6, 2, 7, 0, 1.
    assert kind.tolist() == [ORDER_ATTACK, ORDER_MOVE, ORDER_ATTACK, ORDER_NONE, ORDER_STOP]
    assert target[[0, 2]].tolist() == [5 + 0, 5 + 1]
    assert (tx[1], ty[1]) == (10, 17)  # agent 2 starts at (10, 15): north by move_amount


def test_golden_observation_of_agent_0(golden_env):
    env, _ = golden_env
    obs = env.get_obs_agent(0)
    expected = np.array(
        [1, 1, 1, 1]
        + [1, .5556, .5556, 0, 1, 1, 0, 1] + [0, .9444, .9444, 0, .5, 0, 0, 1]
        + [0, .8012, .6667, .4444, 1, 1, 1, 0] + [0] * 16
        + [1, .7222, 0, .7222, .75, 0, 1, 0] + [1, .1571, .1111, -.1111, 1, 1, 0, 1] + [0] * 8
        + [1, .3333, .3333, 0, .5, .5, 0, 1]
        + [1, .5, 1, 0])
    np.testing.assert_allclose(obs, expected, atol=1e-4)
    assert obs.dtype == np.float32
    np.testing.assert_array_equal(env.get_obs()[3], np.zeros(80))


def test_golden_state_with_last_actions(golden_env):
    env, _ = golden_env
    state = env.get_state()
    allies = [[1, .2857, -.2188, 0, .5, 1, 0], [.75, 0, -.2188, .2031, 0, 1, 0],
              [1, 0, -.1875, -.0312, 1, 0, 1], [0] * 7, [.5, .25, -.125, 0, .5, 0, 1]]
    enemies = [[1, -.0625, 0, 1, 0, 1], [.5, .0469, 0, 0, 0, 1], [1, -.0312, .125, 1, 1, 0],
               [1, .0781, 0, 1, 1, 0], [0] * 6]
    last = np.eye(11)[[7, 1, 2, 0, 6]]
    expected = np.concatenate([np.ravel(allies), np.ravel(enemies), last.ravel()])
    np.testing.assert_allclose(state, expected, atol=1e-4)


def marines(positions, dead=(), hp=None):
    hp = hp or {}
    return [{"type": t, "x": x, "y": y, "hp": hp.get(i, 45), "dead": i in dead}
            for i, (t, x, y) in enumerate(positions)]


def three_m(ally_hp=None, enemy_hp=None, enemy_dead=(), ally_dead=()):
    allies = marines([(ids.MARINE_RL, 9, 14 + 2 * i) for i in range(3)], ally_dead, ally_hp)
    enemies = marines([(ids.MARINE, 13, 14 + 2 * i) for i in range(3)], enemy_dead, enemy_hp)
    return make_units(allies, enemies)


def test_golden_reward_example_on_3m():
    after = three_m(ally_hp={0: 33}, enemy_hp={0: 39}, enemy_dead=(1,))
    env = StarCraft2Env(map_name="3m", engine=FakeEngine(three_m(), script=lambda n, u: after.copy()))
    env.reset()
    assert env.max_reward == 365
    reward, terminated, info = env.step([1, 1, 1])
    assert reward == pytest.approx(61 / 18.25) and round(reward, 4) == 3.3425
    assert not terminated and info == {"battle_won": False, "dead_allies": 0, "dead_enemies": 1}

    env = StarCraft2Env(map_name="3m", reward_only_positive=False,
                        engine=FakeEngine(three_m(), script=lambda n, u: after.copy()))
    env.reset()
    assert env.step([1, 1, 1])[0] == pytest.approx((61 - 0.5 * 12) / 18.25)


def test_quirk_3m_timestep_number_obs_is_one_longer():
    env = StarCraft2Env(map_name="3m", obs_timestep_number=True, engine=FakeEngine(three_m()))
    env.reset()
    env.step([1, 1, 1])
    obs = env.get_obs_agent(0)
    assert env.get_obs_size() == 31 and obs.shape == (32,)
    assert obs[30] == 0 and obs[31] == pytest.approx(1 / 60)


def mmm_units(medivac_energy=80.0):
    """MMM armies with every ally within 6 of the Medivac (ally rows in creation order)."""
    allies = [{"type": ids.MARAUDER_RL, "x": 9 + 0.5 * i, "y": 13} for i in range(2)]
    allies += [{"type": ids.MARINE_RL, "x": 8 + 0.5 * i, "y": 18, "cd": 3.0} for i in range(7)]
    allies.append({"type": ids.MEDIVAC_RL, "x": 10, "y": 16, "energy": medivac_energy})
    enemies = [{"type": t, "x": 20, "y": 10 + i} for i, t in
               enumerate([ids.MARINE] * 7 + [ids.MARAUDER] * 2 + [ids.MEDIVAC])]
    return make_units(allies, enemies)


def test_quirk_mmm_medivac_heal_slots_and_energy_state():
    engine = FakeEngine(mmm_units())
    env = StarCraft2Env(map_name="MMM", engine=engine)
    env.reset()
    # Agents are sorted by type: Marauders 0-1, Marines 2-8, the Medivac is agent 9.
    assert env.get_unit_types()[:10] == [ids.MARAUDER_RL] * 2 + [ids.MARINE_RL] * 7 + [ids.MEDIVAC_RL]
    assert env.get_avail_agent_actions(9) == [0, 1, 1, 1, 1, 1] + [1] * 9 + [0]
    state = env.get_state().reshape(-1)[: 10 * 7].reshape(10, 7)  # ally rows [health, cd, x, y, 3 type bits]
    assert state[9, 1] == pytest.approx(80 / 200)
    assert state[2, 1] == pytest.approx(3 / 15)
    np.testing.assert_array_equal(state[9, 4:], [0, 0, 1])
    env.step([1] * 9 + [6 + 3])  # the Medivac heals agent 3 = engine row 3 (Marines keep creation order)
    kind, _, _, target = engine.orders[0]
    assert kind[9] == ORDER_HEAL and target[9] == 3


def test_mmm_ends_when_only_medivacs_remain():
    def allies_dead(n, units):
        for row in range(9):
            units.kill(row)
        return units

    env = StarCraft2Env(map_name="MMM", engine=FakeEngine(mmm_units(), script=allies_dead))
    env.reset()
    _, terminated, info = env.step([1] * 10)
    assert terminated and not info["battle_won"]

    def enemies_but_medivac_dead(n, units):
        for row in range(10, 19):
            units.kill(row)
        return units

    env = StarCraft2Env(map_name="MMM", engine=FakeEngine(mmm_units(), script=enemies_but_medivac_dead))
    env.reset()
    _, terminated, info = env.step([1] * 10)
    assert terminated and info["battle_won"]


# ---- (3) reward bookkeeping ---------------------------------------------------------------------------
def kill_one_enemy_per_step(n, units):
    """Step 1 hurts enemy 0, then one enemy dies per step (3m: won at step 4)."""
    if n == 1:
        units.health[3] -= 20
    else:
        units.kill(3 + n - 2)
    return units


def test_won_3m_episode_returns_reward_scale_rate():
    env = StarCraft2Env(map_name="3m", engine=FakeEngine(three_m(), script=kill_one_enemy_per_step))
    for _ in range(2):
        env.reset()
        rewards, terminated, info = [], False, {}
        while not terminated:
            reward, terminated, info = env.step([1, 1, 1])
            rewards.append(reward)
        assert info["battle_won"] and len(rewards) == 4
        assert sum(rewards) == pytest.approx(20.0)
    assert env.get_stats() == {"battles_won": 2, "battles_game": 2, "battles_draw": 0, "win_rate": 1.0,
                               "timeouts": 0, "restarts": 0}
    assert env.max_reward == 365  # computed once, not per reset


def test_only_positive_rewards_are_never_negative():
    def trade(n, units):  # allies lose health, enemies regenerate shields or take damage
        units.health[n % 5] = max(units.health[n % 5] - 7, 1)
        units.shield[5 + n % 5] = min(units.shield[5 + n % 5] + (3 if n % 2 else -9), 50)
        return units

    env = StarCraft2Env(map_name="2s3z", engine=FakeEngine(spawn_army("2s3z"), script=trade))
    env.reset()
    rewards = [env.step([1] * 5)[0] for _ in range(20)]
    assert min(rewards) >= 0 and max(rewards) > 0

    env = StarCraft2Env(map_name="2s3z", reward_only_positive=False,
                        engine=FakeEngine(spawn_army("2s3z"), script=trade))
    env.reset()
    assert min(env.step([1] * 5)[0] for _ in range(20)) < 0


def test_sparse_rewards_win_loss_and_zero_in_between():
    env = StarCraft2Env(map_name="3m", reward_sparse=True, reward_scale=False,
                        engine=FakeEngine(three_m(), script=kill_one_enemy_per_step))
    env.reset()
    assert [env.step([1, 1, 1])[0] for _ in range(4)] == [0, 0, 0, 1]

    def lose(n, units):
        for row in range(3):
            units.kill(row)
        return units

    env = StarCraft2Env(map_name="3m", reward_sparse=True, engine=FakeEngine(three_m(), script=lose))
    env.reset()
    reward, terminated, info = env.step([1, 1, 1])
    assert terminated and not info["battle_won"] and reward == pytest.approx(-1 / (365 / 20))


def test_time_limit_terminates_and_flags_only_with_continuing_episode():
    for continuing in (False, True):
        env = StarCraft2Env(map_name="3m", continuing_episode=continuing, engine=FakeEngine(three_m()))
        env.reset()
        results = [env.step([1, 1, 1]) for _ in range(60)]
        assert [t for _, t, _ in results] == [False] * 59 + [True]
        assert results[-1][2].get("episode_limit", False) == continuing
        assert env.get_stats()["timeouts"] == 1 and env.get_stats()["win_rate"] == 0


# ---- (4) availability ---------------------------------------------------------------------------------
def test_availability_matches_brute_force_on_random_states():
    rng = np.random.default_rng(3)
    for _ in range(30):
        xs, ys = rng.uniform(0, 32, 6), rng.uniform(6, 26, 6)
        dead = set(np.flatnonzero(rng.random(6) < 0.3).tolist())
        units = make_units(marines([(ids.MARINE_RL, xs[i], ys[i]) for i in range(3)], dead & {0, 1, 2}),
                           marines([(ids.MARINE, xs[i], ys[i]) for i in range(3, 6)], {d - 3 for d in dead}))
        env = StarCraft2Env(map_name="3m", engine=FakeEngine(units))
        env.reset()
        avail = np.array(env.get_avail_actions())
        order = env.agents
        for a_id, unit in order.items():
            if unit.health == 0:
                assert avail[a_id].tolist() == [1] + [0] * 8
                continue
            assert avail[a_id, 0] == 0 and avail[a_id, 1] == 1
            for d, (mx, my) in enumerate([(0, 1), (0, -1), (1, 0), (-1, 0)]):
                cx, cy = int(unit.pos.x + mx), int(unit.pos.y + my)
                assert avail[a_id, 2 + d] == int(0 <= cx < 32 and 8 <= cy < 24)
            for e_id, enemy in env.enemies.items():
                dist = np.hypot(enemy.pos.x - unit.pos.x, enemy.pos.y - unit.pos.y)
                in_range = enemy.health > 0 and dist <= 6
                assert avail[a_id, 6 + e_id] == int(in_range)


def test_attack_range_is_inclusive_and_unavailable_actions_assert():
    units = make_units(marines([(ids.MARINE_RL, 9, 16), (ids.MARINE_RL, 9, 12), (ids.MARINE_RL, 9, 20)]),
                       marines([(ids.MARINE, 15, 16), (ids.MARINE, 15.01, 16), (ids.MARINE, 9, 10)]))
    env = StarCraft2Env(map_name="3m", engine=FakeEngine(units))
    env.reset()
    # Agents sorted by y: 0 = (9, 12), 1 = (9, 16), 2 = (9, 20); distance exactly 6 is in range.
    assert env.get_avail_agent_actions(1)[6:] == [1, 0, 1]
    assert env.get_avail_agent_actions(0)[6:] == [0, 0, 1]
    with pytest.raises(AssertionError, match="Agent 2 cannot perform action 6"):
        env.step([1, 1, 6])
    with pytest.raises(ValueError, match="out of range"):
        env.step([1, 1, 9])


def test_dead_agents_get_only_noop_and_visibility_needs_both_alive():
    env = StarCraft2Env(map_name="3m", engine=FakeEngine(three_m(ally_dead=(1,), enemy_dead=(2,))))
    env.reset()
    assert env.get_avail_agent_actions(1) == [1] + [0] * 8
    np.testing.assert_array_equal(env.get_obs_agent(1), np.zeros(30))
    vis = env.get_visibility_matrix()
    assert vis.shape == (3, 6) and vis.dtype == bool
    assert vis.tolist() == [[False, False, True, True, True, False], [False] * 6,
                            [True, False, False, True, True, False]]


def test_pathing_height_last_action_and_timestep_features():
    units = make_units(marines([(ids.MARINE_RL, 9.5, 9.5), (ids.MARINE_RL, 0.5, 12), (ids.MARINE_RL, 9, 16)]),
                       marines([(ids.MARINE, 20, 16)] * 3))
    engine = FakeEngine(units)
    engine.terrain_height[9, 9] = 0.25
    env = StarCraft2Env(map_name="3m", obs_pathing_grid=True, obs_terrain_height=True, obs_last_action=True,
                        state_timestep_number=True, engine=engine)
    env.reset()
    env.step([2, 3, 1])  # agents sorted by x: 0 = (0.5, 12), 1 = (9, 16), 2 = (9.5, 9.5)
    obs = env.get_obs_agent(2)
    # Probes from (9, 9): (9,13) (9,5) (13,9) (5,9) (11,11) (7,7) (11,7) (7,11); band rows y 8..23.
    np.testing.assert_array_equal(obs[4:12], [1, 0, 1, 1, 1, 0, 0, 1])
    np.testing.assert_array_equal(obs[12:21], [0.5] * 8 + [0.25])
    # Agent 0's probes from (0, 12) to x < 0 leave the map: out of bounds reads 1.
    np.testing.assert_array_equal(env.get_obs_agent(0)[4:12], [1, 1, 1, 1, 1, 1, 1, 1])
    # Ally rows of agent 2 (allies 0 and 1): agent 0 at distance > 9 is hidden, agent 1 shows its last action.
    ally_start, nf_al = 21 + 3 * 5, 5 + 9
    np.testing.assert_array_equal(obs[ally_start:ally_start + nf_al], np.zeros(nf_al))
    np.testing.assert_array_equal(obs[ally_start + nf_al + 5:ally_start + 2 * nf_al], np.eye(9)[3])
    assert env.get_state()[-1] == pytest.approx(1 / 60)


# ---- heuristic AI --------------------------------------------------------------------------------------
def test_heuristic_ai_focuses_the_nearest_enemy_and_writes_actions_back():
    units = make_units(marines([(ids.MARINE_RL, 9, 16), (ids.MARINE_RL, 9, 12), (ids.MARINE_RL, 2, 16)]),
                       marines([(ids.MARINE, 14, 16), (ids.MARINE, 12, 11), (ids.MARINE, 20, 20)]))
    engine = FakeEngine(units)
    env = StarCraft2Env(map_name="3m", heuristic_ai=True, heuristic_rest=True, engine=engine)
    env.reset()
    actions = [0, 0, 0]
    env.step(actions)
    # Agents (sorted by x, y): 0 = (2,16) has no enemy within 6 -> moves east towards enemy 1;
    # 1 = (9,12) -> nearest enemy 1; 2 = (9,16) -> nearest enemy 0.
    assert actions == [4, 7, 6]
    kind, tx, _, target = engine.orders[0]
    assert kind.tolist() == [ORDER_ATTACK, ORDER_ATTACK, ORDER_MOVE] and target[:2].tolist() == [3, 4]
    assert tx[2] == 4


# ---- (5) registry errors --------------------------------------------------------------------------------
def test_unknown_map_lists_known_maps_on_one_line():
    with pytest.raises(ValueError) as err:
        StarCraft2Env(map_name="4m")
    message = str(err.value)
    assert "\n" not in message and "'4m'" in message
    assert all(name in message for name in MAP_REGISTRY)


def test_engine_unit_count_mismatch_is_reported():
    env = StarCraft2Env(map_name="8m", engine=FakeEngine(three_m()))
    with pytest.raises(RuntimeError, match="needs 8 and 8"):
        env.reset()


# ---- state variants, engine plumbing ------------------------------------------------------------------
def test_obs_instead_of_state_and_state_dict_agree_with_get_state():
    env = StarCraft2Env(map_name="2s3z", obs_instead_of_state=True, engine=FakeEngine(spawn_army("2s3z")))
    env.reset()
    np.testing.assert_array_equal(env.get_state(), np.concatenate(env.get_obs()))

    env = StarCraft2Env(map_name="2s3z", state_timestep_number=True, engine=FakeEngine(spawn_army("2s3z")))
    env.reset()
    env.step([1] * 5)
    parts = env.get_state_dict()
    assert parts["allies"].shape == (5, 7) and parts["enemies"].shape == (5, 6)
    flat = np.concatenate([parts["allies"].ravel(), parts["enemies"].ravel(), parts["last_action"].ravel(),
                           [parts["timestep"]]])
    np.testing.assert_array_equal(env.get_state(), flat.astype(np.float32))
    assert parts["timestep"] == pytest.approx(1 / 120)


class ReplayEngine(FakeEngine):
    """A fake that can crash (like real SC2) and save replays."""

    restarts = 0

    def __init__(self, start):
        super().__init__(start)
        self.replays = []

    def step(self, kind, tx, ty, target):
        from envs.starcraft.game.engine import GameRestarted

        self.restarts += 1
        raise GameRestarted("game relaunched")

    def save_replay(self, replay_dir, prefix):
        self.replays.append((replay_dir, prefix))


def test_game_restart_ends_the_episode_and_engine_hooks_are_used():
    engine = ReplayEngine(three_m())
    env = StarCraft2Env(map_name="3m", replay_dir="replays", engine=engine)
    env.reset()
    assert env.step([1, 1, 1]) == (0, True, {})
    assert env.force_restarts == 1
    env.save_replay()
    assert engine.replays == [("replays", "3m")]
    env.render()
    env.close()
    assert engine.closed and env.seed() is None


def test_dead_unit_keeps_its_last_observed_position():
    def die_after_moving(n, units):
        units.x[0] += 1.0  # engine row 0 = agent 0 moves, then dies within the same step
        units.kill(0)
        return units

    env = StarCraft2Env(map_name="3m", engine=FakeEngine(three_m(), script=die_after_moving))
    env.reset()
    env.step([1, 1, 1])
    unit = env.get_unit_by_id(0)
    assert (unit.pos.x, unit.pos.y, unit.health) == (9, 14, 0)

"""Built-in simulator on SMACv2's generated maps (10gen_protoss / terran / zerg on 32x32_flat):
armies created from a Team at drawn points, the map script's periodic "attack the nearest ally"
order, and the units of the map's RL copies."""
import numpy as np
import pytest

from envs.starcraft.game import engine as engine_module
from envs.starcraft.game import unit_ids as ids
from envs.starcraft.game import units as us
from envs.starcraft.game.engine import (COLLISION_TOL, ORDER_ATTACK, ORDER_HEAL, ORDER_KEEP, ORDER_MOVE,
                                   ORDER_STOP, BuiltinEngine)
from envs.starcraft.game.maps import SMACV2_SCENARIOS
from envs.starcraft.game.scenarios import get_scenario
from envs.starcraft.game.teams import GEN_UNIT_NAMES, RACE_UNITS, Team
from test_sim_mechanics import _max_overlap

RACES = tuple(RACE_UNITS)
CENTRE = (16.0, 16.0)


def _keep(engine):
    n = engine.n_allies
    return np.full(n, ORDER_KEEP), np.zeros(n), np.zeros(n), np.full(n, -1)


def _names(race: str, count: int, rng: np.random.Generator) -> tuple[str, ...]:
    """`count` units of the race, every type present when count >= 3."""
    types = RACE_UNITS[race]
    drawn = [types[k % 3] for k in range(min(count, 3))] + [types[k] for k in rng.integers(0, 3, count - 3)]
    return tuple(drawn[k] for k in rng.permutation(count))


def _reflect_team(race: str, n_allies: int, n_enemies: int, rng: np.random.Generator) -> Team:
    """Every unit at its own point: allies in the west half, enemies mirrored (the extra
    enemies anywhere in the east half), as SMACv2's reflect distribution draws them."""
    ally_xy = rng.uniform((0.0, 0.0), (15.0, 32.0), size=(n_allies, 2))
    extra = rng.uniform((16.0, 0.0), (32.0, 32.0), size=(n_enemies - n_allies, 2))
    enemy_xy = np.concatenate([np.column_stack([32.0 - ally_xy[:, 0], ally_xy[:, 1]]), extra])
    return Team(_names(race, n_allies, rng), tuple(map(tuple, ally_xy)),
                _names(race, n_enemies, rng), tuple(map(tuple, enemy_xy)))


def _surrounded_team(race: str, n_allies: int, n_enemies: int, rng: np.random.Generator) -> Team:
    """All allies on the centre, the enemies in groups on points of the diagonals between the
    corners and the centre (a corner itself included), as SMACv2's surrounded distribution."""
    corners = np.array([(0.0, 0.0), (0.0, 32.0), (32.0, 32.0), (32.0, 0.0)])
    near_centre = np.array(CENTRE) + 2.0 * np.sign(np.array(CENTRE) - corners)
    along = rng.uniform(size=4) * np.array([0.0, 1.0, 0.0, 1.0])  # two groups on their corners
    points = near_centre * along[:, None] + corners * (1.0 - along[:, None])
    group = np.sort(rng.integers(0, 4, n_enemies))
    return Team(_names(race, n_allies, rng), (CENTRE,) * n_allies,
                _names(race, n_enemies, rng), tuple(tuple(points[g]) for g in group))


def _on_walkable_ground(engine) -> bool:
    u = engine.units
    ground = ~engine._is_air & u.alive
    x, y = u.x[ground], u.y[ground]
    inside = (x >= 0) & (x < engine.map_x) & (y >= 0) & (y < engine.map_y)
    return bool(inside.all() and engine.pathing_grid[x.astype(int), y.astype(int)].all())


@pytest.fixture(scope="module")
def engines():
    """One engine per race (constructing one compiles nothing, resetting rebuilds its tables)."""
    return {race: BuiltinEngine(f"10gen_{race}", seed=7) for race in RACES}


# ------------------------------------------------------------------ map, terrain, unit ids

@pytest.mark.parametrize("race", RACES)
def test_the_generated_maps_are_the_flat_32x32_map_with_no_armies_of_their_own(race, engines):
    scenario = get_scenario(f"10gen_{race}")
    assert scenario.generated and scenario.n_allies == scenario.n_enemies == 0
    assert scenario.enemy_order.kind == "attack_nearest" and scenario.enemy_order.period == 8
    engine = engines[race]
    assert (engine.map_x, engine.map_y, engine.max_distance_x, engine.max_distance_y) == (32, 32, 32.0, 32.0)
    assert engine.pathing_grid.shape == (32, 32) and engine.pathing_grid.all()
    assert np.unique(engine.terrain_height).size == 1
    assert engine.ally_unit_ids == {name: ids.GEN_RL_BASE + k for k, name in enumerate(GEN_UNIT_NAMES)}


def test_the_rl_copies_of_smacv2_are_smacs_under_the_maps_own_ids():
    for name in GEN_UNIT_NAMES:
        rl, stock = us.get_unit_stats(us.GEN_ALLY_IDS[name]), us.get_unit_stats(ids.STOCK_ID_OF_NAME[name])
        assert rl.name == f"{stock.name}_RL"
    # The map files' differences from the stock units carry over.
    assert us.get_unit_stats(us.GEN_ALLY_IDS["hydralisk"]).health == 80
    assert us.get_unit_stats(ids.STOCK_ID_OF_NAME["hydralisk"]).health == 90
    assert us.get_unit_stats(us.GEN_ALLY_IDS["medivac"]).speed == pytest.approx(2.75 / 16)


# ------------------------------------------------------------------ creation at the drawn points

@pytest.mark.parametrize("race", RACES)
@pytest.mark.parametrize("draw", [_reflect_team, _surrounded_team])
def test_armies_are_created_at_their_points_without_overlap_on_walkable_ground(race, draw, engines):
    engine = engines[race]
    team = draw(race, 20, 23, np.random.default_rng(3))
    units = engine.reset(team)
    assert (units.n_allies, units.n_enemies) == (engine.n_allies, engine.n_enemies) == (20, 23)
    expected = [engine.ally_unit_ids[n] for n in team.ally_units] + [ids.STOCK_ID_OF_NAME[n] for n in team.enemy_units]
    assert list(units.unit_type) == expected
    assert _max_overlap(engine) <= COLLISION_TOL
    assert _on_walkable_ground(engine)
    # Each unit stands by its point: within the lattice that holds its group (n units: a disc
    # of about sqrt(n) lattice spacings, a quarter disc in a corner), one spacing more.
    points = np.array(team.ally_xy + team.enemy_xy)
    sides = np.arange(43) >= 20
    for k, point in enumerate(points):
        group = (sides == sides[k]) & (points == point).all(axis=1)
        spacing = 2 * engine._radius[group].max() + 0.25
        bound = spacing * (np.sqrt(group.sum()) + 1)
        assert abs(units.x[k] - point[0]) ** 2 + abs(units.y[k] - point[1]) ** 2 <= bound ** 2, (k, point)


def test_composition_changes_rebuild_the_tables_and_episodes_depend_on_seed_episode_and_team():
    rng = np.random.default_rng(11)
    first, second = _reflect_team("terran", 5, 5, rng), _surrounded_team("terran", 10, 11, rng)
    a, b = BuiltinEngine("10gen_terran", seed=4), BuiltinEngine("10gen_terran", seed=4)
    a.reset(first)
    b.reset(second)
    assert (a.n, b.n) == (10, 21)
    runs = []
    for engine in (a, b):  # episode 1 of both: the same team, after different ones
        engine.reset(second)
        runs.append(_random_battle(engine, np.random.default_rng(0), 60))
    np.testing.assert_array_equal(runs[0], runs[1])
    other_seed = BuiltinEngine("10gen_terran", seed=5)
    other_seed.reset(first)
    other_seed.reset(second)
    assert not np.array_equal(_random_battle(other_seed, np.random.default_rng(0), 60), runs[0])


def test_bad_armies_are_refused_in_one_line():
    engine = BuiltinEngine("10gen_zerg", seed=0)
    with pytest.raises(ValueError, match="call reset\\(team\\)"):
        engine.reset()
    with pytest.raises(ValueError, match="off the map"):
        engine.reset(Team(("zergling",), ((33.0, 4.0),), ("zergling",), ((20.0, 4.0),)))
    with pytest.raises(ValueError, match="at least one unit per side"):
        engine.reset(Team(("zergling",), ((3.0, 4.0),), (), ()))
    with pytest.raises(ValueError, match="reset\\(\\) takes no team"):
        BuiltinEngine("3m", seed=0).reset(Team(("marine",), ((3.0, 4.0),), ("marine",), ((20.0, 4.0),)))


# ------------------------------------------------------------------ the map script's order

def _team(allies, enemies) -> Team:
    """[(name, (x, y)), ...] per side -> Team."""
    return Team(tuple(n for n, _ in allies), tuple(p for _, p in allies),
                tuple(n for n, _ in enemies), tuple(p for _, p in enemies))


def test_enemies_attack_the_nearest_ally_keep_that_order_and_take_the_next_nearest_after_its_death():
    engine = BuiltinEngine("10gen_terran", seed=0)
    engine.reset(_team([("marine", (10.0, 16.0)), ("marine", (4.0, 26.0))], [("marine", (22.0, 16.0))]))
    engine.step(*_keep(engine))
    assert engine._target[2] == 0  # nearest ally, far beyond the Marine's scan range (5.5)
    engine.move_unit(1, 20.0, 20.0)  # a nearer ally: the order stands while its target lives
    engine.step(*_keep(engine))
    assert engine._target[2] == 0
    engine.kill_units([0])
    engine.step(*_keep(engine))
    assert engine._target[2] == 1


def test_the_order_is_given_every_half_game_second_only():
    # step_mul 4: ticks of 4 loops, the trigger at loops 0, 8, 16, ...
    engine = BuiltinEngine("10gen_protoss", seed=0, step_mul=4)
    engine.reset(_team([("stalker", (4.0, 4.0)), ("stalker", (4.0, 28.0))], [("stalker", (28.0, 4.0))]))
    engine.step(*_keep(engine))             # loops 0-4: ordered on ally 0
    assert engine._target[2] == 0
    engine.kill_units([0])
    engine.step(*_keep(engine))             # loops 4-8: idle, nothing in scan range
    assert engine._target[2] == -1
    engine.step(*_keep(engine))             # loops 8-12: the trigger orders it on ally 1
    assert engine._target[2] == 1


@pytest.mark.parametrize("map_name,enemy", [("10gen_terran", "marauder"), ("10gen_zerg", "zergling")])
def test_an_enemy_whose_weapon_cannot_hit_the_nearest_ally_stays_idle_and_attacks_what_it_can(map_name, enemy):
    engine = BuiltinEngine(map_name, seed=0)
    start = (24.0, 16.0)
    engine.reset(_team([("medivac", (20.0, 16.0)), ("marine", (4.0, 16.0))], [(enemy, start)]))
    for _ in range(4):  # the order on the Medivac fails every time: no chase
        engine.step(*_keep(engine))
        assert engine._target[2] == -1
    assert (engine.units.x[2], engine.units.y[2]) == start
    engine.kill_units([0])  # the Marine is now the nearest ally: ordered on it, across the map
    for _ in range(3):
        engine.step(*_keep(engine))
    assert engine._target[2] == 1 and engine._mode[2] == engine_module._HUNT
    assert engine.units.x[2] < start[0] - 1.0
    # The Medivac nearest, a Marine within its scan range: acquired automatically, no order.
    engine.reset(_team([("medivac", (20.0, 16.0)), ("marine", (28.5, 19.0))], [(enemy, start)]))
    engine.step(*_keep(engine))
    assert engine._target[2] == 1 and engine._mode[2] == engine_module._GUARD


def test_an_enemy_medivac_stays_idle_and_heals_its_army_in_sight():
    engine = BuiltinEngine("10gen_terran", seed=0)
    engine.reset(_team([("marine", (14.0, 16.0))], [("medivac", (26.0, 16.0)), ("marine", (20.0, 16.0))]))
    engine.step(*_keep(engine))
    assert (engine.units.x[1], engine.units.y[1]) == (26.0, 16.0)  # no order, nobody hurt: it stays
    orders = (np.array([ORDER_ATTACK]), np.zeros(1), np.zeros(1), np.array([2]))
    for _ in range(7):
        engine.step(*orders)
        orders = _keep(engine)
    assert engine._target[1] == 2 and engine._mode[1] == engine_module._HEAL
    regenerated = 50.0 + 8 * 8 * us.ENERGY_REGEN_PER_LOOP  # start energy and 8 steps' regeneration
    assert engine.units.energy[1] < regenerated


# ------------------------------------------------------------------ random battles

def _random_orders(engine, rng: np.random.Generator):
    """SMAC-like random orders: stop, a 2-unit move, attack a living enemy; Medivacs heal a
    living ally instead of attacking."""
    u, na = engine.units, engine.n_allies
    kind = rng.choice([ORDER_KEEP, ORDER_STOP, ORDER_MOVE, ORDER_ATTACK], size=na)
    step = 2.0 * np.exp(0.5j * np.pi * rng.integers(0, 4, na))
    enemies, friends = np.flatnonzero(u.alive[na:]) + na, np.flatnonzero(u.alive[:na])
    target = rng.choice(enemies, size=na)
    medivac = engine._heals[:na]
    kind[medivac & (kind == ORDER_ATTACK)] = ORDER_HEAL
    target[medivac] = rng.choice(friends, size=int(medivac.sum()))
    return kind, u.x[:na] + step.real, u.y[:na] + step.imag, target


def _random_battle(engine, rng: np.random.Generator, steps: int) -> np.ndarray:
    """Random orders until one side is gone or `steps` steps -> [steps, 4 * units] x, y, health,
    shield after each step; every step checked for overlap and walkable ground."""
    rows = []
    for _ in range(steps):
        u = engine.step(*_random_orders(engine, rng))
        assert _max_overlap(engine) <= COLLISION_TOL + 1e-9
        assert _on_walkable_ground(engine)
        rows.append(np.concatenate([u.x, u.y, u.health, u.shield]))
        if not u.alive[:engine.n_allies].any() or not u.alive[engine.n_allies:].any():
            break
    return np.array(rows)


def _play(engine, race: str, sizes: tuple[int, int], steps: int, seed: int) -> int:
    """Random battles, reflect and surrounded alternating, for `steps` steps in all -> steps played."""
    rng = np.random.default_rng(seed)
    played, episode = 0, 0
    while played < steps:
        draw = (_reflect_team, _surrounded_team)[episode % 2]
        engine.reset(draw(race, *sizes, rng))
        played += len(_random_battle(engine, rng, steps - played))
        episode += 1
    return played


@pytest.mark.parametrize("race", RACES)
@pytest.mark.parametrize("sizes", [(5, 5), (20, 23)])
def test_random_battles_never_overlap(race, sizes, engines):
    assert _play(engines[race], race, sizes, 200, seed=1) == 200


@pytest.mark.slow
@pytest.mark.parametrize("race", RACES)
@pytest.mark.parametrize("sizes", [(5, 5), (10, 10), (20, 20), (10, 11), (20, 23)])
def test_random_battles_never_overlap_over_thousands_of_steps(race, sizes):
    assert _play(BuiltinEngine(f"10gen_{race}", seed=2), race, sizes, 3000, seed=2) == 3000


def _play_scenario(scenario: str, policy: str, steps: int) -> int:
    """`steps` env steps of a scenario (its file's env_args) with SMACv2's heuristic or random available
    actions, checking after each that no ground units overlap and all stand on walkable ground ->
    episodes finished."""
    from envs.starcraft.interface.smacv2_configs import scenario_env

    env = scenario_env(scenario, seed=4, backend="builtin", heuristic_ai=policy == "heuristic")
    rng = np.random.default_rng(4)
    env.reset()
    episodes = 0
    for _ in range(steps):
        avail = np.asarray(env.get_avail_actions())  # [n_agents, n_actions]
        actions = [int(rng.choice(np.flatnonzero(row))) for row in avail]
        if env.step(actions)[1]:
            episodes += 1
            env.reset()
        assert _max_overlap(env._engine) <= COLLISION_TOL + 1e-9
        assert _on_walkable_ground(env._engine)
    return episodes


@pytest.mark.parametrize("scenario,policy", [("protoss_5_vs_5", "heuristic"), ("terran_10_vs_11", "random"),
                                             ("zerg_20_vs_23", "heuristic")])
def test_scenarios_play_without_overlap(scenario, policy):
    assert _play_scenario(scenario, policy, 120) >= 1


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["random", "heuristic"])
@pytest.mark.parametrize("scenario", list(SMACV2_SCENARIOS))
def test_every_scenario_plays_thousands_of_steps_without_overlap(scenario, policy):
    assert _play_scenario(scenario, policy, 2000) >= 5

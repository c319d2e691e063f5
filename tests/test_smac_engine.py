"""Built-in combat engine: SC2 mechanics with numbers (facts sheet §9–§12) and plausible battles."""
import math

import numpy as np
import pytest

from envs.starcraft.game import engine as engine_module
from envs.starcraft.game import unit_ids as ids
from envs.starcraft.game import units as us
from envs.starcraft.game.engine import (ORDER_ATTACK, ORDER_HEAL, ORDER_KEEP, ORDER_MOVE, ORDER_STOP,
                                   BuiltinEngine)
from envs.starcraft.game.scenarios import EnemyOrder, Scenario
from envs.starcraft.interface.starcraft2 import StarCraft2Env

OPEN = np.ones((32, 32), dtype=bool)
FLAT = np.full((32, 32), 0.5)


def _custom_engine(monkeypatch, allies, enemies, order=EnemyOrder("none"), grid=OPEN, seed=0) -> BuiltinEngine:
    """An engine on a hand-made scenario: allies/enemies = [(type id, (x, y)), ...]."""
    scenario = Scenario(
        name="test", layout="open",
        ally_types=tuple(t for t, _ in allies), ally_spawns=tuple(p for _, p in allies),
        enemy_types=tuple(t for t, _ in enemies), enemy_spawns=tuple(p for _, p in enemies),
        enemy_order=order, pathing_grid=grid, terrain_height=FLAT)
    monkeypatch.setattr(engine_module, "get_scenario", lambda name: scenario)
    engine = BuiltinEngine("test", seed=seed)
    engine.reset()
    return engine


def _orders(engine, kind, target=-1, tx=0.0, ty=0.0):
    """The same order for every ally -> (kind, tx, ty, target) arrays."""
    n = engine.n_allies
    return (np.full(n, kind, dtype=np.int8), np.full(n, tx), np.full(n, ty), np.full(n, target))


def _hits_until(engine, orders, stop, max_steps=200):
    """Step with fixed orders until stop(units) holds; return [(loop of step end, attacks)]."""
    log = []
    for step in range(max_steps):
        units = engine.step(*orders)
        log.append(((step + 1) * engine.step_mul, list(engine.last_attacks)))
        if stop(units):
            return log
        orders = _orders(engine, ORDER_KEEP)
    raise AssertionError("condition not reached")


# ------------------------------------------------------------------ unit table

def test_unit_table_numbers_and_rl_differences():
    assert us.get_unit_stats(ids.HYDRALISK_RL).health == 80
    assert us.get_unit_stats(ids.HYDRALISK).health == 90
    assert us.get_unit_stats(ids.MEDIVAC_RL).speed == pytest.approx(2.75 / 16)
    assert us.get_unit_stats(ids.MEDIVAC).speed == pytest.approx(2.5 / 16)
    marine = us.get_unit_stats(ids.MARINE_RL)
    assert (marine.health, marine.radius, marine.range) == (45, 0.375, 5)
    assert marine.cooldown == pytest.approx(13.77, abs=0.01)
    stalker, marauder = us.get_unit_stats(ids.STALKER), us.get_unit_stats(ids.MARAUDER_RL)
    assert us.damage_per_hit(marauder, stalker) == 20
    assert us.damage_per_hit(marauder, marine) == 10
    assert not us.can_hit(marauder, us.get_unit_stats(ids.MEDIVAC))
    with pytest.raises(ValueError, match="unknown unit type id 12345"):
        us.get_unit_stats(12345)


# ------------------------------------------------------------------ damage and cooldown

def test_marine_kills_marine_in_8_hits_spaced_by_its_cooldown(monkeypatch):
    # The enemy auto-attacks; the allied marine is passive (RL units never retaliate).
    engine = _custom_engine(monkeypatch, [(ids.MARINE_RL, (10.0, 16.0))], [(ids.MARINE, (15.0, 16.0))])
    units = engine.units
    health = []
    for step in range(60):
        engine.step(*_orders(engine, ORDER_STOP if step == 0 else ORDER_KEEP))
        for _ in engine.last_attacks:
            health.append(units.health[0])
        if not units.alive[0]:
            break
    assert len(health) == math.ceil(45 / 6) == 8
    assert health == [39, 33, 27, 21, 15, 9, 3, 0]
    assert units.health[1] == 45 and units.x[0] == 10.0  # the ally never moved nor fired
    # 7 gaps of at least ceil(13.77) - 1 loops (random delay -1..+2 loops) in 8-loop steps:
    # the kill takes at least 7 * 12.77 loops and at most 7 * 15.77 + 2 steps.
    assert 7 * 12.77 <= (step + 1) * 8 <= 7 * 15.77 + 16


def test_marauder_vs_stalker_bonus_armour_and_shields_first(monkeypatch):
    engine = _custom_engine(monkeypatch, [(ids.MARAUDER_RL, (10.0, 16.0))],
                            [(ids.STALKER, (15.0, 16.0))])
    units = engine.units
    seen = []
    orders = _orders(engine, ORDER_ATTACK, target=1)
    while units.alive[1]:
        engine.step(*orders)
        orders = _orders(engine, ORDER_KEEP)
        if any(a == 0 for a, _ in engine.last_attacks):
            seen.append((units.shield[1], units.health[1]))
    # 10 + 10 (vs Armored) = 20 on the shield (shields have no armour), 20 - 1 = 19 on HP.
    assert seen[:5] == [(60, 80), (40, 80), (20, 80), (0, 80), (0, 61)]
    assert len(seen) == 4 + math.ceil(80 / 19)


def test_zealot_hits_twice_and_armour_applies_to_the_part_past_the_shield(monkeypatch):
    engine = _custom_engine(monkeypatch, [(ids.ZEALOT_RL, (10.0, 16.0))], [(ids.ZEALOT, (20.0, 16.0))])
    units = engine.units
    engine.move_unit(1, 11.1, 16.0)
    seen = []
    orders = _orders(engine, ORDER_ATTACK, target=1)
    for _ in range(30):
        engine.step(*orders)
        orders = _orders(engine, ORDER_KEEP)
        if any(a == 0 for a, _ in engine.last_attacks):
            seen.append((units.shield[1], units.health[1]))
        if len(seen) == 4:
            break
    # 2 x 8 per attack: shield 50 -> 34 -> 18 -> 2; the 4th: 2 absorbed + (6 - 1) + (8 - 1) on HP.
    assert seen == [(34, 100), (18, 100), (2, 100), (0, 88)]


def test_shields_regenerate_only_after_the_delay(monkeypatch):
    engine = _custom_engine(monkeypatch, [(ids.MARAUDER_RL, (10.0, 16.0))],
                            [(ids.STALKER, (15.0, 16.0))])
    units = engine.units
    engine.step(*_orders(engine, ORDER_ATTACK, target=1))
    assert units.shield[1] == 60
    engine.kill_units([0])  # nothing damages the stalker any more
    shields = []
    for _ in range(24):
        engine.step(*_orders(engine, ORDER_KEEP))
        shields.append(units.shield[1])
    delay_steps = int(us.SHIELD_REGEN_DELAY_LOOPS // engine.step_mul)  # 160 loops = 20 steps
    assert shields[:delay_steps - 1] == [60] * (delay_steps - 1)
    # 2 per game second = 1.0 per 8-loop step once regenerating.
    assert shields[-1] - shields[-2] == pytest.approx(1.0)
    assert shields[-1] > 60


def test_zerg_regenerate_and_medivac_heals_biological_allies(monkeypatch):
    engine = _custom_engine(
        monkeypatch, [(ids.MARINE_RL, (10.0, 16.0)), (ids.MEDIVAC_RL, (10.0, 13.0))],
        [(ids.ZERGLING, (25.0, 16.0))])
    units = engine.units
    units.health[0] = 20.0
    units.health[2] = 20.0
    energy = units.energy[1]
    kind = np.array([ORDER_STOP, ORDER_HEAL], dtype=np.int8)
    engine.step(kind, np.zeros(2), np.zeros(2), np.array([-1, 0]))
    # 9 HP per game second = 4.5 per step, 1 energy per 3 HP.
    assert units.health[0] == pytest.approx(24.5)
    assert units.energy[1] == pytest.approx(energy - 1.5 + 0.5625 / 2)
    assert units.health[2] == pytest.approx(20.0 + 0.2734 / 2)


def test_baneling_burst_kills_light_units_in_radius_and_dies(monkeypatch):
    zerglings = [(ids.ZERGLING, p) for p in ((16.0, 16.0), (16.0, 17.5), (17.0, 15.0), (26.0, 26.0))]
    engine = _custom_engine(monkeypatch, [(ids.BANELING_RL, (8.0, 16.0))], zerglings)
    units = engine.units
    log = _hits_until(engine, _orders(engine, ORDER_ATTACK, target=1), lambda u: not u.alive[0])
    # 16 + 19 vs Light = 35 = a zergling's HP; the far one is outside the 2.2 splash.
    assert list(units.alive) == [False, False, False, False, True]
    assert sorted(log[-1][1]) == [(0, 1), (0, 2), (0, 3)]


def test_colossus_line_splash_hits_units_across_the_attack_direction(monkeypatch):
    enemies = [(ids.ZERGLING, p) for p in ((16.0, 16.0), (16.0, 17.0), (16.0, 15.0), (17.5, 16.0))]
    engine = _custom_engine(monkeypatch, [(ids.COLOSSUS_RL, (10.0, 16.0))], enemies)
    units = engine.units
    engine.step(*_orders(engine, ORDER_ATTACK, target=1))
    # 2 x (10 + 5 vs Light) = 30 to the target and to the two beside it, not to the one behind.
    regen = us.ZERG_REGEN_PER_LOOP * engine.step_mul
    assert units.health[1:] == pytest.approx([5 + regen, 5 + regen, 5 + regen, 35])


# ------------------------------------------------------------------ movement, terrain, collision

def test_units_never_stand_on_unpathable_cells_after_moving_into_walls():
    for map_name, (tx, ty) in (("3m", (9.0, 2.0)), ("corridor", (0.0, 16.0))):
        engine = BuiltinEngine(map_name, seed=3)
        units = engine.reset()
        for _ in range(25):
            engine.step(*_orders(engine, ORDER_MOVE, tx=tx, ty=ty))
            cells = engine.pathing_grid[units.x.astype(int), units.y.astype(int)]
            if map_name == "3m":  # straight walls
                assert cells[units.alive].all(), map_name
            else:  # diagonal cliffs: a unit may stand on the walkable half of a staircase cell
                border = engine_module._BORDER
                parts = engine._padded[0, units.x.astype(int) + border, units.y.astype(int) + border]
                assert (parts > 0)[units.alive].all(), map_name
                assert engine._walkable(engine._z)[units.alive].all(), map_name
        if map_name == "3m":
            assert units.y[:3].min() < 9.0  # they did walk up to the wall


def test_units_ordered_to_one_point_do_not_overlap():
    engine = BuiltinEngine("3m", seed=1)
    units = engine.reset()
    for _ in range(8):
        engine.step(*_orders(engine, ORDER_MOVE, tx=12.0, ty=16.0))
    xy = np.stack([units.x[:3], units.y[:3]], axis=1)  # [allies, 2]
    gaps = np.linalg.norm(xy[:, None] - xy[None], axis=-1) + np.eye(3) * 9  # [allies, allies]
    assert gaps.min() >= 2 * 0.375 - 0.05
    assert np.linalg.norm(xy - [12.0, 16.0], axis=1).min() < 0.5  # one of them got there


def test_spawn_is_deterministic_per_seed_and_episode_and_without_overlap():
    a, b, c = BuiltinEngine("8m", seed=5), BuiltinEngine("8m", seed=5), BuiltinEngine("8m", seed=6)
    first = [a.reset().x.copy() for _ in range(2)]
    assert np.array_equal(first[0], b.reset().x) and np.array_equal(first[1], b.reset().x)
    assert not np.array_equal(first[0], first[1])
    assert not np.array_equal(first[0], c.reset().x)
    units = a.reset()
    assert (units.x[0], units.y[0]) == (9.0, 16.0) and (units.x[8], units.y[8]) == (23.0, 16.0)
    xy = np.stack([units.x, units.y], axis=1)
    gaps = np.linalg.norm(xy[:, None] - xy[None], axis=-1) + np.eye(16) * 9
    assert gaps.min() >= 0.75


def test_same_seed_and_orders_give_the_same_trajectory():
    def trajectory():
        engine = BuiltinEngine("3m", seed=11)
        units = engine.reset()
        out = []
        for step in range(40):
            kind = ORDER_MOVE if step < 3 else ORDER_ATTACK
            engine.step(*_orders(engine, kind, target=3 + step % 3, tx=units.x[0] + 2, ty=16.0))
            out.append(np.concatenate([units.x, units.y, units.health, units.weapon_cooldown]))
        return np.array(out)

    assert np.array_equal(trajectory(), trajectory())


def test_bad_orders_are_rejected():
    engine = BuiltinEngine("3m", seed=0)
    engine.reset()
    with pytest.raises(ValueError, match="one order per ally"):
        engine.step(np.zeros(2, dtype=np.int8), np.zeros(2), np.zeros(2), np.zeros(2))
    with pytest.raises(ValueError, match=r"one order per ally \(3\), got tx of shape \(\)"):
        engine.step(np.zeros(3, dtype=np.int8), 0.0, np.zeros(3), np.zeros(3))
    with pytest.raises(ValueError, match="order kinds must be 0..4"):
        engine.step(np.full(3, 7, dtype=np.int8), np.zeros(3), np.zeros(3), np.zeros(3))
    with pytest.raises(ValueError, match="targets must be unit indices 0..5"):
        engine.step(*_orders(engine, ORDER_ATTACK, target=6))
    with pytest.raises(ValueError, match="unknown map"):
        BuiltinEngine("4m", seed=0)


# ------------------------------------------------------------------ enemy behaviour and battles

def _nearest(env, agent, candidates):
    unit = env.get_unit_by_id(agent)
    return min(candidates, key=lambda e: env.distance(unit.pos.x, unit.pos.y,
                                                      env.enemies[e].pos.x, env.enemies[e].pos.y))


def _scripted_action(env, agent, targeting):
    """Attack an enemy in range, else walk towards the nearest enemy. targeting: "focus" (the
    lowest health), "nearest" (the agent's nearest) or "spread" (agent i takes the i-th)."""
    if env.get_unit_by_id(agent).health <= 0:
        return 0
    avail = env.get_avail_agent_actions(agent)
    in_range = [e for e in range(env.n_enemies) if avail[6 + e]]
    if in_range:
        if targeting == "focus":
            return 6 + min(in_range, key=lambda e: (env.enemies[e].health + env.enemies[e].shield, e))
        if targeting == "spread":
            return 6 + in_range[agent % len(in_range)]
        return 6 + _nearest(env, agent, in_range)
    alive = [e for e in range(env.n_enemies) if env.enemies[e].health > 0]
    unit, enemy = env.get_unit_by_id(agent), env.enemies[_nearest(env, agent, alive)]
    dx, dy = enemy.pos.x - unit.pos.x, enemy.pos.y - unit.pos.y
    move = (4 if dx > 0 else 5) if abs(dx) > abs(dy) else (2 if dy > 0 else 3)
    return move if avail[move] else 1


def _win_rate(policy: str, seeds) -> float:
    wins = 0
    for seed in seeds:
        env = StarCraft2Env(map_name="3m", seed=seed)
        env.reset()
        done, info = False, {}
        while not done:
            if policy == "stop":
                actions = [1 if env.get_unit_by_id(a).health > 0 else 0 for a in range(env.n_agents)]
            else:
                actions = [_scripted_action(env, a, policy) for a in range(env.n_agents)]
            _, done, info = env.step(actions)
        wins += bool(info.get("battle_won"))
        env.close()
    return wins / len(seeds)


def test_enemies_attack_move_and_beat_allies_that_only_stop():
    engine = BuiltinEngine("3m", seed=0)
    units = engine.reset()
    for _ in range(6):
        engine.step(*_orders(engine, ORDER_STOP))
    assert units.x[3:].max() < 23.0 - 5 * 1.0  # they walked towards (9, 16)
    assert _win_rate("stop", range(10)) == 0.0


def test_focus_fire_wins_most_3m_battles_and_spread_fire_loses_most():
    # Measured on seeds 100..299: focus 0.57, nearest 0.53 (in a clump every agent's nearest
    # enemy is mostly the same one, so "nearest" is nearly focus fire), spread 0.275. (Before
    # issue 13 the enemy drew among nearly equidistant targets at random, which spread its
    # fire: focus then won 0.78. SC2's automatic targeting has no such randomness.)
    seeds = range(60)
    focus = _win_rate("focus", seeds)
    assert focus >= 0.5
    assert _win_rate("spread", seeds) <= focus - 0.25


def test_spine_crawler_stays_and_zerglings_hunt_the_colossi():
    engine = BuiltinEngine("2s_vs_1sc", seed=0)
    units = engine.reset()
    spine = (units.x[2], units.y[2])
    for _ in range(20):
        engine.step(*_orders(engine, ORDER_STOP))
    assert (units.x[2], units.y[2]) == spine
    engine = BuiltinEngine("2c_vs_64zg", seed=0)
    units = engine.reset()
    for step in range(40):
        engine.step(*_orders(engine, ORDER_STOP))
        assert engine._walkable(engine._z)[2:].all()  # pathable cells or cut staircase corners
        if step < 5:  # the cliff separates them: no zergling can bite yet
            assert engine.last_attacks == []
    # They went round through the side lanes and up the ramps to the colossi.
    assert (units.health[:2] + units.shield[:2]).sum() < 2 * 350 - 100

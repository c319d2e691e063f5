"""Built-in simulator mechanisms of issue 13, each against a hand-computed or published
expectation: collisions (no overlap, SC2's pushing rules, the Colossus walking over small
units), the computer player's automatic targeting, Baneling bursts, and the unit table's sources.
"""
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from envs.starcraft.game import collisions
from envs.starcraft.game import engine as engine_module
from envs.starcraft.game import unit_ids as ids
from envs.starcraft.game import units as us
from envs.starcraft.game.engine import COLLISION_TOL, ORDER_ATTACK, ORDER_KEEP, ORDER_MOVE, ORDER_STOP
from envs.starcraft.interface.starcraft2 import StarCraft2Env
from test_smac_engine import _custom_engine

ROOT = Path(__file__).resolve().parents[1]


def _orders(engine, kinds, targets=None, points=None):
    """Per-ally orders -> (kind, tx, ty, target) arrays; points: [(x, y)] for move orders."""
    n = engine.n_allies
    kind = np.array(kinds, dtype=np.int8)
    tx = np.array([p[0] for p in points]) if points else np.zeros(n)
    ty = np.array([p[1] for p in points]) if points else np.zeros(n)
    target = np.array(targets) if targets is not None else np.full(n, -1)
    return kind, tx, ty, target


def _max_overlap(engine) -> float:
    """Largest overlap (radius sum minus centre distance) of two living units that collide."""
    z = engine._z
    gap = np.abs(z[:, None] - z[None, :]) - engine._rsum_live
    return float(max(0.0, -gap.min()))


# ------------------------------------------------------------------ collisions

def _policy_actions(env, policy, rng):
    if policy == "heuristic":
        return [0] * env.n_agents
    avail = np.asarray(env.get_avail_actions())
    if policy == "stop":
        return [1 if row[1] else 0 for row in avail]
    return [int(rng.choice(np.flatnonzero(row))) for row in avail]


def _worst_overlap(map_name: str, steps: int) -> float:
    """Largest overlap after any env step (8 game loops) over `steps` steps, heuristic and
    random policy alternating by episode."""
    worst = 0.0
    for policy in ("heuristic", "random", "stop"):
        env = StarCraft2Env(map_name=map_name, seed=1, heuristic_ai=policy == "heuristic",
                            backend="builtin")
        rng = np.random.default_rng(1)
        env.reset()
        for _ in range(steps // 3):
            _, done, _ = env.step(_policy_actions(env, policy, rng))
            worst = max(worst, _max_overlap(env._engine))
            if done:
                env.reset()
        env.close()
    return worst


CROWDED_MAPS = ("2c_vs_64zg", "so_many_baneling", "bane_vs_bane", "27m_vs_30m")


@pytest.mark.parametrize("map_name", CROWDED_MAPS)
def test_units_never_overlap_short(map_name):
    # 2c_vs_64zg before issue 13: up to 14 zergling centres within 1.0 of one (7 fit), 51% of
    # steps with a pair closer than half their radius sum.
    assert _worst_overlap(map_name, 150) <= COLLISION_TOL + 1e-9


@pytest.mark.slow
@pytest.mark.parametrize("map_name", CROWDED_MAPS)
def test_units_never_overlap_over_thousands_of_steps(map_name):
    assert _worst_overlap(map_name, 3000) <= COLLISION_TOL + 1e-9


def test_a_moving_unit_pushes_an_idle_friend_aside(monkeypatch):
    engine = _custom_engine(monkeypatch, [(ids.MARINE_RL, (10.0, 16.0)), (ids.MARINE_RL, (13.0, 16.0))],
                     [(ids.MARINE, (30.0, 30.0))])
    engine.step(*_orders(engine, [ORDER_STOP, ORDER_STOP]))
    before = complex(engine._z[1])
    for _ in range(6):  # marine 0 walks to (16, 16) straight through marine 1's place
        engine.step(*_orders(engine, [ORDER_MOVE, ORDER_STOP], points=[(16.0, 16.0), (0, 0)]))
    assert abs(engine._z[0] - 16.0 - 16.0j) < 0.05
    assert abs(engine._z[1] - before) > 0.3  # it was pushed
    assert _max_overlap(engine) <= COLLISION_TOL


def test_units_cannot_push_an_enemy_and_walk_round_it(monkeypatch):
    engine = _custom_engine(monkeypatch, [(ids.ZEALOT_RL, (10.0, 16.0))], [(ids.ZEALOT, (13.0, 16.0))])
    engine._mode[1] = engine_module._IDLE  # an enemy standing idle, without automatic targeting
    enemy = complex(engine._z[1])
    for _ in range(10):
        engine.step(*_orders(engine, [ORDER_MOVE], points=[(17.0, 16.0)]))
        assert engine._z[1] == enemy
        assert _max_overlap(engine) <= COLLISION_TOL
    assert abs(engine._z[0] - 17.0 - 16.0j) < 0.05  # it went round


def test_a_friend_standing_to_attack_is_walked_round_not_pushed(monkeypatch):
    # Marine 0 shoots an enemy Medivac (which has no weapon); marine 1 walks through its place.
    engine = _custom_engine(monkeypatch, [(ids.MARINE_RL, (12.0, 16.0)), (ids.MARINE_RL, (9.0, 16.0))],
                     [(ids.MEDIVAC, (19.0, 16.0))])
    for _ in range(2):
        engine.step(*_orders(engine, [ORDER_ATTACK, ORDER_STOP], targets=[2, -1]))
    shooter = complex(engine._z[0])  # in range (5 + radii) of the Medivac: it stands
    for _ in range(8):
        engine.step(*_orders(engine, [ORDER_KEEP, ORDER_MOVE], points=[(0, 0), (15.0, 16.0)]))
        assert engine._z[0] == shooter
        assert _max_overlap(engine) <= COLLISION_TOL
    assert abs(engine._z[1] - 15.0 - 16.0j) < 0.05


def _walk(engine, goal, steps):
    """Order ally 0 to walk to goal for up to `steps` env steps -> (steps taken, its y after
    each step); overlaps are checked after every step."""
    ys = []
    for step in range(steps):
        engine.step(*_orders(engine, [ORDER_MOVE], points=[goal]))
        ys.append(engine._z[0].imag)
        assert _max_overlap(engine) <= COLLISION_TOL
        if abs(engine._z[0] - complex(*goal)) < 0.05:
            return step + 1, ys
    raise AssertionError(f"did not reach {goal} in {steps} steps")


def test_a_mover_walks_round_a_group_it_cannot_pass_on_the_shorter_side(monkeypatch):
    # Six idle enemy zealots in a column (y 13 .. 18.25, gaps of 0.05: no zealot passes between).
    # The straight way to (22, 13.3) meets the lowest one just above its centre; the short way
    # round is below the column (its end at y 12.5), the long way above it (18.75).
    wall = [(ids.ZEALOT, (16.0, 13.0 + 1.05 * k)) for k in range(6)]
    engine = _custom_engine(monkeypatch, [(ids.ZEALOT_RL, (10.0, 13.3))], wall)
    engine._mode[1:] = engine_module._IDLE
    steps, ys = _walk(engine, (22.0, 13.3), 30)
    assert max(ys) < 14.0 and min(ys) < 12.5
    assert steps <= 13  # 12 straight + the detour round one end: 1.125 a step


def test_a_mover_does_not_turn_for_a_unit_its_step_stops_short_of(monkeypatch):
    # A zealot walks east to (14, 16); a standing enemy zealot at (14.6, 16.85) would touch it
    # only beyond that point (centre distance at the goal 1.04 > radius sum 1.0): it walks straight.
    engine = _custom_engine(monkeypatch, [(ids.ZEALOT_RL, (10.0, 16.0))], [(ids.ZEALOT, (14.6, 16.85))])
    engine._mode[1] = engine_module._IDLE
    _, ys = _walk(engine, (14.0, 16.0), 10)
    assert ys == [16.0] * len(ys)


def test_friends_moving_the_same_way_push_one_another(monkeypatch):
    # A Zergling (2.95 per game-s) right behind a Marine (2.25), both walking east: the Zergling
    # pushes the Marine on (equal masses share the push), as SC2's moving units push friends;
    # before, it stopped at the contact and followed at the Marine's pace.
    engine = _custom_engine(monkeypatch, [(ids.MARINE_RL, (10.0, 16.0)), (ids.ZERGLING_RL, (9.24, 16.0))],
                            [(ids.MARINE, (30.0, 30.0))])
    for _ in range(4):  # 2 game seconds: the Marine alone walks 4.5
        engine.step(*_orders(engine, [ORDER_MOVE, ORDER_MOVE], points=[(28.0, 16.0), (28.0, 16.0)]))
        assert _max_overlap(engine) <= COLLISION_TOL
    marine, zergling = engine._z[0].real - 10.0, engine._z[1].real - 9.24
    assert 4.5 + 0.3 < marine and zergling < 5.9 - 0.3  # between their own paces


def test_a_chaser_goes_to_the_nearest_reachable_place_when_its_target_stands_over_a_cliff(monkeypatch):
    # A Colossus stands over a 2-cell cliff (y 15..17) that Zerglings cannot cross; an enemy
    # Zergling below it, 4.1 away, acquires it. SC2's pathing takes a unit to the reachable place
    # nearest to an unreachable goal: the Zergling walks up to the cliff's foot, in reach of the
    # Colossus (its radius 1 + 0.375 + range 0.1), in 3 steps (1.48 a step), and strikes.
    # Before, its route ended nowhere: it zigzagged between cell centres, not in reach after 12.
    grid = np.ones((32, 32), dtype=bool)
    grid[4:28, 15:17] = False
    engine = _custom_engine(monkeypatch, [(ids.COLOSSUS_RL, (16.5, 15.6))], [(ids.ZERGLING, (14.5, 12.0))],
                            grid=grid)
    in_reach = []
    for _ in range(5):
        engine.step(*_orders(engine, [ORDER_STOP]))
        in_reach.append(bool(abs(engine._z[1] - engine._z[0]) <= engine._reach[1, 0] + 1e-9))
    assert engine._target[1] == 0
    assert in_reach[2:] == [True] * 3
    assert engine.units.shield[0] < engine.units.shield_max[0]


def test_collision_shares_follow_the_pushing_rules_or_mass_and_immobile_units_take_none():
    marine, marauder = 0.375 ** 2, 0.5625 ** 2  # masses: radius squared
    moving, idle, fixed = collisions.R_MOVING, collisions.R_IDLE, collisions.R_FIXED
    by_mass = marauder / (marine + marauder)  # the marine's share against the Marauder
    for jam in (False, True):
        # A moving marine and an idle one: the idle friend gives way, unless jammed (by mass).
        assert collisions.pair_shares(marine, marine, True, moving, idle, jam) == ((0.5, 0.5) if jam else (0.0, 1.0))
        # Between enemies the rules do not apply: by mass.
        assert collisions.pair_shares(marine, marine, False, moving, idle, jam) == (0.5, 0.5)
        assert np.allclose(collisions.pair_shares(marine, marauder, True, idle, idle, jam), (by_mass, 1 - by_mass))
        # A unit stuck against a wall (or a structure) takes no share.
        assert collisions.pair_shares(marine, marauder, True, idle, fixed, jam) == (1.0, 0.0)
        assert collisions.pair_shares(marine, marauder, True, fixed, moving, jam) == (0.0, 1.0)
        assert collisions.pair_shares(marine, marauder, True, fixed, fixed, jam) == (0.0, 0.0)


def test_the_compiled_solver_measures_centre_distances_as_numpy_does():
    # The solver's stopping test and _separate's (NumPy) must agree on every gap.
    rng = np.random.default_rng(0)
    z = (rng.normal(size=20000) + 1j * rng.normal(size=20000)) * rng.exponential(size=20000)
    z = np.concatenate((z, [0j, 3.0 + 0j, -2j, 1e-300 + 1e-300j, complex(np.inf, 1.0)]))
    assert [collisions.norm(v.real, v.imag) for v in z] == np.abs(z).tolist()


def test_small_units_walk_beneath_a_colossus_but_colossi_collide(monkeypatch):
    # Colossus_RL: Collide Colossus/Structure/Flying, not Ground (the map's UnitData.xml).
    engine = _custom_engine(monkeypatch, [(ids.COLOSSUS_RL, (16.0, 16.0)), (ids.COLOSSUS_RL, (12.0, 21.0)),
                                   (ids.ZERGLING_RL, (12.0, 12.0))],
                     [(ids.MARINE, (30.0, 30.0))])
    for _ in range(6):
        engine.step(*_orders(engine, [ORDER_STOP, ORDER_STOP, ORDER_MOVE],
                             points=[(0, 0), (0, 0), (16.0, 16.0)]))
    z = engine._z
    assert z[0] == 16.0 + 16.0j and abs(z[2] - z[0]) < 0.05  # beneath, neither pushed
    for _ in range(6):
        engine.step(*_orders(engine, [ORDER_STOP, ORDER_MOVE, ORDER_STOP],
                             points=[(0, 0), (16.0, 16.0), (0, 0)]))
    assert abs(z[1] - z[0]) >= 2.0 - COLLISION_TOL  # a Colossus cannot


# ------------------------------------------------------------------ automatic targeting

def test_enemy_keeps_its_target_while_in_weapon_range(monkeypatch):
    # Liquipedia "Automatic Targeting": a target stays chosen until it dies, leaves the weapon
    # range or a better-class target enters the weapon range.
    engine = _custom_engine(monkeypatch, [(ids.MARINE_RL, (10.0, 16.0)), (ids.MARINE_RL, (10.0, 22.0))],
                     [(ids.MARINE, (15.5, 16.0))])
    engine.step(*_orders(engine, [ORDER_STOP, ORDER_STOP]))
    assert engine._target[2] == 0
    for _ in range(3):  # marine 1 walks right next to the enemy; it stays on marine 0
        engine.step(*_orders(engine, [ORDER_STOP, ORDER_MOVE], points=[(0, 0), (15.5, 17.0)]))
        assert engine._target[2] == 0


def test_enemy_takes_a_threat_before_a_nearer_non_threat(monkeypatch):
    # A Medivac that lacks the AlwaysThreatens flag cannot fire back at a marine: the marine takes
    # the farther ally marine. With the flag (the game's data) the nearer Medivac is as good.
    plain = replace(us.UNIT_STATS[ids.MEDIVAC_RL], always_threatens=False)
    monkeypatch.setitem(us.UNIT_STATS, ids.MEDIVAC_RL, plain)
    allies = [(ids.MEDIVAC_RL, (13.0, 16.0)), (ids.MARINE_RL, (10.5, 16.0))]
    engine = _custom_engine(monkeypatch, allies, [(ids.MARINE, (16.0, 16.0))])
    engine.step(*_orders(engine, [ORDER_STOP, ORDER_STOP]))
    assert engine._target[2] == 1
    monkeypatch.setitem(us.UNIT_STATS, ids.MEDIVAC_RL, replace(plain, always_threatens=True))
    engine = _custom_engine(monkeypatch, allies, [(ids.MARINE, (16.0, 16.0))])
    engine.step(*_orders(engine, [ORDER_STOP, ORDER_STOP]))
    assert engine._target[2] == 0


def test_enemy_acquires_only_within_its_scan_range_and_then_the_nearest(monkeypatch):
    # Marine scan range = weapon range 5 + 0.5, edge to edge: 5.5 + 0.375 + 0.375 = 6.25.
    engine = _custom_engine(monkeypatch, [(ids.MARINE_RL, (10.0, 16.0)), (ids.MARINE_RL, (10.0, 22.0))],
                     [(ids.MARINE, (16.3, 16.0))])
    engine.step(*_orders(engine, [ORDER_STOP, ORDER_STOP]))
    assert engine._target[2] == -1
    engine = _custom_engine(monkeypatch, [(ids.MARINE_RL, (10.0, 16.0)), (ids.MARINE_RL, (13.0, 20.0))],
                     [(ids.MARINE, (16.2, 16.0))])
    engine.step(*_orders(engine, [ORDER_STOP, ORDER_STOP]))
    assert engine._target[2] == 1  # both in scan range (6.2, 5.1): the nearer


def test_target_choice_has_no_randomness(monkeypatch):
    def first_targets(seed):
        engine = _custom_engine(monkeypatch, [(ids.MARINE_RL, (10.0, 16.0 + k)) for k in range(4)],
                         [(ids.MARINE, (15.9, 17.0)), (ids.MARINE, (15.9, 18.4))], seed=seed)
        engine.step(*_orders(engine, [ORDER_STOP] * 4))
        return engine._target[4:].tolist()

    assert first_targets(0) == first_targets(1) == first_targets(2)


def test_attacked_enemy_answers_an_attacker_beyond_its_scan_range(monkeypatch):
    # Stalker range 6 (+ radii 1.25) out-ranges a marine's scan 5.5 (+ 1.0): Response=Acquire.
    engine = _custom_engine(monkeypatch, [(ids.STALKER_RL, (10.0, 16.0))], [(ids.MARINE, (17.0, 16.0))])
    for _ in range(3):
        engine.step(*_orders(engine, [ORDER_ATTACK], targets=[1]))
    assert engine._target[1] == 0


# ------------------------------------------------------------------ Banelings

def test_a_killed_baneling_bursts_on_its_enemies_but_not_its_friends(monkeypatch):
    # Liquipedia: Banelings "perform their attack upon death"; no friendly fire. 16 + 19 vs
    # Light = 35: a marine (45 HP) keeps 10; zerglings of its own side are untouched.
    allies = [(ids.BANELING_RL, (10.0, 16.0)), (ids.ZERGLING_RL, (9.0, 16.0))]
    enemies = [(ids.MARINE, (11.5, 16.0)), (ids.MARINE, (15.0, 16.0))]
    engine = _custom_engine(monkeypatch, allies, enemies)
    units = engine.units
    for _ in range(40):
        engine.step(*_orders(engine, [ORDER_STOP, ORDER_STOP]))
        if not units.alive[0]:
            break
    assert not units.alive[0]
    assert units.health[1] == 35.0
    assert units.health[2] == pytest.approx(45.0 - 35.0)   # within 2.2 of the burst
    assert units.health[3] == 45.0                          # 5 away: outside


def test_an_enemy_baneling_bursts_on_contact_with_its_target(monkeypatch):
    engine = _custom_engine(monkeypatch, [(ids.ZERGLING_RL, (10.0, 16.0)), (ids.ZERGLING_RL, (10.0, 17.0))],
                     [(ids.BANELING, (14.0, 16.0))])
    units = engine.units
    for _ in range(10):
        engine.step(*_orders(engine, [ORDER_STOP, ORDER_STOP]))
        if not units.alive[2]:
            break
    assert list(units.alive) == [False, False, False]  # 35 vs Light kills both zerglings


def test_a_baneling_killed_by_a_burst_bursts_in_turn(monkeypatch):
    # The enemy Baneling bursts on contact with ours (16: a Baneling is not Light), which it
    # kills (10 HP left); ours bursts as it dies, on the enemy zergling 2 away (35 vs Light), which
    # the first burst could not touch (no friendly fire).
    engine = _custom_engine(monkeypatch, [(ids.BANELING_RL, (10.0, 16.0))],
                            [(ids.BANELING, (12.5, 16.0)), (ids.ZERGLING, (8.0, 16.0))])
    units = engine.units
    units.health[0] = 10.0
    for _ in range(10):
        engine.step(*_orders(engine, [ORDER_STOP]))
        if not units.alive[1]:
            break
    assert engine.last_attacks[:2] == [(1, 0), (0, 2)]  # the burst, then the burst it set off
    assert list(units.alive) == [False, False, False]


# ------------------------------------------------------------------ the unit table and its sources

def _doc_rows() -> dict[str, dict[str, str]]:
    """The unit table of docs/unit_data.md: {unit name: {column: cell}}."""
    lines = (ROOT / "docs" / "unit_data.md").read_text().splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith("| unit | HP |"))
    header = [c.strip() for c in lines[start].strip("|").split("|")]
    rows = {}
    for line in lines[start + 2:]:
        if not line.startswith("| "):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == len(header) and cells[0] in NAMES:
            rows[cells[0]] = dict(zip(header, cells))
    return rows


NAMES = {s.name: s for s in us.UNIT_STATS.values()}


def _number(cell: str) -> float:
    return float(re.match(r"-?[0-9.]+", cell).group(0))


def test_unit_table_in_the_docs_matches_units_py_and_names_a_source():
    rows = _doc_rows()
    assert set(rows) == set(NAMES), "docs/unit_data.md must list every unit of units.py"
    for name, stats in NAMES.items():
        row = rows[name]
        assert _number(row["HP"]) == stats.health, name
        assert _number(row["shield"]) == stats.shield, name
        assert _number(row["armour"]) == stats.armor, name
        assert _number(row["radius"]) == stats.radius, name
        assert _number(row["speed (game)"]) == pytest.approx(stats.speed * 16), name
        if stats.has_weapon:
            assert _number(row["damage x hits"]) == stats.damage, name
            assert _number(row["range"]) == pytest.approx(stats.range), name
            assert _number(row["scan"]) == pytest.approx(stats.scan_range), name
            if stats.splash != us.SPLASH_BURST:
                assert _number(row["cooldown (game-s)"]) == pytest.approx(stats.cooldown / 16), name
        for column, cell in row.items():
            if column != "unit" and cell not in ("-", ""):
                assert re.search(r"\[(M|A|L|W|SL|U)[^\]]*\]", cell) or column == "unit", \
                    f"{name}: '{column}' = '{cell}' names no source"


def test_fidelity_report_runs_and_identifies_its_engine(capsys):
    import importlib.util

    spec = importlib.util.spec_from_file_location("fidelity", ROOT / "scripts" / "fidelity.py")
    fidelity = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fidelity)
    table = fidelity.main(["--maps", "3m", "2c_vs_64zg", "--seeds", "1", "--episodes", "1"])
    out = capsys.readouterr().out
    assert "engine: BuiltinEngine" in out and "sha256" in out and "command:" in out
    assert set(table) == {(m, p) for m in ("3m", "2c_vs_64zg") for p in ("heuristic", "random", "stop")}
    assert fidelity.PAPER_HEURISTIC["2s3z"] == 90 and len(fidelity.PAPER_MAPS) == 14


@pytest.mark.slow
def test_heuristic_win_rates_near_the_smac_paper():
    """SMAC's heuristic within 15 points of the paper on the maps where the simulator gets there
    (500 episodes each); the maps still off are listed in docs/simulator.md."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("fidelity", ROOT / "scripts" / "fidelity.py")
    fidelity = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fidelity)
    near = ("2s_vs_1sc", "10m_vs_11m", "2c_vs_64zg", "bane_vs_bane", "5m_vs_6m", "3s_vs_5z",
            "3s5z_vs_3s6z", "6h_vs_8z", "27m_vs_30m", "MMM2", "corridor")
    table = fidelity.main(["--maps", *near, "--policies", "heuristic"])
    for m in near:
        assert abs(table[(m, "heuristic")][0] - fidelity.PAPER_HEURISTIC[m]) <= 15, m

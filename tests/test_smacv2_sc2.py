"""SC2Engine on SMACv2's maps against a fake game: the map file, the team created at every reset,
restarts, and backend selection.

SMACv2 plays its 10gen maps on the empty map 32x32_flat and creates both armies itself at every
reset (debug kill of everything, then one DebugCreateUnit per unit). The fake game
(tests/sc2_fakes.py) turns those commands back into a Team for its world: TeamWorld, a world
with the engine contract's reset(team) and nothing else, or the built-in simulator, over which
SMACv2's env must play exactly what it plays on the simulator itself.
"""
import logging

import numpy as np
import pytest

# The engine before pysc2: it makes s2clientprotocol importable under any protobuf implementation.
from envs.starcraft.sc2client import sc2_engine as sc2_engine_module
from envs.starcraft.sc2client.sc2_engine import ABILITY_ATTACK, ABILITY_MOVE, SC2Engine, rl_unit_ids
from envs.starcraft.game.engine import ORDER_ATTACK, ORDER_MOVE, BuiltinEngine, GameRestarted
from envs.starcraft.interface.backend import make_engine, select_backend
from envs.starcraft.sc2client.install import map_file_stem, sc2_missing, smac_map_file
from envs.starcraft.interface.starcraft2_v2 import StarCraftCapabilityEnvWrapper
from envs.starcraft.game.teams import GEN_UNIT_NAMES, RACE_UNITS, Team
from envs.starcraft.game.unit_ids import STOCK_ID_OF_NAME
from pysc2 import maps as pysc2_maps
from pysc2.lib import protocol
from s2clientprotocol import common_pb2 as sc_common
from sc2_fakes import (TAG_STRIDE, FakeController, FakeLauncher, Float32Engine, ScriptedWorld, TeamWorld,
                       assert_units_equal, fake_game_info, fake_install, make_units, orders, play_in_lockstep,
                       world_game_info)

# Allies: a Stalker, two Zealots, a Colossus at four points; enemies: stock units at four others.
TEAM = Team(ally_units=("stalker", "zealot", "zealot", "colossus"),
            ally_xy=((8.0, 16.0), (8.5, 12.25), (7.0, 20.0), (6.0, 16.0)),
            enemy_units=("zealot", "stalker", "stalker", "zealot"),
            enemy_xy=((24.0, 16.0), (23.5, 12.25), (25.0, 20.0), (26.0, 16.0)))
# A second episode of another composition: units of a type sharing a point, as `surrounded` draws.
CROWD = Team(ally_units=("zergling", "zergling", "baneling", "zergling"), ally_xy=((16.0, 16.0),) * 4,
             enemy_units=("hydralisk", "zergling", "zergling", "baneling", "hydralisk"),
             enemy_xy=((14.0, 14.0),) * 3 + ((18.0, 18.0),) * 2)


def gen_controller(**kwargs) -> FakeController:
    return FakeController(TeamWorld(), fake_game_info(), **kwargs)


def gen_engine(*controllers: FakeController, map_name: str = "10gen_protoss", seed: int | None = 5):
    """An SC2Engine for a SMACv2 map over fake games (default: one over a TeamWorld)."""
    launcher = FakeLauncher(*(controllers or (gen_controller(),)))
    return SC2Engine(map_name, seed, launcher=launcher), launcher


def creates(debug_request) -> list[tuple]:
    """(unit_type, owner, x, y, quantity) of each create-unit command of one debug request."""
    return [(c.create_unit.unit_type, c.create_unit.owner, c.create_unit.pos.x, c.create_unit.pos.y,
             c.create_unit.quantity) for c in debug_request]


def expected_creates(team: Team, ally_ids: dict[str, int]) -> list[tuple]:
    return ([(ally_ids[n], 1, x, y, 1) for n, (x, y) in zip(team.ally_units, team.ally_xy)]
            + [(STOCK_ID_OF_NAME[n], 2, x, y, 1) for n, (x, y) in zip(team.enemy_units, team.enemy_xy)])


# ---- the map ------------------------------------------------------------------------------------
@pytest.mark.parametrize("map_name", ["10gen_protoss", "10gen_terran", "10gen_zerg", "zerg_20_vs_23"])
def test_smacv2_maps_are_played_on_32x32_flat(map_name, tmp_path):
    assert map_file_stem(map_name) == "32x32_flat" and map_file_stem("3m") == "3m"
    assert smac_map_file(map_name, tmp_path) == tmp_path / "Maps" / "SMAC_Maps" / "32x32_flat.SC2Map"
    engine, launcher = gen_engine(map_name=map_name)
    create = launcher.launched[0].requests["create_game"][0]
    assert create.local_map.map_path == "SMAC_Maps/32x32_flat.SC2Map"
    assert launcher.map_paths == ["SMAC_Maps/32x32_flat.SC2Map"]
    race = {"protoss": sc_common.Protoss, "terran": sc_common.Terran, "zerg": sc_common.Zerg}[
        map_name.removeprefix("10gen_").split("_")[0]]
    assert create.player_setup[1].race == race and launcher.launched[0].requests["join_game"][0].race == race


def test_10gen_maps_are_registered_with_pysc2_under_their_own_names():
    for name in ("10gen_protoss", "10gen_terran", "10gen_zerg"):
        assert pysc2_maps.get(name).path == "SMAC_Maps/32x32_flat.SC2Map"
    assert pysc2_maps.get("3m").path == "SMAC_Maps/3m.SC2Map"


def test_ally_ids_are_the_last_nine_unit_types_in_smacv2s_order():
    """SMACv2: min id = len(controller.data().units) - 9, then baneling +0 ... stalker +6, zergling +8."""
    ids = rl_unit_ids(2000)
    assert (ids["baneling"], ids["stalker"], ids["zergling"]) == (1991, 1997, 1999)
    engine, launcher = gen_engine()
    assert engine.ally_unit_ids == TeamWorld.ally_unit_ids  # the fake reports as many types as the world needs
    assert len(set(engine.ally_unit_ids.values())) == 9 and list(engine.ally_unit_ids) == list(GEN_UNIT_NAMES)
    assert launcher.launched[0].calls["data"] == 1


# ---- reset: kill, create, bind -------------------------------------------------------------------
def test_reset_creates_exactly_the_teams_units_at_their_points():
    engine, launcher = gen_engine()
    controller = launcher.launched[0]
    units = engine.reset(TEAM)
    (request,) = controller.requests["debug"]  # a new game holds no unit: nothing to kill
    assert creates(request) == expected_creates(TEAM, engine.ally_unit_ids)
    assert controller.teams == [TEAM]
    assert controller.step_counts == [1, 1]  # the create loop, then the loop the enemies needed to appear
    assert (units.n_allies, units.n_enemies) == (4, 4) and units.alive.all()
    ids = engine.ally_unit_ids
    np.testing.assert_array_equal(units.unit_type, [ids["stalker"], ids["zealot"], ids["zealot"], ids["colossus"],
                                                    73, 74, 74, 73])
    np.testing.assert_array_equal(units.x, [8.0, 8.5, 7.0, 6.0, 24.0, 23.5, 25.0, 26.0])
    np.testing.assert_array_equal(units.y, [16.0, 12.25, 20.0, 16.0, 16.0, 12.25, 20.0, 16.0])
    np.testing.assert_array_equal(units.health, np.arange(1, 9))  # each row is the world's row
    np.testing.assert_array_equal(engine._tags, TAG_STRIDE + np.arange(8))


def test_units_are_bound_by_type_and_point_not_by_the_games_order():
    engine, launcher = gen_engine(gen_controller(reversed_order=True))
    units = engine.reset(TEAM)
    assert_units_equal(units, launcher.launched[0].world.units)
    engine.step(*orders(4, a0=(ORDER_MOVE, 10.5, 15.0, -1), a3=(ORDER_ATTACK, 0, 0, 6)))
    kind, tx, ty, target = launcher.launched[0].world.orders[-1]  # orders reach the rows they were given to
    np.testing.assert_array_equal(kind, [ORDER_MOVE, 0, 0, ORDER_ATTACK])
    assert (tx[0], ty[0], target[3]) == (10.5, 15.0, 6)
    sent = [a.action_raw.unit_command for a in launcher.launched[0].requests["actions"][-1].actions]
    assert [c.ability_id for c in sent] == [ABILITY_MOVE, ABILITY_ATTACK]


@pytest.mark.parametrize("reversed_order", [False, True])
def test_units_of_one_type_at_one_point_keep_the_games_order(reversed_order):
    """Zerglings created at one point are interchangeable: rows take them in observation order; the
    Baneling among them keeps its row."""
    engine, launcher = gen_engine(gen_controller(reversed_order=reversed_order), map_name="10gen_zerg")
    units = engine.reset(CROWD)
    world = launcher.launched[0].world.units
    zerglings = [0, 1, 3]
    order = zerglings[::-1] if reversed_order else zerglings
    np.testing.assert_array_equal(units.x[zerglings], world.x[order])  # spread along x by the world
    np.testing.assert_array_equal(units.health[zerglings], world.health[order])
    assert units.health[2] == world.health[2] and units.unit_type[2] == engine.ally_unit_ids["baneling"]
    np.testing.assert_array_equal(units.unit_type[4:], [107, 105, 105, 9, 107])


def test_a_second_reset_kills_every_unit_and_waits_until_none_is_left():
    engine, launcher = gen_engine(gen_controller(linger_loops=5))
    controller = launcher.launched[0]
    engine.reset(TEAM)
    engine.step(*orders(4))
    controller._killed[5] = True  # enemy 1 died in the fight
    engine.step(*orders(4))
    units = engine.reset(CROWD)
    create_1, kill, create_2 = controller.requests["debug"]
    assert sorted(kill[0].kill_unit.tag) == [TAG_STRIDE + r for r in (0, 1, 2, 3, 4, 6, 7)]
    assert creates(create_2) == expected_creates(CROWD, engine.ally_unit_ids)
    # create and appear, two env steps, 3 x 2 loops until the killed units are gone, create and appear
    assert controller.step_counts == [1, 1, 8, 8, 2, 2, 2, 1, 1]
    assert controller.teams == [TEAM, CROWD] and controller.spawns == 2
    assert (units.n_allies, units.n_enemies) == (4, 5) and units.alive.all()
    np.testing.assert_array_equal(engine._tags, 2 * TAG_STRIDE + np.arange(9))


@pytest.mark.parametrize("fail_on", ["debug", "step"])
def test_a_protocol_error_while_creating_the_team_relaunches_and_creates_it_there(fail_on):
    first, second = gen_controller(fail_on=fail_on), gen_controller()
    engine, launcher = gen_engine(first, second)
    units = engine.reset(TEAM)
    assert engine.restarts == 1 and launcher.closed == 1 and launcher.launched == [first, second]
    assert second.teams == [TEAM] and len(second.requests["debug"]) == 1  # nothing to kill in a new game
    assert_units_equal(units, second.world.units)
    assert engine.ally_unit_ids == TeamWorld.ally_unit_ids


def test_a_game_lost_mid_episode_ends_it_and_the_next_reset_creates_the_team_in_a_new_game():
    first = gen_controller()
    second = gen_controller(error=protocol.ConnectionError)
    engine, launcher = gen_engine(first, second)
    engine.reset(TEAM)
    first.fail_on = "observe"
    with pytest.raises(GameRestarted, match="relaunched"):
        engine.step(*orders(4))
    units = engine.reset(CROWD)
    assert second.teams == [CROWD] and [creates(r) for r in second.requests["debug"]] == [
        expected_creates(CROWD, engine.ally_unit_ids)]
    assert units.alive.all() and engine.restarts == 1


def test_reset_takes_a_team_on_smacv2_maps_only():
    engine, _ = gen_engine()
    with pytest.raises(ValueError, match=r"^reset\(\) of map 10gen_protoss takes the episode's Team"):
        engine.reset()
    smac = SC2Engine("3m", 1, launcher=FakeLauncher(FakeController(ScriptedWorld([make_units(3, 3)]),
                                                                   fake_game_info())))
    with pytest.raises(ValueError, match=r"^reset\(\) of map 3m takes no team"):
        smac.reset(TEAM)
    assert smac.ally_unit_ids == {}


def test_reset_gives_up_when_the_game_never_creates_the_whole_team(monkeypatch):
    monkeypatch.setattr(sc2_engine_module, "MAX_SPAWN_LOOPS", 5)
    engine, _ = gen_engine(gen_controller(enemy_delay=99))
    with pytest.raises(RuntimeError, match="did not create the 4 allies and 4 enemies of the team within 5 "
                                           "game loops; is SMAC_Maps/32x32_flat.SC2Map SMACv2's map"):
        engine.reset(TEAM)
    engine, _ = gen_engine(gen_controller(linger_loops=99))
    engine.reset(TEAM)
    with pytest.raises(RuntimeError, match="8 units were still on map 10gen_protoss 6 game loops after"):
        engine.reset(TEAM)


# ---- backend selection ---------------------------------------------------------------------------
def test_auto_plays_smacv2_in_the_game_only_with_32x32_flat(tmp_path, monkeypatch, fallback_log):
    install = fake_install(tmp_path / "sc2")  # the game and SMAC's 3m: a SMAC-only install
    monkeypatch.setenv("SC2PATH", str(install))
    map_file = install / "Maps" / "SMAC_Maps" / "32x32_flat.SC2Map"
    assert sc2_missing("10gen_zerg") == f"no map file {map_file}"
    assert select_backend("auto", "10gen_zerg") == "builtin"
    (record,) = fallback_log.records
    assert record.levelno == logging.WARNING and "\n" not in record.getMessage()
    assert record.getMessage().startswith(f"backend=auto: no map file {map_file}, so 10gen_zerg runs on the "
                                          "built-in simulator")
    with pytest.raises(ValueError, match=f"^backend=sc2 needs StarCraft II with {map_file}, not found"):
        select_backend("sc2", "10gen_protoss")
    fake_install(install, "32x32_flat")
    assert [select_backend("auto", m) for m in ("10gen_zerg", "terran_10_vs_11", "3m")] == ["sc2"] * 3
    assert select_backend("auto", "8m") == "builtin"  # SMAC's own map files are still looked for by name


def test_make_engine_builds_the_game_engine_for_a_10gen_map(tmp_path, monkeypatch):
    monkeypatch.setenv("SC2PATH", str(fake_install(tmp_path, "32x32_flat")))
    launcher = FakeLauncher(gen_controller())
    engine = make_engine("auto", "10gen_terran", 3, 8, difficulty="7", launcher=launcher)
    assert isinstance(engine, SC2Engine) and engine.generated
    assert launcher.launched[0].requests["create_game"][0].random_seed == 3
    terran = Team(("marine", "medivac"), ((9.0, 16.0), (8.0, 16.0)), ("marauder",), ((23.0, 16.0),))
    units = engine.reset(terran)
    np.testing.assert_array_equal(units.unit_type, [engine.ally_unit_ids["marine"], engine.ally_unit_ids["medivac"],
                                                    STOCK_ID_OF_NAME["marauder"]])


# ---- the game logic on top of both engines -------------------------------------------------------
@pytest.mark.parametrize("race", ["protoss", "terran", "zerg"])
def test_smacv2_env_over_sc2_engine_equals_env_over_the_simulator(race):
    """SMACv2's wrapper over SC2Engine on a fake game holding the simulator plays exactly what it plays
    over the simulator seen through protobuf's float32 fields: same draws, obs, state, rewards, stats."""
    map_name, seed = f"10gen_{race}", 3
    sim = BuiltinEngine(map_name, seed)
    game = FakeController(sim, world_game_info(sim))
    sc2 = SC2Engine(map_name, seed, launcher=FakeLauncher(game))
    config = {"n_units": 5, "n_enemies": 5,
              "team_gen": {"dist_type": "weighted_teams", "unit_types": list(RACE_UNITS[race]),
                           "weights": [0.45, 0.45, 0.1], "observe": True},
              "start_positions": {"dist_type": "surrounded_and_reflect", "p": 0.5, "map_x": 32, "map_y": 32}}
    if race == "zerg":
        config["team_gen"]["exception_unit_types"] = ["baneling"]
    env_sc2, env_ref = (StarCraftCapabilityEnvWrapper(map_name=map_name, capability_config=config, seed=seed,
                                                      engine=engine, conic_fov=False, use_unit_ranges=True,
                                                      obs_own_pos=True, min_attack_range=2)
                        for engine in (sc2, Float32Engine(map_name, seed)))
    dealt = play_in_lockstep(env_sc2, env_ref, episodes=3)
    assert dealt > 0  # damage was dealt, so the compared states really changed
    # Both kinds of start: reflected points, and allies sharing the centre (surrounded).
    assert {len(set(team.ally_xy)) == 1 for team in game.teams} == {True, False}

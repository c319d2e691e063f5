"""SC2Engine (real StarCraft II through pysc2) against a fake game, and backend selection.

No game is needed: tests/sc2_fakes.py answers with real s2clientprotocol messages built from
the built-in simulator's state, so the raw-unit round trip can be compared with the simulator.
"""
import logging
import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

# The engine before pysc2: it makes s2clientprotocol importable under any protobuf implementation.
from envs.starcraft.sc2client import sc2_engine as sc2_engine_module
from envs.starcraft.sc2client.sc2_engine import (ABILITY_ATTACK, ABILITY_HEAL, ABILITY_MOVE, ABILITY_STOP,
                                       SC2Engine, decode_pathing_grid, decode_terrain_height, launch_sc2)
from envs.starcraft.game.engine import BuiltinEngine, GameRestarted
from envs.starcraft.interface.backend import make_engine, select_backend
from envs.starcraft.sc2client.install import installed_by_launcher, sc2_install_dir
from envs.starcraft.interface.starcraft2 import StarCraft2Env
from pysc2 import maps as pysc2_maps
from pysc2 import run_configs
from pysc2.lib import protocol
from pysc2.lib.sc_process import SC2LaunchError
from pysc2.run_configs import platforms as pysc2_platforms
from s2clientprotocol import common_pb2 as sc_common
from s2clientprotocol import sc2api_pb2 as sc_pb
from sc2_fakes import (TAG_STRIDE, FakeController, FakeLauncher, Float32Engine, ScriptedWorld,
                       assert_units_equal, encode_game_info, fake_game_info, fake_install, make_units,
                       orders, play_in_lockstep, units_copy, world_game_info)

REPO = Path(__file__).resolve().parents[1]


def world(map_name: str = "3m", seed: int = 3) -> BuiltinEngine:
    return BuiltinEngine(map_name, seed)


def fake_engine(map_name: str = "3m", seed: int = 3, *controllers: FakeController, **kwargs):
    """An SC2Engine over fake games (default: one holding the simulator for map_name, seed)."""
    if not controllers:
        sim = world(map_name, seed)
        controllers = (FakeController(sim, world_game_info(sim)),)
    launcher = FakeLauncher(*controllers)
    return SC2Engine(map_name, seed, launcher=launcher, **kwargs), launcher


def commands(controller: FakeController) -> list:
    return [a.action_raw.unit_command for a in controller.requests["actions"][-1].actions]


# ---- map geometry ------------------------------------------------------------------------------
def test_pathing_and_height_decode_to_x_y_indexed_grids():
    map_x, map_y = 40, 24  # not square, so a swapped axis cannot pass
    rng = np.random.default_rng(0)
    pathable = rng.random((map_x, map_y)) < 0.5
    height = rng.integers(0, 256, (map_x, map_y)).astype(np.uint8)
    raw = encode_game_info(pathable, height, (0, 0, map_x, map_y)).start_raw
    np.testing.assert_array_equal(decode_pathing_grid(raw.pathing_grid, map_x, map_y), pathable)
    np.testing.assert_allclose(decode_terrain_height(raw.terrain_height, map_x, map_y), height / 255.0)
    # 1 bit per cell, rows of y, most significant bit first: cell (x=0, y=0) is bit 7 of byte 0.
    single = np.zeros((map_x, map_y), dtype=bool)
    single[0, 0] = True
    assert encode_game_info(single, height, (0, 0, map_x, map_y)).start_raw.pathing_grid.data[0] == 0x80


def test_height_image_is_read_y_flipped_as_smac_does():
    map_x, map_y = 8, 8
    image = sc_common.ImageData(bits_per_pixel=8, data=bytes(range(64)))
    image.size.x, image.size.y = map_x, map_y
    height = decode_terrain_height(image, map_x, map_y)
    # Stored byte (row r, column c) = r * 8 + c lands at [x=c][y=7-r].
    assert height[2, 7] == pytest.approx(2 / 255)
    assert height[2, 0] == pytest.approx((7 * 8 + 2) / 255)


def test_legacy_8bit_pathing_is_inverted_and_y_flipped():
    map_x, map_y = 8, 6
    blocked_stored = np.zeros((map_y, map_x), dtype=np.uint8)  # rows of y as stored
    blocked_stored[0, 3] = 255  # stored row 0, column 3
    image = sc_common.ImageData(bits_per_pixel=8, data=blocked_stored.tobytes())
    grid = decode_pathing_grid(image, map_x, map_y)
    assert grid.shape == (map_x, map_y)
    assert not grid[3, map_y - 1] and grid.sum() == map_x * map_y - 1


def test_engine_reads_map_size_playable_area_and_grids():
    pathable = np.zeros((32, 32), dtype=bool)
    pathable[:, 8:24] = True
    height = np.full((32, 32), 51, dtype=np.uint8)
    info = encode_game_info(pathable, height, (1, 2, 31, 29))
    engine, _ = fake_engine("3m", 3, FakeController(world(), info))
    assert (engine.map_x, engine.map_y) == (32, 32)
    assert (engine.max_distance_x, engine.max_distance_y) == (30.0, 27.0)
    np.testing.assert_array_equal(engine.pathing_grid, pathable)
    np.testing.assert_allclose(engine.terrain_height, 0.2)


# ---- launch ------------------------------------------------------------------------------------
def test_launch_creates_smac_map_against_builtin_ai_and_joins_raw():
    engine, launcher = fake_engine("2s_vs_1sc", 7, FakeController(world("2s_vs_1sc"), fake_game_info()),
                                   difficulty="5")
    controller = launcher.launched[0]
    create = controller.requests["create_game"][0]
    assert create.local_map.map_path == "SMAC_Maps/2s_vs_1sc.SC2Map"
    assert create.local_map.map_data == b"map bytes of SMAC_Maps/2s_vs_1sc.SC2Map"
    assert create.realtime is False and create.random_seed == 7
    assert [p.type for p in create.player_setup] == [sc_pb.Participant, sc_pb.Computer]
    assert create.player_setup[1].race == sc_common.Zerg
    assert create.player_setup[1].difficulty == sc_pb.Hard
    join = controller.requests["join_game"][0]
    assert join.race == sc_common.Protoss
    assert join.options.raw and not join.options.score
    assert launcher.map_paths == ["SMAC_Maps/2s_vs_1sc.SC2Map"]


def test_reset_gives_up_when_the_map_never_spawns_both_armies(monkeypatch):
    monkeypatch.setattr(sc2_engine_module, "MAX_SPAWN_LOOPS", 5)
    engine, _ = fake_engine("3m", 1, FakeController(world(), fake_game_info(), enemy_delay=99))
    with pytest.raises(RuntimeError, match="did not spawn 3 allies and 3 enemies within 5 game loops"):
        engine.reset()


def test_no_seed_leaves_the_game_seed_unset_and_bad_difficulty_fails():
    _, launcher = fake_engine("3m", None, FakeController(world(), fake_game_info()))
    assert not launcher.launched[0].requests["create_game"][0].HasField("random_seed")
    with pytest.raises(ValueError, match="unknown difficulty '11'; choose one of: 1, 2"):
        fake_engine("3m", 1, difficulty="11")


def test_launch_sc2_looks_for_the_game_binary_under_sc2path(tmp_path, monkeypatch):
    monkeypatch.setenv("SC2PATH", str(fake_install(tmp_path)))
    monkeypatch.setattr("platform.system", lambda: "Linux")
    with pytest.raises(SC2LaunchError, match="No SC2 binary found at: .*Versions/Base75689/SC2_x64"):
        launch_sc2(None, (640, 480))


def test_smac_maps_are_registered_with_pysc2():
    smac_map = pysc2_maps.get("3s5z_vs_3s6z")
    assert smac_map.path == "SMAC_Maps/3s5z_vs_3s6z.SC2Map"
    assert (smac_map.players, smac_map.step_mul, smac_map.game_steps_per_episode) == (2, 8, 0)


# ---- unit tables -------------------------------------------------------------------------------
def test_reset_waits_for_both_armies_and_matches_the_simulated_units():
    engine, launcher = fake_engine("2s3z", 5)
    reference = Float32Engine("2s3z", 5)
    assert_units_equal(engine.reset(), reference.reset())
    controller = launcher.launched[0]
    assert controller.step_counts == [1]  # enemies appeared one game loop after the allies
    assert engine.units.n_allies == 5 and engine.units.alive.all()
    assert engine.units.shield_max[0] > 0  # Protoss shields came through


def test_steps_follow_the_simulator_through_the_raw_protocol():
    """Random orders: SC2Engine over the fake holds the simulator's units after every step."""
    engine, _ = fake_engine("MMM", 11)
    reference = Float32Engine("MMM", 11)
    got, want = engine.reset(), reference.reset()
    rng = np.random.default_rng(1)
    n_al, n = got.n_allies, got.n_allies + got.n_enemies
    for _ in range(25):
        kind = rng.integers(0, 4, n_al).astype(np.int8)
        tx, ty = got.x[:n_al] + rng.normal(0, 2, n_al), got.y[:n_al] + rng.normal(0, 2, n_al)
        target = rng.integers(n_al, n, n_al)
        alive_enemies = np.flatnonzero(got.alive[n_al:]) + n_al
        if alive_enemies.size == 0:
            break
        target = alive_enemies[target % alive_enemies.size]
        args = (kind, tx.astype(np.float32).astype(float), ty.astype(np.float32).astype(float), target)
        got, want = engine.step(*args), reference.step(*args)
        assert_units_equal(got, want)
    assert not got.alive.all()  # the fight went on long enough to kill someone


def test_hand_made_raw_units_fill_the_table_field_by_field():
    start = make_units(3, 3, unit_type=[1971, 1972, 1972, 74, 73, 73], x=[9.5, 10.25, 8, 22.0, 23.75, 24],
                       y=[16.0, 15.5, 17, 16.25, 17.0, 15], health=[80, 37.5, 100, 80, 100, 3],
                       health_max=[80, 100, 100, 80, 100, 100], shield=[40, 12, 50, 80, 0, 0.5],
                       shield_max=[80, 50, 50, 80, 50, 50], energy=[0, 0, 0, 50, 0, 0],
                       weapon_cooldown=[5.25, 0, 0, 0, 19, 0])
    after = make_units(3, 3, unit_type=[1971, 1972, 1972, 74, 73, 73], x=[9.0, 10.25, 8, 21.5, 23.75, 24],
                       y=[16.0, 15.5, 17, 16.25, 17.0, 15], health=[70, 0, 100, 80, 100, 0],
                       health_max=[80, 100, 100, 80, 100, 100], shield=[0, 0, 50, 80, 0, 0],
                       shield_max=[80, 50, 50, 80, 50, 50], energy=[0, 0, 0, 50, 0, 0],
                       weapon_cooldown=[0, 0, 0, 3, 11, 0], alive=[True, False, True, True, True, False])
    engine, _ = fake_engine("3m", 1, FakeController(ScriptedWorld([start, after]), fake_game_info()))
    assert_units_equal(units_copy(engine.reset()), start)
    got = engine.step(*orders(3))
    assert_units_equal(got, after)
    assert got.health[1] == 0 and got.shield[5] == 0 and got.x[0] == 9.0 and got.x[3] == 21.5


def test_missing_unit_is_dead_with_zero_health_and_shield():
    engine, launcher = fake_engine("2s3z", 2)
    engine.reset()
    controller = launcher.launched[0]
    controller._killed[6] = True  # enemy 1 vanishes from the observation
    units = engine.step(*orders(5))
    assert not units.alive[6] and units.health[6] == 0 and units.shield[6] == 0
    assert units.alive[[0, 1, 2, 3, 4, 5, 7, 8, 9]].all()


def test_enemy_order_is_observation_order_and_allies_come_first():
    engine, _ = fake_engine("MMM", 4)
    units = engine.reset()
    reference = Float32Engine("MMM", 4).reset()
    np.testing.assert_array_equal(units.unit_type, reference.unit_type)
    np.testing.assert_array_equal(engine._tags, TAG_STRIDE + np.arange(20))


# ---- raw commands ------------------------------------------------------------------------------
def test_orders_become_raw_unit_commands():
    engine, launcher = fake_engine("MMM", 6)
    engine.reset()
    controller = launcher.launched[0]
    tag = controller.tag
    engine.step(*orders(10, a0=(1, 0, 0, -1), a1=(2, 12.5, 17.25, -1), a2=(3, 0, 0, 13),
                        a9=(4, 0, 0, 4)))
    sent = commands(controller)
    assert [c.ability_id for c in sent] == [ABILITY_STOP, ABILITY_MOVE, ABILITY_ATTACK, ABILITY_HEAL]
    assert [list(c.unit_tags) for c in sent] == [[tag(0)], [tag(1)], [tag(2)], [tag(9)]]
    assert all(not c.queue_command for c in sent)
    assert not sent[0].HasField("target_world_space_pos") and not sent[0].HasField("target_unit_tag")
    assert (sent[1].target_world_space_pos.x, sent[1].target_world_space_pos.y) == (12.5, 17.25)
    assert sent[2].target_unit_tag == tag(13) and sent[3].target_unit_tag == tag(4)


def test_no_command_for_no_order_or_dead_allies_but_the_game_still_steps():
    engine, launcher = fake_engine("3m", 1)
    engine.reset()
    controller = launcher.launched[0]
    controller._killed[1] = True
    engine.step(*orders(3))  # ally 1 now reads dead
    engine.step(*orders(3, a1=(1, 0, 0, -1), a2=(2, 9.0, 16.0, -1)))
    sent = commands(controller)
    assert [(c.ability_id, list(c.unit_tags)) for c in sent] == [(ABILITY_MOVE, [controller.tag(2)])]
    assert len(controller.requests["actions"][0].actions) == 0
    assert controller.step_counts == [1, 8, 8]  # spawn loop + two env steps


def test_unknown_order_kind_fails_with_one_line():
    engine, _ = fake_engine()
    engine.reset()
    with pytest.raises(ValueError, match="unknown order kind 7 for ally 0"):
        engine.step(*orders(3, a0=(7, 0, 0, -1)))


# ---- episodes, restarts, replays ----------------------------------------------------------------
def test_second_reset_kills_all_units_and_waits_for_the_respawn():
    engine, launcher = fake_engine("3m", 9)
    engine.reset()
    controller = launcher.launched[0]
    controller._killed[4] = True
    engine.step(*orders(3))
    units = engine.reset()
    kill = controller.requests["debug"][0][0].kill_unit
    assert sorted(kill.tag) == [TAG_STRIDE + r for r in (0, 1, 2, 3, 5)]  # the alive units of spawn 1
    assert controller.step_counts == [1, 8, 2, 1]  # spawn loop, env step, settle after the kill, spawn loop
    assert controller.spawns == 2 and units.alive.all()
    np.testing.assert_array_equal(engine._tags, 2 * TAG_STRIDE + np.arange(6))


def test_protocol_error_in_step_relaunches_the_game_and_ends_the_episode():
    first = FakeController(world("3m", 2), fake_game_info())
    second = FakeController(world("3m", 2), fake_game_info())
    engine, launcher = fake_engine("3m", 2, first, second)
    engine.reset()
    first.fail_on = "step"
    with pytest.raises(GameRestarted, match="relaunched"):
        engine.step(*orders(3))
    assert engine.restarts == 1 and launcher.closed == 1 and launcher.launched == [first, second]
    units = engine.reset()
    assert units.alive.all() and second.requests["debug"] == []  # a new game needs no kill
    assert second.calls["create_game"] == 1


def test_connection_error_during_reset_relaunches_and_still_resets():
    first = FakeController(world("3m", 2), fake_game_info(), fail_on="observe", error=protocol.ConnectionError)
    second = FakeController(world("3m", 2), fake_game_info())
    engine, launcher = fake_engine("3m", 2, first, second)
    units = engine.reset()
    assert engine.restarts == 1 and launcher.closed == 1 and units.alive.all()
    assert_units_equal(units, Float32Engine("3m", 2).reset())


def test_save_replay_and_close_go_through_the_game_process():
    engine, launcher = fake_engine()
    pid = os.getpid()
    assert engine.save_replay("replays", "3m_env1") == f"replays/3m_env1_pid{pid}.SC2Replay"
    assert launcher.replays == [(b"fake replay", "replays", f"3m_env1_pid{pid}")]
    engine.close()
    engine.close()
    assert launcher.closed == 1


def test_replays_are_named_per_process_and_replay_dir_none_means_the_games_folder(tmp_path, monkeypatch):
    """pysc2's own save_replay (names by UTC second) under a fake install: None and "" both write to
    <SC2PATH>/Replays, and the process id keeps workers saving in the same second apart."""
    install = fake_install(tmp_path / "StarCraftII")
    monkeypatch.setenv("SC2PATH", str(install))
    monkeypatch.setattr("platform.system", lambda: "Linux")
    if not sc2_engine_module.flags.FLAGS.is_parsed():
        sc2_engine_module.flags.FLAGS(["test"])
    run_config = run_configs.get()
    sim = world()
    launcher = FakeLauncher(FakeController(sim, world_game_info(sim)))
    launcher._save_replay = run_config.save_replay
    engine = SC2Engine("3m", 1, launcher=launcher)
    path = Path(engine.save_replay(None, "3m_env0"))
    assert path.parent == install / "Replays" and path.read_bytes() == b"fake replay"
    assert path.name.startswith(f"3m_env0_pid{os.getpid()}_") and path.suffix == ".SC2Replay"
    assert Path(engine.save_replay("", "3m_env0")).parent == install / "Replays"
    assert Path(engine.save_replay(str(tmp_path / "mine"), "")).name.startswith(f"pid{os.getpid()}_")


@pytest.mark.parametrize("fail_on", ["create_game", "join_game", "game_info"])
def test_a_failed_launch_closes_the_game_it_started(fail_on):
    launcher = FakeLauncher(FakeController(world(), fake_game_info(), fail_on=fail_on))
    with pytest.raises(protocol.ProtocolError, match=f"crashed in {fail_on}"):
        SC2Engine("3m", 1, launcher=launcher)
    assert launcher.closed == 1


def test_a_failed_relaunch_closes_its_game_and_the_next_reset_launches_again():
    first = FakeController(world(), fake_game_info())
    broken = FakeController(world(), fake_game_info(), fail_on="join_game")
    third = FakeController(world(), fake_game_info())
    engine, launcher = fake_engine("3m", 2, first, broken, third)
    engine.reset()
    first.fail_on = "step"
    with pytest.raises(protocol.ProtocolError, match="crashed in join_game"):
        engine.step(*orders(3))  # the crash relaunches, and that launch fails too
    assert launcher.closed == 2  # the crashed game and the half-started one
    with pytest.raises(RuntimeError, match="StarCraft II is not running"):
        engine.step(*orders(3))
    assert engine.reset().alive.all() and launcher.launched == [first, broken, third]


def test_reset_after_close_launches_a_new_game():
    first, second = FakeController(world(), fake_game_info()), FakeController(world(), fake_game_info())
    engine, launcher = fake_engine("3m", 2, first, second)
    engine.reset()
    engine.close()
    assert launcher.closed == 1
    with pytest.raises(RuntimeError, match="StarCraft II is not running .* reset\\(\\) launches it"):
        engine.step(*orders(3))
    units = engine.reset()
    assert units.alive.all() and launcher.launched == [first, second] and engine.restarts == 0
    assert second.requests["debug"] == []  # a new game spawns its armies without a kill
    engine.step(*orders(3))
    engine.close()
    assert launcher.closed == 2


def test_env_reset_after_close_plays_again():
    env = StarCraft2Env(map_name="3m", seed=1, engine=fake_engine("3m", 1, FakeController(world(), fake_game_info()),
                                                                  FakeController(world(), fake_game_info()))[0])
    env.reset()
    env.close()
    env.reset()
    assert env.step([1, 1, 1])[1] is False
    env.close()


def test_one_exit_hook_per_engine_however_often_it_relaunched(monkeypatch):
    hooks = []  # atexit's semantics: unregister removes every registration of an equal callable
    monkeypatch.setattr(sc2_engine_module, "atexit", SimpleNamespace(
        register=hooks.append, unregister=lambda f: hooks.__setitem__(slice(None), [h for h in hooks if h != f])))
    first, second = FakeController(world(), fake_game_info()), FakeController(world(), fake_game_info())
    engine, _ = fake_engine("3m", 2, first, second)
    engine.reset()
    first.fail_on = "step"
    with pytest.raises(GameRestarted):
        engine.step(*orders(3))
    assert hooks == [engine.close]
    engine.close()
    assert hooks == []  # a closed engine can be garbage-collected
    with pytest.raises(protocol.ProtocolError):
        SC2Engine("3m", 1, launcher=FakeLauncher(FakeController(world(), fake_game_info(), fail_on="join_game")))
    assert hooks == []  # nor does an engine whose launch failed stay referenced


def test_last_attacks_are_units_that_fired_at_their_engaged_target():
    start = make_units(3, 3, weapon_cooldown=[0, 0, 10, 0, 0, 0])
    after = make_units(3, 3, weapon_cooldown=[13, 0, 2, 12, 0, 14])
    # Everyone but enemy 5 is engaged; ally 1 did not fire (cooldown 0), ally 2's cooldown only
    # counted down 8 loops, enemy 5 fired at nothing the game reports.
    scripted = ScriptedWorld([start, after], attacks=[[(0, 4), (1, 3), (2, 4), (3, 1), (4, 0)]])
    engine, _ = fake_engine("3m", 1, FakeController(scripted, fake_game_info()))
    engine.reset()
    engine.step(*orders(3))
    assert sorted(engine.last_attacks) == [(0, 4), (3, 1)]
    engine.reset()
    assert engine.last_attacks == []


# ---- the game logic on top of both engines -------------------------------------------------------
@pytest.mark.parametrize("map_name", ["3m", "2s3z", "MMM"])
def test_env_over_sc2_engine_equals_env_over_the_simulator(map_name):
    seed = 21
    env_sc2 = StarCraft2Env(map_name=map_name, seed=seed, engine=fake_engine(map_name, seed)[0])
    env_ref = StarCraft2Env(map_name=map_name, seed=seed, engine=Float32Engine(map_name, seed))

    def same_pathing(env_sc2, env_ref):
        np.testing.assert_array_equal(env_sc2.pathing_grid, env_ref.pathing_grid)

    total_reward = play_in_lockstep(env_sc2, env_ref, episodes=2, check_episode=same_pathing)
    assert total_reward > 0  # damage was dealt, so the compared states really changed


# ---- backend selection -------------------------------------------------------------------------
def test_auto_picks_sc2_only_when_game_and_map_are_installed(tmp_path, monkeypatch):
    monkeypatch.setenv("SC2PATH", str(tmp_path / "none"))
    assert select_backend("auto", "3m") == "builtin"
    monkeypatch.setenv("SC2PATH", str(fake_install(tmp_path / "sc2")))
    assert select_backend("auto", "3m") == "sc2"
    assert select_backend("auto", "8m") == "builtin"  # map file missing
    assert select_backend("builtin", "3m") == "builtin"
    assert select_backend("sc2", "3m") == "sc2"
    shutil.rmtree(tmp_path / "sc2" / "Versions" / "Base75689")
    assert select_backend("auto", "3m") == "builtin"  # no game build


def test_auto_uses_the_default_install_folder_without_sc2path(tmp_path, monkeypatch):
    monkeypatch.delenv("SC2PATH", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr("platform.system", lambda: "Linux")
    assert select_backend("auto", "3m") == "builtin"
    fake_install(tmp_path / "StarCraftII")
    assert select_backend("auto", "3m") == "sc2"


def test_backend_errors_are_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("SC2PATH", str(tmp_path))
    with pytest.raises(ValueError) as err:
        select_backend("sc2", "3m")
    message = str(err.value)
    assert "\n" not in message and "SC2PATH" in message and "scripts/install_sc2.sh" in message
    assert f"no StarCraft II build {tmp_path / 'Versions' / 'Base*'}" in message


def test_auto_says_in_one_line_which_file_it_looked_for(tmp_path, monkeypatch, fallback_log):
    install = fake_install(tmp_path / "sc2")  # the game and 3m only, like a maps pack without 1c3s5z
    monkeypatch.setenv("SC2PATH", str(install))
    assert select_backend("auto", "1c3s5z") == "builtin"
    assert select_backend("auto", "1c3s5z") == "builtin"  # said once per process
    (record,) = fallback_log.records
    map_file = install / "Maps" / "SMAC_Maps" / "1c3s5z.SC2Map"
    assert record.levelno == logging.WARNING and "\n" not in record.getMessage()
    assert record.getMessage().startswith(f"backend=auto: no map file {map_file}, so 1c3s5z runs on the "
                                          "built-in simulator")
    fallback_log.clear()
    monkeypatch.setenv("SC2PATH", str(tmp_path / "none"))
    assert select_backend("auto", "3m") == "builtin"
    (record,) = fallback_log.records
    assert record.levelno == logging.INFO
    assert f"backend=auto: no StarCraft II build {tmp_path / 'none' / 'Versions' / 'Base*'}, so 3m" in record.getMessage()
    fallback_log.clear()
    monkeypatch.setenv("SC2PATH", str(install))
    assert select_backend("auto", "3m") == "sc2" and select_backend("builtin", "8m") == "builtin"
    assert fallback_log.records == []  # nothing to say when nothing fell back


def execute_info(path: Path, executable: str) -> Path:
    """ExecuteInfo.txt as the Battle.net launcher writes it (with the NUL byte the game appends)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(f"locale = enUS\nexecutable = {executable}\nbuild = 75689\0".encode())
    return path


def test_auto_finds_the_game_where_pysc2_does_on_windows(tmp_path, monkeypatch):
    """Windows: pysc2 reads the install folder from <Documents>/StarCraft II/ExecuteInfo.txt, 3 folders
    above the binary; without one, C:/Program Files (x86)/StarCraft II."""
    monkeypatch.delenv("SC2PATH", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr("platform.system", lambda: "Windows")
    assert sc2_install_dir() == Path("C:/Program Files (x86)/StarCraft II")
    install = fake_install(tmp_path / "Games" / "StarCraft II")
    binary = str(install / "Versions" / "Base75689" / "SC2_x64.exe").replace("/", "\\")  # as Windows writes it
    info = execute_info(tmp_path / "Documents" / "StarCraft II" / "ExecuteInfo.txt", binary)
    assert sc2_install_dir() == install
    assert str(sc2_install_dir()) == pysc2_platforms._read_execute_info(str(tmp_path / "Documents"), 3)
    assert installed_by_launcher(info, 3) == install
    assert select_backend("auto", "3m") == "sc2"


def test_auto_finds_the_game_where_pysc2_does_on_macos(tmp_path, monkeypatch):
    """macOS: ~/Library/Application Support/Blizzard/StarCraft II/ExecuteInfo.txt, 6 folders above the
    binary inside SC2.app; without one, /Applications/StarCraft II."""
    monkeypatch.delenv("SC2PATH", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr("platform.system", lambda: "Darwin")
    assert sc2_install_dir() == Path("/Applications/StarCraft II")
    install = fake_install(tmp_path / "Apps" / "StarCraft II")
    blizzard = tmp_path / "Library" / "Application Support" / "Blizzard"
    execute_info(blizzard / "StarCraft II" / "ExecuteInfo.txt",
                 str(install / "Versions" / "Base75689" / "SC2.app" / "Contents" / "MacOS" / "SC2"))
    assert sc2_install_dir() == install
    assert str(sc2_install_dir()) == pysc2_platforms._read_execute_info(str(blizzard), 6)
    assert select_backend("auto", "3m") == "sc2"
    monkeypatch.setenv("SC2PATH", str(tmp_path / "elsewhere"))  # SC2PATH wins, as in pysc2
    assert sc2_install_dir() == tmp_path / "elsewhere"


def test_a_launcher_file_without_an_executable_line_is_ignored(tmp_path):
    assert installed_by_launcher(tmp_path / "missing.txt", 3) is None
    (tmp_path / "ExecuteInfo.txt").write_bytes(b"locale = enUS\0")
    assert installed_by_launcher(tmp_path / "ExecuteInfo.txt", 3) is None
    with pytest.raises(ValueError, match=r"^unknown backend 'pysc2'; choose one of: auto, sc2, builtin$"):
        select_backend("pysc2", "3m")


def test_make_engine_builds_the_selected_engine(tmp_path, monkeypatch):
    monkeypatch.setenv("SC2PATH", str(tmp_path))
    assert isinstance(make_engine("auto", "3m", 1, 8, difficulty="7"), BuiltinEngine)
    fake_install(tmp_path)
    launcher = FakeLauncher(FakeController(world(), fake_game_info()))
    engine = make_engine("auto", "3m", 1, 8, difficulty="3", launcher=launcher)
    assert isinstance(engine, SC2Engine) and launcher.launched
    assert launcher.launched[0].requests["create_game"][0].player_setup[1].difficulty == sc_pb.Medium

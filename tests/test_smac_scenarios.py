"""SMAC map scenarios (armies, enemy orders, terrain; facts sheet §8, §11) and the replay GIF."""
import itertools
import os
import re
import types

import numpy as np
import pytest
from PIL import Image

from envs.starcraft.game import unit_ids as ids
from envs.starcraft.game.maps import MAP_REGISTRY
from envs.starcraft.interface.replay import HEADER_PX, RecordingEngine, ReplayRecorder
from envs.starcraft.render import main as render_main
from envs.starcraft.render import record_battles
from envs.starcraft.game.scenarios import MAP_NAMES, get_scenario

M, MD, MV = ids.MARINE, ids.MARAUDER, ids.MEDIVAC
S, Z, C = ids.STALKER, ids.ZEALOT, ids.COLOSSUS
ZG, B, SC = ids.ZERGLING, ids.BANELING, ids.SPINE_CRAWLER

# Facts sheet §8: allies in agent-id order (sorted by RL type id), enemies in creation order,
# as (count, type) runs.
COMPOSITIONS = {
    "3m": ([(3, ids.MARINE_RL)], [(3, M)]),
    "8m": ([(8, ids.MARINE_RL)], [(8, M)]),
    "25m": ([(25, ids.MARINE_RL)], [(25, M)]),
    "5m_vs_6m": ([(5, ids.MARINE_RL)], [(6, M)]),
    "8m_vs_9m": ([(8, ids.MARINE_RL)], [(9, M)]),
    "10m_vs_11m": ([(10, ids.MARINE_RL)], [(11, M)]),
    "27m_vs_30m": ([(27, ids.MARINE_RL)], [(30, M)]),
    "MMM": ([(2, ids.MARAUDER_RL), (7, ids.MARINE_RL), (1, ids.MEDIVAC_RL)],
            [(7, M), (2, MD), (1, MV)]),
    "MMM2": ([(2, ids.MARAUDER_RL), (7, ids.MARINE_RL), (1, ids.MEDIVAC_RL)],
             [(8, M), (3, MD), (1, MV)]),
    "2s3z": ([(2, ids.STALKER_RL), (3, ids.ZEALOT_RL)], [(2, S), (3, Z)]),
    "3s5z": ([(3, ids.STALKER_RL), (5, ids.ZEALOT_RL)], [(3, S), (5, Z)]),
    "3s5z_vs_3s6z": ([(3, ids.STALKER_RL), (5, ids.ZEALOT_RL)], [(3, S), (6, Z)]),
    "3s_vs_3z": ([(3, ids.STALKER_RL)], [(3, Z)]),
    "3s_vs_4z": ([(3, ids.STALKER_RL)], [(4, Z)]),
    "3s_vs_5z": ([(3, ids.STALKER_RL)], [(5, Z)]),
    "1c3s5z": ([(1, ids.COLOSSUS_RL), (3, ids.STALKER_RL), (5, ids.ZEALOT_RL)],
               [(1, C), (3, S), (5, Z)]),
    "2m_vs_1z": ([(2, ids.MARINE_RL)], [(1, Z)]),
    "corridor": ([(6, ids.ZEALOT_RL)], [(24, ZG)]),
    "6h_vs_8z": ([(6, ids.HYDRALISK_RL)], [(8, Z)]),
    "2s_vs_1sc": ([(2, ids.STALKER_RL)], [(1, SC)]),
    "so_many_baneling": ([(7, ids.ZEALOT_RL)], [(32, B)]),
    "bane_vs_bane": ([(4, ids.BANELING_RL), (20, ids.ZERGLING_RL)], [(20, ZG), (4, B)]),
    "2c_vs_64zg": ([(2, ids.COLOSSUS_RL)], [(64, ZG)]),
}

# Facts sheet §11, transcribed in its own notation: "y a..b: [c,d) [e,f)".
PATHABLE_ROWS = {
    "band": "y 8..23: [0,32)",
    "open": "y 0..31: [0,32)",
    "octagon": "y 6..7: [10,22); y 8..9: [8,24); y 10..21: [6,26); y 22..23: [8,24); "
               "y 24..25: [10,22)",
    "2s_vs_1sc": "y 8..19: [8,20); y 20..21: [10,18); y 22..23: [12,16); y 0..5: [0,32); "
                 "y 6..7: [0,6) [22,32); y 8..19: [0,6) [22,32); y 20..21: [0,6) [22,32); "
                 "y 22..23: [0,8) [20,32); y 24..25: [0,10) [18,32); y 26..31: [0,32)",
    "6h_vs_8z": "y 8..9: [10,20); y 10..17: [8,22); y 18..19: [10,20); y 0..5: [0,32); "
                "y 6..7: [0,8) [22,32); y 8..19: [0,6) [24,32); y 20..21: [0,8) [22,32); "
                "y 22..31: [0,32)",
    "corridor": "y 2..11: [2,12); y 12..13: [12,14); y 14..15: [14,26); y 16..17: [14,28); "
                "y 18..21: [12,30); y 22..23: [14,30); y 24..25: [16,30); y 26..27: [18,30); "
                "y 28..29: [20,30)",
    "so_many_baneling": "y 2..3: [2,8); y 4..7: [2,12); y 8..11: [4,16); y 12..15: [8,20); "
                        "y 16..17: [10,20); y 18..21: [14,26); y 22..23: [16,30); "
                        "y 24..27: [20,30); y 28..29: [22,30)",
    "2c_vs_64zg": "y 6..7: [4,28); y 8..9: [2,30); y 10..11: [0,32); y 12..13: [0,4) [28,32); "
                  "y 14..15: [0,32); y 16..17: [2,30); y 18..19: [8,24)",
}
# Pathable cell counts worked out by hand from the row specs above.
PATHABLE_COUNTS = {"band": 512, "open": 1024, "octagon": 352, "2s_vs_1sc": 896,
                   "6h_vs_8z": 904, "corridor": 332, "so_many_baneling": 300, "2c_vs_64zg": 336}
LAYOUTS = {
    **{name: "band" for name in ("3m", "8m", "25m", "5m_vs_6m", "8m_vs_9m", "10m_vs_11m",
                                 "27m_vs_30m", "MMM", "MMM2", "2s3z", "3s5z", "3s5z_vs_3s6z",
                                 "1c3s5z")},
    "3s_vs_3z": "open", "3s_vs_4z": "open", "3s_vs_5z": "open",
    "2m_vs_1z": "octagon", "bane_vs_bane": "octagon",
    "2s_vs_1sc": "2s_vs_1sc", "6h_vs_8z": "6h_vs_8z", "corridor": "corridor",
    "so_many_baneling": "so_many_baneling", "2c_vs_64zg": "2c_vs_64zg",
}


def _runs(unit_types) -> list[tuple[int, int]]:
    return [(len(list(group)), unit) for unit, group in itertools.groupby(unit_types)]


def _grid_from_notation(spec: str) -> np.ndarray:
    grid = np.zeros((32, 32), dtype=bool)
    for row in spec.split(";"):
        y_first, y_last = map(int, re.search(r"y (\d+)\.\.(\d+):", row).groups())
        for x_start, x_stop in re.findall(r"\[(\d+),(\d+)\)", row):
            grid[int(x_start):int(x_stop), y_first:y_last + 1] = True
    return grid


def _cell(point) -> tuple[int, int]:
    return int(point[0]), int(point[1])


def test_all_23_smac_maps_are_known():
    assert len(MAP_NAMES) == 23
    assert set(MAP_NAMES) == set(COMPOSITIONS) == set(LAYOUTS)


@pytest.mark.parametrize("map_name", sorted(COMPOSITIONS))
def test_armies_match_the_registry_compositions(map_name):
    scenario = get_scenario(map_name)
    allies, enemies = COMPOSITIONS[map_name]
    assert _runs(sorted(scenario.ally_types)) == allies
    assert _runs(scenario.enemy_types) == enemies
    assert len(scenario.ally_spawns) == scenario.n_allies
    assert len(scenario.enemy_spawns) == scenario.n_enemies
    params = MAP_REGISTRY[map_name]
    assert (scenario.n_allies, scenario.n_enemies) == (params.n_agents, params.n_enemies)


def test_ally_creation_order_follows_the_map_scripts():
    assert _runs(get_scenario("MMM").ally_types) == [
        (7, ids.MARINE_RL), (2, ids.MARAUDER_RL), (1, ids.MEDIVAC_RL)]
    assert _runs(get_scenario("bane_vs_bane").ally_types) == [
        (20, ids.ZERGLING_RL), (4, ids.BANELING_RL)]
    assert get_scenario("2m_vs_1z").ally_spawns == ((13.0, 12.0), (19.0, 12.0))


@pytest.mark.parametrize("map_name", sorted(COMPOSITIONS))
def test_spawns_and_order_points_are_pathable(map_name):
    scenario = get_scenario(map_name)
    points = scenario.ally_spawns + scenario.enemy_spawns + scenario.enemy_order.points
    for point in points:
        assert scenario.pathing_grid[_cell(point)], f"{map_name}: {point} is not pathable"


@pytest.mark.parametrize("map_name", sorted(LAYOUTS))
def test_pathing_grid_matches_the_layout_rows(map_name):
    scenario = get_scenario(map_name)
    layout = LAYOUTS[map_name]
    assert scenario.layout == layout
    assert scenario.pathing_grid.shape == (32, 32) and scenario.pathing_grid.dtype == bool
    assert int(scenario.pathing_grid.sum()) == PATHABLE_COUNTS[layout]
    np.testing.assert_array_equal(scenario.pathing_grid, _grid_from_notation(PATHABLE_ROWS[layout]))


def test_corridor_choke_is_two_by_two():
    grid = get_scenario("corridor").pathing_grid
    for y in (12, 13):
        assert np.flatnonzero(grid[:, y]).tolist() == [12, 13]
    assert np.flatnonzero(grid[:, 11]).tolist() == list(range(2, 12))
    assert np.flatnonzero(grid[:, 14]).tolist() == list(range(14, 26))


def test_enemy_orders():
    assert get_scenario("3m").enemy_order.kind == "attack_move"
    assert get_scenario("3m").enemy_order.points == ((9.0, 16.0),)
    assert get_scenario("corridor").enemy_order.points == ((4.47, 4.3298),)
    random_move = get_scenario("2m_vs_1z").enemy_order
    assert random_move.kind == "attack_move_random_between"
    assert random_move.points == ((13.0, 12.0), (19.0, 12.0))
    assert get_scenario("2s_vs_1sc").enemy_order.kind == "none"
    colossi = get_scenario("2c_vs_64zg")
    assert colossi.enemy_order.kind == "attack_units"
    assert [colossi.ally_types[i] for i in colossi.enemy_order.targets] == [ids.COLOSSUS_RL] * 2


def test_terrain_height_orders_the_cliff_levels():
    for name in MAP_NAMES:
        height = get_scenario(name).terrain_height
        assert height.shape == (32, 32)
        assert 0.0 <= height.min() and height.max() <= 1.0
    band = get_scenario("3m").terrain_height
    assert band[16, 16] > band[16, 2]  # arena above the void
    colossi = get_scenario("2c_vs_64zg").terrain_height
    # upper platform > ramp > side lane, which is on the lower platform's level
    assert colossi[16, 16] > colossi[5, 15] > colossi[2, 15] == colossi[16, 9]
    plateau = get_scenario("6h_vs_8z").terrain_height
    assert plateau[14, 12] > plateau[7, 12] > plateau[2, 12]  # plateau > cliff ring > low ground


def test_scenario_arrays_are_read_only():
    scenario = get_scenario("3m")
    with pytest.raises(ValueError):
        scenario.pathing_grid[0, 0] = True
    with pytest.raises(ValueError):
        scenario.terrain_height[0, 0] = 1.0


@pytest.mark.parametrize("bad_name", ["4m", "", None, 3])
def test_unknown_map_lists_the_known_maps(bad_name):
    with pytest.raises(ValueError, match=r"unknown map .*; known maps: 3m, 8m, .*2c_vs_64zg$"):
        get_scenario(bad_name)


# ------------------------------------------------------------------------------------------
# Replay recorder

ALLY_RGB = (60, 140, 255)
ENEMY_RGB = (230, 70, 60)


def _units(step: int) -> types.SimpleNamespace:
    """3 allies marching east at y = 16 and 3 enemies at x = 23; ally 2 is dead."""
    n = 6
    return types.SimpleNamespace(
        n_allies=3, unit_type=np.array([ids.MARINE_RL] * 3 + [M] * 3),
        x=np.array([9.0 + step, 9.0 + step, 9.0 + step, 23.0, 23.0, 23.0]),
        y=np.array([14.0, 16.0, 18.0, 14.0, 16.0, 18.0]),
        health=np.array([45.0, 20.0, 0.0, 45.0, 45.0, 10.0]), health_max=np.full(n, 45.0),
        shield=np.zeros(n), shield_max=np.zeros(n),
        alive=np.array([True, True, False, True, True, True]))


def _recorder(max_episodes: int = 5) -> ReplayRecorder:
    scenario = get_scenario("3m")
    return ReplayRecorder("3m", scenario.pathing_grid, scenario.terrain_height,
                          max_episodes=max_episodes)


def _record_episode(recorder: ReplayRecorder, n_frames: int) -> None:
    recorder.begin_episode()
    for step in range(n_frames):
        recorder.add_frame(_units(step), np.full(6, 0.375), attacks=[(0, 4), (3, 1)])


def test_recorder_writes_a_gif_with_one_frame_per_step(tmp_path):
    recorder = _recorder()
    _record_episode(recorder, 4)
    path = tmp_path / "replay.gif"
    assert recorder.save(str(path)) == 4
    with Image.open(path) as gif:
        assert gif.format == "GIF"
        assert gif.n_frames == 4
        assert gif.size == (32 * 16, 32 * 16 + HEADER_PX)
        first = gif.convert("RGB")
    # Ally 0 at (9, 14) and enemy 4 at (23, 16); image y grows downwards from the header.
    assert first.getpixel((9 * 16, (32 - 14) * 16 + HEADER_PX)) == ALLY_RGB
    assert first.getpixel((23 * 16, (32 - 16) * 16 + HEADER_PX)) == ENEMY_RGB
    # The void at world y = 2 is drawn darker than the pathable band at y = 10.
    void = first.getpixel((100, (32 - 2) * 16 + HEADER_PX))
    arena = first.getpixel((100, (32 - 10) * 16 + HEADER_PX))
    assert sum(void) < sum(arena)


def test_recorder_keeps_only_the_last_episodes(tmp_path):
    recorder = _recorder(max_episodes=2)
    for n_frames in (5, 3, 2):
        _record_episode(recorder, n_frames)
    assert recorder.n_episodes == 2 and recorder.n_frames == 5
    path = tmp_path / "last.gif"
    assert recorder.save(str(path)) == 5
    with Image.open(path) as gif:
        assert gif.n_frames == 5


def test_recorder_without_frames_refuses_to_save(tmp_path):
    with pytest.raises(ValueError, match="no frames recorded"):
        _recorder().save(str(tmp_path / "empty.gif"))


def test_recorder_rejects_a_bad_episode_bound():
    with pytest.raises(ValueError, match="max_episodes"):
        _recorder(max_episodes=0)



class _FakeEngine:
    """A two-marine engine of the engine contract: the ally walks east and shoots the enemy."""

    map_x = map_y = 32

    def __init__(self):
        scenario = get_scenario("3m")
        self.pathing_grid, self.terrain_height = scenario.pathing_grid, scenario.terrain_height
        self.last_attacks: list[tuple[int, int]] = []
        self.units = types.SimpleNamespace(
            n_allies=1, n_enemies=1, unit_type=np.array([ids.MARINE_RL, M]),
            x=np.zeros(2), y=np.full(2, 16.0), health=np.zeros(2), health_max=np.full(2, 45.0),
            shield=np.zeros(2), shield_max=np.zeros(2), alive=np.ones(2, dtype=bool))

    def reset(self):
        self.units.x[:] = (9.0, 23.0)
        self.units.health[:] = 45.0
        self.last_attacks = []
        return self.units

    def step(self, kind, tx, ty, target):
        self.units.x[0] += 1.0
        self.units.health[1] -= 6.0
        self.last_attacks = [(0, 1)]
        return self.units


def test_recording_engine_records_every_reset_and_step(tmp_path):
    engine = RecordingEngine(_FakeEngine(), "3m", max_episodes=5)
    assert engine.map_x == 32  # everything else is the wrapped engine's
    orders = (np.zeros(1, np.int8), np.zeros(1), np.zeros(1), np.zeros(1, np.int64))
    for n_steps in (3, 1):
        engine.reset()
        for _ in range(n_steps):
            engine.step(*orders)
    assert engine.recorder.n_episodes == 2 and engine.recorder.n_frames == 6
    path = engine.save_replay(str(tmp_path / "replays"), "3m")
    assert re.fullmatch(r"3m_\d{4}-\d\d-\d\d-\d\d-\d\d-\d\d_\d+\.gif", os.path.basename(path))
    with Image.open(path) as gif:
        assert gif.n_frames == 6
        gif.seek(3)  # episode 1 after 3 steps: the marine stands at x = 12
        frame = gif.convert("RGB")
    assert frame.getpixel((12 * 16, 16 * 16 + HEADER_PX)) == ALLY_RGB


def test_focus_fire_battles_on_the_builtin_engine(tmp_path):
    engine, stats = record_battles("3m", episodes=3, seed=0)
    assert stats["battles_game"] == 3
    assert stats["battles_won"] >= 1  # focus fire beats the attack-moving built-in AI on 3m
    assert engine.recorder.n_episodes == 3 and engine.recorder.n_frames > 3
    path = tmp_path / "battle.gif"
    assert engine.recorder.save(str(path)) == engine.recorder.n_frames
    with Image.open(path) as gif:
        assert gif.n_frames == engine.recorder.n_frames


def test_recording_engine_passes_smacv2_teams_on_and_sizes_units_per_episode(tmp_path):
    from envs.starcraft.game.engine import BuiltinEngine
    from envs.starcraft.game.teams import Team

    engine = RecordingEngine(BuiltinEngine("10gen_protoss", 0), "10gen_protoss")
    left, right = ((10.0, 16.0), (10.0, 24.0)), ((22.0, 16.0), (22.0, 24.0))
    engine.reset(Team(("colossus", "zealot"), left, ("zealot", "colossus"), right))
    engine.reset(team=Team(("zealot", "colossus"), left, ("colossus", "zealot"), right))
    path = tmp_path / "gen.gif"
    assert engine.recorder.save(str(path)) == 2
    # 12 px right of (10, 16) and left of (22, 16): inside a Colossus (radius 1 = 16 px), outside a
    # Zealot (0.5 = 8 px); episode 1 has the Colossus on the left, episode 2 on the right.
    ally_side, enemy_side = (10 * 16 + 12, 16 * 16 + HEADER_PX), (22 * 16 - 12, 16 * 16 + HEADER_PX)
    with Image.open(path) as gif:
        first = gif.convert("RGB")
        gif.seek(1)
        second = gif.convert("RGB")
    assert first.getpixel(ally_side) == ALLY_RGB and second.getpixel(ally_side) != ALLY_RGB
    assert first.getpixel(enemy_side) != ENEMY_RGB and second.getpixel(enemy_side) == ENEMY_RGB


def test_focus_fire_replay_of_a_smacv2_scenario_from_the_command_line(tmp_path, capsys):
    out = tmp_path / "protoss.gif"
    render_main(["--map", "protoss_5_vs_5", "--episodes", "2", "--out", str(out)])
    printed = capsys.readouterr().out
    match = re.fullmatch(r"protoss_5_vs_5: 2 episode\(s\), won \d, (\d+) frames -> .*\n", printed)
    assert match, printed
    with Image.open(out) as gif:
        assert gif.n_frames == int(match.group(1)) > 2


def test_render_command_line_refuses_an_unknown_map(capsys):
    with pytest.raises(SystemExit) as exit_info:
        render_main(["--map", "protoss_4_vs_4"])
    assert exit_info.value.code == 2
    assert "unknown map 'protoss_4_vs_4'; SMAC's maps: 3m," in capsys.readouterr().err


def test_smacv2_env_records_replays_on_the_builtin_simulator(tmp_path):
    """What save_replay=True does on env sc2v2: record_replay wraps the built-in engine, every reset draws
    new armies, save_replay writes one GIF of the episodes (prefix: SMACv2's, with prob_obs_enemy)."""
    from envs.starcraft.interface.smacv2_configs import scenario_env

    env = scenario_env("zerg_5_vs_5", seed=0, backend="builtin", record_replay=True,
                       replay_dir=str(tmp_path), replay_prefix="run")
    for _ in range(2):
        env.reset()
        env.step([1] * env.n_agents)  # stop
    path = env.save_replay()
    env.close()
    assert re.fullmatch(r"run_1\.0_\d{4}-\d\d-\d\d-\d\d-\d\d-\d\d_\d+\.gif", os.path.basename(path))
    with Image.open(path) as gif:
        assert gif.n_frames == 4

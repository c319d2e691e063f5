"""The engine contract (see engine.py) played by real StarCraft II through pysc2's raw interface.

The game runs the SMAC map itself: its triggers spawn both armies, give the enemies their
orders and respawn everything once no unit is left. This engine only launches the game, turns
the logic's per-ally orders into raw unit commands, and reads the raw units back into the
contract's `Units` table, keyed by the unit tags seen at reset. Everything goes through one
`GameProcess`, so tests can swap the real game for a fake controller.
"""
import atexit
import functools
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from absl import flags
from pysc2 import run_configs
from pysc2.lib import protocol
from pysc2.maps import lib as maps_lib
from s2clientprotocol import common_pb2 as sc_common
from s2clientprotocol import debug_pb2 as d_pb
from s2clientprotocol import raw_pb2 as r_pb
from s2clientprotocol import sc2api_pb2 as sc_pb

from envs.starcraft.backend import GameRestarted
from envs.starcraft.engine import ORDER_ATTACK, ORDER_HEAL, ORDER_KEEP, ORDER_MOVE, ORDER_STOP, Units
from envs.starcraft.maps import MAP_REGISTRY, get_map_params

ALLY_OWNER, ENEMY_OWNER = 1, 2

# Order kinds of the engine contract -> SC2 ability ids (raw commands).
ABILITY_STOP, ABILITY_MOVE, ABILITY_ATTACK, ABILITY_HEAL = 4, 16, 23, 386
_ABILITIES = {ORDER_STOP: ABILITY_STOP, ORDER_MOVE: ABILITY_MOVE, ORDER_ATTACK: ABILITY_ATTACK,
              ORDER_HEAL: ABILITY_HEAL}

RACES = {"T": sc_common.Terran, "P": sc_common.Protoss, "Z": sc_common.Zerg, "R": sc_common.Random}
DIFFICULTIES = {
    "1": sc_pb.VeryEasy, "2": sc_pb.Easy, "3": sc_pb.Medium, "4": sc_pb.MediumHard,
    "5": sc_pb.Hard, "6": sc_pb.Harder, "7": sc_pb.VeryHard, "8": sc_pb.CheatVision,
    "9": sc_pb.CheatMoney, "A": sc_pb.CheatInsane,
}

# What a dropped or crashed game raises through pysc2's controller.
GAME_ERRORS = (protocol.ProtocolError, protocol.ConnectionError)
# Game loops to wait for the map trigger to respawn both armies before giving up.
MAX_SPAWN_LOOPS = 1000
# Loops stepped after the kill command before waiting for the respawn (as SMAC does).
KILL_SETTLE_LOOPS = 2


class SMACMap(maps_lib.Map):
    """pysc2 settings shared by every SMAC map file (found under <SC2PATH>/Maps/SMAC_Maps)."""

    directory = "SMAC_Maps"
    download = "https://github.com/oxwhirl/smac#smac-maps"
    players = 2
    step_mul = 8
    game_steps_per_episode = 0


# One pysc2 map class per registry name, so that pysc2.maps.get("3m") finds them too.
SMAC_MAPS: dict[str, type[SMACMap]] = {
    name: type(name, (SMACMap,), {"filename": name}) for name in MAP_REGISTRY
}


@dataclass
class GameProcess:
    """One running game: its controller and the run-config services the engine uses."""

    controller: Any  # pysc2 RemoteController (or a test fake with the same methods)
    map_data: Callable[[str], bytes]  # map path relative to <SC2PATH>/Maps -> file bytes
    save_replay: Callable[[bytes, str, str], str]  # (replay bytes, dir, prefix) -> saved path
    close: Callable[[], None]  # ends the game process


def launch_sc2(game_version: str | None, window_size: tuple[int, int]) -> GameProcess:
    """Start a local StarCraft II process through pysc2 (found via $SC2PATH)."""
    if not flags.FLAGS.is_parsed():  # pysc2 reads absl flags; parse none of ours
        flags.FLAGS(["marlkit"])
    run_config = run_configs.get(version=game_version)
    proc = run_config.start(window_size=window_size, want_rgb=False)
    return GameProcess(proc.controller, run_config.map_data, run_config.save_replay, proc.close)


def decode_pathing_grid(image: sc_common.ImageData, map_x: int, map_y: int) -> np.ndarray:
    """Pathing image -> bool [map_x, map_y] indexed [x][y], True = pathable.

    1 bit per cell: rows of y, most significant bit first, 1 = pathable. The legacy 8-bit
    format stores 0 = pathable and is read y-flipped, as SMAC reads it.
    """
    data = np.frombuffer(image.data, dtype=np.uint8)
    if image.bits_per_pixel == 1:
        return np.unpackbits(data)[: map_x * map_y].reshape(map_y, map_x).T.astype(bool)  # [x, y]
    blocked = data.reshape(map_y, map_x).T.astype(bool)  # [x, y]
    return ~np.flip(blocked, axis=1)


def decode_terrain_height(image: sc_common.ImageData, map_x: int, map_y: int) -> np.ndarray:
    """8-bit height image -> float [map_x, map_y] in [0, 1], y-flipped as SMAC reads it."""
    heights = np.frombuffer(image.data, dtype=np.uint8).reshape(map_y, map_x).T  # [x, y]
    return np.flip(heights, axis=1) / 255.0


def _empty_units(n_allies: int, n_enemies: int) -> Units:
    n = n_allies + n_enemies
    zeros = functools.partial(np.zeros, n, dtype=np.float64)
    return Units(
        n_allies=n_allies, n_enemies=n_enemies, unit_type=np.zeros(n, dtype=np.int64),
        x=zeros(), y=zeros(), health=zeros(), health_max=zeros(), shield=zeros(),
        shield_max=zeros(), energy=zeros(), weapon_cooldown=zeros(), alive=np.zeros(n, dtype=bool),
    )


class SC2Engine:
    """Real StarCraft II behind the engine contract; the game is launched on construction.

    `launcher` returns a fresh `GameProcess` on every call (default: `launch_sc2`); the engine
    calls it again after a ProtocolError/ConnectionError and counts that in `restarts`.
    """

    def __init__(self, map_name: str, seed: int | None, step_mul: int = 8, difficulty: str = "7",
                 game_version: str | None = None, window_size: tuple[int, int] = (1920, 1200),
                 launcher: Callable[[], GameProcess] | None = None):
        params = get_map_params(map_name)
        if difficulty not in DIFFICULTIES:
            raise ValueError(f"unknown difficulty '{difficulty}'; choose one of: {', '.join(DIFFICULTIES)}")
        self.map_name = map_name
        self.seed = seed
        self.step_mul = step_mul
        self.n_allies, self.n_enemies = params.n_agents, params.n_enemies
        self._ally_race, self._enemy_race = RACES[params.a_race], RACES[params.b_race]
        self._difficulty = DIFFICULTIES[difficulty]
        self._launcher = launcher or functools.partial(launch_sc2, game_version, tuple(window_size))
        self.restarts = 0
        self.last_attacks: list[tuple[int, int]] = []
        self.units = _empty_units(self.n_allies, self.n_enemies)
        self._tags = np.zeros(self.n_allies + self.n_enemies, dtype=np.uint64)
        self._row_of_tag: dict[int, int] = {}
        self._game: GameProcess | None = None
        self._launch()
        atexit.register(self.close)  # never leave a game process behind

    # ---- game process ----------------------------------------------------------------------
    def _launch(self) -> None:
        """Start the game, create the SMAC map against the built-in AI, join with raw access."""
        self._game = self._launcher()
        controller = self._game.controller
        map_path = SMAC_MAPS[self.map_name]().path
        create = sc_pb.RequestCreateGame(
            local_map=sc_pb.LocalMap(map_path=map_path, map_data=self._game.map_data(map_path)),
            realtime=False,
        )
        if self.seed is not None:
            create.random_seed = self.seed
        create.player_setup.add(type=sc_pb.Participant)
        create.player_setup.add(type=sc_pb.Computer, race=self._enemy_race, difficulty=self._difficulty)
        controller.create_game(create)
        controller.join_game(sc_pb.RequestJoinGame(
            race=self._ally_race, options=sc_pb.InterfaceOptions(raw=True, score=False)))
        self._read_game_info(controller.game_info().start_raw)
        self._armies_spawned = False  # a new game spawns its armies without a kill

    def _read_game_info(self, start_raw: r_pb.StartRaw) -> None:
        self.map_x, self.map_y = start_raw.map_size.x, start_raw.map_size.y
        p0, p1 = start_raw.playable_area.p0, start_raw.playable_area.p1
        self.max_distance_x, self.max_distance_y = float(p1.x - p0.x), float(p1.y - p0.y)
        self.pathing_grid = decode_pathing_grid(start_raw.pathing_grid, self.map_x, self.map_y)
        self.terrain_height = decode_terrain_height(start_raw.terrain_height, self.map_x, self.map_y)

    def _relaunch(self) -> None:
        """Replace a broken game process by a new one (SMAC's full restart)."""
        self._close_game()
        self._launch()
        self.restarts += 1

    def _close_game(self) -> None:
        if self._game is not None:
            self._game.close()
            self._game = None

    # ---- engine contract -------------------------------------------------------------------
    def reset(self) -> Units:
        """Kill every unit, wait for the map trigger to respawn both armies, bind their tags."""
        try:
            obs = self._respawn()
        except GAME_ERRORS:
            self._relaunch()
            obs = self._respawn()
        self._armies_spawned = True
        self._bind_units(obs.observation.raw_data.units)
        self.last_attacks = []
        return self.units

    def step(self, kind: np.ndarray, tx: np.ndarray, ty: np.ndarray, target: np.ndarray) -> Units:
        """Send one raw command per ordered, alive ally, then advance step_mul game loops."""
        request = sc_pb.RequestAction(actions=self._commands(kind, tx, ty, target))
        controller = self._game.controller
        try:
            controller.actions(request)
            controller.step(self.step_mul)
            obs = controller.observe()
        except GAME_ERRORS as err:
            self._relaunch()
            raise GameRestarted(f"StarCraft II stopped answering ({err}); relaunched it") from err
        previous_cooldown = self.units.weapon_cooldown.copy()
        self._update_units(obs.observation.raw_data.units)
        self.last_attacks = self._shots_fired(previous_cooldown, obs.observation.raw_data.units)
        return self.units

    def save_replay(self, replay_dir: str, prefix: str) -> str:
        """Write the game's replay into replay_dir (relative paths: under <SC2PATH>/Replays)."""
        return self._game.save_replay(self._game.controller.save_replay(), replay_dir, prefix)

    def close(self) -> None:
        self._close_game()

    # ---- internals -------------------------------------------------------------------------
    def _respawn(self) -> sc_pb.ResponseObservation:
        controller = self._game.controller
        if self._armies_spawned:
            alive_tags = [int(t) for t in self._tags[self.units.alive]]
            controller.debug([d_pb.DebugCommand(kill_unit=d_pb.DebugKillUnit(tag=alive_tags))])
            controller.step(KILL_SETTLE_LOOPS)
        return self._wait_for_armies()

    def _wait_for_armies(self) -> sc_pb.ResponseObservation:
        """Step one loop at a time until the observation holds both complete armies."""
        controller = self._game.controller
        for _ in range(MAX_SPAWN_LOOPS):
            obs = controller.observe()
            owners = [u.owner for u in obs.observation.raw_data.units]
            if owners.count(ALLY_OWNER) == self.n_allies and owners.count(ENEMY_OWNER) == self.n_enemies:
                return obs
            controller.step(1)
        raise RuntimeError(
            f"map {self.map_name} did not spawn {self.n_allies} allies and {self.n_enemies} enemies "
            f"within {MAX_SPAWN_LOOPS} game loops; is Maps/SMAC_Maps/{self.map_name}.SC2Map a SMAC map?"
        )

    def _bind_units(self, raw_units) -> None:
        """Fix the table's rows for this episode: allies, then enemies, in observation order."""
        allies = [u for u in raw_units if u.owner == ALLY_OWNER]
        enemies = [u for u in raw_units if u.owner == ENEMY_OWNER]
        self._tags = np.array([u.tag for u in allies + enemies], dtype=np.uint64)
        self._row_of_tag = {int(tag): row for row, tag in enumerate(self._tags)}
        self.units.alive[:] = False
        self._update_units(raw_units)

    def _update_units(self, raw_units) -> None:
        """Copy the observed fields into the table; a unit missing from the observation is dead."""
        u = self.units
        seen = np.zeros(len(self._tags), dtype=bool)
        for raw in raw_units:
            row = self._row_of_tag.get(raw.tag)
            if row is None:
                continue
            seen[row] = True
            u.unit_type[row] = raw.unit_type
            u.x[row], u.y[row] = raw.pos.x, raw.pos.y
            u.health[row], u.health_max[row] = raw.health, raw.health_max
            u.shield[row], u.shield_max[row] = raw.shield, raw.shield_max
            u.energy[row], u.weapon_cooldown[row] = raw.energy, raw.weapon_cooldown
        u.alive[:] = seen
        u.health[~seen] = 0.0
        u.shield[~seen] = 0.0

    def _commands(self, kind: np.ndarray, tx: np.ndarray, ty: np.ndarray,
                  target: np.ndarray) -> list[sc_pb.Action]:
        """One ActionRawUnitCommand (queue_command False) per alive ally with an order."""
        actions = []
        for ally in np.flatnonzero((np.asarray(kind) != ORDER_KEEP) & self.units.alive[: self.n_allies]):
            order = int(kind[ally])
            if order not in _ABILITIES:
                raise ValueError(f"unknown order kind {order} for ally {ally}; kinds are 0 keep, "
                                 "1 stop, 2 move, 3 attack, 4 heal")
            command = r_pb.ActionRawUnitCommand(ability_id=_ABILITIES[order],
                                                unit_tags=[int(self._tags[ally])], queue_command=False)
            if order == ORDER_MOVE:
                command.target_world_space_pos.x = float(tx[ally])
                command.target_world_space_pos.y = float(ty[ally])
            elif order in (ORDER_ATTACK, ORDER_HEAL):
                command.target_unit_tag = int(self._tags[int(target[ally])])
            actions.append(sc_pb.Action(action_raw=r_pb.ActionRaw(unit_command=command)))
        return actions

    def _shots_fired(self, previous_cooldown: np.ndarray, raw_units) -> list[tuple[int, int]]:
        """(attacker, target) rows for units that fired during the last step, for the renderer.

        SC2 does not report hits; a unit fired if its weapon cooldown rose above what counting
        down step_mul loops leaves, and its target is the unit it is engaged with.
        """
        counted_down = np.maximum(previous_cooldown - self.step_mul, 0.0)
        fired = self.units.alive & (self.units.weapon_cooldown > counted_down + 1e-3)
        engaged = {}
        for raw in raw_units:
            row, target = self._row_of_tag.get(raw.tag), self._row_of_tag.get(raw.engaged_target_tag)
            if row is not None and target is not None:
                engaged[row] = target
        return [(int(row), engaged[row]) for row in np.flatnonzero(fired) if row in engaged]

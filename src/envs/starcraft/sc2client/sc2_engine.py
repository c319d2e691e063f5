"""The engine contract (see engine.py) played by real StarCraft II through pysc2's raw interface.

A SMAC map runs itself: its triggers spawn both armies, give the enemies their orders and
respawn everything once no unit is left. SMACv2's 10gen maps are all played on its empty map
32x32_flat, which spawns nothing: at every reset this engine kills whatever is left and creates
the drawn team (envs.starcraft.game.teams.Team) with debug commands, as SMACv2 does; the map's
triggers then give the enemies their orders. Otherwise the engine only launches the game, turns
the logic's per-ally orders into raw unit commands, and reads the raw units back into the
contract's `Units` table, keyed by the unit tags seen at reset. Everything goes through one
`GameProcess`, so tests can swap the real game for a fake controller.

Game processes: every game this module launches is started by `start_game_process`, in a session
of its own (a Ctrl-C or SIGTERM sent to the run's process group does not reach it) and, on
Linux, with a death signal: it is SIGKILLed when the process that started it dies, however it
dies. The engine ends its game in close(), at interpreter exit, when a launch fails half-way and
before replacing a crashed game.
"""
import atexit
import contextlib
import functools
import logging
import os
import subprocess
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np

from ... import death_signal
# s2clientprotocol's modules only import under the compiled protobuf once rebuilt: before pysc2.
from . import sc2_protocol  # noqa: F401
from absl import flags
from pysc2 import run_configs
from pysc2.lib import protocol, sc_process
from pysc2.maps import lib as maps_lib
from s2clientprotocol import common_pb2 as sc_common
from s2clientprotocol import debug_pb2 as d_pb
from s2clientprotocol import raw_pb2 as r_pb
from s2clientprotocol import sc2api_pb2 as sc_pb

from ..game.engine import ORDER_ATTACK, ORDER_HEAL, ORDER_KEEP, ORDER_MOVE, ORDER_STOP, GameRestarted, Units
from ..game.maps import GEN_MAPS, MAP_REGISTRY, gen_map_of, get_gen_map_params, get_map_params, is_gen_map
from ..game.teams import GEN_UNIT_NAMES, Team
from ..game.unit_ids import STOCK_ID_OF_NAME
from .install import map_file_stem

logger = logging.getLogger(__name__)

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
# Game loops to wait for the map trigger to respawn both armies (or for the game to create the
# team, or to remove killed units) before giving up.
MAX_SPAWN_LOOPS = 1000
# Loops stepped after the kill command before waiting for the respawn (as SMAC does); on SMACv2's
# map, the loops of each step while waiting for the killed units to go (as SMACv2 does).
KILL_SETTLE_LOOPS = 2


class SMACMap(maps_lib.Map):
    """pysc2 settings shared by every SMAC and SMACv2 map file (found under <SC2PATH>/Maps/SMAC_Maps)."""

    directory = "SMAC_Maps"
    download = "https://github.com/oxwhirl/smac#smac-maps"
    players = 2
    step_mul = 8
    game_steps_per_episode = 0


# One pysc2 map class per registry name, so that pysc2.maps.get("3m") finds them too; the 10gen
# maps name SMACv2's map file 32x32_flat, as SMACv2 registers them.
SMAC_MAPS: dict[str, type[SMACMap]] = {
    name: type(name, (SMACMap,), {"filename": map_file_stem(name)}) for name in (*MAP_REGISTRY, *GEN_MAPS)
}


def rl_unit_ids(n_unit_types: int) -> dict[str, int]:
    """Raw type ids of SMACv2's allied RL copies, from the number of unit types the game reports.

    SMACv2's map defines its nine RL copies after every stock unit, in the order of
    GEN_UNIT_NAMES, so they hold the last nine ids (SMACv2's _init_ally_unit_types).
    """
    first = n_unit_types - len(GEN_UNIT_NAMES)
    return {name: first + index for index, name in enumerate(GEN_UNIT_NAMES)}


def team_order(raw_units: list, names: tuple[str, ...], points: tuple, type_ids: dict[str, int]) -> list:
    """One side's created raw units in the team's order (row i holds a unit of type names[i]).

    The game reports units in an order of its own and may push a unit off its point when others
    stand there. So each unit, in observation order, takes the free row of its type whose point
    is nearest to it (of equally near rows, the first): units of one type created at one point are
    interchangeable, and keep their observation order.
    """
    rows: list = [None] * len(names)
    for raw in raw_units:
        free = [i for i, name in enumerate(names) if rows[i] is None and type_ids[name] == raw.unit_type]
        nearest = min(free, key=lambda i: ((points[i][0] - raw.pos.x) ** 2 + (points[i][1] - raw.pos.y) ** 2, i))
        rows[nearest] = raw
    return rows


@dataclass
class GameProcess:
    """One running game: its controller and the run-config services the engine uses."""

    controller: Any  # pysc2 RemoteController (or a test fake with the same methods)
    map_data: Callable[[str], bytes]  # map path relative to <SC2PATH>/Maps -> file bytes
    save_replay: Callable[[bytes, str, str], str]  # (replay bytes, dir, prefix) -> saved path
    close: Callable[[], None]  # ends the game process


def start_game_process(args: list[str], **popen_kwargs: Any) -> subprocess.Popen:
    """Start a game process (StarCraft II, or a stand-in in tests) that only its engine ends.

    It runs in a session of its own: a Ctrl-C or SIGTERM sent to the run's process group (a
    terminal, systemd, Slurm) does not reach it, so the game stays up while the run saves, and
    the env's close() ends it. On Linux it also gets SIGKILL as its death signal, so it cannot
    outlive the process that started it (a killed main process takes its env workers, and they
    their games, with it). The kernel ties that signal to the starting *thread*, so it is armed
    only for games started on a main thread (where marlkit steps its envs); a game started on
    another thread is ended by close() or at exit only. popen_kwargs go to subprocess.Popen.
    """
    popen_kwargs["start_new_session"] = True
    if death_signal.AVAILABLE and threading.current_thread() is threading.main_thread():
        popen_kwargs["preexec_fn"] = functools.partial(death_signal.die_with_parent, os.getpid())
    return subprocess.Popen(args, **popen_kwargs)


class _GameStartingSubprocess:
    """What pysc2's sc_process sees as its `subprocess` module while launch_sc2 runs: the real
    module, except that Popen is start_game_process."""

    Popen = staticmethod(start_game_process)

    def __getattr__(self, name: str) -> Any:
        return getattr(subprocess, name)


_PYSC2_LAUNCH_LOCK = threading.Lock()


@contextlib.contextmanager
def _pysc2_starts_games_our_way() -> Iterator[None]:
    """Within the block, pysc2 starts StarCraft II with start_game_process (its sc_process calls
    subprocess.Popen); nothing else is changed, and only for the block."""
    with _PYSC2_LAUNCH_LOCK:
        saved = sc_process.subprocess
        sc_process.subprocess = _GameStartingSubprocess()
        try:
            yield
        finally:
            sc_process.subprocess = saved


def launch_sc2(game_version: str | None, window_size: tuple[int, int]) -> GameProcess:
    """Start a local StarCraft II process through pysc2 (found as pysc2 finds it: $SC2PATH, else the
    platform's install), with start_game_process. pysc2 ends the game itself when it cannot connect."""
    if not flags.FLAGS.is_parsed():  # pysc2 reads absl flags; parse none of ours
        flags.FLAGS(["marlkit"])
    run_config = run_configs.get(version=game_version)
    with _pysc2_starts_games_our_way():
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
    calls it again after a ProtocolError/ConnectionError and counts that in `restarts`. close()
    ends the game; a reset() after it launches a new one. For SMACv2's maps (a 10gen map or a
    scenario name) reset takes the episode's Team and `ally_unit_ids` holds the RL copies' ids.
    """

    def __init__(self, map_name: str, seed: int | None, step_mul: int = 8, difficulty: str = "7",
                 game_version: str | None = None, window_size: tuple[int, int] = (1920, 1200),
                 launcher: Callable[[], GameProcess] | None = None):
        self.generated = is_gen_map(map_name)
        params = get_gen_map_params(map_name) if self.generated else get_map_params(map_name)
        if difficulty not in DIFFICULTIES:
            raise ValueError(f"unknown difficulty '{difficulty}'; choose one of: {', '.join(DIFFICULTIES)}")
        self.map_name = map_name
        self._map_path = SMAC_MAPS[gen_map_of(map_name) if self.generated else map_name]().path
        self.ally_unit_ids: dict[str, int] = {}  # SMACv2's maps: unit name -> raw id of its RL copy
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

    # ---- game process ----------------------------------------------------------------------
    def _launch(self) -> None:
        """Start the game, create the SMAC map against the built-in AI, join with raw access.

        A failure after the game started (map, create, join, game info; Ctrl-C too) ends the game
        before it propagates: nothing else could reach it, since the engine is not built yet or
        its env never sees it.
        """
        self._game = self._launcher()
        atexit.unregister(self.close)  # once, however often the game was relaunched
        atexit.register(self.close)  # never leave a game process behind (close() unregisters it)
        try:
            self._start_game(self._game.controller)
        except BaseException:
            self._close_game_quietly()
            atexit.unregister(self.close)  # nothing left to close (a later reset() registers again)
            raise

    def _start_game(self, controller) -> None:
        """Create the map against the built-in AI, join with raw access, read the map (and on
        SMACv2's map the RL copies' ids)."""
        create = sc_pb.RequestCreateGame(
            local_map=sc_pb.LocalMap(map_path=self._map_path, map_data=self._game.map_data(self._map_path)),
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
        if self.generated:
            self.ally_unit_ids = rl_unit_ids(len(controller.data().units))
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
        game, self._game = self._game, None  # forgotten first: a failing close is not retried forever
        if game is not None:
            game.close()

    def _close_game_quietly(self) -> None:
        """End the game while another exception is on its way; a failure here is only logged."""
        try:
            self._close_game()
        except Exception as error:  # noqa: BLE001 - the original error matters more
            logger.warning(f"could not close StarCraft II after a failed launch: {error!r}")

    def _running_game(self) -> GameProcess:
        if self._game is None:
            raise RuntimeError("StarCraft II is not running (the engine was closed, or launching the game "
                               "failed): reset() launches it")
        return self._game

    # ---- engine contract -------------------------------------------------------------------
    def reset(self, team: Team | None = None) -> Units:
        """Start an episode and bind its units' tags to the table's rows.

        On a SMAC map (no team): kill every unit and wait for the map trigger to respawn both
        armies. On SMACv2's map (its team): kill every unit, create the team's and wait for them.
        After close() (or a failed launch) the game is launched again first, as on construction;
        a game that fails meanwhile is relaunched and the episode started there.
        """
        if (team is not None) != self.generated:
            raise ValueError(f"reset() of map {self.map_name} takes " + (
                "the episode's Team (a SMACv2 map)" if self.generated else "no team (a SMAC map)"))
        if self._game is None:
            self._launch()
        try:
            allies, enemies = self._start_episode(team)
        except GAME_ERRORS:
            self._relaunch()
            allies, enemies = self._start_episode(team)
        self._bind_units(allies, enemies)
        self.last_attacks = []
        return self.units

    def step(self, kind: np.ndarray, tx: np.ndarray, ty: np.ndarray, target: np.ndarray) -> Units:
        """Send one raw command per ordered, alive ally, then advance step_mul game loops."""
        request = sc_pb.RequestAction(actions=self._commands(kind, tx, ty, target))
        controller = self._running_game().controller
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

    def save_replay(self, replay_dir: str | None, prefix: str) -> str:
        """Write the game's replay into replay_dir (relative paths and "" or None: under
        <SC2PATH>/Replays) as <prefix>_pid<process id>_<UTC time>.SC2Replay; returns its path.

        pysc2 names replays by the second: the process id keeps apart the parallel runner's
        workers, which save at the same moment (their prefixes also differ, by env index).
        """
        game = self._running_game()
        prefix = f"{prefix}_pid{os.getpid()}" if prefix else f"pid{os.getpid()}"
        return game.save_replay(game.controller.save_replay(), replay_dir or "", prefix)

    def close(self) -> None:
        """End the game process (idempotent); a later reset() launches a new one."""
        atexit.unregister(self.close)
        self._close_game()

    # ---- internals -------------------------------------------------------------------------
    def _start_episode(self, team: Team | None) -> tuple[list, list]:
        """Both armies of the new episode as raw units, each in the order of the table's rows."""
        if team is None:
            raw_units = self._respawn().observation.raw_data.units
            self._armies_spawned = True
            return ([u for u in raw_units if u.owner == ALLY_OWNER],
                    [u for u in raw_units if u.owner == ENEMY_OWNER])
        self._clear_map()
        raw_units = self._create_team(team)
        return (team_order([u for u in raw_units if u.owner == ALLY_OWNER], team.ally_units, team.ally_xy,
                           self.ally_unit_ids),
                team_order([u for u in raw_units if u.owner == ENEMY_OWNER], team.enemy_units, team.enemy_xy,
                           STOCK_ID_OF_NAME))

    def _clear_map(self) -> None:
        """Kill every unit on the map and step until the game shows none (SMACv2's _kill_all_units)."""
        controller = self._game.controller
        tags = [u.tag for u in controller.observe().observation.raw_data.units]
        if tags:
            controller.debug([d_pb.DebugCommand(kill_unit=d_pb.DebugKillUnit(tag=tags))])
        loops = 0
        while tags:
            if loops >= MAX_SPAWN_LOOPS:
                raise RuntimeError(f"{len(tags)} units were still on map {self.map_name} {loops} game loops "
                                   "after they were killed")
            controller.step(KILL_SETTLE_LOOPS)
            loops += KILL_SETTLE_LOOPS
            tags = [u.tag for u in controller.observe().observation.raw_data.units]

    def _create_team(self, team: Team) -> list:
        """Create every unit of the team with one debug command each (owner 1 allies, 2 enemies, at
        its point), step one game loop, then one at a time until all exist (SMACv2's init_units);
        the raw units of both sides."""
        sides = ((ALLY_OWNER, team.ally_units, team.ally_xy, self.ally_unit_ids),
                 (ENEMY_OWNER, team.enemy_units, team.enemy_xy, STOCK_ID_OF_NAME))
        commands = [
            d_pb.DebugCommand(create_unit=d_pb.DebugCreateUnit(
                unit_type=type_ids[name], owner=owner, pos=sc_common.Point2D(x=x, y=y), quantity=1))
            for owner, names, points, type_ids in sides for name, (x, y) in zip(names, points)
        ]
        wanted = Counter((c.create_unit.owner, c.create_unit.unit_type) for c in commands)
        controller = self._game.controller
        controller.debug(commands)
        for _ in range(MAX_SPAWN_LOOPS):
            controller.step(1)
            raw_units = controller.observe().observation.raw_data.units
            if Counter((u.owner, u.unit_type) for u in raw_units if u.owner in (ALLY_OWNER, ENEMY_OWNER)) == wanted:
                return raw_units
        raise RuntimeError(f"StarCraft II did not create the {len(team.ally_units)} allies and "
                           f"{len(team.enemy_units)} enemies of the team within {MAX_SPAWN_LOOPS} game loops; "
                           f"is {self._map_path} SMACv2's map?")

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

    def _bind_units(self, allies: list, enemies: list) -> None:
        """Fix the table's rows for this episode: the allies, then the enemies, in the given order."""
        self.n_allies, self.n_enemies = len(allies), len(enemies)
        if (self.units.n_allies, self.units.n_enemies) != (self.n_allies, self.n_enemies):
            self.units = _empty_units(self.n_allies, self.n_enemies)
        self._tags = np.array([u.tag for u in allies + enemies], dtype=np.uint64)
        self._row_of_tag = {int(tag): row for row, tag in enumerate(self._tags)}
        self.units.alive[:] = False
        self._update_units(allies + enemies)

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

"""A fake StarCraft II for SC2Engine tests: real s2clientprotocol messages, no game.

`FakeController` plays the game side of pysc2's RemoteController on top of a `world`, any
object with the engine contract (reset/step/last_attacks, step_mul). The world's unit table is
shown as raw units with tags, raw unit commands are turned back into the contract's order
arrays, and the map is imitated by its file name. A SMAC map's trigger: armies appear over two
game loops (allies first) after game creation and after every unit was killed (world.reset()).
SMACv2's map (32x32_flat) spawns nothing: debug create-unit commands are turned back into a
Team, and the world's reset(team) units appear over two game loops after the next step; the
world then also needs `ally_unit_ids`, which the fake's static data (data()) reproduces.

`StandInGame` adds a real game process to that: a small Python program started the way the engine
starts StarCraft II (start_game_process), which records how it was started and the signals it got,
so that tests can check that no game outlives its run.
"""
import functools
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np

# The engine first: it makes s2clientprotocol importable under any protobuf implementation.
from envs.starcraft.sc2client.sc2_engine import (ABILITY_ATTACK, ABILITY_HEAL, ABILITY_MOVE, ABILITY_STOP,
                                       ALLY_OWNER, ENEMY_OWNER, GameProcess, start_game_process)
from envs.starcraft.sc2client.install import GEN_MAP_FILE
from envs.starcraft.game.engine import ORDER_ATTACK, ORDER_HEAL, ORDER_MOVE, ORDER_STOP, BuiltinEngine, Units
from envs.starcraft.game.teams import GEN_UNIT_NAMES, Team
from envs.starcraft.game.unit_ids import GEN_RL_BASE, STOCK_ID_OF_NAME
from pysc2.lib import protocol, sc_process, static_data
from s2clientprotocol import data_pb2 as data_pb
from s2clientprotocol import sc2api_pb2 as sc_pb

_KIND_OF_ABILITY = {ABILITY_STOP: ORDER_STOP, ABILITY_MOVE: ORDER_MOVE, ABILITY_ATTACK: ORDER_ATTACK,
                    ABILITY_HEAL: ORDER_HEAL}
TAG_STRIDE = 1000  # tags of spawn k are k * TAG_STRIDE + row: new tags on every respawn
FLOAT_FIELDS = ("x", "y", "health", "health_max", "shield", "shield_max", "energy", "weapon_cooldown")


def units_copy(units: Units, dtype=np.float64) -> Units:
    """A detached copy of a unit table, its float columns passed through `dtype`."""
    floats = {name: np.array(getattr(units, name), dtype=dtype).astype(np.float64) for name in FLOAT_FIELDS}
    return Units(n_allies=units.n_allies, n_enemies=units.n_enemies, unit_type=np.array(units.unit_type),
                 alive=np.array(units.alive), **floats)


def assert_units_equal(got: Units, want: Units) -> None:
    """Equal tables; positions and the like only compared for the units alive."""
    assert (got.n_allies, got.n_enemies) == (want.n_allies, want.n_enemies)
    np.testing.assert_array_equal(got.unit_type, want.unit_type)
    np.testing.assert_array_equal(got.alive, want.alive)
    for name in FLOAT_FIELDS:
        g, w = getattr(got, name), getattr(want, name)
        if name in ("health", "shield"):  # a dead unit reads 0 on both sides
            np.testing.assert_array_equal(g, w, err_msg=name)
        else:
            np.testing.assert_array_equal(g[want.alive], w[want.alive], err_msg=name)


def make_units(n_allies: int, n_enemies: int, **columns) -> Units:
    """A hand-made table: Marines in a row at y 16 unless columns (lists of n values) say otherwise."""
    n = n_allies + n_enemies
    table = {"unit_type": [1974] * n_allies + [48] * n_enemies, "x": 9.0 + np.arange(n),
             "y": [16.0] * n, "health": [45.0] * n, "health_max": [45.0] * n, "shield": [0.0] * n,
             "shield_max": [0.0] * n, "energy": [0.0] * n, "weapon_cooldown": [0.0] * n,
             "alive": [True] * n}
    table.update(columns)
    dtypes = {"unit_type": np.int64, "alive": bool}
    return Units(n_allies=n_allies, n_enemies=n_enemies,
                 **{k: np.array(v, dtype=dtypes.get(k, np.float64)) for k, v in table.items()})


def float32_team(team: Team) -> Team:
    """The team as the game receives it: creation points are float32 in DebugCreateUnit."""
    def f32(points):
        return tuple((float(np.float32(x)), float(np.float32(y))) for x, y in points)

    return Team(team.ally_units, f32(team.ally_xy), team.enemy_units, f32(team.enemy_xy))


class Float32Engine:
    """A BuiltinEngine seen through protobuf's float32 fields (raw unit values, move targets and,
    on SMACv2's maps, creation points).

    An SC2Engine over a fake game holding an identical BuiltinEngine must produce bit-identical
    unit tables to this one: the fake path only adds the protocol round trip.
    """

    def __init__(self, map_name: str, seed: int):
        self.inner = BuiltinEngine(map_name, seed)
        inner = self.inner
        self.map_x, self.map_y = inner.map_x, inner.map_y
        self.max_distance_x, self.max_distance_y = inner.max_distance_x, inner.max_distance_y
        self.pathing_grid, self.terrain_height = inner.pathing_grid, inner.terrain_height

    @property
    def last_attacks(self) -> list[tuple[int, int]]:
        return self.inner.last_attacks

    @property
    def ally_unit_ids(self) -> dict[str, int]:
        return self.inner.ally_unit_ids

    def reset(self, team: Team | None = None) -> Units:
        units = self.inner.reset() if team is None else self.inner.reset(float32_team(team))
        return units_copy(units, np.float32)

    def step(self, kind, tx, ty, target) -> Units:
        tx32, ty32 = np.asarray(tx, np.float32).astype(np.float64), np.asarray(ty, np.float32).astype(np.float64)
        return units_copy(self.inner.step(kind, tx32, ty32, target), np.float32)

    def close(self) -> None:
        self.inner.close()


def encode_game_info(pathable: np.ndarray, height: np.ndarray,
                     playable: tuple[int, int, int, int]) -> sc_pb.ResponseGameInfo:
    """ResponseGameInfo the way SC2 sends it: 1-bit pathing rows (MSB first), 8-bit heights.

    pathable: bool [map_x, map_y]; height: uint8 [map_x, map_y] indexed [x][y], as the engine
    should decode them (the height image is stored y-flipped, as SMAC reads it).
    """
    map_x, map_y = pathable.shape
    info = sc_pb.ResponseGameInfo(map_name="fake")
    raw = info.start_raw
    raw.map_size.x, raw.map_size.y = map_x, map_y
    raw.playable_area.p0.x, raw.playable_area.p0.y, raw.playable_area.p1.x, raw.playable_area.p1.y = playable
    raw.pathing_grid.bits_per_pixel = 1
    raw.pathing_grid.size.x, raw.pathing_grid.size.y = map_x, map_y
    raw.pathing_grid.data = np.packbits(pathable.T.astype(np.uint8)).tobytes()  # rows of y
    raw.terrain_height.bits_per_pixel = 8
    raw.terrain_height.size.x, raw.terrain_height.size.y = map_x, map_y
    raw.terrain_height.data = np.flip(height, axis=1).T.astype(np.uint8).tobytes()  # rows of y
    return info


class FakeController:
    """The subset of pysc2's RemoteController that SC2Engine uses, over a contract engine.

    observe() lists the units in the world's row order, or last row first with `reversed_order`
    (the real game's order is its own); units killed by a debug command are still listed for
    `linger_loops` game loops.
    """

    def __init__(self, world, game_info: sc_pb.ResponseGameInfo, fail_on: str | None = None,
                 enemy_delay: int = 1, error: type[Exception] = protocol.ProtocolError,
                 reversed_order: bool = False, linger_loops: int = 0):
        self.world = world
        self.info = game_info
        self.fail_on = fail_on  # method name that raises `error` on its next call
        self.error = error
        self.enemy_delay = enemy_delay  # game loops between the allies' and the enemies' spawn
        self.reversed_order = reversed_order
        self.linger_loops = linger_loops
        self._lingering = 0  # game loops the units of the last kill command are still listed
        self._last_killed = np.zeros(0, dtype=bool)
        self.requests: dict[str, list] = {"create_game": [], "join_game": [], "actions": [], "debug": []}
        self.calls = Counter()
        self.spawns = 0
        self.step_counts: list[int] = []  # game loops asked for by each step() call
        self.teams: list[Team] = []  # the teams created by debug commands, in order
        self.spawning_map = True  # a SMAC map; SMACv2's is known from the created game's map path
        self._units = None
        self._killed = np.zeros(0, dtype=bool)
        self._hidden_loops = 0
        self._orders = None
        self._created: list = []  # DebugCreateUnit commands waiting for the next game loop

    def _enter(self, method: str) -> None:
        self.calls[method] += 1
        if self.fail_on == method:
            self.fail_on = None
            raise self.error(f"fake game crashed in {method}")

    def _spawn(self, team: Team | None = None) -> None:
        self._units = self.world.reset() if team is None else self.world.reset(team)
        self.spawns += 1
        self._killed = np.zeros(len(self._units.x), dtype=bool)
        self._last_killed = np.zeros(len(self._units.x), dtype=bool)
        self._hidden_loops = self.enemy_delay

    def tag(self, row: int) -> int:
        return self.spawns * TAG_STRIDE + row

    def row(self, tag: int) -> int:
        assert tag // TAG_STRIDE == self.spawns, f"tag {tag} is from an earlier spawn"
        return tag % TAG_STRIDE

    # ---- RemoteController methods ---------------------------------------------------------
    def create_game(self, request: sc_pb.RequestCreateGame) -> None:
        self._enter("create_game")
        self.requests["create_game"].append(request)
        self.spawning_map = not request.local_map.map_path.endswith(f"/{GEN_MAP_FILE}.SC2Map")

    def join_game(self, request: sc_pb.RequestJoinGame) -> None:
        self._enter("join_game")
        self.requests["join_game"].append(request)
        if self.spawning_map:
            self._spawn()

    def data(self) -> static_data.StaticData:
        """The game's static data as pysc2 wraps it: one entry per unit type, ids 0.., the last
        nine the map's RL copies (SMACv2's map), numbered as the world numbers its allies."""
        self._enter("data")
        rl_ids = [self.world.ally_unit_ids[name] for name in GEN_UNIT_NAMES]
        assert rl_ids == list(range(rl_ids[0], rl_ids[0] + len(rl_ids))), "RL ids must be consecutive"
        units = [data_pb.UnitTypeData(unit_id=i, name=f"Unit{i}") for i in range(rl_ids[0])]
        units += [data_pb.UnitTypeData(unit_id=i, name=f"{name.capitalize()}_RL")
                  for i, name in zip(rl_ids, GEN_UNIT_NAMES)]
        return static_data.StaticData(sc_pb.ResponseData(units=units))

    def game_info(self) -> sc_pb.ResponseGameInfo:
        self._enter("game_info")
        return self.info

    def actions(self, request: sc_pb.RequestAction) -> None:
        self._enter("actions")
        self.requests["actions"].append(request)
        n = self._units.n_allies
        kind, target = np.zeros(n, dtype=np.int8), np.zeros(n, dtype=np.int64)
        tx, ty = np.zeros(n), np.zeros(n)
        for action in request.actions:
            cmd = action.action_raw.unit_command
            assert not cmd.queue_command and len(cmd.unit_tags) == 1
            ally = self.row(cmd.unit_tags[0])
            kind[ally] = _KIND_OF_ABILITY[cmd.ability_id]
            if cmd.HasField("target_world_space_pos"):
                tx[ally], ty[ally] = cmd.target_world_space_pos.x, cmd.target_world_space_pos.y
            if cmd.HasField("target_unit_tag"):
                target[ally] = self.row(cmd.target_unit_tag)
        self._orders = (kind, tx, ty, target)

    def step(self, count: int = 1) -> None:
        """Advance the fake game: create the ordered units, respawn after a full kill (a SMAC
        map; SMACv2's stays empty), reveal late enemies, or play."""
        self._enter("step")
        self.step_counts.append(count)
        self._lingering -= count
        if self._created:
            self.teams.append(self._created_team())
            self._created = []
            self._spawn(self.teams[-1])
        elif self._killed.all():
            if self.spawning_map:
                self._spawn()
        elif self._hidden_loops > 0:
            self._hidden_loops -= count
        else:
            assert count == self.world.step_mul, f"env steps advance step_mul loops, got {count}"
            self._units = self.world.step(*self._orders)
            self._orders = None

    def observe(self) -> sc_pb.ResponseObservation:
        self._enter("observe")
        response = sc_pb.ResponseObservation()
        u = self._units
        if u is None:  # SMACv2's map before its first units
            return response
        shown = self._hidden_loops <= 0
        engaged = dict(self.world.last_attacks) if shown else {}
        rows = range(len(u.x))
        for row in reversed(rows) if self.reversed_order else rows:
            ally = row < u.n_allies
            lingering = self._last_killed[row] and self._lingering > 0
            if not u.alive[row] or (self._killed[row] and not lingering) or not (ally or shown):
                continue
            raw = response.observation.raw_data.units.add(
                tag=self.tag(row), unit_type=int(u.unit_type[row]),
                owner=ALLY_OWNER if ally else ENEMY_OWNER,
                health=u.health[row], health_max=u.health_max[row], shield=u.shield[row],
                shield_max=u.shield_max[row], energy=u.energy[row],
                weapon_cooldown=u.weapon_cooldown[row])
            raw.pos.x, raw.pos.y = u.x[row], u.y[row]
            if row in engaged:
                raw.engaged_target_tag = self.tag(engaged[row])
        return response

    def debug(self, commands) -> None:
        """Kill units now; create units at the next game loop (one unit per command)."""
        self._enter("debug")
        self.requests["debug"].append(commands)
        for command in commands:
            if command.HasField("kill_unit"):
                self._last_killed = np.zeros_like(self._killed)
                self._lingering = self.linger_loops
            for tag in command.kill_unit.tag:
                self._killed[self.row(tag)] = self._last_killed[self.row(tag)] = True
            if command.HasField("create_unit"):
                assert command.create_unit.quantity == 1 and not self.spawning_map
                self._created.append(command.create_unit)
        if self._units is not None:
            self._killed |= ~self._units.alive

    def _created_team(self) -> Team:
        """The Team the pending create commands make: per owner, in command order."""
        ally_names = {unit_id: name for name, unit_id in self.world.ally_unit_ids.items()}
        enemy_names = {unit_id: name for name, unit_id in STOCK_ID_OF_NAME.items()}
        sides = {ALLY_OWNER: ([], [], ally_names), ENEMY_OWNER: ([], [], enemy_names)}
        for create in self._created:
            names, points, name_of = sides[create.owner]
            names.append(name_of[create.unit_type])
            points.append((create.pos.x, create.pos.y))
        (ally_units, ally_xy, _), (enemy_units, enemy_xy, _) = sides[ALLY_OWNER], sides[ENEMY_OWNER]
        return Team(tuple(ally_units), tuple(ally_xy), tuple(enemy_units), tuple(enemy_xy))

    def save_replay(self) -> bytes:
        self._enter("save_replay")
        return b"fake replay"


class ScriptedWorld:
    """A contract engine replaying hand-made unit tables: reset() gives the first, each step the next.

    attacks[k] is the world's last_attacks after step k+1; the orders of every step are kept.
    """

    step_mul = 8

    def __init__(self, states: list, attacks: list | None = None):
        self.states = states
        self.attacks = attacks or [[] for _ in states[1:]]
        self.n_allies, self.n_enemies = states[0].n_allies, states[0].n_enemies
        self.orders: list[tuple] = []
        self.last_attacks: list[tuple[int, int]] = []

    def reset(self):
        self.orders, self.last_attacks = [], []
        return self.states[0]

    def step(self, kind, tx, ty, target):
        self.orders.append((kind.copy(), tx.copy(), ty.copy(), target.copy()))
        self.last_attacks = self.attacks[len(self.orders) - 1]
        return self.states[len(self.orders)]


class TeamWorld:
    """A contract world for SMACv2's map without a simulator: reset(team) puts every unit on its
    point, a unit sharing its side's point with k earlier ones k * SPREAD further along x (the
    game pushes units apart); row i has i + 1 hit points, so a row bound to the wrong unit shows.
    Units stand still and never fire; the orders of every step are kept."""

    step_mul = 8
    SPREAD = 0.75
    ally_unit_ids = {name: GEN_RL_BASE + index for index, name in enumerate(GEN_UNIT_NAMES)}

    def __init__(self):
        self.teams: list[Team] = []
        self.orders: list[tuple] = []
        self.last_attacks: list[tuple[int, int]] = []
        self.units: Units | None = None

    def reset(self, team: Team) -> Units:
        self.teams.append(team)
        xy = self._placed(team.ally_xy) + self._placed(team.enemy_xy)
        types = [self.ally_unit_ids[n] for n in team.ally_units] + [STOCK_ID_OF_NAME[n] for n in team.enemy_units]
        n = len(types)
        self.units = make_units(len(team.ally_units), len(team.enemy_units), unit_type=types,
                                x=[x for x, _ in xy], y=[y for _, y in xy], health=list(range(1, n + 1)),
                                health_max=[n] * n)
        return self.units

    def _placed(self, points) -> list[tuple[float, float]]:
        placed = []
        for i, (x, y) in enumerate(points):
            placed.append((x + self.SPREAD * list(points[:i]).count((x, y)), y))
        return placed

    def step(self, kind, tx, ty, target) -> Units:
        self.orders.append((kind.copy(), tx.copy(), ty.copy(), target.copy()))
        return self.units


def orders(n: int, **by_ally):
    """Order arrays (kind, tx, ty, target) for n allies; by_ally: a<i>=(kind, tx, ty, target)."""
    kind, tx, ty, target = np.zeros(n, np.int8), np.zeros(n), np.zeros(n), np.full(n, -1)
    for key, (k, x, y, t) in by_ally.items():
        i = int(key[1:])
        kind[i], tx[i], ty[i], target[i] = k, x, y, t
    return kind, tx, ty, target


class FakeLauncher:
    """SC2Engine's `launcher`: hands out the given controllers, one per (re)launch."""

    def __init__(self, *controllers: FakeController):
        self.controllers = list(controllers)
        self.launched: list[FakeController] = []
        self.closed = 0
        self.map_paths: list[str] = []
        self.replays: list[tuple[bytes, str, str]] = []

    def __call__(self) -> GameProcess:
        controller = self.controllers[len(self.launched)]
        self.launched.append(controller)
        return GameProcess(controller, self._map_data, self._save_replay, self._close)

    def _map_data(self, path: str) -> bytes:
        self.map_paths.append(path)
        return b"map bytes of " + path.encode()

    def _save_replay(self, data: bytes, replay_dir: str, prefix: str) -> str:
        self.replays.append((data, replay_dir, prefix))
        return f"{replay_dir}/{prefix}.SC2Replay"

    def _close(self) -> None:
        self.closed += 1


def fake_install(root: Path, *map_names: str) -> Path:
    """A folder that looks like an SC2 install (no game binary) holding map files (default: 3m only)
    in Maps/SMAC_Maps; a map file is an MPQ archive, as real ones are."""
    (root / "Versions" / "Base75689").mkdir(parents=True, exist_ok=True)
    (root / "Maps" / "SMAC_Maps").mkdir(parents=True, exist_ok=True)
    for map_name in map_names or ("3m",):
        (root / "Maps" / "SMAC_Maps" / f"{map_name}.SC2Map").write_bytes(b"MPQ\x1a map " + map_name.encode())
    return root


def world_game_info(world: BuiltinEngine) -> sc_pb.ResponseGameInfo:
    """The game info SC2 would send for the simulator's map (heights quantised to 8 bits)."""
    height = np.round(np.asarray(world.terrain_height) * 255).astype(np.uint8)
    playable = (0, 0, int(world.max_distance_x), int(world.max_distance_y))
    return encode_game_info(np.asarray(world.pathing_grid, dtype=bool), height, playable)


def fake_game_info(map_x: int = 32, map_y: int = 32) -> sc_pb.ResponseGameInfo:
    """A map like SMAC's: pathable band y 8..23 plus one extra cell, a height ramp along y."""
    pathable = np.zeros((map_x, map_y), dtype=bool)
    pathable[:, 8:24] = True
    pathable[3, 2] = True
    height = np.tile(np.arange(map_y, dtype=np.uint8) * 4, (map_x, 1))  # [x, y]
    height[5, 30] = 255
    return encode_game_info(pathable, height, (0, 0, map_x, map_y))



# ---- a stand-in game process ---------------------------------------------------------------------
# Appends JSON lines to $STAND_IN_GAME_DIR/game_<pid>.jsonl: first how it was started (pid, parent,
# session, process group, death signal, argv), then the name of every SIGINT/SIGTERM it receives.
# SIGTERM (what pysc2's close sends) ends it; SIGINT does not, so a test sees whether one arrived.
# With STAND_IN_GAME_HANDSHAKE set it prints "ready" once started. It exits by itself after
# STAND_IN_GAME_LIFETIME seconds (default 600: a test that failed leaves nothing for long).
STAND_IN_GAME = r"""
import ctypes, json, os, signal, sys, time
record = os.path.join(os.environ["STAND_IN_GAME_DIR"], f"game_{os.getpid()}.jsonl")
def note(**entry):
    with open(record, "a") as f:
        f.write(json.dumps(entry) + "\n")
def on_signal(signum, _frame):
    note(signal=signal.Signals(signum).name)
    if signum == signal.SIGTERM:
        os._exit(0)
signal.signal(signal.SIGINT, on_signal)
signal.signal(signal.SIGTERM, on_signal)
death_signal = ctypes.c_int(0)
if sys.platform.startswith("linux"):
    ctypes.CDLL(None).prctl(2, ctypes.byref(death_signal))  # PR_GET_PDEATHSIG
note(pid=os.getpid(), ppid=os.getppid(), sid=os.getsid(0), pgid=os.getpgid(0),
     death_signal=death_signal.value, argv=sys.argv[1:])
if os.environ.get("STAND_IN_GAME_HANDSHAKE"):
    print("ready", flush=True)
deadline = time.monotonic() + float(os.environ.get("STAND_IN_GAME_LIFETIME", "600"))
while time.monotonic() < deadline:
    time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
"""


def stand_in_game_binary(path: Path) -> Path:
    """Write the stand-in game as an executable (e.g. <install>/Versions/Base75689/SC2_x64 for pysc2)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!{sys.executable} -I\n{STAND_IN_GAME}")
    path.chmod(0o755)
    return path


def stand_in_games(record_dir) -> dict[int, list[dict]]:
    """Every stand-in game that recorded into record_dir (or a folder below): pid -> its records
    (start record first)."""
    games = {}
    for path in sorted(Path(record_dir).rglob("game_*.jsonl")):
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        games[records[0]["pid"]] = records
    return games


def end_stand_in_games(record_dir) -> list[int]:
    """SIGKILL the stand-in games of record_dir still running (after a failed test); their pids."""
    import psutil

    killed = []
    for pid in stand_in_games(record_dir):
        try:
            game = psutil.Process(pid)
            if "STAND_IN_GAME_DIR" in game.environ() and game.status() != psutil.STATUS_ZOMBIE:
                game.kill()
                killed.append(pid)
        except psutil.Error:
            pass
    return killed


def signals_received(records: list[dict]) -> list[str]:
    return [r["signal"] for r in records if "signal" in r]


class StandInGame:
    """SC2Engine's `launcher` with a real game process: each launch starts the stand-in game with
    start_game_process (as launch_sc2 starts StarCraft II) and plays a FakeController over the
    simulator next to it; closing ends the process as pysc2 does (SIGTERM, SIGKILL after 3 s).
    `fail_on` names the controller method that fails in every launched game (e.g. "join_game")."""

    def __init__(self, record_dir, map_name: str = "3m", seed: int = 0, fail_on: str | None = None):
        self.record_dir = str(record_dir)
        self.map_name, self.seed, self.fail_on = map_name, seed, fail_on
        self.processes: list[subprocess.Popen] = []

    def __call__(self) -> GameProcess:
        env = dict(os.environ, STAND_IN_GAME_DIR=self.record_dir, STAND_IN_GAME_HANDSHAKE="1")
        proc = start_game_process([sys.executable, "-I", "-c", STAND_IN_GAME], env=env, stdout=subprocess.PIPE)
        ready = proc.stdout.readline()
        proc.stdout.close()
        if ready.strip() != b"ready":
            proc.kill()
            proc.wait()
            raise RuntimeError(f"the stand-in game did not start (exit code {proc.returncode})")
        self.processes.append(proc)
        world = BuiltinEngine(self.map_name, self.seed)
        controller = FakeController(world, world_game_info(world), fail_on=self.fail_on)
        return GameProcess(controller, lambda path: b"map bytes", self._save_replay,
                           functools.partial(sc_process._shutdown_proc, proc, 3))

    @staticmethod
    def _save_replay(data: bytes, replay_dir: str, prefix: str) -> str:
        return os.path.join(replay_dir, f"{prefix}.SC2Replay")


def play_in_lockstep(env_sc2, env_ref, episodes: int, check_episode=None) -> float:
    """Play both envs with the same random available actions, asserting equal avail actions, obs,
    state, step results and stats at every step; -> the total reward (tests check it is positive:
    damage was dealt, so the compared states really changed). check_episode(env_sc2, env_ref) runs
    after each reset."""
    rng = np.random.default_rng(0)
    total_reward = 0.0
    for _episode in range(episodes):
        env_sc2.reset()
        env_ref.reset()
        if check_episode is not None:
            check_episode(env_sc2, env_ref)
        terminated = False
        while not terminated:
            avail = np.array(env_ref.get_avail_actions())  # [n_agents, n_actions]
            np.testing.assert_array_equal(np.array(env_sc2.get_avail_actions()), avail)
            np.testing.assert_array_equal(np.array(env_sc2.get_obs()), np.array(env_ref.get_obs()))
            np.testing.assert_array_equal(env_sc2.get_state(), env_ref.get_state())
            actions = [rng.choice(np.flatnonzero(row)) for row in avail]
            result_sc2, result_ref = env_sc2.step(actions), env_ref.step(actions)
            assert result_sc2 == result_ref
            total_reward += result_ref[0]
            terminated = result_ref[1]
    assert env_sc2.get_stats() == env_ref.get_stats()
    return total_reward

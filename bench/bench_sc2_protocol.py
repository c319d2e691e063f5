"""Per-observation cost of the StarCraft II protocol under protobuf's pure-Python and compiled (upb)
implementations (issue 18, item 4).

Usage (from the repository root):
    python bench/bench_sc2_protocol.py [--units 6 66] [--repeats 7] [--seconds 0.2]

Every env step the SC2 engine receives one Response holding a ResponseObservation; pysc2 parses it
whole (Response.ParseFromString) and the engine then reads the raw units' fields. This builds such
a Response as the game sends it with the raw interface (player, map state images, every unit field
the game fills) for each unit count (6: 3m; 66: 2c_vs_64zg) and times, per observation:
  - parse: Response.FromString of the serialized bytes;
  - parse+read: the same, then reading every field SC2Engine reads from every unit;
  - serialize: SerializeToString of the parsed Response.
Each implementation runs in its own interpreter (PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python, or
unset for the compiled default: protobuf fixes the implementation per process), both importing the
protocol through the engine module. Figures are the median over --repeats of the mean time per call
in a loop of about --seconds; the ratios are python / compiled.
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

from machine_info import describe_machine  # bench/ is on sys.path when a benchmark runs

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
IMPLEMENTATIONS = {"python": "python", "compiled": None}
MAP_SIZES = {6: 32, 66: 64}  # 3m's playable map is 32x32, 2c_vs_64zg's 64x64


def observation_bytes(n_units: int) -> bytes:
    """A serialized Response to RequestObservation with n_units raw units, half allies."""
    from envs.starcraft.sc2client import sc2_engine  # noqa: F401  (installs the protocol modules first)
    from s2clientprotocol import raw_pb2, sc2api_pb2 as sc_pb

    response = sc_pb.Response(status=sc_pb.in_game)
    obs = response.observation.observation
    obs.game_loop = 4321
    common = obs.player_common
    common.player_id, common.minerals, common.food_cap, common.food_used, common.food_army = 1, 50, 200, 12, 12
    common.army_count = n_units // 2
    raw = obs.raw_data
    raw.player.camera.x, raw.player.camera.y = 16.0, 16.0
    size = MAP_SIZES.get(n_units, 64)
    for image, bits in ((raw.map_state.visibility, 8), (raw.map_state.creep, 1)):
        image.bits_per_pixel = bits
        image.size.x = image.size.y = size
        image.data = bytes((i * 7) % 256 for i in range(size * size * bits // 8))
    for i in range(n_units):
        ally = i < n_units // 2
        unit = raw.units.add(
            display_type=raw_pb2.Visible, alliance=raw_pb2.Self if ally else raw_pb2.Enemy,
            tag=4_300_000_000 + 262_144 * i, unit_type=48 if ally else 105, owner=1 if ally else 2,
            facing=1.5707, radius=0.375, build_progress=1.0, cloak=raw_pb2.NotCloaked, detect_range=0.0,
            radar_range=0.0, is_selected=False, is_on_screen=True, is_blip=False, is_powered=False,
            is_active=True, attack_upgrade_level=0, armor_upgrade_level=0, shield_upgrade_level=0,
            health=45.0 - i % 7, health_max=45.0, shield=0.0, shield_max=0.0, energy=0.0, energy_max=0.0,
            is_flying=False, is_burrowed=False, is_hallucination=False, weapon_cooldown=float(i % 11),
            engaged_target_tag=4_300_000_000 + 262_144 * ((i + n_units // 2) % n_units))
        unit.pos.x, unit.pos.y, unit.pos.z = 8.0 + (i % 16) * 1.25, 16.0 + (i // 16) * 0.5, 8.0
        if i % 3 == 0:
            order = unit.orders.add(ability_id=23, target_unit_tag=unit.engaged_target_tag, progress=0.0)
            order.target_world_space_pos.x = unit.pos.x
    return response.SerializeToString()


def per_call(fn, repeats: int, seconds: float) -> float:
    """Median over repeats of the mean seconds per call of fn in a loop of about `seconds`."""
    fn()  # warm-up
    start, loops = time.perf_counter(), 0
    while (elapsed := time.perf_counter() - start) < seconds / 10:
        fn()
        loops += 1
    loops = max(1, round(loops * seconds / elapsed))
    means = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(loops):
            fn()
        means.append((time.perf_counter() - start) / loops)
    return statistics.median(means)


def worker(units: list[int], repeats: int, seconds: float) -> dict:
    """This process's implementation and its times: {units: {parse, parse+read, serialize}} in seconds."""
    sys.path.insert(0, SRC)
    from envs.starcraft.sc2client import sc2_protocol
    from s2clientprotocol import sc2api_pb2 as sc_pb

    def read(response) -> float:  # the fields SC2Engine._update_units and _shots_fired read
        total = 0.0
        for u in response.observation.observation.raw_data.units:
            total += (u.tag + u.unit_type + u.owner + u.pos.x + u.pos.y + u.health + u.health_max + u.shield
                      + u.shield_max + u.energy + u.weapon_cooldown + u.engaged_target_tag)
        return total

    times = {}
    for n in units:
        data = observation_bytes(n)
        parsed = sc_pb.Response.FromString(data)
        assert len(parsed.observation.observation.raw_data.units) == n
        times[n] = {
            "bytes": len(data),
            "parse": per_call(lambda: sc_pb.Response.FromString(data), repeats, seconds),
            "parse+read": per_call(lambda: read(sc_pb.Response.FromString(data)), repeats, seconds),
            "serialize": per_call(parsed.SerializeToString, repeats, seconds),
        }
    return {"implementation": sc2_protocol.implementation(), "times": times}


def run_worker(implementation: str | None, args) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"}
    if implementation:
        env["PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"] = implementation
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    command = [sys.executable, os.path.abspath(__file__), "--worker", "--units", *map(str, args.units),
               "--repeats", str(args.repeats), "--seconds", str(args.seconds)]
    out = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--units", type=int, nargs="+", default=[6, 66])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=0.2)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.units, args.repeats, args.seconds)))
        return
    print(f"command: python {' '.join(sys.argv)}")
    print(f"date: {datetime.datetime.now().isoformat(timespec='seconds')}; machine: {describe_machine()}, "
          f"load {os.getloadavg()[0]:.2f}; protobuf {__import__('google.protobuf').protobuf.__version__}")
    results = {name: run_worker(impl, args) for name, impl in IMPLEMENTATIONS.items()}
    compiled_kind = results["compiled"]["implementation"]
    print(f"per observation (median of {args.repeats}); compiled = '{compiled_kind}'")
    print(f"{'units':>5} {'bytes':>6} {'measure':>11} {'python ms':>10} {'compiled ms':>12} {'ratio':>7}")
    for n in args.units:
        py, fast = results["python"]["times"][str(n)], results["compiled"]["times"][str(n)]
        for measure in ("parse", "parse+read", "serialize"):
            print(f"{n:>5} {py['bytes']:>6} {measure:>11} {py[measure] * 1e3:>10.3f} {fast[measure] * 1e3:>12.4f} "
                  f"{py[measure] / fast[measure]:>6.1f}x")


if __name__ == "__main__":
    main()

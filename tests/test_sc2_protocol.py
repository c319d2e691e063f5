"""s2clientprotocol under the compiled protobuf (envs/starcraft/sc2client/sc2_protocol.py): rebuilt modules
equal the generated ones, the engine imports by any path under either implementation, and
TensorBoard works in the same process.

The protobuf implementation is fixed per process, so each implementation runs in a fresh
interpreter (PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python for the pure-Python one, unset for the
compiled default).
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envs.starcraft.sc2client import sc2_protocol
from envs.starcraft.sc2client.sc2_protocol import serialized_descriptor

REPO = Path(__file__).resolve().parents[1]
IMPLEMENTATIONS = {"python": "python", "compiled": None}

# Prints, as JSON: the implementation, each protocol module's public names and whether it was rebuilt,
# and a Response with every kind of field (nested, repeated, enum, bytes, float, uint64) serialized.
DESCRIBE = r"""
import base64, json, sys
sys.path.insert(0, {src!r})
from envs.starcraft.sc2client import sc2_engine  # the engine's own import path, nothing before it
from google.protobuf.internal import api_implementation
from s2clientprotocol import common_pb2, raw_pb2, sc2api_pb2 as sc_pb
names = {{}}
for name, module in sorted(sys.modules.items()):
    if name.startswith("s2clientprotocol.") and name.endswith("_pb2"):
        names[name] = sorted(n for n in dir(module) if not n.startswith("_") and not n.endswith("__pb2")
                             and n not in ("sys", "descriptor_pb2", "enum_type_wrapper"))
response = sc_pb.Response(status=sc_pb.in_game)
raw = response.observation.observation.raw_data
for i in range(3):
    unit = raw.units.add(tag=(1 << 40) + i, unit_type=48, owner=1 + i % 2, health=45.5, alliance=raw_pb2.Self)
    unit.pos.x, unit.pos.y = 9.25 + i, 16.0
    unit.orders.add(ability_id=23, target_unit_tag=7)
response.observation.observation.game_loop = 1234
response.observation.observation.raw_data.map_state.visibility.data = bytes(range(256))
data = response.SerializeToString()
reparsed = sc_pb.Response.FromString(data)
print(json.dumps({{
    "implementation": api_implementation.Type(),
    "rebuilt": sorted(n for n, m in sys.modules.items() if n.startswith("s2clientprotocol.")
                      and "rebuilt" in (m.__doc__ or "")),
    "names": names,
    "serialized": base64.b64encode(data).decode(),
    "reparsed": [[u.tag, u.unit_type, u.owner, u.alliance, u.pos.x, u.pos.y, u.health, u.orders[0].target_unit_tag]
                 for u in reparsed.observation.observation.raw_data.units]
                + [reparsed.status, reparsed.observation.observation.game_loop,
                   list(reparsed.observation.observation.raw_data.map_state.visibility.data[-3:])],
    "enums": [sc_pb.Status.Name(3), common_pb2.Race.Value("Zerg"), sc_pb.Participant, sc_pb.CheatInsane],
}}))
"""

# Writes TensorBoard scalars with tensorboardX and reads them back with tensorboard, in a process that
# imported the engine first.
TENSORBOARD = r"""
import sys
sys.path.insert(0, {src!r})
from envs.starcraft.sc2client import sc2_engine
from google.protobuf.internal import api_implementation
from tensorboardX import SummaryWriter
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
writer = SummaryWriter(logdir={logdir!r})
for step in range(3):
    writer.add_scalar("return_mean", step * 1.5, step)
writer.close()
events = EventAccumulator({logdir!r})
events.Reload()
print(api_implementation.Type(), [e.value for e in events.Scalars("return_mean")])
"""


def run_python(code: str, implementation: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"}
    if implementation:
        env["PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"] = implementation
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def described() -> dict:
    code = DESCRIBE.format(src=str(REPO / "src"))
    return {name: json.loads(run_python(code, impl)) for name, impl in IMPLEMENTATIONS.items()}


def test_the_engine_imports_under_both_implementations(described):
    assert described["python"]["implementation"] == "python"
    assert described["compiled"]["implementation"] in ("upb", "cpp")
    assert described["python"]["rebuilt"] == []  # the generated modules, as before
    assert "s2clientprotocol.sc2api_pb2" in described["compiled"]["rebuilt"]
    assert len(described["compiled"]["rebuilt"]) == len(described["python"]["names"]) == 10


def test_rebuilt_modules_have_the_generated_modules_names(described):
    """Every message class, enum wrapper and enum value pysc2 may use is there, nothing else is new."""
    assert described["compiled"]["names"] == described["python"]["names"]
    assert {"Response", "RequestCreateGame", "Participant", "Status"} <= set(
        described["python"]["names"]["s2clientprotocol.sc2api_pb2"])


def test_rebuilt_messages_read_and_write_the_same_bytes(described):
    python, compiled = described["python"], described["compiled"]
    assert compiled["serialized"] == python["serialized"]
    assert compiled["reparsed"] == python["reparsed"]
    assert python["reparsed"][2] == [(1 << 40) + 2, 48, 1, 1, 11.25, 16.0, 45.5, 7]
    assert python["reparsed"][3:] == [3, 1234, [253, 254, 255]]
    assert compiled["enums"] == python["enums"] == ["in_game", 2, 1, 10]


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_tensorboard_works_next_to_the_protocol(tmp_path, implementation):
    out = run_python(TENSORBOARD.format(src=str(REPO / "src"), logdir=str(tmp_path)), IMPLEMENTATIONS[implementation])
    kind, values = out.split(" ", 1)
    assert (kind == "python") == (implementation == "python")
    assert values == "[0.0, 1.5, 3.0]"


def test_install_is_idempotent_in_this_process():
    assert sc2_protocol.install() == []  # done on import already (or nothing to do under python)
    from s2clientprotocol import sc2api_pb2
    rebuilt = "rebuilt" in (sc2api_pb2.__doc__ or "")
    assert rebuilt == (sc2_protocol.implementation() != "python")


def test_the_serialized_descriptor_is_read_without_running_the_module():
    old = ("import sys\n_b=sys.version_info[0]<3 and (lambda x:x) or (lambda x:x.encode('latin1'))\n"
           "raise SystemExit('never run')\n"
           "DESCRIPTOR = _descriptor.FileDescriptor(\n  name='a.proto',\n  package='p',\n"
           "  serialized_pb=_b('\\n\\x07a.proto\\x12\\x01p\\xe9')\n)\n")
    assert serialized_descriptor(old) == b"\n\x07a.proto\x12\x01p\xe9"
    assert serialized_descriptor("X = F(serialized_pb=b'\\n\\x01' b'\\x02', name='x')") == b"\n\x01\x02"
    modern = "DESCRIPTOR = _descriptor_pool.Default().AddSerializedFile(b'\\n\\x07a.proto')\n"
    assert serialized_descriptor(modern) is None

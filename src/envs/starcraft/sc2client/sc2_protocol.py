"""The StarCraft II protocol (s2clientprotocol) under any protobuf implementation.

s2clientprotocol 5.0.x ships `*_pb2` modules written by an old protoc: they build every
descriptor field by field, which only protobuf's pure-Python implementation still accepts. That
implementation parses an observation 150-190x slower than the compiled one (upb, protobuf's default):
0.4 ms for 6 units, 4 ms for 66, against 0.003 and 0.02 ms (bench/bench_sc2_protocol.py). And it
is chosen per process, for TensorBoard's protobufs too.

Each old module also holds its file's serialized FileDescriptorProto (`serialized_pb=...`), the
same input from which current protoc output builds its classes. `install()` reads those bytes
from the installed files (tokenizing them, never executing them), registers them in protobuf's
default descriptor pool in dependency order and puts modules with the same public names
(message classes, enum wrappers, enum values) into `sys.modules`, so that pysc2's
`from s2clientprotocol import sc2api_pb2` finds them. It runs on import of this module, which the
StarCraft II engine imports before pysc2; under the pure-Python implementation, or once the
protocol modules are imported, it does nothing.
"""
import ast
import importlib
import importlib.util
import io
import sys
import tokenize
import types
from pathlib import Path

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.internal import api_implementation, builder

PACKAGE = "s2clientprotocol"


def implementation() -> str:
    """The active protobuf implementation: "upb" (compiled, the default), "cpp" or "python"."""
    return api_implementation.Type()


def serialized_descriptor(source: str) -> bytes | None:
    """The `serialized_pb=` argument of an old generated module's source; None if it has none
    (e.g. a module written by a current protoc, which imports under every implementation)."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    for token in tokens:
        if token.type == tokenize.NAME and token.string == "serialized_pb":
            break
    else:
        return None
    parts = []
    for token in tokens:
        if token.type == tokenize.STRING:
            parts.append(ast.literal_eval(token.string))
        elif parts and token.type == tokenize.OP and token.string in ",)":
            break
        elif token.type not in (tokenize.OP, tokenize.NAME, tokenize.NL, tokenize.COMMENT):
            return None  # not the literal shape protoc writes
    if not parts:
        return None
    # Old protoc wraps the bytes in _b('...'), a str encoded as latin-1 on Python 3.
    return b"".join(p.encode("latin-1") if isinstance(p, str) else p for p in parts)


def _module_alias(proto_name: str) -> str:
    """protoc's name for an imported module: s2clientprotocol/common.proto -> s2clientprotocol_dot_common__pb2."""
    return proto_name[: -len(".proto")].replace("_", "__").replace("/", "_dot_") + "__pb2"


def _build_module(name: str, path: Path, serialized: bytes) -> types.ModuleType:
    """A module equivalent to `name` as current protoc would write it, from its serialized descriptor."""
    pool = descriptor_pool.Default()
    proto = descriptor_pb2.FileDescriptorProto.FromString(serialized)
    try:
        file_descriptor = pool.FindFileByName(proto.name)  # left there by a failed old-style import
    except KeyError:
        file_descriptor = pool.AddSerializedFile(serialized)
    module = types.ModuleType(name, f"{proto.name}, rebuilt from its serialized descriptor for the "
                                    f"'{implementation()}' protobuf implementation")
    module.__file__ = str(path)
    module.__package__ = PACKAGE
    namespace = vars(module)
    namespace["DESCRIPTOR"] = file_descriptor
    for dependency in proto.dependency:
        dependency_module = sys.modules.get(dependency[: -len(".proto")].replace("/", ".") + "_pb2")
        if dependency_module is not None:
            namespace[_module_alias(dependency)] = dependency_module
    builder.BuildMessageAndEnumDescriptors(file_descriptor, namespace)
    builder.BuildTopDescriptorsAndMessages(file_descriptor, name, namespace)
    return module


def install() -> list[str]:
    """Make every `s2clientprotocol.*_pb2` importable under the active protobuf implementation.

    Returns the names of the modules built here (none under the pure-Python implementation, when
    s2clientprotocol is missing, or when its modules were imported already).
    """
    if implementation() == "python" or f"{PACKAGE}.sc2api_pb2" in sys.modules:
        return []
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return []
    package = importlib.import_module(PACKAGE)  # an empty __init__
    folder = Path(next(iter(spec.submodule_search_locations)))
    sources = {}  # proto file name -> (module name, path, serialized descriptor or None)
    for path in sorted(folder.glob("*_pb2.py")):
        name = f"{PACKAGE}.{path.stem}"
        serialized = serialized_descriptor(path.read_text(encoding="utf-8"))
        proto_name = (descriptor_pb2.FileDescriptorProto.FromString(serialized).name if serialized
                      else f"{PACKAGE}/{path.stem[: -len('_pb2')]}.proto")
        sources[proto_name] = (name, path, serialized)
    built: list[str] = []
    done: set[str] = set()

    def load(proto_name: str) -> None:
        """Load proto_name's dependencies, then proto_name itself (depth first: dependency order)."""
        if proto_name in done or proto_name not in sources:
            return
        done.add(proto_name)
        name, path, serialized = sources[proto_name]
        if serialized is None or name in sys.modules:
            importlib.import_module(name)
            return
        for dependency in descriptor_pb2.FileDescriptorProto.FromString(serialized).dependency:
            load(dependency)
        module = _build_module(name, path, serialized)
        sys.modules[name] = module
        setattr(package, path.stem, module)
        built.append(name)

    for proto_name in sources:
        load(proto_name)
    return built


install()

"""The code's import structure: no import circle anywhere in src/, and the StarCraft package's three layers
each import only downwards (docs/how_it_works.md, "The StarCraft package in three layers").

Every import counts, those inside functions too (an import deferred to call time still ties the two
modules together); only `if TYPE_CHECKING:` blocks are left out, since they never run.
"""
import ast
import os
import subprocess
import sys

import pytest

from conftest import SRC

STARCRAFT = "envs.starcraft"
# Each layer may import the ones after it, never the ones before it.
LAYERS = (f"{STARCRAFT}.interface", f"{STARCRAFT}.sc2client", f"{STARCRAFT}.game")


def module_files(root: str = SRC) -> dict[str, str]:
    """Dotted module name -> file, for every .py under `root` (a package's __init__.py is the package)."""
    modules = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            if name.endswith(".py"):
                parts = os.path.relpath(os.path.join(folder, name), root)[:-3].split(os.sep)
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                modules[".".join(parts)] = os.path.join(folder, name)
    return modules


def _runtime_nodes(tree: ast.AST):
    """The tree's nodes without the bodies of `if TYPE_CHECKING:` blocks."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            is_type_checking = (isinstance(child, ast.If) and isinstance(child.test, ast.Name)
                                and child.test.id == "TYPE_CHECKING")
            stack.extend(child.orelse if is_type_checking else [child])


def imported_modules(module: str, path: str, known: dict[str, str]) -> set[str]:
    """The modules of `known` that `module` (its file at `path`) imports, resolving relative imports; `from
    package import name` counts as importing the submodule when `name` is one, else the package."""
    is_package = path.endswith("__init__.py")
    package = module if is_package else module.rpartition(".")[0]
    found = set()
    for node in _runtime_nodes(ast.parse(open(path).read())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        found.update(name for name in names if name in known and name != module)
    return found


def import_graph() -> dict[str, set[str]]:
    known = module_files()
    return {module: imported_modules(module, path, known) for module, path in known.items()}


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected components of more than one module (Tarjan's algorithm), each sorted."""
    index, low, on_stack, stack, circles = {}, {}, set(), [], []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


def _layer(module: str) -> int | None:
    for rank, prefix in enumerate(LAYERS):
        if module == prefix or module.startswith(prefix + "."):
            return rank
    return None


def test_no_import_circle_in_src():
    assert import_circles(import_graph()) == []


def test_starcraft_layers_import_only_downwards():
    upward = []
    for module, targets in import_graph().items():
        rank = _layer(module)
        if rank is None:
            continue
        for target in targets:
            target_rank = _layer(target)
            outside_layers = target.startswith(STARCRAFT) and target_rank is None
            if outside_layers or (target_rank is not None and target_rank < rank):
                upward.append(f"{module} -> {target}")
    assert upward == []


def test_the_checker_sees_circles_and_deferred_imports(tmp_path):
    """The checker itself: a circle closed by an import inside a function is found, one behind
    TYPE_CHECKING is not."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from . import b\n")
    (package / "b.py").write_text("def f():\n    from .a import x\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n")
    (package / "d.py").write_text("from .c import y\n")
    known = module_files(str(tmp_path))
    graph = {module: imported_modules(module, path, known) for module, path in known.items()}
    assert graph["pkg.c"] == set() and graph["pkg.d"] == {"pkg.c"}
    assert import_circles(graph) == [["pkg.a", "pkg.b"]]


def test_the_pre_split_path_of_the_ahead_of_time_compile_still_works():
    """docs/differences.md told users to compile the simulator ahead with envs.starcraft.backend's
    compile_builtin_loops; that path stays, the same function."""
    from envs.starcraft.backend import compile_builtin_loops as old_path
    from envs.starcraft.interface.warmup import compile_builtin_loops

    assert old_path is compile_builtin_loops


# The public names of envs/starcraft/backend.py before the split (commit b7ef166).
PRE_SPLIT_BACKEND_NAMES = (
    "BACKENDS", "BUILTIN_SOURCES", "GEN_MAPS", "GEN_MAP_FILE", "INSTALL_SCRIPT", "SMACV2_SCENARIOS", "GameRestarted",
    "builtin_sources_digest", "compile_builtin_loops", "fallback_line", "installed_by_launcher", "is_gen_map",
    "make_engine", "map_file_stem", "sc2_available", "sc2_install_dir", "sc2_missing", "select_backend",
    "smac_map_file",
)


def test_the_pre_split_backend_module_still_offers_every_name_it_had_and_every_name_of_the_new_one():
    from envs.starcraft import backend as old_module
    from envs.starcraft.interface import backend as new_module

    assert [name for name in PRE_SPLIT_BACKEND_NAMES if not hasattr(old_module, name)] == []
    names = [name for name in vars(new_module) if not name.startswith("__")]
    assert [name for name in names if getattr(old_module, name) is not getattr(new_module, name)] == []
    with pytest.raises(AttributeError, match="has no attribute 'make_engines'"):
        old_module.make_engines


def test_importing_a_layer_loads_no_layer_above_it():
    """What the import lines cannot show: Python runs every parent package's __init__ first, so an eager
    import in envs/starcraft/__init__.py would pull the interface into every import of the game. Checked in
    a fresh interpreter, layer by layer from the bottom."""
    known = module_files()
    script = ["import importlib, sys", "loaded = []"]
    for rank in reversed(range(len(LAYERS))):
        above = LAYERS[:rank]
        for module in sorted(name for name in known if _layer(name) == rank):
            script.append(f"importlib.import_module({module!r})")
        script.append(f"loaded += [m for m in sys.modules if m.startswith({above!r})] if {above!r} else []")
    script.append("print(sorted(set(loaded)))")
    result = subprocess.run([sys.executable, "-c", "\n".join(script)], cwd=SRC, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "[]"

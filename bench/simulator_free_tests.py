"""Which test modules run the built-in simulator, in their own process or any process they start: the
measurement behind tests/conftest.py's SIMULATOR_FREE (the modules that run while the simulator compiles).

    python bench/simulator_free_tests.py [tests/test_x.py ...]

Compiles the simulator's loops (or loads them), then runs each test module alone (`pytest -p no:xdist`,
without the suite's compile ahead) after setting the access time of every cache index of the compiled loops
back by 100 s; a module that runs the simulator reads at least one of them, and the file system (relatime)
moves its access time forward. Prints one line per module, then the modules that read none. Takes as long
as the suite on one core (about 9 minutes on a 2-core machine).
"""
import argparse
import glob
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src")
CACHE_INDEXES = os.path.join(SRC, "envs", "starcraft", "game", "__pycache__", "*", "*.nbi")
COMPILE = "from envs.starcraft.interface.warmup import compile_builtin_loops; compile_builtin_loops()"


def set_back(paths: list[str]) -> None:
    for path in paths:
        modified = os.stat(path).st_mtime
        os.utime(path, (modified - 100, modified))


def read_since_set_back(paths: list[str]) -> list[str]:
    return [path for path in paths if os.stat(path).st_atime > os.stat(path).st_mtime - 50]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help="test modules (default: every tests/test_*.py)")
    args = parser.parse_args(argv)
    modules = args.modules or sorted(glob.glob(os.path.join(ROOT, "tests", "test_*.py")))
    subprocess.run([sys.executable, "-c", COMPILE], cwd=SRC, check=True)
    indexes = glob.glob(CACHE_INDEXES)
    set_back(indexes[:1])
    with open(indexes[0], "rb") as f:
        f.read(1)
    if not read_since_set_back(indexes[:1]):
        sys.exit("simulator_free_tests.py: this file system does not record reads (mounted noatime); "
                 "run it where it does")
    environment = {**os.environ, "MARLKIT_COMPILE_AHEAD": "0"}
    free = []
    for module in modules:
        set_back(indexes)
        start = time.time()
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider",
                               module], cwd=ROOT, env=environment, capture_output=True, text=True)
        read = read_since_set_back(indexes)
        name = os.path.basename(module).removesuffix(".py")
        print(f"{name:40s} {time.time() - start:6.1f} s  exit {proc.returncode}  cache files read: {len(read)}",
              flush=True)
        if not read:
            free.append(name)
    print("reads none:", ", ".join(free))


if __name__ == "__main__":
    main()

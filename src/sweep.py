"""Config sweeps: every point of a grid × every seed as an ordinary `main.py` run.

    python src/sweep.py --config=qmix --env-config=sc2 --grid epsilon_anneal_time=50000,100000,500000 \\
        --seeds 5 with env_args.map_name=3m t_max=2000000

Each run is `python src/main.py --config=... --env-config=... with <with overrides> <point>
seed=<seed> name=<run name> save_model=True use_tensorboard=True`, so its results land in the
usual layout (sacred/<map or env>/<run name>/<run id>/, tb_logs/<unique_token>/,
models/<unique_token>/). Run names state the point and the seed: `<prefix>_<part>..._seed<seed>`
with one part per grid key, `<alias><value>` for the common keys in ALIASES (`qmix_eps50000_seed3`)
and `<key>=<value>` for the others (`qmix_env_args.reward_time=-0.1_seed0`); characters other
than letters, digits and `._+-=` become `-`.

With `--batch-seeds` the seeds of a point run side by side in one main.py process (`seeds=[...]
name=<prefix>_<part>..._seed{seed}`, README "Seeds"): the same runs, recorded, named and found again
as without it; a run that resumes its checkpoint goes alone.

Ctrl-C or SIGTERM stops the sweep and its runs (SIGTERM: main.py saves a checkpoint and sacred
records INTERRUPTED). Running the same command again continues the sweep: a run whose sacred run.json says COMPLETED
(with the sweep's config) is skipped; an interrupted one (INTERRUPTED/FAILED, or RUNNING without
a heartbeat for STALE_HEARTBEAT_S) is resumed from its latest saved model with
`checkpoint_path=<results>/models/<unique_token> resume=True` (or started again when it saved
none). The manifest <results>/sweeps/<sweep name>.json records the points, run names, states,
sacred folders and unique tokens; the console shows runs done / running / left and the time left.

With `--ray ADDRESS` (`auto`, HOST:PORT, or `local` to start a single-node Ray) each run is a Ray task that runs
main.py on a worker node. `--ray-results shared` (default): the workers see the driver's results
folder (same path on a shared filesystem). `--ray-results ship`: the task runs in a temporary
folder on the worker and returns the run's files, which are merged into the local results layout.
"""
import argparse
import datetime
import functools
import io
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple, Optional

from main import (REPO_DIR, SRC_DIR, USAGE_EXIT_CODE, UsageError, build_config, checked_params,
                  command_line_updates, observer_dir, recursive_dict_update, results_path)
from run.checkpoint import CheckpointNotFound, saved_steps
from run.seed_batch import MAX_SEEDS
from utils.run_index import flatten, get_dotted, has_dotted, nested

# Short names of common grid keys in run names; other keys appear as `<key>=<value>`.
ALIASES = {
    "epsilon_anneal_time": "eps",
    "epsilon_finish": "epsfinish",
    "lr": "lr",
    "td_lambda": "lambda",
    "gamma": "gamma",
    "batch_size": "bs",
    "buffer_size": "buffer",
    "batch_size_run": "envs",
    "rnn_hidden_dim": "hidden",
    "mixing_embed_dim": "mixembed",
    "target_update_interval": "target",
    "t_max": "tmax",
}
# The sweep sets these itself in every run.
RESERVED_KEYS = ("name", "seed", "seeds", "seed_batch", "checkpoint_path", "resume")
# A RUNNING run whose sacred heartbeat (every 10 s) is older than this is taken as dead.
STALE_HEARTBEAT_S = 120
POLL_S = 0.5
STOP_TIMEOUT_S = 120  # for a stopped run to finish its iteration and save, then it is killed
PROGRESS_EVERY_S = 10  # a progress line (with each running run's t_env) this often while runs are going
LOG_TAIL_BYTES = 64 * 1024  # read from the end of a run's log to find its latest "t_env: N / M" line
T_ENV_LINE = re.compile(r"t_env: (\d+) / (\d+)")
MAIN_PY = os.path.join(SRC_DIR, "main.py")
# Ray's object store for a local instance (`--ray local`): replies are small, memory is shared.
RAY_OBJECT_STORE_BYTES = 150 * 1024 ** 2
# Not sent to Ray workers with --ray-results ship (outputs, virtual environments, VCS data).
SHIP_EXCLUDES = ["results/", ".venv/", ".git/", "docs/", "**/__pycache__/"]


class SweepError(Exception):
    """A sweep that cannot go on (e.g. no Ray cluster at the address): one line, exit status 1."""


@dataclass
class SweepRun:
    """One grid point with one seed, and what the sweep knows about its sacred runs."""
    name: str
    point: dict
    seed: int
    state: str = "pending"   # pending | skipped | running | completed | failed | interrupted | running elsewhere
    action: str = ""         # start | resume | restart (resume not possible)
    checkpoint: str = ""     # models/<unique_token> it resumes from
    sacred_run: str = ""
    unique_token: str = ""
    returncode: Optional[int] = None
    duration_s: Optional[float] = None
    log: str = ""
    started: float = field(default=0.0, repr=False)


@dataclass
class Job:
    """One main.py process of a sweep: one run, or with --batch-seeds the fresh runs of one point as a
    seed batch (`seeds=[...]`). `name` keys it in the executors; its log is every run's log."""
    name: str
    runs: list
    argv: list
    log: str
    action: str


def split_values(text: str) -> list:
    """Split `a,b,[1,2]` at the commas outside brackets."""
    values, depth, current = [], 0, ""
    for char in text:
        depth += {"[": 1, "{": 1, "]": -1, "}": -1}.get(char, 0)
        if char == "," and depth == 0:
            values.append(current)
            current = ""
        else:
            current += char
    values.append(current)
    return [value.strip() for value in values]


def parse_grid(specs: list) -> dict:
    """{key: [values]} from `--grid key=v1,v2` options; values are parsed as sacred parses `with key=value`."""
    from sacred.arg_parser import get_config_updates
    grid = {}
    for spec in specs:
        key, sep, text = spec.partition("=")
        if not sep or not key or not text:
            raise UsageError(f"--grid '{spec}' is not KEY=V1,V2,...; e.g. --grid epsilon_anneal_time=50000,100000")
        if key in grid:
            raise UsageError(f"--grid key '{key}' is given twice; list all its values in one --grid")
        if key.split(".")[0] in RESERVED_KEYS:
            raise UsageError(f"--grid key '{key}' is set by the sweep itself; use --seeds for seeds")
        if any(value == "" for value in split_values(text)):
            raise UsageError(f"--grid '{spec}' has an empty value")
        grid[key] = [get_dotted(get_config_updates([f"{key}={value}"])[0], key) for value in split_values(text)]
    return grid


def safe(text: str) -> str:
    """`text` with every character other than letters, digits and `._+-` turned into `-`."""
    return re.sub(r"[^A-Za-z0-9._+-]", "-", text)


def value_text(value: Any) -> str:
    """A filesystem-safe spelling of a config value: [5, 5] -> 5-5, 0.001 -> 0.001."""
    if isinstance(value, (list, tuple)):
        return "-".join(value_text(item) for item in value)
    return safe(str(value))


def run_name(prefix: str, point: dict, seed: int | str) -> str:
    """`<prefix>_<alias><value>..._seed<seed>`, e.g. qmix_eps50000_seed3 (see the module docstring)."""
    parts = [f"{ALIASES[key]}{value_text(value)}" if key in ALIASES else f"{safe(key)}={value_text(value)}"
             for key, value in point.items()]
    return "_".join([prefix, *parts, f"seed{seed}"])


def expand(grid: dict, seeds: list, prefix: str) -> list:
    """The cartesian product of the grid's values, each with every seed, as SweepRuns (point-major order)."""
    keys = list(grid)
    runs = [SweepRun(name=run_name(prefix, dict(zip(keys, values)), seed), point=dict(zip(keys, values)), seed=seed)
            for values in itertools.product(*(grid[key] for key in keys)) for seed in seeds]
    names = [run.name for run in runs]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise UsageError(f"grid values give the same run name twice ({duplicates[0]}); make the values distinct")
    return runs


def as_override(key: str, value: Any) -> str:
    """`key=value` that sacred parses back to `value` (strings quoted, lists and dicts as JSON)."""
    if isinstance(value, (list, dict)):
        return f"{key}={json.dumps(value)}"
    return f"{key}={value!r}" if isinstance(value, str) else f"{key}={value}"


class Sweep:
    """The runs of one sweep command, their state on disk, and the manifest."""

    def __init__(self, options: argparse.Namespace, main_args: list, with_tokens: list):
        self.options = options
        self.main_args = main_args
        params = list(main_args)
        self.base_config = build_config(params)  # validates --config/--env-config
        # Checked and converted as main.py does (t_max=2e6 -> 2000000), so config.json matches them.
        self.with_tokens = checked_params(["with", *with_tokens], self.base_config)[1:]
        updates = command_line_updates(["with", *self.with_tokens])
        for key in flatten(updates):
            if key.split(".")[0] in RESERVED_KEYS:
                raise UsageError(f"'{key}' cannot be set after `with`: the sweep sets it for every run")
        self.grid = parse_grid(options.grid)
        for key in self.grid:
            if key in flatten(updates):
                raise UsageError(f"'{key}' is both swept (--grid) and fixed after `with`; keep one")
        self.config = recursive_dict_update(json.loads(json.dumps(self.base_config)), updates)
        for key in self.grid:
            # env_args are the env constructor's keyword arguments, not all of them are in its YAML.
            if not key.startswith("env_args.") and not has_dotted(self.config, key):
                raise UsageError(f"--grid key '{key}' is not a config key of --config/--env-config; "
                                 f"check the spelling in src/config/")
            self.grid[key] = [self.checked_value(key, value) for value in self.grid[key]]
        self.results = results_path(self.config["local_results_path"])
        self.fixed = self.sweep_settings(updates)
        seeds = list(range(options.first_seed, options.first_seed + options.seeds))
        self.prefix = options.prefix or self.main_option("--config")
        self.runs = expand(self.grid, seeds, self.prefix)
        self.name = options.name or self.default_name()
        self.manifest_path = os.path.join(self.results, "sweeps", f"{self.name}.json")
        self.log_dir = os.path.join(self.results, "sweeps", self.name)
        self.history = self.earlier_history()
        # A shipped run starts in an empty folder on the worker, without the checkpoint to resume from.
        self.resume_supported = "resume" in self.base_config and options.ray_results != "ship"

    def checked_value(self, key: str, value: Any) -> Any:
        """A grid value as main.py will read it (checked and converted like a `with` override)."""
        (token,) = checked_params(["with", as_override(key, value)], self.base_config)[1:]
        return get_dotted(command_line_updates(["with", token]), key)

    def main_option(self, option: str) -> str:
        return next(arg.split("=", 1)[1] for arg in self.main_args if arg.startswith(option + "="))

    def default_name(self) -> str:
        group = self.config.get("env_args", {}).get("map_name") or self.config["env"]
        keys = "-".join(ALIASES.get(key, key) for key in self.grid) or "seeds"
        return value_text(f"{self.options.prefix or self.main_option('--config')}_{group}_{keys}")

    def sweep_settings(self, updates: dict) -> dict:
        """The `with` overrides plus what every sweep run needs: saved models (to resume from),
        TensorBoard curves, an absolute results folder, and a model save interval of t_max / 10
        unless one is given."""
        fixed = flatten(updates)
        fixed.update({"save_model": True, "use_tensorboard": True, "local_results_path": self.results})
        if self.options.batch_seeds:  # a batch trains each seed on one thread; a run resumed alone so too
            # (the thread count orders the training step's float sums)
            fixed["learner_threads"] = 1
        if "save_model_interval" not in fixed:
            fixed["save_model_interval"] = max(1, int(self.config["t_max"]) // 10)
        return fixed

    def identity(self, run: SweepRun) -> dict:
        """Config values (dotted keys) that a sacred run of `run` in this sweep must have (where it
        wrote is not one of them: a shipped run wrote to a folder on the worker)."""
        fixed = {key: value for key, value in self.fixed.items() if key != "local_results_path"}
        return {**fixed, **run.point, "seed": run.seed, "name": run.name}

    def sacred_dir(self, run: SweepRun) -> str:
        updates = {}
        for key, value in self.identity(run).items():
            recursive_dict_update(updates, nested(key, value))
        return observer_dir(self.config, updates)

    def argv(self, run: SweepRun, checkpoint: str = "") -> list:
        overrides = [as_override(key, value) for key, value in self.identity(run).items()]
        overrides.append(as_override("local_results_path", self.results))
        if checkpoint:
            overrides += [as_override("checkpoint_path", checkpoint), "resume=True"]
        return [*self.main_args, "with", *overrides]

    def jobs(self, todo: list) -> list:
        """The main.py processes that run `todo`: one per run, except with --batch-seeds, where the runs of
        one point that start from t_env 0 (start, restart) go into one seed batch; a run that resumes
        its checkpoint goes alone, as without --batch-seeds."""
        jobs, batches = [], {}
        for run in todo:
            if self.options.batch_seeds and run.action in ("start", "restart"):
                batches.setdefault(json.dumps(run.point, sort_keys=True), []).append(run)
            else:
                jobs.append(self.single_job(run))
        for point_runs in batches.values():
            for first in range(0, len(point_runs), MAX_SEEDS):  # a batch holds at most MAX_SEEDS seeds
                runs = point_runs[first:first + MAX_SEEDS]
                jobs.append(self.single_job(runs[0]) if len(runs) == 1 else self.batch_job(runs))
        return jobs

    def batch_job(self, runs: list) -> Job:
        """`runs` (one point's) as one seed batch, named and logged after its first and last seed."""
        name = run_name(self.prefix, runs[0].point, f"{runs[0].seed}-{runs[-1].seed}")
        action = "restart" if any(run.action == "restart" for run in runs) else "start"
        return Job(name, runs, self.batch_argv(runs), os.path.join(self.log_dir, f"{name}.log"), action)

    def single_job(self, run: SweepRun) -> Job:
        checkpoint = run.checkpoint if run.action == "resume" else ""
        return Job(run.name, [run], self.argv(run, checkpoint), os.path.join(self.log_dir, f"{run.name}.log"),
                   run.action)

    def batch_argv(self, runs: list) -> list:
        """main.py's arguments for `runs` (one point's) as one seed batch: each run named as alone."""
        identity = {key: value for key, value in self.identity(runs[0]).items() if key not in ("seed", "name")}
        overrides = [as_override(key, value) for key, value in identity.items()]
        overrides += [as_override("seeds", [run.seed for run in runs]),
                      as_override("name", run_name(self.prefix, runs[0].point, "{seed}")),
                      as_override("local_results_path", self.results)]
        return [*self.main_args, "with", *overrides]

    def classify(self, run: SweepRun) -> str:
        """Decide what to do with `run` from its sacred folders: skip, resume, start, or leave (running)."""
        folders = matching_runs(self.sacred_dir(run), self.identity(run))
        completed = [found for found in folders if found.status == "COMPLETED"]
        if completed:
            run.sacred_run, run.unique_token = completed[-1].folder, completed[-1].config.get("unique_token", "")
            run.state = "skipped"
            return "skip"
        if folders and folders[-1].status == "RUNNING" and time.time() - folders[-1].heartbeat < STALE_HEARTBEAT_S:
            run.sacred_run = folders[-1].folder
            run.state = "running elsewhere"
            return "leave"
        run.checkpoint = saved_models(self.results, folders) if self.resume_supported else ""
        if run.checkpoint:
            return "resume"
        return "restart" if folders else "start"

    def settings(self) -> dict:
        """What identifies the sweep besides its seeds: main.py's arguments, the grid and the fixed
        overrides (as JSON would store them)."""
        fixed = {key: value for key, value in self.fixed.items() if key != "local_results_path"}
        return json.loads(json.dumps({"main_args": self.main_args, "grid": self.grid, "fixed_overrides": fixed}))

    def earlier_history(self) -> list:
        """The history of the manifest this sweep continues ([] for a new sweep); UsageError when a sweep
        of this name exists with other settings (its record would be lost and its runs mixed up)."""
        old = read_json(self.manifest_path)
        if old is None:
            return []
        old_settings = {key: old.get(key) for key in ("main_args", "grid")}
        old_settings["fixed_overrides"] = {key: value for key, value in (old.get("fixed_overrides") or {}).items()
                                           if key != "local_results_path"}
        settings = self.settings()
        differ = [key for key, value in settings.items() if old_settings[key] != value]
        if differ:
            key = differ[0]
            raise UsageError(f"sweep '{self.name}' already exists ({self.manifest_path}) with other {key} "
                             f"({old_settings[key]} there, {settings[key]} here); give --name NEW to start "
                             f"another sweep, or repeat its own command to continue it")
        return old.get("history", [])

    def write_manifest(self) -> None:
        """Write the manifest atomically (a reader never sees half a file): the sweep's settings, every
        run's state, and the history of the commands that ran it (this one last)."""
        os.makedirs(os.path.dirname(self.manifest_path), exist_ok=True)
        manifest = {
            "sweep": self.name,
            "updated": now_iso(),
            "command": " ".join(sys.argv),
            "with": self.with_tokens,
            **self.settings(),
            "seeds": sorted({run.seed for run in self.runs}),
            "results": self.results,
            "executor": f"ray:{self.options.ray} ({self.options.ray_results})" if self.options.ray else "local",
            "runs": [{key: value for key, value in vars(run).items() if key != "started"} for run in self.runs],
            "history": self.history,
        }
        tmp = self.manifest_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(manifest, f, indent=2)
        os.replace(tmp, self.manifest_path)


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def read_json(path: str) -> Optional[dict]:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


class SacredRun(NamedTuple):
    """A sacred run folder of a sweep run: its status, last heartbeat (epoch seconds) and config."""
    folder: str
    status: str
    heartbeat: float
    config: dict


def matching_runs(sacred_dir: str, identity: dict) -> list:
    """SacredRuns of the sacred run folders directly under `sacred_dir` (evaluation runs, in its eval/,
    are not among them) whose config.json has all `identity` values, oldest first."""
    if not os.path.isdir(sacred_dir):
        return []
    found = []
    for run_id in sorted((int(d) for d in os.listdir(sacred_dir) if d.isdigit())):
        folder = os.path.join(sacred_dir, str(run_id))
        config, info = read_json(os.path.join(folder, "config.json")), read_json(os.path.join(folder, "run.json"))
        if config is None or info is None:
            continue
        if all(has_dotted(config, key) and get_dotted(config, key) == value for key, value in identity.items()):
            beat = info.get("heartbeat") or info.get("start_time")
            found.append(SacredRun(folder, info.get("status", ""), heartbeat_epoch(beat), config))
    return found


def heartbeat_epoch(stamp: Optional[str]) -> float:
    """Seconds since the epoch of a sacred time stamp (UTC, naive ISO format); 0 when absent."""
    if not stamp:
        return 0.0
    return datetime.datetime.fromisoformat(stamp).replace(tzinfo=datetime.timezone.utc).timestamp()


def saved_models(results: str, folders: list) -> str:
    """<results>/models/<unique_token> with a saved model of the newest of `folders` (SacredRuns) that
    has one, by the unique_token its config.json records; '' when none does (a run from before
    config.json recorded its token is started again rather than matched to models by name)."""
    for found in reversed(folders):
        token = found.config.get("unique_token")
        if not token:
            continue
        models = os.path.join(results, "models", token)
        try:
            saved_steps(models)
        except CheckpointNotFound:
            continue
        return models
    return ""


# ---------------------------------------------------------------- running one main.py (also on Ray workers)

def execute_main(argv: list, main_py: str, threads: int, ship: bool) -> dict:
    """Run `python main.py argv` and return {returncode, log, archive}. With `ship`, the run writes
    into a temporary results folder whose contents come back as a .tar.gz (bytes) in `archive`.
    Self-contained (standard library only) so that Ray can run it on any worker."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    workdir = tempfile.mkdtemp(prefix="marlkit_run_") if ship else ""
    if ship:
        argv = [*argv, f"local_results_path={workdir}"]
    proc = subprocess.run([sys.executable, main_py, *argv], env=env, capture_output=True, text=True)
    result = {"returncode": proc.returncode, "log": proc.stdout + proc.stderr, "archive": b""}
    if ship:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            tar.add(workdir, arcname=".")
        result["archive"] = buffer.getvalue()
        shutil.rmtree(workdir, ignore_errors=True)
    return result


def merge_shipped(archive: bytes, results: str) -> list:
    """Unpack a shipped run into `results`: each sacred run folder gets the next free run id
    under its sacred/<group>/<name>/ (ids are per machine), sacred's _sources and the tb_logs/ and
    models/ folders are copied as they are. Returns the new sacred run folders."""
    with tempfile.TemporaryDirectory(prefix="marlkit_ship_") as unpacked:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
            tar.extractall(unpacked, filter="data")
        new_runs = []
        for root, dirs, files in os.walk(unpacked):
            relative = os.path.relpath(root, unpacked)
            if os.path.basename(root).isdigit() and "run.json" in files and relative.startswith("sacred"):
                target_parent = os.path.join(results, os.path.dirname(relative))
                os.makedirs(target_parent, exist_ok=True)
                ids = [int(d) for d in os.listdir(target_parent) if d.isdigit()]
                target = os.path.join(target_parent, str(max(ids, default=0) + 1))
                shutil.copytree(root, target)
                new_runs.append(target)
                dirs.clear()
            else:
                for name in files:
                    target = os.path.join(results, relative, name)
                    if not os.path.exists(target):
                        os.makedirs(os.path.dirname(target), exist_ok=True)
                        shutil.copy2(os.path.join(root, name), target)
        return new_runs


def open_run_log(job: Job):
    """The job's log opened for appending, after a line that says which attempt the next lines are: a
    resumed or restarted run adds to the log of its earlier attempts."""
    log = open(job.log, "a")
    log.write(f"\n=== {now_iso()} sweep {job.action}: main.py {' '.join(job.argv)}\n")
    log.flush()
    return log


class LocalExecutor:
    """Runs main.py in subprocesses on this machine."""

    def __init__(self, threads: int):
        self.threads = threads
        self.procs = {}  # run name -> (Popen, log file)

    def start(self, job: Job) -> None:
        env = dict(os.environ, OMP_NUM_THREADS=str(self.threads), MKL_NUM_THREADS=str(self.threads))
        log = open_run_log(job)
        # A session of its own: a Ctrl-C in the terminal reaches only the sweep, which then sends each
        # run one SIGTERM (main.py stops, saves and exits; further signals would change nothing).
        self.procs[job.name] = (subprocess.Popen([sys.executable, MAIN_PY, *job.argv], cwd=REPO_DIR, env=env,
                                                 stdout=log, stderr=subprocess.STDOUT, start_new_session=True), log)

    def finished(self) -> list:
        """(job name, returncode) of the jobs that ended since the last call."""
        done = []
        for name, (proc, log) in list(self.procs.items()):
            if proc.poll() is not None:
                log.close()
                del self.procs[name]
                done.append((name, proc.returncode))
        return done

    def stop(self) -> None:
        """Stop the runs with SIGTERM (main.py saves a checkpoint and sacred records INTERRUPTED;
        SIGINT may be ignored by processes started in the background) and wait for them."""
        for proc, _ in self.procs.values():
            proc.send_signal(signal.SIGTERM)
        for proc, log in self.procs.values():
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
            log.close()


class RayExecutor:
    """Runs main.py as Ray tasks (one CPU each) on the nodes of a Ray cluster."""

    def __init__(self, address: str, ship: bool, max_parallel: int, results: str, threads: int):
        import ray  # only needed with --ray
        self.ray = ray
        self.ship = ship
        self.results = results
        self.threads = threads
        # shared: workers run this checkout's main.py and write to the shared results folder;
        # ship: the repository's code travels as the job's working_dir, results come back in the reply.
        runtime_env = {"working_dir": REPO_DIR, "excludes": SHIP_EXCLUDES} if ship else None
        if address == "local":
            ray.init(num_cpus=max_parallel, object_store_memory=RAY_OBJECT_STORE_BYTES, include_dashboard=False,
                     log_to_driver=False, configure_logging=False, runtime_env=runtime_env)
        else:
            try:
                ray.init(address=address, log_to_driver=False, configure_logging=False, runtime_env=runtime_env)
            except ConnectionError as error:
                raise SweepError(f"cannot reach a Ray cluster at '{address}' ({' '.join(str(error).split())}); "
                                 f"start one with `ray start --head`, or use --ray local") from None
        self.task = ray.remote(num_cpus=1, max_retries=0)(execute_main)
        self.refs = {}  # ObjectRef -> Job

    def start(self, job: Job) -> None:
        open_run_log(job).close()
        main_py = os.path.join("src", "main.py") if self.ship else MAIN_PY  # ship: relative to the working_dir
        self.refs[self.task.remote(job.argv, main_py, self.threads, self.ship)] = job

    def finished(self) -> list:
        if not self.refs:
            return []
        ready, _ = self.ray.wait(list(self.refs), num_returns=len(self.refs), timeout=0)
        done = []
        for ref in ready:
            job = self.refs.pop(ref)
            try:
                result = self.ray.get(ref)
            except self.ray.exceptions.RayError as error:
                result = {"returncode": -1, "log": f"Ray task failed: {error}", "archive": b""}
            with open(job.log, "a") as f:
                f.write(result["log"])
            if result["archive"]:
                merge_shipped(result["archive"], self.results)
            done.append((job.name, result["returncode"]))
        return done

    def stop(self) -> None:
        for ref in self.refs:
            self.ray.cancel(ref)
        self.ray.shutdown()


class Progress:
    """Counts of done / running / left runs, each running run's t_env / t_max (from its log) and an
    estimate of the time left, printed on each change and every PROGRESS_EVERY_S while runs go."""

    def __init__(self, total: int, max_parallel: int):
        self.total = total
        self.max_parallel = max_parallel
        self.start = time.time()
        self.durations = []

    def line(self, runs: list) -> str:
        done = sum(run.state in ("completed", "failed", "skipped") for run in runs)
        running = [run for run in runs if run.state == "running"]
        left = sum(run.state == "pending" for run in runs)
        failed = sum(run.state == "failed" for run in runs)
        skipped = sum(run.state == "skipped" for run in runs)
        elsewhere = sum(run.state == "running elsewhere" for run in runs)
        fractions = {run.name: run_fraction(run.log) for run in running}
        in_flight = ", ".join(f"{name} {fraction:.0%}" for name, fraction in fractions.items() if fraction is not None)
        return (f"[sweep {time.strftime('%H:%M:%S')}] done {done}/{self.total} (skipped {skipped}, failed {failed})"
                f" | running {len(running)}" + (f" (+{elsewhere} by another process)" if elsewhere else "") +
                (f" [{in_flight}]" if in_flight else "") +
                f" | left {left} | elapsed {format_duration(time.time() - self.start)}"
                f" | time left {self.time_left(running, left, fractions)}")

    def time_left(self, running: list, left: int, fractions: dict) -> str:
        """The mean run duration (of finished runs, else estimated from the running runs' progress)
        times the waves of runs still to go, less what the running runs have done."""
        if not running and left == 0:
            return format_duration(0)
        now = time.time()
        mean = sum(self.durations) / len(self.durations) if self.durations else None
        if mean is None:
            estimates = [(now - run.started) / fraction for run in running
                         if (fraction := fractions.get(run.name)) and fraction > 0]
            if not estimates:
                return "unknown (no run has logged progress yet)"
            mean = sum(estimates) / len(estimates)
        remaining_running = sum(max(0.0, mean - (now - run.started)) for run in running)
        total = remaining_running + left * mean
        return format_duration(total / max(1, min(self.max_parallel, len(running) + left)))


def run_fraction(log_path: str) -> Optional[float]:
    """t_env / t_max of the latest "t_env: N / M" line in a run's log (main.py prints one at each test);
    None when there is none yet."""
    try:
        with open(log_path, "rb") as f:
            f.seek(max(0, os.path.getsize(log_path) - LOG_TAIL_BYTES))
            tail = f.read().decode(errors="replace")
    except OSError:
        return None
    matches = T_ENV_LINE.findall(tail.rsplit("=== ", 1)[-1])  # this attempt's lines only
    if not matches:
        return None
    t_env, t_max = map(int, matches[-1])
    return min(1.0, t_env / max(1, t_max))


def format_duration(seconds: float) -> str:
    return str(datetime.timedelta(seconds=int(seconds)))


def say(text: str) -> None:
    print(text, flush=True)  # shows at once also when the console is redirected to a log file


def run_sweep(sweep: Sweep, executor_factory: Callable, max_parallel: int, echo: Callable = say) -> int:
    """Run the sweep's pending runs, at most `max_parallel` at once; 0 when all completed, else 1."""
    todo = []
    for run in sweep.runs:
        run.action = sweep.classify(run)
        if run.action in ("start", "resume", "restart"):
            todo.append(run)
    restarts = sum(run.action == "restart" for run in todo)
    if restarts:
        why = "" if sweep.resume_supported else " or resume is unavailable (--ray-results ship)"
        echo(f"[sweep] note: {restarts} unfinished runs start again from t_env 0: no saved model to resume from{why}")
    os.makedirs(sweep.log_dir, exist_ok=True)
    attempt = {"started": now_iso(), "command": " ".join(sys.argv), "actions": action_counts(sweep.runs),
               "outcome": "running"}
    sweep.history.append(attempt)
    sweep.write_manifest()
    n_seeds = len({run.seed for run in sweep.runs})
    echo(f"[sweep] {sweep.name}: {len(sweep.runs)} runs ({len(sweep.runs) // n_seeds} points × {n_seeds} seeds), "
         f"{len(todo)} to run, manifest {sweep.manifest_path}")
    if not todo:
        echo(Progress(len(sweep.runs), max_parallel).line(sweep.runs))
        return end_attempt(sweep, attempt, exit_code(sweep))
    executor = executor_factory()
    progress = Progress(len(sweep.runs), max_parallel)
    pending = sweep.jobs(todo)
    by_name = {job.name: job for job in pending}
    running = set()  # names of the jobs started and not ended
    last_echo = time.time()
    try:
        while pending or running:
            changed = False
            while pending and len(running) < max_parallel:
                job = pending.pop(0)
                launch(executor, job, echo)
                running.add(job.name)
                changed = True
            for name, returncode in executor.finished():
                running.discard(name)
                for run in by_name[name].runs:
                    finish(sweep, run, returncode, progress, echo, batched=len(by_name[name].runs) > 1)
                changed = True
            if changed:
                sweep.write_manifest()
            if changed or time.time() - last_echo >= PROGRESS_EVERY_S:
                echo(progress.line(sweep.runs))
                last_echo = time.time()
            time.sleep(POLL_S)
    except KeyboardInterrupt:
        echo("[sweep] interrupted: stopping the running runs; run the same command again to continue")
        interrupted = True
    else:
        interrupted = False
    finally:
        executor.stop()
    if interrupted:
        for run in sweep.runs:
            if run.state == "running":
                run.state = "interrupted"
        return end_attempt(sweep, attempt, 130)
    return end_attempt(sweep, attempt, exit_code(sweep))


def action_counts(runs: list) -> dict:
    counts = {}
    for run in runs:
        counts[run.action] = counts.get(run.action, 0) + 1
    return counts


def end_attempt(sweep: Sweep, attempt: dict, code: int) -> int:
    """Record how this command's attempt ended in the manifest's history; returns `code`."""
    attempt["ended"] = now_iso()
    attempt["outcome"] = {0: "completed", 130: "interrupted"}.get(code, "failed")
    sweep.write_manifest()
    return code


def launch(executor, job: Job, echo: Callable) -> None:
    for run in job.runs:
        run.log, run.state, run.started = job.log, "running", time.time()
    executor.start(job)
    checkpoint = job.runs[0].checkpoint if job.action == "resume" else ""
    how = f"resuming from {checkpoint}" if checkpoint else ("starting again" if job.action == "restart" else "starting")
    names = ", ".join(run.name for run in job.runs)
    echo(f"[sweep] {how}: {names}" + (" (one process, seeds side by side)" if len(job.runs) > 1 else ""))


def finish(sweep: Sweep, run: SweepRun, returncode: int, progress: Progress, echo: Callable,
           batched: bool = False) -> None:
    """Record how `run` ended: completed when its sacred record says so and, unless it ran in a seed batch
    (whose exit status is all its runs'), its process exited with 0."""
    run.returncode = returncode
    run.duration_s = round(time.time() - run.started, 1)
    folders = matching_runs(sweep.sacred_dir(run), sweep.identity(run))
    run.sacred_run = folders[-1].folder if folders else ""
    run.unique_token = folders[-1].config.get("unique_token", "") if folders else ""
    completed = (returncode == 0 or batched) and bool(folders) and folders[-1].status == "COMPLETED"
    run.state = "completed" if completed else "failed"
    if completed:
        progress.durations.append(run.duration_s)
        echo(f"[sweep] completed: {run.name} in {format_duration(run.duration_s)}")
    else:
        echo(f"[sweep] FAILED: {run.name} (exit code {returncode}); see {run.log}")


def exit_code(sweep: Sweep) -> int:
    return 0 if all(run.state in ("completed", "skipped") for run in sweep.runs) else 1


def parse_command_line(argv: list) -> tuple:
    """(options, main.py's --config/--env-config arguments, the `with` tokens)."""
    head, with_tokens = (argv[:argv.index("with")], argv[argv.index("with") + 1:]) if "with" in argv else (argv, [])
    parser = argparse.ArgumentParser(
        prog="sweep.py", description="Run a grid of configs × seeds as main.py runs (see src/sweep.py's docstring).",
        epilog="Everything after `with` is passed to every run, as in main.py.")
    parser.add_argument("--config", required=True, help="algorithm config, as main.py's --config")
    parser.add_argument("--env-config", required=True, help="environment config, as main.py's --env-config")
    parser.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2",
                        help="a swept config key and its values; several --grid give their cartesian product")
    parser.add_argument("--seeds", type=positive_int, default=1, help="seeds per point (default 1)")
    parser.add_argument("--first-seed", type=int, default=0, help="seeds are FIRST_SEED .. FIRST_SEED+SEEDS-1")
    parser.add_argument("--max-parallel", type=positive_int, default=os.cpu_count() or 1,
                        help="main.py processes at once (default: the number of CPUs)")
    parser.add_argument("--batch-seeds", action="store_true",
                        help="run each point's seeds side by side in one main.py process (seeds=[...]; README "
                             "\"Seeds\"); a run that resumes its checkpoint still goes alone")
    parser.add_argument("--name", help="sweep name for the manifest (default <prefix>_<map or env>_<keys>)")
    parser.add_argument("--prefix", help="run name prefix (default: the --config name)")
    parser.add_argument("--ray", metavar="ADDRESS", help="run on a Ray cluster at ADDRESS ('local': start one here)")
    parser.add_argument("--ray-results", choices=("shared", "ship"), default="shared",
                        help="shared: workers write to this results folder; ship: runs come back in the task reply")
    parser.add_argument("--dry-run", action="store_true", help="list the runs and what would happen, run nothing")
    options = parser.parse_args(head)
    main_args = [f"--config={options.config}", f"--env-config={options.env_config}"]
    return options, main_args, with_tokens


def positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is not a positive whole number")
    return int(text)


def interrupt(_signum, _frame) -> None:
    raise KeyboardInterrupt


def main(argv: list) -> int:
    signal.signal(signal.SIGTERM, interrupt)  # `kill` stops a sweep as Ctrl-C does
    options, main_args, with_tokens = parse_command_line(argv)
    try:
        sweep = Sweep(options, main_args, with_tokens)
    except UsageError as error:
        print(f"sweep.py: error: {error}", file=sys.stderr)
        return USAGE_EXIT_CODE
    max_parallel = options.max_parallel
    threads = max(1, (os.cpu_count() or 1) // max_parallel)
    if options.dry_run:
        for run in sweep.runs:
            print(f"{sweep.classify(run):8} {run.name}")
        return 0
    if options.ray:
        factory = functools.partial(RayExecutor, options.ray, options.ray_results == "ship", max_parallel,
                                    sweep.results, threads)
    else:
        factory = functools.partial(LocalExecutor, threads)
    try:
        return run_sweep(sweep, factory, max_parallel)
    except SweepError as error:
        print(f"sweep.py: error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

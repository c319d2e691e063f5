"""End-to-end training speed of EPyMARL's presets on LBF: marlkit against EPyMARL's own code, same machine, one run.

Usage (from the repository root):
    python bench/bench_epymarl.py --epymarl PATH [--t-max 30000] [--warm-steps 6000] [--algs qmix mappo]

PATH is a checkout of EPyMARL (github.com/uoe-agents/epymarl; not part of this repository, e.g.
`git clone https://github.com/uoe-agents/epymarl /tmp/epymarl`), run with this Python (its packages:
torch, sacred, gymnasium, lbforaging, as marlkit's requirements.txt installs them). EPyMARL imports
`smaclite` at start even for gymma tasks; an empty stand-in module is put on its PYTHONPATH.

Each algorithm runs once in each code base, one after the other, with the same command on
Foraging-8x8-2p-3f-v3 (time_limit 50, seed 1, a test every t_max / 8 steps for timing points) and each
code base's preset of it: EPyMARL's qmix.yaml is marlkit's qmix_epymarl, mappo is mappo in both. The steady rate is env steps per second between the first
test at or after --warm-steps and the last test (bench_e2e.steady_rate); "overall" is t_max over the whole
wall-clock; "with test steps" is the steady rate counting the greedy test episodes' env steps too (from each
run's sacred info.json), since how long those episodes last depends on the policy each run learned, not on
the code. The ratio is marlkit's rate over EPyMARL's.
"""
import argparse
import datetime
import glob
import json
import os
import sys
import tempfile
from typing import NamedTuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_e2e import REPO, run_workload, steady_rate, steady_window  # noqa: E402
from machine_info import describe_machine  # noqa: E402

TASK = ["--env-config=gymma", "with", "env_args.time_limit=50", "env_args.key=lbforaging:Foraging-8x8-2p-3f-v3",
        "seed=1"]
CONFIGS = {"qmix": {"marlkit": "qmix_epymarl", "epymarl": "qmix"}, "mappo": {"marlkit": "mappo", "epymarl": "mappo"}}


class Rates(NamedTuple):
    """Env steps per second of one run."""

    steady: float  # training steps, between the first test after the warm-up and the last test
    overall: float  # t_max over the whole wall-clock
    with_tests: float  # steady, counting the greedy test episodes' steps too


def run(repo: str, config: str, t_max: int, warm_steps: int, pythonpath: str | None = None) -> Rates:
    """The rates of one run of `repo`'s main.py with `config` on the task."""
    saved = os.environ.get("PYTHONPATH")
    if pythonpath:
        os.environ["PYTHONPATH"] = pythonpath
    try:
        with tempfile.TemporaryDirectory() as results:
            interval = max(t_max // 8, 1000)  # timing points: the presets test rarely (mappo: every 50k steps)
            result = run_workload(repo, [f"--config={config}", *TASK, f"t_max={t_max}", f"test_interval={interval}",
                                         f"log_interval={interval}", f"local_results_path={results}"], None)
            test_steps = logged_test_steps(repo, results)
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    return Rates(steady_rate(result["tests"], warm_steps), t_max / result["seconds"],
                 steady_rate_with_tests(result["tests"], warm_steps, test_steps))


def logged_test_steps(repo: str, results: str) -> dict[int, float]:
    """{t_env of a test: env steps its greedy episodes took}, from the run's sacred record (info.json:
    test_ep_length_mean times the test episodes run, as both code bases count them). The record is the
    one whose config names `results` as its local_results_path (EPyMARL keeps its sacred records in its
    own results/ folder, beside those of earlier runs)."""
    configs = [path for folder in (results, os.path.join(repo, "results"))
               for path in glob.glob(os.path.join(folder, "sacred", "**", "config.json"), recursive=True)]
    matching = []
    for path in configs:
        with open(path) as file:
            config = json.load(file)
        if config.get("local_results_path") == results:
            matching.append((path, config))
    if len(matching) != 1:
        raise SystemExit(f"{len(matching)} sacred records name {results} as their results path; expected one")
    [(config_path, config)] = matching
    with open(os.path.join(os.path.dirname(config_path), "info.json")) as file:
        info = json.load(file)
    episodes = max(1, config["test_nepisode"] // config["batch_size_run"]) * config["batch_size_run"]
    return {t_env: episodes * length
            for t_env, length in zip(info["test_ep_length_mean_T"], info["test_ep_length_mean"])}


def steady_rate_with_tests(tests: list, warm_steps: int, test_steps: dict[int, float]) -> float:
    """steady_rate counting the greedy test episodes' env steps too: how fast the code steps the env,
    whatever the length of the test episodes its policy plays (which differs between runs)."""
    (s0, t0), (s1, t1) = steady_window(tests, warm_steps)
    tested = sum(steps for t_env, steps in test_steps.items() if t0 <= t_env < t1)
    return (t1 - t0 + tested) / (s1 - s0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epymarl", required=True, help="a checkout of EPyMARL (its src/main.py runs)")
    parser.add_argument("--t-max", type=int, default=30000, help="env steps of each run")
    parser.add_argument("--warm-steps", type=int, default=6000, help="steady rate counted from this t_env")
    parser.add_argument("--algs", nargs="+", choices=sorted(CONFIGS), default=sorted(CONFIGS, reverse=True))
    args = parser.parse_args(argv)
    epymarl = os.path.abspath(args.epymarl)
    if not os.path.isfile(os.path.join(epymarl, "src", "main.py")):
        raise SystemExit(f"--epymarl {args.epymarl}: no src/main.py there; give a checkout of uoe-agents/epymarl")
    print(f"command: python bench/bench_epymarl.py --epymarl {args.epymarl} --t-max {args.t_max} "
          f"--warm-steps {args.warm_steps} --algs {' '.join(args.algs)}")
    print(f"machine: {describe_machine()}")
    print(f"date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}")
    with tempfile.TemporaryDirectory() as stubs:
        os.makedirs(os.path.join(stubs, "smaclite"))
        open(os.path.join(stubs, "smaclite", "__init__.py"), "w").close()
        for alg in args.algs:
            names = CONFIGS[alg]
            ours = run(REPO, names["marlkit"], args.t_max, args.warm_steps)
            theirs = run(epymarl, names["epymarl"], args.t_max, args.warm_steps, pythonpath=stubs)
            print(f"{alg}: marlkit --config={names['marlkit']} {ours.steady:.0f} env steps/s steady "
                  f"({ours.overall:.0f} overall, {ours.with_tests:.0f} with test steps); EPyMARL "
                  f"--config={names['epymarl']} {theirs.steady:.0f} ({theirs.overall:.0f}, {theirs.with_tests:.0f}); "
                  f"ratio {ours.steady / theirs.steady:.2f} steady, {ours.overall / theirs.overall:.2f} overall, "
                  f"{ours.with_tests / theirs.with_tests:.2f} with test steps")


if __name__ == "__main__":
    main()

"""Which value-based algorithms find the optimum of a non-monotonic one-step matrix game.

The payoff is the one the QTRAN, WQMIX and QPLEX papers use (two agents, three actions each):

         8  -12  -12
       -12    0    0
       -12    0    0

The optimal joint action (0, 0) pays 8; a monotonic factorisation (QMIX, VDN) cannot represent it
and settles on a joint action of the 0 block. As in those papers the data are uniform: epsilon
stays 1 for the whole run (epsilon_finish=1.0), and the learned greedy joint action is tested.

Each run is an ordinary training run of the algorithm's config (PyMARL2's YAML values, the parallel
runner with its 8 envs stepped in this process, the replay buffer, the learner) on
`--env-config=one_step_matrix_game` with `env_args.payoff` set as above, for --t-max episodes (20,000
unless it says otherwise; the algorithm YAML's t_max of 10.05M steps is not used); the same as

    python src/main.py --config=<alg> --env-config=one_step_matrix_game with \\
        'env_args.payoff=[[8,-12,-12],[-12,0,0],[-12,0,0]]' epsilon_finish=1.0 t_max=20000 seed=<seed>

but without writing results. It prints, per algorithm, the fraction of seeds whose greedy joint
action is (0, 0), the mean payoff of the greedy joint action and each seed's greedy joint action.

Usage (from the repository root):
    python scripts/matrix_game_study.py                       # every algorithm, 5 seeds each
    python scripts/matrix_game_study.py --algs qplex ow_qmix --seeds 3 --jobs 2
"""
import argparse
import datetime
import logging
import os
import platform
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from types import SimpleNamespace

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))

import torch as th  # noqa: E402

from main import build_config  # noqa: E402
from run.run import TrainingLoop, args_sanity_check, setup_learning  # noqa: E402
from runners import REGISTRY as runner_REGISTRY  # noqa: E402
from utils.logging import Logger  # noqa: E402

PAYOFF = [[8.0, -12.0, -12.0], [-12.0, 0.0, 0.0], [-12.0, 0.0, 0.0]]
OPTIMUM = (0, 0)
ALGS = ("qmix", "vdn", "qatten", "qplex", "ow_qmix", "cw_qmix", "qtran", "qmix_att", "qmix_conv")
LOG = logging.getLogger("matrix_game_study")


def study_args(alg: str, seed: int, t_max: int, results: str) -> SimpleNamespace:
    """The merged config of `alg` on the matrix game with the papers' payoff and epsilon 1 throughout."""
    config = build_config(["main.py", f"--config={alg}", "--env-config=one_step_matrix_game"])
    config.update(seed=seed, env_args=dict(config["env_args"], payoff=PAYOFF, seed=seed), epsilon_finish=1.0,
                  use_cuda=False, env_processes="main", local_results_path=results, save_model=False,
                  use_tensorboard=False, learner_threads=1, t_max=t_max)
    # No test episodes while training: the greedy joint action is read once, at the end.
    config["test_interval"] = config["t_max"] + 1
    args = SimpleNamespace(**args_sanity_check(config, LOG))
    args.device = "cpu"
    args.unique_token = f"matrix_game_study_{alg}_{seed}"
    return args


def train_and_test(alg: str, seed: int, t_max: int = 20000) -> dict:
    """Train `alg` with `seed`; return its greedy joint action and that action's payoff."""
    th.set_num_threads(1)
    th.manual_seed(seed)
    LOG.setLevel(logging.WARNING)  # the learner's joint-action tables would flood the console
    with tempfile.TemporaryDirectory(prefix="matrix_game_study_") as results:
        args = study_args(alg, seed, t_max, results)
        logger = Logger(LOG)
        runner = runner_REGISTRY[args.runner](args=args, logger=logger)
        try:
            buffer, learner = setup_learning(args, runner, logger)
            loop = TrainingLoop(args, runner, buffer, learner, logger)
            start = time.perf_counter()
            while runner.t_env <= args.t_max:
                loop.collect()
                if buffer.can_sample(args.batch_size):
                    loop.learn()
                loop.episode += args.batch_size_run
            with th.no_grad():
                batch = runner.run(test_mode=True)  # [batch_size_run, 2, ...]: greedy, all alike
            actions = tuple(int(a) for a in batch["actions"][0, 0, :, 0])
            return {"alg": alg, "seed": seed, "actions": actions, "payoff": PAYOFF[actions[0]][actions[1]],
                    "seconds": time.perf_counter() - start, "t_env": runner.t_env}
        finally:
            runner.close_env()


def summary(results: list[dict], algs: list[str]) -> str:
    lines = ["| config | seeds at (0, 0) | mean greedy payoff | greedy joint action per seed |", "|---|---|---|---|"]
    for alg in algs:
        runs = sorted((r for r in results if r["alg"] == alg), key=lambda r: r["seed"])
        optimal = sum(r["actions"] == OPTIMUM for r in runs)
        mean = sum(r["payoff"] for r in runs) / len(runs)
        actions = ", ".join(f"{r['actions'][0]}{r['actions'][1]}" for r in runs)
        lines.append(f"| {alg} | {optimal}/{len(runs)} | {mean:+.1f} | {actions} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--algs", nargs="+", default=list(ALGS), help="algorithm configs (src/config/algs/)")
    parser.add_argument("--seeds", type=int, default=5, help="seeds per algorithm: 1 .. SEEDS")
    parser.add_argument("--t-max", type=int, default=20000, help="episodes per run")
    parser.add_argument("--jobs", type=int, default=os.cpu_count(), help="runs at once")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    runs = [(alg, seed) for alg in args.algs for seed in range(1, args.seeds + 1)]
    start = time.time()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        results = []
        for result in pool.map(train_and_test, *zip(*runs), [args.t_max] * len(runs)):
            results.append(result)
            print(f"{result['alg']} seed {result['seed']}: greedy {result['actions']}, payoff {result['payoff']:+.0f}, "
                  f"{result['t_env']} episodes in {result['seconds']:.0f} s", flush=True)
    print(f"command: python scripts/matrix_game_study.py {' '.join(argv if argv is not None else sys.argv[1:])}")
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    print(f"date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
          f"{(time.time() - start) / 60:.1f} min, {args.jobs} jobs")
    print(summary(results, args.algs))
    return results


if __name__ == "__main__":
    main()

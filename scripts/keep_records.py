"""Copy the small sacred records of finished training runs into the repository (docs/results/...).

Usage (from the repository root):
    python scripts/keep_records.py RESULTS/sacred docs/results/zoo

For each training run under SOURCE whose run.json says COMPLETED, its config.json, info.json,
metrics.json, run.json and cout.txt go to DEST/<map or env>/<name>/<n>/, as in sacred's layout.
A run already kept there (the same unique_token in its config.json) is updated in place; another run
gets the next free <n>. Runs not finished (RUNNING, INTERRUPTED, FAILED) are listed and left out:
an unfinished run is rerun, not kept. Models, TensorBoard events and replays are never copied.
"""
import argparse
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))

from utils.run_index import read_json, run_folders, run_kind, run_where  # noqa: E402

RECORD_FILES = ("config.json", "info.json", "metrics.json", "run.json", "cout.txt")


def kept_tokens(folder: str) -> dict[str, str]:
    """{unique_token: run folder} of the runs already kept under `folder` (a <map>/<name>/ folder)."""
    if not os.path.isdir(folder):
        return {}
    return {read_json(os.path.join(folder, run_id, "config.json"))["unique_token"]: os.path.join(folder, run_id)
            for run_id in os.listdir(folder) if os.path.exists(os.path.join(folder, run_id, "config.json"))}


def destination(config: dict, dest: str) -> str:
    """Where the run of `config` is kept: its folder if kept already, else the next free <n>."""
    parent = os.path.join(dest, run_where(config), str(config["name"]))
    kept = kept_tokens(parent)
    if config["unique_token"] in kept:
        return kept[config["unique_token"]]
    taken = {int(run_id) for run_id in os.listdir(parent) if run_id.isdigit()} if os.path.isdir(parent) else set()
    return os.path.join(parent, str(next(n for n in range(1, len(taken) + 2) if n not in taken)))


def keep(source: str, dest: str) -> tuple[list[str], list[str]]:
    """Copy the finished training runs' records; (folders written, runs left out with their status)."""
    written, left_out = [], []
    for folder in run_folders([source]):
        config = read_json(os.path.join(folder, "config.json"))
        status = read_json(os.path.join(folder, "run.json"))["status"]
        if run_kind(config) != "train":
            continue
        if status != "COMPLETED":
            left_out.append(f"{folder} ({status.lower()})")
            continue
        if not config.get("unique_token"):
            raise ValueError(f"{folder}: config.json records no unique_token, so the run cannot be told apart")
        target = destination(config, dest)
        os.makedirs(target, exist_ok=True)
        for name in RECORD_FILES:
            if os.path.exists(os.path.join(folder, name)):
                shutil.copyfile(os.path.join(folder, name), os.path.join(target, name))
        written.append(target)
    return written, left_out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", help="a results/sacred folder (or any folder above sacred run folders)")
    parser.add_argument("dest", help="where the records go, e.g. docs/results/zoo")
    args = parser.parse_args(argv)
    try:
        written, left_out = keep(args.source, args.dest)
    except (FileNotFoundError, ValueError) as error:
        print(f"keep_records.py: error: {error}", file=sys.stderr)
        return 1
    for target in written:
        print(f"kept {target}")
    for run in left_out:
        print(f"left out (not finished) {run}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Experiment statistics: console summaries, sacred's info.json and TensorBoard.

Every stat goes to all enabled sinks at once through `Logger.log_stat`; the console only
shows a periodic "Recent Stats" table (`print_recent_stats`).
"""
import contextlib
import logging
import sys
import threading
from collections import defaultdict
from typing import Any, Iterator, TextIO

import numpy as np

from utils.run_index import EPISODE_RECORD

# %(lane)s: "seed N | " for the runs of a seed batch (run/seed_batch.py), empty otherwise.
_CONSOLE_FORMAT = "[%(levelname)s %(asctime)s] %(name)s %(lane)s%(message)s"
# Third-party loggers that flood the console at DEBUG level (GitPython runs when sacred records git info;
# Numba logs every compilation pass when the built-in simulator compiles its loops).
_QUIET_LOGGERS = ("git", "numba")
_STATS_PER_LINE = 4
# Stats whose latest value is more telling than a mean over the print window.
_LATEST_ONLY = ("epsilon",)
EPISODE_DIGITS = 4  # per-episode values in info.json (EPISODE_RECORD) are kept to 4 decimals


def _plain_number(value: Any):
    """Python int/float of a python/numpy/torch scalar, so that every sink can serialise it."""
    return value.item() if hasattr(value, "item") else value


class Logger:
    """Routes stats to the console logger, sacred (run.info) and TensorBoard (tensorboardX)."""

    def __init__(self, console_logger: logging.Logger):
        self.console_logger = console_logger
        self.use_tb = False
        self.use_sacred = False
        self.tb_writer = None
        self.sacred_info = None
        # key -> [(t, value)] since the last print_recent_stats
        self.stats = defaultdict(list)

    def setup_tb(self, directory_name: str, purge_step: int | None = None) -> None:
        """Write TensorBoard events into directory_name. A resumed run passes purge_step (its
        checkpoint's t_env + 1): TensorBoard then hides the events an earlier run in the same
        folder logged from that step on, so the curve continues without overlap."""
        from tensorboardX import SummaryWriter  # only needed when use_tensorboard is set
        self.tb_writer = SummaryWriter(logdir=directory_name, purge_step=purge_step)
        self.use_tb = True

    def setup_sacred(self, sacred_run) -> None:
        """Stats will also be stored in the run's info.json as `key: [values]`, `key_T: [t_env]`."""
        self.sacred_info = sacred_run.info
        self.use_sacred = True

    def sacred_info_copy(self) -> dict:
        """The stats logged to sacred so far, as plain lists (saved in checkpoints)."""
        return {key: _copied(values) for key, values in (self.sacred_info or {}).items()}

    def restore_sacred_info(self, info: dict, to_tensorboard: bool = False) -> None:
        """Start this run's info.json with the curves of the run it resumes and, with `to_tensorboard`
        (a resumed run in a TensorBoard folder of its own, a branch), its TensorBoard events too."""
        if self.use_sacred:
            for key, values in info.items():
                self.sacred_info[key] = _copied(values)
        if to_tensorboard and self.use_tb:
            for key, values in info.items():
                if key == EPISODE_RECORD:
                    continue
                for value, t in zip(values, info.get(f"{key}_T", [])) if not key.endswith("_T") else ():
                    self.tb_writer.add_scalar(key, value, t)

    def log_stat(self, key: str, value: Any, t: int, to_sacred: bool = True) -> None:
        value = _plain_number(value)
        self.stats[key].append((t, value))
        if self.use_tb:
            self.tb_writer.add_scalar(key, value, t)
        if self.use_sacred and to_sacred:
            self.sacred_info.setdefault(key, []).append(value)
            self.sacred_info.setdefault(f"{key}_T", []).append(t)

    def log_episodes(self, values: dict[str, list], t: int) -> None:
        """Keep one test round's per-episode values ({name: [value per episode]}) in info.json under
        EPISODE_RECORD, for statistics over episodes (scripts/results_table.py --marl-eval). Each name's list
        holds one entry per round, null for a round that did not report it."""
        if not self.use_sacred:
            return
        record = self.sacred_info.setdefault(EPISODE_RECORD, {"T": []})
        rounds = len(record["T"])
        record["T"].append(t)
        for name in record.keys() - {"T"} | values.keys():  # every list stays aligned with T: null where missing
            kept = record.setdefault(name, [None] * rounds)
            episode_values = values.get(name)
            kept.append(None if episode_values is None else [round(float(v), EPISODE_DIGITS) for v in episode_values])

    def print_recent_stats(self) -> None:
        """Print the mean of every stat gathered since the last call (latest value for epsilon), then forget them."""
        t_env, episode = self._latest_time_and_episode()
        lines = f"Recent Stats | t_env: {t_env:>10} | Episode: {episode:>8}\n"
        keys = sorted(k for k in self.stats if k != "episode")
        for i, key in enumerate(keys, start=1):
            values = [v for _, v in self.stats[key]]
            shown = values[-1] if key in _LATEST_ONLY else np.mean(values)
            lines += f"{key + ':':<25}{shown:>8.4f}"
            lines += "\n" if i % _STATS_PER_LINE == 0 else "\t"
        self.console_logger.info(lines)
        self.stats = defaultdict(list)

    def _latest_time_and_episode(self) -> tuple:
        if self.stats["episode"]:
            t_env, episode = self.stats["episode"][-1]
            return t_env, int(episode)
        latest_t = max((t for entries in self.stats.values() for t, _ in entries), default=0)
        return latest_t, "-"

    def close(self) -> None:
        """Flush TensorBoard events to disk (tensorboardX otherwise writes only every 2 minutes)."""
        if self.use_tb:
            self.tb_writer.close()
            self.use_tb = False


def _copied(values: list | dict) -> list | dict:
    """A copy of one info.json entry: a stat's list of values, or EPISODE_RECORD's lists of lists."""
    if isinstance(values, dict):
        return {name: [list(v) if isinstance(v, list) else v for v in entries] for name, entries in values.items()}
    return list(values)


_thread = threading.local()  # .stream: where this thread's records go instead of sys.stderr; .lane: its label


@contextlib.contextmanager
def route_log_records(stream: TextIO) -> Iterator[None]:
    """The calling thread's log records go to `stream` in the body (a lane of a seed batch training
    while another lane, holding sys.stderr, collects: its records stay in its own cout.txt)."""
    previous = getattr(_thread, "stream", None)
    _thread.stream = stream
    try:
        yield
    finally:
        _thread.stream = previous


def set_thread_label(label: str) -> None:
    """Prefix the calling thread's log lines with `label` (e.g. "seed 3 | ")."""
    _thread.lane = label


class _CurrentStderrHandler(logging.StreamHandler):
    """Writes to sys.stderr as it is at each record, so that sacred's "sys" capture (which swaps
    sys.stderr during a run) also records the log in cout.txt; or to where route_log_records sends
    the calling thread's records."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.lane = getattr(_thread, "lane", "")
        return super().filter(record)

    @property
    def stream(self):
        return getattr(_thread, "stream", None) or sys.stderr

    @stream.setter
    def stream(self, _stream):
        pass


def get_logger() -> logging.Logger:
    """The root logger with one console handler in PyMARL's format."""
    for name in _QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    logger = logging.getLogger()
    logger.handlers = []
    handler = _CurrentStderrHandler()
    handler.setFormatter(logging.Formatter(_CONSOLE_FORMAT, "%H:%M:%S"))
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    return logger

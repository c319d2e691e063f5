"""utils.logging.Logger sinks and utils.timehelper formatting."""
import logging
from types import SimpleNamespace

import numpy as np

from utils.logging import Logger
from utils.timehelper import time_left, time_str


class ListHandler(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def make_logger():
    console = logging.getLogger("test_logging")
    console.propagate = False
    console.handlers = [ListHandler()]
    console.setLevel(logging.INFO)
    return Logger(console), console.handlers[0].messages


def test_sacred_info_gets_values_and_times():
    logger, _ = make_logger()
    run = SimpleNamespace(info={})
    logger.setup_sacred(run)
    logger.log_stat("return_mean", 1.5, 10)
    logger.log_stat("return_mean", 2.5, 20)
    logger.log_stat("hidden", 3.0, 20, to_sacred=False)
    assert run.info == {"return_mean": [1.5, 2.5], "return_mean_T": [10, 20]}


def test_per_episode_values_stay_aligned_with_their_rounds():
    logger, _ = make_logger()
    run = SimpleNamespace(info={})
    logger.setup_sacred(run)
    logger.log_episodes({"return": [1.23456789, 2]}, 10)
    logger.log_episodes({"return": [3], "battle_won": [1]}, 20)  # battle_won first reported in round 2
    logger.log_episodes({"return": [4]}, 30)
    assert run.info["test_episodes"] == {"T": [10, 20, 30], "return": [[1.2346, 2.0], [3.0], [4.0]],
                                         "battle_won": [None, [1.0], None]}
    copy = logger.sacred_info_copy()["test_episodes"]
    copy["return"][0].append(9.0)  # a checkpoint's copy is its own
    assert run.info["test_episodes"]["return"][0] == [1.2346, 2.0]


def test_recent_stats_show_means_since_the_last_print():
    logger, messages = make_logger()
    for t, value in ((10, 1.0), (20, 3.0)):
        logger.log_stat("return_mean", value, t)
        logger.log_stat("epsilon", value / 10, t)
    logger.log_stat("episode", 4, 20)
    logger.print_recent_stats()
    header, stats_line = messages[-1].splitlines()[:2]
    assert header == "Recent Stats | t_env:         20 | Episode:        4"
    assert stats_line.split("\t")[:2] == ["epsilon:                   0.3000", "return_mean:               2.0000"]

    logger.log_stat("return_mean", 7.0, 30)
    logger.log_stat("episode", 6, 30)
    logger.print_recent_stats()
    assert "return_mean:               7.0000" in messages[-1]
    assert "epsilon" not in messages[-1]


def test_tensorboard_events_are_flushed_on_close(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    logger, _ = make_logger()
    logger.setup_tb(str(tmp_path))
    logger.log_stat("loss_td", 0.25, 7)
    logger.close()
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    assert [(s.step, s.value) for s in events.Scalars("loss_td")] == [(7, 0.25)]


def test_time_helpers():
    assert time_str(2 * 86400 + 3 * 3600 + 4 * 60 + 5.9) == "2 days, 3 hours, 4 minutes, 5 seconds"
    assert time_str(59) == "59 seconds"
    assert time_left(0.0, 0, 100, 100) == "-"


def test_numba_compiling_the_simulator_loops_does_not_flood_the_console():
    from numba import njit

    from utils.logging import get_logger

    def total(values):
        s = 0.0
        for v in values:
            s = s + v
        return s

    root = get_logger()  # the console logger of main.py (level DEBUG)
    records = ListHandler()
    root.addHandler(records)
    try:
        njit(total)(np.ones(3))  # a compilation, as the built-in simulator's first step does
    finally:
        root.removeHandler(records)
    assert not [m for m in records.messages if "bytecode" in m or "SSA" in m], records.messages[:3]

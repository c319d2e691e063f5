"""bench/trace_engine.py: the check that a change to the built-in simulator plays the same battles."""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import trace_engine  # noqa: E402  (needs bench/ on sys.path)


def test_a_trajectory_is_recorded_the_same_twice_and_a_change_is_found_at_its_step():
    first = trace_engine.record(["3m"], steps=30, seed=1)
    second = trace_engine.record(["3m"], steps=30, seed=1)
    assert set(first) == {"3m/random", "3m/heuristic"}
    for key in first:
        assert trace_engine.first_difference(first[key], second[key]) == "identical"
    changed = second["3m/random"].copy()
    changed[11, 0] += 1e-12
    assert trace_engine.first_difference(first["3m/random"], changed).startswith("differ from step 12")
    assert "shapes" in trace_engine.first_difference(first["3m/random"], changed[:, :-1])


def test_the_two_policies_play_different_battles():
    record = trace_engine.record(["3m"], steps=30, seed=1)
    assert not np.array_equal(record["3m/random"], record["3m/heuristic"])

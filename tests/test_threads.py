"""Thread counts: the training step's fixed count by default, the opt-in tuner, and bad counts."""
import pytest
import torch as th

from main_runs import run_main
from utils.threads import ThreadTuner, torch_threads


def feed(tuner: ThreadTuner, seconds_of: dict, steps: int) -> list:
    """Run `steps` fake steps taking seconds_of[threads]; returns the thread count used at each."""
    used = []
    for _ in range(steps):
        n_threads = tuner.next_count()
        used.append(n_threads)
        tuner.record(n_threads, seconds_of[n_threads])
    return used


def test_without_tuning_the_count_is_fixed_at_torchs_or_the_given_one():
    """The default: the thread count never depends on timing, so a seed gives the same numbers on a busy
    machine (a matmul's result depends on the thread count on some CPUs)."""
    assert set(feed(ThreadTuner(0, max_threads=2), {2: 3.0, 1: 0.1}, 25)) == {2}
    assert set(feed(ThreadTuner(1, max_threads=2), {1: 3.0, 2: 0.1}, 25)) == {1}


def test_tuner_keeps_all_cores_while_they_are_faster():
    tuner = ThreadTuner(0, max_threads=2, tune=True, probe_every=10)
    used = feed(tuner, {2: 0.15, 1: 0.25}, 40)
    assert tuner.current == 2
    assert used.count(1) == 5  # step 1 and every 10th step probe the other count
    assert used[0] == 2


def test_tuner_moves_to_one_thread_when_a_neighbour_slows_all_cores_down_and_back_after():
    tuner = ThreadTuner(0, max_threads=2, tune=True, probe_every=10)
    feed(tuner, {2: 0.15, 1: 0.25}, 20)
    feed(tuner, {2: 3.0, 1: 0.3}, 12)  # a busy process appeared
    assert tuner.current == 1
    feed(tuner, {2: 0.15, 1: 0.25}, 30)  # it is gone
    assert tuner.current == 2


def test_tuner_fixed_count_never_probes():
    tuner = ThreadTuner(3, max_threads=2)
    assert set(feed(tuner, {3: 1.0}, 25)) == {3}


def test_tuner_single_core_has_nothing_to_probe():
    tuner = ThreadTuner(0, max_threads=1, tune=True)
    assert set(feed(tuner, {1: 1.0}, 25)) == {1}


def test_tuner_rejects_negative_counts_and_a_count_to_tune():
    with pytest.raises(ValueError, match="learner_threads must be 0"):
        ThreadTuner(-1, max_threads=2)
    with pytest.raises(ValueError, match="tune_learner_threads=True chooses the count itself"):
        ThreadTuner(2, max_threads=2, tune=True)


def test_step_context_sets_and_restores_the_count():
    before = th.get_num_threads()
    tuner = ThreadTuner(0, max_threads=2, tune=True)
    with tuner.step() as n_threads:
        assert th.get_num_threads() == n_threads == tuner.current
    assert th.get_num_threads() == before
    with torch_threads(1):
        assert th.get_num_threads() == 1
    assert th.get_num_threads() == before


def test_bad_learner_threads_is_one_line(tmp_path):
    result = run_main("--config=qmix", "--env-config=null", "with", "learner_threads=-2",
                      f"local_results_path={tmp_path}", timeout=120)
    assert result.returncode != 0
    assert "learner_threads=-2 must be at least 0" in result.stderr

"""Thread counts: the training step's tuner, acting on one thread, and thread counts not changing results."""
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


def test_tuner_keeps_all_cores_while_they_are_faster():
    tuner = ThreadTuner(0, max_threads=2, probe_every=10)
    used = feed(tuner, {2: 0.15, 1: 0.25}, 40)
    assert tuner.current == 2
    assert used.count(1) == 5  # step 1 and every 10th step probe the other count
    assert used[0] == 2


def test_tuner_moves_to_one_thread_when_a_neighbour_slows_all_cores_down_and_back_after():
    tuner = ThreadTuner(0, max_threads=2, probe_every=10)
    feed(tuner, {2: 0.15, 1: 0.25}, 20)
    feed(tuner, {2: 3.0, 1: 0.3}, 12)  # a busy process appeared
    assert tuner.current == 1
    feed(tuner, {2: 0.15, 1: 0.25}, 30)  # it is gone
    assert tuner.current == 2


def test_tuner_fixed_count_never_probes():
    tuner = ThreadTuner(3, max_threads=2)
    assert set(feed(tuner, {3: 1.0}, 25)) == {3}


def test_tuner_single_core_has_nothing_to_probe():
    tuner = ThreadTuner(0, max_threads=1)
    assert set(feed(tuner, {1: 1.0}, 25)) == {1}


def test_tuner_rejects_negative_counts():
    with pytest.raises(ValueError, match="learner_threads must be 0"):
        ThreadTuner(-1, max_threads=2)


def test_step_context_sets_and_restores_the_count():
    before = th.get_num_threads()
    tuner = ThreadTuner(0, max_threads=2)
    with tuner.step() as n_threads:
        assert th.get_num_threads() == n_threads == tuner.current
    assert th.get_num_threads() == before
    with torch_threads(1):
        assert th.get_num_threads() == 1
    assert th.get_num_threads() == before


def test_matmul_and_its_gradient_do_not_depend_on_the_thread_count():
    """What makes learner_threads=0 safe: the training step's results do not depend on the choice."""
    gen = th.Generator().manual_seed(0)
    x, grad_out = th.randn(4096, 192, generator=gen), th.randn(4096, 64, generator=gen)
    weight = th.randn(64, 192, generator=gen, requires_grad=True)
    results = []
    for n_threads in (1, 2):
        with torch_threads(n_threads):
            weight.grad = None
            out = th.nn.functional.linear(x, weight)
            out.backward(grad_out)
            results.append((out.detach(), weight.grad.clone()))
    assert th.equal(results[0][0], results[1][0]) and th.equal(results[0][1], results[1][1])


def test_bad_learner_threads_is_one_line(tmp_path):
    result = run_main("--config=qmix", "--env-config=null", "with", "learner_threads=-2",
                      f"local_results_path={tmp_path}", timeout=120)
    assert result.returncode != 0
    assert "learner_threads=-2 must be 0 (auto) or a thread count" in result.stderr

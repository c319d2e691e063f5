"""Torch thread counts for acting and training on a few CPU cores.

Oversubscription is the trap: torch's parallel regions wait for every one of their threads, so
when another busy process holds one of the cores, each of the thousands of operators of a
training step waits for a time slice. On 2 cores a QMIX training step that takes 0.26 s with 2
threads on an idle machine took 3-5x longer with 2 threads than with 1 once other processes ran
(and PyMARL2's went from 0.24 s to 24-54 s). Acting always uses one thread (runner_base). The
training step uses torch's own count (all cores, as PyMARL2) or learner_threads; with
tune_learner_threads (opt-in) ThreadTuner chooses it from measured step times. That is opt-in
because on some CPUs a matmul's result depends on the thread count (an Intel Xeon here; not an AMD
EPYC), so a count chosen by timing makes a run's numbers depend on the machine's load.
"""
import contextlib
import time
from typing import Iterator

import torch as th


@contextlib.contextmanager
def torch_threads(n_threads: int) -> Iterator[None]:
    """Run the body with `n_threads` torch threads, then restore the caller's count."""
    previous = th.get_num_threads()
    if previous == n_threads:
        yield
        return
    th.set_num_threads(n_threads)
    try:
        yield
    finally:
        th.set_num_threads(previous)


class ThreadTuner:
    """Picks the thread count of a repeated CPU workload (the training step) by timing it.

    Without `tune` it always uses `threads` (0 = `max_threads`). With `tune` the candidates are 1
    and `max_threads`: the tuner runs the step with its current choice and, every `probe_every`
    steps, once with the other count; it also probes at its second step, so that both counts are
    timed from the start. It switches when the probe's time is below `switch_ratio` times the
    current count's (an exponential average of its recent steps), so a busy neighbour process that
    comes or goes is followed within a probe or two.
    """

    def __init__(self, threads: int, max_threads: int, tune: bool = False, probe_every: int = 10,
                 switch_ratio: float = 0.9, smoothing: float = 0.5):
        if threads < 0:
            raise ValueError(f"learner_threads must be 0 (torch's count) or a positive thread count, got {threads}")
        if tune and threads:
            raise ValueError(f"tune_learner_threads=True chooses the count itself; it needs learner_threads=0, "
                             f"got {threads}")
        max_threads = max(1, max_threads)
        self.candidates = sorted({1, max_threads}, reverse=True) if tune else [threads or max_threads]
        self.current = self.candidates[0]
        self.probe_every = probe_every
        self.switch_ratio = switch_ratio
        self.smoothing = smoothing
        self.seconds = {}  # thread count -> smoothed seconds per step
        self.steps = 0

    def next_count(self) -> int:
        """Threads for the next step: the current choice, or the other candidate on a probe step."""
        others = [n for n in self.candidates if n != self.current]
        if others and (self.steps % self.probe_every == self.probe_every - 1 or self.steps == 1):
            return others[0]
        return self.current

    def record(self, n_threads: int, seconds: float) -> None:
        """Account for one step's wall-clock and switch when the other count has become faster."""
        if n_threads == self.current:
            previous = self.seconds.get(n_threads, seconds)
            self.seconds[n_threads] = self.smoothing * previous + (1 - self.smoothing) * seconds
        else:  # probes are rare: the latest one says more than an average with old ones
            self.seconds[n_threads] = seconds
        self.steps += 1
        if n_threads != self.current and self.current in self.seconds \
                and self.seconds[n_threads] < self.switch_ratio * self.seconds[self.current]:
            self.current = n_threads

    @contextlib.contextmanager
    def step(self, work: float = 1.0) -> Iterator[int]:
        """Run the body (one step) with the tuned thread count and time it; yields the count used.

        `work` scales the step's size (e.g. the sampled batch's time steps), so that steps on short
        and long episodes compare by seconds per unit of work."""
        n_threads = self.next_count()
        with torch_threads(n_threads):
            start = time.perf_counter()
            yield n_threads
            self.record(n_threads, (time.perf_counter() - start) / work)

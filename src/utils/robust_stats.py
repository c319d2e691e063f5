"""Aggregate statistics over runs and tasks, as Agarwal et al. define them ("Deep Reinforcement Learning at
the Edge of the Statistical Precipice", NeurIPS 2021) and their library rliable computes them: the
interquartile mean (IQM), mean, median and optimality gap of normalised scores, the probability of
improvement, performance profiles, and stratified bootstrap confidence intervals for each.

Scores are arrays [runs, tasks] (the same number of runs on every task), already normalised per task. Every
metric also takes a stack of such arrays, [..., runs, tasks], and returns one value per leading index, so a
bootstrap computes all its resamples in one call.

rliable itself is not used: it brings arch, statsmodels, scipy, seaborn and pandas (over 150 MB) for these few
lines of numpy, and pins arch below 8. The definitions follow rliable 1.2.0 (metrics.py, library.py):
  - IQM: the mean of the middle half of all run x task scores (scipy's trim_mean, 25% cut from each end);
  - mean and median: of the per-task means over runs; optimality gap: gamma - mean(min(score, gamma));
  - probability of improvement P(X > Y): per task, the share of (run of X, run of Y) pairs where X scores
    higher, ties counting half (Mann-Whitney's U / (n_x n_y)), averaged over tasks;
  - stratified bootstrap: each resample draws, for every task apart, as many runs as it has, with replacement
    (of X and Y independently for P(X > Y)); the interval is the resamples' 2.5th and 97.5th percentiles;
  - performance profile: the share of run x task scores above each threshold tau.
"""
from typing import Callable

import numpy as np

CONFIDENCE = 0.95
INTERVAL_REPS = 50_000  # rliable's get_interval_estimates default
PROFILE_REPS = 2_000  # rliable's create_performance_profile default
SEED = 0  # the bootstrap's own generator: a table rebuilt from the same records gives the same intervals
CHUNK_VALUES = 20_000_000  # the most values one chunk of resamples compares (memory: 8 bytes each)


def iqm(scores: np.ndarray) -> np.ndarray:
    """Interquartile mean of [..., runs, tasks] over runs and tasks."""
    flat = np.sort(scores.reshape(*scores.shape[:-2], -1), axis=-1)  # [..., runs * tasks]
    cut = int(0.25 * flat.shape[-1])
    return flat[..., cut:flat.shape[-1] - cut].mean(axis=-1)


def mean(scores: np.ndarray) -> np.ndarray:
    return scores.mean(axis=-2).mean(axis=-1)


def median(scores: np.ndarray) -> np.ndarray:
    return np.median(scores.mean(axis=-2), axis=-1)


def optimality_gap(scores: np.ndarray, gamma: float = 1.0) -> np.ndarray:
    return gamma - np.minimum(scores, gamma).mean(axis=(-2, -1))


AGGREGATES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "IQM": iqm, "mean": mean, "median": median, "optimality gap": optimality_gap}


def improvement_probability(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """P(X > Y) of x [..., runs of X, tasks] over y [..., runs of Y, tasks], averaged over tasks."""
    wins = x[..., :, None, :] > y[..., None, :, :]  # [..., runs of X, runs of Y, tasks]
    ties = x[..., :, None, :] == y[..., None, :, :]
    return (wins + 0.5 * ties).mean(axis=(-3, -2)).mean(axis=-1)


def performance_profile(scores: np.ndarray, taus: np.ndarray) -> np.ndarray:
    """[..., taus]: the share of run x task scores above each tau."""
    flat = scores.reshape(*scores.shape[:-2], -1, 1)  # [..., runs * tasks, 1]
    return (flat > taus).mean(axis=-2)


def resample(scores: np.ndarray, reps: int, rng: np.random.Generator) -> np.ndarray:
    """[reps, runs, tasks]: stratified bootstrap resamples of scores [runs, tasks] (runs drawn per task)."""
    runs, tasks = scores.shape
    picks = rng.integers(0, runs, size=(reps, runs, tasks))
    return scores[picks, np.arange(tasks)]


def interval(metric: Callable[..., np.ndarray], *scores: np.ndarray, reps: int = INTERVAL_REPS,
             seed: int = SEED, confidence: float = CONFIDENCE) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the metric of `scores`, the lower and upper ends of its stratified bootstrap percentile interval),
    each resampling every score array apart; a metric of several values (a profile) gives arrays."""
    rng = np.random.default_rng(seed)
    # Resamples in chunks of at most CHUNK_VALUES compared values (P(X > Y) compares runs of X x runs of Y).
    per_rep = int(np.prod([s.size for s in scores]))
    chunk = max(1, CHUNK_VALUES // per_rep)
    estimates = np.concatenate([metric(*(resample(s, min(chunk, reps - done), rng) for s in scores))
                                for done in range(0, reps, chunk)])  # [reps, ...]
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(estimates, [tail, 100 - tail], axis=0)
    return metric(*scores), low, high

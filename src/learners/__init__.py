"""Learners turn sampled episode batches into parameter updates: REGISTRY[name](mac, scheme, logger, args)."""
from .nq_learner import NQLearner

REGISTRY = {
    "nq_learner": NQLearner,
}

"""Learners turn sampled episode batches into parameter updates: REGISTRY[name](mac, scheme, logger, args)."""
from .nq_learner import NQLearner
from .q_learner import QLearner

REGISTRY = {
    "q_learner": QLearner,
    "nq_learner": NQLearner,
}

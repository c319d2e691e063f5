"""Critics of the policy-gradient learners (learners/coma_learner.py, learners/lica_learner.py)."""
from .coma import COMACritic
from .lica import LICACritic

REGISTRY = {"coma": COMACritic, "lica": LICACritic}

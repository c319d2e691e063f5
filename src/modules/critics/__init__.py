"""Critics of the policy-gradient learners (learners/coma_learner.py)."""
from .coma import COMACritic

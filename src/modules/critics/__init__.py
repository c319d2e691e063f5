"""Critics of the policy-gradient learners (learners/coma_learner.py, lica_learner.py, offpg_learner.py,
fmac_learner.py)."""
from .coma import COMACritic
from .fmac import FMACCritic
from .lica import LICACritic
from .offpg import OffPGCritic

REGISTRY = {"coma": COMACritic, "lica": LICACritic, "offpg": OffPGCritic, "fmac": FMACCritic}

"""Critics of the policy-gradient learners (learners/coma_learner.py, lica_learner.py, offpg_learner.py,
fmac_learner.py, and EPyMARL's actor_critic_learner.py)."""
from .coma import COMACritic
from .fmac import FMACCritic
from .lica import LICACritic
from .offpg import OffPGCritic
from .state_value import ACCritic, CentralVCritic

REGISTRY = {"coma": COMACritic, "lica": LICACritic, "offpg": OffPGCritic, "fmac": FMACCritic,
            "ac_critic": ACCritic, "cv_critic": CentralVCritic}  # EPyMARL's critic_type names

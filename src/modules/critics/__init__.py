"""Critics of the policy-gradient learners (learners/coma_learner.py, lica_learner.py, offpg_learner.py,
fmac_learner.py, EPyMARL's actor_critic_learner.py, maddpg_learner.py and pac_learner.py with PAC-DCG, and
benellis3/mappo's trust_region_learner.py)."""
from .central_rnn import CentralVRNNCritic
from .coma import COMACritic
from .dcg import DCGCritic, DCGCriticNS
from .fmac import FMACCritic
from .lica import LICACritic
from .offpg import OffPGCritic
from .pac import PACCritic, PACCriticNS
from .state_value import (ACCritic, ACCriticNS, CentralVCritic, CentralVCriticNS, EPyMARLCOMACritic,
                          EPyMARLCOMACriticNS, MADDPGCritic, MADDPGCriticNS)

REGISTRY = {"coma": COMACritic, "lica": LICACritic, "offpg": OffPGCritic, "fmac": FMACCritic,
            # EPyMARL's critic_type names
            "ac_critic": ACCritic, "cv_critic": CentralVCritic, "ac_critic_ns": ACCriticNS,
            "cv_critic_ns": CentralVCriticNS, "maddpg_critic": MADDPGCritic, "maddpg_critic_ns": MADDPGCriticNS,
            "pac_critic": PACCritic, "pac_critic_ns": PACCriticNS, "pac_dcg_critic": DCGCritic,
            "pac_dcg_critic_ns": DCGCriticNS, "coma_critic": EPyMARLCOMACritic, "coma_critic_ns": EPyMARLCOMACriticNS,
            "centralV_rnn_critic": CentralVRNNCritic}  # benellis3/mappo's (trust_region_learner)

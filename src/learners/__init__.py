"""Learners turn sampled episode batches into parameter updates: REGISTRY[name](mac, scheme, logger, args)."""
from .actor_critic_learner import ActorCriticLearner, EPyMARLCOMALearner
from .actor_critic_learner import PPOLearner as EPyMARLPPOLearner
from .coma_learner import COMALearner
from .dmaq_qatten_learner import DMAQLearner
from .epymarl_q_learner import EPyMARLQLearner
from .fmac_learner import FMACLearner
from .lica_learner import LICALearner
from .maddpg_learner import MADDPGLearner
from .max_q_learner import MaxQLearner
from .nq_learner import NQLearner
from .offpg_learner import OffPGLearner
from .pac_learner import PACDCGLearner, PACLearner
from .policy_gradient_v2 import PolicyGradientV2Learner
from .ppo_learner import PPOLearner
from .q_learner import QLearner
from .qtran_learner import QTranLearner
from .trust_region_learner import TrustRegionLearner

REGISTRY = {
    "q_learner": QLearner,
    "nq_learner": NQLearner,
    "dmaq_qatten_learner": DMAQLearner,  # QPLEX
    "max_q_learner": MaxQLearner,  # OW-QMIX, CW-QMIX
    "qtran_learner": QTranLearner,  # QTRAN
    "coma_learner": COMALearner,  # COMA
    "ppo_learner": PPOLearner,  # IPPO
    "policy_gradient_v2": PolicyGradientV2Learner,  # VMIX
    "lica_learner": LICALearner,  # LICA
    "offpg_learner": OffPGLearner,  # DOP
    "fmac_learner": FMACLearner,  # RIIT
    "actor_critic_learner": ActorCriticLearner,  # EPyMARL's IA2C, MAA2C
    "epymarl_ppo_learner": EPyMARLPPOLearner,  # EPyMARL's MAPPO and IPPO (its ppo_learner)
    "epymarl_q_learner": EPyMARLQLearner,  # EPyMARL's IQL, VDN, QMIX (its q_learner)
    "maddpg_learner": MADDPGLearner,  # EPyMARL's MADDPG
    "epymarl_coma_learner": EPyMARLCOMALearner,  # EPyMARL's COMA (its coma_learner)
    "pac_learner": PACLearner,  # EPyMARL's PAC (its actor_critic_pac_learner)
    "pac_dcg_learner": PACDCGLearner,  # EPyMARL's PAC-DCG (its actor_critic_pac_dcg_learner)
    "trust_region_learner": TrustRegionLearner,  # benellis3/mappo's MAPPO, as the SMACv2 paper ran it
}

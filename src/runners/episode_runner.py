"""Runs one env in-process, one episode per `run` call (PyMARL2's EpisodeRunner)."""
from runners.runner_base import BatchRunner, InProcessEnvs


class EpisodeRunner(BatchRunner):

    def __init__(self, args, logger):
        if args.batch_size_run != 1:
            raise ValueError(f"the episode runner runs one env but batch_size_run={args.batch_size_run}; "
                             f"set batch_size_run=1 or runner=parallel")
        super().__init__(args, logger)
        self.envs = InProcessEnvs(args.env, args.env_args, 1, self.first_seed_generation)
        self.env_info = self.envs.env_info()

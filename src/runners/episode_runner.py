"""Runs one env in-process, one episode per `run` call (PyMARL2's EpisodeRunner)."""
from runners.runner_base import BatchRunner, env_factory, observe, step_env


class EpisodeRunner(BatchRunner):

    def __init__(self, args, logger):
        if args.batch_size_run != 1:
            raise ValueError(f"the episode runner runs one env but batch_size_run={args.batch_size_run}; "
                             f"set batch_size_run=1 or runner=parallel")
        super().__init__(args, logger)
        self.env = env_factory(args.env)(**dict(args.env_args, seed=self.env_seeds[0]))
        self.env_info = self.env.get_env_info()

    def _reset_envs(self) -> list:
        self.env.reset()
        return [observe(self.env)]

    def _step_envs(self, actions: dict) -> dict:
        return {0: step_env(self.env, actions[0])}

    def get_env_stats(self) -> list:
        return [self.env.get_stats()]

    def save_replay(self) -> None:
        self.env.save_replay()

    def close_env(self) -> None:
        self.env.close()

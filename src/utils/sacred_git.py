"""Sacred's git record of a run, asked of git once per repository instead of once per source file.

Sacred records, for each of the experiment's source files, the repository it belongs to, that
repository's commit and whether it has uncommitted changes (run.json's "experiment.repositories").
It asks git anew for every file: a GitPython `Repo`, two `git diff` and a `git cat-file` process
each, about 66 git processes and 0.3 s for marlkit's 22 source files, every answer the same, since
these are properties of the repository, not of the file. Asking once per repository gives the same
record."""
import functools
import os
from typing import Callable

import sacred.dependencies


def repository_root(filename: str) -> str | None:
    """The nearest folder above `filename` that holds a `.git` (a folder, or a file in a worktree or a
    submodule), as GitPython's parent-directory search finds it; None outside a repository. (GitPython also
    takes a folder that is itself a bare repository, and expands `$VARS` in the path: neither occurs for
    source files in a checkout, and the key only groups files, the answer is still GitPython's.)"""
    folder = os.path.dirname(os.path.abspath(filename))
    while True:
        if os.path.exists(os.path.join(folder, ".git")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def ask_git_once_per_repository() -> None:
    """Make sacred's per-file git query answer each repository from its first answer, for the rest of the
    process (main.py calls this as it is imported, before it creates its Experiment). Each call starts
    with no answers and wraps sacred's own query, not an earlier install: a process that executes main.py
    again, as the tests' run server does, asks git again."""
    original: Callable = getattr(sacred.dependencies.get_commit_if_possible, "__wrapped__",
                                 sacred.dependencies.get_commit_if_possible)
    answers = {}

    @functools.wraps(original)
    def get_commit_if_possible(filename: str, save_git_info: bool) -> tuple:
        root = repository_root(filename)
        if root is None or not save_git_info:
            return original(filename, save_git_info)
        if root not in answers:
            answers[root] = original(filename, save_git_info)
        return answers[root]

    sacred.dependencies.get_commit_if_possible = get_commit_if_possible

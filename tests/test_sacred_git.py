"""Sacred's git record asked once per repository (utils/sacred_git.py): the answers sacred itself gives."""
import subprocess

import pytest
import sacred.dependencies

from utils.sacred_git import ask_git_once_per_repository, repository_root


def git(folder, *argv: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *argv], cwd=folder, check=True,
                   capture_output=True)


@pytest.fixture
def repositories(tmp_path):
    """Two repositories, `clean` and `dirty`, each with a committed source file, one of them in a sub-folder;
    and a file outside both."""
    for name in ("clean", "dirty"):
        (tmp_path / name / "sub").mkdir(parents=True)
        (tmp_path / name / "sub" / "a.py").write_text("x = 1\n")
        (tmp_path / name / "b.py").write_text("y = 2\n")
        git(tmp_path / name, "init", "-q")
        git(tmp_path / name, "add", ".")
        git(tmp_path / name, "commit", "-qm", "first")
    (tmp_path / "dirty" / "b.py").write_text("y = 3\n")
    (tmp_path / "outside.py").write_text("z = 0\n")
    return tmp_path


@pytest.fixture
def counted(monkeypatch) -> list:
    """sacred's own query, each call recorded (sacred's, not main.py's install of it when a test imported main)."""
    query = sacred.dependencies.get_commit_if_possible
    original = getattr(query, "__wrapped__", query)
    calls = []

    def counting(filename, save_git_info):
        calls.append(filename)
        return original(filename, save_git_info)

    monkeypatch.setattr(sacred.dependencies, "get_commit_if_possible", counting)
    return calls


def test_each_repository_is_asked_once_and_answers_as_sacred_does(repositories, counted):
    files = [str(repositories / name / path) for name in ("clean", "dirty") for path in ("sub/a.py", "b.py")]
    own = [sacred.dependencies.get_commit_if_possible(filename, True) for filename in files]
    assert [answer[2] for answer in own] == [False, False, True, True]  # (url, commit, is_dirty)
    counted.clear()
    ask_git_once_per_repository()
    assert [sacred.dependencies.get_commit_if_possible(filename, True) for filename in files] == own
    assert counted == [files[0], files[2]]  # one question per repository
    assert repository_root(files[0]) == str(repositories / "clean")
    assert repository_root(str(repositories / "outside.py")) is None  # asked each time, as sacred does
    assert sacred.dependencies.get_commit_if_possible(files[0], False) == (None, None, None)


def test_each_install_starts_without_answers(repositories, counted):
    """main.py installs it each time it runs: a run executed again in the same process (the tests' run
    server) asks git again and sees a commit made meanwhile."""
    source = str(repositories / "dirty" / "b.py")
    ask_git_once_per_repository()
    first = sacred.dependencies.get_commit_if_possible(source, True)
    git(repositories / "dirty", "commit", "-qam", "second")
    ask_git_once_per_repository()  # wraps sacred's query, not the first install
    second = sacred.dependencies.get_commit_if_possible(source, True)
    assert first[2] is True and second[2] is False and second[1] != first[1]
    assert len(counted) == 2

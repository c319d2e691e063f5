"""Stopping a run on SIGINT or SIGTERM without losing it.

While training (and while it saves its final checkpoint) the first SIGINT or SIGTERM only asks the
run to stop: the training loop finishes its iteration (or drops an unfinished episode batch), saves
a final checkpoint and exits with that signal's status. Signals that follow change nothing (a run
under `timeout` whose process group is signalled too gets two at once; an impatient Ctrl-C): they are
counted and the run still saves; SIGKILL stops it at once. Nothing can hang the stop: code that may
wait long (the parallel runner waiting on an env worker) polls `stop_requested()` and gives up after
a few seconds.
"""
import signal
import threading
import time

SIGNALS = (signal.SIGINT, signal.SIGTERM)
# The first stop signal's name and time.monotonic(), and how many stop signals came after it, while armed.
_request = {"name": None, "at": None, "repeats": 0}
# The first stop signal a StopSignals of this process received, and whether one has ended; kept after it exits.
_stopping = {"name": None, "ended": False}


def stop_requested() -> tuple[str, float] | None:
    """(signal name, time.monotonic() it arrived) of a stop signal received inside StopSignals, else None."""
    return None if _request["name"] is None else (_request["name"], _request["at"])


class StopSignals:
    """Context in which SIGINT/SIGTERM are recorded instead of raising: `received` names the first,
    `repeats` counts those after it; the previous handlers come back on exit.

    Only the main thread can set signal handlers. Entered on another thread (a lane of a seed batch,
    run/seed_batch.py, whose main thread holds the handlers), it reports what the process received."""

    def __init__(self):
        self._installed = False
        self._previous = {}

    @property
    def received(self) -> str | None:
        return _request["name"]

    @property
    def repeats(self) -> int:
        return _request["repeats"]

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is threading.main_thread():  # only there can handlers be set
            self._previous = {sig: signal.signal(sig, self._handle) for sig in SIGNALS}
            self._installed = True
        return self

    def __exit__(self, *_exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        if self._installed:
            _request.update(name=None, at=None, repeats=0)
            _stopping["ended"] = True

    @staticmethod
    def _handle(signum: int, _frame) -> None:
        if _request["name"] is not None:
            _request["repeats"] += 1
            return
        _request.update(name=signal.Signals(signum).name, at=time.monotonic())
        _stopping["name"] = _request["name"]


class SignalInterrupt(KeyboardInterrupt):
    """A stop signal that came before a run could stop by itself (main.py exits with its status)."""

    def __init__(self, signal_name: str):
        super().__init__(signal_name)
        self.signal_name = signal_name


class CommandSignals:
    """The command line's handlers around a whole run (main thread): a stop signal before the training
    loop listens (StopSignals) raises SignalInterrupt naming it (Python would say KeyboardInterrupt for
    SIGINT and die at once on SIGTERM); once the run is stopping, or its loop has ended, later ones are
    ignored, so that nothing cuts short the final checkpoint or the run's record. The previous handlers
    come back on exit (main.py's `__main__` then ignores the signals while the process shuts down)."""

    def __enter__(self) -> "CommandSignals":
        _stopping.update(name=None, ended=False)
        self._previous = {sig: signal.signal(sig, self._handle) for sig in SIGNALS}
        return self

    def __exit__(self, *_exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    @staticmethod
    def _handle(signum: int, _frame) -> None:
        if _stopping["name"] is None and not _stopping["ended"]:
            raise SignalInterrupt(signal.Signals(signum).name)


def ignore_stop_signals() -> None:
    """Ignore SIGINT and SIGTERM from here on: for a process whose run is over and that only exits (Python
    resets its own handlers to the default while it shuts down, and the default would kill it with
    another status; SIGKILL still stops it)."""
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


class StoppedWaiting(Exception):
    """Raised by code that gave up waiting (e.g. on a hung env worker) because a stop was requested."""

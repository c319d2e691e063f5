"""Imported only by multiprocessing's forkserver (the parallel runner's preload list), never by the main
process: the server ignores SIGINT and SIGTERM.

A stop signal sent to the whole process group (Ctrl+C in a terminal, systemd, Slurm's scancel,
`kill -- -PGID`) would otherwise end the server while the main process is still saving its final
checkpoint and closing the envs: the workers it forked die with it (their death signal watches it),
and the main process can no longer even learn their state (multiprocessing asks the server). The
server still exits when the main process is gone.
"""
import signal

for _signal in (signal.SIGINT, signal.SIGTERM):
    signal.signal(_signal, signal.SIG_IGN)

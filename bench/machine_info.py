"""The machine line every benchmark prints, so that figures taken on different machines are not compared
as if from one: the same cloud instance type may be a different CPU from one session to the next, and a
ratio between two code bases moved from 1.8 to 2.5 between two such 2-core "AMD EPYC" machines
(docs/speed.md)."""
import os
import platform

import psutil


def cpu_name(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The CPU's model name with its family and model numbers where `cpuinfo` (Linux's) gives them (a
    virtual machine may name only the vendor line, e.g. "AMD EPYC"); else what platform knows."""
    try:
        with open(cpuinfo) as file:
            fields = dict(line.split(":", 1) for line in file.read().split("\n\n")[0].splitlines() if ":" in line)
    except OSError:
        fields = {}
    fields = {key.strip(): value.strip() for key, value in fields.items()}
    name = fields.get("model name") or platform.processor() or platform.machine()
    if "cpu family" in fields and "model" in fields:
        name += f" (family {fields['cpu family']}, model {fields['model']})"
    return name


def describe_machine() -> str:
    """OS, CPU, cores, memory and Python of this machine, for a benchmark's `machine:` line."""
    return (f"{platform.platform()}, {cpu_name()}, {os.cpu_count()} CPUs, "
            f"{psutil.virtual_memory().total / 2**30:.0f} GiB, Python {platform.python_version()}")

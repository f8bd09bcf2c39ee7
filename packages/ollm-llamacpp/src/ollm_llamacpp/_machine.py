"""What the machine offers a model: its physical cores and the memory available now."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["available_memory", "physical_cores"]


def physical_cores() -> int:
    """The physical cores this process may run on (hyper-threads count once).

    llama.cpp runs fastest with one thread per physical core: a second thread on the
    same core competes for its vector units. Read from Linux's CPU topology for the
    CPUs of the process's affinity mask; elsewhere, half the logical CPUs (as
    llama-cpp-python assumes), at least one.
    """
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = []
    cores: set[tuple[str, str]] = set()
    for cpu in cpus:
        topology = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            package = (topology / "physical_package_id").read_text().strip()
            core = (topology / "core_id").read_text().strip()
        except OSError:
            cores = set()
            break
        cores.add((package, core))
    if cores:
        return len(cores)
    return max(1, (len(cpus) or os.cpu_count() or 2) // 2)


def available_memory() -> int | None:
    """Bytes of memory a new allocation can have now without swapping, if known.

    Linux's ``MemAvailable`` (free memory plus the caches it can drop), less what a
    container's memory limit (cgroup v2) leaves; elsewhere the free pages, when the
    system says; ``None`` when nothing says.
    """
    found = _meminfo_available()
    limit = _cgroup_room()
    if found is not None and limit is not None:
        return min(found, limit)
    if found is not None or limit is not None:
        return found if found is not None else limit
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_room() -> int | None:
    """What the container's memory limit leaves, when there is one."""
    cgroup = Path("/sys/fs/cgroup")
    try:
        limit = (cgroup / "memory.max").read_text().strip()
        if limit == "max":
            return None
        used = int((cgroup / "memory.current").read_text().strip())
        return max(0, int(limit) - used)
    except (OSError, ValueError):
        return None

"""The processes around a measurement: this process tree's memory, and the CPU time the other processes took.

`diagnose` reads the CPU figures to tell a busy neighbour (another program taking a core) from the loop's own
interference (loading in the step's thread, which takes its caches): both make the step slower inside the loop
than alone, but only a neighbour shows as CPU time outside this process tree. The helper processes multiprocessing
starts for this one (its forkserver, which forks every child of a `forkserver` context and reaps it, and its
resource tracker) count as this process's, whenever they started. Explained in
notebooks/15_is_my_loop_input_bound.ipynb.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from multiprocessing import forkserver, resource_tracker
from typing import Any

import psutil

from .clock import now

NAMED_CORES = 0.1  # a process is named as a neighbour when it used at least a tenth of a core ...
NAMED_MAX = 3  # ... and among the busiest three
_NOT_WORK = ("idle", "iowait", "steal", "guest", "guest_nice")  # guest time is counted in user time already


@dataclass(frozen=True)
class CpuReading:
    """CPU seconds at one moment: the whole machine's, this process tree's, and each other process's."""

    at: float  # clock.now()
    machine_s: float  # CPU seconds every core spent working since boot (not idle, not waiting for I/O)
    own_s: float  # this process and its children (DataLoader workers), the reaped ones included
    others: dict[int, tuple[str, float]] = field(default_factory=dict)  # pid: (name, CPU seconds)


@dataclass(frozen=True)
class Neighbours:
    """What the other processes ran between two readings: in cores (CPU seconds per wall second)."""

    cores: float  # every process outside the loop's, together (1.0: one core kept busy all along)
    busiest: tuple[tuple[str, int, float], ...] = ()  # (name, pid, cores), busiest first
    spare_cores: float = float("inf")  # the cores neither the loop nor the others used (0: the machine was full)

    def __str__(self) -> str:
        named = ", ".join(f"{name} (pid {pid}) took {cores:.0%} of a core" for name, pid, cores in self.busiest)
        return named or f"other processes took {self.cores:.2f} cores, none for long"


def reading(since: CpuReading | None = None) -> CpuReading:
    """Return the CPU seconds of the machine, of the loop's processes and of every other process, now.

    The loop's processes are this one, its multiprocessing helpers (`helpers`) and, with `since`, the children
    started after it (the loop's workers). Other children that already ran at `since` count as others: a program
    this one started, not the loop.
    """
    root = psutil.Process()
    kids = root.children(recursive=True)
    own = helpers(kids)
    mine = [root, *(k for k in kids if k.pid in own or (since is not None and k.pid not in since.others))]
    pids = {p.pid for p in mine}
    others = {
        p.pid: (p.info["name"] or "?", p.info["cpu_times"].user + p.info["cpu_times"].system)
        for p in psutil.process_iter(["name", "cpu_times"])
        if p.pid not in pids and p.info["cpu_times"] is not None
    }
    return CpuReading(now(), _machine_s(), _own_s(mine), others)  # the clock last: the scan is not in the window


def neighbours(before: CpuReading, after: CpuReading) -> Neighbours:
    """Return the cores the other processes used between `before` and `after`, and the busiest of them by name.

    Take `after` with `reading(since=before)`, so that the workers the loop started count as the loop's.
    The others' cores are the machine's less the loop's, which sees the processes no listing shows (one that
    ended within the window, another container's), but never less than the others seen: the machine's figure is
    sampled at each tick and leaves out the time the hypervisor stole, a process's is its measured run time.
    """
    wall = max(after.at - before.at, 1e-9)
    machine, loop = (after.machine_s - before.machine_s) / wall, (after.own_s - before.own_s) / wall
    used = [
        (name, pid, (seconds - before.others[pid][1]) / wall)
        for pid, (name, seconds) in after.others.items()
        if pid in before.others and before.others[pid][0] == name
    ]
    cores = max(0.0, machine - loop, sum(u[2] for u in used))
    busiest = sorted((u for u in used if u[2] >= NAMED_CORES), key=lambda u: -u[2])[:NAMED_MAX]
    return Neighbours(cores, tuple(busiest), (psutil.cpu_count() or 1) - max(machine, loop))


def helpers(kids: list[psutil.Process] | None = None) -> set[int]:
    """Return the pids of the multiprocessing helpers this process started and that still run (among `kids`).

    Its forkserver (started by the first `forkserver` child, as ProcessPrefetcher's in a process that has used
    CUDA) and its resource tracker live as long as this process: they are neither a worker the loop left
    running nor a neighbour. The forkserver reaps the children it forked, so their CPU time shows in its own
    children's times. `kids`: this process's children, if already listed.
    """
    if kids is None:
        kids = psutil.Process().children(recursive=True)
    started = {
        getattr(forkserver._forkserver, "_forkserver_pid", None),
        getattr(resource_tracker._resource_tracker, "_pid", None),
    }
    return {k.pid for k in kids if k.pid in started}


def _machine_s() -> float:
    times = psutil.cpu_times()._asdict()
    return sum(v for k, v in times.items() if k not in _NOT_WORK)


def _own_s(mine: list[psutil.Process]) -> float:
    """Return the CPU seconds of `mine`, with the children each has reaped (this one's ended workers).

    Only the loop's processes count their reaped children: another process's would bring in their whole lives.
    """
    total = 0.0
    for p in mine:
        try:
            t = p.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue  # a worker that ended between the listing and the reading: its parent counts it once reaped
    return total


def memory_by_process(with_helpers: bool = False) -> list[dict[str, Any]]:
    """Return the memory (MiB) of this process (role "main") and of each child process (role "worker").

    The one memory probe: per process its USS (pages only it holds), PSS (its own pages plus its share of every
    shared page, so PSS adds up across processes), and its resident pages split into anonymous (its own heap)
    and file-backed (mapped files such as a memmap: page cache, shared and dropped under memory pressure).
    Multiprocessing's helpers (`helpers`: no worker, they outlive the loop) are left out unless `with_helpers`.
    """
    root = psutil.Process()
    kids = root.children(recursive=True)
    left_out = set() if with_helpers else helpers(kids)
    rows = []
    for role, proc in [("main", root)] + [("worker", k) for k in kids if k.pid not in left_out]:
        try:
            info = proc.memory_full_info()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue  # a worker that ended meanwhile
        shared = getattr(info, "shared", 0)  # Linux: resident file-backed + shared memory pages
        rows.append(
            {
                "role": role,
                "pid": proc.pid,
                "uss_mb": info.uss / 2**20,
                "pss_mb": getattr(info, "pss", info.uss) / 2**20,  # USS where the system has no PSS
                "anonymous_mb": (info.rss - shared) / 2**20,
                "file_backed_mb": shared / 2**20,
            }
        )
    return rows


def pss_mb(with_helpers: bool = False) -> dict[str, float]:
    """Return the PSS (MiB) of this process, the sum over its child processes (DataLoader workers), and the total."""
    rows = memory_by_process(with_helpers)
    main = sum(r["pss_mb"] for r in rows if r["role"] == "main")
    workers = sum(r["pss_mb"] for r in rows if r["role"] == "worker")
    return {"main": main, "workers": workers, "total": main + workers}

"""The CPU of each process a command starts (Linux): run the command, read every
process of its tree from ``/proc`` every 20 ms, and print, per process, when it
was first and last seen (seconds since the command started), the CPU seconds
it had used when last seen (its own, not its children's), and its command
line; then their sum.  A process that lives less than 20 ms may be missed,
and the last reading of one may be up to 20 ms short.

    python benchmarks/process_tree.py COMMAND [ARGS ...]

What it answers: which processes a learning pass starts and what each costs
(docs/performance.md).  The polling costs CPU of its own: compare sums only
between runs measured with it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass

TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
POLL = 0.02


@dataclass
class Seen:
    ppid: int
    first: float
    last: float
    cpu: float
    command: str


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds) of ``pid``, None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    began = time.monotonic()
    proc = subprocess.Popen(sys.argv[1:])
    tree = {proc.pid}
    seen: dict[int, Seen] = {}
    while proc.poll() is None:
        stats = {pid: st for pid in map(int, filter(str.isdigit, os.listdir("/proc")))
                 if (st := _stat(pid)) is not None}
        grown = True
        while grown:
            grown = False
            for pid, (ppid, _) in stats.items():
                if ppid in tree and pid not in tree:
                    tree.add(pid)
                    grown = True
        now = time.monotonic() - began
        for pid in tree & stats.keys():
            ppid, cpu = stats[pid]
            if pid not in seen:
                seen[pid] = Seen(ppid, now, now, cpu, _command(pid))
            seen[pid].last, seen[pid].cpu = now, cpu
        time.sleep(POLL)
    for pid, s in sorted(seen.items(), key=lambda kv: kv[1].first):
        print(f"{pid:>8} {s.ppid:>8} {s.first:7.2f}-{s.last:7.2f} s  cpu {s.cpu:6.2f} s  "
              f"{s.command[:100]}", file=sys.stderr)
    print(f"sum of the processes' CPU: {sum(s.cpu for s in seen.values()):.2f} s",
          file=sys.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())

"""How fast this host is right now, in the two ways that move the test suite's time on the workplace's VMs
(BENCHMARKS.md, "The same suite, 506 s and 667 s in one morning"):

- fresh memory: 256 MB allocated and written, right after the last block was freed and after a pause (on a VM that
  hands freed memory back to its host, the pause makes every page a fault the host serves);
- one core's arithmetic: a fixed fp32 matrix product on one thread, with the steal time /proc/stat counted over it.

    python benchmarks/host_check.py            # 3 rounds
    python benchmarks/host_check.py --rounds 5 --pause 6

Run it before and after a timing to tell a slower hour from a slower change.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

MB = 1024 * 1024


def cpu_ticks() -> list[int]:
    """The first line of /proc/stat: user nice system idle iowait irq softirq steal ... (empty off Linux)."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            return [int(x) for x in fh.readline().split()[1:]]
    except OSError:
        return []


def touch_seconds(size_mb: int) -> float:
    import numpy as np

    start = time.perf_counter()
    block = np.ones(size_mb * MB // 8)
    seconds = time.perf_counter() - start
    del block
    return seconds


def matmul_seconds(n: int = 1024, repeats: int = 40) -> tuple[float, float | None]:
    """Seconds of ``repeats`` fp32 products of an n x n matrix on one thread, and the steal share over them."""
    import torch

    torch.set_num_threads(1)
    a = torch.randn(n, n)
    a @ a  # kernels chosen, memory in place
    before, start = cpu_ticks(), time.perf_counter()
    for _ in range(repeats):
        a @ a
    seconds = time.perf_counter() - start
    after = cpu_ticks()
    delta = [y - x for x, y in zip(before, after)]
    steal = delta[7] / sum(delta) if len(delta) > 7 and sum(delta) > 0 else None
    return seconds, steal


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pause", type=float, default=4.0, help="seconds between freeing a block and the next (default 4)")
    ap.add_argument("--size-mb", type=int, default=256)
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.pause < 0 or args.size_mb < 1:
        ap.error("--rounds and --size-mb must be at least 1, --pause at least 0")
    for r in range(1, args.rounds + 1):
        touch_seconds(args.size_mb)  # a block written and freed just before the one timed
        reused = touch_seconds(args.size_mb)  # the pages that block freed, taken again at once
        time.sleep(args.pause)
        paused = touch_seconds(args.size_mb)
        mm, steal = matmul_seconds()
        steal_text = "steal n/a" if steal is None else f"steal {steal * 100:.1f}%"
        print(f"round {r}: {args.size_mb} MB written {reused * 1000 / args.size_mb:.2f} ms/MB reused at once, "
              f"{paused * 1000 / args.size_mb:.2f} ms/MB after {args.pause:g} s; "
              f"fp32 1024x1024 product x40 on one thread {mm:.2f} s ({steal_text})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""bench_train.py's host probe: how fast the trainer's host is right now.

A step of the bench's GraphSAGE is bound by the trainer's thread issuing its
kernels (docs/benchmarks.md, session 16), and the same steps ran 15-20%
apart between runs at fixed GPU clocks (session 29). The probe, taken before
each variant, times two fixed pieces of host work on the trainer's thread:
a pure-Python loop (the interpreter's speed) and, on a CUDA device, a burst
of tiny kernel launches without a synchronisation in between (the launch
path: Python, torch's dispatcher and the driver). Each is the least of a
few repetitions, so a one-off preemption does not count. If a baseline's
runs move with the probe, the drift is the host's, not the loader's."""
from __future__ import annotations

import time

import torch

PY_LOOP = 20_000  # iterations of the pure-Python loop (about 1-2 ms)
LAUNCHES = 400  # tiny kernels a burst
REPS = 5


def _py_loop(n):
    acc, d = 0, dict.fromkeys(range(64), 0)
    for i in range(n):
        d[i & 63] = i
        acc += d[(i * 7) & 63]
    return acc


def probe(dev, reps=REPS):
    """{"py_ms": least ms of the Python loop, "launch_us": least µs a launch
    of a burst (CUDA only)}."""
    py = min(_timed(lambda: _py_loop(PY_LOOP)) for _ in range(reps))
    out = {"py_ms": py * 1e3}
    if dev.type == "cuda":
        t = torch.zeros(1, device=dev)
        torch.cuda.synchronize(dev)

        def burst():
            for _ in range(LAUNCHES):
                t.add_(1)
        best = float("inf")
        for _ in range(reps):
            best = min(best, _timed(burst))
            torch.cuda.synchronize(dev)  # the queue drained: no back-pressure in the next burst
        out["launch_us"] = best / LAUNCHES * 1e6
        del t
    return out


def _timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0

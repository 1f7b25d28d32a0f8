"""Probe (issue 15): does the bench's GraphSAGE step cost the trainer's
thread more on a batch shape it has not seen before? train_mixed's first run
of a trainer process reads higher than its later runs, and the bench repeats
the same batches in every run (one seed, epoch 0), while training only
cycles 32 preloaded batches: if a step pays once per new shape (cuBLAS's
heuristics for a new GEMM size, say), loaderd's first run pays it on each
of its 1179 shapes and no later run, nor training only, ever does. Not part
of loaderd.

Synthetic batches shaped like loaderd's papers100M [15,10,5] batches of
1024 seeds, their hop sizes drawn anew for each shape set. Four passes of
--steps steps, in this order: 32 shape sets cycled (repeat), a new shape set
every step (novel), the same new sets again (novel again), repeat again.
For each: host ms a step, the thread's CPU ms a step, GPU ms a step (events
around the pass). Run it also with CUBLASLT_HEURISTICS_CACHE_CAPACITY=0 in
the environment (cuBLAS's heuristics cache off) to see whether that cache
is what a new shape misses. With the bench's widths (--dim 128 --hidden
256) the GPU bounds the step and the thread's CPU time holds the driver's
spin while it waits; narrow widths (--dim 8 --hidden 16: the same kernels
and shapes' row counts, little GPU work) leave the host's cost alone.

  python3 scripts/probes/shape_warmth.py [--steps 300] [--dim 8 --hidden 16] [--device cuda:0]
"""
import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
from bench_train_model import SAGE  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from interference_train import edge_index  # noqa: E402

FANOUTS = [15, 10, 5]


def shapes(n, g):
    """n hop-size lists [seeds, hop1, hop2, hop3], each drawn anew."""
    out = []
    for _ in range(n):
        h1 = int(torch.randint(13000, 15361, (1,), generator=g))
        h2 = int(torch.randint(100000, 140001, (1,), generator=g))
        h3 = int(torch.randint(200000, 260001, (1,), generator=g))
        out.append([1024, h1, h2, h3])
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--dim", type=int, default=128, help="feature width")
    p.add_argument("--hidden", type=int, default=256, help="hidden width")
    p.add_argument("--device", default="cuda:0", help="cpu only checks that the probe runs")
    a = p.parse_args()
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    g = torch.Generator().manual_seed(0)
    gd = torch.Generator(device=dev).manual_seed(0)
    rep, novel = shapes(32, g), shapes(a.steps, g)
    big = sum(max(s[i] for s in rep + novel) for i in range(4))
    x = torch.randn(big, a.dim, device=dev)
    y = torch.randint(0, 172, (1024,), device=dev)
    batches = {}
    for s in rep + novel:
        batches[tuple(s)] = edge_index(s, FANOUTS, gd, dev)
    torch.manual_seed(0)
    model = SAGE(a.dim, a.hidden, 172, layers=3).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)

    def step(nodes):
        ei, edges = batches[tuple(nodes)]
        opt.zero_grad(set_to_none=True)
        out = model(x, ei, nodes, edges)
        F.cross_entropy(out, y).backward()
        opt.step()

    for i in range(30):  # warm-up on the repeated sets (the bench's warm-up is training only's)
        step(rep[i % len(rep)])
    sync()
    env = os.environ.get("CUBLASLT_HEURISTICS_CACHE_CAPACITY")
    print(f"shape_warmth on {dev} (torch {torch.__version__}, CUBLASLT_HEURISTICS_CACHE_CAPACITY={env!r}), "
          f"{a.steps} steps a pass, widths {a.dim}/{a.hidden}", flush=True)
    for name, seq in (("repeat", [rep[i % len(rep)] for i in range(a.steps)]), ("novel", novel),
                      ("novel again", novel), ("repeat again", [rep[i % len(rep)] for i in range(a.steps)])):
        if cuda:
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
        c0, w0 = time.thread_time(), time.perf_counter()
        for s in seq:
            step(s)
        w1, c1 = time.perf_counter(), time.thread_time()
        if cuda:
            e1.record()
        sync()
        n = len(seq)
        gpu = f"{e0.elapsed_time(e1) / n:.3f}" if cuda else "-"
        print(f"{name}: host {1e3 * (w1 - w0) / n:.3f} ms a step, thread CPU {1e3 * (c1 - c0) / n:.3f} ms, "
              f"GPU {gpu} ms", flush=True)


if __name__ == "__main__":
    main()

"""Probe (issue 15): bench_train.py's GraphSAGE step on a synthetic batch
shaped like a papers100M [15,10,5] batch of 1024 seeds, timed with CUDA
events, so scripts/probes/interference.sh can compare a step alone with a
step beside other GPU work in another process (copy-engine memcpy, the
zero-copy gather kernel). Not part of loaderd.

Prints one line: median and mean GPU ms a step over --steps steps, then the
largest kernels' ms a step over a profiled window."""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
from bench_train_model import SAGE  # noqa: E402


def edge_index(nodes, fanouts, g, dev):
    """edge_index of a batch with these hop sizes on dev (each hop's edges
    grouped by destination, as loaderd delivers them: destination i's fanout
    edges together), drawn with generator g on its own device, and the edges
    of each hop."""
    starts = [sum(nodes[:i]) for i in range(len(nodes) + 1)]
    src, dst = [], []
    for h, f in enumerate(fanouts):
        d = torch.arange(starts[h], starts[h + 1], device=g.device).repeat_interleave(f)
        s = torch.randint(starts[h + 1], starts[h + 2], (d.numel(),), generator=g, device=g.device)
        src.append(s)
        dst.append(d)
    return torch.stack([torch.cat(src), torch.cat(dst)]).to(dev), [len(s) for s in src]


def batch(dev, nodes, fanouts, dim, classes, g):
    """x, edge_index (edge_index above), the edges of each hop, labels."""
    ei, edges = edge_index(nodes, fanouts, g, dev)
    x = torch.randn(sum(nodes), dim, generator=g).to(dev)
    y = torch.randint(0, classes, (nodes[0],), generator=g).to(dev)
    return x, ei, edges, y


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--label", default="")
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--profile", type=int, default=50, help="steps profiled after the timed ones (0: none)")
    a = p.parse_args()
    dev = torch.device("cuda:0")
    g = torch.Generator().manual_seed(0)
    # about what loaderd's papers100M batches hold: 376 K distinct nodes
    nodes, fanouts = [1024, 15000, 120000, 240000], [15, 10, 5]
    x, ei, edges, y = batch(dev, nodes, fanouts, 128, 172, g)
    model = SAGE(128, 256, 172, layers=3).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)

    def step():
        opt.zero_grad(set_to_none=True)
        out = model(x, ei, nodes, edges)
        F.cross_entropy(out, y).backward()
        opt.step()

    for _ in range(30):
        step()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(a.steps)]
    for e0, e1 in ev:
        e0.record()
        step()
        e1.record()
    torch.cuda.synchronize()
    ms = sorted(e0.elapsed_time(e1) for e0, e1 in ev)
    line = f"{a.label}: step median {ms[len(ms) // 2]:.3f} ms, mean {sum(ms) / len(ms):.3f} ms ({a.steps} steps)"
    if a.profile:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(a.profile):
                step()
            torch.cuda.synchronize()
        rows = []
        for e in prof.key_averages():
            t = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
            if t and e.device_type == torch.autograd.DeviceType.CUDA:
                rows.append((t / 1e3 / a.profile, e.key))
        rows.sort(reverse=True)
        line += "; kernels ms a step: " + ", ".join(f"{k[:28]} {t:.3f}" for t, k in rows[:7])
        line += f"; all {sum(t for t, _ in rows):.3f}"
    print(line, flush=True)


if __name__ == "__main__":
    main()

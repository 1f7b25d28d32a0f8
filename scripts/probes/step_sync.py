"""Probe (issue 15): does bench_train.py's GraphSAGE step make the trainer's
thread wait for the GPU, and where? Every training variant of the bench
shows exactly one voluntary context switch of the trainer's thread a step,
and a step's GPU time about 1.6x the thread's CPU time: a step that waits
for the GPU once cannot run ahead of it, so the GPU idles while the thread
issues the next step's first kernels. Not part of loaderd.

On a synthetic batch shaped like a papers100M [15,10,5] batch of 1024 seeds
(interference_train.batch), for each variant of the step: host wall, the
thread's CPU time and voluntary switches a step, and GPU time a step
(events around the whole run, so host-bound time counts). Then the step
once under torch.cuda.set_sync_debug_mode("error"), printing where torch
itself synchronises (a wait in the driver, e.g. a full launch queue, does
not show there).

  python3 scripts/probes/step_sync.py [--steps 300]
"""
import argparse
import os
import resource
import sys
import time
import traceback

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
sys.path.insert(0, os.path.dirname(__file__))
from bench_train_model import SAGE  # noqa: E402
from interference_train import batch  # noqa: E402


def switches():
    ru = resource.getrusage(resource.RUSAGE_THREAD)
    return ru.ru_nvcsw, ru.ru_nivcsw


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--device", default="cuda:0", help="cpu only checks that the probe runs")
    a = p.parse_args()
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    g = torch.Generator().manual_seed(0)
    nodes, fanouts = [1024, 15000, 120000, 240000], [15, 10, 5]
    batches = [batch(dev, nodes, fanouts, 128, 172, g) for _ in range(2)]

    def make(opt_kw):
        torch.manual_seed(0)
        model = SAGE(128, 256, 172, layers=3).to(dev)
        opt = torch.optim.Adam(model.parameters(), lr=3e-3, **opt_kw) if opt_kw is not None else None
        return model, opt

    loss_sum = torch.zeros((), device=dev)

    def step(model, opt, b, part):
        x, ei, edges, y = b
        if opt is not None:
            opt.zero_grad(set_to_none=True)
        else:
            model.zero_grad(set_to_none=True)
        out = model(x, ei, nodes, edges)
        loss = F.cross_entropy(out, y)
        if part == "forward":
            loss_sum.add_(loss.detach())
            return
        loss.backward()
        if opt is not None:
            opt.step()
        loss_sum.add_(loss.detach())

    variants = [
        ("bench step (Adam default)", {}, "all"),
        ("Adam foreach=False", {"foreach": False}, "all"),
        ("Adam fused=True", {"fused": True}, "all"),
        ("Adam capturable=True", {"capturable": True}, "all"),
        ("no optimizer step", None, "all"),
        ("forward and loss only", None, "forward"),
    ]
    def measure(model, opt, part, name):
        ctx = torch.no_grad() if part == "forward" else torch.enable_grad()
        with ctx:
            for i in range(30):
                step(model, opt, batches[i % 2], part)
            sync()
            if cuda:
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
            s0, c0, w0 = switches(), time.thread_time(), time.perf_counter()
            for i in range(a.steps):
                step(model, opt, batches[i % 2], part)
            w1, c1, s1 = time.perf_counter(), time.thread_time(), switches()
            if cuda:
                e1.record()
            sync()
            n = a.steps
            gpu = e0.elapsed_time(e1) / n if cuda else float("nan")
            print(f"{name}: host {1e3 * (w1 - w0) / n:.3f} ms a step ({1e3 * (c1 - c0) / n:.3f} ms CPU), "
                  f"GPU {gpu:.3f} ms a step, switches a step {(s1[0] - s0[0]) / n:.2f} voluntary "
                  f"{(s1[1] - s0[1]) / n:.2f} involuntary", flush=True)

            if not cuda:
                return
            torch.cuda.set_sync_debug_mode("error")
            try:
                step(model, opt, batches[0], part)
                print(f"  {name}: no synchronising call under set_sync_debug_mode", flush=True)
            except RuntimeError as e:
                tb = [f for f in traceback.extract_tb(e.__traceback__)]
                where = " <- ".join(f"{os.path.basename(f.filename)}:{f.lineno} {f.line}" for f in reversed(tb[-4:]))
                print(f"  {name}: synchronises: {str(e).splitlines()[0]} at {where}", flush=True)
            finally:
                torch.cuda.set_sync_debug_mode(0)
                torch.cuda.synchronize()

    for name, kw, part in variants:
        try:
            model, opt = make(kw)
        except (RuntimeError, TypeError, ValueError) as e:
            print(f"{name}: not available ({e})", flush=True)
            continue
        try:
            measure(model, opt, part, name)
        except (AssertionError, RuntimeError) as e:
            print(f"{name}: failed ({str(e).splitlines()[0]})", flush=True)

if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The gradient exchange on GPUs, end to end (run on the GPU machine, with a
loaderd serving a dataset on --socket; NCCL_NVLS_ENABLE=0 stays set):

A. gnnloader.allreduce on cuda:RANK, one process per GPU: odd sizes, every
   dtype, sum and avg; results bit-identical across ranks (checked through an
   NCCL all_gather) and within the dtype's rounding of the float64 sum; the
   time of one call beside dist.all_reduce (informational: it includes the
   socket round trip and the copies in and out of loaderd's buffer).
B. DDP GraphSAGE on 2 GPUs with batches from loaderd (gnnloader.NeighborLoader
   on cuda) trained twice from the same seed: gradients averaged by NCCL
   (DDP's default), then by loaderd's ring (gnnloader.allreduce.ddp_comm_hook);
   prints both loss curves and their largest difference.

Usage: scripts/ring_ddp_check.py --socket /tmp/loaderd.sock [--epochs 5] [--batch-size 16]
"""
import argparse
import os
import sys
import time

for k, v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1"),
             ("CUBLAS_WORKSPACE_CONFIG", ":4096:8")):
    os.environ[k] = v

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "examples"))


def part_a(rank, world, args, dist, torch, ar):
    dev = torch.device("cuda", rank)
    client = ar.GradClient(args.socket, "check-a", rank, world, 80 << 20, device=f"cuda:{rank}", timeout=120)
    if rank == 0:
        print("A links:", client.links, flush=True)
    u = {torch.float32: 2.0 ** -24, torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}
    ok = True
    for n in (1, 7, 1001, 12297, (1 << 20) + 3, (16 << 20) + 5):
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            for op in ("sum", "avg"):
                if dtype != torch.float32 and n > (1 << 20) + 3:
                    continue
                g = torch.Generator().manual_seed(1000 * rank + n)
                x = (torch.rand(n, generator=g, dtype=torch.float64) * 2 - 1).to(dtype).to(dev)
                ins = [torch.empty_like(x) for _ in range(world)]
                dist.all_gather(ins, x)
                y = x.clone()
                ar.allreduce(y, op=op, client=client)
                outs = [torch.empty_like(y) for _ in range(world)]
                dist.all_gather(outs, y)
                same = all(torch.equal(o.view(torch.int16 if dtype != torch.float32 else torch.int32),
                                       outs[0].view(torch.int16 if dtype != torch.float32 else torch.int32)) for o in outs)
                ref = sum(t.double() for t in ins)
                if op == "avg":
                    ref = ref / world
                tol = (world + 1) * u[dtype] * sum(t.double().abs() for t in ins) + 2.0 ** -24
                err = (y.double() - ref).abs()
                within = bool((err <= tol).all())
                ok = ok and same and within
                if rank == 0 and (not same or not within or n in (1001, (16 << 20) + 5)):
                    print(f"A n={n} {dtype} {op}: identical on every rank {same}, within rounding {within}, "
                          f"max err {float(err.max()):.3g}", flush=True)
    # One call's time (64 MiB float32), gnnloader.allreduce vs dist.all_reduce.
    t = torch.ones(16 << 20, device=dev)
    for name, fn in (("gnnloader.allreduce", lambda: ar.allreduce(t, client=client)), ("dist.all_reduce", lambda: dist.all_reduce(t))):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
        dt = (time.perf_counter() - t0) / 20
        if rank == 0:
            print(f"A 64 MiB float32 sum: {name} {dt * 1e6:.0f} us per call (wall, incl. Python)", flush=True)
    client.close()
    okt = torch.tensor([1 if ok else 0], device=dev)
    dist.all_reduce(okt, op=dist.ReduceOp.MIN)
    if rank == 0:
        print(f"A result: {'PASS' if okt.item() else 'FAIL'}", flush=True)
    return bool(okt.item())


def train(rank, world, args, dist, torch, gnnloader, ar, hook):
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP
    from train_sage import SAGE

    dev = torch.device("cpu") if args.cpu else torch.device("cuda", rank)
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True, warn_only=True)
    loader = gnnloader.NeighborLoader(args.socket, num_neighbors=[10, 10], batch_size=args.batch_size,
                                      input_nodes="train", shuffle=True, seed=0, device=str(dev))
    info = loader.dataset
    model = DDP(SAGE(info.feature_dim, 64, info.num_classes, layers=2).to(dev), device_ids=None if args.cpu else [rank])
    client = None
    if hook:
        client = ar.GradClient(args.socket, f"check-b{args.port}", rank, world, 8 << 20, device=str(dev), timeout=120)
        model.register_comm_hook(client, ar.ddp_comm_hook)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(args.epochs):
        for batch in loader:
            opt.zero_grad()
            out = model(batch.x.float(), batch.edge_index)[:batch.batch_size]
            loss = F.cross_entropy(out, batch.y[:batch.batch_size])
            loss.backward()
            opt.step()
            losses.append(float(loss))
    loader.close()
    if client:
        client.close()
    return losses


def worker(rank, world, args):
    import torch
    import torch.distributed as dist

    import gnnloader
    import gnnloader.allreduce as ar

    if args.cpu:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank, world_size=world)
    else:
        torch.cuda.set_device(rank)
        dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank, world_size=world,
                                device_id=torch.device("cuda", rank))
    ok = True
    if not args.skip_a and not args.cpu:
        ok = part_a(rank, world, args, dist, torch, ar)
    curves = {}
    for hook in (False, True):
        curves[hook] = train(rank, world, args, dist, torch, gnnloader, ar, hook)
        dist.barrier()
    a, b = curves[False], curves[True]
    diff = max((abs(x - y) / max(abs(x), 1e-12) for x, y in zip(a, b)), default=0.0)
    d = torch.tensor([diff], device=torch.device("cpu") if args.cpu else torch.device("cuda", rank))
    dist.all_reduce(d, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(f"B {len(a)} steps per rank; rank 0 losses every 5th step:", flush=True)
        print("B   all-reduce by DDP's default: " + " ".join(f"{x:.4f}" for x in a[::5]), flush=True)
        print("B   all-reduce by loaderd:       " + " ".join(f"{x:.4f}" for x in b[::5]), flush=True)
        print(f"B largest relative difference over ranks and steps: {d.item():.3g} "
              f"({'PASS' if d.item() <= args.tol and len(a) == len(b) else 'FAIL'} at {args.tol})", flush=True)
        ok = ok and d.item() <= args.tol
    dist.destroy_process_group()
    if not ok:
        sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--tol", type=float, default=1e-3)
    ap.add_argument("--skip-a", action="store_true")
    ap.add_argument("--cpu", action="store_true", help="part B only, on CPU with gloo (a dry run of the script)")
    args = ap.parse_args()
    import torch
    import torch.multiprocessing as mp

    args.port = 29600 + os.getpid() % 300
    mp.spawn(worker, args=(2, args), nprocs=2, join=True)


if __name__ == "__main__":
    main()

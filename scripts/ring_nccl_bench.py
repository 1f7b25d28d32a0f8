#!/usr/bin/env python3
"""NCCL all-reduce through torch.distributed, measured like nccl-tests'
all_reduce_perf and like gnnloader's ring benchmark (ringbench.Run): one
process per GPU, float32 sum in place, sizes doubling from 1 KiB to 1 GiB;
per size a warm-up repetition then REPS repetitions of back-to-back
all_reduce calls timed with CUDA events on each rank's stream; a
repetition's time is the slowest rank's; the median is reported.
busbw = algbw * 2(n-1)/n.

NVLink multicast stays off (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
NVSHMEM_DISABLE_NVLS=1 are forced here too).

Usage: scripts/ring_nccl_bench.py [--max-bytes N] [--out FILE]
       scripts/ring_nccl_bench.py --join RING.txt NCCL.txt   (side by side)
"""
import argparse
import os
import statistics
import sys

for k, v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ[k] = v


def worker(rank, world, args, port):
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            device_id=torch.device("cuda", rank))
    buf = torch.ones(args.max_bytes // 4, dtype=torch.float32, device="cuda")
    stream = torch.cuda.current_stream()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    rows = []
    size = args.min_bytes
    while size <= args.max_bytes:
        count = size // 4
        t = buf[:count]
        iters = max(3, min(200, (512 << 20) // size))
        times = []
        for rep in range(-1, args.reps):
            dist.barrier()
            torch.cuda.synchronize()
            start.record(stream)
            for _ in range(iters):
                dist.all_reduce(t)
            end.record(stream)
            end.synchronize()
            ms = torch.tensor([start.elapsed_time(end) / iters], device="cuda")
            dist.all_reduce(ms, op=dist.ReduceOp.MAX)
            if rep >= 0:
                times.append(ms.item())
        med = statistics.median(times)
        alg = size / (med * 1e-3) / 1e9
        rows.append((size, count, med * 1e3, alg, alg * 2 * (world - 1) / world))
        size *= 2
    if rank == 0:
        out = open(args.out, "w") if args.out else sys.stdout
        print(f"# NCCL all-reduce via torch.distributed {torch.__version__}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))},"
              f" {world} ranks, float32 sum, in place; time = median of {args.reps} reps, slowest rank", file=out)
        print(f"{'size(B)':>12} {'count':>12} {'time(us)':>10} {'algbw':>9} {'busbw':>9}", file=out)
        for r in rows:
            print(f"{r[0]:12d} {r[1]:12d} {r[2]:10.2f} {r[3]:9.2f} {r[4]:9.2f}", file=out)
        if out is not sys.stdout:
            out.close()
    dist.destroy_process_group()


def read_table(path):
    rows = {}
    for line in open(path):
        f = line.split()
        if not f or line.startswith("#") or not f[0].isdigit():
            continue
        rows[int(f[0])] = (float(f[2]), float(f[4]))
    return rows


def human(n):
    for unit, s in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << s:
            return f"{n >> s} {unit}"
    return f"{n} B"


def join(ring_path, nccl_path):
    ring, nccl = read_table(ring_path), read_table(nccl_path)
    print("| size | ring time (us) | ring busbw (GB/s) | NCCL time (us) | NCCL busbw (GB/s) | ring / NCCL busbw |")
    print("|---:|---:|---:|---:|---:|---:|")
    for size in sorted(set(ring) | set(nccl)):
        r, n = ring.get(size), nccl.get(size)
        ratio = f"{r[1] / n[1]:.2f}" if r and n and n[1] > 0 else "-"
        fmt = lambda x, i: f"{x[i]:.2f}" if x else "-"
        print(f"| {human(size)} | {fmt(r, 0)} | {fmt(r, 1)} | {fmt(n, 0)} | {fmt(n, 1)} | {ratio} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--min-bytes", type=int, default=1 << 10)
    ap.add_argument("--max-bytes", type=int, default=1 << 30)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--world", type=int, default=0)
    ap.add_argument("--out", default="")
    ap.add_argument("--join", nargs=2, metavar=("RING", "NCCL"))
    args = ap.parse_args()
    if args.join:
        join(*args.join)
        return
    import torch
    import torch.multiprocessing as mp

    world = args.world or torch.cuda.device_count()
    port = 29500 + os.getpid() % 1000
    mp.spawn(worker, args=(world, args, port), nprocs=world, join=True)


if __name__ == "__main__":
    main()

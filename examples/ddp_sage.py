#!/usr/bin/env python3
"""Data-parallel GraphSAGE with torchrun: one loaderd per host, one trainer per GPU.

Every trainer process opens its own connection to the host's loaderd with
gnnloader.NeighborLoader; rank and world size come from torch.distributed, so
loaderd gives each rank a disjoint share of the split every epoch (the same
number of batches on every rank, as DistributedSampler does). Gradients are
averaged by DistributedDataParallel: gloo on CPU, nccl on GPU.

    loaderd import npz testdata/cora.npz --undirected --out /tmp/cora
    loaderd serve --dataset /tmp/cora &      # the default socket, which the trainers find too
    # CPU, 2 processes (Debian's torch has no torchrun script; this is the same;
    # --redirects 1 --tee 1 works around torch 1.13 on Python 3.11, whose
    # default --redirects 0 fails with "'NoneType' object has no attribute 'get'"):
    python3 -m torch.distributed.run --nproc_per_node 2 --redirects 1 --tee 1 \
        examples/ddp_sage.py
    # one host with 8 GPUs:
    torchrun --nproc_per_node 8 examples/ddp_sage.py --socket /run/loaderd/loaderd.sock --device cuda
    # several hosts: run one loaderd on each, and torchrun with --nnodes/--rdzv-endpoint as usual;
    # every trainer talks only to the loaderd of its own host.

See docs/deploy.md for the host layout (systemd, Kubernetes sidecar, MPS).
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

# An installed gnnloader (pip install ./python) comes first; else the repository's copy.
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import gnnloader  # noqa: E402
from train_sage import SAGE  # noqa: E402  (PyG's SAGEConv when installed, else the same layer)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--socket", default=None,
                   help="loaderd's socket (default: $GNNLOADER_SOCKET, else gnnloader's default socket)")
    p.add_argument("--device", default="cpu", help="cpu, or cuda (each rank takes cuda:LOCAL_RANK)")
    p.add_argument("--num-neighbors", default="10,10")
    p.add_argument("--batch-size", type=int, default=64, help="seeds per batch per rank")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--lr", type=float, default=0.005)
    p.add_argument("--seed", type=int, default=0, help="shuffle/sampling seed, the same on every rank")
    args = p.parse_args()

    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if args.device == "cuda":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        backend = "nccl"
    else:
        device = torch.device("cpu")
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", 1))))
        backend = "gloo"
    dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)  # the same initial weights on every rank (DDP also broadcasts them)

    fanouts = [int(f) for f in args.num_neighbors.split(",")]
    # rank/world_size come from torch.distributed; seed must match across ranks.
    train_loader = gnnloader.NeighborLoader(args.socket, num_neighbors=fanouts, batch_size=args.batch_size,
                                            input_nodes="train", shuffle=True, seed=args.seed, device=str(device))
    info = train_loader.dataset
    model = DDP(SAGE(info.feature_dim, args.hidden, info.num_classes, layers=len(fanouts)).to(device),
                device_ids=[local_rank] if device.type == "cuda" else None)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=5e-4)
    if rank == 0:
        print(f"{world} ranks, {info.name}: {info.num_nodes} nodes, {len(train_loader)} batches per rank per epoch",
              flush=True)

    for epoch in range(args.epochs):
        model.train()
        start = time.time()
        stats = torch.zeros(3, dtype=torch.float64)  # loss * seeds, seeds, batches
        for batch in train_loader:
            opt.zero_grad()
            out = model(batch.x.float(), batch.edge_index)[:batch.batch_size]
            loss = F.cross_entropy(out, batch.y[:batch.batch_size])
            loss.backward()  # DDP all-reduces the gradients here
            opt.step()
            stats += torch.tensor([float(loss) * batch.batch_size, batch.batch_size, 1], dtype=torch.float64)
        mine = stats.clone()
        dist.all_reduce(stats)
        print(f"[rank {rank}] epoch {epoch}: {int(mine[2])} batches, {int(mine[1])} seeds, "
              f"loss {mine[0] / mine[1]:.4f}", flush=True)
        dist.barrier()
        if rank == 0:
            print(f"epoch {epoch}: {int(stats[1])} seeds over {world} ranks, mean loss {stats[0] / stats[1]:.4f} "
                  f"({time.time() - start:.1f} s)", flush=True)

    # Exact evaluation, the test split sharded across ranks as well.
    model.eval()
    correct = torch.zeros(2, dtype=torch.float64)
    with torch.no_grad(), gnnloader.NeighborLoader(args.socket, num_neighbors=[-1] * len(fanouts), batch_size=512,
                                                   input_nodes="test", drop_last=False, device=str(device)) as ld:
        for batch in ld:
            pred = model.module(batch.x.float(), batch.edge_index)[:batch.batch_size].argmax(-1)
            correct += torch.tensor([int((pred == batch.y[:batch.batch_size]).sum()), batch.batch_size],
                                    dtype=torch.float64)
    dist.all_reduce(correct)
    if rank == 0:
        # Ranks pad the split to equal shares by repeating seeds (DistributedSampler's rule),
        # so a few test nodes may count twice.
        print(f"test accuracy {correct[0] / correct[1]:.4f} over {int(correct[1])} seeds", flush=True)
    train_loader.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

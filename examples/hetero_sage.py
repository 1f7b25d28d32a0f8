#!/usr/bin/env python3
"""Heterogeneous GraphSAGE through loaderd: paper venues on an ogbn-mag-like graph.

    loaderd gen --like mag --scale 0.02 --out /tmp/mag
    loaderd serve --dataset /tmp/mag &
    python3 examples/hetero_sage.py --reference

Batches come from ``gnnloader.NeighborLoader`` with PyG's heterogeneous
arguments (``input_nodes=("paper", "train")``, ``num_neighbors`` a list for
every edge type or a dict per edge type) and are PyG ``HeteroData`` (a
``gnnloader.hetero.HeteroBatch`` without PyG). The model is PyG's
``to_hetero`` of a two-layer SAGEConv model with ``aggr="sum"`` when PyG
imports, else ``HeteroSAGE`` below, the same function in plain torch: per
edge type, the mean of the source nodes' features through one linear map
plus the destination node's own through another (SAGEConv's root weight),
summed over the edge types that end at a node type.

``gen --like mag`` stores its relations one way (author -> paper, paper ->
paper, paper -> field_of_study, author -> institution), so authors receive
no messages: to_hetero would give them no layer-1 representation, which the
second layer's author -> paper messages need. For every node type that is a
source but never a destination the script adds, on the trainer side, a
relation (type, "self", type) with one edge from each node to itself: those
nodes then get lin_l(h) + lin_r(h) + b, a per-type linear layer. A graph
with reverse relations (``loaderd import ogb --undirected``) needs none.

Validation and test accuracy use ``num_neighbors=[-1, -1]``: every
neighbour, so exact inference. ``--reference`` trains the same model a
second time with exact aggregation (fanouts -1) from the same seed.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import gnnloader  # noqa: E402

try:  # PyG's SAGEConv and to_hetero when PyG is installed
    from torch_geometric.nn import SAGEConv, to_hetero
except Exception:  # pragma: no cover - depends on the machine
    SAGEConv = to_hetero = None

SELF = "self"


def self_loop_types(node_types, edge_types):
    """(t, "self", t) for every node type that some edge type leaves from and
    none arrives at (see the module doc)."""
    dsts = {e[2] for e in edge_types}
    srcs = [t for t in node_types if t not in dsts and any(e[0] == t for e in edge_types)]
    return [(t, SELF, t) for t in srcs]


def with_self_loops(x_dict, edge_index_dict, loops):
    """edge_index_dict plus an identity edge per node for each self relation."""
    out = dict(edge_index_dict)
    for t, rel, _ in loops:
        ids = torch.arange(x_dict[t].size(0), device=x_dict[t].device)
        out[(t, rel, t)] = torch.stack([ids, ids])
    return out


class MeanSAGE(torch.nn.Module):
    """SAGEConv on one edge type (PyG's, mean aggregation and root weight):
    lin_l(mean of the sources) + b + lin_r(the destination). The sources are
    projected before they are averaged (the same function, less work)."""

    def __init__(self, in_src, in_dst, out):
        super().__init__()
        self.lin_l = torch.nn.Linear(in_src, out, bias=False)
        self.bias = torch.nn.Parameter(torch.zeros(out))
        self.lin_r = torch.nn.Linear(in_dst, out, bias=False)

    def forward(self, x_src, x_dst, edge_index):
        src, dst = edge_index[0], edge_index[1]
        h = self.lin_l(x_src)
        agg = torch.zeros(x_dst.size(0), h.size(1), dtype=h.dtype, device=h.device).index_add_(0, dst, h[src])
        deg = torch.zeros(x_dst.size(0), dtype=h.dtype, device=h.device).index_add_(
            0, dst, torch.ones_like(dst, dtype=h.dtype))
        return agg / deg.clamp(min=1).unsqueeze(1) + self.bias + self.lin_r(x_dst)


class HeteroSAGE(torch.nn.Module):
    """to_hetero(SAGE, aggr="sum") in plain torch: a MeanSAGE per edge type
    and layer, summed per destination type, ReLU between layers."""

    def __init__(self, metadata, in_dims, hidden, out, layers=2):
        super().__init__()
        node_types, edge_types = metadata
        self.edge_types = [tuple(e) for e in edge_types]
        dims = [dict(in_dims)] + [{t: hidden for t in node_types}] * (layers - 1)
        widths = [hidden] * (layers - 1) + [out]
        self.layers = torch.nn.ModuleList(
            torch.nn.ModuleDict({"__".join(e): MeanSAGE(d[e[0]], d[e[2]], w) for e in self.edge_types})
            for d, w in zip(dims, widths))

    def forward(self, x_dict, edge_index_dict):
        for i, convs in enumerate(self.layers):
            out = {}
            for e in self.edge_types:
                if e in edge_index_dict:
                    h = convs["__".join(e)](x_dict[e[0]], x_dict[e[2]], edge_index_dict[e])
                    out[e[2]] = out[e[2]] + h if e[2] in out else h
            x_dict = {t: h.relu() for t, h in out.items()} if i < len(self.layers) - 1 else out
        return x_dict


class SAGE(torch.nn.Module):
    """The homogeneous model to_hetero converts."""

    def __init__(self, hidden, out):
        super().__init__()
        self.conv1 = SAGEConv((-1, -1), hidden)
        self.conv2 = SAGEConv((-1, -1), out)

    def forward(self, x, edge_index):
        return self.conv2(self.conv1(x, edge_index).relu(), edge_index)


def build_model(node_types, edge_types, in_dims, hidden, out, pyg=None):
    """The hetero SAGE for these types (self relations included): PyG's
    to_hetero when PyG imports (pyg None or True), else HeteroSAGE. PyG's
    model is lazy: run it once (init_lazy) before making the optimizer."""
    metadata = (list(node_types), [tuple(e) for e in edge_types] + self_loop_types(node_types, edge_types))
    if pyg is None:
        pyg = to_hetero is not None
    if pyg:
        return to_hetero(SAGE(hidden, out), metadata, aggr="sum")
    return HeteroSAGE(metadata, in_dims, hidden, out)


def inputs(batch, node_types, edge_types, target="paper"):
    """(x_dict as float32, edge_index_dict with self relations, seed index,
    seed labels) of a gnnloader hetero batch."""
    loops = self_loop_types(node_types, edge_types)
    x = {t: v.float() for t, v in batch.x_dict.items()}
    n = batch[target].batch_size
    return x, with_self_loops(x, batch.edge_index_dict, loops), torch.arange(n), batch[target].y[:n]


def fit(model, epochs, batches, lr=0.005, weight_decay=0.0, target="paper", log=None):
    """Trains on `batches(epoch)`, an iterable of (x_dict, edge_index_dict,
    seed index, labels) per epoch; returns the seconds it took."""
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    start = time.time()
    for epoch in range(epochs):
        model.train()
        total = count = 0
        for x, ei, idx, y in batches(epoch):
            opt.zero_grad()
            loss = F.cross_entropy(model(x, ei)[target][idx], y)
            loss.backward()
            opt.step()
            total, count = total + float(loss) * y.numel(), count + y.numel()
        if log:
            log(f"epoch {epoch:3d} loss {total / max(count, 1):.4f}")
    return time.time() - start


@torch.no_grad()
def accuracy(model, batches, target="paper"):
    """The share of seeds predicted right over (x_dict, edge_index_dict,
    seed index, labels) batches."""
    model.eval()
    right = total = 0
    for x, ei, idx, y in batches:
        right += int((model(x, ei)[target][idx].argmax(-1) == y).sum())
        total += y.numel()
    return right / max(total, 1)


def run(args, fanouts, label):
    """Trains through loaderd with these fanouts; returns the accuracies."""
    remote = gnnloader.connect(args.socket)
    types = remote.types
    nt, et = remote.node_types, remote.edge_types

    def loader(split, num_neighbors, shuffle, batch_size):
        return gnnloader.NeighborLoader(remote, num_neighbors, input_nodes=("paper", split), batch_size=batch_size,
                                        shuffle=shuffle, seed=args.seed)

    def batches(ld):
        return (inputs(b, nt, et) for b in ld)

    torch.manual_seed(args.seed)
    model = build_model(nt, et, {t: types[t].feature_dim for t in nt}, args.hidden, types["paper"].num_classes)
    with loader("train", fanouts, True, args.batch_size) as ld:
        with torch.no_grad():  # PyG's lazy layers take their sizes from a first batch
            model(*inputs(next(iter(ld)), nt, et)[:2])
        quiet = None if args.quiet else (lambda s: print(f"[{label}] {s}", flush=True))
        seconds = fit(model, args.epochs, lambda e: (ld.set_epoch(e), batches(ld))[1], args.lr, args.weight_decay,
                      log=quiet)
    result = {"fanouts": fanouts, "train_seconds": seconds}
    for split in ("valid", "test"):
        with loader(split, [-1, -1], False, 1024) as ld:
            result[f"{split}_acc"] = accuracy(model, batches(ld))
    print(f"[{label}] fanouts {fanouts}: valid acc {result['valid_acc']:.4f} test acc {result['test_acc']:.4f} "
          f"({seconds:.1f} s training)", flush=True)
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--socket", default=None, help="loaderd's socket (default: gnnloader's default socket)")
    p.add_argument("--fanouts", default="10,5", help="comma-separated fanouts per hop, every edge type; -1 = all")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.005)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--reference", action="store_true", help="also train with exact aggregation (fanouts -1)")
    p.add_argument("--quiet", action="store_true", help="no per-epoch lines")
    p.add_argument("--json", action="store_true", help="print a JSON summary as the last line")
    args = p.parse_args()
    fanouts = [int(f) for f in args.fanouts.split(",")]
    summary = {"model": "to_hetero(SAGEConv)" if to_hetero is not None else "HeteroSAGE (plain torch)",
               "sampled": run(args, fanouts, "sampled")}
    if args.reference:
        summary["reference"] = run(args, [-1] * len(fanouts), "reference")
        s, r = summary["sampled"]["test_acc"], summary["reference"]["test_acc"]
        print(f"test accuracy: sampled {s:.4f}, exact aggregation {r:.4f} (difference {s - r:+.4f})")
    if args.json:
        print(json.dumps(summary))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Link prediction with GraphSAGE and LinkNeighborLoader, served by loaderd.

The training and evaluation code below is what a PyG script would be, with
one import changed:

    from torch_geometric.loader import LinkNeighborLoader   # PyG
    from gnnloader import LinkNeighborLoader                # here

What differs is where ``data`` and the edges come from (``loaderd_dataset``
below): loaderd holds the graph, its features and its link splits, so the
positive edges are named by split ("train", "valid") where a PyG script
passes tensors (``train_data.edge_label_index``). Where torch_geometric is
missing, a plain-torch SAGEConv stands in for PyG's.

The encoder is a 2-layer GraphSAGE; a pair's score is the dot product of its
ends' embeddings. Training uses binary negative sampling (one random pair
per positive, ``edge_label`` 1/0, binary cross-entropy). Validation reports
the AUC of the valid split's pairs against as many random pairs, and the MRR
of each valid pair ranked against NUM_NEG random destinations ("triplet"
negatives, ``dst_neg_index``), as OGB's ogbl-citation2 ranks against 1000.
A small ogbl-citation2 stand-in, a few minutes on a CPU:

    loaderd gen --like citation2 --scale 0.01 --out /tmp/citation2-like
    loaderd serve --dataset /tmp/citation2-like &
    python3 examples/link_pred.py

(GNNLOADER_SOCKET names another socket; EPOCHS (default 1), MAX_BATCHES
(default 300 training batches an epoch; 0: all), NUM_NEG (default 100) and
MAX_EVAL_BATCHES (default: all) size a run, e.g. for the test in
python/tests/test_link_pred.py.)
"""
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from gnnloader import LinkNeighborLoader  # noqa: E402  (PyG: from torch_geometric.loader import LinkNeighborLoader)

try:
    from torch_geometric.nn import SAGEConv
except ImportError:
    class SAGEConv(torch.nn.Module):
        """PyG's SAGEConv (mean aggregation, root weight), in plain torch."""

        def __init__(self, in_channels, out_channels):
            super().__init__()
            self.lin_l = torch.nn.Linear(in_channels, out_channels)
            self.lin_r = torch.nn.Linear(in_channels, out_channels, bias=False)

        def forward(self, x, edge_index):
            src, dst = edge_index
            agg = torch.zeros(x.size(0), x.size(1), dtype=x.dtype, device=x.device).index_add_(0, dst, x[src])
            deg = torch.zeros(x.size(0), dtype=x.dtype, device=x.device).index_add_(
                0, dst, torch.ones_like(dst, dtype=x.dtype))
            return self.lin_l(agg / deg.clamp(min=1).unsqueeze(-1)) + self.lin_r(x)


def loaderd_dataset():
    """What a PyG script gets from its dataset: here the facts loaderd
    announces, and the link splits by name."""
    import gnnloader
    data = gnnloader.connect()  # num_nodes, num_features, ...; the default socket or $GNNLOADER_SOCKET
    return data, "train", "valid"


EPOCHS = int(os.environ.get("EPOCHS", "1"))
MAX_BATCHES = int(os.environ.get("MAX_BATCHES", "300"))
MAX_EVAL_BATCHES = int(os.environ.get("MAX_EVAL_BATCHES", "0"))
NUM_NEG = int(os.environ.get("NUM_NEG", "100"))
torch.manual_seed(12345)
device = torch.device("cpu")

data, train_edge_label_index, val_edge_label_index = loaderd_dataset()

train_loader = LinkNeighborLoader(data, num_neighbors=[10, 5], edge_label_index=train_edge_label_index,
                                  neg_sampling=dict(mode="binary", amount=1), batch_size=512, shuffle=True)
auc_loader = LinkNeighborLoader(data, num_neighbors=[10, 5], edge_label_index=val_edge_label_index,
                                neg_sampling=dict(mode="binary", amount=1), batch_size=512, shuffle=False)
mrr_loader = LinkNeighborLoader(data, num_neighbors=[10, 5], edge_label_index=val_edge_label_index,
                                neg_sampling=dict(mode="triplet", amount=NUM_NEG), batch_size=32, shuffle=False)


class SAGE(torch.nn.Module):
    def __init__(self, in_channels, hidden_channels):
        super().__init__()
        self.conv1 = SAGEConv(in_channels, hidden_channels)
        self.conv2 = SAGEConv(hidden_channels, hidden_channels)

    def forward(self, x, edge_index):
        x = F.relu(self.conv1(x, edge_index))
        x = F.dropout(x, p=0.2, training=self.training)
        return self.conv2(x, edge_index)


model = SAGE(data.num_features, 128).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=0.003)


def train():
    model.train()
    total_loss = total_examples = 0
    for i, batch in enumerate(train_loader):
        if MAX_BATCHES and i >= MAX_BATCHES:
            break
        batch = batch.to(device) if hasattr(batch, "to") else batch
        optimizer.zero_grad()
        h = model(batch.x.float(), batch.edge_index)
        src, dst = batch.edge_label_index
        pred = (h[src] * h[dst]).sum(dim=-1)
        loss = F.binary_cross_entropy_with_logits(pred, batch.edge_label.float())
        loss.backward()
        optimizer.step()
        total_loss += float(loss) * pred.numel()
        total_examples += pred.numel()
    return total_loss / max(total_examples, 1)


def auc(pos, neg):
    """The probability that a random positive outscores a random negative (ties count half)."""
    scores = torch.cat([pos, neg])
    rank = scores.argsort().argsort().double() + 1
    # average ranks of ties
    uniq, inv = scores.unique(return_inverse=True)
    mean_rank = torch.zeros(uniq.numel(), dtype=torch.double).index_add_(0, inv, rank)
    mean_rank /= torch.zeros(uniq.numel(), dtype=torch.double).index_add_(0, inv, torch.ones_like(rank))
    r = mean_rank[inv][:pos.numel()].sum()
    n_pos, n_neg = pos.numel(), neg.numel()
    return float((r - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


@torch.no_grad()
def test():
    model.eval()
    pos, neg, rr = [], [], []
    for i, batch in enumerate(auc_loader):
        if MAX_EVAL_BATCHES and i >= MAX_EVAL_BATCHES:
            break
        h = model(batch.x.float(), batch.edge_index)
        src, dst = batch.edge_label_index
        pred = (h[src] * h[dst]).sum(dim=-1)
        label = batch.edge_label.bool()
        pos.append(pred[label])
        neg.append(pred[~label])
    for i, batch in enumerate(mrr_loader):
        if MAX_EVAL_BATCHES and i >= MAX_EVAL_BATCHES:
            break
        h = model(batch.x.float(), batch.edge_index)
        s = h[batch.src_index]
        p = (s * h[batch.dst_pos_index]).sum(dim=-1)
        n = (s.unsqueeze(1) * h[batch.dst_neg_index.view(p.numel(), -1)]).sum(dim=-1)
        # OGB's MRR: ties count against the positive (optimistic + pessimistic rank) / 2
        rank = 1 + ((n > p.unsqueeze(1)).sum(dim=1) + (n >= p.unsqueeze(1)).sum(dim=1)).double() / 2
        rr.append(1.0 / rank)
    return auc(torch.cat(pos), torch.cat(neg)), float(torch.cat(rr).mean())


for epoch in range(1, EPOCHS + 1):
    start = time.time()
    loss = train()
    val_auc, val_mrr = test()
    print(f"Epoch: {epoch:02d}, Loss: {loss:.4f}, Val AUC: {val_auc:.4f}, Val MRR: {val_mrr:.4f} "
          f"({NUM_NEG} random negatives), {time.time() - start:.1f} s")

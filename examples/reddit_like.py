#!/usr/bin/env python3
"""PyG's examples/reddit.py (GraphSAGE on Reddit with NeighborLoader), run
through loaderd: the training and inference code below is reddit.py's, with
one import changed:

    from torch_geometric.loader import NeighborLoader   # reddit.py
    from gnnloader import NeighborLoader                # here

What differs is only where ``dataset``/``data`` come from: reddit.py reads
torch_geometric.datasets.Reddit; this script, which must also run where PyG
is not installed, builds the same attributes (x, y, the masks, num_features,
num_classes) from the dataset loaderd serves (``loaderd_dataset`` below),
and falls back to a plain-torch SAGEConv and a silent progress bar when
torch_geometric and tqdm are missing. A Reddit-sized stand-in:

    loaderd gen --like products --scale 0.1 --undirected true --out /tmp/reddit-like
    loaderd serve --dataset /tmp/reddit-like &
    python3 examples/reddit_like.py

(GNNLOADER_SOCKET names another socket; EPOCHS (default 10, as reddit.py) and
MAX_BATCHES (default: all) shorten a run, e.g. for the test in
python/tests/test_reddit_like.py.)
"""
import copy
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from gnnloader import NeighborLoader  # noqa: E402  (reddit.py: from torch_geometric.loader import NeighborLoader)

try:
    from tqdm import tqdm
except ImportError:  # a progress bar that shows nothing
    class tqdm:  # noqa: N801
        def __init__(self, total=0):
            self.total = total

        def set_description(self, _):
            pass

        def update(self, _):
            pass

        def close(self):
            pass

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
            src, dst = edge_index[0], edge_index[1]
            agg = torch.zeros(x.size(0), x.size(1), dtype=x.dtype, device=x.device).index_add_(0, dst, x[src])
            deg = torch.zeros(x.size(0), dtype=x.dtype, device=x.device).index_add_(
                0, dst, torch.ones_like(dst, dtype=x.dtype))
            return self.lin_l(agg / deg.clamp(min=1).unsqueeze(1)) + self.lin_r(x)

EPOCHS = int(os.environ.get("EPOCHS", "10"))
MAX_BATCHES = int(os.environ.get("MAX_BATCHES", "0")) or None


class Data:
    """The attributes of PyG's Data that reddit.py reads."""

    def __init__(self, **kw):
        self.__dict__.update(kw)

    def to(self, device, *attrs):
        for a in attrs or list(self.__dict__):
            if isinstance(getattr(self, a), torch.Tensor):
                setattr(self, a, getattr(self, a).to(device))
        return self


def loaderd_dataset(socket=None):
    """(dataset, data) as Reddit(path) and Reddit(path)[0] give them, read
    from loaderd: x and y of every node in batches of fanout 0 (seeds only),
    the masks from the splits' seeds."""
    socket = socket or os.environ.get("GNNLOADER_SOCKET")
    with NeighborLoader(socket, num_neighbors=[0], batch_size=8192) as every:
        facts = every.dataset
        n = facts.num_nodes
        x, y = None, torch.empty(n, dtype=torch.int64)
        for b in every:
            seeds = b.n_id[:b.batch_size]
            if x is None:
                x = torch.empty(n, b.x.size(1), dtype=b.x.dtype)
            x[seeds] = b.x[:b.batch_size]
            y[seeds] = b.y[:b.batch_size]
    masks = {}
    for name in ("train", "val", "test"):
        mask = torch.zeros(n, dtype=torch.bool)
        with NeighborLoader(socket, num_neighbors=[0], input_nodes=name, batch_size=8192) as split:
            for b in split:
                mask[b.n_id[:b.batch_size]] = True
        masks[name + "_mask"] = mask
    dataset = Data(num_features=facts.feature_dim, num_classes=facts.num_classes)
    return dataset, Data(x=x, y=y, num_nodes=n, **masks)


device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')

dataset, data = loaderd_dataset()  # reddit.py: dataset = Reddit(path)

# Already send node features/labels to GPU for faster access during sampling:
data = data.to(device, 'x', 'y')

kwargs = {'batch_size': 1024, 'num_workers': 6, 'persistent_workers': True}
train_loader = NeighborLoader(data, input_nodes=data.train_mask,
                              num_neighbors=[25, 10], shuffle=True, **kwargs)

subgraph_loader = NeighborLoader(copy.copy(data), input_nodes=None,
                                 num_neighbors=[-1], shuffle=False, **kwargs)

# No need to maintain these features during evaluation:
del subgraph_loader.data.x, subgraph_loader.data.y
# Add global node index information.
subgraph_loader.data.num_nodes = data.num_nodes
subgraph_loader.data.n_id = torch.arange(data.num_nodes)


class SAGE(torch.nn.Module):
    def __init__(self, in_channels, hidden_channels, out_channels):
        super().__init__()
        self.convs = torch.nn.ModuleList()
        self.convs.append(SAGEConv(in_channels, hidden_channels))
        self.convs.append(SAGEConv(hidden_channels, out_channels))

    def forward(self, x, edge_index):
        for i, conv in enumerate(self.convs):
            x = conv(x, edge_index)
            if i < len(self.convs) - 1:
                x = x.relu_()
                x = F.dropout(x, p=0.5, training=self.training)
        return x

    @torch.no_grad()
    def inference(self, x_all, subgraph_loader):
        pbar = tqdm(total=len(subgraph_loader.dataset) * len(self.convs))
        pbar.set_description('Evaluating')

        # Compute representations of nodes layer by layer, using *all*
        # available edges. This leads to faster computation in contrast to
        # immediately computing the final representations of each batch:
        for i, conv in enumerate(self.convs):
            xs = []
            for batch in subgraph_loader:
                x = x_all[batch.n_id.to(x_all.device)].to(device)
                x = conv(x, batch.edge_index.to(device))
                if i < len(self.convs) - 1:
                    x = x.relu_()
                xs.append(x[:batch.batch_size].cpu())
                pbar.update(batch.batch_size)
            x_all = torch.cat(xs, dim=0)
        pbar.close()
        return x_all


model = SAGE(dataset.num_features, 256, dataset.num_classes).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)


def train(epoch):
    model.train()

    pbar = tqdm(total=int(len(train_loader.dataset)))
    pbar.set_description(f'Epoch {epoch:02d}')

    total_loss = total_correct = total_examples = 0
    for i, batch in enumerate(train_loader):
        if MAX_BATCHES is not None and i == MAX_BATCHES:  # not in reddit.py: a short run
            break
        optimizer.zero_grad()
        y = batch.y[:batch.batch_size]
        y_hat = model(batch.x, batch.edge_index.to(device))[:batch.batch_size]
        loss = F.cross_entropy(y_hat, y)
        loss.backward()
        optimizer.step()

        total_loss += float(loss) * batch.batch_size
        total_correct += int((y_hat.argmax(dim=-1) == y).sum())
        total_examples += batch.batch_size
        pbar.update(batch.batch_size)
    pbar.close()

    return total_loss / total_examples, total_correct / total_examples


@torch.no_grad()
def test():
    model.eval()
    y_hat = model.inference(data.x, subgraph_loader).argmax(dim=-1)
    y = data.y.to(y_hat.device)

    accs = []
    for mask in [data.train_mask, data.val_mask, data.test_mask]:
        accs.append(int((y_hat[mask] == y[mask]).sum()) / int(mask.sum()))
    return accs


times = []
for epoch in range(1, EPOCHS + 1):
    start = time.time()
    loss, acc = train(epoch)
    print(f'Epoch {epoch:02d}, Loss: {loss:.4f}, Approx. Train: {acc:.4f}')
    train_acc, val_acc, test_acc = test()
    print(f'Epoch: {epoch:02d}, Train: {train_acc:.4f}, Val: {val_acc:.4f}, '
          f'Test: {test_acc:.4f}')
    times.append(time.time() - start)
print(f"Median time per epoch: {torch.tensor(times).median():.4f}s")

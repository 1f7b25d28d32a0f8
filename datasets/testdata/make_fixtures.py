#!/usr/bin/env python3
"""Writes the OGB-layout fixtures used by datasets/ogb_test.go.

One small random graph (50 nodes, 200 directed edges with a few duplicates
and self loops, 8 features, 5 classes) in both raw layouts OGB ships:

  ogb_csv/  like ogbn-arxiv / ogbn-products: raw/*.csv.gz + split/sales_ranking/
  ogb_npz/  like ogbn-papers100M: raw/data.npz (np.savez, stored) and
            raw/node-label.npz (node_label float64 [N,1], NaN = unlabelled)
            + split/time/

and expected.json with the arrays, for the tests to compare against.
Features are multiples of 1/64, so their csv text is exact.
Run from this directory: python3 make_fixtures.py  (numpy required).
"""
import gzip
import json
import os

import numpy as np

N, E, F, C = 50, 200, 8, 5
rng = np.random.default_rng(20261122)

src = rng.integers(0, N, E, dtype=np.int64)
dst = rng.integers(0, N, E, dtype=np.int64)
src[:3], dst[:3] = [7, 7, 9], [7, 7, 9]          # self loops
src[3:6], dst[3:6] = [1, 1, 1], [2, 2, 2]        # duplicates
feat = (rng.integers(-128, 128, (N, F)) / 64.0).astype(np.float32)
label = rng.integers(0, C, N, dtype=np.int64)
label[:C] = np.arange(C)                          # every class present
unlabelled = [10, 20, 30]                         # NaN in the npz layout
perm = rng.permutation(N)
split = {"train": np.sort(perm[:30]), "valid": np.sort(perm[30:40]), "test": np.sort(perm[40:])}


def gz(path, lines):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    data = "".join(l + "\n" for l in lines).encode()
    with open(path, "wb") as f:  # mtime 0: reproducible bytes
        with gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0) as g:
            g.write(data)


def splits(root):
    for name, ids in split.items():
        gz(f"{root}/{name}.csv.gz", [str(i) for i in ids])


# csv layout (pandas-style: no header, no index)
gz("ogb_csv/raw/edge.csv.gz", [f"{s},{d}" for s, d in zip(src, dst)])
gz("ogb_csv/raw/node-feat.csv.gz", [",".join(repr(float(x)) for x in row) for row in feat])
gz("ogb_csv/raw/node-label.csv.gz", [str(y) for y in label])
gz("ogb_csv/raw/num-node-list.csv.gz", [str(N)])
gz("ogb_csv/raw/num-edge-list.csv.gz", [str(E)])
splits("ogb_csv/split/sales_ranking")

# npz layout
os.makedirs("ogb_npz/raw", exist_ok=True)
np.savez("ogb_npz/raw/data.npz",
         edge_index=np.stack([src, dst]),
         node_feat=feat,
         node_year=rng.integers(1990, 2020, (N, 1)),
         num_nodes_list=np.array([N], dtype=np.int64),
         num_edges_list=np.array([E], dtype=np.int64))
node_label = label.astype(np.float64).reshape(N, 1)
node_label[unlabelled] = np.nan
np.savez("ogb_npz/raw/node-label.npz", node_label=node_label)
splits("ogb_npz/split/time")

with open("expected.json", "w") as f:
    json.dump({
        "num_nodes": N, "num_classes": C, "feature_dim": F,
        "src": src.tolist(), "dst": dst.tolist(),
        "features": feat.ravel().tolist(),
        "labels": label.tolist(), "unlabelled_in_npz": unlabelled,
        "splits": {k: v.tolist() for k, v in split.items()},
    }, f)
    f.write("\n")

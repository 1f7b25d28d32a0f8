"""A small ogbn-mag-shaped graph written in OGB's heterogeneous raw layout
(what `loaderd import ogb` reads), for tests that train on it: the node
types and relations of `loaderd gen --like mag` (paper, author, institution,
field_of_study; writes, cites, has_topic, affiliated_with, stored one way as
gen's are) with few venue classes, so that a model learns them in seconds.

Every node has a planted class. Features are the class centroid plus
N(0, 1) noise, weak enough that a paper's own features say little;
each edge joins nodes of one class with probability `homophily`, so a
paper's neighbourhood says much more. In-degrees are geometric (mean
`degree`), so some nodes have many more neighbours than a fanout takes."""

import gzip
import os

import numpy as np

NODES = {"paper": 4000, "author": 4000, "institution": 40, "field_of_study": 100}
RELATIONS = [("author", "affiliated_with", "institution"), ("author", "writes", "paper"),
             ("paper", "cites", "paper"), ("paper", "has_topic", "field_of_study")]
SPLITS = {"train": 2000, "valid": 400, "test": 1600}


def _csv(path, rows, fmt):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with gzip.open(path, "wt") as f:
        np.savetxt(f, rows, fmt=fmt, delimiter=",")


def write(root, seed=0, classes=8, dim=32, mu=0.3, homophily=0.6, degree=5.0):
    """Writes the raw layout under root (root/raw, root/split/random) and
    returns the planted classes per node type."""
    rng = np.random.default_rng(seed)
    cls = {t: rng.integers(classes, size=n) for t, n in NODES.items()}
    members = {t: [np.flatnonzero(c == k) for k in range(classes)] for t, c in cls.items()}
    centroids = rng.choice([-mu, mu], size=(classes, dim))
    raw = os.path.join(root, "raw")
    os.makedirs(raw, exist_ok=True)
    with gzip.open(os.path.join(raw, "num-node-dict.csv.gz"), "wt") as f:
        f.write(",".join(NODES) + "\n" + ",".join(str(n) for n in NODES.values()) + "\n")
    with gzip.open(os.path.join(raw, "triplet-type-list.csv.gz"), "wt") as f:
        f.write("".join(f"{s},{r},{d}\n" for s, r, d in RELATIONS))
    for t, n in NODES.items():
        x = centroids[cls[t]] + rng.standard_normal((n, dim))
        _csv(os.path.join(raw, "node-feat", t, "node-feat.csv.gz"), x, "%.5f")
    _csv(os.path.join(raw, "node-label", "paper", "node-label.csv.gz"), cls["paper"].reshape(-1, 1), "%d")
    for s, r, d in RELATIONS:
        # Each dst node draws its in-degree, then each source: of its own class
        # with probability `homophily`, else any node of the source type.
        deg = rng.geometric(1 / degree, size=NODES[d])
        dst = np.repeat(np.arange(NODES[d]), deg)
        same = rng.random(dst.size) < homophily
        src = rng.integers(NODES[s], size=dst.size)
        for i in np.flatnonzero(same):
            pool = members[s][cls[d][dst[i]]]
            src[i] = pool[rng.integers(pool.size)]
        keep = src != dst if s == d else np.ones(dst.size, bool)
        _csv(os.path.join(raw, "relations", f"{s}___{r}___{d}", "edge.csv.gz"),
             np.stack([src[keep], dst[keep]], 1), "%d")
    perm = rng.permutation(NODES["paper"])
    at = 0
    for name, size in SPLITS.items():
        _csv(os.path.join(root, "split", "random", "paper", f"{name}.csv.gz"),
             np.sort(perm[at:at + size]).reshape(-1, 1), "%d")
        at += size
    return cls

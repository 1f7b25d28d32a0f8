"""Heterogeneous batches from a real loaderd, checked against the dataset
files it serves (read here with numpy, python/tests/dataset_files.py), and
the must-show training check.

- `loaderd gen --like mag` (the shape examples/hetero_sage.py trains on): a
  batch with every fanout -1 (or 0) draws nothing at random, so it must
  equal, field for field, the batch built here from the CSR files; batches
  with finite fanouts must hold only edges of the graph, the right number of
  them per node and hop, and the dataset's features and labels.
- toy_mag (an ogbn-mag-shaped graph with 8 venues, `loaderd import ogb`):
  the hetero SAGE of examples/hetero_sage.py trained through loaderd's
  sampled batches reaches, within 2 points on the test split, the accuracy
  of the same model trained with exact aggregation (every in-neighbour, from
  the files). gen --like mag's 349 venues need far more training than a CI
  run on 2 cores affords (its numbers are in docs/pyg.md).
"""

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import torch

from test_loader import LOADERD, ROOT, Daemon  # also puts python/ on sys.path
import gnnloader  # noqa: E402
from dataset_files import HeteroFiles  # noqa: E402
import toy_mag  # noqa: E402

spec = importlib.util.spec_from_file_location("hetero_sage", ROOT / "examples" / "hetero_sage.py")
hs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hs)

WRITES, CITES = ("author", "writes", "paper"), ("paper", "cites", "paper")
TOPIC, AFFIL = ("paper", "has_topic", "field_of_study"), ("author", "affiliated_with", "institution")


def check_batch_against_files(tc, b, f, seeds, fanouts=None):
    """Invariants of a sampled batch `b` over the dataset `f`: per node type
    distinct ids in range, the seeds first, the dataset's rows of x and y;
    per edge type only edges of the graph, each at its CSR position, from
    dst nodes that joined at the hop before, min(fanout, degree) of them per
    such node and hop when `fanouts` (edge type -> per-hop list) is given."""
    joined_at = {}
    for t in f.node_types:
        s = b[t]
        n_id = s.n_id
        tc.assertEqual(n_id.unique().numel(), n_id.numel(), t)
        if n_id.numel():
            tc.assertTrue(0 <= int(n_id.min()) and int(n_id.max()) < f.num_nodes[t], t)
        if t in f.x:
            tc.assertTrue(torch.equal(s.x, f.x[t][n_id]), f"{t}.x")
        if t in f.y:
            tc.assertTrue(torch.equal(s.y, f.y[t][n_id]), f"{t}.y")
        hops = s.num_sampled_nodes
        tc.assertEqual(sum(hops), n_id.numel(), t)
        joined_at[t] = torch.repeat_interleave(torch.arange(len(hops)), torch.tensor(hops))
    tc.assertTrue(torch.equal(b["paper"].n_id[:b["paper"].batch_size], seeds))
    for e in f.edge_types:
        s, d = e[0], e[2]
        ei, e_id, per_hop = b[e].edge_index, b[e].e_id, b[e].num_sampled_edges
        tc.assertEqual(sum(per_hop), ei.size(1), e)
        if not ei.size(1):
            continue
        src, dst = b[s].n_id[ei[0]], b[d].n_id[ei[1]]
        tc.assertTrue(torch.equal(f.indices[e][e_id], src), f"{e}: e_id is not the source's CSR position")
        ip = f.indptr[e]
        tc.assertTrue(bool(((ip[dst] <= e_id) & (e_id < ip[dst + 1])).all()), f"{e}: e_id outside the dst's row")
        hop_of_edge = torch.repeat_interleave(torch.arange(1, len(per_hop) + 1), torch.tensor(per_hop))
        tc.assertTrue(torch.equal(joined_at[d][ei[1]], hop_of_edge - 1), f"{e}: dst not on the frontier")
        for h in range(1, len(per_hop) + 1):
            sel = hop_of_edge == h
            tc.assertEqual(torch.stack([ei[1][sel], e_id[sel]]).unique(dim=1).size(1), int(sel.sum()), e)
            if fanouts is None:
                continue
            front = torch.nonzero(joined_at[d] == h - 1).view(-1)
            deg = ip[b[d].n_id[front] + 1] - ip[b[d].n_id[front]]
            want = deg if fanouts[e][h - 1] < 0 else deg.clamp(max=fanouts[e][h - 1])
            got = torch.zeros(b[d].n_id.numel(), dtype=torch.int64).index_add_(
                0, ei[1][sel], torch.ones(int(sel.sum()), dtype=torch.int64))[front]
            tc.assertTrue(torch.equal(got, want), f"{e} hop {h}: edges per frontier node")


class HeteroMagTest(unittest.TestCase):
    """Batches of `loaderd gen --like mag` against its files."""

    @classmethod
    def setUpClass(cls):
        if not os.path.exists(LOADERD):
            raise unittest.SkipTest(f"{LOADERD} not built (scripts/test.sh builds it)")
        cls.tmp = tempfile.mkdtemp(prefix="gnnloader-hetero-")
        cls.path = os.path.join(cls.tmp, "mag")
        subprocess.run([LOADERD, "gen", "--like", "mag", "--scale", "0.003", "--seed", "2", "--out", cls.path],
                       check=True, capture_output=True)
        cls.files = HeteroFiles(cls.path)
        cls.daemon = Daemon(cls.path, "--gpu=false")

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def nl(self, num_neighbors, input_nodes, **kw):
        kw.setdefault("batch_size", 32)
        return gnnloader.NeighborLoader(self.daemon.socket, num_neighbors, input_nodes, **kw)

    def assert_batch_equal(self, b, want, seeds, positions):
        f = self.files
        self.assertEqual(b["paper"].batch_size, len(seeds))
        self.assertTrue(torch.equal(b["paper"].input_id, positions))
        for key in list(f.node_types) + list(f.edge_types):
            for attr, value in want[key].items():
                got = b[key][attr]
                self.assertEqual(type(got), type(value), (key, attr))
                ok = torch.equal(got, value) if isinstance(value, torch.Tensor) else got == value
                self.assertTrue(ok, f"{key}.{attr}: loaderd {got} != reference {value}")

    def test_exact_batches_equal_reference(self):
        f = self.files
        ids = f.splits[("paper", "train")][torch.randperm(f.splits[("paper", "train")].numel(),
                                                            generator=torch.Generator().manual_seed(0))][:96]
        every = {e: [-1, -1] for e in f.edge_types}
        some = {WRITES: [-1, 0], CITES: [-1, -1], TOPIC: [0, -1], AFFIL: [0, 0]}
        for num_neighbors, fanouts in [([-1, -1], every), (some, some)]:
            with self.nl(num_neighbors, ("paper", ids)) as ld:
                self.assertEqual(len(ld), 3)
                n = 0
                for i, b in enumerate(ld):
                    seeds = ids[32 * i:32 * (i + 1)]
                    self.assert_batch_equal(b, f.full_batch("paper", seeds, fanouts), seeds,
                                            torch.arange(32 * i, 32 * (i + 1)))
                    n += 1
                self.assertEqual(n, 3)

    def test_sampled_batches_are_subgraphs(self):
        f = self.files
        fanouts = {WRITES: [3, 2], CITES: [2, 4], TOPIC: [1, 1], AFFIL: [2, 0]}
        train = f.splits[("paper", "train")]
        with self.nl(fanouts, ("paper", "train"), shuffle=True, seed=5) as ld:
            for i, b in enumerate(ld):
                seeds = train[b["paper"].input_id]
                check_batch_against_files(self, b, f, seeds, fanouts)
                if i == 3:
                    break
        with self.nl([4, 3], ("paper", "train"), shuffle=True, seed=5) as ld:  # one list for every edge type
            b = next(iter(ld))
            check_batch_against_files(self, b, f, train[b["paper"].input_id], {e: [4, 3] for e in f.edge_types})

    def test_arguments(self):
        f = self.files
        n_paper = f.num_nodes["paper"]
        bad = [(dict(input_nodes=("venue", None)), "unknown node type 'venue'"),
               (dict(num_neighbors={("paper", "reads", "paper"): [1]}), "Not all edge types"),
               (dict(num_neighbors={WRITES: [2]}), "Missing number of neighbors for edge type"),
               (dict(num_neighbors={WRITES: [2], CITES: [2, 2]}), "Number of hops must be the same"),
               (dict(input_nodes=("paper", torch.ones(3, dtype=torch.bool))), f"mask of 3 entries .* {n_paper} nodes"),
               (dict(input_nodes=("paper", torch.tensor([n_paper]))), "outside"),
               (dict(input_nodes="train"), "heterogeneous dataset .* name the seed node type"),
               (dict(input_nodes=("paper", "nope")), "no split|nope")]
        for kw, text in bad:
            with self.subTest(kw=kw):
                kw = {"num_neighbors": [2], "input_nodes": ("paper", None), **kw}
                with self.assertRaisesRegex(ValueError, text):
                    self.nl(kw.pop("num_neighbors"), kw.pop("input_nodes"), **kw)
        # PyG's aliases, its NumNeighbors(values, default) and len(loader.dataset).
        pyg_like = type("NumNeighbors", (), {"values": {WRITES: [3]}, "default": [1]})()
        with self.nl(pyg_like, ("paper", "val")) as ld:
            self.assertEqual(len(ld.dataset), f.splits[("paper", "valid")].numel())
            b = next(iter(ld))
            check_batch_against_files(self, b, f, f.splits[("paper", "valid")][:32],
                                      {e: [3] if e == WRITES else [1] for e in f.edge_types})
        # A mask: input_id holds node ids (PyG's rule); loader(index) copies.
        mask = torch.zeros(n_paper, dtype=torch.bool)
        mask[10:50] = True
        with self.nl([-1], ("paper", mask), batch_size=16) as ld:
            self.assertEqual(len(ld.dataset), 40)
            b = next(iter(ld))
            self.assertTrue(torch.equal(b["paper"].input_id, torch.arange(10, 26)))
            one = ld(torch.tensor([3, 0]))
            self.assertTrue(torch.equal(one["paper"].n_id[:2], torch.tensor([13, 10])))
            self.assertTrue(torch.equal(one["paper"].input_id, torch.tensor([13, 10])))
            self.assert_batch_equal(one, f.full_batch("paper", [13, 10], {e: [-1] for e in f.edge_types}),
                                    [13, 10], torch.tensor([13, 10]))
        # connect() gives PyG's metadata; a node type alone means all its nodes.
        remote = gnnloader.connect(self.daemon.socket)
        self.assertEqual(remote.metadata(), (f.node_types, f.edge_types))
        self.assertEqual(remote.types["paper"].num_classes, 349)
        with gnnloader.NeighborLoader(remote, [0], "paper", batch_size=1024) as ld:
            self.assertEqual(len(ld.dataset), n_paper)
            self.assertEqual(sum(b["paper"].batch_size for b in ld), n_paper)
        # data, as a HeteroData-like object, is checked against what loaderd serves.
        like = gnnloader.hetero.HeteroBatch(f.node_types, f.edge_types)
        for t in f.node_types:
            like[t].x = f.x[t]
        with gnnloader.NeighborLoader(like, [1], ("paper", None), socket=self.daemon.socket) as ld:
            self.assertEqual(len(ld), n_paper)
        like["author"].x = f.x["author"][:, :5]
        with self.assertRaisesRegex(ValueError, r"data\['author'\].x is float32 of shape"):
            gnnloader.NeighborLoader(like, [1], ("paper", None), socket=self.daemon.socket)
        short = gnnloader.hetero.HeteroBatch(f.node_types, f.edge_types[1:])
        with self.assertRaisesRegex(ValueError, "edge types"):
            gnnloader.NeighborLoader(short, [1], ("paper", None), socket=self.daemon.socket)
        # The protocol's own vocabulary: gnnloader.Loader with input_type.
        with gnnloader.Loader(self.daemon.socket, split="test", input_type="paper", batch_size=64, shuffle=False,
                              fanouts={e: [2, 1] for e in f.edge_types}, pyg=False) as ld:
            b = next(iter(ld))
            self.assertIsInstance(b, gnnloader.hetero.HeteroBatch)
            check_batch_against_files(self, b, f, f.splits[("paper", "test")][:64],
                                      {e: [2, 1] for e in f.edge_types})


class HeteroTrainingTest(unittest.TestCase):
    """The must-show check: sampled training matches exact aggregation."""

    EPOCHS, BATCH, HIDDEN, LR, FANOUTS, SEEDS = 10, 256, 32, 0.01, [4, 4], (0, 1)

    def test_sampled_training_matches_exact_aggregation(self):
        if not os.path.exists(LOADERD):
            self.skipTest(f"{LOADERD} not built (scripts/test.sh builds it)")
        start = time.time()
        tmp = tempfile.mkdtemp(prefix="gnnloader-hetero-train-")
        try:
            toy_mag.write(os.path.join(tmp, "raw"), seed=0)
            path = os.path.join(tmp, "toy")
            subprocess.run([LOADERD, "import", "ogb", os.path.join(tmp, "raw"), "--out", path],
                           check=True, capture_output=True)
            f = HeteroFiles(path)
            daemon = Daemon(path, "--gpu=false")
            try:
                results = [self.train_both(f, daemon.socket, seed) for seed in self.SEEDS]
            finally:
                daemon.stop()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        sampled = sum(r[0] for r in results) / len(results)
        exact = sum(r[1] for r in results) / len(results)
        print(f"\nhetero SAGE ({'to_hetero' if hs.to_hetero else 'HeteroSAGE'}) on toy_mag, test accuracy "
              f"(sampled {self.FANOUTS}, exact) per seed {self.SEEDS}: {results}; mean sampled {sampled:.4f}, "
              f"exact {exact:.4f} ({time.time() - start:.1f} s)", file=sys.stderr)
        self.assertGreaterEqual(sampled, 0.7, "the model did not learn the venues")
        self.assertLessEqual(abs(sampled - exact), 0.02, f"sampled {sampled:.4f} vs exact aggregation {exact:.4f}")

    def train_both(self, f, socket, seed):
        nt, et = f.node_types, f.edge_types
        classes = int(f.y["paper"].max()) + 1
        loops = hs.self_loop_types(nt, et)
        x = {t: f.x[t] for t in nt}
        full = hs.with_self_loops(x, {e: f.edge_index(e) for e in et}, loops)
        train, test, y = f.splits[("paper", "train")], f.splits[("paper", "test")], f.y["paper"]

        def model():
            torch.manual_seed(seed)
            m = hs.build_model(nt, et, {t: x[t].size(1) for t in nt}, self.HIDDEN, classes)
            with torch.no_grad():  # PyG's lazy layers take their sizes from a first forward
                m(x, full)
            return m

        # Through loaderd: its shuffle and its sampled neighbourhoods.
        sampled = model()
        with gnnloader.NeighborLoader(socket, self.FANOUTS, ("paper", "train"), batch_size=self.BATCH,
                                      shuffle=True, seed=seed) as ld:
            hs.fit(sampled, self.EPOCHS, lambda e: (hs.inputs(b, nt, et) for b in ld), lr=self.LR)
        # Exact aggregation: the whole graph, batches of the same size.
        exact = model()
        gen = torch.Generator().manual_seed(seed)

        def full_batches(epoch):
            perm = train[torch.randperm(train.numel(), generator=gen)]
            return ((x, full, perm[i:i + self.BATCH], y[perm[i:i + self.BATCH]])
                    for i in range(0, perm.numel(), self.BATCH))
        hs.fit(exact, self.EPOCHS, full_batches, lr=self.LR)
        return tuple(round(hs.accuracy(m, [(x, full, test, y[test])]), 4) for m in (sampled, exact))


if __name__ == "__main__":
    unittest.main()

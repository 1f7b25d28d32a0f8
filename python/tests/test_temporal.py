"""Disjoint and temporal sampling (PyG's disjoint=True, time_attr,
temporal_strategy, input_time) against a real loaderd, checked against the
graph and times written here: a random graph with node and edge times,
written as .npz (node_time, edge_time members) and imported."""

import os
import shutil
import subprocess
import tempfile
import unittest

import numpy as np
import torch

from test_loader import LOADERD, Daemon  # also puts python/ on sys.path
import gnnloader  # noqa: E402

N, M = 300, 2400


def ref_disjoint(indptr, indices, seeds, hops, eligible=None):
    """PyG's disjoint sampling with every fanout -1, written out: one
    frontier over the batch, nodes keyed by (subgraph, node)."""
    n_id, batch, src, dst, eid = list(seeds), list(range(len(seeds))), [], [], []
    local = {(i, v): i for i, v in enumerate(seeds)}
    lo, hi = 0, len(seeds)
    for _ in range(hops):
        for q in range(lo, hi):
            v, s = n_id[q], batch[q]
            for p in range(indptr[v], indptr[v + 1]):
                if eligible is not None and not eligible(p, s):
                    continue
                u = int(indices[p])
                lid = local.get((s, u))
                if lid is None:
                    lid = local[(s, u)] = len(n_id)
                    n_id.append(u)
                    batch.append(s)
                src.append(lid)
                dst.append(q)
                eid.append(p)
        lo, hi = hi, len(n_id)
    return n_id, batch, [src, dst], eid


class TemporalTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists(LOADERD):
            raise unittest.SkipTest(f"{LOADERD} not built")
        cls.tmp = tempfile.mkdtemp(prefix="gnnloader-temporal-")
        rng = np.random.default_rng(5)
        src, dst = rng.integers(0, N, M), rng.integers(0, N, M)
        order = np.lexsort((src, dst))  # CSR order: row dst, sorted by src (as loaderd stores it)
        src, dst = src[order], dst[order]
        indptr = np.zeros(N + 1, dtype=np.int64)
        np.add.at(indptr, dst + 1, 1)
        cls.indptr, cls.indices = np.cumsum(indptr), src.astype(np.int64)
        cls.node_time = rng.integers(0, 100, N)
        cls.edge_time = rng.integers(0, 100, M)
        npz = os.path.join(cls.tmp, "t.npz")
        np.savez(npz, adj_indptr=cls.indptr, adj_indices=cls.indices, adj_shape=np.array([N, N]),
                 attr_matrix=np.eye(N, 4, dtype=np.float32), labels=np.arange(N) % 3,
                 node_time=cls.node_time, edge_time=cls.edge_time)
        plain = os.path.join(cls.tmp, "plain.npz")
        np.savez(plain, adj_indptr=cls.indptr, adj_indices=cls.indices, adj_shape=np.array([N, N]),
                 attr_matrix=np.eye(N, 4, dtype=np.float32), labels=np.arange(N) % 3)
        for f, out in ((npz, "t"), (plain, "plain")):
            subprocess.run([LOADERD, "import", "npz", f, "--out", os.path.join(cls.tmp, out)], check=True,
                           capture_output=True)
        cls.daemon = Daemon(os.path.join(cls.tmp, "t"), "--gpu=false")
        cls.plain = Daemon(os.path.join(cls.tmp, "plain"), "--gpu=false")

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()
        cls.plain.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def nl(self, *args, **kw):
        kw.setdefault("batch_size", 8)
        return gnnloader.NeighborLoader(self.daemon.socket, *args, **kw)

    def disjoint_nl(self, *args, **kw):
        """A disjoint loader without times (Open temporal "disjoint")."""
        return self.nl(*args, disjoint=True, **kw)

    def check_disjoint(self, b, seeds):
        """What every disjoint batch satisfies."""
        bs = b.batch_size
        self.assertEqual(b.n_id[:bs].tolist(), seeds)
        self.assertEqual(b.batch.dtype, torch.int64)
        self.assertEqual(b.batch.shape, b.n_id.shape)
        self.assertEqual(b.batch[:bs].tolist(), list(range(bs)))
        src, dst = b.edge_index
        self.assertTrue(torch.equal(b.batch[src], b.batch[dst]), "an edge joins two subgraphs")
        pairs = set(zip(b.batch.tolist(), b.n_id.tolist()))
        self.assertEqual(len(pairs), b.n_id.numel(), "a node twice in one subgraph")
        ind = torch.from_numpy(self.indices)
        self.assertTrue(torch.equal(ind[b.e_id], b.n_id[src]), "e_id is not the sampled edge")
        for e, v in zip(b.e_id.tolist(), b.n_id[dst].tolist()):
            self.assertTrue(self.indptr[v] <= e < self.indptr[v + 1])

    def test_disjoint_matches_reference(self):
        # Every fanout -1: no randomness, so batches are PyG's exactly.
        seeds = torch.tensor([4, 17, 4, 250, 9, 9, 120, 33, 61, 2, 4])
        with self.disjoint_nl([-1, -1], input_nodes=seeds) as loader:
            got = 0
            for b in loader:
                s = seeds[got:got + b.batch_size].tolist()
                self.check_disjoint(b, s)
                n_id, batch, ei, eid = ref_disjoint(self.indptr, self.indices, s, 2)
                self.assertEqual(b.n_id.tolist(), n_id)
                self.assertEqual(b.batch.tolist(), batch)
                self.assertEqual(b.edge_index.tolist(), ei)
                self.assertEqual(b.e_id.tolist(), eid)
                self.assertEqual(sum(b.num_sampled_nodes), len(n_id))
                got += b.batch_size
            self.assertEqual(got, seeds.numel())
        self.assertEqual(loader.disjoint, True)

    def test_disjoint_sampled(self):
        repeats = 0
        with self.disjoint_nl([4, 3], shuffle=True, batch_size=32) as loader:
            for b in loader:
                self.check_disjoint(b, b.n_id[:b.batch_size].tolist())
                repeats += b.n_id.numel() - b.n_id.unique().numel()
                self.assertFalse(hasattr(b, "seed_time") and b.seed_time is not None)
        self.assertGreater(repeats, 0, "no node reached by two subgraphs: not disjoint?")
        # A plain loader's batches have no batch vector.
        with self.nl([4, 3]) as loader:
            self.assertNotIn("batch", next(iter(loader)).keys())

    def test_node_time_uniform(self):
        nt = torch.from_numpy(self.node_time)
        with self.nl([5, 5], time_attr="node_time", shuffle=True, batch_size=16) as loader:
            self.assertTrue(loader.disjoint)  # PyG forces it
            edges = 0
            for b in loader:
                self.check_disjoint(b, b.n_id[:b.batch_size].tolist())
                self.assertEqual(b.node_time.tolist(), nt[b.n_id].tolist())  # PyG's batch.<time_attr>
                self.assertNotIn("edge_time", b.keys())
                seed_time = nt[b.n_id[:b.batch_size]]  # no input_time: the seeds' own node times
                src, dst = b.edge_index
                # every neighbour, at any hop, is no later than its seed
                self.assertTrue(bool((nt[b.n_id[src]] <= seed_time[b.batch[dst]]).all()))
                edges += src.numel()
            self.assertGreater(edges, 200)

    def test_node_time_all_neighbours_exact(self):
        seeds = torch.tensor([3, 40, 41, 199, 3])
        times = torch.tensor([50, 99, 0, 70, 20])
        nt = self.node_time
        n_id, batch, ei, eid = ref_disjoint(self.indptr, self.indices, seeds.tolist(), 2,
                                            lambda p, s: nt[self.indices[p]] <= times[s])
        with self.nl([-1, -1], input_nodes=seeds, input_time=times, time_attr="node_time", batch_size=5) as loader:
            b = next(iter(loader))  # views of a slot: check them before the loader closes
            self.check_disjoint(b, seeds.tolist())
            self.assertEqual(b.seed_time.tolist(), times.tolist())
            self.assertEqual((b.n_id.tolist(), b.batch.tolist(), b.edge_index.tolist(), b.e_id.tolist()),
                             (n_id, batch, ei, eid))

    def test_edge_time_last_takes_the_most_recent(self):
        et = self.edge_time
        seeds = torch.arange(0, N, 3)
        times = torch.from_numpy(np.random.default_rng(1).integers(20, 90, seeds.numel()))
        with self.nl([2], input_nodes=seeds, input_time=times, time_attr="edge_time",
                     temporal_strategy="last", batch_size=10) as loader:
            at = 0
            for b in loader:
                bs = b.batch_size
                self.check_disjoint(b, seeds[at:at + bs].tolist())
                self.assertEqual(b.seed_time.tolist(), times[at:at + bs].tolist())
                src, dst = b.edge_index
                for i in range(bs):
                    v, t = int(seeds[at + i]), int(times[at + i])
                    row = range(self.indptr[v], self.indptr[v + 1])
                    eligible = sorted((int(et[p]), p) for p in row if et[p] <= t)
                    want = [p for _, p in eligible[-2:]]  # the two most recent, ascending
                    got = b.e_id[dst == i].tolist()
                    self.assertEqual(got, want, f"seed {v} at time {t}")
                at += bs
            self.assertEqual(at, seeds.numel())

    def test_edge_time_uniform_respects_times(self):
        et = torch.from_numpy(self.edge_time)
        mask = torch.zeros(N, dtype=torch.bool)
        mask[::2] = True
        times = torch.full((int(mask.sum()),), 60)
        with self.nl([3, 3], input_nodes=mask, input_time=times, time_attr="edge_time", batch_size=25) as loader:
            for b in loader:
                self.check_disjoint(b, b.n_id[:b.batch_size].tolist())
                self.assertTrue(bool((et[b.e_id] <= 60).all()))
                self.assertEqual(b.edge_time.tolist(), et[b.e_id].tolist())  # PyG's batch.<time_attr>
                self.assertNotIn("node_time", b.keys())
                self.assertEqual(b.input_id.tolist(), b.n_id[:b.batch_size].tolist())  # a mask's input_id: node ids
                self.assertEqual(b.seed_time.tolist(), [60] * b.batch_size)

    def test_call_with_input_time(self):
        seeds = torch.tensor([10, 20, 30, 40])
        times = torch.tensor([5, 95, 50, 0])
        with self.nl([-1], input_nodes=seeds, input_time=times, time_attr="node_time") as loader:
            b = loader([3, 1])
        self.assertEqual(b.n_id[:2].tolist(), [40, 20])
        self.assertEqual(b.seed_time.tolist(), [0, 95])
        self.assertEqual(b.input_id.tolist(), [3, 1])
        nt = torch.from_numpy(self.node_time)
        src, dst = b.edge_index
        self.assertTrue(bool((nt[b.n_id[src]] <= b.seed_time[b.batch[dst]]).all()))

    def test_time_attr_named_like_data(self):
        class Data:
            num_nodes = N
            edge_index = torch.zeros(2, M, dtype=torch.int64)
            time = torch.zeros(N)  # node-level: loaderd's node_time
            stamp = torch.zeros(M)  # edge-level: loaderd's edge_time
        with gnnloader.NeighborLoader(Data(), [2], time_attr="time", batch_size=4, socket=self.daemon.socket) as ld:
            self.assertEqual(ld.loader._request.time_attr, "node_time")
            b = next(iter(ld))  # PyG names the batch's times after time_attr
            self.assertEqual(b.time.tolist(), self.node_time[b.n_id.numpy()].tolist())
            self.assertNotIn("node_time", b.keys())
            one = ld([0, 5])  # and so does a call
            self.assertEqual(one.time.tolist(), self.node_time[one.n_id.numpy()].tolist())
        with gnnloader.NeighborLoader(Data(), [2], time_attr="stamp", input_nodes=torch.arange(3),
                                      input_time=torch.tensor([1, 2, 3]), socket=self.daemon.socket) as ld:
            self.assertEqual(ld.loader._request.time_attr, "edge_time")

    def test_refusals(self):
        with self.assertRaisesRegex(ValueError, "'input_time' is set while 'time_attr' is not set"):
            self.nl([2], input_nodes=torch.arange(3), input_time=torch.tensor([1, 2, 3]))
        with self.assertRaisesRegex(ValueError, "temporal_strategy"):
            self.nl([2], time_attr="node_time", temporal_strategy="latest")
        # Without time_attr PyG ignores temporal_strategy, and so does gnnloader.
        with self.nl([2], temporal_strategy="latest") as ignored:
            self.assertFalse(ignored.disjoint)
        with self.assertRaisesRegex(ValueError, "split name"):
            self.nl([2], input_nodes="train", time_attr="node_time", input_time=torch.tensor([1]))
        with self.assertRaisesRegex(ValueError, "3 entries for 2 input nodes"):
            self.nl([2], input_nodes=torch.tensor([1, 2]), time_attr="node_time", input_time=torch.tensor([1, 2, 3]))
        with self.assertRaisesRegex(ValueError, "integer"):
            self.nl([2], input_nodes=torch.tensor([1]), time_attr="node_time", input_time=torch.tensor([1.5]))
        with self.assertRaisesRegex(ValueError, "node_time' or 'edge_time'"):
            self.nl([2], time_attr="time")  # no data to tell which
        # The daemon's refusals are RequestErrors (ValueErrors).
        with self.assertRaisesRegex(gnnloader.RequestError, "input_time"):
            self.nl([2], time_attr="edge_time")  # PyG: edge-level time needs seed times
        with self.assertRaisesRegex(gnnloader.RequestError, "no node_time"):
            gnnloader.NeighborLoader(self.plain.socket, [2], time_attr="node_time")
        with self.assertRaisesRegex(ValueError, "disjoint"):  # link batches: not yet
            gnnloader.LinkNeighborLoader(self.daemon.socket, [2], edge_label_index=torch.tensor([[0], [1]]),
                                         disjoint=True)


if __name__ == "__main__":
    unittest.main()

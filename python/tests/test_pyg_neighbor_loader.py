"""PyG's own NeighborLoader tests (test/loader/test_neighbor_loader.py in
pyg-team/pytorch_geometric, homogeneous cases), rewritten against
gnnloader.NeighborLoader and a real loaderd; PyG itself is not needed.

Each PyG case is either adapted here (the test method names it) or listed
in OUT_OF_SCOPE with the reason; docs/pyg.md has the counts. The graphs are
written as .npz files and imported with `loaderd import npz`, so the test
knows every edge's CSR position (gnnloader's e_id): the edge (src -> dst) is
in CSR row dst, rows sorted by src, and `data.edge_index` below is in that
order, so `data.edge_index[:, e_id]` is the sampled edge, as in PyG.

The rest of PyG's homogeneous NeighborLoader behaviour (argument order,
exceptions, loader(ids), batch fields) is tested in test_pyg_parity.py,
on these daemons.
"""

import os
import shutil
import subprocess
import tempfile
import unittest
import warnings

import numpy as np
import torch

from test_loader import LOADERD, Daemon  # also puts python/ on sys.path
import gnnloader  # noqa: E402

# PyG case -> why it is not adapted. Parametrised cases count once per
# parameter set (PyG's own ids).
OUT_OF_SCOPE = {
    **{f"test_homo_neighbor_loader_basic[{sub}-{d}-{f}]": "subgraph_type other than directional (PyG's "
       "bidirectional needs its C++ pyg-lib, induced torch-sparse); loaderd samples directional subgraphs only "
       "and the option raises ValueError"
       for sub in ("bidirectional", "induced") for d in ("int64", "int32")
       for f in ("auto_filter", "filter_per_worker", "filter_in_main")},
    **{f"test_homo_neighbor_loader_on_karate[{sub}]": "subgraph_type other than directional"
       for sub in ("bidirectional", "induced")},
    "test_custom_neighbor_loader": "PyG's (FeatureStore, GraphStore) backends: loaderd is the store",
    "test_pyg_lib_and_torch_sparse_homo_equality": "compares PyG's two C++ samplers (pyg-lib, torch-sparse)",
    "test_weighted_homo_neighbor_loader": "weight_attr (weighted sampling): not implemented, raises ValueError",
    "test_neighbor_loader_with_tensor_frame": "torch_frame TensorFrame attributes: loaderd serves tensors only",
}
# The adapted cases, by PyG id.
ADAPTED = [f"test_homo_neighbor_loader_basic[directional-{d}-{f}]" for d in ("int64", "int32")
           for f in ("auto_filter", "filter_per_worker", "filter_in_main")] + [
    "test_homo_neighbor_loader_on_karate[directional]",
    "test_memmap_neighbor_loader",
    "test_homo_neighbor_loader_sampled_info",
    "test_neighbor_loader_mapping",
    "test_neighbor_loader_input_id",  # PyG's is heterogeneous; its input_id rule, on a homogeneous graph
    "test_edge_level_temporal_homo_neighbor_loader",
]


def write_graph(path, num_nodes, src, dst, x, labels):
    """An npz of the graph with edges src -> dst (as gnn-benchmark's, which
    `loaderd import npz` reads: row dst lists the neighbours dst samples)
    and dense features x; returns edge_index in CSR order."""
    order = np.lexsort((src, dst))
    src, dst = src[order], dst[order]
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.add.at(indptr, dst + 1, 1)
    np.savez(path, adj_indptr=np.cumsum(indptr), adj_indices=src.astype(np.int64),
             adj_shape=np.array([num_nodes, num_nodes]), attr_matrix=x.astype(np.float32),
             labels=labels.astype(np.int64))
    return torch.from_numpy(np.stack([src, dst]).astype(np.int64))


def import_npz(npz, out):
    subprocess.run([LOADERD, "import", "npz", npz, "--out", out], check=True, capture_output=True)


class Data:
    """What a PyG script's `data` holds, as far as the loader reads it."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


def is_subset(sub_edge_index, edge_index, src_ids, dst_ids):
    """Every edge of the batch (mapped to global ids) is an edge of the graph."""
    n = int(max(edge_index.max(), src_ids.max(), dst_ids.max())) + 1
    have = set((n * edge_index[0] + edge_index[1]).tolist())
    got = n * src_ids[sub_edge_index[0]] + dst_ids[sub_edge_index[1]]
    return all(v in have for v in got.tolist())


class PyGNeighborLoaderCases(unittest.TestCase):
    """Two daemons: `rand` serves 100 nodes and 500 random edges whose one
    feature is the node id (PyG's data.x = arange(100)); `tiny` serves the
    small graphs of PyG's sampled_info (nodes 0..13) and mapping (14..25)
    tests side by side."""

    @classmethod
    def setUpClass(cls):
        if not os.path.exists(LOADERD):
            raise unittest.SkipTest(f"{LOADERD} not built")
        cls.tmp = tempfile.mkdtemp(prefix="gnnloader-pygcases-")
        g = torch.Generator().manual_seed(12345)
        src = torch.randint(0, 100, (500,), generator=g).numpy()
        dst = torch.randint(0, 100, (500,), generator=g).numpy()
        x = np.arange(100, dtype=np.float32).reshape(100, 1)
        ei = write_graph(os.path.join(cls.tmp, "rand.npz"), 100, src, dst, x, np.arange(100) % 3)
        cls.rand = Data(num_nodes=100, edge_index=ei, x=torch.arange(100, dtype=torch.float32),
                        edge_attr=torch.arange(500))
        import_npz(os.path.join(cls.tmp, "rand.npz"), os.path.join(cls.tmp, "rand"))

        info = [[2, 3, 4, 5, 7, 7, 10, 11, 12, 13], [0, 1, 2, 3, 2, 3, 7, 7, 7, 7]]
        mapping = [[0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 3, 5], [1, 2, 3, 4, 5, 8, 6, 7, 9, 10, 6, 11]]
        src = np.array(info[0] + [14 + v for v in mapping[0]])
        dst = np.array(info[1] + [14 + v for v in mapping[1]])
        tiny_x = np.arange(26, dtype=np.float32).reshape(26, 1)
        ei = write_graph(os.path.join(cls.tmp, "tiny.npz"), 26, src, dst, tiny_x, np.arange(26) % 2)
        cls.tiny = Data(num_nodes=26, edge_index=ei)
        import_npz(os.path.join(cls.tmp, "tiny.npz"), os.path.join(cls.tmp, "tiny"))

        cls.rand_daemon = Daemon(os.path.join(cls.tmp, "rand"), "--gpu=false")
        cls.tiny_daemon = Daemon(os.path.join(cls.tmp, "tiny"), "--gpu=false")

    @classmethod
    def tearDownClass(cls):
        for d in (cls.rand_daemon, cls.tiny_daemon):
            d.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def nl(self, data, *args, daemon=None, **kw):
        daemon = daemon or (self.rand_daemon if data is self.rand else self.tiny_daemon)
        return gnnloader.NeighborLoader(data, *args, socket=daemon.socket, **kw)

    def test_case_counts(self):
        self.assertEqual(len(ADAPTED), 12)
        self.assertEqual(len(OUT_OF_SCOPE), 18)
        self.assertFalse(set(ADAPTED) & set(OUT_OF_SCOPE))

    # -- test_homo_neighbor_loader_basic[directional-*] --------------------------

    def test_homo_neighbor_loader_basic(self):
        # PyG's dtype is data.edge_index's, which gnnloader never reads (the
        # graph is loaderd's); filter_per_worker changes nothing here.
        # data.edge_attr is not served yet: data.edge_attr[batch.e_id]
        # stands in for batch.edge_attr.
        data = self.rand
        for dtype in (torch.int64, torch.int32):
            for fpw in (None, True, False):
                with self.subTest(dtype=dtype, filter_per_worker=fpw):
                    d = Data(num_nodes=100, x=data.x, edge_index=data.edge_index.to(dtype))
                    with self.nl(d, num_neighbors=[5] * 2, batch_size=20, subgraph_type="directional",
                                 filter_per_worker=fpw, daemon=self.rand_daemon) as loader:
                        self.check_basic(loader, data)
        for sub in ("bidirectional", "induced"):
            with self.assertRaisesRegex(ValueError, "subgraph_type"):
                self.nl(data, num_neighbors=[5] * 2, batch_size=20, subgraph_type=sub)

    def check_basic(self, loader, data):
        self.assertEqual(str(loader), "NeighborLoader()")
        self.assertEqual(len(loader), 5)
        batch = loader([0])
        self.assertEqual(batch.n_id[:1].tolist(), [0])
        for i, batch in enumerate(loader):
            self.assertEqual(batch.x.device, torch.device("cpu"))
            self.assertLessEqual(batch.x.size(0), 100)
            self.assertEqual(batch.n_id.size(), (batch.num_nodes,))
            self.assertEqual(batch.input_id.numel(), 20)
            self.assertEqual(batch.batch_size, 20)
            self.assertTrue(batch.x.min() >= 0 and batch.x.max() < 100)
            self.assertGreaterEqual(int(batch.edge_index.min()), 0)
            self.assertLess(int(batch.edge_index.max()), batch.num_nodes)
            edge_attr = data.edge_attr[batch.e_id]
            self.assertEqual(edge_attr.size(0), batch.edge_index.size(1))
            # Input nodes are always sampled first:
            self.assertTrue(torch.equal(batch.x[:batch.batch_size],
                                        torch.arange(i * 20, (i + 1) * 20, dtype=torch.float32)))
            self.assertEqual(batch.e_id.size(), (batch.edge_index.size(1),))
            self.assertTrue(edge_attr.min() >= 0 and edge_attr.max() < 500)
            ids = batch.x.long()
            self.assertTrue(is_subset(batch.edge_index, data.edge_index, ids, ids))

    # -- test_homo_neighbor_loader_on_karate[directional] ------------------------

    def test_homo_neighbor_loader_on_karate(self):
        # PyG's karate club and GraphConv with edge weights become this
        # graph and a two-layer sum aggregation written here (no weights:
        # edge features are not served yet). Sampling every neighbour for
        # two hops must give the seeds exactly their full-graph outputs.
        data = self.rand
        split_idx = torch.arange(5, 8)
        with self.nl(data, num_neighbors=[-1, -1], batch_size=split_idx.numel(), input_nodes=split_idx) as loader:
            self.assertEqual(len(loader), 1)
            batch = next(iter(loader))
            torch.manual_seed(0)
            lins = [torch.nn.Linear(1, 16), torch.nn.Linear(1, 16), torch.nn.Linear(16, 4), torch.nn.Linear(16, 4)]

            def model(x, edge_index):
                def conv(h, root, nbr):
                    agg = torch.zeros(h.size(0), h.size(1)).index_add_(0, edge_index[1], h[edge_index[0]])
                    return root(h) + nbr(agg)
                h = conv(x.view(-1, 1), lins[0], lins[1]).relu()
                return conv(h, lins[2], lins[3])

            with torch.no_grad():
                out1 = model(data.x, data.edge_index)[split_idx]
                out2 = model(batch.x, batch.edge_index)[:batch.batch_size]
            self.assertTrue(torch.allclose(out1, out2, atol=1e-4), (out1 - out2).abs().max())

    # -- test_memmap_neighbor_loader ---------------------------------------------

    def test_memmap_neighbor_loader(self):
        # data.x as a numpy memmap: gnnloader does not read it (loaderd maps
        # its own feature file); num_workers is accepted and ignored.
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "x.npy")
            x = np.memmap(path, dtype=np.float32, mode="w+", shape=(100, 1))
            x[:] = np.arange(100).reshape(100, 1)
            data = Data(x=np.memmap(path, dtype=np.float32, mode="r", shape=(100, 1)),
                        edge_index=self.rand.edge_index, num_nodes=100)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                loader = self.nl(data, num_neighbors=[5] * 2, batch_size=20, num_workers=2, daemon=self.rand_daemon)
            with loader:
                batch = next(iter(loader))
                self.assertLessEqual(batch.num_nodes, 100)
                self.assertIsInstance(batch.x, torch.Tensor)
                self.assertEqual(batch.x.size(), (batch.num_nodes, 1))

    # -- test_homo_neighbor_loader_sampled_info ----------------------------------

    def test_homo_neighbor_loader_sampled_info(self):
        with self.nl(self.tiny, num_neighbors=[1, 2, 4], batch_size=2, shuffle=False) as loader:
            batch = next(iter(loader))
            self.assertEqual(batch.num_sampled_nodes, [2, 2, 3, 4])
            self.assertEqual(batch.num_sampled_edges, [2, 4, 4])

    # -- test_neighbor_loader_mapping --------------------------------------------

    def test_neighbor_loader_mapping(self):
        # PyG's 12-node graph is nodes 14..25 of the tiny dataset.
        with self.nl(self.tiny, num_neighbors=[1], batch_size=2, shuffle=True,
                     input_nodes=torch.arange(14, 26)) as loader:
            n = 0
            for batch in loader:
                self.assertTrue(torch.equal(batch.n_id[batch.edge_index], self.tiny.edge_index[:, batch.e_id]))
                n += batch.batch_size
            self.assertEqual(n, 12)

    # -- test_neighbor_loader_input_id -------------------------------------------

    def test_neighbor_loader_input_id(self):
        # PyG's case is heterogeneous; its rule (a boolean mask's input_id is
        # the node id) applies to homogeneous graphs alike.
        mask = torch.zeros(26, dtype=torch.bool)
        mask[1:10] = True
        with self.nl(self.tiny, input_nodes=mask, batch_size=2, num_neighbors=[2, 2]) as loader:
            got = [batch.input_id.tolist() for batch in loader]
        self.assertEqual(got, [[2 * i + 1, 2 * i + 2] for i in range(4)] + [[9]])

    # -- test_edge_level_temporal_homo_neighbor_loader ----------------------------

    def test_edge_level_temporal_homo_neighbor_loader(self):
        # PyG's graph and edge times; loaderd imports them (npz member
        # edge_time, in the file's CSR order) and batches carry no
        # edge_time: data.edge_time[batch.e_id] stands in for it.
        edge_index = np.array([[0, 1, 1, 2, 2, 3, 3, 4], [1, 0, 2, 1, 3, 2, 4, 3]])
        edge_time = np.arange(edge_index.shape[1])
        order = np.lexsort((edge_index[0], edge_index[1]))  # CSR: row dst, sorted by src
        src, dst, edge_time = edge_index[0][order], edge_index[1][order], edge_time[order]
        indptr = np.zeros(6, dtype=np.int64)
        np.add.at(indptr, dst + 1, 1)
        npz = os.path.join(self.tmp, "edge_time.npz")
        np.savez(npz, adj_indptr=np.cumsum(indptr), adj_indices=src, adj_shape=np.array([5, 5]),
                 attr_matrix=np.eye(5, dtype=np.float32), labels=np.arange(5) % 2, edge_time=edge_time)
        import_npz(npz, os.path.join(self.tmp, "edge_time"))
        daemon = Daemon(os.path.join(self.tmp, "edge_time"), "--gpu=false")
        try:
            data = Data(num_nodes=5, edge_index=torch.from_numpy(np.stack([src, dst])),
                        edge_time=torch.from_numpy(edge_time))
            loader = self.nl(data, num_neighbors=[-1, -1], input_time=torch.tensor([4, 4, 4, 4, 4]),
                             time_attr="edge_time", batch_size=1, daemon=daemon)
            with loader:
                batches = 0
                for batch in loader:
                    batch_edge_time = data.edge_time[batch.e_id]
                    self.assertEqual(batch_edge_time.numel(), batch.num_edges)
                    if batch_edge_time.numel() > 0:
                        self.assertLessEqual(int(batch_edge_time.max()), 4)
                    batches += 1
                self.assertEqual(batches, 5)
        finally:
            daemon.stop()

    # -- out of scope: the options raise ValueError ------------------------------

    def test_out_of_scope_options_raise(self):
        for kw in (dict(weight_attr="edge_weight"), dict(subgraph_type="induced"), dict(directed=False),
                   dict(replace=True)):
            with self.subTest(kw=kw):
                with self.assertRaises(ValueError):
                    self.nl(self.rand, num_neighbors=[1] * 2, batch_size=1, **kw)


if __name__ == "__main__":
    unittest.main()

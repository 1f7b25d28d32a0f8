"""Edge features served by loaderd: batch.edge_weight and batch.edge_attr are
the rows of batch.e_id (the dataset's edges in CSR order), as PyG's
NeighborLoader gives data.edge_attr[e_id]."""

import os
import shutil
import subprocess
import tempfile
import unittest

import numpy as np
import torch

from test_loader import LOADERD, Daemon  # also puts python/ on sys.path
import gnnloader  # noqa: E402


class EdgeFeaturesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists(LOADERD):
            raise unittest.SkipTest(f"{LOADERD} not built")
        cls.tmp = tempfile.mkdtemp(prefix="gnnloader-edges-")
        # A graph whose CSR is known: row dst lists its in-neighbours sorted,
        # and adj_data holds each edge's CSR position as its weight, so a
        # served edge_weight must equal e_id.
        g = torch.Generator().manual_seed(7)
        n, m = 200, 1500
        src = torch.randint(0, n, (m,), generator=g).numpy()
        dst = torch.randint(0, n, (m,), generator=g).numpy()
        order = np.lexsort((src, dst))
        src, dst = src[order], dst[order]
        keep = np.ones(m, dtype=bool)
        keep[1:] = (src[1:] != src[:-1]) | (dst[1:] != dst[:-1])  # no duplicate edges
        src, dst = src[keep], dst[keep]
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.add.at(indptr, dst + 1, 1)
        cls.weights = np.arange(len(src), dtype=np.float32) * 0.5
        npz = os.path.join(cls.tmp, "g.npz")
        np.savez(npz, adj_indptr=np.cumsum(indptr), adj_indices=src.astype(np.int64), adj_data=cls.weights,
                 adj_shape=np.array([n, n]), attr_matrix=np.eye(n, 8, dtype=np.float32),
                 labels=np.arange(n) % 4)
        subprocess.run([LOADERD, "import", "npz", npz, "--edge-weights", "--out", os.path.join(cls.tmp, "g")],
                       check=True, capture_output=True)
        subprocess.run([LOADERD, "gen", "--like", "cora", "--scale", "0.3", "--edge-dim", "3", "--edge-dtype",
                        "int64", "--out", os.path.join(cls.tmp, "attr")], check=True, capture_output=True)
        cls.weighted = Daemon(os.path.join(cls.tmp, "g"), "--gpu=false")
        cls.attr = Daemon(os.path.join(cls.tmp, "attr"), "--gpu=false")

    @classmethod
    def tearDownClass(cls):
        cls.weighted.stop()
        cls.attr.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_edge_weight_is_the_row_of_e_id(self):
        w = torch.from_numpy(self.weights)
        with gnnloader.NeighborLoader(self.weighted.socket, [4, 3], batch_size=16, shuffle=True) as loader:
            batches = 0
            for batch in loader:
                self.assertEqual(batch.edge_weight.dtype, torch.float32)
                self.assertEqual(batch.edge_weight.shape, (batch.edge_index.size(1),))
                self.assertTrue(torch.equal(batch.edge_weight, w[batch.e_id]))
                batches += 1
            self.assertEqual(batches, len(loader))
            self.assertFalse(hasattr(batch, "edge_attr") and batch.edge_attr is not None,
                             "a dataset without edge_attr served one")

    def test_edge_attr_follows_e_id(self):
        seen = {}
        with gnnloader.NeighborLoader(self.attr.socket, [5, 5], batch_size=32, shuffle=True) as loader:
            for batch in loader:
                ea = batch.edge_attr
                self.assertEqual(ea.dtype, torch.int64)
                self.assertEqual(tuple(ea.shape), (batch.edge_index.size(1), 3))
                for e, row in zip(batch.e_id.tolist(), ea.tolist()):
                    # The same edge always carries the same attributes.
                    self.assertEqual(seen.setdefault(e, row), row)
        self.assertGreater(len(seen), 100)


if __name__ == "__main__":
    unittest.main()

"""Node features of any fixed-width dtype come through loaderd as they are
stored: an npz imported with int64 or uint8 features gives batches whose x
has that dtype and equals the imported rows of n_id; float64 ones are stored
as float32 by `import npz` (docs/datasets.md), and a dataset generated with
float64 features serves float64."""

import os
import shutil
import subprocess
import tempfile
import unittest

import numpy as np
import torch

from test_loader import LOADERD, Daemon  # also puts python/ on sys.path
import gnnloader  # noqa: E402

# npz element type -> the dtype the dataset stores and batches carry
DTYPES = {"int64": (np.int64, torch.int64), "uint8": (np.uint8, torch.uint8), "float64": (np.float64, torch.float32)}


class FeatureDTypesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists(LOADERD):
            raise unittest.SkipTest(f"{LOADERD} not built")
        cls.tmp = tempfile.mkdtemp(prefix="gnnloader-dtypes-")
        rng = np.random.default_rng(3)
        n = 300
        dst = rng.integers(0, n, 2000)
        src = rng.integers(0, n, 2000)
        order = np.lexsort((src, dst))
        src, dst = src[order], dst[order]
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.add.at(indptr, dst + 1, 1)
        cls.attrs, cls.daemons = {}, {}
        for name, (npt, _) in DTYPES.items():
            if npt is np.float64:
                attr = rng.standard_normal((n, 5))
            else:
                attr = rng.integers(0, 200 if npt is np.uint8 else 1 << 40, (n, 5)).astype(npt)
            cls.attrs[name] = attr
            npz = os.path.join(cls.tmp, f"{name}.npz")
            np.savez(npz, adj_indptr=np.cumsum(indptr), adj_indices=src.astype(np.int64), adj_shape=np.array([n, n]),
                     attr_matrix=attr, labels=np.arange(n) % 3)
            out = os.path.join(cls.tmp, name)
            subprocess.run([LOADERD, "import", "npz", npz, "--out", out], check=True, capture_output=True)
            cls.daemons[name] = Daemon(out, "--gpu=false")

    @classmethod
    def tearDownClass(cls):
        for d in cls.daemons.values():
            d.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_x_has_the_stored_dtype_and_rows(self):
        for name, (_, tdt) in DTYPES.items():
            with self.subTest(dtype=name):
                attr = torch.from_numpy(self.attrs[name]).to(tdt)
                with gnnloader.NeighborLoader(self.daemons[name].socket, [4, 2], batch_size=32, shuffle=True) as nl:
                    self.assertEqual(nl.loader.dataset.feature_dtype, str(tdt).removeprefix("torch."))
                    for i, batch in enumerate(nl):
                        self.assertEqual(batch.x.dtype, tdt)
                        self.assertTrue(torch.equal(batch.x, attr[batch.n_id]), f"batch {i}: x is not attr[n_id]")

    def test_generated_float64_and_bool(self):
        for dt, tdt in (("float64", torch.float64), ("bool", torch.bool)):
            with self.subTest(dtype=dt):
                out = os.path.join(self.tmp, f"gen-{dt}")
                subprocess.run([LOADERD, "gen", "--like", "cora", "--scale", "0.2", "--dtype", dt, "--out", out],
                               check=True, capture_output=True)
                d = Daemon(out, "--gpu=false")
                try:
                    with gnnloader.NeighborLoader(d.socket, [3], batch_size=16) as nl:
                        b = next(iter(nl))
                        self.assertEqual(b.x.dtype, tdt)
                        self.assertEqual(b.x.size(0), b.n_id.numel())
                        self.assertGreater(b.x.float().abs().sum().item(), 0)
                finally:
                    d.stop()


if __name__ == "__main__":
    unittest.main()

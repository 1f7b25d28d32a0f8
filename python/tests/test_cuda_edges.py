"""Edge features, link batches and heterogeneous batches on the CUDA path: a
loaderd with its GPU backend over generated datasets (edge_attr,
edge_weight and link splits; mag's node and edge types); every tensor of a
cuda:0 loader equals the CPU path's.

Skipped without CUDA, unless GNNLOADER_REQUIRE_GPU=1 (scripts/gpu-check.sh).
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import torch

sys.path.insert(0, os.path.dirname(__file__))
from test_cuda import require_gpu  # noqa: E402
from test_loader import LOADERD, Daemon  # noqa: E402

import gnnloader  # noqa: E402


def tensors(batch):
    """The batch's tensors by name (a PyG Data or gnnloader's Batch)."""
    keys = batch.keys() if callable(getattr(batch, "keys", None)) else batch.keys
    return {k: batch[k] for k in keys if isinstance(batch[k], torch.Tensor)}


class CudaEdgesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_gpu()
        cls.tmp = tempfile.mkdtemp(prefix="gnnloader-cuda-edges-")
        cls.data = os.path.join(cls.tmp, "citation2")
        out = subprocess.run([LOADERD, "gen", "--like", "citation2", "--scale", "0.002", "--seed", "4",
                              "--edge-dim", "3", "--edge-dtype", "int64", "--edge-weights", "--time", "--out", cls.data],
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(out.stderr)
        cls.daemon = Daemon(cls.data, "--gpus", "0", "--gpu-slot-memory", "1GiB")

    @classmethod
    def tearDownClass(cls):
        code = cls.daemon.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)
        if code != 0:
            raise AssertionError(f"loaderd exited {code}")

    def compare(self, make, want):
        n = 0
        with make("cuda:0") as g, make("cpu") as c:
            for bg, bc in zip(g, c):
                tg, tc = tensors(bg), tensors(bc)
                self.assertEqual(sorted(tg), sorted(tc))
                for name in want:
                    self.assertIn(name, tg)
                for name, t in tg.items():
                    self.assertEqual(t.device, torch.device("cuda", 0), name)
                    self.assertTrue(torch.equal(t.cpu(), tc[name]), f"batch {n}: {name} differs")
                n += 1
        self.assertGreater(n, 0)
        return n

    def test_edge_features_on_cuda(self):
        n = self.compare(lambda dev: gnnloader.NeighborLoader(self.daemon.socket, [5, 3], "train", batch_size=64,
                                                              device=dev, seed=3),
                         ["x", "edge_index", "e_id", "edge_attr", "edge_weight"])
        print(f"\n{n} batches with edge_attr/edge_weight on cuda:0 equal to the CPU path's", file=sys.stderr)

    def test_disjoint_and_temporal_on_cuda(self):
        for kw in (dict(disjoint=True), dict(time_attr="node_time"), dict(time_attr="node_time", temporal_strategy="last")):
            with self.subTest(**kw):
                n = self.compare(lambda dev: gnnloader.NeighborLoader(self.daemon.socket, [5, 3], "train", batch_size=64,
                                                                      device=dev, seed=3, **kw),
                                 ["x", "edge_index", "batch", "edge_attr"])
                print(f"\n{n} {kw} batches on cuda:0 equal to the CPU path's", file=sys.stderr)

    def test_link_batches_on_cuda(self):
        for neg in ("binary", "triplet"):
            with self.subTest(neg=neg):
                n = self.compare(lambda dev: gnnloader.LinkNeighborLoader(
                    self.daemon.socket, [5, 3], edge_label_index="valid", batch_size=32, device=dev, seed=3,
                    neg_sampling=dict(mode=neg, amount=2)),
                    ["x", "edge_index", "edge_attr"] + (["edge_label_index"] if neg == "binary" else ["dst_neg_index"]))
                print(f"\n{n} {neg} link batches on cuda:0 equal to the CPU path's", file=sys.stderr)


def hetero_tensors(batch):
    """A heterogeneous batch's tensors by (store, name) (PyG HeteroData or
    gnnloader's HeteroBatch)."""
    out = {}
    for key, store in list(batch.node_items()) + list(batch.edge_items()):
        for name, v in store.items():
            if isinstance(v, torch.Tensor):
                out[(key, name)] = v
    return out


class CudaHeteroTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_gpu()
        cls.daemon = Daemon("synthetic:mag:0.005:1", "--gpus", "0", "--gpu-slot-memory", "1GiB")

    @classmethod
    def tearDownClass(cls):
        code = cls.daemon.stop()
        if code != 0:
            raise AssertionError(f"loaderd exited {code}")

    def test_hetero_batches_on_cuda(self):
        def make(dev):
            return gnnloader.NeighborLoader(self.daemon.socket, [5, 3], ("paper", "train"), batch_size=64,
                                            device=dev, seed=3)
        n = 0
        with make("cuda:0") as g, make("cpu") as c:
            for bg, bc in zip(g, c):
                tg, tc = hetero_tensors(bg), hetero_tensors(bc)
                self.assertEqual(sorted(map(str, tg)), sorted(map(str, tc)))
                for want in (("paper", "x"), ("paper", "y"), ("author", "x"), (("author", "writes", "paper"), "edge_index")):
                    self.assertIn(want, tg)
                for key, t in tg.items():
                    self.assertEqual(t.device, torch.device("cuda", 0), key)
                    self.assertTrue(torch.equal(t.cpu(), tc[key]), f"batch {n}: {key} differs")
                n += 1
        self.assertGreater(n, 0)
        print(f"\n{n} heterogeneous batches on cuda:0 equal to the CPU path's", file=sys.stderr)


if __name__ == "__main__":
    unittest.main()

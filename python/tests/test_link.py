"""gnnloader.LinkNeighborLoader against a real loaderd (CPU path).

The dataset is a small OGB link-property directory written here (npz
layout: raw/data.npz, split/time/{train,valid}.npz with ogbl-citation2's
keys) and imported with `loaderd import ogb`, so the test knows every pair
of every link split and every feature row. PyG is not needed.
"""

import os
import shutil
import subprocess
import tempfile
import unittest

import numpy as np
import torch

from test_loader import LOADERD, Daemon  # also puts python/ on sys.path
import gnnloader  # noqa: E402


class LinkNeighborLoaderTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists(LOADERD):
            raise unittest.SkipTest(f"{LOADERD} not built (scripts/test.sh builds it)")
        cls.tmp = tempfile.mkdtemp(prefix="gnnloader-link-")
        g = torch.Generator().manual_seed(3)
        n, m = 200, 1200
        cls.n = n
        src = torch.randint(0, n, (m,), generator=g)
        dst = torch.randint(0, n, (m,), generator=g)
        cls.x = torch.randn(n, 8, generator=g)
        raw = os.path.join(cls.tmp, "ogbl", "raw")
        split = os.path.join(cls.tmp, "ogbl", "split", "time")
        os.makedirs(raw)
        os.makedirs(split)
        np.savez(os.path.join(raw, "data.npz"), edge_index=torch.stack([src, dst]).numpy(),
                 node_feat=cls.x.numpy(), num_nodes_list=np.array([n]), num_edges_list=np.array([m]))
        cls.train = torch.stack([src[:700], dst[:700]])
        cls.valid = torch.randint(0, n, (2, 40), generator=g)
        np.savez(os.path.join(split, "train.npz"), source_node=cls.train[0].numpy(), target_node=cls.train[1].numpy())
        np.savez(os.path.join(split, "valid.npz"), source_node=cls.valid[0].numpy(), target_node=cls.valid[1].numpy(),
                 target_node_neg=torch.randint(0, n, (40, 5), generator=g).numpy())
        cls.data = os.path.join(cls.tmp, "link")
        out = subprocess.run([LOADERD, "import", "ogb", os.path.join(cls.tmp, "ogbl"), "--edge-direction", "out",
                              "--out", cls.data],
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(out.stderr)
        cls.daemon = Daemon(cls.data, "--gpu=false")

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_binary_over_a_split_serves_every_pair_once(self):
        seen = torch.zeros(700, dtype=torch.int64)
        with gnnloader.LinkNeighborLoader(self.daemon.socket, [4, 3], edge_label_index="train",
                                          neg_sampling=dict(mode="binary", amount=2), batch_size=64,
                                          shuffle=True) as loader:
            self.assertEqual(len(loader), 11)
            self.assertEqual(len(loader.dataset), 700)
            for batch in loader:
                B = batch.input_id.numel()
                eli, lab, nid = batch.edge_label_index, batch.edge_label, batch.n_id
                self.assertEqual(tuple(eli.shape), (2, 3 * B))
                self.assertEqual(lab.dtype, torch.float32)
                self.assertTrue(torch.equal(lab, torch.cat([torch.ones(B), torch.zeros(2 * B)])))
                self.assertTrue(torch.equal(nid[eli[:, :B]], self.train[:, batch.input_id]))
                self.assertTrue(int(eli.min()) >= 0 and int(eli.max()) < nid.numel())
                self.assertTrue(torch.equal(batch.x, self.x[nid]))
                # the seed nodes are the unique ends, first in n_id
                ends = nid[eli.reshape(-1)].unique()
                self.assertTrue(torch.equal(nid[:ends.numel()], ends))
                self.assertEqual(batch.num_sampled_nodes[0], ends.numel())
                self.assertEqual(batch.edge_index.size(1), sum(batch.num_sampled_edges))
                seen[batch.input_id] += 1
        self.assertTrue(bool((seen == 1).all()), "every positive pair once per epoch")

    def test_two_ranks_split_the_pairs(self):
        seen = []
        for rank in range(2):
            with gnnloader.LinkNeighborLoader(self.daemon.socket, [2], edge_label_index="train", batch_size=100,
                                              shuffle=True, seed=5, rank=rank, world_size=2) as loader:
                for batch in loader:
                    self.assertNotIn("edge_label", batch)  # no labels, no negatives: none, as PyG
                    seen.append(batch.input_id.clone())
        self.assertTrue(torch.equal(torch.cat(seen).sort().values, torch.arange(700)))

    def test_triplet_over_a_tensor(self):
        pairs = self.valid
        with gnnloader.LinkNeighborLoader(self.daemon.socket, [3], edge_label_index=pairs,
                                          neg_sampling=gnnloader.link.NegativeSampling("triplet", 3),
                                          batch_size=16) as loader:
            total = 0
            for batch in loader:
                B = batch.input_id.numel()
                nid = batch.n_id
                self.assertNotIn("edge_label_index", batch)
                self.assertEqual(tuple(batch.dst_neg_index.shape), (B, 3))
                self.assertTrue(torch.equal(nid[batch.src_index], pairs[0, batch.input_id]))
                self.assertTrue(torch.equal(nid[batch.dst_pos_index], pairs[1, batch.input_id]))
                self.assertTrue(int(batch.dst_neg_index.max()) < nid.numel())
                total += B
            self.assertEqual(total, 40)
        with gnnloader.LinkNeighborLoader(self.daemon.socket, [3], edge_label_index="val",
                                          neg_sampling="triplet", batch_size=16) as loader:
            batch = next(iter(loader))
            self.assertEqual(tuple(batch.dst_neg_index.shape), (16,))  # amount 1: squeezed, as PyG
            self.assertTrue(torch.equal(batch.n_id[batch.src_index], self.valid[0, batch.input_id]))

    def test_given_labels_follow_pygs_rule(self):
        labels = torch.arange(40) % 3  # smallest 0: shifted by one under binary sampling
        with gnnloader.LinkNeighborLoader(self.daemon.socket, [2], self.valid, labels, neg_sampling_ratio=0.5,
                                          batch_size=10) as loader:
            for batch in loader:
                B = batch.input_id.numel()
                self.assertEqual(batch.edge_label_index.size(1), B + (B + 1) // 2)  # ceil(B * 0.5)
                self.assertEqual(batch.edge_label.dtype, torch.int64)
                self.assertTrue(torch.equal(batch.edge_label[:B], labels[batch.input_id] + 1))
                self.assertEqual(int(batch.edge_label[B:].abs().sum()), 0)
        with gnnloader.LinkNeighborLoader(self.daemon.socket, [2], self.valid, labels, batch_size=10) as loader:
            batch = next(iter(loader))
            self.assertTrue(torch.equal(batch.edge_label, labels[batch.input_id]))  # no negatives: as given

    def test_call_takes_positions_as_pygs(self):
        # PyG's LinkLoader.__call__(index): positions into edge_label_index,
        # with the loader's negatives and labels; input_id is the positions.
        labels = torch.arange(40) % 3
        with gnnloader.LinkNeighborLoader(self.daemon.socket, [3], self.valid, labels, neg_sampling="binary",
                                          batch_size=8) as loader:
            idx = torch.tensor([3, 7, 11])
            batch = loader(idx)
            self.assertTrue(torch.equal(batch.input_id, idx))
            self.assertEqual(batch.edge_label_index.size(1), 6)  # 3 positives, 3 negatives
            self.assertTrue(torch.equal(batch.n_id[batch.edge_label_index[:, :3]], self.valid[:, idx]))
            self.assertTrue(torch.equal(batch.edge_label[:3], labels[idx] + 1))
            self.assertEqual(int(batch.edge_label[3:].abs().sum()), 0)
            self.assertTrue(torch.equal(batch.x, self.x[batch.n_id]))
            self.assertEqual(len(list(loader)), 5)  # the loader's own epochs go on
            for bad in (torch.zeros(0, dtype=torch.long), torch.tensor([40]), torch.tensor([-1]), torch.tensor([0.5])):
                with self.assertRaises(ValueError):
                    loader(bad)
        with gnnloader.LinkNeighborLoader(self.daemon.socket, [3], "train", batch_size=8) as loader:
            with self.assertRaises(ValueError):  # a split's pairs stay in loaderd
                loader([0, 1])

    def test_multi_column_labels(self):
        labels = torch.stack([torch.arange(40), -torch.arange(40)], dim=1).float()
        with gnnloader.LinkNeighborLoader(self.daemon.socket, [2], self.valid, labels, batch_size=10) as loader:
            batch = next(iter(loader))
            self.assertEqual(tuple(batch.edge_label.shape), (batch.input_id.numel(), 2))
            self.assertTrue(torch.equal(batch.edge_label, labels[batch.input_id]))

    def test_unsupported_options_raise(self):
        s = self.daemon.socket
        for kw in (dict(edge_label_time=torch.zeros(700)), dict(replace=True), dict(disjoint=True),
                   dict(neg_sampling=dict(mode="binary", amount=1, weight=torch.ones(self.n))),
                   dict(neg_sampling=dict(mode="triplet", amount=1.5)),
                   dict(neg_sampling=dict(mode="ternary")),
                   dict(neg_sampling="triplet", edge_label=torch.ones(700)),
                   dict(edge_label_index=torch.zeros(3, 4, dtype=torch.long))):
            with self.subTest(kw=list(kw)):
                kw.setdefault("edge_label_index", "train")
                with self.assertRaises(ValueError):
                    gnnloader.LinkNeighborLoader(s, [2], batch_size=4, **kw)
        with self.assertRaises(ValueError):  # this daemon runs without its GPU path (--gpu=false)
            gnnloader.LinkNeighborLoader(s, [2], "train", batch_size=4, device="cuda:0")
        with self.assertRaises(ValueError):
            gnnloader.LinkNeighborLoader(s, [2], "nope", batch_size=4)
        with self.assertRaises(ValueError):  # a link split is not a node split
            gnnloader.NeighborLoader(s, [2], "link:train", batch_size=4)
        self.assertEqual(gnnloader.connect(s).splits["link:train"], 700)


if __name__ == "__main__":
    unittest.main()

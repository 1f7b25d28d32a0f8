"""gnnloader.NeighborLoader (PyG's argument names) against a real loaderd
serving Cora; see test_loader.py for the daemon and the data checks."""

import os
import tempfile
import unittest
import warnings
from unittest import mock

import torch

import test_loader
import gnnloader


class NeighborLoaderTest(test_loader.CoraDaemonCase):
    """Uses LoaderTest's daemon and batch checks, not its tests."""

    check_batch = test_loader.LoaderTest.check_batch

    def nl(self, input_nodes="train", **kw):
        args = dict(num_neighbors=[10, 5], batch_size=64, input_nodes=input_nodes, shuffle=True, seed=3)
        args.update(kw)
        return gnnloader.NeighborLoader(self.daemon.socket, **args)

    def seeds_of(self, loader):
        seeds = []
        for b in loader:
            self.check_batch(b)
            self.assertEqual(len(b.num_sampled_nodes), 3)
            seeds += b.n_id[:b.batch_size].tolist()
        return seeds

    def test_split_name_like_pyg(self):
        with self.nl() as ld:
            self.assertEqual(len(ld), (1626 + 63) // 64)
            self.assertEqual(ld.dataset.num_nodes, 2708)
            for _ in range(2):
                seeds = self.seeds_of(ld)
                self.assertEqual(len(seeds), 1626)
                self.assertEqual(len(set(seeds)), 1626)

    def test_val_alias_and_drop_last(self):
        with self.nl("val", drop_last=True, batch_size=100) as ld:
            n = self.daemon_split("valid")
            self.assertEqual(len(ld), n // 100)
            self.assertEqual(len(self.seeds_of(ld)), n // 100 * 100)

    def daemon_split(self, name):
        return gnnloader.connect(self.daemon.socket).splits[name]

    def test_connect_and_data_conventions(self):
        remote = gnnloader.connect(self.daemon.socket)
        self.assertEqual((remote.num_nodes, remote.num_features, remote.num_classes), (2708, 1433, 7))
        self.assertEqual(remote.splits["train"], 1626)
        # A Remote, an object with the right num_nodes plus socket=, or $GNNLOADER_SOCKET.
        class FakeData:
            num_nodes = 2708
        with gnnloader.NeighborLoader(remote, num_neighbors=[5], batch_size=512, input_nodes="train") as ld:
            self.assertEqual(len(ld), 4)
        with gnnloader.NeighborLoader(FakeData(), num_neighbors=[5], batch_size=512, input_nodes="train",
                                      socket=self.daemon.socket) as ld:
            self.assertEqual(len(ld), 4)
        with mock.patch.dict(os.environ, {"GNNLOADER_SOCKET": self.daemon.socket}):
            with gnnloader.NeighborLoader(FakeData(), [5], input_nodes="test", batch_size=1000) as ld:
                self.assertEqual(len(ld), 1)
        FakeData.num_nodes = 100
        with self.assertRaisesRegex(ValueError, "100 nodes"):
            gnnloader.NeighborLoader(FakeData(), [5], input_nodes="train", socket=self.daemon.socket)
        with tempfile.TemporaryDirectory() as nothing, mock.patch.dict(os.environ, {"XDG_RUNTIME_DIR": nothing},
                                                                        clear=True):
            # No socket given, none in the environment: the default, where no daemon listens.
            with self.assertRaisesRegex(gnnloader.LoaderError, "default socket.*GNNLOADER_SOCKET"):
                gnnloader.NeighborLoader(FakeData(), [5], input_nodes="train")

    def test_pyg_options(self):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            ld = self.nl(num_workers=8, persistent_workers=True, pin_memory=True, replace=False)
            ld.close()
        msgs = [str(x.message) for x in w]
        for k in ("num_workers", "persistent_workers", "pin_memory"):
            self.assertTrue(any(f"ignores {k}=" in m for m in msgs), msgs)
        with self.assertRaisesRegex(ValueError, "replace=True"):
            self.nl(replace=True)
        with self.assertRaisesRegex(ValueError, "input_time"):
            self.nl(input_time=torch.zeros(2708))  # without time_attr, as PyG
        with self.assertRaisesRegex(ValueError, "weight_attr"):
            self.nl(weight_attr="w")
        with self.assertRaises(TypeError):
            self.nl(no_such_option=1)
        with self.assertRaisesRegex(ValueError, "heterogeneous"):
            self.nl(num_neighbors={("a", "to", "b"): [5]})
        with self.assertRaisesRegex(gnnloader.LoaderError, "no split"):
            self.nl("nope")

    def test_transform_and_rank(self):
        seen = []
        with self.nl(transform=lambda b: seen.append(b.batch_size) or b, rank=1, world_size=2) as ld:
            n = sum(b.batch_size for b in ld)
        self.assertEqual(sum(seen), n)
        self.assertEqual(n, 1626 // 2)

    def test_tensor_of_ids(self):
        ids = torch.tensor([5, 2707, 0, 17, 17, 3, 250, 9, 1, 42])
        with self.nl(ids, batch_size=4, shuffle=False) as ld:
            self.assertEqual(len(ld), 3)
            for _ in range(2):  # PyG order when not shuffled, repeats kept
                self.assertEqual(self.seeds_of(ld), ids.tolist())
        # (check_batch wants distinct n_id: a repeated seed within one batch
        # appears once per occurrence, so shuffle distinct ids here.)
        distinct = torch.tensor([5, 2707, 0, 17, 3, 250, 9, 1, 42, 77], dtype=torch.int32)
        seen = []
        for rank in range(2):
            with self.nl(distinct, batch_size=4, shuffle=True, rank=rank, world_size=2) as ld:
                seen += self.seeds_of(ld)
        self.assertEqual(sorted(seen), sorted(distinct.tolist()))

    def test_bool_mask_and_none(self):
        mask = torch.zeros(2708, dtype=torch.bool)
        mask[100:400] = True
        with self.nl(mask, batch_size=128) as ld:
            seeds = self.seeds_of(ld)
        self.assertEqual(sorted(seeds), list(range(100, 400)))
        with self.nl(None, batch_size=1024, num_neighbors=[2]) as ld:  # PyG: every node
            self.assertEqual(len(ld), 3)
            self.assertEqual(sorted(b for batch in ld for b in batch.n_id[:batch.batch_size].tolist()),
                             list(range(2708)))

    def test_bad_input_nodes(self):
        for nodes, text in [(torch.tensor([0, 2708]), "outside"), (torch.tensor([-1]), "outside"),
                            (torch.ones(10, dtype=torch.bool), "mask of 10"), (torch.zeros(2708, dtype=torch.bool), "no node"),
                            (torch.rand(3), "integers"), (torch.zeros(2, 2, dtype=torch.long), "one-dimensional"),
                            (("paper", torch.arange(3)), "heterogeneous")]:
            with self.subTest(text=text):
                with self.assertRaisesRegex(ValueError, text):
                    self.nl(nodes)
        # The daemon is fine afterwards.
        with self.nl(torch.arange(3)) as ld:
            self.assertEqual(len(ld), 1)

    def test_daemon_checks_seeds(self):
        # Past the client's own checks, loaderd refuses an id outside the graph
        # and the loader reports the daemon's reason.
        bad = lambda ds: torch.tensor([0, ds.num_nodes])  # noqa: E731
        with self.assertRaisesRegex(gnnloader.LoaderError, r"position 1 is outside \[0, 2708\)") as cm:
            gnnloader.pyg._SeedsLoader(self.daemon.socket, bad, batch_size=4, fanouts=[2])
        self.assertEqual(cm.exception.code, "bad_request")

    def test_rank_from_torch_distributed(self):
        with mock.patch("gnnloader.pyg._dist_rank_world", return_value=(1, 2)):
            with self.nl(seed=None) as ld:
                self.assertEqual((ld.rank, ld.world_size), (1, 2))
                self.assertEqual(ld.seed, 0)  # ranks must agree
            # A tensor of seeds is this rank's own, as in PyG.
            with self.nl(torch.arange(10)) as ld:
                self.assertEqual((ld.rank, ld.world_size), (0, 1))


if __name__ == "__main__":
    unittest.main()

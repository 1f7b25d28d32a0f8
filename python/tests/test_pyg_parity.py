"""PyG parity beyond PyG's own NeighborLoader tests (issue 17): argument
order, exceptions, loader(ids), loader.dataset, batch fields, against the
daemons of test_pyg_neighbor_loader (PyG itself is not needed)."""

import unittest
from unittest import mock

import torch

import test_pyg_neighbor_loader as cases  # also puts python/ on sys.path (through test_loader)
from test_pyg_neighbor_loader import Data
import gnnloader  # noqa: E402


class PyGParityTest(unittest.TestCase):
    """The rest of PyG's homogeneous NeighborLoader behaviour (issue 17):
    argument order, exceptions, loader(ids), loader.dataset, batch fields."""

    setUpClass = classmethod(cases.PyGNeighborLoaderCases.setUpClass.__func__)
    tearDownClass = classmethod(cases.PyGNeighborLoaderCases.tearDownClass.__func__)
    nl = cases.PyGNeighborLoaderCases.nl

    def test_batch_len_and_keys_are_the_fields(self):
        with self.nl(self.rand, [3], batch_size=16) as loader:
            batch = next(iter(loader))
            keys = set(batch.keys())
            self.assertEqual(keys, {"x", "y", "n_id", "edge_index", "e_id", "input_id", "batch_size",
                                    "num_sampled_nodes", "num_sampled_edges"})
            self.assertEqual(len(batch), len(keys))
            info = gnnloader.batch_info(batch)
            self.assertEqual((info.epoch, info.index), (0, 0))
            if isinstance(batch, gnnloader.Batch):  # PyG's Data has no attribute outside its store
                self.assertEqual(batch.slot, info.slot)
            self.assertIs(batch["x"], batch.x)
            self.assertEqual(batch.x.dtype, torch.float32)
            self.assertEqual(batch.e_id.dtype, torch.int64)
            self.assertEqual(batch.input_id.dtype, torch.int64)

    def test_pyg_data_batches_hold_only_fields(self):
        # A stand-in for torch_geometric.data.Data, whose attributes go to a
        # store (len and keys count them) unless their name starts with "_".
        class StoreData:
            def __init__(self, **kw):
                self.__dict__["_store"] = dict(kw)

            def __setattr__(self, key, value):
                if key.startswith("_"):
                    self.__dict__[key] = value
                else:
                    self._store[key] = value

            def __getattr__(self, key):
                try:
                    return self.__dict__["_store"][key]
                except KeyError:
                    raise AttributeError(key) from None

            def __getitem__(self, key):
                return self._store[key]

            def __len__(self):
                return len(self._store)

            def keys(self):
                return list(self._store)

        with mock.patch("gnnloader.loader._pyg_data", return_value=StoreData):
            mask = torch.zeros(100, dtype=torch.bool)
            mask[10:20] = True
            with self.nl(self.rand, [3], batch_size=4, input_nodes=mask) as loader:
                batch = next(iter(loader))
                self.assertIsInstance(batch, StoreData)
                self.assertEqual(len(batch), 9)
                self.assertNotIn("slot", batch.keys())
                self.assertEqual(gnnloader.batch_info(batch).index, 0)
                self.assertEqual(batch.input_id.tolist(), batch.n_id[:4].tolist())
                one = loader([0, 2])
                self.assertIsInstance(one, StoreData)
                self.assertEqual(one.input_id.tolist(), [10, 12])  # a mask's input_id: node ids

    def test_pyg_positional_order(self):
        seen = []
        args = (self.rand, [2, 2], torch.arange(40), None, False, "directional", False, "uniform", None, None,
                lambda b: seen.append(b.batch_size) or b, None, True, None, None, True)
        with gnnloader.NeighborLoader(*args, batch_size=16, socket=self.rand_daemon.socket) as loader:
            self.assertEqual(sum(b.batch_size for b in loader), 40)
        self.assertEqual(seen, [16, 16, 8])
        with self.assertRaisesRegex(ValueError, "replace"):
            gnnloader.NeighborLoader(self.rand, [2], None, None, True, socket=self.rand_daemon.socket)

    def test_input_id_and_dataset(self):
        ids = torch.tensor([50, 7, 7, 99, 3, 60, 61])
        with self.nl(self.rand, [2], input_nodes=ids, batch_size=3, shuffle=True) as loader:
            self.assertEqual(len(loader.dataset), 7)
            self.assertEqual(list(loader.dataset), list(range(7)))
            self.assertEqual(loader.dataset.num_nodes, 100)
            seen = []
            for b in loader:
                self.assertTrue(torch.equal(ids[b.input_id], b.n_id[:b.batch_size]))
                seen += b.input_id.tolist()
            self.assertEqual(sorted(seen), list(range(7)))
            batch = loader([4, 1, 2])  # positions in input_nodes
            self.assertEqual(batch.n_id[:3].tolist(), [3, 7, 7])
            self.assertEqual(batch.input_id.tolist(), [4, 1, 2])
            with self.assertRaises(ValueError):
                loader([7])
        with self.nl(self.rand, [2], batch_size=30) as loader:  # None: every node
            self.assertEqual(len(loader.dataset), 100)
        with self.nl(self.rand, [2], input_nodes="train", batch_size=8, shuffle=True) as loader:
            n = gnnloader.connect(self.rand_daemon.socket).splits["train"]
            self.assertEqual(len(loader.dataset), n)
            seen = [i for b in loader for i in b.input_id.tolist()]  # positions in the split
            self.assertEqual(sorted(seen), list(range(n)))
            with self.assertRaisesRegex(ValueError, "split name"):
                loader([0])
        with self.nl(self.rand, [2], input_nodes="val") as loader:  # PyG's name for loaderd's "valid"
            self.assertEqual(len(loader.dataset), gnnloader.connect(self.rand_daemon.socket).splits["valid"])

    def test_given_input_id(self):
        # PyG's NodeLoader input_id argument: the ids batches report.
        ids = torch.tensor([9, 4, 4, 70])
        given = torch.tensor([100, 101, 102, 103])
        with self.nl(self.rand, [2], input_nodes=ids, input_id=given, batch_size=3, shuffle=True) as loader:
            seen = []
            for b in loader:
                self.assertTrue(torch.equal(ids[b.input_id - 100], b.n_id[:b.batch_size]))
                seen += b.input_id.tolist()
            self.assertEqual(sorted(seen), [100, 101, 102, 103])
            self.assertEqual(loader([3, 0]).input_id.tolist(), [103, 100])
        with self.assertRaisesRegex(ValueError, "input_id has 2"):
            self.nl(self.rand, [2], input_nodes=ids, input_id=given[:2])

    def test_timeout_zero_blocks(self):
        for t in (0, None, 30):
            with self.nl(self.rand, [3], batch_size=50, timeout=t) as loader:
                self.assertEqual(sum(b.batch_size for b in loader), 100)
        with self.assertRaisesRegex(ValueError, "timeout"):
            self.nl(self.rand, [3], batch_size=50, timeout=-1)

    def test_fanout_zero_samples_nothing(self):
        with self.nl(self.rand, [0], batch_size=25) as loader:
            for b in loader:
                self.assertEqual(b.edge_index.size(), (2, 0))
                self.assertEqual(b.num_sampled_nodes, [25, 0])
                self.assertEqual(b.num_nodes, 25)
        with self.nl(self.rand, [3, 0], batch_size=25) as loader:
            for b in loader:
                self.assertEqual(b.num_sampled_edges[1], 0)
                self.assertEqual(b.num_sampled_nodes[2], 0)

    def test_bad_arguments_raise_value_error(self):
        for kw, text in [(dict(batch_size=0), "batch_size"), (dict(num_neighbors=[-2]), "num_neighbors"),
                         (dict(num_neighbors=[2] * 17), "fanouts"), (dict(slots=1000), "slots"),
                         (dict(input_nodes="nope"), "no split")]:
            with self.subTest(kw=kw):
                args = dict(num_neighbors=[2], batch_size=4)
                args.update(kw)
                with self.assertRaisesRegex(ValueError, text):
                    self.nl(self.rand, **args)
        # The daemon's refusals are LoaderErrors too, with its code.
        with self.assertRaises(gnnloader.LoaderError) as cm:
            self.nl(self.rand, [2], input_nodes="nope")
        self.assertEqual(cm.exception.code, "not_found")

    def test_data_is_checked_where_pyg_reads_it(self):
        for d, text in [(Data(num_nodes=99), "99 nodes"),
                        (Data(num_nodes=100, x=torch.arange(100)), "int64"),
                        (Data(num_nodes=100, x=torch.zeros(100, 3)), "width 1"),
                        (Data(num_nodes=100, x=torch.zeros(7, 1)), "shape")]:
            with self.subTest(text=text):
                with self.assertRaisesRegex(ValueError, text):
                    self.nl(d, [2], daemon=self.rand_daemon)
        # x as [N, 1] gives batches with x [n, 1]; as [N], x [n] (above).
        with self.nl(Data(num_nodes=100, x=torch.zeros(100, 1)), [2], batch_size=10, daemon=self.rand_daemon) as ld:
            self.assertEqual(next(iter(ld)).x.dim(), 2)


if __name__ == "__main__":
    unittest.main()

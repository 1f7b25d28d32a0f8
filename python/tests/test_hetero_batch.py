"""Heterogeneous batches built from a slot, without a daemon: a Loader's
_view over a fake Opened (regions named "<store>/<attr>") and a memory
mapping filled here, checked field by field; HeteroBatch's PyG-like
access; PyG's HeteroData when PyG is importable (the GPU machine has it);
and the hetero arguments (num_neighbors dicts, input types) resolved
against a fake Welcome."""

import copy
import dataclasses
import mmap
import pickle
import sys
import unittest
from pathlib import Path
from types import SimpleNamespace as NS

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from gnnloader import protocol as p  # noqa: E402
from gnnloader.errors import RequestError  # noqa: E402
from gnnloader.hetero import HeteroBatch, HeteroLayout, copy_batch, pyg_hetero_data  # noqa: E402
from gnnloader.loader import Loader  # noqa: E402
from gnnloader._hetero_args import FanoutSpec, resolve_open  # noqa: E402

WRITES, CITES, TOPIC = ("author", "writes", "paper"), ("paper", "cites", "paper"), ("paper", "has_topic", "topic")


def dataset():
    """A Welcome dataset with three node types (topic without features) and three edge types."""
    return NS(name="toy", num_nodes=60, node_types=[
        NS(name="paper", num_nodes=30, feature_dim=4, feature_dtype="float32", num_classes=5,
           splits=[NS(name="train", size=20), NS(name="valid", size=5)]),
        NS(name="author", num_nodes=20, feature_dim=3, feature_dtype="float16", num_classes=0, splits=[]),
        NS(name="topic", num_nodes=10, feature_dim=0, feature_dtype="", num_classes=0, splits=[])],
        edge_types=[NS(src=s, rel=r, dst=d) for s, r, d in (WRITES, CITES, TOPIC)], splits=[])


def fake_slot(counts):
    """An Opened with the hetero layout (capacity 8 along every count axis),
    a one-slot mapping and a BatchReady with these counts per region name."""
    specs = [("paper/x", "float32", [8, 4], 0), ("paper/y", "int64", [8], 0), ("paper/n_id", "int64", [8], 0),
             ("paper/input_id", "int64", [8], 0), ("author/x", "float16", [8, 3], 0),
             ("author/n_id", "int64", [8], 0), ("author__writes__paper/edge_index", "int64", [2, 8], 1),
             ("author__writes__paper/e_id", "int64", [8], 0), ("paper__cites__paper/edge_index", "int64", [2, 8], 1),
             ("paper__cites__paper/e_id", "int64", [8], 0)]
    regions, off = [], 0
    for name, dt, shape, axis in specs:
        nbytes = torch.empty(shape, dtype=getattr(torch, dt)).element_size() * torch.Size(shape).numel()
        regions.append(p.Region(name=name, offset=off, bytes=nbytes, dtype=dt, shape=shape, count_axis=axis))
        off += (nbytes + 127) // 128 * 128
    opened = p.Opened(num_batches=1, slots=1, slot_bytes=off, regions=regions, scalars=["batch_size"],
                      lists=["num_sampled_nodes/paper", "num_sampled_nodes/author",
                             "num_sampled_edges/author__writes__paper", "num_sampled_edges/paper__cites__paper"])
    msg = p.BatchReady(slot=0, epoch=3, index=7, counts=[counts[r.name] for r in regions], scalars=[2],
                       lists=[[2, 1, 0], [0, 3, 0], [4, 0], [1, 0]])
    return opened, mmap.mmap(-1, off), msg


def fill(mem, opened, values):
    """Writes tensors into the slot at their regions' offsets."""
    for r in opened.regions:
        if r.name in values:
            b = values[r.name].contiguous().view(torch.uint8).numpy().tobytes()
            mem[r.offset:r.offset + len(b)] = b


def view(opened, mem, msg, pyg):
    """Loader._view of a loader that never connected, over this slot."""
    ld = Loader.__new__(Loader)
    ld.opened, ld._mem, ld._cuda, ld.device, ld._shape_x = opened, mem, None, torch.device("cpu"), None
    ld._data_cls, ld._flat, ld._built = None, {}, {}
    ld._hetero = HeteroLayout(dataset(), "paper", 2, pyg_hetero_data() if pyg else None)
    return ld._view(msg)


COUNTS = {"paper/x": 3, "paper/y": 3, "paper/n_id": 3, "paper/input_id": 2, "author/x": 3, "author/n_id": 3,
          "author__writes__paper/edge_index": 4, "author__writes__paper/e_id": 4,
          "paper__cites__paper/edge_index": 1, "paper__cites__paper/e_id": 1}
VALUES = {"paper/x": torch.arange(12, dtype=torch.float32).view(3, 4), "paper/y": torch.tensor([4, 0, 2]),
          "paper/n_id": torch.tensor([17, 3, 29]), "paper/input_id": torch.tensor([5, 6]),
          "author/x": torch.tensor([[1.5, 2, 3], [4, 5, 6], [7, 8, 9.5]], dtype=torch.float16),
          "author/n_id": torch.tensor([19, 0, 4]),
          "author__writes__paper/edge_index": torch.tensor([[0, 1, 2, 0], [0, 0, 1, 1]]),
          "author__writes__paper/e_id": torch.tensor([10, 11, 40, 41]),
          "paper__cites__paper/edge_index": torch.tensor([[2], [0]]),
          "paper__cites__paper/e_id": torch.tensor([33])}


class HeteroViewTest(unittest.TestCase):
    def check(self, b):
        self.assertEqual(b.node_types, ["paper", "author", "topic"])
        self.assertEqual(b.edge_types, [WRITES, CITES, TOPIC])
        self.assertEqual(b.metadata(), (["paper", "author", "topic"], [WRITES, CITES, TOPIC]))
        for name, want in VALUES.items():
            store, attr = name.split("/")
            key = tuple(store.split("__")) if "__" in store else store
            got = b[key][attr]
            self.assertEqual(got.dtype, want.dtype, name)
            self.assertTrue(torch.equal(got, want), f"{name}: {got} != {want}")
        self.assertEqual(b["paper"].batch_size, 2)
        self.assertNotIn("batch_size", b["author"].keys())
        self.assertEqual(b["paper"].num_sampled_nodes, [2, 1, 0])
        self.assertEqual(b.num_sampled_nodes_dict, {"paper": [2, 1, 0], "author": [0, 3, 0], "topic": [0, 0, 0]})
        self.assertEqual(b.num_sampled_edges_dict, {WRITES: [4, 0], CITES: [1, 0], TOPIC: [0, 0]})
        self.assertEqual(set(b.x_dict), {"paper", "author"})  # topic has no features
        self.assertEqual(set(b.edge_index_dict), {WRITES, CITES, TOPIC})
        self.assertIs(b["writes"], b[WRITES])  # a unique relation name
        self.assertIs(b["author", "paper"], b[WRITES])  # a unique (src, dst) pair
        # Types the daemon sent nothing for are there, empty, as in PyG's batches.
        self.assertEqual(tuple(b["topic"].n_id.shape), (0,))
        self.assertEqual(tuple(b[TOPIC].edge_index.shape), (2, 0))
        self.assertEqual(b[TOPIC].e_id.dtype, torch.int64)
        self.assertEqual(b["paper"].num_nodes, 3)
        self.assertEqual(b[WRITES].num_edges, 4)
        self.assertEqual(b.num_nodes, 6)
        self.assertEqual(b.num_edges, 5)
        self.assertEqual(set(b.keys()), {"x", "y", "n_id", "input_id", "batch_size", "num_sampled_nodes",
                                         "edge_index", "e_id", "num_sampled_edges"})
        self.assertEqual(len(b), 9)

    def test_hetero_batch_from_slot(self):
        opened, mem, msg = fake_slot(COUNTS)
        fill(mem, opened, VALUES)
        b = view(opened, mem, msg, pyg=False)
        self.assertIsInstance(b, HeteroBatch)
        self.check(b)
        self.assertEqual((b.epoch, b.index, b.slot), (3, 7, 0))
        # Zero-copy: the tensors are the slot, not copies of it.
        at = opened.region("paper/n_id").offset
        mem[at:at + 8] = (123).to_bytes(8, "little")
        self.assertEqual(int(b["paper"].n_id[0]), 123)
        kept = b.clone()
        mem[at:at + 8] = (5).to_bytes(8, "little")
        self.assertEqual(int(kept["paper"].n_id[0]), 123)
        self.assertEqual(int(b["paper"].n_id[0]), 5)
        self.assertEqual(kept.num_sampled_nodes_dict, b.num_sampled_nodes_dict)
        moved = b.to("cpu")
        self.assertIsInstance(moved, HeteroBatch)
        self.assertTrue(torch.equal(moved[WRITES].edge_index, VALUES["author__writes__paper/edge_index"]))

    def test_access_errors(self):
        b = HeteroBatch(["paper", "author"], [WRITES, ("author", "reviews", "paper")])
        b["paper"].x = torch.zeros(2, 3)
        with self.assertRaisesRegex(KeyError, "joins 2 edge types"):
            b["author", "paper"]  # two relations join them
        with self.assertRaisesRegex(KeyError, "venue"):
            b["venue"]
        with self.assertRaises(AttributeError):
            b.no_such_attribute
        with self.assertRaisesRegex(KeyError, "edge_attr"):
            b.edge_attr_dict
        with self.assertRaises(AttributeError):
            b.paper = 1  # a type, not an attribute
        b.note = "global"
        self.assertIn("note", b.keys())
        self.assertEqual(b["writes"].keys(), [])
        for c in (copy.deepcopy(b), pickle.loads(pickle.dumps(b))):  # as PyG's data objects, they copy
            self.assertTrue(torch.equal(c["paper"].x, b["paper"].x))
            self.assertEqual((c.note, c.edge_types), ("global", b.edge_types))

    def test_pyg_hetero_data(self):
        cls = pyg_hetero_data()
        if cls is None:
            self.skipTest("torch_geometric is not importable here (the GPU machine runs this case)")
        opened, mem, msg = fake_slot(COUNTS)
        fill(mem, opened, VALUES)
        b = view(opened, mem, msg, pyg=True)
        self.assertIsInstance(b, cls)
        self.check(b)
        c = copy_batch(b)
        self.assertIsInstance(c, cls)
        self.assertNotEqual(c["paper"].x.data_ptr(), b["paper"].x.data_ptr())
        self.assertTrue(torch.equal(c["paper"].x, b["paper"].x))


class FanoutsTest(unittest.TestCase):
    def open_req(self, **kw):
        return p.Open(split="train", batch_size=4, fanouts=[], **kw)

    def test_list_dict_and_default(self):
        ds = dataset()
        self.assertEqual(FanoutSpec.of([5, -1]).resolve([WRITES, CITES, TOPIC]), ([5, -1], []))
        spec = FanoutSpec.of({WRITES: [5, 2], "paper__cites__paper": [-1, 0], TOPIC: [1, 3]})
        fanouts, edge = spec.resolve([WRITES, CITES, TOPIC])
        self.assertEqual(edge, [5, -1, 1, 2, 0, 3])  # hop-major, Welcome's edge-type order
        self.assertEqual(fanouts, [-1, 3])
        req = resolve_open(self.open_req(input_type="paper"), ds, spec)
        self.assertEqual((req.fanouts, req.edge_fanouts, req.input_type), ([-1, 3], [5, -1, 1, 2, 0, 3], "paper"))
        pyg_like = NS(values={WRITES: [4]}, default=[1])  # PyG's NumNeighbors(values, default)
        self.assertEqual(FanoutSpec.of(pyg_like).resolve([WRITES, CITES, TOPIC]), ([4], [4, 1, 1]))

    def test_pyg_errors(self):
        with self.assertRaisesRegex(ValueError, "Missing number of neighbors for edge type"):
            FanoutSpec.of({WRITES: [5]}).resolve([WRITES, CITES])
        with self.assertRaisesRegex(ValueError, "Not all edge types specified in 'num_neighbors' exist"):
            FanoutSpec.of({("a", "b", "c"): [5], WRITES: [1]}).resolve([WRITES])
        with self.assertRaisesRegex(ValueError, "Number of hops must be the same"):
            FanoutSpec.of({WRITES: [5], CITES: [5, 5]})
        with self.assertRaisesRegex(ValueError, "not an edge type"):
            FanoutSpec.of({"writes": [5]})
        with self.assertRaisesRegex(ValueError, ">= -1"):
            FanoutSpec.of({WRITES: [5, -2]})
        with self.assertRaisesRegex(ValueError, ">= -1"):
            FanoutSpec.of([])
        with self.assertRaisesRegex(ValueError, ">= -1"):
            FanoutSpec.of([2.5])

    def test_input_type_checks(self):
        ds, homo = dataset(), NS(name="cora", node_types=[], edge_types=[], splits=[])
        with self.assertRaisesRegex(RequestError, "name the seed node type"):
            resolve_open(self.open_req(), ds, FanoutSpec.of([2]))
        with self.assertRaisesRegex(RequestError, "unknown node type 'venue'"):
            resolve_open(self.open_req(input_type="venue"), ds, FanoutSpec.of([2]))
        with self.assertRaisesRegex(ValueError, "heterogeneous"):
            resolve_open(self.open_req(input_type="paper"), homo, FanoutSpec.of([2]))
        with self.assertRaisesRegex(ValueError, "heterogeneous"):
            resolve_open(self.open_req(), homo, FanoutSpec.of({WRITES: [2]}))
        req = resolve_open(self.open_req(), homo, FanoutSpec.of([3, 2]))
        self.assertEqual((req.fanouts, req.edge_fanouts, req.input_type), ([3, 2], [], ""))
        self.assertTrue(dataclasses.is_dataclass(req))


if __name__ == "__main__":
    unittest.main()

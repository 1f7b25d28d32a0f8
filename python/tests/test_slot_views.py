"""Loader._view over a hand-made shared-memory slot ring: a batch's tensors
are slices of per-slot tensors made once (Loader._slot_views), zero-copy
views of the slot's current contents, cut to the batch's counts, and a
region whose capacity does not fit its bytes is refused."""
import mmap
import os
import sys
import unittest

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from gnnloader import protocol as p  # noqa: E402
from gnnloader.loader import Loader, LoaderError  # noqa: E402

SLOT = 1024


def ring(x_shape=(8, 4), x_bytes=None):
    """Two slots, each with x (float32 [8, 4]) and edge_index (int64 [2, 8],
    count axis 1)."""
    x_bytes = 4 * x_shape[0] * x_shape[1] if x_bytes is None else x_bytes
    regions = [p.Region(name="x", offset=0, bytes=x_bytes, dtype="float32", shape=list(x_shape), count_axis=0),
               p.Region(name="edge_index", offset=256, bytes=128, dtype="int64", shape=[2, 8], count_axis=1)]
    opened = p.Opened(num_batches=4, slots=2, slot_bytes=SLOT, regions=regions, scalars=[], lists=[])
    ld = Loader.__new__(Loader)
    ld.opened, ld._mem, ld._cuda, ld.device, ld._shape_x = opened, mmap.mmap(-1, 2 * SLOT), None, torch.device("cpu"), None
    ld._data_cls, ld._hetero, ld._flat, ld._built = None, None, {}, {}
    return ld


def put(ld, slot, offset, t):
    b = t.contiguous().view(torch.uint8).numpy().tobytes()
    at = slot * SLOT + offset
    ld._mem[at:at + len(b)] = b


class SlotViewsTest(unittest.TestCase):
    def test_batches_are_slices_of_the_slot(self):
        ld = ring()
        x = torch.arange(12, dtype=torch.float32).view(3, 4) + 100
        ei = torch.tensor([[0, 1, 2, 0, 1], [1, 2, 0, 0, 0]])
        put(ld, 1, 0, x)
        put(ld, 1, 256, ei)  # [2, 5] contiguous from the region's start
        b = ld._view(p.BatchReady(slot=1, epoch=0, index=0, counts=[3, 5]))
        self.assertTrue(torch.equal(b.x, x))
        self.assertTrue(torch.equal(b.edge_index, ei))
        views = ld._flat[1]
        # x counts along its first axis: its per-slot tensor has its shape,
        # and a batch is its first rows; edge_index is cut from a flat one.
        self.assertEqual([tuple(v[1].shape) for v in views], [(8, 4), (16,)])
        self.assertEqual([v[2] for v in views], [None, [2, 8]])
        for t, v in ((b.x, views[0][1]), (b.edge_index, views[1][1])):
            self.assertTrue(t.is_contiguous())
            self.assertEqual(t.data_ptr(), v.data_ptr())  # zero-copy, from the region's start
        # Per region: x [N, 4] counts along axis 0, edge_index [2, E] along axis 1.
        self.assertEqual([(v[0], v[3]) for v in views], [("x", 0), ("edge_index", 1)])
        self.assertNotIn(0, ld._flat)  # slot 0 not used yet
        # The next batch in that slot: the same per-slot tensors, the slot's
        # new contents (zero-copy), other counts.
        x2 = -torch.arange(20, dtype=torch.float32).view(5, 4)
        put(ld, 1, 0, x2)
        put(ld, 1, 256, torch.tensor([[4], [3]]))
        b2 = ld._view(p.BatchReady(slot=1, epoch=0, index=2, counts=[5, 1]))
        self.assertIs(ld._flat[1], views)
        self.assertTrue(torch.equal(b2.x, x2))
        self.assertTrue(torch.equal(b2.edge_index, torch.tensor([[4], [3]])))
        self.assertTrue(torch.equal(b.x, x2[:3]))  # the first batch's view sees the slot, as before
        # An empty batch and the other slot.
        b3 = ld._view(p.BatchReady(slot=0, epoch=0, index=1, counts=[0, 0]))
        self.assertEqual(tuple(b3.x.shape), (0, 4))
        self.assertEqual(tuple(b3.edge_index.shape), (2, 0))

    def test_a_build_outliving_its_connection_keeps_its_views_to_itself(self):
        """A receiver thread stalled in a build while the loader reconnects
        (which replaces _flat and the slot memory): the views it made of the
        old memory must not land in the new connection's dict, where every
        later batch of that slot would read the old mapping."""
        ld = ring()
        old = ld._flat
        real = torch.frombuffer

        def stalled(*a, **k):  # the reconnect happens in the middle of the build
            ld._flat, ld._mem = {}, mmap.mmap(-1, 2 * SLOT)
            return real(*a, **k)
        torch.frombuffer = stalled
        try:
            ld._build(p.BatchReady(slot=1, epoch=0, index=0, counts=[1, 1]))
        finally:
            torch.frombuffer = real
        self.assertEqual(ld._flat, {})
        self.assertIn(1, old)

    def test_a_hostile_batch_is_refused_on_either_thread(self):
        """A daemon announcing more rows than the slot holds (x holds 8): the
        receiver thread's build makes nothing of it, and the consumer's own
        raises bad_message, before any view; a build the receiver made for
        another batch of that slot is not yielded for it."""
        from gnnloader._connection import _weak_build
        ld = ring()
        ld._sock = None
        bad = p.BatchReady(slot=0, epoch=0, index=3, counts=[9, 1])
        self.assertIsNone(_weak_build(ld)(bad))
        ld._built[0] = (0, 2, "the build of batch 2")
        with self.assertRaises(LoaderError) as cm:
            ld._view(bad)
        self.assertEqual(cm.exception.code, "bad_message")
        self.assertEqual(ld._flat, {})  # refused before any view was made

    def test_capacity_beyond_the_region_is_refused(self):
        ld = ring(x_shape=(64, 4), x_bytes=128)  # 1024 bytes of capacity in 128
        with self.assertRaises(LoaderError) as cm:
            ld._view(p.BatchReady(slot=0, epoch=0, index=0, counts=[1, 1]))
        self.assertEqual(cm.exception.code, "bad_message")
        self.assertIn("needs 1024 bytes", str(cm.exception))


if __name__ == "__main__":
    unittest.main()

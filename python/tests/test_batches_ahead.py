"""Batches decoded and built a few at a time (_Connection._take_kept_batches):
when a read ahead holds the frames after a BatchReady, the loader decodes
them and builds their batches together, at most BATCHES_AHEAD, never reading
the socket for them; messages still come out one at a time and in order, an
error where its frame stands, and a real epoch gives the same batches."""
import collections
import socket
import threading
import time
import tracemalloc
import unittest

import torch

import test_release_hold
import gnnloader
from gnnloader import _connection
from gnnloader import protocol as p
from gnnloader.loader import Loader


def bare_loader(sock):
    """A Loader on one end of a socketpair, with only what _recv uses; its
    batches are ("built", index)."""
    ld = Loader.__new__(Loader)
    ld._sock, ld._rx, ld._cuda, ld.device = sock, None, None, torch.device("cpu")
    ld._ahead, ld._built, ld._releases, ld._fds = collections.deque(), {}, [], []
    ld._batches_ahead = _connection.BATCHES_AHEAD
    ld._send_lock = threading.Lock()
    ld.builds = []

    def build(m):
        ld.builds.append(m.index)
        if m.index == 666:
            raise gnnloader.LoaderError("a bad batch", code="bad_message")
        if m.index == 777 and not ld.builds.count(777) > 1:
            raise KeyboardInterrupt
        return ("built", m.index)
    ld._build = build
    return ld


def batch(i):
    return p.BatchReady(slot=i % 64, epoch=0, index=i, counts=[i])


class TakeKeptBatchesTest(unittest.TestCase):
    def setUp(self):
        self.a, self.b = socket.socketpair()
        self.b.settimeout(5)  # a test that would wait fails instead of hanging
        self.ld = bare_loader(self.b)
        reads = self.reads = []
        real = p.recv_with_fds

        def counted(sock, *args):
            reads.append(sock)
            return real(sock, *args)
        p.recv_with_fds = counted
        self.addCleanup(setattr, p, "recv_with_fds", real)

    def tearDown(self):
        self.a.close()
        self.b.close()

    def send(self, *msgs):
        self.a.sendall(b"".join(p.marshal(m) for m in msgs))

    def test_kept_frames_built_together_in_order(self):
        n = _connection.BATCHES_AHEAD + 4
        self.send(*[batch(i) for i in range(n)], p.EpochEnd(epoch=0, num_batches=n))
        first = self.ld._recv()
        self.assertEqual(first.index, 0)
        self.assertEqual(len(self.reads), 1)  # one read took every frame
        # The next BATCHES_AHEAD decoded and built at once, no more.
        self.assertEqual(len(self.ld._ahead), _connection.BATCHES_AHEAD)
        self.assertEqual(self.ld.builds, list(range(1, _connection.BATCHES_AHEAD + 1)))
        self.assertEqual(self.ld._built[1], (0, 1, ("built", 1)))
        got = [first] + [self.ld._recv() for _ in range(n)]
        self.assertEqual([m.index for m in got[:n]], list(range(n)))
        self.assertIsInstance(got[n], p.EpochEnd)
        self.assertEqual(len(self.reads), 1)  # nothing read the socket again
        # Each built once; the first of each group of frames is left to _view.
        k = _connection.BATCHES_AHEAD + 1
        self.assertEqual(self.ld.builds, [i for i in range(n) if i % k])

    def test_error_raised_where_its_frame_stands(self):
        self.send(batch(0), batch(1), batch(2), p.Error(code=p.Code.INTERNAL, message="disk on fire"))
        self.assertEqual(self.ld._recv().index, 0)
        self.assertEqual(len(self.ld._ahead), 3)  # two batches and the error, decoded
        self.assertEqual(self.ld._recv().index, 1)
        self.assertEqual(self.ld._recv().index, 2)
        with self.assertRaises(gnnloader.LoaderError) as cm:
            self.ld._recv()
        self.assertIn("disk on fire", str(cm.exception))

    def test_a_batch_that_fails_to_build_is_left_to_its_turn(self):
        self.send(batch(0), batch(666), batch(2))
        self.assertEqual(self.ld._recv().index, 0)
        self.assertNotIn(666 % 64, self.ld._built)  # _view builds it again, and raises there
        self.assertIn(2, self.ld._built)
        self.assertEqual(self.ld._recv().index, 666)

    def test_last_words_decoded_ahead_are_a_failed_sends_error(self):
        # The daemon's Error, read and decoded ahead, is what a send that
        # meets its closed socket raises (not a bare broken pipe).
        self.send(batch(0), p.Error(code=p.Code.INTERNAL, message="disk on fire"))
        self.assertEqual(self.ld._recv().index, 0)
        self.a.close()
        with self.assertRaises(gnnloader.LoaderError) as cm:
            self.ld._send(p.Release(slot=0, epoch=0, index=0))
        self.assertIn("disk on fire", str(cm.exception))
        self.assertNotEqual(cm.exception.code, "closed")

    def test_an_interrupt_while_building_loses_no_message(self):
        # Ctrl-C in a build ahead: the BatchReady already read is taken by
        # the next _recv, and the rest follow in order.
        self.send(batch(0), batch(777), batch(2))
        with self.assertRaises(KeyboardInterrupt):
            self.ld._recv()
        self.assertEqual([self.ld._recv().index for _ in range(3)], [0, 777, 2])

    def test_hostile_length_behind_a_batch_refused_in_its_turn(self):
        # A header claiming a frame of ~4 GiB behind a BatchReady: decoded
        # ahead, it is refused without allocating for it, and raised only
        # when its turn comes, after the batch before it.
        self.a.sendall(p.marshal(batch(0)) + b"\xf0\xff\xff\xff\x01\x00\x00\x00")
        tracemalloc.start()
        try:
            self.assertEqual(self.ld._recv().index, 0)
            with self.assertRaises(gnnloader.LoaderError) as cm:
                self.ld._recv()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        self.assertLess(peak, 1 << 20)
        self.assertEqual(cm.exception.code, "bad_message")
        self.assertIn("exceeds the limit", str(cm.exception))

    def test_nothing_decoded_past_a_partial_frame(self):
        frames = p.marshal(batch(0)) + p.marshal(batch(1))
        tail = p.marshal(batch(2))
        self.a.sendall(frames + tail[:5])
        self.assertEqual(self.ld._recv().index, 0)
        self.assertEqual([m.index for m, _ in self.ld._ahead], [1])  # frame 2 is not whole yet: no wait for it
        self.a.sendall(tail[5:])
        self.assertEqual(self.ld._recv().index, 1)
        self.assertEqual(self.ld._recv().index, 2)


class RealEpochTest(test_release_hold.ReleaseHoldTest):
    """Against loaderd on Cora: the same batches with and without decoding
    ahead, and batches really built ahead."""

    def test_same_batches_as_one_at_a_time(self):
        with self.loader(64, receive_thread=False) as ld:  # the read ahead of the iterating thread
            built = []
            take = ld._take_kept_batches

            def counted():
                before = len(ld._built)
                take()
                built.append(len(ld._built) - before)
            ld._take_kept_batches = counted
            builds = [0]
            build = ld._build

            def counted_build(m):
                builds[0] += 1
                return build(m)
            ld._build = counted_build
            got, _, _ = self.epochs(ld)
        self.assertGreater(max(built), 1)  # some batches were built a few at a time
        # and each batch built once: _view took the ones built ahead.
        self.assertEqual(builds[0], sum(len(e) for e in got))
        with self.loader(64) as ref:
            ref._batches_ahead = 0
            want, _, _ = self.epochs(ref)
            self.assertFalse(ref._built)
        self.assertEqual([len(e) for e in got], [len(e) for e in want])
        for e, w in zip(got, want):
            for a, b in zip(e, w):
                self.assertTrue(torch.equal(a, b))

    # The base class's tests run here too; once is enough.
    test_releases_sent_together = None
    test_manual_release_never_starves_the_daemon = None
    test_manual_release_never_starves_the_daemon_with_the_receive_thread = None
    test_releases_sent_together_with_the_receive_thread = None


class StalledDaemonTest(unittest.TestCase):
    def test_close_returns_while_a_send_is_stuck(self):
        # A daemon that stopped reading, and a loader with no timeout: a
        # send fills the socket's buffer and blocks, holding the send lock.
        # close() must not wait for it: it leaves the Goodbye out, closes
        # the socket, and the stuck send ends with an error.
        a, b = socket.socketpair()
        b.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        ld = bare_loader(b)
        ld._held, ld._flat, ld._mem, ld._closed = {}, {}, None, False
        errors = []

        def flood():
            try:
                while True:
                    ld._send_now(p.Release(slot=1, epoch=0, index=0))
            except Exception as e:  # noqa: BLE001 - the error the stuck send ends with
                errors.append(e)
        t = threading.Thread(target=flood, daemon=True)
        t.start()
        deadline = time.monotonic() + 5
        while not _send_blocked(b):  # then the thread's sendall waits, the lock held
            if time.monotonic() > deadline:
                self.fail("the send never blocked")
            time.sleep(0.01)
        time.sleep(0.2)  # well inside the blocked sendall
        self.assertTrue(t.is_alive())
        start = time.monotonic()
        ld.close()
        took = time.monotonic() - start
        self.assertLess(took, _connection.GOODBYE_WAIT + 2.0)
        t.join(5)
        self.assertFalse(t.is_alive(), "the stuck send did not end when the socket closed")
        self.assertEqual(len(errors), 1)
        a.close()


def _send_blocked(sock):
    """Whether sock's send buffer is full (a send would block)."""
    import select
    return not select.select([], [sock], [], 0)[1]


if __name__ == "__main__":
    unittest.main()

"""Loader(receive_thread=True): the daemon's messages received and decoded
on a thread of the loader's own. The loader's own tests and the reconnect
tests run again with it (GNNLOADER_RECEIVE_THREAD=1, which also reaches
the trainer processes they start), then what is particular to it: the
thread lives exactly as long as the connection, idling past the socket's
timeout costs nothing, and a wait for a batch still times out."""

import array
import gc
import os
import socket
import threading
import time
import unittest

import torch

import test_loader
import test_reconnect
from test_loader import LOADERD, Daemon, gnnloader
from gnnloader import protocol as p
from gnnloader._connection import _receiver_recv, _weak_build
from gnnloader._receiver import Receiver


class _ReceiveThreadEnv:
    """Runs a test class with GNNLOADER_RECEIVE_THREAD=1."""

    @classmethod
    def setUpClass(cls):
        cls._old_env = os.environ.get("GNNLOADER_RECEIVE_THREAD")
        os.environ["GNNLOADER_RECEIVE_THREAD"] = "1"
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            if cls._old_env is None:
                os.environ.pop("GNNLOADER_RECEIVE_THREAD", None)
            else:
                os.environ["GNNLOADER_RECEIVE_THREAD"] = cls._old_env


class LoaderWithReceiveThreadTest(_ReceiveThreadEnv, test_loader.LoaderTest):
    def test_the_thread_runs(self):
        with self.loader() as ld:
            self.assertIsNotNone(ld._rx)


class ReconnectWithReceiveThreadTest(_ReceiveThreadEnv, test_reconnect.ReconnectTest):
    pass


class OneSlotWithReceiveThreadTest(_ReceiveThreadEnv, test_reconnect.OneSlotTest):
    pass


def receivers():
    return sum(1 for t in threading.enumerate() if t.name == "gnnloader-receiver" and t.is_alive())


class _CoraDaemonTest(unittest.TestCase):
    """A CPU loaderd on synthetic Cora for the class's tests."""

    @classmethod
    def setUpClass(cls):
        if not os.path.exists(LOADERD):
            raise unittest.SkipTest(f"{LOADERD} not built (scripts/test.sh builds it)")
        cls.daemon = Daemon("synthetic:cora:1:0", "--gpu=false")

    @classmethod
    def tearDownClass(cls):
        assert cls.daemon.stop() == 0


class ReceiveThreadTest(_CoraDaemonTest):
    def epoch(self, ld):
        return [b.n_id[:b.batch_size].tolist() for b in ld]

    def test_same_batches_and_thread_lifetime(self):
        before = receivers()
        with gnnloader.Loader(self.daemon.socket, batch_size=64, fanouts=[5, 5], seed=4, receive_thread=False) as ld:
            self.assertIsNone(ld._rx)
            self.assertEqual(receivers(), before)
            want = [self.epoch(ld), self.epoch(ld)]
        with gnnloader.Loader(self.daemon.socket, batch_size=64, fanouts=[5, 5], seed=4, receive_thread=True) as ld:
            self.assertEqual(receivers(), before + 1)
            self.assertEqual([self.epoch(ld), self.epoch(ld)], want)
        self.assertEqual(receivers(), before)  # closing stopped it

    def test_the_receiver_builds_the_batches(self):
        """With the thread, every batch's tensors and object are made on the
        receiver thread, none on the consumer's; the consumer's batches are
        those the receiver built, and they hold the same values."""
        with gnnloader.Loader(self.daemon.socket, batch_size=64, fanouts=[5, 5], seed=4, receive_thread=False) as ld:
            want = [(b.n_id.tolist(), b.edge_index.tolist()) for b in ld]
        threads = []
        built = {}
        real = gnnloader.Loader._build

        def build(ld, m):
            threads.append(threading.current_thread().name)
            b = real(ld, m)
            built[(m.epoch, m.index)] = b
            return b
        gnnloader.Loader._build = build
        try:
            with gnnloader.Loader(self.daemon.socket, batch_size=64, fanouts=[5, 5], seed=4, receive_thread=True) as ld:
                got = []
                for b in ld:
                    info = gnnloader.batch_info(b)
                    self.assertIs(b, built[(info.epoch, info.index)])
                    got.append((b.n_id.tolist(), b.edge_index.tolist()))
        finally:
            gnnloader.Loader._build = real
        self.assertEqual(got, want)
        self.assertEqual(set(threads), {"gnnloader-receiver"})
        self.assertEqual(len(threads), len(want))

    def test_a_batch_the_receiver_could_not_build(self):
        """A build that fails on the receiver thread (here: once, for every
        batch) is made again by the consumer, where an error would be
        raised as without the thread: the epoch is whole and the same."""
        with gnnloader.Loader(self.daemon.socket, batch_size=64, fanouts=[5, 5], seed=4, receive_thread=False) as ld:
            want = [b.n_id.tolist() for b in ld]
        real = gnnloader.Loader._build
        failed = []

        def build(ld, m):
            if threading.current_thread().name == "gnnloader-receiver":
                failed.append(m.index)
                raise gnnloader.LoaderError("not here", code="bad_message")
            return real(ld, m)
        gnnloader.Loader._build = build
        try:
            with gnnloader.Loader(self.daemon.socket, batch_size=64, fanouts=[5, 5], seed=4, receive_thread=True) as ld:
                got = [b.n_id.tolist() for b in ld]
        finally:
            gnnloader.Loader._build = real
        self.assertEqual(got, want)
        self.assertEqual(sorted(failed), list(range(len(want))))

    def test_idle_past_the_timeout(self):
        """Between epochs no message is due: the receiver waits on through
        the socket's timeouts, and the next epoch runs."""
        with gnnloader.Loader(self.daemon.socket, batch_size=64, fanouts=[5, 5], timeout=0.3, receive_thread=True) as ld:
            n = len(self.epoch(ld))
            time.sleep(1.2)  # four of the socket's timeouts with nothing to read
            self.assertEqual(len(self.epoch(ld)), n)
            self.assertTrue(ld._rx._thread.is_alive())

    def test_a_batch_that_does_not_come_times_out(self):
        """One slot held and never released: the daemon has nowhere to put
        the next batch, and the wait for it ends after `timeout`, as it
        does without the thread."""
        for rt in (False, True):
            with gnnloader.Loader(self.daemon.socket, batch_size=64, fanouts=[5, 5], slots=1, release="manual",
                                  timeout=0.5, receive_thread=rt) as ld:
                it = iter(ld)
                next(it)
                t = time.monotonic()
                with self.assertRaises(gnnloader.LoaderError) as cm:
                    next(it)
                took = time.monotonic() - t
                self.assertEqual(cm.exception.code, "closed", rt)
                self.assertIn("timed out", str(cm.exception))
                self.assertGreaterEqual(took, 0.4, rt)
                self.assertLess(took, 10, rt)


class HostileDaemonTest(unittest.TestCase):
    """What a daemon that misbehaves can do to a loader's receiver."""

    def test_a_flood_stays_bounded(self):
        """A daemon that sends without end: the queue holds at most its
        limit, the thread reads again only as messages are taken, and stop
        ends a thread that waits for room."""
        calls = []

        def flood():
            calls.append(1)
            return len(calls)
        rx = Receiver(flood, 5)
        time.sleep(0.3)
        self.assertEqual(len(rx._items), 5)
        self.assertLessEqual(len(calls), 6)  # the five queued, at most one more read waiting for room
        self.assertEqual([rx.get(1) for _ in range(3)], [1, 2, 3])
        time.sleep(0.2)
        self.assertEqual(len(rx._items), 5)
        self.assertLessEqual(len(calls), 9)
        rx.stop(None)
        self.assertFalse(rx._thread.is_alive())

    def test_descriptors_sent_after_open_are_closed(self):
        """A frame that may carry a descriptor (a shared-memory Opened) sent
        again once the slots are open: the receiver takes the message, for
        the loader to refuse, and closes the descriptor it brought."""
        a, b = socket.socketpair()
        r, w = os.pipe()
        try:
            frame = p.marshal(p.Opened(num_batches=1, slots=1, slot_bytes=128, memory="shm",
                                       regions=[p.Region(name="y", offset=0, bytes=8, dtype="int64", shape=[1])]))
            a.sendmsg([frame], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [r]).tobytes())])
            before = len(os.listdir("/proc/self/fd"))
            msg, batch = _receiver_recv(b, lambda m: self.fail("built a batch of an Opened"))()
            self.assertIsInstance(msg, p.Opened)
            self.assertIsNone(batch)
            self.assertEqual(len(os.listdir("/proc/self/fd")), before)  # the received copy is closed
        finally:
            for s in (a, b):
                s.close()
            os.close(r)
            os.close(w)


class WeakBuildTest(unittest.TestCase):
    """_weak_build, what the receiver thread builds batches with."""

    class Fake:
        _cuda = None
        _sock = None

        def __init__(self, device, fail=False):
            self.device, self.fail = torch.device(device), fail

        def _build(self, m):
            if self.fail:
                raise gnnloader.LoaderError("bad", code="bad_message")
            return ("built", m)

    def test_builds_through_a_weak_reference(self):
        ld = self.Fake("cpu")
        build = _weak_build(ld)
        self.assertEqual(build(1), ("built", 1))
        del ld
        gc.collect()
        self.assertIsNone(build(1))  # the loader is gone: nothing kept it

    def test_leaves_to_the_consumer(self):
        failing = self.Fake("cpu", fail=True)
        self.assertIsNone(_weak_build(failing)(1))  # the consumer builds again and raises
        copying = self.Fake("meta")
        self.assertIsNone(_weak_build(copying)(1))  # copies to a device belong on the consumer's stream
        moved = self.Fake("cpu")
        build = _weak_build(moved)
        moved._sock = object()  # reconnected: the old receiver's builds are not the new connection's
        self.assertIsNone(build(1))


class CollectedLoaderTest(_CoraDaemonTest):
    def test_a_dropped_loader_is_collected_with_its_thread(self):
        """A loader dropped without close(): its receiver thread does not
        keep it alive; collected, it closes and the thread ends."""
        before = receivers()
        ld = gnnloader.Loader(self.daemon.socket, batch_size=64, fanouts=[5, 5], receive_thread=True)
        next(iter(ld))
        self.assertEqual(receivers(), before + 1)
        del ld
        gc.collect()
        deadline = time.monotonic() + 5
        while receivers() > before and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(receivers(), before)


if __name__ == "__main__":
    unittest.main()

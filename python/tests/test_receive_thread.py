"""Loader(receive_thread=True): the daemon's messages received and decoded
on a thread of the loader's own. The loader's own tests and the reconnect
tests run again with it (GNNLOADER_RECEIVE_THREAD=1, which also reaches
the trainer processes they start), then what is particular to it: the
thread lives exactly as long as the connection, idling past the socket's
timeout costs nothing, and a wait for a batch still times out."""

import os
import threading
import time
import unittest

import test_loader
import test_reconnect
from test_loader import LOADERD, Daemon, gnnloader


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


class ReceiveThreadTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists(LOADERD):
            raise unittest.SkipTest(f"{LOADERD} not built (scripts/test.sh builds it)")
        cls.daemon = Daemon("synthetic:cora:1:0", "--gpu=false")

    @classmethod
    def tearDownClass(cls):
        assert cls.daemon.stop() == 0

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


if __name__ == "__main__":
    unittest.main()

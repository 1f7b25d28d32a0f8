"""The training benchmark's second trainer process (examples/bench_train_feeds.py
BusyConsumer): at full speed (train_busy) it takes batches as fast as loaderd
fills them; paced (train_paced) it takes one every pace_ms, so that the
daemon works at a training loop's pace beside the trainer under test. Run
on a CPU loaderd serving Cora."""
import os
import sys
import time
import types
import unittest

from test_loader import CoraDaemonCase

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))

from bench_train_busy import BusyConsumer  # noqa: E402


class PacedConsumerTest(CoraDaemonCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.args = types.SimpleNamespace(socket=cls.daemon.socket, batch_size=8, fanouts=[5, 3], slots=4,
                                         wait_timeout=60.0)

    def consume(self, pace_ms, seconds):
        c = BusyConsumer(self.args, "cpu", pace_ms=pace_ms)  # sleeps 1 s after it starts
        try:
            time.sleep(seconds)
            self.assertTrue(c.running())
        finally:
            code = c.stop()
        self.assertEqual(code, 0)
        self.assertIsNotNone(c.taken, "the consumer did not say how many batches it took")
        return c

    def test_paced_rate(self):
        c = self.consume(20.0, 1.0)
        # One batch every 20 ms over about 2 s: about 100 (sleep overshoots
        # a little, and the first batches come after the Loader opens).
        self.assertGreater(c.taken, 50)
        self.assertLess(c.taken, 110)
        self.assertLess(c.rate, 1000 / 20 * 1.05)
        self.assertGreater(c.rate, 1000 / 20 * 0.5)

    def test_full_speed_faster_than_paced(self):
        # Unpaced it reads every batch's x as fast as the daemon fills them:
        # well over the paced rate on Cora's small batches.
        c = self.consume(0.0, 0.5)
        self.assertGreater(c.rate, 1000 / 20 * 2)


if __name__ == "__main__":
    unittest.main()

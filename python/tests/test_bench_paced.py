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

from test_loader import LOADERD, CoraDaemonCase, Daemon

import gnnloader  # noqa: E402 (test_loader puts the client on the path)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))

from bench_train_busy import BusyConsumer  # noqa: E402
from bench_train_measure import daemon_stage_ms, scrape  # noqa: E402


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


class DaemonFiguresTest(unittest.TestCase):
    """daemon_stage_ms over two scrapes of a real loaderd's metrics: the
    daemon's own CPU a batch and its collections come from series the
    daemon exports (a renamed series would leave them at zero unnoticed)."""

    def test_cpu_and_collections(self):
        if not os.path.exists(LOADERD):
            self.skipTest(f"{LOADERD} not built")
        d = Daemon("synthetic:cora:1:0", "--gpu=false", metrics=True)
        url = d.metrics_url
        try:
            before = scrape(url)
            with gnnloader.Loader(d.socket, batch_size=16, fanouts=[10, 10]) as ld:
                # One epoch, then more until the daemon has spent 50 ms of
                # CPU or more (the series counts 10 ms ticks): about 0.3 s here.
                n, epochs, deadline = sum(1 for _ in ld), 1, time.time() + 60
                while scrape(url)["process_cpu_seconds_total"] - before["process_cpu_seconds_total"] < 0.05:
                    self.assertLess(time.time(), deadline, "the daemon's CPU did not rise over a minute of epochs")
                    n = sum(1 for _ in ld)
                    epochs += 1
            after = scrape(url)
        finally:
            code = d.stop()
        self.assertEqual(code, 0)
        for k in ("process_cpu_seconds_total", "go_gc_duration_seconds_count", "gnnloader_gather_seconds_count"):
            self.assertIn(k, after)
        f = daemon_stage_ms(before, after)
        self.assertGreaterEqual(f["filled_batches"], epochs * n)
        # At least the 50 ms waited for, over the batches filled.
        self.assertGreaterEqual(f["cpu_ms"], 50 / f["filled_batches"])
        self.assertGreaterEqual(f["gc_cycles"], 0)
        self.assertEqual(f["gc_cycles"], after["go_gc_duration_seconds_count"] - before["go_gc_duration_seconds_count"])


if __name__ == "__main__":
    unittest.main()

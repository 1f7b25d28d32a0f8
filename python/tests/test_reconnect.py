"""A trainer survives a restart of loaderd: with reconnect, the Loader
reconnects with backoff and resumes the epoch after the last batch it
yielded, so every seed of the epoch is yielded exactly once. Without it, a
lost daemon is a clear LoaderError."""

import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from test_loader import LOADERD, ROOT, Daemon, gnnloader


class ReconnectTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists(LOADERD):
            raise unittest.SkipTest(f"{LOADERD} not built (scripts/test.sh builds it)")
        cls.tmp = tempfile.mkdtemp(prefix="gnnloader-reconnect-")
        cls.socket = os.path.join(cls.tmp, "loaderd.sock")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_epoch_across_restart(self, sig):
        d = Daemon("synthetic:cora:1:0", socket_path=self.socket)
        seeds, restarted = [], None
        try:
            with gnnloader.Loader(self.socket, batch_size=32, fanouts=[5, 5], seed=3, reconnect=30) as ld:
                n = len(ld)
                for i, b in enumerate(ld):
                    seeds += b.n_id[:b.batch_size].tolist()
                    if i == 5:
                        d.proc.send_signal(sig)
                        d.proc.wait(timeout=30)
                        d.log.close()
                        time.sleep(0.3)  # the trainer notices while no daemon runs
                        restarted = Daemon("synthetic:cora:1:0", socket_path=self.socket)
                self.assertGreaterEqual(ld.reconnects, 1)
                # The next epoch runs whole on the new daemon.
                self.assertEqual(sum(1 for _ in ld), n)
        finally:
            (restarted or d).stop()
        return seeds

    def expected_train(self):
        with tempfile.TemporaryDirectory() as tmp:
            d = Daemon("synthetic:cora:1:0", socket_path=os.path.join(tmp, "s.sock"))
            try:
                with gnnloader.Loader(d.socket, batch_size=32, fanouts=[5, 5], seed=3) as ld:
                    return [s for b in ld for s in b.n_id[:b.batch_size].tolist()]
            finally:
                d.stop()

    def test_restart_after_the_last_batch_with_releases_held(self):
        """64 slots hold releases back: the ones still held at EpochEnd
        meet the restarted daemon, and the loader reconnects there as
        anywhere else in the epoch, yielding nothing again."""
        d = Daemon("synthetic:cora:1:0", socket_path=self.socket)
        restarted = None
        try:
            with gnnloader.Loader(self.socket, batch_size=32, fanouts=[5, 5], slots=64, reconnect=30,
                                  timeout=30, pyg=False) as ld:
                self.assertGreater(ld._release_hold, 1)
                n = len(ld)
                self.assertLessEqual(n, 60)  # every batch of the epoch has a slot
                it = iter(ld)
                time.sleep(0.5)  # every BatchReady and the EpochEnd sent
                self.assertEqual(len([next(it) for _ in range(n)]), n)
                d.proc.send_signal(signal.SIGTERM)
                d.proc.wait(timeout=30)
                d.log.close()
                restarted = Daemon("synthetic:cora:1:0", socket_path=self.socket)
                self.assertEqual(list(it), [])  # the epoch ends after a reconnect, not with its error
                self.assertGreaterEqual(ld.reconnects, 1)
                self.assertEqual(sum(1 for _ in ld), n)
        finally:
            (restarted or d).stop()

    def test_resume_after_sigkill(self):
        got = self.run_epoch_across_restart(signal.SIGKILL)
        self.assertEqual(got, self.expected_train(), "the resumed epoch differs from an unbroken one")

    def test_resume_after_sigterm(self):
        got = self.run_epoch_across_restart(signal.SIGTERM)
        self.assertEqual(got, self.expected_train(), "the resumed epoch differs from an unbroken one")

    def test_without_reconnect_a_lost_daemon_is_an_error(self):
        d = Daemon("synthetic:cora:1:0", socket_path=self.socket)
        with gnnloader.Loader(self.socket, batch_size=32, fanouts=[5, 5]) as ld:
            it = iter(ld)
            next(it)
            d.proc.send_signal(signal.SIGKILL)
            d.proc.wait(timeout=30)
            d.log.close()
            with self.assertRaises(gnnloader.LoaderError) as cm:
                for _ in it:
                    pass
            self.assertIn("loaderd", str(cm.exception))
        shutil.rmtree(d.dir, ignore_errors=True)

    def test_without_reconnect_sigterm_reports_the_goodbye(self):
        """A SIGTERMed daemon says Goodbye and closes. A trainer without
        reconnect that holds a batch (release="auto") and keeps iterating
        must see that Goodbye, not the broken pipe its Release hits. Half the
        rounds wait for the daemon to exit first (the Release always meets a
        closed socket), half race it."""
        for i in range(20):
            with self.subTest(round=i):
                d = Daemon("synthetic:cora:1:0", socket_path=self.socket)
                signalled = False
                try:
                    with gnnloader.Loader(self.socket, batch_size=32, fanouts=[5, 5], timeout=30) as ld:
                        it = iter(ld)
                        next(it)
                        d.proc.send_signal(signal.SIGTERM)
                        signalled = True
                        if i % 2 == 0:
                            d.proc.wait(timeout=30)
                        with self.assertRaises(gnnloader.LoaderError) as cm:
                            for _ in it:
                                pass
                            # The daemon may finish this short epoch before
                            # the signal lands: the next ones meet the stop.
                            deadline = time.monotonic() + 30
                            while time.monotonic() < deadline:
                                for _ in ld:
                                    pass
                        self.assertEqual(cm.exception.code, "goodbye", str(cm.exception))
                        self.assertIn("daemon shutting down", str(cm.exception))
                finally:
                    if not signalled:  # a second SIGTERM would kill it at once
                        d.proc.send_signal(signal.SIGTERM)
                    code = d.proc.wait(timeout=30)
                    d.log.close()
                    shutil.rmtree(d.dir, ignore_errors=True)
                self.assertEqual(code, 0, "loaderd exited %s after SIGTERM" % code)

if __name__ == "__main__":
    unittest.main()


class OneSlotTest(unittest.TestCase):
    def test_one_slot_does_not_deadlock(self):
        """With auto release the previous batch is released before the next is
        awaited, so even a single slot keeps the stream going."""
        if not os.path.exists(LOADERD):
            self.skipTest(f"{LOADERD} not built")
        with tempfile.TemporaryDirectory() as tmp:
            d = Daemon("synthetic:cora:1:0", socket_path=os.path.join(tmp, "s.sock"))
            try:
                with gnnloader.Loader(d.socket, batch_size=64, fanouts=[5, 5], slots=1, timeout=20) as ld:
                    self.assertEqual(sum(1 for _ in ld), len(ld))
            finally:
                d.stop()

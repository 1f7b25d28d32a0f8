"""End-to-end tests of the Python client against a real loaderd.

They build nothing: scripts/test.sh builds bin/loaderd first (or set
LOADERD to a binary). The dataset is Cora imported from testdata/cora.npz
with the project's own importer, so every served feature row and label can
be checked against the original .npz read here with numpy.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import zipfile
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
import gnnloader  # noqa: E402

LOADERD = os.environ.get("LOADERD", str(ROOT / "bin" / "loaderd"))


def load_cora_npz():
    """Dense features and labels of testdata/cora.npz, read independently of
    the Go importer."""
    with zipfile.ZipFile(ROOT / "testdata" / "cora.npz") as z:
        arr = {}
        for name in ("attr_data", "attr_indices", "attr_indptr", "attr_shape", "labels"):
            with z.open(name + ".npy") as f:
                arr[name] = np.lib.format.read_array(f)
    n, d = arr["attr_shape"]
    x = np.zeros((n, d), dtype=np.float32)
    ptr, idx, val = arr["attr_indptr"], arr["attr_indices"], arr["attr_data"]
    for i in range(n):
        x[i, idx[ptr[i]:ptr[i + 1]]] = val[ptr[i]:ptr[i + 1]]
    return torch.from_numpy(x), torch.from_numpy(arr["labels"].astype(np.int64))


class Daemon:
    """A loaderd serving a dataset on a socket in a temporary directory;
    with metrics=True also its metrics on a free loopback port, at
    self.metrics_url."""

    def __init__(self, dataset, *flags, socket_path=None, metrics=False):
        self.dir = tempfile.mkdtemp(prefix="gnnloader-test-")
        self.socket = socket_path or os.path.join(self.dir, "loaderd.sock")
        self.metrics_url = None
        if metrics:
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            s.close()
            flags = (*flags, "--metrics-addr", f"127.0.0.1:{port}")
            self.metrics_url = f"http://127.0.0.1:{port}/metrics"
        self.log = open(os.path.join(self.dir, "loaderd.log"), "w+")
        self.proc = subprocess.Popen([LOADERD, "serve", "--dataset", dataset, "--socket", self.socket, *flags],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while not self.listening():
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("loaderd did not start:\n" + self.logs())
            time.sleep(0.02)

    def listening(self):
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(self.socket)
            return True
        except OSError:
            return False
        finally:
            s.close()

    def logs(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def dump(self):
        """Ends loaderd with SIGQUIT, which makes the Go runtime print every
        goroutine's stack (a goroutine in a CUDA call shows the cgo frame),
        and returns its log with them: for a test that finds it stuck."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        logs = self.logs()
        keep = os.environ.get("GNNLOADER_TEST_LOGS")
        if keep:
            os.makedirs(keep, exist_ok=True)
            with open(os.path.join(keep, os.path.basename(self.dir) + ".log"), "w") as f:
                f.write(logs)
        return logs

    def stop(self):
        """SIGTERM, then the exit code; a loaderd that does not exit within
        30 s is killed (and the TimeoutExpired raised after the clean-up)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise
        finally:
            self.cleanup()

    def cleanup(self):
        """Closes the log and removes the directory (after stop or dump)."""
        if not self.log.closed:
            self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def import_cora(directory):
    """testdata/cora.npz imported (undirected) with the project's importer
    into directory/cora; returns that dataset's path."""
    cora = os.path.join(directory, "cora")
    subprocess.run([LOADERD, "import", "npz", str(ROOT / "testdata" / "cora.npz"), "--undirected",
                    "--out", cora], check=True, capture_output=True)
    return cora


class CoraDaemonCase(unittest.TestCase):
    """A test case whose class shares one loaderd serving Cora on the CPU
    path (also on a GPU machine): cls.daemon, its dataset at cls.cora, in
    cls.tmp, and the .npz's features and labels as cls.x, cls.y. Skipped
    when the daemon is not built; its exit status after SIGTERM is checked
    at the end."""

    @classmethod
    def setUpClass(cls):
        if not os.path.exists(LOADERD):
            raise unittest.SkipTest(f"{LOADERD} not built (scripts/test.sh builds it)")
        cls.tmp = tempfile.mkdtemp(prefix="gnnloader-cora-")
        cls.cora = import_cora(cls.tmp)
        cls.x, cls.y = load_cora_npz()
        cls.daemon = Daemon(cls.cora, "--gpu=false")

    @classmethod
    def tearDownClass(cls):
        code = cls.daemon.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)
        assert code == 0, f"loaderd exited {code} after SIGTERM"


class LoaderTest(CoraDaemonCase):
    def loader(self, **kw):
        args = dict(split="train", batch_size=64, fanouts=[10, 5], shuffle=True, seed=1)
        args.update(kw)
        return gnnloader.Loader(self.daemon.socket, **args)

    def check_batch(self, b):
        n = b.n_id.numel()
        self.assertEqual(b.x.shape, (n, 1433))
        self.assertEqual(sum(b.num_sampled_nodes), n)
        self.assertEqual(b.num_sampled_nodes[0], b.batch_size)
        self.assertEqual(sum(b.num_sampled_edges), b.edge_index.shape[1])
        self.assertEqual(len(set(b.n_id.tolist())), n, "n_id has duplicates")
        self.assertTrue(torch.equal(b.x, self.x[b.n_id]), "x is not the features of n_id")
        self.assertTrue(torch.equal(b.y, self.y[b.n_id]), "y is not the labels of n_id")
        if b.edge_index.numel():
            self.assertGreaterEqual(int(b.edge_index.min()), 0)
            self.assertLess(int(b.edge_index.max()), n)
        e = b.edge_index.shape[1]
        self.assertEqual((b.e_id.dtype, tuple(b.e_id.shape)), (torch.int64, (e,)))
        if e:
            self.assertGreaterEqual(int(b.e_id.min()), 0)
            self.assertLess(int(b.e_id.max()), 2 * 5429)  # Cora imported undirected

    def test_edge_ids_name_edges(self):
        """e_id is a function of the edge and tells edges apart: the same
        (source, target) pair always has the same id, different pairs never."""
        by_pair, by_id = {}, {}
        with self.loader() as ld:
            for b in ld:
                src = b.n_id[b.edge_index[0]].tolist()
                dst = b.n_id[b.edge_index[1]].tolist()
                for u, v, i in zip(src, dst, b.e_id.tolist()):
                    self.assertEqual(by_pair.setdefault((u, v), i), i, f"edge {u}->{v} has two ids")
                    self.assertEqual(by_id.setdefault(i, (u, v)), (u, v), f"id {i} names two edges")
        self.assertGreater(len(by_id), 1000)

    def test_one_trainer(self):
        with self.loader() as ld:
            self.assertEqual(ld.dataset.num_nodes, 2708)
            self.assertEqual(len(ld), (1626 + 63) // 64)
            for epoch in range(2):
                seeds = []
                for b in ld:
                    self.check_batch(b)
                    seeds += b.n_id[:b.batch_size].tolist()
                self.assertEqual(len(seeds), 1626)
                self.assertEqual(len(set(seeds)), 1626)

    def test_two_trainers_cover_split_once(self):
        # Two ranks (as two processes would be) iterate the same epoch.
        lds = [self.loader(rank=r, world_size=2, seed=5) for r in range(2)]
        try:
            seen = [[], []]
            iters = [iter(ld) for ld in lds]
            done = [False, False]
            while not all(done):
                for r in range(2):
                    if done[r]:
                        continue
                    try:
                        b = next(iters[r])
                    except StopIteration:
                        done[r] = True
                        continue
                    seen[r] += b.n_id[:b.batch_size].tolist()
            self.assertEqual(len(lds[0]), len(lds[1]))
            self.assertFalse(set(seen[0]) & set(seen[1]), "ranks overlap")
            self.assertEqual(len(seen[0]) + len(seen[1]), 1626)
            self.assertEqual(len(set(seen[0]) | set(seen[1])), 1626)
        finally:
            for ld in lds:
                ld.close()

    def test_held_slot_never_changes(self):
        with self.loader(release="manual", slots=3) as ld:
            it = iter(ld)
            first = next(it)
            snapshot = (first.x.clone(), first.n_id.clone(), first.edge_index.clone())
            # Take and release the following batches: loaderd keeps filling
            # the other slots while this trainer holds the first one.
            for _ in range(8):
                b = next(it)
                self.assertNotEqual(gnnloader.batch_info(b).slot, gnnloader.batch_info(first).slot)
                ld.release(b)
            time.sleep(0.1)
            self.assertTrue(torch.equal(snapshot[0], first.x))
            self.assertTrue(torch.equal(snapshot[1], first.n_id))
            self.assertTrue(torch.equal(snapshot[2], first.edge_index))
            ld.release(first)
            with self.assertRaises(ValueError):
                ld.release(first)

    def test_abandoned_epoch_then_next(self):
        with self.loader() as ld:
            for i, b in enumerate(ld):
                if i == 2:
                    break
            n = sum(b.batch_size for b in ld)
            self.assertEqual(n, 1626)

    def test_bad_requests_raise_with_daemon_message(self):
        cases = [
            (dict(split="nope"), 'no split "nope"'),
            (dict(batch_size=0), "batch_size is 0"),
            (dict(fanouts=[2] * 17), "fanouts"),
            (dict(rank=3, world_size=2), "rank 3"),
            (dict(device="cuda:0"), "CPU path only"),
            (dict(slots=100), "slots"),
        ]
        for kw, text in cases:
            with self.subTest(kw=kw):
                with self.assertRaises(Exception) as cm:
                    self.loader(**kw)
                self.assertIn(text, str(cm.exception))
        # The daemon and other trainers carry on.
        with self.loader() as ld:
            self.check_batch(next(iter(ld)))

    def test_malformed_frames_close_only_that_connection(self):
        with self.loader() as ld:
            it = iter(ld)
            self.check_batch(next(it))
            for junk in (b"\xff\xff\xff\x7f\x01\x00\x00\x00", b"\x04\x00\x00\x00\xee\x0e\x00\x00", b"\x09\x00"):
                s = socket.socket(socket.AF_UNIX)
                s.connect(self.daemon.socket)
                s.sendall(junk)
                s.shutdown(socket.SHUT_WR)
                reply = s.recv(4096)
                s.close()
                self.assertGreater(len(reply), 8, "no Error frame")
                self.assertEqual(int.from_bytes(reply[4:6], "little"), 9, "not an Error frame")
            for b in it:
                self.check_batch(b)

    def test_killed_trainer_frees_its_slots(self):
        code = ("import sys, os; sys.path.insert(0, %r); import gnnloader;"
                "ld = gnnloader.Loader(%r, batch_size=64, fanouts=[10, 5]); it = iter(ld); next(it);"
                "os.kill(os.getpid(), 9)") % (str(ROOT / "python"), self.daemon.socket)
        p = subprocess.run([sys.executable, "-c", code])
        self.assertEqual(p.returncode, -9)
        deadline = time.time() + 1  # issue 8: noticed within 1 s
        while "trainer disconnected without goodbye" not in self.daemon.logs():
            self.assertLess(time.time(), deadline, "loaderd did not notice the killed trainer")
            time.sleep(0.05)
        with self.loader() as ld:
            self.check_batch(next(iter(ld)))


    def test_batch_held_after_close_stays_readable(self):
        """A batch kept past close() (or past the loader's collection) still
        reads its slot: the mapping goes with the last tensor viewing it.
        It used to be unmapped at close, and the read crashed the process
        (a separate one here, so a crash fails this test alone)."""
        code = ("import sys, gc; sys.path.insert(0, %r); import gnnloader;"
                "ld = gnnloader.Loader(%r, batch_size=64, fanouts=[10, 5], pyg=False); b = next(iter(ld));"
                "want = float(b.x.double().sum()); ld.close(); del ld; gc.collect();"
                "print(float(b.x.double().sum()) == want, b.x.shape[0] > 0)") % (str(ROOT / "python"), self.daemon.socket)
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr[-2000:])
        self.assertEqual(p.stdout.split(), ["True", "True"])


class MetricsTest(unittest.TestCase):
    """Scrapes the metrics endpoint of a running loaderd serving a trainer."""

    def test_documented_metrics_have_plausible_values(self):
        if not os.path.exists(LOADERD):
            self.skipTest(f"{LOADERD} not built")
        import re
        import urllib.request
        d = Daemon("synthetic:cora:1:0", metrics=True)
        try:
            with gnnloader.Loader(d.socket, batch_size=64, fanouts=[5, 5]) as ld:
                batches = sum(1 for _ in ld)
                it = iter(ld)
                next(it)  # hold one batch while scraping
                text = urllib.request.urlopen(d.metrics_url, timeout=10).read().decode()
        finally:
            self.assertEqual(d.stop(), 0)

        def value(name, labels=""):
            m = re.search(r"^" + re.escape(name + labels) + r" (\S+)$", text, re.M)
            self.assertIsNotNone(m, f"{name}{labels} missing from /metrics")
            return float(m.group(1))

        self.assertGreaterEqual(value("gnnloader_batches_served_total", '{rank="0"}'), batches)
        for h in ("gnnloader_sample_seconds", "gnnloader_gather_seconds", "gnnloader_slot_wait_seconds",
                  "gnnloader_trainer_hold_seconds"):
            self.assertGreater(value(h + "_count"), 0, h)
            self.assertGreater(value(h + "_sum"), 0, h)
        self.assertGreater(value("gnnloader_gather_bytes_total"), 0)
        self.assertEqual(value("gnnloader_trainers"), 1)
        self.assertGreater(value("gnnloader_slot_bytes"), 0)
        self.assertGreaterEqual(value("gnnloader_slots_held"), 1)
        self.assertGreater(value("gnnloader_dataset_feature_bytes"), 0)
        self.assertGreaterEqual(value("gnnloader_connections_total"), 1)


if __name__ == "__main__":
    unittest.main()

"""The shared feature table (loaderd serve --table-socket) and batches
without features (StructLoader), against a real loaderd on a generated
dataset: the mapped table equals the rows the daemon serves, and a
StructLoader gets the very batches a Loader with the same arguments gets."""

import os
import shutil
import tempfile
import sys
import time
import unittest
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import gnnloader  # noqa: E402
from gnnloader.table import StructLoader, open_table  # noqa: E402
from test_loader import LOADERD, Daemon  # noqa: E402


class TableTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists(LOADERD):
            raise unittest.SkipTest(f"{LOADERD} not built (scripts/test.sh builds it)")
        cls.tmp = tempfile.mkdtemp(prefix="gnnloader-table-")
        cls.table = os.path.join(cls.tmp, "table.sock")
        cls.daemon = Daemon("synthetic:arxiv:0.02:3", "--gpu=false", "--table-socket", cls.table)

    @classmethod
    def tearDownClass(cls):
        code = cls.daemon.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)
        assert code == 0, f"loaderd exited {code} after SIGTERM"

    def table_path(self):
        p = self.table
        deadline = time.time() + 30
        while not os.path.exists(p) and time.time() < deadline:
            time.sleep(0.02)
        return p

    def test_table_matches_served_rows_and_batches_match(self):
        t = open_table(self.table_path())
        info = t.info
        self.assertEqual(t.x.shape, (info["num_rows"], info["feature_dim"]))
        args = dict(split="train", batch_size=256, fanouts=[5, 3], shuffle=True, seed=7)
        with gnnloader.Loader(self.daemon.socket, **args) as full, StructLoader(self.daemon.socket, **args) as bare:
            self.assertEqual(len(full), len(bare))
            n = 0
            for a, b in zip(full, bare):
                self.assertTrue(torch.equal(a.n_id, b.n_id))
                self.assertTrue(torch.equal(a.edge_index, b.edge_index))
                self.assertTrue(torch.equal(a.y, b.y))
                self.assertEqual(a.batch_size, b.batch_size)
                self.assertTrue(torch.equal(a.x, t.x.index_select(0, b.n_id)))
                n += 1
            self.assertEqual(n, len(full))
        t.close()

    def test_struct_loader_is_cpu_only(self):
        with self.assertRaises(ValueError):
            StructLoader(self.daemon.socket, split="train", batch_size=8, fanouts=[2], device="cuda:0")


if __name__ == "__main__":
    unittest.main()


class TableSocketFramesTest(unittest.TestCase):
    """open_table against a fake table socket (no loaderd needed)."""

    def serve_once(self, nfds):
        """A socket whose one client gets a JSON line with nfds descriptors
        (of /dev/null) attached; returns its path."""
        import array
        import socket
        import threading
        tmp = tempfile.mkdtemp(prefix="gnnloader-faketable-")
        self.addCleanup(shutil.rmtree, tmp, True)
        path = os.path.join(tmp, "t.sock")
        srv = socket.socket(socket.AF_UNIX)
        srv.bind(path)
        srv.listen(1)
        self.addCleanup(srv.close)

        def answer():
            c, _ = srv.accept()
            fds = [os.open(os.devnull, os.O_RDONLY) for _ in range(nfds)]
            try:
                c.sendmsg([b'{"bytes": 0}\n'], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
            finally:
                for fd in fds:
                    os.close(fd)
                c.close()
        threading.Thread(target=answer, daemon=True).start()
        return path

    def test_more_descriptors_than_room_is_an_error_and_leaks_none(self):
        path = self.serve_once(64)
        before = len(os.listdir("/proc/self/fd"))
        with self.assertRaisesRegex(gnnloader.LoaderError, "more descriptors than one"):
            open_table(path, timeout=10)
        time.sleep(0.1)  # the fake server's thread closes its copies
        self.assertLessEqual(len(os.listdir("/proc/self/fd")), before)

"""The shared feature table (loaderd serve --table-socket) and batches
without features (StructLoader), against a real loaderd on a generated
dataset: the mapped table equals the rows the daemon serves, and a
StructLoader gets the very batches a Loader with the same arguments gets."""

import json
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

    def serve_once(self, nfds, line=b'{"bytes": 0}\n', size=None):
        """A socket whose one client gets line with nfds descriptors attached
        (of /dev/null, or of a memfd of size bytes); returns its path."""
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
            fds = []
            for _ in range(nfds):
                if size is None:
                    fds.append(os.open(os.devnull, os.O_RDONLY))
                else:
                    fds.append(os.memfd_create("gnnloader-faketable"))
                    os.ftruncate(fds[-1], size)
            try:
                c.sendmsg([line], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
            finally:
                for fd in fds:
                    os.close(fd)
                c.close()
        threading.Thread(target=answer, daemon=True).start()
        return path

    def test_bad_description_is_a_loader_error_and_leaks_none(self):
        # A table socket (a daemon of another build, or not loaderd) whose
        # description is not JSON, lacks fields, has negative or overflowing
        # sizes or cannot be mapped: a LoaderError each, the descriptor
        # closed, never a KeyError or a view over memory that is not there.
        good = {"feature_dtype": "float32", "bytes": 4096, "num_rows": 8, "feature_dim": 128}
        cases = [b"not json\n", b'{"bytes": 0}\n', b"[1, 2]\n",
                 json.dumps({**good, "bytes": -1}).encode(),
                 json.dumps({**good, "num_rows": 9}).encode(),  # 9 x 128 x 4 > 4096
                 json.dumps({**good, "num_rows": "many"}).encode(),
                 json.dumps({**good, "offset": -4096}).encode(),
                 json.dumps({**good, "bytes": 1 << 40, "num_rows": 1}).encode()]  # past the memfd's end: mmap refuses
        for line in cases:
            with self.subTest(line=line):
                path = self.serve_once(1, line, size=4096)
                before = len(os.listdir("/proc/self/fd"))
                with self.assertRaisesRegex(gnnloader.LoaderError, "bad table description"):
                    open_table(path, timeout=10)
                time.sleep(0.05)
                self.assertLessEqual(len(os.listdir("/proc/self/fd")), before)
        # The same description, well formed, maps.
        t = open_table(self.serve_once(1, json.dumps(good).encode(), size=4096), timeout=10)
        self.assertEqual(tuple(t.x.shape), (8, 128))

    def test_more_descriptors_than_room_is_an_error_and_leaks_none(self):
        path = self.serve_once(64)
        before = len(os.listdir("/proc/self/fd"))
        with self.assertRaisesRegex(gnnloader.LoaderError, "more descriptors than one"):
            open_table(path, timeout=10)
        time.sleep(0.1)  # the fake server's thread closes its copies
        self.assertLessEqual(len(os.listdir("/proc/self/fd")), before)

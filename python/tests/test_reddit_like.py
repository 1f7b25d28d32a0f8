"""examples/reddit_like.py (PyG's examples/reddit.py with gnnloader's
NeighborLoader) runs its training loop and inference for a few batches
against a loaderd serving a generated dataset."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from test_loader import LOADERD, ROOT, Daemon


class RedditLikeTest(unittest.TestCase):
    def test_loop_runs(self):
        if not os.path.exists(LOADERD):
            raise unittest.SkipTest(f"{LOADERD} not built")
        tmp = tempfile.mkdtemp(prefix="gnnloader-reddit-")
        try:
            out = os.path.join(tmp, "data")
            subprocess.run([LOADERD, "gen", "--like", "cora", "--undirected", "true", "--out", out],
                           check=True, capture_output=True)
            daemon = Daemon(out, "--gpu=false")
            try:
                env = dict(os.environ, GNNLOADER_SOCKET=daemon.socket, EPOCHS="1", MAX_BATCHES="2",
                           CUDA_VISIBLE_DEVICES="")
                r = subprocess.run([sys.executable, str(ROOT / "examples" / "reddit_like.py")], env=env,
                                   capture_output=True, text=True, timeout=300)
            finally:
                daemon.stop()
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("Epoch 01, Loss:", r.stdout)
            self.assertRegex(r.stdout, r"Epoch: 01, Train: [0-9.]+, Val: [0-9.]+, Test: [0-9.]+")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()

"""examples/link_pred.py (GraphSAGE link prediction with gnnloader's
LinkNeighborLoader) trains and evaluates for a few batches against a loaderd
serving a generated ogbl-citation2 stand-in."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from test_loader import LOADERD, ROOT, Daemon


class LinkPredTest(unittest.TestCase):
    def test_loop_runs(self):
        if not os.path.exists(LOADERD):
            raise unittest.SkipTest(f"{LOADERD} not built")
        tmp = tempfile.mkdtemp(prefix="gnnloader-linkpred-")
        try:
            out = os.path.join(tmp, "data")
            subprocess.run([LOADERD, "gen", "--like", "citation2", "--scale", "0.002", "--out", out],
                           check=True, capture_output=True)
            daemon = Daemon(out, "--gpu=false")
            try:
                env = dict(os.environ, GNNLOADER_SOCKET=daemon.socket, EPOCHS="1", MAX_BATCHES="3",
                           MAX_EVAL_BATCHES="2", NUM_NEG="10", CUDA_VISIBLE_DEVICES="")
                r = subprocess.run([sys.executable, str(ROOT / "examples" / "link_pred.py")], env=env,
                                   capture_output=True, text=True, timeout=300)
            finally:
                daemon.stop()
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertRegex(r.stdout, r"Epoch: 01, Loss: [0-9.]+, Val AUC: [0-9.]+, Val MRR: [0-9.]+")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()

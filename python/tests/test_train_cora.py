"""The accuracy check of the CPU service: GraphSAGE on Cora trained through
loaderd reaches >= 0.80 test accuracy and stays within 2 points of the same
model trained with exact full-neighbourhood aggregation, from the same seeds,
in the same run. Means over three seeds, so one lucky or unlucky seed cannot
decide it."""

import json
import os
import subprocess
import sys
import unittest

from test_loader import LOADERD, ROOT, Daemon, import_cora


class TrainCoraTest(unittest.TestCase):
    def test_accuracy_matches_full_neighbourhood_reference(self):
        if not os.path.exists(LOADERD):
            self.skipTest(f"{LOADERD} not built (scripts/test.sh builds it)")
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            cora = import_cora(tmp)
            d = Daemon(cora)
            try:
                out = subprocess.run(
                    [sys.executable, str(ROOT / "examples" / "train_sage.py"), "--socket", d.socket,
                     "--fanouts", "10,10", "--epochs", "30", "--seeds", "0,1,2", "--reference",
                     "--quiet", "--json"],
                    check=True, capture_output=True, text=True, timeout=1200)
            finally:
                self.assertEqual(d.stop(), 0)
        print(out.stdout, file=sys.stderr)
        summary = json.loads(out.stdout.strip().splitlines()[-1])
        sampled, ref = summary["sampled"]["test_acc"], summary["reference"]["test_acc"]
        self.assertGreaterEqual(sampled, 0.80, f"test accuracy through loaderd {sampled:.4f}")
        self.assertLessEqual(abs(sampled - ref), 0.02,
                             f"sampled {sampled:.4f} vs full-neighbourhood reference {ref:.4f}")


if __name__ == "__main__":
    unittest.main()

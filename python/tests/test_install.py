"""`pip install ./python` works offline, and the installed package trains on
Cora through a real loaderd with PyG-style NeighborLoader arguments.

The package is installed with Debian's pip, setuptools and wheel
(python3-pip, python3-setuptools, python3-wheel), without build isolation and
without an index, into a fresh --target directory; --no-deps because a
--target install does not see the torch and numpy already installed (a venv
made with --system-site-packages installs without it, see docs/pyg.md). The
training script then runs from a directory outside the repository with only
that target on PYTHONPATH, so it can only import the installed copy.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

from test_loader import LOADERD, ROOT, Daemon, import_cora

TRAIN = textwrap.dedent('''
    import json, sys
    import torch
    import torch.nn.functional as F
    import gnnloader
    from gnnloader import NeighborLoader

    class SAGEConv(torch.nn.Module):  # mean aggregation, as torch_geometric.nn.SAGEConv
        def __init__(self, i, o):
            super().__init__()
            self.lin_l = torch.nn.Linear(i, o)
            self.lin_r = torch.nn.Linear(i, o, bias=False)
        def forward(self, x, edge_index):
            src, dst = edge_index
            h = self.lin_l(x)
            agg = torch.zeros_like(h).index_add_(0, dst, h[src])
            deg = torch.zeros(x.size(0)).index_add_(0, dst, torch.ones(dst.numel()))
            return agg / deg.clamp(min=1).unsqueeze(1) + self.lin_r(x)

    torch.manual_seed(0)
    data = gnnloader.connect(sys.argv[1])          # stands in for PyG's data
    conv1, conv2 = SAGEConv(data.num_features, 64), SAGEConv(64, data.num_classes)
    params = list(conv1.parameters()) + list(conv2.parameters())
    opt = torch.optim.Adam(params, lr=0.01, weight_decay=5e-4)
    def model(b):
        h = F.dropout(F.relu(conv1(b.x, b.edge_index)), 0.5, training=conv1.training)
        return conv2(h, b.edge_index)[:b.batch_size]

    train_loader = NeighborLoader(data, num_neighbors=[10, 10], batch_size=64, input_nodes="train",
                                  shuffle=True, num_workers=4, persistent_workers=True)
    losses = []
    for epoch in range(3):
        conv1.train(); conv2.train()
        total = n = 0
        for batch in train_loader:
            opt.zero_grad()
            loss = F.cross_entropy(model(batch), batch.y[:batch.batch_size])
            loss.backward()
            opt.step()
            total += float(loss) * batch.batch_size
            n += batch.batch_size
        losses.append(total / n)
    conv1.eval(); conv2.eval()
    correct = n = 0
    with torch.no_grad():
        for batch in NeighborLoader(data, num_neighbors=[-1, -1], batch_size=512, input_nodes="test"):
            correct += int((model(batch).argmax(-1) == batch.y[:batch.batch_size]).sum())
            n += batch.batch_size
    print(json.dumps({"module": gnnloader.__file__, "losses": losses, "test_acc": correct / n, "test_n": n,
                      "batches": len(train_loader)}))
''')


class InstallTest(unittest.TestCase):
    def test_pip_install_then_train_cora(self):
        if not os.path.exists(LOADERD):
            self.skipTest(f"{LOADERD} not built (scripts/test.sh builds it)")
        tmp = tempfile.mkdtemp(prefix="gnnloader-install-")
        try:
            target = os.path.join(tmp, "site")
            # Build from a copy, so the in-tree build/ and egg-info never touch the checkout.
            src = os.path.join(tmp, "src")
            shutil.copytree(ROOT / "python", src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "tests"))
            pip = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-index",
                                  "--no-deps", "--disable-pip-version-check", "--target", target, src],
                                 capture_output=True, text=True)
            self.assertEqual(pip.returncode, 0, pip.stdout + pip.stderr)
            self.assertTrue(os.path.exists(os.path.join(target, "gnnloader", "py.typed")), "py.typed not installed")

            cora = import_cora(tmp)
            script = os.path.join(tmp, "train_cora.py")
            with open(script, "w") as f:
                f.write(TRAIN)
            daemon = Daemon(cora)
            try:
                env = dict(os.environ, PYTHONPATH=target)
                run = subprocess.run([sys.executable, "-W", "always", script, daemon.socket], cwd=tmp, env=env,
                                     capture_output=True, text=True, timeout=300)
            finally:
                code = daemon.stop()
            self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
            self.assertEqual(code, 0)
            out = json.loads(run.stdout.strip().splitlines()[-1])
            self.assertTrue(out["module"].startswith(target), f"imported {out['module']}, not the installed copy")
            self.assertIn("ignores num_workers=4", run.stderr)
            self.assertEqual(out["test_n"], 542)  # the test split of testdata/cora.npz
            self.assertEqual(out["batches"], (1626 + 63) // 64)
            self.assertLess(out["losses"][-1], out["losses"][0], out)
            self.assertGreater(out["test_acc"], 0.5, out)  # chance is 1/7
            print(f"\n  installed into {target}; loss {out['losses']}, test acc {out['test_acc']:.3f}",
                  file=sys.stderr)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()

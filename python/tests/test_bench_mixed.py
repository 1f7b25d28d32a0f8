"""The training benchmark's interleaved variant (examples/bench_train.py
train_mixed): MixedFeed hands out training only's and loaderd's batches in
blocks, in turn, until loaderd's epoch ends, and mixed_figures times each
side apart from the steps' start times, leaving out each block's first steps
and its last."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import types
import unittest

from test_loader import ROOT, CoraDaemonCase, Daemon, import_cora

import gnnloader  # noqa: E402 (test_loader puts the client on the path)
import torch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))

from bench_train_mixed import MixedFeed, fill_overlap, fill_waits, mixed_figures, read_fills  # noqa: E402


class _Feed:
    def __init__(self, items):
        self.items, self.closed = list(items), False

    def __len__(self):
        return len(self.items)

    def __iter__(self):
        return iter(self.items)

    def close(self):
        self.closed = True


class MixedFeedTest(unittest.TestCase):
    def test_blocks_in_turn_until_loaderd_ends(self):
        ld = _Feed(f"l{i}" for i in range(7))
        pre = _Feed(["p0", "p1"])  # cycled: fewer batches than an epoch
        m = MixedFeed(ld, pre, 3)
        got = list(m)
        self.assertEqual(got, ["p0", "p1", "p0", "l0", "l1", "l2", "p1", "p0", "p1", "l3", "l4", "l5",
                               "p0", "p1", "p0", "l6"])
        self.assertEqual(m.sources, ["train_only"] * 3 + ["loaderd"] * 3 + ["train_only"] * 3 + ["loaderd"] * 3
                         + ["train_only"] * 3 + ["loaderd"])
        self.assertEqual(len(m), 16)
        self.assertEqual(len(got), len(m))
        m.close()
        self.assertTrue(ld.closed and pre.closed)

    def test_epoch_a_multiple_of_the_block(self):
        # loaderd's last block ends the loop: no preloaded block after it.
        m = MixedFeed(_Feed(f"l{i}" for i in range(6)), _Feed(["p0"]), 3)
        got = list(m)
        self.assertEqual(got, ["p0"] * 3 + ["l0", "l1", "l2"] + ["p0"] * 3 + ["l3", "l4", "l5"])
        self.assertEqual(len(got), len(m))
        self.assertEqual(m.sources.count("loaderd"), m.sources.count("train_only"))

    def test_bad_block(self):
        with self.assertRaises(ValueError):
            MixedFeed(_Feed([]), _Feed([]), 0)

    def test_empty_preloaded_ends(self):
        self.assertEqual(list(MixedFeed(_Feed(["l0"]), _Feed([]), 2)), [])


class MixedFiguresTest(unittest.TestCase):
    def test_each_side_timed_apart(self):
        # Blocks of 5: training only's steps take 1 ms, loaderd's 2 ms, and
        # the first step of every block 50 ms (the switch): left out with
        # skip=1, as is each block's last step (its successor is the other
        # side's).
        sources, starts, t = [], [], 0.0
        for blk in range(6):
            side = "train_only" if blk % 2 == 0 else "loaderd"
            for k in range(5):
                sources.append(side)
                starts.append(t)
                t += (0.050 if k == 0 else 0.001 if side == "train_only" else 0.002)
        starts.append(t)
        m = mixed_figures(starts, sources, 5, 1)
        self.assertEqual(m["train_only"]["steps"], 9)  # 3 blocks x steps 1-3
        self.assertEqual(m["loaderd"]["steps"], 9)
        self.assertAlmostEqual(m["train_only"]["ms_mean"], 1.0, places=6)
        self.assertAlmostEqual(m["loaderd"]["ms_median"], 2.0, places=6)
        self.assertAlmostEqual(m["loaderd"]["ms_p90"], 2.0, places=6)
        self.assertAlmostEqual(m["ratio_mean"], 2.0, places=6)
        self.assertAlmostEqual(m["ratio_median"], 2.0, places=6)
        # The second halves (steps 2-3 of each block of 5).
        self.assertAlmostEqual(m["train_only"]["late_ms_mean"], 1.0, places=6)
        self.assertAlmostEqual(m["ratio_late"], 2.0, places=6)
        # Six blocks: three pairs of training only's and loaderd's.
        self.assertEqual(len(m["block_ratios"]), 3)
        for r in m["block_ratios"]:
            self.assertAlmostEqual(r, 2.0, places=6)
        # Without the skip the switches' 50 ms land in the figures.
        self.assertGreater(mixed_figures(starts, sources, 5, 0)["train_only"]["ms_mean"], 10)
        self.assertNotIn("cpu_ms_mean", m["loaderd"])
        # The thread's CPU clock: loaderd's steps take 0.5 ms of it, training
        # only's 0.25, the switches 9 ms (left out like their wall time).
        cpus, c = [], 0.0
        for i, side in enumerate(sources):
            cpus.append(c)
            c += 0.009 if i % 5 == 0 else 0.0005 if side == "loaderd" else 0.00025
        cpus.append(c)
        m = mixed_figures(starts, sources, 5, 1, cpus)
        self.assertAlmostEqual(m["loaderd"]["cpu_ms_mean"], 0.5, places=6)
        self.assertAlmostEqual(m["train_only"]["cpu_ms_mean"], 0.25, places=6)
        self.assertNotIn("issue_ms_mean", m["loaderd"])
        # Each step issued in its first 0.4 of a millisecond: the rest of
        # its wall time is before the next one.
        ends = [t + 0.0004 for t in starts[:-1]]
        m = mixed_figures(starts, sources, 5, 1, None, ends)
        self.assertAlmostEqual(m["loaderd"]["issue_ms_mean"], 0.4, places=6)
        self.assertAlmostEqual(m["loaderd"]["between_ms_mean"], 1.6, places=6)
        self.assertAlmostEqual(m["train_only"]["between_ms_mean"], 0.6, places=6)
        # Counters read at each start: loaderd's steps fault 3 pages each,
        # training only's none, each switch 100 (left out like its time).
        faults, f = [], 0
        for i, side in enumerate(sources):
            faults.append(f)
            f += 100 if i % 5 == 0 else 3 if side == "loaderd" else 0
        faults.append(f)
        m = mixed_figures(starts, sources, 5, 1, counters={"minflt": faults, "proc_cpu_ms": [2 * c for c in cpus]})
        self.assertAlmostEqual(m["loaderd"]["minflt_mean"], 3)
        self.assertAlmostEqual(m["train_only"]["minflt_mean"], 0)
        self.assertAlmostEqual(m["loaderd"]["proc_cpu_ms_mean"], 0.001, places=9)

    def test_block_ratios_in_order(self):
        # Blocks of 4, skip 1: each block's steps 1-2 count. Training only
        # takes 1 ms a step throughout; loaderd 1.5 ms in the first pair, 1
        # in the second, 3 in the third.
        sources, starts, t = [], [], 0.0
        for blk, ld_ms in enumerate((1.5, 1.0, 3.0)):
            for side, ms in (("train_only", 1.0), ("loaderd", ld_ms)):
                for k in range(4):
                    sources.append(side)
                    starts.append(t)
                    t += (0.020 if k == 0 else ms / 1e3)
        starts.append(t)
        m = mixed_figures(starts, sources, 4, 1)
        self.assertEqual([round(r, 6) for r in m["block_ratios"]], [1.5, 1.0, 3.0])
        self.assertAlmostEqual(m["ratio_mean"], (1.5 + 1.0 + 3.0) / 3, places=6)

    def test_one_side_only(self):
        # The run's last step is left out too: its end is the GPU's drain.
        m = mixed_figures([0.0, 0.001, 0.002, 0.010], ["train_only"] * 3, 10, 0)
        self.assertEqual(m["train_only"]["steps"], 2)
        self.assertAlmostEqual(m["train_only"]["ms_mean"], 1.0, places=6)
        self.assertNotIn("ratio_mean", m)



class FillOverlapTest(unittest.TestCase):
    def test_steps_beside_and_clear(self):
        ms = 1_000_000
        # Steps of 2 ms from t=0; blocks of 4 (2 preloaded, 2 loaderd).
        starts = [i * 2 * ms for i in range(17)]
        sources = (["train_only"] * 2 + ["loaderd"] * 2) * 4
        # One fill at 4.5 ms of 1 batch, host 0.1 ms, 0.8 ms a batch of
        # GPU: its window 4.5-5.4 ms meets step 2 (4-6 ms) only. Another at
        # 13 ms, 2 batches: 13-14.7 ms, step 6 (12-14) and step 7 (14-16).
        fills = [(13 * ms, 2, 100_000, 3), (int(4.5 * ms), 1, 100_000, 5)]
        o = fill_overlap(starts, sources, 4, 0, fills)
        # Eligible: each block's steps but its last: 0, 2, 4, 6, 8, 10, 12, 14.
        self.assertEqual(o["loaderd"]["beside"]["steps"], 2)  # steps 2 and 6
        self.assertEqual(o["loaderd"]["clear"]["steps"], 2)  # 10, 14
        self.assertEqual(o["train_only"]["beside"]["steps"], 0)
        self.assertEqual(o["train_only"]["clear"]["steps"], 4)
        self.assertAlmostEqual(o["loaderd"]["beside"]["ms_mean"], 2.0)
        # Without sources: every step but the first `skip` and the last.
        o = fill_overlap(starts, None, 1, 2, fills)
        self.assertEqual(o["all"]["beside"]["steps"] + o["all"]["clear"]["steps"], 16 - 2 - 1)
        self.assertEqual(o["all"]["beside"]["steps"], 3)  # steps 2, 6, 7

    def test_fill_waits(self):
        ms = 1_000_000
        # A run of 10 batches in fills of 1, 2, 3 (the ramp) then 4 (the
        # widest), after an earlier run's fill of 5 batches; steps 1 ms apart.
        starts = [100 * ms + i * ms for i in range(11)]
        fills = [(10 * ms, 5, 0, 0), (99 * ms, 1, 0, 0), (100 * ms, 2, 0, 0), (101 * ms, 3, 0, 0), (103 * ms, 4, 0, 0),
                 (200 * ms, 9, 0, 0)]  # after the run's last step: another run's
        gaps = [0.1] * 9
        gaps[0] = 2.0  # before batch 1: the second ramp fill's first
        gaps[2] = 3.0  # before batch 3: the third ramp fill's first
        gaps[5] = 1.5  # before batch 6: the widest fill's first
        gaps[7] = 1.2  # before batch 8: inside a fill
        gaps[8] = 0.9  # under the threshold
        w = fill_waits(starts, gaps, 10, fills)
        self.assertEqual(w["fills"], 4)
        self.assertEqual(w["ramp_fills"], 3)
        self.assertEqual(w["ramp"], [2, 5.0])
        self.assertEqual(w["fill_start"], [1, 1.5])
        self.assertEqual(w["elsewhere"], [1, 1.2])
        # Fills that do not add up to the run's batches: no answer.
        self.assertIsNone(fill_waits(starts, gaps, 10, [(100 * ms, 3, 0, 0), (101 * ms, 4, 0, 0)]))
        # Nor fills that add up but do not start at an epoch's first (one
        # batch): a run cut short, its read-ahead fills never stepped.
        self.assertIsNone(fill_waits(starts, gaps, 10, [(99 * ms, 1, 0, 0), (100 * ms, 3, 0, 0), (101 * ms, 7, 0, 0)]))

    def test_read_fills(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "x.fills")
            with open(path, "w") as f:
                f.write("fill 20 2 5 1 7\nnot a fill\nfill 10 1 3 0 7\n")
            self.assertEqual(read_fills(path), [(10, 1, 3, 0), (20, 2, 5, 1)])


class FillTraceRunTest(unittest.TestCase):
    """bench-train.sh FILL_TRACE=1 in small: a CPU loaderd with --fill-trace,
    train_mixed with --step-trace, and the render lining the two up."""

    def test_trace_and_render(self):
        tmp = tempfile.mkdtemp(prefix="gnnloader-filltrace-")
        try:
            cora = import_cora(tmp)
            out = os.path.join(tmp, "main.json")
            daemon = Daemon(cora, "--gpu=false", "--fill-trace", os.path.join(tmp, "main.fills"))
            try:
                env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
                r = subprocess.run([sys.executable, str(ROOT / "examples" / "bench_train.py"), "--socket", daemon.socket,
                                    "--device", "cpu", "--variants", "train_mixed", "--batch-size", "16", "--fanouts",
                                    "5,3", "--slots", "8", "--mixed-block", "10", "--mixed-skip", "2", "--no-eval",
                                    "--warmup-steps", "0", "--step-trace", "--json-out", out],
                                   env=env, capture_output=True, text=True, timeout=300)
                self.assertEqual(r.returncode, 0, r.stderr[-2000:])
            finally:
                self.assertEqual(daemon.stop(), 0)
            with open(out) as f:
                v = json.load(f)["variants"]["train_mixed"]
            self.assertEqual(len(v["step_starts_ns"]), v["batches"] + 1)
            self.assertEqual(len(v["step_sources"]), v["batches"])
            fills = read_fills(os.path.join(tmp, "main.fills"))
            # The CPU path fills a batch at a time: at least the epoch's
            # batches (the preloaded feed's loader took some first).
            self.assertGreaterEqual(len(fills), v["step_sources"].count("loaderd"))
            rendered = subprocess.run([sys.executable, str(ROOT / "examples" / "bench_train.py"), "--render", out],
                                      env=env, capture_output=True, text=True, timeout=60).stdout
            self.assertIn("train_mixed: steps beside a fill", rendered)
            self.assertIn(f"{len(fills)} fills traced", rendered)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def render_variants(variants):
    """What bench_train.py --render prints for these runs (one JSON file)."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "runs.json")
        with open(path, "w") as f:
            json.dump({"variants": variants}, f)
        return subprocess.run([sys.executable, str(ROOT / "examples" / "bench_train.py"), "--render", path],
                              env=dict(os.environ, PYTHONPATH=str(ROOT / "python")), capture_output=True,
                              text=True, timeout=60).stdout


def epoch_run(ms, **more):
    """A whole-epoch training run of 100 batches at ms a batch, as the bench
    writes it."""
    return {"batches": 100, "ms_per_batch": ms, "wall_s": ms / 10, "batches_per_s": 1000 / ms, "step_ms": ms, **more}


class MixedRenderTest(unittest.TestCase):
    def test_runs_grouped_by_phase(self):
        # Each phase's interleaved runs get their own median: another
        # phase's daemon may differ (its flags, its build).
        def run(ratio):
            side = {"steps": 10, "ms_median": 1.0, "ms_mean": 1.0}
            return {"mixed": {"block": 100, "skip": 16, "loaderd": dict(side, ms_mean=ratio), "train_only": side,
                              "ratio_mean": ratio, "ratio_median": ratio}}
        variants = {"train_mixed": run(1.02), "train_mixed@2": run(1.04), "ng:train_mixed": run(1.20),
                    "ng:train_mixed@2": run(1.30), "ng:train_mixed_fresh": run(1.06),
                    "ng:train_mixed_fresh@2": run(1.10)}
        out = render_variants(variants)
        self.assertIn("over 2 interleaved runs: median 1.030", out)
        self.assertIn("over 2 interleaved runs of ng: median 1.250", out)
        # Each baseline apart: train_mixed_fresh's runs are not train_mixed's.
        self.assertIn("over 2 interleaved runs of train_mixed_fresh in ng: median 1.080", out)


class PhaseRenderTest(unittest.TestCase):
    def test_phase_loaderd_against_each_baseline(self):
        # An EXTRA phase's whole loaderd epoch is set against every
        # whole-epoch baseline run: the main run's and the phase's own,
        # training only on cycled batches and on another epoch's (train_fresh).
        ms = {"loaderd": 5.0, "train_only": 4.0, "train_fresh": 4.2, "c100:loaderd": 4.41, "c100:train_fresh": 4.2,
              "c100:train_only": 4.0}
        out = render_variants({n: epoch_run(v) for n, v in ms.items()})
        line = next((ln for ln in out.splitlines() if ln.startswith("- (d) c100 loaderd")), "")
        self.assertIn("1.10x the main run's training only (4.00 ms)", line)
        self.assertIn("1.05x the main run's train_fresh (4.20 ms)", line)
        self.assertIn("1.05x this phase's train_fresh (4.20 ms)", line)
        self.assertIn("1.10x this phase's training only (4.00 ms)", line)
        self.assertIn("- loaderd epoch / training-only epoch on another epoch's batches (train_fresh) = 1.19", out)

    def test_phase_pairs_in_turn(self):
        # loaderd@k against the same phase's train_fresh@k (train_only@k
        # where no train_fresh ran), and their median.
        ms = {"c100:train_fresh": 3.2, "c100:loaderd": 3.52, "c100:train_fresh@2": 3.7, "c100:loaderd@2": 3.7,
              "c100:train_only@3": 3.0, "c100:loaderd@3": 3.15, "c50:loaderd": 4.0, "train_fresh": 3.5, "loaderd": 4.2,
              "train_only@2": 3.0, "loaderd@2": 4.5}
        out = render_variants({n: epoch_run(v) for n, v in ms.items()})
        self.assertIn("- c100: whole epochs in turn, loaderd 3.52 / train_fresh 3.20 ms = 1.100; loaderd@2 3.70 / "
                      "train_fresh@2 3.70 ms = 1.000; loaderd@3 3.15 / train_only@3 3.00 ms = 1.050; median 1.050 "
                      "(target <= 1.10), 1.000-1.100", out)
        self.assertIn("- main: whole epochs in turn, loaderd 4.20 / train_fresh 3.50 ms = 1.200; loaderd@2 4.50 / "
                      "train_only@2 3.00 ms = 1.500; median 1.350", out)
        self.assertNotIn("- c50: whole epochs", out)  # one loaderd run and no baseline: no pairs


class HostProbeTest(unittest.TestCase):
    def test_probe_on_cpu(self):
        sys.path.insert(0, str(ROOT / "examples"))
        import torch
        from bench_train_probe import probe
        p = probe(torch.device("cpu"), reps=2)
        self.assertGreater(p["py_ms"], 0)
        self.assertNotIn("launch_us", p)  # no CUDA device: no launch burst

    def test_render_correlates_the_baselines(self):
        # Three baseline runs whose ms a batch follow the launch probe
        # exactly, and a loaderd run that is not a baseline.
        def run(ms, launch, py):
            p = {"py_ms": py, "launch_us": launch}
            return epoch_run(ms, host_probe={"before": p, "after": p})
        variants = {"c100:train_fresh": run(3.2, 4.0, 1.0), "c100:loaderd": run(3.5, 9.0, 3.0),
                    "c100:train_fresh@2": run(3.7, 5.0, 1.0), "c100:train_fresh@3": run(4.2, 6.0, 1.5)}
        out = render_variants(variants)
        self.assertIn("c100:loaderd 3.50 (3.00 ms, 9.00 µs)", out)
        self.assertIn("training only's 3 runs: ms a batch against a launch, correlation +1.00", out)
        self.assertIn("training only's 3 runs: ms a batch against the Python loop, correlation +0.87", out)


class MixedRunTest(CoraDaemonCase):
    """train_mixed end to end, as bench-train.sh runs it, on a CPU loaderd
    serving Cora: one epoch of loaderd's batches in blocks, the preloaded
    batches between them, each side timed."""

    def test_train_mixed(self):
        out = os.path.join(self.tmp, "mixed.json")
        env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
        r = subprocess.run([sys.executable, str(ROOT / "examples" / "bench_train.py"), "--socket", self.daemon.socket,
                            "--device", "cpu", "--variants", "train_mixed", "--batch-size", "16", "--fanouts", "5,3",
                            "--slots", "8", "--mixed-block", "10", "--mixed-skip", "2", "--no-eval", "--warmup-steps", "0",
                            "--json-out", out], env=env, capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        with open(out) as f:
            res = json.load(f)
        v = res["variants"]["train_mixed"]
        epoch = res["dataset"]["batches"]  # loaderd's batches an epoch
        self.assertGreater(epoch, 20)
        # loaderd's whole epoch, and a preloaded block before each of its blocks.
        self.assertEqual(v["batches"], epoch + 10 * (-(-epoch // 10)))
        m = v["mixed"]
        self.assertEqual((m["block"], m["skip"]), (10, 2))
        # Per block, the steps after the first two and before the last.
        self.assertEqual(m["loaderd"]["steps"], 7 * (epoch // 10) + max(0, epoch % 10 - 3))
        self.assertEqual(m["train_only"]["steps"], 7 * (-(-epoch // 10)))
        for side in ("loaderd", "train_only"):
            self.assertGreater(m[side]["ms_mean"], 0)
        self.assertAlmostEqual(m["ratio_mean"], m["loaderd"]["ms_mean"] / m["train_only"]["ms_mean"])
        self.assertAlmostEqual(m["ratio_late"], m["loaderd"]["late_ms_mean"] / m["train_only"]["late_ms_mean"])
        rendered = subprocess.run([sys.executable, str(ROOT / "examples" / "bench_train.py"), "--render", out],
                                  env=env, capture_output=True, text=True, timeout=60)
        self.assertIn("train_mixed: blocks of 10 steps in turn", rendered.stdout)
        self.assertIn("p90", rendered.stdout)
        # The process's counters a step, each side: CPU and minor faults.
        for side in ("loaderd", "train_only"):
            self.assertGreater(m[side]["proc_cpu_ms_mean"], 0)
            self.assertGreaterEqual(m[side]["minflt_mean"], 0)
        self.assertIn("the trainer process's CPU ms a step", rendered.stdout)

    def test_run_seeds(self):
        # GNNLOADER_BENCH_RUN_SEEDS=1: train_mixed@K's loaderd side samples
        # with --seed + K - 1 (a new epoch's batches each run); unset, every
        # run samples with --seed.
        for env_value, want in (("1", [7, 8]), ("", [7, 7])):
            out = os.path.join(self.tmp, f"seeds{env_value}.json")
            env = dict(os.environ, PYTHONPATH=str(ROOT / "python"), GNNLOADER_BENCH_RUN_SEEDS=env_value)
            r = subprocess.run([sys.executable, str(ROOT / "examples" / "bench_train.py"), "--socket",
                                self.daemon.socket, "--device", "cpu", "--variants", "train_mixed,train_mixed@2",
                                "--batch-size", "16", "--fanouts", "5,3", "--slots", "8", "--mixed-block", "10",
                                "--mixed-skip", "2", "--no-eval", "--warmup-steps", "0", "--seed", "7",
                                "--max-batches", "30", "--json-out", out], env=env, capture_output=True, text=True,
                               timeout=300)
            self.assertEqual(r.returncode, 0, r.stderr[-2000:])
            with open(out) as f:
                v = json.load(f)["variants"]
            self.assertEqual([v["train_mixed"]["loaderd_seed"], v["train_mixed@2"]["loaderd_seed"]], want)
            # The training-only side is the same 32 batches in both runs, so
            # the runs' nodes a batch differ exactly when loaderd's side
            # sampled another epoch.
            same = v["train_mixed"]["nodes_per_batch"] == v["train_mixed@2"]["nodes_per_batch"]
            self.assertEqual(same, env_value == "", v["train_mixed"]["nodes_per_batch"])

    def test_fresh_shapes_feed(self):
        # Another epoch's batches, each once in order, with their own
        # edge_index, labels and hop sizes; x the first rows of one buffer,
        # as many as the batch has nodes.
        from bench_train_feeds import FreshShapesFeed
        args = types.SimpleNamespace(socket=self.daemon.socket, batch_size=16, fanouts=[5, 3], slots=8,
                                     wait_timeout=60.0)
        feed = FreshShapesFeed(args, "train", 1007, torch.device("cpu"))
        want = []
        with gnnloader.Loader(self.daemon.socket, split="train", batch_size=16, fanouts=[5, 3], shuffle=True,
                              seed=1007, pyg=False) as ld:
            for b in ld:
                want.append((b.n_id.numel(), b.edge_index.clone(), b.y.clone(), list(b.num_sampled_nodes)))
        self.assertEqual(len(feed), len(want))
        self.assertEqual(feed.stored, len(want))  # a whole epoch: no GPU whose memory could run short
        got = list(feed)
        self.assertEqual(len(got), len(want))
        for (x, ei, y, bs, nodes, edges, nn), (wn, wei, wy, wnodes) in zip(got, want):
            self.assertEqual((nn, x.size(0), x.size(1)), (wn, wn, self.x.shape[1]))
            self.assertTrue(torch.equal(ei, wei))
            self.assertTrue(torch.equal(y, wy))
            self.assertEqual((bs, nodes), (wnodes[0], wnodes))
            self.assertEqual(x.data_ptr(), got[0][0].data_ptr())  # one buffer
        # Another seed's epoch has other shapes: what makes them new to the
        # steps beside loaderd's.
        with gnnloader.Loader(self.daemon.socket, split="train", batch_size=16, fanouts=[5, 3], shuffle=True,
                              seed=7, pyg=False) as ld:
            other = [b.n_id.numel() for b in ld]
        self.assertNotEqual(other, [w[0] for w in want])
        feed.close()
        # The first n only, then those again in turn for the epoch's steps.
        few = FreshShapesFeed(args, "train", 1007, torch.device("cpu"), n=3)
        self.assertEqual((few.stored, len(few)), (3, len(want)))
        self.assertEqual([item[6] for item in few], [want[i % 3][0] for i in range(len(want))])
        few.close()

    def test_train_mixed_fresh(self):
        out = os.path.join(self.tmp, "fresh.json")
        env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
        daemon = Daemon(self.cora, "--gpu=false", metrics=True)
        try:
            r = subprocess.run([sys.executable, str(ROOT / "examples" / "bench_train.py"), "--socket", daemon.socket,
                                "--metrics-url", daemon.metrics_url, "--device", "cpu", "--variants",
                                "train_mixed_fresh,train_mixed", "--batch-size", "16", "--fanouts", "5,3", "--slots", "8",
                                "--mixed-block", "10", "--mixed-skip", "2", "--no-eval", "--warmup-steps", "0", "--seed",
                                "3", "--json-out", out], env=env, capture_output=True, text=True, timeout=300)
        finally:
            code = daemon.stop()
        self.assertEqual(code, 0)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        with open(out) as f:
            res = json.load(f)
        v, cyc = res["variants"]["train_mixed_fresh"], res["variants"]["train_mixed"]
        self.assertEqual((v["loaderd_seed"], v["train_only_seed"]), (3, 1003))
        self.assertEqual(v["fresh_batches_stored"], res["dataset"]["batches"])  # no --max-batches: the epoch
        rendered = subprocess.run([sys.executable, str(ROOT / "examples" / "bench_train.py"), "--render", out],
                                  env=env, capture_output=True, text=True, timeout=60).stdout
        self.assertIn(f"training only over {res['dataset']['batches']} batches of another epoch (seed 1003)", rendered)
        epoch = res["dataset"]["batches"]
        self.assertEqual(v["batches"], epoch + 10 * (-(-epoch // 10)))
        self.assertEqual(v["mixed"]["train_only"]["steps"], 7 * (-(-epoch // 10)))
        # The same loaderd side (seed 3) in both; the training-only sides
        # differ (another epoch's batches against 32 of seed 3's, cycled).
        self.assertEqual(v["batches"], cyc["batches"])
        self.assertNotEqual(v["nodes_per_batch"], cyc["nodes_per_batch"])
        # The daemon's figures leave out the epoch filled for the preload:
        # loaderd's epoch and what its slots held ahead, not two epochs.
        self.assertGreaterEqual(v["daemon"]["filled_batches"], epoch)
        self.assertLess(v["daemon"]["filled_batches"], epoch + 16)

    def test_train_fresh(self):
        # A whole epoch of training only on another epoch's batches, then
        # loaderd's: the table prints loaderd's epoch against it.
        out = os.path.join(self.tmp, "trainfresh.json")
        env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
        r = subprocess.run([sys.executable, str(ROOT / "examples" / "bench_train.py"), "--socket", self.daemon.socket,
                            "--device", "cpu", "--variants", "train_fresh,loaderd", "--batch-size", "16", "--fanouts",
                            "5,3", "--slots", "8", "--no-eval", "--warmup-steps", "0", "--seed", "4", "--json-out", out],
                           env=env, capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        with open(out) as f:
            res = json.load(f)
        v = res["variants"]["train_fresh"]
        self.assertEqual(v["train_only_seed"], 1004)
        self.assertEqual(v["fresh_batches_stored"], res["dataset"]["batches"])
        self.assertEqual(v["batches"], res["dataset"]["batches"])  # an epoch, each batch once
        rendered = subprocess.run([sys.executable, str(ROOT / "examples" / "bench_train.py"), "--render", out],
                                  env=env, capture_output=True, text=True, timeout=60).stdout
        ratio = res["variants"]["loaderd"]["wall_s"] / v["wall_s"]
        self.assertIn(f"loaderd epoch / training-only epoch on another epoch's batches (train_fresh) = {ratio:.2f}",
                      rendered)
        self.assertIn(f"{v['batches']} batches stored for its {v['batches']} steps", rendered)
        # The host probe beside each run: taken before and after it, on the
        # CPU the Python loop only.
        for name in ("train_fresh", "loaderd"):
            hp = res["variants"][name]["host_probe"]
            self.assertGreater(hp["before"]["py_ms"], 0)
            self.assertGreater(hp["after"]["py_ms"], 0)
        self.assertIn(f"train_fresh {v['ms_per_batch']:.2f} (", rendered)

    def test_run_index(self):
        from bench_train_render import run_index
        self.assertEqual([run_index("train_mixed"), run_index("train_mixed@3"), run_index("c100:train_mixed@12")],
                         [1, 3, 12])


if __name__ == "__main__":
    unittest.main()

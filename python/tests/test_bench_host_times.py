"""The training benchmark's host figures of the trainer's thread
(examples/bench_train_model.py run_epoch): how long issuing a step takes and
how long the thread spends between steps, which say whether a step is bound
by the Python thread rather than by the GPU."""
import os
import sys
import threading
import time
import types
import unittest

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))

from bench_train_measure import gap_figures  # noqa: E402
from bench_train_render import median  # noqa: E402
from bench_train_model import allocator_counts, allocator_taken, run_epoch  # noqa: E402
from bench_train_feeds import SpinFeed  # noqa: E402


class SlowModel(torch.nn.Module):
    """A linear layer whose forward also sleeps: a step that takes at least
    `sleep` seconds of host time to issue."""

    def __init__(self, sleep):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)
        self.sleep = sleep

    def forward(self, x, edge_index, nodes, edges):
        time.sleep(self.sleep)
        return self.lin(x)


def slow_feed(n, gap, first=0.0):
    """n batches of 8 nodes, `first` seconds before the first and `gap`
    seconds before each after it."""
    for i in range(n):
        time.sleep(gap if i else first)
        yield torch.randn(8, 4), torch.zeros(2, 0, dtype=torch.long), torch.randint(0, 3, (8,)), 8, [8], [0], 8


class HostTimesTest(unittest.TestCase):
    def test_issue_and_between(self):
        args = types.SimpleNamespace(train_stream="default", hard_end=0, variant_name="t")
        model = SlowModel(0.02)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        r = run_epoch(args, slow_feed(6, 0.1, first=0.05), torch.device("cpu"), model, opt)
        self.assertEqual(r["batches"], 6)
        # The epoch's start-up: the feed's first sleep, not its later ones.
        self.assertGreaterEqual(r["first_ms"], 50)
        self.assertLess(r["first_ms"], 100)
        # Issuing covers the model's sleep, not the feed's (it would be at
        # least 120 ms then); between covers the feed's, not the model's.
        self.assertGreaterEqual(r["issue_ms"], 20)
        self.assertLess(r["issue_ms"], 100)
        self.assertGreaterEqual(r["between_ms"], 100)
        self.assertLess(r["between_ms"], 120 + 60)
        # A sleeping thread uses little CPU.
        self.assertLess(r["issue_cpu_ms"], r["issue_ms"])
        # Sleeping blocks the thread: the model's and the feed's sleeps (11
        # over 6 batches) are voluntary switches.
        self.assertGreaterEqual(r["switches"]["voluntary"], 1)
        self.assertLess(r["between_cpu_ms"], r["between_ms"])
        # On the CPU the step is timed on the host, inside the issue window.
        self.assertLessEqual(r["step_ms"], r["issue_ms"])


def spin(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


class OtherThreadModel(torch.nn.Module):
    """A linear layer whose forward waits for another thread that uses
    `cpu` seconds of CPU, as the autograd engine's thread issues a CUDA
    backward while the calling thread waits."""

    def __init__(self, cpu):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)
        self.cpu = cpu

    def forward(self, x, edge_index, nodes, edges):
        t = threading.Thread(target=spin, args=(self.cpu,))
        t.start()
        t.join()
        return self.lin(x)


class ProcessAndSpinTest(unittest.TestCase):
    def test_process_cpu_counts_other_threads(self):
        args = types.SimpleNamespace(train_stream="default", hard_end=0, variant_name="t")
        model = OtherThreadModel(0.03)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        r = run_epoch(args, slow_feed(4, 0.0), torch.device("cpu"), model, opt)
        # The other thread's 30 ms a step are the process's, not the thread's.
        self.assertGreaterEqual(r["process_cpu_ms"], 30)
        self.assertLess(r["issue_cpu_ms"], 20)

    def test_spin_feed(self):
        args = types.SimpleNamespace(train_stream="default", hard_end=0, variant_name="t")
        model = SlowModel(0.0)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        feed = SpinFeed(list(slow_feed(5, 0.0)), 20000)
        self.assertEqual(len(feed), 5)
        r = run_epoch(args, feed, torch.device("cpu"), model, opt)
        self.assertEqual(r["batches"], 5)
        # 20 ms spun on the thread's CPU before each step, not slept (a
        # sleep would leave its CPU time near 0). A loaded machine may take
        # the CPU from the spinning thread for part of its 20 ms, so only a
        # quarter of it is asked for.
        self.assertGreaterEqual(r["between_ms"], 20)
        self.assertGreaterEqual(r["between_cpu_ms"], 5)


class AllocatorTest(unittest.TestCase):
    def test_counters_risen_not_bytes_held(self):
        before = {"segments_allocated": 3, "segments_freed": 1, "alloc_retries": 0, "reserved_bytes": 1 << 30}
        after = {"segments_allocated": 11, "segments_freed": 1, "alloc_retries": 2, "reserved_bytes": 1 << 31}
        self.assertEqual(allocator_taken(before, after),
                         {"segments_allocated": 8, "segments_freed": 0, "alloc_retries": 2})
        # No CUDA: no counters, nothing taken.
        cpu = allocator_counts(torch.device("cpu"))
        self.assertEqual(cpu, {})
        self.assertEqual(allocator_taken(cpu, cpu), {})


class GapFiguresTest(unittest.TestCase):
    def test_summary(self):
        # GPU time between steps: mostly 0.1 ms, two stalls of 5 and 3 ms
        # after steps 3 and 7 (gap i follows step i + 1).
        gaps = [0.1, 0.1, 5.0, 0.1, 0.1, 0.1, 3.0, 0.1]
        g = gap_figures(gaps)
        self.assertAlmostEqual(g["gap_ms"], sum(gaps) / 8)
        self.assertAlmostEqual(g["gap_median_ms"], 0.1)
        self.assertEqual(g["gap_max_ms"], 5.0)
        self.assertEqual(g["gaps_big"], 2)
        self.assertEqual(g["gaps_big_at"], [3, 7])
        self.assertAlmostEqual(g["gaps_big_share"], 8.0 / sum(gaps))
        self.assertEqual(gap_figures([]), {})


class MedianTest(unittest.TestCase):
    def test_median(self):
        # The paired ratios' verdict line: odd and even counts, unsorted.
        self.assertEqual(median([1.41, 0.97, 1.01]), 1.01)
        self.assertAlmostEqual(median([1.2, 1.0, 1.1, 1.3]), 1.15)
        self.assertEqual(median([1.07]), 1.07)


if __name__ == "__main__":
    unittest.main()

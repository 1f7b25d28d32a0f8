"""The training benchmark's GPU clock summary (examples/bench_train_measure.py):
what `nvidia-smi -lms` prints while a variant runs, reduced to the figures the
render prints beside each variant."""
import os
import sys
import unittest

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))

from bench_train_clocks import ClockSampler, summarize_clocks  # noqa: E402


class ClockSummaryTest(unittest.TestCase):
    def test_summary(self):
        text = "\n".join([
            "clocks.current.sm [MHz], clocks.current.memory [MHz], power.draw [W], temperature.gpu, clocks_event_reasons.active",
            "1980, 2619, 412.50, 51, 0x0000000000000000",
            "1755, 2619, 640.25, 58, 0x0000000000000004",  # power cap
            "1980, 2619, 500.00, 55, 0x0000000000000001",  # idle: not a slowdown
            "[N/A], 2619, 500.00, 55, 0x0",  # a field the driver lacks
            "1500, 2619",  # a torn last line
        ])
        s = summarize_clocks(text)
        self.assertEqual(s["samples"], 3)
        self.assertAlmostEqual(s["sm_mhz_mean"], (1980 + 1755 + 1980) / 3)
        self.assertEqual(s["sm_mhz_min"], 1755)
        self.assertAlmostEqual(s["power_w_mean"], (412.5 + 640.25 + 500) / 3)
        self.assertEqual(s["temp_c_max"], 58)
        self.assertEqual(s["event_reasons"], ["0x4"])

    def test_nothing_parsed(self):
        self.assertEqual(summarize_clocks(""), {})
        self.assertEqual(summarize_clocks("No devices were found\n"), {})

    def test_cpu_device_samples_nothing(self):
        c = ClockSampler(torch.device("cpu"))
        self.assertIsNone(c.proc)
        self.assertEqual(c.stop(), {})


if __name__ == "__main__":
    unittest.main()

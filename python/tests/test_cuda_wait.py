"""The CUDA client's choice of wait, without a GPU: the ready word where the
ring has words and the batch a value, the ready event otherwise or once a
wait on a word has failed; a ring that does not fit the allocation its
memory handle opened is refused, words that do not fit are not used; a
driver library without the calls leaves them out."""

import os
import sys
import unittest
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import gnnloader.protocol as P  # noqa: E402
from gnnloader.cuda import CudaRuntimeError, CudaSlots, _driver_calls, ring_fits  # noqa: E402


class FakeRuntime:
    def __init__(self, fail_value=False):
        self.calls = []
        self.fail_value = fail_value

    def wait_value(self, stream, addr, value):
        if self.fail_value:
            raise CudaRuntimeError("cuStreamWaitValue32: CUDA_ERROR_NOT_SUPPORTED (801)")
        self.calls.append(("value", stream, addr, value))

    def wait(self, stream, event):
        self.calls.append(("event", stream, event))


def slots(rt, words):
    s = CudaSlots.__new__(CudaSlots)  # no device: only the wait's choice is under test
    s.rt, s.words, s.ready = rt, words, [100, 101, 102]
    return s


class WaitChoiceTest(unittest.TestCase):
    def test_word_when_ring_and_batch_have_one(self):
        rt = FakeRuntime()
        slots(rt, 0x1000)._wait_on(7, 2, 5)
        self.assertEqual(rt.calls, [("value", 7, 0x1000 + 8, 5)])

    def test_event_without_words_or_value(self):
        rt = FakeRuntime()
        slots(rt, 0)._wait_on(7, 1, 5)  # the daemon or driver has no words
        slots(rt, 0x1000)._wait_on(7, 1, 0)  # the batch names no value
        self.assertEqual(rt.calls, [("event", 7, 101), ("event", 7, 101)])

    def test_failed_word_wait_falls_back_to_events_for_good(self):
        rt = FakeRuntime(fail_value=True)
        s = slots(rt, 0x1000)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            s._wait_on(7, 0, 3)
        self.assertEqual(rt.calls, [("event", 7, 100)])
        self.assertEqual(s.words, 0)
        self.assertTrue(any("ready events instead of ready words" in str(x.message) for x in w))
        rt.fail_value = False
        s._wait_on(7, 2, 4)
        self.assertEqual(rt.calls[-1], ("event", 7, 102))


class RingFitsTest(unittest.TestCase):
    def opened(self, words):
        return P.Opened(slots=3, slot_bytes=1024, memory="cuda", ready_words=words)

    def test_fits(self):
        self.assertTrue(ring_fits(self.opened(3072), 3072 + 256))
        self.assertTrue(ring_fits(self.opened(0), 3072))
        self.assertTrue(ring_fits(self.opened(3072), None))  # the driver cannot say: trusted

    def test_words_past_the_allocation_are_not_used(self):
        self.assertFalse(ring_fits(self.opened(3072), 3072 + 8))  # 3 words need 12 bytes
        self.assertFalse(ring_fits(self.opened(1 << 40), 3072 + 256))

    def test_slots_past_the_allocation_are_refused(self):
        with self.assertRaisesRegex(CudaRuntimeError, "3 slots of 1024 bytes do not fit the 3000-byte allocation"):
            ring_fits(self.opened(0), 3000)


class DriverCallsTest(unittest.TestCase):
    def test_missing_library_or_symbols(self):
        class Lib:  # a driver with the error names only
            def __init__(self):
                self.cuGetErrorName = lambda *a: 0

        wait, err, rng = _driver_calls(Lib())
        self.assertIsNone(wait)
        self.assertIsNotNone(err)
        self.assertIsNone(rng)
        self.assertEqual(_driver_calls(object()), (None, None, None))


if __name__ == "__main__":
    unittest.main()

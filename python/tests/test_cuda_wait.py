"""The CUDA client's choice of wait, without a GPU: the ready word where the
ring has words and the batch a value, the ready event otherwise or once a
wait on a word has failed; a ring that does not fit the allocation its
memory handle opened is refused, words that do not fit are not used; a
driver library without the calls leaves them out."""

import contextlib
import os
import sys
import time
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
    s.rt, s.words, s.ready, s.waited, s.last_wait = rt, words, [100, 101, 102, 103, 104], {}, (None, 0)
    return s


class WaitChoiceTest(unittest.TestCase):
    def test_word_when_ring_and_batch_have_one(self):
        rt = FakeRuntime()
        s = slots(rt, 0x1000)
        s._wait_on(7, 2, 5)
        self.assertEqual(rt.calls, [("value", 7, 0x1000 + 8, 5)])
        self.assertEqual(s.waited, {2: 5})  # what a dead daemon's close must end (unblock_waits)

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


class WaitOnceAFillTest(unittest.TestCase):
    """Protocol 5: every slot of a fill takes one ready value, rising fill by
    fill, so a stream waits once a fill, not once a batch."""

    def test_one_wait_a_fill_on_one_stream(self):
        rt = FakeRuntime()
        s = slots(rt, 0x1000)
        for slot, value in ((0, 5), (1, 5), (2, 5), (3, 6), (4, 6), (0, 6)):
            s._wait_on(7, slot, value)
        self.assertEqual(rt.calls, [("value", 7, 0x1000, 5), ("value", 7, 0x1000 + 12, 6)])
        self.assertEqual(s.waited, {0: 6, 1: 5, 2: 5, 3: 6, 4: 6})  # all of them, for unblock_waits

    def test_another_stream_waits_for_itself(self):
        rt = FakeRuntime()
        s = slots(rt, 0x1000)
        s._wait_on(7, 0, 5)
        s._wait_on(9, 1, 5)  # stream 9 never waited: it must
        s._wait_on(7, 2, 5)  # stream 7 again, after 9's wait: it waits (one stream remembered)
        self.assertEqual([c[1] for c in rt.calls], [7, 9, 7])

    def test_values_wrap_around(self):
        rt = FakeRuntime()
        s = slots(rt, 0x1000)
        s._wait_on(7, 0, 0xFFFFFFFF)
        s._wait_on(7, 1, 1)  # the fill after 0xFFFFFFFF (0 is skipped): later, waited for
        s._wait_on(7, 2, 0xFFFFFFFF)  # before 1: done already
        self.assertEqual([c[3] for c in rt.calls], [0xFFFFFFFF, 1])

    def test_events_are_waited_for_every_batch(self):
        rt = FakeRuntime()
        s = slots(rt, 0)
        for slot in range(3):
            s._wait_on(7, slot, 5)
        self.assertEqual(rt.calls, [("event", 7, 100), ("event", 7, 101), ("event", 7, 102)])


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

        wait, err, rng, *unblock = _driver_calls(Lib())
        self.assertIsNone(wait)
        self.assertIsNotNone(err)
        self.assertIsNone(rng)
        self.assertEqual(unblock, [None] * 6)
        self.assertEqual(_driver_calls(object()), (None,) * 9)


class UnblockRuntime:
    """What unblock_waits calls, over a fake ring's words."""

    def __init__(self, words):
        self.words, self.calls = list(words), []
        self.can_unblock = True

    @contextlib.contextmanager
    def own_stream(self):
        self.calls.append("stream")
        yield 9
        self.calls.append("synchronized")

    def read_words(self, stream, addr, n):
        self.calls.append(("read", stream, addr, n))
        return self.words[:n]

    def zero(self, stream, addr, n):
        self.calls.append(("zero", stream, addr, n))

    def write_value(self, stream, addr, value):
        self.calls.append(("write", stream, addr, value))


def ring(rt, waited, words=0x9000):
    s = CudaSlots.__new__(CudaSlots)
    s.rt, s.words, s.ptr, s.slot_bytes, s.waited, s.last_wait = rt, words, 0x1000, 0x100, dict(waited), (7, 9)
    return s


class UnblockWaitsTest(unittest.TestCase):
    """A daemon killed with fills queued: the waits for words those fills
    were to write are ended by the client at close (zeroed slot, then the
    word), and only those."""

    def test_only_words_behind_their_waits_and_only_once_the_daemon_is_gone(self):
        rt = UnblockRuntime([7, 3, 5, 0xFFFFFFFF])
        # slot 0 waited for 7 (reached), 1 for 4 (behind), 2 for 2 (ahead:
        # a later fill), 3 for 1 (ahead across the wrap: 0xFFFFFFFF < 1).
        s = ring(rt, {0: 7, 1: 4, 2: 2, 3: 1})
        asked = []

        def gone():
            asked.append(1)
            return len(asked) >= 3  # the daemon's exit takes a moment after the socket's close
        self.assertEqual(s.unblock_waits(gone), [1, 3])
        # Every slot cut zeroed before any word: a stream that waited on one
        # slot's word reads the other slots of its fill after it.
        self.assertEqual(rt.calls[-5:], [("zero", 9, 0x1100, 0x100), ("zero", 9, 0x1300, 0x100),
                                         ("write", 9, 0x9004, 4), ("write", 9, 0x900C, 1), "synchronized"])
        self.assertEqual(len(asked), 3)
        self.assertEqual((s.waited, s.last_wait), ({}, (None, 0)))  # the next batch waits again
        self.assertEqual(s.unblock_waits(gone), [])  # nothing waits any more

    def test_a_daemon_that_stays_writes_its_own_words(self):
        rt = UnblockRuntime([3])
        s = ring(rt, {0: 4})
        self.assertEqual(s.unblock_waits(lambda: False, wait=0.05), [])
        self.assertFalse(any(c[0] in ("zero", "write") for c in rt.calls if isinstance(c, tuple)))

    def test_words_that_catch_up(self):
        rt = UnblockRuntime([3])
        s = ring(rt, {0: 4})
        real = rt.read_words

        def read(*a):
            words = real(*a)
            rt.words = [4]  # the fill ends while close waits
            return words
        rt.read_words = read
        self.assertEqual(s.unblock_waits(lambda: False), [])

    def test_nothing_without_words_or_calls(self):
        for rt, words in ((UnblockRuntime([0]), 0), (UnblockRuntime([0]), 0x9000)):
            if words:
                rt.can_unblock = False
            self.assertEqual(ring(rt, {0: 4}, words).unblock_waits(lambda: True), [])
            self.assertEqual(rt.calls, [])


class ProcessGoneTest(unittest.TestCase):
    def test_states(self):
        import subprocess
        from gnnloader._connection import _process_gone
        self.assertFalse(_process_gone(os.getpid()))
        self.assertFalse(_process_gone(0))  # a peer in another PID namespace: unknown
        p = subprocess.Popen(["sleep", "30"])
        try:
            self.assertFalse(_process_gone(p.pid))
            p.kill()
            deadline = time.monotonic() + 10
            while not _process_gone(p.pid):  # a zombie until reaped: gone already
                self.assertLess(time.monotonic(), deadline)
                time.sleep(0.01)
        finally:
            p.kill()
            p.wait()
        self.assertTrue(_process_gone(p.pid))


if __name__ == "__main__":
    unittest.main()

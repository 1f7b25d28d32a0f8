package serve

// The collector's pace for a daemon whose heap is mostly its dataset.

import (
	"os"
	"runtime"
	"runtime/debug"
)

// GarbageAllowance is how much garbage the daemon lets accumulate between
// collections (PaceCollector), rather than GOGC's default of as much as
// the live heap.
//
// Go collects once the heap has grown by GOGC percent (100) of what the
// last collection left live. The daemon's live heap is mostly the dataset's
// arrays: papers100M's graph is 7.4 GB on the Go heap (and its features too
// on the CPU path), so by default as much garbage again (each Open's and
// each epoch's buffers) accumulates before a collection: on an H200 the
// daemon's RSS grew about 0.12 GB a trainer run, 0.8 GB over six, with no
// collection in sight (session 28, GODEBUG=gctrace=1). Those arrays hold
// no pointers, so marking them costs little (a cycle took 0.6-0.9 ms of
// wall time there): collecting at a fixed allowance keeps the RSS near the
// dataset for little CPU.
const GarbageAllowance = 1 << 30

// gcPercent is the GOGC percent that lets allowance bytes of garbage
// accumulate over live bytes of live heap: 100 (the default) for a heap of
// allowance bytes or less, at least 10.
func gcPercent(live, allowance uint64) int {
	if live <= allowance {
		return 100
	}
	return max(10, int(100*allowance/live))
}

// PaceCollector collects, then sets the collector's percent for the heap
// left live (gcPercent with GarbageAllowance), and returns both; set is
// false, and nothing is changed, when GOGC is set in the environment (the
// user's choice stands). Call it once the dataset is loaded. Above 10 GiB
// of live heap the allowance is a tenth of it (gcPercent's floor).
func PaceCollector() (percent int, live uint64, set bool) {
	return paceCollector(GarbageAllowance)
}

func paceCollector(allowance uint64) (percent int, live uint64, set bool) {
	if os.Getenv("GOGC") != "" { // set but empty is the default, for the runtime too
		return 0, 0, false
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	percent = gcPercent(ms.HeapAlloc, allowance)
	debug.SetGCPercent(percent)
	return percent, ms.HeapAlloc, true
}

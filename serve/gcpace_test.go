package serve

import (
	"os"
	"runtime/debug"
	"testing"
)

func TestGCPercent(t *testing.T) {
	const g = GarbageAllowance
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, 100},
		{g, 100},            // garbage as large as the heap: the default
		{g + 1, 99},         // just over: a little less than the default
		{2 * g, 50},         // 1 GiB over 2 GiB live
		{7_400_000_000, 14}, // papers100M's graph on the heap
		{10 * g, 10},        // the floor
		{100 * g, 10},       // stays at the floor
	} {
		if got := gcPercent(c.live, g); got != c.want {
			t.Errorf("gcPercent(%d) = %d, want %d", c.live, got, c.want)
		}
	}
}

// TestPaceCollector: with GOGC in the environment the user's percent
// stands; without it, the percent is set for the heap live now.
func TestPaceCollector(t *testing.T) {
	old := debug.SetGCPercent(300)
	defer debug.SetGCPercent(old)
	t.Setenv("GOGC", "300")
	if _, _, set := paceCollector(16 << 20); set {
		t.Fatal("PaceCollector changed the percent with GOGC set")
	}
	if p := debug.SetGCPercent(300); p != 300 {
		t.Fatalf("percent %d after PaceCollector with GOGC=300, want 300", p)
	}

	os.Setenv("GOGC", "")        // set but empty: the default, as for the runtime (t.Setenv puts it back)
	hold := make([]byte, 64<<20) // 64 MiB live across the call, against a 16 MiB allowance
	for i := range hold {
		hold[i] = byte(i)
	}
	percent, live, set := paceCollector(16 << 20)
	if !set {
		t.Fatal("PaceCollector did not set the percent without GOGC")
	}
	if live < uint64(len(hold)) {
		t.Errorf("live heap %d, less than the %d bytes held", live, len(hold))
	}
	if percent != gcPercent(live, 16<<20) || percent > 25 {
		t.Errorf("percent %d for %d live bytes, want gcPercent's %d (at most 25)", percent, live, gcPercent(live, 16<<20))
	}
	if p := debug.SetGCPercent(300); p != percent {
		t.Errorf("the runtime's percent is %d, want %d", p, percent)
	}
	hold[len(hold)-1]++ // held until here
}

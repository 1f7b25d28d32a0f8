package serve

// The GPU sampling lanes' configuration and count; neither needs a GPU.

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gnnloader/gnnloader/sampler"
)

// TestEnableGPUSampleLanes: a lane count outside 1 to sampler.MaxLanes (0
// being the default) is refused before anything else, naming the range; it
// needs no GPU.
func TestEnableGPUSampleLanes(t *testing.T) {
	srv, _ := testServer(t, Config{})
	for _, lanes := range []int{-1, sampler.MaxLanes + 1} {
		err := srv.EnableGPU(GPUConfig{SampleLanes: lanes})
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%d GPU sampling lanes: want 1 to %d", lanes, sampler.MaxLanes)) {
			t.Errorf("SampleLanes %d: %v, want the lanes' range", lanes, err)
		}
	}
	if err := srv.EnableGPU(GPUConfig{SampleLanes: 4}); err == nil || strings.Contains(err.Error(), "lanes") {
		t.Errorf("SampleLanes 4 on a source without pinned tables: %v, want the pinned tables' error", err)
	}
}

// TestLanesWithin: the lanes past the first stay within the budget, at
// least one lane, never more than asked.
func TestLanesWithin(t *testing.T) {
	for _, tc := range []struct {
		want        int
		per, budget int64
		got         int
	}{
		{8, 55_248_904, 1 << 30, 8},   // papers100M's batches: all 8
		{32, 55_248_904, 1 << 30, 20}, // 1 + 19 lanes of 55 MB within 1 GiB
		{8, 200 << 20, 1 << 30, 6},    // 1 + 5
		{8, 3 << 30, 1 << 30, 1},      // one lane over the budget: still one
		{1, 10, 1 << 30, 1},           // asked for one
		{8, 0, 1 << 30, 8},            // nothing a lane
	} {
		if got := lanesWithin(tc.want, tc.per, tc.budget); got != tc.got {
			t.Errorf("lanesWithin(%d, %d, %d) = %d, want %d", tc.want, tc.per, tc.budget, got, tc.got)
		}
	}
}

package serve

// The GPU sampling lanes' configuration and count, and the GPU slot
// memory they are counted against before they are allocated; none of it
// needs a GPU.

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/gnnloader/gnnloader/gather"
	"github.com/gnnloader/gnnloader/ipc"
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

// TestLanesInSlotMemory: the most lanes, at most those wanted, that fit
// beside the fixed bytes in what is left of the slot memory; 0 where not
// one does; no cap without a slot memory; no overflow however large a
// lane.
func TestLanesInSlotMemory(t *testing.T) {
	const mb = 1 << 20
	for _, tc := range []struct {
		name                    string
		want                    int
		per, fixed, limit, used int64
		got                     int
	}{
		{"fits all", 8, 55 * mb, 2 * mb, 1 << 30, 100 * mb, 8},
		{"fits all to the byte", 8, 55 * mb, 2 * mb, 100*mb + 2*mb + 8*55*mb, 100 * mb, 8},
		{"fits some", 8, 55 * mb, 2 * mb, 100*mb + 2*mb + 8*55*mb - 1, 100 * mb, 7},
		{"fits three", 8, 55 * mb, 2 * mb, 400 * mb, 200 * mb, 3},
		{"fits only one", 8, 55 * mb, 2 * mb, 100*mb + 2*mb + 2*55*mb - 1, 100 * mb, 1},
		{"one to the byte", 1, 55 * mb, 2 * mb, 100*mb + 2*mb + 55*mb, 100 * mb, 1},
		{"fits none", 8, 55 * mb, 2 * mb, 100*mb + 2*mb + 55*mb - 1, 100 * mb, 0},
		{"not even the fixed bytes", 8, 55 * mb, 2 * mb, 101 * mb, 100 * mb, 0},
		{"fixed bytes over what is left by many lanes", 8, mb, 100 * mb, 150 * mb, 100 * mb, 0},
		{"nothing left", 8, 55 * mb, 2 * mb, 100 * mb, 100 * mb, 0},
		{"more in use than the cap", 8, 55 * mb, 2 * mb, 100 * mb, 200 * mb, 0},
		{"no slot memory: no cap", 8, 55 * mb, 2 * mb, 0, 1 << 40, 8},
		{"no slot memory, a hostile lane", 32, math.MaxInt64, math.MaxInt64, 0, math.MaxInt64, 32},
		{"a hostile lane", 8, math.MaxInt64, 2 * mb, math.MaxInt64, 0, 0},
		{"a hostile lane, all free", 8, math.MaxInt64 / 2, 0, math.MaxInt64, 0, 2},
		{"hostile fixed bytes", 8, 55 * mb, math.MaxInt64, math.MaxInt64, 1, 0},
		{"nothing a lane", 8, 0, 2 * mb, 100 * mb, 50 * mb, 8},
		{"a huge cap", 32, 1, 0, math.MaxInt64, 0, 32},
	} {
		if got := lanesInSlotMemory(tc.want, tc.per, tc.fixed, tc.limit, tc.used); got != tc.got {
			t.Errorf("%s: lanesInSlotMemory(%d, %d, %d, %d, %d) = %d, want %d", tc.name, tc.want, tc.per, tc.fixed, tc.limit, tc.used, got, tc.got)
		}
	}
}

// TestSamplingForPredicts: the memory counted for a ring's GPU sampling
// before it is made is what deviceSampling.bytes counts once it is, for a
// sampler of its lanes (sampler's TestGPUBytes: lanes x GPULaneBytes +
// GPUFixedBytes); its lanes are the configured ones, at most the sweep,
// within sampleLaneBudget.
func TestSamplingForPredicts(t *testing.T) {
	// The sampling's own buffers, beside its sampler: a fill's seeds (8
	// bytes each) and countsRing fills' counts (CountsLen(3) = 10 of 8
	// bytes each a batch).
	if got, want := samplingBytes(0, 1024, sampler.CountsLen(3)), int64(gather.MaxDeviceParts)*(8*1024+countsRing*8*10); got != want {
		t.Errorf("the buffers of a GPU sampling of batches of 1024 at 3 hops: %d bytes, want %d", got, want)
	}
	papers := &sampler.DeviceGraph{NumNodes: 111_059_956, NumEdges: 1_615_685_872}
	for _, tc := range []struct {
		fanouts     []int
		batch       int
		cfg, sweep  int
		lanes       int
		maxDegree   int64
		description string
	}{
		{[]int{15, 10, 5}, 1024, 8, 16, 8, 100_000, "papers100M's batches: the configured 8"},
		{[]int{15, 10, 5}, 1024, 8, 3, 3, 100_000, "a sweep of 3"},
		{[]int{-1, -1}, 1024, 8, 16, 1, 100_000, "every neighbour: one lane over the budget"},
		{[]int{2}, 1, 32, 32, 32, 5, "a tiny batch"},
	} {
		b := &gpuBackend{cfg: GPUConfig{SampleLanes: tc.cfg}, graphs: map[int]*sampler.DeviceGraph{0: papers}}
		req := &request{fanouts: tc.fanouts, maxSeeds: tc.batch}
		m, err := b.samplingFor(0, req, tc.maxDegree, tc.sweep)
		if err != nil {
			t.Fatalf("%s: %v", tc.description, err)
		}
		if m.lanes != tc.lanes {
			t.Errorf("%s: %d lanes, want %d", tc.description, m.lanes, tc.lanes)
		}
		per, err := sampler.GPULaneBytes(papers, tc.fanouts, tc.batch, tc.maxDegree)
		if err != nil {
			t.Fatal(err)
		}
		d := &deviceSampling{gs: &sampler.GPU{Bytes: int64(m.lanes)*per + sampler.GPUFixedBytes}, batch: tc.batch, clen: sampler.CountsLen(len(tc.fanouts))}
		if m.bytes() != d.bytes() {
			t.Errorf("%s: %d bytes counted before the sampling is made, %d once it is", tc.description, m.bytes(), d.bytes())
		}
	}
}

// TestReserveRing: a trainer's slots and GPU sampling are counted against
// the slot memory before they are allocated: the sampling's lanes cut to
// what is left beside the slots and the sweep planning still to come, a
// trainer refused (busy, nothing counted) when not one lane fits, or its
// slots and planning alone do not; without a slot memory all of it is
// counted, uncut. Concurrent Opens never take more than the slot memory
// between them.
func TestReserveRing(t *testing.T) {
	const (
		ring  = 100 << 20 // the slots' bytes
		per   = 50 << 20  // a lane's
		fixed = 3 << 20
		plan  = 20 << 20 // the sweep planning's
	)
	sampling := func(lanes int) *samplingMemory { return &samplingMemory{lanes: lanes, per: per, fixed: fixed} }
	for _, tc := range []struct {
		name        string
		limit, used int64
		plan        int64 // the sweep planning's bytes, counted later
		sampling    *samplingMemory
		lanes       int    // 0: refused
		text        string // the refusal's
	}{
		{"no slot memory", 0, 1 << 40, plan, sampling(8), 8, ""},
		{"all the lanes", ring + fixed + 8*per, 0, 0, sampling(8), 8, ""},
		{"all the lanes and the planning", ring + plan + fixed + 8*per, 0, plan, sampling(8), 8, ""},
		{"some lanes", 10<<20 + ring + fixed + 5*per + per - 1, 10 << 20, 0, sampling(8), 5, ""},
		{"some lanes, room left for the planning", 10<<20 + ring + plan + fixed + 5*per + per - 1, 10 << 20, plan, sampling(8), 5, ""},
		{"one lane", ring + fixed + per, 0, 0, sampling(8), 1, ""},
		// Two lanes would fit beside the slots, but not beside the
		// planning too: one lane, and the planning fits after it.
		{"one lane beside the planning", ring + plan + fixed + 2*per - 1, 0, plan, sampling(2), 1, ""},
		{"no lane", ring + fixed + per - 1, 0, 0, sampling(8), 0, "GPU sampling (" + fmt.Sprint(per+fixed) + " bytes with one lane) do not fit in the GPU slot memory"},
		{"no lane beside the planning", ring + plan + fixed + per - 1, 0, plan, sampling(8), 0, "sweep planning (" + fmt.Sprint(plan) + " bytes) and their GPU sampling (" + fmt.Sprint(per+fixed) + " bytes with one lane) do not fit in the GPU slot memory"},
		{"no slots", ring - 1, 0, 0, sampling(8), 0, "2 slots of 50 bytes and their sweep planning (0 bytes) do not fit in the GPU slot memory"},
		{"no room for the planning", ring + plan - 1, 0, plan, nil, 0, "2 slots of 50 bytes and their sweep planning (" + fmt.Sprint(plan) + " bytes) do not fit in the GPU slot memory"},
		{"no sampling on the GPU", ring, 0, 0, nil, 0, ""},
	} {
		b := &gpuBackend{cfg: GPUConfig{SlotMemory: tc.limit}, used: map[int]int64{1: tc.used}}
		got, err := b.reserveRing(1, 2, 50, ring, tc.plan, tc.sampling)
		if tc.text != "" {
			if err == nil || ipc.CodeOf(err) != ipc.CodeBusy || !errors.As(err, new(slotMemoryError)) || !strings.Contains(err.Error(), tc.text) {
				t.Errorf("%s: %v, want busy: %q", tc.name, err, tc.text)
			}
			if got != 0 || b.used[1] != tc.used {
				t.Errorf("%s: refused, yet %d bytes counted (%d in use, was %d)", tc.name, got, b.used[1], tc.used)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		want := int64(ring)
		if tc.sampling != nil {
			if tc.sampling.lanes != tc.lanes {
				t.Errorf("%s: %d lanes, want %d", tc.name, tc.sampling.lanes, tc.lanes)
			}
			want += int64(tc.lanes)*per + fixed
		}
		if got != want || b.used[1] != tc.used+want {
			t.Errorf("%s: %d bytes counted (%d in use), want %d (%d)", tc.name, got, b.used[1], want, tc.used+want)
		}
		if tc.limit > 0 && b.used[1] > tc.limit {
			t.Errorf("%s: %d bytes in use, over the slot memory of %d", tc.name, b.used[1], tc.limit)
		}
		b.unreserve(1, got)
		if b.used[1] != tc.used {
			t.Errorf("%s: %d bytes in use once given back, want %d", tc.name, b.used[1], tc.used)
		}
	}

	// Room for 3 trainers of one lane each: of 16 at once, 3 are counted.
	limit := int64(3 * (ring + fixed + per))
	b := &gpuBackend{cfg: GPUConfig{SlotMemory: limit}, used: map[int]int64{}}
	var wg sync.WaitGroup
	var mu sync.Mutex
	served := 0
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := b.reserveRing(0, 2, 50, ring, 0, sampling(1)); err == nil {
				mu.Lock()
				served++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if served != 3 || b.used[0] != limit {
		t.Errorf("16 trainers at once, room for 3: %d served, %d bytes in use of %d", served, b.used[0], limit)
	}
}

package serve

// The default slots of a GPU trainer, and what it gets when they do not fit.

import (
	"testing"

	"github.com/gnnloader/gnnloader/cudaext/cudatest"
	"github.com/gnnloader/gnnloader/ipc"
)

// TestCUDADefaultSlotsHalveToFit: a GPU trainer that takes the default
// slots (32) is given half as many, down to 2, when they do not fit the
// GPU's slot memory or the memory budget; a trainer that asks for a number
// of slots that does not fit is refused, and so is one that fits with none.
func TestCUDADefaultSlotsHalveToFit(t *testing.T) {
	cudatest.Devices(t)
	req := openReq()
	req.Device = "cuda:0"
	// The request's slot bytes and budget, from a daemon with room to spare.
	probe, _ := gpuServer(t, Config{}, GPUConfig{Devices: []int{0}})
	o := dial(t, probe).handshake(req)
	if o.Slots != 32 {
		t.Fatalf("a GPU trainer that does not ask got %d slots, want 32", o.Slots)
	}
	sb, used32 := int64(o.SlotBytes), probe.BudgetUsed()
	// A trainer sampled on the GPU also takes its sampler's working memory
	// from the GPU slot memory.
	work := int64(metricSums(t, probe)["gnnloader_gpu_slot_bytes"]) - 32*sb
	if work < 0 {
		t.Fatalf("GPU slot memory in use %d bytes, under 32 slots of %d", work+32*sb, sb)
	}

	// GPU slot memory for 20 slots and two samplers: 16 slots for the first
	// trainer, 4 for the second (when the sampler takes less than 4 slots'
	// bytes: the rule below says what it gets otherwise), then none. The
	// rule: a ring of n slots fits while the slot memory in use plus n
	// slots' bytes does not pass the cap; the sampler's memory is added
	// after.
	mem := 20*sb + 2*work
	srv, src := gpuServer(t, Config{}, GPUConfig{Devices: []int{0}, SlotMemory: mem})
	var first *client
	var inUse int64
	for i := range 2 {
		want := int64(32)
		for want > 2 && inUse+want*sb > mem {
			want /= 2
		}
		if inUse+want*sb > mem {
			t.Fatalf("trainer %d: no room for 2 slots in this test's slot memory (sampler %d bytes, slot %d)", i, work, sb)
		}
		c := dial(t, srv)
		ranked := req // ranks of one job, so cudaRingOf tells their rings apart
		ranked.Rank, ranked.WorldSize = uint32(i), 2
		if got := c.handshake(ranked).Slots; int64(got) != want {
			t.Fatalf("trainer %d got %d slots, want %d", i, got, want)
		}
		if i == 0 {
			if want == 32 {
				t.Fatal("the first trainer got its 32 slots: the test did not make it halve")
			}
			first = c
		}
		inUse += want*sb + work
	}
	if inUse+2*sb <= mem {
		t.Fatalf("room left for 2 more slots (%d of %d bytes in use): the refusals below would not be tested", inUse, mem)
	}
	// Late trainers, asking for the default again and again or for 2, are
	// refused, and leave the budget and the GPU's slot memory as they were.
	used, slotMem := srv.BudgetUsed(), metricSums(t, srv)["gnnloader_gpu_slot_bytes"]
	for i := range 12 {
		c := dial(t, srv)
		c.hello()
		r := req
		if i == 0 {
			r.Slots = 2
		}
		c.send(&r)
		c.expectError(ipc.CodeBusy, "do not fit in the GPU slot memory")
	}
	waitFor(t, func() bool { return srv.Trainers() == 2 })
	if got, mem := srv.BudgetUsed(), metricSums(t, srv)["gnnloader_gpu_slot_bytes"]; got != used || mem != slotMem {
		t.Fatalf("after the refusals: budget %d bytes in use (was %d), GPU slot memory %v (was %v)", got, used, mem, slotMem)
	}
	// The trainer given 16 slots is served whole, its fills sweeping up to 8.
	checkCUDAEpoch(t, first, srv, src)

	// A memory budget one byte short of the 32 slots' gives 16; asking for
	// 32 is refused (they could never fit).
	tight, _ := gpuServer(t, Config{MemoryBudget: used32 - 1}, GPUConfig{Devices: []int{0}})
	asked := req
	asked.Slots = 32
	c := dial(t, tight)
	c.hello()
	c.send(&asked)
	c.expectError(ipc.CodeLimit, "exceed the whole memory budget")
	if got := dial(t, tight).handshake(req).Slots; got != 16 {
		t.Errorf("under a budget short of 32 slots, a trainer that does not ask got %d slots, want 16", got)
	}
}

package serve

// The default slots of a GPU trainer, and what it gets when they do not fit.

import (
	"fmt"
	"testing"

	"github.com/gnnloader/gnnloader/cudaext/cudatest"
	"github.com/gnnloader/gnnloader/ipc"
	"github.com/gnnloader/gnnloader/sampler"
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
	// A trainer's GPU working memory (its sampler's, and its sweep
	// planning's, which grows with the batches a fill sweeps, so with its
	// slots) counts against the GPU slot memory too: work[n] for n slots,
	// measured on the probe, one trainer of n slots after another.
	work := map[int64]int64{}
	before := int64(0)
	for n := int64(32); n >= 2; n /= 2 {
		if n < 32 {
			r := req
			r.Slots = uint32(n)
			dial(t, probe).handshake(r)
		}
		now := int64(metricSums(t, probe)["gnnloader_gpu_slot_bytes"])
		if work[n] = now - before - n*sb; work[n] < 0 {
			t.Fatalf("a trainer of %d slots of %d bytes added %d bytes of GPU slot memory", n, sb, now-before)
		}
		before = now
	}

	// Room for 2 slots but not for their working memory: refused, with
	// nothing kept, not even the device's cache (it is built for the
	// device's first trainer, after what the trainer needs fits); room for
	// both to the byte: served, with the cache.
	if work[2] == 0 {
		t.Fatal("a trainer of 2 slots took no GPU working memory: the edge below would not be tested")
	}
	for _, extra := range []int64{-1, 0} {
		edge, _ := gpuServer(t, Config{}, GPUConfig{Devices: []int{0}, SlotMemory: 2*sb + work[2] + extra, Cache: 1 << 20})
		r := req
		r.Slots = 2
		c := dial(t, edge)
		if extra < 0 {
			c.hello()
			c.send(&r)
			c.expectError(ipc.CodeBusy, "sweep planning")
			waitFor(t, func() bool { return edge.Trainers() == 0 })
		} else if got := c.handshake(r).Slots; got != 2 {
			t.Fatalf("slot memory for 2 slots and their working memory to the byte: got %d slots", got)
		}
		if got, want := int64(metricSums(t, edge)["gnnloader_gpu_slot_bytes"]), (2*sb+work[2])*(extra+1); got != want {
			t.Fatalf("slot memory %d short of 2 slots and their working memory: %d bytes in use, want %d", -extra, got, want)
		}
		if cached := metricSums(t, edge)["gnnloader_gpu_cache_bytes"]; (cached > 0) != (extra == 0) {
			t.Fatalf("slot memory %d short of 2 slots and their working memory: a GPU cache of %v bytes, want one only for the trainer served", -extra, cached)
		}
	}

	// GPU slot memory for 16 slots and 4 slots with their working memory:
	// 16 slots for the first trainer, 4 for the second, then none. The
	// rule: a ring of n slots fits while the slot memory in use plus n
	// slots' bytes and their working memory does not pass the cap.
	mem := 20*sb + work[16] + work[4]
	srv, src := gpuServer(t, Config{}, GPUConfig{Devices: []int{0}, SlotMemory: mem})
	var first *client
	var inUse int64
	for i := range 2 {
		want := int64(32)
		for want > 2 && inUse+want*sb+work[want] > mem {
			want /= 2
		}
		if inUse+want*sb+work[want] > mem {
			t.Fatalf("trainer %d: no room for 2 slots in this test's slot memory (working memory %v bytes, slot %d)", i, work, sb)
		}
		c := dial(t, srv)
		ranked := req // ranks of one job, so cudaRingOf tells their rings apart
		ranked.Rank, ranked.WorldSize = uint32(i), 2
		if got := c.handshake(ranked).Slots; int64(got) != want {
			t.Fatalf("trainer %d got %d slots, want %d (working memory %v bytes, slot %d, slot memory %d, in use %d)", i, got, want, work, sb, mem, inUse)
		}
		if i == 0 {
			if want == 32 {
				t.Fatal("the first trainer got its 32 slots: the test did not make it halve")
			}
			first = c
		}
		inUse += want*sb + work[want]
	}
	if got := int64(metricSums(t, srv)["gnnloader_gpu_slot_bytes"]); got != inUse {
		t.Fatalf("GPU slot memory in use %d bytes, want %d (the slots and working memory of both trainers)", got, inUse)
	}
	if inUse+2*sb+work[2] <= mem {
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

// TestCUDASamplingFitsSlotMemory: a GPU trainer's sampling is counted
// against the GPU slot memory with its slots, before either is allocated,
// as samplingFor predicts it (lanes x sampler.GPULaneBytes and the bytes
// beside them). With room for its slots, one lane and its sweep planning,
// a trainer configured for 2 lanes gets 1 (the sweep planning, made after
// the sampling, counted in the cut) and is served whole; with room for its
// slots and planning and not one lane, it is refused busy, naming the
// sampling's bytes, and nothing stays counted.
func TestCUDASamplingFitsSlotMemory(t *testing.T) {
	cudatest.Devices(t)
	req := openReq()
	req.Device, req.Slots = "cuda:0", 4 // sweeps of 2: 2 lanes
	g := GPUConfig{Devices: []int{0}, Sampling: "gpu", SweepPlan: "gpu", SampleLanes: 2}
	probe, _ := gpuServer(t, Config{}, g)
	dial(t, probe).handshake(req)
	r := cudaRingOf(t, probe, 0)
	if r.sampling == nil || r.sampling.gs.Lanes() != 2 {
		t.Fatalf("a trainer of 4 slots with 2 lanes configured: sampling %v, want 2 lanes on the GPU", r.sampling)
	}
	per, err := sampler.GPULaneBytes(probe.gpu.graphs[0], []int{5, 3}, r.sampling.batch, probe.gpu.maxDeg)
	if err != nil {
		t.Fatal(err)
	}
	fixed := samplingBytes(sampler.GPUFixedBytes, r.sampling.batch, r.sampling.clen)
	if got := r.sampling.bytes(); got != 2*per+fixed {
		t.Fatalf("2 lanes' sampling holds %d bytes, predicted 2 x %d + %d", got, per, fixed)
	}
	var planned int64
	for _, grp := range r.groups {
		planned += grp.table.PlanBytes()
	}
	ring := int64(metricSums(t, probe)["gnnloader_gpu_slot_bytes"]) - 2*per - fixed - planned
	if planned >= per {
		t.Fatalf("sweep planning of %d bytes, a lane of %d: room for one lane and the planning would take two lanes, and the cut below would not be tested", planned, per)
	}

	// Room for the slots, the planning and a byte short of two lanes: two
	// lanes would fit beside the slots alone, but the planning comes after
	// the sampling and must fit too. One lane, served.
	mem := ring + planned + fixed + 2*per - 1
	g.SlotMemory = mem
	srv, src := gpuServer(t, Config{}, g)
	c := dial(t, srv)
	if got := c.handshake(req).Slots; got != 4 {
		t.Fatalf("slot memory for 4 slots, their planning and one lane: %d slots", got)
	}
	if lanes := cudaRingOf(t, srv, 0).sampling.gs.Lanes(); lanes != 1 {
		t.Fatalf("slot memory for one lane beside the slots and planning: %d lanes", lanes)
	}
	if got, want := int64(metricSums(t, srv)["gnnloader_gpu_slot_bytes"]), ring+planned+fixed+per; got != want {
		t.Fatalf("GPU slot memory in use %d bytes, want %d", got, want)
	}
	checkCUDAEpoch(t, c, srv, src)

	// Room for the slots and their planning and not one lane: refused
	// before the sampling is made, nothing counted.
	g.SlotMemory = ring + planned + fixed + per - 1
	tight, _ := gpuServer(t, Config{}, g)
	c = dial(t, tight)
	c.hello()
	c.send(&req)
	c.expectError(ipc.CodeBusy, fmt.Sprintf("GPU sampling (%d bytes with one lane) do not fit in the GPU slot memory", per+fixed))
	waitFor(t, func() bool { return tight.Trainers() == 0 })
	if got := metricSums(t, tight)["gnnloader_gpu_slot_bytes"]; got != 0 {
		t.Fatalf("after the refusal: %v bytes of GPU slot memory in use", got)
	}
}

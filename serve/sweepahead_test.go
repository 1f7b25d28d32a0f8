package serve

// Fills that wait for the trainer's releases (GPUConfig.SweepAhead), on a
// shared-memory ring standing for a sweeping GPU ring.

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gnnloader/gnnloader/batch"
	"github.com/gnnloader/gnnloader/ipc"
	"github.com/gnnloader/gnnloader/pingpong"
)

// sweepingRing is a shared-memory ring that takes up to width batches a
// fill, is never busy, and records how many batches each fill took.
type sweepingRing struct {
	slotRing
	width, ahead int
	busy         bool // Busy's answer

	mu    sync.Mutex
	fills []int
}

func (r *sweepingRing) SweepWidth() int { return r.width }
func (r *sweepingRing) SweepAhead() int { return r.ahead }
func (r *sweepingRing) Busy() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.busy
}

func (r *sweepingRing) Fill(ctx context.Context, slots []int, bs []batch.Batch) error {
	r.mu.Lock()
	r.fills = append(r.fills, len(slots))
	r.mu.Unlock()
	return r.slotRing.Fill(ctx, slots, bs)
}

func (r *sweepingRing) fillSizes() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.fills...)
}

// sweepingServer serves trainers asking for cuda:0 from a sweepingRing of
// the given width and SweepAhead; rings receives each ring made.
func sweepingServer(t *testing.T, width, ahead int) (*Server, chan *sweepingRing) {
	rings := make(chan *sweepingRing, 4)
	srv, _ := testServer(t, Config{}, func(srv *Server) {
		srv.newCUDARing = func(req *request, layout *batch.Layout, sl pingpong.Layout) (slotRing, error) {
			cpu := *req
			cpu.device = -1
			r, err := srv.newRing(&cpu, layout, sl)
			if err != nil {
				return nil, err
			}
			sr := &sweepingRing{slotRing: r, width: width, ahead: ahead}
			rings <- sr
			return sr, nil
		}
	})
	return srv, rings
}

func sweepingTrainer(t *testing.T, srv *Server, slots int) *client {
	c := dial(t, srv)
	o := openReq()
	o.Device = "cuda:0" // routed to the sweeping ring
	o.Slots = uint32(slots)
	o.BatchSize = 16 // 813 train seeds: 51 batches an epoch
	c.handshake(o)
	return c
}

// TestEpochStartsWithShortFills: on a ring that stays busy (a fill grows
// to the whole width), an epoch's first fills ramp up by half of what came
// before, 1, 1, 2, 3, 4, 6, then 8 capped at the width, so the trainer's
// first batch waits for one batch's fill.
func TestEpochStartsWithShortFills(t *testing.T) {
	srv, rings := sweepingServer(t, 8, -1)
	c := sweepingTrainer(t, srv, 16)
	ring := <-rings
	ring.mu.Lock()
	ring.busy = true
	ring.mu.Unlock()
	n := 0
	c.eachBatch(0, func(*ipc.BatchReady) { n++ })
	fills := ring.fillSizes()
	total := 0
	for _, f := range fills {
		total += f
		if f > 8 {
			t.Errorf("a fill of %d batches, wider than the ring's 8: %v", f, fills)
		}
	}
	if n != 51 || total != n {
		t.Fatalf("fills %v cover %d batches, the trainer got %d, want 51", fills, total, n)
	}
	want := []int{1, 1, 2, 3, 4, 6, 8, 8}
	if len(fills) < len(want) || !slices.Equal(fills[:len(want)], want) {
		t.Errorf("the epoch's first fills are %v, want %v, ...", fills, want)
	}
}

// TestFillsWaitForASweepWhileTheTrainerIsAhead: a trainer slower than the
// loader (a step of 3 ms a batch, the ring never busy) gets its batches in
// fills of the whole sweep width once it holds more than SweepAhead of
// them; with SweepAhead negative (the behaviour before it) every fill after
// the first goes with the one slot just released.
func TestFillsWaitForASweepWhileTheTrainerIsAhead(t *testing.T) {
	for _, tc := range []struct {
		ahead     int
		wantWide  bool
		trainerMs int
	}{{2, true, 3}, {-1, false, 3}} {
		srv, rings := sweepingServer(t, 4, tc.ahead)
		c := sweepingTrainer(t, srv, 8)
		ring := <-rings
		c.send(&ipc.StartEpoch{})
		n := 0
		for {
			m := c.recv()
			if _, end := m.(*ipc.EpochEnd); end {
				break
			}
			b := m.(*ipc.BatchReady)
			if int(b.Index) != n {
				t.Fatalf("batch %d arrived as the %dth", b.Index, n)
			}
			n++
			time.Sleep(time.Duration(tc.trainerMs) * time.Millisecond) // the step
			c.send(&ipc.Release{Slot: b.Slot, Epoch: b.Epoch, Index: b.Index})
		}
		fills := ring.fillSizes()
		total, wide := 0, 0
		for _, f := range fills {
			total += f
			if f == 4 {
				wide++
			}
		}
		if total != n || n != 51 {
			t.Fatalf("ahead %d: fills %v cover %d batches, the trainer got %d, want 51", tc.ahead, fills, total, n)
		}
		t.Logf("ahead %d: %d fills for %d batches: %v", tc.ahead, len(fills), n, fills)
		if tc.wantWide {
			// Each of the 51 batches past the first 8 (filled before any
			// release) comes in a fill of 4, bar the epoch's last one and
			// a fill cut short by a late release on a loaded machine.
			if wide < (n-8)/4*2/3 {
				t.Errorf("ahead %d: %d fills of 4 in %v, want most of the %d batches after the first 8 in fills of 4", tc.ahead, wide, fills, n-8)
			}
		} else if len(fills) < n-8 {
			t.Errorf("ahead %d: %d fills for %d batches (%v): a fill that never waits for the trainer should go with each released slot", tc.ahead, len(fills), n, fills)
		}
	}
}

// TestFillsDoNotWaitForAStalledTrainer: a trainer that keeps batches while
// it waits for the next one (here batches 10-14, 5 of its 8 slots, while it
// releases 15-17 and waits for 18: 3 slots free, fewer than the sweep width
// of 4, while it holds more than SweepAhead) still gets that batch: once it
// has released nothing for a while, the fill goes with the slots it has.
func TestFillsDoNotWaitForAStalledTrainer(t *testing.T) {
	srv, rings := sweepingServer(t, 4, 2)
	c := sweepingTrainer(t, srv, 8)
	<-rings
	c.send(&ipc.StartEpoch{})
	var kept []*ipc.BatchReady
	n := 0
	start := time.Now()
	for {
		m := c.recv() // fails the test after 10 s without a frame
		if _, end := m.(*ipc.EpochEnd); end {
			break
		}
		b := m.(*ipc.BatchReady)
		n++
		switch {
		case b.Index < 10 || (b.Index >= 15 && b.Index < 18) || b.Index > 18:
			c.send(&ipc.Release{Slot: b.Slot, Epoch: b.Epoch, Index: b.Index})
		case b.Index < 15:
			kept = append(kept, b) // kept while waiting for batch 18
		default:
			for _, k := range append(kept, b) {
				c.send(&ipc.Release{Slot: k.Slot, Epoch: k.Epoch, Index: k.Index})
			}
			kept = nil
		}
	}
	if n != 51 {
		t.Fatalf("%d batches, want 51", n)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the epoch took %v: fills waited for a trainer that was waiting for them", took)
	}
}

// TestTrainerKeepingAWindowIsNotSlowed: a trainer that keeps its last 5
// batches of 8 slots (release="manual", releasing the oldest as each new one
// comes), so that fewer than the sweep width of 4 are ever free while it
// holds more than SweepAhead, stalls the first fills only: its epoch takes
// about as long as with fills that never wait (before the floor rose to
// what it keeps, each fill waited for the stall guard, and a stall's wait
// fed the average gap, so the epoch slowed without limit).
func TestTrainerKeepingAWindowIsNotSlowed(t *testing.T) {
	epoch := func(ahead int) time.Duration {
		srv, rings := sweepingServer(t, 4, ahead)
		c := sweepingTrainer(t, srv, 8)
		<-rings
		start := time.Now()
		for e := range uint32(2) {
			c.send(&ipc.StartEpoch{Epoch: e})
			var window []*ipc.BatchReady
			for {
				m := c.recv()
				if _, end := m.(*ipc.EpochEnd); end {
					break
				}
				window = append(window, m.(*ipc.BatchReady))
				time.Sleep(2 * time.Millisecond) // the step
				if len(window) > 5 {
					b := window[0]
					window = window[1:]
					c.send(&ipc.Release{Slot: b.Slot, Epoch: b.Epoch, Index: b.Index})
				}
			}
			for _, b := range window {
				c.send(&ipc.Release{Slot: b.Slot, Epoch: b.Epoch, Index: b.Index})
			}
		}
		return time.Since(start)
	}
	never := epoch(-1)
	waiting := epoch(2)
	t.Logf("two epochs of 51 batches keeping 5: %v with fills that wait for the trainer, %v with fills that never wait", waiting, never)
	// Measured here: 306 ms against 271 (-race); 484 against 232 before
	// the floor rose to what the trainer keeps.
	if waiting > never*14/10+80*time.Millisecond {
		t.Errorf("two epochs took %v with fills that wait for the trainer, %v without: the window-keeping trainer is slowed", waiting, never)
	}
}

// TestReleasePace: a trainer that has never released counts as stalled; one
// that releases every millisecond is stalled after four gaps' silence, but
// never before the floor nor after the ceiling; pauses do not count in the
// average.
func TestReleasePace(t *testing.T) {
	var p releasePace
	t0 := time.Unix(1000, 0)
	if !p.stalled(t0) {
		t.Fatal("no release yet: want stalled")
	}
	for i := range 20 {
		p.released(t0.Add(time.Duration(i) * time.Millisecond))
	}
	last := t0.Add(19 * time.Millisecond)
	if p.stalled(last.Add(stallFloor - time.Millisecond)) {
		t.Error("stalled before the floor")
	}
	if !p.stalled(last.Add(stallFloor + time.Millisecond)) {
		t.Error("not stalled past the floor with 1 ms gaps")
	}
	// A pause (an evaluation, a stall) is left out of the average: after
	// it, silence still counts as a stall past the floor.
	p.released(last.Add(2 * time.Second))
	afterPause := last.Add(2 * time.Second)
	if !p.stalled(afterPause.Add(stallFloor + time.Millisecond)) {
		t.Errorf("a 2 s pause made the average gap %v", time.Duration(p.gap.Load()))
	}
	var slower releasePace // 50 ms gaps: four of them capped at stallCeiling
	for i := range 20 {
		slower.released(t0.Add(time.Duration(i) * 50 * time.Millisecond))
	}
	if end := t0.Add(19 * 50 * time.Millisecond); !slower.stalled(end.Add(stallCeiling + time.Millisecond)) {
		t.Error("50 ms gaps: not stalled past stallCeiling")
	}
	var slow releasePace
	for i := range 20 {
		slow.released(t0.Add(time.Duration(i) * 10 * time.Millisecond))
	}
	lastSlow := t0.Add(190 * time.Millisecond)
	if slow.stalled(lastSlow.Add(35 * time.Millisecond)) {
		t.Error("10 ms gaps: stalled after 35 ms, want four gaps")
	}
	if !slow.stalled(lastSlow.Add(45 * time.Millisecond)) {
		t.Error("10 ms gaps: not stalled after 45 ms")
	}
}

// TestReleasePaceBursts: a trainer that sends its releases four at a time
// (the Python client's held releases), a burst every 14 ms, is paced by the
// bursts: not stalled between two of them, stalled after four of their gaps.
// Counting the gaps inside a burst made it stalled 5 ms after each.
func TestReleasePaceBursts(t *testing.T) {
	var p releasePace
	t0 := time.Unix(1000, 0)
	var last time.Time
	for b := range 20 {
		for k := range 4 {
			last = t0.Add(time.Duration(b)*14*time.Millisecond + time.Duration(k)*20*time.Microsecond)
			p.released(last)
		}
	}
	if g := time.Duration(p.gap.Load()); g < 13*time.Millisecond || g > 15*time.Millisecond {
		t.Errorf("average gap %v, want the bursts' 14 ms", g)
	}
	if p.stalled(last.Add(20 * time.Millisecond)) {
		t.Error("stalled 20 ms after a burst, between two bursts 14 ms apart")
	}
	if !p.stalled(last.Add(60 * time.Millisecond)) {
		t.Error("not stalled after four bursts' gaps of silence")
	}
	// Releases that come faster than burstGap, one by one, leave the
	// average unset: stalled past the floor.
	var fast releasePace
	for i := range 100 {
		fast.released(t0.Add(time.Duration(i) * 100 * time.Microsecond))
	}
	end := t0.Add(99 * 100 * time.Microsecond)
	if fast.stalled(end.Add(stallFloor - time.Millisecond)) {
		t.Error("fast releases: stalled before the floor")
	}
	if !fast.stalled(end.Add(stallFloor + time.Millisecond)) {
		t.Error("fast releases: not stalled past the floor")
	}
}

// TestGrowSweep: a fill grows while the ring is busy or the trainer is
// ahead, never past the width or the batches left.
func TestGrowSweep(t *testing.T) {
	yes, no := func() bool { return true }, func() bool { return false }
	for _, tc := range []struct {
		slots, width, left int
		ahead              bool
		busy               func() bool
		want               bool
	}{
		{1, 4, 10, false, no, false},
		{1, 4, 10, true, no, true},
		{1, 4, 10, false, yes, true},
		{4, 4, 10, true, yes, false},
		{2, 4, 2, true, yes, false},
		{1, 1, 10, true, yes, false},
	} {
		if got := growSweep(tc.slots, tc.width, tc.left, tc.ahead, tc.busy); got != tc.want {
			t.Errorf("growSweep(%d, %d, %d, ahead %v) = %v, want %v", tc.slots, tc.width, tc.left, tc.ahead, got, tc.want)
		}
	}
	for _, tc := range []struct{ width, done, want int }{
		{32, 0, 1}, {32, 1, 1}, {32, 2, 2}, {32, 4, 3}, {32, 7, 4}, {32, 40, 21}, {32, 61, 31}, {32, 62, 32}, {32, 900, 32},
		{4, 1, 1}, {4, 6, 4}, {1, 0, 1},
	} {
		if got := rampWidth(tc.width, tc.done); got != tc.want {
			t.Errorf("rampWidth(%d, %d) = %d, want %d", tc.width, tc.done, got, tc.want)
		}
	}
	// A fill of the ramp's width is not a stall, whatever the sweep width
	// (the ramp's 3 and 9 batch fills once counted as stalls and raised
	// the floor for the rest of the epoch).
	for _, tc := range []struct {
		slots, width, left int
		waited             bool
		held, floor        int
		want               bool
	}{
		{2, rampWidth(16, 2), 100, true, 9, 8, false},
		{6, rampWidth(16, 11), 100, true, 12, 8, false},
		{5, rampWidth(16, 40), 100, true, 12, 8, true},
		{5, 16, 5, true, 12, 8, false},
		{5, 16, 100, false, 12, 8, false},
		{5, 16, 100, true, 8, 8, false},
	} {
		if got := stalledFill(tc.slots, tc.width, tc.left, tc.waited, tc.held, tc.floor); got != tc.want {
			t.Errorf("stalledFill%+v = %v, want %v", tc, got, tc.want)
		}
	}
	for _, tc := range []struct{ ahead, width, want int }{
		{0, 16, 8}, {0, 3, 1}, {0, 1, -1}, {-1, 16, -1}, {5, 16, 5}, {5, 1, -1},
	} {
		if got := sweepAhead(tc.ahead, tc.width); got != tc.want {
			t.Errorf("sweepAhead(%d, %d) = %d, want %d", tc.ahead, tc.width, got, tc.want)
		}
	}
}

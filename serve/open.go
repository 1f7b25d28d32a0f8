package serve

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"github.com/gnnloader/gnnloader/batch"
	"github.com/gnnloader/gnnloader/datasets"
	"github.com/gnnloader/gnnloader/ipc"
	"github.com/gnnloader/gnnloader/pingpong"
	"github.com/gnnloader/gnnloader/sampler"
)

// request is an Open checked, once, against the protocol, the dataset and
// the daemon's limits. Everything after the handshake reads it, never the
// wire message.
type request struct {
	job     string
	split   string
	seeds   []int64 // the split's seed ids (shared with the Source, or the Seeds message's)
	epochs  sampler.EpochConfig
	fanouts []int
	device  int // -1: the CPU path; else the CUDA device ordinal
	slots   int
	// slotsDefault: the trainer asked for 0 slots on a GPU, so the daemon
	// may give it fewer than Config.GPUSlots when those do not fit.
	slotsDefault bool
	noFeatures   bool // FeatureDType "none": batches without x
	onDevice     bool // sampled on its GPU (sampler.GPU), not by the CPU
	startEpoch   uint32
	startBatch   int              // first batch of startEpoch (a reconnecting trainer resumes)
	link         *linkRequest     // link batches (split "link:..."); seeds are positions of its pairs
	hetero       *heteroRequest   // heterogeneous batches (hetero.go); seeds are ids of its input type
	temporal     *temporalRequest // disjoint (and temporal) batches (Open.Temporal); nil: ordinary ones
	maxSeeds     int              // the most seeds a batch has: batch_size, or fewer when the request has fewer
}

// The epoch plan's bytes a seed (the shuffled order, this rank's share and
// its positions), and a link request's a pair (its pair positions too).
// A session whose plan takes at most maxPlanAheadBytes holds two: its
// epoch's and the next one's, made ahead (planAhead); a larger one (a huge
// link:custom evaluation set) holds one, planned when its epoch starts.
const (
	seedPlanBytes     = 24
	linkPlanBytes     = seedPlanBytes + 8
	maxPlanAheadBytes = 1 << 30
)

// plansBytes is what the epoch plans of a request over n seeds (pairs, for
// a link request) take, and whether the next one is made ahead.
func plansBytes(n int64, link bool) (bytes int64, ahead bool) {
	per := int64(seedPlanBytes)
	if link {
		per = linkPlanBytes
	}
	if one := per * n; one > maxPlanAheadBytes {
		return one, false
	}
	return 2 * per * n, true
}

// rank is the trainer's rank within its job.
func (r *request) rank() int { return r.epochs.Rank }

// parseOpen checks m and returns the request it makes.
func (ss *session) parseOpen(m *ipc.Open) (*request, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	if err := ss.checkV3(m); err != nil {
		return nil, err
	}
	d := ss.srv.src.Data
	dev, _ := ipc.ParseDevice(m.Device) // Validate checked it
	if ss.srv.src.Hetero != nil {
		return ss.parseHetero(m, dev) // hetero.go
	}
	seeds, ok := d.Splits[m.Split]
	link, isLink, err := ss.parseLink(m.Split)
	if err != nil {
		return nil, err
	}
	if isLink {
		// A link:custom set is as large as the memory budget lets its
		// Seeds be: its epoch plan, positions included, must fit before
		// the positions are made (admit takes it below).
		planned, _ := plansBytes(link.pairs.Len(), true)
		if err := ss.srv.fits(planned, "link plan"); err != nil {
			return nil, err
		}
		seeds, ok = positions(int(link.pairs.Len())), true
	}
	temporal, err := ss.parseTemporal(m, isLink)
	if err != nil {
		return nil, err
	}
	if m.Split == ipc.CustomSplit {
		if seeds, ok = ss.custom, true; seeds == nil {
			return nil, perrf(ipc.CodeBadRequest, "split %q needs a Seeds message before Open", ipc.CustomSplit)
		}
	}
	if !ok {
		var names []string
		for _, s := range datasets.SplitNames {
			if _, ok := d.Splits[s]; ok {
				names = append(names, s)
			}
		}
		return nil, perrf(ipc.CodeNotFound, "dataset %s has no split %q (it has %v)", d.Name, m.Split, names)
	}
	if len(seeds) == 0 {
		return nil, perrf(ipc.CodeBadRequest, "split %q of dataset %s is empty", m.Split, d.Name)
	}
	noFeatures := m.FeatureDType == NoFeatures
	if m.FeatureDType != "" && m.FeatureDType != string(d.FeatureDType) && !noFeatures {
		return nil, perrf(ipc.CodeBadRequest, "feature dtype %q: dataset %s stores %s and the daemon does not convert", m.FeatureDType, d.Name, d.FeatureDType)
	}
	if noFeatures && dev >= 0 {
		return nil, perrf(ipc.CodeBadRequest, "feature_dtype %q (batches without features) is served on device \"cpu\" only, not %q", NoFeatures, m.Device)
	}
	r, err := ss.newRequest(m, dev, seeds)
	if err != nil {
		return nil, err
	}
	r.noFeatures, r.link, r.temporal = noFeatures, link, temporal
	return r, nil
}

// newRequest is the part of a request every kind of batch shares: the
// epochs over seeds, the fanouts per hop, the slots (the daemon's default
// for 0, at most Config.MaxSlots) and the resume point.
func (ss *session) newRequest(m *ipc.Open, dev int, seeds []int64) (*request, error) {
	cfg := ss.srv.cfg
	slots := int(m.Slots)
	slotsDefault := false
	if slots == 0 {
		slots = cfg.Slots
		if dev >= 0 {
			slots, slotsDefault = min(cfg.GPUSlots, cfg.MaxSlots), true
		}
	}
	if slots > cfg.MaxSlots {
		return nil, perrf(ipc.CodeLimit, "%d slots asked, limit %d", slots, cfg.MaxSlots)
	}
	r := &request{
		job: m.Job, split: m.Split, seeds: seeds, device: dev, slots: slots, slotsDefault: slotsDefault,
		epochs: sampler.EpochConfig{BatchSize: int(m.BatchSize), Shuffle: m.Shuffle, Seed: m.Seed,
			Rank: int(m.Rank), WorldSize: int(m.WorldSize), DropLast: m.DropLast},
		startEpoch: m.StartEpoch, startBatch: int(m.StartBatch),
	}
	for _, f := range m.Fanouts {
		r.fanouts = append(r.fanouts, int(f))
	}
	return r, nil
}

// handleOpen answers an Open: the request checked, its sampling mode and
// slot ring made within the budgets, and the ring described in Opened.
func (ss *session) handleOpen(ctx context.Context, m *ipc.Open) error {
	req, err := ss.parseOpen(m)
	if err != nil {
		return err
	}
	cfg := ss.srv.cfg
	src := ss.srv.src
	numBatches, err := sampler.NumBatches(len(req.seeds), req.epochs)
	if err != nil {
		return perrf(ipc.CodeBadRequest, "%v", err)
	}
	if req.startBatch > numBatches {
		return perrf(ipc.CodeBadRequest, "resume at batch %d of epoch %d, but an epoch has %d batches", req.startBatch, req.startEpoch, numBatches)
	}
	// The GPU sampler takes fanouts of -1 and >= 1 and distinct seeds (its
	// buffers are sized by the graph): a hop of 0 (PyG's "sample nothing")
	// or custom seeds that repeat a node are sampled by the CPU, the slots
	// still on the GPU, and so are link batches (their negatives are drawn
	// on the CPU).
	req.onDevice = req.device >= 0 && ss.srv.gpuSamples(req.device) && !slices.Contains(req.fanouts, 0) &&
		!(req.split == ipc.CustomSplit && repeats(req.seeds, src.Data.Graph.NumNodes)) &&
		req.link == nil && req.hetero == nil && req.temporal == nil
	// No batch holds more seeds than the request has: a batch_size over
	// that does not size the slots (nor charge the budget) beyond them.
	req.maxSeeds = min(req.epochs.BatchSize, len(req.seeds))
	capBatch := req.maxSeeds
	no := batch.NodeOptions{BatchSize: capBatch, Fanouts: req.fanouts,
		Workers: cfg.SamplerThreads, NoFeatures: req.noFeatures, MaxDegree: src.MaxDegree,
		AddressOrder: req.device < 0 || !ss.srv.gpuPlansSweeps, DeviceSampling: req.onDevice}
	var mode batch.Mode
	switch {
	case req.hetero != nil:
		mode, err = batch.NewHetero(src.Hetero, batch.HeteroOptions{BatchSize: capBatch, InputType: req.hetero.input,
			Fanouts: req.hetero.fanouts, Workers: cfg.SamplerThreads, AddressOrder: no.AddressOrder, MaxDegree: src.RelMaxDegree})
	case req.link != nil:
		mode, err = batch.NewLink(src.Data, req.link.pairs, batch.LinkOptions{Node: no, Neg: req.link.neg, Amount: req.link.amount})
	case req.temporal != nil:
		mode, err = newDisjointMode(src, req.temporal, no)
	default:
		mode, err = batch.NewNode(src.Data, no)
	}
	if errors.Is(err, batch.ErrTooLarge) {
		return perrf(ipc.CodeLimit, "%v", err)
	}
	if err != nil {
		return perrf(ipc.CodeBadRequest, "%v", err)
	}
	layout, err := slotLayout(mode.Layout())
	if err != nil {
		return perrf(ipc.CodeBadRequest, "%v", err)
	}
	ring, err := ss.admitRing(ctx, req, mode, layout)
	if err != nil {
		return err
	}
	ss.req, ss.mode, ss.ring = req, mode, ring
	ss.readyAt = make([]atomic.Int64, req.slots)
	ss.batchesServed = ss.srv.metrics.batches.WithLabelValues(rankLabel(uint32(req.rank())))
	opened := &ipc.Opened{
		NumBatches: uint32(numBatches),
		Slots:      uint32(req.slots),
		SlotBytes:  uint64(layout.SlotBytes),
		Scalars:    mode.Layout().Scalars,
		Lists:      mode.Layout().Lists,
	}
	for i, r := range mode.Layout().Regions {
		reg := ipc.Region{Name: r.Name, Offset: uint64(layout.Regions[i].Offset), Bytes: uint64(layout.Regions[i].Bytes),
			DType: r.DType, CountAxis: uint8(r.CountAxis)}
		for _, d := range r.Shape {
			reg.Shape = append(reg.Shape, uint64(d))
		}
		opened.Regions = append(opened.Regions, reg)
	}
	ss.log.Info("trainer connected", "rank", req.rank(), "world_size", req.epochs.WorldSize, "pid", ss.pid, "job", req.job,
		"split", req.split, "temporal", m.Temporal, "time_attr", m.TimeAttr, "batch_size", req.epochs.BatchSize, "fanouts", req.fanouts, "slots", req.slots, "slot_bytes", layout.SlotBytes,
		"batches_per_epoch", numBatches)
	fds := ring.Describe(opened)
	_, ahead := plansBytes(int64(len(req.seeds)), req.link != nil)
	ss.plans.open(req.seeds, req.epochs, ahead, req.startEpoch) // planned while the trainer maps its slots
	if err := ss.send(opened, fds...); err != nil {
		return err
	}
	ss.srv.handshakeDone(ss)
	return nil
}

// minDefaultSlots is the fewest slots a GPU trainer that asked for the
// default is given before the daemon refuses it: two, ping-pong.
const minDefaultSlots = 2

// admitRing takes the request's memory from the budgets and makes its slot
// ring. The budget covers what the request makes the daemon hold: the slots,
// the sampled batches in flight (the pipeline's pool), and the epoch plan
// over its seeds. A GPU trainer that asked for the default slots and does
// not fit for want of memory (the budget, the GPU's slot memory or its free
// memory) is given half as many, down to minDefaultSlots, rather than
// refused: the default is the fastest measured (32 slots, sweeps of 16
// batches), the halves what still fits beside other trainers.
func (ss *session) admitRing(ctx context.Context, req *request, mode batch.Mode, layout pingpong.Layout) (slotRing, error) {
	planBytes, _ := plansBytes(int64(len(req.seeds)), req.link != nil)
	gpu := req.device >= 0 && ss.srv.gpu != nil
	leaveBy, graceBy := time.Now().Add(leaveWait), time.Now().Add(hangupGrace)
	for {
		width := 1 // batches a fill takes: one on the CPU path
		if gpu {
			width = sweepWidth(ss.srv.gpu.cfg.SweepBatches, req.slots)
		}
		inFlight := int64(2*ss.srv.cfg.Prefetch + width)
		slotBytes, extra := layout.SlotBytes*int64(req.slots), inFlight*mode.BatchBytes()+planBytes
		err := ss.srv.admit(ss, slotBytes, extra)
		if err == nil {
			ring, rerr := ss.srv.newRing(req, mode.Layout(), layout)
			if rerr == nil {
				ss.admitted = [2]int64{slotBytes, extra}
				return ring, nil
			}
			ss.srv.leave(ss, slotBytes, extra)
			err = rerr
		}
		if ipc.CodeOf(err) == ipc.CodeBusy && ss.srv.awaitLeave(ctx, leaveBy, graceBy) {
			ss.log.Info("a closing trainer gave back its memory: trying again", "rank", req.rank(), "slots", req.slots, "err", err)
			continue
		}
		if !req.slotsDefault || req.slots <= minDefaultSlots || !errors.As(err, new(slotMemoryError)) {
			return nil, err
		}
		ss.log.Info("default slots do not fit: trying half as many", "rank", req.rank(), "slots", req.slots, "err", err)
		req.slots = max(req.slots/2, minDefaultSlots)
	}
}

// slotLayout places a mode's regions in a slot.
func slotLayout(l *batch.Layout) (pingpong.Layout, error) {
	regions := make([]pingpong.Region, len(l.Regions))
	for i, r := range l.Regions {
		regions[i] = pingpong.Region{Name: r.Name, Bytes: r.Bytes(), DType: r.DType}
	}
	return pingpong.NewLayout(regions)
}

// repeats reports whether ids (node ids below n) hold a node twice.
func repeats(ids []int64, n int64) bool {
	seen := make([]uint64, (n+63)/64)
	for _, v := range ids {
		if v < 0 || v >= n {
			continue // refused elsewhere
		}
		if seen[v/64]&(1<<(v%64)) != 0 {
			return true
		}
		seen[v/64] |= 1 << (v % 64)
	}
	return false
}

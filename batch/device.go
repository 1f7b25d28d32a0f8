package batch

import (
	"fmt"

	"github.com/gnnloader/gnnloader/cudaext"
	"github.com/gnnloader/gnnloader/sampler"
)

// DeviceBatch is a batch sampled on a GPU, straight into its slot, when the
// slot is filled (NodeOptions.DeviceSampling): the mode's Sample only records
// the seeds and the key, the slot ring uploads the seeds and samples it (SampleJob),
// and Meta waits for the counts the GPU reports. Its structure is written on
// the device, so WriteStructure does nothing, and it has no host ids (Rows
// gives none): a GPU ring plans its sweeps from the ids in the slot.
type DeviceBatch interface {
	Batch
	// Seeds are the batch's seeds.
	Seeds() []int64
	// SampleJob is the batch's sampling for a GPU sampler (sampler.GPU's
	// SampleMany): its seeds are at seeds (device memory, len(Seeds())
	// int64), its counts go to counts (device, sampler.CountsLen entries)
	// and its structure regions to region(k), the device address of region
	// k of its slot.
	SampleJob(seeds, counts cudaext.DevicePtr, region func(k int) cudaext.DevicePtr) (sampler.Job, error)
	// Sampled hands the batch its counts (sampler.CountsLen entries), to be
	// read once wait returns nil (Meta waits).
	Sampled(counts []int64, wait func() error)
	// CountIndex is where region k's count is among the counts.
	CountIndex(k int) int
	// InputIDs are the positions of the seeds in the split (input_id), or
	// nil when the batch has none (Inputs): the ring copies them into the
	// slot's input_id region (-1 per seed without them).
	InputIDs() []int64
	// Err is why the batch's counts could not be waited for (its fill
	// failed on the device), once Meta has run; nil otherwise.
	Err() error
}

var _ DeviceBatch = (*NodeBatch)(nil)

// Seeds implements DeviceBatch.
func (b *NodeBatch) Seeds() []int64 { return b.seeds }

// SampleJob implements DeviceBatch: n_id, edge_index and e_id of the slot.
func (b *NodeBatch) SampleJob(seeds, counts cudaext.DevicePtr, region func(k int) cudaext.DevicePtr) (sampler.Job, error) {
	if !b.m.device {
		return sampler.Job{}, fmt.Errorf("batch: a node batch of a mode without device sampling")
	}
	l := &b.m.layout
	return sampler.Job{Seeds: seeds, N: len(b.seeds), Key: b.key, Out: sampler.DeviceOut{
		NID: region(l.Index("n_id")), EdgeIndex: region(l.Index("edge_index")), EID: region(l.Index("e_id")), Counts: counts}}, nil
}

// CountIndex implements DeviceBatch: nodes are counted at 0, edges at 1;
// input_id, counted in seeds, has no count on the device (-1): its count is
// len(Seeds()).
func (b *NodeBatch) CountIndex(k int) int {
	switch b.m.countOf[k] {
	case inEdges:
		return 1
	case inSeeds:
		return -1
	}
	return 0
}

// Sampled implements DeviceBatch.
func (b *NodeBatch) Sampled(counts []int64, wait func() error) {
	b.counts, b.wait, b.err = counts, wait, nil
}

// Err implements DeviceBatch.
func (b *NodeBatch) Err() error { return b.err }

// deviceMeta is Meta for a batch sampled on the GPU: its counts, once the
// GPU has written them (sampler.CountsLen's layout).
func (b *NodeBatch) deviceMeta(mt *Meta) {
	H := len(b.m.fanouts)
	if b.wait != nil {
		if b.err = b.wait(); b.err != nil {
			clear(b.counts) // Err reports it; the caller must not announce the batch
		}
		b.wait = nil
	}
	c := b.counts
	mt.Counts = b.m.counts(mt.Counts[:0], uint32(c[0]), uint32(c[1]), uint32(len(b.seeds)))
	mt.Scalars = append(mt.Scalars[:0], int64(len(b.seeds)))
	mt.Lists = reuseLists(mt.Lists, 2)
	mt.Lists[0], mt.Lists[1] = mt.Lists[0][:0], mt.Lists[1][:0]
	for h := 0; h <= H; h++ {
		mt.Lists[0] = append(mt.Lists[0], uint32(c[2+h]))
	}
	for h := 0; h < H; h++ {
		mt.Lists[1] = append(mt.Lists[1], uint32(c[3+H+h]))
	}
}

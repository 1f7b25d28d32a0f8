package ipc

import "math"

// Memory kinds of Opened.Memory.
const (
	MemoryShm  = "shm"  // slots in one memfd passed with Opened (SCM_RIGHTS)
	MemoryCUDA = "cuda" // slots in one CUDA allocation shared by IPC handle
)

// Opened (daemon to client) answers Open with the slot ring. For MemoryShm
// the frame carries exactly one fd, a memfd of Slots*SlotBytes bytes; slot i
// starts at i*SlotBytes. For MemoryCUDA the frame carries no fd; MemHandle is
// a cudaIpcMemHandle_t of the whole ring on device CUDADevice, and Events has
// one entry per slot. For MemoryShm, CUDADevice is 0 and MemHandle and Events
// are empty.
//
// Regions, Scalars and Lists say what every batch holds (the sampling mode's
// layout): each BatchReady carries a count per region and a value per scalar
// and per list, in this order.
type Opened struct {
	NumBatches uint32     `ipc:"num_batches"` // batches per epoch for this rank
	Slots      uint32     `ipc:"slots"`       // slots in the ring, >= 1
	SlotBytes  uint64     `ipc:"slot_bytes"`  // bytes per slot, a multiple of RegionAlign
	Memory     string     `ipc:"memory"`      // MemoryShm or MemoryCUDA
	Regions    []Region   `ipc:"regions"`
	Scalars    []string   `ipc:"scalars"`     // names of each batch's integers, e.g. "batch_size"
	Lists      []string   `ipc:"lists"`       // names of each batch's integer lists, e.g. "num_sampled_nodes"
	CUDADevice uint32     `ipc:"cuda_device"` // device ordinal of the allocation (MemoryCUDA)
	MemHandle  []byte     `ipc:"mem_handle"`  // empty or HandleSize bytes
	Events     []EventIPC `ipc:"events"`      // empty or Slots entries
	// ReadyWords (MemoryCUDA, optional): the offset from the start of the
	// MemHandle allocation of a uint32 per slot (slot i's at
	// ReadyWords+4*i), past the last slot; each fill of a slot writes the
	// BatchReady's ReadyValue there once the fill is done. 0: no words.
	ReadyWords uint64 `ipc:"ready_words"`
}

// Region is one array inside a slot, at the same offset in every slot. A
// batch's data is the contiguous array of Shape with Shape[CountAxis]
// replaced by the batch's count for the region (BatchReady.Counts), at
// Offset.
type Region struct {
	Name      string   `ipc:"name"`              // "x", "y", "n_id", "edge_index", ...
	Offset    uint64   `ipc:"offset"`            // from the slot start, a multiple of RegionAlign
	Bytes     uint64   `ipc:"bytes"`             // capacity in bytes; Offset+Bytes <= SlotBytes
	DType     string   `ipc:"dtype"`             // "float32", "int64", ...
	Shape     []uint64 `ipc:"shape,max=MaxDims"` // capacity shape, 1 to MaxDims dims (e.g. [max_nodes, feature_dim])
	CountAxis uint8    `ipc:"count_axis"`        // the axis whose length varies per batch, < len(Shape)
}

// EventIPC holds a slot's two cudaIpcEventHandle_t: Ready is recorded by the
// daemon after filling the slot, Released by the trainer when done with it.
type EventIPC struct {
	Ready    [HandleSize]byte `ipc:"ready"`
	Released [HandleSize]byte `ipc:"released"`
}

// check validates Opened's cross-field rules; both sides apply it.
func (m *Opened) check() *ProtocolError {
	if m.Slots == 0 {
		return perr(CodeBadMessage, "slots is 0")
	}
	if m.SlotBytes%RegionAlign != 0 {
		return perr(CodeBadMessage, "slot_bytes %d is not a multiple of %d", m.SlotBytes, RegionAlign)
	}
	for i := range m.Regions {
		r := &m.Regions[i]
		if r.Offset%RegionAlign != 0 {
			return perr(CodeBadMessage, "region %q: offset %d is not a multiple of %d", r.Name, r.Offset, RegionAlign)
		}
		if r.Offset > m.SlotBytes || r.Bytes > m.SlotBytes-r.Offset {
			return perr(CodeBadMessage, "region %q: [%d, +%d) outside the %d-byte slot", r.Name, r.Offset, r.Bytes, m.SlotBytes)
		}
		if len(r.Shape) == 0 || int(r.CountAxis) >= len(r.Shape) {
			return perr(CodeBadMessage, "region %q: count axis %d of a %d-dimensional shape", r.Name, r.CountAxis, len(r.Shape))
		}
	}
	switch m.Memory {
	case MemoryShm:
		if m.CUDADevice != 0 || len(m.MemHandle) != 0 || len(m.Events) != 0 || m.ReadyWords != 0 {
			return perr(CodeBadMessage, "shm memory with CUDA handles")
		}
	case MemoryCUDA:
		if len(m.MemHandle) != HandleSize {
			return perr(CodeBadMessage, "mem_handle of %d bytes, want %d", len(m.MemHandle), HandleSize)
		}
		if uint64(len(m.Events)) != uint64(m.Slots) {
			return perr(CodeBadMessage, "%d event pairs for %d slots", len(m.Events), m.Slots)
		}
		// The words lie past the slots: no overlap with any slot, and no
		// overflow of the offsets the client computes.
		if w := m.ReadyWords; w != 0 && (w%4 != 0 || m.SlotBytes > w/uint64(m.Slots) || w > math.MaxUint64-4*uint64(m.Slots)) {
			return perr(CodeBadMessage, "ready_words at %d: not a multiple of 4 past the %d slots of %d bytes", w, m.Slots, m.SlotBytes)
		}
	default:
		return perr(CodeBadMessage, "memory kind %q, want %q or %q", m.Memory, MemoryShm, MemoryCUDA)
	}
	return nil
}

// Region returns the region called name, or nil.
func (m *Opened) Region(name string) *Region {
	for i := range m.Regions {
		if m.Regions[i].Name == name {
			return &m.Regions[i]
		}
	}
	return nil
}

// Count returns b's count for the region called name (false if there is no
// such region, or b does not match m).
func (m *Opened) Count(b *BatchReady, name string) (uint32, bool) {
	for i := range m.Regions {
		if m.Regions[i].Name == name && i < len(b.Counts) {
			return b.Counts[i], true
		}
	}
	return 0, false
}

// Scalar returns b's value of the scalar called name.
func (m *Opened) Scalar(b *BatchReady, name string) (int64, bool) {
	for i, s := range m.Scalars {
		if s == name && i < len(b.Scalars) {
			return b.Scalars[i], true
		}
	}
	return 0, false
}

// List returns b's value of the list called name.
func (m *Opened) List(b *BatchReady, name string) ([]uint32, bool) {
	for i, s := range m.Lists {
		if s == name && i < len(b.Lists) {
			return b.Lists[i], true
		}
	}
	return nil, false
}

// Matches reports whether b has what m says every batch has: a count per
// region (within its capacity), a value per scalar and per list, and a slot
// of the ring.
func (m *Opened) Matches(b *BatchReady) error {
	switch {
	case b.Slot >= m.Slots:
		return perr(CodeBadMessage, "BatchReady for slot %d of %d", b.Slot, m.Slots)
	case len(b.Counts) != len(m.Regions) || len(b.Scalars) != len(m.Scalars) || len(b.Lists) != len(m.Lists):
		return perr(CodeBadMessage, "BatchReady with %d counts, %d scalars and %d lists; Opened has %d regions, %d scalars and %d lists",
			len(b.Counts), len(b.Scalars), len(b.Lists), len(m.Regions), len(m.Scalars), len(m.Lists))
	}
	for i, r := range m.Regions {
		if uint64(b.Counts[i]) > r.Shape[r.CountAxis] {
			return perr(CodeBadMessage, "BatchReady: region %q counts %d, its capacity is %d", r.Name, b.Counts[i], r.Shape[r.CountAxis])
		}
	}
	return nil
}

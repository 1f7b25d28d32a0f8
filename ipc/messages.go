package ipc

import (
	"fmt"
	"strconv"
	"strings"
)

// Type is the u16 message type in a frame header. Values are stable.
type Type uint16

// Message types.
const (
	TypeHello      Type = 1
	TypeWelcome    Type = 2
	TypeOpen       Type = 3
	TypeOpened     Type = 4
	TypeStartEpoch Type = 5
	TypeBatchReady Type = 6
	TypeRelease    Type = 7
	TypeEpochEnd   Type = 8
	TypeError      Type = 9
	TypeGoodbye    Type = 10
)

var typeNames = [...]string{
	TypeHello: "Hello", TypeWelcome: "Welcome", TypeOpen: "Open", TypeOpened: "Opened",
	TypeStartEpoch: "StartEpoch", TypeBatchReady: "BatchReady", TypeRelease: "Release",
	TypeEpochEnd: "EpochEnd", TypeError: "Error", TypeGoodbye: "Goodbye", TypeSeeds: "Seeds",
}

func (t Type) String() string {
	if int(t) < len(typeNames) && typeNames[t] != "" {
		return typeNames[t]
	}
	if n, ok := ringTypeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("Type(%d)", uint16(t))
}

func newMsg(t Type) Msg {
	switch t {
	case TypeHello:
		return new(Hello)
	case TypeWelcome:
		return new(Welcome)
	case TypeOpen:
		return new(Open)
	case TypeOpened:
		return new(Opened)
	case TypeStartEpoch:
		return new(StartEpoch)
	case TypeBatchReady:
		return new(BatchReady)
	case TypeRelease:
		return new(Release)
	case TypeEpochEnd:
		return new(EpochEnd)
	case TypeError:
		return new(Error)
	case TypeGoodbye:
		return new(Goodbye)
	case TypeSeeds:
		return new(Seeds)
	}
	return newRingMsg(t) // ring_msgs.go
}

// Hello (client to daemon) opens the handshake. On the wire it starts with
// Magic; the decoder rejects any other magic with CodeUnsupportedVersion.
// The decoder accepts any Version: the daemon answers a version it does not
// speak with Error(unsupported_version).
type Hello struct {
	Version uint16 // protocol version the client speaks (Version)
	PID     uint32 // client process id, informational (SO_PEERCRED is authoritative)
	Name    string // client name for logs, e.g. "train.py rank 0"
}

// Welcome (daemon to client) answers Hello with the daemon's facts.
type Welcome struct {
	Version       uint16 // protocol version the daemon will speak on this connection
	DaemonVersion string // free-form, e.g. "loaderd 0.1.0"
	Dataset       Dataset
}

// Dataset describes the dataset the daemon serves.
type Dataset struct {
	Name         string
	NumNodes     uint64
	NumEdges     uint64
	FeatureDim   uint32
	FeatureDType string // stored feature dtype, e.g. "float32"
	NumClasses   uint32
	Splits       []Split
}

// Split is a named seed set ("train", "val", "test") and its size in nodes.
type Split struct {
	Name string
	Size uint64
}

// Open (client to daemon) asks for a batch stream. Sent once per connection.
type Open struct {
	Job          string  // job name; trainers of one job share an epoch order
	Split        string  // seed split, one of Welcome.Dataset.Splits
	BatchSize    uint32  // seeds per batch, 1..Limits.MaxBatchSize
	Fanouts      []int32 // per hop, outermost first as in PyG; -1 = all neighbours
	Shuffle      bool    // shuffle seeds each epoch
	Seed         uint64  // shuffle/sampling seed
	Rank         uint32  // this trainer's rank, < WorldSize
	WorldSize    uint32  // trainers splitting the split, >= 1
	DropLast     bool    // drop the last incomplete batch
	Device       string  // "cpu" or "cuda:N"
	FeatureDType string  // "" = the dataset's dtype
	Slots        uint32  // slots in the ring, 0 = daemon default
	StartEpoch   uint32  // resume point; 0,0 = fresh
	StartBatch   uint32
}

// Validate checks the request's semantics (beyond what decoding checks) and
// returns a *ProtocolError with CodeBadRequest if it cannot be honoured by
// any daemon. Dataset-specific checks (split names, dtypes) are serve's.
func (m *Open) Validate() error {
	switch {
	case m.BatchSize == 0:
		return perr(CodeBadRequest, "Open: batch_size is 0")
	case len(m.Fanouts) == 0:
		return perr(CodeBadRequest, "Open: no fanouts")
	case m.WorldSize == 0:
		return perr(CodeBadRequest, "Open: world_size is 0")
	case m.Rank >= m.WorldSize:
		return perr(CodeBadRequest, "Open: rank %d >= world_size %d", m.Rank, m.WorldSize)
	case m.Split == "":
		return perr(CodeBadRequest, "Open: empty split")
	}
	if _, err := ParseDevice(m.Device); err != nil {
		return err
	}
	return nil
}

// ParseDevice parses "cpu" (returns -1) or "cuda:N" (returns N).
func ParseDevice(s string) (int, error) {
	if s == "cpu" {
		return -1, nil
	}
	if rest, ok := strings.CutPrefix(s, "cuda:"); ok {
		if n, err := strconv.ParseUint(rest, 10, 16); err == nil && (rest == "0" || rest[0] != '0') {
			return int(n), nil
		}
	}
	return 0, perr(CodeBadRequest, "device %q: want \"cpu\" or \"cuda:N\"", s)
}

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
	NumBatches uint32 // batches per epoch for this rank
	Slots      uint32 // slots in the ring, >= 1
	SlotBytes  uint64 // bytes per slot, a multiple of RegionAlign
	Memory     string // MemoryShm or MemoryCUDA
	Regions    []Region
	Scalars    []string   // names of each batch's integers, e.g. "batch_size"
	Lists      []string   // names of each batch's integer lists, e.g. "num_sampled_nodes"
	CUDADevice uint32     // device ordinal of the allocation (MemoryCUDA)
	MemHandle  []byte     // empty or HandleSize bytes
	Events     []EventIPC // empty or Slots entries
}

// Region is one array inside a slot, at the same offset in every slot. A
// batch's data is the contiguous array of Shape with Shape[CountAxis]
// replaced by the batch's count for the region (BatchReady.Counts), at
// Offset.
type Region struct {
	Name      string   // "x", "y", "n_id", "edge_index", ...
	Offset    uint64   // from the slot start, a multiple of RegionAlign
	Bytes     uint64   // capacity in bytes; Offset+Bytes <= SlotBytes
	DType     string   // "float32", "int64", ...
	Shape     []uint64 // capacity shape, 1 to MaxDims dims (e.g. [max_nodes, feature_dim])
	CountAxis uint8    // the axis whose length varies per batch, < len(Shape)
}

// EventIPC holds a slot's two cudaIpcEventHandle_t: Ready is recorded by the
// daemon after filling the slot, Released by the trainer when done with it.
type EventIPC struct {
	Ready    [HandleSize]byte
	Released [HandleSize]byte
}

// StartEpoch (client to daemon) starts streaming epoch Epoch.
type StartEpoch struct {
	Epoch uint32
}

// BatchReady (daemon to client): slot Slot holds batch Index of Epoch.
// Counts, Scalars and Lists follow Opened.Regions, Opened.Scalars and
// Opened.Lists, entry for entry.
type BatchReady struct {
	Slot    uint32
	Epoch   uint32
	Index   uint32     // batch number within the epoch
	Counts  []uint32   // per region, its length along its count axis
	Scalars []int64    // per Opened.Scalars name
	Lists   [][]uint32 // per Opened.Lists name
}

// Release (client to daemon): the client is done with Slot, which held
// batch Index of Epoch. On the CUDA path the client records the slot's
// Released event before sending it.
type Release struct {
	Slot  uint32
	Epoch uint32
	Index uint32
}

// EpochEnd (daemon to client): every batch of Epoch has been sent.
type EpochEnd struct {
	Epoch      uint32
	NumBatches uint32 // BatchReady messages sent for the epoch
}

// Error (either side) reports why the sender is closing the connection.
type Error struct {
	Code    Code // any value decodes; unknown codes mean "error"
	Message string
}

// Goodbye (either side) closes the connection cleanly.
type Goodbye struct {
	Reason string
}

func (*Hello) Type() Type      { return TypeHello }
func (*Welcome) Type() Type    { return TypeWelcome }
func (*Open) Type() Type       { return TypeOpen }
func (*Opened) Type() Type     { return TypeOpened }
func (*StartEpoch) Type() Type { return TypeStartEpoch }
func (*BatchReady) Type() Type { return TypeBatchReady }
func (*Release) Type() Type    { return TypeRelease }
func (*EpochEnd) Type() Type   { return TypeEpochEnd }
func (*Error) Type() Type      { return TypeError }
func (*Goodbye) Type() Type    { return TypeGoodbye }

func (m *Hello) encode(e *encoder) {
	e.b = append(e.b, Magic...)
	e.u16(m.Version)
	e.u32(m.PID)
	e.str("name", m.Name)
}

func (m *Hello) decode(d *decoder) {
	if p := d.next(4); p != nil && string(p) != Magic {
		d.fail(CodeUnsupportedVersion, "magic %q, want %q", p, Magic)
		return
	}
	m.Version = d.u16()
	m.PID = d.u32()
	m.Name = d.str("name")
}

func (m *Welcome) encode(e *encoder) {
	e.u16(m.Version)
	e.str("daemon_version", m.DaemonVersion)
	ds := &m.Dataset
	e.str("dataset.name", ds.Name)
	e.u64(ds.NumNodes)
	e.u64(ds.NumEdges)
	e.u32(ds.FeatureDim)
	e.str("dataset.feature_dtype", ds.FeatureDType)
	e.u32(ds.NumClasses)
	e.count("splits", len(ds.Splits))
	for _, s := range ds.Splits {
		e.str("split.name", s.Name)
		e.u64(s.Size)
	}
}

func (m *Welcome) decode(d *decoder) {
	m.Version = d.u16()
	m.DaemonVersion = d.str("daemon_version")
	ds := &m.Dataset
	ds.Name = d.str("dataset.name")
	ds.NumNodes = d.u64()
	ds.NumEdges = d.u64()
	ds.FeatureDim = d.u32()
	ds.FeatureDType = d.str("dataset.feature_dtype")
	ds.NumClasses = d.u32()
	if n := d.count("splits", d.lim.MaxList, 2+8); n > 0 {
		ds.Splits = make([]Split, n)
		for i := range ds.Splits {
			ds.Splits[i].Name = d.str("split.name")
			ds.Splits[i].Size = d.u64()
		}
	}
}

func (m *Open) encode(e *encoder) {
	e.str("job", m.Job)
	e.str("split", m.Split)
	e.u32(m.BatchSize)
	e.count("fanouts", len(m.Fanouts))
	for _, f := range m.Fanouts {
		if f < -1 {
			e.fail(CodeBadMessage, "fanout %d, must be >= -1", f)
		}
		e.i32(f)
	}
	e.bool(m.Shuffle)
	e.u64(m.Seed)
	e.u32(m.Rank)
	e.u32(m.WorldSize)
	e.bool(m.DropLast)
	e.str("device", m.Device)
	e.str("feature_dtype", m.FeatureDType)
	e.u32(m.Slots)
	e.u32(m.StartEpoch)
	e.u32(m.StartBatch)
}

func (m *Open) decode(d *decoder) {
	m.Job = d.str("job")
	m.Split = d.str("split")
	m.BatchSize = d.u32()
	if d.err == nil && uint64(m.BatchSize) > uint64(d.lim.MaxBatchSize) {
		d.fail(CodeLimit, "batch_size %d exceeds the limit of %d", m.BatchSize, d.lim.MaxBatchSize)
	}
	if n := d.count("fanouts", d.lim.MaxFanouts, 4); n > 0 {
		m.Fanouts = make([]int32, n)
		for i := range m.Fanouts {
			m.Fanouts[i] = d.i32()
			if m.Fanouts[i] < -1 {
				d.fail(CodeBadMessage, "fanout %d, must be >= -1", m.Fanouts[i])
			}
		}
	}
	m.Shuffle = d.bool("shuffle")
	m.Seed = d.u64()
	m.Rank = d.u32()
	m.WorldSize = d.u32()
	m.DropLast = d.bool("drop_last")
	m.Device = d.str("device")
	m.FeatureDType = d.str("feature_dtype")
	m.Slots = d.u32()
	m.StartEpoch = d.u32()
	m.StartBatch = d.u32()
}

func (m *Opened) encode(e *encoder) {
	e.u32(m.NumBatches)
	e.u32(m.Slots)
	e.u64(m.SlotBytes)
	e.str("memory", m.Memory)
	e.count("regions", len(m.Regions))
	for i := range m.Regions {
		r := &m.Regions[i]
		e.str("region.name", r.Name)
		e.u64(r.Offset)
		e.u64(r.Bytes)
		e.str("region.dtype", r.DType)
		if len(r.Shape) > MaxDims {
			e.fail(CodeLimit, "region %q: %d dims, at most %d", r.Name, len(r.Shape), MaxDims)
		}
		e.count("region.shape", len(r.Shape))
		for _, s := range r.Shape {
			e.u64(s)
		}
		e.u8(r.CountAxis)
	}
	e.strs("scalars", m.Scalars)
	e.strs("lists", m.Lists)
	e.u32(m.CUDADevice)
	if len(m.MemHandle) != 0 && len(m.MemHandle) != HandleSize {
		e.fail(CodeBadMessage, "mem_handle of %d bytes, want 0 or %d", len(m.MemHandle), HandleSize)
	}
	e.count("mem_handle", len(m.MemHandle))
	e.b = append(e.b, m.MemHandle...)
	e.count("events", len(m.Events))
	for i := range m.Events {
		e.b = append(e.b, m.Events[i].Ready[:]...)
		e.b = append(e.b, m.Events[i].Released[:]...)
	}
	if err := m.check(); err != nil && e.err == nil {
		e.err = err
	}
}

func (m *Opened) decode(d *decoder) {
	m.NumBatches = d.u32()
	m.Slots = d.u32()
	m.SlotBytes = d.u64()
	m.Memory = d.str("memory")
	if n := d.count("regions", d.lim.MaxList, 2+8+8+2+2+1); n > 0 {
		m.Regions = make([]Region, n)
		for i := range m.Regions {
			r := &m.Regions[i]
			r.Name = d.str("region.name")
			r.Offset = d.u64()
			r.Bytes = d.u64()
			r.DType = d.str("region.dtype")
			if k := d.count("region.shape", MaxDims, 8); k > 0 {
				r.Shape = make([]uint64, k)
				for j := range r.Shape {
					r.Shape[j] = d.u64()
				}
			}
			r.CountAxis = d.u8()
		}
	}
	m.Scalars = d.strs("scalars")
	m.Lists = d.strs("lists")
	m.CUDADevice = d.u32()
	if n := d.count("mem_handle", d.lim.MaxList, 1); n > 0 {
		m.MemHandle = append([]byte(nil), d.next(n)...)
	}
	if n := d.count("events", d.lim.MaxList, 2*HandleSize); n > 0 {
		m.Events = make([]EventIPC, n)
		for i := range m.Events {
			copy(m.Events[i].Ready[:], d.next(HandleSize))
			copy(m.Events[i].Released[:], d.next(HandleSize))
		}
	}
	if d.err == nil {
		if err := m.check(); err != nil {
			d.err = err
		}
	}
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
		if m.CUDADevice != 0 || len(m.MemHandle) != 0 || len(m.Events) != 0 {
			return perr(CodeBadMessage, "shm memory with CUDA handles")
		}
	case MemoryCUDA:
		if len(m.MemHandle) != HandleSize {
			return perr(CodeBadMessage, "mem_handle of %d bytes, want %d", len(m.MemHandle), HandleSize)
		}
		if uint64(len(m.Events)) != uint64(m.Slots) {
			return perr(CodeBadMessage, "%d event pairs for %d slots", len(m.Events), m.Slots)
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

func (m *StartEpoch) encode(e *encoder) { e.u32(m.Epoch) }
func (m *StartEpoch) decode(d *decoder) { m.Epoch = d.u32() }

func (m *BatchReady) encode(e *encoder) {
	e.u32(m.Slot)
	e.u32(m.Epoch)
	e.u32(m.Index)
	e.count("counts", len(m.Counts))
	for _, v := range m.Counts {
		e.u32(v)
	}
	e.count("scalars", len(m.Scalars))
	for _, v := range m.Scalars {
		e.u64(uint64(v))
	}
	e.count("lists", len(m.Lists))
	for _, l := range m.Lists {
		e.count("list", len(l))
		for _, v := range l {
			e.u32(v)
		}
	}
}

func (m *BatchReady) decode(d *decoder) {
	m.Slot = d.u32()
	m.Epoch = d.u32()
	m.Index = d.u32()
	m.Counts = d.u32s("counts", d.lim.MaxList)
	if n := d.count("scalars", d.lim.MaxList, 8); n > 0 {
		m.Scalars = make([]int64, n)
		for i := range m.Scalars {
			m.Scalars[i] = int64(d.u64())
		}
	}
	if n := d.count("lists", d.lim.MaxList, 2); n > 0 {
		m.Lists = make([][]uint32, n)
		for i := range m.Lists {
			m.Lists[i] = d.u32s("list", d.lim.MaxList)
		}
	}
}

func (d *decoder) u32s(what string, max int) []uint32 {
	n := d.count(what, max, 4)
	if n == 0 {
		return nil
	}
	v := make([]uint32, n)
	for i := range v {
		v[i] = d.u32()
	}
	return v
}

func (m *Release) encode(e *encoder) {
	e.u32(m.Slot)
	e.u32(m.Epoch)
	e.u32(m.Index)
}

func (m *Release) decode(d *decoder) {
	m.Slot = d.u32()
	m.Epoch = d.u32()
	m.Index = d.u32()
}

func (m *EpochEnd) encode(e *encoder) {
	e.u32(m.Epoch)
	e.u32(m.NumBatches)
}

func (m *EpochEnd) decode(d *decoder) {
	m.Epoch = d.u32()
	m.NumBatches = d.u32()
}

func (m *Error) encode(e *encoder) {
	e.u16(uint16(m.Code))
	e.str("message", m.Message)
}

func (m *Error) decode(d *decoder) {
	m.Code = Code(d.u16())
	m.Message = d.str("message")
}

func (m *Goodbye) encode(e *encoder) { e.str("reason", m.Reason) }
func (m *Goodbye) decode(d *decoder) { m.Reason = d.str("reason") }

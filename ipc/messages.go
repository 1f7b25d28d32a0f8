package ipc

import (
	"strconv"
	"strings"
)

// Hello (client to daemon) opens the handshake. On the wire it starts with
// Magic; the decoder rejects any other magic with CodeUnsupportedVersion.
// The decoder accepts any Version: the daemon answers a version it does not
// speak with Error(unsupported_version).
type Hello struct {
	Version uint16 `ipc:"version"` // protocol version the client speaks (Version)
	PID     uint32 `ipc:"pid"`     // client process id, informational (SO_PEERCRED is authoritative)
	Name    string `ipc:"name"`    // client name for logs, e.g. "train.py rank 0"
}

// Welcome (daemon to client) answers Hello with the daemon's facts.
type Welcome struct {
	Version       uint16  `ipc:"version"`        // protocol version the daemon will speak on this connection
	DaemonVersion string  `ipc:"daemon_version"` // free-form, e.g. "loaderd 0.1.0"
	Dataset       Dataset `ipc:"dataset"`
}

// Dataset describes the dataset the daemon serves.
type Dataset struct {
	Name         string  `ipc:"name"`
	NumNodes     uint64  `ipc:"num_nodes"`
	NumEdges     uint64  `ipc:"num_edges"`
	FeatureDim   uint32  `ipc:"feature_dim"`
	FeatureDType string  `ipc:"feature_dtype"` // stored feature dtype, e.g. "float32"
	NumClasses   uint32  `ipc:"num_classes"`
	Splits       []Split `ipc:"splits"`
	// A heterogeneous dataset (protocol 3) lists its node and edge types;
	// the fields above then hold the totals of nodes and edges, and no
	// features, classes or splits (those are the node types').
	NodeTypes []NodeTypeInfo `ipc:"node_types"` // empty for a homogeneous dataset
	EdgeTypes []EdgeTypeInfo `ipc:"edge_types"` // empty for a homogeneous dataset; the order Open.EdgeFanouts uses
	NodeTime  bool           `ipc:"node_time"`  // the dataset has node times (temporal sampling possible)
	EdgeTime  bool           `ipc:"edge_time"`  // the dataset has edge times
}

// NodeTypeInfo describes one node type of a heterogeneous dataset.
type NodeTypeInfo struct {
	Name         string  `ipc:"name"`
	NumNodes     uint64  `ipc:"num_nodes"`
	FeatureDim   uint32  `ipc:"feature_dim"`   // 0: the type has no features
	FeatureDType string  `ipc:"feature_dtype"` // "" without features
	NumClasses   uint32  `ipc:"num_classes"`   // 0: the type has no labels
	Splits       []Split `ipc:"splits"`        // seed splits of this type
}

// EdgeTypeInfo describes one edge type (src, rel, dst) of a heterogeneous
// dataset: edges from Src nodes to Dst nodes.
type EdgeTypeInfo struct {
	Src      string `ipc:"src"`
	Rel      string `ipc:"rel"`
	Dst      string `ipc:"dst"`
	NumEdges uint64 `ipc:"num_edges"`
}

// Split is a named seed set ("train", "val", "test") and its size in nodes.
type Split struct {
	Name string `ipc:"name"`
	Size uint64 `ipc:"size"`
}

// Open (client to daemon) asks for a batch stream. Sent once per connection.
type Open struct {
	Job          string  `ipc:"job"`                               // job name; trainers of one job share an epoch order
	Split        string  `ipc:"split"`                             // seed split, one of Welcome.Dataset.Splits
	BatchSize    uint32  `ipc:"batch_size,limit=MaxBatchSize"`     // seeds per batch, 1..Limits.MaxBatchSize
	Fanouts      []int32 `ipc:"fanouts,max=MaxFanouts,atleast=-1"` // per hop, outermost first as in PyG; -1 = all neighbours
	Shuffle      bool    `ipc:"shuffle"`                           // shuffle seeds each epoch
	Seed         uint64  `ipc:"seed"`                              // shuffle/sampling seed
	Rank         uint32  `ipc:"rank"`                              // this trainer's rank, < WorldSize
	WorldSize    uint32  `ipc:"world_size"`                        // trainers splitting the split, >= 1
	DropLast     bool    `ipc:"drop_last"`                         // drop the last incomplete batch
	Device       string  `ipc:"device"`                            // "cpu" or "cuda:N"
	FeatureDType string  `ipc:"feature_dtype"`                     // "" = the dataset's dtype
	Slots        uint32  `ipc:"slots"`                             // slots in the ring, 0 = daemon default
	StartEpoch   uint32  `ipc:"start_epoch"`                       // resume point; 0,0 = fresh
	StartBatch   uint32  `ipc:"start_batch"`
	// Protocol 3: heterogeneous and temporal sampling.
	InputType   string  `ipc:"input_type"`              // hetero: node type of the seeds (required); "" for a homogeneous dataset
	EdgeFanouts []int32 `ipc:"edge_fanouts,atleast=-1"` // hetero: hops x len(EdgeTypes), hop-major in Welcome's edge-type order; empty = Fanouts for every edge type
	Temporal    string  `ipc:"temporal"`                // "" none, "uniform" or "last" (PyG's temporal_strategy), "disjoint" (no times)
	TimeAttr    string  `ipc:"time_attr"`               // "node_time" or "edge_time" when Temporal is set
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
	case len(m.EdgeFanouts) > 0 && m.InputType == "":
		return perr(CodeBadRequest, "Open: edge_fanouts without input_type (per-edge-type fanouts are for heterogeneous datasets)")
	case len(m.EdgeFanouts)%len(m.Fanouts) != 0:
		return perr(CodeBadRequest, "Open: %d edge_fanouts for %d hops: want hops x edge types, hop-major", len(m.EdgeFanouts), len(m.Fanouts))
	case m.Temporal != "" && m.Temporal != TemporalUniform && m.Temporal != TemporalLast && m.Temporal != TemporalDisjoint:
		return perr(CodeBadRequest, "Open: temporal %q: want %q, %q, %q or \"\"", m.Temporal, TemporalUniform, TemporalLast, TemporalDisjoint)
	case (m.Temporal == TemporalUniform || m.Temporal == TemporalLast) && m.TimeAttr != TimeAttrNode && m.TimeAttr != TimeAttrEdge:
		return perr(CodeBadRequest, "Open: time_attr %q: temporal sampling needs %q or %q", m.TimeAttr, TimeAttrNode, TimeAttrEdge)
	case (m.Temporal == "" || m.Temporal == TemporalDisjoint) && m.TimeAttr != "":
		return perr(CodeBadRequest, "Open: time_attr %q without temporal sampling (temporal %q)", m.TimeAttr, m.Temporal)
	}
	if _, err := ParseDevice(m.Device); err != nil {
		return err
	}
	return nil
}

// Open.Temporal and Open.TimeAttr values.
const (
	TemporalUniform = "uniform" // eligible neighbours drawn uniformly
	TemporalLast    = "last"    // the most recent eligible neighbours
	// TemporalDisjoint is disjoint subgraphs without times (PyG's
	// disjoint=True): time_attr stays empty.
	TemporalDisjoint = "disjoint"
	TimeAttrNode     = "node_time"
	TimeAttrEdge     = "edge_time"
)

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

// StartEpoch (client to daemon) starts streaming epoch Epoch.
type StartEpoch struct {
	Epoch uint32 `ipc:"epoch"`
}

// BatchReady (daemon to client): slot Slot holds batch Index of Epoch.
// Counts, Scalars and Lists follow Opened.Regions, Opened.Scalars and
// Opened.Lists, entry for entry.
type BatchReady struct {
	Slot    uint32     `ipc:"slot"`
	Epoch   uint32     `ipc:"epoch"`
	Index   uint32     `ipc:"index"`   // batch number within the epoch
	Counts  []uint32   `ipc:"counts"`  // per region, its length along its count axis
	Scalars []int64    `ipc:"scalars"` // per Opened.Scalars name
	Lists   [][]uint32 `ipc:"lists"`   // per Opened.Lists name
	// ReadyValue: on a ring with ready words (Opened.ReadyWords), the
	// value the slot's word takes once this fill is done (the trainer's
	// stream waits for the word to reach it); 0: wait on the slot's ready
	// event instead. Every slot of one fill takes the same value, and the
	// values rise fill by fill over the connection (wrapping past
	// 0xFFFFFFFF to 1), each fill's words written after all its data: a
	// stream that waited for value v has also waited for every batch whose
	// value is at or below v in wrap-around order (v - value, as an int32,
	// at least 0), and need not wait for those again.
	ReadyValue uint32 `ipc:"ready_value"`
}

// Release (client to daemon): the client is done with Slot, which held
// batch Index of Epoch. On the CUDA path the client records the slot's
// Released event before sending it, unless Deferred: then the slot is
// covered by the Released event of the next release on the connection that
// is not deferred (the client records that one on the same stream, after
// the work of every deferred release before it), and the daemon reuses the
// slot only once that release has come and its event is done. A client
// that releases a few batches at a time records one event for them.
type Release struct {
	Slot     uint32 `ipc:"slot"`
	Epoch    uint32 `ipc:"epoch"`
	Index    uint32 `ipc:"index"`
	Deferred bool   `ipc:"deferred"`
}

// EpochEnd (daemon to client): every batch of Epoch has been sent.
type EpochEnd struct {
	Epoch      uint32 `ipc:"epoch"`
	NumBatches uint32 `ipc:"num_batches"` // BatchReady messages sent for the epoch
}

// Error (either side) reports why the sender is closing the connection.
type Error struct {
	Code    Code   `ipc:"code"` // any value decodes; unknown codes mean "error"
	Message string `ipc:"message"`
}

// Goodbye (either side) closes the connection cleanly.
type Goodbye struct {
	Reason string `ipc:"reason"`
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

package ipc

// Seeds: a custom seed list (PyG's input_nodes as a tensor or mask), sent by
// the client after Welcome and before Open. See docs/protocol.md, "11 Seeds".

// CustomSplit is the Open.Split that means "the seeds of the Seeds message
// sent before this Open". No dataset split may have this name.
const CustomSplit = "custom"

// Seeds (client to daemon) carries Count node ids, little-endian int64, in a
// memfd of at least 8*Count bytes passed with the frame (SCM_RIGHTS, exactly
// one descriptor). It is allowed once, in phase open (before Open), and
// leaves the phase unchanged; the Open that follows names CustomSplit (or
// "link:custom..." for link batches over pairs). The
// daemon checks Count (1..max(num_nodes, 2*num_edges): node ids, or the
// ends of the pairs of a "link:custom" split) and every id (0 <= id < num_nodes),
// copies the ids and closes the descriptor; the memfd may be reused or
// closed by the client as soon as Opened (or Error) arrives.
//
// With Times (protocol 3) the memfd holds Count seed times (int64, PyG's
// input_time) after the ids: 16*Count bytes in all. For a heterogeneous
// dataset the ids are of the node type the Open names (Open.InputType).
type Seeds struct {
	Count uint64 `ipc:"count"` // node ids in the memfd
	Times bool   `ipc:"times"` // Count int64 seed times follow the ids
}

func (*Seeds) Type() Type { return TypeSeeds }

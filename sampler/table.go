package sampler

// table maps global node ids to local ids for one shard of a batch. It uses
// open addressing with linear probing; a slot is live when its gen equals the
// table's, so clearing the table for the next batch is one increment.
type table struct {
	slots []slot
	shift uint // slot index = (h << shardHashBits) >> shift
	n     int
	gen   uint32
	added []int32 // slots inserted with a pending value in the current hop
}

type slot struct {
	key int64
	val int32
	gen uint32
}

func hashID(id int64) uint64 { return uint64(id) * golden }

// reset empties the table.
func (t *table) reset() {
	t.n = 0
	t.gen++
	if t.gen == 0 { // wrapped: stale slots could look live
		clear(t.slots)
		t.gen = 1
	}
}

// reserve makes room for k more keys without rehashing (load <= 3/4).
func (t *table) reserve(k int) {
	need := (4*(t.n+k) + 2) / 3
	if len(t.slots) >= need {
		return
	}
	size := max(1024, len(t.slots))
	for size < need {
		size *= 2
	}
	t.rehash(size)
}

func (t *table) rehash(size int) {
	old := t.slots
	t.slots = make([]slot, size)
	t.shift = 64
	for s := size; s > 1; s >>= 1 {
		t.shift--
	}
	oldGen := t.gen
	t.gen = 1
	t.n = 0
	for i := range old {
		if old[i].gen == oldGen {
			t.insertNew(old[i].key, old[i].val)
		}
	}
}

// insertNew adds a key known to be absent.
func (t *table) insertNew(key int64, val int32) {
	mask := len(t.slots) - 1
	i := int((hashID(key) << shardHashBits) >> t.shift)
	for t.slots[i].gen == t.gen {
		i = (i + 1) & mask
	}
	t.slots[i] = slot{key: key, val: val, gen: t.gen}
	t.n++
}

// shardHashBits is how many top hash bits may select the shard (so at most
// 256 shards); the slot index is taken from the bits below them.
const shardHashBits = 8

// upsert returns the value stored for key, or stores val and returns it with
// found == false. idx is the slot used. It grows the table when needed, which moves slots: callers that keep
// idx call reserve first.
func (t *table) upsert(key int64, h uint64, val int32) (v int32, found bool, idx int) {
	if 4*(t.n+1) > 3*len(t.slots) {
		t.reserve(1)
	}
	mask := len(t.slots) - 1
	i := int((h << shardHashBits) >> t.shift)
	for {
		s := &t.slots[i]
		if s.gen != t.gen {
			*s = slot{key: key, val: val, gen: t.gen}
			t.n++
			return val, false, i
		}
		if s.key == key {
			return s.val, true, i
		}
		i = (i + 1) & mask
	}
}

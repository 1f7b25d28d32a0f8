package ipc

// fastCodec is a message with a hand-written codec, used instead of the
// table's generic one: BatchReady, sent once per batch. TestFastCodecs
// checks each against the generic codec on random messages and on every
// mutation of its golden frames: the same bytes, the same values, the same
// error codes.
type fastCodec interface {
	encodeFast(e *encoder)
	decodeFast(d *decoder)
}

// fastCodecs makes a zero message of each type with a hand-written codec.
var fastCodecs = map[Type]func() fastCodec{
	TypeBatchReady: func() fastCodec { return new(BatchReady) },
}

func (m *BatchReady) encodeFast(e *encoder) {
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
		e.count("lists", len(l))
		for _, v := range l {
			e.u32(v)
		}
	}
	e.u32(m.ReadyValue)
}

func (m *BatchReady) decodeFast(d *decoder) {
	m.Slot = d.u32()
	m.Epoch = d.u32()
	m.Index = d.u32()
	m.Counts = d.u32n(d.count("counts", d.lim.MaxList, 4))
	if n := d.count("scalars", d.lim.MaxList, 8); n > 0 {
		m.Scalars = make([]int64, n)
		for i := range m.Scalars {
			m.Scalars[i] = int64(d.u64())
		}
	}
	if n := d.count("lists", d.lim.MaxList, 2); n > 0 {
		m.Lists = make([][]uint32, n)
		for i := range m.Lists {
			m.Lists[i] = d.u32n(d.count("lists", d.lim.MaxList, 4))
		}
	}
	m.ReadyValue = d.u32()
}

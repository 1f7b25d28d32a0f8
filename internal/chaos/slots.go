package chaos

import (
	"encoding/binary"

	"golang.org/x/sys/unix"

	"github.com/gnnloader/gnnloader/ipc"
)

type slotMem struct{ b []byte }

func mapSlots(fd int, o *ipc.Opened) (*slotMem, error) {
	b, err := unix.Mmap(fd, 0, int(o.SlotBytes)*int(o.Slots), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	return &slotMem{b}, nil
}

func (m *slotMem) unmap() { unix.Munmap(m.b) }

// seeds reads the batch's seeds (the first BatchSize entries of n_id).
func (m *slotMem) seeds(o *ipc.Opened, b *ipc.BatchReady) []int64 {
	off := int(b.Slot)*int(o.SlotBytes) + int(o.Region("n_id").Offset)
	n, _ := o.Scalar(b, "batch_size")
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(m.b[off+8*i:]))
	}
	return out
}

package serve

// The gradient exchange's CPU path: one memfd per rank.

import (
	"context"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/gnnloader/gnnloader/ipc"
	"github.com/gnnloader/gnnloader/ring"
)

// gradShm is the CPU path: one memfd per rank, reduced by ring.ReduceCPU.
type gradShm struct {
	fds  []int
	bufs [][]byte
}

func newGradShm(world int, bytes int64) (gradBackend, error) {
	g := &gradShm{}
	for r := 0; r < world; r++ {
		fd, err := unix.MemfdCreate(fmt.Sprintf("gnnloader-grad%d", r), unix.MFD_CLOEXEC)
		if err == nil {
			if err = unix.Ftruncate(fd, bytes); err != nil {
				unix.Close(fd)
			}
		}
		var b []byte
		if err == nil {
			if b, err = unix.Mmap(fd, 0, int(bytes), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
				unix.Close(fd)
			}
		}
		if err != nil {
			g.close()
			return nil, err
		}
		g.fds = append(g.fds, fd)
		g.bufs = append(g.bufs, b)
	}
	return g, nil
}

func (g *gradShm) describe(r int, m *ipc.GradRegistered) []int {
	m.Memory = ipc.MemoryShm
	m.Links = []string{"cpu"}
	return []int{g.fds[r]}
}

func (g *gradShm) reduce(_ context.Context, count int64, dt ring.DType, op ring.Op) error {
	return ring.ReduceCPU(g.bufs, count, dt, op)
}

func (g *gradShm) close() {
	for _, b := range g.bufs {
		unix.Munmap(b)
	}
	for _, fd := range g.fds {
		unix.Close(fd)
	}
}

package ring

import (
	"fmt"
	"sync"
	"syscall"
	"unsafe"

	"github.com/gnnloader/gnnloader/cudaext"
)

// GPU is a ring all-reduce over GPUs held by one process (loaderd holds every
// trainer's context and gradient buffer). Rank i of the ring works in
// Contexts[i] on its own non-blocking stream; ranks may share a device.
//
// AllReduce enqueues one kernel per rank (cudaext/kernels/ring.cu): the bucket
// is split into one chunk per rank and each chunk into pieces; every block
// runs the ring's reduce-scatter then all-gather steps on its pieces, reading
// the previous rank's buffer directly (peer access over NVLink or PCIe) and
// writing the sum (or the copy) into its own: one pass, no staging. Blocks
// synchronise with their peer block on the previous rank through flags in
// memory, so transfers and additions of different pieces overlap, and the
// kernel ends only when the next rank no longer reads its buffer.
// Where a rank cannot access the previous rank's memory, that rank's data
// and flags go through mapped pinned host memory instead (Links says which).
type GPU struct {
	ranks   int
	ctxs    []*cudaext.Context
	streams []*cudaext.Stream
	mods    []*cudaext.Module
	fns     [][3]*cudaext.Function // per rank, by DType: pull kernels
	pfns    [][3]*cudaext.Function // push kernels
	push    bool                   // every link peer or same device, and not opts.Pull
	stage   []cudaext.DevicePtr    // push: per rank, a staging buffer of stageN bytes
	stageN  []int64
	flags   []cudaext.DevicePtr // per rank: maxFlagBlocks uint64
	flagMem [][]byte            // host flag memory per rank (nil: on the device)
	mirror  [][]byte            // host mirrors per rank (nil: not needed)
	needMir []bool
	links   []Link
	sms     int
	perDev  int
	op      uint64
	opts    GPUOptions
	mu      sync.Mutex
}

// Link is how rank To reads rank From's data (From = To-1 in the ring).
type Link struct {
	From, To       int
	FromDev, ToDev int
	Via            string // "same device", "peer" or "host" (pinned host memory)
}

func (l Link) String() string {
	return fmt.Sprintf("rank %d (GPU %d) -> rank %d (GPU %d): %s", l.From, l.FromDev, l.To, l.ToDev, l.Via)
}

// GPUOptions tune the ring; the zero value is the default.
type GPUOptions struct {
	// HostLinks sends every link through pinned host memory, as if no two
	// GPUs had peer access (for tests).
	HostLinks bool
	// Pull uses the pull kernels (each rank reads the previous rank's buffer)
	// even where every link has peer access; the default there is push (each
	// rank writes into the next rank's buffer and staging: NVLink carries
	// stores, every load is local; it costs a staging buffer per rank of the
	// bucket's size).
	Pull bool
	// PushMinBytes: buckets from this size up use the push kernels (default
	// DefaultPushMinBytes; 1 pushes everything).
	PushMinBytes int64
	// MaxBlocks caps the blocks a rank's kernel uses (default: the SM count,
	// divided among ranks that share a device).
	MaxBlocks int
	// PieceBytes is the largest piece one block moves per step (default 256 KiB).
	PieceBytes int
	// MinPieceBytes is the smallest (default 16 KiB): small buckets use fewer blocks.
	MinPieceBytes int
}

const (
	maxFlagBlocks = 1024
	threads       = 512
	flagBytes     = maxFlagBlocks * 8
)

var (
	kernelNames = [3]string{Float32: "gnn_ring_f32", BFloat16: "gnn_ring_bf16", Float16: "gnn_ring_f16"}
	pushNames   = [3]string{Float32: "gnn_ringp_f32", BFloat16: "gnn_ringp_bf16", Float16: "gnn_ringp_f16"}
)

// NewGPU builds a ring over ctxs (rank i in ctxs[i], in ring order: see
// Order). It enables peer access between neighbours where the devices allow
// it, loads the kernels into every context and makes one stream per rank.
func NewGPU(ctxs []*cudaext.Context, opts *GPUOptions) (*GPU, error) {
	g := &GPU{ranks: len(ctxs), ctxs: ctxs}
	if opts != nil {
		g.opts = *opts
	}
	if g.ranks == 0 || g.ranks > maxFlagBlocks {
		return nil, fmt.Errorf("ring: %d ranks", g.ranks)
	}
	img, err := cudaext.RingImage()
	if err != nil {
		return nil, err
	}
	n := g.ranks
	g.streams = make([]*cudaext.Stream, n)
	g.mods = make([]*cudaext.Module, n)
	g.fns = make([][3]*cudaext.Function, n)
	g.pfns = make([][3]*cudaext.Function, n)
	g.stage = make([]cudaext.DevicePtr, n)
	g.stageN = make([]int64, n)
	g.flags = make([]cudaext.DevicePtr, n)
	g.flagMem = make([][]byte, n)
	g.mirror = make([][]byte, n)
	g.needMir = make([]bool, n)
	perDev := map[int]int{}
	for _, c := range ctxs {
		perDev[c.Device.Ordinal]++
	}
	for _, v := range perDev {
		g.perDev = max(g.perDev, v)
	}
	// canRead[i][j]: rank i can read rank j's device memory.
	canRead := func(i, j int) (bool, error) {
		if ctxs[i].Device.Ordinal == ctxs[j].Device.Ordinal {
			return true, nil
		}
		if g.opts.HostLinks {
			return false, nil
		}
		return ctxs[i].Device.CanAccessPeer(ctxs[j].Device)
	}
	prevOK := make([]bool, n) // rank i reads rank i-1 (data and flags)
	nextOK := make([]bool, n) // rank i reads rank i+1 (flags)
	for i := 0; i < n; i++ {
		if prevOK[i], err = canRead(i, (i-1+n)%n); err != nil {
			return nil, err
		}
		if nextOK[i], err = canRead(i, (i+1)%n); err != nil {
			return nil, err
		}
	}
	g.push = !g.opts.Pull
	for i := 0; i < n; i++ {
		g.push = g.push && prevOK[i] && nextOK[i]
	}
	fail := func(err error) (*GPU, error) { g.Close(); return nil, err }
	for i := 0; i < n; i++ {
		prev, next := (i-1+n)%n, (i+1)%n
		via := "peer"
		switch {
		case ctxs[i].Device.Ordinal == ctxs[prev].Device.Ordinal:
			via = "same device"
		case !prevOK[i]:
			via = "host"
		}
		g.links = append(g.links, Link{From: prev, To: i, FromDev: ctxs[prev].Device.Ordinal, ToDev: ctxs[i].Device.Ordinal, Via: via})
		g.needMir[i] = !prevOK[next]
		flagsOnHost := !prevOK[next] || !nextOK[prev]
		err := ctxs[i].Do(func() error {
			if g.sms == 0 {
				sms, err := ctxs[i].Device.Attribute(cudaext.AttrMultiprocessorCount)
				if err != nil {
					return err
				}
				g.sms = sms
			}
			for _, j := range []int{prev, next} {
				ok := prevOK[i]
				if j == next {
					ok = nextOK[i]
				}
				if ok && ctxs[j].Device.Ordinal != ctxs[i].Device.Ordinal {
					if err := cudaext.EnablePeerAccess(ctxs[j]); err != nil {
						return err
					}
				}
			}
			s, err := cudaext.NewStream()
			if err != nil {
				return err
			}
			g.streams[i] = s
			m, err := cudaext.LoadModule(img)
			if err != nil {
				return err
			}
			g.mods[i] = m
			for dt, name := range kernelNames {
				f, err := m.Function(name)
				if err != nil {
					return err
				}
				g.fns[i][dt] = f
				if g.pfns[i][dt], err = m.Function(pushNames[dt]); err != nil {
					return err
				}
			}
			if flagsOnHost {
				b, p, err := hostAlloc(flagBytes)
				if err != nil {
					return err
				}
				g.flagMem[i], g.flags[i] = b, p
				return nil
			}
			p, err := cudaext.MemAlloc(flagBytes)
			if err != nil {
				return err
			}
			g.flags[i] = p
			if err := cudaext.MemsetD8Async(p, 0, flagBytes, s); err != nil {
				return err
			}
			return s.Synchronize()
		})
		if err != nil {
			return fail(err)
		}
	}
	g.op = 1
	return g, nil
}

// hostAlloc maps n bytes of zeroed memory and registers it (portable, mapped):
// under unified addressing its device address is its host address.
func hostAlloc(n int) ([]byte, cudaext.DevicePtr, error) {
	n = (n + 4095) &^ 4095
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, 0, err
	}
	if err := cudaext.HostRegister(b, cudaext.HostRegisterPortable|cudaext.HostRegisterDeviceMap); err != nil {
		syscall.Munmap(b)
		return nil, 0, err
	}
	p, err := cudaext.HostDevicePointer(b)
	if err != nil {
		cudaext.HostUnregister(b)
		syscall.Munmap(b)
		return nil, 0, err
	}
	return b, p, nil
}

func hostFree(b []byte) {
	if b != nil {
		cudaext.HostUnregister(b)
		syscall.Munmap(b)
	}
}

// Push reports whether the ring runs the push kernels for large buckets
// (every link has peer access; see GPUOptions.Pull and Plan).
func (g *GPU) Push() bool { return g.push }

// Ranks is the ring's size.
func (g *GPU) Ranks() int { return g.ranks }

// Links says how each rank reads the previous one.
func (g *GPU) Links() []Link { return append([]Link(nil), g.links...) }

// Stream is rank i's stream: make it wait on the input's event before
// AllReduce, and record the completion event on it after.
func (g *GPU) Stream(i int) *cudaext.Stream { return g.streams[i] }

// Plan is how AllReduce cuts a bucket: Blocks per rank, Piece elements per
// block and step, Rounds of Blocks pieces per chunk.
type Plan struct {
	Layout
	Blocks int
	Piece  int64
	Rounds int
	Push   bool // the push kernels (else pull)
}

// DefaultPushMinBytes is the smallest bucket the push kernels run for. On
// 2x H200 (NV18) push reached 362 GB/s bus bandwidth at 1 GiB against 322
// for pull, but pull was faster up to 16 MiB (8 MiB: 178 vs 163 GB/s).
const DefaultPushMinBytes = 32 << 20

func (g *GPU) pushMin() int64 {
	if g.opts.PushMinBytes > 0 {
		return g.opts.PushMinBytes
	}
	return DefaultPushMinBytes
}

// Plan returns the cut of n elements of dt.
func (g *GPU) Plan(n int64, dt DType) Plan {
	l := NewLayout(n, g.ranks)
	es := int64(dt.Size())
	maxB := g.opts.MaxBlocks
	if maxB <= 0 {
		maxB = max(1, g.sms/g.perDev)
	}
	maxB = min(maxB, maxFlagBlocks)
	pmax, pmin := int64(g.opts.PieceBytes), int64(g.opts.MinPieceBytes)
	if pmax <= 0 {
		pmax = 256 << 10
	}
	if pmin <= 0 {
		pmin = 16 << 10
	}
	pmin = min(pmin, pmax)
	align := func(e int64) int64 { return max(chunkAlign, (e+chunkAlign-1)/chunkAlign*chunkAlign) }
	// As few rounds as pieces of at most pmax allow, the pieces of equal
	// size (a last round of one small piece would cost two flag waits for
	// nothing), and no piece smaller than pmin (small buckets use fewer blocks).
	rounds := max(1, (l.Chunk*es+int64(maxB)*pmax-1)/(int64(maxB)*pmax))
	piece := align((l.Chunk + int64(maxB)*rounds - 1) / (int64(maxB) * rounds))
	piece = max(piece, align(pmin/es))
	pieces := (l.Chunk + piece - 1) / piece
	blocks := int(min(int64(maxB), pieces))
	rounds = (pieces + int64(blocks) - 1) / int64(blocks)
	push := g.push && n*es >= g.pushMin()
	return Plan{Layout: l, Blocks: blocks, Piece: piece, Rounds: int(rounds), Push: push}
}

// AllReduce enqueues the all-reduce of bufs (bufs[i]: n elements of dt in
// rank i's context, 16-byte aligned) on the ranks' streams and returns. Every
// rank's buffer holds the same result once its stream reaches that point; a
// buffer may be reused then (the kernel ends after the next rank has read it).
// Calls must not overlap from several goroutines on one GPU (it serialises).
func (g *GPU) AllReduce(bufs []cudaext.DevicePtr, n int64, dt DType, op Op) error {
	if len(bufs) != g.ranks {
		return fmt.Errorf("ring: %d buffers for %d ranks", len(bufs), g.ranks)
	}
	if dt < Float32 || dt > Float16 {
		return fmt.Errorf("ring: bad dtype %d", dt)
	}
	for i, b := range bufs {
		if b%16 != 0 {
			return fmt.Errorf("ring: rank %d buffer %#x is not 16-byte aligned", i, b)
		}
	}
	if g.ranks == 1 || n == 0 {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	p := g.Plan(n, dt)
	if uint64(p.Rounds)*uint64(2*(g.ranks-1))+2 >= 1<<32 {
		return fmt.Errorf("ring: %d elements is too many", n)
	}
	size := n * int64(dt.Size())
	for i := range bufs {
		// Growing a staging buffer or mirror: earlier operations, on any
		// rank, may still use the old one.
		if p.Push && g.stageN[i] < size && g.stage[i] != 0 || g.needMir[i] && g.mirror[i] != nil && int64(len(g.mirror[i])) < size {
			if err := g.Sync(); err != nil {
				return err
			}
			break
		}
	}
	for i := range bufs {
		if p.Push && g.stageN[i] < size {
			err := g.ctxs[i].Do(func() error {
				if g.stage[i] != 0 {
					cudaext.MemFree(g.stage[i])
					g.stage[i], g.stageN[i] = 0, 0
				}
				p, err := cudaext.MemAlloc(size)
				if err != nil {
					return err
				}
				g.stage[i], g.stageN[i] = p, size
				return nil
			})
			if err != nil {
				return err
			}
		}
	}
	for i := range bufs {
		if g.needMir[i] && int64(len(g.mirror[i])) < size {
			err := g.ctxs[i].Do(func() error {
				hostFree(g.mirror[i])
				g.mirror[i] = nil
				b, _, err := hostAlloc(int(size))
				g.mirror[i] = b
				return err
			})
			if err != nil {
				return err
			}
		}
	}
	base := g.op << 32
	g.op++
	avg := int32(0)
	if op == Avg {
		avg = 1
	}
	nr := g.ranks
	for i := 0; i < nr; i++ {
		prev, next := (i-1+nr)%nr, (i+1)%nr
		src := bufs[prev]
		if g.mirror[prev] != nil && g.links[i].Via == "host" {
			src = cudaext.DevicePtr(uintptr(unsafe.Pointer(&g.mirror[prev][0])))
		}
		var mir cudaext.DevicePtr
		if g.needMir[i] {
			mir = cudaext.DevicePtr(uintptr(unsafe.Pointer(&g.mirror[i][0])))
		}
		err := g.ctxs[i].Do(func() error {
			if p.Push {
				return g.pfns[i][dt].Launch(cudaext.Dim3{X: uint32(p.Blocks)}, cudaext.Dim3{X: threads}, 0, g.streams[i],
					bufs[i], bufs[next], g.stage[i], g.stage[next], g.flags[i], g.flags[prev], g.flags[next],
					n, p.Chunk, p.Piece, int32(i), int32(nr), base, avg, int32(p.Rounds))
			}
			return g.fns[i][dt].Launch(cudaext.Dim3{X: uint32(p.Blocks)}, cudaext.Dim3{X: threads}, 0, g.streams[i],
				bufs[i], src, mir, g.flags[i], g.flags[prev], g.flags[next],
				n, p.Chunk, p.Piece, int32(i), int32(nr), base, avg, int32(p.Rounds))
		})
		if err != nil {
			return fmt.Errorf("ring: rank %d: %w", i, err)
		}
	}
	return nil
}

// Sync waits for every rank's stream.
func (g *GPU) Sync() error {
	for i, s := range g.streams {
		if err := g.ctxs[i].Do(s.Synchronize); err != nil {
			return fmt.Errorf("ring: rank %d: %w", i, err)
		}
	}
	return nil
}

// Close frees the ring's streams, modules and flag memory (after a Sync).
func (g *GPU) Close() error {
	for i := range g.ctxs {
		g.ctxs[i].Do(func() error {
			if g.streams[i] != nil {
				g.streams[i].Synchronize()
				g.streams[i].Destroy()
			}
			if g.flagMem[i] != nil {
				hostFree(g.flagMem[i])
			} else if g.flags[i] != 0 {
				cudaext.MemFree(g.flags[i])
			}
			hostFree(g.mirror[i])
			if g.stage[i] != 0 {
				cudaext.MemFree(g.stage[i])
			}
			if g.mods[i] != nil {
				g.mods[i].Unload()
			}
			return nil
		})
	}
	return nil
}

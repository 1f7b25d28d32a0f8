package ring

import (
	"fmt"
	"sync"

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

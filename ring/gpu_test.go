package ring

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"

	"github.com/gnnloader/gnnloader/cudaext"
	"github.com/gnnloader/gnnloader/cudaext/cudatest"
)

// gpuCase runs ops all-reduces of fresh random data through g (ranks on
// ctxs), back to back without waiting in between, and checks each against
// ReduceCPU bit for bit, across ranks, and against the float64 reference.
func gpuCase(t *testing.T, g *GPU, ctxs []*cudaext.Context, n int64, dt DType, op Op, ops int, seed int64) {
	t.Helper()
	ranks := len(ctxs)
	size := n * int64(dt.Size())
	bufs := make([]cudaext.DevicePtr, ranks)
	for i := range bufs {
		err := ctxs[i].Do(func() error {
			p, err := cudaext.MemAlloc(max(size, 16))
			bufs[i] = p
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for i := range bufs {
			ctxs[i].Do(func() error { return cudaext.MemFree(bufs[i]) })
		}
	}()
	r := rand.New(rand.NewSource(seed))
	in := randBufs(r, ranks, n, dt)
	for i := range bufs {
		if err := ctxs[i].Do(func() error { return cudaext.CopyFromHost(bufs[i], in[i], g.Stream(i)) }); err != nil {
			t.Fatal(err)
		}
	}
	want := cloneBufs(in)
	for k := 0; k < ops; k++ {
		if k > 0 {
			// Repeated reductions grow: keep them finite for the float16 case.
			if op == Sum && dt == Float16 {
				op = Avg
			}
		}
		if err := g.AllReduce(bufs, n, dt, op); err != nil {
			t.Fatal(err)
		}
		if err := ReduceCPU(want, n, dt, op); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Sync(); err != nil {
		t.Fatal(err)
	}
	got := make([][]byte, ranks)
	for i := range got {
		got[i] = make([]byte, size)
		if err := ctxs[i].Do(func() error { return cudaext.CopyToHost(got[i], bufs[i], g.Stream(i)) }); err != nil {
			t.Fatal(err)
		}
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			bad, first := 0, -1
			for e := 0; e < int(n); e++ {
				if dt.Load(got[i], e) != dt.Load(want[i], e) {
					if bad++; first < 0 {
						first = e
					}
				}
			}
			t.Fatalf("rank %d: %d of %d elements differ from the CPU ring, first %d: %g, want %g (layout %+v)",
				i, bad, n, first, dt.Load(got[i], first), dt.Load(want[i], first), g.Plan(n, dt))
		}
	}
	if ops == 1 {
		checkResult(t, in, got, n, dt, op)
	}
}

// placements are the world sizes tested on the devices at hand: one rank
// per GPU for every prefix of the GPUs, then 3, 5 and 8 ranks sharing GPUs.
func placements(ctxs []*cudaext.Context) [][]*cudaext.Context {
	var out [][]*cudaext.Context
	for k := 1; k <= len(ctxs); k++ {
		out = append(out, ctxs[:k])
	}
	for _, ranks := range []int{3, 4, 5, 8} {
		if ranks <= len(ctxs) {
			continue
		}
		p := make([]*cudaext.Context, ranks)
		for i := range p {
			p[i] = ctxs[i%len(ctxs)]
		}
		out = append(out, p)
	}
	return out
}

func TestGPUMatchesCPU(t *testing.T) {
	all := cudatest.Contexts(t)
	t.Logf("%d GPUs", len(all))
	sizes := []int64{1, 7, 8, 100, 1023, 4099, 65536*3 + 5, 1<<20 + 3, 3<<20 + 1}
	for _, ctxs := range placements(all) {
		for _, mode := range []string{"push", "pull", "host"} {
			host := mode == "host"
			if host && len(ctxs) > 4 {
				continue
			}
			// push: every size through the push kernels (by default only >= 32 MiB).
			g, err := NewGPU(ctxs, &GPUOptions{HostLinks: host, Pull: mode == "pull", PushMinBytes: 1})
			if err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("ranks=%d/%s", len(ctxs), mode)
			t.Run(name, func(t *testing.T) {
				t.Logf("push kernels: %v", g.Push())
				for _, l := range g.Links() {
					t.Log(l)
				}
				seed := int64(1)
				for _, n := range sizes {
					for _, dt := range dtypes {
						for _, op := range []Op{Sum, Avg} {
							if mode != "push" && n > 1<<20 && dt != Float32 {
								continue
							}
							seed++
							t.Run(fmt.Sprintf("%s/%s/n=%d", dt, op, n), func(t *testing.T) {
								gpuCase(t, g, ctxs, n, dt, op, 1, seed)
							})
						}
					}
				}
				// Back to back, no wait in between: reuse hazards between operations.
				t.Run("back-to-back", func(t *testing.T) {
					gpuCase(t, g, ctxs, 1<<20+3, Float32, Sum, 4, 99)
					gpuCase(t, g, ctxs, 1000, BFloat16, Avg, 5, 98)
				})
			})
			g.Close()
		}
	}
}

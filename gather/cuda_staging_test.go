package gather

// The CUDA backend's pinned staging: reused while earlier work may still
// read it, and CopyIn and CopyInWith.

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/gnnloader/gnnloader/cudaext"
	"github.com/gnnloader/gnnloader/cudaext/cudatest"
	"github.com/gnnloader/gnnloader/pinned"
)

// TestCUDAStagingReuse enqueues many gathers, sweeps and copies back to back
// with no wait between them, so the index staging is reused (and regrown)
// while earlier work may still read it; each destination must still hold
// exactly its own rows.
func TestCUDAStagingReuse(t *testing.T) {
	c := cudatest.Context(t)
	r := rand.New(rand.NewPCG(5, 6))
	const rows, rb = 300_000, 512
	st, err := pinned.Load(randomTable(t, dtypes[0], rb/4, rows, r), rb, rows, &pinned.Options{Context: c})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tab := TableOf(st)
	for _, opt := range []*CUDAOptions{nil, {MaxSMs: 2}} {
		g, err := NewCUDA(c, st, opt)
		if err != nil {
			t.Fatal(err)
		}
		const jobs = 12
		type job struct {
			nid   []int64
			order []int32
			label []byte
			want  []byte
			dst   cudaext.DevicePtr
		}
		js := make([]job, jobs)
		for i := range js {
			n := 1000 + i*15_000 // growing, so areas are regrown while in use
			if i%4 == 3 {
				n = 200
			}
			js[i].nid = randomBatch(r, n, rows, true)
			js[i].order = SortOrder(js[i].nid)
			js[i].label = bytes.Repeat([]byte{byte(i + 1)}, 4096+i)
			js[i].want = make([]byte, n*rb)
			if err := (&CPU{}).Gather(js[i].want, tab, js[i].nid, js[i].order); err != nil {
				t.Fatal(err)
			}
		}
		err = c.Do(func() error {
			for i := range js {
				p, err := cudaext.MemAlloc(int64(len(js[i].want) + len(js[i].label)))
				if err != nil {
					return err
				}
				defer cudaext.MemFree(p)
				js[i].dst = p
			}
			ctx := context.Background()
			for i, j := range js {
				if i%3 == 2 { // as part of a sweep with the previous job
					prev := js[i-1]
					parts := []SweepPart{{Dst: Dest{Device: prev.dst}, Nid: prev.nid, Order: prev.order}, {Dst: Dest{Device: j.dst}, Nid: j.nid, Order: j.order}}
					if _, err := g.Sweep(ctx, parts); err != nil {
						return err
					}
				} else if err := g.Gather(ctx, Dest{Device: j.dst}, j.nid, j.order); err != nil {
					return err
				}
				if err := g.CopyIn(Copy{Dst: j.dst + cudaext.DevicePtr(len(j.want)), Src: j.label}); err != nil {
					return err
				}
			}
			for i, j := range js {
				got := make([]byte, len(j.want)+len(j.label))
				if err := cudaext.CopyToHost(got, j.dst, g.Stream()); err != nil {
					return err
				}
				if !bytes.Equal(got[:len(j.want)], j.want) {
					t.Errorf("options %+v: job %d (%d rows): rows differ from the CPU gather", opt, i, len(j.nid))
				}
				if !bytes.Equal(got[len(j.want):], j.label) {
					t.Errorf("options %+v: job %d: copied bytes differ", opt, i)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCUDACopyIn(t *testing.T) {
	c, g := smallBackend(t)
	a := []byte("labels: 0123456789")
	b := bytes.Repeat([]byte{7, 8, 9}, 1000)
	err := c.Do(func() error {
		p, err := cudaext.MemAlloc(8192)
		if err != nil {
			return err
		}
		defer cudaext.MemFree(p)
		if err := g.CopyIn(Copy{Dst: p, Src: a}, Copy{}, Copy{Dst: p + 100, Src: b}); err != nil {
			return err
		}
		got := make([]byte, 100+len(b))
		if err := cudaext.CopyToHost(got, p, g.Stream()); err != nil {
			return err
		}
		if !bytes.Equal(got[:len(a)], a) || !bytes.Equal(got[100:], b) {
			t.Error("CopyIn: wrong bytes")
		}
		// CopyInWith: written in place; a fill error enqueues nothing.
		if err := g.CopyInWith([]Fill{{Dst: p + 4000, Bytes: 5}}, func(h [][]byte) error { copy(h[0], "hello"); return nil }); err != nil {
			return err
		}
		errFill := errors.New("fill failed")
		if err := g.CopyInWith([]Fill{{Dst: p + 4000, Bytes: 5}}, func(h [][]byte) error { copy(h[0], "XXXXX"); return errFill }); !errors.Is(err, errFill) {
			t.Errorf("CopyInWith returned %v, want the fill's error", err)
		}
		if err := g.CopyInWith([]Fill{{Bytes: 5}}, func([][]byte) error { return nil }); err == nil {
			t.Error("CopyInWith without a destination accepted")
		}
		h := make([]byte, 5)
		if err := cudaext.CopyToHost(h, p+4000, g.Stream()); err != nil {
			return err
		}
		if string(h) != "hello" {
			t.Errorf("CopyInWith: device holds %q, want hello", h)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

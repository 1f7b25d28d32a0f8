package ipc

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
)

// ringGoldens are the gradient-exchange messages in testdata/ring/<name>.bin
// (a folder of their own: testdata/golden is the batch protocol's, which the
// Python twin of package ipc checks file by file). python/tests/test_allreduce.py
// holds the same values; change both together.
func ringGoldens() map[string]Msg {
	mh, ready, done := handle(0x20), handle(0x40), handle(0x60)
	return map[string]Msg{
		"register_grad":     &RegisterGrad{Job: "sage", Rank: 1, WorldSize: 2, Device: "cuda:1", Bytes: 100 << 20},
		"register_grad_cpu": &RegisterGrad{Job: "cora", Rank: 0, WorldSize: 3, Device: "cpu", Bytes: 4096},
		"grad_registered_shm": &GradRegistered{Memory: MemoryShm, Bytes: 4096,
			Links: []string{"cpu"}},
		"grad_registered_cuda": &GradRegistered{Memory: MemoryCUDA, Bytes: 100 << 20, CUDADevice: 1,
			MemHandle: mh[:], Ready: ready[:], Done: done[:],
			Links: []string{"rank 1 (GPU 1) -> rank 0 (GPU 0): peer", "rank 0 (GPU 0) -> rank 1 (GPU 1): peer"}},
		"all_reduce":      &AllReduce{Seq: 7, Count: 1000003, DType: "bfloat16", Op: "avg"},
		"all_reduce_done": &AllReduceDone{Seq: 7},
	}
}

func TestRingGolden(t *testing.T) {
	dir := filepath.Join("testdata", "ring")
	g := ringGoldens()
	if *update {
		os.MkdirAll(dir, 0o755)
		for name, m := range g {
			if err := os.WriteFile(filepath.Join(dir, name+".bin"), mustMarshal(t, m), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.bin"))
	if len(files) != len(g) {
		t.Fatalf("%d files in %s, %d goldens (go test ./ipc -run TestRingGolden -update)", len(files), dir, len(g))
	}
	names := make([]string, 0, len(g))
	for n := range g {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		want, err := os.ReadFile(filepath.Join(dir, name+".bin"))
		if err != nil {
			t.Fatal(err)
		}
		if b := mustMarshal(t, g[name]); !bytes.Equal(b, want) {
			t.Errorf("%s: Marshal differs from the golden frame", name)
		}
		m, err := Unmarshal(want, DefaultLimits)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(m, g[name]) {
			t.Errorf("%s: decoded %+v, want %+v", name, m, g[name])
		}
		if m.Type().String() == "" || m.Type().String()[0] == 'T' {
			t.Errorf("%s: type name %q", name, m.Type())
		}
	}
}

func TestRingBadFrames(t *testing.T) {
	short := &GradRegistered{Memory: MemoryCUDA, MemHandle: []byte{1, 2, 3}}
	if _, err := Marshal(short); err == nil {
		t.Fatal("Marshal accepted a 3-byte handle")
	}
	for name, f := range map[string][]byte{
		"handle_3_bytes": frame(TypeGradRegistered, append(append(str16("cuda"), make([]byte, 12)...), 3, 0, 1, 2, 3, 0, 0, 0, 0, 0, 0)),
		"truncated":      frame(TypeAllReduce, []byte{1, 2, 3}),
		"register_short": frame(TypeRegisterGrad, str16("job")),
	} {
		_, err := Unmarshal(f, DefaultLimits)
		var pe *ProtocolError
		if !errors.As(err, &pe) || pe.Code != CodeBadMessage && pe.Code != CodeLimit {
			t.Errorf("%s: %v, want a bad_message error", name, err)
		}
	}
}

func TestRingValidate(t *testing.T) {
	ok := RegisterGrad{Job: "j", Rank: 0, WorldSize: 2, Device: "cuda:0", Bytes: 8}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []RegisterGrad{
		{Rank: 2, WorldSize: 2, Device: "cpu", Bytes: 8},
		{WorldSize: 0, Device: "cpu", Bytes: 8},
		{WorldSize: 1, Device: "gpu", Bytes: 8},
		{WorldSize: 1, Device: "cpu"},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if err := (&AllReduce{DType: "float32", Op: "sum"}).Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []AllReduce{{DType: "int8", Op: "sum"}, {DType: "float16", Op: "max"}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestGradState(t *testing.T) {
	var s GradState
	steps := []struct {
		dir Dir
		m   Msg
		ok  bool
	}{
		{FromClient, &AllReduce{}, false},
		{FromClient, &RegisterGrad{}, true},
		{FromClient, &AllReduce{}, false},
		{FromDaemon, &GradRegistered{}, true},
		{FromClient, &AllReduce{Seq: 1}, false},
		{FromClient, &AllReduce{Seq: 0}, true},
		{FromClient, &AllReduce{Seq: 1}, false},
		{FromDaemon, &AllReduceDone{Seq: 0}, true},
		{FromClient, &AllReduce{Seq: 1}, true},
		{FromDaemon, &AllReduceDone{Seq: 2}, false},
		{FromDaemon, &AllReduceDone{Seq: 1}, true},
		{FromClient, &Goodbye{}, true},
		{FromClient, &AllReduce{Seq: 2}, false},
	}
	for i, st := range steps {
		err := s.Next(st.dir, st.m)
		if (err == nil) != st.ok {
			t.Fatalf("step %d (%s %s): %v", i, st.dir, st.m.Type(), err)
		}
	}
}

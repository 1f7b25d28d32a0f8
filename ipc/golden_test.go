package ipc

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden, testdata/bad and the FuzzUnmarshal seed corpus")

func align(n uint64) uint64 { return (n + RegionAlign - 1) / RegionAlign * RegionAlign }

// sampleRegions is the slot layout used by the Opened goldens: 1000 nodes,
// 5000 edges, 100 float32 features. python/tests/test_protocol.py repeats it.
func sampleRegions() ([]Region, uint64) {
	const nodes, edges, dim = 1000, 5000, 100
	var off uint64
	var rs []Region
	add := func(name, dtype string, elem uint64, axis uint8, shape ...uint64) {
		n := elem
		for _, s := range shape {
			n *= s
		}
		rs = append(rs, Region{Name: name, Offset: off, Bytes: n, DType: dtype, Shape: shape, CountAxis: axis})
		off = align(off + n)
	}
	add("x", "float32", 4, 0, nodes, dim)
	add("y", "int64", 8, 0, nodes)
	add("n_id", "int64", 8, 0, nodes)
	add("edge_index", "int64", 8, 1, 2, edges)
	return rs, off
}

func handle(seed byte) (h [HandleSize]byte) {
	for i := range h {
		h[i] = seed + byte(i)
	}
	return h
}

// goldens are the messages in testdata/golden/<name>.bin. The Python tests
// hold the same values; change both together.
func goldens() map[string]Msg {
	regions, slotBytes := sampleRegions()
	mh := handle(0)
	return map[string]Msg{
		"hello": &Hello{Version: 3, PID: 4242, Name: "train.py rank 0"},
		"welcome": &Welcome{Version: 3, DaemonVersion: "loaderd 0.1.0", Dataset: Dataset{
			Name: "ogbn-products", NumNodes: 2449029, NumEdges: 123718280, FeatureDim: 100,
			FeatureDType: "float32", NumClasses: 47,
			Splits: []Split{{"train", 196615}, {"val", 39323}, {"test", 2213091}},
		}},
		"welcome_empty": &Welcome{Version: 3},
		"welcome_hetero": &Welcome{Version: 3, DaemonVersion: "loaderd 0.3.0", Dataset: Dataset{
			Name: "mag-synthetic", NumNodes: 193_975, NumEdges: 2_111_101,
			NodeTypes: []NodeTypeInfo{
				{Name: "paper", NumNodes: 73_639, FeatureDim: 128, FeatureDType: "float32", NumClasses: 349,
					Splits: []Split{{"train", 62_957}, {"val", 6_488}, {"test", 4_194}}},
				{Name: "author", NumNodes: 113_465, FeatureDim: 128, FeatureDType: "float32"},
				{Name: "topic", NumNodes: 5_997},
			},
			EdgeTypes: []EdgeTypeInfo{{"author", "writes", "paper", 714_566}, {"paper", "cites", "paper", 541_627},
				{"paper", "has_topic", "topic", 750_508}},
			NodeTime: true,
		}},
		"open": &Open{Job: "sage", Split: "train", BatchSize: 1024, Fanouts: []int32{15, 10, 5},
			Shuffle: true, Seed: 0x0123456789abcdef, Rank: 1, WorldSize: 4, Device: "cuda:1"},
		"open_hetero": &Open{Job: "rgcn", Split: "train", BatchSize: 256, Fanouts: []int32{10, 5},
			Seed: 11, WorldSize: 1, Device: "cpu", InputType: "paper", EdgeFanouts: []int32{10, -1, 0, 5, 3, 0},
			Temporal: "last", TimeAttr: "node_time"},
		"open_resume": &Open{Job: "jöb-ü", Split: "val", BatchSize: 512, Fanouts: []int32{-1, 10},
			Seed: 7, Rank: 0, WorldSize: 1, DropLast: true, Device: "cpu", FeatureDType: "float16",
			Slots: 3, StartEpoch: 2, StartBatch: 17},
		"opened_shm": &Opened{NumBatches: 48, Slots: 2, SlotBytes: slotBytes, Memory: MemoryShm,
			Regions: regions, Scalars: []string{"batch_size"}, Lists: []string{"num_sampled_nodes", "num_sampled_edges"}},
		"opened_cuda": &Opened{NumBatches: 48, Slots: 2, SlotBytes: slotBytes, Memory: MemoryCUDA,
			Regions: regions, Scalars: []string{"batch_size"}, Lists: []string{"num_sampled_nodes", "num_sampled_edges"}, CUDADevice: 1,
			MemHandle: mh[:], Events: []EventIPC{
				{Ready: handle(0x10), Released: handle(0x80)},
				{Ready: handle(0x11), Released: handle(0x81)},
			}, ReadyWords: 2 * slotBytes},
		"start_epoch": &StartEpoch{Epoch: 3},
		"batch_ready": &BatchReady{Slot: 1, Epoch: 3, Index: 7, Counts: []uint32{900, 900, 900, 4000},
			Scalars: []int64{4}, Lists: [][]uint32{{4, 50, 300, 546}, {60, 940, 3000}}, ReadyValue: 5},
		"batch_ready_bare": &BatchReady{Slot: 0, Epoch: 1 << 31, Index: 9, Scalars: []int64{-1, 1 << 40}, Lists: [][]uint32{nil, {7}}},
		"release":          &Release{Slot: 1, Epoch: 3, Index: 7},
		"release_deferred": &Release{Slot: 2, Epoch: 3, Index: 8, Deferred: true},
		"epoch_end":        &EpochEnd{Epoch: 3, NumBatches: 48},
		"error":            &Error{Code: CodeOutOfOrder, Message: "Release from the client in phase open"},
		"goodbye":          &Goodbye{Reason: "done"},
		"goodbye_empty":    &Goodbye{},
		"seeds":            &Seeds{Count: 140},
		"seeds_times":      &Seeds{Count: 3, Times: true},
	}
}

func mustMarshal(t testing.TB, m Msg) []byte {
	t.Helper()
	b, err := Marshal(m)
	if err != nil {
		t.Fatalf("Marshal(%T): %v", m, err)
	}
	return b
}

// frame builds a frame from a type and raw payload, with a correct length.
func frame(typ Type, payload []byte) []byte {
	b := []byte{0, 0, 0, 0, byte(typ), byte(typ >> 8), 0, 0}
	b = append(b, payload...)
	n := len(b) - 4
	b[0], b[1], b[2], b[3] = byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
	return b
}

// setLen rewrites a frame's length field to match its size.
func setLen(b []byte) []byte {
	b = append([]byte(nil), b...)
	n := len(b) - 4
	b[0], b[1], b[2], b[3] = byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
	return b
}

func str16(s string) []byte { return append([]byte{byte(len(s)), byte(len(s) >> 8)}, s...) }

// badFrames are frames every decoder must reject under DefaultLimits, with
// the code it must report. They are written to testdata/bad/<name>.<code>.bin
// for the Python tests.
func badFrames(t testing.TB) map[string]struct {
	frame []byte
	code  Code
} {
	g := goldens()
	hello := mustMarshal(t, g["hello"])
	open := &Open{Job: "j", Split: "train", BatchSize: 8, Fanouts: []int32{2}, WorldSize: 1, Device: "cpu"}
	openB := mustMarshal(t, open)
	shuffleAt := HeaderSize + 3 + 7 + 4 + 2 + 4 // job, split, batch_size, count, one fanout
	badBool := append([]byte(nil), openB...)
	badBool[shuffleAt] = 2
	badFanout := append([]byte(nil), openB...)
	badFanout[shuffleAt-4] = 0xfe // fanout -2
	for i := shuffleAt - 3; i < shuffleAt; i++ {
		badFanout[i] = 0xff
	}
	edgeFanout := *open
	edgeFanout.InputType, edgeFanout.EdgeFanouts = "paper", []int32{-1}
	badEdgeFanout := mustMarshal(t, &edgeFanout)
	badEdgeFanout[len(badEdgeFanout)-8] = 0xfe // the last edge fanout (before two empty strings) -1 -> -2
	bigBatch := *open
	bigBatch.BatchSize = uint32(DefaultLimits.MaxBatchSize) + 1
	manyFanouts := *open
	manyFanouts.Fanouts = make([]int32, DefaultLimits.MaxFanouts+1)
	opened := *g["opened_shm"].(*Opened)
	misaligned := opened
	misaligned.Regions = append([]Region(nil), opened.Regions...)
	misaligned.Regions[1].Offset += 8
	outside := opened
	outside.Regions = append([]Region(nil), opened.Regions...)
	outside.Regions[3].Bytes += RegionAlign
	badAxis := opened
	badAxis.Regions = append([]Region(nil), opened.Regions...)
	badAxis.Regions[2].CountAxis = 1 // n_id is one-dimensional
	cuda := *g["opened_cuda"].(*Opened)
	wordsInSlots, wordsMisaligned, wordsOnShm := cuda, cuda, opened
	wordsInSlots.ReadyWords = 2*cuda.SlotBytes - 4 // the last slot's last word
	wordsMisaligned.ReadyWords = 2*cuda.SlotBytes + 2
	wordsOnShm.ReadyWords = 2 * opened.SlotBytes
	wordsWrap := cuda
	wordsWrap.ReadyWords = math.MaxUint64 - 3 // its second word past 2^64
	manySplits := &Welcome{Dataset: Dataset{Splits: make([]Split, DefaultLimits.MaxList+1)}}
	oversized := []byte{0, 0, 0x10, 0, byte(TypeHello), 0, 0, 0} // 1 MiB + 4 bytes
	huge := []byte{0xff, 0xff, 0xff, 0xff, byte(TypeOpened), 0, 0, 0}

	type bad = struct {
		frame []byte
		code  Code
	}
	return map[string]bad{
		"short_header":           {hello[:5], CodeBadFrame},
		"truncated":              {hello[:len(hello)-1], CodeBadFrame},
		"truncated_payload":      {setLen(hello[:len(hello)-1]), CodeBadMessage},
		"length_too_small":       {[]byte{3, 0, 0, 0, 1, 0, 0}, CodeBadFrame},
		"oversized_length":       {oversized, CodeLimit},
		"huge_length":            {huge, CodeLimit},
		"nonzero_flags":          {append(append([]byte(nil), hello[:6]...), append([]byte{1, 0}, hello[8:]...)...), CodeBadFrame},
		"unknown_type":           {frame(99, nil), CodeBadMessage},
		"type_zero":              {frame(0, nil), CodeBadMessage},
		"bad_magic":              {frame(TypeHello, append([]byte("GNNX\x01\x00\x00\x00\x00\x00"), str16("")...)), CodeUnsupportedVersion},
		"bad_bool":               {badBool, CodeBadMessage},
		"bad_fanout":             {badFanout, CodeBadMessage},
		"bad_edge_fanout":        {badEdgeFanout, CodeBadMessage},
		"trailing_bytes":         {setLen(append(append([]byte(nil), hello...), 0)), CodeBadMessage},
		"string_over_limit":      {mustMarshal(t, &Goodbye{Reason: strings.Repeat("a", DefaultLimits.MaxString+1)}), CodeLimit},
		"string_past_end":        {frame(TypeGoodbye, []byte{10, 0, 'a'}), CodeBadMessage},
		"invalid_utf8":           {frame(TypeGoodbye, []byte{2, 0, 0xc3, 0x28}), CodeBadMessage},
		"list_over_limit":        {mustMarshal(t, manySplits), CodeLimit},
		"fanouts_over_limit":     {mustMarshal(t, &manyFanouts), CodeLimit},
		"list_past_end":          {frame(TypeBatchReady, append(make([]byte, 12), 10, 0)), CodeBadMessage},
		"batch_size_limit":       {mustMarshal(t, &bigBatch), CodeLimit},
		"region_misaligned":      {marshalUnchecked(&misaligned), CodeBadMessage},
		"region_outside_slot":    {marshalUnchecked(&outside), CodeBadMessage},
		"region_count_axis":      {marshalUnchecked(&badAxis), CodeBadMessage},
		"empty_payload":          {frame(TypeRelease, nil), CodeBadMessage},
		"ready_words_in_slots":   {marshalUnchecked(&wordsInSlots), CodeBadMessage},
		"ready_words_misaligned": {marshalUnchecked(&wordsMisaligned), CodeBadMessage},
		"ready_words_on_shm":     {marshalUnchecked(&wordsOnShm), CodeBadMessage},
		"ready_words_wrap":       {marshalUnchecked(&wordsWrap), CodeBadMessage},
	}
}

// marshalUnchecked encodes m without Opened's cross-field check, to build
// frames the decoder must refuse.
func marshalUnchecked(m *Opened) []byte {
	e := encoder{b: make([]byte, HeaderSize)}
	encodeFields(&e, lookup(TypeOpened).fields, reflect.ValueOf(m).Elem())
	b := e.b
	b[4] = byte(TypeOpened)
	return setLen(b)
}

func TestGolden(t *testing.T) {
	dir := filepath.Join("testdata", "golden")
	if *update {
		writeTestdata(t)
	}
	g := goldens()
	names := make([]string, 0, len(g))
	for name := range g {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			want := g[name]
			b, err := os.ReadFile(filepath.Join(dir, name+".bin"))
			if err != nil {
				t.Fatalf("%v (run go test ./ipc -run TestGolden -update)", err)
			}
			got, err := Unmarshal(b, Limits{})
			if err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("decoded\n%#v\nwant\n%#v", got, want)
			}
			re := mustMarshal(t, got)
			if !bytes.Equal(re, b) {
				t.Fatalf("re-encoded frame differs from the golden file\n got %x\nwant %x", re, b)
			}
		})
	}
	// Every golden file belongs to a message above.
	files, _ := filepath.Glob(filepath.Join(dir, "*.bin"))
	if len(files) != len(g) {
		t.Errorf("%d golden files, %d golden messages", len(files), len(g))
	}
}

func TestBadFrames(t *testing.T) {
	for name, c := range badFrames(t) {
		t.Run(name, func(t *testing.T) {
			m, err := Unmarshal(c.frame, Limits{})
			var pe *ProtocolError
			if !errors.As(err, &pe) {
				t.Fatalf("Unmarshal = %#v, %v; want a *ProtocolError", m, err)
			}
			if pe.Code != c.code {
				t.Fatalf("code %s (%v), want %s", pe.Code, err, c.code)
			}
			b, err := os.ReadFile(filepath.Join("testdata", "bad", fmt.Sprintf("%s.%s.bin", name, c.code)))
			if err != nil || !bytes.Equal(b, c.frame) {
				t.Fatalf("testdata/bad/%s is missing or stale (run with -update): %v", name, err)
			}
		})
	}
}

func writeTestdata(t *testing.T) {
	t.Helper()
	for _, sub := range []string{"golden", "bad", "fuzz/FuzzUnmarshal"} {
		dir := filepath.Join("testdata", sub)
		os.RemoveAll(dir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	seed := func(name string, b []byte) {
		s := fmt.Sprintf("go test fuzz v1\n[]byte(%+q)\n", b)
		if err := os.WriteFile(filepath.Join("testdata", "fuzz", "FuzzUnmarshal", name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, m := range goldens() {
		b := mustMarshal(t, m)
		if err := os.WriteFile(filepath.Join("testdata", "golden", name+".bin"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		seed("golden_"+name, b)
	}
	for name, c := range badFrames(t) {
		if err := os.WriteFile(filepath.Join("testdata", "bad", fmt.Sprintf("%s.%s.bin", name, c.code)), c.frame, 0o644); err != nil {
			t.Fatal(err)
		}
		seed("bad_"+name, c.frame)
	}
}

func TestMarshalRejects(t *testing.T) {
	for name, m := range map[string]Msg{
		"invalid utf8":    &Goodbye{Reason: "\xff"},
		"long string":     &Goodbye{Reason: strings.Repeat("a", 1<<16)},
		"fanout -2":       &Open{Fanouts: []int32{-2}},
		"short handle":    &Opened{Slots: 1, Memory: MemoryCUDA, MemHandle: []byte{1}, Events: make([]EventIPC, 1)},
		"no events":       &Opened{Slots: 1, Memory: MemoryCUDA, MemHandle: make([]byte, HandleSize)},
		"unknown memory":  &Opened{Slots: 1, Memory: "disk"},
		"zero slots":      &Opened{Memory: MemoryShm},
		"too many dims":   &Opened{Slots: 1, Memory: MemoryShm, Regions: []Region{{Shape: make([]uint64, MaxDims+1)}}},
		"no shape":        &Opened{Slots: 1, Memory: MemoryShm, Regions: []Region{{Name: "y"}}},
		"shm with handle": &Opened{Slots: 1, Memory: MemoryShm, MemHandle: make([]byte, HandleSize)},
	} {
		if _, err := Marshal(m); err == nil {
			t.Errorf("%s: Marshal succeeded", name)
		}
	}
}

func TestLimitsConfigurable(t *testing.T) {
	b := mustMarshal(t, goldens()["welcome"])
	if _, err := Unmarshal(b, Limits{MaxFrame: len(b)}); err != nil {
		t.Fatalf("frame at the limit: %v", err)
	}
	if _, err := Unmarshal(b, Limits{MaxFrame: len(b) - 1}); CodeOf(err) != CodeLimit {
		t.Fatalf("frame over the limit: %v", err)
	}
	if _, err := Unmarshal(b, Limits{MaxList: 2}); CodeOf(err) != CodeLimit {
		t.Fatalf("3 splits, MaxList 2: %v", err)
	}
	if _, err := Unmarshal(b, Limits{MaxString: 12}); CodeOf(err) != CodeLimit {
		t.Fatalf("13-byte name, MaxString 12: %v", err)
	}
	o := mustMarshal(t, goldens()["open"])
	if _, err := Unmarshal(o, Limits{MaxFanouts: 2}); CodeOf(err) != CodeLimit {
		t.Fatalf("3 fanouts, MaxFanouts 2: %v", err)
	}
	if _, err := Unmarshal(o, Limits{MaxBatchSize: 1023}); CodeOf(err) != CodeLimit {
		t.Fatalf("batch 1024, MaxBatchSize 1023: %v", err)
	}
}

func TestOpenValidate(t *testing.T) {
	ok := *goldens()["open"].(*Open)
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]func(o *Open){
		"batch 0":                         func(o *Open) { o.BatchSize = 0 },
		"no fanouts":                      func(o *Open) { o.Fanouts = nil },
		"world 0":                         func(o *Open) { o.WorldSize = 0 },
		"rank>=world":                     func(o *Open) { o.Rank = 4 },
		"no split":                        func(o *Open) { o.Split = "" },
		"gpu":                             func(o *Open) { o.Device = "gpu" },
		"cuda:":                           func(o *Open) { o.Device = "cuda:" },
		"cuda:01":                         func(o *Open) { o.Device = "cuda:01" },
		"cuda:-1":                         func(o *Open) { o.Device = "cuda:-1" },
		"edge fanouts without input type": func(o *Open) { o.EdgeFanouts = []int32{1, 2, 3} },
		"edge fanouts not hop-major":      func(o *Open) { o.InputType, o.EdgeFanouts = "paper", []int32{1, 2} },
		"temporal unknown":                func(o *Open) { o.Temporal, o.TimeAttr = "latest", "node_time" },
		"temporal without time attr":      func(o *Open) { o.Temporal = "uniform" },
		"temporal bad time attr":          func(o *Open) { o.Temporal, o.TimeAttr = "last", "time" },
		"time attr without temporal":      func(o *Open) { o.TimeAttr = "edge_time" },
	} {
		o := ok
		f(&o)
		if err := o.Validate(); CodeOf(err) != CodeBadRequest {
			t.Errorf("%s: Validate = %v, want bad_request", name, err)
		}
	}
	het := *goldens()["open_hetero"].(*Open)
	if err := het.Validate(); err != nil {
		t.Fatalf("open_hetero: %v", err)
	}
	if n, err := ParseDevice("cuda:12"); n != 12 || err != nil {
		t.Errorf("ParseDevice(cuda:12) = %d, %v", n, err)
	}
}

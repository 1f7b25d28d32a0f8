package datasets

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zip"
)

// impNPY encodes an array as numpy's np.save does (format 1.0, header
// padded with spaces and a newline to a multiple of 64 bytes).
func impNPY(descr string, shape []int64, data []byte) []byte {
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = fmt.Sprint(d)
	}
	sh := "(" + strings.Join(dims, ", ") + ")"
	if len(shape) == 1 {
		sh = "(" + dims[0] + ",)"
	}
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, sh)
	pad := 64 - (10+len(dict)+1)%64
	if pad == 64 {
		pad = 0
	}
	hdr := dict + strings.Repeat(" ", pad) + "\n"
	var b bytes.Buffer
	b.Write(npyMagic)
	b.Write([]byte{1, 0})
	binary.Write(&b, binary.LittleEndian, uint16(len(hdr)))
	b.WriteString(hdr)
	b.Write(data)
	return b.Bytes()
}

// impMember is one member of an npz built by a test.
type impMember struct {
	name string // without .npy
	npy  []byte
}

// impWriteNPZ writes the members as an npz: stored (np.savez) or deflated
// (np.savez_compressed).
func impWriteNPZ(t testing.TB, path string, deflate bool, members ...impMember) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for _, m := range members {
		method := zip.Store
		if deflate {
			method = zip.Deflate
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: m.name + ".npy", Method: method})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(m.npy); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func impI64(v ...int64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return b
}

func impI32(v ...int64) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(int32(x)))
	}
	return b
}

func impF32(v ...float64) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(x)))
	}
	return b
}

func impF64(v ...float64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(x))
	}
	return b
}

func TestNPYHeader(t *testing.T) {
	for _, tc := range []struct {
		dict    string
		descr   string
		shape   []int64
		fortran bool
		err     string
	}{
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (2708, 1433), }", "<f4", []int64{2708, 1433}, false, ""},
		{"{'descr': '|i1', 'fortran_order': False, 'shape': (7,), }", "|i1", []int64{7}, false, ""},
		{"{'descr': '<U22', 'fortran_order': False, 'shape': (7,), }", "<U22", []int64{7}, false, ""},
		{"{'descr': '<i8', 'fortran_order': True, 'shape': (2, 3), }", "<i8", []int64{2, 3}, true, ""},
		{"{'descr': '<f8', 'fortran_order': False, 'shape': (), }", "<f8", nil, false, ""},
		{"{'descr': '>i8', 'fortran_order': False, 'shape': (3,), }", "", nil, false, "big-endian"},
		{"{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }", "", nil, false, "unsupported dtype"},
		{"{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (3,), }", "", nil, false, "structured"},
		{"{'descr': '<i4', 'shape': (3,), }", "", nil, false, "fortran_order"},
		{"{'descr': '<i4', 'fortran_order': False, 'shape': (-3,), }", "", nil, false, "bad dimension"},
	} {
		var b bytes.Buffer
		b.Write(npyMagic)
		b.Write([]byte{1, 0})
		binary.Write(&b, binary.LittleEndian, uint16(len(tc.dict)))
		b.WriteString(tc.dict)
		a, hlen, err := parseNPYHeader(&b, "x.npy")
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err %v, want %q", tc.dict, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.dict, err)
			continue
		}
		if a.descr != tc.descr || fmt.Sprint(a.shape) != fmt.Sprint(tc.shape) || a.fortran != tc.fortran || hlen != int64(10+len(tc.dict)) {
			t.Errorf("%s: got %+v hlen %d", tc.dict, a, hlen)
		}
	}
	if _, _, err := parseNPYHeader(strings.NewReader("PK\x03\x04hello"), "x.npy"); err == nil || !strings.Contains(err.Error(), "bad magic") {
		t.Errorf("bad magic: %v", err)
	}
	if _, _, err := parseNPYHeader(strings.NewReader("\x93NUMPY\x01\x00\x40\x00{'descr'"), "x.npy"); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("truncated header: %v", err)
	}
}

// TestNPYWriterMatchesNumpy checks the test helper against numpy's own
// bytes in the committed fixture, so that npz files the tests build are
// what np.savez writes.
func TestNPYWriterMatchesNumpy(t *testing.T) {
	z, err := openNPZ("testdata/ogb_npz/raw/data.npz")
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	m := z.members["num_nodes_list"]
	rc, err := m.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var got bytes.Buffer
	got.ReadFrom(rc)
	if want := impNPY("<i8", []int64{1}, impI64(50)); !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("numpy wrote\n%q\nhelper writes\n%q", got.Bytes(), want)
	}
}

func TestHalfToFloat32(t *testing.T) {
	for h, want := range map[uint16]float32{0x3c00: 1, 0xc000: -2, 0x7bff: 65504, 0x0001: 5.960464477539063e-08, 0x0000: 0, 0x3555: 0.333251953125} {
		if got := npyHalfToFloat32(h); got != want {
			t.Errorf("%#x: %g, want %g", h, got, want)
		}
	}
	if !math.IsInf(float64(npyHalfToFloat32(0x7c00)), 1) || !math.IsNaN(float64(npyHalfToFloat32(0x7e00))) {
		t.Error("inf/nan")
	}
}

// FuzzNPYHeader feeds arbitrary headers and data to the .npy reader: it may
// refuse them but must not panic or promise more bytes than it checks.
func FuzzNPYHeader(f *testing.F) {
	f.Add(impNPY("<f4", []int64{2, 3}, impF32(1, 2, 3, 4, 5, 6)))
	f.Add(impNPY("<U3", []int64{1}, []byte("a\x00\x00\x00b\x00\x00\x00c\x00\x00\x00")))
	f.Add(impNPY("|i1", []int64{3}, []byte{1, 2, 3}))
	f.Add([]byte("\x93NUMPY\x02\x00\x10\x00\x00\x00{'descr': '<i8'}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, hlen, err := parseNPYHeader(bytes.NewReader(b), "fuzz.npy")
		if err != nil {
			return
		}
		if a.itemSize <= 0 || a.count < 0 || a.nbytes() < 0 {
			t.Fatalf("bad sizes %+v", a)
		}
		a.dataLen = int64(len(b)) - hlen
		a.src = storedSource{io.NewSectionReader(bytes.NewReader(b), hlen, a.dataLen)}
		if a.nbytes() > 1<<20 {
			return
		}
		switch {
		case a.kind == 'U':
			a.strings()
		case a.isInt():
			a.ints()
		default:
			a.floats()
		}
	})
}

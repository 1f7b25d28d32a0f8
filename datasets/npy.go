package datasets

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file reads NumPy .npy arrays (format versions 1, 2 and 3): a 6-byte
// magic "\x93NUMPY", two version bytes, a little-endian header length
// (uint16 for v1, uint32 for v2/v3), a Python dict literal with descr,
// fortran_order and shape, then the raw elements.

var npyMagic = []byte("\x93NUMPY")

// maxNPYHeader bounds the header dict; numpy's own limit is far below this.
const maxNPYHeader = 1 << 20

// npyArray describes one .npy array and where its elements live.
type npyArray struct {
	where    string // "file: member name.npy", for messages
	descr    string // as written, e.g. "<f4", "|i1", "<U22"
	kind     byte   // 'f', 'i', 'u', 'b' or 'U'
	itemSize int    // bytes per element
	fortran  bool
	shape    []int64
	count    int64 // elements: the product of shape
	dataLen  int64 // bytes available after the header
	src      npySource
}

// npySource opens the element bytes of an array from element byte offset off.
type npySource interface {
	// reader returns a reader over the data bytes [off, off+n).
	reader(off, n int64) (io.Reader, error)
	// readerAt returns a ReaderAt over the data bytes, or nil when the
	// bytes can only be streamed (a deflated member).
	readerAt() io.ReaderAt
}

// nbytes is the size of the element data that the header promises.
func (a *npyArray) nbytes() int64 { return a.count * int64(a.itemSize) }

func (a *npyArray) shapeString() string {
	parts := make([]string, len(a.shape))
	for i, d := range a.shape {
		parts[i] = strconv.FormatInt(d, 10)
	}
	if len(parts) == 1 {
		return "(" + parts[0] + ",)"
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// errorf formats an error naming the array.
func (a *npyArray) errorf(format string, args ...any) error {
	return fmt.Errorf("%s: %s", a.where, fmt.Sprintf(format, args...))
}

// parseNPYHeader reads the magic, version and header dict from r. It returns
// the array description (without src and dataLen) and the total header size
// in bytes, which is where the elements start.
func parseNPYHeader(r io.Reader, where string) (*npyArray, int64, error) {
	var pre [10]byte
	if _, err := io.ReadFull(r, pre[:8]); err != nil {
		return nil, 0, fmt.Errorf("%s: truncated .npy header: %w", where, unexpectedEOF(err))
	}
	if string(pre[:6]) != string(npyMagic) {
		return nil, 0, fmt.Errorf("%s: not a .npy array (bad magic %q at byte 0)", where, pre[:6])
	}
	major := pre[6]
	var hlen, prefix int64
	switch major {
	case 1:
		if _, err := io.ReadFull(r, pre[8:10]); err != nil {
			return nil, 0, fmt.Errorf("%s: truncated .npy header: %w", where, unexpectedEOF(err))
		}
		hlen, prefix = int64(binary.LittleEndian.Uint16(pre[8:10])), 10
	case 2, 3:
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, 0, fmt.Errorf("%s: truncated .npy header: %w", where, unexpectedEOF(err))
		}
		hlen, prefix = int64(binary.LittleEndian.Uint32(b[:])), 12
	default:
		return nil, 0, fmt.Errorf("%s: unsupported .npy format version %d.%d", where, major, pre[7])
	}
	if hlen > maxNPYHeader {
		return nil, 0, fmt.Errorf("%s: .npy header length %d too large", where, hlen)
	}
	hdr := make([]byte, hlen)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, 0, fmt.Errorf("%s: truncated .npy header (want %d header bytes): %w", where, hlen, unexpectedEOF(err))
	}
	if major < 3 && !utf8.Valid(hdr) { // v1/v2 are latin-1; anything we accept is ASCII
		return nil, 0, fmt.Errorf("%s: .npy header is not text", where)
	}
	a, err := parseNPYDict(string(hdr))
	if err != nil {
		return nil, 0, fmt.Errorf("%s: bad .npy header %q: %w", where, strings.TrimSpace(string(hdr)), err)
	}
	a.where = where
	return a, prefix + hlen, nil
}

// unexpectedEOF turns a bare io.EOF into io.ErrUnexpectedEOF: inside a header or an
// array an end of input is always a truncation.
func unexpectedEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// parseNPYDict parses the header dict literal, e.g.
// {'descr': '<f4', 'fortran_order': False, 'shape': (2708, 1433), }
func parseNPYDict(s string) (*npyArray, error) {
	descr, err := dictValue(s, "descr")
	if err != nil {
		return nil, err
	}
	if len(descr) < 2 || descr[0] != '\'' && descr[0] != '"' || descr[len(descr)-1] != descr[0] {
		return nil, fmt.Errorf("descr %s is not a simple type string (structured dtypes are not supported)", descr)
	}
	descr = descr[1 : len(descr)-1]
	fo, err := dictValue(s, "fortran_order")
	if err != nil {
		return nil, err
	}
	shapeText, err := dictValue(s, "shape")
	if err != nil {
		return nil, err
	}
	a := &npyArray{descr: descr}
	switch fo {
	case "False":
	case "True":
		a.fortran = true
	default:
		return nil, fmt.Errorf("fortran_order %q is not True or False", fo)
	}
	if err := a.parseDescr(); err != nil {
		return nil, err
	}
	if len(shapeText) < 2 || shapeText[0] != '(' || shapeText[len(shapeText)-1] != ')' {
		return nil, fmt.Errorf("shape %q is not a tuple", shapeText)
	}
	a.count = 1
	for _, f := range strings.Split(shapeText[1:len(shapeText)-1], ",") {
		f = strings.TrimSuffix(strings.TrimSpace(f), "L")
		if f == "" {
			continue
		}
		d, err := strconv.ParseInt(f, 10, 64)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("shape %s has a bad dimension %q", shapeText, f)
		}
		if d != 0 && a.count > math.MaxInt64/d/int64(a.itemSize) {
			return nil, fmt.Errorf("shape %s is too large", shapeText)
		}
		a.shape = append(a.shape, d)
		a.count *= d
	}
	return a, nil
}

// dictValue returns the text of the value of key in a flat Python dict
// literal: a quoted string, a tuple, or a bare word.
func dictValue(s, key string) (string, error) {
	i := strings.Index(s, "'"+key+"'")
	if i < 0 {
		i = strings.Index(s, `"`+key+`"`)
	}
	if i < 0 {
		return "", fmt.Errorf("no %q key", key)
	}
	rest := strings.TrimLeft(s[i+len(key)+2:], " ")
	if !strings.HasPrefix(rest, ":") {
		return "", fmt.Errorf("no ':' after %q", key)
	}
	rest = strings.TrimLeft(rest[1:], " ")
	if rest == "" {
		return "", fmt.Errorf("no value for %q", key)
	}
	var end int
	switch rest[0] {
	case '\'', '"':
		end = strings.IndexByte(rest[1:], rest[0]) + 2
	case '(':
		end = strings.IndexByte(rest, ')') + 1
	default:
		end = strings.IndexAny(rest, ",}")
	}
	if end <= 0 {
		return "", fmt.Errorf("unterminated value for %q", key)
	}
	return strings.TrimSpace(rest[:end]), nil
}

// parseDescr fills kind and itemSize from descr. Only little-endian (or
// byte-sized) numbers and little-endian unicode strings are accepted.
func (a *npyArray) parseDescr() error {
	d := a.descr
	if len(d) < 3 {
		return fmt.Errorf("unsupported dtype %q", d)
	}
	order, kind := d[0], d[1]
	n, err := strconv.Atoi(d[2:])
	if err != nil || n <= 0 {
		return fmt.Errorf("unsupported dtype %q", d)
	}
	switch kind {
	case 'f':
		if n != 2 && n != 4 && n != 8 {
			return fmt.Errorf("unsupported float dtype %q", d)
		}
	case 'i', 'u':
		if n != 1 && n != 2 && n != 4 && n != 8 {
			return fmt.Errorf("unsupported integer dtype %q", d)
		}
	case 'b':
		if n != 1 {
			return fmt.Errorf("unsupported bool dtype %q", d)
		}
	case 'U':
		if n > 1<<20 {
			return fmt.Errorf("unsupported string dtype %q", d)
		}
		n *= 4 // UTF-32 code units
	default:
		return fmt.Errorf("unsupported dtype %q", d)
	}
	switch order {
	case '<', '|':
	case '=':
		// native: every platform this runs on is little-endian
	case '>':
		if n > 1 {
			return fmt.Errorf("big-endian dtype %q is not supported", d)
		}
	default:
		return fmt.Errorf("unsupported dtype %q", d)
	}
	a.kind, a.itemSize = kind, n
	return nil
}

// isInt reports whether the array holds integers (or bools).
func (a *npyArray) isInt() bool { return a.kind == 'i' || a.kind == 'u' || a.kind == 'b' }

// checkData fails when the data bytes are fewer than the header promises.
func (a *npyArray) checkData() error {
	if a.dataLen < a.nbytes() {
		return a.errorf("truncated: shape %s of %s needs %d data bytes, only %d present", a.shapeString(), a.descr, a.nbytes(), a.dataLen)
	}
	return nil
}

// wantShape checks the rank and, for dims >= 0, the size of each dimension.
func (a *npyArray) wantShape(dims ...int64) error {
	ok := len(a.shape) == len(dims)
	for i := 0; ok && i < len(dims); i++ {
		ok = dims[i] < 0 || dims[i] == a.shape[i]
	}
	if !ok {
		want := make([]string, len(dims))
		for i, d := range dims {
			if d < 0 {
				want[i] = "*"
			} else {
				want[i] = strconv.FormatInt(d, 10)
			}
		}
		w := "(" + strings.Join(want, ", ") + ")"
		if len(want) == 1 {
			w = "(" + want[0] + ",)"
		}
		return a.errorf("wrong shape %s, want %s", a.shapeString(), w)
	}
	if a.fortran && len(dims) > 1 {
		return a.errorf("fortran_order arrays are not supported")
	}
	return nil
}

// readBytes reads n data bytes from element byte offset off.
func (a *npyArray) readBytes(off int64, dst []byte) error {
	if ra := a.src.readerAt(); ra != nil {
		if _, err := ra.ReadAt(dst, off); err != nil {
			return a.errorf("reading %d bytes at data offset %d: %v", len(dst), off, unexpectedEOF(err))
		}
		return nil
	}
	r, err := a.src.reader(off, int64(len(dst)))
	if err != nil {
		return err
	}
	if _, err := io.ReadFull(r, dst); err != nil {
		return a.errorf("reading %d bytes at data offset %d: %v", len(dst), off, unexpectedEOF(err))
	}
	return nil
}

// all reads every element byte.
func (a *npyArray) all() ([]byte, error) {
	if err := a.checkData(); err != nil {
		return nil, err
	}
	b := make([]byte, a.nbytes())
	if err := a.readBytes(0, b); err != nil {
		return nil, err
	}
	return b, nil
}

// decodeInts converts raw integer elements of a to int64. It fails on a
// non-integer dtype and on uint64 values above MaxInt64.
func (a *npyArray) decodeInts(b []byte, dst []int64) error {
	le := binary.LittleEndian
	n := len(b) / a.itemSize
	switch {
	case a.kind == 'i' && a.itemSize == 1:
		for i := 0; i < n; i++ {
			dst[i] = int64(int8(b[i]))
		}
	case (a.kind == 'u' || a.kind == 'b') && a.itemSize == 1:
		for i := 0; i < n; i++ {
			dst[i] = int64(b[i])
		}
	case a.kind == 'i' && a.itemSize == 2:
		for i := 0; i < n; i++ {
			dst[i] = int64(int16(le.Uint16(b[2*i:])))
		}
	case a.kind == 'u' && a.itemSize == 2:
		for i := 0; i < n; i++ {
			dst[i] = int64(le.Uint16(b[2*i:]))
		}
	case a.kind == 'i' && a.itemSize == 4:
		for i := 0; i < n; i++ {
			dst[i] = int64(int32(le.Uint32(b[4*i:])))
		}
	case a.kind == 'u' && a.itemSize == 4:
		for i := 0; i < n; i++ {
			dst[i] = int64(le.Uint32(b[4*i:]))
		}
	case a.kind == 'i' && a.itemSize == 8:
		for i := 0; i < n; i++ {
			dst[i] = int64(le.Uint64(b[8*i:]))
		}
	case a.kind == 'u' && a.itemSize == 8:
		for i := 0; i < n; i++ {
			v := le.Uint64(b[8*i:])
			if v > math.MaxInt64 {
				return a.errorf("element %d = %d does not fit int64", i, v)
			}
			dst[i] = int64(v)
		}
	default:
		return a.errorf("wrong dtype %s, want an integer type", a.descr)
	}
	return nil
}

// ints reads the whole integer array as int64.
func (a *npyArray) ints() ([]int64, error) {
	if !a.isInt() {
		return nil, a.errorf("wrong dtype %s, want an integer type", a.descr)
	}
	b, err := a.all()
	if err != nil {
		return nil, err
	}
	out := make([]int64, a.count)
	return out, a.decodeInts(b, out)
}

// decodeFloats converts raw float (or integer) elements of a to float64.
func (a *npyArray) decodeFloats(b []byte, dst []float64) error {
	le := binary.LittleEndian
	n := len(b) / a.itemSize
	switch {
	case a.kind == 'f' && a.itemSize == 8:
		for i := 0; i < n; i++ {
			dst[i] = math.Float64frombits(le.Uint64(b[8*i:]))
		}
	case a.kind == 'f' && a.itemSize == 4:
		for i := 0; i < n; i++ {
			dst[i] = float64(math.Float32frombits(le.Uint32(b[4*i:])))
		}
	case a.kind == 'f' && a.itemSize == 2:
		for i := 0; i < n; i++ {
			dst[i] = float64(npyHalfToFloat32(le.Uint16(b[2*i:])))
		}
	case a.isInt():
		tmp := make([]int64, n)
		if err := a.decodeInts(b, tmp); err != nil {
			return err
		}
		for i, v := range tmp {
			dst[i] = float64(v)
		}
	default:
		return a.errorf("wrong dtype %s, want a number type", a.descr)
	}
	return nil
}

// floats reads the whole numeric array as float64.
func (a *npyArray) floats() ([]float64, error) {
	if a.kind == 'U' {
		return nil, a.errorf("wrong dtype %s, want a number type", a.descr)
	}
	b, err := a.all()
	if err != nil {
		return nil, err
	}
	out := make([]float64, a.count)
	return out, a.decodeFloats(b, out)
}

// strings reads a fixed-width unicode ('<U') array, dropping the NUL padding.
func (a *npyArray) strings() ([]string, error) {
	if a.kind != 'U' {
		return nil, a.errorf("wrong dtype %s, want a unicode string type (<U)", a.descr)
	}
	b, err := a.all()
	if err != nil {
		return nil, err
	}
	out := make([]string, a.count)
	var sb strings.Builder
	for i := range out {
		sb.Reset()
		rec := b[int64(i)*int64(a.itemSize):][:a.itemSize]
		for j := 0; j < len(rec); j += 4 {
			r := rune(binary.LittleEndian.Uint32(rec[j:]))
			if r == 0 {
				break
			}
			if !utf8.ValidRune(r) {
				return nil, a.errorf("element %d holds invalid code point %#x", i, r)
			}
			sb.WriteRune(r)
		}
		out[i] = sb.String()
	}
	return out, nil
}

// npyHalfToFloat32 converts an IEEE 754 binary16 value to float32.
func npyHalfToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0 && man == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal
		e := uint32(127 - 15 + 1)
		for man&0x400 == 0 {
			man <<= 1
			e--
		}
		man &= 0x3ff
		return math.Float32frombits(sign | e<<23 | man<<13)
	case exp == 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | man<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}

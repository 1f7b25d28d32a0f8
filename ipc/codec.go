package ipc

import (
	"encoding/binary"
	"math"
	"reflect"
	"unicode/utf8"
)

// Wire constants.
const (
	Magic      = "GNNL" // first 4 payload bytes of Hello
	Version    = 5      // the protocol version this package speaks
	HeaderSize = 8      // u32 length | u16 type | u16 flags
	// MaxDims bounds Region.Shape.
	MaxDims = 8
	// HandleSize is the size of a CUDA IPC memory or event handle.
	HandleSize = 64
	// RegionAlign is the alignment of every Region.Offset within a slot.
	RegionAlign = 128
	// MaxFDs is the most file descriptors one frame may carry.
	MaxFDs = 4
	// MaxClientFrame bounds every frame a client sends (Hello, Open,
	// Seeds, StartEpoch, Release, RegisterGrad, AllReduce, Goodbye, Error):
	// the largest valid one, an Open with seven strings of MaxString bytes,
	// MaxFanouts fanouts and MaxList edge fanouts, is under 33 KiB. The daemon reads client
	// frames with this limit (or a lower Limits.MaxFrame).
	MaxClientFrame = 64 << 10
)

// Limits bound what a decoder accepts. A zero field means its default (see
// DefaultLimits). Limits are checked before anything is allocated.
type Limits struct {
	MaxFrame     int // bytes in a whole frame, header included (default 1 MiB)
	MaxFanouts   int // entries in Open.Fanouts (default 8, the sampler's most hops)
	MaxBatchSize int // Open.BatchSize (default 1<<20 seeds)
	MaxString    int // bytes in any string (default 4096)
	MaxList      int // entries in any other list: splits, regions, events, handle bytes (default 1024)
}

// DefaultLimits are the limits used for zero Limits fields.
var DefaultLimits = Limits{
	MaxFrame:     1 << 20,
	MaxFanouts:   8,
	MaxBatchSize: 1 << 20,
	MaxString:    4096,
	MaxList:      1024,
}

// WithDefaults returns l with every zero (or negative) field replaced by its default.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits
	if l.MaxFrame > 0 {
		d.MaxFrame = l.MaxFrame
	}
	if l.MaxFanouts > 0 {
		d.MaxFanouts = l.MaxFanouts
	}
	if l.MaxBatchSize > 0 {
		d.MaxBatchSize = l.MaxBatchSize
	}
	if l.MaxString > 0 {
		d.MaxString = l.MaxString
	}
	if l.MaxList > 0 {
		d.MaxList = l.MaxList
	}
	if d.MaxFrame < HeaderSize {
		d.MaxFrame = HeaderSize
	}
	return d
}

// Msg is one protocol message: *Hello, *Welcome, *Open, *Opened,
// *StartEpoch, *BatchReady, *Release, *EpochEnd, *Error, *Goodbye, *Seeds,
// or a gradient-exchange message (ring_msgs.go). The message table
// (table.go) lists them; Marshal refuses any other type.
type Msg interface {
	Type() Type
}

// Marshal encodes m as one complete frame (header and payload). It fails
// only when a value cannot be represented (a string or list longer than
// 65535, invalid UTF-8, a handle of the wrong size); it does not apply
// Limits, the receiver does.
func Marshal(m Msg) ([]byte, error) {
	return appendFrame(nil, m)
}

func appendFrame(b []byte, m Msg) ([]byte, error) {
	e := encoder{b: append(b, make([]byte, HeaderSize)...)}
	start := len(b)
	encodeMsg(&e, m)
	if e.err != nil {
		return nil, e.err
	}
	n := len(e.b) - start - 4
	if n > math.MaxUint32 {
		return nil, perr(CodeLimit, "frame of %d bytes", n)
	}
	binary.LittleEndian.PutUint32(e.b[start:], uint32(n))
	binary.LittleEndian.PutUint16(e.b[start+4:], uint16(m.Type()))
	binary.LittleEndian.PutUint16(e.b[start+6:], 0)
	return e.b, nil
}

// Unmarshal decodes one complete frame (header and payload, nothing more)
// under lim. Errors are *ProtocolError.
func Unmarshal(frame []byte, lim Limits) (Msg, error) {
	lim = lim.WithDefaults()
	if len(frame) < HeaderSize {
		return nil, perr(CodeBadFrame, "frame of %d bytes is shorter than the header", len(frame))
	}
	typ, err := parseHeader(frame[:HeaderSize], lim)
	if err != nil {
		return nil, err
	}
	if want := int(binary.LittleEndian.Uint32(frame)) + 4; want != len(frame) {
		return nil, perr(CodeBadFrame, "length field says %d bytes, frame has %d", want, len(frame))
	}
	return decodePayload(typ, frame[HeaderSize:], lim)
}

// parseHeader checks a frame header and returns its type. The length is
// checked against lim.MaxFrame here, before the payload is read or allocated.
func parseHeader(h []byte, lim Limits) (Type, error) {
	n := uint64(binary.LittleEndian.Uint32(h))
	if n < HeaderSize-4 {
		return 0, perr(CodeBadFrame, "length %d is shorter than type and flags", n)
	}
	if n+4 > uint64(lim.MaxFrame) {
		return 0, perr(CodeLimit, "frame of %d bytes exceeds the limit of %d", n+4, lim.MaxFrame)
	}
	if f := binary.LittleEndian.Uint16(h[6:]); f != 0 {
		return 0, perr(CodeBadFrame, "flags 0x%04x, must be 0", f)
	}
	return Type(binary.LittleEndian.Uint16(h[4:])), nil
}

func decodePayload(typ Type, payload []byte, lim Limits) (Msg, error) {
	e := lookup(typ)
	if e == nil {
		return nil, perr(CodeBadMessage, "unknown message type %d", uint16(typ))
	}
	d := decoder{b: payload, lim: &lim}
	m := decodeMsg(&d, e)
	if d.err == nil && d.off != len(d.b) {
		d.fail(CodeBadMessage, "%d trailing bytes", len(d.b)-d.off)
	}
	if d.err != nil {
		d.err.Msg = typ.String() + ": " + d.err.Msg
		return nil, d.err
	}
	return m, nil
}

// encodeMsg appends m's payload: the table entry's prefix, its fields and
// its cross-field check.
func encodeMsg(e *encoder, m Msg) {
	t := lookup(m.Type())
	if f, ok := m.(fastCodec); ok && t != nil {
		f.encodeFast(e)
		return
	}
	v := reflect.ValueOf(m)
	if t == nil || v.Type() != t.ptrType || v.IsNil() {
		e.fail(CodeInternal, "%T is not the message type %d of the table", m, uint16(m.Type()))
		return
	}
	e.b = append(e.b, t.prefix...)
	encodeFields(e, t.fields, v.Elem())
	if t.check && e.err == nil {
		if err := m.(checker).check(); err != nil {
			e.err = err
		}
	}
}

// decodeMsg decodes a payload of the type of t.
func decodeMsg(d *decoder, t *message) Msg {
	if t.fast != nil {
		m := t.fast()
		m.decodeFast(d)
		return m.(Msg)
	}
	v := reflect.New(t.goType)
	m := v.Interface().(Msg)
	if t.prefix != "" {
		if p := d.next(len(t.prefix)); p != nil && string(p) != t.prefix {
			d.fail(CodeUnsupportedVersion, "magic %q, want %q", p, t.prefix)
		}
	}
	decodeFields(d, t.fields, v.Elem())
	if t.check && d.err == nil {
		if err := m.(checker).check(); err != nil {
			d.err = err
		}
	}
	return m
}

// encoder appends little-endian fields; the first error sticks.
type encoder struct {
	b   []byte
	err *ProtocolError
}

func (e *encoder) fail(code Code, format string, args ...any) {
	if e.err == nil {
		e.err = perr(code, format, args...)
	}
}

func (e *encoder) u8(v uint8)   { e.b = append(e.b, v) }
func (e *encoder) u16(v uint16) { e.b = binary.LittleEndian.AppendUint16(e.b, v) }
func (e *encoder) u32(v uint32) { e.b = binary.LittleEndian.AppendUint32(e.b, v) }
func (e *encoder) u64(v uint64) { e.b = binary.LittleEndian.AppendUint64(e.b, v) }

func (e *encoder) bool(v bool) {
	if v {
		e.u8(1)
	} else {
		e.u8(0)
	}
}

// count writes a u16 list count.
func (e *encoder) count(what string, n int) {
	if n > math.MaxUint16 {
		e.fail(CodeLimit, "%s: %d entries, at most 65535", what, n)
		n = 0
	}
	e.u16(uint16(n))
}

func (e *encoder) str(what string, s string) {
	if !utf8.ValidString(s) {
		e.fail(CodeBadMessage, "%s: invalid UTF-8", what)
	}
	e.count(what, len(s))
	e.b = append(e.b, s...)
}

// decoder reads little-endian fields; the first error sticks and later reads
// return zero values.
type decoder struct {
	b   []byte
	off int
	lim *Limits
	err *ProtocolError
}

func (d *decoder) fail(code Code, format string, args ...any) {
	if d.err == nil {
		d.err = perr(code, format, args...)
	}
}

func (d *decoder) next(n int) []byte {
	if d.err != nil {
		return nil
	}
	if len(d.b)-d.off < n {
		d.fail(CodeBadMessage, "truncated payload: need %d bytes at offset %d, have %d", n, d.off, len(d.b)-d.off)
		return nil
	}
	p := d.b[d.off : d.off+n]
	d.off += n
	return p
}

func (d *decoder) u8() uint8 {
	if p := d.next(1); p != nil {
		return p[0]
	}
	return 0
}

func (d *decoder) u16() uint16 {
	if p := d.next(2); p != nil {
		return binary.LittleEndian.Uint16(p)
	}
	return 0
}

func (d *decoder) u32() uint32 {
	if p := d.next(4); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if p := d.next(8); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

func (d *decoder) i32() int32 { return int32(d.u32()) }

func (d *decoder) bool(what string) bool {
	v := d.u8()
	if v > 1 {
		d.fail(CodeBadMessage, "%s: bool byte %d, must be 0 or 1", what, v)
	}
	return v == 1
}

// count reads a u16 list count, checks it against max and checks that
// count*minElem bytes remain, so a list can be allocated safely.
func (d *decoder) count(what string, max, minElem int) int {
	n := int(d.u16())
	if d.err != nil {
		return 0
	}
	if n > max {
		d.fail(CodeLimit, "%s: %d entries exceed the limit of %d", what, n, max)
		return 0
	}
	if n*minElem > len(d.b)-d.off {
		d.fail(CodeBadMessage, "truncated payload: %s: %d entries need at least %d bytes, have %d", what, n, n*minElem, len(d.b)-d.off)
		return 0
	}
	return n
}

func (d *decoder) str(what string) string {
	n := d.count(what, d.lim.MaxString, 1)
	p := d.next(n)
	if d.err != nil {
		return ""
	}
	if !utf8.Valid(p) {
		d.fail(CodeBadMessage, "%s: invalid UTF-8", what)
		return ""
	}
	return string(p)
}

package datasets

// Rows of comma-separated numbers (OGB's node-feat and edge-feat csv
// files), typed as OGB's own reader types them.

import (
	"bytes"
	"fmt"
	"math"
	"slices"
)

// numbers are values as int64s while every one so far is an integer, else
// as little-endian float32 bytes (from the first that is not: the integers
// before it converted as pandas converts them, appendFloats).
type numbers struct {
	ints    []int64
	negZero []int // positions in ints of integers written "-0": -0.0 as floats
	floats  []byte
	float   bool
}

// toFloat turns the integers so far into float32s, with room for values
// values in all.
func (n *numbers) toFloat(values int64) {
	n.floats = appendFloats(make([]byte, 0, 4*max(values, int64(len(n.ints)))), n.ints, n.negZero)
	n.ints, n.negZero, n.float = nil, nil, true
}

// featBlock is a block of rows of comma-separated numbers.
type featBlock struct {
	numbers
	dim  int
	rows int64
	text int // the block's bytes, to size its values from its first row
}

// parse appends the value of field t (trimmed, not empty): an integer while
// the block has only integers, else a float32, converting the block's
// integers at its first value that is not one. It returns what is wrong
// with t, or "".
func (fb *featBlock) parse(t []byte) string {
	if !fb.float {
		if v, neg0, ok := parseFeatureInt(t); ok {
			if neg0 {
				fb.negZero = append(fb.negZero, len(fb.ints))
			}
			fb.ints = append(fb.ints, v)
			return ""
		}
		fb.toFloat(int64(fb.text / 8))
	}
	v, ok := parseFloat32(t)
	if !ok {
		return fieldText(t) + " is not a number"
	}
	fb.floats = append(fb.floats, 0, 0, 0, 0)
	putFloat32(fb.floats[len(fb.floats)-4:], v)
	return ""
}

// sized reserves room for the rest of the block once its first row is
// parsed: rows as long as that one, dim values each.
func (fb *featBlock) sized(lineBytes int) {
	want := (fb.text/(lineBytes+1) + 1) * fb.dim
	if fb.float {
		fb.floats = slices.Grow(fb.floats, max(0, 4*want-len(fb.floats)))
	} else {
		fb.ints = slices.Grow(fb.ints, max(0, want-len(fb.ints)))
	}
}

// parseFeatureInt parses an integer field as pandas would read it into
// int64 (any number of leading zeros, the whole int64 range); neg0 reports
// a zero written with a minus sign (-0.0 if the file turns out float).
func parseFeatureInt(b []byte) (v int64, neg0, ok bool) {
	neg := false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg, b = b[0] == '-', b[1:]
	}
	if len(b) == 0 {
		return 0, false, false
	}
	for len(b) > 1 && b[0] == '0' {
		b = b[1:]
	}
	if len(b) > 19 {
		return 0, false, false
	}
	var u uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false, false
		}
		u = u*10 + uint64(c-'0')
	}
	switch {
	case !neg && u <= math.MaxInt64:
		return int64(u), false, true
	case neg && u <= 1<<63:
		return int64(-u), u == 0, true
	}
	return 0, false, false
}

// csvNumbers gathers the blocks of a csv file of numbers as OGB's reader
// types them (read_csv_graph_raw: pandas, then int64 when the whole array
// is integer, else float32): int64 while every value is an integer, float32
// from the first that is not.
type csvNumbers struct {
	numbers
	dim  int
	rows int64
	hint int64 // values expected, if known (> 0): float32s reserve them
}

// add appends fb, a block of rows of width dim (checked by the caller).
func (c *csvNumbers) add(fb featBlock) {
	c.rows += fb.rows
	if fb.float && !c.float {
		c.toFloat(max(c.hint, int64(len(c.ints)+len(fb.floats)/4)))
	}
	switch {
	case fb.float:
		c.floats = append(c.floats, fb.floats...)
	case c.float:
		c.floats = appendFloats(c.floats, fb.ints, fb.negZero)
	default:
		for _, k := range fb.negZero {
			c.negZero = append(c.negZero, len(c.ints)+k)
		}
		c.ints = append(c.ints, fb.ints...)
	}
}

// result is the values as bytes and their dtype (Int64 or Float32).
func (c *csvNumbers) result() ([]byte, DType) {
	if c.float {
		return c.floats, Float32
	}
	return int64Bytes(c.ints), Int64
}

// asFloat32 is the values as float32 bytes whatever their type.
func (c *csvNumbers) asFloat32() []byte {
	if c.float {
		return c.floats
	}
	return appendFloats(nil, c.ints, c.negZero)
}

// appendFloats appends vs as little-endian float32s, as pandas converts
// int64s (to float64, then float32), those at the positions in negZero as
// -0.0.
func appendFloats(b []byte, vs []int64, negZero []int) []byte {
	at := len(b)
	for _, v := range vs {
		b = append(b, 0, 0, 0, 0)
		putFloat32(b[len(b)-4:], float32(float64(v)))
	}
	for _, k := range negZero {
		putFloat32(b[at+4*k:], float32(math.Copysign(0, -1)))
	}
	return b
}

// parseFeatures parses rows of comma-separated numbers: as int64s while
// every value of the block is an integer, else as little-endian float32
// bytes (csvNumbers); every row of the block must have the same width.
func parseFeatures(b []byte) (featBlock, int64, *parseError) {
	fb := featBlock{numbers: numbers{ints: make([]int64, 0, 64)}, text: len(b)}
	lines, pe := eachLine(b, func(line []byte, i int64, off int) *parseError {
		lineBytes := len(line)
		k := 0
		for len(line) > 0 || k == 0 {
			c := bytes.IndexByte(line, ',')
			field := line
			if c >= 0 {
				field, line = line[:c], line[c+1:]
			} else {
				line = nil
			}
			t := bytes.TrimSpace(field)
			if len(t) == 0 {
				return &parseError{i, off, fmt.Sprintf("value %d is empty", k+1)}
			}
			if err := fb.parse(t); err != "" {
				return &parseError{i, off, fmt.Sprintf("value %d: %s", k+1, err)}
			}
			k++
			if c >= 0 && len(line) == 0 {
				return &parseError{i, off, fmt.Sprintf("value %d is empty", k+1)}
			}
		}
		if i == 0 {
			fb.dim = k
			fb.sized(lineBytes)
		} else if k != fb.dim {
			return &parseError{i, off, fmt.Sprintf("row has %d values, earlier rows have %d", k, fb.dim)}
		}
		return nil
	})
	fb.rows = lines
	return fb, lines, pe
}

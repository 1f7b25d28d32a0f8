package datasets

// Rows of comma-separated numbers (OGB's node-feat and edge-feat csv
// files), typed as OGB's own reader types them.

import (
	"bytes"
	"fmt"
)

// featBlock is a block of rows of comma-separated numbers: as int64s while
// every value so far was an integer, else as little-endian float32 bytes.
type featBlock struct {
	ints []int64
	b    []byte
	dim  int
	rows int64
	hint int // the block's text bytes (float32s are sized from it, as a first guess)
}

func (fb *featBlock) isFloat() bool { return fb.ints == nil }

// parse appends the value of field t (trimmed, not empty): an integer while
// the block has only integers, else a float32, converting the block's
// integers at its first value that is not one. It returns what is wrong
// with t, or "".
func (fb *featBlock) parse(t []byte) string {
	if !fb.isFloat() {
		if v, ok := parseInt(t); ok {
			fb.ints = append(fb.ints, v)
			return ""
		}
		fb.b = appendFloats(make([]byte, 0, max(fb.hint/2, 4*len(fb.ints))), fb.ints)
		fb.ints = nil
	}
	v, ok := parseFloat32(t)
	if !ok {
		return fieldText(t) + " is not a number"
	}
	fb.b = append(fb.b, 0, 0, 0, 0)
	putFloat32(fb.b[len(fb.b)-4:], v)
	return ""
}

// csvNumbers gathers the blocks of a csv file of numbers as OGB's reader
// types them (read_csv_graph_raw: pandas, then int64 when the whole array
// is integer, else float32): int64 while every value is an integer, float32
// from the first that is not (the integers before it converted, rounding
// as parsing them as float32 would).
type csvNumbers struct {
	ints   []int64
	floats []byte
	float  bool
	dim    int
	rows   int64
	hint   int64 // values expected, if known (> 0): the first block reserves them
}

// add appends fb, a block of rows of width dim (checked by the caller).
func (c *csvNumbers) add(fb featBlock) {
	if c.rows == 0 && c.hint > 0 {
		if fb.isFloat() {
			c.floats = make([]byte, 0, 4*c.hint)
		} else {
			c.ints = make([]int64, 0, c.hint)
		}
	}
	c.rows += fb.rows
	switch {
	case c.float && fb.isFloat():
		c.floats = append(c.floats, fb.b...)
	case c.float:
		c.floats = appendFloats(c.floats, fb.ints)
	case fb.isFloat() && fb.rows > 0:
		c.floats = append(appendFloats(make([]byte, 0, 4*len(c.ints)+len(fb.b)), c.ints), fb.b...)
		c.ints, c.float = nil, true
	default:
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
	return appendFloats(nil, c.ints)
}

// appendFloats appends vs as little-endian float32s.
func appendFloats(b []byte, vs []int64) []byte {
	for _, v := range vs {
		b = append(b, 0, 0, 0, 0)
		putFloat32(b[len(b)-4:], float32(v))
	}
	return b
}

// parseFeatures parses rows of comma-separated numbers: as int64s while
// every value of the block is an integer, else as little-endian float32
// bytes (csvNumbers); every row of the block must have the same width.
func parseFeatures(b []byte) (featBlock, int64, *parseError) {
	fb := featBlock{ints: make([]int64, 0, 64), hint: len(b)}
	lines, pe := eachLine(b, func(line []byte, i int64, off int) *parseError {
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
		} else if k != fb.dim {
			return &parseError{i, off, fmt.Sprintf("row has %d values, earlier rows have %d", k, fb.dim)}
		}
		return nil
	})
	fb.rows = lines
	return fb, lines, pe
}

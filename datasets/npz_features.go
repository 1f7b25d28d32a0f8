package datasets

import (
	"encoding/binary"
	"fmt"
	"math"
)

// npzFeatures fills d's features from attr_* CSR parts or attr_matrix.
// Floating-point values become float32; integer ones keep an integer type
// (npzIntDType).
func npzFeatures(z *npzFile, d *Data) error {
	n := d.Graph.NumNodes
	if !z.has("attr_shape") && z.has("attr_matrix") {
		a, err := z.array("attr_matrix")
		if err != nil {
			return err
		}
		if err := a.wantShape(n, -1); err != nil {
			return err
		}
		d.FeatureDim = int(a.shape[1])
		b, dt, ok, err := npzIntBytes(a)
		if ok {
			d.Features, d.FeatureDType = b, dt
			return err
		}
		d.Features, err = npzFloat32Bytes(a)
		return err
	}
	shape, err := npzInts(z, "attr_shape")
	if err != nil {
		return err
	}
	if len(shape) != 2 || shape[0] != n || shape[1] <= 0 || shape[1] > math.MaxInt32 {
		return fmt.Errorf("%s: member attr_shape.npy: want (%d, F), got %v", z.path, n, shape)
	}
	f := shape[1]
	if n*f > math.MaxInt64/8 {
		return fmt.Errorf("%s: feature matrix %d x %d too large", z.path, n, f)
	}
	indptr, indices, err := npzCSR(z, "attr", n, f)
	if err != nil {
		return err
	}
	da, err := z.array("attr_data")
	if err != nil {
		return err
	}
	if err := da.wantShape(int64(len(indices))); err != nil {
		return err
	}
	d.FeatureDim = int(f)
	if dt, ok := npzIntDType(da); ok {
		vals, err := da.ints()
		if err != nil {
			return err
		}
		d.FeatureDType = dt
		d.Features = make([]byte, n*f*int64(dt.Size()))
		sums := make([]int64, f)
		for v := int64(0); v < n; v++ {
			clear(sums)
			for k := indptr[v]; k < indptr[v+1]; k++ {
				sums[indices[k]] += vals[k] // duplicates sum, as scipy's todense does
			}
			for j, x := range sums {
				if dt == Bool {
					x = min(x, 1) // True + True is True
				}
				if !putInt(d.Features, dt, v*f+int64(j), x) {
					return da.errorf("row %d column %d: value %d does not fit %s", v, j, x, dt)
				}
			}
		}
		return nil
	}
	vals, err := da.floats()
	if err != nil {
		return err
	}
	d.Features = make([]byte, n*f*4)
	for v := int64(0); v < n; v++ {
		row := d.Features[v*f*4 : (v+1)*f*4]
		for k := indptr[v]; k < indptr[v+1]; k++ {
			// duplicates sum, as scipy's todense does
			p := row[indices[k]*4:]
			putFloat32(p, getFloat32(p)+float32(vals[k]))
		}
	}
	return nil
}

// npzIntDType is the element type integer features of a's dtype keep:
// bool, uint8, int32 and int64 as they are, int8, int16 and uint16 as
// int32, uint32 and uint64 as int64. It reports false for a non-integer
// dtype.
func npzIntDType(a *npyArray) (DType, bool) {
	switch {
	case a.kind == 'b':
		return Bool, true
	case a.kind == 'u' && a.itemSize == 1:
		return UInt8, true
	case a.kind == 'i' && a.itemSize <= 4, a.kind == 'u' && a.itemSize == 2:
		return Int32, true
	case a.isInt():
		return Int64, true
	}
	return "", false
}

// npzIntBytes reads integer array a as the element type npzIntDType gives
// it; ok is false, and nothing read, when a is not an integer array.
func npzIntBytes(a *npyArray) (b []byte, dt DType, ok bool, err error) {
	if dt, ok = npzIntDType(a); !ok {
		return nil, "", false, nil
	}
	vals, err := a.ints()
	if err != nil {
		return nil, dt, true, err
	}
	b = make([]byte, len(vals)*dt.Size())
	for i, v := range vals {
		if !putInt(b, dt, int64(i), v) {
			return nil, dt, true, a.errorf("value %d does not fit %s", v, dt)
		}
	}
	return b, dt, true, nil
}

// npzFloat32Bytes reads array a as float32 values.
func npzFloat32Bytes(a *npyArray) ([]byte, error) {
	vals, err := a.floats()
	if err != nil {
		return nil, err
	}
	b := make([]byte, 4*len(vals))
	for i, v := range vals {
		putFloat32(b[4*i:], float32(v))
	}
	return b, nil
}

// putInt stores v as element i of b, of integer type dt, reporting
// whether it fits (bool takes 0 and 1).
func putInt(b []byte, dt DType, i, v int64) bool {
	switch dt {
	case Int64:
		binary.LittleEndian.PutUint64(b[8*i:], uint64(v))
	case Int32:
		if v != int64(int32(v)) {
			return false
		}
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
	case UInt8, Bool:
		if v < 0 || v > 255 || dt == Bool && v > 1 {
			return false
		}
		b[i] = byte(v)
	default:
		return false
	}
	return true
}

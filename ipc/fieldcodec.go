package ipc

import "reflect"

// The generic codec: it walks a message's compiled fields (schema.go) over
// the struct with reflect. Slices of the common entry types are reached
// through a typed pointer, so their entries are encoded and decoded without
// reflect.

func encodeFields(e *encoder, fs []field, v reflect.Value) {
	for i := range fs {
		encodeField(e, &fs[i], v.Field(fs[i].index))
	}
}

func encodeField(e *encoder, f *field, v reflect.Value) {
	switch f.wire {
	case wU8:
		e.u8(uint8(v.Uint()))
	case wU16:
		e.u16(uint16(v.Uint()))
	case wU32:
		e.u32(uint32(v.Uint()))
	case wU64:
		e.u64(v.Uint())
	case wI32, wI64:
		x := v.Int()
		if f.hasMin && x < f.min {
			e.fail(CodeBadMessage, "%s %d, must be >= %d", f.what, x, f.min)
		}
		if f.wire == wI32 {
			e.u32(uint32(int32(x)))
		} else {
			e.u64(uint64(x))
		}
	case wBool:
		e.bool(v.Bool())
	case wStr:
		e.str(f.what, v.String())
	case wBytes:
		b := v.Bytes()
		if !f.lenOK(len(b)) {
			e.fail(CodeBadMessage, "%s of %d bytes, want one of %v", f.what, len(b), f.lens)
		}
		e.listCount(f, len(b))
		e.b = append(e.b, b...)
	case wFixed:
		if v.CanAddr() {
			e.b = append(e.b, v.Slice(0, f.n).Bytes()...)
			return
		}
		for i := 0; i < f.n; i++ {
			e.u8(uint8(v.Index(i).Uint()))
		}
	case wStruct:
		encodeFields(e, f.sub, v)
	case wList:
		e.listCount(f, v.Len())
		if encodeFastList(e, f, v) {
			return
		}
		for i := 0; i < v.Len(); i++ {
			encodeField(e, f.elem, v.Index(i))
		}
	}
}

// listCount writes a list's u16 count; a constant max binds the encoder too.
func (e *encoder) listCount(f *field, n int) {
	if f.max.limit == "" && n > f.max.n {
		e.fail(CodeLimit, "%s: %d entries, at most %d", f.what, n, f.max.n)
	}
	e.count(f.what, n)
}

// encodeFastList encodes the entries of the slice types messages use most,
// or reports false.
func encodeFastList(e *encoder, f *field, v reflect.Value) bool {
	el := f.elem
	if el.hasMin || !v.CanAddr() {
		return false
	}
	switch p := v.Addr().Interface().(type) {
	case *[]uint32:
		for _, x := range *p {
			e.u32(x)
		}
	case *[]uint64:
		for _, x := range *p {
			e.u64(x)
		}
	case *[]int64:
		for _, x := range *p {
			e.u64(uint64(x))
		}
	case *[]string:
		for _, s := range *p {
			e.str(el.what, s)
		}
	case *[][]uint32:
		for _, l := range *p {
			e.listCount(el, len(l))
			for _, x := range l {
				e.u32(x)
			}
		}
	default:
		return false
	}
	return true
}

func decodeFields(d *decoder, fs []field, v reflect.Value) {
	for i := range fs {
		if d.err != nil {
			return
		}
		decodeField(d, &fs[i], v.Field(fs[i].index))
	}
}

func decodeField(d *decoder, f *field, v reflect.Value) {
	switch f.wire {
	case wU8:
		v.SetUint(uint64(d.u8()))
	case wU16:
		v.SetUint(uint64(d.u16()))
	case wU32:
		v.SetUint(uint64(d.u32()))
	case wU64:
		v.SetUint(d.u64())
	case wI32, wI64:
		var x int64
		if f.wire == wI32 {
			x = int64(d.i32())
		} else {
			x = int64(d.u64())
		}
		if d.err == nil && f.hasMin && x < f.min {
			d.fail(CodeBadMessage, "%s %d, must be >= %d", f.what, x, f.min)
		}
		v.SetInt(x)
	case wBool:
		v.SetBool(d.bool(f.what))
	case wStr:
		v.SetString(d.str(f.what))
	case wBytes:
		n := d.count(f.what, f.max.value(d.lim), 1)
		if n > 0 && d.err == nil && !f.lenOK(n) {
			d.fail(CodeBadMessage, "%s of %d bytes, want one of %v", f.what, n, f.lens)
		}
		if p := d.next(n); len(p) > 0 {
			v.SetBytes(append([]byte(nil), p...))
		}
	case wFixed:
		if p := d.next(f.n); p != nil {
			reflect.Copy(v, reflect.ValueOf(p))
		}
	case wStruct:
		decodeFields(d, f.sub, v)
	case wList:
		n := d.count(f.what, f.max.value(d.lim), f.elem.minWire)
		if n == 0 {
			return
		}
		if decodeFastList(d, f, v, n) {
			return
		}
		s := reflect.MakeSlice(f.goType, n, n)
		for i := 0; i < n && d.err == nil; i++ {
			decodeField(d, f.elem, s.Index(i))
		}
		v.Set(s)
	}
	if f.limit != nil && d.err == nil {
		if x, max := v.Uint(), f.limit.value(d.lim); x > uint64(max) {
			d.fail(CodeLimit, "%s %d exceeds the limit of %d", f.what, x, max)
		}
	}
}

// decodeFastList is encodeFastList's decoder: n entries, n already checked.
func decodeFastList(d *decoder, f *field, v reflect.Value, n int) bool {
	el := f.elem
	if el.hasMin {
		return false
	}
	switch p := v.Addr().Interface().(type) {
	case *[]uint32:
		*p = d.u32n(n)
	case *[]uint64:
		l := make([]uint64, n)
		for i := range l {
			l[i] = d.u64()
		}
		*p = l
	case *[]int64:
		l := make([]int64, n)
		for i := range l {
			l[i] = int64(d.u64())
		}
		*p = l
	case *[]string:
		l := make([]string, n)
		for i := range l {
			l[i] = d.str(el.what)
		}
		*p = l
	case *[][]uint32:
		l := make([][]uint32, n)
		for i := range l {
			l[i] = d.u32n(d.count(el.what, el.max.value(d.lim), el.elem.minWire))
		}
		*p = l
	default:
		return false
	}
	return true
}

// u32n reads n u32s (nil for none); the caller checked n against the bytes left.
func (d *decoder) u32n(n int) []uint32 {
	if n == 0 || d.err != nil {
		return nil
	}
	v := make([]uint32, n)
	for i := range v {
		v[i] = d.u32()
	}
	return v
}

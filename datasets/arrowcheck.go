package datasets

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// checkArrowFile checks the structure of b, a whole Arrow IPC file, against
// the one-column, one-batch layout of want, before arrow-go sees it: every
// flatbuffer offset, vector and string of the footer, the schema and the
// record batch message lies inside its buffer, the types and counts are the
// expected ones, and every buffer lies inside the batch body. arrow-go trusts
// these (a bad offset made it slice out of range, a bad vector length made it
// allocate hundreds of GB), so after this it only reads what was checked. It
// returns the file offset of the value buffer, which holds at least the
// column's bytes. Errors say what is wrong, without the file name.
func checkArrowFile(b []byte, want column) (valueOff int64, err error) {
	const magic = "ARROW1"
	size := int64(len(b))
	if size < 8+4+6 || string(b[:6]) != magic || string(b[size-6:]) != magic {
		return 0, errors.New("not a readable Arrow IPC file: no ARROW1 magic at both ends")
	}
	footerLen := int64(binary.LittleEndian.Uint32(b[size-10:]))
	footerStart := size - 10 - footerLen
	if footerLen < 4 || footerStart < 8 {
		return 0, fmt.Errorf("footer length %d does not fit a %d-byte file", footerLen, size)
	}
	footer, err := fbRoot(b[footerStart : size-10])
	if err != nil {
		return 0, fmt.Errorf("footer: %w", err)
	}
	if v := footer.i16(0, 0); v != 3 && v != 4 { // V4, V5
		return 0, fmt.Errorf("footer: metadata version %d, want V4 or V5", v)
	}
	schema, ok, err := footer.table(1)
	if err == nil && !ok {
		err = errors.New("schema: none in the footer")
	}
	if err == nil {
		err = checkSchema(schema, want)
	}
	if err != nil {
		return 0, err
	}
	if _, n, _, err := footer.vector(2, 24); err != nil || n != 0 {
		return 0, fmt.Errorf("footer: dictionaries: %d, %v (want none)", n, err)
	}
	at, n, _, err := footer.vector(3, 24)
	if err != nil || n != 1 {
		return 0, fmt.Errorf("footer: %d record batches, want 1 (%v)", n, err)
	}
	blk := footer.b[at : at+24]
	off := int64(binary.LittleEndian.Uint64(blk))
	meta := int64(int32(binary.LittleEndian.Uint32(blk[8:])))
	body := int64(binary.LittleEndian.Uint64(blk[16:]))
	if off < 8 || meta < 16 || body < 0 || off%8 != 0 || meta%8 != 0 || body%8 != 0 ||
		off > footerStart || meta > footerStart-off || body > footerStart-off-meta {
		return 0, fmt.Errorf("record batch block (offset %d, metadata %d, body %d bytes) does not fit before the footer at %d", off, meta, body, footerStart)
	}
	if binary.LittleEndian.Uint32(b[off:]) != 0xffffffff || int64(binary.LittleEndian.Uint32(b[off+4:])) != meta-8 {
		return 0, fmt.Errorf("record batch message at %d: bad continuation marker or length", off)
	}
	msg, err := fbRoot(b[off+8 : off+meta])
	if err != nil {
		err = fmt.Errorf("record batch message: %w", err)
	} else {
		var bufOff int64
		bufOff, err = checkBatchMessage(msg, body, want)
		valueOff = off + meta + bufOff
	}
	if err != nil {
		return 0, err
	}
	return valueOff, nil
}

// checkSchema checks a Schema table: little-endian, one field as want.
// Structural errors say "schema:"; a wrong column says what it is.
func checkSchema(s fbTable, want column) error {
	if e := s.i16(0, 0); e != 0 {
		return errors.New("schema: big-endian")
	}
	if err := checkKeyValues(s, 2); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	at, n, _, err := s.vector(1, 4)
	if err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	if n != 1 {
		return fmt.Errorf("%d columns, want 1", n)
	}
	f, err := s.vectorTable(at, 0)
	var name, typ string
	if err == nil {
		name, err = f.str(0)
	}
	if err == nil {
		typ, err = fieldType(f)
	}
	if err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	if name != want.field {
		return fmt.Errorf("column %q, want %q", name, want.field)
	}
	wantType := want.elem.Name()
	if want.dim > 0 {
		wantType = fmt.Sprintf("fixed_size_list<%s>[%d]", wantType, want.dim)
	}
	if typ != wantType {
		return fmt.Errorf("column %q has type %s, want %s", name, typ, wantType)
	}
	return nil
}

// fieldType checks a Field table (no dictionary, no extension type, children
// only for a list, whose one child is checked the same way) and describes
// its type: int32, int64, uint8, uint16, float16, float32, float64
// (arrow-go's names), or
// fixed_size_list<T>[n]; anything else is "unsupported".
func fieldType(f fbTable) (string, error) {
	if _, ok, err := f.ref(4); err != nil || ok {
		return "", fmt.Errorf("dictionary-encoded column (%v)", err)
	}
	if err := checkKeyValues(f, 6); err != nil {
		return "", err
	}
	kids, nkids, _, err := f.vector(5, 4)
	if err != nil {
		return "", err
	}
	t, ok, err := f.table(3)
	if err == nil && !ok {
		err = errors.New("a column with no type")
	}
	if err != nil {
		return "", err
	}
	typ, wantKids := "unsupported", 0
	switch f.u8(2) {
	case 2: // Int
		switch bits, signed := t.i32(0, 0), t.u8(1) != 0; {
		case bits == 32 && signed:
			typ = "int32"
		case bits == 64 && signed:
			typ = "int64"
		case bits == 16 && !signed:
			typ = "uint16"
		case bits == 8 && !signed:
			typ = "uint8"
		}
	case 3: // FloatingPoint
		switch t.i16(0, 0) {
		case 0:
			typ = "float16"
		case 1:
			typ = "float32"
		case 2:
			typ = "float64"
		}
	case 16: // FixedSizeList
		wantKids = 1
	}
	if nkids != wantKids {
		return "", fmt.Errorf("a column of %d children, want %d", nkids, wantKids)
	}
	if wantKids == 0 {
		return typ, nil
	}
	child, err := f.vectorTable(kids, 0)
	if err != nil {
		return "", err
	}
	if _, n, _, err := child.vector(5, 4); err != nil || n != 0 {
		return "", fmt.Errorf("a list of nested lists (%v)", err)
	}
	elem, err := fieldType(child)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("fixed_size_list<%s>[%d]", elem, t.i32(0, 0)), nil
}

// checkKeyValues checks a vector of KeyValue tables (custom metadata) and
// refuses extension types, which arrow-go would deserialise.
func checkKeyValues(t fbTable, field int) error {
	at, n, _, err := t.vector(field, 4)
	if err != nil {
		return fmt.Errorf("custom metadata: %w", err)
	}
	for i := 0; i < n; i++ {
		kv, err := t.vectorTable(at, i)
		if err != nil {
			return fmt.Errorf("custom metadata %d: %w", i, err)
		}
		k, err := kv.str(0)
		if err == nil {
			_, err = kv.str(1)
		}
		if err != nil {
			return fmt.Errorf("custom metadata %d: %w", i, err)
		}
		if k == "ARROW:extension:name" {
			return errors.New("an Arrow extension type")
		}
	}
	return nil
}

// checkBatchMessage checks the Message of the record batch: a RecordBatch
// header of want.rows rows without compression, its field nodes (no nulls)
// and buffers inside the body of bodyLen bytes, the last one (the values)
// long enough. It returns the value buffer's offset in the body.
func checkBatchMessage(msg fbTable, bodyLen int64, want column) (int64, error) {
	if v := msg.i16(0, 0); v != 3 && v != 4 {
		return 0, fmt.Errorf("record batch: metadata version %d, want V4 or V5", v)
	}
	if msg.u8(1) != 3 {
		return 0, errors.New("record batch: the block holds another kind of message")
	}
	if got := msg.i64(3, 0); got != bodyLen {
		return 0, fmt.Errorf("record batch: message body length %d, footer says %d", got, bodyLen)
	}
	err := checkKeyValues(msg, 4)
	rb, ok, err2 := msg.table(2)
	if err = errors.Join(err, err2); err == nil && !ok {
		err = errors.New("no header")
	}
	if err != nil {
		return 0, fmt.Errorf("record batch: %w", err)
	}
	if got := rb.i64(0, 0); got != want.rows {
		return 0, fmt.Errorf("%d rows, want %d", got, want.rows)
	}
	if _, ok, err := rb.ref(3); err != nil || ok {
		return 0, fmt.Errorf("record batch: compressed (%v)", err)
	}
	values := want.rows
	lengths := []int64{values}
	if want.dim > 0 {
		var ok bool
		if values, ok = mulNonNeg(values, int64(want.dim)); !ok {
			return 0, fmt.Errorf("record batch: %d rows of %d values overflow", want.rows, want.dim)
		}
		lengths = append(lengths, values)
	}
	at, n, _, err := rb.vector(1, 16)
	if err != nil || n != len(lengths) {
		return 0, fmt.Errorf("record batch: %d field nodes, want %d (%v)", n, len(lengths), err)
	}
	for i, l := range lengths {
		node := rb.b[at+16*int64(i):]
		length, nulls := int64(binary.LittleEndian.Uint64(node)), int64(binary.LittleEndian.Uint64(node[8:]))
		if length != l || nulls != 0 {
			return 0, fmt.Errorf("record batch: field node %d: length %d with %d nulls, want %d with none", i, length, nulls, l)
		}
	}
	at, n, _, err = rb.vector(2, 16)
	if err != nil || n != len(lengths)+1 {
		return 0, fmt.Errorf("record batch: %d buffers, want %d (%v)", n, len(lengths)+1, err)
	}
	var bufOff, bufLen int64
	for i := 0; i < n; i++ {
		buf := rb.b[at+16*int64(i):]
		bufOff, bufLen = int64(binary.LittleEndian.Uint64(buf)), int64(binary.LittleEndian.Uint64(buf[8:]))
		if bufOff < 0 || bufLen < 0 || bufOff > bodyLen || bufLen > bodyLen-bufOff {
			return 0, fmt.Errorf("record batch: buffer %d (offset %d, %d bytes) is outside the %d-byte body", i, bufOff, bufLen, bodyLen)
		}
	}
	width := int64(want.elem.(interface{ BitWidth() int }).BitWidth() / 8)
	if need, ok := mulNonNeg(values, width); !ok || bufLen < need {
		return 0, fmt.Errorf("record batch: value buffer holds %d bytes, want %s", bufLen, needString(need, ok))
	}
	return bufOff, nil
}

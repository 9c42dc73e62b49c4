package manifest

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// checkSchemaIPC checks the structure of a schema's Arrow IPC stream before Arrow's reader
// decodes it: the message length, the body length, and every flatbuffer table, vector
// and string the schema reader follows must lie inside the bytes. Arrow's reader trusts
// them (a recovered panic at worst for most, but it sizes allocations by vector lengths,
// the metadata length and the body length), so a damaged schema in a manifest whose
// checksum still matches would otherwise allocate up to gigabytes before failing.
// Errors: ErrCorrupt, saying what is out of bounds.
func checkSchemaIPC(b []byte) error {
	if len(b) < 8 {
		return fmt.Errorf("%w: schema IPC of %d bytes", ErrCorrupt, len(b))
	}
	off := 0
	if binary.LittleEndian.Uint32(b) == 0xFFFFFFFF {
		off = 4
	}
	n := uint64(binary.LittleEndian.Uint32(b[off:]))
	off += 4
	if n < 4 || n > uint64(len(b)-off) || n > 1<<31-1 {
		return fmt.Errorf("%w: schema IPC message length %d of %d bytes", ErrCorrupt, n, len(b)-off)
	}
	fb := flatbuf(b[off : off+int(n)])
	rest := uint64(len(b) - off - int(n))
	msg, err := fb.indirect(0)
	if err == nil {
		err = fb.table(msg)
	}
	if err != nil {
		return fmt.Errorf("%w: schema IPC message: %v", ErrCorrupt, err)
	}
	// Message: 0 version, 1 header_type, 2 header, 3 bodyLength, 4 custom_metadata.
	var body uint64
	if p, ok, err := fb.field(msg, 3, 8); err != nil {
		return fmt.Errorf("%w: schema IPC message: %v", ErrCorrupt, err)
	} else if ok {
		if body = binary.LittleEndian.Uint64(fb[p:]); body > rest {
			return fmt.Errorf("%w: schema IPC body length %d of %d bytes", ErrCorrupt, body, rest)
		}
	}
	// After the schema message only an end-of-stream marker may follow (NewSchema writes
	// the schema alone): Arrow's reader would size another message by its length.
	switch tail := b[len(b)-int(rest-body):]; {
	case len(tail) == 0, string(tail) == "\xff\xff\xff\xff\x00\x00\x00\x00", string(tail) == "\x00\x00\x00\x00":
	default:
		return fmt.Errorf("%w: schema IPC has %d bytes after the schema message", ErrCorrupt, len(tail))
	}
	if err := fb.keyValues(msg, 4); err != nil {
		return fmt.Errorf("%w: schema IPC message metadata: %v", ErrCorrupt, err)
	}
	schema, ok, err := fb.tableField(msg, 2)
	if err != nil || !ok {
		return fmt.Errorf("%w: schema IPC message has no readable header (%v)", ErrCorrupt, err)
	}
	// Schema: 0 endianness, 1 fields, 2 custom_metadata, 3 features.
	if err := fb.fields(schema, 1, 0); err != nil {
		return fmt.Errorf("%w: schema IPC fields: %v", ErrCorrupt, err)
	}
	if err := fb.keyValues(schema, 2); err != nil {
		return fmt.Errorf("%w: schema IPC metadata: %v", ErrCorrupt, err)
	}
	if _, _, err := fb.vector(schema, 3, 8); err != nil {
		return fmt.Errorf("%w: schema IPC features: %v", ErrCorrupt, err)
	}
	return nil
}

// flatbuf reads a flatbuffer, checking every offset against its length.
type flatbuf []byte

var errFlatbuf = errors.New("offset out of bounds")

// maxFieldDepth bounds the nesting of children fields the check follows.
const maxFieldDepth = 64

func (fb flatbuf) u32(p int) (uint32, error) {
	if p < 0 || p > len(fb)-4 {
		return 0, errFlatbuf
	}
	return binary.LittleEndian.Uint32(fb[p:]), nil
}

// indirect follows the unsigned offset stored at p.
func (fb flatbuf) indirect(p int) (int, error) {
	o, err := fb.u32(p)
	if err != nil || uint64(p)+uint64(o) >= uint64(len(fb)) {
		return 0, errFlatbuf
	}
	return p + int(o), nil
}

// table checks the table at t and its vtable.
func (fb flatbuf) table(t int) error {
	so, err := fb.u32(t)
	if err != nil {
		return err
	}
	vt := int64(t) - int64(int32(so))
	if vt < 0 || vt > int64(len(fb))-4 {
		return errFlatbuf
	}
	vsize := int64(binary.LittleEndian.Uint16(fb[vt:]))
	osize := int64(binary.LittleEndian.Uint16(fb[vt+2:]))
	if vsize < 4 || vt+vsize > int64(len(fb)) || int64(t)+osize > int64(len(fb)) {
		return errFlatbuf
	}
	return nil
}

// field returns the position of field i of table t (checked by table) holding size
// bytes; ok is false when the field is absent.
func (fb flatbuf) field(t, i, size int) (int, bool, error) {
	vt := t - int(int32(binary.LittleEndian.Uint32(fb[t:])))
	vsize := int(binary.LittleEndian.Uint16(fb[vt:]))
	at := 4 + 2*i
	if at >= vsize { // as flatbuffers' Table.Offset decides, even for an odd vtable size
		return 0, false, nil
	}
	if vt+at+2 > len(fb) {
		return 0, false, errFlatbuf
	}
	o := int(binary.LittleEndian.Uint16(fb[vt+at:]))
	if o == 0 {
		return 0, false, nil
	}
	if t+o+size > len(fb) {
		return 0, false, errFlatbuf
	}
	return t + o, true, nil
}

// tableField returns the checked table field i of table t points to.
func (fb flatbuf) tableField(t, i int) (int, bool, error) {
	p, ok, err := fb.field(t, i, 4)
	if err != nil || !ok {
		return 0, false, err
	}
	sub, err := fb.indirect(p)
	if err == nil {
		err = fb.table(sub)
	}
	return sub, err == nil, err
}

// vector returns the start and length of the vector field i of table t points to, its
// elements elem bytes each, all inside the buffer.
func (fb flatbuf) vector(t, i, elem int) (int, int, error) {
	p, ok, err := fb.field(t, i, 4)
	if err != nil || !ok {
		return 0, 0, err
	}
	v, err := fb.indirect(p)
	if err != nil {
		return 0, 0, err
	}
	n, err := fb.u32(v)
	if err != nil || uint64(v)+4+uint64(n)*uint64(elem) > uint64(len(fb)) {
		return 0, 0, errFlatbuf
	}
	return v + 4, int(n), nil
}

// tables checks the vector of tables field i of table t points to and calls each on
// every element.
func (fb flatbuf) tables(t, i int, each func(int) error) error {
	start, n, err := fb.vector(t, i, 4)
	if err != nil {
		return err
	}
	for k := range n {
		sub, err := fb.indirect(start + 4*k)
		if err == nil {
			err = fb.table(sub)
		}
		if err == nil && each != nil {
			err = each(sub)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (fb flatbuf) str(t, i int) error {
	_, _, err := fb.vector(t, i, 1)
	return err
}

// keyValues checks a vector of KeyValue tables (0 key, 1 value).
func (fb flatbuf) keyValues(t, i int) error {
	return fb.tables(t, i, func(kv int) error {
		if err := fb.str(kv, 0); err != nil {
			return err
		}
		return fb.str(kv, 1)
	})
}

// fields checks a vector of Field tables: 0 name, 1 nullable, 2 type_type, 3 type,
// 4 dictionary, 5 children, 6 custom_metadata.
func (fb flatbuf) fields(t, i, depth int) error {
	if depth > maxFieldDepth {
		return errors.New("fields nested too deep")
	}
	return fb.tables(t, i, func(f int) error {
		if err := fb.str(f, 0); err != nil {
			return err
		}
		typ, ok, err := fb.tableField(f, 3)
		if err != nil {
			return err
		}
		if ok {
			// Union (type 14): 0 mode, 1 typeIds. Other types hold scalars only.
			if p, has, err := fb.field(f, 2, 1); err != nil {
				return err
			} else if has && fb[p] == 14 {
				if _, _, err := fb.vector(typ, 1, 4); err != nil {
					return err
				}
			}
		}
		// DictionaryEncoding: 0 id, 1 indexType (Int table), 2 isOrdered, 3 kind.
		if dict, ok, err := fb.tableField(f, 4); err != nil {
			return err
		} else if ok {
			if _, _, err := fb.tableField(dict, 1); err != nil {
				return err
			}
		}
		if err := fb.fields(f, 5, depth+1); err != nil {
			return err
		}
		return fb.keyValues(f, 6)
	})
}

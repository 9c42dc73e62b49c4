package fragment

import (
	"encoding/binary"
	"errors"
	"fmt"

	flatbuffers "github.com/google/flatbuffers/go"
)

// This file reads and writes the few Arrow IPC flatbuffer tables the reader needs beyond
// arrow-go's public API: the footer's record-batch blocks (to fetch a batch in one range
// request) and a record batch message's field nodes and buffers (to fetch and decode only
// the buffers of projected columns). Field slots follow format/File.fbs and
// format/Message.fbs of the Arrow specification.

const (
	ipcMagic          = "ARROW1"
	ipcTrailerLen     = 4 + len(ipcMagic) // footer length (int32) + magic
	headerRecordBatch = 3                 // MessageHeader.RecordBatch
	metadataV5        = 4                 // MetadataVersion.V5
	blockStructSize   = 24                // Block{offset int64, metaDataLength int32, pad, bodyLength int64}
	bufferStructSize  = 16                // Buffer{offset int64, length int64}
	nodeStructSize    = 16                // FieldNode{length int64, null_count int64}
)

// ipcBlock locates one message in an IPC file: metadata (with its length prefix) at offset,
// then the body.
type ipcBlock struct {
	Offset  int64
	MetaLen int32
	BodyLen int64
}

// footerInfo is what the reader takes from the footer flatbuffer.
type footerInfo struct {
	Batches  []ipcBlock
	NumDicts int
}

// parseFooter decodes the footer flatbuffer. It never panics: a malformed buffer is an error.
func parseFooter(buf []byte) (fi footerInfo, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("malformed footer: %v", p)
		}
	}()
	if len(buf) < 8 {
		return fi, errors.New("footer too short")
	}
	t := rootTable(buf)
	if o := flatbuffers.UOffsetT(t.Offset(8)); o != 0 { // dictionaries
		fi.NumDicts = t.VectorLen(o)
	}
	if o := flatbuffers.UOffsetT(t.Offset(10)); o != 0 { // recordBatches
		n := t.VectorLen(o)
		start := t.Vector(o)
		if int(start)+n*blockStructSize > len(buf) {
			return fi, errors.New("record batch block vector out of bounds")
		}
		fi.Batches = make([]ipcBlock, n)
		for i := range fi.Batches {
			p := start + flatbuffers.UOffsetT(i*blockStructSize)
			fi.Batches[i] = ipcBlock{Offset: t.GetInt64(p), MetaLen: t.GetInt32(p + 8), BodyLen: t.GetInt64(p + 16)}
		}
	}
	return fi, nil
}

func rootTable(buf []byte) flatbuffers.Table {
	n := flatbuffers.GetUOffsetT(buf)
	if int(n) >= len(buf) {
		panic("root offset out of bounds")
	}
	return flatbuffers.Table{Bytes: buf, Pos: n}
}

// stripMetaPrefix removes the encapsulation prefix (0xFFFFFFFF continuation + int32
// length, or a bare pre-0.15 int32 length) of a message's metadata.
func stripMetaPrefix(meta []byte) ([]byte, error) {
	if len(meta) < 8 {
		return nil, fmt.Errorf("message metadata of %d bytes is too short", len(meta))
	}
	prefix := 4
	if binary.LittleEndian.Uint32(meta) == 0xFFFFFFFF {
		prefix = 8
	}
	n := int(int32(binary.LittleEndian.Uint32(meta[prefix-4:])))
	if n <= 0 || prefix+n > len(meta) {
		return nil, fmt.Errorf("message metadata length %d does not fit its block of %d bytes", n, len(meta))
	}
	return meta[prefix : prefix+n], nil
}

// ipcBuffer is one buffer of a record batch body.
type ipcBuffer struct{ Offset, Length int64 }

// ipcNode is one field node (array length and null count).
type ipcNode struct{ Length, NullCount int64 }

// batchMeta is the decoded header of a record batch message.
type batchMeta struct {
	Version    int16
	BodyLen    int64
	Length     int64
	Nodes      []ipcNode
	Buffers    []ipcBuffer
	Variadic   []int64
	HasCodec   bool
	Codec      int8
	CodecMeth  int8
	HasCustom  bool // custom metadata present (kept out of projected messages)
	headerType byte
}

// parseBatchMeta decodes a Message flatbuffer holding a RecordBatch header.
func parseBatchMeta(buf []byte) (m batchMeta, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("malformed record batch metadata: %v", p)
		}
	}()
	msg := rootTable(buf)
	m.Version = msg.GetInt16Slot(4, 0)
	m.headerType = msg.GetByteSlot(6, 0)
	m.BodyLen = msg.GetInt64Slot(10, 0)
	m.HasCustom = msg.Offset(12) != 0
	if m.headerType != headerRecordBatch {
		return m, fmt.Errorf("message header type %d is not a record batch", m.headerType)
	}
	o := flatbuffers.UOffsetT(msg.Offset(8))
	if o == 0 {
		return m, errors.New("record batch message has no header")
	}
	var rb flatbuffers.Table
	msg.Union(&rb, o)
	m.Length = rb.GetInt64Slot(4, 0)
	if o := flatbuffers.UOffsetT(rb.Offset(6)); o != 0 {
		n, start := rb.VectorLen(o), rb.Vector(o)
		if int(start)+n*nodeStructSize > len(buf) {
			return m, errors.New("field node vector out of bounds")
		}
		m.Nodes = make([]ipcNode, n)
		for i := range m.Nodes {
			p := start + flatbuffers.UOffsetT(i*nodeStructSize)
			m.Nodes[i] = ipcNode{Length: rb.GetInt64(p), NullCount: rb.GetInt64(p + 8)}
		}
	}
	if o := flatbuffers.UOffsetT(rb.Offset(8)); o != 0 {
		n, start := rb.VectorLen(o), rb.Vector(o)
		if int(start)+n*bufferStructSize > len(buf) {
			return m, errors.New("buffer vector out of bounds")
		}
		m.Buffers = make([]ipcBuffer, n)
		for i := range m.Buffers {
			p := start + flatbuffers.UOffsetT(i*bufferStructSize)
			m.Buffers[i] = ipcBuffer{Offset: rb.GetInt64(p), Length: rb.GetInt64(p + 8)}
		}
	}
	if o := flatbuffers.UOffsetT(rb.Offset(10)); o != 0 {
		var c flatbuffers.Table
		c.Bytes = rb.Bytes
		c.Pos = rb.Indirect(o + rb.Pos)
		m.HasCodec = true
		m.Codec = c.GetInt8Slot(4, 0)
		m.CodecMeth = c.GetInt8Slot(6, 0)
	}
	if o := flatbuffers.UOffsetT(rb.Offset(12)); o != 0 {
		n, start := rb.VectorLen(o), rb.Vector(o)
		if int(start)+n*8 > len(buf) {
			return m, errors.New("variadic count vector out of bounds")
		}
		m.Variadic = make([]int64, n)
		for i := range m.Variadic {
			m.Variadic[i] = rb.GetInt64(start + flatbuffers.UOffsetT(i*8))
		}
	}
	if m.Length < 0 {
		return m, fmt.Errorf("negative row count %d", m.Length)
	}
	for i, n := range m.Nodes {
		if n.Length < 0 || n.NullCount < 0 || n.NullCount > n.Length {
			return m, fmt.Errorf("field node %d has length %d and null count %d", i, n.Length, n.NullCount)
		}
	}
	for i, b := range m.Buffers {
		if b.Offset < 0 || b.Length < 0 || b.Offset > m.BodyLen || b.Length > m.BodyLen-b.Offset {
			return m, fmt.Errorf("buffer %d [%d,+%d) lies outside the body of %d bytes", i, b.Offset, b.Length, m.BodyLen)
		}
	}
	return m, nil
}

// buildBatchMeta encodes a Message flatbuffer with a RecordBatch header.
func buildBatchMeta(m batchMeta) []byte {
	b := flatbuffers.NewBuilder(256 + 16*(len(m.Nodes)+len(m.Buffers)))
	var variadic flatbuffers.UOffsetT
	if len(m.Variadic) > 0 {
		b.StartVector(8, len(m.Variadic), 8)
		for i := len(m.Variadic) - 1; i >= 0; i-- {
			b.PrependInt64(m.Variadic[i])
		}
		variadic = b.EndVector(len(m.Variadic))
	}
	b.StartVector(bufferStructSize, len(m.Buffers), 8)
	for i := len(m.Buffers) - 1; i >= 0; i-- {
		b.Prep(8, bufferStructSize)
		b.PrependInt64(m.Buffers[i].Length)
		b.PrependInt64(m.Buffers[i].Offset)
	}
	buffers := b.EndVector(len(m.Buffers))
	b.StartVector(nodeStructSize, len(m.Nodes), 8)
	for i := len(m.Nodes) - 1; i >= 0; i-- {
		b.Prep(8, nodeStructSize)
		b.PrependInt64(m.Nodes[i].NullCount)
		b.PrependInt64(m.Nodes[i].Length)
	}
	nodes := b.EndVector(len(m.Nodes))
	var codec flatbuffers.UOffsetT
	if m.HasCodec {
		b.StartObject(2)
		b.PrependInt8Slot(0, m.Codec, -1) // default differs so the slot is always written
		b.PrependInt8Slot(1, m.CodecMeth, -1)
		codec = b.EndObject()
	}
	b.StartObject(5)
	b.PrependInt64Slot(0, m.Length, 0)
	b.PrependUOffsetTSlot(1, nodes, 0)
	b.PrependUOffsetTSlot(2, buffers, 0)
	if codec != 0 {
		b.PrependUOffsetTSlot(3, codec, 0)
	}
	if variadic != 0 {
		b.PrependUOffsetTSlot(4, variadic, 0)
	}
	rb := b.EndObject()
	b.StartObject(5)
	b.PrependInt16Slot(0, m.Version, -1)
	b.PrependByteSlot(1, headerRecordBatch, 0)
	b.PrependUOffsetTSlot(2, rb, 0)
	b.PrependInt64Slot(3, m.BodyLen, -1)
	msg := b.EndObject()
	b.Finish(msg)
	return b.FinishedBytes()
}

// verifySchemaFB walks the footer's schema the way arrow-go's decoder will, checking that
// every table, string and vector it touches lies inside buf and that the field tree is
// neither deeper than maxFieldDepth nor larger than maxFieldNodes. arrow-go allocates by
// vector lengths it reads and recurses without a bound, so an unchecked footer with one
// damaged length could exhaust memory or the stack; this rejects such a footer first.
func verifySchemaFB(buf []byte) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("malformed footer schema: %v", p)
		}
	}()
	v := fbVerifier{buf: buf}
	footer := rootTable(buf)
	v.table(footer.Pos)
	schema, ok := v.subTable(footer, 6)
	if !ok {
		return errors.New("footer has no schema")
	}
	v.vector(schema, 10, 8) // features
	v.keyValues(schema, 8)  // custom_metadata
	v.fields(schema, 6, 0)  // fields
	return v.err
}

const (
	maxFieldDepth = 64
	maxFieldNodes = 1 << 16
)

type fbVerifier struct {
	buf   []byte
	nodes int
	err   error
}

func (v *fbVerifier) fail(format string, args ...any) {
	if v.err == nil {
		v.err = fmt.Errorf(format, args...)
	}
	panic(v.err)
}

// table checks a table's vtable lies inside the buffer.
func (v *fbVerifier) table(pos flatbuffers.UOffsetT) {
	if int(pos)+4 > len(v.buf) {
		v.fail("table at %d outside %d-byte footer", pos, len(v.buf))
	}
	vt := int64(pos) - int64(flatbuffers.GetSOffsetT(v.buf[pos:]))
	if vt < 0 || vt+4 > int64(len(v.buf)) {
		v.fail("vtable at %d outside footer", vt)
	}
	vtLen := int64(flatbuffers.GetVOffsetT(v.buf[vt:]))
	objLen := int64(flatbuffers.GetVOffsetT(v.buf[vt+2:]))
	if vtLen < 4 || vt+vtLen > int64(len(v.buf)) || int64(pos)+objLen > int64(len(v.buf)) {
		v.fail("table at %d has a vtable or body outside footer", pos)
	}
}

func (v *fbVerifier) subTable(t flatbuffers.Table, slot flatbuffers.VOffsetT) (flatbuffers.Table, bool) {
	o := flatbuffers.UOffsetT(t.Offset(slot))
	if o == 0 {
		return flatbuffers.Table{}, false
	}
	if int(t.Pos+o)+4 > len(v.buf) {
		v.fail("offset outside footer")
	}
	pos := t.Indirect(t.Pos + o)
	v.table(pos)
	return flatbuffers.Table{Bytes: v.buf, Pos: pos}, true
}

// vector checks a vector field's elements lie inside the buffer; it returns the length and
// the position of the first element.
func (v *fbVerifier) vector(t flatbuffers.Table, slot flatbuffers.VOffsetT, elem int) (int, flatbuffers.UOffsetT) {
	o := flatbuffers.UOffsetT(t.Offset(slot))
	if o == 0 {
		return 0, 0
	}
	if int(t.Pos+o)+4 > len(v.buf) {
		v.fail("vector offset outside footer")
	}
	hdr := t.Pos + o + flatbuffers.GetUOffsetT(v.buf[t.Pos+o:])
	if int64(hdr)+4 > int64(len(v.buf)) {
		v.fail("vector header outside footer")
	}
	n := int64(flatbuffers.GetUOffsetT(v.buf[hdr:]))
	if int64(hdr)+4+n*int64(elem) > int64(len(v.buf)) {
		v.fail("vector of %d elements outside footer", n)
	}
	return int(n), hdr + 4
}

func (v *fbVerifier) keyValues(t flatbuffers.Table, slot flatbuffers.VOffsetT) {
	n, start := v.vector(t, slot, 4)
	for i := 0; i < n; i++ {
		p := start + flatbuffers.UOffsetT(4*i)
		kv := flatbuffers.Table{Bytes: v.buf, Pos: p + flatbuffers.GetUOffsetT(v.buf[p:])}
		v.table(kv.Pos)
		v.vector(kv, 4, 1) // key
		v.vector(kv, 6, 1) // value
	}
}

// fields checks a [Field] vector and every field below it.
func (v *fbVerifier) fields(parent flatbuffers.Table, slot flatbuffers.VOffsetT, depth int) {
	n, start := v.vector(parent, slot, 4)
	if depth > maxFieldDepth {
		v.fail("field tree deeper than %d", maxFieldDepth)
	}
	for i := 0; i < n; i++ {
		v.nodes++
		if v.nodes > maxFieldNodes {
			v.fail("more than %d fields", maxFieldNodes)
		}
		p := start + flatbuffers.UOffsetT(4*i)
		f := flatbuffers.Table{Bytes: v.buf, Pos: p + flatbuffers.GetUOffsetT(v.buf[p:])}
		v.table(f.Pos)
		v.vector(f, 4, 1) // name
		if typ, ok := v.subTable(f, 10); ok {
			switch f.GetByteSlot(8, 0) { // type_type (format/Schema.fbs Type)
			case 10: // Timestamp.timezone
				v.vector(typ, 6, 1)
			case 14: // Union.typeIds
				v.vector(typ, 6, 4)
			}
		}
		if dict, ok := v.subTable(f, 12); ok {
			v.subTable(dict, 6) // indexType
		}
		v.keyValues(f, 16)
		v.fields(f, 14, depth+1)
	}
}

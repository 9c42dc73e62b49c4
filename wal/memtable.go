package wal

import (
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// memtable buffers the rows of consecutive entries until a flush writes them as one
// generation. last is the highest position whose rows it holds: entries are inserted in
// position order by the one goroutine that writes them, so a memtable holds every entry
// after the previous memtable's last up to its own last, and a flush of it may move the
// replay position to last and no further.
type memtable struct {
	recs  []arrow.RecordBatch
	rows  int64
	bytes int64
	last  Position
	since time.Time // when its first row arrived (zero when empty)
}

func (m *memtable) insert(recs []arrow.RecordBatch, last Position) {
	for _, r := range recs {
		r.Retain()
		m.recs = append(m.recs, r)
		m.rows += r.NumRows()
		m.bytes += recordBytes(r)
	}
	if m.since.IsZero() && len(recs) > 0 {
		m.since = time.Now()
	}
	m.last = last
}

func (m *memtable) release() {
	for _, r := range m.recs {
		r.Release()
	}
	m.recs = nil
}

// recordBytes is the in-memory size of r's buffers.
func recordBytes(r arrow.RecordBatch) int64 {
	var n int64
	for _, c := range r.Columns() {
		n += int64(arrayBytes(c.Data()))
	}
	return n
}

func arrayBytes(d arrow.ArrayData) int {
	n := 0
	for _, b := range d.Buffers() {
		if b != nil {
			n += b.Len()
		}
	}
	for _, c := range d.Children() {
		n += arrayBytes(c)
	}
	return n
}

// arrowRecordWithSchema is r's columns under schema (same fields, other metadata).
func arrowRecordWithSchema(schema *arrow.Schema, r arrow.RecordBatch) arrow.RecordBatch {
	return array.NewRecordBatch(schema, r.Columns(), r.NumRows())
}

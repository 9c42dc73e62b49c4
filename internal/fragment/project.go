package fragment

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// Column projection without reading unneeded buffers.
//
// A record batch body holds each top-level column's buffers contiguously, in schema order
// (depth first through children). Knowing how many field nodes, buffers and variadic
// counts each type consumes (mirroring arrow-go's array loader), the reader maps every
// top-level column to its slice of the batch metadata and its byte span in the body,
// fetches only the spans of the chosen columns, and decodes a rebuilt message that holds
// just those columns.

// columnLayout is one top-level column's share of a record batch message.
type columnLayout struct {
	nodeLo, nodeHi int   // field nodes [lo, hi)
	bufLo, bufHi   int   // buffers [lo, hi)
	varLo, varHi   int   // variadic buffer counts [lo, hi)
	start, end     int64 // byte span in the body covering its non-empty buffers (empty: start == end)
}

// errUnsupportedLayout means the projection path cannot map this schema (a dictionary or a
// type it does not know); the caller reads the whole batch instead.
var errUnsupportedLayout = errors.New("layout not supported for projection")

type layoutWalker struct {
	m                 *batchMeta
	node, buf, varIdx int
}

func (w *layoutWalker) walk(dt arrow.DataType) error {
	if ext, ok := dt.(arrow.ExtensionType); ok {
		return w.walk(ext.StorageType())
	}
	switch dt := dt.(type) {
	case *arrow.NullType:
		w.node++
	case *arrow.BooleanType,
		*arrow.Int8Type, *arrow.Int16Type, *arrow.Int32Type, *arrow.Int64Type,
		*arrow.Uint8Type, *arrow.Uint16Type, *arrow.Uint32Type, *arrow.Uint64Type,
		*arrow.Float16Type, *arrow.Float32Type, *arrow.Float64Type,
		arrow.DecimalType,
		*arrow.Time32Type, *arrow.Time64Type, *arrow.TimestampType,
		*arrow.Date32Type, *arrow.Date64Type,
		*arrow.MonthIntervalType, *arrow.DayTimeIntervalType, *arrow.MonthDayNanoIntervalType,
		*arrow.DurationType, *arrow.FixedSizeBinaryType:
		w.node++
		w.buf += 2
	case *arrow.BinaryType, *arrow.StringType, *arrow.LargeStringType, *arrow.LargeBinaryType:
		w.node++
		w.buf += 3
	case arrow.BinaryViewDataType:
		if w.m == nil { // static check only
			w.node++
			w.buf += 2
			break
		}
		if w.varIdx >= len(w.m.Variadic) {
			return errors.New("missing variadic buffer count")
		}
		n := w.m.Variadic[w.varIdx]
		if n < 0 || n > int64(len(w.m.Buffers)) {
			return fmt.Errorf("bad variadic buffer count %d", n)
		}
		w.varIdx++
		w.node++
		w.buf += 2 + int(n)
	case *arrow.MapType:
		w.node++
		w.buf += 2
		return w.walk(dt.Elem())
	case *arrow.ListType:
		w.node++
		w.buf += 2
		return w.walk(dt.Elem())
	case *arrow.LargeListType:
		w.node++
		w.buf += 2
		return w.walk(dt.Elem())
	case *arrow.ListViewType:
		w.node++
		w.buf += 3
		return w.walk(dt.Elem())
	case *arrow.LargeListViewType:
		w.node++
		w.buf += 3
		return w.walk(dt.Elem())
	case *arrow.FixedSizeListType:
		w.node++
		w.buf++
		return w.walk(dt.Elem())
	case *arrow.StructType:
		w.node++
		w.buf++
		for _, f := range dt.Fields() {
			if err := w.walk(f.Type); err != nil {
				return err
			}
		}
	case *arrow.RunEndEncodedType:
		w.node++
		if err := w.walk(dt.RunEnds()); err != nil {
			return err
		}
		return w.walk(dt.Encoded())
	case arrow.UnionType:
		w.node++
		w.buf++
		if dt.Mode() == arrow.DenseMode {
			w.buf++
		}
		for _, f := range dt.Fields() {
			if err := w.walk(f.Type); err != nil {
				return err
			}
		}
	default:
		return errUnsupportedLayout
	}
	return nil
}

// projectable reports whether a projected fetch (Batch.fetchColumns) can map every column of schema.
func projectable(schema *arrow.Schema) bool {
	w := &layoutWalker{}
	for _, f := range schema.Fields() {
		if w.walk(f.Type) != nil {
			return false
		}
	}
	return true
}

// batchLayout maps each top-level column of schema to its share of m.
func batchLayout(schema *arrow.Schema, m *batchMeta) ([]columnLayout, error) {
	if m.Version != metadataV5 {
		return nil, errUnsupportedLayout
	}
	w := &layoutWalker{m: m}
	out := make([]columnLayout, schema.NumFields())
	for i, f := range schema.Fields() {
		c := columnLayout{nodeLo: w.node, bufLo: w.buf, varLo: w.varIdx}
		if err := w.walk(f.Type); err != nil {
			return nil, err
		}
		c.nodeHi, c.bufHi, c.varHi = w.node, w.buf, w.varIdx
		if c.nodeHi > len(m.Nodes) || c.bufHi > len(m.Buffers) {
			return nil, fmt.Errorf("column %d needs %d field nodes and %d buffers, the message has %d and %d",
				i, c.nodeHi, c.bufHi, len(m.Nodes), len(m.Buffers))
		}
		first := true
		for _, b := range m.Buffers[c.bufLo:c.bufHi] {
			if b.Length == 0 {
				continue
			}
			if first {
				c.start, c.end, first = b.Offset, b.Offset+b.Length, false
				continue
			}
			c.start = min(c.start, b.Offset)
			c.end = max(c.end, b.Offset+b.Length)
		}
		out[i] = c
	}
	if w.node != len(m.Nodes) || w.buf != len(m.Buffers) || w.varIdx != len(m.Variadic) {
		return nil, fmt.Errorf("schema needs %d field nodes, %d buffers and %d variadic counts, the message has %d, %d and %d",
			w.node, w.buf, w.varIdx, len(m.Nodes), len(m.Buffers), len(m.Variadic))
	}
	return out, nil
}

// byteRange is a half-open range of a batch body.
type byteRange struct{ start, end int64 }

// planRanges returns the body ranges to fetch for the given column spans: sorted, with
// holes of at most gap bytes read through, and collapsed into one range when that range
// would be at most twice the bytes needed (a second request costs more than the waste).
func planRanges(spans []byteRange, gap int64) []byteRange {
	var rs []byteRange
	for _, s := range spans {
		if s.end > s.start {
			rs = append(rs, s)
		}
	}
	if len(rs) == 0 {
		return nil
	}
	slices.SortFunc(rs, func(a, b byteRange) int { return int(a.start - b.start) })
	out := []byteRange{rs[0]}
	for _, r := range rs[1:] {
		last := &out[len(out)-1]
		if r.start <= last.end+gap {
			last.end = max(last.end, r.end)
			continue
		}
		out = append(out, r)
	}
	var need int64
	for _, r := range out {
		need += r.end - r.start
	}
	whole := byteRange{out[0].start, out[len(out)-1].end}
	if len(out) > 1 && whole.end-whole.start <= 2*need {
		return []byteRange{whole}
	}
	return out
}

func align8(n int64) int64 { return (n + 7) &^ 7 }

// projectedSchema is r.schema restricted to columns, in that order.
func (r *FileReader) projectedSchema(columns []int) *arrow.Schema {
	fields := make([]arrow.Field, len(columns))
	for j, c := range columns {
		fields[j] = r.schema.Field(c)
	}
	md := r.schema.Metadata()
	return arrow.NewSchema(fields, &md)
}

func (r *FileReader) projectedSchemaMessage(columns []int) []byte {
	parts := make([]string, len(columns))
	for j, c := range columns {
		parts[j] = strconv.Itoa(c)
	}
	key := strings.Join(parts, ",")
	r.mu.Lock()
	defer r.mu.Unlock()
	if m, ok := r.projMsgs[key]; ok {
		return m
	}
	m := schemaMessage(r.projectedSchema(columns), r.mem)
	r.projMsgs[key] = m
	return m
}

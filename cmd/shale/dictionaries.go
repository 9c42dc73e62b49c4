package main

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Arrow dictionary columns at import. Filters do not take dictionaries, so a file's
// top-level dictionary columns (pandas categoricals, pyarrow's dictionary_encode) are
// stored as their values; a table that has a dictionary column already (made before
// imports did this) gets the file's column encoded as its dictionary type instead.

// dictionaryColumns maps the columns of a table's schema (nil: none) that have a
// dictionary type to that type: tables created before imports decoded dictionaries have
// them, and an import appending to such a table encodes the file's column (a dictionary of
// any index type, or plain values) as that dictionary type, so that the types match.
func dictionaryColumns(table *arrow.Schema) map[string]*arrow.DictionaryType {
	if table == nil {
		return nil
	}
	out := map[string]*arrow.DictionaryType{}
	for _, f := range table.Fields() {
		if dt, ok := f.Type.(*arrow.DictionaryType); ok {
			out[f.Name] = dt
		}
	}
	return out
}

// decodeDictionaries presents the top-level dictionary columns of r (pandas categoricals,
// dictionary_encode; filters do not take dictionaries) as their value types, with
// arrow-go's cast (its take for bool values, which the cast does not unpack): the value
// each index selects, null where the index or that value is null. A column named in keep
// (a table's dictionary column, created before imports decoded dictionaries) is encoded as
// keep's dictionary type instead, whatever the file has there: a dictionary of another
// index type (pandas picks int8 or int16 by the number of categories) or plain values,
// their values cast to the dictionary's value type where they differ (utf8 to
// large_utf8). Dictionaries of other value types the cast cannot unpack (nested types),
// and dictionaries inside a struct or list, stay as they are. Arrays are allocated from
// mem; a failed decode ends Next, its error (naming the column) from Err. With nothing to
// change, r is returned as it is.
func decodeDictionaries(ctx context.Context, r array.RecordReader, keep map[string]*arrow.DictionaryType, mem memory.Allocator) array.RecordReader {
	in := r.Schema()
	fields := in.Fields()
	converted := make([]bool, len(fields))
	some := false
	for i, f := range fields {
		if to, ok := keep[f.Name]; ok {
			if arrow.TypeEqual(f.Type, to) || !dictionaryEncodable(f.Type, to) {
				continue // the same type already, or a mismatch the schema check reports
			}
			fields[i].Type = to
		} else if dt, ok := f.Type.(*arrow.DictionaryType); ok && decodable(dt) {
			fields[i].Type = dt.ValueType
		} else {
			continue
		}
		converted[i], some = true, true
	}
	if !some {
		return r
	}
	md := in.Metadata()
	return &dictionaryReader{RecordReader: r, schema: arrow.NewSchema(fields, &md), converted: converted,
		mem: mem, ctx: compute.WithAllocator(ctx, mem)}
}

// decodable reports whether decodeColumn unpacks dictionaries of type dt: arrow-go's cast
// does (for values that are not nested), or its take (bool values, which the cast does not).
func decodable(dt *arrow.DictionaryType) bool {
	return compute.CanCast(dt, dt.ValueType) || dt.ValueType.ID() == arrow.BOOL
}

// dictionaryEncodable reports whether a column of type from can be encoded as to: its
// values (from itself, or from's dictionary's) are to's value type or cast to it, and
// arrow-go builds dictionaries of that type (builderValueType).
func dictionaryEncodable(from arrow.DataType, to *arrow.DictionaryType) bool {
	if builderValueType(to.ValueType) == nil {
		return false
	}
	if dt, ok := from.(*arrow.DictionaryType); ok {
		if !decodable(dt) {
			return false
		}
		from = dt.ValueType
	}
	return arrow.TypeEqual(from, to.ValueType) || compute.CanCast(from, to.ValueType)
}

// decodeColumn returns the values of dictionary c, as decodeDictionaries says.
func decodeColumn(ctx context.Context, c arrow.Array) (arrow.Array, error) {
	d := c.(*array.Dictionary)
	if d.Dictionary().DataType().ID() == arrow.BOOL {
		return compute.TakeArray(ctx, d.Dictionary(), d.Indices())
	}
	return compute.CastArray(ctx, c, compute.SafeCastOptions(d.Dictionary().DataType()))
}

// encodeColumn returns c (a dictionary or plain values) as a dictionary of type to.
func encodeColumn(ctx context.Context, c arrow.Array, to *arrow.DictionaryType, mem memory.Allocator) (arrow.Array, error) {
	values := c
	values.Retain()
	defer func() { values.Release() }()
	if c.DataType().ID() == arrow.DICTIONARY {
		v, err := decodeColumn(ctx, c)
		if err != nil {
			return nil, err
		}
		values.Release()
		values = v
	}
	if !arrow.TypeEqual(values.DataType(), to.ValueType) {
		v, err := compute.CastArray(ctx, values, compute.SafeCastOptions(to.ValueType))
		if err != nil {
			return nil, err
		}
		values.Release()
		values = v
	}
	// arrow-go's dictionary builder has no large_utf8 or large_binary values: those are
	// built over utf8 (binary) and their dictionary cast after.
	bt := builderValueType(to.ValueType)
	if !arrow.TypeEqual(bt, to.ValueType) {
		v, err := compute.CastArray(ctx, values, compute.SafeCastOptions(bt))
		if err != nil {
			return nil, err
		}
		values.Release()
		values = v
	}
	b := array.NewDictionaryBuilder(mem, &arrow.DictionaryType{IndexType: to.IndexType, ValueType: bt, Ordered: to.Ordered})
	defer b.Release()
	if err := b.AppendArray(values); err != nil {
		return nil, err
	}
	built := b.NewDictionaryArray()
	if arrow.TypeEqual(bt, to.ValueType) {
		return built, nil
	}
	defer built.Release()
	dict, err := compute.CastArray(ctx, built.Dictionary(), compute.SafeCastOptions(to.ValueType))
	if err != nil {
		return nil, err
	}
	defer dict.Release()
	return array.NewDictionaryArray(to, built.Indices(), dict), nil
}

// builderValueType is the value type arrow-go's dictionary builder builds a dictionary of
// values t with (t itself, or utf8 and binary for their large forms); nil when it has
// none (bool, nested types).
func builderValueType(t arrow.DataType) arrow.DataType {
	switch t.ID() {
	case arrow.LARGE_STRING:
		return arrow.BinaryTypes.String
	case arrow.LARGE_BINARY:
		return arrow.BinaryTypes.Binary
	case arrow.BOOL, arrow.STRUCT, arrow.LIST, arrow.LARGE_LIST, arrow.FIXED_SIZE_LIST, arrow.MAP,
		arrow.DICTIONARY, arrow.EXTENSION, arrow.DENSE_UNION, arrow.SPARSE_UNION, arrow.RUN_END_ENCODED,
		arrow.STRING_VIEW, arrow.BINARY_VIEW, arrow.LIST_VIEW, arrow.LARGE_LIST_VIEW:
		return nil
	}
	return t
}

// dictionaryReader is decodeDictionaries' reader: the columns marked converted are
// turned into schema's type for that column (a dictionary type: encodeColumn; any other,
// the values: decodeColumn).
type dictionaryReader struct {
	array.RecordReader
	schema    *arrow.Schema
	converted []bool // by column
	mem       memory.Allocator
	ctx       context.Context
	cur       arrow.RecordBatch
	err       error
}

func (r *dictionaryReader) Schema() *arrow.Schema { return r.schema }
func (r *dictionaryReader) Next() bool {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	if r.err != nil || !r.RecordReader.Next() {
		return false
	}
	in := r.RecordReader.RecordBatch()
	cols := make([]arrow.Array, in.NumCols())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i, c := range in.Columns() {
		if !r.converted[i] {
			c.Retain()
			cols[i] = c
			continue
		}
		f := r.schema.Field(i)
		var out arrow.Array
		var err error
		if to, ok := f.Type.(*arrow.DictionaryType); ok {
			out, err = encodeColumn(r.ctx, c, to, r.mem)
		} else {
			out, err = decodeColumn(r.ctx, c)
		}
		if err != nil {
			r.err = fmt.Errorf("column %q: convert %s to %s: %w", f.Name, c.DataType(), f.Type, err)
			return false
		}
		cols[i] = out
	}
	r.cur = array.NewRecordBatch(r.schema, cols, in.NumRows())
	return true
}
func (r *dictionaryReader) RecordBatch() arrow.RecordBatch { return r.cur }
func (r *dictionaryReader) Record() arrow.RecordBatch      { return r.cur }
func (r *dictionaryReader) Err() error {
	if r.err != nil {
		return r.err
	}
	return r.RecordReader.Err()
}
func (r *dictionaryReader) Release() {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	r.RecordReader.Release()
}

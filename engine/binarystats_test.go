package engine

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestBinaryStatisticsThatAreNotUTF8: a binary column's min/max statistics are raw bytes;
// a manifest holding bytes that are not UTF-8 must still open (the decoder once refused
// them as invalid CBOR text, so the version could be committed but not read back).
func TestBinaryStatisticsThatAreNotUTF8(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	schema := arrow.NewSchema([]arrow.Field{{Name: "b", Type: arrow.BinaryTypes.Binary}}, nil)
	tbl, err := db.CreateTable(ctx, "bin", schema)
	if err != nil {
		t.Fatal(err)
	}
	bb := array.NewBinaryBuilder(memory.DefaultAllocator, arrow.BinaryTypes.Binary)
	bb.Append([]byte{0xff, 0x00})
	bb.Append([]byte{0x80})
	arr := bb.NewArray()
	bb.Release()
	rec := array.NewRecordBatch(schema, []arrow.Array{arr}, 2)
	arr.Release()
	defer rec.Release()
	if _, err := tbl.AppendRecord(ctx, rec); err != nil {
		t.Fatal(err)
	}
	h, err := db.OpenTable(ctx, "bin")
	if err != nil {
		t.Fatalf("open after appending non-UTF-8 binary values: %v", err)
	}
	if got := scanRecord(t, h, ScanOptions{}); got == nil || got.NumRows() != 2 {
		t.Fatalf("scan after reopening: %v", got)
	} else {
		got.Release()
	}
}

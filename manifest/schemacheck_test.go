package manifest

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// TestCheckSchemaIPCAcceptsSchemas: every kind of schema NewSchema writes passes the
// structure check and decodes (nested, dictionary, union, metadata).
func TestCheckSchemaIPCAcceptsSchemas(t *testing.T) {
	md := arrow.NewMetadata([]string{"k", "x"}, []string{"v", "y"})
	fields := []arrow.Field{
		{Name: "i", Type: arrow.PrimitiveTypes.Int64, Nullable: true, Metadata: md},
		{Name: "s", Type: arrow.BinaryTypes.String},
		{Name: "l", Type: arrow.ListOf(arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32}, arrow.Field{Name: "b", Type: arrow.ListOf(arrow.BinaryTypes.Binary)}))},
		{Name: "m", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Float64)},
		{Name: "d", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int16, ValueType: arrow.BinaryTypes.String}},
		{Name: "u", Type: arrow.SparseUnionOf([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int8}, {Name: "y", Type: arrow.BinaryTypes.String}}, []arrow.UnionTypeCode{3, 7})},
		{Name: "t", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
	}
	as := arrow.NewSchema(fields, &md)
	ids := make([]int32, len(fields))
	for i := range ids {
		ids[i] = int32(i)
	}
	s, err := NewSchema(as, ids)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkSchemaIPC(s.IPC); err != nil {
		t.Fatal(err)
	}
	back := Schema{IPC: s.IPC, FieldIDs: s.FieldIDs}
	got, err := back.Arrow()
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(as) {
		t.Fatalf("schema decoded as %v, want %v", got, as)
	}

	// Damaged copies of it fail with ErrCorrupt or decode; never panic or allocate by a
	// damaged length (a failure here is an out-of-memory crash).
	seed := codecSeed(t)
	r := rand.New(rand.NewPCG(seed, 6))
	for range 20000 {
		b := append([]byte(nil), s.IPC...)
		for range 1 + r.IntN(3) {
			if r.IntN(2) == 0 {
				b[r.IntN(len(b))] ^= byte(1 << r.IntN(8))
			} else {
				b[r.IntN(len(b))] = byte(r.IntN(256))
			}
		}
		if r.IntN(8) == 0 {
			b = b[:r.IntN(len(b))]
		}
		d := Schema{IPC: b, FieldIDs: s.FieldIDs}
		if _, err := d.Arrow(); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%v is not ErrCorrupt", err)
		}
	}
}

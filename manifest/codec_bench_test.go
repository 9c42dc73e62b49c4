package manifest

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/shale-db/shale/internal/fragment"
)

// benchManifest is a manifest like the one a table of n 100-row appends of the flights
// data has: one data file per fragment, five columns (a date timestamp, two int64s, two
// short strings) with whole-file statistics, one batch with its checksums.
func benchManifest(t testing.TB, n int) *Manifest {
	t.Helper()
	as := arrow.NewSchema([]arrow.Field{
		{Name: "date", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true},
		{Name: "delay", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "distance", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "origin", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "destination", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	schema, err := NewSchema(as, []int32{0, 1, 2, 3, 4})
	if err != nil {
		t.Fatal(err)
	}
	m := &Manifest{Table: "hist", Version: uint64(n) + 1, Schema: schema, NextFragmentID: uint32(n),
		NextFieldID: 5, Config: map[string]string{}, TxnKey: "hist/_txn/1001-01M8TK3WYN48VPM6BVMD402GSY.txn",
		Committed: 1796188795861619364, Incarnation: "01M8TK3KW3VJ2PVXJR50BJKJHF", IncarnationSince: 1,
		Txn: Transaction{ID: "01M8TK3WYN48VPM6BVMD402GSY", ReadVersion: uint64(n), Timestamp: 1796188795861619364,
			Op: Operation{Kind: OpAppend, NewFragmentIDs: []uint32{uint32(n - 1)}}}}
	str := func(k int) fragment.Value {
		return fragment.Value{Kind: fragment.KindString, Str: string([]byte{'A' + byte(k%26), 'N' + byte(k%7), 'C' + byte(k%11)})}
	}
	for i := range n {
		i64 := func(v int64) fragment.Value { return fragment.Value{Kind: fragment.KindInt, Int: v} }
		stats := []fragment.ColumnStats{
			{FieldID: 0, HasMinMax: true, HasMin: true, HasMax: true, Min: i64(978307260000000 + int64(i)*1000), Max: i64(978311700000000 + int64(i)*1000)},
			{FieldID: 1, HasMinMax: true, HasMin: true, HasMax: true, Min: i64(-23 - int64(i%10)), Max: i64(264 + int64(i%100))},
			{FieldID: 2, HasMinMax: true, HasMin: true, HasMax: true, Min: i64(75), Max: i64(2399 + int64(i))},
			{FieldID: 3, HasMinMax: true, HasMin: true, HasMax: true, Min: str(i), Max: str(i + 5)},
			{FieldID: 4, HasMinMax: true, HasMin: true, HasMax: true, Min: str(i + 1), Max: str(i + 9)},
		}
		m.Fragments = append(m.Fragments, Fragment{ID: uint32(i), PhysicalRows: 100, Files: []fragment.DataFile{{
			Key:  fmt.Sprintf("hist/data/01M8TK3KW3VJ2PVXJR50BJKJHF/01M8TK3KW4WPSVKKXG78J%05d.arrow", i),
			Size: 3338 + int64(i%50), Rows: 100, FieldIDs: []int32{0, 1, 2, 3, 4}, Compression: fragment.CompressionZstd,
			Stats: stats,
			Batches: []fragment.BatchInfo{{Rows: 100, CRC32C: 3972332298 - uint32(i), MetaCRC32C: 2873928174 + uint32(i),
				ColumnCRC32C: []uint32{3842701187, 1012640911 + uint32(i), 2888421245, 2303532425, 2093628363 - uint32(i)}}},
			FooterCRC32C: 11197625 + uint32(i),
		}}})
	}
	return m
}

// reflectionManifest is m as a value of a type built from Manifest's exported fields with
// the record types' codec methods taken away: the reflection codec encodes and decodes it
// exactly as it did Manifest before those methods existed (the reference, and the
// "before" of BenchmarkManifestCodec).
var reflectionManifestType = func() reflect.Type {
	mt := reflect.TypeFor[Manifest]()
	var fields []reflect.StructField
	for i := range mt.NumField() {
		f := mt.Field(i)
		if !f.IsExported() {
			continue
		}
		switch f.Type {
		case reflect.TypeFor[[]Fragment]():
			f.Type = reflect.TypeFor[[]fragmentNoCodec]()
		case reflect.TypeFor[[]IdempotencyRecord]():
			f.Type = reflect.TypeFor[[]idempotencyNoCodec]()
		}
		f.Index, f.Offset = nil, 0
		fields = append(fields, f)
	}
	return reflect.StructOf(fields)
}()

func toReflection(m *Manifest) any {
	out := reflect.New(reflectionManifestType)
	src := reflect.ValueOf(m).Elem()
	for i := range reflectionManifestType.NumField() {
		f := reflectionManifestType.Field(i)
		sv := src.FieldByName(f.Name)
		switch f.Name {
		case "Fragments":
			s := m.Fragments
			out.Elem().Field(i).Set(reflect.ValueOf(unsafe.Slice((*fragmentNoCodec)(unsafe.SliceData(s)), len(s))))
		case "Idempotency":
			s := m.Idempotency
			out.Elem().Field(i).Set(reflect.ValueOf(unsafe.Slice((*idempotencyNoCodec)(unsafe.SliceData(s)), len(s))))
		default:
			out.Elem().Field(i).Set(sv)
		}
	}
	return out.Interface()
}

// TestManifestBytesMatchReflection: a whole manifest (fragments with deletion vectors,
// idempotency records) encodes to the bytes the reflection codec writes for it.
func TestManifestBytesMatchReflection(t *testing.T) {
	m := benchManifest(t, 50)
	m.Fragments[3].Deletion = &DeletionFile{Key: "hist/_deletions/x/3-abc.dv", Size: 40, Deleted: 7}
	m.Idempotency = []IdempotencyRecord{{Key: "k1", Version: 3, TxnID: "t1"}, {Key: "k2", Version: 9, TxnID: "t2"}}
	got, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	want, err := frame(magicManifest, toReflection(m))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("manifest bytes differ from the reflection codec's (%d vs %d bytes)", len(got), len(want))
	}
	back, err := DecodeManifest(m.Table, m.Version, m.Key(), got)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Fragments, m.Fragments) || !reflect.DeepEqual(back.Idempotency, m.Idempotency) {
		t.Fatal("round trip changed the fragments or idempotency records")
	}
}

// BenchmarkManifestCodec encodes and decodes the manifest of a table of 1,000 appends:
// "codec" is what Encode and DecodeManifest do, "reflection" the reflection codec alone
// on the same manifest (the encoding before the records' codec methods).
func BenchmarkManifestCodec(b *testing.B) {
	m := benchManifest(b, 1000)
	raw, err := m.Encode()
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%d fragments, %d bytes", len(m.Fragments), len(raw))
	ref := toReflection(m)
	body := raw[10 : len(raw)-4]
	b.Run("encode/codec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := m.Encode(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode/reflection", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := frame(magicManifest, ref); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/codec", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeManifest(m.Table, m.Version, m.Key(), raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/reflection", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v := reflect.New(reflectionManifestType).Interface()
			if err := cborDec.Unmarshal(body, v); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestManifestDecodeNonCanonical: bodies the fast decoder does not take (a widened map
// head, an unknown key, a field the reflection decoder refuses) decode as the reflection
// decoder decodes them.
func TestManifestDecodeNonCanonical(t *testing.T) {
	m := benchManifest(t, 5)
	raw, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	body := raw[10 : len(raw)-4]
	widened := append([]byte{body[0]&0xe0 | 24, body[0] & 0x1f}, body[1:]...)
	extra := append([]byte{body[0] + 1}, body[1:]...)
	extra = append(extra, appendText(nil, "Unknown")...)
	extra = append(extra, 0x01)
	badField := bytes.Replace(body, appendText(nil, "Version"), appendText(nil, "Versiox"), 1)
	for _, tc := range []struct {
		name string
		body []byte
		ok   bool
	}{{"widened", widened, true}, {"unknown key", extra, true}, {"misnamed version", badField, true}, {"trailing byte", append(bytes.Clone(body), 0x00), false}} {
		var fast, slow Manifest
		err := decodeManifestBody(tc.body, &fast)
		refErr := cborDec.Unmarshal(tc.body, (*manifestNoCodec)(&slow))
		if (err == nil) != tc.ok || (refErr == nil) != tc.ok {
			t.Fatalf("%s: errors %v, reflection %v", tc.name, err, refErr)
		}
		if tc.ok && !reflect.DeepEqual(fast.Fragments, slow.Fragments) || fast.Version != slow.Version {
			t.Fatalf("%s: decoded differently from the reflection decoder", tc.name)
		}
	}
}

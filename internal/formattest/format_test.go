package formattest

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/fxamacker/cbor/v2"

	"github.com/shale-db/shale/coord"
	"github.com/shale-db/shale/demand"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/index"
	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
	"github.com/shale-db/shale/recovery"
	"github.com/shale-db/shale/store"
	"github.com/shale-db/shale/wal"
)

// docKey is one row of a key table in docs/format.md.
type docKey struct {
	key, field string
}

// formatDoc is docs/format.md: its text and its key tables, by the name in the
// "<!-- keys: NAME [json] -->" comment before each.
type formatDoc struct {
	text   string
	tables map[string][]docKey
}

func readFormatDoc(t *testing.T) formatDoc {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "format.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := formatDoc{text: string(b), tables: map[string][]docKey{}}
	marker := regexp.MustCompile(`^<!-- keys: ([A-Za-z.]+)( json)? -->$`)
	tick := regexp.MustCompile("^`([^`]+)`$")
	lines := strings.Split(doc.text, "\n")
	for i := 0; i < len(lines); i++ {
		m := marker.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		name := m[1]
		if _, dup := doc.tables[name]; dup {
			t.Fatalf("docs/format.md: two key tables for %s", name)
		}
		header := strings.Split(lines[i+1], "|")
		withField := len(header) > 2 && strings.TrimSpace(header[2]) == "field"
		var keys []docKey
		for j := i + 3; j < len(lines) && strings.HasPrefix(lines[j], "|"); j++ {
			cells := strings.Split(lines[j], "|")
			km := tick.FindStringSubmatch(strings.TrimSpace(cells[1]))
			if km == nil {
				t.Fatalf("docs/format.md: %s: key cell %q is not in backquotes", name, cells[1])
			}
			k := docKey{key: km[1]}
			if withField {
				k.field = strings.TrimSpace(cells[2])
			}
			keys = append(keys, k)
		}
		if len(keys) == 0 {
			t.Fatalf("docs/format.md: the key table for %s is empty", name)
		}
		doc.tables[name] = keys
	}
	return doc
}

func (d formatDoc) keySet(t *testing.T, name string) map[string]string {
	t.Helper()
	rows, ok := d.tables[name]
	if !ok {
		t.Fatalf("docs/format.md has no key table for %s", name)
	}
	out := map[string]string{}
	for _, r := range rows {
		out[r.key] = r.field
	}
	return out
}

// cborTypes are the Go types whose CBOR encoding docs/format.md documents, by the name
// its key tables use.
var cborTypes = map[string]reflect.Type{
	"manifest.Manifest":          reflect.TypeFor[manifest.Manifest](),
	"manifest.Schema":            reflect.TypeFor[manifest.Schema](),
	"manifest.Fragment":          reflect.TypeFor[manifest.Fragment](),
	"manifest.DeletionFile":      reflect.TypeFor[manifest.DeletionFile](),
	"manifest.IdempotencyRecord": reflect.TypeFor[manifest.IdempotencyRecord](),
	"manifest.Index":             reflect.TypeFor[manifest.Index](),
	"manifest.Transaction":       reflect.TypeFor[manifest.Transaction](),
	"manifest.Operation":         reflect.TypeFor[manifest.Operation](),
	"manifest.DeletionUpdate":    reflect.TypeFor[manifest.DeletionUpdate](),
	"manifest.SchemaDelta":       reflect.TypeFor[manifest.SchemaDelta](),
	"manifest.RewriteGroup":      reflect.TypeFor[manifest.RewriteGroup](),
	"manifest.GroupRef":          reflect.TypeFor[manifest.GroupRef](),
	"manifest.WALMerge":          reflect.TypeFor[manifest.WALMerge](),
	"wal.ShardManifest":          reflect.TypeFor[wal.ShardManifest](),
	"wal.Generation":             reflect.TypeFor[wal.Generation](),
	"wal.Position":               reflect.TypeFor[wal.Position](),
	"fragment.DataFile":          reflect.TypeFor[fragment.DataFile](),
	"fragment.BatchInfo":         reflect.TypeFor[fragment.BatchInfo](),
	"fragment.ColumnStats":       reflect.TypeFor[fragment.ColumnStats](),
	"fragment.Value":             reflect.TypeFor[fragment.Value](),
}

// jsonTypes are the Go types whose JSON encoding docs/format.md documents.
var jsonTypes = map[string]reflect.Type{
	"recovery.Sidecar": reflect.TypeFor[recovery.Sidecar](),
	"recovery.Attempt": reflect.TypeFor[recovery.Attempt](),
	"catalog.Hold":     reflect.TypeFor[catalog.Hold](),
	"demand.Event":     reflect.TypeFor[demand.Event](),
}

// fieldKeys returns the encoded key of each exported field of struct type st under the
// struct tag tag ("cbor" or "json"): the tag's name (an integer with keyasint), else the
// field name; "-" fields are skipped. The map is key → Go field name.
func fieldKeys(st reflect.Type, tag string) map[string]string {
	out := map[string]string{}
	for i := range st.NumField() {
		f := st.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get(tag), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		out[name] = f.Name
	}
	return out
}

func nameOf(types map[string]reflect.Type, t reflect.Type) string {
	for n, tt := range types {
		if tt == t {
			return n
		}
	}
	return ""
}

// structsIn lists the struct types reachable from t through fields, slices, arrays,
// pointers and map values.
func structsIn(t reflect.Type, seen map[reflect.Type]bool) {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		structsIn(t.Elem(), seen)
	case reflect.Struct:
		if seen[t] {
			return
		}
		seen[t] = true
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() {
				structsIn(f.Type, seen)
			}
		}
	}
}

// TestFormatDocKeysAreTheCodesKeys: every key table of docs/format.md lists exactly the
// keys the Go type encodes (CBOR or JSON; integer keys with their field names), and every
// struct type a manifest or transaction encodes has a table.
func TestFormatDocKeysAreTheCodesKeys(t *testing.T) {
	doc := readFormatDoc(t)
	check := func(name string, want map[string]string) {
		got := doc.keySet(t, name)
		for k, field := range want {
			f, ok := got[k]
			switch {
			case !ok:
				t.Errorf("%s: key %q (field %s) is not documented", name, k, field)
			case f != "" && f != field:
				t.Errorf("%s: key %q is documented as field %s, the code has %s", name, k, f, field)
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("%s: documented key %q is not in the code", name, k)
			}
		}
	}
	for name, typ := range cborTypes {
		check(name, fieldKeys(typ, "cbor"))
	}
	for name, typ := range jsonTypes {
		check(name, fieldKeys(typ, "json"))
	}
	seen := map[reflect.Type]bool{}
	structsIn(reflect.TypeFor[manifest.Manifest](), seen)
	structsIn(reflect.TypeFor[manifest.Transaction](), seen)
	for st := range seen {
		if nameOf(cborTypes, st) == "" {
			t.Errorf("%s is part of a manifest or transaction but has no key table in docs/format.md", st)
		}
	}
	for name := range doc.tables {
		_, c := cborTypes[name]
		_, j := jsonTypes[name]
		if !c && !j && !slices.Contains([]string{"txnRecord", "tombstone", "pointer"}, name) {
			t.Errorf("docs/format.md documents %s, which this test does not check", name)
		}
	}
	// The constants the text states.
	for _, c := range []struct {
		ok   bool
		what string
	}{
		{manifest.FormatVersion == 2 && manifest.MinFormatVersion == 2 && strings.Contains(doc.text, "(currently 2; readers accept 2)"), "frame format version"},
		{fragment.DVFormatVersion == 1 && strings.Contains(doc.text, "format version (1)"), "deletion vector format version"},
		{fragment.FieldIDsMetadataKey == "shale:field_ids" && strings.Contains(doc.text, "`shale:field_ids`"), "field id metadata key"},
		{fragment.DefaultMaxRowsPerBatch == 65536 && fragment.DefaultMaxRowsPerFile == 1048576 && strings.Contains(doc.text, "up to 65,536 rows, files up to 1,048,576 rows"), "batch and file sizes"},
		{fragment.MaxStatBytes == 64 && strings.Contains(doc.text, "cut to 64 bytes"), "statistics truncation"},
		{catalog.PointerFormat == 1 && recovery.Format == 1, "pointer and sidecar formats"},
		{demand.CurrentVersion == 1 && demand.SealedTimesCap == 64 && strings.Contains(doc.text, "at most 64 entries"), "demand record version and time map cap"},
		{manifest.ManifestKey("t", 7) == "t/_versions/18446744073709551608.manifest" && strings.Contains(doc.text, `"manifest_key":"t/_versions/18446744073709551608.manifest"`), "manifest key of the pointer example"},
		{recovery.Key("x") == "_recovery/x.json" && manifest.TxnKey("t", 3, "X") == "t/_txn/3-X.txn", "sidecar and transaction record keys"},
		{index.Dir("t", "TX", "U") == "t/_indices/TX/U", "index directory"},
		{strings.Contains(doc.text, "_shale/store-id") && store.TempDir == ".shale-tmp" && strings.Contains(doc.text, ".shale-tmp/"), "store-level keys"},
	} {
		if !c.ok {
			t.Errorf("docs/format.md disagrees with the code on the %s", c.what)
		}
	}
}

// frameBody checks a framed object as docs/format.md §2 describes it (magic, big-endian
// format and length, CRC32C of everything before it) and returns the CBOR body.
func frameBody(t *testing.T, key string, b []byte, magic string) []byte {
	t.Helper()
	if len(b) < 14 || string(b[:4]) != magic {
		t.Fatalf("%s: want magic %s, got %q", key, magic, b[:min(4, len(b))])
	}
	if f := binary.BigEndian.Uint16(b[4:6]); f != manifest.FormatVersion {
		t.Errorf("%s: format %d", key, f)
	}
	n := binary.BigEndian.Uint32(b[6:10])
	if int(n)+14 != len(b) {
		t.Fatalf("%s: length %d for a %d-byte object", key, n, len(b))
	}
	if got, want := crc32.Checksum(b[:len(b)-4], crc32.MakeTable(crc32.Castagnoli)), binary.BigEndian.Uint32(b[len(b)-4:]); got != want {
		t.Errorf("%s: CRC32C %08x, stored %08x", key, got, want)
	}
	return b[10 : 10+n]
}

// decodeCBOR decodes a body generically (maps with text or integer keys).
func decodeCBOR(t *testing.T, key string, body []byte) any {
	t.Helper()
	var v any
	if err := cbor.Unmarshal(body, &v); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return v
}

// checkKeys walks a generically decoded object along Go type typ and reports every map
// key that is not documented for the struct type at that place; it returns the keys seen
// at the top level.
func checkKeys(t *testing.T, doc formatDoc, where string, v any, typ reflect.Type, docName string) map[string]bool {
	t.Helper()
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	top := map[string]bool{}
	switch typ.Kind() {
	case reflect.Struct:
		m, ok := v.(map[any]any)
		if !ok {
			if v != nil && typ != reflect.TypeFor[manifest.Schema]() {
				t.Errorf("%s: a %T where docs/format.md describes a map (%s)", where, v, typ)
			}
			return top
		}
		name := docName
		if name == "" {
			name = nameOf(cborTypes, typ)
		}
		documented := doc.keySet(t, name)
		codeKeys := fieldKeys(typ, "cbor")
		for k, val := range m {
			ks := fmt.Sprint(k)
			top[ks] = true
			if _, ok := documented[ks]; !ok {
				t.Errorf("%s: key %q of %s is not in docs/format.md", where, ks, name)
			}
			field, ok := codeKeys[ks]
			if !ok {
				continue
			}
			sf, _ := typ.FieldByName(field)
			checkKeys(t, doc, where+"."+field, val, sf.Type, "")
		}
	case reflect.Slice, reflect.Array:
		if typ.Elem().Kind() == reflect.Uint8 {
			return top
		}
		if l, ok := v.([]any); ok {
			for _, e := range l {
				checkKeys(t, doc, where+"[]", e, typ.Elem(), "")
			}
		}
	case reflect.Map:
		if m, ok := v.(map[any]any); ok {
			for _, e := range m {
				checkKeys(t, doc, where+"{}", e, typ.Elem(), "")
			}
		}
	}
	return top
}

// TestFormatDocDescribesTheObjectsATableWrites builds a table (appends, a delete, an
// update, a BTree and a zone map, an expired version, a dropped table) and reads every
// object back as docs/format.md says a tool outside Shale would: the layout, the frames,
// the CBOR keys of real manifests, transaction records and tombstones, the deletion
// vector envelope, data files read with an Arrow IPC reader (field id metadata; deleted
// rows still in them), the store id and the etcd pointer.
func TestFormatDocDescribesTheObjectsATableWrites(t *testing.T) {
	ctx := context.Background()
	doc := readFormatDoc(t)
	etcd, err := coord.StartEmbedded(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	cli, err := coord.Connect(ctx, coord.Config{Endpoints: etcd.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	s, err := store.Open(ctx, "mem://formattest", store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	db, err := engine.Open(ctx, s, engine.Options{Etcd: cli.Etcd()})
	if err != nil {
		t.Fatal(err)
	}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	tbl, err := db.CreateTable(ctx, "fmt", schema) // version 1
	if err != nil {
		t.Fatal(err)
	}
	for from := int64(0); from < 200; from += 100 { // versions 2, 3
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		for i := from; i < from+100; i++ {
			b.Field(0).(*array.Int64Builder).Append(i)
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("n%d", i))
		}
		rec := b.NewRecordBatch()
		_, err := tbl.AppendRecord(ctx, rec, engine.WithIdempotencyKey(fmt.Sprint("batch-", from)))
		rec.Release()
		b.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	steps := []func() error{
		func() error { _, err := tbl.Delete(ctx, "id % 3 = 0"); return err },                                // 4
		func() error { _, err := tbl.Update(ctx, map[string]string{"name": "'x'"}, "id < 10"); return err }, // 5
		func() error { _, err := tbl.CreateIndex(ctx, engine.IndexSpec{Columns: []string{"id"}}); return err },
		func() error {
			_, err := tbl.CreateIndex(ctx, engine.IndexSpec{Kind: index.KindZoneMap, Columns: []string{"id", "name"}})
			return err
		},
	}
	for _, step := range steps {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	if err := tbl.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	head := tbl.Manifest()
	v1, err := manifest.Load(ctx, s, "fmt", 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := manifest.Expire(ctx, s, v1); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateTable(ctx, "gone", schema); err != nil {
		t.Fatal(err)
	}
	if _, err := db.DropTable(ctx, "gone"); err != nil {
		t.Fatal(err)
	}

	// The layout of §1.
	layout := map[string]*regexp.Regexp{
		"store id":        regexp.MustCompile(`^_shale/store-id$`),
		"manifest":        regexp.MustCompile(`^[a-z]+/_versions/\d{20}\.manifest$`),
		"transaction":     regexp.MustCompile(`^[a-z]+/_txn/\d+-[0-9A-Z]{26}\.txn$`),
		"data file":       regexp.MustCompile(`^fmt/data/[0-9A-Z]{26}/[0-9A-Z]{26}\.arrow$`),
		"deletion vector": regexp.MustCompile(`^fmt/_deletions/[0-9A-Z]{26}/\d+-[0-9a-f]{16}\.dv$`),
		"btree lookup":    regexp.MustCompile(`^fmt/_indices/[0-9A-Z]{26}/[^/]+/lookup\.btree$`),
		"btree pages":     regexp.MustCompile(`^fmt/_indices/[0-9A-Z]{26}/[^/]+/[0-9A-Z]{26}\.arrow$`),
		"zone map":        regexp.MustCompile(`^fmt/_indices/[0-9A-Z]{26}/[^/]+/zones\.zonemap$`),
	}
	objs, err := s.List(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string][]string{}
	for _, o := range objs {
		matched := ""
		for name, re := range layout {
			if re.MatchString(o.Key) {
				matched = name
			}
		}
		if matched == "" {
			t.Errorf("object %s is not in the layout docs/format.md §1 describes", o.Key)
			continue
		}
		count[matched] = append(count[matched], o.Key)
	}
	for name := range layout {
		if len(count[name]) == 0 {
			t.Errorf("no %s object was written (keys: %v)", name, count)
		}
	}
	get := func(key string) []byte {
		b, err := s.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if id := string(get("_shale/store-id")); !regexp.MustCompile(`^[0-9A-Z]{26}$`).MatchString(id) {
		t.Errorf("store id %q is not a ULID", id)
	}

	// §2-4: manifests, tombstones (the expired version 1, the drop marker stays a
	// manifest) and transaction records.
	manifestType := reflect.TypeFor[manifest.Manifest]()
	sawTombstone := false
	for _, key := range count["manifest"] {
		b := get(key)
		if string(b[:4]) == "SHXV" {
			sawTombstone = true
			top := checkKeys(t, doc, key, decodeCBOR(t, key, frameBody(t, key, b, "SHXV")), reflect.TypeFor[struct {
				Table     string                `cbor:"1,keyasint"`
				Version   uint64                `cbor:"2,keyasint"`
				TxnID     string                `cbor:"3,keyasint"`
				ExpiredAt int64                 `cbor:"4,keyasint"`
				Txn       *manifest.Transaction `cbor:"5,keyasint"`
			}](), "tombstone")
			if len(top) != len(doc.tables["tombstone"]) {
				t.Errorf("%s: tombstone keys %v, docs/format.md lists %v", key, top, doc.tables["tombstone"])
			}
			continue
		}
		top := checkKeys(t, doc, key, decodeCBOR(t, key, frameBody(t, key, b, "SHMF")), manifestType, "")
		for _, k := range []string{"Table", "Version", "Schema", "Fragments", "NextFragmentID", "NextFieldID", "Config", "Txn", "TxnKey", "Committed", "Incarnation", "IncarnationSince"} {
			if !top[k] {
				t.Errorf("%s: manifest lacks %q", key, k)
			}
		}
	}
	if !sawTombstone {
		t.Error("no tombstone read")
	}
	for _, key := range count["transaction"] {
		top := checkKeys(t, doc, key, decodeCBOR(t, key, frameBody(t, key, get(key), "SHTX")), reflect.TypeFor[struct {
			Table   string
			Version uint64
			Txn     manifest.Transaction
		}](), "txnRecord")
		if len(top) != 3 {
			t.Errorf("%s: keys %v", key, top)
		}
	}
	frameBody(t, count["btree lookup"][0], get(count["btree lookup"][0]), "SHBT")
	frameBody(t, count["zone map"][0], get(count["zone map"][0]), "SHZM")
	for _, magic := range []string{"`SHMF` | manifest", "`SHXV` | tombstone", "`SHTX` | transaction record", "`SHBT` | BTree lookup", "`SHZM` | zone map"} {
		if !strings.Contains(doc.text, magic) {
			t.Errorf("docs/format.md's magic table lacks %q", magic)
		}
	}

	// §5 and §6: every fragment of HEAD read from its files and deletion vector by hand.
	var physical, live int64
	for _, f := range head.Fragments {
		var deleted *roaring.Bitmap
		if f.Deletion != nil {
			b := get(f.Deletion.Key)
			le := binary.LittleEndian
			n := le.Uint64(b[16:24])
			switch {
			case string(b[:4]) != "SHDV" || le.Uint16(b[4:6]) != 1 || le.Uint16(b[6:8]) != 0:
				t.Fatalf("%s: header % x", f.Deletion.Key, b[:8])
			case int(n)+28 != len(b):
				t.Fatalf("%s: payload length %d for %d bytes", f.Deletion.Key, n, len(b))
			case crc32.Checksum(b[:len(b)-4], crc32.MakeTable(crc32.Castagnoli)) != le.Uint32(b[len(b)-4:]):
				t.Fatalf("%s: CRC32C", f.Deletion.Key)
			}
			deleted = roaring.New()
			if _, err := deleted.ReadFrom(bytes.NewReader(b[24 : 24+n])); err != nil {
				t.Fatal(err)
			}
			if deleted.GetCardinality() != le.Uint64(b[8:16]) || int64(deleted.GetCardinality()) != f.Deletion.Deleted {
				t.Fatalf("%s: cardinality", f.Deletion.Key)
			}
		}
		for _, df := range f.Files {
			fr, err := ipc.NewFileReader(bytes.NewReader(get(df.Key)))
			if err != nil {
				t.Fatalf("%s: not an Arrow IPC file: %v", df.Key, err)
			}
			ids := make([]string, len(df.FieldIDs))
			for i, id := range df.FieldIDs {
				ids[i] = strconv.Itoa(int(id))
			}
			if v, ok := fr.Schema().Metadata().GetValue("shale:field_ids"); !ok || v != strings.Join(ids, ",") {
				t.Errorf("%s: shale:field_ids %q, DataFile.FieldIDs %v", df.Key, v, df.FieldIDs)
			}
			var rows int64
			for i := range fr.NumRecords() {
				rec, err := fr.RecordBatchAt(i)
				if err != nil {
					t.Fatal(err)
				}
				rows += rec.NumRows()
				rec.Release()
			}
			fr.Close()
			if rows != f.PhysicalRows {
				t.Errorf("%s: %d rows, fragment %d has %d physical rows", df.Key, rows, f.ID, f.PhysicalRows)
			}
		}
		physical += f.PhysicalRows
		live += f.PhysicalRows
		if deleted != nil {
			live -= int64(deleted.GetCardinality())
		}
	}
	if want := int64(200 - 67); live != want || live != head.LiveRows() {
		t.Errorf("live rows from the files and deletion vectors: %d, want %d (manifest %d)", live, want, head.LiveRows())
	}
	if physical <= live {
		t.Errorf("data files hold %d rows, %d live: the deleted rows should still be in them", physical, live)
	}

	// §9: the published pointer in etcd.
	storeID := string(get("_shale/store-id"))
	resp, err := cli.Etcd().Get(ctx, "/shale/stores/"+storeID+"/tables/fmt")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("pointer: %v, %v", resp, err)
	}
	var ptr map[string]any
	if err := json.Unmarshal(resp.Kvs[0].Value, &ptr); err != nil {
		t.Fatal(err)
	}
	documented := doc.keySet(t, "pointer")
	var keys []string
	for k := range ptr {
		keys = append(keys, k)
		if _, ok := documented[k]; !ok {
			t.Errorf("pointer key %q is not in docs/format.md", k)
		}
	}
	sort.Strings(keys)
	if len(keys) != len(documented) {
		t.Errorf("pointer keys %v, docs/format.md lists %v", keys, doc.tables["pointer"])
	}
	headBytes := get(head.Key())
	if ptr["manifest_key"] != head.Key() || ptr["version"] != float64(head.Version) ||
		ptr["checksum"] != float64(crc32.Checksum(headBytes, crc32.MakeTable(crc32.Castagnoli))) {
		t.Errorf("pointer %v does not name HEAD %s (version %d)", ptr, head.Key(), head.Version)
	}
	if resp, err := cli.Etcd().Get(ctx, "/shale/stores/"+storeID+"/tables/gone"); err != nil || len(resp.Kvs) != 0 {
		t.Errorf("a dropped table keeps a pointer: %v, %v", resp, err)
	}
}

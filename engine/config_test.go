package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/shale-db/shale/manifest"
)

func TestConfigRoundTrip(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	tbl, err := db.CreateTable(ctx, "cfg", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	if c := tbl.Config(); c == nil || len(c) != 0 {
		t.Fatalf("new table config %v", c)
	}
	res, err := tbl.UpdateConfig(ctx, map[string]string{"a": "1", "b": "2", "c": ""}, nil)
	if err != nil || res.Version != 2 || !res.Published {
		t.Fatalf("UpdateConfig: %+v %v", res, err)
	}
	want := map[string]string{"a": "1", "b": "2", "c": ""}
	if !maps.Equal(tbl.Config(), want) || tbl.Manifest().Txn.Op.Kind != manifest.OpUpdateConfig {
		t.Fatalf("config %v, transaction %s", tbl.Config(), tbl.Manifest().Txn.Op.Kind)
	}
	tbl.Config()["a"] = "changed" // a copy
	// Data operations keep the configuration.
	appendRange(t, tbl, 0, 10)
	res, err = tbl.UpdateConfig(ctx, map[string]string{"a": "3"}, []string{"b", "zz", "b"})
	if err != nil || res.Version != 4 {
		t.Fatalf("UpdateConfig: %+v %v", res, err)
	}
	if op := tbl.Manifest().Txn.Op; fmt.Sprint(op.ConfigDeletes) != "[b zz]" {
		t.Fatalf("deletes %v", op.ConfigDeletes)
	}
	want = map[string]string{"a": "3", "c": ""}
	reopened, err := db.OpenTable(ctx, "cfg")
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(tbl.Config(), want) || !maps.Equal(reopened.Config(), want) {
		t.Fatalf("config %v, reopened %v, want %v", tbl.Config(), reopened.Config(), want)
	}
	old, _ := tbl.Checkout(ctx, 3)
	if !maps.Equal(old.Config(), map[string]string{"a": "1", "b": "2", "c": ""}) {
		t.Fatalf("version 3 config %v", old.Config())
	}
	// Nothing to change commits nothing; bad changes are refused.
	if res, err := tbl.UpdateConfig(ctx, nil, nil); err != nil || res.Version != 4 {
		t.Fatalf("empty change: %+v %v", res, err)
	}
	for _, bad := range []struct {
		up  map[string]string
		del []string
	}{{map[string]string{"": "x"}, nil}, {nil, []string{""}}, {map[string]string{"a": "1"}, []string{"a"}}} {
		if _, err := tbl.UpdateConfig(ctx, bad.up, bad.del); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("UpdateConfig(%v, %v): %v", bad.up, bad.del, err)
		}
	}
	if _, err := old.UpdateConfig(ctx, map[string]string{"x": "1"}, nil); !errors.Is(err, ErrReadOnly) {
		t.Errorf("read-only: %v", err)
	}
	if head, _ := manifest.Head(ctx, db.Store(), "cfg"); head != 4 {
		t.Fatalf("HEAD %d", head)
	}
}

// TestConfigConflicts: concurrent changes to different keys (or to data) both commit;
// a concurrent change to the same key — set or deleted — is a retryable conflict
// returned to the caller, naming both transactions and the key.
func TestConfigConflicts(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	if _, err := db.CreateTable(ctx, "cc", kvSchema); err != nil {
		t.Fatal(err)
	}
	h1, h2 := twoHandles(t, db, "cc")
	h3, h4 := twoHandles(t, db, "cc")
	if _, err := h1.UpdateConfig(ctx, map[string]string{"k": "1", "j": "1"}, nil); err != nil {
		t.Fatal(err)
	}
	for name, h := range map[string]func() (CommitResult, error){
		"set":    func() (CommitResult, error) { return h2.UpdateConfig(ctx, map[string]string{"k": "2"}, nil) },
		"delete": func() (CommitResult, error) { return h3.UpdateConfig(ctx, nil, []string{"k"}) },
	} {
		res, err := h()
		var ce *manifest.ConflictError
		if !errors.Is(err, manifest.ErrRetryable) || !errors.As(err, &ce) || ce.Theirs.Op.Kind != manifest.OpUpdateConfig ||
			!strings.Contains(err.Error(), "[k]") {
			t.Fatalf("%s of the same key: %+v %v, want a retryable conflict naming key k", name, res, err)
		}
	}
	if h2.Version() != 1 || h3.Version() != 1 {
		t.Fatalf("handles moved to %d, %d after a conflict", h2.Version(), h3.Version())
	}
	// Other keys merge; a data change in between does not conflict either.
	appendRange(t, h4, 0, 5)
	res, err := h2.UpdateConfig(ctx, map[string]string{"other": "x"}, nil)
	if err != nil || len(res.Rebased) != 2 {
		t.Fatalf("other key: %+v %v", res, err)
	}
	// After a refresh the caller can retry the conflicting change.
	if err := h3.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := h3.UpdateConfig(ctx, nil, []string{"k"}); err != nil {
		t.Fatal(err)
	}
	head, _ := db.OpenTable(ctx, "cc")
	if want := map[string]string{"j": "1", "other": "x"}; !maps.Equal(head.Config(), want) || mustCount(t, head, "") != 5 {
		t.Fatalf("final config %v, rows %d", head.Config(), mustCount(t, head, ""))
	}
}

// TestWriteConfigChoosesCodecAndLevel: the table configuration keys shale.write.compression
// and shale.write.compression_level choose how later appends store data files (the
// earlier files keep theirs and every file reads back); bad values are refused when set.
func TestWriteConfigChoosesCodecAndLevel(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	tbl, err := db.CreateTable(ctx, "codec", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, tbl, 0, 5000)
	for _, bad := range []map[string]string{
		{ConfigCompression: "gzip"}, {ConfigCompressionLevel: "0"}, {ConfigCompressionLevel: "23"}, {ConfigCompressionLevel: "fast"},
	} {
		if _, err := tbl.UpdateConfig(ctx, bad, nil); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "shale.write.") {
			t.Errorf("UpdateConfig(%v): %v, want ErrInvalidConfig naming the key", bad, err)
		}
	}
	sizes := map[string]int64{}
	lastSize := func(label string) {
		m := tbl.Manifest()
		df := m.Fragments[len(m.Fragments)-1].Files[0]
		sizes[label] = df.Size
		if label == "lz4" && df.Compression != CompressionLZ4 || label != "lz4" && df.Compression != CompressionZstd {
			t.Fatalf("%s: file compression %q", label, df.Compression)
		}
	}
	lastSize("default")
	if _, err := tbl.UpdateConfig(ctx, map[string]string{ConfigCompressionLevel: "19"}, nil); err != nil {
		t.Fatal(err)
	}
	appendRange(t, tbl, 0, 5000)
	lastSize("zstd-19")
	if _, err := tbl.UpdateConfig(ctx, map[string]string{ConfigCompression: "lz4"}, nil); err != nil {
		t.Fatal(err)
	}
	appendRange(t, tbl, 0, 5000)
	lastSize("lz4")
	if !(sizes["zstd-19"] < sizes["default"] && sizes["default"] < sizes["lz4"]) {
		t.Fatalf("sizes %v: want zstd level 19 < level 1 (default) < lz4", sizes)
	}
	got := ids(t, tbl, "")
	if len(got) != 15000 {
		t.Fatalf("%d rows, want 15000", len(got))
	}
	for i, id := range got {
		if id != int64(i%5000) {
			t.Fatalf("row %d: id %d", i, id)
		}
	}
}

// TestCreateTableWithConfig: WithConfig puts the configuration in the create's own
// version (its first write already uses the codec); a bad value creates nothing.
func TestCreateTableWithConfig(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	tbl, err := db.CreateTable(ctx, "cfg1", kvSchema, WithConfig(map[string]string{ConfigCompression: "lz4"}))
	if err != nil {
		t.Fatal(err)
	}
	if v, c := tbl.Version(), tbl.Config(); v != 1 || c[ConfigCompression] != "lz4" {
		t.Fatalf("created at version %d with config %v, want version 1 with lz4", v, c)
	}
	appendRange(t, tbl, 0, 3)
	for _, f := range mustOpen(t, db, "cfg1").Manifest().Fragments {
		for _, df := range f.Files {
			if df.Compression != CompressionLZ4 {
				t.Fatalf("data file %s: compression %q, want lz4", df.Key, df.Compression)
			}
		}
	}
	if _, err := db.CreateTable(ctx, "cfg2", kvSchema, WithConfig(map[string]string{ConfigCompression: "brotli"})); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("a bad codec: %v, want ErrInvalidConfig", err)
	}
	if _, err := db.OpenTable(ctx, "cfg2"); !errors.Is(err, manifest.ErrTableNotFound) {
		t.Fatalf("the table of a refused create: %v, want not found", err)
	}
}

// TestConfigValuesTheEngineReadsAreChecked: a value the engine could not parse for a key it
// reads is refused (it was stored, then read as the default or as "no WAL"), and so is a
// key that `shale config` could not print unambiguously; nothing is committed.
func TestConfigValuesTheEngineReadsAreChecked(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, "")
	tbl, err := db.CreateTable(ctx, "cfgcheck", kvSchema)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []map[string]string{
		{ConfigWALShards: "abc"}, {ConfigWALShards: "-1"}, {ConfigWALFlushBytes: "1MB"}, {ConfigWALBacklogHard: "lots"},
		{ConfigWALBacklogSoft: "-5"}, {ConfigWALFlushInterval: "abc"}, {ConfigWALFlushInterval: "-1s"}, {manifest.ConfigIdempotencyKeys: "-1"},
		{"a key": "1"}, {"nl\nkey": "1"},
	} {
		if _, err := tbl.UpdateConfig(ctx, c, nil); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("UpdateConfig(%q): %v, want ErrInvalidConfig", c, err)
		}
	}
	if v := mustOpen(t, db, "cfgcheck").Version(); v != 1 {
		t.Fatalf("version %d after refused changes, want 1", v)
	}
	ok := map[string]string{ConfigWALShards: "0", ConfigWALFlushBytes: "-1", ConfigWALBacklogHard: "0", ConfigWALFlushInterval: "0s",
		manifest.ConfigIdempotencyKeys: "0", "app.owner": "x y"}
	if _, err := tbl.UpdateConfig(ctx, ok, nil); err != nil {
		t.Fatalf("valid values: %v", err)
	}
}

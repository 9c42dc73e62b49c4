package manifest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/shale-db/shale/store"
)

var nextStore int
var storeMu sync.Mutex

func memStore(t testing.TB) store.Store {
	storeMu.Lock()
	nextStore++
	n := nextStore
	storeMu.Unlock()
	s, err := store.Open(context.Background(), fmt.Sprintf("mem://manifest-test-%s-%d", strings.ReplaceAll(t.Name(), "/", "_"), n), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testSchema(t testing.TB) *Schema {
	s, err := NewSchema(arrow.NewSchema([]arrow.Field{
		{Name: "a", Type: arrow.PrimitiveTypes.Int64},
		{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil), []int32{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	return &s
}

func frag(rows int64) Fragment { return Fragment{PhysicalRows: rows} }

func create(t *testing.T, s store.Store, table string) *Manifest {
	t.Helper()
	m, _, err := Commit(context.Background(), s, table, nil, NewTransaction(0, Operation{Kind: OpCreate, Schema: testSchema(t)}), CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestValidateTableName(t *testing.T) {
	for _, ok := range []string{"flights", "a.b-c_d", "T1"} {
		if err := ValidateTableName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "..", "a..b", "a/b", "/abs", "a\x00b", ".hidden", "_versions", "-x", "--table", "sp ace", strings.Repeat("x", 201)} {
		err := ValidateTableName(bad)
		if !errors.Is(err, ErrInvalidTableName) {
			t.Errorf("%q: got %v, want ErrInvalidTableName", bad, err)
		}
	}
}

func TestManifestKeyOrderAndParse(t *testing.T) {
	k1, k2, k10 := ManifestKey("t", 1), ManifestKey("t", 2), ManifestKey("t", 10)
	if !(k10 < k2 && k2 < k1) {
		t.Fatalf("keys do not sort highest version first: %s %s %s", k1, k2, k10)
	}
	for _, v := range []uint64{1, 2, 10, 1 << 40} {
		got, err := ParseManifestKey("t", ManifestKey("t", v))
		if err != nil || got != v {
			t.Fatalf("parse(%d) = %d, %v", v, got, err)
		}
	}
	if _, err := ParseManifestKey("t", "t/_versions/123.manifest"); err == nil {
		t.Fatal("malformed key parsed")
	}
}

func TestEncodeDecodeAndCorruption(t *testing.T) {
	m, err := Build("t", nil, NewTransaction(0, Operation{Kind: OpCreate, Schema: testSchema(t), NewFragments: []Fragment{frag(10)}, Config: map[string]string{"k": "v"}}))
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeManifest("t", 1, m.Key(), b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Txn.ID != m.Txn.ID || got.Fragments[0].PhysicalRows != 10 || got.Config["k"] != "v" || got.NextFragmentID != 1 || got.NextFieldID != 2 {
		t.Fatalf("round trip mismatch: %+v", got)
	}
	if a, _ := got.Schema.Arrow(); a.Field(1).Name != "b" {
		t.Fatalf("schema round trip: %v", a)
	}
	for i := range b {
		c := append([]byte(nil), b...)
		c[i] ^= 0x40
		_, err := DecodeManifest("t", 1, m.Key(), c)
		if err == nil {
			t.Fatalf("flipped byte %d accepted", i)
		}
		var oe *ObjectError
		if !errors.As(err, &oe) || oe.Key != m.Key() || !strings.Contains(err.Error(), m.Key()) {
			t.Fatalf("flipped byte %d: error does not name the object: %v", i, err)
		}
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrFormatTooNew) && !errors.Is(err, ErrFormatTooOld) {
			t.Fatalf("flipped byte %d: %v", i, err)
		}
	}
	// A newer format with a valid checksum is refused as too new, not as corrupt.
	c := append([]byte(nil), b[:len(b)-4]...)
	c[5] = byte(FormatVersion + 1)
	c = append(c, 0, 0, 0, 0)
	sum := Checksum(c[:len(c)-4])
	c[len(c)-4], c[len(c)-3], c[len(c)-2], c[len(c)-1] = byte(sum>>24), byte(sum>>16), byte(sum>>8), byte(sum)
	if _, err := DecodeManifest("t", 1, m.Key(), c); !errors.Is(err, ErrFormatTooNew) {
		t.Fatalf("newer format: %v", err)
	}
	// An older format (pre-release string keys) is refused, not misread as empty.
	c = append([]byte(nil), b[:len(b)-4]...)
	c[5] = byte(MinFormatVersion - 1)
	c = append(c, 0, 0, 0, 0)
	sum = Checksum(c[:len(c)-4])
	c[len(c)-4], c[len(c)-3], c[len(c)-2], c[len(c)-1] = byte(sum>>24), byte(sum>>16), byte(sum>>8), byte(sum)
	if _, err := DecodeManifest("t", 1, m.Key(), c); !errors.Is(err, ErrFormatTooOld) {
		t.Fatalf("older format: %v", err)
	}
	// A manifest stored under another version's name is refused.
	if _, err := DecodeManifest("t", 2, ManifestKey("t", 2), b); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("misplaced manifest: %v", err)
	}
}

// txnOf builds a transaction of kind whose footprint is fragment ids touched (deletion
// vectors, removals, rewrites), index coverage, configuration key and WAL shard as given.
func txnOf(kind OpKind, frags []uint32, key, shard string) *Transaction {
	t := NewTransaction(1, Operation{Kind: kind})
	op := &t.Op
	switch kind {
	case OpDelete, OpUpdate:
		for _, id := range frags {
			op.Deletions = append(op.Deletions, DeletionUpdate{FragmentID: id})
		}
	case OpRewrite:
		op.Groups = []RewriteGroup{{Old: frags}}
	case OpCreateIndex:
		op.NewIndexes = []Index{{Name: "ix-" + key, Fragments: frags}}
	case OpUpdateConfig, OpOverwrite, OpCreate:
		op.Config = map[string]string{key: "v"}
	case OpMergeWAL:
		op.WALs = []WALMerge{{Shard: shard, From: 0, To: 1}}
	case OpAbort:
		op.Aborted = []string{"someone-else"}
	}
	return &t
}

// TestConflictMatrix pins the conflict rules for every ordered pair of operation kinds,
// once with the two transactions overlapping (same fragments, an index covering a rewritten
// fragment, the same configuration key, the same WAL shard) and once disjoint.
func TestConflictMatrix(t *testing.T) {
	const (
		C = Compatible
		R = Rebase
		T = Retryable
		X = Incompatible
	)
	kinds := []OpKind{OpCreate, OpAppend, OpDelete, OpUpdate, OpOverwrite, OpSchemaChange, OpUpdateConfig, OpRewrite, OpCreateIndex, OpMergeWAL, OpAbort, OpDrop}
	if !slices.Equal(kinds, OpKinds) {
		t.Fatalf("OpKinds changed: update this test's matrix")
	}
	// Columns (theirs) in the order of kinds.
	// Overlapping, an abort names the other transaction.
	overlap := map[OpKind][]Resolution{
		//               Create Append Delete Update Overwr Schema Config Rewrit Index  WAL Abort Drop
		OpCreate:       {X, X, X, X, X, X, X, X, X, X, X, C},
		OpAppend:       {X, C, C, C, X, C, C, C, C, C, X, X},
		OpDelete:       {X, C, R, R, X, C, C, T, C, C, X, X},
		OpUpdate:       {X, C, R, R, X, T, C, T, C, C, X, X},
		OpOverwrite:    {T, T, T, T, T, C, T, C, C, C, X, X},
		OpSchemaChange: {X, C, C, T, X, T, C, T, T, T, X, X},
		OpUpdateConfig: {T, C, C, C, T, C, T, C, C, C, X, X},
		OpRewrite:      {X, C, T, T, X, T, C, T, C, C, X, X},
		OpCreateIndex:  {X, C, C, C, X, T, C, T, T, C, X, X},
		OpMergeWAL:     {X, C, C, C, X, T, C, C, C, T, X, X},
		OpAbort:        {X, X, X, X, X, X, X, X, X, X, X, X},
		OpDrop:         {C, C, C, C, C, C, C, C, C, C, X, X},
	}
	disjoint := map[OpKind][]Resolution{
		OpCreate:       {X, X, X, X, X, X, X, X, X, X, X, C},
		OpAppend:       {X, C, C, C, X, C, C, C, C, C, C, X},
		OpDelete:       {X, C, C, C, X, C, C, C, C, C, C, X},
		OpUpdate:       {X, C, C, C, X, T, C, C, C, C, C, X},
		OpOverwrite:    {T, T, T, T, T, C, C, C, C, C, C, X},
		OpSchemaChange: {X, C, C, T, X, T, C, T, T, T, C, X},
		OpUpdateConfig: {C, C, C, C, C, C, C, C, C, C, C, X},
		OpRewrite:      {X, C, C, C, X, T, C, C, C, C, C, X},
		OpCreateIndex:  {X, C, C, C, X, T, C, C, C, C, C, X},
		OpMergeWAL:     {X, C, C, C, X, T, C, C, C, C, C, X},
		OpAbort:        {C, C, C, C, C, C, C, C, C, C, C, X},
		OpDrop:         {C, C, C, C, C, C, C, C, C, C, C, X},
	}
	for _, tc := range []struct {
		name string
		want map[OpKind][]Resolution
		a, b []uint32
		ka   string
		kb   string
		sa   string
		sb   string
	}{
		{"overlapping", overlap, []uint32{1, 2}, []uint32{2, 3}, "k", "k", "s1", "s1"},
		{"disjoint", disjoint, []uint32{1}, []uint32{2}, "k1", "k2", "s1", "s2"},
	} {
		for _, ours := range kinds {
			for j, theirs := range kinds {
				o, th := txnOf(ours, tc.a, tc.ka, tc.sa), txnOf(theirs, tc.b, tc.kb, tc.sb)
				if tc.name == "overlapping" {
					if ours == OpAbort {
						o.Op.Aborted = []string{th.ID}
					}
					if theirs == OpAbort {
						th.Op.Aborted = []string{o.ID}
					}
				}
				got, shared, reason := Check(o, th)
				if want := tc.want[ours][j]; got != want {
					t.Errorf("%s: ours %s, theirs %s: got %v, want %v (%s)", tc.name, ours, theirs, got, want, reason)
				}
				// A conflict with a drop says so and matches ErrTableDropped, like a
				// conflict with an abort naming ours matches ErrTxnAborted.
				if got == Incompatible {
					ce := &ConflictError{Table: "t", Resolution: got, Ours: *o, Theirs: *th, Reason: reason}
					if dropped := errors.Is(ce, ErrTableDropped); dropped != (theirs == OpDrop) {
						t.Errorf("%s: ours %s, theirs %s: errors.Is(ErrTableDropped) = %v", tc.name, ours, theirs, dropped)
					}
					if theirs == OpDrop && !strings.Contains(ce.Error(), "the table was dropped") {
						t.Errorf("%s: ours %s, theirs %s: %q does not say the table was dropped", tc.name, ours, theirs, ce)
					}
				}
				if (got == Retryable || got == Incompatible || got == Rebase) && reason == "" {
					t.Errorf("%s: ours %s, theirs %s: %v without a reason", tc.name, ours, theirs, got)
				}
				if got == Rebase && fmt.Sprint(shared) != "[2]" {
					t.Errorf("%s: ours %s, theirs %s: shared fragments %v", tc.name, ours, theirs, shared)
				}
			}
		}
	}
}

func TestCommitSequentialAndLoad(t *testing.T) {
	ctx := context.Background()
	s := memStore(t)
	m := create(t, s, "t")
	for i := 0; i < 5; i++ {
		var err error
		m, _, err = Commit(ctx, s, "t", m, NewTransaction(m.Version, Operation{Kind: OpAppend, NewFragments: []Fragment{frag(int64(i + 1))}}), CommitOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	if m.Version != 6 || len(m.Fragments) != 5 || m.LiveRows() != 15 {
		t.Fatalf("v%d, %d fragments, %d rows", m.Version, len(m.Fragments), m.LiveRows())
	}
	head, err := Head(ctx, s, "t")
	if err != nil || head != 6 {
		t.Fatalf("head %d %v", head, err)
	}
	vs, err := Versions(ctx, s, "t")
	if err != nil || fmt.Sprint(vs) != "[1 2 3 4 5 6]" {
		t.Fatalf("versions %v %v", vs, err)
	}
	old, err := Load(ctx, s, "t", 3)
	if err != nil || len(old.Fragments) != 2 {
		t.Fatalf("v3: %v %v", old, err)
	}
	// The manifest embeds its transaction without the fragments it already lists.
	if old.Txn.Op.NewFragments != nil || fmt.Sprint(old.Txn.Op.NewFragmentIDs) != "[1]" {
		t.Fatalf("embedded transaction: %+v", old.Txn.Op)
	}
	for i, f := range m.Fragments {
		if f.ID != uint32(i) {
			t.Fatalf("fragment ids not sequential: %v", m.Fragments)
		}
	}
	if _, err := Load(ctx, s, "t", 99); !errors.Is(err, ErrVersionNotFound) {
		t.Fatalf("missing version: %v", err)
	}
	if _, err := Head(ctx, s, "nope"); !errors.Is(err, ErrTableNotFound) {
		t.Fatalf("missing table: %v", err)
	}
	tables, err := Tables(ctx, s)
	if err != nil || fmt.Sprint(tables) != "[t]" {
		t.Fatalf("tables %v %v", tables, err)
	}
}

// TestConcurrentAppendsAllLand: N goroutines × M appends from the same stale read version
// all commit, with contiguous versions and distinct fragment ids (invariants 1 and 6).
func TestConcurrentAppendsAllLand(t *testing.T) {
	ctx := context.Background()
	s := memStore(t)
	base := create(t, s, "t")
	const N, M = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, N*M)
	for w := 0; w < N; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < M; i++ {
				_, _, err := Commit(ctx, s, "t", base, NewTransaction(base.Version, Operation{Kind: OpAppend, NewFragments: []Fragment{frag(1)}}), CommitOptions{})
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	head, err := LoadHead(ctx, s, "t")
	if err != nil {
		t.Fatal(err)
	}
	if head.Version != 1+N*M || len(head.Fragments) != N*M {
		t.Fatalf("HEAD v%d with %d fragments, want v%d with %d", head.Version, len(head.Fragments), 1+N*M, N*M)
	}
	seen := map[uint32]bool{}
	for _, f := range head.Fragments {
		if seen[f.ID] {
			t.Fatalf("fragment id %d twice", f.ID)
		}
		seen[f.ID] = true
	}
	ids := map[string]bool{}
	for v := uint64(2); v <= head.Version; v++ {
		m, err := Load(ctx, s, "t", v)
		if err != nil {
			t.Fatal(err)
		}
		if ids[m.Txn.ID] {
			t.Fatalf("transaction %s committed twice", m.Txn.ID)
		}
		ids[m.Txn.ID] = true
	}
}

func TestCommitConflicts(t *testing.T) {
	ctx := context.Background()
	s := memStore(t)
	m := create(t, s, "t")
	m, _, err := Commit(ctx, s, "t", m, NewTransaction(m.Version, Operation{Kind: OpAppend, NewFragments: []Fragment{frag(10), frag(10)}}), CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	del := func(read *Manifest, frag uint32, key string) Transaction {
		return deleteRows(t, s, read, frag, key, 0)
	}
	// Two deletes from the same read version on different fragments both commit.
	if _, _, err := Commit(ctx, s, "t", m, del(m, 0, "dv-a"), CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	after, _, err := Commit(ctx, s, "t", m, del(m, 1, "dv-b"), CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if f0, _ := after.Fragment(0); f0.Deletion == nil || !strings.Contains(f0.Deletion.Key, "dv-a") {
		t.Fatalf("rebased delete lost the other delete: %+v", after.Fragments)
	}
	// A third delete of the same row of fragment 0 from the stale read version is a
	// retryable conflict naming both transactions and the fragment.
	stale := del(m, 0, "dv-c")
	_, _, err = Commit(ctx, s, "t", m, stale, CommitOptions{})
	var ce *ConflictError
	if !errors.Is(err, ErrRetryable) || !errors.As(err, &ce) || fmt.Sprint(ce.Fragments) != "[0]" || !strings.Contains(err.Error(), stale.ID) || !strings.Contains(err.Error(), ce.Theirs.ID) {
		t.Fatalf("stale delete: %v", err)
	}
	// An append from before an overwrite is incompatible.
	ow, _, err := Commit(ctx, s, "t", after, NewTransaction(after.Version, Operation{Kind: OpOverwrite, Schema: testSchema(t), NewFragments: []Fragment{frag(3)}}), CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ow.Fragments) != 1 || ow.Fragments[0].ID != 2 {
		t.Fatalf("overwrite fragments %+v (ids must not be reused)", ow.Fragments)
	}
	_, _, err = Commit(ctx, s, "t", after, NewTransaction(after.Version, Operation{Kind: OpAppend, NewFragments: []Fragment{frag(1)}}), CommitOptions{})
	if !errors.Is(err, ErrIncompatible) {
		t.Fatalf("append after overwrite: %v", err)
	}
	// Creating an existing table is refused.
	if _, _, err := Commit(ctx, s, "t", nil, NewTransaction(0, Operation{Kind: OpCreate, Schema: testSchema(t)}), CommitOptions{}); !errors.Is(err, ErrConflict) {
		t.Fatalf("create twice: %v", err)
	}
}

// TestCommitRetrySameTransactionCommitsOnce: retrying a transaction whose earlier attempt
// landed returns the landed version instead of committing again.
func TestCommitRetrySameTransactionCommitsOnce(t *testing.T) {
	ctx := context.Background()
	s := memStore(t)
	m := create(t, s, "t")
	txn := NewTransaction(m.Version, Operation{Kind: OpAppend, NewFragments: []Fragment{frag(5)}})
	first, _, err := Commit(ctx, s, "t", m, txn, CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	again, _, err := Commit(ctx, s, "t", m, txn, CommitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.Version != first.Version {
		t.Fatalf("retry committed again as v%d (first v%d)", again.Version, first.Version)
	}
	head, _ := Head(ctx, s, "t")
	if head != first.Version {
		t.Fatalf("HEAD %d after retry, want %d", head, first.Version)
	}
}

func TestCommitRequestCount(t *testing.T) {
	ctx := context.Background()
	s := memStore(t)
	m := create(t, s, "t")
	before := s.Counters().Snapshot()
	if _, _, err := Commit(ctx, s, "t", m, NewTransaction(m.Version, Operation{Kind: OpAppend, NewFragments: []Fragment{frag(1)}}), CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	d := s.Counters().Snapshot().Sub(before)
	if d.Total() != 2 || d.ByOp[store.OpPut] != 1 || d.ByOp[store.OpPutIfAbsent] != 1 {
		t.Fatalf("uncontended commit made %s, want put=1 put_if_absent=1", d)
	}
}

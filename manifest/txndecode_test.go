package manifest

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/shale-db/shale/store"
)

// TestTxnDecodeTakesFastPath: a manifest of fragments with statistics, deletion vectors and
// idempotency records decodes its transaction without the fragments (the fast path), to
// the transaction the whole decode gives; the record's manifest, decoded on first use, is
// DecodeManifest's.
func TestTxnDecodeTakesFastPath(t *testing.T) {
	m := benchManifest(t, 40)
	m.Fragments[3].Deletion = &DeletionFile{Key: "hist/_deletions/x/3-abc.dv", Size: 40, Deleted: 7}
	m.Idempotency = []IdempotencyRecord{{Key: "k1", Version: 3, TxnID: "t1"}}
	m.Txn.IdempotencyKey = "k2"
	m.Txn.Op.NewFragments = m.Fragments[39:]
	raw, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	want, err := DecodeManifest(m.Table, m.Version, m.Key(), raw)
	if err != nil {
		t.Fatal(err)
	}
	got, whole, err := decodeManifestTxn(m.Table, m.Version, m.Key(), raw)
	if err != nil {
		t.Fatal(err)
	}
	if whole {
		t.Fatal("the canonical encoding took the slow path (decoded whole)")
	}
	if got.Fragments != nil || got.Idempotency != nil || got.Schema.IPC != nil {
		t.Fatal("the transaction-only decode decoded more than the transaction")
	}
	if !reflect.DeepEqual(got.Txn, want.Txn) || got.TxnKey != want.TxnKey || got.Checksum() != want.Checksum() {
		t.Fatalf("transaction-only decode differs from the whole decode:\n%+v\n%+v", got.Txn, want.Txn)
	}

	s := memStore(t)
	ctx := context.Background()
	if err := s.Put(ctx, m.Key(), raw); err != nil {
		t.Fatal(err)
	}
	r, err := loadTxnRecord(ctx, s, m.Table, m.Version)
	if err != nil {
		t.Fatal(err)
	}
	if r.Expired() || r.Manifest != nil || r.TxnID != m.Txn.ID {
		t.Fatalf("lazy record: expired %v, manifest %v, txn %q", r.Expired(), r.Manifest != nil, r.TxnID)
	}
	full, err := r.manifest(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !sameManifest(full, want) || r.Txn != &full.Txn {
		t.Fatal("the record's manifest, decoded on first use, differs from DecodeManifest's")
	}
	txn, err := LoadTransaction(ctx, s, m.Table, m.Version)
	if err != nil || !reflect.DeepEqual(*txn, want.Txn) {
		t.Fatalf("LoadTransaction = %+v, %v", txn, err)
	}
}

// TestTxnDecodeRefusesWhatDecodeRefuses: a damaged object, one naming another version
// and a non-canonical body are refused or decoded whole, as DecodeManifest does.
func TestTxnDecodeRefusesWhatDecodeRefuses(t *testing.T) {
	m := benchManifest(t, 5)
	raw, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	damaged := append([]byte(nil), raw...)
	damaged[len(damaged)/2] ^= 0xff
	if _, _, err := decodeManifestTxn(m.Table, m.Version, m.Key(), damaged); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged object: %v, want ErrCorrupt", err)
	}
	if _, _, err := decodeManifestTxn(m.Table, m.Version+1, ManifestKey(m.Table, m.Version+1), raw); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("object of another version: %v, want ErrCorrupt", err)
	}
	body := raw[10 : len(raw)-4]
	// An unknown key before the transaction's fields (the reflection decoder ignores it).
	extra := append([]byte{body[0] + 1}, appendText(nil, "Unknown")...)
	extra = append(extra, 0x01)
	extra = append(extra, body[1:]...)
	got, whole, err := decodeManifestTxn(m.Table, m.Version, m.Key(), reframe(extra))
	if err != nil || !whole || len(got.Fragments) != 5 || got.Txn.ID != m.Txn.ID {
		t.Fatalf("non-canonical body: whole %v, %d fragments, %v", whole, len(got.Fragments), err)
	}
}

// countingStore counts GETs of manifests.
type countingStore struct {
	store.Store
	gets int
}

func (c *countingStore) Get(ctx context.Context, key string) ([]byte, error) {
	c.gets++
	return c.Store.Get(ctx, key)
}

// TestCatchUpDecodesOnlyHead: CatchUp over several versions returns HEAD decoded whole
// (its fragments), equal to Load's, with one GET per version read.
func TestCatchUpDecodesOnlyHead(t *testing.T) {
	ctx := context.Background()
	mem := memStore(t)
	base := create(t, mem, "t")
	m := base
	for range 4 {
		m = mustCommit(t, mem, m, appendTxn(m, 10))
	}
	cs := &countingStore{Store: mem}
	got, err := CatchUp(ctx, cs, base.Table, base, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Load(ctx, mem, base.Table, m.Version)
	if err != nil {
		t.Fatal(err)
	}
	if !sameManifest(got, want) {
		t.Fatalf("CatchUp returned version %d with %d fragments, want version %d with %d", got.Version, len(got.Fragments), want.Version, len(want.Fragments))
	}
	if cs.gets != 5 {
		t.Fatalf("CatchUp made %d GETs, want 5 (4 versions and the miss)", cs.gets)
	}
}

// BenchmarkTxnDecode: the transaction alone against the whole manifest of 1,000 appends.
func BenchmarkTxnDecode(b *testing.B) {
	m := benchManifest(b, 1000)
	raw, err := m.Encode()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("txn", func(b *testing.B) {
		for b.Loop() {
			if _, whole, err := decodeManifestTxn(m.Table, m.Version, m.Key(), raw); err != nil || whole {
				b.Fatal(err, whole)
			}
		}
	})
	b.Run("whole", func(b *testing.B) {
		for b.Loop() {
			if _, err := DecodeManifest(m.Table, m.Version, m.Key(), raw); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// sameManifest compares what two manifests say (not the fragment records a decode keeps).
func sameManifest(a, b *Manifest) bool {
	x, y := *a, *b
	x.records, x.recordsOf, y.records, y.recordsOf = nil, nil, nil, nil
	return reflect.DeepEqual(x, y)
}

// TestDecodeTakesUnchangedFragments: a version decoded on top of an earlier one (whose
// records the commit path kept) takes the fragments whose records are unchanged from it,
// and says exactly what a plain decode says, whether fragments were appended, changed
// (a new deletion vector) or removed; a copy whose fragments were replaced has no records.
func TestDecodeTakesUnchangedFragments(t *testing.T) {
	base := benchManifest(t, 30)
	raw, recs, err := encodeManifestRecords(base, true)
	if err != nil {
		t.Fatal(err)
	}
	base.setFragRecords(recs)
	if b2, err := base.Encode(); err != nil || !bytes.Equal(b2, raw) {
		t.Fatal("encoding with records changed the bytes")
	}
	grow := func(m *Manifest) *Manifest {
		c := m.clone()
		c.Version++
		c.Fragments = append(c.Fragments, benchManifest(t, 31).Fragments[30])
		c.Fragments[len(c.Fragments)-1].ID = c.NextFragmentID
		c.NextFragmentID++
		return c
	}
	changed := grow(base)
	changed.Fragments[7].Deletion = &DeletionFile{Key: "hist/_deletions/x/7.dv", Size: 9, Deleted: 3}
	removed := grow(base)
	removed.Fragments = slices.Delete(removed.Fragments, 12, 13)
	for name, next := range map[string]*Manifest{"append": grow(base), "changed": changed, "removed": removed} {
		b, err := next.Encode()
		if err != nil {
			t.Fatal(err)
		}
		want, err := DecodeManifest(next.Table, next.Version, next.Key(), b)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeManifestOn(next.Table, next.Version, next.Key(), b, base, true)
		if err != nil {
			t.Fatal(err)
		}
		if !sameManifest(got, want) {
			t.Fatalf("%s: the decode on a base differs from the plain decode", name)
		}
		if &got.Fragments[0].Files[0] != &base.Fragments[0].Files[0] {
			t.Fatalf("%s: an unchanged fragment was decoded again", name)
		}
		if len(got.fragRecords().recs) != len(got.Fragments) {
			t.Fatalf("%s: the decode kept no records", name)
		}
	}
	cp := *base
	cp.Fragments = slices.Clone(base.Fragments)
	if cp.fragRecords().recs != nil {
		t.Fatal("a copy with other fragments kept the records")
	}
}

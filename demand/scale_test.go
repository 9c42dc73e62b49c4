package demand

import (
	"fmt"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// fullRecord is a realistic worst-case record: a full flush-time map (SealedTimesCap
// entries with 13-digit times), about 1.5 KiB.
func fullRecord(table, shard int) Event {
	base := uint64(100_000 + 1000*shard)
	e := Event{
		V: CurrentVersion, Shard: fmt.Sprintf("shard-%d", shard), IncarnationSince: 1,
		SealedThrough: base + 500, SealedBytesThrough: 7 << 30, MergedThrough: new(base),
		FlushedAtMs: 1_733_000_000_000 + int64(table), WriterEpoch: 12, Source: W,
		SealedTimes: map[uint64]int64{},
	}
	for g := base + 1; len(e.SealedTimes) < SealedTimesCap-1; g++ {
		e.SealedTimes[g] = 1_733_000_000_000 + int64(g)
	}
	e.SealedTimes[base+500] = e.FlushedAtMs
	return e
}

// seed writes tables × shards full records under r, in transactions of at most 64 puts
// (well inside etcd's default 128 operations and 1.5 MiB per request).
func seedRecords(t *testing.T, r *Records, tables, shards int) {
	t.Helper()
	ctx := testCtx(t)
	var ops []clientv3.Op
	flush := func() {
		if _, err := r.cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
		ops = ops[:0]
	}
	for tb := range tables {
		for sh := range shards {
			e := fullRecord(tb, sh)
			ops = append(ops, clientv3.OpPut(r.Key(fmt.Sprintf("t%04d", tb), e.Shard), string(e.Encode())))
			if len(ops) == 64 {
				flush()
			}
		}
	}
	if len(ops) > 0 {
		flush()
	}
}

// checkScale checks that snap holds every seeded record, folded.
func checkScale(t *testing.T, snap *Snapshot, tables, shards int) {
	t.Helper()
	if len(snap.Skipped) != 0 || len(snap.Tables) != tables {
		t.Fatalf("%d tables read, %d skipped (%v); want %d and none", len(snap.Tables), len(snap.Skipped), snap.Skipped, tables)
	}
	for name, td := range snap.Tables {
		if len(td.Shards) != shards || td.PendingGenerations() != uint64(500*shards) {
			t.Fatalf("table %s: %d shards, %d pending; want %d and %d", name, len(td.Shards), td.PendingGenerations(), shards, 500*shards)
		}
		if a := td.OldestPending(); a.Kind != AgeExact {
			t.Fatalf("table %s: oldest %+v, want exact", name, a)
		}
	}
}

// §7 item 49 (reads at scale): 512 tables × 8 shards and 100 tables × 20 shards of
// records with full time maps. One unpaged prefix read is refused by a client with the
// common 4 MiB message cap; ReadAll reads every record through it in byte-bounded pages,
// all at one revision: a record raised and a table created between two pages are not in
// the snapshot (they are in the next).
func TestReadAllPagedAtScale(t *testing.T) {
	capped := newClient(4 << 20)
	defer capped.Close()
	for _, size := range []struct{ tables, shards int }{{512, 8}, {100, 20}} {
		t.Run(fmt.Sprintf("%dx%d", size.tables, size.shards), func(t *testing.T) {
			prefix := testPrefix(t)
			r := New(capped, prefix)
			seedRecords(t, r, size.tables, size.shards)
			ctx := testCtx(t)
			if size.tables*size.shards == 4096 {
				_, err := capped.Get(ctx, r.demandPrefix(), clientv3.WithPrefix())
				if !tooLarge(err) {
					t.Fatalf("one unpaged read of %d full records: %v, want refused by the 4 MiB cap (else this test proves nothing)",
						size.tables*size.shards, err)
				}
			}
			last := fmt.Sprintf("t%04d", size.tables-1)
			var raisedAt int64
			r.afterPage = func(page int) {
				if page != 1 {
					return
				}
				e := fullRecord(size.tables-1, size.shards-1)
				e.SealedThrough += 1000
				if _, err := r.Publish(ctx, last, e); err != nil {
					t.Error(err)
				}
				resp, err := r.cli.Put(ctx, r.Key("zzz-created-meanwhile", "s"), string(ev("s", 1, none, 1, W).Encode()))
				if err != nil {
					t.Error(err)
					return
				}
				raisedAt = resp.Header.Revision
			}
			snap, err := r.ReadAll(ctx)
			if err != nil {
				t.Fatal(err)
			}
			r.afterPage = nil
			if raisedAt == 0 || snap.Revision >= raisedAt {
				t.Fatalf("snapshot at revision %d, the writes between pages at %d", snap.Revision, raisedAt)
			}
			if snap.Pages < size.tables*size.shards/PageKeys {
				t.Fatalf("%d pages for %d records", snap.Pages, size.tables*size.shards)
			}
			checkScale(t, snap, size.tables, size.shards) // neither the raise nor the new table
			after, err := r.ReadTable(ctx, last)
			if err != nil {
				t.Fatal(err)
			}
			created, err := r.ReadTable(ctx, "zzz-created-meanwhile")
			if err != nil {
				t.Fatal(err)
			}
			if len(created.Tables) != 1 || after.Tables[last].PendingGenerations() != uint64(500*size.shards+1000) {
				t.Fatalf("later reads miss the writes: %d tables created, %s pending %d", len(created.Tables), last, after.Tables[last].PendingGenerations())
			}
			t.Logf("%d records in %d pages at revision %d", size.tables*size.shards, snap.Pages, snap.Revision)
		})
	}
}

// A client whose message cap is below a 512-record page: ReadAll halves the page until it
// fits and still reads everything at one revision, without growing back into the size
// that was refused.
func TestReadAllHalvesOnMessageLimit(t *testing.T) {
	small := newClient(256 << 10)
	defer small.Close()
	r := New(small, testPrefix(t))
	seedRecords(t, r, 64, 8)
	snap, err := r.ReadAll(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	checkScale(t, snap, 64, 8)
	// 512 records of ~1.5 KiB exceed 256 KiB, so do 256 and 128; pages of 128 do not.
	if snap.Pages < 512/128 {
		t.Fatalf("%d pages, want at least %d", snap.Pages, 512/128)
	}
	t.Logf("%d pages", snap.Pages)
}

// The page size policy: halve after a large page, double after a small one (up to
// PageKeys, never to a size that was refused), else keep.
func TestNextPage(t *testing.T) {
	for _, c := range []struct {
		limit, ceiling int64
		size           int
		want           int64
	}{
		{512, 1024, PageLargeBytes + 1, 256},
		{1, 1024, PageLargeBytes + 1, 1},
		{512, 1024, 10, 512},
		{128, 1024, 10, 256},
		{128, 256, 10, 128},
		{128, 1024, PageLargeBytes / 2, 128},
	} {
		if got := nextPage(c.limit, c.ceiling, c.size); got != c.want {
			t.Errorf("nextPage(%d, %d, %d) = %d, want %d", c.limit, c.ceiling, c.size, got, c.want)
		}
	}
}

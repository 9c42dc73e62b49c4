package demand

import (
	"errors"
	"strings"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// getRecord reads a shard's stored record and its mod revision (0 when absent).
func getRecord(t *testing.T, r *Records, table, shard string) (Event, int64) {
	t.Helper()
	resp, err := r.cli.Get(testCtx(t), r.Key(table, shard))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return Event{}, 0
	}
	e, err := DecodeEvent(resp.Kvs[0].Value)
	if err != nil {
		t.Fatalf("stored %s: %v", resp.Kvs[0].Value, err)
	}
	return e, resp.Kvs[0].ModRevision
}

// §7 item 14, §3.5 item 13 (publish_is_a_join_and_never_lowers): the publish results in
// order: W 10 e1 → true, again → false; S 9 → true (learns a flush time only), again →
// false; X 10/merged 4 → true; X 10/merged 3 → false; W 12 → true; W 12 e2 → true (same
// generation, higher epoch); another shard → true.
func TestPublishSequence(t *testing.T) {
	r := newRecords(t)
	ctx := testCtx(t)
	for i, st := range []struct {
		e    Event
		want bool
	}{
		{ev("a", 10, none, 1, W), true},
		{ev("a", 10, none, 1, W), false},
		{ev("a", 9, none, 1, S), true},
		{ev("a", 9, none, 1, S), false},
		{ev("a", 10, 4, 1, X), true},
		{ev("a", 10, 3, 1, X), false},
		{ev("a", 12, none, 1, W), true},
		{ev("a", 12, none, 2, W), true},
		{ev("b", 1, none, 1, W), true},
	} {
		_, rev0 := getRecord(t, r, "t", st.e.Shard)
		wrote, err := r.Publish(ctx, "t", st.e)
		if err != nil || wrote != st.want {
			t.Fatalf("step %d (%+v): wrote %v err %v, want %v", i, st.e, wrote, err, st.want)
		}
		if _, rev1 := getRecord(t, r, "t", st.e.Shard); (rev1 != rev0) != st.want {
			t.Fatalf("step %d: mod revision %d → %d, wrote %v", i, rev0, rev1, wrote)
		}
	}
	a, _ := getRecord(t, r, "t", "a")
	if a.Sealed() != (Mark{12, 2}) || a.MergedThrough == nil || *a.MergedThrough != 4 || a.MergedEpoch == nil || *a.MergedEpoch != 1 {
		t.Fatalf("record a %s: want sealed 12@e2, merged 4 with merged_epoch 1", a.Encode())
	}
	for _, g := range []uint64{9, 10, 12} {
		if _, ok := a.SealedTimes[g]; !ok {
			t.Fatalf("record a %s: no flush time for generation %d", a.Encode(), g)
		}
	}
	snap, err := r.ReadTable(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if p := snap.Tables["t"].PendingGenerations(); p != 8+1 {
		t.Fatalf("pending %d, want 8 (a: 12 − 4) + 1 (b)", p)
	}
}

// §7 item 15, §3.5 item 14: a stored record from a newer schema (v 999, with a field this
// build does not know) makes both publish paths fail with ErrUnknownVersion, and its mod
// revision does not move. A read lists it as skipped.
func TestNewerSchemaRefused(t *testing.T) {
	r := newRecords(t)
	ctx := testCtx(t)
	key := r.Key("t", "a")
	newer := `{"v":999,"shard":"a","sealed_through":5,"flushed_at_ms":1,"writer_epoch":1,"source":"writer","generation_sizes":[1,2,3]}`
	put, err := r.cli.Put(ctx, key, newer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Publish(ctx, "t", ev("a", 50, none, 2, W)); !errors.Is(err, ErrUnknownVersion) || !strings.Contains(err.Error(), key) {
		t.Fatalf("publish over v 999: %v, want ErrUnknownVersion naming the key", err)
	}
	if _, err := r.PublishMerged(ctx, "t", "a", 40, 0); !errors.Is(err, ErrUnknownVersion) {
		t.Fatalf("publish merged over v 999: %v, want ErrUnknownVersion", err)
	}
	resp, err := r.cli.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if kv := resp.Kvs[0]; kv.ModRevision != put.Header.Revision || string(kv.Value) != newer {
		t.Fatalf("the v 999 record was touched: mod revision %d (put at %d), value %s", kv.ModRevision, put.Header.Revision, kv.Value)
	}
	snap, err := r.ReadTable(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Skipped) != 1 || !errors.Is(snap.Skipped[0].Err, ErrUnknownVersion) || snap.Skipped[0].Shard != "a" || len(snap.Tables) != 0 {
		t.Fatalf("read: skipped %+v, tables %v; want the v 999 record skipped", snap.Skipped, snap.Tables)
	}
	// An event with an unknown version is refused before etcd is touched.
	e := ev("b", 1, none, 1, W)
	e.V = 2
	if _, err := r.Publish(ctx, "t", e); !errors.Is(err, ErrUnknownVersion) {
		t.Fatalf("publish of a v 2 event: %v", err)
	}
	if _, rev := getRecord(t, r, "t", "b"); rev != 0 {
		t.Fatal("a v 2 event was written")
	}
}

// §3.5 item 15: merged publish races. W 20 e3, then merged 15 → stored merged 15, sealed
// 20, epoch 3, bytes 20 000; merged 12 → no-op. Concurrent W 25 e3 and merged 18 both
// succeed → (25, 18). A new shard with merged 7 → (7, 7, epoch 0).
func TestMergedPublishRaces(t *testing.T) {
	r := newRecords(t)
	ctx := testCtx(t)
	if wrote, err := r.Publish(ctx, "t", ev("a", 20, none, 3, W)); err != nil || !wrote {
		t.Fatalf("W 20: %v %v", wrote, err)
	}
	if wrote, err := r.PublishMerged(ctx, "t", "a", 15, 0); err != nil || !wrote {
		t.Fatalf("merged 15: %v %v", wrote, err)
	}
	a, _ := getRecord(t, r, "t", "a")
	if a.SealedThrough != 20 || a.WriterEpoch != 3 || a.SealedBytesThrough != 20000 || *a.MergedThrough != 15 || a.Source != W {
		t.Fatalf("after merged 15: %s", a.Encode())
	}
	if wrote, err := r.PublishMerged(ctx, "t", "a", 12, 0); err != nil || wrote {
		t.Fatalf("merged 12: wrote %v err %v, want a no-op", wrote, err)
	}
	var wg sync.WaitGroup
	var wroteW, wroteX bool
	var errW, errX error
	start := make(chan struct{})
	wg.Go(func() { <-start; wroteW, errW = r.Publish(ctx, "t", ev("a", 25, none, 3, W)) })
	wg.Go(func() { <-start; wroteX, errX = r.PublishMerged(ctx, "t", "a", 18, 0) })
	close(start)
	wg.Wait()
	if errW != nil || errX != nil || !wroteW || !wroteX {
		t.Fatalf("concurrent: writer %v %v, merger %v %v; want both written", wroteW, errW, wroteX, errX)
	}
	a, _ = getRecord(t, r, "t", "a")
	if a.SealedThrough != 25 || *a.MergedThrough != 18 {
		t.Fatalf("after the race: %s, want (25, 18)", a.Encode())
	}
	if wrote, err := r.PublishMerged(ctx, "t", "fresh", 7, 0); err != nil || !wrote {
		t.Fatalf("merged 7 on a new shard: %v %v", wrote, err)
	}
	f, _ := getRecord(t, r, "t", "fresh")
	if f.SealedThrough != 7 || f.MergedThrough == nil || *f.MergedThrough != 7 || f.WriterEpoch != 0 || f.Source != X || len(f.SealedTimes) != 0 {
		t.Fatalf("new shard: %s, want (7, 7, epoch 0) from the executor without times", f.Encode())
	}
	// Any real flush supersedes the synthetic record.
	if wrote, err := r.Publish(ctx, "t", ev("fresh", 9, none, 1, W)); err != nil || !wrote {
		t.Fatalf("flush 9: %v %v", wrote, err)
	}
	if f, _ = getRecord(t, r, "t", "fresh"); f.Sealed() != (Mark{9, 1}) || *f.MergedThrough != 7 || f.Source != W {
		t.Fatalf("after a flush: %s", f.Encode())
	}
}

// A stored record that does not decode is replaced by the next publish; a read reports it
// as corrupt until then.
func TestCorruptRecordReplaced(t *testing.T) {
	r := newRecords(t)
	ctx := testCtx(t)
	if _, err := r.cli.Put(ctx, r.Key("t", "a"), `{"v":1,"shard":`); err != nil {
		t.Fatal(err)
	}
	snap, err := r.ReadTable(ctx, "t")
	if err != nil || len(snap.Skipped) != 1 || !errors.Is(snap.Skipped[0].Err, ErrCorrupt) {
		t.Fatalf("read: %+v %v", snap, err)
	}
	if wrote, err := r.Publish(ctx, "t", ev("a", 3, none, 1, W)); err != nil || !wrote {
		t.Fatalf("publish over a corrupt record: %v %v", wrote, err)
	}
	if a, _ := getRecord(t, r, "t", "a"); a.SealedThrough != 3 {
		t.Fatalf("record %s", a.Encode())
	}
}

// Bad input is refused before etcd is touched, with the table and shard named.
func TestPublishInvalid(t *testing.T) {
	r := newRecords(t)
	ctx := testCtx(t)
	for _, c := range []struct {
		table string
		e     Event
	}{
		{"", ev("a", 1, none, 1, W)},
		{"a/b", ev("a", 1, none, 1, W)},
		{"t", ev("", 1, none, 1, W)},
		{"t", ev("x/y", 1, none, 1, W)},
		{"t", ev("a", 1, none, 1, "robot")},
		{"t", Event{Shard: "a", Source: W, SealedTimes: map[uint64]int64{0: 5}}},
	} {
		if _, err := r.Publish(ctx, c.table, c.e); !errors.Is(err, ErrInvalid) {
			t.Errorf("publish %q %+v: %v, want ErrInvalid", c.table, c.e, err)
		}
	}
	resp, err := r.cli.Get(ctx, r.demandPrefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 0 {
		t.Fatalf("something was written: %v %v", resp, err)
	}
}

// A table dropped and created again starts a new incarnation: its shards' records start
// afresh, an older incarnation's late event changes nothing, and the table's aggregates
// count only shards of the newest incarnation. DeleteTable removes a table's records.
func TestIncarnation(t *testing.T) {
	r := newRecords(t)
	ctx := testCtx(t)
	old := func(e Event) Event { e.IncarnationSince = 1; return e }
	cur := func(e Event) Event { e.IncarnationSince = 40; return e }
	for _, e := range []Event{old(ev("a", 900, 100, 3, W)), old(ev("b", 50, none, 1, W)), cur(ev("a", 2, none, 1, W))} {
		if wrote, err := r.Publish(ctx, "t", e); err != nil || !wrote {
			t.Fatalf("publish %+v: %v %v", e, wrote, err)
		}
	}
	// A late merge of the dropped incarnation.
	if wrote, err := r.PublishMerged(ctx, "t", "a", 800, 1); err != nil || wrote {
		t.Fatalf("old incarnation's merge: wrote %v err %v, want a no-op", wrote, err)
	}
	snap, err := r.ReadTable(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	td := snap.Tables["t"]
	if a := td.Shards["a"]; a.Sealed != (Mark{2, 1}) || a.HasMerged || a.IncarnationSince != 40 {
		t.Fatalf("shard a %+v, want the new incarnation's (2@e1, nothing merged)", a)
	}
	if td.IncarnationSince() != 40 || td.PendingGenerations() != 2 {
		t.Fatalf("incarnation %d pending %d, want 40 and 2 (shard b belongs to the dropped table)", td.IncarnationSince(), td.PendingGenerations())
	}
	// The same in memory, in every order.
	events := []Event{old(ev("a", 900, 100, 3, W)), old(ev("b", 50, none, 1, W)), cur(ev("a", 2, none, 1, W)), MergedEvent("a", 800, 1, 5)}
	every(t, events, func(what string, td *TableDemand) {
		sameShards(t, what, snap.Tables["t"], td)
	})
	if err := r.DeleteTable(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if snap, err := r.ReadTable(ctx, "t"); err != nil || len(snap.Tables) != 0 {
		t.Fatalf("after DeleteTable: %+v %v", snap, err)
	}
}

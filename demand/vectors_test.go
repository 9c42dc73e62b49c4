package demand

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
)

// The test vectors of lance-context §3.5 and §7 items 1–13 (the pure ones), by the names
// §7 gives them. Notation: W/X/S = writer/executor/scan, (sealed, merged, epoch).

// every runs check on the fold of every permutation of events, and on the rebuild from
// the storage join of each.
func every(t *testing.T, events []Event, check func(what string, td *TableDemand)) {
	t.Helper()
	permutations(events, func(p []Event) {
		check("fold", fold(t, p...))
		check("rebuild", rebuild(t, storeJoin(t, p...)))
	})
}

func wantPending(t *testing.T, what string, td *TableDemand, want uint64) {
	t.Helper()
	if got := td.PendingGenerations(); got != want {
		t.Fatalf("%s: pending %d, want %d (%+v)", what, got, want, td.Shards)
	}
}

// §7 item 1, §3.5 item 3 (the round-4 counterexample that refuted epoch-major marks):
// X(40, 40, e1), W(60, –, e2) → 20 pending in any order; the stored record is (writer
// epoch 2, sealed 60, merged 40 with merged_epoch 1); a rebuild gives 20.
func TestEpochChangeKeepsGenerationNumbering(t *testing.T) {
	events := []Event{ev("a", 40, 40, 1, X), ev("a", 60, none, 2, W)}
	every(t, events, func(what string, td *TableDemand) {
		wantPending(t, what, td, 20)
		s := td.Shards["a"]
		if s.Sealed != (Mark{60, 2}) || s.Merged != (Mark{40, 1}) {
			t.Fatalf("%s: sealed %v merged %v, want 60@e2 and 40@e1", what, s.Sealed, s.Merged)
		}
	})
	for _, order := range [][]Event{events, reversed(events)} {
		rec := storeJoin(t, order...)["a"]
		if rec.WriterEpoch != 2 || rec.SealedThrough != 60 || rec.MergedThrough == nil || *rec.MergedThrough != 40 ||
			rec.MergedEpoch == nil || *rec.MergedEpoch != 1 {
			t.Fatalf("stored record %s, want writer_epoch 2, sealed 60, merged 40, merged_epoch 1", rec.Encode())
		}
	}
}

// §7 item 2, §3.5 item 1 (round-3 counterexample A): X(100, 40, e1), W(60, –, e2) →
// sealed 100@e1 (the value beats the epoch), 60 pending.
func TestValueBeatsEpoch(t *testing.T) {
	every(t, []Event{ev("a", 100, 40, 1, X), ev("a", 60, none, 2, W)}, func(what string, td *TableDemand) {
		wantPending(t, what, td, 60)
		if s := td.Shards["a"].Sealed; s != (Mark{100, 1}) {
			t.Fatalf("%s: sealed %v, want 100@e1", what, s)
		}
	})
}

// §7 item 3, §3.5 item 2 (round-3 counterexample B): W(30, 10, e1), S(20, 20, e1) →
// sealed 30, merged 20, 10 pending: the scan's lower sealed loses, its higher merged wins.
func TestScanCannotLower(t *testing.T) {
	every(t, []Event{ev("a", 30, 10, 1, W), ev("a", 20, 20, 1, S)}, func(what string, td *TableDemand) {
		wantPending(t, what, td, 10)
		s := td.Shards["a"]
		if s.Sealed.Generation != 30 || s.Merged.Generation != 20 {
			t.Fatalf("%s: sealed %v merged %v, want 30 and 20", what, s.Sealed, s.Merged)
		}
	})
}

// §7 item 4, §3.5 item 4: X(10, 8, e1), W(12, –, e1) → 4 pending; the stored record keeps
// merged 8 (a writer event without merged never forgets the executor's).
func TestWriterKeepsExecutorMerged(t *testing.T) {
	events := []Event{ev("a", 10, 8, 1, X), ev("a", 12, none, 1, W)}
	every(t, events, func(what string, td *TableDemand) { wantPending(t, what, td, 4) })
	for _, order := range [][]Event{events, reversed(events)} {
		rec := storeJoin(t, order...)["a"]
		if rec.MergedThrough == nil || *rec.MergedThrough != 8 || rec.SealedThrough != 12 {
			t.Fatalf("stored record %s, want sealed 12 and merged 8", rec.Encode())
		}
	}
}

// canonical is §3.5 item 5's event set.
func canonical() []Event {
	return []Event{
		ev("a", 10, none, 1, W), ev("a", 12, 8, 1, X), ev("a", 11, 11, 1, X),
		ev("b", 3, none, 2, W), ev("b", 5, none, 2, S),
	}
}

// §7 item 5, §3.5 item 5: the canonical set → a.sealed 12, a.merged 11, b.sealed 5,
// pending 1 + 5 = 6, identical (every field) for all 120 permutations, for every doubled
// stream, for a replay onto the final state (which changes nothing), and for the rebuild
// from stored records.
func TestPermutationAndDuplication(t *testing.T) {
	ref := fold(t, canonical()...)
	wantPending(t, "canonical", ref, 6)
	a, b := ref.Shards["a"], ref.Shards["b"]
	if a.Sealed.Generation != 12 || a.Merged.Generation != 11 || b.Sealed.Generation != 5 || b.HasMerged {
		t.Fatalf("a %+v b %+v", a, b)
	}
	n := 0
	permutations(canonical(), func(p []Event) {
		n++
		sameShards(t, "permutation", ref, fold(t, p...))
		sameShards(t, "permutation twice", ref, fold(t, append(slices.Clone(p), p...)...))
		var each []Event
		for _, e := range p {
			each = append(each, e, e)
		}
		sameShards(t, "each event doubled", ref, fold(t, each...))
		final := fold(t, p...)
		for _, e := range p {
			if changed, err := final.Fold(e, 99, 99); err != nil || changed {
				t.Fatalf("replay of %+v onto the final state: changed %v, err %v", e, changed, err)
			}
		}
		sameShards(t, "rebuild", ref, rebuild(t, storeJoin(t, p...)))
		sameShards(t, "rebuild of doubled", ref, rebuild(t, storeJoin(t, each...)))
	})
	if n != 120 {
		t.Fatalf("%d permutations, want 120", n)
	}
}

// §7 item 6, §3.5 item 6: lower values from any source change no watermark. W(20, 5, e3)
// then S(15, 2, e3) → changed (a flush time for generation 15 is learned), sealed 20 and
// merged 5 stay; again → unchanged. S(2, –, e4) → changed once (generation 2's time,
// inert below merged), then unchanged. Sealed stays 20@e3 and the oldest pending is
// generation 15's time (150), an upper bound.
func TestLowerValuesOnlyTeachTime(t *testing.T) {
	steps := []struct {
		e       Event
		changed bool
	}{
		{ev("a", 20, 5, 3, W), true},
		{ev("a", 15, 2, 3, S), true},
		{ev("a", 15, 2, 3, S), false},
		{ev("a", 2, none, 4, S), true},
		{ev("a", 2, none, 4, S), false},
	}
	td := NewTableDemand("t")
	var stored *Event
	for i, st := range steps {
		changed, err := td.Fold(st.e, int64(i), int64(i))
		if err != nil || changed != st.changed {
			t.Fatalf("fold step %d (%+v): changed %v err %v, want changed %v", i, st.e, changed, err, st.changed)
		}
		next, changed, err := Join(stored, st.e)
		if err != nil || changed != st.changed {
			t.Fatalf("join step %d: changed %v err %v, want changed %v", i, changed, err, st.changed)
		}
		stored = &next
		s := td.Shards["a"]
		if s.Sealed != (Mark{20, 3}) || s.Merged != (Mark{5, 3}) {
			t.Fatalf("step %d: sealed %v merged %v, want 20@e3 and 5@e3", i, s.Sealed, s.Merged)
		}
	}
	if got := td.OldestPending(); got != (Age{AtMs: 150, Kind: AgeUpperBound}) {
		t.Fatalf("oldest pending %+v, want 150 (upper bound)", got)
	}
	sameShards(t, "rebuild", td, rebuild(t, map[string]Event{"a": *stored}))
}

// §7 item 7, §3.5 item 7: X(50, 40, e2), W(60, 55, e1) → sealed 60@e1, merged 55@e1;
// then W(60, –, e3) → sealed 60@e3 (same generation, higher epoch), 5 pending.
func TestSameGenerationHigherEpoch(t *testing.T) {
	first := []Event{ev("a", 50, 40, 2, X), ev("a", 60, 55, 1, W)}
	every(t, first, func(what string, td *TableDemand) {
		s := td.Shards["a"]
		if s.Sealed != (Mark{60, 1}) || s.Merged != (Mark{55, 1}) {
			t.Fatalf("%s: sealed %v merged %v, want 60@e1 and 55@e1", what, s.Sealed, s.Merged)
		}
	})
	every(t, append(first, ev("a", 60, none, 3, W)), func(what string, td *TableDemand) {
		wantPending(t, what, td, 5)
		if s := td.Shards["a"].Sealed; s != (Mark{60, 3}) {
			t.Fatalf("%s: sealed %v, want 60@e3", what, s)
		}
	})
}

// §7 item 8, §3.5 item 8: flushes of generations 1, 2, 3 at 1000, 2000, 3000 → oldest
// 1000; after X(3, merged 1) → 2000. The fold, the stored join and a rebuild agree, and a
// newer flush never resets the clock.
func TestAgeClock(t *testing.T) {
	flushes := []Event{flush("a", 1, 1000), flush("a", 2, 2000), flush("a", 3, 3000)}
	check := func(what string, events []Event, want Age) {
		t.Helper()
		permutations(events, func(p []Event) {
			if got := fold(t, p...).OldestPending(); got != want {
				t.Fatalf("%s: fold oldest %+v, want %+v", what, got, want)
			}
			stored := storeJoin(t, p...)
			if got := rebuild(t, stored).OldestPending(); got != want {
				t.Fatalf("%s: rebuild oldest %+v, want %+v", what, got, want)
			}
			gens := slices.Sorted(maps.Keys(stored["a"].SealedTimes))
			if first := stored["a"].SealedTimes[gens[0]]; first != 1000 {
				t.Fatalf("%s: stored times %v, first entry %d, want 1000", what, stored["a"].SealedTimes, first)
			}
		})
	}
	check("flushes", flushes, Age{AtMs: 1000, Kind: AgeExact})
	merged := append(slices.Clone(flushes), ev("a", 3, 1, 1, X))
	check("merged 1", merged, Age{AtMs: 2000, Kind: AgeExact})
	check("newer flush", append(merged, flush("a", 4, 4000)), Age{AtMs: 2000, Kind: AgeExact})
}

// §7 item 9, §3.5 item 9: generations 1..128 flushed at g × 1000 → 1000 exact; after
// X(128, merged 64) → 64 pending, an upper bound at or after 65 000 (not exact), identical
// in reverse order and after a rebuild. Below the cap: generations 1..10 and merged 3 →
// 4000 exact.
func TestCapBound(t *testing.T) {
	var events []Event
	for g := uint64(1); g <= 128; g++ {
		events = append(events, flush("a", g, int64(g)*1000))
	}
	if got := fold(t, events...).OldestPending(); got != (Age{AtMs: 1000, Kind: AgeExact}) {
		t.Fatalf("oldest %+v, want 1000 exact", got)
	}
	events = append(events, ev("a", 128, 64, 1, X))
	fwd := fold(t, events...)
	wantPending(t, "merged 64", fwd, 64)
	got := fwd.OldestPending()
	if got.Kind != AgeUpperBound || got.AtMs < 65000 {
		t.Fatalf("oldest %+v, want an upper bound ≥ 65000", got)
	}
	for what, td := range map[string]*TableDemand{
		"reverse":         fold(t, reversed(events)...),
		"rebuild":         rebuild(t, storeJoin(t, events...)),
		"reverse rebuild": rebuild(t, storeJoin(t, reversed(events)...)),
	} {
		if a := td.OldestPending(); a != got {
			t.Fatalf("%s: oldest %+v, want %+v", what, a, got)
		}
		sameShards(t, what, fwd, td)
	}
	var small []Event
	for g := uint64(1); g <= 10; g++ {
		small = append(small, flush("a", g, int64(g)*1000))
	}
	small = append(small, ev("a", 10, 3, 1, X))
	if got := fold(t, small...).OldestPending(); got != (Age{AtMs: 4000, Kind: AgeExact}) {
		t.Fatalf("below the cap: oldest %+v, want 4000 exact", got)
	}
}

// §7 item 10, §3.5 item 10: 84 generations (cap + 20) forward and reverse → 84 pending,
// equal bytes, oldest = generation 1's time (10) exact, at most 64 times kept, and
// identical stored maps; a rebuild's oldest is 10.
func TestBeyondCapCounts(t *testing.T) {
	var events []Event
	for g := uint64(1); g <= SealedTimesCap+20; g++ {
		events = append(events, ev("a", g, none, 1, W))
	}
	fwd, rev := fold(t, events...), fold(t, reversed(events)...)
	for what, td := range map[string]*TableDemand{"forward": fwd, "reverse": rev} {
		wantPending(t, what, td, 84)
		if td.PendingBytes() != 84000 {
			t.Fatalf("%s: bytes %d, want 84000", what, td.PendingBytes())
		}
		if a := td.OldestPending(); a != (Age{AtMs: 10, Kind: AgeExact}) {
			t.Fatalf("%s: oldest %+v, want 10 exact", what, a)
		}
		if n := len(td.Shards["a"].SealedTimes); n > SealedTimesCap {
			t.Fatalf("%s: %d times kept, cap %d", what, n, SealedTimesCap)
		}
	}
	sf, sr := storeJoin(t, events...)["a"], storeJoin(t, reversed(events)...)["a"]
	if !maps.Equal(sf.SealedTimes, sr.SealedTimes) {
		t.Fatalf("stored maps differ:\n %v\n %v", sf.SealedTimes, sr.SealedTimes)
	}
	if a := rebuild(t, map[string]Event{"a": sf}).OldestPending(); a != (Age{AtMs: 10, Kind: AgeExact}) {
		t.Fatalf("rebuild oldest %+v, want 10 exact", a)
	}
}

// §7 item 12, §3.5 item 12: v 999 → ErrUnknownVersion with nothing folded; v 0 is
// accepted and written as 1; the minimal JSON decodes with v = 1.
func TestSchema(t *testing.T) {
	td := NewTableDemand("t")
	e := ev("a", 5, none, 1, W)
	e.V = 999
	if _, err := td.Fold(e, 1, 1); !errors.Is(err, ErrUnknownVersion) || !strings.Contains(err.Error(), "999") {
		t.Fatalf("fold v 999: %v, want ErrUnknownVersion naming 999", err)
	}
	if len(td.Shards) != 0 || td.ObservedRevision != 0 {
		t.Fatalf("v 999 folded something: %+v", td)
	}
	if _, _, err := Join(nil, e); !errors.Is(err, ErrUnknownVersion) {
		t.Fatalf("join v 999: %v", err)
	}
	if _, _, err := Join(&e, ev("a", 6, none, 1, W)); !errors.Is(err, ErrUnknownVersion) {
		t.Fatalf("join onto a stored v 999: %v", err)
	}
	e.V = 0
	if changed, err := td.Fold(e, 1, 1); err != nil || !changed {
		t.Fatalf("fold v 0: %v %v", changed, err)
	}
	rec, _, err := Join(nil, e)
	if err != nil || rec.V != 1 || !strings.Contains(string(rec.Encode()), `"v":1`) {
		t.Fatalf("join v 0: %s %v, want v 1", rec.Encode(), err)
	}
	if r := td.Shards["a"].Record("a"); r.V != 1 {
		t.Fatalf("record v %d", r.V)
	}
	min, err := DecodeEvent([]byte(`{"shard":"a","sealed_through":3,"flushed_at_ms":30,"writer_epoch":1,"source":"writer"}`))
	if err != nil || min.V != 1 || min.Sealed() != (Mark{3, 1}) || min.MergedThrough != nil {
		t.Fatalf("minimal JSON: %+v %v", min, err)
	}
	if _, err := DecodeEvent([]byte(`{"v":0,"shard":"a","sealed_through":3,"flushed_at_ms":30,"writer_epoch":1}`)); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "source") {
		t.Fatalf("missing source: %v, want ErrCorrupt naming it", err)
	}
	if _, err := DecodeEvent([]byte(`{"v":7,"shard":3,"future":{"x":1}}`)); !errors.Is(err, ErrUnknownVersion) {
		t.Fatalf("v 7 with an unknown shape: %v, want ErrUnknownVersion (the version decides first)", err)
	}
	for _, bad := range []string{`not json`, `{"v":"1"}`, `{"v":1,"shard":"a","sealed_through":-1,"flushed_at_ms":1,"writer_epoch":1,"source":"writer"}`,
		`{"v":1,"shard":"a","sealed_through":1,"flushed_at_ms":1,"writer_epoch":1,"source":"robot"}`} {
		if _, err := DecodeEvent([]byte(bad)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", bad, err)
		}
	}
}

// §7 item 13, §3.5 item 11: a(10, 4), b(3, 3), c(8), all e1 writer, folded at revisions
// 7, 9, 8 and now 100, 200, 300 → 14 pending, 18 000 bytes, observed revision 9, updated
// 300; re-folding b(3) at revision 50 changes nothing and the revision stays 9.
func TestAggregates(t *testing.T) {
	td := NewTableDemand("t")
	for _, f := range []struct {
		e        Event
		rev, now int64
	}{{ev("a", 10, 4, 1, W), 7, 100}, {ev("b", 3, 3, 1, W), 9, 200}, {ev("c", 8, none, 1, W), 8, 300}} {
		if changed, err := td.Fold(f.e, f.rev, f.now); err != nil || !changed {
			t.Fatalf("fold %+v: %v %v", f.e, changed, err)
		}
	}
	check := func(what string) {
		t.Helper()
		if td.PendingGenerations() != 14 || td.PendingBytes() != 18000 || td.ObservedRevision != 9 || td.UpdatedMs != 300 {
			t.Fatalf("%s: pending %d bytes %d revision %d updated %d, want 14, 18000, 9, 300", what,
				td.PendingGenerations(), td.PendingBytes(), td.ObservedRevision, td.UpdatedMs)
		}
	}
	check("folded")
	if changed, err := td.Fold(ev("b", 3, none, 1, W), 50, 400); err != nil || changed {
		t.Fatalf("re-fold b(3): changed %v err %v", changed, err)
	}
	check("after an ignored event")
	// a: merged 4, generation 5 has no time, the lowest kept above it is 10 (100); c: generation
	// 1 has no time, the lowest kept is 8 (80). The earlier, 80, is a bound.
	if a := td.OldestPending(); a != (Age{AtMs: 80, Kind: AgeUpperBound}) {
		t.Fatalf("oldest %+v, want 80 (upper bound)", a)
	}
}

// §3.5 item 16: lance-context's V1 tests, now regression "don'ts". Under V1 a scan below
// sealed was an error, a scan with a higher epoch lowered sealed, and an older epoch was
// ignored as stale; under the join nothing lowers and nothing is stale by epoch alone.
func TestV1RegressionDonts(t *testing.T) {
	td := NewTableDemand("t")
	step := func(e Event, wantChanged bool, sealed Mark, pending uint64) {
		t.Helper()
		changed, err := td.Fold(e, 1, 1)
		if err != nil || changed != wantChanged {
			t.Fatalf("fold %+v: changed %v err %v, want changed %v", e, changed, err, wantChanged)
		}
		if s := td.Shards[e.Shard]; s.Sealed != sealed || s.Pending() != pending {
			t.Fatalf("after %+v: sealed %v pending %d, want %v and %d", e, s.Sealed, s.Pending(), sealed, pending)
		}
	}
	// V1: writer 20@3, scan 15@3 → ScanCannotLower. Now: no error, a time is learned.
	step(ev("a", 20, none, 3, W), true, Mark{20, 3}, 20)
	step(ev("a", 15, none, 3, S), true, Mark{20, 3}, 20)
	// Scan 25@3 raises (as in V1).
	step(ev("a", 25, none, 3, S), true, Mark{25, 3}, 25)
	// V1: scan 2@4 lowered sealed to 2 with epoch 4. Now: sealed stays 25@e3.
	step(ev("a", 2, none, 4, S), true, Mark{25, 3}, 25)
	// V1: executor 50/40@2 then writer 60@1 → StaleEpoch. Now: 60@e1 wins by generation.
	step(ev("b", 50, 40, 2, X), true, Mark{50, 2}, 10)
	step(ev("b", 60, none, 1, W), true, Mark{60, 1}, 20)
	// Executor 50/39@2 → nothing new (as V1's NotNewer).
	step(ev("b", 50, 39, 2, X), false, Mark{60, 1}, 20)
	// V1: writer 5@3 → sealed 5, pending 0. Now: sealed stays 60, merged 40 kept.
	step(ev("b", 5, none, 3, W), true, Mark{60, 1}, 20)
	if m := td.Shards["b"].Merged; m != (Mark{40, 2}) {
		t.Fatalf("merged %v, want 40@e2 kept", m)
	}
}

// An Age reads as words in JSON (for `shale wal status --json`) and back.
func TestAgeJSON(t *testing.T) {
	b, err := json.Marshal(Age{AtMs: 150, Kind: AgeUpperBound})
	if err != nil || string(b) != `{"at_ms":150,"kind":"upper bound"}` {
		t.Fatalf("%s %v", b, err)
	}
	var a Age
	if err := json.Unmarshal(b, &a); err != nil || a != (Age{AtMs: 150, Kind: AgeUpperBound}) {
		t.Fatalf("%+v %v", a, err)
	}
	if err := json.Unmarshal([]byte(`{"kind":"soon"}`), &a); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unknown kind: %v", err)
	}
}

// A table's oldest pending age is exact only when every pending shard's is: a shard whose
// pending generations have no time, or only a bound, makes the table's a bound; a table
// whose pending shards have no time at all is unknown.
func TestTableAgeKinds(t *testing.T) {
	exact := flush("a", 1, 500)
	noTime := ev("b", 4, 1, 1, X) // executor only: 3 pending, no flush time
	bound := []Event{flush("c", 5, 900), ev("c", 5, 2, 1, X)}
	for _, c := range []struct {
		events []Event
		want   Age
	}{
		{[]Event{exact}, Age{AtMs: 500, Kind: AgeExact}},
		{[]Event{exact, noTime}, Age{AtMs: 500, Kind: AgeUpperBound}},
		{[]Event{noTime}, Age{Kind: AgeUnknown}},
		{append([]Event{exact}, bound...), Age{AtMs: 500, Kind: AgeUpperBound}},
		{append([]Event{noTime}, bound...), Age{AtMs: 900, Kind: AgeUpperBound}},
		{[]Event{ev("d", 3, 3, 1, W)}, Age{Kind: AgeNone}},
	} {
		if got := fold(t, c.events...).OldestPending(); got != c.want {
			t.Errorf("%+v: oldest %+v, want %+v", c.events, got, c.want)
		}
	}
}

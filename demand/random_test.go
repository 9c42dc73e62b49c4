package demand

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// randomEvent is lance-context §3.5's generator: shards a and b, epochs 1–3, sealed < 40,
// merged absent with probability 1/3 else < 40, all three sources, bytes = sealed × 7,
// time < 1000 (0: unknown). Shale's additions: the event sometimes carries a few flush
// times of its own, and one in eight belongs to another table incarnation.
func randomEvent(rng *rand.Rand) Event {
	e := Event{
		V:             rng.IntN(2), // 0 reads as 1
		Shard:         []string{"a", "b"}[rng.IntN(2)],
		SealedThrough: rng.Uint64N(40),
		WriterEpoch:   1 + rng.Uint64N(3),
		Source:        []Source{W, X, S}[rng.IntN(3)],
		FlushedAtMs:   rng.Int64N(1000),
	}
	e.SealedBytesThrough = e.SealedThrough * 7
	if rng.IntN(3) > 0 {
		e.MergedThrough = new(rng.Uint64N(40))
		if rng.IntN(4) == 0 {
			e.MergedEpoch = new(1 + rng.Uint64N(3))
		}
	}
	if rng.IntN(5) == 0 {
		e.SealedTimes = map[uint64]int64{}
		for range rng.IntN(4) {
			e.SealedTimes[1+rng.Uint64N(40)] = rng.Int64N(1000)
		}
	}
	if rng.IntN(8) == 0 {
		e.IncarnationSince = 1 + rng.Uint64N(2)
	}
	return e
}

func randomStream(rng *rand.Rand, n int) []Event {
	out := make([]Event, n)
	for i := range out {
		out[i] = randomEvent(rng)
	}
	return out
}

// sameAggregates fails unless a and b agree on pending generations, bytes and age.
func sameAggregates(t *testing.T, what string, a, b *TableDemand) {
	t.Helper()
	if a.PendingGenerations() != b.PendingGenerations() || a.PendingBytes() != b.PendingBytes() || a.OldestPending() != b.OldestPending() {
		t.Fatalf("%s: pending %d/%d bytes %d/%d oldest %+v/%+v", what, a.PendingGenerations(), b.PendingGenerations(),
			a.PendingBytes(), b.PendingBytes(), a.OldestPending(), b.OldestPending())
	}
}

// §7 item 11 (randomized), invariant 9: 200 streams of 5 events, every one of the 120
// permutations of each (and each doubled) folded and rebuilt through the storage join;
// 50 streams of 200 events forward, reversed and shuffled, plus a random subset replayed
// onto the result. Every variant must give the identical state in every field (marks,
// bytes, flush times, provenance), hence identical pending counts, bytes and ages.
func TestRandomized(t *testing.T) {
	seed := newSeed(t)
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed_1234_abcd_0001))
	for i := range 200 {
		events := randomStream(rng, 5)
		ref := fold(t, events...)
		what := fmt.Sprintf("short stream %d", i)
		sameShards(t, what+" rebuilt from JSON records", ref, rebuild(t, storeJoin(t, events...)))
		permutations(events, func(p []Event) {
			got := fold(t, p...)
			sameShards(t, what, ref, got)
			sameAggregates(t, what, ref, got)
			sameShards(t, what+" doubled", ref, fold(t, append(slices.Clone(p), p...)...))
			sameShards(t, what+" rebuilt", ref, rebuild(t, storeJoinWire(t, false, p...)))
		})
	}
	for i := range 50 {
		events := randomStream(rng, 200)
		ref := fold(t, events...)
		shuffled := slices.Clone(events)
		rng.Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
		for what, td := range map[string]*TableDemand{
			"reversed":         fold(t, reversed(events)...),
			"shuffled":         fold(t, shuffled...),
			"rebuilt":          rebuild(t, storeJoin(t, events...)),
			"shuffled rebuilt": rebuild(t, storeJoin(t, shuffled...)),
		} {
			what = fmt.Sprintf("long stream %d %s", i, what)
			sameShards(t, what, ref, td)
			sameAggregates(t, what, ref, td)
		}
		for _, e := range events {
			if rng.IntN(4) == 0 {
				if changed, err := ref.Fold(e, 0, 0); err != nil || changed {
					t.Fatalf("long stream %d: replaying %+v changed the final state (%v)", i, e, err)
				}
			}
		}
		for _, s := range ref.Shards {
			if len(s.SealedTimes) > SealedTimesCap {
				t.Fatalf("long stream %d: %d flush times kept", i, len(s.SealedTimes))
			}
		}
	}
}

// Seeded random streams published to a real etcd, each in a random order (and some
// events twice), then read back: the rebuild from etcd equals the in-memory fold in every
// field, and Publish reports a write exactly when the in-memory fold of the same order
// changed.
func TestRandomizedRebuildFromEtcd(t *testing.T) {
	seed := newSeed(t)
	rng := rand.New(rand.NewPCG(seed, 11))
	r := newRecords(t)
	ctx := testCtx(t)
	streams := [][]Event{}
	for range 40 {
		streams = append(streams, randomStream(rng, 5))
	}
	streams = append(streams, randomStream(rng, 200), randomStream(rng, 200))
	for i, events := range streams {
		table := fmt.Sprintf("t%d", i)
		order := slices.Clone(events)
		rng.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		order = append(order, order[:len(order)/3]...)
		mem := NewTableDemand(table)
		for _, e := range order {
			changed, err := mem.Fold(e, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			wrote, err := r.Publish(ctx, table, e)
			if err != nil {
				t.Fatalf("stream %d: publish %+v: %v", i, e, err)
			}
			if wrote != changed {
				t.Fatalf("stream %d: publish of %+v wrote %v, the fold changed %v", i, e, wrote, changed)
			}
		}
		sameShards(t, fmt.Sprintf("stream %d: in-memory fold of the original order", i), fold(t, events...), mem)
	}
	snap, err := r.ReadAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Skipped) != 0 {
		t.Fatalf("skipped %+v", snap.Skipped)
	}
	for i, events := range streams {
		table := fmt.Sprintf("t%d", i)
		got, ok := snap.Tables[table]
		if !ok {
			t.Fatalf("table %s not read", table)
		}
		want := fold(t, events...)
		sameShards(t, "rebuild from etcd of "+table, want, got)
		sameAggregates(t, "rebuild from etcd of "+table, want, got)
	}
}

package plan

import (
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

// TestOrderOldestFirstInCritical is §7 item 19: hot (4000 pending, waited 10 s) and tail
// (2 pending, waited 500 s, promotion at 100 s) are both Critical; hot's score is over
// 100× tail's, yet tail comes first, and with one slot it is the one placed.
func TestOrderOldestFirstInCritical(t *testing.T) {
	hot := aged(merge("hot", 4000), 10*time.Second, t0)
	tail := aged(merge("tail", 2), 500*time.Second, t0)
	in := Input{Now: t0, Tables: []TableState{hot, tail}, Executors: []Executor{executor("e1", 1, 64*gib)},
		Policies: map[string]Policy{"tail": {MaxTurnWait: 100 * time.Second}}}
	out := Plan(in)
	if len(out.Units) != 2 || out.Units[0].Table != "tail" || out.Units[1].Table != "hot" {
		t.Fatalf("order %+v", out.Units)
	}
	h, tl := out.Units[1], out.Units[0]
	if h.Class != ClassCritical || tl.Class != ClassCritical || tl.Reason != ReasonPromoted || h.Score <= 100*tl.Score {
		t.Fatalf("units %+v", out.Units)
	}
	wantPlaced(t, out, "tail", KindMergeWAL, "e1")
	wantSkip(t, out, "hot", KindMergeWAL, SkipNoCapacity)
}

// TestOrderClassBeatsScore: a (32 pending, Normal) and b (16 pending, very old, so
// Critical): b first.
func TestOrderClassBeatsScore(t *testing.T) {
	a, _ := Score(merge("a", 32), DefaultPolicy(), KindMergeWAL, t0)
	b, _ := Score(aged(merge("b", 16), 10*time.Hour, t0), DefaultPolicy(), KindMergeWAL, t0)
	if a.Class != ClassNormal || b.Class != ClassCritical || !Less(b, a) || Less(a, b) {
		t.Fatalf("a %+v b %+v", a, b)
	}
}

// TestOrderRules: each tie-break in turn.
func TestOrderRules(t *testing.T) {
	u := func(table string, k Kind, c Class, score float64, waited time.Duration, known bool) Unit {
		return Unit{Table: table, Kind: k, Class: c, Score: score, Waited: waited, WaitKnown: known}
	}
	for _, c := range []struct {
		name        string
		first, then Unit
	}{
		{"class", u("z", KindIndex, ClassRecovery, 0, 0, false), u("a", KindRecover, ClassCritical, 9, time.Hour, true)},
		{"critical: longer wait", u("z", KindMergeWAL, ClassCritical, 1, time.Hour, true), u("a", KindMergeWAL, ClassCritical, 99, time.Minute, true)},
		{"critical: unknown wait last", u("z", KindMergeWAL, ClassCritical, 1, 0, true), u("a", KindMergeWAL, ClassCritical, 99, 0, false)},
		{"critical: equal wait by score", u("z", KindMergeWAL, ClassCritical, 99, 0, false), u("a", KindMergeWAL, ClassCritical, 1, 0, false)},
		{"score", u("z", KindCompact, ClassMaintenance, 3, 0, false), u("a", KindIndex, ClassMaintenance, 2, 0, false)},
		{"score ignores wait outside Critical", u("z", KindMergeWAL, ClassNormal, 3, 0, false), u("a", KindMergeWAL, ClassNormal, 2, time.Hour, true)},
		{"infinite score", u("z", KindRecover, ClassRecovery, math.Inf(1), 0, false), u("a", KindRecover, ClassRecovery, 1e300, 0, false)},
		{"table", u("a", KindIndex, ClassTail, 0.5, 0, false), u("b", KindRecover, ClassTail, 0.5, 0, false)},
		{"kind", u("a", KindPublish, ClassTail, 0.5, 0, false), u("a", KindMergeWAL, ClassTail, 0.5, 0, false)},
		{"unknown kind last", u("a", KindIndex, ClassTail, 0.5, 0, false), u("a", Kind("retire"), ClassTail, 0.5, 0, false)},
	} {
		if !Less(c.first, c.then) || Less(c.then, c.first) {
			t.Errorf("%s: want %+v before %+v", c.name, c.first, c.then)
		}
	}
}

// randomUnits is n units with distinct (table, kind) and many ties.
func randomUnits(r *rand.Rand, n int) []Unit {
	seen := map[[2]string]bool{}
	var us []Unit
	for len(us) < n {
		u := Unit{Table: string(rune('a' + r.IntN(8))), Kind: Kinds[r.IntN(len(Kinds))], Class: Class(r.IntN(6)),
			Score: float64(r.IntN(4)) / 2, WaitKnown: r.IntN(2) == 0}
		if r.IntN(10) == 0 {
			u.Score = math.Inf(1)
		}
		if u.WaitKnown {
			u.Waited = time.Duration(r.IntN(3)) * time.Second
		}
		if key := [2]string{u.Table, string(u.Kind)}; !seen[key] {
			seen[key] = true
			us = append(us, u)
		}
	}
	return us
}

// TestOrderTotalAndStable: sorting forward, reversed and shuffled gives one order, with
// classes ascending; Less is irreflexive, asymmetric and transitive on these units.
func TestOrderTotalAndStable(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 1))
	for range 200 {
		us := randomUnits(r, 1+r.IntN(30))
		fwd := slices.Clone(us)
		Sort(fwd)
		rev := slices.Clone(us)
		slices.Reverse(rev)
		Sort(rev)
		shuf := slices.Clone(us)
		r.Shuffle(len(shuf), func(i, j int) { shuf[i], shuf[j] = shuf[j], shuf[i] })
		Sort(shuf)
		if !reflect.DeepEqual(fwd, rev) || !reflect.DeepEqual(fwd, shuf) {
			t.Fatalf("orders differ:\n%+v\n%+v\n%+v", fwd, rev, shuf)
		}
		for i := range fwd {
			if i > 0 && fwd[i-1].Class > fwd[i].Class {
				t.Fatalf("classes not ascending at %d: %+v", i, fwd)
			}
			if Less(fwd[i], fwd[i]) {
				t.Fatalf("Less reflexive on %+v", fwd[i])
			}
			for j := i + 1; j < len(fwd); j++ {
				if !Less(fwd[i], fwd[j]) || Less(fwd[j], fwd[i]) {
					t.Fatalf("not a strict total order: %+v vs %+v", fwd[i], fwd[j])
				}
			}
		}
	}
}

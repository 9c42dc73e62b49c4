package plan

import (
	"math"
	"testing"
	"time"
)

// TestScoreThresholds is lance-context §7 item 17: pending 3 is Tail, 16 Normal with a
// score of at least 2, 300 Critical for its backlog.
func TestScoreThresholds(t *testing.T) {
	p := DefaultPolicy()
	for _, c := range []struct {
		pending  uint64
		class    Class
		minScore float64
		reason   string
	}{
		{3, ClassTail, 3.0 / 8, ReasonTail},
		{8, ClassNormal, 1, ReasonScore},
		{16, ClassNormal, 2, ReasonScore},
		{255, ClassNormal, 255.0 / 8, ReasonScore},
		{256, ClassCritical, 32, ReasonCritical},
		{300, ClassCritical, 300.0 / 8, ReasonCritical},
	} {
		u, ok := Score(merge("t", c.pending), p, KindMergeWAL, t0)
		if !ok || u.Class != c.class || u.Score < c.minScore || u.Reason != c.reason {
			t.Errorf("pending %d: %+v ok=%v, want class %d score >= %v reason %s", c.pending, u, ok, c.class, c.minScore, c.reason)
		}
	}
	if _, ok := Score(merge("t", 0), p, KindMergeWAL, t0); ok {
		t.Error("nothing pending scored as merge work")
	}
}

// TestScoreAge is §7 item 18: MaxAge 100 s, promotion after 200 s, 2 pending. Waits of
// 0, 100 and 250 s give Tail ×1, Tail ×2 and Critical promoted for age.
func TestScoreAge(t *testing.T) {
	p := Policy{MaxAge: 100 * time.Second, MaxTurnWait: 200 * time.Second}
	for _, c := range []struct {
		waited time.Duration
		class  Class
		score  float64
		reason string
	}{
		{0, ClassTail, 0.25, ReasonTail},
		{100 * time.Second, ClassTail, 0.5, ReasonTail},
		{200 * time.Second, ClassTail, 0.75, ReasonTail}, // promotion is for waits longer than MaxTurnWait
		{250 * time.Second, ClassCritical, 0.875, ReasonPromoted},
	} {
		u, _ := Score(aged(merge("t", 2), c.waited, t0), p, KindMergeWAL, t0)
		if u.Class != c.class || math.Abs(u.Score-c.score) > 1e-9 || u.Reason != c.reason ||
			!u.WaitKnown || u.Waited != c.waited || u.Promote != (c.reason == ReasonPromoted) {
			t.Errorf("waited %v: %+v, want class %d score %v reason %s", c.waited, u, c.class, c.score, c.reason)
		}
	}
	// A flush time after Now (another process's clock ahead) is no wait, not a negative one.
	u, _ := Score(aged(merge("t", 2), -time.Hour, t0), p, KindMergeWAL, t0)
	if u.Waited != 0 || !u.WaitKnown || u.Score != 0.25 {
		t.Errorf("flush in the future: %+v", u)
	}
}

// TestScoreBoundNeverPromotes is §7 item 20: 128 sealed, 64 merged (64 pending), an
// upper-bound age far past MaxTurnWait 10 s: Normal, score exactly 8.0, no wait.
func TestScoreBoundNeverPromotes(t *testing.T) {
	st := aged(merge("t", 128-64), 24*time.Hour, t0)
	st.AgeExact = false
	u, _ := Score(st, Policy{MinGenerations: 8, MaxTurnWait: 10 * time.Second}, KindMergeWAL, t0)
	if u.Class != ClassNormal || u.Score != 8.0 || u.WaitKnown || u.Waited != 0 || u.Promote || u.Reason != ReasonScore {
		t.Fatalf("upper-bound age: %+v, want Normal, score exactly 8.0, no wait", u)
	}
	st.AgeKnown, st.AgeExact = false, false
	if u2, _ := Score(st, Policy{MaxTurnWait: 10 * time.Second}, KindMergeWAL, t0); u2 != u {
		t.Fatalf("unknown age %+v differs from upper bound %+v", u2, u)
	}
	st.AgeKnown, st.AgeExact = true, true // the same age, exact: boosted and promoted
	if u3, _ := Score(st, Policy{MaxTurnWait: 10 * time.Second}, KindMergeWAL, t0); u3.Class != ClassCritical || u3.Reason != ReasonPromoted || u3.Score <= 8 {
		t.Fatalf("exact age: %+v, want Critical promoted_for_age with a boost", u3)
	}
}

// TestScoreCriticalReasonPrefersBacklog: a backlog at the critical count that has also
// waited too long is Critical for its backlog, and still marked as promoted.
func TestScoreCriticalReasonPrefersBacklog(t *testing.T) {
	u, _ := Score(aged(merge("t", 300), 2*time.Hour, t0), DefaultPolicy(), KindMergeWAL, t0)
	if u.Class != ClassCritical || u.Reason != ReasonCritical || !u.Promote || u.Waited != 2*time.Hour {
		t.Fatalf("%+v", u)
	}
}

// TestScoreCompact: max(small, heavily deleted)/MinSmallFragments, a lone small
// fragment is no work, halved under a hot WAL.
func TestScoreCompact(t *testing.T) {
	p := DefaultPolicy()
	for _, c := range []struct {
		name           string
		small, deleted int
		pending        uint64
		ok             bool
		class          Class
		score          float64
	}{
		{"none", 0, 0, 0, false, 0, 0},
		{"one small", 1, 0, 0, false, 0, 0},
		{"two small", 2, 0, 0, true, ClassTail, 2.0 / 16},
		{"one heavily deleted", 1, 1, 0, true, ClassTail, 1.0 / 16},
		{"deleted over small", 3, 5, 0, true, ClassTail, 5.0 / 16},
		{"at threshold", 16, 0, 0, true, ClassMaintenance, 1},
		{"under a hot WAL", 32, 0, 8, true, ClassMaintenance, 1},
		{"halved below 1", 20, 0, 8, true, ClassTail, 20.0 / 32},
		{"tail WAL does not halve", 20, 0, 7, true, ClassMaintenance, 20.0 / 16},
	} {
		st := merge("t", c.pending)
		st.SmallFragments, st.DeletedRatioHigh = c.small, c.deleted
		u, ok := Score(st, p, KindCompact, t0)
		if ok != c.ok || (ok && (u.Class != c.class || u.Score != c.score)) {
			t.Errorf("%s: %+v ok=%v, want ok=%v class %d score %v", c.name, u, ok, c.ok, c.class, c.score)
		}
	}
}

// TestScoreIndexRecoverPublish: index score, recovery +Inf, publish on drift.
func TestScoreIndexRecoverPublish(t *testing.T) {
	p := DefaultPolicy()
	for _, c := range []struct {
		name  string
		st    TableState
		k     Kind
		ok    bool
		class Class
		score float64
	}{
		{"no uncovered", TableState{}, KindIndex, false, 0, 0},
		{"2 uncovered", TableState{UncoveredByIndex: 2}, KindIndex, true, ClassTail, 0.5},
		{"4 uncovered", TableState{UncoveredByIndex: 4}, KindIndex, true, ClassMaintenance, 1},
		{"no sidecars", TableState{}, KindRecover, false, 0, 0},
		{"sidecars", TableState{PendingSidecars: 1}, KindRecover, true, ClassRecovery, math.Inf(1)},
		{"no drift", TableState{}, KindPublish, false, 0, 0},
		{"drift", TableState{Drift: 3}, KindPublish, true, ClassCommitReady, 3},
		{"unknown kind", TableState{Drift: 3}, Kind("retire"), false, 0, 0},
	} {
		u, ok := Score(c.st, p, c.k, t0)
		if ok != c.ok || (ok && (u.Class != c.class || u.Score != c.score || u.Slots != 1)) {
			t.Errorf("%s: %+v ok=%v, want ok=%v class %d score %v", c.name, u, ok, c.ok, c.class, c.score)
		}
	}
}

// TestReservation: estimates, and the executor's whole budget when unknown or larger
// than the budget.
func TestReservation(t *testing.T) {
	e := executor("e", 1, 4*gib)
	st := TableState{Table: "t", PendingGenerations: 4, PendingBytes: 400 << 20, LargestGeneration: 50 << 20,
		SmallFragments: 20, CompactBytes: 300 << 20, UncoveredByIndex: 5, Drift: 1, PendingSidecars: 1}
	for _, c := range []struct {
		k    Kind
		want int64
	}{
		{KindMergeWAL, 2 * (100 << 20)}, // the mean generation is larger than the largest seen
		{KindCompact, 600 << 20},
		{KindIndex, 4 * gib}, // IndexBytes unknown: the whole budget
		{KindRecover, MetadataBytes},
		{KindPublish, MetadataBytes},
	} {
		u, _ := Score(st, DefaultPolicy(), c.k, t0)
		if got := Reservation(u, e); got != c.want {
			t.Errorf("%s: reservation %d, want %d", c.k, got, c.want)
		}
	}
	st.LargestGeneration = 300 << 20
	if u, _ := Score(st, DefaultPolicy(), KindMergeWAL, t0); u.Bytes != 600<<20 {
		t.Errorf("largest generation above the mean: %d", u.Bytes)
	}
	st.CompactBytes = 3 * gib
	if u, _ := Score(st, DefaultPolicy(), KindCompact, t0); Reservation(u, e) != 4*gib {
		t.Errorf("estimate above the budget: %d, want the whole budget", Reservation(u, e))
	}
	st.CompactBytes = math.MaxInt64/2 + 1
	if u, _ := Score(st, DefaultPolicy(), KindCompact, t0); u.Bytes != math.MaxInt64 {
		t.Errorf("saturating estimate: %d", u.Bytes)
	}
}

// TestPolicyWithDefaults: zero and negative knobs take defaults; set ones and Paused stay.
func TestPolicyWithDefaults(t *testing.T) {
	if got := (Policy{}).WithDefaults(); got != DefaultPolicy() {
		t.Fatalf("zero policy: %+v", got)
	}
	p := Policy{Paused: true, MinGenerations: 3, MaxAge: -time.Second, MaxConsecutiveTurns: 5}.WithDefaults()
	want := DefaultPolicy()
	want.Paused, want.MinGenerations, want.MaxConsecutiveTurns = true, 3, 5
	if p != want {
		t.Fatalf("%+v, want %+v", p, want)
	}
	in := Input{Policies: map[string]Policy{"a": {MinGenerations: 2}}}
	if in.policyOf("a").MinGenerations != 2 || in.policyOf("b") != DefaultPolicy() {
		t.Fatal("policyOf")
	}
}

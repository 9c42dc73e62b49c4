package plan

import (
	"strings"
	"testing"
	"time"
)

// busy is a table with work of every kind (merge Normal, compaction and index
// Maintenance).
func busy(name string) TableState {
	st := merge(name, 16)
	st.SmallFragments, st.UncoveredByIndex, st.Drift, st.PendingSidecars = 40, 8, 1, 1
	st.CompactBytes, st.IndexBytes = 100<<20, 100<<20
	return st
}

// one is an Input of the given tables on one large executor.
func one(tables ...TableState) Input {
	return Input{Now: t0, Tables: tables, Executors: []Executor{executor("e1", 8, 64*gib)}}
}

// TestEligibilityTableLevel: a dropped or unreadable table reports its reason for every
// kind (its work cannot be known); a paused one for every kind with work.
func TestEligibilityTableLevel(t *testing.T) {
	dropped := TableState{Table: "d", Dropped: true, PendingGenerations: 3}
	unreadable := TableState{Table: "u", Unreadable: "manifest 7: checksum mismatch"}
	paused := merge("p", 16)
	in := one(dropped, unreadable, paused)
	in.Policies = map[string]Policy{"p": {Paused: true}}
	out := Plan(in)
	for _, k := range Kinds {
		wantSkip(t, out, "d", k, SkipDropped)
		if s := wantSkip(t, out, "u", k, SkipUnreadable); !strings.Contains(s.Detail, "checksum mismatch") {
			t.Errorf("unreadable detail %q", s.Detail)
		}
	}
	if s := wantSkip(t, out, "p", KindMergeWAL, SkipPaused); s.Unit == nil || s.Unit.Class != ClassNormal {
		t.Errorf("paused skip carries no scored unit: %+v", s)
	}
	if _, s := outcome(out, "p", KindCompact); s != nil {
		t.Errorf("a kind with no work has a skip in Output: %+v", s)
	}
	if len(out.Placements) != 0 {
		t.Fatalf("placed %v", placedOrder(out))
	}
}

// TestEligibilityAssignments: an assignment of the kind makes it already_assigned; a
// write-turn assignment holds the turn from every write-turn kind but not from
// preparations; a preparation holds the preparation slot from the other preparation
// kind but not from the write turn. An assignment on a dead executor still holds them.
// Reasons marked "pass" are this pass's own turn or slot (the detail says so).
func TestEligibilityAssignments(t *testing.T) {
	const placed, pass = "placed", "pass"
	for _, c := range []struct {
		name   string
		holder Kind
		want   map[Kind]string // placed; pass (a reason this pass); else the reason held by a1
	}{
		{"merge running", KindMergeWAL, map[Kind]string{KindMergeWAL: string(SkipAlreadyAssigned),
			KindRecover: string(SkipTurnHeld), KindPublish: string(SkipTurnHeld), KindIndex: placed, KindCompact: pass}},
		{"recovery running", KindRecover, map[Kind]string{KindRecover: string(SkipAlreadyAssigned),
			KindMergeWAL: string(SkipTurnHeld), KindPublish: string(SkipTurnHeld), KindIndex: placed, KindCompact: pass}},
		{"compaction running", KindCompact, map[Kind]string{KindCompact: string(SkipAlreadyAssigned),
			KindIndex: string(SkipPreparationSlot), KindRecover: placed, KindMergeWAL: pass, KindPublish: pass}},
		{"index running", KindIndex, map[Kind]string{KindIndex: string(SkipAlreadyAssigned),
			KindCompact: string(SkipPreparationSlot), KindRecover: placed, KindMergeWAL: pass, KindPublish: pass}},
	} {
		for _, exec := range []string{"e1", "dead"} {
			in := one(busy("t"))
			in.Assignments = []Assignment{{ID: "a1", Table: "t", Kind: c.holder, Executor: exec, Bytes: gib, Slots: 1}}
			out := Plan(in)
			for _, k := range Kinds {
				switch w := c.want[k]; w {
				case placed:
					wantPlaced(t, out, "t", k, "e1")
				case pass:
					_, s := outcome(out, "t", k)
					if s == nil || (s.Reason != SkipTurnHeld && s.Reason != SkipPreparationSlot) || !strings.Contains(s.Detail, "this pass") {
						t.Errorf("%s on %s: %s: %+v, want held by this pass", c.name, exec, k, s)
					}
				default:
					if s := wantSkip(t, out, "t", k, SkipReason(w)); !strings.Contains(s.Detail, "a1") {
						t.Errorf("%s: %s detail %q does not name the assignment", c.name, k, s.Detail)
					}
				}
			}
		}
	}
}

// TestEligibilityFailureLedger: back-off skips with the retry time until it elapses;
// data failures need attention; a failure of one kind holds only that kind.
func TestEligibilityFailureLedger(t *testing.T) {
	in := one(merge("t", 16), merge("u", 16), merge("v", 16))
	in.Tables[0].SmallFragments, in.Tables[0].CompactBytes = 40, 1<<20
	in.Failures = map[string]map[Kind]Failure{
		"t": {KindMergeWAL: {Attempts: 1, Class: FailureRetryable, LastFailure: t0.Add(-time.Second), LastError: "store: 503"}},
		"u": {KindMergeWAL: {Attempts: 1, Class: FailureRetryable, LastFailure: t0.Add(-2 * time.Second)}},
		"v": {KindMergeWAL: {Attempts: 1, Class: FailureData, LastFailure: t0.Add(-24 * time.Hour), LastError: "fragment 3: corrupt"}},
	}
	out := Plan(in)
	s := wantSkip(t, out, "t", KindMergeWAL, SkipBackoff)
	if !s.RetryAt.Equal(t0.Add(time.Second)) || !strings.Contains(s.Detail, "store: 503") {
		t.Errorf("backoff skip %+v", s)
	}
	wantPlaced(t, out, "t", KindCompact, "")
	wantPlaced(t, out, "u", KindMergeWAL, "") // 2 s elapsed exactly: eligible
	if s := wantSkip(t, out, "v", KindMergeWAL, SkipNeedsAttention); !strings.Contains(s.Detail, "corrupt") {
		t.Errorf("needs-attention detail %q", s.Detail)
	}
	// Retryable failures past MaxAttemptsBeforeHold need attention too; ownership never.
	in.Failures["u"][KindMergeWAL] = Failure{Attempts: 3, Class: FailureRetryable, LastFailure: t0.Add(-time.Hour)}
	in.Failures["v"][KindMergeWAL] = Failure{Attempts: 99, Class: FailureOwnership, LastFailure: t0.Add(-time.Hour)}
	in.Policies = map[string]Policy{"u": {MaxAttemptsBeforeHold: 3}}
	out = Plan(in)
	wantSkip(t, out, "u", KindMergeWAL, SkipNeedsAttention)
	wantPlaced(t, out, "v", KindMergeWAL, "")
}

// TestEligibilityCheckOrder: with several reasons at once, the first in Plan's list is
// reported (pause before an assignment before the ledger before the held turn).
func TestEligibilityCheckOrder(t *testing.T) {
	in := one(busy("t"))
	in.Assignments = []Assignment{{ID: "a1", Table: "t", Kind: KindRecover, Executor: "e1"}}
	in.Failures = map[string]map[Kind]Failure{"t": {
		KindRecover:  {Attempts: 1, Class: FailureData},
		KindMergeWAL: {Attempts: 1, Class: FailureData},
	}}
	out := Plan(in)
	wantSkip(t, out, "t", KindRecover, SkipAlreadyAssigned)
	wantSkip(t, out, "t", KindMergeWAL, SkipNeedsAttention)
	wantSkip(t, out, "t", KindPublish, SkipTurnHeld)
	in.Policies = map[string]Policy{"t": {Paused: true}}
	out = Plan(in)
	for _, k := range Kinds {
		wantSkip(t, out, "t", k, SkipPaused)
	}
}

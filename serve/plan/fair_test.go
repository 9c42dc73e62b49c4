package plan

import (
	"strings"
	"testing"
	"time"
)

// hotWithDrift is a table with a Critical WAL backlog and maintenance drift to publish.
func hotWithDrift() TableState {
	st := merge("hot", 300)
	st.Drift = 1
	return st
}

// TestFairnessMaxConsecutiveTurns is §7 item 21: with MaxConsecutiveTurns 2, after two
// merge turns on a table with a commit-ready publish pending, the third turn goes to the
// publish, even though the merge is Critical. The bound yields only to a kind that is
// ready (not backing off) and counts only the newest run of turns.
func TestFairnessMaxConsecutiveTurns(t *testing.T) {
	M, P, R := KindMergeWAL, KindPublish, KindRecover
	for _, c := range []struct {
		name    string
		turns   []Kind
		policy  Policy
		backoff bool // the publish is backing off
		winner  Kind
	}{
		{"no history", nil, Policy{}, false, M},
		{"one merge turn", []Kind{M}, Policy{}, false, M},
		{"two merge turns", []Kind{M, M}, Policy{}, false, P},
		{"only the newest run counts", []Kind{M, M, P, M}, Policy{}, false, M},
		{"longer run", []Kind{P, M, M, M}, Policy{}, false, P},
		{"policy K=3", []Kind{M, M}, Policy{MaxConsecutiveTurns: 3}, false, M},
		{"policy K=3 reached", []Kind{M, M, M}, Policy{MaxConsecutiveTurns: 3}, false, P},
		{"the other kind backs off", []Kind{M, M}, Policy{}, true, M},
		{"publish had its turns", []Kind{P, P}, Policy{}, false, M},
		{"preparations in the history are not the merge's", []Kind{M, KindCompact, M}, Policy{}, false, M},
		{"recovery yields too", []Kind{R, R}, Policy{}, false, M},
	} {
		st := hotWithDrift()
		if c.name == "recovery yields too" {
			st.PendingSidecars = 1
		}
		in := one(st)
		in.Policies = map[string]Policy{"hot": c.policy}
		in.Histories = map[string]History{"hot": {Turns: c.turns}}
		if c.backoff {
			in.Failures = map[string]map[Kind]Failure{"hot": {P: {Attempts: 1, Class: FailureRetryable, LastFailure: t0}}}
		}
		out := Plan(in)
		var turn []Kind
		for _, p := range out.Placements {
			if TakesWriteTurn(p.Unit.Kind) {
				turn = append(turn, p.Unit.Kind)
			}
		}
		if len(turn) != 1 || turn[0] != c.winner {
			t.Errorf("%s: write turns placed %v, want [%s]", c.name, turn, c.winner)
			continue
		}
		if c.winner == P || (c.name == "recovery yields too") {
			loser := M
			if c.name == "recovery yields too" {
				loser = R
			}
			s := wantSkip(t, out, "hot", loser, SkipFairnessYield)
			if !strings.Contains(s.Detail, string(c.winner)) || s.Unit == nil {
				t.Errorf("%s: yield skip %+v does not name %s", c.name, s, c.winner)
			}
		}
	}
}

// TestFairnessSequence: a table whose WAL stays Critical and a publish that becomes
// ready at pass 0: over passes that each finish their work, the publish gets the turn
// at pass K (after K merge turns), and the merges resume after it.
func TestFairnessSequence(t *testing.T) {
	for _, k := range []int{1, 2, 4} {
		st := hotWithDrift()
		h := History{}
		var got []Kind
		for pass := 0; pass < k+3; pass++ {
			in := one(st)
			in.Now = t0.Add(time.Duration(pass) * time.Second)
			in.Policies = map[string]Policy{"hot": {MaxConsecutiveTurns: k}}
			in.Histories = map[string]History{"hot": h}
			out := Plan(in)
			if len(out.Placements) != 1 {
				t.Fatalf("K=%d pass %d: placed %v", k, pass, placedOrder(out))
			}
			kind := out.Placements[0].Unit.Kind
			got = append(got, kind)
			h.Turns = append(h.Turns, kind)
			if kind == KindPublish {
				st.Drift = 0
			}
		}
		for i, kind := range got {
			if want := KindMergeWAL; (i == k) != (kind == KindPublish) || (i != k && kind != want) {
				t.Fatalf("K=%d: turns %v, want the publish at turn %d", k, got, k)
			}
		}
	}
}

// TestFairnessPreparationsBesideAHotWAL: a hot WAL cannot starve compaction or index
// builds: they prepare beside the merge, in the same pass, whatever the merge's history.
func TestFairnessPreparationsBesideAHotWAL(t *testing.T) {
	st := merge("hot", 4000)
	st.SmallFragments, st.CompactBytes = 64, 1<<20
	in := one(st)
	in.Histories = map[string]History{"hot": {Turns: []Kind{KindMergeWAL, KindMergeWAL, KindMergeWAL}}}
	out := Plan(in)
	wantPlaced(t, out, "hot", KindMergeWAL, "e1") // nothing else wants the turn
	wantPlaced(t, out, "hot", KindCompact, "e1")
}

// TestFairnessOldTailWorkIsPromoted: a one-generation backlog that waited past
// MaxTurnWait (exact age) is promoted to Critical and takes the only merge slot ahead of
// a larger Normal backlog; with an upper-bound age it stays Tail and waits.
func TestFairnessOldTailWorkIsPromoted(t *testing.T) {
	old := aged(merge("old", 1), 61*time.Minute, t0)
	in := Input{Now: t0, Tables: []TableState{old, merge("big", 100)}, Executors: []Executor{executor("e1", 1, 64*gib)}}
	out := Plan(in)
	if p := wantPlaced(t, out, "old", KindMergeWAL, "e1"); p.Unit.Class != ClassCritical || p.Unit.Reason != ReasonPromoted {
		t.Fatalf("old tail work placed as %+v", p.Unit)
	}
	wantSkip(t, out, "big", KindMergeWAL, SkipNoCapacity)
	in.Tables[0].AgeExact = false
	out = Plan(in)
	wantPlaced(t, out, "big", KindMergeWAL, "e1")
	wantSkip(t, out, "old", KindMergeWAL, SkipBelowThreshold)
}

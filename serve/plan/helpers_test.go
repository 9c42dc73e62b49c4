package plan

import (
	"testing"
	"time"
)

// t0 is the tests' clock.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

const gib = int64(1) << 30

// slots gives n slots of every kind.
func slots(n int) map[Kind]int {
	m := map[Kind]int{}
	for _, k := range Kinds {
		m[k] = n
	}
	return m
}

// executor is an executor with n slots of every kind and bytes of budget.
func executor(id string, n int, bytes int64) Executor {
	return Executor{ID: id, Slots: slots(n), Bytes: bytes}
}

// merge is a table with pending generations of 1 MiB each and no age.
func merge(table string, pending uint64) TableState {
	return TableState{Table: table, PendingGenerations: pending, PendingBytes: pending << 20, LargestGeneration: 1 << 20}
}

// aged is st with an exact oldest flush waited ago.
func aged(st TableState, waited time.Duration, now time.Time) TableState {
	st.OldestPending, st.AgeKnown, st.AgeExact = now.Add(-waited), true, true
	return st
}

// outcome finds table/kind in out: its placement or its skip (both nil: neither).
func outcome(out Output, table string, k Kind) (*Placement, *Skip) {
	var p *Placement
	var s *Skip
	for i := range out.Placements {
		if out.Placements[i].Unit.Table == table && out.Placements[i].Unit.Kind == k {
			p = &out.Placements[i]
		}
	}
	for i := range out.Skips {
		if out.Skips[i].Table == table && out.Skips[i].Kind == k {
			s = &out.Skips[i]
		}
	}
	return p, s
}

// wantPlaced fails unless table/kind is placed (on exec, when exec != "").
func wantPlaced(t *testing.T, out Output, table string, k Kind, exec string) *Placement {
	t.Helper()
	p, s := outcome(out, table, k)
	if p == nil {
		t.Fatalf("%s/%s not placed (skip %+v)", table, k, s)
	}
	if s != nil {
		t.Fatalf("%s/%s placed and skipped (%s)", table, k, s.Reason)
	}
	if exec != "" && p.Executor != exec {
		t.Fatalf("%s/%s placed on %s, want %s", table, k, p.Executor, exec)
	}
	return p
}

// wantSkip fails unless table/kind is skipped for reason.
func wantSkip(t *testing.T, out Output, table string, k Kind, reason SkipReason) *Skip {
	t.Helper()
	p, s := outcome(out, table, k)
	if p != nil {
		t.Fatalf("%s/%s placed on %s, want skip %s", table, k, p.Executor, reason)
	}
	if s == nil {
		t.Fatalf("%s/%s neither placed nor skipped, want skip %s", table, k, reason)
	}
	if s.Reason != reason {
		t.Fatalf("%s/%s skipped for %s (%s), want %s", table, k, s.Reason, s.Detail, reason)
	}
	return s
}

// placedOrder is the (table, kind) of out's placements, in order.
func placedOrder(out Output) []string {
	var s []string
	for _, p := range out.Placements {
		s = append(s, p.Unit.Table+"/"+string(p.Unit.Kind))
	}
	return s
}

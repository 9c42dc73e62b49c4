package plan

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// TestPlacementReservationsNotSamples is §7 item 50's last case: an executor with a
// 2 GiB budget and 2 GiB already reserved by assignments gets no placement, however
// idle it may look; a dead executor's reservations free nothing and cost nothing.
func TestPlacementReservationsNotSamples(t *testing.T) {
	in := Input{Now: t0, Tables: []TableState{merge("t", 16), merge("u", 16)},
		Executors: []Executor{executor("e1", 4, 2*gib)},
		Assignments: []Assignment{{ID: "a", Table: "x", Kind: KindCompact, Executor: "e1", Bytes: 2 * gib, Slots: 1},
			{ID: "b", Table: "y", Kind: KindCompact, Executor: "gone", Bytes: 64 * gib, Slots: 1}}}
	out := Plan(in)
	wantSkip(t, out, "t", KindMergeWAL, SkipNoCapacity)
	wantSkip(t, out, "u", KindMergeWAL, SkipNoCapacity)
	in.Assignments[0].Bytes = 2*gib - 4<<20 // room for exactly one merge (2 MiB each)
	out = Plan(in)
	wantPlaced(t, out, "t", KindMergeWAL, "e1")
	wantPlaced(t, out, "u", KindMergeWAL, "e1")
	in.Assignments[0].Bytes = 2*gib - 3<<20
	out = Plan(in)
	wantPlaced(t, out, "t", KindMergeWAL, "e1")
	wantSkip(t, out, "u", KindMergeWAL, SkipNoCapacity)
}

// TestPlacementChoosesMostFreeBytesThenID.
func TestPlacementChoosesMostFreeBytesThenID(t *testing.T) {
	in := Input{Now: t0, Tables: []TableState{merge("t", 16)},
		Executors: []Executor{executor("c", 1, 4*gib), executor("b", 1, 8*gib), executor("a", 1, 8*gib)}}
	wantPlaced(t, Plan(in), "t", KindMergeWAL, "a")
	in.Assignments = []Assignment{{ID: "x", Table: "x", Kind: KindIndex, Executor: "a", Bytes: 1}}
	wantPlaced(t, Plan(in), "t", KindMergeWAL, "b")
	in.Executors[1].Slots[KindMergeWAL] = 0
	wantPlaced(t, Plan(in), "t", KindMergeWAL, "a")
	in.Executors[0].Bytes, in.Executors[2].Slots = 0, map[Kind]int{} // no budget, no slots
	wantSkip(t, Plan(in), "t", KindMergeWAL, SkipNoCapacity)
}

// TestPlacementSlots: a kind's slots bound its assignments per executor; other kinds'
// slots are separate; an assignment with Slots 0 counts as one.
func TestPlacementSlots(t *testing.T) {
	e := Executor{ID: "e1", Bytes: 64 * gib, Slots: map[Kind]int{KindMergeWAL: 2, KindIndex: 1}}
	in := Input{Now: t0, Executors: []Executor{e},
		Assignments: []Assignment{{ID: "a", Table: "x", Kind: KindMergeWAL, Executor: "e1", Bytes: 1}}}
	for _, n := range []string{"t", "u"} {
		st := merge(n, 16)
		st.UncoveredByIndex, st.IndexBytes = 4, 1<<20
		in.Tables = append(in.Tables, st)
	}
	out := Plan(in)
	wantPlaced(t, out, "t", KindMergeWAL, "e1")
	wantSkip(t, out, "u", KindMergeWAL, SkipNoCapacity)
	wantPlaced(t, out, "t", KindIndex, "e1")
	wantSkip(t, out, "u", KindIndex, SkipNoCapacity)
}

// TestPlacementUnknownBytesTakeTheWholeBudget: a unit with no byte estimate reserves the
// whole budget, so it fits only an executor with nothing reserved.
func TestPlacementUnknownBytesTakeTheWholeBudget(t *testing.T) {
	st := TableState{Table: "t", PendingGenerations: 16} // no bytes known
	in := Input{Now: t0, Tables: []TableState{st}, Executors: []Executor{executor("busy", 4, 64*gib), executor("idle", 4, 8*gib)},
		Assignments: []Assignment{{ID: "a", Table: "x", Kind: KindIndex, Executor: "busy", Bytes: 1}}}
	p := wantPlaced(t, Plan(in), "t", KindMergeWAL, "idle")
	if p.Bytes != 8*gib || p.Unit.Bytes != 0 {
		t.Fatalf("placement %+v, want the whole 8 GiB budget", p)
	}
	in.Executors = in.Executors[:1]
	wantSkip(t, Plan(in), "t", KindMergeWAL, SkipNoCapacity)
}

// TestPlacementCap: at most MaxPlacements per pass (default 8), in order; the rest are
// placements_capped.
func TestPlacementCap(t *testing.T) {
	var tables []TableState
	for i := range 12 {
		tables = append(tables, merge(fmt.Sprintf("t%02d", i), uint64(100-i))) // t00 scores highest
	}
	in := Input{Now: t0, Tables: tables, Executors: []Executor{executor("e1", 100, 64*gib)}}
	for _, c := range []struct{ max, want int }{{0, DefaultMaxPlacements}, {-1, DefaultMaxPlacements}, {3, 3}, {20, 12}} {
		in.MaxPlacements = c.max
		out := Plan(in)
		if len(out.Placements) != c.want {
			t.Fatalf("MaxPlacements %d: %d placed, want %d", c.max, len(out.Placements), c.want)
		}
		for i := range tables {
			name := fmt.Sprintf("t%02d", i)
			if i < c.want {
				wantPlaced(t, out, name, KindMergeWAL, "e1")
			} else {
				wantSkip(t, out, name, KindMergeWAL, SkipPlacementsCapped)
			}
		}
	}
}

// TestPlacementOneTurnOnePreparationPerTable: within a pass, one write-turn unit and
// one preparation per table, the best in order winning each.
func TestPlacementOneTurnOnePreparationPerTable(t *testing.T) {
	out := Plan(one(busy("t")))
	if got, want := placedOrder(out), []string{"t/recover", "t/index"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("placed %v, want %v", got, want)
	}
	wantSkip(t, out, "t", KindPublish, SkipTurnHeld)
	wantSkip(t, out, "t", KindMergeWAL, SkipTurnHeld)
	wantSkip(t, out, "t", KindCompact, SkipPreparationSlot)
}

// TestPlacementHoldsAnExecutorForTheOldestCritical: when the oldest Critical unit fits
// nowhere, the executor it fits best is held for it: later, smaller units are not placed
// there (they would keep it from ever fitting), but may go elsewhere.
func TestPlacementHoldsAnExecutorForTheOldestCritical(t *testing.T) {
	crit := TableState{Table: "crit", PendingGenerations: 300} // bytes unknown: needs a whole budget
	small := merge("small", 16)
	comp := TableState{Table: "comp", SmallFragments: 32, CompactBytes: 1 << 20}
	in := Input{Now: t0, Tables: []TableState{crit, small, comp},
		Executors:   []Executor{executor("big", 4, 64*gib), {ID: "prep", Bytes: 64 * gib, Slots: map[Kind]int{KindCompact: 1}}},
		Assignments: []Assignment{{ID: "a", Table: "x", Kind: KindMergeWAL, Executor: "big", Bytes: gib}}}
	out := Plan(in)
	wantSkip(t, out, "crit", KindMergeWAL, SkipNoCapacity)
	if s := wantSkip(t, out, "small", KindMergeWAL, SkipNoCapacity); !strings.Contains(s.Detail, "held for merge_wal on crit") {
		t.Fatalf("detail %q", s.Detail)
	}
	wantPlaced(t, out, "comp", KindCompact, "prep") // the executor that is not held still works
	// Once the assignment is released, the critical unit takes the executor.
	in.Assignments = nil
	out = Plan(in)
	wantPlaced(t, out, "crit", KindMergeWAL, "big")
	wantSkip(t, out, "small", KindMergeWAL, SkipNoCapacity) // the whole budget is taken
}

// TestPlacementTailOnlyOnIdleCapacity: Tail work is placed only when no higher class
// was left waiting for capacity, and only on an executor with every slot of its kind
// free; otherwise it is below_threshold.
func TestPlacementTailOnlyOnIdleCapacity(t *testing.T) {
	tail := merge("tail", 2)
	in := Input{Now: t0, Tables: []TableState{tail}, Executors: []Executor{executor("e1", 2, 64*gib)}}
	wantPlaced(t, Plan(in), "tail", KindMergeWAL, "e1")
	// A merge slot in use: not idle.
	in.Assignments = []Assignment{{ID: "a", Table: "x", Kind: KindMergeWAL, Executor: "e1", Bytes: 1}}
	wantSkip(t, Plan(in), "tail", KindMergeWAL, SkipBelowThreshold)
	// Another kind in use does not make merge capacity busy.
	in.Assignments[0].Kind = KindCompact
	wantPlaced(t, Plan(in), "tail", KindMergeWAL, "e1")
	// Higher-class work waiting for capacity keeps tail work off even idle executors.
	in.Assignments = nil
	in.Tables = append(in.Tables, TableState{Table: "big", PendingGenerations: 64}) // unknown bytes
	in.Executors = append(in.Executors, Executor{ID: "e0", Bytes: gib, Slots: map[Kind]int{KindCompact: 1}})
	in.Assignments = []Assignment{{ID: "a", Table: "x", Kind: KindCompact, Executor: "e1", Bytes: 1}}
	out := Plan(in)
	wantSkip(t, out, "big", KindMergeWAL, SkipNoCapacity)
	wantSkip(t, out, "tail", KindMergeWAL, SkipBelowThreshold)
}

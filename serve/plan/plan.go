package plan

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Plan decides one planning pass: it scores every table's work (Score), refuses what is
// not eligible with a named SkipReason, orders the rest (Less) and places it on
// executors (placement rules below). Pure and deterministic: no I/O, no clock but
// in.Now, and the same input gives the same output whatever the order of in's slices.
// in is not modified. Executor ids must be unique; of two TableStates with one name the
// later in in.Tables is used.
//
// Eligibility, per (table, kind) with work, the first that applies:
//
//   - SkipDropped, SkipUnreadable: the table cannot be worked on (reported for every
//     kind, since its work cannot be known);
//   - SkipPaused: its policy pauses it;
//   - SkipAlreadyAssigned: an assignment of this kind exists on the table;
//   - SkipNeedsAttention, SkipBackoff: the failure ledger (RetryAfter);
//   - SkipTurnHeld: a write-turn kind while an assignment holds the table's write turn;
//     SkipPreparationSlot: compaction or index while the other one runs on the table
//     (one preparation per table; preparations run beside the turn holder);
//   - SkipFairnessYield: this write-turn kind took the table's last MaxConsecutiveTurns
//     write turns (History) while another write-turn kind has an eligible unit there;
//     it applies in every class, Critical included, so the other kind gets the next turn.
//
// Placement walks the eligible units in order and places each on a live executor, at
// most in.MaxPlacements (default DefaultMaxPlacements) per pass:
//
//   - one write turn per table (assignments' and this pass's): SkipTurnHeld; one
//     preparation per table: SkipPreparationSlot;
//   - a Tail unit is placed only on idle capacity: when no unit of a higher class was
//     left unplaced for capacity or the cap, and on an executor none of whose slots of
//     its kind is in use; otherwise SkipBelowThreshold;
//   - the cap reached: SkipPlacementsCapped;
//   - the executor: one with a free slot of the kind and free bytes >= Reservation,
//     where free = Executor.Bytes - the bytes of the assignments on it (reservations,
//     never sampled); the most free bytes wins, then the lowest id; an executor with no
//     budget (Bytes <= 0) takes nothing. None: SkipNoCapacity.
//
// Critical units come right after Recovery in the order, oldest first, so the oldest
// Critical unit is placed before any other (but recovery) whenever a feasible executor
// exists. When none exists, the executor it would fit best
// (a slot of its kind, the most free bytes, then the lowest id) is held for it: nothing
// else is placed there this pass, so work finishing there frees it for that unit rather
// than for newer work (otherwise a large unit could wait forever behind small ones).
func Plan(in Input) Output {
	ps := newPass(in)
	var cands []Unit
	var out Output
	var skips []Skip
	for _, st := range ps.tables {
		for _, v := range ps.evaluate(st) {
			if v.unit != nil {
				out.Units = append(out.Units, *v.unit)
			}
			switch {
			case v.skip.Reason == SkipNoWork:
			case v.skip.Reason != SkipNone:
				skips = append(skips, v.skip)
			default:
				cands = append(cands, *v.unit)
			}
		}
	}
	Sort(out.Units)
	Sort(cands)
	placed, placeSkips := ps.place(cands)
	out.Placements = placed
	skips = append(skips, placeSkips...)
	slices.SortFunc(skips, func(a, b Skip) int {
		if c := strings.Compare(a.Table, b.Table); c != 0 {
			return c
		}
		return cmp.Compare(kindIndex(a.Kind), kindIndex(b.Kind))
	})
	out.Skips = skips
	return out
}

// pass is one pass's input, sorted and indexed.
type pass struct {
	in      Input
	tables  []TableState // by name
	execs   []Executor   // by id
	assigns []Assignment // by id
	byKind  map[string]map[Kind]Assignment
	turn    map[string]Assignment // the table's write-turn holder
	prep    map[string]Assignment // the table's preparation (compaction or index)
}

func newPass(in Input) *pass {
	ps := &pass{in: in, byKind: map[string]map[Kind]Assignment{},
		turn: map[string]Assignment{}, prep: map[string]Assignment{}}
	tables := slices.Clone(in.Tables)
	slices.SortStableFunc(tables, func(a, b TableState) int { return strings.Compare(a.Table, b.Table) })
	for i, st := range tables { // a duplicate name: the last entry in in.Tables wins
		if i+1 < len(tables) && tables[i+1].Table == st.Table {
			continue
		}
		ps.tables = append(ps.tables, st)
	}
	ps.execs = slices.Clone(in.Executors)
	slices.SortFunc(ps.execs, func(a, b Executor) int { return strings.Compare(a.ID, b.ID) })
	ps.assigns = slices.Clone(in.Assignments)
	slices.SortFunc(ps.assigns, compareAssignments)
	for _, a := range ps.assigns {
		if ps.byKind[a.Table] == nil {
			ps.byKind[a.Table] = map[Kind]Assignment{}
		}
		if _, ok := ps.byKind[a.Table][a.Kind]; !ok {
			ps.byKind[a.Table][a.Kind] = a
		}
		if _, ok := ps.turn[a.Table]; !ok && TakesWriteTurn(a.Kind) {
			ps.turn[a.Table] = a
		}
		if _, ok := ps.prep[a.Table]; !ok && preparation(a.Kind) {
			ps.prep[a.Table] = a
		}
	}
	return ps
}

func compareAssignments(a, b Assignment) int {
	return cmp.Or(strings.Compare(a.ID, b.ID), strings.Compare(a.Table, b.Table),
		cmp.Compare(kindIndex(a.Kind), kindIndex(b.Kind)), strings.Compare(a.Executor, b.Executor),
		cmp.Compare(a.Bytes, b.Bytes), cmp.Compare(a.Slots, b.Slots))
}

// preparation reports whether k runs outside the write turn, in the table's one
// preparation slot.
func preparation(k Kind) bool { return k == KindCompact || k == KindIndex }

func describe(a Assignment) string {
	return fmt.Sprintf("%s assignment %s on executor %s", a.Kind, a.ID, a.Executor)
}

package plan

import (
	"slices"
	"strings"
)

// Less is the planner's order: class ascending; within ClassCritical the longest exact
// wait first (units with no exact wait after all that have one); within every other
// class, and between Critical units of equal wait, the higher score first; then the
// table name, then the kind in Kinds order. It is a strict total order over units with
// distinct (table, kind), so sorting is deterministic whatever the input order.
func Less(a, b Unit) bool { return compare(a, b) < 0 }

// Sort sorts units in place by Less.
func Sort(units []Unit) { slices.SortFunc(units, compare) }

func compare(a, b Unit) int {
	if a.Class != b.Class {
		return cmpInt(int(a.Class), int(b.Class))
	}
	if a.Class == ClassCritical {
		if a.WaitKnown != b.WaitKnown {
			if a.WaitKnown {
				return -1
			}
			return 1
		}
		if a.Waited != b.Waited {
			return -cmpInt(int64(a.Waited), int64(b.Waited))
		}
	}
	if a.Score != b.Score {
		if a.Score > b.Score {
			return -1
		}
		return 1
	}
	if c := strings.Compare(a.Table, b.Table); c != 0 {
		return c
	}
	return cmpInt(kindIndex(a.Kind), kindIndex(b.Kind))
}

func cmpInt[T int | int64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// kindIndex is k's position in Kinds (unknown kinds after every known one).
func kindIndex(k Kind) int {
	if i := slices.Index(Kinds, k); i >= 0 {
		return i
	}
	return len(Kinds)
}

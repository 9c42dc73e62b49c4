package plan

import (
	"errors"
	"fmt"
	"slices"
)

// ErrUnknownTable is returned (wrapped, naming the table) by Why for a table that is
// not in the Input.
var ErrUnknownTable = errors.New("plan: unknown table")

// Explanation is what one planning pass decides for one kind of work on one table:
// exactly one of Placement and Skip is set. A kind with nothing to do has a Skip with
// SkipNoWork (and no Unit).
type Explanation struct {
	Kind      Kind       // the kind of work
	Placement *Placement // placed this pass: where, with what reservation
	Skip      *Skip      // not placed: the named reason, the unit when it was scored
}

// Why explains table's work in the pass in would make: one Explanation per kind, in
// Kinds order, as Plan decides it (the whole pass is planned, since capacity, the cap
// and ordering depend on every table). It serves `shale why TABLE` and
// /v1/tables/{name}. Errors: ErrUnknownTable when in.Tables has no such table.
func Why(in Input, table string) ([]Explanation, error) {
	if !slices.ContainsFunc(in.Tables, func(st TableState) bool { return st.Table == table }) {
		return nil, fmt.Errorf("%w %q", ErrUnknownTable, table)
	}
	return Explain(Plan(in), table), nil
}

// Explain picks table's explanations out of a pass's Output (as Why, without planning
// again): one per kind, in Kinds order.
func Explain(out Output, table string) []Explanation {
	ex := make([]Explanation, len(Kinds))
	for i, k := range Kinds {
		ex[i].Kind = k
	}
	for i := range out.Placements {
		if p := &out.Placements[i]; p.Unit.Table == table {
			if j := kindIndex(p.Unit.Kind); j < len(ex) {
				pp := *p
				ex[j].Placement = &pp
			}
		}
	}
	for i := range out.Skips {
		if s := &out.Skips[i]; s.Table == table {
			if j := kindIndex(s.Kind); j < len(ex) {
				ss := *s
				ex[j].Skip = &ss
			}
		}
	}
	for i := range ex {
		if ex[i].Placement == nil && ex[i].Skip == nil {
			ex[i].Skip = &Skip{Table: table, Kind: ex[i].Kind, Reason: SkipNoWork}
		}
	}
	return ex
}

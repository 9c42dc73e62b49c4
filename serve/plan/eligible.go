package plan

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// verdict is one (table, kind) after eligibility: a candidate (skip.Reason SkipNone,
// unit set) or a skip.
type verdict struct {
	unit *Unit
	skip Skip
}

// maxDetailError caps a failure's text quoted in a skip's detail.
const maxDetailError = 512

// evaluate scores and filters every kind of table st, in Kinds order (the rules are
// Plan's).
func (ps *pass) evaluate(st TableState) []verdict {
	pol := ps.in.policyOf(st.Table)
	vs := make([]verdict, len(Kinds))
	for i, k := range Kinds {
		v := &vs[i]
		v.skip = Skip{Table: st.Table, Kind: k}
		switch {
		case st.Dropped:
			v.skip.Reason, v.skip.Detail = SkipDropped, "the table was dropped"
			continue
		case st.Unreadable != "":
			v.skip.Reason, v.skip.Detail = SkipUnreadable, capText(st.Unreadable)
			continue
		}
		u, ok := Score(st, pol, k, ps.in.Now)
		if !ok {
			v.skip.Reason = SkipNoWork
			continue
		}
		v.unit = &u
		v.skip.Unit = v.unit
		ps.ready(v, pol)
	}
	// The held turn and preparation slot, after readiness: fairness asks which kinds
	// are ready whatever holds the turn now.
	ready := map[Kind]bool{}
	for i := range vs {
		if vs[i].unit != nil && vs[i].skip.Reason == SkipNone {
			ready[Kinds[i]] = true
		}
	}
	for i := range vs {
		v := &vs[i]
		if v.skip.Reason != SkipNone {
			continue
		}
		k := Kinds[i]
		if a, ok := ps.turn[st.Table]; ok && TakesWriteTurn(k) {
			v.skip.Reason, v.skip.Detail = SkipTurnHeld, "the write turn is held by "+describe(a)
		} else if a, ok := ps.prep[st.Table]; ok && preparation(k) {
			v.skip.Reason, v.skip.Detail = SkipPreparationSlot, "the preparation slot is held by "+describe(a)
		} else if waiting := yieldTo(ps.in.Histories[st.Table], k, pol, ready); waiting != nil {
			v.skip.Reason = SkipFairnessYield
			v.skip.Detail = fmt.Sprintf("%s took the last %d write turns; %s waits", k, pol.MaxConsecutiveTurns, strings.Join(waiting, ", "))
		}
	}
	return vs
}

// ready applies the rules that depend only on the table and the kind itself: pause, an
// existing assignment of the kind, and the failure ledger.
func (ps *pass) ready(v *verdict, pol Policy) {
	t, k := v.skip.Table, v.skip.Kind
	if pol.Paused {
		v.skip.Reason, v.skip.Detail = SkipPaused, "the table's policy pauses it"
		return
	}
	if a, ok := ps.byKind[t][k]; ok {
		v.skip.Reason, v.skip.Detail = SkipAlreadyAssigned, describe(a)
		return
	}
	f, ok := ps.in.Failures[t][k]
	if !ok {
		return
	}
	r := RetryAfter(f, pol.MaxAttemptsBeforeHold)
	detail := fmt.Sprintf("%d attempts, %s", max(f.Attempts, 1), f.Class)
	if f.LastError != "" {
		detail += ": " + capText(f.LastError)
	}
	switch {
	case r.NeedsAttention:
		v.skip.Reason, v.skip.Detail = SkipNeedsAttention, detail
	case ps.in.Now.Before(r.At):
		v.skip.Reason, v.skip.Detail, v.skip.RetryAt = SkipBackoff, detail, r.At
	}
}

// yieldTo returns the other write-turn kinds kind k must yield the table's next turn
// to, or nil: k took the last MaxConsecutiveTurns (or more) write turns in a row and
// another write-turn kind is ready.
func yieldTo(h History, k Kind, pol Policy, ready map[Kind]bool) []string {
	if !TakesWriteTurn(k) || consecutive(h, k) < pol.MaxConsecutiveTurns {
		return nil
	}
	var waiting []string
	for _, j := range Kinds {
		if j != k && TakesWriteTurn(j) && ready[j] {
			waiting = append(waiting, string(j))
		}
	}
	return waiting
}

// consecutive is how many of h's newest turns in a row are of kind k.
func consecutive(h History, k Kind) int {
	n := 0
	for i := len(h.Turns) - 1; i >= 0 && h.Turns[i] == k; i-- {
		n++
	}
	return n
}

// capText caps s for a skip's detail.
func capText(s string) string {
	if len(s) <= maxDetailError {
		return s
	}
	n := maxDetailError
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

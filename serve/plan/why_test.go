package plan

import (
	"errors"
	"reflect"
	"testing"
)

// TestWhy: one explanation per kind in Kinds order, matching Plan's output: placements,
// named skips, and no_work for kinds with nothing to do; an unknown table is an error.
func TestWhy(t *testing.T) {
	st := merge("t", 16)
	st.Drift = 2
	in := one(st, busy("other"))
	ex, err := Why(in, "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(ex) != len(Kinds) {
		t.Fatalf("%d explanations", len(ex))
	}
	got := map[Kind]string{}
	for i, e := range ex {
		if e.Kind != Kinds[i] || (e.Placement == nil) == (e.Skip == nil) {
			t.Fatalf("explanation %d: %+v", i, e)
		}
		if e.Placement != nil {
			got[e.Kind] = "placed on " + e.Placement.Executor
		} else {
			got[e.Kind] = string(e.Skip.Reason)
		}
	}
	want := map[Kind]string{KindRecover: "no_work", KindPublish: "placed on e1", KindMergeWAL: "write_turn_held",
		KindCompact: "no_work", KindIndex: "no_work"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("why t: %v, want %v", got, want)
	}
	if ex[2].Skip.Unit == nil || ex[2].Skip.Unit.Class != ClassNormal {
		t.Fatalf("merge skip without its unit: %+v", ex[2].Skip)
	}
	// Explain over the pass's output agrees with Why.
	if again := Explain(Plan(in), "t"); !reflect.DeepEqual(again, ex) {
		t.Fatalf("Explain %+v != Why %+v", again, ex)
	}
	if _, err := Why(in, "nope"); !errors.Is(err, ErrUnknownTable) || err.Error() != `plan: unknown table "nope"` {
		t.Fatalf("unknown table: %v", err)
	}
}

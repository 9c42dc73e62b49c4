package state_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/shale-db/shale/serve/plan"
	"github.com/shale-db/shale/serve/state"
)

// UpdatePolicy merges into what is stored, never over a concurrent change (the second
// writer's fn runs again on the first one's value), deletes an empty result, and refuses
// to merge into an undecodable value, which DeletePolicy removes.
func TestUpdatePolicyMergesGuarded(t *testing.T) {
	ctx := context.Background()
	st := state.New(client(t), "/test/"+t.Name())
	if _, ok, err := st.Policy(ctx, "t"); ok || err != nil {
		t.Fatalf("fresh: %v %v", ok, err)
	}
	if _, err := st.UpdatePolicy(ctx, "t", func(p plan.Policy, ok bool) (plan.Policy, error) {
		p.MinGenerations = 4
		return p, nil
	}); err != nil {
		t.Fatal(err)
	}
	// A concurrent writer lands between this update's read and its transaction.
	calls := 0
	got, err := st.UpdatePolicy(ctx, "t", func(p plan.Policy, ok bool) (plan.Policy, error) {
		calls++
		if calls == 1 {
			if err := st.SetPolicy(ctx, "t", plan.Policy{MinGenerations: 4, MaxAge: time.Minute}); err != nil {
				t.Fatal(err)
			}
		}
		p.Paused = true
		return p, nil
	})
	want := plan.Policy{Paused: true, MinGenerations: 4, MaxAge: time.Minute}
	if err != nil || got != want || calls != 2 {
		t.Fatalf("update over a concurrent change: %+v %v (fn called %d times), want %+v", got, err, calls, want)
	}
	if p, ok, err := st.Policy(ctx, "t"); !ok || err != nil || p != want {
		t.Fatalf("stored %+v %v %v", p, ok, err)
	}
	boom := errors.New("boom")
	if _, err := st.UpdatePolicy(ctx, "t", func(plan.Policy, bool) (plan.Policy, error) { return plan.Policy{}, boom }); !errors.Is(err, boom) {
		t.Fatalf("fn error: %v", err)
	}
	if _, err := st.UpdatePolicy(ctx, "t", func(plan.Policy, bool) (plan.Policy, error) { return plan.Policy{}, nil }); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := st.Policy(ctx, "t"); ok || err != nil {
		t.Fatalf("empty policy kept: %v %v", ok, err)
	}
	if _, err := st.Client().Put(ctx, st.Keys().Policy("t"), `{"min_generation": 3}`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpdatePolicy(ctx, "t", func(p plan.Policy, _ bool) (plan.Policy, error) { return p, nil }); !errors.Is(err, state.ErrCorrupt) {
		t.Fatalf("corrupt: %v", err)
	}
	if err := st.DeletePolicy(ctx, "t"); err != nil {
		t.Fatal(err)
	}
}

// ClearFailures deletes the named kinds' entries (or all) and returns what it deleted.
func TestClearFailuresReturnsDeleted(t *testing.T) {
	ctx := context.Background()
	st := state.New(client(t), "/test/"+t.Name())
	f, _ := json.Marshal(plan.Failure{Attempts: 3, Class: plan.FailureData, LastError: "bad"})
	for _, k := range []plan.Kind{plan.KindMergeWAL, plan.KindCompact} {
		if _, err := st.Client().Put(ctx, st.Keys().Failure("t", k), string(f)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := st.ClearFailures(ctx, "t", plan.KindCompact, plan.KindIndex)
	if err != nil || len(got) != 1 || got[plan.KindCompact].Attempts != 3 {
		t.Fatalf("clear compact, index: %+v %v", got, err)
	}
	if _, ok, _ := st.Failure(ctx, "t", plan.KindMergeWAL); !ok {
		t.Fatal("merge_wal entry cleared too")
	}
	got, err = st.ClearFailures(ctx, "t")
	if err != nil || len(got) != 1 || got[plan.KindMergeWAL].LastError != "bad" {
		t.Fatalf("clear all: %+v %v", got, err)
	}
	if got, err := st.ClearFailures(ctx, "t"); err != nil || len(got) != 0 {
		t.Fatalf("clear nothing: %+v %v", got, err)
	}
}

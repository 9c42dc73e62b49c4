package plan

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

// randomTable is a table with random demand, biased to the thresholds.
func randomTable(r *rand.Rand, name string, now time.Time) TableState {
	st := TableState{Table: name}
	pick := func(vs ...int) int { return vs[r.IntN(len(vs))] }
	st.PendingGenerations = uint64(pick(0, 0, 1, 3, 7, 8, 16, 64, 255, 256, 4000))
	if r.IntN(3) > 0 {
		st.PendingBytes = st.PendingGenerations * uint64(1+r.IntN(64)) << 20
	}
	if r.IntN(2) == 0 {
		st.LargestGeneration = int64(r.IntN(128)) << 20
	}
	if st.PendingGenerations > 0 && r.IntN(3) > 0 {
		st.AgeKnown, st.AgeExact = true, r.IntN(3) > 0
		st.OldestPending = now.Add(-time.Duration(r.IntN(3*3600)) * time.Second)
	}
	st.SmallFragments = pick(0, 0, 1, 2, 8, 16, 40)
	st.DeletedRatioHigh = pick(0, 0, 0, 1, 20)
	st.UncoveredByIndex = pick(0, 0, 1, 4, 9)
	st.Drift = pick(0, 0, 0, 1, 3)
	st.PendingSidecars = pick(0, 0, 0, 0, 1)
	if r.IntN(2) == 0 {
		st.CompactBytes = int64(r.IntN(4096)) << 20
	}
	if r.IntN(2) == 0 {
		st.IndexBytes = int64(r.IntN(1024)) << 20
	}
	switch r.IntN(25) {
	case 0:
		st.Dropped = true
	case 1:
		st.Unreadable = "manifest: checksum mismatch"
	}
	return st
}

// randomInput is a planning pass over random demand, executors, assignments, ledger
// entries and histories. Assignments keep the runtime's invariants (one write turn and
// one preparation per table, one per kind); capacity may be over-reserved (an executor
// restarted with a smaller budget).
func randomInput(r *rand.Rand) Input {
	in := Input{Now: t0.Add(time.Duration(r.IntN(1e6)) * time.Second), Policies: map[string]Policy{},
		Histories: map[string]History{}, Failures: map[string]map[Kind]Failure{}, MaxPlacements: r.IntN(11)}
	for i := range r.IntN(5) {
		e := Executor{ID: fmt.Sprintf("e%d", i), Slots: map[Kind]int{}, Bytes: int64(r.IntN(17)) * gib / 2}
		for _, k := range Kinds {
			e.Slots[k] = r.IntN(4)
		}
		in.Executors = append(in.Executors, e)
	}
	execIDs := []string{"dead"}
	for _, e := range in.Executors {
		execIDs = append(execIDs, e.ID)
	}
	for i := range 1 + r.IntN(15) {
		name := fmt.Sprintf("t%02d", i)
		in.Tables = append(in.Tables, randomTable(r, name, in.Now))
		if r.IntN(3) == 0 {
			in.Policies[name] = Policy{Paused: r.IntN(8) == 0, MaxConsecutiveTurns: r.IntN(4),
				MaxTurnWait: time.Duration(r.IntN(7200)) * time.Second, MinGenerations: uint64(r.IntN(10)),
				MaxAttemptsBeforeHold: r.IntN(6)}
		}
		var h History
		for range r.IntN(5) {
			h.Turns = append(h.Turns, []Kind{KindMergeWAL, KindMergeWAL, KindPublish, KindRecover}[r.IntN(4)])
		}
		in.Histories[name] = h
		if r.IntN(3) == 0 {
			k := Kinds[r.IntN(len(Kinds))]
			in.Failures[name] = map[Kind]Failure{k: {Attempts: 1 + r.IntN(16),
				Class:       []FailureClass{FailureRetryable, FailureData, FailureOwnership}[r.IntN(3)],
				LastFailure: in.Now.Add(-time.Duration(r.IntN(1200)) * time.Second)}}
		}
		add := func(k Kind) {
			in.Assignments = append(in.Assignments, Assignment{ID: fmt.Sprintf("a-%s-%s", name, k), Table: name, Kind: k,
				Executor: execIDs[r.IntN(len(execIDs))], Bytes: int64(r.IntN(3)) * gib, Slots: r.IntN(2)})
		}
		if r.IntN(4) == 0 {
			add([]Kind{KindRecover, KindMergeWAL, KindPublish}[r.IntN(3)])
		}
		if r.IntN(4) == 0 {
			add([]Kind{KindCompact, KindIndex}[r.IntN(2)])
		}
	}
	return in
}

// shuffled is in with its slices in another order (the same pass).
func shuffled(r *rand.Rand, in Input) Input {
	out := in
	out.Tables, out.Executors, out.Assignments = slices.Clone(in.Tables), slices.Clone(in.Executors), slices.Clone(in.Assignments)
	r.Shuffle(len(out.Tables), func(i, j int) { out.Tables[i], out.Tables[j] = out.Tables[j], out.Tables[i] })
	r.Shuffle(len(out.Executors), func(i, j int) { out.Executors[i], out.Executors[j] = out.Executors[j], out.Executors[i] })
	r.Shuffle(len(out.Assignments), func(i, j int) { out.Assignments[i], out.Assignments[j] = out.Assignments[j], out.Assignments[i] })
	return out
}

// deepCopy copies in's slices and maps (to check Plan modifies nothing).
func deepCopy(in Input) Input {
	out := shuffled(rand.New(rand.NewPCG(0, 0)), in)
	out.Tables, out.Executors, out.Assignments = slices.Clone(in.Tables), slices.Clone(in.Executors), slices.Clone(in.Assignments)
	for i := range out.Executors {
		out.Executors[i].Slots = maps(in.Executors[i].Slots)
	}
	out.Policies, out.Histories, out.Failures = maps(in.Policies), map[string]History{}, map[string]map[Kind]Failure{}
	for k, h := range in.Histories {
		out.Histories[k] = History{Turns: slices.Clone(h.Turns)}
	}
	for k, f := range in.Failures {
		out.Failures[k] = maps(f)
	}
	return out
}

func maps[K comparable, V any](m map[K]V) map[K]V {
	if m == nil {
		return nil
	}
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// checkPass asserts the properties of one pass: in and out as Plan gave them.
func checkPass(t *testing.T, in Input, out Output) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf(format, args...)
	}
	// Coverage: every (table, kind) with work, and every kind of a dropped or unreadable
	// table, is placed or skipped exactly once with a named reason; nothing else is.
	type tk struct {
		table string
		kind  Kind
	}
	seen := map[tk]int{}
	for _, p := range out.Placements {
		seen[tk{p.Unit.Table, p.Unit.Kind}]++
	}
	for _, s := range out.Skips {
		seen[tk{s.Table, s.Kind}]++
		if s.Reason == SkipNone || s.Reason == SkipNoWork || s.Detail == "" {
			fail("skip without a reason or detail: %+v", s)
		}
	}
	var scored []Unit
	for _, st := range in.Tables {
		pol := in.policyOf(st.Table)
		for _, k := range Kinds {
			u, work := Score(st, pol, k, in.Now)
			if work && !st.Dropped && st.Unreadable == "" {
				scored = append(scored, u)
				if w, exact := wait(st, in.Now); k == KindMergeWAL && exact && w > pol.MaxTurnWait && u.Class != ClassCritical {
					fail("%s/%s waited %v > %v but is class %d", st.Table, k, w, pol.MaxTurnWait, u.Class)
				}
			}
			want := 0
			if work || st.Dropped || st.Unreadable != "" {
				want = 1
			}
			if n := seen[tk{st.Table, k}]; n != want {
				fail("%s/%s appears %d times in the output, want %d (work %v)", st.Table, k, n, want, work)
			}
			delete(seen, tk{st.Table, k})
		}
	}
	if len(seen) != 0 {
		fail("output entries for no table of the input: %v", seen)
	}
	Sort(scored)
	if !reflect.DeepEqual(scored, out.Units) && (len(scored) > 0 || len(out.Units) > 0) {
		fail("Units are not every scored unit in order:\n%+v\n%+v", out.Units, scored)
	}
	// Placement order follows the planning order (so classes ascend).
	for i := 1; i < len(out.Placements); i++ {
		if !Less(out.Placements[i-1].Unit, out.Placements[i].Unit) {
			fail("placement %d out of order: %+v before %+v", i, out.Placements[i-1].Unit, out.Placements[i].Unit)
		}
	}
	limit := in.MaxPlacements
	if limit <= 0 {
		limit = DefaultMaxPlacements
	}
	if len(out.Placements) > limit {
		fail("%d placements, cap %d", len(out.Placements), limit)
	}
	// One write turn and one preparation per table, counting assignments.
	turns, preps := map[string]int{}, map[string]int{}
	for _, a := range in.Assignments {
		if TakesWriteTurn(a.Kind) {
			turns[a.Table]++
		} else {
			preps[a.Table]++
		}
	}
	bytes, used := map[string]int64{}, map[string]map[Kind]int{}
	for _, e := range in.Executors {
		used[e.ID] = map[Kind]int{}
	}
	for _, a := range in.Assignments {
		if u, ok := used[a.Executor]; ok {
			bytes[a.Executor] += a.Bytes
			u[a.Kind] += max(a.Slots, 1)
		}
	}
	blocked := false
	for _, p := range out.Placements {
		if TakesWriteTurn(p.Unit.Kind) {
			if turns[p.Unit.Table]++; turns[p.Unit.Table] > 1 {
				fail("two write turns on %s", p.Unit.Table)
			}
		} else if preps[p.Unit.Table]++; preps[p.Unit.Table] > 1 {
			fail("two preparations on %s", p.Unit.Table)
		}
		if slices.ContainsFunc(in.Assignments, func(a Assignment) bool { return a.Table == p.Unit.Table && a.Kind == p.Unit.Kind }) {
			fail("%+v placed while already assigned", p)
		}
		e := in.Executors[slices.IndexFunc(in.Executors, func(e Executor) bool { return e.ID == p.Executor })]
		if p.Unit.Class == ClassTail && used[e.ID][p.Unit.Kind] > 0 {
			fail("tail %+v placed on %s with %d %s slots in use", p, e.ID, used[e.ID][p.Unit.Kind], p.Unit.Kind)
		}
		if p.Bytes != Reservation(p.Unit, e) {
			fail("placement %+v reserves %d, want %d", p, p.Bytes, Reservation(p.Unit, e))
		}
		bytes[e.ID] += p.Bytes
		used[e.ID][p.Unit.Kind]++
		if bytes[e.ID] > e.Bytes || used[e.ID][p.Unit.Kind] > e.Slots[p.Unit.Kind] {
			fail("executor %s over capacity after %+v: %d/%d bytes, %d/%d %s slots", e.ID, p, bytes[e.ID], e.Bytes,
				used[e.ID][p.Unit.Kind], e.Slots[p.Unit.Kind], p.Unit.Kind)
		}
	}
	// Tail work only when nothing above it waits for capacity or the cap; the fairness
	// bound: a kind placed after K turns in a row leaves no other write-turn kind of the
	// table ready (each other kind with work there is backing off or needs attention).
	for _, s := range out.Skips {
		if (s.Reason == SkipNoCapacity || s.Reason == SkipPlacementsCapped) && s.Unit.Class != ClassTail {
			blocked = true
		}
	}
	for _, p := range out.Placements {
		u := p.Unit
		if u.Class == ClassTail && blocked {
			fail("tail unit %+v placed while higher classes wait for capacity", u)
		}
		pol := in.policyOf(u.Table)
		if !TakesWriteTurn(u.Kind) || consecutive(in.Histories[u.Table], u.Kind) < pol.MaxConsecutiveTurns {
			continue
		}
		for _, j := range Kinds {
			if j == u.Kind || !TakesWriteTurn(j) {
				continue
			}
			if _, s := outcome(out, u.Table, j); s != nil && s.Reason != SkipBackoff && s.Reason != SkipNeedsAttention {
				fail("%s/%s placed after %d turns in a row while %s waits (%s)", u.Table, u.Kind, pol.MaxConsecutiveTurns, j, s.Reason)
			}
		}
	}
}

// TestPlanProperties: over random passes, Plan is deterministic (the same output for
// the same pass in any slice order, input untouched), and every pass satisfies
// checkPass.
func TestPlanProperties(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 2))
	for i := range 2000 {
		in := randomInput(r)
		before := deepCopy(in)
		out := Plan(in)
		if !reflect.DeepEqual(in, before) {
			t.Fatalf("pass %d: Plan modified its input", i)
		}
		if again := Plan(shuffled(r, in)); !reflect.DeepEqual(out, again) {
			t.Fatalf("pass %d: shuffled input gives another output:\n%+v\n%+v", i, out, again)
		}
		checkPass(t, in, out)
	}
}

// TestPlanSimulation: sequences of passes where placements become assignments and
// write turns (History), assignments finish (the work done) or fail (the ledger), new
// demand arrives and time moves on. Every pass satisfies checkPass, so the fairness
// bound holds over each table's whole sequence of turns, and nothing placed is already
// running.
func TestPlanSimulation(t *testing.T) {
	seed := testSeed(t)
	r := rand.New(rand.NewPCG(seed, 3))
	for run := range 40 {
		in := randomInput(r)
		in.Assignments = nil
		if len(in.Executors) == 0 {
			in.Executors = []Executor{executor("e0", 2, 8*gib)}
		}
		next := 0
		for pass := range 60 {
			out := Plan(in)
			checkPass(t, in, out)
			for _, p := range out.Placements {
				next++
				in.Assignments = append(in.Assignments, Assignment{ID: fmt.Sprintf("p%d", next), Table: p.Unit.Table,
					Kind: p.Unit.Kind, Executor: p.Executor, Bytes: p.Bytes, Slots: p.Unit.Slots})
				if TakesWriteTurn(p.Unit.Kind) {
					h := in.Histories[p.Unit.Table]
					in.Histories[p.Unit.Table] = History{Turns: append(slices.Clone(h.Turns), p.Unit.Kind)}
				}
			}
			in.Now = in.Now.Add(time.Duration(1+r.IntN(300)) * time.Second)
			in.Assignments = slices.DeleteFunc(in.Assignments, func(a Assignment) bool {
				if r.IntN(2) == 0 {
					return false // still running
				}
				finish(r, &in, a)
				return true
			})
			for i := range in.Tables {
				if r.IntN(3) == 0 {
					arrive(r, &in.Tables[i], in.Now)
				}
			}
			if t.Failed() {
				t.Fatalf("run %d pass %d", run, pass)
			}
		}
	}
}

// finish ends assignment a: it succeeds (its work is done, the ledger entry cleared) or
// fails (the ledger counts it).
func finish(r *rand.Rand, in *Input, a Assignment) {
	i := slices.IndexFunc(in.Tables, func(st TableState) bool { return st.Table == a.Table })
	if i < 0 {
		return
	}
	if r.IntN(5) == 0 {
		f := in.Failures[a.Table]
		if f == nil {
			f = map[Kind]Failure{}
			in.Failures[a.Table] = f
		}
		prev := f[a.Kind]
		f[a.Kind] = Failure{Attempts: prev.Attempts + 1, LastFailure: in.Now,
			Class: []FailureClass{FailureRetryable, FailureRetryable, FailureOwnership, FailureData}[r.IntN(4)]}
		return
	}
	delete(in.Failures[a.Table], a.Kind)
	st := &in.Tables[i]
	switch a.Kind {
	case KindRecover:
		st.PendingSidecars = 0
	case KindPublish:
		st.Drift = 0
	case KindMergeWAL:
		st.PendingGenerations, st.PendingBytes, st.AgeKnown, st.AgeExact = 0, 0, false, false
		st.Fragments++
		st.SmallFragments++
		st.UncoveredByIndex++
	case KindCompact:
		st.SmallFragments, st.DeletedRatioHigh = 0, 0
	case KindIndex:
		st.UncoveredByIndex = 0
	}
}

// arrive adds demand to st: WAL generations (a hot table gets many), drift, sidecars.
func arrive(r *rand.Rand, st *TableState, now time.Time) {
	n := uint64(1 + r.IntN(4))
	if st.Table == "t00" {
		n = 300 // t00 is hot: always Critical
	}
	if st.PendingGenerations == 0 {
		st.OldestPending, st.AgeKnown, st.AgeExact = now, true, true
	}
	st.PendingGenerations += n
	st.PendingBytes += n << 20
	if r.IntN(6) == 0 {
		st.Drift++
	}
	if r.IntN(12) == 0 {
		st.PendingSidecars++
	}
}

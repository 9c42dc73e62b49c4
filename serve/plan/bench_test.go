package plan

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchInput is a pass over n tables of random demand, 16 executors and an assignment
// on one table in eight.
func benchInput(n int) Input {
	r := rand.New(rand.NewPCG(1, 2))
	in := Input{Now: t0, Policies: map[string]Policy{}, Histories: map[string]History{}, Failures: map[string]map[Kind]Failure{}}
	for i := range 16 {
		in.Executors = append(in.Executors, executor(fmt.Sprintf("e%02d", i), 4, 16*gib))
	}
	for i := range n {
		name := fmt.Sprintf("t%05d", i)
		in.Tables = append(in.Tables, randomTable(r, name, t0))
		in.Histories[name] = History{Turns: []Kind{KindMergeWAL, KindMergeWAL}}
		if i%8 == 0 {
			in.Assignments = append(in.Assignments, Assignment{ID: "a" + name, Table: name, Kind: KindMergeWAL,
				Executor: in.Executors[i%16].ID, Bytes: 64 << 20, Slots: 1})
		}
	}
	return in
}

// BenchmarkPlan is one planning pass (the pure part: no etcd) at 1,000 and 10,000
// tables: go test -run X -bench Plan -benchmem ./serve/plan/
func BenchmarkPlan(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		in := benchInput(n)
		b.Run(fmt.Sprintf("tables=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Plan(in)
			}
		})
	}
}

package benchmarks

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestRunWALTiny checks the wal suite's bookkeeping on a tiny configuration (the runs
// themselves check counts against acknowledged rows, generations merged and rows matched
// before and after the merge; a disagreement is an error from Run), never timing.
func TestRunWALTiny(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := Config{StoreURL: "file://" + t.TempDir(), EtcdEndpoints: testEtcd.Endpoints(), Suites: []string{SuiteWAL}, Reps: 2,
		BatchRows: 256, FileRows: 1024, WALGoroutines: 4, WALBatchRows: 10, WALWindow: 100 * time.Millisecond,
		WALGenerations: []int{0, 3}, WALGenerationRows: 50, WALBaseRows: 500, WALMergeGenerations: 4}
	var log bytes.Buffer
	rep, err := Run(ctx, cfg, &log)
	if err != nil {
		t.Fatalf("Run: %v\nlog:\n%s", err, log.String())
	}
	w := rep.WAL
	if w == nil || len(w.Appends) != 2 || len(w.Queries) != 4 || w.Merge == nil {
		t.Fatalf("wal result %+v", w)
	}
	for _, a := range w.Appends {
		if len(a.Reps) != cfg.Reps {
			t.Fatalf("%s: %d windows", a.Name, len(a.Reps))
		}
		for _, r := range a.Reps {
			if r.Rows <= 0 || r.Rows%int64(cfg.WALBatchRows) != 0 || r.P50 <= 0 || r.P99 < r.P50 {
				t.Errorf("%s: window %+v", a.Name, r)
			}
		}
	}
	if wal := w.Appends[0].Reps[0]; wal.Entries <= 0 || wal.Entries > wal.Rows/int64(cfg.WALBatchRows) {
		t.Errorf("WAL window %+v: entries must be between 1 and the batches", wal)
	}
	if len(w.Ratio.Paired) != cfg.Reps {
		t.Errorf("ratio %+v", w.Ratio)
	}
	for _, q := range w.Queries {
		if want := int64(cfg.WALBaseRows + q.Generations*cfg.WALGenerationRows); q.Rows != want || len(q.Count.Times) != cfg.Reps {
			t.Errorf("query %+v: rows %d, want %d", q, q.Rows, want)
		}
	}
	if len(w.Merge.Ratios) != 1 || len(w.Merge.Ratios[0].Paired) != cfg.Reps {
		t.Errorf("merge %+v", w.Merge)
	}
	md := rep.Markdown()
	for _, want := range []string{"### WAL", "WALWriter.Append", "after merging 3 generations", "Table.MergeWAL"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	names := map[string]bool{}
	for _, c := range rep.Checks {
		names[c.Name] = true
	}
	if !names["WAL acknowledged rows/s per shard"] || !names["WAL merge vs scan + write of the same rows"] {
		t.Errorf("checks %+v", rep.Checks)
	}
}

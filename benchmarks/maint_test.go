package benchmarks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/store"
)

// maintConfig runs the compact and recover suites tiny: 3,000 synthetic rows in 30
// fragments of 100 compacted into 3 files of up to 1,024 rows; 0, 3 and 6 pending
// sidecars (every 3rd rolls forward) on tables of 4 fragments of 50 rows.
func maintConfig(storeURL string) Config {
	return Config{
		StoreURL:            storeURL,
		EtcdEndpoints:       testEtcd.Endpoints(),
		Suites:              []string{SuiteCompact, SuiteRecover},
		Rows:                3000,
		BatchRows:           256,
		FileRows:            1024,
		Reps:                2,
		CompactFragmentRows: 100,
		CompactTargetRows:   1024,
		RecoverSidecars:     []int{0, 3, 6},
		RecoverForwardEvery: 3,
		RecoverFragments:    4,
		RecoverFragmentRows: 50,
	}
}

// TestRunCompactRecoverTiny checks the compact and recover runners' bookkeeping (the
// runs themselves check row counts, fragment counts, recovery outcomes and that no
// sidecar is left; any disagreement is an error from Run), never timing.
func TestRunCompactRecoverTiny(t *testing.T) {
	for _, kind := range []string{"file", "mem"} {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			base := fmt.Sprintf("mem://bench-maint-%d", memSeq.Add(1))
			if kind == "file" {
				base = "file://" + t.TempDir()
			}
			cfg := maintConfig(base)
			var log bytes.Buffer
			rep, err := Run(ctx, cfg, &log)
			if err != nil {
				t.Fatalf("Run: %v\nlog:\n%s", err, log.String())
			}
			if rep.Import != nil || rep.Scan != nil || rep.History != nil || rep.Txn != nil {
				t.Fatalf("suites other than compact and recover ran")
			}
			if len(failpoint.Enabled()) != 0 {
				t.Errorf("failpoints still enabled after Run: %v", failpoint.Enabled())
			}
			c := rep.Compact
			if c == nil || len(c.Samples) != 4 || len(c.Ratios) != 3 {
				t.Fatalf("compact result %+v", c)
			}
			for _, s := range c.Samples {
				if len(s.Times) != cfg.Reps || s.Median() <= 0 || s.Rows != int64(cfg.Rows) {
					t.Errorf("%s: %d times, median %v, %d rows", s.Name, len(s.Times), s.Median(), s.Rows)
				}
				// 3 output data files of up to 1,024 rows, whichever way they are made.
				if got := s.Requests.ByOp[store.OpPut] + s.Requests.ByOp[store.OpPutIfAbsent]; got < 3 {
					t.Errorf("%s: %s, want at least the 3 data files written", s.Name, s.Requests)
				}
			}
			for _, q := range c.Ratios {
				if len(q.Paired) != cfg.Reps || q.Median() <= 0 {
					t.Errorf("%s: paired %v", q.Name, q.Paired)
				}
			}
			// Compaction commits and publishes; the baseline writes data files only.
			if eng := c.Sample(CompactEngine); eng.Etcd["txn"] < 1 || eng.Requests.ByOp[store.OpPutIfAbsent] < 2 {
				t.Errorf("compaction made store %s, etcd %v; want the sidecar and the manifest put-if-absent and a publish", eng.Requests, eng.Etcd)
			}
			if b := c.Sample(CompactScanWrite); len(b.Etcd) != 0 || b.Requests.ByOp[store.OpPutIfAbsent] != 0 {
				t.Errorf("baseline made store %s, etcd %v; want data file puts only", b.Requests, b.Etcd)
			}

			r := rep.Recover
			if r == nil || len(r.Runs) != 3 {
				t.Fatalf("recover result %+v", r)
			}
			for i, want := range []struct{ n, fwd int }{{0, 0}, {3, 1}, {6, 2}} {
				run := r.Runs[i]
				if run.Sidecars != want.n || run.Forward != want.fwd || run.Back != want.n-want.fwd || len(run.Sample.Times) != cfg.Reps {
					t.Errorf("run %d: %+v, want %d sidecars, %d forward", i, run, want.n, want.fwd)
				}
				// Every rolled-back attempt wrote one data file; recovery deletes it.
				if run.DeletedFiles != run.Back {
					t.Errorf("%d sidecars: %d files deleted, want %d (one per rolled-back attempt)", run.Sidecars, run.DeletedFiles, run.Back)
				}
				if n := run.Sample.Requests.ByOp[store.OpDelete]; want.n > 0 && n < int64(want.n) {
					t.Errorf("%d sidecars: %d deletes, want at least one per sidecar", want.n, n)
				}
				if want.fwd > 0 && run.Sample.Etcd["txn"] < int64(want.fwd) {
					t.Errorf("%d sidecars: etcd %v, want a publish per roll-forward", want.n, run.Sample.Etcd)
				}
			}
			var names []string
			for _, ch := range rep.Checks {
				names = append(names, ch.Name)
				if !strings.HasPrefix(ch.Name, "compaction") && !ch.Met {
					t.Errorf("check %q not met: %s", ch.Name, ch.Measured)
				}
			}
			if len(rep.Checks) != 2 {
				t.Errorf("checks %q, want the compaction ratio and the empty recover", names)
			}
			md := rep.Markdown()
			for _, want := range []string{"### Compaction", "### Recover", CompactEngine, CompactScanWrite, "wall time by phase", "recovery.Recover", "recover with no pending sidecar"} {
				if !strings.Contains(md, want) {
					t.Errorf("Markdown lacks %q:\n%s", want, md)
				}
			}
			if kind == "file" {
				if ents, _ := os.ReadDir(strings.TrimPrefix(base, "file://")); len(ents) != 0 {
					t.Errorf("the run left %s in %s", ents[0].Name(), base)
				}
			}
		})
	}
}

// TestRecoverRejectsNegativeSidecars checks the config error.
func TestRecoverRejectsNegativeSidecars(t *testing.T) {
	_, err := Config{RecoverSidecars: []int{-1}}.withDefaults()
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "pending sidecars") {
		t.Fatalf("withDefaults: %v, want ErrConfig about pending sidecars", err)
	}
}

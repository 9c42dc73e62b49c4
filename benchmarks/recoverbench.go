package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/shale-db/shale/compaction"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/internal/failpoint"
	"github.com/shale-db/shale/recovery"
	"github.com/shale-db/shale/store"
)

// Defaults of the recover suite.
var DefaultRecoverSidecars = []int{0, 10, 100}

const (
	// DefaultRecoverForwardEvery: every 10th pending sidecar is of a compaction whose
	// commit landed (roll forward); the others never committed (roll back).
	DefaultRecoverForwardEvery = 10
	// DefaultRecoverFragments and DefaultRecoverFragmentRows shape the small tables the
	// interrupted compactions rewrite (one output data file each).
	DefaultRecoverFragments    = 8
	DefaultRecoverFragmentRows = 1000
)

// RecoverResult holds the recover suite's measurements, one per pending sidecar count.
type RecoverResult struct {
	Runs  []RecoverRun
	Notes []string
}

// RecoverRun is recovery.Recover over Sidecars pending sidecars, repeated (fresh sidecars
// each repetition): Forward of them roll forward, Back roll back.
type RecoverRun struct {
	Sidecars, Forward, Back int
	Sample                  *Sample       // Rows = Sidecars
	Setup                   time.Duration // median time to leave the sidecars behind (untimed)
	setups                  []time.Duration
	DeletedFiles            int // files deleted by one Recover (first repetition)
}

// errInterrupted stands for the crash of a compaction before or after its commit.
var errInterrupted = errors.New("benchmarks: compaction interrupted on purpose")

// seamAfterCommit is compaction's failpoint between its commit and its publish.
const seamAfterCommit = "compaction.after_commit"

// pendingSidecars leaves back + forward recovery sidecars in e's store, as crashed
// compactions do:
//
//   - back: compactions of one small table that stored their sidecar and their new data
//     file and then failed before committing (Hooks.BeforeCommit), like a crash at the
//     commit's manifest put: Recover rolls them back (deletes the file and the sidecar);
//   - forward: compactions of their own small table each that committed and then failed
//     at the compaction.after_commit failpoint, before the publish: Recover rolls them
//     forward (publishes the version) and deletes the sidecar.
func pendingSidecars(ctx context.Context, e *env, small *engine.DB, ds *Dataset, prefix string, back, forward int) error {
	if back > 0 {
		name := prefix + "-back"
		if _, err := fragmentedTable(ctx, small, name, ds); err != nil {
			return err
		}
		ex := recovery.Enable(compaction.New(e.db))
		ex.Hooks.BeforeCommit = func(context.Context, *compaction.Plan) error { return errInterrupted }
		for range back {
			if _, err := ex.Run(ctx, name, compaction.Options{}); !errors.Is(err, errInterrupted) {
				return fmt.Errorf("benchmarks: interrupted compaction of %s: got %v, want the injected failure", name, err)
			}
		}
	}
	if forward > 0 {
		disable := failpoint.Enable(seamAfterCommit, failpoint.Error(errInterrupted))
		defer disable()
		for i := range forward {
			name := fmt.Sprintf("%s-fwd-%d", prefix, i)
			if _, err := fragmentedTable(ctx, small, name, ds); err != nil {
				return err
			}
			st, err := recovery.Enable(compaction.New(e.db)).Run(ctx, name, compaction.Options{})
			if !errors.Is(err, errInterrupted) || st.Version == 0 {
				return fmt.Errorf("benchmarks: compaction of %s stopped after its commit: version %d, %v; want a commit and the injected failure", name, st.Version, err)
			}
		}
	}
	return nil
}

// runRecover measures recovery.Recover (every table, MinAge negative: the sidecars are
// fresh) with each configured number of pending sidecars.
func runRecover(ctx context.Context, e *env, cfg Config, log io.Writer) (*RecoverResult, error) {
	ds, err := SyntheticFlights(int64(cfg.RecoverFragments*cfg.RecoverFragmentRows), 3, cfg.RecoverFragmentRows)
	if err != nil {
		return nil, err
	}
	defer ds.Release()
	small, err := e.openDB(ctx, func(o *engine.Options) {
		o.Write.MaxRowsPerFile = cfg.RecoverFragmentRows
		o.Write.MaxRowsPerBatch = min(cfg.BatchRows, cfg.RecoverFragmentRows)
	})
	if err != nil {
		return nil, err
	}
	res := &RecoverResult{}
	for _, n := range cfg.RecoverSidecars {
		fwd := n / cfg.RecoverForwardEvery
		res.Runs = append(res.Runs, RecoverRun{Sidecars: n, Forward: fwd, Back: n - fwd,
			Sample: &Sample{Name: fmt.Sprintf("recovery.Recover, %d pending sidecars", n), Rows: int64(n)}})
	}
	var vs []variant
	for i := range res.Runs {
		r := &res.Runs[i]
		vs = append(vs, variant{key: fmt.Sprintf("sidecars=%d", r.Sidecars), s: r.Sample, run: func(ctx context.Context, rep int) (Took, error) {
			t0 := time.Now()
			if err := pendingSidecars(ctx, e, small, ds, fmt.Sprintf("recover-%d-%d", r.Sidecars, rep), r.Back, r.Forward); err != nil {
				return Took{}, err
			}
			r.setups = append(r.setups, time.Since(t0))
			left, err := e.store.List(ctx, recovery.Dir, 0)
			if err != nil {
				return Took{}, err
			}
			if len(left) != r.Sidecars {
				return Took{}, fmt.Errorf("benchmarks: %d objects under %s before Recover, want %d sidecars", len(left), recovery.Dir, r.Sidecars)
			}
			runtime.GC()
			before, kvBefore := e.storeRequests(), e.etcdRequests()
			var rp recovery.Report
			d, err := timeStep(func() error {
				var err error
				rp, err = recovery.Recover(ctx, e.store, e.db.Catalog(), "", recovery.Options{MinAge: -1})
				return err
			})
			if err != nil {
				return Took{}, fmt.Errorf("benchmarks: Recover with %d sidecars: %w", r.Sidecars, err)
			}
			if len(r.Sample.Times) == 0 {
				r.Sample.Requests = e.storeRequests().Sub(before)
				r.Sample.Etcd = subCounts(e.etcdRequests(), kvBefore)
			}
			if err := checkRecovered(ctx, e.store, rp, r, rep); err != nil {
				return Took{}, err
			}
			return d, nil
		}})
	}
	if err := alternate(ctx, cfg.Reps, logged(vs, log)); err != nil {
		return nil, err
	}
	for i := range res.Runs {
		res.Runs[i].Setup = median(res.Runs[i].setups)
	}
	res.Notes = append(res.Notes, fmt.Sprintf("Each repetition first leaves the sidecars of interrupted compactions in the store (untimed): of every %d, %d committed and stopped "+
		"at the compaction.after_commit failpoint before publishing (roll forward; one small table each), the others stored their sidecar and new data file and "+
		"failed before their commit (roll back; all on one small table). Tables: %d fragments of %s rows, compacted into one data file. Then one timed "+
		"recovery.Recover(ctx, store, catalog, \"\", Options{MinAge: -1}) resolves every sidecar (MinAge -1 because the sidecars are seconds old and the "+
		"default MinAge would skip them as young; a positive MinAge adds one HEAD per sidecar). Each run checks the outcomes and that nothing is left under %s.",
		cfg.RecoverForwardEvery, 1, cfg.RecoverFragments, group(int64(cfg.RecoverFragmentRows)), recovery.Dir))
	return res, nil
}

// checkRecovered checks that Recover resolved every sidecar as expected and left nothing.
func checkRecovered(ctx context.Context, s store.Store, rp recovery.Report, r *RecoverRun, rep int) error {
	fwd, back, deleted := 0, 0, 0
	for _, o := range rp.Outcomes {
		switch o.Action {
		case recovery.RolledForward:
			fwd++
		case recovery.RolledBack:
			back++
		default:
			return fmt.Errorf("benchmarks: Recover: sidecar %s: %s %s", o.Key, o.Action, o.Err)
		}
		deleted += len(o.DeletedFiles)
	}
	if fwd != r.Forward || back != r.Back {
		return fmt.Errorf("benchmarks: Recover with %d sidecars rolled %d forward and %d back, want %d and %d", r.Sidecars, fwd, back, r.Forward, r.Back)
	}
	if rep == 0 {
		r.DeletedFiles = deleted
	}
	left, err := s.List(ctx, recovery.Dir, 0)
	if err != nil {
		return err
	}
	if len(left) != 0 {
		return fmt.Errorf("benchmarks: %d objects left under %s after Recover, e.g. %s", len(left), recovery.Dir, left[0].Key)
	}
	return nil
}

// recoverChecks: with no sidecar, Recover costs one LIST.
func recoverChecks(r *RecoverResult) []Check {
	for _, run := range r.Runs {
		if run.Sidecars != 0 {
			continue
		}
		want := map[store.Op]int64{store.OpList: 1}
		got := run.Sample.Requests.ByOp
		ok := len(got) == len(want) && got[store.OpList] == 1 && len(run.Sample.Etcd) == 0
		return []Check{{Name: "recover with no pending sidecar", Target: "one store LIST, no etcd request",
			Measured: fmt.Sprintf("%s, etcd %s, %s median", reqString(run.Sample.Requests), countString(run.Sample.Etcd), ms(run.Sample.Median())), Met: ok}}
	}
	return nil
}

// recover renders the recover suite.
func (p *mdWriter) recover(r *RecoverResult) {
	for _, n := range r.Notes {
		p.f("%s\n\n", n)
	}
	p.f("| pending sidecars | roll forward | roll back | wall median | min | max | CPU median | per sidecar (wall) | store requests | etcd requests | files deleted | setup (untimed) |\n" +
		"| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | ---: | ---: |\n")
	for _, run := range r.Runs {
		s := run.Sample
		per := "–"
		if run.Sidecars > 0 {
			per = ms(s.Median() / time.Duration(run.Sidecars))
		}
		p.f("| %d | %d | %d | %s | %s | %s | %s | %s | %s | %s | %d | %s |\n", run.Sidecars, run.Forward, run.Back, ms(s.Median()), ms(s.Min()), ms(s.Max()), ms(s.MedianCPU()),
			per, reqString(s.Requests), countString(s.Etcd), run.DeletedFiles, ms(run.Setup))
	}
	p.f("\n")
}

package admin_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shale-db/shale/serve/admin"
	"github.com/shale-db/shale/serve/plan"
)

// TestMetricsScrapedNumbers: every method's effect is read back from /metrics over a
// real listener, with the numbers the calls imply.
func TestMetricsScrapedNumbers(t *testing.T) {
	m := admin.NewMetrics()
	srv := startServer(t, &fakeSource{}, m)

	m.ObserveScheduleToBind("merge_wal", 7*time.Millisecond)
	m.ObserveScheduleToBind("merge_wal", 2*time.Second)
	m.ObserveScheduleToBind("merge_wal", -time.Second) // a clock step: counts as 0
	m.ObserveScheduleToBind("compact", 30*time.Second)
	m.ObserveTurnWait("merge_wal", 90*time.Minute)
	for range 3 {
		m.Placement(admin.ResultPlaced)
	}
	m.Placement(admin.ResultConflict)
	m.Placement(string(plan.SkipNoCapacity))
	m.Placement(string(plan.SkipNoCapacity))
	m.SetBacklog(map[string]int{"critical": 2, "normal": 5, admin.ClassName(plan.ClassTail): 7})
	m.Execution("merge_wal", admin.PhaseBound)
	m.Execution("merge_wal", admin.PhaseSucceeded)
	m.Execution("compact", admin.PhaseBound)
	m.Execution("compact", admin.PhaseStalled)
	m.Stall("compact")
	m.SetRunning("index", 2)
	m.SetRunning("merge_wal", 1)
	m.SetRunning("merge_wal", 0)
	m.Recovery("rolled-forward")
	m.Recovery("rolled-back")
	m.Recovery("rolled-back")
	m.SetLeader(true)
	m.ObservePass(250*time.Millisecond, 4096)
	m.ObservePass(750*time.Millisecond, 1024)
	m.ObservePass(time.Millisecond, -5) // a negative count adds nothing
	m.SetTopTables(map[string]uint64{"events": 300, "logs": 3, "idle": 0})

	f := scrape(t, srv)
	h := f.histogram(t, "shale_serve_schedule_to_bind_seconds", "kind=merge_wal")
	if h.GetSampleCount() != 3 || math.Abs(h.GetSampleSum()-2.007) > 1e-9 {
		t.Errorf("schedule_to_bind{merge_wal}: count %d sum %v, want 3 and 2.007", h.GetSampleCount(), h.GetSampleSum())
	}
	for _, b := range h.GetBucket() {
		want := uint64(0)
		switch ub := b.GetUpperBound(); {
		case ub >= 2:
			want = 3
		case ub >= 0.007:
			want = 2
		default:
			want = 1 // the negative observation, at 0
		}
		if b.GetCumulativeCount() != want {
			t.Errorf("schedule_to_bind{merge_wal} bucket le=%v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
	}
	if h := f.histogram(t, "shale_serve_schedule_to_bind_seconds", "kind=compact"); h.GetSampleCount() != 1 || h.GetSampleSum() != 30 {
		t.Errorf("schedule_to_bind{compact}: count %d sum %v", h.GetSampleCount(), h.GetSampleSum())
	}
	if h := f.histogram(t, "shale_serve_schedule_to_bind_seconds", "kind=index"); h.GetSampleCount() != 0 {
		t.Errorf("schedule_to_bind{index}: count %d, want 0", h.GetSampleCount())
	}
	if h := f.histogram(t, "shale_serve_turn_wait_seconds", "kind=merge_wal"); h.GetSampleCount() != 1 || h.GetSampleSum() != 5400 {
		t.Errorf("turn_wait{merge_wal}: count %d sum %v, want 1 and 5400", h.GetSampleCount(), h.GetSampleSum())
	}
	for labels, want := range map[string]float64{
		"result=placed": 3, "result=conflict": 1, "result=error": 0, "result=no_capacity": 2, "result=backoff": 0,
	} {
		if got := f.value(t, "shale_serve_placements_total", labels); got != want {
			t.Errorf("placements_total{%s} = %v, want %v", labels, got, want)
		}
	}
	for labels, want := range map[string]float64{
		"class=recovery": 0, "class=critical": 2, "class=commit_ready": 0, "class=normal": 5, "class=maintenance": 0, "class=tail": 7,
	} {
		if got := f.value(t, "shale_serve_backlog_units", labels); got != want {
			t.Errorf("backlog_units{%s} = %v, want %v", labels, got, want)
		}
	}
	for labels, want := range map[string]float64{
		"kind=merge_wal,phase=bound": 1, "kind=merge_wal,phase=succeeded": 1, "kind=compact,phase=bound": 1,
		"kind=compact,phase=stalled": 1, "kind=compact,phase=succeeded": 0, "kind=index,phase=failed": 0,
	} {
		if got := f.value(t, "shale_serve_executions_total", labels); got != want {
			t.Errorf("executions_total{%s} = %v, want %v", labels, got, want)
		}
	}
	if got := f.value(t, "shale_serve_stalls_total", "kind=compact"); got != 1 {
		t.Errorf("stalls_total{compact} = %v, want 1", got)
	}
	if got := f.value(t, "shale_serve_executions_running", "kind=index"); got != 2 {
		t.Errorf("executions_running{index} = %v, want 2", got)
	}
	if got := f.value(t, "shale_serve_executions_running", "kind=merge_wal"); got != 0 {
		t.Errorf("executions_running{merge_wal} = %v, want 0", got)
	}
	if got := f.value(t, "shale_serve_recoveries_total", "action=rolled-back"); got != 2 {
		t.Errorf("recoveries_total{rolled-back} = %v, want 2", got)
	}
	if got := f.value(t, "shale_serve_recoveries_total", "action=rolled-forward"); got != 1 {
		t.Errorf("recoveries_total{rolled-forward} = %v, want 1", got)
	}
	if got := f.value(t, "shale_serve_leader", ""); got != 1 {
		t.Errorf("leader = %v, want 1", got)
	}
	if h := f.histogram(t, "shale_serve_plan_pass_seconds", ""); h.GetSampleCount() != 3 || math.Abs(h.GetSampleSum()-1.001) > 1e-9 {
		t.Errorf("plan_pass_seconds: count %d sum %v, want 3 and 1.001", h.GetSampleCount(), h.GetSampleSum())
	}
	if got := f.value(t, "shale_serve_plan_etcd_bytes_total", ""); got != 5120 {
		t.Errorf("plan_etcd_bytes_total = %v, want 5120", got)
	}
	if got := f.series("shale_serve_table_pending_generations"); !slices.Equal(got, []string{"table=events", "table=logs"}) {
		t.Errorf("table_pending_generations series %v, want events and logs (idle has none pending)", got)
	}
	if got := f.value(t, "shale_serve_table_pending_generations", "table=events"); got != 300 {
		t.Errorf("table_pending_generations{events} = %v, want 300", got)
	}
	if f["go_goroutines"] == nil {
		t.Error("no go_goroutines: the Go collector is not registered")
	}

	// Leadership lost: the leader's gauges are reset.
	m.SetLeader(false)
	m.SetBacklog(nil)
	m.SetTopTables(nil)
	f = scrape(t, srv)
	if got := f.value(t, "shale_serve_leader", ""); got != 0 {
		t.Errorf("leader = %v after SetLeader(false)", got)
	}
	if got := f.value(t, "shale_serve_backlog_units", "class=normal"); got != 0 {
		t.Errorf("backlog_units{normal} = %v after SetBacklog(nil)", got)
	}
	if got := f.series("shale_serve_table_pending_generations"); len(got) != 0 {
		t.Errorf("table_pending_generations after SetTopTables(nil): %v", got)
	}
}

// TestMetricsKnownLabelsExportedAtZero: every known label combination is a series from
// the start, so a scraper sees zeros rather than absent series.
func TestMetricsKnownLabelsExportedAtZero(t *testing.T) {
	srv := startServer(t, &fakeSource{}, admin.NewMetrics())
	f := scrape(t, srv)
	phases := []string{admin.PhaseBound, admin.PhaseSucceeded, admin.PhaseFailed, admin.PhaseCancelled, admin.PhaseStalled}
	for _, k := range plan.Kinds {
		for _, p := range phases {
			if got := f.value(t, "shale_serve_executions_total", "kind="+string(k)+",phase="+p); got != 0 {
				t.Errorf("executions_total{%s,%s} = %v at start", k, p, got)
			}
		}
		f.histogram(t, "shale_serve_schedule_to_bind_seconds", "kind="+string(k))
		f.histogram(t, "shale_serve_turn_wait_seconds", "kind="+string(k))
		f.value(t, "shale_serve_stalls_total", "kind="+string(k))
		f.value(t, "shale_serve_executions_running", "kind="+string(k))
	}
	for c := plan.ClassRecovery; c <= plan.ClassTail; c++ {
		f.value(t, "shale_serve_backlog_units", "class="+admin.ClassName(c))
	}
	for _, r := range skipReasons(t) {
		f.value(t, "shale_serve_placements_total", "result="+r)
	}
	for _, a := range recoveryActions(t) {
		f.value(t, "shale_serve_recoveries_total", "action="+a)
	}
	if got := f.series("shale_serve_table_pending_generations"); len(got) != 0 {
		t.Errorf("table_pending_generations at start: %v", got)
	}
}

// TestMetricsUnknownLabelValuesAreOther: a value outside a label's known set is recorded
// as "other", so a caller's bug cannot grow the label set.
func TestMetricsUnknownLabelValuesAreOther(t *testing.T) {
	m := admin.NewMetrics()
	srv := startServer(t, &fakeSource{}, m)
	for i := range 5 {
		m.Placement(fmt.Sprintf("bogus-%d", i))
		m.Execution(fmt.Sprintf("kind-%d", i), admin.PhaseBound)
		m.Execution("merge_wal", fmt.Sprintf("phase-%d", i))
		m.Recovery(fmt.Sprintf("action-%d", i))
		m.Stall(fmt.Sprintf("kind-%d", i))
	}
	m.SetBacklog(map[string]int{"x": 1, "y": 2, "normal": 3})
	f := scrape(t, srv)
	if got := f.value(t, "shale_serve_placements_total", "result=other"); got != 5 {
		t.Errorf("placements_total{other} = %v, want 5", got)
	}
	if got := f.value(t, "shale_serve_executions_total", "kind=other,phase=bound"); got != 5 {
		t.Errorf("executions_total{other,bound} = %v, want 5", got)
	}
	if got := f.value(t, "shale_serve_executions_total", "kind=merge_wal,phase=other"); got != 5 {
		t.Errorf("executions_total{merge_wal,other} = %v, want 5", got)
	}
	if got := f.value(t, "shale_serve_recoveries_total", "action=other"); got != 5 {
		t.Errorf("recoveries_total{other} = %v, want 5", got)
	}
	if got := f.value(t, "shale_serve_backlog_units", "class=other"); got != 3 {
		t.Errorf("backlog_units{other} = %v, want 3", got)
	}
	if got := f.value(t, "shale_serve_backlog_units", "class=normal"); got != 3 {
		t.Errorf("backlog_units{normal} = %v, want 3", got)
	}
	for _, name := range []string{"shale_serve_placements_total", "shale_serve_recoveries_total", "shale_serve_stalls_total"} {
		for _, s := range f.series(name) {
			if strings.Contains(s, "bogus") || strings.Contains(s, "kind-") || strings.Contains(s, "action-") {
				t.Errorf("%s has an unknown label value: %s", name, s)
			}
		}
	}
	m.SetBacklog(map[string]int{"normal": 1})
	if got := scrape(t, srv).series("shale_serve_backlog_units"); slices.Contains(got, "class=other") {
		t.Errorf("backlog_units keeps class=other after a pass without unknown classes: %v", got)
	}
}

// TestTopTablesLabelChurn: only the TopTables largest tables are labels, ties broken by
// name, and a table that leaves the top N loses its series.
func TestTopTablesLabelChurn(t *testing.T) {
	m := admin.NewMetrics()
	srv := startServer(t, &fakeSource{}, m)
	pending := map[string]uint64{}
	for i := range 15 {
		pending[fmt.Sprintf("t%02d", i)] = uint64(100 + i) // t14 largest
	}
	// "tie-a" and "tie-b" tie with t05 (105) at the cut; names decide, and "t05" sorts first.
	pending["tie-b"], pending["tie-a"] = 105, 105
	m.SetTopTables(pending)
	var want []string
	for i := 5; i < 15; i++ {
		want = append(want, fmt.Sprintf("table=t%02d", i))
	}
	f := scrape(t, srv)
	got := f.series("shale_serve_table_pending_generations")
	if !slices.Equal(got, want) {
		t.Fatalf("top tables %v, want %v", got, want)
	}
	if len(got) != admin.TopTables {
		t.Fatalf("%d series, want %d", len(got), admin.TopTables)
	}
	for i := 5; i < 15; i++ {
		if v := f.value(t, "shale_serve_table_pending_generations", fmt.Sprintf("table=t%02d", i)); v != float64(100+i) {
			t.Errorf("t%02d = %v, want %d", i, v, 100+i)
		}
	}

	// A new pass: most of the old top drained, two new hot tables and a changed value.
	m.SetTopTables(map[string]uint64{"hot1": 5000, "hot2": 4000, "t14": 1, "t13": 0})
	f = scrape(t, srv)
	if got := f.series("shale_serve_table_pending_generations"); !slices.Equal(got, []string{"table=hot1", "table=hot2", "table=t14"}) {
		t.Fatalf("after churn: %v, want hot1, hot2, t14 (the old labels deleted)", got)
	}
	if v := f.value(t, "shale_serve_table_pending_generations", "table=t14"); v != 1 {
		t.Errorf("t14 = %v, want 1", v)
	}

	// Many passes over many distinct tables never leave more than TopTables series.
	for pass := range 50 {
		p := map[string]uint64{}
		for i := range 40 {
			p[fmt.Sprintf("p%d-%d", pass, i)] = uint64(i + 1)
		}
		m.SetTopTables(p)
	}
	got = scrape(t, srv).series("shale_serve_table_pending_generations")
	if len(got) != admin.TopTables || !slices.Contains(got, "table=p49-39") || slices.Contains(got, "table=p48-39") {
		t.Errorf("after 50 passes: %v", got)
	}
}

// TestMetricsConcurrent: every method and scrapes run concurrently (under -race), and the
// counters add up.
func TestMetricsConcurrent(t *testing.T) {
	m := admin.NewMetrics()
	srv := startServer(t, &fakeSource{}, m)
	const workers, per = 8, 200
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range per {
				m.ObserveScheduleToBind("merge_wal", time.Millisecond)
				m.ObserveTurnWait("compact", time.Second)
				m.Placement(admin.ResultPlaced)
				m.SetBacklog(map[string]int{"normal": i})
				m.Execution("index", admin.PhaseSucceeded)
				m.SetRunning("index", i%3)
				m.Stall("merge_wal")
				m.Recovery("gone")
				m.SetLeader(i%2 == 0)
				m.ObservePass(time.Millisecond, 10)
				m.SetTopTables(map[string]uint64{fmt.Sprintf("w%d-%d", w, i%20): uint64(i + 1), "shared": uint64(w + 1)})
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			for range 10 {
				scrape(t, srv)
			}
		})
	}
	wg.Wait()
	f := scrape(t, srv)
	n := float64(workers * per)
	if got := f.value(t, "shale_serve_placements_total", "result=placed"); got != n {
		t.Errorf("placements = %v, want %v", got, n)
	}
	if got := f.value(t, "shale_serve_executions_total", "kind=index,phase=succeeded"); got != n {
		t.Errorf("executions = %v, want %v", got, n)
	}
	if got := f.value(t, "shale_serve_plan_etcd_bytes_total", ""); got != 10*n {
		t.Errorf("etcd bytes = %v, want %v", got, 10*n)
	}
	if h := f.histogram(t, "shale_serve_schedule_to_bind_seconds", "kind=merge_wal"); h.GetSampleCount() != uint64(n) {
		t.Errorf("schedule_to_bind count = %d, want %v", h.GetSampleCount(), n)
	}
	if got := f.series("shale_serve_table_pending_generations"); len(got) > admin.TopTables || len(got) == 0 {
		t.Errorf("top tables after concurrent passes: %v", got)
	}
}

// TestNilMetricsRecordsNothing: a nil *Metrics is usable and its handler serves an empty
// registry.
func TestNilMetricsRecordsNothing(t *testing.T) {
	var m *admin.Metrics
	m.ObserveScheduleToBind("merge_wal", time.Second)
	m.ObserveTurnWait("merge_wal", time.Second)
	m.Placement(admin.ResultPlaced)
	m.SetBacklog(map[string]int{"normal": 1})
	m.Execution("merge_wal", admin.PhaseBound)
	m.SetRunning("merge_wal", 1)
	m.Stall("merge_wal")
	m.Recovery("gone")
	m.SetLeader(true)
	m.ObservePass(time.Second, 1)
	m.SetTopTables(map[string]uint64{"t": 1})
	if m.Handler() == nil {
		t.Fatal("nil Metrics has no handler")
	}
}

// TestClassNames: every planner class has a distinct name, and unknown classes are other.
func TestClassNames(t *testing.T) {
	seen := map[string]bool{}
	for c := plan.ClassRecovery; c <= plan.ClassTail; c++ {
		n := admin.ClassName(c)
		if n == admin.Other || seen[n] {
			t.Errorf("class %d: name %q", c, n)
		}
		seen[n] = true
	}
	if admin.ClassName(plan.ClassTail+1) != admin.Other || admin.ClassName(-1) != admin.Other {
		t.Error("an unknown class is not other")
	}
}

// skipReasons lists serve/plan's SkipReason constants (but SkipNone), read from its source,
// so a new skip reason fails TestMetricsKnownLabelsExportedAtZero until admin knows it.
func skipReasons(t *testing.T) []string {
	return constStrings(t, filepath.Join("..", "plan"), func(vs *ast.ValueSpec, doc string) bool {
		id, ok := vs.Type.(*ast.Ident)
		return ok && id.Name == "SkipReason"
	})
}

// recoveryActions lists package recovery's Outcome.Action constants, read from its source.
func recoveryActions(t *testing.T) []string {
	return constStrings(t, filepath.Join("..", "..", "recovery"), func(_ *ast.ValueSpec, doc string) bool {
		return strings.Contains(doc, "Actions recorded in Outcome.Action")
	})
}

// constStrings returns the non-empty string constants of the package in dir that keep
// selects (given the spec and its group's doc).
func constStrings(t *testing.T, dir string, keep func(vs *ast.ValueSpec, groupDoc string) bool) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				if !keep(vs, gd.Doc.Text()) {
					continue
				}
				for _, v := range vs.Values {
					if bl, ok := v.(*ast.BasicLit); ok && bl.Kind == token.STRING {
						if s, _ := strconv.Unquote(bl.Value); s != "" {
							out = append(out, s)
						}
					}
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no constants found in %s", dir)
	}
	return out
}

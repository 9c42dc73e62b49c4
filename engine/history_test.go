package engine

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/manifest"
)

// The history of a multi-process run: what every process invoked, when, and what it was
// told. Children append one JSON line per operation to their own log file; the parent
// reads them all and checks them against the final state of the tables (histOutcomes,
// linReplay) and for linearizability (linCheck).

// linSchema is the table both processes kinds write: id encodes (process, operation, row)
// so every row is attributable; slot is the process allowed to delete or update the row.
var linSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "slot", Type: arrow.PrimitiveTypes.Int64},
	{Name: "val", Type: arrow.BinaryTypes.String},
}, nil)

// rowID is the id of row k of operation op of process proc.
func linRowID(proc, op, k int) int64 { return int64(proc)*1_000_000 + int64(op)*10 + int64(k) }

// linRow is one row of linSchema.
type linRow struct {
	ID   int64  `json:"id"`
	Slot int64  `json:"slot"`
	Val  string `json:"val"`
}

func linBatch(rows []linRow) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, linSchema)
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.Int64Builder).Append(r.ID)
		b.Field(1).(*array.Int64Builder).Append(r.Slot)
		b.Field(2).(*array.StringBuilder).Append(r.Val)
	}
	return b.NewRecordBatch()
}

// Operation kinds in a history.
const (
	linKindRead      = "read"         // Refresh or Snapshot: the published versions seen
	linKindAppend    = "append"       // Table.Append of new rows
	linKindDelete    = "delete"       // Table.Delete of one row by id
	linKindUpdate    = "update"       // Table.Update of one row's val
	linKindGroupPut  = "group-append" // DB.Commit: the same new row in both tables
	linKindGroupDel  = "group-delete" // DB.Commit: one row deleted from both tables
	linKindGroupMove = "group-move"   // DB.Commit: a row deleted from the second table, a marker row appended to the first
	linCommitted     = "committed"
	linRejected      = "rejected"
	linUnknown       = "unknown"
	linUncommitted   = "not-committed" // an unknown outcome the parent found never landed
)

// linEffect is what one operation did (or meant to do) to one table.
type linEffect struct {
	Table   string   `json:"table"`
	Version uint64   `json:"version,omitempty"` // committed or read version
	Put     []linRow `json:"put,omitempty"`     // rows appended
	Del     []int64  `json:"del,omitempty"`     // ids deleted
	Upd     []linRow `json:"upd,omitempty"`     // rows whose val is updated
}

// linOp is one operation of one process.
type linOp struct {
	Proc     int         `json:"proc"`
	Seq      int         `json:"seq"`
	Kind     string      `json:"kind"`
	Call     int64       `json:"call"`   // invocation, ns since the Unix epoch
	Return   int64       `json:"return"` // response, ns since the Unix epoch
	Outcome  string      `json:"outcome,omitempty"`
	Effects  []linEffect `json:"effects"`
	Txn      string      `json:"txn,omitempty"` // transaction id of a single-table write whose outcome is unknown
	Attempts int         `json:"attempts,omitempty"`
	Rebased  int         `json:"rebased,omitempty"`
	Rows     int64       `json:"rows,omitempty"` // CommitResult.Rows
	Err      string      `json:"err,omitempty"`
	Conflict bool        `json:"conflict,omitempty"`  // the error is a commit conflict
	Injected bool        `json:"injected,omitempty"`  // the error is (or wraps) an injected fault
	Retries  int         `json:"retries,omitempty"`   // Table.Retry calls after unknown outcomes
	FirstErr []string    `json:"first_err,omitempty"` // the unknown outcomes retried
}

func (o *linOp) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "p%d#%d %s %s", o.Proc, o.Seq, o.Kind, o.Outcome)
	for _, e := range o.Effects {
		fmt.Fprintf(&b, " %s@v%d", e.Table, e.Version)
		if len(e.Put) > 0 {
			fmt.Fprintf(&b, " put%v", linRowIDs(e.Put))
		}
		if len(e.Del) > 0 {
			fmt.Fprintf(&b, " del%v", e.Del)
		}
		if len(e.Upd) > 0 {
			fmt.Fprintf(&b, " upd%v", linRowIDs(e.Upd))
		}
	}
	if o.Err != "" {
		fmt.Fprintf(&b, " (%s)", o.Err)
	}
	for _, e := range o.FirstErr {
		fmt.Fprintf(&b, " [retried after: %s]", e)
	}
	return b.String()
}

func linRowIDs(rs []linRow) []int64 {
	out := make([]int64, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

// linClock gives a process's timestamps: the wall clock read once at start, advanced by
// the monotonic clock, so timestamps never go backwards within a process and processes on
// one machine share the base.
type linClock struct{ t0 time.Time }

func newLinClock() linClock       { return linClock{t0: time.Now()} }
func (c linClock) now() int64     { return c.t0.UnixNano() + int64(time.Since(c.t0)) }
func (c linClock) String() string { return c.t0.Format(time.RFC3339Nano) }

// linLog appends operations to a process's log file.
type linLog struct {
	f *os.File
	w *bufio.Writer
}

func createLinLog(path string) (*linLog, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &linLog{f: f, w: bufio.NewWriter(f)}, nil
}

func (l *linLog) add(op *linOp) error {
	b, err := json.Marshal(op)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	_, err = l.w.Write(b)
	return err
}

func (l *linLog) close() error { return errors.Join(l.w.Flush(), l.f.Close()) }

// readLinLogs reads every *.jsonl log under dir.
func readLinLogs(dir string) ([]*linOp, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, err
	}
	var ops []*linOp
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for n := 1; sc.Scan(); n++ {
			var op linOp
			if err := json.Unmarshal(sc.Bytes(), &op); err != nil {
				f.Close()
				return nil, fmt.Errorf("%s line %d: %w", p, n, err)
			}
			ops = append(ops, &op)
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	sort.Slice(ops, func(i, j int) bool {
		if ops[i].Proc != ops[j].Proc {
			return ops[i].Proc < ops[j].Proc
		}
		return ops[i].Seq < ops[j].Seq
	})
	return ops, nil
}

// linOpKind is the manifest operation a committed linEffect of kind must have created.
func linOpKind(kind string, e linEffect) manifest.OpKind {
	switch {
	case kind == linKindUpdate:
		return manifest.OpUpdate
	case len(e.Put) > 0 && len(e.Del) == 0:
		return manifest.OpAppend
	case len(e.Del) > 0 && len(e.Put) == 0:
		return manifest.OpDelete
	}
	return ""
}

// linRows is a table's content in the model: id → row.
type linRows map[int64]linRow

// apply applies e to s, checking its premises: appended ids are new, deleted and updated
// ids exist.
func (s linRows) apply(e linEffect) error {
	for _, id := range e.Del {
		if _, ok := s[id]; !ok {
			return fmt.Errorf("deletes row %d, which is not there", id)
		}
		delete(s, id)
	}
	for _, r := range e.Upd {
		if _, ok := s[r.ID]; !ok {
			return fmt.Errorf("updates row %d, which is not there", r.ID)
		}
		s[r.ID] = r
	}
	for _, r := range e.Put {
		if _, ok := s[r.ID]; ok {
			return fmt.Errorf("appends row %d, which is already there", r.ID)
		}
		s[r.ID] = r
	}
	return nil
}

// diff describes how got differs from want ("" when equal).
func (s linRows) diff(got linRows) string {
	var missing, extra, changed []string
	for id, w := range s {
		g, ok := got[id]
		switch {
		case !ok:
			missing = append(missing, fmt.Sprint(id))
		case g != w:
			changed = append(changed, fmt.Sprintf("%d: %q want %q", id, g.Val, w.Val))
		}
	}
	for id := range got {
		if _, ok := s[id]; !ok {
			extra = append(extra, fmt.Sprint(id))
		}
	}
	if len(missing)+len(extra)+len(changed) == 0 {
		return ""
	}
	clip := func(xs []string) string {
		slices.Sort(xs)
		if len(xs) > 10 {
			return strings.Join(xs[:10], ", ") + fmt.Sprintf(", … (%d)", len(xs))
		}
		return strings.Join(xs, ", ")
	}
	return fmt.Sprintf("%d rows missing [%s], %d unexpected [%s], %d with another value [%s]",
		len(missing), clip(missing), len(extra), clip(extra), len(changed), clip(changed))
}

// scanRows reads every live row of tbl; a row id seen twice is an error.
func linScanRows(ctx context.Context, tbl *Table) (linRows, error) {
	sc, err := tbl.Scan(ctx, ScanOptions{})
	if err != nil {
		return nil, err
	}
	defer sc.Release()
	out := linRows{}
	for sc.Next() {
		rec := sc.RecordBatch()
		ids, slots, vals := rec.Column(0).(*array.Int64), rec.Column(1).(*array.Int64), rec.Column(2).(*array.String)
		for i := range int(rec.NumRows()) {
			r := linRow{ID: ids.Value(i), Slot: slots.Value(i), Val: vals.Value(i)}
			if prev, ok := out[r.ID]; ok {
				return nil, fmt.Errorf("table %q version %d: row %d appears twice (%q and %q)", tbl.Name(), tbl.Version(), r.ID, prev.Val, r.Val)
			}
			out[r.ID] = r
		}
	}
	return out, sc.Err()
}

// linExpected is check (a): the final content of each table implied by the
// acknowledged operations alone, without any version order. A row is written by the
// process that appends it and afterwards only by its slot's process, which acts only on
// rows it has seen, so applying every original append first and then each process's
// deletes and updates in its own program order gives the final state.
func linExpected(ops []*linOp, tables []string) (map[string]linRows, error) {
	want := map[string]linRows{}
	for _, n := range tables {
		want[n] = linRows{}
	}
	var errs []error
	apply := func(o *linOp, e linEffect) {
		if err := want[e.Table].apply(e); err != nil {
			errs = append(errs, fmt.Errorf("%s: table %q: %w", o, e.Table, err))
		}
	}
	// Pass 1: rows as first appended (ids are unique to the operation appending them).
	for _, o := range ops {
		if o.Outcome != linCommitted || (o.Kind != linKindAppend && o.Kind != linKindGroupPut && o.Kind != linKindGroupMove) {
			continue
		}
		for _, e := range o.Effects {
			apply(o, linEffect{Table: e.Table, Put: e.Put})
		}
	}
	// Pass 2: deletes and updates, each process in its own order (ops are sorted by process
	// and sequence); a row is only ever rewritten by its slot's process.
	for _, o := range ops {
		if o.Kind == linKindRead || o.Outcome != linCommitted {
			continue
		}
		for _, e := range o.Effects {
			apply(o, linEffect{Table: e.Table, Del: e.Del, Upd: e.Upd})
		}
	}
	return want, errors.Join(errs...)
}

// linOwner is the committed linEffect that made one version.
type linOwner struct {
	op *linOp
	e  linEffect
}

// linReplay is check (b): it walks the versions vs of table (Table.Versions) in order, attributes each
// one (except the first, CreateTable's, and prepared versions of aborted groups, which
// count as empty) to exactly one acknowledged linEffect, and replays the effects from an empty
// table. check is called with the model after every version (return an error to stop).
func linReplay(table string, vs []VersionInfo, ops []*linOp, check func(v uint64, model linRows) error) (linRows, error) {
	owners := map[uint64]linOwner{}
	for _, o := range ops {
		if o.Kind == linKindRead || o.Outcome != linCommitted {
			continue
		}
		for _, e := range o.Effects {
			if e.Table != table {
				continue
			}
			if prev, ok := owners[e.Version]; ok {
				return nil, fmt.Errorf("table %q version %d acknowledged twice: to %s and to %s", table, e.Version, prev.op, o)
			}
			owners[e.Version] = linOwner{o, e}
		}
	}
	model := linRows{}
	var errs []error
	for i, vi := range vs {
		if vi.Version != uint64(i+1) {
			return nil, fmt.Errorf("table %q: versions are not contiguous: %d at position %d", table, vi.Version, i)
		}
		own, ok := owners[vi.Version]
		delete(owners, vi.Version)
		switch {
		case vi.Version == 1:
			if vi.Operation != manifest.OpCreate || ok {
				errs = append(errs, fmt.Errorf("table %q version 1 is %s (claimed by %v)", table, vi.Operation, own.op))
			}
		case vi.Aborted:
			if ok {
				errs = append(errs, fmt.Errorf("table %q version %d belongs to aborted group %s but was acknowledged to %s", table, vi.Version, vi.Group, own.op))
			}
			continue
		case !ok:
			errs = append(errs, fmt.Errorf("table %q version %d (%s, transaction %s, group %q) was committed but acknowledged to nobody", table, vi.Version, vi.Operation, vi.Transaction, vi.Group))
			continue
		default:
			if want := linOpKind(own.op.Kind, own.e); vi.Operation != want {
				errs = append(errs, fmt.Errorf("table %q version %d is a %s, but %s acknowledged a %s", table, vi.Version, vi.Operation, own.op, want))
			}
			if isGroup := strings.HasPrefix(own.op.Kind, "group-"); isGroup != (vi.Group != "") {
				errs = append(errs, fmt.Errorf("table %q version %d: group %q, acknowledged to %s", table, vi.Version, vi.Group, own.op))
			}
			if !vi.Published {
				errs = append(errs, fmt.Errorf("table %q version %d acknowledged to %s is not published", table, vi.Version, own.op))
			}
			if err := model.apply(own.e); err != nil {
				errs = append(errs, fmt.Errorf("table %q version %d (%s): %w", table, vi.Version, own.op, err))
			}
		}
		if check != nil {
			if err := check(vi.Version, model); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for v, own := range owners {
		errs = append(errs, fmt.Errorf("table %q version %d was acknowledged to %s but is not in the store", table, v, own.op))
	}
	return model, errors.Join(errs...)
}

// linResolveUnknown decides single-table writes whose outcome was unknown: a version whose
// transaction id is theirs makes them committed there; otherwise they never landed.
func linResolveUnknown(ops []*linOp, versions map[string][]VersionInfo) error {
	byTxn := map[string]VersionInfo{}
	for _, vs := range versions {
		for _, vi := range vs {
			byTxn[vi.Transaction] = vi
		}
	}
	var errs []error
	for _, o := range ops {
		if o.Outcome != linUnknown {
			continue
		}
		if o.Txn == "" || len(o.Effects) != 1 {
			errs = append(errs, fmt.Errorf("%s: outcome unknown and no transaction id to decide it", o))
			continue
		}
		if vi, ok := byTxn[o.Txn]; ok && !vi.Aborted {
			o.Outcome, o.Effects[0].Version = linCommitted, vi.Version
			o.Return = math.MaxInt64 // it took linEffect at some point after its invocation
		} else {
			o.Outcome = linUncommitted
		}
	}
	return errors.Join(errs...)
}

// The linearizability model: the state is the published version of each table; a
// committed write of versions V on tables T takes linEffect atomically, and only if each
// V[i] is above the version T[i] has (a later version is never followed by an earlier
// one, and a commit's version becomes visible between its invocation and its response); a
// read (Refresh, Snapshot) sees exactly the state at one point of its interval.

type linInput struct {
	Read   bool
	Tables []int // indexes into the model's tables
}

type linState [2]uint64

func linModel(tables []string, init linState) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return init },
		Step: func(state, input, output any) (bool, any) {
			s, in, out := state.(linState), input.(linInput), output.([]uint64)
			if in.Read {
				for i, t := range in.Tables {
					if s[t] != out[i] {
						return false, s
					}
				}
				return true, s
			}
			for i, t := range in.Tables {
				if out[i] <= s[t] {
					return false, s
				}
				s[t] = out[i]
			}
			return true, s
		},
		Equal: func(a, b any) bool { return a.(linState) == b.(linState) },
		Hash: func(state any) uint64 {
			s := state.(linState)
			return s[0]*1_000_003 + s[1]
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(linInput), output.([]uint64)
			var parts []string
			for i, t := range in.Tables {
				parts = append(parts, fmt.Sprintf("%s=v%d", tables[t], out[i]))
			}
			if in.Read {
				return "read " + strings.Join(parts, " ")
			}
			return "commit " + strings.Join(parts, " ")
		},
		DescribeState: func(state any) string {
			s := state.(linState)
			return fmt.Sprintf("published %s=v%d %s=v%d", tables[0], s[0], tables[1], s[1])
		},
	}
}

// linHistory turns the committed writes and the reads of ops into porcupine operations
// (rejected writes and writes that never landed have no linEffect and are left out).
func linHistory(ops []*linOp, tables []string) []porcupine.Operation {
	idx := map[string]int{}
	for i, n := range tables {
		idx[n] = i
	}
	var out []porcupine.Operation
	for _, o := range ops {
		if o.Kind != linKindRead && o.Outcome != linCommitted {
			continue
		}
		in := linInput{Read: o.Kind == linKindRead}
		var vs []uint64
		for _, e := range o.Effects {
			in.Tables = append(in.Tables, idx[e.Table])
			vs = append(vs, e.Version)
		}
		out = append(out, porcupine.Operation{ClientId: o.Proc, Input: in, Output: vs, Call: o.Call, Return: o.Return,
			Metadata: fmt.Sprintf("p%d#%d %s", o.Proc, o.Seq, o.Kind)})
	}
	return out
}

// linCheck runs porcupine over the history. On a violation (or a timeout) it
// writes the visualization to a file that outlives the test and fails with its path.
func linCheck(t *testing.T, ops []*linOp, tables []string, init linState) {
	t.Helper()
	model := linModel(tables, init)
	model.DescribeOperationMetadata = func(info any) string { s, _ := info.(string); return s }
	hist := linHistory(ops, tables)
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(model, hist, 30*time.Second)
	t.Logf("porcupine: %s for %d operations (%d processes) in %v", res, len(hist), len(slices.Collect(maps.Keys(linProcSet(ops)))), time.Since(start).Round(time.Millisecond))
	if res == porcupine.Ok {
		return
	}
	f, err := os.CreateTemp("", "shale-linearizability-*.html")
	if err != nil {
		t.Fatalf("history is %s; writing the visualization: %v", res, err)
	}
	verr := porcupine.Visualize(model, info, f)
	f.Close()
	t.Fatalf("commit/publish/snapshot history is %s (not proven linearizable); visualization: %s (%v)", res, f.Name(), verr)
}

func linProcSet(ops []*linOp) map[int]bool {
	m := map[int]bool{}
	for _, o := range ops {
		m[o.Proc] = true
	}
	return m
}

// linCheckShape: every process logged every round; rejections are conflicts, never
// another error; a delete deleted exactly the one row it named.
func linCheckShape(t *testing.T, ops []*linOp, cfgs []linChildConfig) {
	t.Helper()
	reads := map[int]int{}
	for _, o := range ops {
		if o.Kind == linKindRead {
			reads[o.Proc]++
			continue
		}
		switch {
		case o.Outcome == linRejected && !o.Conflict && !o.Injected:
			t.Errorf("%s: rejected by an error that is neither a conflict nor an injected fault", o)
		case o.Outcome == linCommitted && (o.Kind == linKindDelete || o.Kind == linKindUpdate) && o.Rows != 1:
			t.Errorf("%s: changed %d rows, want the 1 row it found", o, o.Rows)
		case (o.Kind == linKindGroupDel && o.Rows != 2) || (o.Kind == linKindGroupMove && o.Rows != 2):
			t.Errorf("%s: prepared %d rows, want 2", o, o.Rows)
		}
	}
	for _, cfg := range cfgs {
		if cfg.Role != roleAppend && reads[cfg.Proc] != cfg.Ops {
			t.Errorf("process %d logged %d rounds, want %d", cfg.Proc, reads[cfg.Proc], cfg.Ops)
		}
	}
}

// linCheckFaults logs the faults the children injected and fails if none was (the
// faulty processes' commits would then prove nothing about faults).
func linCheckFaults(t *testing.T, dir string, procs int) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "faults-p*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != procs {
		t.Fatalf("%d fault reports, want %d", len(paths), procs)
	}
	total := map[string]int{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var counts map[string]int
		if err := json.Unmarshal(b, &counts); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		for k, n := range counts {
			total[k] += n
		}
	}
	t.Logf("injected faults: %v", total)
	if total["publish-failed"] != 2*procs {
		t.Errorf("%d publishes failed on purpose, want 2 per faulty process", total["publish-failed"])
	}
}

// linSummarize logs what happened: outcomes by kind, commit attempts and rebases.
func linSummarize(t *testing.T, ops []*linOp) {
	t.Helper()
	counts := map[string]int{}
	var attempts, rebased, commits, maxAttempts, retried int
	for _, o := range ops {
		if o.Kind == linKindRead {
			counts["read"]++
			continue
		}
		counts[o.Kind+" "+o.Outcome]++
		if o.Retries > 0 {
			retried++
		}
		if o.Outcome == linCommitted && o.Attempts > 0 {
			commits++
			attempts += o.Attempts
			rebased += o.Rebased
			maxAttempts = max(maxAttempts, o.Attempts)
		}
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, counts[k]))
	}
	t.Logf("history: %s; %d writes retried after an unknown outcome", strings.Join(parts, ", "), retried)
	if commits > 0 {
		t.Logf("single-table commits: %.2f put-if-absent attempts and %.2f rebased versions per commit (max %d attempts)",
			float64(attempts)/float64(commits), float64(rebased)/float64(commits), maxAttempts)
	}
}

// TestHistoryCheckersCatchViolations feeds the checkers small histories with one defect
// each and expects every defect to be reported, so a passing multi-process run means
// something.
func TestHistoryCheckersCatchViolations(t *testing.T) {
	const a, b = "a", "b"
	r := func(id int64) linRow { return linRow{ID: id, Val: fmt.Sprint("v", id)} }
	put := func(proc, seq int, v uint64, call, ret int64, ids ...int64) *linOp {
		e := linEffect{Table: a, Version: v}
		for _, id := range ids {
			e.Put = append(e.Put, r(id))
		}
		return &linOp{Proc: proc, Seq: seq, Kind: linKindAppend, Outcome: linCommitted, Call: call, Return: ret, Effects: []linEffect{e}}
	}
	del := func(proc, seq int, v uint64, call, ret int64, id int64) *linOp {
		return &linOp{Proc: proc, Seq: seq, Kind: linKindDelete, Outcome: linCommitted, Call: call, Return: ret,
			Effects: []linEffect{{Table: a, Version: v, Del: []int64{id}}}}
	}
	read := func(proc, seq int, call, ret int64, va, vb uint64) *linOp {
		return &linOp{Proc: proc, Seq: seq, Kind: linKindRead, Call: call, Return: ret, Effects: []linEffect{{Table: a, Version: va}, {Table: b, Version: vb}}}
	}
	group := func(proc, seq int, call, ret int64, va, vb uint64) *linOp {
		return &linOp{Proc: proc, Seq: seq, Kind: linKindGroupPut, Outcome: linCommitted, Call: call, Return: ret,
			Effects: []linEffect{{Table: a, Version: va, Put: []linRow{r(100)}}, {Table: b, Version: vb, Put: []linRow{r(100)}}}}
	}
	versions := func(kinds ...manifest.OpKind) []VersionInfo {
		vs := []VersionInfo{{Version: 1, Operation: manifest.OpCreate, Published: true}}
		for i, k := range kinds {
			vs = append(vs, VersionInfo{Version: uint64(i + 2), Operation: k, Published: true})
		}
		return vs
	}
	good := []*linOp{put(0, 1, 2, 10, 20, 1, 2), put(1, 1, 3, 15, 30, 3), del(0, 2, 4, 31, 40, 1)}
	goodVs := versions(manifest.OpAppend, manifest.OpAppend, manifest.OpDelete)
	final := linRows{2: r(2), 3: r(3)}

	// The good history passes every check.
	want, err := linExpected(good, []string{a})
	if err != nil || want[a].diff(final) != "" {
		t.Fatalf("good history: %v %s", err, want[a].diff(final))
	}
	if m, err := linReplay(a, goodVs, good, nil); err != nil || m.diff(final) != "" {
		t.Fatalf("good replay: %v", err)
	}
	if res := porcupine.CheckOperations(linModel([]string{a, b}, linState{1, 1}), linHistory(good, []string{a, b})); !res {
		t.Fatal("good history is not linearizable")
	}

	// (a) A lost acknowledged append, and a row that came back, differ from the logs.
	if d := want[a].diff(linRows{3: r(3)}); !strings.Contains(d, "1 rows missing [2]") {
		t.Errorf("lost row: %q", d)
	}
	if d := want[a].diff(linRows{1: r(1), 2: r(2), 3: r(3)}); !strings.Contains(d, "1 unexpected [1]") {
		t.Errorf("deleted row back: %q", d)
	}
	// (b) A version acknowledged to nobody, one acknowledged but missing, an aborted
	// version acknowledged, a delete ordered before its row's append, a wrong kind.
	for name, c := range map[string]struct {
		vs   []VersionInfo
		ops  []*linOp
		want string
	}{
		"unacknowledged": {versions(manifest.OpAppend, manifest.OpAppend, manifest.OpDelete, manifest.OpAppend), good, "acknowledged to nobody"},
		"missing":        {versions(manifest.OpAppend, manifest.OpAppend), good, "not in the store"},
		"aborted":        {append(versions(manifest.OpAppend, manifest.OpAppend)[:3], VersionInfo{Version: 4, Operation: manifest.OpDelete, Aborted: true}), good, "aborted group"},
		"order":          {versions(manifest.OpDelete, manifest.OpAppend, manifest.OpAppend), []*linOp{put(0, 1, 3, 10, 20, 1, 2), put(1, 1, 4, 15, 30, 3), del(0, 2, 2, 31, 40, 1)}, "not there"},
		"kind":           {versions(manifest.OpAppend, manifest.OpUpdate, manifest.OpDelete), good, "is a update"},
		"twice":          {goodVs, append(slices.Clone(good), put(2, 1, 3, 1, 50, 9)), "acknowledged twice"},
	} {
		if _, err := linReplay(a, c.vs, c.ops, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("replay %s: %v, want %q", name, err, c.want)
		}
	}
	// (c) Stale reads, a version that goes backwards in real time, a read of half a group,
	// a version visible before its commit was invoked: not linearizable.
	model := linModel([]string{a, b}, linState{1, 1})
	for name, h := range map[string][]*linOp{
		"stale read":      {put(0, 1, 2, 10, 20, 1), read(1, 1, 25, 30, 1, 1)},
		"backwards":       {put(0, 1, 3, 10, 20, 1), put(1, 1, 2, 25, 30, 2)},
		"half a group":    {group(0, 1, 10, 20, 2, 2), read(1, 1, 12, 18, 2, 1)},
		"before invoking": {read(1, 1, 5, 8, 2, 1), put(0, 1, 2, 10, 20, 1)},
	} {
		if porcupine.CheckOperations(model, linHistory(h, []string{a, b})) {
			t.Errorf("%s: history accepted as linearizable", name)
		}
	}
	// Concurrent commits may be seen in version order even when their responses are not.
	ok := []*linOp{put(0, 1, 3, 10, 40, 1), put(1, 1, 2, 12, 50, 2), read(2, 1, 41, 45, 3, 1)}
	if !porcupine.CheckOperations(model, linHistory(ok, []string{a, b})) {
		t.Error("concurrent commits seen in version order rejected")
	}
	// Unknown outcomes are decided by transaction id.
	u := []*linOp{{Proc: 0, Seq: 1, Kind: linKindAppend, Outcome: linUnknown, Txn: "T1", Effects: []linEffect{{Table: a}}},
		{Proc: 0, Seq: 2, Kind: linKindAppend, Outcome: linUnknown, Txn: "T2", Effects: []linEffect{{Table: a}}}}
	if err := linResolveUnknown(u, map[string][]VersionInfo{a: {{Version: 7, Transaction: "T1"}}}); err != nil {
		t.Fatal(err)
	}
	if u[0].Outcome != linCommitted || u[0].Effects[0].Version != 7 || u[1].Outcome != linUncommitted {
		t.Errorf("resolved: %s; %s", u[0], u[1])
	}
}

package fencetest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/compaction"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/engine/enginetest"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/recovery"
	"github.com/shale-db/shale/store"
)

const childEnv = "SHALE_FENCETEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(child(mode))
	}
	enginetest.Main(m)
}

// result is what a child reports.
type result struct {
	Outcome string `json:"outcome"`
	Aborted bool   `json:"aborted"` // errors.Is(err, manifest.ErrTxnAborted)
	Dropped bool   `json:"dropped"` // errors.Is(err, engine.ErrTableDropped)
	Version uint64 `json:"version"`
	Rows    int64  `json:"rows"` // a pin's scan: the rows it read
	Err     string `json:"error,omitempty"`
}

var schema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

func batch(from, to int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for i := from; i < to; i++ {
		b.Field(0).(*array.Int64Builder).Append(i)
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("n%d", i))
	}
	return b.NewRecordBatch()
}

// child runs one operation (mode "append" of 100 rows in two data files, "delete",
// "compact", "group", "commit", "pin" or "recover") on table TABLE and prints its result. A write hold is taken at once
// (WriteHoldAfter 1 ms; HOLD_AFTER, a Go duration, overrides it, negative for never), so
// the parent can show that the hold's lease is not what keeps the write safe.
func child(mode string) int {
	ctx := context.Background()
	holdAfter := time.Millisecond
	if v := os.Getenv("HOLD_AFTER"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			fmt.Fprintln(os.Stderr, "child: HOLD_AFTER:", err)
			return 1
		}
		holdAfter = d
	}
	opts := engine.Options{WriteHoldAfter: holdAfter}
	if mode == "append" {
		// Two data files of 50 rows: an append's last file is written by its commit's
		// first attempt (with the transaction record), so only the first is written
		// before the commit point, where the paused-writer tests stop it.
		opts.Write.MaxRowsPerFile = 50
	}
	db, closeDB, err := enginetest.OpenChildDB(ctx, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	defer closeDB()
	switch mode {
	case "commit":
		return report(commitRecord(ctx, db))
	case "pin":
		return report(pinAndScan(ctx, db))
	case "recover":
		_, err := recovery.Recover(ctx, db.Store(), db.Catalog(), os.Getenv("TABLE"), recovery.Options{MinAge: -1})
		return report(engine.CommitResult{}, err)
	}
	tbl, err := db.OpenTable(ctx, os.Getenv("TABLE"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	var res engine.CommitResult
	switch mode {
	case "append":
		rec := batch(1000, 1100)
		res, err = tbl.AppendRecord(ctx, rec)
		rec.Release()
	case "delete":
		res, err = tbl.Delete(ctx, "id < 5")
	case "compact":
		var st compaction.Stats
		st, err = recovery.Enable(compaction.New(db)).Run(ctx, tbl.Name(), compaction.Options{TargetRows: 1000})
		res.Version = st.Version
	case "group":
		res, err = groupAppend(ctx, db)
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	return report(res, err)
}

// report prints a child's result line for its operation's result and error.
func report(res engine.CommitResult, err error) int {
	out := result{Outcome: engine.OutcomeOf(err).String(), Aborted: errors.Is(err, manifest.ErrTxnAborted),
		Dropped: errors.Is(err, engine.ErrTableDropped), Version: res.Version, Rows: res.Rows}
	if err != nil {
		out.Err = err.Error()
	}
	b, _ := json.Marshal(out)
	fmt.Printf("FENCETEST-RESULT %s\n", b)
	return 0
}

// groupAppend appends rows 2000..2009 to tables t and u in one multi-table transaction.
func groupAppend(ctx context.Context, db *engine.DB) (engine.CommitResult, error) {
	snap, err := db.Snapshot(ctx, "t", "u")
	if err != nil {
		return engine.CommitResult{}, err
	}
	var writes []*engine.Write
	for _, name := range []string{"t", "u"} {
		rec := batch(2000, 2010)
		rdr, _ := array.NewRecordReader(schema, []arrow.RecordBatch{rec})
		w, err := snap.Tables[name].PrepareAppend(ctx, rdr)
		rdr.Release()
		rec.Release()
		if err != nil {
			return engine.CommitResult{}, err
		}
		writes = append(writes, w)
	}
	res, err := db.Commit(ctx, writes...)
	if err != nil {
		return engine.CommitResult{}, err
	}
	return res[0], nil
}

// started is a child process and its output.
type started struct {
	cmd  *exec.Cmd
	out  *strings.Builder
	done chan error
}

func startChild(t *testing.T, s store.Store, mode, table string, env ...string) *started {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childEnv+"="+mode, "TABLE="+table), enginetest.ChildEnv(s)...)
	cmd.Env = append(cmd.Env, env...)
	c := &started{cmd: cmd, out: &strings.Builder{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = c.out, c.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGCONT)
			_ = cmd.Process.Kill()
			<-c.done
		}
	})
	return c
}

// wait waits for the child to exit and returns its result line.
func (c *started) wait(t *testing.T) result {
	t.Helper()
	select {
	case err := <-c.done:
		if err != nil {
			t.Fatalf("child: %v\n%s", err, c.out)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("child did not finish:\n%s", c.out)
	}
	sc := bufio.NewScanner(strings.NewReader(c.out.String()))
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "FENCETEST-RESULT "); ok {
			var r result
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatal(err)
			}
			return r
		}
	}
	t.Fatalf("no result line:\n%s", c.out)
	return result{}
}

// waitFor polls cond until it holds, failing the test after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

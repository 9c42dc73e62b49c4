package engine

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shale-db/shale/coord"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/store"
)

// Child processes: the test binary re-executed with childEnv set runs one role and exits.
const childEnv = "SHALE_ENGINE_TEST_CHILD"

func runChild() int {
	if err := child(); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

func child() error {
	ctx := context.Background()
	worker, _ := strconv.Atoi(os.Getenv("WORKER"))
	appends, _ := strconv.Atoi(os.Getenv("APPENDS"))
	// Wait for the start file so that every process begins together.
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(os.Getenv("START_FILE")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("start file never appeared")
		}
		time.Sleep(time.Millisecond) // polling a condition with a deadline
	}
	s, err := store.Open(ctx, os.Getenv("STORE_URL"), store.Options{})
	if err != nil {
		return err
	}
	cli, err := coord.Connect(ctx, coord.Config{Endpoints: strings.Split(os.Getenv("ETCD"), ",")})
	if err != nil {
		return err
	}
	defer cli.Close()
	db, err := Open(ctx, s, Options{Etcd: cli.Etcd()})
	if err != nil {
		return err
	}
	tbl, err := db.OpenTable(ctx, "race")
	if err != nil {
		return err
	}
	for i := 0; i < appends; i++ {
		from := int64(worker*100000 + i*10)
		rec := kvBatch(from, from+10)
		_, err := tbl.AppendRecord(ctx, rec)
		rec.Release()
		if err != nil {
			return fmt.Errorf("append %d: %w", i, err)
		}
	}
	return nil
}

// TestCrossProcessAppends: 4 OS processes × 25 appends to one table on local disk give
// 100 committed appends, contiguous versions, every row exactly once, and published = HEAD
// (invariants 1, 2, 6).
func TestCrossProcessAppends(t *testing.T) {
	const procs, appends = 4, 25
	ctx := context.Background()
	dir := t.TempDir()
	storeURL := "file://" + filepath.Join(dir, "store")
	db := openDB(t, storeURL)
	if _, err := db.CreateTable(ctx, "race", kvSchema); err != nil {
		t.Fatal(err)
	}
	start := filepath.Join(dir, "start")
	var cmds []*exec.Cmd
	for w := 0; w < procs; w++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=1", "WORKER="+strconv.Itoa(w), "APPENDS="+strconv.Itoa(appends),
			"START_FILE="+start, "STORE_URL="+storeURL, "ETCD="+strings.Join(testEtcd.Endpoints(), ","))
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	if err := os.WriteFile(start, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("process %d: %v", i, err)
		}
	}
	head, err := manifest.Head(ctx, db.Store(), "race")
	if err != nil {
		t.Fatal(err)
	}
	if head != 1+procs*appends {
		t.Fatalf("HEAD %d, want %d", head, 1+procs*appends)
	}
	vs, err := manifest.Versions(ctx, db.Store(), "race")
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vs {
		if v != uint64(i+1) {
			t.Fatalf("versions not contiguous: %v", vs)
		}
	}
	p, _, err := db.Catalog().Get(ctx, "race")
	if err != nil || p.Version != head {
		t.Fatalf("published %d (%v), HEAD %d", p.Version, err, head)
	}
	tbl, err := db.OpenTable(ctx, "race")
	if err != nil {
		t.Fatal(err)
	}
	got := ids(t, tbl, "")
	slices.Sort(got)
	var want []int64
	for w := 0; w < procs; w++ {
		for i := 0; i < appends; i++ {
			from := int64(w*100000 + i*10)
			want = append(want, seq(from, from+10)...)
		}
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("rows: got %d, want %d (every row exactly once)", len(got), len(want))
	}
}

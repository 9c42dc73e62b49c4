package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestTwoCommandsOnAFreshHome starts two commands at once on a state directory with no
// etcd yet: both must find or start the one shared background server and succeed.
func TestTwoCommandsOnAFreshHome(t *testing.T) {
	e := freshEnv(t)
	in := e.file("x.csv", "id,name\n1,a\n2,b\n")
	var wg sync.WaitGroup
	results := make([]result, 2)
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			results[i] = e.run("import", in, "--table", fmt.Sprintf("t%d", i))
		}(i)
	}
	wg.Wait()
	for i, r := range results {
		if r.code != 0 {
			t.Fatalf("command %d: %v", i, r)
		}
	}
	// Both tables are published in the one catalog.
	var st struct {
		Tables []struct {
			Table     string
			Published uint64
		}
	}
	if err := json.Unmarshal([]byte(e.ok("status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Tables) != 2 || st.Tables[0].Published != 2 || st.Tables[1].Published != 2 {
		t.Fatalf("status %+v", st)
	}
	// Two imports into the same table at once: both append (the commit loop rebases).
	// (The same file again needs its own idempotency keys: without, it is already
	// imported.)
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			results[i] = e.run("import", in, "--table", "t0", "--idempotency-key", fmt.Sprint("again-", i))
		}(i)
	}
	wg.Wait()
	for i, r := range results {
		if r.code != 0 {
			t.Fatalf("concurrent append %d: %v", i, r)
		}
	}
	if vs := e.versions("t0"); len(vs) != 4 || vs[3].Rows != 6 {
		t.Fatalf("versions %+v", vs)
	}
}

// TestDemoSmall runs the whole demo on a 60,000-row slice of the flights file, twice:
// the second run overwrites the table in new versions, then --fresh starts over. (One
// record batch: statistics leave at most one batch, so the planner keeps both indexes out;
// TestDemoFull sees the delay index used.)
func TestDemoSmall(t *testing.T) {
	e := freshEnv(t)
	path := filepath.Join(e.dir, "flights-small.parquet")
	flightsSlice(t, path, 60000)
	out := e.ok("demo", "--data", path)
	for _, w := range []string{
		"── 0. Import", "60,000 rows into flights, version 2",
		"── 1. Flights from SFO", "origin = 'SFO'",
		"── 2. Delayed over an hour", "flights matched",
		"── 3. Top 10 routes", "aggregated 60,000 rows",
		"── 4. Indexes", "shale index create flights --column date: btree date_idx, 60,000 rows", "version 3",
		"WHERE " + demoDayWhere, "date_idx not used", "with date_idx:", "without:",
		"WHERE " + demoPointWhere, "shale index create flights --column delay: btree delay_idx, 60,000 rows", "version 4",
		"2 indexes, version 4",
		"── 5. Delete", "deleted", "0 matching (version 5)",
		"── 6. Versions of flights", "create_index", "5 versions",
		"── 7. Time travel to version 4", "still readable at version 4",
		`shale query flights --where "delay = 600" --explain`,
	} {
		if !strings.Contains(out, w) {
			t.Fatalf("demo output lacks %q:\n%s", w, out)
		}
	}
	// Overwritten, the indexes cover nothing until the demo replaces them.
	out = e.ok("demo", "--data", path)
	for _, w := range []string{"overwriting it in a new version", "version 6", "btree date_idx, 60,000 rows, ", "version 7", "9 versions", "Time travel to version 8"} {
		if !strings.Contains(out, w) {
			t.Fatalf("second demo output lacks %q:\n%s", w, out)
		}
	}
	if l := e.indexList("flights"); len(l) != 2 || l[0].FragmentsCovered != l[0].Fragments || l[1].FragmentsCovered != l[1].Fragments {
		t.Fatalf("indexes after the second demo: %+v", l)
	}
	// --fresh drops the table (its drop marker is version 10) and creates it again: a
	// new incarnation numbered on from the marker (create 11, import 12, indexes 13 and
	// 14, delete 15).
	out = e.ok("demo", "--data", path, "--fresh")
	for _, w := range []string{"--fresh: dropped table flights", "60,000 rows into flights, version 12", "5 versions", "Time travel to version 14"} {
		if !strings.Contains(out, w) {
			t.Fatalf("--fresh demo output lacks %q:\n%s", w, out)
		}
	}
	if vs := e.versions("flights"); len(vs) != 5 {
		t.Fatalf("after --fresh: %+v", vs)
	}
	e.fails(1, []string{"nope.parquet", "not found"}, "demo", "--data", "nope.parquet")
}

// TestDemoFull runs `shale demo` on the whole 3,000,000-row file. It is slow (about 10 s
// on 2 cores), so it runs only with SHALE_DEMO_TEST=1 and without -short.
func TestDemoFull(t *testing.T) {
	if testing.Short() || os.Getenv("SHALE_DEMO_TEST") == "" {
		t.Skip("set SHALE_DEMO_TEST=1 (and no -short) to run the full demo")
	}
	e := freshEnv(t)
	e.dir = "." // the default --data is found from the package directory's parents
	start := time.Now()
	out := e.ok("demo")
	t.Logf("shale demo took %s:\n%s", time.Since(start), out)
	for _, w := range []string{"3,000,000 rows into flights, version 2", "60,869 of 3,000,000 flights leave from SFO",
		"78,888 flights matched", "LAX → LAS    8,323",
		"btree date_idx, 3,000,000 rows", "17,089 rows; date_idx not used: statistics already leave 1 batch", "1 of 46 batches, 2 requests",
		"btree delay_idx, 3,000,000 rows", "2 rows; delay_idx used", "2 of 46 batches", "46 of 46 batches",
		"deleted 166,341 rows", "version 4: 166,341 rows where origin = 'ORD' (now: 0)"} {
		if !strings.Contains(out, w) {
			t.Fatalf("demo output lacks %q", w)
		}
	}
}

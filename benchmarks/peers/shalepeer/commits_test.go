//go:build unix

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
)

// TestMain turns a re-executed test binary into a writer process (see writers), as
// main does for the shalepeer binary.
func TestMain(m *testing.M) {
	if cfg := os.Getenv(writerEnv); cfg != "" {
		if err := runWriterChild(cfg); err != nil {
			fmt.Fprintln(os.Stderr, "shalepeer writer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestCommitOps drives the commit-path operations through the protocol on synthetic
// rows: appends times the commits after skip and leaves exactly its rows; history builds
// one fragment per append; open reads the table warm (no store request: the DB's
// manifest cache) and through a new DB (one GET); writers runs three writer processes
// whose commits are all accounted for.
func TestCommitOps(t *testing.T) {
	dir := t.TempDir()
	reqs := []string{
		`{"op":"prepare","args":{"dir":` + quote(dir) + `,"rows":1000}}`,
		`{"op":"appends","args":{"table":"a","rows_per_commit":50,"commits":12,"skip":2}}`,
		`{"op":"history","args":{"table":"h","rows_per_commit":10,"commits":20}}`,
		`{"op":"open","args":{"table":"h"}}`,
		`{"op":"open","args":{"table":"h"}}`,
		`{"op":"open","args":{"table":"h","cold":true}}`,
		`{"op":"writers","args":{"table":"w","procs":3,"commits_per_proc":4,"rows_per_commit":10}}`,
		`{"op":"quit"}`,
	}
	pr, pw := io.Pipe()
	w := &worker{log: io.Discard}
	defer w.close()
	done := make(chan error, 1)
	go func() {
		done <- serve(context.Background(), w, strings.NewReader(strings.Join(reqs, "\n")+"\n"), pw)
		pw.Close()
	}()
	var replies []map[string]any
	sc := bufio.NewScanner(pr)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("reply %q: %v", sc.Text(), err)
		}
		replies = append(replies, r)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ok := func(i int) map[string]any {
		t.Helper()
		if replies[i]["ok"] != true {
			t.Fatalf("request %s: %v", reqs[i], replies[i]["error"])
		}
		return replies[i]["result"].(map[string]any)
	}
	if a := ok(1); a["rows"].(float64) != 600 || a["commits"].(float64) != 10 || len(a["latency_s"].([]any)) != 10 || a["wall_s"].(float64) <= 0 || a["version"].(float64) != 13 {
		t.Fatalf("appends: %v", a)
	}
	if h := ok(2); h["fragments"].(float64) != 20 || h["version"].(float64) != 21 || h["rows"].(float64) != 200 {
		t.Fatalf("history: %v", h)
	}
	reqTotal := func(i int) float64 { return ok(i)["requests_total"].(float64) }
	if ok(3)["fragments"].(float64) != 20 || reqTotal(4) != 0 || reqTotal(5) != 1 {
		t.Fatalf("opens: warm %v then %v requests (want 0 the second time), cold %v (want 1)", reqTotal(3), reqTotal(4), reqTotal(5))
	}
	wr := ok(6)
	if wr["commits"].(float64) != 12 || wr["version"] != wr["expected_version"] || wr["rows"].(float64) != 120 || wr["commits_per_s"].(float64) <= 0 {
		t.Fatalf("writers: %v", wr)
	}
}

//go:build unix

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// TestServe drives the worker as the peer harness does, on synthetic flights rows: the
// import, a BTree build, and one query in each mode return the same rows, with timings,
// store requests and the plan; the forced mode uses the index and the full scan reads
// every batch; a bad request is an error reply and the worker goes on.
func TestServe(t *testing.T) {
	dir := t.TempDir()
	const day = "date >= TIMESTAMP '2001-03-15 00:00:00' AND date < TIMESTAMP '2001-03-16 00:00:00'"
	reqs := []string{
		`{"op":"hello"}`,
		`{"op":"query","args":{"filter":"delay > 1"}}`, // before prepare: an error
		`{"op":"prepare","args":{"dir":` + quote(dir) + `,"rows":200000}}`,
		`{"op":"create_index","args":{"column":"date","name":"date_idx"}}`,
		`{"op":"query","args":{"filter":` + quote(day) + `,"mode":"planner"}}`,
		`{"op":"query","args":{"filter":` + quote(day) + `,"mode":"force"}}`,
		`{"op":"query","args":{"filter":` + quote(day) + `,"mode":"noindex"}}`,
		`{"op":"query","args":{"filter":` + quote(day) + `,"mode":"fullscan"}}`,
		`{"op":"query","args":{"filter":` + quote(day) + `,"mode":"force","cold":true}}`,
		`{"op":"query","args":{"filter":"x","mode":"sideways"}}`,
		`{"op":"nope"}`,
		`{"op":"quit"}`,
		`{"op":"hello"}`, // after quit: never answered
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
	if len(replies) != len(reqs)-1 {
		t.Fatalf("%d replies to %d requests (the one after quit unanswered): %v", len(replies), len(reqs), replies)
	}
	ok := func(i int) map[string]any {
		t.Helper()
		if replies[i]["ok"] != true {
			t.Fatalf("request %s: %v", reqs[i], replies[i]["error"])
		}
		return replies[i]["result"].(map[string]any)
	}
	if ok(0)["system"] != "shale" {
		t.Fatalf("hello: %v", replies[0])
	}
	for _, i := range []int{1, 9, 10} {
		if replies[i]["ok"] != false || replies[i]["error"] == "" {
			t.Fatalf("request %s: want an error reply, got %v", reqs[i], replies[i])
		}
	}
	if p := ok(2); p["rows"].(float64) != 200000 || p["wall_s"].(float64) <= 0 || p["rss_peak_bytes"].(float64) <= 0 {
		t.Fatalf("prepare: %v", p)
	}
	if b := ok(3); b["rows_indexed"].(float64) != 200000 || b["rows_per_s"].(float64) <= 0 {
		t.Fatalf("create_index: %v", b)
	}
	var rows float64
	for i := 4; i <= 8; i++ {
		q := ok(i)
		if i == 4 {
			rows = q["rows"].(float64)
		}
		if q["rows"].(float64) != rows || rows == 0 {
			t.Fatalf("%s: %v rows, the planner's query returned %v", reqs[i], q["rows"], rows)
		}
		if q["requests_total"].(float64) < 1 {
			t.Fatalf("%s: no store requests counted: %v", reqs[i], q)
		}
	}
	plan := func(i int) map[string]any { return ok(i)["plan"].(map[string]any) }
	if ix := plan(5)["indexes"].([]any); len(ix) != 1 || ix[0].(map[string]any)["used"] != true {
		t.Fatalf("forced query did not use the index: %v", plan(5))
	}
	if p := plan(7); p["batches_read"] != p["batches"] || p["batches_pruned"].(float64) != 0 {
		t.Fatalf("full scan pruned: %v", p)
	}
	if p := plan(6); p["batches_read"].(float64) >= plan(7)["batches_read"].(float64) {
		t.Fatalf("statistics did not prune the one-day range: %v", p)
	}
	if c := ok(8); c["open_requests"] == nil || c["requests"].(map[string]any)["get"] == nil {
		t.Fatalf("cold query: want the open's requests and a GET of the index lookup: %v", c)
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

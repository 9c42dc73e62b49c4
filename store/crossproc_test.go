package store_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shale-db/shale/store"
)

// Environment of a child process of TestLocalPutIfAbsentAcrossProcesses.
const (
	envChild = "SHALE_OBJSTORE_RACE_CHILD" // the child's id, 0..procs-1
	envRoot  = "SHALE_OBJSTORE_RACE_ROOT"  // the shared store directory
	envStart = "SHALE_OBJSTORE_RACE_START" // the barrier file the parent creates
	envReady = "SHALE_OBJSTORE_RACE_READY" // the directory where children announce they are ready
	envKeys  = "SHALE_OBJSTORE_RACE_KEYS"  // number of keys
)

// Four OS processes race put-if-absent on the same 200 keys of one local store: exactly
// one winner per key across processes. Each child prints the keys it won; the parent
// checks that the union is exactly the 200 keys, each won once, and that each key holds
// its winner's bytes.
func TestLocalPutIfAbsentAcrossProcesses(t *testing.T) {
	if os.Getenv(envChild) != "" {
		t.Skip("running as a child")
	}
	const procs, keys = 4, 200
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	root := filepath.Join(dir, "store")
	start := filepath.Join(dir, "start")
	ready := filepath.Join(dir, "ready")
	if err := os.Mkdir(ready, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmds := make([]*exec.Cmd, procs)
	outs := make([]*bytes.Buffer, procs)
	for i := range procs {
		cmd := exec.CommandContext(ctx, exe, "-test.run=^TestLocalPutIfAbsentChild$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(),
			envChild+"="+strconv.Itoa(i), envRoot+"="+root, envStart+"="+start,
			envReady+"="+ready, envKeys+"="+strconv.Itoa(keys))
		outs[i] = &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = outs[i], outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	// Barrier: wait until every child has opened the store, then release them together.
	waitFor(t, ctx, "children ready", func() bool {
		ents, _ := os.ReadDir(ready)
		return len(ents) == procs
	})
	if err := os.WriteFile(start, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	won := map[string]int{}
	spans := map[string][][2]int64{} // key -> [start, end] of each child's call (unix ns)
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, outs[i])
		}
		n := 0
		sc := bufio.NewScanner(outs[i])
		for sc.Scan() {
			if key, ok := strings.CutPrefix(sc.Text(), "WON "); ok {
				if prev, dup := won[key]; dup {
					t.Errorf("key %s won by child %d and child %d", key, prev, i)
				}
				won[key] = i
				n++
			}
			var key string
			var span [2]int64
			if _, err := fmt.Sscanf(sc.Text(), "SPAN %s %d %d", &key, &span[0], &span[1]); err == nil {
				spans[key] = append(spans[key], span)
			}
		}
		t.Logf("child %d won %d keys", i, n)
	}
	if len(won) != keys {
		t.Fatalf("%d keys won in total, want %d", len(won), keys)
	}
	// The test only proves something if calls on the same key really overlapped in time.
	contended := 0
	for _, sp := range spans {
		if overlapping(sp) {
			contended++
		}
	}
	t.Logf("%d of %d keys had calls from two or more processes in flight at once", contended, keys)
	if contended < keys/10 {
		t.Fatalf("only %d of %d keys were contended: the processes did not race", contended, keys)
	}
	s, err := store.Open(ctx, "file://"+root, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for k := range keys {
		key := raceKey(k)
		i, ok := won[key]
		if !ok {
			t.Fatalf("nobody won %s", key)
		}
		got, err := s.Get(ctx, key)
		if err != nil || string(got) != racePayload(i, k) {
			t.Fatalf("%s holds %q (%v), want child %d's bytes", key, got, err, i)
		}
	}
	objs, err := s.List(ctx, "", 0)
	if err != nil || len(objs) != keys {
		t.Fatalf("store lists %d objects (%v), want exactly %d (no temp or probe files)", len(objs), err, keys)
	}
}

func raceKey(k int) string           { return fmt.Sprintf("t/_versions/%05d", k) }
func racePayload(proc, k int) string { return fmt.Sprintf("child-%d-key-%d", proc, k) }

// TestLocalPutIfAbsentChild is one racing process of TestLocalPutIfAbsentAcrossProcesses;
// it does nothing unless started by it.
func TestLocalPutIfAbsentChild(t *testing.T) {
	id := os.Getenv(envChild)
	if id == "" {
		t.Skip("only runs as a child of TestLocalPutIfAbsentAcrossProcesses")
	}
	proc, _ := strconv.Atoi(id)
	keys, _ := strconv.Atoi(os.Getenv(envKeys))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	s, err := store.Open(ctx, "file://"+os.Getenv(envRoot), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := os.WriteFile(filepath.Join(os.Getenv(envReady), id), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "start file", func() bool {
		_, err := os.Stat(os.Getenv(envStart))
		return err == nil
	})
	for k := range keys {
		begin := time.Now().UnixNano()
		err := s.PutIfAbsent(ctx, raceKey(k), []byte(racePayload(proc, k)))
		fmt.Printf("SPAN %s %d %d\n", raceKey(k), begin, time.Now().UnixNano())
		switch {
		case err == nil:
			fmt.Printf("WON %s\n", raceKey(k))
		case !errors.Is(err, store.ErrPreconditionFailed):
			t.Fatalf("put-if-absent %s: %v", raceKey(k), err)
		}
	}
}

// overlapping reports whether any two of the spans intersect.
func overlapping(spans [][2]int64) bool {
	for i := range spans {
		for j := i + 1; j < len(spans); j++ {
			if spans[i][0] < spans[j][1] && spans[j][0] < spans[i][1] {
				return true
			}
		}
	}
	return false
}

// waitFor polls cond until it holds or ctx ends (then the test fails).
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(time.Millisecond):
		}
	}
}

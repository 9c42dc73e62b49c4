package demand

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Publishers racing on one shard record. Each round, every participant waits at a barrier
// in etcd and then publishes one event to the same key, so the compare-and-puts collide.
// With k participants a publish can lose at most k−1 times (each loss is another
// participant's successful put, and each publishes once per round), so with 4 the bounded
// retry (PublishAttempts = 5) must never give up, and every update must survive: after the
// last round the record is exactly the join of every event.

// Environment of a re-executed test binary acting as a publisher process (runChild).
const (
	envChildRole   = "DEMAND_TEST_CHILD_ROLES" // comma-separated roles the child runs
	envChildEtcd   = "DEMAND_TEST_ETCD"
	envChildPrefix = "DEMAND_TEST_PREFIX"
	envChildRounds = "DEMAND_TEST_ROUNDS"
)

// raceRoles are the participants: a writer, a scan, a merge, and a stale writer of a
// higher epoch reporting lower generations.
var raceRoles = []string{"writer", "scan", "merger", "writer2"}

const raceTable, raceShard = "t", "s"

// roundEvent is what role publishes in round r (1-based).
func roundEvent(role string, r int) Event {
	g := uint64(r)
	switch role {
	case "writer":
		return ev(raceShard, 2*g, none, 1+g/10, W)
	case "scan":
		return ev(raceShard, g, int64(g/2), 1+g/10, S)
	case "merger":
		return MergedEvent(raceShard, g, 0, 7)
	case "writer2":
		return ev(raceShard, 2*g-1, none, 9, W)
	}
	panic("unknown role " + role)
}

// race runs role's rounds against prefix: barrier, publish, check that the record
// contains the event. A participant that fails aborts the others' barriers.
func race(ctx context.Context, cli *clientv3.Client, prefix, role string, rounds int, lost *atomic.Int64) (err error) {
	r := New(cli, prefix)
	defer func() { lost.Add(r.lost.Load()) }()
	defer func() {
		if err != nil {
			cli.Put(context.WithoutCancel(ctx), prefix+"/barrier/abort", role)
		}
	}()
	for round := 1; round <= rounds; round++ {
		if err := barrier(ctx, cli, prefix+"/barrier/", strconv.Itoa(round), role, len(raceRoles)); err != nil {
			return fmt.Errorf("round %d: barrier: %w", round, err)
		}
		e := roundEvent(role, round)
		if _, err := r.Publish(ctx, raceTable, e); err != nil {
			return fmt.Errorf("round %d: publish %+v: %w", round, e, err)
		}
		resp, err := cli.Get(ctx, r.Key(raceTable, raceShard))
		if err != nil || len(resp.Kvs) == 0 {
			return fmt.Errorf("round %d: read back: %v", round, err)
		}
		stored, err := DecodeEvent(resp.Kvs[0].Value)
		if err != nil {
			return fmt.Errorf("round %d: %w", round, err)
		}
		if _, changed, err := Join(&stored, e); err != nil || changed {
			return fmt.Errorf("round %d: the record %s does not contain %+v (err %v)", round, resp.Kvs[0].Value, e, err)
		}
	}
	return nil
}

// barrier registers name for round under pre (pre+round+"/"+name) and returns once n
// names are registered for the round, or fails once pre+"abort" exists (an etcd watch,
// no polling).
func barrier(ctx context.Context, cli *clientv3.Client, pre, round, name string, n int) error {
	roundPre := pre + round + "/"
	if _, err := cli.Put(ctx, roundPre+name, "1"); err != nil {
		return err
	}
	resp, err := cli.Txn(ctx).Then(
		clientv3.OpGet(roundPre, clientv3.WithPrefix(), clientv3.WithCountOnly()),
		clientv3.OpGet(pre+"abort")).Commit()
	if err != nil {
		return err
	}
	if len(resp.Responses[1].GetResponseRange().Kvs) > 0 {
		return errors.New("another participant failed")
	}
	count := int(resp.Responses[0].GetResponseRange().Count)
	if count >= n {
		return nil
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for wr := range cli.Watch(wctx, pre, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1)) {
		if err := wr.Err(); err != nil {
			return err
		}
		for _, e := range wr.Events {
			switch k := string(e.Kv.Key); {
			case k == pre+"abort":
				return errors.New("another participant failed")
			case strings.HasPrefix(k, roundPre) && e.Type == clientv3.EventTypePut && e.IsCreate():
				count++
			}
		}
		if count >= n {
			return nil
		}
	}
	return fmt.Errorf("watch %s ended: %w", pre, context.Cause(ctx))
}

// expectRace is the record the race must leave: the join of every event of every round.
func expectRace(t *testing.T, rounds int) Event {
	var events []Event
	for round := 1; round <= rounds; round++ {
		for _, role := range raceRoles {
			events = append(events, roundEvent(role, round))
		}
	}
	return storeJoin(t, events...)[raceShard]
}

func checkRace(t *testing.T, prefix string, rounds int) {
	t.Helper()
	snap, err := New(etcdCli, prefix).ReadTable(testCtx(t), raceTable)
	if err != nil {
		t.Fatal(err)
	}
	got := snap.Tables[raceTable].Shards[raceShard]
	want := rebuild(t, map[string]Event{raceShard: expectRace(t, rounds)}).Shards[raceShard]
	if !got.Equal(want) {
		t.Fatalf("after %d rounds the record is\n %+v\nwant the join of every event\n %+v", rounds, got, want)
	}
	if got.Sealed.Generation != uint64(2*rounds) || got.MergedGeneration() != uint64(rounds) {
		t.Fatalf("sealed %v merged %v, want %d and %d", got.Sealed, got.Merged, 2*rounds, rounds)
	}
}

// §7 item 16: concurrent writer and executor publishes on one shard (here with a scan and
// a second writer too), four goroutines in this process, round after round: every publish
// succeeds and both updates survive.
func TestConcurrentWriterAndExecutor(t *testing.T) {
	const rounds = 40
	prefix := testPrefix(t)
	ctx := testCtx(t)
	var wg sync.WaitGroup
	var lost atomic.Int64
	errs := make([]error, len(raceRoles))
	for i, role := range raceRoles {
		wg.Go(func() { errs[i] = race(ctx, etcdCli, prefix, role, rounds, &lost) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	checkRace(t, prefix, rounds)
	if lost.Load() == 0 {
		t.Fatalf("no compare-and-put lost in %d rounds: the publishers never raced", rounds)
	}
	t.Logf("%d compare-and-puts lost and retried", lost.Load())
}

// The same race with the publishers in two OS processes (two roles each) on the same
// embedded etcd.
func TestConcurrentPublishersTwoProcesses(t *testing.T) {
	const rounds = 30
	prefix := testPrefix(t)
	ctx := testCtx(t)
	var wg sync.WaitGroup
	out := make([]string, 2)
	errs := make([]error, 2)
	for i, roles := range []string{"writer,merger", "scan,writer2"} {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envChildRole+"="+roles, envChildEtcd+"="+strings.Join(etcdEndpoints, ","),
			envChildPrefix+"="+prefix, envChildRounds+"="+strconv.Itoa(rounds))
		wg.Go(func() {
			b, err := cmd.CombinedOutput()
			out[i], errs[i] = string(b), err
		})
	}
	wg.Wait()
	lost := 0
	for i := range errs {
		if errs[i] != nil {
			t.Fatalf("child %d: %v\n%s", i, errs[i], out[i])
		}
		var n int
		if _, err := fmt.Sscanf(out[i][strings.LastIndex(out[i], "LOST "):], "LOST %d", &n); err != nil {
			t.Fatalf("child %d output %q: %v", i, out[i], err)
		}
		lost += n
	}
	checkRace(t, prefix, rounds)
	if lost == 0 {
		t.Fatalf("no compare-and-put lost in %d rounds: the processes never raced", rounds)
	}
	t.Logf("%d compare-and-puts lost and retried", lost)
}

// runChild is a publisher process: it runs each of its roles' rounds on its own goroutine.
func runChild(roles string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	rounds, err := strconv.Atoi(os.Getenv(envChildRounds))
	if err != nil {
		return err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(os.Getenv(envChildEtcd), ","), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	var wg sync.WaitGroup
	var lost atomic.Int64
	list := strings.Split(roles, ",")
	errs := make([]error, len(list))
	for i, role := range list {
		wg.Go(func() { errs[i] = race(ctx, cli, os.Getenv(envChildPrefix), role, rounds, &lost) })
	}
	wg.Wait()
	fmt.Printf("LOST %d\n", lost.Load())
	return errors.Join(errs...)
}

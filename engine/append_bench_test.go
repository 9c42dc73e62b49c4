package engine

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/shale-db/shale/coord"
	"github.com/shale-db/shale/internal/flightstest"
	"github.com/shale-db/shale/store"
)

// BenchmarkAppendRecordSmall is the peer harness's 100-row appends (issue 13) in one
// process: a file:// store under a temporary directory, the package's embedded etcd
// reached through the network client or in-process (coord.Embedded.Client), tables of 100
// commits of the first 100 flights rows whose commits 11-100 are timed. Besides ns/op it
// reports the process's CPU time per commit (user + system, every thread: the etcd
// server's too), as the harness does.
func BenchmarkAppendRecordSmall(b *testing.B) {
	schema, recs := flightstest.Batches(b, 100, 100)
	rec := recs[0]
	for _, via := range []string{"network", "in-process"} {
		b.Run("etcd="+via, func(b *testing.B) {
			ctx := context.Background()
			st, err := store.Open(ctx, "file://"+b.TempDir(), store.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			var c *coord.Client
			if via == "network" {
				c, err = coord.Connect(ctx, coord.Config{Endpoints: testEtcd.Endpoints()})
			} else {
				c, err = testEtcd.Client()
			}
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			db, err := Open(ctx, st, Options{Etcd: c.Etcd()})
			if err != nil {
				b.Fatal(err)
			}
			var tbl *Table
			tables, commits := 0, 0
			var cpu time.Duration
			newTable := func() {
				tables++
				if tbl, err = db.CreateTable(ctx, fmt.Sprintf("appends%d", tables), schema); err != nil {
					b.Fatal(err)
				}
				for range 10 {
					if _, err := tbl.AppendRecord(ctx, rec); err != nil {
						b.Fatal(err)
					}
				}
				commits = 10
			}
			newTable()
			b.ResetTimer()
			c0 := processCPU()
			for b.Loop() {
				if commits == 100 {
					b.StopTimer()
					cpu += processCPU() - c0
					newTable()
					c0 = processCPU()
					b.StartTimer()
				}
				if _, err := tbl.AppendRecord(ctx, rec); err != nil {
					b.Fatal(err)
				}
				commits++
			}
			cpu += processCPU() - c0
			b.ReportMetric(float64(cpu.Microseconds())/1e3/float64(b.N), "cpu-ms/op")
		})
	}
}

// processCPU is this process's user + system time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Package waltest is issue 11's acceptance test of the write-ahead log with OS processes
// and a real embedded etcd:
//
//   - crashes: a writer child SIGKILLed at each WAL seam (an entry durable before its
//     memtable insert, a flush's files written, a flush's shard manifest landed, a claim
//     before its fences, the fences before replay), a replaying child killed before every
//     replay step, and a merger child killed at every merge seam (its sidecar, the commit's
//     transaction and version puts, the publish, the sidecar's removal). After each kill
//     the parent recovers (recovery.Recover for merge sidecars, the shard opened again to
//     replay, a flush, a merge) and checks every acknowledged row is present exactly once,
//     no other row more than once and no row nobody appended, verify finds no fault, and a
//     second recovery and merge change nothing;
//   - fencing: a writer paused with SIGSTOP while another process claims the shard and
//     flushes, and the entries are collected as gc does, then SIGCONT: its next append
//     fails with wal.ErrFenced and nothing it wrote afterwards is visible; two writer
//     processes taking one shard from each other while appending lose no acknowledged row;
//   - a bounded multi-process run: two writer processes on two shards, a merger process
//     killed at random merge seams and restarted, readers querying throughout (a query
//     never returns a row twice nor misses one acknowledged before it began), then every
//     acknowledged row exactly once after the last merge, and a repeated merge a no-op.
//
// Children are the test binary re-executed with SHALE_WALTEST_CHILD set to their
// configuration (JSON). Writers journal each append before it ("T") and each
// acknowledgement after it ("A", fsynced), so the parent knows which rows were
// acknowledged and which might exist. The CI size runs in the default `go test ./...`;
// SHALE_SLOW=1 runs a longer multi-process run; SHALE_SEED replays its choices.
// It holds only tests.
package waltest

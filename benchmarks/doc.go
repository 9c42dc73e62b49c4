// Package benchmarks measures Shale against plain baselines in one process, so the ratios
// compare like with like, and renders the results as Markdown (benchmarks/RESULTS.md).
//
// Suites (Config.Suites):
//
//	import  Table.Append of an in-memory dataset vs (a) Arrow IPC encode (ZSTD, same batch
//	        and file sizes) + Put of the same records, (b) encode only, (c) Put of the
//	        pre-encoded files. Target: engine ≥ 0.8× baseline (a).
//	scan    Table.Scan of every column vs one GET per data file + arrow-go ipc.FileReader
//	        decode of every batch, over the table's own data files, at the engine's
//	        ScanParallelism (4) and with one worker each; plus a projected and filtered scans
//	        for information. Target: engine ≥ 0.8× the parallel baseline.
//	open    DB.OpenTable through the etcd catalog on tables with N versions (default 10 and
//	        1,000): latency and store/etcd requests. Target: 1 GET at every N.
//	commit  one small AppendRecord on those tables: latency and requests by kind. Target:
//	        the same requests at every N.
//	txn     (on request; not in DefaultSuites) commit throughput of 1, 2 and 4 writer
//	        processes appending to one table (commits/s, put-if-absent attempts and rebased
//	        versions per commit, latency percentiles, requests per commit), and OpenTable and
//	        one small append on histories of 10, 1,000 and 10,000 versions built by
//	        UpdateConfig (the manifest does not grow), plus append-built histories of 10 and
//	        1,000 versions for information. Target: 10,000 versions within 1.1× of 10.
//	compact (on request) compaction (recovery sidecars, Parallelism 2 and 1) of one table
//	        version of small fragments (default 10,000 rows each: 300 for the flights
//	        data) into files of 1,048,576 rows vs Table.Scan of the same version written
//	        back by fragment.Writer (2 and 1 writers), MB/s and rows/s. Each compaction
//	        gets a fresh copy of the table, built untimed. Target: ≥ 0.8× the 2-writer
//	        baseline.
//	recover (on request) recovery.Recover over 0, 10 and 100 pending sidecars left by
//	        interrupted compactions (every 10th committed before its publish and rolls
//	        forward, the others roll back), made fresh (untimed) before each repetition;
//	        0 sidecars is the cost of the LIST. Target: no sidecar = one LIST.
//
// Writer processes are the running binary re-executed with SHALE_BENCH_WRITER set: this
// package's init turns such a process into a writer before main (or TestMain) runs, so any
// binary that links the package (the test binary, shale) can host them.
//
// Every engine variant runs alternately with its baselines, repetition by repetition, and
// figures are medians. Targets are reported (Report.Checks), never asserted.
//
// Run is the entry point for `shale bench`; the Go benchmarks in this package
// (go test -bench . -run '^$' ./benchmarks/) time the same variants one by one.
package benchmarks

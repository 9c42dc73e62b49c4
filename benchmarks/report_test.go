package benchmarks

import (
	"context"
	"flag"
	"os"
	"strconv"
	"strings"
	"testing"
)

// The full report is a test that runs only when asked for, because it takes minutes:
//
//	go test ./benchmarks/ -run '^TestReport$' -v -timeout 60m -shale.report=report.md
//
// (shale bench will run the same Run.) Without -shale.data it uses the flights data when
// found (flightsPath), else synthetic rows.
var (
	reportOut      = flag.String("shale.report", "", "run the full benchmark report and write its Markdown to this file (\"-\" = stdout only)")
	reportStore    = flag.String("shale.store", "", "store URL for the report (default: a temporary directory, file://)")
	reportData     = flag.String("shale.data", "", "Parquet data for the report (default: the flights data if found)")
	reportRows     = flag.Int("shale.rows", 0, "rows of data (0 = all)")
	reportReps     = flag.Int("shale.reps", DefaultReps, "repetitions per variant")
	reportVersions = flag.String("shale.versions", "10,1000", "history sizes, comma-separated")
	reportSuites   = flag.String("shale.suites", "", "suites, comma-separated (default import,scan,open,commit; txn on request)")
	reportWriters  = flag.String("shale.txn.writers", "1,2,4", "txn suite: writer process counts, comma-separated")
	reportTxnVers  = flag.String("shale.txn.versions", "10,1000,10000", "txn suite: configuration-built history sizes")
	reportTxnApp   = flag.String("shale.txn.append-versions", "10,1000", "txn suite: append-built history sizes (information)")
	reportWindow   = flag.Duration("shale.txn.window", DefaultTxnWindow, "txn suite: how long each writer appends per window")
	reportTxnReps  = flag.Int("shale.txn.reps", DefaultTxnReps, "txn suite: windows per writer count")
)

func intList(t *testing.T, flagName, s string) []int {
	t.Helper()
	out := []int{} // "" = none
	if strings.TrimSpace(s) == "" {
		return out
	}
	for _, v := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			t.Fatalf("-%s: %v", flagName, err)
		}
		out = append(out, n)
	}
	return out
}

func TestReport(t *testing.T) {
	if *reportOut == "" {
		t.Skip("pass -shale.report=<file> to run the full benchmark report")
	}
	cfg := Config{
		StoreURL:      *reportStore,
		EtcdEndpoints: testEtcd.Endpoints(),
		Data:          *reportData,
		Rows:          *reportRows,
		Reps:          *reportReps,
	}
	if cfg.Data == "" {
		cfg.Data = flightsPath()
	}
	cfg.Versions = intList(t, "shale.versions", *reportVersions)
	cfg.TxnWriters = intList(t, "shale.txn.writers", *reportWriters)
	cfg.TxnVersions = intList(t, "shale.txn.versions", *reportTxnVers)
	cfg.TxnAppendVersions = intList(t, "shale.txn.append-versions", *reportTxnApp)
	cfg.TxnWindow, cfg.TxnReps = *reportWindow, *reportTxnReps
	if *reportSuites != "" {
		cfg.Suites = strings.Split(*reportSuites, ",")
	}
	rep, err := Run(context.Background(), cfg, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	md := rep.Markdown()
	os.Stdout.WriteString(md)
	if *reportOut != "-" {
		if err := os.WriteFile(*reportOut, []byte(md), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

package benchmarks

import (
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/shale-db/shale/store"
)

// Report is the outcome of Run. Markdown renders it; the fields are there for callers that
// want the numbers (durations are per repetition, figures are medians).
type Report struct {
	Machine  Machine
	Started  time.Time
	Elapsed  time.Duration
	StoreURL string // the run's store (a fresh sub-location of Config.StoreURL)
	Data     DataInfo
	Reps     int
	Suites   []string
	Import   *SuiteResult    // nil when the suite did not run
	Scan     *SuiteResult    // nil when the suite did not run
	History  []HistoryResult // one per history size (open and commit suites)
	Txn      *TxnResult      // nil when the suite did not run
	Compact  *SuiteResult    // nil when the suite did not run
	Recover  *RecoverResult  // nil when the suite did not run
	WAL      *WALResult      // nil when the suite did not run
	Checks   []Check         // the acceptance targets, measured
	// LoadStart and LoadEnd are /proc/loadavg at the start and end of the run ("" =
	// unknown): other work on the machine shows up here and in the spread of times.
	LoadStart, LoadEnd string
}

// loadAvg returns the 1-, 5- and 15-minute load averages ("" = unknown).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// DataInfo describes the dataset the import and scan suites used.
type DataInfo struct {
	Source              string
	Rows                int64
	Bytes               int64 // in-memory Arrow bytes
	BatchRows, FileRows int
}

// Machine describes where the report was measured.
type Machine struct {
	GoVersion, GOOS, GOARCH string
	NumCPU, GOMAXPROCS      int
	MemTotal                int64  // bytes (0 = unknown)
	Kernel                  string // /proc/version ("" = unknown)
}

// CurrentMachine describes this machine.
func CurrentMachine() Machine {
	m := Machine{GoVersion: runtime.Version(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH,
		NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0)}
	if b, err := os.ReadFile("/proc/version"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					m.MemTotal = kb << 10
				}
			}
		}
	}
	return m
}

// Check is one acceptance target with what was measured.
type Check struct {
	Name     string
	Target   string
	Measured string
	Met      bool
}

// checks measures the report against the acceptance targets.
func checks(r Report) []Check {
	var out []Check
	for _, res := range []*SuiteResult{r.Import, r.Scan, r.Compact} {
		if res == nil {
			continue
		}
		for _, q := range res.Ratios {
			if q.Target == 0 {
				continue
			}
			out = append(out, Check{Name: q.Name, Target: fmt.Sprintf("≥ %.2f× baseline throughput (wall time)", q.Target),
				Measured: fmt.Sprintf("%.2f× wall, %.2f× CPU (medians of %d paired runs)", q.Median(), q.MedianCPU(), len(q.Paired)), Met: q.Met()})
		}
	}
	var opens, commits []string
	openOK, commitOK := true, true
	var firstOpen, firstCommit map[store.Op]int64
	for i, h := range r.History {
		if h.Open != nil {
			opens = append(opens, fmt.Sprintf("%d versions: %s", h.Versions, reqString(h.Open.Requests)))
			if !maps.Equal(h.Open.Requests.ByOp, map[store.Op]int64{store.OpGet: 1}) {
				openOK = false
			}
			if i == 0 {
				firstOpen = h.Open.Requests.ByOp
			} else if !maps.Equal(firstOpen, h.Open.Requests.ByOp) {
				openOK = false
			}
		}
		if h.Commit != nil {
			commits = append(commits, fmt.Sprintf("%d versions: %s", h.Versions, reqString(h.Commit.Requests)))
			if h.CommitRequestsVary {
				commitOK = false
			}
			if i == 0 {
				firstCommit = h.Commit.Requests.ByOp
			} else if !maps.Equal(firstCommit, h.Commit.Requests.ByOp) {
				commitOK = false
			}
		}
	}
	if len(opens) > 0 {
		out = append(out, Check{Name: "store requests per OpenTable (etcd catalog)", Target: "exactly 1 GET at every history size",
			Measured: strings.Join(opens, "; "), Met: openOK})
	}
	if len(commits) > 0 {
		out = append(out, Check{Name: "store requests per commit (one small append)", Target: "the same at every history size",
			Measured: strings.Join(commits, "; "), Met: commitOK})
	}
	if r.Txn != nil {
		out = append(out, txnChecks(r.Txn)...)
	}
	if r.WAL != nil {
		out = append(out, walChecks(r.WAL)...)
	}
	if r.Recover != nil {
		out = append(out, recoverChecks(r.Recover)...)
	}
	return out
}

// Markdown renders the report as Markdown tables.
func (r Report) Markdown() string {
	var b strings.Builder
	r.WriteMarkdown(&b)
	return b.String()
}

// String is Markdown.
func (r Report) String() string { return r.Markdown() }

// WriteMarkdown writes the Markdown rendering to w.
func (r Report) WriteMarkdown(w io.Writer) error {
	p := &mdWriter{w: w}
	m := r.Machine
	p.f("Measured %s (took %v) with %s %s/%s, %d CPUs (GOMAXPROCS %d), %.1f GiB memory.\n",
		r.Started.UTC().Format(time.RFC3339), r.Elapsed.Round(time.Second), m.GoVersion, m.GOOS, m.GOARCH, m.NumCPU, m.GOMAXPROCS, float64(m.MemTotal)/(1<<30))
	if m.Kernel != "" {
		p.f("Kernel: `%s`.\n", m.Kernel)
	}
	if r.LoadStart != "" {
		p.f("Load average (1, 5, 15 min): %s at the start, %s at the end.\n", r.LoadStart, r.LoadEnd)
	}
	p.f("Store: `%s`. Catalog: etcd. Repetitions: %d per variant, run alternately (the order rotates each repetition); "+
		"times are medians, ratios are medians of per-repetition pairs (baseline time / engine time, so > 1 means the engine was faster). "+
		"Wall is elapsed time; CPU is the process's CPU time (user + system, all threads, embedded etcd included) during the timed part, which other load on the machine disturbs less.\n\n", r.StoreURL, r.Reps)
	if r.Data.Rows > 0 {
		p.f("Data: %s, %s rows, %.1f MB of Arrow buffers in memory (loaded before timing).\n\n", r.Data.Source, group(r.Data.Rows), float64(r.Data.Bytes)/1e6)
	}
	if len(r.Checks) > 0 {
		p.f("### Targets\n\n| check | target | measured | met |\n| --- | --- | --- | --- |\n")
		for _, c := range r.Checks {
			p.f("| %s | %s | %s | %s |\n", c.Name, c.Target, c.Measured, yesNo(c.Met))
		}
		p.f("\n")
	}
	if r.Import != nil {
		p.f("### Import\n\n")
		p.suite(r.Import, false)
	}
	if r.Scan != nil {
		p.f("### Scan\n\n")
		p.suite(r.Scan, true)
	}
	if len(r.History) > 0 && r.History[0].Open != nil {
		p.f("### Open\n\n| table | manifest bytes | wall median | min | max | CPU median | store requests | store bytes read | etcd requests |\n| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- |\n")
		for _, h := range r.History {
			for _, s := range []*Sample{h.Open, h.OpenNoCatalog} {
				p.f("| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", s.Name, group(h.ManifestBytes), ms(s.Median()), ms(s.Min()), ms(s.Max()), ms(s.MedianCPU()),
					reqString(s.Requests), group(s.Requests.BytesRead), countString(s.Etcd))
			}
		}
		p.f("\n")
	}
	if len(r.History) > 0 && r.History[0].Commit != nil {
		p.f("### Commit\n\nOne AppendRecord of %d rows on a handle at HEAD (data file, transaction record, manifest, catalog publish); "+
			"the first measured commit makes version N+1.\n\n", HistoryRows)
		p.f("| commit | manifest bytes at N | wall median | min | max | CPU median | store requests | store bytes written | etcd requests | history built in |\n| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- | ---: |\n")
		for _, h := range r.History {
			s := h.Commit
			reqs := reqString(s.Requests)
			if h.CommitRequestsVary {
				reqs += " (varied between commits)"
			}
			p.f("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", s.Name, group(h.ManifestBytes), ms(s.Median()), ms(s.Min()), ms(s.Max()), ms(s.MedianCPU()),
				reqs, group(s.Requests.BytesWritten), countString(s.Etcd), h.BuildTime.Round(time.Millisecond))
		}
		p.f("\n")
	}
	if r.Txn != nil {
		p.f("### Transactions\n\n")
		p.txn(r.Txn)
	}
	if r.Compact != nil {
		p.f("### Compaction\n\n")
		p.suite(r.Compact, false)
	}
	if r.Recover != nil {
		p.f("### Recover\n\n")
		p.recover(r.Recover)
	}
	if r.WAL != nil {
		p.f("### WAL\n\n")
		p.wal(r.WAL)
	}
	return p.err
}

func (p *mdWriter) suite(res *SuiteResult, scan bool) {
	for _, n := range res.Notes {
		p.f("%s\n\n", n)
	}
	if scan {
		p.f("| variant | rows out | wall median | min | max | CPU median | rows/s | MB/s | store requests | store MB read |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |\n")
		for _, s := range res.Samples {
			p.f("| %s | %s | %s | %s | %s | %s | %s | %.1f | %s | %.1f |\n", s.Name, group(s.Rows), ms(s.Median()), ms(s.Min()), ms(s.Max()), ms(s.MedianCPU()),
				si(s.RowsPerSec()), s.MBPerSec(), reqString(s.Requests), float64(s.Requests.BytesRead)/1e6)
		}
	} else {
		p.f("| variant | wall median | min | max | CPU median | rows/s | MB/s | store requests | store MB written | etcd requests |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- |\n")
		for _, s := range res.Samples {
			p.f("| %s | %s | %s | %s | %s | %s | %.1f | %s | %.1f | %s |\n", s.Name, ms(s.Median()), ms(s.Min()), ms(s.Max()), ms(s.MedianCPU()),
				si(s.RowsPerSec()), s.MBPerSec(), reqString(s.Requests), float64(s.Requests.BytesWritten)/1e6, countString(s.Etcd))
		}
	}
	p.f("\n| comparison | wall ratio (median) | paired wall ratios | CPU ratio (median) | target |\n| --- | ---: | --- | ---: | --- |\n")
	for _, q := range res.Ratios {
		target := "information"
		if q.Target > 0 {
			target = fmt.Sprintf("≥ %.2f: %s", q.Target, yesNo(q.Met()))
		}
		ps := make([]string, len(q.Paired))
		for i, x := range q.Paired {
			ps[i] = fmt.Sprintf("%.2f", x)
		}
		p.f("| %s | %.2f× | %s | %.2f× | %s |\n", q.Name, q.Median(), strings.Join(ps, " "), q.MedianCPU(), target)
	}
	p.f("\n")
}

type mdWriter struct {
	w   io.Writer
	err error
}

func (p *mdWriter) f(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

func ms(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.3f ms", float64(d)/1e6)
	}
}

// si formats x with a k/M/G suffix.
func si(x float64) string {
	switch {
	case x >= 1e9:
		return fmt.Sprintf("%.2f G", x/1e9)
	case x >= 1e6:
		return fmt.Sprintf("%.2f M", x/1e6)
	case x >= 1e3:
		return fmt.Sprintf("%.1f k", x/1e3)
	}
	return fmt.Sprintf("%.1f", x)
}

// group formats n with thousands separators.
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var parts []string
	for len(s) > 3 {
		parts = append([]string{s[len(s)-3:]}, parts...)
		s = s[:len(s)-3]
	}
	parts = append([]string{s}, parts...)
	out := strings.Join(parts, ",")
	if neg {
		out = "-" + out
	}
	return out
}

// reqString renders request counts as "get=1 put=2" in a stable order ("none" for none).
func reqString(r store.Requests) string {
	if r.Total() == 0 {
		return "none"
	}
	return r.String()
}

func countString(c map[string]int64) string {
	if len(c) == 0 {
		return "none"
	}
	keys := slices.Collect(maps.Keys(c))
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, c[k])
	}
	return strings.Join(parts, " ")
}

package verify

import (
	"errors"
	"fmt"
	"strings"
)

// ErrFaults is wrapped by Report.Err when verification found at least one fault.
var ErrFaults = errors.New("verification found faults")

// Options tune a verification run.
type Options struct {
	// AllVersions reads every data file and deletion vector of every version still in the
	// store, not only the published one (each object is read once however many versions
	// share it).
	AllVersions bool
	// AllowGaps reports versions missing from the chain 1..HEAD as notes rather than
	// faults (for stores where expired versions have been removed).
	AllowGaps bool
}

// Fault is one broken object or invariant.
type Fault struct {
	Table   string `json:"table"`             // the table whose check found it
	Version uint64 `json:"version,omitempty"` // the version whose check found it; 0 = not about one version
	Key     string `json:"key,omitempty"`     // the object at fault (store key, or the etcd key of a pointer)
	Problem string `json:"problem"`           // what is wrong, in words
	// Size is the object's size in the store in bytes, when verify learned it (a data
	// file or deletion vector that was found but failed its checks); nil when unknown
	// (the object is missing, or the fault is not about one stored object's content).
	Size *int64 `json:"size,omitempty"`
	Err  error  `json:"-"` // the underlying error when there is one (errors.Is/As work on it)
}

// String renders the fault on one line: "<table> v<version> <key> (<size> bytes): <problem>: <error>",
// leaving out the parts that are unset.
func (f Fault) String() string {
	var b strings.Builder
	b.WriteString(f.Table)
	if f.Version > 0 {
		fmt.Fprintf(&b, " v%d", f.Version)
	}
	if f.Key != "" {
		fmt.Fprintf(&b, " %s", f.Key)
	}
	if f.Size != nil {
		fmt.Fprintf(&b, " (%d bytes)", *f.Size)
	}
	b.WriteString(": ")
	b.WriteString(f.Problem)
	if f.Err != nil {
		fmt.Fprintf(&b, ": %v", f.Err)
	}
	return b.String()
}

// Note is a legal state worth reporting (not a fault).
type Note struct {
	Table   string `json:"table"`             // the table checked
	Version uint64 `json:"version,omitempty"` // the version it is about; 0 = none in particular
	Key     string `json:"key,omitempty"`     // the object it is about, if any
	Message string `json:"message"`           // what was seen, in words
}

// String renders the note on one line: "<table> v<version> <key>: <message>".
func (n Note) String() string {
	var b strings.Builder
	b.WriteString(n.Table)
	if n.Version > 0 {
		fmt.Fprintf(&b, " v%d", n.Version)
	}
	if n.Key != "" {
		fmt.Fprintf(&b, " %s", n.Key)
	}
	b.WriteString(": ")
	b.WriteString(n.Message)
	return b.String()
}

// TableSummary says what was checked for one table.
type TableSummary struct {
	Table     string `json:"table"`     // the table checked
	Head      uint64 `json:"head"`      // its highest version in the store
	Published uint64 `json:"published"` // 0 when there is no pointer (or no catalog)
	Versions  int    `json:"versions"`  // manifests of this incarnation present in the store
	// IncarnationSince is the first version of HEAD's incarnation (the Create after a
	// drop; 0 for tables of older builds). Versions below it are not checked.
	IncarnationSince uint64   `json:"incarnation_since,omitempty"`
	Deep             []uint64 `json:"deep_checked"`     // versions whose data files and deletion vectors were read
	DataFiles        int      `json:"data_files"`       // distinct data files read
	Deletions        int      `json:"deletion_vectors"` // distinct deletion vectors read
	IndexSegments    int      `json:"index_segments"`   // distinct index segments read (each once)
	IndexObjects     int      `json:"index_objects"`    // their objects read whole: BTree lookups and pages files, zone maps
	// Bytes is the size in the store of the data files and deletion vectors read,
	// including those that failed their checks (a missing object counts 0).
	Bytes int64 `json:"bytes"`
	// WALShards counts the WAL shards found under <table>/_wal/; WALGenerations the
	// unmerged generations whose data files were read (they count in DataFiles and Bytes
	// too); WALEntries the entries above the replay positions decoded, WALEntryRows their
	// rows.
	WALShards      int   `json:"wal_shards"`
	WALGenerations int   `json:"wal_generations"` // unmerged generations read
	WALEntries     int   `json:"wal_entries"`     // entries above the replay positions decoded
	WALEntryRows   int64 `json:"wal_entry_rows"`  // rows in them
}

// Report is the outcome of a verification run.
type Report struct {
	Tables []TableSummary `json:"tables"` // one per table checked, in name order
	Faults []Fault        `json:"faults"` // everything broken; empty means OK
	Notes  []Note         `json:"notes"`  // legal states worth knowing (drift, expired versions, aborted groups, …)
}

// OK reports whether no fault was found.
func (r *Report) OK() bool { return len(r.Faults) == 0 }

// Err is nil when the report has no faults, else an error wrapping ErrFaults that counts them.
func (r *Report) Err() error {
	if len(r.Faults) == 0 {
		return nil
	}
	keys := map[string]bool{}
	for _, f := range r.Faults {
		if f.Key != "" {
			keys[f.Key] = true
		}
	}
	return fmt.Errorf("%w: %s in %s", ErrFaults, countOf(len(r.Faults), "fault"), countOf(len(keys), "object"))
}

// countOf is "1 fault", "2 faults".
func countOf(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func (r *Report) fault(table string, v uint64, key, problem string, err error) {
	r.Faults = append(r.Faults, Fault{Table: table, Version: v, Key: key, Problem: problem, Err: err})
}

// sized records size as the stored size of the faults about key added since the first
// n faults.
func (r *Report) sized(n int, key string, size int64) {
	for i := n; i < len(r.Faults); i++ {
		if r.Faults[i].Key == key {
			s := size
			r.Faults[i].Size = &s
		}
	}
}

func (r *Report) note(table string, v uint64, key, format string, args ...any) {
	r.Notes = append(r.Notes, Note{Table: table, Version: v, Key: key, Message: fmt.Sprintf(format, args...)})
}

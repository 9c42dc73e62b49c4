package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/shale-db/shale/coord"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/recovery"
	"github.com/shale-db/shale/store"
)

// app holds the global flags and the connections one command uses.
type app struct {
	stdout, stderr io.Writer
	readOnly       bool // the command only reads: skip the store's write probe
	mustExist      bool // the command only changes existing tables: never create the store

	// Global flags.
	homeFlag  string
	storeFlag string
	etcdFlag  string
	jsonOut   bool

	// started is set once cobra has parsed the command line and validated the arguments,
	// so errors before it are usage errors.
	started bool

	// wrapStore, when set, wraps the store before the DB opens it (query --explain counts
	// the reads of each kind of object through it).
	wrapStore func(store.Store) store.Store

	home   string // resolved state directory
	coord  *coord.Client
	store  store.Store
	db     *engine.DB
	closer []func()
}

func newApp(stdout, stderr io.Writer) *app { return &app{stdout: stdout, stderr: stderr} }

const rootLong = `shale manages versioned columnar tables in an object store.

Tables live in a store (--store): file:///dir, mem://name, s3://bucket/prefix or
gs://bucket/prefix. Each table's published version is kept in etcd. Without --etcd,
shale starts (or joins) a background embedded etcd under the state directory, shared by
every shale process using the same directory, which stops by itself 30 s after the
last one exits.

State directory (--home): $SHALE_HOME, else $XDG_STATE_HOME/shale, else
~/.local/state/shale. The default store is file://<home>/store.

With --json a command prints one JSON object on stdout (lists under named keys, []
when empty, no nulls; query's rows are JSON Lines), and a failure prints one line on
stderr: {"error":{"message":…,"kind":…,"exit":N}}. See docs/json.md.

Exit status: 0 success, 1 the command failed, 2 usage error.`

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "shale",
		Short:         "Versioned columnar tables on object storage",
		Long:          rootLong,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return usagef("no command given")
		},
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			// Cobra checks required flags only after this hook; check them here so that
			// a missing one is a usage error.
			if err := cmd.ValidateRequiredFlags(); err != nil {
				return &usageError{err}
			}
			if err := cmd.ValidateFlagGroups(); err != nil {
				return &usageError{err}
			}
			a.started = true
			// An empty global flag is a mistake (an unset shell variable, say), not a
			// request for the default: --store "" would otherwise use file://<home>/store.
			for _, f := range []struct{ name, want string }{
				{"store", "a store URL (file:///dir, s3://bucket/prefix, gs://bucket/prefix, mem://name); leave --store out for file://<home>/store"},
				{"home", "a state directory; leave --home out for $SHALE_HOME or the default"},
				{"etcd", "etcd endpoints host:port,...; leave --etcd out for the embedded etcd"},
			} {
				if fl := cmd.Flags().Lookup(f.name); fl != nil && fl.Changed && strings.TrimSpace(fl.Value.String()) == "" {
					return usagef("--%s is empty: it needs %s", f.name, f.want)
				}
			}
			if a.jsonOut && cmd.Name() == "demo" {
				return usagef("demo is a guided tour for people and has no --json output; run the commands it runs (import, query --count, delete, versions) with --json")
			}
			// Commands that only read open the store without the put-if-absent probe, so a
			// read-only store (or read-only credentials) can still be queried.
			// Classified by the full command path (subcommands share names: "index drop",
			// "wal status").
			switch strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ") {
			case "query", "versions", "inspect", "status", "verify", "export", "index list", "wal status", "serve status", "why":
				a.readOnly = true
			case "delete", "update", "drop", "compact", "recover", "repair", "gc", "config",
				"index create", "index update", "index drop", "wal append", "wal merge", "wal scan", "serve":
				// They change only tables already in the store: a mistyped --store is
				// reported, not created (and then found to hold "no tables"). (config
				// without KEY=VALUE only reads: it sets readOnly itself.)
				a.mustExist = true
			}
			// A malformed --store is a usage error, found before anything starts.
			if a.storeFlag != "" {
				if _, err := store.ParseURL(a.storeFlag); err != nil {
					return a.storeOpenError(err)
				}
			}
			return a.resolveHome()
		},
	}
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return &usageError{flagValueError(err)} })
	root.CompletionOptions.DisableDefaultCmd = true
	pf := root.PersistentFlags()
	pf.StringVar(&a.storeFlag, "store", "", "store URL (default file://<home>/store)")
	pf.StringVar(&a.etcdFlag, "etcd", "", "etcd endpoints host:port,... of an existing cluster (default: the embedded etcd under <home>)")
	pf.StringVar(&a.homeFlag, "home", "", "state directory (default $SHALE_HOME, else $XDG_STATE_HOME/shale, else ~/.local/state/shale)")
	pf.BoolVar(&a.jsonOut, "json", false, "machine-readable output: one JSON object on stdout, errors as a JSON object on stderr (docs/json.md)")

	root.AddCommand(
		a.createCommand(),
		a.importCommand(),
		a.queryCommand(),
		a.exportCommand(),
		a.deleteCommand(),
		a.updateCommand(),
		a.versionsCommand(),
		a.inspectCommand(),
		a.configCommand(),
		a.statusCommand(),
		a.demoCommand(),
		a.benchCommand(),
		a.dropCommand(),
		a.verifyCommand(),
		a.compactCommand(),
		a.recoverCommand(),
		a.repairCommand(),
		a.gcCommand(),
		a.doctorCommand(),
		a.indexCommand(),
		a.walCommand(),
		a.serveCommand(),
		a.whyCommand(),
	)
	// Usage errors from cobra's own checks (arguments, required flags) get exit status 2.
	for _, c := range root.Commands() {
		if c.Args != nil {
			inner := c.Args
			c.Args = func(cmd *cobra.Command, args []string) error {
				if err := inner(cmd, args); err != nil {
					var ue *usageError
					if errors.As(err, &ue) {
						return err
					}
					return &usageError{err}
				}
				return nil
			}
		}
	}
	return root
}

// resolveHome finds the state directory (no I/O).
func (a *app) resolveHome() error {
	h := a.homeFlag
	if h == "" {
		h = os.Getenv("SHALE_HOME")
	}
	if h == "" {
		if x := os.Getenv("XDG_STATE_HOME"); x != "" {
			h = filepath.Join(x, "shale")
		}
	}
	if h == "" {
		u, err := os.UserHomeDir()
		if err != nil {
			return fmt.Errorf("cannot find a state directory: set SHALE_HOME or --home (%v)", err)
		}
		h = filepath.Join(u, ".local", "state", "shale")
	}
	abs, err := filepath.Abs(h)
	if err != nil {
		return fmt.Errorf("state directory %q: %v", h, err)
	}
	a.home = abs
	return nil
}

// storeURL is the --store flag or the default local store under the state directory.
func (a *app) storeURL() string {
	if a.storeFlag != "" {
		return a.storeFlag
	}
	return (&url.URL{Scheme: "file", Path: filepath.Join(a.home, "store")}).String()
}

// etcdEndpoints parses --etcd.
func (a *app) etcdEndpoints() []string {
	var eps []string
	for _, e := range strings.Split(a.etcdFlag, ",") {
		if e = strings.TrimSpace(e); e != "" {
			eps = append(eps, e)
		}
	}
	return eps
}

// coordConfig is how commands connect to etcd: --etcd, or the embedded default of the
// state directory; what the connection waits for is said on stderr, and so is an etcd
// request that goes on for SHALE_STORE_SLOW (default 10 s) without an answer.
func (a *app) coordConfig() coord.Config {
	return coord.Config{Endpoints: a.etcdEndpoints(), StateDir: a.home, SlowAfter: slowAfter(), Notify: func(msg string) {
		fmt.Fprintf(a.stderr, "shale: %s\n", msg)
	}}
}

// open opens the store, connects to etcd and opens the DB (once per command). A command
// that only reads creates nothing: not a missing store directory, not the store's id.
func (a *app) open(ctx context.Context) (*engine.DB, error) {
	if a.db != nil {
		return a.db, nil
	}
	s, err := store.Open(ctx, a.storeURL(), a.storeOptions(store.Options{ReadOnly: a.readOnly, MustExist: a.mustExist}))
	if err != nil {
		return nil, a.storeOpenError(err)
	}
	a.closer = append(a.closer, func() { s.Close() })
	if a.wrapStore != nil {
		s = a.wrapStore(s)
	}
	a.store = s
	c, err := coord.Connect(ctx, a.coordConfig())
	if err != nil {
		return nil, err
	}
	a.coord = c
	a.closer = append(a.closer, func() { c.Close() })
	etcd := c.Etcd()
	if a.readOnly {
		// engine.Open would create the store's id. A store without one has no table
		// published in any catalog: read it without one.
		if _, err := s.Head(ctx, engine.StoreIDKey); errors.Is(err, store.ErrNotFound) {
			etcd = nil
		} else if err != nil {
			return nil, err // it names the store
		}
	}
	// Every write first rolls forward maintenance a crashed process committed but did not
	// publish (roll forward only: `shale recover` also rolls back).
	db, err := engine.Open(ctx, s, engine.Options{Etcd: etcd, BeforeFirstWrite: recovery.Hook(recovery.Options{}), IndexSidecars: recovery.IndexSidecars{Store: s},
		MergeSidecars: recovery.MergeSidecars{Store: s}})
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", s.URL(), err)
	}
	a.db = db
	return db, nil
}

// envStoreSlow sets how long a store or etcd request may go on before a command says it
// waits for it (a Go duration; default 10s).
const envStoreSlow = "SHALE_STORE_SLOW"

// slowAfter is $SHALE_STORE_SLOW, or 0 (the default) when unset or not a positive duration.
func slowAfter() time.Duration {
	if d, err := time.ParseDuration(os.Getenv(envStoreSlow)); err == nil && d > 0 {
		return d
	}
	return 0
}

// storeOptions adds to o what every command's store does: a request of an S3 or GCS store
// that goes on without an answer is said on stderr (a server that accepts connections
// and never answers would otherwise hang the command without a word; Ctrl-C ends it).
func (a *app) storeOptions(o store.Options) store.Options {
	if d := slowAfter(); d > 0 {
		o.SlowAfter = d
	}
	o.Slow = func(r store.SlowRequest) {
		fmt.Fprintf(a.stderr, "shale: store: waiting for %s %q: no answer after %s (%s; Ctrl-C stops)\n",
			strings.ReplaceAll(string(r.Op), "_", "-"), r.Key, r.Waited.Round(time.Second/10), r.Store)
	}
	return o
}

// storeOpenError words a failure of store.Open for the command line: a bad URL is a
// usage error, a store a read-only command cannot find says that nothing was created.
// The store's URL appears only redacted.
func (a *app) storeOpenError(err error) error {
	redacted := store.Redact(a.storeURL())
	var se *store.Error
	opening := errors.As(err, &se) && se.Op == store.OpOpen
	switch {
	case errors.Is(err, store.ErrInvalidURL) && opening && se.Err != nil:
		return &usageError{fmt.Errorf("--store %s: %w", se.Store, se.Err)}
	case errors.Is(err, store.ErrInvalidURL):
		return &usageError{fmt.Errorf("--store: %w", err)}
	case (a.readOnly || a.mustExist) && errors.Is(err, store.ErrNotFound) && a.storeFlag == "":
		return fmt.Errorf("no store yet at %s: nothing has been written there (shale create or shale import makes it)", redacted)
	case (a.readOnly || a.mustExist) && errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("store %s does not exist (nothing was created; check --store)", redacted)
	case se != nil:
		return err // it names the store by its redacted URL
	}
	return fmt.Errorf("open store %s: %w", redacted, err)
}

// close releases what open acquired, in reverse order.
func (a *app) close() {
	for i := len(a.closer) - 1; i >= 0; i-- {
		a.closer[i]()
	}
	a.closer = nil
}

// checkTableName validates a table name given on the command line before any I/O. A bad
// name is a usage error (exit status 2), whichever command it was given to; the error
// wraps manifest.ErrInvalidTableName.
func checkTableName(name string) error {
	if err := manifest.ValidateTableName(name); err != nil {
		return &usageError{err}
	}
	return nil
}

// openTable validates the name before any I/O, then opens the table at its published
// version.
func (a *app) openTable(ctx context.Context, name string) (*engine.Table, error) {
	if err := checkTableName(name); err != nil {
		return nil, err
	}
	db, err := a.open(ctx)
	if err != nil {
		return nil, err
	}
	return db.OpenTable(ctx, name)
}

// printJSON writes v as the command's one JSON object on stdout: indented, lists [] when
// empty, members that do not apply left out (writeReport; docs/json.md).
func (a *app) printJSON(v any) error { return writeReport(a.stdout, v, false) }

// printf writes to stdout.
func (a *app) printf(format string, args ...any) { fmt.Fprintf(a.stdout, format, args...) }

// notePublished tells (on stderr) which other writers' versions a write's publish made
// visible: committed by a writer that had not published them, still running or dead
// between its commit and its publish (engine.CommitResult.AlsoPublished).
func (a *app) notePublished(table string, vs []engine.PublishedVersion) {
	for _, v := range vs {
		fmt.Fprintf(a.stderr, "note: this also published version %d of %s (%s by transaction %s), committed by another writer that had not published it\n",
			v.Version, table, v.Operation, v.Transaction)
	}
}

// droppedWhile words a write's error when the table was dropped while the command ran
// (engine.ErrTableDropped): the write met the drop marker, or its version landed in a
// version number the drop freed and belongs to no table. Either way nothing it wrote is
// in any table (and never will be), which is what the operator needs to know; what says
// what nothing means for the command.
func droppedWhile(err error, table, cmd, what string) error {
	if !errors.Is(err, engine.ErrTableDropped) {
		return err
	}
	return fmt.Errorf("%w (table %q was dropped while this %s ran: %s)", err, table, cmd, what)
}

// parseColumns splits --columns at commas: nil for "" (every column); a name left empty
// ("a,,b", "a,", " ") is a usage error, not an unknown column "".
func parseColumns(list string) ([]string, error) {
	if list == "" {
		return nil, nil
	}
	var cols []string
	for i, c := range strings.Split(list, ",") {
		c = strings.TrimSpace(c)
		if c == "" {
			return nil, usagef("--columns %q: column %d of the list is empty (want NAME,NAME,...)", list, i+1)
		}
		cols = append(cols, c)
	}
	return cols, nil
}

// flagChanged reports whether a flag was given on the command line.
func flagChanged(fs *pflag.FlagSet, name string) bool {
	f := fs.Lookup(name)
	return f != nil && f.Changed
}

// seconds formats a duration for people: "1.23 s" or "45 ms".
func seconds(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// flagDuration formats a duration as a person types it in a flag: "1h", "90m", "30s",
// "1h30m", "1.5s" (time.Duration's String without the zero units: "1h0m0s" is "1h").
func flagDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// endpointList formats etcd endpoints for people: "http://a:2379, http://b:2379".
func endpointList(eps []string) string {
	if len(eps) == 0 {
		return "none"
	}
	return strings.Join(eps, ", ")
}

// perSecond is n per second over d, or 0.
func perSecond(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// thousands formats n with thin separators: 3,000,000.
func thousands(n int64) string {
	s := fmt.Sprintf("%d", n)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// plural formats a count with its noun, the noun in the plural unless the count is one
// and the count with thousands separators: "1 row", "0 rows", "3,000,000 rows",
// "2 recovery sidecars". Every noun the CLI counts takes a plain "s".
func plural[N ~int | ~int32 | ~int64 | ~uint32 | ~uint64](n N, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	var s string
	if n < 0 {
		s = thousands(int64(n))
	} else {
		s = thousandsU(uint64(n))
	}
	return s + " " + noun + "s"
}

// pluralWord is noun, in the plural unless n is one: "version", "versions".
func pluralWord[N ~int | ~int32 | ~int64 | ~uint32 | ~uint64](n N, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}

// thousandsU is thousands for unsigned counts.
func thousandsU(n uint64) string {
	if n <= 1<<62 {
		return thousands(int64(n))
	}
	s := strconv.FormatUint(n, 10)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// humanBytes formats a size: "13.5 MB".
func humanBytes(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "kMGTPE"[exp])
}

// orEmpty returns s, or an empty slice for nil (JSON lists are [] when empty, never null).
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// strconvText matches the strconv and time parse errors pflag quotes for a bad flag
// value: `strconv.ParseInt: parsing "abc": invalid syntax`, `time: invalid duration "x"`.
var strconvText = regexp.MustCompile(`(strconv\.Parse(Int|Uint|Float|Bool): parsing "[^"]*": (invalid syntax|value out of range))|(time: (invalid duration|unknown unit "[^"]*" in duration|missing unit in duration) "[^"]*")`)

// flagValueError rewords pflag's error for a bad flag value without the strconv text:
// `invalid argument "abc" for "-n, --limit" flag: not an integer`.
func flagValueError(err error) error {
	msg := err.Error()
	m := strconvText.FindStringSubmatch(msg)
	if m == nil {
		return err
	}
	var what string
	switch {
	case m[3] == "value out of range":
		what = "out of range"
	case m[2] == "Int":
		what = "not an integer"
	case m[2] == "Uint":
		what = "not a whole number (0, 1, 2, ...)"
	case m[2] == "Float":
		what = "not a number"
	case m[2] == "Bool":
		what = "not true or false"
	default:
		what = "not a duration (like 500ms, 30s, 5m, 1h30m)"
	}
	return errors.New(strings.Replace(msg, m[0], what, 1))
}

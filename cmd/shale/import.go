package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/spf13/cobra"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/manifest"
)

// importResult is what an import did.
type importResult struct {
	Table   string `json:"table"`
	File    string `json:"file"`
	Format  string `json:"format"`
	Created bool   `json:"created"`
	// Config is the configuration an import that created the table gave it
	// (--compression, --compression-level), in the create's version.
	Config    map[string]string `json:"config,omitempty"`
	Overwrite bool              `json:"overwrite,omitempty"`
	Rows      int64             `json:"rows"`
	Version   uint64            `json:"version"`
	Elapsed   time.Duration     `json:"-"`
	ElapsedMS int64             `json:"elapsed_ms"`
	RowsPerS  float64           `json:"rows_per_second"`
	// IdempotencyKey is the import's key; Duplicate says an earlier import with it had
	// committed already (as Version), so nothing new was written.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	Duplicate      bool   `json:"duplicate"`
	// AlsoPublished lists other writers' versions this import's publish made visible.
	AlsoPublished []engine.PublishedVersion `json:"also_published"`
}

// importOptions tune importFile.
type importOptions struct {
	format    string // "" = from the extension
	overwrite bool   // replace the table's rows (and schema) instead of appending
	quiet     bool   // no progress output
	// idempotencyKey names the import across runs ("" = derived from the file's content,
	// the table and the format; see importKey).
	idempotencyKey string
	// config is the configuration of a table the import creates (codecFlags.config; nil
	// for none). An existing table is refused unless it has these values already.
	config map[string]string
}

func (a *app) importCommand() *cobra.Command {
	var table string
	var opts importOptions
	var codec codecFlags
	cmd := &cobra.Command{
		Use:   "import FILE [--table TABLE]",
		Short: "Import a Parquet, Arrow IPC, CSV or JSON Lines file",
		Long: `Import a file into a table in one new version. The table is --table, by default the
file's name without its extension (trips.csv goes into the table trips).

Formats (from the extension, or --format): parquet (.parquet), arrow (.arrow, .feather,
.ipc: Arrow IPC file or stream), csv (.csv), tsv (.tsv), jsonl (.jsonl, .ndjson, .json:
one object per line). CSV and JSON Lines column types are inferred from the first ` + fmt.Sprint(sampleRows) + `
rows (int64, float64, bool, date32, timestamp[us], string) when the table is new; an
existing table's column types are used otherwise. Integers are never inferred as float64
when that would lose digits: a CSV column holding an integer outside int64's range
(-9223372036854775808 to 9223372036854775807) is typed string, keeping every digit, and
such a JSON number is refused, naming its line and key (quote it to import it as a
string). A top-level Parquet or Arrow IPC column of an Arrow dictionary type (a pandas
categorical) is stored as its value type with its nulls (dictionary<values=string> as
string, which filters take), except when appended to a table column that is a
dictionary already.

A missing table is created with the file's schema; an existing one gets the rows
appended (the file must have the table's columns and types, else nothing is committed).
The file is streamed in batches of ` + fmt.Sprint(importBatchRows) + ` rows, so memory stays bounded.

An import is idempotent: its idempotency key is derived from the file's content, the
table and the format (or given with --idempotency-key), and the table remembers the keys
of its newest 1,000 keyed writes. Running the same import again (after a crash, or
unsure whether it committed) commits nothing and reports the version that has the rows,
publishing it if the first run died before it could. To append the same rows again on
purpose, pass another --idempotency-key.

FILE - reads standard input and needs --format and --table. CSV, TSV, JSON Lines and
Arrow IPC streams are streamed (only the type inference sample is held in memory);
Parquet and the Arrow IPC file format need random access, so a pipe is first copied to
a temporary file in $TMPDIR (as large as the input), removed when the import ends.
Standard input has no content to derive an idempotency key from before it is read: such
an import is idempotent only with --idempotency-key.

An import that fails, or is interrupted (Ctrl-C), deletes the data files and transaction
records it wrote (also when the table was dropped meanwhile), and drops the table again
if it created it and no other writer wrote to it meanwhile. Only when whether it
committed is undecided (the error says so) are they kept: running the same import again
commits it at most once, and 'shale gc' deletes what never commits. (A second Ctrl-C
stops at once and leaves them to 'shale gc'.)

--compression and --compression-level choose how a table the import creates stores its
data files (the configuration keys ` + engine.ConfigCompression + ` and
` + engine.ConfigCompressionLevel + `). ` + codecTradeoff + `
The table is created with that configuration in its first version, so the rows (and
any concurrent import's) are written with it. Bad values are refused before anything
is written. For a table that exists already the flags are refused (exit status 2,
nothing written) unless the table has these values already, so running the same import
again still works; change an existing table's codec with 'shale config'.`,
		Example: `  shale import flights.parquet
  shale import trips-2024.csv --table trips
  shale import events.log --format jsonl --table events
  shale import flights.parquet --compression lz4
  zcat trips.csv.gz | shale import - --format csv --table trips --idempotency-key trips-2024-06`,
		Args: exactArgs("FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := codec.config(cmd.Flags())
			if err != nil {
				return err
			}
			opts.config = cfg
			if opts.format != "" {
				f, ok := normalizeFormat(opts.format)
				if !ok {
					return usagef("unknown --format %q (want %s)", opts.format, formatList)
				}
				opts.format = f
			}
			if table == "" && flagChanged(cmd.Flags(), "table") {
				return usagef("--table needs a table name (leave --table out to use the file's name)")
			}
			if args[0] == stdinPath && (opts.format == "" || table == "") {
				return usagef("import - reads standard input: it needs --format (%s) and --table", formatList)
			}
			if table == "" {
				base := filepath.Base(args[0])
				table = strings.TrimSuffix(base, filepath.Ext(base))
			}
			res, err := a.importFile(cmd.Context(), args[0], table, opts)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(res)
			}
			a.printImport(res)
			return nil
		},
	}
	cmd.Flags().StringVarP(&table, "table", "t", "", "table to import into (default: the file name without its extension)")
	cmd.Flags().StringVar(&opts.format, "format", "", "input format: "+formatList+" (default: from the extension)")
	cmd.Flags().BoolVar(&opts.overwrite, "overwrite", false, "replace the table's rows and schema instead of appending")
	cmd.Flags().StringVar(&opts.idempotencyKey, "idempotency-key", "", "name this import across runs (default: derived from the file's content, the table and the format)")
	codec.register(cmd.Flags())
	return cmd
}

// importKey derives an import's idempotency key from the table, the format, the mode and
// the file's bytes (SHA-256; one extra read of the file): "import:" and 40 hex digits.
func importKey(path, table, format string, overwrite bool) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%t\x00", table, format, overwrite)
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return "import:" + hex.EncodeToString(h.Sum(nil))[:40], nil
}

// minRateRows is the fewest rows for which an import's rate is printed: below, the time
// is mostly starting up (connecting to etcd, opening the store), and "0 rows/s" says
// nothing.
const minRateRows = 1000

func (a *app) printImport(r *importResult) {
	defer a.notePublished(r.Table, r.AlsoPublished)
	if r.Duplicate {
		// With a key of the caller's (--idempotency-key) the earlier import may have
		// been of another file: say what the key decided, not whose rows they were.
		a.printf("Already imported: an earlier import with the same idempotency key (%s) committed version %d of %s; nothing of %s was written. To import it again, pass another --idempotency-key.\n",
			r.IdempotencyKey, r.Version, r.Table, filepath.Base(r.File))
		return
	}
	verb := "Appended"
	switch {
	case r.Created && len(r.Config) > 0:
		verb = "Created " + r.Table + " (" + configString(r.Config) + ") and imported"
	case r.Created:
		verb = "Created " + r.Table + " and imported"
	case r.Overwrite:
		verb = "Overwrote " + r.Table + " with"
	}
	into := ""
	if !r.Created && !r.Overwrite {
		into = " to " + r.Table
	}
	from := filepath.Base(r.File)
	if r.File == stdinPath {
		from = stdinName
	}
	rate := ""
	if r.Rows >= minRateRows {
		rate = ", " + thousands(int64(r.RowsPerS)) + " rows/s"
	}
	a.printf("%s %s%s from %s: version %d, %s%s\n",
		verb, plural(r.Rows, "row"), into, from, r.Version, seconds(r.Elapsed), rate)
}

// importFile streams path into table: created from the file's schema when missing,
// appended to (or, with opts.overwrite, overwritten) otherwise. Errors: the table name's,
// the file's (missing, unsupported format, unreadable: naming the file), schema mismatch
// (wrapping engine.ErrSchemaMismatch; nothing is committed), and commit errors.
func (a *app) importFile(ctx context.Context, path, table string, opts importOptions) (*importResult, error) {
	start := time.Now()
	if err := checkTableName(table); err != nil {
		return nil, err
	}
	format := opts.format
	if format == "" {
		f, err := formatFromName(path)
		if err != nil {
			return nil, err
		}
		format = f
	}
	db, err := a.open(ctx)
	if err != nil {
		return nil, err
	}
	t, err := db.OpenTable(ctx, table)
	if err != nil && !errors.Is(err, manifest.ErrTableNotFound) {
		return nil, err
	}
	if t != nil {
		if err := checkConfigured(t, opts.config); err != nil {
			return nil, err
		}
	}
	var want *arrow.Schema
	if t != nil && !opts.overwrite {
		want = t.Schema()
	}
	src, err := openSource(ctx, path, format, table, want, memory.DefaultAllocator)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	// Read the first batch before creating anything, so that a file that is not what
	// its extension says fails with no new version.
	pk, err := peek(src.rdr)
	if err != nil {
		pk.Release()
		return nil, (&progressReader{RecordReader: src.rdr, src: src}).Err()
	}
	defer pk.Release()
	if want != nil && !opts.overwrite {
		if err := sameSchema(table, want, pk.Schema()); err != nil {
			return nil, err
		}
	}
	res := &importResult{Table: table, File: path, Format: format}
	var createdAt uint64
	if t == nil {
		t, err = db.CreateTable(ctx, table, pk.Schema(), engine.WithConfig(opts.config))
		switch {
		case errors.Is(err, engine.ErrTableExists): // created meanwhile by someone else
			if t, err = db.OpenTable(ctx, table); err != nil {
				return nil, err
			}
			if err := checkConfigured(t, opts.config); err != nil {
				return nil, err
			}
			if err := sameSchema(table, t.Schema(), pk.Schema()); err != nil {
				return nil, err
			}
		case err != nil:
			return nil, err
		default:
			res.Created, createdAt = true, t.Version()
			if opts.config != nil {
				res.Config = t.Config()
			}
		}
	}
	res.IdempotencyKey = opts.idempotencyKey
	if res.IdempotencyKey == "" && path != stdinPath { // stdin: no key unless given
		if res.IdempotencyKey, err = importKey(path, table, format, opts.overwrite && !res.Created); err != nil {
			if res.Created {
				if _, derr := db.DropTableAt(context.WithoutCancel(ctx), table, createdAt); derr == nil {
					err = fmt.Errorf("%w (table %s, which this import had created, was dropped again)", err, table)
				}
			}
			return nil, err
		}
	}
	var p *progress
	if !opts.quiet {
		p = newProgress(a.stderr, "importing "+table, src.rows, src.size)
	}
	rdr := &progressReader{RecordReader: pk, src: src, p: p}
	var cr engine.CommitResult
	key := engine.WithIdempotencyKey(res.IdempotencyKey)
	if opts.overwrite && !res.Created {
		res.Overwrite = true
		cr, err = t.Overwrite(ctx, rdr, key)
	} else {
		cr, err = t.Append(ctx, rdr, key)
	}
	if p != nil {
		p.finish()
	}
	if err != nil {
		interrupted := ctx.Err() != nil
		var ue *engine.UnknownError
		switch {
		case errors.Is(err, engine.ErrTableDropped):
			// Whether the write met the drop marker or landed in a version number the
			// drop freed, its rows are in no table: never "committed". The drop decided
			// that (Rejected, an *engine.WriteError): delete what the import wrote that
			// the drop's own listing missed.
			what := fmt.Sprintf("none of the %s is in any table; import again to create the table anew", plural(rdr.rows, "row"))
			var we *engine.WriteError
			if errors.As(err, &we) {
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
				files, kept := deleteWritten(cctx, db, table, we.Txn.ID)
				cancel()
				switch {
				case kept != "":
					what += "; its files were left for gc: " + kept
				case files == 1:
					what += "; the data file it had written meanwhile was deleted"
				case files > 1:
					what += fmt.Sprintf("; the %s data files it had written meanwhile were deleted", thousands(int64(files)))
				}
			}
			return nil, droppedWhile(err, table, "import", what)
		case errors.As(err, &ue) && ue.Committed:
			err = fmt.Errorf("%w (the %s committed as version %d of %q but not published yet: the next write to the table, or shale repair, publishes them; do not import them again)", err, plural(rdr.rows, "row"), ue.Version, table)
			if interrupted {
				err = &interruptedError{fmt.Sprintf("after the import committed: %v", err), ctx.Err()}
			}
			return nil, err
		}
		// Undo what is decided not to commit: the import's files, and the table if this
		// import created it and nobody else wrote to it.
		ab := a.abandonImport(ctx, db, t, res.Created, createdAt, interrupted, err)
		switch {
		case interrupted && ab.landed:
			fmt.Fprintf(a.stderr, "note: interrupted, but %s\n", ab.describe(table))
			res.Rows, res.Version = rdr.rows, ab.version
			res.Elapsed = time.Since(start)
			res.ElapsedMS, res.RowsPerS = res.Elapsed.Milliseconds(), perSecond(res.Rows, res.Elapsed)
			res.AlsoPublished = []engine.PublishedVersion{}
			return res, nil
		case interrupted:
			return nil, &interruptedError{ab.describe(table), ctx.Err()}
		case errors.As(err, &ue):
			err = fmt.Errorf("%w (the rows may or may not have been committed; running the same import again commits them at most once)", err)
		case errors.Is(err, manifest.ErrTxnAborted):
			err = fmt.Errorf("%w (gc or recovery collected the files this import had written while it was stalled: %s; run the import again)", err, ab.describe(table))
		default:
			err = fmt.Errorf("%w (%s)", err, ab.describe(table))
		}
		return nil, err
	}
	res.Rows = rdr.rows
	res.Version = cr.Version
	res.Duplicate, res.AlsoPublished = cr.Duplicate, cr.AlsoPublished
	if res.AlsoPublished == nil {
		res.AlsoPublished = []engine.PublishedVersion{}
	}
	if res.Version == 0 {
		res.Version = t.Version()
	}
	res.Elapsed = time.Since(start)
	res.ElapsedMS = res.Elapsed.Milliseconds()
	res.RowsPerS = perSecond(res.Rows, res.Elapsed)
	return res, nil
}

// sameSchema checks that a file's columns can be appended to a table: the same names in
// the same order with the same types. Errors wrap engine.ErrSchemaMismatch and name the
// first difference.
func sameSchema(table string, want, got *arrow.Schema) error {
	if got.NumFields() != want.NumFields() {
		return fmt.Errorf("table %q: %w: the file has %d columns (%s), the table has %d (%s)", table, engine.ErrSchemaMismatch,
			got.NumFields(), strings.Join(names(got), ", "), want.NumFields(), strings.Join(names(want), ", "))
	}
	for i := range want.NumFields() {
		w, g := want.Field(i), got.Field(i)
		if w.Name != g.Name {
			return fmt.Errorf("table %q: %w: column %d of the file is %q, the table has %q", table, engine.ErrSchemaMismatch, i+1, g.Name, w.Name)
		}
		if !arrow.TypeEqual(w.Type, g.Type) {
			return fmt.Errorf("table %q: %w: column %q of the file is %s, the table has %s", table, engine.ErrSchemaMismatch, g.Name, g.Type, w.Type)
		}
	}
	return nil
}

// checkConfigured refuses a configuration for table t, which exists already, unless t
// has every one of its values already (then an import run again goes on). Errors: a
// usage error pointing to shale config.
func checkConfigured(t *engine.Table, cfg map[string]string) error {
	have := t.Config()
	for k, v := range cfg {
		if got, ok := have[k]; !ok || got != v {
			return existingTableCodecError(t.Name(), cfg)
		}
	}
	return nil
}

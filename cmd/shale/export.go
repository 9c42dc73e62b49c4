package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/spf13/cobra"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/manifest"
)

// Export formats.
const (
	exportParquet = "parquet"
	exportArrow   = "arrow"
	exportCSV     = "csv"
)

// exportRowGroupRows is the number of rows per Parquet row group an export writes.
const exportRowGroupRows = 1 << 20

// exportResult is what an export wrote (printed only with -o: without it the rows are on
// stdout).
type exportResult struct {
	Table     string `json:"table"`
	Version   uint64 `json:"version"`
	Format    string `json:"format"`
	File      string `json:"file"`
	Rows      int64  `json:"rows"`
	Bytes     int64  `json:"bytes"`
	ElapsedMS int64  `json:"elapsed_ms"`
}

func (a *app) exportCommand() *cobra.Command {
	var (
		format, out, where, columns string
		version                     uint64
	)
	cmd := &cobra.Command{
		Use:   "export TABLE --format parquet|arrow|csv [-o FILE] [--version N]",
		Short: "Write a table's live rows as a Parquet, Arrow IPC or CSV file for other tools",
		Long: `Write the live rows of a table (deleted rows left out) at its published version, or
at --version N, as one file another tool can read without Shale. A table's data files
alone are not that: they still hold rows that deletion vectors mark deleted (see
docs/format.md), so read a table through Shale or export it.

Formats: parquet (ZSTD, the Arrow schema stored so types round-trip through pyarrow and
pandas), arrow (an Arrow IPC file, with its footer: pyarrow.ipc.open_file, Feather v2;
'shale query --format arrow' writes the IPC stream format instead), csv (a header, then
one line per row; nulls are empty fields; timestamps as 'YYYY-MM-DD hh:mm:ss[.fffffffff]'
in UTC, or RFC 3339 for columns with a time zone).

-o FILE writes to FILE through a temporary file in its directory, renamed when complete,
so a failed export leaves no partial file (an existing FILE is replaced); the format
then defaults from its extension (.parquet, .arrow/.feather/.ipc, .csv), and a line (or
with --json an object) says what was written. Without -o the rows go to stdout and
nothing else does; parquet and arrow are refused when stdout is a terminal.
--where and --columns select rows and columns as in 'shale query'.

` + whereHelp,
		Example: `  shale export flights --format parquet -o flights.parquet
  shale export flights --version 3 -o flights-v3.arrow
  shale export flights --where "origin = 'SFO'" --format csv | head`,
		Args: exactArgs("TABLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format == "" && out != "" {
				format = exportFormatOf(out)
			}
			switch format {
			case exportParquet, exportArrow, exportCSV:
			case "":
				return usagef("export needs --format parquet, arrow or csv (or -o FILE with one of their extensions)")
			default:
				return usagef("unknown --format %q (want parquet, arrow or csv)", format)
			}
			if out == "" && format != exportCSV && isTerminal(a.stdout) {
				return usagef("--format %s writes binary data; pass -o FILE or redirect stdout to a file or a pipe", format)
			}
			cols, err := parseColumns(columns)
			if err != nil {
				return err
			}
			var v *uint64
			if flagChanged(cmd.Flags(), "version") {
				v = &version
			}
			res, err := a.export(cmd.Context(), args[0], v, engine.ScanOptions{Columns: cols, Filter: where}, format, out)
			if err != nil || out == "" {
				return err
			}
			if a.jsonOut {
				return a.printJSON(res)
			}
			a.printf("Exported %s %s of %s version %d to %s (%s, %s), %s\n", thousands(res.Rows), rowNoun(res.Rows), res.Table,
				res.Version, res.File, res.Format, humanBytes(res.Bytes), seconds(time.Duration(res.ElapsedMS)*time.Millisecond))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&format, "format", "f", "", "output format: parquet, arrow or csv (default: from the -o file's extension)")
	f.StringVarP(&out, "output", "o", "", "write to this file instead of stdout")
	f.Uint64Var(&version, "version", 0, "export this version (time travel) instead of the published one")
	f.StringVarP(&where, "where", "w", "", "SQL WHERE expression selecting the rows (default: all live rows)")
	f.StringVarP(&columns, "columns", "c", "", "columns to write, comma-separated (default: all)")
	return cmd
}

// exportFormatOf is the export format a file name's extension implies ("" = none).
func exportFormatOf(name string) string {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".parquet", ".pq":
		return exportParquet
	case ".arrow", ".feather", ".ipc":
		return exportArrow
	case ".csv":
		return exportCSV
	}
	return ""
}

// export scans the table (pinned for the duration) and writes its rows to out (""
// = stdout) in format.
func (a *app) export(ctx context.Context, name string, v *uint64, opts engine.ScanOptions, format, out string) (*exportResult, error) {
	start := time.Now()
	if st, err := os.Stat(out); out != "" && err == nil && st.IsDir() {
		return nil, fmt.Errorf("export to %s: it is a directory (-o names the file to write)", out)
	}
	t, err := a.tableAt(ctx, name, v)
	if err != nil {
		return nil, err
	}
	pin, err := t.Pin(ctx)
	if err != nil {
		if errors.Is(err, manifest.ErrVersionNotFound) {
			return nil, versionNotFound(ctx, a.db, name, t.Version(), err)
		}
		return nil, err
	}
	defer pin.Release(ctx)
	a.noteVersion(ctx, t, v != nil)
	sc, err := t.Scan(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer sc.Release()

	res := &exportResult{Table: t.Name(), Version: t.Version(), Format: format, File: out}
	var w io.Writer = a.stdout
	var tmp *os.File
	if out != "" {
		// A temporary file beside the target, renamed into place when complete.
		tmp, err = os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".tmp-*")
		if err != nil {
			return nil, fmt.Errorf("export to %s: %w", out, err)
		}
		defer func() {
			if tmp != nil {
				tmp.Close()
				os.Remove(tmp.Name())
			}
		}()
		// CreateTemp makes the file 0600; an export is an ordinary file (or keeps the
		// mode of the file it replaces).
		mode := os.FileMode(0o644)
		if st, err := os.Stat(out); err == nil {
			mode = st.Mode().Perm()
		}
		if err := tmp.Chmod(mode); err != nil {
			return nil, fmt.Errorf("export to %s: %w", out, err)
		}
		w = tmp
	}
	cw := &countWriter{w: w}
	rw, err := newExportWriter(format, cw, sc.Schema())
	if err != nil {
		return nil, err
	}
	for sc.Next() {
		rec := sc.RecordBatch()
		res.Rows += rec.NumRows()
		if err := rw.Write(rec); err != nil {
			return nil, fmt.Errorf("export %s as %s: %w", t.Name(), format, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if err := rw.Close(); err != nil {
		return nil, fmt.Errorf("export %s as %s: %w", t.Name(), format, err)
	}
	res.Bytes = cw.n
	if tmp != nil {
		if err := tmp.Sync(); err != nil {
			return nil, fmt.Errorf("export to %s: %w", out, err)
		}
		if err := tmp.Close(); err != nil {
			return nil, fmt.Errorf("export to %s: %w", out, err)
		}
		if err := os.Rename(tmp.Name(), out); err != nil {
			return nil, fmt.Errorf("export to %s: %w", out, err)
		}
		tmp = nil
	}
	res.ElapsedMS = time.Since(start).Milliseconds()
	return res, nil
}

// newExportWriter returns the writer of one export format.
func newExportWriter(format string, w io.Writer, schema *arrow.Schema) (rowWriter, error) {
	switch format {
	case exportCSV:
		return newRowWriter(outCSV, w, schema)
	case exportArrow:
		bw := bufio.NewWriterSize(w, 1<<20)
		fw, err := ipc.NewFileWriter(bw, ipc.WithSchema(schema))
		if err != nil {
			return nil, err
		}
		return &arrowFileWriter{bw: bw, w: fw}, nil
	case exportParquet:
		bw := bufio.NewWriterSize(w, 1<<20)
		props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd),
			parquet.WithMaxRowGroupLength(exportRowGroupRows))
		fw, err := pqarrow.NewFileWriter(schema, bw, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
		if err != nil {
			return nil, err
		}
		return &parquetWriter{bw: bw, w: fw}, nil
	}
	return nil, usagef("unknown --format %q (want parquet, arrow or csv)", format)
}

// arrowFileWriter writes the Arrow IPC file format (random access, with a footer).
type arrowFileWriter struct {
	bw *bufio.Writer
	w  *ipc.FileWriter
}

func (a *arrowFileWriter) Write(rec arrow.RecordBatch) error { return a.w.Write(rec) }
func (a *arrowFileWriter) Close() error {
	if err := a.w.Close(); err != nil {
		return err
	}
	return a.bw.Flush()
}

// parquetWriter writes Parquet row groups of up to exportRowGroupRows rows.
type parquetWriter struct {
	bw *bufio.Writer
	w  *pqarrow.FileWriter
}

func (p *parquetWriter) Write(rec arrow.RecordBatch) error { return p.w.WriteBuffered(rec) }
func (p *parquetWriter) Close() error {
	if err := p.w.Close(); err != nil {
		return err
	}
	return p.bw.Flush()
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

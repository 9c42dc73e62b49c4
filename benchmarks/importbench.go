package benchmarks

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/internal/fragment"
)

// Import variant names (Sample.Name).
const (
	ImportEngine    = "engine: Table.Append"
	ImportWriter    = "engine part: fragment.Writer only (data files, no commit)"
	ImportEncodePut = "baseline: IPC encode + Put"
	ImportEncode    = "baseline: IPC encode only (no store)"
	ImportPut       = "baseline: Put of pre-encoded files"
)

// SuiteResult holds one suite's samples and the ratios between them.
type SuiteResult struct {
	Samples []*Sample
	Ratios  []Ratio
	Notes   []string
}

// Sample returns the sample with the given name, or nil.
func (r *SuiteResult) Sample(name string) *Sample {
	for _, s := range r.Samples {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// encodeFile encodes recs as one Arrow IPC file with ZSTD, one record batch per record.
func encodeFile(schema *arrow.Schema, recs []arrow.RecordBatch) ([]byte, error) {
	var buf bytes.Buffer
	w, err := ipc.NewFileWriter(&buf, ipc.WithSchema(schema), ipc.WithZstd(), ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			w.Close()
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// fileGroups splits the dataset's batches into data files of at most fileRows rows, the
// way the engine's writer does when every batch is full (batchRows divides fileRows).
func fileGroups(ds *Dataset, fileRows int) [][]arrow.RecordBatch {
	var out [][]arrow.RecordBatch
	var cur []arrow.RecordBatch
	var rows int64
	for _, r := range ds.Records {
		if rows+r.NumRows() > int64(fileRows) && len(cur) > 0 {
			out = append(out, cur)
			cur, rows = nil, 0
		}
		cur = append(cur, r)
		rows += r.NumRows()
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// importVariants returns the timed variants of the import suite. Each repetition writes
// under its own table or prefix and deletes it afterwards (untimed).
func importVariants(e *env, ds *Dataset, fileRows int) ([]variant, error) {
	groups := fileGroups(ds, fileRows)
	// The put-only baseline stores bytes encoded once, before any timing.
	var encoded [][]byte
	for _, g := range groups {
		b, err := encodeFile(ds.Schema, g)
		if err != nil {
			return nil, fmt.Errorf("benchmarks: encode baseline file: %w", err)
		}
		encoded = append(encoded, b)
	}
	mk := func(name string) *Sample { return &Sample{Name: name, Rows: ds.Rows, Bytes: ds.Bytes} }
	engineS, writerS, encPutS, encS, putS := mk(ImportEngine), mk(ImportWriter), mk(ImportEncodePut), mk(ImportEncode), mk(ImportPut)
	fieldIDs := make([]int32, ds.Schema.NumFields())
	for i := range fieldIDs {
		fieldIDs[i] = int32(i)
	}

	// counted wraps a timed step with request counting (recorded on the sample's first run).
	counted := func(s *Sample, step func() error) (Took, error) {
		before, kvBefore := e.storeRequests(), e.etcdRequests()
		d, err := timeStep(step)
		if err == nil && len(s.Times) == 0 {
			s.Requests = e.storeRequests().Sub(before)
			s.Etcd = subCounts(e.etcdRequests(), kvBefore)
		}
		return d, err
	}

	engineRun := func(ctx context.Context, rep int) (Took, error) {
		name := fmt.Sprintf("import-%d", rep)
		tbl, err := e.db.CreateTable(ctx, name, ds.Schema)
		if err != nil {
			return Took{}, err
		}
		rdr, err := ds.Reader()
		if err != nil {
			return Took{}, err
		}
		defer rdr.Release()
		var rows int64
		d, err := counted(engineS, func() error {
			res, err := tbl.Append(ctx, rdr)
			rows = res.Rows
			return err
		})
		if err != nil {
			return Took{}, fmt.Errorf("benchmarks: engine import: %w", err)
		}
		if rows != ds.Rows {
			return Took{}, fmt.Errorf("benchmarks: engine import appended %d rows, the data has %d", rows, ds.Rows)
		}
		return d, clearPrefix(ctx, e.store, name+"/")
	}
	// writerRun is the engine's data-file path alone: re-chunking, IPC encoding, batch
	// statistics, checksums and one Put per file, without the commit and publish.
	writerRun := func(ctx context.Context, rep int) (Took, error) {
		prefix := fmt.Sprintf("writer-%d/", rep)
		d, err := counted(writerS, func() error {
			w, err := fragment.NewWriter(ctx, e.store, prefix+"data", ds.Schema, fieldIDs, e.opts.Write)
			if err != nil {
				return err
			}
			for _, r := range ds.Records {
				if err := w.Write(r); err != nil {
					w.Close()
					return err
				}
			}
			_, err = w.Close()
			return err
		})
		if err != nil {
			return Took{}, fmt.Errorf("benchmarks: fragment writer: %w", err)
		}
		return d, clearPrefix(ctx, e.store, prefix)
	}
	encPutRun := func(ctx context.Context, rep int) (Took, error) {
		prefix := fmt.Sprintf("raw-import-%d/", rep)
		d, err := counted(encPutS, func() error {
			for i, g := range groups {
				b, err := encodeFile(ds.Schema, g)
				if err != nil {
					return err
				}
				if err := e.store.Put(ctx, fmt.Sprintf("%sdata/%d.arrow", prefix, i), b); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return Took{}, fmt.Errorf("benchmarks: baseline encode+put: %w", err)
		}
		return d, clearPrefix(ctx, e.store, prefix)
	}
	encRun := func(ctx context.Context, rep int) (Took, error) {
		var n int
		d, err := counted(encS, func() error {
			for _, g := range groups {
				b, err := encodeFile(ds.Schema, g)
				if err != nil {
					return err
				}
				n += len(b)
			}
			return nil
		})
		if err != nil {
			return Took{}, fmt.Errorf("benchmarks: baseline encode: %w", err)
		}
		return d, nil
	}
	putRun := func(ctx context.Context, rep int) (Took, error) {
		prefix := fmt.Sprintf("raw-put-%d/", rep)
		d, err := counted(putS, func() error {
			for i, b := range encoded {
				if err := e.store.Put(ctx, fmt.Sprintf("%sdata/%d.arrow", prefix, i), b); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return Took{}, fmt.Errorf("benchmarks: baseline put: %w", err)
		}
		return d, clearPrefix(ctx, e.store, prefix)
	}
	return []variant{
		{"engine", engineS, engineRun},
		{"writer", writerS, writerRun},
		{"encode+put", encPutS, encPutRun},
		{"encode", encS, encRun},
		{"put", putS, putRun},
	}, nil
}

// runImport measures the import of ds by the engine against the baselines.
func runImport(ctx context.Context, e *env, ds *Dataset, cfg Config, log io.Writer) (*SuiteResult, error) {
	vs, err := importVariants(e, ds, cfg.FileRows)
	if err != nil {
		return nil, err
	}
	if err := alternate(ctx, cfg.Reps, logged(vs, log)); err != nil {
		return nil, err
	}
	res := &SuiteResult{}
	for _, v := range vs {
		res.Samples = append(res.Samples, v.s)
	}
	eng, wr, encPut, enc, put := res.Sample(ImportEngine), res.Sample(ImportWriter), res.Sample(ImportEncodePut), res.Sample(ImportEncode), res.Sample(ImportPut)
	res.Ratios = []Ratio{
		newRatio("import: engine vs encode+put", eng, encPut, 0.8),
		newRatio("import: fragment.Writer vs encode+put", wr, encPut, 0),
		newRatio("import: engine vs fragment.Writer (commit + publish share)", eng, wr, 0),
		newRatio("import: encode+put vs encode only (Put share)", encPut, enc, 0),
		newRatio("import: engine vs put only", eng, put, 0),
	}
	res.Notes = append(res.Notes, fmt.Sprintf("Input: %s rows, %.1f MB of Arrow buffers in memory, in batches of %s rows; data files of up to %s rows, ZSTD. "+
		"MB/s is input MB (10^6 bytes) per second for every variant, so MB/s ratios equal time ratios.", group(ds.Rows), float64(ds.Bytes)/1e6, group(int64(cfg.BatchRows)), group(int64(cfg.FileRows))))
	return res, nil
}

// logged wraps each variant to print one progress line per run.
func logged(vs []variant, log io.Writer) []variant {
	out := make([]variant, len(vs))
	for i, v := range vs {
		out[i] = variant{key: v.key, s: v.s, run: func(ctx context.Context, rep int) (Took, error) {
			d, err := v.run(ctx, rep)
			if err == nil {
				fmt.Fprintf(log, "  rep %d  %-40s %v (cpu %v)\n", rep+1, v.s.Name, d.Wall.Round(time.Microsecond), d.CPU.Round(time.Microsecond))
			}
			return d, err
		}}
	}
	return out
}

package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/spf13/cobra"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/manifest"
)

// inspection is what `inspect` reports about one version (also its JSON form).
type inspection struct {
	Table       string            `json:"table"`
	Version     uint64            `json:"version"`
	ManifestKey string            `json:"manifest_key"`
	Checksum    string            `json:"manifest_crc32c"`
	Published   uint64            `json:"published_version"`
	Transaction txnJSON           `json:"transaction"`
	Schema      []columnJSON      `json:"schema"`
	Config      map[string]string `json:"config,omitempty"`
	Rows        rowCounts         `json:"rows"`
	DataBytes   int64             `json:"data_bytes"`
	Fragments   []fragmentJSON    `json:"fragments"`
	Columns     []columnStatsJSON `json:"column_statistics"`
	// Indexes summarizes each index (as shale index list); IndexSegments lists the
	// manifest's index segments with their objects.
	Indexes       []engine.IndexInfo `json:"indexes"`
	IndexSegments []indexSegmentJSON `json:"index_segments"`
	// Aborted: the version was prepared by a multi-table transaction that aborted. It is
	// shown as stored, but counts as empty: reading it gives version ReadsAs.
	Aborted bool   `json:"aborted,omitempty"`
	ReadsAs uint64 `json:"reads_as,omitempty"`
}

// indexSegmentJSON is one index segment of a manifest (manifest.Index).
type indexSegmentJSON struct {
	Name      string   `json:"name"`
	UUID      string   `json:"uuid"`
	Kind      string   `json:"kind"`
	FieldIDs  []int32  `json:"field_ids"`
	Fragments []uint32 `json:"fragments"`
	BuiltFrom uint64   `json:"built_from"`
	Files     []string `json:"files"`
	Rows      int64    `json:"rows"`
	Bytes     int64    `json:"bytes"`
}

type txnJSON struct {
	ID          string    `json:"id"`
	Operation   string    `json:"operation"`
	ReadVersion uint64    `json:"read_version"`
	Time        time.Time `json:"time"`
	Predicate   string    `json:"predicate,omitempty"`
	Key         string    `json:"key"`
}

type rowCounts struct {
	Physical int64 `json:"physical"`
	Live     int64 `json:"live"`
	Deleted  int64 `json:"deleted"`
}

type fragmentJSON struct {
	ID           uint32          `json:"id"`
	PhysicalRows int64           `json:"physical_rows"`
	LiveRows     int64           `json:"live_rows"`
	Files        []dataFileJSON  `json:"data_files"`
	Deletion     *deletionVector `json:"deletion_vector,omitempty"`
}

type dataFileJSON struct {
	Key         string  `json:"key"`
	Size        int64   `json:"size"`
	Rows        int64   `json:"rows"`
	Batches     int     `json:"batches"`
	Compression string  `json:"compression"`
	FieldIDs    []int32 `json:"field_ids"`
}

type deletionVector struct {
	Key     string `json:"key"`
	Size    int64  `json:"size"`
	Deleted int64  `json:"deleted"`
}

type columnStatsJSON struct {
	Name      string `json:"name"`
	FieldID   int32  `json:"field_id"`
	Type      string `json:"type"`
	NullCount int64  `json:"null_count"`
	Min       string `json:"min,omitempty"`
	Max       string `json:"max,omitempty"`
	// MinMaxFiles is how many data files had a min/max for the column (out of all files).
	MinMaxFiles int `json:"files_with_min_max"`
}

func (a *app) inspectCommand() *cobra.Command {
	var version uint64
	cmd := &cobra.Command{
		Use:   "inspect TABLE [--version N]",
		Short: "Show a version's manifest: schema, fragments, data files, statistics",
		Long: `Show the manifest of a table's published version (or --version N): the transaction
that made it, the schema with field ids, row counts, every fragment with its data files
(sizes, rows, record batches) and deletion vector, per-column statistics over all
data files (null count, min, max; statistics ignore deletions), and the indexes with
their coverage and objects (shale index list shows the coverage alone). --json dumps it
all.`,
		Args: exactArgs("TABLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var v *uint64
			if flagChanged(cmd.Flags(), "version") {
				v = &version
			}
			t, err := a.tableAt(cmd.Context(), args[0], v)
			if err != nil {
				return err
			}
			m := t.Manifest()
			if c := t.ContentVersion(); c != t.Version() {
				// A prepared version of an aborted multi-table transaction reads as
				// version c; inspect shows the manifest stored under its number.
				if m, err = manifest.Load(cmd.Context(), a.db.Store(), t.Name(), t.Version()); err != nil {
					return err
				}
			}
			in := inspect(m)
			if c := t.ContentVersion(); c != t.Version() {
				in.Aborted, in.ReadsAs = true, c
			}
			if db := a.db; db.Catalog() != nil {
				if p, _, err := db.Catalog().Get(cmd.Context(), t.Name()); err == nil {
					in.Published = p.Version
				}
			}
			if a.jsonOut {
				return a.printJSON(in)
			}
			a.printInspection(in)
			return nil
		},
	}
	cmd.Flags().Uint64Var(&version, "version", 0, "inspect this version instead of the published one")
	return cmd
}

// inspect summarizes a manifest (no I/O).
func inspect(m *manifest.Manifest) *inspection {
	schema := m.Schema.MustArrow()
	in := &inspection{
		Table: m.Table, Version: m.Version, ManifestKey: m.Key(), Checksum: fmt.Sprintf("%08x", m.Checksum()),
		Transaction: txnJSON{ID: m.Txn.ID, Operation: string(m.Txn.Op.Kind), ReadVersion: m.Txn.ReadVersion,
			Time: time.Unix(0, m.Txn.Timestamp).UTC(), Predicate: m.Txn.Op.Predicate, Key: m.TxnKey},
		Config:    m.Config,
		Fragments: []fragmentJSON{},
	}
	in.Schema = schemaJSON(schema)
	for i := range in.Schema {
		id := m.Schema.FieldIDs[i]
		in.Schema[i].FieldID = &id
	}
	type agg struct {
		nulls    int64
		min, max fragment.Value
		has      int
	}
	aggs := map[int32]*agg{}
	files := 0
	for fi := range m.Fragments {
		f := &m.Fragments[fi]
		fj := fragmentJSON{ID: f.ID, PhysicalRows: f.PhysicalRows, LiveRows: f.LiveRows()}
		in.Rows.Physical += f.PhysicalRows
		in.Rows.Live += f.LiveRows()
		if f.Deletion != nil {
			fj.Deletion = &deletionVector{Key: f.Deletion.Key, Size: f.Deletion.Size, Deleted: f.Deletion.Deleted}
		}
		for _, df := range f.Files {
			files++
			in.DataBytes += df.Size
			fj.Files = append(fj.Files, dataFileJSON{Key: df.Key, Size: df.Size, Rows: df.Rows, Batches: len(df.Batches),
				Compression: string(df.Compression), FieldIDs: df.FieldIDs})
			for ci, st := range df.Stats {
				if ci >= len(df.FieldIDs) {
					break
				}
				id := df.FieldIDs[ci]
				g := aggs[id]
				if g == nil {
					g = &agg{}
					aggs[id] = g
				}
				g.nulls += st.NullCount
				if st.HasMinMax {
					if g.has == 0 || st.Min.Compare(g.min) < 0 {
						g.min = st.Min
					}
					if g.has == 0 || st.Max.Compare(g.max) > 0 {
						g.max = st.Max
					}
					g.has++
				}
			}
		}
		in.Fragments = append(in.Fragments, fj)
	}
	in.Rows.Deleted = in.Rows.Physical - in.Rows.Live
	in.Indexes = engine.IndexesOf(m)
	in.IndexSegments = []indexSegmentJSON{}
	for _, ix := range m.Indexes {
		in.IndexSegments = append(in.IndexSegments, indexSegmentJSON{Name: ix.Name, UUID: ix.UUID, Kind: ix.Kind, FieldIDs: ix.FieldIDs,
			Fragments: orEmpty(ix.Fragments), BuiltFrom: ix.Version, Files: orEmpty(ix.Files), Rows: ix.Rows, Bytes: ix.Bytes})
	}
	for i, f := range schema.Fields() {
		id := m.Schema.FieldIDs[i]
		cs := columnStatsJSON{Name: f.Name, FieldID: id, Type: f.Type.String()}
		if g := aggs[id]; g != nil {
			cs.NullCount = g.nulls
			cs.MinMaxFiles = g.has
			if g.has > 0 {
				cs.Min, cs.Max = formatStat(g.min, f.Type), formatStat(g.max, f.Type)
			}
		}
		in.Columns = append(in.Columns, cs)
	}
	return in
}

// formatStat renders a statistic in the column's terms (timestamps and dates as text).
func formatStat(v fragment.Value, dt arrow.DataType) string {
	switch v.Kind {
	case fragment.KindInt:
		switch t := dt.(type) {
		case *arrow.TimestampType:
			if f, err := t.GetToTimeFunc(); err == nil {
				return f(arrow.Timestamp(v.Int)).Format("2006-01-02 15:04:05.999999")
			}
		case *arrow.Date32Type:
			return arrow.Date32(v.Int).FormattedString()
		case *arrow.Date64Type:
			return arrow.Date64(v.Int).FormattedString()
		}
		return strconv.FormatInt(v.Int, 10)
	case fragment.KindUint:
		return strconv.FormatUint(v.Uint, 10)
	case fragment.KindFloat:
		return strconv.FormatFloat(v.Float, 'g', -1, 64)
	case fragment.KindString:
		return strconv.Quote(v.Str)
	case fragment.KindBinary:
		return fmt.Sprintf("%x", v.Str)
	case fragment.KindBool:
		return strconv.FormatBool(v.Bool)
	}
	return ""
}

func (a *app) printInspection(in *inspection) {
	pub := fmt.Sprintf("published version %d", in.Published)
	switch {
	case in.Published == 0:
		pub = "not published"
	case in.Published == in.Version:
		pub = "the published version"
	}
	if in.Aborted {
		pub = "aborted"
	}
	a.printf("Table %s, version %d (%s)\n", in.Table, in.Version, pub)
	if in.Aborted {
		a.printf("  note         prepared by a multi-table transaction that aborted: it counts as empty and\n")
		a.printf("               reads as version %d; shown below as stored\n", in.ReadsAs)
	}
	a.printf("  manifest     %s (crc32c %s)\n", in.ManifestKey, in.Checksum)
	tx := in.Transaction
	a.printf("  transaction  %s %s, read version %d, %s\n", tx.Operation, tx.ID, tx.ReadVersion, tx.Time.Format("2006-01-02 15:04:05 UTC"))
	if tx.Predicate != "" {
		a.printf("  predicate    %s\n", tx.Predicate)
	}
	a.printf("  rows         %s live (%s physical, %s deleted)\n", thousands(in.Rows.Live), thousands(in.Rows.Physical), thousands(in.Rows.Deleted))
	nfiles, ndv, dvBytes := 0, 0, int64(0)
	for _, f := range in.Fragments {
		nfiles += len(f.Files)
		if f.Deletion != nil {
			ndv++
			dvBytes += f.Deletion.Size
		}
	}
	a.printf("  storage      %s, %s (%s), %s (%s)\n",
		plural(len(in.Fragments), "fragment"), plural(nfiles, "data file"), humanBytes(in.DataBytes), plural(ndv, "deletion vector"), humanBytes(dvBytes))
	if len(in.Config) > 0 {
		keys := make([]string, 0, len(in.Config))
		for k := range in.Config {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			a.printf("  config       %s = %s\n", k, in.Config[k])
		}
	}

	a.printf("\nSchema and column statistics (over all data files, deletions included)\n")
	rows := [][]string{{"ID", "COLUMN", "TYPE", "NULLABLE", "NULLS", "MIN", "MAX"}}
	for i, c := range in.Columns {
		rows = append(rows, []string{fmt.Sprint(c.FieldID), c.Name, c.Type, fmt.Sprint(in.Schema[i].Nullable),
			thousands(c.NullCount), abbreviate(c.Min, 40), abbreviate(c.Max, 40)})
	}
	a.printGrid(rows, map[int]bool{0: true, 4: true})

	a.printf("\nFragments and data files\n")
	rows = [][]string{{"FRAGMENT", "ROWS", "LIVE", "DATA FILE", "SIZE", "BATCHES", "CODEC"}}
	for _, f := range in.Fragments {
		for j, df := range f.Files {
			id, phys, live := fmt.Sprint(f.ID), thousands(f.PhysicalRows), thousands(f.LiveRows)
			if j > 0 {
				id, phys, live = "", "", ""
			}
			rows = append(rows, []string{id, phys, live, df.Key, humanBytes(df.Size), thousands(int64(df.Batches)), df.Compression})
		}
	}
	a.printGrid(rows, map[int]bool{0: true, 1: true, 2: true, 4: true, 5: true})

	var dvRows [][]string
	for _, f := range in.Fragments {
		if f.Deletion != nil {
			dvRows = append(dvRows, []string{fmt.Sprint(f.ID), f.Deletion.Key, humanBytes(f.Deletion.Size), thousands(f.Deletion.Deleted)})
		}
	}
	a.printf("\nDeletion vectors\n")
	if len(dvRows) == 0 {
		a.printf("  none\n")
	} else {
		a.printGrid(append([][]string{{"FRAGMENT", "DELETION VECTOR", "SIZE", "DELETED ROWS"}}, dvRows...), map[int]bool{0: true, 2: true, 3: true})
	}

	a.printf("\nIndexes\n")
	if len(in.Indexes) == 0 {
		a.printf("  none\n")
		return
	}
	a.printIndexes(in.Indexes)
	rows = [][]string{{"INDEX", "SEGMENT", "FRAGMENTS", "SIZE", "OBJECTS"}}
	for _, sg := range in.IndexSegments {
		frags := make([]string, len(sg.Fragments))
		for i, f := range sg.Fragments {
			frags[i] = fmt.Sprint(f)
		}
		for j, key := range sg.Files {
			name, uuid, fr, size := sg.Name, sg.UUID, abbreviate(strings.Join(frags, ","), 30), humanBytes(sg.Bytes)
			if j > 0 {
				name, uuid, fr, size = "", "", "", ""
			}
			rows = append(rows, []string{name, uuid, fr, size, key})
		}
	}
	a.printf("\n")
	a.printGrid(rows, map[int]bool{3: true})
}

package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/spf13/cobra"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/wal"
)

// logEntries counts WAL entries: "1 log entry", "2 log entries".
func logEntries[N ~int | ~int64](n N) string {
	if n == 1 {
		return "1 log entry"
	}
	return thousands(int64(n)) + " log entries"
}

// generations counts generations: "1 generation", "3 generations".
func generations[N ~int | ~uint64](n N) string { return plural(n, "generation") }

func (a *app) walCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "wal",
		Short: "A table's write-ahead log: status, append through it, merge it, scan it",
		Long: `A table with a write-ahead log (WAL) takes appends as log entries, each acknowledged
once durable in the store: a small write costs one object put instead of a commit. Its
writer buffers the rows and flushes them as sealed generations; a merge commits the
flushed generations into the base table as one version, exactly once. Queries read the
base table, every generation not yet merged, and the log, so rows are visible once
acknowledged.

A table has N shards (table config shale.wal.shards; 'shale wal append' enables one on a
table without a WAL). Each shard has one writer at a time: opening a shard makes its
writer a new epoch and fences the previous one, in any process, whose next write fails.
Give each writing process its own shard.

A delete, update or overwrite refuses while rows are in the WAL (they would not apply to
them): merge it first.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown wal command %q (want status, append, merge or scan)", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return usagef("wal needs a command: status, append, merge or scan")
		},
	}
	cmd.AddCommand(a.walStatusCommand(), a.walAppendCommand(), a.walMergeCommand(), a.walScanCommand())
	return cmd
}

// walShardStatus is one shard's line of `shale wal status`.
type walShardStatus struct {
	Shard string `json:"shard"`
	// State is "active" (a writer claimed it), "unclaimed" (no writer yet) or "dropped"
	// (its shard manifest belongs to a dropped incarnation of the table: nothing of it
	// is read; the next writer starts it over).
	State           string `json:"state"`
	Epoch           uint64 `json:"epoch"`            // the writer epoch that owns the shard
	ManifestVersion uint64 `json:"manifest_version"` // the newest shard manifest's version
	Replay          string `json:"replay"`           // the replay position, epoch/position
	Sealed          uint64 `json:"sealed"`           // the highest flushed generation
	Merged          uint64 `json:"merged"`           // the merged watermark in the published version
	// PendingGenerations are the flushed generations above Merged, with their rows and bytes.
	PendingGenerations     int   `json:"pending_generations"`
	PendingGenerationRows  int64 `json:"pending_generation_rows"`
	PendingGenerationBytes int64 `json:"pending_generation_bytes"`
	// LogEntries are the entries above the replay position (acknowledged, not flushed yet),
	// with their rows and bytes.
	LogEntries int   `json:"log_entries"`
	LogRows    int64 `json:"log_rows"`
	LogBytes   int64 `json:"log_bytes"`
	// BacklogRows and BacklogBytes are everything not merged: pending generations plus log.
	BacklogRows  int64 `json:"backlog_rows"`
	BacklogBytes int64 `json:"backlog_bytes"`
	// OldestUnmerged is when the oldest unmerged rows became durable, as far as storage
	// tells: the flush time of the oldest pending generation (its rows arrived before it,
	// so the age is a lower bound: OldestIsLowerBound), else the oldest log entry's
	// modification time. Absent when nothing is unmerged.
	OldestUnmerged      *time.Time `json:"oldest_unmerged,omitempty"`
	OldestUnmergedAgeMS int64      `json:"oldest_unmerged_age_ms,omitempty"`
	OldestIsLowerBound  bool       `json:"oldest_is_lower_bound,omitempty"`
}

// readWALStatus reads every shard of t's WAL (its shard manifest and the entries above its
// replay position; with ages, also a LIST of the entries for their times) against t's
// published version.
func (a *app) readWALStatus(ctx context.Context, t *engine.Table, ages bool) ([]walShardStatus, error) {
	s := a.db.Store()
	m := t.Manifest()
	out := []walShardStatus{}
	now := time.Now()
	for i := range engine.WALShards(m.Config) {
		id := wal.ShardID(i)
		st := walShardStatus{Shard: id, State: "unclaimed", Merged: m.WALMerged[id]}
		v, err := wal.ReadShard(ctx, s, t.Name(), id, memory.DefaultAllocator)
		if errors.Is(err, wal.ErrNoShard) {
			out = append(out, st)
			continue
		}
		if err != nil {
			return nil, err
		}
		sm := v.Manifest
		st.Epoch, st.ManifestVersion, st.Replay, st.Sealed = sm.Epoch, sm.Version, sm.Replay.String(), sm.Sealed()
		if sm.Incarnation != "" && m.Incarnation != "" && sm.Incarnation != m.Incarnation {
			st.State = "dropped"
			v.Release()
			out = append(out, st)
			continue
		}
		st.State = "active"
		var oldest time.Time
		for _, g := range sm.Unmerged(st.Merged) {
			st.PendingGenerations++
			st.PendingGenerationRows += g.Rows
			st.PendingGenerationBytes += g.Bytes
			if oldest.IsZero() && g.FlushedAt > 0 {
				oldest, st.OldestIsLowerBound = time.UnixMilli(g.FlushedAt), true
			}
		}
		st.LogEntries, st.LogRows, st.LogBytes = len(v.Entries), v.Rows, v.Bytes
		if ages && oldest.IsZero() && len(v.Entries) > 0 {
			objs, err := s.List(ctx, wal.EntriesDir(t.Name(), id), 0)
			if err != nil {
				v.Release()
				return nil, fmt.Errorf("table %q WAL shard %s: list entries: %w", t.Name(), id, err)
			}
			keys := map[string]bool{}
			for _, e := range v.Entries {
				keys[e.Key] = true
			}
			for _, o := range objs {
				if keys[o.Key] && (oldest.IsZero() || o.ModTime.Before(oldest)) {
					oldest = o.ModTime
				}
			}
		}
		v.Release()
		st.BacklogRows = st.PendingGenerationRows + st.LogRows
		st.BacklogBytes = st.PendingGenerationBytes + st.LogBytes
		if !oldest.IsZero() {
			o := oldest.UTC()
			st.OldestUnmerged, st.OldestUnmergedAgeMS = &o, max(now.Sub(oldest).Milliseconds(), 0)
		}
		out = append(out, st)
	}
	return out, nil
}

// openWALTable opens table at its published version and checks that it has a WAL.
func (a *app) openWALTable(ctx context.Context, table string) (*engine.Table, error) {
	t, err := a.openTable(ctx, table)
	if err != nil {
		return nil, err
	}
	if engine.WALShards(t.Manifest().Config) == 0 {
		return nil, fmt.Errorf("table %q: %w; 'shale wal append FILE --table %s' enables one shard", table, engine.ErrNoWAL, table)
	}
	return t, nil
}

// shardFlag checks --shard against the table's shard count (negative values are usage
// errors before any I/O: see shardArg).
func shardFlag(t *engine.Table, shard int) error {
	n := engine.WALShards(t.Manifest().Config)
	if shard >= n {
		return fmt.Errorf("table %q: %w: --shard %d, the table has %s (0 to %d)", t.Name(), engine.ErrShardOutOfRange, shard, plural(n, "shard"), n-1)
	}
	return nil
}

// shardArg validates --shard before any I/O.
func shardArg(shard int) error {
	if shard < 0 {
		return usagef("--shard must be 0 or more (got %d)", shard)
	}
	return nil
}

func (a *app) walStatusCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "status TABLE",
		Short: "Each WAL shard's writer epoch, sealed and merged generations, backlog and its age",
		Long: `For each shard of the table's WAL: the writer epoch that owns it and its newest shard
manifest version; the sealed generation (the highest flushed) and the merged watermark
of the published version; the backlog not merged yet: pending generations (flushed, not
merged) and log entries above the replay position (acknowledged, not flushed), in rows
and bytes; and the age of the oldest unmerged rows (for a pending generation, since its
flush: a lower bound, its rows arrived before it; for log entries, since the oldest was
written). It reads every log entry above the replay position. status only reads.`,
		Example: `  shale wal status events
  shale wal status events --json`,
		Args: exactArgs("TABLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			t, err := a.openWALTable(ctx, args[0])
			if err != nil {
				return err
			}
			shards, err := a.readWALStatus(ctx, t, true)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(map[string]any{"table": t.Name(), "version": t.Version(), "shards": shards})
			}
			a.printf("%s: version %d, %s\n\n", t.Name(), t.Version(), plural(len(shards), "WAL shard"))
			grid := [][]string{{"SHARD", "STATE", "EPOCH", "MANIFEST", "SEALED", "MERGED", "PENDING", "LOG", "BACKLOG", "OLDEST UNMERGED"}}
			for _, s := range shards {
				oldest := "-"
				if s.OldestUnmerged != nil {
					oldest = (time.Duration(s.OldestUnmergedAgeMS) * time.Millisecond).Round(time.Second).String()
					if s.OldestIsLowerBound {
						oldest = "at least " + oldest
					}
				}
				grid = append(grid, []string{s.Shard, s.State, uitoa(s.Epoch), "v" + uitoa(s.ManifestVersion), uitoa(s.Sealed), uitoa(s.Merged),
					generations(s.PendingGenerations), logEntries(s.LogEntries),
					fmt.Sprintf("%s, %s", plural(s.BacklogRows, "row"), humanBytes(s.BacklogBytes)), oldest})
			}
			a.printGrid(grid, map[int]bool{2: true, 4: true, 5: true})
			return nil
		},
	}
}

// walAppendResult is what `shale wal append` did.
type walAppendResult struct {
	Table  string `json:"table"`
	File   string `json:"file"`
	Format string `json:"format"`
	Shard  int    `json:"shard"`
	Epoch  uint64 `json:"epoch"` // the writer epoch this command claimed the shard as
	// EnabledWAL: the table had no WAL; this command set shale.wal.shards=1 (as
	// ConfigVersion).
	EnabledWAL    bool   `json:"enabled_wal"`
	ConfigVersion uint64 `json:"config_version,omitempty"`
	Rows          int64  `json:"rows"`    // rows acknowledged (durable in the log)
	Entries       int    `json:"entries"` // log entries holding them
	// Sealed is the shard's sealed generation after the closing flush; Merged the merged
	// watermark of the published version (the rows are merged once Merged reaches Sealed).
	Sealed uint64 `json:"sealed"`
	Merged uint64 `json:"merged"`
	// FirstGeneration and LastGeneration are the generations holding the rows, as the
	// shard's manifest showed after the closing flush, and FlushedByEpoch the writer epoch
	// that flushed the last of them: another epoch's when a writer that took the shard
	// over (fencing this one) flushed them. All 0 when no generation holds them yet
	// (Unflushed: durable in the log, the shard's current writer flushes them) or when
	// they are merged already (Merged covers them).
	FirstGeneration uint64 `json:"first_generation,omitempty"`
	LastGeneration  uint64 `json:"last_generation,omitempty"`
	FlushedByEpoch  uint64 `json:"flushed_by_epoch,omitempty"`
	Unflushed       bool   `json:"unflushed,omitempty"`
	// ShardEpoch is the shard's writer epoch after the command (Epoch unless another
	// writer took the shard over).
	ShardEpoch uint64  `json:"shard_epoch"`
	ElapsedMS  int64   `json:"elapsed_ms"`
	RowsPerS   float64 `json:"rows_per_second"`
	elapsed    time.Duration
}

func (a *app) walAppendCommand() *cobra.Command {
	var table, format string
	var shard int
	cmd := &cobra.Command{
		Use:   "append FILE --table TABLE [--shard S]",
		Short: "Append a Parquet, Arrow IPC, CSV or JSON Lines file through a table's WAL",
		Long: `Appends the file's rows to the table through WAL shard --shard (default 0): each batch
of the file becomes a log entry, acknowledged once durable; at the end the writer
flushes them as a sealed generation and closes. The rows are read by queries at once;
'shale wal merge' commits them into the base table.

The file must have the table's columns, in order, with the same types (formats and
type rules as 'shale import'; the table must exist). A table without a WAL gets one
shard first (table config shale.wal.shards=1), and the command says so; --shard on
such a table is an error.

Opening the shard fences its current writer, in any process: give this command a shard
no database server is writing. Unlike import, an append through the WAL is not
idempotent: running it again appends the rows again. If it fails or is interrupted
midway, the rows acknowledged so far are durable and stay (they are flushed before it
exits, or replayed by the shard's next writer); the rest of the file is not appended.`,
		Example: `  shale wal append events-2024-06-01.jsonl --table events
  shale wal append more.parquet --table events --shard 2`,
		Args: exactArgs("FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := shardArg(shard); err != nil {
				return err
			}
			if format != "" {
				f, ok := normalizeFormat(format)
				if !ok {
					return usagef("unknown --format %q (want %s)", format, formatList)
				}
				format = f
			}
			if args[0] == stdinPath && format == "" {
				return usagef("wal append - reads standard input: it needs --format (%s)", formatList)
			}
			res, err := a.walAppend(cmd.Context(), args[0], table, shard, flagChanged(cmd.Flags(), "shard"), format)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(res)
			}
			from := filepath.Base(res.File)
			if res.File == stdinPath {
				from = stdinName
			}
			rate := ""
			if res.Rows >= minRateRows {
				rate = ", " + thousands(int64(res.RowsPerS)) + " rows/s"
			}
			a.printf("Appended %s to %s through WAL shard %d (writer epoch %d) from %s: %s%s, %s%s\n",
				plural(res.Rows, "row"), res.Table, res.Shard, res.Epoch, from, logEntries(res.Entries), res.whereFlushed(), seconds(res.elapsed), rate)
			if res.Merged < res.Sealed || res.Unflushed {
				a.printf("Queries read them from the WAL until they are merged: shale wal merge %s\n", res.Table)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&table, "table", "t", "", "table to append to (it must exist)")
	cmd.Flags().IntVar(&shard, "shard", 0, "WAL shard to write (0 to shale.wal.shards-1)")
	cmd.Flags().StringVar(&format, "format", "", "input format: "+formatList+" (default: from the extension)")
	_ = cmd.MarkFlagRequired("table")
	return cmd
}

// walAppend streams path into table's WAL shard. Errors: the table's and the file's (as
// import), engine.ErrShardOutOfRange, engine.ErrNoWAL (with --shard), wal errors
// (ErrFenced: another writer opened the shard meanwhile; ErrBacklog), store errors; a
// failure after some rows were acknowledged says how many.
func (a *app) walAppend(ctx context.Context, path, table string, shard int, shardSet bool, format string) (*walAppendResult, error) {
	start := time.Now()
	if err := checkTableName(table); err != nil {
		return nil, err
	}
	if format == "" {
		f, err := formatFromName(path)
		if err != nil {
			return nil, err
		}
		format = f
	}
	t, err := a.openTable(ctx, table)
	if err != nil {
		if errors.Is(err, manifest.ErrTableNotFound) {
			return nil, fmt.Errorf("%w (wal append needs an existing table: shale create or shale import makes one)", err)
		}
		return nil, err
	}
	res := &walAppendResult{Table: table, File: path, Format: format, Shard: shard}
	n := engine.WALShards(t.Manifest().Config)
	if n == 0 && shardSet {
		return nil, fmt.Errorf("table %q: %w: --shard %d names a shard of a table without one (leave --shard out to enable one shard)", table, engine.ErrNoWAL, shard)
	}
	if n > 0 {
		if err := shardFlag(t, shard); err != nil {
			return nil, err
		}
	}
	src, err := openSource(ctx, path, format, table, t.Schema(), memory.DefaultAllocator)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	pk, err := peek(src.rdr)
	if err != nil {
		pk.Release()
		return nil, (&progressReader{RecordReader: src.rdr, src: src}).Err()
	}
	defer pk.Release()
	if err := sameSchema(table, t.Schema(), pk.Schema()); err != nil {
		return nil, err
	}
	if n == 0 {
		enabled, cr, err := enableWAL(ctx, t)
		if err != nil {
			return nil, fmt.Errorf("table %q: enable the WAL (%s=1): %w", table, engine.ConfigWALShards, err)
		}
		if enabled {
			res.EnabledWAL, res.ConfigVersion = true, cr.Version
			fmt.Fprintf(a.stderr, "note: %s had no WAL: enabled one shard (%s=1, version %d)\n", table, engine.ConfigWALShards, cr.Version)
		}
	}
	w, err := t.WAL(ctx, shard)
	if err != nil {
		return nil, err
	}
	res.Epoch = w.Epoch()
	p := newProgress(a.stderr, fmt.Sprintf("appending to %s through WAL shard %d", table, shard), src.rows, src.size)
	rdr := &progressReader{RecordReader: pk, src: src, p: p}
	positions := map[wal.Position]bool{}
	var appendErr error
	var inFlight int64 // rows of the append whose outcome is unknown (wal.UnknownError)
	for rdr.Next() {
		rec := rdr.RecordBatch()
		if rec.NumRows() == 0 {
			continue
		}
		ack, err := w.Append(ctx, rec)
		if err != nil {
			appendErr = err
			var ue *wal.UnknownError
			if errors.As(err, &ue) {
				inFlight = rec.NumRows()
			}
			break
		}
		res.Rows += ack.Rows
		positions[ack.Position] = true
	}
	if appendErr == nil {
		appendErr = rdr.Err()
	}
	p.finish()
	res.Entries = len(positions)
	// Flush what was acknowledged and let the shard go, whatever happened (even after
	// Ctrl-C: the rows are durable already; flushing them spares the next writer a replay).
	closeErr := w.Close(context.WithoutCancel(ctx))
	acked := fmt.Sprintf("%s acknowledged before it (durable in the WAL", plural(res.Rows, "row"))
	unknown := ""
	if inFlight > 0 {
		unknown = fmt.Sprintf("; the next %s were being written when it stopped: they may be in the log, and if so the shard's next writer replays them (shale wal status shows the log)", plural(inFlight, "row"))
	}
	switch {
	case appendErr != nil && ctx.Err() != nil:
		return nil, &interruptedError{fmt.Sprintf("%s appended to %s through WAL shard %d and durable%s; the rest of %s was not appended", plural(res.Rows, "row"), table, shard, unknown, path), ctx.Err()}
	case appendErr != nil && errors.Is(appendErr, wal.ErrFenced):
		return nil, fmt.Errorf("%w (another writer opened WAL shard %d of %s meanwhile; %s, that writer flushes them); the rest of the file was not appended", appendErr, shard, table, acked)
	case appendErr != nil:
		return nil, fmt.Errorf("%w (%s%s)%s; the rest of the file was not appended", appendErr, acked, closeNote(closeErr), unknown)
	case closeErr != nil && !errors.Is(closeErr, wal.ErrFenced):
		return nil, fmt.Errorf("all %s are durable in WAL shard %d of %s, but the closing flush failed: %w (the shard's next writer replays them)", plural(res.Rows, "row"), shard, table, closeErr)
	}
	if sm, err := wal.LoadShard(ctx, a.db.Store(), table, wal.ShardID(shard)); err == nil {
		res.Sealed, res.ShardEpoch = sm.Sealed(), sm.Epoch
		res.locateRows(sm, positions)
	}
	if h, err := a.db.OpenTable(ctx, table); err == nil {
		res.Merged = h.Manifest().WALMerged[wal.ShardID(shard)]
	}
	res.elapsed = time.Since(start)
	res.ElapsedMS, res.RowsPerS = res.elapsed.Milliseconds(), perSecond(res.Rows, res.elapsed)
	return res, nil
}

// enableWALWait bounds how long enableWAL waits for a concurrent enabling of the WAL,
// committed before ours, to be published.
const enableWALWait = 10 * time.Second

// enableWAL sets shale.wal.shards=1 on t, which has no WAL, idempotently under
// concurrency: when another writer set the key meanwhile (a retryable conflict: the
// engine leaves the decision to the caller), it refreshes t and, once the table has a
// WAL (any shard count: shard 0 exists), goes on without setting it again (enabled
// false). A conflict that persists without a WAL appearing is returned.
func enableWAL(ctx context.Context, t *engine.Table) (enabled bool, cr engine.CommitResult, err error) {
	deadline := time.Now().Add(enableWALWait)
	for {
		cr, err = t.UpdateConfig(ctx, map[string]string{engine.ConfigWALShards: "1"}, nil)
		if err == nil {
			return true, cr, nil
		}
		if !errors.Is(err, manifest.ErrRetryable) || time.Now().After(deadline) {
			return false, cr, err
		}
		// The other writer's version is committed; its publish may lag by a moment.
		if rerr := t.Refresh(ctx); rerr != nil {
			return false, cr, errors.Join(err, rerr)
		}
		if engine.WALShards(t.Manifest().Config) > 0 {
			return false, engine.CommitResult{}, nil
		}
		select { // a short pause before planning on the published version again
		case <-ctx.Done():
			return false, cr, err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// locateRows finds the generations of sm that hold the entries at positions (the
// command's acknowledged appends). A generation holds the entries after the previous
// one's Covers up to its own; entries past the replay position are in no generation yet;
// entries at or before it that no listed generation covers are merged already.
func (r *walAppendResult) locateRows(sm *wal.ShardManifest, positions map[wal.Position]bool) {
	if len(positions) == 0 {
		return
	}
	var lo, hi wal.Position
	first := true
	for p := range positions {
		if first || p.Less(lo) {
			lo = p
		}
		if first || hi.Less(p) {
			hi = p
		}
		first = false
	}
	if sm.Replay.Less(hi) {
		r.Unflushed = true
		return
	}
	for _, g := range sm.Generations {
		if r.FirstGeneration == 0 && !g.Covers.Less(lo) {
			r.FirstGeneration = g.Generation
		}
		if !g.Covers.Less(hi) {
			r.LastGeneration, r.FlushedByEpoch = g.Generation, g.Epoch
			break
		}
	}
	if r.LastGeneration == 0 {
		r.FirstGeneration = 0 // merged (its generations are no longer listed)
	} else if r.FirstGeneration == 0 {
		r.FirstGeneration = r.LastGeneration // the first ones are merged already
	}
}

// whereFlushed says, after ", ", where the rows are: the generations holding them and,
// when another writer epoch flushed them, which. "" when there are none.
func (r *walAppendResult) whereFlushed() string {
	switch {
	case r.Rows == 0 || r.Entries == 0:
		return ""
	case r.Unflushed && r.ShardEpoch != r.Epoch:
		return fmt.Sprintf(", not flushed yet: writer epoch %d, which took the shard over, flushes them (they are durable in the log)", r.ShardEpoch)
	case r.Unflushed:
		return ", not flushed yet (durable in the log; the shard's next writer flushes them)"
	case r.LastGeneration == 0:
		return ", flushed and merged already"
	}
	s := fmt.Sprintf(", flushed as generation %d", r.LastGeneration)
	if r.FirstGeneration != r.LastGeneration {
		s = fmt.Sprintf(", flushed as generations %d to %d", r.FirstGeneration, r.LastGeneration)
	}
	if r.FlushedByEpoch != r.Epoch {
		s += fmt.Sprintf(" by writer epoch %d, which took the shard over", r.FlushedByEpoch)
	}
	return s
}

// closeNote says what the closing flush after a failed append did.
func closeNote(err error) string {
	if err == nil {
		return ", and flushed"
	}
	return "; the closing flush failed too: " + err.Error() + "; the shard's next writer replays them"
}

// walMergeResult is what `shale wal merge` did.
type walMergeResult struct {
	Table     string              `json:"table"`
	Committed bool                `json:"committed"` // a version was committed (false: nothing to merge)
	Version   uint64              `json:"version"`   // the version committed, or the table's version when nothing was merged
	Shards    []engine.ShardMerge `json:"shards"`    // one per shard merged
	Rows      int64               `json:"rows"`      // rows merged
	Bytes     int64               `json:"bytes"`     // bytes of their data files
	ElapsedMS int64               `json:"elapsed_ms"`
}

func (a *app) walMergeCommand() *cobra.Command {
	var shard int
	cmd := &cobra.Command{
		Use:   "merge TABLE [--shard S]",
		Short: "Commit the flushed WAL generations into the base table, exactly once",
		Long: `Commits every flushed generation above each shard's merged watermark (or only --shard's)
into the base table as one version: the generations' data files become fragments as
they are (nothing is rewritten) and the version records each shard's new watermark, so
the same generations are never merged twice, by a rerun or by a merger racing this one.
Rows still in a writer's log, not flushed yet, are not merged (the writer flushes them
on its own schedule; 'shale wal append' flushes before it exits).

A merge is maintenance: it commits briefly and publishes by fast-forward. If it dies
between its commit and its publish, 'shale recover' (or the next write) publishes it.`,
		Example: `  shale wal merge events
  shale wal merge events --shard 1 --json`,
		Args: exactArgs("TABLE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			start := time.Now()
			if err := shardArg(shard); err != nil {
				return err
			}
			if err := checkTableName(args[0]); err != nil {
				return err
			}
			t, err := a.openWALTable(ctx, args[0])
			if err != nil {
				if errors.Is(err, engine.ErrNoWAL) && flagChanged(cmd.Flags(), "shard") {
					return fmt.Errorf("%w (--shard %d names a shard of a table without a WAL)", err, shard)
				}
				return err
			}
			var opts engine.MergeWALOptions
			if flagChanged(cmd.Flags(), "shard") {
				if err := shardFlag(t, shard); err != nil {
					return err
				}
				opts.Shards = []int{shard}
			}
			mr, err := t.MergeWAL(ctx, opts)
			if err != nil {
				if engine.OutcomeOf(err) == engine.Unknown {
					return fmt.Errorf("%w (the merge may or may not have committed; 'shale recover %s' finds out and publishes it; merging again never merges twice)", err, args[0])
				}
				return err
			}
			res := walMergeResult{Table: args[0], Committed: len(mr.Shards) > 0, Version: mr.Version, Shards: mr.Shards}
			if res.Shards == nil {
				res.Shards = []engine.ShardMerge{}
			}
			for _, s := range res.Shards {
				res.Rows += s.Rows
				res.Bytes += s.Bytes
			}
			res.ElapsedMS = time.Since(start).Milliseconds()
			if a.jsonOut {
				return a.printJSON(res)
			}
			if !res.Committed {
				a.printf("Nothing to merge in %s (version %d): every flushed generation is merged; rows still in a writer's log are merged after it flushes them\n", res.Table, res.Version)
				return nil
			}
			gens := 0
			for _, s := range res.Shards {
				gens += s.Generations
			}
			a.printf("Merged %s (%s, %s) into %s: version %d, %s\n", generations(gens), plural(res.Rows, "row"), humanBytes(res.Bytes), res.Table, res.Version, seconds(time.Since(start)))
			for _, s := range res.Shards {
				span := fmt.Sprintf("generation %d", s.To)
				if s.Generations > 1 {
					span = fmt.Sprintf("generations %d–%d", s.From+1, s.To)
				}
				a.printf("  shard %s: %s, %s\n", s.Shard, span, plural(s.Rows, "row"))
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&shard, "shard", 0, "merge only this shard (default: every shard)")
	return cmd
}

// walScanRecord is what `shale wal scan` found of one shard in storage and published as
// a demand scan event (engine.Table.ScanWALDemand): the sealed generation with its writer
// epoch, the shard's running byte total and the sealed generation's flush time from the
// newest shard manifest, and the published version's merged watermark.
type walScanRecord struct {
	Table            string `json:"table"`
	IncarnationSince uint64 `json:"incarnation_since"` // the table incarnation's first version
	Shard            string `json:"shard"`
	WriterEpoch      uint64 `json:"writer_epoch"`  // the epoch of the newest shard manifest
	Sealed           uint64 `json:"sealed"`        // its sealed generation (0: none flushed)
	SealedBytes      uint64 `json:"sealed_bytes"`  // bytes of every generation 1 … Sealed
	FlushedAtMs      int64  `json:"flushed_at_ms"` // when Sealed was flushed, Unix ms (0: unknown)
	Merged           uint64 `json:"merged"`        // the merged watermark of the published version
	Pending          uint64 `json:"pending"`       // Sealed - Merged (generations)
	// Changed: publishing the event changed the shard's demand record in etcd (false: it
	// held as much already, or there is no catalog).
	Changed bool `json:"changed"`
}

func (a *app) walScanCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "scan [TABLE]",
		Short: "Re-read every WAL shard's state from storage and publish it as merge demand",
		Long: `Reads, for every table with a WAL (or TABLE), each shard's newest shard manifest (its
writer epoch, sealed generation, byte total, and when the sealed generation was flushed)
and the published version's merged watermark, and publishes them to the shard's demand
record in etcd as a scan event: the record is joined with it, never replaced, so a scan
can raise what a lost flush or merge event left behind and never lowers anything.
It prints each shard's pending generations (sealed - merged) and whether its record
changed.`,
		Example: `  shale wal scan
  shale wal scan events --json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usagef("%s takes at most one TABLE (got %d arguments)", cmd.Name(), len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var tables []string
			if len(args) == 1 {
				if _, err := a.openWALTable(ctx, args[0]); err != nil {
					return err
				}
				tables = []string{args[0]}
			} else {
				db, err := a.open(ctx)
				if err != nil {
					return err
				}
				if tables, err = db.Tables(ctx); err != nil {
					return err
				}
			}
			recs, err := a.scanWAL(ctx, tables)
			if err != nil {
				return err
			}
			published := a.db.Catalog() != nil
			if a.jsonOut {
				return a.printJSON(map[string]any{"records": recs, "published": published})
			}
			if len(recs) == 0 {
				a.printf("no table has a WAL shard with a writer yet\n")
				return nil
			}
			grid := [][]string{{"TABLE", "SHARD", "EPOCH", "SEALED", "MERGED", "PENDING", "SEALED BYTES", "SEALED FLUSHED", "RECORD"}}
			changed := 0
			for _, r := range recs {
				flushed := "-"
				if r.FlushedAtMs > 0 {
					flushed = time.UnixMilli(r.FlushedAtMs).UTC().Format(time.RFC3339)
				}
				rec := "unchanged"
				if r.Changed {
					rec, changed = "raised", changed+1
				}
				grid = append(grid, []string{r.Table, r.Shard, uitoa(r.WriterEpoch), uitoa(r.Sealed), uitoa(r.Merged), generations(r.Pending),
					humanBytes(int64(r.SealedBytes)), flushed, rec})
			}
			a.printGrid(grid, map[int]bool{2: true, 3: true, 4: true})
			if published {
				a.printf("published %s to etcd (%d raised a record)\n", plural(len(recs), "scan event"), changed)
			} else {
				a.printf("found %s (not published: no catalog)\n", plural(len(recs), "shard"))
			}
			return nil
		},
	}
}

// scanWAL re-reads and publishes (engine.Table.ScanWALDemand) every shard of every table
// with a WAL among tables, in table then shard order. A shard no writer claimed, or of a
// dropped incarnation, yields no record.
func (a *app) scanWAL(ctx context.Context, tables []string) ([]walScanRecord, error) {
	recs := []walScanRecord{}
	sort.Strings(tables)
	for _, name := range tables {
		t, err := a.openTable(ctx, name)
		if errors.Is(err, manifest.ErrTableNotFound) {
			continue // dropped since it was listed
		}
		if err != nil {
			return nil, err
		}
		if engine.WALShards(t.Manifest().Config) == 0 {
			continue
		}
		// DEMAND PUBLISH (issue 11 item 7): the one place `shale wal scan` publishes.
		events, changed, err := t.ScanWALDemand(ctx)
		if err != nil {
			return nil, err
		}
		for i, e := range events {
			r := walScanRecord{Table: name, IncarnationSince: e.IncarnationSince, Shard: e.Shard, WriterEpoch: e.WriterEpoch,
				Sealed: e.SealedThrough, SealedBytes: e.SealedBytesThrough, FlushedAtMs: e.FlushedAtMs, Changed: changed[i]}
			if e.MergedThrough != nil {
				r.Merged = *e.MergedThrough
			}
			if r.Sealed > r.Merged {
				r.Pending = r.Sealed - r.Merged
			}
			recs = append(recs, r)
		}
	}
	return recs, nil
}

// walBacklog is one table's WAL backlog in `shale status`.
type walBacklog struct {
	Shards             int   `json:"shards"`              // shards in the table's configuration
	PendingGenerations int   `json:"pending_generations"` // flushed generations not merged, over all shards
	LogRows            int64 `json:"log_rows"`            // rows above the replay positions (acknowledged, not flushed)
	BacklogRows        int64 `json:"backlog_rows"`        // rows not merged: pending generations plus log
	BacklogBytes       int64 `json:"backlog_bytes"`       // their bytes
}

// statusWAL reads the WAL backlog of every table with a WAL among names (nil for those
// without). A table that cannot be read is left out (the rest of status reports it).
func (a *app) statusWAL(ctx context.Context, names []string) (map[string]*walBacklog, error) {
	out := map[string]*walBacklog{}
	for _, name := range names {
		t, err := a.db.OpenTable(ctx, name)
		if err != nil {
			continue
		}
		n := engine.WALShards(t.Manifest().Config)
		if n == 0 {
			continue
		}
		shards, err := a.readWALStatus(ctx, t, false)
		if err != nil {
			return nil, fmt.Errorf("table %q: read its WAL: %w", name, err)
		}
		b := &walBacklog{Shards: n}
		for _, s := range shards {
			b.PendingGenerations += s.PendingGenerations
			b.LogRows += s.LogRows
			b.BacklogRows += s.BacklogRows
			b.BacklogBytes += s.BacklogBytes
		}
		out[name] = b
	}
	return out, nil
}

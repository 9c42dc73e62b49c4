package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/manifest/catalog"
	"github.com/shale-db/shale/recovery"
)

// statusSidecar is one pending recovery sidecar as status reports it.
type statusSidecar struct {
	Key       string    `json:"key"`
	Table     string    `json:"table,omitempty"` // "" when the sidecar cannot be read
	Operation string    `json:"operation,omitempty"`
	Kind      string    `json:"kind,omitempty"`
	Created   time.Time `json:"created,omitzero"`
	// Running: a live catalog hold carries the operation's id, so the operation is still
	// going and recovery leaves it alone.
	Running bool `json:"running"`
	// Exited: the operation's hold is live, but its holder is a process of this host
	// that has exited (catalog.HolderExited): not running, and 'shale recover' resolves
	// it at once.
	Exited bool   `json:"exited,omitempty"`
	Error  string `json:"error,omitempty"` // why the sidecar cannot be read
}

// statusRow is one table's line of `shale status`.
type statusRow struct {
	Table     string `json:"table"`
	Head      uint64 `json:"head"`
	Published uint64 `json:"published"`
	Drift     uint64 `json:"drift"`
	// PendingSidecars counts the table's sidecars whose operation is not running: work
	// for 'shale recover'.
	PendingSidecars int `json:"pending_sidecars"`
	// RunningOperations counts the table's sidecars whose operation holds a live hold.
	RunningOperations int            `json:"running_operations"`
	Holds             []catalog.Hold `json:"holds"` // live holds on the table
	State             string         `json:"state"`
	// WAL is the table's WAL backlog (absent for a table without a WAL).
	WAL *walBacklog `json:"wal,omitempty"`
	// Fault says why the published version cannot be read as the pointer names it (its
	// manifest is missing, corrupt, or not the object whose checksum the pointer
	// records); status then fails. 'shale verify' tells more.
	Fault string `json:"fault,omitempty"`
}

// maintenance is what status reads besides HEAD and the published pointer: the pending
// recovery sidecars (one LIST plus one GET each) and the live holds (one etcd range
// read). Both are reads only.
type maintenance struct {
	sidecars []statusSidecar
	holds    []catalog.Hold
}

func readMaintenance(ctx context.Context, db *engine.DB) (maintenance, error) {
	var m maintenance
	if cat := db.Catalog(); cat != nil {
		hs, err := cat.Holds(ctx, "")
		if err != nil {
			return m, err
		}
		m.holds = hs
	}
	scs, err := recovery.PendingSidecars(ctx, db.Store(), "")
	if err != nil {
		return m, err
	}
	for _, k := range scs {
		s := statusSidecar{Key: k.Key}
		if k.Err != nil {
			s.Error = k.Err.Error()
		} else {
			s.Table, s.Operation, s.Kind, s.Created = k.Sidecar.Table, k.Sidecar.OperationID, k.Sidecar.Kind, k.Sidecar.Created
			for _, h := range m.holds {
				if h.Table == s.Table && h.ID == s.Operation {
					s.Exited = catalog.HolderExited(h.Holder)
					s.Running = !s.Exited
				}
			}
		}
		m.sidecars = append(m.sidecars, s)
	}
	return m, nil
}

// checkPublished reads the published manifest of every table that has one, as readers
// do, against the checksum the pointer records (one etcd read and one GET per table),
// and returns the faults by table, each also as an error naming the table and the key.
func checkPublished(ctx context.Context, db *engine.DB, sts []engine.TableStatus) (map[string]string, error) {
	cat := db.Catalog()
	if cat == nil {
		return nil, nil
	}
	faults := map[string]string{}
	var errs []error
	for _, st := range sts {
		if st.Published == 0 {
			continue
		}
		p, _, err := cat.Get(ctx, st.Table)
		if errors.Is(err, catalog.ErrNoPointer) {
			continue // dropped since
		}
		if err != nil {
			return nil, err
		}
		if _, err := manifest.LoadVerified(ctx, db.Store(), st.Table, p.Version, p.Checksum); err != nil {
			if !errors.Is(err, manifest.ErrCorrupt) && !errors.Is(err, manifest.ErrVersionNotFound) {
				return nil, err
			}
			faults[st.Table] = fmt.Sprintf("published version %d does not read: %v", p.Version, err)
			errs = append(errs, fmt.Errorf("table %q: published version %d (%s): %w; run 'shale verify %s'", st.Table, p.Version, p.ManifestKey, err, st.Table))
		}
	}
	return faults, errors.Join(errs...)
}

// statusRows joins the tables' status with their sidecars, holds and faults, and words
// the state.
func statusRows(sts []engine.TableStatus, m maintenance, faults map[string]string) []statusRow {
	out := []statusRow{}
	for _, s := range sts {
		r := statusRow{Table: s.Table, Head: s.Head, Published: s.Published, Drift: s.Drift, Holds: []catalog.Hold{}, Fault: faults[s.Table]}
		for _, sc := range m.sidecars {
			switch {
			case sc.Table != s.Table:
			case sc.Running:
				r.RunningOperations++
			default:
				r.PendingSidecars++
			}
		}
		for _, h := range m.holds {
			if h.Table == s.Table {
				r.Holds = append(r.Holds, h)
			}
		}
		exited := 0
		for _, sc := range m.sidecars {
			if sc.Table == s.Table && sc.Exited {
				exited++
			}
		}
		var state []string
		switch {
		case s.Published > s.Head:
			state = append(state, "CORRUPT: HEAD below published")
		case r.Fault != "":
			state = append(state, "CORRUPT: the published manifest does not match its pointer (run 'shale verify')")
		case s.Published == 0:
			state = append(state, "never published")
		case s.Drift > 0:
			state = append(state, plural(s.Drift, "unpublished version"))
		case r.PendingSidecars == 0 && len(r.Holds) == 0:
			state = append(state, "in sync")
		default:
			state = append(state, "published = HEAD")
		}
		if r.PendingSidecars > 0 {
			state = append(state, plural(r.PendingSidecars, "recovery sidecar")+" pending")
		}
		if exited > 0 {
			state = append(state, plural(exited, "maintenance operation")+" whose process exited (run 'shale recover')")
		}
		if r.RunningOperations > 0 {
			state = append(state, plural(r.RunningOperations, "maintenance operation")+" running")
		}
		if len(r.Holds) > 0 {
			state = append(state, plural(len(r.Holds), "hold"))
		}
		r.State = strings.Join(state, "; ")
		out = append(out, r)
	}
	return out
}

func (a *app) statusCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Compare each table's HEAD with its published version; show pending recovery and holds",
		Long: `For every table in the store: HEAD (the highest committed version), the published
version readers are directed to (kept in etcd), and the drift between them. Drift means
a commit in flight or a publish that did not finish; HEAD below published is corruption
and makes the command fail after printing the rest.

Also listed: recovery sidecars (_recovery/*.json) left by maintenance operations, pending
(work for 'shale recover') or belonging to an operation still running (it holds a live
catalog hold; a hold whose holder is a process of this host that has exited does not
count: its operation is pending), and the live holds on each table: running
compactions, pinned readers, long writes; and for a table with a WAL, its backlog not
merged yet: shards, flushed generations to merge, rows still in the log (every log entry
above a replay position is read). Each published manifest is read and checked
against the checksum its pointer records; a mismatch is corruption. A table is "in
sync" only with no drift, no fault, no pending sidecar and no hold. status only reads.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			db, err := a.open(ctx)
			if err != nil {
				return err
			}
			sts, serr := db.Status(ctx)
			m, err := readMaintenance(ctx, db)
			if err != nil {
				return err
			}
			faults, ferr := checkPublished(ctx, db, sts)
			serr = errors.Join(serr, ferr)
			rows := statusRows(sts, m, faults)
			var names []string
			for _, r := range rows {
				if r.Fault == "" && r.Published <= r.Head {
					names = append(names, r.Table)
				}
			}
			backlogs, err := a.statusWAL(ctx, names)
			if err != nil {
				return err
			}
			for i := range rows {
				rows[i].WAL = backlogs[rows[i].Table]
			}
			if a.jsonOut {
				sidecars := m.sidecars
				if sidecars == nil {
					sidecars = []statusSidecar{}
				}
				if err := a.printJSON(map[string]any{"store": db.Store().URL(), "etcd": a.coord.Endpoints(),
					"tables": rows, "sidecars": sidecars}); err != nil {
					return err
				}
				return serr
			}
			a.printf("store: %s\netcd:  %s\n\n", db.Store().URL(), endpointList(a.coord.Endpoints()))
			if len(sts) == 0 {
				a.printf("no tables\n")
			} else {
				grid := [][]string{{"TABLE", "HEAD", "PUBLISHED", "DRIFT", "SIDECARS", "HOLDS", "WAL BACKLOG", "STATE"}}
				for _, r := range rows {
					wal := "-"
					if r.WAL != nil {
						wal = fmt.Sprintf("%s: %s, %s", plural(r.WAL.Shards, "shard"), generations(r.WAL.PendingGenerations), plural(r.WAL.LogRows, "log row"))
					}
					grid = append(grid, []string{r.Table, fmt.Sprint(r.Head), fmt.Sprint(r.Published), thousandsU(r.Drift),
						thousands(int64(r.PendingSidecars)), thousands(int64(len(r.Holds))), wal, r.State})
				}
				a.printGrid(grid, map[int]bool{1: true, 2: true, 3: true, 4: true, 5: true})
			}
			a.printMaintenance(m, time.Now())
			return serr
		},
	}
}

// printMaintenance lists the live holds and the sidecars, with what to do about pending ones.
func (a *app) printMaintenance(m maintenance, now time.Time) {
	if len(m.holds) > 0 {
		a.printf("\nholds:\n")
		for _, h := range m.holds {
			holder := "holder " + h.Holder
			if catalog.HolderExited(h.Holder) {
				holder += ", which has exited: the hold goes when its lease expires, within " + catalog.DefaultHoldTTL.String()
			}
			a.printf("  %s: %s %s keeps version %d and up, since %s ago (%s)\n",
				h.Table, h.Kind, h.ID, h.Version, now.Sub(h.Started).Round(time.Second), holder)
		}
	}
	if len(m.sidecars) == 0 {
		return
	}
	a.printf("\nrecovery sidecars:\n")
	pending := map[string]bool{}
	for _, s := range m.sidecars {
		switch {
		case s.Error != "":
			a.printf("  %s: unreadable (%s)\n", s.Key, s.Error)
			pending[""] = true
		case s.Running:
			a.printf("  %s: %s %s %s, running (its hold is live)\n", s.Table, s.Kind, s.Operation, s.Key)
		case s.Exited:
			a.printf("  %s: %s %s %s, pending: its process exited\n", s.Table, s.Kind, s.Operation, s.Key)
			pending[s.Table] = true
		default:
			a.printf("  %s: %s %s %s, pending since %s ago\n", s.Table, s.Kind, s.Operation, s.Key, now.Sub(s.Created).Round(time.Second))
			pending[s.Table] = true
		}
	}
	switch {
	case len(pending) == 1 && !pending[""]:
		for t := range pending {
			a.printf("run 'shale recover %s' to resolve them\n", t)
		}
	case len(pending) > 0:
		a.printf("run 'shale recover' to resolve them\n")
	}
}

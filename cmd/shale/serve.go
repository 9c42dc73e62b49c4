package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/shale-db/shale/serve"
	"github.com/shale-db/shale/serve/admin"
	"github.com/shale-db/shale/serve/plan"
	"github.com/shale-db/shale/serve/state"
)

const serveLong = `Run the maintenance sidecar: merge WAL backlog, compact small fragments, build stale
indexes, recover crashed operations and publish committed maintenance, with nobody running
commands. Start it beside the writers; start several on one etcd to share the work.

Every 'shale serve' process is an executor with a heartbeat (an etcd lease) advertising
its capacity (--slots, --memory); one of them, chosen by etcd election, is the planner:
every pass it reads each table's demand and shape, decides what to run where (shale why
TABLE tells why a table is not worked on) and places it with one guarded etcd
transaction. When a process dies its work is released within --lease-ttl and another
takes over the planning. SIGTERM (or Ctrl-C) drains: no new work, running work finishes
or is handed back, the lease is released.

--once plans one pass, runs the work it placed on this process and exits (for cron and
tests; it refuses while another serve process plans).

The planner-wide settings (--pass-interval, --lease-ttl, --idle-timeout,
--max-placements and the default policy of a --config file) are stored in etcd by the
first process; a process started with different ones exits with an error naming both,
unless --replace-config. After a replace, the leading process follows the stored pass
interval, max placements and default policy from its next pass; a new lease TTL or idle
timeout applies to processes started afterwards.

--config FILE is JSON with any of: pass_interval, lease_ttl, idle_timeout (Go durations
such as "5s"), max_placements, slots ({"merge_wal": 2, …}), memory (bytes), id, listen,
and policy (min_generations, critical_generations, max_age_ms, max_turn_wait_ms,
min_small_fragments, min_uncovered, max_consecutive_turns, max_attempts_before_hold).
Flags given on the command line override the file.`

// serveFlags are the process's knobs.
type serveFlags struct {
	once          bool
	listen        string
	id            string
	slots         string
	memory        string
	passInterval  time.Duration
	leaseTTL      time.Duration
	idleTimeout   time.Duration
	maxPlacements int
	config        string
	replaceConfig bool
	drainTimeout  time.Duration
}

// serveFile is the --config file.
type serveFile struct {
	PassInterval  string          `json:"pass_interval"`
	LeaseTTL      string          `json:"lease_ttl"`
	IdleTimeout   string          `json:"idle_timeout"`
	MaxPlacements int             `json:"max_placements"`
	Slots         map[string]int  `json:"slots"`
	Memory        int64           `json:"memory"`
	ID            string          `json:"id"`
	Listen        string          `json:"listen"`
	Policy        json.RawMessage `json:"policy"`
}

func (a *app) serveCommand() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the maintenance sidecar (merge, compact, index, recover, publish)",
		Long:  serveLong,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown serve command %q (want status, policy, retry, or no argument to run)", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, err := f.options(cmd.Flags())
			if err != nil {
				return err
			}
			return a.runServe(cmd.Context(), f, opts)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.once, "once", false, "plan one pass, run the work it placed here, then exit")
	fl.StringVar(&f.listen, "listen", "", "admin endpoint address host:port (/metrics, /healthz, /v1/status, /v1/tables/NAME)")
	fl.StringVar(&f.id, "id", "", "executor id, unique among live processes (default host-pid-random)")
	fl.StringVar(&f.slots, "slots", "", "work slots per kind, KIND=N,... (kinds: "+plan.KindList()+"; default 1 each)")
	fl.StringVar(&f.memory, "memory", "1GiB", "memory budget the planner reserves work against (bytes, or with KB, MB, GB, KiB, MiB, GiB)")
	fl.DurationVar(&f.passInterval, "pass-interval", state.DefaultPassInterval, "how often the planner plans (it also plans when work is released)")
	fl.DurationVar(&f.leaseTTL, "lease-ttl", state.DefaultLeaseTTL, "executor lease: a dead process's work is released within it (whole seconds, at least 2s)")
	fl.DurationVar(&f.idleTimeout, "idle-timeout", state.DefaultIdleTimeout, "cancel work that completes no storage request for this long (it is placed again)")
	fl.IntVar(&f.maxPlacements, "max-placements", plan.DefaultMaxPlacements, "placements per planning pass")
	fl.StringVar(&f.config, "config", "", "JSON file of settings (see above); flags override it")
	fl.BoolVar(&f.replaceConfig, "replace-config", false, "overwrite the planner-wide settings stored in etcd with this process's")
	fl.DurationVar(&f.drainTimeout, "drain-timeout", time.Minute, "on SIGTERM, how long running work may finish before it is handed back")
	cmd.AddCommand(a.serveStatusCommand(), a.servePolicyCommand(), a.serveRetryCommand())
	return cmd
}

// options builds serve.Options from the config file and the flags (flags win). Every
// bad value is a usage error.
func (f *serveFlags) options(fs *pflag.FlagSet) (serve.Options, error) {
	var o serve.Options
	cfg := state.Config{PassInterval: f.passInterval, LeaseTTL: f.leaseTTL, IdleTimeout: f.idleTimeout, MaxPlacements: f.maxPlacements}
	memory, slots := f.memory, f.slots
	o.ID, o.Addr = f.id, f.listen
	if f.config != "" {
		b, err := os.ReadFile(f.config)
		if err != nil {
			return o, usagef("--config: %v", err)
		}
		var file serveFile
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&file); err != nil {
			return o, usagef("--config %s: %v", f.config, err)
		}
		durs := []struct {
			flag, val string
			dst       *time.Duration
		}{{"pass-interval", file.PassInterval, &cfg.PassInterval}, {"lease-ttl", file.LeaseTTL, &cfg.LeaseTTL}, {"idle-timeout", file.IdleTimeout, &cfg.IdleTimeout}}
		for _, d := range durs {
			if d.val == "" || flagChanged(fs, d.flag) {
				continue
			}
			v, err := time.ParseDuration(d.val)
			if err != nil {
				return o, usagef("--config %s: %s: %v", f.config, strings.ReplaceAll(d.flag, "-", "_"), err)
			}
			*d.dst = v
		}
		if file.MaxPlacements != 0 && !flagChanged(fs, "max-placements") {
			cfg.MaxPlacements = file.MaxPlacements
		}
		if file.Memory != 0 && !flagChanged(fs, "memory") {
			memory = strconv.FormatInt(file.Memory, 10)
		}
		if len(file.Slots) > 0 && !flagChanged(fs, "slots") {
			var parts []string
			for k, n := range file.Slots {
				parts = append(parts, fmt.Sprintf("%s=%d", k, n))
			}
			sort.Strings(parts)
			slots = strings.Join(parts, ",")
		}
		if file.ID != "" && !flagChanged(fs, "id") {
			o.ID = file.ID
		}
		if file.Listen != "" && !flagChanged(fs, "listen") {
			o.Addr = file.Listen
		}
		if len(file.Policy) > 0 {
			p, err := state.ParsePolicy(file.Policy)
			if err != nil {
				return o, usagef("--config %s: policy: %v", f.config, err)
			}
			cfg.Policy = p
		}
	}
	for name, d := range map[string]time.Duration{"pass-interval": cfg.PassInterval, "lease-ttl": cfg.LeaseTTL, "idle-timeout": cfg.IdleTimeout} {
		if d <= 0 {
			return o, usagef("--%s %s: must be positive", name, d)
		}
	}
	if cfg.MaxPlacements <= 0 {
		return o, usagef("--max-placements %d: must be at least 1", cfg.MaxPlacements)
	}
	if err := cfg.Validate(); err != nil {
		return o, usagef("%v", err)
	}
	if f.drainTimeout < 0 {
		return o, usagef("--drain-timeout %s: must not be negative", f.drainTimeout)
	}
	n, err := parseBytes(memory)
	if err != nil || n <= 0 {
		return o, usagef("--memory %q: want a positive size such as 512MiB or 2GB", memory)
	}
	o.Bytes = n
	if slots != "" {
		o.Slots = map[plan.Kind]int{}
		for _, k := range plan.Kinds {
			o.Slots[k] = 1
		}
		for _, part := range strings.Split(slots, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if !ok || err != nil || n < 0 {
				return o, usagef("--slots %q: %q is not KIND=N with N >= 0", slots, part)
			}
			kind := plan.Kind(strings.TrimSpace(k))
			if !knownKind(kind) {
				return o, usagef("--slots %q: unknown kind %q (want %s)", slots, k, plan.KindList())
			}
			o.Slots[kind] = n
		}
	}
	if strings.ContainsAny(o.ID, "/ \t\n") {
		return o, usagef("--id %q: no '/' or spaces", o.ID)
	}
	o.Config = cfg
	o.ReplaceConfig = f.replaceConfig
	return o, nil
}

func knownKind(k plan.Kind) bool {
	for _, x := range plan.Kinds {
		if x == k {
			return true
		}
	}
	return false
}

// parseBytes parses a size: 1073741824, 512MiB, 2GB, 64 KiB.
func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, err
	}
	if v*float64(mult) > 1<<62 {
		return 0, fmt.Errorf("too large")
	}
	return int64(v * float64(mult)), nil
}

// serveReport is `shale serve --once --json`'s object.
type serveReport struct {
	Executor   string           `json:"executor"`
	Placed     []servePlacedRow `json:"placed"`
	Skips      []serveSkipRow   `json:"skips"`
	Executions []serveExecRow   `json:"executions"`
	Refused    int              `json:"refused"`
	ElapsedMS  int64            `json:"elapsed_ms"`
	Failed     int              `json:"failed"`
}

type servePlacedRow struct {
	Table    string `json:"table"`
	Kind     string `json:"kind"`
	Executor string `json:"executor"`
	ID       string `json:"id"`
}

type serveExecRow struct {
	Table     string `json:"table"`
	Kind      string `json:"kind"`
	Executor  string `json:"executor"`
	ID        string `json:"id"`
	Phase     string `json:"phase"`
	Error     string `json:"error,omitempty"`
	ElapsedMS int64  `json:"elapsed_ms"`
}

type serveSkipRow struct {
	Table  string `json:"table"`
	Kind   string `json:"kind"`
	Reason string `json:"reason"`
	Detail string `json:"detail,omitempty"`
}

func (a *app) runServe(ctx context.Context, f serveFlags, opts serve.Options) error {
	db, err := a.open(ctx)
	if err != nil {
		return err
	}
	level := slog.LevelInfo
	if a.jsonOut {
		level = slog.LevelWarn
	}
	opts.Logger = slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: level}))
	metrics := admin.NewMetrics()
	opts.Metrics = metrics
	s, err := serve.New(ctx, db, opts)
	if err != nil {
		return err
	}
	if f.listen != "" && !f.once {
		// The admin endpoint listens before the executor registers, so that the address it
		// advertises answers (":0" picks a port: the advertised one is the real one).
		srv, err := admin.NewServer(f.listen, s, metrics, opts.Logger)
		if err != nil {
			return fmt.Errorf("--listen %s: %w", f.listen, err)
		}
		defer srv.Close(context.Background())
		s.SetAddr(srv.Addr())
		opts.Logger.Info("serve: admin endpoint", "addr", srv.Addr())
	}
	if !f.once {
		return serveError(s.Run(ctx, f.drainTimeout))
	}
	start := time.Now()
	res, err := s.Once(ctx)
	if err != nil {
		return serveError(err)
	}
	rep := serveReport{Executor: s.ID(), Placed: []servePlacedRow{}, Skips: []serveSkipRow{}, Executions: []serveExecRow{},
		Refused: res.Pass.Refused, ElapsedMS: time.Since(start).Milliseconds()}
	for _, p := range res.Pass.Placed {
		rep.Placed = append(rep.Placed, servePlacedRow{Table: p.Table, Kind: string(p.Kind), Executor: p.Executor, ID: p.ID})
	}
	for _, sk := range res.Pass.Output.Skips {
		if sk.Reason != plan.SkipNoWork {
			rep.Skips = append(rep.Skips, serveSkipRow{Table: sk.Table, Kind: string(sk.Kind), Reason: string(sk.Reason), Detail: sk.Detail})
		}
	}
	for _, e := range res.Executions {
		row := serveExecRow{Table: e.Assignment.Table, Kind: string(e.Assignment.Kind), Executor: e.Assignment.Executor, ID: e.Assignment.ID,
			Phase: e.Phase, ElapsedMS: e.Elapsed.Milliseconds()}
		if row.Phase == "" {
			row.Phase = "lost" // released (its lease expired) before it was bound
		}
		if e.Err != nil {
			row.Error = e.Err.Error()
			rep.Failed++
		}
		rep.Executions = append(rep.Executions, row)
	}
	if a.jsonOut {
		if err := a.printJSON(rep); err != nil {
			return err
		}
	} else {
		if len(rep.Placed) == 0 {
			a.printf("nothing placed (%s)\n", plural(len(rep.Skips), "skipped unit"))
		}
		for _, e := range rep.Executions {
			if e.Error != "" {
				a.printf("%s %s: %s after %s: %s\n", e.Kind, e.Table, e.Phase, seconds(time.Duration(e.ElapsedMS)*time.Millisecond), e.Error)
			} else {
				a.printf("%s %s: %s in %s\n", e.Kind, e.Table, e.Phase, seconds(time.Duration(e.ElapsedMS)*time.Millisecond))
			}
		}
		for _, p := range rep.Placed {
			if p.Executor != rep.Executor {
				a.printf("%s %s: placed on executor %s\n", p.Kind, p.Table, p.Executor)
			}
		}
		for _, sk := range rep.Skips {
			a.printf("%s %s: not placed: %s\n", sk.Kind, sk.Table, sk.Reason)
		}
	}
	if rep.Failed > 0 {
		return fmt.Errorf("%s of %d failed (the failure ledger holds them; 'shale why TABLE' shows it)", plural(rep.Failed, "execution"), len(rep.Executions))
	}
	return nil
}

// serveError words the runtime's start-up refusals for the command line.
func serveError(err error) error {
	switch {
	case errors.Is(err, state.ErrConfigMismatch):
		return fmt.Errorf("%w; --replace-config overwrites the stored settings (every serve process then needs them)", err)
	case errors.Is(err, state.ErrExecutorExists):
		return fmt.Errorf("%w: a live serve process has this --id; give each process its own", err)
	}
	return err
}

func (a *app) serveStatusCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "status [TABLE]",
		Short: "The serve processes, their assignments and the planner; or one table's explanation",
		Long: `Without TABLE: the live serve executors (capacity, work placed on them), every
assignment and the current planner, read from etcd. With TABLE: what 'shale why TABLE'
prints.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				return a.why(cmd.Context(), args[0])
			}
			db, err := a.open(cmd.Context())
			if err != nil {
				return err
			}
			st := serve.StateOf(db)
			if st == nil {
				return errors.New("serve status needs etcd: the store has no catalog yet (nothing was written to it)")
			}
			status, err := serve.ReadStatus(cmd.Context(), st)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(status)
			}
			if status.Leader == "" {
				a.printf("planner: none\n")
			} else {
				a.printf("planner: %s\n", status.Leader)
			}
			a.printf("%s\n", plural(len(status.Executors), "executor"))
			for _, e := range status.Executors {
				a.printf("  %s  %s  slots %v  memory %s  assignments %d  started %s\n", e.ID, e.Addr, e.Slots, humanBytes(e.Bytes), e.Running,
					e.Started.UTC().Format(time.RFC3339))
			}
			a.printf("%s\n", plural(len(status.Assignments), "assignment"))
			for _, x := range status.Assignments {
				a.printf("  %s %s on %s: %s since %s, progress %d\n", x.Kind, x.Table, x.Executor, x.State, x.PlacedAt.UTC().Format(time.RFC3339), x.Progress)
			}
			return nil
		},
	}
}

func (a *app) whyCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "why TABLE",
		Short: "Why a table is or is not being worked on by shale serve right now",
		Long: `Plans a pass as the serve planner would now (demand, the table's shape, policy,
executors, assignments, failure ledger) and tells what would run next on TABLE, or the
named reason nothing will (write_turn_held, backoff, needs_attention, no_capacity, …),
with each kind's score and class.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return a.why(cmd.Context(), args[0]) },
	}
}

func (a *app) why(ctx context.Context, table string) error {
	if err := checkTableName(table); err != nil {
		return err
	}
	db, err := a.open(ctx)
	if err != nil {
		return err
	}
	rep, err := serve.Explain(ctx, db, table)
	if errors.Is(err, serve.ErrNoCatalog) {
		return fmt.Errorf("table %q: %w (nothing was written to this store)", table, serve.ErrTableNotFound)
	}
	if err != nil {
		return err
	}
	if a.jsonOut {
		return a.printJSON(rep)
	}
	if rep.NoExecutors {
		// Without an executor the reasons below (below_threshold, no_capacity) describe
		// what a pass would decide, not what any process is doing.
		a.printf("no shale serve process is running: nothing is placed until one starts (shale serve)\n")
	}
	if rep.Next != "" {
		a.printf("%s: next: %s\n", table, rep.Next)
	} else {
		a.printf("%s: nothing will run now: %s\n", table, rep.Reason)
	}
	for _, x := range rep.Assignments {
		a.printf("  %s: %s on executor %s (progress %d)\n", x.Kind, x.State, x.Executor, x.Progress)
	}
	units := map[plan.Kind]plan.Unit{}
	for _, u := range rep.Units {
		units[u.Kind] = u
	}
	if u, ok := units[plan.Kind(rep.Next)]; ok {
		// The kind a pass would place has no skip: give it its line too.
		a.printf("  %s: next (class %s, score %.2f, %s)\n", u.Kind, admin.ClassName(u.Class), u.Score, u.Reason)
	}
	for _, sk := range rep.Skips {
		line := fmt.Sprintf("  %s: %s", sk.Kind, sk.Reason)
		if u, ok := units[sk.Kind]; ok {
			line += fmt.Sprintf(" (class %s, score %.2f, %s)", admin.ClassName(u.Class), u.Score, u.Reason)
		}
		if sk.Detail != "" {
			line += ": " + sk.Detail
		}
		if !sk.RetryAt.IsZero() {
			line += " until " + sk.RetryAt.UTC().Format(time.RFC3339)
		}
		a.printf("%s\n", line)
	}
	for k, f := range rep.Failures {
		a.printf("  %s failed %s (%s), last %s: %s\n", k, plural(f.Attempts, "time"), f.Class, f.LastFailure.UTC().Format(time.RFC3339), f.LastError)
	}
	return nil
}

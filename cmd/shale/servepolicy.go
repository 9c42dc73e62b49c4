package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/serve"
	"github.com/shale-db/shale/serve/admin"
	"github.com/shale-db/shale/serve/plan"
	"github.com/shale-db/shale/serve/state"
)

// policyKnob is one plan.Policy knob as `shale serve policy --set` names it.
type policyKnob struct {
	name  string
	show  func(p plan.Policy) string
	set   func(p *plan.Policy, v string) error // v is never "default"
	clear func(p *plan.Policy)
	isSet func(p plan.Policy) bool
}

// policyKnobs are the knobs in their documented order (docs/operations.md).
var policyKnobs = []policyKnob{
	{"paused", func(p plan.Policy) string { return strconv.FormatBool(p.Paused) },
		func(p *plan.Policy, v string) (err error) { p.Paused, err = strconv.ParseBool(v); return err },
		func(p *plan.Policy) { p.Paused = false }, func(p plan.Policy) bool { return p.Paused }},
	uintKnob("min_generations", func(p *plan.Policy) *uint64 { return &p.MinGenerations }),
	uintKnob("critical_generations", func(p *plan.Policy) *uint64 { return &p.CriticalGenerations }),
	durKnob("max_age", func(p *plan.Policy) *time.Duration { return &p.MaxAge }),
	durKnob("max_turn_wait", func(p *plan.Policy) *time.Duration { return &p.MaxTurnWait }),
	intKnob("min_small_fragments", func(p *plan.Policy) *int { return &p.MinSmallFragments }),
	intKnob("min_uncovered", func(p *plan.Policy) *int { return &p.MinUncovered }),
	intKnob("max_consecutive_turns", func(p *plan.Policy) *int { return &p.MaxConsecutiveTurns }),
	intKnob("max_attempts_before_hold", func(p *plan.Policy) *int { return &p.MaxAttemptsBeforeHold }),
}

func uintKnob(name string, f func(*plan.Policy) *uint64) policyKnob {
	return policyKnob{name, func(p plan.Policy) string { return strconv.FormatUint(*f(&p), 10) },
		func(p *plan.Policy, v string) error {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil || n == 0 {
				return fmt.Errorf("want a whole number of at least 1")
			}
			*f(p) = n
			return nil
		},
		func(p *plan.Policy) { *f(p) = 0 }, func(p plan.Policy) bool { return *f(&p) != 0 }}
}

func intKnob(name string, f func(*plan.Policy) *int) policyKnob {
	return policyKnob{name, func(p plan.Policy) string { return strconv.Itoa(*f(&p)) },
		func(p *plan.Policy, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return fmt.Errorf("want a whole number of at least 1")
			}
			*f(p) = n
			return nil
		},
		func(p *plan.Policy) { *f(p) = 0 }, func(p plan.Policy) bool { return *f(&p) > 0 }}
}

func durKnob(name string, f func(*plan.Policy) *time.Duration) policyKnob {
	return policyKnob{name, func(p plan.Policy) string { return f(&p).String() },
		func(p *plan.Policy, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d < time.Millisecond || d%time.Millisecond != 0 {
				return fmt.Errorf("want a duration such as 90s or 2h, a whole number of milliseconds, at least 1ms")
			}
			*f(p) = d
			return nil
		},
		func(p *plan.Policy) { *f(p) = 0 }, func(p plan.Policy) bool { return *f(&p) > 0 }}
}

func policyKnobNames() string {
	var s []string
	for _, k := range policyKnobs {
		s = append(s, k.name)
	}
	return strings.Join(s, ", ")
}

// policyChange is one parsed --set pair.
type policyChange struct {
	knob  policyKnob
	value string // "default" clears the knob
}

// parsePolicySet parses --set's KEY=VALUE pairs, checking every value (a usage error
// names the first bad one); applying them cannot fail.
func parsePolicySet(pairs []string) ([]policyChange, error) {
	var out []policyChange
	for _, pair := range pairs {
		k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			return nil, usagef("--set %q: want KEY=VALUE (keys: %s)", pair, policyKnobNames())
		}
		i := slices.IndexFunc(policyKnobs, func(x policyKnob) bool { return x.name == k })
		if i < 0 {
			return nil, usagef("--set %q: unknown policy knob %q (want %s)", pair, k, policyKnobNames())
		}
		if v != "default" {
			var scratch plan.Policy
			if err := policyKnobs[i].set(&scratch, v); err != nil {
				return nil, usagef("--set %s=%s: %v, or default", k, v, err)
			}
		}
		out = append(out, policyChange{policyKnobs[i], v})
	}
	return out, nil
}

func applyPolicySet(p plan.Policy, changes []policyChange) plan.Policy {
	for _, c := range changes {
		if c.value == "default" {
			c.knob.clear(&p)
		} else {
			_ = c.knob.set(&p, c.value) // checked by parsePolicySet
		}
	}
	return p
}

// servePolicyReport is `shale serve policy TABLE --json`'s object.
type servePolicyReport struct {
	Table    string           `json:"table"`
	Policy   admin.PolicyJSON `json:"policy"`   // in force: stored knobs over the defaults
	Stored   json.RawMessage  `json:"stored"`   // the knobs stored for the table ({} when none), as stored
	Defaults admin.PolicyJSON `json:"defaults"` // what the table has without stored knobs
}

// serveTable checks that table is a table of the store and returns the serve state.
// A store without a catalog has no tables: not found, as in `shale why`.
func (a *app) serveTable(ctx context.Context, table string) (*state.State, error) {
	if err := checkTableName(table); err != nil {
		return nil, err
	}
	db, err := a.open(ctx)
	if err != nil {
		return nil, err
	}
	notFound := fmt.Errorf("%w: %q is not a table of this store", manifest.ErrTableNotFound, table)
	st := serve.StateOf(db)
	if st == nil {
		return nil, notFound
	}
	names, err := db.Tables(ctx)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(names, table) {
		return nil, notFound
	}
	return st, nil
}

func (a *app) servePolicyCommand() *cobra.Command {
	var set []string
	var reset bool
	cmd := &cobra.Command{
		Use:   "policy TABLE",
		Short: "Show or change a table's serve policy (thresholds, fairness, paused)",
		Long: `Without flags: the policy shale serve applies to TABLE, knob by knob, with the
default of each and which ones are stored for the table.

--set KEY=VALUE[,KEY=VALUE...] stores knobs for TABLE, merged into what is stored (the
other stored knobs stay); VALUE default removes a knob. Keys: ` + policyKnobNames() + `;
max_age and max_turn_wait are durations (90s, 2h), paused is true or false, the others
whole numbers of at least 1. --reset removes every stored knob: the table takes the
defaults again. The next planning pass applies the change; nothing restarts.

The defaults are the 'policy' of the planner-wide config (serve --config) over the
built-in ones. docs/operations.md describes each knob.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			changes, err := parsePolicySet(set)
			if err != nil {
				return err
			}
			if reset && len(set) > 0 {
				return usagef("--set and --reset together: reset first, then set")
			}
			ctx, table := cmd.Context(), args[0]
			st, err := a.serveTable(ctx, table)
			if err != nil {
				return err
			}
			var stored plan.Policy
			switch {
			case reset:
				if err := st.DeletePolicy(ctx, table); err != nil {
					return fmt.Errorf("reset policy of table %q: %w", table, err)
				}
			case len(changes) > 0:
				stored, err = st.UpdatePolicy(ctx, table, func(p plan.Policy, _ bool) (plan.Policy, error) {
					return applyPolicySet(p, changes), nil
				})
				if err != nil {
					return corruptPolicyHint(err)
				}
			default:
				stored, _, err = st.Policy(ctx, table)
				if err != nil {
					return corruptPolicyHint(err)
				}
			}
			cfg, _, err := st.StoredConfig(ctx)
			if err != nil {
				return err
			}
			defaults := cfg.WithDefaults().Policy
			effective := serve.EffectivePolicy(stored, defaults)
			if a.jsonOut {
				return a.printJSON(servePolicyReport{Table: table, Policy: admin.NewPolicyJSON(effective),
					Stored: json.RawMessage(state.EncodePolicy(stored)), Defaults: admin.NewPolicyJSON(defaults)})
			}
			var names []string
			for _, k := range policyKnobs {
				if k.isSet(stored) {
					names = append(names, k.name)
				}
			}
			switch {
			case reset:
				a.printf("%s: policy reset: every knob is the default\n", table)
			case len(names) == 0:
				a.printf("%s: no knob stored: every knob is the default\n", table)
			default:
				a.printf("%s: %s stored for the table, the rest are defaults\n", table, strings.Join(names, ", "))
			}
			a.printf("  %-26s %-10s %s\n", "knob", "value", "default")
			for _, k := range policyKnobs {
				mark := ""
				if k.isSet(stored) {
					mark = "  (stored)"
				}
				a.printf("  %-26s %-10s %s%s\n", k.name, k.show(effective), k.show(defaults), mark)
			}
			if effective.Paused && !stored.Paused {
				a.printf("paused by the default policy of the planner-wide config (serve --config): --set paused=false cannot override it\n")
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&set, "set", nil, "store knobs KEY=VALUE[,KEY=VALUE...] for the table (VALUE default removes one)")
	cmd.Flags().BoolVar(&reset, "reset", false, "remove the table's stored knobs: it takes the defaults again")
	return cmd
}

// corruptPolicyHint adds the way out to an undecodable stored policy.
func corruptPolicyHint(err error) error {
	if errors.Is(err, state.ErrCorrupt) {
		return fmt.Errorf("%w (shale serve policy TABLE --reset removes it)", err)
	}
	return err
}

// serveRetryReport is `shale serve retry TABLE --json`'s object.
type serveRetryReport struct {
	Table   string            `json:"table"`
	Cleared []serveClearedRow `json:"cleared"`
}

type serveClearedRow struct {
	Kind        string    `json:"kind"`
	Attempts    int       `json:"attempts"`
	Class       string    `json:"class"`
	LastFailure time.Time `json:"last_failure,omitzero"`
	LastError   string    `json:"last_error,omitempty"`
}

func (a *app) serveRetryCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "retry TABLE [KIND]",
		Short: "Clear a table's failure ledger so shale serve retries its work now",
		Long: `Deletes the failure ledger entries of TABLE (of KIND only when given; kinds: ` + plan.KindList() + `)
and prints what they said. Work held as needs_attention, or waiting out a back-off, is
placed again by the next planning pass. Fix what the entry's last error names first: the
ledger only decides whether and when work is retried, so clearing it is always safe, but
work that fails again is held again.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, table := cmd.Context(), args[0]
			var kinds []plan.Kind
			if len(args) == 2 {
				k := plan.Kind(args[1])
				if !knownKind(k) {
					return usagef("unknown kind %q (want %s)", args[1], plan.KindList())
				}
				kinds = append(kinds, k)
			}
			st, err := a.serveTable(ctx, table)
			if err != nil {
				return err
			}
			cleared, err := st.ClearFailures(ctx, table, kinds...)
			if err != nil {
				return err
			}
			rep := serveRetryReport{Table: table, Cleared: []serveClearedRow{}}
			for _, k := range plan.Kinds {
				if f, ok := cleared[k]; ok {
					rep.Cleared = append(rep.Cleared, serveClearedRow{Kind: string(k), Attempts: f.Attempts, Class: string(f.Class),
						LastFailure: f.LastFailure.UTC(), LastError: f.LastError})
				}
			}
			if a.jsonOut {
				return a.printJSON(rep)
			}
			if len(rep.Cleared) == 0 {
				what := "any kind"
				if len(kinds) == 1 {
					what = string(kinds[0])
				}
				a.printf("%s: no failure recorded for %s: nothing to clear\n", table, what)
				return nil
			}
			for _, c := range rep.Cleared {
				a.printf("%s: cleared the %s failure (%s, %s): %s\n", table, c.Kind, plural(c.Attempts, "attempt"), c.Class, c.LastError)
			}
			a.printf("the next planning pass may place the work again ('shale why %s')\n", table)
			return nil
		},
	}
}

// Package state is the etcd side of `shale serve`: the keys of the planner-wide
// config, the executors' heartbeats, leader election, assignments, write-turn
// histories, the failure ledger and per-table policies, their JSON encodings, and the
// small guarded transactions that change them. Package serve runs the processes; this
// package holds no state of its own and starts no goroutine.
//
// Key layout, under the catalog's prefix P (the one demand records use):
//
//	P/serve/config                   Config (put-if-absent; EnsureConfig)
//	P/serve/executors/<id>           Executor, with the executor's session lease
//	P/serve/leader/                  the concurrency.Election prefix
//	P/serve/assign/<table>/turn      the table's write-turn Assignment (recover, publish, merge_wal)
//	P/serve/assign/<table>/prep      the table's preparation Assignment (compact, index)
//	P/serve/history/<table>          plan.History, updated by the placement transaction
//	P/serve/failures/<table>/<kind>  plan.Failure, written by the release transaction
//	P/serve/policy/<table>           plan.Policy (absent: the default)
//
// Safety: an assignment is put with its executor's lease, so the executor's death
// releases its work; the placement transaction is guarded by the leader's election key,
// the executor's key and the slot being free, so no slot is ever assigned twice. An
// executor's bind, progress and release are guarded by the assignment key's create
// revision (the assignment's identity in etcd), so they never touch a later assignment
// of the same slot. None of this is a fence for data: every commit goes through the
// manifest commit loop.
package state

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/shale-db/shale/serve/plan"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The errors of this package; they come wrapped, naming the table, kind or key.
var (
	// ErrNotLeader: the placement's leader key is gone or belongs to another campaign.
	ErrNotLeader = errors.New("serve: not the leader")
	// ErrExecutorGone: the executor's key (and so its lease) is gone, or is a later
	// registration than the one the planner saw.
	ErrExecutorGone = errors.New("serve: executor gone")
	// ErrSlotTaken: the table's write turn or preparation slot already has an assignment.
	ErrSlotTaken = errors.New("serve: slot already assigned")
	// ErrAssignmentLost: the assignment no longer exists (released, or its executor's
	// lease expired and the slot may have been assigned again).
	ErrAssignmentLost = errors.New("serve: assignment lost")
	// ErrExecutorExists: another live process registered the executor id.
	ErrExecutorExists = errors.New("serve: executor id in use")
	// ErrConfigMismatch: the stored planner-wide config differs from the process's.
	ErrConfigMismatch = errors.New("serve: config differs from the stored one")
	// ErrCorrupt: a stored value does not decode.
	ErrCorrupt = errors.New("serve: undecodable value in etcd")
)

// Slot names an assignment slot of a table.
type Slot string

// The slots: one write turn and one preparation per table.
const (
	SlotTurn Slot = "turn"
	SlotPrep Slot = "prep"
)

// SlotOf is the slot work of kind k occupies: the write turn for plan.TakesWriteTurn
// kinds, else the preparation slot.
func SlotOf(k plan.Kind) Slot {
	if plan.TakesWriteTurn(k) {
		return SlotTurn
	}
	return SlotPrep
}

// Keys builds the key layout under one prefix. The zero value is not usable; use NewKeys.
type Keys struct{ root string }

// NewKeys returns the keys under prefix (the catalog's prefix; a trailing "/" is
// ignored): everything lives below prefix + "/serve/".
func NewKeys(prefix string) Keys { return Keys{root: strings.TrimRight(prefix, "/") + "/serve/"} }

// Root is the prefix of every serve key (ends in "/").
func (k Keys) Root() string { return k.root }

// Config is the planner-wide config key.
func (k Keys) Config() string { return k.root + "config" }

// Executors is the prefix of the executors' keys.
func (k Keys) Executors() string { return k.root + "executors/" }

// Executor is executor id's key.
func (k Keys) Executor(id string) string { return k.Executors() + id }

// Leader is the election prefix.
func (k Keys) Leader() string { return k.root + "leader/" }

// Assignments is the prefix of every assignment key.
func (k Keys) Assignments() string { return k.root + "assign/" }

// Assignment is the key of table's slot.
func (k Keys) Assignment(table string, s Slot) string {
	return k.Assignments() + table + "/" + string(s)
}

// Histories is the prefix of the history keys.
func (k Keys) Histories() string { return k.root + "history/" }

// History is table's write-turn history key.
func (k Keys) History(table string) string { return k.Histories() + table }

// Failures is the prefix of the failure ledger.
func (k Keys) Failures() string { return k.root + "failures/" }

// Failure is the ledger key of (table, kind).
func (k Keys) Failure(table string, kind plan.Kind) string {
	return k.Failures() + table + "/" + string(kind)
}

// Policies is the prefix of the per-table policies.
func (k Keys) Policies() string { return k.root + "policy/" }

// Policy is table's policy key.
func (k Keys) Policy(table string) string { return k.Policies() + table }

// Config is the planner-wide configuration every process of one catalog shares. The
// first process stores it; one started with a different one refuses to run
// (EnsureConfig). Durations are stored in milliseconds.
type Config struct {
	// PassInterval is how often the leader plans (it also plans when work is released).
	PassInterval time.Duration `json:"-"`
	// LeaseTTL is the executors' session lease: a dead process's work is released and a
	// dead leader replaced within it.
	LeaseTTL time.Duration `json:"-"`
	// IdleTimeout cancels an execution that completes no storage request for this long.
	IdleTimeout time.Duration `json:"-"`
	// MaxPlacements bounds the placements of one pass (plan.Input.MaxPlacements).
	MaxPlacements int `json:"max_placements"`
	// Policy is the default per-table policy (a table's stored policy overrides it).
	Policy plan.Policy `json:"-"`
}

// The defaults of Config.
const (
	DefaultPassInterval = 5 * time.Second
	DefaultLeaseTTL     = 10 * time.Second
	DefaultIdleTimeout  = 2 * time.Minute
)

// WithDefaults fills zero or negative fields with their defaults.
func (c Config) WithDefaults() Config {
	if c.PassInterval <= 0 {
		c.PassInterval = DefaultPassInterval
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.MaxPlacements <= 0 {
		c.MaxPlacements = plan.DefaultMaxPlacements
	}
	c.Policy = c.Policy.WithDefaults()
	return c
}

// Validate reports a config that cannot run: a lease TTL under 2 s (etcd's minimum
// granularity is one second and a keep-alive needs room), a pass interval under 10 ms,
// an idle timeout under 100 ms.
func (c Config) Validate() error {
	switch {
	case c.LeaseTTL > 0 && c.LeaseTTL < 2*time.Second:
		return fmt.Errorf("lease TTL %s is below 2s", c.LeaseTTL)
	case c.LeaseTTL%time.Second != 0:
		return fmt.Errorf("lease TTL %s is not a whole number of seconds", c.LeaseTTL)
	case c.PassInterval > 0 && c.PassInterval < 10*time.Millisecond:
		return fmt.Errorf("pass interval %s is below 10ms", c.PassInterval)
	case c.IdleTimeout > 0 && c.IdleTimeout < 100*time.Millisecond:
		return fmt.Errorf("idle timeout %s is below 100ms", c.IdleTimeout)
	}
	return nil
}

type policyJSON struct {
	Paused                bool   `json:"paused,omitempty"`
	MinGenerations        uint64 `json:"min_generations,omitempty"`
	CriticalGenerations   uint64 `json:"critical_generations,omitempty"`
	MaxAgeMS              int64  `json:"max_age_ms,omitempty"`
	MaxTurnWaitMS         int64  `json:"max_turn_wait_ms,omitempty"`
	MinSmallFragments     int    `json:"min_small_fragments,omitempty"`
	MinUncovered          int    `json:"min_uncovered,omitempty"`
	MaxConsecutiveTurns   int    `json:"max_consecutive_turns,omitempty"`
	MaxAttemptsBeforeHold int    `json:"max_attempts_before_hold,omitempty"`
}

func toPolicyJSON(p plan.Policy) policyJSON {
	return policyJSON{p.Paused, p.MinGenerations, p.CriticalGenerations, p.MaxAge.Milliseconds(), p.MaxTurnWait.Milliseconds(),
		p.MinSmallFragments, p.MinUncovered, p.MaxConsecutiveTurns, p.MaxAttemptsBeforeHold}
}

func (j policyJSON) policy() plan.Policy {
	return plan.Policy{Paused: j.Paused, MinGenerations: j.MinGenerations, CriticalGenerations: j.CriticalGenerations,
		MaxAge: time.Duration(j.MaxAgeMS) * time.Millisecond, MaxTurnWait: time.Duration(j.MaxTurnWaitMS) * time.Millisecond,
		MinSmallFragments: j.MinSmallFragments, MinUncovered: j.MinUncovered, MaxConsecutiveTurns: j.MaxConsecutiveTurns,
		MaxAttemptsBeforeHold: j.MaxAttemptsBeforeHold}
}

// EncodePolicy is a policy's stored form: JSON, snake_case, durations in ms, zero knobs
// left out (they take the default).
func EncodePolicy(p plan.Policy) []byte { b, _ := json.Marshal(toPolicyJSON(p)); return b }

// DecodePolicy decodes a stored policy (ParsePolicy); an undecodable one is ErrCorrupt.
func DecodePolicy(b []byte) (plan.Policy, error) {
	p, err := ParsePolicy(b)
	if err != nil {
		return plan.Policy{}, fmt.Errorf("%w: policy: %v", ErrCorrupt, err)
	}
	return p, nil
}

// ParsePolicy parses EncodePolicy's form as a person writes it (a config file): unknown
// members are refused, so a typo is an error, not a silent default.
func ParsePolicy(b []byte) (plan.Policy, error) {
	var j policyJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return plan.Policy{}, err
	}
	return j.policy(), nil
}

type configJSON struct {
	PassIntervalMS int64      `json:"pass_interval_ms"`
	LeaseTTLMS     int64      `json:"lease_ttl_ms"`
	IdleTimeoutMS  int64      `json:"idle_timeout_ms"`
	MaxPlacements  int        `json:"max_placements"`
	Policy         policyJSON `json:"policy"`
}

// EncodeConfig is c's stored form (with defaults applied, so that two processes that
// spell the same config differently agree).
func EncodeConfig(c Config) []byte {
	c = c.WithDefaults()
	b, _ := json.Marshal(configJSON{c.PassInterval.Milliseconds(), c.LeaseTTL.Milliseconds(), c.IdleTimeout.Milliseconds(),
		c.MaxPlacements, toPolicyJSON(c.Policy)})
	return b
}

// DecodeConfig decodes EncodeConfig's form.
func DecodeConfig(b []byte) (Config, error) {
	var j configJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return Config{}, fmt.Errorf("%w: config: %v", ErrCorrupt, err)
	}
	return Config{PassInterval: time.Duration(j.PassIntervalMS) * time.Millisecond, LeaseTTL: time.Duration(j.LeaseTTLMS) * time.Millisecond,
		IdleTimeout: time.Duration(j.IdleTimeoutMS) * time.Millisecond, MaxPlacements: j.MaxPlacements, Policy: j.Policy.policy()}, nil
}

// Diff lists the settings in which stored and mine differ (with defaults applied), as
// "name: stored S, this process M", in a fixed order; none when they agree.
func Diff(stored, mine Config) []string {
	flat := func(c Config) ([]string, map[string]string) {
		var m map[string]any
		_ = json.Unmarshal(EncodeConfig(c), &m)
		out := map[string]string{}
		var keys []string
		var walk func(prefix string, v map[string]any)
		walk = func(prefix string, v map[string]any) {
			for k, x := range v {
				if sub, ok := x.(map[string]any); ok {
					walk(prefix+k+".", sub)
					continue
				}
				out[prefix+k] = fmt.Sprint(x)
				keys = append(keys, prefix+k)
			}
		}
		walk("", m)
		sort.Strings(keys)
		return keys, out
	}
	keys, a := flat(stored)
	_, b := flat(mine)
	var d []string
	for _, k := range keys {
		if a[k] != b[k] {
			d = append(d, fmt.Sprintf("%s: stored %s, this process %s", k, a[k], b[k]))
		}
	}
	return d
}

// String describes c for error messages.
func (c Config) String() string { return string(EncodeConfig(c)) }

// Executor is one `shale serve` process's heartbeat record.
type Executor struct {
	ID      string         `json:"id"`             // unique among live processes
	Addr    string         `json:"addr,omitempty"` // its admin endpoint
	PID     int            `json:"pid"`            // its process id
	Host    string         `json:"host"`           // its host name
	Slots   map[string]int `json:"slots"`          // by plan.Kind
	Bytes   int64          `json:"bytes"`          // memory budget for reservations
	Started time.Time      `json:"started"`        // when the process started
	Lease   int64          `json:"lease"`          // its session lease id

	// CreateRevision is the key's create revision (read from etcd, not stored): the
	// placement transaction requires it unchanged.
	CreateRevision int64 `json:"-"`
}

// Plan is e as the planner sees it.
func (e Executor) Plan() plan.Executor {
	slots := map[plan.Kind]int{}
	for k, n := range e.Slots {
		slots[plan.Kind(k)] = n
	}
	return plan.Executor{ID: e.ID, Slots: slots, Bytes: e.Bytes}
}

// The states of an assignment.
const (
	StateAssigned = "assigned" // placed, not yet bound by its executor
	StateRunning  = "running"  // bound: the executor runs it
)

// Assignment is one unit of work placed on an executor.
type Assignment struct {
	ID         string    `json:"id"`                   // a ULID, unique per placement
	Table      string    `json:"table"`                // the table worked on
	Kind       plan.Kind `json:"kind"`                 // the kind of work
	Executor   string    `json:"executor"`             // the executor it is placed on
	Bytes      int64     `json:"bytes"`                // bytes reserved on the executor
	Slots      int       `json:"slots"`                // slots of Kind reserved
	PlacedAt   time.Time `json:"placed_at"`            // when the planner placed it
	State      string    `json:"state"`                // StateAssigned or StateRunning
	BoundAt    time.Time `json:"bound_at,omitzero"`    // when the executor bound it
	Progress   int64     `json:"progress"`             // completed storage requests
	ProgressAt time.Time `json:"progress_at,omitzero"` // when Progress was recorded

	// Read from etcd (not stored): the key's create and mod revisions and its lease.
	CreateRevision int64            `json:"-"` // the assignment's identity: bind, progress and release require it
	ModRevision    int64            `json:"-"` // the last change
	Lease          clientv3.LeaseID `json:"-"` // the executor's lease the key is put with
}

// Plan is a as the planner sees it.
func (a Assignment) Plan() plan.Assignment {
	return plan.Assignment{ID: a.ID, Table: a.Table, Kind: a.Kind, Executor: a.Executor, Bytes: a.Bytes, Slots: a.Slots}
}

// Snapshot is every serve key read at one etcd revision.
type Snapshot struct {
	Revision    int64                                 // the etcd revision read at
	Config      *Config                               // nil: none stored yet
	Executors   []Executor                            // live executors, by id
	Assignments []Assignment                          // by table, then kind
	Histories   map[string]plan.History               // by table
	Failures    map[string]map[plan.Kind]plan.Failure // by table, kind
	Policies    map[string]plan.Policy                // stored policies by table
	// Corrupt lists keys whose values did not decode (skipped; an executor or assignment
	// among them is treated as absent).
	Corrupt []string
}

// State reads and changes the serve keys of one catalog prefix. Safe for concurrent use.
type State struct {
	cli  *clientv3.Client
	keys Keys
}

// New returns the serve state under prefix (the catalog's prefix).
func New(cli *clientv3.Client, prefix string) *State { return &State{cli: cli, keys: NewKeys(prefix)} }

// Keys is the key layout.
func (s *State) Keys() Keys { return s.keys }

// Client is the etcd client.
func (s *State) Client() *clientv3.Client { return s.cli }

// EnsureConfig stores c when no config is stored (put-if-absent) and returns the stored
// one. A stored config that differs from c fails with ErrConfigMismatch naming both,
// unless replace, which overwrites it. Cost: one txn (two with replace, or when the
// first finds one stored).
func (s *State) EnsureConfig(ctx context.Context, c Config, replace bool) (Config, error) {
	enc := EncodeConfig(c)
	key := s.keys.Config()
	if replace {
		if _, err := s.cli.Put(ctx, key, string(enc)); err != nil {
			return Config{}, fmt.Errorf("store serve config: %w", err)
		}
		return DecodeConfig(enc)
	}
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(enc))).Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return Config{}, fmt.Errorf("store serve config: %w", err)
	}
	if resp.Succeeded {
		return DecodeConfig(enc)
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return s.EnsureConfig(ctx, c, false) // deleted in between
	}
	stored, err := DecodeConfig(kvs[0].Value)
	if err != nil {
		return Config{}, err
	}
	if d := Diff(stored, c); len(d) > 0 {
		return stored, fmt.Errorf("%w: %s (start this process with the stored settings, or replace them)",
			ErrConfigMismatch, strings.Join(d, "; "))
	}
	return stored, nil
}

// RegisterExecutor puts e's key with lease (put-if-absent) and returns its create
// revision. Errors: ErrExecutorExists when a live process holds the id.
func (s *State) RegisterExecutor(ctx context.Context, e Executor, lease clientv3.LeaseID) (int64, error) {
	e.Lease = int64(lease)
	b, err := json.Marshal(e)
	if err != nil {
		return 0, err
	}
	key := s.keys.Executor(e.ID)
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(b), clientv3.WithLease(lease))).Commit()
	if err != nil {
		return 0, fmt.Errorf("register executor %s: %w", e.ID, err)
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("register executor %s: %w", e.ID, ErrExecutorExists)
	}
	return resp.Header.Revision, nil
}

// pageLimit is the keys per range request of Read.
const pageLimit = 1000

// Read reads every serve key at one revision, in pages of pageLimit keys.
func (s *State) Read(ctx context.Context) (*Snapshot, error) {
	snap := &Snapshot{Histories: map[string]plan.History{}, Failures: map[string]map[plan.Kind]plan.Failure{}, Policies: map[string]plan.Policy{}}
	root := s.keys.Root()
	end := clientv3.GetPrefixRangeEnd(root)
	from := root
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(pageLimit)}
		if snap.Revision != 0 {
			opts = append(opts, clientv3.WithRev(snap.Revision))
		}
		resp, err := s.cli.Get(ctx, from, opts...)
		if err != nil {
			return nil, fmt.Errorf("read serve state: %w", err)
		}
		if snap.Revision == 0 {
			snap.Revision = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			if err := s.fold(snap, kv.Key, kv.Value, kv.CreateRevision, kv.ModRevision, kv.Lease); err != nil {
				snap.Corrupt = append(snap.Corrupt, string(kv.Key))
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	sort.Slice(snap.Executors, func(i, j int) bool { return snap.Executors[i].ID < snap.Executors[j].ID })
	sort.Slice(snap.Assignments, func(i, j int) bool {
		a, b := snap.Assignments[i], snap.Assignments[j]
		if a.Table != b.Table {
			return a.Table < b.Table
		}
		return a.Kind < b.Kind
	})
	return snap, nil
}

func (s *State) fold(snap *Snapshot, key, val []byte, create, mod, lease int64) error {
	k := string(key)
	switch {
	case k == s.keys.Config():
		c, err := DecodeConfig(val)
		if err != nil {
			return err
		}
		snap.Config = &c
	case strings.HasPrefix(k, s.keys.Executors()):
		var e Executor
		if err := json.Unmarshal(val, &e); err != nil {
			return err
		}
		e.CreateRevision = create
		snap.Executors = append(snap.Executors, e)
	case strings.HasPrefix(k, s.keys.Assignments()):
		a, err := DecodeAssignment(val)
		if err != nil {
			return err
		}
		a.CreateRevision, a.ModRevision, a.Lease = create, mod, clientv3.LeaseID(lease)
		snap.Assignments = append(snap.Assignments, a)
	case strings.HasPrefix(k, s.keys.Histories()):
		var h plan.History
		if err := json.Unmarshal(val, &h); err != nil {
			return err
		}
		snap.Histories[strings.TrimPrefix(k, s.keys.Histories())] = h
	case strings.HasPrefix(k, s.keys.Failures()):
		rest := strings.TrimPrefix(k, s.keys.Failures())
		i := strings.LastIndexByte(rest, '/')
		if i < 0 {
			return ErrCorrupt
		}
		var f plan.Failure
		if err := json.Unmarshal(val, &f); err != nil {
			return err
		}
		t := rest[:i]
		if snap.Failures[t] == nil {
			snap.Failures[t] = map[plan.Kind]plan.Failure{}
		}
		snap.Failures[t][plan.Kind(rest[i+1:])] = f
	case strings.HasPrefix(k, s.keys.Policies()):
		p, err := DecodePolicy(val)
		if err != nil {
			return err
		}
		snap.Policies[strings.TrimPrefix(k, s.keys.Policies())] = p
	}
	return nil
}

// DecodeAssignment decodes an assignment's stored JSON.
func DecodeAssignment(b []byte) (Assignment, error) {
	var a Assignment
	if err := json.Unmarshal(b, &a); err != nil {
		return Assignment{}, fmt.Errorf("%w: assignment: %v", ErrCorrupt, err)
	}
	return a, nil
}

// Guard is what a placement requires of etcd at commit: the leader's election key
// still has the create revision the campaign won with, and the executor's key still
// has the create revision the planner read (so its lease is alive).
type Guard struct {
	LeaderKey      string // the election key the campaign won with (Election.Key)
	LeaderRevision int64  // its create revision (Election.Rev)
	// Executor is the target executor as the planner read it (its CreateRevision and
	// Lease are used).
	Executor Executor
}

// Place stores assignment a on its table's slot with the executor's lease, and history
// (when not nil) as the table's write-turn history, in one transaction that requires
// g's leader key and executor key unchanged and the slot free. It returns a with its
// revisions filled in. Errors (wrapped, naming the table and kind): ErrNotLeader,
// ErrExecutorGone, ErrSlotTaken; an etcd error (a lost reply, a timeout) is decided by
// reading the slot for a's id: a found there is returned as placed, with no error; else
// the error is returned (not applied when read; a request still in flight may land
// later and is then bound by its executor like any assignment).
func (s *State) Place(ctx context.Context, g Guard, a Assignment, history *plan.History) (Assignment, error) {
	slotKey := s.keys.Assignment(a.Table, SlotOf(a.Kind))
	execKey := s.keys.Executor(g.Executor.ID)
	if a.Executor == "" {
		a.Executor = g.Executor.ID
	}
	if a.State == "" {
		a.State = StateAssigned
	}
	b, err := json.Marshal(a)
	if err != nil {
		return a, err
	}
	lease := clientv3.LeaseID(g.Executor.Lease)
	ops := []clientv3.Op{clientv3.OpPut(slotKey, string(b), clientv3.WithLease(lease))}
	if history != nil {
		hb, _ := json.Marshal(history)
		ops = append(ops, clientv3.OpPut(s.keys.History(a.Table), string(hb)))
	}
	resp, err := s.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(g.LeaderKey), "=", g.LeaderRevision),
		clientv3.Compare(clientv3.CreateRevision(execKey), "=", g.Executor.CreateRevision),
		clientv3.Compare(clientv3.CreateRevision(slotKey), "=", 0),
	).Then(ops...).Else(
		clientv3.OpGet(g.LeaderKey, clientv3.WithKeysOnly()),
		clientv3.OpGet(execKey, clientv3.WithKeysOnly()),
		clientv3.OpGet(slotKey, clientv3.WithKeysOnly()),
	).Commit()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return a, fmt.Errorf("place %s on table %q: executor %s: %w", a.Kind, a.Table, g.Executor.ID, ErrExecutorGone)
	}
	if err != nil {
		// The reply was lost or the request failed: the transaction may have been
		// applied. Decide by the assignment's id, never by the error.
		if got, ok := s.placedAs(context.WithoutCancel(ctx), slotKey, a); ok {
			return got, nil
		}
		return a, fmt.Errorf("place %s on table %q: %w", a.Kind, a.Table, err)
	}
	if !resp.Succeeded {
		lk := resp.Responses[0].GetResponseRange().Kvs
		ek := resp.Responses[1].GetResponseRange().Kvs
		switch {
		case len(lk) == 0 || lk[0].CreateRevision != g.LeaderRevision:
			return a, fmt.Errorf("place %s on table %q: %w", a.Kind, a.Table, ErrNotLeader)
		case len(ek) == 0 || ek[0].CreateRevision != g.Executor.CreateRevision:
			return a, fmt.Errorf("place %s on table %q: executor %s: %w", a.Kind, a.Table, g.Executor.ID, ErrExecutorGone)
		default:
			return a, fmt.Errorf("place %s on table %q: %s slot: %w", a.Kind, a.Table, SlotOf(a.Kind), ErrSlotTaken)
		}
	}
	a.CreateRevision, a.ModRevision, a.Lease = resp.Header.Revision, resp.Header.Revision, lease
	return a, nil
}

// placedAs reads slotKey after a Place whose outcome is unknown: it reports the stored
// assignment when the slot holds a's id (the transaction was applied), else false (it
// was not applied by the time of the read; a request still in flight that lands later
// is an assignment like any other, bound by its executor).
func (s *State) placedAs(ctx context.Context, slotKey string, a Assignment) (Assignment, bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := s.cli.Get(ctx, slotKey)
	if err != nil || len(resp.Kvs) == 0 {
		return a, false
	}
	kv := resp.Kvs[0]
	got, err := DecodeAssignment(kv.Value)
	if err != nil || got.ID != a.ID {
		return a, false
	}
	a.CreateRevision, a.ModRevision, a.Lease = kv.CreateRevision, kv.ModRevision, clientv3.LeaseID(kv.Lease)
	return a, true
}

// update rewrites a's value (keeping its lease) if the key is still a's (same create
// revision).
func (s *State) update(ctx context.Context, a Assignment, what string) (Assignment, error) {
	key := s.keys.Assignment(a.Table, SlotOf(a.Kind))
	b, err := json.Marshal(a)
	if err != nil {
		return a, err
	}
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", a.CreateRevision)).
		Then(clientv3.OpPut(key, string(b), clientv3.WithIgnoreLease())).Commit()
	if err != nil {
		return a, fmt.Errorf("%s %s of table %q: %w", what, a.Kind, a.Table, err)
	}
	if !resp.Succeeded {
		return a, fmt.Errorf("%s %s of table %q (assignment %s): %w", what, a.Kind, a.Table, a.ID, ErrAssignmentLost)
	}
	a.ModRevision = resp.Header.Revision
	return a, nil
}

// Bind marks a running (bound at at). Errors: ErrAssignmentLost.
func (s *State) Bind(ctx context.Context, a Assignment, at time.Time) (Assignment, error) {
	a.State, a.BoundAt = StateRunning, at
	return s.update(ctx, a, "bind")
}

// Progress records a's completed storage requests (n, counted at). Errors:
// ErrAssignmentLost.
func (s *State) Progress(ctx context.Context, a Assignment, n int64, at time.Time) (Assignment, error) {
	a.Progress, a.ProgressAt = n, at
	return s.update(ctx, a, "record progress of")
}

// Release deletes a's key, if it is still a's, and in the same transaction records the
// outcome in the failure ledger: f nil (success) deletes the (table, kind) entry, else f
// is stored; handBack (drain) leaves the ledger alone. Errors: ErrAssignmentLost (nothing
// was written).
func (s *State) Release(ctx context.Context, a Assignment, f *plan.Failure, handBack bool) error {
	key := s.keys.Assignment(a.Table, SlotOf(a.Kind))
	fkey := s.keys.Failure(a.Table, a.Kind)
	ops := []clientv3.Op{clientv3.OpDelete(key)}
	switch {
	case handBack:
	case f == nil:
		ops = append(ops, clientv3.OpDelete(fkey))
	default:
		fb, _ := json.Marshal(f)
		ops = append(ops, clientv3.OpPut(fkey, string(fb)))
	}
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", a.CreateRevision)).Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("release %s of table %q: %w", a.Kind, a.Table, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("release %s of table %q (assignment %s): %w", a.Kind, a.Table, a.ID, ErrAssignmentLost)
	}
	return nil
}

// Failure reads the ledger entry of (table, kind) (ok false when none).
func (s *State) Failure(ctx context.Context, table string, kind plan.Kind) (plan.Failure, bool, error) {
	resp, err := s.cli.Get(ctx, s.keys.Failure(table, kind))
	if err != nil {
		return plan.Failure{}, false, fmt.Errorf("read failure of %s on table %q: %w", kind, table, err)
	}
	if len(resp.Kvs) == 0 {
		return plan.Failure{}, false, nil
	}
	var f plan.Failure
	if err := json.Unmarshal(resp.Kvs[0].Value, &f); err != nil {
		return plan.Failure{}, false, fmt.Errorf("%w: failure of %s on table %q: %v", ErrCorrupt, kind, table, err)
	}
	return f, true, nil
}

// ClearFailure deletes the ledger entry of (table, kind): an operator's "retry now"
// after fixing what needed attention.
func (s *State) ClearFailure(ctx context.Context, table string, kind plan.Kind) error {
	_, err := s.cli.Delete(ctx, s.keys.Failure(table, kind))
	return err
}

// SetPolicy stores table's policy.
func (s *State) SetPolicy(ctx context.Context, table string, p plan.Policy) error {
	_, err := s.cli.Put(ctx, s.keys.Policy(table), string(EncodePolicy(p)))
	return err
}

// DeletePolicy removes table's policy (it takes the default again).
func (s *State) DeletePolicy(ctx context.Context, table string) error {
	_, err := s.cli.Delete(ctx, s.keys.Policy(table))
	return err
}

// Leader returns the current leader's executor id and election key ("" when none).
func (s *State) Leader(ctx context.Context) (id, key string, err error) {
	resp, err := s.cli.Get(ctx, s.keys.Leader(), append(clientv3.WithFirstCreate(), clientv3.WithPrefix())...)
	if err != nil {
		return "", "", fmt.Errorf("read serve leader: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return "", "", nil
	}
	return string(resp.Kvs[0].Value), string(resp.Kvs[0].Key), nil
}

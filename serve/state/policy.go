package state

import (
	"context"
	"encoding/json"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shale-db/shale/serve/plan"
)

// StoredConfig reads the planner-wide config (ok false when no process stored one yet:
// every knob then has its default). Errors: etcd errors, ErrCorrupt.
func (s *State) StoredConfig(ctx context.Context) (c Config, ok bool, err error) {
	resp, err := s.cli.Get(ctx, s.keys.Config())
	if err != nil {
		return Config{}, false, fmt.Errorf("read serve config: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return Config{}, false, nil
	}
	c, err = DecodeConfig(resp.Kvs[0].Value)
	return c, err == nil, err
}

// Policy reads table's stored policy (ok false when none is stored: the default
// applies). Errors: etcd errors, ErrCorrupt naming the table for a value that does not
// decode.
func (s *State) Policy(ctx context.Context, table string) (p plan.Policy, ok bool, err error) {
	p, ok, _, err = s.policy(ctx, table)
	return p, ok, err
}

func (s *State) policy(ctx context.Context, table string) (plan.Policy, bool, int64, error) {
	resp, err := s.cli.Get(ctx, s.keys.Policy(table))
	if err != nil {
		return plan.Policy{}, false, 0, fmt.Errorf("read policy of table %q: %w", table, err)
	}
	if len(resp.Kvs) == 0 {
		return plan.Policy{}, false, 0, nil
	}
	p, err := DecodePolicy(resp.Kvs[0].Value)
	if err != nil {
		return plan.Policy{}, false, 0, fmt.Errorf("table %q: %w", table, err)
	}
	return p, true, resp.Kvs[0].ModRevision, nil
}

// UpdatePolicy changes table's stored policy to fn(stored, ok) with a transaction guarded
// by the key's mod revision, so concurrent updates never lose one another's knobs (on a
// conflict fn is called again on the newer value). A result with no knob set (the zero
// Policy) deletes the key. It returns what was stored. Errors: fn's error (nothing is
// written), ErrCorrupt for a stored value that does not decode (DeletePolicy removes it),
// etcd errors.
func (s *State) UpdatePolicy(ctx context.Context, table string, fn func(stored plan.Policy, ok bool) (plan.Policy, error)) (plan.Policy, error) {
	key := s.keys.Policy(table)
	for {
		cur, ok, rev, err := s.policy(ctx, table)
		if err != nil {
			return plan.Policy{}, err
		}
		next, err := fn(cur, ok)
		if err != nil {
			return plan.Policy{}, err
		}
		op := clientv3.OpPut(key, string(EncodePolicy(next)))
		if next == (plan.Policy{}) {
			op = clientv3.OpDelete(key)
		}
		resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).Then(op).Commit()
		if err != nil {
			return plan.Policy{}, fmt.Errorf("store policy of table %q: %w", table, err)
		}
		if resp.Succeeded {
			return next, nil
		}
		if err := ctx.Err(); err != nil {
			return plan.Policy{}, err
		}
	}
}

// ClearFailures deletes table's failure ledger entries of kinds (every kind when none is
// given) in one transaction and returns the entries it deleted: an operator's "retry
// now" after fixing what needed attention. Deleting an entry is always safe: the ledger
// only decides whether and when work is retried. Errors: etcd errors; an entry that was
// deleted but does not decode is returned with Class "" and LastError naming it.
func (s *State) ClearFailures(ctx context.Context, table string, kinds ...plan.Kind) (map[plan.Kind]plan.Failure, error) {
	if len(kinds) == 0 {
		kinds = plan.Kinds
	}
	ops := make([]clientv3.Op, len(kinds))
	for i, k := range kinds {
		ops[i] = clientv3.OpDelete(s.keys.Failure(table, k), clientv3.WithPrevKV())
	}
	resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, fmt.Errorf("clear failures of table %q: %w", table, err)
	}
	out := map[plan.Kind]plan.Failure{}
	for i, r := range resp.Responses {
		for _, kv := range r.GetResponseDeleteRange().PrevKvs {
			var f plan.Failure
			if err := json.Unmarshal(kv.Value, &f); err != nil {
				f = plan.Failure{LastError: fmt.Sprintf("undecodable ledger entry: %v", err)}
			}
			out[kinds[i]] = f
		}
	}
	return out, nil
}

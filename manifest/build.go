package manifest

import (
	"fmt"
	"slices"
)

// Build returns the manifest of the version txn creates on top of parent (nil for Create).
// It is pure: fragment ids for new fragments are assigned here, from parent's
// NextFragmentID, so concurrent writers never collide on them. An error means txn cannot
// apply to parent (the caller reports it as a conflict).
func Build(table string, parent *Manifest, txn Transaction) (*Manifest, error) {
	var m *Manifest
	if parent == nil {
		if txn.Op.Kind != OpCreate {
			return nil, fmt.Errorf("table %q does not exist", table)
		}
		m = &Manifest{Table: table, Config: map[string]string{}}
	} else {
		if txn.Op.Kind == OpCreate {
			return nil, fmt.Errorf("table %q already exists", table)
		}
		m = parent.clone()
		m.checksum = 0
	}
	m.Version++
	m.TxnKey = TxnKey(table, m.Version, txn.ID)
	firstNew := m.NextFragmentID

	op := &txn.Op
	switch op.Kind {
	case OpCreate, OpOverwrite:
		if op.Schema == nil {
			return nil, fmt.Errorf("%s without a schema", op.Kind)
		}
		m.Schema = *op.Schema
		for _, id := range op.Schema.FieldIDs {
			m.NextFieldID = max(m.NextFieldID, id+1)
		}
		m.Fragments = nil
		m.appendFragments(op.NewFragments)
		for k, v := range op.Config {
			m.Config[k] = v
		}
	case OpAppend:
		for _, f := range op.NewFragments {
			for _, df := range f.Files {
				for _, id := range df.FieldIDs {
					if !slices.Contains(m.Schema.FieldIDs, id) {
						return nil, fmt.Errorf("data file %s has field id %d, not in the schema of version %d", df.Key, id, parent.Version)
					}
				}
			}
		}
		m.appendFragments(op.NewFragments)
	case OpDelete:
		for _, d := range op.Deletions {
			f, ok := m.Fragment(d.FragmentID)
			if !ok {
				return nil, fmt.Errorf("fragment %d no longer exists", d.FragmentID)
			}
			if prev := deletionKey(f); prev != d.Previous {
				return nil, fmt.Errorf("fragment %d's deletion vector is %q, expected %q", d.FragmentID, prev, d.Previous)
			}
			dv := d.New
			f.Deletion = &dv
		}
		if len(op.Removed) > 0 {
			for _, id := range op.Removed {
				if _, ok := m.Fragment(id); !ok {
					return nil, fmt.Errorf("fragment %d no longer exists", id)
				}
			}
			m.Fragments = slices.DeleteFunc(m.Fragments, func(f Fragment) bool { return slices.Contains(op.Removed, f.ID) })
		}
	default:
		return nil, fmt.Errorf("unknown operation %q", op.Kind)
	}
	// Embed the transaction without the payload the manifest already holds.
	m.Txn = txn
	m.Txn.Op.Schema = nil
	m.Txn.Op.NewFragments = nil
	m.Txn.Op.NewFragmentIDs = nil
	for id := firstNew; id < m.NextFragmentID; id++ {
		m.Txn.Op.NewFragmentIDs = append(m.Txn.Op.NewFragmentIDs, id)
	}
	return m, nil
}

func deletionKey(f *Fragment) string {
	if f.Deletion == nil {
		return ""
	}
	return f.Deletion.Key
}

func (m *Manifest) appendFragments(fs []Fragment) {
	for _, f := range fs {
		f.ID = m.NextFragmentID
		m.NextFragmentID++
		m.Fragments = append(m.Fragments, f)
	}
}

package manifest

import (
	"fmt"
	"slices"
	"time"
)

// Build returns the manifest of the version txn creates on top of parent (nil for Create
// of a new table; a drop marker for Create of a table dropped before: a new incarnation,
// whose id is the Create's transaction id; every other version carries its parent's
// incarnation). It is pure: fragment ids for new fragments are assigned here, from parent's
// NextFragmentID, so concurrent writers never collide on them. An error means txn cannot
// apply to parent (the commit loop reports it as a retryable conflict with the version
// that made it so).
func Build(table string, parent *Manifest, txn Transaction) (*Manifest, error) {
	var m *Manifest
	switch {
	case parent == nil:
		if txn.Op.Kind != OpCreate {
			return nil, fmt.Errorf("table %q does not exist", table)
		}
		m = &Manifest{Table: table, Config: map[string]string{}}
	case parent.Dropped():
		// Only a Create follows a drop marker: a new incarnation, numbered on from the
		// marker so that no version number of the dropped incarnation is used again.
		if txn.Op.Kind != OpCreate {
			return nil, &DroppedError{Table: table, Version: parent.Version}
		}
		m = &Manifest{Table: table, Version: parent.Version, Config: map[string]string{},
			NextFragmentID: parent.NextFragmentID}
	default:
		if txn.Op.Kind == OpCreate {
			return nil, fmt.Errorf("table %q already exists", table)
		}
		m = parent.clone()
		m.checksum, m.content, m.size = 0, 0, 0
	}
	m.Version++
	if txn.Op.Kind == OpCreate {
		m.Incarnation, m.IncarnationSince = txn.ID, m.Version
	}
	m.TxnKey = TxnKey(table, m.Version, txn.ID)
	m.Committed = time.Now().UnixNano()
	firstNew := m.NextFragmentID

	op := &txn.Op
	var err error
	switch op.Kind {
	case OpCreate, OpOverwrite:
		if op.Schema == nil {
			return nil, fmt.Errorf("%s without a schema", op.Kind)
		}
		m.setSchema(*op.Schema)
		m.Fragments = nil
		m.Indexes = nil
		m.appendFragments(op.NewFragments)
		for k, v := range op.Config {
			m.Config[k] = v
		}
	case OpAppend:
		if err = m.checkFieldIDs(op.NewFragments); err == nil {
			m.appendFragments(op.NewFragments)
		}
	case OpDelete:
		err = m.applyDeletions(op)
	case OpUpdate:
		if err = m.checkFieldIDs(op.NewFragments); err == nil {
			if err = m.applyDeletions(op); err == nil {
				m.appendFragments(op.NewFragments)
			}
		}
	case OpSchemaChange:
		if op.Schema == nil {
			return nil, fmt.Errorf("%s without a schema", op.Kind)
		}
		m.setSchema(*op.Schema)
		// Indexes on fields that left the schema go with them.
		m.Indexes = slices.DeleteFunc(m.Indexes, func(ix Index) bool {
			for _, id := range ix.FieldIDs {
				if !slices.Contains(m.Schema.FieldIDs, id) {
					return true
				}
			}
			return false
		})
	case OpUpdateConfig:
		for k, v := range op.Config {
			m.Config[k] = v
		}
		for _, k := range op.ConfigDeletes {
			delete(m.Config, k)
		}
	case OpRewrite:
		var predicted map[uint32]bool
		if predicted, err = m.applyRewrite(op.Groups); err == nil {
			// Segments built in the same commit for the new fragments (zone maps).
			err = m.addIndexes(m.rewriteSegments(op.NewIndexes, predicted))
		}
	case OpCreateIndex:
		// Index metadata changes: drop indexes by name, drop segments by uuid (a merge of
		// deltas), add segments (a full build after dropping its name, or a delta
		// covering fragments no segment of the name covers).
		for _, name := range op.RemovedIndexes {
			m.Indexes = slices.DeleteFunc(m.Indexes, func(ix Index) bool { return ix.Name == name })
		}
		if len(op.IndexReplaces) > 0 {
			m.Indexes = slices.DeleteFunc(m.Indexes, func(ix Index) bool { return slices.Contains(op.IndexReplaces, ix.UUID) })
		}
		if err = m.addIndexes(op.NewIndexes); err != nil {
			return nil, err
		}
	case OpMergeWAL:
		if err = checkWALMerges(m, op.WALs); err != nil {
			return nil, err
		}
		if err = m.checkFieldIDs(op.NewFragments); err == nil {
			m.appendFragments(op.NewFragments)
			if m.WALMerged == nil {
				m.WALMerged = map[string]uint64{}
			}
			for _, w := range op.WALs {
				m.WALMerged[w.Shard] = w.To
			}
		}
	case OpAbort:
		if len(op.Aborted) == 0 {
			return nil, fmt.Errorf("abort without transaction ids")
		}
	case OpDrop:
		// The drop marker: the schema stays (so the version decodes as any other), the
		// rows, indexes, WAL watermarks, configuration and remembered idempotency keys go.
		m.Fragments, m.Indexes, m.WALMerged, m.Idempotency = nil, nil, nil, nil
		m.Config = map[string]string{}
	default:
		return nil, fmt.Errorf("unknown operation %q", op.Kind)
	}
	if err != nil {
		return nil, err
	}
	m.pruneIndexCoverage()
	if k := txn.IdempotencyKey; k != "" {
		if len(k) > MaxIdempotencyKeyLen {
			return nil, fmt.Errorf("idempotency key of %d bytes, at most %d", len(k), MaxIdempotencyKeyLen)
		}
		m.Idempotency = append(m.Idempotency, IdempotencyRecord{Key: k, Version: m.Version, TxnID: txn.ID})
	}
	if n := IdempotencyKeysKept(m.Config); len(m.Idempotency) > n {
		m.Idempotency = slices.Clone(m.Idempotency[len(m.Idempotency)-n:])
	}
	// Embed the transaction without the payload the manifest already holds.
	m.Txn = txn
	m.Txn.Op.Schema = nil
	m.Txn.Op.NewFragments = nil
	if len(op.Groups) > 0 {
		m.Txn.Op.Groups = make([]RewriteGroup, len(op.Groups))
		for i, g := range op.Groups {
			m.Txn.Op.Groups[i] = RewriteGroup{Old: g.Old}
		}
	}
	m.Txn.Op.NewFragmentIDs = nil
	for id := firstNew; id < m.NextFragmentID; id++ {
		m.Txn.Op.NewFragmentIDs = append(m.Txn.Op.NewFragmentIDs, id)
	}
	return m, nil
}

func (m *Manifest) setSchema(s Schema) {
	m.Schema = s
	for _, id := range s.FieldIDs {
		m.NextFieldID = max(m.NextFieldID, id+1)
	}
}

// checkFieldIDs refuses data files with field ids this table never assigned. Ids of fields
// dropped since the files were written are fine: scans ignore them.
func (m *Manifest) checkFieldIDs(fs []Fragment) error {
	for _, f := range fs {
		for _, df := range f.Files {
			for _, id := range df.FieldIDs {
				if id < 0 || id >= m.NextFieldID {
					return fmt.Errorf("data file %s has field id %d, never assigned in table %q (next id %d)", df.Key, id, m.Table, m.NextFieldID)
				}
			}
		}
	}
	return nil
}

func (m *Manifest) applyDeletions(op *Operation) error {
	for _, d := range op.Deletions {
		f, ok := m.Fragment(d.FragmentID)
		if !ok {
			return fmt.Errorf("fragment %d no longer exists", d.FragmentID)
		}
		if prev := deletionKey(f); prev != d.Previous {
			return fmt.Errorf("fragment %d's deletion vector is %q, expected %q", d.FragmentID, prev, d.Previous)
		}
		dv := d.New
		f.Deletion = &dv
	}
	for _, id := range op.Removed {
		if _, ok := m.Fragment(id); !ok {
			return fmt.Errorf("fragment %d no longer exists", id)
		}
	}
	m.Fragments = slices.DeleteFunc(m.Fragments, func(f Fragment) bool { return slices.Contains(op.Removed, f.ID) })
	return nil
}

// applyRewrite replaces each group's old fragments by its new ones, at the position of the
// group's first old fragment. Indexes keep their coverage lists (pruneIndexCoverage then
// drops the old fragments): the new fragments are not covered (queries scan them) until
// an index build covers them, or a segment of the rewrite does (rewriteSegments).
//
// New fragments get ids from NextFragmentID, in group order. A writer that built index
// segments for them predicted those ids and set them as the new fragments' ID; it
// returns the new ids that were predicted right (a rewrite rebuilt on top of a version
// that took ids meanwhile, an append, gets others).
func (m *Manifest) applyRewrite(groups []RewriteGroup) (map[uint32]bool, error) {
	predicted := map[uint32]bool{}
	for _, g := range groups {
		if len(g.Old) == 0 {
			return nil, fmt.Errorf("rewrite group without old fragments")
		}
		pos := -1
		for _, id := range g.Old {
			i := slices.IndexFunc(m.Fragments, func(f Fragment) bool { return f.ID == id })
			if i < 0 {
				return nil, fmt.Errorf("fragment %d no longer exists", id)
			}
			if pos < 0 || i < pos {
				pos = i
			}
		}
		if err := m.checkFieldIDs(g.New); err != nil {
			return nil, err
		}
		fresh := make([]Fragment, len(g.New))
		for i, f := range g.New {
			if f.ID == m.NextFragmentID {
				predicted[f.ID] = true
			}
			f.ID = m.NextFragmentID
			m.NextFragmentID++
			fresh[i] = f
		}
		rest := slices.DeleteFunc(slices.Clone(m.Fragments), func(f Fragment) bool { return slices.Contains(g.Old, f.ID) })
		// pos counts fragments before the first old one, none of which were removed.
		m.Fragments = slices.Concat(rest[:pos], fresh, rest[pos:])
	}
	return predicted, nil
}

// rewriteSegments returns the index segments a rewrite built for its new fragments that
// still apply to m, the rewrite applied on its parent: a segment extends an index the
// parent has (same name, kind and fields: not dropped or replaced by another kind
// meanwhile) and covers only new fragments whose ids its writer predicted (the zone ids
// inside its objects are those). Others are left out, and their fragments stay uncovered
// (scanned): never an index describing rows it does not hold.
func (m *Manifest) rewriteSegments(segs []Index, predicted map[uint32]bool) []Index {
	var out []Index
	for _, ix := range segs {
		extends := slices.ContainsFunc(m.Indexes, func(o Index) bool {
			return o.Name == ix.Name && o.Kind == ix.Kind && slices.Equal(o.FieldIDs, ix.FieldIDs)
		})
		if extends && len(ix.Fragments) > 0 && !slices.ContainsFunc(ix.Fragments, func(id uint32) bool { return !predicted[id] }) {
			out = append(out, ix)
		}
	}
	return out
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

// addIndexes appends index segments, each on fields of the schema and covering only
// existing fragments none of the same name's segments covers.
func (m *Manifest) addIndexes(segs []Index) error {
	for _, ix := range segs {
		for _, id := range ix.FieldIDs {
			if !slices.Contains(m.Schema.FieldIDs, id) {
				return fmt.Errorf("index %q: field id %d is not in the schema", ix.Name, id)
			}
		}
		for _, other := range m.Indexes {
			if other.Name != ix.Name {
				continue
			}
			if other.Kind != ix.Kind || !slices.Equal(other.FieldIDs, ix.FieldIDs) {
				return fmt.Errorf("index %q: a segment of kind %s on fields %v joins one of kind %s on fields %v", ix.Name, ix.Kind, ix.FieldIDs, other.Kind, other.FieldIDs)
			}
			if shared := intersect(other.Fragments, ix.Fragments); len(shared) > 0 {
				return fmt.Errorf("index %q: segments %s and %s both cover fragments %v", ix.Name, other.UUID, ix.UUID, shared)
			}
		}
		m.Indexes = append(m.Indexes, ix)
	}
	return nil
}

// pruneIndexCoverage drops fragments that no longer exist from every index's coverage (a
// fragment removed by a delete, rewritten by compaction, replaced by an overwrite), so a
// fragment id in an index always names a fragment of this version. A segment left
// covering nothing is dropped when another segment of its name remains (each compaction
// adds zone-map segments for its new fragments and empties older ones, which would
// otherwise pile up, each read by every query and kept from garbage collection); an
// index all of whose segments cover nothing keeps its first, so the index stays (one
// built on an empty table covers nothing either).
func (m *Manifest) pruneIndexCoverage() {
	if len(m.Indexes) == 0 {
		return
	}
	live := make(map[uint32]bool, len(m.Fragments))
	for _, f := range m.Fragments {
		live[f.ID] = true
	}
	covering := map[string]bool{} // names with a segment that covers something
	for i := range m.Indexes {
		ix := &m.Indexes[i]
		if slices.ContainsFunc(ix.Fragments, func(id uint32) bool { return !live[id] }) {
			ix.Fragments = slices.DeleteFunc(slices.Clone(ix.Fragments), func(id uint32) bool { return !live[id] })
		}
		if len(ix.Fragments) > 0 {
			covering[ix.Name] = true
		}
	}
	kept := map[string]bool{}
	out := make([]Index, 0, len(m.Indexes))
	for _, ix := range m.Indexes {
		if len(ix.Fragments) == 0 && (covering[ix.Name] || kept[ix.Name]) {
			continue
		}
		kept[ix.Name] = true
		out = append(out, ix)
	}
	m.Indexes = out
}

// checkWALMerges checks a MergeWAL's shards against the parent's watermarks: at least one
// shard, each once, each a non-empty range starting at the shard's merged watermark.
func checkWALMerges(m *Manifest, ws []WALMerge) error {
	if len(ws) == 0 {
		return fmt.Errorf("merge_wal without a shard")
	}
	seen := map[string]bool{}
	for _, w := range ws {
		if w.To <= w.From {
			return fmt.Errorf("merge_wal of shard %q without a generation range (%d, %d]", w.Shard, w.From, w.To)
		}
		if seen[w.Shard] {
			return fmt.Errorf("merge_wal names shard %q twice", w.Shard)
		}
		seen[w.Shard] = true
		if got := m.WALMerged[w.Shard]; got != w.From {
			return fmt.Errorf("%w: shard %q: merged watermark is %d, the merge planned from %d", ErrWatermarkMoved, w.Shard, got, w.From)
		}
	}
	return nil
}

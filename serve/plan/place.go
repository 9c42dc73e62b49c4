package plan

import "fmt"

// capacity is the executors' free capacity during one pass: their budgets less the
// reservations of assignments on them and of this pass's placements.
type capacity struct {
	execs []Executor // by id
	free  map[string]int64
	used  map[string]map[Kind]int
	held  string // an executor held for the oldest Critical unit ("" none)
}

func newCapacity(execs []Executor, assigns []Assignment) *capacity {
	c := &capacity{execs: execs, free: map[string]int64{}, used: map[string]map[Kind]int{}}
	for _, e := range execs {
		c.free[e.ID] = e.Bytes
		c.used[e.ID] = map[Kind]int{}
	}
	for _, a := range assigns {
		if _, live := c.free[a.Executor]; live {
			c.reserve(a.Executor, a.Kind, max(a.Bytes, 0), max(a.Slots, 1))
		}
	}
	return c
}

func (c *capacity) reserve(exec string, k Kind, bytes int64, slots int) {
	c.free[exec] -= bytes
	c.used[exec][k] += slots
}

// choose is the executor for u (nil: none feasible). idle: only an executor none of
// whose slots of u's kind is in use.
func (c *capacity) choose(u Unit, idle bool) *Executor {
	var best *Executor
	for i := range c.execs {
		e := &c.execs[i]
		if e.ID == c.held || e.Bytes <= 0 || c.used[e.ID][u.Kind]+u.Slots > e.Slots[u.Kind] ||
			(idle && c.used[e.ID][u.Kind] > 0) || c.free[e.ID] < Reservation(u, *e) {
			continue
		}
		if best == nil || c.free[e.ID] > c.free[best.ID] { // execs are by id: ties keep the lower id
			best = e
		}
	}
	return best
}

// hold holds, for u, the executor it would fit best once work there finishes: one with
// slots of its kind and a budget, the most free bytes, then the lowest id.
func (c *capacity) hold(u Unit) {
	var best *Executor
	for i := range c.execs {
		e := &c.execs[i]
		if e.Bytes <= 0 || e.Slots[u.Kind] < u.Slots {
			continue
		}
		if best == nil || c.free[e.ID] > c.free[best.ID] {
			best = e
		}
	}
	if best != nil {
		c.held = best.ID
	}
}

// place walks cands (in order) and places what it can (the rules are Plan's).
func (ps *pass) place(cands []Unit) ([]Placement, []Skip) {
	limit := ps.in.MaxPlacements
	if limit <= 0 {
		limit = DefaultMaxPlacements
	}
	c := newCapacity(ps.execs, ps.assigns)
	turns := map[string]Kind{} // this pass's write turns by table
	preps := map[string]Kind{} // this pass's preparations by table
	var (
		placed  []Placement
		skips   []Skip
		blocked bool // a unit above Tail was left unplaced for capacity or the cap
		heldFor string
	)
	for _, u := range cands {
		skip := func(r SkipReason, detail string) {
			uu := u
			skips = append(skips, Skip{Table: u.Table, Kind: u.Kind, Reason: r, Unit: &uu, Detail: detail})
		}
		if k, ok := turns[u.Table]; ok && TakesWriteTurn(u.Kind) {
			skip(SkipTurnHeld, fmt.Sprintf("the write turn goes to %s in this pass", k))
			continue
		}
		if k, ok := preps[u.Table]; ok && preparation(u.Kind) {
			skip(SkipPreparationSlot, fmt.Sprintf("the preparation slot goes to %s in this pass", k))
			continue
		}
		tail := u.Class == ClassTail
		if tail && blocked {
			skip(SkipBelowThreshold, "tail work waits for idle capacity; higher classes wait for capacity")
			continue
		}
		if len(placed) >= limit {
			skip(SkipPlacementsCapped, fmt.Sprintf("this pass placed its maximum of %d", limit))
			blocked = blocked || !tail
			continue
		}
		e := c.choose(u, tail)
		if e == nil {
			switch {
			case tail:
				skip(SkipBelowThreshold, fmt.Sprintf("tail work waits for an executor with every %s slot free", u.Kind))
			case c.held != "":
				skip(SkipNoCapacity, fmt.Sprintf("no live executor has a free %s slot and the bytes; executor %s is held for %s", u.Kind, c.held, heldFor))
			default:
				skip(SkipNoCapacity, fmt.Sprintf("no live executor has a free %s slot and the bytes (estimate %d; 0 unknown)", u.Kind, u.Bytes))
			}
			if !tail {
				blocked = true
			}
			if u.Class == ClassCritical && c.held == "" { // the oldest Critical unit left unplaced
				if c.hold(u); c.held != "" {
					heldFor = fmt.Sprintf("%s on %s", u.Kind, u.Table)
				}
			}
			continue
		}
		b := Reservation(u, *e)
		c.reserve(e.ID, u.Kind, b, u.Slots)
		placed = append(placed, Placement{Unit: u, Executor: e.ID, Bytes: b})
		if TakesWriteTurn(u.Kind) {
			turns[u.Table] = u.Kind
		} else if preparation(u.Kind) {
			preps[u.Table] = u.Kind
		}
	}
	return placed, skips
}

package gc

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func stamps(now time.Time, vs ...uint64) []Stamp {
	out := make([]Stamp, len(vs))
	for i, v := range vs {
		// version v was planned (100-v) minutes before now
		out[i] = Stamp{Version: v, Timestamp: now.Add(-time.Duration(100-v) * time.Minute).UnixNano()}
	}
	return out
}

func TestFloor(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	all := stamps(now, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)
	cases := []struct {
		name string
		vs   []Stamp
		b    Bounds
		p    Policy
		want uint64
	}{
		{"keep last 3", all, Bounds{Published: 12, Head: 12}, Policy{KeepLast: 3}, 10},
		{"default keep last 10", all, Bounds{Published: 12, Head: 12}, Policy{}, 3},
		{"keep last more than present", all, Bounds{Published: 12, Head: 12}, Policy{KeepLast: 50}, 1},
		{"negative keep last keeps HEAD", all, Bounds{Published: 12, Head: 12}, Policy{KeepLast: -1}, 12},
		{"published below the last N", all, Bounds{Published: 5, Head: 12}, Policy{KeepLast: 2}, 5},
		{"unpublished HEAD above published", all, Bounds{Published: 11, Head: 12}, Policy{KeepLast: 1}, 11},
		{"no pointer keeps all", all, Bounds{Published: 0, Head: 12}, Policy{KeepLast: 1}, 0},
		{"low watermark", all, Bounds{Published: 12, Head: 12, LowWatermark: 4, HasLow: true}, Policy{KeepLast: 1}, 4},
		{"low watermark above the floor", all, Bounds{Published: 12, Head: 12, LowWatermark: 11, HasLow: true}, Policy{KeepLast: 3}, 10},
		{"low watermark 0 keeps all", all, Bounds{Published: 12, Head: 12, LowWatermark: 0, HasLow: true}, Policy{KeepLast: 1}, 0},
		// versions 1..12 were planned 99..88 minutes ago; newer than 95 min: v6 (94 min) on
		{"keep newer", all, Bounds{Published: 12, Head: 12}, Policy{KeepLast: 1, KeepNewer: 95 * time.Minute}, 6},
		{"keep newer than everything", all, Bounds{Published: 12, Head: 12}, Policy{KeepLast: 1, KeepNewer: time.Minute}, 12},
		{"gaps from an earlier gc", stamps(now, 7, 8, 9, 10, 11, 12), Bounds{Published: 12, Head: 12}, Policy{KeepLast: 10}, 7},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Floor(c.vs, c.b, c.p, now); got != c.want {
				t.Fatalf("Floor = %d, want %d", got, c.want)
			}
		})
	}
	if got := Expired(all, 4); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("Expired below 4 = %v", got)
	}
}

// TestFloorProperties: random histories and bounds; the floor never passes the
// published version, HEAD or the low watermark, and keeps at least KeepLast versions.
func TestFloorProperties(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	now := time.Now()
	for range 2000 {
		var vs []Stamp
		v := uint64(r.IntN(5))
		n := 1 + r.IntN(30)
		for range n {
			v += 1 + uint64(r.IntN(2))
			vs = append(vs, Stamp{Version: v, Timestamp: now.Add(-time.Duration(r.IntN(100)) * time.Minute).UnixNano()})
		}
		head := vs[len(vs)-1].Version
		b := Bounds{Head: head, Published: uint64(r.IntN(int(head) + 1)), LowWatermark: uint64(r.IntN(int(head) + 2)), HasLow: r.IntN(2) == 0}
		p := Policy{KeepLast: r.IntN(12) - 1, KeepNewer: time.Duration(r.IntN(3)) * 30 * time.Minute}
		f := Floor(vs, b, p, now)
		kept := len(vs) - len(Expired(vs, f))
		switch {
		case f > head || f > b.Published || (b.HasLow && f > b.LowWatermark):
			t.Fatalf("seed %d: floor %d passes a bound %+v", seed, f, b)
		case kept < min(max(p.KeepLast, 1), len(vs)) && p.KeepLast != 0:
			t.Fatalf("seed %d: kept %d versions, policy %+v", seed, kept, p)
		}
		for _, s := range vs {
			if p.KeepNewer > 0 && s.Timestamp > now.Add(-p.KeepNewer).UnixNano() && s.Version < f {
				t.Fatalf("seed %d: version %d is newer than %s but expires (floor %d)", seed, s.Version, p.KeepNewer, f)
			}
		}
	}
}

func TestClassify(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	old, young := now.Add(-2*time.Hour), now.Add(-time.Minute)
	r := &Refs{
		Files:    map[string]bool{"t/data/a.arrow": true, "t/_deletions/1-5-ab.dv": true, "t/_indices/ix/part": true},
		Txns:     map[uint64]string{5: "t/_txn/5-WIN.txn"},
		Head:     6,
		Prefixes: []string{"t/data/OP1/"},
		Cutoff:   now.Add(-time.Hour),
	}
	cases := []struct {
		key  string
		mod  time.Time
		want Class
	}{
		{"t/data/a.arrow", old, Referenced},
		{"t/data/b.arrow", old, Garbage},
		{"t/data/b.arrow", young, Young},
		{"t/data/OP1/x.arrow", old, Protected},
		{"t/data/OP2/x.arrow", old, Garbage},
		{"t/_deletions/1-5-ab.dv", old, Referenced},
		{"t/_deletions/1-4-cd.dv", old, Garbage},
		{"t/_txn/5-WIN.txn", old, Referenced},
		{"t/_txn/5-LOSE.txn", old, Garbage},
		{"t/_txn/5-LOSE.txn", young, Young},
		{"t/_txn/2-EXPIRED.txn", old, Garbage},
		{"t/_txn/7-FLIGHT.txn", young, InFlight},
		{"t/_txn/7-DEAD.txn", old, Garbage},
		{"t/_txn/bad.txn", old, Unknown},
		{"t/_versions/" + "18446744073709551610.manifest", old, ManifestObj},
		{"t/_versions/junk", old, Unknown},
		{"t/_indices/ix/part", old, Referenced},
		{"t/_indices/other", old, Garbage}, // index objects no retained version references (fenced first when their transaction did not commit)
		{"u/data/b.arrow", old, Unknown},
	}
	for _, c := range cases {
		if got := Classify("t", c.key, c.mod, r); got != c.want {
			t.Errorf("Classify(%s, mod %s) = %s, want %s", c.key, now.Sub(c.mod), got, c.want)
		}
	}
}

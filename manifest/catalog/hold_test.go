package catalog

import (
	"errors"
	"testing"
	"time"
)

func TestHoldLifecycle(t *testing.T) {
	ctx := testCtx(t)
	c := newCatalog(t)
	if hs, err := c.Holds(ctx, "t"); err != nil || len(hs) != 0 {
		t.Fatalf("holds on fresh catalog = %v, %v", hs, err)
	}
	a, err := c.AcquireHold(ctx, Hold{ID: "op1", Table: "t", Kind: "compaction", Version: 7}, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.AcquireHold(ctx, Hold{ID: "pin1", Table: "t", Kind: "pin", Version: 4}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AcquireHold(ctx, Hold{ID: "op1", Table: "t", Version: 9}, 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("second hold with one id: err = %v, want ErrInvalid", err)
	}
	if _, err := c.AcquireHold(ctx, Hold{ID: "other", Table: "u", Version: 1}, 0); err != nil {
		t.Fatal(err)
	}
	hs, err := c.Holds(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if lw, ok := LowWatermark(hs); !ok || lw != 4 || len(hs) != 2 {
		t.Fatalf("holds %+v: low watermark %d %v, want 4 over 2 holds", hs, lw, ok)
	}
	if all, _ := c.Holds(ctx, ""); len(all) != 3 {
		t.Fatalf("holds on every table = %d, want 3", len(all))
	}
	if hs[0].Holder == "" || hs[0].Started.IsZero() {
		t.Fatalf("holder/started not filled in: %+v", hs[0])
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatalf("second release: %v", err)
	}
	if ok, _ := c.HoldExists(ctx, "t", "pin1"); ok {
		t.Fatal("released hold still exists")
	}
	if err := a.Move(ctx, 12); err != nil {
		t.Fatal(err)
	}
	hs, _ = c.Holds(ctx, "t")
	if lw, _ := LowWatermark(hs); lw != 12 {
		t.Fatalf("after move low watermark = %d, want 12", lw)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Lost():
	case <-ctx.Done():
		t.Fatal("Lost not closed after release")
	}
	if err := a.Move(ctx, 13); !errors.Is(err, ErrHoldLost) {
		t.Fatalf("move after release: err = %v, want ErrHoldLost", err)
	}
	if ok, _ := c.HoldExists(ctx, "t", "op1"); ok {
		t.Fatal("move after release re-created the hold")
	}
}

// A hold whose keep-alive stops (its process died) disappears within its TTL.
func TestHoldExpiresWithoutKeepAlive(t *testing.T) {
	ctx := testCtx(t)
	c := newCatalog(t)
	h, err := c.AcquireHold(ctx, Hold{ID: "dead", Table: "t", Version: 3}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	h.cancel() // stop keep-alives without revoking: what a killed process leaves
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, err := c.HoldExists(ctx, "t", "dead")
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("hold still present 20 s after its 1 s lease stopped being kept alive")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestLowWatermarkEmpty(t *testing.T) {
	if _, ok := LowWatermark(nil); ok {
		t.Fatal("no holds must give ok=false")
	}
}

// TestFastForwardExistingNeverCreates: FastForwardExisting moves an existing pointer
// forward and refuses (ErrNoPointer, nothing written) when the pointer is absent.
func TestFastForwardExistingNeverCreates(t *testing.T) {
	ctx := testCtx(t)
	c := newCatalog(t)
	if _, err := c.FastForwardExisting(ctx, "t", ptr(3)); !errors.Is(err, ErrNoPointer) {
		t.Fatalf("on an absent pointer: %v, want ErrNoPointer", err)
	}
	if _, _, err := c.Get(ctx, "t"); !errors.Is(err, ErrNoPointer) {
		t.Fatalf("pointer after the refusal: %v, want still absent", err)
	}
	if _, err := c.FastForward(ctx, "t", ptr(1)); err != nil {
		t.Fatal(err)
	}
	if p, err := c.FastForwardExisting(ctx, "t", ptr(3)); err != nil || p.Version != 3 {
		t.Fatalf("on an existing pointer: %+v, %v", p, err)
	}
	if p, err := c.FastForwardExisting(ctx, "t", ptr(2)); err != nil || p.Version != 3 {
		t.Fatalf("behind the pointer: %+v, %v; want success leaving 3", p, err)
	}
}

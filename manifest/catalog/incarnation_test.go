package catalog

import (
	"errors"
	"strings"
	"testing"
)

// inc returns ptr(v) as a version of incarnation id, created at version since.
func inc(v uint64, id string, since uint64) Pointer {
	p := ptr(v)
	p.Incarnation, p.Since = id, since
	return p
}

// TestPointerIncarnationEncoding: the incarnation fields round-trip, are omitted when
// empty, and a pointer written without them (an older build) still decodes.
func TestPointerIncarnationEncoding(t *testing.T) {
	p := inc(9, "01INC", 4)
	b := p.Encode()
	if !strings.Contains(string(b), `"incarnation":"01INC"`) || !strings.Contains(string(b), `"incarnation_since":4`) {
		t.Fatalf("encoding %s lacks the incarnation", b)
	}
	if got, err := DecodePointer(b); err != nil || got != p {
		t.Fatalf("round trip: %+v %v, want %+v", got, err, p)
	}
	if b := ptr(9).Encode(); strings.Contains(string(b), "incarnation") {
		t.Fatalf("a pointer without an incarnation encodes one: %s", b)
	}
}

// TestPublishRefusesEarlierIncarnation (issue 8 item 10): no publish mode moves a pointer
// of a later incarnation for a version of an earlier one (a writer of a dropped table,
// whose version landed in a number the drop freed), whether the version is below or above
// the pointer, with or without an id (a manifest of an older build). A pointer of an
// earlier incarnation (a drop, then a create not yet published) is replaced like any
// pointer behind. A pointer of an older build at our version does not diverge.
func TestPublishRefusesEarlierIncarnation(t *testing.T) {
	ctx := testCtx(t)
	c := newCatalog(t)
	if _, err := c.FastForward(ctx, "t", inc(3, "A", 1)); err != nil {
		t.Fatal(err)
	}
	// Dropped (marker 4) and created again at 5 as B: B's create replaces A's pointer.
	if _, err := c.FastForward(ctx, "t", inc(5, "B", 5)); err != nil {
		t.Fatalf("new incarnation over the old one's pointer: %v", err)
	}
	for _, u := range []Update{
		{Table: "t", Mode: FastForward, Pointer: inc(2, "A", 1)},
		{Table: "t", Mode: FastForwardExisting, Pointer: inc(3, "A", 1)},
		{Table: "t", Mode: FastForward, Pointer: inc(9, "A", 1)}, // above the pointer, other id
		{Table: "t", Mode: FastForward, Pointer: inc(3, "", 0)},  // an older build's version below B
		{Table: "t", Mode: CAS, Expected: 5, Pointer: inc(6, "A", 1)},
	} {
		err := c.PublishMany(ctx, []Update{u})
		if !errors.Is(err, ErrIncarnation) {
			t.Fatalf("%v %+v over B's pointer: %v, want ErrIncarnation", u.Mode, u.Pointer, err)
		}
		if got, _, _ := c.Get(ctx, "t"); got != inc(5, "B", 5) {
			t.Fatalf("%v %+v moved the pointer to %+v", u.Mode, u.Pointer, got)
		}
	}
	// B's own writers, and an older build's version above B's first version, publish.
	if _, err := c.FastForwardExisting(ctx, "t", inc(6, "B", 5)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.FastForward(ctx, "t", inc(7, "", 0)); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := c.Get(ctx, "t"); got != inc(7, "B", 5) {
		t.Fatalf("an older build's version dropped the pointer's incarnation: %+v", got)
	}
	// A pointer written by an older build (no incarnation) at our version is ours.
	if err := c.Delete(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.FastForward(ctx, "t", ptr(8)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.FastForward(ctx, "t", inc(8, "B", 5)); err != nil {
		t.Fatalf("same version, pointer without incarnation: %v", err)
	}
	if err := c.CompareAndSwap(ctx, "t", 7, inc(8, "B", 5)); err != nil {
		t.Fatalf("CAS retry that landed, pointer without incarnation: %v", err)
	}
}

// TestDeleteDroppedSparesLaterIncarnation: a drop removes its incarnation's pointer (or
// an earlier one's), never a later incarnation's (a drop that finishes after the table
// was created again).
func TestDeleteDroppedSparesLaterIncarnation(t *testing.T) {
	ctx := testCtx(t)
	c := newCatalog(t)
	if _, err := c.FastForward(ctx, "t", inc(6, "B", 5)); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.DeleteDropped(ctx, "t", inc(4, "A", 1)); err != nil || ok {
		t.Fatalf("A's drop removed B's pointer: %v %v", ok, err)
	}
	if ok, err := c.DeleteDropped(ctx, "t", inc(4, "", 0)); err != nil || ok {
		t.Fatalf("an older build's drop below B removed B's pointer: %v %v", ok, err)
	}
	if ok, err := c.DeleteDropped(ctx, "t", inc(9, "B", 5)); err != nil || !ok {
		t.Fatalf("B's drop: %v %v", ok, err)
	}
	if _, _, err := c.Get(ctx, "t"); !errors.Is(err, ErrNoPointer) {
		t.Fatalf("after B's drop: %v", err)
	}
	if ok, err := c.DeleteDropped(ctx, "t", inc(9, "B", 5)); err != nil || ok {
		t.Fatalf("again: %v %v", ok, err)
	}
	// An older build's pointer (no incarnation) goes with the drop of any incarnation at
	// or above it.
	if _, err := c.FastForward(ctx, "t", ptr(3)); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.DeleteDropped(ctx, "t", inc(4, "A", 1)); err != nil || !ok {
		t.Fatalf("drop over an older build's pointer: %v %v", ok, err)
	}
}

package catalog

import (
	"errors"
	"testing"
)

func TestDecide(t *testing.T) {
	at := func(v uint64) state { return state{ptr: ptr(v), present: true, modRev: 7} }
	diverged := ptr(5)
	diverged.Checksum++
	for _, tc := range []struct {
		name    string
		u       Update
		s       state
		want    decision
		wantErr error
	}{
		{"ff onto absent", Update{Table: "t", Mode: FastForward, Pointer: ptr(1)}, state{}, write, nil},
		{"ff behind", Update{Table: "t", Mode: FastForward, Pointer: ptr(5)}, at(4), write, nil},
		{"ff equal", Update{Table: "t", Mode: FastForward, Pointer: ptr(5)}, at(5), met, nil},
		{"ff ahead", Update{Table: "t", Mode: FastForward, Pointer: ptr(5)}, at(9), met, nil},
		{"ff diverged", Update{Table: "t", Mode: FastForward, Pointer: diverged}, at(5), met, ErrDiverged},
		{"cas from absent", Update{Table: "t", Mode: CAS, Expected: 0, Pointer: ptr(1)}, state{}, write, nil},
		{"cas expected", Update{Table: "t", Mode: CAS, Expected: 4, Pointer: ptr(5)}, at(4), write, nil},
		{"cas already ours", Update{Table: "t", Mode: CAS, Expected: 4, Pointer: ptr(5)}, at(5), met, nil},
		{"cas moved on", Update{Table: "t", Mode: CAS, Expected: 4, Pointer: ptr(5)}, at(6), met, ErrConflict},
		{"cas absent but expected", Update{Table: "t", Mode: CAS, Expected: 4, Pointer: ptr(5)}, state{}, met, ErrConflict},
		{"cas present but expected absent", Update{Table: "t", Mode: CAS, Expected: 0, Pointer: ptr(5)}, at(1), met, ErrConflict},
	} {
		got, err := decide(tc.u, tc.s)
		if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
			t.Errorf("%s: error %v, want %v", tc.name, err, tc.wantErr)
			continue
		}
		if err == nil && got != tc.want {
			t.Errorf("%s: decision %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestGoalMet(t *testing.T) {
	at := func(v uint64) state { return state{ptr: ptr(v), present: true} }
	ff := Update{Table: "a", Mode: FastForward, Pointer: ptr(3)}
	cas := Update{Table: "b", Mode: CAS, Expected: 1, Pointer: ptr(2)}
	for _, tc := range []struct {
		states []state
		want   bool
	}{
		{[]state{at(3), at(2)}, true},
		{[]state{at(9), at(2)}, true},
		{[]state{at(2), at(2)}, false}, // fast-forward not reached
		{[]state{at(3), at(3)}, false}, // CAS target overtaken: not provably ours
		{[]state{{}, at(2)}, false},
	} {
		if _, ok := goalMet([]Update{ff, cas}, tc.states); ok != tc.want {
			t.Errorf("goalMet(%+v) = %v, want %v", tc.states, ok, tc.want)
		}
	}
}

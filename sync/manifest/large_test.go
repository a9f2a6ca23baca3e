package manifest

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func sized(e Entry, size int64) Entry {
	e.Size = size
	return e
}

// A manifest that holds a file over the cap (a guest that did not leave
// it out) loses it, and the file is named with its size and the cap;
// the host's own untouched file over the cap stays, unnamed.
func TestLeaveOutLarge(t *testing.T) {
	hostsBig := sized(fileE("hosts-big", "h"), 5<<30)
	m := &Manifest{Entries: []Entry{
		fileE("a", "a"), sized(fileE("big", "b"), 3<<30), dirE("d"), sized(fileE("d/big", "c"), 1<<30+1), hostsBig, fileE("z", "z"),
	}}
	known := &Manifest{Entries: []Entry{hostsBig}}
	got, left := LeaveOutLarge(m, known, Limits{})
	var paths []string
	for _, e := range got.Entries {
		paths = append(paths, e.Path)
	}
	if diff := cmp.Diff([]string{"a", "d", "hosts-big", "z"}, paths); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	want := []Exclusion{
		{Path: "big", Reason: ReasonTooLarge, Rule: "3221225472 bytes, over the 1073741824-byte cap", Size: 3 << 30},
		{Path: "d/big", Reason: ReasonTooLarge, Rule: "1073741825 bytes, over the 1073741824-byte cap", Size: 1<<30 + 1},
	}
	if diff := cmp.Diff(want, left); diff != "" {
		t.Errorf("left out (-want +got):\n%s", diff)
	}
	if len(m.Entries) != 6 {
		t.Error("LeaveOutLarge changed its argument")
	}
	if err := got.Validate(Limits{MaxFileSize: -1, MaxTotalBytes: -1}); err != nil {
		t.Errorf("the result is not a valid manifest: %v", err)
	}
	if same, left := LeaveOutLarge(m, nil, Limits{MaxFileSize: -1}); same != m || left != nil {
		t.Error("no cap, yet something was left out")
	}
}

// The attack: the baseline has big.bin small, the guest makes it 3 GiB
// sparse (its walk leaves it out), and adds a new 3 GiB file. Neither may
// read as a change: big.bin is not deleted, new.bin is absent; the other
// edit stays.
func TestKeepLeftOutIsNoChange(t *testing.T) {
	base := &Manifest{Entries: []Entry{
		fileE("a.txt", "a"), fileE("big.bin", "small"), dirE("dir"), fileE("dir/x", "x"), fileE("dir/y", "y"),
	}}
	// What the guest's walk found: a.txt edited, big.bin and new.bin
	// left out, dir replaced by a huge file (its entries gone too).
	guest := &Manifest{Entries: []Entry{fileE("a.txt", "edited")}}
	skipped := []Exclusion{
		{Path: "big.bin", Reason: ReasonTooLarge, Size: 3 << 30},
		{Path: "dir", Reason: ReasonTooLarge, Size: 3 << 30},
		{Path: "new.bin", Reason: ReasonTooLarge, Size: 3 << 30},
		{Path: "fifo", Reason: ReasonSpecial},
	}
	got := KeepLeftOut(guest, base, skipped)
	changes := Diff(base, got)
	if len(changes) != 1 || changes[0].Path != "a.txt" || changes[0].Kind != Modified {
		t.Fatalf("changes %+v, want only a.txt modified", changes)
	}
	if _, ok := got.Lookup("new.bin"); ok {
		t.Error("new.bin, left out, is in the manifest")
	}
	if err := got.Validate(Limits{}); err != nil {
		t.Errorf("the result is not a valid manifest: %v", err)
	}
	if len(guest.Entries) != 1 {
		t.Error("KeepLeftOut changed its argument")
	}
}

// Skipped paths come from the guest: one the guest's manifest holds is
// left as it is, and nothing of the baseline is put under a parent the
// guest made a link or a file.
func TestKeepLeftOutHostile(t *testing.T) {
	base := &Manifest{Entries: []Entry{dirE("d"), fileE("d/secret", "s"), dirE("e"), fileE("e/f", "f"), fileE("kept", "k")}}
	guest := &Manifest{Entries: []Entry{
		{Path: "d", Type: Symlink, Mode: SymlinkMode, Target: "/etc"}, fileE("e", "now a file"), fileE("kept", "guest's"),
	}}
	skipped := []Exclusion{
		{Path: "d/secret", Reason: ReasonTooLarge, Size: 5 << 30},
		{Path: "e/f", Reason: ReasonTooLarge, Size: 5 << 30},
		{Path: "kept", Reason: ReasonTooLarge, Size: 5 << 30},
	}
	got := KeepLeftOut(guest, base, skipped)
	if diff := cmp.Diff(guest, got); diff != "" {
		t.Errorf("manifest changed (-want +got):\n%s", diff)
	}
}

// The decoder takes files left out for their size only with a path an
// entry could have and a size over the host's cap, and counts them with
// the entries, not against MaxSkipped.
func TestDecodeListingTooLarge(t *testing.T) {
	ok := `{"id":"n","entries":[],"skipped":[{"path":"big.bin","reason":"too-large","rule":"r","size":5368709120}]}`
	ls, err := DecodeListing(strings.NewReader(ok), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ls.Skipped) != 1 || ls.Skipped[0].Size != 5<<30 {
		t.Errorf("skipped %+v", ls.Skipped)
	}
	var many []string
	for i := range MaxSkipped + 5 {
		many = append(many, `{"path":"f`+strings.Repeat("x", i)+`","reason":"too-large","size":2000000000}`)
	}
	if _, err := DecodeListing(strings.NewReader(`{"id":"n","entries":[],"skipped":[`+strings.Join(many, ",")+`]}`), Limits{}); err != nil {
		t.Errorf("%d files left out for their size: %v", len(many), err)
	}
	for _, tc := range []struct {
		name, skipped string
		limits        Limits
		want          error
	}{
		{"under-cap", `{"path":"a","reason":"too-large","size":10}`, Limits{}, ErrInvalid},
		{"no-size", `{"path":"a","reason":"too-large"}`, Limits{}, ErrInvalid},
		{"dir", `{"path":"a","dir":true,"reason":"too-large","size":5368709120}`, Limits{}, ErrInvalid},
		{"dot-dot", `{"path":"../a","reason":"too-large","size":5368709120}`, Limits{}, ErrInvalid},
		{"git", `{"path":".git/config","reason":"too-large","size":5368709120}`, Limits{}, ErrInvalid},
		{"size-on-other", `{"path":"p","reason":"special-file","size":5}`, Limits{}, ErrInvalid},
		{"counts-as-entries", strings.Join(many[:3], ","), Limits{MaxEntries: 2}, ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeListing(strings.NewReader(`{"id":"n","entries":[],"skipped":[`+tc.skipped+`]}`), tc.limits)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

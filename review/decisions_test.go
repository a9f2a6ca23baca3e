package review

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecisionsJSONRoundTrip(t *testing.T) {
	var d Decisions
	d.SetFile("a.txt", Approve)
	d.SetHunk("a.txt", 1, Reject)
	fd := d.Files["a.txt"]
	fd.Comment = "why line three?"
	fd.Hunks[1] = HunkDecision{Verdict: Reject, Comment: "keep line 25 alone"}
	d.Files["a.txt"] = fd
	d.SetFile("removed.txt", Reject)
	data, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var back Decisions
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(d, back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s\n%s", diff, data)
	}
}

func TestSelectionAndResolve(t *testing.T) {
	fx := newFixture(t, richOld, richNew, nil)
	f := fx.cs.File("a.txt")
	cases := []struct {
		name string
		d    func(*Decisions)
		want string
		mode bool
	}{
		{"nothing", func(*Decisions) {}, "", false},
		{"file", func(d *Decisions) { d.SetFile("a.txt", Approve) }, richNew.files["a.txt"], true},
		{"file minus hunk", func(d *Decisions) { d.SetFile("a.txt", Approve); d.SetHunk("a.txt", 0, Reject) },
			numbered(30, map[int]string{25: "line 25\nline 25b\n"}), true},
		{"one hunk", func(d *Decisions) { d.SetHunk("a.txt", 0, Approve) },
			numbered(30, map[int]string{3: "line three\n", 4: ""}), true},
		{"file rejected", func(d *Decisions) { d.SetFile("a.txt", Reject) }, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var d Decisions
			tc.d(&d)
			outs := d.Resolve(f)
			if !tc.mode {
				if len(outs) != 0 {
					t.Errorf("outcomes %+v", outs)
				}
				return
			}
			if len(outs) != 1 || string(outs[0].Content) != tc.want {
				t.Errorf("outcome %+v, want %q", outs, tc.want)
			}
		})
	}
	var d Decisions
	d.SetHunk("a.txt", 7, Approve)
	if err := d.Validate(fx.cs); err == nil {
		t.Error("hunk 7 of a 2-hunk file accepted")
	}
	d = Decisions{}
	d.SetFile("nope", Approve)
	if err := d.Validate(fx.cs); err == nil {
		t.Error("unknown file accepted")
	}
}

// TestJournalBeforeChange stops an apply before its first step: the
// project is untouched and the journal holds a backup of every file about
// to change.
func TestJournalBeforeChange(t *testing.T) {
	fx := newFixture(t, richOld, richNew, renames)
	project := copyTree(t, fx.oldDir)
	jd := journalDir(t)
	_, err := Apply(context.Background(), project, fx.cs, ApproveAll(fx.cs), ApplyOptions{JournalDir: jd, crash: func(done int) bool { return done == 0 }})
	if err != errCrashed {
		t.Fatal(err)
	}
	if diff := cmp.Diff(snapshot(t, fx.oldDir), snapshot(t, project)); diff != "" {
		t.Fatalf("project changed (-want +got):\n%s", diff)
	}
	j, err := ReadJournal(jd)
	if err != nil || j.State != Pending {
		t.Fatalf("journal %v %+v", err, j)
	}
	js := journalStore{dir: jd}
	for _, s := range j.Steps {
		for _, st := range []EntryState{s.Before, s.After} {
			if st.Type == "file" {
				if _, err := js.get(st.SHA256); err != nil {
					t.Errorf("%s: %v", s.Path, err)
				}
			}
		}
	}
	if _, err := os.Stat(filepath.Join(jd, journalFile)); err != nil {
		t.Fatal(err)
	}
}

package sandbox

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/app/audit"
)

// A sandbox's log and the store's verify; an edit of either shows, and
// the key is made 0600 in a 0700 keys/.
func TestAuditChained(t *testing.T) {
	s := newStore(t)
	sb, err := s.Create(Meta{Project: "/p", Image: "minimal"})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := sb.Audit(Event{Event: EventCommand, Data: map[string]any{"argv": "x"}}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := sb.VerifyAudit()
	if err != nil || res.Seq != 4 || res.Lines != 4 {
		t.Fatalf("VerifyAudit: %+v, %v", res, err)
	}
	if evs, err := sb.ReadAudit(); err != nil || len(evs) != 4 || evs[0].Event != EventCreated {
		t.Errorf("ReadAudit of a chained log: %d events, %v", len(evs), err)
	}
	home := filepath.Dir(s.Dir())
	for p, want := range map[string]os.FileMode{filepath.Join(home, "keys"): 0o700, filepath.Join(home, "keys", "audit.key"): 0o600} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, want mode %v", p, err, want)
		}
	}
	other, _ := s.Create(Meta{Project: "/q"})
	if err := s.Remove(other.ID, false); err != nil {
		t.Fatal(err)
	}
	if res, err := s.VerifyAudit(); err != nil || res.Seq != 1 {
		t.Errorf("the store's log: %+v, %v", res, err)
	}
	raw, _ := sb.AuditRaw()
	os.WriteFile(sb.Path(auditFile), bytes.Replace(raw, []byte(`"argv":"x"`), []byte(`"argv":"y"`), 1), 0o600)
	var ae *audit.Error
	if _, err := sb.VerifyAudit(); !errors.As(err, &ae) || ae.Line != 2 {
		t.Errorf("an edited line 2: %v", err)
	}
}

func TestReceipt(t *testing.T) {
	s := newStore(t)
	sb, _ := s.Create(Meta{Project: "/p"})
	os.WriteFile(sb.Path(BaselineFile), []byte(`{"files":[]}`), 0o600)
	sb.Audit(Event{Event: EventApplied, Data: map[string]any{"applied": []map[string]any{{"path": "a.go", "before_sha256": "b1", "after_sha256": "a1"}}}})
	r, err := sb.Receipt()
	if err != nil {
		t.Fatal(err)
	}
	if r.AuditSeq != 2 || len(r.Changes) != 1 || r.Changes[0].After != "a1" || r.Verify != "not run" || r.Baseline == "" {
		t.Errorf("receipt %+v", r)
	}
	if strings.Contains(r.Changes[0].Path, "a.go") {
		t.Error("the receipt names a path; it holds hashes only")
	}
	if err := sb.CheckReceipt(r); err != nil {
		t.Fatal(err)
	}
	// The log grows: the receipt still matches its line.
	sb.Audit(Event{Event: EventCommand})
	if err := sb.CheckReceipt(r); err != nil {
		t.Errorf("after the log grew: %v", err)
	}
	forged := r
	forged.AuditHead = strings.Repeat("1", 64)
	if err := sb.CheckReceipt(forged); err == nil {
		t.Error("an edited receipt checked")
	}
	os.WriteFile(sb.Path(BaselineFile), []byte(`{"files":[1]}`), 0o600)
	if err := sb.CheckReceipt(r); err == nil || !strings.Contains(err.Error(), "baseline") {
		t.Errorf("a receipt of another baseline: %v", err)
	}
}

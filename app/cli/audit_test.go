package cli

import (
	"bytes"
	"encoding/json"
	"github.com/airlock-dev/airlock/app/cli/clitest/auditcheck"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlock-dev/airlock/app/sandbox"
)

// auditHome is a home with one sandbox whose log has a few lines.
func auditHome(t *testing.T) (string, *sandbox.Sandbox) {
	t.Helper()
	home := t.TempDir()
	st, err := sandbox.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := st.Create(sandbox.Meta{Project: "/p"})
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(sb.Path(sandbox.BaselineFile), []byte(`{"files":[]}`), 0o600)
	if err := sb.Audit(sandbox.Event{Event: sandbox.EventCommand, Data: map[string]any{"text": "hello"}}); err != nil {
		t.Fatal(err)
	}
	return home, sb
}

func TestAuditVerify(t *testing.T) {
	home, sb := auditHome(t)
	auditcheck.Skip(t, home) // it tampers with the log
	code, out, errOut := run(t, home, "", "audit", "verify")
	if code != 0 || !strings.Contains(out, sb.ID+"  ok (2 lines, signed by key ") || !strings.Contains(out, "store     ok (empty)") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, _ = run(t, home, "", "--json", "audit", "verify", sb.ID)
	var checks []auditCheck
	if err := json.Unmarshal([]byte(out), &checks); code != 0 || err != nil || len(checks) != 1 || checks[0].Status != "ok" || checks[0].Seq != 2 {
		t.Fatalf("--json: exit %d, %q, %v", code, out, err)
	}
	// A line edited: its key replaced by a terminal control sequence,
	// which the reason quotes; it must not reach the terminal raw.
	raw, _ := sb.AuditRaw()
	lines := bytes.SplitAfter(raw, []byte("\n"))
	var line map[string]any
	json.Unmarshal(lines[1], &line)
	line["key"] = "\x1b]0;pwned\x07\x1b[2J"
	edited, _ := json.Marshal(line)
	os.WriteFile(sb.Path("audit.jsonl"), append(append(lines[0], edited...), '\n'), 0o600)
	code, out, errOut = run(t, home, "", "audit", "verify")
	if code == 0 || !strings.Contains(out, sb.ID+"  TAMPERED at line 2: signed by key ") || !strings.Contains(errOut, "1 of 2 audit logs do not verify") {
		t.Errorf("a tampered log: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if strings.ContainsAny(out+errOut, "\x1b\x07") {
		t.Errorf("a control sequence from the log was printed raw: %q", out)
	}
}

// Old sandboxes' logs read as unchained, not as tampered.
func TestAuditVerifyUnchained(t *testing.T) {
	home, sb := auditHome(t)
	os.Remove(sb.Path(sandbox.AuditHeadFile))
	os.WriteFile(sb.Path("audit.jsonl"), []byte(`{"time":"2026-01-01T00:00:00Z","event":"created"}`+"\n"), 0o600)
	code, out, _ := run(t, home, "", "audit", "verify", sb.ID)
	if code != 0 || !strings.Contains(out, "unchained (1 lines, made before the audit chain)") {
		t.Errorf("exit %d, %q", code, out)
	}
}

func TestAuditReceipt(t *testing.T) {
	home, sb := auditHome(t)
	file := filepath.Join(t.TempDir(), "receipt.json")
	if code, out, errOut := run(t, home, "", "audit", "export", sb.ID, "--out", file); code != 0 || !strings.Contains(out, "written to") {
		t.Fatalf("export: exit %d, %q, %q", code, out, errOut)
	}
	code, out, errOut := run(t, home, "", "audit", "verify", "--receipt", file)
	if code != 0 || !strings.Contains(out, "receipt ") || !strings.Contains(out, ": ok") {
		t.Fatalf("verify --receipt: exit %d, %q, %q", code, out, errOut)
	}
	data, _ := os.ReadFile(file)
	os.WriteFile(file, bytes.Replace(data, []byte(`"verify": "not run"`), []byte(`"verify": "passed"`), 1), 0o600)
	if code, _, errOut := run(t, home, "", "audit", "verify", "--receipt", file); code == 0 || !strings.Contains(errOut, "bad signature") {
		t.Errorf("an edited receipt: exit %d, %q", code, errOut)
	}
	if code, out, _ := run(t, home, "", "audit", "export", sb.ID); code != 0 || !strings.Contains(out, `"audit_head"`) {
		t.Errorf("export to stdout: exit %d, %q", code, out)
	}
	// The key's folder is an entry the home may hold, and private.
	checkHomeLayout(t, home)
	if _, err := os.Stat(filepath.Join(home, "keys", "audit.key")); err != nil {
		t.Fatal(err)
	}
	checkKeyModes(t, home)
}

// Package auditcheck is the check at the end of every CLI test that each
// sandbox the test left has an audit log that verifies (its chain and
// signatures, app/audit): app/cli/clitest's Run and app/cli's own test
// helpers call AtEnd. It is a package of its own so that app/cli's
// tests, which clitest imports, can call it too.
//
// It is for tests only, like app/cli/clitest. It must not import
// app/cli, app/gui or a hypervisor package.
package auditcheck

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/airlock-dev/airlock/app/audit"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/testkit/testenv"
)

// auditChecks are the homes whose audit logs a test's end checks, by
// test and home.
var auditChecks sync.Map // auditKey → *auditCheck

type auditKey struct {
	t    testing.TB
	home string
}

type auditCheck struct {
	skip   bool
	before map[string]bool // sandboxes there already, in the shared home
}

// AtEnd has the end of t check the audit log of every sandbox in home
// and fail t if one does not verify (a log made before the chain is
// fine). In the shared test home (testenv.Home), which other packages
// use at the same time, only the sandboxes made while t ran are checked.
// Calling it again for the same t and home is free.
func AtEnd(t testing.TB, home string) {
	k := auditKey{t, home}
	if _, loaded := auditChecks.LoadOrStore(k, &auditCheck{}); loaded {
		return
	}
	c, _ := auditChecks.Load(k)
	if abs, _ := filepath.Abs(home); abs == testenv.Home(t) {
		c.(*auditCheck).before = sandboxIDs(home)
	}
	t.Cleanup(func() {
		defer auditChecks.Delete(k)
		if !c.(*auditCheck).skip {
			checkAudits(t, home, c.(*auditCheck).before)
		}
	})
}

// Skip is for a test that tampers with an audit log on purpose: its end
// checks nothing in home.
func Skip(t testing.TB, home string) {
	AtEnd(t, home)
	c, _ := auditChecks.Load(auditKey{t, home})
	c.(*auditCheck).skip = true
}

func sandboxIDs(home string) map[string]bool {
	ids := map[string]bool{}
	des, _ := os.ReadDir(filepath.Join(home, "sandboxes"))
	for _, de := range des {
		if sandbox.ValidID(de.Name()) {
			ids[de.Name()] = true
		}
	}
	return ids
}

// checkAudits fails t for each sandbox of home, not in skip, whose audit
// log does not verify. A sandbox gone meanwhile is not a failure.
func checkAudits(t testing.TB, home string, skip map[string]bool) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(home, "sandboxes")); err != nil {
		return
	}
	st, err := sandbox.Open(home)
	if err != nil {
		t.Errorf("check the audit logs: %v", err)
		return
	}
	for id := range sandboxIDs(home) {
		if skip[id] {
			continue
		}
		sb, err := st.Get(id)
		if err != nil {
			continue
		}
		var ae *audit.Error
		if _, err := sb.VerifyAudit(); errors.As(err, &ae) {
			t.Errorf("the audit log of sandbox %s does not verify: %v", id, err)
		}
	}
}

//go:build cgo

package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/airlock-dev/airlock/app/cli"
	"github.com/airlock-dev/airlock/app/egress"
	"github.com/airlock-dev/airlock/app/gui"
	"github.com/airlock-dev/airlock/app/plan"
)

// errPlanned stops a run once its plan has been seen.
var errPlanned = errors.New("planned")

// TestAppPlansAsTheCLI starts a run through the desktop app's service
// with no limits chosen and the same run with airlock run and no flags:
// the two plans are the same (limits from the user's config.toml and the
// project's airlock.toml, network and secrets, image, command, verify,
// workspace disk), and both differ from Airlock's bare defaults where the
// configuration says so.
func TestAppPlansAsTheCLI(t *testing.T) {
	cfg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	t.Setenv("ANTHROPIC_API_KEY", "sk-plan-test")
	write(t, filepath.Join(cfg, "airlock", "config.toml"), `
[limits]
timeout = "20m"
memory = "1G"
disk = "2G"
idle_ttl = "5m"

[network]
allow = ["pypi.org"]
`)
	project := t.TempDir()
	write(t, filepath.Join(project, "airlock.toml"), `
verify = "make test"

[limits]
cpus = 1
timeout = "10m"
`)
	home := t.TempDir()

	for _, tc := range []struct {
		name string
		args []string
		req  gui.RunRequest
	}{
		{"agent preset", []string{"--agent", "claude", "--prompt", "fix it"}, gui.RunRequest{Agent: "claude", Prompt: "fix it"}},
		{"command", []string{"--", "sh", "-c", "make"}, gui.RunRequest{Command: []string{"sh", "-c", "make"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var fromCLI *plan.Plan
			var stderr bytes.Buffer
			args := append([]string{"--home", home, "run", "--project", project}, tc.args...)
			cli.Main(args, strings.NewReader(""), &bytes.Buffer{}, &stderr, cli.WithPlanHook(func(p *plan.Plan) error {
				fromCLI = p
				return errPlanned
			}))
			if fromCLI == nil {
				t.Fatalf("airlock run planned nothing: %s", stderr.String())
			}

			var setup cli.GUISetup
			cli.Main([]string{"--home", home, "gui"}, strings.NewReader(""), &bytes.Buffer{}, &stderr, cli.WithGUI(func(_ context.Context, s cli.GUISetup) error {
				setup = s
				return nil
			}))
			var fromApp *plan.Plan
			svc := &gui.StoreService{Store: setup.Store, Planner: setup.Planner, OnPlan: func(p *plan.Plan) error {
				fromApp = p
				return errPlanned
			}}
			req := tc.req
			req.Project = project
			if _, err := svc.Run(t.Context(), req); !errors.Is(err, errPlanned) {
				t.Fatalf("the app's run: %v", err)
			}

			if diff := cmp.Diff(fromCLI, fromApp, planCompare...); diff != "" {
				t.Errorf("the app's plan differs from airlock run's (-cli +app):\n%s", diff)
			}
			o := fromApp.Runs[0]
			if got := fromApp.Limits; got.Timeout.String() != "10m0s" || got.Memory.String() != "1G" || got.CPUs != 1 || got.Disk.String() != "2G" || got.IdleTTL.String() != "5m0s" {
				t.Errorf("limits %s, want the user's and the project's", got)
			}
			if o.Timeout.String() != "10m0s" || o.DiskSize != 2<<30 || o.Verify != "make test" {
				t.Errorf("run: timeout %s, disk %d, verify %q", o.Timeout, o.DiskSize, o.Verify)
			}
			if o.Network == nil || !hasRule(o.Network.Policy.Allow, "pypi.org") {
				t.Fatalf("network %+v, want the user's allow-list", o.Network)
			}
			if tc.req.Agent != "" {
				if o.Image != "full" || !hasRule(o.Network.Policy.Allow, "api.anthropic.com") || len(o.Network.Policy.Secrets) != 1 || o.Network.Policy.Secrets[0].Value != "sk-plan-test" {
					t.Errorf("agent run: image %q, policy %+v", o.Image, o.Network.Policy)
				}
			}
		})
	}
}

// planCompare compares plans as data: functions (boot, preflight, the
// proxy's request line) are the planner's own, and a secret's
// placeholder is fresh in every plan.
var planCompare = []cmp.Option{
	cmp.FilterPath(func(p cmp.Path) bool { return p.Last().Type().Kind() == reflect.Func }, cmp.Ignore()),
	cmpopts.IgnoreUnexported(plan.Plan{}),
	cmpopts.IgnoreFields(egress.Secret{}, "Placeholder"),
	cmpopts.EquateEmpty(),
}

func hasRule(rules []egress.Rule, host string) bool {
	for _, r := range rules {
		if r.Host == host {
			return true
		}
	}
	return false
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

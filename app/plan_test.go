//go:build cgo

package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/airlock-dev/airlock/app/cli"
	"github.com/airlock-dev/airlock/app/egress"
	"github.com/airlock-dev/airlock/app/gui"
	"github.com/airlock-dev/airlock/app/images"
	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/app/plan"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/testkit/testenv"
	"github.com/airlock-dev/airlock/vm"
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
	for _, name := range []string{"minimal", images.AgentsImage} {
		testenv.FakeImage(t, home, name, vm.Arch(runtime.GOARCH), map[string]string{"agent": "1000:1000"})
	}

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
				if o.Image != "agents" || !hasRule(o.Network.Policy.Allow, "api.anthropic.com") || len(o.Network.Policy.Secrets) != 1 || o.Network.Policy.Secrets[0].Value != "sk-plan-test" {
					t.Errorf("agent run: image %q, policy %+v", o.Image, o.Network.Policy)
				}
			}
		})
	}
}

// planCompare compares plans as data: functions (boot, the proxy's
// request line) are the planner's own, and a secret's
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

// TestAppStopsSendBackMidBoot sends a sandbox back from the desktop
// app's service and cancels the round while its VM boots, as the review
// window's Stop does: the round ends with the cancellation, the sandbox
// says it was interrupted, and no process of its VM is left.
func TestAppStopsSendBackMidBoot(t *testing.T) {
	testenv.SkipIfShort(t)
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	home := testenv.VMHome(t)
	var setup cli.GUISetup
	var stderr bytes.Buffer
	cli.Main([]string{"--home", home, "gui"}, strings.NewReader(""), &bytes.Buffer{}, &stderr, cli.WithGUI(func(_ context.Context, s cli.GUISetup) error {
		setup = s
		return nil
	}))
	if setup.Planner == nil {
		t.Fatalf("airlock gui set nothing up: %s", stderr.String())
	}
	svc := &gui.StoreService{Store: setup.Store, Planner: setup.Planner}
	project := t.TempDir()
	write(t, filepath.Join(project, "a.txt"), "one\n")
	small := gui.RunRequest{Project: project, CPUs: 1, MemoryMiB: 512}
	req := small
	req.Command = []string{"sh", "-c", "echo two >> a.txt"}
	res, err := svc.Run(t.Context(), req)
	if err != nil {
		t.Fatalf("first round: %v", err)
	}
	id := res.Sandbox.ID

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	runDir := filepath.Join(home, "run", id)
	var booting atomic.Bool
	svc.OnPlan = func(p *plan.Plan) error {
		boot := p.Runs[0].Boot
		p.Runs[0].Boot = func(bctx context.Context, a pipeline.Attach) (pipeline.Machine, error) {
			// Stop as soon as the round's VM has processes (its
			// supervisor, then QEMU): the VM is booting.
			go func() {
				for ctx.Err() == nil {
					if len(processesNaming(runDir)) > 0 {
						booting.Store(true)
						cancel()
						return
					}
					time.Sleep(5 * time.Millisecond)
				}
			}()
			return boot(bctx, a)
		}
		return nil
	}
	if _, err := svc.Reply(ctx, gui.ReplyRequest{ID: id, Message: "keep going"}); err == nil || !booting.Load() {
		t.Fatalf("the round stopped while its VM booted: %v (stopped mid-boot: %v)", err, booting.Load())
	}
	m, err := res.Sandbox.Meta()
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != sandbox.StatusFailed || !strings.HasPrefix(m.Error, "interrupted") {
		t.Errorf("after the stop the sandbox is %s: %q", m.Status, m.Error)
	}
	// The VM's processes (its supervisor, QEMU) name the run directory.
	deadline := time.Now().Add(15 * time.Second)
	for {
		left := processesNaming(runDir)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of the stopped round's VM are still running: %v", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// processesNaming lists the processes of the machine whose run directory
// is dir: its supervisor names dir, QEMU is named after the machine
// (-name guest=airlock-NAME, NAME the directory's base name).
func processesNaming(dir string) []string {
	var out []string
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, c := range cmdlines {
		b, err := os.ReadFile(c)
		if err == nil && (strings.Contains(string(b), dir) || strings.Contains(string(b), "airlock-"+filepath.Base(dir)+"\x00")) {
			out = append(out, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

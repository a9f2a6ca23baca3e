package plan

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/app/config"
	"github.com/airlock-dev/airlock/app/egress"
	"github.com/airlock-dev/airlock/app/images"
	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/testkit/testenv"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/image"
)

// testPlanner plans in a fresh home with the user's config.toml holding
// userConfig ("" for none), made-up minimal, agent and "mine" images
// (their user agent is 1000:1000), and a backend that is never started.
func testPlanner(t *testing.T, userConfig string) (*Planner, *[]string) {
	t.Helper()
	pl := &Planner{Home: t.TempDir(), Arch: "amd64", Getenv: func(k string) string {
		if k == "ANTHROPIC_API_KEY" || k == "CODEX_API_KEY" {
			return "sk-test"
		}
		return ""
	}}
	for _, name := range []string{image.DefaultName, images.AgentsImage, "mine"} {
		testenv.FakeImage(t, pl.Home, name, vm.AMD64, map[string]string{"agent": "1000:1000"})
	}
	var notes []string
	pl.Note = func(s string) { notes = append(notes, s) }
	pl.Backend = func(time.Duration) (vm.Backend, error) { return nil, nil }
	if userConfig != "" {
		pl.UserConfig = filepath.Join(t.TempDir(), "config.toml")
		writeFile(t, pl.UserConfig, userConfig)
	}
	return pl, &notes
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestPlanRun(t *testing.T) {
	for _, tc := range []struct {
		name    string
		user    string
		project string // airlock.toml
		req     Request
		check   func(t *testing.T, p *Plan, notes []string)
		err     string
	}{
		{name: "defaults", req: Request{Command: []string{"true"}}, check: func(t *testing.T, p *Plan, _ []string) {
			d := config.DefaultLimits()
			o := p.Runs[0]
			if len(p.Runs) != 1 || p.Limits != d || o.Timeout != time.Hour || o.DiskSize != int64(d.Disk) || o.Image != "minimal" || o.Arch != "amd64" || o.Sync != "disk" || o.BaseDisks == "" || o.Owner != (pipeline.Owner{}) {
				t.Errorf("plan %+v, run %+v", p, o)
			}
			if o.Network == nil || len(o.Network.Policy.Allow) != 0 || o.Boot == nil {
				t.Errorf("network %+v", o.Network)
			}
		}},
		{name: "project narrows, cannot widen", user: "[limits]\ntimeout = \"30m\"\n", project: "[limits]\ntimeout = \"2h\"\ncpus = 1\n", req: Request{Command: []string{"true"}},
			check: func(t *testing.T, p *Plan, notes []string) {
				if p.Limits.Timeout.Std() != 30*time.Minute || p.Limits.CPUs != 1 {
					t.Errorf("limits %s", p.Limits)
				}
				if len(notes) != 1 || !strings.Contains(notes[0], "timeout") {
					t.Errorf("notes %q", notes)
				}
			}},
		{name: "request wins", user: "[limits]\ntimeout = \"30m\"\n", req: Request{Command: []string{"true"}, Limits: config.Limits{Timeout: config.Duration(time.Minute), Disk: config.Unlimited}},
			check: func(t *testing.T, p *Plan, _ []string) {
				if p.Runs[0].Timeout != time.Minute || p.Runs[0].DiskSize != 0 {
					t.Errorf("timeout %s, disk %d", p.Runs[0].Timeout, p.Runs[0].DiskSize)
				}
			}},
		{name: "agents × fan-out", req: Request{Agents: []string{"claude", "codex"}, Prompt: "x", FanOut: 2, Parallel: 3}, check: func(t *testing.T, p *Plan, _ []string) {
			var agents []string
			for _, o := range p.Runs {
				agents = append(agents, o.Agent+":"+o.Image)
			}
			// No full image in the test home: the agent image, fetched
			// before the run, stands in.
			if strings.Join(agents, " ") != "claude:agents claude:agents codex:agents codex:agents" || p.Parallel != 3 {
				t.Errorf("attempts %v, parallel %d", agents, p.Parallel)
			}
		}},
		{name: "image given wins over the preset's", req: Request{Agents: []string{"claude"}, Prompt: "x", Image: "mine"}, check: func(t *testing.T, p *Plan, _ []string) {
			if p.Runs[0].Image != "mine" {
				t.Errorf("image %q", p.Runs[0].Image)
			}
		}},
		{name: "verify: project, request, none", project: "verify = \"make\"\n", req: Request{Command: []string{"true"}}, check: func(t *testing.T, p *Plan, _ []string) {
			if p.Runs[0].Verify != "make" {
				t.Errorf("verify %q", p.Runs[0].Verify)
			}
		}},
		{name: "no verify", project: "verify = \"make\"\n", req: Request{Command: []string{"true"}, Verify: "x", NoVerify: true}, check: func(t *testing.T, p *Plan, _ []string) {
			if p.Runs[0].Verify != "" {
				t.Errorf("verify %q", p.Runs[0].Verify)
			}
		}},
		{name: "prompt of a command", req: Request{Command: []string{"true"}, Prompt: "do it", Env: map[string]string{"A": "1"}}, check: func(t *testing.T, p *Plan, _ []string) {
			if e := p.Runs[0].Env; e["AIRLOCK_PROMPT"] != "do it" || e["A"] != "1" {
				t.Errorf("env %v", e)
			}
		}},
		{name: "agent without a prompt runs interactively", req: Request{Agents: []string{"claude"}}, check: func(t *testing.T, p *Plan, _ []string) {
			if p.Runs[0].FinalMessage != nil || p.Runs[0].Command[0] != "claude" {
				t.Errorf("run %+v", p.Runs[0].Command)
			}
		}},
		{name: "open network has no proxy", user: "open_network = true\n", req: Request{Agents: []string{"claude"}, Prompt: "x"}, check: func(t *testing.T, p *Plan, notes []string) {
			if !p.OpenNetwork || p.Runs[0].Network != nil || !p.Runs[0].OpenNetwork {
				t.Errorf("open %v, network %+v", p.OpenNetwork, p.Runs[0].Network)
			}
			if len(notes) != 1 || !strings.Contains(notes[0], "no API key") {
				t.Errorf("notes %q", notes)
			}
		}},
		{name: "unknown agent", req: Request{Agents: []string{"nope"}, Prompt: "x"}, err: "no agent \"nope\": known agents are claude, codex, demo, gemini"},
		{name: "agent twice", req: Request{Agents: []string{"claude", "claude"}, Prompt: "x"}, err: "asked for twice"},
		{name: "too many attempts", req: Request{Command: []string{"true"}, FanOut: 17}, err: "give 1 to 16"},
		{name: "keep with fan-out", req: Request{Command: []string{"true"}, FanOut: 2, Keep: true}, err: "keep one sandbox's VM"},
		{name: "bad sync", req: Request{Command: []string{"true"}, Sync: "rsync"}, err: "sync"},
		{name: "bad allow", req: Request{Command: []string{"true"}, Allow: []string{"a b"}}, err: "allow a b"},
		{name: "registry preset in --allow", req: Request{Command: []string{"true"}, Allow: []string{"@go", "@npm (GET,HEAD,PUT)"}}, check: func(t *testing.T, p *Plan, _ []string) {
			var got []string
			for _, r := range p.Runs[0].Network.Policy.Allow {
				got = append(got, r.Label()+" ["+r.Origin()+"]")
			}
			want := []string{
				"@go proxy.golang.org:443 (GET,HEAD) [flag @go]",
				"@go sum.golang.org:443 (GET,HEAD) [flag @go]",
				"@npm registry.npmjs.org:443 (GET,HEAD,PUT) [flag @npm]",
				"@npm registry.yarnpkg.com:443 (GET,HEAD,PUT) [flag @npm]",
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("allow\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if !p.Runs[0].Network.Policy.Inspects() {
				t.Error("a policy with a registry preset does not ask for the CA that enforces its methods")
			}
		}},
		{name: "unknown registry preset in --allow", req: Request{Command: []string{"true"}, Allow: []string{"@cargo"}}, err: "no registry preset @cargo; the presets are @npm, @pypi, @go, @crates, @rubygems, @maven, @debian, @docker, @ghcr, @mcr"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pl, notes := testPlanner(t, tc.user)
			project := t.TempDir()
			if tc.project != "" {
				writeFile(t, filepath.Join(project, config.FileName), tc.project)
			}
			req := tc.req
			req.Project = project
			p, err := pl.Run(context.Background(), req)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			tc.check(t, p, *notes)
		})
	}
}

// TestPlanUntrustedProject: what a project's airlock.toml would widen
// stops the plan with an UntrustedError until confirmed; a confirmation
// is remembered.
func TestPlanUntrustedProject(t *testing.T) {
	pl, _ := testPlanner(t, "")
	project := t.TempDir()
	writeFile(t, filepath.Join(project, config.FileName), "[network]\nallow = [\"evil.example\"]\n")
	_, err := pl.Run(context.Background(), Request{Project: project, Command: []string{"true"}})
	var untrusted *UntrustedError
	if !errors.As(err, &untrusted) || len(untrusted.Asks) != 1 || !strings.Contains(err.Error(), "airlock trust "+project) {
		t.Fatalf("untrusted project: %v", err)
	}
	for _, confirm := range []bool{true, false} { // confirmed once, then remembered
		p, err := pl.Run(context.Background(), Request{Project: project, Command: []string{"true"}, TrustProject: confirm})
		if err != nil {
			t.Fatal(err)
		}
		if !hasHost(p, "evil.example") {
			t.Errorf("confirmed project's host not allowed: %+v", p.Runs[0].Network.Policy.Allow)
		}
		p.Close()
	}
}

// TestPlanDemoAgent: the demo agent's fake model runs while the plan is
// open, its address allowed and in the agent's environment; Close stops
// it.
func TestPlanDemoAgent(t *testing.T) {
	pl, _ := testPlanner(t, "")
	p, err := pl.Run(context.Background(), Request{Project: t.TempDir(), Agents: []string{"demo"}, Prompt: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Runs[0].Prompt != "x" {
		t.Errorf("the run records prompt %q, want the user's x", p.Runs[0].Prompt)
	}
	url := p.Runs[0].Env["AIRLOCK_DEMO_API"]
	addr := strings.TrimPrefix(url, "http://")
	if url == "" || !hasHost(p, strings.Split(addr, ":")[0]) {
		t.Fatalf("demo model %q not allowed: %+v", url, p.Runs[0].Network.Policy.Allow)
	}
	if resp, err := http.Get(url); err != nil {
		t.Errorf("the fake model does not answer: %v", err)
	} else {
		resp.Body.Close()
	}
	p.Close()
	p.Close()
	if resp, err := http.Get(url); err == nil {
		resp.Body.Close()
		t.Error("the fake model still answers after Close")
	}
}

func hasHost(p *Plan, host string) bool {
	for _, r := range p.Runs[0].Network.Policy.Allow {
		if r.Host == host {
			return true
		}
	}
	return false
}

// TestPlanExec: a fresh VM's command gets the user's limits and
// network; the plan boots the minimal image by default.
func TestPlanExec(t *testing.T) {
	pl, _ := testPlanner(t, "[limits]\ntimeout = \"3m\"\nmemory = \"1G\"\n[network]\nallow = [\"pypi.org\"]\n")
	p, err := pl.Exec(context.Background(), ExecRequest{Allow: []string{"example.org"}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Timeout != 3*time.Minute || p.Launch.MemoryMiB != 1024 || p.Launch.Image != "minimal" || p.Network == nil || len(p.Network.Policy.Allow) != 2 {
		t.Errorf("exec plan %+v", p)
	}
	p, err = pl.Exec(context.Background(), ExecRequest{Allow: []string{"@debian"}})
	if err != nil {
		t.Fatal(err)
	}
	if d := p.Network.Policy.Decide(egress.Request{Host: "deb.debian.org", Port: 80, Method: "GET"}); !d.Allowed || d.Rule != "@debian deb.debian.org (GET,HEAD)" {
		t.Errorf("exec --allow @debian: apt's GET is %+v", d)
	}
	if _, err := pl.Exec(context.Background(), ExecRequest{Allow: []string{"@apt"}}); err == nil || !strings.Contains(err.Error(), "no registry preset @apt") {
		t.Errorf("exec --allow @apt: %v", err)
	}
	if _, err := pl.Exec(context.Background(), ExecRequest{Sandbox: "nosuch"}); err == nil {
		t.Error("exec in a sandbox that does not exist was planned")
	}
}

// TestDockerRunSignsInToRegistries: a run with Docker inside its VM that
// allows a registry the host's Docker configuration signs in to gets that
// sign-in as the proxy's credential, once for all its attempts, and says
// so; a run without Docker gets none.
func TestDockerRunSignsInToRegistries(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "config.json"), `{"auths": {"ghcr.io": {"auth": "Z2g6cHc="}}}`)
	t.Setenv("DOCKER_CONFIG", dir)
	pl, notes := testPlanner(t, "")
	project := t.TempDir()
	ctx := context.Background()
	p, err := pl.Run(ctx, Request{Project: project, Command: []string{"true"}, Image: "mine", Docker: true, Allow: []string{"@ghcr"}, FanOut: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range p.Runs {
		creds := o.Network.Policy.Credentials
		if len(creds) != 1 || creds[0].Authorization != "Basic Z2g6cHc=" || !slices.Equal(creds[0].Hosts, []string{"ghcr.io"}) {
			t.Errorf("attempt %d: credentials %+v", i, creds)
		}
	}
	said := 0
	for _, n := range *notes {
		if strings.Contains(n, "Docker's pulls from ghcr.io sign in as you") {
			said++
		}
	}
	if said != 1 {
		t.Errorf("the sign-in said %d times: %q", said, *notes)
	}
	plain, err := pl.Run(ctx, Request{Project: project, Command: []string{"true"}, Image: "mine", Allow: []string{"@ghcr"}})
	if err != nil {
		t.Fatal(err)
	}
	if creds := plain.Runs[0].Network.Policy.Credentials; len(creds) != 0 {
		t.Errorf("a run without Docker has credentials: %+v", creds)
	}
}

// TestDockerOnImageWithoutOCIRecord: Docker asked for on a project with
// no environment of its own is installed on the agent image; one that
// has no OCI record (here a fake one) is refused with the reason, and
// keying the environment does not crash on the missing record.
func TestDockerOnImageWithoutOCIRecord(t *testing.T) {
	pl, _ := testPlanner(t, "")
	_, err := pl.Run(context.Background(), Request{Project: t.TempDir(), Command: []string{"true"}, Docker: true})
	if err == nil || !strings.Contains(err.Error(), "is not made from an OCI image") {
		t.Fatalf("plan: %v", err)
	}
}

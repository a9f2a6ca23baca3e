package plan

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/airlock-dev/airlock/app/config"
	"github.com/airlock-dev/airlock/app/home"
	"github.com/airlock-dev/airlock/app/images"
	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/app/sandbox"
)

// TestPlansAreComplete plans each kind of run (a run, a fan-out, a reply
// round, a command in a fresh VM) and checks that what the executor
// receives is plain data with every decision taken: the sync mode, the
// owner of the baseline disk, the image, the verify step, the excludes
// and the limits, compared whole.
func TestPlansAreComplete(t *testing.T) {
	pl, _ := testPlanner(t, "")
	project := t.TempDir()
	writeFile(t, filepath.Join(project, config.FileName), "verify = \"make check\"\nexclude = [\"build/\"]\n")
	ctx := context.Background()
	lim := config.DefaultLimits()
	want := pipeline.RunSpec{
		Project: project, Command: []string{"make"}, Image: "minimal", Arch: "amd64", Sync: sandbox.SyncDisk,
		BaseDisks: home.Layout{Root: pl.Home}.BaseDisks(), Excludes: []string{"build/"},
		Env:    pipeline.WithCacheEnv(nil),
		Cache:  filepath.Join(home.Layout{Root: pl.Home}.Caches(), projectKey(project), pipeline.CacheFile),
		Verify: "make check", Timeout: time.Hour, DiskSize: int64(lim.Disk), Resources: &lim, Limits: ManifestLimits(lim),
	}
	complete := func(t *testing.T, kind string, p *Plan, n int, want pipeline.RunSpec) {
		t.Helper()
		if len(p.Runs) != n {
			t.Fatalf("%s: %d runs, want %d", kind, len(p.Runs), n)
		}
		for i, o := range p.Runs {
			if diff := cmp.Diff(want, o.RunSpec, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s, run %d (-want +got):\n%s", kind, i, diff)
			}
			if o.Boot == nil || o.Network == nil {
				t.Errorf("%s, run %d: no way to boot (%v) or no network (%v)", kind, i, o.Boot != nil, o.Network != nil)
			}
		}
	}

	run, err := pl.Run(ctx, Request{Project: project, Command: []string{"make"}})
	if err != nil {
		t.Fatal(err)
	}
	complete(t, "run", run, 1, want)

	fan, err := pl.Run(ctx, Request{Project: project, Command: []string{"make"}, FanOut: 3, Parallel: 2})
	if err != nil {
		t.Fatal(err)
	}
	complete(t, "fan-out", fan, 3, want) // one spec; the executor numbers the attempts
	if !fan.FanOut() || fan.Parallel != 2 {
		t.Errorf("fan-out: FanOut %v, parallel %d", fan.FanOut(), fan.Parallel)
	}

	// An agent's run: its user's uid owns the baseline disk.
	agent, err := pl.Run(ctx, Request{Project: project, Agents: []string{"claude"}, Prompt: "fix it"})
	if err != nil {
		t.Fatal(err)
	}
	if o := agent.Runs[0]; o.Sync != sandbox.SyncDisk || o.User != "agent" || o.Owner != (pipeline.Owner{UID: 1000, GID: 1000}) || o.Image != images.AgentsImage {
		t.Errorf("agent run: sync %s, user %q, owner %+v, image %s", o.Sync, o.User, o.Owner, o.Image)
	}

	// A reply round of a command's sandbox in the copy mode: its project,
	// command, sync mode and verify, whatever airlock.toml says now.
	store, err := sandbox.Open(pl.Home)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := store.Create(sandbox.Meta{Project: project, Image: "minimal", Arch: "amd64", Command: []string{"make", "fix"}, SyncMode: sandbox.SyncCopy})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Update(func(m *sandbox.Meta) {
		m.Status, m.Verify = sandbox.StatusReady, &sandbox.VerifyResult{Command: "make old-check"}
	}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{sandbox.BaselineFile, sandbox.GuestFile} { // no changes
		if err := os.WriteFile(sb.Path(name), []byte(`{"entries":[]}`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	reply, err := pl.Run(ctx, Request{Reply: sb.ID, Message: "again"})
	if err != nil {
		t.Fatal(err)
	}
	wantReply := want
	wantReply.Command, wantReply.Sync, wantReply.Verify = []string{"make", "fix"}, sandbox.SyncCopy, "make old-check"
	complete(t, "reply", reply, 1, wantReply)
	if reply.Reply != sb.ID || reply.Message != "again" || reply.FanOut() {
		t.Errorf("reply job: %q %q fan-out %v", reply.Reply, reply.Message, reply.FanOut())
	}

	// A reply round of a sandbox that had Docker inside its VM starts
	// the engine again, and its Compose services.
	services := &sandbox.Services{File: []byte(`{"name":"airlock"}`), Names: []string{"db"}, Images: "/var/lib/airlock/compose-images/images.tar"}
	sbd, err := store.Create(sandbox.Meta{Project: project, Image: "minimal", Arch: "amd64", Command: []string{"make", "fix"}, SyncMode: sandbox.SyncCopy, Docker: true, Services: services})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sbd.Update(func(m *sandbox.Meta) { m.Status = sandbox.StatusReady }); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{sandbox.BaselineFile, sandbox.GuestFile} {
		if err := os.WriteFile(sbd.Path(name), []byte(`{"entries":[]}`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	dreply, err := pl.Run(ctx, Request{Reply: sbd.ID, Message: "again"})
	if err != nil {
		t.Fatal(err)
	}
	if !dreply.Runs[0].Docker || reply.Runs[0].Docker {
		t.Errorf("Docker in reply rounds: %v with it, %v without", dreply.Runs[0].Docker, reply.Runs[0].Docker)
	}
	if !cmp.Equal(dreply.Runs[0].Services, services) || reply.Runs[0].Services != nil {
		t.Errorf("Compose services in reply rounds: %+v with them, %+v without", dreply.Runs[0].Services, reply.Runs[0].Services)
	}

	// A command in a fresh VM: its limits, image and network.
	ex, err := pl.Exec(ctx, ExecRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if ex.Launch.Image != "minimal" || ex.Launch.Arch != "amd64" || ex.Timeout != time.Hour || ex.Limits != lim || ex.Network == nil {
		t.Errorf("exec plan: image %s/%s, timeout %s, limits %s, network %v", ex.Launch.Image, ex.Launch.Arch, ex.Timeout, ex.Limits, ex.Network != nil)
	}
}

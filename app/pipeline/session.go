package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/app/egress"
	"github.com/airlock-dev/airlock/app/machine/launch"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/guest"
	"github.com/airlock-dev/airlock/internal/headtail"
	"github.com/airlock-dev/airlock/review"
	"github.com/airlock-dev/airlock/sync/manifest"
	"github.com/airlock-dev/airlock/sync/transfer"
	"github.com/airlock-dev/airlock/vm"
)

// A workspace is how one sync mode puts the tree into the guest's
// /workspace and gets the changes back; the session is the same for
// every mode.
type workspace interface {
	// prepare makes, before the machine boots, what it must be started
	// with (a disk to attach, a directory to share); release undoes it
	// at the end of the session.
	prepare(ctx context.Context, report *manifest.Report) (Attach, error)
	release()
	// fill puts the tree into the booted machine's /workspace, for the
	// command's user: what the guest then knows of it, and how long it
	// took (a mode that filled it in prepare says so there).
	fill(ctx context.Context, m Machine, report *manifest.Report) (transfer.Known, int64, error)
	// transfer brings the changes back.
	transfer() Transfer
	// hostCopy says the changes are read from a copy on the host, which
	// the guest must no longer write: the VM stops (after verify)
	// before the collect.
	hostCopy() bool
	// collected is told the changes are in the content store.
	collected()
}

// workspace is the sync mode's workspace of this run.
func (r *runner) workspace() workspace {
	switch r.o.Sync {
	case sandbox.SyncVirtiofs:
		return &stagingWorkspace{r: r, dir: r.sb.Path(StagingDir)}
	case sandbox.SyncDisk:
		return &diskWorkspace{r: r, uid: r.o.Owner.UID, gid: r.o.Owner.GID}
	}
	return &copyWorkspace{r: r}
}

// session boots a VM, puts the tree base (the baseline, or a reply
// round's starting point) into /workspace, runs the command, collects
// what changed against base, and verifies.
func (r *runner) session(ctx context.Context, base *manifest.Manifest, report *manifest.Report) error {
	ws := r.workspace()
	att, err := ws.prepare(ctx, report)
	defer ws.release()
	if err != nil {
		return err
	}
	if r.o.Cache != "" {
		d, err := r.cacheDisk(ctx)
		if err != nil {
			return err
		}
		att.Disks = append(att.Disks, d)
	}
	promote := false
	defer func() { r.keepCache(promote) }()
	m, stop, err := r.boot(ctx, att)
	if err != nil {
		return err
	}
	defer stop()
	stopNet, err := r.startNetwork(ctx, m)
	if err != nil {
		return err
	}
	defer stopNet()
	known, pushMS, err := ws.fill(ctx, m, report)
	if err != nil {
		return err
	}
	if err := r.giveCache(ctx, m); err != nil {
		return err
	}
	if err := r.writeHosts(ctx, m); err != nil {
		return err
	}
	if r.o.Script != nil {
		if err := putScript(ctx, m, r.o.Script); err != nil {
			return err
		}
	}
	if r.o.Docker {
		if err := r.startDocker(ctx, m); err != nil {
			return err
		}
	}
	if r.o.Services != nil {
		if err := r.startServices(ctx, m); err != nil {
			return err
		}
	}
	if err := r.setStatus(sandbox.StatusRunning, func(tm *sandbox.Timings) { tm.PushMS = pushMS }); err != nil {
		return err
	}
	if err := r.startCommands(ctx, m); err != nil {
		return err
	}
	code, runMS, err := r.runCommand(ctx, m)
	if err != nil {
		return err
	}
	if ws.hostCopy() {
		// The VM stops before the host reads its copy: verify first.
		if err := r.verify(ctx, m); err != nil {
			return err
		}
		stop()
	}
	if err := r.collectChanges(ctx, ws, m, base, known, code, runMS); err != nil {
		return err
	}
	ws.collected()
	if !ws.hostCopy() {
		// After the collect, so the review holds the agent's changes
		// only, not what the verify command leaves behind (caches,
		// builds).
		if err := r.verify(ctx, m); err != nil {
			return err
		}
		if r.o.Keep {
			return r.keep(m)
		}
	}
	// The caches the run filled become the project's when it earned it;
	// the machine is off first, so the disk is whole.
	stop()
	promote = r.earnedCache(code)
	return nil
}

// earnedCache says whether the run's caches may become its project's:
// its verify passed, or without one its command exited 0.
func (r *runner) earnedCache(code int) bool {
	if r.o.Verify != "" {
		mt, err := r.sb.Meta()
		return err == nil && mt.Verify != nil && mt.Verify.Passed
	}
	return code == 0
}

// boot starts the machine with att and audits it; stop shuts it down
// (once; not a kept machine).
func (r *runner) boot(ctx context.Context, att Attach) (m Machine, stop func(), err error) {
	if err := r.setStatus(sandbox.StatusBooting, nil); err != nil {
		return nil, nil, err
	}
	if err := r.sb.Audit(sandbox.Event{Event: sandbox.EventLimits, Data: r.limitsEvent()}); err != nil {
		return nil, nil, err
	}
	t := time.Now()
	r.progress(Progress{Step: StepBoot, Message: fmt.Sprintf("booting %s (%s)", r.o.Image, r.o.Arch)})
	att.ID, att.Root = r.sb.ID, r.sb.Path(RootDiskFile)
	if m, err = r.o.Boot(ctx, att); err != nil {
		return nil, nil, fmt.Errorf("boot: %w", err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			if r.kept {
				return
			}
			r.progress(Progress{Step: StepStop, Message: "stopping the VM"})
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
			defer cancel()
			if err := m.Shutdown(sctx); err != nil {
				r.log.Warn("shutdown", "sandbox", r.sb.ID, "err", err)
			}
		})
	}
	bootMS := time.Since(t).Milliseconds()
	if err := r.sb.Audit(sandbox.Event{Event: sandbox.EventBooted, Data: map[string]any{"boot_ms": bootMS}}); err != nil {
		stop()
		return nil, nil, err
	}
	if _, err := r.sb.Update(func(mt *sandbox.Meta) { mt.Timings.BootMS = bootMS }); err != nil {
		stop()
		return nil, nil, err
	}
	return m, stop, nil
}

// startNetwork gives the guest its way out, when the run has a network;
// the returned function ends it.
func (r *runner) startNetwork(ctx context.Context, m Machine) (stop func(), err error) {
	if r.o.Network == nil {
		return func() {}, nil
	}
	n := *r.o.Network
	if n.Control == "" {
		n.Control = r.sb.Path(EgressSocket)
	}
	if n.Hold == nil {
		mt, err := r.sb.Meta()
		if err != nil {
			return nil, err
		}
		round := max(mt.Round, 1)
		n.Hold = func(h egress.Held) (int, error) { return r.sb.HoldAction(h, round) }
	}
	env, stop, err := StartNetwork(ctx, m, &n, r.sb.ID, func(ev sandbox.Event) {
		if err := r.sb.Audit(ev); err != nil {
			r.log.Warn("audit", "sandbox", r.sb.ID, "err", err)
		}
	})
	if err != nil {
		return nil, err
	}
	if err := writeFiles(ctx, m, r.o.User, n.Files); err != nil {
		stop()
		return nil, fmt.Errorf("network: %w", err)
	}
	r.netEnv = env
	return stop, nil
}

// collectChanges records how the command ended, collects what it
// changed through ws, and marks the sandbox ready for review.
func (r *runner) collectChanges(ctx context.Context, ws workspace, m Machine, base *manifest.Manifest, known transfer.Known, code int, runMS int64) error {
	if _, err := r.sb.Update(func(mt *sandbox.Meta) {
		mt.Status, mt.ExitCode, mt.Timings.RunMS = sandbox.StatusCollecting, &code, runMS
	}); err != nil {
		return err
	}
	t := time.Now()
	r.progress(Progress{Step: StepCollect, Message: "collecting"})
	if err := r.baselineStored(); err != nil {
		return err
	}
	if err := r.collect(ctx, ws.transfer(), m, base, known); err != nil {
		if r.killed.Load() {
			return fmt.Errorf("collect: the guest did not end the command at its %s time limit, so the host stopped the VM: %w", r.o.Timeout, err)
		}
		return fmt.Errorf("collect: %w", err)
	}
	collectMS := time.Since(t).Milliseconds()
	cs, err := r.changeset(ctx)
	if err != nil {
		return fmt.Errorf("collect: %w", err)
	}
	stats := sandbox.StatsOf(cs)
	if _, err := r.sb.Update(func(mt *sandbox.Meta) {
		mt.Status, mt.Guest, mt.Changes, mt.Timings.CollectMS = sandbox.StatusReady, sandbox.GuestFile, &stats, collectMS
	}); err != nil {
		return err
	}
	data := map[string]any{"changes": stats, "collect_ms": collectMS, "summary": r.res.Summary != ""}
	if fl := flaggedPaths(cs); len(fl) > 0 {
		data["flagged"] = fl
	}
	return r.sb.Audit(sandbox.Event{Event: sandbox.EventCollected, Data: data})
}

// changeset is the sandbox's changes for review, against its baseline:
// a first round's collect has diffed them already (decoding the two
// manifests of an 11.5k-file tree again took a fifth of an unchanged
// run's host time); a reply round's diffed against the round's start,
// so its total is read from the stored manifests.
func (r *runner) changeset(ctx context.Context) (*review.Changeset, error) {
	if r.round {
		return r.sb.Changeset(ctx)
	}
	return r.sb.ChangesetOf(ctx, r.changes)
}

// maxFlaggedAudit bounds the paths the audit log names per kind of flag;
// the changeset has them all.
const maxFlaggedAudit = 100

// flaggedPaths is, per kind of flag (review.FlagControl: control or bidi
// characters, …), the paths of the files of cs that carry it, for the
// audit log: at most maxFlaggedAudit, then "… and N more".
func flaggedPaths(cs *review.Changeset) map[review.FlagKind][]string {
	out := map[review.FlagKind][]string{}
	count := map[review.FlagKind]int{}
	for _, f := range cs.Files {
		for _, fl := range f.Flags {
			if count[fl.Kind]++; count[fl.Kind] <= maxFlaggedAudit {
				out[fl.Kind] = append(out[fl.Kind], f.Path)
			}
		}
	}
	for k, n := range count {
		if n > maxFlaggedAudit {
			out[k] = append(out[k], fmt.Sprintf("… and %d more", n-maxFlaggedAudit))
		}
	}
	return out
}

// keep leaves the machine running under its supervisor.
func (r *runner) keep(m Machine) error {
	d, ok := m.(Detacher)
	if !ok {
		return errors.New("keep: this machine cannot outlive the run")
	}
	if err := d.Detach(); err != nil {
		return fmt.Errorf("keep: %w", err)
	}
	r.kept = true
	r.progress(Progress{Step: StepStop, Message: "the VM keeps running (airlock stop " + r.sb.ID + " stops it)"})
	return nil
}

// commandUser is the guest user the command runs as: the run's, else the
// image's default ("" is root).
func (r *runner) commandUser(m Machine) string {
	if r.o.User != "" {
		return r.o.User
	}
	if d, ok := m.(DefaultUserer); ok {
		return d.DefaultUser()
	}
	return ""
}

// copyWorkspace is SyncCopy: the tree is pushed onto the VM's own disk
// (a workspace disk of DiskSize, else its root) and the changes pulled.
type copyWorkspace struct {
	r    *runner
	disk string // the workspace disk, if any
}

func (w *copyWorkspace) prepare(ctx context.Context, _ *manifest.Report) (Attach, error) {
	if w.r.o.DiskSize <= 0 {
		return Attach{}, nil
	}
	path := w.r.sb.Path(DiskFile)
	if err := CreateDisk(ctx, path, w.r.o.DiskSize, w.r.o.BaseDisks); err != nil {
		return Attach{}, err
	}
	w.disk = path
	return Attach{Disks: []launch.Disk{{Path: path, Mount: sandbox.Workspace}}}, nil
}

// release removes the workspace disk once the machine is gone (a kept
// machine keeps it): everything in it is in the content store by then.
func (w *copyWorkspace) release() {
	if w.disk != "" && !w.r.o.Keep {
		w.r.removeDisk(w.disk)
	}
}

func (w *copyWorkspace) fill(ctx context.Context, m Machine, report *manifest.Report) (transfer.Known, int64, error) {
	r := w.r
	if w.disk == "" {
		// Without a workspace disk, /workspace is on the machine's own
		// root: a root disk clone (full image) keeps the last round's
		// tree there, which must not mix with what is pushed now.
		var stderr bytes.Buffer
		// (busybox's find has no -delete; a glob that matches nothing
		// stays as it is, which rm -f ignores.)
		if err := m.Exec(ctx, "if cd "+sandbox.Workspace+" 2>/dev/null; then rm -rf -- ./* ./.[!.]* ./..?*; fi", nil, nil, &stderr); err != nil {
			return transfer.Known{}, 0, fmt.Errorf("empty %s in the VM: %w (%s)", sandbox.Workspace, err, strings.TrimSpace(stderr.String()))
		}
	}
	ms, known, err := r.push(ctx, r.o.Transfer, m, report, sandbox.Workspace)
	if err != nil {
		return known, 0, err
	}
	if r.user = r.commandUser(m); r.user != "" {
		if err := chownWorkspace(ctx, m, r.user); err != nil {
			return known, 0, err
		}
	}
	return known, ms, nil
}

func (w *copyWorkspace) transfer() Transfer { return w.r.o.Transfer }
func (w *copyWorkspace) hostCopy() bool     { return false }
func (w *copyWorkspace) collected()         {}

// stagingWorkspace is SyncVirtiofs: the tree is cloned into a staging
// directory of the sandbox before boot and shared into the guest; the
// host collects from the clone once the VM is gone.
type stagingWorkspace struct {
	r      *runner
	dir    string
	pushMS int64
}

func (w *stagingWorkspace) prepare(ctx context.Context, report *manifest.Report) (Attach, error) {
	ms, _, err := w.r.push(ctx, w.transfer(), nil, report, w.dir)
	if err != nil {
		return Attach{}, err
	}
	w.pushMS = ms
	return Attach{Shares: []launch.Share{{Share: vm.Share{Tag: WorkspaceTag, HostPath: w.dir}, Mount: sandbox.Workspace}}}, nil
}

func (w *stagingWorkspace) release() {}

// fill has nothing to do: the clone is /workspace. The staging clone
// is written as root on the host's side of the share; the user runs the
// command all the same.
func (w *stagingWorkspace) fill(_ context.Context, m Machine, _ *manifest.Report) (transfer.Known, int64, error) {
	w.r.user = w.r.commandUser(m)
	return transfer.Known{}, w.pushMS, nil
}

func (w *stagingWorkspace) transfer() Transfer { return stagingTransfer{root: w.dir} }
func (w *stagingWorkspace) hostCopy() bool     { return true }

// collected removes the clone: everything is in the content store now
// (a failed run keeps it for inspection).
func (w *stagingWorkspace) collected() {
	if err := os.RemoveAll(w.dir); err != nil {
		w.r.log.Warn("remove staging clone", "sandbox", w.r.sb.ID, "err", err)
	}
}

// startDocker starts the image's Docker Engine in the VM as root
// (airlock-guest docker-start), with the run's proxy variables and the
// trust store holding the sandbox CA, and waits until it answers.
func (r *runner) startDocker(ctx context.Context, m Machine) error {
	r.progress(Progress{Step: StepRun, Message: "starting Docker in the VM"})
	t := time.Now()
	words := []string{"env"}
	for _, k := range guest.DockerProxyEnv {
		if v, ok := r.netEnv[k]; ok {
			words = append(words, k+"="+v)
		}
	}
	words = append(words, transfer.DefaultAgentPath, "docker-start")
	if u := r.commandUser(m); u != "" {
		// Its Docker CLI configuration gets the containers' proxy.
		words = append(words, "--user", u)
	}
	stdout, stderr := &headtail.Head{Max: 4 << 10}, &headtail.Head{Max: 16 << 10}
	if err := m.Exec(ctx, transfer.ShellCommand(words...), nil, stdout, stderr); err != nil {
		return fmt.Errorf("start Docker in the VM: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return r.sb.Audit(sandbox.Event{Event: sandbox.EventDocker, Data: map[string]any{
		"ms": time.Since(t).Milliseconds(), "says": strings.TrimSpace(stdout.String())}})
}

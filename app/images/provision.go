package images

import (
	"bytes"
	"cmp"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/airlock-dev/airlock/app/egress"
	"github.com/airlock-dev/airlock/app/machine/launch"
	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/guest"
	"github.com/airlock-dev/airlock/guest/client"
	"github.com/airlock-dev/airlock/internal/safetext"
	"github.com/airlock-dev/airlock/vm/image"
	"github.com/airlock-dev/airlock/vm/oci"
)

// SetupStep is one provisioning step: a shell command line (run by /bin/sh -c)
// or an argv run as it is.
type SetupStep struct {
	// Name says where the step came from ("apt", "setup 2",
	// "postCreateCommand build").
	Name  string
	Shell string
	Argv  []string
	// Stdin, when set, is the step's standard input (a feature's files,
	// as a tar its step extracts).
	Stdin []byte
	// Input, when set, writes the step's standard input as the step
	// reads it (a build context, too large to hold); an error it returns
	// fails the step.
	Input func(ctx context.Context, w io.Writer) error
	// Env is added to this step's environment, over the build's; it
	// never replaces the network's variables (the proxy's).
	Env map[string]string
}

// String is the step as people read it, on one line: a project's setup
// command is untrusted text, so control characters are shown, not sent.
func (s SetupStep) String() string {
	if s.Shell != "" {
		return safetext.Line(s.Shell)
	}
	return safetext.Line(strings.Join(s.Argv, " "))
}

// AptStep installs Debian packages the way a provisioning step does:
// update, install without recommends, then drop what apt downloaded, so
// the layer holds the packages and nothing else. Translations are not
// fetched (the lists are dropped anyway). When every package is plain
// (a name, perhaps with :ARCH) and dpkg says each is installed already,
// apt does not run at all: updating the lists costs a minute or more
// under emulation and would change nothing but upgrade what the base
// already has.
func AptStep(pkgs []string) SetupStep {
	list := strings.Join(pkgs, " ")
	install := "apt-get -o Acquire::Languages=none update -q; " +
		"apt-get install -y -q --no-install-recommends " + list +
		"; apt-get clean; rm -rf /var/lib/apt/lists/*"
	shell := "set -e; export DEBIAN_FRONTEND=noninteractive; "
	if !slices.ContainsFunc(pkgs, func(p string) bool { return !debName.MatchString(p) }) {
		// dpkg-query fails when a package is unknown to dpkg and prints
		// one status per instance it knows ("ii " is installed and
		// configured; "rc ", "un ", half-installed are not).
		shell += "if s=$(dpkg-query -W -f='${db:Status-Abbrev}\\n' " + list + " 2>/dev/null) && ! printf '%s\\n' \"$s\" | grep -qv '^ii '; " +
			"then echo 'apt: " + list + ": all installed already'; else " + install + "; fi"
	} else {
		shell += install
	}
	return SetupStep{Name: "apt", Shell: shell}
}

// debName is a Debian package name, perhaps with an architecture: no
// version, release, glob or regular expression, which dpkg-query would
// read otherwise than apt-get install.
var debName = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+(:[a-z0-9-]+)?$`)

// Provision makes an image of a base image and steps.
type Provision struct {
	// Launch boots the builder VM (home, backend, arch, size); its Image
	// and Name are set here.
	Launch launch.Options
	// Base is the image the steps run on: one made from an OCI image.
	// Boot is the minimal image whose kernel and initramfs the new image
	// boots with.
	Base, Boot *image.Image
	// Name is the new image's name; Key, what identifies its inputs;
	// Label, what it is for (image.OCIMeta).
	Name, Key, Label string
	// User is the new image's user for commands (empty: the base's).
	User  string
	Steps []SetupStep
	// Env is added to every step's environment, after the base image's
	// own (its configuration's Env).
	Env map[string]string
	// Policy is what the steps may reach through the egress proxy; nil
	// reaches nothing.
	Policy *egress.Policy
	// Store holds the base's blobs and keeps the new layer.
	Store oci.Store
	// Dir is where the build keeps its record: audit.jsonl (the network
	// policy and every request) and output.log (every step's output).
	Dir string
	// Output also receives every step's output (a terminal); Progress
	// each step as it starts.
	Output   io.Writer
	Progress func(string)
	// Dial and RootCAs replace the host's DNS and roots for the steps'
	// network (tests).
	Dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	RootCAs *x509.CertPool
}

// StepError is a provisioning step that failed: nothing was kept.
type StepError struct {
	Index int // from 1
	Step  SetupStep
	Err   error
	Log   string // the build's output.log
}

func (e *StepError) Error() string {
	var x *client.ExitError
	how := e.Err.Error()
	if errors.As(e.Err, &x) && x.Signal == "" {
		how = fmt.Sprintf("exited with status %d", x.Status)
	}
	return fmt.Sprintf("provisioning step %d (%s: %s) %s; nothing was kept. Its output is above and in %s", e.Index, e.Step.Name, e.Step, how, e.Log)
}

func (e *StepError) Unwrap() error { return e.Err }

// maxLayer is the largest layer a builder may send back.
const maxLayer = 32 << 30

// Provision boots a builder VM from p.Base, runs the steps in it as root
// with the network p.Policy allows (through the egress proxy, recorded in
// p.Dir/audit.jsonl), and, when every step succeeded, has the guest write
// what the steps changed (the overlay's upper layer) as an OCI layer, which
// the host keeps in the content store and puts on top of the base's layers
// in a new image. The host never mounts or reads the builder's disk: the
// layer arrives as a tar stream, checked as any pulled layer when the disk
// is written. Nothing on the host runs the image's programs. A failed step
// keeps nothing.
func (p Provision) Run(ctx context.Context) (*image.Image, error) {
	b, err := p.boot(ctx)
	if err != nil {
		return nil, err
	}
	defer b.close()
	for i, s := range p.Steps {
		b.progress(fmt.Sprintf("step %d/%d (%s): %s", i+1, len(p.Steps), s.Name, s))
		fmt.Fprintf(b.log, "### step %d (%s): %s\n", i+1, s.Name, s)
		t0 := time.Now()
		if err := b.step(ctx, s); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, &StepError{Index: i + 1, Step: s, Err: err, Log: b.logPath}
		}
		b.took(fmt.Sprintf("step %d (%s)", i+1, s.Name), t0)
	}
	b.progress("keeping what the steps changed as a layer")
	t0 := time.Now()
	d, n, err := captureLayer(ctx, b.g.Client, p.Store, maxLayer)
	if err != nil {
		return nil, err
	}
	b.took(fmt.Sprintf("kept the layer (%d MiB)", n>>20), t0)
	b.shutdown(ctx)
	return b.write(ctx, &p.Base.Meta.OCI.Image, append(slices.Clone(p.Base.Meta.OCI.Extra), d.String()), cmp.Or(p.User, p.Base.User()))
}

// errStoppedReading is what a step's Input gets when the step ended
// before reading all of it.
var errStoppedReading = errors.New("the step stopped reading its input")

// step runs one step in the builder, its input streamed to it.
func (b *builder) step(ctx context.Context, s SetupStep) error {
	cmd := client.Command{Script: s.Shell, Args: s.Argv, Env: withStepEnv(b.env, b.netEnv, s.Env), Dir: "/", Stdout: b.out, Stderr: b.out}
	if s.Stdin != nil {
		cmd.Stdin = bytes.NewReader(s.Stdin)
	}
	if s.Input == nil {
		return b.g.Client.Run(ctx, cmd)
	}
	pr, pw := io.Pipe()
	wrote := make(chan error, 1)
	go func() {
		err := s.Input(ctx, pw)
		pw.CloseWithError(cmp.Or(err, io.EOF))
		wrote <- err
	}()
	cmd.Stdin = pr
	err := b.g.Client.Run(ctx, cmd)
	pr.CloseWithError(errStoppedReading)
	if werr := <-wrote; werr != nil && !errors.Is(werr, errStoppedReading) {
		return fmt.Errorf("its input: %w", werr)
	}
	return err
}

// builder is a booted builder VM with its network, and the build's
// record (Provision.boot).
type builder struct {
	p   Provision
	g   *launch.Guest
	env map[string]string // the steps' environment: the image's, the network's, the build's
	// netEnv is the network's alone, which a step's own variables do
	// not replace.
	netEnv map[string]string
	// log is output.log (at logPath); out is it and Provision.Output.
	log      *os.File
	out      io.Writer
	logPath  string
	cleanups []func()
}

// boot starts the build's record (p.Dir's output.log and audit.jsonl),
// boots a builder VM from p.Base on a disk of its own, and gives it the
// network p.Policy allows.
func (p Provision) boot(ctx context.Context) (_ *builder, err error) {
	if p.Base == nil || p.Base.Meta.OCI == nil || p.Base.Lower == "" {
		return nil, errors.New("provision: the base must be an image made from an OCI image (airlock image pull)")
	}
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		return nil, err
	}
	b := &builder{p: p, logPath: filepath.Join(p.Dir, "output.log")}
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	if b.log, err = os.Create(b.logPath); err != nil {
		return nil, err
	}
	b.cleanups = append(b.cleanups, func() { b.log.Close() })
	b.out = io.Writer(b.log)
	if p.Output != nil {
		b.out = io.MultiWriter(b.log, p.Output)
	}
	auditf, err := os.Create(filepath.Join(p.Dir, "audit.jsonl"))
	if err != nil {
		return nil, err
	}
	b.cleanups = append(b.cleanups, func() { auditf.Close() })
	enc := json.NewEncoder(auditf)
	audit := func(ev sandbox.Event) {
		if ev.Time.IsZero() {
			ev.Time = time.Now().UTC()
		}
		_ = enc.Encode(ev)
	}
	o := p.Launch
	o.Image, o.Name = p.Base.Name, "build-"+p.Name
	o.RootDisk = filepath.Join(p.Dir, "upper.img")
	o.Warm = false
	os.Remove(o.RootDisk)
	b.cleanups = append(b.cleanups, func() { os.Remove(o.RootDisk); os.Remove(o.RootDisk + ".base") })
	b.progress("booting a builder from " + p.Base.Name)
	t0 := time.Now()
	if b.g, err = launch.Boot(ctx, o); err != nil {
		return nil, fmt.Errorf("provision: boot the builder: %w", err)
	}
	b.cleanups = append(b.cleanups, func() { b.g.Kill() })
	b.took("booted the builder", t0)
	pol := p.Policy
	if pol == nil {
		pol = &egress.Policy{}
	}
	// The builder's network is a run's: pipeline's proxy over the guest's
	// link, with the CA kept out of the image.
	env, stopNet, err := pipeline.StartNetwork(ctx, pipeline.GuestMachine(b.g), &pipeline.Network{Policy: pol, Builder: true, Dial: p.Dial, RootCAs: p.RootCAs}, "build-"+p.Name, audit)
	if err != nil {
		return nil, fmt.Errorf("provision: %w", err)
	}
	b.cleanups = append(b.cleanups, stopNet)
	b.netEnv = env
	b.env = stepEnv(p.Base.Meta.OCI.Config.Env, env, p.Env)
	return b, nil
}

// close stops the builder and its network and closes the record, last
// opened first.
func (b *builder) close() {
	for i := len(b.cleanups) - 1; i >= 0; i-- {
		b.cleanups[i]()
	}
	b.cleanups = nil
}

func (b *builder) progress(s string) {
	if b.p.Progress != nil {
		b.p.Progress(s)
	}
}

// took records how long a phase of the build took, in the record and
// with the steps' output: where a build of minutes spends them.
func (b *builder) took(what string, since time.Time) {
	fmt.Fprintf(b.out, "### %s: %s\n", what, time.Since(since).Round(100*time.Millisecond))
}

// shutdown stops the builder VM, its work done.
func (b *builder) shutdown(ctx context.Context) {
	t0 := time.Now()
	_ = b.g.Shutdown(ctx)
	b.took("stopped the builder", t0)
}

// write makes the new image (p.Name) of base's layers and extra on top,
// with p.Boot's kernel.
func (b *builder) write(ctx context.Context, base *oci.Image, extra []string, user string) (*image.Image, error) {
	b.progress("writing the image's disk")
	t0 := time.Now()
	last := t0
	im, err := image.FromOCI(ctx, b.p.Launch.Home, image.OCIOptions{Name: b.p.Name, Boot: b.p.Boot, Store: b.p.Store,
		Image: base, Extra: extra, Key: b.p.Key, Label: b.p.Label, User: user,
		Progress: func(e image.Progress) {
			b.took(fmt.Sprintf("disk: %s %s", e.Step, e.Item), last)
			last = time.Now()
		}})
	if err == nil {
		b.took("wrote the image's disk", t0)
	}
	return im, err
}

// captureLayer has the guest write its overlay's upper layer as a tar,
// at most limit bytes, into the content store (hashed as it arrives),
// and returns its digest and size.
func captureLayer(ctx context.Context, c runner, st oci.Store, limit int64) (v1.Hash, int64, error) {
	bw, err := st.NewBlob()
	if err != nil {
		return v1.Hash{}, 0, err
	}
	lw := &limitedWriter{w: bw, left: limit}
	var stderr strings.Builder
	err = c.Run(ctx, client.Command{
		Args:   []string{guest.RuntimeDir + "/init", "layer", guest.RuntimeDir + "/upper/" + guest.UpperDir},
		Stdout: lw, Stderr: &limitedStringWriter{b: &stderr, left: 4096},
	})
	if lw.over {
		err = fmt.Errorf("the steps changed more than %d MiB outside the workspace", limit>>20)
	}
	if err != nil {
		bw.Abort()
		return v1.Hash{}, 0, fmt.Errorf("provision: keep the steps' changes: %w %s", err, safetext.Line(strings.TrimSpace(stderr.String())))
	}
	return bw.Commit()
}

// runner runs a command in the guest (*client.Client).
type runner interface {
	Run(ctx context.Context, cmd client.Command) error
}

// stepEnv is a step's environment: the image's (KEY=VALUE entries), the
// network's, then the build's own.
func stepEnv(image []string, network, own map[string]string) map[string]string {
	env := map[string]string{}
	for _, kv := range image {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			env[k] = v
		}
	}
	maps.Copy(env, network)
	maps.Copy(env, own)
	return env
}

// withStepEnv is env with a step's own variables over it, save the
// network's, which stay.
func withStepEnv(env, network, own map[string]string) map[string]string {
	if len(own) == 0 {
		return env
	}
	out := maps.Clone(env)
	for k, v := range own {
		if _, ok := network[k]; !ok {
			out[k] = v
		}
	}
	return out
}

type limitedWriter struct {
	w    io.Writer
	left int64
	over bool
}

func (l *limitedWriter) Write(b []byte) (int, error) {
	if int64(len(b)) > l.left {
		l.over = true
		return 0, errors.New("layer too large")
	}
	l.left -= int64(len(b))
	return l.w.Write(b)
}

type limitedStringWriter struct {
	b    *strings.Builder
	left int
}

func (l *limitedStringWriter) Write(p []byte) (int, error) {
	n := min(len(p), l.left)
	l.b.Write(p[:n])
	l.left -= n
	return len(p), nil
}

package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/guest"
	"github.com/airlock-dev/airlock/internal/headtail"
	"github.com/airlock-dev/airlock/internal/safetext"
	"github.com/airlock-dev/airlock/sync/transfer"
)

// Where the services' Compose file goes in the VM: a root-only folder of
// the tmpfs /run, so the command's user can neither read nor change it.
const (
	servicesDir  = "/run/airlock-compose"
	servicesFile = servicesDir + "/compose.json"
	// servicesCLIConfig is the Docker CLI configuration Airlock's own
	// docker compose reads: none (the folder is never made).
	servicesCLIConfig = servicesDir + "/cli"
)

// servicesWait bounds how long the services may take to start (their
// images loaded, their dependencies' conditions met, their healthchecks
// passed): under QEMU without KVM a container starts in a second or two.
const servicesWait = 5 * time.Minute

// servicesPoll is how often the services' states are read while they
// start: Compose offers no notification that covers a one-shot service
// that has completed.
const servicesPoll = 500 * time.Millisecond

// serviceName is what a service name must be to go in /etc/hosts and
// NO_PROXY (Compose's own rule for service names).
var serviceName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$`)

// ServiceError is a Compose service that did not start: its name, what
// happened, and the last lines of its log.
type ServiceError struct {
	Service, State, Log string
}

func (e *ServiceError) Error() string {
	return fmt.Sprintf("the Compose service %s did not start (%s); its log ends:\n%s", e.Service, e.State, e.Log)
}

// startServices starts the run's Compose services under the VM's Docker
// Engine, as root: Airlock's Compose file written into the VM, the
// images loaded from the image's archive (pulled when the environment
// was built, so nothing is pulled now), `docker compose up -d` (which
// honours depends_on's conditions), then each service waited on until it
// runs (healthy, when it has a healthcheck) or, for a one-shot service,
// has exited 0. Their names then resolve to 127.0.0.1 in the VM, where
// their ports are published, and bypass the proxy.
func (r *runner) startServices(ctx context.Context, m Machine) error {
	s := r.o.Services
	names := slices.DeleteFunc(slices.Clone(s.Names), func(n string) bool { return !serviceName.MatchString(n) })
	if len(names) == 0 {
		return nil
	}
	r.progress(Progress{Step: StepRun, Message: "starting the Compose services in the VM: " + strings.Join(names, ", ")})
	t := time.Now()
	ctx, cancel := context.WithTimeout(ctx, servicesWait)
	defer cancel()
	// Without the Docker CLI configuration root may have (the
	// containers' proxy, when the command runs as root): the services
	// Airlock starts talk to each other and to localhost (their
	// healthchecks), and a client that ignores NO_PROXY, as busybox's
	// wget does, would send that to the proxy.
	compose := transfer.ShellCommand("env", "DOCKER_CONFIG="+servicesCLIConfig, "docker", "compose", "-p", "airlock", "-f", servicesFile)
	prep := []string{"set -e", "umask 077", "mkdir -p " + servicesDir, "cat > " + servicesFile}
	if s.Images != "" {
		prep = append(prep, transfer.ShellCommand("docker", "load", "-q", "-i", s.Images))
	}
	if err := guestRun(ctx, m, strings.Join(prep, "\n"), s.File); err != nil {
		return fmt.Errorf("compose services: load their images: %w", err)
	}
	loadMS := time.Since(t).Milliseconds()
	up := time.Now()
	upErr := guestRun(ctx, m, compose+" up -d --no-build --quiet-pull --remove-orphans", nil)
	states, err := r.awaitServices(ctx, m, compose, names, upErr)
	if err != nil {
		return err
	}
	upMS := time.Since(up).Milliseconds()
	hosts := "127.0.0.1 " + strings.Join(names, " ") + " # the Compose services (Airlock)"
	if err := guestRun(ctx, m, "printf '%s\\n' "+transfer.ShellCommand(hosts)+" >> /etc/hosts", nil); err != nil {
		return fmt.Errorf("compose services: name them in /etc/hosts: %w", err)
	}
	r.bypassProxy(names)
	return r.sb.Audit(sandbox.Event{Event: sandbox.EventServices, Data: map[string]any{
		"services": names, "states": states, "ms": time.Since(t).Milliseconds(), "load_ms": loadMS, "up_ms": upMS}})
}

// awaitServices reads the services' states until each is ready (running,
// healthy when it has a healthcheck, or exited 0), and returns them; a
// service that exited otherwise, turned unhealthy or is not ready when
// ctx ends is a ServiceError. upErr is how `up` ended: its own refusal
// (a dependency that failed) is named with the first service not ready.
func (r *runner) awaitServices(ctx context.Context, m Machine, compose string, names []string, upErr error) (map[string]string, error) {
	tick := time.NewTicker(servicesPoll)
	defer tick.Stop()
	for {
		ps, err := servicesState(ctx, m, compose)
		states, pending, failed := readiness(names, ps)
		switch {
		case err == nil && failed == "" && pending == "":
			return states, nil
		case failed != "":
			return nil, r.serviceError(m, compose, failed, states[failed])
		case upErr != nil:
			// Compose refused before any service failed (a mount, a
			// port): its own words say which.
			return nil, fmt.Errorf("compose services: docker compose up: %w", upErr)
		}
		select {
		case <-ctx.Done():
			n := cmpOr(pending, names[0])
			return nil, r.serviceError(m, compose, n, fmt.Sprintf("%s, not ready within %s", cmpOr(states[n], "unknown"), servicesWait))
		case <-tick.C:
		}
	}
}

// readiness says what each service of names is in ps: ready (running,
// healthy when it has a healthcheck; or completed, exited 0), failed
// (exited otherwise, dead, unhealthy) or not yet; pending and failed are
// the first of names not ready and the first that failed.
func readiness(names []string, ps map[string]serviceState) (states map[string]string, pending, failed string) {
	states = map[string]string{}
	for _, n := range names {
		st, ok := ps[n]
		switch {
		case !ok:
			states[n], pending = "not created", cmpOr(pending, n)
		case st.State == "running" && (st.Health == "" || st.Health == "healthy"):
			states[n] = "running" + parens(st.Health)
		case st.State == "exited" && st.ExitCode == 0:
			states[n] = "completed"
		case st.State == "exited" || st.State == "dead" || st.Health == "unhealthy":
			states[n], failed = fmt.Sprintf("%s, status %d%s", st.State, st.ExitCode, parens(st.Health)), cmpOr(failed, n)
		default:
			states[n], pending = st.State+parens(st.Health), cmpOr(pending, n)
		}
	}
	return states, pending, failed
}

// serviceState is one container's state as `docker compose ps` says it.
type serviceState struct {
	Service, State, Health string
	ExitCode               int
}

// servicesState reads `docker compose ps -a --format json` (one object a
// line, or an array from older Composes), by service. The guest's output
// is bounded and only read as data.
func servicesState(ctx context.Context, m Machine, compose string) (map[string]serviceState, error) {
	out := &headtail.Head{Max: 256 << 10}
	stderr := &headtail.Head{Max: 4 << 10}
	if err := m.Exec(ctx, compose+" ps -a --format json", nil, out, stderr); err != nil {
		return nil, fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	var list []serviceState
	data := bytes.TrimSpace([]byte(out.String()))
	if bytes.HasPrefix(data, []byte("[")) {
		if err := json.Unmarshal(data, &list); err != nil {
			return nil, err
		}
	} else {
		for _, l := range bytes.Split(data, []byte("\n")) {
			var st serviceState
			if len(bytes.TrimSpace(l)) > 0 && json.Unmarshal(l, &st) == nil {
				list = append(list, st)
			}
		}
	}
	ps := map[string]serviceState{}
	for _, st := range list {
		ps[st.Service] = st
	}
	return ps, nil
}

// serviceError is service's failure with the last lines of its log.
func (r *runner) serviceError(m Machine, compose, service, state string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := &tail{max: 4 << 10}
	if err := m.Exec(ctx, compose+" logs --no-color --no-log-prefix --tail 20 "+transfer.ShellCommand(service), nil, out, out); err != nil {
		fmt.Fprintf(out, "\n(its log could not be read: %v)", err)
	}
	e := &ServiceError{Service: service, State: state, Log: safetext.Text(strings.TrimSpace(out.String()))}
	_ = r.sb.Audit(sandbox.Event{Event: sandbox.EventServices, Data: map[string]any{"failed": service, "state": state}})
	return fmt.Errorf("compose services: %w", e)
}

// bypassProxy adds the services' names to the command's NO_PROXY, so that
// its clients reach them directly in the VM.
func (r *runner) bypassProxy(names []string) {
	if len(names) == 0 || r.netEnv == nil {
		return
	}
	env := maps.Clone(r.netEnv)
	for _, k := range []string{"NO_PROXY", "no_proxy"} {
		// The guest's own (guest.ProxyEnv) is under the run's variables,
		// which replace it.
		v, ok := env[k]
		if !ok {
			v = guest.ProxyEnv()[k]
		}
		env[k] = strings.Join(append([]string{v}, names...), ",")
	}
	r.netEnv = env
}

// guestRun runs script as root in the guest with stdin, and makes its
// failure an error with the end of its output.
func guestRun(ctx context.Context, m Machine, script string, stdin []byte) error {
	out := &tail{max: 4 << 10}
	var in io.Reader
	if stdin != nil {
		in = bytes.NewReader(stdin)
	}
	if err := m.Exec(ctx, script, in, out, out); err != nil {
		return fmt.Errorf("%w:\n%s", err, safetext.Text(strings.TrimSpace(out.String())))
	}
	return nil
}

// tail keeps the last max bytes written to it (a guest's output for an
// error); safe for concurrent use, since stdout and stderr may share it.
type tail struct {
	max int
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

func parens(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

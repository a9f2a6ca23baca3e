package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/guest"
)

// dockerWait bounds how long StartDocker waits for the daemon to answer:
// under QEMU without KVM it starts in a few seconds, containerd included.
const dockerWait = 2 * time.Minute

// StartDocker starts the image's Docker Engine as root, ready before the
// sandbox's command: the kernel readied (PrepareDockerKernel), the data
// directory on the sandbox's own disk, dockerd started in the background
// with the proxy variables of this process's environment
// (guest.DockerProxyEnv), then waited on until it answers on guest.DockerSocket. It
// returns one line that says what runs. The daemon and its containers
// end with the VM.
func StartDocker(ctx context.Context) (string, error) {
	start := time.Now()
	dockerd, err := exec.LookPath("dockerd")
	if err != nil {
		for _, p := range []string{"/usr/sbin/dockerd", "/usr/bin/dockerd"} {
			if _, serr := os.Stat(p); serr == nil {
				dockerd, err = p, nil
				break
			}
		}
	}
	if err != nil {
		return "", errors.New("this image has no Docker Engine (no dockerd): build the environment with docker = true, which installs Debian's docker.io")
	}
	if _, err := PrepareDockerKernel(); err != nil {
		return "", err
	}
	where, err := dockerData()
	if err != nil {
		return "", err
	}
	c := dockerClient()
	defer c.CloseIdleConnections()
	if ping(ctx, c) == nil {
		return "Docker Engine already running", nil
	}
	limits, err := limitContainers()
	if err != nil {
		return "", err
	}
	log, err := os.OpenFile(guest.DockerLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return "", fmt.Errorf("docker: open its log: %w", err)
	}
	defer log.Close()
	d := daemon{answer: func(ctx context.Context) error { return ping(ctx, c) }}
	var from int64 // where the log of the latest start begins
	d.start = func() (<-chan error, error) {
		if fi, err := log.Stat(); err == nil {
			from = fi.Size()
		}
		cmd := exec.Command(dockerd, "--host", "unix://"+guest.DockerSocket, "--data-root", guest.DockerDataDir,
			"--cgroup-parent", ContainersCgroup)
		cmd.Env = dockerEnv(os.Environ())
		cmd.Stdout, cmd.Stderr = log, log
		cmd.Dir = "/"
		// Its own session: it outlives this command, reparented to PID 1
		// (the agent, which reaps it), and ends with the VM.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("docker: start %s: %w", dockerd, err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		return exited, nil
	}
	d.log = func() string { return logTail(guest.DockerLog, from, 2048) }
	ctx, cancel := context.WithTimeout(ctx, dockerWait)
	defer cancel()
	starts, err := awaitDaemon(ctx, d, 100*time.Millisecond)
	if err != nil {
		return "", err
	}
	again := ""
	if starts > 1 {
		again = fmt.Sprintf(", at start %d: dockerd gave up on a slow containerd before", starts)
	}
	return fmt.Sprintf("Docker Engine started in %.1fs (data in %s, %s; %s%s)", time.Since(start).Seconds(), guest.DockerDataDir, where, limits, again), nil
}

// dockerStarts bounds how many times StartDocker starts dockerd. On a
// loaded host without KVM, dockerd gave up on the containerd it started
// and exited ("timeout waiting for containerd to start"), failing a run
// whose Docker would have answered a second later; a start after that
// finds containerd's files in the page cache.
const dockerStarts = 3

// containerdSlow is the line dockerd logs before it exits when the
// containerd it started did not answer in time.
const containerdSlow = "timeout waiting for containerd to start"

// daemon is how awaitDaemon starts dockerd and sees it.
type daemon struct {
	start  func() (exited <-chan error, err error)
	answer func(context.Context) error // nil once the daemon answers
	log    func() string               // the tail of what the latest start logged
}

// awaitDaemon starts d and polls it every poll until it answers, and
// says how many starts that took. A daemon that exits before it
// answers is an error with its log's tail, unless it exited for want
// of containerd: then it is started again, dockerStarts times at most.
// ctx bounds the whole wait.
func awaitDaemon(ctx context.Context, d daemon, poll time.Duration) (int, error) {
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for starts := 1; ; starts++ {
		exited, err := d.start()
		if err != nil {
			return starts, err
		}
	wait:
		for {
			if d.answer(ctx) == nil {
				return starts, nil
			}
			select {
			case err := <-exited:
				tail := d.log()
				if strings.Contains(tail, containerdSlow) && starts < dockerStarts {
					break wait
				}
				return starts, fmt.Errorf("docker: dockerd ended before it answered (%v, start %d of %d); its log ends:\n%s", err, starts, dockerStarts, tail)
			case <-ctx.Done():
				return starts, fmt.Errorf("docker: dockerd did not answer on %s within %s; its log ends:\n%s", guest.DockerSocket, dockerWait, d.log())
			case <-tick.C:
			}
		}
	}
}

// dockerData puts guest.DockerDataDir on a file system Docker's overlay storage
// can use: an overlay root (an image made from an OCI image) cannot hold
// the upper directories of Docker's own overlays, so the directory goes
// on the sandbox's disk under it (RuntimeDir/upper), bound on
// guest.DockerDataDir. It says where the data is.
func dockerData() (string, error) {
	if err := os.MkdirAll(guest.DockerDataDir, 0o710); err != nil {
		return "", fmt.Errorf("docker: %w", err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs("/", &st); err != nil {
		return "", fmt.Errorf("docker: statfs /: %w", err)
	}
	const overlayMagic = 0x794c7630
	if st.Type != overlayMagic {
		return "on the root disk", nil
	}
	disk := guest.RuntimeDir + "/upper"
	var ds unix.Statfs_t
	if err := unix.Statfs(disk, &ds); err != nil || ds.Type == overlayMagic {
		return "", fmt.Errorf("docker: the root is an overlay and the sandbox's disk is not mounted on %s, so Docker's storage has nowhere to go", disk)
	}
	dir := filepath.Join(disk, "docker")
	if err := os.MkdirAll(dir, 0o710); err != nil {
		return "", fmt.Errorf("docker: %w", err)
	}
	if mounted(guest.DockerDataDir) {
		return "on the sandbox's disk", nil
	}
	if err := unix.Mount(dir, guest.DockerDataDir, "", unix.MS_BIND, ""); err != nil {
		return "", fmt.Errorf("docker: bind %s on %s: %w", dir, guest.DockerDataDir, err)
	}
	return "on the sandbox's disk", nil
}

// mounted says whether dir is a mount point (listed in /proc/self/mounts).
func mounted(dir string) bool {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[1] == dir {
			return true
		}
	}
	return false
}

// dockerEnv is the daemon's environment: a fixed PATH and the proxy
// variables of env.
func dockerEnv(env []string) []string {
	out := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		for _, want := range guest.DockerProxyEnv {
			if k == want {
				out = append(out, kv)
			}
		}
	}
	return out
}

// dockerClient is an HTTP client of the daemon on guest.DockerSocket.
func dockerClient() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", guest.DockerSocket)
	}}, Timeout: 2 * time.Second}
}

// ping asks the daemon for /_ping.
func ping(ctx context.Context, c *http.Client) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker/_ping", nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("ping: %s", resp.Status)
	}
	return nil
}

// logTail is the last n bytes of the file at path, from offset from on.
func logTail(path string, from int64, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil {
		f.Seek(max(from, fi.Size()-int64(n)), io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(f, int64(n)))
	return string(bytes.TrimSpace(b))
}

package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"

	"github.com/airlock-dev/airlock/guest"
)

// sshServer is one link connection after the SSH handshake.
type sshServer struct {
	a     *Agent
	conn  *ssh.ServerConn
	chans <-chan ssh.NewChannel
	reqs  <-chan *ssh.Request
	fwd   forwards
}

func (a *Agent) sshServer(conn net.Conn, id *identity) (*sshServer, error) {
	cfg := &ssh.ServerConfig{
		// Public-key auth with the one key of the first contact is the
		// only way in.
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if bytes.Equal(key.Marshal(), id.clientKey.Marshal()) {
				return &ssh.Permissions{}, nil
			}
			return nil, errors.New("public key not authorized")
		},
	}
	cfg.AddHostKey(id.hostKey)
	sc, chans, reqs, err := ssh.NewServerConn(conn, cfg)
	if err != nil {
		return nil, fmt.Errorf("ssh handshake: %w", err)
	}
	return &sshServer{a: a, conn: sc, chans: chans, reqs: reqs}, nil
}

// serve services every request and channel of the connection until it
// ends, and waits for its sessions.
func (s *sshServer) serve() error {
	var wg sync.WaitGroup
	defer wg.Wait()
	defer s.closeForwards()
	wg.Go(func() { s.globalRequests(s.reqs) })
	for nc := range s.chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, fmt.Sprintf("unknown channel type %q", nc.ChannelType()))
			continue
		}
		ch, reqs, err := nc.Accept()
		if err != nil {
			s.a.log.Debug("accept channel", "err", err)
			continue
		}
		wg.Go(func() { s.a.serveSession(ch, reqs) })
	}
	return nil
}

func (s *sshServer) globalRequests(reqs <-chan *ssh.Request) {
	for req := range reqs {
		switch {
		case req.Type == guest.RequestPowerOff && s.a.cfg.PowerOff != nil:
			_ = req.Reply(true, nil)
			s.a.log.Info("power off requested")
			go func() {
				if err := s.a.cfg.PowerOff(); err != nil {
					s.a.log.Error("power off", "err", err)
				}
			}()
		case strings.HasPrefix(req.Type, "keepalive@"):
			_ = req.Reply(true, nil)
		case req.Type == "tcpip-forward":
			reply, err := s.forward(req.Payload)
			if err != nil {
				s.a.log.Warn("forward", "err", err)
			}
			if req.WantReply {
				_ = req.Reply(err == nil, reply)
			}
		case req.Type == "cancel-tcpip-forward":
			err := s.cancelForward(req.Payload)
			if req.WantReply {
				_ = req.Reply(err == nil, nil)
			}
		default:
			if req.WantReply {
				_ = req.Reply(false, nil)
			}
		}
	}
}

// session is one session channel: what its requests asked for before the
// command starts, and the command once it runs.
type session struct {
	a   *Agent
	ch  ssh.Channel
	env map[string]string
	dir string
	// dirSet: a workdir request chose dir, so a user request keeps it.
	dirSet bool
	// user, when a user request named one, runs the command as that
	// account; nil runs it as the agent's own.
	user *account
	// jail, when not nil, runs the command in the agent's jail with
	// writes allowed below these directories (guest.RequestJail).
	jail []string
	term string
	ptmx *os.File // nil without a pty-req
	tty  *os.File // the pty's child end, until the command starts
	proc *process // nil until the command starts
	// done is closed when the command's output is drained and its exit
	// reported.
	done chan struct{}
	// stop ends a builtin (Config.Builtin) the session runs; nil otherwise.
	stop context.CancelFunc
}

// Payloads of the session requests (RFC 4254 section 6).
type (
	envRequest struct{ Name, Value string }
	ptyRequest struct {
		Term                 string
		Cols, Rows, Wpx, Hpx uint32
		Modes                string
	}
	windowChange  struct{ Cols, Rows, Wpx, Hpx uint32 }
	execRequest   struct{ Command string }
	signalRequest struct{ Signal string }
	exitStatus    struct{ Status uint32 }
	exitSignal    struct {
		Signal     string
		CoreDumped bool
		Error      string
		Lang       string
	}
	workdirRequest struct{ Dir string }
)

// serveSession services one session channel until the peer closes it. A
// command still running then is killed with its process group.
func (a *Agent) serveSession(ch ssh.Channel, reqs <-chan *ssh.Request) {
	dir := a.cfg.Home
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		dir = "/" // a minimal image may have no home directory
	}
	s := &session{a: a, ch: ch, env: map[string]string{}, dir: dir}
	defer s.release()
	for req := range reqs {
		// A request that starts the command replies itself, before the
		// command's output and exit can reach the channel.
		replied, err := s.handle(req)
		if err != nil {
			a.log.Debug("session request", "type", req.Type, "err", err)
		}
		if req.WantReply && !replied {
			_ = req.Reply(err == nil, nil)
		}
	}
	if s.proc != nil && !s.proc.exited() {
		_ = s.proc.signalGroup(syscall.SIGKILL)
	}
	if s.stop != nil {
		s.stop()
	}
	if s.done != nil {
		<-s.done
	}
}

func (s *session) release() {
	if s.tty != nil {
		s.tty.Close()
	}
	if s.ptmx != nil {
		s.ptmx.Close()
	}
	s.ch.Close()
}

var errStarted = errors.New("the session already runs a command")

func (s *session) handle(req *ssh.Request) (replied bool, err error) {
	switch req.Type {
	case "env":
		var r envRequest
		if err := ssh.Unmarshal(req.Payload, &r); err != nil {
			return false, err
		}
		if r.Name == "" || strings.ContainsAny(r.Name, "=\x00") || strings.Contains(r.Value, "\x00") {
			return false, fmt.Errorf("invalid environment variable %q", r.Name)
		}
		s.env[r.Name] = r.Value
		return false, nil
	case guest.RequestWorkdir:
		var r workdirRequest
		if err := ssh.Unmarshal(req.Payload, &r); err != nil {
			return false, err
		}
		if !filepath.IsAbs(r.Dir) {
			return false, fmt.Errorf("workdir %q is not absolute", r.Dir)
		}
		if fi, err := os.Stat(r.Dir); err != nil {
			return false, err
		} else if !fi.IsDir() {
			return false, fmt.Errorf("workdir %q is not a directory", r.Dir)
		}
		s.dir, s.dirSet = r.Dir, true
		return false, nil
	case guest.RequestJail:
		return false, s.jailRequest(req.Payload)
	case guest.RequestUser:
		var r struct{ Name string }
		if err := ssh.Unmarshal(req.Payload, &r); err != nil {
			return false, err
		}
		if s.proc != nil || s.done != nil {
			return false, errStarted
		}
		u, err := lookupAccount(r.Name)
		if err != nil {
			return false, err
		}
		s.user = u
		if !s.dirSet {
			// The user's home, or / when it has none: the agent's own
			// home (/root) is not the user's to enter.
			s.dir = "/"
			if fi, err := os.Stat(u.home); err == nil && fi.IsDir() {
				s.dir = u.home
			}
		}
		return false, nil
	case "pty-req":
		var r ptyRequest
		if err := ssh.Unmarshal(req.Payload, &r); err != nil {
			return false, err
		}
		if s.ptmx != nil || s.proc != nil {
			return false, errors.New("pty already allocated or command started")
		}
		ptmx, tty, err := pty.Open()
		if err != nil {
			return false, fmt.Errorf("open pty: %w", err)
		}
		s.ptmx, s.tty, s.term = ptmx, tty, r.Term
		return false, setWinsize(ptmx, r.Rows, r.Cols, r.Wpx, r.Hpx)
	case "window-change":
		var r windowChange
		if err := ssh.Unmarshal(req.Payload, &r); err != nil {
			return false, err
		}
		if s.ptmx == nil {
			return false, errors.New("window-change without a pty")
		}
		return false, setWinsize(s.ptmx, r.Rows, r.Cols, r.Wpx, r.Hpx)
	case "shell", "exec":
		return s.start(req)
	case "subsystem":
		var r execRequest
		if err := ssh.Unmarshal(req.Payload, &r); err != nil {
			return false, err
		}
		if r.Command != "sftp" {
			return false, fmt.Errorf("unknown subsystem %q", r.Command)
		}
		if s.proc != nil || s.done != nil {
			return false, errStarted
		}
		if req.WantReply {
			_ = req.Reply(true, nil)
		}
		s.sftp()
		return true, nil
	case "signal":
		var r signalRequest
		if err := ssh.Unmarshal(req.Payload, &r); err != nil {
			return false, err
		}
		sig := unix.SignalNum("SIG" + r.Signal)
		if sig == 0 {
			return false, fmt.Errorf("unknown signal %q", r.Signal)
		}
		if s.stop != nil {
			s.stop() // a builtin: any signal ends it
			return false, nil
		}
		if s.proc == nil || s.proc.exited() {
			return false, errors.New("no running command")
		}
		return false, s.proc.signalGroup(sig)
	}
	return false, fmt.Errorf("unknown request %q", req.Type)
}

// jailRequest takes a guest.RequestJail: the command will run in the
// agent's jail, writes allowed below the payload's directories.
func (s *session) jailRequest(payload []byte) error {
	var r struct{ Write string }
	if err := ssh.Unmarshal(payload, &r); err != nil {
		return err
	}
	if s.proc != nil || s.done != nil {
		return errStarted
	}
	if s.a.self() == "" {
		return errors.New("this agent cannot jail a command: it does not know its own binary")
	}
	jail := []string{}
	for _, d := range strings.Split(r.Write, "\x00") {
		if d == "" {
			continue
		}
		if !filepath.IsAbs(d) {
			return fmt.Errorf("jail: %q is not absolute", d)
		}
		jail = append(jail, filepath.Clean(d))
	}
	s.jail = jail
	return nil
}

func setWinsize(ptmx *os.File, rows, cols, wpx, hpx uint32) error {
	ws := &unix.Winsize{Row: uint16(rows), Col: uint16(cols), Xpixel: uint16(wpx), Ypixel: uint16(hpx)}
	// pty.Setsize would call ptmx.Fd(), which turns the file blocking and
	// so defeats the read deadline that ends draining; ioctl through the
	// runtime instead.
	rc, err := ptmx.SyscallConn()
	if err != nil {
		return err
	}
	var ioctlErr error
	if err := rc.Control(func(fd uintptr) {
		ioctlErr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, ws)
	}); err != nil {
		return err
	}
	if ioctlErr != nil {
		return fmt.Errorf("set window size: %w", ioctlErr)
	}
	return nil
}

// environ is the command's environment: the defaults, then the env
// requests, sorted.
func (s *session) environ() []string {
	env := map[string]string{"PATH": defaultPath, "HOME": s.a.cfg.Home}
	if s.user != nil {
		env["HOME"], env["USER"], env["LOGNAME"] = s.user.home, s.user.name, s.user.name
	}
	if s.a.proxyForwards.Load() > 0 {
		// The host's egress proxy is reachable: point HTTP clients at it.
		for k, v := range guest.ProxyEnv() {
			env[k] = v
		}
	}
	if s.ptmx != nil && s.term != "" {
		env["TERM"] = s.term
	}
	for k, v := range s.env {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// drainGrace bounds how long a PTY's output is read after its command
// exited, for when a background process still holds the terminal.
const drainGrace = 500 * time.Millisecond

// run starts the command, replies to req, and then, in the background,
// streams the command's I/O, reports its exit and closes the channel. A
// start failure is reported like a shell that cannot run a command: on
// stderr, with status 127.
func (s *session) run(req *ssh.Request, argv []string) {
	s.done = make(chan struct{})
	reply := func() {
		if req.WantReply {
			_ = req.Reply(true, nil)
		}
	}
	attr := &os.ProcAttr{Dir: s.dir, Env: s.environ(), Sys: &syscall.SysProcAttr{Setsid: true}}
	if s.user != nil {
		attr.Sys.Credential = s.user.credential()
		if s.tty != nil {
			// The command's terminal is its own, as login makes it.
			_ = s.tty.Chown(int(s.user.uid), int(s.user.gid))
		}
	}
	var (
		childEnd       []*os.File // closed in the agent once the child has them
		stdin          *os.File   // written from the channel
		stdout, stderr *os.File   // read into the channel; stderr nil with a pty
	)
	if s.ptmx != nil {
		attr.Files = []*os.File{s.tty, s.tty, s.tty}
		attr.Sys.Setctty = true
		attr.Sys.Ctty = 0
		childEnd = []*os.File{s.tty}
		s.tty = nil
		stdin, stdout = s.ptmx, s.ptmx
	} else {
		inR, inW, err1 := os.Pipe()
		outR, outW, err2 := os.Pipe()
		errR, errW, err3 := os.Pipe()
		if err := errors.Join(err1, err2, err3); err != nil {
			closeAll(inR, inW, outR, outW, errR, errW)
			reply()
			s.fail(fmt.Errorf("create pipes: %w", err))
			return
		}
		attr.Files = []*os.File{inR, outW, errW}
		childEnd = []*os.File{inR, outW, errW}
		stdin, stdout, stderr = inW, outR, errR
	}

	name := s.a.cfg.Shell
	if s.jail != nil {
		// The agent's own binary puts itself in the jail, then runs the
		// shell as it would have run (argv[0] may be a login shell's
		// "-sh").
		self := s.a.self()
		home := s.a.cfg.Home
		if s.user != nil {
			home = s.user.home
		}
		jargv := []string{self, "jail", "--home", home}
		for _, d := range s.jail {
			jargv = append(jargv, "--write", d)
		}
		argv = append(append(jargv, "--", name), argv...)
		name = self
	}
	proc, err := s.a.startProcess(name, argv, attr)
	closeAll(childEnd...)
	reply()
	if err != nil {
		if s.ptmx == nil {
			closeAll(stdin, stdout, stderr)
		}
		s.fail(fmt.Errorf("start %s: %w", s.a.cfg.Shell, err))
		return
	}
	s.proc = proc
	s.a.log.Debug("command started", "pid", proc.pid, "argv", argv)

	var output sync.WaitGroup
	output.Go(func() { _, _ = io.Copy(s.ch, stdout) })
	if stderr != nil {
		output.Go(func() { _, _ = io.Copy(s.ch.Stderr(), stderr) })
	}
	// Channel to stdin. It ends when the peer sends EOF (close the pipe so
	// the command sees EOF; a PTY stays open) or the channel closes.
	go func() {
		_, _ = io.Copy(stdin, s.ch)
		if s.ptmx == nil {
			stdin.Close()
		}
	}()
	go func() {
		defer close(s.done)
		<-proc.done
		if s.ptmx != nil {
			// The output ends with EIO once every holder of the tty is
			// gone; don't wait forever for background holders.
			_ = s.ptmx.SetReadDeadline(time.Now().Add(drainGrace))
		}
		output.Wait()
		if s.ptmx == nil {
			closeAll(stdout, stderr)
		}
		s.exit(proc.status)
	}()
}

// start runs a shell or exec request's command: a login shell, the
// command by the shell, or a builtin in the agent's own process.
func (s *session) start(req *ssh.Request) (replied bool, err error) {
	if s.proc != nil || s.done != nil {
		return false, errStarted
	}
	name := filepath.Base(s.a.cfg.Shell)
	argv := []string{"-" + name} // a login shell, as sshd starts one
	if req.Type == "exec" {
		var r execRequest
		if err := ssh.Unmarshal(req.Payload, &r); err != nil {
			return false, err
		}
		if run := s.builtin(r.Command); run != nil {
			s.runBuiltin(req, run)
			return true, nil
		}
		argv = []string{name, "-c", r.Command}
	}
	s.run(req, argv)
	return true, nil
}

// builtin is what runs command in the agent's own process
// (Config.Builtin), or nil when the shell runs it: a command of other
// words, quoted otherwise, for a user or on a terminal.
func (s *session) builtin(command string) Builtin {
	c := s.a.cfg
	if c.Builtin == nil || s.user != nil || s.ptmx != nil {
		return nil
	}
	words, ok := unquoteWords(command)
	if !ok || len(words) < 2 || !slices.Contains(c.Self, words[0]) {
		return nil
	}
	return c.Builtin(words[1:])
}

// unquoteWords reads a command line of words one space apart, each
// either in single quotes (a quote inside as quote, backslash, quote,
// quote), as sync/transfer quotes every word, or bare and made only of
// letters, digits and @%+=:,./_- (nothing /bin/sh reads otherwise), as
// guest/client leaves such words. Anything else is not read (ok false),
// for the shell to run.
func unquoteWords(s string) (words []string, ok bool) {
	for s != "" {
		var w strings.Builder
		if s[0] == '\'' {
			s = s[1:]
			for {
				i := strings.IndexByte(s, '\'')
				if i < 0 {
					return nil, false
				}
				w.WriteString(s[:i])
				s = s[i+1:]
				if !strings.HasPrefix(s, `\''`) {
					break
				}
				w.WriteByte('\'')
				s = s[3:]
			}
		} else {
			i := strings.IndexFunc(s, func(r rune) bool {
				return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@%+=:,./_-", r))
			})
			if i < 0 {
				i = len(s)
			}
			if i == 0 {
				return nil, false
			}
			w.WriteString(s[:i])
			s = s[i:]
		}
		words = append(words, w.String())
		if s != "" {
			if s[0] != ' ' || len(s) == 1 {
				return nil, false
			}
			s = s[1:]
		}
	}
	return words, len(words) > 0
}

// runBuiltin replies to req and runs run in the background on the
// channel, then reports its exit as a command's and closes the channel.
// A panic in it is the command's failure (status 70), not the agent's
// end.
func (s *session) runBuiltin(req *ssh.Request, run Builtin) {
	s.done = make(chan struct{})
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	if req.WantReply {
		_ = req.Reply(true, nil)
	}
	s.a.log.Debug("command run by a builtin in the agent's process")
	go func() {
		defer close(s.done)
		defer stop()
		status := uint32(0)
		func() {
			defer func() {
				if v := recover(); v != nil {
					s.a.log.Error("builtin panicked", "panic", v, "stack", string(debug.Stack()))
					fmt.Fprintf(s.ch.Stderr(), "airlock-guest: internal error: %v\n", v)
					status = 70
				}
			}()
			if err := run(ctx, s.ch, s.ch, s.ch.Stderr()); err != nil {
				fmt.Fprintln(s.ch.Stderr(), "airlock-guest:", err)
				status = 1
			}
		}()
		_, _ = s.ch.SendRequest("exit-status", false, ssh.Marshal(exitStatus{status}))
		_ = s.ch.CloseWrite()
		_ = s.ch.Close()
	}()
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}

// fail reports a command that could not start, as a shell would.
func (s *session) fail(err error) {
	s.a.log.Warn("run command", "err", err)
	fmt.Fprintf(s.ch.Stderr(), "airlock-guest: %v\n", err)
	_, _ = s.ch.SendRequest("exit-status", false, ssh.Marshal(exitStatus{127}))
	_ = s.ch.Close()
	close(s.done)
}

// exit reports the command's end (RFC 4254 section 6.10) and closes the
// channel.
func (s *session) exit(ws syscall.WaitStatus) {
	if ws.Signaled() {
		name := strings.TrimPrefix(unix.SignalName(ws.Signal()), "SIG")
		if name == "" {
			name = fmt.Sprintf("%d", int(ws.Signal()))
		}
		_, _ = s.ch.SendRequest("exit-signal", false, ssh.Marshal(exitSignal{Signal: name, CoreDumped: ws.CoreDump()}))
	} else {
		_, _ = s.ch.SendRequest("exit-status", false, ssh.Marshal(exitStatus{uint32(ws.ExitStatus())}))
	}
	_ = s.ch.CloseWrite()
	_ = s.ch.Close()
	s.a.log.Debug("command exited", "pid", s.proc.pid, "status", int(ws))
}

// sftp serves the SFTP subsystem on the channel in the background. The
// server sees the whole file system; relative paths resolve against the
// session's working directory.
func (s *session) sftp() {
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		srv, err := sftp.NewServer(s.ch, sftp.WithServerWorkingDirectory(s.dir))
		if err != nil {
			s.a.log.Warn("start sftp", "err", err)
			_ = s.ch.Close()
			return
		}
		status := uint32(0)
		if err := srv.Serve(); err != nil && !errors.Is(err, io.EOF) {
			s.a.log.Debug("sftp", "err", err)
			status = 1
		}
		_, _ = s.ch.SendRequest("exit-status", false, ssh.Marshal(exitStatus{status}))
		_ = srv.Close() // closes the channel
	}()
}

// Package guest is the wire contract between the Airlock host and
// airlock-guest, the agent that runs as PID 1 inside every VM: the link's
// port and device names, the first-contact handshake that gives a fresh
// guest its per-sandbox identity, and the names of Airlock's own SSH
// requests. Both guest/agent and guest/client import it.
//
// It must stay small and dependency-free: it must not import anything of
// Airlock's (vm, sync, review, the app, the other guest packages), fyne or
// vz.
package guest

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

const (
	// VsockPort is the vsock port airlock-guest listens on.
	VsockPort uint32 = 1024
	// SerialPortName is the name of the virtio-serial port that carries the
	// link where the host has no vsock (/sys/class/virtio-ports/*/name).
	// The port is one byte stream with no connection boundaries, so it
	// carries a yamux session (host: client, guest: server); each link
	// connection is one stream of it and begins with Magic, as on vsock.
	SerialPortName = "airlock.link"
	// ProtocolVersion is bumped on any incompatible change to this file.
	ProtocolVersion = 2
	// MaxMessage caps one handshake message.
	MaxMessage = 64 << 10
	// Magic opens every link connection, before the Hello.
	Magic = "AIRLOCK1"
	// ProbeMagic opens a link connection that only asks whether the agent
	// is ready: the agent waits until it could run a command, answers
	// with a Welcome without a host key and closes the connection. It
	// sets no identity, so a machine saved after a probe (a warm
	// snapshot) still awaits its one first contact.
	ProbeMagic = "AIRLOCK?"
	// SessionMagic opens every yamux session on a serial link, in both
	// directions: the host writes it before its first frame, the agent
	// answers with it before its own. The agent recognises it between
	// two frames of a session it still serves and starts a fresh one
	// (a host whose machine was restored, or rolled back, finds the
	// guest still holding the session that was saved); the host skips
	// whatever precedes the agent's answer (bytes of that saved session).
	// Its first byte is no valid yamux version, so it can never be read as
	// a frame header.
	SessionMagic = "\xffAIRLOCK-SESSION1\n"
)

// Hello is the first message on every link connection, host to guest.
//
// On the first connection of a guest's life it carries the sandbox identity:
// the only SSH client key the guest will ever accept, its hostname, the
// host's clock and an entropy seed. The link itself authenticates this
// message: only the hypervisor's owner can write to it. On later connections
// (Resume) the identity is already set and ClientKey and Hostname are
// ignored; the host proves itself with the SSH key it gave first. Time and
// Entropy are applied on every connection, since a resumed guest may have
// been paused, restored or rolled back.
type Hello struct {
	Version   int       `json:"version"`
	Resume    bool      `json:"resume,omitempty"`
	ClientKey string    `json:"client_key,omitempty"` // authorized_keys line
	Hostname  string    `json:"hostname,omitempty"`
	Time      time.Time `json:"time"`
	Entropy   []byte    `json:"entropy,omitempty"` // mixed into the guest's pool
	// Disks, on first contact only, are block devices to mount as the
	// DiskArg kernel argument would (each "DEV:DIR"): a machine restored
	// from a warm snapshot was booted with its disks attached but not
	// mounted, and the guest drops what it had read of them first.
	Disks []string `json:"disks,omitempty"`
}

// Welcome is the guest's answer. After it, the connection carries SSH, with
// the guest as server using HostKey.
type Welcome struct {
	Version int    `json:"version"`
	HostKey string `json:"host_key,omitempty"` // authorized_keys line
	Kernel  string `json:"kernel,omitempty"`   // uname -r
	Arch    string `json:"arch,omitempty"`     // GOARCH of the agent
	// Agent is the path of the agent's own binary in the guest (/init in
	// Airlock's images), for running its helper subcommands (manifest,
	// untar, tar) over exec.
	Agent string `json:"agent,omitempty"`
	Error string `json:"error,omitempty"` // set when the hello is refused
}

// The boot contract: what the image builder and the VM backends share with
// airlock-guest running as PID 1.
const (
	// ModulesOrder lists the kernel modules PID 1 loads, one absolute path
	// per line, in dependency order.
	ModulesOrder = "/lib/modules/airlock/modules.order"
	// DockerModulesOrder lists, as ModulesOrder does, the modules a Docker
	// Engine needs, which nothing loads until one is started
	// (airlock-guest docker-kernel). After a switch to a root disk the
	// initramfs's module directory, this list with them, is bind-mounted
	// on InitramfsModules: nothing is copied at boot.
	DockerModulesOrder = "/lib/modules/airlock/docker.order"
	InitramfsModules   = RuntimeDir + "/initramfs-modules"
	// ProbeArg on the kernel command line makes PID 1 print ProbeOK on the
	// console and power off at once (the host's KVM probe boot).
	ProbeArg = "airlock.probe"
	ProbeOK  = "AIRLOCK_PROBE_OK"
	// DebugArg on the kernel command line turns on debug logging, with
	// the time since the agent started on each line.
	DebugArg = "airlock.debug"
	// VirtiofsArg on the kernel command line, as VirtiofsArg=TAG:DIR
	// (repeatable), makes PID 1 mount the virtio-fs share TAG on the
	// absolute directory DIR (nosuid, nodev) before it serves the link.
	VirtiofsArg = "airlock.virtiofs"
	// DiskArg on the kernel command line, as DiskArg=DEV:DIR (repeatable),
	// makes PID 1 mount the ext4 block device /dev/DEV (vda, vdb, …) on the
	// absolute directory DIR (nosuid, nodev) before it serves the link, and
	// remove the empty lost+found that mkfs left there. The disk's size is
	// DIR's quota: writing past it fails in the guest with ENOSPC.
	//
	// DiskArg=DEV:DIR:LOWER makes DIR an overlay instead: /dev/LOWER (a
	// project's baseline, written by the host) is mounted read-only on
	// OverlayLower(DIR), whose BaselineTree is the lower layer; /dev/DEV
	// read-write on OverlayRW(DIR), holding the upper layer (UpperDir,
	// which OverlayUpper(DIR) names) and WorkDir. Only root reaches
	// either: what the command changed is exactly the upper layer.
	//
	// DiskArg=DEV:DIR:LOWER:DELTA stacks two baseline disks: LOWER a
	// project's full disk and DELTA the changes from its tree to the
	// baseline's (overlay whiteouts for what is gone), whose BaselineBase
	// file must name LOWER's BaselineID. Each is mounted read-only on
	// OverlayLayer(DIR, "base") and OverlayLayer(DIR, "delta"), and
	// OverlayLower(DIR) is a read-only overlay of DELTA over LOWER (its
	// BaselineID is DELTA's); the overlay on DIR has both trees as its
	// lower layers, DELTA's above.
	DiskArg = "airlock.disk"
	// OverlayRoot holds the disks of DiskArg's overlays (0700).
	OverlayRoot = "/run/airlock/overlay"
	// BaselineTree is the directory of a baseline disk that holds the
	// tree; the disk's BaselineID file names the baseline.
	BaselineTree = "tree"
	BaselineID   = "id"
	// BaselineBase, on a delta disk, names the base disk it goes over.
	BaselineBase = "base"
	// NetArg on the kernel command line, as NetArg=dhcp, makes PID 1 bring
	// up the machine's network device (the unprotected open-network mode)
	// with busybox's DHCP client before the first command runs. Without it
	// the guest has no network device to configure.
	NetArg = "airlock.net"
	// NetDHCP is NetArg's one value.
	NetDHCP = "dhcp"
	// RootArg on the kernel command line, as RootArg=DEV, makes PID 1 (in
	// the initramfs, once the modules are loaded) mount the ext4 block
	// device /dev/DEV read-write as the root file system and switch to it:
	// the system mounts move over, a copy of the running agent goes to
	// RuntimeDir (a tmpfs), /init in the new root becomes a link to it,
	// and the same process goes on as PID 1 there. The root disk is the
	// sandbox's own copy-on-write clone of the image's root disk.
	RootArg = "airlock.root"
	// LowerArg, as LowerArg=DEV beside RootArg, makes the root an
	// overlay: the ext4 device /dev/DEV, mounted read-only, is its lower
	// layer (an OCI image's file system, shared by every sandbox of the
	// image), and RootArg's device holds the upper layer (the sandbox's
	// own changes, in UpperDir of that disk). Both disks' mounts move to
	// RuntimeDir/lower and RuntimeDir/upper in the new root.
	LowerArg = "airlock.lower"
	// UpperDir and WorkDir are the overlay's upper and work directories
	// on the root disk of a machine with LowerArg.
	UpperDir = "upper"
	WorkDir  = "work"
	// RuntimeDir holds, on a machine that switched root, the agent binary
	// (RuntimeDir/init, which /init links to), busybox and the modules
	// loaded late. It is on the /run tmpfs, readable by every user.
	RuntimeDir = "/run/airlock-guest"
)

// OverlayLower is where the guest mounts the baseline disk of the overlay
// on dir (an absolute, clean directory).
func OverlayLower(dir string) string { return OverlayRoot + dir + "/lower" }

// OverlayLayer is where the guest mounts one of the two disks (name
// "base" or "delta") of a layered baseline of the overlay on dir.
func OverlayLayer(dir, name string) string { return OverlayRoot + dir + "/" + name }

// OverlayRW is where the guest mounts the writable disk of the overlay on
// dir; OverlayUpper is the overlay's upper directory on it.
func OverlayRW(dir string) string    { return OverlayRoot + dir + "/rw" }
func OverlayUpper(dir string) string { return OverlayRW(dir) + "/" + UpperDir }

// SSH request and subsystem names that are Airlock's own.
const (
	// RequestPowerOff (global request) syncs filesystems and powers the
	// guest off after replying.
	RequestPowerOff = "poweroff@airlock"
	// RequestWorkdir (session request, payload: ssh string) sets the working
	// directory of the command the session will run.
	RequestWorkdir = "workdir@airlock"
	// RequestUser (session request, payload: ssh string) runs the
	// session's command as that user of the guest's /etc/passwd, with its
	// groups, HOME and working directory its home.
	RequestUser = "user@airlock"
	// RequestJail (session request, payload: ssh string, the directories
	// the command may write below, NUL-separated) runs the session's
	// command in the agent's jail (no_new_privs, a seccomp filter,
	// Landlock: package agent's Jail): the sandbox's own command and its
	// verify, never Airlock's own steps.
	RequestJail = "jail@airlock"
)

// The egress proxy: the host asks the guest agent (SSH "tcpip-forward",
// RFC 4254 section 7.1) to listen on ProxyAddr; every connection accepted
// there comes back to the host as a "forwarded-tcpip" channel, where the
// host's proxy decides what may leave. The guest has no network device:
// this is its only way out. While such a forward is active, the agent sets
// the proxy variables of ProxyEnv for every command it runs.
const (
	ProxyHost = "127.0.0.1"
	ProxyPort = 3128
	ProxyAddr = "127.0.0.1:3128"
	ProxyURL  = "http://" + ProxyAddr
)

// ProxyEnv returns the environment that points HTTP clients at the
// guest's proxy, in both the upper- and lower-case forms tools read.
func ProxyEnv() map[string]string {
	env := map[string]string{}
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"} {
		env[k] = ProxyURL
		env[strings.ToLower(k)] = ProxyURL
	}
	env["NO_PROXY"] = "localhost,127.0.0.1"
	env["no_proxy"] = env["NO_PROXY"]
	return env
}

// WriteMessage writes v as a length-prefixed JSON message.
func WriteMessage(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode message: %w", err)
	}
	if len(b) > MaxMessage {
		return fmt.Errorf("encode message: %d bytes exceeds %d", len(b), MaxMessage)
	}
	buf := make([]byte, 4+len(b))
	binary.BigEndian.PutUint32(buf, uint32(len(b)))
	copy(buf[4:], b)
	_, err = w.Write(buf)
	return err
}

// ErrMessageTooLarge: a peer sent a handshake message over MaxMessage.
var ErrMessageTooLarge = errors.New("handshake message too large")

// ReadMessage reads one message written by WriteMessage into v.
func ReadMessage(r io.Reader, v any) error {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > MaxMessage {
		return fmt.Errorf("read message: %d bytes: %w", size, ErrMessageTooLarge)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return fmt.Errorf("read message: %w", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode message: %w", err)
	}
	return nil
}

// Where the guest's Docker Engine keeps its socket, its data and its log
// (airlock-guest docker-start).
const (
	DockerSocket  = "/var/run/docker.sock"
	DockerDataDir = "/var/lib/docker"
	DockerLog     = "/var/log/airlock-dockerd.log"
)

// DockerProxyEnv are the variables airlock-guest docker-start passes from
// its own environment to the daemon: the proxy it pulls through and the
// trust store holding the sandbox CA.
var DockerProxyEnv = []string{"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy", "SSL_CERT_FILE"}

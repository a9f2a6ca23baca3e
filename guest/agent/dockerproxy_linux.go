package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/airlock-dev/airlock/guest"
)

// The containers' way out: Docker's bridge (docker0) cannot reach the
// guest's proxy, which listens on the VM's loopback only (guest.ProxyAddr,
// the link's forward). A relay on the bridge's gateway address, same port,
// carries their connections to it, and the Docker CLI's configuration
// (its "proxies", which docker run, docker build and docker compose give
// every container they create) points them at the relay. Nothing else
// leaves: the VM has no network device, so a container that ignores the
// variables reaches nothing, and its DNS resolves nothing (the proxy
// resolves the names it is asked for).

// containerProxyWait bounds how long the bridge and the relay may take to
// appear after the daemon answers.
const containerProxyWait = 10 * time.Second

// StartContainerProxy starts the relay on docker0's address (once: a
// relay already there is kept) and writes the proxies into user's Docker
// CLI configuration (~/.docker/config.json, its other keys kept; root's
// too). It returns the proxy's URL for containers.
func StartContainerProxy(ctx context.Context, user string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, containerProxyWait)
	defer cancel()
	ip, err := bridgeAddr(ctx, "docker0")
	if err != nil {
		return "", err
	}
	addr := net.JoinHostPort(ip.String(), fmt.Sprint(guest.ProxyPort))
	if !listening(addr) {
		self, err := os.Executable()
		if err != nil {
			return "", err
		}
		cmd := exec.Command(self, "proxy-relay", addr, guest.ProxyAddr)
		cmd.Dir = "/"
		// Its own session, as dockerd: it outlives docker-start and ends
		// with the VM.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			return "", fmt.Errorf("docker: start the containers' proxy relay: %w", err)
		}
		go cmd.Wait()
		for !listening(addr) {
			select {
			case <-ctx.Done():
				return "", fmt.Errorf("docker: the containers' proxy relay did not listen on %s", addr)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	url := "http://" + addr
	if user != "" && user != "root" {
		a, err := lookupAccount(user)
		if err != nil {
			return "", fmt.Errorf("docker: %w", err)
		}
		if err := writeDockerProxies(a.home, url, int(a.uid), int(a.gid)); err != nil {
			return "", err
		}
	}
	return url, writeDockerProxies("/root", url, 0, 0)
}

// bridgeAddr waits for name to have an IPv4 address.
func bridgeAddr(ctx context.Context, name string) (net.IP, error) {
	for {
		if ifc, err := net.InterfaceByName(name); err == nil {
			addrs, _ := ifc.Addrs()
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
					return n.IP.To4(), nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("docker: its bridge %s has no address", name)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func listening(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// writeDockerProxies sets "proxies" in home's .docker/config.json,
// keeping what else it holds, owned by uid:gid. A config.json that is not
// a JSON object is replaced.
func writeDockerProxies(home, url string, uid, gid int) error {
	dir := filepath.Join(home, ".docker")
	path := filepath.Join(dir, "config.json")
	cfg := map[string]any{}
	if data, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(data, &cfg)
		if cfg == nil {
			cfg = map[string]any{}
		}
	}
	cfg["proxies"] = map[string]any{"default": map[string]string{
		"httpProxy": url, "httpsProxy": url, "noProxy": "localhost,127.0.0.1",
	}}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("docker: %w", err)
	}
	// Not through a link the user planted: the file is made anew.
	tmp := path + ".airlock"
	os.Remove(tmp)
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("docker: %w", err)
	}
	if err := os.Lchown(dir, uid, gid); err != nil {
		return fmt.Errorf("docker: %w", err)
	}
	if err := os.Lchown(tmp, uid, gid); err != nil {
		return fmt.Errorf("docker: %w", err)
	}
	return os.Rename(tmp, path)
}

// ProxyRelay listens on listen and carries each connection to target
// (airlock-guest proxy-relay): the containers' way to the guest's proxy.
// It runs until the VM ends.
func ProxyRelay(listen, target string) error {
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go relayTCP(c, target)
	}
}

// relayTCP carries c to target, both ways, each side's end of stream
// passed on.
func relayTCP(c net.Conn, target string) {
	defer c.Close()
	u, err := net.DialTimeout("tcp", target, 10*time.Second)
	if err != nil {
		return
	}
	defer u.Close()
	var wg sync.WaitGroup
	wg.Go(func() {
		_, _ = io.Copy(u, c)
		_ = u.(*net.TCPConn).CloseWrite()
	})
	_, _ = io.Copy(c, u)
	_ = c.(*net.TCPConn).CloseWrite()
	wg.Wait()
}

package pipeline_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/app/egress"
	"github.com/airlock-dev/airlock/app/machine/launch"
	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/app/sandbox"
	"github.com/airlock-dev/airlock/testkit/testenv"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/qemu"
)

// The script the "agent" runs in the guest: every way out it can try.
const netScript = `
echo "== env"; env | grep -i -E '^(https?|all|no)_proxy=' | sort
echo "== allowed"; busybox wget -q -O - http://allowed.test/hello 2>&1
echo "== denied"; ./netclient get http://denied.test/
echo "== secret"; ./netclient get https://api.secret.test/v1/messages "x-api-key: $ANTHROPIC_API_KEY"
echo "== leak"; ./netclient get http://allowed.test/leak "x-key: $ANTHROPIC_API_KEY"
echo "== dial"; ./netclient dial 10.0.2.2:80; ./netclient dial 1.1.1.1:443; ./netclient dial 93.184.216.34:80
echo "== ip"; ip -o addr 2>&1 | grep -v ' lo ' ; ip route 2>&1
echo "== end"
`

// dumpScript writes every file of the guest (but /proc, /sys, /dev),
// every process's environment, and the writable memory of every process
// (heap, stacks, anonymous mappings: where a received secret would be),
// read through /proc/PID/mem, to stdout, for the host to search.
const dumpScript = `
for d in /*; do case $d in /proc|/sys|/dev) continue;; esac; find "$d" -type f -exec cat {} + 2>/dev/null; done
cat /proc/[0-9]*/environ 2>/dev/null
echo
echo MEM-START
for p in /proc/[0-9]*; do
  [ "$p" = /proc/$$ ] && continue
  while read -r range perms off dev inode path; do
    case $perms in rw*) ;; *) continue;; esac
    case $path in ""|"[heap]"|"[stack]"|"[anon:"*) ;; *) continue;; esac
    start=$((0x${range%-*})); end=$((0x${range#*-}))
    dd if=$p/mem bs=4096 skip=$((start / 4096)) count=$(((end - start) / 4096)) 2>/dev/null
  done < $p/maps
done
echo
echo MEM-DONE
echo DUMP-DONE
`

// TestNetworkInVM runs a command in a real VM with the egress proxy:
// allowed and denied hosts, the secret substituted on its way to a local
// TLS upstream but never in the guest, a placeholder blocked elsewhere,
// and no route at all outside the proxy.
func TestNetworkInVM(t *testing.T) {
	testenv.SkipIfShort(t)
	testenv.Image(t, vm.AMD64)
	shared := testenv.Home(t)
	home := t.TempDir()
	for _, d := range []string{"images", "cache"} {
		if err := os.Symlink(filepath.Join(shared, d), filepath.Join(home, d)); err != nil {
			t.Fatal(err)
		}
	}
	const secret = "sk-ant-REAL-0123456789-never-in-the-guest"

	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "plain upstream says hello to %s\n", r.URL.Path)
	}))
	defer plain.Close()
	upCA, err := egress.NewCA("upstream")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var gotKey string
	tlsUp := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		gotKey = r.Header.Get("X-Api-Key")
		mu.Unlock()
		fmt.Fprintf(w, "tls upstream: key is real: %v\n", r.Header.Get("X-Api-Key") == secret)
	}))
	tlsUp.TLS = &tls.Config{GetCertificate: func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) { return upCA.Leaf(hi.ServerName) }}
	tlsUp.StartTLS()
	defer tlsUp.Close()
	roots := x509.NewCertPool()
	roots.AddCert(upCA.Certificate())
	names := map[string]string{
		"allowed.test:80":     plain.Listener.Addr().String(),
		"denied.test:80":      plain.Listener.Addr().String(),
		"api.secret.test:443": tlsUp.Listener.Addr().String(),
	}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		to, ok := names[addr]
		if !ok {
			return nil, fmt.Errorf("no such host %s (test)", addr)
		}
		var d net.Dialer
		return d.DialContext(ctx, network, to)
	}
	placeholder, err := egress.NewPlaceholder()
	if err != nil {
		t.Fatal(err)
	}
	pol := &egress.Policy{
		Allow:   []egress.Rule{{Host: "allowed.test", Source: "test"}},
		Secrets: []egress.Secret{{Host: "api.secret.test", Header: "x-api-key", Name: "ANTHROPIC_API_KEY", Value: secret, Placeholder: placeholder}},
	}
	var live []egress.Record
	netw := &pipeline.Network{Policy: pol, Dial: dial, RootCAs: roots, OnRequest: func(r egress.Record) {
		mu.Lock()
		live = append(live, r)
		mu.Unlock()
	}}

	project := t.TempDir()
	data, err := os.ReadFile(testenv.NetClient(t, vm.AMD64))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(project, "netclient"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	store, err := sandbox.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out bytes.Buffer
	bootOpts := launch.Options{Home: home, Arch: vm.AMD64, Backend: qemu.New(qemu.Config{CacheDir: filepath.Join(home, "cache", "qemu")})}
	done, err := pipeline.Execute(ctx, store, pipeline.Job{Runs: []pipeline.RunOptions{{
		RunSpec: pipeline.RunSpec{
			Project:    project,
			Script:     []byte(netScript + dumpScript),
			ScriptName: "net.sh",
			Image:      "minimal",
			Arch:       "amd64",
			Sync:       sandbox.SyncCopy,
		},
		Hooks: pipeline.Hooks{
			Boot:    pipeline.LaunchBoot(bootOpts),
			Network: netw,
			Stdout:  &out,
			Stderr:  &out,
			// The dump reads every process's memory, which the agent's
			// jail forbids (TestAgentJail proves that).
			NoJail: true,
		},
	}}})
	res := done.Result()
	if err != nil {
		t.Fatalf("run: %v\n%s", err, tail(out.String()))
	}
	full := out.String()
	report, _, _ := strings.Cut(full, "== end")
	t.Logf("guest output:\n%s", report)
	if !strings.Contains(full, "DUMP-DONE") {
		t.Fatalf("the dump did not finish:\n%s", tail(full))
	}

	section := func(name string) string {
		_, s, _ := strings.Cut(report, "== "+name+"\n")
		s, _, _ = strings.Cut(s, "\n== ")
		return s
	}
	if s := section("env"); !strings.Contains(s, "HTTPS_PROXY=http://127.0.0.1:3128") || !strings.Contains(s, "no_proxy=localhost,127.0.0.1") {
		t.Errorf("proxy environment:\n%s", s)
	}
	if s := section("allowed"); !strings.Contains(s, "plain upstream says hello to /hello") {
		t.Errorf("allowed host through busybox wget:\n%s", s)
	}
	if s := section("denied"); !strings.Contains(s, "status 403") || !strings.Contains(s, "denied.test:80 is not on this sandbox's network allow-list") || !strings.Contains(s, "--allow denied.test") {
		t.Errorf("denied host:\n%s", s)
	}
	if s := section("secret"); !strings.Contains(s, "status 200") || !strings.Contains(s, "key is real: true") {
		t.Errorf("secret host:\n%s", s)
	}
	mu.Lock()
	if gotKey != secret {
		t.Errorf("the TLS upstream got x-api-key %q, want the real secret", gotKey)
	}
	mu.Unlock()
	if s := section("leak"); !strings.Contains(s, "status 403") || !strings.Contains(s, "placeholder of the secret ANTHROPIC_API_KEY") {
		t.Errorf("placeholder to another host:\n%s", s)
	}
	if s := section("dial"); strings.Contains(s, "dial ok") || strings.Count(s, "dial error") != 3 {
		t.Errorf("raw TCP to non-loopback addresses:\n%s", s)
	}
	// The secret never reached the guest: not in any file, any process's
	// environment, nor anything it printed; its placeholder did.
	if strings.Contains(full, secret) {
		t.Error("the real secret is in the guest (files, environment or output)")
	}
	if !strings.Contains(full, "ANTHROPIC_API_KEY="+placeholder) {
		t.Error("the placeholder is not in the guest's environment dump (is the dump complete?)")
	}
	memStart, memEnd := strings.LastIndex(full, "MEM-START\n"), strings.LastIndex(full, "MEM-DONE")
	if memStart < 0 || memEnd < memStart {
		t.Fatal("the guest's memory dump did not complete")
	}
	t.Logf("searched %d bytes of the guest, %d of them process memory", len(full), memEnd-memStart)
	if memEnd-memStart < 1<<20 {
		t.Errorf("only %d bytes of process memory were read", memEnd-memStart)
	}

	// The audit log has every request, the denied one with its rule.
	events, err := res.Sandbox.ReadAudit()
	if err != nil {
		t.Fatal(err)
	}
	var recs []egress.Record
	for _, ev := range events {
		if ev.Event != pipeline.EventEgress {
			continue
		}
		b, _ := json.Marshal(ev.Data)
		var r egress.Record
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	find := func(host, path string) *egress.Record {
		for i := range recs {
			if recs[i].Host == host && recs[i].Path == path {
				return &recs[i]
			}
		}
		return nil
	}
	if r := find("allowed.test", "/hello"); r == nil || !r.Allowed || r.Status != 200 || r.Method != "GET" {
		t.Errorf("audit of the allowed request: %+v", r)
	}
	if r := find("denied.test", "/"); r == nil || r.Allowed || r.Rule != "default deny" {
		t.Errorf("audit of the denied request: %+v", r)
	}
	if r := find("api.secret.test", "/v1/messages"); r == nil || !r.Allowed || r.Secret != "ANTHROPIC_API_KEY" || r.Mode != egress.ModeIntercept {
		t.Errorf("audit of the secret request: %+v", r)
	}
	if r := find("allowed.test", "/leak"); r == nil || r.Allowed || r.Rule != "placeholder ANTHROPIC_API_KEY" {
		t.Errorf("audit of the leak: %+v", r)
	}
	raw, _ := res.Sandbox.AuditRaw()
	if bytes.Contains(raw, []byte(secret)) || bytes.Contains(raw, []byte(placeholder)) {
		t.Error("the audit log holds the secret or its placeholder")
	}
	mu.Lock()
	if len(live) != len(recs) {
		t.Errorf("%d live records, %d audited", len(live), len(recs))
	}
	mu.Unlock()
}

func tail(s string) string {
	if len(s) > 4000 {
		return "…" + s[len(s)-4000:]
	}
	return s
}

var _ = io.Discard

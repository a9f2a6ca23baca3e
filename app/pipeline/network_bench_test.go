package pipeline_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlock-dev/airlock/app/egress"
	"github.com/airlock-dev/airlock/app/machine/launch"
	"github.com/airlock-dev/airlock/app/pipeline"
	"github.com/airlock-dev/airlock/guest/client"
	"github.com/airlock-dev/airlock/testkit/testenv"
	"github.com/airlock-dev/airlock/vm"
	"github.com/airlock-dev/airlock/vm/qemu"
)

// BenchmarkGuestDownload downloads 100 MB from a loopback server on the
// host from inside a real VM, through the guest's forward and the egress
// proxy, and the same download directly on the host in the same run; it
// reports both and their ratio. The guest link (vsock, or a serial port
// under TCG) bounds the first.
//
//	go test ./app/sandbox -run '^$' -bench GuestDownload -benchtime 1x
func BenchmarkGuestDownload(b *testing.B) {
	testenv.SkipIfShort(b)
	testenv.Image(b, vm.AMD64)
	home := testenv.Home(b)
	const size = 100 << 20
	chunk := make([]byte, 1<<20)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		for range size / len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer up.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g, err := launch.Boot(ctx, launch.Options{Home: home, Arch: vm.AMD64, Backend: qemu.New(qemu.Config{CacheDir: filepath.Join(home, "cache", "qemu")})})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		sctx, c := context.WithTimeout(context.Background(), 30*time.Second)
		defer c()
		_ = g.Shutdown(sctx)
	}()
	m := pipeline.GuestMachine(g)
	nc, err := os.ReadFile(testenv.NetClient(b, vm.AMD64))
	if err != nil {
		b.Fatal(err)
	}
	if err := m.Exec(ctx, "cat > /tmp/netclient && chmod +x /tmp/netclient", bytes.NewReader(nc), nil, nil); err != nil {
		b.Fatal(err)
	}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, up.Listener.Addr().String())
	}
	env, stop, err := pipeline.StartNetwork(ctx, m, &pipeline.Network{Policy: &egress.Policy{Allow: []egress.Rule{{Host: "big.test"}}}, Dial: dial}, "bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer stop()
	var guestTook, hostTook time.Duration
	b.ResetTimer()
	for range b.N {
		var out bytes.Buffer
		t := time.Now()
		if err := m.Run(ctx, client.Command{Script: "/tmp/netclient count http://big.test/", Env: env, Stdout: &out, Stderr: &out}); err != nil {
			b.Fatalf("%v: %s", err, out.String())
		}
		guestTook += time.Since(t)
		if !strings.Contains(out.String(), fmt.Sprintf("bytes %d ", size)) {
			b.Fatalf("guest download: %s", out.String())
		}
		t = time.Now()
		resp, err := http.Get(up.URL)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		hostTook += time.Since(t)
		if n != size {
			b.Fatalf("host download: %d bytes", n)
		}
	}
	b.StopTimer()
	guest := float64(size) * float64(b.N) / guestTook.Seconds() / 1e6
	host := float64(size) * float64(b.N) / hostTook.Seconds() / 1e6
	b.ReportMetric(guest, "guest-via-proxy-MB/s")
	b.ReportMetric(host, "host-direct-MB/s")
	b.ReportMetric(guest/host, "ratio")
	b.ReportMetric(0, "ns/op")
	b.Logf("link %s", g.Machine.LinkKind())
}

// Package fakenpm is an npm registry for tests, over plain HTTP: the
// packuments (GET /NAME, scoped names with the slash encoded or not) and
// the tarballs they point at (GET /NAME/-/BASE-VERSION.tgz), with each
// tarball's integrity, as npm install and curl fetch them. Packages are
// real tarballs (node, npm) or stand-ins for a CLI (CLI): a package.json
// with a bin that prints a line. It must not import app, guest, vm, fyne
// or vz: it is the npm registry's side only.
package fakenpm

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
)

// Package is one version of an npm package and its tarball.
type Package struct {
	Name, Version string
	// Bin is package.json's bin (command name to file), for the
	// packument: npm links what the packument says as well.
	Bin     map[string]string
	Tarball []byte
}

// FromFile is the package in tarball file (npm pack's output).
func FromFile(t testing.TB, name, version, file string) Package {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return Package{Name: name, Version: version, Tarball: b}
}

// CLI is a stand-in for a command-line package: command runs node on a
// script that prints line.
func CLI(t testing.TB, name, version, command, line string) Package {
	t.Helper()
	pj, err := json.Marshal(map[string]any{"name": name, "version": version, "bin": map[string]string{command: "cli.js"}})
	if err != nil {
		t.Fatal(err)
	}
	script := "#!/usr/bin/env node\nconsole.log(" + jsString(line) + ");\n"
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range []struct {
		name string
		mode int64
		body []byte
	}{{"package/package.json", 0o644, pj}, {"package/cli.js", 0o755, []byte(script)}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return Package{Name: name, Version: version, Bin: map[string]string{command: "cli.js"}, Tarball: buf.Bytes()}
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Registry serves packages until the test ends.
type Registry struct {
	// URL is the registry's base URL, http://ADDR.
	URL string

	pkgs map[string]Package // by name
	mu   sync.Mutex
	reqs []string
}

// Start serves pkgs on addr ("127.0.0.2:0": a loopback address the
// guest's NO_PROXY does not name, so npm and curl in a VM go through
// Airlock's proxy, which reaches it when allowed by address).
func Start(t testing.TB, addr string, pkgs ...Package) *Registry {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	r := &Registry{URL: "http://" + l.Addr().String(), pkgs: map[string]Package{}}
	for _, p := range pkgs {
		r.pkgs[p.Name] = p
	}
	srv := &http.Server{Handler: r}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return r
}

// Requests are the requests served so far, "METHOD PATH STATUS".
func (r *Registry) Requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.reqs...)
}

func (r *Registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	status := r.serve(w, req)
	r.mu.Lock()
	r.reqs = append(r.reqs, fmt.Sprintf("%s %s %d", req.Method, req.URL.Path, status))
	r.mu.Unlock()
}

func (r *Registry) serve(w http.ResponseWriter, req *http.Request) int {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		http.Error(w, "read-only", http.StatusMethodNotAllowed)
		return http.StatusMethodNotAllowed
	}
	path, err := url.PathUnescape(req.URL.EscapedPath())
	if err != nil {
		http.NotFound(w, req)
		return http.StatusNotFound
	}
	name, file, tarball := strings.Cut(strings.TrimPrefix(path, "/"), "/-/")
	p, ok := r.pkgs[name]
	if !ok {
		http.NotFound(w, req)
		return http.StatusNotFound
	}
	if tarball {
		if file != p.base() {
			http.NotFound(w, req)
			return http.StatusNotFound
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(p.Tarball)
		return http.StatusOK
	}
	sha := sha512.Sum512(p.Tarball)
	sum := sha1.Sum(p.Tarball)
	version := map[string]any{
		"name": p.Name, "version": p.Version,
		"dist": map[string]any{
			"tarball":   r.URL + "/" + p.Name + "/-/" + p.base(),
			"integrity": "sha512-" + base64.StdEncoding.EncodeToString(sha[:]),
			"shasum":    hex.EncodeToString(sum[:]),
		},
	}
	if len(p.Bin) > 0 {
		version["bin"] = p.Bin
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"name": p.Name, "dist-tags": map[string]string{"latest": p.Version},
		"versions": map[string]any{p.Version: version},
	})
	return http.StatusOK
}

// base is the tarball's file name: NAME-VERSION.tgz, without the scope.
func (p Package) base() string {
	return p.Name[strings.LastIndex(p.Name, "/")+1:] + "-" + p.Version + ".tgz"
}

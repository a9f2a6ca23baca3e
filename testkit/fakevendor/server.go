// Package fakevendor is for tests only: scripted stand-ins for the model
// APIs the agent CLIs talk to (Anthropic's Messages API, OpenAI's
// Responses API, Google's Gemini API), served over TLS under the vendors'
// real host names with certificates of a CA made for the test. A test
// hands Server.Dial and Server.RootCAs to the egress proxy, so a real CLI
// in a VM reaches its vendor's name through the real proxy and lands here.
//
// Every fake plays the same script: the first turn asks the CLI to write
// a file with its own file-writing tool and to run a shell command with
// its shell tool; the turn that carries the tools' results gets the final
// message. Every request is recorded. It must not import app, guest, vm,
// fyne or vz.
package fakevendor

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Script is what the fake model has the agent do.
type Script struct {
	// Dir is the agent's working directory in the VM (/workspace), for
	// tools that take absolute paths.
	Dir string
	// File is the path (relative to the agent's working directory) the
	// first turn writes with the CLI's file tool, with Content.
	File, Content string
	// Shell is the command the first turn runs with the CLI's shell tool.
	Shell string
	// Final is the final message, answered once the tools' results came
	// back.
	Final string
}

// Request is one request a fake received.
type Request struct {
	Method, Host, Path, Query string
	Header                    http.Header
	// Body is as sent before its Content-Encoding, when that is zstd
	// (Codex's with a ChatGPT sign-in).
	Body []byte
	// Status is what the fake answered; -1 for no answer (Stall).
	Status int
}

// Vendor is one API's fake: the host names it answers for and its
// handler, which plays s and reports each request's status.
type Vendor interface {
	Hosts() []string
	Serve(s *Server, w http.ResponseWriter, r *http.Request, body []byte) (status int)
}

// Server serves vendors' fakes over TLS on the host's loopback.
type Server struct {
	// Script is played by every vendor; set it before the CLI runs.
	Script Script
	// RootCAs trusts the server's certificates (the proxy's upstream
	// roots).
	RootCAs *x509.CertPool
	// Addr is the loopback address every host name leads to.
	Addr string

	vendors map[string]Vendor // by host
	srv     *http.Server

	mu       sync.Mutex
	requests []Request
	faults   []fault
	stall    []byte
}

type fault struct {
	status int
	body   string
}

// Start serves vs until the test ends.
func Start(t testing.TB, script Script, vs ...Vendor) *Server {
	t.Helper()
	s := &Server{Script: script, vendors: map[string]Vendor{}}
	ca, caKey := newCA(t)
	s.RootCAs = x509.NewCertPool()
	s.RootCAs.AddCert(ca)
	var names []string
	for _, v := range vs {
		for _, h := range v.Hosts() {
			s.vendors[h] = v
			names = append(names, h)
		}
	}
	leaf := newLeaf(t, ca, caKey, names)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Addr = l.Addr().String()
	s.srv = &http.Server{
		Handler:   http.HandlerFunc(s.serve),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{leaf}, NextProtos: []string{"h2", "http/1.1"}},
		ErrorLog:  log.New(io.Discard, "", 0),
	}
	go s.srv.ServeTLS(l, "", "")
	t.Cleanup(func() { s.srv.Close() })
	return s
}

// Dial connects every address of a host the server answers for to the
// server, and refuses the rest: the egress proxy's Dial (a whole network
// of names).
func (s *Server) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if _, ok := s.vendors[host]; !ok {
		return nil, fmt.Errorf("fakevendor: no such host %s", host)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, s.Addr)
}

// Fail makes the next model request answer status with a vendor-shaped
// error carrying message instead of the script; calls queue.
func (s *Server) Fail(status int, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, fault{status, message})
}

// Stall makes every request whose body holds marker (the shell command's
// output, say: the turn that carries the tools' results) get no answer
// until the client gives up: a model that never finishes.
func (s *Server) Stall(marker string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stall = []byte(marker)
}

// nextFault takes the next injected fault, if any.
func (s *Server) nextFault() (fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.faults) == 0 {
		return fault{}, false
	}
	f := s.faults[0]
	s.faults = s.faults[1:]
	return f, true
}

// Requests returns every request received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	copy(out, s.requests)
	return out
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if d, err := decodeBody(r.Header.Get("Content-Encoding"), body); err == nil {
		body = d
	} // else the vendor finds the body is not JSON
	rec := Request{Method: r.Method, Host: host, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body}
	s.mu.Lock()
	stall := len(s.stall) > 0 && bytes.Contains(body, s.stall)
	s.mu.Unlock()
	v, ok := s.vendors[host]
	switch {
	case stall:
		rec.Status = -1 // no answer
		s.mu.Lock()
		s.requests = append(s.requests, rec)
		s.mu.Unlock()
		<-r.Context().Done()
		return
	case !ok:
		http.Error(w, "no such host", http.StatusMisdirectedRequest)
		rec.Status = http.StatusMisdirectedRequest
	default:
		rec.Status = v.Serve(s, w, r, body)
	}
	s.mu.Lock()
	s.requests = append(s.requests, rec)
	s.mu.Unlock()
}

// sse writes server-sent events, flushing after each.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &sse{w: w, f: f}
}

// event writes one event; name may be empty (data only).
func (e *sse) event(name string, data []byte) {
	var b bytes.Buffer
	if name != "" {
		fmt.Fprintf(&b, "event: %s\n", name)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		fmt.Fprintf(&b, "data: %s\n", line)
	}
	b.WriteString("\n")
	e.w.Write(b.Bytes())
	if e.f != nil {
		e.f.Flush()
	}
}

func newCA(t testing.TB) (*x509.Certificate, *ecdsa.PrivateKey) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "fakevendor test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func newLeaf(t testing.TB, ca *x509.Certificate, caKey *ecdsa.PrivateKey, names []string) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "fakevendor"}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// Command netclient is a tiny HTTP client for tests that run in a guest
// VM, where busybox has no HTTPS client that goes through a proxy:
//
//	netclient get URL [NAME: VALUE]...   GET through $HTTPS_PROXY/$HTTP_PROXY
//	                                     (loopback too), print status and body
//	netclient count URL                  GET through the proxy, print the body's
//	                                     size and the time it took
//	netclient send METHOD URL BODY [NAME: VALUE]...
//	                                     the same with a method and a body
//	netclient dial HOST:PORT             a raw TCP connection, no proxy
//
// TLS is verified against $SSL_CERT_FILE (Go reads it).
package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: netclient get URL [NAME: VALUE]... | count URL | send METHOD URL BODY [NAME: VALUE]... | dial HOST:PORT")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "dial":
		c, err := net.DialTimeout("tcp", os.Args[2], 5*time.Second)
		if err != nil {
			fmt.Println("dial error:", err)
			os.Exit(1)
		}
		c.Close()
		fmt.Println("dial ok")
	case "get", "count", "send":
		method, target, headers := "GET", os.Args[2], os.Args[3:]
		var body io.Reader
		if os.Args[1] == "send" {
			if len(os.Args) < 5 {
				fmt.Fprintln(os.Stderr, "usage: netclient send METHOD URL BODY [NAME: VALUE]...")
				os.Exit(2)
			}
			method, target, body, headers = os.Args[2], os.Args[3], strings.NewReader(os.Args[4]), os.Args[5:]
		}
		req, err := http.NewRequest(method, target, body)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		for _, h := range headers {
			k, v, _ := strings.Cut(h, ":")
			req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
		}
		// Go never proxies loopback by itself; tests want everything
		// through the proxy.
		proxy := func(r *http.Request) (*url.URL, error) {
			p := os.Getenv("HTTP_PROXY")
			if r.URL.Scheme == "https" {
				p = os.Getenv("HTTPS_PROXY")
			}
			if p == "" {
				return nil, nil
			}
			return url.Parse(p)
		}
		c := &http.Client{Transport: &http.Transport{Proxy: proxy}, Timeout: 30 * time.Second}
		resp, err := c.Do(req)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		defer resp.Body.Close()
		if os.Args[1] == "count" {
			start := time.Now()
			n, err := io.Copy(io.Discard, resp.Body)
			fmt.Printf("status %d bytes %d seconds %.3f err %v\n", resp.StatusCode, n, time.Since(start).Seconds(), err)
			return
		}
		answer, _ := io.ReadAll(resp.Body)
		fmt.Printf("status %d\n%s\n", resp.StatusCode, answer)
	}
}

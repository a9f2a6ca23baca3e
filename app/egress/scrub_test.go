package egress

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestScrubber: whatever the chunks an answer arrives in, every whole
// occurrence of the value becomes the placeholder and nothing else
// changes; what is held back is at most a start of the value.
func TestScrubber(t *testing.T) {
	const value, ph = "sk-real-0123456789", "airlock-placeholder-abc"
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		var in strings.Builder
		for range rng.IntN(8) {
			switch rng.IntN(4) {
			case 0:
				in.WriteString(value)
			case 1:
				in.WriteString(value[:1+rng.IntN(len(value)-1)]) // a start only
			default:
				in.WriteString(strings.Repeat("x", rng.IntN(40)) + "sk-")
			}
		}
		src := in.String()
		s := newScrubber(io.NopCloser(&chunky{b: []byte(src), rng: rng}), value, ph)
		var out bytes.Buffer
		buf := make([]byte, 1+rng.IntN(64))
		for {
			n, err := s.Read(buf)
			out.Write(buf[:n])
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if want := strings.ReplaceAll(src, value, ph); out.String() != want {
			t.Fatalf("case %d: %q\nscrubbed to %q\nwant       %q", i, src, out.String(), want)
		}
	}
	if n := partialMatch([]byte("data: 1\n\n"), []byte(value)); n != 0 {
		t.Errorf("an event's end is held back: %d bytes", n)
	}
}

// chunky gives b out in random pieces.
type chunky struct {
	b   []byte
	rng *rand.Rand
}

func (c *chunky) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(c.b), 1+c.rng.IntN(20))
	copy(p, c.b[:n])
	c.b = c.b[n:]
	return n, nil
}

// TestSecretEchoedBack: an upstream that echoes the request (its headers
// in a header and in the body, gzipped when asked, and split across
// writes) gives the guest the placeholder, never the value, and the
// record counts the echoes; a stream of events still arrives event by
// event.
func TestSecretEchoedBack(t *testing.T) {
	ph, _ := NewPlaceholder()
	const value = "sk-real-0123456789"
	h := newHarness(t, &Policy{Secrets: []Secret{{Host: "echo.test", Header: "Authorization", Name: "TOKEN", Value: value, Placeholder: ph}}})
	next := make(chan struct{})
	up := upstreamTLS(t, h, func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		switch r.URL.Path {
		case "/echo":
			w.Header().Set("X-Echo", auth)
			var body io.Writer = w
			if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
				w.Header().Set("Content-Encoding", "gzip")
				gz := gzip.NewWriter(w)
				defer gz.Close()
				body = gz
			}
			io.WriteString(body, `{"authorization": "`+auth[:10])
			w.(http.Flusher).Flush()
			io.WriteString(body, auth[10:]+`"}`)
		case "/events":
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: 1\n\n")
			w.(http.Flusher).Flush()
			<-next
			io.WriteString(w, "data: "+auth+"\n\n")
		}
	})
	h.net.add("echo.test:443", up.Listener.Addr().String())
	c := &http.Client{Transport: h.client().Transport}
	do := func(path, encoding string) *http.Response {
		req, _ := http.NewRequest("GET", "https://echo.test"+path, nil)
		req.Header.Set("Authorization", "Bearer "+ph)
		if encoding != "" {
			req.Header.Set("Accept-Encoding", encoding)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for _, enc := range []string{"", "gzip"} {
		resp := do("/echo", enc)
		var r io.Reader = resp.Body
		if resp.Header.Get("Content-Encoding") == "gzip" {
			gz, err := gzip.NewReader(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			r = gz
		}
		b, _ := io.ReadAll(r)
		resp.Body.Close()
		all := string(b) + resp.Header.Get("X-Echo")
		if strings.Contains(all, value) || !strings.Contains(string(b), `"authorization": "Bearer `+ph+`"`) || resp.Header.Get("X-Echo") != "Bearer "+ph {
			t.Errorf("Accept-Encoding %q: the guest got %q, X-Echo %q", enc, b, resp.Header.Get("X-Echo"))
		}
		if rec := h.last(t); rec.SecretEchoed != 2 || !strings.Contains(rec.String(), "the guest got the placeholder") {
			t.Errorf("record %+v", rec)
		}
	}
	// Events come as they are sent: the first before the second exists.
	resp := do("/events", "")
	br := bufio.NewReader(resp.Body)
	got := make(chan string, 1)
	go func() { l, _ := br.ReadString('\n'); got <- l }()
	select {
	case l := <-got:
		if l != "data: 1\n" {
			t.Errorf("first event: %q", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the first event was held back")
	}
	close(next)
	rest, _ := io.ReadAll(br)
	resp.Body.Close()
	if strings.Contains(string(rest), value) || !strings.Contains(string(rest), "data: Bearer "+ph) {
		t.Errorf("the second event: %q", rest)
	}
}

package egress

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/airlock-dev/airlock/internal/bytesize"
)

// Staged actions: requests that write through an API (comment on an
// issue, post to a chat, send a mail) are answered by the proxy at once
// and held, whole, as review items of the sandbox; nothing leaves the
// host until a person approves one, and then the host sends it (Send).

// DefaultStageMethods are the methods a Stage holds when it names none:
// those that write.
var DefaultStageMethods = []string{"POST", "PUT", "PATCH", "DELETE"}

// DefaultStageMaxBody is the largest request body a Stage holds when it
// sets no limit: a held request is kept whole, so a larger one is refused.
const DefaultStageMaxBody = 1 << 20

// MaxStageBody is the most any Stage may set as its MaxBody: a held body
// is read whole into memory, and up to Config.MaxConns requests may be
// read at once.
const MaxStageBody = 16 << 20

// Stage holds the matching requests to one host for review instead of
// sending them. Staging a host makes the proxy terminate its TLS (with or
// without a secret); requests to it that do not match pass as the rest of
// the policy decides.
type Stage struct {
	// Host is an exact host name or IP address, or *.domain.
	Host string `json:"host"`
	// Port is the port held; 0 means the default for the kind of request
	// (443 for HTTPS, 80 for plain HTTP).
	Port int `json:"port,omitempty"`
	// Methods are the methods held; empty means DefaultStageMethods.
	Methods []string `json:"methods,omitempty"`
	// Paths, if not empty, are the only URL paths held: patterns of
	// segments where * matches one segment or part of one and ** any
	// number of segments ("/repos/*/*/issues/*/comments", "/api/**").
	Paths []string `json:"paths,omitempty"`
	// Reply is what the agent gets for a held request.
	Reply Reply `json:"reply"`
	// MaxBody is the largest body held, in bytes; 0 means
	// DefaultStageMaxBody.
	MaxBody int64 `json:"max_body,omitempty"`
	// Source says where the entry came from ("user", "project").
	Source string `json:"source,omitempty"`
}

// Reply is the answer the agent gets for a held request. The zero value
// is DefaultReply's: 202 with a small JSON body saying the request is held.
type Reply struct {
	// Status is the HTTP status; 0 means 202.
	Status int `json:"status,omitempty"`
	// Header is added to the answer ("{{id}}" in a value becomes the
	// action's number, for a Location); without a Content-Type the body is
	// sent as application/json.
	Header map[string]string `json:"header,omitempty"`
	// Body is the answer's body; "{{id}}" in it becomes the action's
	// number. Empty means DefaultReplyBody (an empty body needs Status
	// 204).
	Body string `json:"body,omitempty"`
}

// DefaultReplyBody is the body of a held request's answer when its Stage
// sets none.
const DefaultReplyBody = `{"airlock": "held for review", "action": {{id}}, "message": "Airlock holds this request until the user approves it; it is then sent from the user's computer, once. Nothing was sent yet."}` + "\n"

// StageMethods are the methods s holds.
func (s Stage) StageMethods() []string {
	if len(s.Methods) == 0 {
		return DefaultStageMethods
	}
	return s.Methods
}

// String is the entry for people: "api.github.com (POST,PATCH) /repos/**".
func (s Stage) String() string {
	r := Rule{Host: s.Host, Port: s.Port, Methods: s.StageMethods()}
	out := r.String()
	if len(s.Paths) > 0 {
		out += " " + strings.Join(s.Paths, " ")
	}
	return out
}

// Validate checks a stage built as data (from a configuration file).
func (s Stage) Validate() error {
	var errs []error
	if err := (Rule{Host: s.Host, Port: s.Port, Methods: s.Methods}).Validate(); err != nil {
		errs = append(errs, err)
	}
	for _, p := range s.Paths {
		if err := checkPathPattern(p); err != nil {
			errs = append(errs, fmt.Errorf("path %q: %w", p, err))
		}
	}
	if st := s.Reply.Status; st != 0 && (st < 200 || st > 299) {
		errs = append(errs, fmt.Errorf("reply status %d: want a success status from 200 to 299 (the agent is told the request went through)", st))
	}
	if s.Reply.Status == 204 && s.Reply.Body != "" {
		errs = append(errs, errors.New("reply status 204 has no body: drop the body or choose another status"))
	}
	for k, v := range s.Reply.Header {
		if !validToken(k) {
			errs = append(errs, fmt.Errorf("reply header %q is not a valid header name", k))
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			errs = append(errs, fmt.Errorf("reply header %s: its value has a line break", k))
		}
		switch textproto.CanonicalMIMEHeaderKey(k) {
		case "Content-Length", "Transfer-Encoding", "Connection":
			errs = append(errs, fmt.Errorf("reply header %s is set by the proxy itself", k))
		}
	}
	switch {
	case s.MaxBody < 0:
		errs = append(errs, fmt.Errorf("max_body %d: want a size of at most %s (0 for the default, %s)", s.MaxBody, bytesize.Format(MaxStageBody), bytesize.Format(DefaultStageMaxBody)))
	case s.MaxBody > MaxStageBody:
		errs = append(errs, fmt.Errorf("max_body %s: want at most %s (0 for the default, %s); a held body is kept whole", bytesize.Format(s.MaxBody), bytesize.Format(MaxStageBody), bytesize.Format(DefaultStageMaxBody)))
	}
	return errors.Join(errs...)
}

// checkPathPattern accepts an absolute path of segments, each a pattern
// of path.Match or "**".
func checkPathPattern(p string) error {
	if !strings.HasPrefix(p, "/") {
		return errors.New("want an absolute path, starting with /")
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "**" {
			continue
		}
		if strings.Contains(seg, "**") {
			return errors.New("** stands for whole segments only (/api/**/comments)")
		}
		if _, err := path.Match(seg, ""); err != nil {
			return fmt.Errorf("segment %q: %w", seg, err)
		}
	}
	return nil
}

// matchPath reports whether the URL path p matches the pattern.
func matchPath(pattern, p string) bool {
	return matchSegments(strings.Split(strings.TrimPrefix(pattern, "/"), "/"), strings.Split(strings.TrimPrefix(p, "/"), "/"))
}

// matchSegments matches segments against a pattern of segments, each a
// path.Match pattern or "**" for any number of segments. The guest
// chooses the path: the cost is at most one path.Match per pair of
// segments, however many "**" the pattern has.
func matchSegments(pat, segs []string) bool {
	// cur[j] says whether the pattern so far matches segs[:j].
	cur, next := make([]bool, len(segs)+1), make([]bool, len(segs)+1)
	cur[0] = true
	for _, p := range pat {
		if p == "**" {
			seen := false
			for j := range cur {
				seen = seen || cur[j]
				next[j] = seen
			}
		} else {
			next[0] = false
			for j := 1; j <= len(segs); j++ {
				next[j] = false
				if cur[j-1] {
					next[j], _ = path.Match(p, segs[j-1])
				}
			}
		}
		cur, next = next, cur
	}
	return cur[len(segs)]
}

// covers reports whether s holds requests to host:port (whatever their
// method and path).
func (s Stage) covers(host string, port int, connect bool) bool {
	return matchHost(normHost(s.Host), host) && Rule{Port: s.Port}.matchPort(port, connect)
}

// holds reports whether s holds a request.
func (s Stage) holds(req Request) bool {
	// A method in other case is the same method to some servers: held
	// as its upper-case self.
	if !s.covers(normHost(req.Host), req.Port, req.Connect) || !slices.Contains(s.StageMethods(), strings.ToUpper(req.Method)) {
		return false
	}
	if len(s.Paths) == 0 {
		return true
	}
	// The path as sent and as a server may read it (cleaned of "//",
	// "." and "..", in lower case): holding too much is safe, letting a
	// spelling slip past is not.
	cleaned := path.Clean("/" + req.Path)
	variants := []string{req.Path, cleaned, strings.ToLower(req.Path), strings.ToLower(cleaned)}
	return slices.ContainsFunc(s.Paths, func(p string) bool {
		lp := strings.ToLower(p)
		return slices.ContainsFunc(variants, func(v string) bool { return matchPath(p, v) || matchPath(lp, v) })
	})
}

// maxBody is the largest body s holds.
func (s Stage) maxBody() int64 {
	if s.MaxBody <= 0 {
		return DefaultStageMaxBody
	}
	return s.MaxBody
}

// stageFor returns the stage that holds req, if any.
func (p *Policy) stageFor(req Request) *Stage {
	for i := range p.Stage {
		if p.Stage[i].holds(req) {
			return &p.Stage[i]
		}
	}
	return nil
}

// staged reports whether a stage covers host:port: its TLS must be
// terminated to see which requests to hold.
func (p *Policy) staged(host string, port int, connect bool) *Stage {
	for i := range p.Stage {
		if p.Stage[i].covers(host, port, connect) {
			return &p.Stage[i]
		}
	}
	return nil
}

// Held is a request the proxy answered for the agent and kept for review:
// everything needed to send it later, except credentials. It is the
// guest's: every field is hostile until shown safely.
type Held struct {
	Time time.Time `json:"time"`
	// Scheme is "https" (through a CONNECT the proxy terminated) or
	// "http".
	Scheme string `json:"scheme"`
	Host   string `json:"host"`
	Port   int    `json:"port"`
	Method string `json:"method"`
	// Path is the URL's path, escaped as sent; Query its query, without
	// the "?".
	Path  string `json:"path"`
	Query string `json:"query,omitempty"`
	// Header is the request's headers without credentials, hop-by-hop
	// headers or Content-Length.
	Header http.Header `json:"header,omitempty"`
	// Body is the whole body.
	Body []byte `json:"body,omitempty"`
	// Secret, when the request carried the placeholder of its host's
	// secret, says where the real value goes when it is sent.
	Secret *HeldSecret `json:"secret,omitempty"`
	// Dropped names the headers left out as credentials (they are never
	// kept, so never sent).
	Dropped []string `json:"dropped,omitempty"`
	// Rule is the stage entry that held it.
	Rule string `json:"rule"`
}

// HeldSecret is where a held request carried its host's secret: the
// header, and its value cut where the placeholder stood (the value is
// Parts joined with the secret).
type HeldSecret struct {
	Name   string   `json:"name"`
	Header string   `json:"header"`
	Parts  []string `json:"parts"`
}

// URL is the held request's URL.
func (h Held) URL() string {
	u := h.Scheme + "://" + hostHeader(target{host: h.Host, port: h.Port, connect: h.Scheme == "https"}) + h.Path
	if h.Query != "" {
		u += "?" + h.Query
	}
	return u
}

// Target is host:port.
func (h Held) Target() string { return target{host: h.Host, port: h.Port}.String() }

// credentialHeader matches header names that carry credentials besides
// the standard ones: never kept in a held request. So does a name ending
// in "key" (Ocp-Apim-Subscription-Key, Dd-Application-Key) other than an
// idempotency key, which says that a request is the same one again.
var credentialHeader = regexp.MustCompile(`(?i)(token|secret|api-?key|password|passwd|auth|session|signature|credential|cookie)`)

func isCredentialHeader(k string) bool {
	k = strings.ToLower(k)
	return credentialHeader.MatchString(k) || strings.HasSuffix(k, "key") && !strings.HasSuffix(k, "idempotency-key")
}

// hopHeaders are not part of a request as its sender meant it; the
// transport sets them anew.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length", "Expect", "Proxy-Authorization", "Proxy-Authenticate"}

// heldHeader returns the headers of r worth keeping, the names it dropped
// as credentials, and where own's placeholder was.
func heldHeader(in http.Header, own *Secret) (http.Header, []string, *HeldSecret) {
	out := http.Header{}
	var dropped []string
	var sec *HeldSecret
	for k, vs := range in {
		k = textproto.CanonicalMIMEHeaderKey(k)
		if slices.Contains(hopHeaders, k) {
			continue
		}
		if own != nil && k == textproto.CanonicalMIMEHeaderKey(own.Header) && sec == nil && len(vs) == 1 && strings.Contains(vs[0], own.Placeholder) {
			sec = &HeldSecret{Name: own.Name, Header: k, Parts: strings.Split(vs[0], own.Placeholder)}
			continue
		}
		if isCredentialHeader(k) {
			dropped = append(dropped, k)
			continue
		}
		out[k] = slices.Clone(vs)
	}
	slices.Sort(dropped)
	return out, dropped, sec
}

// replyFor is the answer to held action id.
func (s Stage) replyFor(id int) (status int, header http.Header, body string) {
	status = s.Reply.Status
	if status == 0 {
		status = http.StatusAccepted
	}
	header = http.Header{}
	for k, v := range s.Reply.Header {
		header.Set(k, strings.ReplaceAll(v, "{{id}}", strconv.Itoa(id)))
	}
	body = s.Reply.Body
	if body == "" && status != http.StatusNoContent {
		body = DefaultReplyBody
	}
	if header.Get("Content-Type") == "" && body != "" {
		if json.Valid([]byte(strings.ReplaceAll(body, "{{id}}", "0"))) {
			header.Set("Content-Type", "application/json")
		} else {
			header.Set("Content-Type", "text/plain; charset=utf-8")
		}
	}
	body = strings.ReplaceAll(body, "{{id}}", strconv.Itoa(id))
	return status, header, body
}

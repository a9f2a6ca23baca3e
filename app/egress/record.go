package egress

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/airlock-dev/airlock/internal/bytesize"
)

// Modes of a Record.
const (
	ModeHTTP      = "http"      // a plain HTTP request through the proxy
	ModeTunnel    = "tunnel"    // a CONNECT tunnel relayed as bytes
	ModeIntercept = "intercept" // a request inside a CONNECT whose TLS the proxy terminated
)

// Record is one request through the proxy, allowed or denied: what the
// audit log keeps and the CLI shows.
type Record struct {
	Time time.Time `json:"time"`
	Mode string    `json:"mode"`
	Host string    `json:"host"`
	Port int       `json:"port"`
	// Method is the HTTP method, CONNECT for a tunnel.
	Method string `json:"method"`
	// Path is the URL path of a plain or intercepted request (never the
	// query, which may carry tokens); empty for a tunnel.
	Path string `json:"path,omitempty"`
	// Status is the HTTP status the guest got (0 when the connection
	// broke before one).
	Status int `json:"status,omitempty"`
	// BytesUp and BytesDown count body bytes (stream bytes for a tunnel).
	BytesUp   int64         `json:"bytes_up"`
	BytesDown int64         `json:"bytes_down"`
	Duration  time.Duration `json:"duration_ns"`
	// Allowed is the decision; Rule the rule (or reason) that made it.
	Allowed bool   `json:"allowed"`
	Rule    string `json:"rule"`
	Reason  string `json:"reason,omitempty"`
	// Secret names the secret substituted into the request, if any.
	Secret string `json:"secret,omitempty"`
	// SecretNotSent is true when the request with the secret never left
	// the host (its upstream could not be reached or its TLS failed): the
	// credential did not go anywhere.
	SecretNotSent bool `json:"secret_not_sent,omitempty"`
	// SecretEchoed counts the times the upstream's answer held the
	// secret's value (in a header or the body), each given to the guest
	// as the placeholder instead.
	SecretEchoed int    `json:"secret_echoed,omitempty"`
	Error        string `json:"error,omitempty"`
	// Held is true for a request a stage matched: answered by the proxy
	// and kept for review (Action is its number), or refused when it
	// could not be kept (too large a body).
	Held   bool `json:"held,omitempty"`
	Action int  `json:"action,omitempty"`
	// Upgrade is the protocol an allowed request switched the connection
	// to (a WebSocket); its bytes both ways are in BytesUp and BytesDown.
	Upgrade string `json:"upgrade,omitempty"`
}

// Rejected says whether the upstream refused the secret the proxy put
// on the request (401 or 403 from the vendor itself, relayed as it was).
func (r Record) Rejected() bool {
	return r.Secret != "" && !r.SecretNotSent && (r.Status == 401 || r.Status == 403)
}

// String is the record as one line for people.
func (r Record) String() string {
	target := net.JoinHostPort(r.Host, strconv.Itoa(r.Port))
	verdict := "allowed"
	switch {
	case !r.Allowed:
		verdict = "DENIED"
	case r.Held:
		verdict = "HELD"
	}
	s := fmt.Sprintf("%s %s %s%s", verdict, r.Method, target, r.Path)
	if r.Host == "" && r.Method == "" {
		// A connection refused before its request was read.
		s = verdict + " a connection"
	}
	if r.Status != 0 {
		s += fmt.Sprintf(" → %d", r.Status)
	}
	if r.Upgrade != "" {
		s += " switched to " + r.Upgrade
	}
	if r.Held && r.Allowed {
		s += fmt.Sprintf(" (action %d, for review: nothing was sent)", r.Action)
		if r.Secret != "" {
			s += " [" + r.Secret + " to be substituted when sent]"
		}
		return s
	}
	if r.Allowed {
		s += fmt.Sprintf(" (%s up, %s down, %s; %s)", bytesize.Format(r.BytesUp), bytesize.Format(r.BytesDown), r.Duration.Round(time.Millisecond), r.Rule)
	} else {
		s += ": " + r.Reason
	}
	switch {
	case r.Secret != "" && r.SecretNotSent:
		s += " [" + r.Secret + " not sent]"
	case r.Rejected():
		s += fmt.Sprintf(" [%s substituted; %s answered %d: it rejected the credential, check the value of %s]", r.Secret, r.Host, r.Status, r.Secret)
	case r.Secret != "":
		s += " [" + r.Secret + " substituted]"
	}
	if r.SecretEchoed > 0 {
		s += fmt.Sprintf(" [the answer held %s's value %d times: the guest got the placeholder]", r.Secret, r.SecretEchoed)
	}
	if r.Error != "" {
		s += " error: " + r.Error
	}
	return s
}

package sandbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"mime"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/airlock-dev/airlock/internal/bytesize"
	"github.com/airlock-dev/airlock/internal/safetext"
)

// Describe says in one sentence what a held request would do, for
// someone who does not read HTTP: "Comment on issue #12 of org/repo:
// “…”" for GitHub, "Post to #general: …" for Slack, "Send mail to
// alice@example.com: subject …" for the common mail APIs, and the method,
// host and path otherwise. Every part taken from the request is made
// safe to show on one line (safetext.Line) and cut.
func (a Action) Describe() string {
	return safetext.Line(cut(a.describe(), sentenceMax))
}

// sentenceMax is the longest sentence Describe makes.
const sentenceMax = 240

// quoteMax is how much of a text a sentence quotes.
const quoteMax = 120

func (a Action) describe() string {
	host := strings.ToLower(a.Host)
	segs := strings.Split(strings.Trim(a.unescapedPath(), "/"), "/")
	fields := a.fields()
	switch {
	case host == "api.github.com":
		if s := describeGitHub(a.Method, segs, fields); s != "" {
			return s
		}
	case host == "slack.com" || host == "api.slack.com":
		if a.Method == "POST" && len(segs) == 2 && segs[0] == "api" {
			switch segs[1] {
			case "chat.postMessage":
				return fmt.Sprintf("Post to %s on Slack: %s", slackChannel(fields.str("channel")), quote(fields.str("text")))
			case "chat.update":
				return fmt.Sprintf("Edit a message in %s on Slack: %s", slackChannel(fields.str("channel")), quote(fields.str("text")))
			case "chat.delete":
				return fmt.Sprintf("Delete a message in %s on Slack", slackChannel(fields.str("channel")))
			}
		}
	case host == "hooks.slack.com":
		if a.Method == "POST" {
			return "Post to a Slack channel (incoming webhook): " + quote(fields.str("text"))
		}
	case host == "api.sendgrid.com":
		if a.Method == "POST" && strings.HasSuffix(a.Path, "/mail/send") {
			var to []string
			for _, p := range fields.list("personalizations") {
				for _, t := range p.list("to") {
					to = append(to, t.str("email"))
				}
			}
			return mailSentence(to, fields.str("subject"))
		}
	case host == "api.mailgun.net" || host == "api.eu.mailgun.net":
		if a.Method == "POST" && len(segs) == 3 && segs[2] == "messages" {
			return mailSentence(fields.strs("to"), fields.str("subject"))
		}
	case host == "api.postmarkapp.com":
		if a.Method == "POST" && (a.Path == "/email" || a.Path == "/email/withTemplate") {
			return mailSentence(strings.Split(fields.str("To"), ","), fields.str("Subject"))
		}
	case host == "api.resend.com":
		if a.Method == "POST" && a.Path == "/emails" {
			return mailSentence(fields.strs("to"), fields.str("subject"))
		}
	}
	what := a.Method + " " + a.Host + a.unescapedPath()
	if len(a.Body) > 0 {
		what += fmt.Sprintf(" (%s %s)", bytesize.Format(int64(len(a.Body))), a.bodyKind())
	}
	return what
}

// describeGitHub reads the REST API's paths that write; "" when the path
// is not one of them.
func describeGitHub(method string, segs []string, f fields) string {
	if len(segs) == 1 && segs[0] == "graphql" && method == "POST" {
		q := strings.TrimSpace(f.str("query"))
		if strings.HasPrefix(q, "mutation") {
			name := strings.Fields(strings.NewReplacer("{", " ", "(", " ").Replace(q))
			if len(name) > 1 {
				return "Change data on GitHub (GraphQL mutation " + cut(name[1], 60) + ")"
			}
			return "Change data on GitHub (a GraphQL mutation)"
		}
		return ""
	}
	if len(segs) < 3 || segs[0] != "repos" {
		return ""
	}
	repo := segs[1] + "/" + segs[2]
	rest := segs[3:]
	switch {
	case len(rest) == 3 && rest[0] == "issues" && rest[2] == "comments" && method == "POST":
		return fmt.Sprintf("Comment on issue #%s of %s: %s", rest[1], repo, quote(f.str("body")))
	case len(rest) == 3 && rest[0] == "pulls" && rest[2] == "comments" && method == "POST":
		return fmt.Sprintf("Comment on a line of pull request #%s of %s: %s", rest[1], repo, quote(f.str("body")))
	case len(rest) == 3 && rest[0] == "pulls" && rest[2] == "reviews" && method == "POST":
		ev := strings.ToLower(strings.ReplaceAll(f.str("event"), "_", " "))
		if ev == "" {
			ev = "pending"
		}
		return fmt.Sprintf("Review pull request #%s of %s (%s): %s", rest[1], repo, cut(ev, 30), quote(f.str("body")))
	case len(rest) == 3 && rest[0] == "pulls" && rest[2] == "merge" && method == "PUT":
		return fmt.Sprintf("Merge pull request #%s of %s", rest[1], repo)
	case len(rest) == 3 && rest[0] == "issues" && rest[2] == "labels" && method == "POST":
		return fmt.Sprintf("Add labels %s to issue #%s of %s", cut(strings.Join(f.strs("labels"), ", "), quoteMax), rest[1], repo)
	case len(rest) == 1 && rest[0] == "issues" && method == "POST":
		return fmt.Sprintf("Open an issue in %s: %s", repo, quote(f.str("title")))
	case len(rest) == 1 && rest[0] == "pulls" && method == "POST":
		return fmt.Sprintf("Open a pull request in %s from %s into %s: %s", repo, cut(f.str("head"), 60), cut(f.str("base"), 60), quote(f.str("title")))
	case len(rest) == 2 && (rest[0] == "issues" || rest[0] == "pulls") && method == "PATCH":
		kind := map[string]string{"issues": "issue", "pulls": "pull request"}[rest[0]]
		switch f.str("state") {
		case "closed":
			return fmt.Sprintf("Close %s #%s of %s", kind, rest[1], repo)
		case "open":
			return fmt.Sprintf("Reopen %s #%s of %s", kind, rest[1], repo)
		}
		return fmt.Sprintf("Edit %s #%s of %s", kind, rest[1], repo)
	case len(rest) == 3 && rest[0] == "issues" && rest[1] == "comments" && method == "PATCH":
		return fmt.Sprintf("Edit comment %s in %s: %s", rest[2], repo, quote(f.str("body")))
	case len(rest) == 3 && rest[0] == "issues" && rest[1] == "comments" && method == "DELETE":
		return fmt.Sprintf("Delete comment %s in %s", rest[2], repo)
	case len(rest) >= 2 && rest[0] == "contents" && method == "PUT":
		return fmt.Sprintf("Commit %s to %s on GitHub: %s", cut(strings.Join(rest[1:], "/"), 80), repo, quote(f.str("message")))
	case len(rest) == 1 && rest[0] == "releases" && method == "POST":
		return fmt.Sprintf("Publish release %s of %s", cut(f.str("tag_name"), 60), repo)
	case len(rest) == 0 && method == "DELETE":
		return "Delete the repository " + repo
	}
	return ""
}

func slackChannel(c string) string {
	if c == "" {
		return "a channel"
	}
	if strings.HasPrefix(c, "#") || strings.HasPrefix(c, "C") || strings.HasPrefix(c, "D") || strings.HasPrefix(c, "U") {
		return cut(c, 60)
	}
	return "#" + cut(c, 60)
}

func mailSentence(to []string, subject string) string {
	var clean []string
	for _, t := range to {
		if t = strings.TrimSpace(t); t != "" {
			clean = append(clean, t)
		}
	}
	who := "no one named"
	switch len(clean) {
	case 0:
	case 1:
		who = cut(clean[0], 80)
	default:
		who = fmt.Sprintf("%s and %d more", cut(clean[0], 80), len(clean)-1)
	}
	return fmt.Sprintf("Send mail to %s: subject %s", who, quote(subject))
}

// quote is s cut to quoteMax, in quotation marks, on one line.
func quote(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return "(empty)"
	}
	return "“" + cut(s, quoteMax) + "”"
}

// cut shortens s to n runes with an ellipsis.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func (a Action) unescapedPath() string {
	if p, err := url.PathUnescape(a.Path); err == nil {
		return p
	}
	return a.Path
}

// bodyKind names the body's type: JSON, form, text, or bytes.
func (a Action) bodyKind() string {
	ct, _, _ := mime.ParseMediaType(a.Header.Get("Content-Type"))
	switch {
	case ct == "application/json" || strings.HasSuffix(ct, "+json") || json.Valid(a.Body):
		return "JSON"
	case ct == "application/x-www-form-urlencoded":
		return "form"
	case strings.HasPrefix(ct, "text/") || utf8.Valid(a.Body):
		return "text"
	}
	return "bytes"
}

// fields is a request body read as JSON or as a form, for Describe.
type fields map[string]any

func (a Action) fields() fields {
	var m map[string]any
	if json.Unmarshal(a.Body, &m) == nil {
		return m
	}
	if v, err := url.ParseQuery(string(a.Body)); err == nil && bytes.IndexByte(a.Body, '=') >= 0 {
		out := fields{}
		for k, vs := range v {
			if len(vs) == 1 {
				out[k] = vs[0]
			} else {
				l := make([]any, len(vs))
				for i, s := range vs {
					l[i] = s
				}
				out[k] = l
			}
		}
		return out
	}
	return fields{}
}

func (f fields) str(k string) string {
	switch v := f[k].(type) {
	case string:
		return v
	case float64:
		return fmt.Sprint(v)
	}
	return ""
}

// strs is a list of strings, or of objects with "email", or one string.
func (f fields) strs(k string) []string {
	switch v := f[k].(type) {
	case string:
		return strings.Split(v, ",")
	case []any:
		var out []string
		for _, e := range v {
			switch e := e.(type) {
			case string:
				out = append(out, e)
			case map[string]any:
				if s, ok := e["email"].(string); ok {
					out = append(out, s)
				} else if s, ok := e["name"].(string); ok {
					out = append(out, s)
				}
			}
		}
		return out
	}
	return nil
}

func (f fields) list(k string) []fields {
	v, _ := f[k].([]any)
	var out []fields
	for _, e := range v {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

// PrettyBody is the body for reading: JSON indented, a form one field a
// line, text as it is, bytes as their size; safe for a terminal or a
// widget (safetext.Text), at most limit bytes of it.
func (a Action) PrettyBody(limit int) string {
	if len(a.Body) == 0 {
		return ""
	}
	body := a.Body
	var out string
	var buf bytes.Buffer
	switch a.bodyKind() {
	case "JSON":
		if json.Indent(&buf, body, "", "  ") == nil {
			out = buf.String()
		} else {
			out = string(body)
		}
	case "form":
		v, err := url.ParseQuery(string(body))
		if err != nil {
			out = string(body)
			break
		}
		var b strings.Builder
		for _, k := range slices.Sorted(maps.Keys(v)) {
			for _, s := range v[k] {
				fmt.Fprintf(&b, "%s = %s\n", k, s)
			}
		}
		out = b.String()
	case "text":
		out = string(body)
	default:
		return fmt.Sprintf("(%s of binary data)", bytesize.Format(int64(len(body))))
	}
	if len(out) > limit {
		out = out[:limit] + fmt.Sprintf("\n… (%s in all)", bytesize.Format(int64(len(body))))
	}
	return safetext.Text(out)
}

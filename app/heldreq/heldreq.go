// Package heldreq says what a held request would do, for someone who
// does not read HTTP: a staged action of a sandbox (an egress.Held the
// proxy held for review) as one sentence (Describe: a GitHub comment, a
// GraphQL mutation's fields, a Slack post, a mail and its recipients, else
// the method, host and path) and its body laid out for reading
// (PrettyBody). The request is hostile input: whatever it holds, what
// comes out is safe to show (internal/safetext) and short.
//
// It must not import anything of the module but app/egress (the held
// request), internal/safetext and internal/bytesize, nor fyne: app/sandbox
// keeps the requests, app/cli and app/gui show them.
package heldreq

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime"
	"mime/multipart"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/airlock-dev/airlock/app/egress"
	"github.com/airlock-dev/airlock/internal/bytesize"
	"github.com/airlock-dev/airlock/internal/safetext"
)

// Describe says in one sentence what a held request would do, for
// someone who does not read HTTP: "Comment on issue #12 of org/repo:
// “…”" for GitHub, "Post to #general: …" for Slack, "Send mail to
// alice@example.com: subject …" for the common mail APIs, and the method,
// host and path otherwise. Every part taken from the request is made
// safe to show on one line (safetext.Line) and cut.
func Describe(h egress.Held) string {
	return safetext.Cut(safetext.Line(describe(h)), sentenceMax)
}

// sentenceMax is the longest sentence Describe makes, escapes included;
// quoteMax is how much of a text a sentence quotes.
const (
	sentenceMax = 240
	quoteMax    = 120
)

func describe(h egress.Held) string {
	host := strings.ToLower(h.Host)
	segs := segments(h)
	fields := fieldsOf(h)
	// A sentence is said only of a path the server reads one way: no
	// empty, "." or ".." segment, no "/" escaped within one.
	if slices.ContainsFunc(segs, func(s string) bool { return s == "" || s == "." || s == ".." || strings.Contains(s, "/") }) {
		segs = nil
	}
	switch {
	case segs == nil:
	case host == "api.github.com":
		if s := describeGitHub(h.Method, segs, fields); s != "" {
			return s
		}
	case host == "slack.com" || host == "api.slack.com":
		if h.Method == "POST" && len(segs) == 2 && segs[0] == "api" {
			channel := slackChannel(fields.str("channel"))
			switch segs[1] {
			case "chat.postMessage":
				return fmt.Sprintf("Post to %s on Slack%s: %s%s", channel, slackAs(fields), quote(fields.str("text")), slackRich(fields))
			case "chat.update":
				return fmt.Sprintf("Edit a message in %s on Slack: %s%s", channel, quote(fields.str("text")), slackRich(fields))
			case "chat.delete":
				return fmt.Sprintf("Delete a message in %s on Slack", channel)
			}
		}
	case host == "hooks.slack.com":
		if h.Method == "POST" {
			if p := fields.str("payload"); p != "" {
				// A form with the message as JSON in payload.
				var m map[string]any
				_ = json.Unmarshal([]byte(p), &m)
				fields = m
			}
			return "Post to a Slack channel (incoming webhook)" + slackAs(fields) + ": " + quote(fields.str("text")) + slackRich(fields)
		}
	case host == "api.sendgrid.com":
		if h.Method == "POST" && slices.Equal(segs, []string{"v3", "mail", "send"}) {
			var to []string
			subject := fields.str("subject")
			for _, p := range fields.list("personalizations") {
				for _, k := range []string{"to", "cc", "bcc"} {
					for _, t := range p.list(k) {
						to = append(to, t.str("email"))
					}
				}
				if subject == "" {
					subject = p.str("subject")
				}
			}
			return mailSentence(to, subject)
		}
	case host == "api.mailgun.net" || host == "api.eu.mailgun.net":
		if h.Method == "POST" && len(segs) == 3 && segs[2] == "messages" {
			return mailSentence(fields.recipients("to", "cc", "bcc"), fields.str("subject"))
		}
	case host == "api.postmarkapp.com":
		if h.Method == "POST" && (slices.Equal(segs, []string{"email"}) || slices.Equal(segs, []string{"email", "withTemplate"})) {
			return mailSentence(fields.recipients("To", "Cc", "Bcc"), fields.str("Subject"))
		}
	case host == "api.resend.com":
		if h.Method == "POST" && slices.Equal(segs, []string{"emails"}) {
			return mailSentence(fields.recipients("to", "cc", "bcc"), fields.str("subject"))
		}
	}
	what := safetext.Cut(h.Method, 20) + " " + safetext.Cut(h.Host, 80) + safetext.Cut(displayPath(h), 160)
	if len(h.Body) > 0 {
		what += fmt.Sprintf(" (%s %s)", bytesize.Format(int64(len(h.Body))), bodyKind(h))
	}
	return what
}

// describeGitHub reads the REST API's paths that write; "" when the path
// is not one of them.
func describeGitHub(method string, segs []string, f fields) string {
	if len(segs) == 1 && segs[0] == "graphql" && method == "POST" {
		// Named by the fields it changes: its operation's name and the
		// fields' aliases are the agent's words.
		op, ok := graphqlOperation(f.str("query"), f.str("operationName"))
		if !ok || op.kind != "mutation" || len(op.fields) == 0 {
			return ""
		}
		return "Change data on GitHub (GraphQL mutation: " + safetext.Cut(strings.Join(op.fields, ", "), quoteMax) + ")"
	}
	if len(segs) < 3 || segs[0] != "repos" {
		return ""
	}
	repo := safetext.Cut(segs[1], 60) + "/" + safetext.Cut(segs[2], 60)
	rest := segs[3:]
	if len(rest) > 1 {
		rest[1] = safetext.Cut(rest[1], 20) // the or pull request's number
	}
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
		return fmt.Sprintf("Review pull request #%s of %s (%s): %s", rest[1], repo, safetext.Cut(ev, 30), quote(f.str("body")))
	case len(rest) == 3 && rest[0] == "pulls" && rest[2] == "merge" && method == "PUT":
		return fmt.Sprintf("Merge pull request #%s of %s", rest[1], repo)
	case len(rest) == 3 && rest[0] == "issues" && rest[2] == "labels" && method == "POST":
		return fmt.Sprintf("Add labels %s to issue #%s of %s", safetext.Cut(strings.Join(f.strs("labels"), ", "), quoteMax), rest[1], repo)
	case len(rest) == 1 && rest[0] == "issues" && method == "POST":
		return fmt.Sprintf("Open an issue in %s: %s", repo, quote(f.str("title")))
	case len(rest) == 1 && rest[0] == "pulls" && method == "POST":
		return fmt.Sprintf("Open a pull request in %s from %s into %s: %s", repo, safetext.Cut(f.str("head"), 60), safetext.Cut(f.str("base"), 60), quote(f.str("title")))
	case len(rest) == 2 && (rest[0] == "issues" || rest[0] == "pulls") && method == "PATCH":
		kind := map[string]string{"issues": "issue", "pulls": "pull request"}[rest[0]]
		// What else it changes is said too: closing an issue may rewrite
		// its body.
		var other []string
		for _, k := range slices.Sorted(maps.Keys(f)) {
			if k != "state" {
				other = append(other, k)
			}
		}
		changes := safetext.Cut(strings.Join(other, ", "), 80)
		switch f.str("state") {
		case "closed", "open":
			verb := map[string]string{"closed": "Close", "open": "Reopen"}[f.str("state")]
			if changes != "" {
				return fmt.Sprintf("%s %s #%s of %s, and change its %s", verb, kind, rest[1], repo, changes)
			}
			return fmt.Sprintf("%s %s #%s of %s", verb, kind, rest[1], repo)
		}
		if changes != "" {
			return fmt.Sprintf("Edit %s #%s of %s: change its %s", kind, rest[1], repo, changes)
		}
		return fmt.Sprintf("Edit %s #%s of %s", kind, rest[1], repo)
	case len(rest) == 3 && rest[0] == "issues" && rest[1] == "comments" && method == "PATCH":
		return fmt.Sprintf("Edit comment %s in %s: %s", safetext.Cut(rest[2], 20), repo, quote(f.str("body")))
	case len(rest) == 3 && rest[0] == "issues" && rest[1] == "comments" && method == "DELETE":
		return fmt.Sprintf("Delete comment %s in %s", safetext.Cut(rest[2], 20), repo)
	case len(rest) >= 2 && rest[0] == "contents" && method == "PUT":
		return fmt.Sprintf("Commit %s to %s on GitHub: %s", safetext.Cut(strings.Join(rest[1:], "/"), 80), repo, quote(f.str("message")))
	case len(rest) == 1 && rest[0] == "releases" && method == "POST":
		return fmt.Sprintf("Publish release %s of %s", safetext.Cut(f.str("tag_name"), 60), repo)
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
		return safetext.Cut(c, 60)
	}
	return "#" + safetext.Cut(c, 60)
}

// slackAs names who the message claims to be from, when it says.
func slackAs(f fields) string {
	if u := strings.Join(strings.Fields(f.str("username")), " "); u != "" {
		return " as “" + safetext.Cut(u, 40) + "”"
	}
	return ""
}

// slackRich says that a message has more than its text: blocks and
// attachments are what Slack shows, the text only a fallback.
func slackRich(f fields) string {
	if f["blocks"] != nil || f["attachments"] != nil {
		return " (with blocks or attachments not quoted here)"
	}
	return ""
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
		who = safetext.Cut(clean[0], 80)
	default:
		who = fmt.Sprintf("%s and %d more", safetext.Cut(clean[0], 80), len(clean)-1)
	}
	return fmt.Sprintf("Send mail to %s: subject %s", who, quote(subject))
}

// quote is s cut to quoteMax, in quotation marks, on one line.
func quote(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return "(empty)"
	}
	return "“" + safetext.Cut(s, quoteMax) + "”"
}

// segments are the URL path's segments, each unescaped: a "/" escaped
// within one stays in it, as the server reads it.
func segments(h egress.Held) []string {
	segs := strings.Split(strings.TrimPrefix(h.Path, "/"), "/")
	if len(segs) > 1 && segs[len(segs)-1] == "" {
		segs = segs[:len(segs)-1] // a trailing slash
	}
	for i, s := range segs {
		if u, err := url.PathUnescape(s); err == nil {
			segs[i] = u
		}
	}
	return segs
}

// displayPath is the path for people: unescaped, but for a "/" within a
// segment.
func displayPath(h egress.Held) string {
	segs := strings.Split(h.Path, "/")
	for i, s := range segs {
		if u, err := url.PathUnescape(s); err == nil {
			segs[i] = strings.ReplaceAll(strings.ReplaceAll(u, "%", "%25"), "/", "%2F")
		}
	}
	return strings.Join(segs, "/")
}

// bodyKind names the body's type: JSON, form, text, or bytes.
func bodyKind(h egress.Held) string {
	ct, _, _ := mime.ParseMediaType(h.Header.Get("Content-Type"))
	switch {
	case ct == "application/json" || strings.HasSuffix(ct, "+json") || json.Valid(h.Body):
		return "JSON"
	case ct == "application/x-www-form-urlencoded":
		return "form"
	case strings.HasPrefix(ct, "text/"):
		return "text"
	case utf8.Valid(h.Body) && bytes.IndexByte(h.Body, 0) < 0:
		// No text has a NUL byte.
		return "text"
	}
	return "bytes"
}

// fields is a request body read as JSON or as a form, for Describe.
type fields map[string]any

// fieldsOf reads h's body as JSON, a multipart form or a form; empty
// when it is none of them.
func fieldsOf(h egress.Held) fields {
	var m map[string]any
	if json.Unmarshal(h.Body, &m) == nil && m != nil {
		return m
	}
	if v, ok := multipartForm(h); ok {
		return formFields(v)
	}
	if v, err := url.ParseQuery(string(h.Body)); err == nil && bytes.IndexByte(h.Body, '=') >= 0 {
		return formFields(v)
	}
	return fields{}
}

func formFields(v url.Values) fields {
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

// multipartForm reads the text fields of a multipart/form-data body
// (curl -F), leaving its files out.
func multipartForm(h egress.Held) (url.Values, bool) {
	ct, params, err := mime.ParseMediaType(h.Header.Get("Content-Type"))
	if err != nil || ct != "multipart/form-data" || params["boundary"] == "" {
		return nil, false
	}
	v := url.Values{}
	r := multipart.NewReader(bytes.NewReader(h.Body), params["boundary"])
	for {
		part, err := r.NextPart()
		if err != nil {
			break
		}
		if part.FileName() == "" && part.FormName() != "" {
			b, _ := io.ReadAll(io.LimitReader(part, 64<<10))
			v.Add(part.FormName(), string(b))
		}
		part.Close()
	}
	return v, len(v) > 0
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

// recipients are the addresses in the fields keys: lists, or strings of
// addresses separated by commas.
func (f fields) recipients(keys ...string) []string {
	var out []string
	for _, k := range keys {
		for _, v := range f.strs(k) {
			out = append(out, strings.Split(v, ",")...)
		}
	}
	return out
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

// PrettyBody is h's body for reading: JSON indented, a form one field a
// line, text as it is, bytes as their size; safe for a terminal or a
// widget (safetext.Text), at most limit bytes of it.
func PrettyBody(h egress.Held, limit int) string {
	if len(h.Body) == 0 {
		return ""
	}
	body := h.Body
	var out string
	var buf bytes.Buffer
	switch bodyKind(h) {
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
		// One field a line; a value's further lines are indented, so that
		// none passes for a field of its own.
		var b strings.Builder
		for _, k := range slices.Sorted(maps.Keys(v)) {
			for _, s := range v[k] {
				s = strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\n", "\n    ")
				fmt.Fprintf(&b, "%s = %s\n", safetext.Line(k), s)
			}
		}
		out = b.String()
	case "text":
		out = string(body)
	default:
		return fmt.Sprintf("(%s of binary data)", bytesize.Format(int64(len(body))))
	}
	if len(out) > limit {
		// Cut at the start of a character.
		n := max(limit, 0)
		for n > 0 && !utf8.RuneStart(out[n]) {
			n--
		}
		out = out[:n] + fmt.Sprintf("\n… (%s in all)", bytesize.Format(int64(len(body))))
	}
	return safetext.Text(out)
}

// graphqlOp is an operation of a GraphQL document: its kind ("query",
// "mutation", "subscription" or "fragment"), its name, and the fields it
// selects at its top, without their aliases ("(a fragment)" for a
// fragment spread there).
type graphqlOp struct {
	kind, name string
	fields     []string
}

// graphqlOperation reads the operation a GraphQL request runs: the one
// called name, or the document's only one. ok is false when the document
// cannot be read so simply; the request is then described by its URL.
func graphqlOperation(doc, name string) (op graphqlOp, ok bool) {
	toks, ok := graphqlTokens(doc)
	if !ok {
		return graphqlOp{}, false
	}
	var ops []graphqlOp
	cur := -1 // the operation being read, at depth > 0
	depth, parens := 0, 0
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch {
		case t == "(":
			parens++
		case t == ")":
			if parens--; parens < 0 {
				return graphqlOp{}, false
			}
		case parens > 0:
			// Arguments and variables, whatever braces they hold.
		case t == "{":
			if depth == 0 && cur < 0 {
				ops = append(ops, graphqlOp{kind: "query"}) // the shorthand
				cur = len(ops) - 1
			}
			depth++
		case t == "}":
			if depth--; depth < 0 {
				return graphqlOp{}, false
			}
			if depth == 0 {
				cur = -1
			}
		case depth == 0 && cur < 0:
			switch t {
			case "query", "mutation", "subscription", "fragment":
			default:
				return graphqlOp{}, false
			}
			ops = append(ops, graphqlOp{kind: t})
			cur = len(ops) - 1
			if i+1 < len(toks) && graphqlName(toks[i+1]) {
				ops[cur].name = toks[i+1]
				i++
			}
		case depth == 0:
			// Directives and a fragment's type condition.
		case depth == 1 && t == "...":
			ops[cur].fields = append(ops[cur].fields, "(a fragment)")
			i++
			if i < len(toks) && toks[i] == "on" {
				i++
			}
		case depth == 1 && t == "@":
			i++ // the directive's name; its arguments are in parentheses
		case depth == 1:
			if i+2 < len(toks) && toks[i+1] == ":" {
				i += 2 // an alias: the field follows
				t = toks[i]
			}
			if !graphqlName(t) {
				return graphqlOp{}, false
			}
			ops[cur].fields = append(ops[cur].fields, t)
		}
	}
	if depth != 0 || parens != 0 {
		return graphqlOp{}, false
	}
	var found []graphqlOp
	for _, o := range ops {
		if o.kind != "fragment" && (name == "" || o.name == name) {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		return graphqlOp{}, false
	}
	return found[0], true
}

// graphqlMax is the longest document graphqlOperation reads.
const graphqlMax = 256 << 10

// graphqlTokens splits a GraphQL document into names, punctuators and
// stand-ins for strings ("\"\"") and numbers ("0"), without comments,
// commas and white space.
func graphqlTokens(doc string) ([]string, bool) {
	if len(doc) > graphqlMax {
		return nil, false
	}
	var toks []string
	for i := 0; i < len(doc); {
		c := doc[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',':
			i++
		case strings.HasPrefix(doc[i:], "\ufeff"):
			i += len("\ufeff")
		case c == '#':
			for i < len(doc) && doc[i] != '\n' && doc[i] != '\r' {
				i++
			}
		case strings.HasPrefix(doc[i:], `"""`):
			j := i + 3
			for ; ; j++ {
				if j+3 > len(doc) {
					return nil, false
				}
				if strings.HasPrefix(doc[j:], `\"""`) {
					j += 3
					continue
				}
				if strings.HasPrefix(doc[j:], `"""`) {
					break
				}
			}
			toks, i = append(toks, `""`), j+3
		case c == '"':
			j := i + 1
			for ; j < len(doc) && doc[j] != '"'; j++ {
				if doc[j] == '\\' {
					j++
				}
				if j < len(doc) && (doc[j] == '\n' || doc[j] == '\r') {
					return nil, false
				}
			}
			if j >= len(doc) {
				return nil, false
			}
			toks, i = append(toks, `""`), j+1
		case strings.HasPrefix(doc[i:], "..."):
			toks, i = append(toks, "..."), i+3
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i + 1
			for j < len(doc) && (doc[j] == '_' || doc[j] >= 'a' && doc[j] <= 'z' || doc[j] >= 'A' && doc[j] <= 'Z' || doc[j] >= '0' && doc[j] <= '9') {
				j++
			}
			toks, i = append(toks, doc[i:j]), j
		case c == '-' || c >= '0' && c <= '9':
			j := i + 1
			for j < len(doc) && strings.IndexByte("0123456789.eE+-", doc[j]) >= 0 {
				j++
			}
			toks, i = append(toks, "0"), j
		case strings.IndexByte("!$&():=@[]{}|", c) >= 0:
			toks, i = append(toks, doc[i:i+1]), i+1
		default:
			return nil, false
		}
	}
	return toks, true
}

// graphqlName says whether a token is a name.
func graphqlName(t string) bool {
	return t != "" && (t[0] == '_' || t[0] >= 'a' && t[0] <= 'z' || t[0] >= 'A' && t[0] <= 'Z')
}

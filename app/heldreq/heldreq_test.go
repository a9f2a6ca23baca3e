package heldreq

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/airlock-dev/airlock/app/egress"
	"github.com/airlock-dev/airlock/internal/safetext"
)

// action is a held request to host.
func action(method, host, path, contentType, body string) egress.Held {
	h := http.Header{}
	if contentType != "" {
		h.Set("Content-Type", contentType)
	}
	return egress.Held{Scheme: "https", Host: host, Port: 443, Method: method, Path: path, Header: h, Body: []byte(body)}
}

const (
	jsonType = "application/json"
	formType = "application/x-www-form-urlencoded"
)

func TestDescribe(t *testing.T) {
	tests := []struct {
		name string
		a    egress.Held
		want string
	}{
		// GitHub's REST API.
		{"issue comment", action("POST", "api.github.com", "/repos/org/repo/issues/12/comments", jsonType, `{"body": "Fixed in #14.\n\nThanks!"}`),
			"Comment on issue #12 of org/repo: “Fixed in #14. Thanks!”"},
		{"new issue", action("POST", "api.github.com", "/repos/org/repo/issues", jsonType, `{"title": "Crash on start", "body": "..."}`),
			"Open an issue in org/repo: “Crash on start”"},
		{"pull request", action("POST", "api.github.com", "/repos/org/repo/pulls", jsonType, `{"title": "Fix the crash", "head": "fix-crash", "base": "main"}`),
			"Open a pull request in org/repo from fix-crash into main: “Fix the crash”"},
		{"close issue", action("PATCH", "api.github.com", "/repos/org/repo/issues/5", jsonType, `{"state": "closed"}`),
			"Close issue #5 of org/repo"},
		{"close pull request", action("PATCH", "api.github.com", "/repos/org/repo/pulls/6", jsonType, `{"state": "closed"}`),
			"Close pull request #6 of org/repo"},
		{"reopen", action("PATCH", "api.github.com", "/repos/org/repo/issues/5", jsonType, `{"state": "open"}`),
			"Reopen issue #5 of org/repo"},
		{"close and rewrite", action("PATCH", "api.github.com", "/repos/org/repo/issues/5", jsonType, `{"state": "closed", "body": "spam", "title": "x"}`),
			"Close issue #5 of org/repo, and change its body, title"},
		{"edit", action("PATCH", "api.github.com", "/repos/org/repo/issues/5", jsonType, `{"title": "Better title"}`),
			"Edit issue #5 of org/repo: change its title"},
		{"review", action("POST", "api.github.com", "/repos/org/repo/pulls/7/reviews", jsonType, `{"event": "REQUEST_CHANGES", "body": "Please add a test."}`),
			"Review pull request #7 of org/repo (request changes): “Please add a test.”"},
		{"approve", action("POST", "api.github.com", "/repos/org/repo/pulls/7/reviews", jsonType, `{"event": "APPROVE"}`),
			"Review pull request #7 of org/repo (approve): (empty)"},
		{"merge", action("PUT", "api.github.com", "/repos/org/repo/pulls/7/merge", jsonType, `{"merge_method": "squash"}`),
			"Merge pull request #7 of org/repo"},
		{"delete repository", action("DELETE", "api.github.com", "/repos/org/repo", "", ""),
			"Delete the repository org/repo"},
		{"graphql mutation", action("POST", "api.github.com", "/graphql", jsonType, `{"query": "mutation AddComment($id: ID!, $body: String!) { addComment(input: {subjectId: $id, body: $body}) { clientMutationId } }", "variables": {"id": "I_1", "body": "hi"}}`),
			"Change data on GitHub (GraphQL mutation: addComment)"},
		{"graphql mutation, anonymous, two fields", action("POST", "api.github.com", "/graphql", jsonType, `{"query": "mutation { a: addStar(input: {starrableId: \"x\"}) { clientMutationId } # a comment { \n removeStar(input: {starrableId: \"}\"}) @include(if: true) { clientMutationId } }"}`),
			"Change data on GitHub (GraphQL mutation: addStar, removeStar)"},
		{"graphql mutation named to mislead", action("POST", "api.github.com", "/graphql", jsonType, `{"query": "mutation AddStar { addStar: deleteRepository(input: {repositoryId: \"R_1\"}) { clientMutationId } }"}`),
			"Change data on GitHub (GraphQL mutation: deleteRepository)"},
		{"graphql operation chosen by name", action("POST", "api.github.com", "/graphql", jsonType, `{"query": "query Harmless { viewer { login } } mutation Other { deleteIssue(input: {issueId: \"I\"}) { clientMutationId } }", "operationName": "Other"}`),
			"Change data on GitHub (GraphQL mutation: deleteIssue)"},
		{"graphql query", action("POST", "api.github.com", "/graphql", jsonType, `{"query": "query { viewer { login } }"}`),
			"POST api.github.com/graphql (39 B JSON)"},
		{"graphql unreadable", action("POST", "api.github.com", "/graphql", jsonType, `{"query": "mutation A { x } mutation B { y }"}`),
			"POST api.github.com/graphql (46 B JSON)"},
		// An escaped / is not a separator to the sentence.
		{"escaped slash", action("POST", "api.github.com", "/repos/org/repo%2Fissues%2F1%2Fcomments", jsonType, `{"body": "x"}`),
			"POST api.github.com/repos/org/repo%2Fissues%2F1%2Fcomments (13 B JSON)"},
		{"dot segments", action("POST", "api.github.com", "/repos/org/repo/issues/../comments", jsonType, `{"body": "x"}`),
			"POST api.github.com/repos/org/repo/issues/../comments (13 B JSON)"},

		// Slack.
		{"slack json", action("POST", "slack.com", "/api/chat.postMessage", jsonType, `{"channel": "general", "text": "Build is green"}`),
			"Post to #general on Slack: “Build is green”"},
		{"slack form", action("POST", "slack.com", "/api/chat.postMessage", formType, `channel=C0123ABC&text=Deploy+done+%F0%9F%9A%80`),
			"Post to C0123ABC on Slack: “Deploy done 🚀”"},
		{"slack blocks and name", action("POST", "slack.com", "/api/chat.postMessage", jsonType, `{"channel": "#ops", "text": "fallback", "username": "CEO", "blocks": [{"type": "section"}]}`),
			"Post to #ops on Slack as “CEO”: “fallback” (with blocks or attachments not quoted here)"},
		{"slack webhook", action("POST", "hooks.slack.com", "/services/T000/B000/XXXX", jsonType, `{"text": "Nightly build failed"}`),
			"Post to a Slack channel (incoming webhook): “Nightly build failed”"},
		{"slack webhook payload", action("POST", "hooks.slack.com", "/services/T000/B000/XXXX", formType, `payload=%7B%22text%22%3A+%22hi+there%22%7D`),
			"Post to a Slack channel (incoming webhook): “hi there”"},

		// Mail.
		{"sendgrid", action("POST", "api.sendgrid.com", "/v3/mail/send", jsonType, `{"personalizations": [{"to": [{"email": "alice@example.com"}], "bcc": [{"email": "eve@example.com"}]}, {"to": [{"email": "bob@example.com", "name": "Bob"}]}], "from": {"email": "me@example.com"}, "subject": "Release 1.2", "content": [{"type": "text/plain", "value": "..."}]}`),
			"Send mail to alice@example.com and 2 more: subject “Release 1.2”"},
		{"mailgun form", action("POST", "api.mailgun.net", "/v3/mg.example.com/messages", formType, `from=me%40example.com&to=alice%40example.com&subject=Hello+there&text=Hi`),
			"Send mail to alice@example.com: subject “Hello there”"},
		{"mailgun two to and cc", action("POST", "api.eu.mailgun.net", "/v3/mg.example.com/messages", formType, `to=alice%40example.com&to=bob%40example.com&cc=carol%40example.com&subject=S`),
			"Send mail to alice@example.com and 2 more: subject “S”"},
		{"mailgun multipart", multipartAction(t, "api.mailgun.net", "/v3/mg.example.com/messages", map[string]string{"to": "alice@example.com, bob@example.com", "subject": "From curl -F"}),
			"Send mail to alice@example.com and 1 more: subject “From curl -F”"},
		{"postmark", action("POST", "api.postmarkapp.com", "/email", jsonType, `{"From": "me@example.com", "To": "alice@example.com, bob@example.com", "Bcc": "eve@example.com", "Subject": "Invoice", "TextBody": "..."}`),
			"Send mail to alice@example.com and 2 more: subject “Invoice”"},
		{"resend", action("POST", "api.resend.com", "/emails", jsonType, `{"from": "me@example.com", "to": ["alice@example.com"], "subject": "Welcome", "html": "<p>hi</p>"}`),
			"Send mail to alice@example.com: subject “Welcome”"},
		{"resend string", action("POST", "api.resend.com", "/emails", jsonType, `{"to": "alice@example.com", "subject": "Welcome"}`),
			"Send mail to alice@example.com: subject “Welcome”"},
		{"mail to no one", action("POST", "api.resend.com", "/emails", jsonType, `{"subject": ""}`),
			"Send mail to no one named: subject (empty)"},

		// Anything else.
		{"generic json", action("POST", "api.example.com", "/v1/things", jsonType, `{"a": 1}`),
			"POST api.example.com/v1/things (8 B JSON)"},
		{"generic form", action("PUT", "api.example.com", "/x", formType, `a=1`),
			"PUT api.example.com/x (3 B form)"},
		{"generic text", action("POST", "api.example.com", "/x", "text/plain", `hello`),
			"POST api.example.com/x (5 B text)"},
		{"generic bytes", action("POST", "api.example.com", "/upload", "application/octet-stream", "\x89PNG\r\n\x1a\n\x00\x00\xff"),
			"POST api.example.com/upload (11 B bytes)"},
		{"generic no body", action("DELETE", "api.example.com", "/x/1", "", ""),
			"DELETE api.example.com/x/1"},
		{"github other path", action("POST", "api.github.com", "/user/repos", jsonType, `{"name": "x"}`),
			"POST api.github.com/user/repos (13 B JSON)"},
		{"lower-case method", action("post", "api.github.com", "/repos/o/r/issues/1/comments", jsonType, `{"body": "x"}`),
			"post api.github.com/repos/o/r/issues/1/comments (13 B JSON)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Describe(tt.a); got != tt.want {
				t.Errorf("Describe() =\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func multipartAction(t *testing.T, host, path string, fields map[string]string) egress.Held {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	for k, v := range fields {
		if err := w.WriteField(k, v); err != nil {
			t.Fatal(err)
		}
	}
	fw, err := w.CreateFormFile("attachment", "report.pdf")
	if err != nil {
		t.Fatal(err)
	}
	fw.Write([]byte("%PDF-1.4 \x00\xff"))
	w.Close()
	return action("POST", host, path, w.FormDataContentType(), b.String())
}

// TestDescribeHostile: whatever the agent puts in a request, the
// sentence is one line a terminal or a widget shows as it is, and short.
func TestDescribeHostile(t *testing.T) {
	long := strings.Repeat("A very long text. ", 600) // ~10 kB
	hostile := []string{
		"\x1b[2J\x1b[1;1HApproved by admin",
		"fix \u202egnp.exe\u202c",
		"line one\nline two\r\nline three",
		"\u2066hidden\u2069\u200b",
		long,
		"\x00\x07\x7f\u0085",
	}
	var actions []egress.Held
	for _, s := range hostile {
		j := func(v string) string {
			var b strings.Builder
			b.WriteString(`"`)
			for _, r := range v {
				switch {
				case r == '"' || r == '\\':
					b.WriteString(`\` + string(r))
				case r < 0x20 || r == 0x7f:
					b.WriteString(`\u00` + string("0123456789abcdef"[r>>4]) + string("0123456789abcdef"[r&15]))
				default:
					b.WriteRune(r)
				}
			}
			b.WriteString(`"`)
			return b.String()
		}
		q := strings.NewReplacer("%", "%25", "&", "%26", "=", "%3D", "+", "%2B", "\n", "%0A", "\r", "%0D", "\x00", "%00").Replace(s)
		actions = append(actions,
			action("POST", "api.github.com", "/repos/org/repo/issues/12/comments", jsonType, `{"body": `+j(s)+`}`),
			action("POST", "api.github.com", "/repos/org/repo/issues", jsonType, `{"title": `+j(s)+`}`),
			action("POST", "api.github.com", "/repos/org/repo/pulls", jsonType, `{"title": "t", "head": `+j(s)+`, "base": `+j(s)+`}`),
			action("POST", "api.github.com", "/repos/"+escapeSeg(s)+"/"+escapeSeg(s)+"/issues/"+escapeSeg(s)+"/comments", jsonType, `{"body": "x"}`),
			action("POST", "api.github.com", "/graphql", jsonType, `{"query": `+j("mutation { "+strings.Map(identOnly, s)+" }")+`}`),
			action("POST", "slack.com", "/api/chat.postMessage", formType, "channel="+q+"&text="+q+"&username="+q),
			action("POST", "api.sendgrid.com", "/v3/mail/send", jsonType, `{"personalizations": [{"to": [{"email": `+j(s)+`}]}], "subject": `+j(s)+`}`),
			action("POST", "api.mailgun.net", "/v3/d/messages", formType, "to="+q+"&subject="+q),
			action("POST", "api.postmarkapp.com", "/email", jsonType, `{"To": `+j(s)+`, "Subject": `+j(s)+`}`),
			action("POST", "api.resend.com", "/emails", jsonType, `{"to": [`+j(s)+`], "subject": `+j(s)+`}`),
			action("POST", "api.example.com", "/"+escapeSeg(s), "text/plain", s),
			action(strings.Map(identOnly, s), strings.Map(identOnly, s)+".example.com", "/x", "", ""),
		)
	}
	for _, a := range actions {
		got := Describe(a)
		if safetext.Suspicious(got) || strings.ContainsAny(got, "\n\r") {
			t.Errorf("Describe() of %s %s is not safe on one line: %q", a.Method, a.Path[:min(len(a.Path), 40)], got)
		}
		if n := utf8.RuneCountInString(got); n > 300 {
			t.Errorf("Describe() of %s %s%s is %d characters long, want at most %d", a.Method, a.Host, a.Path[:min(len(a.Path), 40)], n, 300)
		}
	}
	// What the hostile text is, is still visible.
	got := Describe(action("POST", "api.github.com", "/repos/org/repo/issues/12/comments", jsonType, `{"body": "\u001b[2Jok \u202efdp.exe"}`))
	if want := `Comment on issue #12 of org/repo: “\x1b[2Jok <U+202E>fdp.exe”`; got != want {
		t.Errorf("Describe() = %q, want %q", got, want)
	}
	got = Describe(action("POST", "api.github.com", "/repos/org/repo/issues/12/comments", jsonType, `{"body": "`+long+`"}`))
	if !strings.HasPrefix(got, "Comment on issue #12 of org/repo: “A very long text. A very") || !strings.HasSuffix(got, "…”") {
		t.Errorf("a long comment: %q", got)
	}
}

// identOnly keeps letters and drops the rest, for hostile text where a
// name must stay a name.
func identOnly(r rune) rune {
	if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
		return r
	}
	return -1
}

func escapeSeg(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' {
			b.WriteByte(c)
		} else {
			b.WriteString("%" + strings.ToUpper(string("0123456789abcdef"[c>>4])+string("0123456789abcdef"[c&15])))
		}
	}
	return b.String()
}

func TestPrettyBody(t *testing.T) {
	tests := []struct {
		name  string
		a     egress.Held
		limit int
		want  string
	}{
		{"json indented", action("POST", "h", "/", jsonType, `{"b":1,"a":{"c":[1,2]}}`), 1000,
			"{\n  \"b\": 1,\n  \"a\": {\n    \"c\": [\n      1,\n      2\n    ]\n  }\n}"},
		{"json without a type", action("POST", "h", "/", "", `[1,2]`), 1000, "[\n  1,\n  2\n]"},
		{"json type, not json", action("POST", "h", "/", jsonType, `{"a":`), 1000, `{"a":`},
		{"json with escapes kept escaped", action("POST", "h", "/", jsonType, `{"a":"\u001b[2J\u202e"}`), 1000, "{\n  \"a\": \"\\u001b[2J\\u202e\"\n}"},
		{"json with a raw bidi override", action("POST", "h", "/", jsonType, "{\"a\":\"x\u202ey\"}"), 1000, "{\n  \"a\": \"x<U+202E>y\"\n}"},
		{"form sorted", action("POST", "h", "/", formType, `to=b%40x.com&subject=Hi&to=a%40x.com&a=1`), 1000,
			"a = 1\nsubject = Hi\nto = b@x.com\nto = a@x.com\n"},
		{"form value on several lines", action("POST", "h", "/", formType, `text=hello%0Ato+%3D+eve%40x.com&z=1`), 1000,
			"text = hello\n    to = eve@x.com\nz = 1\n"},
		{"form key with a newline", action("POST", "h", "/", formType, `a%0Ab=1`), 1000, "a\\x0ab = 1\n"},
		{"text", action("POST", "h", "/", "text/plain", "hello\nworld\n"), 1000, "hello\nworld\n"},
		{"text with escapes", action("POST", "h", "/", "text/plain", "a\x1b[2Jb"), 1000, `a\x1b[2Jb`},
		{"binary", action("POST", "h", "/", "image/png", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff"), 1000, "(17 B of binary data)"},
		{"binary that is valid UTF-8", action("POST", "h", "/", "application/octet-stream", "\x00\x01\x02\x03abc"), 1000, "(7 B of binary data)"},
		{"empty", action("POST", "h", "/", jsonType, ""), 1000, ""},
		{"capped", action("POST", "h", "/", "text/plain", strings.Repeat("x", 5000)), 100, strings.Repeat("x", 100) + "\n… (4.9 KiB in all)"},
		{"capped at a character", action("POST", "h", "/", "text/plain", strings.Repeat("é", 100)), 5, "éé\n… (200 B in all)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PrettyBody(tt.a, tt.limit)
			if got != tt.want {
				t.Errorf("PrettyBody(%d) =\n%q\nwant\n%q", tt.limit, got, tt.want)
			}
			if safetext.Suspicious(got) {
				t.Errorf("PrettyBody is not safe to show: %q", got)
			}
		})
	}
	// A large JSON body is indented and capped.
	big := `{"items": [` + strings.Repeat(`{"a": 1},`, 10000) + `{"a": 1}]}`
	got := PrettyBody(action("POST", "h", "/", jsonType, big), 64<<10)
	if !strings.HasPrefix(got, "{\n  \"items\": [\n    {\n      \"a\": 1\n    },") || !strings.HasSuffix(got, "(87.9 KiB in all)") || len(got) > 64<<10+100 {
		t.Errorf("a large JSON body: %d bytes, starts %q, ends %q", len(got), got[:min(40, len(got))], got[max(0, len(got)-40):])
	}
}

// FuzzDescribe: any request to any of the hosts Describe knows gives one
// safe, short line, and PrettyBody text that is safe to show.
func FuzzDescribe(f *testing.F) {
	f.Add("POST", "api.github.com", "/graphql", jsonType, `{"query": "mutation { a: b(x: {y: \"}\"}) { c } ...F @d }"}`)
	f.Add("POST", "api.github.com", "/repos/o/r/issues/1/comments", jsonType, `{"body": "x"}`)
	f.Add("PATCH", "api.github.com", "/repos/o/r/pulls/1", jsonType, `{"state": "closed", "x": 1}`)
	f.Add("POST", "slack.com", "/api/chat.postMessage", formType, "channel=%1b&text=%e2%80%ae")
	f.Add("POST", "hooks.slack.com", "/services/x", formType, "payload=%7B%7D")
	f.Add("POST", "api.sendgrid.com", "/v3/mail/send", jsonType, `{"personalizations": [{"to": [{"email": 1}]}]}`)
	f.Add("POST", "api.mailgun.net", "/v3/d/messages", "multipart/form-data; boundary=x", "--x\r\nContent-Disposition: form-data; name=\"to\"\r\n\r\na@b\r\n--x--\r\n")
	f.Fuzz(func(t *testing.T, method, host, path, contentType, body string) {
		a := action(method, host, path, contentType, body)
		got := Describe(a)
		if safetext.Suspicious(got) || strings.ContainsAny(got, "\n\r") || utf8.RuneCountInString(got) > sentenceMax {
			t.Fatalf("Describe() = %q", got)
		}
		if p := PrettyBody(a, 1000); safetext.Suspicious(p) {
			t.Fatalf("PrettyBody = %q", p)
		}
	})
}

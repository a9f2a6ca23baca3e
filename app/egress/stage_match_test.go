package egress

import "testing"

// TestStageHoldsEverySpelling: a method in lower case and a path a
// server would read the same (doubled slashes, dot segments, other case)
// are held by the stage that holds the plain spelling.
func TestStageHoldsEverySpelling(t *testing.T) {
	st := Stage{Host: "api.github.com", Paths: []string{"/repos/*/*/issues/*/comments"}}
	for _, tc := range []struct {
		method, path string
		want         bool
	}{
		{"POST", "/repos/o/r/issues/1/comments", true},
		{"post", "/repos/o/r/issues/1/comments", true},
		{"POST", "//repos/o/r/issues/1/comments", true},
		{"POST", "/repos/o//r/issues/1/comments", true},
		{"POST", "/repos/o/r/x/../issues/1/comments", true},
		{"POST", "/repos/o/r/./issues/1/comments", true},
		{"POST", "/Repos/o/r/Issues/1/Comments", true},
		{"POST", "/repos/o/r/issues/1/comments/", true},
		{"GET", "/repos/o/r/issues/1/comments", false},
		{"POST", "/repos/o/r/pulls/1/comments", false},
	} {
		req := Request{Host: "api.github.com", Port: 443, Method: tc.method, Path: tc.path, Connect: true}
		if got := st.holds(req); got != tc.want {
			t.Errorf("%s %s: held %v, want %v", tc.method, tc.path, got, tc.want)
		}
	}
}

func TestReplyHeaderCarriesID(t *testing.T) {
	st := Stage{Host: "h.com", Reply: Reply{Status: 201, Header: map[string]string{"Location": "/items/{{id}}"}, Body: `{"id": {{id}}}`}}
	status, h, body := st.replyFor(7)
	if status != 201 || h.Get("Location") != "/items/7" || body != `{"id": 7}` || h.Get("Content-Type") != "application/json" {
		t.Fatalf("reply: %d %v %q", status, h, body)
	}
}
